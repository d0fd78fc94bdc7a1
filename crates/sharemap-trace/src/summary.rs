//! One streaming pass computing what `sharemap info` reports: totals, per-thread counts and
//! how pages are shared between threads.

use crate::batch::Chunk;
use crate::error::Result;
use crate::model::Metadata;
use crate::source::TraceSource;
use serde::Serialize;
use sharemap_core::DenseIndex;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ThreadSummary {
    pub thread: u32,
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    /// Distinct pages this thread touched.
    pub pages: u64,
    /// Pages this thread touched first.
    pub first_touches: u64,
    /// The CPUs (the kernel's numbers) the tracer saw it run on (`cpu` events).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<u32>,
    /// Its `cpu` events after the first: the moves between CPUs the tracer saw.
    pub cpu_changes: u64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SharingSummary {
    /// Number of pages touched by exactly k threads, for each k that occurs.
    pub pages_by_sharers: BTreeMap<u32, u64>,
    /// Pages touched by two threads or more.
    pub shared_pages: u64,
    /// Accesses that went to shared pages.
    pub accesses_to_shared_pages: u64,
    /// Shared pages written by at least one thread.
    pub shared_written_pages: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TraceSummary {
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    pub threads: u32,
    pub pages: u64,
    pub bytes_accessed: u64,
    pub min_addr: Option<u64>,
    pub max_addr: Option<u64>,
    pub events: BTreeMap<String, u64>,
    pub per_thread: Vec<ThreadSummary>,
    pub sharing: SharingSummary,
    pub metadata: Metadata,
}

/// Accumulates a summary chunk by chunk. Chunks may come in any order, and summarizers that
/// saw different chunks merge into the summary of them all (`merge`).
/// A page a thread is using and its accesses and writes not yet added to the page's counts.
#[derive(Clone, Copy)]
struct Pending {
    page: u64,
    index: u32,
    accesses: u32,
    writes: u32,
}

const EMPTY_SLOT: Pending = Pending { page: u64::MAX, index: 0, accesses: 0, writes: 0 };

pub struct Summarizer {
    page_shift: u32,
    /// Page number -> index into the per-page vectors below.
    index: DenseIndex,
    page_numbers: Vec<u64>,
    /// The first access to each page: its position and thread.
    page_first: Vec<(u64, u32)>,
    page_accesses: Vec<u64>,
    page_written: Vec<bool>,
    /// Threads of each page as a bitset of `stride` words per page.
    page_threads: Vec<u64>,
    stride: usize,
    /// Per thread, in the chunk being added: its last two pages and which it used last.
    slots: Vec<([Pending; 2], u8)>,
    threads: Vec<ThreadSummary>,
    events: BTreeMap<String, u64>,
    accesses: u64,
    bytes: u64,
    min_addr: u64,
    max_addr: u64,
}

impl Summarizer {
    pub fn new(page_size: u64) -> Self {
        Summarizer {
            page_shift: page_size.max(1).trailing_zeros(),
            index: DenseIndex::default(),
            page_numbers: Vec::new(),
            page_first: Vec::new(),
            page_accesses: Vec::new(),
            page_written: Vec::new(),
            page_threads: Vec::new(),
            stride: 1,
            slots: Vec::new(),
            threads: Vec::new(),
            events: BTreeMap::new(),
            accesses: 0,
            bytes: 0,
            min_addr: u64::MAX,
            max_addr: 0,
        }
    }

    fn grow(&mut self, t: usize) {
        if t < self.threads.len() {
            return;
        }
        let old = self.threads.len();
        self.threads.extend((old..=t).map(|i| ThreadSummary { thread: i as u32, ..Default::default() }));
        let stride = t / 64 + 1;
        if stride > self.stride {
            let mut bits = vec![0u64; self.page_accesses.len() * stride];
            for (p, row) in self.page_threads.chunks(self.stride).enumerate() {
                bits[p * stride..p * stride + self.stride].copy_from_slice(row);
            }
            self.page_threads = bits;
            self.stride = stride;
        }
    }

    pub fn add(&mut self, chunk: &Chunk) {
        for e in &chunk.events {
            *self.events.entry(e.kind.name().to_string()).or_default() += 1;
            self.grow(e.thread as usize);
            if e.kind == crate::EventKind::Cpu {
                let t = &mut self.threads[e.thread as usize];
                t.cpu_changes += 1;
                let cpu = e.arg.min(u32::MAX as u64) as u32;
                if let Err(i) = t.cpus.binary_search(&cpu) {
                    t.cpus.insert(i, cpu);
                }
            }
        }
        // Each chunk starts afresh, so that its first access to each page is compared with
        // the page's first access so far (chunks may come out of order).
        self.slots.clear();
        let a = &chunk.accesses;
        // Totals and extremes in loops of their own, which vectorise.
        if let Some(&t) = a.thread.iter().max() {
            self.grow(t as usize);
        }
        self.slots.resize(self.threads.len(), ([EMPTY_SLOT; 2], 1));
        let small: u64 = a.op.iter().map(|&op| (op & 0x7f) as u64).sum();
        let big: u64 = a.big_sizes.iter().filter(|&&(i, _)| a.op[i as usize] & 0x7f == 0).map(|&(_, n)| n as u64).sum();
        self.bytes += small + big;
        self.min_addr = a.addr.iter().fold(self.min_addr, |m, &x| m.min(x));
        self.max_addr = a.addr.iter().fold(self.max_addr, |m, &x| m.max(x));
        for i in 0..a.len() {
            let t = a.thread[i] as usize;
            let w = (a.op[i] >> 7) as u32;
            let page = a.addr[i] >> self.page_shift;
            let (s, last) = &mut self.slots[t];
            // Most accesses go to one of the thread's last two pages: counted in the slot.
            if let Some(k) = s.iter().position(|slot| slot.page == page) {
                s[k].accesses += 1;
                s[k].writes += w;
                *last = k as u8;
            } else {
                self.enter_page(t, page, chunk.first_access + i as u64, w);
            }
        }
        for t in 0..self.slots.len() {
            for k in 0..2 {
                self.flush_slot(t, k);
            }
        }
        self.accesses += a.len() as u64;
    }

    /// Thread t comes to `page` at position `at` (not among its last two pages in this
    /// chunk): the older of those two gets its counts added, and `page` takes its slot.
    #[cold]
    #[inline(never)]
    fn enter_page(&mut self, t: usize, page: u64, at: u64, w: u32) {
        let victim = 1 - self.slots[t].1 as usize;
        self.flush_slot(t, victim);
        let p = self.page(page, at, t as u32);
        self.page_threads[p as usize * self.stride + t / 64] |= 1u64 << (t % 64);
        self.slots[t] = {
            let (mut s, _) = self.slots[t];
            s[victim] = Pending { page, index: p, accesses: 1, writes: w };
            (s, victim as u8)
        };
    }

    /// Adds what slot k of thread t counted to its page and thread.
    fn flush_slot(&mut self, t: usize, k: usize) {
        let slot = self.slots[t].0[k];
        if slot.page == u64::MAX || slot.accesses == 0 {
            return;
        }
        self.page_accesses[slot.index as usize] += slot.accesses as u64;
        self.page_written[slot.index as usize] |= slot.writes > 0;
        self.threads[t].accesses += slot.accesses as u64;
        self.threads[t].writes += slot.writes as u64;
        self.slots[t].0[k] = Pending { accesses: 0, writes: 0, ..slot };
    }

    /// The page's index, made if new; `at` and `thread` become its first access if earlier.
    fn page(&mut self, page: u64, at: u64, thread: u32) -> u32 {
        let (p, new) = self.index.id(page);
        if new {
            self.page_numbers.push(page);
            self.page_first.push((at, thread));
            self.page_accesses.push(0);
            self.page_written.push(false);
            self.page_threads.resize(self.page_threads.len() + self.stride, 0);
        } else if at < self.page_first[p as usize].0 {
            self.page_first[p as usize] = (at, thread);
        }
        p
    }

    /// Adds what `other` saw (other chunks of the same trace).
    pub fn merge(&mut self, other: Summarizer) {
        if !other.threads.is_empty() {
            self.grow(other.threads.len() - 1);
        }
        for (mine, theirs) in self.threads.iter_mut().zip(&other.threads) {
            mine.accesses += theirs.accesses;
            mine.writes += theirs.writes;
            mine.cpu_changes += theirs.cpu_changes;
            for &cpu in &theirs.cpus {
                if let Err(i) = mine.cpus.binary_search(&cpu) {
                    mine.cpus.insert(i, cpu);
                }
            }
        }
        for (k, v) in other.events {
            *self.events.entry(k).or_default() += v;
        }
        for (q, &number) in other.page_numbers.iter().enumerate() {
            let (at, thread) = other.page_first[q];
            let p = self.page(number, at, thread) as usize;
            self.page_accesses[p] += other.page_accesses[q];
            self.page_written[p] |= other.page_written[q];
            let theirs = &other.page_threads[q * other.stride..(q + 1) * other.stride];
            for (w, bits) in self.page_threads[p * self.stride..].iter_mut().zip(theirs) {
                *w |= bits;
            }
        }
        self.accesses += other.accesses;
        self.bytes += other.bytes;
        self.min_addr = self.min_addr.min(other.min_addr);
        self.max_addr = self.max_addr.max(other.max_addr);
    }

    pub fn finish(mut self, mut metadata: Metadata) -> TraceSummary {
        let mut sharing = SharingSummary::default();
        for (p, row) in self.page_threads.chunks(self.stride).enumerate() {
            let k: u32 = row.iter().map(|w| w.count_ones()).sum();
            *sharing.pages_by_sharers.entry(k).or_default() += 1;
            if k > 1 {
                sharing.shared_pages += 1;
                sharing.accesses_to_shared_pages += self.page_accesses[p];
                sharing.shared_written_pages += self.page_written[p] as u64;
            }
        }
        for (p, row) in self.page_threads.chunks(self.stride).enumerate() {
            for (w, &bits) in row.iter().enumerate() {
                let mut bits = bits;
                while bits != 0 {
                    self.threads[w * 64 + bits.trailing_zeros() as usize].pages += 1;
                    bits &= bits - 1;
                }
            }
            self.threads[self.page_first[p].1 as usize].first_touches += 1;
        }
        for t in &mut self.threads {
            t.reads = t.accesses - t.writes;
            // The first `cpu` event says where the thread starts, not a move.
            t.cpu_changes = t.cpu_changes.saturating_sub(1);
        }
        let threads = (self.threads.len() as u32).max(metadata.threads);
        metadata.threads = threads;
        let writes = self.threads.iter().map(|t| t.writes).sum();
        TraceSummary {
            accesses: self.accesses,
            reads: self.accesses - writes,
            writes,
            threads,
            pages: self.page_accesses.len() as u64,
            bytes_accessed: self.bytes,
            min_addr: (self.accesses > 0).then_some(self.min_addr),
            max_addr: (self.accesses > 0).then_some(self.max_addr),
            events: self.events,
            per_thread: self.threads,
            sharing,
            metadata,
        }
    }
}

/// Reads the whole trace, chunk-parallel where the format allows (a summarizer per worker,
/// merged); `progress` is told how many accesses each chunk held.
pub fn summarize(reader: &mut dyn TraceSource, progress: impl Fn(u64) + Sync) -> Result<TraceSummary> {
    let page_size = reader.metadata().page_size;
    let workers: Vec<std::sync::Mutex<Summarizer>> =
        (0..rayon::current_num_threads().max(1)).map(|_| std::sync::Mutex::new(Summarizer::new(page_size))).collect();
    reader.for_each_chunk_unordered(&|worker, chunk| {
        // Each worker locks its own summarizer: never contended.
        workers[worker % workers.len()].lock().expect("a summarizer never panics").add(chunk);
        progress(chunk.accesses.len() as u64);
        Ok(())
    })?;
    let mut all = workers.into_iter().map(|m| m.into_inner().expect("a summarizer never panics"));
    let mut s = all.next().expect("at least one worker");
    all.for_each(|other| s.merge(other));
    Ok(s.finish(reader.metadata().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Access;

    #[test]
    fn counts_match_a_hand_built_trace() {
        let mut c = Chunk::default();
        // Thread 0 touches pages 0 and 1; thread 1 touches page 1 (shared) and page 2;
        // thread 70 (second bitset word) touches page 0 after thread 0.
        for a in [
            Access::write(0, 0x0000, 8),
            Access::read(1, 0x1008, 8),
            Access::read(0, 0x1000, 4),
            Access::read(0, 0x0010, 8),
            Access::write(1, 0x2000, 8),
            Access::read(70, 0x0ff8, 8),
        ] {
            c.accesses.push(a);
        }
        let mut s = Summarizer::new(4096);
        s.add(&c);
        let r = s.finish(Metadata::default());
        assert_eq!((r.accesses, r.reads, r.writes, r.threads, r.pages), (6, 4, 2, 71, 3));
        assert_eq!(r.per_thread[0].pages, 2);
        assert_eq!(r.per_thread[0].first_touches, 1);
        assert_eq!(r.per_thread[1].first_touches, 2, "page 1 was first touched by thread 1");
        assert_eq!(r.per_thread[70].pages, 1);
        assert_eq!(r.sharing.pages_by_sharers, BTreeMap::from([(1, 1), (2, 2)]));
        assert_eq!(r.sharing.shared_pages, 2);
        assert_eq!(r.sharing.accesses_to_shared_pages, 5);
        assert_eq!(r.sharing.shared_written_pages, 1);
        assert_eq!(r.bytes_accessed, 44);
    }

    proptest::proptest! {
        /// Chunks summarized in any order by several summarizers, merged, give exactly the
        /// summary of one summarizer reading them in order.
        #[test]
        fn merged_out_of_order_summaries_equal_the_sequential_one(
            accesses in proptest::collection::vec((0u32..70, 0u64..40_000, proptest::bool::ANY), 1..600),
            chunk in 1usize..50,
            order_seed in 0u64..1000,
            parts in 1usize..4,
        ) {
            let mut chunks = Vec::new();
            for (k, part) in accesses.chunks(chunk).enumerate() {
                let mut c = Chunk { first_access: (k * chunk) as u64, ..Chunk::default() };
                for &(t, addr, w) in part {
                    c.accesses.push(if w { Access::write(t, addr, 8) } else { Access::read(t, addr, 4) });
                }
                chunks.push(c);
            }
            let mut one = Summarizer::new(4096);
            chunks.iter().for_each(|c| one.add(c));
            let expect = serde_json::to_value(one.finish(Metadata::default())).unwrap();
            // A shuffled order, dealt round-robin to `parts` summarizers.
            let mut order: Vec<usize> = (0..chunks.len()).collect();
            let mut x = order_seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            for i in (1..order.len()).rev() {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                order.swap(i, (x >> 33) as usize % (i + 1));
            }
            let mut many: Vec<Summarizer> = (0..parts).map(|_| Summarizer::new(4096)).collect();
            for (k, &i) in order.iter().enumerate() {
                many[k % parts].add(&chunks[i]);
            }
            let mut merged = many.remove(0);
            many.into_iter().for_each(|m| merged.merge(m));
            proptest::prop_assert_eq!(serde_json::to_value(merged.finish(Metadata::default())).unwrap(), expect);
        }
    }
}
