//! Among the mappings that cost the same, the one closest to where threads run now. On a
//! symmetric machine, swapping two packages (or two cores of a package, two PUs of a core)
//! changes no pair's lowest shared level, so a mapping algorithm's answer is one of many
//! equivalent ones; an online remap should take the one that moves fewest threads, and
//! fewest across nodes, away from their cached and first-touched data.

use sharemap_machine::Machine;
use std::collections::HashMap;

/// `proposed` with the machine's subtrees relabelled, level by level from the root, so that
/// as many threads as possible stay in the subtree they run in now (`current`): each
/// proposed subtree goes to the current subtree that holds most of its threads. None when
/// the machine's tree is not uniform (levels of different arities), where a relabelling
/// may change costs. The caller checks the cost (NUMA distances may differ between packages).
pub fn closest_equivalent(machine: &Machine, current: &[usize], proposed: &[usize]) -> Option<Vec<usize>> {
    let paths: Vec<Vec<usize>> = machine
        .pus
        .iter()
        .map(|&pu| {
            let mut up = machine.tree.ancestors(pu);
            up.reverse();
            up.windows(2)
                .map(|w| machine.tree.objs[w[0]].children.iter().position(|&c| c == w[1]).unwrap_or(0))
                .collect()
        })
        .collect();
    let depth = paths.first()?.len();
    let mut arity = vec![0usize; depth];
    for p in &paths {
        if p.len() != depth {
            return None;
        }
        for (d, &i) in p.iter().enumerate() {
            arity[d] = arity[d].max(i + 1);
        }
    }
    if arity.iter().product::<usize>() != paths.len() {
        return None;
    }
    let pu_at: HashMap<&[usize], usize> = paths.iter().enumerate().map(|(pu, p)| (p.as_slice(), pu)).collect();
    let n = proposed.len().min(current.len());
    let new: Vec<&[usize]> = (0..n).map(|t| paths.get(proposed[t]).map(Vec::as_slice)).collect::<Option<_>>()?;
    let now: Vec<&[usize]> = (0..n).map(|t| paths.get(current[t]).map(Vec::as_slice)).collect::<Option<_>>()?;
    let mut out = vec![Vec::with_capacity(depth); n];
    let all: Vec<usize> = (0..n).collect();
    assign(0, &all, &mut Vec::new(), &Paths { new: &new, now: &now, arity: &arity }, &mut out);
    out.iter().map(|p| pu_at.get(p.as_slice()).copied()).collect()
}

struct Paths<'a> {
    new: &'a [&'a [usize]],
    now: &'a [&'a [usize]],
    arity: &'a [usize],
}

/// Threads `threads` share their proposed path down to `d`, which is relabelled `target`:
/// pick, for each proposed child at depth `d`, the target's child holding most of them now.
fn assign(d: usize, threads: &[usize], target: &mut Vec<usize>, p: &Paths, out: &mut [Vec<usize>]) {
    if d == p.arity.len() {
        for &t in threads {
            out[t] = target.clone();
        }
        return;
    }
    let k = p.arity[d];
    let mut overlap = vec![0usize; k * k];
    for &t in threads {
        if p.now[t][..d] == target[..] {
            overlap[p.new[t][d] * k + p.now[t][d]] += 1;
        }
    }
    // The assignment of proposed children to current ones that keeps most threads in place.
    let to = max_assignment(&overlap, k);
    for (child, &into) in to.iter().enumerate() {
        let mine: Vec<usize> = threads.iter().copied().filter(|&t| p.new[t][d] == child).collect();
        if !mine.is_empty() {
            target.push(into);
            assign(d + 1, &mine, target, p, out);
            target.pop();
        }
    }
}

/// The permutation `to` (row -> column) maximising the sum of `weight[row * k + to[row]]`:
/// the Hungarian method with potentials, O(k^3).
fn max_assignment(weight: &[usize], k: usize) -> Vec<usize> {
    let top = weight.iter().copied().max().unwrap_or(0) as i64;
    // Minimise top - weight instead.
    let cost = |r: usize, c: usize| top - weight[r * k + c] as i64;
    let (mut u, mut v) = (vec![0i64; k + 1], vec![0i64; k + 1]);
    // owner[c]: the row (1-based) column c (1-based) is given to; 0 for none.
    let (mut owner, mut way) = (vec![0usize; k + 1], vec![0usize; k + 1]);
    for row in 1..=k {
        owner[0] = row;
        let mut col = 0;
        let mut least = vec![i64::MAX; k + 1];
        let mut used = vec![false; k + 1];
        loop {
            used[col] = true;
            let r = owner[col];
            let (mut delta, mut next) = (i64::MAX, 0);
            for c in 1..=k {
                if !used[c] {
                    let reduced = cost(r - 1, c - 1) - u[r] - v[c];
                    if reduced < least[c] {
                        least[c] = reduced;
                        way[c] = col;
                    }
                    if least[c] < delta {
                        delta = least[c];
                        next = c;
                    }
                }
            }
            for c in 0..=k {
                if used[c] {
                    u[owner[c]] += delta;
                    v[c] -= delta;
                } else {
                    least[c] -= delta;
                }
            }
            col = next;
            if owner[col] == 0 {
                break;
            }
        }
        while col != 0 {
            let prev = way[col];
            owner[col] = owner[prev];
            col = prev;
        }
    }
    let mut to = vec![0; k];
    for c in 1..=k {
        to[owner[c] - 1] = c - 1;
    }
    to
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CostModel, PairCosts, mapping_cost};
    use proptest::prelude::*;
    use sharemap_core::SharingMatrix;

    const MACHINE: &str = "pack:4 numa:1 l3:1 core:2 pu:2";
    /// One package of two cores, another of one.
    const UNEVEN: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0">
    <object type="Package" os_index="0">
      <object type="Core" os_index="0"><object type="PU" os_index="0"/></object>
      <object type="Core" os_index="1"><object type="PU" os_index="1"/></object>
    </object>
    <object type="Package" os_index="1">
      <object type="Core" os_index="2"><object type="PU" os_index="2"/></object>
    </object>
  </object>
</topology>"#;

    #[test]
    fn an_equivalent_proposal_leaves_every_thread_where_it_is() {
        let m = Machine::from_spec(MACHINE).unwrap();
        // MG-like pairs, each on one core of its own package now.
        let current = vec![0, 1, 4, 5, 8, 9, 12, 13];
        // The packages in reverse order, or every pair on its package's other core: the same
        // cost, every thread moved.
        for proposed in
            [vec![12, 13, 8, 9, 4, 5, 0, 1], vec![2, 3, 6, 7, 10, 11, 14, 15], vec![15, 14, 11, 10, 7, 6, 3, 2]]
        {
            assert_eq!(closest_equivalent(&m, &current, &proposed).unwrap(), current, "{proposed:?}");
        }
        // A tree of uneven arity is not relabelled.
        let uneven = Machine::from_xml(UNEVEN, "test").unwrap();
        assert_eq!(closest_equivalent(&uneven, &[0, 1], &[1, 0]), None);
    }

    #[test]
    fn the_assignment_is_the_best_permutation() {
        // Checked against every permutation of 4.
        let w = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3];
        let to = max_assignment(&w, 4);
        let score = |p: &[usize]| p.iter().enumerate().map(|(r, &c)| w[r * 4 + c]).sum::<usize>();
        let mut best = 0;
        for a in 0..4 {
            for b in 0..4 {
                for c in 0..4 {
                    for d in 0..4 {
                        let p = [a, b, c, d];
                        if (0..4).all(|x| p.contains(&x)) {
                            best = best.max(score(&p));
                        }
                    }
                }
            }
        }
        assert_eq!(score(&to), best);
    }

    proptest! {
        /// The relabelled mapping costs what the proposal costs, and moves no more threads
        /// to another node than the proposal does.
        #[test]
        fn relabelling_keeps_the_cost_and_moves_no_more(
            current in proptest::collection::vec(0usize..16, 1..16),
            proposed in proptest::collection::vec(0usize..16, 16),
            cells in proptest::collection::vec(0u32..5, 256),
        ) {
            let m = Machine::from_spec(MACHINE).unwrap();
            let n = current.len();
            let proposed = &proposed[..n];
            let mut matrix = SharingMatrix::new(n);
            for i in 0..n {
                for j in 0..i {
                    matrix.add(i, j, cells[i * 16 + j] as f64);
                }
            }
            let costs = PairCosts::new(&m, CostModel::Latency);
            let r = closest_equivalent(&m, &current, proposed).unwrap();
            prop_assert!((mapping_cost(&matrix, &r, &costs) - mapping_cost(&matrix, proposed, &costs)).abs() < 1e-6);
            let moved = |to: &[usize]| (0..n).filter(|&t| m.pu_numa[to[t]] != m.pu_numa[current[t]]).count();
            prop_assert!(moved(&r) <= moved(proposed), "{} > {}", moved(&r), moved(proposed));
        }
    }
}
