//! Each generator's documented sharing property, checked on the accesses it produces.

use super::*;
use crate::VecSink;
use std::collections::{BTreeMap, BTreeSet};

fn generate(name: &str, threads: u32, accesses: u64, seed: u64) -> VecSink {
    let mut sink = VecSink::default();
    let n = run(find(name).unwrap(), &GenParams::new(threads, accesses, seed), &mut sink).unwrap();
    assert_eq!(n, accesses, "{name} produced {n} accesses");
    sink
}

/// Per page: the set of threads, the first thread, the set of writing threads.
#[derive(Default, Debug)]
struct PageUse {
    threads: BTreeSet<u32>,
    first: u32,
    writers: BTreeSet<u32>,
    accesses: BTreeMap<u32, u64>,
}

fn pages(s: &VecSink, from: usize) -> BTreeMap<u64, PageUse> {
    let mut m: BTreeMap<u64, PageUse> = BTreeMap::new();
    for a in &s.accesses[from..] {
        let e = m.entry(a.addr / 4096).or_insert_with(|| PageUse { first: a.thread, ..Default::default() });
        e.threads.insert(a.thread);
        *e.accesses.entry(a.thread).or_default() += 1;
        if a.kind == Kind::Write {
            e.writers.insert(a.thread);
        }
    }
    m
}

/// Index of the first access after the initialisation phase (the first barrier).
fn after_init(s: &VecSink, name: &str, threads: u32) -> usize {
    // Rebuild the init phase with the run's parameters to learn its length.
    let p = GenParams::new(threads, s.accesses.len() as u64, 0);
    let init = (find(name).unwrap().phases)(p).next().unwrap();
    let len: usize = init.streams.into_iter().map(|(_, s)| s.count()).sum();
    assert!(len < s.accesses.len(), "{name}: init does not fit");
    len
}

fn pairs_sharing(m: &BTreeMap<u64, PageUse>) -> BTreeSet<(u32, u32)> {
    let mut out = BTreeSet::new();
    for u in m.values() {
        for &a in &u.threads {
            for &b in &u.threads {
                if a < b {
                    out.insert((a, b));
                }
            }
        }
    }
    out
}

#[test]
fn every_pattern_is_exact_deterministic_and_seed_dependent() {
    for p in PATTERNS {
        let a = generate(p.name, 4, 20_000, 7);
        let b = generate(p.name, 4, 20_000, 7);
        assert_eq!(a.accesses, b.accesses, "{} not deterministic", p.name);
        assert_eq!(a.events, b.events);
        let c = generate(p.name, 4, 20_000, 8);
        assert_ne!(a.accesses, c.accesses, "{}: the seed changes nothing", p.name);
        // Threads start in creation order, each exactly once, and all exit.
        let starts: Vec<u32> = a.events.iter().filter(|e| e.2 == EventKind::ThreadStart).map(|e| e.1).collect();
        assert_eq!(starts, vec![0, 1, 2, 3], "{}", p.name);
        let exits = a.events.iter().filter(|e| e.2 == EventKind::ThreadExit).count();
        assert_eq!(exits, 4);
    }
}

#[test]
fn each_thread_first_touches_its_own_data() {
    // Every page's first toucher is the thread that writes it during initialisation,
    // for all patterns but init-then-compute (whose point is the opposite).
    for p in PATTERNS.iter().filter(|p| p.name != "init-then-compute") {
        let s = generate(p.name, 4, 60_000, 1);
        let init_len = after_init(&s, p.name, 4);
        let init_pages = pages(&s, 0);
        let init_only = {
            let v = VecSink { accesses: s.accesses[..init_len].to_vec(), ..VecSink::default() };
            pages(&v, 0)
        };
        let mut straddling = 0;
        for (page, u) in &init_pages {
            if let Some(i) = init_only.get(page) {
                if i.threads.len() > 1 {
                    straddling += 1;
                    continue;
                }
                assert_eq!(u.first, i.first, "{}", p.name);
            }
        }
        // matmult's rows are not page aligned: a page may straddle two threads' row blocks,
        // at most one per block boundary of each of A, B and C. Everything else is private.
        let allowed = if p.name == "matmult" { 3 * 3 } else { 0 };
        assert!(straddling <= allowed, "{}: {straddling} pages initialised by several threads", p.name);
    }
}

#[test]
fn private_shares_no_page() {
    let s = generate("private", 8, 200_000, 3);
    assert!(pages(&s, 0).values().all(|u| u.threads.len() == 1));
}

#[test]
fn neighbor_shares_only_with_adjacent_threads() {
    let s = generate("neighbor", 6, 300_000, 3);
    let pairs = pairs_sharing(&pages(&s, 0));
    let expect: BTreeSet<(u32, u32)> = (0..5).map(|t| (t, t + 1)).collect();
    assert_eq!(pairs, expect);
}

#[test]
fn all_to_all_shares_uniformly() {
    let s = generate("all-to-all", 8, 800_000, 3);
    let m = pages(&s, 0);
    assert_eq!(pairs_sharing(&m).len(), 8 * 7 / 2, "every pair shares");
    // Remote reads of x are spread evenly over the other threads' pages.
    let mut counts = vec![vec![0u64; 8]; 8];
    let x_owner = |addr: u64, rows: u64| ((addr - region(0)) / WORD / rows) as usize;
    let rows = words_per_thread_for_test(8, 800_000);
    for a in &s.accesses {
        if a.addr >= region(0) && a.addr < region(1) && a.kind == Kind::Read {
            counts[a.thread as usize][x_owner(a.addr, rows)] += 1;
        }
    }
    let remote: Vec<f64> = (0..8)
        .flat_map(|i| (0..8).filter(move |&j| j != i).map(move |j| (i, j)))
        .map(|(i, j)| counts[i][j] as f64)
        .collect();
    let mean = remote.iter().sum::<f64>() / remote.len() as f64;
    let sd = (remote.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / remote.len() as f64).sqrt();
    assert!(sd / mean < 0.15, "coefficient of variation {}", sd / mean);
}

fn words_per_thread_for_test(threads: u32, accesses: u64) -> u64 {
    let p = GenParams::new(threads, accesses, 0);
    round_up((p.per_thread() / (3 * 8 * 6)).max(p.page_words()), p.page_words())
}

#[test]
fn sor_shares_boundary_rows_between_adjacent_bands() {
    let threads = 4;
    let s = generate("sor", threads, 400_000, 3);
    let start = after_init(&s, "sor", threads);
    let m = pages(&s, start);
    let shared: Vec<&PageUse> = m.values().filter(|u| u.threads.len() > 1).collect();
    // Each interior band boundary contributes two shared rows (one each way).
    assert_eq!(shared.len(), 2 * (threads as usize - 1));
    for u in shared {
        let v: Vec<u32> = u.threads.iter().copied().collect();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1], v[0] + 1, "only adjacent bands share");
        // One thread only reads the row; the other reads and writes it, with 4x... more references.
        assert_eq!(u.writers.len(), 1);
        let owner = *u.writers.iter().next().unwrap();
        let reader = if owner == v[0] { v[1] } else { v[0] };
        assert!(u.accesses[&owner] > u.accesses[&reader]);
    }
}

#[test]
fn matmult_reads_b_from_every_thread() {
    let s = generate("matmult", 4, 300_000, 3);
    let start = after_init(&s, "matmult", 4);
    let b_pages: Vec<&PageUse> = pages(&s, start)
        .into_iter()
        .filter(|(pg, _)| *pg * 4096 >= region(1) && *pg * 4096 < region(2))
        .map(|(_, u)| Box::leak(Box::new(u)) as &PageUse)
        .collect();
    assert!(!b_pages.is_empty());
    assert!(b_pages.iter().all(|u| u.writers.is_empty()), "B is never written after init");
    let all = b_pages.iter().filter(|u| u.threads.len() == 4).count();
    assert!(all * 10 >= b_pages.len() * 9, "{all} of {} B pages read by all threads", b_pages.len());
}

#[test]
fn producer_consumer_shares_within_pairs() {
    let s = generate("producer-consumer", 5, 300_000, 3);
    let pairs = pairs_sharing(&pages(&s, 0));
    assert_eq!(pairs, BTreeSet::from([(0, 1), (2, 3)]));
    // Consumers never write the buffers.
    let m = pages(&s, 0);
    for (pg, u) in &m {
        if *pg * 4096 < region(1) {
            assert!(u.writers.iter().all(|t| t % 2 == 0), "page {pg:#x} written by a consumer");
        }
    }
}

#[test]
fn migratory_pages_visit_every_thread_in_long_runs() {
    let s = generate("migratory", 4, 400_000, 3);
    let m = pages(&s, 0);
    assert!(m.values().all(|u| u.threads.len() == 4), "every object reaches every thread");
    // Runs: consecutive accesses to a page by the same thread are long.
    let mut last: BTreeMap<u64, u32> = BTreeMap::new();
    let mut switches = 0u64;
    for a in &s.accesses {
        if last.insert(a.addr / 4096, a.thread).is_some_and(|t| t != a.thread) {
            switches += 1;
        }
    }
    assert!(switches * 100 < s.accesses.len() as u64, "{switches} owner switches");
}

#[test]
fn read_mostly_table_is_read_by_all_and_rarely_written() {
    let s = generate("read-mostly", 4, 400_000, 3);
    let start = after_init(&s, "read-mostly", 4);
    let table: Vec<_> = s.accesses[start..].iter().filter(|a| a.addr < region(1)).collect();
    let writes = table.iter().filter(|a| a.kind == Kind::Write).count();
    assert!(writes > 0 && writes * 200 < table.len(), "{writes} writes in {} table accesses", table.len());
    let m = pages(&s, start);
    let table_pages: Vec<_> = m.iter().filter(|(pg, _)| **pg * 4096 < region(1)).collect();
    assert!(table_pages.iter().all(|(_, u)| u.threads.len() == 4));
}

#[test]
fn phase_change_marks_levels_growing_eightfold() {
    let s = generate("phase-change", 4, 2_000_000, 3);
    let marks: Vec<&(usize, u32, EventKind, u64, String)> =
        s.events.iter().filter(|e| e.2 == EventKind::PhaseChange).collect();
    assert!(marks.len() >= 4, "{} phase changes", marks.len());
    // Working set of consecutive phases: pages touched between marks.
    let mut sets = Vec::new();
    for w in marks.windows(2) {
        let words: BTreeSet<u64> =
            s.accesses[w[0].0..w[1].0].iter().filter(|a| a.addr < region(1)).map(|a| a.addr).collect();
        sets.push((w[0].4.clone(), words.len() as f64));
    }
    let level = |l: &str| sets.iter().find(|(n, _)| n == l).map(|(_, x)| *x).unwrap();
    let ratio = level("level-1") / level("level-0");
    assert!((ratio - 8.0).abs() < 0.01, "ratio {ratio}");
    // Page owners change with the level: some page has different majority threads across phases.
    let owner_in = |a: usize, b: usize| {
        let v = VecSink { accesses: s.accesses[a..b].to_vec(), ..VecSink::default() };
        pages(&v, 0)
            .into_iter()
            .map(|(p, u)| (p, *u.accesses.iter().max_by_key(|(_, c)| **c).unwrap().0))
            .collect::<BTreeMap<u64, u32>>()
    };
    let fine = owner_in(0, marks[0].0);
    let coarse = owner_in(marks[0].0, marks[1].0);
    assert!(coarse.iter().any(|(p, t)| fine.get(p).is_some_and(|f| f != t)));
}

#[test]
fn init_then_compute_is_first_touched_by_thread_zero() {
    let s = generate("init-then-compute", 4, 200_000, 3);
    let m = pages(&s, 0);
    assert!(m.values().all(|u| u.first == 0));
    let done: Vec<usize> = s.events.iter().filter(|e| e.2 == EventKind::InitDone).map(|e| e.0).collect();
    assert_eq!(done.len(), 1);
    assert!(s.accesses[..done[0]].iter().all(|a| a.thread == 0 && a.kind == Kind::Write));
    let after = pages(&s, done[0]);
    assert!(after.values().all(|u| u.threads.len() == 1));
    assert!(after.values().filter(|u| !u.threads.contains(&0)).count() * 2 > after.len());
}

#[test]
fn random_spreads_over_a_shared_heap() {
    let s = generate("random", 4, 400_000, 3);
    let start = after_init(&s, "random", 4);
    let m = pages(&s, start);
    let shared = m.values().filter(|u| u.threads.len() == 4).count();
    assert!(shared * 10 >= m.len() * 9);
    let writes = s.accesses[start..].iter().filter(|a| a.kind == Kind::Write).count() as f64;
    let frac = writes / (s.accesses.len() - start) as f64;
    assert!((frac - 0.25).abs() < 0.02, "write fraction {frac}");
}

#[test]
fn page_size_shapes_the_layout() {
    // sor rows are one page: with 8 KiB pages a row holds 1024 words.
    let mut sink = VecSink::default();
    let p = GenParams { page_size: 8192, ..GenParams::new(2, 100_000, 1) };
    run(find("sor").unwrap(), &p, &mut sink).unwrap();
    let max_col = sink.accesses.iter().map(|a| (a.addr - region(0)) / WORD % 1024).max().unwrap();
    assert_eq!(max_col, 1023);
}

#[test]
fn bad_parameters_are_rejected() {
    assert!(GenParams::new(0, 10, 1).validate().is_err());
    assert!(GenParams { page_size: 1000, ..GenParams::new(1, 10, 1) }.validate().is_err());
    assert!(GenParams::new(4, 10, 1).validate().is_ok());
}

fn generate_with(name: &str, p: &GenParams) -> VecSink {
    let mut sink = VecSink::default();
    run(find(name).unwrap(), p, &mut sink).unwrap();
    sink
}

fn distinct_pages(s: &VecSink) -> BTreeSet<u64> {
    s.accesses.iter().map(|a| a.addr / 4096).collect()
}

/// A footprint of F pages per thread lays out about F x threads pages, whatever the run's
/// length: the same pages after one iteration as after three.
#[test]
fn the_footprint_sets_the_pages_whatever_the_length() {
    let threads = 4u32;
    for pattern in PATTERNS {
        // A multiplication is n^3 accesses for n^2 words: matmult gets a smaller footprint.
        let pages = if pattern.name == "matmult" { 16 } else { 64 };
        let one = generate_with(pattern.name, &GenParams::sized(threads, pages, 1, 1));
        let three = generate_with(pattern.name, &GenParams::sized(threads, pages, 3, 1));
        let (a, b) = (distinct_pages(&one), distinct_pages(&three));
        assert_eq!(a, b, "{}: the length changed the pages", pattern.name);
        let want = (threads as u64 * pages) as f64;
        let ratio = a.len() as f64 / want;
        assert!((0.95..=1.1).contains(&ratio), "{}: {} pages for {want}", pattern.name, a.len());
        assert!(three.accesses.len() > one.accesses.len(), "{}", pattern.name);
    }
    // Twice the footprint, twice the pages.
    let small = distinct_pages(&generate_with("neighbor", &GenParams::sized(threads, 64, 1, 1))).len();
    let large = distinct_pages(&generate_with("neighbor", &GenParams::sized(threads, 128, 1, 1))).len();
    assert_eq!(large, 2 * small);
}

/// `iterations` counts the phases after the initialisation: phase-change marks each one.
#[test]
fn iterations_count_the_phases_after_the_initialisation() {
    for k in [1u64, 4, 7] {
        let s = generate_with("phase-change", &GenParams::sized(4, 32, k, 1));
        let marks = s.events.iter().filter(|e| e.2 == EventKind::PhaseChange).count() as u64;
        assert_eq!(marks, k);
    }
    // An access limit still cuts the run short.
    let p = GenParams { accesses: 1000, ..GenParams::sized(4, 32, 5, 1) };
    assert_eq!(generate_with("neighbor", &p).accesses.len(), 1000);
}

/// Reuse r makes every access after the initialisation r times in a row: r times as many,
/// each the same thread, address and kind as the one before it r - 1 times out of r.
#[test]
fn reuse_repeats_each_access_after_the_initialisation() {
    let once = generate_with("sor", &GenParams::sized(4, 16, 2, 1));
    let init = after_init_sized(&GenParams::sized(4, 16, 2, 1), "sor");
    for r in [2u32, 5] {
        let p = GenParams { reuse: r, ..GenParams::sized(4, 16, 2, 1) };
        let s = generate_with("sor", &p);
        assert_eq!(s.accesses.len() - init, r as usize * (once.accesses.len() - init));
        assert_eq!(s.accesses[..init], once.accesses[..init], "the initialisation is not repeated");
        let repeats = s.accesses[init..].windows(2).filter(|w| w[0] == w[1]).count();
        let runs = (s.accesses.len() - init) / r as usize;
        assert!(repeats >= runs * (r as usize - 1), "{repeats} repeats in {runs} runs of {r}");
        let mut a: Vec<_> = s.accesses[init..].iter().map(|a| (a.thread, a.addr, a.kind == Kind::Write)).collect();
        let mut b: Vec<_> = once.accesses[init..]
            .iter()
            .flat_map(|a| std::iter::repeat_n((a.thread, a.addr, a.kind == Kind::Write), r as usize))
            .collect();
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }
}

fn after_init_sized(p: &GenParams, name: &str) -> usize {
    let init = (find(name).unwrap().phases)(*p).next().unwrap();
    init.streams.into_iter().map(|(_, s)| s.count()).sum()
}

/// A 4-byte word: every access is 4 bytes, a page holds 1024 of them (sor's rows are 1024
/// columns), and the footprint's pages are the same.
#[test]
fn the_word_size_shapes_accesses_and_rows() {
    let p = GenParams { word: 4, ..GenParams::sized(2, 8, 1, 1) };
    let s = generate_with("sor", &p);
    assert!(s.accesses.iter().all(|a| a.size == 4 && a.addr % 4 == 0));
    let max_col = s.accesses.iter().map(|a| (a.addr - region(0)) / 4 % 1024).max().unwrap();
    assert_eq!(max_col, 1023);
    let eight = generate_with("sor", &GenParams::sized(2, 8, 1, 1));
    assert_eq!(distinct_pages(&s), distinct_pages(&eight));
    for pattern in PATTERNS {
        let s = generate_with(pattern.name, &GenParams { word: 4, ..GenParams::sized(2, 8, 1, 1) });
        // all-to-all's column indices are 4 bytes whatever the word.
        assert!(s.accesses.iter().all(|a| a.size == 4), "{}", pattern.name);
    }
}

#[test]
fn sizes_without_an_end_or_out_of_range_are_rejected() {
    let unbounded = GenParams { iterations: None, ..GenParams::sized(4, 8, 1, 1) };
    assert_eq!(unbounded.validate(), Err(GenError::Unbounded));
    assert_eq!(
        GenParams { footprint: Some(0), ..GenParams::sized(4, 8, 1, 1) }.validate().unwrap_err(),
        GenError::Footprint { pages: 0, threads: 4 }
    );
    assert!(GenParams::sized(4096, 1 << 20, 1, 1).validate().is_err());
    assert_eq!(GenParams { word: 3, ..GenParams::new(4, 10, 1) }.validate(), Err(GenError::Word(3)));
    assert_eq!(GenParams { word: 128, ..GenParams::new(4, 10, 1) }.validate(), Err(GenError::Word(128)));
    assert_eq!(GenParams { reuse: 0, ..GenParams::new(4, 10, 1) }.validate(), Err(GenError::Reuse(0)));
    assert!(GenParams::sized(64, 4096, 10, 1).validate().is_ok());
}

/// neighbor's halo: each adjacent pair shares `halo` pages of each side's block in each of
/// the two grids (they swap roles every iteration): 4 x halo x (threads - 1) pages.
#[test]
fn the_halo_sets_how_much_neighbours_share() {
    for halo in [1u64, 3] {
        let p = GenParams { halo, ..GenParams::sized(4, 16, 2, 1) };
        let s = generate_with("neighbor", &p);
        let shared = pages(&s, 0).values().filter(|u| u.threads.len() > 1).count() as u64;
        assert_eq!(shared, 4 * halo * 3, "halo {halo}");
    }
    assert_eq!(GenParams { halo: 0, ..GenParams::sized(4, 16, 2, 1) }.validate(), Err(GenError::Halo));
}
