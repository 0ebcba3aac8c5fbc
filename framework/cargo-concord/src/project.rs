//! The `PROJECT` file: what `cargo concord` made in a directory, so later
//! commands know the project's name, domain and kinds, and refuse
//! directories they did not make.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Error;

/// The file name, at the project root.
pub(crate) const FILE: &str = "PROJECT";
/// The layout this version of `cargo concord` writes and understands.
const LAYOUT: &str = "concord/v1";

/// A project made by `cargo concord init`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Project {
    pub(crate) layout: String,
    pub(crate) project_name: String,
    pub(crate) domain: String,
    pub(crate) namespace: String,
    #[serde(default)]
    pub(crate) resources: Vec<Resource>,
}

/// A kind added by `create api`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Resource {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) kind: String,
    pub(crate) plural: String,
    pub(crate) namespaced: bool,
    pub(crate) controller: bool,
}

impl Resource {
    /// The settings a second `create api` must repeat, for messages.
    pub(crate) fn describe(&self) -> String {
        format!(
            "group {}, version {}, {}, controller {}",
            self.group,
            self.version,
            if self.namespaced {
                "namespaced"
            } else {
                "cluster-scoped"
            },
            self.controller
        )
    }
}

impl Project {
    /// A new project with no kinds.
    pub(crate) fn new(name: &str, domain: &str) -> Self {
        Project {
            layout: LAYOUT.into(),
            project_name: name.into(),
            domain: domain.into(),
            namespace: format!("{name}-system"),
            resources: Vec::new(),
        }
    }

    /// Reads the `PROJECT` file of `dir`.
    ///
    /// # Errors
    ///
    /// [`Error::NotAProject`] without one, [`Error::BadProject`] when it
    /// cannot be parsed or has another layout.
    pub(crate) fn load(dir: &Path) -> Result<Self, Error> {
        let path = dir.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotAProject(dir.to_path_buf()));
            }
            Err(e) => return Err(Error::io("reading", &path)(e)),
        };
        let bad = |message: String| Error::BadProject {
            path: path.clone(),
            message,
        };
        let project: Project = serde_yaml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if project.layout != LAYOUT {
            return Err(bad(format!(
                "layout {:?} is not {LAYOUT:?}, the one this cargo-concord understands",
                project.layout
            )));
        }
        Ok(project)
    }

    /// The file's text.
    pub(crate) fn render(&self) -> Result<String, Error> {
        let body = serde_yaml::to_string(self).map_err(|source| Error::Serialize {
            what: "PROJECT",
            source,
        })?;
        Ok(format!(
            "# Written by cargo concord: it marks a directory it made. Edit with care.\n{body}"
        ))
    }

    /// The kind named `kind`, if the project has it.
    pub(crate) fn resource(&self, kind: &str) -> Option<&Resource> {
        self.resources.iter().find(|r| r.kind == kind)
    }
}

/// The project directory: `dir`, or the nearest ancestor of the current
/// directory holding a `PROJECT` file.
///
/// # Errors
///
/// [`Error::NotAProject`] when none is found.
pub(crate) fn find_root(dir: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(dir) = dir {
        return Ok(dir.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(Error::io("reading", "the current directory"))?;
    cwd.ancestors()
        .find(|d| d.join(FILE).is_file())
        .map(Path::to_path_buf)
        .ok_or(Error::NotAProject(cwd))
}
