//! `sharemap sweep`: the optimum and the policies as one model parameter varies (seed 004
//! figures 4-7 and 12): a CSV and three plots.

use crate::place::{ModelArgs, cost_label, policy_list, prepare};
use crate::plot::{self, Chart, Series};
use anyhow::{Result, anyhow, bail};
use sharemap_machine::CostParams;
use sharemap_placement::evaluate::EvalOptions;
use sharemap_placement::{Costs, Tally};
use sharemap_trace::output::{AtomicOutput, flush};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vary {
    BigG,
    BigR,
    SmallG,
    SmallR,
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
            _ => bail!("--vary '{s}': expected G, R, g, r or page-size"),
        })
    }

    fn label(self) -> &'static str {
        match self {
            Vary::BigG => "G",
            Vary::BigR => "R",
            Vary::SmallG => "g",
            Vary::SmallR => "r",
            Vary::PageSize => "page-size",
        }
    }

    /// The base parameters with this one set to `v`. Varying G keeps R/G (ACE: R = 2G).
    fn apply(self, base: CostParams, v: f64) -> CostParams {
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

/// `200,400,800` or `start:end:count` (evenly spaced, both ends included).
pub fn parse_values(s: &str) -> Result<Vec<f64>> {
    let num = |t: &str| {
        t.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| anyhow!("--values: '{}' is not a number", t.trim()))
    };
    let values = if let [a, b, n] = s.split(':').collect::<Vec<_>>()[..] {
        let (a, b) = (num(a)?, num(b)?);
        let n: usize = n
            .trim()
            .parse()
            .ok()
            .filter(|&n| n >= 2)
            .ok_or_else(|| anyhow!("--values {s}: the count after the second ':' must be an integer >= 2"))?;
        (0..n).map(|i| a + (b - a) * i as f64 / (n - 1) as f64).collect()
    } else {
        s.split(',').filter(|t| !t.trim().is_empty()).map(num).collect::<Result<Vec<_>>>()?
    };
    if values.is_empty() {
        bail!("--values: no values");
    }
    Ok(values)
}

struct Point {
    value: f64,
    params: CostParams,
    pages: usize,
    refs: u64,
    /// (name, cost, tally): the optimum first.
    results: Vec<(String, f64, Tally)>,
}

pub fn run(args: &ModelArgs, vary: Vary, values: &[f64], policy: &str, output: &Path) -> Result<ExitCode> {
    let policies = policy_list(policy, &args.set)?;
    let out = AtomicOutput::create(output)?;
    let mut points = Vec::new();
    if vary == Vary::PageSize {
        for &v in values {
            if !(v >= 64.0 && (v as u64).is_power_of_two() && v.fract() == 0.0) {
                bail!("--values: page size {v} is not a power of two of at least 64");
            }
            let a = ModelArgs { page_size: Some(v as u64), ..args.clone() };
            let prep = prepare(&a, &policies)?;
            let eval = prep.evaluate(prep.costs(), &policies, &EvalOptions::default())?;
            points.push(Point {
                value: v,
                params: prep.situation.costs,
                pages: prep.partition().pages(),
                refs: prep.partition().refs,
                results: eval.results.iter().map(|r| (r.name.clone(), r.cost, r.tally)).collect(),
            });
        }
    } else {
        let prep = prepare(args, &policies)?;
        // Policies do not look at the costs, so one run gives their tallies at every value.
        let base = prep.evaluate(prep.costs(), &policies, &EvalOptions { skip_optimal: true, ..Default::default() })?;
        for &v in values {
            let params = vary.apply(prep.situation.costs, v);
            params.validate().map_err(|e| anyhow!("{}={v}: {e}", vary.label()))?;
            if matches!(vary, Vary::BigG | Vary::SmallG) && prep.situation.costs.g.is_none() {
                bail!(
                    "--vary {}: the cost model has no global memory (give g and G with --cost, or --cost ace)",
                    vary.label()
                );
            }
            let costs = Costs::new(&params);
            let opt = prep.evaluate(costs, &[], &EvalOptions::default())?;
            let mut results: Vec<(String, f64, Tally)> =
                vec![("optimal".into(), opt.results[0].cost, opt.results[0].tally)];
            for r in &base.results {
                results.push((r.name.clone(), r.tally.cost(&costs), r.tally));
            }
            points.push(Point {
                value: v,
                params,
                pages: prep.partition().pages(),
                refs: prep.partition().refs,
                results,
            });
        }
    }

    let mut w = out.writer()?;
    let io = |e: std::io::Error| anyhow!("{}: {e}", output.display());
    writeln!(w, "vary,value,policy,cost,mcpr,local,remote,global,moves,replications,moves_per_page,r,R,g,G")
        .map_err(io)?;
    for p in &points {
        let c = &p.params;
        let opt = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
        for (name, cost, t) in &p.results {
            writeln!(
                w,
                "{},{},{name},{cost},{},{},{},{},{},{},{},{},{},{},{}",
                vary.label(),
                p.value,
                cost / p.refs.max(1) as f64,
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
            )
            .map_err(io)?;
        }
    }
    flush(&mut w, output)?;
    drop(w);
    out.commit()?;

    let base = plot_base(output);
    let x_label = match vary {
        Vary::PageSize => "page size (bytes)".to_string(),
        v => format!(
            "{} (cost of a {})",
            v.label(),
            if matches!(v, Vary::BigG | Vary::BigR) { "page move" } else { "reference" }
        ),
    };
    let names: Vec<&str> = points[0].results.iter().map(|r| r.0.as_str()).collect();
    let mcpr: Vec<Series> = names
        .iter()
        .enumerate()
        .map(|(i, name)| Series {
            name: name.to_string(),
            points: points.iter().map(|p| (p.value, p.results[i].1 / p.refs.max(1) as f64)).collect(),
        })
        .collect();
    let log_x = vary == Vary::PageSize;
    plot::save(
        &Chart {
            title: "Mean cost per reference",
            x_label: &x_label,
            y_label: "MCPR",
            series: &mcpr,
            stacked: false,
            log_x,
        },
        &suffixed(&base, "mcpr"),
    )?;
    let moves = [Series {
        name: "optimal".into(),
        points: points
            .iter()
            .map(|p| (p.value, p.results[0].2.new_locations() as f64 / p.pages.max(1) as f64))
            .collect(),
    }];
    plot::save(
        &Chart {
            title: "Optimal page moves per page",
            x_label: &x_label,
            y_label: "moves + replications per page",
            series: &moves,
            stacked: false,
            log_x,
        },
        &suffixed(&base, "moves"),
    )?;
    // The optimum's cost per reference, by component.
    let part = |f: &dyn Fn(&Tally, &CostParams) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.value, f(&p.results[0].2, &p.params) / p.refs.max(1) as f64)).collect()
    };
    // Local references (about 1 per reference) are left out, as seed 004 clips them in its
    // figure 12: what varies is the rest.
    let mut breakdown = vec![Series { name: "remote references".into(), points: part(&|t, c| t.remote as f64 * c.r) }];
    if points[0].params.g.is_some() {
        breakdown.push(Series {
            name: "global references".into(),
            points: part(&|t, c| t.global as f64 * c.g.unwrap_or(0.0)),
        });
    }
    breakdown.push(Series {
        name: "page moves".into(),
        points: part(&|t, c| {
            t.node_moves as f64 * c.big_r
                + if t.global_moves > 0 { t.global_moves as f64 * c.big_g.unwrap_or(0.0) } else { 0.0 }
        }),
    });
    plot::save(
        &Chart {
            title: "Optimal cost per reference beyond local references, by component",
            x_label: &x_label,
            y_label: "cost per reference (local references not shown)",
            series: &breakdown,
            stacked: true,
            log_x,
        },
        &suffixed(&base, "breakdown"),
    )?;

    println!(
        "{}: {} values of {}; {}",
        args.trace.display(),
        points.len(),
        vary.label(),
        cost_label(&points[0].params)
    );
    println!("{:>12} {:>10} {:>10}   best policy", vary.label(), "optimal", "moves/pg");
    for p in &points {
        let best = p.results[1..].iter().min_by(|a, b| a.1.total_cmp(&b.1));
        let refs = p.refs.max(1) as f64;
        println!(
            "{:>12} {:>10.4} {:>10.2}   {}",
            p.value,
            p.results[0].1 / refs,
            p.results[0].2.new_locations() as f64 / p.pages.max(1) as f64,
            best.map_or(String::from("-"), |b| format!("{} {:.4}", b.0, b.1 / refs))
        );
    }
    println!("wrote {} and {}-{{mcpr,moves,breakdown}}.{{svg,png}}", output.display(), base.display());
    Ok(ExitCode::SUCCESS)
}

/// `out/sweep.csv` -> `out/sweep`.
fn plot_base(output: &Path) -> PathBuf {
    output.with_extension("")
}

fn suffixed(base: &Path, what: &str) -> PathBuf {
    let name = base.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "sweep".into());
    base.with_file_name(format!("{name}-{what}.svg"))
}
