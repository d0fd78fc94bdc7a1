//! STMap (seed 002) inside the STM: sharing detection on the load/store path and online
//! thread mapping, with data mapping beyond the paper.
//!
//! Algorithm 2: each thread samples one transactional access in SI+1 (its own counter) and
//! runs Algorithm 1 on it (the last two threads per address, `table.rs`). Every MI
//! transactional accesses, counted over all threads (not thread 1's, which may not exist
//! or may stop early), the mapper decides (`mapper.rs`). Threads pin themselves at the
//! start of their next transaction to the CPU the mapper chose.

mod mapper;
pub mod table;

use crate::hooks;
use crate::thread::Thread;
use sharemap_decide::stmap;
use std::ffi::c_int;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// What STMap does, from the environment (docs/stm.md).
#[derive(Clone, Debug)]
pub struct Config {
    /// Detection on (SHAREMAP_STMAP=on, the default, or detect).
    pub detect: bool,
    /// Threads pinned (SHAREMAP_STMAP=on).
    pub pin: bool,
    pub si: u32,
    pub mi: u64,
    pub da_threshold: u64,
    /// Pages moved to their dominant thread's node: None = where the host has several
    /// NUMA nodes (SHAREMAP_STMAP_DATA=auto).
    pub data: Option<bool>,
    pub verbose: bool,
    pub gate: f64,
    pub hysteresis: f64,
    /// Where to write the sharing matrix at `stm_exit` (numalize CSV).
    pub matrix: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            detect: true,
            pin: true,
            si: stmap::default_of(&stmap::SI) as u32,
            mi: stmap::default_of(&stmap::MI),
            da_threshold: stmap::default_of(&stmap::DA),
            data: None,
            verbose: false,
            gate: sharemap_mapping::potential::DEFAULT_THRESHOLD,
            hysteresis: 0.1,
            matrix: None,
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Every STMap variable is read here: unset or empty gives the default; a value `read` does
/// not understand is named on stderr in one line, with what was expected, and the default is
/// used (the program runs on).
fn var<T>(name: &str, default: T, expected: &str, read: impl Fn(&str) -> Option<T>) -> T {
    let Some(v) = env(name) else { return default };
    read(v.trim()).unwrap_or_else(|| {
        eprintln!("sharemap-stm: {name}={v}: expected {expected}; using the default");
        default
    })
}

/// A whole number that `ok` accepts.
fn whole<T: std::str::FromStr>(ok: impl Fn(&T) -> bool) -> impl Fn(&str) -> Option<T> {
    move |v| v.parse::<T>().ok().filter(|x| ok(x))
}

/// A finite number (not `inf` or `nan`, which Rust's parser takes) that `ok` accepts.
fn finite(ok: impl Fn(f64) -> bool) -> impl Fn(&str) -> Option<f64> {
    move |v| v.parse::<f64>().ok().filter(|x| x.is_finite() && ok(*x))
}

/// The hysteresis margin: a remap must make the mapping at least 1 + h times cheaper; beyond
/// 10 (eleven times cheaper) no remap would ever happen and the setting is surely a typo.
fn hysteresis_in_range(h: f64) -> bool {
    (0.0..=10.0).contains(&h)
}

/// on/1/yes or off/0/no.
fn switch(v: &str) -> Option<bool> {
    match v {
        "on" | "1" | "yes" => Some(true),
        "off" | "0" | "no" => Some(false),
        _ => None,
    }
}

impl Config {
    pub fn from_env() -> Config {
        let d = Config::default();
        let (detect, pin) = var("SHAREMAP_STMAP", (true, true), "on, detect or off", |v| match v {
            "detect" => Some((true, false)),
            other => switch(other).map(|on| (on, on)),
        });
        let data = var("SHAREMAP_STMAP_DATA", None, "auto, on or off", |v| match v {
            "auto" => Some(None),
            other => switch(other).map(Some),
        });
        Config {
            detect,
            pin,
            si: var("SHAREMAP_STMAP_SI", d.si, "a whole number below 4294967295", whole(|&v: &u32| v < u32::MAX)),
            mi: var("SHAREMAP_STMAP_MI", d.mi, "a whole number above 0", whole(|&v: &u64| v > 0)),
            da_threshold: var("SHAREMAP_STMAP_DA", d.da_threshold, "a whole number", whole(|_: &u64| true)),
            data,
            verbose: var("SHAREMAP_STMAP_VERBOSE", false, "on or off", switch),
            gate: var("SHAREMAP_STMAP_GATE", d.gate, "a number from 0 to 1", finite(|v| (0.0..=1.0).contains(&v))),
            hysteresis: var(
                "SHAREMAP_STMAP_HYSTERESIS",
                d.hysteresis,
                "a number from 0 to 10",
                finite(hysteresis_in_range),
            ),
            matrix: env("SHAREMAP_STMAP_MATRIX"),
        }
    }
}

/// The live state, built by `init`. The shared counters sit on cache lines of their own.
struct Stmap {
    config: Config,
    sharing: table::Sharing,
    /// Per-page dominant threads, when data mapping is on.
    pages: Option<table::Pages>,
    /// Samples taken; the transactional accesses counted are SI+1 times as many (one
    /// shared counter: each publication costs one cache-line transfer between cores).
    samples: Padded<AtomicU64>,
    /// Where the next decision is due.
    next_decision: Padded<AtomicU64>,
}

impl Stmap {
    /// Transactional accesses counted for `samples` samples.
    fn accesses_of(&self, samples: u64) -> u64 {
        samples.saturating_mul(self.config.si as u64 + 1)
    }

    /// Transactional accesses counted so far.
    fn accesses(&self) -> u64 {
        self.accesses_of(self.samples.load(Ordering::Relaxed))
    }
}

#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

static STMAP: OnceLock<Stmap> = OnceLock::new();
static CONFIG: OnceLock<Config> = OnceLock::new();

pub fn config() -> &'static Config {
    CONFIG.get_or_init(Config::from_env)
}

fn state() -> Option<&'static Stmap> {
    STMAP.get()
}

/// Reads the configuration; builds the tables when detection is on.
pub fn init() {
    let config = config().clone();
    if !config.detect {
        return;
    }
    mapper::remember_allowed_cpus();
    let data = mapper::data_mapping_wanted(&config);
    let page_size = {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 { p as usize } else { 4096 }
    };
    let _ = STMAP.set(Stmap {
        // 32 Ki addresses (256 KiB): room for Equation 1's threshold with a cache-sized table.
        sharing: table::Sharing::new(15),
        pages: data.then(|| table::Pages::new(16, page_size)),
        samples: Padded(AtomicU64::new(0)),
        next_decision: Padded(AtomicU64::new(config.mi)),
        config,
    });
}

/// The sampling interval a new thread uses (u32::MAX: never samples).
pub fn sample_interval() -> u32 {
    match state() {
        Some(s) => s.config.si,
        None => u32::MAX,
    }
}

/// Samples a thread gathers before it applies a batch.
pub const PENDING: usize = 16;

/// Samples a thread takes before it adds them to the global counts (one atomic addition
/// per batch instead of one per sample: the counters are shared by every thread).
const PUBLISH_BATCH: u32 = 64;

/// Algorithm 2's per-access step, off the hot path: the caller counts accesses down
/// (`Thread::countdown`) and calls this on the (SI+1)-th, which is kept in the pending batch
/// and Algorithm 1 applied to it a batch later. A countdown and a branch taken once in
/// SI+1 accesses: its one misprediction per sample costs far less than any branch-free
/// bookkeeping on every access. Returns the accesses until the next sample.
#[cold]
#[inline(never)]
pub fn take_sample(th: &mut Thread, addr: usize) -> u32 {
    if th.sample_interval == u32::MAX {
        return u32::MAX; // sampling off: the countdown only ran out
    }
    th.pending_samples[th.pending_count] = addr;
    th.pending_count += 1;
    if th.pending_count == PENDING {
        rotate_samples(th);
    }
    countdown(th.sample_interval)
}

/// Accesses until the next sample for a sampling interval (u32::MAX: off).
pub fn countdown(interval: u32) -> u32 {
    interval.saturating_add(1)
}

/// A full batch: Algorithm 1 on the batch before, whose table entries were asked for when
/// it filled, so their cache misses (other threads update those entries) were hidden behind
/// the accesses since; this batch's entries are asked for in turn. Batches rather than
/// attempts: measured, a call at the end of every attempt cost more than the samples.
#[inline(never)]
fn rotate_samples(th: &mut Thread) {
    let Some(s) = state() else {
        (th.pending_count, th.ready_count) = (0, 0);
        return;
    };
    let ready = std::mem::take(&mut th.ready_count);
    apply(th, s, ready, false);
    let n = std::mem::take(&mut th.pending_count);
    th.ready_samples[..n].copy_from_slice(&th.pending_samples[..n]);
    th.ready_count = n;
    for &addr in &th.ready_samples[..n] {
        s.sharing.prefetch(addr);
    }
}

/// Every sample not yet applied (the thread leaves).
pub fn flush_samples(th: &mut Thread) {
    let Some(s) = state() else { return };
    let ready = std::mem::take(&mut th.ready_count);
    apply(th, s, ready, false);
    let pending = std::mem::take(&mut th.pending_count);
    apply(th, s, pending, true);
}

/// Algorithm 1 on the first `n` ready (or pending) samples.
fn apply(th: &mut Thread, s: &Stmap, n: usize, pending: bool) {
    if n == 0 || th.slot >= table::MAX_THREADS {
        return;
    }
    let tid = th.slot as u16;
    let samples = if pending { &th.pending_samples[..n] } else { &th.ready_samples[..n] };
    for &addr in samples {
        s.sharing.record(addr, tid);
    }
    // Pages count the samples of pinned threads for their node.
    let node = th.slot().node.load(Ordering::Relaxed);
    if let (Some(p), Ok(node)) = (&s.pages, u16::try_from(node)) {
        for &addr in samples {
            p.record(addr, node);
        }
    }
    th.unpublished_samples += n as u32;
    let mine = &th.slot().samples;
    mine.store(mine.load(Ordering::Relaxed) + n as u64, Ordering::Relaxed);
    if th.unpublished_samples >= PUBLISH_BATCH {
        publish(th);
    }
}

/// Adds the thread's samples to the global counts; takes the decision if it is due.
pub fn publish(th: &mut Thread) {
    let Some(s) = state() else { return };
    let n = std::mem::take(&mut th.unpublished_samples) as u64;
    if n == 0 {
        return;
    }
    let total = s.accesses_of(s.samples.fetch_add(n, Ordering::Relaxed) + n);
    if total >= s.next_decision.load(Ordering::Relaxed) {
        hooks::quietly(|| mapper::request_decision(s, total));
    }
}

/// At each transaction start: a thread the mapper moved pins itself.
#[inline]
pub fn on_start(th: &mut Thread) {
    let epoch = th.slot().cpu_epoch.load(Ordering::Acquire);
    if epoch != th.cpu_epoch_seen {
        th.cpu_epoch_seen = epoch;
        mapper::pin_self(config(), th.slot, th.slot().cpu.load(Ordering::Acquire));
    }
}

/// STMap's statistics by name (`stm_get_stats`).
pub fn stat(name: &[u8]) -> Option<crate::stats::Value> {
    use crate::stats::Value::{Int, ULong};
    let s = state();
    let load = |f: fn(&Stmap) -> u64| s.map_or(0, f);
    let m = mapper::counters();
    Some(match name {
        b"stmap_enabled" => Int(s.is_some() as c_int),
        b"stmap_samples" => ULong(load(|s| s.samples.load(Ordering::Relaxed))),
        b"stmap_accesses" => ULong(load(|s| s.accesses())),
        b"stmap_distinct_addresses" => ULong(load(|s| s.sharing.distinct())),
        b"stmap_decisions" => ULong(m.decisions),
        b"stmap_remaps" => ULong(m.remaps),
        b"stmap_migrations" => ULong(m.migrations),
        b"stmap_pages_moved" => ULong(m.pages_moved),
        b"stmap_data_mapping" => Int(load(|s| s.pages.is_some() as u64) as c_int),
        _ => return None,
    })
}

/// At `stm_exit`: the matrix file, and a summary when verbose.
pub fn finish() {
    let Some(s) = state() else { return };
    hooks::quietly(|| mapper::finish(s));
}

#[cfg(test)]
mod env_tests {
    use super::*;

    /// Each kind of value is read, or refused, as the variables' documentation says.
    #[test]
    fn values_are_understood_or_refused() {
        assert_eq!(switch("yes"), Some(true));
        assert_eq!(switch("off"), Some(false));
        assert_eq!(switch("true"), None);
        let hysteresis = finite(hysteresis_in_range);
        assert_eq!(hysteresis("0.25"), Some(0.25));
        assert_eq!(hysteresis("10"), Some(10.0));
        for bad in ["inf", "-inf", "NaN", "-1", "x", "10.5", "99999999999999999999999"] {
            assert_eq!(hysteresis(bad), None, "{bad}");
        }
        let si = whole(|&v: &u32| v < u32::MAX);
        assert_eq!(si("100"), Some(100));
        assert_eq!(si("4294967295"), None);
        assert_eq!(si("often"), None);
    }
}
