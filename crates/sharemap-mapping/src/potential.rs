//! The mapping-potential gate: a cheap score of how much a sharing-aware mapping can gain
//! over a random one, so online use can skip migrations that cannot pay (uniform, CG-like
//! sharing scores low; neighbour sharing high) — the weak spot seed 000 reports on CG and
//! the reason for seed 002's enable heuristic.

use crate::cost::{PairCosts, mapping_cost};
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;

/// Scores at or above this make mapping worth it.
pub const DEFAULT_THRESHOLD: f64 = 0.1;

/// 1 − (cost of the EagerMap-like grouping) / (expected cost of a random mapping): 0 when
/// the grouping gains nothing, towards 1 when it removes nearly all the cost. The expected
/// random cost needs no sampling: each thread pair lands on a uniformly random pair of
/// distinct PUs, so it is the total sharing times the mean cost over PU pairs.
pub fn potential(m: &SharingMatrix, machine: &Machine, costs: &PairCosts) -> f64 {
    let p = costs.pus;
    if p < 2 || m.total() == 0.0 {
        return 0.0;
    }
    let mut sum = 0.0;
    for a in 0..p {
        for b in 0..p {
            if a != b {
                sum += costs.get(a, b);
            }
        }
    }
    let expected = m.total() * sum / (p * (p - 1)) as f64;
    let grouped = mapping_cost(m, &crate::eager::eager(m, machine), costs);
    (1.0 - grouped / expected).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::CostModel;

    #[test]
    fn uniform_sharing_scores_low_and_neighbours_high() {
        let machine = Machine::from_spec("pack:4 numa:1 core:4 pu:1").unwrap();
        let c = PairCosts::new(&machine, CostModel::Latency);
        let mut uniform = SharingMatrix::new(16);
        let mut chain = SharingMatrix::new(16);
        for i in 0..16 {
            for j in i + 1..16 {
                uniform.add(i, j, 10.0);
            }
            if i + 1 < 16 {
                chain.add(i, i + 1, 100.0);
            }
        }
        let (u, n) = (potential(&uniform, &machine, &c), potential(&chain, &machine, &c));
        assert!(u < DEFAULT_THRESHOLD, "uniform {u}");
        // Chains keep 12 of 15 links inside a package: 1 - 1464/2256 = 0.35.
        assert!((n - 0.351).abs() < 0.01, "neighbour {n}");
        assert_eq!(potential(&SharingMatrix::new(16), &machine, &c), 0.0);
    }
}
