//! `sharemap place`: every placement policy and the off-line optimum on a trace, on a
//! modelled machine. Also the setup `sweep` and `filter --sensitivity` share.

use crate::progress;
use crate::registry::{self, Row};
use crate::trace_cmds::{excluding, excluding_and_saying, exclusion, format_arg, warn_if_truncated};
use anyhow::{Context as _, Result, anyhow};
use clap::Args;
use serde::Serialize;
use sharemap::{Setup, Sharing, Situation, ThreadMap};
use sharemap_detect::SharingMatrix;
use sharemap_machine::CostParams;
use sharemap_placement::Costs;
use sharemap_placement::evaluate::{EvalOptions, Evaluation, PolicyResult};
use sharemap_placement::policies::{POLICIES, Policy, Settings};
use sharemap_trace::output::AtomicOutput;
use sharemap_trace::{TraceReader, TraceSource};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What every placement command needs: the trace, the machine and the model's parameters.
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// Trace file (native, CSV or Parquet)
    pub trace: PathBuf,
    /// Input format, overriding detection
    #[arg(long)]
    pub from: Option<String>,
    #[command(flatten)]
    pub exclude: crate::trace_cmds::ExcludeArg,
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
    /// Thread placement: `identity` (thread i on logical PU i mod PUs), a mapping algorithm run
    /// on the trace's sharing (sharemap, eagermap, compact, scatter, round-robin, random), a
    /// list of PUs (one per thread), or a file holding one
    #[arg(long, default_value = "identity")]
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
    /// Policy parameter, as policy.key=value (repeatable; see `sharemap policies`)
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
        let sharing = if Path::new(&self.sharing).is_file() {
            Sharing::Matrix(SharingMatrix::read(Path::new(&self.sharing)).map_err(|e| anyhow!("{e}"))?)
        } else {
            Sharing::Detector(self.sharing.clone())
        };
        Ok(Setup {
            machine: self.machine.clone(),
            cost: self.cost.clone(),
            page_size: self.page_size,
            thread_map,
            sharing,
            refs_per_ms: self.refs_per_ms,
            seed: self.seed,
            settings: self.set.clone(),
            memory_budget: self.memory_mb.max(16).saturating_mul(1 << 20),
        })
    }

    pub fn open(&self) -> Result<TraceReader> {
        Ok(TraceReader::open(&self.trace, format_arg(self.from.as_deref())?)?)
    }

    /// The validated situation (reading the trace's sharing first when --thread-map names an
    /// algorithm).
    pub fn situation(&self) -> Result<Situation> {
        let setup = self.setup()?;
        let mut reader = self.open()?;
        let ranges = exclusion(self.exclude.text())?;
        // The placement pass that follows reads the trace again and says what was left out.
        excluding_and_saying(&mut reader, ranges, false, |source| {
            Situation::resolve(&setup, source).map_err(|e| flag_context(e, self))
        })
    }
}

/// The flag a facade error came from.
pub fn flag_context(e: sharemap::Error, args: &ModelArgs) -> anyhow::Error {
    if e.kind() == sharemap::ErrorKind::Sharing {
        return anyhow!("--sharing {}: {} ({})", args.sharing, e.why(), args.trace.display());
    }
    crate::flags::with_flag(e)
}

/// Resolves `--policy`: a comma list of names, or `all`.
pub fn policy_list(spec: &str, set: &[String]) -> Result<Vec<(String, Box<dyn Policy>)>> {
    let mut settings = Settings::default();
    for s in set {
        settings.add(s).map_err(|e| anyhow!(e))?;
    }
    sharemap::policies(spec, &settings).map_err(|e| match e.kind() {
        sharemap::ErrorKind::Policy | sharemap::ErrorKind::PolicySetting => anyhow!(e.why()),
        _ => anyhow::Error::new(e),
    })
}

pub struct Prepared {
    pub situation: Situation,
    pub prepared: sharemap::Prepared,
    /// Threads of the trace (known once it is read).
    pub threads: u32,
}

/// Reads the trace once into per-page streams.
pub fn prepare(args: &ModelArgs, policies: &[(String, Box<dyn Policy>)]) -> Result<Prepared> {
    let situation = args.situation()?;
    let mut reader = args.open()?;
    warn_if_truncated(&reader, &args.trace);
    let bar = progress::bar(reader.access_count_hint(), "reading pages");
    let ranges = exclusion(args.exclude.text())?;
    let prepared = excluding(&mut reader, ranges, |source| {
        Ok(sharemap::prepare(source, &situation, policies, &|n| bar.set_position(n))?)
    })?;
    bar.finish_and_clear();
    let threads = reader.metadata().threads;
    Ok(Prepared { situation, prepared, threads })
}

/// Where each thread runs: its PU and NUMA node.
#[derive(Serialize)]
struct ThreadOn {
    thread: u32,
    pu: usize,
    node: usize,
}

fn threads_on(prep: &Prepared) -> Vec<ThreadOn> {
    let p = &prep.situation.placement;
    (0..prep.threads).map(|t| ThreadOn { thread: t, pu: p.pu(t), node: p.node(t) }).collect()
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

impl Prepared {
    pub fn partition(&self) -> &sharemap_placement::partition::Partition {
        &self.prepared.partition
    }

    pub fn evaluate(
        &self,
        costs: Costs,
        policies: &[(String, Box<dyn Policy>)],
        opts: &EvalOptions,
    ) -> Result<Evaluation> {
        Ok(self.prepared.evaluate(&self.situation, costs, policies, opts)?)
    }

    pub fn costs(&self) -> Costs {
        Costs::new(&self.situation.costs)
    }
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
    costliest_pages: Option<&'a [sharemap_placement::evaluate::PageCost]>,
}

pub fn list() -> Result<ExitCode> {
    registry::header("policy");
    println!(
        "{:<28} seed 004 (Bolosky & Scott) section 3: the off-line optimal placement, always reported first",
        "optimal"
    );
    let rows = POLICIES.iter().map(|p| Row { name: p.name, source: p.source, summary: p.summary, params: p.params });
    registry::rows(rows, |name, p| format!("--set {name}.{}={}", p.key, p.default));
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: &ModelArgs, policy: &str, json: bool, breakdown: bool, placement: Option<&Path>) -> Result<ExitCode> {
    // Names and settings are checked before the long pass over the trace.
    let policies = policy_list(policy, &args.set)?;
    // Refuse an output that cannot be written before the long pass.
    let out = placement.map(AtomicOutput::create).transpose()?;
    let prep = prepare(args, &policies)?;
    sharemap::check_bind(&prep.situation, policy).map_err(|e| flag_context(e, args))?;
    let nodes = prep.situation.machine.numa_count();
    let opts = EvalOptions { costliest: if breakdown { 10 } else { 0 }, placement: out.is_some(), skip_optimal: false };
    let eval = prep.evaluate(prep.costs(), &policies, &opts).context("evaluating policies")?;
    if let Some(out) = out {
        drop(out);
        let path = placement.expect("out comes from it");
        sharemap::plan::write_placement(path, &eval, prep.situation.page_size.bytes())?;
    }
    if json {
        let doc = PlaceJson {
            trace: args.trace.display().to_string(),
            machine: &prep.situation.machine.name,
            numa_nodes: nodes,
            page_size: prep.situation.page_size.bytes(),
            accesses: prep.partition().refs,
            pages: prep.partition().pages(),
            costs: &prep.situation.costs,
            threads: threads_on(&prep),
            notes: &prep.situation.notes,
            policies: &eval.results,
            costliest_pages: breakdown.then_some(&eval.costliest[..]),
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_table(args, &prep, &eval, breakdown);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(args: &ModelArgs, prep: &Prepared, eval: &Evaluation, breakdown: bool) {
    let p = &prep.situation.costs;
    let costs = cost_label(p);
    println!(
        "{}: {} accesses, {} pages of {} B on {} ({} NUMA nodes); {costs}",
        args.trace.display(),
        prep.partition().refs,
        prep.partition().pages(),
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
    let rate = prep.situation.refs_per_ms;
    match prep.situation.time_scale {
        sharemap::TimeScale::Recorded => println!("time scale {rate:.0} references per ms, the recorded run's own"),
        sharemap::TimeScale::Given => println!("time scale {rate} references per ms (--refs-per-ms)"),
        sharemap::TimeScale::Default => {
            println!("time scale {rate} references per ms (assumed: the trace has no clock; set --refs-per-ms)")
        }
    }
    for note in &prep.situation.notes {
        println!("note: {note}");
    }
    if nodes == 1 {
        println!("note: one NUMA node, so every reference is local; give a NUMA machine with --machine");
    } else if threads.len() > 1 && threads.iter().all(|t| t.node == threads[0].node) {
        println!(
            "note: all {} threads run on NUMA node {}, so any policy that keeps pages there ties with the optimum (to compare policies across nodes, spread them: --thread-map scatter)",
            threads.len(),
            threads[0].node
        );
    }
    let global = p.g.is_some();
    print!("{:<28} {:>14} {:>8} {:>7} {:>12}", "policy", "cost", "MCPR", "local%", "remote");
    if global {
        print!(" {:>12}", "global");
    }
    println!(" {:>9} {:>9} {:>8}", "moves", "replicas", "vs opt");
    for r in &eval.results {
        print!("{:<28} {:>14.0} {:>8.3} {:>6.1}% {:>12}", r.name, r.cost, r.mcpr, 100.0 * r.local_ratio, r.remote);
        if global {
            print!(" {:>12}", r.global);
        }
        println!(" {:>9} {:>9} {:>8.3}", r.moves, r.replications, r.vs_optimal);
    }
    if let Some(r) = eval.results.iter().find(|r| r.profile_samples > 0) {
        println!(
            "marathe profile: {} samples ({:.3}% of accesses)",
            r.profile_samples,
            100.0 * r.profile_samples as f64 / prep.partition().refs.max(1) as f64
        );
    }
    if breakdown && !eval.costliest.is_empty() {
        println!("\ncostliest pages under the optimum:");
        print!("{:<18} {:>9} {:>8} {:>5} {:>12}", "page", "refs", "writes", "nodes", "optimal");
        for r in &eval.results[1..] {
            print!(" {:>12}", truncate(&r.name, 12));
        }
        println!();
        for pc in &eval.costliest {
            print!("{:<18} {:>9} {:>8} {:>5} {:>12.0}", pc.address, pc.references, pc.writes, pc.nodes, pc.optimal);
            for c in &pc.policies {
                print!(" {c:>12.0}");
            }
            println!();
        }
    }
}

/// r, R, g, G rounded for reading.
pub fn cost_label(p: &CostParams) -> String {
    let n = |x: f64| format!("{}", (x * 1000.0).round() / 1000.0);
    match (p.g, p.big_g) {
        (Some(g), Some(gg)) => format!("r={} R={} g={} G={}", n(p.r), n(p.big_r), n(g), n(gg)),
        _ => format!("r={} R={} (no global memory)", n(p.r), n(p.big_r)),
    }
}

fn truncate(s: &str, n: usize) -> &str {
    &s[..s.len().min(n)]
}

#[cfg(test)]
mod tests {
    #[test]
    fn thread_ranges_are_compact() {
        assert_eq!(super::ranges(&[0, 1, 2, 3, 8, 10, 11]), "0-3, 8, 10-11");
        assert_eq!(super::ranges(&[5]), "5");
    }
}
