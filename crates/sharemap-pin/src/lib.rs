//! Preloaded (`LD_PRELOAD`) into a program that `sharemap run` starts. Threads are numbered
//! as the tracer numbers them: the main thread 0, then 1, 2, ... in `pthread_create` order
//! (the program's own threads and its OpenMP runtime's alike), so that a mapping computed
//! from a recording applies to the next run. Each thread pins itself as it starts, before
//! running any of the program's code. What it is told comes in the environment:
//!
//! - `SHAREMAP_PIN_CPUS`: OS CPU numbers, comma-separated; thread k goes to entry k mod n
//!   (threads beyond the list wrap around); absent: no pinning.
//! - `SHAREMAP_MEMPOLICY`: `interleave:N,N,...` or `bind:N`, set on the main thread at load,
//!   which every thread created later inherits; absent: the kernel's default (first touch).
//! - `SHAREMAP_PIN_REPORT`: a file each thread appends one line to, `pid P thread K cpu C ok`
//!   or `pid P thread K cpu C error ERRNO`, and the main thread `pid P mempolicy ok` or
//!   `pid P mempolicy error ERRNO` (a program the run's program starts loads this library
//!   too, numbering its own threads: its lines carry its own pid).

use core::ffi::c_void;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;
type CreateFn =
    unsafe extern "C" fn(*mut libc::pthread_t, *const libc::pthread_attr_t, StartRoutine, *mut c_void) -> i32;

/// The next thread's number (the main thread is 0).
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

#[used]
#[unsafe(link_section = ".init_array")]
static AT_LOAD: extern "C" fn() = at_load;

extern "C" fn at_load() {
    if let Some(policy) = std::env::var_os("SHAREMAP_MEMPOLICY") {
        let line = match policy.to_str().map(set_mempolicy) {
            Some(Ok(())) => "mempolicy ok\n".to_string(),
            Some(Err(errno)) => format!("mempolicy error {errno}\n"),
            None => format!("mempolicy error {}\n", libc::EINVAL),
        };
        report(&line);
    }
    pin(0);
}

/// Applies a policy as `SHAREMAP_MEMPOLICY` gives it; the errno on failure.
fn set_mempolicy(text: &str) -> Result<(), i32> {
    let (mode, nodes) = match text.split_once(':') {
        Some(("interleave", nodes)) => (libc::MPOL_INTERLEAVE, nodes),
        Some(("bind", nodes)) => (libc::MPOL_BIND, nodes),
        _ => return Err(libc::EINVAL),
    };
    let mut mask = [0u64; 16];
    for n in nodes.split(',') {
        let n: usize = n.trim().parse().map_err(|_| libc::EINVAL)?;
        if n >= mask.len() * 64 {
            return Err(libc::EINVAL);
        }
        mask[n / 64] |= 1 << (n % 64);
    }
    // SAFETY: set_mempolicy reads `maxnode` bits from the mask, which holds that many.
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, mask.as_ptr(), mask.len() * 64) };
    if r == 0 { Ok(()) } else { Err(errno()) }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Pins the calling thread, number `id`, as `SHAREMAP_PIN_CPUS` says, and reports it.
fn pin(id: u32) {
    let Some(cpus) = std::env::var_os("SHAREMAP_PIN_CPUS") else { return };
    let cpus: Vec<usize> = cpus.to_str().unwrap_or("").split(',').filter_map(|c| c.trim().parse().ok()).collect();
    let Some(&cpu) = cpus.get(id as usize % cpus.len().max(1)) else { return };
    // SAFETY: cpu_set_t is plain data, valid when zeroed; CPU_SET stays within it (checked).
    let result = unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        if cpu >= 8 * core::mem::size_of::<libc::cpu_set_t>() {
            Err(libc::EINVAL)
        } else {
            libc::CPU_SET(cpu, &mut set);
            match libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set) {
                0 => Ok(()),
                _ => Err(errno()),
            }
        }
    };
    report(&match result {
        Ok(()) => format!("thread {id} cpu {cpu} ok\n"),
        Err(e) => format!("thread {id} cpu {cpu} error {e}\n"),
    });
}

/// Appends a line to the report file, in one write (lines of concurrent threads do not mix).
fn report(line: &str) {
    let Some(path) = std::env::var_os("SHAREMAP_PIN_REPORT") else { return };
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(path) {
        let _ = f.write_all(format!("pid {} {line}", std::process::id()).as_bytes());
    }
}

struct Start {
    routine: StartRoutine,
    arg: *mut c_void,
    id: u32,
}

extern "C" fn trampoline(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the Box made by pthread_create below, handed over to this thread.
    let start = unsafe { Box::from_raw(p as *mut Start) };
    pin(start.id);
    (start.routine)(start.arg)
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
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let start = Box::into_raw(Box::new(Start { routine, arg, id }));
    // SAFETY: forwarding the caller's arguments, with our trampoline and its Box.
    let r = unsafe { real(thread, attr, trampoline, start as *mut c_void) };
    if r != 0 {
        // SAFETY: the thread was not created, the Box is still ours.
        drop(unsafe { Box::from_raw(start) });
    }
    r
}
