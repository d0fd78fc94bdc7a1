//! `sharemap filter`: seed 004's perturbation filters, and how much they move the optimum.

use crate::place::{ModelArgs, cost_label, flag_context};
use crate::trace_cmds::{format_arg, say_excluded};
use anyhow::{Result, bail};
use sharemap::Filter;
use std::path::Path;
use std::process::ExitCode;

pub fn run(
    args: &ModelArgs,
    filters: &[Filter],
    output: Option<&Path>,
    to: Option<&str>,
    sensitivity: bool,
) -> Result<ExitCode> {
    if !sensitivity {
        let (Some(out), [f]) = (output, filters) else {
            bail!("give one of --reorder or --gaps, and -o OUT (or --sensitivity for a report)");
        };
        crate::trace_cmds::refuse_same_file(&args.trace, out)?;
        let session = args.session()?;
        let n = session.filter(*f, out, format_arg(to)?)?;
        say_excluded(session.input());
        eprintln!("sharemap: wrote {n} accesses ({} filter) to {}", f.name(), out.display());
        return Ok(ExitCode::SUCCESS);
    }
    let filters: Vec<Filter> = if filters.is_empty() { vec![Filter::Reorder, Filter::Gaps] } else { filters.to_vec() };
    let setup = args.setup()?;
    let session = args.session()?;
    // With a single filter, -o keeps its output; otherwise the filtered traces are temporary.
    let (situation, report) = session.sensitivity(&setup, &filters, output).map_err(|e| flag_context(e, args))?;
    say_excluded(session.input());
    println!(
        "{}: optimum {:.0} (MCPR {:.5}) with {}",
        args.trace.display(),
        report.optimum,
        report.mcpr,
        cost_label(&situation.costs)
    );
    for f in &report.filtered {
        println!(
            "{:<8} optimum {:.0} (MCPR {:.5}): changed by {:.4}%",
            f.filter.name(),
            f.optimum,
            f.mcpr,
            f.change_percent
        );
    }
    Ok(ExitCode::SUCCESS)
}
