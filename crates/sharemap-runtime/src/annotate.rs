//! The annotation API (`sharemap.h`): events the placement policies use. The header calls
//! these through weak references, so a program built without the runtime links and runs
//! with the annotations as no-ops; with the runtime but without a recorder they return at
//! once.

use core::ffi::{CStr, c_char};
use core::sync::atomic::{AtomicU16, Ordering};

/// Event codes of the trace format.
const INIT_DONE: u8 = 3;
const PHASE_CHANGE: u8 = 4;
const ROI_BEGIN: u8 = 8;
const ROI_END: u8 = 9;

/// Serial initialisation is over: first-touch policies re-home pages touched after it.
#[unsafe(no_mangle)]
pub extern "C" fn __sharemap_init_done() {
    crate::event(INIT_DONE, b"", 0);
}

/// The program enters a new phase, named `name` (may be null); phases are numbered from 1.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __sharemap_phase(name: *const c_char) {
    static NUMBER: AtomicU16 = AtomicU16::new(0);
    let n = NUMBER.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    // SAFETY: as the caller promises.
    let label = if name.is_null() { &[][..] } else { unsafe { CStr::from_ptr(name) }.to_bytes() };
    crate::event(PHASE_CHANGE, label, n);
}

#[unsafe(no_mangle)]
pub extern "C" fn __sharemap_roi_begin() {
    crate::event(ROI_BEGIN, b"", 0);
}

#[unsafe(no_mangle)]
pub extern "C" fn __sharemap_roi_end() {
    crate::event(ROI_END, b"", 0);
}
