//! Autopin (sharemap-decide's `autopin`: its candidates and the rule that keeps one) on the
//! simulator's clock: each candidate thread mapping runs for a warm-up period, then a
//! probation period of simulated time; the one that made the most accesses per simulated
//! ns (the simulator's IPC) during its probation is kept for the rest. Without the warm-up the first candidate
//! is measured over the program's cold start and each later one over the caches it left
//! cold by moving: the comparison then favours whichever ran last.

use super::fixed::oracle_mapping;
use super::{Context, Mechanism, MechanismError, Start};
use crate::sim::{FirstPlacement, Sim};
use sharemap_core::Params;
use sharemap_core::SharingMatrix;
use sharemap_core::spec::SpecError;
use sharemap_mapping::{CostModel, PairCosts};

pub fn build(p: &Params, seed: u64) -> Result<Box<dyn Mechanism>, SpecError> {
    Ok(Box::new(Autopin {
        k: p.integer("k") as usize,
        probation_ns: p.number("probation-ms") * 1e6,
        warmup_ns: p.number("warmup-ms") * 1e6,
        seed,
        candidates: Vec::new(),
        trying: 0,
        window_start_ns: 0.0,
        window_accesses: 0,
        rates: Vec::new(),
        done: false,
        trials_ns: 0.0,
        kept: 0,
    }))
}

struct Autopin {
    k: usize,
    probation_ns: f64,
    warmup_ns: f64,
    seed: u64,
    candidates: Vec<Vec<usize>>,
    trying: usize,
    window_start_ns: f64,
    window_accesses: u64,
    /// Accesses per simulated ns of each candidate tried.
    rates: Vec<f64>,
    done: bool,
    /// When the trials ended (the best candidate chosen), and which one was kept.
    trials_ns: f64,
    kept: usize,
}

impl Mechanism for Autopin {
    fn needs_profile(&self) -> bool {
        true
    }

    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError> {
        let costs = PairCosts::new(ctx.machine, CostModel::Latency);
        let none = SharingMatrix::new(ctx.threads.max(1));
        self.candidates = vec![oracle_mapping(ctx)?];
        for i in 1..self.k {
            let seed = sharemap_decide::autopin::random_seed(self.seed, i);
            let random = sharemap_mapping::build("random", seed).map_err(MechanismError::of)?;
            self.candidates.push(random.map(&none, ctx.machine, &costs).map_err(MechanismError::of)?);
        }
        Ok(Start { pus: self.candidates[0].clone(), placement: FirstPlacement::FirstTouch, homes: Vec::new() })
    }

    fn online(&self) -> bool {
        true
    }

    fn candidates(&self) -> Vec<Vec<usize>> {
        self.candidates.clone()
    }

    /// Autopin pays for its trials (seed 000 section 4.3: its gain is lower because it
    /// evaluates other mappings); on a run not much longer than k probations they are most
    /// of it, which the figures must say.
    fn note(&self, time_ns: f64) -> Option<String> {
        if self.candidates.len() < 2 {
            return None;
        }
        let share = self.trial_share(time_ns);
        // How far the oracle's candidate (the first) ran ahead of the best other one.
        let lead = match (self.rates.first(), self.rates.iter().skip(1).copied().reduce(f64::max)) {
            (Some(&oracle), Some(other)) if other > 0.0 => {
                format!("; the oracle's ran {:+.1} % against the best other", 100.0 * (oracle / other - 1.0))
            }
            _ => String::new(),
        };
        Some(if self.done {
            format!(
                "{:.0} % of the run ({:.3} of {:.3} ms) went to trying {} mappings for {} + {} ms each, then it kept {}{lead}{}",
                100.0 * share,
                self.trials_ns / 1e6,
                time_ns / 1e6,
                self.candidates.len(),
                self.warmup_ns / 1e6,
                self.probation_ns / 1e6,
                if self.kept == 0 { "the oracle's".to_string() } else { format!("random mapping {}", self.kept) },
                if share >= 0.5 { "; on a run this short the trials dominate (a run of seconds amortises them)" } else { "" }
            )
        } else {
            format!(
                "still trying mappings when the run ended ({:.3} ms, shorter than {} x {} ms of trials): it never ran its choice",
                time_ns / 1e6,
                self.candidates.len(),
                (self.warmup_ns + self.probation_ns) / 1e6
            )
        })
        .filter(|_| share >= 0.05)
    }

    fn after_access(&mut self, sim: &mut Sim, thread: usize, _addr: u64, _write: bool, _ns: f64) {
        if self.done {
            return;
        }
        let measuring_from = self.window_start_ns + self.warmup_ns;
        if sim.thread_clock(thread) >= measuring_from {
            self.window_accesses += 1;
        }
        let end = measuring_from + self.probation_ns;
        if sim.thread_clock(thread) < end {
            return;
        }
        let now = sim.time_ns();
        if now < end {
            return;
        }
        self.rates.push(self.window_accesses as f64 / (now - measuring_from));
        self.trying += 1;
        let next = if self.trying < self.candidates.len() {
            self.trying
        } else {
            self.done = true;
            self.trials_ns = sim.time_ns();
            self.kept = sharemap_decide::autopin::kept(&self.rates);
            self.kept
        };
        for (t, &pu) in self.candidates[next].iter().enumerate() {
            sim.move_thread(t, pu);
        }
        self.window_start_ns = sim.time_ns();
        self.window_accesses = 0;
    }
}

impl Autopin {
    /// The share of a run of `time_ns` its trials took.
    fn trial_share(&self, time_ns: f64) -> f64 {
        if self.done { self.trials_ns / time_ns.max(1.0) } else { 1.0 }
    }
}

/// Its configuration (the run's state is left out).
impl std::fmt::Debug for Autopin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Autopin")
            .field("k", &self.k)
            .field("probation_ns", &self.probation_ns)
            .field("warmup_ns", &self.warmup_ns)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}
