//! The exact off-line optimal placement of one page (seed 004 section 3), by dynamic
//! programming over the page's writes. docs/placement/optimal.md derives it; in short:
//!
//! A write leaves the page in a single memory, so between two writes (a read-run) only
//! the starting memory `a`, the copy set `S` used during the run and the memory `b` of
//! the next write matter. With R >= G, adding all of S at the run's first read is never
//! worse than adding copies later, keeping `a` in S is free, and a node j is worth a copy
//! exactly when its reads pay for it: min(R + c_j, r c_j) (min(G + c_j, g c_j) when global
//! memory is in S). So each run costs a sum over the nodes that read in it plus a few
//! terms for a, b and global memory, and the best predecessor is one of: b itself, the
//! node with the least adjusted cost, or global memory.
//!
//! Every node that neither read in a run nor wrote at its end gets the same update,
//! V' = min(V + k, D), so those values are kept lazily as min(raw + K, Cap) with one
//! (K, Cap) for all: a write costs O(nodes touched in its run), plus the least raw value
//! among the other nodes. That least value is remembered from write to write and only
//! looked for again, by a scan of every node in lanes, when its holder is touched.
//!
//! Each write's touched nodes leave an entry (how they were reached, their reads in the run,
//! their raw value before it). One walk back from the final state takes the writes and
//! entries newest first, follows the codes, knows an untouched node's value from the entries
//! it has passed, and charges the placement it finds from the entries, without replaying
//! the trace. What the walk back needs is kept as stacks that spill to temporary files
//! (`stack`), and the page is read in passes, so a page of any length takes bounded memory.

use crate::cost::{Costs, GLOBAL_BIT, LocSet, Tally, node_bit};
use crate::page::Ref;

const NONE: u16 = u16::MAX;
/// The state id of global memory.
const GLOB: u16 = u16::MAX - 1;
/// The value arrays are padded with +inf to a multiple of this, so scans run in lanes.
const LANES: usize = 8;
const INF: f64 = f64::INFINITY;

// How a state was reached at a write.
const A_SELF: u8 = 0; // from b itself, global memory not in the run's set
const A_MIN: u8 = 1; // from the node of least adjusted cost, no global memory
const B1: u8 = 2; // from global memory (global memory in the run's set)
const B2_SELF: u8 = 3; // from b itself with a global copy during the run
const B2_MIN: u8 = 4; // from the least node (excluding b) with a global copy
const G_STAY: u8 = 5; // global -> global
const G_B2: u8 = 6; // node -> global, global memory in the run's set
const G_B3: u8 = 7; // node -> global, node copies only during the run

/// The optimum for one page: its cost, what it consists of, and where the page was.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Solution {
    pub cost: f64,
    pub tally: Tally,
    /// (reference index in the page, location set from that reference on), at each change;
    /// the first entry is the initial placement.
    pub changes: Vec<(usize, LocSet)>,
}

/// What the walk back needs to know about one write.
#[derive(Clone, Copy)]
struct Write {
    /// Index of the write in the page's references.
    index: usize,
    /// Index of the last write merged into this one (see `forward`): `index..=last` are
    /// consecutive writes by one node, and the page stays put.
    last: usize,
    /// Where the read-run before this write starts (after the previous write's `last`).
    run_start: usize,
    /// The most reads the writer made before one of those merged writes.
    max_reads: u32,
    /// How many writes were merged into this one (each left its reads on `stretches`).
    merged: u32,
    /// How many entries this write left (the nodes touched in its run).
    entries: u32,
    /// The writer.
    node: u16,
    arg_u: u16,
    arg_ug: u16,
    arg_ug2: u16,
    /// The lazy transform before this write, and the one it applied to untouched states.
    k_before: f64,
    cap_before: f64,
    add: f64,
    cap: f64,
    /// Codes of an untouched state: when V + add <= cap, and otherwise.
    self_code: u8,
    cap_code: u8,
    glob_code: u8,
}

/// A node touched in a write's run: how it was reached at the write, its reads in the run,
/// and its raw value before the write (which the walk back needs once past the write, for
/// the writes before it at which the node is untouched).
#[derive(Clone, Copy)]
struct Entry {
    prev_raw: f64,
    count: u32,
    node: u16,
    code: u8,
}

impl stack::Record for Write {
    const BYTES: usize = 3 * 8 + 3 * 4 + 4 * 2 + 4 * 8 + 3;
    fn put(&self, out: &mut Vec<u8>) {
        for v in [self.index, self.last, self.run_start] {
            out.extend_from_slice(&(v as u64).to_le_bytes());
        }
        for v in [self.max_reads, self.merged, self.entries] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.node, self.arg_u, self.arg_ug, self.arg_ug2] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [self.k_before, self.cap_before, self.add, self.cap] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&[self.self_code, self.cap_code, self.glob_code]);
    }
    fn get(bytes: &[u8]) -> Self {
        let mut f = stack::Fields(bytes);
        Write {
            index: f.u64() as usize,
            last: f.u64() as usize,
            run_start: f.u64() as usize,
            max_reads: f.u32(),
            merged: f.u32(),
            entries: f.u32(),
            node: f.u16(),
            arg_u: f.u16(),
            arg_ug: f.u16(),
            arg_ug2: f.u16(),
            k_before: f.f64(),
            cap_before: f.f64(),
            add: f.f64(),
            cap: f.f64(),
            self_code: f.u8(),
            cap_code: f.u8(),
            glob_code: f.u8(),
        }
    }
}

impl stack::Record for Entry {
    const BYTES: usize = 8 + 4 + 2 + 1;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.prev_raw.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.node.to_le_bytes());
        out.push(self.code);
    }
    fn get(bytes: &[u8]) -> Self {
        let mut f = stack::Fields(bytes);
        Entry { prev_raw: f.f64(), count: f.u32(), node: f.u16(), code: f.u8() }
    }
}

pub mod exhaustive;
mod forward;
pub mod reference;
mod stack;
mod thresholds;
mod walk_back;

pub use reference::replay;
use stack::SpillStack;
use thresholds::{fewest_reads_copied, most_reads_kept, stretch_cost};

/// Per-node state. Indexed by `node & 127` (see `ix`): node ids are below 128, and a fixed
/// size lets the compiler drop the bounds checks from the per-reference path.
struct Nodes {
    /// The lazy value (the true value is min(raw + K, Cap)); +inf for padding and, during a
    /// write, for the nodes touched in its run, so that a scan sees only the others.
    raw: [f64; 128],
    /// Reads in the current run.
    count: [u32; 128],
    /// The run in which the node was last touched (`Optimal::run`).
    stamp: [u32; 128],
    /// Nodes touched in the current run, in order, and per position: raw value before the
    /// write, true value, savings d and dg.
    touched: [u16; 128],
    prev: [f64; 128],
    tv: [f64; 128],
    d: [f64; 128],
    dg: [f64; 128],
}

#[inline(always)]
fn ix(n: impl Into<usize>) -> usize {
    n.into() & 127
}

/// Moves on to the next run's number: no node's stamp equals it.
#[inline]
fn next_run(run: &mut u32, t: &mut Nodes) {
    *run = run.wrapping_add(1);
    if *run == 0 {
        // Stamps wrapped around: none may look current.
        t.stamp = [0; 128];
        *run = 1;
    }
}

/// The lesser of two costs, which are never NaN here: one instruction, where `f64::min`
/// adds a NaN test.
#[inline(always)]
fn min2(a: f64, b: f64) -> f64 {
    if b < a { b } else { a }
}

/// Reusable solver for one machine; holds its scratch space between pages.
pub struct Optimal {
    nodes: usize,
    /// `nodes` rounded up to LANES: the part of `raw` a scan reads.
    padded: usize,
    c: Costs,
    /// The most reads in a stretch for which the page stays where it is, when it is at a
    /// node other than the writer's, and when it is in global memory (see `stretch_set`).
    stay_at_node: u32,
    stay_in_global: u32,
    /// The fewest reads for which a node's copy pays in a run without global memory, and
    /// in one with (see `charge_run`).
    copy_from: u32,
    copy_from_global: u32,
    t: Box<Nodes>,
    /// How many nodes are in `t.touched`.
    touched_len: usize,
    /// The current run's number: a node is touched in it when its stamp equals it.
    run: u32,
    writes: SpillStack<Write>,
    entries: SpillStack<Entry>,
    /// The reads before each merged write, in order.
    stretches: SpillStack<u32>,
    /// The walk back's raw value of each node at the write it is at, and the entries of
    /// that write.
    raw_at: [f64; 128],
    run_entries: Vec<Entry>,
}

/// What the walk back keeps in memory by default (see `Optimal::with_memory`).
const DEFAULT_MEMORY: usize = 64 << 20;

/// Where the forward pass ended: the optimum, the final state, whether the trailing run has
/// a global copy, and how many writes it recorded.
struct End {
    cost: f64,
    state: u16,
    glob: bool,
    writes: usize,
}

/// What a look at a page's start tells before it is solved.
struct Survey {
    len: usize,
    first_write: Option<usize>,
    /// Nodes reading before the first write (all of them when there is none).
    leading: LocSet,
    /// The node of every reference, when they all come from one.
    only_node: Option<u16>,
}

impl Survey {
    /// Reads up to the first write, then only as far as it takes to see a second node.
    fn of(refs: impl Iterator<Item = Ref>, len: usize) -> Survey {
        let mut refs = refs.enumerate();
        let mut survey = Survey { len, first_write: None, leading: 0, only_node: None };
        let mut first = None;
        for (i, r) in refs.by_ref() {
            let only = *first.get_or_insert(r.node);
            if r.write {
                survey.first_write = Some(i);
                if survey.leading & !node_bit(only) == 0 && r.node == only && refs.all(|(_, r)| r.node == only) {
                    survey.only_node = Some(only);
                }
                return survey;
            }
            survey.leading |= node_bit(r.node);
        }
        survey
    }
}

impl Optimal {
    pub fn new(nodes: usize, costs: Costs) -> Self {
        assert!((1..=crate::cost::MAX_NODES).contains(&nodes));
        Optimal {
            nodes,
            padded: nodes.div_ceil(LANES) * LANES,
            c: costs,
            stay_at_node: most_reads_kept(&costs, false),
            stay_in_global: most_reads_kept(&costs, true),
            copy_from: fewest_reads_copied(&costs, false),
            copy_from_global: fewest_reads_copied(&costs, true),
            t: Box::new(Nodes {
                raw: [INF; 128],
                count: [0; 128],
                stamp: [0; 128],
                touched: [0; 128],
                prev: [0.0; 128],
                tv: [0.0; 128],
                d: [0.0; 128],
                dg: [0.0; 128],
            }),
            touched_len: 0,
            run: 1,
            writes: SpillStack::new(DEFAULT_MEMORY / 2),
            entries: SpillStack::new(DEFAULT_MEMORY * 3 / 8),
            stretches: SpillStack::new(DEFAULT_MEMORY / 8),
            raw_at: [INF; 128],
            run_entries: Vec::new(),
        }
    }

    /// The same solver keeping at most about `bytes` of what the walk back needs in memory
    /// (the rest goes to temporary files): a page's writes, whatever their number, then
    /// take bounded memory.
    pub fn with_memory(self, bytes: usize) -> Self {
        Optimal {
            writes: SpillStack::new(bytes / 2),
            entries: SpillStack::new(bytes * 3 / 8),
            stretches: SpillStack::new(bytes / 8),
            ..self
        }
    }

    /// An I/O error of the temporary files behind the last solve, if any (its solution
    /// is then meaningless).
    pub fn take_error(&mut self) -> Option<std::io::Error> {
        [&mut self.writes.error, &mut self.entries.error]
            .into_iter()
            .find_map(Option::take)
            .or(self.stretches.error.take())
    }

    fn failed(&self) -> bool {
        self.writes.error.is_some() || self.entries.error.is_some() || self.stretches.error.is_some()
    }

    pub fn costs(&self) -> &Costs {
        &self.c
    }

    /// Forgets the previous page: the reads of its last run (the values are set for every
    /// node at the page's first write) and what it left for the walk back.
    fn reset(&mut self) {
        for n in 0..self.touched_len {
            let node = self.t.touched[ix(n)];
            self.t.count[ix(node)] = 0;
        }
        self.touched_len = 0;
        next_run(&mut self.run, &mut self.t);
        self.writes.clear();
        self.entries.clear();
        self.stretches.clear();
    }

    /// Solves one page: its references must be in trace order, from nodes below `nodes`.
    pub fn solve(&mut self, refs: &[Ref]) -> Solution {
        let survey = Survey::of(refs.iter().copied(), refs.len());
        self.solve_with(&survey, || forward::SliceCursor { refs, pos: 0 }, true)
    }

    /// Solves one page, reading its references in a few passes (see `Page::refs`), so
    /// that a page of any length takes bounded memory. Without `changes` the solution
    /// lists none (a page may change hundreds of millions of times).
    pub fn solve_page(&mut self, page: &crate::page::Page, changes: bool) -> Solution {
        match page.in_memory() {
            Some(refs) => {
                let survey = Survey::of(refs.iter().copied(), refs.len());
                self.solve_with(&survey, || forward::SliceCursor { refs, pos: 0 }, changes)
            }
            None => {
                let survey = Survey::of(page.refs(), page.len() as usize);
                self.solve_with(&survey, || page.refs().peekable(), changes)
            }
        }
    }

    fn solve_with<C: forward::Cursor>(&mut self, survey: &Survey, refs: impl Fn() -> C, changes: bool) -> Solution {
        let len = survey.len;
        let Some(first_write) = survey.first_write else {
            // Never written: the free initial placement puts a copy at every reader.
            let tally = Tally { local: len as u64, ..Tally::default() };
            let changes = if len == 0 { vec![] } else { vec![(0, survey.leading)] };
            return Solution { cost: len as f64, tally, changes };
        };
        // Used by one node only (private data, the common case): all local from the start.
        if let Some(only) = survey.only_node {
            let tally = Tally { local: len as u64, ..Tally::default() };
            return Solution { cost: len as f64, tally, changes: vec![(0, node_bit(only))] };
        }
        self.reset();
        let end = if self.c.has_global() {
            self.forward::<true>(refs(), first_write)
        } else {
            self.forward::<false>(refs(), first_write)
        };
        let solution = self.reconstruct(survey, &end, changes);
        if self.failed() {
            return Solution::default();
        }
        debug_assert!(
            (solution.tally.cost(&self.c) - end.cost).abs() <= 1e-6 * end.cost.max(1.0),
            "replayed optimum {} differs from the dynamic program's {}",
            solution.tally.cost(&self.c),
            end.cost
        );
        Solution { cost: end.cost, ..solution }
    }
}
