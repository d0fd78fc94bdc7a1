//! sharemap's tracer runtime, linked into programs built with `sharemap cc` / `sharemap c++`.
//!
//! The compiler calls it on every load and store (clang's sanitizer-coverage callbacks, or
//! gcc's ThreadSanitizer ones); it writes each access, numbered by one global counter, into
//! the calling thread's block of the shared memory `sharemap record` handed over (see the
//! `sharemap-shm` crate). Nothing is buffered privately, so nothing is lost when the program
//! dies. When the program is not run under `sharemap record`, every callback returns at once.
//!
//! The runtime itself is not instrumented, and it keeps no thread-local state that needs a
//! destructor: threads torn down in any order (libomp's at exit) find nothing to run.

mod alloc;
mod annotate;
mod atomics;
mod burst;
mod entry;
mod memfns;
mod threads;

/// What the STM built with the tracer records through (crates/sharemap-stm-traced).
pub mod stm {
    /// Records a transactional access.
    pub fn access(write: bool, addr: usize, size: usize) {
        crate::access(write, addr, size);
    }

    /// Records a transaction event (the trace format's code) with its argument.
    pub fn event(kind: u8, arg: u16) {
        crate::event(kind, b"", arg);
    }

    /// Stops (true) or resumes (false) recording the calling thread; the previous setting.
    pub fn quiet(on: bool) -> bool {
        crate::THREAD.with(|t| t.busy.replace(on))
    }
}

use core::cell::Cell;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicU32, Ordering};
use sharemap_shm::{BlockHeader, FILLING, FREE, FULL, Header, RECORDS_PER_BLOCK, Record};

/// A string the recorder looks for to tell an instrumented program.
#[used]
#[unsafe(no_mangle)]
pub static SHAREMAP_RUNTIME_MARKER: [u8; 20] = *b"sharemap-runtime-v1\0";

/// Attaches when the program starts, so that a recording sees the runtime even when the
/// program makes no traced access. Beside the marker: `sharemap cc` keeps both linked.
#[used]
#[unsafe(link_section = ".init_array")]
static ATTACH_AT_START: extern "C" fn() = attach_at_start;

extern "C" fn attach_at_start() {
    let _ = active();
}

/// Where the recording region is asked to go (32 TiB: above the executable and its heap,
/// below the libraries and mappings at the top of the address space).
const REGION_HINT: usize = 0x2000_0000_0000;

const UNINIT: u8 = 0;
const STARTING: u8 = 1;
const ACTIVE: u8 = 2;
const OFF: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static REGION: AtomicPtr<u8> = AtomicPtr::new(null_mut());
/// Record one access in SAMPLE per thread (1: all).
static SAMPLE: AtomicU32 = AtomicU32::new(1);
static NO_STACK: AtomicU8 = AtomicU8::new(0);

/// Per-thread state: plain cells, no destructor.
pub(crate) struct ThreadState {
    /// Dense id, or NO_ID before the thread has one.
    id: Cell<u32>,
    block: Cell<*mut BlockHeader>,
    records: Cell<*mut Record>,
    count: Cell<u32>,
    /// Accesses to skip before the next sampled one.
    skip: Cell<u32>,
    /// Set while the runtime runs on this thread (a wrapped libc call inside it).
    busy: Cell<bool>,
    /// The thread's stack [low, high), when stack accesses are excluded.
    stack: Cell<(usize, usize)>,
    /// It waited `WAIT_MS` for a block in vain: it does not wait again until it gets one.
    starved: Cell<bool>,
    /// Blocks taken so far.
    blocks_taken: Cell<u32>,
    /// Recorded accesses until the next one whose code address is recorded too.
    site_in: Cell<u32>,
}

const NO_ID: u32 = u32::MAX;

thread_local! {
    static THREAD: ThreadState = const {
        ThreadState {
            id: Cell::new(NO_ID),
            block: Cell::new(null_mut()),
            records: Cell::new(null_mut()),
            count: Cell::new(0),
            skip: Cell::new(0),
            busy: Cell::new(false),
            stack: Cell::new((0, 0)),
            starved: Cell::new(false),
            blocks_taken: Cell::new(0),
            site_in: Cell::new(0),
        }
    };
}

/// Whether tracing is on, attaching to the recorder's region on the first call.
#[inline]
fn active() -> bool {
    match STATE.load(Ordering::Acquire) {
        ACTIVE => true,
        OFF => false,
        _ => start(),
    }
}

#[cold]
fn start() -> bool {
    // The runtime's own code calls the wrapped memcpy and memset too: while this thread is
    // inside the runtime (attaching, here), it records nothing.
    if THREAD.with(|t| t.busy.get()) {
        return false;
    }
    if STATE.compare_exchange(UNINIT, STARTING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
        let region = inside(attach);
        REGION.store(region, Ordering::Release);
        STATE.store(if region.is_null() { OFF } else { ACTIVE }, Ordering::Release);
    }
    // Another thread is attaching: wait for it.
    loop {
        match STATE.load(Ordering::Acquire) {
            ACTIVE => return true,
            OFF => return false,
            _ => core::hint::spin_loop(),
        }
    }
}

/// Maps the region named by SHAREMAP_FD; null when there is none or it is not ours.
fn attach() -> *mut u8 {
    let env = |name: &str| -> Option<u64> {
        let mut key = [0u8; 32];
        key[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: key is NUL-terminated; getenv returns a C string or null.
        let v = unsafe { libc::getenv(key.as_ptr() as *const libc::c_char) };
        if v.is_null() {
            return None;
        }
        // SAFETY: getenv's result is a valid C string.
        let s = unsafe { core::ffi::CStr::from_ptr(v) };
        s.to_str().ok()?.trim().parse().ok()
    };
    let Some(fd) = env(sharemap_shm::ENV_FD) else { return null_mut() };
    SAMPLE.store(env(sharemap_shm::ENV_SAMPLE).unwrap_or(1).clamp(1, u32::MAX as u64) as u32, Ordering::Relaxed);
    NO_STACK.store(u8::from(env(sharemap_shm::ENV_NO_STACK) == Some(1)), Ordering::Relaxed);
    burst::set_override(env(sharemap_shm::ENV_BURST_ON), env(sharemap_shm::ENV_BURST_OFF));
    // SAFETY: fstat and mmap on a descriptor we were given; results are checked.
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        if libc::fstat(fd as i32, &mut st) != 0 || (st.st_size as usize) < sharemap_shm::region_bytes(1) {
            return null_mut();
        }
        // Far below where the kernel maps by default, so that the program's own mappings
        // (large allocations, libraries loaded later) land where they do in a run without
        // the recorder: with address randomisation off, a recording's addresses then hold
        // for `sharemap run`. Only a hint: if it is taken, the kernel chooses.
        let p = libc::mmap(
            REGION_HINT as *mut libc::c_void,
            st.st_size as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd as i32,
            0,
        );
        if p == libc::MAP_FAILED {
            return null_mut();
        }
        let h = &*(p as *const Header);
        if h.magic != sharemap_shm::MAGIC
            || h.version != sharemap_shm::VERSION
            || sharemap_shm::region_bytes(h.blocks as usize) > st.st_size as usize
        {
            libc::munmap(p, st.st_size as usize);
            return null_mut();
        }
        // One process per recording: the first to attach. A program it execs later finds
        // the region taken (its accesses would be of another address space).
        let me = libc::getpid() as u32;
        if let Err(other) = h.attached.compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire)
            && other != me
        {
            libc::munmap(p, st.st_size as usize);
            return null_mut();
        }
        // A forked child stops recording: it shares the region but not the parent's address
        // space, and its copy of the forking thread's state points at the parent's block.
        libc::pthread_atfork(Some(count_fork), None, Some(stop_in_child));
        h.exe_base.store(executable_base(), Ordering::Release);
        p as *mut u8
    }
}

/// The main program's load bias: the first object `dl_iterate_phdr` reports.
fn executable_base() -> u64 {
    extern "C" fn first(info: *mut libc::dl_phdr_info, _: usize, out: *mut libc::c_void) -> i32 {
        // SAFETY: the loader passes a valid info; `out` is the u64 below.
        unsafe { *(out as *mut u64) = (*info).dlpi_addr };
        1
    }
    let mut base = 0u64;
    // SAFETY: the callback only reads the info it is given and writes `base`.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut base as *mut u64 as *mut libc::c_void) };
    base
}

/// In the parent, before a fork: counted, so the recorder can say children went unrecorded.
extern "C" fn count_fork() {
    if STATE.load(Ordering::Acquire) == ACTIVE {
        header().forks.fetch_add(1, Ordering::Relaxed);
    }
}

/// In a forked child: record nothing more, and forget the block the forking thread was
/// filling (it is the parent's).
extern "C" fn stop_in_child() {
    STATE.store(OFF, Ordering::Release);
    THREAD.with(|t| t.block.set(null_mut()));
}

/// Whether the recorder process is gone (killed): then nobody frees blocks any more. The
/// recorder started this program, so once it ends the program has another parent (even
/// while the dead recorder is a zombie nobody has reaped yet).
fn recorder_gone() -> bool {
    let pid = header().recorder.load(Ordering::Relaxed);
    // SAFETY: getppid has no preconditions.
    pid != 0 && unsafe { libc::getppid() } as u32 != pid
}

#[inline]
fn header() -> &'static Header {
    // SAFETY: only called when ACTIVE, when REGION points at a mapped, checked region.
    unsafe { &*(REGION.load(Ordering::Relaxed) as *const Header) }
}

/// The calling thread's id, handing out the next one if it has none yet.
fn thread_id(t: &ThreadState) -> u32 {
    let id = t.id.get();
    if id != NO_ID {
        return id;
    }
    // A thread not created through pthread_create (the main thread): numbered at its first
    // record, which its start event then precedes.
    let id = header().threads.fetch_add(1, Ordering::Relaxed);
    set_thread_id(id);
    threads::started_on(t);
    id
}

/// The key whose destructor hands over an ending thread's block (0: not created yet).
static RETIRE_KEY: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
const NO_KEY: usize = usize::MAX;

/// Arranges for the calling thread's block to be handed over when the thread ends: a
/// program that creates and joins threads by the thousand must not leave a block behind
/// with each. A pthread key's destructor runs last at thread exit, after the program's own
/// thread-local destructors (which may still record). The main thread needs none: its
/// block is read up to its count when the program ends.
fn retire_at_exit() {
    let mut key = RETIRE_KEY.load(Ordering::Acquire);
    if key == 0 {
        let mut k: libc::pthread_key_t = 0;
        // SAFETY: creating a key with a destructor of the right signature.
        let made = unsafe { libc::pthread_key_create(&mut k, Some(retire_block)) } == 0;
        let new = if made { k as usize + 1 } else { NO_KEY };
        key = match RETIRE_KEY.compare_exchange(0, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => new,
            Err(other) => {
                if made {
                    // SAFETY: our own key, never used.
                    unsafe { libc::pthread_key_delete(k) };
                }
                other
            }
        };
    }
    if key != NO_KEY {
        // SAFETY: a live key; any non-null value makes the destructor run.
        unsafe { libc::pthread_setspecific((key - 1) as libc::pthread_key_t, core::ptr::dangling::<libc::c_void>()) };
    }
}

/// Marks the ending thread's partly filled block full at its count: the recorder takes its
/// records and frees it.
extern "C" fn retire_block(_: *mut libc::c_void) {
    THREAD.with(|t| {
        let b = t.block.get();
        if !b.is_null() {
            // SAFETY: the thread's own block in the mapped region.
            unsafe { &*b }.state.store(FULL, Ordering::Release);
            t.block.set(null_mut());
        }
    });
}

/// A free block for thread `id`; waits for the recorder to free one (`WAIT_MS` at most,
/// and not at all for a thread that already waited in vain, until it gets a block again).
/// When the recorder is gone, recording stops and the program goes on.
fn take_block(t: &ThreadState, id: u32) -> bool {
    let h = header();
    let blocks = h.blocks;
    let base = REGION.load(Ordering::Relaxed);
    let waits = if t.starved.get() { 1 } else { sharemap_shm::WAIT_MS };
    for attempt in 0..waits {
        // From the lowest block the recorder freed last: those it has just emptied are
        // still in the caches, and the part of the region ever touched stays as small as
        // the recorder's backlog (taking blocks in turn through the whole region had made
        // every record a cache miss and cost a short recording 30 ms of page faults). A
        // scan from block 0 would cross the whole backlog's headers when the recorder is
        // behind. (A program that wrote 0 over the header's block count finds none.)
        let start = h.free_hint.load(Ordering::Relaxed).checked_rem(blocks).unwrap_or(0);
        for k in 0..blocks {
            let i = (start + k) % blocks;
            // SAFETY: i < blocks, inside the checked region.
            let b = unsafe { &*(base.add(sharemap_shm::block_offset(i as usize)) as *const BlockHeader) };
            if b.state.load(Ordering::Relaxed) == FREE
                && b.state.compare_exchange(FREE, FILLING, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                b.thread.store(id, Ordering::Relaxed);
                b.count.store(0, Ordering::Relaxed);
                b.ordinal.store(t.blocks_taken.get(), Ordering::Relaxed);
                t.blocks_taken.set(t.blocks_taken.get().wrapping_add(1));
                h.blocks_used.fetch_max(i + 1, Ordering::Release);
                t.block.set(b as *const BlockHeader as *mut BlockHeader);
                // SAFETY: the records follow the block header.
                t.records.set(unsafe {
                    base.add(sharemap_shm::block_offset(i as usize) + sharemap_shm::BLOCK_HEADER_BYTES)
                } as *mut Record);
                t.count.set(0);
                t.starved.set(false);
                return true;
            }
        }
        // Every block is taken: the recorder is behind, gone, or every block is held by a
        // live thread. Wait a millisecond, unless the recorder is gone.
        if attempt % 64 == 0 && recorder_gone() {
            STATE.store(OFF, Ordering::Release);
            return false;
        }
        if waits > 1 {
            // SAFETY: plain sleep.
            unsafe { libc::usleep(1000) };
        }
    }
    t.starved.set(true);
    false
}

/// Hands one record to the recorder from thread state `t`. A thread that takes a new block
/// first says where it runs (the kernel's CPU number, from the vDSO: tens of nanoseconds
/// per block of 4096 records).
#[inline]
fn push(t: &ThreadState, make: impl FnOnce(u64) -> Record) {
    let id = thread_id(t);
    let fresh = t.block.get().is_null();
    if id >= sharemap_shm::MAX_THREADS || (fresh && !take_block(t, id)) {
        header().lost.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if fresh {
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu >= 0 {
            publish(t, |seq| Record::cpu(seq, cpu as u32));
        }
    }
    publish(t, make);
}

/// Writes one record into the block thread state `t` holds, and publishes it.
#[inline]
fn publish(t: &ThreadState, make: impl FnOnce(u64) -> Record) {
    // Numbers are dense: one is taken only now that the record has a place, and it is
    // published below (see sharemap-shm).
    let seq = header().seq.fetch_add(1, Ordering::Relaxed);
    let n = t.count.get();
    // SAFETY: n < RECORDS_PER_BLOCK, within the block this thread owns.
    unsafe { t.records.get().add(n as usize).write(make(seq)) };
    let n = n + 1;
    t.count.set(n);
    // SAFETY: the block is this thread's.
    let block = unsafe { &*t.block.get() };
    block.count.store(n, Ordering::Release);
    if n as usize == RECORDS_PER_BLOCK {
        block.state.store(FULL, Ordering::Release);
        t.block.set(null_mut());
    }
}

/// Records an access of `size` bytes at `addr`; ranges are cut at page boundaries.
#[inline]
pub(crate) fn access(write: bool, addr: usize, size: usize) {
    access_from(write, addr, size, 0);
}

/// Records an access made by the instruction before code address `site` (0: not known).
#[inline]
pub(crate) fn access_from(write: bool, addr: usize, size: usize, site: usize) {
    if !active() {
        return;
    }
    THREAD.with(|t| {
        if t.busy.get() {
            return;
        }
        t.busy.set(true);
        record_access(t, write, addr, size, site);
        t.busy.set(false);
    });
}

/// Sampling, stack exclusion, one access in `ACCESS_SITE_PERIOD` with its code address,
/// then the access's records, cut at page boundaries.
fn record_access(t: &ThreadState, write: bool, addr: usize, size: usize, site: usize) {
    let sample = SAMPLE.load(Ordering::Relaxed);
    if sample > 1 {
        let s = t.skip.get();
        if s > 0 {
            t.skip.set(s - 1);
            return;
        }
        t.skip.set(sample - 1);
    }
    let (lo, hi) = t.stack.get();
    if addr >= lo && addr < hi {
        return;
    }
    if site != 0 {
        match t.site_in.get() {
            0 => {
                push(t, |seq| Record::tagged(seq, sharemap_shm::TAG_ACCESS_SITE, site as u64));
                t.site_in.set(sharemap_shm::ACCESS_SITE_PERIOD - 1);
            }
            n => t.site_in.set(n - 1),
        }
    }
    let mut a = addr as u64;
    let end = a + size as u64;
    while a < end {
        let page_end = (a | (sharemap_shm::MAX_ACCESS_SIZE - 1)) + 1;
        let piece = end.min(page_end) - a;
        push(t, |seq| Record::access(seq, write, a, piece));
        a += piece;
    }
}

/// Records an event (the trace format's kind code), with a label and a small argument.
pub(crate) fn event(kind: u8, label: &[u8], arg: u16) {
    if !active() {
        return;
    }
    THREAD.with(|t| {
        if !t.busy.replace(true) {
            event_on(t, kind, label, arg);
            t.busy.set(false);
        }
    });
}

fn event_on(t: &ThreadState, kind: u8, label: &[u8], arg: u16) {
    let string = store_string(label);
    push(t, |seq| Record::event(seq, kind, string, arg));
}

/// Records the end of the thread's burst, with the back-edges it ran in it and before it.
pub(crate) fn burst_end(in_burst: u64, before: u64) {
    if !active() {
        return;
    }
    THREAD.with(|t| {
        if !t.busy.replace(true) {
            push(t, |seq| Record::burst_end(seq, in_burst, before));
            t.busy.set(false);
        }
    });
}

/// Records the thread's start, with its OS id.
fn thread_start_on(t: &ThreadState, tid: u64) {
    push(t, |seq| Record::thread_start(seq, tid));
}

/// Copies a label into the region's string area: (offset, length), or (0, 0).
fn store_string(s: &[u8]) -> (u32, u32) {
    if s.is_empty() {
        return (0, 0);
    }
    let len = s.len().min(255) as u32;
    let at = header().strings_used.fetch_add(len, Ordering::Relaxed);
    if (at + len) as usize > sharemap_shm::STRING_BYTES {
        return (0, 0);
    }
    // SAFETY: [at, at + len) lies in the string area, reserved for this call alone.
    unsafe {
        let dst = REGION.load(Ordering::Relaxed).add(sharemap_shm::string_offset() + at as usize);
        core::ptr::copy_nonoverlapping(s.as_ptr(), dst, len as usize);
    }
    (at, len)
}

/// Runs `f` with this thread's accesses not recorded (the runtime's own work, and the
/// libc calls it wraps).
pub(crate) fn inside<R>(f: impl FnOnce() -> R) -> R {
    let was = THREAD.with(|t| t.busy.replace(true));
    let r = f();
    THREAD.with(|t| t.busy.set(was));
    r
}

/// Gives the calling thread `id` (threads created through `pthread_create`).
pub(crate) fn set_thread_id(id: u32) {
    retire_at_exit();
    THREAD.with(|t| {
        t.id.set(id);
        if NO_STACK.load(Ordering::Relaxed) == 1 {
            let was = t.busy.replace(true);
            t.stack.set(threads::stack_range());
            t.busy.set(was);
        }
    });
}

/// The calling thread's id, assigning one if needed (None when not tracing).
pub(crate) fn current_id() -> Option<u32> {
    active().then(|| inside(|| THREAD.with(thread_id)))
}

/// Runs `f` on the calling thread's state (when tracing), as runtime work.
pub(crate) fn with_thread(f: impl FnOnce(&ThreadState)) {
    if active() {
        THREAD.with(|t| {
            if !t.busy.replace(true) {
                f(t);
                t.busy.set(false);
            }
        });
    }
}

/// A new dense id for a thread about to be created.
pub(crate) fn next_id() -> Option<u32> {
    active().then(|| header().threads.fetch_add(1, Ordering::Relaxed))
}
