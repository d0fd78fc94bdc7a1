//! STMap's shared tables, updated by every thread at once without locks and without lost or
//! torn updates: per address the last two threads (Algorithm 1), the sharing matrix, and
//! per page its dominant thread.
//!
//! The address table is open-addressed with linear probing; each entry is one word holding
//! the address and its last two threads, so a sample costs one cache line and one
//! compare-and-swap, and each access is applied exactly once, as if in some order. The
//! matrix has a row per thread that only that thread writes: no two threads ever update one
//! cell, and no increment needs an atomic read-modify-write.

use sharemap_decide::stmap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

/// Threads STMap follows (slots beyond are not sampled).
pub const MAX_THREADS: usize = 256;
/// Probes before a key is given up on (the table counts it as a distinct address anyway).
const PROBES: usize = 32;
/// Probes of the address table: one or two cache lines. A sample whose run is full takes
/// the entry at its home slot (below), so a full table costs a sample 8 loads, not 32.
const ADDRESS_PROBES: usize = 8;

fn zeroed64(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// The slot of a key (Fibonacci hashing): neighbouring words land far apart, so threads
/// sampling neighbouring data do not contend for one cache line of the table.
fn hash(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// No thread in a slot of the last-two pair.
pub const NONE: u16 = u16::MAX;

/// An address-table entry: the word address (44 bits: user space is below 2^47 bytes) and
/// the last two threads, each stored plus one in 10 bits (0: none). 0 is an empty entry
/// (an occupied one always has a last thread).
const KEY_BITS: u32 = 44;
const KEY_MASK: u64 = (1 << KEY_BITS) - 1;

const THREAD_MASK: u64 = 0x3FF;

/// The last thread (t1) and the one before (t2) of an entry, each plus one (0: none).
fn entry_threads(e: u64) -> (u64, u64) {
    ((e >> KEY_BITS) & THREAD_MASK, e >> (KEY_BITS + 10))
}

fn entry(key: u64, t1: u64, t2: u64) -> u64 {
    key | t1 << KEY_BITS | t2 << (KEY_BITS + 10)
}

/// A thread as stored in an entry (0: none).
fn id(t: Option<NonZeroU64>) -> u64 {
    t.map_or(0, NonZeroU64::get)
}

/// Per address (word), the last two threads; the sharing matrix they feed.
pub struct Sharing {
    bits: u32,
    entries: Box<[AtomicU64]>,
    /// Row t: thread t's sharing with each other thread, written by thread t alone.
    rows: Box<[AtomicU64]>,
    distinct: AtomicU64,
}

impl Sharing {
    /// A table of 2^`bits` addresses.
    pub fn new(bits: u32) -> Sharing {
        Sharing {
            bits,
            entries: zeroed64(1 << bits),
            rows: zeroed64(MAX_THREADS * MAX_THREADS),
            distinct: AtomicU64::new(0),
        }
    }

    /// Starts bringing the entry of `addr` into this core's cache, for writing (measured:
    /// a shared prefetch cost more, the compare-and-swap then asking for the line again).
    #[inline]
    pub fn prefetch(&self, addr: usize) {
        let key = (addr as u64 >> 3) & KEY_MASK;
        let p = self.entries[hash(key, self.bits)].as_ptr();
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch only hints the cache; p points into the table.
        unsafe {
            std::arch::asm!("prefetchw [{}]", in(reg) p, options(nostack, preserves_flags, readonly));
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }

    /// Algorithm 1 (`sharemap_decide::stmap::algorithm_1`) for thread `tid` (below
    /// MAX_THREADS) accessing `addr`: the entry's last two threads replaced in one
    /// compare-and-swap, then `tid`'s row counted.
    pub fn record(&self, addr: usize, tid: u16) {
        let key = (addr as u64 >> 3) & KEY_MASK;
        let me = NonZeroU64::MIN.saturating_add(tid as u64);
        let mask = self.entries.len() - 1;
        let home = hash(key, self.bits);
        let mut i = home;
        // The common sample, data only this thread has sampled: Algorithm 1 changes nothing
        // and counts nothing (callgrind, the skip list at one thread: 55 instructions a
        // sample through the general case).
        let alone = entry(key, me.get(), 0);
        for _ in 0..ADDRESS_PROBES {
            let cell = &self.entries[i];
            let mut e = cell.load(Ordering::Acquire);
            if e == alone {
                return;
            }
            loop {
                if e != 0 && e & KEY_MASK != key {
                    break; // another address: probe on
                }
                // Threads are stored plus one, 0 for none: as NonZeroU64, an Option of one
                // is that same word. With Option<u64>, the pairs went through the stack and
                // a sample cost twice the instructions.
                let (t1, t2) = entry_threads(e);
                let (last, partners) = stmap::algorithm_1([NonZeroU64::new(t1), NonZeroU64::new(t2)], me);
                let next = entry(key, id(last[0]), id(last[1]));
                if next != e {
                    if let Err(now) = cell.compare_exchange_weak(e, next, Ordering::AcqRel, Ordering::Acquire) {
                        e = now;
                        continue;
                    }
                    if e == 0 {
                        self.distinct.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // Unrolled: an iterator over the partners kept them on the stack too.
                if let Some(p) = partners[0] {
                    self.count(tid, p);
                }
                if let Some(p) = partners[1] {
                    self.count(tid, p);
                }
                return;
            }
            i = (i + 1) & mask;
        }
        // A full probe run: the address replaces the one at its home slot (whose history
        // is forgotten), so a table filled by one phase of the program still learns the
        // next one's addresses. It counts as distinct.
        let cell = &self.entries[home];
        let old = cell.load(Ordering::Relaxed);
        let _ = cell.compare_exchange(old, entry(key, me.get(), 0), Ordering::AcqRel, Ordering::Relaxed);
        self.distinct.fetch_add(1, Ordering::Relaxed);
    }

    /// One communication event of `tid` with `partner` (plus one).
    #[inline]
    fn count(&self, tid: u16, partner: NonZeroU64) {
        let cell = &self.rows[tid as usize * MAX_THREADS + partner.get() as usize - 1];
        // Only thread `tid` writes its row.
        cell.store(cell.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
    /// Distinct addresses seen (Equation 1's da).
    pub fn distinct(&self) -> u64 {
        self.distinct.load(Ordering::Relaxed)
    }

    /// The matrix among the first `n` threads, as counts (row-major, symmetric).
    pub fn counts(&self, n: usize) -> Vec<u64> {
        let n = n.min(MAX_THREADS);
        let cell = |i: usize, j: usize| self.rows[i * MAX_THREADS + j].load(Ordering::Relaxed);
        let mut out = vec![0; n * n];
        for i in 0..n {
            for j in 0..i {
                let v = cell(i, j) + cell(j, i);
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

/// Per page, which node's threads sample it most (any small id works: the STM records
/// nodes): entries of two words (key + 1, state) side by side, so a sample touches one
/// cache line.
pub struct Pages {
    bits: u32,
    page_shift: u32,
    slots: Box<[AtomicU64]>,
}

impl Pages {
    pub fn new(bits: u32, page_size: usize) -> Pages {
        Pages { bits, page_shift: page_size.trailing_zeros(), slots: zeroed64(2 << bits) }
    }

    /// The entry of `key` (inserted if new), or None when its probe run is full.
    fn find(&self, key: u64) -> Option<usize> {
        let mask = (1usize << self.bits) - 1;
        let mut i = hash(key, self.bits);
        for _ in 0..PROBES {
            let k = &self.slots[2 * i];
            match k.load(Ordering::Acquire) {
                x if x == key => return Some(i),
                0 => match k.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return Some(i),
                    Err(now) if now == key => return Some(i),
                    Err(_) => {}
                },
                _ => {}
            }
            i = (i + 1) & mask;
        }
        None
    }

    pub fn record(&self, addr: usize, who: u16) {
        let Some(i) = self.find((addr as u64 >> self.page_shift) + 1) else { return };
        let cell = &self.slots[2 * i + 1];
        let mut state = cell.load(Ordering::Acquire);
        while let Err(now) =
            cell.compare_exchange_weak(state, page_step(state, who), Ordering::AcqRel, Ordering::Acquire)
        {
            state = now;
        }
    }

    /// Pages with at least `min_samples` samples of which one id made at least the fraction
    /// `share` (by the candidate's count, a lower bound): (page address, id).
    pub fn dominated(&self, min_samples: u32, share: f64) -> Vec<(usize, u16)> {
        let mut out = Vec::new();
        for pair in self.slots.chunks_exact(2) {
            let key = pair[0].load(Ordering::Acquire);
            if key == 0 {
                continue;
            }
            let (cand, count, total) = unpack_page(pair[1].load(Ordering::Acquire));
            if total >= min_samples && count as f64 >= share * total as f64 {
                out.push((((key - 1) << self.page_shift) as usize, cand));
            }
        }
        out
    }

    /// Forgets a page's samples (after it moved).
    pub fn reset(&self, page: usize) {
        if let Some(i) = self.find((page as u64 >> self.page_shift) + 1) {
            self.slots[2 * i + 1].store(0, Ordering::Release);
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
        /// The table agrees with the paper's three cases on any sequence of accesses to a
        /// few addresses: the same events, and the same last two threads per address.
        #[test]
        fn record_is_algorithm_1(seq in proptest::collection::vec((0u16..5, 0usize..3), 1..80)) {
            let table = Sharing::new(6);
            let mut state = [(0u8, NONE, NONE); 3];
            let mut want = [[0u64; 5]; 5];
            for &(tid, a) in &seq {
                let (acc, t1, t2) = state[a];
                let (acc, n1, n2, partners) = paper(acc, t1, t2, tid);
                state[a] = (acc, n1, n2);
                for p in partners {
                    want[tid as usize][p as usize] += 1;
                    want[p as usize][tid as usize] += 1;
                }
                table.record(0x1000 + 8 * a, tid);
            }
            let got = table.counts(5);
            for i in 0..5 {
                for j in 0..5 {
                    prop_assert_eq!(got[i * 5 + j], want[i][j], "cell ({}, {})", i, j);
                }
            }
            prop_assert_eq!(table.distinct(), state.iter().filter(|s| s.0 > 0).count() as u64);
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

    /// A table full of one phase's addresses still detects the sharing of the next: a new
    /// address takes an old one's entry.
    #[test]
    fn a_full_table_learns_new_addresses() {
        let table = Sharing::new(4);
        for k in 0..64 {
            table.record(0x10000 + 8 * k, 0);
        }
        // The first access takes an entry; each later one by the other thread is an event.
        for round in 0..3 {
            table.record(0x90000, 2);
            table.record(0x90000, 3);
            assert_eq!(table.counts(4)[2 * 4 + 3], 2 * round + 1, "round {round}: threads 2 and 3 share");
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
