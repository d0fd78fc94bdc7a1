//! The HTML report: one self-contained page (no network, no file beside it: plots are SVG
//! inside `data:` URIs) of sections, each with a line saying how to read it, then its
//! figure, table and notes. [`trace_page`] is `sharemap report`'s page about a trace and
//! what was computed on it; [`reproduce_page`] is `sharemap reproduce --report`'s.

use crate::plot;
use askama::Template;
use base64::Engine;
use sharemap::{Error, ErrorKind, Result};
use std::path::Path;

/// A table: column heads and rows of cells; `right` marks the columns of numbers.
pub struct Table {
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub right: Vec<bool>,
}

impl Table {
    fn new(head: Vec<String>, rows: Vec<Vec<String>>) -> Table {
        let number = |c: &str| {
            let c = c.trim().trim_start_matches('±').trim_end_matches('%').trim();
            c == "-" || c.parse::<f64>().is_ok()
        };
        let right = (0..head.len()).map(|k| rows.iter().all(|r| r.get(k).is_some_and(|c| number(c)))).collect();
        Table { head, rows, right }
    }
}

/// A plot: an SVG as a `data:` URI and what it shows.
pub struct Figure {
    pub src: String,
    pub alt: String,
}

impl Figure {
    fn svg(svg: &str, alt: impl Into<String>) -> Figure {
        let encoded = base64::engine::general_purpose::STANDARD.encode(svg.as_bytes());
        Figure { src: format!("data:image/svg+xml;base64,{encoded}"), alt: alt.into() }
    }
}

/// One section of the page: its heading, the line saying what it shows, then its figure,
/// table and notes.
pub struct Section {
    pub id: &'static str,
    pub title: String,
    pub reading: String,
    pub figure: Option<Figure>,
    pub table: Option<Table>,
    pub notes: Vec<String>,
}

impl Section {
    fn new(id: &'static str, title: impl Into<String>, reading: impl Into<String>) -> Section {
        Section { id, title: title.into(), reading: reading.into(), figure: None, table: None, notes: Vec::new() }
    }
}

#[derive(Template)]
#[template(path = "report.html")]
pub struct Page {
    pub title: String,
    pub subtitle: String,
    pub sections: Vec<Section>,
}

impl Page {
    /// The page as HTML.
    pub fn html(&self) -> Result<String> {
        self.render().map_err(|e| Error::new(ErrorKind::Io, format!("rendering the report: {e}")))
    }

    /// The page written whole to `output` (never a partial file).
    pub fn write(&self, output: &Path) -> Result<()> {
        sharemap::trace::write_whole(output, self.html()?.as_bytes())?;
        Ok(())
    }
}

/// Runs as `sharemap run --csv` writes them: each configuration's times in its order of
/// first appearance, and the file they came from.
pub struct Runs {
    pub file: String,
    pub results: Vec<sharemap_run::ConfigurationResult>,
}

/// What `sharemap report` computed on a trace, for its page.
pub struct TraceReport<'a> {
    /// The trace as the user named it, and its file name.
    pub trace: &'a str,
    pub name: &'a str,
    /// Where the threads are placed (`--thread-map`).
    pub thread_map: &'a str,
    pub summary: &'a sharemap::trace::TraceSummary,
    /// Every policy against the optimum, and the situation they were modelled in.
    pub placed: &'a sharemap::Placement,
    /// The oracle's sharing and page usage.
    pub matrix: &'a sharemap::SharingMatrix,
    pub pages: &'a sharemap::PageUsage,
    pub mapped: &'a sharemap::Mapping,
    pub simulated: &'a sharemap::Simulation,
    pub runs: Option<&'a Runs>,
    /// The part of the trace every figure reads, when not all of it.
    pub window: Option<&'a sharemap::WindowInfo>,
    /// What to use (`sharemap advise`): the page's first section.
    pub advice: &'a sharemap::Advice,
    /// What is shared, by name, when the trace names its data.
    pub shared: Option<&'a sharemap::shared::WhatIsShared>,
}

/// `sharemap report`'s page: the machine, the trace, its sharing and page usage, thread
/// mappings, placements against the optimum, simulated mechanisms and, when given, runs.
pub fn trace_page(r: &TraceReport) -> Result<Page> {
    let machine = &r.placed.situation.machine;
    let mut sections = vec![
        advice_section(r.advice),
        machine_section(r.thread_map, r.placed),
        trace_section(r.summary, r.trace, r.name),
        sharing_section(r.matrix)?,
        shared_section(r.shared),
        pages_section(r.pages, r.matrix.threads())?,
        mapping_section(r.mapped, machine),
        placement_section(r.placed),
        simulation_section(r.simulated, r.name)?,
    ];
    if let Some(runs) = r.runs {
        sections.push(runs_section(runs)?);
    }
    Ok(Page {
        title: format!("sharemap report: {}", r.name),
        subtitle: format!(
            "{} threads, {} accesses{}, modelled on {}; written by sharemap {}",
            r.summary.threads,
            r.summary.accesses,
            r.window.map_or(String::new(), |w| format!(
                " ({}: {:.1} % of the trace's {}{})",
                w.what,
                w.percent(),
                w.total,
                if w.asked { "" } else { "; --no-roi for all of it" }
            )),
            machine.name,
            env!("CARGO_PKG_VERSION")
        ),
        sections,
    })
}

fn percent(part: u64, whole: u64) -> String {
    format!("{:.1}%", 100.0 * part as f64 / whole.max(1) as f64)
}

/// Where every figure is modelled: the machine, the threads' places, the cost model.
fn machine_section(thread_map: &str, placed: &sharemap::Placement) -> Section {
    let situation = &placed.situation;
    let machine = &situation.machine;
    let nodes = machine.numa_count().max(1);
    let mut s = Section::new(
        "machine",
        "Machine",
        format!(
            "Every figure below is modelled on {} ({} PUs, {} NUMA node{}), with threads where {} puts them.",
            machine.name,
            machine.pu_count(),
            nodes,
            if nodes == 1 { "" } else { "s" },
            thread_map
        ),
    );
    let pus: Vec<String> =
        (0..placed.threads).map(|t| format!("{}:{}", situation.placement.pu(t), situation.placement.node(t))).collect();
    s.table = Some(Table::new(
        vec!["what".into(), "value".into()],
        vec![
            vec!["machine".into(), format!("{} — {}", machine.name, machine.summary().description)],
            vec!["thread placement".into(), thread_map.to_string()],
            vec!["threads on PU:node".into(), pus.join(" ")],
            vec!["cost model (Bolosky & Scott)".into(), situation.costs.label()],
            vec!["page size".into(), format!("{} B", situation.page_size.bytes())],
        ],
    ));
    s.notes = situation.notes.clone();
    s
}

/// The trace in figures: threads, accesses, pages, what is shared, its events.
fn trace_section(summary: &sharemap::trace::TraceSummary, trace: &str, name: &str) -> Section {
    let shared = summary.sharing.shared_pages;
    let mut s = Section::new(
        "trace",
        format!("Trace {name}"),
        format!(
            "{} of {} pages are touched by two threads or more and take {} of the {} accesses: that is what a mapping can bring together.",
            shared,
            summary.pages,
            percent(summary.sharing.accesses_to_shared_pages, summary.accesses),
            summary.accesses
        ),
    );
    let mut rows = vec![
        vec!["file".into(), trace.to_string()],
        vec!["threads".into(), summary.threads.to_string()],
        vec!["accesses".into(), summary.accesses.to_string()],
        vec!["writes".into(), percent(summary.writes, summary.accesses)],
        vec!["pages".into(), summary.pages.to_string()],
        vec!["shared pages (2+ threads)".into(), shared.to_string()],
        vec!["shared pages written".into(), summary.sharing.shared_written_pages.to_string()],
    ];
    for (event, count) in &summary.events {
        rows.push(vec![format!("event {event}"), count.to_string()]);
    }
    s.table = Some(Table::new(vec!["what".into(), "value".into()], rows));
    s
}

fn sharing_section(matrix: &sharemap::SharingMatrix) -> Result<Section> {
    let n = matrix.threads();
    let pairs = matrix.sharing_pairs();
    let total: f64 = pairs.iter().map(|p| p.2).sum();
    let top: Vec<String> = pairs
        .iter()
        .take(4)
        .map(|(i, j, v)| format!("{i}-{j} ({:.0}%)", 100.0 * v / total.max(f64::MIN_POSITIVE)))
        .collect();
    let reading = if pairs.is_empty() {
        "No two threads share a cache line: a thread mapping has nothing to bring together.".to_string()
    } else {
        format!(
            "{} of {} thread pairs share; the strongest are {} of all sharing. Pairs drawn dark belong close together (same core or cache).",
            pairs.len(),
            n * n.saturating_sub(1) / 2,
            top.join(", ")
        )
    };
    let mut s = Section::new("sharing", "Sharing between threads", reading);
    let svg = plot::sharing_heatmap_svg("Sharing between threads (oracle, cache lines)", matrix)?;
    s.figure = Some(Figure::svg(&svg, "heatmap of the sharing between each pair of threads"));
    s.notes.push("Counted by the oracle detector over 64-byte lines; the colour scale is logarithmic, so weak sharing stays visible.".into());
    Ok(s)
}

fn pages_section(usage: &sharemap::PageUsage, threads: usize) -> Result<Section> {
    let pages = usage.sorted();
    let sum = |a: &[u64]| a.iter().sum::<u64>();
    let total: u64 = pages.iter().map(|(_, e)| sum(&e.accesses)).sum();
    let private: Vec<u64> = pages
        .iter()
        .filter(|(_, e)| e.accesses.iter().filter(|&&a| a > 0).count() <= 1)
        .map(|(_, e)| sum(&e.accesses))
        .collect();
    let mut by_count: Vec<u64> = pages.iter().map(|(_, e)| sum(&e.accesses)).collect();
    by_count.sort_unstable_by(|a, b| b.cmp(a));
    let busiest = by_count.len().div_ceil(10);
    let reading = format!(
        "{} of {} pages are used by one thread only (they belong on its node) and take {} of the accesses; the busiest tenth of the pages take {}.",
        private.len(),
        pages.len(),
        percent(private.iter().sum(), total),
        percent(by_count.iter().take(busiest).sum(), total)
    );
    let mut s = Section::new("pages", "Page usage", reading);
    let svg = plot::page_usage_svg(usage, threads)?;
    s.figure = Some(Figure::svg(&svg, "heatmap of accesses per page and thread"));
    Ok(s)
}

/// The answer first: which mapping and placement, how much faster, why (`sharemap advise`).
fn advice_section(a: &sharemap::Advice) -> Section {
    let mut s = Section::new("advice", "What to use", format!("{}.", a.verdict));
    let rows = a
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            vec![
                if i == a.best && a.worth_it {
                    format!("{} (use)", c.candidate.name)
                } else {
                    c.candidate.name.to_string()
                },
                format!("{:.3}", c.speedup),
                format!("{:.2}", c.llc_misses_vs_os),
                format!("{:.0}%", c.local_percent),
                format!("{:.1}%", c.bandwidth_wait_percent),
                c.candidate.what.to_string(),
            ]
        })
        .collect();
    let head = ["candidate", "speedup over os", "LLC misses / os", "local DRAM", "lines waiting for bandwidth", "what"];
    s.table = Some(Table::new(head.map(String::from).to_vec(), rows));
    s.notes.push(format!("Why: {}.", a.why));
    s.notes.push(format!("Check it: {}", a.check));
    if let Some(apply) = &a.apply {
        s.notes.push(format!("Apply it: {apply}"));
    }
    if !a.avoid.is_empty() {
        let each: Vec<String> = a.avoid.iter().map(|(n, sp)| format!("{n} ({:.2}x the OS's time)", 1.0 / sp)).collect();
        s.notes.push(format!("Avoid: {}.", each.join(", ")));
    }
    s.notes.push(format!(
        "Every candidate is simulated on {} in one pass; a gain under {:.0} % is called not worth it. The sections below give the model's detail.",
        a.machine, a.threshold_percent
    ));
    s.notes.extend(a.notes.iter().cloned());
    s
}

/// Objects shown in "what is shared"; the rest are `analyze`'s shared.csv.
const SHARED_ROWS: usize = 15;

fn shared_section(shared: Option<&sharemap::shared::WhatIsShared>) -> Section {
    use sharemap::grouped;
    let Some(w) = shared else {
        return Section::new(
            "shared",
            "What is shared",
            "This trace does not name its data (it is not a recording of a `sharemap cc` build): `sharemap analyze --objects` groups its addresses in ranges instead.",
        );
    };
    let l = &w.lines;
    let reading = format!(
        "{} lines touched: {} truly shared (a word written by one thread and touched by another), {} falsely shared (threads writing different words of one line), {} read-shared, {} private. The objects with the most accesses to truly or falsely shared lines come first.",
        grouped(l.total()),
        grouped(l.true_shared),
        grouped(l.false_shared),
        grouped(l.read_shared),
        grouped(l.private)
    );
    let mut s = Section::new("shared", "What is shared", reading);
    let rows: Vec<Vec<String>> = w
        .objects
        .iter()
        .filter(|o| o.lines.shared() > 0)
        .take(SHARED_ROWS)
        .map(|o| {
            let code: Vec<String> = o.code.iter().map(|c| format!("{} ({})", c.site.describe(), c.samples)).collect();
            vec![
                o.name.clone(),
                format!("{:?}", o.kind).to_lowercase(),
                o.threads.to_string(),
                grouped(o.accesses),
                grouped(o.lines.true_shared),
                grouped(o.lines.false_shared),
                grouped(o.lines.read_shared),
                format!("{} of {}", o.shared_pages, o.pages),
                if code.is_empty() { "-".into() } else { code.join(", ") },
            ]
        })
        .collect();
    if rows.is_empty() {
        s.notes.push("No line was touched by two threads.".into());
    } else {
        let head = [
            "object",
            "kind",
            "threads",
            "accesses",
            "true",
            "false",
            "read",
            "shared pages",
            "code on its shared lines (samples)",
        ];
        s.table = Some(Table::new(head.map(String::from).to_vec(), rows));
    }
    if !w.named {
        s.notes.push("The trace has no allocation records or symbols: objects are address ranges.".into());
    }
    s.notes.push(format!(
        "Words are {}-byte eighths of {}-byte lines. Code: {} access samples, one access in {} per thread; atomic operations carry none. docs/detection/what-is-shared.md",
        w.word_size,
        w.line_size,
        grouped(w.samples),
        w.sample_period
    ));
    s
}

fn mapping_section(mapped: &sharemap::Mapping, machine: &sharemap::Machine) -> Section {
    let os = mapped.os_cost.max(f64::MIN_POSITIVE);
    let random = mapped.random_cost.max(f64::MIN_POSITIVE);
    let ours = mapped.mappings.first();
    let p = &mapped.potential;
    let reading = match ours {
        Some(m) => format!(
            "sharemap's mapping costs {:.3} of the operating system's placement and {:.3} of a random one; mapping potential {:.3} against the threshold {:.3}: {}.",
            m.cost / os,
            m.cost / random,
            p.score,
            p.threshold,
            p.verdict()
        ),
        None => "No mapping was computed.".into(),
    };
    let mut s = Section::new("mapping", "Thread mapping", reading);
    let mut rows =
        vec![vec!["os (modelled)".into(), "1.000".into(), format!("{:.3}", mapped.os_cost / random), "-".into()]];
    for m in &mapped.mappings {
        let pus: Vec<String> = m.mapping.iter().map(|p| p.to_string()).collect();
        rows.push(vec![
            m.algorithm.clone(),
            format!("{:.3}", m.cost / os),
            format!("{:.3}", m.cost / random),
            pus.join(" "),
        ]);
    }
    let head = ["mapping", "cost / os", "cost / random", "PU of thread 0, 1, ..."];
    s.table = Some(Table::new(head.map(String::from).to_vec(), rows));
    s.notes.push(
        "Cost: each pair's sharing priced by the latency of the closest level the two threads share; lower is better."
            .into(),
    );
    s.notes.extend(mapped.default_rule_note(machine));
    s
}

fn placement_section(placed: &sharemap::Placement) -> Section {
    let results = &placed.evaluation.results;
    let optimal = results.first();
    let best = results.iter().skip(1).min_by(|a, b| a.mcpr.total_cmp(&b.mcpr));
    let first_touch = results.iter().find(|r| r.name == "first-touch");
    let reading = match (optimal, best) {
        (Some(o), Some(b)) => {
            let mut line = format!(
                "The off-line optimum costs {:.3} per reference (1 = all local); the best online policy, {}, is {:.1}% above it",
                o.mcpr,
                b.name,
                100.0 * (b.vs_optimal - 1.0)
            );
            if let Some(ft) = first_touch {
                line += &format!(", first touch (Linux's default) {:.1}%", 100.0 * (ft.vs_optimal - 1.0));
            }
            line + "."
        }
        _ => "No policy was evaluated.".into(),
    };
    let mut s = Section::new("placement", "Data placement against the optimum", reading);
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    let (labels, cut) = plot::table_labels(&names);
    s.table = Some(Table::new(
        ["policy", "MCPR", "cost / optimal", "local", "moves", "replicas"].map(String::from).to_vec(),
        results
            .iter()
            .zip(&labels)
            .map(|(r, label)| {
                vec![
                    label.clone(),
                    format!("{:.3}", r.mcpr),
                    format!("{:.3}", r.vs_optimal),
                    format!("{:.1}%", 100.0 * r.local_ratio),
                    r.moves.to_string(),
                    r.replications.to_string(),
                ]
            })
            .collect(),
    ));
    s.notes.push("MCPR: mean cost per reference in Bolosky & Scott's model (a local reference costs 1, a remote one r, a page move or copy G per byte block).".into());
    s.notes.extend(cut.iter().map(|(short, long)| format!("{short} = {long}")));
    s
}

fn simulation_section(sim: &sharemap::Simulation, name: &str) -> Result<Section> {
    let os = sim.mechanisms.iter().find(|m| m.mechanism == "os").map(|m| m.time_ns).filter(|&t| t > 0.0);
    let fastest = sim.mechanisms.iter().min_by(|a, b| a.time_ns.total_cmp(&b.time_ns));
    let reading = match (os, fastest) {
        (Some(t), Some(f)) => format!(
            "On the simulated {}, the fastest mechanism is {} at {:.3} of os's time (below 1 is faster than Linux's placement).",
            sim.machine,
            f.mechanism.split(':').next().unwrap_or(""),
            f.time_ns / t
        ),
        _ => format!("Simulated on {}; os was not among the mechanisms, so times are absolute.", sim.machine),
    };
    let mut s = Section::new("simulation", "Simulated mechanisms", reading);
    let full: Vec<&str> = sim.mechanisms.iter().map(|m| m.mechanism.as_str()).collect();
    let (labels, cut) = plot::table_labels(&full);
    let bars: Vec<(String, f64, Option<f64>)> = sim
        .mechanisms
        .iter()
        .map(|m| (m.mechanism.clone(), os.map_or(m.time_ns / 1e6, |t| m.time_ns / t), None))
        .collect();
    let (label, baseline) = if os.is_some() { ("time / os time", true) } else { ("time (ms)", false) };
    let svg = plot::bars_svg_with(&format!("{name}: simulated execution time"), label, &bars, baseline)?;
    s.figure = Some(Figure::svg(&svg, "bars of each mechanism's simulated time"));
    let head = [
        "mechanism",
        "time / os",
        "LLC misses / 1000 accesses",
        "traffic (KB)",
        "local DRAM",
        "thread moves",
        "page moves",
        "sampling faults",
    ];
    s.table = Some(Table::new(
        head.map(String::from).to_vec(),
        sim.mechanisms
            .iter()
            .zip(&labels)
            .map(|(m, label)| {
                vec![
                    label.clone(),
                    m.vs_os.as_ref().map_or("-".into(), |r| format!("{:.3}", r.time)),
                    format!("{:.2}", m.llc_mpka()),
                    format!("{:.1}", m.counts.interconnect_bytes as f64 / 1e3),
                    format!("{:.1}%", 100.0 * m.local_dram_share),
                    m.counts.thread_migrations.to_string(),
                    m.counts.page_migrations.to_string(),
                    m.counts.faults.to_string(),
                ]
            })
            .collect(),
    ));
    s.notes.extend(sim.mechanisms.iter().filter_map(|m| m.note.as_ref().map(|n| format!("{}: {n}", m.mechanism))));
    s.notes.extend(cut.iter().map(|(short, long)| format!("{short} = {long}")));
    Ok(s)
}

fn runs_section(runs: &Runs) -> Result<Section> {
    let results = &runs.results;
    let base = &results[0];
    let verdicts: Vec<String> = results
        .iter()
        .skip(1)
        .map(|r| {
            let how = if r.normalized < 1.0 { "faster" } else { "slower" };
            match r.significant {
                Some(true) => format!("{} {:.1}% {how} (intervals apart)", r.name, 100.0 * (r.normalized - 1.0).abs()),
                Some(false) => format!("{} within the noise (intervals overlap)", r.name),
                None => format!("{} not comparable (one run)", r.name),
            }
        })
        .collect();
    let reading = if verdicts.is_empty() {
        format!("Only {} was measured: nothing to compare it with.", base.name)
    } else {
        format!("Against {}: {}.", base.name, verdicts.join("; "))
    };
    let mut s = Section::new("runs", "Measured runs", reading);
    let bars: Vec<(String, f64, Option<f64>)> =
        results.iter().map(|r| (r.name.clone(), r.normalized, r.ci95.map(|c| c / base.mean))).collect();
    let svg = plot::bars_svg(
        &format!("wall-clock time over {}'s (95% intervals)", base.name),
        &format!("time / {} time", base.name),
        &bars,
    )?;
    s.figure = Some(Figure::svg(&svg, "bars of each configuration's measured time with its interval"));
    let ratio = format!("time / {}", base.name);
    s.table = Some(Table::new(
        ["configuration", "runs", "mean (s)", "95% interval (s)", &ratio, "difference"].map(String::from).to_vec(),
        results
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.seconds.len().to_string(),
                    format!("{:.4}", r.mean),
                    r.ci95.map_or("-".into(), |c| format!("± {c:.4}")),
                    format!("{:.3}", r.normalized),
                    match r.significant {
                        Some(true) => "significant (intervals apart)".into(),
                        Some(false) => "not significant (intervals overlap)".into(),
                        None if std::ptr::eq(r, base) => "(baseline)".into(),
                        None => "-".into(),
                    },
                ]
            })
            .collect(),
    ));
    s.notes.push(format!("From {} (sharemap run --csv); intervals are Student's t over the runs.", runs.file));
    Ok(s)
}

/// `sharemap reproduce --report`: the claims' verdicts, then a section per claim with its
/// figure (when it has one), the paper's figure beside sharemap's, and why.
pub fn reproduce_page(results: &[sharemap::reproduce::ClaimResult]) -> Result<Page> {
    let tally = sharemap::reproduce::Tally::of(results);
    let mut claims = Section::new(
        "claims",
        "The claims",
        format!(
            "{} claims at the papers' scale: {tally}; each section below gives the experiment's size",
            results.len()
        ),
    );
    claims.table = Some(Table::new(
        vec!["claim".into(), "paper".into(), "verdict".into(), "seconds".into()],
        results
            .iter()
            .map(|r| {
                vec![
                    r.name.to_string(),
                    r.source.to_string(),
                    r.finding.verdict.label().to_string(),
                    format!("{:.1}", r.seconds),
                ]
            })
            .collect(),
    ));
    let mut sections = vec![claims];
    for r in results {
        let f = &r.finding;
        let mut s = Section::new(r.name, r.name, r.claim);
        s.notes.push(format!("paper: {}", f.paper));
        s.notes.push(format!("sharemap: {}", f.sharemap));
        s.notes.push(format!("{}: {}", f.verdict.label(), f.why));
        if let Some(d) = &f.diagnostic {
            s.notes.push(format!(
                "diagnostic: {}: {} ({})",
                d.experiment,
                d.found,
                if d.confirms { "confirms the reason" } else { "does not confirm it" }
            ));
        }
        s.notes.push(format!("scale: {}", f.scale));
        if let Some(fig) = &f.figure {
            s.figure = Some(Figure::svg(&figure_svg(fig)?, fig.title.clone()));
        }
        sections.push(s);
    }
    Ok(Page {
        title: "sharemap reproduce".into(),
        subtitle: "the seed papers' claims as experiments: the paper's figure, sharemap's, and a verdict".into(),
        sections,
    })
}

/// A claim's figure: lines when its x values are numbers, else bars (series / x).
fn figure_svg(fig: &sharemap::reproduce::Figure) -> Result<String> {
    let xs: Option<Vec<f64>> = fig.x.iter().map(|x| x.parse::<f64>().ok()).collect();
    match xs {
        Some(xs) => {
            let series: Vec<plot::Series> = fig
                .series
                .iter()
                .map(|(name, ys)| plot::Series {
                    name: name.clone(),
                    points: xs.iter().copied().zip(ys.iter().copied()).collect(),
                })
                .collect();
            let log_x = xs.first().is_some_and(|&a| a > 0.0) && xs.last().is_some_and(|&b| b / xs[0] >= 16.0);
            plot::svg(&plot::Chart {
                title: &fig.title,
                x_label: &fig.x_label,
                y_label: &fig.y_label,
                series: &series,
                stacked: false,
                log_x,
            })
        }
        None => {
            let bars: Vec<(String, f64, Option<f64>)> = fig
                .series
                .iter()
                .flat_map(|(name, ys)| fig.x.iter().zip(ys).map(move |(x, y)| (format!("{x} {name}"), *y, None)))
                .collect();
            plot::bars_svg_with(&fig.title, &fig.y_label, &bars, true)
        }
    }
}
