//! The C API of TinySTM 1.0.5 (`stm.h`): programs written for it build and run against
//! `libsharemap_stm` unchanged.
//!
//! A transaction starts with `stm_start`, which returns the environment the client saves
//! with `sigsetjmp`; on abort the library rolls back, begins the next attempt itself and
//! jumps back there with `siglongjmp(env, reason | STM_PATH_INSTRUMENTED)` (with `no_retry`
//! it returns instead and the call reports failure). Nesting is flat. The functions that
//! may jump keep no value with a destructor alive across the jump.

use crate::core::{self, Abort, Word};
use crate::thread::{self, SigJmpBuf, Status, Thread, bump};
use crate::{hooks, mem, stats, stmap};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, Once, OnceLock};

pub const PATH_INSTRUMENTED: c_int = 0x01;
pub const PATH_UNINSTRUMENTED: c_int = 0x02;
pub const ABORT_EXPLICIT: c_int = 1 << 5;
pub const ABORT_NO_RETRY: c_int = (1 << 5) | (1 << 8);
pub const ABORT_IRREVOCABLE: c_int = (1 << 6) | (9 << 8);
pub const ABORT_OTHER: c_int = (1 << 6) | (0xF << 8);
const LOCKED_READ: c_int = (1 << 6) | (3 << 8);
const LOCKED_WRITE: c_int = (1 << 6) | (4 << 8);
const VALIDATE_READ: c_int = (1 << 6) | (5 << 8);

/// Bits of `stm_tx_attr_t` (id:16, read_only, visible_reads, no_retry, no_extend).
const ATTR_READ_ONLY: i32 = 1 << 16;
const ATTR_NO_RETRY: i32 = 1 << 18;
const ATTR_NO_EXTEND: i32 = 1 << 19;

unsafe extern "C" {
    fn siglongjmp(env: *mut SigJmpBuf, val: c_int) -> !;
}

static INIT: Once = Once::new();

/// Reads the configuration and sets STMap up, once (`stm_init`, or the first thread).
pub fn ensure_init() {
    INIT.call_once(stmap::init);
}

// ---------------------------------------------------------------------------------------
// Callbacks (stm_register): up to 16 sets, registered before the threads that use them.

type Callback = Option<extern "C" fn(*mut c_void)>;

#[derive(Clone, Copy)]
struct Callbacks {
    init: Callback,
    exit: Callback,
    start: Callback,
    precommit: Callback,
    commit: Callback,
    abort: Callback,
    arg: *mut c_void,
}

// SAFETY: the argument is the client's, handed back to its callbacks on any thread, as
// TinySTM does.
unsafe impl Send for Callbacks {}
// SAFETY: as above; the set is never changed once registered.
unsafe impl Sync for Callbacks {}

const MAX_CALLBACKS: usize = 16;
static CALLBACKS: [OnceLock<Callbacks>; MAX_CALLBACKS] = [const { OnceLock::new() }; MAX_CALLBACKS];
/// How many are registered: the hot path reads this alone.
static NB_CALLBACKS: AtomicUsize = AtomicUsize::new(0);
static REGISTERING: Mutex<()> = Mutex::new(());

#[inline]
fn each_callback(pick: impl Fn(&Callbacks) -> Callback) {
    let n = NB_CALLBACKS.load(Ordering::Acquire);
    for c in CALLBACKS[..n].iter().filter_map(OnceLock::get) {
        if let Some(f) = pick(c) {
            f(c.arg);
        }
    }
}

pub fn on_thread_init() {
    each_callback(|c| c.init);
}

pub fn on_thread_exit() {
    each_callback(|c| c.exit);
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_register(
    init: Callback,
    exit: Callback,
    start: Callback,
    precommit: Callback,
    commit: Callback,
    abort: Callback,
    arg: *mut c_void,
) -> c_int {
    let Ok(_guard) = REGISTERING.lock() else { return 0 };
    let n = NB_CALLBACKS.load(Ordering::Relaxed);
    if n >= MAX_CALLBACKS || CALLBACKS[n].set(Callbacks { init, exit, start, precommit, commit, abort, arg }).is_err() {
        return 0;
    }
    NB_CALLBACKS.store(n + 1, Ordering::Release);
    enable_extras(EXTRA_EVENTS);
    // A thread already registered gets its init callback now, as it would have.
    if let Some(f) = init
        && !thread::current().is_null()
    {
        f(arg);
    }
    1
}

// ---------------------------------------------------------------------------------------
// Threads.

#[unsafe(no_mangle)]
pub extern "C" fn stm_init() {
    ensure_init();
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_exit() {
    stmap::finish();
    mem::reclaim_all_global();
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_init_thread() -> *mut Thread {
    thread::init_thread()
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_exit_thread() {
    thread::exit_thread();
}

/// Ends the registration of the calling thread, whose descriptor `tx` is (TinySTM frees
/// the descriptor given; here each thread's is its own: another thread's is left alone).
///
/// # Safety
/// None: `tx` is only compared.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_exit_thread_tx(tx: *mut Thread) {
    if tx.is_null() || tx == thread::current() {
        thread::exit_thread();
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_current_tx() -> *mut Thread {
    thread::current()
}

use thread::me;

/// The thread a `_tx` function acts on: the descriptor given, or the calling thread's
/// when it is null.
///
/// # Safety
/// `tx` is null or a live descriptor (`stm_init_thread`, `stm_current_tx`) that no other
/// thread uses meanwhile.
#[inline]
pub(crate) unsafe fn given(tx: *mut Thread) -> &'static mut Thread {
    // SAFETY: as the caller promises.
    match unsafe { tx.as_mut() } {
        Some(th) => th,
        None => me(),
    }
}

// ---------------------------------------------------------------------------------------
// Transactions.

/// What runs besides the transaction itself at its start and end: mod_ab's timing of one
/// transaction in N (`EXTRA_AB`), and a tracer's events or callbacks registered with
/// `stm_register` (`EXTRA_EVENTS`). One test on the common path when there is none.
static EXTRAS: AtomicU8 = AtomicU8::new(0);
pub const EXTRA_AB: u8 = 1;
pub const EXTRA_EVENTS: u8 = 2;

/// `what` runs at each start and end from now on (set before the threads that use it run,
/// as TinySTM's modules are).
pub fn enable_extras(what: u8) {
    EXTRAS.fetch_or(what, Ordering::AcqRel);
}

#[inline]
fn extras() -> u8 {
    EXTRAS.load(Ordering::Relaxed)
}

/// Begins an attempt of the outermost transaction (one copy, for the start and the
/// retries).
#[inline(never)]
fn begin_attempt(th: &mut Thread) {
    if th.irrevocable_next != 0 {
        return begin_irrevocable(th);
    }
    th.tx.begin();
    mem::publish_start(th);
    // The start is published before the serial flag is read (a store, then a load: a
    // serial transaction fences every thread between the two, `quiesce`; here the compiler
    // must not swap them).
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
    if core::serial_running() {
        return begin_after_serial(th);
    }
    begun(th);
}

/// The rest of a start, once the snapshot is taken and published.
#[inline(always)]
fn begun(th: &mut Thread) {
    th.tx.can_extend = th.attr & ATTR_NO_EXTEND == 0;
    th.enter();
    th.status = Status::Active;
    stmap::on_start(th);
    run_extras(th, stats::on_start, on_start_events);
}

/// What only some programs ask for, behind one test on the common path: mod_ab's timing
/// (`ab`), and the tracer's events with the callbacks (`events`).
#[inline(always)]
fn run_extras(th: &mut Thread, ab: fn(&mut Thread), events: fn(&mut Thread)) {
    let extras = extras();
    if extras != 0 {
        if extras & EXTRA_AB != 0 {
            ab(th);
        }
        if extras & EXTRA_EVENTS != 0 {
            events(th);
        }
    }
}

#[cold]
#[inline(never)]
fn on_start_events(th: &mut Thread) {
    hooks::event(hooks::TX_BEGIN, (th.attr & 0xFFFF) as u16);
    each_callback(|c| c.start);
}

/// A serial transaction runs: wait until it ends, unpublished, then start.
#[cold]
#[inline(never)]
fn begin_after_serial(th: &mut Thread) {
    mem::publish_end(th);
    core::wait_serial();
    begin_attempt(th);
}

/// An attempt that starts irrevocable. Irrevocability is taken before the start is
/// published: a serial transaction waits for every published one to end, so waiting for
/// it while published would deadlock.
#[cold]
#[inline(never)]
fn begin_irrevocable(th: &mut Thread) {
    let serial = std::mem::take(&mut th.irrevocable_next) == 2;
    th.tx.read_only = false; // it may write
    th.tx.begin();
    th.tx.become_irrevocable(serial);
    mem::publish_start(th);
    if serial {
        quiesce(th);
    }
    // Another serial transaction cannot run: this one holds irrevocability.
    begun(th);
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_start(attr: i32) -> *mut SigJmpBuf {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_start_tx(null_mut(), attr) }
}

/// # Safety
/// `tx` is null (the calling thread's) or a live descriptor from `stm_init_thread` or
/// `stm_current_tx`, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_start_tx(tx: *mut Thread, attr: i32) -> *mut SigJmpBuf {
    // SAFETY: as the caller promises.
    let th = unsafe { given(tx) };
    if th.nesting > 0 {
        th.nesting += 1;
        return null_mut();
    }
    th.attr = attr;
    th.retries = 0;
    // A transaction marked read-only runs its first attempt so; its retries may log their
    // reads to extend their snapshot (`Tx::retry`).
    th.tx.first_attempt(attr & ATTR_READ_ONLY != 0);
    begin_attempt(th);
    &mut th.env
}

/// Rolls the transaction back for `reason`; unless it may not retry, begins the next
/// attempt and jumps back to the client's sigsetjmp. Returns only without retry.
#[cold]
#[inline(never)]
pub(crate) fn abort_with(th: &mut Thread, reason: c_int) {
    th.tx.rollback();
    th.mem.on_abort();
    mem::publish_end(th);
    let slot = th.slot();
    bump(&slot.aborts);
    bump(&slot.aborts_by[((reason >> 8) & 0xF) as usize]);
    th.retries += 1;
    th.tx.retry(th.attr & ATTR_READ_ONLY != 0 && (reason == LOCKED_READ || reason == VALIDATE_READ));
    hooks::event(hooks::TX_ABORT, (th.attr & 0xFFFF) as u16);
    th.status = Status::Aborted;
    each_callback(|c| c.abort);
    if th.attr & ATTR_NO_RETRY != 0 || reason & ABORT_NO_RETRY == ABORT_NO_RETRY {
        th.leave();
        return;
    }
    if th.irrevocable_next == 0 {
        // A writer gave way to an irrevocable transaction: wait for it rather than abort
        // again at the next commit.
        core::wait_irrevocable();
    }
    // A lock held by another writer: give it time to finish. A snapshot that no longer
    // holds: the writer has committed already, so retry at once (TinySTM's suicide does).
    if reason == LOCKED_READ || reason == LOCKED_WRITE {
        core::backoff(th.retries.min(32) as u32);
    } else if th.retries >= 8 {
        std::thread::yield_now();
    }
    begin_attempt(th);
    // A serial transaction runs alone: the client may take its uninstrumented path.
    let path = if th.tx.is_serial() { PATH_UNINSTRUMENTED } else { PATH_INSTRUMENTED };
    let env: *mut SigJmpBuf = &mut th.env;
    // SAFETY: env was filled by the client's sigsetjmp after stm_start, in a frame that is
    // still live (the transaction runs inside it); no destructor is pending here.
    unsafe { siglongjmp(env, reason | path) }
}

pub(crate) fn abort_reason(a: Abort) -> c_int {
    a.code()
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_commit() -> c_int {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_commit_tx(null_mut()) }
}

/// # Safety
/// `tx` is null (the calling thread's) or a live descriptor from `stm_init_thread` or
/// `stm_current_tx`, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_commit_tx(tx: *mut Thread) -> c_int {
    // SAFETY: as the caller promises.
    let th = unsafe { given(tx) };
    if th.nesting > 1 {
        th.nesting -= 1;
        return 1;
    }
    if th.nesting == 0 {
        return 0;
    }
    if extras() & EXTRA_EVENTS != 0 {
        each_callback(|c| c.precommit);
    }
    match th.tx.commit() {
        Ok(version) => {
            // Ended first: the frees' scan of running transactions must not find this one.
            mem::publish_end(th);
            th.mem.on_commit(version);
            let slot = th.slot();
            bump(&slot.commits);
            if th.retries != 0 || slot.min_retries.load(Ordering::Relaxed) != 0 {
                count_retries(slot, th.retries);
            }
            th.leave();
            th.status = Status::Committed;
            run_extras(th, stats::on_commit, on_commit_events);
            1
        }
        Err(a) => {
            abort_with(th, abort_reason(a));
            0
        }
    }
}

/// The fewest and most aborts before a commit.
#[inline(never)]
fn count_retries(slot: &thread::Slot, retries: u64) {
    if retries > slot.max_retries.load(Ordering::Relaxed) {
        slot.max_retries.store(retries, Ordering::Relaxed);
    }
    if retries < slot.min_retries.load(Ordering::Relaxed) {
        slot.min_retries.store(retries, Ordering::Relaxed);
    }
}

#[cold]
#[inline(never)]
fn on_commit_events(th: &mut Thread) {
    hooks::event(hooks::TX_COMMIT, (th.attr & 0xFFFF) as u16);
    each_callback(|c| c.commit);
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_abort(reason: c_int) {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_abort_tx(null_mut(), reason) }
}

/// # Safety
/// `tx` is null (the calling thread's) or a live descriptor from `stm_init_thread` or
/// `stm_current_tx`, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_abort_tx(tx: *mut Thread, reason: c_int) {
    // SAFETY: as the caller promises.
    let th = unsafe { given(tx) };
    if th.nesting == 0 {
        return;
    }
    abort_with(th, reason | ABORT_EXPLICIT);
}

/// The descriptor a status query reads: the one given, or the calling thread's (none if
/// it never registered: no transaction).
///
/// # Safety
/// As `given`.
unsafe fn queried(tx: *mut Thread) -> Option<&'static Thread> {
    let p = if tx.is_null() { thread::current() } else { tx };
    // SAFETY: as the caller promises; the calling thread's own state otherwise.
    unsafe { p.as_ref() }
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_active() -> c_int {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_active_tx(null_mut()) }
}

/// # Safety
/// As `stm_start_tx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_active_tx(tx: *mut Thread) -> c_int {
    // SAFETY: as the caller promises.
    unsafe { queried(tx) }.is_some_and(|th| th.status == Status::Active) as c_int
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_aborted() -> c_int {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_aborted_tx(null_mut()) }
}

/// # Safety
/// As `stm_start_tx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_aborted_tx(tx: *mut Thread) -> c_int {
    // SAFETY: as the caller promises.
    unsafe { queried(tx) }.is_some_and(|th| th.status == Status::Aborted) as c_int
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_irrevocable() -> c_int {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_irrevocable_tx(null_mut()) }
}

/// # Safety
/// As `stm_start_tx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_irrevocable_tx(tx: *mut Thread) -> c_int {
    // SAFETY: as the caller promises.
    unsafe { queried(tx) }.is_some_and(|th| th.nesting > 0 && th.tx.is_irrevocable()) as c_int
}

/// Transactions are never killed by others here (the contention manager is suicide).
#[unsafe(no_mangle)]
pub extern "C" fn stm_killed() -> c_int {
    0
}

/// As `stm_killed`.
///
/// # Safety
/// None: `tx` is not read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_killed_tx(_tx: *mut Thread) -> c_int {
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_get_env() -> *mut SigJmpBuf {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_get_env_tx(null_mut()) }
}

/// # Safety
/// `tx` is null (the calling thread's) or a live descriptor from `stm_init_thread` or
/// `stm_current_tx`, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_get_env_tx(tx: *mut Thread) -> *mut SigJmpBuf {
    // SAFETY: as the caller promises.
    let th = unsafe { given(tx) };
    if th.nesting > 0 { null_mut() } else { &mut th.env }
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_get_attributes() -> i32 {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_get_attributes_tx(null_mut()) }
}

/// # Safety
/// `tx` is null (the calling thread's) or a live descriptor from `stm_init_thread` or
/// `stm_current_tx`, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_get_attributes_tx(tx: *mut Thread) -> i32 {
    // SAFETY: as the caller promises.
    let th = unsafe { given(tx) };
    th.attr
}

/// Waits until every other transaction has ended: the calling one is serial irrevocable,
/// and no other can start meanwhile. The flag was set before; every thread is fenced so that
/// each start published before it is seen here, and each one after it sees the flag.
fn quiesce(th: &Thread) {
    mem::fence_all_threads();
    for (i, slot) in thread::used_slots().iter().enumerate() {
        if i == th.slot {
            continue;
        }
        while slot.active_since.load(Ordering::Acquire) != u64::MAX {
            core::backoff_once();
        }
    }
}

/// Enters irrevocable mode (TinySTM's semantics): at once when the transaction has touched
/// nothing yet and no other irrevocable transaction runs, else by aborting and starting
/// again irrevocable (0 is returned only when the transaction may not retry). Serial mode
/// also waits for the other transactions to end and holds back new ones; a serial
/// transaction restarted that way gets `STM_PATH_UNINSTRUMENTED` from sigsetjmp: it runs
/// alone and may access memory directly. Outside a transaction, the thread's next one
/// starts irrevocable, and 0 is returned.
#[unsafe(no_mangle)]
pub extern "C" fn stm_set_irrevocable(serial: c_int) -> c_int {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_set_irrevocable_tx(null_mut(), serial) }
}

/// # Safety
/// `tx` is null (the calling thread's) or a live descriptor from `stm_init_thread` or
/// `stm_current_tx`, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_set_irrevocable_tx(tx: *mut Thread, serial: c_int) -> c_int {
    // SAFETY: as the caller promises.
    let th = unsafe { given(tx) };
    let mode = if serial != 0 { 2 } else { 1 };
    if th.nesting == 0 {
        th.irrevocable_next = mode;
        return 0;
    }
    if th.tx.is_irrevocable() {
        return 1;
    }
    // A read-only attempt logs no reads: it cannot tell that it read nothing, and restarts.
    if th.tx.set_sizes() == (0, 0, 0) && !th.tx.read_only && th.tx.try_become_irrevocable(mode == 2) {
        if mode == 2 {
            quiesce(th);
        }
        return 1;
    }
    th.irrevocable_next = mode;
    abort_with(th, ABORT_IRREVOCABLE);
    0
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_get_clock() -> Word {
    core::clock() as Word
}

/// Advances the global clock by one, as a commit would (TinySTM's, for its regression
/// tests: transactions running meanwhile see newer versions nowhere, and extend).
#[unsafe(no_mangle)]
pub extern "C" fn stm_inc_clock() {
    core::inc_clock();
}

/// # Safety
/// `addr` is a valid aligned word; `timestamp` is null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_unit_load(addr: *const Word, timestamp: *mut Word) -> Word {
    // SAFETY: as the caller promises.
    let (v, ts) = unsafe { core::unit_load(addr as usize) };
    if !timestamp.is_null() {
        // SAFETY: as the caller promises.
        unsafe { *timestamp = ts as Word };
    }
    v
}

/// # Safety
/// As `stm_unit_load`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_unit_store(addr: *mut Word, value: Word, timestamp: *mut Word) -> c_int {
    // SAFETY: as the caller promises.
    unsafe { stm_unit_store2(addr, value, Word::MAX, timestamp) }
}

/// # Safety
/// As `stm_unit_load`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_unit_store2(addr: *mut Word, value: Word, mask: Word, timestamp: *mut Word) -> c_int {
    // SAFETY: as the caller promises.
    let bound = (!timestamp.is_null()).then(|| unsafe { *timestamp } as u64);
    // SAFETY: as the caller promises.
    let (wrote, ts) = unsafe { core::unit_store(addr as usize, value, mask, bound) };
    if !timestamp.is_null() {
        // SAFETY: as the caller promises.
        unsafe { *timestamp = ts as Word };
    }
    wrote as c_int
}

/// # Safety
/// `timestamp` is null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_set_extension(enable: c_int, timestamp: *mut Word) {
    // SAFETY: null is the calling thread's descriptor; the rest as the caller promises.
    unsafe { stm_set_extension_tx(null_mut(), enable, timestamp) }
}

/// # Safety
/// `tx` is null (the calling thread's) or a live descriptor from `stm_init_thread` or
/// `stm_current_tx`, used by one thread at a time; `timestamp` is null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_set_extension_tx(tx: *mut Thread, enable: c_int, timestamp: *mut Word) {
    // SAFETY: as the caller promises.
    let th = unsafe { given(tx) };
    th.tx.can_extend = enable != 0;
    if !timestamp.is_null() {
        // SAFETY: as the caller promises.
        th.tx.bound_end(unsafe { *timestamp } as u64);
    }
}

// ---------------------------------------------------------------------------------------
// Thread-specific data.

static NB_SPECIFIC: AtomicUsize = AtomicUsize::new(0);

#[unsafe(no_mangle)]
pub extern "C" fn stm_create_specific() -> c_int {
    let k = NB_SPECIFIC.fetch_add(1, Ordering::Relaxed);
    if k >= thread::MAX_SPECIFIC {
        NB_SPECIFIC.fetch_sub(1, Ordering::Relaxed);
        return -1;
    }
    k as c_int
}

#[unsafe(no_mangle)]
pub extern "C" fn stm_get_specific(key: c_int) -> *mut c_void {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_get_specific_tx(null_mut(), key) }
}

/// # Safety
/// `tx` is null (the calling thread's) or a live descriptor from `stm_init_thread` or
/// `stm_current_tx`, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_get_specific_tx(tx: *mut Thread, key: c_int) -> *mut c_void {
    // SAFETY: as the caller promises.
    let th = unsafe { given(tx) };
    usize::try_from(key).ok().and_then(|k| th.specific.get(k).copied()).unwrap_or(null_mut())
}

#[unsafe(no_mangle)]
#[allow(clippy::not_unsafe_ptr_arg_deref)] // `data` is only stored, for the caller to read back
pub extern "C" fn stm_set_specific(key: c_int, data: *mut c_void) {
    // SAFETY: null is the calling thread's descriptor.
    unsafe { stm_set_specific_tx(null_mut(), key, data) }
}

/// # Safety
/// `tx` is null (the calling thread's) or a live descriptor from `stm_init_thread` or
/// `stm_current_tx`, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_set_specific_tx(tx: *mut Thread, key: c_int, data: *mut c_void) {
    // SAFETY: as the caller promises.
    let th = unsafe { given(tx) };
    if let Some(s) = usize::try_from(key).ok().and_then(|k| th.specific.get_mut(k)) {
        *s = data;
    }
}

// ---------------------------------------------------------------------------------------
// Parameters and statistics.

const COMPILE_FLAGS: &CStr = c"sharemap-stm: DESIGN=WRITE_BACK_ETL CM=CM_SUICIDE(+backoff) LOCK_ARRAY_LOG_SIZE=20 LOCK_SHIFT_EXTRA=2 IRREVOCABLE_ENABLED EPOCH_GC STMAP";

/// # Safety
/// `name` is a NUL-terminated string; `val` points to storage of the parameter's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_get_parameter(name: *const c_char, val: *mut c_void) -> c_int {
    if name.is_null() || val.is_null() {
        return 0;
    }
    // SAFETY: as the caller promises.
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    let text: Option<&'static CStr> = match name {
        b"compile_flags" => Some(COMPILE_FLAGS),
        b"design" => Some(c"WRITE-BACK (ETL)"),
        b"contention_manager" => Some(c"SUICIDE"),
        _ => None,
    };
    if let Some(t) = text {
        // SAFETY: as the caller promises: a `const char *` to fill.
        unsafe { *(val as *mut *const c_char) = t.as_ptr() };
        return 1;
    }
    let number: Option<c_int> = match name {
        b"initial_rw_set_size" => Some(1024),
        b"stmap_si" => Some(stmap::config().si as c_int),
        b"stmap_mi" => Some(stmap::config().mi.min(c_int::MAX as u64) as c_int),
        _ => None,
    };
    match number {
        Some(n) => {
            // SAFETY: as the caller promises: an int to fill.
            unsafe { *(val as *mut c_int) = n };
            1
        }
        None => 0,
    }
}

/// No parameter can be changed while running (TinySTM's contention-manager callbacks do
/// not apply to this design): always 0.
#[unsafe(no_mangle)]
pub extern "C" fn stm_set_parameter(_name: *const c_char, _val: *mut c_void) -> c_int {
    0
}

/// # Safety
/// `name` is a NUL-terminated string; `val` points to storage of the statistic's type
/// (unsigned int for set sizes, int for read_only and the STMap flags, unsigned long for
/// counters).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_get_stats(name: *const c_char, val: *mut c_void) -> c_int {
    // SAFETY: null is the calling thread's descriptor; the rest as the caller promises.
    unsafe { stm_get_stats_tx(null_mut(), name, val) }
}

/// # Safety
/// `tx` is null (the calling thread's) or a live descriptor from `stm_init_thread` or
/// `stm_current_tx`, used by one thread at a time; `name` is a NUL-terminated string; `val` points to storage of the statistic's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_get_stats_tx(tx: *mut Thread, name: *const c_char, val: *mut c_void) -> c_int {
    if name.is_null() || val.is_null() {
        return 0;
    }
    // SAFETY: as the caller promises.
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    // SAFETY: as the caller promises.
    let th = unsafe { given(tx) };
    match stats::thread_stat(th, name) {
        Some(stats::Value::UInt(v)) => {
            // SAFETY: as the caller promises.
            unsafe { *(val as *mut u32) = v };
            1
        }
        Some(stats::Value::Int(v)) => {
            // SAFETY: as the caller promises.
            unsafe { *(val as *mut c_int) = v };
            1
        }
        Some(stats::Value::ULong(v)) => {
            // SAFETY: as the caller promises.
            unsafe { *(val as *mut u64) = v };
            1
        }
        None => 0,
    }
}
