//! `gen`, `convert` and `record`: commands that produce traces.

use crate::progress;
use anyhow::{Context, Result, anyhow, bail};
use sharemap_sources::ExcludingSink;
use sharemap_sources::generate::{self, GenParams, PATTERNS};
use sharemap_trace::TraceSource;
use sharemap_trace::exclude::{Excluding, Ranges};
use sharemap_trace::{Chunk, Format, Metadata, Source, TraceReader, TraceWriter};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn format_arg(name: Option<&str>) -> Result<Option<Format>> {
    name.map(|n| Format::from_name(n).ok_or_else(|| anyhow!("unknown format '{n}' (formats: {})", Format::NAMES)))
        .transpose()
}

pub fn list_patterns() {
    for p in PATTERNS {
        println!("{:<18} {}", p.name, p.models);
    }
}

pub fn generate(
    pattern: &str,
    threads: u32,
    accesses: u64,
    seed: u64,
    page_size: u64,
    output: &Path,
    to: Option<&str>,
) -> Result<ExitCode> {
    let Some(p) = generate::find(pattern) else {
        let names: Vec<&str> = PATTERNS.iter().map(|p| p.name).collect();
        bail!("unknown pattern '{pattern}' (patterns: {})", names.join(", "));
    };
    let params = GenParams { page_size, ..GenParams::new(threads, accesses, seed) };
    params.validate().map_err(|e| match e {
        generate::GenError::Threads(0) => anyhow!("--threads must be at least 1"),
        generate::GenError::Threads(_) => anyhow!("--threads must be at most {}", generate::MAX_THREADS),
        generate::GenError::PageSize(p) => anyhow!("--page-size must be a power of two >= 64 (got {p})"),
        generate::GenError::LineSize(_) => anyhow!("{e}"),
    })?;
    let report = generate_to(p, &params, output, format_arg(to)?)?;
    eprintln!(
        "sharemap: wrote {} accesses ({} threads, pattern {}) to {} ({} bytes, {:.2} bytes/access)",
        report.accesses,
        threads,
        p.name,
        output.display(),
        report.bytes,
        report.bytes as f64 / report.accesses.max(1) as f64
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs a generator into a file of any format.
pub fn generate_to(
    p: &generate::Pattern,
    params: &GenParams,
    output: &Path,
    format: Option<Format>,
) -> Result<sharemap_trace::WriteReport> {
    let mut writer = TraceWriter::create(output, format, generate::metadata(p, params))?;
    let bar = progress::bar(Some(params.accesses), &format!("gen {}", p.name));
    let mut sink = ProgressSink { inner: &mut writer, bar: &bar, n: 0 };
    generate::run(p, params, &mut sink).with_context(|| format!("writing {}", output.display()))?;
    bar.finish_and_clear();
    Ok(writer.finish()?)
}

/// Forwards to a writer and ticks a progress bar every 64k accesses.
struct ProgressSink<'a> {
    inner: &'a mut TraceWriter,
    bar: &'a indicatif::ProgressBar,
    n: u64,
}

impl sharemap_sources::Sink for ProgressSink<'_> {
    fn access(&mut self, a: sharemap_trace::Access) -> std::io::Result<()> {
        self.n += 1;
        if self.n & 0xffff == 0 {
            self.bar.set_position(self.n);
        }
        sharemap_sources::Sink::access(self.inner, a)
    }
    fn event(&mut self, thread: u32, kind: sharemap_trace::EventKind, arg: u64, label: &str) -> std::io::Result<()> {
        sharemap_sources::Sink::event(self.inner, thread, kind, arg, label)
    }
    fn chunk(&mut self, chunk: &mut sharemap_trace::Chunk) -> std::io::Result<()> {
        self.n += chunk.accesses.len() as u64;
        self.bar.set_position(self.n);
        sharemap_sources::Sink::chunk(self.inner, chunk)
    }
}

pub fn convert(
    input: &Path,
    output: &Path,
    from: Option<&str>,
    to: Option<&str>,
    exclude: Option<&str>,
) -> Result<ExitCode> {
    let (from, to) = (format_arg(from)?, format_arg(to)?);
    let ranges = exclusion(exclude)?;
    refuse_same_file(input, output)?;
    let mut reader = TraceReader::open(input, from)?;
    warn_if_truncated(&reader, input);
    let mut meta: Metadata = reader.metadata().clone();
    if reader.format() != Format::Native && meta.source.kind.is_empty() {
        meta.source = Source { kind: "import".into(), name: input.display().to_string(), ..Source::default() };
    }
    if let Some(text) = exclude.filter(|_| ranges.is_some()) {
        meta.source.params.insert("excluded".into(), text.trim().to_string());
    }
    let mut writer = TraceWriter::create(output, to, meta)?;
    let bar = progress::bar(reader.access_count_hint(), "convert");
    excluding(&mut reader, ranges, |source| {
        let mut chunk = Chunk::default();
        while source.next_chunk(&mut chunk)? {
            bar.inc(chunk.accesses.len() as u64);
            writer.chunk(&mut chunk)?;
        }
        Ok(())
    })?;
    let threads = reader.metadata().threads;
    writer.set_threads(threads, reader.metadata().os_tids.clone());
    bar.finish_and_clear();
    let report = writer.finish()?;
    if report.dropped_events > 0 {
        eprintln!(
            "sharemap: warning: {} events (thread start/exit, annotations, transactions) cannot be stored in {}; use .trace or .parquet to keep them",
            report.dropped_events,
            output.display()
        );
    }
    eprintln!("sharemap: converted {} accesses to {} ({} bytes)", report.accesses, output.display(), report.bytes);
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

/// `--exclude RANGES`, parsed.
pub fn exclusion(arg: Option<&str>) -> Result<Option<Ranges>> {
    arg.map(|text| Ranges::parse(text).map_err(|e| anyhow!("--exclude {e}"))).transpose()
}

/// Runs `f` on `reader`, without the accesses in `ranges` when given, and says how many were
/// left out.
pub fn excluding<R>(
    reader: &mut dyn TraceSource,
    ranges: Option<Ranges>,
    f: impl FnOnce(&mut dyn TraceSource) -> Result<R>,
) -> Result<R> {
    excluding_and_saying(reader, ranges, true, f)
}

/// As `excluding`, saying how many were left out only when `say` (a preliminary pass over a
/// trace that is read again keeps quiet).
pub fn excluding_and_saying<R>(
    reader: &mut dyn TraceSource,
    ranges: Option<Ranges>,
    say: bool,
    f: impl FnOnce(&mut dyn TraceSource) -> Result<R>,
) -> Result<R> {
    let Some(ranges) = ranges else { return f(reader) };
    let mut ex = Excluding::new(reader, ranges);
    let r = f(&mut ex)?;
    if say {
        say_excluded(ex.excluded);
    }
    Ok(r)
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

pub fn warn_if_truncated(reader: &TraceReader, path: &Path) {
    if let (Some(offset), TraceReader::Native(r)) = (reader.truncated_at(), reader) {
        eprintln!(
            "sharemap: warning: {} is truncated: data ends at byte {offset}, after {} complete chunks ({} accesses); reading those",
            path.display(),
            r.chunks().len(),
            r.access_count()
        );
    }
}

/// The file a command name runs: itself when it has a slash, else the first match on PATH.
fn which(program: &OsString) -> Option<PathBuf> {
    let p = Path::new(program);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(p)).find(|c| c.is_file())
}

/// How `record` records.
pub struct RecordHow<'a> {
    pub backend: &'a str,
    /// The perf backend's event.
    pub event: &'a str,
    pub sample: u64,
    pub exclude_stack: bool,
    /// Address-space randomisation was turned off for the program (noted in the trace).
    pub no_aslr: bool,
    /// `--exclude`: address ranges and symbol names.
    pub exclude: Option<&'a str>,
}

fn say_excluded(excluded: u64) {
    eprintln!("sharemap: left out {excluded} accesses in the --exclude ranges");
}

/// `--exclude` for `record`: address ranges, and the program's symbols (by name) as ranges
/// relative to its load address, from `nm -S` (static variables included, unless stripped).
fn record_exclusion(text: &str, program: &Path) -> Result<(Ranges, Vec<(u64, u64)>)> {
    let mut ranges = Ranges::default();
    let mut symbols = Vec::new();
    let mut table: Option<Vec<(String, u64, u64)>> = None;
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let looks_numeric = item.starts_with(|c: char| c.is_ascii_digit());
        if looks_numeric {
            for &(lo, hi) in exclusion(Some(item))?.unwrap_or_default().ranges() {
                ranges.add(lo, hi);
            }
            continue;
        }
        let table = match &mut table {
            Some(t) => t,
            None => table.insert(symbol_table(program)?),
        };
        let sized: Vec<&(String, u64, u64)> = table.iter().filter(|(n, _, size)| n == item && *size > 0).collect();
        match sized.as_slice() {
            [(_, value, size)] => symbols.push((*value, value + size)),
            [] => bail!(
                "--exclude {item}: no sized symbol of that name in {} (give an address range, or build without stripping symbols)",
                program.display()
            ),
            _ => {
                bail!("--exclude {item}: several symbols of that name in {}; give an address range", program.display())
            }
        }
    }
    Ok((ranges, symbols))
}

/// (name, value, size) of every defined symbol of `program`, from binutils' `nm`.
fn symbol_table(program: &Path) -> Result<Vec<(String, u64, u64)>> {
    let out = std::process::Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(program)
        .output()
        .map_err(|e| anyhow!("--exclude: running nm on {}: {e} (binutils has it)", program.display()))?;
    if !out.status.success() {
        bail!("--exclude: nm cannot read the symbols of {}", program.display());
    }
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [value, size, _kind, name] => Some((name.to_string(), hex(value)?, hex(size)?)),
                _ => None,
            }
        })
        .collect())
}

/// `sharemap run` preloads its actor: a recording meant for a later run preloads it too
/// (pinning nothing), so that both address spaces map the same libraries at the same
/// places, and the program's large allocations (mapped after them) land at the same
/// addresses.
fn same_libraries_as_run() -> Result<Vec<(OsString, OsString)>> {
    let library = sharemap_run::library_beside(&std::env::current_exe()?);
    if !library.is_file() {
        bail!("--no-aslr: the run actor {} is missing: run `cargo build --release`", library.display());
    }
    Ok(vec![("LD_PRELOAD".into(), sharemap_run::preload_value(&library))])
}

pub fn record(output: &Path, to: Option<&str>, command: &[OsString], how: &RecordHow) -> Result<ExitCode> {
    let RecordHow { backend, event, sample, exclude_stack, no_aslr, exclude } = *how;
    let program = command.first().ok_or_else(|| anyhow!("no program given after --"))?;
    let name = Path::new(program).file_name().unwrap_or(program).to_string_lossy().to_string();
    let resolved = which(program);
    let instrumented = resolved.as_deref().is_some_and(sharemap_sources::runtime::is_instrumented);
    let backend = match backend {
        // `sancov`: the backend's name before it was named for what it is.
        "auto" | "tracer" | "sancov" if instrumented => "tracer",
        "tracer" | "sancov" if resolved.is_some() => {
            // Checked before running: the program would otherwise run to its end unrecorded.
            bail!(
                "{name} was not built with `sharemap cc` (no tracer runtime in it): rebuild it with CC='sharemap cc', or use --backend valgrind"
            );
        }
        "sancov" => "tracer",
        "faults" => "perf",
        "auto" => {
            if resolved.is_some() {
                eprintln!("sharemap: {name} was not built with `sharemap cc`: recording under valgrind (slow)");
            }
            "valgrind"
        }
        b => b,
    };
    if sample == 0 {
        bail!("--sample 0: expected a positive number (1 records every access)");
    }
    if backend != "tracer" && (sample != 1 || exclude_stack) {
        bail!("--sample and --exclude-stack work with the tracer backend (programs built with `sharemap cc`)");
    }
    let mut params = std::collections::BTreeMap::new();
    if no_aslr {
        params.insert("aslr".to_string(), "off".to_string());
    }
    let perf_event = if backend == "faults" || backend == "perf" || how.backend == "faults" {
        let e = sharemap_sources::perf::PerfEvent::parse(event).ok_or_else(|| {
            anyhow!("--event {event}: expected page-faults, mem-loads, mem-loads:ldlat=CYCLES or mem-stores")
        })?;
        if how.backend == "faults" && e != sharemap_sources::perf::PerfEvent::PageFaults {
            bail!("--backend faults records page faults: use --backend perf --event {event}");
        }
        params.insert("event".to_string(), e.name());
        // Before anything runs or is written: a missing PMU feature is said at once.
        sharemap_sources::perf::check(e)?;
        Some(e)
    } else {
        if event != "page-faults" {
            bail!("--event works with the perf backend (--backend perf)");
        }
        None
    };
    if backend == "tracer" {
        params.insert("exclude_stack".to_string(), exclude_stack.to_string());
        params.insert("instrumentation".to_string(), "ThreadSanitizer's (sharemap cc)".to_string());
    }
    let source = Source {
        kind: backend.into(),
        name,
        command: command.iter().map(|a| a.to_string_lossy().to_string()).collect(),
        params,
    };
    let mut meta = Metadata::with_source(source);
    meta.sampling_period = sample;
    let (ranges, in_executable) = match (exclude, resolved.as_deref()) {
        (Some(text), Some(program)) => record_exclusion(text, program)?,
        (Some(text), None) => (exclusion(Some(text))?.unwrap_or_default(), Vec::new()),
        (None, _) => (Ranges::default(), Vec::new()),
    };
    if !in_executable.is_empty() && backend != "tracer" {
        bail!(
            "--exclude by symbol works with the tracer backend (programs built with `sharemap cc`); give address ranges"
        );
    }
    if let Some(text) = exclude {
        meta.source.params.insert("excluded".into(), text.trim().to_string());
    }
    let mut writer = TraceWriter::create(output, format_arg(to)?, meta)?;
    writer.flush_each_chunk()?;
    // The trace's clock: the run's wall time, start to end, recording included.
    let started = std::time::Instant::now();
    let (status, threads) = if backend == "tracer" {
        let opts = sharemap_sources::runtime::Options {
            sample,
            exclude_stack,
            exclude: ranges,
            exclude_in_executable: in_executable,
            env: if no_aslr { same_libraries_as_run()? } else { Vec::new() },
            ..Default::default()
        };
        let rec = sharemap_sources::runtime::record(command, &opts, &mut writer)?;
        if rec.lost > 0 {
            eprintln!(
                "sharemap: warning: {} records were lost (no free block within 10 s: the recorder fell behind or more than 2,000 threads were alive at once; or threads beyond the 4096th)",
                rec.lost
            );
        }
        if exclude.is_some() {
            say_excluded(rec.excluded);
        }
        if rec.forks > 0 {
            eprintln!(
                "sharemap: note: the program forked {} times; the children's accesses are not recorded (a trace holds one address space)",
                rec.forks
            );
        }
        writer.set_threads(rec.threads, rec.os_tids);
        (rec.status, rec.threads)
    } else if let Some(event) = perf_event {
        let mut sink = ExcludingSink::new(&mut writer, ranges);
        let rec = sharemap_sources::perf::record(command, event, &mut sink)?;
        if exclude.is_some() {
            say_excluded(sink.excluded);
        }
        writer.set_threads(rec.threads, rec.os_tids);
        (rec.status, rec.threads)
    } else {
        let mut sink = ExcludingSink::new(&mut writer, ranges);
        let rec = sharemap_sources::valgrind::record(command, &mut sink)?;
        if exclude.is_some() {
            say_excluded(sink.excluded);
        }
        writer.set_threads(rec.threads, Vec::new());
        (rec.status, rec.threads)
    };
    writer.set_run_ns(started.elapsed().as_nanos().min(u64::MAX as u128) as u64);
    let report = writer.finish()?;
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        eprintln!("sharemap: the program was killed by signal {sig}; the trace keeps every access it handed over");
    }
    eprintln!(
        "sharemap: recorded {} accesses from {} threads into {} ({} bytes)",
        report.accesses,
        threads,
        output.display(),
        report.bytes
    );
    // The program's exit status passes through.
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    };
    Ok(ExitCode::from(code as u8))
}
