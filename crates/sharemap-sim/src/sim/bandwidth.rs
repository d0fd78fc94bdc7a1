//! Memory controllers and links as queues: each carries a fixed number of lines per
//! microsecond of simulated time, and a line asked for when that capacity is taken waits
//! for the first microsecond with room (a fluid queue: no delay below saturation, the
//! throughput of the resource above it). The model and its limits: docs/simulator.md.
//!
//! Threads' clocks drift apart (the trace is in one order, the clocks advance each at its
//! own pace), so lines arrive out of time order: each microsecond keeps its own count, in a
//! ring covering the last `WINDOW` of them. A line asked for before the window, by a thread
//! far behind the leader, finds no contention and takes no capacity.

/// One epoch of the ledger, in ns.
pub const EPOCH_NS: f64 = 1000.0;
/// Epochs a channel remembers (4 ms of simulated time).
pub const WINDOW: u64 = 4096;

#[derive(Clone, Copy)]
struct Slot {
    epoch: u64,
    /// ns of the epoch taken by lines booked in it.
    used: f64,
}

/// One resource: a node's memory or one direction of a link.
pub struct Channel {
    /// What one line takes of it, in ns; 0: no limit (no ring kept).
    ns_per_line: f64,
    slots: Vec<Slot>,
    /// The latest epoch booked.
    newest: u64,
}

impl Channel {
    pub fn new(ns_per_line: f64) -> Channel {
        // A line longer than an epoch would never fit one: such a channel books whole epochs.
        let limited = ns_per_line > 0.0;
        let slots = if limited { vec![Slot { epoch: 0, used: 0.0 }; WINDOW as usize] } else { Vec::new() };
        Channel { ns_per_line: ns_per_line.min(EPOCH_NS), slots, newest: 0 }
    }

    /// Host memory a channel of this cost keeps, in bytes.
    pub fn host_bytes(ns_per_line: f64) -> u64 {
        if ns_per_line > 0.0 { WINDOW * std::mem::size_of::<Slot>() as u64 } else { 0 }
    }

    /// A line through this channel asked for at `t` ns: how long it waits for room.
    pub fn book(&mut self, t: f64) -> f64 {
        if self.slots.is_empty() {
            return 0.0;
        }
        let first = (t.max(0.0) / EPOCH_NS) as u64;
        if first + WINDOW <= self.newest {
            return 0.0;
        }
        let mut e = first;
        // Walk to the first epoch with room; at most a window ahead (a backlog longer than
        // that waits the window).
        while e < first + WINDOW {
            let slot = &mut self.slots[(e % WINDOW) as usize];
            if slot.epoch != e {
                *slot = Slot { epoch: e, used: 0.0 };
            }
            if slot.used + self.ns_per_line <= EPOCH_NS {
                let start = e as f64 * EPOCH_NS + slot.used;
                slot.used += self.ns_per_line;
                self.newest = self.newest.max(e);
                return if e == first { 0.0 } else { (start - t).max(0.0) };
            }
            e += 1;
        }
        self.newest = self.newest.max(e);
        e as f64 * EPOCH_NS - t
    }
}

/// Every node's memory and every ordered pair of nodes' link, with what they delayed.
pub struct Channels {
    nodes: usize,
    memory: Vec<Channel>,
    /// Index `from * nodes + to`: lines travelling from node `from` to node `to`.
    links: Vec<Channel>,
}

impl Channels {
    pub fn new(nodes: usize, memory_ns_per_line: f64, link_ns_per_line: f64) -> Channels {
        let link = |i: usize| if i / nodes == i % nodes { 0.0 } else { link_ns_per_line };
        Channels {
            nodes,
            memory: (0..nodes).map(|_| Channel::new(memory_ns_per_line)).collect(),
            links: (0..nodes * nodes).map(|i| Channel::new(link(i))).collect(),
        }
    }

    /// Host memory the channels of a machine of `nodes` nodes keep, in bytes.
    pub fn host_bytes(nodes: usize, memory_ns_per_line: f64, link_ns_per_line: f64) -> u64 {
        let n = nodes as u64;
        n * Channel::host_bytes(memory_ns_per_line) + n * n.saturating_sub(1) * Channel::host_bytes(link_ns_per_line)
    }

    /// A line read from node `home`'s memory by node `to` at `t`: its wait at the memory,
    /// then on the link when it crosses one.
    pub fn read(&mut self, t: f64, home: usize, to: usize) -> f64 {
        let wait = self.memory[home].book(t);
        if home == to { wait } else { wait + self.links[home * self.nodes + to].book(t + wait) }
    }

    /// A line written to node `home`'s memory from node `from` at `t` (a write-back: no one
    /// waits for it, but it takes the capacity).
    pub fn write(&mut self, t: f64, from: usize, home: usize) {
        let wait = if from == home { 0.0 } else { self.links[from * self.nodes + home].book(t) };
        self.memory[home].book(t + wait);
    }

    /// A line from a cache on node `from` to a core on node `to` at `t`: its wait on the link.
    pub fn transfer(&mut self, t: f64, from: usize, to: usize) -> f64 {
        if from == to { 0.0 } else { self.links[from * self.nodes + to].book(t) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_capacity_nothing_waits_and_above_it_throughput_is_the_capacity() {
        // 4 ns a line: 250 lines an epoch.
        let mut c = Channel::new(4.0);
        for i in 0..250 {
            assert_eq!(c.book(i as f64), 0.0);
        }
        // The 251st line asked for in the first epoch waits for the second.
        assert_eq!(c.book(10.0), 990.0);
        // 10,000 lines asked for at once leave at 250 an epoch: the last waits 40 epochs.
        let mut c = Channel::new(4.0);
        let last = (0..10_000).map(|_| c.book(0.0)).fold(0.0, f64::max);
        assert_eq!(last, 39.0 * EPOCH_NS + 249.0 * 4.0);
    }

    #[test]
    fn a_line_asked_for_late_in_trace_order_but_early_in_time_uses_the_room_left_then() {
        let mut c = Channel::new(4.0);
        for _ in 0..200 {
            c.book(5_500.0);
        }
        // Epoch 0 is free: a lagging thread's line there does not queue behind epoch 5's.
        assert_eq!(c.book(100.0), 0.0);
        // Epoch 5 has 50 lines of room left.
        assert!((0..50).all(|_| c.book(5_000.0) == 0.0));
        assert!(c.book(5_000.0) > 0.0);
    }

    #[test]
    fn lines_before_the_window_are_not_booked() {
        let mut c = Channel::new(4.0);
        c.book(WINDOW as f64 * EPOCH_NS * 2.0);
        for _ in 0..1000 {
            assert_eq!(c.book(0.0), 0.0);
        }
    }

    #[test]
    fn no_limit_never_waits_and_keeps_no_ring() {
        let mut c = Channels::new(2, 0.0, 0.0);
        assert!((0..100_000).all(|_| c.read(0.0, 0, 1) == 0.0));
        assert_eq!(Channels::host_bytes(2, 0.0, 0.0), 0);
        assert_eq!(Channels::host_bytes(2, 4.0, 8.0), 4 * WINDOW * 16);
    }

    #[test]
    fn a_remote_read_waits_for_the_memory_then_the_link() {
        // The link is the narrower: 8 ns a line, 125 lines an epoch.
        let mut c = Channels::new(2, 4.0, 8.0);
        let waits: Vec<f64> = (0..250).map(|_| c.read(0.0, 0, 1)).collect();
        assert!(waits[..125].iter().all(|&w| w == 0.0));
        assert_eq!(waits[125], EPOCH_NS);
        // The local node's lines do not use the link: its memory has 0 lines of room left in
        // epoch 0 (250 booked), so a local read waits for epoch 1.
        assert_eq!(c.read(0.0, 0, 0), EPOCH_NS);
        // Node 1's memory is untouched.
        assert_eq!(c.read(0.0, 1, 1), 0.0);
    }
}
