//! STMap's decisions, taken every mapping interval by the thread whose sample crosses it:
//!
//! 1. Equation 1: mapping is enabled when fewer than `da` distinct addresses were seen, else
//!    when the commit ratio (over all threads, since the last decision) is below the abort
//!    ratio.
//! 2. The sharing since the last decision, added to half of what was seen before (older
//!    sharing fades, so a phase change shows within a few intervals).
//! 3. The mapping-potential gate (sharemap-mapping): below its threshold a migration cannot
//!    pay, and threads stay where they are.
//! 4. sharemap's default algorithm maps the active threads on the live topology (fewer than
//!    two: nothing to map, and the interval grows); the threads move
//!    only if the current mapping costs more than the new one by the hysteresis margin, at
//!    two decisions in a row. A change of the active threads is confirmed the same way:
//!    under load, a thread that waited for a CPU through one window looks idle, and
//!    remapping on each such flicker moved threads several times a second; so is the first
//!    set (threads that start one after the other would be mapped at each step). Remaps
//!    are at least `MIN_REMAP_GAP` apart.
//!    Each decision that keeps the mapping doubles the interval (up to 64 MI); a remap
//!    resets it.
//! 5. Data mapping: pages that the threads pinned on one node dominate (at least half of
//!    their samples, by Boyer-Moore's majority count) move to that node (move_pages), on
//!    hosts with several NUMA nodes. A page one thread dominates goes to its node; a page a
//!    group of threads mapped together shares goes to theirs.

use super::{Config, Stmap, table};
use crate::thread::{self, SLOTS};
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;
use sharemap_mapping::{CostModel, PairCosts, mapping_cost, potential};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Samples a page needs before its dominant thread counts.
const PAGE_MIN_SAMPLES: u32 = 4;
/// The share of a page's samples its thread must have made (a lower bound).
const PAGE_SHARE: f64 = 0.5;
/// How far back a thread's work counts towards its being active (the Linux scheduler gives
/// every runnable thread a turn within about 24 ms).
const ACTIVITY_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);
/// The longest interval, in mapping intervals.
const MAX_INTERVAL_FACTOR: u64 = 64;
/// How long a thread counts as active after it last did a tenth of the busiest one's work.
const ACTIVE_HOLD: std::time::Duration = std::time::Duration::from_secs(1);
/// The shortest time between two remaps: at most 5 a second, whatever the intervals.
const MIN_REMAP_GAP: std::time::Duration = std::time::Duration::from_millis(200);

static DECISIONS: AtomicU64 = AtomicU64::new(0);
static REMAPS: AtomicU64 = AtomicU64::new(0);
static MIGRATIONS: AtomicU64 = AtomicU64::new(0);
static PAGES_MOVED: AtomicU64 = AtomicU64::new(0);

pub struct Counters {
    pub decisions: u64,
    pub remaps: u64,
    pub migrations: u64,
    pub pages_moved: u64,
}

pub fn counters() -> Counters {
    Counters {
        decisions: DECISIONS.load(Ordering::Relaxed),
        remaps: REMAPS.load(Ordering::Relaxed),
        migrations: MIGRATIONS.load(Ordering::Relaxed),
        pages_moved: PAGES_MOVED.load(Ordering::Relaxed),
    }
}

/// The host's NUMA nodes (from sysfs; 1 when it has none listed).
fn numa_nodes() -> usize {
    std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.strip_prefix("node").is_some_and(|k| k.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(1)
        .max(1)
}

pub fn data_mapping_wanted(config: &Config) -> bool {
    config.pin && config.data.unwrap_or_else(|| numa_nodes() > 1)
}

struct Topology {
    machine: Machine,
    costs: PairCosts,
}

struct State {
    topology: Option<Topology>,
    /// Why there is no topology (said once).
    topology_error: Option<String>,
    /// Matrix counts at the last decision.
    previous: Vec<u64>,
    previous_n: usize,
    recent: SharingMatrix,
    /// The threads mapped at the last remap, and each one's logical PU.
    current: Option<Mapping>,
    /// A better mapping seen at the last decision, not yet confirmed.
    pending: Option<Vec<usize>>,
    /// A new set of active threads seen at the last decision, not yet confirmed.
    pending_threads: Option<Vec<usize>>,
    /// The last set of active threads confirmed, whether mapped or left where they are.
    settled: Option<Vec<usize>>,
    /// When threads last moved.
    last_remap: Option<std::time::Instant>,
    /// Each slot's samples at past decisions, over the activity window.
    history: std::collections::VecDeque<(std::time::Instant, Vec<u64>)>,
    /// When each slot last did its share of the work.
    last_active: Vec<Option<std::time::Instant>>,
    interval: u64,
    commits: u64,
    aborts: u64,
    samples: u64,
}

#[derive(Clone)]
struct Mapping {
    threads: Vec<usize>,
    pus: Vec<usize>,
}

static MAPPER: Mutex<Option<State>> = Mutex::new(None);

fn log(config: &Config, line: &str) {
    if config.verbose {
        eprintln!("sharemap-stm: {line}");
    }
}

/// The CPUs the process may use, as at `stm_init`: where an unpinned thread goes back to.
static ALLOWED: Mutex<Option<libc::cpu_set_t>> = Mutex::new(None);

/// Notes the CPUs the calling thread may use (at `stm_init`).
pub fn remember_allowed_cpus() {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is valid for writing its size.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } == 0
        && let Ok(mut a) = ALLOWED.lock()
    {
        *a = Some(set);
    }
}

/// Pins the calling thread to OS CPU `cpu`, or for -1 gives it back every CPU it was
/// allowed at the start; says so in the verbose log.
pub fn pin_self(config: &Config, slot: usize, cpu: i32) {
    let set = match usize::try_from(cpu) {
        Ok(cpu) if cpu < 8 * std::mem::size_of::<libc::cpu_set_t>() => {
            // SAFETY: a zeroed cpu_set_t is empty; CPU_SET stays within it (checked above).
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                set
            }
        }
        Ok(_) => return,
        Err(_) => match ALLOWED.lock().ok().and_then(|a| *a) {
            Some(set) => set,
            None => return,
        },
    };
    // SAFETY: set is a valid cpu_set_t of the size given.
    let r = unsafe { libc::pthread_setaffinity_np(libc::pthread_self(), std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if config.verbose {
        let what = if cpu < 0 { "unpinned".to_string() } else { format!("pinned to CPU {cpu}") };
        match r {
            0 => log(config, &format!("T{slot} {what}")),
            e => log(config, &format!("T{slot} not {what}: {}", std::io::Error::from_raw_os_error(e))),
        }
    }
}

/// Unpins the given threads where STMap had pinned them; how many.
fn unpin(threads: &[usize]) -> u64 {
    let mut n = 0;
    for &t in threads {
        let slot = &SLOTS[t];
        slot.node.store(-1, Ordering::Release);
        if slot.cpu.swap(-1, Ordering::AcqRel) != -1 {
            slot.cpu_epoch.fetch_add(1, Ordering::AcqRel);
            n += 1;
        }
    }
    n
}

/// The mapper's own thread, where decisions run, off the transactions' path. It sleeps
/// until one is due (parked: a pool's worker that spun and yielded while waiting for more
/// work took a CPU from the program's threads, 4 % of the linked list's throughput at two
/// threads on two CPUs). It is the only thread of its own rayon pool: the default
/// algorithm's parallel parts run on it one after the other, and no other thread is left
/// waiting for work.
static MAPPER_THREAD: OnceLock<Option<std::thread::Thread>> = OnceLock::new();
/// The access count of the decision asked for (0: none).
static REQUESTED: AtomicU64 = AtomicU64::new(0);

fn mapper_thread(s: &'static Stmap) -> Option<&'static std::thread::Thread> {
    MAPPER_THREAD
        .get_or_init(|| {
            let run = move || {
                crate::hooks::quiet_thread();
                let _pool = rayon::ThreadPoolBuilder::new().num_threads(1).use_current_thread().build();
                loop {
                    std::thread::park();
                    match REQUESTED.swap(0, Ordering::AcqRel) {
                        0 => {} // woken without a request
                        total => decide(s, total),
                    }
                }
            };
            let spawned = std::thread::Builder::new().name("sharemap-stmap".into()).spawn(run);
            spawned.ok().map(|h| h.thread().clone())
        })
        .as_ref()
}

/// Called when `total` accesses have been counted: if a decision is due, the mapper
/// thread takes it (the caller goes on at once).
pub fn request_decision(s: &'static Stmap, total: u64) {
    let due = s.next_decision.load(Ordering::Relaxed);
    if total < due || s.next_decision.compare_exchange(due, u64::MAX, Ordering::AcqRel, Ordering::Relaxed).is_err() {
        return;
    }
    match mapper_thread(s) {
        Some(t) => {
            REQUESTED.store(total.max(1), Ordering::Release);
            t.unpark();
        }
        None => decide(s, total),
    }
}

fn decide(s: &Stmap, total: u64) {
    let Ok(mut guard) = MAPPER.lock() else { return };
    let st = guard.get_or_insert_with(|| State {
        topology: None,
        topology_error: None,
        previous: Vec::new(),
        previous_n: 0,
        recent: SharingMatrix::new(0),
        current: None,
        pending: None,
        pending_threads: None,
        settled: None,
        last_remap: None,
        history: Default::default(),
        last_active: Vec::new(),
        interval: s.config.mi,
        commits: 0,
        aborts: 0,
        samples: 0,
    });
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| st.decide(s, total)));
    if outcome.is_err() {
        eprintln!("sharemap-stm: STMap's mapper failed: no further decisions");
        return; // next_decision stays at u64::MAX
    }
    // Due after the interval, counted from what the threads have counted by now.
    let now = s.accesses();
    s.next_decision.store(now.max(total).saturating_add(st.interval), Ordering::Relaxed);
}

impl State {
    fn topology(&mut self, config: &Config) -> Option<&Topology> {
        if self.topology.is_none() && self.topology_error.is_none() {
            match Machine::live_sysfs() {
                Ok(machine) => {
                    let costs = PairCosts::new(&machine, CostModel::Latency);
                    self.topology = Some(Topology { machine, costs });
                }
                Err(e) => {
                    let why = format!("cannot read this host's topology ({}): threads stay where they are", e);
                    log(config, &why);
                    self.topology_error = Some(why);
                }
            }
        }
        self.topology.as_ref()
    }

    fn grow_interval(&mut self, mi: u64) {
        self.interval = (self.interval.saturating_mul(2)).min(mi.saturating_mul(MAX_INTERVAL_FACTOR));
    }

    /// The matrix since the last decision, added to half of the previous one.
    fn update_recent(&mut self, s: &Stmap, n: usize) {
        let counts = s.sharing.counts(n);
        let old = std::mem::replace(&mut self.recent, SharingMatrix::new(n));
        for i in 0..n {
            for j in 0..i {
                let before = if i < self.previous_n { self.previous[i * self.previous_n + j] } else { 0 };
                let faded = if i < old.threads() { old.get(i, j) / 2.0 } else { 0.0 };
                self.recent.add(i, j, faded + (counts[i * n + j] - before) as f64);
            }
        }
        self.previous = counts;
        self.previous_n = n;
    }

    /// The threads that did at least a tenth of the busiest one's transactional work (by
    /// their samples) over the last `ACTIVITY_WINDOW` (at least since the last decision),
    /// at some point in the last `ACTIVE_HOLD`.
    /// An idle thread, such as a main thread that filled a structure and now waits for its
    /// workers, is not mapped: it would take a CPU from them. The window is longer than the
    /// scheduler's period, so that with more threads than CPUs a thread that merely waited
    /// for its turn still counts.
    fn active_threads(&mut self, n: usize) -> Vec<usize> {
        let now = std::time::Instant::now();
        let counts: Vec<u64> = SLOTS[..n].iter().map(|x| x.samples.load(Ordering::Relaxed)).collect();
        while self.history.len() >= 2 && now.duration_since(self.history[1].0) >= ACTIVITY_WINDOW {
            self.history.pop_front();
        }
        let did: Vec<u64> = match self.history.front() {
            Some((_, then)) => (0..n).map(|t| counts[t] - then.get(t).copied().unwrap_or(0).min(counts[t])).collect(),
            None => counts.clone(),
        };
        self.history.push_back((now, counts));
        let busiest = did.iter().copied().max().unwrap_or(0);
        // A thread stays active for `ACTIVE_HOLD` after it last was: on a loaded host one
        // that waited for a CPU through a whole window is still one of the program's.
        self.last_active.resize(n, None);
        for (last, &work) in self.last_active.iter_mut().zip(&did) {
            if work > 0 && work * 10 >= busiest {
                *last = Some(now);
            }
        }
        (0..n).filter(|&t| self.last_active[t].is_some_and(|at| now.duration_since(at) < ACTIVE_HOLD)).collect()
    }

    fn decide(&mut self, s: &Stmap, total: u64) {
        let config = &s.config;
        let number = DECISIONS.fetch_add(1, Ordering::Relaxed) + 1;
        let n = thread::slots_in_use().min(table::MAX_THREADS);
        self.update_recent(s, n);
        let active = self.active_threads(n);
        let commits: u64 = thread::used_slots().iter().map(|x| x.commits.load(Ordering::Relaxed)).sum();
        let aborts: u64 = thread::used_slots().iter().map(|x| x.aborts.load(Ordering::Relaxed)).sum();
        let samples = s.samples.load(Ordering::Relaxed);
        let (dc, da_, ds) = (commits - self.commits, aborts - self.aborts, samples - self.samples);
        (self.commits, self.aborts, self.samples) = (commits, aborts, samples);
        let distinct = s.sharing.distinct();
        let attempts = (dc + da_).max(1) as f64;
        let (cr, ar) = (dc as f64 / attempts, da_ as f64 / attempts);
        let mut line = format!(
            "decision {number} at {total} accesses: {} active threads, {distinct} distinct addresses, commit ratio {cr:.3}, abort ratio {ar:.3}",
            active.len()
        );
        // Equation 1 on this interval's transactions (none: not enabled by them).
        let enable = sharemap_decide::stmap::equation_1(distinct, config.da_threshold, dc, da_).unwrap_or(false);
        if !enable {
            let _ = write!(line, " -> mapping disabled (Equation 1)");
            log(config, &line);
            self.grow_interval(config.mi);
            return;
        }
        if !config.pin {
            let _ = write!(line, " -> mapping enabled (Equation 1); detection only (SHAREMAP_STMAP=detect)");
            log(config, &line);
            self.grow_interval(config.mi);
            return;
        }
        // The active threads' sharing.
        let k = active.len();
        let mut recent = SharingMatrix::new(k);
        for a in 0..k {
            for b in 0..a {
                recent.add(a, b, self.recent.get(active[a], active[b]));
            }
        }
        let current = self.current.clone().filter(|c| c.threads == active).map(|c| c.pus);
        if self.topology(config).is_none() {
            return;
        }
        // Fewer than two threads (or CPUs): nothing to map, and no set of threads to confirm;
        // the interval keeps growing. (A single thread's set confirmed and then "mapped" to
        // nothing was never recorded as current, so decisions alternated between the two
        // and the interval never grew: a decision every mapping interval, for nothing.)
        if k < 2 || self.topology.as_ref().is_some_and(|t| t.machine.pu_count() < 2) {
            let _ = write!(line, " -> nothing to map");
            log(config, &line);
            self.grow_interval(config.mi);
            return;
        }
        // Other threads active than those mapped or left in place (or none yet): they must
        // be seen at two decisions in a row before anything moves. Threads that start one
        // after the other on a loaded host would otherwise be mapped at each step. (A set
        // left in place, below the potential's threshold, stays confirmed: it once counted
        // as new at every other decision, which kept the interval at its shortest.)
        let threads_changed = current.is_none() && self.settled.as_ref() != Some(&active);
        let pending_threads = std::mem::take(&mut self.pending_threads);
        if threads_changed && pending_threads.as_ref() != Some(&active) {
            let _ = write!(line, " -> other threads active than those mapped: remaps if they stay so");
            log(config, &line);
            self.pending_threads = Some(active);
            self.interval = config.mi;
            return;
        }
        self.settled = Some(active.clone());
        let topo = self.topology.as_ref().expect("just built");
        let gate = potential::gate(&recent, &topo.machine, &topo.costs, ds.max(1));
        let _ = write!(line, "; potential {gate:.3}");
        if gate < config.gate {
            let _ = write!(line, " below {:.3}: threads stay", config.gate);
            if current.is_none() {
                // Pins from a mapping of other threads no longer fit: the OS places them.
                let unpinned = unpin(&active);
                if unpinned > 0 {
                    let _ = write!(line, "; {unpinned} pinned for other threads, now unpinned");
                    self.current = None;
                }
            }
            log(config, &line);
            self.grow_interval(config.mi);
            self.map_data(s);
            return;
        }
        let algorithm = sharemap_mapping::build("sharemap", 0).expect("the default algorithm is registered");
        let Ok(candidate) = algorithm.map(&recent, &topo.machine, &topo.costs) else {
            log(config, &format!("{line} -> the default algorithm could not map"));
            return;
        };
        let new_cost = mapping_cost(&recent, &candidate, &topo.costs);
        let current_cost = current.as_ref().map(|c| mapping_cost(&recent, c, &topo.costs));
        let pending = self.pending.take().filter(|p| p.len() == k);
        if let Some(last) = self.last_remap
            && last.elapsed() < MIN_REMAP_GAP
        {
            let _ = write!(line, " -> the last remap was under {} ms ago: threads stay", MIN_REMAP_GAP.as_millis());
            log(config, &line);
            self.pending = pending;
            self.pending_threads = pending_threads;
            self.interval = config.mi;
            return;
        }
        let (remap, candidate) = match current_cost {
            None => (true, candidate),
            Some(c) if c <= new_cost * (1.0 + config.hysteresis) => {
                let _ = write!(
                    line,
                    "; cost {c:.0} now, {new_cost:.0} remapped -> kept (within the {:.0} % hysteresis)",
                    config.hysteresis * 100.0
                );
                (false, candidate)
            }
            Some(c) => {
                let _ = write!(line, "; cost {c:.0} now, {new_cost:.0} remapped");
                // A better mapping must win twice in a row: one interval's sharing may be
                // only the threads that happened to run together.
                match pending.filter(|p| c > mapping_cost(&recent, p, &topo.costs) * (1.0 + config.hysteresis)) {
                    Some(confirmed) => (true, confirmed),
                    None => {
                        let _ = write!(line, " -> better: remaps if it wins again");
                        self.pending = Some(candidate.clone());
                        (false, candidate)
                    }
                }
            }
        };
        if !remap {
            log(config, &line);
            if self.pending.is_some() {
                // A better mapping waits for its confirmation: at the next interval, not a
                // doubled one.
                self.interval = config.mi;
            } else {
                self.grow_interval(config.mi);
            }
            self.map_data(s);
            return;
        }
        let mut moved = 0;
        let mut placed = String::new();
        for (&t, &pu) in active.iter().zip(&candidate) {
            let cpu = topo.machine.pu_os_index(pu) as i32;
            let slot = &SLOTS[t];
            slot.node.store(topo.machine.numa_os_index(topo.machine.pu_numa[pu]) as i32, Ordering::Release);
            if slot.cpu.swap(cpu, Ordering::AcqRel) != cpu {
                moved += 1;
            }
            slot.cpu_epoch.fetch_add(1, Ordering::AcqRel);
            let _ = write!(placed, " T{t}->CPU{cpu}");
        }
        REMAPS.fetch_add(1, Ordering::Relaxed);
        MIGRATIONS.fetch_add(moved, Ordering::Relaxed);
        self.last_remap = Some(std::time::Instant::now());
        let moves = if moved == 1 { "1 thread moves".to_string() } else { format!("{moved} threads move") };
        let _ = write!(line, " -> remap ({moves}):{placed}");
        log(config, &line);
        self.current = Some(Mapping { threads: active, pus: candidate });
        self.interval = config.mi;
        self.map_data(s);
    }

    /// Moves pages a thread dominates to its node.
    fn map_data(&mut self, s: &Stmap) {
        let Some(pages) = &s.pages else { return };
        let mut targets: Vec<(usize, i32)> = Vec::new();
        for (page, node) in pages.dominated(PAGE_MIN_SAMPLES, PAGE_SHARE) {
            pages.reset(page);
            targets.push((page, node as i32));
        }
        if targets.is_empty() {
            return;
        }
        let where_now = move_pages(&targets.iter().map(|&(p, _)| p).collect::<Vec<_>>(), None);
        let to_move: Vec<(usize, i32)> = targets
            .iter()
            .zip(&where_now)
            .filter(|&(&(_, node), &now)| now >= 0 && now != node)
            .map(|(&t, _)| t)
            .collect();
        if to_move.is_empty() {
            return;
        }
        let pages_: Vec<usize> = to_move.iter().map(|&(p, _)| p).collect();
        let nodes: Vec<i32> = to_move.iter().map(|&(_, n)| n).collect();
        let after = move_pages(&pages_, Some(&nodes));
        let moved = after.iter().zip(&nodes).filter(|(a, n)| a == n).count() as u64;
        PAGES_MOVED.fetch_add(moved, Ordering::Relaxed);
        log(&s.config, &format!("data mapping: {moved} of {} pages moved to the node that uses them", to_move.len()));
    }
}

/// move_pages(2) on this process: with `nodes`, moves each page there; without, asks where
/// each is. Each page's node afterwards (negative: an error for that page).
fn move_pages(pages: &[usize], nodes: Option<&[i32]>) -> Vec<i32> {
    let mut status = vec![-1i32; pages.len()];
    let ptrs: Vec<*mut libc::c_void> = pages.iter().map(|&p| p as *mut libc::c_void).collect();
    const MPOL_MF_MOVE: libc::c_int = 1 << 1;
    // SAFETY: the arrays hold pages.len() entries each; pid 0 is this process.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            ptrs.len() as libc::c_ulong,
            ptrs.as_ptr(),
            nodes.map_or(std::ptr::null(), |n| n.as_ptr()),
            status.as_mut_ptr(),
            if nodes.is_some() { MPOL_MF_MOVE } else { 0 },
        )
    };
    if r < 0 {
        status.fill(-1);
    }
    status
}

/// The matrix file and the summary, at `stm_exit`.
pub fn finish(s: &Stmap) {
    let n = thread::slots_in_use().min(table::MAX_THREADS);
    if let Some(path) = &s.config.matrix {
        let counts = s.sharing.counts(n);
        let mut m = SharingMatrix::new(n);
        for i in 0..n {
            for j in 0..i {
                m.add(i, j, counts[i * n + j] as f64);
            }
        }
        // Whole or not at all, through an exclusive temporary of a random name (a predictable
        // one could be another user's link), a special file written in place.
        let written = sharemap_core::output::write_whole(std::path::Path::new(path), m.to_numalize_csv().as_bytes());
        if let Err(e) = written {
            eprintln!("sharemap-stm: SHAREMAP_STMAP_MATRIX: {e}");
        }
    }
    let c = counters();
    log(
        &s.config,
        &format!(
            "STMap: {} samples of {} transactional accesses, {} distinct addresses; {}, {}, {}, {} moved",
            s.samples.load(Ordering::Relaxed),
            s.accesses(),
            s.sharing.distinct(),
            counted(c.decisions, "decision", "decisions"),
            counted(c.remaps, "remap", "remaps"),
            counted(c.migrations, "thread move", "thread moves"),
            counted(c.pages_moved, "page", "pages")
        ),
    );
}

/// "1 remap", "3 remaps".
fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
