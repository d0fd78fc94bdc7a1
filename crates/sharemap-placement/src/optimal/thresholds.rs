//! Read-count thresholds, found once per machine, so the walk back decides a stretch of
//! reads with one integer comparison.

use super::*;

/// Whether a stretch of `c` reads by the writer leaves the page where it is, at a node other
/// than the writer's or in global memory: staying costs no more than a copy at the writer
/// or (from a node) a copy in global memory. A copy to both never pays: R <= 2G.
pub(super) fn stays(cost: &Costs, in_global: bool, c: f64) -> bool {
    if c == 0.0 {
        return true;
    }
    if in_global {
        cost.g * c <= cost.big_g + c
    } else {
        let stay = cost.r * c;
        stay <= cost.big_r + c && (!cost.has_global() || stay <= cost.big_g + cost.g * c)
    }
}

/// The most reads for which `stays` holds (it holds for every count up to some bound: each
/// side of each comparison grows linearly, staying the fastest).
pub(super) fn most_reads_kept(cost: &Costs, in_global: bool) -> u32 {
    last_holding(|c| stays(cost, in_global, c))
}

/// Whether node's `c` reads in a run pay for a copy of their own (`with_global`: global
/// memory holds one during the run), as the dynamic program prices them.
pub(super) fn copy_pays(cost: &Costs, with_global: bool, c: f64) -> bool {
    if with_global { cost.big_g + c < cost.g * c } else { cost.big_r + c < cost.r * c }
}

/// The fewest reads for which `copy_pays` holds (it holds from some count on: the copy's
/// side grows slowest; never for none, R and G being positive); u32::MAX if none does.
pub(super) fn fewest_reads_copied(cost: &Costs, with_global: bool) -> u32 {
    last_holding(|c| !copy_pays(cost, with_global, c)).saturating_add(1)
}

/// The largest count for which `holds` does, given that it holds at 0 and, once false,
/// stays false; u32::MAX if it holds there. By bisection, on the very float comparison.
pub(super) fn last_holding(holds: impl Fn(f64) -> bool) -> u32 {
    let (mut lo, mut hi) = (0u32, u32::MAX);
    if holds(hi as f64) {
        return hi;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if holds(mid as f64) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// What `c` reads by the writer cost while the page stays at a node other than the writer
/// (`in_global` false: stay remote, copy to the writer, or copy to global memory) or in
/// global memory (stay, or copy to the writer). A copy to both is never cheaper: R <= 2G.
pub(super) fn stretch_cost(cost: &Costs, c: f64, in_global: bool) -> f64 {
    if in_global {
        min2(cost.g * c, cost.big_g + c)
    } else {
        let best = min2(cost.r * c, cost.big_r + c);
        if cost.has_global() { min2(best, cost.big_g + cost.g * c) } else { best }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn costs(r: f64, big_r: f64, global: Option<(f64, f64)>) -> Costs {
        let (g, big_g) = global.unwrap_or((INF, INF));
        Costs { r, big_r, g, big_g }
    }

    proptest! {
        /// The read-count thresholds found once per machine sit exactly where the cost
        /// comparisons they stand for change their answer.
        #[test]
        fn read_thresholds_match_the_comparisons(
            r in 1.01f64..20.0,
            big_r_over in 0.0f64..5000.0,
            global in prop::option::of((1.01f64..3.0, 0.0f64..3000.0)),
        ) {
            let big_r = 2.0 * r + 1e-9 + big_r_over;
            let global = global.map(|(g, extra)| {
                let g = g.min(r);
                let big_g = (2.0 * g + extra).max(big_r / 2.0).min(big_r);
                (g, big_g)
            });
            let c = costs(r, big_r, global);
            for in_global in [false, true] {
                if in_global && global.is_none() {
                    continue;
                }
                let keep = most_reads_kept(&c, in_global);
                prop_assert!(stays(&c, in_global, keep as f64));
                prop_assert!(keep == u32::MAX || !stays(&c, in_global, keep as f64 + 1.0));
                let copy = fewest_reads_copied(&c, in_global);
                prop_assert!(copy > 0 && !copy_pays(&c, in_global, copy as f64 - 1.0));
                prop_assert!(copy == u32::MAX || copy_pays(&c, in_global, copy as f64));
            }
        }
    }
}
