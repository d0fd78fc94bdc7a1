//! The detector plugin shape: a [`Detector`] sees the trace chunk by chunk and reports the
//! sharing it detected; [`DETECTORS`] lists every one with its source and parameters. A new
//! detector is one new file (its state, its `Detector` impl and its `INFO`) plus one row here.

use crate::{faults, oracle, sammu, sampled, stmap};
use sharemap_core::plugin::{self, Params, Plugin};
use sharemap_core::{PageSize, PageUsage, SharingMatrix, Spec, SpecError};
use sharemap_machine::ThreadPlacement;
use sharemap_trace::{Chunk, Metadata};

/// A sharing detector run over a trace.
pub trait Detector: Send {
    /// The spec that builds this detector again, every parameter spelt out.
    fn spec(&self) -> String;

    /// The next chunk of the trace (accesses and events), in trace order.
    fn chunk(&mut self, chunk: &Chunk);

    /// The sharing detected so far (windows are cut from it).
    fn matrix(&self) -> &SharingMatrix;

    /// What it saw, at the end of the trace.
    fn finish(self: Box<Self>) -> Detection;

    /// The blocks whose sharing it detects: cache lines (or finer) unless it works on pages.
    /// `--compare oracle` compares with the oracle at this granularity.
    fn granularity(&self) -> crate::Granularity {
        crate::Granularity::Line
    }

    /// A fresh detector for a later run of the trace, when this one can read runs of chunks
    /// at the same time and join them (`join`); None when it must see the trace in order.
    fn fork(&self) -> Option<Box<dyn Detector>> {
        None
    }

    /// Adds what `later` (from `fork`, fed the run right after this one's) found, as if this
    /// detector had read that run itself. Only called on detectors that fork.
    fn join(&mut self, later: Box<dyn Detector>) {
        let _ = later;
    }

    /// The oracle state a forked oracle-based detector carries, for `join`.
    fn into_seen(self: Box<Self>) -> Option<crate::oracle::Seen> {
        None
    }
}

/// What a detector saw: its matrix, the page usage of the accesses it saw, how many it saw
/// of how many, and what else it reports.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Detection {
    pub matrix: SharingMatrix,
    pub pages: PageUsage,
    pub seen: u64,
    pub accesses: u64,
    pub report: Option<Report>,
    /// Set by a detector that decides online whether to map (STMap's Algorithm 2).
    #[serde(skip)]
    pub decision: Option<MappingDecision>,
}

/// An online mapping decision: whether the detector's system would remap its threads, and
/// the sharing it knew when it decided (not the whole trace's). A disabled or missing
/// decision leaves the threads where the OS put them.
#[derive(Clone, Debug, PartialEq)]
pub struct MappingDecision {
    /// Remap the threads (with `matrix`) or leave them (the OS mapping).
    pub map: bool,
    /// The sharing matrix as it stood at the decision.
    pub matrix: SharingMatrix,
    /// Why, in words, for the user.
    pub why: String,
}

/// A detector's own report beside its matrix (STMap's decision, SAMMU's activity): a JSON
/// object stored under `key` in summaries, and the lines a terminal shows.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Report {
    pub key: &'static str,
    pub json: serde_json::Value,
    pub lines: Vec<String>,
}

/// What a detector may know before it starts: block sizes and where threads run.
#[derive(Clone, Debug)]
pub struct DetectorContext<'a> {
    /// The trace's cache-line size (a power of two).
    pub line_size: u64,
    pub page_size: PageSize,
    /// Threads the trace says it has (0 when unknown before reading).
    pub threads: usize,
    /// Where threads run (SAMMU's TLBs are per core).
    pub placement: &'a ThreadPlacement,
}

impl<'a> DetectorContext<'a> {
    /// From a trace's metadata. The page size must be valid; a line size that is not a power
    /// of two is rounded up to one.
    pub fn new(meta: &Metadata, placement: &'a ThreadPlacement) -> Result<Self, sharemap_core::PageSizeError> {
        Ok(DetectorContext {
            line_size: meta.line_size.max(1).next_power_of_two(),
            page_size: PageSize::new(meta.page_size)?,
            threads: meta.threads as usize,
            placement,
        })
    }
}

/// A registry row: how `sharemap detectors` lists a detector and how its parameters build it.
pub type DetectorInfo = Plugin<BuildDetector>;

/// How a registry row builds its detector from its parameters.
pub type BuildDetector = fn(&Params, &DetectorContext) -> Result<Box<dyn Detector>, SpecError>;

/// The registry's name in errors.
pub const KIND: &str = "detector";

/// Every detector, in the order `sharemap detectors` lists them.
pub static DETECTORS: &[DetectorInfo] = &[oracle::INFO, sampled::INFO, faults::INFO, stmap::INFO, sammu::INFO];

/// "unknown detector 'x' (did you mean 'y'? detectors: ...)".
fn unknown(name: &str) -> String {
    let hint = sharemap_core::did_you_mean(name, DETECTORS.iter().map(|d| d.name));
    format!("unknown detector '{name}' ({hint}detectors: {})", plugin::names(DETECTORS))
}

pub fn find(name: &str) -> Option<&'static DetectorInfo> {
    plugin::find(DETECTORS, name)
}

/// Parses a spec and checks its name and option keys (values are checked by `build`).
pub fn parse(text: &str) -> Result<Spec, SpecError> {
    let spec = Spec::parse(text).map_err(|e| SpecError { kind: KIND, ..e })?;
    let info =
        find(&spec.name).ok_or_else(|| SpecError { kind: KIND, spec: spec.to_string(), what: unknown(&spec.name) })?;
    spec.check_keys(KIND, info.params)?;
    Ok(spec)
}

/// The parameters a spec sets, checked against its detector's table.
pub fn params(spec: &Spec) -> Result<Params, SpecError> {
    let info =
        find(&spec.name).ok_or_else(|| SpecError { kind: KIND, spec: spec.to_string(), what: unknown(&spec.name) })?;
    info.params(KIND, &[&spec.options])
}

/// Builds the detector a spec names.
pub fn build(spec: &Spec, ctx: &DetectorContext) -> Result<Box<dyn Detector>, SpecError> {
    let params = params(spec)?;
    let info = find(&spec.name).expect("checked by params");
    (info.build)(&params, ctx)
}

/// `matrix` cut or padded to `threads` rows.
pub fn fit(matrix: &SharingMatrix, threads: usize) -> SharingMatrix {
    let mut out = SharingMatrix::new(threads);
    let k = matrix.threads().min(threads);
    for i in 0..k {
        for j in i + 1..k {
            out.add(i, j, matrix.get(i, j));
        }
    }
    out
}
