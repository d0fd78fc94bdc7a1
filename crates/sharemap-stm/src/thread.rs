//! Transactional threads: each has a `Thread` (its transaction context, the environment to
//! jump back to, statistics, its STMap and allocation state), reached through one
//! thread-local pointer, and a `Slot` in a global table that others may read (statistics,
//! the CPU STMap wants it on, the start of its running transaction for memory reclamation).
//!
//! A slot is the thread's STMap id and, plus one, its owner id in lock words. A pthread that
//! exits the STM and initialises again gets its old slot back, so its statistics and its row
//! of the sharing matrix continue.

use crate::core::Tx;
use crate::{mem, stmap};
#[cfg(not(target_arch = "x86_64"))]
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Threads that may be registered at once.
pub const MAX_THREADS: usize = 4096;
/// Keys of `stm_create_specific`.
pub const MAX_SPECIFIC: usize = 16;
/// Abort counters by TinySTM's detailed reason (bits 8..12 of the code).
pub const REASONS: usize = 16;

/// glibc's `sigjmp_buf` is 200 bytes on x86-64; this holds it with room to spare.
#[repr(C, align(16))]
pub struct SigJmpBuf(pub [u64; 40]);

/// What other threads may read of a thread.
#[repr(align(128))]
pub struct Slot {
    pub used: AtomicBool,
    /// The OS thread id of the last thread that held it (0: never used).
    pub os_tid: AtomicI32,
    pub commits: AtomicU64,
    pub aborts: AtomicU64,
    pub aborts_by: [AtomicU64; REASONS],
    pub max_retries: AtomicU64,
    /// The fewest aborts before a commit (u64::MAX before the first).
    pub min_retries: AtomicU64,
    /// STMap's samples of this thread's accesses (its share of the work).
    pub samples: AtomicU64,
    /// The clock when its running transaction began, u64::MAX outside transactions.
    pub active_since: AtomicU64,
    /// The OS CPU STMap wants it on (-1: none), and a counter bumped at each new wish.
    pub cpu: AtomicI32,
    pub cpu_epoch: AtomicU32,
    /// The OS NUMA node of that CPU (-1: none): the node its samples count for.
    pub node: AtomicI32,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            used: AtomicBool::new(false),
            os_tid: AtomicI32::new(0),
            commits: AtomicU64::new(0),
            aborts: AtomicU64::new(0),
            aborts_by: [const { AtomicU64::new(0) }; REASONS],
            max_retries: AtomicU64::new(0),
            min_retries: AtomicU64::new(u64::MAX),
            samples: AtomicU64::new(0),
            active_since: AtomicU64::new(u64::MAX),
            cpu: AtomicI32::new(-1),
            cpu_epoch: AtomicU32::new(0),
            node: AtomicI32::new(-1),
        }
    }
}

pub static SLOTS: [Slot; MAX_THREADS] = [const { Slot::new() }; MAX_THREADS];
/// One past the highest slot ever claimed: scans stop there.
static SLOTS_USED: AtomicUsize = AtomicUsize::new(0);
/// The threads registered now.
static REGISTERED: AtomicUsize = AtomicUsize::new(0);

/// Adds one to a counter only its owner writes (no atomic read-modify-write needed).
#[inline]
pub fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Status {
    Idle,
    Active,
    Committed,
    Aborted,
}

/// One transactional thread (TinySTM's `struct stm_tx`; opaque to C). Aligned so that no
/// two threads' states share a cache line.
#[repr(align(128))]
pub struct Thread {
    pub env: SigJmpBuf,
    pub tx: Tx,
    pub slot: usize,
    /// `SLOTS[slot]`, kept at hand (the start and commit paths reach it several times).
    pub slot_ref: &'static Slot,
    pub nesting: u32,
    pub status: Status,
    /// The attributes of the running transaction (`stm_tx_attr_t` as an int).
    pub attr: i32,
    /// Aborts of the running transaction so far.
    pub retries: u64,
    /// Set by `stm_set_irrevocable`: the next attempt starts irrevocable (serial if 2).
    pub irrevocable_next: u8,
    pub specific: [*mut c_void; MAX_SPECIFIC],
    /// Transactional accesses left before the next one that needs more than the
    /// transaction's own work (`capi::on_access`): STMap's next sample or, in a traced
    /// build, every access. 0 outside transactions, so that one test on the entry points'
    /// fast path covers both; the count waits in `countdown_outside` meanwhile.
    pub countdown: u32,
    pub countdown_outside: u32,
    /// STMap: accesses left until its next sample, and its sampling interval (u32::MAX off).
    pub sample_countdown: u32,
    pub sample_interval: u32,
    /// Samples of the batch being gathered.
    pub pending_samples: [usize; stmap::PENDING],
    pub pending_count: usize,
    /// The batch before, applied when this one is full.
    pub ready_samples: [usize; stmap::PENDING],
    pub ready_count: usize,
    /// Samples not yet added to STMap's global counts.
    pub unpublished_samples: u32,
    /// The `cpu_epoch` of its slot this thread last acted on.
    pub cpu_epoch_seen: u32,
    pub mem: mem::ThreadMem,
    /// mod_ab: when the running transaction first started (ns), if sampled.
    pub ab_start: Option<u64>,
    /// mod_ab: first attempts left until the next timed one (0: not counting yet).
    pub ab_left: u32,
}

impl Thread {
    /// Enters the outermost transaction (or its next attempt).
    #[inline]
    pub fn enter(&mut self) {
        if self.nesting == 0 {
            self.countdown = self.countdown_outside;
        }
        self.nesting = 1;
    }

    /// Leaves the outermost transaction: committed, or aborted without retry.
    #[inline]
    pub fn leave(&mut self) {
        if self.nesting != 0 {
            self.countdown_outside = self.countdown;
        }
        self.countdown = 0;
        self.nesting = 0;
    }

    #[inline]
    pub fn slot(&self) -> &'static Slot {
        self.slot_ref
    }
}

// The calling thread's `Thread` pointer, read on every access. On x86-64 it is a TLS word of
// the initial-exec model: in a program, one load at a fixed offset from %fs. `thread_local!`
// compiles to the general-dynamic model in a static library, which the linker turns into a
// load of the thread pointer, then the load of the word (and a frame around it): measured,
// the one-load form made TinySTM's linked list and skip list 7-10 % faster.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 3",
    ".globl sharemap_stm_current_thread",
    ".hidden sharemap_stm_current_thread",
    ".type sharemap_stm_current_thread, @object",
    ".size sharemap_stm_current_thread, 8",
    "sharemap_stm_current_thread:",
    ".zero 8",
    ".popsection",
);

/// The calling thread's `Thread`, or null before `stm_init_thread`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn current() -> *mut Thread {
    let p: *mut Thread;
    // SAFETY: reads the calling thread's own TLS word, defined above.
    unsafe {
        std::arch::asm!(
            "mov {p}, qword ptr [rip + sharemap_stm_current_thread@GOTTPOFF]",
            "mov {p}, qword ptr fs:[{p}]",
            p = out(reg) p,
            options(nostack, preserves_flags, readonly, pure),
        );
    }
    p
}

#[cfg(target_arch = "x86_64")]
fn set_current(ptr: *mut Thread) {
    // SAFETY: writes the calling thread's own TLS word, defined above. Not `pure`: no read
    // of it moves across this write.
    unsafe {
        std::arch::asm!(
            "mov {t}, qword ptr [rip + sharemap_stm_current_thread@GOTTPOFF]",
            "mov qword ptr fs:[{t}], {p}",
            t = out(reg) _,
            p = in(reg) ptr,
            options(nostack, preserves_flags),
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
thread_local! {
    static CURRENT: Cell<*mut Thread> = const { Cell::new(null_mut()) };
}

/// The calling thread's `Thread`, or null before `stm_init_thread`.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn current() -> *mut Thread {
    CURRENT.with(|c| c.get())
}

#[cfg(not(target_arch = "x86_64"))]
fn set_current(ptr: *mut Thread) {
    CURRENT.with(|c| c.set(ptr));
}

thread_local! {
    /// Ends the thread's registration when it exits without `stm_exit_thread`.
    static EXIT_GUARD: ExitGuard = const { ExitGuard };
}

struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        exit_thread();
    }
}

/// The calling thread's state, registered if it was not: the one way every entry point
/// reaches it.
#[inline]
pub fn me() -> &'static mut Thread {
    let mut p = current();
    if p.is_null() {
        p = init_thread();
    }
    // SAFETY: the pointer is the calling thread's own, live until it exits the STM; no
    // other reference to it is held across calls.
    unsafe { &mut *p }
}

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// A slot for the calling thread: its own from before, else a fresh one, else any free one.
fn claim_slot() -> usize {
    let tid = gettid();
    let claim = |i: usize| SLOTS[i].used.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).is_ok();
    for pass in 0..3 {
        for (i, s) in SLOTS.iter().enumerate() {
            let owner = s.os_tid.load(Ordering::Relaxed);
            let fits = match pass {
                0 => owner == tid,
                1 => owner == 0,
                _ => true,
            };
            if fits && !s.used.load(Ordering::Relaxed) && claim(i) {
                s.os_tid.store(tid, Ordering::Relaxed);
                SLOTS_USED.fetch_max(i + 1, Ordering::AcqRel);
                REGISTERED.fetch_add(1, Ordering::SeqCst);
                // Pairs with the fence in `alone`: either that thread sees this one, or this
                // one's first transaction reads a clock past that thread's commit.
                std::sync::atomic::fence(Ordering::SeqCst);
                return i;
            }
        }
    }
    eprintln!("sharemap-stm: more than {MAX_THREADS} threads at once: cannot register another");
    std::process::abort();
}

/// Registers the calling thread (idempotent): its `Thread`.
#[cold]
#[inline(never)]
pub fn init_thread() -> *mut Thread {
    let now = current();
    if !now.is_null() {
        return now;
    }
    crate::capi::ensure_init();
    let slot = claim_slot();
    let th = Box::new(Thread {
        env: SigJmpBuf([0; 40]),
        tx: Tx::new(slot + 1),
        slot,
        slot_ref: &SLOTS[slot],
        nesting: 0,
        status: Status::Idle,
        attr: 0,
        retries: 0,
        irrevocable_next: 0,
        specific: [null_mut(); MAX_SPECIFIC],
        countdown: 0,
        countdown_outside: if crate::hooks::traced() { 1 } else { stmap::countdown(stmap::sample_interval()) },
        sample_countdown: stmap::countdown(stmap::sample_interval()),
        sample_interval: stmap::sample_interval(),
        pending_samples: [0; stmap::PENDING],
        pending_count: 0,
        ready_samples: [0; stmap::PENDING],
        ready_count: 0,
        unpublished_samples: 0,
        cpu_epoch_seen: 0,
        mem: mem::ThreadMem::default(),
        ab_start: None,
        ab_left: 0,
    });
    let ptr = Box::into_raw(th);
    set_current(ptr);
    // Touching the guard registers its destructor for this thread.
    EXIT_GUARD.with(|_| {});
    crate::capi::on_thread_init();
    ptr
}

/// Unregisters the calling thread, if registered.
pub fn exit_thread() {
    let ptr = current();
    if ptr.is_null() {
        return;
    }
    crate::capi::on_thread_exit();
    // SAFETY: the pointer came from Box::into_raw in init_thread and is cleared below, so
    // it is freed once.
    let mut th = unsafe { Box::from_raw(ptr) };
    stmap::flush_samples(&mut th);
    stmap::publish(&mut th);
    if th.nesting > 0 {
        th.tx.rollback();
    }
    th.mem.exit();
    let slot = th.slot();
    slot.active_since.store(u64::MAX, Ordering::Release);
    set_current(null_mut());
    slot.used.store(false, Ordering::Release);
    REGISTERED.fetch_sub(1, Ordering::SeqCst);
}

/// Whether the calling thread, registered and just past a commit, is the only registered
/// thread: then no transaction but its own can reach what that commit freed, neither one
/// running now nor one to come (a thread that registers later starts after the commit).
#[inline]
pub fn alone() -> bool {
    std::sync::atomic::fence(Ordering::SeqCst);
    REGISTERED.load(Ordering::SeqCst) == 1
}

/// One past the highest slot ever used: the threads STMap knows of.
pub fn slots_in_use() -> usize {
    SLOTS_USED.load(Ordering::Acquire)
}

/// The slots ever used.
pub fn used_slots() -> &'static [Slot] {
    &SLOTS[..slots_in_use()]
}
