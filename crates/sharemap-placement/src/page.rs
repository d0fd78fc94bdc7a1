//! One page's references, as every placement analysis sees them.

/// A reference to a page: when (the access's index in the trace), from which NUMA node,
/// read or write, and whether a profile source sampled it (see `marathe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ref {
    pub at: u64,
    pub node: u16,
    pub write: bool,
    pub sampled: bool,
}

impl Ref {
    pub fn read(at: u64, node: u16) -> Self {
        Ref { at, node, write: false, sampled: false }
    }

    pub fn write(at: u64, node: u16) -> Self {
        Ref { at, node, write: true, sampled: false }
    }
}

/// A page and its references in trace order.
#[derive(Clone, Copy, Debug)]
pub struct Page<'a> {
    /// Page number (address / page size).
    pub number: u64,
    /// Rank of the page by its first touch in the trace (0 = touched first).
    pub touch_rank: u32,
    /// Rank of the page by address among the trace's pages (0 = lowest).
    pub address_rank: u32,
    pub refs: &'a [Ref],
    /// TLB events of the page in trace order, when a TLB model ran (see `TlbModel`): at the
    /// position of the access that caused them, from the node of the core whose TLB entry
    /// was evicted or saturated. Not accesses: nothing is charged for them.
    pub events: &'a [Ref],
}
