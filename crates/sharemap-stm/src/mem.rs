//! Transactional allocation (TinySTM's `mod_mem.h`): `stm_malloc` inside a transaction is
//! undone if it aborts; `stm_free` takes effect only if it commits, and the memory goes back
//! to the allocator only once no transaction that could still reach it runs (epoch-based:
//! every running transaction started after the free committed).
//!
//! `stm_free(addr, size)` with a size (up to 4 KiB) also takes the block's locks (writes of
//! mask 0, values kept), so transactions reading it concurrently conflict, as in TinySTM.

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

#[derive(Default)]
pub struct ThreadMem {
    /// Allocated by the running transaction.
    allocs: Vec<usize>,
    /// Freed by the running transaction.
    frees: Vec<usize>,
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
        for p in self.allocs.drain(..) {
            free(p);
        }
        self.frees.clear();
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
        for p in self.frees.drain(..) {
            self.limbo.push((v, p));
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

    /// The thread leaves: what is not yet safe to free waits in a global list.
    pub fn exit(&mut self) {
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
    // SAFETY: malloc has no preconditions.
    let p = unsafe { libc::malloc(size) };
    // SAFETY: as the caller promises.
    let th = unsafe { in_tx(tx) };
    if !p.is_null()
        && let Some(th) = th
    {
        th.mem.allocs.push(p as usize);
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
        th.mem.allocs.push(p as usize);
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
    // Take the block's locks, one write of nothing (mask 0) per lock: transactions reading
    // it now conflict, as TinySTM's do. A large block is left to the epochs alone (no
    // transaction can see its memory reused anyway): thousands of locks would only bloat
    // the write set.
    if size <= LOCK_FREED_UP_TO {
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
    th.mem.frees.push(addr as usize);
}
