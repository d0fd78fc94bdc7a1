//! `sharemap map`: a thread-to-PU mapping from a sharing matrix (or a trace's).

use crate::progress::Bars;
use crate::registry::{self, Row};
use crate::trace_cmds::warn_if_truncated;
use anyhow::{Result, anyhow, bail};
use sharemap::map::{CostModel, MapRequest};
use sharemap::registry::Kind;
use sharemap::{LoadedSharing, Machine};
use std::path::Path;
use std::process::ExitCode;

/// What `map` reads: a matrix file or a trace, its format, and the part of a trace to read.
pub struct Input<'a> {
    pub path: &'a Path,
    pub from: Option<&'a str>,
    pub args: &'a crate::trace_cmds::InputArgs,
}

/// A matrix file (numalize CSV, TopoMatch .mat), or a trace whose oracle matrix is used,
/// with the trace's access count (a matrix file has none).
pub fn load_matrix(input: &Input) -> Result<LoadedSharing> {
    let file = sharemap::TraceInput::file(input.path).with_format(crate::trace_cmds::format_arg(input.from)?);
    // A matrix file is not a trace: no part of it to choose, no truncation to warn of.
    let trace = if sharemap::map::is_matrix_file(&file) {
        if input.args.selects() || input.args.exclude().is_some() {
            bail!(
                "{}: a sharing matrix has no accesses to leave out (--exclude, --roi, --no-roi, --phase and --window read traces)",
                input.path.display()
            );
        }
        file
    } else {
        let trace = crate::trace_cmds::input(input.path, input.from, input.args, sharemap::Selection::Auto)?;
        warn_if_truncated(&trace)?;
        trace
    };
    let sharing = sharemap::map::load_sharing(&trace, &Bars::new())
        .map_err(|e| crate::flags::say(e, crate::flags::At::Sharing))?;
    crate::trace_cmds::say_excluded(&trace);
    Ok(sharing)
}

pub fn run(input: &Input, machine: &str, algo: &str, model: &str, seed: u64, json: bool) -> Result<ExitCode> {
    let model =
        sharemap::map::cost_model(model).map_err(|_| anyhow!("--cost-model '{model}': expected latency or hops"))?;
    let request = MapRequest { algorithms: algo.into(), cost_model: model };
    // Names are checked before the matrix is read.
    request.check(seed)?;
    let machine = Machine::from_spec(machine).map_err(|e| anyhow!("{e}"))?;
    let sharing = load_matrix(input)?;
    let m = &sharing.matrix;
    let input = input.path;
    if m.threads() == 0 {
        bail!("{}: no threads", input.display());
    }
    let mapped = sharemap::map::map(&sharing, &machine, &request, seed)?;
    let results = &mapped.mappings;
    if json {
        println!("{}", serde_json::to_string_pretty(results)?);
        return Ok(ExitCode::SUCCESS);
    }
    print_costs(&mapped, &machine, m, model, input);
    print_levels(results);
    capacity_lines(&mapped);
    print_potential(&mapped.potential);
    print_placement(&results[0], &machine);
    Ok(ExitCode::SUCCESS)
}

/// Each mapping's cost, against the modelled OS's, a random mapping's and the best's.
fn print_costs(
    mapped: &sharemap::map::Mapping,
    machine: &Machine,
    m: &sharemap::SharingMatrix,
    model: CostModel,
    input: &Path,
) {
    let results = &mapped.mappings;
    let (os, random) = (mapped.os_cost, mapped.random_cost);
    let best = results.iter().map(|r| r.cost).fold(f64::INFINITY, f64::min);
    println!(
        "{}: {} threads on {} ({} PUs); cost = sum of sharing x {} of the lowest shared level",
        input.display(),
        m.threads(),
        machine.name,
        machine.pu_count(),
        if model == CostModel::Hops { "hops" } else { "latency (ns)" }
    );
    println!(
        "costs relative to: os, where Linux's scheduler puts the threads (modelled, cost {os:.0}); a seeded random mapping; the best below"
    );
    println!("{:<12} {:>16} {:>10} {:>10} {:>10} {:>10}", "algorithm", "cost", "vs os", "vs random", "vs best", "ms");
    // Ratios to a cost of 0 say nothing: shown as "-".
    let ratio = |cost: f64, to: f64| if to > 0.0 { format!("{:.3}", cost / to) } else { "-".to_string() };
    for r in results {
        println!(
            "{:<12} {:>16.0} {:>10} {:>10} {:>10} {:>10.3}",
            r.algorithm,
            r.cost,
            ratio(r.cost, os),
            ratio(r.cost, random),
            ratio(r.cost, best),
            r.elapsed_ms
        );
    }
    if m.total() == 0.0 {
        println!("no sharing in the matrix: every mapping costs 0, so where the threads run does not matter here");
    }
    if let Some(note) = mapped.default_rule_note(machine) {
        println!("note: {note}");
    }
}

/// EagerMap's view, for reference: where the sharing stays.
fn print_levels(results: &[sharemap::map::Mapped]) {
    // EagerMap's view, for reference: where the sharing stays.
    // Columns by level name, over every mapping's levels, so each value sits under its own.
    let mut levels: Vec<&str> = Vec::new();
    for l in results.iter().flat_map(|r| &r.sharing_by_level) {
        if !levels.contains(&l.level.as_str()) {
            levels.push(&l.level);
        }
    }
    println!(
        "
sharing kept within each level (%, EagerMap's quality view; lower levels are better)"
    );
    println!("{:<12} {}", "algorithm", levels.iter().map(|l| format!("{l:>10}")).collect::<String>());
    for r in results {
        println!(
            "{:<12} {}",
            r.algorithm,
            levels
                .iter()
                .map(|&name| match r.sharing_by_level.iter().find(|l| l.level == name) {
                    Some(l) => format!("{:>10.1}", 100.0 * l.share),
                    None => format!("{:>10}", "-"),
                })
                .collect::<String>()
        );
    }
}

/// The mapping-potential gate and what it says.
fn print_potential(potential: &sharemap::Potential) {
    let how = match (potential.accesses, potential.weight, potential.sharing_percent) {
        (Some(n), Some(weight), Some(percent)) => format!(
            "grouping gain {:.3} x sharing weight {weight:.3} ({percent:.4} % of {n} accesses share)",
            potential.structural
        ),
        _ => "1 - grouped cost / expected random cost: the sharing's structure alone".into(),
    };
    println!("\nmapping potential {:.3} ({how}): {}", potential.score, potential.verdict());
}

/// The first mapping as taskset, hwloc-bind and OpenMP take it.
fn print_placement(first: &sharemap::map::Mapped, machine: &Machine) {
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
}

/// The data the threads use against the caches: how sharemap's default spread the threads,
/// and how full each level's fullest cache is under the first mapping.
fn capacity_lines(mapped: &sharemap::Mapping) {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let Some(demand) = &mapped.demand else {
        println!(
            "\ndata the threads use: unknown (a matrix file has no pages), so the mapping weighs sharing alone, not cache capacity; map the trace to weigh it"
        );
        return;
    };
    println!(
        "\ndata the threads use: {:.1} MiB ({:.1} MiB of it on pages several threads share)",
        mib(demand.total()),
        mib(demand.shared_bytes)
    );
    for r in &mapped.mappings {
        if let Some(s) = &r.spread {
            println!("{}: {}", r.algorithm, s.why);
        }
    }
    let first = &mapped.mappings[0];
    if !first.loads.is_empty() {
        let levels: Vec<String> = first
            .loads
            .iter()
            .map(|l| {
                let name = l.level.trim_end_matches("Cache");
                format!("{name} {:.2} of {:.2} MiB ({} of {} in use)", mib(l.most), mib(l.capacity), l.used, l.of)
            })
            .collect();
        println!("fullest cache of each level under {}: {}", first.algorithm, levels.join(", "));
    }
}

/// `sharemap algorithms`: every mapping algorithm, its source and its options.
pub fn list() -> Result<ExitCode> {
    let rows = sharemap::registry::rows(Kind::Algorithm);
    registry::header("algorithm");
    registry::rows(rows.iter().map(Row::of), registry::spec_form);
    Ok(ExitCode::SUCCESS)
}
