//! The tracer's hooks: a program built with `sharemap cc --stm` links the STM together with
//! sharemap's tracer runtime (`libsharemap_stm_traced.a`), which registers these at start.
//! Each transactional load and store is then recorded as an access of its word, and each
//! attempt as transaction events, in the trace `sharemap record` writes. In a plain build
//! nothing is registered and the access hook is never reached (`capi::on_access`) and the others are one load and a
//! branch.

use std::sync::atomic::{AtomicPtr, Ordering};

/// The trace format's event codes.
pub const TX_BEGIN: u8 = 5;
pub const TX_COMMIT: u8 = 6;
pub const TX_ABORT: u8 = 7;

/// What the tracer runtime provides.
pub struct Tracer {
    /// Records an access (write?, address, size in bytes).
    pub access: fn(bool, usize, usize),
    /// Records an event (kind, argument: the transaction's attribute id).
    pub event: fn(u8, u16),
    /// Stops (true) or resumes (false) recording the calling thread's accesses; returns the
    /// previous setting. The STM's own work (mapping decisions) is not the program's.
    pub quiet: fn(bool) -> bool,
}

static TRACER: AtomicPtr<Tracer> = AtomicPtr::new(std::ptr::null_mut());

/// Registers the tracer (once, before the program's threads run).
pub fn set_tracer(t: &'static Tracer) {
    TRACER.store(t as *const Tracer as *mut Tracer, Ordering::Release);
    crate::capi::enable_extras(crate::capi::EXTRA_EVENTS);
}

#[inline]
fn tracer() -> Option<&'static Tracer> {
    let t = TRACER.load(Ordering::Acquire);
    // SAFETY: only ever set from a &'static Tracer.
    (!t.is_null()).then(|| unsafe { &*t })
}

/// Whether a tracer is registered: then every transactional access is recorded.
pub fn traced() -> bool {
    tracer().is_some()
}

#[inline]
pub fn access(write: bool, addr: usize) {
    if let Some(t) = tracer() {
        (t.access)(write, addr & !7, 8);
    }
}

#[inline]
pub fn event(kind: u8, arg: u16) {
    if let Some(t) = tracer() {
        (t.event)(kind, arg);
    }
}

/// Runs `f` with the calling thread's accesses unrecorded.
pub fn quietly<R>(f: impl FnOnce() -> R) -> R {
    match tracer() {
        Some(t) => {
            let was = (t.quiet)(true);
            let r = f();
            (t.quiet)(was);
            r
        }
        None => f(),
    }
}

/// Leaves the calling thread unrecorded for good (the STM's own mapping thread).
pub fn quiet_thread() {
    if let Some(t) = tracer() {
        (t.quiet)(true);
    }
}
