//! Recording a program: its memory accesses into a trace, by the tracer runtime of a program
//! built with `sharemap cc`, by Valgrind for any binary, or by perf's samples.

use crate::Tools;
use sharemap::trace::{Format, Metadata, Ranges, Source, TraceWriter};
use sharemap::{Error, ErrorKind, Machine, Result};
use sharemap_sources::ExcludingSink;
use sharemap_sources::perf::PerfEvent;
use sharemap_sources::runtime::BURST_ALL;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

pub use sharemap_sources::disable_aslr;

/// How to record, as the user asks.
#[derive(Clone, Debug)]
pub struct RecordRequest {
    /// `auto` (the tracer when the program was built with `sharemap cc`, else valgrind),
    /// `tracer` (`sancov` is its old name), `valgrind`, `perf`, or `faults` (perf's page faults).
    pub backend: String,
    /// The perf backend's event: `page-faults`, `mem-loads[:ldlat=CYCLES]` or `mem-stores`.
    pub event: String,
    /// Record one access in this many of each thread (tracer).
    pub sample: u64,
    /// Leave out accesses to the threads' stacks (tracer).
    pub exclude_stack: bool,
    /// A burst-sampled build's setting for this recording: `ON:OFF`, `0` or `all`.
    pub burst: Option<String>,
    /// Address-space randomisation was turned off for the program (noted in the trace; the
    /// run actor is preloaded so that a later `run --no-aslr` sees the same addresses).
    pub no_aslr: bool,
    /// Address ranges (`LO-HI`, `LO+SIZE`) and the program's global variables by symbol
    /// name, comma-separated.
    pub exclude: Option<String>,
    pub output: PathBuf,
    pub format: Option<Format>,
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// More environment for the program (the tracer backend): `OMP_NUM_THREADS`, say.
    pub env: Vec<(OsString, OsString)>,
    /// The program's output discarded (the tracer backend), rather than passed through.
    pub quiet: bool,
}

/// The backend a recording uses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Backend {
    Tracer,
    Valgrind,
    Perf(PerfEvent),
}

/// A recording checked and ready to start: everything that can be refused has been.
pub struct Recorder {
    request: RecordRequest,
    backend: Backend,
    /// What the user should know before the program starts.
    pub notes: Vec<String>,
    ranges: Ranges,
    in_executable: Vec<(u64, u64)>,
    env: Vec<(OsString, OsString)>,
    meta: Metadata,
    /// `--burst`, parsed.
    burst: Option<(u64, u64)>,
    /// The program's file, when found (its names are read after the recording).
    program: Option<PathBuf>,
}

/// What a recording did.
#[derive(Debug)]
pub struct Recorded {
    pub status: ExitStatus,
    pub threads: u32,
    pub accesses: u64,
    pub bytes: u64,
    /// Records lost (the recorder fell behind, or too many threads at once).
    pub lost: u64,
    /// Accesses left out by `exclude`, when it was given.
    pub excluded: Option<u64>,
    /// Times the program forked (the children are not recorded).
    pub forks: u32,
    /// Why the trace does not name the program's variables and code, when it does not (the
    /// tracer backend).
    pub unnamed: Option<String>,
}

fn refuse(why: impl Into<String>) -> Error {
    Error::new(ErrorKind::Record, why)
}

/// The file a command name runs: itself when it has a slash, else the first match on PATH.
fn which(program: &OsString) -> Option<PathBuf> {
    let p = Path::new(program);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(p)).find(|c| c.is_file())
}

/// When the binary sits beside a Makefile, the likely reason it has no tracer: a Makefile's
/// own `CC = gcc` overrides a `CC` from the environment, though not one on make's command line.
fn makefile_hint(binary: &Path) -> String {
    let dir = binary.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let makefile = ["GNUmakefile", "makefile", "Makefile"].iter().any(|m| dir.join(m).is_file());
    if makefile {
        "; this binary has no tracer: was CC overridden by its Makefile? (build with `make CC='sharemap cc'`, CC on make's command line)".into()
    } else {
        String::new()
    }
}

impl Recorder {
    /// Checks the request before anything runs or is written: the backend fits the
    /// program, the options fit the backend, the exclusions name what exists.
    pub fn new(request: RecordRequest, tools: &Tools) -> Result<Recorder> {
        let program = request.command.first().ok_or_else(|| refuse("no program given after --"))?;
        // A program that cannot run is said once, by sharemap, whatever the backend.
        crate::resolve_program(Path::new(program)).map_err(|e| refuse(e.why()))?;
        let name = Path::new(program).file_name().unwrap_or(program).to_string_lossy().to_string();
        let resolved = which(program);
        let marks = resolved.as_deref().map(sharemap_sources::runtime::build_marks).unwrap_or_default();
        let instrumented = marks.instrumented;
        let mut notes = Vec::new();
        let asked = request.backend.as_str();
        let backend = match asked {
            // `sancov`: the backend's name before it was named for what it is.
            "auto" | "tracer" | "sancov" if instrumented => "tracer",
            "tracer" | "sancov" if resolved.is_some() => {
                // Checked before running: the program would otherwise run to its end unrecorded.
                return Err(refuse(format!(
                    "{name} was not built with `sharemap cc` (no tracer runtime in it): rebuild it with CC='sharemap cc', or use --backend valgrind{}",
                    resolved.as_deref().map(makefile_hint).unwrap_or_default()
                )));
            }
            "sancov" => "tracer",
            "faults" => "perf",
            "auto" => {
                if let Some(path) = &resolved {
                    notes.push(format!(
                        "{name} was not built with `sharemap cc`: recording under valgrind (slow){}",
                        makefile_hint(path)
                    ));
                }
                "valgrind"
            }
            b => b,
        };
        if request.sample == 0 {
            return Err(refuse("--sample 0: expected a positive number (1 records every access)"));
        }
        if backend != "tracer" && (request.sample != 1 || request.exclude_stack) {
            return Err(refuse(
                "--sample and --exclude-stack work with the tracer backend (programs built with `sharemap cc`)",
            ));
        }
        let mut params = BTreeMap::new();
        if request.no_aslr {
            params.insert("aslr".to_string(), "off".to_string());
        }
        let event = request.event.as_str();
        let backend = if backend == "perf" {
            let e = PerfEvent::parse(event).ok_or_else(|| {
                refuse(format!(
                    "--event {event}: expected page-faults, mem-loads, mem-loads:ldlat=CYCLES or mem-stores"
                ))
            })?;
            if asked == "faults" && e != PerfEvent::PageFaults {
                return Err(refuse(format!(
                    "--backend faults records page faults: use --backend perf --event {event}"
                )));
            }
            params.insert("event".to_string(), e.name());
            // Before anything runs or is written: a missing PMU feature is said at once.
            sharemap_sources::perf::check(e).map_err(|e| refuse(e.to_string()))?;
            Backend::Perf(e)
        } else {
            if event != "page-faults" {
                return Err(refuse("--event works with the perf backend (--backend perf)"));
            }
            if backend == "tracer" { Backend::Tracer } else { Backend::Valgrind }
        };
        let burst_build = marks.burst;
        let burst = match &request.burst {
            None => None,
            Some(_) if backend != Backend::Tracer || !burst_build => {
                return Err(refuse(format!(
                    "--burst: {name} is not a burst-sampled build (build it with `sharemap cc --burst`)"
                )));
            }
            Some(text) => Some(parse_burst(text)?),
        };
        if backend == Backend::Tracer {
            params.insert("exclude_stack".to_string(), request.exclude_stack.to_string());
            let how =
                if burst_build { "burst-sampled (sharemap cc --burst)" } else { "ThreadSanitizer's (sharemap cc)" };
            params.insert("instrumentation".to_string(), how.to_string());
        }
        if let Some((on, off)) = burst {
            let text = if on == BURST_ALL { "all".to_string() } else { format!("{on}:{off}") };
            params.insert("burst".to_string(), text);
        }
        let source = Source {
            kind: match backend {
                Backend::Tracer => "tracer",
                Backend::Valgrind => "valgrind",
                Backend::Perf(_) => "perf",
            }
            .into(),
            name,
            command: request.command.iter().map(|a| a.to_string_lossy().to_string()).collect(),
            params,
        };
        let mut meta = Metadata::with_source(source);
        meta.sampling_period = request.sample;
        let (ranges, in_executable) = match (&request.exclude, resolved.as_deref()) {
            (Some(text), Some(program)) => exclusion(text, program)?,
            (Some(text), None) => (parse_ranges(text)?, Vec::new()),
            (None, _) => (Ranges::default(), Vec::new()),
        };
        if !in_executable.is_empty() && backend != Backend::Tracer {
            return Err(refuse(
                "--exclude by symbol works with the tracer backend (programs built with `sharemap cc`); give address ranges",
            ));
        }
        if let Some(text) = &request.exclude {
            meta.source.params.insert("excluded".into(), text.trim().to_string());
        }
        let env =
            if request.no_aslr && backend == Backend::Tracer { same_libraries_as_run(tools)? } else { Vec::new() };
        let mut env = env;
        env.extend(request.env.iter().cloned());
        Ok(Recorder { request, backend, notes, ranges, in_executable, env, meta, burst, program: resolved })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Runs the program and records it. The trace keeps every access handed over, whatever
    /// the program's end.
    pub fn run(self) -> Result<Recorded> {
        let Recorder { request, backend, ranges, in_executable, env, meta, burst, program, .. } = self;
        let mut writer = TraceWriter::create(&request.output, request.format, meta)?;
        writer.flush_each_chunk()?;
        // The trace's clock: the run's wall time, start to end, recording included.
        let started = std::time::Instant::now();
        let failed = |e: &dyn std::fmt::Display| refuse(e.to_string());
        let excluding = request.exclude.is_some();
        let mut corrupted = None;
        let mut unnamed = None;
        let (status, threads, lost, excluded, forks) = match backend {
            Backend::Tracer => {
                let opts = sharemap_sources::runtime::Options {
                    sample: request.sample,
                    exclude_stack: request.exclude_stack,
                    burst,
                    exclude: ranges,
                    exclude_in_executable: in_executable,
                    env,
                    quiet: request.quiet,
                    ..Default::default()
                };
                let rec =
                    sharemap_sources::runtime::record(&request.command, &opts, &mut writer).map_err(|e| failed(&e))?;
                writer.set_threads(rec.threads, rec.os_tids);
                // The trace's `cpu` events mean something on a machine with these nodes.
                writer.set_host_cpu_nodes(host_cpu_nodes());
                writer.set_burst(rec.burst);
                match program.as_deref().map(|p| crate::symbols::program_info(p, rec.exe_base, &rec.sites)) {
                    Some(Ok(info)) => writer.set_program(Some(info)),
                    Some(Err(why)) => unnamed = Some(why),
                    None => unnamed = Some("the program's file was not found on PATH".into()),
                }
                corrupted = rec.corrupted;
                (rec.status, rec.threads, rec.lost, rec.excluded, rec.forks)
            }
            Backend::Perf(event) => {
                let mut sink = ExcludingSink::new(&mut writer, ranges);
                let rec = sharemap_sources::perf::record(&request.command, event, &mut sink).map_err(|e| failed(&e))?;
                let excluded = sink.excluded;
                writer.set_threads(rec.threads, rec.os_tids);
                (rec.status, rec.threads, 0, excluded, 0)
            }
            Backend::Valgrind => {
                let mut sink = ExcludingSink::new(&mut writer, ranges);
                let rec = sharemap_sources::valgrind::record(&request.command, &mut sink).map_err(|e| failed(&e))?;
                let excluded = sink.excluded;
                writer.set_threads(rec.threads, Vec::new());
                (rec.status, rec.threads, 0, excluded, 0)
            }
        };
        writer.set_run_ns(started.elapsed().as_nanos().min(u64::MAX as u128) as u64);
        if let Some(what) = corrupted {
            // What came before is sound: kept, finished, under the temporary name (the
            // destination gets only a whole recording).
            let (report, kept) = writer.finish_partial()?;
            let program = request.command.first().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
            return Err(refuse(format!(
                "{program} corrupted its trace channel ({what}); the program ran on ({}); the {} accesses recorded up to the fault are kept in {}",
                describe_status(status),
                report.accesses,
                kept.display()
            )));
        }
        let report = writer.finish()?;
        Ok(Recorded {
            status,
            threads,
            accesses: report.accesses,
            bytes: report.bytes,
            lost,
            excluded: excluding.then_some(excluded),
            forks,
            unnamed,
        })
    }
}

fn parse_ranges(text: &str) -> Result<Ranges> {
    Ranges::parse(text).map_err(|e| Error::new(ErrorKind::Exclude, e.to_string()))
}

/// `--exclude` for a recording: address ranges, and the program's symbols (by name) as ranges
/// relative to its load address, from `nm -S` (static variables included, unless stripped).
fn exclusion(text: &str, program: &Path) -> Result<(Ranges, Vec<(u64, u64)>)> {
    let mut ranges = Ranges::default();
    let mut symbols = Vec::new();
    let mut table: Option<Vec<(String, u64, u64)>> = None;
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let looks_numeric = item.starts_with(|c: char| c.is_ascii_digit());
        if looks_numeric {
            for &(lo, hi) in parse_ranges(item)?.ranges() {
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
            [] => {
                return Err(refuse(format!(
                    "--exclude {item}: no sized symbol of that name in {} (give an address range, or build without stripping symbols)",
                    program.display()
                )));
            }
            _ => {
                return Err(refuse(format!(
                    "--exclude {item}: several symbols of that name in {}; give an address range",
                    program.display()
                )));
            }
        }
    }
    Ok((ranges, symbols))
}

/// (name, value, size) of every defined symbol of `program`, from binutils' `nm`.
fn symbol_table(program: &Path) -> Result<Vec<(String, u64, u64)>> {
    let symbols = crate::symbols::symbols(program).map_err(|why| refuse(format!("--exclude: {why}")))?;
    Ok(symbols.into_iter().map(|s| (s.name, s.value, s.size)).collect())
}

/// `sharemap run` preloads its actor: a recording meant for a later run preloads it too
/// (pinning nothing), so that both address spaces map the same libraries at the same
/// places, and the program's large allocations (mapped after them) land at the same
/// addresses.
fn same_libraries_as_run(tools: &Tools) -> Result<Vec<(OsString, OsString)>> {
    let library = tools.existing("libsharemap_pin.so").map_err(|e| refuse(format!("--no-aslr: {}", e.why())))?;
    Ok(vec![("LD_PRELOAD".into(), crate::preload_value(&library))])
}

/// This host's NUMA node (the kernel's number) of each CPU (by the kernel's number), from
/// sysfs; CPUs it does not list (offline) get `u32::MAX`. Empty when sysfs cannot be read.
pub fn host_cpu_nodes() -> Vec<u32> {
    let Ok(m) = Machine::live_sysfs() else { return Vec::new() };
    let cpus = (0..m.pu_count()).map(|p| m.pu_os_index(p) as usize + 1).max().unwrap_or(0);
    let mut nodes = vec![u32::MAX; cpus.min(sharemap_trace::MAX_HOST_CPUS)];
    for p in 0..m.pu_count() {
        if let Some(n) = nodes.get_mut(m.pu_os_index(p) as usize) {
            *n = m.numa_os_index(m.pu_numa[p]);
        }
    }
    nodes
}

/// How a program ended, in words.
fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with status {code}"),
        (None, Some(sig)) => format!("it was killed by signal {sig}"),
        _ => "it ended".to_string(),
    }
}

/// `record --burst`: `ON:OFF`, `0` (no bursts) or `all` (`BURST_ALL`: every access).
fn parse_burst(text: &str) -> Result<(u64, u64)> {
    let max = sharemap_trace::MAX_BURST;
    let setting = if text == "all" { Some((BURST_ALL, 1)) } else { sharemap_trace::Burst::parse_setting(text) };
    setting.ok_or_else(|| {
        refuse(format!(
            "--burst {text}: expected ON:OFF (microseconds per burst and between bursts, OFF at least 1, each at most {max}), 0 or all"
        ))
    })
}
