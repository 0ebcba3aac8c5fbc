//! Writing a set of files with nothing half-written on failure: every
//! file is rendered in memory first; a new project is written into a
//! temporary directory renamed into place, and each file of an existing
//! project is written to a temporary file renamed over the old one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::Error;

/// Files to write, by path relative to the project root.
#[derive(Debug, Default)]
pub(crate) struct FileSet {
    files: BTreeMap<PathBuf, String>,
}

impl FileSet {
    pub(crate) fn add(&mut self, path: impl Into<PathBuf>, text: impl Into<String>) {
        self.files.insert(path.into(), text.into());
    }

    /// The paths, sorted.
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        self.files.keys().cloned().collect()
    }

    /// Writes a new project at `target`, which must not exist: into a
    /// sibling temporary directory first, renamed to `target` at the end.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`] or [`Error::Io`]; the temporary directory
    /// is removed and `target` not created.
    pub(crate) fn create_dir(&self, target: &Path) -> Result<(), Error> {
        if target.exists() {
            return Err(Error::AlreadyExists(target.to_path_buf()));
        }
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let staging = parent.join(format!(".{name}.concord-init-{}", std::process::id()));
        let result = self.write_all(&staging).and_then(|()| {
            if target.exists() {
                return Err(Error::AlreadyExists(target.to_path_buf()));
            }
            std::fs::rename(&staging, target).map_err(Error::io("renaming into place", target))
        });
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&staging);
        }
        result
    }

    fn write_all(&self, root: &Path) -> Result<(), Error> {
        for (relative, text) in &self.files {
            let path = root.join(relative);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
            }
            std::fs::write(&path, text).map_err(Error::io("writing", &path))?;
        }
        Ok(())
    }

    /// Writes the files that differ from what `root` holds, each through a
    /// temporary file renamed over the old one, and returns their paths.
    ///
    /// # Errors
    ///
    /// [`Error::Io`]; files written before the failing one stay written,
    /// each one whole.
    pub(crate) fn update(&self, root: &Path) -> Result<Vec<PathBuf>, Error> {
        let mut changed = Vec::new();
        for (relative, text) in &self.files {
            let path = root.join(relative);
            if std::fs::read_to_string(&path).is_ok_and(|old| old == *text) {
                continue;
            }
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
            }
            let partial = path.with_extension("concord-partial");
            std::fs::write(&partial, text).map_err(Error::io("writing", &partial))?;
            std::fs::rename(&partial, &path).map_err(Error::io("renaming into place", &path))?;
            changed.push(relative.clone());
        }
        Ok(changed)
    }
}

/// Replaces every `{{key}}` of `template` with its value.
pub(crate) fn render(template: &str, values: &[(&str, &str)]) -> String {
    let mut text = template.to_owned();
    for (key, value) in values {
        text = text.replace(&format!("{{{{{key}}}}}"), value);
    }
    text
}
