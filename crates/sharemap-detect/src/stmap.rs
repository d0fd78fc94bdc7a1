//! STMap (seed 002): sharing detection inside a software transactional memory runtime.
//!
//! Algorithm 1 keeps, per memory address, the last two threads that accessed it and
//! updates the communication matrix in three cases (no, one or two previous accessors).
//! Algorithm 2 runs it on one access in SI+1 of each thread, and counts the accesses of
//! thread 1: at MI of them the mapping decision is taken, enabled by Equation 1 when fewer
//! than `da_threshold` distinct addresses were seen, else when thread 1's commit ratio is
//! below its abort ratio. When the trace has transaction events, only accesses inside a
//! transaction count (the runtime only sees transactional loads and stores).

use crate::detector::{Detection, Detector, DetectorInfo, Report};
use rustc_hash::FxHashMap;
use serde::Serialize;
use sharemap_core::plugin::{Caps, Param, Params, ranged};
use sharemap_core::{PageUsage, SharingMatrix};
use sharemap_decide::stmap;
use sharemap_trace::{Chunk, EventKind};

pub(crate) const INFO: DetectorInfo = DetectorInfo {
    name: "stmap",
    source: "STMap (seed 002), Algorithms 1 and 2 and Equation 1",
    summary: "per address, the last two threads (Algorithm 1) on one access in si+1 of each thread; at mi accesses of the counting thread it decides whether mapping pays (Equation 1); inside transactions only, when the trace has transaction events",
    params: PARAMS,
    caps: Caps::NONE,
    build: |params, ctx| Ok(Box::new(Stmap::new(StmapParams::from_params(params), ctx.page_size.bytes(), ctx.threads))),
};

/// STMap's parameters, with seed 002's defaults: the one table the detector and its
/// listing read.
pub const PARAMS: &[Param] =
    &[stmap::SI, stmap::MI, stmap::DA, ranged("thread", "1", 0, u32::MAX as u64, "the counting thread")];

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StmapParams {
    /// Sampling interval: Algorithm 1 runs once every `si + 1` accesses of a thread.
    pub si: u64,
    /// Mapping interval: accesses of the counting thread before the decision.
    pub mi: u64,
    /// Equation 1's distinct-address threshold.
    pub da_threshold: u64,
    /// The thread whose accesses and transactions are counted (seed 002: thread 1).
    pub counting_thread: u32,
}

impl Default for StmapParams {
    /// Seed 002's: SI 100, MI 100,000, DA 10,000, thread 1 counting (from `PARAMS`).
    fn default() -> Self {
        StmapParams::from_params(&Params::defaults(crate::detector::KIND, "stmap", PARAMS))
    }
}

impl StmapParams {
    /// From a table that has `PARAMS`' keys.
    pub fn from_params(p: &Params) -> StmapParams {
        StmapParams {
            si: p.integer("si"),
            mi: p.integer("mi"),
            da_threshold: p.integer("da"),
            counting_thread: p.integer("thread") as u32,
        }
    }
}

/// The mapping decision Algorithm 2 took (at the first time the counting thread reached MI).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct StmapDecision {
    /// Trace position of the decision; None if the counting thread never reached MI.
    pub at: Option<u64>,
    pub distinct_addresses: u64,
    /// Commit and abort ratios of the counting thread (None without transaction events).
    pub commit_ratio: Option<f64>,
    pub abort_ratio: Option<f64>,
    /// Equation 1. Without transaction events only its distinct-address half is decided:
    /// None when that half says no.
    pub enable: Option<bool>,
}

/// Algorithm 1 on one address (`sharemap_decide::stmap::algorithm_1`).
#[inline]
fn record(table: &mut FxHashMap<u64, [u32; 2]>, m: &mut SharingMatrix, addr: u64, tid: u32) {
    let e = table.entry(addr).or_insert([NONE, NONE]);
    let some = |t: u32| (t != NONE).then_some(t);
    let (last, partners) = stmap::algorithm_1([some(e[0]), some(e[1])], tid);
    *e = last.map(|t| t.unwrap_or(NONE));
    // Every thread seen has a row (the partners were seen before).
    if m.threads() <= tid as usize {
        m.grow((tid as usize + 1).next_power_of_two());
    }
    for p in partners.into_iter().flatten() {
        m.add(tid as usize, p as usize, 1.0);
    }
}

/// Algorithm 2's state over a stream of chunks.
pub struct Stmap {
    p: StmapParams,
    table: FxHashMap<u64, [u32; 2]>,
    matrix: SharingMatrix,
    usage: PageUsage,
    /// Per thread: accesses since its last sampled one.
    since_sample: Vec<u64>,
    in_tx: Vec<bool>,
    has_tx: bool,
    commits: u64,
    aborts: u64,
    counted: u64,
    decision: StmapDecision,
    /// The matrix when the decision was taken: what the STM maps with.
    matrix_at_decision: Option<SharingMatrix>,
    seen: u64,
    accesses: u64,
    threads: usize,
}

impl Stmap {
    pub fn new(p: StmapParams, page_size: u64, threads: usize) -> Self {
        Stmap {
            p,
            table: FxHashMap::default(),
            matrix: SharingMatrix::new(0),
            usage: PageUsage::new(page_size.max(1)),
            since_sample: vec![0; threads],
            in_tx: vec![false; threads],
            has_tx: false,
            commits: 0,
            aborts: 0,
            counted: 0,
            decision: StmapDecision::default(),
            matrix_at_decision: None,
            seen: 0,
            accesses: 0,
            threads,
        }
    }

    fn event(&mut self, e: &sharemap_trace::Event) {
        let th = e.thread as usize;
        if self.in_tx.len() <= th {
            self.in_tx.resize(th + 1, false);
        }
        let tx = matches!(e.kind, EventKind::TxBegin | EventKind::TxCommit | EventKind::TxAbort);
        if tx && !self.has_tx {
            self.forget_what_came_before();
        }
        match e.kind {
            EventKind::TxBegin => {
                self.has_tx = true;
                self.in_tx[th] = true;
            }
            EventKind::TxCommit | EventKind::TxAbort => {
                self.has_tx = true;
                self.in_tx[th] = false;
                if e.thread == self.p.counting_thread && self.decision.at.is_none() {
                    if e.kind == EventKind::TxCommit { self.commits += 1 } else { self.aborts += 1 }
                }
            }
            _ => {}
        }
    }

    /// At the trace's first transaction event: every access so far was outside any
    /// transaction (a transaction's accesses follow its begin), which an STM never sees, so
    /// it is forgotten. (Counted until then because a trace without transaction events is
    /// read as all transactional, and the header cannot say which kind a recording is.)
    fn forget_what_came_before(&mut self) {
        self.table.clear();
        self.matrix = SharingMatrix::new(self.matrix.threads());
        self.usage = PageUsage::new(self.usage.page_size);
        self.since_sample.iter_mut().for_each(|s| *s = 0);
        (self.counted, self.seen) = (0, 0);
        self.decision = StmapDecision::default();
        self.matrix_at_decision = None;
    }

    /// The accesses and events of one chunk, in trace order.
    fn take_chunk(&mut self, chunk: &Chunk) {
        let a = &chunk.accesses;
        let n = a.len();
        let mut events = chunk.events.iter().peekable();
        let mut i = 0;
        while i < n {
            // Events at a position come before the access there.
            let here = chunk.first_access + i as u64;
            while let Some(e) = events.next_if(|e| e.at <= here) {
                self.event(e);
            }
            let end = events.peek().map_or(n, |e| (e.at - chunk.first_access).min(n as u64) as usize);
            for k in i..end {
                self.access(a.thread[k], a.addr[k], chunk.first_access + k as u64);
            }
            i = end;
        }
        // Events after the chunk's last access.
        for e in events {
            self.event(e);
        }
        self.accesses = chunk.first_access + n as u64;
    }

    #[inline]
    fn access(&mut self, t: u32, addr: u64, at: u64) {
        let tu = t as usize;
        if tu >= self.since_sample.len() {
            self.since_sample.resize(tu + 1, 0);
            self.in_tx.resize(self.in_tx.len().max(tu + 1), false);
            self.threads = self.threads.max(tu + 1);
        }
        // Only transactional accesses reach an STM.
        if self.has_tx && !self.in_tx[tu] {
            return;
        }
        let since = &mut self.since_sample[tu];
        *since += 1;
        if *since > self.p.si {
            *since = 0;
            record(&mut self.table, &mut self.matrix, addr, t);
            self.usage.access(t, addr);
            self.seen += 1;
        }
        if t == self.p.counting_thread && self.decision.at.is_none() {
            self.counted += 1;
            if self.counted >= self.p.mi {
                self.decide(at);
            }
        }
    }

    /// Equation 1, when the counting thread reaches MI.
    fn decide(&mut self, at: u64) {
        let da = self.table.len() as u64;
        let total = self.commits + self.aborts;
        let (cr, ar) = if total > 0 {
            (Some(self.commits as f64 / total as f64), Some(self.aborts as f64 / total as f64))
        } else {
            (None, None)
        };
        let enable = stmap::equation_1(da, self.p.da_threshold, self.commits, self.aborts);
        self.decision =
            StmapDecision { at: Some(at), distinct_addresses: da, commit_ratio: cr, abort_ratio: ar, enable };
        self.matrix_at_decision = Some(self.matrix.clone());
    }

    /// The matrix, the page usage and the decision.
    pub fn finish_with_decision(mut self) -> (Detection, StmapDecision) {
        if self.decision.at.is_none() {
            self.decision.distinct_addresses = self.table.len() as u64;
        }
        let d = &self.decision;
        let line = match d.at {
            Some(at) => format!(
                "STMap decision at access {at}: {} distinct addresses; mapping {}",
                d.distinct_addresses,
                match d.enable {
                    Some(true) => "enabled",
                    Some(false) => "disabled (commit ratio >= abort ratio)",
                    None => "undecided: too many distinct addresses and no transaction events",
                }
            ),
            None => "STMap: the counting thread never reached the mapping interval".to_string(),
        };
        let report = Report {
            key: "stmap",
            json: serde_json::to_value(d).expect("a decision serialises"),
            lines: vec![line.clone()],
        };
        let decision = self.decision.clone();
        let mapping = crate::detector::MappingDecision {
            map: d.enable == Some(true),
            matrix: self.matrix_at_decision.take().unwrap_or_else(|| SharingMatrix::new(self.matrix.threads())),
            why: line,
        };
        let detection = Detection {
            matrix: self.matrix,
            pages: self.usage,
            seen: self.seen,
            accesses: self.accesses,
            report: Some(report),
            decision: Some(mapping),
        };
        (detection, decision)
    }
}

/// Equation 1 as it would be taken on a machine where every thread progresses at thread 1's
/// rate (seed 002's: one thread per PU). A trace recorded with more threads than cores holds
/// the order the host's scheduler gave them, and the distinct addresses seen by the time
/// thread 1 reaches MI depend on how many other threads ran meanwhile (on 2 cores, genome's
/// varied twofold run to run). Here each thread's first MI transactional accesses count,
/// sampled as Algorithm 2 samples them, and thread 1's commits and aborts up to its MI.
pub struct EqualProgress {
    p: StmapParams,
    distinct: rustc_hash::FxHashSet<u64>,
    /// Per thread: transactional accesses counted, accesses since the last sample, in a
    /// transaction.
    counted: Vec<u64>,
    since_sample: Vec<u64>,
    in_tx: Vec<bool>,
    has_tx: bool,
    commits: u64,
    aborts: u64,
}

impl EqualProgress {
    pub fn new(p: StmapParams) -> Self {
        EqualProgress {
            p,
            distinct: Default::default(),
            counted: Vec::new(),
            since_sample: Vec::new(),
            in_tx: Vec::new(),
            has_tx: false,
            commits: 0,
            aborts: 0,
        }
    }

    fn grow(&mut self, t: usize) {
        if self.counted.len() <= t {
            self.counted.resize(t + 1, 0);
            self.since_sample.resize(t + 1, 0);
            self.in_tx.resize(t + 1, false);
        }
    }

    fn event(&mut self, e: &sharemap_trace::Event) {
        let t = e.thread as usize;
        self.grow(t);
        if !self.has_tx && matches!(e.kind, EventKind::TxBegin | EventKind::TxCommit | EventKind::TxAbort) {
            // As `Stmap`'s: what came before the first transaction event was outside them all.
            self.distinct.clear();
            self.counted.iter_mut().chain(self.since_sample.iter_mut()).for_each(|c| *c = 0);
        }
        match e.kind {
            EventKind::TxBegin => (self.has_tx, self.in_tx[t]) = (true, true),
            EventKind::TxCommit | EventKind::TxAbort => {
                (self.has_tx, self.in_tx[t]) = (true, false);
                if e.thread == self.p.counting_thread && self.counted[t] < self.p.mi {
                    if e.kind == EventKind::TxCommit { self.commits += 1 } else { self.aborts += 1 }
                }
            }
            _ => {}
        }
    }

    pub fn chunk(&mut self, chunk: &Chunk) {
        let a = &chunk.accesses;
        let mut events = chunk.events.iter().peekable();
        for k in 0..a.len() {
            let here = chunk.first_access + k as u64;
            while let Some(e) = events.next_if(|e| e.at <= here) {
                self.event(e);
            }
            let t = a.thread[k] as usize;
            self.grow(t);
            if (self.has_tx && !self.in_tx[t]) || self.counted[t] >= self.p.mi {
                continue;
            }
            self.counted[t] += 1;
            self.since_sample[t] += 1;
            if self.since_sample[t] > self.p.si {
                self.since_sample[t] = 0;
                self.distinct.insert(a.addr[k]);
            }
        }
        for e in events {
            self.event(e);
        }
    }

    /// The decision (`at`: None when thread 1 never made MI accesses; else Some(0), the
    /// moment being the same for every thread).
    pub fn finish(self) -> StmapDecision {
        let reached = self.counted.get(self.p.counting_thread as usize).is_some_and(|&c| c >= self.p.mi);
        let da = self.distinct.len() as u64;
        let total = self.commits + self.aborts;
        let ratio = |n: u64| (total > 0).then(|| n as f64 / total as f64);
        StmapDecision {
            at: reached.then_some(0),
            distinct_addresses: da,
            commit_ratio: ratio(self.commits),
            abort_ratio: ratio(self.aborts),
            enable: if reached { stmap::equation_1(da, self.p.da_threshold, self.commits, self.aborts) } else { None },
        }
    }
}

impl Detector for Stmap {
    fn spec(&self) -> String {
        let p = &self.p;
        format!("stmap:si={},mi={},da={},thread={}", p.si, p.mi, p.da_threshold, p.counting_thread)
    }

    fn chunk(&mut self, chunk: &Chunk) {
        self.take_chunk(chunk);
    }

    fn matrix(&self) -> &SharingMatrix {
        &self.matrix
    }

    fn finish(self: Box<Self>) -> Detection {
        self.finish_with_decision().0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sharemap_trace::{Access, MemoryTrace, Metadata};

    fn run_alg1(seq: &[(u32, u64)]) -> SharingMatrix {
        let mut table = FxHashMap::default();
        let mut m = SharingMatrix::new(0);
        for &(t, a) in seq {
            record(&mut table, &mut m, a, t);
        }
        m
    }

    #[test]
    fn algorithm_1_cases() {
        // 0 then 1: one event (0,1). Then 1 again with two accessors recorded [1, 0]:
        // t1 = tid, so (1, t2 = 0) counts again (line 20), unlike the oracle.
        let m = run_alg1(&[(0, 8), (1, 8), (1, 8)]);
        assert_eq!(m.get(0, 1), 2.0);
        // A third thread: events with both (lines 15-16); then t2 = tid (line 21): event with t1.
        let m = run_alg1(&[(0, 8), (1, 8), (2, 8), (1, 8)]);
        assert_eq!((m.get(0, 1), m.get(1, 2), m.get(0, 2)), (1.0, 2.0, 1.0));
        // Addresses, not lines: neighbouring words are different entries.
        assert_eq!(run_alg1(&[(0, 8), (1, 16)]).total(), 0.0);
    }

    /// Runs STMap over a whole trace.
    fn run_stmap(trace: &MemoryTrace, p: StmapParams) -> (Detection, StmapDecision) {
        use sharemap_trace::TraceSource;
        let mut s = Stmap::new(p, 4096, trace.metadata().threads as usize);
        let mut t = trace.clone();
        t.for_each_chunk(&mut |c| {
            s.take_chunk(c);
            Ok(())
        })
        .unwrap();
        s.finish_with_decision()
    }

    fn trace(accesses: &[Access], events: &[(usize, u32, EventKind)]) -> MemoryTrace {
        let mut w = MemoryTrace::new(Metadata::default());
        let mut ev = events.iter().peekable();
        for (i, a) in accesses.iter().enumerate() {
            while let Some(&&(at, t, k)) = ev.peek() {
                if at > i {
                    break;
                }
                w.event(t, k, 0, "");
                ev.next();
            }
            w.access(*a);
        }
        for &(_, t, k) in ev {
            w.event(t, k, 0, "");
        }
        w
    }

    #[test]
    fn sampling_and_the_decision() {
        // Threads 0 and 1 alternate on 4 addresses, 40 accesses each.
        let acc: Vec<Access> = (0..80u64).map(|i| Access::read((i % 2) as u32, 8 * (i / 2 % 4), 8)).collect();
        let p = trace(&acc, &[]);
        let params = StmapParams { si: 1, mi: 10, da_threshold: 100, counting_thread: 1 };
        let (det, dec) = run_stmap(&p, params);
        // Every second access of each thread is recorded.
        assert_eq!(det.seen, 40);
        assert_eq!(dec.at, Some(19), "thread 1's 10th access is access 19");
        assert_eq!(dec.enable, Some(true));
        assert_eq!(dec.commit_ratio, None);
        // Over the threshold and without transactions, Equation 1 stays undecided.
        let params = StmapParams { da_threshold: 2, ..params };
        let (_, dec) = run_stmap(&p, params);
        assert_eq!(dec.enable, None);
    }

    #[test]
    fn transactions_count() {
        // Thread 1: a committed transaction around accesses 0..4, an aborted one around
        // 6..10, two more aborts; accesses outside transactions are not seen.
        let acc: Vec<Access> = (0..20u64).map(|i| Access::read(1, 8 * i, 8)).collect();
        let ev = [
            (0, 1, EventKind::TxBegin),
            (4, 1, EventKind::TxCommit),
            (6, 1, EventKind::TxBegin),
            (10, 1, EventKind::TxAbort),
            (11, 1, EventKind::TxBegin),
            (12, 1, EventKind::TxAbort),
            (12, 1, EventKind::TxBegin),
            (13, 1, EventKind::TxAbort),
        ];
        let p = trace(&acc, &ev);
        let params = StmapParams { si: 0, mi: 9, da_threshold: 1, counting_thread: 1 };
        let (det, dec) = run_stmap(&p, params);
        // In transactions: 0..4, 6..10, 11, 12 = 10 accesses, all recorded with SI 0.
        assert_eq!(det.seen, 10);
        // The 9th counted access is access 11, after 1 commit and 1 abort.
        assert_eq!(dec.at, Some(11));
        assert_eq!((dec.commit_ratio, dec.abort_ratio), (Some(0.5), Some(0.5)));
        assert_eq!(dec.enable, Some(false), "cr < ar is false");
    }

    /// A traced STM program's setup (threads 0 and 1 filling shared data before any
    /// transaction) is not what the STM sees: only the transaction's sharing counts, as if
    /// the setup had not been recorded. (It once counted, the first transaction event
    /// coming too late to tell.)
    #[test]
    fn accesses_before_the_first_transaction_are_not_the_stms() {
        let setup: Vec<Access> = (0..40u64).map(|i| Access::write((i % 2) as u32, 8 * (i % 5), 8)).collect();
        let tx = [Access::write(0, 8192, 8), Access::read(1, 8192, 8)];
        let all: Vec<Access> = setup.iter().chain(&tx).copied().collect();
        let n = setup.len();
        let events = [(n, 0, EventKind::TxBegin), (n + 1, 0, EventKind::TxCommit), (n + 1, 1, EventKind::TxBegin)];
        let params = StmapParams { si: 0, mi: 1, da_threshold: 10, counting_thread: 1 };
        let (det, dec) = run_stmap(&trace(&all, &events), params);
        let (alone, _) = run_stmap(&trace(&tx, &events.map(|(at, t, k)| (at - n, t, k))), params);
        assert_eq!((det.matrix.get(0, 1), det.seen, det.pages.len()), (1.0, 2, alone.pages.len()));
        assert_eq!((dec.at, dec.distinct_addresses), (Some(n as u64 + 1), 1));
        let equal = equal_progress(&trace(&all, &events), params);
        assert_eq!(equal.distinct_addresses, 1);
    }

    fn equal_progress(trace: &MemoryTrace, p: StmapParams) -> StmapDecision {
        use sharemap_trace::TraceSource;
        let mut e = EqualProgress::new(p);
        let mut t = trace.clone();
        t.for_each_chunk(&mut |c| {
            e.chunk(c);
            Ok(())
        })
        .unwrap();
        e.finish()
    }

    #[test]
    fn equal_progress_counts_every_threads_first_mi_accesses() {
        // The host ran thread 1 alone first (20 accesses over addresses 0..20), then threads
        // 2 and 3 (20 each over their own 20 addresses), each in one transaction that commits.
        let mut acc = Vec::new();
        let mut ev = Vec::new();
        for t in 1..4u32 {
            ev.push((acc.len(), t, EventKind::TxBegin));
            acc.extend((0..20u64).map(|i| Access::write(t, 8 * (100 * t as u64 + i), 8)));
            ev.push((acc.len(), t, EventKind::TxCommit));
        }
        let p = trace(&acc, &ev);
        let params = StmapParams { si: 0, mi: 10, da_threshold: 25, counting_thread: 1 };
        // In the recorded order thread 1 reached MI having seen its own 10 addresses alone.
        let (_, recorded) = run_stmap(&p, params);
        assert_eq!((recorded.distinct_addresses, recorded.enable), (10, Some(true)));
        // At one rate for all, threads 2 and 3 made their first 10 accesses meanwhile: 30
        // distinct, over the threshold; no transaction of thread 1 had ended by its 10th
        // access, so the ratios do not tell and Equation 1 is undecided.
        let equal = equal_progress(&p, params);
        assert_eq!(equal.at, Some(0));
        assert_eq!(equal.distinct_addresses, 30);
        assert_eq!(equal.enable, None, "no transaction of thread 1 ended before its MI");
        // With a sampling interval of 1, every second access of each thread: 15.
        let equal = equal_progress(&p, StmapParams { si: 1, ..params });
        assert_eq!(equal.distinct_addresses, 15);
        assert_eq!(equal.enable, Some(true));
        // Thread 1 never reaching MI decides nothing.
        let equal = equal_progress(&p, StmapParams { mi: 21, ..params });
        assert_eq!((equal.at, equal.enable), (None, None));
    }
}
