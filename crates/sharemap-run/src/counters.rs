//! Hardware counters of a run, as seed 000 reports them: last-level cache misses per
//! thousand instructions, and remote memory accesses (loads that missed the local node,
//! perf's `node-load-misses`). Counted with perf_event_open on the program from its exec on,
//! inherited by every thread it creates, user space only (what `perf_event_paranoid` 2
//! allows an unprivileged user on their own process).

use serde::Serialize;

/// One counter: perf's event type and config.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Counter {
    pub name: &'static str,
    pub kind: u32,
    pub config: u64,
}

const HARDWARE: u32 = 0;
const SOFTWARE: u32 = 1;
const HW_CACHE: u32 = 3;
/// Cache event config: which cache | operation << 8 | result << 16.
const fn cache(which: u64) -> u64 {
    const READ: u64 = 0;
    const MISS: u64 = 1;
    which | (READ << 8) | (MISS << 16)
}

pub const INSTRUCTIONS: Counter = Counter { name: "instructions", kind: HARDWARE, config: 1 };
pub const LLC_MISSES: Counter = Counter { name: "LLC-load-misses", kind: HW_CACHE, config: cache(2) };
pub const REMOTE: Counter = Counter { name: "node-load-misses", kind: HW_CACHE, config: cache(6) };
/// A software event every host has (the tests count with it).
pub const PAGE_FAULTS: Counter = Counter { name: "page-faults", kind: SOFTWARE, config: 2 };

/// The counters `run` reads, in this order.
pub const HARDWARE_COUNTERS: [Counter; 3] = [INSTRUCTIONS, LLC_MISSES, REMOTE];

/// perf_event_attr up to its first version's size (64 bytes), which every kernel takes.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// perf_event_open's flag for a close-on-exec descriptor (<linux/perf_event.h>).
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

const INHERIT: u64 = 1 << 1;
const EXCLUDE_KERNEL: u64 = 1 << 5;
const EXCLUDE_HV: u64 = 1 << 6;

/// Counters open on a process.
pub struct Open {
    fds: Vec<(Counter, Option<i32>)>,
}

/// What was counted: each counter's total, or None where the host cannot count it.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct Counts {
    pub values: Vec<(String, Option<u64>)>,
}

impl Counts {
    pub fn get(&self, name: &str) -> Option<u64> {
        self.values.iter().find(|(n, _)| n == name).and_then(|v| v.1)
    }

    /// LLC misses per 1000 instructions.
    pub fn llc_mpki(&self) -> Option<f64> {
        per_kilo(self.get(LLC_MISSES.name)?, self.get(INSTRUCTIONS.name)?)
    }

    /// Remote loads per 1000 instructions.
    pub fn remote_pki(&self) -> Option<f64> {
        per_kilo(self.get(REMOTE.name)?, self.get(INSTRUCTIONS.name)?)
    }
}

fn per_kilo(n: u64, instructions: u64) -> Option<f64> {
    (instructions > 0).then(|| 1000.0 * n as f64 / instructions as f64)
}

impl Open {
    /// Opens the counters on `pid` (stopped at its exec), inherited by threads it creates.
    /// The first one the host refuses is said in words: e.g. "this machine exposes no
    /// hardware performance counters (no PMU: a VM, usually)" for ENOENT.
    pub fn on(pid: i32, counters: &[Counter]) -> (Open, Option<String>) {
        let mut fds = Vec::new();
        let mut refused = None;
        for &c in counters {
            let attr = Attr {
                kind: c.kind,
                size: std::mem::size_of::<Attr>() as u32,
                config: c.config,
                flags: INHERIT | EXCLUDE_KERNEL | EXCLUDE_HV,
                ..Attr::default()
            };
            // SAFETY: perf_event_open reads `size` bytes of the attribute, which has them.
            let fd = unsafe {
                libc::syscall(libc::SYS_perf_event_open, &attr as *const Attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC)
            };
            if fd < 0 {
                if refused.is_none() {
                    refused = Some(refusal_in_words(c.name, std::io::Error::last_os_error()));
                }
                fds.push((c, None));
            } else {
                fds.push((c, Some(fd as i32)));
            }
        }
        (Open { fds }, refused)
    }

    /// The totals so far (threads that have exited are included).
    pub fn read(&self) -> Counts {
        let values = self
            .fds
            .iter()
            .map(|(c, fd)| {
                let value = fd.and_then(|fd| {
                    let mut v = 0u64;
                    // SAFETY: a counter's read gives one u64 without a read format.
                    let n = unsafe { libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
                    (n == 8).then_some(v)
                });
                (c.name.to_string(), value)
            })
            .collect();
        Counts { values }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        for fd in self.fds.iter().filter_map(|f| f.1) {
            // SAFETY: our own descriptor, closed once.
            unsafe { libc::close(fd) };
        }
    }
}

/// Why this process cannot count instructions (None: it can), tried on itself.
/// Why the kernel refused a counter, in words (its errno named too).
fn refusal_in_words(counter: &str, e: std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            "this machine exposes no hardware performance counters to the kernel (no PMU; a VM, usually)".into()
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "the kernel forbids counting for this user (kernel.perf_event_paranoid; run as root)".into()
        }
        Some(libc::ENOSYS) => "this kernel has no perf events".into(),
        _ => format!("the kernel refused to count {counter}: {e}"),
    }
}

pub fn why_unavailable() -> Option<String> {
    let (open, refused) = Open::on(0, &[INSTRUCTIONS]);
    drop(open);
    refused
}

/// Whether the host's PMU counts instructions for this user.
pub fn available() -> bool {
    why_unavailable().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_per_thousand_instructions() {
        let c = Counts {
            values: vec![
                ("instructions".into(), Some(2_000_000)),
                ("LLC-load-misses".into(), Some(5_000)),
                ("node-load-misses".into(), None),
            ],
        };
        assert_eq!(c.llc_mpki(), Some(2.5));
        assert_eq!(c.remote_pki(), None);
        assert_eq!(Counts::default().llc_mpki(), None);
    }
}
