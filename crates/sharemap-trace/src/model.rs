//! The trace model: accesses in one total order, plus events and metadata.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the native format written by this crate (see docs/trace-format.md).
pub const FORMAT_VERSION: u32 = 2;
pub const DEFAULT_PAGE_SIZE: u64 = 4096;
pub const DEFAULT_LINE_SIZE: u64 = 64;
pub use sharemap_core::MAX_THREADS;

/// Read or write. A read-modify-write instruction appears as a read followed by a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    Read,
    Write,
}

impl Kind {
    pub fn letter(self) -> char {
        match self {
            Kind::Read => 'R',
            Kind::Write => 'W',
        }
    }
}

/// One memory access. `thread` is dense, numbered in thread-creation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    pub thread: u32,
    pub addr: u64,
    pub size: u32,
    pub kind: Kind,
}

impl Access {
    pub fn read(thread: u32, addr: u64, size: u32) -> Self {
        Access { thread, addr, size, kind: Kind::Read }
    }
    pub fn write(thread: u32, addr: u64, size: u32) -> Self {
        Access { thread, addr, size, kind: Kind::Write }
    }
}

/// What an event marks. The numeric codes are part of the on-disk format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A thread begins; `arg` is its OS thread id when known.
    ThreadStart = 1,
    ThreadExit = 2,
    /// Serial initialisation is over (seed 003's annotation for first-touch).
    InitDone = 3,
    /// The program enters a new phase; `arg` numbers it, `label` names it.
    PhaseChange = 4,
    /// Transaction events of an STM; `arg` is the transaction id.
    TxBegin = 5,
    TxCommit = 6,
    TxAbort = 7,
    /// Region-of-interest markers.
    RoiBegin = 8,
    RoiEnd = 9,
    /// The thread runs on the CPU the kernel numbers `arg` (from here on, until its next
    /// such event): where the OS put it, as the tracer saw it.
    Cpu = 10,
    /// A burst of a burst-sampled recording (`sharemap cc --burst`) begins or ends on this
    /// thread: every access of the thread between the two was recorded, none outside.
    BurstBegin = 11,
    BurstEnd = 12,
    /// The program allocated `size` bytes at address `arg` (`sharemap cc` programs: malloc,
    /// calloc, realloc, aligned allocations, mmap, C++'s new, and each thread's stack);
    /// `site` is the code address of the call (0: not known), `label` names the allocator.
    Alloc = 13,
    /// The program released what it allocated at address `arg`; `label` names how.
    Free = 14,
    /// The thread's next access was made by the instruction at code address `arg` (the
    /// tracer notes one access in `ACCESS_SITE_PERIOD` so).
    AccessSite = 15,
}

/// One access in this many per thread carries its code address (`access-site` events):
/// enough to name the source lines that touch shared data, at a cost of one record in 1024
/// (the tracer's setting, `sharemap_shm::ACCESS_SITE_PERIOD`). One in 256 would add 11 % to
/// a stencil's recording time and 44 % to its file: an event costs some 23 bytes in a trace
/// whose accesses cost 0.2.
pub const ACCESS_SITE_PERIOD: u32 = 1024;

impl EventKind {
    pub const ALL: [EventKind; 15] = [
        EventKind::ThreadStart,
        EventKind::ThreadExit,
        EventKind::InitDone,
        EventKind::PhaseChange,
        EventKind::TxBegin,
        EventKind::TxCommit,
        EventKind::TxAbort,
        EventKind::RoiBegin,
        EventKind::RoiEnd,
        EventKind::Cpu,
        EventKind::BurstBegin,
        EventKind::BurstEnd,
        EventKind::Alloc,
        EventKind::Free,
        EventKind::AccessSite,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.code() == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            EventKind::ThreadStart => "thread-start",
            EventKind::ThreadExit => "thread-exit",
            EventKind::InitDone => "init-done",
            EventKind::PhaseChange => "phase-change",
            EventKind::TxBegin => "tx-begin",
            EventKind::TxCommit => "tx-commit",
            EventKind::TxAbort => "tx-abort",
            EventKind::RoiBegin => "roi-begin",
            EventKind::RoiEnd => "roi-end",
            EventKind::Cpu => "cpu",
            EventKind::BurstBegin => "burst-begin",
            EventKind::BurstEnd => "burst-end",
            EventKind::Alloc => "alloc",
            EventKind::Free => "free",
            EventKind::AccessSite => "access-site",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }
}

/// An event sits in the access order: it happens just before access number `at`
/// (counted from the start of the trace), so `at == accesses` means "after the last access".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub at: u64,
    pub thread: u32,
    pub kind: EventKind,
    #[serde(default)]
    pub arg: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// An `alloc` event's bytes (0 for every other kind).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub size: u64,
    /// An `alloc` event's call site: a code address in the recorded program (0: unknown).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub site: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Event {
    /// An event of any kind but `alloc`.
    pub fn new(at: u64, thread: u32, kind: EventKind, arg: u64, label: impl Into<String>) -> Event {
        Event { at, thread, kind, arg, label: label.into(), size: 0, site: 0 }
    }

    /// An `alloc` event: `size` bytes at `addr`, allocated by `how` from code address `site`.
    pub fn alloc(at: u64, thread: u32, addr: u64, size: u64, site: u64, how: &str) -> Event {
        Event { at, thread, kind: EventKind::Alloc, arg: addr, label: how.to_string(), size, site }
    }
}

/// Where a trace came from: a generator and its parameters, a tracer backend and the
/// command line it ran, or an importer and the file it read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// "generator", "valgrind", "sancov", "import", ...
    pub kind: String,
    /// Pattern name, program name or imported file.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

/// CPUs a recording host may have (Linux's largest NR_CPUS).
pub const MAX_HOST_CPUS: usize = 8192;
/// The longest burst, or gap between bursts, a trace may say it has (µs).
pub const MAX_BURST: u64 = 1 << 40;

/// Trace-wide metadata, stored as JSON in the native header (and updated in the footer).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    pub format_version: u32,
    pub page_size: u64,
    pub line_size: u64,
    /// Number of threads (dense ids 0..threads). 0 in a header means "not known yet".
    pub threads: u32,
    pub source: Source,
    /// 1 = every access recorded; k = one access in k.
    pub sampling_period: u64,
    /// OS thread ids by dense id, when the source knows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub os_tids: Vec<u64>,
    /// Wall-clock time of the recorded run in nanoseconds, from the program's start to its
    /// end, when a recorder measured it: the trace's own clock. Time-driven placement
    /// policies take the run's rate (accesses per ms) from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_ns: Option<u64>,
    /// The recording host's NUMA node (the kernel's number) of each CPU (by the kernel's
    /// number), when a recorder wrote `cpu` events: what a simulated machine must match for
    /// the recorded schedule to mean anything on it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_cpu_nodes: Vec<u32>,
    /// A burst-sampled recording's setting: every thread recorded every access in windows
    /// of `on` µs, one in each `on + off` µs (`burst-begin`/`burst-end` events mark them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<Burst>,
    /// The recorded program's static data and the code its recorded sites point into, from
    /// its symbols and debug information, at the addresses of the recorded run (the tracer's
    /// recordings): what names the data objects and source lines of `analyze`'s "what is
    /// shared".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramInfo>,
}

/// Entries a trace's `program` table may hold, of each kind, and bytes per name.
pub const MAX_PROGRAM_ENTRIES: usize = 1 << 22;
pub const MAX_PROGRAM_NAME: usize = 4096;

/// What the recorded program's binary says about its addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramInfo {
    /// Static variables (the binary's sized data symbols), by address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statics: Vec<StaticObject>,
    /// Each code address an `alloc` or `access-site` event names, with its source location.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code: Vec<CodeSite>,
}

/// A static variable: `size` bytes at `addr`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticObject {
    pub name: String,
    pub addr: u64,
    pub size: u64,
}

/// A code address and where it is in the source: the function, and the file and line when
/// the binary has debug information (`line` 0: not known).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeSite {
    pub pc: u64,
    pub function: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub file: String,
    #[serde(default)]
    pub line: u32,
}

impl CodeSite {
    /// `file:line (function)`, or what of it is known.
    pub fn describe(&self) -> String {
        let file = self.file.rsplit('/').next().unwrap_or(&self.file);
        match (file.is_empty(), self.line, self.function.is_empty()) {
            (false, 0, false) => format!("{file} ({})", self.function),
            (false, 0, true) => file.to_string(),
            (false, line, false) => format!("{file}:{line} ({})", self.function),
            (false, line, true) => format!("{file}:{line}"),
            (true, _, false) => self.function.clone(),
            (true, _, true) => format!("{:#x}", self.pc),
        }
    }
}

impl ProgramInfo {
    fn check(&self) -> std::result::Result<(), MetadataError> {
        if self.statics.len() > MAX_PROGRAM_ENTRIES || self.code.len() > MAX_PROGRAM_ENTRIES {
            return Err(MetadataError::new(
                "program",
                format!("program table: more than {MAX_PROGRAM_ENTRIES} entries of a kind"),
            ));
        }
        let long = self
            .statics
            .iter()
            .map(|s| s.name.len())
            .chain(self.code.iter().map(|c| c.function.len().max(c.file.len())));
        if long.max().unwrap_or(0) > MAX_PROGRAM_NAME {
            return Err(MetadataError::new(
                "program",
                format!("program table: a name longer than {MAX_PROGRAM_NAME} bytes"),
            ));
        }
        if self.statics.iter().any(|s| s.addr.checked_add(s.size).is_none()) {
            return Err(MetadataError::new(
                "program",
                "program table: a static object past the end of the address space",
            ));
        }
        Ok(())
    }
}

/// `sharemap cc --burst ON:OFF`: microseconds per burst and between bursts, and what each
/// thread's recorded accesses stand for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Burst {
    pub on: u64,
    pub off: u64,
    /// Per thread: the loop back-edges it ran over those it ran in bursts (0: none in a
    /// burst). Instrumented code runs slower, so a thread does less of its work in a window
    /// than the window's share of the time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weights: Vec<f64>,
}

impl Burst {
    /// A setting as `sharemap cc --burst` and `record --burst` take it: `ON:OFF` (µs, OFF at
    /// least 1, each at most `MAX_BURST`), or `0` for no bursts (`(0, 1)`).
    pub fn parse_setting(text: &str) -> Option<(u64, u64)> {
        if text == "0" {
            return Some((0, 1));
        }
        let (on, off) = text.split_once(':')?;
        let (on, off) = (on.parse::<u64>().ok()?, off.parse::<u64>().ok()?);
        (on <= MAX_BURST && (1..=MAX_BURST).contains(&off)).then_some((on, off))
    }

    /// What one recorded unit of sharing stands for: the weights' mean over the threads that
    /// were in bursts. Bursts are the same windows for every thread, so a change of hands
    /// between two threads is seen as often as the windows hold work, whichever pair it is.
    pub fn sharing_weight(&self) -> f64 {
        let measured: Vec<f64> = self.weights.iter().copied().filter(|&w| w >= 1.0 && w.is_finite()).collect();
        if measured.is_empty() {
            (self.on + self.off) as f64 / self.on as f64
        } else {
            measured.len() as f64 / measured.iter().map(|w| 1.0 / w).sum::<f64>()
        }
    }

    /// How many of the program's accesses one of `thread`'s recorded accesses stands for:
    /// its measured weight, or the windows' share of the time.
    pub fn weight(&self, thread: usize) -> f64 {
        match self.weights.get(thread) {
            Some(&w) if w >= 1.0 && w.is_finite() => w,
            _ => (self.on + self.off) as f64 / self.on as f64,
        }
    }
}

impl Default for Metadata {
    fn default() -> Self {
        Metadata {
            format_version: FORMAT_VERSION,
            page_size: DEFAULT_PAGE_SIZE,
            line_size: DEFAULT_LINE_SIZE,
            threads: 0,
            source: Source::default(),
            sampling_period: 1,
            os_tids: Vec::new(),
            run_ns: None,
            host_cpu_nodes: Vec::new(),
            burst: None,
            program: None,
        }
    }
}

impl Metadata {
    pub fn with_source(source: Source) -> Self {
        Metadata { source, ..Metadata::default() }
    }

    /// What is impossible in metadata read from a file, so that no analysis divides by a page
    /// size of 0 or sizes a table by a thread count no trace can hold.
    pub fn check(&self) -> std::result::Result<(), MetadataError> {
        sharemap_core::PageSize::new(self.page_size).map_err(|e| MetadataError::new("page_size", e.to_string()))?;
        if !self.line_size.is_power_of_two() || self.line_size > self.page_size {
            return Err(MetadataError::new(
                "line_size",
                format!("line size {}: expected a power of two no larger than the page", self.line_size),
            ));
        }
        if self.threads > MAX_THREADS {
            return Err(MetadataError::new(
                "threads",
                format!("{} threads: a trace holds at most {MAX_THREADS}", self.threads),
            ));
        }
        if self.run_ns == Some(0) {
            return Err(MetadataError::new("run_ns", "run time 0 ns"));
        }
        if let Some(b) = &self.burst {
            if b.on == 0 || b.off == 0 || b.on > MAX_BURST || b.off > MAX_BURST {
                return Err(MetadataError::new(
                    "burst",
                    format!(
                        "burst {}:{}: expected microseconds per burst and between bursts from 1 to {MAX_BURST}",
                        b.on, b.off
                    ),
                ));
            }
            if b.weights.len() > MAX_THREADS as usize
                || b.weights.iter().any(|w| !(*w == 0.0 || (*w >= 1.0 && w.is_finite())))
            {
                return Err(MetadataError::new(
                    "burst",
                    "burst weights: expected one per thread, each 0 or at least 1",
                ));
            }
        }
        if let Some(p) = &self.program {
            p.check()?;
        }
        if self.sampling_period == 0 {
            return Err(MetadataError::new("sampling_period", "sampling period 0: expected 1 (every access) or more"));
        }
        if self.os_tids.len() > MAX_THREADS as usize {
            return Err(MetadataError::new(
                "os_tids",
                format!("{} OS thread ids: a trace holds at most {MAX_THREADS} threads", self.os_tids.len()),
            ));
        }
        if self.host_cpu_nodes.len() > MAX_HOST_CPUS {
            return Err(MetadataError::new(
                "host_cpu_nodes",
                format!("{} host CPUs: at most {MAX_HOST_CPUS} (the kernel's own limit)", self.host_cpu_nodes.len()),
            ));
        }
        Ok(())
    }
}

/// Metadata that no trace can have: the field at fault (as the trace format names it) and
/// why, in words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct MetadataError {
    pub field: &'static str,
    message: String,
}

impl MetadataError {
    fn new(field: &'static str, message: impl Into<String>) -> MetadataError {
        MetadataError { field, message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Impossible metadata is refused naming the field at fault.
    #[test]
    fn impossible_metadata_names_its_field() {
        assert_eq!(Metadata::default().check(), Ok(()));
        let field = |m: Metadata| m.check().unwrap_err().field;
        assert_eq!(field(Metadata { page_size: 3000, ..Metadata::default() }), "page_size");
        assert_eq!(field(Metadata { line_size: 48, ..Metadata::default() }), "line_size");
        assert_eq!(field(Metadata { threads: MAX_THREADS + 1, ..Metadata::default() }), "threads");
        assert_eq!(field(Metadata { run_ns: Some(0), ..Metadata::default() }), "run_ns");
        assert_eq!(field(Metadata { sampling_period: 0, ..Metadata::default() }), "sampling_period");
        let e = Metadata { run_ns: Some(0), ..Metadata::default() }.check().unwrap_err();
        assert_eq!(e.to_string(), "run time 0 ns");
    }
}
