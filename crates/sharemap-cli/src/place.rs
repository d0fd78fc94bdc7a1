//! `sharemap place`: every placement policy and the off-line optimum on a trace, on a
//! modelled machine. Also the setup `sweep` and `filter --sensitivity` share.

use crate::progress;
use crate::trace_cmds::{format_arg, warn_if_truncated};
use anyhow::{Context as _, Result, anyhow, bail};
use clap::Args;
use serde::Serialize;
use sharemap_detect::{Detector, SharingMatrix, detect_with};
use sharemap_machine::{CostParams, Machine};
use sharemap_placement::evaluate::{EvalOptions, Evaluation, PolicyResult, evaluate};
use sharemap_placement::partition::{Partition, PartitionOptions};
use sharemap_placement::policies::{self, Context, POLICIES, Policy, Settings, prepass};
use sharemap_placement::{Costs, cost};
use sharemap_trace::TraceReader;
use sharemap_trace::TraceSource;
use sharemap_trace::output::{AtomicOutput, flush};
use std::io::Write;
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
    /// References per millisecond of the traced run (turns the kernel's periods into positions)
    #[arg(long, default_value_t = 1000.0)]
    pub refs_per_ms: f64,
    /// Seed of the random policy and of the trace filters
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Policy parameter, as policy.key=value (repeatable; see `sharemap policies`)
    #[arg(long = "set", value_name = "POLICY.KEY=VALUE")]
    pub set: Vec<String>,
    /// Memory for page references before spilling to temporary files, in MiB
    #[arg(long, default_value_t = 2048)]
    pub memory_mb: usize,
}

pub struct Model {
    pub machine: Machine,
    pub params: CostParams,
    pub page_size: u64,
    pub line_size: u64,
    /// Logical PU of each thread (thread t uses entry t modulo the length).
    pub pu_of_thread: Vec<usize>,
    pub node_of_thread: Vec<u16>,
    pub settings: Settings,
}

impl ModelArgs {
    pub fn model(&self, trace_page: u64, trace_line: u64) -> Result<Model> {
        let machine = Machine::from_spec(&self.machine).map_err(|e| anyhow!("{e}"))?;
        let nodes = machine.numa_count();
        if nodes > cost::MAX_NODES {
            bail!(
                "machine '{}' has {nodes} NUMA nodes; the placement model handles at most {}",
                self.machine,
                cost::MAX_NODES
            );
        }
        let page_size = self.page_size.unwrap_or(trace_page);
        if !page_size.is_power_of_two() || page_size < 64 {
            bail!("--page-size {page_size}: expected a power of two of at least 64 bytes");
        }
        let params = parse_cost(self.cost.as_deref(), machine.cost_for(page_size, trace_line), page_size)?;
        params.validate().map_err(|e| anyhow!("cost parameters: {e}"))?;
        let pu_of_thread = thread_pus(self, &machine)?;
        let node_of_thread = pu_of_thread.iter().map(|&pu| machine.pu_numa[pu] as u16).collect();
        if !(self.refs_per_ms > 0.0 && self.refs_per_ms.is_finite()) {
            bail!("--refs-per-ms {}: expected a positive number", self.refs_per_ms);
        }
        let mut settings = Settings::default();
        for s in &self.set {
            settings.add(s).map_err(|e| anyhow!(e))?;
        }
        Ok(Model { machine, params, page_size, line_size: trace_line, pu_of_thread, node_of_thread, settings })
    }
}

/// `--cost`: a preset or key=value overrides of the machine's parameters.
fn parse_cost(spec: Option<&str>, base: CostParams, page_size: u64) -> Result<CostParams> {
    let Some(spec) = spec else { return Ok(base) };
    match spec.trim() {
        "ace" => return Ok(CostParams::ace(page_size)),
        "butterfly" => return Ok(CostParams::butterfly(page_size)),
        _ => {}
    }
    let mut p = base;
    for part in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            anyhow!("--cost '{part}': expected key=value with key r, R, g or G, or a preset (ace, butterfly)")
        })?;
        let v: f64 = v
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| anyhow!("--cost '{part}': '{v}' is not a number"))?;
        match k.trim() {
            "r" => p.r = v,
            "R" => p.big_r = v,
            "g" => p.g = Some(v),
            "G" => p.big_g = Some(v),
            other => bail!("--cost '{part}': unknown parameter '{other}' (r, R, g, G; R and G are page moves)"),
        }
    }
    Ok(p)
}

/// NUMA node of each thread's PU. `spec`: `identity`, a mapping algorithm (run on the
/// trace's oracle matrix), a file holding a PU list, or a PU list.
fn thread_pus(args: &ModelArgs, machine: &Machine) -> Result<Vec<usize>> {
    let (spec, seed) = (args.thread_map.as_str(), args.seed);
    let pus = machine.pu_count();
    let file_text;
    let spec = if Path::new(spec).is_file() {
        file_text = std::fs::read_to_string(spec).map_err(|e| anyhow!("{spec}: {e}"))?;
        file_text.split_whitespace().collect::<Vec<_>>().join(",").replace(",,", ",")
    } else {
        spec.to_string()
    };
    let list: Vec<usize> = match spec.trim() {
        // Thread t uses entry t mod the list's length: one entry per PU is thread i on PU i mod PUs.
        "identity" => (0..pus).collect(),
        name if sharemap_mapping::Algorithm::parse(name, seed).is_some() => {
            let alg = sharemap_mapping::Algorithm::parse(name, seed).expect("checked");
            let matrix = thread_sharing(args, machine)?;
            let costs = sharemap_mapping::PairCosts::new(machine, sharemap_mapping::CostModel::Latency);
            sharemap_mapping::map(alg, &matrix, machine, &costs).map_err(|e| anyhow!("--thread-map {name}: {e}"))?
        }
        s => s
            .split(',')
            .map(|x| {
                let pu: usize = x
                    .trim()
                    .parse()
                    .map_err(|_| anyhow!("--thread-map: '{}' is not a PU number, a mapping algorithm or a file (see `sharemap map --help`)", x.trim()))?;
                if pu >= pus {
                    bail!("--thread-map: PU {pu} does not exist (the machine has {pus} PUs, 0..{})", pus - 1);
                }
                Ok(pu)
            })
            .collect::<Result<_>>()?,
    };
    if list.is_empty() {
        bail!("--thread-map: empty");
    }
    Ok(list)
}

/// The sharing matrix `--thread-map ALGO` maps (`--sharing`): a detector's on the trace, or a
/// matrix file that must have one row per thread of the trace.
fn thread_sharing(args: &ModelArgs, machine: &Machine) -> Result<SharingMatrix> {
    let mut reader = TraceReader::open(&args.trace, format_arg(args.from.as_deref())?)?;
    if Path::new(&args.sharing).is_file() {
        let m = SharingMatrix::read(Path::new(&args.sharing)).map_err(|e| anyhow!("{e}"))?;
        let threads = reader.metadata().threads as usize;
        if threads > 0 && m.threads() != threads {
            bail!(
                "--sharing {}: the matrix has {} threads, the trace {} has {threads}",
                args.sharing,
                m.threads(),
                args.trace.display()
            );
        }
        return Ok(m);
    }
    let det = Detector::parse(&args.sharing).map_err(|e| anyhow!("--sharing: {e} (or a matrix file)"))?;
    let bar = progress::bar(reader.access_count_hint(), "detecting sharing");
    let (d, _) = detect_with(&mut reader, det, &crate::analyze::cores_of(machine), |n| bar.set_position(n))?;
    bar.finish_and_clear();
    Ok(d.matrix)
}

/// Resolves `--policy`: a comma list of names, or `all`.
pub fn policy_list(spec: &str, settings: &Settings) -> Result<Vec<(String, Box<dyn Policy>)>> {
    let names: Vec<&str> = if spec.trim() == "all" {
        POLICIES.iter().map(|p| p.name).collect()
    } else {
        spec.split(',').map(str::trim).filter(|s| !s.is_empty() && *s != "optimal").collect()
    };
    let mut out = Vec::new();
    for name in names {
        let info = policies::find(name).ok_or_else(|| {
            let known: Vec<&str> = POLICIES.iter().map(|p| p.name).collect();
            anyhow!("unknown policy '{name}' (policies: {}, or all)", known.join(", "))
        })?;
        out.push((name.to_string(), info.build(settings).map_err(|e| anyhow!(e))?));
    }
    Ok(out)
}

pub struct Prepared {
    pub model: Model,
    pub partition: Partition,
    pub costs: Costs,
}

/// Reads the trace once into per-page streams.
pub fn prepare(args: &ModelArgs, policy_spec: &str) -> Result<Prepared> {
    let mut reader = TraceReader::open(&args.trace, format_arg(args.from.as_deref())?)?;
    warn_if_truncated(&reader, &args.trace);
    let meta = reader.metadata().clone();
    let model = args.model(meta.page_size.max(64), meta.line_size.max(1))?;
    let opts = PartitionOptions {
        page_size: model.page_size,
        node_of_thread: model.node_of_thread.clone(),
        memory_budget: args.memory_mb.max(16) << 20,
        sampler: prepass::sampler(policy_spec, &model.settings, model.line_size).map_err(|e| anyhow!(e))?,
        tlb: prepass::tlb_model(policy_spec, &model.settings, || {
            let core_of_pu = model.machine.core_of_pu();
            model.pu_of_thread.iter().map(|&pu| core_of_pu[pu]).collect()
        })
        .map_err(|e| anyhow!(e))?,
    };
    let bar = progress::bar(reader.access_count_hint(), "reading pages");
    let partition = Partition::build(&mut reader, &opts, |n| bar.set_position(n))?;
    bar.finish_and_clear();
    let costs = Costs::new(&model.params);
    Ok(Prepared { model, partition, costs })
}

impl Prepared {
    pub fn context(&self, args: &ModelArgs) -> Context<'_> {
        self.context_with(args, self.costs)
    }

    pub fn context_with(&self, args: &ModelArgs, costs: Costs) -> Context<'_> {
        Context {
            nodes: self.model.machine.numa_count(),
            costs,
            page_size: self.model.page_size,
            pages: self.partition.pages() as u64,
            init_done: self.partition.init_done,
            phase_changes: &self.partition.phase_changes,
            annotations: &self.partition.annotations,
            refs_per_ms: args.refs_per_ms,
            seed: args.seed,
        }
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
    policies: &'a [PolicyResult],
    #[serde(skip_serializing_if = "Option::is_none")]
    costliest_pages: Option<&'a [sharemap_placement::evaluate::PageCost]>,
}

pub fn list() -> Result<ExitCode> {
    println!("{:<28} source", "policy");
    println!(
        "{:<28} seed 004 (Bolosky & Scott) section 3: the off-line optimal placement, always reported first",
        "optimal"
    );
    for p in POLICIES {
        println!("{:<28} {}", p.name, p.source);
        println!("{:<28}   {}", "", p.summary);
        for param in p.params {
            println!("{:<28}   --set {}.{}={}   {}", "", p.name, param.key, param.default, param.doc);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: &ModelArgs, policy: &str, json: bool, breakdown: bool, placement: Option<&Path>) -> Result<ExitCode> {
    let policies = {
        // Check names and settings before the long pass over the trace.
        let mut settings = Settings::default();
        for s in &args.set {
            settings.add(s).map_err(|e| anyhow!(e))?;
        }
        policy_list(policy, &settings)?
    };
    let out = placement.map(AtomicOutput::create).transpose()?;
    let prep = prepare(args, policy)?;
    let nodes = prep.model.machine.numa_count();
    if let Some(n) = policies::find("bind").and_then(|b| b.value(&prep.model.settings, "node").parse::<usize>().ok())
        && policies.iter().any(|(name, _)| name == "bind")
        && n >= nodes
    {
        bail!("bind.node={n}: the machine has {nodes} NUMA nodes (0..{})", nodes - 1);
    }
    let ctx = prep.context(args);
    let opts = EvalOptions { costliest: if breakdown { 10 } else { 0 }, placement: out.is_some(), skip_optimal: false };
    let eval =
        evaluate(&prep.partition, &ctx, &policies, prep.model.page_size, &opts).context("evaluating policies")?;
    if let Some(out) = out {
        write_placement(out, &eval, prep.model.page_size)?;
    }
    if json {
        let doc = PlaceJson {
            trace: args.trace.display().to_string(),
            machine: &prep.model.machine.name,
            numa_nodes: nodes,
            page_size: prep.model.page_size,
            accesses: prep.partition.refs,
            pages: prep.partition.pages(),
            costs: &prep.model.params,
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
    let p = &prep.model.params;
    let costs = cost_label(p);
    println!(
        "{}: {} accesses, {} pages of {} B on {} ({} NUMA nodes); {costs}",
        args.trace.display(),
        prep.partition.refs,
        prep.partition.pages(),
        prep.model.page_size,
        prep.model.machine.name,
        prep.model.machine.numa_count()
    );
    if prep.model.machine.numa_count() == 1 {
        println!("note: one NUMA node, so every reference is local; give a NUMA machine with --machine");
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
            100.0 * r.profile_samples as f64 / prep.partition.refs.max(1) as f64
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

/// The optimal placement, one row per change: CSV (page,at,locations) or JSON by extension.
fn write_placement(out: AtomicOutput, eval: &Evaluation, page_size: u64) -> Result<()> {
    let path = out.path().to_path_buf();
    let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let mut w = out.writer()?;
    let io = |e: std::io::Error| anyhow!("{}: {e}", path.display());
    if json {
        #[derive(Serialize)]
        struct Row {
            page: String,
            at: u64,
            locations: Vec<String>,
        }
        let rows: Vec<Row> = eval
            .placement
            .iter()
            .map(|&(page, at, set)| Row {
                page: format!("{:#x}", page * page_size),
                at,
                locations: cost::set_label(set).split(';').map(str::to_string).collect(),
            })
            .collect();
        serde_json::to_writer_pretty(&mut w, &rows)?;
        writeln!(w).map_err(io)?;
    } else {
        writeln!(w, "page,at,locations").map_err(io)?;
        for &(page, at, set) in &eval.placement {
            writeln!(w, "{:#x},{at},{}", page * page_size, cost::set_label(set)).map_err(io)?;
        }
    }
    flush(&mut w, &path)?;
    drop(w);
    out.commit()?;
    Ok(())
}
