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
use core::sync::atomic::{AtomicU32, Ordering};
use sharemap_interpose::StartRoutine;

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

/// The new thread's number.
struct Pinned(u32);

impl sharemap_interpose::Hooks for Pinned {
    fn started(&self) {
        pin(self.0);
    }
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
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    // SAFETY: forwarding the caller's arguments.
    unsafe { sharemap_interpose::create(thread, attr, routine, arg, Pinned(id)) }
}
