//! Per-page references of a generated pattern, in memory (benchmarks and examples).

use crate::page::Ref;
use std::collections::BTreeMap;

/// Groups accesses by page: thread t runs on node t mod `nodes`.
pub fn pages_of(accesses: &[sharemap_trace::Access], page_size: u64, nodes: usize) -> Vec<(u64, Vec<Ref>)> {
    let mut by_page: BTreeMap<u64, Vec<Ref>> = BTreeMap::new();
    for (i, a) in accesses.iter().enumerate() {
        let node = (a.thread as usize % nodes) as u16;
        let r = Ref { at: i as u64, node, write: a.kind == sharemap_trace::Kind::Write, sampled: false };
        by_page.entry(a.addr / page_size).or_default().push(r);
    }
    by_page.into_iter().collect()
}

/// A policy context without annotations (benchmarks and examples): pages of 4 KiB, 1000
/// references per millisecond, seed 1.
pub fn plain_context(nodes: usize, costs: crate::cost::Costs, pages: usize) -> crate::policies::Context<'static> {
    crate::policies::Context {
        nodes,
        costs,
        page_size: 4096,
        pages: pages as u64,
        init_done: None,
        phase_changes: &[],
        annotations: &[],
        refs_per_ms: 1000.0,
        seed: 1,
    }
}

/// The `i`-th page of `pages_of`'s list as policies see it (both ranks `i`, no TLB events).
pub fn page(i: usize, (number, refs): &(u64, Vec<Ref>)) -> crate::page::Page<'_> {
    crate::page::Page::new(*number, i as u32, i as u32, refs, &[])
}
