//! The switch of burst-sampled builds (`sharemap cc --burst`, crates/sharemap-burst): the
//! pass's code calls it when a thread's countdown runs out, and jumps to the copy it names.
//!
//! The countdown is one thread-local word the pass defines in the program: positive, plain
//! code runs and counts down; negative, the instrumented copy runs and counts up. Either
//! copy calls here when its count reaches 0, or when it finds the other mode set (a callee
//! changed it).
//!
//! Bursts are windows of time, the same for every thread: in each period of ON + OFF
//! microseconds one window of ON, at a random offset (from a hash of the period's number and
//! the run's seed). The oracle's sharing counts changes of hands, which a sample sees only
//! when the threads that exchange a block are recorded at the same time: bursts of each
//! thread at its own moments (counted in its own back-edges) saw one change per burst where
//! the run had thousands, and correlated 0.01-0.9 with the complete trace on the workloads.
//! A thread reads the clock when its count runs out, and counts about an eighth of a window
//! of its own back-edges to the next reading (measured as it goes), so it enters and leaves a
//! window within that much of its edges.
//!
//! Instrumented code runs slower, so a window holds a smaller share of a thread's work than
//! of the time: each burst's end records the back-edges the thread ran in it and since its
//! previous burst, from which the recorder weighs each thread (`Burst::weights`).
//!
//! A thread's word starts at 0: its first check (a function's entry) calls here. When the
//! recording asked for every access (`record --burst all`) it starts a burst of its own that
//! never ends; when nothing records, the word goes to the largest count and the thread never
//! calls again.

use crate::{access, active, burst_end, event, header};
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use sharemap_shm::BURST_ALL;

/// The trace format's code of `burst-begin` (its `burst-end` is a record of its own).
const BURST_BEGIN: u8 = 11;

/// Set before `main` by a burst-sampled build's constructor.
static BURST_BUILD: AtomicBool = AtomicBool::new(false);
/// The run's seed for the windows' offsets, drawn at the first call.
static SEED: AtomicU64 = AtomicU64::new(0);

/// `sharemap record --burst`: the recording's own setting (`NONE`: the build's).
const NONE: u64 = u64::MAX - 1;
static ON_OVERRIDE: AtomicU64 = AtomicU64::new(NONE);
static OFF_OVERRIDE: AtomicU64 = AtomicU64::new(NONE);
/// The longest burst or gap taken from a setting (µs; the trace format's limit).
const MAX_STRETCH: u64 = 1 << 40;

/// A thread's part in the bursts.
struct BurstThread {
    started: Cell<bool>,
    in_burst: Cell<bool>,
    /// Back-edges its word was last set to count, and the clock then (ns).
    poll: Cell<u64>,
    polled_at: Cell<u64>,
    /// Back-edges run in the current burst, and since the previous one ended.
    edges_in: Cell<u64>,
    edges_before: Cell<u64>,
    /// Picoseconds per back-edge measured in the plain copy and in bursts (0: not yet).
    ps_plain: Cell<u64>,
    ps_burst: Cell<u64>,
}

impl BurstThread {
    /// A thread that has not called yet.
    const fn new() -> BurstThread {
        BurstThread {
            started: Cell::new(false),
            in_burst: Cell::new(false),
            poll: Cell::new(0),
            polled_at: Cell::new(0),
            edges_in: Cell::new(0),
            edges_before: Cell::new(0),
            ps_plain: Cell::new(0),
            ps_burst: Cell::new(0),
        }
    }
}

thread_local! {
    static BURST: BurstThread = const { BurstThread::new() };
}

/// Called by the constructor the pass adds to each module it instruments.
#[unsafe(no_mangle)]
pub extern "C" fn __sharemap_burst_build() {
    BURST_BUILD.store(true, Ordering::Relaxed);
}

/// An access of a wrapped libc function: recorded unless the build is burst-sampled and the
/// thread between bursts.
pub(crate) fn library_access(write: bool, addr: usize, size: usize) {
    if BURST_BUILD.load(Ordering::Relaxed) && !BURST.with(|b| b.in_burst.get()) {
        return;
    }
    access(write, addr, size);
}

/// At attach: the recorder's setting, if it gave one (`BURST_ALL` records every access).
pub(crate) fn set_override(on: Option<u64>, off: Option<u64>) {
    if let Some(on) = on {
        ON_OVERRIDE.store(if on == BURST_ALL { BURST_ALL } else { on.min(MAX_STRETCH) }, Ordering::Relaxed);
        OFF_OVERRIDE.store(off.unwrap_or(1).clamp(1, MAX_STRETCH), Ordering::Relaxed);
    }
}

// Thunks keeping every general register but r11 (rax too, unless it carries the result):
// LLVM's `preserve_most` convention, which the pass gives its calls on x86-64. An ordinary
// call, even on a cold path, leaves the code around it only the callee-saved registers, and
// the optimiser's loops then reload values from the stack at each iteration (a blocked
// matrix product's plain copy ran 1.25 times slower than the plain build, and the burst
// copy spills around each of its access calls). Entered with rsp 8 below a 16-byte
// boundary; an odd number of 8-byte pushes realigns it for the call.
#[cfg(target_arch = "x86_64")]
macro_rules! saving_thunks {
    ($($thunk:literal => $target:path;)*) => {
        $(std::arch::global_asm!(
            concat!(".globl ", $thunk),
            concat!(".type ", $thunk, ",@function"),
            concat!($thunk, ":"),
            "push rax", "push rcx", "push rdx", "push rsi", "push rdi", "push r8", "push r9", "push r10",
            "sub rsp, 8",
            "call {target}",
            "add rsp, 8",
            "pop r10", "pop r9", "pop r8", "pop rdi", "pop rsi", "pop rdx", "pop rcx", "pop rax",
            "ret",
            concat!(".size ", $thunk, ", .-", $thunk),
            target = sym $target,
        );)*
    };
}

#[cfg(target_arch = "x86_64")]
saving_thunks! {
    "__sharemap_burst_read1" => crate::entry::__tsan_read1;
    "__sharemap_burst_read2" => crate::entry::__tsan_read2;
    "__sharemap_burst_read4" => crate::entry::__tsan_read4;
    "__sharemap_burst_read8" => crate::entry::__tsan_read8;
    "__sharemap_burst_read16" => crate::entry::__tsan_read16;
    "__sharemap_burst_write1" => crate::entry::__tsan_write1;
    "__sharemap_burst_write2" => crate::entry::__tsan_write2;
    "__sharemap_burst_write4" => crate::entry::__tsan_write4;
    "__sharemap_burst_write8" => crate::entry::__tsan_write8;
    "__sharemap_burst_write16" => crate::entry::__tsan_write16;
    "__sharemap_burst_read_range" => crate::entry::__tsan_read_range;
    "__sharemap_burst_write_range" => crate::entry::__tsan_write_range;
}

// The switch returns its answer in al: rax is not kept, so seven pushes.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".globl __sharemap_burst_switch_saving",
    ".type __sharemap_burst_switch_saving,@function",
    "__sharemap_burst_switch_saving:",
    "push rcx", "push rdx", "push rsi", "push rdi", "push r8", "push r9", "push r10",
    "call {switch}",
    "pop r10", "pop r9", "pop r8", "pop rdi", "pop rsi", "pop rdx", "pop rcx",
    "ret",
    ".size __sharemap_burst_switch_saving, .-__sharemap_burst_switch_saving",
    switch = sym __sharemap_burst_switch,
);

/// Enters or leaves the window the clock is in, and says which copy runs now (true: the
/// instrumented one). `on` and `off` are the build's microseconds per burst and between
/// bursts, unless the recording set its own; `on` = 0, or a program not being recorded,
/// never bursts.
///
/// # Safety
/// `state` is the calling thread's countdown word, as the pass passes it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __sharemap_burst_switch(state: *mut i64, _from_burst: bool, on: i64, off: i64) -> bool {
    // SAFETY: as the caller promises; only the calling thread touches it.
    let count = unsafe { &mut *state };
    let (on, off) = match ON_OVERRIDE.load(Ordering::Relaxed) {
        NONE => (on.clamp(0, MAX_STRETCH as i64) as u64, off.clamp(1, MAX_STRETCH as i64) as u64),
        o => (o, OFF_OVERRIDE.load(Ordering::Relaxed)),
    };
    BURST.with(|b| {
        let now = now_ns();
        if !b.started.replace(true) {
            if on == 0 || !active() {
                *count = i64::MAX;
                return false;
            }
            if on == BURST_ALL {
                // Every access from here on: a burst that never ends, unmarked.
                *count = i64::MIN + 1;
                b.in_burst.set(true);
                return true;
            }
            if SEED.load(Ordering::Relaxed) == 0 {
                let seed = (now ^ (std::process::id() as u64).rotate_left(40)) | 1;
                let _ = SEED.compare_exchange(0, seed, Ordering::Relaxed, Ordering::Relaxed);
            }
            let h = header();
            if h.burst_on.load(Ordering::Relaxed) == 0 {
                h.burst_on.store(on, Ordering::Relaxed);
                h.burst_off.store(off, Ordering::Relaxed);
            }
            b.polled_at.set(now);
            return decide(b, count, now, on, off);
        }
        // A callee changed the mode: the caller follows it.
        match (*count).signum() {
            -1 => return true,
            1 => return false,
            _ => {}
        }
        let ran = b.poll.get();
        let elapsed = now.saturating_sub(b.polled_at.get()).max(1);
        let ps = (u128::from(elapsed) * 1000 / u128::from(ran.max(1))).min(u64::MAX as u128) as u64;
        if b.in_burst.get() {
            b.edges_in.set(b.edges_in.get() + ran);
            b.ps_burst.set(ps.max(1));
        } else {
            b.edges_before.set(b.edges_before.get() + ran);
            b.ps_plain.set(ps.max(1));
        }
        b.polled_at.set(now);
        decide(b, count, now, on, off)
    })
}

/// Back-edges to the first reading of the clock, and the bounds of the count between two.
const FIRST_POLL: u64 = 64;
const MAX_POLL: u64 = 1 << 24;
/// The fewest back-edges between two readings. In the plain copy enough that the clock's
/// cost (tens of nanoseconds) stays small beside them. In a burst one: a back-edge there
/// may record hundreds of accesses, and with 16 a window of a microsecond lasted 16 of them
/// (the blocked matrix product's outer loops: windows of 1 µs in every 20 recorded 5 times
/// the accesses of windows of 20 in every 100).
const MIN_POLL_PLAIN: u64 = 16;
const MIN_POLL_BURST: u64 = 1;
/// How much slower a burst is taken to run than the plain copy until one is measured (a
/// recorded access costs about a hundred times a plain one).
const BURST_SLOWER: u64 = 128;

/// Back-edges to the next reading of the clock in the copy now due: about `span_ns`, at
/// that copy's last measured rate. The rate of the other copy is no guide: a
/// count set at plain speed would keep a thread in a burst a hundred times too long.
fn poll_length(b: &BurstThread, burst: bool, span_ns: u64) -> u64 {
    let ps = match (burst, b.ps_plain.get(), b.ps_burst.get()) {
        (true, _, ps) if ps > 0 => ps,
        (true, plain, _) if plain > 0 => plain.saturating_mul(BURST_SLOWER),
        (false, plain, _) if plain > 0 => plain,
        _ => return FIRST_POLL,
    };
    let least = if burst { MIN_POLL_BURST } else { MIN_POLL_PLAIN };
    ((u128::from(span_ns) * 1000 / u128::from(ps)) as u64).clamp(least, MAX_POLL)
}

/// Enters or leaves the window as the clock says; sets the word to count the back-edges to
/// the next reading in the copy now due, and names it.
fn decide(b: &BurstThread, count: &mut i64, now: u64, on: u64, off: u64) -> bool {
    let want = in_window(now, on, off);
    if want != b.in_burst.get() {
        b.in_burst.set(want);
        if want {
            event(BURST_BEGIN, b"", 0);
        } else {
            burst_end(b.edges_in.replace(0), b.edges_before.replace(0));
        }
    }
    // In a window, a reading every eighth of it; between windows, halfway to the next one
    // (down to an eighth of a window), so that short windows do not make the plain code read
    // the clock every few hundred nanoseconds: the rate may be off by half and still stop
    // short of the window.
    let eighth = on * 1000 / 8;
    let span = if want { eighth } else { (until_window(now, on, off) / 2).max(eighth) };
    let poll = poll_length(b, want, span);
    b.poll.set(poll);
    *count = if want { -(poll as i64) } else { poll as i64 };
    want
}

/// Where period `k`'s window of `on` µs starts in its period of `on + off` µs (in ns): at an
/// offset the hash of its number picks.
fn window_start(k: u64, on: u64, off: u64) -> u64 {
    let (on, period) = (on * 1000, (on + off) * 1000);
    let mut x = k ^ SEED.load(Ordering::Relaxed);
    // splitmix64's finaliser.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    x % (period - on + 1)
}

/// Whether the clock is in a window.
fn in_window(now: u64, on: u64, off: u64) -> bool {
    let period = (on + off) * 1000;
    (now % period).wrapping_sub(window_start(now / period, on, off)) < on * 1000
}

/// Nanoseconds from `now` to the start of the next window (0 inside one).
fn until_window(now: u64, on: u64, off: u64) -> u64 {
    let period = (on + off) * 1000;
    let (k, at) = (now / period, now % period);
    let start = window_start(k, on, off);
    if at < start {
        start - at
    } else if at - start < on * 1000 {
        0
    } else {
        period - at + window_start(k + 1, on, off)
    }
}

fn now_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_reads_the_clock_after_each_slow_back_edge() {
        let b = BurstThread {
            started: Cell::new(true),
            in_burst: Cell::new(true),
            // 10 ns per back-edge plain, 2 µs in a burst (hundreds of accesses recorded).
            ps_plain: Cell::new(10_000),
            ps_burst: Cell::new(2_000_000),
            ..BurstThread::new()
        };
        // An eighth of a 1 µs window is shorter than one back-edge: read after each.
        assert_eq!(poll_length(&b, true, 125), 1);
        assert_eq!(poll_length(&b, true, 20_000), 10);
        // The plain copy keeps its floor: 125 ns is 12 back-edges, read after 16.
        assert_eq!(poll_length(&b, false, 125), MIN_POLL_PLAIN);
        assert_eq!(poll_length(&b, false, 40_000), 4_000);
    }

    #[test]
    fn the_time_to_the_next_window_lands_on_its_start() {
        for (on, off) in [(2, 18), (20, 80), (1, 1), (5, 1000)] {
            let period = (on + off) * 1000;
            for step in 0..20_000u64 {
                let now = 1_000_000_007 + step * 997;
                let until = until_window(now, on, off);
                assert_eq!(until == 0, in_window(now, on, off), "{on}:{off} at {now}");
                if until > 0 {
                    assert!(in_window(now + until, on, off), "{on}:{off}: {now} + {until} is not in a window");
                    assert!(!in_window(now + until - 1, on, off), "{on}:{off}: a window starts before {now} + {until}");
                    assert!(until < 2 * period, "{on}:{off}: {until} ns is more than two periods");
                }
            }
        }
    }
}
