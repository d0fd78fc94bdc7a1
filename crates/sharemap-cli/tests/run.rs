//! `sharemap run` on programs built here with gcc: pinning read back from each thread's own
//! affinity mask, exit statuses, measurement output and refusals.

mod common;
use common::{build_c, json, ok, p, s, sharemap};
use std::path::Path;
use std::process::Command;

/// Each thread prints its number in creation order (main 0) and its CPUs.
const THREADS: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
static void show(long k) {
    cpu_set_t s; CPU_ZERO(&s);
    sched_getaffinity(0, sizeof s, &s);
    printf("thread %ld cpus", k);
    for (int c = 0; c < CPU_SETSIZE; c++) if (CPU_ISSET(c, &s)) printf(" %d", c);
    printf("\n");
    fflush(stdout);
}
static void *work(void *a) { show((long)a); return 0; }
int main(int argc, char **argv) {
    show(0);
    for (long i = 1; i <= 3; i++) { pthread_t t; pthread_create(&t, 0, work, (void *)i); pthread_join(t, 0); }
    if (argc > 1 && argv[1][0] == 'a') abort();
    return argc > 1 ? atoi(argv[1]) : 0;
}
"#;

const OPENMP: &str = r#"
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
int main(void) {
    #pragma omp parallel num_threads(4)
    {
        cpu_set_t s; CPU_ZERO(&s); sched_getaffinity(0, sizeof s, &s);
        #pragma omp critical
        {
            printf("thread %d cpus", omp_get_thread_num());
            for (int c = 0; c < CPU_SETSIZE; c++) if (CPU_ISSET(c, &s)) printf(" %d", c);
            printf("\n");
        }
    }
    return 0;
}
"#;

/// Thread number -> its CPUs, from the program's output.
fn cpus_of(stdout: &[u8]) -> std::collections::BTreeMap<u32, Vec<u32>> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.first() == Some(&"thread"))
                .then(|| (w[1].parse().unwrap(), w[3..].iter().map(|c| c.parse().unwrap()).collect()))
        })
        .collect()
}

/// How many PUs this host has (logical).
fn host_pus() -> usize {
    json(&ok(&["machine", "live", "--json"]))["pus"].as_u64().unwrap() as usize
}

/// With the mapping 1,0 threads 0 and 2 share one CPU and 1 and 3 another (four threads,
/// two entries: they wrap around); each is pinned to exactly one. Without pinning they keep
/// the whole set.
fn check_pinning(program: &Path) {
    if host_pus() < 2 {
        return common::skip(common::Need::Cpus, "this host has one PU");
    }
    let out = ok(&["run", "--thread-map", "1,0", "--", s(program)]);
    let cpus = cpus_of(&out.stdout);
    assert_eq!(cpus.len(), 4, "{}", String::from_utf8_lossy(&out.stdout));
    assert!(cpus.values().all(|c| c.len() == 1), "{cpus:?}");
    assert_eq!(cpus[&0], cpus[&2]);
    assert_eq!(cpus[&1], cpus[&3]);
    assert_ne!(cpus[&0], cpus[&1]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("4 threads pinned") && said.contains("wrapped around"), "{said}");
    // Two threads to a CPU: the run says what that costs.
    assert!(said.contains("4 threads pinned on 2 CPUs: threads sharing a CPU take turns on it"), "{said}");
    // An algorithm's mapping of more threads than the host has PUs (a recording of twice as
    // many) pins each thread to its PU's node's CPUs instead, where the scheduler balances
    // them: on one node, all of them, and no warning of CPUs taken in turns. A list of PUs
    // that long is pinned as it says.
    let live = json(&ok(&["machine", "live", "--json"]));
    if live["numa_nodes"].as_u64() == Some(1) {
        let dir = tempfile::tempdir().unwrap();
        let trace = p(&dir, "many.trace");
        let threads = (2 * host_pus()).to_string();
        ok(&["gen", "neighbor", "--threads", &threads, "--accesses", "50k", "-o", s(&trace)]);
        let out = ok(&["run", "--thread-map", "compact", "--sharing", s(&trace), "--", s(program)]);
        let sets = cpus_of(&out.stdout);
        assert!(sets.values().all(|c| c.len() == host_pus()), "{sets:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("each to the CPUs of its PU's NUMA node") && !said.contains("take turns on it"),
            "{said}"
        );
    }
    // Reversed, each thread moves to the other CPU.
    let back = cpus_of(&ok(&["run", "--thread-map", "0,1", "--", s(program)]).stdout);
    assert_eq!(back[&0], cpus[&1]);
    let free = ok(&["run", "--", s(program)]);
    assert!(!String::from_utf8_lossy(&free.stderr).contains("warning"));
    let free = cpus_of(&free.stdout);
    assert!(free.values().all(|c| c.len() >= 2), "{free:?}");
}

#[test]
fn pins_pthreads_in_creation_order() {
    let dir = tempfile::tempdir().unwrap();
    check_pinning(&build_c(&dir, "threads", THREADS, &[]));
}

#[test]
fn pins_openmp_threads() {
    let dir = tempfile::tempdir().unwrap();
    check_pinning(&build_c(&dir, "omp", OPENMP, &["-fopenmp"]));
}

#[test]
fn the_programs_exit_status_passes_through() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "threads", THREADS, &[]);
    assert_eq!(sharemap(&["run", "--", s(&prog), "7"]).status.code(), Some(7));
    let out = sharemap(&["run", "--thread-map", "compact", "--", s(&prog), "abort"]);
    assert_eq!(out.status.code(), Some(134));
    assert!(String::from_utf8_lossy(&out.stderr).contains("killed by signal 6"));
    // In a measurement, the failing run is named and its status kept.
    let out = sharemap(&["run", "--repeat", "2", "--", s(&prog), "3"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("run 1 of os"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn measures_configurations_interleaved_against_os() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "threads", THREADS, &[]);
    let csv = p(&dir, "runs.csv");
    let out = ok(&[
        "run",
        "--thread-map",
        "compact",
        "--thread-map",
        "scatter",
        "--repeat",
        "3",
        "--json",
        "--csv",
        s(&csv),
        "--plot",
        s(&p(&dir, "bars")),
        "--",
        s(&prog),
    ]);
    let v = json(&out);
    let names: Vec<&str> = v.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["os", "compact", "scatter"]);
    assert_eq!(v[0]["normalized"], 1.0);
    for c in v.as_array().unwrap() {
        let secs: Vec<f64> = c["seconds"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(secs.len(), 3);
        let mean = secs.iter().sum::<f64>() / 3.0;
        assert!((c["mean"].as_f64().unwrap() - mean).abs() < 1e-12);
        assert!(c["ci95"].as_f64().unwrap() >= 0.0);
    }
    // The program's own output is not mixed into the measurement.
    assert!(!String::from_utf8_lossy(&out.stdout).contains("cpus"));
    let rows = std::fs::read_to_string(&csv).unwrap();
    let bars = std::fs::read_to_string(p(&dir, "bars.svg")).unwrap();
    assert!(["os", "compact", "scatter"].iter().all(|n| bars.lines().any(|l| l.trim() == *n)), "{bars}");
    if cfg!(feature = "png") {
        assert!(std::fs::metadata(p(&dir, "bars.png")).unwrap().len() > 1000);
    }
    assert_eq!(rows.lines().count(), 1 + 9);
    assert!(rows.starts_with("configuration,run,seconds\nos,1,"));
    let table = String::from_utf8_lossy(&ok(&["run", "--repeat", "2", "--", s(&prog)]).stdout).to_string();
    assert!(table.contains("vs os") && table.contains("95%"), "{table}");
    // Each difference says whether it stands out of the noise.
    assert!(table.contains("difference from os") && table.contains("(baseline)"), "{table}");
    // Hardware counters: columns where the PMU counts, else one line saying they are not
    // available (this machine kind exposes no PMU: perf_event_open fails).
    let counted = std::fs::metadata("/sys/bus/event_source/devices/cpu").is_ok();
    assert_eq!(table.contains("LLC MPKI"), counted, "{table}");
    assert_eq!(table.contains("hardware counters: none, so no LLC misses"), !counted, "{table}");
    // Said in words, not as an errno.
    if !counted {
        assert!(table.contains("no hardware performance counters") && !table.contains("os error"), "{table}");
    }
}

#[test]
fn takes_the_mapping_sharemap_map_writes() {
    if host_pus() < 2 {
        return common::skip(common::Need::Cpus, "this host has one PU");
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "threads", THREADS, &[]);
    let trace = p(&dir, "n.trace");
    ok(&["gen", "neighbor", "--threads", "2", "--accesses", "10k", "-o", s(&trace)]);
    let mapped = ok(&["map", s(&trace), "--machine", "live", "--json"]);
    let file = p(&dir, "map.json");
    std::fs::write(&file, &mapped.stdout).unwrap();
    let expect: Vec<u64> =
        json(&mapped)[0]["mapping"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
    let cpus = cpus_of(&ok(&["run", "--thread-map", s(&file), "--", s(&prog)]).stdout);
    let by_file =
        cpus_of(&ok(&["run", "--thread-map", &format!("{},{}", expect[0], expect[1]), "--", s(&prog)]).stdout);
    assert_eq!(cpus, by_file);
    // And an algorithm mapping the trace's sharing on this host.
    ok(&["run", "--thread-map", "eagermap", "--sharing", s(&trace), "--", s(&prog)]);
    // A mapping made for a modelled machine names that machine's PUs: refused, with the way out.
    let modelled = p(&dir, "sammu.json");
    std::fs::write(&modelled, ok(&["map", s(&trace), "--machine", "sammu-x7550", "--json"]).stdout).unwrap();
    let out = sharemap(&["run", "--thread-map", s(&modelled), "--", s(&prog)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("its mapping was made for sammu-x7550, not this host")
            && err.contains("--machine live --json"),
        "{err}"
    );
}

#[test]
fn refusals_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "threads", THREADS, &[]);
    let static_prog = build_c(&dir, "static", THREADS, &["-static"]);
    let fails = |args: &[&str], says: &str| {
        let out = sharemap(args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("sharemap: ") && err.contains(says), "{args:?}: {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("thread 0"), "the program must not run");
    };
    fails(&["run", "--thread-map", "4096", "--", s(&prog)], "PU 4096 does not exist");
    fails(&["run", "--thread-map", "bogus", "--", s(&prog)], "--thread-map: 'bogus'");
    fails(&["run", "--thread-map", "0", "--", s(&static_prog)], "statically linked");
    fails(&["run", "--", s(&p(&dir, "missing"))], "cannot run");
    fails(&["run", "--placement", "spread", "--", s(&prog)], "--placement: 'spread'");
    fails(&["run", "--repeat", "0", "--", s(&prog)], "--repeat 0");
    // Beyond the cap: one line, not a 34 GB allocation or a capacity overflow.
    fails(&["run", "--repeat", "4294967296", "--", s(&prog)], "--repeat 4294967296: expected a number of runs from 1");
    fails(&["run", "--repeat", "18446744073709551615", "--", s(&prog)], "--repeat 18446744073709551615");
    fails(&["run", "--mechanism", "oracle", "--", s(&prog)], "oracle needs a recording of the program (--recording)");
    fails(&["run", "--mechanism", "fastest", "--", s(&prog)], "unknown mechanism 'fastest'");
    fails(&["run", "--mechanism", "", "--", s(&prog)], "--mechanism '': an empty mechanism name");
    fails(&["run", "--mechanism", "os,,random", "--", s(&prog)], "an empty mechanism name");
    fails(&["run", "--mechanism", "all:", "--", s(&prog)], "--mechanism 'all:': all takes no options");
    fails(&["run", "--", "/tmp"], "cannot run /tmp: a directory, not a program");
    // A missing program is said once, by sharemap (not valgrind's line, then sharemap's),
    // and without an error kind's prefix.
    let missing = s(&p(&dir, "missing")).to_string();
    let trace = s(&p(&dir, "never.trace")).to_string();
    fails(&["record", "-o", &trace, "--", &missing], &format!("sharemap: cannot run {missing}: no such file"));
    fails(&["vm", "--", &missing], &format!("sharemap: cannot run {missing}: no such file"));
    // A program given without `--`: the usage error says where it goes (exit 2).
    let out = sharemap(&["run", s(&prog)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.lines().count() == 1 && err.contains("go after --, as in `sharemap run [OPTIONS] -- PROG ARGS`"),
        "{err}"
    );
    fails(&["run", "--placement", "optimal:", "--", s(&prog)], "--placement");
    let plan = p(&dir, "plan.csv");
    std::fs::write(&plan, "page,at,locations,page_size\n0x200000,0,1,2097152\n").unwrap();
    fails(&["run", "--placement", s(&plan), "--", s(&prog)], "--placement");
    let nodes = json(&ok(&["machine", "live", "--json"]))["numa_nodes"].as_u64().unwrap();
    if nodes < 2 {
        fails(&["run", "--placement", "interleave", "--", s(&prog)], "needs a NUMA host");
        fails(&["run", "--placement", s(&plan), "--", s(&prog)], "needs a NUMA host");
        fails(&["run", "--mechanism", "numa-balancing", "--", s(&prog)], "numa-balancing needs a NUMA host");
    } else {
        fails(&["run", "--placement", &format!("bind:{nodes}"), "--", s(&prog)], "the host has nodes");
    }
    // A PU outside the CPUs this process may use (taskset here; a cpuset alike) is refused
    // before the program runs.
    if host_pus() >= 2 {
        let out = Command::new("taskset")
            .args(["-c", "0", env!("CARGO_BIN_EXE_sharemap"), "run", "--thread-map", "1", "--", s(&prog)])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("outside the CPUs this process may use"), "{err}");
        assert!(out.stdout.is_empty());
    }
}

/// Every mechanism that applies on this host, measured against os from a recording: the
/// table names each, autopin says what it picked, and those that need a NUMA host are named
/// as left out on a one-node host.
#[test]
fn mechanisms_are_measured_from_a_recording() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "threads", THREADS, &[]);
    let trace = p(&dir, "n.trace");
    ok(&["gen", "neighbor", "--threads", "4", "--accesses", "20k", "-o", s(&trace)]);
    let out = ok(&["run", "--mechanism", "all", "--recording", s(&trace), "--repeat", "2", "--", s(&prog)]);
    let table = String::from_utf8_lossy(&out.stdout);
    let first_words: Vec<&str> = table.lines().filter_map(|l| l.split_whitespace().next()).collect();
    for name in ["os", "random", "compact", "scatter", "round-robin", "oracle", "autopin"] {
        assert!(first_words.contains(&name), "{name}: {table}");
    }
    assert!(table.contains("autopin: fastest in probation: oracle "), "{table}");
    assert!(table.contains(", random 4 "), "simulate's five candidates: {table}");
    // trace:FILE is the default algorithm on the recording's sharing, as --sharing gives it.
    let spec = format!("trace:{}", s(&trace));
    let by_spec = cpus_of(&ok(&["run", "--thread-map", &spec, "--", s(&prog)]).stdout);
    let by_flag = cpus_of(&ok(&["run", "--thread-map", "sharemap", "--sharing", s(&trace), "--", s(&prog)]).stdout);
    assert_eq!(by_spec, by_flag);
    assert_eq!(by_spec.len(), 4, "{by_spec:?}");
    assert!(table.contains("(the oracle's mapping in "), "{table}");
    let nodes = json(&ok(&["machine", "live", "--json"]))["numa_nodes"].as_u64().unwrap();
    if nodes < 2 {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("marathe, sammu, kmaf, carrefour, numa-balancing left out"), "{err}");
    }
    // JSON: autopin's picks add up to the rounds.
    let v = json(&ok(&[
        "run",
        "--mechanism",
        "os,autopin",
        "--recording",
        s(&trace),
        "--repeat",
        "3",
        "--json",
        "--",
        s(&prog),
    ]));
    let picks: u64 = v[1]["autopin"]["picks"].as_array().unwrap().iter().map(|p| p[1].as_u64().unwrap()).sum();
    assert_eq!(picks, 3);
}

/// With randomisation off, a recording's addresses hold in later runs, pinned or not: the
/// program's heap (small and large allocations) and its globals are where the trace saw
/// them (the recorder's region and the run actor leave the program's own layout alone).
#[test]
fn addresses_recorded_without_randomisation_hold_in_runs() {
    let dir = tempfile::tempdir().unwrap();
    let src = p(&dir, "addr.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\nint g;\nint main(void) {\n\
         volatile char *big = malloc(4 << 20), *small = malloc(64);\n\
         big[0] = 1; small[0] = 2; g = 3;\n\
         printf(\"%p %p %p\\n\", (void *)big, (void *)small, (void *)&g);\n return 0;\n}\n",
    )
    .unwrap();
    let prog = p(&dir, "addr");
    ok(&["cc", "-O1", s(&src), "-o", s(&prog)]);
    let trace = p(&dir, "a.trace");
    let recorded = ok(&["record", "--no-aslr", "-o", s(&trace), "--", s(&prog)]);
    let csv = p(&dir, "a.csv");
    ok(&["convert", s(&trace), s(&csv)]);
    let written: Vec<u64> = std::fs::read_to_string(&csv)
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| l.ends_with(",W"))
        .map(|l| u64::from_str_radix(l.split(',').nth(1).unwrap().trim_start_matches("0x"), 16).unwrap())
        .collect();
    let printed = |out: &std::process::Output| -> Vec<u64> {
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap())
            .collect()
    };
    let seen = printed(&recorded);
    assert_eq!(seen.len(), 3);
    for a in &seen {
        assert!(written.contains(a), "{a:#x} not among the recorded writes {written:x?}");
    }
    assert_eq!(printed(&ok(&["run", "--no-aslr", "--", s(&prog)])), seen);
    assert_eq!(printed(&ok(&["run", "--no-aslr", "--thread-map", "0", "--", s(&prog)])), seen);
}

/// Four ways a program ends with other threads alive: its main thread returns while an
/// OpenMP team (libgomp keeps it) or a thread pool waits, a worker calls exit() while main
/// waits, main calls pthread_exit() and a worker ends the program. Each touches a buffer of
/// N pages (huge pages refused) first.
const ENDINGS: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
static char *buf; static long pages;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static void touch(void) { for (long p = 0; p < pages; p++) buf[p * 4096] = 1; }
static void *pool(void *a) { pthread_mutex_lock(&m); for (;;) pthread_cond_wait(&c, &m); return a; }
static void *exiter(void *a) { touch(); exit(0); return a; }
static void *late(void *a) { usleep(100000); touch(); return a; }
int main(int argc, char **argv) {
    pages = atol(argv[2]);
    buf = mmap(0, (pages + 1) * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(buf, (pages + 1) * 4096, MADV_NOHUGEPAGE);
    pthread_t t;
    if (!strcmp(argv[1], "openmp")) {
        #pragma omp parallel num_threads(3)
        {
            #pragma omp single
            touch();
        }
        return 0;
    }
    if (!strcmp(argv[1], "pool")) { for (int i = 0; i < 3; i++) pthread_create(&t, 0, pool, 0); touch(); return 0; }
    if (!strcmp(argv[1], "exit")) { pthread_create(&t, 0, exiter, 0); for (;;) pause(); }
    if (!strcmp(argv[1], "pthread_exit")) { pthread_create(&t, 0, late, 0); pthread_exit(0); }
    return 1;
}
"#;

/// `run --where` counts the pages of programs that end with other threads alive (it read
/// them through the group leader, gone by then, and said "none"): the anonymous pages at
/// exit with a 1024-page buffer exceed those without it by 1024, give or take the few
/// pages of stacks and heap that vary from run to run.
#[test]
fn where_counts_the_pages_of_programs_ending_with_threads_alive() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "endings", ENDINGS, &["-fopenmp"]);
    let anonymous = |shape: &str, pages: &str| -> i64 {
        let out = sharemap(&["run", "--where", "--", s(&prog), shape, pages]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{shape}: {err}");
        let line = err.lines().find(|l| l.contains("resident pages at exit")).unwrap_or_else(|| panic!("{err}"));
        let tail = line.split("anonymous: ").nth(1).unwrap_or_else(|| panic!("{shape}: {line}"));
        tail.split(", ").map(|n| n.trim_end_matches(')').rsplit(' ').next().unwrap().parse::<i64>().unwrap()).sum()
    };
    for shape in ["openmp", "pool", "exit", "pthread_exit"] {
        let (without, with) = (anonymous(shape, "0"), anonymous(shape, "1024"));
        assert!(
            (with - without - 1024).abs() <= 8,
            "{shape}: {with} anonymous pages with the buffer, {without} without"
        );
    }
}

/// `vm` reads every file a flag names on the host before booting (no guest is needed to
/// refuse them): one line naming the user's file and line, at once.
#[test]
fn vm_checks_its_input_files_before_booting() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "nothing", "int main(void) { return 0; }", &[]);
    let plan = p(&dir, "plan.csv");
    std::fs::write(&plan, "page,node\n0x600000000000,1\n\n0x600000000000,0\n").unwrap();
    let far = p(&dir, "far.csv");
    std::fs::write(&far, "page,node\n0x600000000000,3\n").unwrap();
    let missing = p(&dir, "missing.trace");
    let (as_trace, as_optimal) = (format!("trace:{}", s(&missing)), format!("optimal:{}", s(&missing)));
    let cases: [(Vec<&str>, String); 10] = [
        (
            vec!["--placement", s(&plan)],
            format!("{}:4: page 0x600000000000 planned on node 0 here and on node 1 at line 2", s(&plan)),
        ),
        (vec!["--placement", s(&far)], format!("{}:2: node 3 does not exist: the guest has nodes 0-1", s(&far))),
        (vec!["--thread-map", &as_trace], format!("--thread-map: {}", s(&missing))),
        (vec!["--placement", &as_optimal], s(&missing).to_string()),
        // The flags `run` reads in the guest, checked on the guest's topology.
        (vec!["--thread-map", "0,1,9"], "--thread-map 0,1,9: PU 9 does not exist: the guest has PUs 0-3".into()),
        (vec!["--thread-map", "nonsense"], "--thread-map nonsense: 'nonsense' is not a PU number".into()),
        (vec!["--placement", "bind:7"], "--placement bind:7: the guest has nodes 0-1".into()),
        (vec!["--memory-mb", "18446744073709551615"], "--memory-mb 18446744073709551615: more than this host's".into()),
        (vec!["--timeout", "0"], "--timeout 0: give the guest at least one second".into()),
        (vec!["--env", "A B=1"], "--env A B=1: 'A B' is not a variable name".into()),
    ];
    for (flags, says) in &cases {
        let mut args = vec!["vm"];
        args.extend(flags.iter().copied());
        args.extend(["--", s(&prog)]);
        let started = std::time::Instant::now();
        let out = sharemap(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {err}");
        assert!(err.lines().count() == 1 && err.contains(says.as_str()), "{flags:?}: {err}");
        assert!(started.elapsed().as_secs() < 5, "{flags:?}: refused before any boot");
    }
}

/// Nothing `run` starts outlives it: SIGINT, SIGTERM or SIGKILL to sharemap ends the
/// program too (it ran on, orphaned), and a caught signal leaves no temporary file behind.
#[test]
fn the_program_dies_with_sharemap() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
        let tmp = tempfile::tempdir().unwrap();
        let mut sm = Command::new(env!("CARGO_BIN_EXE_sharemap"))
            .args(["run", "--", "sleep", "30"])
            .env("TMPDIR", tmp.path())
            .spawn()
            .unwrap();
        let pid = sm.id() as i32;
        // The program, not a helper sharemap runs first.
        let program = common::child_of(pid, 5, |c| {
            std::fs::read(format!("/proc/{c}/cmdline"))
                .is_ok_and(|line| line.split(|&b| b == 0).next().is_some_and(|argv0| argv0.ends_with(b"/sleep")))
        })
        .expect("the program started");
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(pid, signal) };
        sm.wait().unwrap();
        assert!(common::ends_within(program, 2), "signal {signal}: the program {program} outlived sharemap");
        if signal != libc::SIGKILL {
            let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert!(left.is_empty(), "signal {signal}: left behind {left:?}");
        }
    }
}

/// Under `--where` (the program traced), SIGSTOP stops the program and SIGCONT resumes it,
/// and Ctrl-Z (SIGTSTP to the job's process group) stops sharemap and the program until
/// `fg` (SIGCONT to the group), as without sharemap; the run then ends normally.
#[test]
fn a_stopped_program_stays_stopped_under_where() {
    let d = tempfile::tempdir().unwrap();
    // The tick is rewritten in place at a fixed width: a reader never sees the file empty.
    let ticker = "#include <fcntl.h>\n#include <pthread.h>\n#include <stdio.h>\n#include <unistd.h>\n\
                  static void *idle(void *a) { for (;;) pause(); return a; }\n\
                  int main(int argc, char **argv) { pthread_t t; pthread_create(&t, 0, idle, 0);\n\
                  int fd = open(argv[1], O_CREAT | O_WRONLY, 0644); char b[16];\n\
                  for (long i = 0; i < 300; i++) { snprintf(b, sizeof b, \"%08ld\\n\", i); pwrite(fd, b, 9, 0); usleep(5000); }\n\
                  return 0; }";
    let prog = common::build_c(&d, "ticker", ticker, &[]);
    let ticks = p(&d, "ticks");
    let tick = || std::fs::read_to_string(&ticks).ok().and_then(|t| t.trim().parse::<i64>().ok()).unwrap_or(-1);
    use std::os::unix::process::CommandExt;
    let mut sm = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(["run", "--where", "--", s(&prog), s(&ticks)])
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = sm.id() as i32;
    let program = common::child_of(pid, 5, |c| {
        std::fs::read(format!("/proc/{c}/cmdline")).is_ok_and(|l| l.starts_with(s(&prog).as_bytes()))
    })
    .expect("the program started");
    let pause = |ms| std::thread::sleep(std::time::Duration::from_millis(ms));
    let still = |what: &str| {
        pause(150);
        let before = tick();
        pause(400);
        assert_eq!(tick(), before, "{what}: the program ran on");
    };
    let moving = |what: &str| {
        let before = tick();
        pause(400);
        assert!(tick() > before, "{what}: the program did not resume");
    };
    // Ticking (a loaded machine may take a while to start it).
    let started = std::time::Instant::now();
    while tick() < 0 && started.elapsed().as_secs() < 20 {
        pause(20);
    }
    moving("at the start");
    // Signals to our own child's program and to its process group.
    let signal = |to: i32, sig: i32| {
        // SAFETY: kill takes plain integers.
        unsafe { libc::kill(to, sig) };
    };
    signal(program, libc::SIGSTOP);
    still("SIGSTOP");
    signal(program, libc::SIGCONT);
    moving("SIGCONT");
    signal(-pid, libc::SIGTSTP);
    still("Ctrl-Z");
    signal(-pid, libc::SIGCONT);
    moving("fg");
    let status = sm.wait().unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(tick(), 299);
}

/// `vm --dry-run` checks everything and says what it would boot and run, without QEMU.
#[test]
fn vm_dry_run_says_what_it_would_run() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "nothing", "int main(void) { return 0; }", &[]);
    let out = ok(&[
        "vm",
        "--dry-run",
        "--nodes",
        "4",
        "--cpus",
        "8",
        "--thread-map",
        "scatter",
        "--env",
        "K=a b",
        "--",
        s(&prog),
        "x y",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("guest   4 NUMA nodes, 8 CPUs, 2048 MiB, distance 20"), "{text}");
    let runs = "runs    K='a b' /opt/sharemap/sharemap run --where --observed-to /tmp/.sharemap-observed.json '--thread-map' 'scatter' '--' '/opt/sharemap/bin/nothing' 'x y'";
    assert!(text.contains(runs), "{text}");
    assert!(text.contains("nothing booted"), "{text}");
}

/// A recording read by address (`--recording`, `--placement optimal:`) whose address
/// randomisation differs from the run's is noted: its addresses need not hold.
#[test]
fn a_recording_with_other_address_randomisation_is_noted() {
    let dir = tempfile::tempdir().unwrap();
    let src = p(&dir, "touch.c");
    std::fs::write(&src, "static long a[4096]; int main(void) { for (int i = 0; i < 4096; i++) a[i] = i; return 0; }")
        .unwrap();
    let bin = p(&dir, "touch");
    ok(&["cc", "-O1", "-o", s(&bin), s(&src)]);
    let (on, off) = (p(&dir, "on.trace"), p(&dir, "off.trace"));
    ok(&["record", "-o", s(&on), "--", s(&bin)]);
    ok(&["record", "--no-aslr", "-o", s(&off), "--", s(&bin)]);
    let notes = |args: &[&str]| {
        let out = ok(&[&["run", "--mechanism", "random"], args, &["--", s(&bin)]].concat());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = notes(&["--no-aslr", "--recording", s(&on)]);
    assert!(err.contains("was recorded with address randomisation on"), "{err}");
    let err = notes(&["--recording", s(&off)]);
    assert!(err.contains("was recorded with --no-aslr but this run randomises addresses"), "{err}");
    let err = notes(&["--no-aslr", "--recording", s(&off)]);
    assert!(!err.contains("address randomisation") && !err.contains("randomises"), "{err}");
}
