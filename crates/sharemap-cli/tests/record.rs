//! `sharemap record --backend valgrind` on a real pthread program compiled here, checked
//! against the exact accesses the program makes to its data array.

use sharemap::trace::{Chunk, EventKind, Kind, TraceReader, TraceSource};
use std::collections::BTreeMap;
use std::process::Command;

const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdio.h>
#define N 3
#define K 1000
static volatile long data[N][K];
static void *work(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < K; i++) data[id][i] = i;
    return 0;
}
int main(void) {
    pthread_t th[N];
    printf("data %p %p\n", (void *)data, (void *)(data + N));
    fflush(stdout);
    for (long i = 0; i < N; i++) pthread_create(&th[i], 0, work, (void *)i);
    for (int i = 0; i < N; i++) pthread_join(th[i], 0);
    long sum = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < K; j++) sum += data[i][j];
    fprintf(stderr, "sum %ld\n", sum);
    return 3;
}
"#;

fn tools_available() -> bool {
    let have = |c: &str| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success());
    if have("valgrind") && have("gcc") {
        return true;
    }
    sharemap_testkit::skip(sharemap_testkit::Need::Valgrind, "valgrind or gcc is not installed");
    false
}

#[test]
fn valgrind_backend_counts_every_access_to_the_array() {
    if !tools_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("t.c");
    let bin = d.path().join("t");
    std::fs::write(&src, PROGRAM).unwrap();
    let cc = Command::new("gcc").args(["-O1", "-pthread", "-o"]).arg(&bin).arg(&src).output().unwrap();
    assert!(cc.status.success(), "{}", String::from_utf8_lossy(&cc.stderr));
    let trace = d.path().join("t.trace");
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(["record", "--backend", "valgrind", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&bin)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The program's output and exit status pass through; Valgrind's log does not leak.
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("sum 1498500"), "{stderr}");
    assert!(!stderr.contains("Lackey"), "{stderr}");
    let mut words =
        stdout.split_whitespace().skip(1).map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).unwrap());
    let (lo, hi) = (words.next().unwrap(), words.next().unwrap());

    let mut r = TraceReader::open(&trace, None).unwrap();
    let mut c = Chunk::default();
    // (thread, kind) -> accesses inside the array; thread -> rows it wrote.
    let mut counts: BTreeMap<(u32, Kind), u64> = BTreeMap::new();
    let mut rows: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut starts = Vec::new();
    while r.next_chunk(&mut c).unwrap() {
        starts.extend(c.events.iter().filter(|e| e.kind == EventKind::ThreadStart).map(|e| e.thread));
        for a in c.accesses.iter().filter(|a| a.addr >= lo && a.addr < hi) {
            assert_eq!(a.size, 8);
            *counts.entry((a.thread, a.kind)).or_default() += 1;
            if a.kind == Kind::Write {
                rows.entry(a.thread).or_default().push((a.addr - lo) / 8 / 1000);
            }
        }
    }
    assert_eq!(starts, vec![0, 1, 2, 3], "main thread then three workers, in creation order");
    assert_eq!(r.metadata().threads, 4);
    // Each worker wrote its own row exactly K times; main read every element once.
    assert_eq!(counts.get(&(0, Kind::Read)), Some(&3000));
    assert_eq!(counts.get(&(0, Kind::Write)), None);
    let mut written_rows: Vec<u64> = Vec::new();
    for t in 1..=3 {
        assert_eq!(counts.get(&(t, Kind::Write)), Some(&1000), "thread {t}");
        assert_eq!(counts.get(&(t, Kind::Read)), None, "thread {t}");
        let r = &rows[&t];
        assert!(r.iter().all(|&x| x == r[0]), "thread {t} wrote one row");
        written_rows.push(r[0]);
    }
    written_rows.sort();
    assert_eq!(written_rows, vec![0, 1, 2]);
    assert_eq!(r.metadata().source.kind, "valgrind");
}

#[test]
fn recording_a_missing_program_fails_clearly_and_writes_nothing() {
    if !tools_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("x.trace");
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--", "/no/such/program"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/no/such/program"), "{err}");
    assert!(!trace.exists());
}
