//! `selector` mode's placement: the 64-bit hash space the API server
//! ranges over (FNV-1a of an object's uid, or of its namespace), cut into
//! [`BUCKETS`] equal buckets, each bucket placed on a member by the ring's
//! rendezvous hashing, bounded so that every member holds its share of
//! buckets within one. A replica's shard is the buckets it owns, sent to
//! the server as one `shardSelector` of `shardRange`s joined by `||`
//! (KEP-5866), so its caches hold only its objects and nothing is written
//! to an object to place it.
//!
//! The gate decides with the same function: a key of this mode carries the
//! hash the server computes (`namespace/name/<16 hex digits>`), and
//! [`View::owner`](super::ring::View::owner) places it by its bucket. A
//! join moves the newcomer's share of buckets and a few more.
//!
//! Probed on the embedded v1.37.2 (`tests/tests/sharding/server_selectors.rs`): the
//! parameter is the query parameter `shardSelector`; bounds are written
//! with 16 hex digits, the end of the full range as `0x10000000000000000`;
//! ranges join with `||`; only `object.metadata.uid` and
//! `object.metadata.namespace` are offered; a list the server filtered
//! carries `metadata.shardInfo.selector`, and a server without the
//! `ShardedListAndWatch` gate ignores the parameter and answers everything.

use std::fmt;

/// How many buckets the hash space is cut into: enough that three to ten
/// members get shares within ~15% of even, few enough that a selector
/// stays a few kilobytes.
pub(crate) const BUCKETS: u64 = 128;

// A set of buckets is kept as the bits of a `u128`.
const _: () = assert!(BUCKETS <= 128);

/// Bits of the hash below a bucket's index.
const SHIFT: u32 = 64 - BUCKETS.trailing_zeros();

/// Which field of an object the server hashes (`--shard-by`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
#[non_exhaustive]
pub enum ShardKey {
    /// `object.metadata.uid`: objects spread evenly. The default.
    #[default]
    Uid,
    /// `object.metadata.namespace`: a namespace's objects stay together,
    /// for reconcilers that read their neighbours.
    Namespace,
}

impl ShardKey {
    /// The flag value: `uid` or `namespace`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShardKey::Uid => "uid",
            ShardKey::Namespace => "namespace",
        }
    }

    /// The field path a `shardRange` names.
    fn field(self) -> &'static str {
        match self {
            ShardKey::Uid => "object.metadata.uid",
            ShardKey::Namespace => "object.metadata.namespace",
        }
    }

    /// The gate key of an object: `namespace/name/<hash>`, the hash being
    /// the server's of the field this key names.
    pub(crate) fn key(self, namespace: &str, name: &str, uid: &str) -> String {
        let hashed = match self {
            ShardKey::Uid => uid,
            ShardKey::Namespace => namespace,
        };
        format!("{namespace}/{name}/{:016x}", server_hash(hashed.as_bytes()))
    }
}

impl fmt::Display for ShardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The API server's shard hash: FNV-1a, 64 bits, over the field's text.
pub(crate) fn server_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The hash a `namespace/name/<16 hex>` key carries; `None` for the keys
/// of the other modes (`namespace/name`).
fn carried_hash(key: &str) -> Option<u64> {
    let (_, rest) = key.split_once('/')?;
    let (_, hex) = rest.split_once('/')?;
    u64::from_str_radix(hex, 16).ok()
}

/// The bucket the ring places a key by: that of the server's hash a key
/// carries, or the bucket a `#<index>` key names; `None` for any other
/// key, which stands for itself.
pub(crate) fn bucket_of(key: &str) -> Option<usize> {
    let bucket = match carried_hash(key) {
        Some(hash) => hash >> SHIFT,
        None => key.strip_prefix('#')?.parse().ok()?,
    };
    (bucket < BUCKETS).then(|| usize::try_from(bucket).ok())?
}

/// The buckets of `mask` (bucket `i` as bit `i`) as sorted half-open
/// hash ranges, adjacent buckets merged.
pub(crate) fn ranges_of_buckets(mask: u128) -> Vec<(u128, u128)> {
    let width = 1u128 << SHIFT;
    let mut ranges: Vec<(u128, u128)> = Vec::new();
    for bucket in (0..u128::from(BUCKETS)).filter(|b| mask & (1 << b) != 0) {
        let (from, to) = (bucket * width, (bucket + 1) * width);
        match ranges.last_mut() {
            Some(last) if last.1 == from => last.1 = to,
            _ => ranges.push((from, to)),
        }
    }
    ranges
}

/// The `shardSelector` for `ranges` of `key`'s field; `None` when there
/// is no range (a member that owns no bucket watches nothing it needs).
pub(crate) fn selector(key: ShardKey, ranges: &[(u128, u128)]) -> Option<String> {
    let bound = |value: u128| {
        if value >= 1 << 64 {
            "0x10000000000000000".to_owned()
        } else {
            format!("0x{value:016x}")
        }
    };
    let parts: Vec<String> = ranges
        .iter()
        .map(|(from, to)| {
            format!(
                "shardRange({}, '{}', '{}')",
                key.field(),
                bound(*from),
                bound(*to)
            )
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" || "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_hash_is_fnv1a_64_of_the_text() {
        // Reference values of FNV-1a 64.
        assert_eq!(server_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(server_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(server_hash(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn keys_without_a_hash_are_placed_as_before() {
        assert_eq!(bucket_of("ns/name"), None);
        assert_eq!(bucket_of("/cluster-wide"), None);
        assert_eq!(bucket_of("ns/name/ffffffffffffffff"), Some(127));
        assert_eq!(bucket_of("ns/name/0000000000000000"), Some(0));
        assert_eq!(bucket_of("#5"), Some(5));
        assert_eq!(bucket_of("#128"), None);
    }

    #[test]
    fn selectors_write_sixteen_digit_bounds_joined_by_or() {
        let full = selector(ShardKey::Uid, &[(0, 1 << 64)]);
        assert_eq!(
            full.as_deref(),
            Some("shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')")
        );
        let two =
            selector(ShardKey::Namespace, &[(0, 1 << 57), (1 << 58, 1 << 59)]).unwrap_or_default();
        assert_eq!(two.matches(" || ").count(), 1);
        assert!(two.contains("'0x0400000000000000', '0x0800000000000000'"));
        assert_eq!(selector(ShardKey::Uid, &[]), None);
    }
}
