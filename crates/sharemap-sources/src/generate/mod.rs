//! Deterministic workload generators. Each pattern describes its program as a sequence of
//! phases (separated by barriers); in a phase every participating thread runs a finite
//! stream of accesses. The runner interleaves the threads of a phase in random quanta, so the
//! file order is a plausible total order, and stops after exactly the requested number of
//! accesses. Every random choice derives from the seed.

mod patterns;

pub use patterns::PATTERNS;

use crate::Sink;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sharemap_trace::{Access, EventKind, Kind, Metadata, Source};
use std::io;

pub const WORD: u64 = 8;

/// A memory operation of a stream; the runner adds the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    pub addr: u64,
    pub size: u32,
    pub write: bool,
}

pub fn rd(addr: u64) -> Op {
    Op { addr, size: WORD as u32, write: false }
}
pub fn wr(addr: u64) -> Op {
    Op { addr, size: WORD as u32, write: true }
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
    pub accesses: u64,
    pub seed: u64,
    pub page_size: u64,
    pub line_size: u64,
}

impl GenParams {
    pub fn new(threads: u32, accesses: u64, seed: u64) -> Self {
        GenParams { threads, accesses, seed, page_size: 4096, line_size: 64 }
    }
    pub fn page_words(&self) -> u64 {
        self.page_size / WORD
    }
    /// Accesses per thread if work were spread evenly.
    pub fn per_thread(&self) -> u64 {
        self.accesses / self.threads as u64
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
}

/// A workload pattern: a named program that yields its phases lazily (usually forever).
pub struct Pattern {
    pub name: &'static str,
    /// What the pattern models and which seed describes it.
    pub models: &'static str,
    pub phases: fn(GenParams) -> Box<dyn Iterator<Item = Phase>>,
}

pub fn find(name: &str) -> Option<&'static Pattern> {
    PATTERNS.iter().find(|p| p.name == name)
}

/// Shortest and longest run of one thread between switches.
const QUANTUM: (u64, u64) = (32, 256);

/// Trace metadata describing a generator run.
pub fn metadata(pattern: &Pattern, p: &GenParams) -> Metadata {
    let mut source = Source { kind: "generator".into(), name: pattern.name.into(), ..Source::default() };
    for (k, v) in
        [("threads", p.threads as u64), ("accesses", p.accesses), ("seed", p.seed), ("page_size", p.page_size)]
    {
        source.params.insert(k.into(), v.to_string());
    }
    Metadata { page_size: p.page_size, line_size: p.line_size, threads: p.threads, ..Metadata::with_source(source) }
}

/// Runs `pattern` into `sink`; returns the number of accesses produced (= p.accesses unless
/// the program ends first).
pub fn run(pattern: &Pattern, p: &GenParams, sink: &mut dyn Sink) -> io::Result<u64> {
    let mut sched = ChaCha8Rng::seed_from_u64(p.seed ^ 0x5eed_5c4e_d01e);
    let mut started = vec![false; p.threads as usize];
    let mut count = 0u64;
    for phase in (pattern.phases)(*p) {
        if count >= p.accesses {
            break;
        }
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
                        sink.access(Access { thread: *thread, addr: op.addr, size: op.size, kind })?;
                        count += 1;
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

/// Sequential 8-byte writes over `words` words from `base` (a parallel initialisation loop).
pub fn write_range(base: u64, words: u64) -> Stream {
    Box::new((0..words).map(move |i| wr(base + i * WORD)))
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
