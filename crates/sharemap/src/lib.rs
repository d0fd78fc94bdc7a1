//! sharemap as a library: the one entry point for programs, the command line and Python.
//!
//! A [`Session`] holds a trace ([`TraceInput`]: a file in any format or a trace in memory,
//! address ranges left out), the [`Machine`] it is studied on and a seed; each analysis is
//! a method taking a typed request and giving a result that serialises with serde:
//!
//! ```
//! use sharemap::trace::{Access, MemoryTrace};
//! use sharemap::{Machine, PlaceRequest, Session, TraceInput};
//! // Threads 0-1 share lines 0..150, threads 2-3 lines 150..300.
//! let line = |i: u64| i / 4 % 150 + 150 * (i % 4 / 2);
//! let trace = MemoryTrace::from_accesses((0..4000u64).map(|i| Access::write((i % 4) as u32, 64 * line(i), 8)));
//! let session = Session::new(TraceInput::memory(trace), Machine::from_spec("numa:2 pu:2").unwrap(), 1);
//! let sharing = session.sharing().unwrap();
//! assert!(sharing.get(0, 1) > 0.0 && sharing.get(0, 2) == 0.0);
//! let placement = session.place(&PlaceRequest::new("first-touch,round-robin")).unwrap();
//! assert_eq!(placement.evaluation.results[0].name, "optimal");
//! ```
//!
//! Errors are [`Error`]s with an [`ErrorKind`]; the actors that change real runs (run,
//! the guest, recording) are in the `sharemap-run` crate, built on this one.

pub mod advise;
pub mod analyze;
mod error;
pub mod fidelity;
pub mod filter;
pub mod generate;
mod input;
pub mod map;
mod observer;
#[cfg(feature = "parquet")]
pub mod partition;
pub mod place;
pub mod plan;
pub mod registry;
pub mod reproduce;
mod session;
pub mod simulate;
mod situation;
pub mod sweep;
pub mod trace;

pub use advise::{Advice, AdviseRequest};
pub use analyze::{Accuracy, Analysis, AnalyzeRequest};
pub use error::{Error, ErrorKind, Setting};
pub use fidelity::Fidelity;
pub use filter::{Filter, Sensitivity};
pub use input::{TraceInput, Truncation, WindowInfo};
pub use map::{CostModel, MapRequest, Mapped, Mapping, Potential, Sharing as LoadedSharing};
pub use observer::Observer;
pub use place::PolicySet;
pub use place::{PlaceRequest, Placement, Prepared};
pub use session::Session;
pub use sharemap_trace::window::{FirstTouch, Selection};
pub use simulate::{MechanismStart, SimulateRequest, Simulation};
pub use situation::{DEFAULT_REFS_PER_MS, Setup, Sharing, Situation, ThreadMap, TimeScale, meminfo, parse_cost};
pub use sweep::{SweepPoint, SweepRequest, SweepResult, Vary};

pub use sharemap_core::{PageSize, PageUsage, SharingMatrix, Spec, did_you_mean, grouped};

pub use sharemap_detect::Detection;
/// What is shared, by name: `analyze`'s data objects, line classes and code.
pub mod shared {
    pub use sharemap_detect::shared::{
        ByClass, CodeCount, LineClass, ObjectKind, SharedObject, SharingCode, WORDS, WhatIsShared,
    };
}
pub use sharemap_machine::{CostParams, Machine, ThreadPlacement};

/// Machines: hwloc synthetic strings and XML, the presets of the seed papers' machines.
pub mod machine {
    pub use sharemap_machine::presets::{PRESETS, Preset};
    pub use sharemap_machine::{
        ASSUMED_GBPS_PER_CORE, ASSUMED_LINK_SHARE, Bandwidth, BandwidthOrigin, CostParams, Machine, MachineError,
    };
}

pub type Result<T> = std::result::Result<T, Error>;

/// Totals, per-thread counts and page sharing of a trace, in one pass.
///
/// ```
/// use sharemap::trace::{Access, MemoryTrace};
/// let input = sharemap::TraceInput::memory(MemoryTrace::from_accesses([Access::write(0, 0x1000, 8), Access::read(1, 0x1008, 8)]));
/// let s = sharemap::info(&input, &()).unwrap();
/// assert_eq!((s.accesses, s.threads, s.pages, s.sharing.shared_pages), (2, 2, 1, 1));
/// ```
pub fn info(input: &TraceInput, observer: &dyn Observer) -> Result<trace::TraceSummary> {
    let mut source = input.open()?;
    let total = source.access_count_hint();
    // Chunks are summarised in any order: the count read so far is kept here.
    let read = std::sync::atomic::AtomicU64::new(0);
    Ok(observer::pass(observer, "info", total, |_| {
        sharemap_trace::summary::summarize(source.as_mut(), |n| {
            let done = read.fetch_add(n, std::sync::atomic::Ordering::Relaxed) + n;
            observer.read(done);
        })
    })?)
}

/// What `convert` wrote.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Converted {
    pub accesses: u64,
    pub bytes: u64,
    /// Events the output format cannot hold (CSV keeps accesses only).
    pub dropped_events: u64,
}

/// Writes a trace in another format (by the output's extension unless given): the ranges
/// the input leaves out are left out, and noted in the output's metadata.
pub fn convert(
    input: &TraceInput,
    output: &std::path::Path,
    format: Option<trace::Format>,
    observer: &dyn Observer,
) -> Result<Converted> {
    use sharemap_trace::{Chunk, Source, TraceWriter};
    let mut source = input.open()?;
    let mut meta = source.metadata().clone();
    let native = input.path().is_some_and(|_| input.reader().is_ok_and(|r| r.format() == trace::Format::Native));
    if !native && meta.source.kind.is_empty() {
        meta.source = Source { kind: "import".into(), name: input.name(), ..Source::default() };
    }
    if let Some(text) = input.exclusion() {
        meta.source.params.insert("excluded".into(), text.to_string());
    }
    let mut writer = TraceWriter::create(output, format, meta)?;
    let total = source.access_count_hint();
    observer::pass(observer, "convert", total, |progress| -> Result<()> {
        let mut chunk = Chunk::default();
        let mut done = 0;
        while source.next_chunk(&mut chunk)? {
            done += chunk.accesses.len() as u64;
            progress(done);
            writer.chunk(&mut chunk)?;
        }
        Ok(())
    })?;
    writer.set_threads(source.metadata().threads, source.metadata().os_tids.clone());
    drop(source);
    let report = writer.finish()?;
    Ok(Converted { accesses: report.accesses, bytes: report.bytes, dropped_events: report.dropped_events })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Access, MemoryTrace};

    /// Every analysis's result serialises, with the fields a program reads.
    #[test]
    fn results_serialise() {
        // Threads 0-1 share lines 0..150, threads 2-3 lines 150..300.
        let line = |i: u64| i / 4 % 150 + 150 * (i % 4 / 2);
        let accesses: Vec<Access> = (0..4000u64).map(|i| Access::write((i % 4) as u32, 64 * line(i), 8)).collect();
        let input = TraceInput::memory(MemoryTrace::from_accesses(accesses.iter().copied()));
        let machine = Machine::from_spec("numa:2 pu:2").unwrap();
        let session = Session::new(input, machine, 1);
        let request = AnalyzeRequest {
            detector: "oracle".into(),
            compare: Some("sampled:every=2".into()),
            window: 1000,
            ..Default::default()
        };
        let a = serde_json::to_value(session.analyze(&request).unwrap()).unwrap();
        assert_eq!(a["detection"]["matrix"]["threads"], 4);
        assert_eq!(a["detection"]["pages"].as_array().unwrap().len(), 5);
        assert_eq!(a["windows"].as_array().unwrap().len(), 4);
        assert!(a["accuracy"]["correlation"].is_number());
        let p = serde_json::to_value(session.place(&PlaceRequest::new("first-touch")).unwrap()).unwrap();
        assert_eq!(p["accesses"], 4000);
        assert_eq!(p["evaluation"]["results"][0]["name"], "optimal");
        assert!(p["situation"]["costs"]["r"].is_number());
        let request = MapRequest { cost_model: CostModel::Hops, ..Default::default() };
        let mapped = session.map(&request).unwrap();
        assert_eq!(serde_json::to_value(&mapped.mappings).unwrap()[0]["mapping"].as_array().unwrap().len(), 4);
    }
}
