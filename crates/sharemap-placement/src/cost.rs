//! Seed 004's cost model (section 2.4) and the bookkeeping every policy shares.
//!
//! A page lives in a non-empty set of memories: NUMA nodes, plus global memory when the
//! machine has one. A reference costs 1 if the referencing node holds a copy, g if only
//! global memory does, r otherwise. Every new location a page moves or replicates into
//! costs G if global memory is in the old or the new set, else R. A write needs a single
//! copy (dropping copies is free). The initial placement is free.

use serde::Serialize;
use sharemap_machine::CostParams;

/// Most NUMA nodes a machine may have here: node sets are 128-bit masks with the top bit
/// standing for global memory.
pub const MAX_NODES: usize = 127;
/// The bit of global memory in a [`LocSet`].
pub const GLOBAL: u32 = 127;

/// A set of memories: bit i = NUMA node i, bit 127 = global memory.
pub type LocSet = u128;

/// The set holding only `node` (< 128). From a table: a variable 128-bit shift takes about
/// six instructions, and the policies' loops ask for one or more per reference.
#[inline]
pub fn node_bit(node: u16) -> LocSet {
    NODE_BITS[node as usize & 127]
}

static NODE_BITS: [LocSet; 128] = {
    let mut t = [0; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = 1u128 << i;
        i += 1;
    }
    t
};

pub const GLOBAL_BIT: LocSet = 1u128 << GLOBAL;

/// Reference and move costs in units of a local reference.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Costs {
    pub r: f64,
    #[serde(rename = "R")]
    pub big_r: f64,
    /// Global memory reference and move costs; infinite when there is no global memory.
    pub g: f64,
    #[serde(rename = "G")]
    pub big_g: f64,
}

impl Costs {
    pub fn new(p: &CostParams) -> Self {
        Costs { r: p.r, big_r: p.big_r, g: p.g.unwrap_or(f64::INFINITY), big_g: p.big_g.unwrap_or(f64::INFINITY) }
    }

    pub fn has_global(&self) -> bool {
        self.g.is_finite()
    }

    /// Cost of one reference by `node` to a page held in `set`.
    #[inline]
    pub fn reference(&self, set: LocSet, node: u16) -> f64 {
        if set & node_bit(node) != 0 {
            1.0
        } else if set & GLOBAL_BIT != 0 {
            self.g
        } else {
            self.r
        }
    }
}

/// What a placement did: the counts behind its cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub local: u64,
    pub remote: u64,
    pub global: u64,
    /// New locations charged R (between node memories).
    pub node_moves: u64,
    /// New locations charged G (global memory in the old or new set).
    pub global_moves: u64,
    /// Of all new locations, those that added a copy (the page then had several).
    pub replications: u64,
    /// Profile samples a profile-guided policy used (0 for the others).
    pub profile_samples: u64,
}

impl Tally {
    pub fn cost(&self, c: &Costs) -> f64 {
        let mut total = self.local as f64 + c.r * self.remote as f64 + c.big_r * self.node_moves as f64;
        // Guard 0 x infinity when there is no global memory.
        if self.global > 0 {
            total += c.g * self.global as f64;
        }
        if self.global_moves > 0 {
            total += c.big_g * self.global_moves as f64;
        }
        total
    }

    pub fn references(&self) -> u64 {
        self.local + self.remote + self.global
    }

    /// New locations of any kind.
    pub fn new_locations(&self) -> u64 {
        self.node_moves + self.global_moves
    }

    /// New locations that migrated the page rather than copying it.
    pub fn migrations(&self) -> u64 {
        self.new_locations() - self.replications
    }

    /// Charges the page's move from `old` to `new`: each new location costs a move (a
    /// global one if global memory is in either set), and counts as a replication if the
    /// page then has several copies. Dropped locations are free.
    #[inline]
    pub fn charge_move(&mut self, old: LocSet, new: LocSet) {
        let added = (new & !old).count_ones() as u64;
        if added > 0 {
            if (old | new) & GLOBAL_BIT != 0 {
                self.global_moves += added;
            } else {
                self.node_moves += added;
            }
            if new.count_ones() > 1 {
                self.replications += added;
            }
        }
    }

    /// Charges `n` references by `node` while the page is in `set`. Without branches: which
    /// of the three a reference is depends on the trace and is poorly predicted.
    #[inline]
    pub fn charge_refs(&mut self, set: LocSet, node: u16, n: u64) {
        let local = (set & node_bit(node) != 0) as u64;
        let global = (set & GLOBAL_BIT != 0) as u64 & (local ^ 1);
        self.local += local * n;
        self.global += global * n;
        self.remote += (1 - local - global) * n;
    }

    pub fn add(&mut self, o: &Tally) {
        self.local += o.local;
        self.remote += o.remote;
        self.global += o.global;
        self.node_moves += o.node_moves;
        self.global_moves += o.global_moves;
        self.replications += o.replications;
        self.profile_samples += o.profile_samples;
    }
}

thread_local! {
    /// The placements of the page being run, when `record_placements` asks for them.
    static PLACEMENTS: std::cell::RefCell<Option<Vec<(u64, LocSet)>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` (a policy over one page, on this thread) and returns with its result where the
/// page was put: (references charged before, location set), first the initial placement,
/// then each move. Empty when the policy answered without placing the page (a page one node
/// references stays where that node first touched it).
pub fn record_placements<T>(f: impl FnOnce() -> T) -> (T, Vec<(u64, LocSet)>) {
    PLACEMENTS.with(|p| *p.borrow_mut() = Some(Vec::new()));
    let out = f();
    (out, PLACEMENTS.with(|p| p.borrow_mut().take()).unwrap_or_default())
}

fn log_placement(charged: u64, set: LocSet) {
    PLACEMENTS.with(|p| {
        if let Some(log) = p.borrow_mut().as_mut() {
            log.push((charged, set));
        }
    });
}

/// Where one page lives while a policy runs, charging every reference and move to a tally.
/// Policies only say where the page should be; this keeps the accounting identical for all
/// of them, and enforces coherence: a write leaves a single copy.
#[derive(Clone, Debug)]
pub struct Residence {
    set: LocSet,
    pub tally: Tally,
}

impl Residence {
    /// A page initially in `set` (free: the initial placement costs nothing).
    pub fn new(set: LocSet) -> Self {
        debug_assert!(set != 0);
        log_placement(0, set);
        Residence { set, tally: Tally::default() }
    }

    pub fn set(&self) -> LocSet {
        self.set
    }

    pub fn holds(&self, node: u16) -> bool {
        self.set & node_bit(node) != 0
    }

    pub fn copies(&self) -> u32 {
        self.set.count_ones()
    }

    /// Moves the page to `new` (non-empty): new locations are charged, dropped ones are free.
    pub fn place(&mut self, new: LocSet) {
        debug_assert!(new != 0);
        self.tally.charge_move(self.set, new);
        self.set = new;
        let t = &self.tally;
        log_placement(t.local + t.remote + t.global, new);
    }

    /// Adds a copy at the given location.
    pub fn replicate(&mut self, loc: LocSet) {
        self.place(self.set | loc);
    }

    /// Charges references while the page stays where it is: with a single copy no reference
    /// changes anything, so they are counted rather than replayed.
    pub fn stay(&mut self, refs: impl IntoIterator<Item = crate::page::Ref>) {
        let refs = refs.into_iter();
        if self.set.count_ones() != 1 {
            refs.for_each(|r| if r.write { self.write(r.node) } else { self.read(r.node) });
            return;
        }
        if self.set == GLOBAL_BIT {
            self.tally.global += refs.count() as u64;
            return;
        }
        let node = self.set.trailing_zeros() as u16;
        let (all, local) = refs.fold((0u64, 0u64), |(all, local), r| (all + 1, local + (r.node == node) as u64));
        self.tally.local += local;
        self.tally.remote += all - local;
    }

    /// Charges a read by `node`.
    #[inline]
    pub fn read(&mut self, node: u16) {
        self.charge(node);
    }

    /// Charges `n` reads by `node` while the page stays where it is.
    #[inline]
    pub fn read_many(&mut self, node: u16, n: u64) {
        self.tally.charge_refs(self.set, node, n);
    }

    /// Charges a write by `node`. With several copies the others are invalidated first
    /// (free), keeping the writer's copy, else the global one, else the lowest node's.
    #[inline]
    pub fn write(&mut self, node: u16) {
        if self.set.count_ones() > 1 {
            self.set = if self.holds(node) {
                node_bit(node)
            } else if self.set & GLOBAL_BIT != 0 {
                GLOBAL_BIT
            } else {
                1u128 << self.set.trailing_zeros()
            };
        }
        self.charge(node);
    }

    #[inline]
    fn charge(&mut self, node: u16) {
        self.tally.charge_refs(self.set, node, 1);
    }
}

/// Lists a set as text: node numbers and `global`, separated by `;` (e.g. `0;3;global`).
pub fn set_label(set: LocSet) -> String {
    let mut parts: Vec<String> =
        (0..MAX_NODES as u32).filter(|&i| set & (1u128 << i) != 0).map(|i| i.to_string()).collect();
    if set & GLOBAL_BIT != 0 {
        parts.push("global".into());
    }
    parts.join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs() -> Costs {
        Costs { r: 5.0, big_r: 40.0, g: 2.0, big_g: 30.0 }
    }

    #[test]
    fn references_and_moves_are_charged_as_in_section_2_4() {
        let c = costs();
        let mut p = Residence::new(node_bit(0));
        p.read(0); // 1
        p.read(1); // r = 5
        p.replicate(node_bit(1)); // R = 40, a replication
        p.read(1); // 1
        p.write(1); // invalidates node 0 for free, 1
        p.place(GLOBAL_BIT); // G = 30, a migration
        p.read(2); // g = 2
        assert_eq!(p.tally.cost(&c), 1.0 + 5.0 + 40.0 + 1.0 + 1.0 + 30.0 + 2.0);
        assert_eq!(p.tally.replications, 1);
        assert_eq!(p.tally.migrations(), 1);
        // Replicating to a node while global memory holds a copy costs G, not R.
        let mut q = Residence::new(GLOBAL_BIT);
        q.replicate(node_bit(3));
        assert_eq!(q.tally.global_moves, 1);
        assert_eq!(set_label(q.set()), "3;global");
    }

    #[test]
    fn no_global_memory_never_costs_infinity() {
        let c = Costs::new(&CostParams::butterfly(4096));
        let mut p = Residence::new(node_bit(0));
        p.read(1);
        assert_eq!(p.tally.cost(&c), 15.0);
    }
}
