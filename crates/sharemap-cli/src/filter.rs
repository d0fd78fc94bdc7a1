//! `sharemap filter`: seed 004's perturbation filters, and how much they move the optimum.

use crate::place::{ModelArgs, cost_label, flag_context};
use crate::trace_cmds::{format_arg, warn_if_truncated};
use anyhow::{Result, bail};
use sharemap::filter::{self, Filter};
use sharemap_trace::{TraceReader, TraceSource, TraceWriter};
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
        let mut reader = args.open()?;
        warn_if_truncated(&reader, &args.trace);
        let mut writer = TraceWriter::create(out, format_arg(to)?, f.metadata(reader.metadata(), args.seed))?;
        let ranges = crate::trace_cmds::exclusion(args.exclude.text())?;
        let n = crate::trace_cmds::excluding(&mut reader, ranges, |source| {
            Ok(filter::apply(source, *f, args.seed, &mut writer)?)
        })?;
        writer.finish()?;
        eprintln!("sharemap: wrote {n} accesses ({} filter) to {}", f.name(), out.display());
        return Ok(ExitCode::SUCCESS);
    }
    let filters: Vec<Filter> = if filters.is_empty() { vec![Filter::Reorder, Filter::Gaps] } else { filters.to_vec() };
    let setup = args.setup()?;
    let format = format_arg(args.from.as_deref())?;
    let mut open = || -> sharemap::Result<Box<dyn TraceSource>> {
        let reader = TraceReader::open(&args.trace, format)?;
        warn_if_truncated(&reader, &args.trace);
        Ok(Box::new(reader))
    };
    // With a single filter, -o keeps its output; otherwise the filtered traces are temporary.
    let keep = |_: Filter| output.filter(|_| filters.len() == 1).map(Path::to_path_buf);
    let (situation, report) =
        filter::sensitivity(&mut open, &setup, &filters, args.seed, &keep).map_err(|e| flag_context(e, args))?;
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
