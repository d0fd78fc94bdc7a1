//! The command line as a user runs it: exit codes, messages, files left behind.

mod common;
use common::{json, ok, p, s, sharemap};
use sharemap::trace::{Chunk, Event, TraceReader, TraceSource};
use std::path::Path;
use std::process::{Command, Output};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Fails with exactly one line on stderr mentioning `expect`, and a non-zero exit.
fn fails_with(args: &[&str], code: i32, expect: &str) {
    let out = sharemap(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "sharemap {args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line expected, got: {err}");
    assert!(err.contains(expect), "sharemap {args:?}: '{err}' lacks '{expect}'");
    // A cause is said once, not again by each error wrapping it.
    assert!(err.matches("(os error").count() <= 1, "sharemap {args:?}: a cause repeated in '{err}'");
    assert_eq!(err.matches("sharemap:").count(), 1, "sharemap {args:?}: the prefix repeated in '{err}'");
}

fn read_all(path: &Path) -> (Vec<sharemap::trace::Access>, Vec<Event>, sharemap::trace::Metadata) {
    let mut r = TraceReader::open(path, None).unwrap();
    let mut c = Chunk::default();
    let (mut a, mut e) = (Vec::new(), Vec::new());
    while r.next_chunk(&mut c).unwrap() {
        a.extend(c.accesses.iter());
        e.extend(c.events.iter().cloned());
    }
    (a, e, r.metadata().clone())
}

#[test]
fn gen_then_info_reports_exact_counts() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "sor.trace");
    ok(&["gen", "sor", "--threads", "4", "--accesses", "200k", "--seed", "3", "-o", s(&t)]);
    let v = json(&ok(&["info", s(&t), "--json"]));
    assert_eq!(v["accesses"], 200_000);
    assert_eq!(v["threads"], 4);
    assert_eq!(v["reads"].as_u64().unwrap() + v["writes"].as_u64().unwrap(), 200_000);
    assert_eq!(v["per_thread"].as_array().unwrap().len(), 4);
    assert_eq!(v["metadata"]["source"]["name"], "sor");
    assert_eq!(v["metadata"]["page_size"], 4096);
    assert_eq!(v["sharing"]["shared_pages"], 6, "two boundary rows per band boundary");
    assert!(v["pages"].as_u64().unwrap() > 6);
    let per: u64 = v["per_thread"].as_array().unwrap().iter().map(|t| t["accesses"].as_u64().unwrap()).sum();
    assert_eq!(per, 200_000);
    // Text output carries the same numbers.
    let text = String::from_utf8(ok(&["info", s(&t)]).stdout).unwrap();
    assert!(text.contains("accesses   200000"), "{text}");
}

#[test]
fn outputs_get_the_usual_file_mode() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "m.trace");
    ok(&["gen", "private", "--threads", "2", "--accesses", "1000", "-o", s(&t)]);
    let plain = p(&d, "plain");
    std::fs::File::create(&plain).unwrap();
    let mode = |f: &Path| std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&t), mode(&plain), "same mode as a file created under the same umask");
}

#[test]
fn csv_native_csv_round_trip_is_byte_identical() {
    let d = tempfile::tempdir().unwrap();
    let csv = p(&d, "in.csv");
    let mut text = String::from("thread,addr,size,kind\n");
    for i in 0..5000u64 {
        text.push_str(&format!(
            "{},{:#x},{},{}\n",
            i % 5,
            0x7f00_0000_0000u64 + i * 24 % 9000,
            [1, 2, 4, 8, 16, 300][i as usize % 6],
            if i % 3 == 0 { 'W' } else { 'R' }
        ));
    }
    std::fs::write(&csv, &text).unwrap();
    let native = p(&d, "mid.trace");
    let back = p(&d, "back.csv");
    ok(&["convert", s(&csv), s(&native)]);
    ok(&["convert", s(&native), s(&back)]);
    assert_eq!(std::fs::read_to_string(&back).unwrap(), text);
    // Decimal addresses are accepted on import and come back as hex.
    let dec = p(&d, "dec.csv");
    std::fs::write(&dec, "thread,addr,size,kind\n# a comment\n2,4096,8,W\n").unwrap();
    ok(&["convert", s(&dec), s(&p(&d, "dec.trace"))]);
    ok(&["convert", s(&p(&d, "dec.trace")), s(&p(&d, "dec2.csv"))]);
    assert_eq!(std::fs::read_to_string(p(&d, "dec2.csv")).unwrap(), "thread,addr,size,kind\n2,0x1000,8,W\n");
}

#[test]
fn native_parquet_native_round_trip_keeps_events_and_metadata() {
    let d = tempfile::tempdir().unwrap();
    let a = p(&d, "a.trace");
    ok(&["gen", "phase-change", "--threads", "3", "--accesses", "300k", "-o", s(&a)]);
    let pq = p(&d, "a.parquet");
    let b = p(&d, "b.trace");
    ok(&["convert", s(&a), s(&pq)]);
    ok(&["convert", s(&pq), s(&b)]);
    let (acc_a, ev_a, meta_a) = read_all(&a);
    let (acc_b, ev_b, meta_b) = read_all(&b);
    assert_eq!(acc_a, acc_b);
    assert!(ev_a.iter().any(|e| e.kind == sharemap::trace::EventKind::PhaseChange));
    assert_eq!(ev_a, ev_b);
    assert_eq!(meta_a, meta_b);
    // Every command reads every format: info on the Parquet file agrees.
    let va = json(&ok(&["info", s(&a), "--json"]));
    let vp = json(&ok(&["info", s(&pq), "--json"]));
    assert_eq!(va["accesses"], vp["accesses"]);
    assert_eq!(va["sharing"], vp["sharing"]);
    assert_eq!(va["events"], vp["events"]);
}

#[test]
fn din_export_has_one_line_per_access() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "x.trace");
    ok(&["gen", "private", "--threads", "2", "--accesses", "1000", "-o", s(&t)]);
    let din = p(&d, "x.din");
    let out = ok(&["convert", s(&t), s(&din)]);
    assert!(stderr(&out).contains("events"), "dropped events are reported");
    let (acc, _, _) = read_all(&t);
    let lines: Vec<String> = std::fs::read_to_string(&din).unwrap().lines().map(String::from).collect();
    assert_eq!(lines.len(), acc.len());
    for (l, a) in lines.iter().zip(&acc) {
        let expect = format!("{} {:x}", if a.kind == sharemap::trace::Kind::Write { 1 } else { 0 }, a.addr);
        assert_eq!(l, &expect);
    }
    fails_with(&["info", s(&din)], 1, "din");
}

#[test]
fn truncated_trace_is_read_up_to_the_last_complete_chunk() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "big.trace");
    ok(&["gen", "random", "--threads", "4", "--accesses", "500k", "-o", s(&t)]);
    let bytes = std::fs::read(&t).unwrap();
    let cut = p(&d, "cut.trace");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let out = ok(&["info", s(&cut), "--json"]);
    let err = stderr(&out);
    assert!(err.contains("truncated") && err.contains("data ends at byte"), "{err}");
    let v = json(&out);
    assert_eq!(v["file"]["complete"], false);
    let chunks = v["file"]["chunks"].as_u64().unwrap();
    assert!(chunks >= 1 && chunks < 500_000 / sharemap::trace::native::DEFAULT_CHUNK_ACCESSES as u64);
    assert_eq!(v["accesses"].as_u64().unwrap(), chunks * sharemap::trace::native::DEFAULT_CHUNK_ACCESSES as u64);
    let at = v["file"]["truncated_at"].as_u64().unwrap();
    assert!(err.contains(&format!("byte {at}")));
    // Every command reading a trace says so, `map` included.
    for args in [&["map", s(&cut), "-m", "pu:4"][..], &["place", s(&cut), "--policy", "first-touch"][..]] {
        let err = stderr(&ok(args));
        assert!(err.contains("truncated") && err.contains(&format!("byte {at}")), "{args:?}: {err}");
    }
}

#[test]
fn corruption_exits_2_naming_file_and_chunk_offset() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "c.trace");
    ok(&["gen", "neighbor", "--threads", "4", "--accesses", "300k", "-o", s(&t)]);
    let r = sharemap::trace::native::NativeReader::open(&t).unwrap();
    let second = r.chunks()[1].offset;
    let mut bytes = std::fs::read(&t).unwrap();
    bytes[second as usize + 60] ^= 0xff; // inside the second chunk's payload
    std::fs::write(&t, &bytes).unwrap();
    fails_with(&["info", s(&t)], 2, &format!("{}: corrupt chunk (checksum mismatch) at byte {second}", t.display()));
    // A failed conversion leaves no output behind.
    let out = p(&d, "out.csv");
    fails_with(&["convert", s(&t), s(&out)], 2, "corrupt");
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "no temporary file left");
}

#[test]
fn bad_input_gets_one_clear_line() {
    let d = tempfile::tempdir().unwrap();
    let out = p(&d, "o.trace");
    fails_with(&["gen", "nosuch", "-o", s(&out)], 1, "unknown pattern 'nosuch'");
    // A file of no known format: the formats it could be read as (din cannot be read).
    let text = p(&d, "notes.txt");
    std::fs::write(&text, "not a trace\n").unwrap();
    fails_with(&["info", s(&text)], 1, "name it with --from (native, csv, parquet)");
    fails_with(&["gen", "sor", "--threads", "0", "-o", s(&out)], 1, "--threads must be at least 1");
    fails_with(&["gen", "sor", "--page-size", "1000", "-o", s(&out)], 1, "--page-size");
    fails_with(&["gen", "sor", "-o", "/nonexistent/dir/x.trace"], 1, "/nonexistent/dir/x.trace");
    fails_with(&["gen", "sor", "-o", s(&p(&d, "x.unknown"))], 1, "output format");
    assert!(!out.exists());
    let csv = p(&d, "bad.csv");
    std::fs::write(&csv, "thread,addr,size,kind\n0,0x10,8,R\n1,0x20,8,Q\n").unwrap();
    fails_with(&["info", s(&csv)], 1, &format!("{}:3: bad kind 'Q'", csv.display()));
    std::fs::write(&csv, "thread,address\n").unwrap();
    fails_with(&["info", s(&csv)], 1, ":1: expected header");
    fails_with(&["info", s(&p(&d, "missing.trace"))], 1, "missing.trace");
    let junk = p(&d, "junk.trace");
    std::fs::write(&junk, "SHAREMAP but not really").unwrap();
    let o = sharemap(&["info", s(&junk)]);
    assert!(!o.status.success());
    fails_with(&["machine", "pack:2 core:x pu:1"], 1, "bad count 'x'");
    fails_with(&["machine", "nonsense"], 1, "unknown machine 'nonsense'");
    fails_with(&["machine", "/no/such.xml"], 1, "no such file");
    fails_with(&["convert", s(&csv), s(&out), "--to", "xml"], 1, "unknown format 'xml'");
    // Sizes from flags are checked before anything is allocated.
    let t = p(&d, "small.trace");
    ok(&["gen", "neighbor", "--threads", "4", "--accesses", "1k", "-o", s(&t)]);
    fails_with(&["place", s(&t), "--memory-mb", "100000000000"], 1, "--memory-mb: ");
    // The user's number, not what its bytes overflow to.
    fails_with(&["place", s(&t), "--memory-mb", "18446744073709551615"], 1, "--memory-mb: 18446744073709551615 MiB");
    fails_with(&["machine", "numa:1024 pu:1024"], 1, "more than 4096 PUs");
    fails_with(&["gen", "neighbor", "--threads", "5000", "-o", s(&t)], 1, "--threads must be at most 4096");
}

#[test]
fn machine_json_has_the_counts() {
    let v = json(&ok(&["machine", "pack:4 numa:1 l3:1 core:8 pu:2", "--json"]));
    assert_eq!(
        (v["pus"].as_u64(), v["cores"].as_u64(), v["numa_nodes"].as_u64(), v["packages"].as_u64()),
        (Some(64), Some(32), Some(4), Some(4))
    );
    let v = json(&ok(&["machine", "numa:3 pu:1", "--json"]));
    assert_eq!(v["numa_nodes"], 3);
    for preset in ["sammu", "stmap-xeon", "stmap-opteron", "ace", "butterfly", "live"] {
        let v = json(&ok(&["machine", preset, "--json"]));
        assert!(v["pus"].as_u64().unwrap() >= 1);
        assert!(v["cost"]["r"].as_f64().unwrap() > 1.0);
    }
    // hwloc XML files are read too.
    if let Ok(o) = Command::new("lstopo-no-graphics").args(["-i", "pack:2 numa:2 core:2 pu:2", "--of", "xml"]).output()
    {
        let d = tempfile::tempdir().unwrap();
        let x = p(&d, "topo.xml");
        std::fs::write(&x, &o.stdout).unwrap();
        let v = json(&ok(&["machine", s(&x), "--json"]));
        assert_eq!((v["pus"].as_u64(), v["numa_nodes"].as_u64()), (Some(16), Some(4)));
    }
}

/// By default the demo's patterns have their paper-like footprints (8 threads of 1024 pages:
/// 8192 pages, past a core's 576 TLB entries), and a policy that moved no page says so.
#[test]
fn demo_defaults_to_paper_like_footprints() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap")).args(["demo", "--dir"]).arg(d.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("paper-like footprint (1024 pages per thread") && !text.contains("toy sizes"), "{text}");
    let pages = |pattern: &str| -> u64 {
        let row = text.lines().find(|l| l.split_whitespace().next() == Some(pattern)).unwrap();
        row.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(pages("neighbor"), 8 * 1024, "{text}");
    assert_eq!(pages("private"), 8 * 1024, "{text}");
    // A moving policy that never moved is named, never left to look like a choice.
    let placement = &text[text.find("Data placement").unwrap()..];
    let table: Vec<&str> = placement.lines().take_while(|l| !l.starts_with("Reading:")).collect();
    if let Some(line) = table.iter().find(|l| l.starts_with("(moved or copied no page")) {
        assert!(line.contains("sammu") == line.contains("NT = 10"), "{line}");
    }
}

#[test]
fn demo_runs_and_shows_every_pattern_and_the_sammu_machine() {
    // Run where a new user would, without --dir: its files stay in ./sharemap-demo.
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sharemap"))
        .args(["demo", "--accesses", "100k", "--report"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let kept = d.path().join("sharemap-demo");
    assert!(text.contains("Written to sharemap-demo/ (kept"), "{text}");
    assert!(kept.join("sor.trace").is_file() && text.contains(" .trace: "), "{text}");
    // A directory of the user's is not written over.
    let theirs = d.path().join("mine");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("notes.txt"), "mine").unwrap();
    fails_with(&["demo", "--dir", s(&theirs)], 1, "is not empty and is not a previous demo's");
    for p in [
        "private",
        "neighbor",
        "all-to-all",
        "sor",
        "matmult",
        "producer-consumer",
        "migratory",
        "read-mostly",
        "phase-change",
        "init-then-compute",
        "random",
    ] {
        assert!(text.contains(p), "demo lacks {p}");
    }
    assert!(text.contains("sammu-x7550") && text.contains("64 PUs, 32 cores, 4 packages, 4 NUMA nodes"));
    // The machine comes first; every section ends with its reading; 3-5 takeaways end it.
    let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("demo lacks {needle}: {text}"));
    assert!(at("64 PUs, 32 cores") < at("pattern "), "the machine is described first");
    assert!(text.lines().filter(|l| l.trim_start().starts_with("Reading: ")).count() >= 3, "{text}");
    let takeaways = &text[at("What to take away:")..];
    let numbered =
        takeaways.lines().filter(|l| l.trim_start().chars().next().is_some_and(|c| c.is_ascii_digit())).count();
    assert!((3..=5).contains(&numbered), "{numbered} takeaways: {takeaways}");
    // A seed's number never stands alone: its paper's short name is beside it.
    let names = ["SAMMU", "Marathe & Mueller", "STMap", "Marchetti et al.", "Bolosky & Scott"];
    for (i, _) in text.match_indices("seed 00") {
        let before = &text[i.saturating_sub(30)..i];
        assert!(
            names.iter().any(|n| before.contains(n)),
            "a bare seed reference: ...{}",
            &text[i.saturating_sub(30)..i + 8]
        );
    }
    // The report beside the rest.
    let report = std::fs::read_to_string(kept.join("report.html")).unwrap();
    assert!(report.contains("<section id=\"placement\">") && text.contains("The report: sharemap-demo/report.html"));
    // The placement table says its time scale, and on init-then-compute the time-driven
    // policies act within the trace: they no longer tie with `bind`.
    assert!(text.contains("each trace's references spread over 10 s of run"), "{text}");
    assert!(text.contains("100000 accesses each") && text.contains("not the papers' scale"), "{text}");
    let header = text.lines().find(|l| l.starts_with("policy ") && l.contains("init-cmp")).unwrap();
    let column = header.split_whitespace().position(|c| c == "init-cmp").unwrap();
    let mcpr = |policy: &str| -> f64 {
        let row = text.lines().find(|l| l.split_whitespace().next() == Some(policy)).unwrap();
        row.split_whitespace().nth(column).unwrap().parse().unwrap()
    };
    for policy in ["numa-balancing", "carrefour"] {
        assert!((mcpr(policy) - mcpr("bind")).abs() > 0.05, "{policy} ties with bind: {header}");
    }
    // A real program built with `sharemap cc` and recorded (scripts/test requires clang;
    // elsewhere it may be skipped, with a word).
    assert!(text.contains("A real program"));
    if common::Need::Clang.required() {
        assert!(text.contains("recorded with 8 threads"), "{text}");
        // Simulated under every mechanism, with the plots named.
        assert!(text.contains("Simulated on sammu-x7550"), "{text}");
        for m in [
            "oracle ",
            "sammu:period-ms=",
            "autopin:probation-ms=",
            "kmaf:0.05,0.05 = kmaf:window-ms=",
            "stencil3d-simulated-time",
        ] {
            assert!(text.contains(m), "demo's simulation lacks {m}: {text}");
        }
        // What is shared, by name: the grid's arrays, at their allocation's line.
        assert!(text.contains("What is shared, by name") && text.contains("calloc at stencil3d.c:"), "{text}");
        // Then what to use, as `sharemap advise` says it.
        assert!(
            text.contains("What to use (`sharemap advise`: 9 candidates") && text.contains("\n  verdict  "),
            "{text}"
        );
    }
    // Real runs: os against the sharing-aware mapping on this host, then the program in a
    // 2-node guest (scripts/test requires the guest).
    assert!(text.contains("Real runs"), "{text}");
    if common::Need::Guest.required() {
        assert!(text.contains("os against its sharing-aware mapping") && text.contains("vs os"), "{text}");
        // The host comes first, and the difference says whether it is noise.
        assert!(text.contains("Real runs on this host (") && text.contains("difference from os"), "{text}");
        assert!(text.contains("In a 2-node guest") && text.contains("allowed CPUs"), "{text}");
        assert!(text.contains("resident pages at exit: node 0"), "{text}");
        assert!(text.contains("workloads/pipeline.c") && text.contains("the one CPU the mapping allowed it"), "{text}");
    }
    // The STM: the first and last remaps, the last decision, the final pins, and the
    // matrix's rows named (the main thread's among them).
    if common::Need::Clang.required() {
        for m in ["first remap:", "last decision:", "final pins: worker 0", "the main thread (it registers at the end"]
        {
            assert!(text.contains(m), "demo's STM section lacks {m}: {text}");
        }
    }
}

/// A writer stopped by SIGTERM or SIGINT removes its temporary file; a failed `analyze`
/// leaves no directory; an output keeps its mode; a device is written, never replaced;
/// `convert` refuses to write over its input.
#[test]
fn stopped_or_failed_runs_leave_nothing_and_outputs_respect_what_they_replace() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let d = tempfile::tempdir().unwrap();
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let out = p(&d, "big.trace");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sharemap"))
            .args(["gen", "all-to-all", "--accesses", "2G", "-o", s(&out)])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let partial = || {
            std::fs::read_dir(d.path()).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".partial"))
        };
        let start = std::time::Instant::now();
        while !partial() && start.elapsed().as_secs() < 30 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        // SAFETY: kill only sends a signal to the child started above.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(128 + sig), "exit status after signal {sig}");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "left files after signal {sig}");
    }

    let bad = p(&d, "bad.csv");
    std::fs::write(&bad, "thread,addr,size,kind\n1,0x10,8,R\n5000,0x10,8,R\n").unwrap();
    fails_with(&["analyze", s(&bad), "-o", s(&p(&d, "out"))], 1, "bad.csv:3: bad thread '5000'");
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "analyze left a directory or temporary");

    let t = p(&d, "t.trace");
    ok(&["gen", "migratory", "--accesses", "1k", "-o", s(&t)]);
    std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o600)).unwrap();
    ok(&["gen", "migratory", "--accesses", "2k", "-o", s(&t)]);
    assert_eq!(std::fs::metadata(&t).unwrap().permissions().mode() & 0o777, 0o600);
    fails_with(&["convert", s(&t), s(&t), "--to", "csv"], 1, "the output is the input file");
    assert_eq!(read_all(&t).0.len(), 2000, "the input is untouched");

    ok(&["convert", s(&t), "/dev/null", "--to", "csv"]);
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
}

/// `sharemap list KIND` lists each kind as its older command or flag does, and names every
/// row of the library's registries.
#[test]
fn list_gives_every_kind_as_the_older_commands_do() {
    let same = [
        ("policies", vec!["policies"]),
        ("detectors", vec!["detectors"]),
        ("algorithms", vec!["algorithms"]),
        ("mechanisms", vec!["mechanisms"]),
        ("simulator", vec!["simulate", "--list"]),
        ("patterns", vec!["gen", "--list"]),
        ("machines", vec!["machine", "--list"]),
    ];
    for (kind, older) in same {
        let listed = ok(&["list", kind]).stdout;
        assert!(!listed.is_empty(), "list {kind} is empty");
        assert_eq!(String::from_utf8_lossy(&listed), String::from_utf8_lossy(&ok(&older).stdout), "list {kind}");
    }
    let policies = String::from_utf8(ok(&["list", "policies"]).stdout).unwrap();
    for row in sharemap::registry::rows(sharemap::registry::Kind::Policy) {
        assert!(policies.lines().any(|l| l.starts_with(&format!("{} ", row.name))), "{} not listed", row.name);
    }
    let err = String::from_utf8(sharemap(&["list", "nothing"]).stderr).unwrap();
    assert!(err.contains("policies") && err.contains("machines"), "{err}");
}

/// More threads than PUs: `map`'s table of sharing by level has a value under every level
/// for every mapping (compact, which puts no pair on one PU, used to lose its PU column and
/// shift its values left under the wrong levels).
#[test]
fn map_lines_up_the_sharing_by_level_of_every_mapping() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "m8.trace");
    ok(&["gen", "neighbor", "--threads", "8", "--accesses", "20k", "-o", s(&t)]);
    let out = ok(&["map", s(&t), "--machine", "pack:2 numa:1 l3:1 core:2 pu:1", "--algo", "sharemap,compact"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let table: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("sharing kept")).skip(1).take(3).collect();
    assert!(table[0].split_whitespace().eq(["algorithm", "PU", "L3Cache", "Machine"]), "{text}");
    for row in &table[1..] {
        assert_eq!(row.split_whitespace().count(), 4, "{text}");
    }
    let compact: Vec<&str> = table[2].split_whitespace().collect();
    assert_eq!((compact[0], compact[1]), ("compact", "0.0"), "{text}");
}

/// One way to list and one syntax: `list KIND` for every kind (the old forms still work and
/// say so); every registry lists its options as NAME:KEY=VALUE; a mistyped name or option
/// gets the closest one; SAMMU's old `bits` still sets its counters, with a note.
#[test]
fn one_way_to_list_one_syntax_and_suggestions_for_typos() {
    let text = |o: &std::process::Output| {
        (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    for (old, kind) in [
        (&["policies"][..], "policies"),
        (&["detectors"][..], "detectors"),
        (&["algorithms"][..], "algorithms"),
        (&["mechanisms"][..], "mechanisms"),
        (&["gen", "--list"][..], "patterns"),
        (&["machine", "--list"][..], "machines"),
        (&["reproduce", "--list"][..], "claims"),
    ] {
        let (new_out, new_err) = text(&ok(&["list", kind]));
        let (old_out, old_err) = text(&ok(old));
        assert_eq!(old_out, new_out, "{old:?} lists what `list {kind}` lists");
        assert!(new_err.is_empty(), "{new_err}");
        assert!(old_err.contains(&format!("is `sharemap list {kind}`")), "{old:?}: {old_err}");
    }
    let (mechanisms, _) = text(&ok(&["list", "mechanisms"]));
    assert!(mechanisms.contains("sharemap run --mechanism") && mechanisms.contains("sharemap simulate --mechanism"));
    assert!(mechanisms.contains("numa-balancing:scan-period-ms="), "{mechanisms}");
    let (policies, _) = text(&ok(&["list", "policies"]));
    assert!(policies.contains("sammu:nc=4") && !policies.contains("--set sammu."), "{policies}");

    let dir = tempfile::tempdir().unwrap();
    let t = p(&dir, "t.trace");
    ok(&["gen", "neighbor", "--threads", "4", "--accesses", "20k", "-o", s(&t)]);
    for (args, says) in [
        (&["place", s(&t), "--policy", "first-tuch"][..], "did you mean 'first-touch'?"),
        (&["place", s(&t), "--set", "sammu.ncc=3"][..], "did you mean 'nc'?"),
        (&["analyze", s(&t), "--detector", "stmp", "-o", s(&p(&dir, "a"))][..], "did you mean 'stmap'?"),
        (&["map", s(&t), "--algo", "eagremap"][..], "did you mean 'eagermap'?"),
        (&["simulate", s(&t), "--mechanism", "carefour"][..], "did you mean 'carrefour'?"),
        (&["gen", "neighbour", "-o", s(&p(&dir, "g.trace"))][..], "did you mean 'neighbor'?"),
        (&["machine", "samu"][..], "did you mean 'sammu'?"),
        (&["reproduce", "--claim", "first-touch-locl"][..], "did you mean 'first-touch-local'?"),
        (&["place", s(&t), "--thread-map", "compat"][..], "did you mean 'compact'?"),
        (&["simulate", s(&t), "--param", "walk_n=3"][..], "did you mean 'walk-ns'?"),
        (&["place", s(&t), "--policy", "all,first-tuch"][..], "did you mean 'first-touch'?"),
    ] {
        let out = sharemap(args);
        let (_, err) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says) && err.lines().count() == 1, "{args:?}: {err}");
    }
    // `all` anywhere in a list: the whole set, a spec given twice once.
    let rows = |list: &str| {
        common::json(&ok(&["place", s(&t), "--policy", list, "--json"]))["policies"].as_array().map(Vec::len)
    };
    assert_eq!(rows("all,first-touch"), rows("all"));
    assert_eq!(rows("round-robin,all"), rows("all"));
    // The old spelling of SAMMU's counter width: the same result, and a note.
    let run = |set: &str| text(&ok(&["place", s(&t), "--policy", "sammu", "--set", set, "--json"]));
    let (old, note) = run("sammu.bits=2");
    let (new, quiet) = run("sammu.nc=2");
    assert_eq!(old, new);
    assert!(note.contains("'bits' is now spelt 'nc'") && !quiet.contains("spelt"), "{note}");
}

/// Values out of range, and comma lists with an empty item, are refused in one line naming
/// the flag: never taken silently (wrapped, clamped or skipped).
#[test]
fn values_out_of_range_and_empty_list_items_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "v.trace");
    ok(&["gen", "sor", "--threads", "2", "--accesses", "2k", "-o", s(&t)]);
    let out_csv = p(&d, "out.csv");
    let empty_access = p(&d, "empty-access.csv");
    std::fs::write(&empty_access, "thread,addr,size,kind\n0,0x1000,8,R\n1,0x2000,0,W\n").unwrap();
    let long_map = vec!["0"; 30_000].join(",");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["place", s(&t), "--machine", "numa:2 pu:2", "--thread-map", "1,,0"], "item 2 of the comma list is empty"),
        (vec!["convert", s(&t), s(&out_csv), "--exclude", ","], "item 1 of the comma list is empty"),
        (vec!["place", s(&t), "--policy", "first-touch,,ace"], "item 2 of the comma list is empty"),
        (
            vec!["sweep", s(&t), "--vary", "G", "--values", "1,,2", "-o", s(&out_csv)],
            "item 2 of the comma list is empty",
        ),
        (vec!["place", s(&t), "--memory-mb", "0"], "expected at least 16 MiB"),
        (vec!["place", s(&t), "--refs-per-ms", "1e308"], "1e308: expected references per ms"),
        (
            vec!["place", s(&t), "--policy", "numa-balancing", "--set", "numa-balancing.scan-period-ms=1e308"],
            "'1e308': expected a positive number of at most 1e12",
        ),
        // Model caches and TLBs that would not fit in memory (the process aborted on them).
        (
            vec!["place", s(&t), "--policy", "first-n-fills:fills-kb=999999999999"],
            "'999999999999': expected an integer from 0 to 65536",
        ),
        (
            vec!["analyze", s(&t), "--detector", "sampled:cache=99999999999999", "-o", s(&out_csv)],
            "cache must be an integer from 1 to 65536",
        ),
        (vec!["place", s(&t), "--policy", "bind:node=70000"], "'70000': expected an integer from 0 to 65535"),
        (vec!["info", s(&empty_access)], "empty-access.csv:3: bad size '0'"),
        (vec!["run", "--thread-map", &long_map, "--", "/bin/true"], "30000 PUs listed"),
    ];
    for (args, why) in cases {
        let o = sharemap(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} was accepted");
        assert_eq!(err.lines().filter(|l| l.contains(why)).count(), 1, "{args:?}: {err}");
        assert!(!out_csv.exists(), "{args:?} wrote an output");
    }
}
