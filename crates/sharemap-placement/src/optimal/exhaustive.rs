//! The optimum by brute force, independent of the dynamic programme's reasoning: a shortest
//! path through every location set a page may occupy at every reference (the exponential
//! formulation seed 004 section 3 sets aside as too slow). It assumes nothing about
//! read-runs; the tests and `sharemap reproduce` check the optimum against it on small pages.

use crate::cost::{Costs, GLOBAL_BIT, LocSet, node_bit};
use crate::page::Ref;

/// Every memory set a page may occupy on `nodes` nodes (plus global memory if any).
pub fn all_sets(nodes: usize, global: bool) -> Vec<LocSet> {
    let mut mems: Vec<LocSet> = (0..nodes as u16).map(node_bit).collect();
    if global {
        mems.push(GLOBAL_BIT);
    }
    (1u32..(1 << mems.len()))
        .map(|mask| mems.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).fold(0, |s, (_, m)| s | m))
        .collect()
}

pub fn move_cost(c: &Costs, from: LocSet, to: LocSet) -> f64 {
    let added = (to & !from).count_ones() as f64;
    if added == 0.0 {
        0.0
    } else if (from | to) & GLOBAL_BIT != 0 {
        added * c.big_g
    } else {
        added * c.big_r
    }
}

/// The optimum by brute force over the placement space: a shortest path through every
/// location set at every reference (the exponential formulation seed 004 rejects as too
/// slow). It assumes nothing about read-runs.
pub fn set_search(refs: &[Ref], nodes: usize, c: &Costs) -> f64 {
    let sets = all_sets(nodes, c.has_global());
    let allowed = |s: LocSet, r: &Ref| !r.write || s.count_ones() == 1;
    let mut best: Vec<f64> =
        sets.iter().map(|&s| if allowed(s, &refs[0]) { c.reference(s, refs[0].node) } else { f64::INFINITY }).collect();
    for r in &refs[1..] {
        best = sets
            .iter()
            .map(|&to| {
                if !allowed(to, r) {
                    return f64::INFINITY;
                }
                let arrive =
                    sets.iter().zip(&best).map(|(&from, &b)| b + move_cost(c, from, to)).fold(f64::INFINITY, f64::min);
                arrive + c.reference(to, r.node)
            })
            .collect();
    }
    best.into_iter().fold(f64::INFINITY, f64::min)
}
