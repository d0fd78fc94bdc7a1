//! What the tracer runtime and the run actor both do to threads: each defines the program's
//! `pthread_create` (the executable's definition, or the preloaded library's, wins over
//! libc's) and calls [`create`], which starts the thread through a trampoline running the
//! library's [`Hooks`] around the program's start routine.

use core::ffi::c_void;
use core::sync::atomic::{AtomicUsize, Ordering};

pub type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;
type CreateFn =
    unsafe extern "C" fn(*mut libc::pthread_t, *const libc::pthread_attr_t, StartRoutine, *mut c_void) -> i32;

/// What a library does in each thread it sees created.
pub trait Hooks: Send + 'static {
    /// In the new thread, before the program's start routine.
    fn started(&self);
    /// In the thread, after its start routine returned (not when it calls pthread_exit).
    fn ended(&self) {}
    /// Runs the library's own work `f`, such as allocating and freeing the trampoline's
    /// state: the tracer records none of it.
    fn quietly<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

struct Start<H> {
    routine: StartRoutine,
    arg: *mut c_void,
    hooks: H,
}

extern "C" fn trampoline<H: Hooks>(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the Box made by `create` below, handed over to this thread.
    let start = unsafe { Box::from_raw(p as *mut Start<H>) };
    start.hooks.started();
    // Freed before the program's routine runs: a thread that never returns holds nothing.
    let Start { routine, arg, hooks } = H::quietly(move || *start);
    let r = routine(arg);
    hooks.ended();
    r
}

/// libc's pthread_create.
fn real_create() -> Option<CreateFn> {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let mut f = REAL.load(Ordering::Relaxed);
    if f == 0 {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds libc's definition.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) } as usize;
        REAL.store(f, Ordering::Relaxed);
    }
    // SAFETY: a non-null result is libc's pthread_create, of this signature.
    (f != 0).then(|| unsafe { core::mem::transmute::<usize, CreateFn>(f) })
}

/// Creates a thread as libc's `pthread_create` does, with `hooks` run in it around
/// `routine`.
///
/// # Safety
/// As libc's `pthread_create`.
pub unsafe fn create<H: Hooks>(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartRoutine,
    arg: *mut c_void,
    hooks: H,
) -> i32 {
    let Some(real) = real_create() else { return libc::EAGAIN };
    let start = H::quietly(|| Box::into_raw(Box::new(Start { routine, arg, hooks })));
    // SAFETY: forwarding the caller's arguments, with our trampoline and its Box.
    let r = unsafe { real(thread, attr, trampoline::<H>, start as *mut c_void) };
    if r != 0 {
        // SAFETY: the thread was not created, the Box is still ours.
        H::quietly(|| drop(unsafe { Box::from_raw(start) }));
    }
    r
}
