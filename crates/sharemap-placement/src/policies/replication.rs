//! Seed 003's replication policies (Marchetti et al. section 4.2). A page has a home (first
//! touch); a node maps it at an access and keeps the mapping while its TLB holds the entry:
//! a mapping ends when the entry is evicted (a per-thread TLB of `tlb` entries, seed 003's
//! 128, in the partition pass: its evictions are the page's events) or when another node
//! writes the page. Copies are read-only: a write drops them, the page staying at its home.
//! The counters count cache fills: the references that miss a per-thread cache of
//! `fills_kb` (seed 003's 16 KB per processor), found in the same pass; with 0 every
//! reference counts. The time policy's lifetime runs on references.

use super::{Context, Policy, charge, first_touch, private};
use crate::cost::{MAX_NODES, Tally, node_bit};
use crate::page::Page;

#[derive(Debug)]
pub enum Rule {
    /// A mapping that lasted this many ms earns a copy at the next mapping.
    Time(f64),
    /// A mapping with this many references earns a copy at the next mapping.
    Counter(u32),
    /// This many references since mapping earn a copy at once.
    Interrupt(u32),
}

#[derive(Debug)]
pub struct Replicate {
    pub rule: Rule,
    /// The per-thread cache whose misses the counters count (KiB; 0: every reference).
    pub fills_kb: u64,
    /// Entries of the per-thread TLB that holds mappings (0: a mapping ends only at a write
    /// by another node).
    pub tlb: u32,
}

impl Policy for Replicate {
    fn prepass(&self, line: u64) -> super::Prepass {
        let mappings = (self.tlb > 0).then_some(self.tlb);
        super::Prepass { mappings, ..super::fills_prepass(self.fills_kb, line) }
    }

    fn clock(&self) -> Option<(&'static str, f64)> {
        match self.rule {
            Rule::Time(ms) => Some(("mapping lifetime that earns a copy", ms)),
            _ => None,
        }
    }

    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        if let Some(t) = private(page) {
            return t;
        }
        let mut res = first_touch(page);
        let home = page.first().node;
        let lifetime = if let Rule::Time(ms) = self.rule { ctx.refs(ms) } else { 0 };
        // Nodes currently mapping the page, as a bit set (writes visit only those).
        let mut mapped: u128 = 0;
        let mut since = [0u64; MAX_NODES];
        let mut fills = [0u32; MAX_NODES];
        let mut earned = [false; MAX_NODES];
        // What a mapping that ends at `at` earned.
        let judge = |n: usize, at: u64, since: &[u64], fills: &[u32]| match self.rule {
            Rule::Time(_) => at - since[n] >= lifetime,
            Rule::Counter(k) => fills[n] >= k,
            Rule::Interrupt(_) => false,
        };
        // The page's TLB evictions: a node's mapping ends there.
        let mut evictions = page.events().peekable();
        page.refs().for_each(|r| {
            while let Some(e) = evictions.next_if(|e| e.at < r.at) {
                let n = e.node as usize;
                if self.tlb > 0 && mapped & node_bit(e.node) != 0 {
                    mapped &= !node_bit(e.node);
                    earned[n] = judge(n, e.at, &since, &fills);
                }
            }
            let x = r.node as usize;
            if mapped & node_bit(r.node) == 0 {
                mapped |= node_bit(r.node);
                since[x] = r.at;
                fills[x] = 0;
                if earned[x] && !r.write && !res.holds(r.node) {
                    res.replicate(node_bit(r.node));
                }
                earned[x] = false;
            }
            let fill = self.fills_kb == 0 || r.sampled;
            fills[x] += fill as u32;
            if let Rule::Interrupt(n) = self.rule {
                // Once per mapping: the n-th fill since the node mapped the page.
                if fill && fills[x] == n && !r.write && !res.holds(r.node) {
                    res.replicate(node_bit(r.node));
                }
            }
            if r.write {
                // Invalidate every other node's mapping, judging what it earned.
                let mut others = mapped & !node_bit(r.node);
                mapped &= node_bit(r.node);
                while others != 0 {
                    let n = others.trailing_zeros() as usize;
                    others &= others - 1;
                    earned[n] = judge(n, r.at, &since, &fills);
                }
                // Copies go; the home keeps the page (the write itself then may be remote).
                if res.copies() > 1 && res.holds(home) {
                    res.place(node_bit(home));
                }
            }
            charge(&mut res, r);
        });
        res.tally
    }
}
