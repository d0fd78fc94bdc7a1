//! gcc's ThreadSanitizer instrumentation turns every atomic operation into a call to
//! `__tsan_atomic{8,16,32,64}_<op>(address, ..., memory order)`, which must perform the
//! operation. Each is done here with sequentially consistent ordering (at least as strong
//! as any order the program asked for) and recorded: loads as reads, stores as writes,
//! read-modify-writes as a read then a write.

use core::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering::SeqCst, fence};

const SC: core::sync::atomic::Ordering = SeqCst;

/// The read-modify-writes of one width, each the atomic type's method of the same meaning.
macro_rules! rmw_ops {
    ($bits:literal, $t:ty, $($suffix:literal => $method:ident,)*) => {
        $(
            const _: () = {
                #[unsafe(export_name = concat!("__tsan_atomic", $bits, $suffix))]
                extern "C" fn op(a: *mut $t, v: $t, _mo: i32) -> $t {
                    rmw(a);
                    cell(a).$method(v, SC)
                }
            };
        )*
    };
}

/// Defines the functions of one width.
macro_rules! atomics {
    ($bits:literal, $t:ty, $atomic:ty, $size:literal) => {
        const _: () = {
            #[inline]
            fn cell<'a>(a: *mut $t) -> &'a $atomic {
                // SAFETY: the compiler passes the address of a properly aligned object of
                // this width that the program accesses atomically.
                unsafe { &*(a as *const $atomic) }
            }
            #[inline]
            fn rmw(a: *mut $t) {
                crate::access(false, a as usize, $size);
                crate::access(true, a as usize, $size);
            }

            #[unsafe(export_name = concat!("__tsan_atomic", $bits, "_load"))]
            extern "C" fn load(a: *mut $t, _mo: i32) -> $t {
                crate::access(false, a as usize, $size);
                cell(a).load(SC)
            }
            #[unsafe(export_name = concat!("__tsan_atomic", $bits, "_store"))]
            extern "C" fn store(a: *mut $t, v: $t, _mo: i32) {
                crate::access(true, a as usize, $size);
                cell(a).store(v, SC)
            }
            rmw_ops! {$bits, $t,
                "_exchange" => swap,
                "_fetch_add" => fetch_add,
                "_fetch_sub" => fetch_sub,
                "_fetch_and" => fetch_and,
                "_fetch_or" => fetch_or,
                "_fetch_xor" => fetch_xor,
                "_fetch_nand" => fetch_nand,
            }
            /// Strong and weak compare-exchange: on failure `*expected` gets the current value.
            #[unsafe(export_name = concat!("__tsan_atomic", $bits, "_compare_exchange_strong"))]
            extern "C" fn cas_strong(a: *mut $t, expected: *mut $t, v: $t, _mo: i32, _fail: i32) -> i32 {
                rmw(a);
                // SAFETY: `expected` points at the caller's expected value.
                let e = unsafe { &mut *expected };
                match cell(a).compare_exchange(*e, v, SC, SC) {
                    Ok(_) => 1,
                    Err(current) => {
                        *e = current;
                        0
                    }
                }
            }
            #[unsafe(export_name = concat!("__tsan_atomic", $bits, "_compare_exchange_weak"))]
            extern "C" fn cas_weak(a: *mut $t, expected: *mut $t, v: $t, mo: i32, fail: i32) -> i32 {
                cas_strong(a, expected, v, mo, fail)
            }
            #[unsafe(export_name = concat!("__tsan_atomic", $bits, "_compare_exchange_val"))]
            extern "C" fn cas_val(a: *mut $t, expected: $t, v: $t, _mo: i32, _fail: i32) -> $t {
                rmw(a);
                match cell(a).compare_exchange(expected, v, SC, SC) {
                    Ok(old) | Err(old) => old,
                }
            }
        };
    };
}

atomics!("8", u8, AtomicU8, 1);
atomics!("16", u16, AtomicU16, 2);
atomics!("32", u32, AtomicU32, 4);
atomics!("64", u64, AtomicU64, 8);

#[unsafe(no_mangle)]
pub extern "C" fn __tsan_atomic_thread_fence(_mo: i32) {
    fence(SC);
}

#[unsafe(no_mangle)]
pub extern "C" fn __tsan_atomic_signal_fence(_mo: i32) {
    core::sync::atomic::compiler_fence(SC);
}
