//! The naming rules of Kubernetes and Rust that `init` and `create api`
//! check before writing anything.

use crate::Error;

/// A DNS-1123 label: at most 63 lowercase letters, digits and `-`,
/// starting and ending with a letter or digit.
pub(crate) fn check_label(what: &'static str, value: &str) -> Result<(), Error> {
    let fail = |rule: &str| {
        Err(Error::InvalidName {
            what,
            value: value.to_owned(),
            rule: rule.to_owned(),
        })
    };
    if value.is_empty() || value.len() > 63 {
        return fail("a DNS-1123 label has 1 to 63 characters");
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return fail("a DNS-1123 label holds only lowercase letters, digits and '-'");
    }
    if value.starts_with('-') || value.ends_with('-') {
        return fail("a DNS-1123 label starts and ends with a letter or digit");
    }
    Ok(())
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub(crate) fn check_subdomain(what: &'static str, value: &str) -> Result<(), Error> {
    if value.len() > 253 {
        return Err(Error::InvalidName {
            what,
            value: value.to_owned(),
            rule: "a DNS-1123 subdomain has at most 253 characters".into(),
        });
    }
    for label in value.split('.') {
        check_label(what, label).map_err(|_| Error::InvalidName {
            what,
            value: value.to_owned(),
            rule: format!(
                "a DNS-1123 subdomain is dot-separated labels of lowercase letters, digits and '-' ({label:?} is not one)"
            ),
        })?;
    }
    Ok(())
}

/// A project name: a DNS-1123 label (it names the namespace, Role and
/// Deployment) that is also a Rust package name.
pub(crate) fn check_project_name(value: &str) -> Result<(), Error> {
    check_label("NAME", value)?;
    if !value.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(Error::InvalidName {
            what: "NAME",
            value: value.to_owned(),
            rule: "a project name starts with a letter (it is a Rust package name)".into(),
        });
    }
    if value.len() > 50 {
        return Err(Error::InvalidName {
            what: "NAME",
            value: value.to_owned(),
            rule: "a project name has at most 50 characters (its namespace adds \"-system\")"
                .into(),
        });
    }
    Ok(())
}

/// An API version: `v` and a number, optionally `alpha` or `beta` and a
/// number (`v1`, `v2beta1`, `v1alpha3`).
pub(crate) fn check_version(value: &str) -> Result<(), Error> {
    let fail = || {
        Err(Error::InvalidName {
            what: "--version",
            value: value.to_owned(),
            rule: "a Kubernetes API version looks like v1, v1alpha1 or v2beta3".into(),
        })
    };
    let Some(rest) = value.strip_prefix('v') else {
        return fail();
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return fail();
    }
    let tail = &rest[digits..];
    if tail.is_empty() {
        return Ok(());
    }
    let number = tail
        .strip_prefix("alpha")
        .or_else(|| tail.strip_prefix("beta"));
    match number {
        Some(n)
            if !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Ok(())
        }
        _ => fail(),
    }
}

/// A kind: CamelCase, an ASCII uppercase letter then letters and digits.
pub(crate) fn check_kind(value: &str) -> Result<(), Error> {
    let ok = value.len() <= 63
        && value.starts_with(|c: char| c.is_ascii_uppercase())
        && value.chars().all(|c| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidName {
            what: "--kind",
            value: value.to_owned(),
            rule: "a kind is CamelCase: an uppercase letter, then letters and digits (Frigate, DockYard)"
                .into(),
        })
    }
}

/// The Rust module of a kind: `DockYard` → `dock_yard`.
pub(crate) fn module_of(kind: &str) -> String {
    let mut module = String::new();
    let chars: Vec<char> = kind.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let after_lower = i > 0 && !chars[i - 1].is_ascii_uppercase();
            let before_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if i > 0 && (after_lower || before_lower) {
                module.push('_');
            }
            module.push(c.to_ascii_lowercase());
        } else {
            module.push(*c);
        }
    }
    module
}

/// The plural kube's `CustomResource` derive gives a kind (lowercase,
/// English rules), which names the resource in URLs, RBAC and the
/// strategy table.
pub(crate) fn plural_of(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with('z')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
    {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_follow_the_kubernetes_pattern() {
        for good in ["v1", "v2", "v1alpha1", "v2beta3", "v10"] {
            assert!(check_version(good).is_ok(), "{good}");
        }
        for bad in [
            "1",
            "v",
            "v0",
            "V1",
            "v1alpha",
            "v1beta0",
            "v1gamma1",
            "v01",
            "v1-alpha1",
        ] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kinds_are_camel_case() {
        for good in ["Frigate", "DockYard", "V1Thing"] {
            assert!(check_kind(good).is_ok(), "{good}");
        }
        for bad in ["frigate", "Dock-Yard", "Dock_Yard", "", "Ü"] {
            assert!(check_kind(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn groups_are_dns_subdomains() {
        assert!(check_subdomain("--group", "ships.example.com").is_ok());
        for bad in [
            "Ships",
            "ships_",
            "-ships",
            "ships..example",
            "ships.example.com-",
        ] {
            assert!(check_subdomain("--group", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn project_names_are_labels_and_package_names() {
        assert!(check_project_name("demo-operator").is_ok());
        for bad in ["Demo", "1demo", "demo_op", "-demo", ""] {
            assert!(check_project_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn modules_and_plurals() {
        assert_eq!(module_of("Frigate"), "frigate");
        assert_eq!(module_of("DockYard"), "dock_yard");
        assert_eq!(module_of("HTTPRoute"), "http_route");
        assert_eq!(plural_of("Frigate"), "frigates");
        assert_eq!(plural_of("Policy"), "policies");
        assert_eq!(plural_of("Gateway"), "gateways");
        assert_eq!(plural_of("Class"), "classes");
    }
}
