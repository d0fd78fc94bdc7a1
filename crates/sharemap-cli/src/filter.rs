//! `sharemap filter`: seed 004's perturbation filters, and how much they move the optimum.

use crate::place::{ModelArgs, cost_label, prepare};
use crate::trace_cmds::{format_arg, warn_if_truncated};
use anyhow::{Result, bail};
use sharemap_placement::evaluate::EvalOptions;
use sharemap_sources::filters::{Gaps, Reorder};
use sharemap_trace::TraceSource;
use sharemap_trace::{Access, Chunk, Event, TraceReader, TraceWriter};
use std::collections::VecDeque;
use std::path::Path;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Reorder,
    Gaps,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Reorder => "reorder",
            Kind::Gaps => "gaps",
        }
    }
}

/// Writes `input` through the filter to `output`. Events keep their positions in the stream.
pub fn apply(input: &Path, from: Option<&str>, kind: Kind, seed: u64, output: &Path, to: Option<&str>) -> Result<u64> {
    let mut reader = TraceReader::open(input, format_arg(from)?)?;
    warn_if_truncated(&reader, input);
    let mut meta = reader.metadata().clone();
    meta.source.params.insert("filter".into(), kind.name().into());
    meta.source.params.insert("filter-seed".into(), seed.to_string());
    let mut writer = TraceWriter::create(output, format_arg(to)?, meta)?;
    let mut events: VecDeque<Event> = VecDeque::new();
    let mut written = 0u64;
    let mut failure: Option<sharemap_trace::TraceError> = None;
    let mut emit = |a: Access, events: &mut VecDeque<Event>, writer: &mut TraceWriter| {
        while events.front().is_some_and(|e| e.at <= written) {
            let e = events.pop_front().expect("checked");
            if let Err(err) = writer.event(e.thread, e.kind, e.arg, &e.label) {
                failure.get_or_insert(err);
            }
        }
        if let Err(err) = writer.access(a) {
            failure.get_or_insert(err);
        }
        written += 1;
    };
    let threads = reader.metadata().threads.max(1);
    let mut reorder = Reorder::new(Reorder::WINDOW, seed);
    let mut gaps = Gaps::new(threads, seed);
    let mut chunk = Chunk::default();
    while reader.next_chunk(&mut chunk)? {
        events.extend(chunk.events.iter().cloned());
        for a in chunk.accesses.iter() {
            let mut out = |x: Access| emit(x, &mut events, &mut writer);
            match kind {
                Kind::Reorder => reorder.push(a, &mut out),
                Kind::Gaps => gaps.push(a, &mut out),
            }
        }
    }
    {
        let mut out = |x: Access| emit(x, &mut events, &mut writer);
        match kind {
            Kind::Reorder => reorder.finish(&mut out),
            Kind::Gaps => gaps.finish(&mut out),
        }
    }
    if let Some(e) = failure {
        return Err(e.into());
    }
    for e in events {
        writer.event(e.thread, e.kind, e.arg, &e.label)?;
    }
    writer.finish()?;
    Ok(written)
}

pub fn run(
    args: &ModelArgs,
    kinds: &[Kind],
    output: Option<&Path>,
    to: Option<&str>,
    sensitivity: bool,
) -> Result<ExitCode> {
    if !sensitivity {
        let (Some(out), [kind]) = (output, kinds) else {
            bail!("give one of --reorder or --gaps, and -o OUT (or --sensitivity for a report)");
        };
        let n = apply(&args.trace, args.from.as_deref(), *kind, args.seed, out, to)?;
        eprintln!("sharemap: wrote {n} accesses ({} filter) to {}", kind.name(), out.display());
        return Ok(ExitCode::SUCCESS);
    }
    let kinds: Vec<Kind> = if kinds.is_empty() { vec![Kind::Reorder, Kind::Gaps] } else { kinds.to_vec() };
    let base = optimal(args)?;
    println!("{}: optimum {:.0} (MCPR {:.5}) with {}", args.trace.display(), base.0, base.1, base.2);
    let dir = tempfile::tempdir()?;
    // With a single filter, -o keeps its output; otherwise the filtered traces are temporary.
    let keep = output.filter(|_| kinds.len() == 1);
    for &kind in &kinds {
        let path = keep.map(Path::to_path_buf).unwrap_or_else(|| dir.path().join(format!("{}.trace", kind.name())));
        apply(&args.trace, args.from.as_deref(), kind, args.seed, &path, to)?;
        let filtered = optimal(&ModelArgs { trace: path.clone(), from: None, ..args.clone() })?;
        let change = 100.0 * (filtered.0 - base.0).abs() / base.0.max(1.0);
        println!("{:<8} optimum {:.0} (MCPR {:.5}): changed by {change:.4}%", kind.name(), filtered.0, filtered.1);
    }
    Ok(ExitCode::SUCCESS)
}

/// The optimum's cost and MCPR on a trace, and the cost parameters used.
fn optimal(args: &ModelArgs) -> Result<(f64, f64, String)> {
    let prep = prepare(args, &[])?;
    let eval = prep.evaluate(prep.costs(), &[], &EvalOptions::default())?;
    Ok((eval.results[0].cost, eval.results[0].mcpr, cost_label(&prep.situation.costs)))
}
