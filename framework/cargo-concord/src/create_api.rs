//! `cargo concord create api`: a kind, its controller, its registration.

use std::path::{Path, PathBuf};

use crate::cli::CreateApiArgs;
use crate::files::{FileSet, render};
use crate::markers;
use crate::project::{self, Project, Resource};
use crate::{Error, names};

const TYPES: &str = include_str!("../templates/api/types.rs");
const CONTROLLER: &str = include_str!("../templates/api/controller.rs");
const SAMPLE: &str = include_str!("../templates/api/sample.yaml");
const MAIN: &str = "src/main.rs";

/// Rust keywords and the modules a project already has, which cannot name a kind's module.
const RESERVED: &[&str] = &[
    "as", "async", "await", "box", "break", "const", "continue", "crate", "dyn", "else", "enum",
    "extern", "false", "final", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "macro",
    "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return", "self", "static",
    "struct", "super", "trait", "true", "try", "type", "typeof", "unsafe", "unsized", "use",
    "virtual", "where", "while", "yield", "main", "dev",
];

/// Adds the kind of `args` to its project, and returns the files changed
/// (relative to the project), none when it was already there.
///
/// # Errors
///
/// [`Error::InvalidName`], [`Error::NotAProject`], [`Error::KindConflict`]
/// when the kind exists with other settings, [`Error::MissingMarker`],
/// [`Error::Io`]. Everything is checked before the first write.
pub fn create_api(args: &CreateApiArgs) -> Result<Vec<PathBuf>, Error> {
    names::check_label("--group", &args.group)?;
    names::check_version(&args.version)?;
    names::check_kind(&args.kind)?;
    let module = names::module_of(&args.kind);
    if RESERVED.contains(&module.as_str()) {
        return Err(Error::InvalidName {
            what: "--kind",
            value: args.kind.clone(),
            rule: format!("its module name {module:?} is reserved"),
        });
    }
    let root = project::find_root(args.project.project_dir.as_deref())?;
    let mut project = Project::load(&root)?;
    let group = if project.domain.is_empty() {
        args.group.clone()
    } else {
        format!("{}.{}", args.group, project.domain)
    };
    names::check_subdomain("--group", &group)?;
    let resource = Resource {
        group,
        version: args.version.clone(),
        kind: args.kind.clone(),
        plural: names::plural_of(&args.kind),
        namespaced: !args.cluster_scoped,
        controller: args.controller,
    };
    match project.resource(&resource.kind) {
        Some(existing) if *existing != resource => {
            return Err(Error::KindConflict {
                kind: resource.kind.clone(),
                existing: existing.describe(),
                requested: resource.describe(),
            });
        }
        Some(_) => {}
        None => project.resources.push(resource.clone()),
    }

    let mut files = FileSet::default();
    let module_file = format!("src/{module}.rs");
    add_if_missing(&mut files, &root, &module_file, || source(&resource));
    if resource.controller {
        let lower = resource.kind.to_ascii_lowercase();
        let sample = format!(
            "config/samples/{}_{}_{lower}.yaml",
            resource.group, resource.version
        );
        add_if_missing(&mut files, &root, &sample, || {
            render(SAMPLE, &values(&resource, &lower))
        });
    }
    let main_path = root.join(MAIN);
    let main = std::fs::read_to_string(&main_path).map_err(Error::io("reading", &main_path))?;
    files.add(MAIN, register(&main, &main_path, &module, &resource)?);
    files.add(project::FILE, project.render()?);
    files.update(&root)
}

fn add_if_missing(files: &mut FileSet, root: &Path, path: &str, text: impl FnOnce() -> String) {
    // An existing file is the author's now: never overwritten.
    if !root.join(path).exists() {
        files.add(path, text());
    }
}

fn values<'a>(resource: &'a Resource, lower: &'a str) -> [(&'static str, &'a str); 6] {
    [
        ("group", resource.group.as_str()),
        ("version", resource.version.as_str()),
        ("kind", resource.kind.as_str()),
        ("plural", resource.plural.as_str()),
        ("lower", lower),
        (
            "namespaced",
            if resource.namespaced {
                "\n    namespaced,"
            } else {
                ""
            },
        ),
    ]
}

/// `src/<module>.rs`: the type, and the controller unless disabled.
fn source(resource: &Resource) -> String {
    let lower = resource.kind.to_ascii_lowercase();
    let mut values = values(resource, &lower).to_vec();
    values.push((
        "controller_note",
        if resource.controller {
            " and its controller"
        } else {
            ""
        },
    ));
    let kind = &resource.kind;
    let api = if resource.namespaced {
        format!(
            "    let api: Api<{kind}> = match namespace {{\n        Some(namespace) => Api::namespaced(client, namespace),\n        None => Api::all(client),\n    }};"
        )
    } else {
        format!(
            "    // Cluster-scoped: one controller sees every {kind}, whatever --namespace says.\n    let _ = namespace;\n    let api: Api<{kind}> = Api::all(client);"
        )
    };
    values.push(("api", &api));
    values.push((
        "namespace_note",
        if resource.namespaced {
            ", watching `namespace` or, without one, every namespace"
        } else {
            ""
        },
    ));
    let mut text = render(TYPES, &values);
    if resource.controller {
        text.push_str(&render(CONTROLLER, &values));
    }
    text
}

/// `src/main.rs` with the kind registered at the scaffold markers.
fn register(main: &str, path: &Path, module: &str, resource: &Resource) -> Result<String, Error> {
    let kind = &resource.kind;
    let mut text = markers::insert(main, path, "modules", &[format!("mod {module};")])?;
    text = markers::insert(
        &text,
        path,
        "crds",
        &[format!(
            "<{module}::{kind} as kube::CustomResourceExt>::crd(),"
        )],
    )?;
    let permissions = if resource.namespaced {
        "permissions"
    } else {
        "cluster-permissions"
    };
    // Checked even when not edited, so a broken main.rs is reported now.
    for marker in ["permissions", "cluster-permissions", "controllers"] {
        markers::insert(&text, path, marker, &[])?;
    }
    if resource.controller {
        text = markers::insert(
            &text,
            path,
            permissions,
            &[
                format!(".watches::<{module}::{kind}>()"),
                format!(".writes::<{module}::{kind}>({module}::WRITES)"),
            ],
        )?;
        text = markers::insert(
            &text,
            path,
            "controllers",
            &[format!("{module}::add_controller(manager, namespace)?;")],
        )?;
    }
    Ok(text)
}
