//! The online policies seed 004 (Bolosky & Scott, section 4.4.1) compares with the optimum.

use super::{Context, Policy, charge, first_touch, private};
use crate::cost::{GLOBAL_BIT, MAX_NODES, Residence, Tally, node_bit};
use crate::page::Page;

/// ACE: pages start in global memory (on machines without it, where first touched) and are
/// replicated to each reading node; a write by a node without the page's only copy leaves
/// one local copy at the writer (an invalidation). Past `limit` invalidations the page is
/// frozen in global memory for good (without global memory: where it is).
///
/// With `delay` > 0 this is the Delay policy: a node new to the page is mapped remotely
/// with a counter of `delay` references, and ACE's decision is taken when it runs out.
#[derive(Debug)]
pub struct Ace {
    pub limit: u32,
    pub delay: u32,
}

impl Policy for Ace {
    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        let global = ctx.costs.has_global();
        if !global && let Some(t) = private(page) {
            return t;
        }
        let mut res = if global { Residence::new(GLOBAL_BIT) } else { first_touch(page) };
        let mut invalidations = 0u32;
        let mut frozen = false;
        // Per node: references left before its decision (0 = not counting); `counting` has
        // a bit per node with a count running, so writes reset only those.
        let mut left = [0u32; MAX_NODES];
        let mut counting: u128 = 0;
        page.refs().for_each(|r| {
            if frozen {
                charge(&mut res, r);
                return;
            }
            let x = r.node as usize;
            let sole_local = res.holds(r.node) && res.copies() == 1;
            let needs_action = if r.write { !sole_local } else { !res.holds(r.node) };
            let mut act = needs_action;
            if needs_action && self.delay > 0 && !res.holds(r.node) {
                // Delay: count down first; decide on the reference that reaches zero.
                if left[x] == 0 {
                    left[x] = self.delay;
                    counting |= node_bit(r.node);
                }
                left[x] -= 1;
                act = left[x] == 0;
            }
            // Whether this reference takes the other nodes' mappings away (their TLB entries
            // are shot down, and with them Delay's counters).
            let before = res.set();
            if act {
                if r.write {
                    if invalidations >= self.limit {
                        frozen = true;
                        let keep = if global {
                            GLOBAL_BIT
                        } else if res.holds(r.node) {
                            node_bit(r.node)
                        } else {
                            res.set()
                        };
                        res.place(keep);
                    } else {
                        invalidations += 1;
                        res.place(node_bit(r.node));
                    }
                } else {
                    res.replicate(node_bit(r.node));
                }
                left[x] = 0;
            } else if r.write && res.copies() > 1 {
                // A write while counting down still needs a single copy: an invalidation.
                invalidations += 1;
            }
            let invalidated = r.write && (res.set() != before || res.copies() > 1);
            if invalidated {
                // The other nodes' copies and mappings are gone: their counts restart. A
                // write that invalidated nothing (the page's one copy stays) leaves them.
                let mut others = counting & !node_bit(r.node);
                counting &= node_bit(r.node);
                while others != 0 {
                    left[others.trailing_zeros() as usize] = 0;
                    others &= others - 1;
                }
            }
            charge(&mut res, r);
        });
        res.tally
    }
}

/// PLATINUM (Cox & Fowler): replicate on read, migrate on write, like ACE; a page that is
/// referenced by another node within t1 of an invalidation is frozen where it is (in global
/// memory if the machine has it); every t2 a daemon defrosts all frozen pages. Pages start
/// where ACE's and Delay's do, so that the three are compared from one starting rule: in
/// global memory when the machine has it (seed 004's ACE, whose traces were taken with all
/// writable memory there), else at the first touch.
#[derive(Debug)]
pub struct Platinum {
    pub t1_ms: f64,
    pub t2_ms: f64,
}

impl Policy for Platinum {
    fn clock(&self) -> Option<(&'static str, f64)> {
        Some(("defrost daemon", self.t2_ms))
    }

    fn place_page(&self, page: &Page, ctx: &Context) -> Tally {
        let global = ctx.costs.has_global();
        if !global && let Some(t) = private(page) {
            // No invalidation by another node, so nothing freezes.
            return t;
        }
        let (t1, t2) = (ctx.refs(self.t1_ms), ctx.refs(self.t2_ms));
        let mut res = if global { Residence::new(GLOBAL_BIT) } else { first_touch(page) };
        let mut frozen_in: Option<u64> = None; // defrost period in which it froze
        let mut last_invalidation: Option<(u64, u16)> = None;
        page.refs().for_each(|r| {
            if frozen_in.is_some_and(|p| r.at / t2 > p) {
                frozen_in = None;
                last_invalidation = None;
            }
            if frozen_in.is_none()
                && let Some((at, by)) = last_invalidation
                && by != r.node
                && r.at - at <= t1
            {
                frozen_in = Some(r.at / t2);
                if global {
                    res.place(GLOBAL_BIT);
                }
            }
            if frozen_in.is_none() {
                if r.write {
                    if !(res.holds(r.node) && res.copies() == 1) {
                        res.place(node_bit(r.node));
                        last_invalidation = Some((r.at, r.node));
                    }
                } else if !res.holds(r.node) {
                    res.replicate(node_bit(r.node));
                }
            }
            charge(&mut res, r);
        });
        res.tally
    }
}
