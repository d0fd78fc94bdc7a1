//! The entry point of real runs: a `RunRequest` (a program, the thread maps, the placement
//! and the mechanisms to measure, how often) is checked and turned into configurations once
//! (`prepare`), then run once with the program's output passed through (`PreparedRun::once`)
//! or measured, configurations interleaved against the `os` baseline
//! (`PreparedRun::measure` → `RunReport`). The command line and Python both come here.

use crate::mechanism::{MechanismContext, configuration, expand};
use crate::thp::{HostThp, Thp, ThpHandling};
use crate::{
    Configuration, ConfigurationResult, DataPlacement, FailedRun, MemoryPolicy, Pinning, RunOutcome, Runner, Tools,
};
use serde::Serialize;
use sharemap::{Error, ErrorKind, Result, SharingMatrix, ThreadMap, TraceInput};
use sharemap_machine::Machine;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The most runs per configuration a measurement takes.
pub const MAX_REPEAT: usize = 1_000_000;

/// A run or a measurement of a program, as `sharemap run` takes it.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// The program (looked up in PATH without a slash) and its arguments.
    pub command: Vec<OsString>,
    /// Where the threads run, each a configuration: `os`, `identity`, an algorithm, PUs,
    /// a file of them, or `trace:FILE` / `matrix:FILE` (the default algorithm on that
    /// sharing).
    pub thread_maps: Vec<String>,
    /// The sharing an algorithm of `thread_maps` maps onto the host: a trace or a matrix file.
    pub sharing: Option<PathBuf>,
    /// Where pages go: `first-touch`, `interleave`, `bind:NODE`, a plan file,
    /// `optimal:TRACE` or `marathe:TRACE`.
    pub placement: String,
    /// Mechanisms to measure against os (comma lists; `all`: those that apply here).
    pub mechanisms: Vec<String>,
    /// A recording of the program, for the mechanisms that need one.
    pub recording: Option<PathBuf>,
    /// Runs per configuration, interleaved.
    pub repeat: usize,
    /// Seed of the random mappings.
    pub seed: u64,
    /// Address-space randomisation off (as the recording was made).
    pub no_aslr: bool,
    /// Trace the runs for where threads ran and pages lay at the end.
    pub observe: bool,
    /// What a plan does about transparent huge pages.
    pub thp: Thp,
}

impl RunRequest {
    /// The program run once, unpinned, with its pages where first touch puts them.
    pub fn new(command: Vec<OsString>) -> RunRequest {
        RunRequest {
            command,
            thread_maps: vec!["os".into()],
            sharing: None,
            placement: "first-touch".into(),
            mechanisms: Vec::new(),
            recording: None,
            repeat: 1,
            seed: 1,
            no_aslr: false,
            observe: false,
            thp: Thp::Split,
        }
    }

    /// Whether this is a measurement (several runs or configurations, the program's output
    /// discarded, `os` first as the baseline) rather than one run.
    pub fn measuring(&self) -> bool {
        self.repeat > 1 || self.thread_maps().len() > 1 || !self.mechanisms.is_empty()
    }

    /// The thread maps, a comma list of mappings counting as one each (`os,compact`, as the
    /// other lists are written; a list of PU numbers stays one map).
    pub fn thread_maps(&self) -> Vec<String> {
        self.thread_maps.iter().flat_map(|m| sharemap::ThreadMap::split_list(m)).collect()
    }

    /// Every check and every configuration, before anything runs: the program, the
    /// placement, the sharing, each thread map and mechanism on `host` (normally
    /// `Machine::live()`), with the runtime libraries of `tools`.
    pub fn prepare(&self, tools: &Tools, host: Machine) -> Result<PreparedRun> {
        if self.repeat == 0 || self.repeat > MAX_REPEAT {
            return Err(Error::new(
                ErrorKind::Measurement,
                format!("expected a number of runs from 1 to {MAX_REPEAT}"),
            )
            .in_setting("repeat", self.repeat.to_string()));
        }
        let library = tools.existing("libsharemap_pin.so")?;
        let (program, program_args) =
            self.command.split_first().ok_or_else(|| Error::new(ErrorKind::Program, "no program given after --"))?;
        let program = crate::resolve_program(Path::new(program))?;
        let placement = DataPlacement::parse(&self.placement, &host)?;
        let mut notes = aslr_notes(self);
        let sharing = match &self.sharing {
            Some(path) => Some(load_sharing(path, &mut notes).map_err(|e| e.in_setting("sharing", path_text(path)))?),
            None => None,
        };
        let mut configs = self.thread_map_configurations(&host, &placement, sharing.as_ref(), &mut notes)?;
        self.add_mechanisms(&host, &mut configs, &mut notes)?;
        let pins = configs.iter().any(|c| c.pinning != Pinning::Os || c.memory != MemoryPolicy::FirstTouch);
        if pins && crate::is_static(&program) {
            return Err(Error::new(
                ErrorKind::Program,
                format!(
                    "{} is statically linked: the pinning library cannot be preloaded into it (link it dynamically)",
                    program.display()
                ),
            ));
        }
        let plans = configs.iter().any(|c| c.plan.is_some());
        let thp = ThpHandling::new(self.thp, HostThp::read(), plans);
        if let Some(t) = &thp {
            notes.push(format!("note: {}", t.describe()));
        }
        let measuring = self.measuring();
        let runner = Runner {
            program,
            args: program_args.to_vec(),
            library,
            host,
            show_output: !measuring,
            no_aslr: self.no_aslr,
            observe: self.observe,
            traced: crate::needs_tracing(self.observe, &configs),
            plan_interval: std::time::Duration::from_millis(1),
            thp,
        };
        Ok(PreparedRun { runner, configs, repeat: self.repeat, measuring, notes })
    }

    /// A configuration per thread map, `os` first when measuring; each with the placement
    /// resolved for its threads (a plan from a recording depends on where they run).
    fn thread_map_configurations(
        &self,
        host: &Machine,
        placement: &DataPlacement,
        sharing: Option<&SharingMatrix>,
        notes: &mut Vec<String>,
    ) -> Result<Vec<Configuration>> {
        let mut names: Vec<String> = self.thread_maps().iter().map(|s| s.trim().to_string()).collect();
        if !self.mechanisms.is_empty() && names == ["os"] {
            // The default thread map stands aside for the mechanisms (`os` among them or first).
            names.clear();
        }
        if self.measuring() && !names.iter().any(|n| n == "os") {
            // Everything is normalised to the OS's own mapping.
            names.insert(0, "os".into());
        }
        let mut configs = Vec::new();
        for name in &names {
            let pinning = self.pinning_of(name, host, sharing, notes).map_err(|e| e.in_setting("thread_maps", name))?;
            let (memory, plan) =
                placement.resolve(&pinning, host).map_err(|e| e.in_setting("placement", &self.placement))?;
            let mut config = Configuration::fixed(name, pinning, memory);
            config.plan = plan;
            configs.push(config);
        }
        Ok(configs)
    }

    fn pinning_of(
        &self,
        name: &str,
        host: &Machine,
        sharing: Option<&SharingMatrix>,
        notes: &mut Vec<String>,
    ) -> Result<Pinning> {
        if name == "os" {
            return Ok(Pinning::Os);
        }
        if let Some(path) = name.strip_prefix("trace:").or_else(|| name.strip_prefix("matrix:")) {
            // The default algorithm on a recording's (or a matrix file's) sharing, for this host.
            let matrix = load_sharing(Path::new(path), notes)?;
            return crate::pinning(&ThreadMap::Algorithm("sharemap".into()), host, Some(&matrix), self.seed);
        }
        if let Some((made_for, synthetic)) = ThreadMap::made_for(name)
            && synthetic.is_some()
            && synthetic != host.synthetic()
        {
            return Err(Error::new(
                ErrorKind::ThreadMap,
                format!(
                    "{name}: its mapping was made for {made_for}, not this host: its PU numbers are that machine's (make one for this host with `sharemap map TRACE --machine live --json`)"
                ),
            ));
        }
        crate::pinning(&ThreadMap::parse(name)?, host, sharing, self.seed)
    }

    /// The mechanisms' configurations after the thread maps' (`all`: those that apply here,
    /// the others named in a note), the baseline first.
    fn add_mechanisms(&self, host: &Machine, configs: &mut Vec<Configuration>, notes: &mut Vec<String>) -> Result<()> {
        let ctx = MechanismContext { host, recording: self.recording.as_deref(), seed: self.seed };
        let expansion = expand(&self.mechanisms, &ctx).map_err(|e| e.in_setting("mechanism_lists", ""))?;
        if !expansion.left_out.is_empty() {
            notes.push(format!(
                "note: all: {} left out (they need {})",
                expansion.left_out.join(", "),
                if self.recording.is_none() { "--recording, a NUMA host or root" } else { "a NUMA host or root" }
            ));
        }
        for spec in expansion.specs {
            if configs.iter().any(|c| c.name == spec) {
                continue;
            }
            configs.push(configuration(&spec, &ctx).map_err(|e| e.in_setting("mechanisms", &spec))?);
        }
        if self.measuring() && !configs.iter().any(|c| c.name == "os") {
            configs.insert(0, Configuration::fixed("os", Pinning::Os, MemoryPolicy::FirstTouch));
        } else if let Some(i) = configs.iter().position(|c| c.name == "os") {
            // The baseline first: every configuration is normalised to it.
            let os = configs.remove(i);
            configs.insert(0, os);
        }
        Ok(())
    }
}

fn path_text(path: &Path) -> String {
    path.display().to_string()
}

/// A trace's oracle matrix or a matrix file's, with a warning when the trace is truncated.
fn load_sharing(path: &Path, notes: &mut Vec<String>) -> Result<SharingMatrix> {
    let input = TraceInput::file(path);
    if !sharemap::map::is_matrix_file(&input)
        && let Some(t) = input.truncation()?
    {
        notes.push(format!(
            "warning: {} is truncated: data ends at byte {}, after {} complete chunks ({} accesses); reading those",
            input.name(),
            t.at,
            t.chunks,
            t.accesses
        ));
    }
    Ok(sharemap::map::load_sharing(&input, &())?.matrix)
}

/// A recording's addresses hold in a run only when both were made with address
/// randomisation off: a note for each recording this run reads by address (the mechanisms'
/// recording, an `optimal:`/`marathe:` placement) whose setting differs from the run's.
fn aslr_notes(request: &RunRequest) -> Vec<String> {
    let by_address =
        request.recording.iter().cloned().chain(
            ["optimal:", "marathe:"].iter().filter_map(|p| request.placement.strip_prefix(p)).map(PathBuf::from),
        );
    let mut notes = Vec::new();
    for path in by_address {
        let Ok(reader) = sharemap::trace::TraceReader::open(&path, None) else { continue };
        let source = &sharemap::trace::TraceSource::metadata(&reader).source;
        if !["tracer", "valgrind", "perf"].contains(&source.kind.as_str()) {
            continue; // generated or imported: no address space of a run
        }
        let recorded_off = source.params.get("aslr").is_some_and(|v| v == "off");
        match (recorded_off, request.no_aslr) {
            (false, true) => notes.push(format!(
                "note: {} was recorded with address randomisation on: its addresses need not match this --no-aslr run's (record it with `sharemap record --no-aslr`)",
                path.display()
            )),
            (true, false) => notes.push(format!(
                "note: {} was recorded with --no-aslr but this run randomises addresses: add --no-aslr",
                path.display()
            )),
            _ => {}
        }
    }
    notes
}

/// A request checked and configured, ready to run.
#[derive(Debug)]
pub struct PreparedRun {
    pub runner: Runner,
    /// The configurations in the order they run, the baseline first when measuring.
    pub configs: Vec<Configuration>,
    pub repeat: usize,
    pub measuring: bool,
    /// What the preparation noticed ("note: ...", "warning: ..."), for the caller to show.
    pub notes: Vec<String>,
}

/// Why a measurement stopped.
#[derive(Debug)]
pub enum Stopped {
    /// Pinning or placement did not take: the configurations would not be what they say.
    Refused(Error),
    /// A run could not start, or the program failed.
    Failed(Box<FailedRun>),
}

/// A measurement's outcome: each configuration's runs and statistics, in `configs` order.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub results: Vec<ConfigurationResult>,
    pub repeat: usize,
    /// Why no hardware counters were counted, when none were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_counters: Option<String>,
    /// Configurations that pinned several threads to one CPU, each said once.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub oversubscribed: Vec<String>,
}

/// Several threads pinned to one CPU, said in one line: a pinned thread cannot move to an
/// idle CPU, so the threads of an oversubscribed CPU take turns where the OS lets them float.
pub fn oversubscription(config: &Configuration, outcome: &RunOutcome) -> Option<String> {
    let mut cpus: Vec<usize> = outcome.pinned.iter().map(|&(_, cpu)| cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    (outcome.pinned.len() > cpus.len()).then(|| {
        format!(
            "warning: {}: {} threads pinned on {}: threads sharing a CPU take turns on it while others may idle (8 OpenMP threads pinned one per PU on 2 PUs ran NPB MG 1.8x slower than floating); run at most {}, or leave them to the OS",
            config.name,
            outcome.pinned.len(),
            if cpus.len() == 1 { "1 CPU".to_string() } else { format!("{} CPUs", cpus.len()) },
            if cpus.len() == 1 { "1 thread".to_string() } else { format!("{} threads", cpus.len()) },
        )
    })
}

impl PreparedRun {
    /// The first configuration once, the program's output passed through; refused when the
    /// pinning or the memory policy did not take.
    pub fn once(&self) -> Result<RunOutcome> {
        let config = &self.configs[0];
        let outcome = self.runner.run(config, 0, None)?;
        match problem(config, &outcome) {
            Some(p) => Err(Error::new(ErrorKind::Program, p)),
            None => Ok(outcome),
        }
    }

    /// Every configuration `repeat` times, interleaved; `progress` hears of each run as it
    /// ends (runs done, runs in all).
    pub fn measure(&self, progress: &mut dyn FnMut(usize, usize)) -> std::result::Result<RunReport, Stopped> {
        let total = self.configs.len() * self.repeat;
        let mut done = 0;
        let mut refused = None;
        let mut no_counters = None;
        let mut oversubscribed: Vec<String> = Vec::new();
        let results = crate::measure(&self.runner, &self.configs, self.repeat, &mut |config, _, outcome| {
            done += 1;
            progress(done, total);
            no_counters = no_counters.take().or_else(|| crate::counters_unavailable(outcome));
            if let Some(line) = oversubscription(config, outcome)
                && !oversubscribed.contains(&line)
            {
                oversubscribed.push(line);
            }
            if refused.is_none() {
                refused = problem(config, outcome);
            }
        });
        if let Some(p) = refused {
            return Err(Stopped::Refused(Error::new(ErrorKind::Program, p)));
        }
        let results = results.map_err(Stopped::Failed)?;
        Ok(RunReport { results, repeat: self.repeat, no_counters, oversubscribed })
    }
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
