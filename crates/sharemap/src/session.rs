//! The facade's one entry point: a trace, the machine it is studied on and a seed, and every
//! analysis as a method taking a typed request and giving a result that serialises.

use crate::analyze::{Analysis, AnalyzeRequest};
use crate::filter::{Filter, Sensitivity};
use crate::map::{MapRequest, Mapping};
use crate::observer::Observer;
use crate::place::{PlaceRequest, Placement, PolicySet, Prepared};
use crate::simulate::{SimulateRequest, Simulation};
use crate::situation::{Setup, Situation, ThreadMap};
use crate::sweep::{SweepPoint, SweepRequest};
use crate::{Result, TraceInput};
use sharemap_core::SharingMatrix;
use sharemap_detect::Detection;
use sharemap_machine::Machine;
use sharemap_placement::Costs;
use sharemap_placement::evaluate::EvalOptions;
use sharemap_trace::summary::TraceSummary;
use std::path::Path;
use std::sync::Arc;

/// A trace studied on a machine. Checks that need no trace (names, settings, the
/// machine's size) run before any pass over it; each method reads the trace as often as
/// it needs, from its start.
///
/// ```
/// use sharemap::{Machine, PlaceRequest, Session, TraceInput};
/// use sharemap::trace::{Access, MemoryTrace};
/// // Two threads on different NUMA nodes take turns writing one page.
/// let trace = MemoryTrace::from_accesses((0..1000u64).map(|i| Access::write((i / 100 % 2) as u32, 0x1000, 8)));
/// let session = Session::new(TraceInput::memory(trace), Machine::from_spec("numa:2 pu:1").unwrap(), 1);
/// let placement = session.place(&PlaceRequest::new("first-touch")).unwrap();
/// let (optimal, first_touch) = (&placement.evaluation.results[0], &placement.evaluation.results[1]);
/// assert_eq!(optimal.name, "optimal");
/// assert!(optimal.cost <= first_touch.cost);
/// ```
#[derive(Clone)]
pub struct Session {
    input: TraceInput,
    machine: Machine,
    seed: u64,
    observer: Arc<dyn Observer>,
}

impl Session {
    /// `seed` seeds every random choice (the random mapping and policy, tie-breaks, filters).
    pub fn new(input: TraceInput, machine: Machine, seed: u64) -> Session {
        Session { input, machine, seed, observer: Arc::new(()) }
    }

    /// Told of every pass over the trace (progress bars; a way to stop a pass is
    /// `TraceInput::stop_when`).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Session {
        self.observer = observer;
        self
    }

    pub fn input(&self) -> &TraceInput {
        &self.input
    }

    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Totals, per-thread counts and page sharing, in one pass.
    pub fn info(&self) -> Result<TraceSummary> {
        crate::info(&self.input, self.observer.as_ref())
    }

    /// One detector over the trace, optionally against a reference detector in the same
    /// pass, optionally in windows; threads on the machine's PUs in order.
    pub fn analyze(&self, request: &AnalyzeRequest) -> Result<Analysis> {
        crate::analyze::analyze(&self.input, &self.machine, request, self.observer.as_ref())
    }

    /// One detector (a spec such as `oracle` or `sammu:l1=32`) over the trace.
    pub fn detect(&self, detector: &str) -> Result<Detection> {
        let request = AnalyzeRequest { detector: detector.into(), objects: Some(false), ..Default::default() };
        Ok(self.analyze(&request)?.detection)
    }

    /// What is shared, by name: every line attributed to its data object and classified
    /// (private, read-shared, truly or falsely shared), with the code behind it.
    pub fn shared(&self) -> Result<sharemap_detect::WhatIsShared> {
        let mut trace = self.input.open()?;
        let total = trace.access_count_hint();
        let observer = self.observer.as_ref();
        Ok(crate::observer::pass(observer, "naming what is shared", total, |progress| {
            sharemap_detect::WhatIsShared::read(trace.as_mut(), progress)
        })?)
    }

    /// The oracle's sharing matrix of the trace (cache-line blocks).
    pub fn sharing(&self) -> Result<SharingMatrix> {
        Ok(crate::map::oracle_sharing(&self.input, self.observer.as_ref())?.matrix)
    }

    /// Thread mappings of the trace's oracle sharing onto the machine.
    pub fn map(&self, request: &MapRequest) -> Result<Mapping> {
        request.check(self.seed)?;
        let sharing = crate::map::oracle_sharing(&self.input, self.observer.as_ref())?;
        crate::map::map(&sharing, &self.machine, request, self.seed)
    }

    /// The placement model resolved for this trace (reading its sharing when an algorithm
    /// places the threads).
    pub fn situation(&self, setup: &Setup) -> Result<Situation> {
        Situation::resolve(setup, &self.machine, self.seed, &self.input)
    }

    /// The trace split by page for `setup`, with what `policies` need computed in the same
    /// pass: for running several evaluations on one split.
    pub fn prepare(&self, setup: &Setup, policies: &str) -> Result<(Prepared, PolicySet)> {
        let (situation, policies) = self.checked(setup, policies)?;
        self.prepare_checked(setup, situation, policies)
    }

    /// `prepare` after `checked`.
    pub(crate) fn prepare_checked(
        &self,
        setup: &Setup,
        checked: Situation,
        policies: PolicySet,
    ) -> Result<(Prepared, PolicySet)> {
        let situation = self.resolved(setup, checked)?;
        let prepared = crate::place::prepare(&self.input, situation, &policies, self.observer.as_ref())?;
        Ok((prepared, policies))
    }

    /// The optimum and the policies on the trace.
    pub fn place(&self, request: &PlaceRequest) -> Result<Placement> {
        let (situation, policies) = self.checked(&request.setup, &request.policies)?;
        crate::place::check_machine(&situation, &policies)?;
        // An output that cannot be written is refused before the long passes.
        let plan = request.plan.as_deref().map(sharemap_trace::output::AtomicOutput::create).transpose()?;
        let situation = self.resolved(&request.setup, situation)?;
        let prepared = crate::place::prepare(&self.input, situation, &policies, self.observer.as_ref())?;
        let keep = plan.is_some() || request.keep_placement;
        let opts = EvalOptions { costliest: request.costliest, placement: keep, skip_optimal: false };
        let evaluation = prepared.evaluate(Costs::new(&prepared.situation.costs), &policies, &opts)?;
        if let Some(out) = plan {
            crate::plan::write_placement_to(out, &evaluation, prepared.situation.page_size.bytes())?;
        }
        let mut situation = prepared.situation;
        situation.notes.extend(crate::place::clock_notes(&situation, &policies, prepared.partition.refs));
        Ok(Placement {
            accesses: prepared.partition.refs,
            pages: prepared.partition.pages(),
            threads: prepared.threads,
            situation,
            evaluation,
        })
    }

    /// Which mapping and placement to use: every candidate simulated, the fastest chosen
    /// when it beats the OS by the request's threshold.
    pub fn advise(&self, request: &crate::AdviseRequest) -> Result<crate::Advice> {
        crate::advise::advise(self, request)
    }

    /// The trace on the simulated machine under each mechanism of the request.
    pub fn simulate(&self, request: &SimulateRequest) -> Result<Simulation> {
        crate::simulate::simulate(self, request)
    }

    /// Where each requested mechanism starts (threads, pages homed before the run, the
    /// mappings it tries), decided from the whole trace as `simulate` decides it, without
    /// simulating: what `run` applies of the mechanisms decided before the program runs.
    pub fn starts(&self, request: &SimulateRequest) -> Result<Vec<crate::MechanismStart>> {
        crate::simulate::starts(self, request)
    }

    /// The optimum and the policies as one model parameter varies.
    pub fn sweep(&self, request: &SweepRequest) -> Result<Vec<SweepPoint>> {
        crate::sweep::sweep(self, request)
    }

    /// How much each of seed 004's perturbation filters moves the optimum; with `keep`,
    /// the one filtered trace is written there.
    pub fn sensitivity(
        &self,
        setup: &Setup,
        filters: &[Filter],
        keep: Option<&Path>,
    ) -> Result<(Situation, Sensitivity)> {
        crate::filter::sensitivity(self, setup, filters, keep)
    }

    /// Writes the trace through one of seed 004's perturbation filters; returns the accesses
    /// written.
    pub fn filter(&self, filter: Filter, output: &Path, format: Option<sharemap_trace::Format>) -> Result<u64> {
        crate::filter::write(self, filter, output, format)
    }

    /// The model checked from the trace's metadata, and the policies built, before any pass.
    pub(crate) fn checked(&self, setup: &Setup, policies: &str) -> Result<(Situation, PolicySet)> {
        let built = crate::place::policies(policies, &setup.settings)?;
        let (meta, count) = {
            let source = self.input.open()?;
            (source.metadata().clone(), source.access_count_hint())
        };
        crate::trace::needs_every_access(
            &meta,
            "the off-line optimum and the placement policies (seed 004's model) count every reference to each page",
        )?;
        let situation = Situation::check(setup, &self.machine, self.seed, &meta, count)?;
        Ok((situation, PolicySet(built)))
    }

    /// The situation with the threads where an algorithm maps them, when one does.
    pub(crate) fn resolved(&self, setup: &Setup, checked: Situation) -> Result<Situation> {
        match setup.thread_map {
            ThreadMap::Algorithm(_) => self.situation(setup),
            _ => Ok(checked),
        }
    }

    pub(crate) fn observer(&self) -> &dyn Observer {
        self.observer.as_ref()
    }
}
