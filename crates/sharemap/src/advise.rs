//! `advise`: which mapping and placement to use, and how much faster it is. Every candidate
//! (the OS's placement, compact, scatter, the sharing-aware mappings, spread-then-group, with
//! pages by first touch or interleaved) runs on the simulated machine in one pass over the
//! trace, so caches' capacity and memory bandwidth weigh in as the simulator models them; the
//! fastest wins when it beats the OS by the threshold, and "not worth it" is said otherwise.

use crate::simulate::{Params, SimulateRequest, Simulation};
use crate::{Result, Session, WindowInfo};
use serde::Serialize;
use sharemap_sim::stats::Outcome;

/// Below this gain over the OS, in percent, a mapping is not worth applying: the simulator
/// is deterministic, but a real run's noise on a shared host is a few percent.
pub const DEFAULT_THRESHOLD_PERCENT: f64 = 2.0;

/// One configuration `advise` weighs.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Candidate {
    pub name: &'static str,
    /// The simulator's mechanism.
    pub mechanism: &'static str,
    /// `run`'s `--thread-map` and `--placement` for it.
    pub thread_map: &'static str,
    pub placement: &'static str,
    /// Whether the thread map maps the trace's sharing (then `run` needs `--sharing`).
    pub needs_sharing: bool,
    pub what: &'static str,
}

const fn candidate(
    name: &'static str,
    mechanism: &'static str,
    thread_map: &'static str,
    placement: &'static str,
    needs_sharing: bool,
    what: &'static str,
) -> Candidate {
    Candidate { name, mechanism, thread_map, placement, needs_sharing, what }
}

/// Every candidate, the OS's first (the baseline).
pub static CANDIDATES: &[Candidate] = &[
    candidate("os", "os", "os", "first-touch", false, "the OS: Linux's scheduler, pages where first touched"),
    candidate(
        "compact",
        "static:threads=compact",
        "compact",
        "first-touch",
        false,
        "packed: neighbours share every cache",
    ),
    candidate(
        "round-robin",
        "static:threads=round-robin",
        "round-robin",
        "first-touch",
        false,
        "packed one thread per core: neighbours share the last-level cache",
    ),
    candidate(
        "scatter",
        "static:threads=scatter",
        "scatter",
        "first-touch",
        false,
        "over the packages in turn, sharing ignored",
    ),
    candidate(
        "eagermap",
        "static:threads=eagermap",
        "eagermap",
        "first-touch",
        true,
        "grouped by sharing, packed (EagerMap)",
    ),
    candidate(
        "sharemap",
        "static:threads=sharemap",
        "sharemap",
        "first-touch",
        true,
        "grouped by sharing, over as many last-level caches as the data needs",
    ),
    candidate(
        "spread",
        "static:threads=spread",
        "spread",
        "first-touch",
        true,
        "spread over every last-level cache, grouped by sharing within each",
    ),
    candidate(
        "os+interleave",
        "static:threads=os,pages=round-robin",
        "os",
        "interleave",
        false,
        "the OS's threads, pages interleaved over the nodes",
    ),
    candidate(
        "spread+interleave",
        "static:threads=spread,pages=round-robin",
        "spread",
        "interleave",
        true,
        "spread then grouped, pages interleaved over the nodes",
    ),
];

#[derive(Clone, Debug)]
pub struct AdviseRequest {
    /// The machine model's parameters (as `simulate --param`).
    pub params: Params,
    pub page_size: Option<u64>,
    /// The least gain over the OS, in percent, worth applying.
    pub threshold_percent: f64,
}

impl Default for AdviseRequest {
    fn default() -> Self {
        AdviseRequest { params: Params::default(), page_size: None, threshold_percent: DEFAULT_THRESHOLD_PERCENT }
    }
}

/// One candidate's simulated figures, each beside the OS's.
#[derive(Clone, Debug, Serialize)]
pub struct Scored {
    #[serde(flatten)]
    pub candidate: Candidate,
    pub time_ns: f64,
    /// The OS's time over this one's: above 1 is faster.
    pub speedup: f64,
    /// Last-level misses over the OS's.
    pub llc_misses_vs_os: f64,
    /// DRAM accesses served by the thread's own node, percent.
    pub local_percent: f64,
    /// Lines from memory or another node that waited for bandwidth, percent.
    pub bandwidth_wait_percent: f64,
    /// Threads it puts on a core with another (SMT siblings).
    pub threads_sharing_a_core: usize,
}

/// What to use, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Advice {
    pub trace: String,
    pub machine: String,
    pub threads: usize,
    pub pus: usize,
    /// The part of the trace read (the region of interest by default).
    pub window: Option<WindowInfo>,
    /// Every candidate, in [`CANDIDATES`]' order.
    pub candidates: Vec<Scored>,
    /// The fastest candidate other than the OS's.
    pub best: usize,
    /// Whether it beats the OS by the threshold.
    pub worth_it: bool,
    pub threshold_percent: f64,
    /// The verdict, why it won (figures the user can check with `check`), and how to apply it.
    pub verdict: String,
    pub why: String,
    pub check: String,
    pub apply: Option<String>,
    /// The candidates slower than the OS by the threshold, with their speedups: what not
    /// to do (packing a bandwidth-bound program).
    pub avoid: Vec<(String, f64)>,
    /// What the user should know: more threads than PUs, one node, bandwidth limits.
    pub notes: Vec<String>,
    /// The simulation behind it.
    #[serde(skip)]
    pub simulation: Simulation,
}

impl Advice {
    pub fn best(&self) -> &Scored {
        &self.candidates[self.best]
    }
}

fn scored(candidate: Candidate, o: &Outcome, os: &Outcome, core_of: &[usize]) -> Scored {
    let llc = |o: &Outcome| o.mpka.last().map_or(0.0, |l| l.mpka);
    let mut per_core = std::collections::HashMap::new();
    for &pu in &o.final_pus {
        *per_core.entry(core_of.get(pu).copied().unwrap_or(pu)).or_insert(0usize) += 1;
    }
    Scored {
        candidate,
        time_ns: o.time_ns,
        speedup: os.time_ns / o.time_ns.max(f64::MIN_POSITIVE),
        llc_misses_vs_os: if llc(os) > 0.0 { llc(o) / llc(os) } else { 1.0 },
        local_percent: 100.0 * o.local_dram_share,
        bandwidth_wait_percent: o.counts.bandwidth_wait_percent(),
        threads_sharing_a_core: per_core.values().filter(|&&n| n > 1).sum(),
    }
}

/// Simulates every candidate on the session's trace and machine and chooses.
pub fn advise(session: &Session, request: &AdviseRequest) -> Result<Advice> {
    let mechanisms: Vec<&str> = CANDIDATES.iter().map(|c| c.mechanism).collect();
    let simulation = session.simulate(&SimulateRequest {
        mechanisms: mechanisms.join(","),
        page_size: request.page_size,
        params: request.params.clone(),
        ..SimulateRequest::default()
    })?;
    let os = &simulation.mechanisms[0];
    let machine = session.machine();
    let core_of = machine.core_of_pu();
    let candidates: Vec<Scored> =
        CANDIDATES.iter().zip(&simulation.mechanisms).map(|(c, o)| scored(*c, o, os, &core_of)).collect();
    // With a core for every thread, only the candidates that give each its own compete: the
    // model gives each PU its own time, not a share of its core's pipeline, so two threads
    // on SMT siblings would win by what it leaves out.
    let cores = core_of.iter().max().map_or(0, |&c| c + 1);
    let own_core = |i: &usize| simulation.threads > cores || candidates[*i].threads_sharing_a_core == 0;
    let best = (1..candidates.len())
        .filter(own_core)
        .reduce(|b, i| if candidates[i].time_ns < candidates[b].time_ns { i } else { b })
        .unwrap_or(1);
    let gain = 100.0 * (1.0 - candidates[best].time_ns / os.time_ns.max(f64::MIN_POSITIVE));
    let worth_it = gain >= request.threshold_percent;

    let trace = session.input().name();
    let (b, base) = (&candidates[best], &candidates[0]);
    let verdict = if worth_it {
        format!(
            "use {} ({}): {:.2}x the OS's speed, {:.1} % less time, simulated on {}",
            b.candidate.name, b.candidate.what, b.speedup, gain, machine.name
        )
    } else {
        format!(
            "not worth it: no mapping or placement is {:.0} % faster than the OS's on {} (the best, {}, {})",
            request.threshold_percent,
            machine.name,
            b.candidate.name,
            if gain >= 0.0 { format!("{gain:.1} % faster") } else { format!("{:.1} % slower", -gain) }
        )
    };
    let why = format!(
        "{}: time {:.3}x the OS's; last-level misses {:.2}x; local DRAM {:.0} % (OS {:.0} %); lines waiting for bandwidth {:.1} % (OS {:.1} %)",
        b.candidate.name,
        b.time_ns / base.time_ns.max(f64::MIN_POSITIVE),
        b.llc_misses_vs_os,
        b.local_percent,
        base.local_percent,
        b.bandwidth_wait_percent,
        base.bandwidth_wait_percent
    );
    let check = format!(
        "sharemap simulate {trace} --machine '{}' --mechanism os,{}{}",
        machine.name,
        b.candidate.mechanism,
        window_flag(session)
    );
    let apply = worth_it.then(|| {
        let sharing = if b.candidate.needs_sharing { format!(" --sharing {trace}") } else { String::new() };
        let placement = if b.candidate.placement == "first-touch" {
            String::new()
        } else {
            format!(" --placement {}", b.candidate.placement)
        };
        format!("sharemap run --thread-map {}{sharing}{placement} -- PROGRAM ARGS", b.candidate.thread_map)
    });
    let avoid = candidates
        .iter()
        .filter(|c| c.speedup < 1.0 / (1.0 + request.threshold_percent / 100.0))
        .map(|c| (c.candidate.name.to_string(), c.speedup))
        .collect();
    let mut notes = Vec::new();
    let siblings: Vec<String> = candidates
        .iter()
        .filter(|c| c.threads_sharing_a_core > 0 && c.time_ns < candidates[best].time_ns)
        .map(|c| format!("{} ({:.2}x the OS's speed)", c.candidate.name, c.speedup))
        .collect();
    if simulation.threads <= cores && !siblings.is_empty() {
        notes.push(format!(
            "not weighed: {}, which put threads on SMT siblings of one core; the simulator gives each PU its own time, not a share of the core's pipeline, so their gain is an upper bound (measure them with run)",
            siblings.join(", ")
        ));
    }
    let (threads, pus) = (simulation.threads, machine.pu_count());
    if threads > pus {
        notes.push(format!(
            "{threads} threads on {pus} PUs: each mapping pins several threads to a PU, which a real run pays for (8 OpenMP threads pinned one per PU on 2 PUs ran NPB MG 1.8x slower than floating); run the program with at most {pus} threads, or keep the OS's placement"
        ));
    }
    if simulation.numa_nodes <= 1 {
        notes.push(format!(
            "{} has one NUMA node: only cache sharing and capacity differ between the candidates (pass --machine a multi-node model or preset to weigh data placement)",
            machine.name
        ));
    }
    if candidates.iter().all(|c| c.bandwidth_wait_percent == 0.0) && simulation.bandwidth.memory_gbps > 0.0 {
        notes.push(
            "no candidate's lines waited for memory bandwidth at the model's overlap (mlp): --param mlp=10 lets a streaming thread ask for as much as a real core does".into(),
        );
    }
    Ok(Advice {
        trace,
        machine: machine.name.clone(),
        threads,
        pus,
        window: session.input().window()?.as_deref().cloned(),
        candidates,
        best,
        worth_it,
        threshold_percent: request.threshold_percent,
        verdict,
        why,
        check,
        apply,
        avoid,
        notes,
        simulation,
    })
}

/// The flag that reads the same part of the trace again, when it was asked for.
fn window_flag(session: &Session) -> String {
    use sharemap_trace::window::Selection;
    match session.input().selection() {
        Selection::Auto | Selection::Roi => String::new(),
        Selection::Whole => " --no-roi".into(),
        Selection::Phase(p) => format!(" --phase {p}"),
        Selection::Range { start, end } => {
            format!(" --window {start}-{}", end.map_or(String::new(), |e| e.to_string()))
        }
    }
}
