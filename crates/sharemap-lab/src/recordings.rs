//! The recordings `sharemap reproduce` makes before its claims run: the workloads' cg, the
//! suite's STM sets and STAMP's applications, each built with sharemap-run's compiler
//! driver and recorded with its `Recorder`. Each says why, in words, when it cannot be made.

use sharemap::reproduce::StmRecording;
use sharemap::trace::write_whole;
use sharemap_run::Tools;
use sharemap_run::record::{RecordRequest, Recorder};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

const CG: &str = include_str!("../../../workloads/cg.c");
const COMMON: &str = include_str!("../../../workloads/common.h");
/// The recorded CG: rows (each 8 nonzeros: 144 bytes, 72 MB in all, the L3s' total on
/// sammu-x7550) and threads (one per PU there).
pub const CG_ROWS: &str = "500000";
pub const CG_THREADS: &str = "64";

/// Builds the workloads' cg with `sharemap cc` in `dir` and records its parallel part (its
/// serial self-check left out): the trace, or why not.
pub fn record_cg(dir: &Path, tools: &Tools) -> std::result::Result<PathBuf, String> {
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
    match sharemap_run::cc::build(&args, false, tools, &mut |_| {}) {
        Ok(0) => {}
        Ok(_) => return Err("`sharemap cc` failed to build workloads/cg.c".into()),
        Err(e) => return Err(format!("`sharemap cc` cannot build workloads/cg.c here: {e}")),
    }
    // The parallel part alone: no serial reference run, as in NPB's CG.
    let env = vec![("OMP_NUM_THREADS".into(), CG_THREADS.into()), ("SHAREMAP_WORKLOAD_NOCHECK".into(), "1".into())];
    record(&trace, vec![bin.into(), CG_ROWS.into()], env, tools).map_err(|e| format!("recording cg: {e}"))?;
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
pub const STM_THREADS: &str = "32";
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

/// Records `command` into `trace` with the tracer: the trace, or why not.
fn record(
    trace: &Path,
    command: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    tools: &Tools,
) -> std::result::Result<(), String> {
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
    let recorded = Recorder::new(request, tools).and_then(|r| r.run()).map_err(|e| e.to_string())?;
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
pub fn stamp_source(given: Option<&Path>) -> Option<PathBuf> {
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
pub fn record_stamp(source: &Path, dir: &Path, tools: &Tools) -> std::result::Result<Vec<StmRecording>, String> {
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
    let exe = tools.sharemap.as_ref().ok_or("no sharemap binary to give make as its compiler")?;
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
            record(&trace, command, Vec::new(), tools).map_err(|e| format!("{app}: {e}"))?;
        }
        recorded.push(StmRecording { name: app.into(), trace, input: args.join(" ").replace('@', "") });
    }
    Ok(recorded)
}

/// Builds the suite's red-black tree and hash set with `sharemap cc --stm --tx-only` in
/// `dir` and records each for 2 s at 32 threads, 20 % updates.
pub fn record_intsets(dir: &Path, tools: &Tools) -> std::result::Result<Vec<StmRecording>, String> {
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
            match sharemap_run::cc::build(&cc, false, tools, &mut |_| {}) {
                Ok(0) => {}
                Ok(_) => return Err(format!("`sharemap cc` failed to build workloads/stm/intset.c {define}")),
                Err(e) => return Err(format!("`sharemap cc` cannot build workloads/stm/intset.c here: {e}")),
            }
            let command = std::iter::once(bin.into_os_string()).chain(args.iter().map(OsString::from)).collect();
            record(&trace, command, Vec::new(), tools).map_err(|e| format!("{name}: {e}"))?;
        }
        recorded.push(StmRecording { name: name.into(), trace, input: args.join(" ") });
    }
    Ok(recorded)
}
