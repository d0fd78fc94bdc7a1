//! Seed 004's parameter sweeps (its figures 4-7 and 12): the optimum and the policies as one
//! cost parameter, or the page size, varies.

use crate::situation::Setup;
use crate::{Error, ErrorKind, Result, Session};
use serde::Serialize;
use sharemap_machine::CostParams;
use sharemap_placement::evaluate::EvalOptions;
use sharemap_placement::{Costs, Tally};

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
            _ => {
                let hint = sharemap_core::did_you_mean(s, ["G", "R", "g", "r", "page-size"]);
                return Err(Error::new(ErrorKind::Sweep, format!("'{s}': {hint}expected G, R, g, r or page-size"))
                    .in_setting("vary", ""));
            }
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
    /// What the reader should know of this point's setup (all threads on one node, say).
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepResult {
    pub name: String,
    pub cost: f64,
    pub tally: Tally,
}

/// What a sweep varies, over which values, for which policies.
#[derive(Clone, Debug)]
pub struct SweepRequest {
    pub setup: Setup,
    pub vary: Vary,
    pub values: Vec<f64>,
    /// Policies evaluated at each value besides the optimum (a comma list, or all).
    pub policies: String,
}

/// Runs the sweep. Varying the page size splits the trace again at each value; any other
/// parameter needs one pass (policies do not look at the costs, so one run gives their
/// tallies at every value).
pub(crate) fn sweep(session: &Session, request: &SweepRequest) -> Result<Vec<SweepPoint>> {
    let SweepRequest { setup, vary, values, policies: policy_spec } = request;
    let vary = *vary;
    if values.is_empty() {
        return Err(Error::new(ErrorKind::Sweep, "no values").in_setting("values", ""));
    }
    let mut points = Vec::new();
    if vary == Vary::PageSize {
        for &v in values {
            if !(v >= 64.0 && (v as u64).is_power_of_two() && v.fract() == 0.0) {
                return Err(Error::new(
                    ErrorKind::Sweep,
                    format!("page size {v} is not a power of two of at least 64"),
                )
                .in_setting("values", ""));
            }
        }
        for &v in values {
            let setup = Setup { page_size: Some(v as u64), ..setup.clone() };
            let (prepared, policies) = session.prepare(&setup, policy_spec)?;
            let eval = prepared.evaluate(Costs::new(&prepared.situation.costs), &policies, &EvalOptions::default())?;
            points.push(SweepPoint {
                value: v,
                costs: prepared.situation.costs,
                pages: prepared.partition.pages(),
                accesses: prepared.partition.refs,
                results: eval
                    .results
                    .iter()
                    .map(|r| SweepResult { name: r.name.clone(), cost: r.cost, tally: r.tally })
                    .collect(),
                notes: prepared.situation.notes.clone(),
            });
        }
        return Ok(points);
    }
    let (checked, policies) = session.checked(setup, policy_spec)?;
    if matches!(vary, Vary::BigG | Vary::SmallG) && checked.costs.g.is_none() {
        return Err(Error::new(
            ErrorKind::Sweep,
            format!("{}: the cost model has no global memory (give g and G with --cost, or --cost ace)", vary.label()),
        )
        .in_setting("vary", ""));
    }
    let (prepared, policies) = session.prepare_checked(setup, checked, policies)?;
    let situation = &prepared.situation;
    let base = prepared.evaluate(
        Costs::new(&situation.costs),
        &policies,
        &EvalOptions { skip_optimal: true, ..Default::default() },
    )?;
    for &v in values {
        let params = vary.apply(situation.costs, v);
        params
            .validate()
            .map_err(|e| Error::new(ErrorKind::Sweep, format!("{}={v}: {e}", vary.label())).in_setting("values", ""))?;
        let costs = Costs::new(&params);
        let opt = prepared.evaluate(costs, &crate::place::PolicySet(Vec::new()), &EvalOptions::default())?;
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
            notes: situation.notes.clone(),
        });
    }
    Ok(points)
}

/// The header of a sweep's CSV.
pub const CSV_HEADER: &str =
    "vary,value,policy,cost,mcpr,local,remote,global,moves,replications,moves_per_page,r,R,g,G";

/// A sweep as CSV, a row per value and policy (pandas reads it as is).
pub fn csv(points: &[SweepPoint], vary: Vary) -> String {
    use std::fmt::Write as _;
    let mut out = format!("{CSV_HEADER}\n");
    for p in points {
        let c = &p.costs;
        let opt = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
        for SweepResult { name, cost, tally: t } in &p.results {
            let _ = writeln!(
                out,
                "{},{},{name},{cost},{},{},{},{},{},{},{},{},{},{},{}",
                vary.label(),
                p.value,
                cost / p.accesses.max(1) as f64,
                t.local,
                t.remote,
                t.global,
                t.migrations(),
                t.replications,
                t.new_locations() as f64 / p.pages.max(1) as f64,
                c.r,
                c.big_r,
                opt(c.g),
                opt(c.big_g)
            );
        }
    }
    out
}
