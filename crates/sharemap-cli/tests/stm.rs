//! sharemap's STM (libsharemap_stm) from the command line, as its users build against it:
//! TinySTM's API checked by a C program, the TL2 macro layer and C++, the programs of
//! workloads/stm under load, STMap's matrix and pinning on a program whose sharing is known,
//! and transactional traces. The data mapping is checked in the multi-node guest
//! (tests/guest.rs).

mod common;
use common::{ok, p, s};
use sharemap::SharingMatrix;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stm").join(name)
}

fn workloads() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/stm")
}

/// `sharemap cc FLAGS SOURCE -o NAME -pthread` in `dir`, with the given compiler.
fn build(dir: &tempfile::TempDir, name: &str, flags: &[&str], compiler: &str) -> PathBuf {
    let out = p(dir, name);
    let o = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .env("SHAREMAP_COMPILER", compiler)
        .args(flags)
        .args(["-o", s(&out), "-pthread"])
        .output()
        .unwrap();
    assert!(o.status.success(), "sharemap {flags:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    out
}

fn run(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(prog);
    c.args(args).env_remove("SHAREMAP_STMAP");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

const API_CHECKS: [&str; 33] = [
    "widths-own-writes",
    "widths-memory",
    "write-back",
    "widths-loads",
    "types",
    "bytes",
    "mask",
    "abort-explicit",
    "abort-wr-conflict",
    "abort-ww-conflict",
    "abort-val-read",
    "abort-validate",
    "no-retry",
    "abort-stats",
    "nesting",
    "irrevocable",
    "serial-irrevocable",
    "tx-family",
    "read-only",
    "exit-reinit",
    "free-reuse",
    "reuse-opacity",
    "reuse-opacity-unsized",
    "malloc-abort-commit",
    "free-after-commit",
    "compile-flags",
    "specific",
    "callbacks",
    "clock",
    "unit",
    "mod-ab",
    "global-stats",
    "0 failures",
];

/// Every check of api.c passes, built with gcc and with clang, with STMap off and on.
#[test]
fn tinystm_api_behaves_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("api.c");
    for compiler in ["gcc", "clang"] {
        let prog =
            build(&dir, &format!("api-{compiler}"), &["cc", "--stm", "--no-trace", "-O2", "-Wall", s(&src)], compiler);
        for stmap in ["off", "on"] {
            let out = run(&prog, &[], &[("SHAREMAP_STMAP", stmap)]);
            let t = text(&out);
            assert!(out.status.success(), "{compiler}, STMap {stmap}:\n{t}");
            for check in API_CHECKS {
                let line = if check.ends_with("failures") { check.to_string() } else { format!("ok {check}") };
                assert!(t.lines().any(|l| l == line), "{compiler}, STMap {stmap}: no '{line}' in\n{t}");
            }
        }
    }
}

/// A program written against TL2's STM_* macros (as STAMP's are) builds with --stm-tl2 and
/// runs; C++ builds against stm.h with C linkage.
#[test]
fn tl2_macros_and_cxx_build_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let tl2 = p(&dir, "tl2.c");
    std::fs::write(
        &tl2,
        r#"
#include <pthread.h>
#include "stm.h"
static long counter;
static float total;
static void *node;
static void *work(void *arg) {
    STM_THREAD_T *STM_SELF = STM_NEW_THREAD();
    STM_INIT_THREAD(STM_SELF, (long)arg);
    for (int i = 0; i < 10000; i++) {
        STM_BEGIN_WR();
        long c = (long)STM_READ(counter);
        STM_WRITE(counter, c + 1);
        STM_WRITE_F(total, STM_READ_F(total) + 0.5f);
        void *n = STM_READ_P(node);
        if (n == NULL) { n = STM_MALLOC(16); STM_WRITE_P(node, n); }
        STM_END();
    }
    STM_BEGIN_RD();
    long seen = (long)STM_READ(counter);
    STM_END();
    (void)seen;
    STM_FREE_THREAD(STM_SELF);
    return 0;
}
int main(void) {
    STM_STARTUP();
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, work, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    printf("counter %ld total %.1f node %d\n", counter, total, node != NULL);
    STM_SHUTDOWN();
    return counter == 40000 && total == 20000.0f ? 0 : 1;
}
"#,
    )
    .unwrap();
    let prog = build(&dir, "tl2", &["cc", "--stm-tl2", "--no-trace", "-O2", s(&tl2)], "gcc");
    let out = run(&prog, &[], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("counter 40000 total 20000.0 node 1"), "{}", text(&out));

    let cxx = p(&dir, "prog.cc");
    std::fs::write(
        &cxx,
        r#"
#include <stm.h>
#include <wrappers.h>
#include <atomic>
#include <thread>
#include <vector>
static int shared_value;
int main() {
    stm_init();
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; t++)
        ts.emplace_back([] {
            stm_init_thread();
            stm_tx_attr_t attr;
            attr.attrs = 0;
            for (int i = 0; i < 5000; i++) {
                sigjmp_buf *env = stm_start(attr);
                if (env != nullptr) sigsetjmp(*env, 0);
                stm_store_int(&shared_value, stm_load_int(&shared_value) + 1);
                stm_commit();
            }
            stm_exit_thread();
        });
    for (auto &t : ts) t.join();
    printf("value %d\n", shared_value);
    stm_exit();
    return shared_value == 15000 ? 0 : 1;
}
"#,
    )
    .unwrap();
    let prog = build(&dir, "cxx", &["c++", "--stm", "--no-trace", "-O2", "-std=c++17", s(&cxx)], "gcc");
    let out = run(&prog, &[], &[]);
    assert!(out.status.success() && text(&out).contains("value 15000"), "{}", text(&out));
}

/// The program of workloads/stm named `name`, built plain (against libsharemap_stm).
fn workload(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    let w = workloads();
    let (src, define) = match name {
        "bank" => ("bank.c", None),
        "linkedlist" => ("intset.c", Some("-DSET_LIST")),
        "rbtree" => ("intset.c", Some("-DSET_RBTREE")),
        "hashset" => ("intset.c", Some("-DSET_HASH")),
        "skiplist" => ("intset.c", Some("-DSET_SKIP")),
        other => panic!("no workload {other}"),
    };
    let src = w.join(src);
    let mut flags = vec!["cc", "--stm", "--no-trace", "-O2", s(&src)];
    flags.extend(define);
    build(dir, name, &flags, "gcc")
}

/// `key=value` of the result line.
fn field(out: &str, key: &str) -> u64 {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {out}"))
}

/// Opacity under load: every audit transaction of bank checks the total of all accounts
/// inside the transaction, with 2 to 16 threads on this machine's cores, two minutes in all;
/// no audit and no final check may see a wrong total.
#[test]
fn bank_never_sees_a_wrong_total() {
    let dir = tempfile::tempdir().unwrap();
    let bank = workload(&dir, "bank");
    for (threads, seconds, accounts) in [(2, 20, 1024), (3, 20, 64), (4, 20, 1024), (8, 30, 16), (16, 30, 1024)] {
        let out = run(
            &bank,
            &["-t", &threads.to_string(), "-d", &(seconds * 1000).to_string(), "-a", &accounts.to_string(), "-r", "30"],
            &[],
        );
        let t = text(&out);
        assert!(out.status.success() && t.contains("check=ok"), "bank with {threads} threads:\n{t}");
        assert!(!t.contains("an audit saw"), "{t}");
        assert!(field(&t, "commits") > 1000, "{t}");
    }
}

/// Each integer set keeps its invariants and its size under 1 to 8 threads, at the
/// benchmark's mix and with every transaction an update on a small range (many conflicts).
#[test]
fn the_sets_keep_their_invariants() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["linkedlist", "rbtree", "hashset", "skiplist"] {
        let prog = workload(&dir, name);
        for (threads, update, size, range) in
            [(1, 20, 256, 512), (2, 20, 256, 512), (4, 100, 32, 64), (8, 50, 1000, 2000)]
        {
            let args = [
                "-t",
                &threads.to_string(),
                "-d",
                "1500",
                "-u",
                &update.to_string(),
                "-i",
                &size.to_string(),
                "-r",
                &range.to_string(),
            ];
            let out = run(&prog, &args, &[]);
            let t = text(&out);
            assert!(out.status.success() && t.contains("check=ok"), "{name} {args:?}:\n{t}");
            assert!(field(&t, "txs") > 1000, "{t}");
        }
    }
}

/// `worker W stmap_thread T cpu C` lines of pairs.c: per worker, (T, C).
fn workers(out: &str) -> Vec<(usize, i32)> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                ["worker", _, "stmap_thread", t, "cpu", c] => Some((t.parse().ok()?, c.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Workers 2k and 2k+1 share array k and nothing else: STMap's matrix (written at
/// stm_exit) is non-zero for exactly those pairs, and the mapping keeps each pair on one CPU
/// and the pairs apart (this host: 2 CPUs, 4 workers), as sched_getaffinity shows while
/// all still run.
#[test]
fn stmap_names_exactly_the_sharing_pairs_and_pins_them_together() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(&dir, "pairs", &["cc", "--stm", "--no-trace", "-O2", s(&workloads().join("pairs.c"))], "gcc");
    let matrix = p(&dir, "comm.csv");
    let out = run(&prog, &["4", "1000000", "2"], &[("SHAREMAP_STMAP_MATRIX", s(&matrix))]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let w = workers(&t);
    assert_eq!(w.len(), 4, "{t}");
    let m = SharingMatrix::read(&matrix).unwrap();
    for a in 0..4 {
        for b in 0..4 {
            let (ta, tb) = (w[a].0, w[b].0);
            let v = m.get(ta, tb);
            if a != b && a / 2 == b / 2 {
                assert!(v > 1000.0, "workers {a} and {b} share: {v}\n{}", m.to_numalize_csv());
            } else {
                assert_eq!(v, 0.0, "workers {a} and {b} share nothing\n{}", m.to_numalize_csv());
            }
        }
    }
    assert!(t.contains("stmap enabled 1"), "{t}");
    // The mapper is one thread, parked between decisions; the default algorithm's parallel
    // parts ran on it, leaving no pool of threads behind.
    assert!(t.contains("stm threads 1\n"), "{t}");
    if online_cpus() >= 2 {
        let cpus: Vec<i32> = w.iter().map(|x| x.1).collect();
        assert!(cpus.iter().all(|&c| c >= 0), "every worker pinned to one CPU: {cpus:?}\n{t}");
        assert_eq!(cpus[0], cpus[1], "pair 0 together: {cpus:?}");
        assert_eq!(cpus[2], cpus[3], "pair 1 together: {cpus:?}");
        assert_ne!(cpus[0], cpus[2], "the pairs apart: {cpus:?}");
    }
    // Detection alone: the same matrix, no thread pinned; off: nothing at all.
    let detect =
        run(&prog, &["4", "200000", "2"], &[("SHAREMAP_STMAP", "detect"), ("SHAREMAP_STMAP_MATRIX", s(&matrix))]);
    let t = text(&detect);
    assert!(workers(&t).iter().all(|x| x.1 == -1 || online_cpus() == 1), "{t}");
    assert!(t.contains("stmap enabled 1") && t.contains("remaps 0"), "{t}");
    let off = run(&prog, &["4", "1000", "2"], &[("SHAREMAP_STMAP", "off")]);
    assert!(text(&off).contains("stmap enabled 0 samples 0"), "{}", text(&off));
    assert!(text(&off).contains("stm threads 0\n"), "{}", text(&off));
    // A verbose log says what each decision saw and did.
    let verbose = run(&prog, &["4", "200000", "2"], &[("SHAREMAP_STMAP_VERBOSE", "1")]);
    let t = text(&verbose);
    assert!(t.contains("sharemap-stm: decision 1 at ") && t.contains("sharemap-stm: STMap: "), "{t}");
    // A bad setting is named in one line, and the default used; one parser reads them all.
    for (name, value) in [
        ("SHAREMAP_STMAP_HYSTERESIS", "inf"),
        ("SHAREMAP_STMAP_HYSTERESIS", "99999999999999999999999"),
        ("SHAREMAP_STMAP_VERBOSE", "true"),
    ] {
        let out = run(&prog, &["2", "1000", "1"], &[(name, value)]);
        let said: Vec<String> = text(&out)
            .lines()
            .filter(|l| l.contains(&format!("{name}={value}: expected")))
            .map(str::to_string)
            .collect();
        assert!(out.status.success() && said.len() == 1, "{name}={value}: {}", text(&out));
    }
    let bad = run(&prog, &["2", "1000", "1"], &[("SHAREMAP_STMAP_SI", "often")]);
    assert!(
        bad.status.success() && text(&bad).contains("SHAREMAP_STMAP_SI=often: expected a whole number"),
        "{}",
        text(&bad)
    );
}

/// On a loaded host (a busy loop on every CPU beside the program), STMap decides as on a
/// quiet one: a thread that waited for a CPU through one activity window looks idle, and
/// remapping on each such flicker moved threads several times a second. A new set of
/// active threads must now be seen twice, and remaps are at least 200 ms apart.
#[test]
fn stmap_does_not_churn_on_a_loaded_host() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(&dir, "pairs", &["cc", "--stm", "--no-trace", "-O2", s(&workloads().join("pairs.c"))], "gcc");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..online_cpus())
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let mut runs = Vec::new();
    for _ in 0..3 {
        let start = std::time::Instant::now();
        let out = run(&prog, &["8", "3000000", "2"], &[]);
        let seconds = start.elapsed().as_secs_f64();
        let t = text(&out);
        assert!(out.status.success(), "{t}");
        let remaps: u64 = t
            .lines()
            .find_map(|l| l.split(" remaps ").nth(1))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("no remaps in\n{t}"));
        runs.push((remaps, seconds));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.into_iter().for_each(|b| b.join().unwrap());
    // The first mapping, its confirmation by costs, and at most one more a second: the
    // bound at 200 ms apart would be 5 a second.
    for &(remaps, seconds) in &runs {
        assert!(remaps as f64 <= 2.0 + seconds, "{remaps} remaps in {seconds:.1} s under load: {runs:?}");
    }
}

/// With one thread there is nothing to map: each decision says so and the interval doubles
/// (up to 64 mapping intervals), as after any decision that keeps the threads. (The single
/// thread's set once alternated between "to confirm" and "nothing to map", resetting the
/// interval each time: a decision, a wake-up of the mapper thread, every 100,000 accesses.)
/// Two threads whose mapping cannot pay (or is kept) are confirmed once, not at every
/// other decision as they were (3000 decisions a second on two CPUs).
#[test]
fn stmap_decides_ever_more_rarely_when_nothing_moves() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(&dir, "bank", &["cc", "--stm", "--no-trace", "-O2", s(&workloads().join("bank.c"))], "gcc");
    let decisions = |threads: &str| {
        let out =
            run(&prog, &["-t", threads, "-d", "1000"], &[("SHAREMAP_STMAP", "on"), ("SHAREMAP_STMAP_VERBOSE", "on")]);
        let t = text(&out);
        assert!(out.status.success(), "{t}");
        let lines: Vec<(u64, String)> = t
            .lines()
            .filter_map(|l| l.strip_prefix("sharemap-stm: decision "))
            .map(|l| {
                let at = l.split(" at ").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse().ok());
                (at.unwrap_or_else(|| panic!("no access count in {l}")), l.to_string())
            })
            .collect();
        (lines, t)
    };
    let (one, t) = decisions("1");
    assert!(one.len() >= 10, "a second of bank takes many mapping intervals:\n{t}");
    for (at, line) in &one {
        assert!(line.contains("1 active threads") && line.contains("nothing to map"), "at {at}: {line}");
    }
    // From the eighth decision on the interval is at its longest, 64 x 100,000 accesses.
    for pair in one[7..].windows(2) {
        assert!(pair[1].0 - pair[0].0 >= 64 * 100_000, "{} then {}:\n{t}", pair[0].1, pair[1].1);
    }
    // Two threads: the set is confirmed once (a worker may be seen alone first), and
    // whatever the mapping, it is not confirmed again and again.
    let (two, t) = decisions("2");
    let confirming = two.iter().filter(|(_, l)| l.contains("other threads active than those mapped")).count();
    assert!(confirming <= 3, "{confirming} confirmations:\n{t}");
    assert!(two.len() <= 200, "{} decisions in a second:\n{t}", two.len());
}

/// The matrix file is written as every sharemap output is (sharemap-core's `write_whole`):
/// a FIFO named by SHAREMAP_STMAP_MATRIX stays a FIFO and its reader gets the matrix (a
/// temporary renamed over it turned a device node into a regular file), and no temporary of
/// a predictable name is made beside it (another user could have planted a link there).
#[test]
fn the_stm_matrix_is_written_in_place_into_a_special_file() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let prog = build(&dir, "pairs", &["cc", "--stm", "--no-trace", "-O2", s(&workloads().join("pairs.c"))], "gcc");
    let fifo = p(&dir, "matrix.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // A handle on the FIFO itself, whatever comes to bear its name.
    use std::os::unix::fs::OpenOptionsExt;
    let inode = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH).open(&fifo).unwrap();
    let reading = fifo.clone();
    let reader = std::thread::spawn(move || std::fs::read_to_string(reading).unwrap_or_default());
    let out = run(&prog, &["4", "20000", "2"], &[("SHAREMAP_STMAP_MATRIX", s(&fifo))]);
    // Whatever happened, the reader is let go: a writer that opens the FIFO and closes it
    // gives it the end.
    use std::os::fd::AsRawFd;
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", inode.as_raw_fd()));
    let csv = reader.join().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO was replaced");
    assert!(csv.lines().count() >= 4, "the reader got the matrix: {csv:?}\n{}", text(&out));
    let beside: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("matrix") && n != "matrix.fifo")
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
}

/// Built with `sharemap cc --stm` and recorded, a transactional program's trace carries
/// its transactional accesses and one begin per attempt, one commit per committed
/// transaction; the offline STMap detector then finds the pairs (trace threads 1-4 are the
/// workers, in creation order).
#[test]
fn transactional_traces_carry_accesses_and_transaction_events() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(&dir, "pairs-traced", &["cc", "--stm", "-O1", s(&workloads().join("pairs.c"))], "gcc");
    let trace = p(&dir, "pairs.trace");
    let out = ok(&["record", "-o", s(&trace), "--", s(&prog), "4", "20000", "1"]);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("stmap enabled 1"), "{printed}");
    let commits: u64 = printed.lines().find_map(|l| l.strip_prefix("commits ")?.parse().ok()).unwrap();
    let info = common::json(&ok(&["info", s(&trace), "--json"]));
    let events = &info["events"];
    // The workers' transactions, each committed once (the main thread runs none).
    assert!(commits >= 4 * 20000, "{printed}");
    assert_eq!(events["tx-commit"], commits, "{info}");
    let begins = events["tx-begin"].as_u64().unwrap();
    let aborts = events["tx-abort"].as_u64().unwrap();
    assert_eq!(begins, commits + aborts, "{info}");
    // Each transaction reads two words and writes them: 4 accesses.
    assert!(info["accesses"].as_u64().unwrap() >= 4 * 20000 * 4, "{info}");
    let analysis = p(&dir, "sharing");
    let out = ok(&["analyze", s(&trace), "--detector", "stmap:si=10", "-o", s(&analysis)]);
    let m = SharingMatrix::read(&analysis.join("comm.csv")).unwrap();
    let pairs = m.get(1, 2) + m.get(3, 4);
    let across = m.get(1, 3) + m.get(1, 4) + m.get(2, 3) + m.get(2, 4);
    assert!(pairs > 100.0 && across == 0.0, "pairs {pairs}, across {across}\n{}", String::from_utf8_lossy(&out.stdout));
}

/// `--tx-only` records what the STM sees and nothing else: a program whose plain accesses
/// and transactional ones are known apart (1,000 committed transactions of 2 loads and 1
/// store, one thread, no abort possible; around them a plain memset and a loop over 4,096
/// ints) gives exactly the transactional 3,000 accesses, where the full build gives more.
#[test]
fn tx_only_records_the_stms_accesses_alone() {
    let dir = tempfile::tempdir().unwrap();
    let src = p(&dir, "counted.c");
    std::fs::write(
        &src,
        r#"#include <stm.h>
#include <string.h>
#include <stdio.h>
static volatile stm_word_t cells[64];
static int plain[4096];
int main(void) {
  stm_init();
  stm_init_thread();
  memset(plain, 1, sizeof plain);
  long sum = 0;
  for (int i = 0; i < 4096; i++) sum += plain[i];
  for (int i = 0; i < 1000; i++) {
    stm_tx_attr_t attr = {{.id = 0, .read_only = 0}};
    sigjmp_buf *env = stm_start(attr);
    if (env != NULL) sigsetjmp(*env, 0);
    stm_word_t a = stm_load(&cells[i % 64]);
    stm_word_t b = stm_load(&cells[(i + 1) % 64]);
    stm_store(&cells[i % 64], a + b + 1);
    stm_commit();
  }
  stm_exit_thread();
  stm_exit();
  printf("sum %ld\n", sum);
  return 0;
}
"#,
    )
    .unwrap();
    for (flags, name) in [(&["cc", "--stm", "--tx-only", "-O1"][..], "tx-only"), (&["cc", "--stm", "-O1"][..], "full")]
    {
        let mut args = flags.to_vec();
        args.push(s(&src));
        let prog = build(&dir, name, &args, "gcc");
        let trace = p(&dir, &format!("{name}.trace"));
        ok(&["record", "-o", s(&trace), "--", s(&prog)]);
        let info = common::json(&ok(&["info", s(&trace), "--json"]));
        assert_eq!(info["events"]["tx-commit"], 1000, "{name}: {info}");
        let accesses = info["accesses"].as_u64().unwrap();
        if name == "tx-only" {
            assert_eq!(accesses, 3000, "{info}");
            assert_eq!((info["reads"].as_u64(), info["writes"].as_u64()), (Some(2000), Some(1000)), "{info}");
        } else {
            assert!(accesses > 3000 + 4096, "the full build records the plain loop too: {info}");
        }
    }
    // Only with the STM, and not with a plain build.
    for bad in [&["cc", "--tx-only", "-c", "x.c"][..], &["cc", "--stm", "--no-trace", "--tx-only", "-c", "x.c"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_sharemap")).args(bad).output().unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("--tx-only"), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

/// The STM's variable for one of STMap's settings.
fn stmap_variable(setting: &str) -> &'static str {
    match setting {
        "si" => "SHAREMAP_STMAP_SI",
        "mi" => "SHAREMAP_STMAP_MI",
        "da" => "SHAREMAP_STMAP_DA",
        other => panic!("the STM has no setting {other}"),
    }
}

/// The shared case suite's sharing cases (sharemap-decide's cases.toml, `[[sharing]]`) in the
/// STM's own STMap: a driver (tests/stm/stmap_case.c) runs each run of one thread's accesses
/// as a transaction of that thread; the matrix STMap writes at stm_exit and its distinct
/// addresses must be the case's, as the detector's are (sharemap-detect's tests/cases.rs).
/// The same driver built `--tx-only` and recorded gives a trace on which `analyze
/// --detector` finds them too (trace thread k + 1 is case thread k: the main thread is 0).
#[test]
fn the_stms_stmap_finds_each_sharing_case_matrix_as_the_detector_does() {
    let dir = tempfile::tempdir().unwrap();
    let driver = s(&source("stmap_case.c")).to_string();
    let plain = build(&dir, "stmap_case", &["cc", "--stm", "--no-trace", "-O1", &driver], "gcc");
    let traced = build(&dir, "stmap_case_traced", &["cc", "--stm", "--tx-only", "-O1", &driver], "gcc");
    let cases = sharemap_decide::cases::sharing::for_layer("stm");
    assert!(cases.len() >= 4, "the suite has STMap's cases");
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let input = p(&dir, &format!("case{i}.txt"));
        let lines: String = case
            .accesses
            .iter()
            .map(|a| format!("{} {} {}\n", a.thread, if a.write { 'w' } else { 'r' }, a.word))
            .collect();
        std::fs::write(&input, lines).unwrap();
        let matrix = p(&dir, &format!("case{i}.csv"));
        let mut env = vec![
            ("SHAREMAP_STMAP", "detect".to_string()),
            ("SHAREMAP_STMAP_DATA", "off".to_string()),
            ("SHAREMAP_STMAP_MATRIX", s(&matrix).to_string()),
        ];
        for setting in ["si", "mi", "da"] {
            if let Some(v) = case.setting(setting) {
                env.push((stmap_variable(setting), v.to_string()));
            }
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let out = run(&plain, &[s(&input)], &env);
        assert!(out.status.success(), "{}: {}", case.name, text(&out));
        let distinct: u64 = text(&out).lines().find_map(|l| l.strip_prefix("distinct ")?.parse().ok()).unwrap();
        let m = SharingMatrix::read(&matrix).unwrap();
        failures.extend(case.check("stm", m.threads(), |a, b| m.get(a, b), distinct).err());
        // Recorded: the detector on the STM's accesses as its tracer recorded them.
        let trace = p(&dir, &format!("case{i}.trace"));
        let mut record = Command::new(env!("CARGO_BIN_EXE_sharemap"));
        record.args(["record", "-o", s(&trace), "--", s(&traced), s(&input)]).envs(env.iter().copied());
        let o = record.output().unwrap();
        assert!(o.status.success(), "{}: {}", case.name, text(&o));
        let analysis = p(&dir, &format!("case{i}"));
        ok(&["analyze", s(&trace), "--detector", &case.detector, "-o", s(&analysis)]);
        let m = SharingMatrix::read(&analysis.join("comm.csv")).unwrap();
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(analysis.join("summary.json")).unwrap()).unwrap();
        let distinct = summary["stmap"]["distinct_addresses"].as_u64().unwrap();
        let main_thread_shares = (1..m.threads()).map(|t| m.get(0, t)).sum::<f64>();
        if main_thread_shares != 0.0 {
            failures
                .push(format!("{}: the main thread runs no transaction, yet shares {main_thread_shares}", case.name));
        }
        let cell = |a: usize, b: usize| m.get(a + 1, b + 1);
        failures.extend(case.check("stm traced, detect", m.threads().saturating_sub(1), cell, distinct).err());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `scripts/bench-stm` without the reference releases says which they are and where their
/// public releases are, instead of failing on a path.
#[test]
fn bench_stm_says_where_the_reference_systems_come_from() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let empty = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("python3")
        .arg(root.join("scripts/bench-stm"))
        .args(["--anchors", empty.path().to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    for named in ["tinystm-1.0.5.tar.gz", "TinySTM 1.0.5", "stamp-0.9.10.tar.gz", "STAMP 0.9.10", "stamp.stanford.edu"]
    {
        assert!(err.contains(named), "{named}: {err}");
    }
}
