//! `sharemap simulate`: a trace under each mechanism on a simulated NUMA machine
//! (docs/simulator.md).

use crate::progress::Bars;
use crate::trace_cmds::warn_if_truncated;
use anyhow::{Result, anyhow};
use clap::Args;
use sharemap::registry::Kind;
use sharemap::simulate::{Params, SimulateRequest, Simulation};
use sharemap::{Machine, Session};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Clone, Debug)]
pub struct SimulateArgs {
    /// Trace file (native, CSV or Parquet)
    #[arg(required_unless_present = "list")]
    pub trace: Option<PathBuf>,
    /// Input format, overriding detection
    #[arg(long)]
    pub from: Option<String>,
    #[command(flatten)]
    pub exclude: crate::trace_cmds::InputArgs,
    /// Machine: preset, hwloc synthetic string, hwloc XML file or `live`
    #[arg(long, short = 'm', default_value = "sammu")]
    pub machine: String,
    /// Mechanisms to simulate: a comma list of NAME or NAME:key=value,...; `all` in it stands for every mechanism (see `sharemap list mechanisms`)
    #[arg(long, default_value = "all")]
    pub mechanism: String,
    /// Page size in bytes (default: the trace's)
    #[arg(long)]
    pub page_size: Option<u64>,
    /// Seed of the random mechanism and of the mapping algorithms
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the results as JSON
    #[arg(long)]
    pub json: bool,
    /// Parameter of a placement policy a `place` mechanism replays, as policy.key=value
    /// (repeatable; see `sharemap list policies`)
    #[arg(long = "set", value_name = "POLICY.KEY=VALUE")]
    pub set: Vec<String>,
    /// A parameter of the machine model, as key=value (repeatable; see --list), e.g.
    /// walk-ns=40 or dram-ns=100
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub param: Vec<String>,
    /// Also write bar plots: BASE-time, BASE-misses and BASE-traffic (.svg, and .png in a
    /// build with the png feature)
    #[arg(long, value_name = "BASE")]
    pub plot: Option<PathBuf>,
    /// List the mechanisms and the model's parameters
    #[arg(long)]
    pub list: bool,
}

/// `simulate TRACE` (`--list` is handled by the command line as `list mechanisms`).
pub fn run(args: &SimulateArgs) -> Result<ExitCode> {
    let path = args.trace.clone().expect("clap requires it");
    let input = crate::trace_cmds::input(&path, args.from.as_deref(), &args.exclude, sharemap::Selection::Auto)?;
    crate::trace_cmds::say_first_touch(&input)?;
    let mut params = Params::default();
    for setting in &args.param {
        params.set(setting).map_err(|e| anyhow!("--param: {e}"))?;
    }
    let request = SimulateRequest {
        mechanisms: args.mechanism.clone(),
        page_size: args.page_size,
        params,
        settings: args.set.clone(),
        log_decisions: false,
    };
    let machine = Machine::from_spec(&args.machine).map_err(|e| anyhow!(e))?;
    warn_if_truncated(&input)?;
    let session = Session::new(input, machine, args.seed).with_observer(Arc::new(Bars::new()));
    // Errors name their file (the trace's) or their setting already.
    let sim = session.simulate(&request).map_err(|e| match e.page_size() {
        Some(_) => crate::flags::with_flag(e),
        None => anyhow!(e),
    })?;
    if let Some(base) = &args.plot {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        sharemap_report::plot::simulation(&sim, base, &name)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&sim)?);
    } else {
        print_table(&path, &sim);
    }
    Ok(ExitCode::SUCCESS)
}

/// A ratio to `os`, or "-" where `os` had none of it.
fn ratio(r: f64) -> String {
    if r.is_finite() { format!("{r:.3}") } else { "-".into() }
}

fn print_table(path: &std::path::Path, s: &Simulation) {
    let caches = if s.cache_levels.is_empty() {
        "no caches".to_string()
    } else {
        let levels = s.cache_levels.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("/L");
        let inclusion = s.inclusion.iter().map(|i| format!(", {i}")).collect::<String>();
        format!("caches L{levels}{inclusion}")
    };
    println!(
        "{}: {} threads on {} ({} cores, {} NUMA nodes, {caches}), pages of {} bytes",
        path.display(),
        s.threads,
        s.machine,
        s.cores,
        s.numa_nodes,
        s.page_size
    );
    let accesses = s.mechanisms.first().map_or(0, |m| m.counts.accesses);
    println!("{accesses} accesses; misses per 1000 accesses (MPKA); ratios to os (time, last-level misses, traffic)\n");
    print_rows(s);
    println!(
        "time: the slowest thread's simulated clock; local: DRAM accesses served by the thread's own node; faults: page faults a mechanism took to sample accesses"
    );
    println!("{}", bandwidth_line(s));
    for m in s.mechanisms.iter().filter(|m| m.note.is_some()) {
        println!("note: {}: {}", m.mechanism, m.note.as_deref().unwrap_or_default());
    }
}

/// The bandwidths in force and, per mechanism, the share of its lines from memory or other
/// nodes that waited for them: a limit that never bound says so.
fn bandwidth_line(s: &Simulation) -> String {
    let b = &s.bandwidth;
    let head = format!("bandwidth ({}): {}", b.origin.label(), b.figures());
    if b.memory_gbps <= 0.0 && b.link_gbps <= 0.0 {
        return head;
    }
    let waited: Vec<(&str, u64, f64)> = s
        .mechanisms
        .iter()
        .map(|m| (m.mechanism.as_str(), m.counts.bandwidth_waits, m.counts.bandwidth_wait_percent()))
        .collect();
    if waited.iter().all(|w| w.1 == 0) {
        return format!("{head}; no line waited for it");
    }
    let each: Vec<String> = waited.iter().map(|(m, _, share)| format!("{m} {share:.1} %")).collect();
    format!("{head}; lines from memory or another node that waited: {}", each.join(", "))
}

/// A row per mechanism, and the key of the short names.
fn print_rows(s: &Simulation) {
    let levels: String = s.cache_levels.iter().map(|l| format!("{:>8}", format!("L{l} MPKA"))).collect();
    // Short names in the table (a mechanism's options in the key under it), as in the plots.
    let full: Vec<&str> = s.mechanisms.iter().map(|m| m.mechanism.as_str()).collect();
    let (labels, cut) = crate::plot::table_labels(&full);
    let w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0).max(9);
    println!(
        "{:<w$} {:>12} {levels} {:>8} {:>7} {:>12} {:>10} {:>8} {:>8} {:>6} {:>7} {:>23}",
        "mechanism",
        "time (ms)",
        "TLB MPKA",
        "local",
        "traffic (B)",
        "invalid.",
        "thr.mig",
        "pg.mig",
        "repl.",
        "faults",
        "vs os: time/LLC/traffic"
    );
    for (m, label) in s.mechanisms.iter().zip(&labels) {
        let levels: String = m.mpka.iter().map(|l| format!("{:>8.2}", l.mpka)).collect();
        let rel = m.vs_os.as_ref().map_or("-".to_string(), |r| {
            format!("{}/{}/{}", ratio(r.time), ratio(r.llc_misses), ratio(r.interconnect_bytes))
        });
        println!(
            "{:<w$} {:>12.3} {levels} {:>8.2} {:>6.1}% {:>12} {:>10} {:>8} {:>8} {:>6} {:>7} {:>23}",
            label,
            m.time_ns / 1e6,
            m.tlb_mpka,
            100.0 * m.local_dram_share,
            m.counts.interconnect_bytes,
            m.counts.invalidations,
            m.counts.thread_migrations,
            m.counts.page_migrations,
            m.counts.replications,
            m.counts.faults,
            rel
        );
    }
    println!();
    for (short, long) in &cut {
        println!("{short}: {long}");
    }
}

/// The simulator's mechanisms, as every registry is listed.
pub fn list_mechanisms() -> Result<ExitCode> {
    let rows = sharemap::registry::rows(Kind::Mechanism);
    crate::registry::header("mechanism");
    crate::registry::rows(rows.iter().map(crate::registry::Row::of), crate::registry::spec_form);
    Ok(ExitCode::SUCCESS)
}

/// The simulator's model parameters and their defaults.
pub fn list_parameters() -> Result<ExitCode> {
    println!("model parameters (--param KEY=VALUE; the defaults' sources: docs/simulator.md):");
    let defaults = Params::default();
    for (key, what) in Params::keys() {
        let value = defaults.value(&key).unwrap_or_default();
        // A bandwidth not set is the machine's.
        let shown = if value < 0.0 { "machine".to_string() } else { value.to_string() };
        println!("  {key:<22}{shown:>8}  {what}");
    }
    Ok(ExitCode::SUCCESS)
}
