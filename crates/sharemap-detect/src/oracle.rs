//! The oracle detector: every access, the numalize/SPCD definition of sharing. Each memory
//! block (a cache line or a page) remembers the last two distinct threads that accessed it;
//! an access by a thread adds one unit of sharing with each of them that is another thread.

use crate::detector::{Detection, Detector, DetectorContext, DetectorInfo};
use sharemap_core::plugin::{Caps, ParamKind, given};
use sharemap_core::{DenseIndex, PageCounter, RecentPerThread, SharingMatrix};
use sharemap_trace::Chunk;

const NONE: u32 = u32::MAX;

/// The block size sharing is detected at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    Line,
    Page,
}

/// Blocks per group: the last-two-threads table is kept in groups of adjacent blocks, so a
/// run of accesses to one region finds its group without hashing and random lookups hash a
/// map 64 times smaller than one entry per block.
const GROUP_BITS: u32 = 6;

/// Per block: the last two distinct threads, most recent first.
struct LastTwo {
    index: DenseIndex,
    /// The key (block >> GROUP_BITS) of each group.
    keys: Vec<u64>,
    groups: Vec<[[u32; 2]; 1 << GROUP_BITS]>,
    /// In a later run of the trace (see `Oracle::join`): per block, the first thread and the
    /// first other thread it saw.
    firsts: Option<Vec<[[u32; 2]; 1 << GROUP_BITS]>>,
    /// Each thread's last two groups: most accesses stay in them.
    recent: RecentPerThread,
}

impl LastTwo {
    fn new(later_run: bool) -> Self {
        LastTwo {
            index: DenseIndex::default(),
            keys: Vec::new(),
            groups: Vec::new(),
            firsts: later_run.then(Vec::new),
            recent: RecentPerThread::default(),
        }
    }

    #[inline(always)]
    fn slot(&mut self, thread: u32, block: u64) -> &mut [u32; 2] {
        let key = block >> GROUP_BITS;
        let i = match self.recent.get(thread as usize, key) {
            Some(i) => i,
            None => {
                let (i, new) = self.index.id(key);
                if new {
                    self.keys.push(key);
                    self.groups.push([[NONE, NONE]; 1 << GROUP_BITS]);
                    if let Some(f) = self.firsts.as_mut() {
                        f.push([[NONE, NONE]; 1 << GROUP_BITS]);
                    }
                }
                self.recent.put(thread as usize, key, i);
                i
            }
        };
        &mut self.groups[i as usize][(block & ((1 << GROUP_BITS) - 1)) as usize]
    }

    /// Notes `thread` as the block's first thread (or its first other one, `second`).
    #[cold]
    #[inline(never)]
    fn note_first(&mut self, block: u64, thread: u32, second: bool) {
        if let (Some(f), Some(i)) = (self.firsts.as_mut(), self.index.get(block >> GROUP_BITS)) {
            f[i as usize][(block & ((1 << GROUP_BITS) - 1)) as usize][second as usize] = thread;
        }
    }
}

/// The oracle's rule over a trace, or over one run of it: a run after the first starts from
/// blocks it knows nothing of and notes, per block, the first thread and the first other
/// thread it saw, so that `join` can replay them on the state the earlier runs left. From
/// the second distinct thread on, a block's state no longer depends on where it started.
pub struct Oracle {
    shift: u32,
    last: LastTwo,
    pub matrix: SharingMatrix,
}

impl Oracle {
    /// Blocks of `block_size` bytes (a power of two).
    pub fn new(block_size: u64) -> Self {
        assert!(block_size.is_power_of_two());
        Oracle { shift: block_size.trailing_zeros(), last: LastTwo::new(false), matrix: SharingMatrix::new(0) }
    }

    /// An oracle for a later run of the same trace (see `join`).
    pub fn fork(&self) -> Oracle {
        Oracle { last: LastTwo::new(true), ..Oracle::new(1 << self.shift) }
    }

    #[inline]
    pub fn access(&mut self, thread: u32, addr: u64) {
        let block = addr >> self.shift;
        let slot = self.last.slot(thread, block);
        let [a, b] = *slot;
        if a == thread {
            return;
        }
        *slot = [thread, a];
        if b == NONE && self.last.firsts.is_some() {
            self.last.note_first(block, thread, a != NONE);
        }
        let need = thread.max(if a == NONE { 0 } else { a }).max(if b == NONE { 0 } else { b }) as usize + 1;
        if self.matrix.threads() < need {
            self.matrix.grow(need.next_power_of_two().max(need));
        }
        if a != NONE {
            self.matrix.add(thread as usize, a as usize, 1.0);
        }
        if b != NONE && b != thread {
            self.matrix.add(thread as usize, b as usize, 1.0);
        }
    }
}

impl Oracle {
    /// Adds what `later` (a `fork` fed the run right after the accesses this one saw) found,
    /// as if this one had gone on reading: its sharing, plus what its blocks' first threads
    /// share with the threads this one left there, and its blocks' final states.
    pub fn join(&mut self, later: Oracle) {
        let n = self.matrix.threads().max(later.matrix.threads());
        self.matrix.grow(n);
        for i in 0..later.matrix.threads() {
            for j in i + 1..later.matrix.threads() {
                let v = later.matrix.get(i, j);
                if v != 0.0 {
                    self.matrix.add(i, j, v);
                }
            }
        }
        let firsts = later.last.firsts.as_deref().unwrap_or(&[]);
        for ((&key, group), first) in later.last.keys.iter().zip(&later.last.groups).zip(firsts) {
            for (off, (&[x, y], &end)) in first.iter().zip(group).enumerate() {
                if x == NONE {
                    continue;
                }
                let block = key << GROUP_BITS | off as u64;
                let slot = self.last.slot(x, block);
                let [a, b] = *slot;
                // The run's first thread: it counted nothing, the block looked untouched.
                if a != x {
                    for other in [a, b] {
                        if other != NONE && other != x {
                            self.matrix.add(x as usize, other as usize, 1.0);
                        }
                    }
                    *slot = [x, a];
                }
                if y != NONE {
                    // The first other thread: the run counted its sharing with x, not with
                    // what came before x. From here the run's state holds.
                    let [_, before] = *slot;
                    if before != NONE && before != y {
                        self.matrix.add(y as usize, before as usize, 1.0);
                    }
                    *slot = end;
                }
            }
        }
    }
}

pub(crate) const INFO: DetectorInfo = DetectorInfo {
    name: "oracle",
    source: "numalize / SPCD's definition of sharing: every access seen",
    summary: "each block remembers its last two threads; an access by another thread adds one unit of sharing with each of them (a thread repeating its own access adds nothing)",
    params: &[
        given("line", "", ParamKind::Switch, "cache-line blocks (the default)"),
        given("page", "", ParamKind::Switch, "page blocks instead"),
    ],
    caps: Caps::WINDOWS,
    build: |params, ctx| {
        let granularity = if params.get_switch("page") == Some(true) { Granularity::Page } else { Granularity::Line };
        Ok(Box::new(OracleDetector::new(granularity, ctx)))
    },
};

/// What the oracle-based detectors share: the accesses they keep go to the oracle's rule and
/// to the page usage; the rest are only counted.
pub struct Seen {
    oracle: Oracle,
    usage: PageCounter,
    seen: u64,
    accesses: u64,
}

impl Seen {
    /// Sharing in blocks of `block` bytes; page usage by the context's pages.
    pub fn new(block: u64, ctx: &DetectorContext) -> Self {
        Seen { oracle: Oracle::new(block), usage: PageCounter::new(ctx.page_size.bytes()), seen: 0, accesses: 0 }
    }

    /// An access the detector keeps (counted by `looked_at`: a count kept in a local
    /// variable, where a field incremented per access costs a memory round trip).
    #[inline]
    pub fn keep(&mut self, thread: u32, addr: u64) {
        self.oracle.access(thread, addr);
        self.usage.access(thread, addr);
    }

    /// Keeps the chunk's accesses that `keep(position, thread, addr)` accepts, in order.
    #[inline]
    pub fn filter(&mut self, chunk: &Chunk, mut keep: impl FnMut(u64, u32, u64) -> bool) {
        let a = &chunk.accesses;
        let mut kept = 0u64;
        for (i, (&t, &addr)) in a.thread.iter().zip(&a.addr).enumerate() {
            if keep(chunk.first_access + i as u64, t, addr) {
                self.keep(t, addr);
                kept += 1;
            }
        }
        self.looked_at(a.len(), kept);
    }

    /// A chunk's `looked` accesses have been looked at, `kept` of them kept.
    pub fn looked_at(&mut self, looked: usize, kept: u64) {
        self.accesses += looked as u64;
        self.seen += kept;
    }

    pub fn matrix(&self) -> &SharingMatrix {
        &self.oracle.matrix
    }

    /// The same detection for a later run of the trace (see `join`).
    pub fn fork(&self) -> Seen {
        Seen { oracle: self.oracle.fork(), usage: PageCounter::new(self.usage.page_size()), seen: 0, accesses: 0 }
    }

    /// Adds what `later` (a `fork` fed the run right after this one's) found.
    pub fn join(&mut self, later: Seen) {
        self.oracle.join(later.oracle);
        self.usage.append(later.usage);
        self.seen += later.seen;
        self.accesses += later.accesses;
    }

    pub fn finish(self) -> Detection {
        Detection {
            matrix: self.oracle.matrix,
            pages: self.usage.finish(),
            seen: self.seen,
            accesses: self.accesses,
            report: None,
            decision: None,
        }
    }
}

/// Every access, fed to the oracle's rule, with the page usage of the trace.
pub struct OracleDetector {
    granularity: Granularity,
    seen: Seen,
}

impl OracleDetector {
    pub fn new(granularity: Granularity, ctx: &DetectorContext) -> Self {
        let block = match granularity {
            Granularity::Line => ctx.line_size,
            Granularity::Page => ctx.page_size.bytes(),
        };
        OracleDetector { granularity, seen: Seen::new(block, ctx) }
    }
}

impl Detector for OracleDetector {
    fn granularity(&self) -> crate::Granularity {
        self.granularity
    }

    fn spec(&self) -> String {
        match self.granularity {
            Granularity::Line => "oracle:line".into(),
            Granularity::Page => "oracle:page".into(),
        }
    }

    fn chunk(&mut self, chunk: &Chunk) {
        let a = &chunk.accesses;
        for (&t, &addr) in a.thread.iter().zip(&a.addr) {
            self.seen.keep(t, addr);
        }
        self.seen.looked_at(a.len(), a.len() as u64);
    }

    fn matrix(&self) -> &SharingMatrix {
        self.seen.matrix()
    }

    fn finish(self: Box<Self>) -> Detection {
        self.seen.finish()
    }

    fn fork(&self) -> Option<Box<dyn Detector>> {
        Some(Box::new(OracleDetector { granularity: self.granularity, seen: self.seen.fork() }))
    }

    fn join(&mut self, later: Box<dyn Detector>) {
        self.seen.join(later.into_seen().expect("a fork of this detector"));
    }

    fn into_seen(self: Box<Self>) -> Option<Seen> {
        Some(self.seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prop_assert_eq;

    fn run(accesses: &[(u32, u64)], block: u64) -> SharingMatrix {
        let mut o = Oracle::new(block);
        for &(t, a) in accesses {
            o.access(t, a);
        }
        let mut m = SharingMatrix::new(4);
        for i in 0..o.matrix.threads().min(4) {
            for j in i + 1..o.matrix.threads().min(4) {
                m.add(i, j, o.matrix.get(i, j));
            }
        }
        m
    }

    #[test]
    fn last_two_threads_per_block() {
        // Line 0: 0, 1 (shares with 0), 1 (same thread: nothing), 2 (shares with 1 and 0),
        // 0 (shares with 2 and 1). Line 1 (addr 64): thread 3 alone.
        let m = run(&[(0, 0), (1, 8), (1, 16), (2, 0), (0, 32), (3, 64), (3, 70)], 64);
        assert_eq!(m.get(0, 1), 2.0);
        assert_eq!(m.get(1, 2), 1.0);
        assert_eq!(m.get(0, 2), 2.0);
        assert_eq!(m.get(0, 3) + m.get(1, 3) + m.get(2, 3), 0.0);
        assert_eq!(m.get(1, 0), m.get(0, 1), "symmetric");
    }

    proptest::proptest! {
        /// Reading the accesses in runs (each a fork, joined in order) finds exactly what one
        /// pass finds: the same matrix, the same page usage, whatever the cuts.
        #[test]
        fn runs_joined_in_order_equal_one_pass(
            accesses in proptest::collection::vec((0u32..6, 0u64..40), 0..400),
            cuts in proptest::collection::vec(0usize..400, 0..5),
            block in proptest::prop_oneof![proptest::strategy::Just(8u64), proptest::strategy::Just(64)],
        ) {
            let machine = sharemap_machine::Machine::from_spec("pu:4").unwrap();
            let placement = sharemap_machine::ThreadPlacement::identity(&machine);
            let ctx = DetectorContext {
                line_size: 64,
                page_size: sharemap_core::PageSize::new(64).unwrap(),
                threads: 0,
                placement: &placement,
            };
            let addr = |a: u64| a * 8;
            let mut whole = Seen::new(block, &ctx);
            accesses.iter().for_each(|&(t, a)| whole.keep(t, addr(a)));
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(accesses.len())).collect();
            cuts.sort();
            cuts.push(accesses.len());
            let mut joined = Seen::new(block, &ctx);
            let mut from = 0;
            for (k, &to) in cuts.iter().enumerate() {
                let mut run = if k == 0 { Seen::new(block, &ctx) } else { joined.fork() };
                accesses[from..to].iter().for_each(|&(t, a)| run.keep(t, addr(a)));
                if k == 0 { joined = run } else { joined.join(run) }
                from = to;
            }
            let (a, b) = (whole.finish(), joined.finish());
            let n = a.matrix.threads().max(b.matrix.threads());
            prop_assert_eq!(fit_to(&a.matrix, n), fit_to(&b.matrix, n));
            prop_assert_eq!(a.pages.sorted(), b.pages.sorted());
        }
    }

    fn fit_to(m: &SharingMatrix, n: usize) -> Vec<f64> {
        (0..n)
            .flat_map(|i| (0..n).map(move |j| if i < m.threads() && j < m.threads() { m.get(i, j) } else { 0.0 }))
            .collect()
    }

    #[test]
    fn granularity_changes_what_is_shared() {
        // Threads 0 and 1 touch different lines of one page.
        let acc = [(0, 0), (1, 64), (0, 128), (1, 192)];
        assert_eq!(run(&acc, 64).total(), 0.0);
        // At page granularity: 1 shares with 0, then 0 with 1, then 1 with 0: 3 units.
        assert_eq!(run(&acc, 4096).get(0, 1), 3.0);
    }

    #[test]
    fn a_trace_gives_matrix_and_page_usage() {
        use sharemap_trace::{Access, MemoryTrace};
        // Thread 0 writes a line, thread 1 reads it twice, thread 2 works alone on another page.
        let mut trace = MemoryTrace::from_accesses([
            Access::write(0, 0x1000, 8),
            Access::read(1, 0x1008, 8),
            Access::read(1, 0x1010, 8),
            Access::write(2, 0x5000, 8),
        ]);
        let machine = sharemap_machine::Machine::from_spec("pu:4").unwrap();
        let d =
            crate::pass::detect(&mut trace, "oracle", &sharemap_machine::ThreadPlacement::identity(&machine)).unwrap();
        let (m, pages) = (d.matrix, d.pages);
        assert_eq!(m.threads(), 3);
        assert_eq!(m.get(0, 1), 1.0);
        assert_eq!(m.total(), 1.0);
        let csv = pages.to_numalize_csv(3, |t| t / 2);
        assert_eq!(
            csv,
            "page.address,alloc.thread,alloc.location,firsttouch.thread,firsttouch.location,structure.name,T0,T1,T2\n\
             0x1000,0,0,0,0,,1,2,0\n0x5000,2,1,2,1,,0,0,1\n"
        );
    }
}

#[cfg(test)]
mod on_generators {
    use super::*;
    use sharemap_sources::VecSink;
    use sharemap_sources::generate::{self, GenParams};

    fn matrix(pattern: &str, threads: u32) -> SharingMatrix {
        let mut sink = VecSink::default();
        generate::run(generate::find(pattern).unwrap(), &GenParams::new(threads, 400_000, 1), &mut sink).unwrap();
        let mut o = Oracle::new(64);
        for a in &sink.accesses {
            o.access(a.thread, a.addr);
        }
        let mut m = SharingMatrix::new(threads as usize);
        for i in 0..threads as usize {
            for j in i + 1..threads as usize {
                m.add(i, j, o.matrix.get(i, j));
            }
        }
        m
    }

    #[test]
    fn private_data_is_not_shared() {
        assert_eq!(matrix("private", 8).total(), 0.0);
    }

    #[test]
    fn neighbours_share_with_neighbours_only() {
        let m = matrix("neighbor", 8);
        for i in 0..8usize {
            for j in 0..8usize {
                let adjacent = i.abs_diff(j) == 1;
                if i != j {
                    assert_eq!(m.get(i, j) > 0.0, adjacent, "threads {i} and {j}");
                }
            }
        }
    }

    #[test]
    fn all_to_all_shares_with_everyone() {
        let m = matrix("all-to-all", 8);
        assert!(m.pairs().all(|v| v > 0.0));
        // And far more evenly than neighbour sharing.
        let max = m.max();
        let min = m.pairs().fold(f64::INFINITY, f64::min);
        assert!(min > 0.3 * max, "min {min}, max {max}");
    }
}
