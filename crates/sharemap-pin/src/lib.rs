//! Preloaded (`LD_PRELOAD`) into a program that `sharemap run` starts. Threads are numbered
//! as the tracer numbers them: the main thread 0, then 1, 2, ... in `pthread_create` order
//! (the program's own threads and its OpenMP runtime's alike), so that a mapping computed
//! from a recording applies to the next run. Each thread pins itself as it starts, before
//! running any of the program's code. What it is told comes in the environment:
//!
//! - `SHAREMAP_PIN_CPUS`: OS CPU numbers, comma-separated; thread k goes to entry k mod n
//!   (threads beyond the list wrap around); an entry may be a set of CPUs joined by `+`
//!   (`0+1+2+3`), within which the scheduler moves the thread; absent: no pinning.
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

// Nothing here allocates: the program's heap must be laid out as in a recording (no
// allocation of ours shifts its own), so that addresses recorded with `--no-aslr` hold.

extern "C" fn at_load() {
    if let Some(policy) = env(c"SHAREMAP_MEMPOLICY") {
        match set_mempolicy(policy) {
            Ok(()) => report(&[b"mempolicy ok"]),
            Err(errno) => report(&[b"mempolicy error ", number(errno as u64).as_bytes()]),
        }
    }
    pin(0);
}

/// An environment variable's value, read in place.
fn env(name: &core::ffi::CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv with a NUL-terminated name; a non-null result is a C string that stays
    // while the environment is not changed (the program has not started yet, or is
    // starting a thread).
    unsafe {
        let v = libc::getenv(name.as_ptr());
        (!v.is_null()).then(|| core::ffi::CStr::from_ptr(v).to_bytes())
    }
}

/// The numbers of a comma-separated list (None for anything else in it).
fn numbers(list: &[u8]) -> impl Iterator<Item = Option<usize>> + '_ {
    list.split(|&b| b == b',').filter(|n| !n.is_empty()).map(|n| {
        n.iter().try_fold(0usize, |v, &d| {
            d.is_ascii_digit().then(|| v.checked_mul(10)?.checked_add((d - b'0') as usize)).flatten()
        })
    })
}

/// Applies a policy as `SHAREMAP_MEMPOLICY` gives it; the errno on failure.
fn set_mempolicy(text: &[u8]) -> Result<(), i32> {
    let (mode, nodes) = if let Some(nodes) = text.strip_prefix(b"interleave:") {
        (libc::MPOL_INTERLEAVE, nodes)
    } else if let Some(nodes) = text.strip_prefix(b"bind:") {
        (libc::MPOL_BIND, nodes)
    } else {
        return Err(libc::EINVAL);
    };
    let mut mask = [0u64; 16];
    for n in numbers(nodes) {
        match n {
            Some(n) if n < mask.len() * 64 => mask[n / 64] |= 1 << (n % 64),
            _ => return Err(libc::EINVAL),
        }
    }
    // SAFETY: set_mempolicy reads `maxnode` bits from the mask, which holds that many.
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, mask.as_ptr(), mask.len() * 64) };
    if r == 0 { Ok(()) } else { Err(errno()) }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Pins the calling thread, number `id`, as `SHAREMAP_PIN_CPUS` says, and reports it: `cpu
/// C` for one CPU, `cpus A+B+...` for a set (as the entry wrote it).
fn pin(id: u32) {
    let Some(list) = env(c"SHAREMAP_PIN_CPUS") else { return };
    let entries = || list.split(|&b| b == b',').filter(|e| !e.is_empty());
    let count = entries().count();
    let Some(entry) = entries().nth(id as usize % count.max(1)) else { return };
    let limit = 8 * core::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: cpu_set_t is plain data, valid when zeroed; each CPU set is within it.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    let mut fine = true;
    for cpu in entry.split(|&b| b == b'+').map(|n| numbers(n).next().flatten()) {
        match cpu {
            // SAFETY: cpu < the set's size in bits.
            Some(cpu) if cpu < limit => unsafe { libc::CPU_SET(cpu, &mut set) },
            _ => fine = false,
        }
    }
    let result = if !fine {
        Err(libc::EINVAL)
    } else {
        // SAFETY: a valid set of the size given.
        match unsafe { libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set) } {
            0 => Ok(()),
            _ => Err(errno()),
        }
    };
    let id = number(id as u64);
    let what: &[u8] = if entry.contains(&b'+') { b" cpus " } else { b" cpu " };
    match result {
        Ok(()) => report(&[b"thread ", id.as_bytes(), what, entry, b" ok"]),
        Err(e) => report(&[b"thread ", id.as_bytes(), what, entry, b" error ", number(e as u64).as_bytes()]),
    }
}

/// A number in decimal, on the stack.
struct Number {
    digits: [u8; 20],
    start: usize,
}

impl Number {
    fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

fn number(mut n: u64) -> Number {
    let mut out = Number { digits: [0; 20], start: 20 };
    loop {
        out.start -= 1;
        out.digits[out.start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return out;
        }
    }
}

/// Appends `pid P <parts>` and a newline to the report file, in one write (lines of
/// concurrent threads do not mix).
fn report(parts: &[&[u8]]) {
    let Some(path) = env(c"SHAREMAP_PIN_REPORT") else { return };
    let mut line = [0u8; 256];
    let mut len = 0;
    // SAFETY: getpid has no preconditions.
    let pid = number(unsafe { libc::getpid() } as u64);
    for part in [&b"pid "[..], pid.as_bytes(), b" "].iter().chain(parts).chain([&b"\n"[..]].iter()) {
        let take = part.len().min(line.len() - len);
        line[len..len + take].copy_from_slice(&part[..take]);
        len += take;
    }
    let mut name = [0u8; 4096];
    if path.len() >= name.len() {
        return;
    }
    name[..path.len()].copy_from_slice(path);
    // SAFETY: a NUL-terminated path on the stack; the descriptor is closed after one write.
    unsafe {
        let fd = libc::open(
            name.as_ptr() as *const libc::c_char,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
            0o600,
        );
        if fd >= 0 {
            libc::write(fd, line.as_ptr() as *const libc::c_void, len);
            libc::close(fd);
        }
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
