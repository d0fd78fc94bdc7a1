//! The coherence directory: per line, who holds it. An open-addressed table with linear
//! probing whose slots hold the line and its entry together: a lookup is one of the host's
//! cache lines where a general hash map reads two (control bytes, then bucket). On
//! miss-heavy traces the directory is most of the simulator's time, and on large ones it
//! outgrows the host's caches; so a machine of up to 64 cores and 12 shared caches gets
//! slots of 16 bytes, half the others' 32, as long as its lines fit in 48 bits. Machines of
//! more than 32 shared caches (up to 64) get slots of 40 bytes.

/// Where a line's copies are (the slots store it packed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dir {
    /// Cores holding the line in their private caches (a u128 in two words, so that a wide
    /// slot takes 32 bytes).
    cores: [u64; 2],
    /// Shared caches holding it (bits of `Model::shared_index`).
    pub shared: u64,
    /// The shared cache holding it dirty, plus one (0: none).
    pub dirty: u8,
}

impl Dir {
    pub fn cores(&self) -> u128 {
        (self.cores[1] as u128) << 64 | self.cores[0] as u128
    }

    pub fn set_cores(&mut self, c: u128) {
        self.cores = [c as u64, (c >> 64) as u64];
    }

    pub fn is_empty(&self) -> bool {
        self.cores == [0, 0] && self.shared == 0
    }
}

/// A slot's layout: the line plus one (0: empty) and its entry.
trait Slot: Copy + Default {
    fn new(key: u64, dir: Dir) -> Self;
    fn key(&self) -> u64;
    fn dir(&self) -> Dir;
}

/// 16 bytes: the key (48 bits), the shared caches (12 bits) and the dirty one (4 bits) in
/// one word, the cores (64 at most) in the other.
#[derive(Clone, Copy, Default)]
struct Narrow([u64; 2]);

const NARROW_KEY_BITS: u32 = 48;
/// Shared caches a narrow slot can name.
const NARROW_SHARED: usize = 12;

impl Narrow {
    /// Whether a narrow slot holds `key`.
    fn holds(key: u64) -> bool {
        key >> NARROW_KEY_BITS == 0
    }
}

impl Slot for Narrow {
    #[inline]
    fn new(key: u64, dir: Dir) -> Self {
        debug_assert!(Self::holds(key) && dir.cores[1] == 0 && dir.shared >> NARROW_SHARED == 0 && dir.dirty < 16);
        Narrow([key | dir.shared << NARROW_KEY_BITS | (dir.dirty as u64) << 60, dir.cores[0]])
    }
    #[inline]
    fn key(&self) -> u64 {
        self.0[0] & ((1 << NARROW_KEY_BITS) - 1)
    }
    #[inline]
    fn dir(&self) -> Dir {
        let w = self.0[0] >> NARROW_KEY_BITS;
        Dir { cores: [self.0[1], 0], shared: w & 0xFFF, dirty: (w >> 12) as u8 }
    }
}

/// 32 bytes: any key, 128 cores, 32 shared caches. Aligned to its size, so that a slot
/// never straddles two of the host's cache lines (the allocator starts a large table 16
/// bytes into a line).
#[derive(Clone, Copy, Default)]
#[repr(align(32))]
struct Wide {
    key: u64,
    cores: [u64; 2],
    shared: u32,
    dirty: u8,
}

/// Shared caches a wide slot can name.
const WIDE_SHARED: usize = 32;

impl Slot for Wide {
    #[inline]
    fn new(key: u64, dir: Dir) -> Self {
        debug_assert!(dir.shared >> WIDE_SHARED == 0);
        Wide { key, cores: dir.cores, shared: dir.shared as u32, dirty: dir.dirty }
    }
    #[inline]
    fn key(&self) -> u64 {
        self.key
    }
    #[inline]
    fn dir(&self) -> Dir {
        Dir { cores: self.cores, shared: self.shared as u64, dirty: self.dirty }
    }
}

/// 40 bytes: any key, 128 cores, 64 shared caches (machines beyond a wide slot's 32).
#[derive(Clone, Copy, Default)]
struct Huge {
    key: u64,
    dir: Dir,
}

impl Slot for Huge {
    #[inline]
    fn new(key: u64, dir: Dir) -> Self {
        Huge { key, dir }
    }
    #[inline]
    fn key(&self) -> u64 {
        self.key
    }
    #[inline]
    fn dir(&self) -> Dir {
        self.dir
    }
}

struct Table<S> {
    slots: Vec<S>,
    bits: u32,
    len: usize,
    /// The slot of the line found last (a miss looks its line up several times). It needs
    /// no invalidation: the slot is used only when it still holds that line.
    last: std::cell::Cell<usize>,
    /// Added to every home so that a group's slots begin where a host line does (the
    /// allocator starts a large table 16 bytes into one).
    align: usize,
}

impl<S: Slot> Table<S> {
    /// Slots in one of the host's cache lines: 4 narrow ones, 2 wide.
    const GROUP: usize = 64 / std::mem::size_of::<S>();

    fn with_bits(bits: u32) -> Self {
        let slots = vec![S::default(); 1 << bits];
        let skew = slots.as_ptr() as usize % 64 / std::mem::size_of::<S>();
        let align = (Self::GROUP - skew) % Self::GROUP;
        Table { slots, bits, len: 0, last: Default::default(), align }
    }

    /// Where `key`'s probe starts. Lines are hashed by groups of `GROUP` neighbours, each
    /// group to one host line of slots: a stream of lines, and the victims a cache evicts
    /// in turn after such a stream, then read one host line of the table where single lines
    /// hashed apart read one each (measured at 20M accesses: `neighbor` +15 to +20 %, the
    /// suite up to +17 % when the host's memory is slow). Fibonacci hashing spreads a dense
    /// range of groups evenly; groups of different regions collide more often than single
    /// lines do (a trace of many regions probes further).
    #[inline]
    fn home(&self, key: u64) -> usize {
        let g = Self::GROUP as u64;
        let group = ((key / g).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize;
        (((group & !(Self::GROUP - 1)) | (key % g) as usize) + self.align) & (self.slots.len() - 1)
    }

    /// The slot of `key`, or the empty slot where it would go.
    #[inline]
    fn find(&self, key: u64) -> (usize, bool) {
        let last = self.last.get();
        if self.slots[last].key() == key {
            return (last, true);
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let k = self.slots[i].key();
            if k == key {
                self.last.set(i);
                return (i, true);
            }
            if k == 0 {
                return (i, false);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot of `key`, made if absent (room is made first).
    #[inline]
    fn find_or_add(&mut self, key: u64) -> usize {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let (i, found) = self.find(key);
        if !found {
            self.slots[i] = S::new(key, Dir::default());
            self.len += 1;
            self.last.set(i);
        }
        i
    }

    /// Empties slot `i`, moving later slots of its probe run back so that every key stays
    /// reachable from its home (linear probing's deletion, no tombstones).
    fn remove_at(&mut self, mut i: usize) {
        let mask = self.slots.len() - 1;
        self.slots[i] = S::default();
        self.len -= 1;
        let mut j = (i + 1) & mask;
        while self.slots[j].key() != 0 {
            let h = self.home(self.slots[j].key());
            // The slot at j may move to i when its home is not within (i, j], cyclically.
            let stays = if i <= j { i < h && h <= j } else { i < h || h <= j };
            if !stays {
                self.slots[i] = self.slots[j];
                self.slots[j] = S::default();
                i = j;
            }
            j = (j + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let old = std::mem::replace(self, Table::with_bits(self.bits + 1));
        for s in old.slots.into_iter().filter(|s| s.key() != 0) {
            self.put(s.key(), s.dir());
        }
    }

    /// Stores an entry known to be absent.
    fn put(&mut self, key: u64, dir: Dir) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        while self.slots[i].key() != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = S::new(key, dir);
        self.len += 1;
    }

    /// The keys and entries of the occupied slots.
    fn occupied(&self) -> impl Iterator<Item = (u64, Dir)> + '_ {
        self.slots.iter().filter(|s| s.key() != 0).map(|s| (s.key(), s.dir()))
    }
}

pub struct Directory(Layout);

enum Layout {
    Narrow(Table<Narrow>),
    Wide(Table<Wide>),
    Huge(Table<Huge>),
}

/// Runs `$body` with `$t` bound to the table (`$layout`, borrowed), whichever its layout.
macro_rules! table {
    ($layout:expr, $t:ident => $body:expr) => {
        match $layout {
            Layout::Narrow($t) => $body,
            Layout::Wide($t) => $body,
            Layout::Huge($t) => $body,
        }
    };
}

const FIRST_BITS: u32 = 12;

impl Directory {
    /// A directory for a machine of `cores` cores and `shared` shared caches.
    pub fn new(cores: usize, shared: usize) -> Directory {
        Directory(if cores <= 64 && shared <= NARROW_SHARED {
            Layout::Narrow(Table::with_bits(FIRST_BITS))
        } else if shared <= WIDE_SHARED {
            Layout::Wide(Table::with_bits(FIRST_BITS))
        } else {
            Layout::Huge(Table::with_bits(FIRST_BITS))
        })
    }

    /// A narrow directory that meets a line it cannot hold turns wide.
    #[cold]
    fn widen(&mut self) {
        if let Layout::Narrow(t) = &self.0 {
            let mut wide = Table::with_bits(t.bits);
            t.occupied().for_each(|(key, dir)| wide.put(key, dir));
            self.0 = Layout::Wide(wide);
        }
    }

    /// Whether `line` could be in the table (a narrow one holds only lines of 48 bits).
    #[inline]
    fn may_hold(&self, line: u64) -> bool {
        match self.0 {
            Layout::Narrow(_) => Narrow::holds(line + 1),
            Layout::Wide(_) | Layout::Huge(_) => true,
        }
    }

    #[cfg(test)]
    pub fn is_narrow(&self) -> bool {
        matches!(self.0, Layout::Narrow(_))
    }

    /// Lines with an entry.
    pub fn entries(&self) -> usize {
        table!(&self.0, t => t.len)
    }

    #[inline(always)]
    pub fn get(&self, line: u64) -> Option<Dir> {
        if !self.may_hold(line) {
            return None;
        }
        table!(&self.0, t => match t.find(line + 1) {
            (i, true) => Some(t.slots[i].dir()),
            _ => None,
        })
    }

    /// The entry of `line`, made empty if it had none, changed by `f`.
    #[inline]
    pub fn entry<R>(&mut self, line: u64, f: impl FnOnce(&mut Dir) -> R) -> R {
        if !self.may_hold(line) {
            self.widen();
        }
        table!(&mut self.0, t => {
            let i = t.find_or_add(line + 1);
            let mut d = t.slots[i].dir();
            let r = f(&mut d);
            t.slots[i] = Slot::new(line + 1, d);
            r
        })
    }

    /// Sets the entry of `line` (an empty one is kept only if the line had one).
    #[inline]
    pub fn store(&mut self, line: u64, dir: Dir) {
        if dir.is_empty() {
            self.update(line, true, |e| *e = dir);
        } else {
            self.entry(line, |e| *e = dir);
        }
    }

    /// Changes the entry of `line`, if any, with one lookup, and returns what `f` returns;
    /// removes the entry when it is then empty and `keep` is false.
    #[inline]
    pub fn update<R>(&mut self, line: u64, keep: bool, f: impl FnOnce(&mut Dir) -> R) -> Option<R> {
        if !self.may_hold(line) {
            return None;
        }
        table!(&mut self.0, t => {
            let (i, true) = t.find(line + 1) else { return None };
            let mut d = t.slots[i].dir();
            let r = f(&mut d);
            if !keep && d.is_empty() {
                t.remove_at(i);
            } else {
                t.slots[i] = Slot::new(line + 1, d);
            }
            Some(r)
        })
    }

    /// Asks the host to bring the slot where `line`'s probe begins into its caches (a hint).
    #[inline(always)]
    pub fn prefetch(&self, line: u64) {
        table!(&self.0, t => crate::prefetch(t.slots.as_ptr().wrapping_add(t.home(line + 1))))
    }

    pub fn remove(&mut self, line: u64) -> Option<Dir> {
        if !self.may_hold(line) {
            return None;
        }
        table!(&mut self.0, t => match t.find(line + 1) {
            (i, true) => {
                let d = t.slots[i].dir();
                t.remove_at(i);
                Some(d)
            }
            _ => None,
        })
    }

    /// Every line with an entry (invariant checks).
    #[cfg(test)]
    pub fn iter(&self) -> Vec<(u64, Dir)> {
        table!(&self.0, t => t.occupied().map(|(key, d)| (key - 1, d)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Inserts, changes and removals in any order agree with a standard map, through
        /// growth and the backward shifts of deletion, in either layout, and across the
        /// widening a narrow one makes when a line beyond 48 bits comes.
        #[test]
        fn the_directory_behaves_as_a_map(
            ops in proptest::collection::vec((0u64..3000, 0u8..4, any::<bool>(), 0u32..32), 1..4000),
            narrow: bool,
            far: bool,
            huge: bool,
        ) {
            let narrow = narrow && !huge;
            let mut d = match (narrow, huge) {
                (true, _) => Directory::new(64, 12),
                (false, false) => Directory::new(65, 12),
                (false, true) => Directory::new(65, 40),
            };
            prop_assert_eq!(d.is_narrow(), narrow);
            // A huge slot holds shared caches beyond the 32nd.
            let mask = |shared: u32| if huge { (shared as u64) << 32 | shared as u64 } else { shared as u64 % 4096 };
            let mut reference: HashMap<u64, u64> = HashMap::new();
            let mut widened = false;
            for (line, op, high, shared) in ops {
                // Some lines beyond a narrow slot's 48 bits, when `far`.
                let line = if far && high { line | 1 << 50 } else { line };
                match op {
                    0 | 1 => {
                        widened |= line >> 50 == 1;
                        // Every field of the entry changes: cores count, shared and dirty.
                        let n = d.entry(line, |e| {
                            e.set_cores(e.cores() + 1);
                            e.shared = mask(shared);
                            e.dirty = (shared % 13) as u8;
                            e.cores() as u64
                        });
                        let r = reference.entry(line).or_default();
                        *r += 1;
                        prop_assert_eq!(n, *r);
                        let e = d.get(line).unwrap();
                        prop_assert_eq!((e.shared, e.dirty), (mask(shared), (shared % 13) as u8));
                    }
                    2 => {
                        prop_assert_eq!(d.remove(line).map(|e| e.cores() as u64), reference.remove(&line));
                    }
                    _ => {
                        d.update(line, false, |e| {
                            e.set_cores(0);
                            e.shared = 0;
                        });
                        reference.remove(&line);
                    }
                }
                prop_assert_eq!(d.entries(), reference.len());
            }
            prop_assert_eq!(d.is_narrow(), narrow && !widened);
            for (&line, &n) in &reference {
                prop_assert_eq!(d.get(line).map(|e| e.cores() as u64), Some(n));
            }
            prop_assert_eq!(d.iter().len(), reference.len());
        }
    }

    /// The lines of a group, put in an empty table, share one of the host's cache lines, in
    /// either layout; a table's homes cover all its slots.
    #[test]
    fn a_group_of_lines_takes_one_host_line() {
        fn host_lines<S: Slot>(t: &mut Table<S>, keys: std::ops::Range<u64>) -> Vec<usize> {
            let slots: Vec<usize> = keys.map(|k| t.find_or_add(k)).collect();
            let mut at: Vec<usize> = slots.iter().map(|&i| &t.slots[i] as *const S as usize / 64).collect();
            at.dedup();
            at
        }
        let mut narrow = Table::<Narrow>::with_bits(FIRST_BITS);
        let mut wide = Table::<Wide>::with_bits(FIRST_BITS);
        for first in [4000, 4004, 4, 1 << 40] {
            assert_eq!(host_lines(&mut narrow, first..first + 4).len(), 1, "{first}");
            assert_eq!(host_lines(&mut wide, first..first + 2).len(), 1, "{first}");
        }
        let homes: std::collections::HashSet<usize> = (0..1 << 16).map(|k| narrow.home(k)).collect();
        assert_eq!(homes.len(), 1 << FIRST_BITS);
    }

    /// A narrow slot keeps every field it is made for at its extremes.
    #[test]
    fn a_narrow_slot_round_trips() {
        let dir = Dir { cores: [u64::MAX, 0], shared: 0xFFF, dirty: 12 };
        let key = (1 << NARROW_KEY_BITS) - 1;
        let s = Narrow::new(key, dir);
        assert_eq!((s.key(), s.dir()), (key, dir));
        assert!(!Narrow::holds(key + 1));
    }
}
