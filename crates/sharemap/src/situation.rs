//! The situation an analysis runs in, described once and validated once: the machine, the
//! cost parameters, where threads run, the page size, the time scale and the seed.

use crate::TraceInput;
use crate::{Error, ErrorKind, Result};
use serde::Serialize;
use sharemap_core::{PageSize, SharingMatrix};
use sharemap_detect::DetectorContext;
use sharemap_machine::ThreadPlacement;
use sharemap_machine::{CostParams, Machine};
use sharemap_mapping::{CostModel, PairCosts};
use sharemap_placement::cost::MAX_NODES;
use sharemap_placement::policies::Settings;
use sharemap_trace::TraceSource;

/// Where threads run, before it is resolved on a machine.
#[derive(Clone, Debug, PartialEq)]
pub enum ThreadMap {
    /// Where the modelled operating system puts them: the `os` algorithm (Linux's fork
    /// balancing and load balancer), with its options (`os:start=4`). The default.
    Os(String),
    /// Thread i on the CPU the kernel numbers i (mod CPUs).
    Identity,
    /// A mapping algorithm (`sharemap`, `eagermap`, ...) run on the trace's sharing.
    Algorithm(String),
    /// One logical PU per thread (thread t takes entry t mod the length).
    Pus(Vec<usize>),
}

impl ThreadMap {
    /// `spec` as a list of thread maps: the items of a comma list each of which names a
    /// mapping (an algorithm, `os`, `identity`, `trace:`/`matrix:` sharing; `all` every
    /// algorithm), else `spec` whole (a list of PUs, a file).
    pub fn split_list(spec: &str) -> Vec<String> {
        let items: Vec<&str> = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        let names_a_mapping = |x: &str| {
            x == "all"
                || x == "identity"
                || x.starts_with("trace:")
                || x.starts_with("matrix:")
                || sharemap_mapping::is_algorithm(x)
        };
        if items.len() > 1 && items.iter().all(|x| names_a_mapping(x)) {
            items
                .iter()
                .flat_map(|&x| match x {
                    "all" => sharemap_mapping::ALGORITHMS.iter().map(|a| a.name.to_string()).collect::<Vec<_>>(),
                    x => vec![x.to_string()],
                })
                .collect()
        } else {
            vec![spec.to_string()]
        }
    }

    /// `os` (the modelled OS), `identity`, a mapping algorithm's spec, a comma list of
    /// logical PUs (one per thread), or a file holding one: numbers separated by commas or
    /// white space, or the JSON `sharemap map --json` prints (its first mapping).
    pub fn parse(spec: &str) -> Result<ThreadMap> {
        let spec = spec.trim();
        if spec == "identity" {
            return Ok(ThreadMap::Identity);
        }
        if sharemap_core::Spec::parse(spec).is_ok_and(|s| s.name == "os") {
            sharemap_mapping::build(spec, 0).map_err(|e| Error::new(ErrorKind::ThreadMap, e.to_string()))?;
            return Ok(ThreadMap::Os(spec.into()));
        }
        if sharemap_mapping::is_algorithm(spec) {
            return Ok(ThreadMap::Algorithm(spec.into()));
        }
        let path = std::path::Path::new(spec);
        let text = if path.is_file() {
            let text =
                std::fs::read_to_string(path).map_err(|e| Error::new(ErrorKind::ThreadMap, format!("{spec}: {e}")))?;
            if text.trim_start().starts_with('[') {
                return Self::from_map_json(spec, &text);
            }
            text
        } else {
            spec.to_string()
        };
        if text.contains(',')
            && let Err(k) = sharemap_core::spec::comma_items(&text)
        {
            return Err(Error::new(ErrorKind::ThreadMap, format!("'{spec}': {}", sharemap_core::spec::empty_item(k))));
        }
        if text.contains(',') && Self::split_list(&text).len() > 1 {
            return Err(Error::new(
                ErrorKind::ThreadMap,
                format!("'{spec}' is a list of mappings: this one takes one (`run --thread-map` takes a list)"),
            ));
        }
        let pus = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|x| !x.is_empty())
            .map(|x| {
                x.parse::<usize>().map_err(|_| {
                    let names = sharemap_mapping::ALGORITHMS.iter().map(|a| a.name).chain(["os", "identity"]);
                    let hint = sharemap_core::did_you_mean(x, names);
                    Error::new(
                        ErrorKind::ThreadMap,
                        format!("'{x}' is not a PU number, a mapping algorithm or a file ({hint}see `sharemap list algorithms`)"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if pus.is_empty() {
            return Err(Error::new(ErrorKind::ThreadMap, format!("'{spec}' names no PU")));
        }
        Self::pu_list(pus).map_err(|why| Error::new(ErrorKind::ThreadMap, why))
    }

    /// A list of PUs, one per thread: no longer than a trace's threads can be.
    fn pu_list(pus: Vec<usize>) -> std::result::Result<ThreadMap, String> {
        let most = sharemap_core::MAX_THREADS as usize;
        if pus.len() > most {
            return Err(format!("{} PUs listed, one per thread: a program has at most {most} threads here", pus.len()));
        }
        Ok(ThreadMap::Pus(pus))
    }

    /// The machine a `sharemap map --json` file was made for (its name and synthetic
    /// string), when `spec` names such a file.
    pub fn made_for(spec: &str) -> Option<(String, Option<String>)> {
        let text = std::fs::read_to_string(spec.trim()).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let first = v.get(0)?;
        let name = first.get("machine")?.as_str()?.to_string();
        Some((name, first.get("machine_synthetic").and_then(|s| s.as_str()).map(String::from)))
    }

    /// The first mapping of `sharemap map --json`'s output.
    fn from_map_json(path: &str, text: &str) -> Result<ThreadMap> {
        let bad = |why: &str| Error::new(ErrorKind::ThreadMap, format!("{path}: {why}"));
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(&format!("not valid JSON ({e})")))?;
        let mapping = v.get(0).and_then(|m| m.get("mapping")).and_then(|m| m.as_array()).ok_or_else(|| {
            bad("expected the array `sharemap map --json` prints, with a `mapping` in its first entry")
        })?;
        let pus = mapping
            .iter()
            .map(|p| p.as_u64().map(|p| p as usize).ok_or_else(|| bad("a mapping entry is not a PU number")))
            .collect::<Result<Vec<_>>>()?;
        if pus.is_empty() {
            return Err(bad("the mapping is empty"));
        }
        Self::pu_list(pus).map_err(|why| bad(&why))
    }
}

/// The sharing a mapping algorithm maps.
#[derive(Clone, Debug, PartialEq)]
pub enum Sharing {
    /// A detector spec, run on the trace.
    Detector(String),
    /// A matrix read elsewhere; it must have one row per thread of the trace.
    Matrix(SharingMatrix),
}

impl Sharing {
    /// A matrix file (numalize comm CSV or TopoMatch .mat) when `text` names one, else a
    /// detector spec to run on the trace.
    pub fn parse(text: &str) -> Result<Sharing> {
        let path = std::path::Path::new(text);
        if !path.is_file() {
            return Ok(Sharing::Detector(text.to_string()));
        }
        let matrix = SharingMatrix::read(path).map_err(|e| Error::new(ErrorKind::Sharing, e.to_string()))?;
        Ok(Sharing::Matrix(matrix))
    }
}

impl Default for ThreadMap {
    fn default() -> Self {
        ThreadMap::Os("os".into())
    }
}

/// Where the modelled OS (`os`, or `os:start=..` given as `spec`) runs `threads` threads.
pub fn os_placement(machine: &Machine, spec: &str, threads: usize) -> Result<ThreadPlacement> {
    let os = sharemap_mapping::build(spec, 0).map_err(|e| Error::new(ErrorKind::ThreadMap, e.to_string()))?;
    let costs = PairCosts::new(machine, CostModel::Latency);
    // The model reads only the thread count; a matrix of one thread stands for the sharing.
    let pus = if spec == "os" {
        sharemap_mapping::os_mapping(machine, threads)
    } else {
        os.map(&SharingMatrix::new(threads.max(1)), machine, &costs)
            .map_err(|e| Error::new(ErrorKind::ThreadMap, e.to_string()))?
    };
    Ok(ThreadPlacement::on_pus(machine, pus)?)
}

impl Default for Sharing {
    fn default() -> Self {
        Sharing::Detector("oracle".into())
    }
}

/// The placement model as the user describes it (the command line's flags, a program's
/// settings); the machine and the seed are the session's.
#[derive(Clone, Debug)]
pub struct Setup {
    /// `ace`, `butterfly`, or `key=value` overrides (r, R, g, G) of the machine's parameters.
    pub cost: Option<String>,
    /// Page size in bytes (default: the trace's).
    pub page_size: Option<u64>,
    pub thread_map: ThreadMap,
    pub sharing: Sharing,
    /// References per millisecond of the traced run; None: the trace's own rate (accesses
    /// over its recorded run time), or `DEFAULT_REFS_PER_MS` for a trace without a clock.
    pub refs_per_ms: Option<f64>,
    /// Policy parameters, `policy.key=value`.
    pub settings: Vec<String>,
    /// Bytes of page references held in memory before spilling to temporary files.
    pub memory_budget: usize,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            cost: None,
            page_size: None,
            thread_map: ThreadMap::default(),
            sharing: Sharing::default(),
            refs_per_ms: None,
            settings: Vec::new(),
            memory_budget: 256 << 20,
        }
    }
}

/// A validated situation.
#[derive(Clone, Debug, Serialize)]
pub struct Situation {
    #[serde(skip)]
    pub machine: Machine,
    pub costs: CostParams,
    pub page_size: PageSize,
    /// The trace's cache-line size.
    pub line_size: u64,
    pub placement: ThreadPlacement,
    pub refs_per_ms: f64,
    /// Where `refs_per_ms` came from.
    pub time_scale: TimeScale,
    pub seed: u64,
    #[serde(skip)]
    pub settings: Settings,
    pub memory_budget: usize,
    /// What the user should know about how the situation was set up (an online mapping
    /// decision that kept the OS mapping, for one).
    pub notes: Vec<String>,
}

impl Situation {
    /// Validates `setup` for the trace on `machine`: everything but the thread placement by
    /// an algorithm is checked from the trace's metadata alone; that one reads the trace's
    /// sharing first.
    pub fn resolve(setup: &Setup, machine: &Machine, seed: u64, input: &TraceInput) -> Result<Situation> {
        let (meta, count) = {
            let source = input.open()?;
            (source.metadata().clone(), source.access_count_hint())
        };
        let mut situation = Situation::check(setup, machine, seed, &meta, count)?;
        if let ThreadMap::Algorithm(name) = &setup.thread_map {
            let alg =
                sharemap_mapping::build(name, seed).map_err(|e| Error::new(ErrorKind::ThreadMap, e.to_string()))?;
            situation.placement = match thread_sharing(&setup.sharing, machine, input.open()?.as_mut())? {
                ThreadSharing::Stay(why) => {
                    situation.notes.push(format!("{why}: threads stay where the OS put them (the os model)"));
                    os_placement(machine, "os", threads_of(&meta, machine))?
                }
                ThreadSharing::Map(matrix, why, demand) => {
                    situation.notes.extend(why.map(|w| format!("{w}: threads mapped with the sharing known then")));
                    let costs = PairCosts::new(machine, CostModel::Latency);
                    let (pus, spread) = alg
                        .map_with(&matrix, machine, &costs, demand.as_ref())
                        .map_err(|e| Error::new(ErrorKind::ThreadMap, format!("{name}: {e}")))?;
                    situation.notes.extend(spread.map(|s| s.why));
                    ThreadPlacement::on_pus(machine, pus)?
                }
            };
        }
        if matches!(setup.thread_map, ThreadMap::Algorithm(_))
            && let Some(note) = one_node_note(machine, &situation.placement, threads_of(&meta, machine))
        {
            situation.notes.push(note);
        }
        Ok(situation)
    }

    /// What can be checked without reading the trace's accesses: the thread placement is
    /// the identity's when an algorithm is to choose it.
    pub(crate) fn check(
        setup: &Setup,
        machine: &Machine,
        seed: u64,
        meta: &sharemap_trace::Metadata,
        count: Option<u64>,
    ) -> Result<Situation> {
        let nodes = machine.numa_count();
        if nodes > MAX_NODES {
            return Err(Error::new(
                ErrorKind::MachineModel,
                format!("'{}' has {nodes} NUMA nodes; the placement model handles at most {MAX_NODES}", machine.name),
            ));
        }
        let page_size = PageSize::new(setup.page_size.unwrap_or(meta.page_size.max(PageSize::MIN)))?;
        let line_size = meta.line_size.max(1);
        let costs =
            parse_cost(setup.cost.as_deref(), machine.cost_for(page_size.bytes(), line_size), page_size.bytes())?;
        costs.validate().map_err(|e| Error::new(ErrorKind::Cost, e.to_string()))?;
        let (refs_per_ms, time_scale) = match setup.refs_per_ms {
            Some(r) if r > 0.0 && r <= MAX_REFS_PER_MS => (r, TimeScale::Given),
            Some(r) => {
                return Err(Error::new(
                    ErrorKind::TimeScale,
                    format!(
                        "{}: expected references per ms above 0 and at most {MAX_REFS_PER_MS:e} (a million per ns)",
                        shown(r)
                    ),
                ));
            }
            None => match (meta.run_ns, count) {
                (Some(ns), Some(n)) if n > 0 => ((n as f64 / (ns as f64 / 1e6)).max(1e-6), TimeScale::Recorded),
                _ => (DEFAULT_REFS_PER_MS, TimeScale::Default),
            },
        };
        if let Some(total) = physical_memory()
            && setup.memory_budget as u64 > total
        {
            return Err(Error::new(
                ErrorKind::MemoryBudget,
                format!("{} MiB is more than this machine's memory ({} MiB)", setup.memory_budget >> 20, total >> 20),
            ));
        }
        let mut settings = Settings::default();
        for s in &setup.settings {
            settings.add(s).map_err(|e| Error::new(ErrorKind::Policy, e.to_string()).in_setting("settings", ""))?;
        }
        let placement = match &setup.thread_map {
            ThreadMap::Os(spec) => os_placement(machine, spec, threads_of(meta, machine))?,
            ThreadMap::Identity | ThreadMap::Algorithm(_) => ThreadPlacement::identity(machine),
            ThreadMap::Pus(pus) => ThreadPlacement::on_pus(machine, pus.clone())?,
        };
        if let ThreadMap::Algorithm(name) = &setup.thread_map {
            sharemap_mapping::build(name, seed).map_err(|e| Error::new(ErrorKind::ThreadMap, e.to_string()))?;
        }
        Ok(Situation {
            machine: machine.clone(),
            costs,
            page_size,
            line_size,
            refs_per_ms,
            time_scale,
            seed,
            settings,
            memory_budget: setup.memory_budget.max(16 << 20),
            // The algorithm's placement is known once resolved: its note comes then.
            notes: match setup.thread_map {
                ThreadMap::Algorithm(_) => Vec::new(),
                _ => one_node_note(machine, &placement, threads_of(meta, machine)).into_iter().collect(),
            },
            placement,
        })
    }
}

/// What makes the placement question trivial, said: one NUMA node, or every thread on one.
fn one_node_note(machine: &Machine, placement: &ThreadPlacement, threads: usize) -> Option<String> {
    if machine.numa_count() <= 1 {
        return Some("one NUMA node, so every reference is local; give a NUMA machine with --machine".into());
    }
    let node = placement.node(0);
    (threads > 1 && (1..threads as u32).all(|t| placement.node(t) == node)).then(|| {
        format!(
            "all {threads} threads run on NUMA node {node}, so any policy that keeps pages there ties with the optimum (to compare policies across nodes, spread them: --thread-map scatter)"
        )
    })
}

/// The threads a placement is computed for: the trace's, or one per PU when it does not
/// say (a CSV trace counts them only once read).
fn threads_of(meta: &sharemap_trace::Metadata, machine: &Machine) -> usize {
    if meta.threads > 0 { meta.threads as usize } else { machine.pu_count() }
}

/// This machine's memory in bytes (MemTotal of /proc/meminfo), when it can be read.
fn physical_memory() -> Option<u64> {
    meminfo("MemTotal")
}

/// A field of /proc/meminfo in bytes (`MemTotal`, `MemAvailable`), when it can be read.
pub fn meminfo(key: &str) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let value = info.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?;
    let kb: u64 = value.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// References per ms assumed for a trace without a clock (`--refs-per-ms`'s default then).
pub const DEFAULT_REFS_PER_MS: f64 = 1000.0;

/// Where the time scale of the time-driven policies came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeScale {
    /// Given by the user.
    Given,
    /// The trace's accesses over its recorded run time.
    Recorded,
    /// `DEFAULT_REFS_PER_MS`: the trace has no clock.
    Default,
}

/// What a mapping algorithm gets to map.
enum ThreadSharing {
    /// This matrix (with the online decision that chose it, if any), and the threads' data
    /// when a detector read the trace.
    Map(SharingMatrix, Option<String>, Option<sharemap_mapping::Demand>),
    /// Nothing: the detector's online decision was not to map, for this reason.
    Stay(String),
}

/// The sharing a mapping algorithm maps: a detector's on the trace, or a given matrix with
/// one row per thread of the trace. A detector that decides online (STMap) gives the matrix
/// it had when it decided, or no mapping at all when it decided against one.
fn thread_sharing(sharing: &Sharing, machine: &Machine, trace: &mut dyn TraceSource) -> Result<ThreadSharing> {
    let threads = trace.metadata().threads as usize;
    match sharing {
        Sharing::Matrix(m) => {
            if threads > 0 && m.threads() != threads {
                return Err(Error::new(
                    ErrorKind::Sharing,
                    format!("the matrix has {} threads, the trace has {threads}", m.threads()),
                ));
            }
            Ok(ThreadSharing::Map(m.clone(), None, None))
        }
        Sharing::Detector(spec) => {
            let spec = sharemap_detect::detector::parse(spec)?;
            let placement = ThreadPlacement::identity(machine);
            let ctx = DetectorContext::new(trace.metadata(), &placement)?;
            let d = sharemap_detect::detector::build(&spec, &ctx)?;
            let found = sharemap_detect::detect_many(trace, vec![d], 0, &|_| {})?;
            let detection = found.into_iter().next().expect("one detector").detection;
            let demand = Some(sharemap_mapping::Demand::from_usage(&detection.pages, detection.matrix.threads()));
            Ok(match detection.decision {
                None => ThreadSharing::Map(detection.matrix, None, demand),
                Some(d) if d.map => ThreadSharing::Map(d.matrix, Some(d.why), demand),
                Some(d) => ThreadSharing::Stay(d.why),
            })
        }
    }
}

/// A cost preset or `key=value` overrides of the machine's parameters.
/// The most references per ms a trace's time scale may say: a million per nanosecond, past
/// any machine; larger values only overflow the clocks they drive.
pub const MAX_REFS_PER_MS: f64 = 1e12;

/// A number as typed for small ones, in exponent form past 1e15 (never 300 digits).
fn shown(v: f64) -> String {
    if v.abs() >= 1e15 { format!("{v:e}") } else { v.to_string() }
}

pub fn parse_cost(spec: Option<&str>, base: CostParams, page_size: u64) -> Result<CostParams> {
    let Some(spec) = spec else { return Ok(base) };
    match spec.trim() {
        "ace" => return Ok(CostParams::ace(page_size)),
        "butterfly" => return Ok(CostParams::butterfly(page_size)),
        _ => {}
    }
    let bad = |why: String| Error::new(ErrorKind::Cost, why);
    let mut p = base;
    for part in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            let hint = sharemap_core::did_you_mean(part, ["ace", "butterfly"]);
            bad(format!("'{part}': {hint}expected key=value with key r, R, g or G, or a preset (ace, butterfly)"))
        })?;
        let v: f64 = v
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| bad(format!("'{part}': '{v}' is not a number")))?;
        match k.trim() {
            "r" => p.r = v,
            "R" => p.big_r = v,
            "g" => p.g = Some(v),
            "G" => p.big_g = Some(v),
            other => {
                let hint = sharemap_core::did_you_mean(other, ["r", "R", "g", "G"]);
                return Err(bad(format!(
                    "'{part}': unknown parameter '{other}' ({hint}r, R, g, G; R and G are page moves)"
                )));
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sharemap_trace::{Access, MemoryTrace, Metadata};

    /// A recorded trace sets the time scale by its own clock; a flag overrides it; a trace
    /// without a clock gets the assumed default.
    #[test]
    fn the_time_scale_comes_from_the_recording_unless_given() {
        let meta = Metadata { run_ns: Some(2_000_000), ..Metadata::default() }; // 2 ms
        let mut recorded = MemoryTrace::new(meta);
        (0..30_000u64).for_each(|i| recorded.access(Access::read(0, i * 8, 8)));
        let machine = Machine::from_spec("numa:2 pu:2").unwrap();
        let recorded = TraceInput::memory(recorded);
        let setup = Setup::default();
        let s = Situation::resolve(&setup, &machine, 1, &recorded).unwrap();
        assert_eq!((s.refs_per_ms, s.time_scale), (15_000.0, TimeScale::Recorded));
        let given = Setup { refs_per_ms: Some(50.0), ..setup.clone() };
        let s = Situation::resolve(&given, &machine, 1, &recorded).unwrap();
        assert_eq!((s.refs_per_ms, s.time_scale), (50.0, TimeScale::Given));
        let generated = TraceInput::memory(MemoryTrace::from_accesses((0..10u64).map(|i| Access::read(0, i * 8, 8))));
        let s = Situation::resolve(&setup, &machine, 1, &generated).unwrap();
        assert_eq!((s.refs_per_ms, s.time_scale), (DEFAULT_REFS_PER_MS, TimeScale::Default));
        let bad = Setup { refs_per_ms: Some(0.0), ..setup };
        assert!(Situation::resolve(&bad, &machine, 1, &generated).is_err());
    }
}
