//! The mechanisms seeds 000 and 002 compare in real runs, each turned into configurations
//! of a measurement: a thread mapping, a data placement, or a procedure (autopin tries
//! candidates; numa-balancing switches the kernel's own mechanism on for its runs).

use crate::timeline::Timeline;
use crate::{Configuration, MemoryPolicy, Pinning, Plan, pinning};
use sharemap::{Error, ErrorKind, Result, ThreadMap};
use sharemap_core::plugin::{Caps, Params, Plugin};
use sharemap_machine::Machine;
use std::path::Path;
use std::sync::Arc;

/// One mechanism: its name, what it does, what it needs (`caps`: a recording, a NUMA host,
/// root), and how it becomes a configuration. A new mechanism is a build function and a
/// row of `MECHANISMS`.
pub type MechanismInfo = Plugin<fn(&Request) -> Result<Configuration>>;

/// The registry's name in errors.
const KIND: &str = "mechanism";

pub static MECHANISMS: &[MechanismInfo] = &[
    MechanismInfo {
        name: "os",
        source: "SAMMU (seed 000) §4.3, STMap (seed 002) (the Linux scheduler)",
        summary: "the kernel's scheduler and first touch (the baseline)",
        params: &[],
        caps: Caps::NONE,
        build: os,
    },
    MechanismInfo {
        name: "random",
        source: "SAMMU (seed 000) §4.3",
        summary: "threads on a random permutation of the PUs drawn for each run; pages interleaved over the nodes on a NUMA host",
        params: &[],
        caps: Caps::NONE,
        build: random,
    },
    MechanismInfo {
        name: "compact",
        source: "STMap (seed 002) (hwloc)",
        summary: "hwloc's compact order (neighbours share every cache)",
        params: &[],
        caps: Caps::NONE,
        build: hwloc_order,
    },
    MechanismInfo {
        name: "scatter",
        source: "STMap (seed 002) (hwloc)",
        summary: "spread over packages first",
        params: &[],
        caps: Caps::NONE,
        build: hwloc_order,
    },
    MechanismInfo {
        name: "round-robin",
        source: "STMap (seed 002) (hwloc)",
        summary: "one thread per core sharing the last-level cache",
        params: &[],
        caps: Caps::NONE,
        build: hwloc_order,
    },
    MechanismInfo {
        name: "oracle",
        source: "SAMMU (seed 000) §4.3 (full trace), as simulate's oracle decides it",
        summary: "simulate's oracle on the recording with this host as the machine: threads by the whole recording's sharing, and on a NUMA host each page on the node that makes most of its memory (cache-missing) accesses under that mapping",
        params: &[],
        caps: Caps { recording: true, ..Caps::NONE },
        build: oracle,
    },
    MechanismInfo {
        name: "marathe",
        source: "Marathe & Mueller (seed 001), as simulate's marathe decides it",
        summary: "simulate's marathe on the recording with this host as the machine: threads pinned where simulate's OS model puts them (so each thread's node is the one its samples are counted for), each page on the node whose threads took most of its profile's samples (by default loads missing a per-thread cache)",
        params: &sharemap_decide::marathe::WHOLE_TRACE_PROFILE,
        caps: Caps { recording: true, numa: true, ..Caps::NONE },
        build: marathe,
    },
    MechanismInfo {
        name: "sammu",
        source: "SAMMU (seed 000) §3 and §4.1 (its mappings generated on a recording, fed into the real run)",
        summary: "simulated on the recording (this host's machine, the decision core simulate drives), then its remaps and page moves applied in the order they fired, each at its share of the run",
        params: &sharemap_decide::sammu::MECHANISM,
        caps: Caps { recording: true, numa: true, ..Caps::NONE },
        build: replayed,
    },
    MechanismInfo {
        name: "kmaf",
        source: "kMAF (seed 000's related work), as simulate models it",
        summary: "simulated on the recording as sammu is, its remaps and page moves applied in the order they fired",
        params: &[sharemap_decide::kmaf::WINDOW_MS, sharemap_decide::kmaf::PERIOD_MS, sharemap_decide::kmaf::FAULT_US],
        caps: Caps { recording: true, numa: true, ..Caps::NONE },
        build: replayed,
    },
    MechanismInfo {
        name: "carrefour",
        source: "Carrefour (Dashti et al.), as simulate models it",
        summary: "simulated on the recording as sammu is, its page moves applied in the order they fired (a replicated page on its lowest node); threads left to the scheduler",
        params: &[
            sharemap_decide::carrefour::EPOCH_MS,
            sharemap_decide::carrefour::SHARE,
            sharemap_decide::carrefour::MIN_ACCESSES,
        ],
        caps: Caps { recording: true, numa: true, ..Caps::NONE },
        build: replayed,
    },
    MechanismInfo {
        name: "autopin",
        source: "Autopin (Klug et al.), as SAMMU (seed 000) §4.3 runs it; simulate's candidates",
        summary: "each round runs simulate's autopin candidates (the oracle's mapping and k-1 random ones, the same for one seed) once each, a whole run as each one's probation (no PMU measures a window here), then the fastest",
        params: &[sharemap_decide::autopin::K],
        caps: Caps { recording: true, ..Caps::NONE },
        build: autopin,
    },
    MechanismInfo {
        name: "numa-balancing",
        source: "SAMMU (seed 000) §4.3 (Linux NUMA balancing)",
        summary: "the kernel's NUMA balancing switched on for its runs, restored after (root may switch it)",
        params: &[],
        caps: Caps { numa: true, available: || check_numa_balancing().is_ok(), ..Caps::NONE },
        build: numa_balancing,
    },
];

/// What a list of mechanism specs stands for: `all` expanded to the mechanisms that apply
/// here with what was given, and those it left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expansion {
    pub specs: Vec<String>,
    pub left_out: Vec<&'static str>,
}

/// Expands comma lists of specs (as `--mechanism` repeats them): `all` gives every
/// mechanism that can run on this host with what the context has; others are kept as given.
pub fn expand(lists: &[String], ctx: &MechanismContext) -> Result<Expansion> {
    let mut out = Expansion::default();
    for list in lists {
        for spec in list.split(',').map(str::trim) {
            if spec.is_empty() {
                return Err(Error::new(
                    ErrorKind::Mechanism,
                    format!("'{list}': an empty mechanism name (expected names separated by commas, or all)"),
                ));
            }
            if let Some(options) = spec.strip_prefix("all:") {
                return Err(Error::new(ErrorKind::Mechanism, format!("'{spec}': all takes no options ('{options}')")));
            }
            if spec != "all" {
                out.specs.push(spec.to_string());
                continue;
            }
            for m in MECHANISMS {
                let numa_ok = !m.caps.numa || ctx.host.numa_count() > 1;
                let recording_ok = !m.caps.recording || ctx.recording.is_some();
                if numa_ok && recording_ok && (m.caps.available)() {
                    out.specs.push(m.name.to_string());
                } else {
                    out.left_out.push(m.name);
                }
            }
        }
    }
    Ok(out)
}

/// What a mechanism needs to become configurations.
pub struct MechanismContext<'a> {
    pub host: &'a Machine,
    /// The recording (made with `--no-aslr` for its plans to hold).
    pub recording: Option<&'a Path>,
    pub seed: u64,
}

/// What a configuration does beyond pinning and a policy.
#[derive(Clone, Debug, Default)]
pub enum Procedure {
    #[default]
    Fixed,
    /// Autopin: each round tries the candidates once (probation), then runs the fastest.
    Autopin { candidates: Vec<(String, Pinning)>, oracle: usize },
    /// The kernel's NUMA balancing on for the run, restored after.
    NumaBalancing,
}

/// What the simulator decided on the recording, for a configuration that replays it.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub struct Replayed {
    /// The mechanism as simulated.
    pub simulated: String,
    pub thread_migrations: u64,
    pub page_moves: u64,
    /// Pages the plan holds: those the mechanism moved, on the node of their last move.
    pub planned_pages: usize,
    /// The points of the run where it remapped threads (the moves of one remap together).
    pub remaps: usize,
}

/// A sampled profile, and what recording it cost (Marathe & Mueller report the profiling
/// run's time over the program's own).
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub struct Profile {
    pub samples: u64,
    /// How it was sampled: "1 in 100 accesses" or "the first 10% of accesses".
    pub sampling: String,
    /// The recording's own sampling period (its `--sample`), and its run's wall time.
    pub recording_period: u64,
    pub recording_seconds: Option<f64>,
}

/// A mechanism's spec, checked, with what it may use to build its configuration.
pub struct Request<'a> {
    pub name: String,
    /// Its parameters, checked.
    pub params: Params,
    /// The recording (present when the mechanism needs one).
    pub recording: Option<&'a Path>,
    pub ctx: &'a MechanismContext<'a>,
    /// The host has several NUMA nodes.
    pub numa: bool,
}

impl Request<'_> {
    fn recording(&self) -> &Path {
        self.recording.expect("checked: the mechanism needs a recording")
    }

    /// A configuration of a thread mapping, a policy and perhaps a plan, named as asked.
    fn fixed(&self, pinning: Pinning, memory: MemoryPolicy, plan: Option<Plan>) -> Configuration {
        let mut config = Configuration::fixed(&self.name, pinning, memory);
        config.plan = plan.map(Arc::new);
        config
    }

    /// One of hwloc's orders (compact, scatter, round-robin) on the host.
    fn order(&self, name: &str) -> Result<Pinning> {
        pinning(&ThreadMap::Algorithm(name.into()), self.ctx.host, None, self.ctx.seed)
    }
}

/// The configuration a mechanism spec (`marathe:every=10`) stands for on this host.
pub fn configuration(spec: &str, ctx: &MechanismContext) -> Result<Configuration> {
    let spec = sharemap_core::Spec::parse(spec).map_err(|e| Error::new(ErrorKind::Mechanism, e.to_string()))?;
    let name = spec.name.as_str();
    let info = MECHANISMS.iter().find(|m| m.name == name).ok_or_else(|| {
        let known: Vec<&str> = MECHANISMS.iter().map(|m| m.name).collect();
        let hint = sharemap_core::did_you_mean(name, known.iter().copied());
        Error::new(ErrorKind::Mechanism, format!("unknown mechanism '{name}' ({hint}mechanisms: {})", known.join(", ")))
    })?;
    if let Some((key, _)) = spec.options.iter().find(|(k, _)| !info.params.iter().any(|p| p.key == k)) {
        let keys: Vec<&str> = info.params.iter().map(|p| p.key).collect();
        let hint = sharemap_core::did_you_mean(key, keys.iter().copied());
        let list = if keys.is_empty() { "none".to_string() } else { keys.join(", ") };
        return Err(Error::new(
            ErrorKind::Mechanism,
            format!("{name}: unknown option '{key}' ({hint}options: {list})"),
        ));
    }
    let params = info.params(KIND, &[&spec.options]).map_err(|e| Error::new(ErrorKind::Mechanism, e.to_string()))?;
    if info.caps.recording && ctx.recording.is_none() {
        return Err(Error::new(ErrorKind::NeedsRecording, format!("{name} needs a recording of the program")));
    }
    let numa = ctx.host.numa_count() > 1;
    if info.caps.numa && !numa {
        return Err(Error::new(
            ErrorKind::Mechanism,
            format!("{name} needs a NUMA host: this one has a single node (`sharemap vm` runs a multi-node guest)"),
        ));
    }
    let request = Request { name: spec.to_string(), params, recording: ctx.recording, ctx, numa };
    (info.build)(&request)
}

fn os(r: &Request) -> Result<Configuration> {
    Ok(r.fixed(Pinning::Os, MemoryPolicy::FirstTouch, None))
}

fn random(r: &Request) -> Result<Configuration> {
    let memory = if r.numa { MemoryPolicy::Interleave } else { MemoryPolicy::FirstTouch };
    Ok(r.fixed(Pinning::Random(r.ctx.seed), memory, None))
}

fn hwloc_order(r: &Request) -> Result<Configuration> {
    Ok(r.fixed(r.order(&r.name)?, MemoryPolicy::FirstTouch, None))
}

/// Where `r`'s mechanism starts on this host, decided on the recording by the simulator's
/// mechanism of the same name (its profile, its rule): one decision core for both layers.
fn simulated_start(r: &Request) -> Result<sharemap::MechanismStart> {
    let spec = r.params.full_spec().to_string();
    let session = sharemap::Session::new(sharemap::TraceInput::file(r.recording()), r.ctx.host.clone(), r.ctx.seed);
    let request = sharemap::SimulateRequest { mechanisms: spec.clone(), ..Default::default() };
    let start = session.starts(&request)?.pop().expect("one mechanism asked, one start");
    let page_size = crate::page_size();
    if start.page_size != page_size {
        return Err(Error::new(
            ErrorKind::Mechanism,
            format!("{spec}: the recording's pages are {} bytes, this host's {page_size}", start.page_size),
        ));
    }
    Ok(start)
}

/// The plan of pages homed before the run, in this host's addresses and node numbers.
fn homes_plan(homes: &[(u64, usize)], host: &Machine) -> Plan {
    let page_size = crate::page_size();
    Plan {
        pages: homes.iter().map(|&(page, _)| page * page_size).collect(),
        nodes: homes.iter().map(|&(_, node)| host.numa_os_index(node) as i32).collect(),
    }
}

fn oracle(r: &Request) -> Result<Configuration> {
    let start = simulated_start(r)?;
    let plan = (r.numa && !start.homes.is_empty()).then(|| homes_plan(&start.homes, r.ctx.host));
    Ok(r.fixed(Pinning::Pus(start.pus), MemoryPolicy::FirstTouch, plan))
}

fn marathe(r: &Request) -> Result<Configuration> {
    let start = simulated_start(r)?;
    if start.homes.is_empty() {
        return Err(Error::new(
            ErrorKind::Mechanism,
            format!("{}: the profile holds no access", r.recording().display()),
        ));
    }
    let meta = sharemap::TraceInput::file(r.recording()).metadata()?;
    let source = sharemap_decide::marathe::Source::from_params(&r.params);
    let plan = homes_plan(&start.homes, r.ctx.host);
    let mut config = r.fixed(Pinning::Pus(start.pus), MemoryPolicy::FirstTouch, Some(plan));
    config.profile = Some(Profile {
        samples: start.samples.unwrap_or(0),
        sampling: source.describe(),
        recording_period: meta.sampling_period.max(1),
        recording_seconds: meta.run_ns.map(|ns| ns as f64 / 1e9),
    });
    Ok(config)
}

/// SAMMU, kMAF or Carrefour as seed 000 fed SAMMU's decisions into its real runs: the
/// mechanism simulated on the recording with this host as the machine (the decision core
/// `simulate` drives), then the real run with its decisions in the order they fired: the
/// threads are the scheduler's until its first remap, and each remap and each page move
/// is applied at its share of the recorded run's accesses, spread over the baseline's time
/// (docs/run.md). The plan of each page's last move is what the run's end is counted against.
fn replayed(r: &Request) -> Result<Configuration> {
    let trace = r.recording();
    // Every parameter spelled out, so the configuration says what was simulated.
    let spec = r.params.full_spec().to_string();
    let session = sharemap::Session::new(sharemap::TraceInput::file(trace), r.ctx.host.clone(), r.ctx.seed);
    let request = sharemap::SimulateRequest { mechanisms: spec.clone(), log_decisions: true, ..Default::default() };
    let sim = session.simulate(&request)?;
    let page_size = crate::page_size();
    if sim.page_size != page_size {
        return Err(Error::new(
            ErrorKind::Mechanism,
            format!("{spec}: the recording's pages are {} bytes, this host's {page_size}", sim.page_size),
        ));
    }
    let o = &sim.mechanisms[0];
    let nodes = r.ctx.host.numa_count();
    let plan = last_moves(o.decisions.iter().map(|d| (d.page, d.nodes)), nodes);
    let plan = Plan {
        pages: plan.iter().map(|&(page, _)| page * page_size).collect(),
        nodes: plan.iter().map(|&(_, node)| r.ctx.host.numa_os_index(node) as i32).collect(),
    };
    // Carrefour moves pages only: its threads stay the scheduler's.
    let thread_moves = if r.params.name() == "carrefour" { &[][..] } else { &o.thread_moves[..] };
    let timeline =
        Timeline::of_simulation(&o.decisions, thread_moves, &o.final_pus, o.counts.accesses, page_size, r.ctx.host);
    let replayed = Replayed {
        simulated: spec,
        thread_migrations: o.counts.thread_migrations,
        page_moves: o.counts.page_migrations,
        planned_pages: plan.pages.len(),
        remaps: timeline.remaps.len(),
    };
    let plan = (!plan.pages.is_empty()).then_some(plan);
    let mut config = r.fixed(Pinning::Os, MemoryPolicy::FirstTouch, plan);
    config.replayed = Some(replayed);
    config.timeline = Some(Arc::new(timeline));
    Ok(config)
}

/// Each page a mechanism moved (a decision that changed its nodes; the first is its first
/// touch), with the node of its last move: the lowest of a replicated page's nodes.
fn last_moves(decisions: impl Iterator<Item = (u64, u128)>, nodes: usize) -> Vec<(u64, usize)> {
    let mut now: std::collections::BTreeMap<u64, (u128, bool)> = std::collections::BTreeMap::new();
    for (page, set) in decisions {
        let e = now.entry(page).or_insert((set, false));
        if e.0 != set {
            *e = (set, true);
        }
    }
    now.into_iter()
        .filter(|&(_, (set, moved))| moved && set != 0 && (set.trailing_zeros() as usize) < nodes)
        .map(|(page, (set, _))| (page, set.trailing_zeros() as usize))
        .collect()
}

fn autopin(r: &Request) -> Result<Configuration> {
    let start = simulated_start(r)?;
    let candidates = start
        .candidates
        .into_iter()
        .enumerate()
        .map(|(i, pus)| (if i == 0 { "oracle".to_string() } else { format!("random {i}") }, Pinning::Pus(pus)))
        .collect();
    let mut config = r.fixed(Pinning::Os, MemoryPolicy::FirstTouch, None);
    config.procedure = Procedure::Autopin { candidates, oracle: 0 };
    Ok(config)
}

fn numa_balancing(r: &Request) -> Result<Configuration> {
    check_numa_balancing()?;
    let mut config = r.fixed(Pinning::Os, MemoryPolicy::FirstTouch, None);
    config.procedure = Procedure::NumaBalancing;
    Ok(config)
}

/// Marathe & Mueller's placement from a sampled profile for any thread mapping (`--data
/// marathe:TRACE`): the recording's pages as `source` samples them (the profile pass every
/// layer takes), threads on `pus` (thread k on `pus[k mod n]`), each sampled page homed on
/// the node whose threads sampled it most (sharemap-decide's rule). Returns the plan and the
/// number of samples.
pub fn profile_plan(
    trace: &Path,
    pus: &[usize],
    host: &Machine,
    source: sharemap_decide::marathe::Source,
) -> Result<(Plan, u64)> {
    let mut reader = sharemap::TraceInput::file(trace).open()?;
    let page_size = crate::page_size();
    let pages = sharemap::simulate::sampled_pages(&mut *reader, page_size, source)
        .map_err(|e| Error::new(ErrorKind::Mechanism, e.to_string()))?;
    let placement = sharemap_machine::ThreadPlacement::on_pus(host, pus.to_vec())?;
    let mut per_node = vec![0u64; host.numa_count()];
    let (mut homes, mut samples) = (Vec::with_capacity(pages.len()), 0u64);
    for (page, by_thread) in &pages {
        per_node.iter_mut().for_each(|n| *n = 0);
        for (t, &n) in by_thread.iter().enumerate() {
            per_node[placement.node(t as u32 % pus.len() as u32)] += n;
            samples += n;
        }
        homes.push((*page, sharemap_decide::marathe::home(&per_node)));
    }
    if homes.is_empty() {
        return Err(Error::new(ErrorKind::Mechanism, format!("{}: the profile holds no access", trace.display())));
    }
    Ok((homes_plan(&homes, host), samples))
}

use crate::sysctl::NUMA_BALANCING;

/// Whether the kernel's NUMA balancing can be switched here: the file exists and this
/// process may write it (asked without writing: another run may own it).
fn check_numa_balancing() -> Result<()> {
    std::fs::read_to_string(NUMA_BALANCING).map_err(|e| {
        Error::new(
            ErrorKind::Mechanism,
            format!("numa-balancing: {NUMA_BALANCING}: {e} (a kernel without NUMA balancing)"),
        )
    })?;
    let path = std::ffi::CString::new(NUMA_BALANCING).expect("no NUL");
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::access(path.as_ptr(), libc::W_OK) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(Error::new(
            ErrorKind::Mechanism,
            format!(
                "numa-balancing: cannot switch {NUMA_BALANCING} ({e}): it needs root (or run the guest: `sharemap vm`)"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sharemap_core::plugin::ParamKind;
    use sharemap_trace::{Access, TraceWriter};

    fn write_trace(dir: &tempfile::TempDir, accesses: &[Access]) -> std::path::PathBuf {
        let path = dir.path().join("t.trace");
        let mut w =
            TraceWriter::create(&path, None, sharemap_trace::Metadata::with_source(Default::default())).unwrap();
        for a in accesses {
            w.access(*a).unwrap();
        }
        w.finish().unwrap();
        path
    }

    /// Exact counts from accesses we know: page 1 is sampled twice by thread 0 (node 0) and
    /// three times by thread 2 (node 1): node 1; page 2 once each: the lower node.
    #[test]
    fn the_profile_homes_each_page_where_it_was_sampled_most() {
        let dir = tempfile::tempdir().unwrap();
        let page = crate::page_size();
        let mut accesses = Vec::new();
        for t in [0, 0, 2, 2, 2] {
            accesses.push(Access::read(t, page + 8, 8));
        }
        accesses.push(Access::write(1, 2 * page, 8));
        accesses.push(Access::write(3, 2 * page + 64, 8));
        let trace = write_trace(&dir, &accesses);
        let host = Machine::from_spec("pack:2 numa:1 core:2 pu:1").unwrap();
        let every = |k| sharemap_decide::marathe::Source::Every { k };
        let (plan, samples) = profile_plan(&trace, &[0, 1, 2, 3], &host, every(1)).unwrap();
        assert_eq!(samples, 7);
        assert_eq!(plan, Plan { pages: vec![page, 2 * page], nodes: vec![1, 0] });
        // One in two: accesses 0, 2, 4, 6 (threads 0, 2, 2, 3): page 1 to node 1, page 2 to node 1.
        let (plan, samples) = profile_plan(&trace, &[0, 1, 2, 3], &host, every(2)).unwrap();
        assert_eq!((samples, plan.nodes), (4, vec![1, 1]));
        // The first 2 of 7 accesses: thread 0 only.
        let prefix = sharemap_decide::marathe::Source::Prefix { per_million: (2e6f64 / 7.0).round() as u32 };
        let (plan, samples) = profile_plan(&trace, &[0, 1, 2, 3], &host, prefix).unwrap();
        assert_eq!((samples, plan.pages, plan.nodes), (2, vec![page], vec![0]));
    }

    /// The shared case suite (sharemap-decide's cases.toml): the cases of mechanisms `run`
    /// turns into plans, each plan compared with the case's decisions.
    #[test]
    fn run_decides_as_every_layer_does() {
        use sharemap_decide::cases::{self, Decision};
        let cases = cases::for_layer("run");
        assert!(!cases.is_empty());
        assert_eq!(crate::page_size(), cases::PAGE_SIZE, "the cases are written for this host's pages");
        let dir = tempfile::tempdir().unwrap();
        for case in cases {
            let host = Machine::from_spec(&case.machine).unwrap();
            let trace = write_trace(&dir, &case.trace_accesses());
            if case.what == cases::What::Moves {
                // A mechanism replayed from its simulation: its moves in order on its timeline,
                // and the plan of their last ones, which the run's end is counted against.
                let ctx = MechanismContext { host: &host, recording: Some(&trace), seed: 1 };
                let config = configuration(&case.mechanism, &ctx).unwrap();
                let timeline = config.timeline.clone().unwrap();
                let moves: Vec<(u64, usize)> =
                    timeline.moves.iter().map(|&(_, a, n)| (a / cases::PAGE_SIZE, n as usize)).collect();
                case.check_replayed_moves("run", &moves).unwrap_or_else(|e| panic!("{e}"));
                assert!(timeline.moves.windows(2).all(|w| w[0].0 <= w[1].0), "{}: in order", case.name);
                let plan = config.plan.map(|p| (*p).clone()).unwrap_or(Plan { pages: Vec::new(), nodes: Vec::new() });
                let homes: Vec<(u64, usize)> =
                    plan.pages.iter().zip(&plan.nodes).map(|(&a, &n)| (a / cases::PAGE_SIZE, n as usize)).collect();
                case.check_last_homes("run", &homes).unwrap_or_else(|e| panic!("{e}"));
                let replayed = config.replayed.unwrap();
                assert_eq!(replayed.planned_pages, homes.len(), "{}", case.name);
                continue;
            }
            // A mechanism decided before the run: its plan, and its threads where the case's
            // premise puts them (the OS model's PUs, as simulate's).
            let ctx = MechanismContext { host: &host, recording: Some(&trace), seed: 1 };
            let config = configuration(&case.mechanism, &ctx).unwrap();
            let Pinning::Pus(pinned) = &config.pinning else { panic!("{}: threads pinned", case.name) };
            let nodes: Vec<usize> = pinned.iter().map(|&p| host.pu_numa[p]).collect();
            assert_eq!(nodes, case.nodes, "{}: the threads' nodes", case.name);
            let plan = config.plan.map(|p| (*p).clone()).unwrap_or(Plan { pages: Vec::new(), nodes: Vec::new() });
            let decisions: Vec<Decision> = plan
                .pages
                .iter()
                .zip(&plan.nodes)
                .map(|(&addr, &node)| Decision { at: 0, page: addr / cases::PAGE_SIZE, nodes: 1 << node })
                .collect();
            case.check("run", &decisions).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// Autopin tries simulate's candidates: the oracle's mapping (what run's oracle pins),
    /// then k-1 random mappings drawn with sharemap-decide's seeds.
    #[test]
    fn autopin_tries_the_simulators_candidates() {
        let dir = tempfile::tempdir().unwrap();
        let page = crate::page_size();
        // Threads 0 and 2 share one line, 1 and 3 another: the oracle pairs them.
        let accesses: Vec<Access> =
            (0..4000u64).map(|i| Access::write((i % 4) as u32, 64 * (i % 2) + page * (i % 2), 8)).collect();
        let trace = write_trace(&dir, &accesses);
        let host = Machine::from_spec("pack:2 numa:1 core:2 pu:1").unwrap();
        let ctx = MechanismContext { host: &host, recording: Some(&trace), seed: 7 };
        let Procedure::Autopin { candidates, oracle } = configuration("autopin:k=3", &ctx).unwrap().procedure else {
            panic!("autopin's procedure")
        };
        assert_eq!((candidates.len(), oracle), (3, 0));
        let Pinning::Pus(oracle_pus) = configuration("oracle", &ctx).unwrap().pinning else { panic!("pinned") };
        assert!(matches!(&candidates[0].1, Pinning::Pus(p) if *p == oracle_pus), "{candidates:?}");
        assert_eq!(host.pu_numa[oracle_pus[0]], host.pu_numa[oracle_pus[2]], "{oracle_pus:?}");
        let costs = sharemap_mapping::PairCosts::new(&host, sharemap_mapping::CostModel::Latency);
        for (i, (name, pinning)) in candidates.iter().enumerate().skip(1) {
            let seed = sharemap_decide::autopin::random_seed(7, i);
            let random = sharemap_mapping::build("random", seed).unwrap();
            let pus = random.map(&sharemap_core::SharingMatrix::new(4), &host, &costs).unwrap();
            assert_eq!((name.as_str(), pinning), (format!("random {i}").as_str(), &Pinning::Pus(pus)));
        }
    }

    #[test]
    fn mechanisms_say_what_they_need() {
        let one = Machine::from_spec("pack:1 core:2 pu:1").unwrap();
        let ctx = MechanismContext { host: &one, recording: None, seed: 1 };
        let e = |spec: &str| configuration(spec, &ctx).unwrap_err().to_string();
        assert!(e("oracle").contains("needs a recording"));
        assert!(e("fastest").contains("unknown mechanism"));
        assert!(e("compact:x=1").contains("compact: unknown option 'x' (options: none)"), "{}", e("compact:x=1"));
        // A typo gets the closest name, of a mechanism or of an option.
        assert!(
            e("autopn").contains("unknown mechanism 'autopn' (did you mean 'autopin'? mechanisms: "),
            "{}",
            e("autopn")
        );
        assert!(e("marathe:evrey=5").contains("(did you mean 'every'? options: "), "{}", e("marathe:evrey=5"));
        let ctx = MechanismContext { host: &one, recording: Some(Path::new("x.trace")), seed: 1 };
        assert!(configuration("marathe", &ctx).unwrap_err().to_string().contains("needs a NUMA host"));
        assert!(configuration("numa-balancing", &ctx).unwrap_err().to_string().contains("needs a NUMA host"));
        assert!(matches!(configuration("os", &ctx).unwrap().pinning, Pinning::Os));
        assert!(matches!(configuration("random", &ctx).unwrap().memory, MemoryPolicy::FirstTouch));
    }

    /// Each parameter's documented default is what the mechanism builds with, and each
    /// parameter is used.
    #[test]
    fn mechanisms_build_with_their_documented_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let page = crate::page_size();
        let accesses: Vec<Access> = (0..5000u64).map(|i| Access::read((i % 2) as u32, (i % 37) * page, 8)).collect();
        let trace = write_trace(&dir, &accesses);
        let host = Machine::from_spec("numa:2 pu:1").unwrap();
        let ctx = MechanismContext { host: &host, recording: Some(&trace), seed: 1 };
        for row in MECHANISMS.iter().filter(|m| (m.caps.available)()) {
            let describe = |spec: &str| {
                let named = |name: &str| format!("name: {name:?}");
                configuration(spec, &ctx).map(|c| format!("{c:?}").replace(&named(spec), &named(row.name)))
            };
            let defaults = describe(row.name).unwrap();
            for p in row.params.iter().filter(|p| !p.given) {
                let explicit = describe(&format!("{}:{}={}", row.name, p.key, p.default)).unwrap();
                assert_eq!(explicit, defaults, "{}: {}={}", row.name, p.key, p.default);
                // Another value; Marathe's every and tlb-entries act only with their source.
                let other = match p.kind {
                    ParamKind::Choice(words) => words.iter().find(|w| **w != p.default).unwrap().to_string(),
                    ParamKind::Switch => "1".to_string(),
                    // Inside the bounds: one above, or one below at the top (SAMMU's ac).
                    ParamKind::Integer { max, .. } => {
                        let d = p.default.parse::<u64>().unwrap();
                        (if d < max { d + 1 } else { d - 1 }).to_string()
                    }
                    ParamKind::Share => (p.default.parse::<f64>().unwrap() / 2.0).to_string(),
                    _ => (p.default.parse::<f64>().unwrap() * 2.0 + 1.0).to_string(),
                };
                let enabling = match (row.name, p.key) {
                    ("marathe", "every") => "source=every,",
                    ("marathe", "tlb-entries") => "source=tlb-miss,",
                    _ => "",
                };
                let base = if enabling.is_empty() {
                    defaults.clone()
                } else {
                    describe(&format!("{}:{}", row.name, enabling.trim_end_matches(','))).unwrap()
                };
                let changed = describe(&format!("{}:{enabling}{}={other}", row.name, p.key)).unwrap();
                assert_ne!(changed, base, "{}: {enabling}{}={other} changes nothing", row.name, p.key);
            }
        }
    }
}
