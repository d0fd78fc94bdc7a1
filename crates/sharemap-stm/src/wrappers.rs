//! TinySTM's `wrappers.h`: loads and stores of every C type. A value narrower than a word,
//! or one that straddles two words, goes through the enclosing aligned words with a mask,
//! so that the other bytes of those words are neither read into nor written from it.

use crate::access::{load_entry, store_entry};
use crate::core::Word;
use std::ffi::c_void;

const WORD: usize = std::mem::size_of::<Word>();

/// The `size` bytes (1..=8) at `addr`, little-endian. A value inside one word (every
/// aligned C value) is one `stm_load` fast path, with nothing kept across it: a pointer
/// or a long is a tail call, and costs what `stm_load` does. One that straddles two words
/// goes out of line.
///
/// # Safety
/// The words holding them are memory the program may read.
#[inline(always)]
unsafe fn load_bytes(addr: usize, size: usize) -> u64 {
    let off = addr % WORD;
    if off + size > WORD {
        // SAFETY: as the caller promises.
        return unsafe { load_straddling(addr, size) };
    }
    // SAFETY: the word holding the bytes, as the caller promises.
    let word = unsafe { load_entry(addr - off) } as u64;
    if size == WORD { word } else { (word >> (off * 8)) & ((1u64 << (size * 8)) - 1) }
}

/// `load_bytes` of a value across two words.
///
/// # Safety
/// As `load_bytes`.
#[cold]
#[inline(never)]
unsafe extern "C" fn load_straddling(addr: usize, size: usize) -> u64 {
    let base = addr & !(WORD - 1);
    let off = addr - base;
    // SAFETY: the words holding the bytes, as the caller promises.
    let low = unsafe { load_entry(base) } as u64 >> (off * 8);
    // SAFETY: as above.
    let value = low | (unsafe { load_entry(base + WORD) } as u64) << ((WORD - off) * 8);
    if size == 8 { value } else { value & ((1u64 << (size * 8)) - 1) }
}

/// Stores the `size` low bytes (1..=8) of `value` at `addr` (inside one word, inline, as
/// `load_bytes`).
///
/// # Safety
/// The words holding them are memory the program may read and write.
#[inline(always)]
unsafe fn store_bytes(addr: usize, value: u64, size: usize) {
    let off = addr % WORD;
    if off + size > WORD {
        // SAFETY: as the caller promises.
        return unsafe { store_straddling(addr, value, size) };
    }
    let bits = if size == 8 { u64::MAX } else { (1u64 << (size * 8)) - 1 };
    // SAFETY: the word holding the bytes, as the caller promises.
    unsafe { store_entry(addr - off, (value << (off * 8)) as Word, (bits << (off * 8)) as Word) };
}

/// `store_bytes` of a value across two words.
///
/// # Safety
/// As `store_bytes`.
#[cold]
#[inline(never)]
unsafe extern "C" fn store_straddling(addr: usize, value: u64, size: usize) {
    let base = addr & !(WORD - 1);
    let off = addr - base;
    let bits = if size == 8 { u64::MAX } else { (1u64 << (size * 8)) - 1 };
    // SAFETY: the words holding the bytes, as the caller promises.
    unsafe { store_entry(base, (value << (off * 8)) as Word, (bits << (off * 8)) as Word) };
    let shift = (WORD - off) * 8;
    // SAFETY: as above.
    unsafe { store_entry(base + WORD, (value >> shift) as Word, (bits >> shift) as Word) };
}

macro_rules! typed {
    ($($load:ident, $store:ident, $t:ty, $to:expr, $from:expr;)*) => {
        $(
            /// # Safety
            /// `addr` points to a value the program may read.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $load(addr: *const $t) -> $t {
                // SAFETY: as the caller promises.
                let bits = unsafe { load_bytes(addr as usize, std::mem::size_of::<$t>()) };
                #[allow(clippy::redundant_closure_call)]
                ($from)(bits)
            }

            /// # Safety
            /// `addr` points to a value the program may read and write.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $store(addr: *mut $t, value: $t) {
                #[allow(clippy::redundant_closure_call)]
                let bits: u64 = ($to)(value);
                // SAFETY: as the caller promises.
                unsafe { store_bytes(addr as usize, bits, std::mem::size_of::<$t>()) };
            }
        )*
    };
}

typed! {
    stm_load_u8, stm_store_u8, u8, |v: u8| v as u64, |b: u64| b as u8;
    stm_load_u16, stm_store_u16, u16, |v: u16| v as u64, |b: u64| b as u16;
    stm_load_u32, stm_store_u32, u32, |v: u32| v as u64, |b: u64| b as u32;
    stm_load_u64, stm_store_u64, u64, |v: u64| v, |b: u64| b;
    stm_load_char, stm_store_char, i8, |v: i8| v as u8 as u64, |b: u64| b as u8 as i8;
    stm_load_uchar, stm_store_uchar, u8, |v: u8| v as u64, |b: u64| b as u8;
    stm_load_short, stm_store_short, i16, |v: i16| v as u16 as u64, |b: u64| b as u16 as i16;
    stm_load_ushort, stm_store_ushort, u16, |v: u16| v as u64, |b: u64| b as u16;
    stm_load_int, stm_store_int, i32, |v: i32| v as u32 as u64, |b: u64| b as u32 as i32;
    stm_load_uint, stm_store_uint, u32, |v: u32| v as u64, |b: u64| b as u32;
    stm_load_long, stm_store_long, i64, |v: i64| v as u64, |b: u64| b as i64;
    stm_load_ulong, stm_store_ulong, u64, |v: u64| v, |b: u64| b;
    stm_load_float, stm_store_float, f32, |v: f32| v.to_bits() as u64, |b: u64| f32::from_bits(b as u32);
    stm_load_double, stm_store_double, f64, |v: f64| v.to_bits(), f64::from_bits;
    stm_load_ptr, stm_store_ptr, *mut c_void, |v: *mut c_void| v as usize as u64, |b: u64| b as usize as *mut c_void;
}

/// Copies `size` bytes at `addr` into `buf`, word by word.
///
/// # Safety
/// `buf` holds `size` bytes; `addr..addr+size` is memory the STM may read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_load_bytes(addr: *const u8, buf: *mut u8, size: usize) {
    let mut done = 0;
    while done < size {
        let a = addr as usize + done;
        let n = (WORD - a % WORD).min(size - done);
        // SAFETY: within addr..addr+size, as the caller promises.
        let bytes = unsafe { load_bytes(a, n) }.to_le_bytes();
        // SAFETY: buf holds size bytes, as the caller promises.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.add(done), n) };
        done += n;
    }
}

/// Writes the `size` bytes of `buf` at `addr`, word by word.
///
/// # Safety
/// `buf` holds `size` bytes; `addr..addr+size` is memory the STM may write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_store_bytes(addr: *mut u8, buf: *const u8, size: usize) {
    let mut done = 0;
    while done < size {
        let a = addr as usize + done;
        let n = (WORD - a % WORD).min(size - done);
        let mut bytes = [0u8; 8];
        // SAFETY: buf holds size bytes, as the caller promises.
        unsafe { std::ptr::copy_nonoverlapping(buf.add(done), bytes.as_mut_ptr(), n) };
        // SAFETY: within addr..addr+size, as the caller promises.
        unsafe { store_bytes(a, u64::from_le_bytes(bytes), n) };
        done += n;
    }
}

/// Sets `count` bytes at `addr` to `byte`.
///
/// # Safety
/// `addr..addr+count` is memory the STM may write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_set_bytes(addr: *mut u8, byte: u8, count: usize) {
    let mut done = 0;
    while done < count {
        let a = addr as usize + done;
        let n = (WORD - a % WORD).min(count - done);
        // SAFETY: within addr..addr+count, as the caller promises.
        unsafe { store_bytes(a, u64::from_le_bytes([byte; 8]), n) };
        done += n;
    }
}
