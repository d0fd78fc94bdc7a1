//! Thread mapping: every requested algorithm on one sharing matrix, with its cost and how
//! much sharing each level of the machine keeps.

use crate::{Error, ErrorKind, Result};
use serde::Serialize;
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;
use sharemap_mapping::exhaustive::EXHAUSTIVE_MAX_PUS;
use sharemap_mapping::{ALGORITHMS, CostModel, PairCosts, mapping_cost, sharing_by_level};
use std::time::Instant;

/// One algorithm's mapping.
#[derive(Clone, Debug, Serialize)]
pub struct Mapped {
    pub algorithm: String,
    /// Logical PU index of each thread.
    pub mapping: Vec<usize>,
    pub cost: f64,
    pub elapsed_ms: f64,
    /// EagerMap's view: the share of sharing kept within each level, from the bottom up.
    pub sharing_by_level: Vec<LevelShare>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LevelShare {
    pub level: String,
    pub share: f64,
}

/// `latency` (ns of the lowest shared level) or `hops`.
pub fn cost_model(name: &str) -> Result<CostModel> {
    match name {
        "latency" => Ok(CostModel::Latency),
        "hops" => Ok(CostModel::Hops),
        other => Err(Error::new(ErrorKind::CostModel, format!("'{other}': expected latency or hops"))),
    }
}

/// Runs the algorithms of a comma list (or `all`, which leaves out `exhaustive` where it
/// cannot run) on the matrix. `seed` seeds `random` unless its spec gives one.
///
/// ```
/// use sharemap::core::SharingMatrix;
/// use sharemap::machine::Machine;
/// // Two pairs of threads share; two packages of two cores.
/// let mut m = SharingMatrix::new(4);
/// m.add(0, 3, 100.0);
/// m.add(1, 2, 100.0);
/// let machine = Machine::from_spec("pack:2 core:2 pu:1").unwrap();
/// let model = sharemap::map::cost_model("latency").unwrap();
/// let mapped = sharemap::map(&m, &machine, "sharemap,random:seed=3", model, 1).unwrap();
/// let best = &mapped[0].mapping;
/// assert_eq!(best[0] / 2, best[3] / 2, "a sharing pair shares a package");
/// assert!(mapped[0].cost <= mapped[1].cost);
/// ```
pub fn map(
    matrix: &SharingMatrix,
    machine: &Machine,
    algorithms: &str,
    model: CostModel,
    seed: u64,
) -> Result<Vec<Mapped>> {
    if matrix.threads() == 0 {
        return Err(Error::new(ErrorKind::Sharing, "no threads"));
    }
    let all = algorithms.trim() == "all";
    let specs: Vec<String> = if all {
        ALGORITHMS.iter().map(|a| a.name.to_string()).collect()
    } else {
        sharemap_core::Spec::parse_list(algorithms)?.iter().map(|s| s.to_string()).collect()
    };
    let built = specs.iter().map(|s| sharemap_mapping::build(s, seed)).collect::<std::result::Result<Vec<_>, _>>()?;
    let costs = PairCosts::new(machine, model);
    let mut out = Vec::new();
    for (spec, alg) in specs.iter().zip(built) {
        let cannot = machine.pu_count() > EXHAUSTIVE_MAX_PUS || matrix.threads() > machine.pu_count();
        if all && spec == "exhaustive" && cannot {
            continue; // `all` skips what exhaustive cannot do; asking for it alone is an error.
        }
        let start = Instant::now();
        let mapping = alg.map(matrix, machine, &costs).map_err(|e| Error::new(ErrorKind::Mapping, e.to_string()))?;
        let elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
        let sharing_by_level = sharing_by_level(matrix, &mapping, machine)
            .into_iter()
            .map(|(level, share)| LevelShare { level, share })
            .collect();
        out.push(Mapped {
            algorithm: spec.clone(),
            cost: mapping_cost(matrix, &mapping, &costs),
            mapping,
            elapsed_ms,
            sharing_by_level,
        });
    }
    Ok(out)
}

/// The cost of the seeded random mapping: the baseline the others are compared with.
pub fn random_cost(matrix: &SharingMatrix, machine: &Machine, costs: &PairCosts, seed: u64) -> f64 {
    let random = sharemap_mapping::build("random", seed).expect("registered");
    let mapping = random.map(matrix, machine, costs).expect("random maps any matrix");
    mapping_cost(matrix, &mapping, costs)
}
