//! Threads get dense ids in creation order: `pthread_create` is intercepted (the program's
//! own calls, and libomp's, which the linker binds to the executable's definition), the
//! parent hands the new thread the next id, and the thread records its start (with its OS
//! id) and its exit.

use core::ffi::c_void;

type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;
type CreateFn =
    unsafe extern "C" fn(*mut libc::pthread_t, *const libc::pthread_attr_t, StartRoutine, *mut c_void) -> i32;

/// Event code of the trace format.
const THREAD_EXIT: u8 = 2;

struct Start {
    routine: StartRoutine,
    arg: *mut c_void,
    id: Option<u32>,
}

extern "C" fn trampoline(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the Box made by pthread_create below, handed over to this thread.
    let start = unsafe { Box::from_raw(p as *mut Start) };
    if let Some(id) = start.id {
        crate::set_thread_id(id);
        crate::with_thread(started_on);
    }
    let r = (start.routine)(start.arg);
    crate::event(THREAD_EXIT, b"", 0);
    r
}

/// Records the thread's start, with its OS id.
pub(crate) fn started_on(t: &crate::ThreadState) {
    // SAFETY: gettid has no preconditions.
    crate::thread_start_on(t, unsafe { libc::gettid() } as u64);
}

/// libc's pthread_create.
fn real_create() -> Option<CreateFn> {
    static REAL: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    let mut f = REAL.load(core::sync::atomic::Ordering::Relaxed);
    if f == 0 {
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds libc's definition.
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) } as usize;
        REAL.store(f, core::sync::atomic::Ordering::Relaxed);
    }
    // SAFETY: a non-null result is libc's pthread_create, of this signature.
    (f != 0).then(|| unsafe { core::mem::transmute::<usize, CreateFn>(f) })
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
    let Some(real) = real_create() else { return libc::EAGAIN };
    // The creating thread is numbered before its child (the main thread is 0).
    let _ = crate::current_id();
    let id = crate::next_id();
    let start = Box::into_raw(Box::new(Start { routine, arg, id }));
    // SAFETY: forwarding the caller's arguments, with our trampoline and its Box.
    let r = unsafe { real(thread, attr, trampoline, start as *mut c_void) };
    if r != 0 {
        // SAFETY: the thread was not created, the Box is still ours.
        drop(unsafe { Box::from_raw(start) });
    }
    r
}

/// The calling thread's stack, [low, high).
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
