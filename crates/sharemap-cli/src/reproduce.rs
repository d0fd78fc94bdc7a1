//! `sharemap reproduce`: the seed papers' claims as experiments (docs/reproduce.md). The
//! recorded workload a claim needs (the suite's cg) is built with `sharemap cc` and recorded
//! here first, when a compiler is installed.

use anyhow::{Result, anyhow};
use clap::Args;
use sharemap::reproduce::{CLAIMS, ClaimResult, Inputs, Scale, Tally, reproduce};
use sharemap_lab::recordings;
use sharemap_run::Tools;
use std::path::PathBuf;
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
    /// STAMP 0.9.10's source (its release tarball or an unpacked tree) for the
    /// stmap-equation-1 claim (by default $SHAREMAP_ANCHORS/stamp-0.9.10.tar.gz); its
    /// applications are built with `sharemap cc --stm-tl2 --tx-only` and recorded
    #[arg(long, value_name = "PATH")]
    pub stamp: Option<PathBuf>,
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

/// While alive, this process's standard output is its standard error: the recorded
/// programs inherit it and print there, never into the results (`--json` included).
struct OutputToStderr(i32);

impl OutputToStderr {
    fn new() -> OutputToStderr {
        // SAFETY: plain descriptor calls on this process's own standard streams.
        unsafe {
            let saved = libc::dup(1);
            if saved >= 0 {
                libc::dup2(2, 1);
            }
            OutputToStderr(saved)
        }
    }
}

impl Drop for OutputToStderr {
    fn drop(&mut self) {
        if self.0 >= 0 {
            // SAFETY: restores the descriptor saved by `new`, then closes the copy.
            unsafe {
                libc::dup2(self.0, 1);
                libc::close(self.0);
            }
        }
    }
}

pub fn run(args: &ReproduceArgs) -> Result<ExitCode> {
    check(args)?;
    let temp = match &args.keep {
        Some(_) => None,
        None => Some(tempfile::Builder::new().prefix("sharemap-reproduce-").tempdir()?),
    };
    let _listed = temp.as_ref().map(|t| sharemap::trace::Listed::new(t.path()));
    let dir = match (&args.keep, &temp) {
        (Some(d), _) => {
            sharemap::trace::make_dir(d).map_err(|e| anyhow!("--keep {e}"))?;
            d.clone()
        }
        (None, Some(t)) => t.path().to_path_buf(),
        (None, None) => anyhow::bail!("no directory to record in"),
    };
    let quiet = args.json;
    let recorded = record_inputs(args, &dir, quiet)?;
    let scale = if args.quick { Scale::Quick } else { Scale::Paper };
    let inputs = Inputs { scale, dir: Some(dir), ..recorded };
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
        write_report(&results, path, quiet)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Every flag checked before anything is recorded or run.
fn check(args: &ReproduceArgs) -> Result<()> {
    if let Some(path) = &args.report {
        // Refused before the claims run, not after minutes of them.
        sharemap::trace::AtomicOutput::create(path).map_err(|e| anyhow!("--report {}: {e}", path.display()))?;
    }
    for n in &args.claim {
        if !CLAIMS.iter().any(|c| c.name == n) {
            let known: Vec<&str> = CLAIMS.iter().map(|c| c.name).collect();
            let hint = sharemap::did_you_mean(n, known.iter().copied());
            return Err(anyhow!("--claim: unknown claim '{n}' ({hint}claims: {})", known.join(", ")));
        }
    }
    if let Some(cg) = &args.cg
        && !cg.is_file()
    {
        return Err(anyhow!("--cg {}: no such file", cg.display()));
    }
    if let Some(stamp) = &args.stamp
        && !stamp.exists()
    {
        return Err(anyhow!("--stamp {}: no such file or directory", stamp.display()));
    }
    Ok(())
}

/// The recordings the claims asked for need (the cg, the STM programs), made in `dir`
/// unless given, each with why when it could not be made; the programs' output goes to
/// standard error.
fn record_inputs(args: &ReproduceArgs, dir: &std::path::Path, quiet: bool) -> Result<Inputs> {
    let tools = Tools::beside(&std::env::current_exe()?);
    let recording = OutputToStderr::new();
    let wants_cg = args.claim.is_empty() || args.claim.iter().any(|c| c == "cg-data-mapping");
    let (cg, cg_missing) = match (&args.cg, wants_cg) {
        (Some(t), _) => (Some(t.clone()), None),
        (None, false) => (None, None),
        (None, true) => {
            if !quiet {
                eprintln!(
                    "sharemap: reproduce: building and recording the workloads' cg ({} threads, {} rows)",
                    recordings::CG_THREADS,
                    recordings::CG_ROWS
                );
            }
            match recordings::record_cg(dir, &tools) {
                Ok(t) => (Some(t), None),
                Err(why) => (None, Some(format!("no recording of the workloads' cg: {why}"))),
            }
        }
    };
    let wants_stm = args.claim.is_empty() || args.claim.iter().any(|c| c == "stmap-equation-1");
    let (mut stm, mut stm_missing) = (Vec::new(), Vec::new());
    if wants_stm {
        if !quiet {
            eprintln!(
                "sharemap: reproduce: building and recording STM programs ({} threads, the STM's accesses alone)",
                recordings::STM_THREADS
            );
        }
        match recordings::record_intsets(dir, &tools) {
            Ok(r) => stm.extend(r),
            Err(why) => stm_missing.push(format!("no recording of the suite's STM sets: {why}")),
        }
        match recordings::stamp_source(args.stamp.as_deref()) {
            Some(source) => match recordings::record_stamp(&source, dir, &tools) {
                Ok(r) => stm.extend(r),
                Err(why) => stm_missing.push(format!("no recording of STAMP's applications: {why}")),
            },
            None => stm_missing.push(
                "STAMP's applications not run: no STAMP 0.9.10 source (give --stamp with its tarball or directory, or set SHAREMAP_ANCHORS to a directory holding stamp-0.9.10.tar.gz)".into(),
            ),
        }
    }
    drop(recording);
    Ok(Inputs { cg, cg_missing, stm, stm_missing, ..Inputs::default() })
}

/// The results as one HTML page.
fn write_report(results: &[ClaimResult], path: &std::path::Path, quiet: bool) -> Result<()> {
    sharemap_report::html::reproduce_page(results)?.write(path)?;
    if !quiet {
        eprintln!("sharemap: wrote {}", path.display());
    }
    Ok(())
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
    println!("\n{} claims: {}", results.len(), Tally::of(results));
}
