//! Seed 004's perturbation filters (section 4.3): a trace's interleaving perturbed, and how
//! much that moves the optimum (a placement robust to timing should hardly move).

use crate::place::PolicySet;
use crate::situation::{Setup, Situation};
use crate::{Error, ErrorKind, Result, Session, TraceInput};
use serde::Serialize;
use sharemap_placement::Costs;
use sharemap_sources::Sink;
use sharemap_sources::filters::{Gaps, Reorder};
use sharemap_trace::{Access, Event, Format, Metadata, TraceSource, TraceWriter};
use std::collections::VecDeque;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Filter {
    /// References shuffled within a 100-reference window.
    Reorder,
    /// A thread stalls for 4000 references with probability 1/30000.
    Gaps,
}

impl Filter {
    pub fn name(self) -> &'static str {
        match self {
            Filter::Reorder => "reorder",
            Filter::Gaps => "gaps",
        }
    }

    /// The metadata of the filtered trace: the source's, marked with the filter and seed.
    pub fn metadata(self, source: &Metadata, seed: u64) -> Metadata {
        let mut meta = source.clone();
        meta.source.params.insert("filter".into(), self.name().into());
        meta.source.params.insert("filter-seed".into(), seed.to_string());
        meta
    }
}

/// Streams the trace through the filter into `sink`; events keep their positions in the
/// stream. Returns the accesses written.
pub(crate) fn apply(source: &mut dyn TraceSource, filter: Filter, seed: u64, sink: &mut dyn Sink) -> Result<u64> {
    let threads = source.metadata().threads.max(1);
    let mut events: VecDeque<Event> = VecDeque::new();
    let mut written = 0u64;
    let mut failure: Option<std::io::Error> = None;
    let mut emit = |a: Access, events: &mut VecDeque<Event>, sink: &mut dyn Sink| {
        while events.front().is_some_and(|e| e.at <= written) {
            let e = events.pop_front().expect("checked");
            if let Err(err) = sink.push_event(&e) {
                failure.get_or_insert(err);
            }
        }
        if let Err(err) = sink.access(a) {
            failure.get_or_insert(err);
        }
        written += 1;
    };
    let mut reorder = Reorder::new(Reorder::WINDOW, seed);
    let mut gaps = Gaps::new(threads, seed);
    source.for_each_chunk(&mut |chunk| {
        events.extend(chunk.events.iter().cloned());
        for a in chunk.accesses.iter() {
            let mut out = |x: Access| emit(x, &mut events, sink);
            match filter {
                Filter::Reorder => reorder.push(a, &mut out),
                Filter::Gaps => gaps.push(a, &mut out),
            }
        }
        Ok(())
    })?;
    {
        let mut out = |x: Access| emit(x, &mut events, sink);
        match filter {
            Filter::Reorder => reorder.finish(&mut out),
            Filter::Gaps => gaps.finish(&mut out),
        }
    }
    if let Some(e) = failure {
        return Err(e.into());
    }
    for e in events {
        sink.push_event(&e)?;
    }
    Ok(written)
}

/// The optimum before and after each filter.
#[derive(Clone, Debug, Serialize)]
pub struct Sensitivity {
    pub optimum: f64,
    pub mcpr: f64,
    pub filtered: Vec<Filtered>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Filtered {
    pub filter: Filter,
    pub optimum: f64,
    pub mcpr: f64,
    /// |filtered - original| / original, in percent.
    pub change_percent: f64,
}

/// Writes the session's trace through `filter` to `output` (its format from the extension
/// unless given): the filtered trace's metadata names the filter and the seed. Returns the
/// accesses written.
pub(crate) fn write(session: &Session, filter: Filter, output: &Path, format: Option<Format>) -> Result<u64> {
    let mut source = session.input().open()?;
    let seed = session.seed();
    let mut writer = TraceWriter::create(output, format, filter.metadata(source.metadata(), seed))?;
    let written = apply(source.as_mut(), filter, seed, &mut writer)?;
    writer.finish()?;
    Ok(written)
}

/// How much each filter moves the optimum. The filtered traces go to native files in a
/// temporary directory, or to `keep` when there is one filter.
pub(crate) fn sensitivity(
    session: &Session,
    setup: &Setup,
    filters: &[Filter],
    keep: Option<&Path>,
) -> Result<(Situation, Sensitivity)> {
    if filters.is_empty() {
        return Err(Error::new(ErrorKind::Filters, "none given"));
    }
    let situation = session.situation(setup)?;
    let optimum = |input: &TraceInput| -> Result<(f64, f64)> {
        let prepared = crate::place::prepare(input, situation.clone(), &PolicySet(Vec::new()), session.observer())?;
        let eval = prepared.evaluate(Costs::new(&situation.costs), &PolicySet(Vec::new()), &Default::default())?;
        Ok((eval.results[0].cost, eval.results[0].mcpr))
    };
    let (base, base_mcpr) = optimum(session.input())?;
    let dir = tempfile::tempdir()?;
    let mut filtered = Vec::new();
    for &filter in filters {
        let path = match keep.filter(|_| filters.len() == 1) {
            Some(p) => p.to_path_buf(),
            None => dir.path().join(format!("{}.trace", filter.name())),
        };
        write(session, filter, &path, None)?;
        let (cost, mcpr) = optimum(&TraceInput::file(&path))?;
        let change_percent = 100.0 * (cost - base).abs() / base.max(1.0);
        filtered.push(Filtered { filter, optimum: cost, mcpr, change_percent });
    }
    Ok((situation, Sensitivity { optimum: base, mcpr: base_mcpr, filtered }))
}
