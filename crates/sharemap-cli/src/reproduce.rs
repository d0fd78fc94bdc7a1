//! `sharemap reproduce`: the seed papers' claims as experiments (docs/reproduce.md). The
//! recorded workload a claim needs (the suite's cg) is built with `sharemap cc` and recorded
//! here first, when a compiler is installed.

use anyhow::{Result, anyhow};
use clap::Args;
use sharemap::reproduce::{CLAIMS, ClaimResult, Inputs, Scale, Verdict, reproduce};
use sharemap_run::Tools;
use sharemap_run::record::{RecordRequest, Recorder};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Clone, Debug)]
pub struct ReproduceArgs {
    /// Run only these claims (a comma list, repeatable; see --list)
    #[arg(long, value_delimiter = ',')]
    pub claim: Vec<String>,
    /// A recording of the workloads' cg for the cg-data-mapping claim (by default one is
    /// built and recorded: 64 threads, 500,000 rows)
    #[arg(long, value_name = "TRACE")]
    pub cg: Option<PathBuf>,
    /// Sizes shrunk (footprints an eighth, half the iterations) for a quick look; every line
    /// says so, and the verdicts are not the papers' scale's
    #[arg(long)]
    pub quick: bool,
    /// Keep the generated traces and recordings in this directory (else a temporary one)
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Print the results as JSON
    #[arg(long)]
    pub json: bool,
    /// Also write one HTML page of the results, with the figure-like claims drawn
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// List the claims and their sources
    #[arg(long)]
    pub list: bool,
}

/// The claims, their summaries and sources.
pub fn list() -> Result<ExitCode> {
    for c in CLAIMS {
        println!("{:<28} {}\n{:<28} {}", c.name, c.summary, "", c.source);
    }
    Ok(ExitCode::SUCCESS)
}

const CG: &str = include_str!("../../../workloads/cg.c");
const COMMON: &str = include_str!("../../../workloads/common.h");
/// The recorded CG: rows (each 8 nonzeros: 144 bytes, 72 MB in all, the L3s' total on
/// sammu-x7550) and threads (one per PU there).
const CG_ROWS: &str = "500000";
const CG_THREADS: &str = "64";

/// Builds the workloads' cg with `sharemap cc` in `dir` and records its parallel part (its
/// serial self-check left out): the trace, or why not.
fn record_cg(dir: &Path) -> std::result::Result<PathBuf, String> {
    let src = dir.join("cg.c");
    let bin = dir.join("cg");
    let trace = dir.join("cg.trace");
    if trace.is_file() {
        return Ok(trace);
    }
    std::fs::write(&src, CG).and_then(|_| std::fs::write(dir.join("common.h"), COMMON)).map_err(|e| e.to_string())?;
    let args: Vec<OsString> = ["-O2", "-fopenmp"]
        .iter()
        .map(OsString::from)
        .chain([src.into(), "-o".into(), bin.clone().into(), "-lm".into()])
        .collect();
    match crate::cc::wrap(&args, false) {
        Ok(code) if code == ExitCode::SUCCESS => {}
        Ok(_) => return Err("`sharemap cc` failed to build workloads/cg.c".into()),
        Err(e) => return Err(format!("`sharemap cc` cannot build workloads/cg.c here: {e:#}")),
    }
    let request = RecordRequest {
        backend: "tracer".into(),
        event: "page-faults".into(),
        sample: 1,
        exclude_stack: false,
        burst: None,
        no_aslr: false,
        exclude: None,
        output: trace.clone(),
        format: None,
        command: vec![bin.into(), CG_ROWS.into()],
        // The parallel part alone: no serial reference run, as in NPB's CG.
        env: vec![("OMP_NUM_THREADS".into(), CG_THREADS.into()), ("SHAREMAP_WORKLOAD_NOCHECK".into(), "1".into())],
    };
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let recorded = Recorder::new(request, &Tools::beside(&exe)).and_then(|r| r.run()).map_err(|e| e.to_string())?;
    if !recorded.status.success() {
        return Err(format!("the recorded cg exited with {}", recorded.status));
    }
    Ok(trace)
}

pub fn run(args: &ReproduceArgs) -> Result<ExitCode> {
    if let Some(path) = &args.report {
        // Refused before the claims run, not after minutes of them.
        sharemap::trace::AtomicOutput::create(path).map_err(|e| anyhow!("--report {}: {e}", path.display()))?;
    }
    for n in &args.claim {
        if !CLAIMS.iter().any(|c| c.name == n) {
            let known: Vec<&str> = CLAIMS.iter().map(|c| c.name).collect();
            return Err(anyhow!("--claim: unknown claim '{n}' (claims: {})", known.join(", ")));
        }
    }
    if let Some(cg) = &args.cg
        && !cg.is_file()
    {
        return Err(anyhow!("--cg {}: no such file", cg.display()));
    }
    let temp = match &args.keep {
        Some(_) => None,
        None => Some(tempfile::Builder::new().prefix("sharemap-reproduce-").tempdir()?),
    };
    let _listed = temp.as_ref().map(|t| sharemap::trace::Listed::new(t.path()));
    let dir = match (&args.keep, &temp) {
        (Some(d), _) => {
            std::fs::create_dir_all(d).map_err(|e| anyhow!("--keep {}: {e}", d.display()))?;
            d.clone()
        }
        (None, Some(t)) => t.path().to_path_buf(),
        (None, None) => unreachable!("a temporary directory when none is kept"),
    };
    let wants_cg = args.claim.is_empty() || args.claim.iter().any(|c| c == "cg-data-mapping");
    let quiet = args.json;
    let (cg, cg_missing) = match (&args.cg, wants_cg) {
        (Some(t), _) => (Some(t.clone()), None),
        (None, false) => (None, None),
        (None, true) => {
            if !quiet {
                eprintln!(
                    "sharemap: reproduce: building and recording the workloads' cg ({CG_THREADS} threads, {CG_ROWS} rows)"
                );
            }
            match record_cg(&dir) {
                Ok(t) => (Some(t), None),
                Err(why) => (None, Some(format!("no recording of the workloads' cg: {why}"))),
            }
        }
    };
    let scale = if args.quick { Scale::Quick } else { Scale::Paper };
    let inputs = Inputs { cg, cg_missing, scale, dir: Some(dir) };
    let results = reproduce(&args.claim, &inputs, &|name, done| {
        if !quiet {
            match done {
                None => eprintln!("sharemap: reproduce: {name} ..."),
                Some(r) => eprintln!("sharemap: reproduce: {name}: {} ({:.1} s)", r.finding.verdict.label(), r.seconds),
            }
        }
    })
    .map_err(crate::flags::with_flag)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print(&results, scale);
    }
    if let Some(path) = &args.report {
        use askama::Template;
        let html =
            crate::report::reproduce_page(&results)?.render().map_err(|e| anyhow!("rendering the report: {e}"))?;
        sharemap::trace::write_whole(path, html.as_bytes())?;
        if !quiet {
            eprintln!("sharemap: wrote {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print(results: &[ClaimResult], scale: Scale) {
    let w = results.iter().map(|r| r.name.len()).max().unwrap_or(5).max(5);
    if scale == Scale::Quick {
        println!("QUICK: sizes shrunk (footprints an eighth, half the iterations): not the papers' scale\n");
    }
    println!("{:<w$}  {:<13}  sharemap's figure", "claim", "verdict");
    for r in results {
        println!("{:<w$}  {:<13}  {}", r.name, r.finding.verdict.label(), r.finding.sharemap);
    }
    for r in results {
        println!("\n{} ({}, {:.1} s)", r.name, r.source, r.seconds);
        println!("  claim:    {}", r.claim);
        println!("  paper:    {}", r.finding.paper);
        println!("  sharemap: {}", r.finding.sharemap);
        if !r.finding.scale.is_empty() {
            println!("  scale:    {}", r.finding.scale);
        }
        println!("  {}: {}", r.finding.verdict.label(), r.finding.why);
        if let Some(d) = &r.finding.diagnostic {
            println!(
                "  diagnostic: {}: {} ({})",
                d.experiment,
                d.found,
                if d.confirms { "confirms the reason" } else { "does not confirm it" }
            );
        }
    }
    let holds = results.iter().filter(|r| r.finding.verdict == Verdict::Holds).count();
    let not_run = results.iter().filter(|r| r.finding.verdict == Verdict::NotRun).count();
    println!(
        "\n{holds} of {} claims hold{}",
        results.len(),
        if not_run > 0 { format!(" ({not_run} not run)") } else { String::new() }
    );
}
