//! Thread mapping: every requested algorithm on one sharing matrix, with its cost, how much
//! sharing each level of the machine keeps, and whether mapping is worth it at all.

use crate::observer::{Observer, pass};
use crate::{Error, ErrorKind, Result, TraceInput};
use serde::Serialize;
use sharemap_core::SharingMatrix;
use sharemap_machine::Machine;
use sharemap_machine::ThreadPlacement;
use sharemap_mapping::capacity::{self, LevelLoad, Spread};
use sharemap_mapping::{ALGORITHMS, Demand, PairCosts, mapping_cost, potential, sharing_by_level};
use std::time::Instant;

pub use sharemap_mapping::potential::DEFAULT_THRESHOLD as POTENTIAL_THRESHOLD;
pub use sharemap_mapping::{CostModel, os_mapping};

/// What to map.
#[derive(Clone, Debug)]
pub struct MapRequest {
    /// A comma list of algorithm specs (`sharemap,random:seed=3`) or `all` (which leaves
    /// out `exhaustive` where it cannot run).
    pub algorithms: String,
    /// How the machine's levels are priced.
    pub cost_model: CostModel,
}

impl Default for MapRequest {
    fn default() -> Self {
        MapRequest { algorithms: "sharemap".into(), cost_model: CostModel::Latency }
    }
}

impl MapRequest {
    /// Every algorithm named exists and takes its options: checked before any matrix is read.
    pub fn check(&self, seed: u64) -> Result<()> {
        for (spec, _) in self.specs()? {
            sharemap_mapping::build(&spec, seed)?;
        }
        Ok(())
    }

    /// The algorithms asked for, `all` expanded; each marked true when `all` brought it.
    fn specs(&self) -> Result<Vec<(String, bool)>> {
        let every =
            || ALGORITHMS.iter().map(|a| sharemap_core::Spec { name: a.name.into(), options: Vec::new() }).collect();
        let listed = sharemap_core::Spec::parse_list_with_all(&self.algorithms, "algorithm", every)?;
        Ok(listed.into_iter().map(|(s, all)| (s.to_string(), all)).collect())
    }
}

/// `latency` (ns of the lowest shared level) or `hops`.
pub fn cost_model(name: &str) -> Result<CostModel> {
    match name {
        "latency" => Ok(CostModel::Latency),
        "hops" => Ok(CostModel::Hops),
        other => Err(Error::new(ErrorKind::CostModel, format!("'{other}': expected latency or hops"))),
    }
}

/// A sharing matrix and, when it came from a trace, the accesses it was counted over and the
/// data the threads use (what sharemap's default algorithm weighs against cache capacity).
#[derive(Clone, Debug)]
pub struct Sharing {
    pub matrix: SharingMatrix,
    pub accesses: Option<u64>,
    pub demand: Option<Demand>,
}

impl Sharing {
    /// A matrix alone (a matrix file): no accesses, no pages.
    pub fn matrix(matrix: SharingMatrix) -> Sharing {
        Sharing { matrix, accesses: None, demand: None }
    }

    /// A detector's findings on a trace: its matrix, the accesses it saw and the pages.
    pub fn of_detection(d: &sharemap_detect::Detection) -> Sharing {
        Sharing {
            matrix: d.matrix.clone(),
            accesses: Some(d.seen),
            demand: Some(Demand::from_usage(&d.pages, d.matrix.threads())),
        }
    }
}

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
    /// How many last-level caches it spread the threads over and why (sharemap's default,
    /// when the data is known).
    pub spread: Option<Spread>,
    /// Per cache level, the data its fullest cache holds under this mapping (when known).
    pub loads: Vec<LevelLoad>,
    /// The machine whose PUs these are, by name and as an hwloc synthetic string: `run`
    /// refuses a mapping made for another machine than its host.
    pub machine: String,
    pub machine_synthetic: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LevelShare {
    pub level: String,
    pub share: f64,
}

/// Every mapping of a matrix, and what to compare them with.
#[derive(Clone, Debug, Serialize)]
pub struct Mapping {
    pub threads: usize,
    pub mappings: Vec<Mapped>,
    /// The modelled OS's mapping and its cost (`os`: where Linux's scheduler puts the
    /// threads): the baseline the papers compare with.
    pub os_mapping: Vec<usize>,
    pub os_cost: f64,
    /// The seeded random mapping's cost.
    pub random_cost: f64,
    /// Whether mapping is worth it at all.
    pub potential: Potential,
    /// The data the threads use, when the sharing came from a trace.
    pub demand: Option<Demand>,
}

impl Mapping {
    /// Why sharemap's default costs more than a cheaper mapping in the list, when the reason
    /// is its one-thread-per-core rule: the cheaper one puts threads on SMT siblings, which
    /// share one core's pipeline and TLBs, a cost the per-level model does not see. None when
    /// the default is the cheapest, is not in the list, or the cheaper ones avoid siblings
    /// too (then the reason is elsewhere: the data's spread over caches, said beside it).
    pub fn default_rule_note(&self, machine: &Machine) -> Option<String> {
        let ours = self.mappings.iter().find(|m| m.algorithm.split(':').next() == Some("sharemap"))?;
        let core = machine.core_of_pu();
        let on_siblings = |m: &Mapped| {
            let mut cores: Vec<usize> = m.mapping.iter().map(|&pu| core[pu]).collect();
            cores.sort_unstable();
            cores.windows(2).any(|w| w[0] == w[1])
        };
        let cheaper: Vec<&str> = self
            .mappings
            .iter()
            .filter(|m| m.cost < ours.cost * (1.0 - 1e-9) && on_siblings(m) && !on_siblings(ours))
            .map(|m| m.algorithm.as_str())
            .collect();
        if cheaper.is_empty() {
            return None;
        }
        Some(format!(
            "{} cost{} less than sharemap's mapping by putting threads that share on SMT siblings of one core, which this cost model prices cheapest; sharemap's rule is one thread per core while cores are free, because siblings compete for one core's pipeline and TLBs, which the model does not price (`--algo compact` if you want siblings)",
            cheaper.join(", "),
            if cheaper.len() == 1 { "s" } else { "" }
        ))
    }
}

/// The mapping-potential gate: how much a grouped mapping gains over a random one
/// (structural), weighted by how much of the run's accesses share (when known).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Potential {
    pub score: f64,
    /// 1 - grouped cost / expected random cost.
    pub structural: f64,
    /// The sharing weight, and the share of accesses that share (percent), when the
    /// matrix came from a trace.
    pub weight: Option<f64>,
    pub sharing_percent: Option<f64>,
    pub accesses: Option<u64>,
    /// The score at which mapping is deemed worth it.
    pub threshold: f64,
}

impl Potential {
    /// The gate of a matrix on a machine.
    pub fn of(matrix: &SharingMatrix, machine: &Machine, model: CostModel, accesses: Option<u64>) -> Potential {
        let costs = PairCosts::new(machine, model);
        let structural = potential::potential(matrix, machine, &costs);
        let weight = accesses.map(|n| potential::sharing_weight(matrix.total(), n));
        Potential {
            score: structural * weight.unwrap_or(1.0),
            structural,
            weight,
            sharing_percent: accesses.map(|n| 100.0 * matrix.total() / n.max(1) as f64),
            accesses,
            threshold: potential::DEFAULT_THRESHOLD,
        }
    }

    pub fn worth_mapping(&self) -> bool {
        self.score >= self.threshold
    }

    /// The gate's verdict in words. Without an access count (a matrix file) only the
    /// sharing's structure is known, not how much of the run it is: eleven units of sharing
    /// in millions of accesses would pass as "worth mapping". Then no verdict is given.
    pub fn verdict(&self) -> String {
        match (self.accesses, self.worth_mapping()) {
            (Some(_), true) => "the sharing is concentrated enough to group threads by; whether a mapping pays on this machine (its caches' capacity, its memory bandwidth): sharemap advise".into(),
            (Some(_), false) => format!(
                "below {}: too little sharing for grouping threads by it to gain (other mappings: sharemap advise)",
                self.threshold
            ),
            (None, _) => "not judged: a matrix file has no access count, so how much of the run the sharing is cannot be told (map the trace it came from for a verdict)".into(),
        }
    }
}

/// Runs the request's algorithms on the matrix. `seed` seeds `random` unless its spec gives
/// one.
///
/// ```
/// use sharemap::{Machine, SharingMatrix};
/// use sharemap::map::{MapRequest, Sharing};
/// // Two pairs of threads share; two packages of two cores.
/// let mut m = SharingMatrix::new(4);
/// m.add(0, 3, 100.0);
/// m.add(1, 2, 100.0);
/// let machine = Machine::from_spec("pack:2 core:2 pu:1").unwrap();
/// let request = MapRequest { algorithms: "sharemap,random:seed=3".into(), ..Default::default() };
/// let mapped = sharemap::map::map(&Sharing::matrix(m), &machine, &request, 1).unwrap();
/// let best = &mapped.mappings[0].mapping;
/// assert_eq!(best[0] / 2, best[3] / 2, "a sharing pair shares a package");
/// assert!(mapped.mappings[0].cost <= mapped.mappings[1].cost);
/// ```
pub fn map(sharing: &Sharing, machine: &Machine, request: &MapRequest, seed: u64) -> Result<Mapping> {
    let matrix = &sharing.matrix;
    if matrix.threads() == 0 {
        return Err(Error::new(ErrorKind::Sharing, "no threads"));
    }
    let specs = request.specs()?;
    let built =
        specs.iter().map(|(s, _)| sharemap_mapping::build(s, seed)).collect::<std::result::Result<Vec<_>, _>>()?;
    let costs = PairCosts::new(machine, request.cost_model);
    let mut mappings = Vec::new();
    for ((spec, all), alg) in specs.iter().zip(built) {
        if *all && alg.fits(matrix.threads(), machine.pu_count()).is_err() {
            continue; // `all` skips what an algorithm cannot do; asking for it alone is an error.
        }
        let start = Instant::now();
        let (mapping, spread) = alg
            .map_with(matrix, machine, &costs, sharing.demand.as_ref())
            .map_err(|e| Error::new(ErrorKind::Mapping, e.to_string()))?;
        let elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
        let loads = sharing.demand.as_ref().map(|d| capacity::loads(&mapping, machine, d)).unwrap_or_default();
        let sharing_by_level = sharing_by_level(matrix, &mapping, machine)
            .into_iter()
            .map(|(level, share)| LevelShare { level, share })
            .collect();
        mappings.push(Mapped {
            algorithm: spec.clone(),
            cost: mapping_cost(matrix, &mapping, &costs),
            mapping,
            elapsed_ms,
            sharing_by_level,
            spread,
            loads,
            machine: machine.name.clone(),
            machine_synthetic: machine.synthetic(),
        });
    }
    let os_mapping = sharemap_mapping::os_mapping(machine, matrix.threads());
    Ok(Mapping {
        threads: matrix.threads(),
        mappings,
        os_cost: mapping_cost(matrix, &os_mapping, &costs),
        os_mapping,
        random_cost: random_cost(matrix, machine, &costs, seed),
        potential: Potential::of(matrix, machine, request.cost_model, sharing.accesses),
        demand: sharing.demand.clone(),
    })
}

/// What a mapping costs: the sum over thread pairs of their sharing times the price of the
/// lowest level they share.
pub fn cost(matrix: &SharingMatrix, mapping: &[usize], machine: &Machine, model: CostModel) -> f64 {
    mapping_cost(matrix, mapping, &PairCosts::new(machine, model))
}

/// The cost of the seeded random mapping.
fn random_cost(matrix: &SharingMatrix, machine: &Machine, costs: &PairCosts, seed: u64) -> f64 {
    let random = sharemap_mapping::build("random", seed).expect("registered");
    let mapping = random.map(matrix, machine, costs).expect("random maps any matrix");
    mapping_cost(matrix, &mapping, costs)
}

/// The oracle's sharing of a trace (cache-line blocks), with the accesses it saw.
pub(crate) fn oracle_sharing(input: &TraceInput, observer: &dyn Observer) -> Result<Sharing> {
    let mut trace = input.open()?;
    let machine = Machine::from_spec("pu:1")?;
    let placement = ThreadPlacement::identity(&machine);
    let spec = sharemap_detect::detector::parse("oracle")?;
    let ctx = sharemap_detect::DetectorContext::new(trace.metadata(), &placement)?;
    let d = sharemap_detect::detector::build(&spec, &ctx)?;
    let total = trace.access_count_hint();
    let found = pass(observer, "detecting sharing", total, |progress| {
        sharemap_detect::detect_many(trace.as_mut(), vec![d], 0, progress)
    })?;
    let detection = found.into_iter().next().expect("one detector").detection;
    Ok(Sharing::of_detection(&detection))
}

/// The sharing `input` holds: a matrix file (numalize CSV, TopoMatch .mat) as it is, or a
/// trace's oracle matrix with its access count. A `.csv` file is a trace when it starts with
/// a `thread` header.
pub fn load_sharing(input: &TraceInput, observer: &dyn Observer) -> Result<Sharing> {
    if let Some(path) = input.path().filter(|_| is_matrix_file(input)) {
        if input.exclusion().is_some() {
            return Err(Error::new(ErrorKind::Exclude, "works on traces, not on a matrix file"));
        }
        let matrix = SharingMatrix::read(path).map_err(|e| Error::new(ErrorKind::Sharing, e.to_string()))?;
        return Ok(Sharing::matrix(matrix));
    }
    oracle_sharing(input, observer)
}

/// Whether a file holds a matrix rather than a trace: `.mat`, or a `.csv` whose first bytes
/// are not a trace's header (the file may be gigabytes).
pub fn is_matrix_file(input: &TraceInput) -> bool {
    let Some(path) = input.path() else { return false };
    match path.extension().and_then(|e| e.to_str()) {
        Some("mat") => true,
        Some("csv") if !input.has_format() => {
            use std::io::Read;
            let mut head = Vec::with_capacity(64);
            if std::fs::File::open(path).and_then(|f| f.take(64).read_to_end(&mut head)).is_err() {
                // Unreadable: the trace reader says why.
                return false;
            }
            !String::from_utf8_lossy(&head).trim_start().trim_start_matches('"').starts_with("thread")
        }
        _ => false,
    }
}

/// The matrix as a Scotch source graph (`scotch_gmap` input).
pub fn scotch_graph(matrix: &SharingMatrix) -> String {
    sharemap_mapping::scotch::graph(matrix)
}

/// The machine as a Scotch tree-leaf target architecture, priced by latency.
pub fn scotch_target(machine: &Machine) -> String {
    sharemap_mapping::scotch::tleaf(machine, CostModel::Latency)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A matrix file's sharing (no access count) gets no verdict, however its structure
    /// scores: 11 units would pass the gate; with the run's accesses it is weighed.
    #[test]
    fn the_gate_judges_only_with_an_access_count() {
        let mut m = SharingMatrix::new(4);
        m.add(0, 1, 11.0);
        m.add(2, 3, 11.0);
        let machine = Machine::from_spec("pack:2 l3:1 core:2 pu:1").unwrap();
        let file = Potential::of(&m, &machine, CostModel::Latency, None);
        assert!(file.structural >= file.threshold, "the structure alone would pass: {}", file.structural);
        assert!(file.verdict().starts_with("not judged"), "{}", file.verdict());
        let few = Potential::of(&m, &machine, CostModel::Latency, Some(2_000_000));
        assert!(few.verdict().starts_with("below"), "22 units in 2 M accesses: {}", few.verdict());
        let many = Potential::of(&m, &machine, CostModel::Latency, Some(22));
        assert!(many.verdict().starts_with("the sharing is concentrated enough"), "{}", many.verdict());
    }

    /// Two sharing pairs on two cores of two SMT siblings each: compact puts each pair on
    /// siblings and costs less; sharemap's one-thread-per-core rule is then named beside the
    /// costs. Without SMT no mapping uses siblings, and nothing is said.
    #[test]
    fn the_default_rule_is_named_where_siblings_make_another_mapping_cheaper() {
        let mut m = SharingMatrix::new(2);
        m.add(0, 1, 100.0);
        let request = MapRequest { algorithms: "sharemap,compact".into(), ..Default::default() };
        let smt = Machine::from_spec("pack:1 core:2 pu:2").unwrap();
        let mapped = map(&Sharing::matrix(m.clone()), &smt, &request, 1).unwrap();
        assert!(mapped.mappings[1].cost < mapped.mappings[0].cost, "compact's siblings price cheaper");
        let note = mapped.default_rule_note(&smt).expect("the rule is named");
        assert!(note.starts_with("compact costs less") && note.contains("one thread per core"), "{note}");
        let no_smt = Machine::from_spec("pack:1 core:4 pu:1").unwrap();
        assert_eq!(map(&Sharing::matrix(m), &no_smt, &request, 1).unwrap().default_rule_note(&no_smt), None);
    }
}
