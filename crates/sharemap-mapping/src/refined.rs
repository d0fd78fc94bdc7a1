//! sharemap's default mapping: the cheapest of the bisection, the grouping and the
//! order-based mappings, improved by pairwise swaps that lower the cost under the machine's
//! per-level costs (which the bisection and the grouping ignore). With no more threads than
//! cores, no two threads share a core: SMT siblings share the core's caches, TLB and
//! pipeline, which the per-level costs do not see (a pair on one core costs least there),
//! and Linux too fills idle cores first. Given the data the threads use, it first spreads them
//! over as many last-level caches as that data needs, then groups them within those
//! (`capacity`): the pair costs alone would pack them into as few as possible.

use crate::Demand;
use crate::algorithm::{MappingAlgorithm, MappingError};
use crate::capacity::{self, Spread, Units};
use crate::cost::PairCosts;
use crate::cost::mapping_cost;
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;

pub struct Refined;

impl MappingAlgorithm for Refined {
    fn spec(&self) -> String {
        "sharemap".into()
    }

    fn map(&self, m: &SharingMatrix, machine: &Machine, costs: &PairCosts) -> Result<Vec<usize>, MappingError> {
        Ok(self.map_with(m, machine, costs, None)?.0)
    }

    fn map_with(
        &self,
        m: &SharingMatrix,
        machine: &Machine,
        costs: &PairCosts,
        demand: Option<&Demand>,
    ) -> Result<(Vec<usize>, Option<Spread>), MappingError> {
        // How many last-level caches the data needs, with fewer threads than cores (with
        // more, every cache has threads anyway).
        let n = m.threads();
        let spread = match (demand, Units::of(machine)) {
            (Some(d), Some(units)) if n < units.cores.iter().sum::<usize>() => {
                let s = capacity::spread(d, &units, n);
                Some((s, units))
            }
            _ => None,
        };
        // Several starting points, computed in parallel; the cheapest is improved by swaps.
        // So the result is never worse than any of them.
        use rayon::prelude::*;
        type Start = fn(&SharingMatrix, &Machine) -> Vec<usize>;
        let mut starts: Vec<Start> = vec![crate::bisect::bisection, crate::eager::eager];
        starts.extend([crate::orders::compact as Start, crate::orders::round_robin, crate::orders::scatter]);
        // Beyond 256 threads the grouping is left out: it never beat the bisection on the
        // synthetic matrices there, and it would take a core from the bisection's halves.
        if m.threads() > 256 {
            starts.remove(1);
        }
        let candidates: Vec<(f64, Vec<usize>)> = starts
            .par_iter()
            .map(|start| {
                let mut candidate = start(m, machine);
                one_per_core(&mut candidate, machine, costs);
                if let Some((s, units)) = &spread {
                    candidate = capacity::balance(&candidate, units, s.units, machine.pu_count());
                }
                (mapping_cost(m, &candidate, costs), candidate)
            })
            .collect();
        // The first of the cheapest, so that ties resolve the same way on every run.
        let mut chosen =
            candidates.into_iter().reduce(|best, c| if c.0 < best.0 { c } else { best }).expect("at least one start").1;
        // Swaps keep the set of PUs in use: still one thread per core, and as many threads
        // under each cache.
        refine(m, &mut chosen, costs);
        Ok((chosen, spread.map(|(s, _)| s)))
    }
}

/// While two threads share a core and a core is idle, the later thread moves to the idle
/// core's first PU nearest its old one (same cache first). Only with threads <= cores.
pub(crate) fn one_per_core(map: &mut [usize], machine: &Machine, costs: &PairCosts) {
    let core_of = machine.core_of_pu();
    let cores = core_of.iter().max().map_or(0, |&c| c + 1);
    if map.len() > cores || cores == machine.pu_count() {
        return;
    }
    let mut used = vec![0usize; cores];
    for &pu in map.iter() {
        used[core_of[pu]] += 1;
    }
    // The first PU of each core, in logical order.
    let mut first = vec![usize::MAX; cores];
    for (pu, &c) in core_of.iter().enumerate() {
        if first[c] == usize::MAX {
            first[c] = pu;
        }
    }
    for t in 0..map.len() {
        let c = core_of[map[t]];
        if used[c] < 2 {
            continue;
        }
        let from = map[t];
        let Some(idle) = (0..cores)
            .filter(|&k| used[k] == 0)
            .min_by(|&a, &b| costs.get(from, first[a]).total_cmp(&costs.get(from, first[b])).then(a.cmp(&b)))
        else {
            return;
        };
        used[c] -= 1;
        used[idle] += 1;
        map[t] = first[idle];
    }
}

/// Pairwise swaps of threads' PUs while one lowers the cost, within a work budget. Beyond
/// 256 threads a single sweep over the pairs would exceed the budget 30-fold, and a partial
/// sweep finds next to nothing: it is skipped.
pub(crate) fn refine(m: &SharingMatrix, map: &mut [usize], c: &PairCosts) {
    let n = map.len();
    if n > 256 {
        return;
    }
    // About 1M cost terms: a few milliseconds, whatever the size.
    let budget = 1_000_000usize;
    let mut work = 0usize;
    // Cost of thread t at PU q against all others.
    let cost_at = |map: &[usize], t: usize, q: usize, skip: usize| -> f64 {
        (0..n).filter(|&u| u != t && u != skip).map(|u| m.get(t, u) * c.get(q, map[u])).sum()
    };
    loop {
        let mut improved = false;
        for a in 0..n {
            for b in a + 1..n {
                if map[a] == map[b] {
                    continue;
                }
                work += 4 * n;
                if work > budget {
                    return;
                }
                let before = cost_at(map, a, map[a], b) + cost_at(map, b, map[b], a);
                let after = cost_at(map, a, map[b], b) + cost_at(map, b, map[a], a);
                if after + 1e-9 < before {
                    map.swap(a, b);
                    improved = true;
                }
            }
        }
        if !improved {
            return;
        }
    }
}
