//! Placement by rule: first touch and its variants, and static spreading.

use super::{Context, Policy, PolicyError, charge, first_touch, private};
use crate::cost::{Residence, Tally, node_bit};
use crate::page::Page;
use sharemap_core::mix;

#[derive(Debug)]
pub struct FirstTouch {
    /// Honour init-done (seed 003); Linux itself knows nothing of the annotation.
    pub after_init: bool,
}

impl Policy for FirstTouch {
    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        let mut res = first_touch(page);
        // After init-done the first toucher becomes the home (seed 003's annotation).
        let Some(t) = ctx.init_done.filter(|&t| self.after_init && t > page.first().at) else {
            res.stay(page.refs());
            return res.tally;
        };
        let mut refs = page.refs().peekable();
        res.stay(std::iter::from_fn(|| refs.next_if(|r| r.at < t)));
        if let Some(first) = refs.peek() {
            res.place(node_bit(first.node));
            res.stay(refs);
        }
        res.tally
    }
}

#[derive(Debug)]
pub struct FirstNFills {
    pub n: u32,
    /// The per-thread cache whose misses count (KiB; 0: every reference counts).
    pub fills_kb: u64,
}

impl Policy for FirstNFills {
    fn prepass(&self, line: u64) -> super::Prepass {
        super::fills_prepass(self.fills_kb, line)
    }

    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        if let Some(t) = private(page) {
            return t;
        }
        let mut res = first_touch(page);
        let mut counts = [0u32; crate::cost::MAX_NODES];
        let start = ctx.init_done.unwrap_or(0);
        let mut refs = page.refs();
        while let Some(r) = refs.next() {
            if r.at >= start && (self.fills_kb == 0 || r.sampled) {
                let c = &mut counts[r.node as usize];
                *c += 1;
                if *c >= self.n {
                    // Decided: the page stays there.
                    res.place(node_bit(r.node));
                    res.stay(std::iter::once(r).chain(refs));
                    return res.tally;
                }
            }
            charge(&mut res, r);
        }
        res.tally
    }
}

/// Where a static policy puts a page.
#[derive(Debug)]
pub enum Spread {
    ByTouch,
    ByNumber,
    Random,
    Bind(u16),
}

#[derive(Debug)]
pub struct Static(pub Spread);

impl Policy for Static {
    fn check(&self, nodes: usize) -> Result<(), PolicyError> {
        match self.0 {
            Spread::Bind(node) if node as usize >= nodes => Err(PolicyError::Machine {
                policy: "bind",
                key: "node",
                value: node.to_string(),
                why: format!("the machine has {nodes} NUMA nodes (0..{})", nodes - 1),
            }),
            _ => Ok(()),
        }
    }

    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        let n = ctx.nodes as u64;
        let node = match self.0 {
            Spread::ByTouch => page.touch_rank as u64 % n,
            Spread::ByNumber => page.number % n,
            Spread::Random => mix(page.number ^ mix(ctx.seed)) % n,
            Spread::Bind(node) => (node as u64).min(n - 1),
        } as u16;
        let mut res = Residence::new(node_bit(node));
        res.stay(page.refs());
        res.tally
    }
}

/// First touch, re-decided by the next toucher after marks: every annotation (next-touch),
/// or phase changes only, on top of init-done (migrate-on-phase, seed 003).
#[derive(Debug)]
pub struct NextTouch {
    pub phases_only: bool,
}

impl Policy for NextTouch {
    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        if let Some(t) = private(page) {
            return t;
        }
        let mut res = first_touch(page);
        let init = ctx.init_done.as_slice();
        let marks = if self.phases_only { ctx.phase_changes } else { ctx.annotations };
        let init_marks = if self.phases_only { init } else { &[] };
        // Between marks the page stays put; the first reference at or after a mark (one
        // reached after the first reference) re-decides it.
        let mut refs = page.refs().peekable();
        let next = |after: u64| {
            let next_of = |m: &[u64]| m.get(m.partition_point(|&t| t <= after)).copied();
            match (next_of(marks), next_of(init_marks)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        };
        while let Some(from) = refs.peek().map(|r| r.at)
            && let Some(mark) = next(from)
        {
            res.stay(std::iter::from_fn(|| refs.next_if(|r| r.at < mark)));
            let Some(r) = refs.peek() else { return res.tally };
            res.place(node_bit(r.node));
        }
        res.stay(refs);
        res.tally
    }
}
