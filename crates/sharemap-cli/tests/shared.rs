//! What is shared, by name: programs whose sharing is known, built with `sharemap cc` and
//! `sharemap c++` (gcc and clang) and recorded, then `analyze` checked against it: each array
//! under its allocation site or symbol, its lines counted by class, and the source line of
//! the accesses that share.

mod common;
use common::{p, s, sharemap_env};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Four threads in their region of interest: a static table every thread reads, counters
/// side by side in one line each thread increments its own of, a total all add to
/// atomically, and one page of slice per thread.
const ARRAYS: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sharemap.h>
#define T 4
#define N 20000
static double table[4096];
volatile long *counters;
long *total;
double *slices;
static void *work(void *arg) {
    long t = (long)arg;
    double local = 0;
    for (int i = 0; i < N; i++) {
        local += table[(i * 8 + t) % 4096];
        counters[t] += 1; /* FALSE */
        slices[t * 512 + i % 512] = local;
        if (i % 16 == 0) __atomic_fetch_add(total, 1, __ATOMIC_RELAXED);
    }
    return 0;
}
int main(void) {
    for (int i = 0; i < 4096; i++) table[i] = i;
    counters = calloc(T, sizeof(long)); /* COUNTERS */
    total = malloc(sizeof(long)); /* TOTAL */
    *total = 0;
    slices = aligned_alloc(4096, T * 512 * sizeof(double)); /* SLICES */
    pthread_t th[T];
    sharemap_roi_begin();
    for (long t = 0; t < T; t++) pthread_create(&th[t], 0, work, (void *)t);
    for (long t = 0; t < T; t++) pthread_join(th[t], 0);
    sharemap_roi_end();
    printf("%ld %ld\n", *total, counters[0]);
    free((void *)counters);
    return 0;
}
"#;

/// The number of the source line holding `marker`.
fn line_of(source: &str, marker: &str) -> u64 {
    source.lines().position(|l| l.contains(marker)).expect("marker") as u64 + 1
}

/// Builds `source` (named `name`) with `driver` (cc or c++) and `compiler`, records it and
/// analyzes it: `what_is_shared` from summary.json.
fn recorded(dir: &tempfile::TempDir, name: &str, source: &str, driver: &str, compiler: &str) -> Value {
    let src = p(dir, name);
    std::fs::write(&src, source).unwrap();
    let bin = p(dir, &format!("{name}-{compiler}"));
    let env = [("SHAREMAP_COMPILER", compiler)];
    let out = sharemap_env(&[driver, "-g", "-O1", "-pthread", "-o", s(&bin), s(&src)], &env);
    assert!(out.status.success(), "{driver} ({compiler}): {}", String::from_utf8_lossy(&out.stderr));
    let trace = p(dir, &format!("{name}-{compiler}.trace"));
    let out = sharemap_env(&["record", "-o", s(&trace), "--", s(&bin)], &[]);
    assert!(out.status.success(), "record: {}", String::from_utf8_lossy(&out.stderr));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("does not name"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir_out = p(dir, &format!("{name}-{compiler}.out"));
    let out = sharemap_env(&["analyze", s(&trace), "-o", s(&dir_out)], &[]);
    assert!(out.status.success(), "analyze: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(stdout.contains("what is shared"), "{stdout}");
    let csv = std::fs::read_to_string(dir_out.join("shared.csv")).unwrap();
    assert!(csv.starts_with("object,kind,site,"), "{csv}");
    // numalize's pages.csv names each page's data in structure.name (its sixth column).
    let pages = std::fs::read_to_string(dir_out.join("pages.csv")).unwrap();
    let named = pages.lines().skip(1).filter(|l| l.split(',').nth(5).is_some_and(|n| !n.is_empty())).count();
    assert!(named * 2 > pages.lines().count(), "most pages named: {pages}");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(dir_out.join("summary.json")).unwrap()).unwrap();
    summary["what_is_shared"].clone()
}

fn object<'a>(w: &'a Value, name: &str) -> &'a Value {
    let objects = w["objects"].as_array().unwrap();
    objects
        .iter()
        .find(|o| o["name"].as_str().unwrap() == name)
        .unwrap_or_else(|| panic!("no object {name:?} in {:#}", w["objects"]))
}

fn lines(o: &Value) -> (u64, u64, u64, u64) {
    let l = &o["lines"];
    let n = |k: &str| l[k].as_u64().unwrap();
    (n("true_shared"), n("false_shared"), n("read_shared"), n("private"))
}

fn compilers() -> Vec<&'static str> {
    let have = |c: &str| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success());
    let mut v = vec!["gcc"];
    if have("clang") || have("clang-14") {
        v.push("clang");
    } else {
        common::skip(common::Need::Clang, "clang is not installed (scripts/setup installs it): gcc's build alone");
    }
    v
}

#[test]
fn each_array_is_named_with_the_sharing_it_has() {
    let dir = tempfile::tempdir().unwrap();
    for compiler in compilers() {
        let w = recorded(&dir, "arrays.c", ARRAYS, "cc", compiler);
        assert_eq!(w["named"], true);
        let at = |how: &str, marker: &str| format!("{how} at arrays.c:{} (main)", line_of(ARRAYS, marker));
        // Each thread writes its own word of one line: false sharing, nothing true.
        let counters = object(&w, &at("calloc", "COUNTERS"));
        assert_eq!(lines(counters), (0, 1, 0, 0), "{compiler}: {counters:#}");
        assert_eq!(counters["threads"], 4);
        assert_eq!(counters["bytes"], 32);
        assert_eq!(counters["kind"], "heap");
        // The line of the increment is the code on it (one access in 1024 sampled: 20,000
        // increments a thread, two accesses each, half of its accesses, leave some 150).
        let code = &counters["code"][0];
        assert_eq!(code["site"]["line"].as_u64(), Some(line_of(ARRAYS, "FALSE")), "{compiler}: {counters:#}");
        assert!(code["samples"].as_u64().unwrap() > 80, "{code:#}");
        // One word every thread adds to: true sharing.
        let total = object(&w, &at("malloc", "TOTAL"));
        assert_eq!(lines(total), (1, 0, 0, 0), "{compiler}: {total:#}");
        // The table, initialised before the region of interest, is only read inside it: all
        // 512 of its lines by all four threads.
        let table = object(&w, "table");
        assert_eq!(lines(table).0..lines(table).3, 0..0, "{compiler}: {table:#}");
        assert_eq!(table["lines"]["read_shared"], 512, "{compiler}: {table:#}");
        assert_eq!(table["kind"], "static");
        // Its 32 KiB are 8 pages (9 when not page-aligned), each named after it in pages.csv.
        let pages = std::fs::read_to_string(p(&dir, &format!("arrays.c-{compiler}.out")).join("pages.csv")).unwrap();
        let tables = pages.lines().filter(|l| l.split(',').nth(5) == Some("table")).count();
        assert!((7..=9).contains(&tables), "{compiler}: {tables} pages named table");
        // One page of slice per thread: private lines on private pages.
        let slices = object(&w, &at("aligned", "SLICES"));
        assert_eq!(lines(slices), (0, 0, 0, 4 * 64), "{compiler}: {slices:#}");
        assert_eq!((slices["pages"].as_u64(), slices["shared_pages"].as_u64()), (Some(4), Some(0)));
        // Conflicts come first: the counters' 160,000 accesses on a falsely shared line.
        assert_eq!(w["objects"][0]["name"], at("calloc", "COUNTERS"));
    }
}

const CXX: &str = r#"
#include <thread>
#include <vector>
#include <cstdio>
struct Counter { long n; };
int main() {
    std::vector<Counter *> mine;
    for (int t = 0; t < 4; t++) mine.push_back(new Counter{0}); /* OWN */
    Counter *side = new Counter[4](); /* SIDE */
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
        ts.emplace_back([=] {
            for (int i = 0; i < 10000; i++) {
                ((volatile Counter *)side)[t].n += 1;
                ((volatile Counter *)mine[t])->n += 1;
            }
        });
    for (auto &t : ts) t.join();
    std::printf("%ld %ld\n", side[0].n, mine[0]->n);
    delete[] side;
    for (auto *c : mine) delete c;
}
"#;

/// C++'s operators are recorded at the program's lines: `new[]` for the array of counters,
/// `new` for the ones apart.
#[test]
fn cxx_allocations_are_named_by_their_operators() {
    let dir = tempfile::tempdir().unwrap();
    for compiler in compilers() {
        let w = recorded(&dir, "counters.cpp", CXX, "c++", compiler);
        let side = object(&w, &format!("new[] at counters.cpp:{} (main)", line_of(CXX, "SIDE")));
        assert!(lines(side).0 + lines(side).1 >= 1, "{compiler}: {side:#}");
        assert_eq!(side["allocations"], 1);
        let own = object(&w, &format!("new at counters.cpp:{} (main)", line_of(CXX, "OWN")));
        assert_eq!(own["allocations"], 4, "{compiler}: {own:#}");
        assert_eq!(own["threads"], 5, "{compiler}: {own:#}");
    }
}

/// A trace without allocation records (a generated one) is answered with address ranges when
/// asked, and not at all by default.
#[test]
fn a_trace_without_names_gets_ranges_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let trace = p(&dir, "n.trace");
    let out = sharemap_env(&["gen", "neighbor", "--threads", "4", "--accesses", "200k", "-o", s(&trace)], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plain = p(&dir, "plain");
    let out = sharemap_env(&["analyze", s(&trace), "-o", s(&plain)], &[]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("what is shared"));
    assert!(!Path::new(&plain.join("shared.csv")).exists());
    let asked = p(&dir, "asked");
    let out = sharemap_env(&["analyze", s(&trace), "--objects", "-o", s(&asked)], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("objects are address ranges"), "{text}");
    assert!(text.contains("(no allocation record)"), "{text}");
}
