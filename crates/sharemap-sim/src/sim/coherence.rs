//! A miss through the machine: the shared caches on the core's path, the directory, another
//! core's copy or DRAM at the page's node; evictions, write-backs and invalidations, which
//! keep the directory exact (the coherence model is the parent module's).

use super::bit;
use super::keep_only;
use super::{NO_STREAM, STREAMS, Sim};
use crate::cache::{EXCLUSIVE, INVALID, MODIFIED, SHARED};
use crate::directory::Dir;

impl<'m> Sim<'m> {
    /// A line not in this core: from another core, a shared cache or memory, then into the
    /// core's caches. Kept out of `access` so that a hit, the common case, runs without the
    /// miss path's registers and stack.
    #[inline(never)]
    pub(super) fn miss(&mut self, pu: usize, core: usize, line: u64, write: bool) -> f64 {
        self.private_misses += 1;
        let place = self.places[pu];
        let private = place.private;
        // Streams matter only when their misses overlap.
        let streamed = self.m.params.mlp > 1 && self.follow_stream(core, line);
        let (ns, mut entry) = self.fetch(pu, core, line, write, streamed);
        if private.is_empty() {
            self.dir.store(line, entry);
            if write {
                // No cache of its own: the write goes through to memory.
                self.write_back(line, place.node);
                #[cfg(test)]
                self.values.write_through(place.shared, line);
            }
            #[cfg(test)]
            if !write {
                self.values.check_uncached_read(line);
            }
            return ns;
        }
        let state = if write {
            MODIFIED
        } else if entry.cores() & !bit(core) == 0 && entry.shared & !place.shared_mask == 0 {
            EXCLUSIVE
        } else {
            SHARED
        };
        entry.set_cores(entry.cores() | bit(core));
        // The line's entry is written once per miss, before the fills below evict (a
        // victim's eviction may change this line's entry, in a cache of one way).
        self.dir.store(line, entry);
        let last = private[private.len() - 1];
        if let Some((victim, vstate)) = self.caches[last].insert_absent(line, state) {
            self.private_victim(pu, core, victim, vstate);
        }
        for &l in &private[..private.len() - 1] {
            let victim = self.caches[l].insert_absent(line, state);
            if !self.m.private_inclusive
                && let Some((victim, vstate)) = victim
            {
                self.private_victim(pu, core, victim, vstate);
            }
        }
        #[cfg(test)]
        self.values.core_access(core, line, write);
        ns
    }

    /// A line this core does not hold: from the core that holds it exclusive, else the
    /// nearest shared cache on the path, else a dirty shared cache elsewhere, else DRAM.
    /// A write then leaves no other copy. Returns the cost and the line's directory entry
    /// as the fetch leaves it, for the caller to store: the entry is read once and written
    /// once per miss (each lookup of it was about 25 instructions).
    pub(super) fn fetch(&mut self, pu: usize, core: usize, line: u64, write: bool, streamed: bool) -> (f64, Dir) {
        let m = self.m;
        let place = self.places[pu];
        let node = place.node;
        let mut entry = self.dir.get(line).unwrap_or_default();
        // The shared caches on the path that lack the line will take it: their sets, often
        // out of the host's caches on large traces, are fetched while the owner is asked.
        for &c in place.shared {
            if entry.shared & self.caches.info(c).shared_bit == 0 {
                self.caches[c].prefetch(line);
            }
        }
        let others = entry.cores() & !bit(core);
        // A sequential stream's misses are in flight together (`Params::mlp`).
        let overlap = if streamed { m.params.mlp.max(1) as f64 } else { 1.0 };
        let mut ns = 0.0;
        let mut served = false;
        #[cfg(test)]
        self.values.fetch_begin(core, line);
        if others.count_ones() == 1 {
            let owner = others.trailing_zeros() as usize;
            let owner_place = self.core_places[owner];
            let onode = owner_place.node;
            // The owner's last private level says whether it holds the line exclusive and
            // gives it up (shared for a reader, invalid for a writer) in the same search.
            let after = if write { INVALID } else { SHARED };
            let owner_path = owner_place.private;
            let give_up = |s: u8| if s >= EXCLUSIVE { after } else { s };
            let ostate = if m.private_inclusive {
                match owner_path.last() {
                    Some(&c) => self.caches[c].change_state(line, give_up),
                    None => INVALID,
                }
            } else {
                // Any of its levels may hold it; those that do hold it in one state.
                let mut held = INVALID;
                for &c in owner_path {
                    held = held.max(self.caches[c].change_state(line, give_up));
                }
                held
            };
            if ostate >= EXCLUSIVE {
                for &c in &owner_path[..owner_path.len() - 1] {
                    self.caches[c].set_state(line, after);
                }
                ns = m.core_transfer_ns(core, owner) + self.link_wait(onode, node);
                self.stats.transfer(node, onode);
                #[cfg(test)]
                self.values.served_by_core(owner);
                served = true;
                if write {
                    #[cfg(test)]
                    self.values.drop_core(owner, line);
                    entry.set_cores(entry.cores() & !bit(owner));
                    self.stats.invalidation(node, onode);
                } else {
                    if ostate == MODIFIED {
                        // MESI: a modified line becomes shared only once memory has it.
                        self.write_back(line, onode);
                        #[cfg(test)]
                        self.values.core_to_memory(owner, line);
                        #[cfg(test)]
                        self.refresh_shared(m.core_pu[owner], owner, line);
                    }
                }
            }
        }
        // Bits (positions in the PU's shared path) of the shared caches that lack the line.
        // The directory knows which shared caches hold it (the owner's reply above changed
        // only its cores): a cache it does not name is not searched.
        let mut missed: u64 = 0;
        if !served {
            for (i, &c) in place.shared.iter().enumerate() {
                let level = self.caches.info(c).level;
                if entry.shared & self.caches.info(c).shared_bit != 0 {
                    let state = self.caches[c].touch(line);
                    debug_assert!(state != INVALID, "the directory names a shared cache without the line");
                    self.stats.hits[level] += 1;
                    // A stream's line from a shared cache overlaps as one from DRAM does.
                    ns = self.caches.info(c).latency_ns / overlap;
                    #[cfg(test)]
                    self.values.served_by_shared(c, line);
                    served = true;
                    break;
                }
                self.stats.misses[level] += 1;
                missed |= 1 << i;
            }
        } else {
            // Served by another core. A shared cache on the way that the owner also sits
            // under answered the request (as an inclusive cache or a snoop filter does: a
            // hit with a snoop, as hardware counts it); the levels below it missed, and so
            // did every level when the owner is in another package: the line came from
            // beyond the last-level cache, as the paper's L3 miss counters see it.
            let owner_shared = self.core_places[others.trailing_zeros() as usize].shared;
            let mut answered = false;
            for (i, &c) in place.shared.iter().enumerate() {
                if entry.shared & self.caches.info(c).shared_bit == 0 {
                    missed |= 1 << i;
                }
                if !answered {
                    let level = self.caches.info(c).level;
                    answered = owner_shared.contains(&c);
                    if answered {
                        self.stats.hits[level] += 1;
                    } else {
                        self.stats.misses[level] += 1;
                    }
                }
            }
        }
        if !served && entry.dirty != 0 {
            // A dirty copy in a shared cache off this path: it answers, and memory gets it.
            let idx = entry.dirty as usize - 1;
            let c = self.m.shared_caches[idx];
            let cnode = self.shared_node[idx];
            ns = self.shared_reply_ns[node * self.shared_node.len() + idx] + self.link_wait(cnode, node);
            self.stats.transfer(node, cnode);
            #[cfg(test)]
            self.values.served_by_shared(c, line);
            if !write {
                // A writer takes the line from it; a reader leaves it clean, memory updated.
                self.write_back(line, cnode);
                #[cfg(test)]
                self.values.shared_to_memory(c, line);
                self.caches[c].set_state(line, SHARED);
                entry.dirty = 0;
            }
            served = true;
        }
        if !served {
            let page = line >> (self.page_shift - self.line_shift);
            let mut home = self.home(page, node);
            if !self.replicas.is_empty()
                && let Some(&copies) = self.replicas.get(&page)
                && copies >> node & 1 == 1
            {
                home = node;
            }
            let latency = m.dram_ns[node][home];
            let wait = self.channels.read(self.now, home, node);
            self.count_wait(wait);
            self.stats.streamed += streamed as u64;
            ns = latency / overlap + wait;
            self.stats.dram(node, home);
            if self.memory_index.is_some() {
                self.count_memory_access(page, node);
            }
            #[cfg(test)]
            self.values.served_by_memory(line);
        }
        // Fill the shared caches that missed (clean).
        while missed != 0 {
            let c = place.shared[missed.trailing_zeros() as usize];
            missed &= missed - 1;
            #[cfg(test)]
            self.values.fill_shared(c, line);
            self.put_shared(c, line, SHARED, true);
            entry.shared |= self.caches.info(c).shared_bit;
        }
        if write {
            let before = entry;
            keep_only(&mut entry, core, place.shared_mask);
            ns += self.invalidate_copies(pu, core, line, before);
        }
        (ns, entry)
    }

    /// A line written back to its page's home from a cache on node `from` (a cached line's
    /// page always has a home).
    pub(super) fn write_back(&mut self, line: u64, from: usize) {
        let home = self.home(line >> (self.page_shift - self.line_shift), from);
        self.stats.writeback(from, home);
        self.channels.write(self.now, from, home);
    }

    /// A line crossing from node `from` to node `to` now: its wait on the link.
    fn link_wait(&mut self, from: usize, to: usize) -> f64 {
        let wait = self.channels.transfer(self.now, from, to);
        self.count_wait(wait);
        wait
    }

    fn count_wait(&mut self, wait: f64) {
        self.stats.bandwidth_waits += (wait > 0.0) as u64;
        self.stats.bandwidth_wait_ns += wait;
    }

    /// Whether a miss on `line` continues one of the core's streams (the line after or
    /// before the last of one): the stream moves on to it; else the line starts a stream,
    /// in place of the oldest.
    fn follow_stream(&mut self, core: usize, line: u64) -> bool {
        let heads = &mut self.streams[core];
        if let Some(h) =
            heads.iter_mut().find(|h| **h != NO_STREAM && (h.wrapping_add(1) == line || line.wrapping_add(1) == **h))
        {
            *h = line;
            return true;
        }
        let next = &mut self.stream_next[core];
        heads[*next as usize] = line;
        *next = (*next + 1) % STREAMS as u8;
        false
    }

    /// Puts `line` in shared cache `c` (`absent`: known not to be there), and says so in
    /// its directory entry.
    pub(super) fn fill_shared(&mut self, c: usize, line: u64, state: u8, absent: bool) {
        let idx = self.m.shared_index[c].unwrap_or(0);
        self.put_shared(c, line, state, absent);
        self.dir.entry(line, |e| {
            e.shared |= 1 << idx;
            if state == MODIFIED {
                e.dirty = idx as u8 + 1;
            }
        });
    }

    /// `fill_shared` without the line's directory entry (the caller keeps it).
    pub(super) fn put_shared(&mut self, c: usize, line: u64, state: u8, absent: bool) {
        let evicted =
            if absent { self.caches[c].insert_absent(line, state) } else { self.caches[c].insert(line, state) };
        if let Some((victim, vstate)) = evicted {
            self.evict_shared(c, victim, vstate);
        }
    }

    pub(super) fn evict_shared(&mut self, c: usize, line: u64, state: u8) {
        let idx = self.m.shared_index[c].unwrap_or(0);
        // A core's modified copy is newer than this cache's: it alone goes to memory.
        let newer_below = self.m.inclusive_over[c] != 0 && self.back_invalidate(c, line);
        if state == MODIFIED && !newer_below {
            self.write_back(line, self.m.caches[c].node);
            #[cfg(test)]
            self.values.shared_to_memory(c, line);
        }
        #[cfg(test)]
        self.values.drop_shared(c, line);
        // One lookup: the entry is changed, and removed when nothing holds the line.
        self.dir.update(line, false, |e| {
            e.shared &= !(1 << idx);
            if e.dirty as usize == idx + 1 {
                e.dirty = 0;
            }
        });
    }

    /// An inclusive last-level cache `c` evicts `line`: the cores under it that hold it lose
    /// it (a modified copy, the newest data, goes to memory). Whether one was modified.
    pub(super) fn back_invalidate(&mut self, c: usize, line: u64) -> bool {
        let under = self.m.inclusive_over[c];
        let Some(entry) = self.dir.get(line) else { return false };
        let mut cores = entry.cores() & under;
        if cores == 0 {
            return false;
        }
        let mut modified = false;
        while cores != 0 {
            let core = cores.trailing_zeros() as usize;
            cores &= cores - 1;
            let path = self.core_places[core].private;
            let state = self.held(path, line);
            for &l in path {
                self.caches[l].set_state(line, INVALID);
            }
            if state == MODIFIED {
                modified = true;
                self.write_back(line, self.core_places[core].node);
                #[cfg(test)]
                self.values.core_to_memory(core, line);
            }
            #[cfg(test)]
            self.values.drop_core(core, line);
            self.stats.back_invalidations += 1;
        }
        self.dir.update(line, true, |e| e.set_cores(e.cores() & !under));
        modified
    }

    /// The state a core's private caches (`path`) hold a line in: its last level's when the
    /// levels are inclusive, else any level's (the levels holding it agree).
    pub(super) fn held(&self, path: &[usize], line: u64) -> u8 {
        if self.m.private_inclusive {
            return path.last().map_or(INVALID, |&c| self.caches[c].state(line));
        }
        path.iter().map(|&c| self.caches[c].state(line)).max().unwrap_or(INVALID)
    }

    /// A line one of a core's private caches let go (with inclusive levels, only the last
    /// one's victims come here): it leaves the core, unless a non-inclusive level still holds it.
    #[inline]
    pub(super) fn private_victim(&mut self, pu: usize, core: usize, line: u64, state: u8) {
        if !self.m.private_inclusive && self.held(self.places[pu].private, line) != INVALID {
            return;
        }
        self.evict_private(pu, core, line, state);
    }

    /// A line leaves a core's last private level: out of its lower ones too; a modified one
    /// goes to the core's last shared cache, dirty, or to DRAM when it has none.
    pub(super) fn evict_private(&mut self, pu: usize, core: usize, line: u64, state: u8) {
        let place = self.places[pu];
        let private = place.private;
        for &l in &private[..private.len() - 1] {
            self.caches[l].set_state(line, INVALID);
        }
        let modified_to_shared = state == MODIFIED && !place.shared.is_empty();
        // A modified line going to a shared cache keeps its entry (filled below).
        let mut in_shared = 0;
        self.dir.update(line, modified_to_shared, |e| {
            in_shared = e.shared;
            e.set_cores(e.cores() & !bit(core))
        });
        if state == MODIFIED {
            match place.shared.last() {
                Some(&c) => {
                    #[cfg(test)]
                    self.refresh_shared(pu, core, line);
                    #[cfg(test)]
                    self.values.core_to_shared(core, c, line);
                    self.fill_shared(c, line, MODIFIED, in_shared & self.caches.info(c).shared_bit == 0);
                }
                None => {
                    self.write_back(line, place.node);
                    #[cfg(test)]
                    self.values.core_to_memory(core, line);
                }
            }
        }
        #[cfg(test)]
        self.values.drop_core(core, line);
    }

    /// The tests' shadow of the data: a modified line leaves its core, and the shared caches
    /// on the core's path that hold an older copy (the core wrote without telling them) get
    /// its data. States and costs are the caller's; only the data moves here.
    #[cfg(test)]
    pub(super) fn refresh_shared(&mut self, pu: usize, core: usize, line: u64) {
        for &c in &self.m.shared_path[pu] {
            if self.caches[c].state(line) != INVALID {
                self.values.core_to_shared(core, c, line);
            }
        }
    }

    /// The state of a line in a core (the tests' data shadow asks it).
    #[cfg(test)]
    pub(super) fn core_state(&self, core: usize, line: u64) -> u8 {
        self.held(&self.m.private_path[self.m.core_pu[core]], line)
    }

    pub(super) fn set_core_state(&mut self, core: usize, line: u64, state: u8) {
        for &c in self.core_places[core].private {
            self.caches[c].set_state(line, state);
        }
    }

    /// Invalidates every copy but this core's and those of the shared caches on its path;
    /// returns what the writer waits for: the farthest acknowledgement.
    #[inline]
    pub(super) fn invalidate_others(&mut self, pu: usize, core: usize, line: u64) -> f64 {
        let mine = self.places[pu].shared_mask;
        // One lookup: the entry keeps this core and its path's shared caches; the copies it
        // named elsewhere go below.
        let Some(before) = self.dir.update(line, true, |e| {
            let before = *e;
            keep_only(e, core, mine);
            before
        }) else {
            return 0.0;
        };
        self.invalidate_copies(pu, core, line, before)
    }

    /// Drops the copies `entry` names but this core's and those of the shared caches on its
    /// path (the directory is the caller's); returns the farthest acknowledgement.
    pub(super) fn invalidate_copies(&mut self, pu: usize, core: usize, line: u64, entry: Dir) -> f64 {
        let m = self.m;
        let mine = self.places[pu].shared_mask;
        let node = self.places[pu].node;
        let mut wait: f64 = 0.0;
        let mut others = entry.cores() & !bit(core);
        while others != 0 {
            let other = others.trailing_zeros() as usize;
            others &= others - 1;
            self.set_core_state(other, line, INVALID);
            #[cfg(test)]
            self.values.drop_core(other, line);
            self.stats.invalidation(node, self.core_places[other].node);
            wait = wait.max(m.core_transfer_ns(core, other));
        }
        let mut shared = entry.shared & !mine;
        while shared != 0 {
            let idx = shared.trailing_zeros() as usize;
            shared &= shared - 1;
            let c = self.m.shared_caches[idx];
            self.caches[c].set_state(line, INVALID);
            #[cfg(test)]
            self.values.drop_shared(c, line);
            self.stats.invalidation(node, self.shared_node[idx]);
            wait = wait.max(self.shared_reply_ns[node * self.shared_node.len() + idx]);
        }
        wait
    }
}
