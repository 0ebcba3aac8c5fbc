//! How another Lease in the namespace relates to this replica's ring: a
//! member, a replica of another configuration under our ring's name (one
//! that may watch our objects, or one that cannot), or another ring.

use std::collections::HashSet;

use k8s_openapi::api::coordination::v1::Lease;

use crate::sharding::config::RingConfig;
use crate::sharding::names::{CONFIG_ANNOTATION, RING_LABEL, V1_MANAGER_LABEL, sanitize};

/// How a Lease in the namespace relates to this replica's ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kinship {
    /// A member of our configuration (or our own Lease).
    Member,
    /// Our ring's name, another configuration, objects that may be ours.
    Overlapping,
    /// Our ring's name, another configuration, other objects.
    Disjoint,
    /// Another ring.
    Unrelated,
}

/// How `lease` relates to `ring`, the ring of the replica holding the Lease
/// `own`; reports (once per Lease, remembered in `reported`) one of our
/// ring's name whose configuration differs from ours.
pub(super) fn kinship(
    ring: &RingConfig,
    reported: &mut HashSet<String>,
    own: &str,
    lease: &Lease,
) -> Kinship {
    let labels = lease.metadata.labels.as_ref();
    let annotations = lease.metadata.annotations.as_ref();
    let name = lease.metadata.name.clone().unwrap_or_default();
    let theirs = match labels.and_then(|l| l.get(RING_LABEL)) {
        Some(named) if *named == ring.ring_id() => annotations
            .and_then(|a| a.get(CONFIG_ANNOTATION))
            .and_then(|c| RingConfig::parse(c)),
        Some(_) => return Kinship::Unrelated,
        // Version 1 named the ring after the manager alone.
        None if labels.and_then(|l| l.get(V1_MANAGER_LABEL)) == Some(&sanitize(&ring.manager)) => {
            None
        }
        None => return Kinship::Unrelated,
    };
    if theirs.as_ref() == Some(ring) {
        return Kinship::Member;
    }
    // A configuration we cannot read (another ring version) may watch
    // anything: assume it overlaps.
    let overlapping = theirs.as_ref().is_none_or(|t| ring.overlaps(t));
    if reported.insert(name.clone()) {
        let differences = match &theirs {
            Some(theirs) => ring.differences(theirs),
            None => "a ring version this replica cannot read".to_owned(),
        };
        if overlapping {
            tracing::error!(
                lease = %own,
                other = %name,
                %differences,
                "refusing to share shard ring {} with a replica of another configuration that \
                 watches the same objects: reconciling nothing while its Lease is live; give \
                 each deployment its own --shard-ring or --leader-election-id, or finish the rollout",
                ring.ring,
            );
        } else {
            tracing::warn!(
                lease = %own,
                other = %name,
                %differences,
                "refusing to share shard ring {} with a replica of another configuration; \
                 it watches other objects, so each keeps its own ring",
                ring.ring,
            );
        }
    }
    if overlapping {
        Kinship::Overlapping
    } else {
        Kinship::Disjoint
    }
}
