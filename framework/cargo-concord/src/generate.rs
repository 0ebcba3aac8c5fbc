//! `cargo concord generate` and `explain`: they run the project's own
//! binary, which knows its Rust types and strategy table, as kubebuilder's
//! controller-gen reads the project's Go types.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cli::{ExplainArgs, ProjectArgs};
use crate::files::FileSet;
use crate::project::{self, Project};
use crate::{Error, deploy};

/// Writes the generated files of `deploy/` (the kustomize base) and
/// `deploy/chart/<project>/` (the Helm chart), both rendered from one
/// [`deploy::Bundle`], and returns those that changed.
///
/// # Errors
///
/// [`Error::NotAProject`], [`Error::ProjectBinary`] when the project does
/// not build or its binary fails, [`Error::BadOutput`] and
/// [`Error::BadManifest`] when it prints something else than manifests,
/// [`Error::Io`].
/// Every file is rendered before the first is written.
pub fn generate(args: &ProjectArgs) -> Result<Vec<PathBuf>, Error> {
    let root = project::find_root(args.project_dir.as_deref())?;
    let project = Project::load(&root)?;
    let crds = run_binary(&root, &["--print-crds"], true)?;
    let rbac = run_binary(
        &root,
        &[
            "--print-rbac",
            "--namespace",
            &project.namespace,
            "--config",
            "config/concord.yaml",
        ],
        true,
    )?;
    let config_path = root.join("config/concord.yaml");
    let config =
        std::fs::read_to_string(&config_path).map_err(Error::io("reading", &config_path))?;
    let bundle = deploy::Bundle::new(&project.project_name, &project.namespace)
        .with_config(config)
        .with_crds_yaml(&crds, "cargo run -- --print-crds")?
        .with_rbac_yaml(&rbac, "cargo run -- --print-rbac")?;
    let mut files = FileSet::default();
    add_deploy(&mut files, &bundle)?;
    files.update(&root)
}

/// Adds the files of `bundle` under `deploy/`.
pub(crate) fn add_deploy(files: &mut FileSet, bundle: &deploy::Bundle) -> Result<(), Error> {
    for (path, text) in bundle.files()? {
        files.add(format!("deploy/{path}"), text);
    }
    Ok(())
}

/// Prints the effective gates and strategy table of the project.
///
/// # Errors
///
/// As [`generate`].
pub fn explain(args: &ExplainArgs) -> Result<(), Error> {
    let root = project::find_root(args.project.project_dir.as_deref())?;
    Project::load(&root)?;
    let mut flags = vec![if args.yaml {
        "--explain-yaml"
    } else {
        "--explain"
    }];
    flags.extend(args.operator_args.iter().map(String::as_str));
    print!("{}", run_binary(&root, &flags, args.yaml)?);
    Ok(())
}

/// `cargo run --quiet -- FLAGS` in `root`, checking the output is YAML
/// when `yaml` is set.
fn run_binary(root: &Path, flags: &[&str], yaml: bool) -> Result<String, Error> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let command = format!("cargo run --quiet -- {}", flags.join(" "));
    let output = Command::new(cargo)
        .args(["run", "--quiet", "--"])
        .args(flags)
        .current_dir(root)
        .stdin(Stdio::null())
        .output()
        .map_err(Error::io("running cargo in", root))?;
    if !output.status.success() {
        return Err(Error::ProjectBinary {
            command,
            dir: root.to_path_buf(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !yaml {
        return Ok(text);
    }
    for document in serde_yaml::Deserializer::from_str(&text) {
        serde::Deserialize::deserialize(document)
            .map(|_: serde_yaml::Value| ())
            .map_err(|source| Error::BadOutput {
                command: command.clone(),
                source,
            })?;
    }
    Ok(text)
}
