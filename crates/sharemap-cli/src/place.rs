//! `sharemap place`: every placement policy and the off-line optimum on a trace, on a
//! modelled machine. Also the setup `sweep` and `filter --sensitivity` share.

use crate::progress::Bars;
use crate::registry::{self, Row};
use crate::trace_cmds::{say_excluded, warn_if_truncated};
use anyhow::{Result, anyhow};
use clap::Args;
use serde::Serialize;
use sharemap::place::{Evaluation, PageCost, PolicyResult};
use sharemap::registry::Kind;
use sharemap::{CostParams, Machine, PlaceRequest, Placement, Session, Setup, Sharing, ThreadMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// What every placement command needs: the trace, the machine and the model's parameters.
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// Trace file (native, CSV or Parquet)
    pub trace: PathBuf,
    /// Input format, overriding detection
    #[arg(long)]
    pub from: Option<String>,
    #[command(flatten)]
    pub exclude: crate::trace_cmds::InputArgs,
    /// Machine: hwloc synthetic string, hwloc XML file, preset or `live`
    #[arg(long, short = 'm', default_value = "sammu")]
    pub machine: String,
    /// Cost parameters: `ace`, `butterfly`, or some of r=..,R=..,g=..,G=.. overriding the
    /// machine's (default: derived from the machine and the page size)
    #[arg(long)]
    pub cost: Option<String>,
    /// Page size in bytes (default: the trace's)
    #[arg(long)]
    pub page_size: Option<u64>,
    /// Thread placement: `os` (where Linux's scheduler puts the threads, modelled; see
    /// docs/os-model.md), `identity` (thread i on the CPU numbered i), a mapping algorithm run
    /// on the trace's sharing (sharemap, eagermap, compact, scatter, round-robin, random), a
    /// list of PUs (one per thread), or a file holding one
    #[arg(long, default_value = "os")]
    pub thread_map: String,
    /// The sharing a --thread-map algorithm maps: a detector run on the trace (oracle, sammu,
    /// stmap, sampled:..., faults; see `sharemap analyze`) or a matrix file (numalize comm CSV
    /// or TopoMatch .mat) with one row per thread of the trace
    #[arg(long, default_value = "oracle")]
    pub sharing: String,
    /// References per millisecond of the traced run (turns the kernel's periods into
    /// positions); default: the recording's own rate (its accesses over its run time), or
    /// 1000 for a trace without a clock (generated, CSV)
    #[arg(long)]
    pub refs_per_ms: Option<f64>,
    /// Seed of the random policy and of the trace filters
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Policy parameter, as policy.key=value (repeatable; see `sharemap list policies`)
    #[arg(long = "set", value_name = "POLICY.KEY=VALUE")]
    pub set: Vec<String>,
    /// Memory for page references, in MiB, whatever their distribution over pages: past it
    /// they go to temporary files (each worker reuses its share once full)
    #[arg(long, default_value_t = 256)]
    pub memory_mb: usize,
}

impl ModelArgs {
    /// The facade's description of the situation, from the flags: files named by
    /// --thread-map and --sharing are read here.
    pub fn setup(&self) -> Result<Setup> {
        let thread_map = ThreadMap::parse(&self.thread_map).map_err(|e| flag_context(e, self))?;
        // A matrix file that cannot be read says so in its own words.
        let sharing = Sharing::parse(&self.sharing).map_err(|e| anyhow!(e.why()))?;
        Ok(Setup {
            cost: self.cost.clone(),
            page_size: self.page_size,
            thread_map,
            sharing,
            refs_per_ms: self.refs_per_ms,
            settings: self.set.clone(),
            memory_budget: Some(self.memory_mb)
                .filter(|&mb| mb >= 16)
                .ok_or_else(|| anyhow!("--memory-mb {}: expected at least 16 MiB", self.memory_mb))?
                .checked_mul(1 << 20)
                .ok_or_else(|| anyhow!("--memory-mb: {} MiB is more than any machine's memory", self.memory_mb))?,
        })
    }

    /// The session these flags describe: the trace (with `--from` and `--exclude`), the
    /// machine and the seed, progress drawn as bars. Warns once when the trace is truncated.
    pub fn session(&self) -> Result<Session> {
        let input =
            crate::trace_cmds::input(&self.trace, self.from.as_deref(), &self.exclude, sharemap::Selection::Auto)?;
        crate::trace_cmds::say_first_touch(&input)?;
        let machine = Machine::from_spec(&self.machine).map_err(|e| anyhow!(e))?;
        warn_if_truncated(&input)?;
        Ok(Session::new(input, machine, self.seed).with_observer(Arc::new(Bars::new())))
    }
}

/// The flag a facade error came from.
pub fn flag_context(e: sharemap::Error, args: &ModelArgs) -> anyhow::Error {
    crate::flags::say(e, crate::flags::At::Place { sharing: &args.sharing, trace: &args.trace })
}

/// Where each thread runs: its PU and NUMA node.
#[derive(Serialize)]
struct ThreadOn {
    thread: u32,
    pu: usize,
    node: usize,
}

fn threads_on(placed: &Placement) -> Vec<ThreadOn> {
    let p = &placed.situation.placement;
    (0..placed.threads).map(|t| ThreadOn { thread: t, pu: p.pu(t), node: p.node(t) }).collect()
}

/// "node 0: threads 0-3, 8; node 1: threads 4-7": the thread placement in one line.
fn nodes_line(threads: &[ThreadOn], nodes: usize) -> String {
    let mut parts = Vec::new();
    for node in 0..nodes {
        let ids: Vec<u32> = threads.iter().filter(|t| t.node == node).map(|t| t.thread).collect();
        if !ids.is_empty() {
            parts.push(format!("node {node}: {}", ranges(&ids)));
        }
    }
    parts.join("; ")
}

/// Sorted ids as "0-3, 8".
fn ranges(ids: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j { ids[i].to_string() } else { format!("{}-{}", ids[i], ids[j]) });
        i = j + 1;
    }
    out.join(", ")
}

#[derive(Serialize)]
struct PlaceJson<'a> {
    trace: String,
    machine: &'a str,
    numa_nodes: usize,
    page_size: u64,
    accesses: u64,
    pages: usize,
    costs: &'a CostParams,
    /// Each thread's PU (logical index) and NUMA node.
    threads: Vec<ThreadOn>,
    /// How the thread placement came about, when there is something to say.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    notes: &'a [String],
    policies: &'a [PolicyResult],
    #[serde(skip_serializing_if = "Option::is_none")]
    costliest_pages: Option<&'a [PageCost]>,
}

pub fn list() -> Result<ExitCode> {
    registry::header("policy");
    println!(
        "{:<28} seed 004 (Bolosky & Scott) section 3: the off-line optimal placement, always reported first",
        "optimal"
    );
    let rows = sharemap::registry::rows(Kind::Policy);
    registry::rows(rows.iter().map(Row::of), registry::spec_form);
    println!(
        "(a parameter is set in the policy's spec, --policy NAME:KEY=VALUE, or for every spec of it, --set NAME.KEY=VALUE)"
    );
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: &ModelArgs, policy: &str, json: bool, breakdown: bool, placement: Option<&Path>) -> Result<ExitCode> {
    let session = args.session()?;
    let request = PlaceRequest {
        setup: args.setup()?,
        policies: policy.into(),
        costliest: if breakdown { 10 } else { 0 },
        plan: placement.map(Path::to_path_buf),
        keep_placement: false,
    };
    let placed = session.place(&request).map_err(|e| flag_context(e, args))?;
    say_excluded(session.input());
    let eval = &placed.evaluation;
    if json {
        let situation = &placed.situation;
        let doc = PlaceJson {
            trace: args.trace.display().to_string(),
            machine: &situation.machine.name,
            numa_nodes: situation.machine.numa_count(),
            page_size: situation.page_size.bytes(),
            accesses: placed.accesses,
            pages: placed.pages,
            costs: &situation.costs,
            threads: threads_on(&placed),
            notes: &situation.notes,
            policies: &eval.results,
            costliest_pages: breakdown.then_some(&eval.costliest[..]),
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_table(args, &placed, breakdown);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(args: &ModelArgs, placed: &Placement, breakdown: bool) {
    let (prep, eval): (&Placement, &Evaluation) = (placed, &placed.evaluation);
    let p = &prep.situation.costs;
    let costs = cost_label(p);
    println!(
        "{}: {} accesses, {} pages of {} B on {} ({} NUMA nodes); {costs}",
        args.trace.display(),
        prep.accesses,
        prep.pages,
        prep.situation.page_size,
        prep.situation.machine.name,
        prep.situation.machine.numa_count()
    );
    let nodes = prep.situation.machine.numa_count();
    let threads = threads_on(prep);
    if threads.len() <= 64 {
        let pus: Vec<String> = threads.iter().map(|t| t.pu.to_string()).collect();
        println!("threads on PUs {} ({})", pus.join(" "), nodes_line(&threads, nodes));
    } else {
        println!("threads by NUMA node: {} (PUs in --json)", nodes_line(&threads, nodes));
    }
    print_time_scale(&prep.situation);
    for note in &prep.situation.notes {
        println!("note: {note}");
    }
    print_results(prep, eval, breakdown);
}

/// Where the references per millisecond came from.
fn print_time_scale(situation: &sharemap::Situation) {
    let rate = situation.refs_per_ms;
    match situation.time_scale {
        sharemap::TimeScale::Recorded => println!("time scale {rate:.0} references per ms, the recorded run's own"),
        sharemap::TimeScale::Given => println!("time scale {rate} references per ms (--refs-per-ms)"),
        sharemap::TimeScale::Default => {
            println!("time scale {rate} references per ms (assumed: the trace has no clock; set --refs-per-ms)")
        }
    }
}

/// The optimum and each policy: cost, MCPR, local share, moves, against the optimum.
fn print_results(prep: &Placement, eval: &Evaluation, breakdown: bool) {
    let global = prep.situation.costs.g.is_some();
    // Short names (a policy's options in a key under the table), as in the plots.
    let full: Vec<&str> = eval.results.iter().map(|r| r.name.as_str()).collect();
    let (labels, cut) = crate::plot::table_labels(&full);
    let w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0).max(6);
    print!("{:<w$} {:>14} {:>8} {:>7} {:>12}", "policy", "cost", "MCPR", "local%", "remote");
    if global {
        print!(" {:>12}", "global");
    }
    println!(" {:>9} {:>9} {:>8}", "moves", "replicas", "vs opt");
    for (r, label) in eval.results.iter().zip(&labels) {
        print!("{:<w$} {:>14.0} {:>8.3} {:>6.1}% {:>12}", label, r.cost, r.mcpr, 100.0 * r.local_ratio, r.remote);
        if global {
            print!(" {:>12}", r.global);
        }
        println!(" {:>9} {:>9} {:>8.3}", r.moves, r.replications, r.vs_optimal);
    }
    if let Some(r) = eval.results.iter().find(|r| r.profile_samples > 0) {
        println!(
            "marathe profile: {} samples ({:.3}% of accesses)",
            r.profile_samples,
            100.0 * r.profile_samples as f64 / prep.accesses.max(1) as f64
        );
    }
    for (short, long) in &cut {
        println!("{short}: {long}");
    }
    if breakdown && !eval.costliest.is_empty() {
        print_breakdown(eval, &labels);
    }
}

/// The costliest pages under the optimum, each policy's cost on them. The policies are
/// numbered in the header (their names, numbered, under it): 20 names side by side were
/// 390 characters wide, and names cut to fit read alike.
fn print_breakdown(eval: &Evaluation, labels: &[String]) {
    println!("\ncostliest pages under the optimum (cost of each policy on the page; P1, P2, ... as listed below):");
    print!("{:<18} {:>9} {:>8} {:>5} {:>10}", "page", "refs", "writes", "nodes", "optimal");
    for k in 1..eval.results.len() {
        print!(" {:>7}", format!("P{k}"));
    }
    println!();
    for pc in &eval.costliest {
        print!("{:<18} {:>9} {:>8} {:>5} {:>10.0}", pc.address, pc.references, pc.writes, pc.nodes, pc.optimal);
        for c in &pc.policies {
            print!(" {:>7}", compact_number(*c));
        }
        println!();
    }
    let key: Vec<String> = labels.iter().skip(1).enumerate().map(|(k, l)| format!("P{} {l}", k + 1)).collect();
    println!("{}", key.join(", "));
}

/// A cost in at most 7 characters: 1234567, then 12.3M, 1.2G.
fn compact_number(x: f64) -> String {
    match x {
        x if x < 1e7 => format!("{x:.0}"),
        x if x < 1e10 => format!("{:.1}M", x / 1e6),
        x => format!("{:.1}G", x / 1e9),
    }
}

/// r, R, g, G rounded for reading.
pub fn cost_label(p: &CostParams) -> String {
    p.label()
}

#[cfg(test)]
mod tests {
    #[test]
    fn thread_ranges_are_compact() {
        assert_eq!(super::ranges(&[0, 1, 2, 3, 8, 10, 11]), "0-3, 8, 10-11");
        assert_eq!(super::ranges(&[5]), "5");
    }
}
