//! A small least-recently-used cache, bounded by a total weight: entry count for the
//! segment metadata cache (trailer + index), bytes for the data-interval cache.

use std::collections::HashMap;
use std::hash::Hash;

/// An LRU map whose entries' weights sum to at most `capacity` (each weighs 1 when
/// inserted with [`insert`](Self::insert)). Lookups and inserts are O(1) except eviction,
/// which scans the entries (capacities are hundreds to a few thousands of entries).
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    capacity: usize,
    weight: usize,
    tick: u64,
    entries: HashMap<K, Entry<V>>,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    weight: usize,
    used: u64,
}

impl<K: Eq + Hash + Clone, V: Clone> Lru<K, V> {
    /// An empty cache; `capacity` 0 caches nothing.
    pub(crate) fn new(capacity: usize) -> Self {
        Self { capacity, weight: 0, tick: 0, entries: HashMap::new() }
    }

    /// The value for `key`, marking it recently used.
    pub(crate) fn get(&mut self, key: &K) -> Option<V> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(key).map(|e| {
            e.used = tick;
            e.value.clone()
        })
    }

    /// Inserts `value` with weight 1, evicting the least recently used entry when full.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        self.insert_weighted(key, value, 1);
    }

    /// Inserts `value` weighing `weight`, evicting least recently used entries until it
    /// fits. A value heavier than the whole capacity is not cached.
    pub(crate) fn insert_weighted(&mut self, key: K, value: V, weight: usize) {
        if weight > self.capacity || self.capacity == 0 {
            return;
        }
        self.remove(&key);
        while self.weight + weight > self.capacity {
            let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else {
                break;
            };
            self.remove(&oldest);
        }
        self.tick += 1;
        self.weight += weight;
        self.entries.insert(key, Entry { value, weight, used: self.tick });
    }

    /// Drops `key`.
    pub(crate) fn remove(&mut self, key: &K) {
        if let Some(e) = self.entries.remove(key) {
            self.weight -= e.weight;
        }
    }

    /// Drops every entry.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.weight = 0;
    }

    /// Total weight of the entries held.
    #[cfg(test)]
    pub(crate) fn weight(&self) -> usize {
        self.weight
    }

    /// Number of entries.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1);
        lru.insert("b", 2);
        assert_eq!(lru.get(&"a"), Some(1));
        lru.insert("c", 3);
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.get(&"b"), None, "b was least recently used");
        assert_eq!(lru.get(&"a"), Some(1));
        assert_eq!(lru.get(&"c"), Some(3));
        lru.remove(&"a");
        assert_eq!(lru.get(&"a"), None);
    }

    #[test]
    fn weighted_entries_stay_within_capacity() {
        let mut lru = Lru::new(10);
        lru.insert_weighted("a", 1, 4);
        lru.insert_weighted("b", 2, 4);
        assert_eq!(lru.get(&"a"), Some(1));
        lru.insert_weighted("c", 3, 5);
        assert_eq!(lru.get(&"b"), None, "b was least recently used");
        assert_eq!(lru.weight(), 9);
        lru.insert_weighted("d", 4, 11);
        assert_eq!(lru.get(&"d"), None, "heavier than the capacity");
        assert_eq!(lru.weight(), 9, "nothing evicted for it");
        lru.insert_weighted("a", 5, 1);
        assert_eq!((lru.get(&"a"), lru.weight()), (Some(5), 6), "replaced, not added");
        lru.clear();
        assert_eq!((lru.len(), lru.weight()), (0, 0));
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let mut lru = Lru::new(0);
        lru.insert(1, 1);
        assert_eq!(lru.get(&1), None);
    }
}
