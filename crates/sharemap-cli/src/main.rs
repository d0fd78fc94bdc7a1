//! The `sharemap` command line: thin glue over the library crates.

mod advise;
mod analyze;
mod cc;
mod demo;
mod filter;
mod flags;
mod info;
mod machine;
mod map;
mod place;
mod progress;
mod registry;
mod report;
mod reproduce;
mod run;
mod shared;
mod simulate;
mod sweep;
mod trace_cmds;
mod vm;

/// The plots every command draws: sharemap-report's.
use sharemap_report::plot;

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "sharemap",
    version,
    about = "Sharing-aware thread and data mapping for NUMA machines: record or generate memory-access traces, detect sharing, map threads, and evaluate page placement against the off-line optimum"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a synthetic trace from one of the seed programs' sharing patterns
    Gen(trace_cmds::GenArgs),
    /// Summarise a trace: accesses, threads, pages, page sharing
    Info {
        /// The trace (native, CSV or Parquet)
        trace: PathBuf,
        /// Input format, overriding detection (native, csv, parquet)
        #[arg(long)]
        from: Option<String>,
        /// Print the summary as JSON
        #[arg(long)]
        json: bool,
    },
    /// Convert a trace between native, CSV, Parquet and DineroIV (din, export only)
    Convert {
        /// The trace to read
        input: PathBuf,
        /// Where to write it; the format follows the extension unless --to says
        output: PathBuf,
        /// Input format, overriding detection (native, csv, parquet)
        #[arg(long)]
        from: Option<String>,
        /// Output format, overriding the extension (native, csv, parquet, din)
        #[arg(long)]
        to: Option<String>,
        #[command(flatten)]
        exclude: trace_cmds::InputArgs,
        /// Write a Parquet dataset partitioned by page range instead: OUTPUT is a directory
        /// of one Parquet trace per N pages and an index, `_sharemap.json` (for
        /// `sharemap.dask` in Python, or any Parquet reader)
        #[arg(long, value_name = "N")]
        partition_pages: Option<u64>,
    },
    /// Record the memory accesses of a program: sharemap record -o OUT -- PROG ARGS...
    /// (programs built with `sharemap cc` are recorded by its runtime; others under Valgrind)
    Record(trace_cmds::RecordArgs),
    /// Run a program with its threads pinned and its pages placed, once (its output and exit
    /// status pass through), or measure configurations against the OS's own mapping:
    /// sharemap run [--thread-map SPEC]... [--repeat N] -- PROG ARGS...
    Run(run::RunArgs),
    /// Run a program inside a multi-node guest kernel under QEMU and print where its threads
    /// ran and its pages lay, as the guest kernel tells (a check of a mapping without a NUMA
    /// machine; timings inside it mean nothing): sharemap vm --nodes 2 --cpus 4 -- PROG ARGS
    Vm(vm::VmArgs),
    /// Describe a machine: hwloc synthetic string, hwloc XML file, preset name or `live`
    Machine {
        /// A preset name, `live` (this host), an hwloc synthetic string (e.g. "pack:2 numa:2
        /// core:4 pu:2") or an hwloc XML file
        #[arg(required_unless_present = "list")]
        spec: Option<String>,
        /// Print the machine as JSON
        #[arg(long)]
        json: bool,
        /// List the presets
        #[arg(long)]
        list: bool,
    },
    /// Where should pages live? Every placement policy against the off-line optimum, on a
    /// modelled NUMA machine (seed 004's cost model)
    Place {
        #[command(flatten)]
        model: place::ModelArgs,
        /// Policies: a comma list of specs (first-touch,first-n-fills:n=32), `all` in it standing
        /// for every policy (see `sharemap list policies`); the optimum always comes first
        #[arg(long, short = 'p', default_value = "all")]
        policy: String,
        /// Print JSON: the model and a `policies` array
        #[arg(long)]
        json: bool,
        /// Also list the costliest pages and what each policy pays for them
        #[arg(long)]
        breakdown: bool,
        /// Write the optimal placement (per page: from which access on it lives where) to a
        /// .csv or .json file
        #[arg(long, value_name = "FILE")]
        placement: Option<PathBuf>,
    },
    /// Perturb a trace's interleaving with seed 004's filters (--reorder: a 100-reference
    /// window; --gaps: a thread stalls for 4000 references with probability 1/30000), or
    /// report how much they move the optimum (--sensitivity)
    Filter {
        #[command(flatten)]
        model: place::ModelArgs,
        /// Reorder references within a 100-reference window
        #[arg(long)]
        reorder: bool,
        /// Stall a random thread for 4000 references with probability 1/30000 per reference
        #[arg(long)]
        gaps: bool,
        /// Filtered trace (format from the extension)
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Output format, overriding the extension (native, csv, parquet)
        #[arg(long)]
        to: Option<String>,
        /// Report the optimum's change under each filter (both when neither is given)
        #[arg(long)]
        sensitivity: bool,
    },
    /// Who shares data with whom: the sharing matrix (numalize comm.csv, heatmap) and page
    /// usage (numalize pages.csv) of a trace
    Analyze {
        /// The trace (native, CSV or Parquet)
        trace: PathBuf,
        /// Input format, overriding detection (native, csv, parquet)
        #[arg(long)]
        from: Option<String>,
        /// Machine, for the NUMA node of each page's first toucher in pages.csv
        #[arg(long, short = 'm', default_value = "sammu")]
        machine: String,
        /// Detector (every option and its source: `sharemap list detectors`)
        #[arg(long, default_value = "oracle", help = detector_help())]
        detector: String,
        /// Also run this detector (e.g. oracle) and report MSE and correlation against it
        #[arg(long)]
        compare: Option<String>,
        /// Also write a matrix per window of this many accesses (windows/comm-NNNN.csv) and
        /// report the windows where the sharing pattern changes
        #[arg(long, value_name = "N", default_value_t = 0)]
        split: u64,
        /// A complete recording of the same program (e.g. `record --burst all` of the same
        /// burst-sampled build, with --no-aslr for both): how faithfully this sampled trace
        /// gives its sharing matrix (correlation), its pages' dominant nodes (on the pages
        /// that carry 90 % of its accesses) and its mapping's cost
        #[arg(long)]
        against: Option<PathBuf>,
        /// Say what is shared by name (data objects, true and false sharing, the code) even
        /// for a trace that does not name its data: address ranges then (the default for a
        /// recording of a `sharemap cc` build)
        #[arg(long, conflicts_with = "no_objects")]
        objects: bool,
        /// Do not say what is shared by name (a pass of its own)
        #[arg(long)]
        no_objects: bool,
        #[command(flatten)]
        exclude: trace_cmds::InputArgs,
        /// Output directory
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Where threads should run: a mapping of threads to PUs from a sharing matrix (numalize
    /// CSV, TopoMatch .mat) or a trace (its oracle matrix)
    Map {
        /// A sharing matrix (numalize CSV, TopoMatch .mat) or a trace, whose oracle matrix is used
        input: PathBuf,
        /// Trace format of INPUT, overriding detection by extension (native, csv, parquet)
        #[arg(long)]
        from: Option<String>,
        /// Machine to map onto: a preset, an hwloc synthetic string, an hwloc XML file or `live` (this host)
        #[arg(long, short = 'm', default_value = "sammu")]
        machine: String,
        /// Algorithms: a comma list of specs (e.g. sharemap,random:seed=3), `all` in it standing for every algorithm; see `sharemap list algorithms`
        #[arg(long, default_value = "sharemap")]
        algo: String,
        /// How levels are priced: latency (ns of the lowest shared level) or hops
        #[arg(long, default_value = "latency")]
        cost_model: String,
        /// Seed of the randomised algorithms (random, and the tie-breaks of the others)
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        exclude: trace_cmds::InputArgs,
        /// Print JSON: an array of {algorithm, mapping, cost, elapsed_ms, sharing_by_level}
        #[arg(long)]
        json: bool,
    },
    /// List what sharemap offers of one kind: placement policies, sharing detectors,
    /// mapping algorithms, run mechanisms, simulator mechanisms and model parameters,
    /// generator patterns or machine presets
    List {
        /// What to list
        #[arg(value_enum)]
        kind: ListKind,
    },
    /// List the placement policies, their sources and parameters (as `list policies`)
    Policies,
    /// List the sharing detectors, their sources and options (`--detector NAME:KEY=VALUE,...`;
    /// as `list detectors`)
    Detectors,
    /// List the thread-mapping algorithms, their sources and options (`--algo`, `--thread-map`;
    /// as `list algorithms`)
    Algorithms,
    /// List the mechanisms `sharemap run --mechanism` measures, their sources and options (as
    /// `list mechanisms`)
    Mechanisms,
    /// Which mapping and placement to use for a recording on a machine, and how much faster:
    /// every candidate (the OS's, compact, scatter, the sharing-aware mappings, spread then
    /// group, pages interleaved) simulated, the fastest chosen when it beats the OS by 2 %
    Advise(advise::AdviseArgs),
    /// Simulate a trace on a NUMA machine (caches, coherence, TLBs, DRAM, per-thread clocks)
    /// under thread and data mapping mechanisms: time, misses, traffic, each against `os`
    Simulate(simulate::SimulateArgs),
    /// Rerun the seed papers' claims that sharemap can test: each an experiment with the
    /// paper's figure, sharemap's and a verdict (docs/reproduce.md)
    Reproduce(reproduce::ReproduceArgs),
    /// Vary one model parameter (G, R, g, r or page-size): the optimum and the policies at
    /// each value, as CSV plus plots (MCPR, optimal moves per page, optimal cost breakdown)
    Sweep {
        #[command(flatten)]
        model: place::ModelArgs,
        /// The parameter to vary: G, R, g, r or page-size
        #[arg(long)]
        vary: String,
        /// Values: a comma list, or start:end:count
        #[arg(long)]
        values: String,
        /// Policies to evaluate at each value besides the optimum (a comma list; `all` in it stands for every policy)
        #[arg(long, short = 'p', default_value = "first-touch,ace,delay,platinum")]
        policy: String,
        /// CSV output; plots are written beside it (NAME-mcpr.svg, NAME-moves..., NAME-breakdown...;
        /// also .png in a build with the png feature)
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Compile C with sharemap's tracer: a drop-in compiler (CC='sharemap cc'); clang by
    /// default, gcc with SHAREMAP_COMPILER=gcc
    #[command(name = "cc", after_help = CC_HELP)]
    Cc {
        /// The compiler's arguments, passed on with the tracer's flags and runtime added
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Compile C++ with sharemap's tracer (CXX='sharemap c++')
    #[command(name = "c++", after_help = CC_HELP)]
    Cxx {
        /// The compiler's arguments, passed on with the tracer's flags and runtime added
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// One self-contained HTML page about a trace: its summary, sharing heatmap, page usage,
    /// thread mappings, placements against the optimum, simulated mechanisms and, with
    /// --runs, measured runs; each figure with a line saying how to read it
    Report(report::ReportArgs),
    /// Run the main job on the embedded default: generate the seed patterns, summarise them,
    /// compare every placement policy with the optimum, show sharing heatmaps and thread
    /// mappings, record a real program built with `sharemap cc`, and describe the SAMMU
    /// machine
    Demo {
        /// Write the traces, plots and recordings to this directory (default: ./sharemap-demo;
        /// a directory with other files in it is refused)
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Accesses per generated trace, the data sized from them (a quick look, for tests;
        /// every heading says so). Default: each pattern's paper-like footprint (1024 pages
        /// per thread, matmult 32: past a core's TLB reach), 3 iterations
        #[arg(long, value_parser = parse_count)]
        accesses: Option<u64>,
        /// Also write report.html: `sharemap report` of the recorded program (of a generated
        /// pattern where no compiler is installed), with the real runs' times
        #[arg(long)]
        report: bool,
    },
}

/// The kinds `sharemap list` lists.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ListKind {
    /// Placement policies (`place --policy NAME:KEY=VALUE`)
    Policies,
    /// Sharing detectors (`analyze --detector NAME:KEY=VALUE`)
    Detectors,
    /// Thread-mapping algorithms (`map --algo NAME:KEY=VALUE`, `--thread-map`)
    Algorithms,
    /// Mechanisms of real runs (`run --mechanism`) and of the simulator (`simulate --mechanism`)
    Mechanisms,
    /// The simulator's model parameters (`simulate --param KEY=VALUE`)
    Parameters,
    /// Sharing patterns of the generator (`gen PATTERN`)
    Patterns,
    /// Machine presets (`--machine NAME`)
    Machines,
    /// The seed papers' claims `reproduce` tests (`reproduce CLAIM`)
    Claims,
    /// The simulator's mechanisms and model parameters (as `mechanisms` and `parameters`)
    #[value(hide = true)]
    Simulator,
}

/// A listing asked for the old way: it still works, and the note names the one way.
/// `analyze --detector`'s help: every detector of the registry with its options' keys.
fn detector_help() -> String {
    format!(
        "Detector: {} (every option and its source: `sharemap list detectors`)",
        sharemap::registry::synopsis(sharemap::registry::Kind::Detector)
    )
}

/// A listing asked for the older way (`policies`, `gen --list`, ...): said, and the kind.
fn old_listing(command: &Command) -> Option<ListKind> {
    let (old, kind, listed) = match command {
        Command::Gen(args) if args.list => ("gen --list", "patterns", ListKind::Patterns),
        Command::Policies => ("policies", "policies", ListKind::Policies),
        Command::Detectors => ("detectors", "detectors", ListKind::Detectors),
        Command::Algorithms => ("algorithms", "algorithms", ListKind::Algorithms),
        Command::Mechanisms => ("mechanisms", "mechanisms", ListKind::Mechanisms),
        Command::Simulate(args) if args.list => {
            ("simulate --list", "mechanisms` and `sharemap list parameters", ListKind::Simulator)
        }
        Command::Reproduce(args) if args.list => ("reproduce --list", "claims", ListKind::Claims),
        // `machine --list` lists, and describes a machine too: it runs as itself.
        Command::Machine { list: true, .. } => {
            listed_the_old_way("machine --list", "machines");
            return None;
        }
        _ => return None,
    };
    listed_the_old_way(old, kind);
    Some(listed)
}

/// The command run.
fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Gen(args) => trace_cmds::generate(args),
        Command::Info { trace, from, json } => info::run(&trace, from.as_deref(), json),
        Command::Convert { input, output, from, to, exclude, partition_pages: Some(pages) } => {
            if to.is_some() {
                anyhow::bail!("--to: a partitioned dataset is Parquet");
            }
            trace_cmds::partition(&input, &output, from.as_deref(), &exclude, pages)
        }
        Command::Convert { input, output, from, to, exclude, partition_pages: None } => {
            trace_cmds::convert(&input, &output, from.as_deref(), to.as_deref(), &exclude)
        }
        Command::Record(args) => trace_cmds::record(args),
        Command::Cc { args } => cc::wrap(&args, false),
        Command::Cxx { args } => cc::wrap(&args, true),
        Command::Run(args) => run::run(args),
        Command::Vm(args) => vm::run(args),
        Command::Machine { spec, json, list } => machine::run(spec.as_deref(), json, list),
        Command::Demo { dir, accesses, report } => demo::run(dir.as_deref(), accesses, report),
        Command::Report(args) => report::run(&args),
        Command::Place { model, policy, json, breakdown, placement } => {
            place::run(&model, &policy, json, breakdown, placement.as_deref())
        }
        Command::List { kind } => list(kind),
        Command::Map { input, from, machine, algo, cost_model, seed, exclude, json } => {
            let input = map::Input { path: &input, from: from.as_deref(), args: &exclude };
            map::run(&input, &machine, &algo, &cost_model, seed, json)
        }
        Command::Analyze {
            trace,
            from,
            machine,
            detector,
            compare,
            split: window,
            against,
            objects,
            no_objects,
            exclude,
            output,
        } => {
            let against = against.map(sharemap::TraceInput::file);
            let objects = if objects {
                Some(true)
            } else if no_objects {
                Some(false)
            } else {
                None
            };
            let request = sharemap::AnalyzeRequest { detector, compare, window, against, objects };
            analyze::run(&trace, from.as_deref(), &exclude, &machine, &request, &output)
        }
        Command::Filter { model, reorder, gaps, output, to, sensitivity } => {
            let kinds: Vec<sharemap::filter::Filter> =
                [(reorder, sharemap::filter::Filter::Reorder), (gaps, sharemap::filter::Filter::Gaps)]
                    .into_iter()
                    .filter(|k| k.0)
                    .map(|k| k.1)
                    .collect();
            filter::run(&model, &kinds, output.as_deref(), to.as_deref(), sensitivity)
        }
        Command::Simulate(args) => simulate::run(&args),
        Command::Advise(args) => advise::run(&args),
        Command::Reproduce(args) => reproduce::run(&args),
        Command::Sweep { model, vary, values, policy, output } => sharemap::sweep::Vary::parse(&vary)
            .map_err(|e| place::flag_context(e, &model))
            .and_then(|v| sweep::run(&model, v, &sweep::parse_values(&values)?, &policy, &output)),
        // `old_listing` said how these are listed now; they list as `list KIND` does.
        Command::Policies => list(ListKind::Policies),
        Command::Detectors => list(ListKind::Detectors),
        Command::Algorithms => list(ListKind::Algorithms),
        Command::Mechanisms => list(ListKind::Mechanisms),
    }
}

fn listed_the_old_way(old: &str, kind: &str) {
    eprintln!("sharemap: note: `sharemap {old}` is `sharemap list {kind}` (every kind is listed that way)");
}

fn list(kind: ListKind) -> anyhow::Result<ExitCode> {
    match kind {
        ListKind::Policies => place::list(),
        ListKind::Detectors => analyze::list(),
        ListKind::Algorithms => map::list(),
        ListKind::Mechanisms => {
            println!("Real runs (sharemap run --mechanism NAME:KEY=VALUE):\n");
            run::list()?;
            println!("\nThe simulator (sharemap simulate --mechanism NAME:KEY=VALUE):\n");
            simulate::list_mechanisms()
        }
        ListKind::Parameters => simulate::list_parameters(),
        ListKind::Simulator => {
            simulate::list_mechanisms()?;
            println!();
            simulate::list_parameters()
        }
        ListKind::Patterns => {
            trace_cmds::list_patterns();
            Ok(ExitCode::SUCCESS)
        }
        ListKind::Machines => machine::run(None, false, true),
        ListKind::Claims => reproduce::list(),
    }
}

/// "250000", "250k", "1M", "2G" (powers of 1000).
fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, mult) = match t.chars().last() {
        Some('k') | Some('K') => (&t[..t.len() - 1], 1_000),
        Some('m') | Some('M') => (&t[..t.len() - 1], 1_000_000),
        Some('g') | Some('G') => (&t[..t.len() - 1], 1_000_000_000),
        _ => (t, 1),
    };
    digits
        .replace('_', "")
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("'{s}' is not a count (e.g. 500000, 500k, 2M)"))
}

/// The error and its causes on one line, leaving out a cause whose text the line already
/// holds (errors that print their source would otherwise say it twice).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    shorten(line)
}

/// Longest error line printed whole; a longer one (echoing a huge input) keeps its start and
/// end, where what went wrong is said.
const MAX_ERROR_LINE: usize = 400;

fn shorten(line: String) -> String {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= MAX_ERROR_LINE {
        return line;
    }
    let head: String = chars[..300].iter().collect();
    let tail: String = chars[chars.len() - 80..].iter().collect();
    format!("{head} [… {} characters …] {tail}", chars.len() - 380)
}

const CC_HELP: &str = "\
Every argument is passed to the compiler, with the tracer added: the compiler's memory-access
instrumentation (ThreadSanitizer's, without its runtime), sharemap's runtime library, libc's
memcpy/memmove/memset wrapped (recorded as ranges), and an include directory holding
<sharemap.h> (phase and region-of-interest annotations). A command that only compiles (-c,
-S, -E) gets the instrumentation; one that links gets the runtime.

sharemap's own options, taken out wherever they appear:
  --stm        link sharemap's STM (TinySTM 1.0.5's API: <stm.h>, <wrappers.h>, <mod_mem.h>,
               ...; STMap inside, docs/stm.md); traced, its transactional loads and stores
               and tx-begin/commit/abort events are recorded
  --stm-tl2    the same with TL2's STM_* macros first on the include path (<stm.h>)
  --no-trace   with --stm or --stm-tl2: a plain build (no instrumentation) against the STM
  --tx-only    with --stm or --stm-tl2: only the STM's transactional loads and stores and
               tx events are recorded (what STMap inside an STM sees), not the program's
               other accesses

Environment:
  SHAREMAP_COMPILER   clang (default: clang or clang-14), gcc, or a compiler's path
                      (a name containing \"clang\" is driven as clang, anything else as gcc)

The program runs as usual; recording happens only under `sharemap record -- PROG ARGS`
(options --sample and --exclude-stack there). Example:
  make CC='sharemap cc' CXX='sharemap c++'
  sharemap record -o run.trace -- ./prog";

/// `n` and its noun, singular for one: "1 access", "2 accesses".
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A command-line error in one line: clap's message with its hints (the values allowed, a
/// close match), without the usage block.
fn usage_error(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect();
    let mut line = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            line.push_str(if part.starts_with('[') || line.ends_with(':') { " " } else { "; " });
        }
        line.push_str(part);
    }
    // A program given without `--` before it, to a command that runs one.
    let command = std::env::args().nth(1).unwrap_or_default();
    if e.kind() == clap::error::ErrorKind::UnknownArgument && ["run", "record", "vm"].contains(&command.as_str()) {
        return format!(
            "{line}: the program and its arguments go after --, as in `sharemap {command} [OPTIONS] -- PROG ARGS`"
        );
    }
    format!("{line} (see --help)")
}

fn main() -> ExitCode {
    // Output piped into `head` and the like: end quietly when the reader goes away, as
    // command-line tools do, instead of failing on the next print.
    // SAFETY: restoring a signal's default disposition before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            eprintln!("sharemap: {}", usage_error(&e));
            return ExitCode::from(2);
        }
    };
    if !matches!(cli.command, Command::Record(_)) {
        remove_temporaries_on_signal();
    }
    let result = old_listing(&cli.command).map_or_else(|| dispatch(cli.command), list);
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sharemap: {}", one_line(&e));
            let code = e
                .downcast_ref::<sharemap::trace::TraceError>()
                .map(sharemap::trace::TraceError::exit_code)
                .or_else(|| e.downcast_ref::<sharemap::Error>().map(sharemap::Error::exit_code))
                .unwrap_or(1);
            ExitCode::from(code as u8)
        }
    }
}

/// Stopped by SIGINT, SIGTERM or SIGHUP: remove the temporary files and directories in
/// progress and restore what a run switched in the kernel, then exit as the signal would (128 + its number). `record` handles these
/// signals itself, to keep what it has recorded.
fn remove_temporaries_on_signal() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else { return };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            sharemap::trace::remove_temporaries();
            // A kernel setting a run owns goes back as it was.
            sharemap_run::sysctl::restore_on_signal();
            std::process::exit(128 + sig);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every argument of every command says what it is in `--help`.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id != "help" && id != "version" && arg.get_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "sharemap", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    /// `analyze --help` names every detector of the registry and each of its options (made
    /// from the registry: a new row needs no edit of the help).
    #[test]
    fn analyze_help_names_every_detector() {
        let cmd = Cli::command();
        let analyze = cmd.find_subcommand("analyze").unwrap();
        let help = analyze.get_arguments().find(|a| a.get_id() == "detector").unwrap().get_help().unwrap().to_string();
        for d in sharemap::registry::rows(sharemap::registry::Kind::Detector) {
            assert!(help.contains(d.name), "--detector help lacks {}: {help}", d.name);
            for p in d.params {
                assert!(help.contains(p.key), "--detector help lacks {}'s {}: {help}", d.name, p.key);
            }
        }
    }

    #[test]
    fn long_error_lines_keep_their_ends() {
        let short = "trace.csv:3: bad kind 'X' (R or W)".to_string();
        assert_eq!(super::shorten(short.clone()), short);
        let long = format!("machine 'numa:{}': expected a number", "9".repeat(200_000));
        let cut = super::shorten(long);
        assert!(cut.chars().count() < 450, "{}", cut.len());
        assert!(cut.starts_with("machine 'numa:999") && cut.ends_with("': expected a number"));
    }
}
