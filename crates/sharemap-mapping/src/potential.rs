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
/// random cost needs no sampling: with n threads spread evenly over p PUs at random, a
/// thread pair shares a PU with probability (n/p − 1)/(n − 1) (none when n ≤ p), and
/// otherwise lands on a uniformly random pair of distinct PUs.
pub fn potential(m: &SharingMatrix, machine: &Machine, costs: &PairCosts) -> f64 {
    let p = costs.pus;
    if p < 2 || m.total() == 0.0 {
        return 0.0;
    }
    let mut sum = 0.0;
    let mut same = 0.0;
    for a in 0..p {
        same += costs.get(a, a);
        for b in 0..p {
            if a != b {
                sum += costs.get(a, b);
            }
        }
    }
    let n = m.threads() as f64;
    let together = if n > p as f64 { (n / p as f64 - 1.0) / (n - 1.0) } else { 0.0 };
    let pair_cost = together * same / p as f64 + (1.0 - together) * sum / (p * (p - 1)) as f64;
    let expected = m.total() * pair_cost;
    let grouped = mapping_cost(m, &crate::eager::eager(m, machine), costs);
    (1.0 - grouped / expected).max(0.0)
}

/// Sharing per access at which `sharing_weight` is one half: one access in a thousand that
/// communicates.
pub const HALF_WEIGHT_SHARING: f64 = 0.001;

/// How much of the program's memory traffic its sharing is, from 0 to 1: s / (s + h) for s
/// units of sharing per access and h = `HALF_WEIGHT_SHARING`. A mapping can only speed up the
/// accesses that communicate: a program whose sharing is 0.002 % of its accesses gains
/// nothing worth a migration, however well its few shared blocks would group. (For the oracle
/// a unit is one access to a block another thread used last; TLB and fault detectors count
/// fewer, so their weight is lower.)
pub fn sharing_weight(sharing: f64, accesses: u64) -> f64 {
    if accesses == 0 {
        return 0.0;
    }
    share_weight(sharing / accesses as f64)
}

/// `sharing_weight` of a share already estimated (sharing per access, or a detector's share
/// of its samples that share): s / (s + `HALF_WEIGHT_SHARING`).
pub fn share_weight(share: f64) -> f64 {
    if share <= 0.0 { 0.0 } else { share / (share + HALF_WEIGHT_SHARING) }
}

/// The gate for a trace: the structural gain of `potential` weighted by how much of the
/// `accesses` the sharing is (`sharing_weight`).
pub fn gate(m: &SharingMatrix, machine: &Machine, costs: &PairCosts, accesses: u64) -> f64 {
    potential(m, machine, costs) * sharing_weight(m.total(), accesses)
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

    /// More threads than PUs: uniform sharing still scores low (a random spread puts some
    /// pairs on one PU too), pairs that share score high.
    #[test]
    fn oversubscribed_uniform_sharing_scores_low() {
        let machine = Machine::from_spec("pack:1 core:2 pu:1").unwrap();
        let c = PairCosts::new(&machine, CostModel::Latency);
        let mut uniform = SharingMatrix::new(4);
        let mut pairs = SharingMatrix::new(4);
        for i in 0..4 {
            for j in i + 1..4 {
                uniform.add(i, j, 10.0);
            }
        }
        pairs.add(0, 1, 100.0);
        pairs.add(2, 3, 100.0);
        let (u, q) = (potential(&uniform, &machine, &c), potential(&pairs, &machine, &c));
        assert!(u < 0.01, "uniform {u}");
        assert!(q > 0.5, "pairs {q}");
    }

    /// The same neighbour structure, as a tiny or a large part of the accesses.
    #[test]
    fn the_gate_weighs_sharing_against_the_accesses() {
        let machine = Machine::from_spec("pack:4 numa:1 core:4 pu:1").unwrap();
        let c = PairCosts::new(&machine, CostModel::Latency);
        let mut chain = SharingMatrix::new(16);
        for i in 0..15 {
            chain.add(i, i + 1, 100.0);
        }
        let structural = potential(&chain, &machine, &c);
        // 1,500 units of sharing in 75 M accesses: 0.002 %.
        let rare = gate(&chain, &machine, &c, 75_000_000);
        assert!(rare < DEFAULT_THRESHOLD && rare > 0.0, "rare sharing {rare}");
        assert!((rare - structural * 0.02 / 1.02).abs() < 1e-9);
        // The same sharing in 100 k accesses (1.5 %): nearly the whole structural gain.
        let common = gate(&chain, &machine, &c, 100_000);
        assert!(common > 0.9 * structural && common >= DEFAULT_THRESHOLD, "common sharing {common}");
        assert_eq!(sharing_weight(10.0, 0), 0.0);
        assert_eq!(sharing_weight(1.0, 1000), 0.5);
    }
}
