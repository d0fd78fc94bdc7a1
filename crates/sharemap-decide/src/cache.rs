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
                false
            }
            None => {
                ways.rotate_right(1);
                ways[0] = block;
                true
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
    }
}
