//! `sharemap demo` as data. `run` generates every seed pattern, places, maps and simulates
//! them through the `Session`, builds and records a real program, measures it on this host
//! and in a multi-node guest, and runs sharemap's STM, each through sharemap-run's actors
//! (`cc::build`, `Recorder`, `RunRequest`, `VmRequest`): nothing is spawned but the demo's
//! own programs, and nothing is read back from text a command printed. The result is a
//! `Demo`: sections of lines, typed tables and matrices, and the findings, which a front end
//! renders (the command line as text); its figures (heatmaps, simulation plots) are drawn
//! into the directory by sharemap-report, as every command draws them.

mod patterns;
pub(crate) mod programs;
mod stm;

use serde::Serialize;
use sharemap::{Result, SharingMatrix};
use sharemap_run::Tools;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use programs::SIMULATED;

/// The machine every modelled figure is computed on.
pub const DEMO_MACHINE: &str = "sammu-x7550";
/// Threads of every generated pattern and of the recorded stencil.
pub const DEMO_THREADS: u32 = 8;
/// The directory the demo writes to when not told (relative to where it runs).
pub const DEMO_DIR: &str = "sharemap-demo";
/// The file that marks a directory as a demo's, which a later demo may write over.
const MARKER: &str = ".sharemap-demo";
/// Phases past the initialisation of each generated pattern: enough for the phase- and
/// iteration-driven policies to act, few enough for the demo to take a minute.
pub const DEMO_ITERATIONS: u64 = 3;

/// What to demonstrate, and where.
pub struct DemoRequest {
    /// The directory written into (refused when it holds anything not a demo's).
    pub dir: PathBuf,
    /// Accesses per pattern (a quick look at toy sizes); None: the paper-like footprints.
    pub accesses: Option<u64>,
    /// Where sharemap's runtime libraries are (for `cc`, `record`, `run`, `vm`).
    pub tools: Tools,
    /// Told of each pass over a trace (progress bars).
    pub observer: Arc<dyn sharemap::Observer>,
}

/// The demo's findings, in the order they are shown.
#[derive(Serialize)]
pub struct Demo {
    /// How the patterns were sized, in one line.
    pub sizing: String,
    pub machine: String,
    pub sections: Vec<Section>,
    /// The few lines to take away, one per section that has one.
    pub takeaways: Vec<String>,
}

/// One experiment: what it shows, in order.
#[derive(Serialize, Default)]
pub struct Section {
    pub id: &'static str,
    pub blocks: Vec<Block>,
}

impl Section {
    fn new(id: &'static str) -> Section {
        Section { id, ..Section::default() }
    }

    fn line(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Line(text.into()));
    }

    /// A section that could not run here, with why.
    fn skipped(id: &'static str, what: &str, why: impl std::fmt::Display, hint: &str) -> Section {
        let mut s = Section::new(id);
        s.line(format!("{what}: skipped ({why}); {hint}"));
        s
    }
}

/// A piece of a section.
#[derive(Serialize)]
pub enum Block {
    /// A sentence or a note.
    Line(String),
    Table(Table),
    /// A sharing matrix shown as text, each row with a label after it.
    Matrix {
        matrix: Vec<Vec<f64>>,
        labels: Vec<String>,
        indent: usize,
    },
}

/// A table: its column heads and rows; numbers stay numbers.
#[derive(Serialize)]
pub struct Table {
    pub head: Vec<String>,
    pub rows: Vec<Row>,
}

#[derive(Serialize)]
pub struct Row {
    pub cells: Vec<Cell>,
    /// A matrix shown under the row, when it has one.
    pub matrix: Option<Vec<Vec<f64>>>,
}

impl Row {
    fn of(cells: Vec<Cell>) -> Row {
        Row { cells, matrix: None }
    }
}

#[derive(Clone, Serialize)]
pub enum Cell {
    Text(String),
    Count(u64),
    /// A number shown with this many decimals.
    Number(f64, usize),
    /// A share shown as a percentage with one decimal.
    Percent(f64),
}

impl Cell {
    fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
}

/// A matrix's values by row, for a table or a text heatmap.
pub fn rows_of(m: &SharingMatrix) -> Vec<Vec<f64>> {
    (0..m.threads()).map(|i| (0..m.threads()).map(|j| m.get(i, j)).collect()).collect()
}

/// The demo's output directory, made if missing: refused when it holds anything and is not
/// a previous demo's (nothing of the user's is written over).
pub fn output_dir(dir: &Path) -> Result<()> {
    use sharemap::{Error, ErrorKind};
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries.count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(Error::new(ErrorKind::Io, format!("{}: {e}", dir.display()))),
    };
    if entries > 0 && !dir.join(MARKER).is_file() {
        return Err(Error::new(
            ErrorKind::Io,
            format!("{} is not empty and is not a previous demo's: give another --dir", dir.display()),
        ));
    }
    // Made, or checked, as a directory the demo builds programs in and runs them from: not
    // reached through another user's link, not theirs, not writable by every user.
    sharemap::trace::make_dir(dir)?;
    sharemap::trace::write_whole(
        &dir.join(MARKER),
        b"written by `sharemap demo`; a later demo may write over this directory\n",
    )?;
    Ok(())
}

/// The whole demo. A section whose tools are missing here (a compiler, the guest kernel)
/// says it was skipped and why; the others run.
pub fn run(request: &DemoRequest) -> Result<Demo> {
    output_dir(&request.dir)?;
    let sizing = match request.accesses {
        None => format!(
            "sharemap demo: the seed papers' sharing patterns, {DEMO_THREADS} threads, each pattern's paper-like footprint (1024 pages per thread, matmult 32: past the TLBs' 576 entries a core), {DEMO_ITERATIONS} iterations, seed 1"
        ),
        Some(n) => format!(
            "sharemap demo: the seed papers' sharing patterns, {DEMO_THREADS} threads, {n} accesses each, data sized from them, seed 1 (a quick look at toy sizes, not the papers' scale)"
        ),
    };
    let mut takeaways = Vec::new();
    let mut sections = Vec::new();
    let generated = patterns::generate(request)?;
    sections.push(patterns::sharing(&generated, &mut takeaways));
    sections.push(patterns::placement(&generated, &mut takeaways)?);
    sections.push(patterns::mapping(request, &generated, &mut takeaways)?);
    sections.extend(programs::recorded(request, &mut takeaways));
    sections.extend(programs::real_runs(request, &mut takeaways));
    sections.push(stm::runs(request, &mut takeaways));
    Ok(Demo { sizing, machine: DEMO_MACHINE.into(), sections, takeaways })
}

/// What the demo left in `dir`: each kind of file (by extension) and their names.
pub fn written(dir: &Path) -> Vec<(String, Vec<String>)> {
    let mut by_kind: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_file() {
            continue;
        }
        let kind = name.rsplit_once('.').map_or("(built programs)".into(), |(_, ext)| format!(".{ext}"));
        by_kind.entry(kind).or_default().push(name);
    }
    by_kind
        .into_iter()
        .map(|(kind, mut names)| {
            names.sort();
            (kind, names)
        })
        .collect()
}

/// `n` and the noun for it.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
