//! Splits a trace into per-page reference streams, once, so every analysis can run page by
//! page in parallel.
//!
//! The trace is cut into runs of consecutive chunks, read at the same time, one worker each.
//! A run appends each reference to its page's chain as a 4-byte record (see `chains`); a
//! page's stream is then its chains in run order, read straight into the evaluating worker's
//! scratch. A run that outgrows its share of the memory budget writes its chains to a
//! temporary file and reuses its memory, so traces larger than RAM partition in bounded
//! memory. Policies that need state kept in trace order across pages (a profile sampler, a
//! TLB model: `Policy::prepass`) get a single run.

use crate::chains::{ChainStore, Cursor, SAMPLED, TLB_EVENT, WRITE};
use crate::page::{Page, Ref, Stream};
use crate::policies::Prepass;
use rayon::prelude::*;
use sharemap_core::{DenseIndex, PageSize, RecentPerThread};
use sharemap_decide::cache::PerThreadCache;
use sharemap_decide::sammu::Sammu;
use sharemap_machine::ThreadPlacement;
use sharemap_trace::{Chunk, EventKind, TraceError, TraceSource};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How to turn accesses into page references.
#[derive(Clone, Debug)]
pub struct PartitionOptions {
    pub page_size: PageSize,
    /// Where threads run: each reference carries its thread's node, and SAMMU's TLB model
    /// (per core, SMT siblings sharing) follows the cores.
    pub placement: ThreadPlacement,
    /// Bytes of references to hold in memory before spilling to temporary files.
    pub memory_budget: usize,
    /// What the chosen policies need computed in trace order (see `Policy::prepass`).
    pub prepass: Prepass,
}

/// Which accesses a profile sees (seed 001's profile sources), decided in trace order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplerKind {
    /// Accesses missing a per-thread cache; with `loads_only`, the loads among them (the
    /// long-latency-load proxy: a PMU samples loads; stores still bring lines in).
    CacheMiss { size: u64, ways: u32, line: u64, loads_only: bool },
    /// What Marathe & Mueller's profile samples (`sharemap_decide::marathe::Profiler`) in a
    /// trace of `line`-byte lines.
    Profile { source: sharemap_decide::marathe::Source, line: u64 },
}

/// Most runs a trace is cut into (each keeps its own page table until the runs are joined).
const MAX_RUNS: usize = 16;
const NO_PAGE: u32 = u32::MAX;

/// A trace split by page.
pub struct Partition {
    /// Page number (address / page size) of each page id; ids are in first-touch order.
    pub page_numbers: Vec<u64>,
    /// Rank of each page id by page number.
    pub address_rank: Vec<u32>,
    /// Number of references (accesses) in the trace.
    pub refs: u64,
    /// Position of the first init-done annotation, if any.
    pub init_done: Option<u64>,
    /// Positions of phase-change annotations, in order.
    pub phase_changes: Vec<u64>,
    /// Positions of every placement annotation (init-done, phase-change, roi-begin), in order.
    pub annotations: Vec<u64>,
    /// Whether anything went to disk (for reporting).
    pub spilled: bool,
    runs: Vec<ChainStore>,
    /// Page id * runs + run: the page's index in that run's chains, or NO_PAGE.
    local: Vec<u32>,
    /// Bytes a worker may use for one page's evaluation (see `page_memory`).
    page_memory: usize,
}

/// The share of the memory budget kept for evaluating pages, the rest holding the chains.
const EVALUATION_SHARE: usize = 4;
/// Of a worker's memory for a page: the part its references may take when read whole (a
/// page with more records is read window by window, `Page::streamed`), and the part one
/// window takes (several passes may be under way at once).
const WHOLE_PAGE_SHARE: usize = 2;
const WINDOW_SHARE: usize = 32;
/// The least memory a worker gets for a page, whatever the budget.
const MIN_PAGE_MEMORY: usize = 1 << 20;

impl Partition {
    /// Reads the whole trace. `progress` is told the number of accesses read so far.
    pub fn build(
        reader: &mut dyn TraceSource,
        opts: &PartitionOptions,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Partition, TraceError> {
        let workers = rayon::current_num_threads().max(1);
        let evaluation = opts.memory_budget / EVALUATION_SHARE;
        let page_memory = (evaluation / workers).max(MIN_PAGE_MEMORY);
        let chains = opts.memory_budget - evaluation;
        if opts.prepass.sampler.is_some() || opts.prepass.tlb.is_some() || opts.prepass.mappings.is_some() {
            return Ok(Self::join(vec![build_in_order(reader, opts, chains, progress)?], page_memory));
        }
        let runs = workers.clamp(1, MAX_RUNS);
        let builders: Vec<Mutex<Builder>> = (0..runs).map(|_| Mutex::new(Builder::new(opts, chains / runs))).collect();
        let read = AtomicU64::new(0);
        reader.for_each_chunk_in_parts(runs, &|run, chunk| {
            builders[run].lock().unwrap_or_else(|e| e.into_inner()).chunk(chunk, None)?;
            let n = chunk.accesses.len() as u64;
            progress(read.fetch_add(n, Ordering::Relaxed) + n);
            Ok(())
        })?;
        let builders: Vec<Builder> =
            builders.into_iter().map(|b| b.into_inner().unwrap_or_else(|e| e.into_inner())).collect();
        Ok(Self::join(builders, page_memory))
    }

    /// Pages get ids in first-touch order: the first run's in its order, then each later
    /// run's new ones.
    fn join(builders: Vec<Builder>, page_memory: usize) -> Partition {
        let n = builders.len();
        let mut ids = DenseIndex::default();
        let (mut page_numbers, mut local) = (Vec::new(), Vec::new());
        let (mut init_done, mut phase_changes, mut annotations) = (None, Vec::new(), Vec::new());
        let (mut refs, mut spilled) = (0, false);
        let mut runs = Vec::with_capacity(n);
        for (r, b) in builders.into_iter().enumerate() {
            for (l, &number) in b.numbers.iter().enumerate() {
                let (id, new) = ids.id(number);
                if new {
                    page_numbers.push(number);
                    local.resize(local.len() + n, NO_PAGE);
                }
                local[id as usize * n + r] = l as u32;
            }
            init_done = init_done.or(b.init_done);
            phase_changes.extend(b.phase_changes);
            annotations.extend(b.annotations);
            refs = refs.max(b.end);
            spilled |= b.store.spilled();
            runs.push(b.store);
        }
        let mut order: Vec<u32> = (0..page_numbers.len() as u32).collect();
        order.sort_unstable_by_key(|&id| page_numbers[id as usize]);
        let mut address_rank = vec![0u32; page_numbers.len()];
        for (rank, &id) in order.iter().enumerate() {
            address_rank[id as usize] = rank as u32;
        }
        Partition {
            page_numbers,
            address_rank,
            refs,
            init_done,
            phase_changes,
            annotations,
            spilled,
            runs,
            local,
            page_memory,
        }
    }

    /// Bytes one worker may use while it evaluates a page, whatever the page's length: a
    /// window of its references, and what the optimum keeps in memory before spilling.
    pub fn page_memory(&self) -> usize {
        self.page_memory
    }

    /// The same partition with this much memory per worker for one page (the budget sets
    /// it otherwise): a smaller figure reads more pages window by window.
    pub fn with_page_memory(self, bytes: usize) -> Self {
        Partition { page_memory: bytes, ..self }
    }

    /// Most records of a streamed page decoded at once in one pass.
    fn window(&self) -> usize {
        (self.page_memory / WINDOW_SHARE / size_of::<Ref>()).max(1)
    }

    pub fn pages(&self) -> usize {
        self.page_numbers.len()
    }

    /// Runs `f` on every page, in parallel by groups of consecutive page ids, each group with
    /// its own state from `init`; returns the groups' states in page order (so totals summed
    /// from them do not depend on scheduling).
    pub fn par_pages<S: Send>(
        &self,
        init: impl Fn() -> S + Sync,
        f: impl Fn(&mut S, &Page) + Sync,
    ) -> std::io::Result<Vec<S>> {
        self.par_pages_where(init, |_, _| false, f)
    }

    /// As `par_pages`, but pages that `handled(state, id)` takes are not read.
    fn par_pages_where<S: Send>(
        &self,
        init: impl Fn() -> S + Sync,
        handled: impl Fn(&mut S, usize) -> bool + Sync,
        f: impl Fn(&mut S, &Page) + Sync,
    ) -> std::io::Result<Vec<S>> {
        let pages = self.pages();
        let per_group = pages.div_ceil(16 * rayon::current_num_threads().max(1)).clamp(1, 1024);
        (0..pages.div_ceil(per_group))
            .into_par_iter()
            .map_init(Scratch::default, |scratch, group| {
                let mut state = init();
                for id in group * per_group..((group + 1) * per_group).min(pages) {
                    if handled(&mut state, id) {
                        continue;
                    }
                    let (number, rank) = (self.page_numbers[id], self.address_rank[id]);
                    if self.records(id) <= (self.page_memory / WHOLE_PAGE_SHARE / size_of::<Ref>()) as u64 {
                        self.read(id, scratch)?;
                        let page = Page::new(number, id as u32, rank, &scratch.refs, &scratch.events);
                        f(&mut state, &page);
                    } else {
                        // A hot page: every pass reads it again, a window at a time.
                        let stream = Stream { part: self, id, window: self.window(), error: Mutex::new(None) };
                        let page = Page::streamed(number, id as u32, rank, &stream);
                        f(&mut state, &page);
                        if let Some(e) = stream.error.into_inner().unwrap_or_else(|e| e.into_inner()) {
                            return Err(e);
                        }
                    }
                }
                Ok(state)
            })
            .collect()
    }

    /// Runs `private` on every page only one node references (with the number of its
    /// references, which are not read) and `f` on the others, as `par_pages` does.
    pub fn par_pages_or_private<S: Send>(
        &self,
        init: impl Fn() -> S + Sync,
        private: impl Fn(&mut S, u64) + Sync,
        f: impl Fn(&mut S, &Page) + Sync,
    ) -> std::io::Result<Vec<S>> {
        self.par_pages_where(init, |s, id| self.private(id).map(|n| private(s, n)).is_some(), f)
    }

    /// The number of references of page `id` when they are all plain accesses from one node.
    fn private(&self, id: usize) -> Option<u64> {
        let n = self.runs.len();
        let mut only = None;
        let mut refs = 0;
        for (run, &l) in self.runs.iter().zip(&self.local[id * n..(id + 1) * n]) {
            if l != NO_PAGE {
                let (node, count) = run.private(l as usize)?;
                if only.is_some_and(|o| o != node) {
                    return None;
                }
                only = Some(node);
                refs += count;
            }
        }
        Some(refs)
    }

    /// How many records page `id` has in all runs (see `ChainStore::records`).
    fn records(&self, id: usize) -> u64 {
        let n = self.runs.len();
        let locals = &self.local[id * n..(id + 1) * n];
        self.runs.iter().zip(locals).filter(|&(_, &l)| l != NO_PAGE).map(|(run, &l)| run.records(l as usize)).sum()
    }

    /// Decodes at most `max` more records of page `id` where `reader` left off (see
    /// `ChainStore::read_some`); false once the page is read to the end.
    pub(crate) fn read_some(
        &self,
        id: usize,
        reader: &mut PageReader,
        max: usize,
        buf: &mut Vec<u8>,
        mut refs: Option<&mut Vec<Ref>>,
        mut events: Option<&mut Vec<Ref>>,
    ) -> std::io::Result<bool> {
        let n = self.runs.len();
        let mut left = max;
        while left > 0 && reader.run < n {
            let l = self.local[id * n + reader.run];
            if l == NO_PAGE {
                reader.run += 1;
                continue;
            }
            let store = &self.runs[reader.run];
            let cursor = reader.cursor.get_or_insert_with(|| store.cursor(l as usize));
            if store.read_some(cursor, &mut left, buf, refs.as_deref_mut(), events.as_deref_mut())? {
                return Ok(true);
            }
            reader.run += 1;
            reader.cursor = None;
        }
        Ok(reader.run < n)
    }

    /// Page `id`'s references and events, run after run.
    fn read(&self, id: usize, s: &mut Scratch) -> std::io::Result<()> {
        s.refs.clear();
        s.events.clear();
        let n = self.runs.len();
        for (run, &l) in self.runs.iter().zip(&self.local[id * n..(id + 1) * n]) {
            if l != NO_PAGE {
                run.read(l as usize, &mut s.buf, &mut s.refs, &mut s.events)?;
            }
        }
        Ok(())
    }
}

/// Where a pass over one page has got to: the run, and the reading of its chain there.
#[derive(Default)]
pub(crate) struct PageReader {
    run: usize,
    cursor: Option<Cursor>,
}

/// A worker's buffers for one page at a time.
#[derive(Default)]
struct Scratch {
    refs: Vec<Ref>,
    events: Vec<Ref>,
    buf: Vec<u8>,
}

/// One run being read: its pages in first-touch order and their chains.
struct Builder {
    shift: u32,
    threads: ThreadTable,
    ids: DenseIndex,
    numbers: Vec<u64>,
    /// Each thread's last two pages: most accesses find their page there.
    recent: RecentPerThread,
    store: ChainStore,
    init_done: Option<u64>,
    phase_changes: Vec<u64>,
    annotations: Vec<u64>,
    end: u64,
}

impl Builder {
    fn new(opts: &PartitionOptions, budget: usize) -> Self {
        Builder {
            shift: opts.page_size.shift(),
            threads: ThreadTable::new(&opts.placement),
            ids: DenseIndex::default(),
            numbers: Vec::new(),
            recent: RecentPerThread::default(),
            store: ChainStore::new(budget),
            init_done: None,
            phase_changes: Vec::new(),
            annotations: Vec::new(),
            end: 0,
        }
    }

    /// Adds a chunk's accesses, with what the in-order pass found in it, if it ran.
    fn chunk(&mut self, chunk: &Chunk, seen: Option<&InOrderMarks>) -> Result<(), TraceError> {
        for e in &chunk.events {
            match e.kind {
                EventKind::InitDone => {
                    self.init_done.get_or_insert(e.at);
                    self.annotations.push(e.at);
                }
                EventKind::PhaseChange => {
                    self.phase_changes.push(e.at);
                    self.annotations.push(e.at);
                }
                EventKind::RoiBegin => self.annotations.push(e.at),
                _ => {}
            }
        }
        let a = &chunk.accesses;
        self.threads.cover(a);
        let nodes = &self.threads.nodes;
        let mut tlb_events = seen.map_or(&[][..], |s| &s.tlb_events[..]).iter().peekable();
        for i in 0..a.len() {
            let thread = a.thread[i] as usize;
            let number = a.addr[i] >> self.shift;
            let page = match self.recent.get(thread, number) {
                Some(id) => id,
                None => {
                    let (id, new) = self.ids.id(number);
                    if new {
                        self.numbers.push(number);
                        self.store.add_page();
                    }
                    self.recent.put(thread, number, id);
                    id
                }
            };
            let mut flags = if a.is_write(i) { WRITE } else { 0 };
            if seen.is_some_and(|s| s.sampled[i]) {
                flags |= SAMPLED;
            }
            let at = chunk.first_access + i as u64;
            self.store.push(page as usize, at, nodes[thread], flags).map_err(spill_error)?;
            // TLB events this access caused, after it.
            while let Some(&(_, number, node)) = tlb_events.next_if(|e| e.0 == at) {
                // The page was touched before, so it has an id.
                let page = self.ids.get(number).expect("touched before");
                self.store.push(page as usize, at, node, TLB_EVENT).map_err(spill_error)?;
            }
        }
        self.end = chunk.first_access + a.len() as u64;
        Ok(())
    }
}

/// Node and core of threads 0, 1, 2...: as far as the highest thread seen (a division per
/// access to wrap around the placement would cost more than the rest of the loop).
struct ThreadTable {
    placement: ThreadPlacement,
    nodes: Vec<u16>,
    cores: Vec<usize>,
}

impl ThreadTable {
    fn new(placement: &ThreadPlacement) -> Self {
        ThreadTable { placement: placement.clone(), nodes: Vec::new(), cores: Vec::new() }
    }

    fn cover(&mut self, a: &sharemap_trace::AccessBatch) {
        let threads = a.thread.iter().max().map_or(0, |&t| t as usize + 1);
        for t in self.nodes.len()..threads {
            self.nodes.push(self.placement.node(t as u32) as u16);
            self.cores.push(self.placement.core(t as u32));
        }
    }
}

/// What the in-order pass found in one chunk: which accesses the profile sampled, and the
/// TLB events (position, page number, node) in order.
#[derive(Default)]
struct InOrderMarks {
    sampled: Vec<bool>,
    tlb_events: Vec<(u64, u64, u16)>,
}

/// The state policies need kept in trace order across pages (`Policy::prepass`): a profile
/// sampler and SAMMU's TLB model.
struct InOrder {
    shift: u32,
    threads: ThreadTable,
    sampler: Option<Sampler>,
    tlb: Option<Sammu>,
    /// Per thread, the TLB holding its mappings (seed 003): its evictions are events.
    mappings: Option<PerThreadCache>,
}

impl InOrder {
    fn new(opts: &PartitionOptions) -> Self {
        let p = &opts.placement;
        InOrder {
            shift: opts.page_size.shift(),
            threads: ThreadTable::new(p),
            sampler: opts.prepass.sampler.map(|kind| Sampler::new(kind, opts.page_size.bytes())),
            tlb: opts.prepass.tlb.map(|params| Sammu::new(params, p.cores(), p.nodes()).log_updates()),
            mappings: opts
                .prepass
                .mappings
                .map(|entries| PerThreadCache::new(entries.max(1) as usize, 8, opts.page_size.bytes())),
        }
    }

    fn chunk(&mut self, chunk: &Chunk, out: &mut InOrderMarks) {
        let a = &chunk.accesses;
        self.threads.cover(a);
        out.sampled.clear();
        out.sampled.resize(a.len(), false);
        out.tlb_events.clear();
        for i in 0..a.len() {
            let thread = a.thread[i] as usize;
            if let Some(s) = self.sampler.as_mut() {
                out.sampled[i] = s.marks(thread, a.addr[i], a.is_write(i));
            }
            if let Some(tlb) = self.mappings.as_mut()
                && let (_, Some(evicted)) = tlb.access(thread, a.addr[i])
            {
                // The thread's node no longer maps that page: an event on it, here.
                out.tlb_events.push((chunk.first_access + i as u64, evicted, self.threads.nodes[thread]));
            }
            if let Some(model) = self.tlb.as_mut() {
                let (core, node) = (self.threads.cores[thread], self.threads.nodes[thread]);
                model.access(thread as u32, core, node as usize, a.addr[i] >> self.shift);
                let at = chunk.first_access + i as u64;
                if model.has_updates() {
                    out.tlb_events.extend(model.take_updates().map(|(number, node)| (at, number, node as u16)));
                }
            }
        }
    }
}

/// The single run of an in-order partition: this thread runs the in-order pass on each
/// chunk while another builds the chains from what it found, a few chunks behind.
fn build_in_order(
    reader: &mut dyn TraceSource,
    opts: &PartitionOptions,
    budget: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Builder, TraceError> {
    type Work = (Chunk, InOrderMarks);
    let (to_chains, work) = std::sync::mpsc::sync_channel::<Work>(8);
    let (to_reuse, reused) = std::sync::mpsc::channel::<Work>();
    let mut in_order = InOrder::new(opts);
    std::thread::scope(|s| {
        let chains = s.spawn(move || {
            let mut builder = Builder::new(opts, budget);
            for (chunk, marks) in work {
                builder.chunk(&chunk, Some(&marks))?;
                progress(builder.end);
                // The reader may be gone already; the buffers are then just dropped.
                let _ = to_reuse.send((chunk, marks));
            }
            Ok::<_, TraceError>(builder)
        });
        let read = reader.for_each_chunk(&mut |chunk| {
            let (mut copy, mut marks) = reused.try_recv().unwrap_or_default();
            copy.clone_from(chunk);
            in_order.chunk(chunk, &mut marks);
            // A closed channel means the chain builder stopped on an error, reported below.
            let _ = to_chains.send((copy, marks));
            Ok(())
        });
        drop(to_chains);
        let built = chains.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        read?;
        built
    })
}

fn spill_error(e: std::io::Error) -> TraceError {
    TraceError::invalid(&std::env::temp_dir(), format!("cannot spill page references to a temporary file: {e}"))
}

/// Which accesses a sampler marks: misses of a per-thread cache (cache fills), or a
/// Marathe profile's samples (in trace order, of `page`-byte pages and `line`-byte lines).
enum Sampler {
    Misses { cache: PerThreadCache, loads_only: bool },
    Profile(sharemap_decide::marathe::Profiler),
}

impl Sampler {
    fn new(kind: SamplerKind, page: u64) -> Self {
        match kind {
            SamplerKind::CacheMiss { size, ways, line, loads_only } => Sampler::Misses {
                cache: PerThreadCache::new((size / line.max(1)) as usize, ways as usize, line),
                loads_only,
            },
            SamplerKind::Profile { source, line } => {
                // Place's table has no prefix: no length is needed.
                Sampler::Profile(
                    sharemap_decide::marathe::Profiler::new(source, line, page, None).expect("no prefix in place"),
                )
            }
        }
    }

    fn marks(&mut self, thread: usize, addr: u64, write: bool) -> bool {
        match self {
            Sampler::Misses { cache, loads_only } => cache.misses(thread, addr) && !(*loads_only && write),
            Sampler::Profile(p) => p.sample(thread, addr, write),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sharemap_trace::{Access, Metadata, TraceReader, TraceWriter};

    fn trace(accesses: &[Access]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut w = TraceWriter::create(&dir.path().join("t.smt"), None, Metadata::default()).unwrap();
        for (i, a) in accesses.iter().enumerate() {
            if i == 3 {
                w.event(0, EventKind::InitDone, 0, "").unwrap();
            }
            w.access(*a).unwrap();
        }
        w.finish().unwrap();
        dir
    }

    fn collect(p: &Partition) -> Vec<(u64, Vec<Ref>)> {
        let mut pages: Vec<(u64, Vec<Ref>)> = p
            .par_pages(Vec::new, |v: &mut Vec<(u64, Vec<Ref>)>, page| v.push((page.number, page.refs().collect())))
            .unwrap()
            .concat();
        pages.sort_by_key(|(n, _)| *n);
        pages
    }

    #[test]
    fn pages_get_their_references_in_order_in_memory_and_spilled() {
        let mut accesses = Vec::new();
        let mut x = 7u64;
        for i in 0..20_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let t = (x >> 60) as u32 % 4;
            let addr = (x >> 20) % (64 * 4096);
            accesses.push(if i % 3 == 0 { Access::write(t, addr, 8) } else { Access::read(t, addr, 8) });
        }
        let dir = trace(&accesses);
        let path = dir.path().join("t.smt");
        let nodes = vec![0u16, 1, 1, 0];
        let machine = sharemap_machine::Machine::from_spec("numa:2 pu:2").unwrap();
        let placement = ThreadPlacement::on_pus(&machine, vec![0, 2, 2, 0]).unwrap();
        assert_eq!(placement.node_list(), nodes);
        let mut expect: std::collections::BTreeMap<u64, Vec<Ref>> = Default::default();
        for (i, a) in accesses.iter().enumerate() {
            let r = Ref {
                at: i as u64,
                node: nodes[a.thread as usize],
                write: a.kind == sharemap_trace::Kind::Write,
                sampled: false,
            };
            expect.entry(a.addr / 4096).or_default().push(r);
        }
        let expect: Vec<(u64, Vec<Ref>)> = expect.into_iter().collect();
        for budget in [1 << 30, 4096] {
            let opts = PartitionOptions {
                page_size: PageSize::DEFAULT,
                placement: placement.clone(),
                memory_budget: budget,
                prepass: Prepass::default(),
            };
            let mut reader = TraceReader::open(&path, None).unwrap();
            let p = Partition::build(&mut reader, &opts, &|_| {}).unwrap();
            assert_eq!(p.spilled, budget == 4096);
            assert_eq!(p.refs, 20_000);
            assert_eq!(p.init_done, Some(3));
            assert_eq!(collect(&p), expect);
            // Ranks: by first touch (the id) and by address.
            let first = accesses[0].addr / 4096;
            assert_eq!(p.page_numbers[0], first);
            let mut sorted = p.page_numbers.clone();
            sorted.sort();
            for (id, &n) in p.page_numbers.iter().enumerate() {
                assert_eq!(sorted[p.address_rank[id] as usize], n);
            }
        }
    }

    #[test]
    fn tlb_events_reach_their_pages() {
        // One thread on one core walks pages 0..5 twice; with 2 + 2 TLB entries, page k
        // leaves the TLB when page k + 4 arrives (its only access: AC 1 >= AT 0, an update).
        let accesses: Vec<Access> = (0..2).flat_map(|_| (0..6u64).map(|p| Access::read(0, p * 4096, 8))).collect();
        let dir = trace(&accesses);
        let params = sharemap_decide::sammu::SammuParams {
            l1_entries: 2,
            l1_ways: 2,
            l2_entries: 2,
            l2_ways: 2,
            ..sharemap_decide::sammu::SammuParams::default()
        };
        // One thread, on the second of two single-core nodes.
        let machine = sharemap_machine::Machine::from_spec("numa:2 core:1 pu:1").unwrap();
        let opts = PartitionOptions {
            page_size: PageSize::DEFAULT,
            placement: ThreadPlacement::on_pus(&machine, vec![1]).unwrap(),
            memory_budget: 1 << 20,
            prepass: Prepass { tlb: Some(params), ..Prepass::default() },
        };
        let p =
            Partition::build(&mut TraceReader::open(&dir.path().join("t.smt"), None).unwrap(), &opts, &|_| {}).unwrap();
        let mut seen: Vec<(u64, Vec<u64>, usize)> = p
            .par_pages(Vec::new, |v: &mut Vec<(u64, Vec<u64>, usize)>, page| {
                assert!(page.events().all(|e| e.node == 1));
                v.push((page.number, page.events().map(|e| e.at).collect(), page.len() as usize))
            })
            .unwrap()
            .concat();
        seen.sort();
        // Page k's evictions: when page k + 4 is accessed, at positions k + 4 and k + 10
        // (the second walk), as long as those accesses exist; accesses stay two per page.
        for (k, events, refs) in &seen {
            let expect: Vec<u64> = [k + 4, k + 10].into_iter().filter(|&at| at < 12).collect();
            assert_eq!((events, *refs), (&expect, 2), "page {k}");
        }
    }
}
