//! The suite's sharing cases (`[[sharing]]`): small traces of word accesses with the sharing
//! matrix a detector must find on them, in every layer that runs the detector: `detect` (the
//! detector over a trace) and `stm` (the STM's own detection, driven by a program that runs
//! each run of one thread's accesses as one transaction).

use serde::Deserialize;
use sharemap_trace::{Access, EventKind, MemoryTrace};
use std::ops::Range;

/// The size of a case's word: its accesses name words of 8 bytes (an STM's `stm_word_t`).
pub const WORD: u64 = 8;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    name: String,
    detector: String,
    layers: Vec<String>,
    accesses: String,
    expect: Vec<String>,
    distinct: u64,
}

/// One access of a sharing case: a thread reading or writing a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordAccess {
    pub thread: u32,
    pub write: bool,
    pub word: u64,
}

#[derive(Clone, Debug)]
pub struct SharingCase {
    pub name: String,
    /// The detector's spec, as `analyze --detector` takes it.
    pub detector: String,
    /// The layers that run the detector: detect, stm.
    pub layers: Vec<String>,
    pub accesses: Vec<WordAccess>,
    /// The matrix's non-zero cells, (a, b, units) with a < b, in order.
    pub expect: Vec<(usize, usize, u64)>,
    /// The distinct addresses the detector saw (Equation 1's da for STMap).
    pub distinct: u64,
}

fn parse(raw: Raw) -> Result<SharingCase, String> {
    let name = raw.name;
    let accesses = super::access_lines(&name, &raw.accesses, "WORD")?
        .into_iter()
        .map(|a| WordAccess { thread: a.thread, write: a.write, word: a.page })
        .collect();
    let mut expect = raw
        .expect
        .iter()
        .map(|e| cell(e).ok_or_else(|| format!("case '{name}': bad expectation '{e}' (A-B: UNITS, A < B)")))
        .collect::<Result<Vec<_>, _>>()?;
    expect.sort();
    for layer in &raw.layers {
        if !["detect", "stm"].contains(&layer.as_str()) {
            return Err(format!("case '{name}': unknown layer '{layer}'"));
        }
    }
    Ok(SharingCase { name, detector: raw.detector, layers: raw.layers, accesses, expect, distinct: raw.distinct })
}

/// "0-2: 3".
fn cell(text: &str) -> Option<(usize, usize, u64)> {
    let (pair, units) = text.split_once(':')?;
    let (a, b) = pair.split_once('-')?;
    let (a, b) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    (a < b).then_some(())?;
    Some((a, b, units.trim().parse().ok()?))
}

fn show(cells: &[(usize, usize, u64)]) -> String {
    let list: Vec<String> = cells.iter().map(|(a, b, u)| format!("{a}-{b}: {u}")).collect();
    format!("[{}]", list.join(", "))
}

/// Every sharing case; panics on a malformed suite (it is part of the source).
pub fn all() -> Vec<SharingCase> {
    super::suite().sharing.into_iter().map(|raw| parse(raw).unwrap_or_else(|e| panic!("cases.toml: {e}"))).collect()
}

/// The sharing cases a layer runs.
pub fn for_layer(layer: &str) -> Vec<SharingCase> {
    all().into_iter().filter(|c| c.layers.iter().any(|l| l == layer)).collect()
}

impl SharingCase {
    pub fn threads(&self) -> usize {
        self.accesses.iter().map(|a| a.thread as usize + 1).max().unwrap_or(0)
    }

    /// The detector's setting `key` (e.g. `si`), if the spec gives it.
    pub fn setting(&self, key: &str) -> Option<&str> {
        let (_, options) = self.detector.split_once(':')?;
        options.split(',').find_map(|kv| kv.split_once('=').filter(|(k, _)| k.trim() == key).map(|(_, v)| v.trim()))
    }

    /// The maximal runs of consecutive accesses by one thread, in order: the transactions of
    /// the `stm` layer's driver.
    pub fn runs(&self) -> Vec<(u32, Range<usize>)> {
        let mut runs: Vec<(u32, Range<usize>)> = Vec::new();
        for (i, a) in self.accesses.iter().enumerate() {
            match runs.last_mut() {
                Some((t, r)) if *t == a.thread => r.end = i + 1,
                _ => runs.push((a.thread, i..i + 1)),
            }
        }
        runs
    }

    /// The case as a trace of transactions, as the traced STM records one: each run begins a
    /// transaction of its thread and commits it; each access is of its word's 8 bytes.
    pub fn trace(&self) -> MemoryTrace {
        let mut trace = MemoryTrace::from_accesses([]);
        for (thread, range) in self.runs() {
            trace.event(thread, EventKind::TxBegin, 0, "");
            for a in &self.accesses[range] {
                let addr = a.word * WORD;
                trace.access(if a.write { Access::write(a.thread, addr, 8) } else { Access::read(a.thread, addr, 8) });
            }
            trace.event(thread, EventKind::TxCommit, 0, "");
        }
        trace
    }

    /// Compares what `layer` found, a matrix among `threads` threads read through `cell`
    /// and a count of distinct addresses, with the expectation.
    pub fn check(
        &self,
        layer: &str,
        threads: usize,
        cell: impl Fn(usize, usize) -> f64,
        distinct: u64,
    ) -> Result<(), String> {
        let mut got = Vec::new();
        for a in 0..threads {
            for b in a + 1..threads {
                let v = cell(a, b);
                if v != 0.0 {
                    if v.fract() != 0.0 || v < 0.0 {
                        return Err(format!("case '{}', layer {layer}: cell {a}-{b} is {v}, not a count", self.name));
                    }
                    got.push((a, b, v as u64));
                }
            }
        }
        if got == self.expect && distinct == self.distinct {
            Ok(())
        } else {
            Err(format!(
                "case '{}' ({}), layer {layer}: found {} and {distinct} distinct addresses, expected {} and {}",
                self.name,
                self.detector,
                show(&got),
                show(&self.expect),
                self.distinct
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sharing_case_reads_and_its_runs_cover_its_accesses() {
        let cases = all();
        assert!(cases.len() >= 4);
        for c in &cases {
            let runs = c.runs();
            assert_eq!(runs.iter().map(|(_, r)| r.len()).sum::<usize>(), c.accesses.len(), "{}", c.name);
            assert!(runs.windows(2).all(|w| w[0].0 != w[1].0), "{}: runs are maximal", c.name);
            assert!(c.expect.iter().all(|&(a, b, _)| a < b && b < c.threads()), "{}", c.name);
        }
    }

    #[test]
    fn a_check_names_the_cells_and_the_distinct_addresses() {
        let c = SharingCase {
            name: "t".into(),
            detector: "stmap:si=1, mi=5".into(),
            layers: vec!["detect".into()],
            accesses: vec![],
            expect: vec![(0, 2, 3)],
            distinct: 4,
        };
        let cells = |a: usize, b: usize| if (a, b) == (0, 2) { 3.0 } else { 0.0 };
        assert!(c.check("detect", 3, cells, 4).is_ok());
        assert!(c.check("detect", 3, cells, 5).is_err());
        assert!(c.check("detect", 3, |_, _| 0.0, 4).unwrap_err().contains("found [] and 4"));
        assert_eq!((c.setting("si"), c.setting("mi"), c.setting("da")), (Some("1"), Some("5"), None));
        assert_eq!(cell("1-3: 7"), Some((1, 3, 7)));
        assert_eq!(cell("3-1: 7"), None);
    }
}
