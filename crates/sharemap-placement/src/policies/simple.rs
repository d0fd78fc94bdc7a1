//! Placement by rule: first touch and its variants, and static spreading.

use super::{Context, Marks, Policy, charge, first_touch};
use crate::cost::{Residence, Tally, node_bit};
use crate::page::Page;

pub struct FirstTouch;

impl Policy for FirstTouch {
    fn run(&self, page: &Page, ctx: &Context) -> Tally {
        let mut res = first_touch(page);
        // After init-done the first toucher becomes the home (seed 003's annotation).
        let mut rehome = ctx.init_done.filter(|&t| t > page.refs[0].at);
        for r in page.refs {
            if let Some(t) = rehome
                && r.at >= t
            {
                res.place(node_bit(r.node));
                rehome = None;
            }
            charge(&mut res, r);
        }
        res.tally
    }
}

pub struct FirstNFills {
    pub n: u32,
}

impl Policy for FirstNFills {
    fn run(&self, page: &Page, ctx: &Context) -> Tally {
        let mut res = first_touch(page);
        let mut counts = [0u32; crate::cost::MAX_NODES];
        let mut decided = false;
        let start = ctx.init_done.unwrap_or(0);
        for r in page.refs {
            if !decided && r.at >= start {
                let c = &mut counts[r.node as usize];
                *c += 1;
                if *c >= self.n {
                    res.place(node_bit(r.node));
                    decided = true;
                }
            }
            charge(&mut res, r);
        }
        res.tally
    }
}

/// Where a static policy puts a page.
pub enum Spread {
    ByTouch,
    ByNumber,
    Random,
    Bind(u16),
}

pub struct Static(pub Spread);

/// A well-mixed hash (splitmix64's finaliser).
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^ (x >> 31)
}

impl Policy for Static {
    fn run(&self, page: &Page, ctx: &Context) -> Tally {
        let n = ctx.nodes as u64;
        let node = match self.0 {
            Spread::ByTouch => page.touch_rank as u64 % n,
            Spread::ByNumber => page.number % n,
            Spread::Random => mix(page.number ^ mix(ctx.seed)) % n,
            Spread::Bind(node) => (node as u64).min(n - 1),
        } as u16;
        let mut res = Residence::new(node_bit(node));
        for r in page.refs {
            charge(&mut res, r);
        }
        res.tally
    }
}

/// First touch, re-decided by the next toucher after marks: every annotation (next-touch),
/// or phase changes only, on top of init-done (migrate-on-phase, seed 003).
pub struct NextTouch {
    pub phases_only: bool,
}

impl Policy for NextTouch {
    fn run(&self, page: &Page, ctx: &Context) -> Tally {
        let mut res = first_touch(page);
        let init = ctx.init_done.as_slice();
        let mut marks = Marks::new(if self.phases_only { ctx.phase_changes } else { ctx.annotations });
        let mut init_marks = Marks::new(if self.phases_only { init } else { &[] });
        marks.passed(page.refs[0].at);
        init_marks.passed(page.refs[0].at);
        for r in page.refs {
            if marks.passed(r.at) | init_marks.passed(r.at) {
                res.place(node_bit(r.node));
            }
            charge(&mut res, r);
        }
        res.tally
    }
}
