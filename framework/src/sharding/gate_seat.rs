//! The gate's record of one controller's keys (see [`Seat`]).

use std::collections::HashMap;

/// Whether a `namespace/name` key is in one controller's store.
pub(crate) type Cached = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// What the gate knows of one controller's keys: of each key the
/// controller has offered it, whether it has been handled since it last
/// became ours, so a wake re-runs only the reconciles of keys that moved
/// here or were refused or cancelled — never those of keys that stayed,
/// nor of keys still waiting in the controller's queue for a first try.
#[derive(Default)]
pub(super) struct Seat {
    /// Every key the controller tried: `true` once admitted (or offered
    /// again by a wake) and neither refused, cancelled nor given to another
    /// member since; `false` while it waits for a wake to offer it again.
    pub(super) handled: HashMap<String, bool>,
    /// Whether a key is still in the controller's store, to drop deleted
    /// objects' keys from `handled`.
    pub(super) cached: Option<Cached>,
    /// `handled`'s size after its last sweep.
    pub(super) swept: usize,
}

impl std::fmt::Debug for Seat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seat")
            .field("handled", &self.handled.len())
            .finish_non_exhaustive()
    }
}

impl Seat {
    /// No sweep below this many handled keys.
    const SWEEP_FROM: usize = 64;

    pub(super) fn admitted(&mut self, key: &str) {
        if self.handled.insert(key.to_owned(), true).is_none()
            && self.handled.len() >= Self::SWEEP_FROM.max(2 * self.swept)
            && let Some(cached) = &self.cached
        {
            self.handled.retain(|key, _| cached(key));
            self.swept = self.handled.len();
        }
    }
}
