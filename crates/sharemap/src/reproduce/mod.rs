//! `sharemap reproduce`: the claims of the five seed papers that sharemap can test, each an
//! experiment with the paper's figure, sharemap's and a verdict. Experiments run at the
//! papers' scale (their thread counts, footprints past the TLBs and caches, runs long enough
//! for each mechanism's clock) unless `Scale::Quick` shrinks them, which every line says. A
//! claim that does not hold is reported so, with a diagnostic experiment that tests the reason
//! given; thresholds are fixed here, from the papers' statements, and listed in
//! docs/reproduce.md. One claim is one function and one row of [`CLAIMS`]; the claims of one
//! paper live in its module.

mod bolosky;
mod marathe;
mod marchetti;
mod sammu;
mod stmap;

use crate::generate::{self, GenParams};
use crate::{Error, ErrorKind, Machine, Result, Session, TraceInput};
use rayon::prelude::*;
use serde::Serialize;
use sharemap_core::plugin::{Caps, Plugin};
use std::any::Any;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Holds,
    DoesNotHold,
    /// It needs an input that could not be had here (a recording, with no compiler).
    NotRun,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::DoesNotHold => "does not hold",
            Verdict::NotRun => "not run",
        }
    }
}

/// For a claim that does not hold: the experiment that tests the reason given, what it
/// found, and whether that confirms the reason.
#[derive(Clone, Debug, Serialize)]
pub struct Diagnostic {
    pub experiment: String,
    pub found: String,
    pub confirms: bool,
}

/// A figure-like claim's data, for plots: one value per x label in each series.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Figure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x: Vec<String>,
    pub series: Vec<(String, Vec<f64>)>,
}

/// What one experiment found.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// The paper's figure or statement, in its terms.
    pub paper: String,
    /// sharemap's figure, with what it is relative to.
    pub sharemap: String,
    pub verdict: Verdict,
    /// Why it holds or not, from the experiment's own figures.
    pub why: String,
    /// The experiment's size: threads, footprint, references, run length, time scale.
    pub scale: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostic: Option<Diagnostic>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figure: Option<Figure>,
}

impl Finding {
    fn new(
        paper: impl Into<String>,
        sharemap: impl Into<String>,
        holds: bool,
        why: impl Into<String>,
        scale: impl Into<String>,
    ) -> Finding {
        let verdict = if holds { Verdict::Holds } else { Verdict::DoesNotHold };
        Finding {
            paper: paper.into(),
            sharemap: sharemap.into(),
            verdict,
            why: why.into(),
            scale: scale.into(),
            diagnostic: None,
            figure: None,
        }
    }

    fn with_diagnostic(mut self, d: Diagnostic) -> Finding {
        self.diagnostic = Some(d);
        self
    }

    fn with_figure(mut self, f: Figure) -> Finding {
        self.figure = Some(f);
        self
    }
}

/// A claim's result, with the row it comes from.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    pub name: &'static str,
    /// The paper and its section.
    pub source: &'static str,
    pub claim: &'static str,
    #[serde(flatten)]
    pub finding: Finding,
    pub seconds: f64,
}

/// How many claims hold, do not hold, and were not run: the one summary line of a set of
/// results ("3 hold, 1 does not, 2 not run"), for every front end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub hold: usize,
    pub do_not_hold: usize,
    pub not_run: usize,
}

impl Tally {
    pub fn of(results: &[ClaimResult]) -> Tally {
        let count = |v: Verdict| results.iter().filter(|r| r.finding.verdict == v).count();
        Tally { hold: count(Verdict::Holds), do_not_hold: count(Verdict::DoesNotHold), not_run: count(Verdict::NotRun) }
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let one = |n: usize, singular: &'static str, plural: &'static str| if n == 1 { singular } else { plural };
        write!(
            f,
            "{} {}, {} {}, {} not run",
            self.hold,
            one(self.hold, "holds", "hold"),
            self.do_not_hold,
            one(self.do_not_hold, "does not", "do not"),
            self.not_run
        )
    }
}

/// How large the experiments are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scale {
    /// The papers' design: their thread counts, footprints and run lengths.
    #[default]
    Paper,
    /// Footprints an eighth and half the iterations: a quick look, not a conclusion.
    Quick,
}

/// Inputs some claims need beyond generated patterns.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// A recording of the workloads' `cg` (`sharemap reproduce` records one itself when a
    /// compiler for `sharemap cc` is there), with the threads it ran.
    pub cg: Option<PathBuf>,
    /// Why there is no `cg` recording, when there is none.
    pub cg_missing: Option<String>,
    /// Recordings of STM programs' transactional accesses (`sharemap cc --tx-only`): the
    /// suite's sets and STAMP's applications, for the stmap-equation-1 claim.
    pub stm: Vec<StmRecording>,
    /// What is missing from `stm`, and why.
    pub stm_missing: Vec<String>,
    pub scale: Scale,
    /// Where generated traces go (a temporary directory when not given).
    pub dir: Option<PathBuf>,
}

/// A recording of an STM program's transactional accesses and transaction events.
#[derive(Clone, Debug)]
pub struct StmRecording {
    /// The program (STAMP's application, or the suite's `rbtree`, `hashset`).
    pub name: String,
    pub trace: PathBuf,
    /// Its arguments but the thread count, for the scale line.
    pub input: String,
}

/// One generated trace of an experiment.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Gen {
    pub pattern: &'static str,
    pub threads: u32,
    /// Pages per thread.
    pub footprint: u64,
    pub iterations: u64,
    pub reuse: u32,
    pub word: u64,
    pub halo: u64,
    pub nnz: u64,
}

impl Gen {
    pub fn new(pattern: &'static str, threads: u32, footprint: u64, iterations: u64) -> Gen {
        Gen { pattern, threads, footprint, iterations, reuse: 1, word: 8, halo: 1, nnz: 8 }
    }

    pub fn reuse(self, reuse: u32) -> Gen {
        Gen { reuse, ..self }
    }

    pub fn word(self, word: u64) -> Gen {
        Gen { word, ..self }
    }

    pub fn halo(self, halo: u64) -> Gen {
        Gen { halo, ..self }
    }

    pub fn nnz(self, nnz: u64) -> Gen {
        Gen { nnz, ..self }
    }

    /// Shrunk for `Scale::Quick`: an eighth of the footprint, half the iterations.
    fn at(&self, scale: Scale) -> Gen {
        match scale {
            Scale::Paper => self.clone(),
            Scale::Quick => Gen {
                footprint: (self.footprint / 8).max(4),
                iterations: (self.iterations / 2).max(1),
                halo: (self.halo / 8).max(1),
                ..self.clone()
            },
        }
    }

    fn params(&self) -> GenParams {
        GenParams {
            word: self.word,
            reuse: self.reuse,
            halo: self.halo,
            nnz: self.nnz,
            ..GenParams::sized(self.threads, self.footprint, self.iterations, 1)
        }
    }
}

/// A generated trace: where it is and what it holds.
#[derive(Clone, Debug)]
pub(crate) struct Generated {
    pub path: PathBuf,
    pub spec: Gen,
    pub accesses: u64,
}

impl Generated {
    /// The trace's size in words: threads, footprint, iterations, reuse, word, accesses.
    pub fn scale(&self) -> String {
        let g = &self.spec;
        let mib = g.footprint as f64 * g.threads as f64 * 4096.0 / (1u64 << 20) as f64;
        let mut s = format!(
            "{} threads x {} pages ({mib:.1} MiB), {} iterations, {} accesses",
            g.threads,
            g.footprint,
            g.iterations,
            count(self.accesses)
        );
        if g.reuse > 1 {
            s.push_str(&format!(", each made {} times", g.reuse));
        }
        if g.word != 8 {
            s.push_str(&format!(", {}-byte words", g.word));
        }
        if g.halo > 1 {
            s.push_str(&format!(", halo {} pages", g.halo));
        }
        if g.nnz != 8 {
            s.push_str(&format!(", {} nonzeros a row", g.nnz));
        }
        s
    }

    pub fn session(&self, machine: &str) -> Result<Session> {
        Ok(Session::new(TraceInput::file(&self.path), Machine::from_spec(machine)?, 1))
    }
}

/// A count in words a reader takes in at once: 166 M, 2.1 G, 31,744.
pub(crate) fn count(n: u64) -> String {
    match n {
        n if n >= 10_000_000_000 => format!("{:.0} G", n as f64 / 1e9),
        n if n >= 1_000_000_000 => format!("{:.1} G", n as f64 / 1e9),
        n if n >= 10_000_000 => format!("{:.0} M", n as f64 / 1e6),
        n if n >= 1_000_000 => format!("{:.1} M", n as f64 / 1e6),
        n => sharemap_core::grouped(n),
    }
}

type Slot = Arc<OnceLock<std::result::Result<Arc<dyn Any + Send + Sync>, String>>>;

/// What the claims of one run share: the inputs, generated traces (each made once, on disk),
/// and experiments several claims read (each run once).
pub struct Run<'a> {
    pub inputs: &'a Inputs,
    dir: PathBuf,
    _temp: Option<(tempfile::TempDir, sharemap_core::output::Listed)>,
    slots: Mutex<HashMap<String, Slot>>,
}

impl<'a> Run<'a> {
    fn new(inputs: &'a Inputs) -> Result<Run<'a>> {
        let (dir, temp) = match &inputs.dir {
            Some(d) => {
                sharemap_trace::output::make_dir(d).map_err(|e| Error::new(ErrorKind::Io, e.to_string()))?;
                (d.clone(), None)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("sharemap-reproduce-")
                    .tempdir()
                    .map_err(|e| Error::new(ErrorKind::Io, format!("a temporary directory: {e}")))?;
                let listed = sharemap_core::output::Listed::new(t.path());
                (t.path().to_path_buf(), Some((t, listed)))
            }
        };
        Ok(Run { inputs, dir, _temp: temp, slots: Mutex::new(HashMap::new()) })
    }

    pub fn scale(&self) -> Scale {
        self.inputs.scale
    }

    /// The value of `key`, computed by `f` the first time any claim asks (others wait).
    pub(crate) fn once<T: Clone + Send + Sync + 'static>(&self, key: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let slot = self.slots.lock().expect("a claim panicked").entry(key.to_string()).or_default().clone();
        let value =
            slot.get_or_init(|| f().map(|v| Arc::new(v) as Arc<dyn Any + Send + Sync>).map_err(|e| e.to_string()));
        match value {
            Ok(v) => Ok(v.downcast_ref::<T>().expect("one type per key").clone()),
            Err(e) => Err(Error::new(ErrorKind::Claim, e.clone())),
        }
    }

    /// A generated trace at this run's scale, written once.
    pub(crate) fn generated(&self, wanted: &Gen) -> Result<Generated> {
        let spec = wanted.at(self.scale());
        let key = format!("{spec:?}");
        self.once(&key, || {
            let name = format!(
                "{}-t{}-f{}-i{}-r{}-w{}-h{}-n{}.trace",
                spec.pattern, spec.threads, spec.footprint, spec.iterations, spec.reuse, spec.word, spec.halo, spec.nnz
            );
            let path = self.dir.join(name);
            let report = generate::to_file(generate::pattern(spec.pattern)?, &spec.params(), &path, None, &())?;
            Ok(Generated { path, spec: spec.clone(), accesses: report.accesses })
        })
    }
}

/// A claim: its name, the paper's section (`source`), the claim (`summary`), and its
/// experiment.
pub type ClaimInfo = Plugin<fn(&Run) -> Result<Finding>>;

pub(crate) const fn claim(
    name: &'static str,
    source: &'static str,
    summary: &'static str,
    build: fn(&Run) -> Result<Finding>,
) -> ClaimInfo {
    Plugin { name, source, summary, params: &[], caps: Caps::NONE, build }
}

/// Every claim, paper by paper.
pub static CLAIMS: &[ClaimInfo] = &[
    marchetti::FIRST_TOUCH_LOCAL,
    marchetti::LOCAL_FILLS,
    marchetti::MIGRATION_MGRID,
    marchetti::REPLICATION_SOR,
    bolosky::OPTIMUM_EXHAUSTIVE,
    bolosky::OPTIMUM_CONCAVE_IN_G,
    bolosky::COROLLARY_SCALING,
    bolosky::DELAY_NEAR_OPTIMUM,
    bolosky::PLATINUM_BUTTERFLY_ACE,
    bolosky::MOVES_JUMP_NEAR_PAGE,
    bolosky::PAGE_SIZE,
    bolosky::FILTERS,
    sammu::MATRIX,
    sammu::CG_MATRIX,
    sammu::TIME,
    sammu::MPKI_TRAFFIC,
    sammu::OVERHEAD,
    sammu::KMAF_BELOW,
    sammu::NUMA_BALANCING_SP,
    sammu::AUTOPIN,
    sammu::CG_DATA_MAPPING,
    stmap::SAMPLING,
    stmap::SI_TRADEOFF,
    stmap::EQUATION_1,
    marathe::SERIAL_INIT,
    marathe::LATENCY_AHEAD_OF_TLB,
];

/// Runs the named claims (all when `names` is empty), several at once; the results come in
/// the table's order. `progress` is told each claim's name as it starts and ends.
pub fn reproduce(
    names: &[String],
    inputs: &Inputs,
    progress: &(dyn Fn(&str, Option<&ClaimResult>) + Sync),
) -> Result<Vec<ClaimResult>> {
    for n in names {
        if !CLAIMS.iter().any(|c| c.name == n) {
            let known: Vec<&str> = CLAIMS.iter().map(|c| c.name).collect();
            let hint = sharemap_core::did_you_mean(n, known.iter().copied());
            return Err(Error::new(
                ErrorKind::Claim,
                format!("unknown claim '{n}' ({hint}claims: {})", known.join(", ")),
            ));
        }
    }
    let run = Run::new(inputs)?;
    let chosen: Vec<&ClaimInfo> =
        CLAIMS.iter().filter(|c| names.is_empty() || names.iter().any(|n| n == c.name)).collect();
    chosen
        .par_iter()
        .map(|c| {
            progress(c.name, None);
            let start = std::time::Instant::now();
            let mut finding = (c.build)(&run).map_err(|e| Error::new(e.kind(), format!("{}: {}", c.name, e.why())))?;
            if run.scale() == Scale::Quick {
                finding.scale = format!("quick (sizes shrunk, not the paper's): {}", finding.scale);
            }
            let result = ClaimResult {
                name: c.name,
                source: c.source,
                claim: c.summary,
                finding,
                seconds: start.elapsed().as_secs_f64(),
            };
            progress(c.name, Some(&result));
            Ok(result)
        })
        .collect()
}

/// A policy's result among an evaluation's.
pub(crate) fn result<'a>(
    results: &'a [sharemap_placement::evaluate::PolicyResult],
    name: &str,
) -> &'a sharemap_placement::evaluate::PolicyResult {
    results.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("{name} was evaluated"))
}

/// A mechanism's outcome among a simulation's.
pub(crate) fn outcome<'a>(sim: &'a crate::Simulation, name: &str) -> &'a crate::simulate::Outcome {
    sim.mechanisms.iter().find(|m| m.mechanism == name).unwrap_or_else(|| panic!("{name} was simulated"))
}

/// Geometric mean of positive values (1 for none).
pub(crate) fn geomean(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = values.into_iter().fold((0.0, 0usize), |(s, n), v| (s + v.max(1e-300).ln(), n + 1));
    if n == 0 { 1.0 } else { (sum / n as f64).exp() }
}

/// A fraction as "12.3 % faster" or "4.5 % slower" (1 - ratio).
pub(crate) fn faster(ratio: f64) -> String {
    let g = 1.0 - ratio;
    format!("{:.1} % {}", 100.0 * g.abs(), if g >= 0.0 { "faster" } else { "slower" })
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn a_tally_says_each_verdicts_count_in_words() {
        let t = |hold, do_not_hold, not_run| Tally { hold, do_not_hold, not_run }.to_string();
        assert_eq!(t(3, 2, 0), "3 hold, 2 do not, 0 not run");
        assert_eq!(t(1, 1, 4), "1 holds, 1 does not, 4 not run");
    }
}
