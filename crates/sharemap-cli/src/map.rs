//! `sharemap map`: a thread-to-PU mapping from a sharing matrix (or a trace's).

use crate::progress;
use crate::registry::{self, Row};
use crate::trace_cmds::{format_arg, warn_if_truncated};
use anyhow::{Result, anyhow, bail};
use sharemap_detect::SharingMatrix;
use sharemap_machine::Machine;
use sharemap_mapping::{CostModel, PairCosts};
use sharemap_trace::TraceReader;
use sharemap_trace::TraceSource;
use std::path::Path;
use std::process::ExitCode;

/// What `map` reads: a matrix file or a trace, its format, and address ranges to leave out
/// of a trace.
pub struct Input<'a> {
    pub path: &'a Path,
    pub from: Option<&'a str>,
    pub exclude: Option<&'a str>,
}

/// A matrix file (numalize CSV, TopoMatch .mat), or a trace whose oracle matrix is used,
/// with the trace's access count (a matrix file has none).
pub fn load_matrix(input: &Input) -> Result<(SharingMatrix, Option<u64>)> {
    let Input { path: input, from, exclude } = *input;
    let is_matrix = match input.extension().and_then(|e| e.to_str()) {
        Some("mat") => true,
        Some("csv") if from.is_none() => {
            // The first bytes tell a CSV trace (header `thread,...`) from a matrix; the file
            // may be gigabytes.
            use std::io::Read;
            let mut head = Vec::with_capacity(64);
            std::fs::File::open(input)
                .and_then(|f| f.take(64).read_to_end(&mut head))
                .map_err(|e| anyhow!("{}: {e}", input.display()))?;
            !String::from_utf8_lossy(&head).trim_start().trim_start_matches('"').starts_with("thread")
        }
        _ => false,
    };
    if is_matrix {
        if exclude.is_some() {
            bail!("--exclude works on traces, not on a matrix file");
        }
        return Ok((SharingMatrix::read(input).map_err(|e| anyhow!("{e}"))?, None));
    }
    let ranges = crate::trace_cmds::exclusion(exclude)?;
    let mut reader = TraceReader::open(input, format_arg(from)?)?;
    warn_if_truncated(&reader, input);
    let bar = progress::bar(reader.access_count_hint(), "detecting sharing");
    let machine = sharemap_machine::Machine::from_spec("pu:1").map_err(|e| anyhow!(e))?;
    let placement = sharemap_core::ThreadPlacement::identity(&machine);
    let spec = sharemap_detect::detector::parse("oracle")?;
    let ctx = sharemap_detect::DetectorContext::new(reader.metadata(), &placement)?;
    let d = sharemap_detect::detector::build(&spec, &ctx)?;
    let found = crate::trace_cmds::excluding(&mut reader, ranges, |source| {
        Ok(sharemap_detect::run(source, vec![d], 0, &|n| bar.set_position(n))?)
    })?;
    bar.finish_and_clear();
    let detection = found.into_iter().next().expect("one detector").detection;
    Ok((detection.matrix, Some(detection.seen)))
}

pub fn run(input: &Input, machine: &str, algo: &str, model: &str, seed: u64, json: bool) -> Result<ExitCode> {
    let model =
        sharemap::map::cost_model(model).map_err(|_| anyhow!("--cost-model '{model}': expected latency or hops"))?;
    if algo.trim() != "all" {
        // Names are checked before the matrix is read.
        for spec in sharemap_core::Spec::parse_list(algo)? {
            sharemap_mapping::build(&spec.to_string(), seed)?;
        }
    }
    let machine = Machine::from_spec(machine).map_err(|e| anyhow!("{e}"))?;
    let (m, accesses) = load_matrix(input)?;
    let input = input.path;
    if m.threads() == 0 {
        bail!("{}: no threads", input.display());
    }
    let costs = PairCosts::new(&machine, model);
    let results = sharemap::map(&m, &machine, algo, model, seed)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&results)?);
        return Ok(ExitCode::SUCCESS);
    }
    let random = sharemap::map::random_cost(&m, &machine, &costs, seed);
    let best = results.iter().map(|r| r.cost).fold(f64::INFINITY, f64::min);
    println!(
        "{}: {} threads on {} ({} PUs); cost = sum of sharing x {} of the lowest shared level",
        input.display(),
        m.threads(),
        machine.name,
        machine.pu_count(),
        if model == CostModel::Hops { "hops" } else { "latency (ns)" }
    );
    println!("{:<12} {:>16} {:>10} {:>10} {:>10}", "algorithm", "cost", "vs random", "vs best", "ms");
    // Ratios to a cost of 0 say nothing: shown as "-".
    let ratio = |cost: f64, to: f64| if to > 0.0 { format!("{:.3}", cost / to) } else { "-".to_string() };
    for r in &results {
        println!(
            "{:<12} {:>16.0} {:>10} {:>10} {:>10.3}",
            r.algorithm,
            r.cost,
            ratio(r.cost, random),
            ratio(r.cost, best),
            r.elapsed_ms
        );
    }
    if m.total() == 0.0 {
        println!("no sharing in the matrix: every mapping costs 0, so where the threads run does not matter here");
    }
    // EagerMap's view, for reference: where the sharing stays.
    let levels: Vec<&str> = results[0].sharing_by_level.iter().map(|l| l.level.as_str()).collect();
    println!(
        "
sharing kept within each level (%, EagerMap's quality view; lower levels are better)"
    );
    println!("{:<12} {}", "algorithm", levels.iter().map(|l| format!("{l:>10}")).collect::<String>());
    for r in &results {
        println!(
            "{:<12} {}",
            r.algorithm,
            r.sharing_by_level.iter().map(|l| format!("{:>10.1}", 100.0 * l.share)).collect::<String>()
        );
    }
    use sharemap_mapping::potential;
    let structural = potential::potential(&m, &machine, &costs);
    let (score, how) = match accesses {
        Some(n) => {
            let weight = potential::sharing_weight(m.total(), n);
            (
                structural * weight,
                format!(
                    "grouping gain {structural:.3} x sharing weight {weight:.3} ({:.4} % of {n} accesses share)",
                    100.0 * m.total() / n.max(1) as f64
                ),
            )
        }
        None => (
            structural,
            "1 - grouped cost / expected random cost; unweighted: a matrix file has no access count".into(),
        ),
    };
    println!(
        "\nmapping potential {score:.3} ({how}): {}",
        if score >= potential::DEFAULT_THRESHOLD { "worth mapping" } else { "below 0.1: a mapping would gain little" }
    );
    let first = &results[0];
    let os: Vec<String> = first.mapping.iter().map(|&pu| machine.pu_os_index(pu).to_string()).collect();
    println!(
        "\n{} mapping, logical PU per thread: {}",
        first.algorithm,
        first.mapping.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",")
    );
    println!("OS PU per thread (taskset -c, hwloc-bind --physical): {}", os.join(","));
    println!(
        "OMP_PLACES=\"{}\" OMP_PROC_BIND=true",
        os.iter().map(|o| format!("{{{o}}}")).collect::<Vec<_>>().join(",")
    );
    Ok(ExitCode::SUCCESS)
}

/// `sharemap algorithms`: every mapping algorithm, its source and its options.
pub fn list() -> Result<ExitCode> {
    let rows = sharemap_mapping::ALGORITHMS.iter().map(|a| Row {
        name: a.name,
        source: a.source,
        summary: a.summary,
        params: a.params,
    });
    registry::header("algorithm");
    registry::rows(rows, |name, p| format!("{name}:{}={}", p.key, p.default));
    Ok(ExitCode::SUCCESS)
}
