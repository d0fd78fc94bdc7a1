//! The coherence directory: per line, who holds it. An open-addressed table with linear
//! probing whose slots hold the line and its entry together (32 bytes): a lookup is one of
//! the host's cache lines where a general hash map reads two (control bytes, then bucket).
//! On miss-heavy traces the directory is most of the simulator's time.

/// Where a line's copies are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dir {
    /// Cores holding the line in their private caches (a u128 in two words, so that a slot
    /// takes 32 bytes).
    cores: [u64; 2],
    /// Shared caches holding it (bits of `Model::shared_index`).
    pub shared: u32,
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

#[derive(Clone, Copy, Default)]
struct Slot {
    /// The line plus one; 0: empty.
    key: u64,
    dir: Dir,
}

pub struct Directory {
    slots: Vec<Slot>,
    bits: u32,
    len: usize,
    /// The slot of the line found last (a miss looks its line up several times). It needs
    /// no invalidation: the slot is used only when it still holds that line.
    last: std::cell::Cell<usize>,
}

impl Default for Directory {
    fn default() -> Self {
        Directory { slots: vec![Slot::default(); 1 << 12], bits: 12, len: 0, last: Default::default() }
    }
}

impl Directory {
    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize
    }

    /// The slot of `line`, or the empty slot where it would go.
    #[inline]
    fn find(&self, line: u64) -> (usize, bool) {
        let key = line + 1;
        let last = self.last.get();
        if self.slots[last].key == key {
            return (last, true);
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let k = self.slots[i].key;
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

    /// Lines with an entry.
    #[cfg(test)]
    pub fn entries(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn get(&self, line: u64) -> Option<&Dir> {
        match self.find(line) {
            (i, true) => Some(&self.slots[i].dir),
            _ => None,
        }
    }

    #[inline]
    pub fn get_mut(&mut self, line: u64) -> Option<&mut Dir> {
        match self.find(line) {
            (i, true) => Some(&mut self.slots[i].dir),
            _ => None,
        }
    }

    /// The entry of `line`, made empty if it had none.
    #[inline]
    pub fn entry(&mut self, line: u64) -> &mut Dir {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let (i, found) = self.find(line);
        if !found {
            self.slots[i] = Slot { key: line + 1, dir: Dir::default() };
            self.len += 1;
            self.last.set(i);
        }
        &mut self.slots[i].dir
    }

    /// Changes the entry of `line`, if any, with one lookup; removes it when it is then
    /// empty and `keep` is false.
    #[inline]
    pub fn update(&mut self, line: u64, keep: bool, f: impl FnOnce(&mut Dir)) {
        if let (i, true) = self.find(line) {
            f(&mut self.slots[i].dir);
            if !keep && self.slots[i].dir.is_empty() {
                self.remove_at(i);
            }
        }
    }

    pub fn remove(&mut self, line: u64) -> Option<Dir> {
        match self.find(line) {
            (i, true) => {
                let d = self.slots[i].dir;
                self.remove_at(i);
                Some(d)
            }
            _ => None,
        }
    }

    /// Empties slot `i`, moving later slots of its probe run back so that every key stays
    /// reachable from its home (linear probing's deletion, no tombstones).
    fn remove_at(&mut self, mut i: usize) {
        let mask = self.slots.len() - 1;
        self.slots[i] = Slot::default();
        self.len -= 1;
        let mut j = (i + 1) & mask;
        while self.slots[j].key != 0 {
            let h = self.home(self.slots[j].key);
            // The slot at j may move to i when its home is not within (i, j], cyclically.
            let stays = if i <= j { i < h && h <= j } else { i < h || h <= j };
            if !stays {
                self.slots[i] = self.slots[j];
                self.slots[j] = Slot::default();
                i = j;
            }
            j = (j + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.bits += 1;
        self.slots = vec![Slot::default(); 1 << self.bits];
        let mask = self.slots.len() - 1;
        for s in old.into_iter().filter(|s| s.key != 0) {
            let mut i = self.home(s.key);
            while self.slots[i].key != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }

    /// Every line with an entry (invariant checks).
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Dir)> + '_ {
        self.slots.iter().filter(|s| s.key != 0).map(|s| (s.key - 1, &s.dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Inserts, changes and removals in any order agree with a standard map, through
        /// growth and the backward shifts of deletion.
        #[test]
        fn the_directory_behaves_as_a_map(ops in proptest::collection::vec((0u64..3000, 0u8..4), 1..4000)) {
            let mut d = Directory::default();
            let mut reference: HashMap<u64, u32> = HashMap::new();
            for (line, op) in ops {
                match op {
                    0 | 1 => {
                        d.entry(line).shared += 1;
                        *reference.entry(line).or_default() += 1;
                    }
                    2 => {
                        prop_assert_eq!(d.remove(line).map(|e| e.shared), reference.remove(&line));
                    }
                    _ => {
                        d.update(line, false, |e| e.shared = 0);
                        reference.remove(&line);
                    }
                }
                prop_assert_eq!(d.entries(), reference.len());
            }
            for (&line, &n) in &reference {
                prop_assert_eq!(d.get(line).map(|e| e.shared), Some(n));
            }
            prop_assert_eq!(d.iter().count(), reference.len());
        }
    }
}
