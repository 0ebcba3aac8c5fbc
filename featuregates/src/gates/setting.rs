use crate::{Origin, Problem};

/// One `name=value` request for a gate, before it is checked against the
/// registry.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GateSetting {
    pub(crate) name: String,
    pub(crate) value: SettingValue,
    pub(crate) origin: Origin,
}

/// A gate value as found in a source: a boolean, or what was there instead.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SettingValue {
    Bool(bool),
    /// Raw text from a flag or variable that is not a boolean.
    Text(String),
    /// A description of some other value, for the error message.
    Other(String),
}

/// Parses a boolean the way Go's `strconv.ParseBool` does, since
/// `--feature-gates` values come from Kubernetes habits.
pub(crate) fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Splits `A=true,B=false` into settings, like component-base's `Set`:
/// empty items are skipped, names and values are trimmed, and an item
/// without `=` is a problem.
pub(crate) fn parse_gate_list(
    text: &str,
    origin_of: impl Fn(&str) -> Origin,
    problems: &mut Vec<Problem>,
) -> Vec<GateSetting> {
    let mut settings = Vec::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let origin = origin_of(item);
        match item.split_once('=') {
            None => problems.push(Problem::MissingGateValue {
                name: item.to_owned(),
                origin,
            }),
            Some((name, value)) => {
                let value = value.trim();
                let value = match parse_bool(value) {
                    Some(b) => SettingValue::Bool(b),
                    None => SettingValue::Text(value.to_owned()),
                };
                settings.push(GateSetting {
                    name: name.trim().to_owned(),
                    value,
                    origin,
                });
            }
        }
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag(item: &str) -> Origin {
        Origin::Flag {
            item: item.to_owned(),
        }
    }

    #[test]
    fn parse_gate_list_accepts_go_booleans_and_skips_empty_items() {
        let mut problems = Vec::new();
        let settings = parse_gate_list(" A=true,, B = F ,C=1,", flag, &mut problems);
        assert!(problems.is_empty());
        let values: Vec<_> = settings
            .iter()
            .map(|s| (s.name.as_str(), s.value.clone()))
            .collect();
        assert_eq!(
            values,
            [
                ("A", SettingValue::Bool(true)),
                ("B", SettingValue::Bool(false)),
                ("C", SettingValue::Bool(true))
            ]
        );
        assert_eq!(settings[1].origin, flag("B = F"));
    }

    #[test]
    fn parse_gate_list_reports_missing_values_and_keeps_non_booleans() {
        let mut problems = Vec::new();
        let settings = parse_gate_list("A,B=yes", flag, &mut problems);
        assert_eq!(
            problems,
            [Problem::MissingGateValue {
                name: "A".into(),
                origin: flag("A")
            }]
        );
        assert_eq!(settings[0].value, SettingValue::Text("yes".into()));
    }
}
