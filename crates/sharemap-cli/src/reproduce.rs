//! `sharemap reproduce`: the seed papers' claims as experiments (docs/reproduce.md). The
//! recorded workload a claim needs (the suite's cg) is built with `sharemap cc` and recorded
//! here first, when a compiler is installed.

use anyhow::{Result, anyhow};
use clap::Args;
use sharemap::reproduce::{CLAIMS, ClaimResult, Inputs, Scale, StmRecording, Verdict, reproduce};
use sharemap::trace::write_whole;
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
    write_whole(&src, CG.as_bytes())
        .and_then(|_| write_whole(&dir.join("common.h"), COMMON.as_bytes()))
        .map_err(|e| e.to_string())?;
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
    // The parallel part alone: no serial reference run, as in NPB's CG.
    let env = vec![("OMP_NUM_THREADS".into(), CG_THREADS.into()), ("SHAREMAP_WORKLOAD_NOCHECK".into(), "1".into())];
    record(&trace, vec![bin.into(), CG_ROWS.into()], env).map_err(|e| format!("recording cg: {e}"))?;
    Ok(trace)
}

/// The suite's STM sets (workloads/stm), the red-black tree and the hash set of seed 002's
/// micro-benchmarks.
const STM_SOURCES: [(&str, &str); 6] = [
    ("intset.c", include_str!("../../../workloads/stm/intset.c")),
    ("bench.h", include_str!("../../../workloads/stm/bench.h")),
    ("rbtree.h", include_str!("../../../workloads/stm/rbtree.h")),
    ("hashset.h", include_str!("../../../workloads/stm/hashset.h")),
    ("list.h", include_str!("../../../workloads/stm/list.h")),
    ("skiplist.h", include_str!("../../../workloads/stm/skiplist.h")),
];
/// Threads of the STM recordings: the count seed 002 ran on both of its machines.
const STM_THREADS: &str = "32";
/// STAMP 0.9.10's applications and inputs: its README's non-simulator ones, or the largest
/// the release ships where that one is not in it (kmeans, yada), or a quarter of it and less
/// (intruder, ssca2: minutes under the tracer on this machine). vacation is left out: the
/// paper's decisions on it vary run to run.
const STAMP_APPS: [(&str, &str, &[&str]); 7] = [
    ("bayes", "-t", &["-v32", "-r4096", "-n10", "-p40", "-i2", "-e8", "-s1"]),
    ("genome", "-t", &["-g16384", "-s64", "-n16777216"]),
    ("intruder", "-t", &["-a10", "-l128", "-n65536", "-s1"]),
    ("kmeans", "-p", &["-m15", "-n15", "-t0.00001", "-i", "@inputs/random-n16384-d24-c16.txt"]),
    ("labyrinth", "-t", &["-i", "@inputs/random-x512-y512-z7-n512.txt"]),
    ("ssca2", "-t", &["-s17", "-i1.0", "-u1.0", "-l3", "-p3"]),
    ("yada", "-t", &["-a15", "-i", "@inputs/ttimeu100000.2"]),
];

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

/// Records `command` into `trace` with the tracer: the trace, or why not.
fn record(trace: &Path, command: Vec<OsString>, env: Vec<(OsString, OsString)>) -> std::result::Result<(), String> {
    let request = RecordRequest {
        backend: "tracer".into(),
        event: "page-faults".into(),
        sample: 1,
        exclude_stack: false,
        burst: None,
        no_aslr: false,
        exclude: None,
        output: trace.to_path_buf(),
        format: None,
        command,
        env,
        quiet: false,
    };
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let recorded = Recorder::new(request, &Tools::beside(&exe)).and_then(|r| r.run()).map_err(|e| e.to_string())?;
    if !recorded.status.success() {
        return Err(format!("exited with {}", recorded.status));
    }
    Ok(())
}

/// Runs `command` in `dir`, its output kept for the error: Ok, or the output's last lines.
fn run_in(dir: &Path, program: &str, args: &[&str]) -> std::result::Result<(), String> {
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let tail: Vec<&str> = text.lines().rev().take(3).collect();
    Err(format!(
        "{program} {} in {}: {}",
        args.join(" "),
        dir.display(),
        tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
    ))
}

/// A short key of a program's arguments, in its recording's name: a directory kept by
/// `--keep` reuses a recording only if it was made with the same arguments.
fn input_key(args: &[&str]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (STM_THREADS, args).hash(&mut h);
    format!("{:08x}", h.finish() as u32)
}

/// Where STAMP's source is: `--stamp`, else SHAREMAP_ANCHORS' tarball; absolute, since it
/// is unpacked from inside the working directory.
fn stamp_source(given: Option<&Path>) -> Option<PathBuf> {
    given
        .map(Path::to_path_buf)
        .or_else(|| {
            let dir = std::env::var_os("SHAREMAP_ANCHORS")?;
            Some(Path::new(&dir).join("stamp-0.9.10.tar.gz")).filter(|p| p.is_file())
        })
        .map(|p| std::path::absolute(&p).unwrap_or(p))
}

/// Builds STAMP's applications with `sharemap cc --stm-tl2 --tx-only` in `dir` and records
/// each: (name, trace) per application, or why none.
fn record_stamp(source: &Path, dir: &Path) -> std::result::Result<Vec<StmRecording>, String> {
    let tree = dir.join("stamp-0.9.10");
    if !tree.is_dir() {
        let (program, args): (&str, Vec<String>) = if source.is_dir() {
            ("cp", vec!["-a".into(), source.display().to_string(), tree.display().to_string()])
        } else {
            ("tar", vec!["xzf".into(), source.display().to_string(), "-C".into(), dir.display().to_string()])
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_in(dir, program, &args)?;
        if !tree.join("genome").is_dir() {
            return Err(format!("{}: not STAMP 0.9.10's source (no stamp-0.9.10/genome in it)", source.display()));
        }
        run_in(&tree, "sh", &["-c", "find . -path '*inputs*' -name '*.gz' -exec gunzip -f {} +"])?;
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let cc = format!("CC={} cc --stm-tl2 --tx-only", exe.display());
    let ld = format!("LD={} cc --stm-tl2 --tx-only", exe.display());
    let mut recorded = Vec::new();
    for (app, threads_flag, args) in STAMP_APPS {
        let app_dir = tree.join(app);
        let trace = dir.join(format!("stamp-{app}-{}.trace", input_key(args)));
        let command: Vec<OsString> = std::iter::once(app_dir.join(app).into_os_string())
            .chain(std::iter::once(format!("{threads_flag}{STM_THREADS}").into()))
            .chain(args.iter().map(|a| match a.strip_prefix('@') {
                Some(input) => app_dir.join(input).into_os_string(),
                None => OsString::from(a),
            }))
            .collect();
        if !trace.is_file() {
            // The applications share ../lib's objects, each compiled with its own flags.
            run_in(&app_dir, "make", &["-f", "Makefile.stm", "clean"])?;
            run_in(&app_dir, "make", &["-f", "Makefile.stm", &cc, &ld])?;
            record(&trace, command, Vec::new()).map_err(|e| format!("{app}: {e}"))?;
        }
        recorded.push(StmRecording { name: app.into(), trace, input: args.join(" ").replace('@', "") });
    }
    Ok(recorded)
}

/// Builds the suite's red-black tree and hash set with `sharemap cc --stm --tx-only` in
/// `dir` and records each for 2 s at 32 threads, 20 % updates.
fn record_intsets(dir: &Path) -> std::result::Result<Vec<StmRecording>, String> {
    let src_dir = dir.join("stm");
    sharemap::trace::make_dir(&src_dir).map_err(|e| e.to_string())?;
    for (name, text) in STM_SOURCES {
        write_whole(&src_dir.join(name), text.as_bytes()).map_err(|e| e.to_string())?;
    }
    let mut recorded = Vec::new();
    for (name, define) in [("rbtree", "-DSET_RBTREE"), ("hashset", "-DSET_HASH")] {
        let bin = src_dir.join(name);
        let args = ["-t", STM_THREADS, "-d", "2000", "-u", "20"];
        let trace = dir.join(format!("stm-{name}-{}.trace", input_key(&args)));
        if !trace.is_file() {
            let cc: Vec<OsString> = ["--stm", "--tx-only", "-O2", define]
                .iter()
                .map(OsString::from)
                .chain([src_dir.join("intset.c").into(), "-o".into(), bin.clone().into(), "-pthread".into()])
                .collect();
            match crate::cc::wrap(&cc, false) {
                Ok(code) if code == ExitCode::SUCCESS => {}
                Ok(_) => return Err(format!("`sharemap cc` failed to build workloads/stm/intset.c {define}")),
                Err(e) => return Err(format!("`sharemap cc` cannot build workloads/stm/intset.c here: {e:#}")),
            }
            let command = std::iter::once(bin.into_os_string()).chain(args.iter().map(OsString::from)).collect();
            record(&trace, command, Vec::new()).map_err(|e| format!("{name}: {e}"))?;
        }
        recorded.push(StmRecording { name: name.into(), trace, input: args.join(" ") });
    }
    Ok(recorded)
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
    if let Some(stamp) = &args.stamp
        && !stamp.exists()
    {
        return Err(anyhow!("--stamp {}: no such file or directory", stamp.display()));
    }
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
        (None, None) => unreachable!("a temporary directory when none is kept"),
    };
    let recording = OutputToStderr::new();
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
    let wants_stm = args.claim.is_empty() || args.claim.iter().any(|c| c == "stmap-equation-1");
    let (mut stm, mut stm_missing) = (Vec::new(), Vec::new());
    if wants_stm {
        if !quiet {
            eprintln!(
                "sharemap: reproduce: building and recording STM programs ({STM_THREADS} threads, the STM's accesses alone)"
            );
        }
        match record_intsets(&dir) {
            Ok(r) => stm.extend(r),
            Err(why) => stm_missing.push(format!("no recording of the suite's STM sets: {why}")),
        }
        match stamp_source(args.stamp.as_deref()) {
            Some(source) => match record_stamp(&source, &dir) {
                Ok(r) => stm.extend(r),
                Err(why) => stm_missing.push(format!("no recording of STAMP's applications: {why}")),
            },
            None => stm_missing.push(
                "STAMP's applications not run: no STAMP 0.9.10 source (give --stamp with its tarball or directory, or set SHAREMAP_ANCHORS to a directory holding stamp-0.9.10.tar.gz)".into(),
            ),
        }
    }
    drop(recording);
    let scale = if args.quick { Scale::Quick } else { Scale::Paper };
    let inputs = Inputs { cg, cg_missing, stm, stm_missing, scale, dir: Some(dir) };
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
