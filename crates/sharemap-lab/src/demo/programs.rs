//! Real programs: the workloads' 3-D stencil built with `sharemap cc`, recorded and
//! simulated under every mechanism; the pipeline recorded, then measured on this host and run
//! in a two-node guest. Each through sharemap-run's actors.

use super::patterns::mappings;
use super::{Block, Cell, DEMO_MACHINE, DEMO_THREADS, DemoRequest, Row, Section, Table, count};
use sharemap::simulate::Outcome;
use sharemap::trace::write_whole;
use sharemap::{Error, ErrorKind, Machine, Result, Session, SimulateRequest, TraceInput};
use sharemap_run::record::{RecordRequest, Recorder};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

const STENCIL: &str = include_str!("../../../../workloads/stencil3d.c");
const COMMON: &str = include_str!("../../../../workloads/common.h");
const PIPELINE: &str = include_str!("../../../../workloads/pipeline.c");

/// The mechanisms the demo simulates, their periods scaled to the recording's few simulated
/// milliseconds.
pub const SIMULATED: &str = "os,random,oracle,marathe,sammu:period-ms=0.05,autopin:probation-ms=0.02,\
                         numa-balancing:scan-delay-ms=0.1,scan-period-ms=0.1,kmaf:window-ms=0.05,period-ms=0.05,carrefour:epoch-ms=0.1";

fn words(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// `sharemap cc ARGS`, refused when the compiler fails.
pub(crate) fn build(request: &DemoRequest, args: Vec<OsString>, what: &str) -> Result<()> {
    let status = sharemap_run::cc::build(&args, false, &request.tools, &mut |_| {})?;
    if status != 0 {
        return Err(Error::new(ErrorKind::Build, format!("`sharemap cc` failed to build {what} (status {status})")));
    }
    Ok(())
}

/// `sharemap record -o TRACE -- COMMAND` with `env`, refused when the program fails.
pub(crate) fn record(
    request: &DemoRequest,
    trace: &Path,
    command: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    no_aslr: bool,
) -> Result<()> {
    let record = RecordRequest {
        backend: "tracer".into(),
        event: "page-faults".into(),
        sample: 1,
        exclude_stack: false,
        burst: None,
        no_aslr,
        exclude: None,
        output: trace.to_path_buf(),
        format: None,
        command,
        env,
        quiet: true,
    };
    let recorded = Recorder::new(record, &request.tools)?.run()?;
    if !recorded.status.success() {
        return Err(Error::new(ErrorKind::Program, format!("the recorded program failed ({})", recorded.status)));
    }
    Ok(())
}

/// The stencil recorded, its sharing and mappings, then simulated (two sections); or one
/// saying why it was skipped.
pub fn recorded(request: &DemoRequest, takeaways: &mut Vec<String>) -> Vec<Section> {
    match try_recorded(request, takeaways) {
        Ok(sections) => sections,
        Err(e) => {
            vec![Section::skipped("program", "A real program", e, "scripts/setup installs clang for `sharemap cc`")]
        }
    }
}

fn try_recorded(request: &DemoRequest, takeaways: &mut Vec<String>) -> Result<Vec<Section>> {
    let dir = &request.dir;
    let src = dir.join("stencil3d.c");
    write_whole(&src, STENCIL.as_bytes())?;
    write_whole(&dir.join("common.h"), COMMON.as_bytes())?;
    let bin = dir.join("stencil3d");
    // -g: the data objects and the code that shares them are named by file and line.
    let mut args = words(&["-O2", "-g", "-fopenmp"]);
    args.extend([src.into(), "-o".into(), bin.clone().into()]);
    build(request, args, "workloads/stencil3d.c")?;
    let trace = dir.join("stencil3d.trace");
    let env = vec![("OMP_NUM_THREADS".into(), DEMO_THREADS.to_string().into())];
    record(request, &trace, vec![bin.into(), "32".into()], env, false)?;
    let summary = sharemap::info(&TraceInput::file(&trace), &())?;
    let bytes = std::fs::metadata(&trace)?.len();
    let sharing = sharemap::map::load_sharing(&TraceInput::file(&trace), &())?;
    let m = Machine::from_spec(DEMO_MACHINE)?;
    let mapped = mappings(&sharing, &m, &["sharemap", "compact", "scatter", "random:seed=1"])?;
    let cost_of = |k: usize| mapped.mappings[k].cost;
    let random = cost_of(3).max(f64::MIN_POSITIVE);
    let mut s = Section::new("program");
    s.line(format!(
        "A real program: workloads/stencil3d.c built with `sharemap cc -fopenmp`, recorded with {} threads: {} accesses, {:.2} bytes/access",
        summary.threads,
        summary.accesses,
        bytes as f64 / summary.accesses.max(1) as f64
    ));
    s.line(format!(
        "mapping cost relative to random: sharemap {:.3}, compact {:.3}, scatter {:.3}; its sharing (oracle):",
        cost_of(0) / random,
        cost_of(1) / random,
        cost_of(2) / random
    ));
    let n = sharing.matrix.threads();
    s.blocks.push(Block::Matrix { matrix: super::rows_of(&sharing.matrix), labels: vec![String::new(); n], indent: 2 });
    s.line("(CC='sharemap cc' make; sharemap record -o prog.trace -- ./prog; see docs/source-tracer.md)");
    s.line(format!(
        "Reading: a stencil shares with its neighbours in the grid, so a mapping that keeps neighbours close costs {:.2} of a random one{}.",
        cost_of(0) / random,
        if cost_of(0) < cost_of(1).min(cost_of(2)) { ", less than compact's or scatter's fixed orders" } else { "" }
    ));
    Ok(vec![s, shared(&trace)?, simulated(request, &trace, takeaways)?, advised(&trace, takeaways)?])
}

/// What is shared in the recording, by name: the objects whose lines threads share, how,
/// and the code that touches them.
fn shared(trace: &Path) -> Result<Section> {
    let session = Session::new(TraceInput::file(trace), Machine::from_spec(DEMO_MACHINE)?, 1);
    let w = session.shared()?;
    let grouped = sharemap::grouped;
    let mut s = Section::new("shared");
    let l = &w.lines;
    s.line(format!(
        "What is shared, by name (`analyze`, from the allocations and symbols the tracer recorded): {} lines, {} truly shared, {} falsely shared, {} read-shared, {} private",
        grouped(l.total()),
        grouped(l.true_shared),
        grouped(l.false_shared),
        grouped(l.read_shared),
        grouped(l.private)
    ));
    for o in w.objects.iter().filter(|o| o.lines.shared() > 0).take(3) {
        let code: Vec<String> = o.code.iter().map(|c| c.site.describe()).collect();
        s.line(format!(
            "  {}: {} truly, {} falsely, {} read-shared lines of {}, by {} threads{}",
            o.name,
            grouped(o.lines.true_shared),
            grouped(o.lines.false_shared),
            grouped(o.lines.read_shared),
            grouped(o.lines.total()),
            o.threads,
            if code.is_empty() { String::new() } else { format!("; code: {}", code.join(", ")) }
        ));
    }
    s.line("(sharemap analyze prog.trace -o DIR: the table, DIR/shared.csv; docs/detection/what-is-shared.md)");
    if let Some(top) = w.objects.first().filter(|o| o.lines.true_shared > 0) {
        s.line(format!(
            "Reading: the grid's boundary planes are truly shared: each thread reads the planes its neighbours write ({} lines of {}), the halo a mapping keeps close.",
            grouped(top.lines.true_shared),
            top.name
        ));
    }
    Ok(s)
}

/// `sharemap advise` on the recording: the mapping and placement to use, or that none is
/// worth it, and why.
fn advised(trace: &Path, takeaways: &mut Vec<String>) -> Result<Section> {
    let session = Session::new(TraceInput::file(trace), Machine::from_spec(DEMO_MACHINE)?, 1);
    let advice = session.advise(&sharemap::AdviseRequest::default())?;
    let mut s = Section::new("advice");
    s.line(format!(
        "What to use (`sharemap advise`: {} candidates simulated on {} in one pass, each against the OS's placement):",
        advice.candidates.len(),
        advice.machine
    ));
    s.line(format!("  verdict  {}", advice.verdict));
    s.line(format!("  why      {}", advice.why));
    if !advice.avoid.is_empty() {
        let each: Vec<String> = advice
            .avoid
            .iter()
            .map(|(name, speedup)| format!("{name} ({:.2}x the OS's time)", 1.0 / speedup))
            .collect();
        s.line(format!("  avoid    {}", each.join(", ")));
    }
    for note in &advice.notes {
        s.line(format!("  note     {note}"));
    }
    takeaways.push(format!("The recorded stencil, advised: {}.", advice.verdict));
    Ok(s)
}

/// The recording on the simulated SAMMU machine under every mechanism: time, last-level
/// misses and traffic against `os`, as a table and as SAMMU's (seed 000) bar plots.
fn simulated(request: &DemoRequest, trace: &Path, takeaways: &mut Vec<String>) -> Result<Section> {
    let sim_request = SimulateRequest { mechanisms: SIMULATED.into(), ..Default::default() };
    let machine = Machine::from_spec(DEMO_MACHINE)?;
    let sim = Session::new(TraceInput::file(trace), machine, 1).simulate(&sim_request)?;
    let base = request.dir.join("stencil3d-simulated");
    sharemap_report::plot::simulation(&sim, &base, "stencil3d")?;
    let mut s = Section::new("simulated");
    s.line(format!(
        "Simulated on {} (caches L{}, MESI, TLBs, DRAM by node; `sharemap simulate`), each mechanism on simulated time:",
        sim.machine,
        sim.cache_levels.iter().map(|l| l.to_string()).collect::<Vec<_>>().join("/L")
    ));
    let full: Vec<&str> = sim.mechanisms.iter().map(|m| m.mechanism.as_str()).collect();
    let (labels, cut) = sharemap_report::plot::table_labels(&full);
    let time = |m: &Outcome| m.vs_os.as_ref().map_or(1.0, |r| r.time);
    let rows = sim
        .mechanisms
        .iter()
        .zip(&labels)
        .map(|(m, label)| {
            Row::of(vec![
                Cell::text(label),
                Cell::Number(time(m), 3),
                Cell::Number(m.llc_mpka(), 2),
                Cell::Number(m.counts.interconnect_bytes as f64 / 1e3, 1),
                Cell::Percent(m.local_dram_share),
                Cell::Count(m.counts.thread_migrations),
                Cell::Count(m.counts.page_migrations),
                Cell::Count(m.counts.faults),
            ])
        })
        .collect();
    let head = ["mechanism", "time/os", "LLC MPKA", "traffic (KB)", "local", "thr.mig", "pg.mig", "faults"];
    s.blocks.push(Block::Table(Table { head: head.map(String::from).to_vec(), rows }));
    let options: Vec<String> = cut.iter().map(|(short, long)| format!("{short} = {long}")).collect();
    s.line(format!("(options: {})", options.join("; ")));
    for m in &sim.mechanisms {
        if let Some(note) = &m.note {
            s.line(format!("note: {}: {note}", m.mechanism.split(':').next().unwrap_or("")));
        }
    }
    s.line(format!(
        "(plots: {}-time, -misses, -traffic .{})",
        base.display(),
        sharemap_report::plot::EXTENSIONS.join("/.")
    ));
    for line in simulation_reading(&sim, &labels) {
        s.line(line);
    }
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
    Ok(s)
}

/// What the simulation table shows: which mechanisms beat os, which match it, and what the
/// slower ones spent their time on (faults, moves), in the table's own numbers.
fn simulation_reading(sim: &sharemap::Simulation, labels: &[String]) -> Vec<String> {
    let time = |m: &Outcome| m.vs_os.as_ref().map_or(1.0, |r| r.time);
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
                why.push(count(c.faults, "sampling fault", "sampling faults"));
            }
            if c.thread_migrations > 0 {
                why.push(count(c.thread_migrations, "thread move", "thread moves"));
            }
            if c.page_migrations > 0 {
                why.push(count(c.page_migrations, "page move", "page moves"));
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

/// The pipeline workload (a producer, four stages and a consumer handing items on) recorded,
/// then run on this host with the OS's mapping and the sharing-aware one (10 runs each,
/// interleaved), and in a 2-node guest with the mapping, to show where its threads ran and
/// its pages lay. The pipeline is the workload where a mapping decides something on a host
/// with one node and few PUs: which threads of a hand-off share a PU.
pub fn real_runs(request: &DemoRequest, takeaways: &mut Vec<String>) -> Vec<Section> {
    let built = match pipeline(request) {
        Ok(built) => built,
        Err(e) => return vec![Section::skipped("runs", "Real runs", e, "scripts/setup installs what they need")],
    };
    let mut sections = vec![match measured(request, &built, takeaways) {
        Ok(s) => s,
        Err(e) => Section::skipped("runs", "Real runs", e, "scripts/setup installs what they need"),
    }];
    sections.push(match in_guest(request, &built) {
        Ok(s) => s,
        Err(e) => Section::skipped("guest", "In a 2-node guest", e, "scripts/setup installs QEMU and busybox"),
    });
    sections
}

/// The pipeline built twice (traced, and plain with the system's compiler, as a user would
/// run their program) and recorded.
struct Pipeline {
    plain: PathBuf,
    trace: PathBuf,
}

fn pipeline(request: &DemoRequest) -> Result<Pipeline> {
    let dir = &request.dir;
    let src = dir.join("pipeline.c");
    write_whole(&src, PIPELINE.as_bytes())?;
    write_whole(&dir.join("common.h"), COMMON.as_bytes())?;
    let traced = dir.join("pipeline-traced");
    let mut args = words(&["-O2", "-pthread"]);
    args.extend([src.clone().into(), "-o".into(), traced.clone().into()]);
    build(request, args, "workloads/pipeline.c")?;
    let plain = dir.join("pipeline");
    let built = std::process::Command::new("cc")
        .args(["-O2", "-pthread"])
        .arg(&src)
        .arg("-o")
        .arg(&plain)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !built {
        std::fs::copy(&traced, &plain)?;
    }
    let trace = dir.join("pipeline.trace");
    record(request, &trace, vec![traced.into(), "20000".into()], Vec::new(), true)?;
    Ok(Pipeline { plain, trace })
}

/// os against the sharing-aware mapping, 10 runs each, interleaved; the runs written to
/// runs.csv for the report.
fn measured(request: &DemoRequest, built: &Pipeline, takeaways: &mut Vec<String>) -> Result<Section> {
    let host = Machine::live()?;
    let nodes = host.numa_count().max(1);
    let mut run = sharemap_run::RunRequest::new(vec![built.plain.clone().into(), "200000".into()]);
    run.thread_maps = vec!["sharemap".into()];
    run.sharing = Some(built.trace.clone());
    run.repeat = 10;
    let prepared = run.prepare(&request.tools, host.clone())?;
    let report = prepared.measure(&mut |_, _| {}).map_err(|stopped| match stopped {
        sharemap_run::Stopped::Refused(e) => e,
        sharemap_run::Stopped::Failed(f) => {
            Error::new(ErrorKind::Program, format!("run {} of {} failed", f.round + 1, f.configuration))
        }
    })?;
    sharemap_run::runs::write(&request.dir.join("runs.csv"), &report.results)?;
    let mut s = Section::new("runs");
    s.line(format!(
        "Real runs on this host ({} PUs, {} NUMA node{}): workloads/pipeline.c (a producer, 4 stages and a consumer: 6 threads handing items on), recorded (20000 items), then run (200000 items), os against its sharing-aware mapping:",
        host.pu_count(),
        nodes,
        if nodes > 1 { "s" } else { "" }
    ));
    s.line(format!(
        "{} each, interleaved; wall-clock seconds, mean with its 95% confidence interval (Student's t)",
        count(report.repeat as u64, "run", "runs")
    ));
    s.blocks.push(Block::Table(runs_table(&report.results)));
    let verdict = report.results.get(1).map(|r| match r.significant {
        Some(true) if r.normalized < 1.0 => {
            format!("the mapping is {:.0}% faster than os, beyond the noise", 100.0 * (1.0 - r.normalized))
        }
        Some(true) => format!("the mapping is {:.0}% slower than os, beyond the noise", 100.0 * (r.normalized - 1.0)),
        _ => "the difference is within the run-to-run noise (the intervals overlap)".to_string(),
    });
    let verdict = verdict.unwrap_or_else(|| "only os was measured".into());
    s.line(format!(
        "Reading: {verdict}. Each hand-off of the pipeline moves a line between two threads; the mapping puts the threads of a hand-off on one PU, where Linux spreads them over {} PUs. The other workloads share through one last-level cache{}, which no pinning changes on this host (docs/benchmarks.md, real runs: within the noise).",
        host.pu_count(),
        if nodes == 1 { " and one node" } else { "" }
    ));
    takeaways.push(format!(
        "Measured on this host ({} PUs, {nodes} node{}), for the pipeline: {verdict}.",
        host.pu_count(),
        if nodes > 1 { "s" } else { "" }
    ));
    s.line("(sharemap run --thread-map sharemap --sharing prog.trace --repeat 10 -- ./prog; docs/run.md)");
    Ok(s)
}

/// A measurement as `sharemap run` tabulates it: each configuration's mean, interval, time
/// over the baseline's, and whether the difference is beyond the noise.
fn runs_table(results: &[sharemap_run::ConfigurationResult]) -> Table {
    let base = &results[0].name;
    let rows = results
        .iter()
        .map(|r| {
            let verdict = r.verdict(base);
            Row::of(vec![
                Cell::text(&r.name),
                Cell::Number(r.mean, 4),
                r.ci95.map_or(Cell::text("-"), |c| Cell::Number(c, 4)),
                Cell::Number(r.normalized, 3),
                Cell::text(verdict),
            ])
        })
        .collect();
    let head = ["configuration", "mean s", "+/- 95%", &format!("vs {base}"), &format!("difference from {base}")];
    Table { head: head.map(String::from).to_vec(), rows }
}

/// The mapping in a 2-node guest: where its threads ran and its pages lay, as the guest
/// kernel told.
fn in_guest(request: &DemoRequest, built: &Pipeline) -> Result<Section> {
    let mut s = Section::new("guest");
    if sharemap_run::vm::find_kernel(None).is_err() {
        sharemap_run::vm::fetch_kernel().map_err(|e| {
            Error::new(ErrorKind::Guest, format!("no guest kernel, and fetching one failed: {}", e.why()))
        })?;
        s.line("(the guest kernel was fetched once: Debian's cloud kernel, into ~/.cache/sharemap)");
    }
    let mut vm = sharemap_run::vm::VmRequest::new(vec![built.plain.clone().into(), "20000".into()]);
    vm.thread_map = Some("sharemap".into());
    vm.sharing = Some(built.trace.clone());
    let report = vm.prepare(&request.tools)?.boot()?;
    if report.status != 0 {
        return Err(Error::new(
            ErrorKind::Guest,
            format!("the program exited with status {} in the guest", report.status),
        ));
    }
    let observed = report
        .observed
        .ok_or_else(|| Error::new(ErrorKind::Guest, "its run reported nothing of where the threads ran"))?;
    s.line("In a 2-node guest (QEMU; CPUs 0-1 on node 0, 2-3 on node 1), the same mapping, where its threads ran and its pages lay:");
    let mut alone = 0;
    for t in &observed.threads {
        let last = t.last_cpu.map_or("?".to_string(), |c| c.to_string());
        let allowed = sharemap_run::cpu_ranges(&t.allowed);
        if t.last_cpu.is_some() && t.allowed == t.last_cpu.into_iter().collect::<Vec<_>>() {
            alone += 1;
        }
        s.line(format!("  thread {} (tid {}) last ran on CPU {last}, allowed CPUs {allowed}", t.order, t.tid));
    }
    let nodes = |pages: &[(usize, u64)]| {
        let v: Vec<String> = pages.iter().map(|(n, p)| format!("node {n} {p}")).collect();
        if v.is_empty() { "none".to_string() } else { v.join(", ") }
    };
    let pages = match &observed.pages_unseen {
        Some(why) => format!("not seen ({why})"),
        None => nodes(&observed.pages_per_node),
    };
    s.line(format!("  resident pages at exit: {pages} (anonymous: {})", nodes(&observed.anonymous_per_node)));
    s.line(format!(
        "Reading: in the guest kernel's own accounting, {alone} of {} threads last ran on the one CPU the mapping allowed it; the program's pages lay where first touch put them: {pages}.",
        observed.threads.len()
    ));
    s.line("(sharemap vm --thread-map MAP --placement PLAN -- ./prog; docs/vm.md)");
    Ok(s)
}
