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
    /// TLB events of the page in trace order, when a TLB model ran (see `InOrder` in `partition`): at the
    /// position of the access that caused them, from the node of the core whose TLB entry
    /// was evicted or saturated. Not accesses: nothing is charged for them.
    pub events: &'a [Ref],
    /// The node of every reference, when they all come from one (private data).
    only_node: Option<u16>,
}

impl<'a> Page<'a> {
    pub fn new(number: u64, touch_rank: u32, address_rank: u32, refs: &'a [Ref], events: &'a [Ref]) -> Self {
        let only_node = refs.first().map(|r| r.node).filter(|&n| refs.iter().all(|r| r.node == n));
        Page { number, touch_rank, address_rank, refs, events, only_node }
    }

    /// The same page with these TLB events.
    pub fn with_events(self, events: &'a [Ref]) -> Self {
        Page { events, ..self }
    }

    /// The same page with the private-page shortcut off: policies replay every reference.
    #[cfg(test)]
    pub(crate) fn replayed(self) -> Self {
        Page { only_node: None, ..self }
    }

    /// The node of every reference, when they all come from one: a policy that starts at
    /// the first touch and only ever moves a page to a node referencing it leaves such a
    /// page where it is, every reference local.
    pub fn only_node(&self) -> Option<u16> {
        self.only_node
    }
}
