//! The reference systems' own programs against sharemap's STM, unmodified, built the way
//! docs/stm.md tells their users to (the releases come from `../shared/anchors` or
//! SHAREMAP_ANCHORS and are unpacked in a scratch directory):
//! - TinySTM 1.0.5's test programs, built by TinySTM's Makefiles with
//!   `CC='sharemap cc --stm --no-trace'` in its intact tree (whose `-L../../lib -lstm` would
//!   link TinySTM itself), pass TinySTM's `make check`; its irrevocability regression,
//!   with its assertions on, takes the serial path; its perf regression links
//!   (`stm_inc_clock`) and runs. sharemap's own STM programs (workloads/stm) build against
//!   TinySTM itself and pass their checks: they are valid TinySTM programs.
//! - STAMP 0.9.10's eight applications, built by STAMP's Makefile.stm with the command
//!   docs/stm.md gives, verify on their small (simulator) inputs at 2 and 4 threads, with
//!   STMap off and on.

mod common;
use common::anchor;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sharemap_cc(flags: &str) -> String {
    format!("{} cc {flags}", env!("CARGO_BIN_EXE_sharemap"))
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed:\n{}{}", text(&out), "");
    out
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn unpack(tarball: &Path, dir: &Path) {
    run(Command::new("tar").arg("xzf").arg(tarball).arg("-C").arg(dir));
}

/// TinySTM's tree, its library built as its README says, its tests built against sharemap.
fn tinystm_with_sharemap(dir: &Path) -> Option<(PathBuf, String)> {
    unpack(&anchor("tinystm-1.0.5.tar.gz")?, dir);
    let tree = dir.join("tinystm-1.0.5");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    run(Command::new("make").current_dir(&tree));
    assert!(tree.join("lib/libstm.a").is_file(), "TinySTM's own library is there to be linked by mistake");
    let out = run(Command::new("make")
        .arg(format!("CC={}", sharemap_cc("--stm --no-trace")))
        .current_dir(tree.join("test"))
        .env("SHAREMAP_COMPILER", "gcc"));
    Some((tree, text(&out)))
}

/// Whether a binary holds sharemap's STM (its symbols are named after it), not TinySTM's.
fn has_sharemap_stm(binary: &Path) -> bool {
    let out = run(Command::new("nm").arg(binary));
    String::from_utf8_lossy(&out.stdout).lines().any(|l| l.contains("sharemap_stm"))
}

/// A program of TinySTM's regression directory built against sharemap's STM without
/// -DNDEBUG (its assertions on).
fn regression_program(regression: &Path, name: &str) -> PathBuf {
    let out = regression.join(format!("{name}-checked"));
    run(Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(["cc", "--stm", "--no-trace", "-O2", "-I../../include", &format!("{name}.c"), "-o"])
        .arg(&out)
        .arg("-lpthread")
        .current_dir(regression));
    out
}

#[test]
fn tinystm_test_programs_build_unmodified_and_pass_its_checks() {
    let dir = tempfile::tempdir().unwrap();
    let Some((tree, build)) = tinystm_with_sharemap(dir.path()) else { return };
    let test = tree.join("test");
    assert!(
        build.contains("-lstm not linked: sharemap's STM takes its place"),
        "sharemap cc did not say it replaced -lstm:\n{build}"
    );
    for binary in ["bank/bank", "intset/intset-rb", "intset/intset-hs", "regression/types"] {
        assert!(has_sharemap_stm(&test.join(binary)), "{binary} was linked without sharemap's STM");
    }
    let check = run(Command::new("make").arg("check").current_dir(&test));
    assert!(text(&check).contains("All tests passed"), "make check:\n{}", text(&check));

    // The irrevocability regression with its assertions on (TinySTM's Makefiles add
    // -DNDEBUG): serial irrevocable transactions run alone on the uninstrumented path.
    let regression = test.join("regression");
    let irr = regression_program(&regression, "irrevocability");
    for threads in ["1", "4"] {
        let out = run(Command::new(&irr).args(["-n", threads, "-d", "1500"]));
        let t = text(&out);
        let serial: u64 = t
            .lines()
            .find_map(|l| l.strip_prefix("Number of successful irrevocable-serial executions"))
            .and_then(|l| l.trim_start_matches([' ', ':']).trim().parse().ok())
            .unwrap_or_else(|| panic!("no serial count in\n{t}"));
        assert!(t.contains("PASSED") && serial > 0, "{threads} threads: {serial} serial executions\n{t}");
    }

    // sharemap's own STM programs are valid TinySTM programs: built against TinySTM itself,
    // they run and pass their checks (they once allocated before registering the thread,
    // which TinySTM does not allow: they crashed on it).
    let workloads = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/stm");
    for (name, source, define) in [
        ("bank", "bank.c", None),
        ("linkedlist", "intset.c", Some("-DSET_LIST")),
        ("rbtree", "intset.c", Some("-DSET_RBTREE")),
        ("hashset", "intset.c", Some("-DSET_HASH")),
        ("skiplist", "intset.c", Some("-DSET_SKIP")),
    ] {
        let binary = dir.path().join(format!("{name}-on-tinystm"));
        run(Command::new("gcc")
            .args(["-O2", "-I"])
            .arg(tree.join("include"))
            .args(define)
            .arg(workloads.join(source))
            .arg("-o")
            .arg(&binary)
            .arg(tree.join("lib/libstm.a"))
            .arg("-lpthread"));
        let out = run(Command::new(&binary).args(["-t", "2", "-d", "300"]));
        assert!(text(&out).contains("check=ok"), "{name} on TinySTM:\n{}", text(&out));
    }

    // perf.c calls stm_inc_clock (TinySTM's Makefile does not build it).
    let perf = regression_program(&regression, "perf");
    let out = run(&mut Command::new(&perf));
    assert!(text(&out).contains("RW transaction - 100 load - 20 store"), "perf:\n{}", text(&out));
}

/// STAMP's applications and their small inputs, with each one's own check of its result
/// (bayes, kmeans and ssca2 check nothing: they must finish and print their result).
const STAMP: [(&str, &[&str], &str); 10] = [
    ("bayes", &["-v32", "-r1024", "-n2", "-p20", "-s0", "-i2", "-e2"], "Learn score"),
    ("genome", &["-g256", "-s16", "-n16384"], "Sequence matches gene: yes"),
    ("intruder", &["-a10", "-l4", "-n2038", "-s1"], "Num found       = 174"),
    ("kmeans", &["-m40", "-n40", "-t0.05", "-i", "inputs/random-n2048-d16-c16.txt"], "Time:"),
    ("kmeans", &["-m15", "-n15", "-t0.05", "-i", "inputs/random-n2048-d16-c16.txt"], "Time:"),
    ("labyrinth", &["-i", "inputs/random-x32-y32-z3-n96.txt"], "Verification passed"),
    ("ssca2", &["-s13", "-i1.0", "-u1.0", "-l3", "-p3"], "Time taken for all"),
    ("vacation", &["-n2", "-q90", "-u98", "-r16384", "-t4096"], "Checking tables... done"),
    ("vacation", &["-n4", "-q60", "-u90", "-r16384", "-t4096"], "Checking tables... done"),
    ("yada", &["-a20", "-i", "inputs/633.2"], "Final mesh is valid"),
];

fn threads_option(app: &str) -> &'static str {
    match app {
        "kmeans" => "-p",
        "vacation" => "-c",
        _ => "-t",
    }
}

#[test]
fn stamp_builds_with_the_documented_command_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let Some(stamp) = anchor("stamp-0.9.10.tar.gz") else { return };
    unpack(&stamp, dir.path());
    let stamp = dir.path().join("stamp-0.9.10");
    run(Command::new("sh")
        .arg("-c")
        .arg("find . -path '*inputs*' -name '*.gz' -exec gunzip -f {} +")
        .current_dir(&stamp));
    // docs/stm.md: make -f Makefile.stm CC="sharemap cc --stm-tl2 --no-trace" LD="..."
    let cc = sharemap_cc("--stm-tl2 --no-trace");
    let mut built = std::collections::BTreeSet::new();
    for (app, args, verified) in STAMP {
        let app_dir = stamp.join(app);
        if built.insert(app) {
            // The applications share ../lib's objects, compiled with each one's flags:
            // cleaned between two applications, or one links another's.
            let clean = ["-f", "Makefile.stm", "clean"];
            run(Command::new("make").args(clean).current_dir(&app_dir));
            let out = run(Command::new("make")
                .args(["-f", "Makefile.stm", &format!("CC={cc}"), &format!("LD={cc}")])
                .current_dir(&app_dir)
                .env("SHAREMAP_COMPILER", "gcc"));
            assert!(has_sharemap_stm(&app_dir.join(app)), "{app}: linked without sharemap's STM\n{}", text(&out));
        }
        for stmap in ["off", "on"] {
            for threads in ["2", "4"] {
                let out = run(Command::new(app_dir.join(app))
                    .arg(format!("{}{threads}", threads_option(app)))
                    .args(args)
                    .current_dir(&app_dir)
                    .env("SHAREMAP_STMAP", stmap));
                let t = text(&out);
                assert!(
                    t.contains(verified),
                    "{app} {args:?}, {threads} threads, STMap {stmap}: no '{verified}' in\n{t}"
                );
            }
        }
    }
}
