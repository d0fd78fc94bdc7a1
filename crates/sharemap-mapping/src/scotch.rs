//! Export for Scotch: the sharing matrix as a weighted graph (.grf) and the machine as a
//! `tleaf` target architecture (.tgt), so `scotch_gmap comm.grf machine.tgt out.map` maps
//! the same problem.

use crate::cost::{CostModel, PairCosts};
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;
use std::fmt::Write as _;

/// Scotch graph format, version 0: base 0, edge weights only (flags 010). Weights are the
/// sharing amounts rounded to integers (at least 1 for any sharing).
pub fn graph(m: &SharingMatrix) -> String {
    let n = m.threads();
    let weight = |i: usize, j: usize| {
        let v = m.get(i, j);
        if v > 0.0 { (v.round() as u64).max(1) } else { 0 }
    };
    let arcs: usize = (0..n).map(|i| (0..n).filter(|&j| j != i && weight(i, j) > 0).count()).sum();
    let mut out = format!("0\n{n}\t{arcs}\n0\t010\n");
    for i in 0..n {
        let edges: Vec<(usize, u64)> =
            (0..n).filter(|&j| j != i).map(|j| (j, weight(i, j))).filter(|e| e.1 > 0).collect();
        let _ = write!(out, "{}", edges.len());
        for (j, w) in edges {
            let _ = write!(out, "\t{w} {j}");
        }
        out.push('\n');
    }
    out
}

/// A `tleaf` target: the levels with more than one child, from the top, each with the cost
/// of communicating across it (from `model`, rounded, at least 1).
pub fn tleaf(machine: &Machine, model: CostModel) -> String {
    let costs = PairCosts::new(machine, model);
    // Each level's arity, and the cost between the first PU and the first PU of its next
    // sibling at that level.
    let mut parts = Vec::new();
    let mut span = machine.pu_count();
    let mut prev = 1usize;
    for level in &machine.levels {
        let count = level.objs.len();
        let arity = count / prev.max(1);
        prev = count;
        if arity <= 1 {
            continue;
        }
        let child_span = span / arity;
        let cost = costs.get(0, child_span).round().max(1.0) as u64;
        parts.push(format!("{arity} {cost}"));
        span = child_span;
    }
    if parts.is_empty() {
        parts.push("1 1".into());
    }
    format!("tleaf\n{}\t{}\n", parts.len(), parts.join("\t"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_lists_weighted_neighbours() {
        let mut m = SharingMatrix::new(3);
        m.add(0, 1, 5.0);
        m.add(1, 2, 0.4);
        assert_eq!(graph(&m), "0\n3\t4\n0\t010\n1\t5 1\n2\t5 0\t1 2\n1\t1 1\n");
    }

    #[test]
    fn tleaf_has_the_branching_levels() {
        let machine = Machine::from_spec("pack:2 l3:1 core:4 pu:2").unwrap();
        // Packages (memory latency 80), cores in a package (sharing the L3: 15), PUs of a core (1).
        assert_eq!(tleaf(&machine, CostModel::Latency), "tleaf\n3\t2 80\t4 15\t2 1\n");
        assert_eq!(tleaf(&machine, CostModel::Hops), "tleaf\n3\t2 4\t4 2\t2 1\n");
    }
}
