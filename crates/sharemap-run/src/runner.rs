//! The runner: the program started once in a configuration, with the preloaded actor
//! pinning its threads and setting its memory policy, and what the run did.

use crate::config::{Configuration, MemoryPolicy, Pinning, allowed_cpus};
use crate::observe::{self, Observed};
use crate::program::preload_value;
use crate::{counters, mechanism, sysctl, thp};
use serde::Serialize;
use sharemap::{Error, ErrorKind, Result};
use sharemap_machine::Machine;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Instant;

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
    /// Threads pinned to a set of CPUs each (more threads than PUs: their node's).
    pub pinned_sets: Vec<(u32, Vec<usize>)>,
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
            Pinning::Pus(pus) | Pinning::Nodes(pus) => Some(pus.clone()),
            Pinning::Random(seed) => Some(random_permutation(self.host.pu_count(), seed ^ run.wrapping_mul(0x9e37))),
        };
        if let Some(pus) = &pus {
            let by_node = matches!(config.pinning, Pinning::Nodes(_));
            cmd.env("SHAREMAP_PIN_CPUS", pin_list(&self.host, pus, by_node));
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
            pinned_sets: Vec::new(),
            refused: Vec::new(),
            loaded: false,
            mempolicy_error: None,
            observed,
        };
        read_report(&text, &mut outcome);
        Ok(outcome)
    }
}

/// `SHAREMAP_PIN_CPUS` for threads on `pus`: each on its PU's CPU; or, `by_node`, each on
/// the set of its PU's NUMA node, within which the scheduler balances them. Pinned one per
/// PU, threads sharing a CPU take turns on it while another idles (8 OpenMP threads on 2
/// PUs ran NPB MG 1.8x slower than floating); on its node's set a thread stays by its memory.
pub(crate) fn pin_list(host: &Machine, pus: &[usize], by_node: bool) -> String {
    let cpu = |p: usize| host.pu_os_index(p).to_string();
    if !by_node {
        return pus.iter().map(|&p| cpu(p)).collect::<Vec<_>>().join(",");
    }
    let sets: Vec<String> = (0..host.numa_count())
        .map(|n| (0..host.pu_count()).filter(|&p| host.pu_numa[p] == n).map(cpu).collect::<Vec<_>>().join("+"))
        .collect();
    pus.iter().map(|&p| sets[host.pu_numa[p]].clone()).collect::<Vec<_>>().join(",")
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
            ["pid", _, "thread", k, "cpus", set, "ok"] => {
                let cpus: Option<Vec<usize>> = set.split('+').map(|c| c.parse().ok()).collect();
                if let (Ok(k), Some(cpus)) = (k.parse(), cpus) {
                    out.pinned_sets.push((k, cpus));
                }
            }
            ["pid", _, "thread", k, "cpus", set, "error", e] => {
                let first = set.split('+').next().and_then(|c| c.parse().ok());
                if let (Ok(k), Some(c), Ok(e)) = (k.parse(), first, e.parse::<i32>()) {
                    out.refused.push((k, c, std::io::Error::from_raw_os_error(e).to_string()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use sharemap::{SharingMatrix, ThreadMap};

    #[test]
    fn random_permutations_are_permutations_and_differ_by_seed() {
        let a = random_permutation(16, 1);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..16).collect::<Vec<_>>());
        assert_ne!(a, random_permutation(16, 2));
        assert_eq!(a, random_permutation(16, 1));
    }

    /// One CPU a thread while the host has a PU for each; past that, each thread its PU's
    /// node's CPUs, which the report reads back as sets.
    #[test]
    fn more_threads_than_pus_are_pinned_to_their_nodes_cpus() {
        let host = Machine::from_spec("numa:2 core:2 pu:1").unwrap();
        assert_eq!(pin_list(&host, &[3, 0, 2], false), "3,0,2");
        assert_eq!(pin_list(&host, &[0, 0, 1, 1, 2, 2, 3, 3], false), "0,0,1,1,2,2,3,3");
        assert_eq!(pin_list(&host, &[0, 0, 1, 1, 2, 2, 3, 3], true), "0+1,0+1,0+1,0+1,2+3,2+3,2+3,2+3");
        // An algorithm's mapping of more threads than PUs is pinned by node; a list of PUs
        // is pinned as it says.
        let mut m = SharingMatrix::new(8);
        m.add(0, 1, 5.0);
        let by_algorithm = crate::config::map_threads(&ThreadMap::Algorithm("compact".into()), &host, Some(&m), 1);
        assert!(matches!(by_algorithm.unwrap(), Pinning::Nodes(p) if p.len() == 8));
        let listed = crate::config::map_threads(&ThreadMap::Pus(vec![0, 1, 2, 3, 0]), &host, None, 1);
        assert!(matches!(listed.unwrap(), Pinning::Pus(_)));
        let mut out = RunOutcome {
            seconds: 0.0,
            exit: 0,
            signal: None,
            loaded: false,
            pinned: vec![],
            pinned_sets: vec![],
            refused: vec![],
            mempolicy_error: None,
            observed: None,
        };
        read_report("pid 7 thread 0 cpus 0+1 ok\npid 7 thread 1 cpus 2+3 error 22\n", &mut out);
        assert_eq!(out.pinned_sets, vec![(0, vec![0, 1])]);
        assert_eq!(out.refused.len(), 1);
        assert!(out.pinned.is_empty());
    }

    #[test]
    fn the_report_of_the_first_process_is_read() {
        let text = "pid 10 mempolicy error 1\npid 10 thread 0 cpu 1 ok\npid 10 thread 1 cpu 0 error 22\npid 11 thread 0 cpu 0 ok\n";
        let mut out = RunOutcome {
            seconds: 0.0,
            exit: 0,
            signal: None,
            pinned: vec![],
            pinned_sets: vec![],
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
}
