//! `sharemap run` checked in a multi-node guest kernel under QEMU (this host has one NUMA
//! node): each thread's CPUs and each page's node are read back from the kernel, by the
//! program itself (its affinity, move_pages) and by `run --where` (/proc at each exit).
//! Needs qemu-system-x86, busybox-static and the guest kernel (`sharemap vm
//! --fetch-kernel`, done here when missing); without them the tests are skipped and counted
//! (sharemap-testkit), except where SHAREMAP_REQUIRE names `guest` (scripts/test does).

mod common;
use common::{build_c, ok, p, s};
use sharemap_run::vm::{GUEST_SHAREMAP, Guest};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Four workers (threads 1-4) each write a quarter of a buffer at a fixed address, then the
/// main thread asks the kernel where each quarter's pages lie. With an argument it first
/// computes (sleeps, standing in for the work an emulated guest is too slow for) until the
/// pages alternate between the nodes, for at most that many milliseconds: a plan is applied
/// by migration while the program runs.
const QUARTERS: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#define PAGES 256
static char *buf;
static int only_cpu(void) {
    cpu_set_t s; CPU_ZERO(&s); sched_getaffinity(0, sizeof s, &s);
    int n = 0, c1 = -1; for (int c = 0; c < CPU_SETSIZE; c++) if (CPU_ISSET(c, &s)) { n++; c1 = c; }
    return n == 1 ? c1 : -1;
}
static void *work(void *a) {
    long k = (long)a;
    for (long p = k * PAGES / 4; p < (k + 1) * PAGES / 4; p++) buf[p * 4096] = 1;
    printf("thread %ld allowed %d\n", k + 1, only_cpu());
    return 0;
}
static int alternating(int *status) {
    int n = 0;
    for (int p = 0; p < PAGES; p++) n += status[p] == p % 2;
    return n;
}
int main(int argc, char **argv) {
    buf = mmap((void *)0x600000000000, PAGES * 4096, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (buf == MAP_FAILED) return 2;
    pthread_t t[4];
    for (long k = 0; k < 4; k++) { pthread_create(&t[k], 0, work, (void *)k); pthread_join(t[k], 0); }
    void *pages[PAGES]; int status[PAGES];
    for (int p = 0; p < PAGES; p++) pages[p] = buf + p * 4096;
    if (syscall(SYS_move_pages, 0, PAGES, pages, NULL, status, 0) != 0) return 3;
    for (int waited = 0; argc > 1 && waited < atoi(argv[1]) && alternating(status) < PAGES; waited += 10) {
        usleep(10000);
        if (syscall(SYS_move_pages, 0, PAGES, pages, NULL, status, 0) != 0) return 3;
    }
    for (int q = 0; q < 4; q++) {
        int on[2] = {0, 0}, odd = 0, even_on = 0;
        for (int p = q * PAGES / 4; p < (q + 1) * PAGES / 4; p++) {
            if (status[p] == 0 || status[p] == 1) on[status[p]]++;
            if (status[p] == p % 2) even_on++;
            odd += p % 2;
        }
        printf("quarter %d node0 %d node1 %d alternate %d\n", q, on[0], on[1], even_on);
    }
    return 0;
}
"#;

/// The same with OpenMP: thread t of the team (t = 0 the main thread) writes quarter t.
const OPENMP_QUARTERS: &str = r#"
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#define PAGES 256
int main(void) {
    char *buf = mmap((void *)0x600000000000, PAGES * 4096, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (buf == MAP_FAILED) return 2;
    #pragma omp parallel num_threads(4)
    {
        int t = omp_get_thread_num();
        for (long p = t * PAGES / 4; p < (t + 1) * PAGES / 4; p++) buf[p * 4096] = 1;
        cpu_set_t s; CPU_ZERO(&s); sched_getaffinity(0, sizeof s, &s);
        int n = 0, c1 = -1; for (int c = 0; c < CPU_SETSIZE; c++) if (CPU_ISSET(c, &s)) { n++; c1 = c; }
        #pragma omp critical
        printf("thread %d allowed %d\n", t, n == 1 ? c1 : -1);
    }
    void *pages[PAGES]; int status[PAGES];
    for (int p = 0; p < PAGES; p++) pages[p] = buf + p * 4096;
    if (syscall(SYS_move_pages, 0, PAGES, pages, NULL, status, 0) != 0) return 3;
    for (int q = 0; q < 4; q++) {
        int on[2] = {0, 0};
        for (int p = q * PAGES / 4; p < (q + 1) * PAGES / 4; p++) if (status[p] == 0 || status[p] == 1) on[status[p]]++;
        printf("quarter %d node0 %d node1 %d alternate 0\n", q, on[0], on[1]);
    }
    return 0;
}
"#;

/// The guest kernel, fetched when missing; None (after saying why) when the guest cannot
/// run here and the tests may skip.
fn kernel() -> Option<PathBuf> {
    let skip = |why: String| -> Option<PathBuf> {
        common::skip(common::Need::Guest, &format!("{why} (scripts/setup installs what the guest needs)"));
        None
    };
    let found = |name: &str| {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
    };
    if !found("qemu-system-x86_64") {
        return skip("qemu-system-x86_64 is not installed".into());
    }
    if !Path::new("/bin/busybox").is_file() && !Path::new("/usr/bin/busybox").is_file() {
        return skip("busybox is not installed".into());
    }
    if let Ok(k) = sharemap_run::vm::find_kernel(None) {
        return Some(k);
    }
    // Tests run in parallel: one fetches, the others wait for it.
    static FETCH: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = FETCH.lock().unwrap_or_else(|e| e.into_inner());
    if let Ok(k) = sharemap_run::vm::find_kernel(None) {
        return Some(k);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap")).args(["vm", "--fetch-kernel"]).output().unwrap();
    if !out.status.success() {
        return skip(format!("fetching the kernel failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    sharemap_run::vm::find_kernel(None).ok()
}

/// Boots a 2-node, 4-CPU guest (CPUs 0-1 on node 0, 2-3 on node 1) with sharemap, the
/// programs (in /opt/sharemap/bin) and files, runs the commands, and returns each section's
/// output (sections start with a line `== NAME`).
fn boot(kernel: PathBuf, programs: &[&Path], files: &[(&Path, &str)], commands: &str) -> Vec<(String, String)> {
    boot_on(Guest::new(kernel, 2, 4).unwrap(), programs, files, commands)
}

/// As `boot`, on any guest.
fn boot_on(guest: Guest, programs: &[&Path], files: &[(&Path, &str)], commands: &str) -> Vec<(String, String)> {
    // One guest at a time: each emulates several CPUs, and the plans race the programs they place.
    static ONE_GUEST: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _alone = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let mut image = sharemap_run::vm::base_image(commands, false).unwrap();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_sharemap"));
    image.sharemap(&exe, &sharemap_run::Tools::beside(&exe).pin_library()).unwrap();
    for prog in programs {
        let at = format!("/opt/sharemap/bin/{}", prog.file_name().unwrap().to_string_lossy());
        image.host_program(prog, &at).unwrap();
    }
    for (from, at) in files {
        image.file(at, &std::fs::read(from).unwrap(), false);
    }
    let out = guest.boot(image).unwrap_or_else(|e| panic!("the guest failed: {e}"));
    assert_eq!(out.status, 0, "the guest's commands failed:\n{}", out.output);
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in out.output.lines() {
        match line.strip_prefix("== ") {
            Some(name) => sections.push((name.to_string(), String::new())),
            None if !sections.is_empty() => {
                let last = sections.last_mut().unwrap();
                last.1.push_str(line);
                last.1.push('\n');
            }
            None => {}
        }
    }
    sections
}

fn section<'a>(sections: &'a [(String, String)], name: &str) -> &'a str {
    &sections.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no section {name} in {sections:?}")).1
}

/// `thread K allowed C` lines of the program: thread number to its only allowed CPU.
fn allowed(text: &str) -> std::collections::BTreeMap<u32, i32> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                ["thread", k, "allowed", c] => Some((k.parse().ok()?, c.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

/// `run --where` lines: thread number to its allowed CPUs as the kernel listed them.
fn seen_allowed(text: &str) -> std::collections::BTreeMap<u32, String> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("sharemap: thread ")?;
            let k = rest.split_whitespace().next()?.parse().ok()?;
            Some((k, rest.rsplit_once("allowed CPUs ")?.1.trim().to_string()))
        })
        .collect()
}

/// Quarter q: pages on node 0, on node 1, and on the node of their page number's parity.
fn quarters(text: &str) -> Vec<[u32; 3]> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                ["quarter", _, "node0", a, "node1", b, "alternate", c] => {
                    Some([a.parse().ok()?, b.parse().ok()?, c.parse().ok()?])
                }
                _ => None,
            }
        })
        .collect()
}

/// `plan: N pages planned, T touched, K on their node`: (N, T, K).
fn plan_line(text: &str) -> (u64, u64, u64) {
    let line =
        text.lines().find(|l| l.starts_with("sharemap: plan: ")).unwrap_or_else(|| panic!("no plan line in {text}"));
    let n: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    (n[0], n[1], n[2])
}

const AT_LEAST: f64 = 0.95;

#[test]
fn pthreads_are_pinned_and_their_pages_placed_in_a_two_node_guest() {
    let Some(kernel) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "quarters", QUARTERS, &[]);
    // Page i of the buffer on node i mod 2: not where any thread would first touch it.
    let plan = p(&dir, "plan.csv");
    let rows: Vec<String> = (0..256u64).map(|i| format!("{:#x},{}", 0x6000_0000_0000u64 + i * 4096, i % 2)).collect();
    std::fs::write(&plan, format!("page,node\n{}\n", rows.join("\n"))).unwrap();
    let run = format!("{GUEST_SHAREMAP} run --where --thread-map 0,3,2,1,0");
    let commands = format!(
        "echo; echo '== first-touch'; {run} -- /opt/sharemap/bin/quarters || exit 1\n\
         echo; echo '== interleave'; {run} --placement interleave -- /opt/sharemap/bin/quarters || exit 1\n\
         echo; echo '== bind'; {run} --placement bind:1 -- /opt/sharemap/bin/quarters || exit 1\n\
         echo; echo '== plan'; {run} --placement /opt/sharemap/plan.csv -- /opt/sharemap/bin/quarters 5000 || exit 1\n\
         echo; echo '== wrong-size'; {run} --placement /opt/sharemap/huge.csv -- /opt/sharemap/bin/quarters; echo \"exit $?\"\n"
    );
    // A plan made for 2 MiB pages, refused on a host of 4 KiB pages before the program runs.
    let huge = p(&dir, "huge.csv");
    std::fs::write(&huge, "page,at,locations,page_size\n0x600000000000,0,1,2097152\n").unwrap();
    let files = [(plan.as_path(), "/opt/sharemap/plan.csv"), (huge.as_path(), "/opt/sharemap/huge.csv")];
    let sections = boot(kernel, &[&prog], &files, &commands);
    let refused = section(&sections, "wrong-size");
    assert!(refused.contains("the plan is for 2097152-byte pages") && refused.contains("exit 1"), "{refused}");
    assert!(!refused.contains("quarter"), "the program must not run: {refused}");
    let sections: Vec<(String, String)> = sections.into_iter().filter(|(n, _)| n != "wrong-size").collect();
    // Workers 1-4 on PUs 3, 2, 1, 0: the first two on node 1, the others on node 0.
    let cpus = [(1, 3), (2, 2), (3, 1), (4, 0)];
    for (name, text) in &sections {
        let mine = allowed(text);
        let kernel_says = seen_allowed(text);
        for (thread, cpu) in cpus {
            assert_eq!(mine.get(&thread), Some(&cpu), "{name}: thread {thread}'s own affinity\n{text}");
            assert_eq!(kernel_says.get(&thread), Some(&cpu.to_string()), "{name}: /proc for thread {thread}\n{text}");
        }
        assert_eq!(kernel_says.get(&0).map(String::as_str), Some("0"), "{name}: the main thread\n{text}");
    }
    let share = |n: u32| n as f64 / 64.0;
    let q = quarters(section(&sections, "first-touch"));
    assert_eq!(q.len(), 4);
    for (i, node) in [1, 1, 0, 0].into_iter().enumerate() {
        assert!(share(q[i][node]) >= AT_LEAST, "first touch: quarter {i} {:?}", q[i]);
    }
    for q in quarters(section(&sections, "interleave")) {
        assert!(q[0] >= 24 && q[1] >= 24, "interleave: {q:?}");
    }
    for q in quarters(section(&sections, "bind")) {
        assert_eq!(q[1], 64, "bind:1: {q:?}");
    }
    let text = section(&sections, "plan");
    for q in quarters(text) {
        assert!(share(q[2]) >= AT_LEAST, "plan: {q:?}");
    }
    let (planned, touched, on_node) = plan_line(text);
    assert_eq!((planned, touched), (256, 256), "{text}");
    assert!(on_node as f64 >= AT_LEAST * touched as f64, "{text}");
}

/// OpenMP with GCC's runtime (libgomp) and LLVM's (libomp, which binds its workers itself
/// unless told not to): each team thread on its PU, each quarter on its node.
#[test]
fn openmp_threads_are_pinned_and_their_pages_placed_in_a_two_node_guest() {
    let Some(kernel) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let gomp = build_c(&dir, "omp_gcc", OPENMP_QUARTERS, &["-fopenmp"]);
    let src = p(&dir, "omp_llvm.c");
    std::fs::write(&src, OPENMP_QUARTERS).unwrap();
    let llvm = p(&dir, "omp_llvm");
    let clang = ["clang", "clang-14"].into_iter().find(|c| Command::new(c).arg("--version").output().is_ok());
    let clang = clang.expect("clang (scripts/setup installs it with libomp)");
    let st = Command::new(clang).args(["-O1", "-fopenmp", "-o"]).arg(&llvm).arg(&src).status().unwrap();
    assert!(st.success(), "clang -fopenmp");
    let run = format!("{GUEST_SHAREMAP} run --where --thread-map 1,2,3,0");
    let mut commands = String::new();
    for prog in ["omp_gcc", "omp_llvm"] {
        commands.push_str(&format!(
            "echo; echo '== {prog} first-touch'; {run} -- /opt/sharemap/bin/{prog} || exit 1\n\
             echo; echo '== {prog} interleave'; {run} --placement interleave -- /opt/sharemap/bin/{prog} || exit 1\n"
        ));
    }
    let sections = boot(kernel, &[&gomp, &llvm], &[], &commands);
    assert_eq!(sections.len(), 4);
    for (name, text) in &sections {
        // Team thread t is thread t in creation order: on PUs 1, 2, 3, 0.
        let mine = allowed(text);
        assert_eq!(mine.into_iter().collect::<Vec<_>>(), vec![(0, 1), (1, 2), (2, 3), (3, 0)], "{name}\n{text}");
        let kernel_says = seen_allowed(text);
        for (t, cpu) in [(0, "1"), (1, "2"), (2, "3"), (3, "0")] {
            assert_eq!(kernel_says.get(&t).map(String::as_str), Some(cpu), "{name}: /proc for thread {t}\n{text}");
        }
        let q = quarters(text);
        assert_eq!(q.len(), 4, "{name}\n{text}");
        if name.ends_with("first-touch") {
            for (i, node) in [0, 1, 1, 0].into_iter().enumerate() {
                assert!(q[i][node] as f64 / 64.0 >= AT_LEAST, "{name}: quarter {i} {:?}", q[i]);
            }
        } else {
            for q in q {
                assert!(q[0] >= 24 && q[1] >= 24, "{name}: {q:?}");
            }
        }
    }
}

/// The whole path inside the guest: record a program built with `sharemap cc` without
/// address randomisation, compute the optimum's plan for threads on PUs 0-3, then run it
/// with threads the other way round (first touch alone would put every region on the wrong
/// node) and the plan, from the file `place` wrote and computed by `run` itself. The
/// program initialises its data, then computes (a pause stands for the computing the
/// emulated guest is too slow for): a plan is applied by migration after the first touch.
#[test]
fn a_plan_from_a_recording_is_applied_in_a_two_node_guest() {
    let Some(kernel) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let src = p(&dir, "regions.c");
    std::fs::write(
        &src,
        "#include <pthread.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n#define PAGES 64\n\
         static char *region[4];\n\
         static void *work(void *a) { long k = (long)a;\n\
           for (int r = 0; r < 10; r++) {\n\
             for (long i = 0; i < PAGES * 4096; i += 64) region[k][i] += 1;\n\
             if (r == 0) usleep(200000); }\n\
           return 0; }\n\
         int main(void) { for (int k = 0; k < 4; k++) region[k] = malloc(PAGES * 4096);\n\
           pthread_t t[3]; for (long k = 1; k < 4; k++) pthread_create(&t[k - 1], 0, work, (void *)k);\n\
           work(0); for (int k = 0; k < 3; k++) pthread_join(t[k], 0); return 0; }\n",
    )
    .unwrap();
    let prog = p(&dir, "regions");
    ok(&["cc", "-O1", s(&src), "-o", s(&prog)]);
    let sm = GUEST_SHAREMAP;
    let bin = "/opt/sharemap/bin/regions";
    let commands = format!(
        "{sm} record --no-aslr -o /tmp/r.trace -- {bin} || exit 1\n\
         {sm} place /tmp/r.trace --machine live --thread-map identity --policy first-touch --placement /tmp/plan.csv >/dev/null || exit 1\n\
         echo; echo '== file'; {sm} run --where --no-aslr --thread-map 3,2,1,0 --placement /tmp/plan.csv -- {bin} || exit 1\n\
         echo; echo '== optimal'; {sm} run --where --no-aslr --thread-map 3,2,1,0 --placement optimal:/tmp/r.trace -- {bin} || exit 1\n\
         echo; echo '== marathe'; {sm} run --where --no-aslr --thread-map 3,2,1,0 --placement marathe:/tmp/r.trace -- {bin} || exit 1\n\
         echo; echo '== none'; {sm} run --where --no-aslr --thread-map 3,2,1,0 -- {bin} || exit 1\n\
         echo; echo '== mechanisms'; {sm} run --mechanism all --recording /tmp/r.trace --repeat 2 --no-aslr -- {bin} || exit 1\n"
    );
    let sections = boot(kernel, &[&prog], &[], &commands);
    for name in ["file", "optimal", "marathe"] {
        let text = section(&sections, name);
        let (planned, touched, on_node) = plan_line(text);
        // 4 regions of 64 pages (the recording's addresses hold in the run).
        assert!(planned >= 256 && touched >= 256, "{name}: {text}");
        assert!(on_node as f64 >= AT_LEAST * touched as f64, "{name}: {text}");
        assert!(text.contains(" migrated"), "{text}");
    }
    // The plan for threads 0-3 on PUs 0-3 (identity) wants regions 0-1 on node 0 and 2-3 on node 1;
    // the run's threads sit the other way round: the plan migrated about half the pages.
    let migrated = |text: &str| -> u64 {
        let tail = text.split("; ").last().unwrap();
        tail.split_whitespace().next().unwrap().parse().unwrap()
    };
    assert!(migrated(section(&sections, "file")) >= 200, "{}", section(&sections, "file"));
    assert!(!section(&sections, "none").contains("plan:"));
    // Every mechanism runs on a NUMA host where root may switch NUMA balancing.
    let table = section(&sections, "mechanisms");
    let names = [
        "os",
        "random",
        "compact",
        "scatter",
        "round-robin",
        "oracle",
        "marathe",
        "sammu",
        "kmaf",
        "carrefour",
        "autopin",
        "numa-balancing",
    ];
    for name in names {
        assert!(table.lines().any(|l| l.split_whitespace().next() == Some(name)), "{name}\n{table}");
    }
    assert!(
        table.contains("marathe: profile of ") && table.contains("(loads missing a 32 KiB per-thread cache)"),
        "{table}"
    );
    for name in ["sammu", "kmaf", "carrefour"] {
        assert!(table.contains(&format!("{name}: simulated {name}")) && table.contains(" page moves"), "{table}");
        assert!(table.contains(&format!("{name}: replayed in the order they fired over ")), "{table}");
    }
    assert!(table.contains("autopin: fastest in probation: ") && table.contains(" of 2 rounds"), "{table}");
    assert!(table.contains("oracle: plan (last run): ") && table.contains("marathe: plan (last run): "), "{table}");
}

/// Seed 000's method in a real run: SAMMU simulated on a recording, its decisions replayed
/// in the order they fired. Threads 0-1 and 2-3 share a region each, which the OS model
/// spreads over the nodes; SAMMU remaps each pair onto one node early in the run and moves
/// pages after it. Each thread writes its allowed CPUs as it starts and as it ends (to the
/// file its argument names: a measurement discards the program's output): every CPU at the
/// start (the scheduler's until the remap), one CPU of its pair's node at the end.
#[test]
fn sammus_decisions_are_replayed_in_the_order_they_fired_in_a_two_node_guest() {
    let Some(kernel) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let src = p(&dir, "pairs.c");
    std::fs::write(
        &src,
        "#define _GNU_SOURCE\n#include <pthread.h>\n#include <sched.h>\n#include <stdio.h>\n#include <stdlib.h>\n\
         #define PAGES 2048\n\
         static char *region[2]; static FILE *out; static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;\n\
         static void say(long k, const char *when) { cpu_set_t s; sched_getaffinity(0, sizeof s, &s);\n\
           pthread_mutex_lock(&lock);\n\
           if (CPU_COUNT(&s) == 1) { for (int c = 0; c < CPU_SETSIZE; c++) if (CPU_ISSET(c, &s)) fprintf(out, \"thread %ld %s %d\\n\", k, when, c); }\n\
           else fprintf(out, \"thread %ld %s all %d\\n\", k, when, CPU_COUNT(&s));\n\
           pthread_mutex_unlock(&lock); }\n\
         static void *work(void *a) { long k = (long)a; char *r = region[k / 2]; say(k, \"starts\");\n\
           for (int it = 0; it < 60; it++) for (long p = (k % 2) * 8; p < PAGES * 4096L; p += 4096) r[p] += 1;\n\
           say(k, \"allowed\"); return 0; }\n\
         int main(int argc, char **argv) { out = fopen(argc > 1 ? argv[1] : \"/dev/null\", \"w\");\n\
           for (int k = 0; k < 2; k++) region[k] = malloc(PAGES * 4096L);\n\
           pthread_t t[3]; for (long k = 1; k < 4; k++) pthread_create(&t[k - 1], 0, work, (void *)k);\n\
           work(0); for (int k = 0; k < 3; k++) pthread_join(t[k], 0); fclose(out); return 0; }\n",
    )
    .unwrap();
    let prog = p(&dir, "pairs");
    ok(&["cc", "-O1", s(&src), "-o", s(&prog)]);
    let sm = GUEST_SHAREMAP;
    let bin = "/opt/sharemap/bin/pairs";
    // The measurement runs os, then sammu: the file holds sammu's run.
    let commands = format!(
        "{sm} record --no-aslr -o /tmp/r.trace -- {bin} 2>/dev/null || exit 1\n\
         echo; echo '== simulated'; {sm} simulate /tmp/r.trace --machine live --mechanism os,sammu 2>&1 || exit 1\n\
         echo; echo '== replayed'; {sm} run --no-aslr --mechanism sammu --recording /tmp/r.trace -- {bin} /tmp/threads 2>&1 || exit 1\n\
         echo; echo '== threads'; cat /tmp/threads\n"
    );
    let sections = boot(kernel, &[&prog], &[], &commands);
    let simulated = section(&sections, "simulated");
    let text = section(&sections, "replayed");
    let threads = section(&sections, "threads");
    // The recording's simulation remapped threads and moved pages (columns thr.mig, pg.mig).
    let sammu = simulated.lines().find(|l| l.starts_with("sammu ")).unwrap_or_else(|| panic!("{simulated}"));
    let counts: Vec<&str> = sammu.split_whitespace().collect();
    assert!(counts[7].parse::<u64>().unwrap() > 0 && counts[8].parse::<u64>().unwrap() > 0, "{simulated}");
    // Every remap and page move came due.
    let line = text.lines().find(|l| l.starts_with("sammu: replayed in the order")).unwrap_or_else(|| panic!("{text}"));
    let n: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    // "over S.SSS s: A of R remaps and D of M page moves": the figures after the seconds.
    let (a, r, d, m) = (n[2], n[3], n[4], n[5]);
    assert!(r >= 1 && a == r && m > 0 && d > 0, "{line}");
    // The moves are spread over the baseline's time: a run faster than it (TCG on a loaded
    // host swings by half) ends before the last come due, and the line must say so.
    let all_due = d == m;
    if !all_due {
        assert!(line.contains("ran faster than the time its decisions were spread over"), "{line}");
        eprintln!("note: {d} of {m} page moves came due (the run was faster than the baseline): plan not checked");
    }
    // Each thread began unpinned and ended on one CPU, each pair on one node (CPUs 0-1 on
    // node 0, 2-3 on node 1).
    for k in 0..4 {
        assert!(
            threads.contains(&format!("thread {k} starts all 4")),
            "thread {k} was pinned from its start:\n{threads}"
        );
    }
    let ended = allowed(threads);
    assert_eq!(ended.len(), 4, "{threads}");
    let node = |k: u32| ended[&k] / 2;
    assert!(node(0) == node(1) && node(2) == node(3) && node(0) != node(2), "{ended:?}\n{text}");
    let plan = text.lines().find(|l| l.starts_with("sammu: plan (last run): ")).unwrap_or_else(|| panic!("{text}"));
    let n: Vec<u64> = plan.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    let (planned, touched, on_node) = (n[0], n[1], n[2]);
    assert!(planned > 0 && touched == planned, "{text}");
    if all_due {
        assert!(on_node as f64 >= AT_LEAST * touched as f64, "{text}");
    }
}

/// Two huge-page regions (1024 pages, asked for with madvise) first touched by the main
/// thread on node 0, then waited on while the plan is applied; at the end the program says
/// how many pages lie as planned (page p on node 1 unless p is a multiple of 4).
const THP_MIXED: &str = r#"
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#define PAGES 1024
static int as_planned(char *buf, int *status) {
    void *pages[PAGES];
    for (int p = 0; p < PAGES; p++) pages[p] = buf + p * 4096L;
    if (syscall(SYS_move_pages, 0, PAGES, pages, NULL, status, 0) != 0) return -1;
    int n = 0;
    for (int p = 0; p < PAGES; p++) n += status[p] == (p % 4 != 0);
    return n;
}
int main(void) {
    char *buf = mmap((void *)0x600000000000, PAGES * 4096L, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (buf == MAP_FAILED) return 2;
    madvise(buf, PAGES * 4096L, MADV_HUGEPAGE);
    for (long p = 0; p < PAGES; p++) buf[p * 4096] = 1;
    int status[PAGES];
    for (int waited = 0; waited < 3000 && as_planned(buf, status) < PAGES; waited += 20) usleep(20000);
    printf("as planned %d\n", as_planned(buf, status));
    return 0;
}
"#;

/// A number just before `what` in `text` (`... 256 placed with ...`).
fn count_before(text: &str, what: &str) -> Option<u64> {
    let at = text.find(what)?;
    text[..at].split_whitespace().last()?.parse().ok()
}

/// A plan whose huge-page regions mix homes (3 pages of 4 on node 1, the rest on node 0):
/// with huge pages split, every page lands; placed by region, each region goes to node 1
/// whole and the node-0 pages are counted as placed with their region; kept, pages share
/// huge pages with pages planned elsewhere and the landing rate says so.
#[test]
fn huge_pages_with_mixed_homes_are_split_or_placed_by_region_in_a_two_node_guest() {
    let Some(kernel) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "thp_mixed", THP_MIXED, &[]);
    let plan = p(&dir, "plan.csv");
    let rows: Vec<String> =
        (0..1024u64).map(|i| format!("{:#x},{}", 0x6000_0000_0000u64 + i * 4096, u8::from(i % 4 != 0))).collect();
    std::fs::write(&plan, format!("page,node\n{}\n", rows.join("\n"))).unwrap();
    let run = format!("{GUEST_SHAREMAP} run --thread-map 0 --placement /opt/sharemap/plan.csv");
    let bin = "/opt/sharemap/bin/thp_mixed";
    let commands = format!(
        "echo '== mode'; cat /sys/kernel/mm/transparent_hugepage/enabled\n\
         echo; echo '== split'; {run} -- {bin} || exit 1\n\
         echo; echo '== regions'; {run} --thp regions -- {bin} || exit 1\n\
         echo; echo '== keep'; {run} --thp keep -- {bin} || exit 1\n"
    );
    let sections = boot(kernel, &[&prog], &[(plan.as_path(), "/opt/sharemap/plan.csv")], &commands);
    assert!(!section(&sections, "mode").contains("[never]"), "{}", section(&sections, "mode"));

    let split = section(&sections, "split");
    assert!(split.contains("turned off for the program in every configuration"), "{split}");
    let (planned, touched, on_node) = plan_line(split);
    assert_eq!((planned, touched), (1024, 1024), "{split}");
    assert!(on_node as f64 >= AT_LEAST * 1024.0, "{split}");
    assert_eq!(count_before(split, "in huge pages"), Some(0), "{split}");

    // Both regions want node 1 by 3 to 1: everything goes there.
    let regions = section(&sections, "regions");
    assert!(regions.contains("is placed whole"), "{regions}");
    let (_, touched, on_node) = plan_line(regions);
    assert_eq!(touched, 1024, "{regions}");
    assert_eq!(count_before(regions, "in huge pages"), Some(1024), "the guest gave no huge pages: {regions}");
    assert_eq!(on_node, 768, "{regions}");
    assert_eq!(count_before(regions, "placed with their huge-page region"), Some(256), "{regions}");

    // Kept: each huge page lies on one node, so at most the pages planned there are on theirs.
    let keep = section(&sections, "keep");
    let (_, touched, on_node) = plan_line(keep);
    assert_eq!(touched, 1024, "{keep}");
    assert_eq!(count_before(keep, "in huge pages"), Some(1024), "{keep}");
    assert!(on_node <= 768, "{keep}");
    let off = count_before(keep, "in a huge page that went elsewhere").unwrap_or(0);
    assert_eq!(off, 1024 - on_node, "{keep}");
}

/// `kernel.numa_balancing` after every way a run that switches it can end, in a 2-node
/// guest (where it starts off): a normal end, SIGINT and SIGTERM to sharemap, SIGKILL of the
/// program, a second run while the first owns it (refused in one line), and SIGKILL of
/// sharemap itself, which nothing can catch: the next run puts the value back first.
#[test]
fn numa_balancing_is_restored_on_every_exit_path_in_a_two_node_guest() {
    let Some(kernel) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(
        &dir,
        "sleeper",
        "#include <stdlib.h>\n#include <unistd.h>\nint main(int c, char **v) { usleep(atoi(v[1]) * 1000); return 0; }",
        &[],
    );
    let sm = GUEST_SHAREMAP;
    let value = "cat /proc/sys/kernel/numa_balancing";
    let run = format!("{sm} run --mechanism numa-balancing --repeat 3 -- /opt/sharemap/bin/sleeper");
    // Waits (at most 15 s) until a run has switched it on.
    let until_on =
        format!("for i in $(seq 150); do [ \"$({value})\" = 1 ] && break; sleep 0.1; done; echo \"on $({value})\"");
    let commands = format!(
        "echo '== normal'; {run} 50 >/dev/null 2>&1; echo \"exit $?\"; echo \"after $({value})\"\n\
         echo '== sigint'; {run} 4000 >/dev/null 2>&1 & pid=$!; {until_on}; kill -INT $pid; wait $pid; echo \"exit $?\"; echo \"after $({value})\"\n\
         echo '== sigterm'; {run} 4000 >/dev/null 2>&1 & pid=$!; {until_on}; kill -TERM $pid; wait $pid; echo \"exit $?\"; echo \"after $({value})\"\n\
         echo '== program-killed'; {run} 4000 >/dev/null 2>&1 & pid=$!; {until_on}; kill -9 $(pidof sleeper); wait $pid; echo \"exit $?\"; echo \"after $({value})\"\n\
         echo '== concurrent'; {run} 4000 >/dev/null 2>&1 & pid=$!; {until_on}; {run} 50; echo \"second exit $?\"; wait $pid; echo \"exit $?\"; echo \"after $({value})\"\n\
         echo '== sharemap-killed'; {run} 4000 >/dev/null 2>&1 & pid=$!; {until_on}; kill -9 $pid; wait $pid; echo \"left $({value})\"; kill -9 $(pidof sleeper); {run} 50 >/dev/null 2>&1; echo \"exit $?\"; echo \"after $({value})\"\n"
    );
    let sections = boot(kernel, &[&prog], &[], &commands);
    let line = |text: &str, key: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no '{key}' in {text}"))
            .trim()
            .to_string()
    };
    for name in ["normal", "sigint", "sigterm", "program-killed", "concurrent", "sharemap-killed"] {
        let text = section(&sections, name);
        assert_eq!(line(text, "after "), "0", "{name}: numa_balancing after the run\n{text}");
        if name != "normal" {
            assert_eq!(line(text, "on "), "1", "{name}: the run switched it on\n{text}");
        }
    }
    assert_eq!(line(section(&sections, "normal"), "exit "), "0");
    assert_eq!(line(section(&sections, "sigint"), "exit "), "130");
    assert_eq!(line(section(&sections, "sigterm"), "exit "), "143");
    assert_ne!(line(section(&sections, "program-killed"), "exit "), "0");
    let concurrent = section(&sections, "concurrent");
    assert_eq!(line(concurrent, "exit "), "0", "{concurrent}");
    assert_eq!(line(concurrent, "second exit "), "1", "{concurrent}");
    let refusal: Vec<&str> = concurrent.lines().filter(|l| l.starts_with("sharemap:")).collect();
    assert!(refusal.len() == 1 && refusal[0].contains("another sharemap run (pid "), "{concurrent}");
    let killed = section(&sections, "sharemap-killed");
    assert_eq!(line(killed, "left "), "1", "SIGKILL cannot be caught: {killed}");
    assert_eq!(line(killed, "exit "), "0", "{killed}");
}

/// SIGTERM or SIGINT to `sharemap vm` while the guest runs: QEMU ends with it (it ran on,
/// with its 1 GB guest and no timeout left) and the RAM disk in TMPDIR goes.
#[test]
fn qemu_and_its_ram_disk_go_with_sharemap_vm() {
    let Some(_) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "long", "#include <unistd.h>\nint main(void) { sleep(600); return 0; }", &[]);
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let tmp = tempfile::tempdir().unwrap();
        let mut sm = Command::new(env!("CARGO_BIN_EXE_sharemap"))
            .args(["vm", "--nodes", "2", "--cpus", "2", "--", s(&prog)])
            .env("TMPDIR", tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = sm.id() as i32;
        let qemu = common::child_of(pid, 30, |c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.starts_with("qemu"))
        })
        .expect("QEMU started");
        std::thread::sleep(std::time::Duration::from_millis(500));
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(pid, signal) };
        sm.wait().unwrap();
        assert!(common::ends_within(qemu, 3), "signal {signal}: QEMU outlived sharemap vm");
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "signal {signal}: left behind {left:?}");
    }
}

/// `sharemap vm` as a user runs it: a static program (no actor can be preloaded into it)
/// is observed, its exit status passes through, and a bad guest shape is refused.
#[test]
fn sharemap_vm_runs_a_program_in_a_guest() {
    let Some(_) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prog = build_c(&dir, "static_exit", "int main(void) { return 7; }", &["-static"]);
    let out = common::sharemap(&["vm", "--nodes", "2", "--cpus", "2", "--", s(&prog)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}\n{}", String::from_utf8_lossy(&out.stdout));
    assert!(err.contains("timings inside it mean nothing"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sharemap: thread 0 ") && text.contains("resident pages at exit: node"), "{text}");
    let bad = common::sharemap(&["vm", "--nodes", "2", "--cpus", "3", "--", s(&prog)]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1));
    assert!(err.contains("evenly") && err.lines().count() == 1, "{err}");
}

/// `vm --env` sets the program's environment in the guest (OpenMP's thread count, here).
#[test]
fn vm_passes_the_environment_to_the_program() {
    let Some(_) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let source = "#include <stdlib.h>\n#include <string.h>\n\
                  int main(void) { const char *v = getenv(\"OMP_NUM_THREADS\"); return v && !strcmp(v, \"3 threads\") ? 9 : 1; }";
    let prog = build_c(&dir, "env_check", source, &[]);
    let args = ["vm", "--nodes", "2", "--cpus", "2", "--env", "OMP_NUM_THREADS=3 threads", "--", s(&prog)];
    let out = common::sharemap(&args);
    assert_eq!(out.status.code(), Some(9), "{}", String::from_utf8_lossy(&out.stderr));
    let bad = common::sharemap(&["vm", "--nodes", "2", "--cpus", "2", "--env", "A B=1", "--", s(&prog)]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("is not a variable name"), "{err}");
}

/// STMap's data mapping inside the STM: in a 2-node guest, four workers in two pairs each
/// update their pair's array (first touched interleaved over the nodes); STMap pins each
/// pair on one node, and the pages of each array move to its pair's node (move_pages from
/// inside the program, as the kernel then reports).
#[test]
fn stmap_moves_each_pairs_pages_to_its_node_in_a_two_node_guest() {
    let Some(kernel) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/stm/pairs.c");
    let prog = p(&dir, "pairs");
    let built = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .env("SHAREMAP_COMPILER", "gcc")
        .args(["cc", "--stm", "--no-trace", "-O2", s(&src), "-o", s(&prog), "-pthread"])
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let commands = "echo; echo '== stmap'; SHAREMAP_STMAP_MI=20000 SHAREMAP_STMAP_VERBOSE=1 \
                    /opt/sharemap/bin/pairs 4 400000 8 interleave 2>&1 || exit 1\n";
    let sections = boot(kernel, &[&prog], &[], commands);
    let text = section(&sections, "stmap");
    let node_of = |cpu: i32| if cpu < 2 { 0 } else { 1 };
    let cpus: Vec<i32> = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("worker ").and_then(|r| r.rsplit_once("cpu ")).and_then(|(_, c)| c.trim().parse().ok())
        })
        .collect();
    assert_eq!(cpus.len(), 4, "{text}");
    assert!(cpus.iter().all(|&c| c >= 0), "every worker pinned: {cpus:?}\n{text}");
    let pair_nodes = [node_of(cpus[0]), node_of(cpus[2])];
    assert_eq!(node_of(cpus[1]), pair_nodes[0], "pair 0 on one node\n{text}");
    assert_eq!(node_of(cpus[3]), pair_nodes[1], "pair 1 on one node\n{text}");
    for (array, line) in text.lines().filter(|l| l.starts_with("array ")).enumerate() {
        let n: Vec<u32> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        let on = [n[1], n[2]];
        assert_eq!(
            on[pair_nodes[array]], 8,
            "array {array}'s pages on its pair's node {}: {line}\n{text}",
            pair_nodes[array]
        );
    }
    let moved: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("stmap enabled 1 ")
                .and_then(|r| r.rsplit_once("pages_moved "))
                .and_then(|(_, m)| m.trim().parse().ok())
        })
        .unwrap_or_else(|| panic!("no STMap line\n{text}"));
    assert!(moved >= 4, "half the pages start on the other node: {moved} moved\n{text}");
}

/// Busy threads, the main thread one of them: pthreads (the main thread creates N-1 workers)
/// or OpenMP (a team of N), for the given seconds.
const SPIN: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double seconds;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void *spin(void *arg) {
    (void)arg;
    volatile unsigned long x = 0;
    double end = now() + seconds;
    while (now() < end) for (int i = 0; i < 10000; i++) x++;
    printf("last ran on CPU %d\n", sched_getcpu());
    return NULL;
}
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    seconds = atof(argv[2]);
#ifdef _OPENMP
    #pragma omp parallel num_threads(n)
    spin(NULL);
#else
    pthread_t t[64];
    for (int i = 1; i < n && i < 64; i++) pthread_create(&t[i], NULL, spin, NULL);
    spin(NULL);
    for (int i = 1; i < n && i < 64; i++) pthread_join(t[i], NULL);
#endif
    return 0;
}
"#;

/// Threads per node, from `run --where`'s lines, on a guest of `per_node` CPUs per node.
fn threads_per_node(text: &str, nodes: usize, per_node: usize) -> Vec<usize> {
    let mut count = vec![0; nodes];
    for line in text.lines() {
        if let Some(cpu) = line.split("last ran on CPU ").nth(1).and_then(|r| r.split_whitespace().next()) {
            count[cpu.parse::<usize>().unwrap() / per_node] += 1;
        }
    }
    count
}

/// Threads the guest placed on other nodes than the model, with the nodes renamed at best
/// (where the program started is the shell's choice, not the scheduler's).
fn displaced(model: &[usize], guest: &[usize]) -> usize {
    fn perms(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut out = Vec::new();
        for p in perms(n - 1) {
            for i in 0..n {
                let mut q = p.clone();
                q.insert(i, n - 1);
                out.push(q);
            }
        }
        out
    }
    perms(model.len())
        .iter()
        .map(|p| p.iter().enumerate().map(|(i, &j)| model[i].abs_diff(guest[j])).sum::<usize>() / 2)
        .min()
        .unwrap_or(0)
}

/// The modelled OS (`--thread-map os`, the default placement of place, sweep, filter and
/// simulate's `os`) against Linux itself: 1-16 busy threads, pthreads and OpenMP, unpinned,
/// in guests of 2 nodes x 8 CPUs and 4 nodes x 4 CPUs; threads per node compared.
#[test]
fn the_os_model_places_threads_as_the_guest_kernel_does() {
    let Some(kernel) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pthreads = build_c(&dir, "spin", SPIN, &[]);
    let openmp = build_c(&dir, "spin-omp", SPIN, &["-fopenmp"]);
    let counts: Vec<usize> = (1..=16).collect();
    let (mut runs, mut same, mut moved, mut threads) = (0, 0, 0, 0);
    let mut table = String::new();
    for (nodes, per_node) in [(2, 8), (4, 4)] {
        let mut commands = String::new();
        for n in &counts {
            for (kind, prog) in [("pthreads", "spin"), ("openmp", "spin-omp")] {
                commands.push_str(&format!("echo '== {kind} {n}'; /opt/sharemap/bin/{prog} {n} 1.5 || exit 1\n"));
            }
        }
        let guest = Guest::new(kernel.clone(), nodes, nodes * per_node).unwrap();
        let sections = boot_on(guest, &[&pthreads, &openmp], &[], &commands);
        let machine = sharemap::Machine::from_spec(&format!("pack:{nodes} numa:1 l3:1 core:{per_node} pu:1")).unwrap();
        for n in &counts {
            let mut model = vec![0; nodes];
            for pu in sharemap::map::os_mapping(&machine, *n) {
                model[machine.pu_numa[pu]] += 1;
            }
            for kind in ["pthreads", "openmp"] {
                let seen = threads_per_node(section(&sections, &format!("{kind} {n}")), nodes, per_node);
                assert_eq!(seen.iter().sum::<usize>(), *n, "{kind} {n}: {seen:?}");
                let off = displaced(&model, &seen);
                runs += 1;
                same += usize::from(off == 0);
                moved += off;
                threads += n;
                table.push_str(&format!(
                    "{nodes} nodes {kind:>8} {n:>2}: model {model:?} guest {seen:?} displaced {off}\n"
                ));
            }
        }
    }
    let agreement = same as f64 / runs as f64;
    let placed = 1.0 - moved as f64 / threads as f64;
    eprintln!(
        "{table}node counts agree in {same} of {runs} runs; {:.1} % of threads on the model's node",
        100.0 * placed
    );
    assert!(agreement >= 0.75 && placed >= 0.95, "the model strays from the kernel:\n{table}");
}

/// The guest's verdict comes from its init on a port the program cannot reach, not from the
/// console: a program printing the init's markers gets its own exit status back, and one
/// that claims success and then powers the guest off makes `vm` fail.
#[test]
fn a_program_cannot_forge_the_guests_verdict() {
    let Some(_) = kernel() else { return };
    let dir = tempfile::tempdir().unwrap();
    let liar = "#include <stdio.h>\n\
                int main(void) { printf(\"sharemap-guest: incomplete\\nsharemap-guest: status 0\\n\"); return 5; }";
    let prog = build_c(&dir, "liar", liar, &["-static"]);
    let out = common::sharemap(&["vm", "--nodes", "2", "--cpus", "2", "--", s(&prog)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}\n{}", String::from_utf8_lossy(&out.stdout));
    let crash = "#include <stdio.h>\n#include <unistd.h>\n#include <sys/reboot.h>\n\
                 int main(void) { printf(\"sharemap-guest: status 0\\nsharemap-guest: end\\n\"); fflush(stdout);\n\
                 sync(); reboot(RB_POWER_OFF); return 0; }";
    let prog = build_c(&dir, "crash", crash, &["-static"]);
    let out = common::sharemap(&["vm", "--nodes", "2", "--cpus", "2", "--", s(&prog)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a guest gone before its verdict is a failure: {err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("stopped before")).collect();
    assert_eq!(errors.len(), 1, "one line says the guest stopped before its commands ended: {err}");
}
