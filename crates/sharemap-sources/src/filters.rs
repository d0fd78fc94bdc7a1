//! Seed 004's trace perturbation filters (section 4.2), to check how sensitive results are
//! to the exact interleaving of the threads' references. Both keep each thread's own order.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sharemap_trace::Access;
use std::collections::VecDeque;

/// Fine-grain reordering: a buffer of `window` references; each step picks a random entry
/// and emits the oldest buffered reference of that entry's thread, then refills.
pub struct Reorder {
    window: usize,
    buf: VecDeque<Access>,
    rng: ChaCha8Rng,
}

impl Reorder {
    pub const WINDOW: usize = 100;

    pub fn new(window: usize, seed: u64) -> Self {
        Reorder { window: window.max(1), buf: VecDeque::new(), rng: ChaCha8Rng::seed_from_u64(seed) }
    }

    /// Takes one reference; emits at most one.
    pub fn push(&mut self, a: Access, out: &mut impl FnMut(Access)) {
        self.buf.push_back(a);
        if self.buf.len() >= self.window {
            self.emit_one(out);
        }
    }

    /// Emits what is left.
    pub fn finish(&mut self, out: &mut impl FnMut(Access)) {
        while !self.buf.is_empty() {
            self.emit_one(out);
        }
    }

    fn emit_one(&mut self, out: &mut impl FnMut(Access)) {
        let pick = self.rng.gen_range(0..self.buf.len());
        let thread = self.buf[pick].thread;
        let oldest = self.buf.iter().position(|b| b.thread == thread).expect("the picked thread is buffered");
        out(self.buf.remove(oldest).expect("in range"));
    }
}

/// Coarse-grain gaps: with probability 1/`every` per reference, one random thread stalls for
/// `length` references (its references are queued); afterwards each step emits a queued
/// reference instead of a fresh one with probability `catch_up`, until the queues drain.
pub struct Gaps {
    every: u64,
    length: u64,
    catch_up: f64,
    threads: u32,
    rng: ChaCha8Rng,
    /// Per stalled or catching-up thread: (stall ends at this input count, queued references).
    queues: Vec<(u32, u64, VecDeque<Access>)>,
    seen: u64,
}

impl Gaps {
    pub fn new(threads: u32, seed: u64) -> Self {
        Gaps {
            every: 30_000,
            length: 4_000,
            catch_up: 2.0 / 3.0,
            threads: threads.max(1),
            rng: ChaCha8Rng::seed_from_u64(seed),
            queues: Vec::new(),
            seen: 0,
        }
    }

    pub fn with(mut self, every: u64, length: u64, catch_up: f64) -> Self {
        (self.every, self.length, self.catch_up) = (every.max(1), length, catch_up);
        self
    }

    pub fn push(&mut self, a: Access, out: &mut impl FnMut(Access)) {
        self.seen += 1;
        if self.rng.gen_range(0..self.every) == 0 {
            let t = self.rng.gen_range(0..self.threads);
            match self.queues.iter_mut().find(|q| q.0 == t) {
                Some(q) => q.1 = q.1.max(self.seen + self.length),
                None => self.queues.push((t, self.seen + self.length, VecDeque::new())),
            }
        }
        // Catching up: maybe emit a queued reference of a thread whose stall is over.
        if self.rng.gen_bool(self.catch_up) {
            let seen = self.seen;
            if let Some(q) = self.queues.iter_mut().find(|q| q.1 <= seen && !q.2.is_empty()) {
                out(q.2.pop_front().expect("non-empty"));
            }
        }
        // A thread with a stall or a backlog queues its new references, keeping its order.
        match self.queues.iter_mut().find(|q| q.0 == a.thread) {
            Some(q) => q.2.push_back(a),
            None => out(a),
        }
        let seen = self.seen;
        self.queues.retain(|q| q.1 > seen || !q.2.is_empty());
    }

    pub fn finish(&mut self, out: &mut impl FnMut(Access)) {
        for (_, _, q) in self.queues.drain(..) {
            q.into_iter().for_each(&mut *out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(n: u64) -> Vec<Access> {
        (0..n).map(|i| Access::read((i % 5) as u32, i * 8, 8)).collect()
    }

    fn per_thread(v: &[Access]) -> Vec<Vec<u64>> {
        let mut t = vec![Vec::new(); 5];
        for a in v {
            t[a.thread as usize].push(a.addr);
        }
        t
    }

    #[test]
    fn reorder_keeps_every_reference_and_each_threads_order() {
        let inp = input(5000);
        let mut out = Vec::new();
        let mut f = Reorder::new(Reorder::WINDOW, 7);
        for a in &inp {
            f.push(*a, &mut |x| out.push(x));
        }
        f.finish(&mut |x| out.push(x));
        assert_eq!(out.len(), inp.len());
        assert_eq!(per_thread(&out), per_thread(&inp));
        assert_ne!(out, inp, "the interleaving changes");
        // References move only locally: never more than the window away from their place.
        for (i, a) in out.iter().enumerate() {
            let orig = (a.addr / 8) as i64;
            assert!((orig - i as i64).abs() < 2 * Reorder::WINDOW as i64, "moved from {orig} to {i}");
        }
    }

    #[test]
    fn gaps_delay_one_thread_and_lose_nothing() {
        let inp = input(200_000);
        let mut out = Vec::new();
        let mut f = Gaps::new(5, 3).with(10_000, 4_000, 2.0 / 3.0);
        for a in &inp {
            f.push(*a, &mut |x| out.push(x));
        }
        f.finish(&mut |x| out.push(x));
        assert_eq!(out.len(), inp.len());
        assert_eq!(per_thread(&out), per_thread(&inp));
        // Some reference came out much later than it went in: a gap happened.
        let late = out.iter().enumerate().map(|(i, a)| i as i64 - (a.addr / 8) as i64).max().unwrap();
        assert!(late > 500, "largest delay {late}");
    }
}
