//! libc's memcpy, memmove and memset are not instrumented: `sharemap cc` links the program
//! with `--wrap` for them, so the program's calls come here first and are recorded as
//! ranged accesses (cut at page boundaries), then go on to libc. In a burst-sampled build
//! only the calls inside a burst are (the instrumented copy's; the plain copy calls libc
//! the same way).

use core::ffi::c_void;

unsafe extern "C" {
    fn __real_memcpy(dst: *mut c_void, src: *const c_void, n: usize) -> *mut c_void;
    fn __real_memmove(dst: *mut c_void, src: *const c_void, n: usize) -> *mut c_void;
    fn __real_memset(dst: *mut c_void, c: i32, n: usize) -> *mut c_void;
}

/// # Safety
/// As libc's `memcpy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap_memcpy(dst: *mut c_void, src: *const c_void, n: usize) -> *mut c_void {
    crate::burst::library_access(false, src as usize, n);
    crate::burst::library_access(true, dst as usize, n);
    // SAFETY: as the caller promises.
    crate::inside(|| unsafe { __real_memcpy(dst, src, n) })
}

/// # Safety
/// As libc's `memmove`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap_memmove(dst: *mut c_void, src: *const c_void, n: usize) -> *mut c_void {
    crate::burst::library_access(false, src as usize, n);
    crate::burst::library_access(true, dst as usize, n);
    // SAFETY: as the caller promises.
    crate::inside(|| unsafe { __real_memmove(dst, src, n) })
}

/// # Safety
/// As libc's `memset`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap_memset(dst: *mut c_void, c: i32, n: usize) -> *mut c_void {
    crate::burst::library_access(true, dst as usize, n);
    // SAFETY: as the caller promises.
    crate::inside(|| unsafe { __real_memset(dst, c, n) })
}
