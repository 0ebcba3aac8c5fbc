use std::fmt;
use std::path::PathBuf;

/// Where a configuration value came from, so that errors, warnings and
/// [`explain`](crate::Config::explain) output can name the file and key, the
/// environment variable or the flag at fault.
///
/// ```
/// use concord_featuregates::Origin;
/// let origin = Origin::Env { var: "CONCORD_GATE_ALL_ALPHA".into() };
/// assert_eq!(origin.to_string(), "environment variable `CONCORD_GATE_ALL_ALPHA`");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Origin {
    /// Nobody set it: the built-in default.
    #[default]
    Default,
    /// A key of a YAML configuration file.
    File {
        /// The file as it was given to the loader.
        path: PathBuf,
        /// The dotted key path, e.g. `featureGates.AllAlpha`.
        key: String,
        /// The 1-based line of the key, when it could be found.
        line: Option<usize>,
    },
    /// An environment variable.
    Env {
        /// The variable's name.
        var: String,
    },
    /// One `name=value` item of the `--feature-gates` flag.
    Flag {
        /// The item, e.g. `AllAlpha=true`.
        item: String,
    },
    /// A program called [`FeatureRegistry::set_from_map`](crate::FeatureRegistry::set_from_map).
    Code,
    /// A test overrode the gate with `testing::override_gate` (cargo feature `testing`).
    Test,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("built-in default"),
            Origin::File {
                path,
                key,
                line: Some(line),
            } => {
                write!(f, "file `{}` line {line}, key `{key}`", path.display())
            }
            Origin::File {
                path,
                key,
                line: None,
            } => {
                write!(f, "file `{}`, key `{key}`", path.display())
            }
            Origin::Env { var } => write!(f, "environment variable `{var}`"),
            Origin::Flag { item } => write!(f, "flag `--feature-gates={item}`"),
            Origin::Code => f.write_str("set in code"),
            Origin::Test => f.write_str("test override"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_line_and_key() {
        let origin = Origin::File {
            path: "concord.yaml".into(),
            key: "featureGates.Foo".into(),
            line: Some(3),
        };
        assert_eq!(
            origin.to_string(),
            "file `concord.yaml` line 3, key `featureGates.Foo`"
        );
    }

    #[test]
    fn display_names_flag_item() {
        let origin = Origin::Flag {
            item: "Foo=maybe".into(),
        };
        assert_eq!(origin.to_string(), "flag `--feature-gates=Foo=maybe`");
    }
}
