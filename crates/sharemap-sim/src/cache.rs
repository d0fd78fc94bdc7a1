//! One set-associative cache with LRU replacement: per way a line and its coherence state.
//! Each set keeps its lines from most to least recently used, so that a use moves the line
//! to the front and the victim is the last: one array, a set in one or two of the host's
//! cache lines. TLBs are the same structure with pages for lines.

/// Line states (MESI). Shared caches use `SHARED` for clean and `MODIFIED` for dirty.
pub const INVALID: u8 = 0;
pub const SHARED: u8 = 1;
pub const EXCLUSIVE: u8 = 2;
pub const MODIFIED: u8 = 3;

/// A way's content without its state: the line plus one, so that no line's tag is 0.
#[inline(always)]
fn tag(line: u64) -> u64 {
    (line + 1) << 2
}

/// A way's line and state.
#[inline(always)]
fn untag(slot: u64) -> (u64, u8) {
    ((slot >> 2) - 1, (slot & 3) as u8)
}

/// One of the host's cache lines of ways. A cache keeps its ways in these so that its sets
/// begin where the host's lines do: a set of 8 ways is then one host line, and one of 16
/// two. In a plain `Vec<u64>`, which the allocator starts 16 bytes into a line, such a set
/// spread over two host lines, or three.
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct HostLine([u64; 8]);

#[derive(Clone, Debug)]
pub struct Cache {
    ways: usize,
    sets: u64,
    /// `sets - 1` when the number of sets is a power of two (a mask instead of a division).
    mask: Option<u64>,
    /// Per way, set after set, most recently used first: `tag(line) | state`, 0 when empty
    /// (the ways past the last set, to the end of the host line, stay 0).
    lines: Vec<HostLine>,
}

impl Cache {
    /// A cache of `lines` lines in sets of `ways` (0: fully associative). `ways` is capped at
    /// `lines`, and `lines` rounded down to whole sets.
    pub fn new(lines: u64, ways: u32) -> Cache {
        let lines = lines.max(1);
        let ways = if ways == 0 { lines } else { (ways as u64).min(lines) } as usize;
        let sets = (lines / ways as u64).max(1);
        let host_lines = (sets as usize * ways).div_ceil(8);
        Cache {
            ways,
            sets,
            mask: sets.is_power_of_two().then(|| sets - 1),
            lines: vec![HostLine::default(); host_lines],
        }
    }

    /// Every way, set after set.
    #[inline(always)]
    fn slots(&self) -> &[u64] {
        bytemuck::cast_slice(&self.lines)
    }

    #[inline(always)]
    fn slots_mut(&mut self) -> &mut [u64] {
        bytemuck::cast_slice_mut(&mut self.lines)
    }

    pub fn ways(&self) -> usize {
        self.ways
    }

    pub fn sets(&self) -> u64 {
        self.sets
    }

    /// Where the set of `line` begins in `slots`.
    #[inline(always)]
    fn set_start(&self, line: u64) -> usize {
        let set = match self.mask {
            Some(m) => line & m,
            None => line % self.sets,
        };
        set as usize * self.ways
    }

    /// The set beginning at `start` (from `set_start`).
    #[inline(always)]
    fn set(&self, start: usize) -> &[u64] {
        debug_assert!(start + self.ways <= self.slots().len());
        // SAFETY: `start` is a set's index times `ways`, the set below `sets`, and `slots`
        // holds at least `sets * ways` ways: the range is inside. (Measured: the bounds
        // checks were a tenth of a simulated access's instructions.)
        unsafe { self.slots().get_unchecked(start..start + self.ways) }
    }

    #[inline(always)]
    fn set_mut(&mut self, start: usize) -> &mut [u64] {
        debug_assert!(start + self.ways <= self.slots().len());
        let end = start + self.ways;
        // SAFETY: as in `set`.
        unsafe { self.slots_mut().get_unchecked_mut(start..end) }
    }

    /// Where the set of `line` begins, and the way holding it.
    #[inline]
    fn find(&self, line: u64) -> (usize, Option<usize>) {
        let start = self.set_start(line);
        let want = tag(line);
        // An empty way (0) never equals a tag: one comparison per way, two ways per turn of
        // the loop (its counting was half of a search's instructions).
        let mut pairs = self.set(start).chunks_exact(2);
        let mut way = 0;
        for pair in &mut pairs {
            if pair[0] & !3 == want {
                return (start, Some(way));
            }
            if pair[1] & !3 == want {
                return (start, Some(way + 1));
            }
            way += 2;
        }
        let last = pairs.remainder().first().is_some_and(|&s| s & !3 == want);
        (start, last.then_some(way))
    }

    /// The state of `line` (INVALID when absent); a present line becomes the most recently
    /// used of its set.
    #[inline]
    pub fn touch(&mut self, line: u64) -> u8 {
        match self.find(line) {
            (start, Some(way)) => {
                let set = self.set_mut(start);
                let s = set[way];
                if way > 0 {
                    set[..=way].rotate_right(1);
                }
                (s & 3) as u8
            }
            (_, None) => INVALID,
        }
    }

    /// The state of `line` when it is the most recently used line of its set, else INVALID
    /// (it may still be further down): a use of that line changes nothing in the cache.
    #[inline(always)]
    pub fn mru_state(&self, line: u64) -> u8 {
        let start = self.set_start(line);
        debug_assert!(start < self.slots().len());
        // SAFETY: as in `set`; a set has at least one way.
        let first = unsafe { *self.slots().get_unchecked(start) };
        // The way's state when it holds the line; an empty way (0) or another line leaves
        // bits above the state's.
        let diff = first ^ tag(line);
        if diff < 4 { diff as u8 } else { INVALID }
    }

    /// Asks the host to bring the set of `line` into its caches (a hint: nothing changes).
    #[inline(always)]
    pub fn prefetch(&self, line: u64) {
        crate::prefetch(self.set(self.set_start(line)).as_ptr());
    }

    /// The state of `line`, without counting a use.
    #[inline]
    pub fn state(&self, line: u64) -> u8 {
        match self.find(line) {
            (start, Some(way)) => (self.set(start)[way] & 3) as u8,
            (_, None) => INVALID,
        }
    }

    /// Changes the state of a present line (INVALID removes it); false when absent.
    #[inline]
    pub fn set_state(&mut self, line: u64, state: u8) -> bool {
        match self.find(line) {
            (start, Some(way)) => {
                self.set_mut(start)[way] = if state == INVALID { 0 } else { tag(line) | state as u64 };
                true
            }
            (_, None) => false,
        }
    }

    /// The state of `line` (INVALID when absent), changed to `f` of it in the same search
    /// (INVALID removes it); the use order stays as it is.
    #[inline]
    pub fn change_state(&mut self, line: u64, f: impl FnOnce(u8) -> u8) -> u8 {
        match self.find(line) {
            (start, Some(way)) => {
                let slot = &mut self.set_mut(start)[way];
                let old = (*slot & 3) as u8;
                let new = f(old);
                *slot = if new == INVALID { 0 } else { tag(line) | new as u64 };
                old
            }
            (_, None) => INVALID,
        }
    }

    /// Puts `line` in `state` as the most recently used line of its set: updates it when
    /// present, else takes an empty way or evicts the least recently used line, which it
    /// returns with its state.
    pub fn insert(&mut self, line: u64, state: u8) -> Option<(u64, u8)> {
        debug_assert!(state != INVALID);
        let new = tag(line) | state as u64;
        let (start, way) = self.find(line);
        let set = self.set_mut(start);
        let way = way.or_else(|| set.iter().position(|&s| s == 0)).unwrap_or(set.len() - 1);
        let old = set[way];
        set[..=way].rotate_right(1);
        set[0] = new;
        (old != 0 && old & !3 != tag(line)).then(|| untag(old))
    }

    /// `insert` for a line known to be absent (the lookup that found it missing just ran):
    /// no second search of the set.
    pub fn insert_absent(&mut self, line: u64, state: u8) -> Option<(u64, u8)> {
        debug_assert!(state != INVALID && self.state(line) == INVALID);
        let start = self.set_start(line);
        let set = self.set_mut(start);
        let way = set.iter().position(|&s| s == 0).unwrap_or(set.len() - 1);
        let old = set[way];
        set[..=way].rotate_right(1);
        set[0] = tag(line) | state as u64;
        (old != 0).then(|| untag(old))
    }

    /// Every line present, with its state (tests and invariant checks).
    pub fn lines(&self) -> impl Iterator<Item = (u64, u8)> + '_ {
        self.slots().iter().filter(|&&s| s != 0).map(|&s| untag(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// The textbook model: per set, a list from most to least recently used.
    struct Reference {
        sets: Vec<VecDeque<u64>>,
        ways: usize,
    }

    impl Reference {
        fn access(&mut self, line: u64) -> bool {
            let n = self.sets.len() as u64;
            let set = &mut self.sets[(line % n) as usize];
            let hit = match set.iter().position(|&l| l == line) {
                Some(i) => {
                    set.remove(i);
                    true
                }
                None => {
                    if set.len() == self.ways {
                        set.pop_back();
                    }
                    false
                }
            };
            set.push_front(line);
            hit
        }
    }

    fn misses(cache: &mut Cache, lines: &[u64]) -> usize {
        lines
            .iter()
            .filter(|&&l| {
                let hit = cache.touch(l) != INVALID;
                if !hit {
                    cache.insert(l, SHARED);
                }
                !hit
            })
            .count()
    }

    proptest! {
        /// Hits and misses agree with the reference model access by access, for sizes and
        /// associativities with power-of-two and other set counts, and fully associative.
        #[test]
        fn lru_agrees_with_the_reference_model(
            lines in proptest::collection::vec(0u64..300, 1..2000),
            ways in prop_oneof![Just(0u32), 1u32..9],
            sets in prop_oneof![Just(1u64), Just(4), Just(6), Just(16), Just(13)],
        ) {
            let total = if ways == 0 { sets * 4 } else { sets * ways as u64 };
            let mut cache = Cache::new(total, ways);
            let (ref_sets, ref_ways) = if ways == 0 { (1, total as usize) } else { (sets as usize, ways as usize) };
            let mut reference = Reference { sets: vec![VecDeque::new(); ref_sets], ways: ref_ways };
            for &l in &lines {
                let want = reference.access(l);
                let got = cache.touch(l) != INVALID;
                if !got {
                    cache.insert(l, SHARED);
                }
                prop_assert_eq!(got, want, "line {}", l);
            }
        }
    }

    #[test]
    fn a_loop_one_line_larger_than_the_cache_always_misses() {
        let mut cache = Cache::new(8, 0);
        let lines: Vec<u64> = (0..9).cycle().take(90).collect();
        assert_eq!(misses(&mut cache, &lines), 90);
        let mut cache = Cache::new(8, 0);
        let lines: Vec<u64> = (0..8).cycle().take(80).collect();
        assert_eq!(misses(&mut cache, &lines), 8);
    }

    #[test]
    fn states_change_and_evictions_return_the_old_line() {
        let mut cache = Cache::new(2, 2);
        assert_eq!(cache.insert(5, EXCLUSIVE), None);
        assert_eq!(cache.insert(7, SHARED), None);
        assert!(cache.set_state(5, MODIFIED));
        assert_eq!(cache.state(5), MODIFIED);
        // set_state is not a use: 5 is still the least recently used.
        assert_eq!(cache.insert(9, SHARED), Some((5, MODIFIED)));
        assert!(cache.set_state(7, INVALID));
        assert_eq!(cache.state(7), INVALID);
        assert_eq!(cache.insert(11, SHARED), None, "the invalidated way is free");
    }
}
