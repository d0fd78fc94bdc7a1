//! The switch of burst-sampled builds (`sharemap cc --burst`, crates/sharemap-burst): the
//! pass's code calls it when a thread's countdown runs out, and jumps to the copy it names.
//!
//! The countdown is one thread-local word the pass defines in the program: positive, plain
//! code runs and counts down to the next burst; negative, a burst runs and counts up to its
//! end. The plain copy calls when its count reaches 0 or finds a burst running (a callee
//! started it); the burst copy likewise.
//!
//! The gaps between bursts are drawn at random, uniformly from OFF/2 to 3·OFF/2 back-edges
//! (OFF on average), and a thread's first from 1 to OFF: with fixed gaps, a loop whose trip
//! count is close to a multiple of the period would be sampled at the same iterations in
//! every pass, and most of its pages never.

use crate::{THREAD, access, active, event, header};
use core::sync::atomic::{AtomicBool, Ordering};

/// Set before `main` by a burst-sampled build's constructor.
static BURST_BUILD: AtomicBool = AtomicBool::new(false);

/// Called by the constructor the pass adds to each module it instruments.
#[unsafe(no_mangle)]
pub extern "C" fn __sharemap_burst_build() {
    BURST_BUILD.store(true, Ordering::Relaxed);
}

/// An access of a wrapped libc function: recorded unless the build is burst-sampled and the
/// thread between bursts.
pub(crate) fn library_access(write: bool, addr: usize, size: usize) {
    if BURST_BUILD.load(Ordering::Relaxed) && !THREAD.with(|t| t.in_burst.get()) {
        return;
    }
    access(write, addr, size);
}

/// The trace format's codes of `burst-begin` and `burst-end`.
const BURST_BEGIN: u8 = 11;
const BURST_END: u8 = 12;

/// Starts or ends a burst when the count ran out, and says which copy runs now (true: the
/// instrumented one). `on` and `off` are the build's back-edges per burst and between
/// bursts; `on` = 0, or a program not being recorded, never bursts.
///
/// # Safety
/// `state` is the calling thread's countdown word, as the pass passes it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __sharemap_burst_switch(state: *mut i64, from_burst: bool, on: i64, off: i64) -> bool {
    // SAFETY: as the caller promises; only the calling thread touches it.
    let count = unsafe { &mut *state };
    match (*count).signum() {
        -1 => true,
        1 => false,
        _ if from_burst => {
            *count = gap(off, false);
            THREAD.with(|t| t.in_burst.set(false));
            event(BURST_END, b"", 0);
            false
        }
        _ => {
            if on <= 0 || !active() {
                *count = i64::MAX;
                return false;
            }
            if THREAD.with(|t| t.gap_rng.get()) == 0 {
                // The thread's first call (its count starts at 1): a random phase first.
                *count = gap(off, true);
                return false;
            }
            let h = header();
            if h.burst_on.load(Ordering::Relaxed) == 0 {
                h.burst_on.store(on as u64, Ordering::Relaxed);
                h.burst_off.store(off.max(1) as u64, Ordering::Relaxed);
            }
            *count = -on;
            THREAD.with(|t| t.in_burst.set(true));
            event(BURST_BEGIN, b"", 0);
            true
        }
    }
}

/// A gap between bursts, in back-edges: uniform in [OFF/2, 3·OFF/2], or in [1, OFF] for a
/// thread's first (its phase).
fn gap(off: i64, first: bool) -> i64 {
    let off = off.max(1) as u64;
    let r = THREAD.with(|t| {
        let mut x = t.gap_rng.get();
        if x == 0 {
            // Seeded per thread: its state's address and the clock.
            let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: `now` is a valid timespec to fill.
            unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
            x = (t as *const _ as u64) ^ (now.tv_nsec as u64).rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15;
        }
        // xorshift64*: never 0 again once it is not.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        t.gap_rng.set(x.max(1));
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    });
    let g = if first { 1 + r % off } else { off / 2 + r % off.max(1) };
    g.clamp(1, i64::MAX as u64) as i64
}
