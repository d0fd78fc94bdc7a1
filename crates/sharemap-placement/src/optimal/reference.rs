//! References the solver is checked against, shared by the tests and the benchmarks: a
//! placement replayed reference by reference, and the recurrence computed plainly.

use crate::cost::{Costs, LocSet, Residence, Tally};
use crate::page::Ref;

/// Charges a placement given as changes (reference index, set from there on; the first is
/// the free initial placement) against a page's references, on any machine's costs.
pub fn replay(refs: &[Ref], changes: &[(usize, LocSet)], _costs: &Costs) -> Tally {
    let Some(&(_, initial)) = changes.first() else {
        return Tally::default();
    };
    let mut res = Residence::new(initial);
    let mut next = 1;
    for (i, r) in refs.iter().enumerate() {
        while next < changes.len() && changes[next].0 == i {
            res.place(changes[next].1);
            next += 1;
        }
        if r.write {
            res.write(r.node);
        } else {
            res.read(r.node);
        }
    }
    res.tally
}

/// The optimum's cost by the recurrence of docs/placement/optimal.md computed plainly: every
/// node's value at every write, no lazy values, no merged writes, no shortcut. The tests check
/// it against exhaustive search on few nodes, and the solver against it on many.
pub fn plain_recurrence(refs: &[Ref], nodes: usize, c: &Costs) -> f64 {
    let Some(first) = refs.iter().position(|r| r.write) else { return refs.len() as f64 };
    let global = c.has_global();
    let w = |x: u16, b: usize| if b == x as usize { 1.0 } else { c.r };
    let mut v: Vec<f64> = (0..nodes).map(|b| first as f64 + w(refs[first].node, b)).collect();
    let mut glob = first as f64 + c.g;
    let mut counts = vec![0f64; nodes];
    let terms = |counts: &[f64]| {
        let f: Vec<f64> = counts.iter().map(|&n| (c.big_r + n).min(c.r * n)).collect();
        let fg: Vec<f64> = counts.iter().map(|&n| if global { (c.big_g + n).min(c.g * n) } else { 0.0 }).collect();
        let d: Vec<f64> = counts.iter().zip(&f).map(|(n, f)| n - f).collect();
        let dg: Vec<f64> = counts.iter().zip(&fg).map(|(n, f)| n - f).collect();
        (f.iter().sum::<f64>(), fg.iter().sum::<f64>(), d, dg)
    };
    for r in &refs[first + 1..] {
        if !r.write {
            counts[r.node as usize] += 1.0;
            continue;
        }
        let (f, fg, d, dg) = terms(&counts);
        let min_u = (0..nodes).map(|a| v[a] + d[a]).fold(f64::INFINITY, f64::min);
        let ug = |a: usize| v[a] + dg[a];
        let min_ug = (0..nodes).map(ug).fold(f64::INFINITY, f64::min);
        let mut next = vec![0.0; nodes];
        for b in 0..nodes {
            let mut best = (f + v[b] + d[b]).min(f + min_u + c.big_r + d[b]);
            if global {
                let other = (0..nodes).filter(|&a| a != b).map(ug).fold(f64::INFINITY, f64::min);
                best = best
                    .min(glob + fg + c.big_g + dg[b])
                    .min(c.big_g + fg + dg[b] + v[b])
                    .min(2.0 * c.big_g + fg + dg[b] + other);
            }
            next[b] = best + w(r.node, b);
        }
        if global {
            glob = (glob + fg).min(min_ug + c.big_g + fg).min(min_u + f + c.big_g) + c.g;
        }
        v = next;
        counts.iter_mut().for_each(|n| *n = 0.0);
    }
    let (f, fg, d, dg) = terms(&counts);
    let mut best = if global { glob + fg } else { f64::INFINITY };
    for a in 0..nodes {
        best = best.min(v[a] + f + d[a]);
        if global {
            best = best.min(v[a] + c.big_g + fg + dg[a]);
        }
    }
    best
}
