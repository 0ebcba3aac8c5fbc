//! A compact cache keeps each object's uid beside its JSON, packed into
//! 16 bytes when it is the text the API server writes (a UUID in lowercase
//! hex with four hyphens), so listing the identities of every cached
//! object (each sharding wake, the owned-keys gauge) reads no JSON. Any
//! other text, or none, is read from the object's JSON as before: what
//! comes back is always the stored text, byte for byte.

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
}
