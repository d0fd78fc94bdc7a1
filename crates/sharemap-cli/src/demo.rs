//! `sharemap demo`: the main job on the embedded default. Generates every seed pattern for
//! the SAMMU machine's thread count, summarises how each shares pages, and shows the machine.

use crate::machine::describe;
use crate::place;
use crate::trace_cmds::generate_to;
use anyhow::{Result, anyhow, bail};
use sharemap::generate::{GenParams, PATTERNS};
use sharemap::map::{MapRequest, Mapping};
use sharemap::trace::{Chunk, TraceSource, write_whole};
use sharemap::{Machine, PlaceRequest, Session, SharingMatrix, SimulateRequest, TraceInput};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const DEMO_MACHINE: &str = "sammu-x7550";
pub const DEMO_THREADS: u32 = 8;

/// The directory the demo writes to when not told (relative to where it runs).
pub const DEMO_DIR: &str = "sharemap-demo";
/// The file that marks a directory as a demo's, which a later demo may write over.
const MARKER: &str = ".sharemap-demo";

/// The demo's output directory, made if missing: refused when it holds anything and is not
/// a previous demo's (nothing of the user's is written over).
fn output_dir(dir: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries.count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => bail!("{}: {e}", dir.display()),
    };
    if entries > 0 && !dir.join(MARKER).is_file() {
        bail!("{} is not empty and is not a previous demo's: give another --dir", dir.display());
    }
    // Made, or checked, as a directory the demo builds programs in and runs them from: not
    // reached through another user's link, not theirs, not writable by every user.
    sharemap::trace::make_dir(dir)?;
    write_whole(&dir.join(MARKER), b"written by `sharemap demo`; a later demo may write over this directory\n")?;
    Ok(())
}

/// What the demo left in `dir`, in one line per kind of file.
fn written(dir: &Path) -> Vec<String> {
    let mut by_kind: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_file() {
            continue;
        }
        let kind = name.rsplit_once('.').map_or("(built programs)".into(), |(_, ext)| format!(".{ext}"));
        by_kind.entry(kind).or_default().push(name);
    }
    by_kind
        .into_iter()
        .map(|(kind, mut names)| {
            names.sort();
            format!("  {} {kind}: {}", names.len(), names.join(" "))
        })
        .collect()
}

/// Phases past the initialisation of each generated pattern: enough for the phase- and
/// iteration-driven policies to act, few enough for the demo to take a minute.
const DEMO_ITERATIONS: u64 = 3;

/// How a pattern's trace is sized: its paper-like footprint, or from `accesses` (a quick look).
fn demo_params(p: &sharemap::generate::Pattern, accesses: Option<u64>) -> GenParams {
    match accesses {
        Some(n) => GenParams::new(DEMO_THREADS, n, 1),
        None => GenParams::sized(DEMO_THREADS, p.default_footprint, DEMO_ITERATIONS, 1),
    }
}

pub fn run(dir: Option<&Path>, accesses: Option<u64>, report: bool) -> Result<ExitCode> {
    let dir = dir.unwrap_or(Path::new(DEMO_DIR));
    output_dir(dir)?;
    let m = Machine::from_spec(DEMO_MACHINE).map_err(|e| anyhow!(e))?;
    match accesses {
        None => println!(
            "sharemap demo: the seed papers' sharing patterns, {DEMO_THREADS} threads, each pattern's paper-like footprint (1024 pages per thread, matmult 32: past the TLBs' 576 entries a core), {DEMO_ITERATIONS} iterations, seed 1"
        ),
        Some(n) => println!(
            "sharemap demo: the seed papers' sharing patterns, {DEMO_THREADS} threads, {n} accesses each, data sized from them, seed 1 (a quick look at toy sizes, not the papers' scale)"
        ),
    }
    println!("Terms: docs/glossary.md. The modelled machine, on which every modelled figure below is computed:\n");
    print!("{}", describe(&m));
    println!();
    let mut takeaways = Vec::new();
    let counts = patterns_table(dir, accesses, &mut takeaways)?;
    println!();
    placement_table(dir, &counts, &mut takeaways)?;
    println!();
    mapping_table(dir, &mut takeaways)?;
    println!();
    recorded_program(dir, &mut takeaways);
    println!();
    real_runs(dir, &mut takeaways);
    println!();
    stm_runs(dir, &mut takeaways);
    println!();
    if report {
        write_report(dir)?;
        println!();
    }
    println!("Written to {}/ (kept; a later demo writes over it):", dir.display());
    for line in written(dir) {
        println!("{line}");
    }
    println!("\nWhat to take away:");
    for (i, t) in takeaways.iter().take(5).enumerate() {
        println!("  {}. {t}", i + 1);
    }
    Ok(ExitCode::SUCCESS)
}

/// Every pattern generated and summarised: how its threads share pages.
/// Returns each pattern's access count, by name.
fn patterns_table(
    dir: &Path,
    accesses: Option<u64>,
    takeaways: &mut Vec<String>,
) -> Result<std::collections::HashMap<&'static str, u64>> {
    let mut counts = std::collections::HashMap::new();
    println!(
        "{:<18} {:>7} {:>7} {:>7} {:>9} {:>9} {:>7}  sharing pairs (threads sharing a page)",
        "pattern", "pages", "shared", "max/pg", "shared%", "writes%", "B/acc"
    );
    let (mut none, mut every, mut some) = (Vec::new(), Vec::new(), Vec::new());
    for p in PATTERNS {
        let params = demo_params(p, accesses);
        let path = dir.join(format!("{}.trace", p.name));
        let report = generate_to(p, &params, &path, None)?;
        counts.insert(p.name, report.accesses);
        let s = sharemap::info(&TraceInput::file(&path), &())?;
        let max_sharers = s.sharing.pages_by_sharers.keys().max().copied().unwrap_or(0);
        let pairs = sharing_pairs(&path)?;
        println!(
            "{:<18} {:>7} {:>7} {:>7} {:>8.1}% {:>8.1}% {:>7.2}  {}",
            p.name,
            s.pages,
            s.sharing.shared_pages,
            max_sharers,
            100.0 * s.sharing.accesses_to_shared_pages as f64 / s.accesses.max(1) as f64,
            100.0 * s.writes as f64 / s.accesses.max(1) as f64,
            report.bytes as f64 / report.accesses.max(1) as f64,
            pairs
        );
        match pairs.as_str() {
            "none" => none.push(p.name),
            all if all.starts_with("all ") => every.push(p.name),
            _ => some.push(p.name),
        }
    }
    println!("(shared% = accesses to pages touched by 2+ threads; B/acc = bytes per access in the native trace)");
    println!(
        "Reading: {} of {} patterns share pages between some pairs of threads only ({}): there a mapping can bring the pairs together. {} share{} between every pair ({}): no grouping of threads can help, only where each page lies. Sharing nothing: {}{}.",
        some.len(),
        PATTERNS.len(),
        some.join(", "),
        every.len(),
        if every.len() == 1 { "s" } else { "" },
        every.join(", "),
        if none.is_empty() { "none".to_string() } else { none.join(", ") },
        if none.is_empty() { "" } else { " (first touch places it perfectly and no mapping matters)" }
    );
    takeaways.push(format!(
        "Sharing decides what mapping can do: {} of the {} patterns share between some pairs of threads only, which a mapping can exploit.",
        some.len(),
        PATTERNS.len()
    ));
    Ok(counts)
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
fn demo_thread_map(m: &Machine) -> Vec<usize> {
    let step = (m.pu_count() / DEMO_THREADS as usize).max(1);
    (0..DEMO_THREADS as usize).map(|t| (t * step) % m.pu_count()).collect()
}

/// MCPR of the optimum and every policy on each pattern (seed 004's cost model).
/// Simulated run time each demo trace stands for: long enough for the time-driven policies
/// (numa-balancing's first scan comes after 1 s, carrefour and platinum decide every second)
/// to act several times.
const DEMO_RUN_MS: u64 = 10_000;

/// The time scale that makes `accesses` last `DEMO_RUN_MS`.
fn refs_per_ms(accesses: u64) -> f64 {
    (accesses as f64 / DEMO_RUN_MS as f64).max(1e-3)
}

fn placement_table(
    dir: &Path,
    counts: &std::collections::HashMap<&'static str, u64>,
    takeaways: &mut Vec<String>,
) -> Result<()> {
    let m = Machine::from_spec(DEMO_MACHINE).map_err(|e| anyhow!(e))?;
    let pus = demo_thread_map(&m);
    let map = pus.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",");
    let setup = |name: &str| sharemap::Setup {
        thread_map: sharemap::ThreadMap::Pus(pus.clone()),
        memory_budget: 512 << 20,
        refs_per_ms: Some(refs_per_ms(counts.get(name).copied().unwrap_or(0))),
        ..sharemap::Setup::default()
    };
    let mut columns = Vec::new();
    let mut label = String::new();
    for name in PLACEMENT_PATTERNS {
        let session = Session::new(TraceInput::file(dir.join(format!("{name}.trace"))), m.clone(), 1);
        let placed = session.place(&PlaceRequest { setup: setup(name), ..PlaceRequest::new("all") })?;
        label = place::cost_label(&placed.situation.costs);
        columns.push(placed.evaluation.results);
    }
    println!("Data placement: mean cost per reference (MCPR, 1 = every reference local) on {DEMO_MACHINE},");
    println!("threads on PUs {map} (two per NUMA node); Bolosky & Scott's (seed 004) costs {label};");
    println!(
        "each trace's references spread over {} s of run, so the time-driven policies (numa-balancing, kmaf, carrefour, platinum, replicate-time) act",
        DEMO_RUN_MS / 1000
    );
    print!("{:<28}", "policy");
    for name in PLACEMENT_PATTERNS {
        print!(" {:>8}", short(name));
    }
    println!();
    for row in 0..columns[0].len() {
        print!("{:<28}", columns[0][row].name);
        for col in &columns {
            print!(" {:>8.3}", col[row].mcpr);
        }
        println!();
    }
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
        println!(
            "(moved or copied no page on any pattern: {}{})",
            still.join(", "),
            if still.contains(&"sammu") {
                format!(
                    "; sammu moves a page once NT = 10 more of its updates come from another node than from the page's own, about one per TLB stay, and {DEMO_ITERATIONS} iterations give each page about {DEMO_ITERATIONS}; the runs of SAMMU (seed 000) lasted seconds (docs/reproduce.md, sammu-time)"
                )
            } else {
                String::new()
            }
        );
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
        println!(
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
        );
        takeaways.push(format!(
            "Against the off-line optimum, first touch loses up to {} ({}); the best online policy per pattern stays within {}.",
            pct(fw.0),
            fw.1,
            pct(wb.0)
        ));
    }
    println!(
        "(sharemap place neighbor.trace --machine {DEMO_MACHINE} --thread-map {map} --refs-per-ms {} for one trace; sharemap list policies lists them)",
        refs_per_ms(counts.get("neighbor").copied().unwrap_or(0))
    );
    Ok(())
}

/// Sharing matrices (as small text heatmaps, PNG/SVG in the directory) and the cost of
/// thread mappings on the SAMMU machine, relative to a random mapping.
fn mapping_table(dir: &Path, takeaways: &mut Vec<String>) -> Result<()> {
    let m = Machine::from_spec(DEMO_MACHINE).map_err(|e| anyhow!(e))?;
    let algs = ["sharemap", "compact", "scatter", "round-robin"];
    println!("Sharing (oracle, cache lines) and thread mapping on {DEMO_MACHINE}: mapping cost relative to random");
    println!(
        "{:<18} {:<10} {:>9} {:>9} {:>9} {:>11} {:>9}",
        "pattern", "sharing", algs[0], algs[1], algs[2], algs[3], "potential"
    );
    let (mut worth, mut not_worth) = (Vec::new(), Vec::new());
    // Patterns where compact's fixed order costs less than sharemap's mapping in the model.
    let mut compact_cheaper = Vec::new();
    let mut ours = Vec::new();
    for name in ["neighbor", "all-to-all", "matmult", "producer-consumer", "migratory", "phase-change"] {
        let path = dir.join(format!("{name}.trace"));
        let sharing = sharemap::map::load_sharing(&TraceInput::file(&path), &())?;
        let matrix = &sharing.matrix;
        let svg = crate::plot::sharing_heatmap_svg(&format!("{name}: sharing between threads (oracle)"), matrix)?;
        crate::plot::save_svg(&svg, &dir.join(format!("heatmap-{name}.svg")))?;
        let mapped = mappings(&sharing, &m, &algs)?;
        let random = mapped.random_cost.max(f64::MIN_POSITIVE);
        let rel: Vec<f64> = mapped.mappings.iter().map(|r| r.cost / random).collect();
        let gate = mapped.potential.score;
        ours.push(rel[0]);
        if rel[1] < rel[0] * 0.99 {
            compact_cheaper.push(name);
        }
        if gate >= mapped.potential.threshold {
            worth.push((name, rel[0]));
        } else {
            not_worth.push(name);
        }
        let rows = text_heatmap(matrix);
        println!(
            "{:<18} {:<10} {:>9.3} {:>9.3} {:>9.3} {:>11.3} {:>9.3}",
            name, rows[0], rel[0], rel[1], rel[2], rel[3], gate
        );
        for r in &rows[1..] {
            println!("{:<18} {r}", "");
        }
    }
    println!(
        "(a row per thread, darker = more sharing, on a log scale from a thousandth of the largest (.) to the largest (@), blank = none; heatmap-PATTERN.{} beside the traces; sharemap map TRACE --algo all)",
        crate::plot::EXTENSIONS.join("/")
    );
    let lo = ours.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ours.iter().copied().fold(0.0, f64::max);
    let pus = m.pu_count();
    println!(
        "Reading: with {DEMO_THREADS} threads on {pus} PUs, keeping them in one package is most of what a mapping gains: sharemap's mapping costs {lo:.2} to {hi:.2} of a random mapping's on every pattern, uniform sharing included, so the potential passes its threshold on {} of {}{}.",
        worth.len(),
        worth.len() + not_worth.len(),
        if not_worth.is_empty() { String::new() } else { format!(" (not on {})", not_worth.join(", ")) }
    );
    if !compact_cheaper.is_empty() {
        println!(
            "compact costs less in this model on {} of {} ({}): it pairs threads on SMT siblings, which share an L1 the model prices cheapest; sharemap keeps one thread per core, because siblings also share the core's pipeline, which the model does not see (docs/detection/README.md).",
            compact_cheaper.len(),
            ours.len(),
            compact_cheaper.join(", ")
        );
    }
    takeaways.push(format!(
        "On {DEMO_MACHINE}, a thread mapping's gain is mostly keeping the threads in one package ({lo:.2}-{hi:.2} of a random mapping's cost on every pattern); the pattern decides the order within it{}.",
        if compact_cheaper.is_empty() { "" } else { ", where the model prefers SMT siblings and sharemap one thread per core" }
    ));
    Ok(())
}

/// The mappings of these algorithms on the demo machine (latency-priced), with the random
/// mapping's cost and the mapping potential.
fn mappings(sharing: &sharemap::LoadedSharing, m: &Machine, algs: &[&str]) -> Result<Mapping> {
    let request = MapRequest { algorithms: algs.join(","), ..Default::default() };
    Ok(sharemap::map::map(sharing, m, &request, 1)?)
}

const STENCIL: &str = include_str!("../../../workloads/stencil3d.c");
const STENCIL_COMMON: &str = include_str!("../../../workloads/common.h");

/// A real program, traced: the 3-D stencil of the workload suite built with `sharemap cc`,
/// recorded with 8 threads, its sharing and the mappings' costs. Skipped, with a word, where
/// no compiler for `sharemap cc` is installed.
fn recorded_program(dir: &Path, takeaways: &mut Vec<String>) {
    if let Err(e) = try_recorded_program(dir, takeaways) {
        println!("A real program: skipped ({e:#}); scripts/setup installs clang for `sharemap cc`");
    }
}

fn try_recorded_program(dir: &Path, takeaways: &mut Vec<String>) -> Result<()> {
    let me = std::env::current_exe()?;
    let src = dir.join("stencil3d.c");
    write_whole(&src, STENCIL.as_bytes())?;
    write_whole(&dir.join("common.h"), STENCIL_COMMON.as_bytes())?;
    let bin = dir.join("stencil3d");
    let quiet = |cmd: &mut std::process::Command| -> Result<()> {
        let out = cmd.output()?;
        if !out.status.success() {
            bail!("{}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("failed"));
        }
        Ok(())
    };
    quiet(std::process::Command::new(&me).arg("cc").arg("-O2").arg("-fopenmp").arg(&src).arg("-o").arg(&bin))?;
    let trace = dir.join("stencil3d.trace");
    quiet(
        std::process::Command::new(&me)
            .args(["record", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(&bin)
            .arg("32")
            .env("OMP_NUM_THREADS", DEMO_THREADS.to_string()),
    )?;
    let summary = sharemap::info(&TraceInput::file(&trace), &())?;
    let bytes = std::fs::metadata(&trace)?.len();
    let sharing = sharemap::map::load_sharing(&TraceInput::file(&trace), &())?;
    let matrix = &sharing.matrix;
    let m = Machine::from_spec(DEMO_MACHINE).map_err(|e| anyhow!(e))?;
    let mapped = mappings(&sharing, &m, &["sharemap", "compact", "scatter", "random:seed=1"])?;
    let cost_of = |k: usize| mapped.mappings[k].cost;
    let random = cost_of(3).max(f64::MIN_POSITIVE);
    println!(
        "A real program: workloads/stencil3d.c built with `sharemap cc -fopenmp`, recorded with {} threads: {} accesses, {:.2} bytes/access",
        summary.threads,
        summary.accesses,
        bytes as f64 / summary.accesses.max(1) as f64
    );
    println!(
        "mapping cost relative to random: sharemap {:.3}, compact {:.3}, scatter {:.3}; its sharing (oracle):",
        cost_of(0) / random,
        cost_of(1) / random,
        cost_of(2) / random
    );
    for row in text_heatmap(matrix) {
        println!("  {row}");
    }
    println!("(CC='sharemap cc' make; sharemap record -o prog.trace -- ./prog; see docs/source-tracer.md)");
    println!(
        "Reading: a stencil shares with its neighbours in the grid, so a mapping that keeps neighbours close costs {:.2} of a random one{}.",
        cost_of(0) / random,
        if cost_of(0) < cost_of(1).min(cost_of(2)) { ", less than compact's or scatter's fixed orders" } else { "" }
    );
    simulated(dir, &trace, takeaways)
}

/// The mechanisms the demo simulates, their periods scaled to the recording's few simulated
/// milliseconds.
const SIMULATED: &str = "os,random,oracle,marathe,sammu:period-ms=0.05,autopin:probation-ms=0.02,\
                         numa-balancing:scan-delay-ms=0.1,scan-period-ms=0.1,kmaf:window-ms=0.05,period-ms=0.05,carrefour:epoch-ms=0.1";

/// `sharemap report` as `DIR/report.html`: of the recorded pipeline with its real runs'
/// times, else of the recorded stencil, else (no compiler) of a generated pattern.
fn write_report(dir: &Path) -> Result<()> {
    let me = std::env::current_exe()?;
    let (pipeline, runs, stencil) = (dir.join("pipeline.trace"), dir.join("runs.csv"), dir.join("stencil3d.trace"));
    let mut cmd = std::process::Command::new(&me);
    cmd.arg("report");
    if pipeline.is_file() && runs.is_file() {
        cmd.arg(&pipeline).args(["--mechanism", SIMULATED]).arg("--runs").arg(&runs);
    } else if stencil.is_file() {
        cmd.arg(&stencil).args(["--mechanism", SIMULATED]);
    } else {
        cmd.arg(dir.join("phase-change.trace")).args(["--mechanism", "os,random,oracle,marathe,carrefour"]);
    }
    let html = dir.join("report.html");
    let out = cmd.args(["--machine", DEMO_MACHINE, "-o"]).arg(&html).output()?;
    if !out.status.success() {
        bail!("report: {}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("failed"));
    }
    println!("The report: {} (one HTML file, nothing else needed: open it in a browser)", html.display());
    Ok(())
}

/// The recording on the simulated SAMMU machine under every mechanism: time, last-level
/// misses and traffic against `os`, as a table and as SAMMU's (seed 000) bar plots.
fn simulated(dir: &Path, trace: &Path, takeaways: &mut Vec<String>) -> Result<()> {
    let request = SimulateRequest { mechanisms: SIMULATED.into(), ..Default::default() };
    let machine = Machine::from_spec(DEMO_MACHINE).map_err(|e| anyhow!(e))?;
    let sim = Session::new(TraceInput::file(trace), machine, 1).simulate(&request).map_err(|e| anyhow!(e))?;
    let base = dir.join("stencil3d-simulated");
    crate::simulate::plots(&sim, &base, "stencil3d")?;
    println!(
        "\nSimulated on {} (caches L{}, MESI, TLBs, DRAM by node; `sharemap simulate`), each mechanism on simulated time:",
        sim.machine,
        sim.cache_levels.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("/L")
    );
    let full: Vec<&str> = sim.mechanisms.iter().map(|m| m.mechanism.as_str()).collect();
    let (labels, cut) = crate::plot::table_labels(&full);
    let w = labels.iter().map(|l| l.len()).max().unwrap_or(9).max(9);
    println!(
        "{:<w$} {:>9} {:>9} {:>13} {:>7} {:>8} {:>7} {:>7}",
        "mechanism", "time/os", "LLC MPKA", "traffic (KB)", "local", "thr.mig", "pg.mig", "faults"
    );
    for (m, label) in sim.mechanisms.iter().zip(&labels) {
        println!(
            "{:<w$} {:>9.3} {:>9.2} {:>13.1} {:>6.1}% {:>8} {:>7} {:>7}",
            label,
            m.vs_os.as_ref().map_or(1.0, |r| r.time),
            m.llc_mpka(),
            m.counts.interconnect_bytes as f64 / 1e3,
            100.0 * m.local_dram_share,
            m.counts.thread_migrations,
            m.counts.page_migrations,
            m.counts.faults
        );
    }
    let options: Vec<String> = cut.iter().map(|(short, long)| format!("{short} = {long}")).collect();
    println!("(options: {})", options.join("; "));
    for m in &sim.mechanisms {
        if let Some(note) = &m.note {
            println!("note: {}: {note}", m.mechanism.split(':').next().unwrap_or(""));
        }
    }
    println!("(plots: {}-time, -misses, -traffic .{})", base.display(), crate::plot::EXTENSIONS.join("/."));
    for line in simulation_reading(&sim, &labels) {
        println!("{line}");
    }
    let time = |m: &sharemap::simulate::Outcome| m.vs_os.as_ref().map_or(1.0, |r| r.time);
    let sampling_slower: Vec<&String> = sim
        .mechanisms
        .iter()
        .zip(&labels)
        .filter(|(m, _)| m.counts.faults > 0 && time(m) > 1.01)
        .map(|(_, l)| l)
        .collect();
    if let Some((best, label)) = sim.mechanisms.iter().zip(&labels).min_by(|a, b| time(a.0).total_cmp(&time(b.0))) {
        let sampling = match sampling_slower.as_slice() {
            [] => String::new(),
            names => format!(
                "; {} (sampling with page faults) {} slower than Linux in this short run",
                names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(" and "),
                if names.len() == 1 { "is" } else { "are" }
            ),
        };
        takeaways.push(format!(
            "On the simulated {}, the recorded stencil runs fastest under {label} ({:.3} of Linux's time){sampling}.",
            sim.machine,
            time(best)
        ));
    }
    Ok(())
}

/// What the simulation table shows: which mechanisms beat os, which match it, and what the
/// slower ones spent their time on (faults, moves), in the table's own numbers.
fn simulation_reading(sim: &sharemap::Simulation, labels: &[String]) -> Vec<String> {
    let time = |m: &sharemap::simulate::Outcome| m.vs_os.as_ref().map_or(1.0, |r| r.time);
    let (mut faster, mut same, mut slower) = (Vec::new(), Vec::new(), Vec::new());
    // Slower mechanisms that moved nothing but took faults: the faults are their whole cost.
    let mut only_faults = Vec::new();
    for (m, label) in sim.mechanisms.iter().zip(labels).filter(|(m, _)| m.mechanism != "os") {
        let t = time(m);
        if t < 0.99 {
            faster.push(format!("{label} {t:.3}"));
        } else if t <= 1.01 {
            same.push(label.clone());
        } else {
            let c = &m.counts;
            let mut why = Vec::new();
            if c.faults > 0 {
                why.push(crate::count(c.faults, "sampling fault", "sampling faults"));
            }
            if c.thread_migrations > 0 {
                why.push(crate::count(c.thread_migrations, "thread move", "thread moves"));
            }
            if c.page_migrations > 0 {
                why.push(crate::count(c.page_migrations, "page move", "page moves"));
            }
            if why.is_empty() {
                why.push(format!("{:.2} LLC misses per 1000 accesses", m.llc_mpka()));
            }
            if c.faults > 0 && c.page_migrations == 0 && c.thread_migrations == 0 {
                only_faults.push(label.clone());
            }
            slower.push(format!("{label} {t:.3} ({})", why.join(", ")));
        }
    }
    let os_ms = sim.mechanisms.iter().find(|m| m.mechanism == "os").map_or(0.0, |m| m.time_ns / 1e6);
    let list = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    let mut lines = vec![format!(
        "Reading: against os (Linux's placement, modelled; {os_ms:.2} ms simulated), faster: {}; within 1% (the same choices, or none that mattered): {}; slower: {}.",
        list(&faster),
        list(&same),
        list(&slower)
    )];
    if !only_faults.is_empty() {
        lines.push(format!(
            "{} moved nothing: their slowdown is the cost of the faults they take to sample. Their periods are scaled down to this short run, so they sample far more often per access than at Linux's defaults; it is not a verdict on them.",
            only_faults.join(" and ")
        ));
    }
    lines
}

const PIPELINE: &str = include_str!("../../../workloads/pipeline.c");

/// The pipeline workload (a producer, four stages and a consumer handing items on) recorded,
/// then run on this host with the OS's mapping and the sharing-aware one (10 runs each,
/// interleaved), and in a 2-node guest with the mapping, to show where its threads ran and
/// its pages lay. The pipeline is the workload where a mapping decides something on a host
/// with one node and few PUs: which threads of a hand-off share a PU.
fn real_runs(dir: &Path, takeaways: &mut Vec<String>) {
    if let Err(e) = try_real_runs(dir, takeaways) {
        println!("Real runs: skipped ({e:#}); scripts/setup installs what they need");
    }
}

fn try_real_runs(dir: &Path, takeaways: &mut Vec<String>) -> Result<()> {
    let me = std::env::current_exe()?;
    let src = dir.join("pipeline.c");
    write_whole(&src, PIPELINE.as_bytes())?;
    write_whole(&dir.join("common.h"), STENCIL_COMMON.as_bytes())?;
    let run = |cmd: &mut std::process::Command| -> Result<std::process::Output> {
        let out = cmd.output()?;
        if !out.status.success() {
            bail!("{}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("failed"));
        }
        Ok(out)
    };
    let sharemap = || std::process::Command::new(&me);
    // The traced build records; the plain build (the system's cc) is what runs, as a user
    // would run their program.
    let traced = dir.join("pipeline-traced");
    run(sharemap().args(["cc", "-O2", "-pthread"]).arg(&src).arg("-o").arg(&traced))?;
    let plain = dir.join("pipeline");
    if run(std::process::Command::new("cc").args(["-O2", "-pthread"]).arg(&src).arg("-o").arg(&plain)).is_err() {
        std::fs::copy(&traced, &plain)?;
    }
    let trace = dir.join("pipeline.trace");
    run(sharemap().args(["record", "--no-aslr", "-o"]).arg(&trace).arg("--").arg(&traced).arg("20000"))?;
    let host = Machine::live().map_err(|e| anyhow!("this host's topology: {e}"))?;
    let nodes = host.numa_count().max(1);
    println!(
        "Real runs on this host ({} PUs, {} NUMA node{}): workloads/pipeline.c (a producer, 4 stages and a consumer: 6 threads handing items on), recorded (20000 items), then run (200000 items), os against its sharing-aware mapping:",
        host.pu_count(),
        nodes,
        if nodes > 1 { "s" } else { "" }
    );
    let csv = dir.join("runs.csv");
    let out = run(sharemap()
        .args(["run", "--thread-map", "sharemap", "--sharing"])
        .arg(&trace)
        .args(["--repeat", "10", "--csv"])
        .arg(&csv)
        .arg("--")
        .arg(&plain)
        .arg("200000"))?;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        println!("  {line}");
    }
    let runs = crate::report::read_runs(&csv)?;
    let verdict = runs.results.get(1).map(|r| match r.significant {
        Some(true) if r.normalized < 1.0 => {
            format!("the mapping is {:.0}% faster than os, beyond the noise", 100.0 * (1.0 - r.normalized))
        }
        Some(true) => format!("the mapping is {:.0}% slower than os, beyond the noise", 100.0 * (r.normalized - 1.0)),
        _ => "the difference is within the run-to-run noise (the intervals overlap)".to_string(),
    });
    let verdict = verdict.unwrap_or_else(|| "only os was measured".into());
    println!(
        "Reading: {verdict}. Each hand-off of the pipeline moves a line between two threads; the mapping puts the threads of a hand-off on one PU, where Linux spreads them over {} PUs. The other workloads share through one last-level cache{}, which no pinning changes on this host (docs/benchmarks.md, real runs: within the noise).",
        host.pu_count(),
        if nodes == 1 { " and one node" } else { "" }
    );
    takeaways.push(format!(
        "Measured on this host ({} PUs, {nodes} node{}), for the pipeline: {verdict}.",
        host.pu_count(),
        if nodes > 1 { "s" } else { "" }
    ));
    println!("(sharemap run --thread-map sharemap --sharing prog.trace --repeat 10 -- ./prog; docs/run.md)");
    println!();
    if sharemap_run::vm::find_kernel(None).is_err() {
        eprintln!("sharemap: demo: fetching the guest kernel once (Debian's cloud kernel, into ~/.cache/sharemap)");
        if let Err(e) = sharemap_run::vm::fetch_kernel() {
            println!("In a 2-node guest: skipped (no guest kernel, and fetching one failed: {e})");
            return Ok(());
        }
    }
    println!(
        "In a 2-node guest (QEMU; CPUs 0-1 on node 0, 2-3 on node 1), the same mapping, where its threads ran and its pages lay:"
    );
    let out = run(sharemap()
        .args(["vm", "--thread-map", "sharemap", "--sharing"])
        .arg(&trace)
        .arg("--")
        .arg(&plain)
        .arg("20000"))?;
    let mut threads = (0, 0);
    let mut pages = None;
    for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("sharemap: ")) {
        let line = line.trim_start_matches("sharemap: ");
        println!("  {line}");
        // "thread 0 (tid 124) last ran on CPU 2 (PU 2), allowed CPUs 2"
        if let (Some(ran), Some(allowed)) = (line.split("last ran on CPU ").nth(1), line.split("allowed CPUs ").nth(1))
        {
            threads.1 += 1;
            if ran.split_whitespace().next() == Some(allowed.trim()) {
                threads.0 += 1;
            }
        }
        if let Some(p) = line.strip_prefix("resident pages at exit: ") {
            pages = Some(p.to_string());
        }
    }
    println!(
        "Reading: in the guest kernel's own accounting, {} of {} threads last ran on the one CPU the mapping allowed it{}.",
        threads.0,
        threads.1,
        pages.map_or(String::new(), |p| format!("; the program's pages lay where first touch put them: {p}"))
    );
    println!("(sharemap vm --thread-map MAP --placement PLAN -- ./prog; docs/vm.md)");
    Ok(())
}

const STM_PAIRS: &str = include_str!("../../../workloads/stm/pairs.c");
const STM_BANK: &str = include_str!("../../../workloads/stm/bank.c");
const STM_BENCH: &str = include_str!("../../../workloads/stm/bench.h");

/// sharemap's STM: a program whose threads share in pairs run with STMap's log (its
/// decisions, the pins, its matrix), bank with STMap off and on, and a transactional
/// recording. Skipped, with a word, where no compiler is installed.
fn stm_runs(dir: &Path, takeaways: &mut Vec<String>) {
    if let Err(e) = try_stm_runs(dir, takeaways) {
        println!("The STM: skipped ({e:#}); scripts/setup installs the compilers `sharemap cc` drives");
    }
}

fn try_stm_runs(dir: &Path, takeaways: &mut Vec<String>) -> Result<()> {
    use std::process::Command;
    let me = std::env::current_exe()?;
    let stm = dir.join("stm");
    sharemap::trace::make_dir(&stm)?;
    for (name, text) in [("pairs.c", STM_PAIRS), ("bank.c", STM_BANK), ("bench.h", STM_BENCH)] {
        write_whole(&stm.join(name), text.as_bytes())?;
    }
    let output = |cmd: &mut Command| -> Result<std::process::Output> {
        let out = cmd.env_remove("SHAREMAP_STMAP").output()?;
        if !out.status.success() {
            bail!("{}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("failed"));
        }
        Ok(out)
    };
    let build = |src: &str, bin: &str, traced: bool| -> Result<PathBuf> {
        let out = stm.join(bin);
        let mut cmd = Command::new(&me);
        cmd.args(["cc", "--stm"]);
        if !traced {
            cmd.arg("--no-trace");
        }
        output(cmd.arg("-O2").arg(stm.join(src)).arg("-o").arg(&out).arg("-pthread"))?;
        Ok(out)
    };
    let pairs = build("pairs.c", "pairs", false)?;
    let bank = build("bank.c", "bank", false)?;
    let traced = build("pairs.c", "pairs-traced", true)?;
    println!(
        "The STM (libsharemap_stm: TinySTM's API, STMap inside): workloads/stm/pairs, 4 threads that share in pairs (0-1, 2-3), built with `sharemap cc --stm --no-trace`, run with SHAREMAP_STMAP_VERBOSE=1:"
    );
    let matrix = stm.join("comm.csv");
    let out = output(
        Command::new(&pairs)
            .args(["4", "1000000", "2"])
            .env("SHAREMAP_STMAP_VERBOSE", "1")
            .env("SHAREMAP_STMAP_MATRIX", &matrix),
    )?;
    let log = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = log.lines().map(|l| l.trim_start_matches("sharemap-stm: ")).collect();
    let decisions: Vec<&&str> = lines.iter().filter(|l| l.starts_with("decision ")).collect();
    let remaps: Vec<&&str> = decisions.iter().copied().filter(|l| l.contains("-> remap")).collect();
    if let Some(first) = remaps.first() {
        println!("  first remap:   {first}");
    }
    if let Some(last) = remaps.last().filter(|_| remaps.len() > 1) {
        println!("  last remap:    {last}");
    }
    if let Some(last) = decisions.last() {
        println!("  last decision: {last}");
    }
    if let Some(summary) = lines.iter().find(|l| l.starts_with("STMap:")) {
        println!("  {summary}");
    }
    // Where each worker ended: "worker W stmap_thread T cpu C".
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pins: Vec<(usize, usize, i64)> = stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["worker", w, "stmap_thread", t, "cpu", c] => Some((w.parse().ok()?, t.parse().ok()?, c.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    let pinned: Vec<String> = pins.iter().map(|(w, t, c)| format!("worker {w} (T{t}) on CPU {c}")).collect();
    println!("  final pins: {}", pinned.join(", "));
    let m = SharingMatrix::read(&matrix).map_err(|e| anyhow!(e))?;
    println!("  its matrix (SHAREMAP_STMAP_MATRIX, a row per STMap thread id T):");
    for (t, row) in text_heatmap(&m).iter().enumerate() {
        let who = match pins.iter().find(|p| p.1 == t) {
            Some((w, ..)) => format!("worker {w}"),
            None => "the main thread (it registers at the end to read the statistics: no transactions)".into(),
        };
        println!("    T{t} {row}  {who}");
    }
    let cpu_of = |w: usize| pins.iter().find(|p| p.0 == w).map(|p| p.2);
    let together = |a: usize, b: usize| cpu_of(a).is_some() && cpu_of(a) == cpu_of(b);
    let found = together(0, 1) && together(2, 3) && !together(0, 2);
    println!(
        "  Reading: {}",
        if found {
            "STMap found the pairs from its samples alone and pinned each pair on one CPU, apart from the other pair, so each pair shares its CPU's caches; later decisions keep that mapping (within the hysteresis) rather than churn."
        } else {
            "the final pins do not put each pair on one CPU: STMap's samples did not separate the pairs on this run (see the decisions above)."
        }
    );
    // bank at 2 threads, STMap off and on, interleaved.
    let rate = |mode: &str| -> Result<f64> {
        let out = output(Command::new(&bank).args(["-t", "2", "-d", "700"]).env("SHAREMAP_STMAP", mode))?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.split_whitespace()
            .find_map(|w| w.strip_prefix("txs_per_s=")?.parse().ok())
            .ok_or_else(|| anyhow!("bank printed no rate: {text}"))
    };
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        off.push(rate("off")?);
        on.push(rate("on")?);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    // The runs' ranges overlapping means the difference is within the noise.
    let range = |v: &[f64]| (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max));
    let ((off_lo, off_hi), (on_lo, on_hi)) = (range(&off), range(&on));
    let noise = on_lo <= off_hi && off_lo <= on_hi;
    let (off, on) = (median(&mut off), median(&mut on));
    let ratio = on / off.max(f64::MIN_POSITIVE);
    let verdict = if noise {
        "within the noise: the runs' ranges overlap".to_string()
    } else {
        format!("{ratio:.2} of off, the runs' ranges apart")
    };
    println!(
        "  bank, 2 threads (1024 accounts, 20 % audits), median of 3: {:.2} M transactions/s with STMap off, {:.2} M on ({verdict})",
        off / 1e6,
        on / 1e6
    );
    takeaways.push(format!(
        "sharemap's STM runs TinySTM programs unchanged; STMap {} the pairs of workloads/stm/pairs on its own; on bank, STMap on against off: {verdict}.",
        if found { "found and pinned" } else { "did not separate" }
    ));
    let trace = stm.join("pairs.trace");
    output(Command::new(&me).args(["record", "-o"]).arg(&trace).arg("--").arg(&traced).args(["4", "20000", "1"]))?;
    let s = sharemap::info(&TraceInput::file(&trace), &())?;
    let count = |k: &str| s.events.get(k).copied().unwrap_or(0);
    println!(
        "  traced (`sharemap cc --stm`) and recorded: {} transactional accesses, tx-begin {}, tx-commit {}, tx-abort {}",
        s.accesses,
        count("tx-begin"),
        count("tx-commit"),
        count("tx-abort")
    );
    println!("(docs/stm.md; scripts/bench-stm measures the STM's programs)");
    Ok(())
}

/// The matrix as text rows, one character per thread pair, darker for more sharing on the
/// plots' logarithmic scale (blank: none; `.`: a thousandth of the largest or less).
fn text_heatmap(m: &SharingMatrix) -> Vec<String> {
    const SHADES: &[u8] = b".:-=+*#%@";
    let max = m.max();
    (0..m.threads())
        .map(|i| {
            (0..m.threads())
                .map(|j| match crate::plot::log_level(m.get(i, j), max) {
                    None => ' ',
                    Some(t) => SHADES[((t * (SHADES.len() - 1) as f64).round() as usize).min(SHADES.len() - 1)] as char,
                })
                .collect()
        })
        .collect()
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

/// Which thread pairs share at least one page, in short form ("0-1 1-2 ..." or a count).
fn sharing_pairs(path: &Path) -> Result<String> {
    let mut r = TraceInput::file(path).open()?;
    let shift = r.metadata().page_size.trailing_zeros();
    let mut pages: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    let mut chunk = Chunk::default();
    while r.next_chunk(&mut chunk)? {
        for (t, a) in chunk.accesses.thread.iter().zip(&chunk.accesses.addr) {
            *pages.entry(a >> shift).or_default() |= 1u64 << (t % 64);
        }
    }
    let mut pairs = std::collections::BTreeSet::new();
    for mask in pages.values().filter(|m| m.count_ones() > 1) {
        for i in 0..64 {
            for j in i + 1..64 {
                if mask >> i & 1 == 1 && mask >> j & 1 == 1 {
                    pairs.insert((i, j));
                }
            }
        }
    }
    let all = (DEMO_THREADS * (DEMO_THREADS - 1) / 2) as usize;
    Ok(match pairs.len() {
        0 => "none".into(),
        n if n == all => format!("all {n} pairs"),
        n if n <= 8 => pairs.iter().map(|(a, b)| format!("{a}-{b}")).collect::<Vec<_>>().join(" "),
        n => format!("{n} of {all} pairs"),
    })
}
