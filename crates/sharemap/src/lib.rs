//! sharemap as a library: the one entry point for programs (and the command line).
//!
//! Open a trace in any format, describe the situation once (machine, cost parameters,
//! where threads run, page size, time scale, seed) in a [`Setup`], resolve it to a validated
//! [`Situation`], and run analyses on it:
//!
//! ```
//! use sharemap::{Setup, Situation};
//! use sharemap::trace::{Access, MemoryTrace};
//!
//! // Two threads on different NUMA nodes take turns writing one page.
//! let mut trace = MemoryTrace::from_accesses((0..1000u64).map(|i| Access::write((i / 100 % 2) as u32, 0x1000, 8)));
//! let setup = Setup { machine: "numa:2 pu:1".into(), ..Setup::default() };
//! let situation = Situation::resolve(&setup, &mut trace).unwrap();
//! trace.rewind();
//! let placement = sharemap::place(&mut trace, &situation, "first-touch", &Default::default()).unwrap();
//! let optimal = &placement.evaluation.results[0];
//! let first_touch = &placement.evaluation.results[1];
//! assert_eq!(optimal.name, "optimal");
//! assert!(optimal.cost <= first_touch.cost);
//! ```

pub mod analyze;
mod error;
pub mod filter;
pub mod map;
mod place;
pub mod plan;
pub mod simulate;
mod situation;
pub mod sweep;

pub use analyze::{Analysis, AnalyzeRequest, analyze};
pub use error::{Error, ErrorKind};
pub use map::{Mapped, map};
pub use place::{PlaceOptions, Placement, Prepared, check_bind, place, policies, prepare};
pub use situation::{DEFAULT_REFS_PER_MS, Setup, Sharing, Situation, ThreadMap, TimeScale, parse_cost};

pub use sharemap_core as core;
pub use sharemap_detect as detect;
pub use sharemap_machine as machine;
pub use sharemap_mapping as mapping;
pub use sharemap_placement as placement;
pub use sharemap_sim as sim;
pub use sharemap_sources as sources;
pub use sharemap_trace as trace;

pub type Result<T> = std::result::Result<T, Error>;

/// Opens a trace file in any format: `format` names it, else the content or the extension
/// tells.
pub fn open(path: &std::path::Path, format: Option<sharemap_trace::Format>) -> Result<sharemap_trace::TraceReader> {
    Ok(sharemap_trace::TraceReader::open(path, format)?)
}

/// Totals, per-thread counts and page sharing of a trace, in one pass.
///
/// ```
/// use sharemap::trace::{Access, MemoryTrace};
/// let mut trace = MemoryTrace::from_accesses([Access::write(0, 0x1000, 8), Access::read(1, 0x1008, 8)]);
/// let s = sharemap::info(&mut trace).unwrap();
/// assert_eq!((s.accesses, s.threads, s.pages, s.sharing.shared_pages), (2, 2, 1, 1));
/// ```
pub fn info(trace: &mut dyn sharemap_trace::TraceSource) -> Result<sharemap_trace::summary::TraceSummary> {
    Ok(sharemap_trace::summary::summarize(trace, |_| {})?)
}

/// Runs one detector (a spec such as `oracle` or `sammu:l1=32`) over a trace, threads on the
/// machine's PUs in order.
///
/// ```
/// use sharemap::trace::{Access, MemoryTrace};
/// // Threads 0 and 1 take turns on one cache line; thread 2 works alone.
/// let mut trace = MemoryTrace::from_accesses(
///     (0..100u64).map(|i| Access::read((i % 2) as u32, 0x40, 8)).chain([Access::read(2, 0x9000, 8)]),
/// );
/// let machine = sharemap::machine::Machine::from_spec("pack:2 core:2 pu:1").unwrap();
/// let d = sharemap::detect(&mut trace, "oracle", &machine).unwrap();
/// assert_eq!((d.matrix.get(0, 1), d.matrix.get(0, 2)), (99.0, 0.0));
/// ```
pub fn detect(
    trace: &mut dyn sharemap_trace::TraceSource,
    spec: &str,
    machine: &sharemap_machine::Machine,
) -> Result<sharemap_detect::Detection> {
    let placement = sharemap_core::ThreadPlacement::identity(machine);
    Ok(sharemap_detect::detect(trace, spec, &placement)?)
}

/// The oracle's sharing matrix of a trace (cache-line blocks).
pub fn oracle_matrix(trace: &mut dyn sharemap_trace::TraceSource) -> Result<sharemap_core::SharingMatrix> {
    let machine = sharemap_machine::Machine::from_spec("pu:1")?;
    Ok(detect(trace, "oracle", &machine)?.matrix)
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
        let trace = || MemoryTrace::from_accesses(accesses.iter().copied());
        let machine = machine::Machine::from_spec("numa:2 pu:2").unwrap();
        let request =
            AnalyzeRequest { detector: "oracle".into(), compare: Some("sampled:every=2".into()), window: 1000 };
        let a = serde_json::to_value(analyze(&mut trace(), &machine, &request, &|_| {}).unwrap()).unwrap();
        assert_eq!(a["detection"]["matrix"]["threads"], 4);
        assert_eq!(a["detection"]["pages"].as_array().unwrap().len(), 5);
        assert_eq!(a["windows"].as_array().unwrap().len(), 4);
        assert!(a["accuracy"]["correlation"].is_number());
        let setup = Setup { machine: "numa:2 pu:2".into(), ..Setup::default() };
        let situation = Situation::resolve(&setup, &mut trace()).unwrap();
        let p =
            serde_json::to_value(place(&mut trace(), &situation, "first-touch", &Default::default()).unwrap()).unwrap();
        assert_eq!(p["accesses"], 4000);
        assert_eq!(p["evaluation"]["results"][0]["name"], "optimal");
        assert!(serde_json::to_value(&situation).unwrap()["costs"]["r"].is_number());
        let m = detect(&mut trace(), "oracle", &machine).unwrap().matrix;
        let mapped = map(&m, &machine, "sharemap", map::cost_model("hops").unwrap(), 1).unwrap();
        assert_eq!(serde_json::to_value(&mapped).unwrap()[0]["mapping"].as_array().unwrap().len(), 4);
    }
}
