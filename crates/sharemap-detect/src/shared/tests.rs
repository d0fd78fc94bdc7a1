use super::*;
use proptest::prelude::*;
use sharemap_trace::{Access, CodeSite, MemoryTrace, ProgramInfo, StaticObject};
use std::collections::{BTreeMap, BTreeSet};

const TABLE: u64 = 0x60_0000;
const HEAP: u64 = 0x1000_0000;

fn site(pc: u64, line: u32) -> CodeSite {
    CodeSite { pc, function: "main".into(), file: "/src/arrays.c".into(), line }
}

/// Four threads: a static table all read, per-thread counters side by side in one line, one
/// sum every thread adds to, and page-aligned private slices.
fn arrays() -> MemoryTrace {
    let program = ProgramInfo {
        statics: vec![StaticObject { name: "table".into(), addr: TABLE, size: 4096 }],
        code: vec![site(0x500, 10), site(0x600, 20), site(0x700, 30), site(0x800, 40)],
    };
    let mut t = MemoryTrace::new(Metadata { program: Some(program), ..Metadata::default() });
    let (counters, sum, slices) = (HEAP, HEAP + 0x1000, HEAP + 0x10_000);
    t.alloc(0, counters, 32, 0x500, "calloc");
    t.alloc(0, sum, 8, 0x600, "malloc");
    t.alloc(0, slices, 4 * 4096, 0x700, "malloc");
    for round in 0..100u64 {
        for th in 0..4u32 {
            let th64 = th as u64;
            t.access(Access::read(th, TABLE + (round * 64 + th64 * 8) % 4096, 8));
            t.event(th, EventKind::AccessSite, 0x800, "");
            t.access(Access::write(th, counters + 8 * th64, 8));
            t.access(Access::read(th, sum, 8));
            t.access(Access::write(th, sum, 8));
            t.access(Access::write(th, slices + 4096 * th64 + (round * 8) % 4096, 8));
        }
    }
    t
}

fn find<'a>(w: &'a WhatIsShared, name: &str) -> &'a SharedObject {
    w.objects.iter().find(|o| o.name.starts_with(name)).unwrap_or_else(|| panic!("no {name} in {:#?}", w.objects))
}

#[test]
fn each_object_has_the_sharing_it_was_built_with() {
    let w = WhatIsShared::of(&mut arrays()).unwrap();
    assert!(w.named);
    assert_eq!(w.allocations, 3);
    let table = find(&w, "table");
    assert_eq!(table.kind, ObjectKind::Static);
    // A line a round, wrapping after 64: every line of the table, each read by all four.
    assert_eq!(table.lines, ByClass { read_shared: 64, ..ByClass::default() });
    assert_eq!(table.threads, 4);
    let counters = find(&w, "calloc at arrays.c:10 (main)");
    assert_eq!(counters.kind, ObjectKind::Heap);
    assert_eq!(counters.lines, ByClass { false_shared: 1, ..ByClass::default() });
    assert_eq!(counters.line_accesses.false_shared, 400);
    assert_eq!(counters.bytes, 32);
    let sum = find(&w, "malloc at arrays.c:20");
    assert_eq!(sum.lines, ByClass { true_shared: 1, ..ByClass::default() });
    assert_eq!((sum.accesses, sum.writes), (800, 400));
    let slices = find(&w, "malloc at arrays.c:30");
    assert_eq!(slices.lines.shared(), 0);
    assert_eq!(slices.lines.private, 4 * 13);
    assert_eq!((slices.pages, slices.shared_pages), (4, 0));
    // Conflicts first: the true and the false sharing lead, the read-only table follows.
    let order: Vec<&str> = w.objects.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(order[2], "table", "{order:?}");
    assert_eq!(w.lines.total(), 64 + 1 + 1 + 52);
    // The sampled accesses (the counter writes) name line 40 on the falsely shared line.
    assert_eq!(w.samples, 400);
    assert_eq!(counters.code, vec![CodeCount { site: site(0x800, 40), samples: 400 }]);
    assert_eq!(w.code.len(), 1);
    assert_eq!(w.code[0].samples, ByClass { false_shared: 400, ..ByClass::default() });
}

/// Memory freed and allocated again belongs to the new object: the old one's thread and the
/// new one's do not share it.
#[test]
fn a_freed_line_starts_afresh_for_the_next_object() {
    let mut t = MemoryTrace::new(Metadata::default());
    t.alloc(0, HEAP, 64, 0x10, "malloc");
    t.access(Access::write(0, HEAP, 8));
    t.event(0, EventKind::Free, HEAP, "free");
    t.alloc(1, HEAP, 64, 0x20, "malloc");
    t.access(Access::write(1, HEAP, 8));
    let w = WhatIsShared::of(&mut t).unwrap();
    assert_eq!(w.frees, 1);
    assert_eq!(w.lines, ByClass { private: 2, ..ByClass::default() });
    assert_eq!(w.objects.len(), 2);
    // Without the free, the second allocation replaces the first all the same.
    let mut t = MemoryTrace::new(Metadata::default());
    t.alloc(0, HEAP, 64, 0x10, "malloc");
    t.access(Access::write(0, HEAP, 8));
    t.alloc(1, HEAP, 64, 0x20, "malloc");
    t.access(Access::write(1, HEAP, 8));
    assert_eq!(WhatIsShared::of(&mut t).unwrap().lines.private, 2);
    // One allocation site called twice is one row.
    let mut t = MemoryTrace::new(Metadata::default());
    for k in 0..2 {
        t.alloc(k, HEAP + k as u64 * 4096, 64, 0x10, "malloc");
        t.access(Access::write(k, HEAP + k as u64 * 4096, 8));
    }
    let w = WhatIsShared::of(&mut t).unwrap();
    assert_eq!(w.objects.len(), 1);
    assert_eq!((w.objects[0].allocations, w.objects[0].bytes, w.objects[0].threads), (2, 128, 2));
    assert_eq!(w.objects[0].name, "malloc at 0x10");
}

/// Two small objects side by side in one line, each written by its own thread: the line is
/// falsely shared, and counts for both objects (once in the trace's totals).
#[test]
fn a_line_two_objects_share_counts_for_both() {
    let mut t = MemoryTrace::new(Metadata::default());
    t.alloc(0, HEAP, 16, 0x10, "malloc");
    t.alloc(0, HEAP + 16, 16, 0x20, "malloc");
    for _ in 0..10 {
        t.access(Access::write(1, HEAP, 8));
        t.access(Access::write(2, HEAP + 16, 8));
    }
    let w = WhatIsShared::of(&mut t).unwrap();
    assert_eq!(w.lines, ByClass { false_shared: 1, ..ByClass::default() });
    assert_eq!(w.objects.len(), 2);
    for o in &w.objects {
        assert_eq!((o.lines.false_shared, o.accesses, o.threads), (1, 10, 1), "{o:?}");
    }
}

/// Two calls on one source line are two rows, told apart by their order in the code.
#[test]
fn calls_on_one_source_line_are_numbered() {
    let program = ProgramInfo { statics: Vec::new(), code: vec![site(0x900, 7), site(0x910, 7)] };
    let mut t = MemoryTrace::new(Metadata { program: Some(program), ..Metadata::default() });
    t.alloc(0, HEAP + 4096, 64, 0x910, "malloc");
    t.alloc(0, HEAP, 64, 0x900, "malloc");
    t.access(Access::write(0, HEAP, 8));
    t.access(Access::write(1, HEAP + 4096, 8));
    let w = WhatIsShared::of(&mut t).unwrap();
    let mut names: Vec<&str> = w.objects.iter().map(|o| o.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["malloc at arrays.c:7 (main), call 1 of 2", "malloc at arrays.c:7 (main), call 2 of 2"]);
    assert_eq!(w.object_of_page(HEAP / 4096).unwrap().name, "malloc at arrays.c:7 (main), call 1 of 2");
}

/// Without allocation records, addresses are grouped in ranges: adjacent 1 MiB blocks
/// together, distant ones apart.
#[test]
fn unnamed_addresses_are_grouped_by_ranges() {
    let mut t = MemoryTrace::new(Metadata::default());
    for k in 0..3u64 {
        t.access(Access::read(0, 0x4000_0000 + k * (1 << 20), 8));
        t.access(Access::read(1, 0x4000_0000 + k * (1 << 20), 8));
    }
    t.access(Access::write(1, 0x9000_0000, 8));
    let w = WhatIsShared::of(&mut t).unwrap();
    assert!(!w.named);
    assert_eq!(w.objects.len(), 2, "{:#?}", w.objects);
    let first = &w.objects[0];
    assert_eq!(first.kind, ObjectKind::Unknown);
    assert_eq!(first.lines.read_shared, 3);
    assert_eq!(first.name, "0x40000000+3.0 MiB (no allocation record)");
    assert_eq!(w.objects[1].threads, 1);
}

/// An access across a line's end counts in both lines, in the words it touches.
#[test]
fn an_access_across_lines_touches_both() {
    let mut t = MemoryTrace::new(Metadata::default());
    t.access(Access::write(0, 60, 8));
    t.access(Access::read(1, 64, 4));
    t.access(Access::read(1, 0, 4));
    let w = WhatIsShared::of(&mut t).unwrap();
    // Line 0: thread 0 wrote its last word, thread 1 read its first: false sharing. Line 1:
    // both touched word 0, which thread 0 wrote: true sharing.
    assert_eq!(w.lines, ByClass { true_shared: 1, false_shared: 1, ..ByClass::default() });
}

/// The definitions, applied to each line by brute force.
fn by_definition(accesses: &[(u32, u64, bool)]) -> ByClass {
    let mut lines: BTreeMap<u64, Vec<(u32, u64, bool)>> = BTreeMap::new();
    for &(th, addr, write) in accesses {
        lines.entry(addr / 64).or_default().push((th, addr % 64 / 8, write));
    }
    let mut out = ByClass::default();
    for touches in lines.values() {
        let threads: BTreeSet<u32> = touches.iter().map(|t| t.0).collect();
        let any_write = touches.iter().any(|t| t.2);
        let truly = touches.iter().any(|&(a, w, write)| write && touches.iter().any(|&(b, w2, _)| b != a && w2 == w));
        let class = match (threads.len() > 1, truly, any_write) {
            (false, _, _) => LineClass::Private,
            (true, true, _) => LineClass::TrueShared,
            (true, false, true) => LineClass::FalseShared,
            (true, false, false) => LineClass::ReadShared,
        };
        out.add(class, 1);
    }
    out
}

proptest! {
    #[test]
    fn lines_are_classified_as_the_definitions_say(
        accesses in prop::collection::vec((0u32..3, 0u64..256, any::<bool>()), 1..200)
    ) {
        let accesses: Vec<(u32, u64, bool)> = accesses.into_iter().map(|(t, a, w)| (t, a / 8 * 8, w)).collect();
        let mut t = MemoryTrace::new(Metadata::default());
        for &(th, addr, write) in &accesses {
            t.access(Access { thread: th, addr, size: 8, kind: if write { sharemap_trace::Kind::Write } else { sharemap_trace::Kind::Read } });
        }
        let w = WhatIsShared::of(&mut t).unwrap();
        prop_assert_eq!(w.lines, by_definition(&accesses));
    }
}
