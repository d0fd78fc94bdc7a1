//! The compile-time tracer's recorder: runs a program built with `sharemap cc` (its runtime
//! linked in), hands it a shared-memory region, and while the program runs takes the records
//! its threads publish and merges them by their global order number into the trace. See the
//! `sharemap-shm` crate for the protocol.
//!
//! Each round the recorder takes every published record into per-thread queues, then writes
//! records out in order for as long as it holds the next number: the numbers are dense, so
//! a missing one is a record still being written. Memory holds only what waits behind it.
//!
//! The region is written by the program, so everything read from it is checked against the
//! recorder's own copy of the layout: a block's state, thread and count, and each record's
//! tag, number, size and string. The first thing out of place means the program corrupted
//! its trace channel: the recorder stops reading the region, keeps what it took before, and
//! lets the program run to its end unrecorded. The memfd is sealed against resizing, so the
//! program cannot pull the mapping from under the recorder either.

use crate::{Recording, Sink};
/// `Options::burst`'s "every access".
pub use sharemap_shm::BURST_ALL;
use sharemap_shm::{self as shm, BlockHeader, Header, Record};
use sharemap_trace::native::DEFAULT_CHUNK_ACCESSES;
use sharemap_trace::{Access, Chunk, Event, EventKind, Kind, MAX_BURST};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, SyncSender};
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
    /// A burst-sampled build's setting for this recording (back-edges per burst, with
    /// `shm::BURST_ALL` for every access, and between bursts).
    pub burst: Option<(u64, u64)>,
    /// Leave out accesses to these address ranges.
    pub exclude: sharemap_trace::exclude::Ranges,
    /// ... and to these, given relative to the executable's load address (its symbols).
    pub exclude_in_executable: Vec<(u64, u64)>,
    /// More environment for the program (`record --no-aslr` preloads the run actor, so that
    /// the recorded address space holds the same libraries as a later `sharemap run`).
    pub env: Vec<(OsString, OsString)>,
    /// The program's output discarded rather than passed through.
    pub quiet: bool,
}

impl Default for Options {
    fn default() -> Self {
        // Each live thread holds one block while it fills it: room for 2,000 threads alive
        // at once (the region is sparse: 128 MiB at most, touched as blocks are used).
        Options {
            blocks: 2048,
            sample: 1,
            exclude_stack: false,
            burst: None,
            exclude: Default::default(),
            exclude_in_executable: Vec::new(),
            env: Vec::new(),
            quiet: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot run '{0}': {1}")]
    Spawn(String, io::Error),
    #[error(
        "'{0}' was not built with this sharemap's `sharemap cc` (no runtime attached); rebuild it with CC='sharemap cc', or use --backend valgrind"
    )]
    NotInstrumented(String),
    #[error("shared memory for the recording: {0}")]
    Region(io::Error),
    #[error("writing the trace: {0}")]
    Sink(io::Error),
}

/// What `sharemap cc` left in a program file: its runtime's marker (a traced build) and the
/// burst pass's (a burst-sampled build).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildMarks {
    pub instrumented: bool,
    pub burst: bool,
}

/// Looks for both marks where they live: in an ELF program's allocated, non-executable data
/// sections (.rodata for both). Reading the whole file instead took 7 ms of a recording of a
/// program with debug information (5 MB, of which .rodata 0.1 MB); a file that is not a
/// 64-bit little-endian ELF, or whose headers do not hold together, is searched whole.
pub fn build_marks(path: &std::path::Path) -> BuildMarks {
    let Ok(file) = std::fs::File::open(path) else { return BuildMarks::default() };
    let mut marks = BuildMarks::default();
    let mut search = |bytes: &[u8]| {
        let has = |marker: &[u8]| memchr::memmem::find(bytes, marker).is_some();
        marks.instrumented |= has(b"sharemap-runtime-v1");
        marks.burst |= has(b"sharemap-burst-v1");
    };
    match data_sections(&file) {
        Some(sections) => {
            use std::os::unix::fs::FileExt;
            let mut buf = Vec::new();
            for (offset, size) in sections {
                buf.resize(size as usize, 0);
                if file.read_exact_at(&mut buf, offset).is_err() {
                    return BuildMarks::default();
                }
                search(&buf);
            }
        }
        None => {
            use std::io::Read;
            let mut bytes = Vec::new();
            if (&file).read_to_end(&mut bytes).is_err() {
                return BuildMarks::default();
            }
            search(&bytes);
        }
    }
    marks
}

/// The (offset, size) in the file of each allocated, non-executable PROGBITS section of a
/// 64-bit little-endian ELF file; None when it is not one or its section table does not fit
/// in the file.
fn data_sections(file: &std::fs::File) -> Option<Vec<(u64, u64)>> {
    use std::os::unix::fs::FileExt;
    const PROGBITS: u32 = 1;
    const ALLOC: u64 = 2;
    const EXEC: u64 = 4;
    let len = file.metadata().ok()?.len();
    let mut ident = [0u8; 64];
    file.read_exact_at(&mut ident, 0).ok()?;
    // Magic, 64-bit class, little-endian.
    if ident[..4] != *b"\x7fELF" || ident[4] != 2 || ident[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let (table, entry, count) = (u64_at(&ident, 0x28), u16_at(&ident, 0x3A) as u64, u16_at(&ident, 0x3C) as u64);
    if entry < 64 || count == 0 || table.checked_add(entry * count)? > len {
        return None;
    }
    let mut headers = vec![0u8; (entry * count) as usize];
    file.read_exact_at(&mut headers, table).ok()?;
    let mut sections = Vec::new();
    for h in headers.chunks_exact(entry as usize) {
        let (kind, flags, offset, size) = (u32_at(h, 4), u64_at(h, 8), u64_at(h, 0x18), u64_at(h, 0x20));
        if kind == PROGBITS && flags & ALLOC != 0 && flags & EXEC == 0 {
            if offset.checked_add(size)? > len {
                return None;
            }
            sections.push((offset, size));
        }
    }
    Some(sections)
}

/// The shared region, mapped in the recorder.
struct Region {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    /// Blocks in the region: the recorder's own copy (the header's can be overwritten).
    blocks: usize,
}

impl Region {
    fn create(blocks: usize) -> io::Result<Region> {
        let len = shm::region_bytes(blocks);
        // SAFETY: memfd_create with a NUL-terminated name; the descriptor is owned below.
        // Not close-on-exec: the program inherits it.
        let raw = unsafe { libc::memfd_create(c"sharemap".as_ptr(), libc::MFD_ALLOW_SEALING) };
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
            // The program holds the descriptor: a shrunk file would fault the recorder's reads.
            let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
            if libc::fcntl(raw, libc::F_ADD_SEALS, seals) != 0 {
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
        h.recorder.store(std::process::id(), Ordering::Relaxed);
        Ok(Region { fd, base, len, blocks })
    }

    fn header(&self) -> &Header {
        // SAFETY: the header sits at the start of the mapping.
        unsafe { &*(self.base as *const Header) }
    }

    /// The stretches of the region ever written, as (start, end) offsets: the rest are
    /// holes, which read as zeros (a free, empty block), and reading them would make the
    /// kernel give each its page. Where holes cannot be told, the whole region.
    fn written(&self) -> Vec<(usize, usize)> {
        let whole = vec![(0, self.len)];
        let fd = self.fd.as_raw_fd();
        let seek = |at: usize, whence: libc::c_int| {
            // SAFETY: lseek on our own descriptor.
            let to = unsafe { libc::lseek(fd, at as libc::off_t, whence) };
            if to >= 0 { Ok(to as usize) } else { Err(io::Error::last_os_error()) }
        };
        let mut stretches = Vec::new();
        let mut at = 0;
        while at < self.len {
            let start = match seek(at, libc::SEEK_DATA) {
                Ok(start) => start,
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => break, // no data past `at`
                Err(_) => return whole,
            };
            let Ok(end) = seek(start, libc::SEEK_HOLE) else { return whole };
            if end <= start {
                return whole;
            }
            stretches.push((start, end.min(self.len)));
            at = end;
        }
        stretches
    }

    fn block(&self, i: usize) -> &BlockHeader {
        assert!(i < self.blocks);
        // SAFETY: i < blocks, inside the mapping.
        unsafe { &*(self.base.add(shm::block_offset(i)) as *const BlockHeader) }
    }

    fn records(&self, i: usize, n: usize) -> &[Record] {
        assert!(i < self.blocks && n <= shm::RECORDS_PER_BLOCK);
        // SAFETY: n <= RECORDS_PER_BLOCK records follow block i's header.
        unsafe {
            std::slice::from_raw_parts(
                self.base.add(shm::block_offset(i) + shm::BLOCK_HEADER_BYTES) as *const Record,
                n,
            )
        }
    }

    fn string(&self, offset: u32, len: u32) -> String {
        if len == 0 || offset as usize + len as usize > shm::STRING_BYTES {
            return String::new();
        }
        // SAFETY: within the string area.
        let bytes =
            unsafe { std::slice::from_raw_parts(self.base.add(shm::string_offset() + offset as usize), len as usize) };
        String::from_utf8_lossy(bytes).into_owned()
    }
}

// SAFETY: the mapping lives as long as the Region; the merging thread reads published
// records and updates block states through atomics, the writing thread never touches it.
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// Records taken per round at most: the queues stay in cache between the copy and the merge.
const TAKE_PER_ROUND: usize = 16 * 1024;

/// Records held waiting for a missing number at most (2 GiB): a thread holding a number
/// publishes it within moments, so this many waiting means the number will never come.
const QUEUED_MAX: usize = 128 << 20;

/// A block in use, as one round's scan found it.
struct Piece {
    thread: usize,
    /// The number of its first record (MAX when it has none yet).
    first: u64,
    block: usize,
    count: usize,
    /// Handed over: its count is final, and once its records are in it can be freed.
    full: bool,
    /// Its place among its thread's blocks.
    ordinal: u32,
}

/// The merge: records taken from the region, per thread, waiting for their turn.
struct Merger<'a> {
    region: &'a Region,
    /// This round's scan of the blocks in use, and the threads whose chain stopped.
    pieces: Vec<Piece>,
    stopped: Vec<bool>,
    /// Per block: records already taken from it.
    taken: Vec<u32>,
    /// Per thread: records taken and not written yet, in order.
    queues: Vec<VecDeque<Record>>,
    /// The number of the next record to write.
    next: u64,
    /// What is written, built here and handed whole to the writing thread, which sends
    /// the emptied chunks back.
    chunk: Chunk,
    out: SyncSender<Chunk>,
    spare: Receiver<Chunk>,
    accesses: u64,
    os_tids: Vec<u64>,
    /// Per thread: the CPU it was last seen on (`NO_CPU`: not yet).
    cpus: Vec<u32>,
    /// Per thread: back-edges run in bursts and in all (a burst-sampled build's).
    burst_edges: Vec<(u64, u64)>,
    /// Per thread: the least number its next record may carry (above its last one).
    after: Vec<u64>,
    /// Per thread: the ordinal of the block whose records come next.
    ordinals: Vec<u32>,
    /// Records in the queues.
    queued: usize,
    /// What the program broke in the region, once it did: nothing more is taken.
    corrupted: Option<String>,
    /// Per thread: the allocation whose records are coming in (address, allocator, size).
    allocating: Vec<Option<(u64, u8, u64)>>,
    /// The code addresses the recording names (allocation and access sites), up to
    /// `MAX_SITES`, for the recorder to resolve against the program's debug information.
    sites: std::collections::HashSet<u64>,
}

const NO_CPU: u32 = u32::MAX;
/// Distinct code addresses a recording resolves at most (a program has fewer places that
/// allocate or access memory than this; more are not named).
const MAX_SITES: usize = 1 << 20;

impl<'a> Merger<'a> {
    fn new(region: &'a Region, out: SyncSender<Chunk>, spare: Receiver<Chunk>) -> Self {
        let blocks = region.blocks;
        Merger {
            region,
            pieces: Vec::new(),
            stopped: Vec::new(),
            taken: vec![0; blocks],
            queues: Vec::new(),
            next: 0,
            chunk: Chunk::default(),
            out,
            spare,
            accesses: 0,
            os_tids: Vec::new(),
            cpus: Vec::new(),
            burst_edges: Vec::new(),
            after: Vec::new(),
            ordinals: Vec::new(),
            queued: 0,
            corrupted: None,
            allocating: Vec::new(),
            sites: Default::default(),
        }
    }

    fn note_site(&mut self, pc: u64) {
        if pc != 0 && self.sites.len() < MAX_SITES {
            self.sites.insert(pc);
        }
    }

    /// One round: takes what is published, then writes what is ready (everything, once the
    /// program has ended: a record it died writing leaves a gap). Returns the records taken.
    fn round(&mut self, ended: bool) -> usize {
        let taken = self.take();
        self.write_ready(ended);
        taken
    }

    /// Takes the published records of every block in use, freeing the full ones.
    ///
    /// Each thread's blocks are taken in the order it filled them (by their first number),
    /// and a block not seen full stops its thread's chain for this round: a later block of
    /// the thread, filled while the scan went on, must wait until this one's tail is in.
    fn take(&mut self) -> usize {
        if self.corrupted.is_some() {
            return 0;
        }
        // Only as far as producers have gone (clamped: the program can write anything
        // there; records beyond a false count are reported at the end, not taken).
        let used = (self.region.header().blocks_used.load(Ordering::Acquire) as usize).min(self.taken.len());
        for i in 0..used {
            let b = self.region.block(i);
            let state = b.state.load(Ordering::Acquire);
            if state == shm::FREE {
                continue;
            }
            let count = b.count.load(Ordering::Acquire);
            let thread = b.thread.load(Ordering::Relaxed);
            if let Err(what) = check_block(state, count, thread, self.taken[i]) {
                self.pieces.clear();
                self.corrupted = Some(format!("block {i} {what}"));
                return 0;
            }
            let full = state == shm::FULL;
            if !full && count == 0 {
                // Just taken: what its header names may not be visible yet (the first
                // record's publication, or the hand-over, makes it so), and it holds nothing.
                continue;
            }
            let (n, thread) = (count as usize, thread as usize);
            let first = if n == 0 { u64::MAX } else { self.region.records(i, 1)[0].seq() };
            let ordinal = b.ordinal.load(Ordering::Relaxed);
            // Full: its count is final (a thread that ends hands over its block part full).
            self.pieces.push(Piece { thread, first, block: i, count: n, full, ordinal });
        }
        // By first number: what the merge needs soonest is taken first, each thread's
        // blocks in their order.
        self.pieces.sort_unstable_by_key(|p| p.first);
        self.stopped.clear();
        let mut moved = 0;
        let mut lowest_freed = usize::MAX;
        for p in &self.pieces {
            if self.stopped.len() <= p.thread {
                self.stopped.resize(p.thread + 1, false);
            }
            if self.stopped[p.thread] {
                continue;
            }
            if self.ordinals.len() <= p.thread {
                self.ordinals.resize(p.thread + 1, 0);
            }
            // A later block of the thread than the one due (which this scan missed: taken
            // after the scan passed its place, or beyond the blocks in use it read) waits.
            let due = self.ordinals[p.thread];
            if p.ordinal != due {
                if p.ordinal.wrapping_sub(due) > u32::MAX / 2 {
                    self.corrupted = Some(format!(
                        "block {} (thread {}) says it is the thread's block {}, whose records were taken already",
                        p.block, p.thread, p.ordinal
                    ));
                    break;
                }
                self.stopped[p.thread] = true;
                continue;
            }
            let from = self.taken[p.block] as usize;
            let to = p.count.min(from + (TAKE_PER_ROUND - moved));
            if to > from {
                if self.queues.len() <= p.thread {
                    self.queues.resize_with(p.thread + 1, VecDeque::new);
                    self.after.resize(p.thread + 1, 0);
                }
                let fresh = &self.region.records(p.block, to)[from..];
                // Numbers below `next` are written already: none may come again.
                let mut after = self.after[p.thread].max(self.next);
                let checked = check_records(fresh, &mut after);
                let good = checked.as_ref().map_or_else(|(k, _)| *k, |_| fresh.len());
                self.queues[p.thread].extend(fresh[..good].iter().copied());
                self.after[p.thread] = after;
                moved += good;
                self.queued += good;
                self.taken[p.block] = (from + good) as u32;
                if let Err((k, what)) = checked {
                    self.corrupted =
                        Some(format!("block {} (thread {}), record {}: {what}", p.block, p.thread, from + k));
                    break;
                }
                if self.queued > QUEUED_MAX {
                    self.corrupted = Some(format!(
                        "record number {} never came while {} records waited behind it",
                        self.next, self.queued
                    ));
                    break;
                }
            }
            if p.full && to == p.count {
                lowest_freed = lowest_freed.min(p.block);
                self.ordinals[p.thread] = due.wrapping_add(1);
                let b = self.region.block(p.block);
                self.taken[p.block] = 0;
                b.count.store(0, Ordering::Relaxed);
                b.state.store(shm::FREE, Ordering::Release);
            } else {
                self.stopped[p.thread] = true;
            }
            if moved == TAKE_PER_ROUND {
                break;
            }
        }
        self.pieces.clear();
        if lowest_freed != usize::MAX {
            self.region.header().free_hint.store(lowest_freed as u32, Ordering::Relaxed);
        }
        moved
    }

    /// Once the program is gone and every round is done: records still in a block were
    /// never reached (a block out of its thread's order), which only a program that wrote
    /// over the region's headers causes.
    fn check_nothing_left(&mut self) {
        if self.corrupted.is_some() {
            return;
        }
        let written = self.region.written();
        let mut stretch = written.iter().peekable();
        for i in 0..self.taken.len() {
            let at = shm::block_offset(i);
            while stretch.next_if(|&&(_, end)| end <= at).is_some() {}
            match stretch.peek() {
                Some(&&(start, _)) if start <= at => {}
                Some(_) => continue, // a hole: never written
                None => break,
            }
            let b = self.region.block(i);
            let count = b.count.load(Ordering::Acquire);
            if b.state.load(Ordering::Acquire) != shm::FREE && count > self.taken[i] {
                let thread = b.thread.load(Ordering::Relaxed);
                self.corrupted = Some(format!(
                    "block {i} (thread {thread}) still holds {} records: it says it is the thread's block {}, and block {} of the thread never came",
                    count - self.taken[i],
                    b.ordinal.load(Ordering::Relaxed),
                    self.ordinals.get(thread as usize).copied().unwrap_or(0)
                ));
                return;
            }
        }
    }

    /// Writes queued records in order while the next number is in hand (or all of them).
    fn write_ready(&mut self, all: bool) {
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
            self.queues.iter().enumerate().filter_map(|(t, q)| q.front().map(|r| Reverse((r.seq(), t)))).collect();
        while let Some(&Reverse((seq, t))) = heap.peek() {
            if seq != self.next && !all {
                break;
            }
            heap.pop();
            // The thread keeps the lead while it holds the next number: a run of one
            // thread's records costs no heap operation, and its accesses go to the chunk's
            // columns in one pass.
            loop {
                let run = self.access_run(t);
                if run > 0 {
                    self.queues[t].drain(..run);
                    self.queued -= run;
                } else if let Some(r) = self.queues[t].pop_front() {
                    self.queued -= 1;
                    // An event, or the record after a gap (once the program has ended).
                    self.next = r.seq() + 1;
                    self.write(t as u32, r);
                }
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
    }

    /// Appends to the chunk the accesses at the front of thread `t`'s queue that carry the
    /// next numbers in a row (as many as the chunk has room for); returns how many.
    fn access_run(&mut self, t: usize) -> usize {
        let room = DEFAULT_CHUNK_ACCESSES - self.chunk.accesses.len();
        let (head, tail) = self.queues[t].as_slices();
        let batch = &mut self.chunk.accesses;
        let mut n = 0;
        for r in head.iter().chain(tail).take(room) {
            if r.seq() != self.next || r.tag() > shm::TAG_WRITE {
                break;
            }
            batch.push(access_of(t as u32, r));
            self.next += 1;
            n += 1;
        }
        self.accesses += n as u64;
        if self.chunk.accesses.len() == DEFAULT_CHUNK_ACCESSES {
            self.flush();
        }
        n
    }

    fn write(&mut self, thread: u32, r: Record) {
        let at = self.accesses;
        match r.tag() {
            shm::TAG_READ | shm::TAG_WRITE => {
                self.chunk.accesses.push(access_of(thread, &r));
                self.accesses += 1;
            }
            shm::TAG_EVENT => {
                let (code, (offset, len), arg) = r.event_parts();
                if let Some(kind) = EventKind::from_code(code) {
                    let label = self.region.string(offset, len);
                    self.chunk.events.push(Event::new(at, thread, kind, arg as u64, label));
                }
            }
            shm::TAG_BURST_END => {
                let (inside, before) = (r.payload & 0xffff_ffff, r.payload >> 32);
                let t = thread as usize;
                if self.burst_edges.len() <= t {
                    self.burst_edges.resize(t + 1, (0, 0));
                }
                let e = &mut self.burst_edges[t];
                *e = (e.0.saturating_add(inside), e.1.saturating_add(inside + before));
                self.chunk.events.push(Event::new(at, thread, EventKind::BurstEnd, r.payload, ""));
            }
            shm::TAG_CPU => {
                // A `cpu` event only when the thread is somewhere new.
                let (t, cpu) = (thread as usize, r.payload.min(u32::MAX as u64 - 1) as u32);
                if self.cpus.len() <= t {
                    self.cpus.resize(t + 1, NO_CPU);
                }
                if std::mem::replace(&mut self.cpus[t], cpu) != cpu {
                    self.chunk.events.push(Event::new(at, thread, EventKind::Cpu, cpu as u64, ""));
                }
            }
            shm::TAG_ACCESS_SITE => {
                self.note_site(r.payload);
                self.chunk.events.push(Event::new(at, thread, EventKind::AccessSite, r.payload, ""));
            }
            shm::TAG_ALLOC | shm::TAG_ALLOC_SIZE | shm::TAG_ALLOC_SITE => {
                let t = thread as usize;
                if self.allocating.len() <= t {
                    self.allocating.resize(t + 1, None);
                }
                // The three records come in this order; anything else is dropped.
                match (r.tag(), self.allocating[t]) {
                    (shm::TAG_ALLOC, _) => {
                        let (addr, how) = r.alloc_parts();
                        self.allocating[t] = Some((addr, how, u64::MAX));
                    }
                    (shm::TAG_ALLOC_SIZE, Some((addr, how, u64::MAX))) => {
                        self.allocating[t] = Some((addr, how, r.payload));
                    }
                    (shm::TAG_ALLOC_SITE, Some((addr, how, size))) if size != u64::MAX => {
                        self.allocating[t] = None;
                        self.note_site(r.payload);
                        let how = shm::ALLOCATORS[how as usize];
                        self.chunk.events.push(Event::alloc(at, thread, addr, size, r.payload, how));
                    }
                    _ => self.allocating[t] = None,
                }
            }
            shm::TAG_FREE => {
                let (addr, how) = r.alloc_parts();
                self.chunk.events.push(Event::new(at, thread, EventKind::Free, addr, shm::RELEASERS[how as usize]));
            }
            shm::TAG_THREAD_START => {
                let t = thread as usize;
                if self.os_tids.len() <= t {
                    self.os_tids.resize(t + 1, 0);
                }
                self.os_tids[t] = r.payload;
                self.chunk.events.push(Event::new(at, thread, EventKind::ThreadStart, r.payload, ""));
            }
            _ => {}
        }
        if self.chunk.accesses.len() >= DEFAULT_CHUNK_ACCESSES || self.chunk.events.len() >= DEFAULT_CHUNK_ACCESSES {
            self.flush();
        }
    }

    /// Hands what is built to the writing thread (if it has stopped on an error, the
    /// chunk is dropped: the recording continues until the program ends).
    fn flush(&mut self) {
        let mut next = self.spare.try_recv().unwrap_or_default();
        next.clear();
        next.first_access = self.accesses;
        let _ = self.out.send(std::mem::replace(&mut self.chunk, next));
    }
}

/// Checks a block in use as the scan found it (`taken`: its records taken already); the
/// error says what is out of place.
fn check_block(state: u32, count: u32, thread: u32, taken: u32) -> Result<(), String> {
    if state != shm::FILLING && state != shm::FULL {
        return Err(format!("is in state {state}, which the runtime never sets"));
    }
    if count as usize > shm::RECORDS_PER_BLOCK {
        return Err(format!("counts {count} records; a block holds {}", shm::RECORDS_PER_BLOCK));
    }
    if count < taken {
        return Err(format!("counts {count} records, fewer than the {taken} already taken from it"));
    }
    if thread >= shm::MAX_THREADS {
        return Err(format!("names thread {thread}; a trace holds {} threads", shm::MAX_THREADS));
    }
    Ok(())
}

/// Checks records one thread published, in order: each carries a number at least `after`
/// (which moves past it) and a tag, size and string the runtime writes. The error gives the
/// index of the first record out of place and what is wrong with it.
fn check_records(records: &[Record], after: &mut u64) -> Result<(), (usize, String)> {
    for (k, r) in records.iter().enumerate() {
        let seq = r.seq();
        if seq < *after {
            return Err((k, format!("number {seq} is out of order (expected {} or above)", *after)));
        }
        let fine = match r.tag() {
            shm::TAG_READ | shm::TAG_WRITE => (1..=shm::MAX_ACCESS_SIZE).contains(&r.size()),
            shm::TAG_EVENT => {
                let (code, (offset, len), _) = r.event_parts();
                EventKind::from_code(code).is_some() && offset as usize + len as usize <= shm::STRING_BYTES
            }
            shm::TAG_THREAD_START | shm::TAG_CPU | shm::TAG_BURST_END => true,
            shm::TAG_ACCESS_SITE | shm::TAG_ALLOC_SIZE | shm::TAG_ALLOC_SITE => true,
            shm::TAG_ALLOC => (r.alloc_parts().1 as usize) < shm::ALLOCATORS.len(),
            shm::TAG_FREE => (r.alloc_parts().1 as usize) < shm::RELEASERS.len(),
            _ => false,
        };
        if !fine {
            return Err((
                k,
                format!("tag {} with payload {:#x} is not a record the runtime writes", r.tag(), r.payload),
            ));
        }
        *after = seq + 1;
    }
    Ok(())
}

/// The access an access record holds.
#[inline]
fn access_of(thread: u32, r: &Record) -> Access {
    let kind = if r.tag() == shm::TAG_WRITE { Kind::Write } else { Kind::Read };
    Access { thread, addr: r.addr(), size: r.size() as u32, kind }
}

/// The `[stack]` mapping of process `pid`, from its /proc maps.
fn main_stack(pid: u32) -> Option<(u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let line = maps.lines().find(|l| l.ends_with("[stack]"))?;
    let (lo, hi) = line.split_whitespace().next()?.split_once('-')?;
    let (lo, hi) = (u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?);
    (hi > lo).then_some((lo, hi))
}

/// The recorder's pause between rounds that found less than a full round's records: from
/// `MIN_PAUSE`, doubled after each round that took under a quarter of one, halved after the
/// others, up to `MAX_PAUSE`. A fixed 200 µs had the recorder waking about 5,000 times a
/// second beside a burst-sampled program, taking a few records each time, on the CPUs the
/// program's threads use. The region holds 8M records, far more than a program makes in a
/// pause; and the end of the program ends a pause at once (`ExitWatch`).
const MIN_PAUSE: Duration = Duration::from_micros(200);
const MAX_PAUSE: Duration = Duration::from_millis(5);

fn next_pause(pause: Duration, taken: usize) -> Duration {
    if taken < TAKE_PER_ROUND / 4 { (pause * 2).min(MAX_PAUSE) } else { (pause / 2).max(MIN_PAUSE) }
}

/// Waits for the program's end or a timeout: a pidfd polled, which the end of the process
/// makes readable. Without one (a kernel before 5.3) a plain sleep, of 1 ms at most, bounds
/// how late the recorder sees the end.
struct ExitWatch(Option<OwnedFd>);

impl ExitWatch {
    fn new(pid: u32) -> Self {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        // SAFETY: a descriptor just opened, owned by nobody else.
        ExitWatch((fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    fn wait(&self, timeout: Duration) {
        match &self.0 {
            Some(fd) => {
                let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                let t = libc::timespec { tv_sec: timeout.as_secs() as _, tv_nsec: timeout.subsec_nanos() as _ };
                // SAFETY: one valid pollfd and timespec, no signal mask. An interruption
                // just ends the wait early.
                unsafe { libc::ppoll(&mut p, 1, &t, std::ptr::null()) };
            }
            None => std::thread::sleep(timeout.min(Duration::from_millis(1))),
        }
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
    if let Some((on, off)) = opts.burst {
        cmd.env(shm::ENV_BURST_ON, on.to_string()).env(shm::ENV_BURST_OFF, off.to_string());
    }
    cmd.envs(opts.env.iter().map(|(k, v)| (k, v)));
    if opts.quiet {
        cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    }
    // The program's own name in its argv[0], as a shell would give it.
    cmd.arg0(&program[0]);
    // It dies with the recorder (killed with SIGKILL, the recorder can forward nothing).
    let parent = std::process::id() as i32;
    // SAFETY: between fork and exec only prctl, getppid and raise run.
    unsafe { cmd.pre_exec(move || sharemap_trace::output::die_with_parent(parent)) };
    let mut child = cmd.spawn().map_err(|e| RecordError::Spawn(name.clone(), e))?;
    let _forward = crate::SignalForwarder::to(child.id());
    // One thread merges, this one encodes and writes: the two stages run side by side.
    let (out, chunks) = mpsc::sync_channel::<Chunk>(2);
    let (give_back, spare) = mpsc::channel::<Chunk>();
    let mut excluded = 0;
    let (merged, written) = std::thread::scope(|scope| {
        let merging = scope.spawn(|| {
            let mut merger = Merger::new(&region, out, spare);
            let mut told = false;
            let exit = ExitWatch::new(child.id());
            let mut pause = MIN_PAUSE;
            let mut main_stack_noted = false;
            let status = loop {
                // The main thread's stack, read from outside once the program has attached:
                // read from inside, through glibc, it would take from the program's heap and
                // move its allocations from where an unrecorded run has them.
                if !main_stack_noted && region.header().attached.load(Ordering::Acquire) != 0 {
                    main_stack_noted = true;
                    if let Some((lo, hi)) = main_stack(child.id()) {
                        merger.chunk.events.push(Event::alloc(merger.accesses, 0, lo, hi - lo, 0, "stack"));
                    }
                }
                let taken = merger.round(false);
                if merger.corrupted.is_some() && !told {
                    // Tell the runtime the recorder is gone: its threads stop recording once
                    // no free block is left, and the program runs on unrecorded.
                    region.header().recorder.store(u32::MAX, Ordering::Relaxed);
                    told = true;
                }
                if let Some(status) = child.try_wait()? {
                    break status;
                }
                if taken < TAKE_PER_ROUND {
                    pause = next_pause(pause, taken);
                    exit.wait(pause);
                }
            };
            // The program is gone: whatever it published is final. Take it all, then write
            // what is left past any gap (a record it died writing).
            while merger.round(false) > 0 {}
            merger.round(true);
            merger.check_nothing_left();
            merger.flush();
            // Every thread's first record is its start: the threads are those that sent one
            // (or any record), whatever count the program left in the header.
            let seen = merger.queues.len().max(merger.os_tids.len()) as u32;
            let mut sites: Vec<u64> = merger.sites.into_iter().collect();
            sites.sort_unstable();
            let found = (merger.accesses, merger.os_tids, merger.corrupted, merger.burst_edges, seen, sites);
            Ok::<_, io::Error>((status, found))
        });
        let mut written = Ok(());
        let mut out = crate::ExcludingSink::new(sink, opts.exclude.clone());
        let mut placed = opts.exclude_in_executable.is_empty();
        for mut chunk in chunks {
            // Records come only after the runtime attached, which set the load address.
            if !placed {
                let base = region.header().exe_base.load(Ordering::Acquire);
                for &(lo, hi) in &opts.exclude_in_executable {
                    out.ranges.add(lo.wrapping_add(base), hi.wrapping_add(base));
                }
                placed = true;
            }
            if written.is_ok() {
                written = out.chunk(&mut chunk);
            }
            let _ = give_back.send(chunk);
        }
        excluded = out.excluded;
        (merging.join(), written)
    });
    let (status, (accesses, mut os_tids, corrupted, burst_edges, threads, sites)) = match merged {
        Ok(r) => r.map_err(|e| RecordError::Spawn(name.clone(), e))?,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    written.map_err(RecordError::Sink)?;
    let h = region.header();
    // The program writes the header: a mark cleared after records came is a fault of its,
    // not a build without the runtime.
    let unattached = h.attached.load(Ordering::Acquire) == 0;
    if unattached && threads == 0 {
        return Err(RecordError::NotInstrumented(name));
    }
    let corrupted = match corrupted {
        None if unattached => Some(format!(
            "the runtime's attached mark in its header was cleared after {accesses} accesses came through"
        )),
        other => other,
    };
    let lost = h.lost.load(Ordering::Relaxed);
    let forks = h.forks.load(Ordering::Relaxed);
    os_tids.resize(threads as usize, 0);
    // Written by the program: a setting no build makes says the channel was tampered with.
    let (on, off) = (h.burst_on.load(Ordering::Relaxed), h.burst_off.load(Ordering::Relaxed));
    // Each thread's weight: the back-edges it ran over those it ran in bursts.
    let weights = (0..threads as usize)
        .map(|t| match burst_edges.get(t) {
            Some(&(inside, all)) if inside > 0 => all as f64 / inside as f64,
            _ => 0.0,
        })
        .collect();
    let burst = (on != 0 || off != 0).then_some(sharemap_trace::Burst { on, off, weights });
    let corrupted = match &burst {
        Some(b) if corrupted.is_none() && (b.on == 0 || b.off == 0 || b.on > MAX_BURST || b.off > MAX_BURST) => {
            Some(format!("burst setting {on}:{off} in its header"))
        }
        _ => corrupted,
    };
    let burst = burst.filter(|_| corrupted.is_none());
    let exe_base = h.exe_base.load(Ordering::Relaxed);
    Ok(Recording {
        status,
        accesses: accesses - excluded,
        threads,
        os_tids,
        lost,
        forks,
        excluded,
        corrupted,
        burst,
        exe_base,
        sites,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plays a producer: block `i` is `thread`'s block number `ordinal`, holding reads
    /// numbered `seqs`, handed over when `full`.
    fn fill(region: &Region, i: usize, thread: u32, ordinal: u32, seqs: std::ops::Range<u64>, full: bool) {
        let b = region.block(i);
        // SAFETY: the records follow block i's header, inside the mapping.
        let records = unsafe { region.base.add(shm::block_offset(i) + shm::BLOCK_HEADER_BYTES) as *mut Record };
        for (k, seq) in seqs.clone().enumerate() {
            // SAFETY: k < RECORDS_PER_BLOCK in these tests.
            unsafe { records.add(k).write(Record::access(seq, false, 0x1000 + 8 * seq, 8)) };
        }
        b.thread.store(thread, Ordering::Relaxed);
        b.ordinal.store(ordinal, Ordering::Relaxed);
        b.count.store(seqs.count() as u32, Ordering::Release);
        b.state.store(if full { shm::FULL } else { shm::FILLING }, Ordering::Release);
    }

    fn merged(region: &Region, rounds: impl FnOnce(&mut Merger)) -> (Vec<u64>, Option<String>) {
        let (out, chunks) = mpsc::sync_channel::<Chunk>(16);
        let (_give_back, spare) = mpsc::channel::<Chunk>();
        let mut merger = Merger::new(region, out, spare);
        rounds(&mut merger);
        merger.flush();
        let corrupted = merger.corrupted.take();
        drop(merger);
        (chunks.iter().flat_map(|c| c.accesses.addr.clone()).collect(), corrupted)
    }

    fn addrs(seqs: std::ops::Range<u64>) -> Vec<u64> {
        seqs.map(|s| 0x1000 + 8 * s).collect()
    }

    /// The trace says what one access site stands for with the runtime's own period.
    #[test]
    fn the_trace_and_the_runtime_agree_on_the_access_site_period() {
        assert_eq!(shm::ACCESS_SITE_PERIOD, sharemap_trace::ACCESS_SITE_PERIOD);
    }

    #[test]
    fn a_threads_later_block_waits_for_the_one_a_scan_missed() {
        let region = Region::create(8).unwrap();
        // Thread 0 filled block 5 (its first), then took block 1; the recorder's scan read
        // the blocks in use before block 5 was counted among them.
        fill(&region, 5, 0, 0, 0..100, true);
        fill(&region, 1, 0, 1, 100..150, false);
        region.header().blocks_used.store(2, Ordering::Relaxed);
        let (out, corrupted) = merged(&region, |m| {
            m.round(false);
            assert_eq!(m.queued, 0, "the later block was taken first");
            region.header().blocks_used.store(6, Ordering::Relaxed);
            while m.round(false) > 0 {}
            m.round(true);
            m.check_nothing_left();
        });
        assert_eq!(corrupted, None);
        assert_eq!(out, addrs(0..150));
    }

    #[test]
    fn blocks_out_of_their_threads_order_are_reported() {
        // A block claiming a place already taken.
        let region = Region::create(8).unwrap();
        fill(&region, 0, 0, 0, 0..10, true);
        region.header().blocks_used.store(8, Ordering::Relaxed);
        let (_, corrupted) = merged(&region, |m| {
            m.round(false);
            fill(&region, 3, 0, 0, 10..20, true);
            m.round(false);
        });
        assert!(corrupted.is_some_and(|c| c.contains("block 3 (thread 0)") && c.contains("taken already")));
        // A block whose predecessor never comes: its records are reported, not dropped.
        let region = Region::create(8).unwrap();
        fill(&region, 2, 0, 1, 0..10, true);
        region.header().blocks_used.store(8, Ordering::Relaxed);
        let (out, corrupted) = merged(&region, |m| {
            while m.round(false) > 0 {}
            m.round(true);
            m.check_nothing_left();
        });
        assert!(out.is_empty());
        assert!(corrupted.is_some_and(|c| c.contains("still holds 10 records") && c.contains("block 0 of the thread")));
    }

    /// Records left in a block past the blocks the header says are in use are still found,
    /// and blocks never written are not read (they stay holes in the memfd).
    #[test]
    fn records_past_the_blocks_in_use_are_found_without_reading_every_block() {
        let region = Region::create(256).unwrap();
        fill(&region, 200, 0, 1, 0..10, true);
        region.header().blocks_used.store(2, Ordering::Relaxed);
        let written = region.written();
        let covers = |i: usize| written.iter().any(|&(a, b)| a <= shm::block_offset(i) && shm::block_offset(i) < b);
        assert!(covers(200) && !covers(100), "written: {written:?}");
        let mut before_check = Vec::new();
        let (out, corrupted) = merged(&region, |m| {
            while m.round(false) > 0 {}
            m.round(true);
            before_check = region.written();
            m.check_nothing_left();
        });
        assert!(out.is_empty());
        assert!(corrupted.is_some_and(|c| c.contains("block 200 (thread 0) still holds 10 records")));
        assert_eq!(region.written(), before_check, "the check gave no hole a page");
    }

    /// The marks are found in an ELF file's data sections, and in any other file whole.
    #[test]
    fn build_marks_reads_data_sections_or_the_whole_file() {
        // This test's own binary holds both marks as literals in its .rodata.
        let exe = std::env::current_exe().unwrap();
        assert!(data_sections(&std::fs::File::open(&exe).unwrap()).is_some_and(|s| !s.is_empty()));
        assert_eq!(build_marks(&exe), BuildMarks { instrumented: true, burst: true });
        let dir = std::env::temp_dir().join(format!("sharemap-marks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("text");
        std::fs::write(&text, b"#!/bin/sh\n# sharemap-burst-v1\n").unwrap();
        assert_eq!(build_marks(&text), BuildMarks { instrumented: false, burst: true });
        // An ELF header whose section table lies past the end: searched whole.
        let mut head = std::fs::read(&exe).unwrap()[..64].to_vec();
        head.extend_from_slice(b"sharemap-runtime-v1");
        let cut = dir.join("cut");
        std::fs::write(&cut, &head).unwrap();
        assert_eq!(build_marks(&cut), BuildMarks { instrumented: true, burst: false });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pauses_grow_while_rounds_find_little_and_shrink_when_they_find_much() {
        let mut p = MIN_PAUSE;
        for _ in 0..20 {
            p = next_pause(p, 0);
        }
        assert_eq!(p, MAX_PAUSE);
        p = next_pause(p, TAKE_PER_ROUND / 2);
        assert_eq!(p, MAX_PAUSE / 2);
        for _ in 0..20 {
            p = next_pause(p, TAKE_PER_ROUND - 1);
        }
        assert_eq!(p, MIN_PAUSE);
    }

    #[test]
    fn a_pause_ends_when_the_program_does() {
        let mut child = Command::new("sleep").arg("0.1").spawn().unwrap();
        let watch = ExitWatch::new(child.id());
        assert!(watch.0.is_some(), "pidfd_open failed on this kernel");
        let started = std::time::Instant::now();
        watch.wait(Duration::from_secs(60));
        // Far below the timeout: the end of the program woke the wait.
        assert!(started.elapsed() < Duration::from_secs(30), "waited {:?}", started.elapsed());
        assert!(child.try_wait().unwrap().is_some());
    }
}
