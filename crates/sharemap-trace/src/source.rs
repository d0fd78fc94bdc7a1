//! The reading side every analysis takes: a [`TraceSource`] hands out a trace's metadata and
//! then its chunks in trace order. Each format's reader implements it, and so does
//! [`MemoryTrace`], so an analysis runs on a file or on accesses built in a test alike.

use crate::batch::Chunk;
use crate::error::Result;
use crate::model::{Access, Event, EventKind, Metadata};
use crate::native::DEFAULT_CHUNK_ACCESSES;

/// A trace being read, chunk by chunk, in trace order.
pub trait TraceSource: Send {
    /// Metadata; for CSV and Parquet the thread count grows as chunks are read.
    fn metadata(&self) -> &Metadata;

    /// Fills `out` with the next chunk; `false` when there are no more.
    fn next_chunk(&mut self, out: &mut Chunk) -> Result<bool>;

    /// Number of accesses, when known before reading (for progress bars and sizing).
    fn access_count_hint(&self) -> Option<u64> {
        None
    }

    /// Where a truncated file's data ends (None when complete or not a file).
    fn truncated_at(&self) -> Option<u64> {
        None
    }

    /// Hands every remaining chunk to `sink`, in trace order. Formats that can decode ahead
    /// do so on the other cores while `sink` works.
    fn for_each_chunk(&mut self, sink: &mut dyn FnMut(&Chunk) -> Result<()>) -> Result<()> {
        let mut chunk = Chunk::default();
        while self.next_chunk(&mut chunk)? {
            sink(&chunk)?;
        }
        Ok(())
    }

    /// Hands every remaining chunk to `sink` with the index of the worker calling it (below
    /// rayon's thread count), in no particular order: for analyses that merge per-worker
    /// states. Formats that can decode in parallel call it from every worker at once.
    fn for_each_chunk_unordered(&mut self, sink: &(dyn Fn(usize, &Chunk) -> Result<()> + Sync)) -> Result<()> {
        self.for_each_chunk(&mut |chunk| sink(0, chunk))
    }

    /// Splits the remaining chunks into at most `parts` contiguous runs in trace order and hands
    /// each run's chunks to `sink` in order, with the run's index (0 = earliest): for analyses
    /// that keep per-run state in trace order and join the runs afterwards. Formats that can
    /// decode in parallel read the runs at the same time; the others hand everything to run 0.
    fn for_each_chunk_in_parts(
        &mut self,
        parts: usize,
        sink: &(dyn Fn(usize, &Chunk) -> Result<()> + Sync),
    ) -> Result<()> {
        let _ = parts;
        self.for_each_chunk(&mut |chunk| sink(0, chunk))
    }
}

/// A borrowed or boxed source reads as the source it points to.
macro_rules! forward_source {
    ($($pointer:ty),*) => {$(
        impl<T: TraceSource + ?Sized> TraceSource for $pointer {
            fn metadata(&self) -> &Metadata {
                (**self).metadata()
            }
            fn next_chunk(&mut self, out: &mut Chunk) -> Result<bool> {
                (**self).next_chunk(out)
            }
            fn access_count_hint(&self) -> Option<u64> {
                (**self).access_count_hint()
            }
            fn truncated_at(&self) -> Option<u64> {
                (**self).truncated_at()
            }
            fn for_each_chunk(&mut self, sink: &mut dyn FnMut(&Chunk) -> Result<()>) -> Result<()> {
                (**self).for_each_chunk(sink)
            }
            fn for_each_chunk_unordered(
                &mut self,
                sink: &(dyn Fn(usize, &Chunk) -> Result<()> + Sync),
            ) -> Result<()> {
                (**self).for_each_chunk_unordered(sink)
            }
            fn for_each_chunk_in_parts(
                &mut self,
                parts: usize,
                sink: &(dyn Fn(usize, &Chunk) -> Result<()> + Sync),
            ) -> Result<()> {
                (**self).for_each_chunk_in_parts(parts, sink)
            }
        }
    )*};
}

forward_source!(&mut T, Box<T>);

/// A trace held in memory: built access by access (or event by event), then read as any
/// other. Reading it does not consume it; [`MemoryTrace::rewind`] starts over.
#[derive(Clone, Debug, Default)]
pub struct MemoryTrace {
    meta: Metadata,
    chunks: Vec<Chunk>,
    accesses: u64,
    next: usize,
    chunk_accesses: usize,
}

impl MemoryTrace {
    pub fn new(meta: Metadata) -> Self {
        MemoryTrace { meta, chunks: Vec::new(), accesses: 0, next: 0, chunk_accesses: DEFAULT_CHUNK_ACCESSES }
    }

    /// A trace of these accesses, with default metadata (4 KiB pages, 64-byte lines).
    pub fn from_accesses(accesses: impl IntoIterator<Item = Access>) -> Self {
        let mut t = MemoryTrace::new(Metadata::default());
        accesses.into_iter().for_each(|a| t.access(a));
        t
    }

    /// Chunks of at most `n` accesses from now on (tests use small ones to cross chunk edges).
    pub fn with_chunk_accesses(mut self, n: usize) -> Self {
        self.chunk_accesses = n.max(1);
        self
    }

    fn open_chunk(&mut self) -> &mut Chunk {
        let full = self.chunks.last().is_none_or(|c| c.accesses.len() >= self.chunk_accesses);
        if full {
            self.chunks.push(Chunk { first_access: self.accesses, ..Chunk::default() });
        }
        self.chunks.last_mut().expect("just ensured")
    }

    pub fn access(&mut self, a: Access) {
        self.open_chunk().accesses.push(a);
        self.accesses += 1;
        self.meta.threads = self.meta.threads.max(a.thread + 1);
    }

    /// An event just before the next access.
    pub fn event(&mut self, thread: u32, kind: EventKind, arg: u64, label: &str) {
        self.push_event(&Event::new(0, thread, kind, arg, label));
    }

    /// `e` just before the next access (its own position is not used).
    pub fn push_event(&mut self, e: &Event) {
        let at = self.accesses;
        // An event after a full chunk's last access still belongs to it (at == its end).
        let chunk = match self.chunks.last_mut() {
            Some(c) => c,
            None => self.open_chunk(),
        };
        chunk.events.push(Event { at, ..e.clone() });
        self.meta.threads = self.meta.threads.max(e.thread + 1);
    }

    /// An `alloc` event just before the next access: `size` bytes at `addr`, by `how`, from
    /// code address `site`.
    pub fn alloc(&mut self, thread: u32, addr: u64, size: u64, site: u64, how: &str) {
        self.push_event(&Event::alloc(0, thread, addr, size, site, how));
    }

    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// The k-th chunk, for readers of a shared trace.
    pub fn chunk(&self, k: usize) -> Option<&Chunk> {
        self.chunks.get(k)
    }

    /// Reads from the start again.
    pub fn rewind(&mut self) {
        self.next = 0;
    }
}

impl TraceSource for MemoryTrace {
    fn metadata(&self) -> &Metadata {
        &self.meta
    }

    fn next_chunk(&mut self, out: &mut Chunk) -> Result<bool> {
        let Some(c) = self.chunks.get(self.next) else { return Ok(false) };
        self.next += 1;
        out.clone_from(c);
        Ok(true)
    }

    fn access_count_hint(&self) -> Option<u64> {
        Some(self.accesses)
    }

    fn for_each_chunk(&mut self, sink: &mut dyn FnMut(&Chunk) -> Result<()>) -> Result<()> {
        while let Some(c) = self.chunks.get(self.next) {
            self.next += 1;
            sink(c)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::ChunkItem;

    #[test]
    fn a_memory_trace_reads_back_what_was_built_across_chunks() {
        let mut t = MemoryTrace::new(Metadata::default()).with_chunk_accesses(3);
        t.event(0, EventKind::ThreadStart, 0, "");
        for i in 0..7u64 {
            if i == 3 {
                t.event(2, EventKind::PhaseChange, 1, "two");
            }
            t.access(Access::read((i % 2) as u32, 64 * i, 8));
        }
        t.event(1, EventKind::ThreadExit, 0, "");
        assert_eq!((t.accesses(), t.metadata().threads, t.access_count_hint()), (7, 3, Some(7)));
        let mut order = Vec::new();
        let mut firsts = Vec::new();
        t.for_each_chunk(&mut |c| {
            firsts.push(c.first_access);
            for item in c.items() {
                order.push(match item {
                    ChunkItem::Access(a) => format!("a{}", a.addr / 64),
                    ChunkItem::Event(e) => format!("{}@{}", e.kind.name(), e.at),
                });
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(firsts, [0, 3, 6]);
        let expect = "thread-start@0 a0 a1 a2 phase-change@3 a3 a4 a5 a6 thread-exit@7";
        assert_eq!(order.join(" "), expect);
        // Read again after a rewind, chunk by chunk this time.
        t.rewind();
        let mut chunk = Chunk::default();
        let mut n = 0;
        while t.next_chunk(&mut chunk).unwrap() {
            n += chunk.accesses.len();
        }
        assert_eq!(n, 7);
    }
}
