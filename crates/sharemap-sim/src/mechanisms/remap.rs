//! Online thread remapping as the mechanisms that detect sharing do it: the mapping-potential
//! gate first (is the sharing worth mapping at all?), then sharemap's default algorithm, and
//! a new mapping only when it is cheaper than the current one by the hysteresis.

use super::Context;
use super::MechanismError;
use crate::sim::Sim;
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;
use sharemap_mapping::potential::{potential, sharing_weight};
use sharemap_mapping::{CostModel, MappingAlgorithm, PairCosts, mapping_cost};

pub struct Remapper {
    machine: Machine,
    costs: PairCosts,
    algorithm: Box<dyn MappingAlgorithm>,
    gate: f64,
    hysteresis: f64,
}

impl Remapper {
    pub fn new(ctx: &Context, gate: f64, hysteresis: f64) -> Result<Remapper, MechanismError> {
        Ok(Remapper {
            machine: ctx.machine.clone(),
            costs: PairCosts::new(ctx.machine, CostModel::Latency),
            algorithm: sharemap_mapping::build("sharemap", ctx.seed).map_err(MechanismError::of)?,
            gate,
            hysteresis,
        })
    }

    /// Maps the threads anew from `matrix` (its sharing counted over `events` observations)
    /// when the gate and the hysteresis allow; moves the threads whose PU changes. Returns
    /// whether it remapped.
    pub fn consider(&mut self, matrix: &SharingMatrix, events: u64, sim: &mut Sim) -> bool {
        let n = sim.threads().min(matrix.threads());
        if n < 2 {
            return false;
        }
        // Only the threads that exist: a detector's matrix may have room for more.
        let mut m = SharingMatrix::new(n);
        for i in 0..n {
            for j in 0..i {
                m.add(i, j, matrix.get(i, j));
            }
        }
        if m.total() == 0.0 {
            return false;
        }
        let score = potential(&m, &self.machine, &self.costs) * sharing_weight(m.total(), events);
        if score < self.gate {
            return false;
        }
        let Ok(proposed) = self.algorithm.map(&m, &self.machine, &self.costs) else { return false };
        let current: Vec<usize> = (0..n).map(|t| sim.pu_of(t)).collect();
        let (now, new) = (mapping_cost(&m, &current, &self.costs), mapping_cost(&m, &proposed, &self.costs));
        if new >= now * (1.0 - self.hysteresis) {
            return false;
        }
        for (t, &pu) in proposed.iter().enumerate() {
            sim.move_thread(t, pu);
        }
        true
    }
}
