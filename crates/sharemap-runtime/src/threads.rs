//! Threads get dense ids in creation order: `pthread_create` is intercepted (the program's
//! own calls, and libomp's, which the linker binds to the executable's definition), the
//! parent hands the new thread the next id, and the thread records its start (with its OS
//! id) and its exit.

use core::ffi::c_void;
use sharemap_interpose::StartRoutine;

/// Event code of the trace format.
const THREAD_EXIT: u8 = 2;

/// The new thread's id (None when recording is off).
struct Traced(Option<u32>);

impl sharemap_interpose::Hooks for Traced {
    fn started(&self) {
        if let Some(id) = self.0 {
            crate::set_thread_id(id);
            crate::with_thread(|t| {
                started_on(t);
                // Its stack, as an allocation of its own (a created thread's attributes are
                // read without allocating; the main thread's the recorder reads itself).
                let (lo, hi) = stack_range();
                if hi > lo {
                    crate::alloc::allocated_on(t, lo, hi - lo, crate::alloc::STACK, 0);
                }
            });
        }
    }

    fn ended(&self) {
        crate::event(THREAD_EXIT, b"", 0);
    }

    fn quietly<R>(f: impl FnOnce() -> R) -> R {
        crate::inside(f)
    }
}

/// Records the thread's start, with its OS id.
pub(crate) fn started_on(t: &crate::ThreadState) {
    // SAFETY: gettid has no preconditions.
    crate::thread_start_on(t, unsafe { libc::gettid() } as u64);
}

/// # Safety
/// As libc's `pthread_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartRoutine,
    arg: *mut c_void,
) -> i32 {
    // The creating thread is numbered before its child (the main thread is 0).
    let _ = crate::current_id();
    let id = crate::next_id();
    // SAFETY: forwarding the caller's arguments.
    unsafe { sharemap_interpose::create(thread, attr, routine, arg, Traced(id)) }
}

/// The calling thread's stack, [low, high). For the main thread glibc reads /proc/self/maps
/// through stdio, which allocates from the program's heap: called there only for
/// `--exclude-stack` (the heap's layout then differs from a run's).
pub(crate) fn stack_range() -> (usize, usize) {
    // SAFETY: pthread_getattr_np fills attr for the calling thread; it is destroyed after.
    unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let (mut addr, mut size) = (core::ptr::null_mut(), 0usize);
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if ok { (addr as usize, addr as usize + size) } else { (0, 0) }
    }
}
