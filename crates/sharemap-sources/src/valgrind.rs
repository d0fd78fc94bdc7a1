//! The Valgrind source: runs an unmodified program under
//! `valgrind --tool=lackey --trace-mem=yes --trace-sched=yes` and turns its log into a trace.
//!
//! Log lines used (everything else is ignored):
//! - ` L addr,size` read, ` S addr,size` write, ` M addr,size` read then write
//!   (`I` instruction fetches are ignored);
//! - `SCHED[n]: entering VG_(scheduler)`: Valgrind thread n starts running a new thread;
//!   `SCHED[n]: exiting VG_(scheduler)`: it ends. Valgrind reuses n after an exit, so each
//!   entry gets the next dense id (thread-creation order);
//! - `SCHED[n]:  acquired lock`: thread n now runs (Valgrind runs one thread at a time),
//!   so following accesses are its own.
//!
//! The log travels through a pipe on its own file descriptor (`--log-fd`), so the
//! program's stdout and stderr reach the user unchanged.

use crate::Sink;
use sharemap_trace::{Access, EventKind, Kind};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus};

/// State of the log parser: which Valgrind thread runs, and dense ids.
#[derive(Debug, Default)]
pub struct LogParser {
    /// Valgrind tid -> dense id of its current life.
    live: HashMap<u32, u32>,
    current: Option<u32>,
    next_id: u32,
    pub accesses: u64,
    /// Lines starting with "valgrind:" (Valgrind's own errors), to show the user.
    pub valgrind_errors: Vec<String>,
}

impl LogParser {
    pub fn threads(&self) -> u32 {
        self.next_id
    }

    fn dense(&mut self, sink: &mut dyn Sink, vg_tid: u32) -> io::Result<u32> {
        if let Some(&id) = self.live.get(&vg_tid) {
            return Ok(id);
        }
        // A thread seen running before its scheduler entry (the main thread at start-up).
        self.start(sink, vg_tid)
    }

    fn start(&mut self, sink: &mut dyn Sink, vg_tid: u32) -> io::Result<u32> {
        let id = self.next_id;
        self.next_id += 1;
        self.live.insert(vg_tid, id);
        sink.event(id, EventKind::ThreadStart, vg_tid as u64, "")?;
        Ok(id)
    }

    /// Handles one log line.
    pub fn line(&mut self, sink: &mut dyn Sink, line: &[u8]) -> io::Result<()> {
        match line.first() {
            Some(b' ') => self.memory(sink, line),
            Some(b'-') | Some(b'=') => self.scheduler(sink, line),
            Some(b'v') if line.starts_with(b"valgrind:") => {
                self.valgrind_errors.push(String::from_utf8_lossy(line).trim_end().to_string());
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn memory(&mut self, sink: &mut dyn Sink, line: &[u8]) -> io::Result<()> {
        // " L 1ffefffe08,8"
        let (Some(&op), Some(rest)) = (line.get(1), line.get(3..)) else { return Ok(()) };
        if !matches!(op, b'L' | b'S' | b'M') || line.get(2) != Some(&b' ') {
            return Ok(());
        }
        let Some(comma) = rest.iter().position(|&b| b == b',') else { return Ok(()) };
        let (Some(addr), Some(size)) = (parse_hex(&rest[..comma]), parse_dec(trim_end(&rest[comma + 1..]))) else {
            return Ok(());
        };
        // Lackey never reports an empty access: such a line is not one of its.
        if size == 0 {
            return Ok(());
        }
        let vg = self.current.unwrap_or(1);
        let thread = self.dense(sink, vg)?;
        let mut emit = |kind| {
            self.accesses += 1;
            sink.access(Access { thread, addr, size, kind })
        };
        match op {
            b'L' => emit(Kind::Read),
            b'S' => emit(Kind::Write),
            _ => {
                emit(Kind::Read)?;
                emit(Kind::Write)
            }
        }
    }

    fn scheduler(&mut self, sink: &mut dyn Sink, line: &[u8]) -> io::Result<()> {
        let text = String::from_utf8_lossy(line);
        let Some(start) = text.find("SCHED[") else { return Ok(()) };
        let rest = &text[start + 6..];
        let Some(close) = rest.find(']') else { return Ok(()) };
        let Ok(vg) = rest[..close].parse::<u32>() else { return Ok(()) };
        let what = rest[close + 1..].trim_start_matches(':').trim_start();
        if what.starts_with("entering VG_(scheduler)") {
            if self.live.contains_key(&vg) && self.current != Some(vg) {
                // A reused id whose exit we missed: the old life is over.
                self.exit(sink, vg)?;
            }
            if !self.live.contains_key(&vg) {
                self.start(sink, vg)?;
            }
            self.current = Some(vg);
        } else if what.starts_with("exiting VG_(scheduler)") {
            self.exit(sink, vg)?;
        } else if what.starts_with("acquired lock") {
            self.current = Some(vg);
        }
        Ok(())
    }

    fn exit(&mut self, sink: &mut dyn Sink, vg: u32) -> io::Result<()> {
        if let Some(id) = self.live.remove(&vg) {
            sink.event(id, EventKind::ThreadExit, vg as u64, "")?;
        }
        Ok(())
    }

    /// Parses a whole log stream.
    pub fn run(&mut self, sink: &mut dyn Sink, reader: impl BufRead) -> io::Result<()> {
        let mut reader = reader;
        let mut buf = Vec::with_capacity(128);
        loop {
            buf.clear();
            if reader.read_until(b'\n', &mut buf)? == 0 {
                return Ok(());
            }
            self.line(sink, &buf)?;
        }
    }
}

fn trim_end(s: &[u8]) -> &[u8] {
    let end = s.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
    &s[..end]
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| Some(acc << 4 | (b as char).to_digit(16)? as u64))
}

fn parse_dec(s: &[u8]) -> Option<u32> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// What a recording run produced.
#[derive(Debug)]
pub struct Recording {
    pub status: ExitStatus,
    pub accesses: u64,
    pub threads: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("valgrind is not installed (apt-get install valgrind)")]
    NoValgrind,
    #[error("cannot run valgrind: {0}")]
    Spawn(io::Error),
    #[error("{0}")]
    Valgrind(String),
    #[error("writing the trace: {0}")]
    Sink(io::Error),
}

/// Runs `program` (argv) under Valgrind lackey, streaming its accesses into `sink`.
pub fn record(program: &[OsString], sink: &mut dyn Sink) -> Result<Recording, RecordError> {
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Err(RecordError::NoValgrind);
    }
    let (log_read, log_write) = io::pipe().map_err(RecordError::Spawn)?;
    let fd = log_write.as_raw_fd();
    let mut cmd = Command::new("valgrind");
    cmd.args(["--tool=lackey", "--trace-mem=yes", "--trace-sched=yes"]).arg(format!("--log-fd={fd}")).args(program);
    let parent = std::process::id() as i32;
    // SAFETY: between fork and exec only async-signal-safe fcntl runs, to let the log
    // pipe's write end survive exec, then prctl, getppid and raise: the program dies with
    // the recorder.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(io::Error::last_os_error());
            }
            sharemap_trace::output::die_with_parent(parent)
        });
    }
    let mut child = cmd.spawn().map_err(RecordError::Spawn)?;
    let _forward = crate::SignalForwarder::to(child.id());
    drop(log_write);
    let mut parser = LogParser::default();
    let parsed = parser.run(sink, BufReader::with_capacity(1 << 20, log_read));
    let status = child.wait().map_err(RecordError::Spawn)?;
    parsed.map_err(RecordError::Sink)?;
    if parser.threads() == 0 {
        // The program never ran (missing, not executable, or Valgrind refused it).
        let why =
            if parser.valgrind_errors.is_empty() { status.to_string() } else { parser.valgrind_errors.join("; ") };
        let name = program.first().map(|p| p.to_string_lossy().to_string()).unwrap_or_default();
        return Err(RecordError::Valgrind(format!("valgrind could not run '{name}' ({why})")));
    }
    for e in &parser.valgrind_errors {
        eprintln!("sharemap: {e}");
    }
    Ok(Recording { status, accesses: parser.accesses, threads: parser.threads() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VecSink;

    #[test]
    fn a_canned_log_parses_with_reused_thread_ids() {
        let log = "\
==1== Lackey, an example Valgrind tool
--1--   SCHED[1]:  acquired lock (thread_wrapper(starting new thread))
--1--   SCHED[1]: entering VG_(scheduler)
I  04016af0,3
 S 1ffefffe08,8
 L 04228e08,4
--1--   SCHED[2]:  acquired lock (thread_wrapper(starting new thread))
--1--   SCHED[2]: entering VG_(scheduler)
 M 0421f8b0,4
--1--   SCHED[2]: exiting VG_(scheduler)
--1--   SCHED[1]:  acquired lock (VG_(client_syscall)[async])
 L 10,8
--1--   SCHED[2]:  acquired lock (thread_wrapper(starting new thread))
--1--   SCHED[2]: entering VG_(scheduler)
 S 20,1
 X bogus line
";
        let mut sink = VecSink::default();
        let mut p = LogParser::default();
        p.run(&mut sink, log.as_bytes()).unwrap();
        let got: Vec<(u32, u64, u32, Kind)> =
            sink.accesses.iter().map(|a| (a.thread, a.addr, a.size, a.kind)).collect();
        assert_eq!(
            got,
            vec![
                (0, 0x1ffefffe08, 8, Kind::Write),
                (0, 0x04228e08, 4, Kind::Read),
                (1, 0x0421f8b0, 4, Kind::Read),
                (1, 0x0421f8b0, 4, Kind::Write),
                (0, 0x10, 8, Kind::Read),
                (2, 0x20, 1, Kind::Write),
            ]
        );
        assert_eq!(p.threads(), 3, "a reused Valgrind id is a new thread");
        let starts: Vec<u32> = sink.events.iter().filter(|e| e.2 == EventKind::ThreadStart).map(|e| e.1).collect();
        assert_eq!(starts, vec![0, 1, 2]);
    }
}
