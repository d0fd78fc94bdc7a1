//! Data placement: every policy and the off-line optimum on a trace, in one pass that splits
//! the trace by page and one parallel pass over the pages.

use crate::observer::{Observer, pass};
use crate::situation::{Setup, Situation};
use crate::{Error, ErrorKind, Result, TraceInput};
use serde::Serialize;
use sharemap_core::{Spec, SpecError};
use sharemap_placement::partition::{Partition, PartitionOptions};
use sharemap_placement::policies::{self, Context, POLICIES, Policy, Prepass, Settings};
use std::path::PathBuf;

/// Built placement policies, by name.
pub struct PolicySet(pub(crate) Vec<(String, Box<dyn sharemap_placement::policies::Policy>)>);

impl PolicySet {
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|p| p.0.as_str()).collect()
    }
}

pub use sharemap_placement::evaluate::{EvalOptions, Evaluation, PageCost, PolicyResult};
pub use sharemap_placement::{Costs, Tally};

/// What to place: the model, the policies, and what to keep besides each one's totals.
#[derive(Clone, Debug)]
pub struct PlaceRequest {
    pub setup: Setup,
    /// A comma list of policy specs (`first-touch,first-n-fills:n=32`) or `all`; the
    /// optimum always comes first.
    pub policies: String,
    /// The costliest pages under the optimum to list, with each policy's cost for them.
    pub costliest: usize,
    /// Write the optimal placement (per page: from which access on it lives where) to this
    /// .csv or .json file.
    pub plan: Option<PathBuf>,
    /// Keep the optimal placement in the result (`Evaluation::placement`).
    pub keep_placement: bool,
}

impl PlaceRequest {
    /// These policies on the default model.
    pub fn new(policies: &str) -> PlaceRequest {
        PlaceRequest {
            setup: Setup::default(),
            policies: policies.into(),
            costliest: 0,
            plan: None,
            keep_placement: false,
        }
    }
}

/// The policies a list of specs names (`all` for every one), built with the settings. A
/// spec's options set that policy's parameters as settings do: `first-n-fills:n=32` is
/// `first-n-fills` with `first-n-fills.n=32`. The optimum is not a policy: it is always
/// evaluated first.
///
/// ```
/// let built = sharemap::place::policies("first-touch, first-n-fills:n=32", &[]).unwrap();
/// assert_eq!(built.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(), ["first-touch", "first-n-fills"]);
/// assert!(sharemap::place::policies("first-n-fills:x=1", &[]).is_err());
/// ```
pub fn policies(spec: &str, settings: &[String]) -> Result<Vec<(String, Box<dyn Policy>)>> {
    let mut parsed = Settings::default();
    for s in settings {
        parsed.add(s).map_err(|e| Error::new(ErrorKind::Policy, e.to_string()))?;
    }
    built_policies(spec, &parsed)
}

pub(crate) fn built_policies(spec: &str, settings: &Settings) -> Result<Vec<(String, Box<dyn Policy>)>> {
    let every = || {
        POLICIES.iter().filter(|p| p.caps.in_all).map(|p| Spec { name: p.name.into(), options: Vec::new() }).collect()
    };
    let specs: Vec<Spec> = Spec::parse_list_with_all(spec, "policy", every)
        .map_err(|e| SpecError { kind: "policy", ..e })?
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    let specs: Vec<&Spec> = specs.iter().filter(|s| s.name != "optimal").collect();
    let mut out = Vec::new();
    for spec in &specs {
        let name = spec.name.as_str();
        let info = policies::find(name).ok_or_else(|| {
            let known: Vec<&str> = POLICIES.iter().map(|p| p.name).collect();
            let hint = sharemap_core::did_you_mean(name, known.iter().copied());
            Error::new(
                ErrorKind::Policy,
                format!("unknown policy '{name}' ({hint}policies: {}, or all)", known.join(", ")),
            )
        })?;
        let policy =
            policies::build(info, settings, &spec.options).map_err(|e| Error::new(ErrorKind::Policy, e.to_string()))?;
        // Two variants of one policy are told apart by their specs.
        let twice = specs.iter().filter(|s| s.name == spec.name).count() > 1;
        let label = if twice { spec.to_string() } else { name.to_string() };
        if out.iter().any(|(l, _)| *l == label) {
            continue;
        }
        out.push((label, policy));
    }
    Ok(out)
}

/// A trace split by page for a situation: what every placement analysis starts from.
/// Policies asking for different pre-passes (two samplers) get splits of their own.
pub struct Prepared {
    pub situation: Situation,
    /// The split the optimum and the policies without needs of their own are evaluated on.
    pub partition: Partition,
    /// Further splits, each with the indices of the policies it serves.
    extra: Vec<(Partition, Vec<usize>)>,
    /// The indices of the policies `partition` serves.
    first: Vec<usize>,
    /// Threads of the trace (known once it is read).
    pub threads: u32,
}

/// Reads the trace into per-page streams, computing in the same pass what the policies
/// need (`Policy::prepass`): once, or once per set of pre-passes that cannot share a pass.
pub(crate) fn prepare(
    input: &TraceInput,
    situation: Situation,
    policies: &PolicySet,
    observer: &dyn Observer,
) -> Result<Prepared> {
    let mut splits = Vec::new();
    let mut threads = 0;
    let groups = Prepass::groups(&policies.0, situation.line_size);
    // Every split is held until the evaluation: they share the budget.
    let budget = situation.memory_budget / groups.len().max(1);
    for (prepass, serves) in groups {
        let mut trace = input.open()?;
        // No more memory than the trace's references can fill (4 bytes each, twice over for
        // partly filled blocks), when their number is known.
        let total = trace.access_count_hint();
        let justified = total.map_or(usize::MAX, |n| (n as usize).saturating_mul(8) + (1 << 20));
        let opts = PartitionOptions {
            page_size: situation.page_size,
            placement: situation.placement.clone(),
            memory_budget: budget.min(justified),
            prepass,
        };
        let partition =
            pass(observer, "reading pages", total, |progress| Partition::build(trace.as_mut(), &opts, progress))?;
        threads = trace.metadata().threads;
        splits.push((partition, serves));
    }
    let (partition, first) = splits.remove(0);
    Ok(Prepared { situation, partition, extra: splits, first, threads })
}

impl Prepared {
    /// What a policy may know, with these costs (a sweep varies them).
    pub fn context(&self, costs: Costs) -> Context<'_> {
        context(&self.situation, &self.partition, costs)
    }

    /// The optimum and the policies over every page, the policies in their given order.
    pub fn evaluate(&self, costs: Costs, policies: &PolicySet, opts: &EvalOptions) -> Result<Evaluation> {
        let page_size = self.situation.page_size.bytes();
        let eval = |part: &Partition, serves: &[usize], opts: &EvalOptions| -> Result<Evaluation> {
            let chosen: Vec<(String, &dyn Policy)> =
                serves.iter().filter_map(|&i| policies.0.get(i)).map(|(l, p)| (l.clone(), p.as_ref())).collect();
            let ctx = context(&self.situation, part, costs);
            Ok(sharemap_placement::evaluate::evaluate(part, &ctx, &chosen, page_size, opts)?)
        };
        if self.extra.is_empty() || policies.0.is_empty() {
            return Ok(sharemap_placement::evaluate::evaluate(
                &self.partition,
                &self.context(costs),
                &policies.0,
                page_size,
                opts,
            )?);
        }
        let mut merged = eval(&self.partition, &self.first, opts)?;
        let optimal = usize::from(!opts.skip_optimal);
        let mut columns: Vec<(usize, usize, usize)> = (0..self.first.len()).map(|k| (self.first[k], 0, k)).collect();
        let mut others = Vec::new();
        for (n, (part, serves)) in self.extra.iter().enumerate() {
            // The optimum is the same on every split: its pages rank the costliest alike.
            let own = EvalOptions { placement: false, skip_optimal: opts.costliest == 0, ..opts.clone() };
            let e = eval(part, serves, &own)?;
            let skip = usize::from(!own.skip_optimal);
            columns.extend(serves.iter().enumerate().map(|(k, &i)| (i, n + 1, k)));
            others.push((e, skip));
        }
        columns.sort_unstable();
        let result = |split: usize, k: usize| match split {
            0 => merged.results[optimal + k].clone(),
            s => others[s - 1].0.results[others[s - 1].1 + k].clone(),
        };
        let mut results: Vec<PolicyResult> = merged.results[..optimal].to_vec();
        let optimum = results.first().map(|o| o.cost);
        results.extend(columns.iter().map(|&(_, split, k)| {
            let mut r = result(split, k);
            // Each split's result is relative to its own optimum, if it had one: the first's.
            if let Some(opt) = optimum {
                r.vs_optimal = if opt > 0.0 { r.cost / opt } else { 1.0 };
            }
            r
        }));
        for (row, page) in merged.costliest.iter_mut().enumerate() {
            let first = std::mem::take(&mut page.policies);
            page.policies = columns
                .iter()
                .map(|&(_, split, k)| match split {
                    0 => first[k],
                    s => others[s - 1].0.costliest.get(row).map_or(f64::NAN, |p| p.policies[k]),
                })
                .collect();
        }
        merged.results = results;
        Ok(merged)
    }
}

fn context<'a>(situation: &Situation, partition: &'a Partition, costs: Costs) -> Context<'a> {
    Context {
        nodes: situation.machine.numa_count(),
        costs,
        page_size: situation.page_size.bytes(),
        pages: partition.pages() as u64,
        init_done: partition.init_done,
        phase_changes: &partition.phase_changes,
        annotations: &partition.annotations,
        refs_per_ms: situation.refs_per_ms,
        seed: situation.seed,
    }
}

/// What `place` found.
#[derive(Serialize)]
pub struct Placement {
    /// The model it ran in (machine, costs, where threads ran, notes).
    pub situation: Situation,
    pub accesses: u64,
    pub pages: usize,
    /// Threads of the trace.
    pub threads: u32,
    pub evaluation: Evaluation,
}

/// For each time-driven policy whose first timed action comes after the trace's end (at its
/// time scale), a note saying so, with the figures and the setting that would change it.
pub(crate) fn clock_notes(situation: &Situation, policies: &PolicySet, refs: u64) -> Vec<String> {
    let span_ms = refs as f64 / situation.refs_per_ms;
    let scale = match situation.time_scale {
        crate::TimeScale::Recorded => "the recorded run's own",
        crate::TimeScale::Given => "--refs-per-ms",
        crate::TimeScale::Default => "assumed, the trace has no clock: --refs-per-ms sets it",
    };
    policies
        .0
        .iter()
        .filter_map(|(name, p)| {
            let (what, ms) = p.clock()?;
            (ms >= span_ms).then(|| {
                format!(
                    "{name}: its {what} comes at {ms} ms, after the trace's end ({span_ms:.1} ms: {refs} references at {:.0} per ms, {scale}), so that part of it never acts",
                    situation.refs_per_ms
                )
            })
        })
        .collect()
}

/// Every policy can run on the machine (a node it names exists): checked before any pass.
pub(crate) fn check_machine(situation: &Situation, policies: &PolicySet) -> Result<()> {
    let nodes = situation.machine.numa_count();
    for (_, p) in &policies.0 {
        p.check(nodes).map_err(|e| Error::new(ErrorKind::Policy, e.to_string()).in_setting("settings", ""))?;
    }
    Ok(())
}
