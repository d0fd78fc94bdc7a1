//! Round trips through every readable format, on random traces (property tests).

use proptest::prelude::*;
use sharemap_trace::{
    Access, Chunk, Event, EventKind, Format, Kind, Metadata, Source, TraceReader, TraceSource, TraceWriter,
};

fn access() -> impl Strategy<Value = Access> {
    (0u32..20, any::<u64>(), prop_oneof![Just(8u32), 1u32..200, 1u32..], any::<bool>()).prop_map(
        |(thread, addr, size, w)| Access { thread, addr, size, kind: if w { Kind::Write } else { Kind::Read } },
    )
}

fn write(path: &std::path::Path, accesses: &[Access], events: &[Event]) {
    let meta = Metadata {
        page_size: 8192,
        ..Metadata::with_source(Source { kind: "test".into(), name: "prop".into(), ..Source::default() })
    };
    let mut w = TraceWriter::create(path, None, meta).unwrap();
    let mut ev = events.iter().peekable();
    for (i, a) in accesses.iter().enumerate() {
        while let Some(e) = ev.next_if(|e| e.at <= i as u64) {
            w.push_event(e).unwrap();
        }
        w.access(*a).unwrap();
    }
    for e in ev {
        w.push_event(e).unwrap();
    }
    w.finish().unwrap();
}

fn read(path: &std::path::Path) -> (Vec<Access>, Vec<Event>, Metadata) {
    let mut r = TraceReader::open(path, None).unwrap();
    let mut c = Chunk::default();
    let (mut a, mut e) = (Vec::new(), Vec::new());
    while r.next_chunk(&mut c).unwrap() {
        a.extend(c.accesses.iter());
        e.extend(c.events.iter().cloned());
    }
    (a, e, r.metadata().clone())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn csv_keeps_every_access(accesses in prop::collection::vec(access(), 0..400)) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.csv");
        write(&p, &accesses, &[]);
        prop_assert_eq!(Format::detect(&p).unwrap(), Format::Csv);
        prop_assert_eq!(read(&p).0, accesses);
    }

    /// Parquet and the native format keep every kind of event, an allocation's size and
    /// site included.
    #[test]
    fn parquet_and_native_keep_accesses_events_and_metadata(
        accesses in prop::collection::vec(access(), 0..400),
        marks in prop::collection::vec((0u64..400, 0..EventKind::ALL.len(), any::<u64>(), "[a-z]{0,5}", any::<(u64, u64)>()), 0..10),
    ) {
        let mut events: Vec<Event> = marks
            .into_iter()
            .filter(|(at, ..)| *at <= accesses.len() as u64)
            .map(|(at, k, arg, label, (size, site))| match EventKind::ALL[k] {
                EventKind::Alloc => Event::alloc(at, 1, arg, size, site, &label),
                kind => Event::new(at, 1, kind, arg, label),
            })
            .collect();
        events.sort_by_key(|e| e.at);
        let d = tempfile::tempdir().unwrap();
        for name in ["t.parquet", "t.trace"] {
            let p = d.path().join(name);
            write(&p, &accesses, &events);
            let (a, e, m) = read(&p);
            prop_assert_eq!(a, accesses.clone());
            prop_assert_eq!(e, events.clone());
            prop_assert_eq!(m.page_size, 8192);
            prop_assert_eq!(m.source.name, "prop");
        }
    }
}

/// A file written by format version 1 (before SIZES/WRITES and packed references) still
/// reads exactly: its Parquet twin, written at the same time, is the independent truth.
#[test]
fn format_version_1_files_still_read() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let (accesses, events, meta) = read(&data.join("v1-phase-change.trace"));
    let (want_accesses, want_events, _) = read(&data.join("v1-phase-change.parquet"));
    assert_eq!(meta.format_version, 1);
    assert_eq!(accesses.len(), 40_000);
    assert_eq!(accesses, want_accesses);
    assert_eq!(events, want_events);
    // The fixture covers what version 1 coded specially: sizes over 127 and far jumps.
    assert!(accesses.iter().any(|a| a.size == 0 || a.size >= 128));
    assert!(accesses.windows(2).any(|w| w[1].addr.abs_diff(w[0].addr) > 1 << 40));
    assert!(events.iter().any(|e| e.kind == EventKind::PhaseChange));
}

/// Rewriting a version-1 file writes the current version with the same content.
#[test]
fn version_1_files_convert_to_the_current_version() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let old = read(&data.join("v1-phase-change.trace"));
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("new.trace");
    write(&p, &old.0, &old.1);
    let new = read(&p);
    assert_eq!(new.2.format_version, sharemap_trace::FORMAT_VERSION);
    assert_eq!((new.0, new.1), (old.0, old.1));
}

/// A Parquet file sharemap wrote never reads back different rows without an error, whichever
/// byte is damaged (the rows' checksum in the key-value metadata catches what Parquet's
/// decoders accept).
#[test]
fn a_damaged_parquet_trace_never_reads_as_other_rows() {
    let accesses: Vec<Access> = (0..3000u64)
        .map(|i| Access {
            thread: (i % 4) as u32,
            addr: 0x1000 + 8 * (i * 7 % 500),
            size: 8,
            kind: if i % 3 == 0 { Kind::Write } else { Kind::Read },
        })
        .collect();
    let d = tempfile::tempdir().unwrap();
    let good = d.path().join("t.parquet");
    write(&good, &accesses, &[]);
    let bytes = std::fs::read(&good).unwrap();
    let bad = d.path().join("bad.parquet");
    let mut detected = 0;
    for i in (4..bytes.len() - 8).step_by(7) {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        std::fs::write(&bad, &b).unwrap();
        let Ok(mut r) = TraceReader::open(&bad, None) else {
            detected += 1;
            continue;
        };
        let mut c = Chunk::default();
        let mut got = Vec::new();
        let read = loop {
            match r.next_chunk(&mut c) {
                Ok(true) => got.extend(c.accesses.iter()),
                Ok(false) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        match read {
            Err(_) => detected += 1,
            Ok(()) => assert_eq!(got, accesses, "flip at byte {i} read as other rows"),
        }
    }
    assert!(detected > 0);
}
