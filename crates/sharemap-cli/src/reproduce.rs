//! `sharemap reproduce`: the seed papers' claims as experiments (docs/reproduce.md).

use anyhow::Result;
use clap::Args;
use sharemap::reproduce::{CLAIMS, ClaimResult, Inputs, reproduce};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Clone, Debug)]
pub struct ReproduceArgs {
    /// Run only these claims (a comma list, repeatable; see --list)
    #[arg(long, value_delimiter = ',')]
    pub claim: Vec<String>,
    /// A recording of the workloads' cg for the cg-data-mapping claim
    #[arg(long, value_name = "TRACE")]
    pub cg: Option<PathBuf>,
    /// Print the results as JSON
    #[arg(long)]
    pub json: bool,
    /// List the claims and their sources
    #[arg(long)]
    pub list: bool,
}

/// The claims, their summaries and sources.
pub fn list() -> Result<ExitCode> {
    for c in CLAIMS {
        println!("{:<22} {}\n{:<22} {}", c.name, c.summary, "", c.source);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: &ReproduceArgs) -> Result<ExitCode> {
    let inputs = Inputs { cg: args.cg.clone() };
    let quiet = args.json;
    let results = reproduce(&args.claim, &inputs, &|name| {
        if !quiet {
            eprintln!("sharemap: reproducing {name}...")
        }
    })
    .map_err(crate::flags::with_flag)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print(&results);
    }
    Ok(ExitCode::SUCCESS)
}

fn print(results: &[ClaimResult]) {
    let w = results.iter().map(|r| r.name.len()).max().unwrap_or(5).max(5);
    println!("{:<w$}  {:<13}  sharemap's figure", "claim", "verdict");
    for r in results {
        println!("{:<w$}  {:<13}  {}", r.name, r.finding.verdict.label(), r.finding.sharemap);
    }
    for r in results {
        println!("\n{} ({}, {:.1} s)", r.name, r.source, r.seconds);
        println!("  claim:    {}", r.claim);
        println!("  paper:    {}", r.finding.paper);
        println!("  sharemap: {}", r.finding.sharemap);
        println!("  {}: {}", r.finding.verdict.label(), r.finding.why);
    }
    let holds = results.iter().filter(|r| r.finding.verdict == sharemap::reproduce::Verdict::Holds).count();
    println!("\n{holds} of {} claims hold", results.len());
}
