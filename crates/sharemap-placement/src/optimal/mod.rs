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
//! Each write's touched nodes leave an entry (how they were reached, their reads in the
//! run, their new raw value). One walk back from the final state follows the codes, reads
//! an untouched node's value from its latest earlier entry, and charges the placement it
//! finds from the entries, without replaying the trace.

use crate::cost::{Costs, GLOBAL_BIT, LocSet, Tally, node_bit};
use crate::page::Ref;

const NONE: u16 = u16::MAX;
/// The state id of global memory.
const GLOB: u16 = u16::MAX - 1;
const NO_ENTRY: u32 = u32::MAX;
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
struct Write {
    /// Index of the write in the page's references.
    index: usize,
    /// Index of the last write merged into this one (see `forward`): `index..=last` are
    /// consecutive writes by one node, and the page stays put.
    last: usize,
    /// The most reads the writer made before one of those merged writes.
    max_reads: u32,
    /// This write's first entry; its entries end where the next write's begin.
    entries: u32,
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
/// and its raw value from the next write on.
struct Entry {
    raw: f64,
    write: u32,
    /// The node's previous entry.
    prev: u32,
    count: u32,
    node: u16,
    code: u8,
}

mod forward;
pub mod reference;
mod thresholds;
mod walk_back;

pub use reference::replay;
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
    /// The node's latest entry, and the entry the walk back is at.
    head: [u32; 128],
    cursor: [u32; 128],
    /// Nodes touched in the current run, in order, and per position: true value, savings
    /// d and dg.
    touched: [u16; 128],
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
    /// Nodes with entries (what a new page must reset besides the values).
    seen: Vec<u16>,
    writes: Vec<Write>,
    entries: Vec<Entry>,
}

/// Where the forward pass ended: the optimum, the final state, whether the trailing run has
/// a global copy, and the starting raw value (that of every node without entries).
struct End {
    cost: f64,
    state: u16,
    glob: bool,
    rest_raw: f64,
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
                head: [NO_ENTRY; 128],
                cursor: [NO_ENTRY; 128],
                touched: [0; 128],
                tv: [0.0; 128],
                d: [0.0; 128],
                dg: [0.0; 128],
            }),
            touched_len: 0,
            run: 1,
            seen: Vec::with_capacity(nodes),
            writes: Vec::new(),
            entries: Vec::new(),
        }
    }

    pub fn costs(&self) -> &Costs {
        &self.c
    }

    /// Forgets the previous page: the nodes with entries, and the reads of its last run
    /// (the values are set for every node at the page's first write).
    fn reset(&mut self) {
        for &n in &self.seen {
            self.t.head[ix(n)] = NO_ENTRY;
            self.t.cursor[ix(n)] = NO_ENTRY;
        }
        self.seen.clear();
        for n in 0..self.touched_len {
            let node = self.t.touched[ix(n)];
            self.t.count[ix(node)] = 0;
        }
        self.touched_len = 0;
        next_run(&mut self.run, &mut self.t);
        self.writes.clear();
        self.entries.clear();
    }

    /// Solves one page: its references must be in trace order, from nodes below `nodes`.
    pub fn solve(&mut self, refs: &[Ref]) -> Solution {
        debug_assert!(
            refs.iter().all(|r| (r.node as usize) < self.nodes),
            "a reference from a node beyond the machine's {}",
            self.nodes
        );
        let Some(first_write) = refs.iter().position(|r| r.write) else {
            // Never written: the free initial placement puts a copy at every reader.
            let set = refs.iter().fold(0, |s, r| s | node_bit(r.node));
            let tally = Tally { local: refs.len() as u64, ..Tally::default() };
            let changes = if refs.is_empty() { vec![] } else { vec![(0, set)] };
            return Solution { cost: refs.len() as f64, tally, changes };
        };
        // Used by one node only (private data, the common case): all local from the start.
        let only = refs[0].node;
        if refs.iter().all(|r| r.node == only) {
            let tally = Tally { local: refs.len() as u64, ..Tally::default() };
            return Solution { cost: refs.len() as f64, tally, changes: vec![(0, node_bit(only))] };
        }
        self.reset();
        let end = if self.c.has_global() {
            self.forward::<true>(refs, first_write)
        } else {
            self.forward::<false>(refs, first_write)
        };
        let solution = self.reconstruct(refs, first_write, &end);
        debug_assert!(
            (solution.tally.cost(&self.c) - end.cost).abs() <= 1e-6 * end.cost.max(1.0),
            "replayed optimum {} differs from the dynamic program's {}",
            solution.tally.cost(&self.c),
            end.cost
        );
        Solution { cost: end.cost, ..solution }
    }
}
