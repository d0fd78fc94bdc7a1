//! The `sharemap` command line: thin glue over the library crates.

mod demo;
mod info;
mod machine;
mod progress;
mod trace_cmds;

use clap::{Parser, Subcommand};
use sharemap_trace::TraceError;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "sharemap", version, about = "Sharing-aware thread and data mapping for NUMA machines: record, generate and analyse memory-access traces")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a synthetic trace from one of the seed programs' sharing patterns
    Gen {
        /// Pattern name (see --list)
        #[arg(required_unless_present = "list")]
        pattern: Option<String>,
        #[arg(long, default_value_t = 8)]
        threads: u32,
        /// Number of accesses (suffixes k, M, G allowed)
        #[arg(long, default_value = "1M", value_parser = parse_count)]
        accesses: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 4096)]
        page_size: u64,
        /// Output file; the format follows the extension (.trace, .csv, .parquet, .din)
        #[arg(short, long, required_unless_present = "list")]
        output: Option<PathBuf>,
        /// Output format, overriding the extension
        #[arg(long)]
        to: Option<String>,
        /// List the patterns and what they model
        #[arg(long)]
        list: bool,
    },
    /// Summarise a trace: accesses, threads, pages, page sharing
    Info {
        trace: PathBuf,
        /// Input format, overriding detection (native, csv, parquet)
        #[arg(long)]
        from: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Convert a trace between native, CSV, Parquet and DineroIV (din, export only)
    Convert {
        input: PathBuf,
        output: PathBuf,
        #[arg(long)]
        from: Option<String>,
        #[arg(long)]
        to: Option<String>,
    },
    /// Record the memory accesses of a program: sharemap record -o OUT -- PROG ARGS...
    Record {
        #[arg(long, default_value = "valgrind", value_parser = ["valgrind"])]
        backend: String,
        #[arg(short, long)]
        output: PathBuf,
        /// Output format, overriding the extension
        #[arg(long)]
        to: Option<String>,
        /// The program and its arguments, after --
        #[arg(last = true, required = true)]
        command: Vec<OsString>,
    },
    /// Describe a machine: hwloc synthetic string, hwloc XML file, preset name or `live`
    Machine {
        #[arg(required_unless_present = "list")]
        spec: Option<String>,
        #[arg(long)]
        json: bool,
        /// List the presets
        #[arg(long)]
        list: bool,
    },
    /// Run the main job on the embedded default: generate the seed patterns, summarise them,
    /// and describe the SAMMU machine
    Demo {
        /// Keep the generated traces in this directory (default: a temporary one)
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Accesses per generated trace
        #[arg(long, default_value = "1M", value_parser = parse_count)]
        accesses: u64,
    },
}

/// "250000", "250k", "1M", "2G" (powers of 1000).
fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, mult) = match t.chars().last() {
        Some('k') | Some('K') => (&t[..t.len() - 1], 1_000),
        Some('m') | Some('M') => (&t[..t.len() - 1], 1_000_000),
        Some('g') | Some('G') => (&t[..t.len() - 1], 1_000_000_000),
        _ => (t, 1),
    };
    digits
        .replace('_', "")
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("'{s}' is not a count (e.g. 500000, 500k, 2M)"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Gen { pattern, threads, accesses, seed, page_size, output, to, list } => {
            if list {
                trace_cmds::list_patterns();
                Ok(ExitCode::SUCCESS)
            } else {
                trace_cmds::generate(&pattern.unwrap_or_default(), threads, accesses, seed, page_size, &output.unwrap_or_default(), to.as_deref())
            }
        }
        Command::Info { trace, from, json } => info::run(&trace, from.as_deref(), json),
        Command::Convert { input, output, from, to } => trace_cmds::convert(&input, &output, from.as_deref(), to.as_deref()),
        Command::Record { backend: _, output, to, command } => trace_cmds::record(&output, to.as_deref(), &command),
        Command::Machine { spec, json, list } => machine::run(spec.as_deref(), json, list),
        Command::Demo { dir, accesses } => demo::run(dir.as_deref(), accesses),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sharemap: {e:#}");
            let code = e.downcast_ref::<TraceError>().map_or(1, |t| t.exit_code());
            ExitCode::from(code as u8)
        }
    }
}
