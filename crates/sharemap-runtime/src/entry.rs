//! The compilers' instrumentation callbacks.
//!
//! clang's sanitizer coverage (`-fsanitize-coverage=inline-8bit-counters,trace-loads,
//! trace-stores`, what `sharemap cc` used before ThreadSanitizer's instrumentation, still
//! accepted from programs built so): calls `__sanitizer_cov_load{1,2,4,8,16}` /
//! `__sanitizer_cov_store{...}` with the address before each access (trace-loads/stores alone
//! emit nothing: the counters must be on, and their init callback defined).
//!
//! ThreadSanitizer's instrumentation (gcc and clang, as `sharemap cc` sets it up), linked
//! with this runtime instead of libtsan: `__tsan_read{N}` / `__tsan_write{N}`, the unaligned and range
//! variants and the vtable-pointer ones. Function entry and exit are no-ops.

use crate::access;
use core::ffi::c_void;

macro_rules! callbacks {
    ($($name:ident => $write:expr, $size:expr;)*) => {
        $(
            #[unsafe(no_mangle)]
            pub extern "C" fn $name(addr: *const c_void) {
                access($write, addr as usize, $size);
            }
        )*
    };
}

callbacks! {
    __sanitizer_cov_load1 => false, 1;
    __sanitizer_cov_load2 => false, 2;
    __sanitizer_cov_load4 => false, 4;
    __sanitizer_cov_load8 => false, 8;
    __sanitizer_cov_load16 => false, 16;
    __sanitizer_cov_store1 => true, 1;
    __sanitizer_cov_store2 => true, 2;
    __sanitizer_cov_store4 => true, 4;
    __sanitizer_cov_store8 => true, 8;
    __sanitizer_cov_store16 => true, 16;
    __tsan_read1 => false, 1;
    __tsan_read2 => false, 2;
    __tsan_read4 => false, 4;
    __tsan_read8 => false, 8;
    __tsan_read16 => false, 16;
    __tsan_write1 => true, 1;
    __tsan_write2 => true, 2;
    __tsan_write4 => true, 4;
    __tsan_write8 => true, 8;
    __tsan_write16 => true, 16;
    __tsan_unaligned_read2 => false, 2;
    __tsan_unaligned_read4 => false, 4;
    __tsan_unaligned_read8 => false, 8;
    __tsan_unaligned_read16 => false, 16;
    __tsan_unaligned_write2 => true, 2;
    __tsan_unaligned_write4 => true, 4;
    __tsan_unaligned_write8 => true, 8;
    __tsan_unaligned_write16 => true, 16;
    __tsan_volatile_read1 => false, 1;
    __tsan_volatile_read2 => false, 2;
    __tsan_volatile_read4 => false, 4;
    __tsan_volatile_read8 => false, 8;
    __tsan_volatile_read16 => false, 16;
    __tsan_volatile_write1 => true, 1;
    __tsan_volatile_write2 => true, 2;
    __tsan_volatile_write4 => true, 4;
    __tsan_volatile_write8 => true, 8;
    __tsan_volatile_write16 => true, 16;
}

/// The coverage counters themselves are not used; defining this is what makes clang emit
/// the load and store callbacks.
#[unsafe(no_mangle)]
pub extern "C" fn __sanitizer_cov_8bit_counters_init(_start: *mut u8, _end: *mut u8) {}

#[unsafe(no_mangle)]
pub extern "C" fn __tsan_init() {}

#[unsafe(no_mangle)]
pub extern "C" fn __tsan_func_entry(_pc: *const c_void) {}

#[unsafe(no_mangle)]
pub extern "C" fn __tsan_func_exit() {}

#[unsafe(no_mangle)]
pub extern "C" fn __tsan_read_range(addr: *const c_void, size: usize) {
    access(false, addr as usize, size);
}

#[unsafe(no_mangle)]
pub extern "C" fn __tsan_write_range(addr: *const c_void, size: usize) {
    access(true, addr as usize, size);
}

/// A virtual call reads the object's vtable pointer.
#[unsafe(no_mangle)]
pub extern "C" fn __tsan_vptr_read(addr: *const c_void) {
    access(false, addr as usize, 8);
}

/// A constructor or destructor writes it.
#[unsafe(no_mangle)]
pub extern "C" fn __tsan_vptr_update(addr: *const c_void, _new: *const c_void) {
    access(true, addr as usize, 8);
}
