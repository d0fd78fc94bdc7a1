//! `sharemap._native`: the facade's Session for Python. Results cross as the facade's own
//! serde JSON (the numbers the command line prints with `--json`), a sharing matrix as the
//! bytes of a float64 array; `python/sharemap/__init__.py` turns them into numpy arrays and
//! pandas DataFrames. Long passes release the GIL and stop at Ctrl-C.

mod errors;

use errors::{of as to_py, setting as setting_error, spec as spec_error};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sharemap::{Machine, TraceInput};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Runs `work` on another thread with the GIL released, checking for Ctrl-C meanwhile: a
/// signal sets `stop`, which ends the pass at its next chunk, and is raised once the work
/// has stopped.
fn interruptible<T: Send>(
    py: Python<'_>,
    stop: &AtomicBool,
    work: impl FnOnce() -> sharemap::Result<T> + Send,
) -> PyResult<T> {
    stop.store(false, Ordering::Relaxed);
    std::thread::scope(|scope| {
        let handle = scope.spawn(work);
        let mut interrupted = None;
        while !handle.is_finished() {
            py.detach(|| {
                for _ in 0..5 {
                    if handle.is_finished() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
            if interrupted.is_none()
                && let Err(e) = py.check_signals()
            {
                stop.store(true, Ordering::Relaxed);
                interrupted = Some(e);
            }
        }
        let out = handle.join().map_err(|_| errors::error("sharemap: the analysis panicked"))?;
        if let Some(e) = interrupted {
            return Err(e);
        }
        out.map_err(to_py)
    })
}

/// A trace format by name (None: from the file's extension or content).
fn format_of(name: Option<&str>) -> PyResult<Option<sharemap::trace::Format>> {
    name.map(|name| {
        sharemap::trace::Format::from_name(name).ok_or_else(|| {
            setting_error(format!("unknown format '{name}' (formats: {})", sharemap::trace::Format::NAMES))
        })
    })
    .transpose()
}

fn json<T: serde::Serialize>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|e| errors::error(e.to_string()))
}

/// A trace studied on a machine: the facade's `Session`.
#[pyclass(module = "sharemap._native", frozen)]
struct Session {
    inner: sharemap::Session,
    stop: Arc<AtomicBool>,
}

#[pymethods]
impl Session {
    #[new]
    #[pyo3(signature = (path, machine = "sammu", seed = 1, format = None, exclude = None, roi = None, phase = None, window = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        path: PathBuf,
        machine: &str,
        seed: u64,
        format: Option<&str>,
        exclude: Option<&str>,
        roi: Option<bool>,
        phase: Option<String>,
        window: Option<&str>,
    ) -> PyResult<Self> {
        let format = format_of(format)?;
        let stop = Arc::new(AtomicBool::new(false));
        let selection = match (roi, phase, window) {
            (None, None, None) => sharemap::Selection::Auto,
            (Some(true), None, None) => sharemap::Selection::Roi,
            (Some(false), None, None) => sharemap::Selection::Whole,
            (None, Some(p), None) => sharemap::Selection::Phase(p),
            (None, None, Some(w)) => sharemap::Selection::parse_range(w)
                .map_err(|e| to_py(sharemap::Error::new(sharemap::ErrorKind::Window, e.to_string())))?,
            _ => {
                return Err(to_py(sharemap::Error::new(
                    sharemap::ErrorKind::Window,
                    "give one of roi, phase and window",
                )));
            }
        };
        let mut input = TraceInput::file(path).with_format(format).stop_when(stop.clone()).select(selection);
        if let Some(ranges) = exclude {
            input = input.exclude(ranges).map_err(to_py)?;
        }
        let machine = Machine::from_spec(machine).map_err(|e| to_py(e.into()))?;
        // A file that is missing or is no trace is said now, not at the first call.
        input.open().map_err(to_py)?;
        Ok(Session { inner: sharemap::Session::new(input, machine, seed), stop })
    }

    /// The trace's summary, as JSON.
    fn info(&self, py: Python<'_>) -> PyResult<String> {
        let summary = interruptible(py, &self.stop, || self.inner.info())?;
        json(&summary)
    }

    /// The part of the trace the session reads, as JSON (null for all of it).
    fn window(&self) -> PyResult<String> {
        json(&self.inner.input().window().map_err(to_py)?.as_deref())
    }

    /// The machine's summary, as JSON.
    fn machine(&self) -> PyResult<String> {
        json(&self.inner.machine().summary())
    }

    /// The analysis as JSON, and its sharing matrix as float64 bytes (threads x threads).
    #[pyo3(signature = (detector = "oracle", compare = None, window = 0))]
    fn analyze<'py>(
        &self,
        py: Python<'py>,
        detector: &str,
        compare: Option<String>,
        window: u64,
    ) -> PyResult<(String, Bound<'py, PyBytes>, usize)> {
        // What is shared by name is `shared()`'s: a pass of its own.
        let request = sharemap::AnalyzeRequest {
            detector: detector.into(),
            compare,
            window,
            against: None,
            objects: Some(false),
        };
        request.check().map_err(to_py)?;
        let analysis = interruptible(py, &self.stop, || self.inner.analyze(&request))?;
        let matrix = &analysis.detection.matrix;
        let n = matrix.threads();
        let mut bytes = Vec::with_capacity(n * n * 8);
        for i in 0..n {
            for j in 0..n {
                bytes.extend_from_slice(&matrix.get(i, j).to_le_bytes());
            }
        }
        Ok((json(&analysis)?, PyBytes::new(py, &bytes), n))
    }

    /// The optimum and the policies, as JSON (the command line's `place --json` fields).
    #[pyo3(signature = (
        policies = "all", cost = None, page_size = None, thread_map = "os", sharing = "oracle",
        refs_per_ms = None, settings = Vec::new(), costliest = 0, memory_mb = 256, plan = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn place(
        &self,
        py: Python<'_>,
        policies: &str,
        cost: Option<String>,
        page_size: Option<u64>,
        thread_map: &str,
        sharing: &str,
        refs_per_ms: Option<f64>,
        settings: Vec<String>,
        costliest: usize,
        memory_mb: usize,
        plan: Option<PathBuf>,
    ) -> PyResult<String> {
        let sharing = sharemap::Sharing::parse(sharing).map_err(to_py)?;
        if memory_mb < 16 {
            return Err(setting_error(format!("memory_mb={memory_mb}: expected at least 16 (MiB)")));
        }
        let setup = sharemap::Setup {
            cost,
            page_size,
            thread_map: sharemap::ThreadMap::parse(thread_map).map_err(to_py)?,
            sharing,
            refs_per_ms,
            settings,
            memory_budget: memory_mb.saturating_mul(1 << 20),
        };
        let request =
            sharemap::PlaceRequest { setup, policies: policies.into(), costliest, plan, keep_placement: false };
        let placed = interruptible(py, &self.stop, || self.inner.place(&request))?;
        json(&placed)
    }

    /// Every mechanism's outcome on the simulated machine, as JSON.
    #[pyo3(signature = (mechanisms = "all", page_size = None, params = Vec::new(), settings = Vec::new()))]
    fn simulate(
        &self,
        py: Python<'_>,
        mechanisms: &str,
        page_size: Option<u64>,
        params: Vec<String>,
        settings: Vec<String>,
    ) -> PyResult<String> {
        let mut model = sharemap::simulate::Params::default();
        for p in &params {
            model.set(p).map_err(|e| setting_error(e.to_string()))?;
        }
        let request = sharemap::SimulateRequest {
            mechanisms: mechanisms.into(),
            page_size,
            params: model,
            settings,
            log_decisions: false,
        };
        let simulation = interruptible(py, &self.stop, || self.inner.simulate(&request))?;
        json(&simulation)
    }

    /// What is shared, by name (`analyze`'s data objects, line classes and code), as JSON.
    fn shared(&self, py: Python<'_>) -> PyResult<String> {
        let w = interruptible(py, &self.stop, || self.inner.shared())?;
        json(&w)
    }

    /// Which mapping and placement to use (`sharemap advise`), as JSON.
    #[pyo3(signature = (params = Vec::new(), page_size = None, threshold = sharemap::advise::DEFAULT_THRESHOLD_PERCENT))]
    fn advise(&self, py: Python<'_>, params: Vec<String>, page_size: Option<u64>, threshold: f64) -> PyResult<String> {
        let mut model = sharemap::simulate::Params::default();
        for p in &params {
            model.set(p).map_err(|e| setting_error(e.to_string()))?;
        }
        if !(0.0..100.0).contains(&threshold) {
            return Err(setting_error(format!("threshold={threshold}: expected a percentage from 0 to 100")));
        }
        let request = sharemap::AdviseRequest { params: model, page_size, threshold_percent: threshold };
        let advice = interruptible(py, &self.stop, || self.inner.advise(&request))?;
        json(&advice)
    }

    /// Thread mappings of the trace's oracle sharing, as JSON.
    #[pyo3(signature = (algorithms = "sharemap", cost_model = "latency"))]
    fn map(&self, py: Python<'_>, algorithms: &str, cost_model: &str) -> PyResult<String> {
        let cost_model = sharemap::map::cost_model(cost_model).map_err(to_py)?;
        let request = sharemap::MapRequest { algorithms: algorithms.into(), cost_model };
        let mapping = interruptible(py, &self.stop, || self.inner.map(&request))?;
        json(&mapping)
    }
}

/// A machine's summary (hwloc synthetic string, XML file, preset or `live`), as JSON.
#[pyfunction]
fn machine(spec: &str) -> PyResult<String> {
    let m = Machine::from_spec(spec).map_err(|e| to_py(e.into()))?;
    json(&m.summary())
}

/// Generates a pattern into a trace file (its format from the extension unless given); the
/// writer's report as JSON. Sizes left out follow `sharemap::generate::Sizing`: the
/// pattern's paper-like footprint and iterations, or with `accesses` alone data sized from it.
#[pyfunction(name = "gen")]
#[pyo3(signature = (pattern, output, threads = 8, accesses = None, seed = 1, page_size = 4096, format = None, footprint = None, iterations = None, reuse = 1, word = 8, halo = 1, nnz = 8))]
#[allow(clippy::too_many_arguments)]
fn generate(
    py: Python<'_>,
    pattern: &str,
    output: PathBuf,
    threads: u32,
    accesses: Option<u64>,
    seed: u64,
    page_size: u64,
    format: Option<&str>,
    footprint: Option<String>,
    iterations: Option<u64>,
    reuse: u32,
    word: u64,
    halo: u64,
    nnz: u64,
) -> PyResult<String> {
    let p = sharemap::generate::pattern(pattern).map_err(to_py)?;
    let footprint = footprint
        .map(|f| f.parse::<sharemap::generate::Footprint>().map_err(|e| setting_error(format!("footprint {e}"))))
        .transpose()?;
    if footprint == Some(sharemap::generate::Footprint::Auto) && accesses.is_none() {
        return Err(setting_error("footprint 'auto' sizes the data from accesses: give it too"));
    }
    let sizing = sharemap::generate::Sizing {
        accesses,
        footprint,
        iterations,
        reuse,
        word,
        halo,
        nnz,
        page_size,
        ..sharemap::generate::Sizing::new(threads, seed)
    };
    let params = sizing.params(p);
    sharemap::generate::check(&params).map_err(|e| setting_error(e.to_string()))?;
    let format = format_of(format)?;
    let stop = AtomicBool::new(false);
    let report = interruptible(py, &stop, || sharemap::generate::to_file(p, &params, &output, format, &()))?;
    json(&serde_json::json!({
        "accesses": report.accesses,
        "bytes": report.bytes,
        "path": output,
        "footprint_pages": params.footprint,
    }))
}

/// Writes a trace as a Parquet dataset of one part per `pages` pages; its index as JSON.
#[pyfunction]
#[pyo3(signature = (trace, output, pages, format = None))]
fn partition(py: Python<'_>, trace: PathBuf, output: PathBuf, pages: u64, format: Option<&str>) -> PyResult<String> {
    let format = format_of(format)?;
    let input = TraceInput::file(trace).with_format(format);
    let stop = AtomicBool::new(false);
    let dataset = interruptible(py, &stop, || sharemap::partition::write(&input, &output, pages, &()))?;
    json(&dataset)
}

/// The policies a list of specs names (`all`: every one), each with whether it decides a
/// page from its own references alone (so that placing by parts gives the whole trace's
/// answer).
#[pyfunction]
fn policies(spec: &str) -> PyResult<Vec<(String, bool)>> {
    let names: Vec<String> = if spec.trim() == "all" {
        sharemap::registry::rows(sharemap::registry::Kind::Policy).iter().map(|r| r.name.to_string()).collect()
    } else {
        sharemap::Spec::parse_list(spec).map_err(|e| to_py(e.into()))?.into_iter().map(|s| s.to_string()).collect()
    };
    names
        .into_iter()
        .filter(|n| n != "optimal")
        .map(|n| {
            let name = n.split(':').next().unwrap_or_default().to_string();
            let per_page = sharemap::registry::policy_is_per_page(&n)
                .ok_or_else(|| spec_error(format!("policy '{name}': unknown policy")))?;
            Ok((n, per_page))
        })
        .collect()
}

/// A sharing matrix from float64 bytes (threads x threads; the upper triangle is read).
fn matrix_of(matrix: &[u8], threads: usize) -> PyResult<sharemap::SharingMatrix> {
    if matrix.len() != threads.saturating_mul(threads).saturating_mul(8) {
        return Err(setting_error("the matrix bytes do not hold threads x threads float64 values"));
    }
    let mut m = sharemap::SharingMatrix::new(threads);
    for i in 0..threads {
        for j in i + 1..threads {
            let at = (i * threads + j) * 8;
            m.add(i, j, f64::from_le_bytes(matrix[at..at + 8].try_into().expect("8 bytes")));
        }
    }
    Ok(m)
}

/// The heatmap the command line draws of a sharing matrix (float64 bytes), as SVG.
#[pyfunction]
fn heatmap_svg(matrix: &[u8], threads: usize, title: &str) -> PyResult<String> {
    sharemap_report::plot::sharing_heatmap_svg(title, &matrix_of(matrix, threads)?).map_err(to_py)
}

/// The mapping-potential gate of a matrix (float64 bytes, threads x threads) on a machine,
/// weighted by the accesses it was counted over.
#[pyfunction]
fn potential(matrix: &[u8], threads: usize, machine: &str, accesses: u64) -> PyResult<f64> {
    let m = matrix_of(matrix, threads)?;
    let machine = Machine::from_spec(machine).map_err(|e| to_py(e.into()))?;
    Ok(sharemap::Potential::of(&m, &machine, sharemap::CostModel::Latency, Some(accesses)).score)
}

/// sharemap's runtime libraries, beside the `sharemap` binary at `binary` (the command line
/// installed by scripts/install, or a build's target directory).
fn tools(binary: PathBuf) -> sharemap_run::Tools {
    sharemap_run::Tools::beside(&binary)
}

/// A program run or measured (`sharemap run`): the measurement as JSON with the notes the
/// preparation made. Refused before anything runs when a setting is wrong.
#[pyfunction]
#[pyo3(signature = (command, sharemap_binary, thread_maps, mechanisms, placement, sharing, recording, repeat, seed, no_aslr, thp))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    command: Vec<std::ffi::OsString>,
    sharemap_binary: PathBuf,
    thread_maps: Vec<String>,
    mechanisms: Vec<String>,
    placement: String,
    sharing: Option<PathBuf>,
    recording: Option<PathBuf>,
    repeat: usize,
    seed: u64,
    no_aslr: bool,
    thp: &str,
) -> PyResult<String> {
    let thp = sharemap_run::thp::Thp::parse(thp)
        .ok_or_else(|| setting_error(format!("thp '{thp}': expected split, regions or keep")))?;
    let request = sharemap_run::RunRequest {
        command,
        thread_maps,
        sharing,
        placement,
        mechanisms,
        recording,
        repeat,
        seed,
        no_aslr,
        observe: false,
        thp,
    };
    let tools = tools(sharemap_binary);
    let prepared = py.detach(|| {
        let host = Machine::live().map_err(sharemap::Error::from)?;
        request.prepare(&tools, host)
    });
    let prepared = prepared.map_err(to_py)?;
    let report = py.detach(|| prepared.measure(&mut |_, _| {}));
    let report = match report {
        Ok(r) => r,
        Err(sharemap_run::Stopped::Refused(e)) => return Err(to_py(e)),
        Err(sharemap_run::Stopped::Failed(failed)) => {
            let why = match failed.failure {
                sharemap_run::Failure::CannotStart(e) => e.to_string(),
                sharemap_run::Failure::Exited(o) => match o.signal {
                    Some(sig) => format!("killed by signal {sig}"),
                    None => format!("exited with status {}", o.exit),
                },
            };
            return Err(errors::run(format!("run {} of {}: {why}", failed.round + 1, failed.configuration)));
        }
    };
    json(&serde_json::json!({ "report": report, "notes": prepared.notes }))
}

/// A program recorded into a trace (`sharemap record`): what was recorded, as JSON.
#[pyfunction]
#[pyo3(signature = (command, output, sharemap_binary, backend, event, sample, exclude_stack, burst, no_aslr, exclude, format, env))]
#[allow(clippy::too_many_arguments)]
fn record(
    py: Python<'_>,
    command: Vec<std::ffi::OsString>,
    output: PathBuf,
    sharemap_binary: PathBuf,
    backend: String,
    event: String,
    sample: u64,
    exclude_stack: bool,
    burst: Option<String>,
    no_aslr: bool,
    exclude: Option<String>,
    format: Option<&str>,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
) -> PyResult<String> {
    let request = sharemap_run::record::RecordRequest {
        backend,
        event,
        sample,
        exclude_stack,
        burst,
        no_aslr,
        exclude,
        output: output.clone(),
        format: format_of(format)?,
        command,
        env,
        quiet: false,
    };
    let recorder = sharemap_run::record::Recorder::new(request, &tools(sharemap_binary)).map_err(to_py)?;
    let notes = recorder.notes.clone();
    let rec = py.detach(|| recorder.run()).map_err(to_py)?;
    use std::os::unix::process::ExitStatusExt;
    json(&serde_json::json!({
        "path": output,
        "threads": rec.threads,
        "accesses": rec.accesses,
        "bytes": rec.bytes,
        "lost": rec.lost,
        "excluded": rec.excluded,
        "forks": rec.forks,
        "exit": rec.status.code(),
        "signal": rec.status.signal(),
        "notes": notes,
    }))
}

/// The generator's patterns: (name, what it models).
#[pyfunction]
fn patterns() -> Vec<(&'static str, &'static str)> {
    sharemap::generate::PATTERNS.iter().map(|p| (p.name, p.models)).collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Session>()?;
    m.add_function(wrap_pyfunction!(machine, m)?)?;
    m.add_function(wrap_pyfunction!(generate, m)?)?;
    m.add_function(wrap_pyfunction!(patterns, m)?)?;
    m.add_function(wrap_pyfunction!(partition, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(potential, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(heatmap_svg, m)?)?;
    m.add_function(wrap_pyfunction!(record, m)?)?;
    let c = errors::classes(m.py())?;
    for (name, class) in [
        ("Error", &c.error),
        ("TraceError", &c.trace),
        ("MissingFileError", &c.missing_file),
        ("MachineError", &c.machine),
        ("SpecError", &c.spec),
        ("SettingError", &c.setting),
        ("ArgumentTypeError", &c.argument_type),
        ("RunError", &c.run),
    ] {
        m.add(name, class.clone_ref(m.py()))?;
    }
    Ok(())
}
