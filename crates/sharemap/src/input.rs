//! Where a trace comes from: a file in any format or a trace held in memory, with address
//! ranges left out, opened afresh as often as an analysis needs to read it.

use crate::{Error, ErrorKind, Result};
use sharemap_trace::exclude::{Excluding, Ranges};
use sharemap_trace::window::{FirstTouch, Selection, Window, Windowed};
use sharemap_trace::{Chunk, Format, MemoryTrace, Metadata, TraceError, TraceReader, TraceSource};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// A trace to read: every `open` starts a new reader at its beginning.
///
/// ```
/// use sharemap::TraceInput;
/// use sharemap::trace::{Access, MemoryTrace, TraceSource};
/// let trace = MemoryTrace::from_accesses([Access::write(0, 0x1000, 8), Access::read(1, 0x5000, 8)]);
/// let input = TraceInput::memory(trace).exclude("0x5000+8").unwrap();
/// let mut kept = 0;
/// input.open().unwrap().for_each_chunk(&mut |c| Ok(kept += c.accesses.len())).unwrap();
/// assert_eq!((kept, input.excluded()), (1, Some(1)));
/// ```
#[derive(Clone, Debug)]
pub struct TraceInput {
    origin: Origin,
    format: Option<Format>,
    exclude: Option<Exclusion>,
    /// The most accesses a pass left out (every complete pass leaves out the same).
    excluded: Arc<AtomicU64>,
    /// Set by the caller to stop the passes reading this input (at their next chunk).
    stop: Option<Arc<AtomicBool>>,
    /// The part of the trace to read, and what it resolved to (once, shared by clones).
    selection: Selection,
    window: Arc<OnceLock<Option<Arc<WindowInfo>>>>,
}

/// The part of a trace an input reads, as resolved from the trace's marks.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct WindowInfo {
    /// What it is: "the region of interest (sharemap_roi_begin/end)", "phase 2 (solve)".
    pub what: String,
    /// Whether it was asked for (`--roi`, `--phase`, `--window`) rather than taken from the
    /// trace's region-of-interest marks by default.
    pub asked: bool,
    /// The trace positions read, as `[start, end)` spans.
    pub spans: Vec<(u64, u64)>,
    /// Accesses in the window, and in the whole trace.
    pub accesses: u64,
    pub total: u64,
}

impl WindowInfo {
    /// The window's share of the trace's accesses, in percent.
    pub fn percent(&self) -> f64 {
        100.0 * self.accesses as f64 / self.total.max(1) as f64
    }
}

#[derive(Clone, Debug)]
enum Origin {
    File(PathBuf),
    Memory(Arc<MemoryTrace>),
}

#[derive(Clone, Debug)]
struct Exclusion {
    text: String,
    ranges: Ranges,
}

/// Where a truncated native trace's data ends, and what is readable before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// The byte where the data ends.
    pub at: u64,
    /// Complete chunks before it, and the accesses they hold.
    pub chunks: usize,
    pub accesses: u64,
}

impl Truncation {
    /// Where an open reader's file is cut short, if it is.
    pub fn of(reader: &TraceReader) -> Option<Truncation> {
        match (reader.truncated_at(), reader) {
            (Some(at), TraceReader::Native(r)) => {
                Some(Truncation { at, chunks: r.chunks().len(), accesses: r.access_count() })
            }
            _ => None,
        }
    }
}

impl TraceInput {
    /// A trace file: native, CSV or Parquet, told by its content or extension.
    pub fn file(path: impl Into<PathBuf>) -> TraceInput {
        TraceInput::with_origin(Origin::File(path.into()))
    }

    /// A trace built in memory (read without copying it).
    pub fn memory(trace: MemoryTrace) -> TraceInput {
        TraceInput::with_origin(Origin::Memory(Arc::new(trace)))
    }

    fn with_origin(origin: Origin) -> TraceInput {
        TraceInput {
            origin,
            format: None,
            exclude: None,
            excluded: Arc::default(),
            stop: None,
            selection: Selection::Auto,
            window: Arc::default(),
        }
    }

    /// Reads this part of the trace: by default ([`Selection::Auto`]) its region of interest
    /// when its program marked one, else all of it.
    pub fn select(mut self, selection: Selection) -> TraceInput {
        self.selection = selection;
        self.window = Arc::default();
        self
    }

    /// How the pages the window touches were first touched: those the OS homed by an
    /// earlier first touch of another thread are homed elsewhere by the windowed analyses'
    /// first touch. None without a window; a pass up to the window's end when it does not
    /// start the trace.
    pub fn first_touch(&self) -> Result<Option<FirstTouch>> {
        let Some(w) = self.window()? else { return Ok(None) };
        if w.spans.len() == 1 && w.spans[0].0 == 0 {
            return Ok(Some(FirstTouch::default()));
        }
        let window = Window::new(w.spans.clone(), w.what.clone());
        let mut raw = self.raw()?;
        let shift = raw.metadata().page_size.max(1).trailing_zeros();
        Ok(Some(sharemap_trace::window::first_touch(raw.as_mut(), &window, shift)?))
    }

    /// The part of the trace asked for.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// The part of the trace every pass reads, resolved from the trace's events (once): None
    /// for the whole trace.
    pub fn window(&self) -> Result<Option<Arc<WindowInfo>>> {
        if let Some(w) = self.window.get() {
            return Ok(w.clone());
        }
        let w = self.resolve_window()?;
        Ok(self.window.get_or_init(|| w).clone())
    }

    fn resolve_window(&self) -> Result<Option<Arc<WindowInfo>>> {
        if self.selection == Selection::Whole {
            return Ok(None);
        }
        let (events, total) = match &self.origin {
            Origin::File(p) => {
                let reader = TraceReader::open(p, self.format)?;
                let total = match reader.access_count_hint() {
                    Some(n) => n,
                    None if matches!(self.selection, Selection::Range { .. }) => count(self.raw()?)?,
                    None => u64::MAX,
                };
                (reader.marks()?, total)
            }
            Origin::Memory(t) => {
                let events = (0..).map_while(|k| t.chunk(k)).flat_map(|c| c.events.iter().cloned()).collect();
                (events, t.accesses())
            }
        };
        let why =
            |e: sharemap_trace::window::WindowError| Error::new(ErrorKind::Window, format!("{}: {e}", self.name()));
        let Some(window) = self.selection.resolve(&events, total).map_err(why)? else { return Ok(None) };
        Ok(Some(Arc::new(WindowInfo {
            what: window.what.clone(),
            asked: self.selection != Selection::Auto,
            spans: window.spans().to_vec(),
            accesses: window.accesses(),
            total,
        })))
    }

    /// Reads the file as this format, whatever its extension says.
    pub fn with_format(mut self, format: Option<Format>) -> TraceInput {
        self.format = format;
        self
    }

    /// Leaves out the accesses that touch these address ranges: `LO-HI` (HI excluded) or
    /// `LO+SIZE`, hexadecimal with 0x or decimal, comma-separated (a spin-wait flag, a lock
    /// word).
    pub fn exclude(mut self, ranges: &str) -> Result<TraceInput> {
        let parsed = Ranges::parse(ranges).map_err(|e| Error::new(ErrorKind::Exclude, e.to_string()))?;
        self.exclude = Some(Exclusion { text: ranges.trim().to_string(), ranges: parsed });
        Ok(self)
    }

    /// Stops every pass over this input at its next chunk once `stop` is set: the pass
    /// fails with `ErrorKind::Interrupted`.
    pub fn stop_when(mut self, stop: Arc<AtomicBool>) -> TraceInput {
        self.stop = Some(stop);
        self
    }

    /// The file, for a trace read from one.
    pub fn path(&self) -> Option<&Path> {
        match &self.origin {
            Origin::File(p) => Some(p),
            Origin::Memory(_) => None,
        }
    }

    /// The file's name as given, or `memory` for a trace in memory.
    pub fn name(&self) -> String {
        match &self.origin {
            Origin::File(p) => p.display().to_string(),
            Origin::Memory(_) => "memory".into(),
        }
    }

    /// Whether the format was given (rather than told by the content or extension).
    pub fn has_format(&self) -> bool {
        self.format.is_some()
    }

    /// The ranges left out, as given.
    pub fn exclusion(&self) -> Option<&str> {
        self.exclude.as_ref().map(|e| e.text.as_str())
    }

    /// How many accesses a complete pass left out: None without ranges to leave out.
    pub fn excluded(&self) -> Option<u64> {
        self.exclude.as_ref().map(|_| self.excluded.load(Ordering::Relaxed))
    }

    /// The file's reader, without the ranges left out: what the file itself says (its
    /// format, chunks, where a truncated file ends).
    pub fn reader(&self) -> Result<TraceReader> {
        match &self.origin {
            Origin::File(p) => Ok(TraceReader::open(p, self.format)?),
            Origin::Memory(_) => Err(Error::new(ErrorKind::Io, "a trace in memory has no file")),
        }
    }

    /// Where a truncated native file's data ends (None when it is complete).
    pub fn truncation(&self) -> Result<Option<Truncation>> {
        let Origin::File(_) = &self.origin else { return Ok(None) };
        Ok(Truncation::of(&self.reader()?))
    }

    /// A reader of every access, before the window and the excluded ranges.
    fn raw(&self) -> Result<Box<dyn TraceSource>> {
        Ok(match &self.origin {
            Origin::File(p) => Box::new(TraceReader::open(p, self.format)?),
            Origin::Memory(t) => Box::new(MemoryReader { trace: t.clone(), next: 0 }),
        })
    }

    /// A new reader at the trace's start: the window's accesses (see [`TraceInput::window`]),
    /// the excluded ranges left out.
    pub fn open(&self) -> Result<Box<dyn TraceSource>> {
        let source = self.raw()?;
        let source: Box<dyn TraceSource> = match self.window()? {
            Some(w) => Box::new(Windowed::new(source, Window::new(w.spans.clone(), w.what.clone()))),
            None => source,
        };
        let source: Box<dyn TraceSource> = match &self.stop {
            Some(stop) => Box::new(Stoppable { inner: source, stop: stop.clone() }),
            None => source,
        };
        Ok(match &self.exclude {
            Some(e) => {
                Box::new(Counted { inner: Excluding::new(source, e.ranges.clone()), most: self.excluded.clone() })
            }
            None => source,
        })
    }

    /// The trace's metadata, as its start says (CSV and Parquet learn their thread count
    /// only as they are read).
    pub fn metadata(&self) -> Result<Metadata> {
        Ok(self.open()?.metadata().clone())
    }
}

/// Counts a source's accesses by reading it.
fn count(mut source: Box<dyn TraceSource>) -> Result<u64> {
    let mut n = 0;
    source.for_each_chunk(&mut |c| {
        n += c.accesses.len() as u64;
        Ok(())
    })?;
    Ok(n)
}

/// A shared in-memory trace read from its start.
struct MemoryReader {
    trace: Arc<MemoryTrace>,
    next: usize,
}

impl TraceSource for MemoryReader {
    fn metadata(&self) -> &Metadata {
        self.trace.metadata()
    }

    fn next_chunk(&mut self, out: &mut Chunk) -> sharemap_trace::Result<bool> {
        let Some(c) = self.trace.chunk(self.next) else { return Ok(false) };
        self.next += 1;
        out.clone_from(c);
        Ok(true)
    }

    fn access_count_hint(&self) -> Option<u64> {
        Some(self.trace.accesses())
    }
}

/// A reader that fails at its next chunk once `stop` is set.
struct Stoppable {
    inner: Box<dyn TraceSource>,
    stop: Arc<AtomicBool>,
}

impl Stoppable {
    fn check(&self) -> sharemap_trace::Result<()> {
        if self.stop.load(Ordering::Relaxed) { Err(TraceError::Interrupted) } else { Ok(()) }
    }
}

impl TraceSource for Stoppable {
    fn metadata(&self) -> &Metadata {
        self.inner.metadata()
    }

    fn next_chunk(&mut self, out: &mut Chunk) -> sharemap_trace::Result<bool> {
        self.check()?;
        self.inner.next_chunk(out)
    }

    fn access_count_hint(&self) -> Option<u64> {
        self.inner.access_count_hint()
    }

    fn truncated_at(&self) -> Option<u64> {
        self.inner.truncated_at()
    }

    fn for_each_chunk(
        &mut self,
        sink: &mut dyn FnMut(&Chunk) -> sharemap_trace::Result<()>,
    ) -> sharemap_trace::Result<()> {
        let stop = self.stop.clone();
        self.inner.for_each_chunk(&mut |c| {
            if stop.load(Ordering::Relaxed) {
                return Err(TraceError::Interrupted);
            }
            sink(c)
        })
    }

    fn for_each_chunk_unordered(
        &mut self,
        sink: &(dyn Fn(usize, &Chunk) -> sharemap_trace::Result<()> + Sync),
    ) -> sharemap_trace::Result<()> {
        let stop = self.stop.clone();
        self.inner.for_each_chunk_unordered(&|w, c| {
            if stop.load(Ordering::Relaxed) {
                return Err(TraceError::Interrupted);
            }
            sink(w, c)
        })
    }

    fn for_each_chunk_in_parts(
        &mut self,
        parts: usize,
        sink: &(dyn Fn(usize, &Chunk) -> sharemap_trace::Result<()> + Sync),
    ) -> sharemap_trace::Result<()> {
        let stop = self.stop.clone();
        self.inner.for_each_chunk_in_parts(parts, &|w, c| {
            if stop.load(Ordering::Relaxed) {
                return Err(TraceError::Interrupted);
            }
            sink(w, c)
        })
    }
}

/// An excluding reader that records, when dropped, how many accesses it left out.
struct Counted<S: TraceSource> {
    inner: Excluding<S>,
    most: Arc<AtomicU64>,
}

impl<S: TraceSource> Drop for Counted<S> {
    fn drop(&mut self) {
        self.most.fetch_max(self.inner.excluded, Ordering::Relaxed);
    }
}

impl<S: TraceSource> TraceSource for Counted<S> {
    fn metadata(&self) -> &Metadata {
        self.inner.metadata()
    }

    fn next_chunk(&mut self, out: &mut Chunk) -> sharemap_trace::Result<bool> {
        self.inner.next_chunk(out)
    }

    fn access_count_hint(&self) -> Option<u64> {
        self.inner.access_count_hint()
    }

    fn truncated_at(&self) -> Option<u64> {
        self.inner.truncated_at()
    }
}
