//! `sharemap analyze`: who shares data with whom, and how pages are used.

use crate::plot;
use crate::progress::Bars;
use crate::registry::{self, Row};
use crate::trace_cmds::{say_excluded, warn_if_truncated};
use anyhow::{Result, anyhow};
use sharemap::analyze::Summary;
use sharemap::registry::Kind;
use sharemap::trace::OutputDir;
use sharemap::{AnalyzeRequest, Machine, Session};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// Saves a plot as `name.svg` (and `.png`) in an output directory.
fn save_plot(out: &OutputDir, svg: &str, name: &str) -> Result<()> {
    Ok(plot::save_svg_with(svg, |ext, bytes| Ok(out.write(&format!("{name}.{ext}"), bytes)?))?)
}

pub fn run(
    trace: &Path,
    from: Option<&str>,
    args: &crate::trace_cmds::InputArgs,
    machine: &str,
    request: &AnalyzeRequest,
    dir: &Path,
) -> Result<ExitCode> {
    // Specs are checked before the output directory is made.
    request.check()?;
    let input = crate::trace_cmds::input(trace, from, args, sharemap::Selection::Auto)?;
    crate::trace_cmds::say_first_touch(&input)?;
    let machine = Machine::from_spec(machine).map_err(|e| anyhow!("{e}"))?;
    warn_if_truncated(&input)?;
    let session = Session::new(input, machine.clone(), 1).with_observer(Arc::new(Bars::new()));
    // Everything is written into a hidden staging directory and moved into `dir` at the end,
    // so a failed or stopped run leaves no empty directory and no old and new files mixed.
    let out = OutputDir::create(dir)?;
    let analysis = session.analyze(request).map_err(|e| crate::flags::say(e, crate::flags::At::Analyze { trace }))?;
    say_excluded(session.input());
    write_outputs(&out, &analysis, &machine)?;
    let burst = session.input().open()?.metadata().burst.clone();
    let summary = Summary::of(&analysis, trace.display().to_string(), request.window, burst.as_ref());
    out.write("summary.json", (serde_json::to_string_pretty(&summary)? + "\n").as_bytes())?;
    out.commit()?;
    print_summary(&summary, &analysis, request, burst.as_ref());
    if let Some(w) = &analysis.shared {
        crate::shared::print(w);
    }
    println!(
        "wrote {}/{{comm.csv,comm.mat,comm.grf,machine.tgt,pages.csv,page-nodes.csv,{}{},{},summary.json}}",
        dir.display(),
        if analysis.shared.is_some() { "shared.csv," } else { "" },
        plot::files("pages"),
        plot::files("heatmap")
    );
    println!("(Scotch: scotch_gmap -b0 -cb {0}/comm.grf {0}/machine.tgt mapping.map)", dir.display());
    Ok(ExitCode::SUCCESS)
}

/// The matrices (numalize, TopoMatch, Scotch), the page usage and the two plots.
fn write_outputs(out: &OutputDir, analysis: &sharemap::Analysis, machine: &Machine) -> Result<()> {
    let found = &analysis.detection;
    let (matrix, usage) = (&found.matrix, &found.pages);
    let n = matrix.threads();
    // Pages' first-touch nodes where the modelled OS runs each thread.
    let node_of = |t: u32| analysis.placement.node(t) as u32;
    let write = |name: &str, text: &str| out.write(name, text.as_bytes());
    write("comm.csv", &matrix.to_numalize_csv())?;
    if !analysis.windows.is_empty() {
        out.mkdir("windows")?;
        for (k, w) in analysis.windows.iter().enumerate() {
            write(&format!("windows/comm-{k:04}.csv"), &w.to_numalize_csv())?;
        }
    }
    write("comm.mat", &matrix.to_topomatch())?;
    write("comm.grf", &sharemap::map::scotch_graph(matrix))?;
    write("machine.tgt", &sharemap::map::scotch_target(machine))?;
    // numalize's structure.name: the object each page holds most accesses of.
    let name_of = |page: u64| analysis.shared.as_ref()?.object_of_page(page).map(|o| o.name.clone());
    write("pages.csv", &usage.to_numalize_csv_named(n, node_of, name_of))?;
    write("page-nodes.csv", &usage.to_node_csv(machine.numa_count(), node_of))?;
    if let Some(w) = &analysis.shared {
        write("shared.csv", &w.to_csv())?;
    }
    // The two plots are rendered side by side (rendering costs about as much as detection on
    // tens of millions of accesses).
    std::thread::scope(|scope| -> Result<()> {
        let pages = scope.spawn(|| save_plot(out, &plot::page_usage_svg(usage, n)?, "pages"));
        let title = format!("Sharing between threads ({})", analysis.detector);
        let svg = plot::sharing_heatmap_svg(&title, matrix)?;
        save_plot(out, &svg, "heatmap")?;
        pages.join().map_err(|_| anyhow!("the page-usage plot failed"))?
    })
}

/// What was found, in a few lines: the counts, the windows, the detector's report, the
/// comparison, the burst weights, the fidelity, the pairs that share most.
fn print_summary(
    summary: &Summary,
    analysis: &sharemap::Analysis,
    request: &AnalyzeRequest,
    burst: Option<&sharemap::trace::Burst>,
) {
    // What `seen` counts: the accesses a detector samples, or SAMMU's TLB activations.
    let seen = if summary.detector.starts_with("sammu") {
        format!("{} had {} TLB activations in {} accesses", summary.detector, summary.seen, summary.accesses)
    } else {
        format!("{} saw {} of {} accesses", summary.detector, summary.seen, summary.accesses)
    };
    println!(
        "{}: {} threads, {} pages; {seen}; sharing {}",
        summary.trace,
        summary.threads,
        summary.pages,
        amount(summary.total_sharing)
    );
    if let Some(w) = &summary.windows {
        println!(
            "  {} windows of {} accesses; phase changes at {:?}",
            w.count,
            w.size,
            w.phase_changes.iter().map(|p| p.1).collect::<Vec<_>>()
        );
    }
    for line in analysis.detection.report.iter().flat_map(|r| &r.lines) {
        println!("  {line}");
    }
    if let Some(a) = &analysis.accuracy {
        let r = if a.correlation.is_finite() {
            format!("{:.4}", a.correlation)
        } else {
            "undefined (a matrix the same for every pair, such as no sharing seen)".to_string()
        };
        let which = if request.compare.as_deref().map(str::trim) == Some("oracle")
            && !summary.detector.starts_with("oracle")
        {
            " (a bare `oracle` is compared at the detector's own granularity; give oracle:line or oracle:page to choose)"
        } else {
            ""
        };
        println!("  against {}{which}: MSE {:.5} (scaled to max 1), correlation {r}", a.reference, a.mse);
    }
    if let (Some(w), Some(b)) = (&summary.burst_weights, burst) {
        let w: Vec<String> = w.iter().map(|w| format!("{w:.1}")).collect();
        println!(
            "  burst-sampled: the sharing scaled by {:.1}; each thread's back-edges over those in bursts: {}",
            b.sharing_weight(),
            w.join(" ")
        );
    }
    if let Some(f) = &summary.fidelity {
        print_fidelity(f);
    }
    for (i, j, v) in summary.top_pairs.iter().take(5) {
        println!("  threads {i} and {j}: {}", amount(*v));
    }
}

/// A sharing amount as the other figures are shown: whole counts as they are, the scaled
/// sums of a burst-sampled trace to one decimal.
fn amount(v: f64) -> String {
    if v.fract() == 0.0 { format!("{v}") } else { format!("{v:.1}") }
}

/// A sampled trace against its complete recording.
fn print_fidelity(f: &sharemap::Fidelity) {
    let r = f.correlation.map_or(
        "none (fewer than 3 threads, or a matrix the same for every pair, such as no sharing seen: nothing to correlate)"
            .to_string(),
        |r| format!("{r:.4}"),
    );
    println!("  against the complete trace {}:", f.reference);
    println!("    sharing matrix correlation {r}");
    if let (Some(spread), Some(err)) = (f.spread, f.relative_error) {
        println!(
            "    the complete sharing varies by {:.1} % over thread pairs (std. dev. over mean{}); this one differs from it by {:.1} % of its sum",
            100.0 * spread,
            if spread < 0.05 { ": pairs share alike, the correlation follows noise" } else { "" },
            100.0 * err
        );
    }
    println!(
        "    dominant node agrees on {:.1} % of the {} pages carrying {:.0} % of its accesses",
        100.0 * f.pages_agreeing,
        f.pages_compared,
        100.0 * sharemap::fidelity::PAGE_SHARE
    );
    println!(
        "    within {:.0} % of the best node's accesses on {:.1} % of them ({} of them near-ties: two nodes within {:.0} %)",
        100.0 * (1.0 - sharemap::fidelity::NEAR),
        100.0 * f.pages_near_best,
        f.near_ties,
        100.0 * (1.0 - sharemap::fidelity::NEAR)
    );
    println!(
        "    the {} mapping from this trace costs {:.4}x the one from the complete trace (on its sharing; 1 = as good)",
        f.mapping_algorithm, f.mapping_cost_ratio
    );
}

/// `sharemap detectors`: every detector, its source and its options.
pub fn list() -> Result<ExitCode> {
    let rows = sharemap::registry::rows(Kind::Detector);
    registry::header("detector");
    registry::rows(rows.iter().map(Row::of), registry::spec_form);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    /// Whole counts print as they did; a burst-sampled trace's scaled sums get one decimal,
    /// not seventeen digits.
    #[test]
    fn sharing_amounts_are_rounded_like_the_other_figures() {
        assert_eq!(super::amount(3936.0), "3936");
        assert_eq!(super::amount(9.0 * 437.333333333), "3936.0");
        assert_eq!(super::amount(1234.56789), "1234.6");
    }
}
