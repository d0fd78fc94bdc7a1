//! One error type for the facade and the actors built on it: a kind a program can match on
//! (the command line turns each kind into the flag it came from), and words that name no
//! command-line flag.

use sharemap_core::{PageSizeError, SpecError};
use sharemap_detect::DetectError;
use sharemap_machine::MachineError;
use sharemap_machine::PlacementError;
use sharemap_trace::TraceError;
use std::fmt;

/// What a failure is about. New kinds may come (`#[non_exhaustive]`: a program matching on
/// kinds keeps a catch-all arm); the command line turns each into the flag it came from in
/// its flags.rs alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading or writing a trace (exit status 2 for a corrupt one).
    Trace,
    /// A machine description that cannot be read (an unknown name, a bad hwloc string or XML).
    Machine,
    /// A machine the analysis cannot model (too many nodes, caches the simulator cannot hold).
    MachineModel,
    /// A mechanism spec (`name:key=value`) that does not parse or names an unknown option.
    Spec,
    PageSize,
    /// Where threads run: a thread map, or what a mapping algorithm was given.
    ThreadMap,
    /// A sharing matrix given to map.
    Sharing,
    /// The cost parameters r, R, g, G.
    Cost,
    /// References per millisecond of the traced run.
    TimeScale,
    MemoryBudget,
    /// A placement policy, a policy's option in its spec, or a `policy.key=value` setting
    /// (`Error::setting` says which: `settings`).
    Policy,
    /// How a detection runs beyond the detector's spec: its windows (setting `window`).
    Detection,
    /// A sweep: the parameter it varies (setting `vary`) and its values (`values`).
    Sweep,
    /// A dataset partitioned by page range (setting `pages`).
    Partition,
    /// The perturbation filters.
    Filters,
    /// A mapping algorithm that cannot map (too many threads for exhaustive search, ...).
    Mapping,
    /// How a mapping prices the machine's levels.
    CostModel,
    /// A mechanism of the simulator or of real runs.
    Mechanism,
    /// A mechanism that needs a recording of the program, and none was given.
    NeedsRecording,
    /// The program to run or record.
    Program,
    /// How a measurement runs (its number of runs).
    Measurement,
    /// Recording a program (its backend, options, exclusions).
    Record,
    /// Building a program with sharemap's tracer or STM (`sharemap cc`): its options, the
    /// compiler.
    Build,
    /// Where a real run's pages go.
    DataPlacement,
    /// The multi-node guest.
    Guest,
    GuestKernel,
    /// Address ranges to leave out of a trace.
    Exclude,
    /// The part of a trace to read: its region of interest, a phase, a range of positions.
    Window,
    /// A generator's pattern or parameters.
    Pattern,
    /// A claim `reproduce` does not know.
    Claim,
    /// A results file that cannot be read (a runs CSV).
    Results,
    /// An analysis that needs every access, given a sampled trace (`--sample`, `--burst`).
    SampledTrace,
    /// A pass stopped by its caller (Ctrl-C in Python).
    Interrupted,
    /// Any other input or output.
    Io,
}

impl ErrorKind {
    /// The words an error of this kind starts with.
    fn what(self) -> &'static str {
        match self {
            ErrorKind::Trace => "trace",
            ErrorKind::Machine | ErrorKind::MachineModel => "machine",
            ErrorKind::Spec => "spec",
            ErrorKind::PageSize => "page size",
            ErrorKind::ThreadMap => "thread placement",
            ErrorKind::Sharing => "sharing matrix",
            ErrorKind::Cost => "cost parameters",
            ErrorKind::TimeScale => "references per ms",
            ErrorKind::MemoryBudget => "memory budget",
            ErrorKind::Policy => "policy",
            ErrorKind::Detection => "detection",
            ErrorKind::Sweep => "sweep",
            ErrorKind::Partition => "partition",
            ErrorKind::Filters => "filters",
            ErrorKind::Mapping => "mapping",
            ErrorKind::CostModel => "cost model",
            ErrorKind::Mechanism | ErrorKind::NeedsRecording => "mechanism",
            ErrorKind::Program => "program",
            ErrorKind::Measurement => "measurement",
            ErrorKind::Record => "record",
            ErrorKind::Build => "build",
            ErrorKind::DataPlacement => "data placement",
            ErrorKind::Guest => "guest",
            ErrorKind::GuestKernel => "guest kernel",
            ErrorKind::Exclude => "excluded ranges",
            ErrorKind::Window => "window",
            ErrorKind::Pattern => "pattern",
            ErrorKind::Claim => "claim",
            ErrorKind::Results => "results",
            ErrorKind::SampledTrace => "sampled trace",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::Io => "input/output",
        }
    }
}

/// A failure: its kind and what went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub struct Error {
    kind: ErrorKind,
    inner: Inner,
    /// The setting of a request it came from, when the kind alone does not say.
    setting: Option<Setting>,
}

/// A setting of a request, as the request named and gave it: the field (`"mechanisms"`)
/// and the value among its values (`"oracle"`). A caller words it its own way (the command
/// line as the flag of that field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub field: &'static str,
    pub given: String,
}

#[derive(Debug)]
enum Inner {
    /// In words, after the kind's.
    Why(String),
    Trace(TraceError),
    Machine(MachineError),
    Spec(SpecError),
    PageSize(PageSizeError),
    Io(std::io::Error),
}

impl Error {
    /// An error of `kind`, `why` saying what is wrong ("PU 9 does not exist").
    pub fn new(kind: ErrorKind, why: impl Into<String>) -> Error {
        Error { kind, inner: Inner::Why(why.into()), setting: None }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The same error, said of one setting of a request: its `field` and the value `given`
    /// (`"oracle"` of the mechanisms `os,oracle`).
    pub fn in_setting(mut self, field: &'static str, given: impl Into<String>) -> Error {
        self.setting = Some(Setting { field, given: given.into() });
        self
    }

    /// The setting it came from, when the kind alone does not say.
    pub fn setting(&self) -> Option<&Setting> {
        self.setting.as_ref()
    }

    /// What is wrong without the kind's words: what a caller prints after naming where the
    /// setting came from (`--thread-map: PU 9 does not exist`).
    pub fn why(&self) -> String {
        match &self.inner {
            Inner::Why(why) => why.clone(),
            _ => self.to_string(),
        }
    }

    /// The trace error behind it, when reading or writing a trace failed.
    pub fn trace_error(&self) -> Option<&TraceError> {
        match &self.inner {
            Inner::Trace(t) => Some(t),
            _ => None,
        }
    }

    /// The page size refused, when it is a page size error.
    pub fn page_size(&self) -> Option<u64> {
        match &self.inner {
            Inner::PageSize(p) => Some(p.0),
            _ => None,
        }
    }

    /// The command line's exit status: 2 for a corrupt trace, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match &self.inner {
            Inner::Trace(t) => t.exit_code(),
            _ => 1,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Inner::Why(why) => write!(f, "{}: {why}", self.kind.what()),
            Inner::Trace(e) => e.fmt(f),
            Inner::Machine(e) => e.fmt(f),
            Inner::Spec(e) => e.fmt(f),
            Inner::PageSize(e) => e.fmt(f),
            Inner::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.inner {
            Inner::Why(_) => None,
            Inner::Trace(e) => std::error::Error::source(e),
            Inner::Machine(e) => Some(e),
            Inner::Spec(e) => Some(e),
            Inner::PageSize(e) => Some(e),
            Inner::Io(e) => Some(e),
        }
    }
}

impl From<TraceError> for Error {
    fn from(e: TraceError) -> Error {
        let kind = if matches!(e, TraceError::Interrupted) { ErrorKind::Interrupted } else { ErrorKind::Trace };
        Error { kind, inner: Inner::Trace(e), setting: None }
    }
}

impl From<sharemap_core::output::OutputError> for Error {
    fn from(e: sharemap_core::output::OutputError) -> Error {
        Error::from(TraceError::from(e))
    }
}

impl From<MachineError> for Error {
    fn from(e: MachineError) -> Error {
        Error { kind: ErrorKind::Machine, inner: Inner::Machine(e), setting: None }
    }
}

impl From<SpecError> for Error {
    fn from(e: SpecError) -> Error {
        Error { kind: ErrorKind::Spec, inner: Inner::Spec(e), setting: None }
    }
}

impl From<PageSizeError> for Error {
    fn from(e: PageSizeError) -> Error {
        Error { kind: ErrorKind::PageSize, inner: Inner::PageSize(e), setting: None }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error { kind: ErrorKind::Io, inner: Inner::Io(e), setting: None }
    }
}

impl From<DetectError> for Error {
    fn from(e: DetectError) -> Error {
        match e {
            DetectError::Spec(s) => s.into(),
            DetectError::Trace(t) => t.into(),
            DetectError::PageSize(p) => p.into(),
        }
    }
}

impl From<PlacementError> for Error {
    fn from(e: PlacementError) -> Error {
        Error::new(ErrorKind::ThreadMap, e.to_string())
    }
}
