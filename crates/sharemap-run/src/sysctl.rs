//! Owning `kernel.numa_balancing` for a measurement. A run that switches it holds an
//! exclusive lock (`flock` on a file under /run) for as long as it may, so that a second run
//! is refused in one line rather than switching it under the first one's measurement. The
//! value found is written into the lock file: it is restored when the owner lets go, by the
//! CLI's signal handler on SIGINT, SIGTERM and SIGHUP (`restore_on_signal`), and, after an
//! owner that could not restore it (SIGKILL), by the next owner before anything else.

use sharemap::{Error, ErrorKind, Result};
use std::io::{Read, Seek, Write};
use std::sync::Mutex;

pub(crate) const NUMA_BALANCING: &str = "/proc/sys/kernel/numa_balancing";
const LOCK_DIR: &str = "/run/sharemap";
const LOCK: &str = "/run/sharemap/numa_balancing.lock";

struct Owned {
    lock: std::fs::File,
    /// The value found before the first switch.
    was: String,
    /// Guards alive in this process.
    holders: usize,
}

static OWNED: Mutex<Option<Owned>> = Mutex::new(None);

/// This process owns `kernel.numa_balancing` while a guard lives; the last one dropped
/// restores the value found and lets go.
pub struct NumaBalancingGuard(());

fn refuse(why: String) -> Error {
    Error::new(ErrorKind::Mechanism, format!("numa-balancing: {why}"))
}

impl NumaBalancingGuard {
    /// Takes ownership (or shares this process's), refusing when another process has it.
    pub fn take() -> Result<NumaBalancingGuard> {
        let mut owned = OWNED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(o) = owned.as_mut() {
            o.holders += 1;
            return Ok(NumaBalancingGuard(()));
        }
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        std::fs::DirBuilder::new()
            .mode(0o755)
            .recursive(true)
            .create(LOCK_DIR)
            .map_err(|e| refuse(format!("cannot make {LOCK_DIR} for its lock: {e}")))?;
        let mut lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(LOCK)
            .map_err(|e| refuse(format!("{LOCK}: {e}")))?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let mut held = String::new();
            let _ = lock.read_to_string(&mut held);
            let pid = held.split_whitespace().nth(1).unwrap_or("?").to_string();
            return Err(refuse(format!(
                "another sharemap run (pid {pid}) is switching kernel.numa_balancing: wait for it to end ({LOCK})"
            )));
        }
        let mut recorded = String::new();
        let _ = lock.read_to_string(&mut recorded);
        let now = std::fs::read_to_string(NUMA_BALANCING).map_err(|e| refuse(format!("{NUMA_BALANCING}: {e}")))?;
        // A value left in the lock file is what an owner that died without restoring found.
        let was = match recorded.split_whitespace().next() {
            Some(v) if v.chars().all(|c| c.is_ascii_digit()) => {
                let _ = std::fs::write(NUMA_BALANCING, v);
                v.to_string()
            }
            _ => now.trim().to_string(),
        };
        let record = format!("{was} {}\n", std::process::id());
        let written = lock.set_len(0).and_then(|_| lock.rewind()).and_then(|_| lock.write_all(record.as_bytes()));
        written.map_err(|e| refuse(format!("{LOCK}: {e}")))?;
        *owned = Some(Owned { lock, was, holders: 1 });
        Ok(NumaBalancingGuard(()))
    }

    /// Puts back the value found (between the runs that switch it).
    pub fn restore(&self) {
        if let Some(o) = OWNED.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = std::fs::write(NUMA_BALANCING, &o.was);
        }
    }

    /// Switches the kernel's NUMA balancing on or off.
    pub fn set(&self, on: bool) -> Result<()> {
        std::fs::write(NUMA_BALANCING, if on { "1" } else { "0" })
            .map_err(|e| refuse(format!("cannot switch {NUMA_BALANCING}: {e}")))
    }
}

impl Drop for NumaBalancingGuard {
    fn drop(&mut self) {
        let mut owned = OWNED.lock().unwrap_or_else(|e| e.into_inner());
        let Some(o) = owned.as_mut() else { return };
        o.holders -= 1;
        if o.holders == 0 {
            let o = owned.take().expect("owned");
            release(o);
        }
    }
}

/// Restores the value found, empties the lock file (nothing left to restore) and unlocks.
fn release(o: Owned) {
    let _ = std::fs::write(NUMA_BALANCING, &o.was);
    let _ = o.lock.set_len(0);
    // Closing the file releases the lock.
    drop(o.lock);
}

/// For a signal handler's thread, just before the process exits: whatever this process
/// owns is restored.
pub fn restore_on_signal() {
    // try_lock: the handler must not wait on a thread it is about to end.
    let taken = match OWNED.try_lock() {
        Ok(mut owned) => owned.take(),
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner().take(),
        Err(std::sync::TryLockError::WouldBlock) => {
            std::thread::sleep(std::time::Duration::from_millis(50));
            OWNED.try_lock().ok().and_then(|mut o| o.take())
        }
    };
    if let Some(o) = taken {
        release(o);
    }
}
