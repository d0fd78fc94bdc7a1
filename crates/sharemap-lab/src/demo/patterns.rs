//! The generated patterns: how each shares pages, the placement policies against the
//! optimum on each, and the thread mappings of their sharing.

use super::{Block, Cell, DEMO_ITERATIONS, DEMO_MACHINE, DEMO_THREADS, DemoRequest, Row, Section, Table};
use sharemap::generate::{GenParams, PATTERNS, Pattern};
use sharemap::map::{MapRequest, Mapping};
use sharemap::{LoadedSharing, Machine, PlaceRequest, Session, TraceInput};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// One pattern generated, summarised and its oracle sharing found.
pub struct Generated {
    pub name: &'static str,
    pub path: PathBuf,
    pub accesses: u64,
    pub bytes: u64,
    pub summary: sharemap::trace::TraceSummary,
    pub sharing: LoadedSharing,
    /// Thread pairs that share at least one page.
    pub pairs: BTreeSet<(usize, usize)>,
}

/// How a pattern's trace is sized: its paper-like footprint, or from `accesses` (a quick look).
fn params(p: &Pattern, accesses: Option<u64>) -> GenParams {
    match accesses {
        Some(n) => GenParams::new(DEMO_THREADS, n, 1),
        None => GenParams::sized(DEMO_THREADS, p.default_footprint, DEMO_ITERATIONS, 1),
    }
}

fn machine() -> sharemap::Result<Machine> {
    Ok(Machine::from_spec(DEMO_MACHINE)?)
}

/// Every pattern written into the directory, with its summary and its oracle's findings
/// (the sharing matrix and the pages each thread touched).
pub fn generate(request: &DemoRequest) -> sharemap::Result<Vec<Generated>> {
    let m = machine()?;
    let mut out = Vec::new();
    for p in PATTERNS {
        let path = request.dir.join(format!("{}.trace", p.name));
        let report =
            sharemap::generate::to_file(p, &params(p, request.accesses), &path, None, request.observer.as_ref())?;
        let summary = sharemap::info(&TraceInput::file(&path), &())?;
        let detection = Session::new(TraceInput::file(&path), m.clone(), 1).detect("oracle")?;
        let mut pairs = BTreeSet::new();
        for (_, entry) in detection.pages.sorted() {
            let sharers: Vec<usize> = (0..entry.accesses.len()).filter(|&t| entry.accesses[t] > 0).collect();
            for (k, &a) in sharers.iter().enumerate() {
                pairs.extend(sharers[k + 1..].iter().map(|&b| (a, b)));
            }
        }
        out.push(Generated {
            name: p.name,
            path,
            accesses: report.accesses,
            bytes: report.bytes,
            summary,
            sharing: LoadedSharing::of_detection(&detection),
            pairs,
        });
    }
    Ok(out)
}

/// The pairs in short form ("0-1 1-2 ...", "all N pairs" or a count).
fn pairs_text(pairs: &BTreeSet<(usize, usize)>) -> String {
    let all = (DEMO_THREADS * (DEMO_THREADS - 1) / 2) as usize;
    match pairs.len() {
        0 => "none".into(),
        n if n == all => format!("all {n} pairs"),
        n if n <= 8 => pairs.iter().map(|(a, b)| format!("{a}-{b}")).collect::<Vec<_>>().join(" "),
        n => format!("{n} of {all} pairs"),
    }
}

/// How each pattern's threads share pages.
pub fn sharing(generated: &[Generated], takeaways: &mut Vec<String>) -> Section {
    let mut s = Section::new("patterns");
    let head = [
        "pattern",
        "pages",
        "shared",
        "max/pg",
        "shared%",
        "writes%",
        "B/acc",
        "sharing pairs (threads sharing a page)",
    ];
    let mut rows = Vec::new();
    let (mut none, mut every, mut some) = (Vec::new(), Vec::new(), Vec::new());
    let all = (DEMO_THREADS * (DEMO_THREADS - 1) / 2) as usize;
    for g in generated {
        let sum = &g.summary;
        let share = |n: u64| n as f64 / sum.accesses.max(1) as f64;
        rows.push(Row::of(vec![
            Cell::text(g.name),
            Cell::Count(sum.pages),
            Cell::Count(sum.sharing.shared_pages),
            Cell::Count(sum.sharing.pages_by_sharers.keys().max().copied().unwrap_or(0) as u64),
            Cell::Percent(share(sum.sharing.accesses_to_shared_pages)),
            Cell::Percent(share(sum.writes)),
            Cell::Number(g.bytes as f64 / g.accesses.max(1) as f64, 2),
            Cell::text(pairs_text(&g.pairs)),
        ]));
        match g.pairs.len() {
            0 => none.push(g.name),
            n if n == all => every.push(g.name),
            _ => some.push(g.name),
        }
    }
    s.blocks.push(Block::Table(Table { head: head.map(String::from).to_vec(), rows }));
    s.line("(shared% = accesses to pages touched by 2+ threads; B/acc = bytes per access in the native trace)");
    s.line(format!(
        "Reading: {} of {} patterns share pages between some pairs of threads only ({}): there a mapping can bring the pairs together. {} share{} between every pair ({}): no grouping of threads can help, only where each page lies. Sharing nothing: {}{}.",
        some.len(),
        PATTERNS.len(),
        some.join(", "),
        every.len(),
        if every.len() == 1 { "s" } else { "" },
        every.join(", "),
        if none.is_empty() { "none".to_string() } else { none.join(", ") },
        if none.is_empty() { "" } else { " (first touch places it perfectly and no mapping matters)" }
    ));
    takeaways.push(format!(
        "Sharing decides what mapping can do: {} of the {} patterns share between some pairs of threads only, which a mapping can exploit.",
        some.len(),
        PATTERNS.len()
    ));
    s
}

/// Patterns whose placement the demo compares (the private one is trivially local).
const PLACEMENT_PATTERNS: [&str; 9] = [
    "sor",
    "neighbor",
    "all-to-all",
    "matmult",
    "producer-consumer",
    "migratory",
    "read-mostly",
    "phase-change",
    "init-then-compute",
];

/// Threads spread over the packages: two per NUMA node of the SAMMU machine (PUs 0, 8, ... 56).
fn spread(m: &Machine) -> Vec<usize> {
    let step = (m.pu_count() / DEMO_THREADS as usize).max(1);
    (0..DEMO_THREADS as usize).map(|t| (t * step) % m.pu_count()).collect()
}

/// Simulated run time each demo trace stands for: long enough for the time-driven policies
/// (numa-balancing's first scan comes after 1 s, carrefour and platinum decide every second)
/// to act several times.
const DEMO_RUN_MS: u64 = 10_000;

/// The time scale that makes `accesses` last `DEMO_RUN_MS`.
fn refs_per_ms(accesses: u64) -> f64 {
    (accesses as f64 / DEMO_RUN_MS as f64).max(1e-3)
}

fn short(pattern: &str) -> &str {
    match pattern {
        "producer-consumer" => "prod-con",
        "init-then-compute" => "init-cmp",
        "phase-change" => "phases",
        "read-mostly" => "read-mst",
        "all-to-all" => "all2all",
        "migratory" => "migrat.",
        other => other,
    }
}

/// MCPR of the optimum and every policy on each pattern (seed 004's cost model).
pub fn placement(generated: &[Generated], takeaways: &mut Vec<String>) -> sharemap::Result<Section> {
    let m = machine()?;
    let pus = spread(&m);
    let map = pus.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",");
    let accesses_of = |name: &str| generated.iter().find(|g| g.name == name).map_or(0, |g| g.accesses);
    let mut columns = Vec::new();
    let mut costs = None;
    for g in PLACEMENT_PATTERNS.iter().filter_map(|name| generated.iter().find(|g| g.name == *name)) {
        let name = g.name;
        let setup = sharemap::Setup {
            thread_map: sharemap::ThreadMap::Pus(pus.clone()),
            memory_budget: 512 << 20,
            refs_per_ms: Some(refs_per_ms(accesses_of(name))),
            ..sharemap::Setup::default()
        };
        let session = Session::new(TraceInput::file(&g.path), m.clone(), 1);
        let placed = session.place(&PlaceRequest { setup, ..PlaceRequest::new("all") })?;
        costs = Some(placed.situation.costs);
        columns.push(placed.evaluation.results);
    }
    let mut s = Section::new("placement");
    s.line(format!("Data placement: mean cost per reference (MCPR, 1 = every reference local) on {DEMO_MACHINE},"));
    let label = costs.map_or(String::new(), |c| c.label());
    s.line(format!("threads on PUs {map} (two per NUMA node); Bolosky & Scott's (seed 004) costs {label};"));
    s.line(format!(
        "each trace's references spread over {} s of run, so the time-driven policies (numa-balancing, kmaf, carrefour, platinum, replicate-time) act",
        DEMO_RUN_MS / 1000
    ));
    let mut head = vec!["policy".to_string()];
    head.extend(PLACEMENT_PATTERNS.iter().map(|p| short(p).to_string()));
    let rows = (0..columns[0].len())
        .map(|row| {
            let mut cells = vec![Cell::text(&columns[0][row].name)];
            cells.extend(columns.iter().map(|col| Cell::Number(col[row].mcpr, 3)));
            Row::of(cells)
        })
        .collect();
    s.blocks.push(Block::Table(Table { head, rows }));
    // Policies that move or copy pages during the run, and did so on no pattern: said, not
    // left to look like a policy that chose to stay.
    let moving = sharemap::registry::moving_policies();
    let still: Vec<&str> = columns[0]
        .iter()
        .map(|r| r.name.as_str())
        .filter(|name| moving.contains(name))
        .filter(|name| columns.iter().flatten().filter(|r| r.name == *name).all(|r| r.moves + r.replications == 0))
        .collect();
    if !still.is_empty() {
        s.line(format!(
            "(moved or copied no page on any pattern: {}{})",
            still.join(", "),
            if still.contains(&"sammu") {
                format!(
                    "; sammu moves a page once NT = 10 more of its updates come from another node than from the page's own, about one per TLB stay, and {DEMO_ITERATIONS} iterations give each page about {DEMO_ITERATIONS}; the runs of SAMMU (seed 000) lasted seconds (docs/reproduce.md, sammu-time)"
                )
            } else {
                String::new()
            }
        ));
    }
    // The best online policy on each pattern, and first touch, against the optimum (row 0).
    let mut gaps: Vec<(f64, &str, &str)> = Vec::new();
    let mut first_touch: Vec<(f64, &str)> = Vec::new();
    for (col, pattern) in columns.iter().zip(PLACEMENT_PATTERNS) {
        if let Some(best) = col.iter().skip(1).min_by(|a, b| a.mcpr.total_cmp(&b.mcpr)) {
            gaps.push((best.vs_optimal, best.name.as_str(), pattern));
        }
        if let Some(ft) = col.iter().find(|r| r.name == "first-touch") {
            first_touch.push((ft.vs_optimal, pattern));
        }
    }
    let pct = |x: f64| format!("{:.0}%", 100.0 * (x - 1.0));
    let worst_best = gaps.iter().max_by(|a, b| a.0.total_cmp(&b.0));
    let ft_close: Vec<&str> = first_touch.iter().filter(|f| f.0 <= 1.05).map(|f| f.1).collect();
    let ft_worst = first_touch.iter().max_by(|a, b| a.0.total_cmp(&b.0));
    if let (Some(wb), Some(fw)) = (worst_best, ft_worst) {
        s.line(format!(
            "Reading: the optimum is a bound no online policy reaches everywhere: the best policy per pattern is {} to {} above it (worst: {} on {}). First touch, Linux's default, is within 5% on {} of {} patterns{} and {} above on {}.",
            pct(gaps.iter().map(|g| g.0).fold(f64::INFINITY, f64::min)),
            pct(wb.0),
            wb.1,
            wb.2,
            ft_close.len(),
            first_touch.len(),
            if ft_close.is_empty() { String::new() } else { format!(" ({})", ft_close.join(", ")) },
            pct(fw.0),
            fw.1
        ));
        takeaways.push(format!(
            "Against the off-line optimum, first touch loses up to {} ({}); the best online policy per pattern stays within {}.",
            pct(fw.0),
            fw.1,
            pct(wb.0)
        ));
    }
    s.line(format!(
        "(sharemap place neighbor.trace --machine {DEMO_MACHINE} --thread-map {map} --refs-per-ms {} for one trace; sharemap list policies lists them)",
        refs_per_ms(accesses_of("neighbor"))
    ));
    Ok(s)
}

/// The mappings of these algorithms on the demo machine (latency-priced), with the random
/// mapping's cost and the mapping potential.
pub fn mappings(sharing: &LoadedSharing, m: &Machine, algs: &[&str]) -> sharemap::Result<Mapping> {
    let request = MapRequest { algorithms: algs.join(","), ..Default::default() };
    sharemap::map::map(sharing, m, &request, 1)
}

/// Sharing matrices (as heatmaps) and the cost of thread mappings on the SAMMU machine,
/// relative to a random mapping.
pub fn mapping(
    request: &DemoRequest,
    generated: &[Generated],
    takeaways: &mut Vec<String>,
) -> sharemap::Result<Section> {
    let m = machine()?;
    let algs = ["sharemap", "compact", "scatter", "round-robin"];
    let mut s = Section::new("mapping");
    s.line(format!(
        "Sharing (oracle, cache lines) and thread mapping on {DEMO_MACHINE}: mapping cost relative to random"
    ));
    let (mut worth, mut not_worth) = (Vec::new(), Vec::new());
    // Patterns where compact's fixed order costs less than sharemap's mapping in the model.
    let mut compact_cheaper = Vec::new();
    let mut ours = Vec::new();
    let mut rows = Vec::new();
    for name in ["neighbor", "all-to-all", "matmult", "producer-consumer", "migratory", "phase-change"] {
        let Some(g) = generated.iter().find(|g| g.name == name) else { continue };
        let matrix = &g.sharing.matrix;
        let svg =
            sharemap_report::plot::sharing_heatmap_svg(&format!("{name}: sharing between threads (oracle)"), matrix)?;
        sharemap_report::plot::save_svg(&svg, &request.dir.join(format!("heatmap-{name}.svg")))?;
        let mapped = mappings(&g.sharing, &m, &algs)?;
        let random = mapped.random_cost.max(f64::MIN_POSITIVE);
        let rel: Vec<f64> = mapped.mappings.iter().map(|r| r.cost / random).collect();
        let gate = mapped.potential.score;
        ours.push(rel[0]);
        if rel[1] < rel[0] * 0.99 {
            compact_cheaper.push(name);
        }
        if gate >= mapped.potential.threshold {
            worth.push(name);
        } else {
            not_worth.push(name);
        }
        let mut cells = vec![Cell::text(name)];
        cells.extend(rel.iter().map(|&r| Cell::Number(r, 3)));
        cells.push(Cell::Number(gate, 3));
        rows.push(Row { cells, matrix: Some(super::rows_of(matrix)) });
    }
    let mut head = vec!["pattern".to_string()];
    head.extend(algs.iter().map(|a| a.to_string()));
    head.push("potential".into());
    s.blocks.push(Block::Table(Table { head, rows }));
    s.line(format!(
        "(under each pattern its sharing, a row per thread, darker = more sharing, on a log scale from a thousandth of the largest (.) to the largest (@), blank = none; heatmap-PATTERN.{} beside the traces; sharemap map TRACE --algo all)",
        sharemap_report::plot::EXTENSIONS.join("/")
    ));
    let lo = ours.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ours.iter().copied().fold(0.0, f64::max);
    s.line(format!(
        "Reading: with {DEMO_THREADS} threads on {} PUs, keeping them in one package is most of what a mapping gains: sharemap's mapping costs {lo:.2} to {hi:.2} of a random mapping's on every pattern, uniform sharing included, so the potential passes its threshold on {} of {}{}.",
        m.pu_count(),
        worth.len(),
        worth.len() + not_worth.len(),
        if not_worth.is_empty() { String::new() } else { format!(" (not on {})", not_worth.join(", ")) }
    ));
    if !compact_cheaper.is_empty() {
        s.line(format!(
            "compact costs less in this model on {} of {} ({}): it pairs threads on SMT siblings, which share an L1 the model prices cheapest; sharemap keeps one thread per core, because siblings also share the core's pipeline, which the model does not see (docs/detection/README.md).",
            compact_cheaper.len(),
            ours.len(),
            compact_cheaper.join(", ")
        ));
    }
    takeaways.push(format!(
        "On {DEMO_MACHINE}, a thread mapping's gain is mostly keeping the threads in one package ({lo:.2}-{hi:.2} of a random mapping's cost on every pattern); the pattern decides the order within it{}.",
        if compact_cheaper.is_empty() { "" } else { ", where the model prefers SMT siblings and sharemap one thread per core" }
    ));
    Ok(s)
}
