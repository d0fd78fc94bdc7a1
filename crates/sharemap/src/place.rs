//! Data placement: every policy and the off-line optimum on a trace, in one pass that splits
//! the trace by page and one parallel pass over the pages.

use crate::observer::{Observer, pass};
use crate::session::PolicySet;
use crate::situation::{Setup, Situation};
use crate::{Error, ErrorKind, Result, TraceInput};
use serde::Serialize;
use sharemap_core::{Spec, SpecError};
use sharemap_placement::partition::{Partition, PartitionOptions};
use sharemap_placement::policies::{self, Context, POLICIES, Policy, Prepass, Settings};
use std::path::PathBuf;

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
    let specs: Vec<Spec> = if spec.trim() == "all" {
        POLICIES.iter().map(|p| Spec { name: p.name.into(), options: Vec::new() }).collect()
    } else {
        Spec::parse_list(spec).map_err(|e| SpecError { kind: "policy", ..e })?
    };
    let mut out = Vec::new();
    for spec in specs.iter().filter(|s| s.name != "optimal") {
        let name = spec.name.as_str();
        let info = policies::find(name).ok_or_else(|| {
            let known: Vec<&str> = POLICIES.iter().map(|p| p.name).collect();
            Error::new(ErrorKind::Policy, format!("unknown policy '{name}' (policies: {}, or all)", known.join(", ")))
        })?;
        let mut own = settings.clone();
        for (key, value) in &spec.options {
            let value = value.as_deref().ok_or_else(|| spec.error("policy", format!("{key} needs a value")))?;
            own.add(&format!("{name}.{key}={value}")).map_err(|e| Error::new(ErrorKind::Policy, e.to_string()))?;
        }
        out.push((name.to_string(), info.build(&own).map_err(|e| Error::new(ErrorKind::Policy, e.to_string()))?));
    }
    Ok(out)
}

/// A trace split by page for a situation: what every placement analysis starts from.
pub struct Prepared {
    pub situation: Situation,
    pub partition: Partition,
    /// Threads of the trace (known once it is read).
    pub threads: u32,
}

/// Reads the trace once into per-page streams, computing in the same pass what the policies
/// need (`Policy::prepass`).
pub(crate) fn prepare(
    input: &TraceInput,
    situation: Situation,
    policies: &PolicySet,
    observer: &dyn Observer,
) -> Result<Prepared> {
    let mut trace = input.open()?;
    // No more memory than the trace's references can fill (4 bytes each, twice over for
    // partly filled blocks), when their number is known.
    let total = trace.access_count_hint();
    let justified = total.map_or(usize::MAX, |n| (n as usize).saturating_mul(8) + (1 << 20));
    let opts = PartitionOptions {
        page_size: situation.page_size,
        placement: situation.placement.clone(),
        memory_budget: situation.memory_budget.min(justified),
        prepass: Prepass::of(&policies.0, situation.line_size),
    };
    let partition =
        pass(observer, "reading pages", total, |progress| Partition::build(trace.as_mut(), &opts, progress))?;
    let threads = trace.metadata().threads;
    Ok(Prepared { situation, partition, threads })
}

impl Prepared {
    /// What a policy may know, with these costs (a sweep varies them).
    pub fn context(&self, costs: Costs) -> Context<'_> {
        let situation = &self.situation;
        Context {
            nodes: situation.machine.numa_count(),
            costs,
            page_size: situation.page_size.bytes(),
            pages: self.partition.pages() as u64,
            init_done: self.partition.init_done,
            phase_changes: &self.partition.phase_changes,
            annotations: &self.partition.annotations,
            refs_per_ms: situation.refs_per_ms,
            seed: situation.seed,
        }
    }

    /// The optimum and the policies over every page.
    pub fn evaluate(&self, costs: Costs, policies: &PolicySet, opts: &EvalOptions) -> Result<Evaluation> {
        let page_size = self.situation.page_size.bytes();
        Ok(sharemap_placement::evaluate::evaluate(&self.partition, &self.context(costs), &policies.0, page_size, opts)?)
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

/// `bind` must name a node of the machine (its `node` from the policy's spec or the settings).
pub(crate) fn check_bind(situation: &Situation, policy_spec: &str) -> Result<()> {
    let nodes = situation.machine.numa_count();
    let Ok(specs) = Spec::parse_list(policy_spec) else { return Ok(()) };
    let Some(bind) = specs.iter().find(|s| s.name == "bind") else { return Ok(()) };
    let mut settings = situation.settings.clone();
    if let Some(Some(node)) = bind.get("node") {
        settings.add(&format!("bind.node={node}")).map_err(|e| Error::new(ErrorKind::Policy, e.to_string()))?;
    }
    if let Some(n) = policies::find("bind").and_then(|b| b.value(&settings, "node").parse::<usize>().ok())
        && n >= nodes
    {
        return Err(Error::new(
            ErrorKind::PolicySetting,
            format!("bind.node={n}: the machine has {nodes} NUMA nodes (0..{})", nodes - 1),
        ));
    }
    Ok(())
}
