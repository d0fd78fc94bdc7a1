//! `sharemap analyze`: who shares data with whom, and how pages are used.

use crate::plot;
use crate::progress;
use crate::trace_cmds::{format_arg, warn_if_truncated};
use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use sharemap_detect::{Granularity, Oracle};
use sharemap_machine::Machine;
use sharemap_trace::output::{flush, AtomicOutput};
use sharemap_trace::TraceReader;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

#[derive(Serialize)]
struct Summary<'a> {
    trace: String,
    detector: &'a str,
    granularity: &'a str,
    threads: usize,
    pages: usize,
    total_sharing: f64,
    /// The thread pairs that share most, largest first.
    top_pairs: Vec<(usize, usize, f64)>,
}

/// `oracle`, `oracle:line` or `oracle:page`.
fn parse_detector(spec: &str) -> Result<Granularity> {
    let (name, option) = spec.split_once(':').map_or((spec, None), |(n, o)| (n, Some(o)));
    if name != "oracle" {
        bail!("unknown detector '{name}' (detectors: oracle)");
    }
    match option {
        None | Some("line") => Ok(Granularity::Line),
        Some("page") => Ok(Granularity::Page),
        Some(o) => bail!("detector option '{o}': oracle takes line or page"),
    }
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    let out = AtomicOutput::create(path)?;
    let mut w = out.writer()?;
    w.write_all(text.as_bytes()).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    flush(&mut w, path)?;
    drop(w);
    out.commit()?;
    Ok(())
}

pub fn run(trace: &Path, from: Option<&str>, machine: &str, detector: &str, dir: &Path) -> Result<ExitCode> {
    let granularity = parse_detector(detector)?;
    let machine = Machine::from_spec(machine).map_err(|e| anyhow!("{e}"))?;
    let mut reader = TraceReader::open(trace, format_arg(from)?)?;
    warn_if_truncated(&reader, trace);
    std::fs::create_dir_all(dir).map_err(|e| anyhow!("{}: cannot create the output directory: {e}", dir.display()))?;
    let bar = progress::bar(reader.access_count_hint(), "detecting sharing");
    let (matrix, usage) = Oracle::run(&mut reader, granularity, |n| bar.set_position(n))?;
    bar.finish_and_clear();
    let n = matrix.threads();
    let pus = machine.pu_count();
    let node_of = |t: u32| machine.pu_numa[t as usize % pus] as u32;

    write_file(&dir.join("comm.csv"), &matrix.to_numalize_csv())?;
    write_file(&dir.join("comm.mat"), &matrix.to_topomatch())?;
    write_file(&dir.join("comm.grf"), &sharemap_mapping::scotch::graph(&matrix))?;
    write_file(&dir.join("machine.tgt"), &sharemap_mapping::scotch::tleaf(&machine, sharemap_mapping::CostModel::Latency))?;
    write_file(&dir.join("pages.csv"), &usage.to_numalize_csv(n, node_of))?;
    let gran = if granularity == Granularity::Line { "line" } else { "page" };
    let svg = plot::heatmap_svg(&format!("Sharing between threads (oracle, {gran})"), n, |i, j| matrix.get(i, j))?;
    plot::save_svg(&svg, &dir.join("heatmap.svg"))?;
    let mut pairs: Vec<(usize, usize, f64)> = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).map(|(i, j)| (i, j, matrix.get(i, j))).filter(|p| p.2 > 0.0).collect();
    pairs.sort_by(|a, b| b.2.total_cmp(&a.2));
    pairs.truncate(10);
    let summary = Summary {
        trace: trace.display().to_string(),
        detector: "oracle",
        granularity: gran,
        threads: n,
        pages: usage.pages.len(),
        total_sharing: matrix.total(),
        top_pairs: pairs,
    };
    write_file(&dir.join("summary.json"), &(serde_json::to_string_pretty(&summary)? + "\n"))?;
    println!("{}: {n} threads, {} pages; sharing {} (oracle, {gran} granularity)", trace.display(), summary.pages, summary.total_sharing);
    for (i, j, v) in summary.top_pairs.iter().take(5) {
        println!("  threads {i} and {j}: {v}");
    }
    println!("wrote {}/{{comm.csv,comm.mat,comm.grf,machine.tgt,pages.csv,heatmap.svg,heatmap.png,summary.json}}", dir.display());
    println!("(Scotch: scotch_gmap {0}/comm.grf {0}/machine.tgt mapping.map)", dir.display());
    Ok(ExitCode::SUCCESS)
}
