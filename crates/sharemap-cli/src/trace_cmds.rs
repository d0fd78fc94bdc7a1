//! `gen`, `convert` and `record`: commands that produce traces; and how every command names
//! the trace it reads.

use crate::progress::Bars;
use anyhow::{Result, anyhow, bail};
use sharemap::TraceInput;
use sharemap::generate::{self, GenParams, PATTERNS};
use sharemap::trace::Format;
use sharemap_run::Tools;
use sharemap_run::record::{RecordRequest, Recorder};
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

pub fn format_arg(name: Option<&str>) -> Result<Option<Format>> {
    name.map(|n| Format::from_name(n).ok_or_else(|| anyhow!("unknown format '{n}' (formats: {})", Format::NAMES)))
        .transpose()
}

/// The trace a command reads: its path, `--from` and `--exclude`.
pub fn input(path: &Path, from: Option<&str>, exclude: Option<&str>) -> Result<TraceInput> {
    let input = TraceInput::file(path).with_format(format_arg(from)?);
    match exclude {
        Some(text) => input.exclude(text).map_err(|e| anyhow!("--exclude {}", e.why())),
        None => Ok(input),
    }
}

pub fn list_patterns() {
    for p in PATTERNS {
        println!("{:<18} {}", p.name, p.models);
    }
}

/// `gen`'s size flags as given.
pub struct GenSize {
    pub accesses: Option<u64>,
    pub footprint: Option<String>,
    pub iterations: Option<u64>,
    pub reuse: u32,
    pub word: u64,
    pub halo: u64,
    pub nnz: u64,
    pub seed: u64,
    pub page_size: u64,
}

pub fn generate(pattern: &str, threads: u32, size: GenSize, output: &Path, to: Option<&str>) -> Result<ExitCode> {
    let p = generate::pattern(pattern).map_err(|e| anyhow!(e.why()))?;
    let footprint = size
        .footprint
        .as_deref()
        .map(|f| f.parse::<generate::Footprint>().map_err(|e| anyhow!("--footprint {e}")))
        .transpose()?;
    if footprint == Some(generate::Footprint::Auto) && size.accesses.is_none() {
        bail!("--footprint auto sizes the data from --accesses: give it too");
    }
    let sizing = generate::Sizing {
        accesses: size.accesses,
        footprint,
        iterations: size.iterations,
        reuse: size.reuse,
        word: size.word,
        halo: size.halo,
        nnz: size.nnz,
        page_size: size.page_size,
        ..generate::Sizing::new(threads, size.seed)
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
    let report = generate_to(p, &params, output, format_arg(to)?)?;
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
    exclude: Option<&str>,
) -> Result<ExitCode> {
    let to = format_arg(to)?;
    let input = input(input_path, from, exclude)?;
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
pub fn partition(_: &Path, _: &Path, _: Option<&str>, _: Option<&str>, _: u64) -> Result<ExitCode> {
    anyhow::bail!("--partition-pages: this sharemap was built without Parquet (the `parquet` feature)")
}

/// `convert --partition-pages N`: a Parquet dataset of one part per N pages.
#[cfg(feature = "parquet")]
pub fn partition(
    input_path: &Path,
    output: &Path,
    from: Option<&str>,
    exclude: Option<&str>,
    pages: u64,
) -> Result<ExitCode> {
    let input = input(input_path, from, exclude)?;
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

/// `--exclude RANGES` of the commands that read traces.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ExcludeArg {
    /// Leave out the accesses that touch these address ranges: LO-HI (HI excluded) or
    /// LO+SIZE, hex or decimal, comma-separated (e.g. a spin-wait flag: 0x601040+64)
    #[arg(long)]
    exclude: Option<String>,
}

impl ExcludeArg {
    pub fn text(&self) -> Option<&str> {
        self.exclude.as_deref()
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

/// How `record` records (its flags).
pub struct RecordHow<'a> {
    pub backend: &'a str,
    /// The perf backend's event.
    pub event: &'a str,
    pub sample: u64,
    pub exclude_stack: bool,
    /// `--burst`: a burst-sampled build's setting for this recording.
    pub burst: Option<&'a str>,
    /// Address-space randomisation was turned off for the program (noted in the trace).
    pub no_aslr: bool,
    /// `--exclude`: address ranges and symbol names.
    pub exclude: Option<&'a str>,
}

pub fn record(output: &Path, to: Option<&str>, command: &[OsString], how: &RecordHow) -> Result<ExitCode> {
    let request = RecordRequest {
        backend: how.backend.into(),
        event: how.event.into(),
        sample: how.sample,
        exclude_stack: how.exclude_stack,
        burst: how.burst.map(str::to_string),
        no_aslr: how.no_aslr,
        exclude: how.exclude.map(str::to_string),
        output: output.to_path_buf(),
        format: format_arg(to)?,
        command: command.to_vec(),
        env: Vec::new(),
        quiet: false,
    };
    let tools = Tools::beside(&std::env::current_exe()?);
    let recorder = Recorder::new(request, &tools).map_err(said)?;
    for note in &recorder.notes {
        eprintln!("sharemap: {note}");
    }
    let rec = recorder.run().map_err(said)?;
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
    Ok(ExitCode::from(code as u8))
}

/// A recording's error in its own words (`--exclude` ranges after the flag).
fn said(e: sharemap::Error) -> anyhow::Error {
    crate::flags::say(e, crate::flags::At::Record)
}
