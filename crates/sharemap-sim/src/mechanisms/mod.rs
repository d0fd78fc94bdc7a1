//! Mechanisms: who decides where threads run and where pages live, inside the simulation
//! and on its clock. A static one only says where things start; an online one also sees
//! every access and moves threads and pages as it goes. One mechanism is one `Mechanism`
//! impl plus one row of [`MECHANISMS`].

mod autopin;
mod fixed;
pub use fixed::oracle_mapping;
mod kernel;
pub mod planned;
mod remap;
mod sammu;

use crate::model::Model;
use crate::sim::{FirstPlacement, Sim};
use sharemap_core::SharingMatrix;
use sharemap_core::plugin::{self, Caps, ParamKind, Params, Plugin, given, text};
use sharemap_core::spec::{Spec, SpecError};
use sharemap_decide::{carrefour, kmaf, marathe, numa_balancing};
use sharemap_machine::Machine;

/// Per page (number): accesses by each thread.
pub type PageCounts = Vec<(u64, Vec<u64>)>;

/// What the whole trace says, for the mechanisms that know the future (the oracle) or
/// profile a run first.
#[derive(Clone, Debug)]
pub struct Profile {
    pub matrix: SharingMatrix,
    /// Per page: accesses by each thread.
    pub pages: PageCounts,
    /// For each profile source a mechanism asked for ([`Mechanism::profile_source`]): per
    /// page, each thread's samples (see [`sampled_pages`]).
    pub sampled: Vec<(marathe::Source, PageCounts)>,
    /// For each thread mapping (each thread's PU) a mechanism asked for
    /// ([`Mechanism::memory_profile_pus`]): per page, the accesses each node makes to its
    /// memory when the threads run there (`memory_profile`).
    pub memory: Vec<(Vec<usize>, PageCounts)>,
    pub page_size: u64,
}

impl Profile {
    /// The data the threads use, from the whole trace's pages: what a mapping weighs against
    /// the caches' capacity.
    pub fn demand(&self, threads: usize) -> sharemap_mapping::Demand {
        sharemap_mapping::Demand::from_pages(threads, self.page_size, self.pages.iter().map(|(_, t)| &t[..]))
    }

    /// The memory accesses per page and node with the threads on `pus`, if the profile has them.
    pub fn memory_under(&self, pus: &[usize]) -> Option<&[(u64, Vec<u64>)]> {
        self.memory.iter().find(|(p, _)| p == pus).map(|(_, pages)| &pages[..])
    }

    /// The pages as `source` profiles them, if the profile has them.
    pub fn sampled_pages(&self, source: marathe::Source) -> Option<&[(u64, Vec<u64>)]> {
        self.sampled.iter().find(|(e, _)| *e == source).map(|(_, pages)| &pages[..])
    }
}

/// Per page of `page_size` bytes, each thread's accesses among those `source` samples
/// (`sharemap_decide::marathe::Profiler`, in trace order, lines of the trace's size).
pub fn sampled_pages(
    trace: &mut dyn sharemap_trace::TraceSource,
    page_size: u64,
    source: marathe::Source,
) -> Result<PageCounts, crate::SimError> {
    let line = trace.metadata().line_size.max(1);
    let mut profiler = marathe::Profiler::new(source, line, page_size, trace.access_count_hint())
        .map_err(|e| crate::SimError::Mechanism(MechanismError::of(e)))?;
    let mut counter = sharemap_core::PageCounter::new(page_size);
    trace
        .for_each_chunk(&mut |c| {
            let a = &c.accesses;
            for i in 0..a.len() {
                if profiler.sample(a.thread[i] as usize, a.addr[i], a.is_write(i)) {
                    counter.access(a.thread[i], a.addr[i]);
                }
            }
            Ok(())
        })
        .map_err(crate::SimError::Trace)?;
    Ok(counter.finish().sorted().into_iter().map(|(p, e)| (p, e.accesses.clone())).collect())
}

pub struct Context<'a> {
    pub machine: &'a Machine,
    pub model: &'a Model,
    /// Threads of the trace.
    pub threads: usize,
    pub page_size: u64,
    pub seed: u64,
    /// Present when a mechanism in the run asked for it.
    pub profile: Option<&'a Profile>,
    /// The plans of the `place` mechanisms, by their label.
    pub plans: &'a [(String, planned::PlannedPlacement)],
    /// Keep each run's page decisions (`Outcome::decisions`): the shared case suite.
    pub log_decisions: bool,
    /// Whether the trace says where the OS ran its threads, and on what host.
    pub schedule: RecordedSchedule,
}

/// Where the recorded program's threads ran (the trace's `cpu` events), as `os` may use it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecordedSchedule {
    /// The trace has no `cpu` events: `os` models Linux's placement.
    #[default]
    None,
    /// Recorded on a host whose CPUs and nodes the simulated machine has: `os` replays it.
    Replayed,
    /// Recorded on another host: `os` models Linux's placement (and says so).
    OtherHost,
}

/// Where the modelled operating system runs the threads (the `os` mapping algorithm: Linux's
/// fork balancing and load balancer): each thread's PU.
pub fn os_pus(ctx: &Context) -> Vec<usize> {
    sharemap_mapping::os_mapping(ctx.machine, ctx.threads)
}

/// Thread i on the CPU the kernel numbers i (mod CPUs).
pub fn identity_pus(ctx: &Context) -> Vec<usize> {
    let id = sharemap_machine::ThreadPlacement::identity(ctx.machine);
    (0..ctx.threads).map(|t| id.pu(t as u32)).collect()
}

/// Where a run starts.
pub struct Start {
    /// The PU of each thread (threads beyond go to `t mod PUs`).
    pub pus: Vec<usize>,
    /// How pages without a home get one at their first access.
    pub placement: FirstPlacement,
    /// Pages placed before the run: (page, node).
    pub homes: Vec<(u64, usize)>,
}

/// Why a mechanism cannot start (its mapping algorithm failed, its profile does not fit the
/// run): which mechanism, once known, and why in words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct MechanismError {
    /// The mechanism's label (`sammu:nt=4`), set by the pass that started it.
    pub mechanism: Option<String>,
    message: String,
}

impl MechanismError {
    /// Any error, in its own words.
    pub fn of(e: impl std::fmt::Display) -> MechanismError {
        MechanismError { mechanism: None, message: e.to_string() }
    }

    /// The error as the mechanism `label`'s, its message prefixed with the label.
    pub fn of_mechanism(self, label: &str) -> MechanismError {
        MechanismError { mechanism: Some(label.to_string()), message: format!("{label}: {}", self.message) }
    }
}

pub trait Mechanism: Send + std::fmt::Debug {
    fn start(&mut self, ctx: &Context) -> Result<Start, MechanismError>;

    /// Whether it wants `after_access` (static mechanisms cost nothing per access).
    fn online(&self) -> bool {
        false
    }

    /// The trace says thread `thread` runs from here on on the CPU the kernel numbers `cpu`
    /// (a `cpu` event of the tracer).
    fn on_cpu(&mut self, _sim: &mut Sim, _thread: usize, _cpu: u64) {}

    /// After each access of the run, with its latency: may move threads and pages.
    fn after_access(&mut self, _sim: &mut Sim, _thread: usize, _addr: u64, _write: bool, _ns: f64) {}

    /// Whether it needs the whole trace's profile before the run (`Context::profile`).
    fn needs_profile(&self) -> bool {
        false
    }

    /// What the reader of its figures should know about this run (`Outcome::note`), given
    /// the run's simulated time.
    fn note(&self, _time_ns: f64) -> Option<String> {
        None
    }

    /// The thread mapping under which it needs each page's memory accesses per node
    /// (`Profile::memory`), computed from the context (its profile's sharing), if it does.
    fn memory_profile_pus(&self, _ctx: &Context) -> Result<Option<Vec<usize>>, MechanismError> {
        Ok(None)
    }

    /// The profile source whose sampled pages it needs in the profile, if any.
    fn profile_source(&self) -> Option<marathe::Source> {
        None
    }

    /// The placement it replays, which the caller computes before the run
    /// (`Context::plans`, under the mechanism's label): the policy (or `optimal`) and the
    /// thread mapping it is computed for.
    fn plan(&self) -> Option<PlanRequest> {
        None
    }

    /// The thread mappings it tries after `start` (autopin's candidates, the first its start).
    fn candidates(&self) -> Vec<Vec<usize>> {
        Vec::new()
    }
}

/// A placement a mechanism replays: computed by `sharemap place`'s policy (or the optimum)
/// with the threads where a mapping puts them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanRequest {
    pub policy: String,
    pub threads: String,
}

/// Builds a mechanism from its parameters and the run's seed.
pub type BuildMechanism = fn(&Params, u64) -> Result<Box<dyn Mechanism>, SpecError>;

/// A registry row: how `sharemap simulate --mechanism` names, lists and builds a mechanism.
pub type MechanismInfo = Plugin<BuildMechanism>;

const SEED: ParamKind = ParamKind::Integer { min: 0, max: u64::MAX };

pub const MECHANISMS: &[MechanismInfo] = &[
    MechanismInfo {
        name: "os",
        source: "the baseline of SAMMU (seed 000) section 4",
        summary: "threads where Linux's scheduler puts them (the `os` mapping algorithm: fork balancing, then the load balancer), or, for a tracer's recording made on a host with this machine's CPUs and nodes, where the recorded run had them; pages on the node of their first touch",
        params: &[],
        caps: Caps::NONE,
        build: |_, _| Ok(Box::new(fixed::Os::default())),
    },
    MechanismInfo {
        name: "random",
        source: "SAMMU (seed 000) section 4.3",
        summary: "a random thread mapping and each page on a random node",
        params: &[given("seed", "the run's --seed", SEED, "seed of the mapping and the placement")],
        caps: Caps::NONE,
        build: |p, seed| Ok(Box::new(fixed::Random { seed: p.get_integer("seed").unwrap_or(seed) })),
    },
    MechanismInfo {
        name: "oracle",
        source: "SAMMU (seed 000) section 4.3",
        summary: "the whole trace's sharing mapped by sharemap's default algorithm; each page from the start on the node that makes most of its memory accesses (cache misses) under that mapping",
        params: &[],
        caps: Caps::NONE,
        build: |_, _| Ok(Box::new(fixed::Oracle)),
    },
    MechanismInfo {
        name: "marathe",
        source: "Marathe & Mueller (seed 001, PPoPP 2006)",
        summary: "profile then place: threads where the OS puts them (as os); each page, from the start, on the node whose threads took most of its profile's samples (by default loads missing a per-thread cache, as place's marathe); pages without samples by first touch",
        params: &marathe::WHOLE_TRACE_PROFILE,
        caps: Caps::NONE,
        build: |p, _| Ok(Box::new(fixed::Marathe { source: marathe::Source::from_params(p) })),
    },
    MechanismInfo {
        name: "sammu",
        source: "SAMMU (seed 000) section 3",
        summary: "SAMMU's TLB detector on every access: its sharing matrix remaps the threads every period when the mapping-potential gate passes and the new mapping is cheaper by the hysteresis; its NUMA counters move a page to node n when NC[n] - NC[home] >= NT",
        params: &sharemap_decide::sammu::MECHANISM,
        caps: Caps::NONE,
        build: sammu::build,
    },
    MechanismInfo {
        name: "autopin",
        source: "Autopin (Klug et al.), as SAMMU (seed 000) section 4.3 runs it",
        summary: "k candidate thread mappings (the oracle's and k-1 random ones) each run for a warm-up, then measured for a probation period; the one with the most accesses per simulated ns is kept; pages by first touch",
        params: &[
            sharemap_decide::autopin::K,
            sharemap_decide::autopin::PROBATION_MS,
            sharemap_decide::autopin::WARMUP_MS,
        ],
        caps: Caps::NONE,
        build: autopin::build,
    },
    MechanismInfo {
        name: "static",
        source: "sharemap: any thread mapping with any initial placement, for comparisons",
        summary: "threads by a mapping (os, identity, or any of `sharemap algorithms` run on the whole trace's sharing); pages by first touch, round robin (by first access), at random, or each on the node whose threads access it most",
        params: &[
            text(
                "threads",
                "os",
                "os (the modelled OS), identity (thread i on CPU i), or a mapping algorithm (sharemap, eagermap, scatter, compact, random, ...)",
            ),
            plugin::choice(
                "pages",
                "first-touch",
                &["first-touch", "round-robin", "random", "dominant", "memory"],
                "first-touch, round-robin, random, dominant (each page on the node that accesses it most) or memory (on the node that makes most of its memory accesses, what the caches miss, with the threads where this mapping puts them)",
            ),
        ],
        // Its defaults are os's.
        caps: Caps { in_all: false, ..Caps::NONE },
        build: fixed::build_static,
    },
    MechanismInfo {
        name: "place",
        source: "sharemap place's policies and Bolosky & Scott's (seed 004) off-line optimum, replayed",
        summary: "any placement policy of `sharemap policies` (or the off-line optimum of seed 004's cost model), computed page by page on the trace for a thread mapping, then replayed in the simulation: pages move and replicate where and when the policy did",
        params: &[
            text(
                "policy",
                "optimal",
                "optimal, or a policy of `sharemap policies` (its parameters from simulate's --set policy.key=value)",
            ),
            text("threads", "os", "os (the modelled OS), identity, or a mapping algorithm run on the trace's sharing"),
        ],
        caps: Caps::NONE,
        build: planned::build,
    },
    MechanismInfo {
        name: "numa-balancing",
        source: "Linux's automatic NUMA balancing (task_numa_work, do_numa_page), default sysctls",
        summary: "after a delay, every scan period the next scan-size of pages is marked; the first access to a marked page is a hinting fault (its cost charged); the page moves to the faulting node when its previous hinting fault came from that node too",
        params: &[
            numa_balancing::SCAN_DELAY_MS,
            numa_balancing::SCAN_PERIOD_MS,
            numa_balancing::SCAN_SIZE_MB,
            numa_balancing::FAULT_US,
        ],
        caps: Caps::NONE,
        build: kernel::build_numa_balancing,
    },
    MechanismInfo {
        name: "kmaf",
        source: "kMAF, the kernel Memory Affinity Framework (SAMMU's (seed 000) related work)",
        summary: "page faults once per node, page and window; after each, the page moves to the node with most faults when that count exceeds 2 x (second + 1); threads faulting on a page in one window share, and that sharing remaps them every period (gate, hysteresis)",
        params: &[kmaf::WINDOW_MS, kmaf::PERIOD_MS, kmaf::FAULT_US],
        caps: Caps::NONE,
        build: kernel::build_kmaf,
    },
    MechanismInfo {
        name: "carrefour",
        source: "Carrefour (Dashti et al., ASPLOS 2013)",
        summary: "every epoch, a page with min-accesses accesses moves to a node that made share of them; else, unwritten, it is replicated on the nodes that read it; else interleaved (a write leaves one copy)",
        params: &[carrefour::EPOCH_MS, carrefour::SHARE, carrefour::MIN_ACCESSES],
        caps: Caps::NONE,
        build: kernel::build_carrefour,
    },
];

/// The registry kind in spec errors.
pub const KIND: &str = "mechanism";

pub fn find(name: &str) -> Option<&'static MechanismInfo> {
    plugin::find(MECHANISMS, name)
}

/// One mechanism to run: its label (the spec as written), row and parameters, and an
/// instance that says what it needs before the run.
pub struct Chosen {
    pub label: String,
    pub info: &'static MechanismInfo,
    pub params: Params,
    probe: Box<dyn Mechanism>,
}

impl Chosen {
    pub fn build(&self, seed: u64) -> Result<Box<dyn Mechanism>, SpecError> {
        (self.info.build)(&self.params, seed)
    }

    pub fn needs_profile(&self) -> bool {
        self.probe.needs_profile()
    }

    pub fn memory_profile_pus(&self, ctx: &Context) -> Result<Option<Vec<usize>>, MechanismError> {
        self.probe.memory_profile_pus(ctx)
    }

    pub fn profile_source(&self) -> Option<marathe::Source> {
        self.probe.profile_source()
    }

    /// The placement it replays, to be computed before the run.
    pub fn plan(&self) -> Option<PlanRequest> {
        self.probe.plan()
    }
}

/// The mechanisms of a comma list of specs (`sammu:nt=4,os`), or all of them with their
/// defaults (but those whose defaults repeat another's).
pub fn parse_list(list: &str) -> Result<Vec<Chosen>, SpecError> {
    let every = || {
        MECHANISMS.iter().filter(|m| m.caps.in_all).map(|m| Spec { name: m.name.into(), options: Vec::new() }).collect()
    };
    let mut out: Vec<Chosen> = Vec::new();
    for (spec, _) in Spec::parse_list_with_all(list, KIND, every)? {
        let info = find(&spec.name).ok_or_else(|| {
            let hint = sharemap_core::did_you_mean(&spec.name, MECHANISMS.iter().map(|m| m.name));
            spec.error(KIND, format!("unknown mechanism ({hint}known: {}, or all)", plugin::names(MECHANISMS)))
        })?;
        let params = info.params(KIND, &[&spec.options])?;
        // Built once here so that bad values fail before the trace is read.
        let probe = (info.build)(&params, 0)?;
        let label = spec.to_string();
        if !out.iter().any(|o| o.label == label) {
            out.push(Chosen { label, info, params, probe });
        }
    }
    if out.is_empty() {
        return Err(SpecError { kind: KIND, spec: list.to_string(), what: "no mechanism named".into() });
    }
    Ok(out)
}
