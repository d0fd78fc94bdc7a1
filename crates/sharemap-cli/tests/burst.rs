//! Burst-sampled tracing (`sharemap cc --burst`): a program whose accesses are known, built
//! with the pass plugin, computes what its plain build computes; recorded with `--burst all`
//! it gives exactly its accesses, as ThreadSanitizer's instrumentation does; burst-sampled it
//! gives a share of them, with the bursts marked and weighed; and the analyses that need
//! every access refuse such a trace.

mod common;
use common::{p, s};
use sharemap::trace::{EventKind, TraceReader, TraceSource};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Threads, elements of each thread's block, passes over it.
const T: u64 = 4;
const N: u64 = 4096;
const R: u64 = 200;

/// Each thread reads and writes its own block R times, with its neighbours' first elements
/// read on each pass (sharing between neighbours); volatile, so every access stays one
/// 8-byte access whatever the optimiser does.
const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdio.h>
#define T 4
#define N 4096
#define R 200
static volatile long a[T][N];
static volatile long seen[T];
static void *work(void *arg) {
    long t = (long)arg;
    for (int r = 0; r < R; r++) {
        for (int i = 0; i < N; i++) a[t][i] = a[t][i] + i;
        seen[t] = a[(t + 1) % T][0];
    }
    return 0;
}
int main(void) {
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++) a[t][i] = 0;
    pthread_t th[T];
    for (long t = 0; t < T; t++) pthread_create(&th[t], 0, work, (void *)t);
    for (int t = 0; t < T; t++) pthread_join(th[t], 0);
    long sum = 0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++) sum += a[t][i];
    printf("%ld\n", sum);
    return 0;
}
"#;

/// The accesses the program makes to its arrays: initialisation, R passes of a read and a
/// write per element plus a read and a write for the neighbour, and the final sum.
const ACCESSES: u64 = T * N + T * R * (2 * N + 2) + T * N;

fn expected_sum() -> u64 {
    T * R * (N * (N - 1) / 2)
}

use common::sharemap_env as sharemap;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn clang() -> bool {
    ["clang", "clang-14"].iter().any(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
}

/// The program built by `sharemap cc` with `flags` (-O2 and -pthread added).
fn build(dir: &tempfile::TempDir, name: &str, flags: &[&str]) -> PathBuf {
    let src = p(dir, "prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let out = p(dir, name);
    let mut args = vec!["cc"];
    args.extend_from_slice(flags);
    args.extend(["-O2", "-pthread", s(&src), "-o", s(&out)]);
    let built = sharemap(&args, &[]);
    assert!(built.status.success(), "sharemap {args:?}: {}", text(&built));
    out
}

fn record(trace: &Path, prog: &Path, flags: &[&str]) -> Output {
    let mut args = vec!["record", "-o", s(trace)];
    args.extend_from_slice(flags);
    args.extend(["--", s(prog)]);
    let out = sharemap(&args, &[]);
    assert!(out.status.success(), "record {flags:?}: {}", text(&out));
    out
}

/// (accesses to the program's arrays, events by kind, metadata) of a trace; `lo..hi` are the
/// arrays' addresses (the program's data: those above the stack are left out).
fn read(trace: &Path) -> (u64, Vec<EventKind>, sharemap::trace::Metadata) {
    let mut r = TraceReader::open(trace, None).unwrap();
    let meta = r.metadata().clone();
    let (mut accesses, mut events) = (0u64, Vec::new());
    r.for_each_chunk(&mut |c| {
        // The arrays are globals: below the stacks and libraries, in the executable's data.
        accesses += c.accesses.addr.iter().filter(|&&a| a < 0x7000_0000_0000).count() as u64;
        events.extend(c.events.iter().map(|e| e.kind));
        Ok(())
    })
    .unwrap();
    (accesses, events, meta)
}

#[test]
fn a_burst_build_computes_what_the_plain_one_does_and_records_every_access_when_asked() {
    if !clang() {
        return common::skip(common::Need::Clang, "clang is not installed (scripts/setup installs it)");
    }
    let dir = tempfile::tempdir().unwrap();
    let sum = expected_sum().to_string();
    for (name, flags) in
        [("burst", &["--burst", "20:80"][..]), ("tiny", &["--burst=1:1"][..]), ("none", &["--burst", "0"][..])]
    {
        let prog = build(&dir, name, flags);
        let out = Command::new(&prog).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), sum, "{name} unrecorded");
        // Recorded, with windows of a microsecond in every two: thousands of switches.
        let trace = p(&dir, &format!("{name}.trace"));
        let rec = record(&trace, &prog, &["--burst", "1:1"]);
        assert!(text(&rec).contains(&sum), "{name} recorded: {}", text(&rec));
    }
    // Every access, as the complete build records them.
    let prog = build(&dir, "burst-all", &["--burst"]);
    let all = p(&dir, "all.trace");
    record(&all, &prog, &["--burst", "all"]);
    let (accesses, events, meta) = read(&all);
    assert_eq!(accesses, ACCESSES, "record --burst all");
    assert!(meta.burst.is_none() && !events.contains(&EventKind::BurstBegin), "a complete trace is not marked sampled");
    assert_eq!(meta.source.params.get("burst").map(String::as_str), Some("all"));
    let tsan = build(&dir, "complete", &[]);
    let complete = p(&dir, "complete.trace");
    record(&complete, &tsan, &[]);
    assert_eq!(read(&complete).0, ACCESSES, "ThreadSanitizer's instrumentation");
    // Built with --burst 0, a program records nothing of its own.
    let none = p(&dir, "none0.trace");
    record(&none, &build(&dir, "zero", &["--burst", "0"]), &[]);
    assert_eq!(read(&none).0, 0, "--burst 0");
}

#[test]
fn a_burst_sampled_trace_marks_its_bursts_weighs_its_threads_and_keeps_the_sharing() {
    if !clang() {
        return common::skip(common::Need::Clang, "clang is not installed (scripts/setup installs it)");
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build(&dir, "prog", &["--burst", "20:80"]);
    let (sampled, complete) = (p(&dir, "sampled.trace"), p(&dir, "complete.trace"));
    record(&sampled, &prog, &["--no-aslr"]);
    record(&complete, &prog, &["--no-aslr", "--burst", "all"]);
    let (accesses, events, meta) = read(&sampled);
    let burst = meta.burst.clone().expect("the trace says it is burst-sampled");
    assert_eq!((burst.on, burst.off), (20, 80));
    assert!(accesses > 0 && accesses < ACCESSES, "{accesses} of {ACCESSES}");
    let begins = events.iter().filter(|&&k| k == EventKind::BurstBegin).count();
    let ends = events.iter().filter(|&&k| k == EventKind::BurstEnd).count();
    assert!(begins > 0 && ends > 0 && begins >= ends, "{begins} begin, {ends} end");
    assert_eq!(burst.weights.len(), meta.threads as usize);
    assert!(burst.weights.iter().skip(1).all(|&w| w >= 1.0), "{:?}", burst.weights);
    // The sharing (neighbours, through the first elements) against the complete trace's.
    let out_dir = p(&dir, "fidelity");
    let out = sharemap(&["analyze", s(&sampled), "--against", s(&complete), "-o", s(&out_dir)], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("against the complete trace"), "{}", text(&out));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap()).unwrap();
    let f = &summary["fidelity"];
    assert!(f["pages_compared"].as_u64().unwrap() > 0, "{f}");
    assert!(f["pages_near_best"].as_f64().unwrap() >= f["pages_agreeing"].as_f64().unwrap(), "{f}");
    assert!(f["mapping_cost_ratio"].as_f64().unwrap() >= 1.0 - 1e-9, "{f}");
    // The analyses that count every reference refuse it, in one line that says why.
    for args in [
        &["place", s(&sampled)][..],
        &["simulate", s(&sampled)][..],
        &["sweep", s(&sampled), "--vary", "G", "--values", "1,2", "-o", s(&p(&dir, "sweep"))][..],
    ] {
        let out = sharemap(args, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("burst-sampled") && err.lines().count() == 1, "{args:?}: {err}");
    }
}

#[test]
fn burst_settings_are_checked_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let src = p(&dir, "x.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    for bad in ["--burst=5", "--burst=1:0", "--burst=a:b"] {
        let out = sharemap(&["cc", bad, s(&src), "-o", s(&p(&dir, "x"))], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("expected ON:OFF") && err.lines().count() == 1, "{bad}: {err}");
    }
    let out = sharemap(&["cc", "--burst", s(&src), "-o", s(&p(&dir, "x"))], &[("SHAREMAP_COMPILER", "gcc")]);
    assert!(!out.status.success() && text(&out).contains("--burst needs clang"), "{}", text(&out));
    // A program not built burst-sampled is refused by record --burst before it runs.
    let plain = common::build_c(&dir, "plain", "int main(void) { return 0; }\n", &[]);
    let out = sharemap(&["record", "-o", s(&p(&dir, "t.trace")), "--burst", "all", "--", s(&plain)], &[]);
    assert!(!out.status.success() && text(&out).contains("not a burst-sampled build"), "{}", text(&out));
    assert!(!p(&dir, "t.trace").exists());
}

/// A blocked loop: an outer loop over blocks, an inner one of at most 16 iterations, and a
/// loop with no bound the compiler knows beside them.
const BLOCKED: &str = r#"
#include <stdio.h>
#define N 1000
static volatile double a[N], c[N];
void blocked(long n) {
    for (long jj = 0; jj < n; jj += 16)
        for (long j = jj; j < jj + 16 && j < n; j++) c[j] = c[j] + a[j] * 2.0;
}
void unbounded(long n, long m) {
    for (long i = 0; i < n; i++)
        for (long j = 0; j < m; j++) c[j] = c[j] + a[i];
}
int main(int argc, char **argv) {
    for (int i = 0; i < N; i++) a[i] = i;
    for (int r = 0; r < 50; r++) blocked(N);
    unbounded(argc, 3);
    double s = 0;
    for (int i = 0; i < N; i++) s += c[i];
    printf("%.0f\n", s);
    return 0;
}
"#;

/// A loop of at most 64 iterations with nothing inside is not counted: the loop around it
/// counts (its check would cost a vectorised inner loop an exit and registers); a loop
/// without such a bound is. Its accesses are recorded all the same.
#[test]
fn short_inner_loops_carry_no_check_and_lose_no_access() {
    if !clang() {
        return common::skip(common::Need::Clang, "clang is not installed (scripts/setup installs it)");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = p(&dir, "blocked.c");
    std::fs::write(&src, BLOCKED).unwrap();
    let ir = p(&dir, "blocked.ll");
    let out =
        sharemap(&["cc", "--burst", "-O2", "-fno-discard-value-names", "-S", "-emit-llvm", s(&src), "-o", s(&ir)], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let ir = std::fs::read_to_string(&ir).unwrap();
    // Each counted loop has a check in each copy (`burst.check`, `burst.check.burst`).
    let checks = |function: &str| {
        let body = ir.split("\ndefine ").find(|d| d.contains(&format!("@{function}("))).expect("the function's IR");
        let body = &body[..body.find("\n}\n").unwrap_or(body.len())];
        body.lines().filter(|l| l.starts_with("burst.check")).count()
    };
    assert_eq!(checks("blocked"), 2, "the outer loop alone counts");
    assert_eq!(checks("unbounded"), 4, "both loops count");
    // Built and recorded whole: every access of the blocked loops is in the trace.
    let plain = p(&dir, "plain");
    assert!(Command::new("clang").args(["-O2", s(&src), "-o", s(&plain)]).status().unwrap().success());
    let expected = String::from_utf8(Command::new(&plain).output().unwrap().stdout).unwrap();
    let prog = p(&dir, "burst");
    let built = sharemap(&["cc", "--burst", "-O2", s(&src), "-o", s(&prog)], &[]);
    assert!(built.status.success(), "{}", text(&built));
    let trace = p(&dir, "all.trace");
    let rec = record(&trace, &prog, &["--burst", "all"]);
    assert!(text(&rec).contains(expected.trim()), "{}", text(&rec));
    // Initialisation, 50 passes of a read of c, a read of a and a write of c per element,
    // the unbounded loop's 3 elements, the final sum.
    const N: u64 = 1000;
    assert_eq!(read(&trace).0, N + 50 * 3 * N + 3 * 3 + N);
}
