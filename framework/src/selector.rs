//! Label and field selector strings, checked before a watch is opened: the
//! API server answers a malformed selector with `400` on every list, which a
//! watcher would retry forever, so a controller with a bad selector would
//! silently see nothing.

/// Why a selector string was refused.
pub(crate) type Refusal = String;

/// `text` as a label selector (`a=b`, `a==b`, `a!=b`, `a`, `!a`,
/// `a in (x,y)`, `a notin (x,y)`, comma-separated), normalised (terms
/// trimmed and sorted) so that two spellings of one selection share a
/// watch.
pub(crate) fn label_selector(text: &str) -> Result<String, Refusal> {
    let mut terms = Vec::new();
    for term in split_terms(text)? {
        terms.push(label_term(&term)?);
    }
    normalised(terms)
}

/// `text` as a field selector (`a=b`, `a==b`, `a!=b`, comma-separated),
/// normalised as [`label_selector`] does.
pub(crate) fn field_selector(text: &str) -> Result<String, Refusal> {
    let mut terms = Vec::new();
    for term in split_terms(text)? {
        let (key, op, value) =
            split_operator(&term).ok_or_else(|| format!("`{term}` has no `=`, `==` or `!=`"))?;
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c))
        {
            return Err(format!("`{key}` is not a field path"));
        }
        if value.contains(['(', ')', ' ']) {
            return Err(format!("`{value}` is not a field value"));
        }
        terms.push(format!("{key}{op}{value}"));
    }
    normalised(terms)
}

fn normalised(mut terms: Vec<String>) -> Result<String, Refusal> {
    if terms.is_empty() {
        return Err("it selects nothing: it is empty".into());
    }
    terms.sort();
    terms.dedup();
    Ok(terms.join(","))
}

/// Top-level comma-separated terms (commas inside `( )` belong to a set).
fn split_terms(text: &str) -> Result<Vec<String>, Refusal> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("`)` without `(`")?,
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if depth != 0 {
        return Err("`(` without `)`".into());
    }
    terms.push(current);
    let terms: Vec<String> = terms.into_iter().map(|t| t.trim().to_owned()).collect();
    if terms.len() > 1 && terms.iter().any(String::is_empty) {
        return Err("an empty term between commas".into());
    }
    Ok(terms.into_iter().filter(|t| !t.is_empty()).collect())
}

fn split_operator(term: &str) -> Option<(&str, &'static str, &str)> {
    for op in ["!=", "==", "="] {
        if let Some((key, value)) = term.split_once(op) {
            return Some((key.trim(), op, value.trim()));
        }
    }
    None
}

fn label_term(term: &str) -> Result<String, Refusal> {
    if let Some(key) = term.strip_prefix('!') {
        label_key(key.trim())?;
        return Ok(format!("!{}", key.trim()));
    }
    for (word, op) in [(" notin ", "notin"), (" in ", "in")] {
        if let Some((key, set)) = term.split_once(word) {
            let key = key.trim();
            label_key(key)?;
            let set = set
                .trim()
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("the set of `{term}` is not in `( )`"))?;
            let mut values: Vec<&str> = set.split(',').map(str::trim).collect();
            for value in &values {
                label_value(value)?;
            }
            values.sort_unstable();
            values.dedup();
            return Ok(format!("{key} {op} ({})", values.join(",")));
        }
    }
    match split_operator(term) {
        Some((key, op, value)) => {
            label_key(key)?;
            label_value(value)?;
            Ok(format!("{key}{op}{value}"))
        }
        None => {
            label_key(term)?;
            Ok(term.to_owned())
        }
    }
}

/// `[prefix/]name`: the prefix a DNS subdomain, the name at most 63
/// alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
fn label_key(key: &str) -> Result<(), Refusal> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let ok = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            });
        if !ok {
            return Err(format!(
                "`{prefix}` in `{key}` is not a DNS subdomain prefix"
            ));
        }
    }
    if name.is_empty() || !is_label_name(name) {
        return Err(format!("`{key}` is not a label key"));
    }
    Ok(())
}

fn label_value(value: &str) -> Result<(), Refusal> {
    if value.is_empty() || is_label_name(value) {
        Ok(())
    } else {
        Err(format!("`{value}` is not a label value"))
    }
}

fn is_label_name(name: &str) -> bool {
    name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Whether `name` is a namespace name (a DNS label).
pub(crate) fn is_namespace_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A label selector as the API server applies it, for reads of a cache.
#[derive(Clone, Debug)]
pub(crate) struct LabelMatcher(Vec<LabelTerm>);

#[derive(Clone, Debug)]
enum LabelTerm {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

impl LabelMatcher {
    /// `text` (the syntax of [`label_selector`]); an empty text selects
    /// everything.
    pub(crate) fn parse(text: &str) -> Result<Self, Refusal> {
        if text.trim().is_empty() {
            return Ok(LabelMatcher(Vec::new()));
        }
        let normalised = label_selector(text)?;
        let mut terms = Vec::new();
        for term in split_terms(&normalised)? {
            terms.push(parse_term(&term));
        }
        Ok(LabelMatcher(terms))
    }

    /// Whether `labels` satisfy every term.
    pub(crate) fn matches(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.0.iter().all(|term| match term {
            LabelTerm::Equals(k, v) => labels.get(k) == Some(v),
            LabelTerm::NotEquals(k, v) => labels.get(k) != Some(v),
            LabelTerm::In(k, set) => labels.get(k).is_some_and(|v| set.contains(v)),
            LabelTerm::NotIn(k, set) => labels.get(k).is_none_or(|v| !set.contains(v)),
            LabelTerm::Exists(k) => labels.contains_key(k),
            LabelTerm::Absent(k) => !labels.contains_key(k),
        })
    }
}

/// One term of a normalised label selector (checked by [`label_term`]).
fn parse_term(term: &str) -> LabelTerm {
    if let Some(key) = term.strip_prefix('!') {
        return LabelTerm::Absent(key.to_owned());
    }
    for (word, negated) in [(" notin ", true), (" in ", false)] {
        if let Some((key, set)) = term.split_once(word) {
            let set = set.trim_start_matches('(').trim_end_matches(')');
            let values = set.split(',').map(str::to_owned).collect();
            return if negated {
                LabelTerm::NotIn(key.to_owned(), values)
            } else {
                LabelTerm::In(key.to_owned(), values)
            };
        }
    }
    match split_operator(term) {
        Some((key, "!=", value)) => LabelTerm::NotEquals(key.to_owned(), value.to_owned()),
        Some((key, _, value)) => LabelTerm::Equals(key.to_owned(), value.to_owned()),
        None => LabelTerm::Exists(term.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selectors_are_checked_and_normalised() {
        for (text, expected) in [
            ("app=web", Ok("app=web")),
            (" tier!=db , app=web ", Ok("app=web,tier!=db")),
            ("example.com/owner", Ok("example.com/owner")),
            ("!gone", Ok("!gone")),
            ("env in (prod, dev)", Ok("env in (dev,prod)")),
            ("env notin (a),app==x", Ok("app==x,env notin (a)")),
            ("app=", Ok("app=")),
            ("", Err(())),
            ("app=web,,x", Err(())),
            ("app=we b", Err(())),
            ("-app=web", Err(())),
            ("Bad_Prefix!/x=y", Err(())),
            ("env in prod", Err(())),
            ("env in (prod", Err(())),
            ("a=b)", Err(())),
        ] {
            let got = label_selector(text).map_err(|_| ());
            assert_eq!(
                got.as_deref(),
                expected.as_deref().map_err(|_| &()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn field_selectors_are_checked_and_normalised() {
        assert_eq!(
            field_selector("status.phase!=Failed, spec.nodeName=n1").as_deref(),
            Ok("spec.nodeName=n1,status.phase!=Failed")
        );
        assert!(field_selector("spec.nodeName").is_err());
        assert!(field_selector("spec.nodeName in (a)").is_err());
        assert!(field_selector("=x").is_err());
        assert!(field_selector(" ").is_err());
    }

    #[test]
    fn namespace_names_are_dns_labels() {
        assert!(is_namespace_name("team-a"));
        assert!(!is_namespace_name("Team"));
        assert!(!is_namespace_name(""));
        assert!(!is_namespace_name("-a"));
    }

    #[test]
    fn a_label_matcher_selects_as_the_api_server_does() {
        let labels: std::collections::BTreeMap<String, String> = [("app", "web"), ("env", "b")]
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        for (selector, selects) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("env in (a,b)", true),
            ("env notin (a,b)", false),
            ("tier notin (a)", true),
            ("app", true),
            ("!app", false),
            ("!tier", true),
            ("app=web,env in (c)", false),
        ] {
            let matcher = LabelMatcher::parse(selector).unwrap();
            assert_eq!(matcher.matches(&labels), selects, "{selector}");
        }
        assert!(LabelMatcher::parse("app in (").is_err());
    }
}
