//! Seed 004's parameter sweeps (its figures 4-7 and 12): the optimum and the policies as one
//! cost parameter, or the page size, varies.

use crate::situation::{Setup, Situation};
use crate::{Error, ErrorKind, Result};
use serde::Serialize;
use sharemap_machine::CostParams;
use sharemap_placement::evaluate::EvalOptions;
use sharemap_placement::{Costs, Tally};
use sharemap_trace::TraceSource;

/// The parameter a sweep varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Vary {
    #[serde(rename = "G")]
    BigG,
    #[serde(rename = "R")]
    BigR,
    #[serde(rename = "g")]
    SmallG,
    #[serde(rename = "r")]
    SmallR,
    #[serde(rename = "page-size")]
    PageSize,
}

impl Vary {
    pub fn parse(s: &str) -> Result<Vary> {
        Ok(match s {
            "G" => Vary::BigG,
            "R" => Vary::BigR,
            "g" => Vary::SmallG,
            "r" => Vary::SmallR,
            "page-size" => Vary::PageSize,
            _ => return Err(Error::new(ErrorKind::Vary, format!("'{s}': expected G, R, g, r or page-size"))),
        })
    }

    pub fn label(self) -> &'static str {
        match self {
            Vary::BigG => "G",
            Vary::BigR => "R",
            Vary::SmallG => "g",
            Vary::SmallR => "r",
            Vary::PageSize => "page-size",
        }
    }

    /// The base parameters with this one set to `v`. Varying G keeps R/G (ACE: R = 2G).
    pub fn apply(self, base: CostParams, v: f64) -> CostParams {
        let mut p = base;
        match self {
            Vary::BigG => {
                if let Some(g0) = base.big_g {
                    p.big_r = base.big_r / g0 * v;
                }
                p.big_g = Some(v);
            }
            Vary::BigR => p.big_r = v,
            Vary::SmallG => p.g = Some(v),
            Vary::SmallR => p.r = v,
            Vary::PageSize => {}
        }
        p
    }
}

/// One value of the sweep: the parameters there and each result, the optimum first.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    pub value: f64,
    pub costs: CostParams,
    pub pages: usize,
    pub accesses: u64,
    pub results: Vec<SweepResult>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepResult {
    pub name: String,
    pub cost: f64,
    pub tally: Tally,
}

/// Runs the sweep. `open` opens the trace afresh: varying the page size splits it again at
/// each value, any other parameter needs one pass (policies do not look at the costs, so one
/// run gives their tallies at every value).
pub fn sweep(
    open: &mut dyn FnMut() -> Result<Box<dyn TraceSource>>,
    setup: &Setup,
    vary: Vary,
    values: &[f64],
    policy_spec: &str,
) -> Result<Vec<SweepPoint>> {
    if values.is_empty() {
        return Err(Error::new(ErrorKind::Values, "no values"));
    }
    let mut points = Vec::new();
    if vary == Vary::PageSize {
        for &v in values {
            if !(v >= 64.0 && (v as u64).is_power_of_two() && v.fract() == 0.0) {
                return Err(Error::new(
                    ErrorKind::Values,
                    format!("page size {v} is not a power of two of at least 64"),
                ));
            }
            let setup = Setup { page_size: Some(v as u64), ..setup.clone() };
            let situation = Situation::resolve(&setup, open()?.as_mut())?;
            let policies = crate::policies(policy_spec, &situation.settings)?;
            let prepared = crate::prepare(open()?.as_mut(), &situation, &policies, &|_| {})?;
            let eval =
                prepared.evaluate(&situation, Costs::new(&situation.costs), &policies, &EvalOptions::default())?;
            points.push(SweepPoint {
                value: v,
                costs: situation.costs,
                pages: prepared.partition.pages(),
                accesses: prepared.partition.refs,
                results: eval
                    .results
                    .iter()
                    .map(|r| SweepResult { name: r.name.clone(), cost: r.cost, tally: r.tally })
                    .collect(),
            });
        }
        return Ok(points);
    }
    let situation = Situation::resolve(setup, open()?.as_mut())?;
    if matches!(vary, Vary::BigG | Vary::SmallG) && situation.costs.g.is_none() {
        return Err(Error::new(
            ErrorKind::Vary,
            format!("{}: the cost model has no global memory (give g and G with --cost, or --cost ace)", vary.label()),
        ));
    }
    let policies = crate::policies(policy_spec, &situation.settings)?;
    let prepared = crate::prepare(open()?.as_mut(), &situation, &policies, &|_| {})?;
    let base_costs = Costs::new(&situation.costs);
    let base = prepared.evaluate(
        &situation,
        base_costs,
        &policies,
        &EvalOptions { skip_optimal: true, ..Default::default() },
    )?;
    for &v in values {
        let params = vary.apply(situation.costs, v);
        params.validate().map_err(|e| Error::new(ErrorKind::Values, format!("{}={v}: {e}", vary.label())))?;
        let costs = Costs::new(&params);
        let opt = prepared.evaluate(&situation, costs, &[], &EvalOptions::default())?;
        let mut results =
            vec![SweepResult { name: "optimal".into(), cost: opt.results[0].cost, tally: opt.results[0].tally }];
        results.extend(base.results.iter().map(|r| SweepResult {
            name: r.name.clone(),
            cost: r.tally.cost(&costs),
            tally: r.tally,
        }));
        points.push(SweepPoint {
            value: v,
            costs: params,
            pages: prepared.partition.pages(),
            accesses: prepared.partition.refs,
            results,
        });
    }
    Ok(points)
}
