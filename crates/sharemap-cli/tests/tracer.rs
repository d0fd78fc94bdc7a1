//! The compile-time tracer: a pthread program built with `sharemap cc` (clang and gcc) and
//! recorded with `sharemap record`, checked against the exact accesses it makes to its
//! arrays, its annotations, its threads, and a SIGKILL in the middle of its run.

mod common;
use common::sharemap_env as sharemap;
use sharemap::trace::{Chunk, Event, EventKind, Kind, Metadata, TraceReader, TraceSource};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const T: u64 = 3;
const K: u64 = 1000;

const PROGRAM: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sharemap.h>
#define T 3
#define K 1000
static volatile long data[T][K];
static char src[10000], dst[10000];
static void *work(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < K; i++) data[id][i] = i;
    return 0;
}
int main(int argc, char **argv) {
    printf("data %p %p\n", (void *)data, (void *)(data + T));
    printf("copy %p %p\n", (void *)src, (void *)dst);
    fflush(stdout);
    sharemap_init_done();
    pthread_t th[T];
    for (long i = 0; i < T; i++) pthread_create(&th[i], 0, work, (void *)i);
    for (int i = 0; i < T; i++) pthread_join(th[i], 0);
    sharemap_phase("copy");
    memcpy(dst, src, sizeof src);
    memset(src, 1, 5000);
    long sum = 0;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < K; j++) sum += data[i][j];
    if (argc > 1) kill(getpid(), SIGKILL);
    fprintf(stderr, "sum %ld %d %d\n", sum, dst[9999], src[4999]);
    return 3;
}
"#;

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Builds the program with `sharemap cc` and the given compiler family.
fn build(dir: &Path, compiler: &str) -> PathBuf {
    let src = dir.join("t.c");
    let bin = dir.join(format!("t-{compiler}"));
    std::fs::write(&src, PROGRAM).unwrap();
    let out = sharemap(
        &["cc", "-O1", "-pthread", "-o", bin.to_str().unwrap(), src.to_str().unwrap()],
        &[("SHAREMAP_COMPILER", compiler)],
    );
    assert!(out.status.success(), "sharemap cc ({compiler}): {}", String::from_utf8_lossy(&out.stderr));
    bin
}

/// Builds a C program with `sharemap cc` (clang when installed, else gcc).
fn build_source(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let bin = dir.join(name);
    let compiler = if have("clang") || have("clang-14") { "clang" } else { "gcc" };
    let out = sharemap(
        &["cc", "-O1", "-pthread", "-o", bin.to_str().unwrap(), src.to_str().unwrap()],
        &[("SHAREMAP_COMPILER", compiler)],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    bin
}

/// The two addresses a program printed first, as "%p %p".
fn printed_bounds(stdout: &[u8]) -> (u64, u64) {
    let printed = String::from_utf8_lossy(stdout);
    let v: Vec<u64> = printed
        .split_whitespace()
        .take(2)
        .map(|p| u64::from_str_radix(p.trim_start_matches("0x"), 16).unwrap())
        .collect();
    (v[0], v[1])
}

/// Calls `f(position, addr, thread, kind)` for each access into `range`, in trace order.
fn accesses_within(trace: &Path, range: std::ops::Range<u64>, mut f: impl FnMut(u64, u64, u32, Kind)) {
    let mut reader = TraceReader::open(trace, None).unwrap();
    let mut chunk = Chunk::default();
    while reader.next_chunk(&mut chunk).unwrap() {
        let a = &chunk.accesses;
        for i in 0..a.len() {
            if range.contains(&a.addr[i]) {
                let kind = if a.is_write(i) { Kind::Write } else { Kind::Read };
                f(chunk.first_access + i as u64, a.addr[i], a.thread[i], kind);
            }
        }
    }
}

/// Calls `f(position, addr, thread)` for each write into `range`, in trace order.
fn writes_within(trace: &Path, range: std::ops::Range<u64>, mut f: impl FnMut(u64, u64, u32)) {
    accesses_within(trace, range, |at, addr, thread, kind| {
        if kind == Kind::Write {
            f(at, addr, thread)
        }
    });
}

/// Address ranges the program prints: ("data", lo, hi), ("copy", src, dst).
fn ranges(stdout: &[u8]) -> BTreeMap<String, (u64, u64)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            Some((f.first()?.to_string(), (hex(f.get(1)?)?, hex(f.get(2)?)?)))
        })
        .collect()
}

struct Recorded {
    meta: Metadata,
    /// (thread, kind, size) -> count, for accesses to the data array.
    data: BTreeMap<(u32, Kind, u32), u64>,
    /// Bytes of ranged accesses: (kind, in src) -> bytes.
    copies: BTreeMap<(Kind, bool), u64>,
    /// Position of each thread's first data access, and the last one overall.
    first_data: BTreeMap<u32, u64>,
    last_data: u64,
    events: Vec<Event>,
}

fn read(trace: &Path, stdout: &[u8]) -> Recorded {
    let r = ranges(stdout);
    let (lo, hi) = r["data"];
    let (src, dst) = r["copy"];
    let mut reader = TraceReader::open(trace, None).unwrap();
    let meta = reader.metadata().clone();
    let mut rec = Recorded {
        meta,
        data: BTreeMap::new(),
        copies: BTreeMap::new(),
        first_data: BTreeMap::new(),
        last_data: 0,
        events: Vec::new(),
    };
    let mut chunk = Chunk::default();
    while reader.next_chunk(&mut chunk).unwrap() {
        rec.events.extend(chunk.events.iter().cloned());
        let a = &chunk.accesses;
        for i in 0..a.len() {
            let (t, addr, size, kind) =
                (a.thread[i], a.addr[i], a.size(i), if a.is_write(i) { Kind::Write } else { Kind::Read });
            let at = chunk.first_access + i as u64;
            if (lo..hi).contains(&addr) {
                *rec.data.entry((t, kind, size)).or_default() += 1;
                rec.first_data.entry(t).or_insert(at);
                rec.last_data = at;
            } else if size > 8 {
                let in_src = (src..src + 10000).contains(&addr);
                let in_dst = (dst..dst + 10000).contains(&addr);
                assert!(in_src || in_dst, "a ranged access outside the buffers: {addr:#x} {size}");
                *rec.copies.entry((kind, in_src)).or_default() += size as u64;
            }
        }
    }
    rec
}

fn count(events: &[Event], kind: EventKind) -> usize {
    events.iter().filter(|e| e.kind == kind).count()
}

/// Everything the program hands over before its end (or its death).
fn check(rec: &Recorded) {
    // Each worker, numbered in creation order (1, 2, 3), writes its own row: K 8-byte writes.
    for k in 1..=T as u32 {
        assert_eq!(rec.data.get(&(k, Kind::Write, 8)), Some(&K), "thread {k}: {:?}", rec.data);
    }
    // The main thread (0) reads the whole array once, after the workers.
    assert_eq!(rec.data.get(&(0, Kind::Read, 8)), Some(&(T * K)));
    assert_eq!(rec.data.len(), T as usize + 1, "{:?}", rec.data);
    // memcpy: 10,000 bytes read from src and written to dst; memset: 5,000 bytes of src.
    assert_eq!(rec.copies.get(&(Kind::Read, true)), Some(&10_000));
    assert_eq!(rec.copies.get(&(Kind::Write, false)), Some(&10_000));
    assert_eq!(rec.copies.get(&(Kind::Write, true)), Some(&5_000));
    // Annotations, in their place: init-done before the workers' writes, the phase after.
    let init = rec.events.iter().find(|e| e.kind == EventKind::InitDone).expect("init-done");
    assert!(rec.first_data.values().all(|&at| at >= init.at));
    let phase = rec.events.iter().find(|e| e.kind == EventKind::PhaseChange).expect("phase-change");
    assert_eq!((phase.label.as_str(), phase.arg, phase.thread), ("copy", 1, 0));
    assert!(phase.at > rec.first_data[&3]);
    // Threads: 4, each started once with its OS id.
    assert_eq!(rec.meta.threads, T as u32 + 1);
    assert_eq!(count(&rec.events, EventKind::ThreadStart), T as usize + 1);
    assert!(rec.events.iter().filter(|e| e.kind == EventKind::ThreadStart).all(|e| e.arg > 0));
    assert_eq!(rec.meta.os_tids.len(), T as usize + 1);
}

fn record_and_check(compiler: &str) {
    let d = tempfile::tempdir().unwrap();
    let bin = build(d.path(), compiler);
    // Outside `sharemap record` the program runs as usual.
    let plain = Command::new(&bin).output().unwrap();
    assert_eq!(plain.status.code(), Some(3));
    let trace = d.path().join("t.trace");
    let out = sharemap(&["record", "--exclude-stack", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()], &[]);
    // The program's output and exit status pass through.
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sum 1498500 0 1"));
    let rec = read(&trace, &out.stdout);
    check(&rec);
    assert_eq!(count(&rec.events, EventKind::ThreadExit), T as usize);
    assert_eq!(rec.meta.source.kind, "tracer");
    assert!(rec.meta.run_ns.is_some_and(|ns| ns > 0), "the recording carries its clock");
    // Thread ids are stable from run to run.
    let again = d.path().join("t2.trace");
    let out2 =
        sharemap(&["record", "--exclude-stack", "-o", again.to_str().unwrap(), "--", bin.to_str().unwrap()], &[]);
    assert_eq!(read(&again, &out2.stdout).data, rec.data);
}

#[test]
fn clang_build_records_exact_accesses() {
    if !have("clang") && !have("clang-14") {
        return common::skip(common::Need::Clang, "clang is not installed (scripts/setup installs it)");
    }
    record_and_check("clang");
}

#[test]
fn gcc_build_records_exact_accesses() {
    record_and_check("gcc");
}

/// SIGKILL at the end of main: everything handed over before is in the trace, and the
/// status (128 + 9) passes through.
#[test]
fn a_killed_program_keeps_its_accesses() {
    let d = tempfile::tempdir().unwrap();
    let bin = build(d.path(), if have("clang") || have("clang-14") { "clang" } else { "gcc" });
    let trace = d.path().join("k.trace");
    let out = sharemap(
        &["record", "--exclude-stack", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap(), "kill"],
        &[],
    );
    assert_eq!(out.status.code(), Some(137), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("killed by signal 9"));
    let info = sharemap(&["info", trace.to_str().unwrap()], &[]);
    assert!(info.status.success(), "{}", String::from_utf8_lossy(&info.stderr));
    check(&read(&trace, &out.stdout));
}

/// A program not built with `sharemap cc` is refused before it runs (it would otherwise run
/// to its end unrecorded): this one would leave a file behind.
#[test]
fn a_plain_binary_is_refused_by_the_tracer_backend_before_it_runs() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("p.c");
    let ran = d.path().join("ran");
    std::fs::write(
        &src,
        format!("#include <stdio.h>\nint main(void) {{ fopen(\"{}\", \"w\"); return 0; }}\n", ran.display()),
    )
    .unwrap();
    let bin = d.path().join("p");
    assert!(Command::new("gcc").arg("-o").arg(&bin).arg(&src).status().unwrap().success());
    for backend in ["tracer", "sancov"] {
        let trace = d.path().join("p.trace");
        let out = sharemap(
            &["record", "--backend", backend, "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()],
            &[],
        );
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            !out.status.success() && err.trim_end().lines().count() == 1 && err.contains("was not built with"),
            "{err}"
        );
        assert!(!ran.exists(), "the program ran before the refusal");
        assert!(!trace.exists());
        assert!(!err.contains("Makefile"), "no Makefile here: {err}");
    }
    // Beside a Makefile that sets its own CC, the likely cause is said.
    std::fs::write(d.path().join("Makefile"), "CC = gcc\np: p.c\n").unwrap();
    let out = sharemap(
        &[
            "record",
            "--backend",
            "tracer",
            "-o",
            d.path().join("p.trace").to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.trim_end().lines().count() == 1
            && err.contains(
                "this binary has no tracer: was CC overridden by its Makefile? (build with `make CC='sharemap cc'`"
            ),
        "{err}"
    );
}

/// `--backend faults`: an unmodified program's page faults through perf. Two threads each
/// first-touch half of a buffer (huge pages off): every page of each half faults once, from
/// its thread.
#[test]
fn the_faults_backend_sees_each_first_touch() {
    if !have("perf") {
        return common::skip(common::Need::Perf, "perf is not installed (scripts/setup installs it)");
    }
    const FAULTS: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#define PAGES 512
static char *buf;
static void *touch(void *arg) {
    long half = (long)arg;
    for (long p = half * PAGES / 2; p < (half + 1) * PAGES / 2; p++) buf[p * 4096] = 1;
    return 0;
}
int main(void) {
    buf = mmap(0, PAGES * 4096L, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(buf, PAGES * 4096L, MADV_NOHUGEPAGE);
    printf("data %p %p\n", (void *)buf, (void *)(buf + PAGES * 4096L));
    fflush(stdout);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, touch, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    return 0;
}
"#;
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("f.c");
    std::fs::write(&src, FAULTS).unwrap();
    let bin = d.path().join("f");
    assert!(Command::new("gcc").args(["-O1", "-pthread", "-o"]).arg(&bin).arg(&src).status().unwrap().success());
    let trace = d.path().join("f.trace");
    let out =
        sharemap(&["record", "--backend", "faults", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    if err.contains("could not record") {
        // perf_event_paranoid forbids it on this host.
        return common::skip(common::Need::Perf, &format!("perf cannot record here: {}", err.trim()));
    }
    assert!(out.status.success(), "{err}");
    let (lo, hi) = ranges(&out.stdout)["data"];
    let mut per_thread: BTreeMap<u32, std::collections::BTreeSet<u64>> = BTreeMap::new();
    accesses_within(&trace, lo..hi, |_, addr, thread, _| {
        per_thread.entry(thread).or_default().insert((addr - lo) / 4096);
    });
    // Two threads (ids 1 and 2: the main thread faults first), 256 distinct pages each.
    let counts: Vec<usize> = per_thread.values().map(|s| s.len()).collect();
    assert_eq!(counts, vec![256, 256], "{per_thread:?}");
    let meta = TraceReader::open(&trace, None).unwrap().metadata().clone();
    assert_eq!((meta.source.kind.as_str(), meta.source.params["event"].as_str()), ("perf", "page-faults"));
}

/// The perf backend's memory-access events need a PMU that samples loads and stores: where
/// it is missing (this machine kind), one line names the missing feature, before the
/// program runs and before any trace is written.
#[test]
fn memory_events_name_the_missing_pmu_feature() {
    if !have("perf") {
        return common::skip(common::Need::Perf, "perf is not installed (scripts/setup installs it)");
    }
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("m.trace");
    let marker = d.path().join("ran");
    for event in ["mem-loads:ldlat=50", "mem-stores"] {
        let out = sharemap(
            &[
                "record",
                "--backend",
                "perf",
                "--event",
                event,
                "-o",
                trace.to_str().unwrap(),
                "--",
                "touch",
                marker.to_str().unwrap(),
            ],
            &[],
        );
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        if out.status.success() {
            // A host with PEBS or IBS: the samples are the program's.
            assert!(trace.exists());
            continue;
        }
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("Intel PEBS") && err.contains("AMD IBS") && err.contains(event), "{err}");
        assert!(!trace.exists() && !marker.exists(), "nothing ran, nothing written");
    }
    let out = sharemap(
        &["record", "--backend", "perf", "--event", "cycles", "-o", trace.to_str().unwrap(), "--", "true"],
        &[],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected page-faults"));
}

/// Both compilers' builds turn C11 atomics into `__tsan_atomic*` calls: the runtime performs
/// them and records each read-modify-write as a read then a write.
#[test]
fn atomics_are_performed_and_recorded() {
    for compiler in ["clang", "gcc"] {
        if compiler == "clang" && !have("clang") && !have("clang-14") {
            continue;
        }
        atomics_with(compiler);
    }
}

fn atomics_with(compiler: &str) {
    const ATOMICS: &str = r#"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#define N 1000
static atomic_long counter;
static void *work(void *a) {
    (void)a;
    for (int i = 0; i < N; i++) atomic_fetch_add(&counter, 1);
    return 0;
}
int main(void) {
    printf("data %p %p\n", (void *)&counter, (void *)(&counter + 1));
    fflush(stdout);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], 0, work, 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    return atomic_load(&counter) == 2 * N ? 0 : 1;
}
"#;
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("a.c");
    std::fs::write(&src, ATOMICS).unwrap();
    let bin = d.path().join("a");
    let out = sharemap(
        &["cc", "-O1", "-pthread", "-o", bin.to_str().unwrap(), src.to_str().unwrap()],
        &[("SHAREMAP_COMPILER", compiler)],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let trace = d.path().join("a.trace");
    let out = sharemap(&["record", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()], &[]);
    assert!(out.status.success(), "the atomic count is right: {}", String::from_utf8_lossy(&out.stderr));
    let (lo, hi) = ranges(&out.stdout)["data"];
    let mut counts: BTreeMap<(u32, Kind), u64> = BTreeMap::new();
    accesses_within(&trace, lo..hi, |_, _, thread, kind| *counts.entry((thread, kind)).or_default() += 1);
    for t in [1, 2] {
        assert_eq!(
            (counts.get(&(t, Kind::Read)), counts.get(&(t, Kind::Write))),
            (Some(&1000), Some(&1000)),
            "{compiler}: {counts:?}"
        );
    }
    assert_eq!(counts.get(&(0, Kind::Read)), Some(&1), "the final load");
}

/// Long sequential runs by two threads at once fill hundreds of blocks while the recorder
/// drains them: each thread's writes must come out complete and in program order (a block
/// filled while the recorder scanned must not overtake the tail of the one before it).
#[test]
fn each_thread_keeps_its_program_order() {
    const N: u64 = 1_000_000;
    let d = tempfile::tempdir().unwrap();
    let bin = build_source(
        d.path(),
        "o",
        r#"
#include <pthread.h>
#include <stdio.h>
#define N 1000000
static volatile int a[2][N];
static void *work(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < N; i++) a[id][i] = i;
    return 0;
}
int main(void) {
    printf("%p %p\n", (void *)a, (void *)(a + 2));
    pthread_t th[2];
    for (long i = 0; i < 2; i++) pthread_create(&th[i], 0, work, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(th[i], 0);
    return 0;
}
"#,
    );
    let trace = d.path().join("o.trace");
    let out = sharemap(&["record", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (lo, hi) = printed_bounds(&out.stdout);
    let mut next = [lo, lo + 4 * N];
    writes_within(&trace, lo..hi, |at, addr, thread| {
        let t = thread as usize - 1;
        assert_eq!(addr, next[t], "thread {} out of order at access {at}", t + 1);
        next[t] += 4;
    });
    assert_eq!(next, [lo + 4 * N, hi], "every write recorded");
}

/// A program built with the wrapper that makes no traced access is still recognised and
/// recorded by its runtime (not handed to Valgrind), and its status passes through.
#[test]
fn a_program_without_accesses_is_still_recorded_by_its_runtime() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("e.c");
    std::fs::write(&src, "int main(void) { return 4; }\n").unwrap();
    for compiler in ["clang", "gcc"] {
        if compiler == "clang" && !have("clang") && !have("clang-14") {
            continue;
        }
        let bin = d.path().join(format!("e-{compiler}"));
        let out = sharemap(
            &["cc", "-O1", "-o", bin.to_str().unwrap(), src.to_str().unwrap()],
            &[("SHAREMAP_COMPILER", compiler)],
        );
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let trace = d.path().join(format!("e-{compiler}.trace"));
        let out = sharemap(&["record", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{compiler}: {err}");
        assert!(err.contains("recorded 0 accesses") && !err.contains("valgrind"), "{compiler}: {err}");
    }
}

/// Threads created and joined one after another, far more of them than the shared region
/// has blocks: each ending thread hands its block back, so none is left waiting for one.
#[test]
fn threads_that_come_and_go_do_not_exhaust_the_region() {
    const THREADS: u64 = 1500;
    let d = tempfile::tempdir().unwrap();
    let bin = build_source(
        d.path(),
        "c",
        r#"
#include <pthread.h>
#include <stdio.h>
#define THREADS 1500
static volatile long x[THREADS];
static void *work(void *arg) { long i = (long)arg; x[i] = i; return 0; }
int main(void) {
    printf("%p %p\n", (void *)x, (void *)(x + THREADS));
    fflush(stdout);
    for (long i = 0; i < THREADS; i++) {
        pthread_t t;
        if (pthread_create(&t, 0, work, (void *)i) != 0) return 1;
        pthread_join(t, 0);
    }
    return 0;
}
"#,
    );
    let trace = d.path().join("c.trace");
    // Bounded: without the handover the 513th thread would wait for a block for ever.
    let mut child = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(["record", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the recording did not finish");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (lo, hi) = printed_bounds(&out.stdout);
    assert_eq!(TraceReader::open(&trace, None).unwrap().metadata().threads as u64, THREADS + 1);
    let mut writers = BTreeMap::new();
    writes_within(&trace, lo..hi, |_, addr, thread| {
        assert!(writers.insert((addr - lo) / 8, thread).is_none(), "one write per element");
    });
    assert_eq!(writers.len() as u64, THREADS);
    // Element i is written by the i-th thread created (dense ids in creation order).
    assert!(writers.iter().all(|(&i, &t)| t as u64 == i + 1), "writers follow creation order");
}

/// Two threads writing until told to stop, for `argv[1]` seconds; then a marker file.
const SPINNER: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static volatile long data[2][4096];
static volatile int stop;
static void *work(void *arg) {
    long id = (long)arg;
    while (!stop)
        for (int i = 0; i < 4096; i++) data[id][i] += i;
    return 0;
}
int main(int argc, char **argv) {
    pthread_t th[2];
    for (long i = 0; i < 2; i++) pthread_create(&th[i], 0, work, (void *)i);
    sleep(atoi(argv[1]));
    stop = 1;
    for (int i = 0; i < 2; i++) pthread_join(th[i], 0);
    FILE *f = fopen(argv[2], "w");
    fputs("done", f);
    fclose(f);
    return 0;
}
"#;

fn spawn_record(trace: &Path, program: &[&str]) -> std::process::Child {
    let mut args = vec!["record", "-o", trace.to_str().unwrap(), "--"];
    args.extend_from_slice(program);
    Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed().as_secs() < secs, "{what}: not within {secs} s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A recorder killed with SIGKILL takes the program with it (nothing sharemap starts
/// outlives it), and what was written is a readable truncated trace, header and every chunk
/// flushed.
#[test]
fn a_killed_recorder_takes_the_program_with_it_and_leaves_a_readable_trace() {
    let d = tempfile::tempdir().unwrap();
    let bin = build_source(d.path(), "spin", SPINNER);
    let marker = d.path().join("done");
    let trace = d.path().join("s.trace");
    let mut rec = spawn_record(&trace, &[bin.to_str().unwrap(), "4", marker.to_str().unwrap()]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", rec.id())).unwrap();
    let program: i32 = children.split_whitespace().next().expect("the program runs").parse().unwrap();
    rec.kill().unwrap();
    rec.wait().unwrap();
    wait_for("the program's end with its recorder", 5, || {
        std::fs::read_to_string(format!("/proc/{program}/stat"))
            .map_or(true, |s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
    });
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert!(!marker.exists(), "the program ran on to its end");
    let partial: Vec<PathBuf> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".partial"))
        .collect();
    assert_eq!(partial.len(), 1, "{partial:?}");
    let info = sharemap(&["info", partial[0].to_str().unwrap(), "--json"], &[]);
    assert!(info.status.success(), "{}", String::from_utf8_lossy(&info.stderr));
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert!(v["accesses"].as_u64().unwrap() > 0, "{v}");
}

/// SIGTERM (and SIGINT, SIGHUP) to the recorder goes to the program: it ends as signalled,
/// and the recorder writes a complete trace of everything it handed over.
#[test]
fn a_terminated_recorder_stops_the_program_and_keeps_a_complete_trace() {
    let d = tempfile::tempdir().unwrap();
    let bin = build_source(d.path(), "spin", SPINNER);
    let trace = d.path().join("s.trace");
    let mut rec = spawn_record(&trace, &[bin.to_str().unwrap(), "1000", d.path().join("x").to_str().unwrap()]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: kill only sends a signal to the recorder started above.
    unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
    let mut status = None;
    wait_for("the recorder's end after SIGTERM", 60, || {
        status = rec.try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.unwrap().code(), Some(128 + libc::SIGTERM), "the program's status passes through");
    let info = sharemap(&["info", trace.to_str().unwrap(), "--json"], &[]);
    assert!(info.status.success(), "{}", String::from_utf8_lossy(&info.stderr));
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["file"]["complete"], true, "{v}");
    assert!(v["accesses"].as_u64().unwrap() > 0);
}

/// 600 threads alive at once, each holding a block: recorded whole (512 used to hang).
#[test]
fn six_hundred_live_threads_are_recorded() {
    let d = tempfile::tempdir().unwrap();
    let src = r#"
#include <pthread.h>
#include <stdio.h>
#define N 600
static volatile long data[N][8];
static pthread_barrier_t all_started;
static void *work(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < 8; i++) data[id][i] = i;
    pthread_barrier_wait(&all_started);
    return 0;
}
int main(void) {
    printf("data %p %p\n", (void *)data, (void *)(data + N));
    fflush(stdout);
    pthread_barrier_init(&all_started, 0, N);
    pthread_t th[N];
    for (long i = 0; i < N; i++) pthread_create(&th[i], 0, work, (void *)i);
    for (int i = 0; i < N; i++) pthread_join(th[i], 0);
    return 0;
}
"#;
    let bin = build_source(d.path(), "many", src);
    let trace = d.path().join("m.trace");
    let start = std::time::Instant::now();
    let out = sharemap(&["record", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(start.elapsed().as_secs() < 60, "took {:?}", start.elapsed());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("lost"), "{}", String::from_utf8_lossy(&out.stderr));
    let (lo, hi) = ranges(&out.stdout)["data"];
    let mut writes = 0;
    writes_within(&trace, lo..hi, |_, _, _| writes += 1);
    assert_eq!(writes, 600 * 8);
}

/// A program that forks: its children (two threads each) are not recorded and do not touch
/// the parent's records; every access of the parent is there, run after run, and the
/// recorder says the children went unrecorded.
#[test]
fn forked_children_leave_the_parents_accesses_whole() {
    let d = tempfile::tempdir().unwrap();
    let src = r#"
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#define K 5000
static volatile long data[2][K];
static volatile long busy[2][K];
static void *work(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < K; i++) data[id][i] = i;
    return 0;
}
static void *churn(void *arg) {
    long id = (long)arg;
    for (int r = 0; r < 50; r++)
        for (int i = 0; i < K; i++) busy[id][i] += i;
    return 0;
}
static void pair(void *(*f)(void *)) {
    pthread_t th[2];
    for (long i = 0; i < 2; i++) pthread_create(&th[i], 0, f, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(th[i], 0);
}
int main(void) {
    printf("data %p %p\n", (void *)data, (void *)(data + 2));
    fflush(stdout);
    pair(work);
    for (int c = 0; c < 2; c++)
        if (fork() == 0) {
            pair(churn);
            pair(work);
            _exit(0);
        }
    pair(work);
    while (wait(0) > 0) {}
    pair(work);
    return 0;
}
"#;
    let bin = build_source(d.path(), "forks", src);
    for run in 0..3 {
        let trace = d.path().join(format!("f{run}.trace"));
        let out = sharemap(&["record", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("forked 2 times"), "{err}");
        assert!(!err.contains("lost"), "{err}");
        let (lo, hi) = ranges(&out.stdout)["data"];
        let mut writes = 0;
        writes_within(&trace, lo..hi, |_, _, _| writes += 1);
        assert_eq!(writes, 3 * 2 * 5000, "run {run}");
    }
}

/// A spin-wait flag left out: by symbol at recording, by address range in the analyses.
#[test]
fn a_spin_flag_is_left_out_by_symbol_or_range() {
    let d = tempfile::tempdir().unwrap();
    let src = r#"
#include <pthread.h>
#include <stdio.h>
volatile int spin_flag;
static volatile long data[2][1000];
static void *work(void *arg) {
    long id = (long)arg;
    while (!spin_flag) {}
    for (int i = 0; i < 1000; i++) data[id][i] = i;
    return 0;
}
int main(void) {
    printf("data %p %p\nflag %p %p\n", (void *)data, (void *)(data + 2), (void *)&spin_flag, (void *)(&spin_flag + 1));
    fflush(stdout);
    pthread_t th[2];
    for (long i = 0; i < 2; i++) pthread_create(&th[i], 0, work, (void *)i);
    for (volatile int k = 0; k < 200000; k++) {}
    spin_flag = 1;
    for (int i = 0; i < 2; i++) pthread_join(th[i], 0);
    return 0;
}
"#;
    let bin = build_source(d.path(), "spin", src);
    let count = |trace: &Path, range: (u64, u64)| {
        let mut n = 0;
        accesses_within(trace, range.0..range.1, |_, _, _, _| n += 1);
        n
    };
    // Recorded whole, the flag is there.
    let whole = d.path().join("whole.trace");
    let out = sharemap(&["record", "-o", whole.to_str().unwrap(), "--", bin.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let flag = ranges(&out.stdout)["flag"];
    assert!(count(&whole, flag) > 0);
    // Left out by its symbol: not one access to it, every write to the data.
    let without = d.path().join("without.trace");
    let out = sharemap(
        &["record", "--exclude", "spin_flag", "-o", without.to_str().unwrap(), "--", bin.to_str().unwrap()],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("left out"), "{err}");
    let r = ranges(&out.stdout);
    assert_eq!(count(&without, r["flag"]), 0);
    let mut writes = 0;
    writes_within(&without, r["data"].0..r["data"].1, |_, _, _| writes += 1);
    assert_eq!(writes, 2000);
    let bad = sharemap(&["record", "--exclude", "no_such_symbol", "-o", "x.trace", "--", bin.to_str().unwrap()], &[]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no sized symbol"));
    // The analyses leave a range out of a recorded trace (the whole one's flag address).
    let converted = d.path().join("converted.trace");
    let range = format!("{:#x}-{:#x}", flag.0, flag.1);
    let out = sharemap(&["convert", whole.to_str().unwrap(), converted.to_str().unwrap(), "--exclude", &range], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(count(&converted, flag), 0);
    let summary = d.path().join("a");
    let out =
        sharemap(&["analyze", whole.to_str().unwrap(), "--exclude", &range, "-o", summary.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(summary.join("summary.json")).unwrap()).unwrap();
    let total = TraceReader::open(&whole, None).unwrap().access_count_hint().unwrap();
    assert_eq!(v["accesses"].as_u64().unwrap(), total - count(&whole, flag) as u64);
}

/// A worker pins itself to CPU 0, works, then pins itself to CPU 1 and works: the tracer
/// reads the CPU at each block hand-off, so the trace says where it ran (`cpu` events),
/// `info` lists the CPUs, and `simulate --machine live` replays the schedule (the move to
/// CPU 1 is a thread migration) while another machine gets the OS model, each said in a note.
#[test]
fn the_trace_says_where_each_thread_ran_and_os_replays_it_on_the_same_host() {
    const PINNED: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
static long data[40000];
static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s); }
static void *work(void *arg) {
    (void)arg;
    pin(0);
    for (int i = 0; i < 40000; i++) data[i] += i;
    pin(1);
    for (int i = 0; i < 40000; i++) data[i] += i;
    return 0;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, work, 0);
    pthread_join(t, 0);
    printf("%ld\n", data[7]);
    return 0;
}
"#;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cpus >= 2, "this test pins a thread to CPUs 0 and 1: the host has {cpus}");
    let dir = tempfile::tempdir().unwrap();
    let bin = build_source(dir.path(), "pinned", PINNED);
    let trace = dir.path().join("pinned.trace");
    let out = sharemap(&["record", "-o", trace.to_str().unwrap(), "--", bin.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The worker (thread 1): its last `cpu` event says CPU 1, and it was on CPU 0 before.
    let mut reader = TraceReader::open(&trace, None).unwrap();
    assert!(!reader.metadata().host_cpu_nodes.is_empty(), "the recording host's CPUs are in the metadata");
    let mut chunk = Chunk::default();
    let mut worker = Vec::new();
    while reader.next_chunk(&mut chunk).unwrap() {
        worker.extend(chunk.events.iter().filter(|e| e.kind == EventKind::Cpu && e.thread == 1).map(|e| e.arg));
    }
    assert_eq!(worker.last(), Some(&1), "the worker's CPUs: {worker:?}");
    assert!(worker.contains(&0), "the worker's CPUs: {worker:?}");
    assert!(worker.windows(2).all(|w| w[0] != w[1]), "an event only for a change: {worker:?}");
    let out = sharemap(&["info", trace.to_str().unwrap(), "--json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<u64> = v["per_thread"][1]["cpus"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).collect();
    assert!(listed.contains(&0) && listed.contains(&1), "{listed:?}");
    assert_eq!(v["per_thread"][1]["cpu_changes"].as_u64(), Some(worker.len() as u64 - 1));
    // On this host the schedule is replayed: the worker's move to CPU 1 is a migration.
    let simulate = |machine: &str| {
        let out =
            sharemap(&["simulate", trace.to_str().unwrap(), "--machine", machine, "--mechanism", "os", "--json"], &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["mechanisms"][0].clone()
    };
    let live = simulate("live");
    assert!(live["note"].as_str().unwrap().contains("recorded run"), "{live}");
    assert!(live["thread_migrations"].as_u64().unwrap() >= 1, "{live}");
    let other = simulate("sammu");
    assert!(
        other["note"].as_str().unwrap().contains("another host")
            || other["note"].as_str().unwrap().contains("other CPUs"),
        "{other}"
    );
    assert_eq!(other["thread_migrations"].as_u64(), Some(0));
}
