//! The compile-time tracer's recorder: runs a program built with `sharemap cc` (its runtime
//! linked in), hands it a shared-memory region, and while the program runs takes the records
//! its threads publish and merges them by their global order number into the trace. See the
//! `sharemap-shm` crate for the protocol.
//!
//! Each round the recorder takes every published record into per-thread queues, then writes
//! records out in order for as long as it holds the next number: the numbers are dense, so
//! a missing one is a record still being written. Memory holds only what waits behind it.

use crate::{Recording, Sink};
use sharemap_shm::{self as shm, BlockHeader, Header, Record};
use sharemap_trace::{Access, EventKind, Kind};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
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
}

impl Default for Options {
    fn default() -> Self {
        Options { blocks: 512, sample: 1, exclude_stack: false }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot run '{0}': {1}")]
    Spawn(String, io::Error),
    #[error("'{0}' was not built with this sharemap's `sharemap cc` (no runtime attached); rebuild it with CC='sharemap cc', or use --backend valgrind")]
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

/// A block in use, as one round's scan found it.
struct Piece {
    thread: usize,
    /// The number of its first record (MAX when it has none yet).
    first: u64,
    block: usize,
    count: usize,
    /// Full and published: its last records are in and it can be freed.
    full: bool,
}

/// The merge: records taken from the region, per thread, waiting for their turn.
struct Merger<'a> {
    region: &'a Region,
    /// This round's scan of the blocks in use.
    pieces: Vec<Piece>,
    /// Per block: records already taken from it.
    taken: Vec<u32>,
    /// Per thread: records taken and not written yet, in order.
    queues: Vec<VecDeque<Record>>,
    /// The number of the next record to write.
    next: u64,
    accesses: u64,
    os_tids: Vec<u64>,
}

impl<'a> Merger<'a> {
    fn new(region: &'a Region) -> Self {
        Merger { region, pieces: Vec::new(), taken: vec![0; region.header().blocks as usize], queues: Vec::new(), next: 0, accesses: 0, os_tids: Vec::new() }
    }

    /// One round: takes what is published, then writes what is ready (everything, once the
    /// program has ended: a record it died writing leaves a gap). Returns the records taken.
    fn round(&mut self, sink: &mut dyn Sink, ended: bool) -> io::Result<usize> {
        let taken = self.take();
        self.write_ready(sink, ended)?;
        Ok(taken)
    }

    /// Takes the published records of every block in use, freeing the full ones.
    ///
    /// Each thread's blocks are taken in the order it filled them (by their first number),
    /// and a block not seen full stops its thread's chain for this round: a later block of
    /// the thread, filled while the scan went on, must wait until this one's tail is in.
    fn take(&mut self) -> usize {
        for i in 0..self.taken.len() {
            let b = self.region.block(i);
            let state = b.state.load(Ordering::Acquire);
            if state == shm::FREE {
                continue;
            }
            let n = (b.count.load(Ordering::Acquire) as usize).min(shm::RECORDS_PER_BLOCK);
            let thread = b.thread.load(Ordering::Relaxed) as usize;
            let first = if n == 0 { u64::MAX } else { self.region.records(i, 1)[0].seq() };
            self.pieces.push(Piece { thread, first, block: i, count: n, full: state == shm::FULL && n == shm::RECORDS_PER_BLOCK });
        }
        self.pieces.sort_unstable_by_key(|p| (p.thread, p.first));
        let mut moved = 0;
        let mut stopped = None;
        for p in &self.pieces {
            if stopped == Some(p.thread) {
                continue;
            }
            let from = self.taken[p.block] as usize;
            if p.count > from {
                if self.queues.len() <= p.thread {
                    self.queues.resize_with(p.thread + 1, VecDeque::new);
                }
                self.queues[p.thread].extend(self.region.records(p.block, p.count)[from..].iter().copied());
                moved += p.count - from;
                self.taken[p.block] = p.count as u32;
            }
            if p.full {
                let b = self.region.block(p.block);
                self.taken[p.block] = 0;
                b.count.store(0, Ordering::Relaxed);
                b.state.store(shm::FREE, Ordering::Release);
            } else {
                stopped = Some(p.thread);
            }
        }
        self.pieces.clear();
        moved
    }

    /// Writes queued records in order while the next number is in hand (or all of them).
    fn write_ready(&mut self, sink: &mut dyn Sink, all: bool) -> io::Result<()> {
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
            self.queues.iter().enumerate().filter_map(|(t, q)| q.front().map(|r| Reverse((r.seq(), t)))).collect();
        while let Some(&Reverse((seq, t))) = heap.peek() {
            if seq != self.next && !all {
                break;
            }
            heap.pop();
            // The thread keeps the lead while it holds the next number: a run of one
            // thread's records costs no heap operation.
            loop {
                let r = self.queues[t].pop_front().expect("a queued thread has a record");
                self.next = r.seq() + 1;
                self.write(t as u32, r, sink)?;
                match self.queues[t].front() {
                    Some(n) if n.seq() == self.next => continue,
                    Some(n) => {
                        heap.push(Reverse((n.seq(), t)));
                        break;
                    }
                    None => break,
                }
            }
        }
        Ok(())
    }

    fn write(&mut self, thread: u32, r: Record, sink: &mut dyn Sink) -> io::Result<()> {
        match r.tag() {
            shm::TAG_READ | shm::TAG_WRITE => {
                let kind = if r.tag() == shm::TAG_WRITE { Kind::Write } else { Kind::Read };
                sink.access(Access { thread, addr: r.addr(), size: r.size() as u32, kind })?;
                self.accesses += 1;
            }
            shm::TAG_EVENT => {
                let (code, (offset, len), arg) = r.event_parts();
                if let Some(kind) = EventKind::from_code(code) {
                    sink.event(thread, kind, arg as u64, &self.region.string(offset, len))?;
                }
            }
            shm::TAG_THREAD_START => {
                let t = thread as usize;
                if self.os_tids.len() <= t {
                    self.os_tids.resize(t + 1, 0);
                }
                self.os_tids[t] = r.payload;
                sink.event(thread, EventKind::ThreadStart, r.payload, "")?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// Runs `program` with the region, writes its accesses and events to `sink` in order.
pub fn record(program: &[OsString], opts: &Options, sink: &mut dyn Sink) -> Result<Recording, RecordError> {
    let name = program.first().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let region = Region::create(opts.blocks.max(4)).map_err(RecordError::Region)?;
    let mut cmd = Command::new(&program[0]);
    cmd.args(&program[1..])
        .env(shm::ENV_FD, region.fd.as_raw_fd().to_string())
        .env(shm::ENV_SAMPLE, opts.sample.max(1).to_string())
        .env(shm::ENV_NO_STACK, if opts.exclude_stack { "1" } else { "0" });
    // The program's own name in its argv[0], as a shell would give it.
    cmd.arg0(&program[0]);
    let mut child = cmd.spawn().map_err(|e| RecordError::Spawn(name.clone(), e))?;
    let mut merger = Merger::new(&region);
    let status = loop {
        let taken = merger.round(sink, false).map_err(RecordError::Sink)?;
        if let Some(status) = child.try_wait().map_err(|e| RecordError::Spawn(name.clone(), e))? {
            break status;
        }
        if taken == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    };
    // The program is gone: whatever it published is final.
    merger.round(sink, true).map_err(RecordError::Sink)?;
    let h = region.header();
    if h.attached.load(Ordering::Acquire) == 0 {
        return Err(RecordError::NotInstrumented(name));
    }
    let threads = h.threads.load(Ordering::Acquire);
    let lost = h.lost.load(Ordering::Relaxed);
    let mut os_tids = merger.os_tids.clone();
    os_tids.resize(threads as usize, 0);
    Ok(Recording { status, accesses: merger.accesses, threads, os_tids, lost })
}

