//! The program's allocations, recorded with their call sites: `sharemap cc` links with
//! `--wrap` for malloc, calloc, realloc, free, posix_memalign, aligned_alloc, mmap, munmap
//! and C++'s new and delete, so the program's own calls come here (libraries' calls, libc's
//! inside its allocator included, do not). Each wrapper starts as a few instructions that
//! take the caller's return address off the stack and jump on with it as one more argument
//! (x86-64; elsewhere the site is left unknown), so a site costs no unwinding.
//!
//! The C++ operators are found when first called (`dlsym`), not linked: a C program's link
//! has no libstdc++ to bind them to, and never calls their wrappers (nothing in it calls
//! new). They may throw, so their wrappers let an exception pass (`C-unwind`).

use core::ffi::c_void;
use core::sync::atomic::{AtomicUsize, Ordering};
use sharemap_shm::{Record, TAG_ALLOC, TAG_ALLOC_SITE, TAG_ALLOC_SIZE, TAG_FREE};

const MALLOC: u8 = 0;
const CALLOC: u8 = 1;
const REALLOC: u8 = 2;
const ALIGNED: u8 = 3;
const MMAP: u8 = 4;
const NEW: u8 = 5;
const NEW_ARRAY: u8 = 6;
pub(crate) const STACK: u8 = 7;
const FREED: u8 = 0;
const REALLOCATED: u8 = 1;
const UNMAPPED: u8 = 2;
const DELETED: u8 = 3;

unsafe extern "C" {
    fn __real_malloc(n: usize) -> *mut c_void;
    fn __real_calloc(n: usize, size: usize) -> *mut c_void;
    fn __real_realloc(p: *mut c_void, n: usize) -> *mut c_void;
    fn __real_free(p: *mut c_void);
    fn __real_posix_memalign(out: *mut *mut c_void, align: usize, n: usize) -> i32;
    fn __real_aligned_alloc(align: usize, n: usize) -> *mut c_void;
    fn __real_mmap(addr: *mut c_void, n: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut c_void;
    fn __real_munmap(addr: *mut c_void, n: usize) -> i32;
}

/// A C++ operator, looked up once (0: not yet; 1: not found).
struct Operator {
    name: &'static [u8],
    at: AtomicUsize,
}

impl Operator {
    const fn new(name: &'static [u8]) -> Operator {
        Operator { name, at: AtomicUsize::new(0) }
    }

    /// Its address, or None when the program has no such operator to call.
    fn get(&self) -> Option<usize> {
        let mut at = self.at.load(Ordering::Acquire);
        if at == 0 {
            // SAFETY: the name is NUL-terminated; dlsym returns an address or null.
            let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, self.name.as_ptr() as *const libc::c_char) };
            at = if found.is_null() { 1 } else { found as usize };
            self.at.store(at, Ordering::Release);
        }
        (at != 1).then_some(at)
    }
}

static NEW_OP: Operator = Operator::new(b"_Znwm\0");
static NEW_ARRAY_OP: Operator = Operator::new(b"_Znam\0");
static DELETE_OP: Operator = Operator::new(b"_ZdlPv\0");
static DELETE_ARRAY_OP: Operator = Operator::new(b"_ZdaPv\0");
static SIZED_DELETE_OP: Operator = Operator::new(b"_ZdlPvm\0");
static SIZED_DELETE_ARRAY_OP: Operator = Operator::new(b"_ZdaPvm\0");

type NewFn = unsafe extern "C-unwind" fn(usize) -> *mut c_void;
type DeleteFn = unsafe extern "C-unwind" fn(*mut c_void);
type SizedDeleteFn = unsafe extern "C-unwind" fn(*mut c_void, usize);

/// Calls `op` as operator new; a program whose libstdc++ is linked in statically (where
/// dlsym cannot see it) gets malloc's block, and aborts where new would have thrown.
unsafe fn call_new(op: &Operator, n: usize) -> *mut c_void {
    match op.get() {
        // SAFETY: the address dlsym gave for this operator's name.
        Some(at) => unsafe { core::mem::transmute::<usize, NewFn>(at)(n) },
        None => {
            // SAFETY: plain malloc.
            let p = crate::inside(|| unsafe { __real_malloc(n.max(1)) });
            if p.is_null() {
                // SAFETY: abort has no preconditions.
                unsafe { libc::abort() };
            }
            p
        }
    }
}

unsafe fn call_delete(op: &Operator, p: *mut c_void) {
    match op.get() {
        // SAFETY: the address dlsym gave for this operator's name.
        Some(at) => unsafe { core::mem::transmute::<usize, DeleteFn>(at)(p) },
        // SAFETY: the block came from malloc (`call_new`'s fallback).
        None => crate::inside(|| unsafe { __real_free(p) }),
    }
}

unsafe fn call_sized_delete(op: &Operator, plain: &Operator, p: *mut c_void, n: usize) {
    match op.get() {
        // SAFETY: the address dlsym gave for this operator's name.
        Some(at) => unsafe { core::mem::transmute::<usize, SizedDeleteFn>(at)(p, n) },
        // SAFETY: as for `call_delete`.
        None => unsafe { call_delete(plain, p) },
    }
}

/// Records an allocation of `n` bytes at `p` by allocator `how`, called from `site`.
pub(crate) fn allocated(p: *mut c_void, n: usize, how: u8, site: usize) {
    if p.is_null() || !crate::active() {
        return;
    }
    crate::THREAD.with(|t| {
        if !t.busy.replace(true) {
            allocated_on(t, p as usize, n, how, site);
            t.busy.set(false);
        }
    });
}

pub(crate) fn allocated_on(t: &crate::ThreadState, addr: usize, n: usize, how: u8, site: usize) {
    crate::push(t, |seq| Record::alloc(seq, TAG_ALLOC, addr as u64, how));
    crate::push(t, |seq| Record::tagged(seq, TAG_ALLOC_SIZE, n as u64));
    crate::push(t, |seq| Record::tagged(seq, TAG_ALLOC_SITE, site as u64));
}

/// Records the release of what was allocated at `p`.
fn released(p: *mut c_void, how: u8) {
    if p.is_null() || !crate::active() {
        return;
    }
    crate::THREAD.with(|t| {
        if !t.busy.replace(true) {
            crate::push(t, |seq| Record::alloc(seq, TAG_FREE, p as u64, how));
            t.busy.set(false);
        }
    });
}

/// Entry points named `$name`, each jumping to `$target` with the caller's return address
/// in `$reg`, the register of the argument after those it takes.
macro_rules! with_caller {
    ($($name:ident($reg:literal) => $target:path;)*) => {
        $(
            #[cfg(target_arch = "x86_64")]
            #[unsafe(naked)]
            #[unsafe(no_mangle)]
            pub extern "C" fn $name() {
                core::arch::naked_asm!(
                    concat!("mov ", $reg, ", [rsp]"),
                    "jmp {target}",
                    target = sym $target,
                )
            }
        )*
    };
}

#[cfg(target_arch = "x86_64")]
with_caller! {
    __wrap_malloc("rsi") => malloc_from;
    __wrap_calloc("rdx") => calloc_from;
    __wrap_realloc("rdx") => realloc_from;
    __wrap_posix_memalign("rcx") => posix_memalign_from;
    __wrap_aligned_alloc("rdx") => aligned_alloc_from;
    __wrap__Znwm("rsi") => new_from;
    __wrap__Znam("rsi") => new_array_from;
}

/// mmap takes six arguments in registers: its site goes on the stack as the seventh.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn __wrap_mmap() {
    core::arch::naked_asm!("push qword ptr [rsp]", "call {target}", "add rsp, 8", "ret", target = sym mmap_from)
}

/// The same entry points without their sites, where the return address is not taken.
#[cfg(not(target_arch = "x86_64"))]
mod without_sites {
    use super::*;

    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __wrap_malloc(n: usize) -> *mut c_void {
        unsafe { malloc_from(n, 0) }
    }
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __wrap_calloc(n: usize, size: usize) -> *mut c_void {
        unsafe { calloc_from(n, size, 0) }
    }
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __wrap_realloc(p: *mut c_void, n: usize) -> *mut c_void {
        unsafe { realloc_from(p, n, 0) }
    }
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __wrap_posix_memalign(out: *mut *mut c_void, align: usize, n: usize) -> i32 {
        unsafe { posix_memalign_from(out, align, n, 0) }
    }
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __wrap_aligned_alloc(align: usize, n: usize) -> *mut c_void {
        unsafe { aligned_alloc_from(align, n, 0) }
    }
    #[unsafe(no_mangle)]
    pub unsafe extern "C-unwind" fn __wrap__Znwm(n: usize) -> *mut c_void {
        unsafe { new_from(n, 0) }
    }
    #[unsafe(no_mangle)]
    pub unsafe extern "C-unwind" fn __wrap__Znam(n: usize) -> *mut c_void {
        unsafe { new_array_from(n, 0) }
    }
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn __wrap_mmap(
        addr: *mut c_void,
        n: usize,
        prot: i32,
        flags: i32,
        fd: i32,
        off: i64,
    ) -> *mut c_void {
        unsafe { mmap_from(addr, n, prot, flags, fd, off, 0) }
    }
}

/// # Safety
/// As libc's `malloc`.
unsafe extern "C" fn malloc_from(n: usize, site: usize) -> *mut c_void {
    // SAFETY: as the caller promises.
    let p = crate::inside(|| unsafe { __real_malloc(n) });
    allocated(p, n, MALLOC, site);
    p
}

/// # Safety
/// As libc's `calloc`.
unsafe extern "C" fn calloc_from(n: usize, size: usize, site: usize) -> *mut c_void {
    // SAFETY: as the caller promises.
    let p = crate::inside(|| unsafe { __real_calloc(n, size) });
    allocated(p, n.saturating_mul(size), CALLOC, site);
    p
}

/// # Safety
/// As libc's `realloc`.
unsafe extern "C" fn realloc_from(old: *mut c_void, n: usize, site: usize) -> *mut c_void {
    // SAFETY: as the caller promises.
    let p = crate::inside(|| unsafe { __real_realloc(old, n) });
    // A failed realloc leaves the old block as it was.
    if !p.is_null() || n == 0 {
        released(old, REALLOCATED);
    }
    allocated(p, n, REALLOC, site);
    p
}

/// # Safety
/// As libc's `posix_memalign`.
unsafe extern "C" fn posix_memalign_from(out: *mut *mut c_void, align: usize, n: usize, site: usize) -> i32 {
    // SAFETY: as the caller promises.
    let r = crate::inside(|| unsafe { __real_posix_memalign(out, align, n) });
    if r == 0 {
        // SAFETY: posix_memalign stored the block at `out`.
        allocated(unsafe { *out }, n, ALIGNED, site);
    }
    r
}

/// # Safety
/// As libc's `aligned_alloc`.
unsafe extern "C" fn aligned_alloc_from(align: usize, n: usize, site: usize) -> *mut c_void {
    // SAFETY: as the caller promises.
    let p = crate::inside(|| unsafe { __real_aligned_alloc(align, n) });
    allocated(p, n, ALIGNED, site);
    p
}

/// # Safety
/// As libc's `mmap`.
unsafe extern "C" fn mmap_from(
    addr: *mut c_void,
    n: usize,
    prot: i32,
    flags: i32,
    fd: i32,
    off: i64,
    site: usize,
) -> *mut c_void {
    // SAFETY: as the caller promises.
    let p = crate::inside(|| unsafe { __real_mmap(addr, n, prot, flags, fd, off) });
    if p != libc::MAP_FAILED {
        allocated(p, n, MMAP, site);
    }
    p
}

/// # Safety
/// As C++'s `operator new` (its allocations are libstdc++'s, whose calls to malloc are not
/// wrapped: nothing is recorded twice).
unsafe extern "C-unwind" fn new_from(n: usize, site: usize) -> *mut c_void {
    // SAFETY: as the caller promises; only a C++ program calls it.
    let p = unsafe { call_new(&NEW_OP, n) };
    allocated(p, n, NEW, site);
    p
}

/// # Safety
/// As C++'s `operator new[]`.
unsafe extern "C-unwind" fn new_array_from(n: usize, site: usize) -> *mut c_void {
    // SAFETY: as for `new_from`.
    let p = unsafe { call_new(&NEW_ARRAY_OP, n) };
    allocated(p, n, NEW_ARRAY, site);
    p
}

/// # Safety
/// As libc's `free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap_free(p: *mut c_void) {
    released(p, FREED);
    // SAFETY: as the caller promises.
    crate::inside(|| unsafe { __real_free(p) })
}

/// # Safety
/// As libc's `munmap`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap_munmap(p: *mut c_void, n: usize) -> i32 {
    released(p, UNMAPPED);
    // SAFETY: as the caller promises.
    crate::inside(|| unsafe { __real_munmap(p, n) })
}

/// # Safety
/// As C++'s `operator delete`.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn __wrap__ZdlPv(p: *mut c_void) {
    released(p, DELETED);
    // SAFETY: as the caller promises; only a C++ program calls it.
    unsafe { call_delete(&DELETE_OP, p) }
}

/// # Safety
/// As C++'s `operator delete[]`.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn __wrap__ZdaPv(p: *mut c_void) {
    released(p, DELETED);
    // SAFETY: as for `__wrap__ZdlPv`.
    unsafe { call_delete(&DELETE_ARRAY_OP, p) }
}

/// # Safety
/// As C++'s sized `operator delete`.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn __wrap__ZdlPvm(p: *mut c_void, n: usize) {
    released(p, DELETED);
    // SAFETY: as for `__wrap__ZdlPv`.
    unsafe { call_sized_delete(&SIZED_DELETE_OP, &DELETE_OP, p, n) }
}

/// # Safety
/// As C++'s sized `operator delete[]`.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn __wrap__ZdaPvm(p: *mut c_void, n: usize) {
    released(p, DELETED);
    // SAFETY: as for `__wrap__ZdlPv`.
    unsafe { call_sized_delete(&SIZED_DELETE_ARRAY_OP, &DELETE_ARRAY_OP, p, n) }
}
