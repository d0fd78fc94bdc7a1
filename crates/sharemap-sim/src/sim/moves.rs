//! What mechanisms do to a run: move a thread, move or replicate a page (TLB shootdowns
//! included), charge time, take a fault, synchronise the clocks.

use super::NO_PAGE;
use super::Sim;
use crate::cache::INVALID;
#[cfg(test)]
use crate::cache::MODIFIED;
use crate::stats::ThreadMove;

impl<'m> Sim<'m> {
    /// Moves thread `t` to `pu`: it pays the migration; its data stays where it was. A
    /// thread that has not begun is only placed there.
    pub fn move_thread(&mut self, t: usize, pu: usize) {
        let pu = pu % self.m.pus();
        let from = self.pu_of(t);
        if from == pu {
            return;
        }
        if self.decisions.is_some() {
            self.thread_moves.push(ThreadMove { at: self.stats.accesses, thread: t, from, to: pu });
        }
        self.place_thread(t, pu);
        if !self.threads[t].started {
            return;
        }
        self.threads[t].clock += self.m.params.thread_migration_ns;
        self.stats.thread_migrations += 1;
    }

    /// Moves `page` to `node`, charged to thread `t`: its lines leave every cache (modified
    /// ones travel with the copy), every TLB drops it, the copy crosses the interconnect.
    pub fn move_page(&mut self, page: u64, node: usize, t: usize) {
        let node = node.min(self.m.nodes - 1);
        let from = match self.home_of(page) {
            Some(n) if n == node => return,
            Some(n) => n,
            None => {
                self.set_home(page, node);
                return;
            }
        };
        let first = page << (self.page_shift - self.line_shift);
        for line in first..first + self.lines_per_page {
            let Some(e) = self.dir.remove(line) else { continue };
            // Shared caches first: a core's modified copy is newer than a dirty shared one.
            let mut shared = e.shared;
            while shared != 0 {
                let idx = shared.trailing_zeros() as usize;
                shared &= shared - 1;
                let c = self.m.shared_caches[idx];
                #[cfg(test)]
                if self.caches[c].state(line) == MODIFIED {
                    self.values.shared_to_memory(c, line);
                }
                self.caches[c].set_state(line, INVALID);
                #[cfg(test)]
                self.values.drop_shared(c, line);
            }
            let mut cores = e.cores();
            while cores != 0 {
                let c = cores.trailing_zeros() as usize;
                cores &= cores - 1;
                #[cfg(test)]
                if self.core_state(c, line) == MODIFIED {
                    self.values.core_to_memory(c, line);
                }
                self.set_core_state(c, line, INVALID);
                #[cfg(test)]
                self.values.drop_core(c, line);
            }
        }
        self.drop_from_tlbs(page);
        self.replicas.remove(&page);
        self.home.insert(page, node as u16);
        self.log(page, 1 << node);
        let bytes = 1u64 << self.page_shift;
        let p = &self.m.params;
        self.pu_of(t);
        self.threads[t].clock += bytes as f64 * p.copy_ns_per_byte + p.shootdown_ns;
        self.stats.page_migrations += 1;
        self.stats.migrated_bytes(from, node, bytes);
    }

    pub(super) fn drop_from_tlbs(&mut self, page: u64) {
        self.last_page.iter_mut().filter(|p| **p == page).for_each(|p| *p = NO_PAGE);
        for tlb in self.tlb.iter_mut() {
            tlb.set_state(page, INVALID);
        }
        for tlb in self.tlb2.iter_mut().flatten() {
            tlb.set_state(page, INVALID);
        }
    }

    /// Copies `page` to the nodes of `nodes` (a bit per node) that lack one, charged to
    /// thread `t`: reads from those nodes are then local, until a write leaves one copy.
    pub fn replicate(&mut self, page: u64, nodes: u64, t: usize) {
        let Some(home) = self.home_of(page) else { return };
        let have = self.replicas.get(&page).copied().unwrap_or(1 << home);
        let new = nodes & !have & ((1u64 << self.m.nodes.min(63)) - 1);
        if new == 0 {
            return;
        }
        self.replicas.insert(page, have | new);
        self.log(page, (have | new) as u128);
        let bytes = 1u64 << self.page_shift;
        let copies = new.count_ones() as u64;
        self.pu_of(t);
        self.threads[t].clock += (bytes * copies) as f64 * self.m.params.copy_ns_per_byte;
        self.stats.replications += copies;
        self.stats.interconnect_bytes += bytes * copies;
    }

    /// Adds work to thread `t`'s clock (a mechanism's own cost: a fault, a decision).
    pub fn charge(&mut self, t: usize, ns: f64) {
        self.pu_of(t);
        self.threads[t].clock += ns;
    }

    /// A page fault a mechanism takes on thread `t`, costing it `ns`.
    pub fn fault(&mut self, t: usize, ns: f64) {
        self.stats.faults += 1;
        self.charge(t, ns);
    }

    /// A barrier: every thread seen waits for the slowest.
    pub fn synchronise(&mut self) {
        let max = self.time_ns();
        self.threads.iter_mut().for_each(|t| t.clock = max);
    }
}
