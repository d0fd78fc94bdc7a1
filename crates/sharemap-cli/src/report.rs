//! `sharemap report`: one self-contained HTML page about a trace. The CLI computes through
//! the Session; the page is sharemap-report's (`html::trace_page`).

use crate::place::{ModelArgs, flag_context};
use anyhow::{Result, anyhow};
use clap::Args;
use sharemap::map::MapRequest;
use sharemap::simulate::SimulateRequest;
use sharemap::{AnalyzeRequest, PlaceRequest};
use sharemap_report::html::{self, Page, Runs, TraceReport};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Clone, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Mechanisms to simulate (as `simulate --mechanism`): a comma list; `all` in it stands for every mechanism
    #[arg(long, default_value = "all")]
    pub mechanism: String,
    /// Measured runs to show with their intervals: the CSV `sharemap run --csv` writes
    #[arg(long, value_name = "CSV")]
    pub runs: Option<PathBuf>,
    /// The HTML file to write
    #[arg(short, long)]
    pub output: PathBuf,
}

pub fn run(args: &ReportArgs) -> Result<ExitCode> {
    // The runs are read first: a bad file is refused before the trace is.
    let runs = args.runs.as_deref().map(read_runs).transpose()?;
    let page = build(args, runs.as_ref())?;
    page.write(&args.output)?;
    println!(
        "wrote {} ({} sections: {}; open it in a browser, it needs nothing else)",
        args.output.display(),
        page.sections.len(),
        page.sections.iter().map(|s| s.id).collect::<Vec<_>>().join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

pub fn read_runs(path: &Path) -> Result<Runs> {
    let results = sharemap_run::runs::read(path).map_err(|e| anyhow!(e.why()))?;
    Ok(Runs { file: path.display().to_string(), results })
}

/// Computes what the page shows, through the Session, and builds the page.
pub fn build(args: &ReportArgs, runs: Option<&Runs>) -> Result<Page> {
    let model = &args.model;
    let session = model.session()?;
    let trace = model.trace.display().to_string();
    let name = model.trace.file_name().map_or(trace.clone(), |n| n.to_string_lossy().into_owned());
    let summary = session.info().map_err(|e| anyhow!(e))?;
    let placed = session
        .place(&PlaceRequest { setup: model.setup()?, ..PlaceRequest::new("all") })
        .map_err(|e| flag_context(e, model))?;
    let analysis =
        session.analyze(&AnalyzeRequest { detector: "oracle".into(), ..Default::default() }).map_err(|e| anyhow!(e))?;
    // The analysis's oracle matrix is what `Session::map` would count again: one pass fewer.
    let sharing = sharemap::LoadedSharing::of_detection(&analysis.detection);
    let request = MapRequest { algorithms: "sharemap,compact,scatter,round-robin,random".into(), ..Default::default() };
    let machine = &placed.situation.machine;
    let mapped = sharemap::map::map(&sharing, machine, &request, model.seed).map_err(|e| anyhow!(e))?;
    let request = SimulateRequest { mechanisms: args.mechanism.clone(), ..Default::default() };
    let simulated = session.simulate(&request).map_err(|e| anyhow!(e))?;
    let advice = session.advise(&sharemap::AdviseRequest::default()).map_err(|e| anyhow!(e))?;
    Ok(html::trace_page(&TraceReport {
        trace: &trace,
        name: &name,
        thread_map: &model.thread_map,
        summary: &summary,
        placed: &placed,
        matrix: &analysis.detection.matrix,
        pages: &analysis.detection.pages,
        mapped: &mapped,
        simulated: &simulated,
        runs,
        window: session.input().window().map_err(|e| anyhow!(e))?.as_deref(),
        advice: &advice,
        shared: analysis.shared.as_ref(),
    })?)
}
