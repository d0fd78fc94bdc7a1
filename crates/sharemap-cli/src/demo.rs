//! `sharemap demo`: the main job on the embedded default. sharemap-demo computes it (the
//! seed papers' patterns, a recorded program, real runs, the guest, the STM); this renders
//! its sections as text and writes the HTML report beside them when asked.

use crate::machine::describe;
use anyhow::{Result, anyhow};
use clap::Parser;
use sharemap::{Machine, SharingMatrix};
use sharemap_lab::demo::{Block, Cell, DEMO_DIR, DEMO_MACHINE, Demo, DemoRequest, SIMULATED, Table};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

pub fn run(dir: Option<&Path>, accesses: Option<u64>, report: bool) -> Result<ExitCode> {
    let dir = dir.unwrap_or(Path::new(DEMO_DIR));
    // Refused before anything is said when the directory is someone else's.
    sharemap_lab::demo::output_dir(dir).map_err(|e| anyhow!(e.why()))?;
    let tools = sharemap_run::Tools::beside(&std::env::current_exe()?);
    let request =
        DemoRequest { dir: dir.to_path_buf(), accesses, tools, observer: Arc::new(crate::progress::Bars::new()) };
    let demo = sharemap_lab::demo::run(&request).map_err(|e| anyhow!(e))?;
    print(&demo)?;
    if report {
        write_report(dir)?;
        println!();
    }
    println!("Written to {}/ (kept; a later demo writes over it):", dir.display());
    for (kind, names) in sharemap_lab::demo::written(dir) {
        println!("  {} {kind}: {}", names.len(), names.join(" "));
    }
    println!("\nWhat to take away:");
    for (i, t) in demo.takeaways.iter().take(5).enumerate() {
        println!("  {}. {t}", i + 1);
    }
    Ok(ExitCode::SUCCESS)
}

/// The machine, then each section and a blank line after it.
fn print(demo: &Demo) -> Result<()> {
    println!("{}", demo.sizing);
    println!("Terms: docs/glossary.md. The modelled machine, on which every modelled figure below is computed:\n");
    print!("{}", describe(&Machine::from_spec(&demo.machine).map_err(|e| anyhow!(e))?));
    println!();
    for section in &demo.sections {
        for block in &section.blocks {
            match block {
                Block::Line(text) => println!("{text}"),
                Block::Table(table) => print_table(table),
                Block::Matrix { matrix, labels, indent } => {
                    for (row, label) in text_heatmap(matrix).iter().zip(labels) {
                        let label = if label.is_empty() { String::new() } else { format!("  {label}") };
                        println!("{:indent$}{row}{label}", "");
                    }
                }
            }
        }
        println!();
    }
    Ok(())
}

/// A matrix of values as the text heatmap sharemap-report draws.
fn text_heatmap(rows: &[Vec<f64>]) -> Vec<String> {
    let mut m = SharingMatrix::new(rows.len());
    for (i, row) in rows.iter().enumerate() {
        for (j, &v) in row.iter().enumerate().skip(i + 1) {
            m.add(i, j, v);
        }
    }
    sharemap_report::text::heatmap(&m)
}

fn cell(c: &Cell) -> String {
    match c {
        Cell::Text(t) => t.clone(),
        Cell::Count(n) => n.to_string(),
        Cell::Number(v, digits) => format!("{v:.digits$}"),
        Cell::Percent(v) => format!("{:.1}%", 100.0 * v),
    }
}

/// A table with each column as wide as its widest entry: the first column and text to the
/// left, numbers to the right; a row's matrix under it, as text.
fn print_table(table: &Table) {
    let rows: Vec<Vec<String>> = table.rows.iter().map(|r| r.cells.iter().map(cell).collect()).collect();
    let columns = table.head.len();
    let width = |k: usize| rows.iter().map(|r| r.get(k).map_or(0, |c| c.len())).chain([table.head[k].len()]).max();
    let widths: Vec<usize> = (0..columns).map(|k| width(k).unwrap_or(0)).collect();
    let numeric =
        |k: usize| k > 0 && table.rows.iter().all(|r| !matches!(r.cells.get(k), Some(Cell::Text(t)) if t != "-"));
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (k, c) in cells.iter().enumerate() {
            let w = widths[k];
            let last = k + 1 == cells.len();
            match (numeric(k), last) {
                (true, _) => out.push_str(&format!("{c:>w$}")),
                (false, true) => out.push_str(c),
                (false, false) => out.push_str(&format!("{c:<w$}")),
            }
            if !last {
                out.push_str("  ");
            }
        }
        out
    };
    println!("{}", line(&table.head));
    for (row, cells) in table.rows.iter().zip(&rows) {
        println!("{}", line(cells));
        if let Some(m) = &row.matrix {
            for r in text_heatmap(m) {
                println!("{:w$}  {r}", "", w = widths[0]);
            }
        }
    }
}

/// `report`'s flags, parsed as the command line parses them.
#[derive(Parser)]
struct ReportFlags {
    #[command(flatten)]
    args: crate::report::ReportArgs,
}

/// `sharemap report` as `DIR/report.html`: of the recorded pipeline with its real runs'
/// times, else of the recorded stencil, else (no compiler) of a generated pattern.
fn write_report(dir: &Path) -> Result<()> {
    let (pipeline, runs, stencil) = (dir.join("pipeline.trace"), dir.join("runs.csv"), dir.join("stencil3d.trace"));
    let html = dir.join("report.html");
    let mut flags: Vec<String> = vec!["report".into()];
    let path = |p: &Path| p.display().to_string();
    if pipeline.is_file() && runs.is_file() {
        flags.extend([path(&pipeline), "--mechanism".into(), SIMULATED.into(), "--runs".into(), path(&runs)]);
    } else if stencil.is_file() {
        flags.extend([path(&stencil), "--mechanism".into(), SIMULATED.into()]);
    } else {
        let trace = path(&dir.join("phase-change.trace"));
        flags.extend([trace, "--mechanism".into(), "os,random,oracle,marathe,carrefour".into()]);
    }
    flags.extend(["--machine".into(), DEMO_MACHINE.into(), "-o".into(), path(&html)]);
    let args = ReportFlags::try_parse_from(&flags).map_err(|e| anyhow!("report: {e}"))?.args;
    let runs = args.runs.as_deref().map(crate::report::read_runs).transpose()?;
    let page = crate::report::build(&args, runs.as_ref())?;
    page.write(&html)?;
    println!("The report: {} (one HTML file, nothing else needed: open it in a browser)", html.display());
    Ok(())
}
