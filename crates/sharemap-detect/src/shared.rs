//! What is shared, by name: every line a trace touches, attributed to the data object that
//! held it (a static variable, an allocation by its call site, a thread's stack) and
//! classified from which threads touched which of its words:
//!
//! - **private**: one thread;
//! - **read-shared**: several threads, none writing;
//! - **truly shared**: a word written by one thread and touched by another (the data itself
//!   changes hands);
//! - **falsely shared**: several threads and writes, but every written word touched by its
//!   writer alone (the threads need different data that happens to share a line).
//!
//! A word is an eighth of a line (8 bytes on 64-byte lines). The `access-site` events of a
//! tracer recording name the code behind one access in `ACCESS_SITE_PERIOD`: each such
//! sample counts for the source line it points to, by the class its line ends up in.
//!
//! Objects come from the trace: the program's static variables (its `program` table),
//! `alloc` and `free` events, thread stacks. A line is the object's that held its first
//! access in the trace; once that object is freed, an access from another object starts the
//! line afresh. Accesses no object holds are grouped by the 1 MiB blocks they fall in,
//! adjacent blocks joined: address ranges instead of names, for traces without allocation
//! records.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use sharemap_trace::{ACCESS_SITE_PERIOD, Chunk, CodeSite, EventKind, Metadata, Result, TraceSource};
use std::collections::BTreeMap;

/// Parts of a line whose sharing is told apart.
pub const WORDS: usize = 8;
/// Source lines kept per object, by samples on its shared lines.
const CODE_PER_OBJECT: usize = 3;
/// Accesses no object holds are grouped by blocks of this many bytes.
const UNKNOWN_BLOCK_BITS: u32 = 20;

/// What holds an object's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectKind {
    /// A static variable of the program.
    Static,
    /// Allocations from one call site (malloc, calloc, realloc, aligned allocations, new).
    Heap,
    /// Mappings from one call site (mmap).
    Mapped,
    /// A thread's stack.
    Stack,
    /// Addresses no allocation record or symbol covers.
    Unknown,
}

/// How a line was shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LineClass {
    Private,
    ReadShared,
    TrueShared,
    FalseShared,
}

/// A count per line class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByClass {
    pub private: u64,
    pub read_shared: u64,
    pub true_shared: u64,
    pub false_shared: u64,
}

impl ByClass {
    fn add(&mut self, class: LineClass, n: u64) {
        *match class {
            LineClass::Private => &mut self.private,
            LineClass::ReadShared => &mut self.read_shared,
            LineClass::TrueShared => &mut self.true_shared,
            LineClass::FalseShared => &mut self.false_shared,
        } += n;
    }

    /// Read-shared, truly and falsely shared together.
    pub fn shared(&self) -> u64 {
        self.read_shared + self.true_shared + self.false_shared
    }

    pub fn total(&self) -> u64 {
        self.private + self.shared()
    }
}

/// One data object, or all those allocated at one call site, and how its lines were shared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedObject {
    /// The variable's name, "ALLOCATOR at FILE:LINE (FUNCTION)", "stack of thread N", or an
    /// address range.
    pub name: String,
    pub kind: ObjectKind,
    /// Where it was allocated, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<CodeSite>,
    /// Allocations this row stands for (1 for a variable or a stack).
    pub allocations: u64,
    /// Bytes: of the variable, the stack, the range, or allocated at the site in all.
    pub bytes: u64,
    /// Threads that touched it.
    pub threads: u32,
    pub accesses: u64,
    pub writes: u64,
    /// Lines it held, by class.
    pub lines: ByClass,
    /// Accesses to those lines, by class.
    pub line_accesses: ByClass,
    /// Pages it touched, and those of them any two threads touched.
    pub pages: u64,
    pub shared_pages: u64,
    /// The source lines whose sampled accesses touched its shared lines, most samples
    /// first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code: Vec<CodeCount>,
}

/// A source line and the samples that name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeCount {
    pub site: CodeSite,
    pub samples: u64,
}

/// A source line whose sampled accesses touched shared lines, by their class.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharingCode {
    pub site: CodeSite,
    pub samples: ByClass,
}

/// The whole answer: lines by class, the objects, and the code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WhatIsShared {
    pub line_size: u64,
    pub word_size: u64,
    pub accesses: u64,
    /// Whether the trace names its data: allocation records or the program's symbols. Without
    /// them, objects are address ranges.
    pub named: bool,
    pub allocations: u64,
    pub frees: u64,
    /// Lines touched, and the accesses to them, by class.
    pub lines: ByClass,
    pub line_accesses: ByClass,
    /// Objects that were touched: those with the most accesses to shared lines first.
    pub objects: Vec<SharedObject>,
    /// `access-site` samples read, and one access in how many per thread they stand for.
    pub samples: u64,
    pub sample_period: u32,
    /// Source lines with samples on shared lines, truly and falsely shared first.
    pub code: Vec<SharingCode>,
    /// Each page touched, by number, and the object with the most accesses on it (its
    /// index in `objects`): what names a page in numalize's `structure.name`.
    #[serde(skip)]
    pub page_objects: Vec<(u64, u32)>,
}

impl WhatIsShared {
    /// Reads `source` to its end.
    pub fn of(source: &mut dyn TraceSource) -> Result<WhatIsShared> {
        WhatIsShared::read(source, &|_| {})
    }

    /// Reads `source` to its end, telling `progress` the accesses read so far.
    pub fn read(source: &mut dyn TraceSource, progress: &(dyn Fn(u64) + Sync)) -> Result<WhatIsShared> {
        let mut pass = Pass::new(source.metadata());
        source.for_each_chunk(&mut |chunk| {
            pass.chunk(chunk);
            progress(pass.accesses);
            Ok(())
        })?;
        Ok(pass.finish(source.metadata()))
    }

    /// The object with the most accesses on page number `page`.
    pub fn object_of_page(&self, page: u64) -> Option<&SharedObject> {
        let k = self.page_objects.binary_search_by_key(&page, |p| p.0).ok()?;
        self.objects.get(self.page_objects[k].1 as usize)
    }

    /// Chunks already decoded, in trace order, of a trace with metadata `meta`.
    pub fn of_chunks<'a>(meta: &Metadata, chunks: impl IntoIterator<Item = &'a Chunk>) -> WhatIsShared {
        let mut pass = Pass::new(meta);
        for c in chunks {
            pass.chunk(c);
        }
        pass.finish(meta)
    }

    /// Whether a trace names its data (a tracer recording with the program's table): where
    /// `analyze` says what is shared unless told not to.
    pub fn named_in(meta: &Metadata) -> bool {
        meta.program.is_some()
    }
}

impl WhatIsShared {
    /// One row per object, as pandas reads it: the counts by class, the pages, and the
    /// source lines of the samples on its shared lines (`FILE:LINE (FUNCTION) xN`, `;`
    /// between them).
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "object,kind,site,allocations,bytes,threads,accesses,writes,lines_private,lines_read_shared,lines_true_shared,lines_false_shared,accesses_private,accesses_read_shared,accesses_true_shared,accesses_false_shared,pages,shared_pages,code\n",
        );
        for o in &self.objects {
            let kind =
                serde_json::to_value(o.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
            let site = o.site.as_ref().map(CodeSite::describe).unwrap_or_default();
            let code: Vec<String> = o.code.iter().map(|c| format!("{} x{}", c.site.describe(), c.samples)).collect();
            let (l, a) = (&o.lines, &o.line_accesses);
            out.push_str(&format!(
                "{},{kind},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                csv_field(&o.name),
                csv_field(&site),
                o.allocations,
                o.bytes,
                o.threads,
                o.accesses,
                o.writes,
                l.private,
                l.read_shared,
                l.true_shared,
                l.false_shared,
                a.private,
                a.read_shared,
                a.true_shared,
                a.false_shared,
                o.pages,
                o.shared_pages,
                csv_field(&code.join("; ")),
            ));
        }
        out
    }
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_string() }
}

/// An instance: one variable, allocation, stack or unknown block.
struct Instance {
    row: RowKey,
    start: u64,
    end: u64,
    alive: bool,
    accesses: u64,
    writes: u64,
    threads: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum RowKey {
    Static(String),
    Site { pc: u64, how: String },
    Stack(u32),
    Unknown(u64),
}

/// One line, from its first access (or its restart after its object was freed).
#[derive(Clone, Copy)]
struct LineState {
    line: u64,
    instance: u32,
    /// A second live object in the line (small ones side by side), NONE when none: the line
    /// counts for both.
    also: u32,
    /// Per word: 1 + the first thread that touched it (0: none yet).
    first: [u16; WORDS],
    /// Per word (bit): touched by a thread other than its first; written.
    other: u8,
    written: u8,
    accesses: u64,
}

impl LineState {
    fn class(&self) -> LineClass {
        let mut seen = 0u16;
        let mut several = self.other != 0;
        for &f in self.first.iter().filter(|&&f| f != 0) {
            several |= seen != 0 && seen != f;
            seen = f;
        }
        if self.other & self.written != 0 {
            LineClass::TrueShared
        } else if several && self.written != 0 {
            LineClass::FalseShared
        } else if several {
            LineClass::ReadShared
        } else {
            LineClass::Private
        }
    }

    /// The thread that touched it first, and whether others did.
    fn touchers(&self) -> (u16, bool) {
        let mut seen = 0u16;
        let mut several = self.other != 0;
        for &f in self.first.iter().filter(|&&f| f != 0) {
            several |= seen != 0 && seen != f;
            seen = f;
        }
        (seen, several)
    }
}

const NONE: u32 = u32::MAX;
/// Groups each thread remembers.
const NEAR: usize = 8;
/// Lines in a group (4 KiB of 64-byte lines).
const GROUP: usize = 64;

struct Pass {
    line_shift: u32,
    word_shift: u32,
    page_shift: u32,
    instances: Vec<Instance>,
    /// Live instances by start address.
    live: BTreeMap<u64, u32>,
    /// Each thread's last instance found: most accesses fall in the same one.
    recent: Vec<u32>,
    /// Each thread's recent groups and their blocks, replaced in turn: a stencil's accesses
    /// go round a few streams.
    near: Vec<([(u64, u32); NEAR], usize)>,
    unknown: FxHashMap<u64, u32>,
    /// Line states by groups of `GROUP` lines: each group's slots side by side, so that a
    /// stream crossing into the next line finds it in the block it is in.
    groups: FxHashMap<u64, u32>,
    blocks: Vec<[u32; GROUP]>,
    states: Vec<LineState>,
    /// Each thread's sample waiting for its next access (0: none).
    pending: Vec<u64>,
    /// (line state, instance, code address) of each sampled access.
    samples: Vec<(u32, u32, u64)>,
    accesses: u64,
    allocations: u64,
    frees: u64,
    named: bool,
}

impl Pass {
    fn new(meta: &Metadata) -> Pass {
        let line_size = meta.line_size.max(WORDS as u64);
        let mut pass = Pass {
            line_shift: line_size.trailing_zeros(),
            word_shift: (line_size / WORDS as u64).trailing_zeros(),
            page_shift: meta.page_size.trailing_zeros(),
            instances: Vec::new(),
            live: BTreeMap::new(),
            recent: Vec::new(),
            near: Vec::new(),
            unknown: FxHashMap::default(),
            groups: FxHashMap::default(),
            blocks: Vec::new(),
            states: Vec::new(),
            pending: Vec::new(),
            samples: Vec::new(),
            accesses: 0,
            allocations: 0,
            frees: 0,
            named: false,
        };
        if let Some(program) = &meta.program {
            for s in program.statics.iter().filter(|s| s.size > 0) {
                pass.named = true;
                pass.insert(RowKey::Static(s.name.clone()), s.addr, s.size);
            }
        }
        pass
    }

    /// A new live instance; whatever it overlaps is gone (its free was not recorded).
    fn insert(&mut self, row: RowKey, start: u64, size: u64) {
        let end = start.saturating_add(size.max(1));
        let before = self.live.range(..start).next_back().filter(|&(_, &i)| self.instances[i as usize].end > start);
        let overlapped: Vec<u64> = before.into_iter().chain(self.live.range(start..end)).map(|(&s, _)| s).collect();
        for s in overlapped {
            if let Some(i) = self.live.remove(&s) {
                self.instances[i as usize].alive = false;
            }
        }
        let id = self.instances.len() as u32;
        self.instances.push(Instance { row, start, end, alive: true, accesses: 0, writes: 0, threads: Vec::new() });
        self.live.insert(start, id);
        self.recent.iter_mut().for_each(|r| *r = NONE);
    }

    fn free(&mut self, addr: u64) {
        if let Some(i) = self.live.remove(&addr) {
            self.instances[i as usize].alive = false;
            self.frees += 1;
            self.recent.iter_mut().for_each(|r| *r = NONE);
        }
    }

    /// The live instance holding `addr`, or the unknown block's.
    fn instance_at(&mut self, thread: usize, addr: u64) -> u32 {
        if let Some(&r) = self.recent.get(thread)
            && r != NONE
        {
            let i = &self.instances[r as usize];
            if i.start <= addr && addr < i.end {
                return r;
            }
        }
        let found = match self.live.range(..=addr).next_back() {
            Some((_, &i)) if self.instances[i as usize].end > addr => i,
            _ => {
                let block = addr >> UNKNOWN_BLOCK_BITS;
                match self.unknown.get(&block) {
                    Some(&i) => i,
                    None => {
                        let id = self.instances.len() as u32;
                        let start = block << UNKNOWN_BLOCK_BITS;
                        self.instances.push(Instance {
                            row: RowKey::Unknown(block),
                            start,
                            end: start + (1 << UNKNOWN_BLOCK_BITS),
                            alive: true,
                            accesses: 0,
                            writes: 0,
                            threads: Vec::new(),
                        });
                        self.unknown.insert(block, id);
                        id
                    }
                }
            }
        };
        if self.recent.len() <= thread {
            self.recent.resize(thread + 1, NONE);
        }
        self.recent[thread] = found;
        found
    }

    fn chunk(&mut self, chunk: &Chunk) {
        let mut events = chunk.events.iter().peekable();
        let batch = &chunk.accesses;
        for i in 0..=batch.len() {
            let at = chunk.first_access + i as u64;
            while let Some(e) = events.next_if(|e| e.at <= at) {
                match e.kind {
                    EventKind::Alloc => {
                        self.named = true;
                        self.allocations += 1;
                        let row = if e.label == "stack" {
                            RowKey::Stack(e.thread)
                        } else {
                            RowKey::Site { pc: e.site, how: e.label.clone() }
                        };
                        self.insert(row, e.arg, e.size);
                    }
                    EventKind::Free => self.free(e.arg),
                    EventKind::AccessSite => {
                        let t = e.thread as usize;
                        if self.pending.len() <= t {
                            self.pending.resize(t + 1, 0);
                        }
                        self.pending[t] = e.arg;
                    }
                    _ => {}
                }
            }
            if i < batch.len() {
                self.access(batch.thread[i], batch.addr[i], batch.size(i) as u64, batch.is_write(i));
            }
        }
    }

    fn access(&mut self, thread: u32, addr: u64, size: u64, write: bool) {
        self.accesses += 1;
        let t = thread as usize;
        if self.near.len() <= t {
            self.near.resize(t + 1, ([(u64::MAX, NONE); NEAR], 0));
        }
        let toucher = thread.min(u16::MAX as u32 - 1) as u16 + 1;
        let last = addr.saturating_add(size.max(1) - 1);
        let (first_line, last_line) = (addr >> self.line_shift, last >> self.line_shift);
        let (mut first_slot, mut inst) = (NONE, NONE);
        let mut counted = false;
        for line in first_line..=last_line {
            let (slot, of) = self.slot_for(t, line, addr, &mut counted, write);
            if first_slot == NONE {
                (first_slot, inst) = (slot, of);
            }
            let base = line << self.line_shift;
            let lo = (addr.max(base) - base) >> self.word_shift;
            let hi = (last.min(base + (1 << self.line_shift) - 1) - base) >> self.word_shift;
            let s = &mut self.states[slot as usize];
            s.accesses += 1;
            for w in lo as usize..=hi as usize {
                match s.first[w] {
                    0 => s.first[w] = toucher,
                    f if f != toucher => s.other |= 1 << w,
                    _ => {}
                }
                if write {
                    s.written |= 1 << w;
                }
            }
        }
        if let Some(pc) = self.pending.get_mut(t)
            && *pc != 0
        {
            self.samples.push((first_slot, inst, std::mem::take(pc)));
        }
    }

    /// The state of `line` for thread `t`'s access at `addr`, its instance's counts kept
    /// (once per access: `counted`). A line held by a live instance that holds `addr` is
    /// found in its group's block; anything else looks its instance up.
    fn slot_for(&mut self, t: usize, line: u64, addr: u64, counted: &mut bool, write: bool) -> (u32, u32) {
        let block = self.block_of(t, line / GROUP as u64);
        let at = (line % GROUP as u64) as usize;
        let slot = self.blocks[block as usize][at];
        if slot != NONE {
            let state = &self.states[slot as usize];
            for inst in [state.instance, state.also] {
                if inst == NONE {
                    continue;
                }
                let i = &self.instances[inst as usize];
                if i.alive && i.start <= addr && addr < i.end {
                    let known = self.recent.get(t) == Some(&inst);
                    self.count(t, inst, counted, write, !known);
                    return (slot, inst);
                }
            }
        }
        let inst = self.instance_at(t, addr);
        self.count(t, inst, counted, write, true);
        let fresh =
            LineState { line, instance: inst, also: NONE, first: [0; WORDS], other: 0, written: 0, accesses: 0 };
        // A new line, or one whose object was freed and another holds now, starts afresh;
        // one held by another live object (small ones side by side) is both's (a third is
        // counted as the first's).
        if slot != NONE {
            let state = &mut self.states[slot as usize];
            let held = state.instance;
            if held == inst || self.instances[held as usize].alive {
                if held != inst && state.also == NONE {
                    state.also = inst;
                }
                return (slot, inst);
            }
        }
        let new = self.states.len() as u32;
        self.states.push(fresh);
        self.blocks[block as usize][at] = new;
        (new, inst)
    }

    /// The block of line group `group`, from thread `t`'s memory or the table.
    fn block_of(&mut self, t: usize, group: u64) -> u32 {
        let near = &mut self.near[t];
        if let Some(&(_, b)) = near.0.iter().find(|&&(g, _)| g == group) {
            return b;
        }
        let blocks = &mut self.blocks;
        let b = *self.groups.entry(group).or_insert_with(|| {
            blocks.push([NONE; GROUP]);
            blocks.len() as u32 - 1
        });
        near.0[near.1] = (group, b);
        near.1 = (near.1 + 1) % NEAR;
        b
    }

    /// Counts the access for instance `inst`, once, and with `new_thread` thread `t` among
    /// its threads (an instance is the thread's `recent` once its bit is set).
    fn count(&mut self, t: usize, inst: u32, counted: &mut bool, write: bool, new_thread: bool) {
        let instance = &mut self.instances[inst as usize];
        if !*counted {
            instance.accesses += 1;
            instance.writes += u64::from(write);
            *counted = true;
        }
        if new_thread {
            let (word, bit) = (t / 64, 1u64 << (t % 64));
            if instance.threads.len() <= word {
                instance.threads.resize(word + 1, 0);
            }
            instance.threads[word] |= bit;
            if self.recent.len() <= t {
                self.recent.resize(t + 1, NONE);
            }
            self.recent[t] = inst;
        }
    }

    fn finish(self, meta: &Metadata) -> WhatIsShared {
        let code: FxHashMap<u64, &CodeSite> =
            meta.program.iter().flat_map(|p| p.code.iter()).map(|c| (c.pc, c)).collect();
        let site_of = |pc: u64| -> CodeSite {
            code.get(&pc).map(|c| (*c).clone()).unwrap_or(CodeSite {
                pc,
                function: String::new(),
                file: String::new(),
                line: 0,
            })
        };
        // Pages any two threads touched.
        let mut pages: FxHashMap<u64, (u16, bool)> = FxHashMap::default();
        for s in &self.states {
            let (first, several) = s.touchers();
            let p = pages.entry(s.line >> (self.page_shift - self.line_shift)).or_insert((first, false));
            p.1 |= several || p.0 != first;
        }
        // Rows: instances joined by key; unknown blocks joined with their neighbours.
        let mut row_of: Vec<usize> = vec![0; self.instances.len()];
        let mut keys: Vec<RowKey> = Vec::new();
        let mut index: FxHashMap<RowKey, usize> = FxHashMap::default();
        let mut order: Vec<u32> = (0..self.instances.len() as u32).collect();
        order.sort_by_key(|&i| self.instances[i as usize].start);
        let mut last_unknown: Option<(u64, usize)> = None;
        for &i in &order {
            let inst = &self.instances[i as usize];
            let key = match &inst.row {
                RowKey::Unknown(block) => match last_unknown {
                    Some((prev, row)) if prev + 1 == *block => {
                        last_unknown = Some((*block, row));
                        row_of[i as usize] = row;
                        continue;
                    }
                    _ => inst.row.clone(),
                },
                other => other.clone(),
            };
            let row = *index.entry(key.clone()).or_insert_with(|| {
                keys.push(key);
                keys.len() - 1
            });
            if let RowKey::Unknown(block) = inst.row {
                last_unknown = Some((block, row));
            }
            row_of[i as usize] = row;
        }
        let mut rows: Vec<SharedObject> = keys
            .iter()
            .map(|k| {
                let (name, kind, site) = match k {
                    RowKey::Static(name) => (name.clone(), ObjectKind::Static, None),
                    RowKey::Stack(t) => (format!("stack of thread {t}"), ObjectKind::Stack, None),
                    RowKey::Site { pc, how } => {
                        let kind = if how == "mmap" { ObjectKind::Mapped } else { ObjectKind::Heap };
                        let site = (*pc != 0).then(|| site_of(*pc));
                        let name = match &site {
                            Some(s) => format!("{how} at {}", s.describe()),
                            None => format!("{how} (call site not known)"),
                        };
                        (name, kind, site)
                    }
                    RowKey::Unknown(_) => (String::new(), ObjectKind::Unknown, None),
                };
                SharedObject {
                    name,
                    kind,
                    site,
                    allocations: 0,
                    bytes: 0,
                    threads: 0,
                    accesses: 0,
                    writes: 0,
                    lines: ByClass::default(),
                    line_accesses: ByClass::default(),
                    pages: 0,
                    shared_pages: 0,
                    code: Vec::new(),
                }
            })
            .collect();
        // Several calls on one source line (`a = malloc(..), b = malloc(..)`) are told apart by
        // their order in the code.
        let mut calls: FxHashMap<(String, SiteKey), Vec<(u64, usize)>> = FxHashMap::default();
        for (r, k) in keys.iter().enumerate() {
            if let RowKey::Site { pc, how } = k
                && *pc != 0
            {
                calls.entry((how.clone(), SiteKey::of(&site_of(*pc)))).or_default().push((*pc, r));
            }
        }
        for mut same in calls.into_values().filter(|v| v.len() > 1) {
            same.sort_unstable();
            let n = same.len();
            for (k, &(_, r)) in same.iter().enumerate() {
                rows[r].name = format!("{}, call {} of {n}", rows[r].name, k + 1);
            }
        }
        let mut threads: Vec<Vec<u64>> = vec![Vec::new(); rows.len()];
        let mut spans: Vec<(u64, u64)> = vec![(u64::MAX, 0); rows.len()];
        for (i, inst) in self.instances.iter().enumerate() {
            let r = row_of[i];
            let untouched = inst.accesses == 0;
            if untouched && matches!(inst.row, RowKey::Unknown(_)) {
                continue;
            }
            let row = &mut rows[r];
            row.allocations += 1;
            row.bytes += inst.end - inst.start;
            row.accesses += inst.accesses;
            row.writes += inst.writes;
            let set = &mut threads[r];
            if set.len() < inst.threads.len() {
                set.resize(inst.threads.len(), 0);
            }
            for (a, b) in set.iter_mut().zip(&inst.threads) {
                *a |= b;
            }
            if inst.accesses > 0 {
                spans[r] = (spans[r].0.min(inst.start), spans[r].1.max(inst.end));
            }
        }
        let mut row_pages: FxHashMap<(usize, u64), u64> = FxHashMap::default();
        let mut lines = ByClass::default();
        let mut line_accesses = ByClass::default();
        let classes: Vec<LineClass> = self.states.iter().map(LineState::class).collect();
        for (s, &class) in self.states.iter().zip(&classes) {
            lines.add(class, 1);
            line_accesses.add(class, s.accesses);
            let first = row_of[s.instance as usize];
            let second = (s.also != NONE).then(|| row_of[s.also as usize]).filter(|&r| r != first);
            for r in std::iter::once(first).chain(second) {
                rows[r].lines.add(class, 1);
                rows[r].line_accesses.add(class, s.accesses);
                *row_pages.entry((r, s.line >> (self.page_shift - self.line_shift))).or_default() += s.accesses;
            }
        }
        let mut busiest: FxHashMap<u64, (u64, usize)> = FxHashMap::default();
        for (&(r, page), &n) in &row_pages {
            rows[r].pages += 1;
            rows[r].shared_pages += u64::from(pages[&page].1);
            let b = busiest.entry(page).or_insert((n, r));
            if (n, std::cmp::Reverse(r)) > (b.0, std::cmp::Reverse(b.1)) {
                *b = (n, r);
            }
        }
        // Samples: by source line, per row and overall.
        let mut per_row: FxHashMap<(usize, SiteKey), u64> = FxHashMap::default();
        let mut overall: FxHashMap<SiteKey, (CodeSite, ByClass)> = FxHashMap::default();
        for &(slot, inst, pc) in &self.samples {
            let class = classes[slot as usize];
            if class == LineClass::Private {
                continue;
            }
            let site = site_of(pc);
            let key = SiteKey::of(&site);
            *per_row.entry((row_of[inst as usize], key.clone())).or_default() += 1;
            overall.entry(key).or_insert_with(|| (site, ByClass::default())).1.add(class, 1);
        }
        let names: FxHashMap<SiteKey, CodeSite> = overall.iter().map(|(k, (s, _))| (k.clone(), s.clone())).collect();
        let mut by_row: Vec<Vec<CodeCount>> = vec![Vec::new(); rows.len()];
        for ((r, key), n) in per_row {
            by_row[r].push(CodeCount { site: names[&key].clone(), samples: n });
        }
        for (r, row) in rows.iter_mut().enumerate() {
            row.threads = threads[r].iter().map(|w| w.count_ones()).sum();
            if row.kind == ObjectKind::Unknown {
                let (lo, hi) = spans[r];
                row.bytes = hi.saturating_sub(lo);
                row.name = format!("{lo:#x}+{} (no allocation record)", bytes(hi.saturating_sub(lo)));
            }
            let mut code = std::mem::take(&mut by_row[r]);
            code.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.site.describe().cmp(&b.site.describe())));
            code.truncate(CODE_PER_OBJECT);
            row.code = code;
        }
        // Sorted with their old indices, for the pages' objects.
        let mut order: Vec<usize> = (0..rows.len()).filter(|&r| rows[r].accesses > 0).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (&rows[a], &rows[b]);
            let conflict = |o: &SharedObject| o.line_accesses.true_shared + o.line_accesses.false_shared;
            conflict(b)
                .cmp(&conflict(a))
                .then(b.line_accesses.shared().cmp(&a.line_accesses.shared()))
                .then(b.accesses.cmp(&a.accesses))
                .then_with(|| a.name.cmp(&b.name))
        });
        let mut new_index = vec![u32::MAX; rows.len()];
        for (k, &r) in order.iter().enumerate() {
            new_index[r] = k as u32;
        }
        let mut page_objects: Vec<(u64, u32)> =
            busiest.into_iter().map(|(page, (_, r))| (page, new_index[r])).filter(|p| p.1 != u32::MAX).collect();
        page_objects.sort_unstable();
        let mut slots: Vec<Option<SharedObject>> = rows.into_iter().map(Some).collect();
        let rows: Vec<SharedObject> = order.iter().map(|&r| slots[r].take().expect("each row once")).collect();
        let mut code: Vec<SharingCode> =
            overall.into_values().map(|(site, samples)| SharingCode { site, samples }).collect();
        code.sort_by(|a, b| {
            let conflict = |c: &SharingCode| c.samples.true_shared + c.samples.false_shared;
            conflict(b)
                .cmp(&conflict(a))
                .then(b.samples.shared().cmp(&a.samples.shared()))
                .then_with(|| a.site.describe().cmp(&b.site.describe()))
        });
        WhatIsShared {
            line_size: 1 << self.line_shift,
            word_size: 1 << self.word_shift,
            accesses: self.accesses,
            named: self.named,
            allocations: self.allocations,
            frees: self.frees,
            lines,
            line_accesses,
            objects: rows,
            samples: self.samples.len() as u64,
            sample_period: ACCESS_SITE_PERIOD,
            code,
            page_objects,
        }
    }
}

/// A source line as samples are counted by: one per file and line where the binary says
/// them, else one per function, else per code address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum SiteKey {
    Line(String, u32),
    Function(String),
    Pc(u64),
}

impl SiteKey {
    fn of(site: &CodeSite) -> SiteKey {
        if site.line != 0 {
            SiteKey::Line(site.file.clone(), site.line)
        } else if !site.function.is_empty() {
            SiteKey::Function(site.function.clone())
        } else {
            SiteKey::Pc(site.pc)
        }
    }
}

/// Bytes in the largest binary unit that keeps them above 1.
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

#[cfg(test)]
mod tests;
