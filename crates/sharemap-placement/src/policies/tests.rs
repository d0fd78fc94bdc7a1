use super::*;
use crate::cost::Costs;
use crate::optimal::Optimal;
use crate::page::{Page, Ref};
use proptest::prelude::*;
use sharemap_machine::CostParams;

fn ctx<'a>(
    nodes: usize,
    costs: Costs,
    init_done: Option<u64>,
    phases: &'a [u64],
    annotations: &'a [u64],
) -> Context<'a> {
    Context {
        nodes,
        costs,
        page_size: 4096,
        pages: 1,
        init_done,
        phase_changes: phases,
        annotations,
        refs_per_ms: 10.0,
        seed: 1,
    }
}

fn page(refs: &[Ref]) -> Page<'_> {
    Page::new(5, 3, 0, refs, &[])
}

fn run(name: &str, settings: &[&str], refs: &[Ref], c: &Context) -> Tally {
    let mut s = Settings::default();
    for x in settings {
        s.add(x).unwrap();
    }
    build(find(name).unwrap(), &s, &[]).unwrap().place_page(&page(refs), c)
}

fn butterfly() -> Costs {
    Costs::new(&CostParams { r: 15.0, big_r: 100.0, g: None, big_g: None })
}

fn reads(node: u16, from: u64, n: u64) -> Vec<Ref> {
    (from..from + n).map(|i| Ref::read(i, node)).collect()
}

fn writes(node: u16, from: u64, n: u64) -> Vec<Ref> {
    (from..from + n).map(|i| Ref::write(i, node)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    /// Policies that answer a private page (one node references it) without replaying it
    /// give what replaying it gives, whatever the positions, writes, marks, costs and
    /// TLB events (from that node).
    #[test]
    fn the_private_page_shortcut_changes_nothing(
        node in 0u16..4,
        refs in prop::collection::vec((1u64..3000, any::<bool>()), 1..300),
        events in prop::collection::vec(0u64..400_000, 0..40),
        init in prop::option::of(0u64..300_000),
        marks in prop::collection::vec(0u64..300_000, 0..6),
        global in any::<bool>(),
    ) {
        let mut at = 0;
        let refs: Vec<Ref> = refs.iter().map(|&(step, w)| { at += step; Ref { at, node, write: w, sampled: w } }).collect();
        let mut events: Vec<Ref> = events.iter().map(|&at| Ref::read(at, node)).collect();
        events.sort_by_key(|e| e.at);
        let mut marks = marks;
        marks.sort();
        let costs = if global {
            Costs::new(&CostParams { r: 5.0, big_r: 40.0, g: Some(2.0), big_g: Some(30.0) })
        } else {
            butterfly()
        };
        let c = ctx(4, costs, init, &marks, &marks);
        let page = page(&refs).with_events(&events);
        prop_assert_eq!(page.only_node(), Some(node));
        for info in POLICIES {
            for events_from in ["sammu.events=tlb", "sammu.events=proxy"] {
                let mut s = Settings::default();
                s.add(events_from).unwrap();
                let policy = build(info, &s, &[]).unwrap();
                prop_assert_eq!(policy.place_page(&page, &c), policy.place_page(&page.replayed(), &c), "{}", info.name);
            }
        }
    }

    /// No policy beats the off-line optimum, on any trace, with or without global memory.
    #[test]
    fn no_policy_beats_the_optimum(
        nodes in 2usize..5,
        global in any::<bool>(),
        refs in prop::collection::vec((0u16..4, prop::bool::weighted(0.3)), 1..300),
        init in prop::option::of(0u64..300),
        phases in prop::collection::vec(0u64..300, 0..3),
    ) {
        let costs = if global {
            Costs::new(&CostParams { r: 5.0, big_r: 40.0, g: Some(2.0), big_g: Some(30.0) })
        } else {
            butterfly()
        };
        let refs: Vec<Ref> = refs.iter().enumerate()
            .map(|(i, &(n, w))| Ref { at: i as u64 * 3, node: n % nodes as u16, write: w, sampled: i % 7 == 0 })
            .collect();
        let mut phases = phases;
        phases.sort();
        let c = ctx(nodes, costs, init, &phases, &phases);
        let best = Optimal::new(nodes, costs).solve(&refs).cost;
        for info in POLICIES {
            let t = build(info, &Settings::default(), &[]).unwrap().place_page(&page(&refs), &c);
            prop_assert_eq!(t.references(), refs.len() as u64, "{}", info.name);
            prop_assert!(t.cost(&costs) >= best - 1e-9, "{} cost {} < optimum {}", info.name, t.cost(&costs), best);
        }
    }
}

#[test]
fn first_touch_rehomes_after_init_done() {
    let mut refs = writes(0, 0, 10);
    refs.extend(reads(1, 10, 10));
    let c = ctx(2, butterfly(), None, &[], &[]);
    let plain = run("first-touch", &[], &refs, &c);
    assert_eq!((plain.local, plain.remote, plain.new_locations()), (10, 10, 0));
    let c = ctx(2, butterfly(), Some(10), &[], &[]);
    // Linux's first touch knows nothing of the annotation.
    let linux = run("first-touch", &[], &refs, &c);
    assert_eq!((linux.local, linux.remote, linux.new_locations()), (10, 10, 0));
    let honoured = run("first-touch", &["first-touch.after-init=1"], &refs, &c);
    assert_eq!((honoured.local, honoured.remote, honoured.node_moves), (20, 0, 1));
}

#[test]
fn static_spreads() {
    let refs = reads(0, 0, 4);
    let c = ctx(4, butterfly(), None, &[], &[]);
    // touch_rank 3 -> node 3; page number 5 -> node 1; bind node 0.
    assert_eq!(run("round-robin", &[], &refs, &c).remote, 4);
    assert_eq!(run("interleave", &[], &refs, &c).remote, 4);
    assert_eq!(run("bind", &[], &refs, &c).local, 4);
    assert_eq!(run("bind", &["bind.node=2"], &refs, &c).remote, 4);
}

#[test]
fn first_n_fills_waits_for_n() {
    let mut refs = reads(0, 0, 3);
    refs.extend(reads(1, 3, 20));
    let c = ctx(2, butterfly(), None, &[], &[]);
    let t = run("first-n-fills", &["first-n-fills.n=5", "first-n-fills.fills-kb=0"], &refs, &c);
    // Node 1's 5th reference makes it home: 4 remote first, then the move.
    assert_eq!((t.remote, t.node_moves, t.local), (4, 1, 3 + 16));
}

/// Counting fills, only the references the partition pass found missing the per-thread cache
/// (`sampled`) count: node 1's 20 references of which every fourth is a fill reach n = 5 at
/// its 17th reference, not its 5th.
#[test]
fn first_n_fills_counts_only_fills() {
    let mut refs = reads(0, 0, 3);
    refs.extend((3..23).map(|i| Ref { sampled: (i - 3) % 4 == 0, ..Ref::read(i, 1) }));
    let c = ctx(2, butterfly(), None, &[], &[]);
    let t = run("first-n-fills", &["first-n-fills.n=5"], &refs, &c);
    assert_eq!((t.remote, t.node_moves, t.local), (16, 1, 3 + 4));
    let counting_all = run("first-n-fills", &["first-n-fills.n=5", "first-n-fills.fills-kb=0"], &refs, &c);
    assert_eq!(counting_all.remote, 4);
}

#[test]
fn next_touch_and_migrate_on_phase_follow_annotations() {
    let mut refs = writes(0, 0, 5);
    refs.extend(writes(1, 5, 5));
    let marks = [5u64];
    let c = ctx(2, butterfly(), None, &marks, &marks);
    assert_eq!(run("next-touch", &[], &refs, &c).node_moves, 1);
    assert_eq!(run("migrate-on-phase", &[], &refs, &c).node_moves, 1);
    let c = ctx(2, butterfly(), None, &[], &marks);
    // A roi-begin style annotation: next-touch reacts, migrate-on-phase does not.
    assert_eq!(run("next-touch", &[], &refs, &c).node_moves, 1);
    assert_eq!(run("migrate-on-phase", &[], &refs, &c).node_moves, 0);
}

#[test]
fn numa_balancing_needs_two_faults_from_the_same_node() {
    // 10 refs/ms; scans at 10 (delay), 20, 30... All of the page's accesses come from node 1.
    let refs: Vec<Ref> = std::iter::once(Ref::write(0, 0)).chain((1..60).map(|i| Ref::read(i, 1))).collect();
    let c = ctx(2, butterfly(), None, &[], &[]);
    let t = run("numa-balancing", &["numa-balancing.scan-delay-ms=1", "numa-balancing.scan-period-ms=1"], &refs, &c);
    // Faults at 10 (recorded) and 20 (same node: migrate); remote from 1 to 19.
    assert_eq!(t.node_moves, 1);
    assert_eq!(t.remote, 19);
}

#[test]
fn sammu_acts_on_the_tlb_events_of_the_page() {
    let c = ctx(2, butterfly(), None, &[], &[]);
    let mut s = Settings::default();
    s.add("sammu.nt=3").unwrap();
    let policy = build(find("sammu").unwrap(), &s, &[]).unwrap();
    // Node 0 writes the page, node 1 reads it 20 times; node 1's TLB events arrive at
    // positions 5, 7 (from other pages' accesses) and 9 (its own access saturating).
    let mut refs = vec![Ref::write(0, 0)];
    refs.extend((1..=20).map(|i| Ref::read(i, 1)));
    let events = [Ref::read(5, 1), Ref::read(7, 1), Ref::read(9, 1)];
    let t = policy.place_page(&page(&refs).with_events(&events), &c);
    // NC[1] reaches NT = 3 at the event of position 9, after that access: 9 remote reads.
    assert_eq!((t.node_moves, t.remote, t.local), (1, 9, 12));
    // Without events nothing moves, however much node 1 reads.
    assert_eq!(policy.place_page(&page(&refs), &c).node_moves, 0);
    // Node 0's events in between hold node 1 back (counters move both ways).
    let mixed = [Ref::read(5, 1), Ref::read(6, 0), Ref::read(7, 1), Ref::read(9, 1)];
    assert_eq!(policy.place_page(&page(&refs).with_events(&mixed), &c).node_moves, 0);
}

#[test]
fn sammu_proxy_migrates_at_the_threshold() {
    let c = ctx(2, butterfly(), None, &[], &[]);
    // Node 1 comes back every 2000 references: each return is a TLB event for it.
    let mut refs = vec![Ref::write(0, 0)];
    refs.extend((1..=12).map(|i| Ref::read(i * 2000, 1)));
    let t = run("sammu", &["sammu.events=proxy"], &refs, &c);
    // Its first access is no event; returns 1..10 bring NC[1] to 10 = NT: migrate.
    assert_eq!(t.node_moves, 1);
    assert_eq!(t.remote, 10);
    // Node 0 returning as often keeps node 1 from getting NT ahead.
    let mut both = vec![Ref::write(0, 0)];
    for i in 1..=12u64 {
        both.push(Ref::read(i * 2000, 1));
        both.push(Ref::read(i * 2000 + 1000, 0));
    }
    assert_eq!(run("sammu", &["sammu.events=proxy"], &both, &c).node_moves, 0);
    // A burst of accesses saturates the access counter every `burst` accesses.
    let burst: Vec<Ref> = std::iter::once(Ref::write(0, 0)).chain((1..=40).map(|i| Ref::read(i, 1))).collect();
    let t = run("sammu", &["sammu.events=proxy", "sammu.burst=4", "sammu.nt=3"], &burst, &c);
    // Events at its 4th, 8th and 12th access: the 12th is already local.
    assert_eq!((t.node_moves, t.remote), (1, 11));
}

#[test]
fn kmaf_moves_on_a_clear_majority() {
    // Window 1 ms = 10 refs: node 1 faults once per window, node 0 once at the start.
    let refs: Vec<Ref> = std::iter::once(Ref::read(0, 0)).chain((1..100).map(|i| Ref::read(i, 1))).collect();
    let c = ctx(2, butterfly(), None, &[], &[]);
    let t = run("kmaf", &["kmaf.window-ms=1"], &refs, &c);
    // Node 1's faults: 1 at window 0, then one per window; it needs > 2 x (1 + 1) = 4: the 5th fault (at 40).
    assert_eq!(t.node_moves, 1);
    assert_eq!(t.remote, 40 - 1);
}

#[test]
fn ace_freezes_in_global_memory_after_four_invalidations() {
    let costs = Costs::new(&CostParams { r: 5.0, big_r: 40.0, g: Some(2.0), big_g: Some(30.0) });
    let c = ctx(2, costs, None, &[], &[]);
    let refs: Vec<Ref> = (0..20).map(|i| Ref::write(i, (i % 2) as u16)).collect();
    let t = run("ace", &[], &refs, &c);
    // Writes 0..3 each move the page to the writer (4 invalidations: the first out of global
    // memory costs G, the others R); write 4 freezes it in global memory (G), then every
    // write costs g.
    assert_eq!((t.global_moves, t.node_moves), (2, 3));
    assert_eq!(t.local, 4);
    assert_eq!(t.global, 16);
}

#[test]
fn delay_waits_c_references_before_replicating() {
    let costs = Costs::new(&CostParams { r: 5.0, big_r: 40.0, g: Some(2.0), big_g: Some(30.0) });
    let c = ctx(2, costs, None, &[], &[]);
    let refs = reads(1, 0, 150);
    let t = run("delay", &[], &refs, &c);
    // 99 global reads, then the 100th replicates to node 1: it and the rest are local.
    assert_eq!((t.global, t.local, t.replications), (99, 51, 1));
    let ace = run("ace", &[], &refs, &c);
    assert_eq!((ace.global, ace.local), (0, 150));
    // A node writing on and on gets its copy after c writes too.
    let w = run("delay", &[], &writes(1, 0, 150), &c);
    assert_eq!((w.global, w.local, w.global_moves), (99, 51, 1));
}

/// Delay's countdown lives in the TLB entry of the node counting: only a write that takes its
/// mapping away (an invalidation) restarts it. Here node 0 holds the page's one copy and
/// writes it in the middle of node 1's countdown: nothing is invalidated, node 1's 100th
/// read replicates the page.
#[test]
fn delay_counts_survive_a_write_that_invalidates_nothing() {
    let c = ctx(2, butterfly(), None, &[], &[]);
    let mut refs = writes(0, 0, 1);
    refs.extend(reads(1, 1, 60));
    refs.push(Ref::write(61, 0));
    refs.extend(reads(1, 62, 60));
    let t = run("delay", &[], &refs, &c);
    // Node 1: 99 remote reads, then its 100th replicates: it and the 20 after are local, as
    // are node 0's two writes. (A restart at the write: no copy at all.)
    assert_eq!((t.replications, t.remote, t.local), (1, 99, 2 + 21));
    // A write that does invalidate (node 0 writing while node 1 holds a copy) restarts it.
    let mut refs = writes(0, 0, 1);
    refs.extend(reads(1, 1, 100)); // copy at the 100th
    refs.push(Ref::write(101, 0)); // invalidates node 1's copy
    refs.extend(reads(1, 102, 150));
    let t = run("delay", &[], &refs, &c);
    assert_eq!(t.replications, 2, "{t:?}");
    assert_eq!(t.remote, 99 + 99);
}

proptest! {
    /// On a machine with global memory ACE, Delay and PLATINUM start a page in global memory
    /// (seed 004's ACE): on a page one node references, none of them has anything to freeze
    /// or defrost, and PLATINUM pays what ACE pays to bring it out.
    #[test]
    fn on_global_memory_platinum_starts_where_ace_does(
        node in 0u16..4,
        refs in prop::collection::vec(any::<bool>(), 1..300),
    ) {
        let costs = Costs::new(&CostParams { r: 5.0, big_r: 40.0, g: Some(2.0), big_g: Some(30.0) });
        let c = ctx(4, costs, None, &[], &[]);
        let refs: Vec<Ref> = refs.iter().enumerate().map(|(i, &w)| Ref { at: i as u64, node, write: w, sampled: false }).collect();
        let ace = run("ace", &[], &refs, &c);
        let platinum = run("platinum", &[], &refs, &c);
        prop_assert_eq!(ace.cost(&costs), platinum.cost(&costs));
        prop_assert!(platinum.global_moves == 1, "{:?}", platinum);
    }
}

#[test]
fn platinum_freezes_and_defrosts() {
    let c = ctx(2, butterfly(), None, &[], &[]);
    // t1 = 1 ms = 10 refs, t2 = 10 ms = 100 refs.
    let set = ["platinum.t1-ms=1", "platinum.t2-ms=10"];
    let mut refs = vec![Ref::write(0, 0), Ref::write(1, 1), Ref::read(2, 0)];
    // Node 0 reads within t1 of node 1's invalidating write: frozen at node 1.
    refs.extend(reads(0, 3, 50));
    let t = run("platinum", &set, &refs, &c);
    assert_eq!(t.node_moves, 1);
    assert_eq!(t.remote, 51);
    // After the defrost at 100, node 0's next read replicates the page.
    refs.extend(reads(0, 120, 5));
    let t = run("platinum", &set, &refs, &c);
    assert_eq!((t.node_moves, t.replications, t.remote), (2, 1, 51));
}

#[test]
fn replicate_counter_interrupt_copies_after_n() {
    let c = ctx(2, butterfly(), None, &[], &[]);
    let mut refs = vec![Ref::write(0, 0)];
    refs.extend(reads(1, 1, 10));
    let t = run(
        "replicate-counter-interrupt",
        &["replicate-counter-interrupt.n=4", "replicate-counter-interrupt.fills-kb=0"],
        &refs,
        &c,
    );
    assert_eq!((t.remote, t.replications, t.local), (3, 1, 1 + 7));
    // The counter policy only copies at the next mapping, after an invalidation.
    let mut again = refs.clone();
    again.push(Ref::write(11, 0));
    again.extend(reads(1, 12, 3));
    let t = run("replicate-counter", &["replicate-counter.n=4", "replicate-counter.fills-kb=0"], &again, &c);
    assert_eq!((t.replications, t.remote), (1, 10));
}

/// The policy homes a page by the references its profile marked (`sampled`, which the
/// partition pass sets from the profile: here one in two, at even positions).
/// A mapping is a TLB entry (seed 003): node 1 makes 4 references, its entry is evicted (an
/// event on the page), and its next reference maps the page again with a copy. Without the
/// TLB (`tlb=0`) the mapping lasts, and no copy comes.
#[test]
fn replication_counts_mappings_as_tlb_entries() {
    let c = ctx(2, butterfly(), None, &[], &[]);
    let mut refs = vec![Ref::write(0, 0)];
    refs.extend(reads(1, 1, 4));
    refs.extend(reads(1, 10, 5));
    let evicted = [Ref::read(7, 1)];
    let set = ["replicate-counter.n=4", "replicate-counter.fills-kb=0"];
    let mut s = Settings::default();
    set.iter().for_each(|x| s.add(x).unwrap());
    let policy = build(find("replicate-counter").unwrap(), &s, &[]).unwrap();
    let t = policy.place_page(&page(&refs).with_events(&evicted), &c);
    assert_eq!((t.replications, t.remote, t.local), (1, 4, 1 + 5));
    s.add("replicate-counter.tlb=0").unwrap();
    let policy = build(find("replicate-counter").unwrap(), &s, &[]).unwrap();
    let t = policy.place_page(&page(&refs).with_events(&evicted), &c);
    assert_eq!((t.replications, t.remote), (0, 9));
}

#[test]
fn marathe_uses_the_majority_of_samples() {
    let c = ctx(2, butterfly(), None, &[], &[]);
    let mut refs = reads(0, 0, 3);
    refs.extend(reads(1, 3, 10));
    let refs: Vec<Ref> = refs.into_iter().map(|r| Ref { sampled: r.at % 2 == 0, ..r }).collect();
    let t = run("marathe", &["marathe.source=every", "marathe.every=2"], &refs, &c);
    // Samples at 0, 2 (node 0) and 4..12 (5 of node 1): node 1 from the start, for free.
    assert_eq!((t.local, t.remote, t.new_locations(), t.profile_samples), (10, 3, 0, 7));
    // No sample at all: first touch.
    let unsampled: Vec<Ref> = refs.iter().map(|r| Ref { sampled: false, ..*r }).collect();
    let t = run("marathe", &[], &unsampled, &c);
    assert_eq!((t.local, t.remote, t.profile_samples), (3, 10, 0));
}

#[test]
fn carrefour_replicates_read_shared_pages() {
    let c = ctx(2, butterfly(), None, &[], &[]);
    let mut refs = vec![Ref::write(0, 0)];
    // Epochs of 20 refs: the first has a write (interleave: page 5 -> node 1), the second
    // is read by both nodes only (replicate, decided when the third starts).
    for i in 1..60u64 {
        refs.push(Ref::read(i, (i % 2) as u16));
    }
    let t = run("carrefour", &["carrefour.epoch-ms=2", "carrefour.min-accesses=4"], &refs, &c);
    assert_eq!((t.node_moves, t.replications), (2, 1));
}

#[test]
fn settings_are_checked() {
    let mut s = Settings::default();
    assert!(s.add("delay.c=10").is_ok());
    assert!(s.add("delay.x=1").unwrap_err().to_string().contains("has no parameter 'x'"));
    assert!(s.add("nope.c=1").unwrap_err().to_string().contains("unknown policy"));
    assert!(s.add("delay").is_err());
    let mut s = Settings::default();
    s.add("delay.c=abc").unwrap();
    assert!(build(find("delay").unwrap(), &s, &[]).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A policy whose row does not declare `Caps::moves` never moves or copies a page, on any
    /// references, annotations or phases: the demo and the reports rely on the flag to say
    /// which policies could have moved.
    #[test]
    fn policies_not_declared_moving_never_move(
        refs in prop::collection::vec((0u16..4, any::<bool>()), 1..300),
        init in prop::option::of(0u64..300),
        phase in 0u64..300,
    ) {
        let refs: Vec<Ref> = refs
            .iter()
            .enumerate()
            .map(|(i, &(node, write))| if write { Ref::write(i as u64, node) } else { Ref::read(i as u64, node) })
            .collect();
        let phases = [phase];
        let c = ctx(4, butterfly(), init, &phases, &phases);
        for row in POLICIES.iter().filter(|p| !p.caps.moves) {
            let t = run(row.name, &[], &refs, &c);
            prop_assert_eq!(t.node_moves + t.global_moves + t.replications, 0, "{} moved", row.name);
        }
    }
}
