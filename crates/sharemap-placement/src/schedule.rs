//! Where a policy, or the optimum, puts each page over the run: per page, the location set
//! from each reference index on. The simulator replays it (`sharemap simulate --mechanism
//! place:policy=NAME`).

use crate::cost::{LocSet, record_placements};
use crate::optimal::Optimal;
use crate::partition::Partition;
use crate::policies::{Context, Policy};

/// Per page (page number), its placements: (index of the page's reference from which the set
/// holds, location set), the first one the initial placement. A page with none stays where it
/// is first touched.
pub type Schedule = Vec<(u64, Vec<(u64, LocSet)>)>;

/// The schedule of `policy` on every page of the partition, or of the off-line optimum when
/// `policy` is None. Sorted by page.
pub fn schedule(part: &Partition, ctx: &Context, policy: Option<&dyn Policy>) -> std::io::Result<Schedule> {
    let workers = part.par_pages(
        || (Optimal::new(ctx.nodes, ctx.costs).with_memory(part.page_memory() / 2), Vec::new()),
        |(optimal, out): &mut (Optimal, Schedule), page| {
            let changes: Vec<(u64, LocSet)> = match policy {
                Some(p) => record_placements(|| p.place_page(page, ctx)).1,
                None => optimal.solve_page(page, true).changes.into_iter().map(|(i, s)| (i as u64, s)).collect(),
            };
            if !changes.is_empty() {
                out.push((page.number, changes));
            }
        },
    )?;
    let mut all: Schedule = workers.into_iter().flat_map(|(_, s)| s).collect();
    all.sort_unstable_by_key(|p| p.0);
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::node_bit;
    use crate::policies::Settings;
    use crate::testing::plain_context;
    use sharemap_machine::CostParams;

    /// Replaying a policy's schedule reference by reference charges what the policy charged:
    /// the schedule says where the page was at every reference.
    #[test]
    fn a_replayed_schedule_costs_what_the_policy_costs() {
        use crate::Ref;
        // Page 0: node 0 first, then node 1 many times (next-touch and migrations move it).
        let refs: Vec<Ref> = (0..400u64).map(|i| if i < 3 { Ref::write(i, 0) } else { Ref::read(i, 1) }).collect();
        // 100 references per ms: the kernel's periods come within the page's 400 references.
        let mut ctx = plain_context(2, crate::Costs::new(&CostParams::for_numa(2.0, 4096, 64)), 1);
        ctx.refs_per_ms = 0.1;
        for name in ["first-touch", "round-robin", "next-touch", "numa-balancing", "carrefour"] {
            let p = crate::policies::build(crate::policies::find(name).unwrap(), &Settings::default(), &[]).unwrap();
            let page = crate::Page::new(0, 0, 0, &refs, &[]);
            let (tally, log) = record_placements(|| p.place_page(&page, &ctx));
            if log.is_empty() {
                continue; // answered without placing: stays where first touched
            }
            assert_eq!(log[0].0, 0, "{name}: the first entry is the initial placement");
            let (mut local, mut remote) = (0u64, 0u64);
            let mut set = log[0].1;
            let mut next = 1;
            for (i, r) in refs.iter().enumerate() {
                while next < log.len() && log[next].0 == i as u64 {
                    set = log[next].1;
                    next += 1;
                }
                if r.write && set.count_ones() > 1 {
                    set = if set & node_bit(r.node) != 0 { node_bit(r.node) } else { 1 << set.trailing_zeros() };
                }
                if set & node_bit(r.node) != 0 { local += 1 } else { remote += 1 }
            }
            assert_eq!((local, remote), (tally.local, tally.remote), "{name}");
        }
    }
}
