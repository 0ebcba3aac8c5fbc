//! What a compact cache keeps beside each object's JSON, packed, so that
//! the questions asked of every object read no JSON:
//!
//! - its uid, in 16 bytes when it is the text the API server writes (a
//!   UUID in lowercase hex with four hyphens): listing the identities of
//!   every cached object (each sharding wake, the owned-keys gauge);
//! - its `resourceVersion`, in 8 bytes when it is the text etcd's API
//!   server writes (a decimal number without leading zeros): whether the
//!   cache shows the manager's own last write, asked before each
//!   reconcile.
//!
//! Any other text, or none, is read from the object's JSON as before: what
//! comes back is always the stored text, byte for byte.

use std::num::NonZeroU64;

/// An object's uid, packed if it is a lowercase hyphenated UUID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PackedUid(Option<[u8; 16]>);

/// Where the hyphens of a UUID's 36 characters are.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

impl PackedUid {
    /// `uid` packed; unpacked (read from the JSON) unless it is a
    /// lowercase hyphenated UUID.
    pub(super) fn of(uid: Option<&str>) -> Self {
        PackedUid(uid.and_then(pack))
    }

    /// The uid's text, when it was packed.
    pub(super) fn text(self) -> Option<String> {
        self.0.map(unpack)
    }
}

/// An object's `resourceVersion`, packed if it is a decimal number from 1
/// to `u64::MAX` written without leading zeros. The version is opaque to
/// clients; the packing only keeps its text, and any text it cannot keep
/// exactly is left to the JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PackedVersion(Option<NonZeroU64>);

impl PackedVersion {
    /// `version` packed; unpacked (read from the JSON) unless it is a
    /// decimal number that prints back as the same text.
    pub(super) fn of(version: Option<&str>) -> Self {
        let packed = version
            .filter(|v| v.bytes().all(|b| b.is_ascii_digit()) && !v.starts_with('0'))
            .and_then(|v| v.parse::<u64>().ok())
            .and_then(NonZeroU64::new);
        PackedVersion(packed)
    }

    /// The version's text, when it was packed.
    pub(super) fn text(self) -> Option<String> {
        self.0.map(|n| n.to_string())
    }
}

fn pack(text: &str) -> Option<[u8; 16]> {
    let bytes = text.as_bytes();
    if bytes.len() != 36 || HYPHENS.iter().any(|&i| bytes[i] != b'-') {
        return None;
    }
    let mut digits = bytes
        .iter()
        .enumerate()
        .filter(|(i, _)| !HYPHENS.contains(i))
        .map(|(_, b)| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        });
    let mut packed = [0u8; 16];
    for byte in &mut packed {
        *byte = digits.next()?? << 4 | digits.next()??;
    }
    Some(packed)
}

fn unpack(packed: [u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(36);
    for (i, byte) in packed.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_uid_round_trips_and_anything_else_is_left_to_the_json() {
        let uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        assert_eq!(PackedUid::of(Some(uid)).text().as_deref(), Some(uid));
        for other in [
            "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0",
            "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1é",
            "uid-a",
            "",
        ] {
            assert_eq!(PackedUid::of(Some(other)), PackedUid(None), "{other:?}");
        }
        assert_eq!(PackedUid::of(None), PackedUid(None));
    }

    #[test]
    fn a_decimal_version_round_trips_and_anything_else_is_left_to_the_json() {
        for version in ["1", "7", "184467", "18446744073709551615"] {
            assert_eq!(
                PackedVersion::of(Some(version)).text().as_deref(),
                Some(version)
            );
        }
        for other in [
            "0",
            "007",
            "18446744073709551616",
            "+7",
            "-7",
            "7 ",
            "12a",
            "１２",
            "",
        ] {
            assert_eq!(
                PackedVersion::of(Some(other)),
                PackedVersion(None),
                "{other:?}"
            );
        }
        assert_eq!(PackedVersion::of(None), PackedVersion(None));
    }
}
