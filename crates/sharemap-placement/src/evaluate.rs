//! Runs the optimum and any set of policies over every page of a partitioned trace, in
//! parallel by page bucket, and totals what each one did.

use crate::cost::{Costs, LocSet, Tally};
use crate::optimal::{Optimal, Solution};
use crate::partition::Partition;
use crate::policies::{Context, Policy};
use rayon::prelude::*;
use serde::Serialize;

/// One policy's totals over the trace.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyResult {
    pub name: String,
    pub cost: f64,
    /// Mean cost per reference (seed 004's MCPR).
    pub mcpr: f64,
    pub local: u64,
    pub remote: u64,
    pub global: u64,
    /// New locations that migrated a page.
    pub moves: u64,
    /// New locations that added a copy.
    pub replications: u64,
    pub local_ratio: f64,
    /// Cost relative to the optimum (1 = optimal).
    pub vs_optimal: f64,
    #[serde(skip_serializing_if = "is_zero")]
    pub profile_samples: u64,
    #[serde(skip)]
    pub tally: Tally,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A page among the costliest under the optimum, with every policy's cost on it.
#[derive(Clone, Debug, Serialize)]
pub struct PageCost {
    pub address: String,
    pub references: u64,
    pub writes: u64,
    pub nodes: u32,
    pub optimal: f64,
    /// Costs in the order of the evaluated policies.
    pub policies: Vec<f64>,
}

#[derive(Clone, Debug, Default)]
pub struct EvalOptions {
    /// Keep this many costliest pages (0: none).
    pub costliest: usize,
    /// Keep the optimal placement of every page.
    pub placement: bool,
    /// Run the policies only (the results then do not start with the optimum).
    pub skip_optimal: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Evaluation {
    /// The optimum first (unless skipped), then the policies in the order given.
    pub results: Vec<PolicyResult>,
    pub costliest: Vec<PageCost>,
    /// (page number, trace position, location set from there on), sorted.
    pub placement: Vec<(u64, u64, LocSet)>,
}

struct Worker {
    optimal: Optimal,
    opt_cost: f64,
    opt: Tally,
    costs: Vec<f64>,
    tallies: Vec<Tally>,
    costliest: Vec<PageCost>,
    placement: Vec<(u64, u64, LocSet)>,
    /// An I/O error of the optimum's temporary files.
    error: Option<std::io::Error>,
}

pub fn evaluate<P: std::ops::Deref<Target = dyn Policy> + Sync>(
    part: &Partition,
    ctx: &Context,
    policies: &[(String, P)],
    page_size: u64,
    opts: &EvalOptions,
) -> std::io::Result<Evaluation> {
    let c: Costs = ctx.costs;
    let init = || Worker {
        optimal: Optimal::new(ctx.nodes, c).with_memory(part.page_memory() / 2),
        opt_cost: 0.0,
        opt: Tally::default(),
        costs: vec![0.0; policies.len()],
        tallies: vec![Tally::default(); policies.len()],
        costliest: Vec::new(),
        placement: Vec::new(),
        error: None,
    };
    // The optimum alone needs nothing of a page one node references but how many references
    // it has: all local (`Optimal::solve` says the same), so those pages are not read.
    let optimum_only = policies.is_empty() && opts.costliest == 0 && !opts.placement && !opts.skip_optimal;
    let private = |w: &mut Worker, refs: u64| {
        w.opt_cost += refs as f64;
        w.opt.local += refs;
    };
    let page = |w: &mut Worker, page: &crate::page::Page| {
        let optimal = &mut w.optimal;
        let mut solve =
            || if opts.skip_optimal { Solution::default() } else { optimal.solve_page(page, opts.placement) };
        let (sol, streamed) = if page.in_memory().is_some() {
            (solve(), Vec::new())
        } else {
            // A page read window by window takes a pass per policy: the passes run on every
            // core at once (the other workers may be done with their smaller pages).
            rayon::join(solve, || policies.par_iter().map(|(_, p)| p.place_page(page, ctx)).collect())
        };
        if let Some(e) = w.optimal.take_error() {
            w.error.get_or_insert(e);
        }
        w.opt_cost += sol.cost;
        w.opt.add(&sol.tally);
        let mut page_costs = Vec::with_capacity(if opts.costliest > 0 { policies.len() } else { 0 });
        for (i, (_, p)) in policies.iter().enumerate() {
            let t = streamed.get(i).copied().unwrap_or_else(|| p.place_page(page, ctx));
            let cost = t.cost(&c);
            w.costs[i] += cost;
            w.tallies[i].add(&t);
            if opts.costliest > 0 {
                page_costs.push(cost);
            }
        }
        if opts.placement {
            // Changes name references by index; one pass finds their positions.
            let mut changes = sol.changes.iter().peekable();
            for (i, r) in page.refs().enumerate() {
                while let Some(&(_, set)) = changes.next_if(|c| c.0 == i) {
                    w.placement.push((page.number, r.at, set));
                }
            }
        }
        if opts.costliest > 0 {
            let worst = w.costliest.iter().map(|p| p.optimal).fold(f64::INFINITY, f64::min);
            if w.costliest.len() < opts.costliest || sol.cost > worst {
                let (nodes, writes) =
                    page.refs().fold((0u128, 0u64), |(s, w), r| (s | (1u128 << r.node), w + r.write as u64));
                w.costliest.push(PageCost {
                    address: format!("{:#x}", page.number * page_size),
                    references: page.len(),
                    writes,
                    nodes: nodes.count_ones(),
                    optimal: sol.cost,
                    policies: page_costs,
                });
                keep_costliest(&mut w.costliest, opts.costliest);
            }
        }
    };
    let workers =
        if optimum_only { part.par_pages_or_private(init, private, page)? } else { part.par_pages(init, page)? };

    let mut opt_cost = 0.0;
    let mut opt = Tally::default();
    let mut costs = vec![0.0; policies.len()];
    let mut tallies = vec![Tally::default(); policies.len()];
    let mut costliest = Vec::new();
    let mut placement = Vec::new();
    for w in workers {
        if let Some(e) = w.error {
            return Err(e);
        }
        opt_cost += w.opt_cost;
        opt.add(&w.opt);
        for i in 0..policies.len() {
            costs[i] += w.costs[i];
            tallies[i].add(&w.tallies[i]);
        }
        costliest.extend(w.costliest);
        placement.extend(w.placement);
    }
    keep_costliest(&mut costliest, opts.costliest);
    placement.sort_unstable_by_key(|&(page, at, _)| (page, at));
    let refs = part.refs.max(1) as f64;
    let result = |name: &str, cost: f64, t: Tally| PolicyResult {
        name: name.to_string(),
        cost,
        mcpr: cost / refs,
        local: t.local,
        remote: t.remote,
        global: t.global,
        moves: t.migrations(),
        replications: t.replications,
        local_ratio: t.local as f64 / refs,
        vs_optimal: if opt_cost > 0.0 { cost / opt_cost } else { 1.0 },
        profile_samples: t.profile_samples,
        tally: t,
    };
    let mut results = if opts.skip_optimal { Vec::new() } else { vec![result("optimal", opt_cost, opt)] };
    for (i, (name, _)) in policies.iter().enumerate() {
        results.push(result(name, costs[i], tallies[i]));
    }
    Ok(Evaluation { results, costliest, placement })
}

fn keep_costliest(v: &mut Vec<PageCost>, n: usize) {
    v.sort_by(|a, b| b.optimal.total_cmp(&a.optimal).then_with(|| a.address.cmp(&b.address)));
    v.truncate(n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::PartitionOptions;
    use sharemap_core::PageSize;
    use sharemap_machine::ThreadPlacement;
    use sharemap_trace::{Access, MemoryTrace};

    /// The optimum alone skips reading private pages; asking for the costliest pages too
    /// reads every page. Both give the same optimum, in memory and spilled.
    #[test]
    fn the_optimum_of_private_pages_needs_no_reading() {
        let mut x = 11u64;
        let accesses: Vec<Access> = (0..60_000u64)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let t = (x >> 61) as u32;
                // Each thread's own pages, and a few pages every thread shares.
                let page = if x >> 58 & 7 == 0 { 100 + (x >> 40) % 4 } else { t as u64 * 10 + (x >> 40) % 10 };
                let addr = page * 4096 + (x >> 20) % 4096;
                if i % 3 == 0 { Access::write(t, addr, 8) } else { Access::read(t, addr, 8) }
            })
            .collect();
        let machine = sharemap_machine::Machine::from_spec("numa:4 pu:2").unwrap();
        for budget in [1 << 30, 4096] {
            let opts = PartitionOptions {
                page_size: PageSize::DEFAULT,
                placement: ThreadPlacement::identity(&machine),
                memory_budget: budget,
                prepass: Default::default(),
            };
            let mut trace = MemoryTrace::from_accesses(accesses.clone()).with_chunk_accesses(1000);
            let part = Partition::build(&mut trace, &opts, &|_| {}).unwrap();
            let costs = Costs::new(&sharemap_machine::CostParams::butterfly(4096));
            let ctx = crate::testing::plain_context(4, costs, part.pages());
            let none: &[(String, Box<dyn Policy>)] = &[];
            let fast = evaluate(&part, &ctx, none, 4096, &EvalOptions::default()).unwrap();
            let full = evaluate(&part, &ctx, none, 4096, &EvalOptions { costliest: 1, ..Default::default() }).unwrap();
            assert_eq!(fast.results[0].tally, full.results[0].tally, "budget {budget}");
            assert_eq!(fast.results[0].cost, full.results[0].cost);
            assert!(full.results[0].tally.remote + full.results[0].tally.node_moves > 0, "some pages are shared");
        }
    }

    /// A trace with one hot page (most of the references, from every node, reads and
    /// writes) evaluated with pages read whole and window by window, with the chains in
    /// memory and spilled, with and without a prepass: every policy, the optimum, its
    /// placement and the costliest pages come out the same.
    #[test]
    fn hot_pages_read_window_by_window_give_the_same_evaluation() {
        let mut x = 5u64;
        let mut accesses: Vec<Access> = (0..20_000u64)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let t = (x >> 61) as u32;
                let page = match x >> 56 & 15 {
                    0..=10 => 7,
                    11 => 100 + (x >> 40) % 8,
                    _ => t as u64 * 10 + (x >> 40) % 10,
                };
                let addr = page * 4096 + (x >> 20) % 4096;
                if i % 5 == 0 { Access::write(t, addr, 8) } else { Access::read(t, addr, 8) }
            })
            .collect();
        accesses.extend((0..2_000u64).map(|i| Access::write((i % 8) as u32, 7 * 4096, 8)));
        let machine = sharemap_machine::Machine::from_spec("numa:4 pu:2").unwrap();
        let costs = Costs::new(&sharemap_machine::CostParams::butterfly(4096));
        // The fill counters' cache, the replication policies' TLB and Marathe's profile
        // would need passes of their own: one here.
        let mut settings = crate::policies::Settings::default();
        for p in ["first-n-fills", "replicate-counter", "replicate-counter-interrupt"] {
            settings.add(&format!("{p}.fills-kb=0")).unwrap();
        }
        for p in ["replicate-time", "replicate-counter", "replicate-counter-interrupt"] {
            settings.add(&format!("{p}.tlb=0")).unwrap();
        }
        let all: Vec<(String, Box<dyn Policy>)> = crate::policies::POLICIES
            .iter()
            .map(|p| (p.name.to_string(), crate::policies::build(p, &settings, &[]).unwrap()))
            .collect();
        let plain: Vec<(String, Box<dyn Policy>)> = ["first-touch", "next-touch", "carrefour", "ace"]
            .iter()
            .map(|&n| {
                (n.to_string(), crate::policies::build(crate::policies::find(n).unwrap(), &settings, &[]).unwrap())
            })
            .collect();
        for policies in [&all, &plain] {
            let mut seen = None;
            for (budget, page_memory) in
                [(1 << 30, 1 << 30), (1 << 30, 2048), (8192, 2048), (8192, 200), (1 << 30, 200)]
            {
                let opts = PartitionOptions {
                    page_size: PageSize::DEFAULT,
                    placement: ThreadPlacement::identity(&machine),
                    memory_budget: budget,
                    prepass: {
                        let groups = crate::policies::Prepass::groups(policies, 64);
                        assert_eq!(groups.len(), 1, "these policies share one pass");
                        groups[0].0
                    },
                };
                let mut trace = MemoryTrace::from_accesses(accesses.clone()).with_chunk_accesses(1000);
                let part = Partition::build(&mut trace, &opts, &|_| {}).unwrap().with_page_memory(page_memory);
                let ctx = crate::testing::plain_context(4, costs, part.pages());
                let eval_opts = EvalOptions { costliest: 3, placement: true, skip_optimal: false };
                let e = evaluate(&part, &ctx, policies, 4096, &eval_opts).unwrap();
                let got = format!("{e:?}");
                assert!(e.results.iter().all(|r| r.tally.references() == accesses.len() as u64));
                match &seen {
                    None => seen = Some(got),
                    Some(first) => assert_eq!(&got, first, "budget {budget}, page memory {page_memory}"),
                }
            }
        }
    }
}
