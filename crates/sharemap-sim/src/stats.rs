//! What a simulation counts, and the summary it reports.

use crate::model::Model;
use serde::Serialize;

/// A page placed, moved or copied: when (accesses simulated by then), which page, and the
/// nodes it then lives on (bit n: node n).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageDecision {
    pub at: u64,
    pub page: u64,
    pub nodes: u128,
}

/// A thread moved: when (accesses simulated by then), which thread, from which logical PU
/// to which.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadMove {
    pub at: u64,
    pub thread: usize,
    pub from: usize,
    pub to: usize,
}

/// Bytes a data transfer between nodes carries (one line), and a message without data
/// (an invalidation and its acknowledgement).
const CONTROL_BYTES: u64 = 16;

/// The events of one run; its summary (`Outcome`) carries them as they are.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    #[serde(skip)]
    line: u64,
    pub accesses: u64,
    pub writes: u64,
    /// Per cache level (index: level - 1): lookups that found the line, and that did not.
    pub hits: [u64; 4],
    pub misses: [u64; 4],
    pub tlb_misses: u64,
    pub page_walks: u64,
    /// Writes to a line held shared: the other copies are invalidated first.
    pub upgrades: u64,
    pub dram_local: u64,
    pub dram_remote: u64,
    /// Lines from another core's caches (or a dirty shared cache), same node or not.
    pub transfers_local: u64,
    pub transfers_remote: u64,
    pub invalidations: u64,
    pub invalidations_remote: u64,
    /// Lines an inclusive last-level cache evicted from the cores under it.
    pub back_invalidations: u64,
    pub writebacks: u64,
    pub interconnect_bytes: u64,
    pub thread_migrations: u64,
    pub page_migrations: u64,
    /// Copies of pages made on other nodes.
    pub replications: u64,
    /// Page faults a mechanism took to sample accesses (NUMA balancing's hinting faults,
    /// kMAF's), each costing its thread the mechanism's `fault-us`.
    pub faults: u64,
    /// Lines from DRAM that continued a core's sequential stream (their latency overlapped, as
    /// that of a stream's lines from a shared cache); counted when `mlp` is above 1.
    pub streamed: u64,
    /// Lines that waited for a saturated memory or link, and their waits together, in ns.
    pub bandwidth_waits: u64,
    pub bandwidth_wait_ns: f64,
}

impl Stats {
    /// The share, in percent, of the lines from memory or another node that waited for
    /// bandwidth.
    pub fn bandwidth_wait_percent(&self) -> f64 {
        let lines = self.dram_local + self.dram_remote + self.transfers_remote;
        if lines == 0 { 0.0 } else { 100.0 * self.bandwidth_waits as f64 / lines as f64 }
    }

    pub fn new(m: &Model) -> Stats {
        Stats { line: m.line as u64, ..Stats::default() }
    }

    // The counters below add 0 or 1 rather than branch: whether a node is remote depends
    // on the data, and a mispredicted branch costs more than the additions (measured:
    // these branches missed about 240k times on the 2M-access `random`).

    pub fn dram(&mut self, node: usize, home: usize) {
        let remote = (node != home) as u64;
        self.dram_local += 1 - remote;
        self.dram_remote += remote;
        self.interconnect_bytes += remote * self.line;
    }

    pub fn transfer(&mut self, to: usize, from: usize) {
        let remote = (to != from) as u64;
        self.transfers_local += 1 - remote;
        self.transfers_remote += remote;
        self.interconnect_bytes += remote * self.line;
    }

    pub fn invalidation(&mut self, from: usize, to: usize) {
        let remote = (from != to) as u64;
        self.invalidations += 1;
        self.invalidations_remote += remote;
        self.interconnect_bytes += remote * CONTROL_BYTES;
    }

    pub fn writeback(&mut self, from: usize, home: usize) {
        self.writebacks += 1;
        self.interconnect_bytes += (from != home) as u64 * self.line;
    }

    pub fn migrated_bytes(&mut self, from: usize, to: usize, bytes: u64) {
        if from != to {
            self.interconnect_bytes += bytes;
        }
    }

    /// Misses of a level per 1000 accesses.
    pub fn mpka(&self, level: u8) -> f64 {
        per_thousand(self.misses[(level.clamp(1, 4) - 1) as usize], self.accesses)
    }

    /// Share of DRAM accesses served by the local node.
    pub fn local_dram_share(&self) -> f64 {
        let all = self.dram_local + self.dram_remote;
        if all == 0 { 1.0 } else { self.dram_local as f64 / all as f64 }
    }
}

pub fn per_thousand(n: u64, of: u64) -> f64 {
    if of == 0 { 0.0 } else { 1000.0 * n as f64 / of as f64 }
}

/// One mechanism's results: its time, the rates derived from its counts, and the counts.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub mechanism: String,
    /// Estimated execution time: the slowest thread's clock, in ns.
    pub time_ns: f64,
    /// Misses per 1000 accesses, per cache level present (L1 first).
    pub mpka: Vec<LevelMisses>,
    pub tlb_mpka: f64,
    pub local_dram_share: f64,
    #[serde(flatten)]
    pub counts: Stats,
    /// Every figure over the `os` mechanism's.
    pub vs_os: Option<Relative>,
    /// What the mechanism says about this run (e.g. Autopin's trials taking most of it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Where pages were put, in order, when the context asked (`Context::log_decisions`).
    #[serde(skip)]
    pub decisions: Vec<PageDecision>,
    /// The threads moved, in order, logged with the pages' decisions.
    #[serde(skip)]
    pub thread_moves: Vec<ThreadMove>,
    /// Each thread's logical PU at the end of the run (where a mechanism's last remap put it).
    #[serde(skip)]
    pub final_pus: Vec<usize>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LevelMisses {
    pub level: u8,
    pub mpka: f64,
}

/// A mechanism's figures over `os`'s (1: the same; a ratio to a zero is infinite, `null`
/// in JSON).
#[derive(Clone, Debug, Serialize)]
pub struct Relative {
    pub time: f64,
    pub llc_misses: f64,
    /// Misses per 1000 accesses of each level, L1 first.
    pub mpka: Vec<f64>,
    pub tlb_mpka: f64,
    pub interconnect_bytes: f64,
    pub local_dram_share: f64,
    pub invalidations: f64,
    pub thread_migrations: f64,
    pub page_migrations: f64,
}

impl Outcome {
    pub fn new(mechanism: &str, s: &Stats, time_ns: f64, levels: &[u8]) -> Outcome {
        Outcome {
            mechanism: mechanism.to_string(),
            time_ns,
            mpka: levels.iter().map(|&level| LevelMisses { level, mpka: s.mpka(level) }).collect(),
            tlb_mpka: per_thousand(s.tlb_misses, s.accesses),
            local_dram_share: s.local_dram_share(),
            counts: s.clone(),
            vs_os: None,
            note: None,
            decisions: Vec::new(),
            thread_moves: Vec::new(),
            final_pus: Vec::new(),
        }
    }

    /// Misses per 1000 accesses of the last cache level (0 without caches).
    pub fn llc_mpka(&self) -> f64 {
        self.mpka.last().map_or(0.0, |l| l.mpka)
    }

    /// Fills `vs_os` against a baseline.
    pub fn relate_to(&mut self, base: &Outcome) {
        let ratio = |a: f64, b: f64| if b == 0.0 { if a == 0.0 { 1.0 } else { f64::INFINITY } } else { a / b };
        self.vs_os = Some(Relative {
            time: ratio(self.time_ns, base.time_ns),
            llc_misses: ratio(self.llc_mpka(), base.llc_mpka()),
            mpka: self.mpka.iter().zip(&base.mpka).map(|(a, b)| ratio(a.mpka, b.mpka)).collect(),
            tlb_mpka: ratio(self.tlb_mpka, base.tlb_mpka),
            interconnect_bytes: ratio(self.counts.interconnect_bytes as f64, base.counts.interconnect_bytes as f64),
            local_dram_share: ratio(self.local_dram_share, base.local_dram_share),
            invalidations: ratio(self.counts.invalidations as f64, base.counts.invalidations as f64),
            thread_migrations: ratio(self.counts.thread_migrations as f64, base.counts.thread_migrations as f64),
            page_migrations: ratio(self.counts.page_migrations as f64, base.counts.page_migrations as f64),
        });
    }
}
