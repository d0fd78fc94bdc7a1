//! `sharemap advise`: the mapping and placement to use for a recording on a machine, with the
//! gain the simulator gives it and why it won (sharemap's `advise`).

use crate::progress::Bars;
use crate::trace_cmds::warn_if_truncated;
use anyhow::{Result, anyhow};
use clap::Args;
use sharemap::simulate::Params;
use sharemap::{Advice, AdviseRequest, Machine, Session};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Clone, Debug)]
pub struct AdviseArgs {
    /// Trace file (native, CSV or Parquet): a recording of the program
    pub trace: PathBuf,
    /// Input format, overriding detection
    #[arg(long)]
    pub from: Option<String>,
    #[command(flatten)]
    pub input: crate::trace_cmds::InputArgs,
    /// Machine: preset, hwloc synthetic string, hwloc XML file or `live`
    #[arg(long, short = 'm', default_value = "sammu")]
    pub machine: String,
    /// A parameter of the machine model, as key=value (repeatable; `sharemap list simulator`),
    /// e.g. mlp=10
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub param: Vec<String>,
    /// Page size in bytes (default: the trace's)
    #[arg(long)]
    pub page_size: Option<u64>,
    /// The least gain over the OS, in percent, worth applying
    #[arg(long, default_value_t = sharemap::advise::DEFAULT_THRESHOLD_PERCENT)]
    pub threshold: f64,
    /// Seed of the mapping algorithms' tie-breaks
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the advice as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &AdviseArgs) -> Result<ExitCode> {
    let mut params = Params::default();
    for setting in &args.param {
        params.set(setting).map_err(|e| anyhow!("--param: {e}"))?;
    }
    if !(args.threshold >= 0.0 && args.threshold < 100.0) {
        anyhow::bail!("--threshold {}: expected a percentage from 0 to 100", args.threshold);
    }
    let machine = Machine::from_spec(&args.machine).map_err(|e| anyhow!(e))?;
    let input = crate::trace_cmds::input(&args.trace, args.from.as_deref(), &args.input, sharemap::Selection::Auto)?;
    crate::trace_cmds::say_first_touch(&input)?;
    warn_if_truncated(&input)?;
    let session = Session::new(input, machine, args.seed).with_observer(Arc::new(Bars::new()));
    let request = AdviseRequest { params, page_size: args.page_size, threshold_percent: args.threshold };
    let advice = session.advise(&request).map_err(|e| match e.page_size() {
        Some(_) => crate::flags::with_flag(e),
        None => anyhow!(e),
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&advice)?);
    } else {
        print(&advice);
    }
    Ok(ExitCode::SUCCESS)
}

fn print(a: &Advice) {
    println!(
        "{} on {}: {} threads, {} PUs; every candidate simulated in one pass",
        a.trace, a.machine, a.threads, a.pus
    );
    println!();
    let w = a.candidates.iter().map(|c| c.candidate.name.len()).max().unwrap_or(0).max(9);
    println!(
        "{:<w$} {:>10} {:>8} {:>9} {:>6} {:>9}  what",
        "candidate", "time (ms)", "speedup", "LLC miss", "local", "bw waits"
    );
    for (i, c) in a.candidates.iter().enumerate() {
        let mark = if i == a.best && a.worth_it { "  <- use" } else { "" };
        println!(
            "{:<w$} {:>10.3} {:>7.3}x {:>8.2}x {:>5.0}% {:>8.1}%  {}{mark}",
            c.candidate.name,
            c.time_ns / 1e6,
            c.speedup,
            c.llc_misses_vs_os,
            c.local_percent,
            c.bandwidth_wait_percent,
            c.candidate.what
        );
    }
    println!(
        "(speedup: the OS's simulated time over the candidate's; LLC miss: last-level misses over the OS's; local: DRAM accesses from the thread's own node; bw waits: lines from memory or another node that waited for bandwidth)"
    );
    println!();
    println!("verdict  {}", a.verdict);
    println!("why      {}", a.why);
    println!("check    {}", a.check);
    if let Some(apply) = &a.apply {
        println!("apply    {apply}");
        println!("measure  {}", apply.replace(" -- ", " --repeat 10 -- "));
    }
    if !a.avoid.is_empty() {
        let each: Vec<String> =
            a.avoid.iter().map(|(name, speedup)| format!("{name} ({:.2}x the OS's time)", 1.0 / speedup)).collect();
        println!("avoid    {}", each.join(", "));
    }
    for note in &a.notes {
        println!("note     {note}");
    }
}
