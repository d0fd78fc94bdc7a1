//! Transactional allocation (TinySTM's `mod_mem.h`): `stm_malloc` inside a transaction is
//! undone if it aborts; `stm_free` takes effect only if it commits, and the memory goes back
//! to the allocator only once no transaction that could still reach it runs (epoch-based:
//! every running transaction started after the free committed).
//!
//! `stm_free(addr, size)` with a size (up to 4 KiB) also takes the block's locks (writes of
//! mask 0, values kept), so transactions reading it concurrently conflict, as in TinySTM.
//!
//! Such a block need not wait for the epochs before the same thread's next `stm_malloc` of
//! that size reuses it: its commit gave every word of it a version newer than the snapshot
//! of any transaction that started before, so such a reader, whatever it finds there, fails
//! to extend and aborts (the pointer it followed changed too). The block stays the STM's
//! until then, never returned to the allocator, so no reader can fault on it. A removed
//! node comes back hot, as malloc's own per-thread cache gives it back, and as TinySTM's
//! `mod_mem_init(0)` frees such a block at commit.
//!
//! A free without a size (TL2's `TxFree`: every STAMP free) locks the block as malloc sized
//! it but is not reused at once: a transaction that starts after the free can still reach
//! the block when the program keeps pointers in objects it has already removed (STAMP's
//! yada walks a garbage element's neighbour list), and a block reused at once is by then
//! another thread's live object. With such reuse yada at 2 threads failed its own checks or
//! crashed in about one medium run in ten under load. It waits until every running
//! transaction began at or after its free (`ThreadMem::scan_waiting`), the test TinySTM's
//! epochs apply before giving it back to malloc; a thread that is the only one registered
//! frees such blocks at commit: nobody else can reach them.

use crate::thread::Thread;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `mod_mem_init` (or the first transactional free): blocks are then reclaimed by
/// epochs, which must never miss a running reader.
static GC: AtomicBool = AtomicBool::new(false);
/// Whether each transaction publishes its start with a full fence. A start is a store
/// followed by loads of shared data, which x86 may reorder; rather than a fence on every
/// start (an `xchg`, a tenth of a small transaction), the reclaimer forces one on every
/// thread of the process with `membarrier` before it reads the starts: once per batch of
/// frees. Only where the kernel lacks `membarrier` (before Linux 4.14) do starts fence.
static FENCED_STARTS: AtomicBool = AtomicBool::new(false);

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// A full memory barrier on every running thread of the process.
pub fn fence_all_threads() {
    if FENCED_STARTS.load(Ordering::Relaxed) {
        std::sync::atomic::fence(Ordering::SeqCst);
        return;
    }
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
    if r != 0 {
        // Registered at `enable_gc`, so this does not fail; if it did, fall back for good.
        FENCED_STARTS.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// Turns epoch reclamation on (once): registers for `membarrier`, or makes starts fence.
fn enable_gc() {
    if GC.swap(true, Ordering::SeqCst) {
        return;
    }
    // SAFETY: as above.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) };
    if r != 0 {
        FENCED_STARTS.store(true, Ordering::SeqCst);
    }
}
/// Blocks of threads that exited before their frees were safe: (commit version, block).
static ORPHANS: Mutex<Vec<(u64, usize)>> = Mutex::new(Vec::new());

/// The largest block `stm_free` locks.
const LOCK_FREED_UP_TO: usize = 4096;

/// Blocks a thread keeps before it tries to give them back, and the least time between two
/// tries. Each try fences every thread (`membarrier`: an interrupt on each CPU that runs
/// one, and in a VM an exit to the hypervisor, up to half a millisecond with more threads
/// than CPUs): at 64 blocks and no limit, a red-black tree's deletes at two threads made
/// 9000 a second, 15 % of the CPU time in the kernel, and a hash set at four threads on two
/// CPUs spent 80 % of its time there. At most 50 a second per thread.
const RECLAIM_BATCH: usize = 1024;
/// When a try was too soon after the last, the frees before the clock is read again (it
/// costs about as much as a small transaction).
const RECLAIM_RECHECK: usize = 128;
const RECLAIM_GAP: std::time::Duration = std::time::Duration::from_millis(20);

/// The most freed blocks a thread keeps for reuse; the oldest go to the epochs beyond that.
const REUSE_CAP: usize = 64;
/// Blocks freed without a size that wait before the thread reads the other threads' starts
/// (a read of each one's line, which its next start writes).
const SCAN_AT: usize = 4;
/// How many of the newest reusable blocks `stm_malloc` looks through for its size.
const REUSE_SCAN: usize = 8;
/// A reused block is at least the size asked for, and less than this much larger (one
/// step of malloc's size classes: a block freed without its size counts malloc's).
const REUSE_SLACK: usize = 16;

/// A block freed with its whole size locked, by a transaction that committed at `version`.
#[derive(Clone, Copy)]
struct Freed {
    ptr: usize,
    /// The bytes whose locks the free took (0: not all of them; such a block waits for the
    /// epochs).
    size: usize,
    version: u64,
    /// Reusable only once every running transaction began at or after `version` (a free
    /// without a size): see `ThreadMem::scan_waiting`.
    waits: bool,
}

#[derive(Default)]
pub struct ThreadMem {
    /// Allocated by the running transaction: fresh from malloc (size 0) or reused.
    allocs: Vec<Freed>,
    /// Freed by the running transaction (version not yet known).
    frees: Vec<Freed>,
    /// Freed by committed transactions with all their bytes locked: the newest last.
    reusable: std::collections::VecDeque<Freed>,
    /// Freed without a size, all bytes locked, until the running transactions began after
    /// them: the oldest first.
    waiting: std::collections::VecDeque<Freed>,
    /// Freed by committed transactions, with their commit version.
    limbo: Vec<(u64, usize)>,
    /// When this thread last tried to give blocks back.
    last_reclaim: Option<std::time::Instant>,
    /// The number of blocks in limbo at which it tries next (0: `RECLAIM_BATCH`).
    reclaim_at: usize,
}

fn free(p: usize) {
    // SAFETY: p came from malloc (through stm_malloc or the program) and is freed once.
    unsafe { libc::free(p as *mut c_void) }
}

impl ThreadMem {
    pub fn on_abort(&mut self) {
        for a in self.allocs.drain(..) {
            if a.size == 0 {
                // Nobody else ever saw it: writes are buffered until commit.
                free(a.ptr);
            } else {
                // Readers of its earlier life may still run: it stays ours.
                self.reusable.push_back(a);
            }
        }
        self.frees.clear();
    }

    /// A block of `size` bytes this thread freed before, if one is at hand.
    #[inline]
    fn reuse(&mut self, size: usize) -> Option<Freed> {
        let n = self.reusable.len();
        let fits = |f: &Freed| (size..size + REUSE_SLACK).contains(&f.size);
        let i = (n.saturating_sub(REUSE_SCAN)..n).rev().find(|&i| fits(&self.reusable[i]))?;
        self.reusable.remove(i)
    }

    #[inline]
    pub fn on_commit(&mut self, version: u64) {
        self.allocs.clear();
        if !self.frees.is_empty() {
            self.retire(version);
        }
    }

    /// The committed transaction's frees wait for the transactions that may reach them.
    #[inline(never)]
    fn retire(&mut self, version: u64) {
        // A read-only transaction's frees: tag them with the clock now.
        let v = if version == 0 { crate::core::clock() } else { version };
        // With no other thread registered nothing need wait: blocks go back to malloc at
        // once, while hot, as TinySTM's epochs give them back at one thread. Asked only
        // when a block would wait (the question fences; sized frees are reused anyway).
        let alone = self.frees.iter().any(|f| f.size == 0 || f.waits) && crate::thread::alone();
        if alone {
            self.limbo.drain(..).for_each(|(_, p)| free(p));
        }
        // Taken out while `keep` borrows the rest, put back empty (its capacity kept).
        let mut frees = std::mem::take(&mut self.frees);
        for mut f in frees.drain(..) {
            f.version = v;
            if alone && (f.size == 0 || f.waits) {
                free(f.ptr);
            } else if f.size == 0 {
                self.limbo.push((v, f.ptr));
            } else if f.waits {
                self.waiting.push_back(f);
            } else {
                self.keep(f);
            }
        }
        self.frees = frees;
        if self.waiting.len() >= SCAN_AT {
            self.scan_waiting();
        }
        if self.limbo.len() < self.reclaim_at.max(RECLAIM_BATCH) {
            return;
        }
        let now = std::time::Instant::now();
        if self.last_reclaim.is_some_and(|t| now.duration_since(t) < RECLAIM_GAP) {
            self.reclaim_at = self.limbo.len() + RECLAIM_RECHECK;
            return;
        }
        reclaim(&mut self.limbo);
        self.last_reclaim = Some(now);
        self.reclaim_at = self.limbo.len() + RECLAIM_BATCH;
    }

    /// A block for this thread's next allocations of its size; the oldest kept goes to the
    /// epochs beyond `REUSE_CAP`.
    fn keep(&mut self, f: Freed) {
        if self.reusable.len() == REUSE_CAP
            && let Some(old) = self.reusable.pop_front()
        {
            self.limbo.push((old.version, old.ptr));
        }
        self.reusable.push_back(Freed { waits: false, ..f });
    }

    /// Blocks freed without a size become reusable once every running transaction began
    /// at or after their free, read without fencing the other threads. A start this read
    /// misses (still in its thread's store buffer) belongs to a transaction whose snapshot
    /// may be older; if it then reaches such a block, the lock the free took shows a
    /// version past its snapshot before it reads a word there, so it extends, and aborts
    /// if the free's transaction changed what led it there. The block stays the STM's, never
    /// given back to malloc from here, so that read cannot fault. Transactions that start
    /// later and still reach the block through pointers the program left in objects it had
    /// removed (the yada case) are exposed as under TinySTM's epochs, which give the block
    /// back to malloc's per-thread cache by the same test, not by a moment after it.
    fn scan_waiting(&mut self) {
        let oldest = oldest_running();
        while let Some(&f) = self.waiting.front()
            && f.version <= oldest
        {
            self.waiting.pop_front();
            self.keep(f);
        }
    }

    /// The thread leaves: what is not yet safe to free waits in a global list.
    pub fn exit(&mut self) {
        self.limbo.extend(self.reusable.drain(..).map(|f| (f.version, f.ptr)));
        self.limbo.extend(self.waiting.drain(..).map(|f| (f.version, f.ptr)));
        reclaim(&mut self.limbo);
        if !self.limbo.is_empty()
            && let Ok(mut o) = ORPHANS.lock()
        {
            o.append(&mut self.limbo);
        }
    }
}

/// The oldest start among running transactions.
fn oldest_running() -> u64 {
    crate::thread::used_slots().iter().map(|s| s.active_since.load(Ordering::SeqCst)).min().unwrap_or(u64::MAX)
}

/// Frees the blocks no running transaction can reach: freed at or before the oldest start.
fn reclaim(list: &mut Vec<(u64, usize)>) {
    fence_all_threads();
    let oldest = oldest_running();
    list.retain(|&(v, p)| {
        if v <= oldest {
            free(p);
            false
        } else {
            true
        }
    });
}

/// At `stm_exit`, when every transactional thread has finished: frees what waited.
pub fn reclaim_all_global() {
    if let Ok(mut o) = ORPHANS.lock() {
        reclaim(&mut o);
    }
}

/// Publishes the start of the calling thread's transaction for reclamation.
#[inline]
pub fn publish_start(th: &Thread) {
    let slot = th.slot();
    if FENCED_STARTS.load(Ordering::Relaxed) {
        slot.active_since.swap(th.tx.start(), Ordering::SeqCst);
    } else {
        slot.active_since.store(th.tx.start(), Ordering::Release);
    }
}

#[inline]
pub fn publish_end(th: &Thread) {
    th.slot().active_since.store(u64::MAX, Ordering::Release);
}

#[unsafe(no_mangle)]
pub extern "C" fn mod_mem_init(_gc: c_int) {
    enable_gc();
}

/// The thread given (null: the calling one, if registered), when inside a transaction.
///
/// # Safety
/// As `capi::given`.
unsafe fn in_tx(tx: *mut Thread) -> Option<&'static mut Thread> {
    let p = if tx.is_null() { crate::thread::current() } else { tx };
    // SAFETY: as the caller promises; the calling thread's own state otherwise.
    unsafe { p.as_mut() }.filter(|th| th.nesting > 0)
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_malloc(size: usize) -> *mut c_void {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_malloc_tx(null_mut(), size) }
}

/// # Safety
/// `tx` as `capi::stm_start_tx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_malloc_tx(tx: *mut Thread, size: usize) -> *mut c_void {
    // SAFETY: as the caller promises.
    let Some(th) = (unsafe { in_tx(tx) }) else {
        // SAFETY: malloc has no preconditions.
        return unsafe { libc::malloc(size) };
    };
    if let Some(f) = th.mem.reuse(size) {
        th.mem.allocs.push(f);
        return f.ptr as *mut c_void;
    }
    // SAFETY: malloc has no preconditions.
    let p = unsafe { libc::malloc(size) };
    if !p.is_null() {
        th.mem.allocs.push(Freed { ptr: p as usize, size: 0, version: 0, waits: false });
    }
    p
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_calloc(nm: usize, size: usize) -> *mut c_void {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_calloc_tx(null_mut(), nm, size) }
}

/// # Safety
/// `tx` as `capi::stm_start_tx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_calloc_tx(tx: *mut Thread, nm: usize, size: usize) -> *mut c_void {
    // SAFETY: calloc has no preconditions.
    let p = unsafe { libc::calloc(nm, size) };
    // SAFETY: as the caller promises.
    let th = unsafe { in_tx(tx) };
    if !p.is_null()
        && let Some(th) = th
    {
        th.mem.allocs.push(Freed { ptr: p as usize, size: 0, version: 0, waits: false });
    }
    p
}

/// # Safety
/// `addr` came from `malloc`/`stm_malloc` and is freed once; `size` bytes of it are valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_free(addr: *mut c_void, size: usize) {
    // SAFETY: as the caller promises; null is the calling thread's descriptor.
    unsafe { stm_free2_tx(null_mut(), addr, 0, size) }
}

/// # Safety
/// As `stm_free`; `tx` as `capi::stm_start_tx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_free_tx(tx: *mut Thread, addr: *mut c_void, size: usize) {
    // SAFETY: as the caller promises.
    unsafe { stm_free2_tx(tx, addr, 0, size) }
}

/// Frees `addr` if the transaction commits, and takes the locks of the `size` bytes from
/// byte `idx` of the block now (TinySTM's `stm_free2`: the part other transactions must
/// not read while it goes).
///
/// # Safety
/// `addr` came from `malloc`/`stm_malloc` and is freed once; bytes `idx..idx + size` of it
/// are valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_free2(addr: *mut c_void, idx: usize, size: usize) {
    // SAFETY: as the caller promises; null is the calling thread's descriptor.
    unsafe { stm_free2_tx(null_mut(), addr, idx, size) }
}

/// # Safety
/// As `stm_free2`; `tx` as `capi::stm_start_tx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_free2_tx(tx: *mut Thread, addr: *mut c_void, idx: usize, size: usize) {
    if addr.is_null() {
        return;
    }
    // SAFETY: as the caller promises.
    let Some(th) = (unsafe { in_tx(tx) }) else {
        free(addr as usize);
        return;
    };
    if !GC.load(Ordering::Relaxed) {
        enable_gc();
    }
    // No size given (TL2's `TxFree`, `stm_free(p, 0)`): the whole block, as malloc sized
    // it, is locked, but it waits for the epochs (the module's comment says why).
    let sized = size != 0;
    let size = if size == 0 && idx == 0 {
        // SAFETY: addr came from malloc, as the caller promises.
        unsafe { libc::malloc_usable_size(addr) }
    } else {
        size
    };
    // Take the block's locks, one write of nothing (mask 0) per lock: transactions reading
    // it now conflict, as TinySTM's do. A large block is left to the epochs alone (no
    // transaction can see its memory reused anyway): thousands of locks would only bloat
    // the write set.
    let locked = size <= LOCK_FREED_UP_TO;
    if locked {
        let granule = 1usize << crate::core::LOCK_GRANULE_BITS;
        let start = (addr as usize).saturating_add(idx);
        let mut w = start & !(granule - 1);
        while w < start.saturating_add(size) {
            // SAFETY: a word of the block being freed, which the program owned: the store
            // writes nothing (mask 0), it only takes the word's lock.
            unsafe { crate::access::store_word(th, w, 0, 0) };
            w += granule;
        }
    }
    // Reusable at once only when the program gave the size and the locks cover the block
    // from its start: a later owner of `size` bytes writes nothing a reader could take for
    // a version it has seen.
    let whole = locked && idx == 0;
    th.mem.frees.push(Freed { ptr: addr as usize, size: if whole { size } else { 0 }, version: 0, waits: !sized });
}
