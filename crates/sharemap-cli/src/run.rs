//! `sharemap run`: a program run with its threads pinned (and its pages placed), once, or
//! several configurations measured against each other.

use anyhow::{Result, anyhow};
use sharemap::Machine;
use sharemap_run::{
    Configuration, ConfigurationResult, FailedRun, Failure, Observed, Pinning, PlanOutcome, PreparedRun, RunRequest,
    Runner, Stopped,
};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `sharemap run`'s flags.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Where the program's threads run (repeatable: each a configuration). Thread k is the
    /// k-th the program creates, the main thread 0 (the tracer's numbering): os (no
    /// pinning), identity, an algorithm (compact, scatter, round-robin, random, or one that
    /// maps --sharing: sharemap, eagermap, treematch, ...), logical PUs (thread k on entry
    /// k mod their number), a file holding them (numbers, or `sharemap map --json`'s
    /// output for `--machine live`), or trace:FILE / matrix:FILE (the default algorithm
    /// on that sharing, for this host)
    #[arg(long = "thread-map", default_value = "os")]
    pub thread_map: Vec<String>,
    /// The sharing a --thread-map algorithm maps onto this host: a trace (its oracle
    /// matrix) or a matrix file (numalize CSV, TopoMatch .mat)
    #[arg(long)]
    pub sharing: Option<PathBuf>,
    /// Where pages go: first-touch (the kernel's default), interleave (all nodes),
    /// bind:NODE, a plan file (`place --placement` output, or CSV page,node),
    /// optimal:TRACE (the optimum of a recording, a home node per page) or marathe:TRACE
    /// (each page where a 1-in-100 profile of the recording saw it most); anything but
    /// first-touch needs a NUMA host, and a plan a recording made with --no-aslr
    #[arg(long, default_value = "first-touch")]
    pub placement: String,
    /// Runs per configuration, interleaved (A B A B ...); with more than one run or more than
    /// one configuration, `os` comes first as the baseline and the program's output is
    /// discarded
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Seed of the random mapping (drawn afresh for each run from it)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the measurement as JSON
    #[arg(long)]
    pub json: bool,
    /// Write every run's time to this CSV file (configuration, run, seconds)
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Address-space randomisation off (as `record --no-aslr`): the program's addresses
    /// are then those of a recording made the same way
    #[arg(long)]
    pub no_aslr: bool,
    /// Draw the measurement as bars (time over os's, 95% error bars) to BASE.svg and
    /// BASE.png
    #[arg(long, value_name = "BASE")]
    pub plot: Option<PathBuf>,
    /// Print where each thread last ran and its allowed CPUs, and the resident pages per
    /// NUMA node, as the kernel tells them when the program ends
    #[arg(long = "where")]
    pub show_where: bool,
    /// Also write what the kernel told (`--where`'s answers) as JSON to this file: how
    /// `sharemap vm`'s guest hands them to the host
    #[arg(long, value_name = "FILE", hide = true)]
    pub observed_to: Option<PathBuf>,
    /// Transparent huge pages, when a plan places pages on a host that has them: split
    /// (turned off for the program in every configuration, so each planned 4 KiB page lands
    /// on its node), regions (kept; each huge-page region placed whole on the node most of
    /// its planned pages want) or keep (nothing done)
    #[arg(long, default_value = "split", value_parser = ["split", "regions", "keep"])]
    pub thp: String,
    /// Mechanisms to measure against os (comma-separated or repeated; `all` for those that
    /// apply here): os, random, compact, scatter, round-robin, oracle, marathe[:every=K |
    /// :prefix=SHARE], sammu, kmaf, carrefour, autopin, numa-balancing; oracle, marathe,
    /// sammu, kmaf, carrefour and autopin need --recording
    #[arg(long = "mechanism")]
    pub mechanisms: Vec<String>,
    /// A recording of the program (`sharemap record --no-aslr`) for the mechanisms that
    /// need one
    #[arg(long)]
    pub recording: Option<PathBuf>,
    /// The program and its arguments, after --
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// The library's request for these flags.
    fn request(&self) -> RunRequest {
        RunRequest {
            command: self.command.clone(),
            thread_maps: self.thread_map.clone(),
            sharing: self.sharing.clone(),
            placement: self.placement.clone(),
            mechanisms: self.mechanisms.clone(),
            recording: self.recording.clone(),
            repeat: self.repeat,
            seed: self.seed,
            no_aslr: self.no_aslr,
            observe: self.show_where,
            thp: sharemap_run::thp::Thp::parse(&self.thp).expect("clap checked it"),
        }
    }
}

/// A library error as the flag it came from.
fn flag(e: sharemap::Error) -> anyhow::Error {
    crate::flags::say(e, crate::flags::At::Run)
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let tools = sharemap_run::Tools::beside(&std::env::current_exe()?);
    let host = Machine::live().map_err(|e| anyhow!("cannot read this host's topology: {e}"))?;
    let prepared = args.request().prepare(&tools, host).map_err(flag)?;
    for note in &prepared.notes {
        eprintln!("sharemap: {note}");
    }
    if !prepared.measuring {
        return single(&prepared, args.observed_to.as_deref());
    }
    let bar = crate::progress::bar_of(Some((prepared.configs.len() * args.repeat) as u64), "running", "runs");
    let report = prepared.measure(&mut |done, _| bar.set_position(done as u64));
    bar.finish_and_clear();
    let report = match report {
        Ok(r) => r,
        Err(Stopped::Refused(e)) => return Err(flag(e)),
        Err(Stopped::Failed(failed)) => return Ok(failed_run(&prepared.runner, *failed)),
    };
    let results = &report.results;
    for line in &report.oversubscribed {
        eprintln!("sharemap: {line}");
    }
    if let Some(path) = &args.csv {
        sharemap_run::runs::write(path, results)?;
    }
    if let Some(base) = &args.plot {
        plot(&prepared.runner, results, args.repeat, base)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(results)?);
    } else {
        print_table(results, args.repeat);
        if let Some(why) = &report.no_counters {
            println!("hardware counters: none, so no LLC misses or remote accesses to report: {why}");
        }
        for (r, config) in results.iter().zip(&prepared.configs) {
            print_configuration(r, config, results, args.repeat);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The run that stopped a measurement, said, and its exit status.
fn failed_run(runner: &Runner, failed: FailedRun) -> ExitCode {
    let FailedRun { configuration, round, failure } = failed;
    let (why, code) = match failure {
        Failure::CannotStart(e) => (format!("{e}"), 1),
        Failure::Exited(o) if o.signal.is_some() => {
            (format!("{} was killed by signal {}", runner.program.display(), o.signal.unwrap_or(0)), o.exit)
        }
        Failure::Exited(o) => (format!("{} exited with status {}", runner.program.display(), o.exit), o.exit),
    };
    eprintln!("sharemap: run {} of {configuration}: {why}", round + 1);
    ExitCode::from(code.clamp(1, 255) as u8)
}

/// The measurement as bars: each configuration's time over the baseline's, 95 % error bars.
fn plot(runner: &Runner, results: &[ConfigurationResult], repeat: usize, base: &Path) -> Result<()> {
    let program = runner.program.file_name().unwrap_or_default().to_string_lossy();
    let bars: Vec<(String, f64, Option<f64>)> =
        results.iter().map(|r| (r.name.clone(), r.normalized, r.ci95.map(|c| c / results[0].mean))).collect();
    let title = format!("{program}: wall-clock time over {}'s ({repeat} runs each, 95% CI)", results[0].name);
    Ok(crate::plot::save_svg(&crate::plot::bars_svg(&title, "time / os time", &bars)?, base)?)
}

/// What a configuration did beyond its time: its plan, autopin's choices, its profile,
/// what it replayed.
fn print_configuration(
    r: &ConfigurationResult,
    config: &Configuration,
    results: &[ConfigurationResult],
    repeat: usize,
) {
    if let Some(p) = &r.plan {
        println!("{}: plan (last run): {}", r.name, plan_summary(p));
    }
    if let Some(a) = &r.autopin {
        let picks: Vec<String> = a.picks.iter().map(|(n, k)| format!("{n} {k}")).collect();
        println!(
            "{}: fastest in probation: {} (the oracle's mapping in {} of {repeat} rounds); its time includes its probation runs ({:.3} s) beside the runs it chose ({:.3} s)",
            r.name,
            picks.join(", "),
            a.oracle,
            a.probation_seconds,
            a.chosen_seconds
        );
    }
    if let Some(p) = &config.profile {
        let cost = match p.recording_seconds {
            Some(s) => format!(
                "recorded (1 in {}) in {s:.3} s, {:+.1}% over os's mean",
                p.recording_period,
                100.0 * (s / results[0].mean - 1.0)
            ),
            None => "the recording's run time is unknown".into(),
        };
        println!("{}: profile of {} samples ({}); {cost}", r.name, p.samples, p.sampling);
    }
    if let Some(p) = &config.replayed {
        let fired = if p.thread_migrations + p.page_moves == 0 { " (it never fired on the recording)" } else { "" };
        println!(
            "{}: simulated {} on the recording: {} thread migrations in {} remaps, {} page moves{fired}",
            r.name, p.simulated, p.thread_migrations, p.remaps, p.page_moves
        );
        if let Some(t) = &r.timeline {
            let over = if r.name == results[0].name {
                "one uncounted os run"
            } else {
                "the baseline's mean time before the run"
            };
            println!("{}: {} (spread over {over})", r.name, timeline_summary(t));
        }
    }
}

/// One run, with the program's output and exit status passed through.
fn single(prepared: &PreparedRun, observed_to: Option<&Path>) -> Result<ExitCode> {
    let (runner, config) = (&prepared.runner, &prepared.configs[0]);
    let outcome = prepared.once().map_err(flag)?;
    if let Pinning::Pus(pus) | Pinning::Nodes(pus) = &config.pinning {
        let threads = outcome.pinned.len() + outcome.pinned_sets.len();
        let wrapped = if !outcome.pinned_sets.is_empty() {
            let nodes = runner.host.numa_count();
            format!(
                "; each to the CPUs of its PU's NUMA node ({}): the mapping has more threads than the host has PUs, and threads pinned one per PU would take turns while others idle",
                if nodes == 1 { "the one node: all of them".to_string() } else { format!("{nodes} nodes") }
            )
        } else if threads > pus.len() {
            let n = pus.len();
            let beyond = if threads - 1 == n { format!("thread {n}") } else { format!("threads {n}-{}", threads - 1) };
            let named = if n == 1 { "1 PU".to_string() } else { format!("{n} PUs") };
            format!("; the mapping names {named}: {beyond} wrapped around (thread k on thread k mod {n}'s PU)")
        } else {
            String::new()
        };
        eprintln!(
            "sharemap: {threads} thread{} pinned as {} ({:.3} s){wrapped}",
            if threads == 1 { "" } else { "s" },
            config.name,
            outcome.seconds
        );
        if let Some(line) = sharemap_run::request::oversubscription(config, &outcome) {
            eprintln!("sharemap: {line}");
        }
    }
    if let Some(observed) = &outcome.observed {
        print_where(observed, runner.observe, &runner.host);
        if let Some(path) = observed_to {
            sharemap::trace::write_whole(path, serde_json::to_string(observed)?.as_bytes())?;
        }
    }
    if let Some(sig) = outcome.signal {
        eprintln!("sharemap: {} was killed by signal {sig}", runner.program.display());
    }
    Ok(ExitCode::from(outcome.exit.clamp(0, 255) as u8))
}

/// The kernel's answers: each thread's CPUs (with `--where`), pages per node, and the plan.
fn print_where(observed: &Observed, threads: bool, host: &Machine) {
    if threads {
        for t in &observed.threads {
            let last = t.last_cpu.map_or("?".to_string(), |c| c.to_string());
            let pu = t.last_cpu.and_then(|c| (0..host.pu_count()).find(|&p| host.pu_os_index(p) as usize == c));
            let pu = pu.map_or(String::new(), |p| format!(" (PU {p})"));
            let allowed = sharemap_run::cpu_ranges(&t.allowed);
            eprintln!(
                "sharemap: thread {} (tid {}) last ran on CPU {last}{pu}, allowed CPUs {allowed}",
                t.order, t.tid
            );
        }
        let nodes = |pages: &[(usize, u64)]| {
            let v: Vec<String> = pages.iter().map(|(n, p)| format!("node {n} {p}")).collect();
            if v.is_empty() { "none".to_string() } else { v.join(", ") }
        };
        match &observed.pages_unseen {
            Some(why) => eprintln!("sharemap: resident pages at exit: not seen ({why})"),
            None => eprintln!(
                "sharemap: resident pages at exit: {} (anonymous: {})",
                nodes(&observed.pages_per_node),
                nodes(&observed.anonymous_per_node)
            ),
        }
        match (&observed.counts, &observed.counters_refused) {
            (Some(c), _) if c.get("instructions").is_some() => {
                let ratio = |v: Option<f64>| v.map_or("not counted".to_string(), |v| format!("{v:.3}"));
                eprintln!(
                    "sharemap: counters: {} instructions; LLC misses per 1000 instructions {}; remote loads per 1000 instructions {}",
                    c.get("instructions").unwrap_or(0),
                    ratio(c.llc_mpki()),
                    ratio(c.remote_pki())
                );
            }
            (_, why) => eprintln!("sharemap: hardware counters: none: {}", why.as_deref().unwrap_or("no counts read")),
        }
    }
    if let Some(t) = &observed.timeline {
        eprintln!("sharemap: timeline: {} (spread over one uncounted os run)", timeline_summary(t));
    }
    if let Some(p) = &observed.plan {
        eprintln!("sharemap: plan: {}", plan_summary(p));
    }
}

/// How far a replayed timeline got in a run, in one line.
fn timeline_summary(t: &sharemap_run::timeline::TimelineOutcome) -> String {
    let mut line = format!(
        "replayed in the order they fired over {:.3} s: {} of {} remaps and {} of {} page moves came due before the program ended",
        t.scale_seconds, t.remaps_applied, t.remaps, t.moves_due, t.moves
    );
    if t.remaps_applied < t.remaps || t.moves_due < t.moves {
        line.push_str(" (it ran faster than the time its decisions were spread over)");
    }
    line
}

/// A plan's outcome in one line: how much landed, why the rest did not, and a warning
/// when the run did not touch most of it.
fn plan_summary(p: &PlanOutcome) -> String {
    let share = if p.touched > 0 { 100.0 * p.on_node as f64 / p.touched as f64 } else { 0.0 };
    let mut line = format!(
        "{} pages planned, {} touched, {} on their node ({share:.1} % of those touched)",
        p.planned, p.touched, p.on_node
    );
    let o = &p.off_node;
    let causes: Vec<String> = [
        (o.region, "placed with their huge-page region"),
        (o.huge_page, "in a huge page that went elsewhere"),
        (o.refused, "refused by the kernel"),
        (o.other, "touched late or moved since"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, why)| format!("{n} {why}"))
    .collect();
    if !causes.is_empty() {
        line.push_str(&format!("; off their node: {}", causes.join(", ")));
    }
    match p.in_huge_pages {
        Some(h) => line.push_str(&format!("; {h} in huge pages")),
        None => line.push_str("; huge pages not told (reading page flags needs root)"),
    }
    line.push_str(&format!("; {} migrated, {} refused", p.moved, p.refused));
    if p.touched * 2 < p.planned {
        line.push_str(
            " (the run touched under half the planned pages: were the recording and the run both made with \
             --no-aslr, with the same program and input?)",
        );
    }
    line
}

fn print_table(results: &[ConfigurationResult], repeat: usize) {
    let base = &results[0].name;
    println!(
        "{} each, interleaved; wall-clock seconds, mean with its 95% confidence interval (Student's t)",
        crate::count(repeat as u64, "run", "runs")
    );
    let counted = results.iter().any(|r| r.llc_mpki.is_some());
    let extra = if counted { format!(" {:>9} {:>10}", "LLC MPKI", "remote PKI") } else { String::new() };
    println!(
        "{:<24} {:>10} {:>10} {:>8}{extra}  difference from {base}",
        "configuration",
        "mean s",
        "+/- 95%",
        format!("vs {base}")
    );
    for r in results {
        let ci = r.ci95.map_or("-".to_string(), |c| format!("{c:.4}"));
        let ratio = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
        let extra =
            if counted { format!(" {:>9} {:>10}", ratio(r.llc_mpki), ratio(r.remote_pki)) } else { String::new() };
        let verdict = r.verdict(base);
        println!("{:<24} {:>10.4} {:>10} {:>8.3}{extra}  {verdict}", r.name, r.mean, ci, r.normalized);
    }
}

/// `sharemap mechanisms`: the registry, listed as the other kinds are.
pub fn list() -> Result<ExitCode> {
    use sharemap_run::mechanism::MECHANISMS;
    let needs: Vec<String> = MECHANISMS
        .iter()
        .map(|m| {
            let mut n = Vec::new();
            if m.caps.recording {
                n.push("--recording");
            }
            if m.caps.numa {
                n.push("a NUMA host");
            }
            if n.is_empty() { m.summary.to_string() } else { format!("{} (needs {})", m.summary, n.join(" and ")) }
        })
        .collect();
    let rows = MECHANISMS.iter().zip(&needs).map(|(m, about)| crate::registry::Row {
        name: m.name,
        source: m.source,
        summary: about,
        params: m.params,
    });
    crate::registry::header("mechanism");
    crate::registry::rows(rows, crate::registry::spec_form);
    Ok(ExitCode::SUCCESS)
}
