//! `sharemap info`: what a trace holds and how its threads share pages.

use crate::progress::Bars;
use crate::trace_cmds::{input, warn_truncated};
use anyhow::Result;
use serde::Serialize;
use sharemap::trace::{TraceSource, TraceSummary};
use std::path::Path;
use std::process::ExitCode;

#[derive(Serialize)]
struct FileInfo {
    path: String,
    format: &'static str,
    bytes: u64,
    bytes_per_access: f64,
    /// Native traces: complete chunks; truncated files report where data ends.
    chunks: Option<usize>,
    complete: bool,
    truncated_at: Option<u64>,
}

#[derive(Serialize)]
struct InfoJson<'a> {
    #[serde(flatten)]
    summary: &'a TraceSummary,
    file: FileInfo,
    /// The region of interest the program marked (what the analyses read by default).
    region_of_interest: Option<&'a sharemap::WindowInfo>,
}

pub fn run(path: &Path, from: Option<&str>, json: bool) -> Result<ExitCode> {
    let input = input(path, from, &Default::default(), sharemap::Selection::Whole)?;
    let reader = input.reader()?;
    let roi = input.clone().select(sharemap::Selection::Auto).window()?;
    warn_truncated(&input, sharemap::Truncation::of(&reader));
    let summary = sharemap::info(&input, &Bars::new())?;
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let file = FileInfo {
        path: path.display().to_string(),
        format: reader.format().name(),
        bytes,
        bytes_per_access: bytes as f64 / summary.accesses.max(1) as f64,
        chunks: reader.native_chunks(),
        complete: reader.truncated_at().is_none(),
        truncated_at: reader.truncated_at(),
    };
    if json {
        let out = InfoJson { summary: &summary, file, region_of_interest: roi.as_deref() };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(&summary, &file);
        if let Some(w) = roi {
            let spans = w.spans.iter().map(|(a, b)| format!("{a}-{b}")).collect::<Vec<_>>().join(", ");
            println!(
                "roi        accesses {spans}: {:.1} % of the trace (sharemap_roi_begin/end; the analyses read it unless --no-roi)",
                w.percent()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn pct(a: u64, b: u64) -> f64 {
    100.0 * a as f64 / b.max(1) as f64
}

fn print_text(s: &TraceSummary, f: &FileInfo) {
    let m = &s.metadata;
    let state =
        if f.complete { "complete".to_string() } else { format!("truncated at byte {}", f.truncated_at.unwrap_or(0)) };
    let chunks = f.chunks.map(|c| format!(", {c} chunks")).unwrap_or_default();
    println!("trace      {} ({}, {} bytes{chunks}, {state})", f.path, f.format, f.bytes);
    let params: Vec<String> = m.source.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let cmd = if m.source.command.is_empty() { String::new() } else { format!(" `{}`", m.source.command.join(" ")) };
    println!(
        "source     {} {}{} {}",
        m.source.kind,
        m.source.name,
        cmd,
        if params.is_empty() { String::new() } else { format!("({})", params.join(" ")) }
    );
    let sampling = match &m.burst {
        Some(b) => {
            let w: Vec<String> = b.weights.iter().map(|w| format!("{w:.1}")).collect();
            format!(
                "burst-sampled: windows of {} µs in every {} (each thread's recorded accesses stand for: {})",
                b.on,
                b.on + b.off,
                if w.is_empty() { "not measured".to_string() } else { w.join(" ") }
            )
        }
        None => format!("sampling 1 in {}", m.sampling_period),
    };
    println!(
        "accesses   {} (reads {}, writes {}), {:.2} bytes/access on disk, {sampling}",
        s.accesses, s.reads, s.writes, f.bytes_per_access
    );
    println!("threads    {}", s.threads);
    let range = match (s.min_addr, s.max_addr) {
        (Some(a), Some(b)) => format!(", addresses {a:#x}..{b:#x}"),
        _ => String::new(),
    };
    println!("pages      {} of {} bytes (lines of {} bytes){range}", s.pages, m.page_size, m.line_size);
    if !s.events.is_empty() {
        let ev: Vec<String> = s.events.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("events     {}", ev.join(", "));
    }
    let by: Vec<String> = s.sharing.pages_by_sharers.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    println!("sharing    pages by number of threads touching them: {}", by.join(" "));
    println!(
        "           shared pages {} ({:.1}%), {:.1}% of accesses, {} of them written",
        s.sharing.shared_pages,
        pct(s.sharing.shared_pages, s.pages),
        pct(s.sharing.accesses_to_shared_pages, s.accesses),
        s.sharing.shared_written_pages
    );
    print_threads(s);
}

/// Each thread's accesses, pages, first touches and, when the tracer saw them, its CPUs.
fn print_threads(s: &TraceSummary) {
    println!("per thread");
    // Where each thread ran, when the tracer saw it (`cpu` events).
    let ran = s.per_thread.iter().any(|t| !t.cpus.is_empty());
    println!(
        "  {:>6} {:>12} {:>12} {:>12} {:>9} {:>12}{}",
        "thread",
        "accesses",
        "reads",
        "writes",
        "pages",
        "first-touch",
        if ran { "  ran on CPUs (moves)" } else { "" }
    );
    for t in &s.per_thread {
        let cpus = if ran {
            let list: Vec<String> = t.cpus.iter().map(|c| c.to_string()).collect();
            format!("  {} ({})", if list.is_empty() { "-".to_string() } else { list.join(",") }, t.cpu_changes)
        } else {
            String::new()
        };
        println!(
            "  {:>6} {:>12} {:>12} {:>12} {:>9} {:>12}{cpus}",
            t.thread, t.accesses, t.reads, t.writes, t.pages, t.first_touches
        );
    }
    if ran {
        println!(
            "  (CPUs as the kernel numbers them, read by the tracer at each block of 4096 records; {})",
            recording_host(&s.metadata.host_cpu_nodes)
        );
    }
}

/// The host a recording's CPU numbers belong to, in words: its CPUs and NUMA nodes, when the
/// trace says (a recording made before sharemap kept them, or converted by another tool,
/// does not).
fn recording_host(nodes: &[u32]) -> String {
    let distinct: std::collections::BTreeSet<u32> = nodes.iter().copied().filter(|&n| n != u32::MAX).collect();
    if distinct.is_empty() {
        return "the trace does not say which host's CPUs these are".into();
    }
    format!(
        "recorded on a host of {} CPUs and {} NUMA node{}",
        nodes.len(),
        distinct.len(),
        if distinct.len() == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_recording_host_is_described_only_when_the_trace_knows_it() {
        assert_eq!(super::recording_host(&[]), "the trace does not say which host's CPUs these are");
        assert_eq!(super::recording_host(&[u32::MAX; 4]), "the trace does not say which host's CPUs these are");
        assert_eq!(super::recording_host(&[0, 0, 1, u32::MAX]), "recorded on a host of 4 CPUs and 2 NUMA nodes");
        assert_eq!(super::recording_host(&[0, 0]), "recorded on a host of 2 CPUs and 1 NUMA node");
    }
}
