//! `sharemap run`: a program run with its threads pinned (and its pages placed), once, or
//! several configurations measured against each other.

use anyhow::{Result, anyhow, bail};
use sharemap::Machine;
use sharemap::ThreadMap;
use sharemap_run::{
    Configuration, ConfigurationResult, DataPlacement, FailedRun, Failure, MemoryPolicy, Observed, Pinning,
    PlanOutcome, RunOutcome, Runner,
};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The most runs per configuration `--repeat` takes (each run's time is kept).
const MAX_REPEAT: usize = 1_000_000;

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

/// The mechanisms' configurations, after the thread maps' (`all`: those that apply on this
/// host with what was given, the others named in a note).
fn add_mechanisms(args: &RunArgs, host: &Machine, configs: &mut Vec<Configuration>, measuring: bool) -> Result<()> {
    use sharemap_run::mechanism::{MechanismContext, configuration, expand};
    let ctx = MechanismContext { host, recording: args.recording.as_deref(), seed: args.seed };
    let expansion = expand(&args.mechanisms, &ctx).map_err(|e| anyhow!("--mechanism {}", e.why()))?;
    if !expansion.left_out.is_empty() {
        eprintln!(
            "sharemap: note: all: {} left out (they need {})",
            expansion.left_out.join(", "),
            if args.recording.is_none() { "--recording, a NUMA host or root" } else { "a NUMA host or root" }
        );
    }
    for spec in expansion.specs {
        if configs.iter().any(|c| c.name == spec) {
            continue;
        }
        let config = configuration(&spec, &ctx)
            .map_err(|e| crate::flags::say(e, crate::flags::At::Mechanism { spec: &spec }))?;
        configs.push(config);
    }
    if measuring && !configs.iter().any(|c| c.name == "os") {
        configs.insert(0, Configuration::fixed("os", Pinning::Os, MemoryPolicy::FirstTouch));
    } else if let Some(i) = configs.iter().position(|c| c.name == "os") {
        // The baseline first: every configuration is normalised to it.
        let os = configs.remove(i);
        configs.insert(0, os);
    }
    Ok(())
}

/// A recording's addresses hold in a run only when both were made with address
/// randomisation off: a note for each recording this run reads by address (`--recording`,
/// `--placement optimal:`/`marathe:`) whose setting differs from the run's.
fn warn_on_aslr_mismatch(args: &RunArgs) {
    let by_address = args
        .recording
        .iter()
        .cloned()
        .chain(["optimal:", "marathe:"].iter().filter_map(|p| args.placement.strip_prefix(p)).map(PathBuf::from));
    for path in by_address {
        let Ok(reader) = sharemap::trace::TraceReader::open(&path, None) else { continue };
        let source = &sharemap::trace::TraceSource::metadata(&reader).source;
        if !["tracer", "valgrind", "perf"].contains(&source.kind.as_str()) {
            continue; // generated or imported: no address space of a run
        }
        let recorded_off = source.params.get("aslr").is_some_and(|v| v == "off");
        match (recorded_off, args.no_aslr) {
            (false, true) => eprintln!(
                "sharemap: note: {} was recorded with address randomisation on: its addresses need not match this --no-aslr run's (record it with `sharemap record --no-aslr`)",
                path.display()
            ),
            (true, false) => eprintln!(
                "sharemap: note: {} was recorded with --no-aslr but this run randomises addresses: add --no-aslr",
                path.display()
            ),
            _ => {}
        }
    }
}

/// A facade error as the flag it came from.
fn flag(e: sharemap::Error) -> anyhow::Error {
    crate::flags::say(e, crate::flags::At::Run)
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    if args.repeat == 0 || args.repeat > MAX_REPEAT {
        bail!("--repeat {}: expected a number of runs from 1 to {MAX_REPEAT}", args.repeat);
    }
    let library = sharemap_run::Tools::beside(&std::env::current_exe()?)
        .existing("libsharemap_pin.so")
        .map_err(|e| anyhow!(e.why()))?;
    let host = Machine::live().map_err(|e| anyhow!("cannot read this host's topology: {e}"))?;
    let (program, program_args) = args.command.split_first().ok_or_else(|| anyhow!("no program given after --"))?;
    let program = sharemap_run::resolve_program(Path::new(program)).map_err(flag)?;
    let placement = DataPlacement::parse(&args.placement, &host).map_err(flag)?;
    warn_on_aslr_mismatch(&args);
    let sharing = match &args.sharing {
        Some(path) => {
            let input = crate::map::Input { path, from: None, exclude: None };
            Some(crate::map::load_matrix(&input)?.matrix)
        }
        None => None,
    };
    let measuring = args.repeat > 1 || args.thread_map.len() > 1 || !args.mechanisms.is_empty();
    let mut names: Vec<String> = args.thread_map.iter().map(|s| s.trim().to_string()).collect();
    if !args.mechanisms.is_empty() && args.thread_map == ["os"] {
        // The default thread map stands aside for the mechanisms (`os` among them or first).
        names.clear();
    }
    if measuring && !names.iter().any(|n| n == "os") {
        // Everything is normalised to the OS's own mapping.
        names.insert(0, "os".into());
    }
    let mut configs = Vec::new();
    for name in &names {
        let pinning = if name == "os" {
            Pinning::Os
        } else if let Some(path) = name.strip_prefix("trace:").or_else(|| name.strip_prefix("matrix:")) {
            // The default algorithm on a recording's (or a matrix file's) sharing, for this host.
            let input = crate::map::Input { path: Path::new(path), from: None, exclude: None };
            let matrix = crate::map::load_matrix(&input).map_err(|e| anyhow!("--thread-map {name}: {e}"))?.matrix;
            let map = ThreadMap::Algorithm("sharemap".into());
            sharemap_run::pinning(&map, &host, Some(&matrix), args.seed).map_err(flag)?
        } else {
            let map = ThreadMap::parse(name).map_err(flag)?;
            sharemap_run::pinning(&map, &host, sharing.as_ref(), args.seed).map_err(flag)?
        };
        // A plan from a recording depends on where threads run: this configuration's PUs.
        let (memory, plan) =
            placement.resolve(&pinning, &host).map_err(|e| anyhow!("--placement {}: {e}", args.placement))?;
        let mut config = Configuration::fixed(name, pinning, memory);
        config.plan = plan;
        configs.push(config);
    }
    add_mechanisms(&args, &host, &mut configs, measuring)?;
    let pins = configs.iter().any(|c| c.pinning != Pinning::Os || c.memory != MemoryPolicy::FirstTouch);
    if pins && sharemap_run::is_static(&program) {
        bail!(
            "{} is statically linked: the pinning library cannot be preloaded into it (link it dynamically)",
            program.display()
        );
    }
    let plans = configs.iter().any(|c| c.plan.is_some());
    let thp_mode = sharemap_run::thp::Thp::parse(&args.thp).expect("clap checked it");
    let thp = sharemap_run::thp::ThpHandling::new(thp_mode, sharemap_run::thp::HostThp::read(), plans);
    if let Some(t) = &thp {
        eprintln!("sharemap: note: {}", t.describe());
    }
    let runner = Runner {
        program,
        args: program_args.to_vec(),
        library,
        host,
        show_output: !measuring,
        no_aslr: args.no_aslr,
        observe: args.show_where,
        traced: sharemap_run::needs_tracing(args.show_where, &configs),
        plan_interval: std::time::Duration::from_millis(1),
        thp,
    };
    if !measuring {
        return single(&runner, &configs[0]);
    }
    let total = configs.len() * args.repeat;
    let bar = crate::progress::bar_of(Some(total as u64), "running", "runs");
    let mut done = 0u64;
    let mut problems = Vec::new();
    let mut no_counters = None;
    let results = sharemap_run::measure(&runner, &configs, args.repeat, &mut |config, _, outcome| {
        done += 1;
        bar.set_position(done);
        no_counters = no_counters.take().or_else(|| sharemap_run::counters_unavailable(outcome));
        if let Some(p) = problem(config, outcome) {
            problems.push(p);
        }
    });
    bar.finish_and_clear();
    if let Some(p) = problems.first() {
        bail!("{p}");
    }
    let results = match results {
        Ok(r) => r,
        Err(failed) => {
            let FailedRun { configuration, round, failure } = *failed;
            let (why, code) = match failure {
                Failure::CannotStart(e) => (format!("{e}"), 1),
                Failure::Exited(o) if o.signal.is_some() => {
                    (format!("{} was killed by signal {}", runner.program.display(), o.signal.unwrap_or(0)), o.exit)
                }
                Failure::Exited(o) => (format!("{} exited with status {}", runner.program.display(), o.exit), o.exit),
            };
            eprintln!("sharemap: run {} of {configuration}: {why}", round + 1);
            return Ok(ExitCode::from(code.clamp(1, 255) as u8));
        }
    };
    if let Some(path) = &args.csv {
        write_csv(path, &results)?;
    }
    if let Some(base) = &args.plot {
        let program = runner.program.file_name().unwrap_or_default().to_string_lossy();
        let bars: Vec<(String, f64, Option<f64>)> =
            results.iter().map(|r| (r.name.clone(), r.normalized, r.ci95.map(|c| c / results[0].mean))).collect();
        let title =
            format!("{program}: wall-clock time over {}'s ({} runs each, 95% CI)", results[0].name, args.repeat);
        crate::plot::save_svg(&crate::plot::bars_svg(&title, "time / os time", &bars)?, base)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print_table(&results, args.repeat);
        if let Some(why) = &no_counters {
            println!("hardware counters: none, so no LLC misses or remote accesses to report: {why}");
        }
        for (r, config) in results.iter().zip(&configs) {
            if let Some(p) = &r.plan {
                println!("{}: plan (last run): {}", r.name, plan_summary(p));
            }
            if let Some(a) = &r.autopin {
                let picks: Vec<String> = a.picks.iter().map(|(n, k)| format!("{n} {k}")).collect();
                println!(
                    "{}: fastest in probation: {} (the oracle's mapping in {} of {} rounds); its time includes its probation runs ({:.3} s) beside the runs it chose ({:.3} s)",
                    r.name,
                    picks.join(", "),
                    a.oracle,
                    args.repeat,
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
                let fired =
                    if p.thread_migrations + p.page_moves == 0 { " (it never fired on the recording)" } else { "" };
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
    }
    Ok(ExitCode::SUCCESS)
}

/// One run, with the program's output and exit status passed through.
fn single(runner: &Runner, config: &Configuration) -> Result<ExitCode> {
    let outcome = runner.run(config, 0, None).map_err(flag)?;
    if let Some(p) = problem(config, &outcome) {
        bail!("{p}");
    }
    if let Pinning::Pus(pus) = &config.pinning {
        let threads = outcome.pinned.len();
        let wrapped = if threads > pus.len() {
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
    }
    if let Some(observed) = &outcome.observed {
        print_where(observed, runner.observe, &runner.host);
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

/// What went wrong with pinning or placement in a run, as one line.
fn problem(config: &Configuration, outcome: &RunOutcome) -> Option<String> {
    if config.pinning != Pinning::Os && !outcome.loaded && outcome.signal.is_none() {
        return Some(format!("{}: the program did not load the pinning library: nothing was pinned", config.name));
    }
    if let Some((k, cpu, why)) = outcome.refused.first() {
        return Some(format!("{}: the kernel refused to pin thread {k} on CPU {cpu}: {why}", config.name));
    }
    outcome.mempolicy_error.as_ref().map(|why| format!("the kernel refused the memory policy: {why}"))
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
        let verdict = match r.significant {
            Some(true) if r.normalized < 1.0 => "faster (intervals apart)",
            Some(true) => "slower (intervals apart)",
            Some(false) => "not significant (intervals overlap)",
            None if r.name == *base => "(baseline)",
            None => "-",
        };
        println!("{:<24} {:>10.4} {:>10} {:>8.3}{extra}  {verdict}", r.name, r.mean, ci, r.normalized);
    }
}

/// Every run's time, a row each (pandas reads it as is).
fn write_csv(path: &Path, results: &[ConfigurationResult]) -> Result<()> {
    let out = sharemap::trace::AtomicOutput::create(path)?;
    let mut w = out.writer()?;
    let io = |e: std::io::Error| anyhow!("{}: {e}", path.display());
    writeln!(w, "configuration,run,seconds").map_err(io)?;
    for r in results {
        for (i, s) in r.seconds.iter().enumerate() {
            writeln!(w, "{},{},{s}", r.name, i + 1).map_err(io)?;
        }
    }
    sharemap::trace::flush(&mut w, path)?;
    drop(w);
    out.commit()?;
    Ok(())
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
