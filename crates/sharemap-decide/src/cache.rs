//! Per-thread set-associative LRU structures (a data cache or a TLB): which accesses would
//! miss. Profile sources and sampled detectors use them to see what hardware would see.

pub struct PerThreadCache {
    sets: usize,
    ways: usize,
    shift: u32,
    /// Per thread: sets x ways tags (u64::MAX = empty), most recent first in each set.
    tags: Vec<Vec<u64>>,
}

impl PerThreadCache {
    /// `entries` blocks of `block` bytes (a power of two), `ways`-way associative.
    pub fn new(entries: usize, ways: usize, block: u64) -> Self {
        let ways = ways.clamp(1, entries.max(1));
        PerThreadCache { sets: (entries / ways).max(1), ways, shift: block.max(1).trailing_zeros(), tags: Vec::new() }
    }

    /// Looks `addr` up in `thread`'s structure; true on a miss (the block is then filled).
    pub fn misses(&mut self, thread: usize, addr: u64) -> bool {
        self.access(thread, addr).0
    }

    /// `misses`, with the block a miss evicted from `thread`'s structure, if any.
    pub fn access(&mut self, thread: usize, addr: u64) -> (bool, Option<u64>) {
        if self.tags.len() <= thread {
            self.tags.resize(thread + 1, Vec::new());
        }
        let t = &mut self.tags[thread];
        if t.is_empty() {
            t.resize(self.sets * self.ways, u64::MAX);
        }
        let block = addr >> self.shift;
        let set = (block as usize) % self.sets;
        let ways = &mut t[set * self.ways..(set + 1) * self.ways];
        match ways.iter().position(|&x| x == block) {
            Some(pos) => {
                ways[..=pos].rotate_right(1);
                (false, None)
            }
            None => {
                ways.rotate_right(1);
                let out = std::mem::replace(&mut ways[0], block);
                (true, (out != u64::MAX).then_some(out))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_misses() {
        // Direct-mapped, 2 lines of 64 B: lines 0, 1, 0, 2 (evicts 0), 0.
        let mut c = PerThreadCache::new(2, 1, 64);
        let got: Vec<bool> = [0u64, 64, 0, 128, 0].iter().map(|&a| c.misses(0, a)).collect();
        assert_eq!(got, vec![true, true, false, true, true]);
        // Two-way LRU, one set: 0, 64, 0, 128 (evicts 64), 64 (evicts 0), 0.
        let mut c = PerThreadCache::new(2, 2, 64);
        let got: Vec<bool> = [0u64, 64, 0, 128, 64, 0].iter().map(|&a| c.misses(0, a)).collect();
        assert_eq!(got, vec![true, true, false, true, true, true]);
        // Threads have their own.
        assert!(c.misses(1, 0));
        // What a miss evicts: two-way, one set: 0, 64 fill it; 128 evicts 0, the oldest.
        let mut c = PerThreadCache::new(2, 2, 64);
        assert_eq!((c.access(0, 0), c.access(0, 64)), ((true, None), (true, None)));
        assert_eq!(c.access(0, 128), (true, Some(0)));
        assert_eq!(c.access(0, 64), (false, None));
    }
}
