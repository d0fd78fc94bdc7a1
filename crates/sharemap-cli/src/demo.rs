//! `sharemap demo`: the main job on the embedded default. Generates every seed pattern for
//! the SAMMU machine's thread count, summarises how each shares pages, and shows the machine.

use crate::machine::describe;
use crate::place;
use crate::trace_cmds::generate_to;
use anyhow::{Result, anyhow, bail};
use sharemap::generate::{GenParams, PATTERNS};
use sharemap::map::{MapRequest, Mapping};
use sharemap::trace::{Chunk, TraceSource};
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
    std::fs::create_dir_all(dir).map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
    std::fs::write(dir.join(MARKER), "written by `sharemap demo`; a later demo may write over this directory\n")
        .map_err(|e| anyhow!("{}: {e}", dir.display()))?;
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

pub fn run(dir: Option<&Path>, accesses: u64, report: bool) -> Result<ExitCode> {
    let dir = dir.unwrap_or(Path::new(DEMO_DIR));
    output_dir(dir)?;
    println!("sharemap demo: the seed patterns, {DEMO_THREADS} threads, {accesses} accesses each, seed 1\n");
    println!(
        "{:<18} {:>7} {:>7} {:>7} {:>9} {:>9} {:>7}  sharing pairs (threads sharing a page)",
        "pattern", "pages", "shared", "max/pg", "shared%", "writes%", "B/acc"
    );
    for p in PATTERNS {
        let params = GenParams::new(DEMO_THREADS, accesses, 1);
        let path = dir.join(format!("{}.trace", p.name));
        let report = generate_to(p, &params, &path, None)?;
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
    }
    println!("\n(shared% = accesses to pages touched by 2+ threads; B/acc = bytes per access in the native trace)");
    println!();
    placement_table(dir, accesses)?;
    println!();
    mapping_table(dir)?;
    println!();
    recorded_program(dir);
    println!();
    real_runs(dir);
    println!();
    stm_runs(dir);
    println!();
    if report {
        write_report(dir)?;
        println!();
    }
    println!("Written to {}/ (kept; a later demo writes over it):", dir.display());
    for line in written(dir) {
        println!("{line}");
    }
    println!();
    let m = Machine::from_spec(DEMO_MACHINE).map_err(|e| anyhow!(e))?;
    print!("{}", describe(&m));
    Ok(ExitCode::SUCCESS)
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

fn placement_table(dir: &Path, accesses: u64) -> Result<()> {
    let m = Machine::from_spec(DEMO_MACHINE).map_err(|e| anyhow!(e))?;
    let pus = demo_thread_map(&m);
    let map = pus.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(",");
    let setup = sharemap::Setup {
        thread_map: sharemap::ThreadMap::Pus(pus),
        memory_budget: 512 << 20,
        refs_per_ms: Some(refs_per_ms(accesses)),
        ..sharemap::Setup::default()
    };
    let mut columns = Vec::new();
    let mut label = String::new();
    for name in PLACEMENT_PATTERNS {
        let session = Session::new(TraceInput::file(dir.join(format!("{name}.trace"))), m.clone(), 1);
        let placed = session.place(&PlaceRequest { setup: setup.clone(), ..PlaceRequest::new("all") })?;
        label = place::cost_label(&placed.situation.costs);
        columns.push(placed.evaluation.results);
    }
    println!("Data placement: mean cost per reference (MCPR, 1 = every reference local) on {DEMO_MACHINE},");
    println!("threads on PUs {map} (two per NUMA node); seed 004 costs {label};");
    println!(
        "time scale {} references per ms: each trace stands for {} s of run, so the time-driven policies (numa-balancing, kmaf, carrefour, platinum, replicate-time) act",
        refs_per_ms(accesses),
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
    println!(
        "(sammu moves pages on TLB events: each thread's pages fit its TLBs here, so after the initialisation no entry leaves a TLB and it keeps the initial placement)"
    );
    println!(
        "(sharemap place TRACE --machine {DEMO_MACHINE} --thread-map {map} --refs-per-ms {} for one trace; sharemap policies lists them)",
        refs_per_ms(accesses)
    );
    Ok(())
}

/// Sharing matrices (as small text heatmaps, PNG/SVG in the directory) and the cost of
/// thread mappings on the SAMMU machine, relative to a random mapping.
fn mapping_table(dir: &Path) -> Result<()> {
    let m = Machine::from_spec(DEMO_MACHINE).map_err(|e| anyhow!(e))?;
    let algs = ["sharemap", "compact", "scatter", "round-robin"];
    println!("Sharing (oracle, cache lines) and thread mapping on {DEMO_MACHINE}: mapping cost relative to random");
    println!(
        "{:<18} {:<10} {:>9} {:>9} {:>9} {:>11} {:>9}",
        "pattern", "sharing", algs[0], algs[1], algs[2], algs[3], "potential"
    );
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
fn recorded_program(dir: &Path) {
    if let Err(e) = try_recorded_program(dir) {
        println!("A real program: skipped ({e:#}); scripts/setup installs clang for `sharemap cc`");
    }
}

fn try_recorded_program(dir: &Path) -> Result<()> {
    let me = std::env::current_exe()?;
    let src = dir.join("stencil3d.c");
    std::fs::write(&src, STENCIL)?;
    std::fs::write(dir.join("common.h"), STENCIL_COMMON)?;
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
    simulated(dir, &trace)
}

/// The mechanisms the demo simulates, their periods scaled to the recording's few simulated
/// milliseconds.
const SIMULATED: &str = "os,random,oracle,marathe,sammu:period-ms=0.05,autopin:probation-ms=0.02,\
                         numa-balancing:scan-delay-ms=0.1,scan-period-ms=0.1,kmaf:window-ms=0.05,period-ms=0.05,carrefour:epoch-ms=0.1";

/// `sharemap report` of the recorded stencil with the real runs' times (of a generated
/// pattern where the stencil could not be built), as `DIR/report.html`.
fn write_report(dir: &Path) -> Result<()> {
    let me = std::env::current_exe()?;
    let stencil = dir.join("stencil3d.trace");
    let mut cmd = std::process::Command::new(&me);
    cmd.arg("report");
    if stencil.is_file() {
        cmd.arg(&stencil).args(["--mechanism", SIMULATED]);
    } else {
        cmd.arg(dir.join("phase-change.trace")).args(["--mechanism", "os,random,oracle,marathe,carrefour"]);
    }
    let runs = dir.join("runs.csv");
    if runs.is_file() {
        cmd.arg("--runs").arg(&runs);
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
/// misses and traffic against `os`, as a table and as seed 000's bar plots.
fn simulated(dir: &Path, trace: &Path) -> Result<()> {
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
    let (labels, cut) = crate::plot::short_labels(&full);
    let w = labels.iter().map(|l| l.len()).max().unwrap_or(9).max(9);
    println!(
        "{:<w$} {:>9} {:>9} {:>13} {:>7} {:>8} {:>7}",
        "mechanism", "time/os", "LLC MPKA", "traffic (KB)", "local", "thr.mig", "pg.mig"
    );
    for (m, label) in sim.mechanisms.iter().zip(&labels) {
        println!(
            "{:<w$} {:>9.3} {:>9.2} {:>13.1} {:>6.1}% {:>8} {:>7}",
            label,
            m.vs_os.as_ref().map_or(1.0, |r| r.time),
            m.llc_mpka(),
            m.counts.interconnect_bytes as f64 / 1e3,
            100.0 * m.local_dram_share,
            m.counts.thread_migrations,
            m.counts.page_migrations
        );
    }
    let options: Vec<String> = cut.iter().map(|(short, long)| format!("{short} = {long}")).collect();
    println!("(options: {})", options.join("; "));
    println!("(plots: {}-time, -misses, -traffic .{})", base.display(), crate::plot::EXTENSIONS.join("/."));
    Ok(())
}

/// The stencil recorded with 4 threads, then run on this host with the OS's mapping and the
/// sharing-aware one (5 runs each, interleaved), and in a 2-node guest with the mapping, to
/// show where its threads ran and its pages lay.
fn real_runs(dir: &Path) {
    if let Err(e) = try_real_runs(dir) {
        println!("Real runs: skipped ({e:#}); scripts/setup installs what they need");
    }
}

fn try_real_runs(dir: &Path) -> Result<()> {
    let me = std::env::current_exe()?;
    let bin = dir.join("stencil3d");
    if !bin.is_file() {
        bail!("the stencil was not built");
    }
    let trace = dir.join("stencil3d-4.trace");
    let run = |args: &[&std::ffi::OsStr]| -> Result<std::process::Output> {
        let out = std::process::Command::new(&me).args(args).env("OMP_NUM_THREADS", "4").output()?;
        if !out.status.success() {
            bail!("{}", String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("failed"));
        }
        Ok(out)
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    run(&[os("record"), os("--no-aslr"), os("-o"), trace.as_os_str(), os("--"), bin.as_os_str(), os("32")])?;
    let host = Machine::live().map_err(|e| anyhow!("this host's topology: {e}"))?;
    println!(
        "Real runs on this host ({} PUs, {} NUMA node{}): the stencil recorded with 4 threads (grid 32), then run (grid 96), os against its sharing-aware mapping:",
        host.pu_count(),
        host.numa_count().max(1),
        if host.numa_count() > 1 { "s" } else { "" }
    );
    let out = run(&[
        os("run"),
        os("--thread-map"),
        os("sharemap"),
        os("--sharing"),
        trace.as_os_str(),
        os("--repeat"),
        os("5"),
        os("--csv"),
        dir.join("runs.csv").as_os_str(),
        os("--"),
        bin.as_os_str(),
        os("96"),
    ])?;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        println!("  {line}");
    }
    if host.numa_count() <= 1 {
        println!(
            "Reading: with one NUMA node there is no data placement to win, and with {} PUs for 4 threads pinning decides only which threads share a core's caches; the last column says whether a difference stands out of the run-to-run noise.",
            host.pu_count()
        );
    } else {
        println!("Reading: the last column says whether the mapping's difference stands out of the run-to-run noise.");
    }
    println!("(sharemap run --thread-map sharemap --sharing prog.trace --repeat 5 -- ./prog; docs/run.md)");
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
    let out = run(&[
        os("vm"),
        os("--thread-map"),
        os("sharemap"),
        os("--sharing"),
        trace.as_os_str(),
        os("--"),
        bin.as_os_str(),
        os("32"),
    ])?;
    for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("sharemap: ")) {
        println!("  {}", line.trim_start_matches("sharemap: "));
    }
    println!("(sharemap vm --thread-map MAP --placement PLAN -- ./prog; docs/vm.md)");
    Ok(())
}

const STM_PAIRS: &str = include_str!("../../../workloads/stm/pairs.c");
const STM_BANK: &str = include_str!("../../../workloads/stm/bank.c");
const STM_BENCH: &str = include_str!("../../../workloads/stm/bench.h");

/// sharemap's STM: a program whose threads share in pairs run with STMap's log (its
/// decisions, the pins, its matrix), bank with STMap off and on, and a transactional
/// recording. Skipped, with a word, where no compiler is installed.
fn stm_runs(dir: &Path) {
    if let Err(e) = try_stm_runs(dir) {
        println!("The STM: skipped ({e:#}); scripts/setup installs the compilers `sharemap cc` drives");
    }
}

fn try_stm_runs(dir: &Path) -> Result<()> {
    use std::process::Command;
    let me = std::env::current_exe()?;
    let stm = dir.join("stm");
    std::fs::create_dir_all(&stm)?;
    for (name, text) in [("pairs.c", STM_PAIRS), ("bank.c", STM_BANK), ("bench.h", STM_BENCH)] {
        std::fs::write(stm.join(name), text)?;
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
    for line in log.lines().filter(|l| l.contains("remap") || l.contains("pinned") || l.contains("STMap:")).take(8) {
        println!("  {}", line.trim_start_matches("sharemap-stm: "));
    }
    for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("worker")) {
        println!("  {line}");
    }
    let m = SharingMatrix::read(&matrix).map_err(|e| anyhow!(e))?;
    println!("  its matrix (SHAREMAP_STMAP_MATRIX, rows by STMap id):");
    for row in text_heatmap(&m) {
        println!("    {row}");
    }
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
    println!(
        "  bank, 2 threads (1024 accounts, 20 % audits), median of 3: {:.2} M transactions/s with STMap off, {:.2} M on",
        median(&mut off) / 1e6,
        median(&mut on) / 1e6
    );
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
