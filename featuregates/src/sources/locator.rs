use std::path::{Path, PathBuf};

use figment::value::Value;
use figment::{Figment, Source};

use super::provider::{ENV_METADATA, FLAG_METADATA};
use crate::Origin;

/// Turns a merged value's figment tag and key path back into an [`Origin`].
pub(crate) struct Locator<'a> {
    figment: &'a Figment,
    texts: &'a [(PathBuf, String)],
}

impl<'a> Locator<'a> {
    pub(crate) fn new(figment: &'a Figment, texts: &'a [(PathBuf, String)]) -> Self {
        Locator { figment, texts }
    }

    pub(crate) fn origin(&self, value: &Value, path: &[&str]) -> Origin {
        let Some(metadata) = self.figment.get_metadata(value.tag()) else {
            return Origin::Default;
        };
        match &metadata.source {
            Some(Source::File(file)) => Origin::File {
                path: file.clone(),
                key: super::keys::join_key(path),
                line: self.text(file).and_then(|text| locate_line(text, path)),
            },
            Some(Source::Custom(var)) if metadata.name == ENV_METADATA => {
                Origin::Env { var: var.clone() }
            }
            Some(Source::Custom(item)) if metadata.name == FLAG_METADATA => {
                Origin::Flag { item: item.clone() }
            }
            _ => Origin::Code,
        }
    }

    fn text(&self, file: &Path) -> Option<&str> {
        self.texts
            .iter()
            .rev()
            .find(|(path, _)| path == file)
            .map(|(_, text)| text.as_str())
    }
}

/// Finds the 1-based line of a key path in block-style YAML. serde_yaml
/// keeps no positions for valid documents, so this follows indentation.
/// When the path continues inside flow style (`{a: b}`), it answers the
/// line of the deepest key it found; `None` when not even the first key is
/// at the top level.
pub(crate) fn locate_line(text: &str, path: &[&str]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let (mut from, mut parent_indent, mut deepest) = (0, None, None);
    for segment in path {
        let mut found = None;
        let mut child_indent = None;
        for (index, line) in lines.iter().enumerate().skip(from) {
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let indent = line.len() - trimmed.len();
            if parent_indent.is_some_and(|parent| indent <= parent) {
                break;
            }
            if *child_indent.get_or_insert(indent) != indent {
                continue;
            }
            if key_of(trimmed) == Some(segment) {
                found = Some(index);
                parent_indent = Some(indent);
                from = index + 1;
                break;
            }
        }
        match found {
            Some(index) => deepest = Some(index + 1),
            None => break,
        }
    }
    deepest
}

fn key_of(line: &str) -> Option<&str> {
    let (key, _) = line.split_once(':')?;
    let key = key.trim_end();
    let unquoted = key
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .or_else(|| key.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')));
    Some(unquoted.unwrap_or(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "\
featureGates:
  AllAlpha: true   # comment
strategies:
  default: strict
  resources:
    pods:
      operations:
        \"remove-finalizer\": lax
    other:
      default: update
  operations:
    status: update
";

    #[test]
    fn locate_line_follows_indentation() {
        let cases: &[(&[&str], Option<usize>)] = &[
            (&["featureGates", "AllAlpha"], Some(2)),
            (&["strategies", "default"], Some(4)),
            (
                &[
                    "strategies",
                    "resources",
                    "pods",
                    "operations",
                    "remove-finalizer",
                ],
                Some(8),
            ),
            (&["strategies", "resources", "other", "default"], Some(10)),
            (&["strategies", "resources", "pods", "default"], Some(6)),
            (&["featureGates", "default"], Some(1)),
            (&["nowhere"], None),
            (&["strategies", "operations", "status"], Some(12)),
            (&["strategies", "resources", "default"], Some(5)),
        ];
        for (path, line) in cases {
            assert_eq!(locate_line(YAML, path), *line, "{path:?}");
        }
    }
}
