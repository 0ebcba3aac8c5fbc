use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Decisions by (token, path), each kept for `ttl`; at most `max` of them.
#[derive(Debug)]
pub(super) struct Decisions<D> {
    entries: Mutex<HashMap<(String, String), (D, Instant)>>,
    ttl: Duration,
    max: usize,
}

impl<D: Clone> Decisions<D> {
    pub(super) fn new(ttl: Duration, max: usize) -> Self {
        Decisions {
            entries: Mutex::new(HashMap::new()),
            ttl,
            max: max.max(1),
        }
    }

    /// The decision for `token` on `path`, if one younger than the TTL is kept.
    pub(super) fn get(&self, token: &str, path: &str, now: Instant) -> Option<D> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        // A (String, String) key cannot be borrowed from two &str; the
        // lookup allocates, which is small beside a TLS request.
        let (decision, expires) = entries.get(&(token.to_owned(), path.to_owned()))?;
        (*expires > now).then(|| decision.clone())
    }

    /// Keeps `decision` for `token` on `path` until `now + ttl`. When full,
    /// expired decisions go first, then the one closest to expiry.
    pub(super) fn put(&self, token: &str, path: &str, decision: D, now: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= self.max {
            entries.retain(|_, (_, expires)| *expires > now);
        }
        if entries.len() >= self.max {
            let oldest = entries
                .iter()
                .min_by_key(|(_, (_, expires))| *expires)
                .map(|(key, _)| key.clone());
            if let Some(key) = oldest {
                entries.remove(&key);
            }
        }
        entries.insert(
            (token.to_owned(), path.to_owned()),
            (decision, now + self.ttl),
        );
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_expire_after_their_ttl() {
        let cache = Decisions::new(Duration::from_secs(10), 8);
        let now = Instant::now();
        cache.put("token", "/metrics", true, now);
        assert_eq!(cache.get("token", "/metrics", now), Some(true));
        assert_eq!(cache.get("token", "/other", now), None);
        assert_eq!(cache.get("other", "/metrics", now), None);
        assert_eq!(
            cache.get("token", "/metrics", now + Duration::from_secs(10)),
            None
        );
    }

    #[test]
    fn a_full_cache_stays_within_its_bound() {
        let cache = Decisions::new(Duration::from_secs(10), 4);
        let now = Instant::now();
        for i in 0..100u64 {
            cache.put(
                &format!("t{i}"),
                "/metrics",
                i,
                now + Duration::from_millis(i),
            );
            assert!(cache.len() <= 4);
        }
        // The newest stay.
        assert_eq!(
            cache.get("t99", "/metrics", now + Duration::from_millis(100)),
            Some(99)
        );
        assert_eq!(cache.get("t0", "/metrics", now), None);
    }

    #[test]
    fn a_zero_ttl_keeps_nothing() {
        let cache = Decisions::new(Duration::ZERO, 4);
        let now = Instant::now();
        cache.put("token", "/metrics", true, now);
        assert_eq!(cache.get("token", "/metrics", now), None);
    }
}
