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

use crate::{access, access_from};
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

/// ThreadSanitizer's callbacks: each takes the caller's return address off the stack, the
/// code address of the access it reports, and jumps on with it (x86-64; elsewhere the
/// access's site is not known).
macro_rules! with_site {
    ($($name:ident => $write:expr, $size:expr;)*) => {
        $(
            #[cfg(target_arch = "x86_64")]
            #[unsafe(naked)]
            #[unsafe(no_mangle)]
            pub extern "C" fn $name() {
                core::arch::naked_asm!("mov rsi, [rsp]", "jmp {target}", target = sym at_site::<$write, $size>)
            }

            #[cfg(not(target_arch = "x86_64"))]
            #[unsafe(no_mangle)]
            pub extern "C" fn $name(addr: *const c_void) {
                access($write, addr as usize, $size);
            }
        )*
    };
}

extern "C" fn at_site<const WRITE: bool, const SIZE: usize>(addr: *const c_void, site: usize) {
    access_from(WRITE, addr as usize, SIZE, site);
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
}

with_site! {
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

#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn __tsan_read_range() {
    core::arch::naked_asm!("mov rdx, [rsp]", "jmp {target}", target = sym range_at_site::<false>)
}

#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn __tsan_write_range() {
    core::arch::naked_asm!("mov rdx, [rsp]", "jmp {target}", target = sym range_at_site::<true>)
}

extern "C" fn range_at_site<const WRITE: bool>(addr: *const c_void, size: usize, site: usize) {
    access_from(WRITE, addr as usize, size, site);
}

#[cfg(not(target_arch = "x86_64"))]
#[unsafe(no_mangle)]
pub extern "C" fn __tsan_read_range(addr: *const c_void, size: usize) {
    access(false, addr as usize, size);
}

#[cfg(not(target_arch = "x86_64"))]
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
