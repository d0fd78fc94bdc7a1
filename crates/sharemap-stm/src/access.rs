//! The transactional load/store path: `stm_load`, `stm_store`, `stm_store2` and their
//! `_tx` forms, and what the typed wrappers and `mod_mem` share with them. The common case
//! (inside a transaction, the lock free and inside the snapshot or already ours, room in the
//! sets, no sample due) is inlined into each entry point, and every other case handed,
//! whole, to one function out of line: the common case keeps no stack frame.

use crate::capi::{abort_reason, abort_with, given};
use crate::core::{self, Word};
use crate::thread::{self, Thread, me};
use crate::{hooks, stmap};

/// What every transactional access does besides the access itself: one countdown and a
/// branch, taken for STMap's sample (one access in SI+1) or, when the tracer is linked,
/// for every access.
#[inline(always)]
fn on_access(th: &mut Thread, addr: usize, write: bool) {
    th.countdown -= 1;
    if th.countdown == 0 {
        on_counted_access(th, addr, write);
    }
}

#[cold]
#[inline(never)]
fn on_counted_access(th: &mut Thread, addr: usize, write: bool) {
    if !hooks::traced() {
        th.countdown = stmap::take_sample(th, addr);
        return;
    }
    hooks::access(write, addr);
    th.countdown = 1;
    th.sample_countdown -= 1;
    if th.sample_countdown == 0 {
        th.sample_countdown = stmap::take_sample(th, addr);
    }
}

/// The transactional load behind `stm_load` and the wrappers.
///
/// # Safety
/// `addr` is an aligned word the program may read (the STM reads it, inside a transaction
/// or out).
#[inline(always)]
pub unsafe fn load_word(th: &mut Thread, addr: usize) -> Word {
    if th.nesting == 0 {
        // Outside a transaction: a unit load (consistent, never aborts).
        // SAFETY: the client passes a valid aligned word, as stm_load requires.
        return unsafe { unit_load_outside(addr) };
    }
    on_access(th, addr, false);
    // SAFETY: as above.
    match unsafe { th.tx.load_fast(addr) } {
        Ok(v) => v,
        // SAFETY: as above.
        Err(l) => unsafe { load_slow(th, addr, l) },
    }
}

/// A load off the fast path, given the lock word the fast path saw: under a lock of ours
/// (here, with no stack frame), else locked, newer than the snapshot, or the read set full
/// (`load_other`).
///
/// # Safety
/// As `load_word`.
#[inline(never)]
unsafe extern "C" fn load_slow(th: &mut Thread, addr: usize, lock: usize) -> Word {
    // SAFETY: as the caller promises.
    if let Some(v) = unsafe { th.tx.load_own(lock, addr) } {
        return v;
    }
    // SAFETY: as the caller promises.
    unsafe { load_other(th, addr) }
}

/// A load neither fast nor under a lock of ours. Aborts (jumping back to the client) when
/// it cannot read.
///
/// # Safety
/// As `load_word`.
#[inline(never)]
unsafe extern "C" fn load_other(th: &mut Thread, addr: usize) -> Word {
    // SAFETY: as the caller promises.
    match unsafe { th.tx.load_slow(addr) } {
        Ok(v) => v,
        Err(a) => {
            abort_with(th, abort_reason(a));
            0
        }
    }
}

/// The transactional store behind `stm_store`, `stm_store2` and the wrappers.
///
/// # Safety
/// `addr` is an aligned word the program may read and write (written at commit, or at once
/// outside a transaction).
#[inline(always)]
pub unsafe fn store_word(th: &mut Thread, addr: usize, value: Word, mask: Word) {
    if th.nesting == 0 {
        // SAFETY: the client passes a valid aligned word, as stm_store requires.
        unsafe { unit_store_outside(addr, value, mask) };
        return;
    }
    on_access(th, addr, true);
    // SAFETY: as above.
    if !unsafe { th.tx.store_fast(addr, value, mask) } {
        // SAFETY: as above.
        unsafe { store_slow(th, addr, value, mask) }
    }
}

/// A store off the fast path. Aborts (jumping back) when it cannot write.
///
/// # Safety
/// As `store_word`.
#[inline(never)]
unsafe extern "C" fn store_slow(th: &mut Thread, addr: usize, value: Word, mask: Word) {
    // SAFETY: as the caller promises.
    if let Err(a) = unsafe { th.tx.store_slow(addr, value, mask) } {
        abort_with(th, abort_reason(a));
    }
}

/// A load outside any transaction (off the transactional fast path).
///
/// # Safety
/// As `load_word`.
#[cold]
#[inline(never)]
unsafe fn unit_load_outside(addr: usize) -> Word {
    // SAFETY: as the caller promises.
    unsafe { core::unit_load(addr) }.0
}

/// A store outside any transaction.
///
/// # Safety
/// As `store_word`.
#[cold]
#[inline(never)]
unsafe fn unit_store_outside(addr: usize, value: Word, mask: Word) {
    // SAFETY: as the caller promises.
    unsafe { core::unit_store(addr, value, mask, None) };
}

/// The calling thread's state when it is inside a transaction and its next access needs
/// nothing but the access (no sample, no trace): the entry points' fast path.
#[inline(always)]
fn plain_access() -> Option<&'static mut Thread> {
    let p = thread::current();
    // SAFETY: the calling thread's own state, live while registered.
    let th = unsafe { p.as_mut() }?;
    // Outside transactions the countdown is 0 (`Thread::leave`).
    (th.countdown > 1).then_some(th)
}

// The exported accesses try the common case inline and hand every other case, whole, to a
// function out of line: the fast path then calls nothing, saves no register and keeps no
// stack frame (measured: 37 instructions per load against 75 before). They are `extern "C"`
// so that they cannot unwind: the call is then a tail call, with no landing pad around it.

/// # Safety
/// `addr` is an aligned word the program may read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_load(addr: *const Word) -> Word {
    // SAFETY: as the caller promises.
    unsafe { load_entry(addr as usize) }
}

/// The exported loads' body (`stm_load` and the typed wrappers): the common case inline,
/// the rest out of line.
///
/// # Safety
/// As `stm_load`.
#[inline(always)]
pub unsafe fn load_entry(addr: usize) -> Word {
    if let Some(th) = plain_access() {
        th.countdown -= 1;
        // SAFETY: as the caller promises.
        return match unsafe { th.tx.load_fast(addr) } {
            Ok(v) => v,
            // SAFETY: as the caller promises.
            Err(l) => unsafe { load_slow(th, addr, l) },
        };
    }
    // SAFETY: as the caller promises.
    unsafe { load_any(addr) }
}

/// # Safety
/// As `stm_load`.
#[inline(never)]
unsafe extern "C" fn load_any(addr: usize) -> Word {
    // SAFETY: as the caller promises.
    unsafe { load_word(me(), addr) }
}

/// # Safety
/// As `stm_start_tx` and `stm_load`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_load_tx(tx: *mut Thread, addr: *const Word) -> Word {
    // SAFETY: as the caller promises.
    unsafe { load_word(given(tx), addr as usize) }
}

/// # Safety
/// As `stm_start_tx` and `stm_store`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_store_tx(tx: *mut Thread, addr: *mut Word, value: Word) {
    // SAFETY: as the caller promises.
    unsafe { store_word(given(tx), addr as usize, value, Word::MAX) }
}

/// # Safety
/// As `stm_start_tx` and `stm_store`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_store2_tx(tx: *mut Thread, addr: *mut Word, value: Word, mask: Word) {
    // SAFETY: as the caller promises.
    unsafe { store_word(given(tx), addr as usize, value, mask) }
}

/// # Safety
/// `addr` is an aligned word the program may read and write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_store(addr: *mut Word, value: Word) {
    // SAFETY: as the caller promises.
    unsafe { store_entry(addr as usize, value, Word::MAX) }
}

/// # Safety
/// `addr` is an aligned word the program may read and write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_store2(addr: *mut Word, value: Word, mask: Word) {
    // SAFETY: as the caller promises.
    unsafe { store_entry(addr as usize, value, mask) }
}

/// The exported stores' body: the common case inline, the rest out of line.
///
/// # Safety
/// As `stm_store2`.
#[inline(always)]
pub unsafe fn store_entry(addr: usize, value: Word, mask: Word) {
    if let Some(th) = plain_access() {
        th.countdown -= 1;
        // SAFETY: as the caller promises.
        if !unsafe { th.tx.store_fast(addr, value, mask) } {
            // SAFETY: as the caller promises.
            unsafe { store_slow(th, addr, value, mask) }
        }
        return;
    }
    // SAFETY: as the caller promises.
    unsafe { store_any(addr, value, mask) }
}

/// # Safety
/// As `stm_store2`.
#[inline(never)]
unsafe extern "C" fn store_any(addr: usize, value: Word, mask: Word) {
    // SAFETY: as the caller promises.
    unsafe { store_word(me(), addr, value, mask) }
}
