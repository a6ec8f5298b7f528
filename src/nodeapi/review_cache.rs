//! A small time-bounded cache of review answers, so a scrape every few
//! seconds does not cost a TokenReview and a SubjectAccessReview each time
//! (kubelet caches tokens for `authentication.webhook.cacheTTL`, allowed
//! decisions for `cacheAuthorizedTTL` and denials for
//! `cacheUnauthorizedTTL`).
//!
//! Bounded: at most `capacity` entries; a full cache drops expired entries
//! first, then the one that expires soonest. Pure: time comes in as an
//! `Instant`.

use std::time::{Duration, Instant};

/// Answers by key, each until its own expiry.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    entries: Vec<(K, V, Instant)>,
    capacity: usize,
}

impl<K: PartialEq, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize) -> Self {
        TtlCache {
            entries: Vec::new(),
            capacity: capacity.max(1),
        }
    }

    /// The answer for `key`, if one was stored and has not expired at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.entries
            .iter()
            .find(|(k, _, until)| k == key && now < *until)
            .map(|(_, v, _)| v.clone())
    }

    /// Stores `value` for `key` until `now + ttl`; a zero `ttl` stores
    /// nothing.
    pub fn insert(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        self.entries
            .retain(|(k, _, until)| *k != key && now < *until);
        if ttl.is_zero() {
            return;
        }
        if self.entries.len() >= self.capacity {
            if let Some(i) = (0..self.entries.len()).min_by_key(|i| self.entries[*i].2) {
                self.entries.swap_remove(i);
            }
        }
        self.entries.push((key, value, now + ttl));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn an_answer_is_served_until_its_ttl_and_not_after() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(8);
        c.insert("a", true, 30 * S, t0);
        assert_eq!(c.get(&"a", t0 + 29 * S), Some(true));
        assert_eq!(c.get(&"a", t0 + 30 * S), None);
        assert_eq!(c.get(&"b", t0), None);
    }

    #[test]
    fn a_new_answer_replaces_the_old_one_and_a_zero_ttl_is_not_cached() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(8);
        c.insert("a", true, 300 * S, t0);
        c.insert("a", false, 30 * S, t0 + S);
        assert_eq!(c.get(&"a", t0 + 2 * S), Some(false));
        assert_eq!(c.len(), 1);
        c.insert("a", true, Duration::ZERO, t0 + 3 * S);
        assert_eq!(c.get(&"a", t0 + 3 * S), None);
        assert!(c.is_empty());
    }

    #[test]
    fn a_full_cache_drops_the_expired_then_the_soonest_to_expire() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(2);
        c.insert(1, (), 10 * S, t0);
        c.insert(2, (), 100 * S, t0);
        c.insert(3, (), 50 * S, t0);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get(&1, t0), None, "the soonest to expire went");
        assert!(c.get(&2, t0).is_some() && c.get(&3, t0).is_some());
        c.insert(4, (), 10 * S, t0 + 60 * S);
        assert_eq!(c.get(&3, t0 + 60 * S), None, "expired, dropped first");
        assert!(c.get(&2, t0 + 60 * S).is_some() && c.get(&4, t0 + 60 * S).is_some());
    }
}
