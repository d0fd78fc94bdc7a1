//! Policies of operating systems and runtimes that watch a page's accesses as they go.

use super::{Context, Policy, Prepass, charge, first_touch, private};
use crate::cost::{MAX_NODES, Residence, Tally, node_bit};
use crate::page::{Page, Ref};
use sharemap_decide::carrefour::{self, Decision};
use sharemap_decide::sammu::SammuParams;
use sharemap_decide::{kmaf, numa_balancing, sammu};

/// Linux automatic NUMA balancing (`sharemap_decide::numa_balancing`): the scanner marks
/// `size_mb` of address space per period, in address order over the trace's pages, wrapping
/// around; the next access to a marked page is a hinting fault, which the two-stage filter
/// turns into a migration. The first access maps the page (first touch): not a fault.
#[derive(Debug)]
pub struct NumaBalancing {
    pub delay_ms: f64,
    pub period_ms: f64,
    pub size_mb: f64,
}

impl NumaBalancing {
    /// The position of the first scan at or after scan number `from` that marks page `rank`.
    fn next_mark(&self, ctx: &Context, rank: u64, from: u64) -> (u64, u64) {
        let per_scan = numa_balancing::pages_per_scan(self.size_mb, ctx.page_size);
        let pages = ctx.pages.max(1);
        let mut j = from;
        while !numa_balancing::marks(j, rank, pages, per_scan) {
            j += 1;
        }
        (j, ctx.refs(self.delay_ms) + j * ctx.refs(self.period_ms))
    }
}

impl Policy for NumaBalancing {
    fn clock(&self) -> Option<(&'static str, f64)> {
        Some(("first scan", self.delay_ms))
    }

    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        if let Some(t) = private(page) {
            return t;
        }
        let mut res = first_touch(page);
        let rank = page.address_rank as u64;
        let period = ctx.refs(self.period_ms);
        let delay = ctx.refs(self.delay_ms);
        let (mut scan, mut mark_at) = self.next_mark(ctx, rank, 0);
        let mut filter = numa_balancing::TwoStageFilter::default();
        let mut mapped = false;
        page.refs().for_each(|r| {
            if mapped && r.at >= mark_at {
                if filter.fault(r.node, res.holds(r.node)) {
                    res.place(node_bit(r.node));
                }
                // The next scan to mark this page after now.
                let now_scan = r.at.saturating_sub(delay) / period + 1;
                (scan, mark_at) = self.next_mark(ctx, rank, now_scan.max(scan + 1));
            }
            mapped = true;
            charge(&mut res, r);
        });
        res.tally
    }
}

/// SAMMU's NUMA counters (seed 000 section 3.3): on each TLB event of a node, its
/// saturating counter goes up and every other node's down; the page migrates to node n when
/// NC[n] - NC[home] >= NT. The events come from the TLB model the partition pass ran (the
/// page's `events`), or, with `proxy`, from the page's own stream: an access coming `gap`
/// references or more after that node's previous access (its TLB entry would have been
/// evicted meanwhile), or every `burst` accesses of one residency (the access counter
/// saturating).
#[derive(Debug)]
pub struct Sammu {
    pub max: u16,
    pub threshold: u16,
    pub proxy: bool,
    /// The TLB model whose events drive the counters (None with proxy events).
    pub tlb: Option<SammuParams>,
    pub gap: u64,
    pub burst: u32,
}

/// Per-page NUMA counters (`sharemap_decide::sammu`) and the page's node.
struct Counters {
    nc: [u16; MAX_NODES],
    nodes: usize,
    home: u16,
}

impl Counters {
    /// One TLB event of `node`; returns the new home when the page migrates.
    fn event(&mut self, node: u16, max: u16, threshold: u16) -> Option<u16> {
        let nc = &mut self.nc[..self.nodes];
        sammu::update(nc, node as usize, max, self.home as usize, threshold as u32).then(|| {
            self.home = node;
            node
        })
    }
}

impl Policy for Sammu {
    fn prepass(&self, _line: u64) -> Prepass {
        Prepass { tlb: self.tlb, ..Prepass::default() }
    }

    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        // TLB events come from cores that referenced the page, so from its one node too.
        if let Some(t) = private(page) {
            return t;
        }
        let mut res = first_touch(page);
        let mut c = Counters { nc: [0; MAX_NODES], nodes: ctx.nodes, home: page.first().node };
        if self.proxy {
            let mut last = [u64::MAX; MAX_NODES];
            let mut resident = [0u32; MAX_NODES];
            page.refs().for_each(|r| {
                let n = r.node as usize;
                let evicted = last[n] != u64::MAX && r.at - last[n] >= self.gap;
                last[n] = r.at;
                resident[n] += 1;
                if evicted || resident[n] >= self.burst {
                    resident[n] = 0;
                    if let Some(home) = c.event(r.node, self.max, self.threshold) {
                        res.place(node_bit(home));
                    }
                }
                charge(&mut res, r);
            });
        } else {
            // Slices for a page in memory, so that the loop does not ask which kind of pass it is.
            match page.in_memory_with_events() {
                Some((refs, events)) => self.follow(refs.iter().copied(), events.iter().copied(), &mut res, &mut c),
                None => self.follow(page.refs(), page.events(), &mut res, &mut c),
            }
            // Events after the page's last access (the TLBs are not flushed at the end of the
            // trace) would only move a page nobody uses again: not acted on.
        }
        res.tally
    }
}

impl Sammu {
    /// Charges the references and acts on the TLB events between them. An event at an
    /// access's own position (its counter saturating) acts after the access; an event at
    /// another position comes from a later access to another page.
    fn follow(
        &self,
        refs: impl Iterator<Item = Ref>,
        events: impl Iterator<Item = Ref>,
        res: &mut Residence,
        c: &mut Counters,
    ) {
        let mut events = events.peekable();
        for r in refs {
            while let Some(e) = events.next_if(|e| e.at < r.at) {
                if let Some(home) = c.event(e.node, self.max, self.threshold) {
                    res.place(node_bit(home));
                }
            }
            charge(res, r);
            while let Some(e) = events.next_if(|e| e.at == r.at) {
                if let Some(home) = c.event(e.node, self.max, self.threshold) {
                    res.place(node_bit(home));
                }
            }
        }
    }
}

/// kMAF: faults (a node's first access to the page in each window) are counted per node;
/// the page goes to the node with the most once max > 2 x (second + 1).
#[derive(Debug)]
pub struct Kmaf {
    pub window_ms: f64,
}

impl Policy for Kmaf {
    /// A node faults once per window: a move needs 3 faults of one node against none of
    /// another's (3 > 2 x (0 + 1)), so three windows.
    fn clock(&self) -> Option<(&'static str, f64)> {
        Some(("third fault window, the first in which a page can move", 2.0 * self.window_ms))
    }

    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        if let Some(t) = private(page) {
            return t;
        }
        let mut res = first_touch(page);
        let window = ctx.refs(self.window_ms);
        let mut faults = [0u32; MAX_NODES];
        let mut seen = [u64::MAX; MAX_NODES];
        // The window of the current reference, recomputed only past its end (a division
        // per reference costs more than the rest of the loop).
        let (mut w, mut w_end) = (0u64, 0u64);
        page.refs().for_each(|r| {
            if r.at >= w_end {
                w = r.at / window;
                w_end = (w + 1).saturating_mul(window);
            }
            let n = r.node as usize;
            if seen[n] != w {
                seen[n] = w;
                if let Some(best) = kmaf::fault(&mut faults[..ctx.nodes], n)
                    && !res.holds(best as u16)
                {
                    res.place(node_bit(best as u16));
                }
            }
            charge(&mut res, r);
        });
        res.tally
    }
}

/// Carrefour's per-page rules, applied at each epoch boundary from the last epoch's accesses.
#[derive(Debug)]
pub struct Carrefour {
    pub epoch_ms: f64,
    pub share: f64,
    pub min_accesses: u32,
}

impl Policy for Carrefour {
    fn clock(&self) -> Option<(&'static str, f64)> {
        Some(("first epoch's end", self.epoch_ms))
    }

    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        // One node makes all of a private page's accesses: at most it is decided there.
        if self.share <= 1.0
            && let Some(t) = private(page)
        {
            return t;
        }
        let mut res = first_touch(page);
        let epoch = ctx.refs(self.epoch_ms);
        let mut counts = [0u32; MAX_NODES];
        let (mut total, mut writes) = (0u32, 0u32);
        let mut current = page.first().at / epoch;
        let mut end = (current + 1).saturating_mul(epoch);
        page.refs().for_each(|r| {
            if r.at >= end {
                // A later epoch (a division only when one ends).
                current = r.at / epoch;
                end = (current + 1).saturating_mul(epoch);
                self.decide(&mut res, page, ctx, &counts, total, writes);
                counts[..ctx.nodes].iter_mut().for_each(|c| *c = 0);
                (total, writes) = (0, 0);
            }
            counts[r.node as usize] += 1;
            total += 1;
            writes += r.write as u32;
            charge(&mut res, r);
        });
        res.tally
    }
}

impl Carrefour {
    fn decide(
        &self,
        res: &mut Residence,
        page: &Page,
        ctx: &Context,
        counts: &[u32; MAX_NODES],
        total: u32,
        writes: u32,
    ) {
        debug_assert_eq!(counts[..ctx.nodes].iter().sum::<u32>(), total);
        match carrefour::decide(&counts[..ctx.nodes], writes > 0, page.number, self.share, self.min_accesses as u64) {
            Some(Decision::Migrate(n)) | Some(Decision::Interleave(n)) => res.place(node_bit(n as u16)),
            Some(Decision::Replicate(set)) => res.place(set),
            None => {}
        }
    }
}
