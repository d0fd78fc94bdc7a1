//! The simulator against what is known: exact counts on access patterns worked out by hand,
//! and the protocol's invariants and data values on random accesses.

use crate::model::{Model, Params};
use crate::sim::{FirstPlacement, Sim};
use proptest::prelude::*;
use sharemap_machine::Machine;

/// Two packages (one node each), two cores per package with two PUs each; tiny caches
/// (L1 4 lines, L2 8 lines, L3 16 lines) so that random accesses evict all the time.
const TINY: &str = "pack:2 numa:1 l3:1(size=1KiB) l2:2(size=512) l1d:1(size=256) core:1 pu:2";

fn model(spec: &str) -> Model {
    Model::new(&Machine::from_spec(spec).unwrap(), Params::default()).unwrap()
}

/// A model whose cores overlap a stream's misses, as a core's prefetcher and ten line fill
/// buffers do (`mlp=10`).
fn prefetching(spec: &str, unlimited: bool) -> Model {
    let limit = if unlimited { 0.0 } else { crate::params::AS_THE_MACHINE };
    let p = Params { mlp: 10, mem_gbps: limit, link_gbps: limit, ..Params::default() };
    Model::new(&Machine::from_spec(spec).unwrap(), p).unwrap()
}

/// A model whose memory and links are no bottleneck (the tests of what else takes time).
fn unlimited(spec: &str) -> Model {
    let p = Params { mem_gbps: 0.0, link_gbps: 0.0, ..Params::default() };
    Model::new(&Machine::from_spec(spec).unwrap(), p).unwrap()
}

#[test]
fn the_model_reads_the_machine() {
    let m = model(TINY);
    assert_eq!((m.cores, m.nodes, m.pus(), m.line), (4, 2, 8, 64));
    assert_eq!(m.levels(), vec![1, 2, 3]);
    // PU 0: its own L1 and L2, and the package's L3.
    assert_eq!(m.private_path[0].iter().map(|&c| m.caches[c].level).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(m.shared_path[0].len(), 1);
    assert_eq!(m.pu_node, vec![0, 0, 0, 0, 1, 1, 1, 1]);
    assert!(m.common_shared(0, 2).is_some() && m.common_shared(0, 4).is_none());
    let sammu = model("sammu");
    assert_eq!((sammu.cores, sammu.nodes, sammu.pus()), (32, 4, 64));
    assert_eq!(sammu.caches.iter().filter(|c| c.level == 3).count(), 4);
}

/// The per-core table of transfer costs gives, for every pair of PUs (SMT siblings
/// included), what the PUs' own paths give.
#[test]
fn transfer_costs_per_core_are_those_of_every_pu() {
    for spec in [TINY, "sammu", "pack:2 numa:1 l3:1(size=1MiB) l2:2(size=256KiB) core:2 pu:2"] {
        let m = model(spec);
        for a in 0..m.pus() {
            for b in 0..m.pus() {
                assert_eq!(m.transfer_ns(a, b), m.transfer_between(a, b), "{spec}: PUs {a}, {b}");
            }
        }
    }
    let m = model(TINY);
    assert!(m.transfer_ns(0, 2) < m.transfer_ns(0, 4), "within a package is nearer");
}

#[test]
fn a_loop_over_data_that_fits_misses_once_per_line() {
    let m = model("pack:1 numa:1 l3:1(size=4MiB) l2:1(size=256KiB) l1d:1(size=32KiB) core:1 pu:1");
    let mut sim = Sim::new(&m, 4096, &[0], FirstPlacement::FirstTouch);
    for _ in 0..3 {
        for i in 0..256u64 {
            sim.access(0, i * 64, false);
        }
    }
    let s = &sim.stats;
    assert_eq!((s.accesses, s.misses[0], s.hits[0]), (768, 256, 512));
    assert_eq!((s.misses[1], s.misses[2], s.dram_local, s.dram_remote), (256, 256, 256, 0));
    // 4 pages: 4 page walks, then TLB hits.
    assert_eq!((s.tlb_misses, s.page_walks), (4, 4));
}

/// Ten rounds on PUs `pus`: thread 0 writes `a`, then thread 1 writes (or reads) `b`.
fn turns<'m>(m: &'m Model, pus: &[usize], a: u64, b: u64, second_writes: bool) -> Sim<'m> {
    let mut sim = Sim::new(m, 4096, pus, FirstPlacement::FirstTouch);
    for _ in 0..10 {
        sim.access(0, a, true);
        sim.access(1, b, second_writes);
    }
    sim
}

#[test]
fn writes_ping_ponging_between_packages_move_the_line_each_time() {
    let m = model(TINY);
    // Thread 0 on package 0, thread 1 on package 1.
    let sim = turns(&m, &[0, 4], 0x1000, 0x1000, true);
    let s = &sim.stats;
    // The first write comes from DRAM; each of the 19 later ones takes the line from the
    // other package's core, invalidating it there (and the other package's L3 copy).
    assert_eq!(s.dram_local + s.dram_remote, 1);
    assert_eq!(s.transfers_remote, 19);
    assert_eq!(s.invalidations_remote, 19 + 19);
    assert!(sim.check_invariants().is_ok());
    assert!(sim.values.errors.is_empty(), "{:?}", sim.values.errors);
}

/// Levels of TINY: L1 and L2 private, L3 per package (`hits`/`misses` index: level - 1).
const L3: usize = 2;

#[test]
fn writes_ping_ponging_between_packages_miss_the_last_level_each_time() {
    let m = model(TINY);
    let sim = turns(&m, &[0, 4], 0x1000, 0x1000, true);
    // Every write after the first gets the line from the other package: beyond the L3, as
    // the hardware's last-level miss counters count it.
    assert_eq!((sim.stats.misses[L3], sim.stats.hits[L3]), (20, 0));
}

#[test]
fn writes_ping_ponging_within_a_package_move_the_line_under_its_l3() {
    let m = model(TINY);
    // PUs 0 and 2: two cores of package 0, under one L3.
    let sim = turns(&m, &[0, 2], 0x1000, 0x1000, true);
    let s = &sim.stats;
    // One DRAM read; 19 transfers between the cores, each invalidating the other core's copy;
    // the L3 they share answers each of them (a hit with a snoop): one L3 miss in all.
    assert_eq!(s.dram_local + s.dram_remote, 1);
    assert_eq!((s.transfers_local, s.transfers_remote), (19, 0));
    assert_eq!((s.invalidations, s.invalidations_remote), (19, 0));
    assert_eq!((s.misses[L3], s.hits[L3]), (1, 19));
    assert_eq!(s.interconnect_bytes, 0);
    assert!(sim.check_invariants().is_ok());
    assert!(sim.values.errors.is_empty(), "{:?}", sim.values.errors);
}

#[test]
fn false_sharing_moves_the_line_as_true_sharing_does() {
    let m = model(TINY);
    let run = |second: u64| {
        let sim = turns(&m, &[0, 4], 0x1000, second, true);
        assert!(sim.check_invariants().is_ok());
        sim.stats
    };
    // Different words of one line: the line goes back and forth (19 transfers), as if the
    // threads shared data; words of different lines: nothing moves.
    let same_line = run(0x1008);
    assert_eq!((same_line.transfers_remote, same_line.invalidations_remote), (19, 38));
    let other_line = run(0x1040);
    assert_eq!((other_line.transfers_remote, other_line.invalidations), (0, 0));
    assert_eq!(other_line.dram_local + other_line.dram_remote, 2);
}

#[test]
fn a_producer_and_a_consumer_in_two_packages_pay_per_round() {
    let m = model(TINY);
    let sim = turns(&m, &[0, 4], 0x3000, 0x3000, false);
    let s = &sim.stats;
    // Round 1: the write comes from DRAM. Each read takes the modified line from the
    // producer (memory updated on the way: a write-back). Rounds 2-10: the producer holds
    // it shared, so its write is an upgrade invalidating the consumer's copy and the
    // consumer's package L3 copy.
    assert_eq!(s.dram_local + s.dram_remote, 1);
    assert_eq!((s.transfers_remote, s.writebacks), (10, 10));
    assert_eq!((s.upgrades, s.invalidations_remote), (9, 18));
    // L3 misses: the producer's first write, and each of the consumer's reads.
    assert_eq!(s.misses[L3], 11);
    assert!(sim.check_invariants().is_ok());
    assert!(sim.values.errors.is_empty(), "{:?}", sim.values.errors);
}

#[test]
fn readers_share_and_a_writer_invalidates_them() {
    let m = model(TINY);
    let mut sim = Sim::new(&m, 4096, &[0, 2, 4, 6], FirstPlacement::FirstTouch);
    for t in 0..4 {
        sim.access(t, 0x2000, false);
    }
    assert_eq!(sim.stats.invalidations, 0);
    // Core 0 writes: cores 1, 2, 3 lose their copies, and package 1's L3 its copy.
    sim.access(0, 0x2000, true);
    assert_eq!(sim.stats.upgrades, 1);
    assert_eq!(sim.stats.invalidations, 4);
    assert_eq!(sim.stats.invalidations_remote, 3);
    // Thread 3 reads it back from core 0 (modified: memory is updated on the way).
    sim.access(3, 0x2000, false);
    assert_eq!(sim.stats.transfers_remote, 1);
    assert_eq!(sim.stats.writebacks, 1);
    assert!(sim.check_invariants().is_ok());
    assert!(sim.values.errors.is_empty(), "{:?}", sim.values.errors);
}

#[test]
fn first_touch_keeps_private_data_local_and_round_robin_spreads_it() {
    let m = model("pack:4 numa:1 l3:1(size=64KiB) l2:1(size=4KiB) l1d:1(size=1KiB) core:1 pu:1");
    let run = |placement| {
        let mut sim = Sim::new(&m, 4096, &[0, 1, 2, 3], placement);
        for t in 0..4u64 {
            for i in 0..4096u64 {
                sim.access(t as usize, (t << 30) + i * 64, false);
            }
        }
        sim.stats.local_dram_share()
    };
    assert_eq!(run(FirstPlacement::FirstTouch), 1.0);
    let rr = run(FirstPlacement::RoundRobin);
    assert!((rr - 0.25).abs() < 0.01, "round robin: {rr}");
}

#[test]
fn threads_sharing_a_pu_share_its_time() {
    let m = model("pack:1 numa:1 l1d:1(size=32KiB) core:1 pu:1");
    let mut alone = Sim::new(&m, 4096, &[0], FirstPlacement::FirstTouch);
    let mut paired = Sim::new(&m, 4096, &[0, 0], FirstPlacement::FirstTouch);
    for _ in 0..100 {
        alone.access(0, 0, false);
        paired.access(0, 0, false);
        // Not the line after thread 0's: no stream to follow.
        paired.access(1, 1 << 20, false);
    }
    assert!(paired.time_ns() > 1.9 * alone.time_ns());
}

/// Threads that run one after the other on one PU take the sum of their times: one that has
/// finished no longer shares the PU (the run queue, not a load that only grows).
#[test]
fn threads_one_after_the_other_on_one_pu_take_the_sum_of_their_times() {
    let m = unlimited("pack:1 numa:1 l1d:1(size=32KiB) core:1 pu:1");
    let work = |sim: &mut Sim, t: usize| {
        for _ in 0..10 {
            for i in 0..64u64 {
                sim.access(t, 0x10_0000 * (t as u64 + 1) + 64 * i, false);
            }
        }
    };
    let mut alone = Sim::new(&m, 4096, &[0], FirstPlacement::FirstTouch);
    work(&mut alone, 0);
    let mut serial = Sim::new(&m, 4096, &[0; 8], FirstPlacement::FirstTouch);
    for t in 0..8 {
        work(&mut serial, t);
    }
    let (one, eight) = (alone.time_ns(), serial.time_ns());
    assert!((eight - 8.0 * one).abs() <= 1e-9 * eight, "8 threads in turn: {eight} ns, one alone {one} ns");
}

/// Many more threads than PUs, all running: each PU works through its threads' accesses in
/// turn, so the run takes what the busiest PU has to do, whatever the number of threads.
#[test]
fn oversubscribed_pus_take_their_threads_work_in_turn() {
    let m = model("pack:1 numa:1 l2:1(size=1MiB) l1d:1(size=32KiB) core:2 pu:1");
    let threads = 4096usize;
    let pus: Vec<usize> = (0..threads).map(|t| t % 2).collect();
    let mut sim = Sim::new(&m, 4096, &pus, FirstPlacement::FirstTouch);
    // Created together at the start, as a trace's `thread-start` events at position 0 say.
    (0..threads).for_each(|t| sim.thread_start(t));
    let mut busy = [0.0f64; 2];
    for round in 0..4u64 {
        for t in 0..threads {
            let ns = sim.access(t, 0x100_0000 + 64 * t as u64, round == 0);
            busy[t % 2] += ns;
        }
    }
    let most = busy[0].max(busy[1]);
    assert!(
        sim.time_ns() >= most && sim.time_ns() <= 1.01 * most,
        "{} ns for {most} ns of work on the busiest PU",
        sim.time_ns()
    );
}

#[test]
fn threads_that_never_run_neither_slow_others_nor_pay_for_moves() {
    let m = model("pack:1 numa:1 l1d:1(size=32KiB) core:2 pu:1");
    let mut alone = Sim::new(&m, 4096, &[0], FirstPlacement::FirstTouch);
    // 100 threads mapped on PU 0; only thread 0 runs; thread 50 is moved before it runs.
    let mut crowd = Sim::new(&m, 4096, &[0; 100], FirstPlacement::FirstTouch);
    crowd.move_thread(50, 1);
    for _ in 0..100 {
        alone.access(0, 0, false);
        crowd.access(0, 0, false);
    }
    assert_eq!(crowd.time_ns(), alone.time_ns());
    assert_eq!(crowd.stats.thread_migrations, 0);
}

#[test]
fn a_migrated_page_leaves_every_cache_and_is_then_read_from_its_new_node() {
    let m = model(TINY);
    let mut sim = Sim::new(&m, 4096, &[0, 4], FirstPlacement::FirstTouch);
    sim.access(0, 0x3000, true);
    assert_eq!(sim.home_of(3), Some(0));
    sim.move_page(3, 1, 1);
    assert_eq!((sim.home_of(3), sim.stats.page_migrations), (Some(1), 1));
    sim.access(1, 0x3000, false);
    assert_eq!((sim.stats.dram_local, sim.stats.dram_remote), (2, 0), "each read from its own node");
    assert!(sim.check_invariants().is_ok());
    assert!(sim.values.errors.is_empty(), "{:?}", sim.values.errors);
}

/// Columns run through `Sim::feed`, whose hints to the host go ahead of the accesses once
/// the machine caches many lines and misses often, give what the same accesses one by one
/// give: every count, every thread's clock.
#[test]
fn prefetching_ahead_changes_no_result() {
    let m = model("pack:2 numa:1 l3:1(size=4MiB) l2:2(size=256KiB) l1d:1(size=32KiB) core:1 pu:1");
    let (mut threads, mut addrs, mut writes) = (Vec::new(), Vec::new(), Vec::new());
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in 0..400_000u64 {
        // xorshift: lines drawn from 192k, runs of 4 words of one line by one thread.
        if i % 4 == 0 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        threads.push((x >> 40) as u32 % 4);
        addrs.push((x % 196_608) * 64 + (i % 4) * 8);
        writes.push(x >> 20 & 3 == 0 && i % 4 == 3);
    }
    let pus = [0, 1, 2, 3];
    let mut one_by_one = Sim::new(&m, 4096, &pus, FirstPlacement::FirstTouch);
    for ((&t, &a), &w) in threads.iter().zip(&addrs).zip(&writes) {
        one_by_one.access(t as usize, a, w);
    }
    let mut columns = Sim::new(&m, 4096, &pus, FirstPlacement::FirstTouch);
    let mut hinted = false;
    for ((t, a), w) in threads.chunks(16_384).zip(addrs.chunks(16_384)).zip(writes.chunks(16_384)) {
        columns.feed(t, a, |i| w[i], |_, _, _, _, _| {});
        hinted |= columns.prefetches() == (true, true);
    }
    assert!(hinted, "the trace is meant to turn both hints on");
    assert_eq!(format!("{:?}", columns.stats), format!("{:?}", one_by_one.stats));
    for t in 0..4 {
        assert_eq!(columns.thread_clock(t), one_by_one.thread_clock(t));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A one-level machine run by the simulator on a random trace misses exactly as the
    /// textbook LRU model does, for several sizes and associativities (the line of each
    /// access's first byte; one thread, so no coherence).
    #[test]
    fn the_first_level_misses_as_a_plain_lru_model(
        addrs in proptest::collection::vec(0u64..(1 << 16), 1..3000),
        size_kib in prop_oneof![Just(1u64), Just(2), Just(8)],
        ways in prop_oneof![Just(1u32), Just(2), Just(4), Just(8), Just(16)],
    ) {
        let machine = Machine::from_spec(&format!("pack:1 numa:1 l1d:1(size={size_kib}KiB) core:1 pu:1")).unwrap();
        let params = Params { level_ways: [ways, 8, 16, 16], ..Params::default() };
        let m = Model::new(&machine, params).unwrap();
        let mut sim = Sim::new(&m, 4096, &[0], FirstPlacement::FirstTouch);
        let lines = size_kib * 1024 / 64;
        let sets = lines / ways as u64;
        let mut reference: Vec<Vec<u64>> = vec![Vec::new(); sets as usize];
        let mut want = 0u64;
        for &a in &addrs {
            let line = a / 64;
            let set = &mut reference[(line % sets) as usize];
            match set.iter().position(|&l| l == line) {
                Some(i) => {
                    set.remove(i);
                }
                None => {
                    want += 1;
                    if set.len() == ways as usize {
                        set.pop();
                    }
                }
            }
            set.insert(0, line);
            sim.access(0, a, a % 3 == 0);
        }
        prop_assert_eq!(sim.stats.misses[0], want);
        prop_assert_eq!(sim.stats.hits[0] + sim.stats.misses[0], addrs.len() as u64);
    }
}

/// Random accesses of 8 threads to a few lines, with thread and page moves mixed in.
fn ops() -> impl Strategy<Value = Vec<(u8, u8, bool, u8)>> {
    proptest::collection::vec((0u8..8, 0u8..48, any::<bool>(), 0u8..40), 1..400)
}

/// `far`: odd threads' lines lie beyond 48 bits (the directory then takes its wide layout).
fn run_checked(spec: &str, ops: &[(u8, u8, bool, u8)], far: bool) -> Result<(), TestCaseError> {
    run_checked_with(Model::new(&Machine::from_spec(spec).unwrap(), Params::default()).unwrap(), ops, far)
}

fn run_checked_with(m: Model, ops: &[(u8, u8, bool, u8)], far: bool) -> Result<(), TestCaseError> {
    let pus: Vec<usize> = (0..8).collect();
    let mut sim = Sim::new(&m, 512, &pus, FirstPlacement::FirstTouch);
    for (i, &(t, l, write, extra)) in ops.iter().enumerate() {
        // Lines 0..48 over 6 pages of 512 bytes.
        let addr = l as u64 * 64 + if far && t % 2 == 1 { 1 << 60 } else { 0 };
        sim.access(t as usize, addr, write);
        match extra {
            0 => sim.move_thread(t as usize, (t as usize + i) % m.pus()),
            1 => sim.move_page(addr >> 9, i % m.nodes, t as usize),
            _ => {}
        }
        if let Err(e) = sim.check_invariants() {
            return Err(TestCaseError::fail(format!("after op {i}: {e}")));
        }
        if !sim.values.errors.is_empty() {
            return Err(TestCaseError::fail(format!("after op {i} {:?}: {:?}", ops[i], sim.values.errors)));
        }
    }
    prop_assert!(sim.values.errors.is_empty(), "{:?}", sim.values.errors);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// One writer or many readers per line, an exact directory, inclusive private levels,
    /// and every read sees the last write, whatever the interleaving and the evictions.
    #[test]
    fn coherence_invariants_hold_on_random_accesses(ops in ops()) {
        run_checked(TINY, &ops, false)?;
    }

    /// The same on a machine with a cache shared below the last level (two cores per L2,
    /// as Opteron modules) and on one without any cache.
    #[test]
    fn coherence_holds_with_shared_l2_and_without_caches(ops in ops()) {
        run_checked("pack:2 numa:1 l3:1(size=2KiB) l2:2(size=512) l1d:2(size=128) core:1 pu:1", &ops, false)?;
        run_checked("numa:4 pu:2", &ops, false)?;
    }

    /// The same with each of the directory's layouts: past 64 cores, past 32 shared caches
    /// (42: two L3s and 40 L2s of two cores each, as `stmap-opteron` has), and with lines
    /// beyond 48 bits, which make a narrow directory wide in the middle of the run.
    #[test]
    fn coherence_holds_with_either_directory_layout(ops in ops()) {
        run_checked("pack:2 numa:1 l3:1(size=2KiB) l2:40(size=256) l1d:1(size=128) core:1 pu:1", &ops, false)?;
        run_checked("pack:2 numa:1 l3:1(size=2KiB) l2:20(size=256) l1d:2(size=128) core:1 pu:1", &ops, false)?;
        run_checked(TINY, &ops, true)?;
    }

    /// The same with inclusive last-level caches, which evict lines from the cores below:
    /// every line a core holds is then in its L3 too (`check_invariants`).
    #[test]
    fn coherence_holds_with_an_inclusive_last_level(ops in ops()) {
        let inclusive = Params { llc_inclusive: 1, ..Params::default() };
        run_checked_with(Model::new(&Machine::from_spec(TINY).unwrap(), inclusive).unwrap(), &ops, false)?;
    }

    /// The same with non-inclusive private levels (a line stays in a core while its L1 or
    /// its L2 holds it), under a non-inclusive and an inclusive last level.
    #[test]
    fn coherence_holds_with_non_inclusive_private_levels(ops in ops()) {
        for llc_inclusive in [0, 1] {
            let params = Params { private_inclusive: 0, llc_inclusive, ..Params::default() };
            run_checked_with(Model::new(&Machine::from_spec(TINY).unwrap(), params).unwrap(), &ops, false)?;
        }
    }
}

/// A non-inclusive L2 lets its L1 keep a line it evicts: core 0 writes a line, then keeps
/// hitting it in its L1 while streaming 8 other lines through (TINY's L2 holds 8, so its
/// least recently used, that line, goes). An inclusive L2 takes it out of the L1 too; a
/// non-inclusive one leaves it there, modified, and a core of the other package reading it
/// then gets it from core 0.
#[test]
fn a_non_inclusive_l2_leaves_its_l1_the_lines_it_evicts() {
    let run = |private_inclusive: u32| {
        let params = Params { private_inclusive, ..Params::default() };
        let m = Model::new(&Machine::from_spec(TINY).unwrap(), params).unwrap();
        let mut sim = Sim::new(&m, 4096, &[0, 2], FirstPlacement::FirstTouch);
        sim.access(0, 0x8000, true);
        for i in 1..=8u64 {
            sim.access(0, 0x8000 + 64 * i, false);
            sim.access(0, 0x8000, true);
        }
        let l1_misses = sim.stats.misses[0];
        // A reader elsewhere sees the last write (the tests' data shadow checks it), and
        // core 0 reads on: in its L1 still when the L2 is not inclusive.
        sim.access(1, 0x8000, false);
        sim.access(0, 0x8000, false);
        assert!(sim.check_invariants().is_ok(), "{:?}", sim.check_invariants());
        assert!(sim.values.errors.is_empty(), "{:?}", sim.values.errors);
        (l1_misses, sim.stats.misses[0] - l1_misses - 1)
    };
    // Inclusive: the 8th streamed line evicts the written line from the L2 and the L1, so
    // its next write misses (1 + 8 + 1 misses) and brings it back.
    assert_eq!(run(1), (10, 0));
    // Non-inclusive: only the first write and the streamed lines miss; the reader took the
    // line from core 0's L1 alone, which keeps it, shared.
    assert_eq!(run(0), (9, 0));
    // The presets say: the X7550's and the E5-4650's L2 are not inclusive of their L1.
    let private = |spec: &str| model(spec).private_inclusive;
    assert!(!private("sammu-x7550") && !private("stmap-xeon") && private(TINY));
    // And `simulate`'s header says so.
    assert_eq!(model("sammu-x7550").inclusion(), ["L2 not inclusive of L1", "L3 inclusive"]);
    assert_eq!(model(TINY).inclusion(), ["L2 inclusive of L1", "L3 not inclusive"]);
    assert!(model("numa:2 pu:2").inclusion().is_empty());
}

/// An inclusive L3 evicts a line from the cores under it; a non-inclusive one leaves their
/// copies: core 0 reads a line, core 1 (same package) streams through more lines than the
/// L3 holds, and core 0 reads its line again.
#[test]
fn an_inclusive_last_level_evicts_the_lines_of_the_cores_below() {
    let run = |inclusive: u32| {
        let params = Params { llc_inclusive: inclusive, ..Params::default() };
        let m = Model::new(&Machine::from_spec(TINY).unwrap(), params).unwrap();
        let mut sim = Sim::new(&m, 4096, &[0, 2], FirstPlacement::FirstTouch);
        sim.access(0, 0x8000, false);
        for i in 1..=64u64 {
            sim.access(1, 0x8000 + 64 * i, false);
        }
        let before = sim.stats.misses[0];
        sim.access(0, 0x8000, false);
        assert!(sim.check_invariants().is_ok(), "{:?}", sim.check_invariants());
        assert!(sim.values.errors.is_empty(), "{:?}", sim.values.errors);
        (sim.stats.misses[0] - before, sim.stats.back_invalidations)
    };
    // TINY's L3 holds 16 lines: core 1's 64 evict core 0's line from it.
    assert_eq!(run(1).0, 1, "inclusive: core 0's copy went with the L3's");
    assert!(run(1).1 >= 1);
    assert_eq!(run(0), (0, 0), "non-inclusive: core 0 still holds it");
    // The presets say: the X7550's L3 is inclusive (the model follows by default), the
    // Opteron's is not; a synthetic description says nothing (not inclusive).
    let auto = |spec: &str| model(spec).inclusive_over.iter().any(|&c| c != 0);
    assert!(auto("sammu-x7550") && !auto(TINY));
    assert_eq!(Machine::from_spec("stmap-opteron").unwrap().llc_inclusive, Some(false));
}

mod mechanisms {
    use crate::mechanisms::{Context, Profile, parse_list};
    use crate::model::{Model, Params};
    use crate::stats::Outcome;
    use sharemap_core::SharingMatrix;
    use sharemap_machine::Machine;
    use sharemap_trace::{Access, MemoryTrace};

    /// Two packages (one node each) of two cores.
    const TWO: &str = "pack:2 numa:1 l3:1(size=256KiB) l2:2(size=16KiB) l1d:1(size=4KiB) core:1 pu:1";

    fn run(spec: &str, list: &str, accesses: &[Access], profile: Option<&Profile>) -> Vec<Outcome> {
        run_with(spec, Params::default(), list, accesses, profile)
    }

    fn run_with(
        spec: &str,
        params: Params,
        list: &str,
        accesses: &[Access],
        profile: Option<&Profile>,
    ) -> Vec<Outcome> {
        let machine = Machine::from_spec(spec).unwrap();
        let model = Model::new(&machine, params).unwrap();
        let threads = accesses.iter().map(|a| a.thread as usize + 1).max().unwrap_or(0);
        let ctx = Context {
            machine: &machine,
            model: &model,
            threads,
            page_size: 4096,
            seed: 1,
            profile,
            plans: &[],
            log_decisions: false,
            schedule: Default::default(),
        };
        let chosen = parse_list(list).unwrap();
        let mut trace = MemoryTrace::from_accesses(accesses.iter().copied());
        crate::simulate(&mut trace, &model, &chosen, &ctx, &|_| {}).unwrap()
    }

    /// Threads 0 and 1 write lines of one block in turn, as do threads 2 and 3: `os` puts
    /// each pair across the two packages (Linux's fork balancing alternates the nodes).
    fn pairs(rounds: u64) -> Vec<Access> {
        let machine = Machine::from_spec(TWO).unwrap();
        let nodes: Vec<usize> = sharemap_mapping::os_mapping(&machine, 4).iter().map(|&p| machine.pu_numa[p]).collect();
        assert_eq!(nodes, [0, 1, 0, 1], "the premise: os alternates the nodes");
        let mut v = Vec::new();
        for r in 0..rounds {
            for t in 0..4u32 {
                let block = 0x100000 * (1 + (t / 2) as u64);
                v.push(Access::write(t, block + 64 * (r % 32), 8));
            }
        }
        v
    }

    #[test]
    fn sammu_remaps_sharing_pairs_together_and_gains_time() {
        let trace = pairs(200_000);
        // 8-bit access counters: each thread's page stays in its TLB, so only saturations
        // tell SAMMU about it (32-bit counters never saturate here).
        let out = run(TWO, "os,sammu:period-ms=0.01,ac=8", &trace, None);
        let (os, sammu) = (&out[0], &out[1]);
        assert_eq!(sammu.mechanism, "sammu:period-ms=0.01,ac=8");
        assert!(sammu.counts.thread_migrations >= 2, "{} migrations", sammu.counts.thread_migrations);
        assert!(
            sammu.counts.transfers_remote * 10 < os.counts.transfers_remote,
            "{} vs {}",
            sammu.counts.transfers_remote,
            os.counts.transfers_remote
        );
        assert!(sammu.time_ns < 0.8 * os.time_ns, "{} vs {}", sammu.time_ns, os.time_ns);
    }

    /// Linux's first touch: thread 1 (node 1) reads a page of untouched memory (the zero
    /// page), then thread 0 (node 0) writes it and works on it. The page belongs to the
    /// writer; homing it at the read (`zero_page=0`) puts it on the reader's node.
    #[test]
    fn a_read_before_the_first_write_does_not_place_the_page() {
        let mut trace = vec![Access::read(1, 0x7000, 8)];
        trace.extend((0..64u64).map(|i| Access::write(0, 0x7000 + 64 * i, 8)));
        let counts = |zero_page: u32| {
            run_with(TWO, Params { zero_page, ..Params::default() }, "os", &trace, None)[0].counts.clone()
        };
        let (kernel, any) = (counts(1), counts(0));
        // The writer's 64 lines come from its own node; only the read of the zero page
        // (node 0's) from node 1 is remote.
        assert_eq!((kernel.dram_local, kernel.dram_remote), (64, 1), "zero page: {kernel:?}");
        // Homed by the read on node 1: the writer fetches 63 lines remotely.
        assert_eq!((any.dram_local, any.dram_remote), (1, 63), "first access: {any:?}");
    }

    /// MG-like pairs the OS already put together (threads t and t + 4 share, and the OS puts
    /// them on one node): every mapping the algorithm can propose costs the same or more, so
    /// an online mechanism must not move anyone, whatever labels the algorithm's answer has.
    #[test]
    fn pairs_already_together_are_left_where_they_are() {
        const FOUR: &str = "pack:4 numa:1 l3:1(size=256KiB) l2:2(size=16KiB) l1d:1(size=4KiB) core:1 pu:1";
        let machine = Machine::from_spec(FOUR).unwrap();
        let nodes: Vec<usize> = sharemap_mapping::os_mapping(&machine, 8).iter().map(|&p| machine.pu_numa[p]).collect();
        assert!((0..4).all(|t| nodes[t] == nodes[t + 4]), "the premise: {nodes:?}");
        let mut trace = Vec::new();
        for r in 0..100_000u64 {
            for t in 0..8u32 {
                trace.push(Access::write(t, 0x100000 * (1 + (t % 4) as u64) + 64 * (r % 32), 8));
            }
        }
        let out = run(FOUR, "os,sammu:period-ms=0.01,ac=8,kmaf:window-ms=0.01,period-ms=0.01", &trace, None);
        for o in &out[1..] {
            assert_eq!(o.counts.thread_migrations, 0, "{}", o.mechanism);
        }
        assert!(out[1].time_ns <= out[0].time_ns * 1.001, "sammu {} against os {}", out[1].time_ns, out[0].time_ns);
    }

    /// A program that shares next to nothing (EP-like: private data, one shared counter
    /// touched once in ten thousand accesses) never pays for a remap.
    #[test]
    fn little_sharing_never_remaps() {
        let mut trace = Vec::new();
        for i in 0..400_000u64 {
            let t = (i % 4) as u32;
            let addr = if i % 10_000 == 0 { 0x40 } else { 0x100000 * (1 + t as u64) + 64 * (i / 4 % 256) };
            trace.push(Access::write(t, addr, 8));
        }
        let out = run(TWO, "os,sammu:period-ms=0.01,ac=8,kmaf:window-ms=0.01,period-ms=0.01", &trace, None);
        for o in &out[1..] {
            assert_eq!(o.counts.thread_migrations, 0, "{}", o.mechanism);
        }
    }

    #[test]
    fn on_uniform_sharing_sammu_gains_nothing_and_loses_little() {
        // Every thread writes every line in turn: no grouping helps.
        let trace: Vec<Access> = (0..400_000u64).map(|i| Access::write((i % 4) as u32, 64 * (i / 4 % 64), 8)).collect();
        let out = run(TWO, "os,sammu:period-ms=0.01,ac=8", &trace, None);
        let ratio = out[1].time_ns / out[0].time_ns;
        assert!((0.95..1.05).contains(&ratio), "sammu / os time: {ratio}");
    }

    #[test]
    fn sammu_moves_pages_to_the_node_that_uses_them() {
        // Thread 0 (node 0) first touches 256 pages (1 MiB, four times the L3); then thread
        // 1 (node 1) alone reads them over and over. 8-bit access counters saturate, so
        // SAMMU sees the pages in use.
        let mut trace: Vec<Access> = (0..256u64).map(|p| Access::write(0, p * 4096, 8)).collect();
        for i in 0..1_000_000u64 {
            trace.push(Access::read(1, (i % 256) * 4096 + 64 * (i / 256 % 64), 8));
        }
        let out = run(TWO, "os,sammu:ac=8,nt=4", &trace, None);
        let (os, sammu) = (&out[0], &out[1]);
        assert_eq!(os.counts.page_migrations, 0);
        assert_eq!(sammu.counts.page_migrations, 256, "every page moves once");
        assert!(os.local_dram_share < 0.01, "os: {}", os.local_dram_share);
        // Each page needs NT = 4 more updates from node 1, about 16 passes over the data.
        assert!(sammu.local_dram_share > 0.6, "sammu: {}", sammu.local_dram_share);
        assert!(sammu.time_ns < os.time_ns);
    }

    /// A phase change is a barrier: the thread that did less waits for the other, so the
    /// run takes the longer thread's time in each phase.
    #[test]
    fn phase_changes_make_threads_wait_for_the_slowest() {
        use sharemap_trace::EventKind;
        let machine = Machine::from_spec(TWO).unwrap();
        let model = Model::new(&machine, Params::default()).unwrap();
        let ctx = Context {
            machine: &machine,
            model: &model,
            threads: 2,
            page_size: 4096,
            seed: 1,
            profile: None,
            plans: &[],
            log_decisions: false,
            schedule: Default::default(),
        };
        let phases = |barrier: bool| {
            let mut trace = MemoryTrace::new(Default::default());
            // Both threads begin at once.
            trace.access(Access::read(0, 0x100000, 8));
            trace.access(Access::read(1, 0x200000, 8));
            for phase in 0..2u64 {
                // Phase 0: thread 0 works 1000 accesses, thread 1 10; phase 1 the other way.
                let (long, short) = if phase == 0 { (0, 1) } else { (1, 0) };
                for i in 0..1000u64 {
                    trace.access(Access::read(long, 0x100000 * (long as u64 + 1) + 64 * (i % 16), 8));
                }
                for i in 0..10u64 {
                    trace.access(Access::read(short, 0x100000 * (short as u64 + 1) + 64 * i, 8));
                }
                if barrier {
                    trace.event(0, EventKind::PhaseChange, phase + 1, "");
                }
            }
            crate::simulate(&mut trace, &model, &parse_list("os").unwrap(), &ctx, &|_| {}).unwrap()[0].time_ns
        };
        let (free, synchronised) = (phases(false), phases(true));
        // Without barriers both threads finish after about 1010 accesses' work; with them,
        // each phase lasts as long as its 1000-access thread: nearly twice as long (the first
        // misses count in both).
        assert!(synchronised > 1.6 * free, "{synchronised} against {free}");
    }

    #[test]
    fn autopin_keeps_the_fastest_candidate() {
        let trace = pairs(200_000);
        let mut matrix = SharingMatrix::new(4);
        matrix.add(0, 1, 100.0);
        matrix.add(2, 3, 100.0);
        let profile = Profile { matrix, pages: Vec::new(), sampled: Vec::new(), memory: Vec::new(), page_size: 4096 };
        let out = run(TWO, "os,oracle,autopin:k=3,probation-ms=0.05", &trace, Some(&profile));
        let (os, oracle, autopin) = (&out[0], &out[1], &out[2]);
        // It tried three mappings and came back to the oracle's, the fastest.
        assert!(autopin.counts.thread_migrations > 0);
        assert!(autopin.time_ns < os.time_ns, "{} vs {}", autopin.time_ns, os.time_ns);
        assert!(autopin.time_ns > oracle.time_ns, "trying costs something");
    }

    #[test]
    fn marathe_places_pages_where_the_samples_say() {
        // Thread 0 (node 0) touches the page first; thread 1 (node 1) makes every later access.
        let mut trace = vec![Access::write(0, 0x5000, 8)];
        trace.extend((0..10_000u64).map(|i| Access::read(1, 0x5000 + 64 * (i % 64), 8)));
        // The default profile: loads missing a 32 KiB per-thread cache.
        let source = sharemap_decide::marathe::Source::CacheMiss { kb: 32, stores: false };
        let sampled = vec![(source, vec![(5u64, vec![1, 99])])];
        let profile =
            Profile { matrix: SharingMatrix::new(2), pages: Vec::new(), sampled, memory: Vec::new(), page_size: 4096 };
        let out = run(TWO, "os,marathe", &trace, Some(&profile));
        assert_eq!(
            (out[0].counts.dram_local, out[0].counts.dram_remote),
            (1, 63),
            "os: thread 1 reads lines 1-63 remotely (line 0 from core 0)"
        );
        assert_eq!(out[1].counts.dram_remote, 1, "marathe: only thread 0's first write is remote");
    }

    #[test]
    fn bad_mechanism_specs_are_refused_before_the_run() {
        for (list, want) in [
            ("nope", "unknown mechanism"),
            ("sammu:nt=0", "nt must be an integer from 1 to 65535"),
            ("sammu:nt=65536", "nt must be an integer from 1 to 65535"),
            ("sammu:gate=2", "gate must be a number from 0 to 1"),
            ("autopin:probation-ms=-1", "probation-ms must be a positive number"),
            ("os:x=1", "unknown option 'x'"),
        ] {
            let e = parse_list(list).err().unwrap_or_else(|| panic!("{list} accepted"));
            assert!(e.to_string().contains(want), "{list}: {e}");
        }
    }
}

mod kernel_mechanisms {
    use crate::mechanisms::{Context, parse_list};
    use crate::model::{Model, Params};
    use crate::stats::Outcome;
    use sharemap_machine::Machine;
    use sharemap_trace::{Access, MemoryTrace};

    const TWO: &str = "pack:2 numa:1 l3:1(size=64KiB) l2:2(size=8KiB) l1d:1(size=2KiB) core:1 pu:1";

    fn run(list: &str, accesses: &[Access]) -> Vec<Outcome> {
        let machine = Machine::from_spec(TWO).unwrap();
        let model = Model::new(&machine, Params::default()).unwrap();
        let threads = accesses.iter().map(|a| a.thread as usize + 1).max().unwrap_or(0);
        let ctx = Context {
            machine: &machine,
            model: &model,
            threads,
            page_size: 4096,
            seed: 1,
            profile: None,
            plans: &[],
            log_decisions: false,
            schedule: Default::default(),
        };
        let mut trace = MemoryTrace::from_accesses(accesses.iter().copied());
        crate::simulate(&mut trace, &model, &parse_list(list).unwrap(), &ctx, &|_| {}).unwrap()
    }

    /// Thread 0 (node 0) first touches 64 pages (256 KiB, four times the L3), then thread 1
    /// (node 1: the OS spreads two threads over the nodes) reads them over and over; when
    /// `write`, every fourth pass writes instead.
    fn handover(write: bool) -> Vec<Access> {
        let mut v: Vec<Access> = (0..64u64).map(|p| Access::write(0, p * 4096, 8)).collect();
        for i in 0..600_000u64 {
            let addr = (i % 64) * 4096 + 64 * (i / 64 % 64);
            v.push(if write && i / 64 % 4 == 0 { Access::write(1, addr, 8) } else { Access::read(1, addr, 8) });
        }
        v
    }

    #[test]
    fn numa_balancing_moves_pages_after_two_faults_from_one_node() {
        let out = run("os,numa-balancing:scan-delay-ms=0.05,scan-period-ms=0.05", &handover(false));
        let (os, nb) = (&out[0], &out[1]);
        assert_eq!(nb.counts.page_migrations, 64);
        assert!(nb.local_dram_share > os.local_dram_share + 0.5, "{} vs {}", nb.local_dram_share, os.local_dram_share);
        // Nothing moves before the first scan: with the kernel's 1 s delay, nothing at all.
        let out = run("numa-balancing", &handover(false));
        assert_eq!(out[0].counts.page_migrations, 0);
    }

    #[test]
    fn kmaf_moves_pages_once_one_node_dominates_their_faults() {
        let out = run("os,kmaf:window-ms=0.01", &handover(false));
        let (os, kmaf) = (&out[0], &out[1]);
        assert_eq!(kmaf.counts.page_migrations, 64);
        assert!(kmaf.local_dram_share > os.local_dram_share + 0.5);
    }

    #[test]
    fn carrefour_replicates_read_pages_and_moves_written_ones() {
        // Read only by node 1 but first touched by node 0: one node makes all the accesses
        // of the epoch, so the pages move.
        let out = run("carrefour:epoch-ms=1", &handover(false));
        assert_eq!((out[0].counts.page_migrations, out[0].counts.replications), (64, 0));
        // Both nodes read every page: replicated (reads then local on both nodes).
        let mut both = handover(false);
        // Passes over the pages alternate between thread 0 and thread 1.
        for (i, a) in both.iter_mut().enumerate().skip(64) {
            if i / 64 % 2 == 0 {
                a.thread = 0;
            }
        }
        let out = run("os,carrefour:epoch-ms=1", &both);
        assert_eq!(out[1].counts.replications, 64, "one copy per page on node 1");
        assert!(out[1].local_dram_share > out[0].local_dram_share + 0.3);
        // The same with writes: interleaved, never replicated.
        let mut written = handover(true);
        for (i, a) in written.iter_mut().enumerate().skip(64) {
            if i / 64 % 2 == 0 {
                a.thread = 0;
            }
        }
        let out = run("carrefour:epoch-ms=1", &written);
        assert_eq!(out[0].counts.replications, 0);
    }
}

/// A STREAM triad (`a[i] = b[i] + s * c[i]`) of `threads` threads, each on its own slice it
/// first touched, on the PUs given: the triad's time, and the simulation.
fn triad<'m>(m: &'m Model, pus: &[usize]) -> (f64, Sim<'m>) {
    const LINES: u64 = 4096; // per array and thread: 256 KiB, 6 MiB in all, past the L3
    let mut sim = Sim::new(m, 4096, pus, FirstPlacement::FirstTouch);
    let base = |array: u64, t: usize| (array << 32) + ((t as u64) << 24);
    // Started together, each initialising its slices.
    (0..pus.len()).for_each(|t| sim.thread_start(t));
    for array in 0..3 {
        for l in 0..LINES {
            for t in 0..pus.len() {
                sim.access(t, base(array, t) + l * 64, true);
            }
        }
    }
    let warm = sim.time_ns();
    for _ in 0..2 {
        // The threads' elements interleaved, as they run together.
        for l in 0..LINES {
            for e in 0..8 {
                for t in 0..pus.len() {
                    let at = l * 64 + e * 8;
                    sim.access(t, base(1, t) + at, false);
                    sim.access(t, base(2, t) + at, false);
                    sim.access(t, base(0, t) + at, true);
                }
            }
        }
    }
    (sim.time_ns() - warm, sim)
}

/// Four streaming threads (their misses overlapped: `mlp=10`) on one node's four cores need more than its memory carries; on
/// two nodes each memory carries half as much: the packed run is slower, and by the queue
/// alone (without bandwidth limits it is not).
#[test]
fn streaming_threads_packed_on_one_node_are_slower_than_spread_over_two() {
    let spec = "pack:2 numa:1 l3:1(size=1MiB) l2:4(size=256KiB) l1d:1(size=32KiB) core:1 pu:1";
    let (packed, spread) = ([0, 1, 2, 3], [0, 1, 4, 5]);
    let m = prefetching(spec, false);
    // Assumed 2 GB/s a core: 8 GB/s a node, 8 ns a line.
    assert_eq!(m.memory_ns_per_line, 8.0);
    let (tp, sp) = triad(&m, &packed);
    let (ts, ss) = triad(&m, &spread);
    assert!(tp > 1.3 * ts, "packed {tp} ns against spread {ts} ns");
    assert!(sp.stats.bandwidth_waits > 0 && sp.stats.streamed > 0);
    // The packed run cannot beat its node's memory: every line it read or wrote back went
    // through it.
    let lines = sp.stats.dram_local + sp.stats.dram_remote + sp.stats.writebacks;
    assert!(sp.time_ns() >= lines as f64 * m.memory_ns_per_line * 0.99, "{} ns for {lines} lines", sp.time_ns());
    assert!(ss.stats.bandwidth_wait_ns < sp.stats.bandwidth_wait_ns);

    let m = prefetching(spec, true);
    let (tp, sp) = triad(&m, &packed);
    let (ts, _) = triad(&m, &spread);
    assert!(tp < 1.05 * ts, "no limit: packed {tp} ns against spread {ts} ns");
    assert_eq!(sp.stats.bandwidth_waits, 0);
}

/// A stream of misses from DRAM costs its latency over `mlp` once it is under way; a line
/// off any stream costs the whole latency.
#[test]
fn a_sequential_stream_overlaps_its_dram_latency() {
    let m = prefetching("pack:1 numa:1 l1d:1(size=4KiB) core:1 pu:1", true);
    let mut sim = Sim::new(&m, 4096, &[0], FirstPlacement::FirstTouch);
    let first = sim.access(0, 1 << 20, false);
    let next = sim.access(0, (1 << 20) + 64, false);
    let apart = sim.access(0, 5 << 20, false);
    let dram = m.dram_ns[0][0];
    let fixed = m.params.access_ns + m.params.walk_ns;
    assert_eq!(first, fixed + dram);
    assert_eq!(next, m.params.access_ns + dram / m.params.mlp as f64);
    assert_eq!(apart, fixed + dram);
    assert_eq!(sim.stats.streamed, 1);
}
