//! Online thread remapping as the mechanisms that detect sharing do it: the mapping-potential
//! gate first (is the sharing worth mapping at all?), then sharemap's default algorithm (which
//! spreads the threads over as many last-level caches as the process's resident pages need),
//! and
//! a new mapping only when it is cheaper than the current one by the hysteresis. Of the
//! mappings that cost what the algorithm's does, the one closest to the current placement is
//! taken (packages, cores and PUs relabelled), so threads leave their cached and
//! first-touched data only where the gain needs it.
//!
//! Moving has a price the mapping cost does not see: each moved thread's migration, and the
//! pages it leaves on its old node (a share of the homed pages as large as the share of
//! threads changing node), each to be moved back to it or read remotely. A remap is made
//! only once the time the current mapping has lost since the last decision reaches that
//! price (rent or buy, as seed 004's policies weigh a page move): the loss is estimated as
//! the threads' elapsed time x the share of accesses that share x the relative cost gain.
//! A program that shares little (EP-like) therefore never remaps, and a short run never
//! pays for a remap it could not recoup.
//!
//! The share is the detector's own estimate, in its own units: a matrix counts events
//! (SAMMU's statistics updates, kMAF's faults), not accesses, so its total over the accesses
//! says nothing of how much of the run shares. SAMMU gives the share of its updates that
//! found another thread in the page's sharers vector, kMAF the share of its faults on a page
//! another thread faulted on in the same window.

use super::Context;
use super::MechanismError;
use crate::sim::Sim;
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;
use sharemap_mapping::capacity::Units;
use sharemap_mapping::potential::{potential, share_weight};
use sharemap_mapping::relabel::closest_equivalent;
use sharemap_mapping::{CostModel, Demand, MappingAlgorithm, PairCosts, mapping_cost};

pub struct Remapper {
    machine: Machine,
    costs: PairCosts,
    algorithm: Box<dyn MappingAlgorithm>,
    gate: f64,
    hysteresis: f64,
    /// Simulated time of the last decision that remapped (or of the start).
    since_ns: f64,
    /// The machine's last-level caches, when it has several.
    units: Option<Units>,
}

/// How many last-level caches hold some thread of `map`.
fn units_used(units: &Units, map: &[usize]) -> usize {
    let of = units.unit_of_pu(map.iter().max().map_or(0, |&p| p + 1).max(units.pus.iter().flatten().count()));
    let mut seen: Vec<usize> = map.iter().map(|&p| of[p]).collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

impl Remapper {
    pub fn new(ctx: &Context, gate: f64, hysteresis: f64) -> Result<Remapper, MechanismError> {
        Ok(Remapper {
            machine: ctx.machine.clone(),
            costs: PairCosts::new(ctx.machine, CostModel::Latency),
            algorithm: sharemap_mapping::build("sharemap", ctx.seed).map_err(MechanismError::of)?,
            gate,
            hysteresis,
            since_ns: 0.0,
            units: Units::of(ctx.machine),
        })
    }

    /// Maps the threads anew from `matrix` when the gate, the hysteresis and the price of
    /// moving allow; `share` is the detector's estimate of the share of accesses that go to
    /// shared data (0 to 1). Moves the threads whose PU changes. Returns whether it remapped.
    pub fn consider(&mut self, matrix: &SharingMatrix, share: f64, sim: &mut Sim) -> bool {
        let share = if share.is_finite() { share.clamp(0.0, 1.0) } else { 0.0 };
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
        let score = potential(&m, &self.machine, &self.costs) * share_weight(share);
        if score < self.gate {
            return false;
        }
        // What the OS knows of the data: the pages resident so far, the process's alone.
        let demand = Demand::uniform(n, sim.homed_pages() as u64 * (1u64 << sim.page_shift()));
        let Ok((proposed, _)) = self.algorithm.map_with(&m, &self.machine, &self.costs, Some(&demand)) else {
            return false;
        };
        let current: Vec<usize> = (0..n).map(|t| sim.pu_of(t)).collect();
        let proposed = match closest_equivalent(&self.machine, &current, &proposed) {
            // Relabelling keeps every pair's shared level; NUMA distances may still differ.
            Some(r)
                if mapping_cost(&m, &r, &self.costs) <= mapping_cost(&m, &proposed, &self.costs) * (1.0 + 1e-12) =>
            {
                r
            }
            _ => proposed,
        };
        let (now, new) = (mapping_cost(&m, &current, &self.costs), mapping_cost(&m, &proposed, &self.costs));
        // A mapping over more last-level caches than the current one is what the resident
        // data now needs (the caches the threads share would overflow): a gain the pair
        // costs cannot see, taken whatever they say. It happens at most once per cache.
        let spreads = self.units.as_ref().is_some_and(|u| units_used(u, &proposed) > units_used(u, &current));
        if !spreads && new >= now * (1.0 - self.hysteresis) {
            return false;
        }
        // Otherwise the price of moving against what staying has lost since the last decision.
        let model = sim.model();
        let node = |pu: usize| model.pu_node[pu];
        let leaving = (0..n).filter(|&t| node(proposed[t]) != node(current[t])).count();
        let moving = (0..n).filter(|&t| proposed[t] != current[t]).count();
        let left_behind = sim.homed_pages() as f64 * leaving as f64 / n as f64;
        let price = moving as f64 * model.params.thread_migration_ns + left_behind * sim.page_move_ns();
        let lost = (sim.time_ns() - self.since_ns) * n as f64 * share * (1.0 - new / now);
        if !spreads && lost < price {
            return false;
        }
        self.since_ns = sim.time_ns();
        for (t, &pu) in proposed.iter().enumerate() {
            sim.move_thread(t, pu);
        }
        true
    }
}
