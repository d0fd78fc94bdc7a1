//! `gen`, `convert` and `record`: commands that produce traces; and how every command names
//! the trace it reads.

use crate::progress::Bars;
use anyhow::{Result, anyhow, bail};
use sharemap::generate::{self, GenParams, PATTERNS};
use sharemap::trace::Format;
use sharemap::{Selection, TraceInput};
use sharemap_run::Tools;
use sharemap_run::record::{RecordRequest, Recorder};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn format_arg(name: Option<&str>) -> Result<Option<Format>> {
    name.map(|n| Format::from_name(n).ok_or_else(|| anyhow!("unknown format '{n}' (formats: {})", Format::NAMES)))
        .transpose()
}

/// The trace a command reads: its path, `--from`, `--exclude` and the part to read (the
/// command's `default` when none of `--roi`, `--no-roi`, `--phase`, `--window` is given).
/// Says on stderr which part it reads when that is not the whole trace.
pub fn input(path: &Path, from: Option<&str>, args: &InputArgs, default: Selection) -> Result<TraceInput> {
    let mut input = TraceInput::file(path).with_format(format_arg(from)?).select(args.selection(default)?);
    if let Some(text) = &args.exclude {
        input = input.exclude(text).map_err(|e| anyhow!("--exclude {}", e.why()))?;
    }
    let window = input.window().map_err(|e| match e.kind() {
        sharemap::ErrorKind::Window => anyhow!("{}: {}", args.flag(), e.why()),
        _ => anyhow!(e),
    })?;
    if let Some(w) = window {
        say_window(&w);
    }
    Ok(input)
}

/// One line for the part of the trace read.
pub fn say_window(w: &sharemap::WindowInfo) {
    let how = if w.asked { "" } else { "; --no-roi reads the whole trace" };
    eprintln!(
        "sharemap: reading {}: {} of {} accesses ({:.1} %){how}",
        w.what,
        sharemap::grouped(w.accesses),
        sharemap::grouped(w.total),
        w.percent()
    );
}

/// For the commands that home pages by first touch: a line when the OS's first touch homed
/// some of the window's pages before it, by another thread (a pass up to the window's end).
pub fn say_first_touch(input: &TraceInput) -> Result<()> {
    let touch = input.first_touch()?.unwrap_or_default();
    if touch.moved > 0 {
        eprintln!(
            "sharemap: {} of the {} pages it touches were first touched before it by another thread: \
             first-touch inside the window homes them elsewhere than the OS did",
            sharemap::grouped(touch.moved),
            sharemap::grouped(touch.pages)
        );
    }
    Ok(())
}

pub fn list_patterns() {
    for p in PATTERNS {
        println!("{:<18} {}", p.name, p.models);
    }
}

/// `gen`'s flags.
#[derive(clap::Args)]
pub struct GenArgs {
    /// Pattern name (see --list)
    #[arg(required_unless_present = "list")]
    pub pattern: Option<String>,
    /// Number of threads
    #[arg(long, default_value_t = 8)]
    pub threads: u32,
    /// Stop after this many accesses (suffixes k, M, G allowed). Given alone, it also sizes
    /// the data (--footprint auto: a few thousand references per page, for tests)
    #[arg(long, value_parser = crate::parse_count)]
    pub accesses: Option<u64>,
    /// Data per thread: pages (1024), bytes (4MiB), or auto (from --accesses). Default: the
    /// pattern's paper-like footprint (1024 pages per thread; matmult 32)
    #[arg(long)]
    pub footprint: Option<String>,
    /// Phases after the initialisation (default: the pattern's, 10 for most, unless
    /// --accesses alone ends the run)
    #[arg(long)]
    pub iterations: Option<u64>,
    /// References per word per iteration: each access after the initialisation made this
    /// many times in a row
    #[arg(long, default_value_t = 1)]
    pub reuse: u32,
    /// Bytes of each access (the program's word; 4 for seed 004's ACE traces)
    #[arg(long, default_value_t = 8)]
    pub word: u64,
    /// neighbor: pages of each neighbour's block read per iteration (SP at 64 threads: the
    /// whole block)
    #[arg(long, default_value_t = 1)]
    pub halo: u64,
    /// all-to-all: nonzeros per row (NPB CG class B: about 176)
    #[arg(long, default_value_t = 8)]
    pub nnz: u64,
    /// Seed of the pattern's random choices (same seed, same trace)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Page size in bytes, recorded in the trace's metadata
    #[arg(long, default_value_t = 4096)]
    pub page_size: u64,
    /// Output file; the format follows the extension (.trace, .csv, .parquet, .din)
    #[arg(short, long, required_unless_present = "list")]
    pub output: Option<PathBuf>,
    /// Output format, overriding the extension
    #[arg(long)]
    pub to: Option<String>,
    /// List the patterns and what they model
    #[arg(long)]
    pub list: bool,
}

/// The generator's parameters for `gen`'s flags, checked, each refusal naming its flag.
fn gen_params(p: &generate::Pattern, args: &GenArgs) -> Result<GenParams> {
    let footprint = args
        .footprint
        .as_deref()
        .map(|f| f.parse::<generate::Footprint>().map_err(|e| anyhow!("--footprint {e}")))
        .transpose()?;
    if footprint == Some(generate::Footprint::Auto) && args.accesses.is_none() {
        bail!("--footprint auto sizes the data from --accesses: give it too");
    }
    let sizing = generate::Sizing {
        accesses: args.accesses,
        footprint,
        iterations: args.iterations,
        reuse: args.reuse,
        word: args.word,
        halo: args.halo,
        nnz: args.nnz,
        page_size: args.page_size,
        ..generate::Sizing::new(args.threads, args.seed)
    };
    let params = sizing.params(p);
    generate::check(&params).map_err(|e| match e {
        generate::GenError::Threads(0) => anyhow!("--threads must be at least 1"),
        generate::GenError::Threads(_) => anyhow!("--threads must be at most {}", generate::MAX_THREADS),
        generate::GenError::PageSize(p) => anyhow!("--page-size must be a power of two >= 64 (got {p})"),
        generate::GenError::Word(_) => anyhow!("--word: {e}"),
        generate::GenError::Reuse(_) => anyhow!("--reuse: {e}"),
        generate::GenError::Footprint { .. } => anyhow!("--footprint: {e}"),
        generate::GenError::Halo => anyhow!("--halo: {e}"),
        generate::GenError::Nnz(_) => anyhow!("--nnz: {e}"),
        generate::GenError::LineSize(_) | generate::GenError::Unbounded => anyhow!("{e}"),
    })?;
    Ok(params)
}

pub fn generate(args: GenArgs) -> Result<ExitCode> {
    let p = generate::pattern(args.pattern.as_deref().unwrap_or_default()).map_err(|e| anyhow!(e.why()))?;
    let params = gen_params(p, &args)?;
    let (output, threads) = (args.output.unwrap_or_default(), args.threads);
    let output = &output;
    let report = generate_to(p, &params, output, format_arg(args.to.as_deref())?)?;
    let pages = match params.footprint {
        Some(f) => format!("{f} pages per thread"),
        None => "data sized from --accesses".to_string(),
    };
    eprintln!(
        "sharemap: wrote {} ({}, pattern {}, {pages}) to {} ({} bytes, {:.2} bytes/access)",
        crate::count(report.accesses, "access", "accesses"),
        crate::count(threads as u64, "thread", "threads"),
        p.name,
        output.display(),
        report.bytes,
        report.bytes as f64 / report.accesses.max(1) as f64
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs a generator into a file of any format, with a progress bar.
pub fn generate_to(
    p: &generate::Pattern,
    params: &GenParams,
    output: &Path,
    format: Option<Format>,
) -> Result<sharemap::trace::WriteReport> {
    generate::to_file(p, params, output, format, &Bars::new())
        .map_err(|e| crate::flags::say(e, crate::flags::At::Writing { output }))
}

pub fn convert(
    input_path: &Path,
    output: &Path,
    from: Option<&str>,
    to: Option<&str>,
    args: &InputArgs,
) -> Result<ExitCode> {
    let to = format_arg(to)?;
    // A conversion copies the whole trace unless told to keep a part of it.
    let input = input(input_path, from, args, Selection::Whole)?;
    refuse_same_file(input_path, output)?;
    warn_if_truncated(&input)?;
    let report = sharemap::convert(&input, output, to, &Bars::new())?;
    say_excluded(&input);
    if report.dropped_events > 0 {
        eprintln!(
            "sharemap: warning: {} events (thread start/exit, annotations, transactions) cannot be stored in {}; use .trace or .parquet to keep them",
            report.dropped_events,
            output.display()
        );
    }
    if to.or_else(|| Format::detect(output).ok()) == Some(Format::Din) {
        eprintln!(
            "sharemap: note: DineroIV's din format has no thread ids: the threads' accesses are one stream in {}",
            output.display()
        );
    }
    eprintln!(
        "sharemap: converted {} to {} ({} bytes)",
        crate::count(report.accesses, "access", "accesses"),
        output.display(),
        report.bytes
    );
    Ok(ExitCode::SUCCESS)
}

/// `convert --partition-pages N` in a build without Parquet.
#[cfg(not(feature = "parquet"))]
pub fn partition(_: &Path, _: &Path, _: Option<&str>, _: &InputArgs, _: u64) -> Result<ExitCode> {
    anyhow::bail!("--partition-pages: this sharemap was built without Parquet (the `parquet` feature)")
}

/// `convert --partition-pages N`: a Parquet dataset of one part per N pages.
#[cfg(feature = "parquet")]
pub fn partition(
    input_path: &Path,
    output: &Path,
    from: Option<&str>,
    args: &InputArgs,
    pages: u64,
) -> Result<ExitCode> {
    let input = input(input_path, from, args, Selection::Whole)?;
    warn_if_truncated(&input)?;
    let dataset = sharemap::partition::write(&input, output, pages, &Bars::new())
        .map_err(|e| crate::flags::say(e, crate::flags::At::Partition))?;
    say_excluded(&input);
    eprintln!(
        "sharemap: wrote {} accesses in {} parts of {} pages to {} (index: _sharemap.json)",
        dataset.accesses,
        dataset.parts.len(),
        pages,
        output.display()
    );
    if dataset.events > 0 {
        eprintln!(
            "sharemap: note: the trace's {} events ({} annotations) are not in the parts",
            dataset.events, dataset.annotations
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What part of a trace a command reads: `--exclude RANGES`, and `--roi`, `--no-roi`,
/// `--phase`, `--window` (one of the four).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct InputArgs {
    /// Leave out the accesses that touch these address ranges: LO-HI (HI excluded) or
    /// LO+SIZE, hex or decimal, comma-separated (e.g. a spin-wait flag: 0x601040+64)
    #[arg(long)]
    exclude: Option<String>,
    /// Read only the region of interest the program marked (sharemap_roi_begin/end); a
    /// trace without one is refused. The analyses read it by default when the trace has one
    #[arg(long, conflicts_with_all = ["no_roi", "phase", "window"])]
    roi: bool,
    /// Read the whole trace, whatever its region-of-interest marks say
    #[arg(long, conflicts_with_all = ["phase", "window"])]
    no_roi: bool,
    /// Read only this phase, every time it runs: its number (from 1, as sharemap_phase
    /// numbers them) or its name
    #[arg(long, value_name = "N|NAME", conflicts_with = "window")]
    phase: Option<String>,
    /// Read only these access positions, counted from 0: LO-HI (HI excluded), LO+COUNT or
    /// LO- (to the end), suffixes k, M, G allowed (e.g. 2M-10M)
    #[arg(long, value_name = "LO-HI")]
    window: Option<String>,
}

impl InputArgs {
    pub fn exclude(&self) -> Option<&str> {
        self.exclude.as_deref()
    }

    /// The part asked for, or `default` when none is.
    pub fn selection(&self, default: Selection) -> Result<Selection> {
        Ok(if self.roi {
            Selection::Roi
        } else if self.no_roi {
            Selection::Whole
        } else if let Some(phase) = &self.phase {
            Selection::Phase(phase.clone())
        } else if let Some(text) = &self.window {
            Selection::parse_range(text).map_err(|e| anyhow!("--window {e}"))?
        } else {
            default
        })
    }

    /// Whether any of the window's flags is given.
    pub fn selects(&self) -> bool {
        self.roi || self.no_roi || self.phase.is_some() || self.window.is_some()
    }

    /// The flag that chose the part read.
    fn flag(&self) -> String {
        match (&self.phase, &self.window) {
            _ if self.roi => "--roi".into(),
            (Some(p), _) => format!("--phase {p}"),
            (_, Some(w)) => format!("--window {w}"),
            _ => "the trace's region of interest".into(),
        }
    }
}

/// Says how many accesses the input's `--exclude` ranges left out, when it has some.
pub fn say_excluded(input: &TraceInput) {
    if let Some(n) = input.excluded() {
        eprintln!("sharemap: left out {n} accesses in the --exclude ranges");
    }
}

/// Writing over the file being read would replace the recording with its conversion.
pub fn refuse_same_file(input: &Path, output: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(a), Ok(b)) = (std::fs::metadata(input), std::fs::metadata(output))
        && a.is_file()
        && (a.dev(), a.ino()) == (b.dev(), b.ino())
    {
        bail!("{}: the output is the input file; write to another name", output.display());
    }
    Ok(())
}

/// Warns when the input is a truncated native trace (its complete chunks are read); fails
/// as reading it would when it cannot be opened.
pub fn warn_if_truncated(input: &TraceInput) -> Result<()> {
    warn_truncated(input, input.truncation()?);
    Ok(())
}

/// Warns of a truncation already found.
pub fn warn_truncated(input: &TraceInput, truncation: Option<sharemap::Truncation>) {
    if let Some(t) = truncation {
        eprintln!(
            "sharemap: warning: {} is truncated: data ends at byte {}, after {} complete chunks ({} accesses); reading those",
            input.name(),
            t.at,
            t.chunks,
            t.accesses
        );
    }
}

/// `record`'s flags.
#[derive(clap::Args)]
pub struct RecordArgs {
    /// tracer: the runtime of a program built with `sharemap cc`/`c++` (ThreadSanitizer's
    /// instrumentation, clang or gcc; `sancov` is its old name); valgrind: any binary, far
    /// slower; perf: samples of an event with data addresses (--event), no rebuild; faults:
    /// perf with page-faults; auto: tracer when the program was built with the wrapper,
    /// else valgrind
    #[arg(long, default_value = "auto", value_parser = ["auto", "tracer", "sancov", "valgrind", "perf", "faults"])]
    pub backend: String,
    /// The perf backend's event: page-faults (every fault: first touches; any host),
    /// mem-loads[:ldlat=CYCLES] (sampled loads at least that slow, default 30; Intel PEBS or
    /// AMD IBS) or mem-stores (sampled stores; same)
    #[arg(long, default_value = "page-faults")]
    pub event: String,
    /// Record one access in K of each thread (tracer)
    #[arg(long, default_value_t = 1)]
    pub sample: u64,
    /// Leave out accesses to the threads' stacks (tracer)
    #[arg(long)]
    pub exclude_stack: bool,
    /// A burst-sampled build's setting for this recording, in place of the one it was
    /// built with: ON:OFF (microseconds per burst window and between windows), 0 (no
    /// bursts), or all (every access: a complete trace of the same binary)
    #[arg(long)]
    pub burst: Option<String>,
    /// Address-space randomisation off (personality ADDR_NO_RANDOMIZE): the program's
    /// addresses are the same in a later `sharemap run --no-aslr`, so page plans apply
    #[arg(long)]
    pub no_aslr: bool,
    /// Leave out the accesses that touch these address ranges (LO-HI or LO+SIZE, hex or
    /// decimal) or global variables (by symbol name, from the program's symbol table),
    /// comma-separated: e.g. a spin-wait flag
    #[arg(long)]
    pub exclude: Option<String>,
    /// The trace to write (.trace native, .csv, .parquet; see --to)
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format, overriding the extension
    #[arg(long)]
    pub to: Option<String>,
    /// The program and its arguments, after --
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

pub fn record(args: RecordArgs) -> Result<ExitCode> {
    if args.no_aslr
        && let Err(e) = sharemap_run::record::disable_aslr()
    {
        bail!("--no-aslr: the kernel refused to turn address randomisation off: {e}");
    }
    let output = args.output.clone();
    let request = RecordRequest {
        backend: args.backend,
        event: args.event,
        sample: args.sample,
        exclude_stack: args.exclude_stack,
        burst: args.burst,
        no_aslr: args.no_aslr,
        exclude: args.exclude,
        output: args.output,
        format: format_arg(args.to.as_deref())?,
        command: args.command,
        env: Vec::new(),
        quiet: false,
    };
    let tools = Tools::beside(&std::env::current_exe()?);
    let recorder = Recorder::new(request, &tools).map_err(said)?;
    for note in &recorder.notes {
        eprintln!("sharemap: {note}");
    }
    let rec = recorder.run().map_err(said)?;
    Ok(say_recorded(&rec, &output))
}

/// What a recording did, said; the program's exit status, passed through.
fn say_recorded(rec: &sharemap_run::record::Recorded, output: &Path) -> ExitCode {
    if rec.lost > 0 {
        eprintln!(
            "sharemap: warning: {} records were lost (no free block within 10 s: the recorder fell behind or more than 2,000 threads were alive at once; or threads beyond the 4096th)",
            rec.lost
        );
    }
    if let Some(n) = rec.excluded {
        eprintln!("sharemap: left out {n} accesses in the --exclude ranges");
    }
    if rec.forks > 0 {
        eprintln!(
            "sharemap: note: the program forked {} times; the children's accesses are not recorded (a trace holds one address space)",
            rec.forks
        );
    }
    if let Some(why) = &rec.unnamed {
        eprintln!(
            "sharemap: note: the trace does not name the program's data and code ({why}); `analyze` shows address ranges"
        );
    }
    use std::os::unix::process::ExitStatusExt;
    let status = rec.status;
    if let Some(sig) = status.signal() {
        eprintln!("sharemap: the program was killed by signal {sig}; the trace keeps every access it handed over");
    }
    eprintln!(
        "sharemap: recorded {} from {} into {} ({} bytes)",
        crate::count(rec.accesses, "access", "accesses"),
        crate::count(rec.threads as u64, "thread", "threads"),
        output.display(),
        rec.bytes
    );
    // The program's exit status passes through.
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    };
    ExitCode::from(code as u8)
}

/// A recording's error in its own words (`--exclude` ranges after the flag).
fn said(e: sharemap::Error) -> anyhow::Error {
    crate::flags::say(e, crate::flags::At::Record)
}
