//! The perf source: an unmodified program runs under `perf record`, sampling an event that
//! carries data addresses, and each sample becomes an access of its thread:
//!
//! - `page-faults`: every page fault (`-c 1 -d`), the first touch of each page by the
//!   program (and, with NUMA balancing on, the kernel's hinting faults), as kMAF and NUMA
//!   balancing see a program; a fault does not say whether it read or wrote: a read of one
//!   byte. Works on any Linux host (a software event).
//! - `mem-loads` (with a latency threshold, `ldlat`, in cycles): sampled loads that took at
//!   least that long, Marathe & Mueller's long-latency loads; reads. Needs load-latency
//!   sampling in the PMU (Intel PEBS, AMD IBS), through `perf mem`.
//! - `mem-stores`: sampled stores (Intel PEBS, AMD IBS), writes.
//!
//! All go through one parser of `perf script -F tid,addr`. Threads are numbered in the order
//! their first sample appears (OS thread ids kept).

use crate::{Recording, Sink};
use sharemap_trace::{Access, EventKind};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader};
use std::process::{Command, Stdio};

/// The sampled event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PerfEvent {
    PageFaults,
    /// Loads of at least this many cycles.
    MemLoads {
        ldlat: u32,
    },
    MemStores,
}

impl PerfEvent {
    /// `page-faults`, `mem-loads`, `mem-loads:ldlat=N` (default 30 cycles) or `mem-stores`.
    pub fn parse(text: &str) -> Option<PerfEvent> {
        match text.trim() {
            "page-faults" | "faults" => Some(PerfEvent::PageFaults),
            "mem-loads" => Some(PerfEvent::MemLoads { ldlat: 30 }),
            "mem-stores" => Some(PerfEvent::MemStores),
            other => {
                let n = other.strip_prefix("mem-loads:ldlat=")?.parse().ok()?;
                (n > 0).then_some(PerfEvent::MemLoads { ldlat: n })
            }
        }
    }

    pub fn name(&self) -> String {
        match self {
            PerfEvent::PageFaults => "page-faults".into(),
            PerfEvent::MemLoads { ldlat } => format!("mem-loads:ldlat={ldlat}"),
            PerfEvent::MemStores => "mem-stores".into(),
        }
    }

    /// perf's arguments up to the output file option.
    fn args(&self) -> Vec<String> {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self {
            PerfEvent::PageFaults => v(&["record", "-q", "-e", "page-faults", "-c", "1", "-d"]),
            PerfEvent::MemLoads { ldlat } => {
                let mut a = v(&["mem", "-t", "load", "record", "--ldlat"]);
                a.push(ldlat.to_string());
                a
            }
            PerfEvent::MemStores => v(&["mem", "-t", "store", "record"]),
        }
    }

    fn access(&self, thread: u32, addr: u64) -> Access {
        match self {
            PerfEvent::MemStores => Access::write(thread, addr, 1),
            _ => Access::read(thread, addr, 1),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("the perf backend needs perf, which is not installed (Debian: apt-get install linux-perf)")]
    NoPerf,
    #[error("perf could not record {0}: {1}")]
    Perf(String, String),
    #[error(
        "{0} needs memory-access sampling in the CPU's performance monitoring unit (Intel PEBS load latency, AMD IBS), which this host does not expose (perf: {1}); page-faults works everywhere"
    )]
    NoPmu(String, String),
    #[error("temporary directory: {0}")]
    Temp(io::Error),
    #[error("writing the trace: {0}")]
    Sink(io::Error),
}

/// Whether this host can sample the event: perf records `true` with it. The reason when not.
pub fn check(event: PerfEvent) -> Result<(), RecordError> {
    if !Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Err(RecordError::NoPerf);
    }
    if event == PerfEvent::PageFaults {
        return Ok(());
    }
    let dir = tempfile::tempdir().map_err(RecordError::Temp)?;
    let out = Command::new("perf")
        .args(event.args())
        .arg("-o")
        .arg(dir.path().join("probe.data"))
        .args(["--", "true"])
        .stdout(Stdio::null())
        .output()
        .map_err(|e| RecordError::Perf(event.name(), e.to_string()))?;
    if out.status.success() {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&out.stderr);
    let why = why.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no message").to_string();
    Err(RecordError::NoPmu(event.name(), why))
}

/// Parses one `perf script -F tid,addr` line: the thread id first, the address last.
fn parse(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace();
    let tid = fields.next()?.parse().ok()?;
    let addr = u64::from_str_radix(fields.last()?.trim_start_matches("0x"), 16).ok()?;
    Some((tid, addr))
}

/// Runs `program` under perf and writes one access per sample of `event` to `sink`.
pub fn record(program: &[OsString], event: PerfEvent, sink: &mut dyn Sink) -> Result<Recording, RecordError> {
    check(event)?;
    let dir = tempfile::tempdir().map_err(RecordError::Temp)?;
    // Removed on SIGINT, SIGTERM and SIGHUP too; perf dies with the recorder.
    let _listed = sharemap_trace::output::Listed::new(dir.path());
    let data = dir.path().join("perf.data");
    let parent = std::process::id() as i32;
    let mut perf = Command::new("perf");
    // SAFETY: between fork and exec only prctl, getppid and raise run.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut perf, move || sharemap_trace::output::die_with_parent(parent))
    };
    // The program's stdout and stderr pass through as they come.
    let status = perf
        .args(event.args())
        .arg("-o")
        .arg(&data)
        .arg("--")
        .args(program)
        .status()
        .map_err(|e| RecordError::Perf(event.name(), e.to_string()))?;
    if !data.exists() {
        return Err(RecordError::Perf(
            event.name(),
            "no samples written (see perf's message above; perf_event_paranoid may forbid it)".into(),
        ));
    }
    let mut script = Command::new("perf")
        .args(["script", "-F", "tid,addr", "-i"])
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| RecordError::Perf(event.name(), e.to_string()))?;
    let out = script.stdout.take().expect("piped");
    let mut ids: HashMap<u64, u32> = HashMap::new();
    let mut os_tids = Vec::new();
    let mut accesses = 0u64;
    for line in BufReader::new(out).lines() {
        let line = line.map_err(RecordError::Sink)?;
        let Some((tid, addr)) = parse(&line) else { continue };
        let next = ids.len() as u32;
        let thread = *ids.entry(tid).or_insert(next);
        if thread == next {
            os_tids.push(tid);
            sink.event(thread, EventKind::ThreadStart, tid, "").map_err(RecordError::Sink)?;
        }
        sink.access(event.access(thread, addr)).map_err(RecordError::Sink)?;
        accesses += 1;
    }
    let _ = script.wait();
    Ok(Recording {
        status,
        accesses,
        threads: ids.len() as u32,
        os_tids,
        lost: 0,
        forks: 0,
        excluded: 0,
        corrupted: None,
        burst: None,
        exe_base: 0,
        sites: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_lines_parse() {
        assert_eq!(parse("   20151 page-faults:     55c77a6a7028"), Some((20151, 0x55c77a6a7028)));
        assert_eq!(parse("20151 7ffdb7ec1799"), Some((20151, 0x7ffdb7ec1799)));
        assert_eq!(parse("not a line"), None);
    }

    #[test]
    fn events_parse() {
        assert_eq!(PerfEvent::parse("page-faults"), Some(PerfEvent::PageFaults));
        assert_eq!(PerfEvent::parse("mem-loads"), Some(PerfEvent::MemLoads { ldlat: 30 }));
        assert_eq!(PerfEvent::parse("mem-loads:ldlat=100"), Some(PerfEvent::MemLoads { ldlat: 100 }));
        assert_eq!(PerfEvent::parse("mem-loads:ldlat=0"), None);
        assert_eq!(PerfEvent::parse("cycles"), None);
        assert_eq!(PerfEvent::MemStores.access(2, 0x40), Access::write(2, 0x40, 1));
    }
}
