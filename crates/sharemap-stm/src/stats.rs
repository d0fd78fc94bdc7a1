//! Statistics: `stm_get_stats` (the calling thread's, TinySTM's names, and STMap's), and the
//! modules `mod_stats` (totals over every thread) and `mod_ab` (time per atomic block).

use crate::stmap;
use crate::thread::{self, Thread};
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

pub enum Value {
    UInt(u32),
    Int(c_int),
    ULong(u64),
}

/// TinySTM's detailed abort kinds, by name (bits 8..12 of the reason).
const ABORT_KINDS: [(&str, usize); 7] = [
    ("nb_aborts_locked_read", 3),
    ("nb_aborts_locked_write", 4),
    ("nb_aborts_validate_read", 5),
    ("nb_aborts_validate_write", 6),
    ("nb_aborts_validate_commit", 7),
    ("nb_aborts_irrevocable", 9),
    ("nb_aborts_killed", 10),
];

/// A statistic of the calling thread, or STMap's.
pub fn thread_stat(th: &Thread, name: &[u8]) -> Option<Value> {
    let slot = th.slot();
    let (reads, writes, locks) = th.tx.set_sizes();
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let v = match name {
        b"read_set_size" | b"read_set_nb_entries" => Value::UInt(reads as u32),
        b"write_set_size" | b"write_set_nb_entries" => Value::UInt(writes as u32),
        b"locks_held" => Value::UInt(locks as u32),
        // The running attempt's mode: a read-only transaction that wrote runs on as an
        // update one, and says so (as TinySTM clears its flag).
        b"read_only" => Value::Int(th.tx.read_only as c_int),
        b"nb_commits" => Value::ULong(load(&slot.commits)),
        b"nb_aborts" => Value::ULong(load(&slot.aborts)),
        b"nb_aborts_explicit" => Value::ULong(load(&slot.aborts_by[0]) + load(&slot.aborts_by[1])),
        b"max_retries" => Value::ULong(load(&slot.max_retries)),
        b"nb_aborts_1" | b"nb_aborts_2" | b"nb_aborts_invalid_memory" | b"locked_reads_ok" | b"locked_reads_failed" => {
            Value::ULong(0)
        }
        b"stmap_thread" => Value::Int(th.slot as c_int),
        b"stmap_cpu" => Value::Int(slot.cpu.load(Ordering::Relaxed)),
        _ => {
            if let Some(&(_, k)) = ABORT_KINDS.iter().find(|(n, _)| n.as_bytes() == name) {
                Value::ULong(load(&slot.aborts_by[k]))
            } else {
                return stmap::stat(name);
            }
        }
    };
    Some(v)
}

// ---------------------------------------------------------------------------------------
// mod_stats: totals over every thread that ever ran (slots keep their counts).

#[unsafe(no_mangle)]
pub extern "C" fn mod_stats_init() {}

/// # Safety
/// `name` is a NUL-terminated string; `val` points to an unsigned long.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_get_global_stats(name: *const c_char, val: *mut c_void) -> c_int {
    if name.is_null() || val.is_null() {
        return 0;
    }
    // SAFETY: as the caller promises.
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    let slots = thread::used_slots();
    let sum = |f: &dyn Fn(&thread::Slot) -> u64| slots.iter().map(f).sum::<u64>();
    let v = match name {
        b"global_nb_commits" => sum(&|s| s.commits.load(Ordering::Relaxed)),
        b"global_nb_aborts" => sum(&|s| s.aborts.load(Ordering::Relaxed)),
        b"global_max_retries" => slots.iter().map(|s| s.max_retries.load(Ordering::Relaxed)).max().unwrap_or(0),
        // Beyond TinySTM's names: each abort kind over every thread (`global_` and the
        // thread statistic's name), to see which conflicts a program's retries come from.
        _ => match ABORT_KINDS.iter().find(|(n, _)| name.strip_prefix(b"global_") == Some(n.as_bytes())) {
            Some(&(_, kind)) => sum(&|s| s.aborts_by[kind].load(Ordering::Relaxed)),
            None => return 0,
        },
    };
    // SAFETY: as the caller promises.
    unsafe { *(val as *mut u64) = v };
    1
}

/// The calling thread's totals (mod_stats's names): `nb_commits`, `nb_aborts`,
/// `nb_retries_min`, `nb_retries_max` (unsigned long) and `nb_retries_avg` (double: aborts
/// per commit). Aborts count every abort, also of transactions that did not retry.
///
/// # Safety
/// `name` is a NUL-terminated string; `val` points to storage of the statistic's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_get_local_stats(name: *const c_char, val: *mut c_void) -> c_int {
    if name.is_null() || val.is_null() {
        return 0;
    }
    // SAFETY: as the caller promises.
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    let slot = thread::me().slot();
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let (commits, aborts) = (load(&slot.commits), load(&slot.aborts));
    let v = match name {
        b"nb_commits" => commits,
        b"nb_aborts" => aborts,
        b"nb_retries_min" => load(&slot.min_retries),
        b"nb_retries_max" => load(&slot.max_retries),
        b"nb_retries_avg" => {
            // SAFETY: as the caller promises: a double to fill.
            unsafe { *(val as *mut f64) = aborts as f64 / commits as f64 };
            return 1;
        }
        _ => return 0,
    };
    // SAFETY: as the caller promises: an unsigned long to fill.
    unsafe { *(val as *mut u64) = v };
    1
}

// ---------------------------------------------------------------------------------------
// mod_ab: the time from the first start of a transaction to its commit, per atomic block
// (the attribute id), on one transaction in `freq`; in nanoseconds.

static AB_FREQ: AtomicU32 = AtomicU32::new(1);
type Check = Option<extern "C" fn() -> c_int>;
static AB_CHECK: Mutex<Check> = Mutex::new(None);
const RESERVOIR: usize = 1000;

#[derive(Default)]
struct Block {
    samples: u64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
    /// A uniform sample of the durations (Vitter's reservoir), and the sorted copy handed out.
    reservoir: Vec<f64>,
    sorted: Vec<f64>,
    seed: u64,
}

impl Block {
    fn add(&mut self, x: f64) {
        self.samples += 1;
        let n = self.samples as f64;
        let d = x - self.mean;
        self.mean += d / n;
        self.m2 += d * (x - self.mean);
        if self.samples == 1 {
            self.min = x;
            self.max = x;
        }
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        if self.reservoir.len() < RESERVOIR {
            self.reservoir.push(x);
        } else {
            self.seed = self.seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = ((self.seed >> 33) % self.samples) as usize;
            if k < RESERVOIR {
                self.reservoir[k] = x;
            }
        }
    }
}

static BLOCKS: Mutex<Option<HashMap<u16, Block>>> = Mutex::new(None);

fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is valid for writing.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// TinySTM's sampling period when `mod_ab_init` is given 0 or less: one transaction in 1024.
const SAMPLING_PERIOD_DEFAULT: u32 = 1024;

/// Atomic-block statistics on: one transaction in `freq` is timed (`freq` 0 or less:
/// TinySTM's default, 1 in 1024; timing every transaction cost 45 % of a 2-thread run).
#[unsafe(no_mangle)]
pub extern "C" fn mod_ab_init(freq: c_int, check: Check) {
    let period = if freq <= 0 { SAMPLING_PERIOD_DEFAULT } else { freq as u32 };
    AB_FREQ.store(period, Ordering::Relaxed);
    if let Ok(mut c) = AB_CHECK.lock() {
        *c = check;
    }
    crate::capi::enable_extras(crate::capi::EXTRA_AB);
}

/// At the start of a transaction's first attempt: one in `freq` is timed (a countdown).
#[inline]
pub fn on_start(th: &mut Thread) {
    if th.retries > 0 {
        return;
    }
    if th.ab_left == 0 {
        th.ab_left = AB_FREQ.load(Ordering::Relaxed);
    }
    th.ab_left -= 1;
    if th.ab_left == 0 {
        th.ab_start = Some(now_ns());
    }
}

/// At commit: a timed transaction's duration goes to its atomic block's statistics.
#[inline]
pub fn on_commit(th: &mut Thread) {
    if th.ab_start.is_some() {
        record_duration(th);
    }
}

#[cold]
#[inline(never)]
fn record_duration(th: &mut Thread) {
    let Some(start) = th.ab_start.take() else { return };
    let check = AB_CHECK.lock().ok().and_then(|c| *c);
    if check.is_some_and(|f| f() == 0) {
        return;
    }
    let d = (now_ns() - start) as f64;
    if let Ok(mut b) = BLOCKS.lock() {
        b.get_or_insert_with(HashMap::new).entry((th.attr & 0xFFFF) as u16).or_default().add(d);
    }
}

/// TinySTM's `stm_ab_stats_t`.
#[repr(C)]
pub struct AbStats {
    samples: u64,
    mean: f64,
    variance: f64,
    min: f64,
    max: f64,
    percentile_50: f64,
    percentile_90: f64,
    percentile_95: f64,
    reservoir: *mut f64,
    reservoir_size: u32,
}

/// The statistics of atomic block `id`: 1, or 0 when it has none. The reservoir stays valid
/// until the next call for the same block.
///
/// # Safety
/// `stats` points to a `stm_ab_stats_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn stm_get_ab_stats(id: c_int, stats: *mut AbStats) -> c_int {
    let Ok(mut blocks) = BLOCKS.lock() else { return 0 };
    let Some(b) = u16::try_from(id).ok().and_then(|id| blocks.as_mut().and_then(|m| m.get_mut(&id))) else {
        return 0;
    };
    if stats.is_null() || b.samples == 0 {
        return 0;
    }
    b.sorted = b.reservoir.clone();
    b.sorted.sort_by(f64::total_cmp);
    let pct = |p: f64| b.sorted[((b.sorted.len() - 1) as f64 * p).round() as usize];
    let out = AbStats {
        samples: b.samples,
        mean: b.mean,
        variance: if b.samples > 1 { b.m2 / (b.samples - 1) as f64 } else { 0.0 },
        min: b.min,
        max: b.max,
        percentile_50: pct(0.5),
        percentile_90: pct(0.9),
        percentile_95: pct(0.95),
        reservoir: b.sorted.as_mut_ptr(),
        reservoir_size: b.sorted.len() as u32,
    };
    // SAFETY: as the caller promises.
    unsafe { stats.write(out) };
    1
}
