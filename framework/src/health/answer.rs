//! A probe's answer from its named checks, as the Kubernetes components
//! write it.

/// The outcome of one named check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Line {
    pub(crate) name: String,
    /// `None` when the check passes, or why it fails.
    pub(crate) failure: Option<String>,
}

/// A probe's answer: whether every check passed, and the body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) passed: bool,
    pub(crate) body: String,
}

/// The answer for `probe` (`healthz` or `readyz`) from `lines`: `ok` when
/// every check passes and `verbose` is off, otherwise one line per check
/// and a final verdict.
pub(crate) fn answer(probe: &str, lines: &[Line], verbose: bool) -> Answer {
    let passed = lines.iter().all(|l| l.failure.is_none());
    if passed && !verbose {
        return Answer {
            passed,
            body: "ok".into(),
        };
    }
    let mut body = String::new();
    for line in lines {
        match &line.failure {
            None => body.push_str(&format!("[+]{} ok\n", line.name)),
            Some(why) => body.push_str(&format!("[-]{} {why}\n", line.name)),
        }
    }
    let verdict = if passed { "passed" } else { "failed" };
    body.push_str(&format!("{probe} check {verdict}\n"));
    Answer { passed, body }
}

/// Whether a query string asks for the verbose listing (`?verbose`,
/// `?verbose=true`, `?verbose=1`).
pub(crate) fn wants_verbose(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&').any(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            key == "verbose" && !matches!(value, "false" | "0")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, failure: Option<&str>) -> Line {
        Line {
            name: name.into(),
            failure: failure.map(str::to_owned),
        }
    }

    #[test]
    fn answer_lists_checks_when_verbose_or_failing() {
        let good = [line("ping", None), line("cache:pods", None)];
        assert_eq!(answer("readyz", &good, false).body, "ok");
        assert_eq!(
            answer("readyz", &good, true).body,
            "[+]ping ok\n[+]cache:pods ok\nreadyz check passed\n"
        );
        let bad = [line("ping", None), line("cache:pods", Some("not synced"))];
        let failed = answer("readyz", &bad, false);
        assert!(!failed.passed);
        assert_eq!(
            failed.body,
            "[+]ping ok\n[-]cache:pods not synced\nreadyz check failed\n"
        );
    }

    #[test]
    fn verbose_query_forms() {
        for (query, verbose) in [
            (None, false),
            (Some(""), false),
            (Some("verbose"), true),
            (Some("verbose=true"), true),
            (Some("verbose=1"), true),
            (Some("verbose=false"), false),
            (Some("exclude=x&verbose"), true),
            (Some("verbosely"), false),
        ] {
            assert_eq!(wants_verbose(query), verbose, "{query:?}");
        }
    }
}
