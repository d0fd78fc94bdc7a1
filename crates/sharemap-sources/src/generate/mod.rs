//! Deterministic workload generators. Each pattern describes its program as a sequence of
//! phases (separated by barriers); in a phase every participating thread runs a finite
//! stream of accesses. The runner interleaves the threads of a phase in random quanta, so the
//! file order is a plausible total order, and stops after exactly the requested number of
//! accesses or iterations. Every random choice derives from the seed. A pattern's sizes
//! come from its footprint (pages per thread) when one is given, else from the access
//! budget.

mod patterns;

pub use patterns::PATTERNS;

use crate::Sink;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sharemap_trace::{Access, EventKind, Kind, Metadata, Source};
use std::io;

/// The default word: bytes of each generated access.
pub const WORD: u64 = 8;

/// A memory operation of a stream; the runner adds the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    pub addr: u64,
    pub size: u32,
    pub write: bool,
}

pub type Stream = Box<dyn Iterator<Item = Op>>;

/// One barrier-delimited step of a program.
pub struct Phase {
    /// Emit `init-done` (thread 0) before this phase.
    pub init_done_before: bool,
    /// Emit `phase-change` (thread 0) with this number and name before this phase.
    pub phase_change: Option<(u64, String)>,
    pub streams: Vec<(u32, Stream)>,
}

impl Phase {
    pub fn new(streams: Vec<(u32, Stream)>) -> Self {
        Phase { init_done_before: false, phase_change: None, streams }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenParams {
    pub threads: u32,
    /// The run stops after this many accesses (`u64::MAX`: when `iterations` ends it).
    pub accesses: u64,
    pub seed: u64,
    pub page_size: u64,
    pub line_size: u64,
    /// Bytes of each access, the program's word (a power of two up to the line size): 8, or
    /// 4 for seed 004's 32-bit ACE traces.
    pub word: u64,
    /// Pages of data per thread, all its arrays together (a shared table counts its share
    /// per thread); `None`: sized from `accesses` so that several iterations fit in it.
    pub footprint: Option<u64>,
    /// Each access after the initialisation is made this many times in a row: references
    /// per word per iteration (1: once).
    pub reuse: u32,
    /// The run stops after this many phases past the initialisation (`None`: at `accesses`).
    pub iterations: Option<u64>,
    /// `neighbor`'s halo: pages of each neighbour's block a thread reads per iteration (1;
    /// SP at 64 threads reads a whole plane, its neighbour's block, on each side).
    pub halo: u64,
    /// `all-to-all`'s nonzeros per row (8; NPB CG class B has about 176, so that its vector,
    /// a row's worth, is a small share of its data).
    pub nnz: u64,
}

/// Most references a generator repeats an access (`reuse`).
pub const MAX_REUSE: u32 = 1 << 16;

/// Most bytes one data region holds: regions start 2^36 bytes apart.
pub const REGION_BYTES: u64 = 1 << 36;

impl GenParams {
    /// Sizes derived from `accesses`, 8-byte words, each access once, no iteration limit.
    pub fn new(threads: u32, accesses: u64, seed: u64) -> Self {
        GenParams {
            threads,
            accesses,
            seed,
            page_size: 4096,
            line_size: 64,
            word: WORD,
            footprint: None,
            reuse: 1,
            iterations: None,
            halo: 1,
            nnz: 8,
        }
    }

    /// A footprint of `pages` per thread run for `iterations` phases past the
    /// initialisation, however many accesses that takes.
    pub fn sized(threads: u32, pages: u64, iterations: u64, seed: u64) -> Self {
        GenParams { footprint: Some(pages), iterations: Some(iterations), ..GenParams::new(threads, u64::MAX, seed) }
    }

    pub fn page_words(&self) -> u64 {
        self.page_size / self.word
    }
    /// Accesses per thread if work were spread evenly (sizes derived from the budget).
    pub fn per_thread(&self) -> u64 {
        self.accesses / self.threads as u64
    }
    /// Words of data per thread the footprint gives, if it is set.
    pub fn footprint_words(&self) -> Option<u64> {
        self.footprint.map(|pages| pages * self.page_words())
    }
    /// A read of one word at `addr`.
    pub fn rd(&self, addr: u64) -> Op {
        Op { addr, size: self.word as u32, write: false }
    }
    /// A write of one word at `addr`.
    pub fn wr(&self, addr: u64) -> Op {
        Op { addr, size: self.word as u32, write: true }
    }
    /// A generator seeded for one stream (thread, phase) of this run.
    pub fn rng(&self, thread: u32, phase: u64) -> ChaCha8Rng {
        let mut s = ChaCha8Rng::seed_from_u64(self.seed);
        s.set_stream(((thread as u64) << 40) ^ phase.wrapping_add(1));
        s
    }
    pub fn validate(&self) -> Result<(), GenError> {
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return Err(GenError::Threads(self.threads));
        }
        if !(64..=1 << 30).contains(&self.page_size) || !self.page_size.is_power_of_two() {
            return Err(GenError::PageSize(self.page_size));
        }
        if self.line_size < WORD || !self.line_size.is_power_of_two() || self.line_size > self.page_size {
            return Err(GenError::LineSize(self.line_size));
        }
        if !(1..=self.line_size).contains(&self.word) || !self.word.is_power_of_two() {
            return Err(GenError::Word(self.word));
        }
        if !(1..=MAX_REUSE).contains(&self.reuse) {
            return Err(GenError::Reuse(self.reuse));
        }
        if self.halo == 0 {
            return Err(GenError::Halo);
        }
        if !(1..=4096).contains(&self.nnz) {
            return Err(GenError::Nnz(self.nnz));
        }
        if let Some(pages) = self.footprint {
            // The largest region a pattern lays out holds every thread's share (x 2 for
            // the coarser grids of phase-change and a double buffer's halves).
            let bytes = (pages as u128) * self.threads as u128 * self.page_size as u128 * 2;
            if pages == 0 || bytes > REGION_BYTES as u128 {
                return Err(GenError::Footprint { pages, threads: self.threads });
            }
        }
        if self.footprint.is_none() && self.accesses == u64::MAX {
            return Err(GenError::Unbounded);
        }
        if self.iterations.is_none() && self.accesses == u64::MAX {
            return Err(GenError::Unbounded);
        }
        Ok(())
    }
}

/// Most threads a generator makes: as many as a trace may hold.
pub use sharemap_trace::model::MAX_THREADS;

/// Generator parameters out of range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    #[error("{0} threads: expected 1 to 4096")]
    Threads(u32),
    #[error("page size {0}: expected a power of two from 64 bytes to 1 GiB")]
    PageSize(u64),
    #[error("line size {0}: expected a power of two between 8 and the page size")]
    LineSize(u64),
    #[error("word of {0} bytes: expected a power of two from 1 to the line size")]
    Word(u64),
    #[error("reuse {0}: expected 1 to 65536 references per word")]
    Reuse(u32),
    #[error(
        "footprint of {pages} pages per thread: expected at least 1, and at most 2^35 bytes for all {threads} threads together"
    )]
    Footprint { pages: u64, threads: u32 },
    #[error("no end: give an access count, or a footprint and a number of iterations")]
    Unbounded,
    #[error("a halo of 0 pages: expected at least 1")]
    Halo,
    #[error("{0} nonzeros per row: expected 1 to 4096")]
    Nnz(u64),
}

/// A workload pattern: a named program that yields its phases lazily (usually forever).
pub struct Pattern {
    pub name: &'static str,
    /// What the pattern models and which seed describes it.
    pub models: &'static str,
    pub phases: fn(GenParams) -> Box<dyn Iterator<Item = Phase>>,
    /// Pages per thread of a run sized like the papers' (NPB classes A/B: past the TLBs'
    /// reach and, at 64 threads, past the last-level caches).
    pub default_footprint: u64,
    /// Phases after the initialisation of such a run.
    pub default_iterations: u64,
}

/// The papers' kind of footprint: 4 MiB of 4 KiB pages per thread (256 MiB at 64 threads).
pub const PAPER_FOOTPRINT: u64 = 1024;

/// Iterations of a run sized like the papers'.
pub const PAPER_ITERATIONS: u64 = 10;

pub fn find(name: &str) -> Option<&'static Pattern> {
    PATTERNS.iter().find(|p| p.name == name)
}

/// Shortest and longest run of one thread between switches.
const QUANTUM: (u64, u64) = (32, 256);

/// Trace metadata describing a generator run.
pub fn metadata(pattern: &Pattern, p: &GenParams) -> Metadata {
    let mut source = Source { kind: "generator".into(), name: pattern.name.into(), ..Source::default() };
    let mut params =
        vec![("threads", p.threads as u64), ("seed", p.seed), ("page_size", p.page_size), ("word", p.word)];
    if p.accesses != u64::MAX {
        params.push(("accesses", p.accesses));
    }
    params.extend(p.footprint.map(|f| ("footprint_pages", f)));
    params.extend(p.iterations.map(|i| ("iterations", i)));
    if p.reuse > 1 {
        params.push(("reuse", p.reuse as u64));
    }
    if p.halo != 1 && pattern.name == "neighbor" {
        params.push(("halo_pages", p.halo));
    }
    if p.nnz != 8 && pattern.name == "all-to-all" {
        params.push(("nnz", p.nnz));
    }
    for (k, v) in params {
        source.params.insert(k.into(), v.to_string());
    }
    Metadata { page_size: p.page_size, line_size: p.line_size, threads: p.threads, ..Metadata::with_source(source) }
}

/// Runs `pattern` into `sink`; returns the number of accesses produced (= p.accesses unless
/// the program or its iterations end first). The first phase is the initialisation; each
/// access of the later ones is made `reuse` times in a row.
pub fn run(pattern: &Pattern, p: &GenParams, sink: &mut dyn Sink) -> io::Result<u64> {
    let mut sched = ChaCha8Rng::seed_from_u64(p.seed ^ 0x5eed_5c4e_d01e);
    let mut started = vec![false; p.threads as usize];
    let mut count = 0u64;
    for (number, phase) in (pattern.phases)(*p).enumerate() {
        if count >= p.accesses || p.iterations.is_some_and(|it| number as u64 > it) {
            break;
        }
        let repeat = if number == 0 { 1 } else { p.reuse };
        if phase.init_done_before {
            sink.event(0, EventKind::InitDone, 0, "")?;
        }
        if let Some((n, label)) = &phase.phase_change {
            sink.event(0, EventKind::PhaseChange, *n, label)?;
        }
        let mut active = phase.streams;
        active.sort_by_key(|(t, _)| *t);
        for (t, _) in &active {
            if !std::mem::replace(&mut started[*t as usize], true) {
                sink.event(*t, EventKind::ThreadStart, 0, "")?;
            }
        }
        while !active.is_empty() && count < p.accesses {
            let i = sched.gen_range(0..active.len());
            let quantum = sched.gen_range(QUANTUM.0..=QUANTUM.1);
            let (thread, stream) = &mut active[i];
            let mut done = false;
            for _ in 0..quantum {
                match stream.next() {
                    Some(op) => {
                        let kind = if op.write { Kind::Write } else { Kind::Read };
                        let access = Access { thread: *thread, addr: op.addr, size: op.size, kind };
                        for _ in 0..repeat {
                            sink.access(access)?;
                            count += 1;
                            if count == p.accesses {
                                break;
                            }
                        }
                        if count == p.accesses {
                            break;
                        }
                    }
                    None => {
                        done = true;
                        break;
                    }
                }
            }
            if done {
                drop(active.swap_remove(i));
            }
        }
    }
    for (t, s) in started.iter().enumerate() {
        if *s {
            sink.event(t as u32, EventKind::ThreadExit, 0, "")?;
        }
    }
    Ok(count)
}

/// Start of the k-th data region; regions are far apart and page aligned.
pub fn region(k: u64) -> u64 {
    0x1000_0000_0000 + (k << 36)
}

/// `x` rounded up to a multiple of `m`.
pub fn round_up(x: u64, m: u64) -> u64 {
    x.div_ceil(m) * m
}

/// Sequential writes over `words` words of `p.word` bytes from `base` (a parallel
/// initialisation loop).
pub fn write_range(p: &GenParams, base: u64, words: u64) -> Stream {
    let p = *p;
    Box::new((0..words).map(move |i| p.wr(base + i * p.word)))
}

/// Random stream helper: boxes an iterator built with a per-stream RNG.
pub fn random_stream<I, F>(p: &GenParams, thread: u32, phase: u64, f: F) -> Stream
where
    I: Iterator<Item = Op> + 'static,
    F: FnOnce(ChaCha8Rng) -> I,
{
    Box::new(f(p.rng(thread, phase)))
}

#[cfg(test)]
mod tests;
