//! The optimum checked against independent exact searches.

use crate::cost::{Costs, LocSet, node_bit};
use crate::optimal::exhaustive::{all_sets, move_cost, set_search};
use crate::optimal::reference::plain_recurrence;
use crate::optimal::{Optimal, replay};
use crate::page::Ref;
use proptest::prelude::*;
use sharemap_machine::CostParams;

/// Enumerates every placement sequence outright (tiny traces only), to check `set_search`.
fn enumerate(refs: &[Ref], nodes: usize, c: &Costs) -> f64 {
    let sets = all_sets(nodes, c.has_global());
    fn go(refs: &[Ref], i: usize, prev: Option<LocSet>, sets: &[LocSet], c: &Costs) -> f64 {
        if i == refs.len() {
            return 0.0;
        }
        let mut best = f64::INFINITY;
        for &s in sets {
            if refs[i].write && s.count_ones() != 1 {
                continue;
            }
            let mv = prev.map_or(0.0, |p| move_cost(c, p, s));
            best = best.min(mv + c.reference(s, refs[i].node) + go(refs, i + 1, Some(s), sets, c));
        }
        best
    }
    go(refs, 0, None, &sets, c)
}

fn costs_strategy() -> impl Strategy<Value = Costs> {
    (2u32..7, 1u32..30, any::<bool>(), 2u32..5, 1u32..20, 0u32..100)
        .prop_map(|(r, extra_r, global, g, extra_g, mix)| {
            let r = r as f64;
            if !global {
                return CostParams { r, big_r: 2.0 * r + extra_r as f64, g: None, big_g: None };
            }
            let g = (g as f64).min(r);
            let big_g = 2.0 * g + extra_g as f64;
            // R between max(G, 2r + 1) and 2G when possible.
            let lo = big_g.max(2.0 * r + 1.0);
            let big_r = lo + (2.0 * big_g - lo).max(0.0) * mix as f64 / 100.0;
            CostParams { r, big_r: big_r.round(), g: Some(g), big_g: Some(big_g) }
        })
        .prop_filter("valid parameters", |p| p.validate().is_ok())
        .prop_map(|p| Costs::new(&p))
}

fn refs_strategy(nodes: u16, max_len: usize) -> impl Strategy<Value = Vec<Ref>> {
    prop::collection::vec((0..nodes, prop::bool::weighted(0.35)), 1..=max_len).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (node, w))| if w { Ref::write(i as u64, node) } else { Ref::read(i as u64, node) })
            .collect()
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(1.0)
}

#[test]
fn set_search_matches_full_enumeration() {
    let c = Costs { r: 3.0, big_r: 8.0, g: 2.0, big_g: 5.0 };
    let nc = Costs { r: 3.0, big_r: 7.0, g: f64::INFINITY, big_g: f64::INFINITY };
    let mut rng = 12345u64;
    for _ in 0..150 {
        let refs: Vec<Ref> = (0..5)
            .map(|i| {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let node = ((rng >> 33) % 2) as u16;
                if (rng >> 40).is_multiple_of(3) { Ref::write(i, node) } else { Ref::read(i, node) }
            })
            .collect();
        for costs in [&c, &nc] {
            assert!(close(set_search(&refs, 2, costs), enumerate(&refs, 2, costs)), "{refs:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn optimum_equals_exhaustive_search(
        nodes in 2usize..=3,
        c in costs_strategy(),
        refs in refs_strategy(3, 10),
    ) {
        let refs: Vec<Ref> = refs.into_iter().map(|r| Ref { node: r.node % nodes as u16, ..r }).collect();
        let mut opt = Optimal::new(nodes, c);
        let sol = opt.solve(&refs);
        let truth = set_search(&refs, nodes, &c);
        prop_assert!(close(sol.cost, truth), "optimal {} vs exhaustive {} on {:?} with {:?}", sol.cost, truth, refs, c);
        // The reconstructed placement is legal and costs exactly the optimum.
        prop_assert!(close(sol.tally.cost(&c), sol.cost), "replayed {} vs {}", sol.tally.cost(&c), sol.cost);
        prop_assert!(close(replay(&refs, &sol.changes, &c).cost(&c), sol.cost));
        prop_assert_eq!(sol.tally.references(), refs.len() as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    /// Longer traces on up to 4 nodes: the search over every location set is polynomial in
    /// the trace length, so it checks runs where many nodes sit untouched (the lazy path).
    #[test]
    fn optimum_equals_exhaustive_search_on_longer_traces(
        nodes in 2usize..=4,
        c in costs_strategy(),
        refs in refs_strategy(4, 150),
    ) {
        let refs: Vec<Ref> = refs.into_iter().map(|r| Ref { node: r.node % nodes as u16, ..r }).collect();
        let sol = Optimal::new(nodes, c).solve(&refs);
        let truth = set_search(&refs, nodes, &c);
        prop_assert!(close(sol.cost, truth), "optimal {} vs exhaustive {}", sol.cost, truth);
        prop_assert!(close(replay(&refs, &sol.changes, &c).cost(&c), sol.cost));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Traces made of stretches by one node (the shape merged writes come from).
    #[test]
    fn optimum_equals_exhaustive_search_on_stretches(
        nodes in 2usize..=3,
        c in costs_strategy(),
        stretches in prop::collection::vec((0u16..3, prop::collection::vec(prop::bool::weighted(0.4), 1..12)), 1..12),
    ) {
        let mut refs = Vec::new();
        for (node, kinds) in stretches {
            for w in kinds {
                let at = refs.len() as u64;
                let node = node % nodes as u16;
                refs.push(if w { Ref::write(at, node) } else { Ref::read(at, node) });
            }
        }
        let sol = Optimal::new(nodes, c).solve(&refs);
        let truth = set_search(&refs, nodes, &c);
        prop_assert!(close(sol.cost, truth), "optimal {} vs exhaustive {}", sol.cost, truth);
        prop_assert!(close(replay(&refs, &sol.changes, &c).cost(&c), sol.cost));
    }
}

#[test]
fn several_pages_with_one_solver() {
    // Scratch state must not leak from one page to the next.
    let c = Costs::new(&CostParams { r: 4.0, big_r: 20.0, g: Some(2.0), big_g: Some(12.0) });
    let mut shared = Optimal::new(3, c);
    let mut rng = 99u64;
    for _ in 0..200 {
        let refs: Vec<Ref> = (0..9)
            .map(|i| {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let node = ((rng >> 33) % 3) as u16;
                if (rng >> 45).is_multiple_of(4) { Ref::write(i, node) } else { Ref::read(i, node) }
            })
            .collect();
        let fresh = Optimal::new(3, c).solve(&refs).cost;
        assert_eq!(shared.solve(&refs).cost, fresh);
        assert!(close(fresh, set_search(&refs, 3, &c)));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// One solver over a sequence of pages on many nodes (its per-node state is reset only
    /// where a page left it) gives what a fresh solver gives for each page.
    #[test]
    fn one_solver_over_many_pages_on_many_nodes(
        nodes in 2usize..128,
        c in prop_oneof![costs_strategy(), dear_moves()],
        pages in prop::collection::vec(prop::collection::vec((0u16..128, prop::bool::weighted(0.3)), 1..60), 1..8),
    ) {
        let mut shared = Optimal::new(nodes, c);
        for page in pages {
            let refs: Vec<Ref> = page
                .iter()
                .enumerate()
                .map(|(i, &(n, w))| {
                    let node = n % nodes as u16;
                    if w { Ref::write(i as u64, node) } else { Ref::read(i as u64, node) }
                })
                .collect();
            let fresh = Optimal::new(nodes, c).solve(&refs);
            prop_assert_eq!(shared.solve(&refs), fresh);
        }
    }
}

/// Seed 004's proposition: the optimum needs the future. T1 = 10R writes by p1, one by p2,
/// 10R by p1 keeps the page at p1; T2 = 10R writes by p1 then 10R by p2 moves it once.
#[test]
fn proposition_traces() {
    let c = Costs::new(&CostParams { r: 3.0, big_r: 10.0, g: None, big_g: None });
    let n = 100;
    let t1: Vec<Ref> = (0..n)
        .map(|i| Ref::write(i, 0))
        .chain([Ref::write(n, 1)])
        .chain((0..n).map(|i| Ref::write(n + 1 + i, 0)))
        .collect();
    let t2: Vec<Ref> = (0..n).map(|i| Ref::write(i, 0)).chain((0..n).map(|i| Ref::write(n + i, 1))).collect();
    let mut opt = Optimal::new(2, c);
    let s1 = opt.solve(&t1);
    assert_eq!(s1.cost, 2.0 * n as f64 + 3.0);
    assert_eq!(s1.changes, vec![(0, node_bit(0))]);
    let s2 = opt.solve(&t2);
    assert_eq!(s2.cost, 2.0 * n as f64 + 10.0);
    assert_eq!(s2.changes, vec![(0, node_bit(0)), (n as usize, node_bit(1))]);
    // Identical up to reference 10R + 1, yet the placements differ at 10R: off-line.
    assert_eq!(t1[..n as usize], t2[..n as usize]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    /// Seed 004's theorem and corollary: an optimal placement stays optimal on the machine
    /// scaled by s (g' = s(g-1)+1, r' = s(r-1)+1, G' = sG, R' = sR), and the optimal mean
    /// cost per reference scales as 1 + s(MCPR - 1).
    #[test]
    fn theorem_and_corollary_on_a_scaled_machine(
        c in costs_strategy(),
        refs in refs_strategy(3, 40),
        s in prop::sample::select(vec![0.5, 2.0, 3.0, 10.0]),
    ) {
        let scaled = Costs { r: s * (c.r - 1.0) + 1.0, big_r: s * c.big_r, g: s * (c.g - 1.0) + 1.0, big_g: s * c.big_g };
        let base = Optimal::new(3, c).solve(&refs);
        let other = Optimal::new(3, scaled).solve(&refs);
        let kept = replay(&refs, &base.changes, &scaled).cost(&scaled);
        prop_assert!(close(kept, other.cost), "scaled cost of the old optimum {} vs new optimum {}", kept, other.cost);
        let n = refs.len() as f64;
        prop_assert!(close(other.cost / n, 1.0 + s * (base.cost / n - 1.0)));
    }
}

/// Seed 004 section 4.3.1: as a function of the move cost, the optimum is continuous,
/// piecewise linear and concave, with slope = the number of moves it makes.
#[test]
fn optimum_is_concave_and_piecewise_linear_in_the_move_cost() {
    let mut rng = 4242u64;
    let pages: Vec<Vec<Ref>> = (0..30)
        .map(|_| {
            (0..120)
                .map(|i| {
                    rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let node = ((rng >> 33) % 3) as u16;
                    if (rng >> 50).is_multiple_of(5) { Ref::write(i, node) } else { Ref::read(i, node) }
                })
                .collect()
        })
        .collect();
    let total = |c: Costs| -> (f64, u64, u64) {
        let mut opt = Optimal::new(3, c);
        pages.iter().fold((0.0, 0, 0), |(cost, nm, gm), p| {
            let s = opt.solve(p);
            (cost + s.cost, nm + s.tally.node_moves, gm + s.tally.global_moves)
        })
    };
    // R on a machine without global memory, then G on an ACE-like one (R = 2G): there the
    // slope is global moves + 2 x node moves.
    type Sweep = (Vec<f64>, Box<dyn Fn(f64) -> Costs>, bool);
    let sweeps: [Sweep; 2] = [
        (
            (0..40).map(|i| 11.0 + 2.5 * i as f64).collect(),
            Box::new(|v| Costs { r: 5.0, big_r: v, g: f64::INFINITY, big_g: f64::INFINITY }),
            false,
        ),
        (
            (0..40).map(|i| 5.0 + 2.0 * i as f64).collect(),
            Box::new(|v| Costs { r: 5.0, big_r: 2.0 * v, g: 2.0, big_g: v }),
            true,
        ),
    ];
    for (values, costs, global) in &sweeps {
        let points: Vec<(f64, f64, u64)> = values
            .iter()
            .map(|&v| {
                let (c, nm, gm) = total(costs(v));
                (v, c, if *global { gm + 2 * nm } else { nm })
            })
            .collect();
        for w in points.windows(2) {
            let ((x0, c0, m0), (x1, c1, m1)) = (w[0], w[1]);
            let h = x1 - x0;
            // The placement optimal at x0 stays available at x1 and vice versa.
            assert!(c1 <= c0 + h * m0 as f64 + 1e-6, "slope above the move count at {x0}");
            assert!(c1 >= c0 + h * m1 as f64 - 1e-6, "slope below the move count at {x1}");
            assert!(m1 <= m0, "moves must not increase with their cost");
        }
        for w in points.windows(3) {
            assert!(w[1].1 >= (w[0].1 + w[2].1) / 2.0 - 1e-6, "not concave at {}", w[1].0);
        }
        assert!(points.first().unwrap().2 > points.last().unwrap().2, "the sweep should cross a change of placement");
    }
}

/// Found by the exhaustive test: a page in global memory gets a temporary copy for the
/// writer's reads and returns to global memory at its next write, ready for a later reader.
/// Merging that write into the previous one (as if nothing could change) cost 1 too much.
#[test]
fn a_temporary_copy_between_two_writes_by_one_node() {
    let c = Costs { r: 5.0, big_r: 11.0, g: 2.0, big_g: 6.0 };
    let mut refs = vec![Ref::write(0, 1), Ref::read(1, 1), Ref::write(2, 0)];
    refs.extend((3..10).map(|i| Ref::read(i, 0)));
    refs.extend([Ref::write(10, 0), Ref::read(11, 1)]);
    let sol = Optimal::new(2, c).solve(&refs);
    assert_eq!(sol.cost, 23.0);
    assert_eq!(set_search(&refs, 2, &c), 23.0);
    assert_eq!(replay(&refs, &sol.changes, &c).cost(&c), 23.0);
}

/// Between two writes by node 1, node 1's reads are served best by a global copy while the
/// page stays with node 0, its main user (merged writes must consider that copy too).
#[test]
fn a_global_copy_for_a_short_visit() {
    let c = Costs { r: 5.0, big_r: 11.0, g: 2.0, big_g: 6.0 };
    let mut refs: Vec<Ref> = (0..20).map(|i| Ref::write(i, 0)).collect();
    refs.extend([Ref::write(20, 1), Ref::read(21, 1), Ref::read(22, 1), Ref::read(23, 1), Ref::write(24, 1)]);
    refs.extend((25..45).map(|i| Ref::write(i, 0)));
    let sol = Optimal::new(2, c).solve(&refs);
    // 20 + (5 + 6 + 3 x 2 + 5) + 20: remote writes, a global copy (G) for the reads.
    assert_eq!(set_search(&refs, 2, &c), 62.0);
    assert_eq!(sol.cost, 62.0);
    assert_eq!(sol.tally.global_moves, 1);
    assert_eq!(replay(&refs, &sol.changes, &c).cost(&c), 62.0);
}

/// Without global memory the visitor's reads get a copy of their own (R + reads), the page
/// staying with its main user.
#[test]
fn a_local_copy_for_a_short_visit() {
    let c = Costs { r: 15.0, big_r: 40.0, g: f64::INFINITY, big_g: f64::INFINITY };
    let mut refs: Vec<Ref> = (0..30).map(|i| Ref::write(i, 0)).collect();
    refs.push(Ref::write(30, 1));
    refs.extend((31..36).map(|i| Ref::read(i, 1)));
    refs.push(Ref::write(36, 1));
    refs.extend((37..67).map(|i| Ref::write(i, 0)));
    let sol = Optimal::new(2, c).solve(&refs);
    // 30 + (15 + 40 + 5 + 15) + 30.
    assert_eq!(set_search(&refs, 2, &c), 135.0);
    assert_eq!(sol.cost, 135.0);
    assert_eq!((sol.tally.node_moves, sol.tally.replications), (1, 1));
    assert_eq!(replay(&refs, &sol.changes, &c).cost(&c), 135.0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]
    /// Many nodes (more than the solver's short list of least values), few of them busy or
    /// all of them: the optimised solver agrees with the plain recurrence.
    #[test]
    fn optimised_solver_equals_the_plain_recurrence_on_many_nodes(
        nodes in 2usize..70,
        busy in 1u16..70,
        c in prop_oneof![costs_strategy(), dear_moves()],
        refs in prop::collection::vec((0u16..70, prop::bool::weighted(0.3), 1usize..6), 1..120),
    ) {
        // Stretches of one node, drawn from `busy` nodes.
        let mut trace = Vec::new();
        for (n, w, len) in refs {
            let node = n % busy.min(nodes as u16);
            for _ in 0..len {
                let at = trace.len() as u64;
                trace.push(if w && at.is_multiple_of(2) { Ref::write(at, node) } else { Ref::read(at, node) });
            }
        }
        let sol = Optimal::new(nodes, c).solve(&trace);
        let plain = plain_recurrence(&trace, nodes, &c);
        prop_assert!(close(sol.cost, plain), "optimised {} vs plain {}", sol.cost, plain);
        prop_assert!(close(replay(&trace, &sol.changes, &c).cost(&c), sol.cost));
    }
}

/// Moves much dearer than references: values stay apart (uncapped) over many writes, so
/// the solver's choice of least values matters.
fn dear_moves() -> impl Strategy<Value = Costs> {
    (2u32..6, 100u32..2000, any::<bool>(), 2u32..4).prop_map(|(r, big_r, global, g)| {
        let (r, big_r) = (r as f64, big_r as f64);
        if global {
            Costs { r, big_r, g: (g as f64).min(r), big_g: (big_r * 0.6).round() }
        } else {
            Costs { r, big_r, g: f64::INFINITY, big_g: f64::INFINITY }
        }
    })
}

#[test]
fn plain_recurrence_matches_exhaustive_search() {
    let mut rng = 777u64;
    for case in 0..400 {
        let nodes = 2 + case % 2;
        let c = if case % 3 == 0 {
            Costs { r: 5.0, big_r: 11.0, g: 2.0, big_g: 6.0 }
        } else {
            Costs { r: 4.0, big_r: 9.0, g: f64::INFINITY, big_g: f64::INFINITY }
        };
        let refs: Vec<Ref> = (0..30)
            .map(|i| {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let node = ((rng >> 33) % nodes as u64) as u16;
                if (rng >> 50).is_multiple_of(3) { Ref::write(i, node) } else { Ref::read(i, node) }
            })
            .collect();
        assert!(close(plain_recurrence(&refs, nodes, &c), set_search(&refs, nodes, &c)), "case {case}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    /// A solver keeping only a few items of its writes and entries in memory (the rest in
    /// temporary files) finds the same solution as one keeping everything, on pages with
    /// many writes and merged stretches, page after page.
    #[test]
    fn a_solver_spilling_to_files_finds_the_same_solution(
        nodes in 2usize..12,
        c in prop_oneof![costs_strategy(), dear_moves()],
        memory in 0usize..700,
        pages in prop::collection::vec(prop::collection::vec((0u16..12, prop::bool::weighted(0.4), 1usize..4), 1..150), 1..4),
    ) {
        let mut small = Optimal::new(nodes, c).with_memory(memory);
        for page in pages {
            let mut refs = Vec::new();
            for (n, w, repeat) in page {
                for _ in 0..repeat {
                    let at = refs.len() as u64;
                    let node = n % nodes as u16;
                    refs.push(if w { Ref::write(at, node) } else { Ref::read(at, node) });
                }
            }
            let whole = Optimal::new(nodes, c).solve(&refs);
            prop_assert_eq!(small.solve(&refs), whole);
            prop_assert!(small.take_error().is_none());
        }
    }
}
