//! The NUMA machine simulator (docs/simulator.md): a trace run under each mechanism on a
//! simulated machine, with caches, coherence, TLBs, DRAM and per-thread clocks.

use crate::observer::pass;
use crate::{Error, ErrorKind, Result, Session};
use serde::Serialize;
use sharemap_sim::mechanisms::planned::PlannedPlacement;
use sharemap_sim::mechanisms::{self, Context, Profile};
use sharemap_sim::{Model, SimError};
use sharemap_trace::TraceSource;

pub use sharemap_sim::mechanisms::sampled_pages;
pub use sharemap_sim::stats::{PageDecision, ThreadMove};
pub use sharemap_sim::{Outcome, Params};

/// What to simulate (on the session's machine, with its seed).
#[derive(Clone, Debug)]
pub struct SimulateRequest {
    /// Mechanisms: a comma list, or `all`.
    pub mechanisms: String,
    /// Page size in bytes (default: the trace's).
    pub page_size: Option<u64>,
    /// The machine model's parameters (latencies, TLBs, ...).
    pub params: Params,
    /// Settings of the placement policies `place` mechanisms replay, `policy.key=value`.
    pub settings: Vec<String>,
    /// Keep each mechanism's page decisions, in order (`Outcome::decisions`): what a real
    /// run replays of it.
    pub log_decisions: bool,
}

impl Default for SimulateRequest {
    /// Every mechanism, with the model's default parameters.
    fn default() -> Self {
        SimulateRequest {
            mechanisms: "all".into(),
            page_size: None,
            params: Params::default(),
            settings: Vec::new(),
            log_decisions: false,
        }
    }
}

/// Each mechanism's outcome on one trace.
#[derive(Clone, Debug, Serialize)]
pub struct Simulation {
    pub machine: String,
    pub cores: usize,
    pub numa_nodes: usize,
    pub cache_levels: Vec<u8>,
    /// What is inclusive of what (`Model::inclusion`), e.g. "L2 not inclusive of L1".
    pub inclusion: Vec<String>,
    /// The memory and link bandwidths the run used (the machine's or the parameters').
    pub bandwidth: sharemap_machine::Bandwidth,
    pub page_size: u64,
    pub threads: usize,
    pub params: Params,
    pub mechanisms: Vec<Outcome>,
}

/// Simulates the session's trace under the request's mechanisms. The trace is read twice
/// when a mechanism needs the whole trace's profile first (the oracle), once otherwise.
///
/// ```
/// use sharemap::trace::{Access, MemoryTrace};
/// use sharemap::{Machine, Session, SimulateRequest, TraceInput};
/// // Threads 0 and 1 write one line in turn, thread 2 reads its own data.
/// let trace = MemoryTrace::from_accesses((0..3000u64).map(|i| match i % 3 {
///     2 => Access::read(2, 0x100000 + 64 * (i % 512), 8),
///     t => Access::write(t as u32, 0x40, 8),
/// }));
/// // Two packages of two cores: `os` (Linux's placement) puts threads 0 and 2 on the first,
/// // 1 on the second.
/// let machine =
///     Machine::from_spec("pack:2 numa:1 l3:1(size=1MiB) l2:2(size=256KiB) l1d:1(size=32KiB) core:1 pu:1").unwrap();
/// let session = Session::new(TraceInput::memory(trace), machine, 1);
/// let s = session.simulate(&SimulateRequest { mechanisms: "os,oracle".into(), ..Default::default() }).unwrap();
/// let (os, oracle) = (&s.mechanisms[0], &s.mechanisms[1]);
/// // The oracle puts the two writers on one package: their line moves less far.
/// assert!(oracle.counts.transfers_remote < os.counts.transfers_remote);
/// assert!(oracle.time_ns < os.time_ns);
/// ```
pub(crate) fn simulate(session: &Session, request: &SimulateRequest) -> Result<Simulation> {
    let (mut trace, prepared) = prepare(session, request)?;
    let ctx = prepared.context(session.seed(), request.log_decisions);
    let Prepared { machine, model, chosen, threads, page_size, .. } = &prepared;
    let (threads, page_size) = (*threads, *page_size);
    let total = trace.access_count_hint();
    let outcomes = pass(session.observer(), "simulating", total, |progress| {
        sharemap_sim::simulate(&mut *trace, model, chosen, &ctx, progress)
    })
    .map_err(sim_error)?;
    Ok(Simulation {
        machine: machine.name.clone(),
        cores: model.cores,
        numa_nodes: model.nodes,
        cache_levels: model.levels(),
        inclusion: model.inclusion(),
        bandwidth: model.bandwidth,
        page_size,
        threads,
        params: request.params.clone(),
        mechanisms: outcomes,
    })
}

/// Where a mechanism starts on the session's machine, decided before the run from the
/// whole trace as `simulate` decides it: what a real run applies of the mechanisms decided
/// before they run (the oracle, Marathe's profile, autopin's candidates).
#[derive(Clone, Debug, PartialEq)]
pub struct MechanismStart {
    /// The mechanism as given.
    pub label: String,
    /// Each thread's PU (the machine's logical numbering).
    pub pus: Vec<usize>,
    /// Pages homed before the run: (page, node), in pages of `page_size` bytes.
    pub homes: Vec<(u64, usize)>,
    /// The mappings it tries after its start (autopin's candidates, the first its start).
    pub candidates: Vec<Vec<usize>>,
    /// Samples in its profile, when it takes one (Marathe's).
    pub samples: Option<u64>,
    pub page_size: u64,
}

/// Each requested mechanism's start (see [`MechanismStart`]), without the simulating pass.
pub(crate) fn starts(session: &Session, request: &SimulateRequest) -> Result<Vec<MechanismStart>> {
    let (_, prepared) = prepare(session, request)?;
    let ctx = prepared.context(session.seed(), false);
    let Prepared { chosen, profile, page_size, .. } = &prepared;
    let started = sharemap_sim::starts(chosen, &ctx).map_err(sim_error)?;
    Ok(chosen
        .iter()
        .zip(started)
        .map(|(c, (start, candidates))| {
            let samples = c.profile_source().and_then(|source| {
                let pages = profile.as_ref()?.sampled_pages(source)?;
                Some(pages.iter().map(|(_, t)| t.iter().sum::<u64>()).sum())
            });
            MechanismStart {
                label: c.label.clone(),
                pus: start.pus,
                homes: start.homes,
                candidates,
                samples,
                page_size: *page_size,
            }
        })
        .collect())
}

fn sim_error(e: SimError) -> Error {
    match e {
        SimError::Trace(t) => Error::from(t),
        SimError::Mechanism(m) => Error::new(ErrorKind::Mechanism, m.to_string()),
    }
}

/// What every mechanism needs before the run: the model, the whole trace's profile when one
/// asks for it (with the memory accesses under each mapping asked for), the plans of the
/// `place` mechanisms (returned beside the trace, opened again for the run).
struct Prepared {
    machine: sharemap_machine::Machine,
    model: Model,
    chosen: Vec<mechanisms::Chosen>,
    profile: Option<Profile>,
    plans: Vec<(String, PlannedPlacement)>,
    threads: usize,
    page_size: u64,
    schedule: sharemap_sim::RecordedSchedule,
}

impl Prepared {
    /// What the mechanisms see of it, with the session's seed.
    fn context(&self, seed: u64, log_decisions: bool) -> Context<'_> {
        Context {
            machine: &self.machine,
            model: &self.model,
            threads: self.threads,
            page_size: self.page_size,
            seed,
            profile: self.profile.as_ref(),
            plans: &self.plans,
            log_decisions,
            schedule: self.schedule,
        }
    }
}

fn prepare(session: &Session, request: &SimulateRequest) -> Result<(Box<dyn TraceSource>, Prepared)> {
    let open = || session.input().open();
    let machine = session.machine().clone();
    let chosen = mechanisms::parse_list(&request.mechanisms)?;
    let mut trace = open()?;
    let meta = trace.metadata().clone();
    crate::trace::needs_every_access(&meta, "the simulator replays every access through caches, TLBs and memory")?;
    let mut params = request.params.clone();
    if params.zero_page == 2 {
        // Reads before the first write are zero-page reads only where the trace began with
        // the program: a recording of every access, read from its start (a window that
        // starts later reads data the program wrote before it).
        let from_start = session.input().window()?.is_none_or(|w| w.spans.first().is_some_and(|s| s.0 == 0));
        let whole =
            matches!(meta.source.kind.as_str(), "tracer" | "valgrind") && meta.sampling_period == 1 && from_start;
        params.zero_page = u32::from(whole);
    }
    let model = Model::new(&machine, params).map_err(|e| Error::new(ErrorKind::MachineModel, e.to_string()))?;
    // A page size given is checked as `place` checks it (no silent rounding); the trace's
    // own is at least the simulated line.
    let page_size = match request.page_size {
        Some(given) => sharemap_core::PageSize::new(given)?.bytes(),
        None => meta.page_size.max(model.line as u64),
    };
    if page_size < model.line as u64 || !page_size.is_power_of_two() {
        return Err(Error::new(
            ErrorKind::PageSize,
            format!("{page_size} bytes: expected a power of two of at least the {}-byte line", model.line),
        ));
    }
    // Every mechanism's simulator lives at once: check the whole run's memory before any.
    let each = model.host_bytes();
    let needed = each.saturating_mul(chosen.len() as u64);
    // What the host can give without swapping.
    if let Some(available) = crate::situation::meminfo("MemAvailable")
        && needed > available
    {
        return Err(Error::new(
            ErrorKind::Mechanism,
            format!(
                "simulating {} mechanisms at once on {} needs up to {} MiB ({} MiB each: the tags and directory of its caches); \
                 this host has {} MiB available: name fewer mechanisms, or give the machine smaller caches",
                chosen.len(),
                machine.name,
                needed >> 20,
                each >> 20,
                available >> 20
            ),
        ));
    }
    let mut profile = if chosen.iter().any(|m| m.needs_profile()) {
        let placement = sharemap_machine::ThreadPlacement::identity(&machine);
        let d = sharemap_detect::detect_with_page_size(&mut *trace, "oracle", &placement, page_size)?;
        trace = open()?;
        let mut sources: Vec<_> = Vec::new();
        for source in chosen.iter().filter_map(|c| c.profile_source()) {
            if !sources.contains(&source) {
                sources.push(source);
            }
        }
        let mut sampled = Vec::new();
        for source in sources {
            sampled.push((source, mechanisms::sampled_pages(&mut *trace, page_size, source).map_err(sim_error)?));
            trace = open()?;
        }
        let pages = d.pages.sorted().into_iter().map(|(p, e)| (p, e.accesses.clone())).collect();
        Some(Profile { matrix: d.matrix, pages, sampled, memory: Vec::new(), page_size })
    } else {
        None
    };
    let mut threads = (trace.metadata().threads as usize).max(profile.as_ref().map_or(0, |p| p.matrix.threads()));
    if threads == 0 {
        // A CSV or Parquet trace says how many threads it has only once read: count them,
        // so that mappings name every thread.
        let mut seen = 0u32;
        trace.for_each_chunk(&mut |c| {
            seen = c.accesses.thread.iter().copied().max().map_or(seen, |t| seen.max(t + 1));
            Ok(())
        })?;
        threads = seen as usize;
        trace = open()?;
    }
    let mut plans = Vec::new();
    for (c, wanted) in chosen.iter().filter_map(|c| c.plan().map(|p| (c, p))) {
        plans.push((c.label.clone(), plan(session, request, &c.label, wanted, page_size)?));
        trace = open()?;
    }
    let base = Context {
        machine: &machine,
        model: &model,
        threads,
        page_size,
        seed: session.seed(),
        profile: None,
        plans: &plans,
        log_decisions: request.log_decisions,
        schedule: recorded_schedule(&meta, &machine),
    };
    let mut memory = Vec::new();
    if let Some(p) = profile.as_ref() {
        // The oracle (and `static:pages=memory`) homes pages by what the caches miss under its
        // own thread mapping: one simulator pass per mapping asked for.
        let ctx = Context { profile: Some(p), schedule: Default::default(), ..base };
        let mut wanted: Vec<Vec<usize>> = Vec::new();
        for c in &chosen {
            let pus = c
                .memory_profile_pus(&ctx)
                .map_err(|e| Error::new(ErrorKind::Mechanism, format!("{}: {}", c.label, e)))?;
            if let Some(pus) = pus.filter(|pus| !wanted.contains(pus)) {
                wanted.push(pus);
            }
        }
        for pus in wanted {
            let total = trace.access_count_hint();
            let pages = pass(session.observer(), "profiling memory accesses", total, |progress| {
                sharemap_sim::memory_profile(&mut *trace, &model, page_size, &pus, progress)
            })?;
            memory.push((pus, pages));
            trace = open()?;
        }
    }
    if let Some(p) = profile.as_mut() {
        p.memory = memory;
    }
    let schedule = base.schedule;
    Ok((trace, Prepared { schedule, machine, model, chosen, profile, plans, threads, page_size }))
}

/// Whether `os` can replay where the recorded run's threads ran: the recording host's CPUs
/// (the kernel's numbers) must be the machine's, each in the node of the same number.
fn recorded_schedule(
    meta: &sharemap_trace::Metadata,
    machine: &sharemap_machine::Machine,
) -> sharemap_sim::RecordedSchedule {
    use sharemap_sim::RecordedSchedule;
    let host = &meta.host_cpu_nodes;
    if host.is_empty() {
        return RecordedSchedule::None;
    }
    let online = host.iter().filter(|&&n| n != u32::MAX).count();
    let same = online == machine.pu_count()
        && (0..machine.pu_count())
            .all(|p| host.get(machine.pu_os_index(p) as usize) == Some(&machine.numa_os_index(machine.pu_numa[p])));
    if same { RecordedSchedule::Replayed } else { RecordedSchedule::OtherHost }
}

/// The plan of a `place` mechanism: its policy (or the optimum) run page by page on the trace,
/// as `sharemap place` runs it, with the threads where its mapping puts them.
fn plan(
    session: &Session,
    request: &SimulateRequest,
    label: &str,
    wanted: sharemap_sim::mechanisms::PlanRequest,
    page_size: u64,
) -> Result<PlannedPlacement> {
    let (policy, threads) = (wanted.policy, wanted.threads);
    let setup = crate::Setup {
        page_size: Some(page_size),
        thread_map: crate::ThreadMap::parse(&threads)?,
        settings: request.settings.clone(),
        ..Default::default()
    };
    let policies = if policy == "optimal" { String::new() } else { policy };
    let (prepared, policies) = session.prepare(&setup, &policies)?;
    if policies.0.len() > 1 {
        return Err(Error::new(ErrorKind::Mechanism, format!("{label}: one policy per place mechanism")));
    }
    let ctx = prepared.context(sharemap_placement::Costs::new(&prepared.situation.costs));
    let schedule =
        sharemap_placement::schedule::schedule(&prepared.partition, &ctx, policies.0.first().map(|(_, p)| p.as_ref()))?;
    Ok(PlannedPlacement { pus: prepared.situation.placement.pus().to_vec(), pages: schedule.into_iter().collect() })
}
