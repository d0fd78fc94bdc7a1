//! Sharing detection on a trace: one detector, optionally against a reference detector run
//! in the same pass, optionally cut into windows to find phase changes.

use crate::observer::{Observer, pass};
use crate::{Error, ErrorKind, Result, TraceInput};
use serde::Serialize;
use sharemap_core::SharingMatrix;
use sharemap_detect::{Detection, DetectorContext, Granularity, WhatIsShared, detector, phase_changes};
use sharemap_machine::Machine;
use sharemap_machine::ThreadPlacement;
use sharemap_mapping::{CostModel, PairCosts};

/// What to detect.
#[derive(Clone, Debug, Default)]
pub struct AnalyzeRequest {
    /// A detector spec (`oracle`, `sammu:l1=32`, ...).
    pub detector: String,
    /// A reference detector to score it against (MSE and correlation).
    pub compare: Option<String>,
    /// Accesses per window (0: no windows).
    pub window: u64,
    /// A complete recording of the same program: how faithfully this (sampled) trace's
    /// sharing, page usage and mapping match its (`Fidelity`).
    pub against: Option<TraceInput>,
    /// Say what is shared, by name (`WhatIsShared`): `None` when the trace names its data (a
    /// tracer recording), `Some(true)` always (address ranges where it does not), `Some(false)`
    /// never.
    pub objects: Option<bool>,
}

impl AnalyzeRequest {
    /// The specs parse: checked before any output is made or the trace read.
    pub fn check(&self) -> Result<()> {
        detector::parse(&self.detector)?;
        if let Some(c) = &self.compare {
            detector::parse(c)?;
        }
        Ok(())
    }
}

/// What the detector found.
#[derive(Serialize)]
pub struct Analysis {
    /// The detector's spec with every parameter.
    pub detector: String,
    pub detection: Detection,
    /// The sharing of each window.
    pub windows: Vec<SharingMatrix>,
    /// Windows where the pattern changes (correlation below 0.5 with the phase so far).
    pub phase_changes: Vec<usize>,
    pub accuracy: Option<Accuracy>,
    /// Against a complete recording (`AnalyzeRequest::against`).
    pub fidelity: Option<crate::Fidelity>,
    /// The mapping-potential gate of the matrix on the machine.
    pub mapping_potential: f64,
    /// Where the detector saw the threads run: the modelled OS's placement (`os`).
    pub placement: ThreadPlacement,
    /// What is shared, by name (`AnalyzeRequest::objects`).
    pub shared: Option<WhatIsShared>,
}

/// The detector against the reference: MSE of the matrices scaled to a maximum of 1, and
/// Pearson correlation.
#[derive(Clone, Debug, Serialize)]
pub struct Accuracy {
    pub reference: String,
    pub mse: f64,
    pub correlation: f64,
}

/// Runs the detector (and the reference) over the trace in one pass, threads on the
/// machine's PUs in order.
///
/// ```
/// use sharemap::trace::{Access, MemoryTrace};
/// use sharemap::{AnalyzeRequest, Machine, Session, TraceInput};
/// // 0-1 share a line for 400 accesses, then 2-3 share another: a phase change.
/// let trace = MemoryTrace::from_accesses(
///     (0..800u64).map(|i| Access::read((i % 2 + if i < 400 { 0 } else { 2 }) as u32, 0x40 * (1 + i / 400), 8)),
/// );
/// let machine = Machine::from_spec("pack:2 core:2 pu:1").unwrap();
/// let session = Session::new(TraceInput::memory(trace), machine, 1);
/// let request = AnalyzeRequest { detector: "oracle".into(), compare: Some("sampled:every=2".into()), window: 100, ..Default::default() };
/// let a = session.analyze(&request).unwrap();
/// assert_eq!((a.windows.len(), a.phase_changes.clone()), (8, vec![4]));
/// assert!(a.accuracy.unwrap().correlation > 0.9);
/// ```
pub(crate) fn analyze(
    input: &TraceInput,
    machine: &Machine,
    request: &AnalyzeRequest,
    observer: &dyn Observer,
) -> Result<Analysis> {
    let det = detector::parse(&request.detector)?;
    let windows = sharemap_detect::detector::find(&det.name).is_some_and(|d| d.caps.windows);
    if request.window > 0 && !windows {
        // Their state (STMap's decision, SAMMU's TLBs and thresholds) spans the whole run.
        let able: Vec<&str> = sharemap_detect::DETECTORS.iter().filter(|d| d.caps.windows).map(|d| d.name).collect();
        let (last, rest) = able.split_last().expect("some detector reads windows");
        let why = format!("works with the {} and {last} detectors", rest.join(", "));
        return Err(Error::new(ErrorKind::Detection, why).in_setting("window", request.window.to_string()));
    }
    let reference = request.compare.as_deref().map(detector::parse).transpose()?;
    let mut trace = input.open()?;
    // Per-core detectors (SAMMU's TLBs) see the threads where the OS runs them.
    let threads = trace.metadata().threads as usize;
    let placement =
        crate::situation::os_placement(machine, "os", if threads > 0 { threads } else { machine.pu_count() })?;
    let ctx = DetectorContext::new(trace.metadata(), &placement)?;
    let mut detectors = vec![detector::build(&det, &ctx)?];
    if let Some(mut r) = reference {
        // A bare `oracle` compares at the detector's own granularity: a page-level detector
        // against a line-level oracle would differ by construction.
        if r.name == "oracle" && r.get("line").is_none() && r.get("page").is_none() {
            r = detector::parse(match detectors[0].granularity() {
                Granularity::Page => "oracle:page",
                Granularity::Line => "oracle:line",
            })?;
        }
        detectors.push(detector::build(&r, &ctx)?);
    }
    let name = detectors[0].spec();
    let granularity = detectors[0].granularity();
    let reference_name = detectors.get(1).map(|d| d.spec());
    let total = trace.access_count_hint();
    let mut found = pass(observer, "detecting sharing", total, |progress| {
        sharemap_detect::detect_many(trace.as_mut(), detectors, request.window, progress)
    })?;
    let truth = (found.len() > 1).then(|| found.pop().expect("two detectors").detection.matrix);
    let found = found.pop().expect("one detector");
    let matrix = &found.detection.matrix;
    let accuracy = truth.map(|truth| Accuracy {
        reference: reference_name.unwrap_or_default(),
        mse: matrix.mse(&truth),
        correlation: matrix.correlation(&truth),
    });
    let fidelity = match &request.against {
        None => None,
        Some(complete) => {
            let spec = match granularity {
                Granularity::Page => "oracle:page",
                Granularity::Line => "oracle:line",
            };
            let mut other = complete.open()?;
            let ctx = DetectorContext::new(other.metadata(), &placement)?;
            let d = detector::build(&detector::parse(spec)?, &ctx)?;
            let total = other.access_count_hint();
            let reference = pass(observer, "detecting sharing in the complete trace", total, |progress| {
                sharemap_detect::detect_many(other.as_mut(), vec![d], 0, progress)
            })?
            .pop()
            .expect("one detector")
            .detection;
            let burst = input.open()?.metadata().burst.clone();
            Some(crate::fidelity::compare(
                complete.name(),
                &found.detection,
                &reference,
                machine,
                &placement,
                burst.as_ref(),
                0,
            )?)
        }
    };
    let shared = match request.objects {
        Some(false) => None,
        asked => {
            let mut trace = input.open()?;
            if asked == Some(true) || WhatIsShared::named_in(trace.metadata()) {
                let total = trace.access_count_hint();
                Some(pass(observer, "naming what is shared", total, |progress| {
                    WhatIsShared::read(trace.as_mut(), progress)
                })?)
            } else {
                None
            }
        }
    };
    let costs = PairCosts::new(machine, CostModel::Latency);
    Ok(Analysis {
        shared,
        fidelity,
        detector: name,
        mapping_potential: sharemap_mapping::potential::gate(matrix, machine, &costs, found.detection.seen),
        placement,
        phase_changes: phase_changes(&found.windows, 0.5),
        windows: found.windows,
        detection: found.detection,
        accuracy,
    })
}

/// The analysis in brief, as `analyze` writes it to `summary.json`: what was found, the
/// pairs that share most, and each detector's own report.
#[derive(Serialize)]
pub struct Summary {
    pub trace: String,
    pub detector: String,
    pub threads: usize,
    pub pages: usize,
    pub accesses: u64,
    /// Accesses the detector saw.
    pub seen: u64,
    pub total_sharing: f64,
    /// The thread pairs that share most, largest first.
    pub top_pairs: Vec<(usize, usize, f64)>,
    /// With a comparison: the reference detector, and the MSE (both matrices scaled to a
    /// maximum of 1) and Pearson correlation against it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared_with: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mse: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation: Option<f64>,
    /// Against a complete recording: this sampled trace's answers against its.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<crate::Fidelity>,
    /// A burst-sampled trace's weight per thread (its back-edges over those in bursts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst_weights: Option<Vec<f64>>,
    /// The mapping-potential gate on the machine (see `map`).
    pub mapping_potential: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<Windows>,
    /// Each detector's own report (STMap's decision, SAMMU's activity), by key.
    #[serde(flatten)]
    pub reports: std::collections::BTreeMap<&'static str, serde_json::Value>,
    /// What is shared, by name, when it was asked or the trace names its data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_is_shared: Option<WhatIsShared>,
}

/// The windows of an analysis.
#[derive(Serialize)]
pub struct Windows {
    /// Accesses per window.
    pub size: u64,
    pub count: usize,
    /// Windows whose sharing correlates below 0.5 with the previous window's, and the trace
    /// position where each starts.
    pub phase_changes: Vec<(usize, u64)>,
}

/// Pairs `Summary::top_pairs` keeps.
pub const TOP_PAIRS: usize = 10;

impl Summary {
    /// The summary of `analysis` of the trace named `trace`, windows of `window` accesses;
    /// `burst` is the trace's burst sampling, when it has one.
    pub fn of(
        analysis: &Analysis,
        trace: String,
        window: u64,
        burst: Option<&sharemap_trace::model::Burst>,
    ) -> Summary {
        let found = &analysis.detection;
        let n = found.matrix.threads();
        let accuracy = analysis.accuracy.as_ref();
        let mut top_pairs = found.matrix.sharing_pairs();
        top_pairs.truncate(TOP_PAIRS);
        Summary {
            trace,
            detector: analysis.detector.clone(),
            threads: n,
            pages: found.pages.len(),
            accesses: found.accesses,
            seen: found.seen,
            total_sharing: found.matrix.total(),
            top_pairs,
            compared_with: accuracy.map(|a| a.reference.clone()),
            mse: accuracy.map(|a| a.mse),
            correlation: accuracy.map(|a| a.correlation),
            fidelity: analysis.fidelity.clone(),
            burst_weights: burst.map(|b| (0..n).map(|t| b.weight(t)).collect()),
            windows: (!analysis.windows.is_empty()).then(|| Windows {
                size: window,
                count: analysis.windows.len(),
                phase_changes: analysis.phase_changes.iter().map(|&k| (k, k as u64 * window)).collect(),
            }),
            mapping_potential: analysis.mapping_potential,
            reports: found.report.iter().map(|r| (r.key, r.json.clone())).collect(),
            what_is_shared: analysis.shared.clone(),
        }
    }
}
