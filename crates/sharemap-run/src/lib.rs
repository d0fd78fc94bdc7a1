//! Real runs: a program started with a thread mapping and a memory policy, which the
//! preloaded actor (`libsharemap_pin.so`, crates/sharemap-pin) applies from inside it, and
//! configurations measured against each other as the papers measure: each one several
//! times, interleaved, with a mean and a 95 % confidence interval. docs/run.md says how.

pub mod counters;
pub mod mechanism;
mod observe;
mod placer;
pub mod record;
pub mod sysctl;
pub mod thp;
pub mod timeline;
pub mod vm;

pub use observe::{Observed, ThreadSeen, cpu_list, cpu_ranges};
pub use placer::{OffNode, PlanOutcome};
pub use sharemap::plan::{Plan, optimal_plan};

use serde::Serialize;
use sharemap::{Error, ErrorKind, Result, ThreadMap};
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;
use sharemap_mapping::{CostModel, PairCosts};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Where a program's pages go, as the kernel's memory policy sets it for the whole run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum MemoryPolicy {
    /// The kernel's default: a page on the node of the thread that touches it first.
    FirstTouch,
    /// Pages spread over every node in turn (numactl --interleave=all).
    Interleave,
    /// Every page on one node (numactl --membind).
    Bind(usize),
}

/// What a run's data placement names: a memory policy for the whole program, a per-page
/// plan, or a plan computed from a recording for each configuration's threads (the
/// optimum's, or Marathe & Mueller's from a profile of 1 in 100 accesses).
#[derive(Clone, Debug)]
pub enum DataPlacement {
    Policy(MemoryPolicy),
    Plan(std::sync::Arc<Plan>),
    Optimal(PathBuf),
    Marathe(PathBuf),
}

impl DataPlacement {
    /// The memory policy and plan for a configuration whose threads go as `pinning` says
    /// (unpinned threads are taken as thread k on PU k).
    pub fn resolve(&self, pinning: &Pinning, host: &Machine) -> Result<(MemoryPolicy, Option<std::sync::Arc<Plan>>)> {
        let pus = match pinning {
            Pinning::Pus(pus) => pus.clone(),
            _ => (0..host.pu_count()).collect(),
        };
        let plan = match self {
            DataPlacement::Policy(p) => return Ok((p.clone(), None)),
            DataPlacement::Plan(plan) => return Ok((MemoryPolicy::FirstTouch, Some(plan.clone()))),
            DataPlacement::Optimal(trace) => optimal_plan(trace, ThreadMap::Pus(pus), page_size(), host)?,
            DataPlacement::Marathe(trace) => {
                let source = sharemap_decide::marathe::Source::CacheMiss {
                    kb: sharemap_decide::marathe::CACHE_KB.default.parse().expect("a number"),
                    stores: false,
                };
                mechanism::profile_plan(trace, &pus, host, source)?.0
            }
        };
        Ok((MemoryPolicy::FirstTouch, Some(std::sync::Arc::new(plan))))
    }

    /// `first-touch`, `interleave`, `bind:N`, `optimal:TRACE`, `marathe:TRACE`, or a plan
    /// file (see `Plan::read`), checked against the host: anything but first touch needs a
    /// NUMA host, and N one of its nodes.
    pub fn parse(text: &str, host: &Machine) -> Result<DataPlacement> {
        let text = text.trim();
        if text == "first-touch" {
            return Ok(DataPlacement::Policy(MemoryPolicy::FirstTouch));
        }
        let placement = if text == "interleave" {
            DataPlacement::Policy(MemoryPolicy::Interleave)
        } else if let Some(node) = text.strip_prefix("bind:") {
            match node.parse::<usize>() {
                Ok(node) => DataPlacement::Policy(MemoryPolicy::Bind(node)),
                Err(_) => return Err(Error::new(ErrorKind::DataPlacement, format!("'{text}': expected bind:NODE"))),
            }
        } else if let Some(trace) = text.strip_prefix("optimal:") {
            DataPlacement::Optimal(PathBuf::from(trace))
        } else if let Some(trace) = text.strip_prefix("marathe:") {
            DataPlacement::Marathe(PathBuf::from(trace))
        } else if Path::new(text).is_file() {
            // Read once the host is known to have nodes to place on (below).
            DataPlacement::Plan(std::sync::Arc::new(Plan { pages: Vec::new(), nodes: Vec::new() }))
        } else {
            return Err(Error::new(
                ErrorKind::DataPlacement,
                format!(
                    "'{text}': expected first-touch, interleave, bind:NODE, optimal:TRACE, marathe:TRACE or a plan file"
                ),
            ));
        };
        let nodes = host.numa_count();
        if nodes < 2 {
            return Err(Error::new(
                ErrorKind::DataPlacement,
                format!(
                    "{text} needs a NUMA host: this one has a single NUMA node, where every page is local \
                     (thread pinning works here; `sharemap vm` checks a placement in a multi-node guest)"
                ),
            ));
        }
        if let DataPlacement::Policy(MemoryPolicy::Bind(node)) = placement
            && node >= nodes
        {
            return Err(Error::new(
                ErrorKind::DataPlacement,
                format!("bind:{node}: the host has nodes 0-{}", nodes - 1),
            ));
        }
        if let DataPlacement::Plan(_) = placement {
            return Ok(DataPlacement::Plan(std::sync::Arc::new(Plan::read(Path::new(text), host, page_size())?)));
        }
        Ok(placement)
    }
}

/// The host's page size in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as u64 } else { 4096 }
}

impl MemoryPolicy {
    /// The value of `SHAREMAP_MEMPOLICY` for the actor.
    fn env(&self, host: &Machine) -> Option<String> {
        match self {
            MemoryPolicy::FirstTouch => None,
            MemoryPolicy::Interleave => {
                let nodes: Vec<String> = (0..host.numa_count()).map(|n| host.numa_os_index(n).to_string()).collect();
                Some(format!("interleave:{}", nodes.join(",")))
            }
            MemoryPolicy::Bind(n) => Some(format!("bind:{}", host.numa_os_index(*n))),
        }
    }
}

/// How threads are placed in one configuration.
#[derive(Clone, Debug, PartialEq)]
pub enum Pinning {
    /// Not at all: the OS scheduler decides (the `os` baseline).
    Os,
    /// Thread k (the tracer's numbering) on logical PU `pus[k mod len]`.
    Pus(Vec<usize>),
    /// A random permutation of the PUs, drawn afresh for each run from this seed.
    Random(u64),
}

/// One configuration of a measurement.
#[derive(Clone, Debug)]
pub struct Configuration {
    pub name: String,
    pub pinning: Pinning,
    pub memory: MemoryPolicy,
    /// A home node per page, applied by migration as the program touches its pages.
    pub plan: Option<std::sync::Arc<Plan>>,
    /// What runs it beyond pinning and placement (autopin, the kernel's NUMA balancing).
    pub procedure: mechanism::Procedure,
    /// The sampled profile its plan came from (marathe).
    pub profile: Option<mechanism::Profile>,
    /// What the simulator decided on the recording, which this configuration replays (SAMMU,
    /// kMAF, Carrefour).
    pub replayed: Option<mechanism::Replayed>,
    /// Its decisions in the order they fired, applied at their times (then `plan` holds each
    /// page's last move, which the run's end is counted against).
    pub timeline: Option<std::sync::Arc<timeline::Timeline>>,
}

impl Configuration {
    /// A thread mapping and a memory policy, nothing more.
    pub fn fixed(name: &str, pinning: Pinning, memory: MemoryPolicy) -> Configuration {
        Configuration {
            name: name.into(),
            pinning,
            memory,
            plan: None,
            procedure: mechanism::Procedure::Fixed,
            profile: None,
            replayed: None,
            timeline: None,
        }
    }
}

/// The PUs a thread map gives on the host: an algorithm maps `sharing` when given, and a
/// matrix of as many silent threads as the host has PUs otherwise (the order-based
/// algorithms: compact, scatter, round-robin, identity). `os` is not a thread map: see
/// `Pinning::Os`.
pub fn pinning(map: &ThreadMap, host: &Machine, sharing: Option<&SharingMatrix>, seed: u64) -> Result<Pinning> {
    let pinning = map_threads(map, host, sharing, seed)?;
    let Pinning::Pus(pus) = &pinning else { return Ok(pinning) };
    let allowed = allowed_cpus()?;
    if let Some(&pu) = pus.iter().find(|&&p| !allowed.contains(&(host.pu_os_index(p) as usize))) {
        return Err(Error::new(
            ErrorKind::ThreadMap,
            format!(
                "PU {pu} (CPU {}) is outside the CPUs this process may use (a cpuset or taskset limits it to {}): \
                 the kernel would refuse it",
                host.pu_os_index(pu),
                list(&allowed)
            ),
        ));
    }
    Ok(pinning)
}

/// The PUs of a thread map on a machine, unchecked against this process's CPUs (for a
/// machine that is not this one: `vm`'s guest).
pub fn map_threads(map: &ThreadMap, host: &Machine, sharing: Option<&SharingMatrix>, seed: u64) -> Result<Pinning> {
    let pus = match map {
        // A real run's OS is the kernel itself: nothing pinned.
        ThreadMap::Os(_) => return Ok(Pinning::Os),
        ThreadMap::Identity => sharemap_core::ThreadPlacement::identity(host).pus().to_vec(),
        ThreadMap::Pus(pus) => pus.clone(),
        ThreadMap::Algorithm(name) if name.trim() == "random" && sharing.is_none() => return Ok(Pinning::Random(seed)),
        ThreadMap::Algorithm(name) => {
            let alg = sharemap_mapping::build(name, seed)?;
            let silent = SharingMatrix::new(host.pu_count());
            let matrix = sharing.unwrap_or(&silent);
            // More threads than PUs: each PU takes `per` threads, as if it had that many
            // hardware threads, so that threads sharing most share a PU.
            let per = matrix.threads().div_ceil(host.pu_count()).max(1);
            let slots = if per > 1 { oversubscribed(host, per)? } else { host.clone() };
            let costs = PairCosts::new(&slots, CostModel::Latency);
            let on_slots = alg
                .map(matrix, &slots, &costs)
                .map_err(|e| Error::new(ErrorKind::ThreadMap, format!("{name}: {e}")))?;
            on_slots.into_iter().map(|slot| slot / per).collect()
        }
    };
    if let Some(&bad) = pus.iter().find(|&&p| p >= host.pu_count()) {
        return Err(Error::new(
            ErrorKind::ThreadMap,
            format!("PU {bad} does not exist: the host has PUs 0-{} (logical indices)", host.pu_count() - 1),
        ));
    }
    Ok(Pinning::Pus(pus))
}

/// The host with `per` PUs in place of each of its PUs (logical PU p of the host is PUs
/// p*per .. p*per+per-1 of the result: PUs are numbered core by core).
fn oversubscribed(host: &Machine, per: usize) -> Result<Machine> {
    let synthetic = host.synthetic().ok_or_else(|| {
        Error::new(ErrorKind::ThreadMap, "more threads than PUs on an asymmetric host: give a mapping of PUs")
    })?;
    let (levels, last) = synthetic.rsplit_once(' ').unwrap_or(("", synthetic.as_str()));
    let pus: usize = last
        .strip_prefix("PU:")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Error::new(ErrorKind::ThreadMap, format!("unexpected synthetic topology '{synthetic}'")))?;
    Ok(Machine::from_spec(&format!("{levels} PU:{}", pus * per))?)
}

/// The CPUs the calling process may run on (its affinity mask).
fn allowed_cpus() -> Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data, valid zeroed; sched_getaffinity fills at most its size.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(Error::from(std::io::Error::last_os_error()));
        }
        set
    };
    // SAFETY: CPU_ISSET reads within the set for every index below its size in bits.
    Ok((0..8 * std::mem::size_of::<libc::cpu_set_t>()).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

fn list(v: &[usize]) -> String {
    v.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
}

/// The program to run, and the actor library that pins it.
#[derive(Clone, Debug)]
pub struct Runner {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// `libsharemap_pin.so`.
    pub library: PathBuf,
    pub host: Machine,
    /// Whether the program's output reaches the terminal (else it is discarded).
    pub show_output: bool,
    /// Address-space randomisation off (the addresses of a recording made the same way).
    pub no_aslr: bool,
    /// Print where each thread ran and where pages lay.
    pub observe: bool,
    /// Trace every run for the kernel's answers at its threads' exits (`RunOutcome::observed`):
    /// where threads ran, pages per node, counters. See `needs_tracing`.
    pub traced: bool,
    /// How often a plan's pages are checked and migrated.
    pub plan_interval: std::time::Duration,
    /// What is done about transparent huge pages (None: no plan, or none on the host).
    pub thp: Option<thp::ThpHandling>,
}

/// What one run did.
#[derive(Clone, Debug, Serialize)]
pub struct RunOutcome {
    pub seconds: f64,
    /// The program's exit code, or 128 + the signal that ended it.
    pub exit: i32,
    pub signal: Option<i32>,
    /// Threads the actor pinned (by their numbering), and those the kernel refused.
    pub pinned: Vec<(u32, usize)>,
    pub refused: Vec<(u32, usize, String)>,
    /// Whether the actor was loaded at all (a static program does not load it).
    pub loaded: bool,
    /// The memory policy the kernel refused, if it did.
    pub mempolicy_error: Option<String>,
    /// The kernel's answers at the program's end, when observed.
    pub observed: Option<Observed>,
}

impl Runner {
    /// Runs the program once in a configuration (`run` numbers the runs: a random mapping
    /// is drawn from the seed and that number). A configuration with a timeline spreads it
    /// over `scale` seconds, or over the time of one uncounted run under the scheduler's
    /// placement (`os`) first when no scale is given.
    pub fn run(&self, config: &Configuration, run: u64, scale: Option<f64>) -> Result<RunOutcome> {
        let scale = match (&config.timeline, scale) {
            (Some(_), None) => Some(self.timing_run()?),
            _ => scale,
        };
        if let mechanism::Procedure::NumaBalancing = config.procedure {
            // This process's ownership (a measurement holds it throughout), or its own.
            let owner = sysctl::NumaBalancingGuard::take()?;
            owner.set(true)?;
            let outcome = self.run_once(config, run, scale, self.show_output);
            owner.restore();
            return outcome;
        }
        self.run_once(config, run, scale, self.show_output)
    }

    /// The seconds of one run under the scheduler's placement, its output discarded: what a
    /// timeline is spread over when nothing else says how long the program runs.
    pub fn timing_run(&self) -> Result<f64> {
        let os = Configuration::fixed("os", Pinning::Os, MemoryPolicy::FirstTouch);
        let outcome = self.run_once(&os, 0, None, false)?;
        if outcome.exit != 0 {
            return Err(Error::new(
                ErrorKind::Program,
                format!("{} exited with status {} in the run that times it", self.program.display(), outcome.exit),
            ));
        }
        Ok(outcome.seconds)
    }

    fn run_once(&self, config: &Configuration, run: u64, scale: Option<f64>, show_output: bool) -> Result<RunOutcome> {
        let report = tempfile::NamedTempFile::new()?;
        // Removed on a signal too; and the program dies with us rather than run on orphaned.
        let _listed = sharemap_core::output::Listed::new(report.path());
        let mut cmd = std::process::Command::new(&self.program);
        {
            use std::os::unix::process::CommandExt;
            let parent = std::process::id() as i32;
            // SAFETY: between fork and exec only prctl, getppid and raise run.
            unsafe { cmd.pre_exec(move || sharemap_core::output::die_with_parent(parent)) };
        }
        cmd.args(&self.args);
        cmd.env("LD_PRELOAD", preload_value(&self.library)).env("SHAREMAP_PIN_REPORT", report.path());
        let pus = match &config.pinning {
            Pinning::Os => None,
            Pinning::Pus(pus) => Some(pus.clone()),
            Pinning::Random(seed) => Some(random_permutation(self.host.pu_count(), seed ^ run.wrapping_mul(0x9e37))),
        };
        if let Some(pus) = &pus {
            let cpus: Vec<usize> = pus.iter().map(|&p| self.host.pu_os_index(p) as usize).collect();
            cmd.env("SHAREMAP_PIN_CPUS", list(&cpus));
            // An OpenMP runtime sizes its team by the CPUs the process may use, which the
            // main thread's pinning at load shrinks to one: keep the count it would have seen.
            if std::env::var_os("OMP_NUM_THREADS").is_none() {
                cmd.env("OMP_NUM_THREADS", allowed_cpus()?.len().to_string());
            }
            // libomp binds each worker to the mask it found at start (the main thread's,
            // pinned), after the actor pinned it: its own affinity is turned off.
            cmd.env("KMP_AFFINITY", "disabled");
        }
        if let Some(policy) = config.memory.env(&self.host) {
            cmd.env("SHAREMAP_MEMPOLICY", policy);
        }
        if self.no_aslr {
            use std::os::unix::process::CommandExt;
            // SAFETY: between fork and exec only the personality system calls run.
            unsafe { cmd.pre_exec(sharemap_sources::disable_aslr) };
        }
        if self.thp.as_ref().is_some_and(|t| t.split()) {
            use std::os::unix::process::CommandExt;
            // SAFETY: between fork and exec only the prctl system call runs.
            unsafe { cmd.pre_exec(thp::disable_in_child) };
        }
        if !show_output {
            cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
        }
        let cannot =
            |e: std::io::Error| Error::new(ErrorKind::Program, format!("cannot run {}: {e}", self.program.display()));
        let start = Instant::now();
        // Traced when anything needs the kernel's answers at the threads' exits; then every
        // configuration of a measurement is (`traced` is the runner's), so they differ only
        // in their mapping. Tracing stops each thread as it starts and ends.
        let timeline = config.timeline.as_deref().zip(scale);
        let (status, observed) =
            if self.traced || config.plan.is_some() || timeline.is_some() {
                let counters = &counters::HARDWARE_COUNTERS;
                let regions = self.thp.as_ref().and_then(|t| t.regions());
                let plan = config.plan.as_deref();
                let schedule = timeline.map(|(t, scale)| t.at_scale(std::time::Duration::from_secs_f64(scale)));
                let out = observe::run_traced(&mut cmd, plan, schedule, self.plan_interval, regions, counters)
                    .map_err(|e| match e.kind() {
                        ErrorKind::Io => {
                            Error::new(ErrorKind::Program, format!("cannot run {}: {e}", self.program.display()))
                        }
                        _ => e,
                    })?;
                let mut observed = out.observed;
                if let (Some(reached), Some((t, scale))) = (observed.timeline.as_mut(), timeline) {
                    reached.scale_seconds = scale;
                    reached.remaps = t.remaps.len();
                    reached.moves = t.moves.len();
                }
                (out.status, Some(observed))
            } else {
                (cmd.status().map_err(cannot)?, None)
            };
        let seconds = start.elapsed().as_secs_f64();
        use std::os::unix::process::ExitStatusExt;
        let signal = status.signal();
        let exit = status.code().unwrap_or_else(|| 128 + signal.unwrap_or(0));
        let text = std::fs::read_to_string(report.path()).unwrap_or_default();
        let mut outcome = RunOutcome {
            seconds,
            exit,
            signal,
            pinned: Vec::new(),
            refused: Vec::new(),
            loaded: false,
            mempolicy_error: None,
            observed,
        };
        read_report(&text, &mut outcome);
        Ok(outcome)
    }
}

/// Reads the actor's report: the first process's lines only (a program the run's program
/// starts loads the actor too, and numbers its own threads).
fn read_report(text: &str, out: &mut RunOutcome) {
    let first_pid = text.split_whitespace().nth(1).map(str::to_string);
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.get(1).map(|p| p.to_string()) != first_pid {
            continue;
        }
        out.loaded = true;
        match w[..] {
            ["pid", _, "thread", k, "cpu", c, "ok"] => {
                if let (Ok(k), Ok(c)) = (k.parse(), c.parse()) {
                    out.pinned.push((k, c));
                }
            }
            ["pid", _, "thread", k, "cpu", c, "error", e] => {
                if let (Ok(k), Ok(c), Ok(e)) = (k.parse(), c.parse(), e.parse::<i32>()) {
                    out.refused.push((k, c, std::io::Error::from_raw_os_error(e).to_string()));
                }
            }
            ["pid", _, "mempolicy", "error", e] => {
                out.mempolicy_error =
                    Some(e.parse::<i32>().map_or(e.to_string(), |e| std::io::Error::from_raw_os_error(e).to_string()));
            }
            _ => {}
        }
    }
}

/// A seeded permutation of 0..n (splitmix64 drives a Fisher-Yates shuffle).
fn random_permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    };
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    v
}

/// One configuration's runs and their statistics.
#[derive(Clone, Debug, Serialize)]
pub struct ConfigurationResult {
    pub name: String,
    /// Wall-clock seconds of each run, in the order they ran.
    pub seconds: Vec<f64>,
    pub mean: f64,
    /// Half-width of the 95 % confidence interval of the mean (Student's t); None with
    /// fewer than two runs.
    pub ci95: Option<f64>,
    /// Mean over the first configuration's mean (the `os` baseline when measured).
    pub normalized: f64,
    /// Whether its mean differs from the first configuration's beyond the noise: their 95 %
    /// intervals do not overlap. None for the first itself, or with fewer than two runs.
    pub significant: Option<bool>,
    /// How its plan fared in its last run, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanOutcome>,
    /// How far its timeline got in its last run, when it replays one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<timeline::TimelineOutcome>,
    /// Mean LLC load misses and remote loads per 1000 instructions over its runs, where the
    /// host's PMU counts them.
    pub llc_mpki: Option<f64>,
    pub remote_pki: Option<f64>,
    /// Autopin's choices: how often each candidate was the fastest of its probation runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autopin: Option<AutopinChoices>,
}

/// What autopin chose over the rounds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AutopinChoices {
    /// Each candidate and the rounds it won.
    pub picks: Vec<(String, usize)>,
    /// Rounds won by the oracle's mapping.
    pub oracle: usize,
    /// Seconds spent in probation runs (each candidate once per round), which Autopin's
    /// time includes.
    pub probation_seconds: f64,
    /// Seconds of the runs it chose, alone (the rest of its time is probation).
    pub chosen_seconds: f64,
}

/// Whether runs must be traced: to print where things were, to apply a plan, or to count
/// with the PMU where the host has one (a VM without a virtual PMU has none).
pub fn needs_tracing(observe: bool, configs: &[Configuration]) -> bool {
    observe || configs.iter().any(|c| c.plan.is_some() || c.timeline.is_some()) || counters::available()
}

/// Why hardware counters were not counted in these outcomes (None when they were).
pub fn counters_unavailable(outcome: &RunOutcome) -> Option<String> {
    let Some(observed) = outcome.observed.as_ref() else {
        return Some(counters::why_unavailable().unwrap_or_else(|| "not counted".into()));
    };
    match &observed.counts {
        Some(c) if c.get(counters::INSTRUCTIONS.name).is_some() => None,
        _ => Some(observed.counters_refused.clone().unwrap_or_else(|| "no counts read".into())),
    }
}

/// The mean of a sample and the half-width of its 95 % confidence interval (Student's t
/// with n - 1 degrees of freedom; None for fewer than two values).
pub fn mean_ci95(sample: &[f64]) -> (f64, Option<f64>) {
    let n = sample.len() as f64;
    let mean = sample.iter().sum::<f64>() / n.max(1.0);
    if sample.len() < 2 {
        return (mean, None);
    }
    let var = sample.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, Some(t975(sample.len() - 1) * (var / n).sqrt()))
}

/// Student's t at 0.975 with `df` degrees of freedom (the half-width factor of a two-sided
/// 95 % interval): the usual table to 30, then the Cornish-Fisher expansion around the
/// normal quantile, within 1e-5 of the exact value from there on.
fn t975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139, 2.200985,
        2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963, 2.079614, 2.073873,
        2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
    ];
    if df == 0 {
        return f64::NAN;
    }
    match TABLE.get(df - 1) {
        Some(&t) => t,
        None => t975_expansion(df as f64),
    }
}

/// The Cornish-Fisher expansion of t(0.975) in 1/`v`, to the fourth order.
fn t975_expansion(v: f64) -> f64 {
    let z = 1.959_963_984_540_054_f64;
    let z2 = z * z;
    z + z * (z2 + 1.0) / (4.0 * v)
        + z * ((5.0 * z2 + 16.0) * z2 + 3.0) / (96.0 * v * v)
        + z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / (384.0 * v.powi(3))
        + z * ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / (92160.0 * v.powi(4))
}

/// A run that stopped a measurement: the program could not start, or it failed.
#[derive(Debug)]
pub struct FailedRun {
    pub configuration: String,
    /// Which round (0 = the first run of each configuration).
    pub round: usize,
    pub failure: Failure,
}

#[derive(Debug)]
pub enum Failure {
    CannotStart(Error),
    Exited(Box<RunOutcome>),
}

/// Runs every configuration `repeat` times, interleaved (A B C A B C ...), so that the
/// machine's slow and fast spells hit all alike. `progress` hears of each run as it ends;
/// a run whose program fails stops the measurement.
pub fn measure(
    runner: &Runner,
    configs: &[Configuration],
    repeat: usize,
    progress: &mut dyn FnMut(&Configuration, usize, &RunOutcome),
) -> std::result::Result<Vec<ConfigurationResult>, Box<FailedRun>> {
    // A measurement that switches the kernel's NUMA balancing owns it from start to end: a
    // second run is refused before anything runs, and never switches it under this one.
    let _owner = match configs.iter().find(|c| matches!(c.procedure, mechanism::Procedure::NumaBalancing)) {
        Some(c) => Some(sysctl::NumaBalancingGuard::take().map_err(|e| {
            Box::new(FailedRun { configuration: c.name.clone(), round: 0, failure: Failure::CannotStart(e) })
        })?),
        None => None,
    };
    let mut seconds = vec![Vec::with_capacity(repeat); configs.len()];
    let mut plans = vec![None; configs.len()];
    let mut timelines = vec![None; configs.len()];
    let mut counts: Vec<Vec<counters::Counts>> = vec![Vec::new(); configs.len()];
    let mut autopin: Vec<Option<AutopinChoices>> = vec![None; configs.len()];
    let mut timed = None;
    for round in 0..repeat {
        for (c, config) in configs.iter().enumerate() {
            let failed = |failure| Box::new(FailedRun { configuration: config.name.clone(), round, failure });
            let mut chosen = config;
            let winner;
            let mut round_probation = 0.0;
            if let mechanism::Procedure::Autopin { candidates, oracle } = &config.procedure {
                // Probation: each candidate once; the one kept (sharemap-decide's rule: the
                // most work per second, here the inverse of its time) runs for the round.
                let mut rates = Vec::with_capacity(candidates.len());
                let choices = autopin[c].get_or_insert_with(|| AutopinChoices {
                    picks: candidates.iter().map(|(n, _)| (n.clone(), 0)).collect(),
                    oracle: 0,
                    probation_seconds: 0.0,
                    chosen_seconds: 0.0,
                });
                for (name, pinning) in candidates {
                    let probe = Configuration::fixed(
                        &format!("{} ({name})", config.name),
                        pinning.clone(),
                        config.memory.clone(),
                    );
                    let outcome =
                        runner.run(&probe, round as u64, None).map_err(|e| failed(Failure::CannotStart(e)))?;
                    if outcome.exit != 0 {
                        return Err(failed(Failure::Exited(Box::new(outcome))));
                    }
                    choices.probation_seconds += outcome.seconds;
                    round_probation += outcome.seconds;
                    rates.push(1.0 / outcome.seconds.max(f64::MIN_POSITIVE));
                }
                let best = sharemap_decide::autopin::kept(&rates);
                choices.picks[best].1 += 1;
                if best == *oracle {
                    choices.oracle += 1;
                }
                winner = Configuration::fixed(&config.name, candidates[best].1.clone(), config.memory.clone());
                chosen = &winner;
            }
            // A timeline is spread over the baseline's mean time so far, or over one
            // uncounted run under the scheduler's placement when it is the baseline itself.
            let scale = match &chosen.timeline {
                None => None,
                Some(_) if c > 0 && !seconds[0].is_empty() => Some(mean_ci95(&seconds[0]).0),
                Some(_) => match timed {
                    Some(t) => Some(t),
                    None => {
                        let t = runner.timing_run().map_err(|e| failed(Failure::CannotStart(e)))?;
                        timed = Some(t);
                        timed
                    }
                },
            };
            let outcome = runner.run(chosen, round as u64, scale).map_err(|e| failed(Failure::CannotStart(e)))?;
            progress(config, round, &outcome);
            if outcome.exit != 0 {
                return Err(failed(Failure::Exited(Box::new(outcome))));
            }
            // Autopin's time includes what it spent choosing, as seed 000 and the simulator
            // count it: this round's probation runs, then the run it chose.
            if let Some(choices) = autopin[c].as_mut() {
                choices.chosen_seconds += outcome.seconds;
            }
            seconds[c].push(outcome.seconds + round_probation);
            if let Some(observed) = outcome.observed {
                plans[c] = observed.plan;
                timelines[c] = observed.timeline;
                counts[c].extend(observed.counts);
            }
        }
    }
    let base = seconds.first().map(|s| mean_ci95(s).0).unwrap_or(1.0);
    Ok(configs
        .iter()
        .zip(seconds)
        .zip(plans)
        .zip(timelines)
        .zip(counts)
        .zip(autopin)
        .map(|(((((config, seconds), plan), timeline), counts), autopin)| {
            let (mean, ci95) = mean_ci95(&seconds);
            // A ratio is reported only when every run has it.
            let mean_of = |f: fn(&counters::Counts) -> Option<f64>| {
                let v: Option<Vec<f64>> = counts.iter().map(f).collect();
                v.filter(|v| v.len() == seconds.len()).map(|v| v.iter().sum::<f64>() / v.len() as f64)
            };
            ConfigurationResult {
                name: config.name.clone(),
                llc_mpki: mean_of(counters::Counts::llc_mpki),
                remote_pki: mean_of(counters::Counts::remote_pki),
                seconds,
                mean,
                ci95,
                normalized: mean / base,
                significant: None,
                plan,
                timeline,
                autopin,
            }
        })
        .collect::<Vec<_>>())
    .map(|mut results| {
        mark_significance(&mut results);
        results
    })
}

/// Named samples of run times (seconds), compared as `measure` compares its configurations:
/// each one's mean and interval, over the first's mean, and whether the difference stands
/// out of the noise.
pub fn compare(named: Vec<(String, Vec<f64>)>) -> Vec<ConfigurationResult> {
    let base = named.first().map(|(_, s)| mean_ci95(s).0).unwrap_or(1.0);
    let mut results: Vec<ConfigurationResult> = named
        .into_iter()
        .map(|(name, seconds)| {
            let (mean, ci95) = mean_ci95(&seconds);
            ConfigurationResult {
                name,
                seconds,
                mean,
                ci95,
                normalized: mean / base,
                significant: None,
                plan: None,
                timeline: None,
                llc_mpki: None,
                remote_pki: None,
                autopin: None,
            }
        })
        .collect();
    mark_significance(&mut results);
    results
}

/// Sets each configuration's `significant` against the first's intervals.
fn mark_significance(results: &mut [ConfigurationResult]) {
    let Some((base, others)) = results.split_first_mut() else { return };
    let Some(b) = base.ci95 else { return };
    for r in others {
        r.significant = r.ci95.map(|c| (r.mean - base.mean).abs() > c + b);
    }
}

/// A program named without a slash is looked up in PATH, as a shell does.
pub fn resolve_program(program: &Path) -> Result<PathBuf> {
    if program.components().count() > 1 {
        let cannot =
            |why: &str| Err(Error::new(ErrorKind::Program, format!("cannot run {}: {why}", program.display())));
        return match std::fs::metadata(program) {
            Ok(m) if m.is_file() => Ok(program.to_path_buf()),
            Ok(m) if m.is_dir() => cannot("a directory, not a program"),
            Ok(_) => cannot("not a regular file"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => cannot("no such file"),
            Err(e) => cannot(&e.to_string()),
        };
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| Error::new(ErrorKind::Program, format!("cannot run {}: not found in PATH", program.display())))
}

/// Whether a file is an ELF executable without a program interpreter (statically linked).
/// Scripts and anything unreadable count as dynamic: the run will tell.
pub fn is_static(path: &Path) -> bool {
    let Ok(bytes) = std::fs::read(path) else { return false };
    let (Some(b"\x7fELF"), Some(2), Some(1)) = (bytes.get(..4), bytes.get(4), bytes.get(5)) else { return false };
    let u16_at = |o: usize| bytes.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u64_at = |o: usize| bytes.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize);
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38)) else { return false };
    const PT_INTERP: u32 = 3;
    !(0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        bytes.get(at..at + 4).is_some_and(|t| u32::from_le_bytes(t.try_into().expect("4 bytes")) == PT_INTERP)
    })
}

/// `LD_PRELOAD` with the actor first, before what the environment already preloads.
pub fn preload_value(library: &Path) -> OsString {
    let mut v = library.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        v.push(":");
        v.push(old);
    }
    v
}

/// Where sharemap's runtime pieces are: the libraries that `run`, `record` and `cc` put
/// into programs, and the sharemap binary a guest runs. The command line finds them beside
/// its own binary; another host (Python) says where they are.
#[derive(Clone, Debug)]
pub struct Tools {
    /// The directory holding `libsharemap_pin.so`, `libsharemap_rt.a` and the STM's
    /// libraries.
    pub dir: PathBuf,
    /// The `sharemap` binary, copied into a guest to run the program there.
    pub sharemap: Option<PathBuf>,
}

/// Where an installed sharemap keeps its libraries and headers, from its binary's directory
/// (`PREFIX/bin/sharemap`, `PREFIX/lib/sharemap/`: what scripts/install lays out).
pub const INSTALLED_LIBRARIES: &str = "../lib/sharemap";

/// The run actor's file name, the library every installation has.
const PIN_LIBRARY: &str = "libsharemap_pin.so";

impl Tools {
    /// The pieces of a `sharemap` binary: beside it, as `cargo build` leaves them, or in
    /// `../lib/sharemap` from it, as scripts/install puts them. When neither has them, the
    /// binary's own directory (and a missing library says where it was looked for).
    pub fn beside(sharemap: &Path) -> Tools {
        let bin = sharemap.parent().unwrap_or(Path::new("."));
        let installed = bin.join(INSTALLED_LIBRARIES);
        let dir = if !bin.join(PIN_LIBRARY).is_file() && installed.join(PIN_LIBRARY).is_file() {
            installed
        } else {
            bin.to_path_buf()
        };
        Tools { dir, sharemap: Some(sharemap.to_path_buf()) }
    }

    /// `sharemap run`'s actor, preloaded into the programs it starts.
    pub fn pin_library(&self) -> PathBuf {
        self.library(PIN_LIBRARY)
    }

    /// A library of the directory, by file name.
    pub fn library(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A library, or one line saying it is missing, where it was looked for and how to get it.
    pub fn existing(&self, name: &str) -> Result<PathBuf> {
        let path = self.library(name);
        if path.is_file() {
            return Ok(path);
        }
        let looked = match &self.sharemap {
            Some(exe) => {
                let bin = exe.parent().unwrap_or(Path::new("."));
                format!("{} and {}", bin.display(), bin.join(INSTALLED_LIBRARIES).display())
            }
            None => self.dir.display().to_string(),
        };
        Err(Error::new(
            ErrorKind::Program,
            format!(
                "{name} is missing (looked in {looked}): install sharemap with scripts/install, or run `cargo build --release` in its sources (`cargo install` and `cargo test` build the binary alone)"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a textbook sample: 1..5 has mean 3, s = 1.5811, t(0.975, 4) = 2.7764, so the
    /// half-width is 2.7764 x 1.5811 / sqrt(5) = 1.9632.
    #[test]
    fn confidence_interval_of_a_known_sample() {
        let (mean, ci) = mean_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(mean, 3.0);
        assert!((ci.unwrap() - 1.9632).abs() < 1e-4, "{ci:?}");
        // Two values: t(0.975, 1) = 12.706.
        let (_, ci) = mean_ci95(&[10.0, 12.0]);
        assert!((ci.unwrap() - 12.706 * 1.0).abs() < 1e-3, "{ci:?}");
        assert_eq!(mean_ci95(&[7.0]), (7.0, None));
    }

    /// A difference counts when the 95 % intervals are apart: samples 1..5 (mean 3, half-width
    /// 1.9632) against 10..14 (mean 12) differ, against 2..6 (mean 4) they overlap.
    #[test]
    fn differences_are_significant_only_beyond_the_intervals() {
        let result = |name: &str, seconds: Vec<f64>| {
            let (mean, ci95) = mean_ci95(&seconds);
            ConfigurationResult {
                name: name.into(),
                seconds,
                mean,
                ci95,
                normalized: 1.0,
                significant: None,
                plan: None,
                timeline: None,
                llc_mpki: None,
                remote_pki: None,
                autopin: None,
            }
        };
        let mut results = vec![
            result("os", vec![1.0, 2.0, 3.0, 4.0, 5.0]),
            result("far", vec![10.0, 11.0, 12.0, 13.0, 14.0]),
            result("near", vec![2.0, 3.0, 4.0, 5.0, 6.0]),
            result("once", vec![9.0]),
        ];
        mark_significance(&mut results);
        let marks: Vec<Option<bool>> = results.iter().map(|r| r.significant).collect();
        assert_eq!(marks, [None, Some(true), Some(false), None]);
    }

    /// The quantiles past the table, against published values of t(0.975): the expansion
    /// meets the table at 30 and the normal quantile far out.
    #[test]
    fn t_quantiles_beyond_the_table() {
        for (df, published) in [(30, 2.042272), (31, 2.039513), (40, 2.021075), (60, 2.000298), (120, 1.979930)] {
            let expansion = t975_expansion(df as f64);
            assert_eq!(t975(df), if df == 30 { 2.042272 } else { expansion });
            assert!((expansion - published).abs() < 1e-5, "df {df}: {expansion} against {published}");
        }
        assert!((t975(1_000_000) - 1.959966).abs() < 1e-5);
        assert!(t975(0).is_nan());
    }

    #[test]
    fn random_permutations_are_permutations_and_differ_by_seed() {
        let a = random_permutation(16, 1);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..16).collect::<Vec<_>>());
        assert_ne!(a, random_permutation(16, 2));
        assert_eq!(a, random_permutation(16, 1));
    }

    #[test]
    fn the_report_of_the_first_process_is_read() {
        let text = "pid 10 mempolicy error 1\npid 10 thread 0 cpu 1 ok\npid 10 thread 1 cpu 0 error 22\npid 11 thread 0 cpu 0 ok\n";
        let mut out = RunOutcome {
            seconds: 0.0,
            exit: 0,
            signal: None,
            pinned: vec![],
            refused: vec![],
            loaded: false,
            mempolicy_error: None,
            observed: None,
        };
        read_report(text, &mut out);
        assert!(out.loaded);
        assert_eq!(out.pinned, vec![(0, 1)]);
        assert_eq!(out.refused.len(), 1);
        assert_eq!((out.refused[0].0, out.refused[0].1), (1, 0));
        assert!(out.mempolicy_error.is_some());
    }

    /// Eight threads in four pairs that share, on a host of four PUs in two packages: each
    /// pair gets a PU of its own, so the mapping holds what the sharing says.
    #[test]
    fn more_threads_than_pus_share_pus_by_sharing() {
        let host = Machine::from_spec("pack:2 core:2 pu:1").unwrap();
        let mut m = SharingMatrix::new(8);
        for (a, b) in [(0, 5), (1, 6), (2, 7), (3, 4)] {
            m.add(a, b, 100.0);
        }
        let Pinning::Pus(pus) = map_threads(&ThreadMap::Algorithm("sharemap".into()), &host, Some(&m), 1).unwrap()
        else {
            panic!("PUs")
        };
        assert_eq!(pus.len(), 8);
        for (a, b) in [(0, 5), (1, 6), (2, 7), (3, 4)] {
            assert_eq!(pus[a], pus[b], "{pus:?}");
        }
        let mut used = pus.clone();
        used.sort();
        used.dedup();
        assert_eq!(used, vec![0, 1, 2, 3]);
    }

    #[test]
    fn data_placement_needs_several_nodes() {
        let policy = |text: &str, host: &Machine| match DataPlacement::parse(text, host) {
            Ok(DataPlacement::Policy(p)) => Ok(p),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        };
        let one = Machine::from_spec("pack:1 core:2 pu:1").unwrap();
        assert_eq!(policy("first-touch", &one).unwrap(), MemoryPolicy::FirstTouch);
        let e = policy("interleave", &one).unwrap_err();
        assert!(e.contains("needs a NUMA host"), "{e}");
        assert!(DataPlacement::parse("optimal:x.trace", &one).unwrap_err().to_string().contains("needs a NUMA host"));
        let two = Machine::from_spec("pack:2 numa:1 core:2 pu:1").unwrap();
        assert_eq!(policy("bind:1", &two).unwrap(), MemoryPolicy::Bind(1));
        assert!(policy("bind:2", &two).unwrap_err().contains("nodes 0-1"));
        assert!(policy("spread", &two).unwrap_err().contains("expected first-touch"));
        assert!(matches!(DataPlacement::parse("optimal:x.trace", &two), Ok(DataPlacement::Optimal(_))));
    }
}
