//! One page's references, as every placement analysis sees them: a page small enough is
//! read into memory once; a longer one (a hot page) is read again, window by window, by
//! each pass over it, so that memory stays bounded whatever one page's share of the trace.

use crate::partition::{PageReader, Partition};
use std::sync::Mutex;

/// A reference to a page: when (the access's index in the trace), from which NUMA node,
/// read or write, and whether a profile source sampled it (see `marathe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ref {
    pub at: u64,
    pub node: u16,
    pub write: bool,
    pub sampled: bool,
}

impl Ref {
    pub fn read(at: u64, node: u16) -> Self {
        Ref { at, node, write: false, sampled: false }
    }

    pub fn write(at: u64, node: u16) -> Self {
        Ref { at, node, write: true, sampled: false }
    }
}

/// A page and its references in trace order.
#[derive(Clone, Copy)]
pub struct Page<'a> {
    /// Page number (address / page size).
    pub number: u64,
    /// Rank of the page by its first touch in the trace (0 = touched first).
    pub touch_rank: u32,
    /// Rank of the page by address among the trace's pages (0 = lowest).
    pub address_rank: u32,
    source: Source<'a>,
    len: u64,
    first: Option<Ref>,
    /// The node of every reference, when they all come from one (private data).
    only_node: Option<u16>,
}

#[derive(Clone, Copy)]
enum Source<'a> {
    Memory { refs: &'a [Ref], events: &'a [Ref] },
    Stream(&'a Stream<'a>),
}

/// A page read from its partition at every pass, at most `window` records at a time. A read
/// error ends the pass early and is kept in `error` for the caller to report (the tallies of
/// that page are then thrown away with the evaluation).
pub(crate) struct Stream<'a> {
    pub part: &'a Partition,
    pub id: usize,
    pub window: usize,
    pub error: Mutex<Option<std::io::Error>>,
}

impl<'a> Page<'a> {
    /// A page whose references (and TLB events) are in memory.
    pub fn new(number: u64, touch_rank: u32, address_rank: u32, refs: &'a [Ref], events: &'a [Ref]) -> Self {
        let only_node = refs.first().map(|r| r.node).filter(|&n| refs.iter().all(|r| r.node == n));
        let source = Source::Memory { refs, events };
        Page {
            number,
            touch_rank,
            address_rank,
            source,
            len: refs.len() as u64,
            first: refs.first().copied(),
            only_node,
        }
    }

    /// A page read from its partition at every pass; one pass here counts it.
    pub(crate) fn streamed(number: u64, touch_rank: u32, address_rank: u32, stream: &'a Stream<'a>) -> Self {
        let mut page = Page {
            number,
            touch_rank,
            address_rank,
            source: Source::Stream(stream),
            len: 0,
            first: None,
            only_node: None,
        };
        let mut mixed = false;
        for r in page.refs() {
            let first = *page.first.get_or_insert(r);
            mixed |= r.node != first.node;
            page.len += 1;
        }
        page.only_node = page.first.map(|r| r.node).filter(|_| !mixed);
        page
    }

    /// The page's references in trace order (a new pass each call).
    pub fn refs(&self) -> Refs<'a> {
        self.pass(false)
    }

    /// TLB events of the page in trace order, when a TLB model ran (see `InOrder` in
    /// `partition`): at the position of the access that caused them, from the node of the
    /// core whose TLB entry was evicted or saturated. Not accesses: nothing is charged for them.
    pub fn events(&self) -> Refs<'a> {
        self.pass(true)
    }

    fn pass(&self, events: bool) -> Refs<'a> {
        match self.source {
            Source::Memory { refs, events: ev } => Refs::Slice(if events { ev } else { refs }.iter()),
            Source::Stream(stream) => Refs::Window(Box::new(Window {
                stream,
                reader: PageReader::default(),
                buf: Vec::new(),
                pos: 0,
                bytes: Vec::new(),
                events,
                done: false,
            })),
        }
    }

    /// The page's references when they are in memory.
    pub(crate) fn in_memory(&self) -> Option<&'a [Ref]> {
        self.in_memory_with_events().map(|(refs, _)| refs)
    }

    /// The page's references and TLB events when they are in memory.
    pub(crate) fn in_memory_with_events(&self) -> Option<(&'a [Ref], &'a [Ref])> {
        match self.source {
            Source::Memory { refs, events } => Some((refs, events)),
            Source::Stream(_) => None,
        }
    }

    /// How many references the page has.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The page's first reference (its first touch).
    pub fn first(&self) -> Ref {
        self.first.expect("a page has references")
    }

    /// The same page with these TLB events (tests build pages in memory with their events).
    #[cfg(test)]
    pub(crate) fn with_events(self, events: &'a [Ref]) -> Self {
        match self.source {
            Source::Memory { refs, .. } => Page { source: Source::Memory { refs, events }, ..self },
            Source::Stream(_) => panic!("events are given to pages in memory only"),
        }
    }

    /// The same page with the private-page shortcut off: policies replay every reference.
    #[cfg(test)]
    pub(crate) fn replayed(self) -> Self {
        Page { only_node: None, ..self }
    }

    /// The node of every reference, when they all come from one: a policy that starts at
    /// the first touch and only ever moves a page to a node referencing it leaves such a
    /// page where it is, every reference local.
    pub fn only_node(&self) -> Option<u16> {
        self.only_node
    }
}

/// One pass over a page's references or events.
pub enum Refs<'a> {
    Slice(std::slice::Iter<'a, Ref>),
    Window(Box<Window<'a>>),
}

/// A pass over a streamed page: the current window and where the reading is.
pub struct Window<'a> {
    stream: &'a Stream<'a>,
    reader: PageReader,
    buf: Vec<Ref>,
    pos: usize,
    bytes: Vec<u8>,
    events: bool,
    done: bool,
}

impl Window<'_> {
    #[cold]
    fn refill(&mut self) -> Option<Ref> {
        self.buf.clear();
        self.pos = 0;
        while self.buf.is_empty() && !self.done {
            let s = self.stream;
            let (refs, events) = if self.events { (None, Some(&mut self.buf)) } else { (Some(&mut self.buf), None) };
            match s.part.read_some(s.id, &mut self.reader, s.window, &mut self.bytes, refs, events) {
                Ok(more) => self.done = !more,
                Err(e) => {
                    s.error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                    self.done = true;
                }
            }
        }
        let r = self.buf.first().copied();
        self.pos = 1;
        r
    }
}

impl Iterator for Refs<'_> {
    type Item = Ref;

    #[inline]
    fn next(&mut self) -> Option<Ref> {
        match self {
            Refs::Slice(it) => it.next().copied(),
            Refs::Window(w) => match w.buf.get(w.pos) {
                Some(&r) => {
                    w.pos += 1;
                    Some(r)
                }
                None => w.refill(),
            },
        }
    }

    /// Internal iteration (`for_each`, `count`, `Residence::stay`, ...) decides once whether
    /// the page is in memory, so that its loop runs over a plain slice, with the caller's
    /// closure inlined into it.
    #[inline]
    fn fold<B, F: FnMut(B, Ref) -> B>(self, init: B, mut f: F) -> B {
        match self {
            Refs::Slice(it) => it.fold(init, |acc, &r| f(acc, r)),
            Refs::Window(mut w) => fold_windows(&mut w, init, f),
        }
    }
}

/// The rest of a pass over a streamed page, window by window (kept out of line, so that
/// the slice loop of `Refs::fold` is the one the caller's closure gets inlined into).
#[inline(never)]
fn fold_windows<B, F: FnMut(B, Ref) -> B>(w: &mut Window, init: B, mut f: F) -> B {
    let mut acc = init;
    loop {
        acc = w.buf[w.pos..].iter().fold(acc, |acc, &r| f(acc, r));
        w.pos = w.buf.len();
        match w.refill() {
            Some(r) => acc = f(acc, r),
            None => return acc,
        }
    }
}
