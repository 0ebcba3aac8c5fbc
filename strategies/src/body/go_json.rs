//! JSON written as the API server's Go encoder writes it.
//!
//! kube-apiserver applies a JSON patch to its own encoding of the stored
//! object and compares each `test` value's bytes with the stored value's
//! (for strings and numbers). Go's `encoding/json` (Go 1.22 and later,
//! which every supported Kubernetes is built with) writes `<`, `>`, `&`,
//! U+2028 and U+2029 as `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029`;
//! backspace, form feed, newline, carriage return and tab as `\b`, `\f`,
//! `\n`, `\r`, `\t`; the other C0 controls as `\u00XX` in lower-case hex;
//! `"` and `\` as `\"` and `\\`; and everything else raw (DEL, C1
//! controls, non-ASCII). Floats go in `%f` form between 1e-6 and 1e21 and
//! as `1e+21`, `1e-7` outside it. A `test` of `a&b` sent as plain UTF-8,
//! or of a backspace sent as `\u0008`, therefore never matches (probed on
//! the real server by `exact_refusals::the_server_tests_values_against_gos_encoding`).
//! Every JSON patch concord sends is written this way; the bytes mean the
//! same JSON, so the values it adds or replaces are stored unchanged.

use std::io;

use serde::Serialize;
use serde_json::Value;
use serde_json::ser::{CharEscape, Formatter, Serializer};

/// `value` as the Go encoder would write it.
pub(crate) fn to_vec(value: &Value) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::new();
    let formatter = GoFormatter { ascii: false };
    value.serialize(&mut Serializer::with_formatter(&mut out, formatter))?;
    Ok(out)
}

/// `value` as [`to_vec`] writes it, with every character outside printable
/// ASCII escaped as well: the API server reads a server-side apply body as
/// YAML, which refuses raw characters such as DEL (`\u007f`) or C1
/// controls that JSON allows.
pub(crate) fn to_ascii_vec(value: &Value) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::new();
    let formatter = GoFormatter { ascii: true };
    value.serialize(&mut Serializer::with_formatter(&mut out, formatter))?;
    Ok(out)
}

/// The compact formatter with Go's string escapes and float forms.
struct GoFormatter {
    /// Whether every character outside printable ASCII is escaped too.
    ascii: bool,
}

impl Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            let escaped = match c {
                '<' => "\\u003c".to_owned(),
                '>' => "\\u003e".to_owned(),
                '&' => "\\u0026".to_owned(),
                '\u{2028}' => "\\u2028".to_owned(),
                '\u{2029}' => "\\u2029".to_owned(),
                c if self.ascii && !(' '..='~').contains(&c) => {
                    let mut units = [0u16; 2];
                    c.encode_utf16(&mut units)
                        .iter()
                        .map(|unit| format!("\\u{unit:04x}"))
                        .collect()
                }
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..at])?;
            writer.write_all(escaped.as_bytes())?;
            start = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        escape: CharEscape,
    ) -> io::Result<()> {
        let bytes: &[u8] = match escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::Solidus => b"/",
            // Go 1.22 and later; a server-side apply body (read as YAML)
            // keeps the `\u` forms every YAML reader knows.
            CharEscape::Backspace if self.ascii => b"\\u0008",
            CharEscape::FormFeed if self.ascii => b"\\u000c",
            CharEscape::Backspace => b"\\b",
            CharEscape::FormFeed => b"\\f",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::AsciiControl(byte) => {
                return write!(writer, "\\u{byte:04x}");
            }
        };
        writer.write_all(bytes)
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(go_float(value).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(writer, f64::from(value))
    }
}

/// A float as Go's `encoding/json` writes a float64: the shortest digits
/// that read back the same, in `%f` form unless it is below 1e-6 or at
/// least 1e21, then `%e` form with a signed exponent of at least two
/// digits, a leading zero dropped from a negative one (`1e-7`).
fn go_float(value: f64) -> String {
    let abs = value.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        return format!("{value}");
    }
    let shortest = format!("{value:e}");
    let Some((mantissa, exponent)) = shortest.split_once('e') else {
        return shortest;
    };
    match exponent.strip_prefix('-') {
        Some(digits) => format!("{mantissa}e-{digits}"),
        None if exponent.len() < 2 => format!("{mantissa}e+0{exponent}"),
        None => format!("{mantissa}e+{exponent}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_are_escaped_as_go_escapes_them() {
        let value = json!({"v": "a&b <c> \u{2028}\u{2029} é \u{8}\u{c}\n\t\"\\ \u{1} /"});
        let text = String::from_utf8(to_vec(&value).unwrap()).unwrap();
        assert_eq!(
            text,
            r#"{"v":"a\u0026b \u003cc\u003e \u2028\u2029 é \b\f\n\t\"\\ \u0001 /"}"#
        );
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value, "the same JSON");
    }

    #[test]
    fn every_control_character_is_escaped_as_go_escapes_it() {
        // As `encoding/json.Marshal` of Go 1.26 prints them.
        for code in 0u32..0x20 {
            let c = char::from_u32(code).unwrap();
            let go = match c {
                '\u{8}' => "\\b".to_owned(),
                '\t' => "\\t".to_owned(),
                '\n' => "\\n".to_owned(),
                '\u{c}' => "\\f".to_owned(),
                '\r' => "\\r".to_owned(),
                _ => format!("\\u{code:04x}"),
            };
            let text = String::from_utf8(to_vec(&json!(c.to_string())).unwrap()).unwrap();
            assert_eq!(text, format!("\"{go}\""), "U+{code:04X}");
        }
        let raw = "\u{7f}\u{80}\u{9f}\u{fffd}\u{feff}😀";
        let text = String::from_utf8(to_vec(&json!(raw)).unwrap()).unwrap();
        assert_eq!(text, format!("\"{raw}\""), "Go writes these raw");
    }

    #[test]
    fn apply_bodies_escape_everything_outside_printable_ascii() {
        let value = json!({"v": "a\u{7f}é😀<"});
        let text = String::from_utf8(to_ascii_vec(&value).unwrap()).unwrap();
        assert_eq!(text, r#"{"v":"a\u007f\u00e9\ud83d\ude00\u003c"}"#);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
    }

    #[test]
    fn floats_take_go_forms() {
        let cases = [
            (0.5, "0.5"),
            (2.0, "2"),
            (1e20, "100000000000000000000"),
            (2.5e21, "2.5e+21"),
            (1e-7, "1e-7"),
            (1.5e-10, "1.5e-10"),
            (0.000001, "0.000001"),
            (-3.25, "-3.25"),
            (0.0, "0"),
        ];
        for (value, go) in cases {
            assert_eq!(go_float(value), go, "{value}");
        }
    }

    #[test]
    fn integers_stay_exact() {
        let value = json!([9_007_199_254_740_993_i64, -42, u64::MAX]);
        assert_eq!(
            to_vec(&value).unwrap(),
            b"[9007199254740993,-42,18446744073709551615]"
        );
    }
}
