//! The page-fault source: `perf record -e page-faults -c 1 -d` runs an unmodified program
//! and samples every page fault with its address — the first touch of each page by the
//! program (and, with NUMA balancing on, the kernel's hinting faults), as kMAF and NUMA
//! balancing see a program. A fault does not say whether it was a read or a write: it is
//! recorded as a read of one byte at the faulting address. Threads are numbered in the order
//! their first fault appears (OS thread ids kept).

use crate::{Recording, Sink};
use sharemap_trace::{Access, EventKind};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader};
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("the faults backend needs perf, which is not installed (Debian: apt-get install linux-perf)")]
    NoPerf,
    #[error("perf could not record page faults: {0}")]
    Perf(String),
    #[error("temporary directory: {0}")]
    Temp(io::Error),
    #[error("writing the trace: {0}")]
    Sink(io::Error),
}

/// Parses one `perf script -F tid,addr` line: the thread id first, the address last.
fn parse(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace();
    let tid = fields.next()?.parse().ok()?;
    let addr = u64::from_str_radix(fields.last()?.trim_start_matches("0x"), 16).ok()?;
    Some((tid, addr))
}

/// Runs `program` under perf and writes one access per page fault to `sink`.
pub fn record(program: &[OsString], sink: &mut dyn Sink) -> Result<Recording, RecordError> {
    if !Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Err(RecordError::NoPerf);
    }
    let dir = tempfile::tempdir().map_err(RecordError::Temp)?;
    let data = dir.path().join("perf.data");
    // perf is quiet (-q): the program's stdout and stderr pass through as they come.
    let status = Command::new("perf")
        .args(["record", "-q", "-e", "page-faults", "-c", "1", "-d", "-o"])
        .arg(&data)
        .arg("--")
        .args(program)
        .status()
        .map_err(|e| RecordError::Perf(e.to_string()))?;
    if !data.exists() {
        return Err(RecordError::Perf(
            "no samples written (see perf's message above; perf_event_paranoid may forbid it)".into(),
        ));
    }
    let mut script = Command::new("perf")
        .args(["script", "-F", "tid,addr", "-i"])
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| RecordError::Perf(e.to_string()))?;
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
        sink.access(Access::read(thread, addr, 1)).map_err(RecordError::Sink)?;
        accesses += 1;
    }
    let _ = script.wait();
    Ok(Recording { status, accesses, threads: ids.len() as u32, os_tids, lost: 0, forks: 0, excluded: 0 })
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
}
