//! The compile-time tracer's recorder: runs a program built with `sharemap cc` (its runtime
//! linked in), hands it a shared-memory region, drains the blocks its threads fill while it
//! runs, and at the end merges the threads' records by their global order number into the
//! trace. See the `sharemap-shm` crate for the protocol.
//!
//! Bounded memory: drained blocks stay in memory, per thread, up to a budget; past it they go
//! to an unnamed temporary file as runs (each in one thread's order), and the final merge
//! reads every thread's runs a slice at a time, then what is left in memory.

use crate::Sink;
use sharemap_shm::{self as shm, BlockHeader, Header, Record};
use sharemap_trace::{Access, EventKind, Kind};
use std::collections::BinaryHeap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How to record.
#[derive(Clone, Debug)]
pub struct Options {
    /// Blocks of the shared region (64 KiB each).
    pub blocks: usize,
    /// Record one access in K per thread.
    pub sample: u64,
    /// Leave out accesses to the threads' stacks.
    pub exclude_stack: bool,
    /// Bytes of drained records kept in memory before they go to a temporary file.
    pub memory_budget: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { blocks: 512, sample: 1, exclude_stack: false, memory_budget: 4 << 30 }
    }
}

#[derive(Debug)]
pub struct Recording {
    pub status: ExitStatus,
    pub accesses: u64,
    pub threads: u32,
    /// OS thread id of each dense thread id (0 where unknown).
    pub os_tids: Vec<u64>,
    /// Records the program's threads could not hand over (the recorder fell behind).
    pub lost: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot run '{0}': {1}")]
    Spawn(String, io::Error),
    #[error("'{0}' was not built with `sharemap cc` (no sharemap runtime attached); rebuild it with CC='sharemap cc', or use --backend valgrind")]
    NotInstrumented(String),
    #[error("shared memory for the recording: {0}")]
    Region(io::Error),
    #[error("writing the trace: {0}")]
    Sink(io::Error),
}

/// Whether the file at `path` contains the runtime's marker (the program was built with
/// `sharemap cc`).
pub fn is_instrumented(path: &std::path::Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else { return false };
    let marker = b"sharemap-runtime-v1";
    bytes.windows(marker.len()).any(|w| w == marker)
}

/// The shared region, mapped in the recorder.
struct Region {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
}

impl Region {
    fn create(blocks: usize) -> io::Result<Region> {
        let len = shm::region_bytes(blocks);
        // SAFETY: memfd_create with a NUL-terminated name; the descriptor is owned below.
        // Not close-on-exec: the program inherits it.
        let raw = unsafe { libc::memfd_create(c"sharemap".as_ptr(), 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh descriptor of ours.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sizing and mapping our own memfd; results are checked.
        let base = unsafe {
            if libc::ftruncate(raw, len as libc::off_t) != 0 {
                return Err(io::Error::last_os_error());
            }
            let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, raw, 0);
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            p as *mut u8
        };
        // SAFETY: the mapping is zeroed (fresh memfd) and large enough for the header.
        let h = unsafe { &mut *(base as *mut Header) };
        h.magic = shm::MAGIC;
        h.version = shm::VERSION;
        h.blocks = blocks as u32;
        Ok(Region { fd, base, len })
    }

    fn header(&self) -> &Header {
        // SAFETY: the header sits at the start of the mapping.
        unsafe { &*(self.base as *const Header) }
    }

    fn block(&self, i: usize) -> &BlockHeader {
        // SAFETY: i < blocks, inside the mapping.
        unsafe { &*(self.base.add(shm::block_offset(i)) as *const BlockHeader) }
    }

    fn records(&self, i: usize, n: usize) -> &[Record] {
        // SAFETY: n <= RECORDS_PER_BLOCK records follow block i's header.
        unsafe { std::slice::from_raw_parts(self.base.add(shm::block_offset(i) + shm::BLOCK_HEADER_BYTES) as *const Record, n) }
    }

    fn string(&self, offset: u32, len: u32) -> String {
        if len == 0 || (offset + len) as usize > shm::STRING_BYTES {
            return String::new();
        }
        // SAFETY: within the string area.
        let bytes = unsafe { std::slice::from_raw_parts(self.base.add(shm::string_offset() + offset as usize), len as usize) };
        String::from_utf8_lossy(bytes).into_owned()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// Drained records: per thread, in memory, and past the budget in runs of a temporary file.
struct Runs {
    file: BufWriter<File>,
    written: u64,
    /// Per thread: (offset in records, count) of each run in the file, in order.
    by_thread: Vec<Vec<(u64, u32)>>,
    /// Per thread: blocks of records not spilled yet (newer than its runs in the file).
    memory: Vec<Vec<Vec<Record>>>,
    in_memory: usize,
    budget: usize,
}

impl Runs {
    fn new(budget: usize) -> io::Result<Runs> {
        Ok(Runs { file: BufWriter::with_capacity(1 << 20, tempfile::tempfile()?), written: 0, by_thread: Vec::new(), memory: Vec::new(), in_memory: 0, budget })
    }

    fn push(&mut self, thread: u32, records: &[Record]) -> io::Result<()> {
        let t = thread as usize;
        if self.memory.len() <= t {
            self.memory.resize(t + 1, Vec::new());
            self.by_thread.resize(t + 1, Vec::new());
        }
        self.memory[t].push(records.to_vec());
        self.in_memory += std::mem::size_of_val(records);
        if self.in_memory > self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// Writes every thread's records in memory to the file, one run each.
    fn spill(&mut self) -> io::Result<()> {
        for (t, blocks) in self.memory.iter_mut().enumerate() {
            for records in blocks.drain(..) {
                self.by_thread[t].push((self.written, records.len() as u32));
                // SAFETY: Record is plain old data (two u64, repr(C)).
                let bytes = unsafe { std::slice::from_raw_parts(records.as_ptr() as *const u8, std::mem::size_of_val(records.as_slice())) };
                self.file.write_all(bytes)?;
                self.written += records.len() as u64;
            }
        }
        self.in_memory = 0;
        Ok(())
    }
}

/// Moves every block in a drainable state to the runs: FULL ones while the program runs,
/// FILLING ones too (up to their published count) once it has ended.
fn drain(region: &Region, runs: &mut Runs, ended: bool) -> io::Result<usize> {
    let mut moved = 0;
    for i in 0..region.header().blocks as usize {
        let b = region.block(i);
        let state = b.state.load(Ordering::Acquire);
        if state == shm::FULL || (ended && state == shm::FILLING) {
            let n = b.count.load(Ordering::Acquire) as usize;
            runs.push(b.thread.load(Ordering::Relaxed), region.records(i, n.min(shm::RECORDS_PER_BLOCK)))?;
            b.count.store(0, Ordering::Relaxed);
            b.state.store(shm::FREE, Ordering::Release);
            moved += 1;
        }
    }
    Ok(moved)
}

/// Runs `program` with the region, writes its accesses and events to `sink` in order.
pub fn record(program: &[OsString], opts: &Options, sink: &mut dyn Sink) -> Result<Recording, RecordError> {
    let name = program.first().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let region = Region::create(opts.blocks.max(4)).map_err(RecordError::Region)?;
    let mut runs = Runs::new(opts.memory_budget).map_err(RecordError::Region)?;
    let mut cmd = Command::new(&program[0]);
    cmd.args(&program[1..])
        .env(shm::ENV_FD, region.fd.as_raw_fd().to_string())
        .env(shm::ENV_SAMPLE, opts.sample.max(1).to_string())
        .env(shm::ENV_NO_STACK, if opts.exclude_stack { "1" } else { "0" });
    // The program's own name in its argv[0], as a shell would give it.
    cmd.arg0(&program[0]);
    let mut child = cmd.spawn().map_err(|e| RecordError::Spawn(name.clone(), e))?;
    let status = loop {
        let moved = drain(&region, &mut runs, false).map_err(RecordError::Sink)?;
        if let Some(status) = child.try_wait().map_err(|e| RecordError::Spawn(name.clone(), e))? {
            break status;
        }
        if moved == 0 {
            std::thread::sleep(Duration::from_micros(500));
        }
    };
    drain(&region, &mut runs, true).map_err(RecordError::Sink)?;
    let h = region.header();
    if h.attached.load(Ordering::Acquire) == 0 {
        return Err(RecordError::NotInstrumented(name));
    }
    let threads = h.threads.load(Ordering::Acquire);
    let lost = h.lost.load(Ordering::Relaxed);
    let (accesses, os_tids) = merge(&region, runs, threads, sink).map_err(RecordError::Sink)?;
    Ok(Recording { status, accesses, threads, os_tids, lost })
}

/// One thread's records: its runs in the file, read a slice at a time, then its records
/// still in memory.
struct Cursor {
    thread: u32,
    runs: std::vec::IntoIter<(u64, u32)>,
    /// Records of the current slice, and the position in it.
    buf: Vec<Record>,
    at: usize,
    /// What is left of the current run: (offset, count).
    rest: (u64, u32),
    tail: std::iter::Flatten<std::vec::IntoIter<Vec<Record>>>,
}

/// Records read per slice.
const SLICE: u32 = 1024;

impl Cursor {
    fn next(&mut self, file: &File) -> io::Result<Option<Record>> {
        if self.at == self.buf.len() {
            if self.rest.1 == 0 {
                match self.runs.next() {
                    Some(run) => self.rest = run,
                    None => return Ok(self.tail.next()),
                }
            }
            let n = self.rest.1.min(SLICE);
            self.buf.resize(n as usize, Record::default());
            // SAFETY: Record is plain old data; the bytes come from records written above.
            let bytes = unsafe { std::slice::from_raw_parts_mut(self.buf.as_mut_ptr() as *mut u8, n as usize * shm::RECORD_BYTES) };
            file.read_exact_at(bytes, self.rest.0 * shm::RECORD_BYTES as u64)?;
            self.rest = (self.rest.0 + n as u64, self.rest.1 - n);
            self.at = 0;
        }
        self.at += 1;
        Ok(Some(self.buf[self.at - 1]))
    }
}

/// Merges the threads' runs by order number into `sink`; returns (accesses, OS tids).
fn merge(region: &Region, runs: Runs, threads: u32, sink: &mut dyn Sink) -> io::Result<(u64, Vec<u64>)> {
    let file = runs.file.into_inner().map_err(|e| e.into_error())?;
    let mut cursors: Vec<Cursor> = runs
        .by_thread
        .into_iter()
        .zip(runs.memory)
        .enumerate()
        .map(|(t, (list, tail))| Cursor { thread: t as u32, runs: list.into_iter(), buf: Vec::new(), at: 0, rest: (0, 0), tail: tail.into_iter().flatten() })
        .collect();
    // Min-heap on (order number, cursor); each cursor's next record waits in `heads`.
    let mut heap = BinaryHeap::new();
    let mut heads: Vec<Option<Record>> = Vec::with_capacity(cursors.len());
    for (i, c) in cursors.iter_mut().enumerate() {
        let head = c.next(&file)?;
        if let Some(r) = head {
            heap.push(std::cmp::Reverse((r.seq(), i)));
        }
        heads.push(head);
    }
    let mut os_tids = vec![0u64; threads as usize];
    let mut accesses = 0u64;
    while let Some(std::cmp::Reverse((_, i))) = heap.pop() {
        let mut r = heads[i].take().expect("a queued cursor has a head");
        let thread = cursors[i].thread;
        loop {
            let mut next = cursors[i].next(&file)?;
            // A thread's start is followed by its OS id: it becomes the event's argument.
            let mut start_arg = 0;
            if r.tag() == shm::TAG_EVENT && r.event_parts().0 == EventKind::ThreadStart.code() {
                if let Some(tid) = next.filter(|n| n.tag() == shm::TAG_OS_TID) {
                    start_arg = tid.payload;
                    if let Some(slot) = os_tids.get_mut(thread as usize) {
                        *slot = tid.payload;
                    }
                    next = cursors[i].next(&file)?;
                }
            }
            match r.tag() {
                shm::TAG_READ | shm::TAG_WRITE => {
                    let kind = if r.tag() == shm::TAG_WRITE { Kind::Write } else { Kind::Read };
                    sink.access(Access { thread, addr: r.addr(), size: r.size() as u32, kind })?;
                    accesses += 1;
                }
                shm::TAG_EVENT => {
                    let (code, (offset, len), arg) = r.event_parts();
                    if let Some(kind) = EventKind::from_code(code) {
                        let arg = if kind == EventKind::ThreadStart { start_arg } else { arg as u64 };
                        sink.event(thread, kind, arg, &region.string(offset, len))?;
                    }
                }
                shm::TAG_OS_TID => {
                    if let Some(slot) = os_tids.get_mut(thread as usize) {
                        *slot = r.payload;
                    }
                }
                _ => {}
            }
            match next {
                // The thread keeps the lead while its next record comes before every other
                // thread's: a run of one thread's records costs no heap operation.
                Some(n) if heap.peek().is_none_or(|std::cmp::Reverse((s, _))| n.seq() < *s) => r = n,
                Some(n) => {
                    heap.push(std::cmp::Reverse((n.seq(), i)));
                    heads[i] = Some(n);
                    break;
                }
                None => break,
            }
        }
    }
    Ok((accesses, os_tids))
}
