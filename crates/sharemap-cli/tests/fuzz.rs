//! Hostile inputs, as a fuzzer makes them: traces (native, CSV, Parquet), sharing matrices,
//! machine strings and hwloc XML, each damaged by one seeded mutation and given to every
//! command that reads it; the option grammars of `run`, `vm` (checked, not booted) and
//! `simulate` with hostile values; and a traced program scribbling on the region it shares
//! with `record`. Every run must end, within a memory limit, with exit 0 or a clear
//! error (lines that start with "sharemap:", none echoing a whole input), never a panic or a
//! signal, and leave no temporary file or half-written output behind.
//!
//! CI runs a bounded slice (`SHAREMAP_FUZZ_CASES`, default 40 cases per input kind, about
//! 1,000 command runs); `scripts/fuzz` runs many more, with other seeds
//! (`SHAREMAP_FUZZ_SEED`), optionally on another binary (`SHAREMAP_FUZZ_BIN`). A failure names the case; the input is
//! kept under target/fuzz-failures for reproduction.

mod common;
use common::{json, ok, p, s};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Address space a run may use: ample for these small inputs, far below what a size taken
/// unchecked from a file would ask for.
const MEMORY_LIMIT: u64 = 4 << 30;
const TIME_LIMIT: Duration = Duration::from_secs(60);

fn cases() -> u64 {
    std::env::var("SHAREMAP_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(40)
}

/// The binary under test: this build's, or `SHAREMAP_FUZZ_BIN` (to fuzz an installed one).
fn binary() -> PathBuf {
    std::env::var_os("SHAREMAP_FUZZ_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_sharemap")), PathBuf::from)
}

fn seed() -> u64 {
    std::env::var("SHAREMAP_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// Runs sharemap under the limits; returns (exit code, stderr) or panics naming the failure.
fn run(case: &str, input: &Path, args: &[&str], workdir: &Path) -> (i32, String) {
    let mut cmd = Command::new(binary());
    cmd.args(args).current_dir(workdir).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: MEMORY_LIMIT, rlim_max: MEMORY_LIMIT };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("run sharemap");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        text
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            fail(case, input, args, "did not finish within the time limit");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let err = String::from_utf8_lossy(&reader.join().unwrap()).to_string();
    if let Some(sig) = status.signal() {
        fail(case, input, args, &format!("killed by signal {sig}: {err}"));
    }
    let code = status.code().unwrap();
    if code == 101 {
        fail(case, input, args, &format!("panicked: {err}"));
    }
    if code != 0 {
        let lines: Vec<&str> = err.lines().collect();
        let clear = !lines.is_empty()
            && lines.len() <= 3
            && lines.iter().all(|l| l.starts_with("sharemap:") && l.chars().count() <= 500);
        if !clear {
            fail(case, input, args, &format!("exit {code} without one clear line: {}", &err[..err.len().min(2000)]));
        }
    }
    (code, err)
}

/// Where the input of a failing case is kept: target/fuzz-failures.
fn failures_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("fuzz-failures")
}

fn fail(case: &str, input: &Path, args: &[&str], what: &str) -> ! {
    let keep = failures_dir();
    let _ = std::fs::create_dir_all(&keep);
    let kept = keep.join(format!("{case}-{}", input.file_name().unwrap().to_string_lossy()));
    let _ = std::fs::copy(input, &kept);
    panic!("case {case}: sharemap {args:?} {what} (input kept as {})", kept.display());
}

/// Nothing temporary or half-written is left in `dir` after a run; `outputs` exist only if
/// the run succeeded.
fn check_leftovers(case: &str, input: &Path, args: &[&str], dir: &Path, code: i32, outputs: &[&Path]) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.contains(".partial") {
            fail(case, input, args, &format!("left {name} behind"));
        }
    }
    for out in outputs {
        if code != 0 && out.exists() {
            fail(case, input, args, &format!("failed but left {}", out.display()));
        }
    }
}

/// Every command that reads a trace, on one (possibly damaged) trace file.
fn trace_commands(case: &str, trace: &Path, dir: &Path) {
    let t = s(trace);
    let out_dir = dir.join("analysis");
    let converted = dir.join("converted.csv");
    let placement = dir.join("placement.csv");
    let runs: Vec<(Vec<&str>, Vec<&Path>)> = vec![
        (vec!["info", t], vec![]),
        (vec!["info", t, "--json"], vec![]),
        (vec!["analyze", t, "--machine", "numa:2 pu:4", "-o", s(&out_dir)], vec![&out_dir]),
        (vec!["analyze", t, "--machine", "numa:2 pu:4", "--detector", "sammu", "-o", s(&out_dir)], vec![&out_dir]),
        (vec!["map", t, "--machine", "numa:2 pu:4"], vec![]),
        (vec!["place", t, "--machine", "numa:2 pu:2", "--placement", s(&placement)], vec![&placement]),
        (vec!["simulate", t, "--machine", "pack:2 numa:1 l2:1(size=4KiB) core:2 pu:1"], vec![]),
        (vec!["convert", t, s(&converted)], vec![&converted]),
    ];
    for (args, outputs) in runs {
        let (code, _) = run(case, trace, &args, dir);
        check_leftovers(case, trace, &args, dir, code, &outputs);
        for o in outputs {
            if o.is_dir() {
                std::fs::remove_dir_all(o).unwrap();
            } else if o.exists() {
                std::fs::remove_file(o).unwrap();
            }
        }
    }
}

/// A small native trace with several chunks and events (gen writes 16,384 accesses a chunk).
fn base_trace(dir: &Path, name: &str, pattern: &str) -> Vec<u8> {
    let path = dir.join(name);
    ok(&["gen", pattern, "--threads", "4", "--accesses", "40k", "-o", s(&path)]);
    std::fs::read(path).unwrap()
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().unwrap())
}

/// Offsets of the chunk headers of a native trace.
fn chunk_offsets(b: &[u8]) -> Vec<usize> {
    let mut at = 20 + u32_at(b, 12) as usize;
    let mut out = Vec::new();
    while at + 40 <= b.len() && &b[at..at + 4] == b"SMCK" {
        out.push(at);
        at += 40 + u32_at(b, at + 8) as usize;
    }
    out
}

/// Sets a chunk header's checksum for its (edited) fields, as a crafted file would.
fn reseal_chunk(b: &mut [u8], at: usize) {
    let crc = crc32fast::hash(&b[at + 8..at + 40]);
    b[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
}

const EXTREMES: [u64; 8] = [0, 1, 0xFFFF_FFFF, 0x7FFF_FFFF, (1 << 24) + 1, 4096, 4097, 1 << 31];

/// One damage to a native trace; the name says which.
fn mutate_native(base: &[u8], rng: &mut ChaCha8Rng) -> (String, Vec<u8>) {
    let mut b = base.to_vec();
    let chunks = chunk_offsets(&b);
    match rng.gen_range(0..8) {
        0 => {
            let i = rng.gen_range(0..b.len());
            b[i] ^= 1 << rng.gen_range(0..8);
            (format!("flip-{i}"), b)
        }
        1 => {
            let n = rng.gen_range(0..b.len());
            b.truncate(n);
            (format!("truncate-{n}"), b)
        }
        2 => {
            // A field of a chunk header set to an extreme value, with a valid checksum.
            let at = chunks[rng.gen_range(0..chunks.len())];
            let field = [8, 12, 16, 20, 24, 28][rng.gen_range(0..6)];
            let v = EXTREMES[rng.gen_range(0..EXTREMES.len())] as u32;
            b[at + field..at + field + 4].copy_from_slice(&v.to_le_bytes());
            reseal_chunk(&mut b, at);
            (format!("chunk-{at}-field-{field}-{v}"), b)
        }
        3 => {
            // Metadata with an impossible value, under a valid checksum.
            let json_len = u32_at(&b, 12) as usize;
            let mut meta: serde_json::Value = serde_json::from_slice(&b[20..20 + json_len]).unwrap();
            let (key, v): (&str, u64) = [
                ("page_size", (1 << 63) + 1),
                ("page_size", 0),
                ("page_size", 3),
                ("line_size", 0),
                ("threads", 0xFFFF_FFFF),
                ("threads", 1_000_000),
                ("sampling_period", 0),
            ][rng.gen_range(0..7)];
            meta[key] = v.into();
            let out = sharemap::trace::native::with_header_metadata(&b, &serde_json::to_vec(&meta).unwrap()).unwrap();
            (format!("meta-{key}-{v}"), out)
        }
        4 => {
            let v: u16 = rng.gen_range(1..=u16::MAX);
            b[10..12].copy_from_slice(&v.to_le_bytes());
            (format!("flags-{v}"), b)
        }
        5 => {
            // The footer's length field.
            let footer = u64::from_le_bytes(b[b.len() - 16..b.len() - 8].try_into().unwrap()) as usize;
            let v = EXTREMES[rng.gen_range(0..EXTREMES.len())] as u32;
            b[footer + 8..footer + 12].copy_from_slice(&v.to_le_bytes());
            (format!("footer-length-{v}"), b)
        }
        6 => {
            // Garbage inside a compressed payload under valid checksums: the decoder's turn.
            let at = chunks[rng.gen_range(0..chunks.len())];
            let len = u32_at(&b, at + 8) as usize;
            let i = at + 40 + rng.gen_range(0..len);
            b[i] = rng.r#gen();
            let crc = crc32fast::hash(&b[at + 40..at + 40 + len]);
            b[at + 28..at + 32].copy_from_slice(&crc.to_le_bytes());
            reseal_chunk(&mut b, at);
            (format!("payload-{i}"), b)
        }
        _ => {
            // A recompressed payload holding random section bytes: the codec's own parsing.
            let at = chunks[rng.gen_range(0..chunks.len())];
            let raw: Vec<u8> = (0..rng.gen_range(1..512)).map(|_| rng.r#gen::<u8>() % 8).collect();
            let payload = zstd::encode_all(&raw[..], 1).unwrap();
            let old = u32_at(&b, at + 8) as usize;
            let mut out = b[..at + 40].to_vec();
            out.extend_from_slice(&payload);
            out.extend_from_slice(&b[at + 40 + old..]);
            out[at + 8..at + 12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
            out[at + 12..at + 16].copy_from_slice(&(raw.len() as u32).to_le_bytes());
            out[at + 28..at + 32].copy_from_slice(&crc32fast::hash(&payload).to_le_bytes());
            reseal_chunk(&mut out, at);
            (format!("raw-{at}"), out)
        }
    }
}

#[test]
fn damaged_native_traces() {
    let d = tempfile::tempdir().unwrap();
    let base = base_trace(d.path(), "base.trace", "neighbor");
    let mut rng = ChaCha8Rng::seed_from_u64(seed());
    for k in 0..cases() {
        let (name, bytes) = mutate_native(&base, &mut rng);
        let case = format!("native-{k}-{name}");
        let t = p(&d, "t.trace");
        std::fs::write(&t, &bytes).unwrap();
        trace_commands(&case, &t, d.path());
        complete_or_corrupt(&case, &t, &bytes, &base);
    }
}

/// A damaged file that still ends in its intact end record (trailer, footer, checksum: as
/// the base wrote it) is complete: it is read whole, with the footer's count, or refused as
/// corrupt (exit 2); never read short as a truncated trace with exit 0.
fn complete_or_corrupt(case: &str, t: &Path, bytes: &[u8], base: &[u8]) {
    let tail = |b: &[u8]| {
        let footer = u64::from_le_bytes(b[b.len().saturating_sub(16)..b.len() - 8].try_into().unwrap_or([0; 8]));
        b.get(footer as usize..).map(<[u8]>::to_vec)
    };
    if bytes.len() < 16 || base.len() < 16 || tail(bytes).is_none() || tail(bytes) != tail(base) {
        return;
    }
    let out = Command::new(binary()).args(["info", s(t), "--json"]).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    if code == 0 {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let (want, got) = (info_accesses(base), v["accesses"].as_u64());
        if got != Some(want) || v.get("truncated_at").is_some_and(|x| !x.is_null()) {
            fail(case, t, &["info", "--json"], &format!("read as {got:?} accesses of the footer's {want}, exit 0"));
        }
    } else if code != 2 {
        fail(case, t, &["info", "--json"], &format!("exit {code}, not 2 (corrupt)"));
    }
}

fn info_accesses(trace: &[u8]) -> u64 {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("base.trace");
    std::fs::write(&t, trace).unwrap();
    common::json(&ok(&["info", s(&t), "--json"]))["accesses"].as_u64().unwrap()
}

const CSV_VALUES: [&str; 12] = [
    "4294967295",
    "1000000",
    "4096",
    "-1",
    "0x",
    "99999999999999999999999",
    "0xffffffffffffffff",
    "",
    "W",
    "1e9",
    "\u{fffd}",
    "18446744073709551615",
];

fn mutate_csv(base: &str, rng: &mut ChaCha8Rng) -> (String, Vec<u8>) {
    let mut lines: Vec<String> = base.lines().map(String::from).collect();
    let k = rng.gen_range(1..lines.len());
    match rng.gen_range(0..6) {
        0 => {
            let mut f: Vec<String> = lines[k].split(',').map(String::from).collect();
            let i = rng.gen_range(0..f.len());
            f[i] = CSV_VALUES[rng.gen_range(0..CSV_VALUES.len())].to_string();
            lines[k] = f.join(",");
            (format!("field-{k}-{i}"), (lines.join("\n") + "\n").into_bytes())
        }
        1 => ("cr-only".into(), lines.join("\r").into_bytes()),
        2 => {
            lines[k] = "7,".repeat(rng.gen_range(1..200_000));
            (format!("long-{k}"), (lines.join("\n") + "\n").into_bytes())
        }
        3 => {
            let mut b = (lines.join("\n") + "\n").into_bytes();
            let i = rng.gen_range(0..b.len());
            b[i] = 0xFF;
            (format!("utf8-{i}"), b)
        }
        4 => {
            lines.remove(0);
            ("no-header".into(), (lines.join("\n") + "\n").into_bytes())
        }
        _ => {
            let mut b = (lines.join("\n") + "\n").into_bytes();
            let n = rng.gen_range(0..b.len());
            b.truncate(n);
            (format!("truncate-{n}"), b)
        }
    }
}

#[test]
fn damaged_csv_and_parquet_traces() {
    let d = tempfile::tempdir().unwrap();
    let native = p(&d, "base.trace");
    ok(&["gen", "migratory", "--threads", "4", "--accesses", "2k", "-o", s(&native)]);
    let csv_path = p(&d, "base.csv");
    ok(&["convert", s(&native), s(&csv_path)]);
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    let parquet_path = p(&d, "base.parquet");
    ok(&["convert", s(&native), s(&parquet_path)]);
    let parquet = std::fs::read(&parquet_path).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed());
    for k in 0..cases() {
        let (name, bytes) = mutate_csv(&csv, &mut rng);
        let t = p(&d, "t.csv");
        std::fs::write(&t, bytes).unwrap();
        trace_commands(&format!("csv-{k}-{name}"), &t, d.path());

        let mut b = parquet.clone();
        let name = if rng.gen_bool(0.8) {
            let i = rng.gen_range(0..b.len());
            b[i] ^= 1 << rng.gen_range(0..8);
            format!("flip-{i}")
        } else {
            let n = rng.gen_range(0..b.len());
            b.truncate(n);
            format!("truncate-{n}")
        };
        let t = p(&d, "t.parquet");
        std::fs::write(&t, b).unwrap();
        trace_commands(&format!("parquet-{k}-{name}"), &t, d.path());
    }
}

const COUNTS: [&str; 9] = ["0", "1", "2", "3", "1024", "4097", "1048576", "4294967296", "x"];
const TYPES: [&str; 9] = ["pack", "numa", "core", "pu", "l3", "l2", "group", "die", "node"];

/// A machine string from random levels, counts and attributes.
fn machine_string(rng: &mut ChaCha8Rng) -> String {
    let levels = rng.gen_range(1..6);
    let mut parts = Vec::new();
    for _ in 0..levels {
        let t = TYPES[rng.gen_range(0..TYPES.len())];
        let c = COUNTS[rng.gen_range(0..COUNTS.len())];
        let attr = match rng.gen_range(0..6) {
            0 => "(size=99999999999999999999)",
            1 => "(memory=0)",
            2 => "(indexes=0,0)",
            3 => "[numa]",
            _ => "",
        };
        parts.push(format!("{t}:{c}{attr}"));
    }
    if rng.gen_bool(0.7) {
        parts.push(format!("pu:{}", COUNTS[rng.gen_range(0..COUNTS.len())]));
    }
    parts.join(" ")
}

fn mutate_xml(base: &str, rng: &mut ChaCha8Rng) -> (String, String) {
    match rng.gen_range(0..4) {
        0 => {
            let n = rng.gen_range(2..300_000);
            let open = "<object type=\"Group\">".repeat(n);
            let close = "</object>".repeat(n);
            let x = format!(
                "<?xml version=\"1.0\"?><topology><object type=\"Machine\">{open}<object type=\"PU\" os_index=\"0\"/>{close}</object></topology>"
            );
            (format!("deep-{n}"), x)
        }
        1 => {
            let n = rng.gen_range(4000..20_000);
            let pus: String = (0..n).map(|i| format!("<object type=\"PU\" os_index=\"{i}\"/>")).collect();
            (format!("wide-{n}"), format!("<topology><object type=\"Machine\">{pus}</object></topology>"))
        }
        2 => {
            let mut b = base.as_bytes().to_vec();
            let i = rng.gen_range(0..b.len());
            b[i] = rng.r#gen::<u8>() % 128;
            (format!("flip-{i}"), String::from_utf8_lossy(&b).to_string())
        }
        _ => {
            let v = COUNTS[rng.gen_range(0..COUNTS.len())];
            (format!("os-index-{v}"), base.replace("os_index=\"1\"", &format!("os_index=\"{v}\"")))
        }
    }
}

const XML: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0">
    <object type="Package" os_index="0">
      <object type="NUMANode" os_index="0" local_memory="1073741824"/>
      <object type="Core" os_index="0"><object type="PU" os_index="0"/></object>
      <object type="Core" os_index="1"><object type="PU" os_index="1"/></object>
    </object>
    <object type="Package" os_index="1">
      <object type="NUMANode" os_index="1" local_memory="1073741824"/>
      <object type="Core" os_index="2"><object type="PU" os_index="2"/></object>
      <object type="Core" os_index="3"><object type="PU" os_index="3"/></object>
    </object>
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="5" indexing="os">
    <indexes length="4">0 1 </indexes>
    <u64values length="8">10 21 21 10 </u64values>
  </distances2>
</topology>
"#;

#[test]
fn hostile_machines_and_matrices() {
    let d = tempfile::tempdir().unwrap();
    let trace = p(&d, "small.trace");
    ok(&["gen", "neighbor", "--threads", "4", "--accesses", "5k", "-o", s(&trace)]);
    let mut rng = ChaCha8Rng::seed_from_u64(seed());
    let spec_file = p(&d, "machine.txt");
    for k in 0..cases() {
        let spec = machine_string(&mut rng);
        std::fs::write(&spec_file, &spec).unwrap();
        let case = format!("machine-{k}");
        for args in [
            vec!["machine", spec.as_str()],
            vec!["map", s(&trace), "--machine", spec.as_str()],
            vec!["place", s(&trace), "--machine", spec.as_str(), "--policy", "first-touch"],
            vec!["simulate", s(&trace), "--machine", spec.as_str(), "--mechanism", "os,random"],
        ] {
            run(&case, &spec_file, &args, d.path());
        }

        let (name, xml) = mutate_xml(XML, &mut rng);
        let x = p(&d, "topo.xml");
        std::fs::write(&x, xml).unwrap();
        let case = format!("xml-{k}-{name}");
        for args in [
            vec!["machine", s(&x)],
            vec!["map", s(&trace), "--machine", s(&x)],
            vec!["simulate", s(&trace), "--machine", s(&x), "--mechanism", "os"],
        ] {
            run(&case, &x, &args, d.path());
        }

        let (name, m) = hostile_matrix(&mut rng);
        let ext = if rng.gen_bool(0.5) { "mat" } else { "csv" };
        let mpath = p(&d, &format!("comm.{ext}"));
        std::fs::write(&mpath, m).unwrap();
        let case = format!("matrix-{k}-{name}");
        run(&case, &mpath, &["map", s(&mpath), "--machine", "numa:2 pu:4"], d.path());
        run(&case, &mpath, &["place", s(&trace), "--thread-map", "sharemap", "--sharing", s(&mpath)], d.path());
    }
}

fn hostile_matrix(rng: &mut ChaCha8Rng) -> (String, Vec<u8>) {
    let n = [1, 2, 4, 5, 4097][rng.gen_range(0..5)];
    let sep = if rng.gen_bool(0.5) { "," } else { " " };
    let cell = |rng: &mut ChaCha8Rng| -> String {
        ["0", "1", "1e308", "1e309", "NaN", "-1", "inf", "x", "7"][rng.gen_range(0..9)].to_string()
    };
    let cols = if rng.gen_bool(0.8) { n } else { n + 1 };
    let mut text = String::new();
    for _ in 0..n.min(64) {
        let row: Vec<String> = (0..cols).map(|_| cell(rng)).collect();
        text += &row.join(sep);
        text.push('\n');
    }
    if n > 64 {
        // Rows enough to pass the limit without writing megabytes.
        text += &"0\n".repeat(n - 64);
    }
    let mut b = text.into_bytes();
    if rng.gen_bool(0.1) {
        let i = rng.gen_range(0..b.len());
        b[i] = 0xFE;
    }
    (format!("{n}x{cols}"), b)
}

/// A program built with `sharemap cc` that scribbles on its own trace channel (the region
/// `record` shares with it) while two threads record: `scribble SEED MODE`. Modes 0-7 break
/// one field the way the recorder was once broken (the header's block count, a full block
/// naming thread 0xFFFFFFF0, a block state, a block count, a record's bytes, shrinking the
/// region's file, clearing the header's attached mark, the header's thread count); mode 8
/// writes random values at random places.
const SCRIBBLE: &str = r#"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER 4096
#define STRINGS (64 * 1024)
#define BLOCK (64 + 4096 * 16)
static long data[2][4096];
static volatile int stop;

static void *work(void *arg) {
    long t = (long)arg;
    while (!stop)
        for (int i = 0; i < 4096; i++) data[t][i] += i;
    return 0;
}

static uint64_t next = 1;
static uint64_t rnd(void) {
    next = next * 6364136223846793005ULL + 1442695040888963407ULL;
    return next >> 17;
}

static unsigned char *block(unsigned char *r, uint32_t i) { return r + HEADER + STRINGS + (size_t)i * BLOCK; }

/// A block a thread is using now (state FILLING or FULL), or 0.
static uint32_t busy_block(unsigned char *r, uint32_t blocks) {
    for (uint32_t i = 0; i < blocks; i++)
        if (*(volatile uint32_t *)block(r, i) != 0) return i;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || !getenv("SHAREMAP_FD")) return 2;
    next = strtoull(argv[1], 0, 10) + 1;
    int mode = atoi(argv[2]);
    int fd = atoi(getenv("SHAREMAP_FD"));
    struct stat st;
    if (fstat(fd, &st) != 0) return 3;
    unsigned char *r = mmap(0, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r == MAP_FAILED) return 4;
    uint32_t blocks = *(uint32_t *)(r + 12);
    pthread_t th[2];
    for (long t = 0; t < 2; t++) pthread_create(&th[t], 0, work, (void *)t);
    usleep(20000);
    unsigned char *b = block(r, busy_block(r, blocks));
    static const uint64_t extremes[] = {0, 1, 3, 7, 4096, 4097, 0xFFFFFFF0u, 0xFFFFFFFFu, 0x7FFFFFFFu,
                                        0xFFFFFFFFFFFFFFFFull, 1ull << 40};
    switch (mode) {
    case 0: *(volatile uint32_t *)(r + 12) = 0xFFFFFFFFu; break;
    case 1: *(volatile uint32_t *)(b + 4) = 0xFFFFFFF0u; *(volatile uint32_t *)b = 2; break;
    case 2: *(volatile uint32_t *)b = 7; break;
    case 3: *(volatile uint32_t *)(b + 8) = 0xFFFFFFFFu; break;
    case 4: memset(b + 64, 0xA5, 64 * 16); break;
    case 5: if (ftruncate(fd, 4096) == 0) return 5; break;
    case 6: *(volatile uint32_t *)(r + 40) = 0; break;
    case 7: *(volatile uint32_t *)(r + 24) = 0xFFFFFFFFu; break;
    default:
        for (int k = 0; k < 200; k++) {
            uint64_t v = rnd() % 2 ? extremes[rnd() % 11] : rnd() * rnd();
            size_t at;
            switch (rnd() % 3) {
            case 0: at = rnd() % 64; break;
            case 1: at = (size_t)(block(r, rnd() % 8) - r) + rnd() % 16; break;
            default: at = (size_t)(block(r, rnd() % 8) - r) + 64 + rnd() % (4096 * 16); break;
            }
            at &= ~(size_t)3;
            if (rnd() % 2) *(volatile uint32_t *)(r + at) = (uint32_t)v;
            else if (at % 8 == 0) *(volatile uint64_t *)(r + at) = v;
            usleep(rnd() % 200);
        }
    }
    usleep(30000);
    stop = 1;
    for (int t = 0; t < 2; t++) pthread_join(th[t], 0);
    return 0;
}
"#;

/// The recorder reads a region the program writes: whatever the program puts there, `record`
/// ends (under the memory limit, without a signal or a panic) with the trace whole, or with
/// one line naming the corruption and where the accesses recorded before it are kept, a
/// trace every command reads.
#[test]
fn a_program_scribbling_on_its_trace_channel() {
    let d = tempfile::tempdir().unwrap();
    let src = p(&d, "scribble.c");
    std::fs::write(&src, SCRIBBLE).unwrap();
    let bin = p(&d, "scribble");
    ok(&["cc", "-O1", "-pthread", "-o", s(&bin), s(&src)]);
    let trace = p(&d, "out.trace");
    let mut rng = ChaCha8Rng::seed_from_u64(seed());
    let random_cases = cases().div_ceil(4);
    let mut corrupted = 0;
    for k in 0..8 + random_cases {
        let mode = k.min(8);
        let program_seed = rng.gen_range(0..u32::MAX).to_string();
        let case = format!("shm-{k}-mode{mode}-seed{program_seed}");
        let mode_arg = mode.to_string();
        let args = ["record", "-o", s(&trace), "--", s(&bin), &program_seed, &mode_arg];
        let (code, err) = run(&case, &src, &args, d.path());
        // A program killed by its own scribbling (its runtime reads the region too) passes
        // its status through: the trace of what it handed over is whole and kept.
        let whole = code == 0 || err.contains(&format!("into {} (", s(&trace)));
        if whole {
            let info = json(&ok(&["info", s(&trace), "--json"]));
            if mode == 7 {
                // The threads are counted from what they recorded, not from the header.
                assert_eq!(info["threads"], 3, "case {case}: {info}");
                assert!(err.contains("from 3 threads"), "case {case}: {err}");
            }
            std::fs::remove_file(&trace).unwrap();
        } else if let Some(kept) = err.split("are kept in ").nth(1) {
            corrupted += 1;
            let kept = Path::new(kept.split_whitespace().next().unwrap());
            let (info, _) = run(&case, kept, &["info", s(kept)], d.path());
            assert_eq!(info, 0, "case {case}: the kept trace {} reads", kept.display());
            std::fs::remove_file(kept).unwrap();
        }
        if (1..=4).contains(&mode) || mode == 6 {
            assert!(err.contains("corrupted its trace channel"), "case {case}: the recorder noticed: {err}");
        }
        if mode == 6 {
            assert!(err.contains("attached mark") && err.contains("are kept in"), "case {case}: {err}");
        }
        check_leftovers(&case, &src, &args, d.path(), if whole { 0 } else { code }, &[&trace]);
    }
    assert!(corrupted >= 5, "the corruptions of modes 1-4 and 6 were each reported");
}

/// Values a hostile or careless user gives an option.
const OPTION_VALUES: [&str; 18] = [
    "0",
    "1",
    "2",
    "-1",
    "18446744073709551615",
    "4294967296",
    "1e308",
    "inf",
    "NaN",
    "",
    "x",
    "0x10",
    "0,1",
    "3:4",
    "=",
    "a=b=c",
    "999999999999",
    "1e-300",
];

fn pick<'a>(rng: &mut ChaCha8Rng, from: &[&'a str]) -> &'a str {
    from[rng.gen_range(0..from.len())]
}

/// A value: a hostile one, or one of `good`.
fn value(rng: &mut ChaCha8Rng, good: &[&str]) -> String {
    if good.is_empty() || rng.gen_bool(0.25) { pick(rng, &OPTION_VALUES) } else { pick(rng, good) }.to_string()
}

/// A `--mechanism` list: known and unknown names, with known and unknown parameters.
fn mechanism_list(rng: &mut ChaCha8Rng, names: &[&str], keys: &[&str]) -> String {
    let items: Vec<String> = (0..rng.gen_range(1..3))
        .map(|_| {
            let name = value(rng, names);
            if rng.gen_bool(0.5) {
                let key = if rng.gen_bool(0.8) { pick(rng, keys) } else { "bogus" };
                format!("{name}:{key}={}", value(rng, &["1", "0.5", "3", "first-touch", "os"]))
            } else {
                name
            }
        })
        .collect();
    items.join(",")
}

/// Flags of `run`, `vm` (with --dry-run: flag parsing and checks, no boot) and `simulate`
/// drawn from their grammars with hostile values: each run ends with exit 0 or clear
/// lines, never a panic, a signal, a hang or an allocation beyond the memory limit.
#[test]
fn hostile_option_grammars() {
    let d = tempfile::tempdir().unwrap();
    let trace = p(&d, "small.trace");
    ok(&["gen", "neighbor", "--threads", "4", "--accesses", "5k", "-o", s(&trace)]);
    let program = "/bin/true";
    let mut rng = ChaCha8Rng::seed_from_u64(seed());
    let sim_mechanisms =
        ["os", "random", "oracle", "marathe", "sammu", "autopin", "static", "place", "kmaf", "carrefour", "all"];
    let sim_keys = [
        "seed",
        "every",
        "period-ms",
        "nt",
        "nc",
        "ac",
        "gate",
        "hysteresis",
        "k",
        "probation-ms",
        "warmup-ms",
        "threads",
        "pages",
        "policy",
        "scan-ms",
    ];
    let params = [
        "access_ns",
        "l1_ns",
        "l3_ways",
        "line",
        "tlb_entries",
        "tlb_ways",
        "tlb2_entries",
        "walk_ns",
        "dram-ns",
        "copy_ns_per_byte",
        "llc_inclusive",
        "private_inclusive",
        "zero-page",
        "bogus",
    ];
    let run_mechanisms =
        ["os", "random", "compact", "scatter", "round-robin", "oracle", "marathe", "autopin", "numa-balancing", "all"];
    let thread_maps = ["os", "identity", "scatter", "compact", "sharemap", "0,1", "1,0,1", "trace:/nonexistent"];
    let placements = ["first-touch", "interleave", "bind:0", "bind:1", "optimal:/nonexistent", "marathe:"];
    let mut accepted = [0u32; 3];
    for k in 0..cases() {
        // simulate
        let mut args: Vec<String> = vec!["simulate".into(), s(&trace).into()];
        args.extend(["--machine".into(), value(&mut rng, &["sammu", "stmap-opteron", "numa:2 pu:2", "ace"])]);
        args.extend(["--mechanism".into(), mechanism_list(&mut rng, &sim_mechanisms, &sim_keys)]);
        for _ in 0..rng.gen_range(0..3) {
            args.extend([
                "--param".into(),
                format!("{}={}", pick(&mut rng, &params), value(&mut rng, &["1", "0", "8"])),
            ]);
        }
        if rng.gen_bool(0.3) {
            args.extend(["--page-size".into(), value(&mut rng, &["4096", "65536"])]);
        }
        if rng.gen_bool(0.3) {
            args.extend(["--seed".into(), value(&mut rng, &["7"])]);
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        accepted[0] += u32::from(run(&format!("options-{k}-simulate"), &trace, &a, d.path()).0 == 0);

        // run, on a program that does nothing
        let mut args: Vec<String> = vec!["run".into()];
        for _ in 0..rng.gen_range(0..3) {
            args.extend(["--thread-map".into(), value(&mut rng, &thread_maps)]);
        }
        if rng.gen_bool(0.5) {
            args.extend(["--placement".into(), value(&mut rng, &placements)]);
        }
        if rng.gen_bool(0.5) {
            // Runs of a program that does nothing: a valid count stays small.
            args.extend(["--repeat".into(), value(&mut rng, &["1", "2", "1000001"]).replace("999999999999", "3")]);
        }
        if rng.gen_bool(0.4) {
            args.extend([
                "--mechanism".into(),
                mechanism_list(&mut rng, &run_mechanisms, &["every", "prefix", "seed"]),
            ]);
        }
        if rng.gen_bool(0.3) {
            args.extend(["--thp".into(), value(&mut rng, &["split", "regions", "keep"])]);
        }
        if rng.gen_bool(0.3) {
            args.extend(["--seed".into(), value(&mut rng, &["3"])]);
        }
        args.extend(["--".into(), program.into()]);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        accepted[1] += u32::from(run(&format!("options-{k}-run"), &trace, &a, d.path()).0 == 0);

        // vm, checked and not booted
        let mut args: Vec<String> = vec!["vm".into(), "--dry-run".into()];
        for (flag, good) in [
            ("--nodes", &["1", "2", "4"][..]),
            ("--cpus", &["2", "4", "8"][..]),
            ("--memory-mb", &["512", "1024"][..]),
            ("--distance", &["20", "11", "255"][..]),
            ("--timeout", &["60"][..]),
            ("--thread-map", &thread_maps[..]),
            ("--placement", &placements[..]),
            ("--thp", &["split", "regions", "keep"][..]),
            ("--env", &["OMP_NUM_THREADS=4", "A B=1", "=1"][..]),
            ("--kernel", &["/nonexistent", "/dev/null"][..]),
        ] {
            if rng.gen_bool(0.35) {
                args.extend([flag.into(), value(&mut rng, good)]);
            }
        }
        args.extend(["--".into(), program.into()]);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        accepted[2] += u32::from(run(&format!("options-{k}-vm"), &trace, &a, d.path()).0 == 0);
    }
    // The grammars reach past the parsers: some of each command's runs are accepted and run.
    eprintln!("accepted (simulate, run, vm): {accepted:?} of {} each", cases());
    assert!(accepted.iter().all(|&n| n > 0), "accepted: {accepted:?}");
}
