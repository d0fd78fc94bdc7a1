//! Splits a trace into per-page reference streams, once, so every analysis can run page by
//! page in parallel. References are spread over buckets by page; when the buffered
//! references exceed the memory budget they are spilled to temporary files, so traces
//! larger than RAM partition in bounded memory. A bucket is then loaded on its own,
//! grouped by page with a counting sort, and handed out page by page.

use crate::page::{Page, Ref};
use crate::policies::Prepass;
use rayon::prelude::*;
use sharemap_core::{DenseIndex, PageSize, RecentPerThread, ThreadPlacement};
use sharemap_detect::cache::PerThreadCache;
use sharemap_detect::sammu::Sammu;
use sharemap_trace::{EventKind, TraceError, TraceSource};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

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
    /// Accesses missing a per-thread cache (the long-latency-load proxy).
    CacheMiss { size: u64, ways: u32, line: u64 },
    /// Accesses missing a per-thread data TLB.
    TlbMiss { entries: u32, ways: u32 },
}

/// One stored reference: 16 bytes.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct Rec {
    at: u64,
    page: u32,
    node: u16,
    flags: u16,
}

const WRITE: u16 = 1;
const SAMPLED: u16 = 2;
/// Not an access: a TLB event of the page from `node` at position `at`.
const TLB_EVENT: u16 = 4;
const REC_BYTES: usize = std::mem::size_of::<Rec>();

enum Store {
    Memory(Vec<Rec>),
    Spilled { file: File, tail: Vec<Rec>, len: usize },
}

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
    buckets: Vec<Store>,
    /// Whether anything went to disk (for reporting).
    pub spilled: bool,
    /// Whether a TLB model ran (records carry TLB events to separate from the accesses).
    tlb_events: bool,
}

/// Number of buckets: enough that every worker's bucket, loaded and grouped by page (two
/// copies), fits the budget together.
fn bucket_count(hint: Option<u64>, budget: usize) -> usize {
    let workers = rayon::current_num_threads().max(1);
    let floor = workers * 4;
    match hint {
        Some(n) => {
            let total = n as usize * REC_BYTES;
            floor.max(total.saturating_mul(2 * workers) / budget.max(1) + 1).min(4096)
        }
        None => 256,
    }
}

impl Partition {
    /// Reads the whole trace. `progress` is told the number of accesses read so far.
    pub fn build(
        reader: &mut dyn TraceSource,
        opts: &PartitionOptions,
        mut progress: impl FnMut(u64),
    ) -> Result<Partition, TraceError> {
        let shift = opts.page_size.shift();
        let hint = reader.access_count_hint();
        let nb = bucket_count(hint, opts.memory_budget);
        // Sized up front when the trace says how long it is (and it fits the budget): no
        // copying on growth.
        let per_bucket = hint
            .map_or(0, |n| n as usize / nb + n as usize / nb / 8 + 1024)
            .min(opts.memory_budget / REC_BYTES / nb + 1);
        let mut buffers: Vec<Vec<Rec>> = (0..nb).map(|_| Vec::with_capacity(per_bucket)).collect();
        let mut files: Vec<Option<(File, usize)>> = (0..nb).map(|_| None).collect();
        let mut ids = DenseIndex::default();
        let mut page_numbers = Vec::new();
        let (mut init_done, mut phase_changes, mut annotations) = (None, Vec::new(), Vec::new());
        let mut sampler = opts.prepass.sampler.map(Sampler::new);
        let core_list = opts.placement.core_list();
        let mut tlb = opts.prepass.tlb.map(|params| {
            let (cores, nodes) = (opts.placement.cores(), opts.placement.nodes());
            (Sammu::new(params, cores, nodes).log_updates(), core_list.as_slice())
        });
        let mut buffered = 0usize;
        let mut spilled = false;
        let mut refs = 0u64;
        let nodes = &opts.placement.node_list();
        // Each thread's last two pages: most accesses find their page there.
        let mut last = RecentPerThread::default();
        reader.for_each_chunk(&mut |chunk| {
            for e in &chunk.events {
                match e.kind {
                    EventKind::InitDone => {
                        init_done.get_or_insert(e.at);
                        annotations.push(e.at);
                    }
                    EventKind::PhaseChange => {
                        phase_changes.push(e.at);
                        annotations.push(e.at);
                    }
                    EventKind::RoiBegin => annotations.push(e.at),
                    _ => {}
                }
            }
            let a = &chunk.accesses;
            for i in 0..a.len() {
                let thread = a.thread[i] as usize;
                let number = a.addr[i] >> shift;
                let page = match last.get(thread, number) {
                    Some(id) => id,
                    None => {
                        let (id, new) = ids.id(number);
                        if new {
                            page_numbers.push(number);
                        }
                        last.put(thread, number, id);
                        id
                    }
                };
                let mut flags = if a.is_write(i) { WRITE } else { 0 };
                if let Some(s) = sampler.as_mut()
                    && s.misses(thread, a.addr[i])
                {
                    flags |= SAMPLED;
                }
                let node = nodes[thread % nodes.len()];
                let at = chunk.first_access + i as u64;
                buffers[page as usize % nb].push(Rec { at, page, node, flags });
                if let Some((model, core_of_thread)) = tlb.as_mut() {
                    let core = core_of_thread[thread % core_of_thread.len()];
                    model.access(thread as u32, core, node as usize, number);
                    for (number, node) in model.take_updates() {
                        // The page was touched before, so it has an id.
                        let page = ids.get(number).expect("touched before");
                        buffers[page as usize % nb].push(Rec { at, page, node: node as u16, flags: TLB_EVENT });
                        buffered += REC_BYTES;
                    }
                }
            }
            refs = chunk.first_access + a.len() as u64;
            buffered += a.len() * REC_BYTES;
            if buffered > opts.memory_budget {
                spill(&mut buffers, &mut files)?;
                buffered = 0;
                spilled = true;
            }
            progress(refs);
            Ok(())
        })?;
        let mut order: Vec<u32> = (0..page_numbers.len() as u32).collect();
        order.sort_unstable_by_key(|&id| page_numbers[id as usize]);
        let mut address_rank = vec![0u32; page_numbers.len()];
        for (rank, &id) in order.iter().enumerate() {
            address_rank[id as usize] = rank as u32;
        }
        if spilled {
            // What is still buffered goes to disk too, and the buffers' memory is given back:
            // evaluation then holds only the buckets its workers load.
            spill(&mut buffers, &mut files)?;
            buffers.iter_mut().for_each(|b| *b = Vec::new());
        }
        let buckets = buffers
            .into_iter()
            .zip(files)
            .map(|(tail, file)| match file {
                None => Store::Memory(tail),
                Some((file, len)) => Store::Spilled { file, tail, len },
            })
            .collect();
        Ok(Partition {
            page_numbers,
            address_rank,
            refs,
            init_done,
            phase_changes,
            annotations,
            buckets,
            spilled,
            tlb_events: opts.prepass.tlb.is_some(),
        })
    }

    pub fn pages(&self) -> usize {
        self.page_numbers.len()
    }

    /// Runs `f` on every page, in parallel by bucket, each worker with its own state from
    /// `init`; returns the workers' states.
    pub fn par_pages<S: Send>(
        &self,
        init: impl Fn() -> S + Sync,
        f: impl Fn(&mut S, &Page) + Sync,
    ) -> std::io::Result<Vec<S>> {
        let nb = self.buckets.len();
        // One state and one set of buffers per worker, reused across its buckets.
        (0..nb)
            .into_par_iter()
            .map_init(
                || (Grouped::default(), Grouped::default()),
                |(refs, events), b| {
                    let mut state = init();
                    let recs = self.load(b)?;
                    if self.tlb_events {
                        group_by_page(&recs, b, nb, |r| r.flags & TLB_EVENT == 0, refs);
                        group_by_page(&recs, b, nb, |r| r.flags & TLB_EVENT != 0, events);
                    } else {
                        // Only accesses: one pass, no test per record.
                        group_by_page(&recs, b, nb, |_| true, refs);
                    }
                    for w in 0..refs.starts.len().saturating_sub(1) {
                        let (lo, hi) = (refs.starts[w], refs.starts[w + 1]);
                        if lo == hi {
                            continue;
                        }
                        let id = (w * nb + b) as u32;
                        let page = Page {
                            number: self.page_numbers[id as usize],
                            touch_rank: id,
                            address_rank: self.address_rank[id as usize],
                            refs: &refs.refs[lo..hi],
                            events: events.page(w),
                        };
                        f(&mut state, &page);
                    }
                    Ok(state)
                },
            )
            .collect()
    }

    fn load(&self, b: usize) -> std::io::Result<std::borrow::Cow<'_, [Rec]>> {
        match &self.buckets[b] {
            Store::Memory(v) => Ok(std::borrow::Cow::Borrowed(v)),
            Store::Spilled { file, tail, len } => {
                let mut recs = vec![Rec::default(); *len + tail.len()];
                let mut f = file.try_clone()?;
                f.seek(SeekFrom::Start(0))?;
                // SAFETY: Rec is plain old data (repr(C), no padding: 8 + 4 + 2 + 2 bytes).
                let bytes = unsafe { std::slice::from_raw_parts_mut(recs.as_mut_ptr() as *mut u8, *len * REC_BYTES) };
                BufReader::new(f).read_exact(bytes)?;
                recs[*len..].copy_from_slice(tail);
                Ok(std::borrow::Cow::Owned(recs))
            }
        }
    }
}

/// Appends every bucket's buffered records to its temporary file.
fn spill(buffers: &mut [Vec<Rec>], files: &mut [Option<(File, usize)>]) -> Result<(), TraceError> {
    append(buffers, files).map_err(|e| {
        TraceError::invalid(&std::env::temp_dir(), format!("cannot spill page references to a temporary file: {e}"))
    })
}

fn append(buffers: &mut [Vec<Rec>], files: &mut [Option<(File, usize)>]) -> std::io::Result<()> {
    for (buf, slot) in buffers.iter_mut().zip(files.iter_mut()) {
        if buf.is_empty() {
            continue;
        }
        if slot.is_none() {
            *slot = Some((tempfile::tempfile()?, 0));
        }
        let (file, len) = slot.as_mut().expect("just created");
        // SAFETY: as in `load`.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, buf.len() * REC_BYTES) };
        let mut w = BufWriter::new(&mut *file);
        w.write_all(bytes)?;
        w.flush()?;
        *len += buf.len();
        buf.clear();
    }
    Ok(())
}

/// A bucket's references grouped by page: page w's are `refs[starts[w]..starts[w + 1]]`.
#[derive(Default)]
struct Grouped {
    refs: Vec<Ref>,
    starts: Vec<usize>,
}

impl Grouped {
    fn page(&self, w: usize) -> &[Ref] {
        match (self.starts.get(w), self.starts.get(w + 1)) {
            (Some(&lo), Some(&hi)) => &self.refs[lo..hi],
            _ => &[],
        }
    }
}

/// Counting sort of a bucket's records that `keep` accepts, by page (stable, so each page
/// stays in trace order). Page id `id` of bucket `b` has local index id / nb.
fn group_by_page(recs: &[Rec], b: usize, nb: usize, keep: impl Fn(&Rec) -> bool, out: &mut Grouped) {
    let local = |r: &Rec| r.page as usize / nb;
    debug_assert!(recs.iter().all(|r| r.page as usize % nb == b));
    let pages = recs.iter().filter(|r| keep(r)).map(|r| local(r) + 1).max().unwrap_or(0);
    let starts = &mut out.starts;
    starts.clear();
    starts.resize(pages + 1, 0);
    for r in recs.iter().filter(|r| keep(r)) {
        starts[local(r) + 1] += 1;
    }
    for w in 0..pages {
        starts[w + 1] += starts[w];
    }
    let mut fill = starts.clone();
    out.refs.clear();
    out.refs.resize(starts[pages], Ref::read(0, 0));
    for r in recs.iter().filter(|r| keep(r)) {
        let w = local(r);
        out.refs[fill[w]] =
            Ref { at: r.at, node: r.node, write: r.flags & WRITE != 0, sampled: r.flags & SAMPLED != 0 };
        fill[w] += 1;
    }
}

/// Which accesses a profile sees: misses of a per-thread cache or TLB.
struct Sampler(PerThreadCache);

impl Sampler {
    fn new(kind: SamplerKind) -> Self {
        Sampler(match kind {
            SamplerKind::CacheMiss { size, ways, line } => {
                PerThreadCache::new((size / line.max(1)) as usize, ways as usize, line)
            }
            SamplerKind::TlbMiss { entries, ways } => PerThreadCache::new(entries as usize, ways as usize, 4096),
        })
    }

    fn misses(&mut self, thread: usize, addr: u64) -> bool {
        self.0.misses(thread, addr)
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
            .par_pages(Vec::new, |v: &mut Vec<(u64, Vec<Ref>)>, page| v.push((page.number, page.refs.to_vec())))
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
            let p = Partition::build(&mut reader, &opts, |_| {}).unwrap();
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
        let params = sharemap_detect::sammu::SammuParams {
            l1_entries: 2,
            l1_ways: 2,
            l2_entries: 2,
            l2_ways: 2,
            ..sharemap_detect::sammu::SammuParams::default()
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
            Partition::build(&mut TraceReader::open(&dir.path().join("t.smt"), None).unwrap(), &opts, |_| {}).unwrap();
        let mut seen: Vec<(u64, Vec<u64>, usize)> = p
            .par_pages(Vec::new, |v: &mut Vec<(u64, Vec<u64>, usize)>, page| {
                assert!(page.events.iter().all(|e| e.node == 1));
                v.push((page.number, page.events.iter().map(|e| e.at).collect(), page.refs.len()))
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
