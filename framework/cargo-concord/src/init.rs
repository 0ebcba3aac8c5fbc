//! `cargo concord init`: a new operator project.

use std::path::PathBuf;

use crate::cli::InitArgs;
use crate::files::{FileSet, render};
use crate::project::{self, Project};
use crate::source::ConcordSource;
use crate::{Error, deploy, names};

/// What `init` made.
#[derive(Debug)]
pub struct Made {
    /// The project directory.
    pub dir: PathBuf,
    /// The files written, relative to `dir`, sorted.
    pub files: Vec<PathBuf>,
    /// Where the project gets concord from.
    pub source: ConcordSource,
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
        ".dockerignore",
        include_str!("../templates/init/dockerignore"),
    ),
    (".gitignore", include_str!("../templates/init/gitignore")),
    ("README.md", include_str!("../templates/init/README.md")),
];

const CARGO_TOML: &str = include_str!("../templates/init/Cargo.toml.tmpl");
const DOCKERFILE: &str = include_str!("../templates/init/Dockerfile");

/// Creates the project of `args`.
///
/// # Errors
///
/// [`Error::InvalidName`] for a bad name, domain, `--concord-git` or
/// `--concord-version`, [`Error::NotAConcordCheckout`],
/// [`Error::AlreadyExists`] when the directory exists, [`Error::Io`]. On
/// any error nothing is left behind.
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
    let source = ConcordSource::of(args)?;
    let deps = source.dependencies();
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
    files.add("Dockerfile", dockerfile(&source, &args.name));
    if let Some(lock) = source.lock_file()? {
        files.add("Cargo.lock", lock);
    }
    for (path, template) in TEMPLATES {
        files.add(*path, render(template, &values));
    }
    let config = render(include_str!("../templates/init/concord.yaml"), &values);
    let bundle = deploy::initial(&project, &config)?;
    crate::generate::add_deploy(&mut files, &bundle)?;
    files.add(project::FILE, project.render()?);
    files.create_dir(&dir)?;
    Ok(Made {
        dir,
        files: files.paths(),
        source,
    })
}

/// The `Dockerfile`: a project on a checkout brings it in as the named
/// build context `concord`, copied to the path its `Cargo.toml` names.
fn dockerfile(source: &ConcordSource, name: &str) -> String {
    let (command, copy) = match source {
        ConcordSource::Checkout(root) => {
            let root = root.display();
            (
                format!(
                    "#   docker build --build-context concord={root} -t {name}:0.1.0 .\n\
                     # This project depends on the concord checkout at {root}: the build\n\
                     # context `concord` brings it in, at the path Cargo.toml names."
                ),
                format!("COPY --from=concord . {root}\n"),
            )
        }
        ConcordSource::Git(_) | ConcordSource::Registry(_) => {
            (format!("#   docker build -t {name}:0.1.0 ."), String::new())
        }
    };
    render(
        DOCKERFILE,
        &[
            ("name", name),
            ("docker_build", &command),
            ("copy_concord", &copy),
        ],
    )
}
