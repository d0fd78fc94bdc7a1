//! `sharemap sweep`: the optimum and the policies as one model parameter varies (seed 004
//! figures 4-7 and 12): a CSV and three plots.

use crate::place::{ModelArgs, cost_label, flag_context};
use crate::plot::{self, Chart, Series};
use anyhow::{Result, anyhow, bail};
use sharemap::place::Tally;
use sharemap::trace::{AtomicOutput, flush};
use sharemap::{CostParams, SweepRequest, Vary};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
        let items = s.split(',').map(str::trim).collect::<Vec<_>>();
        if let Some(k) = items.iter().position(|t| t.is_empty()).filter(|_| items.len() > 1) {
            bail!("--values {s}: item {} of the comma list is empty", k + 1);
        }
        items.into_iter().filter(|t| !t.is_empty()).map(num).collect::<Result<Vec<_>>>()?
    };
    if values.is_empty() {
        bail!("--values: no values");
    }
    Ok(values)
}

pub fn run(args: &ModelArgs, vary: Vary, values: &[f64], policy: &str, output: &Path) -> Result<ExitCode> {
    // Names and settings are checked before the passes over the trace.
    sharemap::place::policies(policy, &args.set).map_err(|e| flag_context(e, args))?;
    let setup = args.setup()?;
    let out = AtomicOutput::create(output)?;
    let session = args.session()?;
    let request = SweepRequest { setup, vary, values: values.to_vec(), policies: policy.into() };
    let points = session.sweep(&request).map_err(|e| flag_context(e, args))?;
    crate::trace_cmds::say_excluded(session.input());
    let mut w = out.writer()?;
    w.write_all(sharemap::sweep::csv(&points, vary).as_bytes()).map_err(|e| anyhow!("{}: {e}", output.display()))?;
    flush(&mut w, output)?;
    drop(w);
    out.commit()?;
    let base = plot_base(output);
    plots(args, &session.machine().name, &points, vary, &base)?;
    print_points(args, &points, vary);
    let ext = crate::plot::EXTENSIONS.join(",");
    println!("wrote {} and {}-{{mcpr,moves,breakdown}}.{{{ext}}}", output.display(), base.display());
    Ok(ExitCode::SUCCESS)
}

/// The optimum's cost at each value and the best policy's.
fn print_points(args: &ModelArgs, points: &[sharemap::SweepPoint], vary: Vary) {
    println!("{}: {} values of {}; {}", args.trace.display(), points.len(), vary.label(), cost_label(&points[0].costs));
    let mut notes: Vec<&String> = points.iter().flat_map(|p| &p.notes).collect();
    notes.dedup();
    for note in notes {
        println!("note: {note}");
    }
    println!("{:>12} {:>10} {:>10}   best policy", vary.label(), "optimal", "moves/pg");
    for p in points {
        let best = p.results[1..].iter().min_by(|a, b| a.cost.total_cmp(&b.cost));
        let refs = p.accesses.max(1) as f64;
        println!(
            "{:>12} {:>10.4} {:>10.2}   {}",
            p.value,
            p.results[0].cost / refs,
            p.results[0].tally.new_locations() as f64 / p.pages.max(1) as f64,
            best.map_or(String::from("-"), |b| format!("{} {:.4}", b.name, b.cost / refs))
        );
    }
}

/// Seed 004's figures: MCPR by policy, the optimum's moves per page, and the optimum's
/// cost beyond local references by component, against the value varied.
fn plots(args: &ModelArgs, machine: &str, points: &[sharemap::SweepPoint], vary: Vary, base: &Path) -> Result<()> {
    let x_label = match vary {
        Vary::PageSize => "page size (bytes)".to_string(),
        v => format!(
            "{} (cost of a {})",
            v.label(),
            if matches!(v, Vary::BigG | Vary::BigR) { "page move" } else { "reference" }
        ),
    };
    // Every title says what it is of: the trace, the machine and the cost model.
    let context = format!(
        "{} on {} ({} at the first {})",
        args.trace.file_name().unwrap_or_default().to_string_lossy(),
        machine,
        crate::place::cost_label(&points[0].costs),
        vary.label()
    );
    let titled = |what: &str| format!("{what}: {context}");
    let names: Vec<&str> = points[0].results.iter().map(|r| r.name.as_str()).collect();
    let mcpr: Vec<Series> = names
        .iter()
        .enumerate()
        .map(|(i, name)| Series {
            name: name.to_string(),
            points: points.iter().map(|p| (p.value, p.results[i].cost / p.accesses.max(1) as f64)).collect(),
        })
        .collect();
    let log_x = vary == Vary::PageSize;
    let save = |title: &str, y_label: &str, series: &[Series], stacked: bool, suffix: &str| {
        let chart = Chart { title: &titled(title), x_label: &x_label, y_label, series, stacked, log_x };
        plot::save(&chart, &suffixed(base, suffix))
    };
    save("Mean cost per reference", "MCPR", &mcpr, false, "mcpr")?;
    let moves = [Series {
        name: "optimal".into(),
        points: points
            .iter()
            .map(|p| (p.value, p.results[0].tally.new_locations() as f64 / p.pages.max(1) as f64))
            .collect(),
    }];
    save("Optimal page moves per page", "moves + replications per page", &moves, false, "moves")?;
    let breakdown = breakdown(points);
    save(
        "Optimal cost per reference beyond local references",
        "cost per reference (local references not shown)",
        &breakdown,
        true,
        "breakdown",
    )?;
    Ok(())
}

/// The optimum's cost per reference beyond local references, by component.
fn breakdown(points: &[sharemap::SweepPoint]) -> Vec<Series> {
    // The optimum's cost per reference, by component.
    let part = |f: &dyn Fn(&Tally, &CostParams) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.value, f(&p.results[0].tally, &p.costs) / p.accesses.max(1) as f64)).collect()
    };
    // Local references (about 1 per reference) are left out, as seed 004 clips them in its
    // figure 12: what varies is the rest.
    let mut breakdown = vec![Series { name: "remote references".into(), points: part(&|t, c| t.remote as f64 * c.r) }];
    if points[0].costs.g.is_some() {
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
    breakdown
}

/// `out/sweep.csv` -> `out/sweep`.
fn plot_base(output: &Path) -> PathBuf {
    output.with_extension("")
}

fn suffixed(base: &Path, what: &str) -> PathBuf {
    let name = base.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "sweep".into());
    base.with_file_name(format!("{name}-{what}.svg"))
}
