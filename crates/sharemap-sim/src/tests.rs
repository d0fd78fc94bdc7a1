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

#[test]
fn writes_ping_ponging_between_packages_move_the_line_each_time() {
    let m = model(TINY);
    // Thread 0 on package 0, thread 1 on package 1.
    let mut sim = Sim::new(&m, 4096, &[0, 4], FirstPlacement::FirstTouch);
    for _ in 0..10 {
        sim.access(0, 0x1000, true);
        sim.access(1, 0x1000, true);
    }
    let s = &sim.stats;
    // The first write comes from DRAM; each of the 19 later ones takes the line from the
    // other package's core, invalidating it there (and the other package's L3 copy).
    assert_eq!(s.dram_local + s.dram_remote, 1);
    assert_eq!(s.transfers_remote, 19);
    assert_eq!(s.invalidations_remote, 19 + 19);
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
        paired.access(1, 64, false);
    }
    assert!(paired.time_ns() > 1.9 * alone.time_ns());
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

/// Random accesses of 8 threads to a few lines, with thread and page moves mixed in.
fn ops() -> impl Strategy<Value = Vec<(u8, u8, bool, u8)>> {
    proptest::collection::vec((0u8..8, 0u8..48, any::<bool>(), 0u8..40), 1..400)
}

fn run_checked(spec: &str, ops: &[(u8, u8, bool, u8)]) -> Result<(), TestCaseError> {
    let m = model(spec);
    let pus: Vec<usize> = (0..8).collect();
    let mut sim = Sim::new(&m, 512, &pus, FirstPlacement::FirstTouch);
    for (i, &(t, l, write, extra)) in ops.iter().enumerate() {
        // Lines 0..48 over 6 pages of 512 bytes.
        sim.access(t as usize, l as u64 * 64, write);
        match extra {
            0 => sim.move_thread(t as usize, (t as usize + i) % m.pus()),
            1 => sim.move_page((l / 8) as u64, i % m.nodes, t as usize),
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
        run_checked(TINY, &ops)?;
    }

    /// The same on a machine with a cache shared below the last level (two cores per L2,
    /// as Opteron modules) and on one without any cache.
    #[test]
    fn coherence_holds_with_shared_l2_and_without_caches(ops in ops()) {
        run_checked("pack:2 numa:1 l3:1(size=2KiB) l2:2(size=512) l1d:2(size=128) core:1 pu:1", &ops)?;
        run_checked("numa:4 pu:2", &ops)?;
    }
}
