//! Per-page references of a generated pattern, in memory (benchmarks and examples).

use crate::page::Ref;
use std::collections::BTreeMap;

/// Groups accesses by page: thread t runs on node t mod `nodes`.
pub fn pages_of(
    accesses: &[sharemap_trace::Access],
    page_size: u64,
    nodes: usize,
) -> Vec<(u64, Vec<Ref>)> {
    let mut by_page: BTreeMap<u64, Vec<Ref>> = BTreeMap::new();
    for (i, a) in accesses.iter().enumerate() {
        let node = (a.thread as usize % nodes) as u16;
        let r = Ref {
            at: i as u64,
            node,
            write: a.kind == sharemap_trace::Kind::Write,
            sampled: false,
        };
        by_page.entry(a.addr / page_size).or_default().push(r);
    }
    by_page.into_iter().collect()
}
