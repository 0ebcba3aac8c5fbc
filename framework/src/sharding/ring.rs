//! The assignment: rendezvous (highest random weight) hashing of object keys
//! over a set of members.
//!
//! Every member scores every key; the highest score owns it. A member that
//! joins takes over exactly the keys it now scores highest on (~1/N), and a
//! member that leaves hands each of its keys to that key's runner-up, so
//! nothing else moves. The hash is fixed here (FNV-1a, then a 64-bit
//! finalizer) rather than `std`'s, whose output may change between Rust
//! releases: two replicas built by different compilers must agree.

use std::fmt;

/// A member of the ring: the short id of one replica's membership Lease.
pub(crate) type MemberId = String;

/// A set of members, sorted and without duplicates, as a replica observed
/// or acknowledged it, and the member each bucket of `selector` mode's
/// hash space falls to (a function of the members alone).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct View {
    members: Vec<MemberId>,
    buckets: Vec<u16>,
}

impl View {
    /// A view of `members` (any order, duplicates dropped).
    pub(crate) fn new(members: impl IntoIterator<Item = MemberId>) -> Self {
        let mut members: Vec<MemberId> = members.into_iter().filter(|m| !m.is_empty()).collect();
        members.sort();
        members.dedup();
        let buckets = balanced(&members);
        View { members, buckets }
    }

    /// Parses the comma-separated form written into a Lease annotation.
    pub(crate) fn parse(text: &str) -> Self {
        View::new(text.split(',').map(|m| m.trim().to_owned()))
    }

    /// The members, sorted.
    pub(crate) fn members(&self) -> &[MemberId] {
        &self.members
    }

    /// Whether `member` is in the view.
    #[cfg(test)]
    pub(crate) fn contains(&self, member: &str) -> bool {
        self.members
            .binary_search_by(|m| m.as_str().cmp(member))
            .is_ok()
    }

    /// The member that owns `key` in this view; `None` for an empty view.
    /// A key carrying the API server's hash (`selector` mode) is placed by
    /// its bucket of the hash space, so the gate and the server's ranges
    /// agree (see [`ranges`](super::ranges)).
    pub(crate) fn owner(&self, key: &str) -> Option<&str> {
        if let Some(bucket) = super::ranges::bucket_of(key) {
            let member = *self.buckets.get(bucket)?;
            return self.members.get(usize::from(member)).map(String::as_str);
        }
        let key_hash = fnv1a(key.as_bytes(), FNV_OFFSET);
        self.members
            .iter()
            .max_by_key(|member| (score(key_hash, member), member.as_str()))
            .map(String::as_str)
    }

    /// Whether `member` owns `key` in this view.
    pub(crate) fn owns(&self, member: &str, key: &str) -> bool {
        self.owner(key) == Some(member)
    }

    /// A short fingerprint of the view, for logs.
    pub(crate) fn fingerprint(&self) -> String {
        let mut h = FNV_OFFSET;
        for m in &self.members {
            h = fnv1a(m.as_bytes(), h);
            h = fnv1a(b",", h);
        }
        format!("{:08x}", fmix64(h) >> 32)
    }
}

impl fmt::Display for View {
    /// The comma-separated form written into a Lease annotation.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.members.join(","))
    }
}

/// The member of each bucket (its index in `members`): the member scoring
/// highest on the bucket (rendezvous hashing, as for keys) among those
/// that may hold one more (⌊buckets / members⌋ each, and the remainder one
/// more each, first come), bucket by bucket in order. Plain rendezvous hashing over
/// 128 buckets leaves three members shares of 28–37% (a binomial spread);
/// the bound keeps every share within one bucket of even, and a join or a
/// leave still moves little more than the buckets it must.
fn balanced(members: &[MemberId]) -> Vec<u16> {
    let n = members.len();
    if n == 0 {
        return Vec::new();
    }
    let buckets = super::ranges::BUCKETS as usize;
    // Every member holds `floor` buckets, and `extra` of them one more.
    let (floor, extra) = (buckets / n, buckets % n);
    // Each bucket's members, best first.
    let ranked: Vec<Vec<(u64, usize)>> = (0..buckets)
        .map(|bucket| {
            let key_hash = fnv1a(format!("#{bucket}").as_bytes(), FNV_OFFSET);
            let mut scores: Vec<(u64, usize)> =
                (0..n).map(|i| (score(key_hash, &members[i]), i)).collect();
            scores.sort_unstable_by(|a, b| b.cmp(a));
            scores
        })
        .collect();
    let (mut held, mut above) = (vec![0usize; n], 0);
    let mut owner = vec![0u16; buckets];
    for (bucket, ranks) in ranked.iter().enumerate() {
        let open = |i: usize| held[i] < floor || (held[i] == floor && above < extra);
        let Some(&(_, member)) = ranks.iter().find(|(_, i)| open(*i)) else {
            continue;
        };
        held[member] += 1;
        if held[member] > floor {
            above += 1;
        }
        owner[bucket] = u16::try_from(member).unwrap_or(u16::MAX);
    }
    owner
}

/// A member id for a replica identity: 16 hex digits, valid in a Lease
/// name and as a label value.
pub(crate) fn member_id(identity: &str) -> MemberId {
    format!("{:016x}", fmix64(fnv1a(identity.as_bytes(), FNV_OFFSET)))
}

/// Eight hex digits hashed from `bytes`, stable across builds.
pub(crate) fn fingerprint(bytes: &[u8]) -> String {
    format!("{:08x}", fmix64(fnv1a(bytes, FNV_OFFSET)) >> 32)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    bytes
        .iter()
        .fold(seed, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME))
}

/// MurmurHash3's 64-bit finalizer: spreads FNV's weak low bits.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

fn score(key_hash: u64, member: &str) -> u64 {
    fmix64(fnv1a(member.as_bytes(), key_hash))
}

#[cfg(test)]
/// The buckets `member` owns in `view`, or in any of `views`, as sorted
/// half-open hash ranges, adjacent buckets merged.
pub(crate) fn ranges_of(member: &str, views: &[&View]) -> Vec<(u128, u128)> {
    super::ranges::ranges_of_buckets(buckets_of(member, views))
}

/// The buckets `member` owns in any of `views`, bucket `i` as bit `i`.
pub(crate) fn buckets_of(member: &str, views: &[&View]) -> u128 {
    (0..super::ranges::BUCKETS)
        .filter(|bucket| {
            let key = format!("#{bucket}");
            views.iter().any(|view| view.owns(member, &key))
        })
        .fold(0, |mask, bucket| mask | 1 << bucket)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> View {
        View::new((0..n).map(|i| member_id(&format!("replica-{i}"))))
    }

    #[test]
    fn every_bucket_is_in_exactly_one_members_ranges() {
        for n in 1..=7 {
            let view = members(n);
            let mut all: Vec<(u128, u128)> = view
                .members()
                .iter()
                .flat_map(|m| ranges_of(m, &[&view]))
                .collect();
            all.sort();
            assert_eq!(all.first().map(|r| r.0), Some(0));
            assert_eq!(all.last().map(|r| r.1), Some(1 << 64));
            assert!(all.windows(2).all(|w| w[0].1 == w[1].0), "{n} members");
        }
    }

    #[test]
    fn a_key_is_owned_by_the_member_whose_ranges_hold_its_hash() {
        let view = members(3);
        for i in 0..2_000 {
            let uid = format!("00000000-0000-0000-0000-{i:012}");
            let key = super::super::ranges::ShardKey::Uid.key("ns", &format!("o-{i}"), &uid);
            let hash = u128::from(super::super::ranges::server_hash(uid.as_bytes()));
            let owner = view.owner(&key).unwrap_or_default();
            let holders: Vec<&String> = view
                .members()
                .iter()
                .filter(|m| {
                    ranges_of(m, &[&view])
                        .iter()
                        .any(|(from, to)| *from <= hash && hash < *to)
                })
                .collect();
            assert_eq!(holders, [owner], "{key}");
        }
    }

    fn keys() -> Vec<String> {
        (0..10_000)
            .map(|i| format!("namespace-{}/object-{i}", i % 7))
            .collect()
    }

    // ANCHOR: distribution
    #[test]
    fn ten_thousand_keys_spread_within_15_percent_of_even() {
        let keys = keys();
        for n in 3..=10 {
            let view = members(n);
            let even = keys.len() as f64 / n as f64;
            for member in view.members() {
                let owned = keys.iter().filter(|k| view.owns(member, k)).count() as f64;
                assert!(
                    (owned - even).abs() <= 0.15 * even,
                    "{n} members: {member} owns {owned}, even is {even}"
                );
            }
        }
    }

    #[test]
    fn a_join_or_a_leave_moves_about_one_nth_of_the_keys() {
        let keys = keys();
        for n in 3..=9 {
            let before = members(n);
            let after = members(n + 1);
            let joined = &after.members()[..]
                .iter()
                .find(|m| !before.contains(m))
                .cloned()
                .unwrap_or_default();
            let moved: Vec<&String> = keys
                .iter()
                .filter(|k| before.owner(k) != after.owner(k))
                .collect();
            // Every key that moves on a join moves to the newcomer ...
            assert!(moved.iter().all(|k| after.owns(joined, k)));
            // ... and the newcomer takes ~1/(n+1) of them; a leave is the reverse.
            let share = moved.len() as f64 / keys.len() as f64;
            let expected = 1.0 / (n + 1) as f64;
            assert!(
                (share - expected).abs() <= 0.15 * expected,
                "{n} -> {} members moved {share:.3}, expected {expected:.3}",
                n + 1
            );
        }
    }
    // ANCHOR_END: distribution

    #[test]
    fn buckets_are_shared_within_one_of_even_and_a_change_moves_few() {
        let buckets = crate::sharding::ranges::BUCKETS as usize;
        let owners = |view: &View| -> Vec<String> {
            (0..buckets)
                .map(|b| view.owner(&format!("#{b}")).unwrap_or_default().to_owned())
                .collect()
        };
        for n in 1..=10 {
            let view = members(n);
            let owned = owners(&view);
            for member in view.members() {
                let held = owned.iter().filter(|o| *o == member).count();
                assert!(
                    held == buckets / n || held == buckets.div_ceil(n),
                    "{n} members: {member} holds {held} of {buckets} buckets"
                );
            }
            // A join moves the newcomer's share and at most as much again.
            let after = members(n + 1);
            let moved = owners(&after)
                .iter()
                .zip(&owned)
                .filter(|(a, b)| a != b)
                .count();
            let must = buckets / (n + 1);
            println!(
                "{n} -> {} members: {moved} buckets moved, {must} must",
                n + 1
            );
            assert!(
                moved <= 2 * must.max(1),
                "{n} -> {} members moved {moved} buckets, {must} must",
                n + 1
            );
        }
    }

    #[test]
    fn views_parse_sort_and_print_the_same_way() {
        let view = View::parse("b, a,,b");
        assert_eq!(view.members(), ["a", "b"]);
        assert_eq!(View::parse(&view.to_string()), view);
        assert_eq!(View::parse("").owner("x"), None);
        assert!(view.contains("a") && !view.contains("c"));
    }

    #[test]
    fn member_ids_are_stable_and_valid_label_values() {
        let id = member_id("host_42-abc-0");
        assert_eq!(id, member_id("host_42-abc-0"));
        assert_eq!(id.len(), 16);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
