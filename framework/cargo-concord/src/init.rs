//! `cargo concord init`: a new operator project.

use std::path::{Path, PathBuf};

use crate::cli::InitArgs;
use crate::files::{FileSet, render};
use crate::project::{self, Project};
use crate::{Error, deploy, names};

/// What `init` made.
#[derive(Debug)]
pub struct Made {
    /// The project directory.
    pub dir: PathBuf,
    /// The files written, relative to `dir`, sorted.
    pub files: Vec<PathBuf>,
}

const TEMPLATES: &[(&str, &str)] = &[
    ("src/main.rs", include_str!("../templates/init/main.rs")),
    ("src/lib.rs", include_str!("../templates/init/lib.rs")),
    ("src/dev.rs", include_str!("../templates/init/dev.rs")),
    (
        "tests/operator.rs",
        include_str!("../templates/init/operator_test.rs"),
    ),
    (
        "config/concord.yaml",
        include_str!("../templates/init/concord.yaml"),
    ),
    (
        "deploy/namespace.yaml",
        include_str!("../templates/init/namespace.yaml"),
    ),
    (
        "deploy/serviceaccount.yaml",
        include_str!("../templates/init/serviceaccount.yaml"),
    ),
    (
        "deploy/rolebinding.yaml",
        include_str!("../templates/init/rolebinding.yaml"),
    ),
    (
        "deploy/deployment.yaml",
        include_str!("../templates/init/deployment.yaml"),
    ),
    ("Dockerfile", include_str!("../templates/init/Dockerfile")),
    (
        ".dockerignore",
        include_str!("../templates/init/dockerignore"),
    ),
    (".gitignore", include_str!("../templates/init/gitignore")),
    ("README.md", include_str!("../templates/init/README.md")),
];

const CARGO_TOML: &str = include_str!("../templates/init/Cargo.toml.tmpl");

/// Creates the project of `args`.
///
/// # Errors
///
/// [`Error::InvalidName`] for a bad name or domain,
/// [`Error::NotAConcordCheckout`], [`Error::AlreadyExists`] when the
/// directory exists, [`Error::Io`]. On any error nothing is left behind.
pub fn init(args: &InitArgs) -> Result<Made, Error> {
    names::check_project_name(&args.name)?;
    names::check_subdomain("--domain", &args.domain)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.exists() {
        return Err(Error::AlreadyExists(dir));
    }
    let deps = dependencies(args.concord_path.as_deref())?;
    let project = Project::new(&args.name, &args.domain);
    let krate = args.name.replace('-', "_");
    let values = [
        ("name", args.name.as_str()),
        ("crate", krate.as_str()),
        ("namespace", project.namespace.as_str()),
        ("domain", args.domain.as_str()),
        ("deps", deps.as_str()),
    ];
    let mut files = FileSet::default();
    files.add("Cargo.toml", render(CARGO_TOML, &values));
    for (path, template) in TEMPLATES {
        files.add(*path, render(template, &values));
    }
    let config = render(include_str!("../templates/init/concord.yaml"), &values);
    files.add(
        "deploy/configmap.yaml",
        deploy::configmap(&project, &config)?,
    );
    files.add("deploy/rbac.yaml", deploy::initial_rbac(&project)?);
    files.add("deploy/kustomization.yaml", deploy::kustomization(false));
    files.add(project::FILE, project.render()?);
    files.create_dir(&dir)?;
    Ok(Made {
        dir,
        files: files.paths(),
    })
}

/// The `[dependencies]` lines naming concord: the published crates, or a
/// local checkout.
fn dependencies(concord_path: Option<&Path>) -> Result<String, Error> {
    let version = env!("CARGO_PKG_VERSION");
    let Some(path) = concord_path else {
        return Ok(format!(
            "kube-concord = \"{version}\"\nkube-concord-testenv = \"{version}\""
        ));
    };
    let root = path
        .canonicalize()
        .map_err(|_| Error::NotAConcordCheckout(path.to_path_buf()))?;
    let manifest = std::fs::read_to_string(root.join("framework/Cargo.toml")).unwrap_or_default();
    if !manifest.contains("name = \"kube-concord\"") {
        return Err(Error::NotAConcordCheckout(path.to_path_buf()));
    }
    let framework = root.join("framework");
    let testenv = root.join("tests/testenv");
    Ok(format!(
        "kube-concord = {{ path = {:?} }}\nkube-concord-testenv = {{ path = {:?} }}",
        framework.display().to_string(),
        testenv.display().to_string()
    ))
}
