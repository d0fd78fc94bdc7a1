//! Autopin (Klug et al.; seed 000 runs it with the oracle's mapping and four random ones):
//! each candidate thread mapping runs for a probation period of simulated time; the one that
//! made the most accesses per simulated ns (the simulator's IPC) is kept for the rest.

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
        seed,
        candidates: Vec::new(),
        trying: 0,
        window_start_ns: 0.0,
        window_accesses: 0,
        rates: Vec::new(),
        done: false,
    }))
}

struct Autopin {
    k: usize,
    probation_ns: f64,
    seed: u64,
    candidates: Vec<Vec<usize>>,
    trying: usize,
    window_start_ns: f64,
    window_accesses: u64,
    /// Accesses per simulated ns of each candidate tried.
    rates: Vec<f64>,
    done: bool,
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
            let random =
                sharemap_mapping::build("random", self.seed.wrapping_add(i as u64)).map_err(MechanismError::of)?;
            self.candidates.push(random.map(&none, ctx.machine, &costs).map_err(MechanismError::of)?);
        }
        Ok(Start { pus: self.candidates[0].clone(), placement: FirstPlacement::FirstTouch, homes: Vec::new() })
    }

    fn online(&self) -> bool {
        true
    }

    fn after_access(&mut self, sim: &mut Sim, thread: usize, _addr: u64, _write: bool, _ns: f64) {
        if self.done {
            return;
        }
        self.window_accesses += 1;
        if sim.thread_clock(thread) < self.window_start_ns + self.probation_ns {
            return;
        }
        let now = sim.time_ns();
        if now < self.window_start_ns + self.probation_ns {
            return;
        }
        self.rates.push(self.window_accesses as f64 / (now - self.window_start_ns));
        self.trying += 1;
        let next = if self.trying < self.candidates.len() {
            self.trying
        } else {
            self.done = true;
            (0..self.rates.len()).max_by(|&a, &b| self.rates[a].total_cmp(&self.rates[b]).then(b.cmp(&a))).unwrap_or(0)
        };
        for (t, &pu) in self.candidates[next].iter().enumerate() {
            sim.move_thread(t, pu);
        }
        self.window_start_ns = sim.time_ns();
        self.window_accesses = 0;
    }
}

/// Its configuration (the run's state is left out).
impl std::fmt::Debug for Autopin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Autopin")
            .field("k", &self.k)
            .field("probation_ns", &self.probation_ns)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}
