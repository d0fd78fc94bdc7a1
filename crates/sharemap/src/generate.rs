//! Synthetic traces: the sharing patterns of the seed programs, deterministic by seed.

use crate::observer::Observer;
use crate::{Error, ErrorKind, Result};
use sharemap_sources::Sink;
use sharemap_sources::generate;
use sharemap_trace::{Access, Chunk, Format, MemoryTrace, TraceWriter, WriteReport};
use std::path::Path;

pub use sharemap_sources::generate::{GenError, GenParams, MAX_THREADS, PAPER_FOOTPRINT, PATTERNS, Pattern};

/// How large a generated run's data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Footprint {
    /// Sized from the access count so that several iterations fit in it (small traces for
    /// tests and examples: a few thousand references per page).
    Auto,
    /// Pages per thread.
    Pages(u64),
    /// Bytes per thread, rounded up to whole pages.
    Bytes(u64),
}

impl std::str::FromStr for Footprint {
    type Err = String;

    /// `auto`, a number of pages (`1024`), or bytes with a unit (`4MiB`, `512KiB`, `1G`).
    fn from_str(text: &str) -> std::result::Result<Footprint, String> {
        let t = text.trim();
        if t == "auto" {
            return Ok(Footprint::Auto);
        }
        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (number, unit) = t.split_at(digits);
        let n: u64 = number.parse().map_err(|_| format!("'{text}': expected auto, pages (1024) or bytes (4MiB)"))?;
        let scale: u64 = match unit.trim() {
            "" => return Ok(Footprint::Pages(n)),
            "B" => 1,
            "K" | "KB" | "KiB" | "k" => 1 << 10,
            "M" | "MB" | "MiB" => 1 << 20,
            "G" | "GB" | "GiB" => 1 << 30,
            u => return Err(format!("'{text}': unknown unit '{u}' (B, KiB, MiB, GiB; a bare number is pages)")),
        };
        n.checked_mul(scale).map(Footprint::Bytes).ok_or_else(|| format!("'{text}': too large"))
    }
}

/// A run's size as a user gives it; what is left out follows the pattern's paper-like
/// defaults ([`Sizing::params`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizing {
    pub threads: u32,
    pub seed: u64,
    pub page_size: u64,
    pub accesses: Option<u64>,
    pub footprint: Option<Footprint>,
    pub iterations: Option<u64>,
    pub reuse: u32,
    pub word: u64,
    /// `neighbor`'s halo in pages.
    pub halo: u64,
    /// `all-to-all`'s nonzeros per row.
    pub nnz: u64,
}

impl Sizing {
    pub fn new(threads: u32, seed: u64) -> Sizing {
        Sizing {
            threads,
            seed,
            page_size: 4096,
            accesses: None,
            footprint: None,
            iterations: None,
            reuse: 1,
            word: sharemap_sources::generate::WORD,
            halo: 1,
            nnz: 8,
        }
    }

    /// The generator's parameters. A footprint left out is the pattern's paper-like default
    /// (`Pattern::default_footprint` pages per thread), except with an access count alone,
    /// which sizes the data from the count as `Footprint::Auto` does. Iterations left out
    /// are the pattern's default unless an access count ends the run.
    pub fn params(&self, pattern: &Pattern) -> GenParams {
        let footprint = match self.footprint {
            Some(Footprint::Auto) => None,
            Some(Footprint::Pages(p)) => Some(p),
            Some(Footprint::Bytes(b)) => Some(b.div_ceil(self.page_size.max(1))),
            None if self.accesses.is_some() && self.iterations.is_none() => None,
            None => Some(pattern.default_footprint),
        };
        let iterations = match (self.iterations, self.accesses) {
            (Some(k), _) => Some(k),
            (None, Some(_)) => None,
            (None, None) => Some(pattern.default_iterations),
        };
        GenParams {
            threads: self.threads,
            accesses: self.accesses.unwrap_or(u64::MAX),
            seed: self.seed,
            page_size: self.page_size,
            line_size: 64,
            word: self.word,
            footprint,
            reuse: self.reuse,
            iterations,
            halo: self.halo,
            nnz: self.nnz,
        }
    }
}

/// The pattern of this name, or an error listing them all.
pub fn pattern(name: &str) -> Result<&'static Pattern> {
    generate::find(name).ok_or_else(|| {
        let names: Vec<&str> = PATTERNS.iter().map(|p| p.name).collect();
        let hint = sharemap_core::did_you_mean(name, names.iter().copied());
        Error::new(ErrorKind::Pattern, format!("unknown pattern '{name}' ({hint}patterns: {})", names.join(", ")))
    })
}

/// What is wrong with the parameters, if anything: which one, and why.
pub fn check(params: &GenParams) -> std::result::Result<(), GenError> {
    params.validate()
}

/// Generates the pattern into a file of any format (by extension unless given), telling
/// `observer` how far it is.
pub fn to_file(
    pattern: &Pattern,
    params: &GenParams,
    output: &Path,
    format: Option<Format>,
    observer: &dyn Observer,
) -> Result<WriteReport> {
    check(params).map_err(|e| Error::new(ErrorKind::Pattern, e.to_string()))?;
    let mut writer = TraceWriter::create(output, format, generate::metadata(pattern, params))?;
    observer.start(&format!("gen {}", pattern.name), (params.accesses != u64::MAX).then_some(params.accesses));
    let mut sink = Observed { inner: &mut writer, observer, n: 0 };
    generate::run(pattern, params, &mut sink)?;
    observer.end();
    Ok(writer.finish()?)
}

/// Generates the pattern in memory.
pub fn to_memory(pattern: &Pattern, params: &GenParams) -> Result<MemoryTrace> {
    check(params).map_err(|e| Error::new(ErrorKind::Pattern, e.to_string()))?;
    let mut trace = MemoryTrace::new(generate::metadata(pattern, params));
    generate::run(pattern, params, &mut trace)?;
    Ok(trace)
}

/// Forwards to a writer and tells the observer every 64k accesses.
struct Observed<'a> {
    inner: &'a mut TraceWriter,
    observer: &'a dyn Observer,
    n: u64,
}

impl Sink for Observed<'_> {
    fn access(&mut self, a: Access) -> std::io::Result<()> {
        self.n += 1;
        if self.n & 0xffff == 0 {
            self.observer.read(self.n);
        }
        Sink::access(self.inner, a)
    }
    fn push_event(&mut self, e: &sharemap_trace::Event) -> std::io::Result<()> {
        Sink::push_event(self.inner, e)
    }
    fn chunk(&mut self, chunk: &mut Chunk) -> std::io::Result<()> {
        self.n += chunk.accesses.len() as u64;
        self.observer.read(self.n);
        Sink::chunk(self.inner, chunk)
    }
}
