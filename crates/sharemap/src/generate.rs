//! Synthetic traces: the sharing patterns of the seed programs, deterministic by seed.

use crate::observer::Observer;
use crate::{Error, ErrorKind, Result};
use sharemap_sources::Sink;
use sharemap_sources::generate;
use sharemap_trace::{Access, Chunk, EventKind, Format, MemoryTrace, TraceWriter, WriteReport};
use std::path::Path;

pub use sharemap_sources::generate::{GenError, GenParams, MAX_THREADS, PATTERNS, Pattern};

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
    observer.start(&format!("gen {}", pattern.name), Some(params.accesses));
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
    fn event(&mut self, thread: u32, kind: EventKind, arg: u64, label: &str) -> std::io::Result<()> {
        Sink::event(self.inner, thread, kind, arg, label)
    }
    fn chunk(&mut self, chunk: &mut Chunk) -> std::io::Result<()> {
        self.n += chunk.accesses.len() as u64;
        self.observer.read(self.n);
        Sink::chunk(self.inner, chunk)
    }
}
