//! Reading part of a trace: the region of interest its program marked (`sharemap_roi_begin`
//! and `sharemap_roi_end`), one of its phases (`sharemap_phase`), or a range of access
//! positions. [`Selection`] is what the user asks for, [`Selection::resolve`] turns it into a
//! [`Window`] from the trace's events, and [`Windowed`] reads a trace through the window:
//! every access outside it left out, every event kept at its place among the accesses kept
//! (as [`crate::exclude::Excluding`] does), so an analysis sees the window as if the program
//! had run only that.

use crate::batch::Chunk;
use crate::error::Result;
use crate::model::{Event, EventKind, Metadata};
use crate::source::TraceSource;
use std::cell::RefCell;

/// Which accesses of a trace to read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Selection {
    /// The region of interest when the trace marks one, else the whole trace.
    #[default]
    Auto,
    /// Every access, whatever the marks say.
    Whole,
    /// The region of interest; a trace without one is refused.
    Roi,
    /// Every span of one phase, by its number (from 1, as `sharemap_phase` numbers them and
    /// the generators write them) or its name.
    Phase(String),
    /// Access positions `start..end` (`end` None: to the trace's end).
    Range { start: u64, end: Option<u64> },
}

/// A selection that does not parse or that the trace cannot satisfy, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WindowError(pub String);

impl Selection {
    /// `--window`: `LO-HI` (HI excluded), `LO+COUNT` or `LO-` (to the end), access positions
    /// counted from 0 with the suffixes k, M and G (10^3, 10^6, 10^9).
    pub fn parse_range(text: &str) -> std::result::Result<Selection, WindowError> {
        let bad = || {
            WindowError(format!(
                "'{text}': expected LO-HI, LO+COUNT or LO- in accesses (suffixes k, M, G), e.g. 2M-10M"
            ))
        };
        let (start, end) = if let Some((a, b)) = text.split_once('+') {
            let start = count(a).ok_or_else(bad)?;
            (start, Some(start.checked_add(count(b).ok_or_else(bad)?).ok_or_else(bad)?))
        } else if let Some((a, b)) = text.split_once('-') {
            let end = if b.trim().is_empty() { None } else { Some(count(b).ok_or_else(bad)?) };
            (count(a).ok_or_else(bad)?, end)
        } else {
            return Err(bad());
        };
        if end.is_some_and(|e| e <= start) {
            return Err(WindowError(format!("'{text}': the window is empty")));
        }
        Ok(Selection::Range { start, end })
    }

    /// The window this selection reads of a trace with these `events` (in trace order) and
    /// `total` accesses: None for the whole trace.
    pub fn resolve(&self, events: &[Event], total: u64) -> std::result::Result<Option<Window>, WindowError> {
        let window = match self {
            Selection::Whole => return Ok(None),
            Selection::Auto if !events.iter().any(|e| e.kind == EventKind::RoiBegin) => return Ok(None),
            Selection::Auto | Selection::Roi => {
                let spans = roi_spans(events, total);
                if spans.is_empty() {
                    return Err(WindowError(
                        "the trace has no region of interest (its program never called sharemap_roi_begin)".into(),
                    ));
                }
                Window::new(spans, "the region of interest (sharemap_roi_begin/end)".into())
            }
            Selection::Phase(which) => phase_window(which, events, total)?,
            Selection::Range { start, end } => {
                if *start >= total {
                    return Err(WindowError(format!("the window starts at access {start}; the trace has {total}")));
                }
                let end = end.unwrap_or(total).min(total);
                Window::new(vec![(*start, end)], format!("accesses {start}-{end}"))
            }
        };
        if window.accesses() == 0 {
            // Marks around nothing are no region to read by default.
            if *self == Selection::Auto {
                return Ok(None);
            }
            return Err(WindowError(format!("{} holds no accesses", window.what)));
        }
        Ok(Some(window))
    }
}

fn count(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1_000),
        'm' | 'M' => (&t[..t.len() - 1], 1_000_000),
        'g' | 'G' => (&t[..t.len() - 1], 1_000_000_000),
        _ => (t, 1),
    };
    digits.replace('_', "").parse::<u64>().ok()?.checked_mul(mult)
}

/// Where the region of interest is open: from a begin at depth 0 to the end that closes it,
/// so nested marks and marks every thread of a parallel region makes (as likwid's API is
/// used) give one span. A region left open runs to the end; an end without a begin is ignored.
fn roi_spans(events: &[Event], total: u64) -> Vec<(u64, u64)> {
    let (mut spans, mut depth, mut opened) = (Vec::new(), 0u32, 0);
    for e in events {
        match e.kind {
            EventKind::RoiBegin => {
                if depth == 0 {
                    opened = e.at;
                }
                depth += 1;
            }
            EventKind::RoiEnd if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    spans.push((opened, e.at));
                }
            }
            _ => {}
        }
    }
    if depth > 0 {
        spans.push((opened, total));
    }
    spans
}

/// The spans of phase `which` (a number or a name): each from its phase change to the next.
fn phase_window(which: &str, events: &[Event], total: u64) -> std::result::Result<Window, WindowError> {
    let changes: Vec<&Event> = events.iter().filter(|e| e.kind == EventKind::PhaseChange).collect();
    let number: Option<u64> = which.trim().parse().ok();
    let chosen = |e: &Event| match number {
        Some(n) => e.arg == n,
        None => e.label == which.trim(),
    };
    let mut spans = Vec::new();
    for (i, e) in changes.iter().enumerate() {
        if chosen(e) {
            spans.push((e.at, changes.get(i + 1).map_or(total, |next| next.at)));
        }
    }
    if spans.is_empty() {
        let mut known: Vec<String> = Vec::new();
        for e in &changes {
            let name = if e.label.is_empty() { e.arg.to_string() } else { format!("{} ({})", e.arg, e.label) };
            if !known.contains(&name) {
                known.push(name);
            }
        }
        let have = if known.is_empty() {
            "the trace has no phases (its program never called sharemap_phase)".to_string()
        } else {
            format!("its phases: {}", known.join(", "))
        };
        return Err(WindowError(format!("no phase '{}' in the trace; {have}", which.trim())));
    }
    let label = changes.iter().find(|e| chosen(e)).map_or("", |e| e.label.as_str());
    let name = match (number, label.is_empty()) {
        (Some(n), true) => format!("phase {n}"),
        (Some(n), false) => format!("phase {n} ({label})"),
        (None, _) => format!("phase '{}'", which.trim()),
    };
    Ok(Window::new(spans, name))
}

/// The access positions a selection reads: sorted, disjoint spans `[start, end)` of the
/// trace's positions, and what they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    spans: Vec<(u64, u64)>,
    /// Accesses of the window before each span.
    before: Vec<u64>,
    /// What the window is, for the user: "the region of interest (...)", "phase 2 (solve)".
    pub what: String,
}

impl Window {
    pub fn new(mut spans: Vec<(u64, u64)>, what: String) -> Window {
        spans.retain(|&(a, b)| b > a);
        spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
        for (a, b) in spans {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let mut before = Vec::with_capacity(merged.len());
        let mut sum = 0;
        for &(a, b) in &merged {
            before.push(sum);
            sum += b - a;
        }
        Window { spans: merged, before, what }
    }

    pub fn spans(&self) -> &[(u64, u64)] {
        &self.spans
    }

    /// The accesses the window holds.
    pub fn accesses(&self) -> u64 {
        self.spans.last().map_or(0, |&(a, b)| self.before[self.before.len() - 1] + b - a)
    }

    /// The first position past the window.
    pub fn end(&self) -> u64 {
        self.spans.last().map_or(0, |s| s.1)
    }

    /// How many of the window's accesses come before trace position `p`: the position the
    /// access at `p` (or the event before it) has in the windowed trace.
    pub fn kept_before(&self, p: u64) -> u64 {
        let i = self.spans.partition_point(|&(_, hi)| hi <= p);
        match self.spans.get(i) {
            Some(&(lo, _)) => self.before[i] + p.saturating_sub(lo),
            None => self.accesses(),
        }
    }

    /// Ranges of `chunk`'s access indices inside the window, in order.
    pub fn inside(&self, chunk: &Chunk) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let lo = chunk.first_access;
        let hi = lo + chunk.accesses.len() as u64;
        let first = self.spans.partition_point(|&(_, end)| end <= lo);
        self.spans[first..]
            .iter()
            .take_while(move |&&(a, _)| a < hi)
            .map(move |&(a, b)| (a.max(lo) - lo) as usize..(b.min(hi) - lo) as usize)
    }

    /// Whether position `p` is inside a span or at its end.
    fn reaches(&self, p: u64) -> bool {
        let i = self.spans.partition_point(|&(_, hi)| hi < p);
        self.spans.get(i).is_some_and(|&(lo, _)| lo <= p)
    }

    /// `raw`'s accesses inside the window, renumbered, into `out`, with its events: all of
    /// them (where threads started and ran, and what was allocated, matters to what
    /// follows), except the region and phase marks outside the window, which would mark
    /// empty regions at its edges, and the access sites outside it, which would name the
    /// code of the window's first accesses.
    pub fn cut(&self, raw: &Chunk, out: &mut Chunk) {
        out.clear();
        out.first_access = self.kept_before(raw.first_access);
        for range in self.inside(raw) {
            out.accesses.extend_from(&raw.accesses, range);
        }
        let mark = |e: &Event| {
            matches!(e.kind, EventKind::RoiBegin | EventKind::RoiEnd | EventKind::PhaseChange | EventKind::AccessSite)
        };
        out.events.extend(
            raw.events
                .iter()
                .filter(|e| !mark(e) || self.reaches(e.at))
                .map(|e| Event { at: self.kept_before(e.at), ..e.clone() }),
        );
    }
}

/// A trace read through a window. Chunks are cut independently (a window's positions are
/// known before reading), so the parallel ways of reading stay parallel.
pub struct Windowed<S> {
    inner: S,
    window: Window,
    raw: Chunk,
}

impl<S: TraceSource> Windowed<S> {
    pub fn new(inner: S, window: Window) -> Self {
        Windowed { inner, window, raw: Chunk::default() }
    }
}

thread_local! {
    /// Each worker's chunk cut from the one it decoded.
    static CUT: RefCell<Chunk> = RefCell::new(Chunk::default());
}

/// Cuts `raw` on the calling thread's chunk and hands it on unless nothing is left.
fn cut_and_pass(window: &Window, raw: &Chunk, sink: impl FnOnce(&Chunk) -> Result<()>) -> Result<()> {
    CUT.with_borrow_mut(|out| {
        window.cut(raw, out);
        if out.accesses.is_empty() && out.events.is_empty() { Ok(()) } else { sink(out) }
    })
}

impl<S: TraceSource> TraceSource for Windowed<S> {
    fn metadata(&self) -> &Metadata {
        self.inner.metadata()
    }

    fn next_chunk(&mut self, out: &mut Chunk) -> Result<bool> {
        loop {
            if !self.inner.next_chunk(&mut self.raw)? {
                out.clear();
                out.first_access = self.window.accesses();
                return Ok(false);
            }
            self.window.cut(&self.raw, out);
            if !out.accesses.is_empty() || !out.events.is_empty() {
                return Ok(true);
            }
        }
    }

    /// Exact: the window's accesses.
    fn access_count_hint(&self) -> Option<u64> {
        Some(self.window.accesses())
    }

    fn truncated_at(&self) -> Option<u64> {
        self.inner.truncated_at()
    }

    fn for_each_chunk(&mut self, sink: &mut dyn FnMut(&Chunk) -> Result<()>) -> Result<()> {
        let window = &self.window;
        self.inner.for_each_chunk(&mut |raw| cut_and_pass(window, raw, &mut *sink))
    }

    fn for_each_chunk_unordered(&mut self, sink: &(dyn Fn(usize, &Chunk) -> Result<()> + Sync)) -> Result<()> {
        let window = &self.window;
        self.inner.for_each_chunk_unordered(&|worker, raw| cut_and_pass(window, raw, |c| sink(worker, c)))
    }

    fn for_each_chunk_in_parts(
        &mut self,
        parts: usize,
        sink: &(dyn Fn(usize, &Chunk) -> Result<()> + Sync),
    ) -> Result<()> {
        let window = &self.window;
        self.inner.for_each_chunk_in_parts(parts, &|part, raw| cut_and_pass(window, raw, |c| sink(part, c)))
    }
}

/// How the pages a window touches were first touched: those whose first touch in the whole
/// trace came before the window by another thread than their first toucher inside it are
/// homed by the OS's first touch where the windowed analyses do not put them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FirstTouch {
    /// Pages the window touches.
    pub pages: u64,
    /// Of those, the pages first touched outside the window, before it, by another thread.
    pub moved: u64,
}

/// Reads `source` (the whole trace) up to the window's end and counts [`FirstTouch`]: in
/// contiguous parts on every core, each part's first touches joined in trace order.
pub fn first_touch(source: &mut dyn TraceSource, window: &Window, page_shift: u32) -> Result<FirstTouch> {
    let parts = rayon::current_num_threads().max(1);
    let states: Vec<std::sync::Mutex<PartTouches>> = (0..parts).map(|_| Default::default()).collect();
    let end = window.end();
    source.for_each_chunk_in_parts(parts, &|part, chunk| {
        if chunk.first_access < end {
            states[part].lock().expect("no panic holds it").chunk(chunk, window, page_shift);
        }
        Ok(())
    })?;
    Ok(joined(states.into_iter().map(|s| s.into_inner().expect("no panic holds it"))))
}

/// A page's first touches within a part of the trace: its first access (whose thread, and
/// whether inside the window), and the first inside the window.
#[derive(Clone, Copy)]
struct Touches {
    first_thread: u32,
    first_inside: bool,
    inside_thread: Option<u32>,
}

/// A part's first touches, with a small direct-mapped memory of the pages that need no
/// further look (a stencil's loads move between a few pages at every access).
struct PartTouches {
    pages: rustc_hash::FxHashMap<u64, Touches>,
    /// Per slot, `page << 1 | decided`: the page has an entry (outside accesses change
    /// nothing), and when decided its first inside access too (no access changes anything).
    known: Vec<u64>,
}

const KNOWN_SLOTS: usize = 1024;

impl Default for PartTouches {
    fn default() -> Self {
        PartTouches { pages: Default::default(), known: vec![u64::MAX; KNOWN_SLOTS] }
    }
}

impl PartTouches {
    fn chunk(&mut self, chunk: &Chunk, window: &Window, page_shift: u32) {
        let a = &chunk.accesses;
        let mut outside_from = 0;
        for range in window.inside(chunk) {
            self.touch(&a.addr[outside_from..range.start], &a.thread[outside_from..range.start], false, page_shift);
            self.touch(&a.addr[range.clone()], &a.thread[range.clone()], true, page_shift);
            outside_from = range.end;
        }
        self.touch(&a.addr[outside_from..], &a.thread[outside_from..], false, page_shift);
    }

    fn touch(&mut self, addrs: &[u64], threads: &[u32], inside: bool, page_shift: u32) {
        for (&addr, &t) in addrs.iter().zip(threads) {
            let page = addr >> page_shift;
            let slot = &mut self.known[page as usize % KNOWN_SLOTS];
            if *slot >> 1 == page && (!inside || *slot & 1 == 1) {
                continue;
            }
            let entry = self.pages.entry(page).or_insert(Touches {
                first_thread: t,
                first_inside: inside,
                inside_thread: None,
            });
            if inside && entry.inside_thread.is_none() {
                entry.inside_thread = Some(t);
            }
            *slot = page << 1 | u64::from(entry.inside_thread.is_some());
        }
    }
}

/// The parts' first touches joined in trace order: a page's first access is in the first
/// part that touched it, its first inside the window in the first part that touched it there.
fn joined(parts: impl IntoIterator<Item = PartTouches>) -> FirstTouch {
    let mut all: rustc_hash::FxHashMap<u64, Touches> = Default::default();
    for part in parts {
        for (page, t) in part.pages {
            let e = all.entry(page).or_insert(t);
            if e.inside_thread.is_none() {
                e.inside_thread = t.inside_thread;
            }
        }
    }
    let mut out = FirstTouch::default();
    for t in all.values() {
        if let Some(inside) = t.inside_thread {
            out.pages += 1;
            out.moved += u64::from(!t.first_inside && t.first_thread != inside);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, MemoryTrace};
    use std::collections::BTreeMap;

    fn event(at: u64, kind: EventKind, arg: u64, label: &str) -> Event {
        Event::new(at, 0, kind, arg, label)
    }

    #[test]
    fn ranges_parse_with_suffixes_and_refuse_nonsense() {
        assert_eq!(
            Selection::parse_range("2M-10M").unwrap(),
            Selection::Range { start: 2_000_000, end: Some(10_000_000) }
        );
        assert_eq!(Selection::parse_range("100+50").unwrap(), Selection::Range { start: 100, end: Some(150) });
        assert_eq!(Selection::parse_range("1k-").unwrap(), Selection::Range { start: 1000, end: None });
        for bad in ["", "5", "x-9", "9-3", "4-4", "1+0"] {
            assert!(Selection::parse_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_roi_spans_nested_and_per_thread_marks_and_auto_falls_back_to_the_whole_trace() {
        let events = [
            event(10, EventKind::RoiBegin, 0, ""),
            event(12, EventKind::RoiBegin, 0, ""),
            event(20, EventKind::RoiEnd, 0, ""),
            event(25, EventKind::RoiEnd, 0, ""),
            event(30, EventKind::RoiEnd, 0, ""),
            event(40, EventKind::RoiBegin, 0, ""),
        ];
        let w = Selection::Auto.resolve(&events, 50).unwrap().unwrap();
        assert_eq!(w.spans(), &[(10, 25), (40, 50)]);
        assert_eq!(w.accesses(), 25);
        assert_eq!(Selection::Roi.resolve(&events, 50).unwrap(), Some(w));
        assert_eq!(Selection::Whole.resolve(&events, 50).unwrap(), None);
        assert_eq!(Selection::Auto.resolve(&[], 50).unwrap(), None);
        assert!(Selection::Roi.resolve(&[], 50).unwrap_err().0.contains("no region of interest"));
        // Marks around nothing.
        let empty = [event(5, EventKind::RoiBegin, 0, ""), event(5, EventKind::RoiEnd, 0, "")];
        assert!(Selection::Roi.resolve(&empty, 50).unwrap_err().0.contains("holds no accesses"));
        assert_eq!(Selection::Auto.resolve(&empty, 50).unwrap(), None);
    }

    #[test]
    fn a_phase_is_every_span_from_its_change_to_the_next_by_number_or_name() {
        let events = [
            event(0, EventKind::PhaseChange, 1, "init"),
            event(10, EventKind::PhaseChange, 2, "solve"),
            event(30, EventKind::PhaseChange, 1, "init"),
            event(35, EventKind::PhaseChange, 2, "solve"),
        ];
        let w = Selection::Phase("2".into()).resolve(&events, 60).unwrap().unwrap();
        assert_eq!((w.spans(), w.what.as_str()), (&[(10, 30), (35, 60)][..], "phase 2 (solve)"));
        assert_eq!(
            Selection::Phase("init".into()).resolve(&events, 60).unwrap().unwrap().spans(),
            &[(0, 10), (30, 35)]
        );
        let e = Selection::Phase("3".into()).resolve(&events, 60).unwrap_err();
        assert_eq!(e.0, "no phase '3' in the trace; its phases: 1 (init), 2 (solve)");
        assert!(Selection::Phase("1".into()).resolve(&[], 60).unwrap_err().0.contains("has no phases"));
        let e = Selection::Range { start: 60, end: None }.resolve(&events, 60).unwrap_err();
        assert_eq!(e.0, "the window starts at access 60; the trace has 60");
    }

    /// The windowed trace is the accesses whose positions are inside, in order, and every
    /// event before the kept access it preceded (checked against filtering by hand), however
    /// the trace is read.
    #[test]
    fn a_windowed_trace_keeps_the_accesses_inside_and_every_event_in_place() {
        let mut t = MemoryTrace::new(Default::default()).with_chunk_accesses(7);
        let window = Window::new(vec![(5, 23), (40, 41), (60, 100), (90, 95)], "test".into());
        let inside = |i: u64| (5..23).contains(&i) || i == 40 || (60..100).contains(&i);
        let (mut expect, mut expect_events) = (Vec::new(), Vec::new());
        for i in 0..120u64 {
            if i % 9 == 0 {
                t.event((i % 3) as u32, EventKind::Cpu, i, "");
                expect_events.push((expect.len() as u64, i));
            }
            let a = Access {
                thread: (i % 4) as u32,
                addr: 8 * i,
                size: if i % 11 == 0 { 200 } else { 8 },
                kind: crate::Kind::Write,
            };
            t.access(a);
            if inside(i) {
                expect.push(a);
            }
        }
        let mut w = Windowed::new(&mut t, window.clone());
        assert_eq!(w.access_count_hint(), Some(expect.len() as u64));
        let (mut got, mut events) = (Vec::new(), Vec::new());
        let mut c = Chunk::default();
        while w.next_chunk(&mut c).unwrap() {
            assert_eq!(c.first_access, got.len() as u64);
            got.extend(c.accesses.iter());
            events.extend(c.events.iter().map(|e| (e.at, e.arg)));
        }
        assert_eq!((got, events), (expect.clone(), expect_events.clone()));
        // In parts, in parallel: the same chunks.
        t.rewind();
        let parts = std::sync::Mutex::new(Vec::new());
        Windowed::new(&mut t, window)
            .for_each_chunk_in_parts(3, &|_, c| {
                parts.lock().unwrap().push((c.first_access, c.accesses.iter().collect::<Vec<_>>()));
                Ok(())
            })
            .unwrap();
        let mut parts = parts.into_inner().unwrap();
        parts.sort_by_key(|p| p.0);
        assert_eq!(parts.into_iter().flat_map(|p| p.1).collect::<Vec<_>>(), expect);
    }

    /// A window's own marks stay; those outside it go (they would mark empty regions at
    /// its edges).
    #[test]
    fn marks_outside_the_window_are_left_out() {
        let mut raw = Chunk::default();
        for i in 0..30 {
            raw.accesses.push(Access::read(0, 8 * i, 8));
        }
        raw.events = vec![
            event(0, EventKind::PhaseChange, 1, ""),
            event(0, EventKind::ThreadStart, 0, ""),
            event(10, EventKind::RoiBegin, 0, ""),
            event(20, EventKind::RoiEnd, 0, ""),
            event(25, EventKind::PhaseChange, 2, ""),
        ];
        let mut out = Chunk::default();
        Window::new(vec![(10, 20)], "roi".into()).cut(&raw, &mut out);
        let kept: Vec<(u64, EventKind)> = out.events.iter().map(|e| (e.at, e.kind)).collect();
        assert_eq!(kept, [(0, EventKind::ThreadStart), (0, EventKind::RoiBegin), (10, EventKind::RoiEnd)]);
    }

    /// Pages 0-3: page 0 first touched before the window by thread 0, inside by thread 1
    /// (moved); page 1 by thread 2 both times; page 2 only inside; page 3 only outside.
    #[test]
    fn first_touch_counts_the_pages_the_os_homed_elsewhere() {
        let page = |p: u64| p << 12;
        let mut t = MemoryTrace::from_accesses([
            Access::write(0, page(0), 8),
            Access::write(2, page(1), 8),
            Access::write(3, page(3), 8),
            Access::read(1, page(0), 8),
            Access::read(2, page(1), 8),
            Access::read(0, page(2), 8),
            Access::read(3, page(0), 8),
        ]);
        let window = Window::new(vec![(3, 7)], "test".into());
        assert_eq!(first_touch(&mut t, &window, 12).unwrap(), FirstTouch { pages: 3, moved: 1 });
    }

    /// Counted in contiguous parts and joined, the first touches are those of one pass, and
    /// both are those worked out by hand.
    #[test]
    fn first_touches_counted_in_parts_join_as_in_one_pass() {
        let mut t = MemoryTrace::new(Default::default()).with_chunk_accesses(50);
        let mut accesses = Vec::new();
        let mut x = 7u64;
        for _ in 0..1000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let a = Access::read((x >> 60) as u32 % 4, ((x >> 20) % 40) << 12, 8);
            t.access(a);
            accesses.push(a);
        }
        let window = Window::new(vec![(300, 450), (600, 700)], "test".into());
        let inside = |i: usize| (300..450).contains(&i) || (600..700).contains(&i);
        let mut first: BTreeMap<u64, u32> = BTreeMap::new();
        let mut first_inside: BTreeMap<u64, u32> = BTreeMap::new();
        for (i, a) in accesses.iter().enumerate() {
            first.entry(a.addr >> 12).or_insert(a.thread);
            if inside(i) {
                first_inside.entry(a.addr >> 12).or_insert(a.thread);
            }
        }
        let moved = first_inside.iter().filter(|(p, t)| first[p] != **t).count() as u64;
        let expect = FirstTouch { pages: first_inside.len() as u64, moved };
        assert!(moved > 0, "the trace exercises moved pages");
        assert_eq!(first_touch(&mut t, &window, 12).unwrap(), expect);
        let mut parts: Vec<PartTouches> = (0..3).map(|_| PartTouches::default()).collect();
        for k in 0..20 {
            parts[k * 3 / 20].chunk(t.chunk(k).unwrap(), &window, 12);
        }
        assert_eq!(joined(parts), expect);
    }
}
