//! The mapping-algorithm plugin shape: a [`MappingAlgorithm`] maps a sharing matrix onto a
//! machine's logical PUs; [`ALGORITHMS`] lists every one with its source and parameters. A
//! new algorithm is one new file plus one row here. With more threads than PUs every PU takes
//! its share (thread t of an order-based mapping goes to PU order[t mod PUs]).

use crate::cost::PairCosts;
use crate::{bisect, eager, exhaustive, linux, orders, refined, spread, treematch};
use sharemap_core::plugin::{self, Caps, ParamKind, Params, Plugin, given, switch};
use sharemap_core::{SharingMatrix, Spec, SpecError};
use sharemap_machine::Machine;

pub trait MappingAlgorithm: Send + Sync {
    /// The spec that builds it again.
    fn spec(&self) -> String;

    /// Whether it can map this many threads on this many PUs (exhaustive search cannot on
    /// large machines): `--algo all` leaves out those that cannot.
    fn fits(&self, threads: usize, pus: usize) -> Result<(), MappingError> {
        let _ = (threads, pus);
        Ok(())
    }

    /// Each thread's logical PU.
    fn map(&self, m: &SharingMatrix, machine: &Machine, costs: &PairCosts) -> Result<Vec<usize>, MappingError>;

    /// Each thread's logical PU, knowing the data the threads use (`demand`) when the caller
    /// does, and how many last-level caches it spread them over when it weighed that. Only an
    /// algorithm that weighs cache capacity uses the demand (sharemap's default does); the
    /// others map as `map`.
    fn map_with(
        &self,
        m: &SharingMatrix,
        machine: &Machine,
        costs: &PairCosts,
        demand: Option<&crate::Demand>,
    ) -> Result<(Vec<usize>, Option<crate::capacity::Spread>), MappingError> {
        let _ = demand;
        Ok((self.map(m, machine, costs)?, None))
    }
}

/// Why an algorithm cannot map this matrix on this machine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("exhaustive handles machines of at most {max} PUs (this one has {pus})")]
    TooManyPus { pus: usize, max: usize },
    #[error("exhaustive needs at most one thread per PU ({threads} threads, {pus} PUs)")]
    MoreThreadsThanPus { threads: usize, pus: usize },
}

/// How a registry row builds its algorithm from its parameters; the seed is the default
/// of seeded ones.
pub type BuildAlgorithm = fn(&Params, u64) -> Box<dyn MappingAlgorithm>;

/// A registry row: how `sharemap algorithms` lists an algorithm and how it is built.
pub type AlgorithmInfo = Plugin<BuildAlgorithm>;

/// The registry's name in errors.
pub const KIND: &str = "algorithm";

const fn plain(
    name: &'static str,
    source: &'static str,
    summary: &'static str,
    build: BuildAlgorithm,
) -> AlgorithmInfo {
    AlgorithmInfo { name, source, summary, params: &[], caps: Caps::NONE, build }
}

/// Every algorithm, in the order `--algo all` runs them.
pub static ALGORITHMS: &[AlgorithmInfo] = &[
    plain(
        "sharemap",
        "sharemap",
        "one thread per core while cores are free (SMT siblings avoided: they share a core's pipeline, which the cost model does not price, so compact can cost less), then the cheapest of bisection, eagermap (up to 256 threads) and the order-based mappings under that rule, refined by cost-aware pairwise swaps; given the threads' data, spread first over as many last-level caches as it needs (the default)",
        |_, _| Box::new(refined::Refined),
    ),
    plain(
        "spread",
        "sharemap",
        "spread then group: the threads split evenly over every last-level cache, grouped by sharing within each (for memory-bandwidth-bound programs: every node's memory works)",
        |_, _| Box::new(spread::Spread),
    ),
    plain(
        "eagermap",
        "EagerMap (Cruz et al.)",
        "hierarchical greedy grouping, bottom-up over the shared levels",
        |_, _| Box::new(eager::Eager),
    ),
    plain(
        "treematch",
        "TreeMatch (Jeannot and Mercier)",
        "tree matching by levels: groups that leave the least sharing outside them",
        |_, _| Box::new(treematch::TreeMatch),
    ),
    plain(
        "bisection",
        "Scotch's dual recursive bipartitioning",
        "top-down recursive bisection of the threads with Kernighan-Lin swaps, as Scotch maps",
        |_, _| Box::new(bisect::Bisection),
    ),
    plain("compact", "hwloc logical order", "hwloc logical order: neighbours share every cache level", |_, _| {
        Box::new(orders::Compact)
    }),
    plain("scatter", "hwloc distrib", "spread over packages first", |_, _| Box::new(orders::Scatter)),
    plain("round-robin", "seed 002's round-robin", "one thread per core, sharing the last-level cache", |_, _| {
        Box::new(orders::RoundRobin)
    }),
    plain("identity", "the OS's CPU numbering", "thread i on the CPU numbered i (mod CPUs)", |_, _| {
        Box::new(orders::Identity)
    }),
    AlgorithmInfo {
        name: "os",
        source: "Linux 6.1's scheduler (kernel/sched/fair.c: find_idlest_cpu, load_balance; docs/os-model.md)",
        summary: "where Linux puts busy threads that the main thread creates: fork balancing to the idlest group down the scheduling domains, then the load balancer until it finds the machine balanced; the sharing is ignored (the baseline)",
        params: &[
            given(
                "start",
                "CPU 0",
                ParamKind::Integer { min: 0, max: u32::MAX as u64 },
                "OS number of the CPU the main thread starts on",
            ),
            switch("balance", "1", "run the periodic load balancer after the threads are created"),
        ],
        caps: Caps { in_all: false, ..Caps::NONE },
        build: |p, _| {
            Box::new(linux::Os { start: p.get_integer("start").map(|c| c as u32), balance: p.switch("balance") })
        },
    },
    AlgorithmInfo {
        name: "random",
        source: "baseline",
        summary: "a seeded random permutation",
        params: &[given("seed", "--seed", ParamKind::Integer { min: 0, max: u64::MAX }, "the permutation's seed")],
        caps: Caps::NONE,
        build: |params, seed| Box::new(orders::Random(params.get_integer("seed").unwrap_or(seed))),
    },
    plain("exhaustive", "branch and bound", "the exact optimum (machines of at most 10 PUs)", |_, _| {
        Box::new(exhaustive::Exhaustive)
    }),
];

pub fn find(name: &str) -> Option<&'static AlgorithmInfo> {
    plugin::find(ALGORITHMS, name)
}

/// Builds the algorithm a spec names (`eagermap`, `random:seed=3`); `seed` is the default
/// of seeded algorithms.
pub fn build(text: &str, seed: u64) -> Result<Box<dyn MappingAlgorithm>, SpecError> {
    let spec = Spec::parse(text).map_err(|e| SpecError { kind: KIND, ..e })?;
    let info = find(&spec.name).ok_or_else(|| {
        let names = plugin::names(ALGORITHMS);
        let hint = sharemap_core::did_you_mean(&spec.name, ALGORITHMS.iter().map(|a| a.name));
        spec.error(KIND, format!("unknown algorithm '{}' ({hint}algorithms: {names}, or all)", spec.name))
    })?;
    Ok((info.build)(&info.params(KIND, &[&spec.options])?, seed))
}

/// Whether `text` names an algorithm.
pub fn is_algorithm(text: &str) -> bool {
    Spec::parse(text).is_ok_and(|s| find(&s.name).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::CostModel;
    use crate::cost::mapping_cost;

    /// Maps with the algorithm `name` builds (with seed 1 for seeded ones).
    pub fn map(
        name: &str,
        m: &SharingMatrix,
        machine: &Machine,
        costs: &PairCosts,
    ) -> Result<Vec<usize>, MappingError> {
        build(name, 1).expect("a registered algorithm").map(m, machine, costs)
    }
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
            let best = mapping_cost(&m, &map("exhaustive", &m, &machine, &c).unwrap(), &c);
            prop_assert!((best - brute_force(&m, &c)).abs() < 1e-9);
            for info in ALGORITHMS {
                let name = info.name;
                let mp = build(name, 7).unwrap().map(&m, &machine, &c).unwrap();
                prop_assert_eq!(mp.len(), n);
                prop_assert!(mp.iter().all(|&q| q < machine.pu_count()));
                let mut seen = mp.clone();
                seen.sort();
                seen.dedup();
                prop_assert_eq!(seen.len(), n, "{} puts two threads on one PU", name);
                prop_assert!(mapping_cost(&m, &mp, &c) >= best - 1e-9, "{} beats the optimum", name);
            }
            // The default takes one thread per core while cores are free: it is the cheapest of
            // the mappings under that rule.
            let refined = mapping_cost(&m, &map("sharemap", &m, &machine, &c).unwrap(), &c);
            for alg in ["bisection", "eagermap", "compact", "round-robin", "scatter"] {
                let mut other = map(alg, &m, &machine, &c).unwrap();
                crate::refined::one_per_core(&mut other, &machine, &c);
                let other = mapping_cost(&m, &other, &c);
                prop_assert!(refined <= other + 1e-9, "{} beats the default", alg);
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
        assert_eq!(&at("compact")[..4], &[0, 1, 2, 3]);
        // Scatter: consecutive threads on different packages.
        let s = at("scatter");
        assert_eq!((s[0] / 4, s[1] / 4), (0, 1));
        // Round-robin: one thread per core first (different cores, same package's L3).
        assert_eq!(&at("round-robin")[..4], &[0, 2, 4, 6]);
        // Oversubscribed: 16 threads on 8 PUs, two each.
        let big = SharingMatrix::new(16);
        for alg in ["compact", "eagermap", "treematch", "bisection", "sharemap", "scatter"] {
            let mp = map(alg, &big, &machine, &c).unwrap();
            let mut per = vec![0; 8];
            mp.iter().for_each(|&q| per[q] += 1);
            assert!(per.iter().all(|&k| k == 2), "{alg}: {per:?}");
        }
        // Fewer threads than PUs: distinct PUs, and sharing pairs still meet on a core; the
        // default, with cores to spare, puts them on two cores of one package.
        let mut few = SharingMatrix::new(3);
        few.add(0, 2, 10.0);
        for alg in ["eagermap", "treematch", "bisection", "sharemap"] {
            let mp = map(alg, &few, &machine, &c).unwrap();
            assert!(mp[0] != mp[1] && mp[1] != mp[2] && mp[0] != mp[2], "{alg}: {mp:?}");
            if alg == "sharemap" {
                assert!(mp[0] / 4 == mp[2] / 4 && mp[0] / 2 != mp[2] / 2, "{alg}: {mp:?}");
                assert!(mp.iter().map(|p| p / 2).collect::<std::collections::BTreeSet<_>>().len() == 3, "{mp:?}");
            } else {
                assert_eq!(mp[0] / 2, mp[2] / 2, "{alg}: {mp:?}");
            }
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
        let mp = map("eagermap", &m, &machine, &c).unwrap();
        for (a, b) in [(0, 5), (1, 6), (2, 7), (3, 4)] {
            assert_eq!(mp[a] / 2, mp[b] / 2, "threads {a} and {b} share a core");
        }
        let opt = mapping_cost(&m, &map("exhaustive", &m, &machine, &c).unwrap(), &c);
        assert_eq!(mapping_cost(&m, &map("sharemap", &m, &machine, &c).unwrap(), &c), opt);
        assert!(mapping_cost(&m, &map("compact", &m, &machine, &c).unwrap(), &c) > opt);
    }
}
