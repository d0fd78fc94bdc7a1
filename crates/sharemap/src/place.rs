//! Data placement: every policy and the off-line optimum on a trace, in one pass that splits
//! the trace by page and one parallel pass over the pages.

use crate::situation::Situation;
use crate::{Error, ErrorKind, Result};
use sharemap_core::{Spec, SpecError};
use sharemap_placement::Costs;
use sharemap_placement::evaluate::{EvalOptions, Evaluation, evaluate};
use sharemap_placement::partition::{Partition, PartitionOptions};
use sharemap_placement::policies::{self, Context, POLICIES, Policy, Prepass, Settings};
use sharemap_trace::TraceSource;

/// What to keep besides each policy's totals.
pub type PlaceOptions = EvalOptions;

/// The policies a list of specs names (`all` for every one), built with the settings. A
/// spec's options set that policy's parameters as settings do: `first-n-fills:n=32` is
/// `first-n-fills` with `first-n-fills.n=32`. The optimum is not a policy: it is always
/// evaluated first.
///
/// ```
/// let built = sharemap::policies("first-touch, first-n-fills:n=32", &Default::default()).unwrap();
/// assert_eq!(built.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(), ["first-touch", "first-n-fills"]);
/// assert!(sharemap::policies("first-n-fills:x=1", &Default::default()).is_err());
/// ```
pub fn policies(spec: &str, settings: &Settings) -> Result<Vec<(String, Box<dyn Policy>)>> {
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
    pub partition: Partition,
}

/// Reads the trace once into per-page streams, computing in the same pass what the policies
/// need (`Policy::prepass`). `progress` is told the accesses read so far.
pub fn prepare(
    trace: &mut dyn TraceSource,
    situation: &Situation,
    policies: &[(String, Box<dyn Policy>)],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Prepared> {
    // No more memory than the trace's references can fill (4 bytes each, twice over for
    // partly filled blocks), when their number is known.
    let justified = trace.access_count_hint().map_or(usize::MAX, |n| (n as usize).saturating_mul(8) + (1 << 20));
    let opts = PartitionOptions {
        page_size: situation.page_size,
        placement: situation.placement.clone(),
        memory_budget: situation.memory_budget.min(justified),
        prepass: Prepass::of(policies, situation.line_size),
    };
    let partition = Partition::build(trace, &opts, progress)?;
    Ok(Prepared { partition })
}

impl Prepared {
    /// What a policy may know, with these costs (a sweep varies them).
    pub fn context(&self, situation: &Situation, costs: Costs) -> Context<'_> {
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
    pub fn evaluate(
        &self,
        situation: &Situation,
        costs: Costs,
        policies: &[(String, Box<dyn Policy>)],
        opts: &PlaceOptions,
    ) -> Result<Evaluation> {
        Ok(evaluate(&self.partition, &self.context(situation, costs), policies, situation.page_size.bytes(), opts)?)
    }
}

/// What `place` found.
#[derive(serde::Serialize)]
pub struct Placement {
    pub accesses: u64,
    pub pages: usize,
    pub evaluation: Evaluation,
}

/// The optimum and the policies `policy_spec` names (a comma list or `all`) on a trace.
pub fn place(
    trace: &mut dyn TraceSource,
    situation: &Situation,
    policy_spec: &str,
    opts: &PlaceOptions,
) -> Result<Placement> {
    let policies = policies(policy_spec, &situation.settings)?;
    check_bind(situation, policy_spec)?;
    let prepared = prepare(trace, situation, &policies, &|_| {})?;
    let evaluation = prepared.evaluate(situation, Costs::new(&situation.costs), &policies, opts)?;
    Ok(Placement { accesses: prepared.partition.refs, pages: prepared.partition.pages(), evaluation })
}

/// `bind` must name a node of the machine (its `node` from the policy's spec or the settings).
pub fn check_bind(situation: &Situation, policy_spec: &str) -> Result<()> {
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
