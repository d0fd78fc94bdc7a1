//! The simulation of one run: every access of the trace, in the trace's order, through the
//! TLBs and caches of the PU its thread is on, with MESI coherence kept by a directory, and
//! DRAM at the node holding the page. Each thread has a clock that every access advances
//! by a fixed cost plus the latency of where its data came from.
//!
//! The coherence model: a core's private caches (those under it alone) are one holder,
//! sharing one MESI state per line, and inclusive (its last private level holds every line
//! its lower ones do) or not (the line stays in the core while any level holds it), as the
//! model says. The directory knows, per line, which cores hold it, which shared
//! caches hold it and which shared cache holds it dirty. Shared caches are filled on the
//! way in and evict without asking the private caches below (non-inclusive); a modified line
//! a core evicts goes to its last shared cache, dirty, and a dirty line leaving that cache
//! goes to DRAM. A core gets a line exclusive only when no other core and no shared cache
//! off its path holds it, so its later write needs nobody's leave.

mod bandwidth;
mod coherence;
mod moves;

pub use bandwidth::Channels;

#[cfg(test)]
use crate::cache::EXCLUSIVE;
use crate::cache::{Cache, INVALID, MODIFIED, SHARED};
use crate::directory::{Dir, Directory};
use crate::model::Model;
use crate::stats::{PageDecision, Stats, ThreadMove};
use rustc_hash::FxHashMap;

/// Where a line's copy lives (for the directory and the value checks of the tests).
/// How a page gets its node at its first access.
#[derive(Clone, Debug)]
pub enum FirstPlacement {
    /// The node of the PU touching it.
    FirstTouch,
    /// Nodes in turn, page after page (by first access).
    RoundRobin,
    /// A node drawn at random.
    Random(u64),
}

/// A PU's place in the machine, gathered from the model once: a miss reads it in one lookup.
#[derive(Clone, Copy, Debug)]
struct Place<'m> {
    core: usize,
    node: usize,
    /// Its private caches, first level first, and its shared caches, nearest first.
    private: &'m [usize],
    shared: &'m [usize],
    /// The bits (shared-cache indices) of its shared caches.
    shared_mask: u64,
}

/// What the hit that changes nothing (`Sim::mru_hit`) needs of a running thread: its PU,
/// its core (whose TLB it uses), its first private cache, and what a hit there costs.
#[derive(Clone, Copy, Debug)]
struct Shortcut {
    pu: usize,
    core: usize,
    cache: usize,
    /// Index of the cache's level in `Stats::hits`.
    level: usize,
    /// The access's fixed cost plus the cache's latency.
    ns: f64,
}

/// A thread of the trace: where it runs and its clock.
#[derive(Clone, Copy, Debug)]
struct Thread {
    /// Its PU (`usize::MAX` until it is placed).
    pu: usize,
    /// Whether it has made an access yet.
    started: bool,
    /// Whether the trace said when it began (`thread-start`): its clock is set.
    announced: bool,
    /// Its PU's shortcut once it runs (None before, or without one).
    shortcut: Option<Shortcut>,
    clock: f64,
}

const UNPLACED: Thread = Thread { pu: usize::MAX, started: false, announced: false, shortcut: None, clock: 0.0 };

/// The simulated caches, one per `Model::caches` entry, indexed without bounds checks (they
/// were a tenth of a miss's instructions): every index the simulation uses comes from the
/// model's paths and shared-cache lists, which `Caches::new` checks once, and the model
/// cannot change while a `Sim` borrows it.
struct Caches {
    caches: Vec<Cache>,
    info: Vec<CacheInfo>,
}

/// What the access path reads of a cache's spec.
#[derive(Clone, Copy)]
struct CacheInfo {
    /// Index of its level in `Stats::hits`.
    level: usize,
    latency_ns: f64,
    /// Its bit in a directory entry's shared caches (0 for a private cache).
    shared_bit: u64,
}

impl Caches {
    fn new(m: &Model) -> Caches {
        let n = m.caches.len();
        let paths = m.private_path.iter().chain(&m.shared_path).flatten();
        assert!(paths.chain(&m.shared_caches).all(|&c| c < n), "the model's paths name a cache it does not have");
        Caches {
            caches: m.caches.iter().map(|c| Cache::new(c.lines(m.line), c.ways)).collect(),
            info: m
                .caches
                .iter()
                .zip(&m.shared_index)
                .map(|(c, i)| CacheInfo {
                    level: (c.level.clamp(1, 4) - 1) as usize,
                    latency_ns: c.latency_ns,
                    shared_bit: i.map_or(0, |i| 1 << i),
                })
                .collect(),
        }
    }

    #[inline(always)]
    fn info(&self, c: usize) -> CacheInfo {
        debug_assert!(c < self.info.len());
        // SAFETY: as in `index`.
        unsafe { *self.info.get_unchecked(c) }
    }
}

impl std::ops::Index<usize> for Caches {
    type Output = Cache;
    #[inline(always)]
    fn index(&self, c: usize) -> &Cache {
        debug_assert!(c < self.caches.len());
        // SAFETY: `c` is one of the model's cache indices, checked by `Caches::new`.
        unsafe { self.caches.get_unchecked(c) }
    }
}

impl std::ops::IndexMut<usize> for Caches {
    #[inline(always)]
    fn index_mut(&mut self, c: usize) -> &mut Cache {
        debug_assert!(c < self.caches.len());
        // SAFETY: as in `index`.
        unsafe { self.caches.get_unchecked_mut(c) }
    }
}

pub struct Sim<'m> {
    m: &'m Model,
    caches: Caches,
    /// Per PU and per core (a PU of it), its place.
    places: Vec<Place<'m>>,
    core_places: Vec<Place<'m>>,
    /// Per PU, its shortcut (None when it has no private cache).
    pu_shortcut: Vec<Option<Shortcut>>,
    /// Per shared cache (shared index), its node; per node and shared cache, what a reply
    /// from that cache to a core of the node costs (a dirty line's, an invalidation's).
    shared_node: Vec<usize>,
    shared_reply_ns: Vec<f64>,
    /// Per core: first- and second-level TLB (shared by the core's PUs).
    tlb: Vec<Cache>,
    tlb2: Vec<Option<Cache>>,
    /// Per core, the page it translated last (`NO_PAGE`: none since a shootdown): always the
    /// most recently used of its set in the first-level TLB, told without reading the TLB.
    last_page: Vec<u64>,
    dir: Directory,
    home: FxHashMap<u64, u16>,
    /// Pages with copies on several nodes: the nodes holding one (the home among them).
    replicas: FxHashMap<u64, u64>,
    placement: FirstPlacement,
    placed: u64,
    line_shift: u32,
    page_shift: u32,
    lines_per_page: u64,
    /// Per thread (the trace's numbering), one record: an access reads one.
    threads: Vec<Thread>,
    /// Per PU, the thread that ran on it last (`NO_THREAD`: none, or it left), and when the
    /// PU was free without one. A PU runs one access at a time, so threads sharing one take
    /// turns in the trace's order (its run queue), and a thread that stopped takes none of
    /// its time. While one thread keeps a PU, the PU is free at that thread's clock: its
    /// accesses need no look at the PU (the hit path stays as short as without a queue).
    pu_owner: Vec<usize>,
    pu_free: Vec<f64>,
    pub stats: Stats,
    /// Accesses that missed the core's private caches (the prefetch gate counts them).
    private_misses: u64,
    ahead: Ahead,
    /// The thread of the last access (`usize::MAX`: none yet): in trace order, its clock is
    /// the time a thread starting now starts at.
    last_thread: usize,
    /// Where pages were put, when asked for (`log_decisions`).
    decisions: Option<Vec<PageDecision>>,
    /// Threads moved, logged with the pages' decisions.
    thread_moves: Vec<ThreadMove>,
    /// Memory accesses per page and requesting node, when asked for (`count_memory`): the
    /// page's index in `memory_index`, times the node count, into `memory`.
    memory_index: Option<FxHashMap<u64, usize>>,
    memory: Vec<u64>,
    /// Each node's memory and each link, as queues (`bandwidth`).
    channels: Channels,
    /// When the access being simulated began: its thread's clock, or its PU's free time.
    now: f64,
    /// Per core, the lines its last misses were on (one per stream followed), and which
    /// entry the next new stream replaces: a miss on the line after or before one of them
    /// continues a stream, whose misses the core overlaps (`Params::mlp`; followed only above 1).
    streams: Vec<[u64; STREAMS]>,
    stream_next: Vec<u8>,
    #[cfg(test)]
    pub(crate) values: crate::tests_support::Values,
}

/// Streams a core's prefetcher follows at once (Intel's L2 streamer follows 16 forward and
/// backward; few programs run more than a handful at a time).
const STREAMS: usize = 8;
/// A stream entry not yet used.
const NO_STREAM: u64 = u64::MAX;

const NO_PAGE: u64 = u64::MAX;
const NO_THREAD: usize = usize::MAX;

/// How far ahead in the trace `Sim::feed` prefetches: about the accesses simulated in the
/// time the host takes to fetch from its memory.
const LOOKAHEAD: usize = 32;

/// Accesses after which `Sim::feed` judges again whether prefetching pays.
const PREFETCH_WINDOW: u64 = 1 << 16;

/// Lines cached in the simulated machine from which its tables outgrow the host's caches:
/// the directory's slots then take 1 MiB, a host core's second-level cache.
const PREFETCH_LINES: usize = 1 << 16;

/// Whether `Sim::feed` asks the host for anything ahead, judged per window of accesses from
/// what the last window did. A hint costs instructions on every access, and pays only when
/// accesses reach tables larger than the host's caches at places its own prefetcher cannot
/// guess: the directory on misses, the shared caches' sets when accesses jump from page to
/// page. (Measured on 20M-access traces: `private` lost 30 % with every hint always on.)
/// Until a window has run, nothing is hinted: the tables are still small.
#[derive(Clone, Copy, Debug, Default)]
struct Ahead {
    /// The counters at the window's start.
    accesses_at: u64,
    misses_at: u64,
    tlb_misses_at: u64,
    /// Hint the line's directory slot; and its shared caches' sets.
    directory: bool,
    shared: bool,
}

fn bit(core: usize) -> u128 {
    1u128 << core
}

/// A directory entry once `core` has invalidated the other copies: only this core, the
/// shared caches of `mine` (its path's), and no dirty copy elsewhere.
fn keep_only(e: &mut Dir, core: usize, mine: u64) {
    e.set_cores(e.cores() & bit(core));
    e.shared &= mine;
    if e.dirty != 0 && mine & (1 << (e.dirty - 1)) == 0 {
        e.dirty = 0;
    }
}

impl<'m> Sim<'m> {
    /// A machine at rest: empty caches, thread `t` on PU `pus[t]`.
    pub fn new(m: &'m Model, page_size: u64, pus: &[usize], placement: FirstPlacement) -> Sim<'m> {
        let caches = Caches::new(m);
        let p = &m.params;
        let tlb = (0..m.cores).map(|_| Cache::new(p.tlb.0 as u64, p.tlb.1)).collect();
        let tlb2 = (0..m.cores).map(|_| (p.tlb2.0 > 0).then(|| Cache::new(p.tlb2.0 as u64, p.tlb2.1))).collect();
        let page_size = page_size.max(m.line as u64).next_power_of_two();
        let pu_shortcut = (0..m.pus())
            .map(|pu| {
                m.private_path[pu].first().map(|&c| Shortcut {
                    pu,
                    core: m.pu_core[pu],
                    cache: c,
                    level: (m.caches[c].level.clamp(1, 4) - 1) as usize,
                    ns: p.access_ns + m.caches[c].latency_ns,
                })
            })
            .collect();
        let places: Vec<Place> = (0..m.pus())
            .map(|pu| Place {
                core: m.pu_core[pu],
                node: m.pu_node[pu],
                private: &m.private_path[pu],
                shared: &m.shared_path[pu],
                shared_mask: m.shared_mask[pu],
            })
            .collect();
        let core_places = m.core_pu.iter().map(|&pu| places[pu]).collect();
        let shared_node: Vec<usize> = m.shared_caches.iter().map(|&c| m.caches[c].node).collect();
        let shared_reply_ns = (0..m.nodes)
            .flat_map(|node| {
                m.shared_caches
                    .iter()
                    .map(move |&c| m.caches[c].latency_ns + m.params.snoop_ns + m.hop_ns[node][m.caches[c].node])
            })
            .collect();
        let mut sim = Sim {
            m,
            caches,
            places,
            core_places,
            pu_shortcut,
            shared_node,
            shared_reply_ns,
            tlb,
            tlb2,
            last_page: vec![NO_PAGE; m.cores],
            dir: Directory::new(m.cores, m.shared_caches.len()),
            home: FxHashMap::default(),
            replicas: FxHashMap::default(),
            placement,
            placed: 0,
            line_shift: m.line.trailing_zeros(),
            page_shift: page_size.trailing_zeros(),
            lines_per_page: page_size / m.line as u64,
            threads: Vec::new(),
            pu_owner: vec![NO_THREAD; m.pus()],
            pu_free: vec![0.0; m.pus()],
            stats: Stats::new(m),
            private_misses: 0,
            ahead: Ahead::default(),
            last_thread: usize::MAX,
            decisions: None,
            thread_moves: Vec::new(),
            memory_index: None,
            memory: Vec::new(),
            channels: Channels::new(m.nodes, m.memory_ns_per_line, m.link_ns_per_line),
            now: 0.0,
            streams: vec![[NO_STREAM; STREAMS]; m.cores],
            stream_next: vec![0; m.cores],
            #[cfg(test)]
            values: Default::default(),
        };
        for (t, &pu) in pus.iter().enumerate() {
            sim.place_thread(t, pu % m.pus());
        }
        // The kernel's zero page sits in the first node's memory.
        sim.home.insert(sim.zero_page(), 0);
        sim
    }

    pub fn page_shift(&self) -> u32 {
        self.page_shift
    }

    fn place_thread(&mut self, t: usize, pu: usize) {
        if t >= self.threads.len() {
            self.threads.resize(t + 1, UNPLACED);
        }
        let thread = &mut self.threads[t];
        if thread.started {
            thread.shortcut = self.pu_shortcut[pu];
        }
        // Leaving the PU it ran on last: the PU was free from its clock on.
        if let Some(owner) = self.pu_owner.get_mut(thread.pu)
            && *owner == t
        {
            *owner = NO_THREAD;
            self.pu_free[thread.pu] = thread.clock;
        }
        thread.pu = pu;
    }

    /// The trace says thread `t` begins here (`thread-start`): it starts at the clock of the
    /// thread that made the access before (0 at the start of the trace), and then runs when
    /// its PU is free.
    pub fn thread_start(&mut self, t: usize) {
        if t >= self.threads.len() {
            self.threads.resize(t + 1, UNPLACED);
        }
        let now = self.threads.get(self.last_thread).map_or(0.0, |th| th.clock);
        let th = &mut self.threads[t];
        if !th.started && !th.announced {
            th.announced = true;
            th.clock = th.clock.max(now);
        }
    }

    /// The PU of thread `t` (a thread the mapping did not name goes to PU `t mod PUs`).
    pub fn pu_of(&mut self, t: usize) -> usize {
        match self.threads.get(t) {
            Some(thread) if thread.pu != usize::MAX => thread.pu,
            _ => {
                self.place_thread(t, t % self.m.pus());
                self.threads[t].pu
            }
        }
    }

    /// The node holding `page`, if it has one yet.
    pub fn home_of(&self, page: u64) -> Option<usize> {
        self.home.get(&page).map(|&n| n as usize)
    }

    /// Pages with a home so far (the zero page left out).
    pub fn homed_pages(&self) -> usize {
        self.home.len() - 1
    }

    /// Accesses simulated so far.
    pub fn accesses(&self) -> u64 {
        self.stats.accesses
    }

    /// What moving a page costs the thread that moves it (copy and TLB shootdown).
    pub fn page_move_ns(&self) -> f64 {
        let p = &self.m.params;
        (1u64 << self.page_shift) as f64 * p.copy_ns_per_byte + p.shootdown_ns
    }

    /// Gives a page not yet touched its node in advance (a static placement).
    pub fn set_home(&mut self, page: u64, node: usize) {
        let node = node.min(self.m.nodes - 1);
        self.home.insert(page, node as u16);
        self.log(page, 1 << node);
    }

    /// Keeps a log of where pages are put from now on (see `take_decisions`).
    pub fn log_decisions(&mut self) {
        self.decisions.get_or_insert_with(Vec::new);
    }

    /// The pages placed, moved or copied since `log_decisions`, in order.
    pub fn take_decisions(&mut self) -> Vec<PageDecision> {
        self.decisions.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The threads moved since `log_decisions`, in order.
    pub fn take_thread_moves(&mut self) -> Vec<ThreadMove> {
        std::mem::take(&mut self.thread_moves)
    }

    /// Counts, from now on, the accesses each node makes to each page's memory (those no
    /// cache served; see `memory_by_page`).
    pub fn count_memory(&mut self) {
        self.memory_index.get_or_insert_with(FxHashMap::default);
    }

    /// Per page (ascending), the memory accesses each node made since `count_memory` (the
    /// zero page left out).
    pub fn memory_by_page(&self) -> Vec<(u64, Vec<u64>)> {
        let nodes = self.m.nodes;
        let mut out: Vec<(u64, Vec<u64>)> = self
            .memory_index
            .iter()
            .flatten()
            .map(|(&page, &i)| (page, self.memory[i * nodes..(i + 1) * nodes].to_vec()))
            .collect();
        out.sort_unstable_by_key(|p| p.0);
        out
    }

    fn count_memory_access(&mut self, page: u64, node: usize) {
        if page == self.zero_page() {
            return;
        }
        let nodes = self.m.nodes;
        let Some(index) = self.memory_index.as_mut() else { return };
        let next = index.len();
        let i = *index.entry(page).or_insert(next);
        if i == next {
            self.memory.resize(self.memory.len() + nodes, 0);
        }
        self.memory[i * nodes + node] += 1;
    }

    fn log(&mut self, page: u64, nodes: u128) {
        if let Some(log) = self.decisions.as_mut() {
            log.push(PageDecision { at: self.stats.accesses, page, nodes });
        }
    }

    /// The line a read of `line` in `page` touches: the zero page's, while the page has
    /// never been written and has no home (Linux maps the shared zero page on a read fault
    /// of untouched anonymous memory; the first write allocates the page where it runs).
    #[inline]
    fn read_line(&self, line: u64, page: u64) -> u64 {
        if self.m.params.zero_page != 1 || self.home.contains_key(&page) {
            return line;
        }
        (self.zero_page() << (self.page_shift - self.line_shift)) | (line & (self.lines_per_page - 1))
    }

    /// The zero page's number: the last page of the address space, kernel memory no program
    /// addresses.
    fn zero_page(&self) -> u64 {
        u64::MAX >> self.page_shift
    }

    fn home(&mut self, page: u64, toucher_node: usize) -> usize {
        if let Some(&n) = self.home.get(&page) {
            return n as usize;
        }
        let n = match &mut self.placement {
            FirstPlacement::FirstTouch => toucher_node,
            FirstPlacement::RoundRobin => (self.placed % self.m.nodes as u64) as usize,
            FirstPlacement::Random(state) => {
                // splitmix64
                *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = *state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                ((z ^ (z >> 31)) % self.m.nodes as u64) as usize
            }
        };
        self.placed += 1;
        self.home.insert(page, n as u16);
        self.log(page, 1 << n);
        n
    }

    /// Simulates one access; returns its latency in ns (the fixed cost included, before the
    /// wait of threads sharing a PU).
    #[inline]
    pub fn access(&mut self, thread: usize, addr: u64, write: bool) -> f64 {
        let ns = match self.mru_hit(thread, addr, write) {
            Some(ns) => ns,
            None => self.access_any(thread, addr, write),
        };
        self.last_thread = thread;
        ns
    }

    /// Simulates accesses given as columns (thread, address; `write(i)` says whether the
    /// `i`-th writes), calling `after` after each with its latency. While the accesses run,
    /// the host is asked for the data of the one `LOOKAHEAD` further on (`prefetch`), when
    /// the last accesses say that pays.
    #[inline]
    pub fn feed(
        &mut self,
        threads: &[u32],
        addrs: &[u64],
        write: impl Fn(usize) -> bool,
        mut after: impl FnMut(&mut Self, usize, u64, bool, f64),
    ) {
        debug_assert_eq!(threads.len(), addrs.len());
        if self.prefetching() {
            self.run_ahead(threads, addrs, &write, &mut after);
            return;
        }
        for (i, (&t, &addr)) in threads.iter().zip(addrs).enumerate() {
            self.step(i, t, addr, &write, &mut after);
        }
    }

    /// One access of `run`: the `i`-th, then `after` with its latency.
    #[inline(always)]
    fn step(
        &mut self,
        i: usize,
        t: u32,
        addr: u64,
        write: &impl Fn(usize) -> bool,
        after: &mut impl FnMut(&mut Self, usize, u64, bool, f64),
    ) {
        let w = write(i);
        let ns = self.access(t as usize, addr, w);
        after(self, t as usize, addr, w, ns);
    }

    /// `run` with the hints, a function of its own: inlined beside the plain loop, it made
    /// that loop spill registers (measured: -8 % on `random`).
    #[inline(never)]
    fn run_ahead(
        &mut self,
        threads: &[u32],
        addrs: &[u64],
        write: &impl Fn(usize) -> bool,
        after: &mut impl FnMut(&mut Self, usize, u64, bool, f64),
    ) {
        for (i, (&t, &addr)) in threads.iter().zip(addrs).enumerate() {
            // An access to the line of the one before it finds what that one fetched.
            if let (Some(&t), Some(&addr)) = (threads.get(i + LOOKAHEAD), addrs.get(i + LOOKAHEAD))
                && (addr ^ addrs[i + LOOKAHEAD - 1]) >> self.line_shift != 0
            {
                self.prefetch(t as usize, addr);
            }
            self.step(i, t, addr, write, after);
        }
    }

    /// Asks the host to bring into its caches the tables an access of `thread` to `addr`
    /// will likely read beyond the core's private caches, those `Ahead` says pay: a hint,
    /// with no effect on any result.
    #[inline(always)]
    fn prefetch(&self, thread: usize, addr: u64) {
        let line = addr >> self.line_shift;
        self.dir.prefetch(line);
        if self.ahead.shared
            && let Some(th) = self.threads.get(thread)
            && let Some(s) = th.shortcut
        {
            for &c in self.places[s.pu].shared {
                self.caches[c].prefetch(line);
            }
        }
    }

    /// Whether the last judgement hints the directory, and the shared caches.
    #[cfg(test)]
    pub(crate) fn prefetches(&self) -> (bool, bool) {
        (self.ahead.directory, self.ahead.shared)
    }

    /// Whether to prefetch, judged again once `PREFETCH_WINDOW` accesses have run since the
    /// last judgement: yes when 1 access in 32 of them missed the private caches (the
    /// directory's slot), and the shared caches' sets too when as many missed the TLB.
    fn prefetching(&mut self) -> bool {
        let a = &mut self.ahead;
        let window = self.stats.accesses - a.accesses_at;
        if window >= PREFETCH_WINDOW {
            let large = self.dir.entries() >= PREFETCH_LINES;
            a.directory = large && (self.private_misses - a.misses_at) * 32 >= window;
            a.shared = a.directory && (self.stats.tlb_misses - a.tlb_misses_at) * 32 >= window;
            a.accesses_at = self.stats.accesses;
            a.misses_at = self.private_misses;
            a.tlb_misses_at = self.stats.tlb_misses;
        }
        a.directory
    }

    /// The most common access, alone so that it runs in few instructions (measured: it was
    /// about 200 of them in the general path): a running thread's access to the line and
    /// page its core used last (most recently used in the first-level cache and TLB), a read
    /// or a write to a line it holds modified. Nothing changes but counters and the clock;
    /// None when the access is any other.
    #[inline(always)]
    fn mru_hit(&mut self, thread: usize, addr: u64, write: bool) -> Option<f64> {
        let th = self.threads.get_mut(thread)?;
        let s = th.shortcut?;
        // Another thread ran on the PU since: the general path takes its turn.
        if self.pu_owner[s.pu] != thread {
            return None;
        }
        let page = addr >> self.page_shift;
        // The page the core translated last needs no look at the TLB (on `random`, 12M of
        // 810M instructions; a thread alternating between pages reads the TLB's set).
        debug_assert!(self.last_page[s.core] != page || self.tlb[s.core].mru_state(page) != INVALID);
        if self.last_page[s.core] != page && self.tlb[s.core].mru_state(page) == INVALID {
            return None;
        }
        let state = self.caches[s.cache].mru_state(addr >> self.line_shift);
        // A write needs the line modified, and no replica of its page to drop.
        if state == INVALID || write && (state != MODIFIED || !self.replicas.is_empty()) {
            return None;
        }
        self.stats.accesses += 1;
        self.stats.writes += write as u64;
        self.stats.hits[s.level] += 1;
        #[cfg(test)]
        self.values.core_access(s.core, addr >> self.line_shift, write);
        th.clock += s.ns;
        Some(s.ns)
    }

    /// Any access (`access` without its shortcut).
    #[inline(never)]
    fn access_any(&mut self, thread: usize, addr: u64, write: bool) -> f64 {
        let pu = self.pu_of(thread);
        if !self.threads[thread].started {
            // A thread the trace did not announce starts at its first access: at the clock of
            // the thread that made the access before (the trace is in time order). Not at
            // the slowest thread's clock: with more threads than PUs the starts would chain.
            let now = if self.threads[thread].announced {
                0.0
            } else {
                self.threads.get(self.last_thread).map_or(0.0, |t| t.clock)
            };
            let th = &mut self.threads[thread];
            th.started = true;
            th.shortcut = self.pu_shortcut[pu];
            th.clock = th.clock.max(now);
        }
        let core = self.places[pu].core;
        let line = addr >> self.line_shift;
        let page = addr >> self.page_shift;
        self.stats.accesses += 1;
        self.stats.writes += write as u64;
        let free = match self.pu_owner[pu] {
            NO_THREAD => self.pu_free[pu],
            owner => self.threads[owner].clock,
        };
        self.now = self.threads[thread].clock.max(free);
        let mut ns = self.m.params.access_ns + self.translate(core, page);
        // Only the replicas' test here: a test of `write` first was mispredicted 287k times
        // in the 2M accesses of `random`, for nothing without replicas.
        if !self.replicas.is_empty() {
            ns += self.write_to_replica(page, write);
        }
        let line = if write { line } else { self.read_line(line, page) };
        ns += self.data(pu, core, line, write);
        let th = &mut self.threads[thread];
        th.clock = self.now + ns;
        self.pu_owner[pu] = thread;
        ns
    }

    /// A write to a replicated page leaves one copy: the others go, with a shootdown, whose
    /// cost this returns (0 for a read or a page without replicas).
    #[cold]
    #[inline(never)]
    fn write_to_replica(&mut self, page: u64, write: bool) -> f64 {
        if !write || self.replicas.remove(&page).is_none() {
            return 0.0;
        }
        self.drop_from_tlbs(page);
        self.m.params.shootdown_ns
    }

    /// TLB lookups: first level, second level, else a page walk.
    fn translate(&mut self, core: usize, page: u64) -> f64 {
        self.last_page[core] = page;
        if self.tlb[core].touch(page) != INVALID {
            return 0.0;
        }
        self.stats.tlb_misses += 1;
        self.tlb[core].insert_absent(page, SHARED);
        if let Some(t2) = &mut self.tlb2[core] {
            if t2.touch(page) != INVALID {
                return self.m.params.tlb2_ns;
            }
            t2.insert_absent(page, SHARED);
        }
        self.stats.page_walks += 1;
        self.m.params.walk_ns
    }

    fn data(&mut self, pu: usize, core: usize, line: u64, write: bool) -> f64 {
        let private = self.places[pu].private;
        // The private caches, nearest first.
        for (i, &c) in private.iter().enumerate() {
            let state = self.caches[c].touch(line);
            let level = self.caches.info(c).level;
            if state == INVALID {
                self.stats.misses[level] += 1;
                continue;
            }
            self.stats.hits[level] += 1;
            let mut ns = self.caches.info(c).latency_ns;
            let new = if !write {
                state
            } else {
                if state == SHARED {
                    self.stats.upgrades += 1;
                    ns += self.invalidate_others(pu, core, line);
                }
                MODIFIED
            };
            if new != state {
                for &h in &private[i..] {
                    self.caches[h].set_state(line, new);
                }
            }
            for &l in &private[..i] {
                let victim = self.caches[l].insert_absent(line, new);
                // Inclusive levels: the victim is still in the last one.
                if !self.m.private_inclusive
                    && let Some((victim, vstate)) = victim
                {
                    self.private_victim(pu, core, victim, vstate);
                }
            }
            #[cfg(test)]
            self.values.core_access(core, line, write);
            return ns;
        }
        self.miss(pu, core, line, write)
    }

    /// The simulated time so far: the slowest thread's clock.
    pub fn time_ns(&self) -> f64 {
        self.threads.iter().map(|t| t.clock).fold(0.0, f64::max)
    }

    pub fn thread_clock(&self, t: usize) -> f64 {
        self.threads.get(t).map_or(0.0, |t| t.clock)
    }

    /// Threads seen so far.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    pub fn model(&self) -> &'m Model {
        self.m
    }

    /// Checks the protocol's invariants (tests): one writer, the directory exact, a core's
    /// private levels in one state per line (and inclusive, when they are).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        use std::collections::BTreeMap;
        let m = self.m;
        let mut holders: BTreeMap<u64, Vec<(usize, u8)>> = BTreeMap::new();
        for core in 0..m.cores {
            let path = &m.private_path[self.m.core_pu[core]];
            let Some(&last) = path.last() else { continue };
            // The core's lines: those of its last level (inclusive), or of any level.
            let mut mine: BTreeMap<u64, u8> = self.caches[last].lines().collect();
            for &l in &path[..path.len() - 1] {
                for (line, state) in self.caches[l].lines() {
                    let up = self.caches[last].state(line);
                    if m.private_inclusive && up != state {
                        return Err(format!(
                            "core {core}: line {line} {state} in L{} but {up} in its last level",
                            m.caches[l].level
                        ));
                    }
                    match mine.insert(line, state) {
                        Some(other) if other != state => {
                            return Err(format!(
                                "core {core}: line {line} in two private levels as {other} and {state}"
                            ));
                        }
                        _ => {}
                    }
                }
            }
            for (line, state) in mine {
                holders.entry(line).or_default().push((core, state));
            }
        }
        for (line, hs) in &holders {
            for &(core, _) in hs {
                if let Some(&llc) = m.shared_path[m.core_pu[core]].last()
                    && m.inclusive_over[llc] != 0
                    && self.caches[llc].state(*line) == INVALID
                {
                    return Err(format!("line {line}: in core {core} but not in its inclusive last-level cache {llc}"));
                }
            }
            let excl = hs.iter().filter(|h| h.1 >= EXCLUSIVE).count();
            if excl > 0 && hs.len() > 1 {
                return Err(format!("line {line}: held exclusive by one core and by {} in all", hs.len()));
            }
            let want: u128 = hs.iter().fold(0, |a, h| a | bit(h.0));
            let got = self.dir.get(*line).map_or(0, |e| e.cores());
            if want != got {
                return Err(format!("line {line}: cores {want:b}, directory says {got:b}"));
            }
        }
        for (line, e) in self.dir.iter() {
            let line = &line;
            if e.cores() & !holders.get(line).map_or(0, |hs| hs.iter().fold(0, |a, h| a | bit(h.0))) != 0 {
                return Err(format!("line {line}: the directory names a core without it"));
            }
            for (c, spec) in m.caches.iter().enumerate() {
                let Some(idx) = m.shared_index[c] else { continue };
                let has = self.caches[c].state(*line) != INVALID;
                if has != (e.shared >> idx & 1 == 1) {
                    return Err(format!(
                        "line {line}: shared L{} cache {c} has it {has}, directory disagrees",
                        spec.level
                    ));
                }
                let dirty = self.caches[c].state(*line) == MODIFIED;
                if dirty != (e.dirty as usize == idx + 1) {
                    return Err(format!("line {line}: dirty in cache {c} is {dirty}, directory disagrees"));
                }
            }
            if let Some(hs) = holders.get(line)
                && hs.iter().any(|h| h.1 >= EXCLUSIVE)
            {
                let core = hs[0].0;
                let mine = self.m.shared_mask[self.m.core_pu[core]];
                if e.shared & !mine != 0 {
                    return Err(format!(
                        "line {line}: exclusive in core {core} but also in a shared cache off its path"
                    ));
                }
            }
        }
        Ok(())
    }
}
