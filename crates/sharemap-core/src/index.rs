//! Dense ids for sparse keys (pages, blocks) with a direct-mapped cache in front of the hash
//! map: the per-access lookups of detectors and summaries mostly hit the cache, which costs a
//! multiply and one compare where the map costs a probe sequence.

use rustc_hash::FxHashMap;

const CACHE_BITS: u32 = 12;

/// Keys mapped to ids 0, 1, 2... in order of first appearance.
#[derive(Clone, Debug)]
pub struct DenseIndex {
    map: FxHashMap<u64, u32>,
    /// (key, id) by a hash of the key; key u64::MAX marks an empty slot.
    cache: Vec<(u64, u32)>,
}

impl Default for DenseIndex {
    fn default() -> Self {
        DenseIndex { map: FxHashMap::default(), cache: vec![(u64::MAX, 0); 1 << CACHE_BITS] }
    }
}

impl DenseIndex {
    /// The key's id, and whether the key is new.
    #[inline]
    pub fn id(&mut self, key: u64) -> (u32, bool) {
        let slot = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CACHE_BITS)) as usize;
        let cached = self.cache[slot];
        if cached.0 == key {
            return (cached.1, false);
        }
        self.miss(key, slot)
    }

    #[cold]
    #[inline(never)]
    fn miss(&mut self, key: u64, slot: usize) -> (u32, bool) {
        let next = self.map.len() as u32;
        let id = *self.map.entry(key).or_insert(next);
        self.cache[slot] = (key, id);
        (id, id == next)
    }

    /// The id of a key seen before.
    pub fn get(&self, key: u64) -> Option<u32> {
        self.map.get(&key).copied()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Per thread, the last two keys looked up and their ids: threads that alternate between two
/// pages (their own data and a neighbour's halo, two arrays) find both here without a lookup.
#[derive(Clone, Debug, Default)]
pub struct RecentPerThread {
    slots: Vec<Recent>,
}

/// Two (key, id) pairs and which of them was used last (a hit writes one byte, not a swap).
#[derive(Clone, Copy, Debug)]
struct Recent {
    pairs: [(u64, u32); 2],
    last: u8,
}

const EMPTY: Recent = Recent { pairs: [(u64::MAX, 0); 2], last: 0 };

impl RecentPerThread {
    #[inline]
    pub fn get(&mut self, thread: usize, key: u64) -> Option<u32> {
        let s = self.slots.get_mut(thread)?;
        // Both compares, then a select: which pair hits is hard to predict when a thread
        // alternates between two pages.
        let (h0, h1) = (s.pairs[0].0 == key, s.pairs[1].0 == key);
        if !(h0 | h1) {
            return None;
        }
        s.last = h1 as u8;
        Some(if h1 { s.pairs[1].1 } else { s.pairs[0].1 })
    }

    /// Remembers `key` in place of the thread's less recently used pair.
    #[inline]
    pub fn put(&mut self, thread: usize, key: u64, id: u32) {
        if thread >= self.slots.len() {
            self.slots.resize(thread + 1, EMPTY);
        }
        let s = &mut self.slots[thread];
        s.last ^= 1;
        s.pairs[s.last as usize] = (key, id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ids_are_dense_in_first_appearance_order(keys in prop::collection::vec(prop_oneof![0u64..50, any::<u64>()], 0..2000)) {
            let mut index = DenseIndex::default();
            let mut expect: std::collections::HashMap<u64, u32> = Default::default();
            for k in keys {
                let next = expect.len() as u32;
                let want = *expect.entry(k).or_insert(next);
                prop_assert_eq!(index.id(k), (want, want == next));
                prop_assert_eq!(index.get(k), Some(want));
            }
            prop_assert_eq!(index.len(), expect.len());
        }

        #[test]
        fn recent_keeps_each_threads_last_two_keys(steps in prop::collection::vec((0usize..4, 0u64..6), 0..500)) {
            let mut recent = RecentPerThread::default();
            let mut lists: Vec<Vec<u64>> = vec![Vec::new(); 4];
            for (t, key) in steps {
                let hit = recent.get(t, key);
                prop_assert_eq!(hit.is_some(), lists[t].contains(&key));
                if let Some(id) = hit {
                    prop_assert_eq!(id as u64, key * 10);
                    lists[t].retain(|&k| k != key);
                } else {
                    recent.put(t, key, (key * 10) as u32);
                }
                lists[t].insert(0, key);
                lists[t].truncate(2);
            }
        }
    }
}
