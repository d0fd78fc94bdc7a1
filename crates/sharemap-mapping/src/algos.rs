//! The mapping algorithms. With more threads than PUs every PU takes its share (balanced:
//! thread t of an order-based mapping goes to PU order[t mod PUs]).

use crate::cost::{PairCosts, mapping_cost};
use crate::groups::{Dense, greedy_groups};
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// The OS order: thread i on the PU whose OS index is i (mod PUs).
    Identity,
    /// hwloc's logical order: neighbouring threads share every cache level.
    Compact,
    /// Spread over the top of the tree first (packages), then down (hwloc distrib-like).
    Scatter,
    /// One thread per core in logical order, then the cores' second PUs: threads share the
    /// last level of cache but not a core (seed 002's round-robin).
    RoundRobin,
    /// A seeded random permutation of the PUs.
    Random(u64),
    /// EagerMap-like: bottom-up greedy grouping of the threads that share most, one tree
    /// level at a time, then the groups laid on the tree in order.
    Eager,
    /// TreeMatch-like: the same bottom-up grouping, choosing groups that keep the least
    /// sharing outside them.
    TreeMatch,
    /// Top-down recursive bisection with Kernighan-Lin swaps (Scotch-like).
    Bisection,
    /// The exact optimum by branch and bound (small machines only).
    Exhaustive,
    /// sharemap's default: the cheapest of the bisection, the grouping and the order-based
    /// mappings, improved by pairwise swaps that lower the cost under the machine's per-level
    /// costs (which the bisection and the grouping ignore).
    Refined,
}

/// Names and algorithms, for the command line.
pub static ALGORITHMS: &[(&str, &str)] = &[
    (
        "sharemap",
        "the cheapest of bisection, eagermap (up to 256 threads) and the order-based mappings, refined by cost-aware pairwise swaps (the default)",
    ),
    ("eagermap", "hierarchical greedy grouping, bottom-up over the shared levels"),
    ("treematch", "tree matching by levels: groups that leave the least sharing outside them"),
    ("bisection", "top-down recursive bisection of the threads with Kernighan-Lin swaps, as Scotch maps"),
    ("compact", "hwloc logical order: neighbours share every cache level"),
    ("scatter", "spread over packages first"),
    ("round-robin", "one thread per core, sharing the last-level cache"),
    ("identity", "the OS order"),
    ("random", "a seeded random permutation"),
    ("exhaustive", "the exact optimum (machines of at most 10 PUs)"),
];

impl Algorithm {
    pub fn parse(name: &str, seed: u64) -> Option<Algorithm> {
        Some(match name {
            "sharemap" => Algorithm::Refined,
            "eagermap" => Algorithm::Eager,
            "treematch" => Algorithm::TreeMatch,
            "bisection" => Algorithm::Bisection,
            "compact" => Algorithm::Compact,
            "scatter" => Algorithm::Scatter,
            "round-robin" => Algorithm::RoundRobin,
            "identity" => Algorithm::Identity,
            "random" => Algorithm::Random(seed),
            "exhaustive" => Algorithm::Exhaustive,
            _ => return None,
        })
    }
}

/// Most PUs `exhaustive` accepts.
pub const EXHAUSTIVE_MAX_PUS: usize = 10;

/// Maps the matrix's threads onto the machine's logical PUs.
pub fn map(alg: Algorithm, m: &SharingMatrix, machine: &Machine, costs: &PairCosts) -> Result<Vec<usize>, String> {
    let n = m.threads();
    let p = machine.pu_count();
    let by_order = |order: Vec<usize>| (0..n).map(|t| order[t % p]).collect::<Vec<_>>();
    Ok(match alg {
        Algorithm::Identity => {
            let mut by_os: Vec<usize> = (0..p).collect();
            by_os.sort_by_key(|&l| machine.pu_os_index(l));
            by_order(by_os)
        }
        Algorithm::Compact => by_order((0..p).collect()),
        Algorithm::Scatter => by_order(order_by_path(machine, true)),
        Algorithm::RoundRobin => by_order(order_by_core(machine)),
        Algorithm::Random(seed) => {
            let mut order: Vec<usize> = (0..p).collect();
            let mut x = seed ^ 0x9e3779b97f4a7c15;
            for i in (1..p).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                order.swap(i, (x % (i as u64 + 1)) as usize);
            }
            by_order(order)
        }
        Algorithm::Eager => bottom_up(m, machine, eager_groups),
        Algorithm::TreeMatch => bottom_up(m, machine, crate::treematch::groups),
        Algorithm::Bisection => crate::bisect::bisection(m, machine),
        Algorithm::Refined => {
            // Several starting points, computed in parallel; the cheapest is improved by
            // swaps. So the result is never worse than any of them.
            use rayon::prelude::*;
            // Beyond 256 threads the grouping is left out: it never beat the bisection on the
            // synthetic matrices there, and it would take a core from the bisection's halves.
            let starts: &[Algorithm] = if n <= 256 {
                &[Algorithm::Bisection, Algorithm::Eager, Algorithm::Compact, Algorithm::RoundRobin, Algorithm::Scatter]
            } else {
                &[Algorithm::Bisection, Algorithm::Compact, Algorithm::RoundRobin, Algorithm::Scatter]
            };
            let candidates: Vec<(f64, Vec<usize>)> = starts
                .par_iter()
                .map(|&start| {
                    let candidate = map(start, m, machine, costs).expect("order and grouping mappings cannot fail");
                    (mapping_cost(m, &candidate, costs), candidate)
                })
                .collect();
            // The first of the cheapest, so that ties resolve the same way on every run.
            let mut chosen = candidates
                .into_iter()
                .reduce(|best, c| if c.0 < best.0 { c } else { best })
                .expect("at least one start")
                .1;
            refine(m, &mut chosen, costs);
            chosen
        }
        Algorithm::Exhaustive => {
            if p > EXHAUSTIVE_MAX_PUS {
                return Err(format!(
                    "exhaustive handles machines of at most {EXHAUSTIVE_MAX_PUS} PUs (this one has {p})"
                ));
            }
            if n > p {
                return Err(format!("exhaustive needs at most one thread per PU ({n} threads, {p} PUs)"));
            }
            exhaustive(m, costs)
        }
    })
}

/// Each PU's root-to-PU path of child positions.
fn child_paths(machine: &Machine) -> Vec<Vec<usize>> {
    let tree = &machine.tree;
    machine
        .pus
        .iter()
        .map(|&pu| {
            let mut path: Vec<usize> = tree
                .ancestors(pu)
                .windows(2)
                .map(|w| tree.objs[w[1]].children.iter().position(|&c| c == w[0]).unwrap_or(0))
                .collect();
            path.reverse();
            path
        })
        .collect()
}

/// PUs sorted by their path read from the bottom (scatter: consecutive PUs differ at the top).
fn order_by_path(machine: &Machine, from_bottom: bool) -> Vec<usize> {
    let paths = child_paths(machine);
    let mut order: Vec<usize> = (0..machine.pu_count()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&paths[a], &paths[b]);
        if from_bottom { pa.iter().rev().cmp(pb.iter().rev()) } else { pa.cmp(pb) }
    });
    order
}

/// PUs sorted by (position within their core, logical order).
fn order_by_core(machine: &Machine) -> Vec<usize> {
    let paths = child_paths(machine);
    let mut order: Vec<usize> = (0..machine.pu_count()).collect();
    order.sort_by_key(|&pu| (paths[pu].last().copied().unwrap_or(0), pu));
    order
}

/// Hierarchical grouping, shared by EagerMap and TreeMatch. Level by level from the PUs up,
/// the elements (threads, then groups of them) are gathered by `group` into groups of the
/// level's arity; the sharing between groups is summed for the next level. The final groups
/// are laid on the tree in logical order. Padding elements (no sharing) fill the slots no
/// thread takes; with more threads than PUs, each PU first takes a group of its share.
fn bottom_up(m: &SharingMatrix, machine: &Machine, group: fn(&Dense, usize) -> Vec<Vec<usize>>) -> Vec<usize> {
    let n = m.threads();
    let p = machine.pu_count();
    // Arity of each level, bottom-up (children per object).
    let mut arities: Vec<usize> =
        machine.levels.windows(2).map(|w| (w[1].objs.len() / w[0].objs.len().max(1)).max(1)).collect();
    arities.reverse();
    let per_pu = n.div_ceil(p).max(1);
    let total = p * per_pu;
    const PAD: usize = usize::MAX;
    let mut elems: Vec<Vec<usize>> = (0..total).map(|t| vec![if t < n { t } else { PAD }]).collect();
    let mut mat = Dense { k: total, cells: vec![0.0; total * total] };
    for i in 0..n {
        for j in 0..n {
            mat.cells[i * total + j] = m.get(i, j);
        }
    }
    let mut sizes = vec![per_pu];
    sizes.extend(arities.iter().copied());
    for size in sizes {
        if size <= 1 || elems.len() <= 1 {
            continue;
        }
        let groups = group(&mat, size);
        let kk = groups.len();
        let mut owner = vec![0usize; mat.k];
        for (g, members) in groups.iter().enumerate() {
            for &x in members {
                owner[x] = g;
            }
        }
        let mut next = Dense { k: kk, cells: vec![0.0; kk * kk] };
        for x in 0..mat.k {
            let ox = owner[x];
            for (y, &v) in mat.row(x).iter().enumerate() {
                if v != 0.0 && owner[y] != ox {
                    next.cells[ox * kk + owner[y]] += v;
                }
            }
        }
        elems = groups.iter().map(|g| g.iter().flat_map(|&e| elems[e].iter().copied()).collect()).collect();
        mat = next;
    }
    let mut map = vec![0usize; n];
    for (slot, t) in elems.into_iter().flatten().enumerate() {
        if t != PAD {
            map[t] = slot / per_pu % p;
        }
    }
    map
}

/// EagerMap-like grouping: each group starts with the element that shares most in all and
/// grows by the element sharing most with the group so far.
fn eager_groups(mat: &Dense, size: usize) -> Vec<Vec<usize>> {
    greedy_groups(mat, size, |_load, with_group| with_group)
}

/// Pairwise swaps of threads' PUs while one lowers the cost, within a work budget. Beyond
/// 256 threads a single sweep over the pairs would exceed the budget 30-fold, and a partial
/// sweep finds next to nothing: it is skipped.
fn refine(m: &SharingMatrix, map: &mut [usize], c: &PairCosts) {
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

/// Branch and bound over distinct PUs for each thread.
fn exhaustive(m: &SharingMatrix, c: &PairCosts) -> Vec<usize> {
    let n = m.threads();
    let mut best_map: Vec<usize> = (0..n).collect();
    let mut best = mapping_cost(m, &best_map, c);
    let mut cur = vec![0usize; n];
    let mut used = vec![false; c.pus];
    #[allow(clippy::too_many_arguments)]
    fn go(
        t: usize,
        partial: f64,
        m: &SharingMatrix,
        c: &PairCosts,
        cur: &mut [usize],
        used: &mut [bool],
        best: &mut f64,
        best_map: &mut Vec<usize>,
    ) {
        let n = cur.len();
        if partial >= *best {
            return;
        }
        if t == n {
            *best = partial;
            best_map.copy_from_slice(cur);
            return;
        }
        for q in 0..c.pus {
            if used[q] {
                continue;
            }
            let add: f64 = (0..t).map(|u| m.get(t, u) * c.get(q, cur[u])).sum();
            used[q] = true;
            cur[t] = q;
            go(t + 1, partial + add, m, c, cur, used, best, best_map);
            used[q] = false;
        }
    }
    go(0, 0.0, m, c, &mut cur, &mut used, &mut best, &mut best_map);
    best_map
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::CostModel;
    use proptest::prelude::*;

    fn matrix(n: usize, cells: &[u32]) -> SharingMatrix {
        let mut m = SharingMatrix::new(n);
        for (k, &v) in cells.iter().enumerate() {
            m.add(k % n, (k / n) % n, v as f64);
        }
        m
    }

    /// Every assignment of distinct PUs, outright.
    fn brute_force(m: &SharingMatrix, c: &PairCosts) -> f64 {
        fn go(t: usize, cur: &mut Vec<usize>, used: &mut Vec<bool>, m: &SharingMatrix, c: &PairCosts, best: &mut f64) {
            if t == m.threads() {
                *best = best.min(mapping_cost(m, cur, c));
                return;
            }
            for q in 0..c.pus {
                if !used[q] {
                    used[q] = true;
                    cur.push(q);
                    go(t + 1, cur, used, m, c, best);
                    cur.pop();
                    used[q] = false;
                }
            }
        }
        let mut best = f64::INFINITY;
        go(0, &mut Vec::new(), &mut vec![false; c.pus], m, c, &mut best);
        best
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn exhaustive_is_optimal_and_nothing_beats_it(
            spec in prop::sample::select(vec!["pack:2 core:2 pu:1", "pack:2 l2:1 core:2 pu:2", "numa:2 core:3 pu:1"]),
            n in 2usize..7,
            cells in prop::collection::vec(0u32..50, 0..60),
            hops in any::<bool>(),
        ) {
            let machine = Machine::from_spec(spec).unwrap();
            let n = n.min(machine.pu_count());
            let m = matrix(n, &cells);
            let c = PairCosts::new(&machine, if hops { CostModel::Hops } else { CostModel::Latency });
            let best = mapping_cost(&m, &map(Algorithm::Exhaustive, &m, &machine, &c).unwrap(), &c);
            prop_assert!((best - brute_force(&m, &c)).abs() < 1e-9);
            for (name, _) in ALGORITHMS {
                let alg = Algorithm::parse(name, 7).unwrap();
                let mp = map(alg, &m, &machine, &c).unwrap();
                prop_assert_eq!(mp.len(), n);
                prop_assert!(mp.iter().all(|&q| q < machine.pu_count()));
                let mut seen = mp.clone();
                seen.sort();
                seen.dedup();
                prop_assert_eq!(seen.len(), n, "{} puts two threads on one PU", name);
                prop_assert!(mapping_cost(&m, &mp, &c) >= best - 1e-9, "{} beats the optimum", name);
            }
            let refined = mapping_cost(&m, &map(Algorithm::Refined, &m, &machine, &c).unwrap(), &c);
            for alg in [Algorithm::Bisection, Algorithm::Eager, Algorithm::Compact, Algorithm::RoundRobin, Algorithm::Scatter] {
                let other = mapping_cost(&m, &map(alg, &m, &machine, &c).unwrap(), &c);
                prop_assert!(refined <= other + 1e-9, "{:?} beats the default", alg);
            }
        }
    }

    #[test]
    fn order_based_mappings_follow_the_tree() {
        let machine = Machine::from_spec("pack:2 l3:1 core:2 pu:2").unwrap();
        let c = PairCosts::new(&machine, CostModel::Latency);
        let m = SharingMatrix::new(8);
        let at = |alg| map(alg, &m, &machine, &c).unwrap();
        // Compact: threads 0 and 1 are SMT siblings.
        assert_eq!(&at(Algorithm::Compact)[..4], &[0, 1, 2, 3]);
        // Scatter: consecutive threads on different packages.
        let s = at(Algorithm::Scatter);
        assert_eq!((s[0] / 4, s[1] / 4), (0, 1));
        // Round-robin: one thread per core first (different cores, same package's L3).
        assert_eq!(&at(Algorithm::RoundRobin)[..4], &[0, 2, 4, 6]);
        // Oversubscribed: 16 threads on 8 PUs, two each.
        let big = SharingMatrix::new(16);
        for alg in [
            Algorithm::Compact,
            Algorithm::Eager,
            Algorithm::TreeMatch,
            Algorithm::Bisection,
            Algorithm::Refined,
            Algorithm::Scatter,
        ] {
            let mp = map(alg, &big, &machine, &c).unwrap();
            let mut per = vec![0; 8];
            mp.iter().for_each(|&q| per[q] += 1);
            assert!(per.iter().all(|&k| k == 2), "{alg:?}: {per:?}");
        }
        // Fewer threads than PUs: distinct PUs, and sharing pairs still meet on a core.
        let mut few = SharingMatrix::new(3);
        few.add(0, 2, 10.0);
        for alg in [Algorithm::Eager, Algorithm::TreeMatch, Algorithm::Bisection, Algorithm::Refined] {
            let mp = map(alg, &few, &machine, &c).unwrap();
            assert!(mp[0] != mp[1] && mp[1] != mp[2] && mp[0] != mp[2], "{alg:?}: {mp:?}");
            assert_eq!(mp[0] / 2, mp[2] / 2, "{alg:?}: {mp:?}");
        }
    }

    #[test]
    fn neighbours_are_grouped() {
        // Threads 0-1, 2-3, 4-5, 6-7 share heavily; scrambled ids.
        let machine = Machine::from_spec("pack:2 core:2 pu:2").unwrap();
        let c = PairCosts::new(&machine, CostModel::Latency);
        let mut m = SharingMatrix::new(8);
        for (a, b) in [(0, 5), (1, 6), (2, 7), (3, 4)] {
            m.add(a, b, 100.0);
        }
        m.add(0, 1, 1.0);
        let mp = map(Algorithm::Eager, &m, &machine, &c).unwrap();
        for (a, b) in [(0, 5), (1, 6), (2, 7), (3, 4)] {
            assert_eq!(mp[a] / 2, mp[b] / 2, "threads {a} and {b} share a core");
        }
        let opt = mapping_cost(&m, &map(Algorithm::Exhaustive, &m, &machine, &c).unwrap(), &c);
        assert_eq!(mapping_cost(&m, &map(Algorithm::Refined, &m, &machine, &c).unwrap(), &c), opt);
        assert!(mapping_cost(&m, &map(Algorithm::Compact, &m, &machine, &c).unwrap(), &c) > opt);
    }
}
