//! sharemap's STM: a program whose threads share in pairs run with STMap's log (its
//! decisions, the pins, its matrix), bank with STMap off and on, and a transactional
//! recording.

use super::programs::{build, record};
use super::{Block, DemoRequest, Section};
use sharemap::trace::write_whole;
use sharemap::{Error, ErrorKind, Result, SharingMatrix, TraceInput};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PAIRS: &str = include_str!("../../../../workloads/stm/pairs.c");
const BANK: &str = include_str!("../../../../workloads/stm/bank.c");
const BENCH: &str = include_str!("../../../../workloads/stm/bench.h");

/// The STM's section, or one saying why it was skipped.
pub fn runs(request: &DemoRequest, takeaways: &mut Vec<String>) -> Section {
    try_runs(request, takeaways).unwrap_or_else(|e| {
        Section::skipped("stm", "The STM", e, "scripts/setup installs the compilers `sharemap cc` drives")
    })
}

/// One of the demo's STM programs run to its end, STMap's own settings left out of the
/// environment but those given.
fn output(cmd: &mut Command) -> Result<Output> {
    let out = cmd.env_remove("SHAREMAP_STMAP").output()?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let why = said.lines().last().unwrap_or("failed").to_string();
        return Err(Error::new(ErrorKind::Program, why));
    }
    Ok(out)
}

/// Where each worker of `pairs` ended: the lines `worker W stmap_thread T cpu C` it prints
/// (its result, as a benchmark prints its rate).
fn pins(stdout: &str) -> Vec<(usize, usize, i64)> {
    stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["worker", w, "stmap_thread", t, "cpu", c] => Some((w.parse().ok()?, t.parse().ok()?, c.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

fn try_runs(request: &DemoRequest, takeaways: &mut Vec<String>) -> Result<Section> {
    let stm = request.dir.join("stm");
    sharemap::trace::make_dir(&stm)?;
    for (name, text) in [("pairs.c", PAIRS), ("bank.c", BANK), ("bench.h", BENCH)] {
        write_whole(&stm.join(name), text.as_bytes())?;
    }
    let build_stm = |src: &str, bin: &str, traced: bool| -> Result<PathBuf> {
        let out = stm.join(bin);
        let mut args: Vec<OsString> = vec!["--stm".into()];
        if !traced {
            args.push("--no-trace".into());
        }
        args.extend(["-O2".into(), stm.join(src).into(), "-o".into(), out.clone().into(), "-pthread".into()]);
        build(request, args, &format!("workloads/stm/{src}"))?;
        Ok(out)
    };
    let pairs = build_stm("pairs.c", "pairs", false)?;
    let bank = build_stm("bank.c", "bank", false)?;
    let traced = build_stm("pairs.c", "pairs-traced", true)?;
    let mut s = Section::new("stm");
    s.line(
        "The STM (libsharemap_stm: TinySTM's API, STMap inside): workloads/stm/pairs, 4 threads that share in pairs (0-1, 2-3), built with `sharemap cc --stm --no-trace`, run with SHAREMAP_STMAP_VERBOSE=1:",
    );
    let matrix_file = stm.join("comm.csv");
    let out = output(
        Command::new(&pairs)
            .args(["4", "1000000", "2"])
            .env("SHAREMAP_STMAP_VERBOSE", "1")
            .env("SHAREMAP_STMAP_MATRIX", &matrix_file),
    )?;
    // STMap's log, shown as it wrote it: its first and last remaps and its last decision.
    let log = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = log.lines().map(|l| l.trim_start_matches("sharemap-stm: ")).collect();
    let decisions: Vec<&&str> = lines.iter().filter(|l| l.starts_with("decision ")).collect();
    let remaps: Vec<&&str> = decisions.iter().copied().filter(|l| l.contains("-> remap")).collect();
    if let Some(first) = remaps.first() {
        s.line(format!("  first remap:   {first}"));
    }
    if let Some(last) = remaps.last().filter(|_| remaps.len() > 1) {
        s.line(format!("  last remap:    {last}"));
    }
    if let Some(last) = decisions.last() {
        s.line(format!("  last decision: {last}"));
    }
    if let Some(summary) = lines.iter().find(|l| l.starts_with("STMap:")) {
        s.line(format!("  {summary}"));
    }
    let pins = pins(&String::from_utf8_lossy(&out.stdout));
    let pinned: Vec<String> = pins.iter().map(|(w, t, c)| format!("worker {w} (T{t}) on CPU {c}")).collect();
    s.line(format!("  final pins: {}", pinned.join(", ")));
    let m = SharingMatrix::read(&matrix_file).map_err(|e| Error::new(ErrorKind::Sharing, e.to_string()))?;
    s.line("  its matrix (SHAREMAP_STMAP_MATRIX, a row per STMap thread id T):");
    let labels = (0..m.threads())
        .map(|t| match pins.iter().find(|p| p.1 == t) {
            Some((w, ..)) => format!("worker {w}"),
            None => "the main thread (it registers at the end to read the statistics: no transactions)".into(),
        })
        .collect();
    s.blocks.push(Block::Matrix { matrix: super::rows_of(&m), labels, indent: 4 });
    let cpu_of = |w: usize| pins.iter().find(|p| p.0 == w).map(|p| p.2);
    let together = |a: usize, b: usize| cpu_of(a).is_some() && cpu_of(a) == cpu_of(b);
    let found = together(0, 1) && together(2, 3) && !together(0, 2);
    s.line(format!(
        "  Reading: {}",
        if found {
            "STMap found the pairs from its samples alone and pinned each pair on one CPU, apart from the other pair, so each pair shares its CPU's caches; later decisions keep that mapping (within the hysteresis) rather than churn."
        } else {
            "the final pins do not put each pair on one CPU: STMap's samples did not separate the pairs on this run (see the decisions above)."
        }
    ));
    let verdict = bank_runs(&bank, &mut s)?;
    takeaways.push(format!(
        "sharemap's STM runs TinySTM programs unchanged; STMap {} the pairs of workloads/stm/pairs on its own; on bank, STMap on against off: {verdict}.",
        if found { "found and pinned" } else { "did not separate" }
    ));
    let trace = stm.join("pairs.trace");
    record(request, &trace, vec![traced.into(), "4".into(), "20000".into(), "1".into()], Vec::new(), false)?;
    let summary = sharemap::info(&TraceInput::file(&trace), &())?;
    let event = |k: &str| summary.events.get(k).copied().unwrap_or(0);
    s.line(format!(
        "  traced (`sharemap cc --stm`) and recorded: {} transactional accesses, tx-begin {}, tx-commit {}, tx-abort {}",
        summary.accesses,
        event("tx-begin"),
        event("tx-commit"),
        event("tx-abort")
    ));
    s.line("(docs/stm.md; scripts/bench-stm measures the STM's programs)");
    Ok(s)
}

/// bank at 2 threads, STMap off and on, 3 runs each interleaved: the medians, and whether
/// their ranges overlap (then the difference is within the noise).
fn bank_runs(bank: &Path, s: &mut Section) -> Result<String> {
    let rate = |mode: &str| -> Result<f64> {
        let out = output(Command::new(bank).args(["-t", "2", "-d", "700"]).env("SHAREMAP_STMAP", mode))?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.split_whitespace()
            .find_map(|w| w.strip_prefix("txs_per_s=")?.parse().ok())
            .ok_or_else(|| Error::new(ErrorKind::Program, format!("bank printed no rate: {text}")))
    };
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        off.push(rate("off")?);
        on.push(rate("on")?);
    }
    let range = |v: &[f64]| (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max));
    let ((off_lo, off_hi), (on_lo, on_hi)) = (range(&off), range(&on));
    let noise = on_lo <= off_hi && off_lo <= on_hi;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (off, on) = (median(&mut off), median(&mut on));
    let verdict = if noise {
        "within the noise: the runs' ranges overlap".to_string()
    } else {
        format!("{:.2} of off, the runs' ranges apart", on / off.max(f64::MIN_POSITIVE))
    };
    s.line(format!(
        "  bank, 2 threads (1024 accounts, 20 % audits), median of 3: {:.2} M transactions/s with STMap off, {:.2} M on ({verdict})",
        off / 1e6,
        on / 1e6
    ));
    Ok(verdict)
}
