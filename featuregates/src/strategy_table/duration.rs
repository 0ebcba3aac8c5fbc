use std::time::Duration;

/// Parses a Go-style single-unit duration: `10ms`, `1.5s`, `250us`, `2m`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let seconds_per_unit = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "duration `{text}` needs a unit: ns, us, ms, s, m or h"
            ));
        }
    };
    let number: f64 = number
        .parse()
        .map_err(|_| format!("duration `{text}` is not a number followed by a unit"))?;
    Duration::try_from_secs_f64(number * seconds_per_unit)
        .map_err(|_| format!("duration `{text}` is out of range"))
}

/// Formats a duration in the largest unit that represents it exactly.
pub(crate) fn format_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    match nanos {
        0 => "0s".to_owned(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_duration_accepts_go_units() {
        let cases = [
            ("10ms", Duration::from_millis(10)),
            ("1.5s", Duration::from_millis(1500)),
            ("250us", Duration::from_micros(250)),
            ("2m", Duration::from_secs(120)),
            ("7ns", Duration::from_nanos(7)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
            assert_eq!(
                parse_duration(&format_duration(expected)),
                Ok(expected),
                "{text} round trip"
            );
        }
    }

    #[test]
    fn parse_duration_rejects_garbage() {
        for text in [
            "10",
            "ms",
            "1.2.3s",
            "10 parsecs",
            "1e400s",
            "99999999999999999999999h",
        ] {
            assert!(parse_duration(text).is_err(), "{text}");
        }
    }
}
