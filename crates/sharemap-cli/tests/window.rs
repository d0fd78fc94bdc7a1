//! Regions of interest, phases and windows as a user meets them: a trace whose sharing
//! outside its region of interest is the opposite of the sharing inside, so every command
//! that reads the region (the default when the trace marks one) gives another answer than
//! with `--no-roi`; and the flags' bad input.

mod common;
use common::{json, ok, p, s, sharemap};
use sharemap::trace::{Access, EventKind, Metadata, TraceWriter};
use std::path::Path;

/// Four threads on two packages of two cores. Before the region of interest (phase 1,
/// "setup"), threads 0 and 2 write one block of lines in turn, and 1 and 3 another: 24,000
/// accesses. Inside it (phase 2, "solve"), 0 and 1 share, and 2 and 3: 8,000. After it, a
/// serial check by thread 0 reads everything: 2,000.
const BEFORE: u64 = 24_000;
const INSIDE: u64 = 8_000;
const AFTER: u64 = 2_000;
const MACHINE: &str = "pack:2 numa:1 l3:1(size=1MiB) l2:2(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";

fn write_trace(path: &Path, marks: bool) {
    let mut w = TraceWriter::create(path, None, Metadata::default()).unwrap();
    let line = |block: u64, i: u64| 0x10_0000 + block * 0x1_0000 + 64 * (i % 64);
    if marks {
        w.event(0, EventKind::PhaseChange, 1, "setup").unwrap();
    }
    for i in 0..BEFORE {
        let t = [0, 2, 1, 3][(i % 4) as usize];
        w.access(Access::write(t, line(u64::from(t % 2), i / 4), 8)).unwrap();
    }
    if marks {
        w.event(0, EventKind::RoiBegin, 0, "").unwrap();
        w.event(0, EventKind::PhaseChange, 2, "solve").unwrap();
    }
    for i in 0..INSIDE {
        let t = (i % 4) as u32;
        w.access(Access::write(t, line(2 + u64::from(t / 2), i / 4), 8)).unwrap();
    }
    if marks {
        w.event(0, EventKind::RoiEnd, 0, "").unwrap();
        w.event(0, EventKind::PhaseChange, 3, "check").unwrap();
    }
    for i in 0..AFTER {
        w.access(Access::read(0, line(i % 4, i), 8)).unwrap();
    }
    w.finish().unwrap();
}

/// Which thread shares with thread 0 on one package in `map`'s mapping.
fn partner_of_0(out: &std::process::Output) -> usize {
    let v = json(out);
    let mapping: Vec<u64> = v[0]["mapping"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
    let package = |t: usize| mapping[t] / 2;
    (1..4).find(|&t| package(t) == package(0)).unwrap()
}

#[test]
fn the_region_of_interest_is_what_the_analyses_read_by_default_and_changes_their_answer() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "roi.trace");
    write_trace(&t, true);

    // map: inside the region 0 shares with 1; over the whole trace, with 2.
    let roi = ok(&["map", s(&t), "--machine", MACHINE, "--json"]);
    let said = String::from_utf8_lossy(&roi.stderr);
    assert!(
        said.contains("reading the region of interest (sharemap_roi_begin/end): 8,000 of 34,000 accesses (23.5 %); --no-roi reads the whole trace"),
        "{said}"
    );
    assert_eq!(partner_of_0(&roi), 1);
    let whole = ok(&["map", s(&t), "--machine", MACHINE, "--json", "--no-roi"]);
    assert!(!String::from_utf8_lossy(&whole.stderr).contains("reading"));
    assert_eq!(partner_of_0(&whole), 2);
    // The same part asked for by phase, by name or number, and by positions.
    for part in [&["--roi"][..], &["--phase", "solve"], &["--phase", "2"], &["--window", "24000-32000"]] {
        let out = ok(&[&["map", s(&t), "--machine", MACHINE, "--json"][..], part].concat());
        assert_eq!(partner_of_0(&out), 1, "{part:?}");
    }
    assert_eq!(partner_of_0(&ok(&["map", s(&t), "--machine", MACHINE, "--json", "--phase", "setup"])), 2);

    // analyze: the pairs of the region alone.
    let top_pair = |extra: &[&str]| {
        let out = p(&d, &format!("a{}", extra.len()));
        let text = String::from_utf8(
            ok(&[&["analyze", s(&t), "--machine", MACHINE, "-o", s(&out)][..], extra].concat()).stdout,
        )
        .unwrap();
        text.lines()
            .find_map(|l| l.trim().strip_prefix("threads ").map(|rest| rest.split(':').next().unwrap().to_string()))
            .unwrap()
    };
    assert_eq!(top_pair(&[]), "0 and 1");
    assert_eq!(top_pair(&["--no-roi"]), "0 and 2");

    // simulate and place count the region's accesses only.
    let v = json(&ok(&["simulate", s(&t), "--machine", MACHINE, "--mechanism", "os", "--json"]));
    assert_eq!(v["mechanisms"][0]["accesses"], INSIDE);
    let v = json(&ok(&["simulate", s(&t), "--machine", MACHINE, "--mechanism", "os", "--json", "--no-roi"]));
    assert_eq!(v["mechanisms"][0]["accesses"], BEFORE + INSIDE + AFTER);
    let v = json(&ok(&["place", s(&t), "--machine", MACHINE, "--policy", "first-touch", "--json"]));
    assert_eq!(v["accesses"], INSIDE);
    // The pages of the region were first touched before it, by other threads for half of
    // them: the user is told first-touch inside the window homes them elsewhere.
    let out = ok(&["place", s(&t), "--machine", MACHINE, "--policy", "first-touch", "--window", "24000-"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("reading accesses 24000-34000: 10,000 of 34,000 accesses (29.4 %)\n"), "{said}");

    // info shows the whole trace, and where its region is.
    let text = String::from_utf8(ok(&["info", s(&t)]).stdout).unwrap();
    assert!(text.contains("roi        accesses 24000-32000: 23.5 % of the trace"), "{text}");
    let v = json(&ok(&["info", s(&t), "--json"]));
    assert_eq!((v["accesses"].as_u64(), v["region_of_interest"]["accesses"].as_u64()), (Some(34_000), Some(INSIDE)));

    // convert copies the whole trace unless told to keep a part.
    let part = p(&d, "part.trace");
    ok(&["convert", s(&t), s(&part), "--phase", "check"]);
    assert_eq!(json(&ok(&["info", s(&part), "--json"]))["accesses"], AFTER);
    let all = p(&d, "all.trace");
    ok(&["convert", s(&t), s(&all)]);
    assert_eq!(json(&ok(&["info", s(&all), "--json"]))["accesses"], BEFORE + INSIDE + AFTER);
}

/// Pages whose first touch before the window was another thread's than inside it are
/// counted and said.
#[test]
fn a_window_says_when_the_os_homed_its_pages_by_an_earlier_first_touch() {
    let d = tempfile::tempdir().unwrap();
    let t = p(&d, "roi.trace");
    let mut w = TraceWriter::create(&t, None, Metadata::default()).unwrap();
    // Thread 0 initialises pages 0-9 serially; inside the region thread 1 takes pages 0-4
    // and thread 0 pages 5-9, and thread 1 touches page 10 first.
    for page in 0..10u64 {
        w.access(Access::write(0, page << 12, 8)).unwrap();
    }
    w.event(0, EventKind::RoiBegin, 0, "").unwrap();
    for page in 0..11u64 {
        w.access(Access::read(u32::from(!(5..10).contains(&page)), page << 12, 8)).unwrap();
    }
    w.finish().unwrap();
    let out = ok(&["simulate", s(&t), "--machine", MACHINE, "--mechanism", "os"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(
            "5 of the 11 pages it touches were first touched before it by another thread: first-touch inside the window homes them elsewhere than the OS did"
        ),
        "{said}"
    );
}

#[test]
fn bad_windows_are_refused_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let (marked, plain) = (p(&d, "roi.trace"), p(&d, "plain.trace"));
    write_trace(&marked, true);
    write_trace(&plain, false);
    let one_line = |args: &[&str], expect: &str| {
        let out = sharemap(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
    };
    let plain_s = s(&plain).to_string();
    one_line(
        &["map", &plain_s, "--roi"],
        "plain.trace: the trace has no region of interest (its program never called sharemap_roi_begin)",
    );
    one_line(
        &["simulate", s(&marked), "--phase", "9"],
        "roi.trace: no phase '9' in the trace; its phases: 1 (setup), 2 (solve), 3 (check)",
    );
    one_line(&["place", &plain_s, "--phase", "2"], "the trace has no phases");
    one_line(&["analyze", s(&marked), "--window", "9-3", "-o", s(&p(&d, "x"))], "--window '9-3': the window is empty");
    one_line(&["map", s(&marked), "--window", "1M-"], "--window 1M-: ");
    one_line(&["map", s(&marked), "--roi", "--no-roi"], "cannot be used with");
    // A matrix file has no region to read.
    let matrix = p(&d, "comm.csv");
    std::fs::write(&matrix, "0,5\n5,0\n").unwrap();
    one_line(&["map", s(&matrix), "--no-roi"], "a sharing matrix has no accesses to leave out");
    // Without marks the whole trace is read, and nothing is said of it.
    let out = ok(&["map", &plain_s, "--machine", MACHINE, "--json"]);
    assert!(String::from_utf8_lossy(&out.stderr).is_empty());
    assert_eq!(partner_of_0(&out), 2);
}
