//! STMap's shared tables, updated by every thread at once without locks and without lost or
//! torn updates: per address the last two threads (Algorithm 1), the sharing matrix, and
//! per page its dominant thread.
//!
//! Each table is open-addressed with linear probing over keys that are never removed; a
//! key is claimed with a compare-and-swap and its state word changed with compare-and-swap
//! loops, so each access is applied exactly once, as if in some order.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Threads STMap follows (slots beyond are not sampled).
pub const MAX_THREADS: usize = 256;
/// Probes before a key is given up on (the table counts it as a distinct address anyway).
const PROBES: usize = 32;

fn zeroed64(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

fn hash(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// Open-addressed keys (0 is empty): the index of `key`, inserting it; `new` says whether
/// it was inserted now. None when its probe run is full.
fn find_or_insert(keys: &[AtomicU64], bits: u32, key: u64) -> Option<(usize, bool)> {
    let mask = keys.len() - 1;
    let mut i = hash(key, bits);
    for _ in 0..PROBES {
        let k = keys[i].load(Ordering::Acquire);
        if k == key {
            return Some((i, false));
        }
        if k == 0 {
            match keys[i].compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some((i, true)),
                Err(now) if now == key => return Some((i, false)),
                Err(_) => {}
            }
        }
        i = (i + 1) & mask;
    }
    None
}

/// No thread in a slot of the last-two pair.
pub const NONE: u16 = u16::MAX;

/// Algorithm 1 on one address's state (t1 the last accessor, t2 the one before, packed as
/// t1 | t2 << 16): the new state and the threads `tid` communicates with.
pub fn last_two_step(state: u32, tid: u16) -> (u32, [u16; 2]) {
    let (t1, t2) = (state as u16, (state >> 16) as u16);
    let pack = |a: u16, b: u16| a as u32 | (b as u32) << 16;
    if t1 == NONE {
        (pack(tid, NONE), [NONE; 2])
    } else if t2 == NONE {
        if t1 == tid { (state, [NONE; 2]) } else { (pack(tid, t1), [t1, NONE]) }
    } else if t1 != tid && t2 != tid {
        (pack(tid, t1), [t1, t2])
    } else if t1 == tid {
        (state, [t2, NONE])
    } else {
        (pack(tid, t1), [t1, NONE])
    }
}

/// Per address (word), the last two threads; the sharing matrix they feed.
pub struct Sharing {
    bits: u32,
    keys: Box<[AtomicU64]>,
    pairs: Box<[AtomicU32]>,
    /// Lower triangle: cell (i, j), i > j, at i * MAX_THREADS + j.
    matrix: Box<[AtomicU64]>,
    distinct: AtomicU64,
}

impl Sharing {
    /// A table of 2^`bits` addresses.
    pub fn new(bits: u32) -> Sharing {
        let n = 1usize << bits;
        Sharing {
            bits,
            keys: zeroed64(n),
            pairs: (0..n).map(|_| AtomicU32::new(u32::MAX)).collect(),
            matrix: zeroed64(MAX_THREADS * MAX_THREADS),
            distinct: AtomicU64::new(0),
        }
    }

    /// Algorithm 1 for thread `tid` (below MAX_THREADS) accessing `addr`.
    pub fn record(&self, addr: usize, tid: u16) {
        let key = (addr as u64 >> 3) + 1;
        let Some((i, new)) = find_or_insert(&self.keys, self.bits, key) else {
            // A full probe run: an address the table cannot hold still counts as distinct.
            self.distinct.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if new {
            self.distinct.fetch_add(1, Ordering::Relaxed);
        }
        let cell = &self.pairs[i];
        let mut state = cell.load(Ordering::Acquire);
        let partners = loop {
            let (next, partners) = last_two_step(state, tid);
            if next == state {
                break partners;
            }
            match cell.compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break partners,
                Err(now) => state = now,
            }
        };
        for p in partners.into_iter().filter(|&p| p != NONE && p != tid) {
            let (a, b) = if tid > p { (tid, p) } else { (p, tid) };
            self.matrix[a as usize * MAX_THREADS + b as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Distinct addresses seen (Equation 1's da).
    pub fn distinct(&self) -> u64 {
        self.distinct.load(Ordering::Relaxed)
    }

    /// The matrix among the first `n` threads, as counts (row-major, symmetric).
    pub fn counts(&self, n: usize) -> Vec<u64> {
        let n = n.min(MAX_THREADS);
        let mut out = vec![0; n * n];
        for i in 0..n {
            for j in 0..i {
                let v = self.matrix[i * MAX_THREADS + j].load(Ordering::Relaxed);
                out[i * n + j] = v;
                out[j * n + i] = v;
            }
        }
        out
    }
}

/// A page's samples, packed: the Boyer-Moore majority candidate (16 bits), its count (24)
/// and the page's total (24). The candidate made at least `count` of the samples, and it is
/// the thread that made more than half of them if one did.
pub fn page_step(state: u64, tid: u16) -> u64 {
    let (mut cand, mut count, mut total) = unpack_page(state);
    total += 1;
    if cand == tid {
        count += 1;
    } else if count == 0 {
        cand = tid;
        count = 1;
    } else {
        count -= 1;
    }
    if total >= (1 << 24) - 1 {
        // Keep the proportions, halve the counts.
        total /= 2;
        count /= 2;
    }
    cand as u64 | (count as u64) << 16 | (total as u64) << 40
}

pub fn unpack_page(state: u64) -> (u16, u32, u32) {
    if state == 0 {
        return (NONE, 0, 0);
    }
    (state as u16, (state >> 16) as u32 & 0xFF_FFFF, (state >> 40) as u32 & 0xFF_FFFF)
}

/// Per page, which thread samples it most.
pub struct Pages {
    bits: u32,
    page_shift: u32,
    keys: Box<[AtomicU64]>,
    states: Box<[AtomicU64]>,
}

impl Pages {
    pub fn new(bits: u32, page_size: usize) -> Pages {
        let n = 1usize << bits;
        Pages { bits, page_shift: page_size.trailing_zeros(), keys: zeroed64(n), states: zeroed64(n) }
    }

    pub fn record(&self, addr: usize, tid: u16) {
        let key = (addr as u64 >> self.page_shift) + 1;
        let Some((i, _)) = find_or_insert(&self.keys, self.bits, key) else { return };
        let cell = &self.states[i];
        let mut state = cell.load(Ordering::Acquire);
        while let Err(now) =
            cell.compare_exchange_weak(state, page_step(state, tid), Ordering::AcqRel, Ordering::Acquire)
        {
            state = now;
        }
    }

    /// Pages with at least `min_samples` samples of which one thread made at least the
    /// fraction `share` (by the candidate's count, a lower bound): (page address, thread).
    pub fn dominated(&self, min_samples: u32, share: f64) -> Vec<(usize, u16)> {
        let mut out = Vec::new();
        for (k, s) in self.keys.iter().zip(self.states.iter()) {
            let key = k.load(Ordering::Acquire);
            if key == 0 {
                continue;
            }
            let (cand, count, total) = unpack_page(s.load(Ordering::Acquire));
            if total >= min_samples && count as f64 >= share * total as f64 {
                out.push((((key - 1) << self.page_shift) as usize, cand));
            }
        }
        out
    }

    /// Forgets a page's samples (after it moved).
    pub fn reset(&self, page: usize) {
        let key = (page as u64 >> self.page_shift) + 1;
        if let Some((i, _)) = find_or_insert(&self.keys, self.bits, key) {
            self.states[i].store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Algorithm 1 as the paper writes it, on (accesses, t1, t2): the reference.
    fn paper(acc: u8, t1: u16, t2: u16, tid: u16) -> (u8, u16, u16, Vec<u16>) {
        match acc {
            0 => (1, tid, t2, vec![]),
            1 if t1 != tid => (2, tid, t1, vec![t1]),
            1 => (1, t1, t2, vec![]),
            _ if t1 != tid && t2 != tid => (2, tid, t1, vec![t1, t2]),
            _ if t1 == tid => (2, t1, t2, vec![t2]),
            _ => (2, tid, t1, vec![t1]),
        }
    }

    proptest! {
        /// The packed step agrees with the paper's three cases on any access sequence.
        #[test]
        fn last_two_step_is_algorithm_1(seq in proptest::collection::vec(0u16..5, 1..60)) {
            let (mut acc, mut t1, mut t2) = (0u8, NONE, NONE);
            let mut state = u32::MAX;
            for &tid in &seq {
                let (a, n1, n2, want) = paper(acc, t1, t2, tid);
                let (next, got) = last_two_step(state, tid);
                let got: Vec<u16> = got.into_iter().filter(|&p| p != NONE).collect();
                prop_assert_eq!(got, want);
                (acc, t1, t2, state) = (a, n1, n2, next);
                prop_assert_eq!(state as u16, t1);
                if acc == 2 {
                    prop_assert_eq!((state >> 16) as u16, t2);
                }
            }
        }

        /// The candidate is the majority thread whenever there is one, and the bound holds.
        #[test]
        fn page_candidate_is_the_majority_and_its_count_a_lower_bound(seq in proptest::collection::vec(0u16..3, 1..200)) {
            let mut s = 0u64;
            for &t in &seq {
                s = page_step(s, t);
            }
            let (cand, count, total) = unpack_page(s);
            prop_assert_eq!(total as usize, seq.len());
            let freq = seq.iter().filter(|&&t| t == cand).count() as u32;
            prop_assert!(freq >= count, "freq {} total {} count {}", freq, total, count);
            for t in 0..3u16 {
                let f = seq.iter().filter(|&&x| x == t).count();
                if 2 * f > seq.len() {
                    prop_assert_eq!(cand, t);
                }
            }
        }
    }

    /// Many threads recording at once lose nothing. Once two threads have touched an
    /// address, each later access by either makes exactly one event (Algorithm 1's cases
    /// 1 and 2), whatever the interleaving: the counts are exact.
    #[test]
    fn concurrent_records_are_exact() {
        let table = Sharing::new(12);
        let base = |t: u16| if t < 2 { 0x10000 } else { 0x20000 };
        for t in 0..4u16 {
            for k in 0..100 {
                table.record(base(t) + 8 * k, t);
            }
        }
        std::thread::scope(|s| {
            for t in 0..4u16 {
                let table = &table;
                s.spawn(move || {
                    for _ in 0..1000 {
                        for k in 0..100 {
                            table.record(base(t) + 8 * k, t);
                        }
                    }
                });
            }
        });
        let m = table.counts(4);
        let each = 100 * (1 + 2 * 1000);
        assert_eq!((m[4], m[3 * 4 + 2]), (each, each), "pairs (0,1) and (2,3)");
        assert_eq!(m.iter().sum::<u64>(), 2 * 2 * each, "nothing outside the pairs");
        assert_eq!(table.distinct(), 200);
    }
}
