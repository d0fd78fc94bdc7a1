//! A trace too large for one machine as a Parquet dataset partitioned by page range: one
//! sharemap Parquet trace per range of `pages` pages (its accesses in trace order), and a
//! `_sharemap.json` index. Every page's accesses are in one part, so per-page analyses (the
//! optimum and the policies that decide from a page's own references, the oracle's sharing
//! and page usage) run part by part and add up (Python's `sharemap.dask`).

use crate::observer::{Observer, pass};
use crate::{Error, ErrorKind, Result, TraceInput};
use serde::{Deserialize, Serialize};
use sharemap_trace::output::OutputDir;
use sharemap_trace::{Chunk, EventKind, Format, Metadata, TraceWriter};
use std::collections::BTreeMap;
use std::path::Path;

/// Parts written per pass over the input: each holds a Parquet row group in memory.
const OPEN_PARTS: usize = 16;

/// The dataset's index, `_sharemap.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Dataset {
    /// Pages per part.
    pub partition_pages: u64,
    pub page_size: u64,
    pub accesses: u64,
    /// Threads of the whole trace (a part may hold fewer).
    pub threads: u32,
    /// Events of the whole trace, left out of the parts.
    pub events: u64,
    /// Of those, the annotations placement policies heed (init-done, phase changes, regions
    /// of interest).
    pub annotations: u64,
    pub parts: Vec<Part>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Part {
    /// The part's file, relative to the dataset's directory.
    pub file: String,
    /// Its pages: page numbers first_page .. first_page + partition_pages.
    pub first_page: u64,
    pub accesses: u64,
}

/// Writes `input` as a dataset in `dir` (created; refused when it holds anything), `pages`
/// pages per part. Returns the index it wrote.
pub fn write(input: &TraceInput, dir: &Path, pages: u64, observer: &dyn Observer) -> Result<Dataset> {
    if pages == 0 {
        return Err(Error::new(ErrorKind::Partition, "expected a positive number of pages").in_setting("pages", "0"));
    }
    let out = OutputDir::create(dir)?;
    // The parts that hold accesses, and the trace's totals.
    let mut source = input.open()?;
    let meta: Metadata = source.metadata().clone();
    let shift = meta.page_size.max(1).trailing_zeros();
    let total = source.access_count_hint();
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    let (mut threads, mut events, mut annotations) = (meta.threads, 0u64, 0u64);
    pass(observer, "finding page ranges", total, |progress| -> Result<()> {
        let mut chunk = Chunk::default();
        let mut read = 0;
        while source.next_chunk(&mut chunk)? {
            for (&t, &addr) in chunk.accesses.thread.iter().zip(&chunk.accesses.addr) {
                *counts.entry((addr >> shift) / pages).or_default() += 1;
                threads = threads.max(t + 1);
            }
            events += chunk.events.len() as u64;
            annotations += chunk
                .events
                .iter()
                .filter(|e| matches!(e.kind, EventKind::InitDone | EventKind::PhaseChange | EventKind::RoiBegin))
                .count() as u64;
            read += chunk.accesses.len() as u64;
            progress(read);
        }
        Ok(())
    })?;
    drop(source);
    let mut part_meta = meta.clone();
    part_meta.threads = threads;
    part_meta.source.params.insert("partition-pages".into(), pages.to_string());
    let keys: Vec<u64> = counts.keys().copied().collect();
    let file = |k: u64| format!("part-{k:08}.parquet");
    for group in keys.chunks(OPEN_PARTS) {
        let mut writers: BTreeMap<u64, (TraceWriter, Chunk)> = BTreeMap::new();
        for &k in group {
            let w = TraceWriter::to_output(out.output(&file(k))?, Format::Parquet, part_meta.clone())?;
            writers.insert(k, (w, Chunk::default()));
        }
        let mut source = input.open()?;
        pass(observer, "writing parts", total, |progress| -> Result<()> {
            let mut chunk = Chunk::default();
            let mut read = 0;
            while source.next_chunk(&mut chunk)? {
                for a in chunk.accesses.iter() {
                    if let Some((_, pending)) = writers.get_mut(&((a.addr >> shift) / pages)) {
                        pending.accesses.push(a);
                    }
                }
                for (w, pending) in writers.values_mut() {
                    if !pending.accesses.is_empty() {
                        w.chunk(pending)?;
                        pending.clear();
                    }
                }
                read += chunk.accesses.len() as u64;
                progress(read);
            }
            Ok(())
        })?;
        for (w, _) in writers.into_values() {
            w.finish()?;
        }
    }
    let dataset = Dataset {
        partition_pages: pages,
        page_size: meta.page_size,
        accesses: counts.values().sum(),
        threads,
        events,
        annotations,
        parts: counts.iter().map(|(&k, &n)| Part { file: file(k), first_page: k * pages, accesses: n }).collect(),
    };
    let index = serde_json::to_string_pretty(&dataset).map_err(std::io::Error::from)? + "\n";
    out.write("_sharemap.json", index.as_bytes())?;
    out.commit()?;
    Ok(dataset)
}

/// Reads a dataset's index.
pub fn read(dir: &Path) -> Result<Dataset> {
    let path = dir.join("_sharemap.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e} (not a partitioned dataset)", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", path.display())))
}
