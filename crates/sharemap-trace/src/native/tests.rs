use super::*;
use crate::batch::Chunk;
use crate::error::TraceError;
use crate::model::{Access, Event, EventKind, Kind, Metadata};
use crate::source::TraceSource;
use proptest::prelude::*;
use std::io::Write;

fn write_trace(accesses: &[Access], events: &[(u64, Event)], chunk: usize) -> Vec<u8> {
    let mut w = NativeWriter::with_options(Vec::new(), Metadata::default(), chunk, 3).unwrap();
    let mut ev = events.iter().peekable();
    for (i, a) in accesses.iter().enumerate() {
        while let Some((_, e)) = ev.next_if(|(at, _)| *at <= i as u64) {
            w.event(e.thread, e.kind, e.arg, &e.label).unwrap();
        }
        w.push(*a).unwrap();
    }
    for (_, e) in ev {
        w.event(e.thread, e.kind, e.arg, &e.label).unwrap();
    }
    w.finish().unwrap().0
}

fn save(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(bytes).unwrap();
    f.flush().unwrap();
    f
}

fn read_all(path: &std::path::Path) -> Result<(Vec<Access>, Vec<Event>, NativeReader), TraceError> {
    let mut r = NativeReader::open(path)?;
    let mut chunk = Chunk::default();
    let (mut acc, mut evs) = (Vec::new(), Vec::new());
    while r.next_chunk(&mut chunk)? {
        acc.extend(chunk.accesses.iter());
        evs.extend(chunk.events.iter().cloned());
    }
    Ok((acc, evs, r))
}

fn access_strategy() -> impl Strategy<Value = Access> {
    (0u32..70, any::<u64>(), prop_oneof![Just(1u32), Just(4), Just(8), 0u32..u32::MAX], any::<bool>()).prop_map(
        |(thread, addr, size, w)| Access { thread, addr, size, kind: if w { Kind::Write } else { Kind::Read } },
    )
}

fn event_strategy(max_at: u64) -> impl Strategy<Value = (u64, Event)> {
    (0..=max_at, 0u32..70, 0usize..EventKind::ALL.len(), any::<u64>(), "[a-z\u{e9}]{0,6}")
        .prop_map(|(at, thread, k, arg, label)| (at, Event::new(at, thread, EventKind::ALL[k], arg, label)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn native_round_trip_is_lossless(
        accesses in prop::collection::vec(access_strategy(), 0..600),
        events in prop::collection::vec(event_strategy(600), 0..20),
        chunk in 1usize..200,
    ) {
        let mut events = events;
        events.retain(|(at, _)| *at <= accesses.len() as u64);
        events.sort_by_key(|(at, _)| *at);
        let bytes = write_trace(&accesses, &events, chunk);
        let f = save(&bytes);
        let (got, got_events, r) = read_all(f.path()).unwrap();
        prop_assert_eq!(&got, &accesses);
        let want: Vec<Event> = events.into_iter().map(|(_, e)| e).collect();
        prop_assert_eq!(got_events, want);
        prop_assert_eq!(r.end(), &DataEnd::Complete);
        let span = accesses.iter().map(|a| a.thread + 1).max().unwrap_or(0);
        prop_assert!(r.metadata().threads >= span);
    }
}

/// Accesses walking a few streams per thread, as programs do: each stream advances by the
/// access size or by a small stride, with occasional jumps, so deltas are often zero.
fn streams_strategy() -> impl Strategy<Value = Vec<Access>> {
    prop::collection::vec(
        (
            0u32..5,
            0usize..6,
            prop_oneof![Just(0i64), -64i64..64, any::<i64>()],
            prop_oneof![Just(8u32), 1u32..300],
            any::<bool>(),
        ),
        0..700,
    )
    .prop_map(|steps| {
        let mut at = [[0x7000_0000u64; 6]; 5];
        steps
            .into_iter()
            .map(|(thread, stream, jump, size, w)| {
                let a = &mut at[thread as usize][stream];
                *a = a.wrapping_add(size as u64).wrapping_add(jump as u64);
                Access { thread, addr: *a, size, kind: if w { Kind::Write } else { Kind::Read } }
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn stream_shaped_traces_round_trip(accesses in streams_strategy(), chunk in 1usize..300) {
        let f = save(&write_trace(&accesses, &[], chunk));
        prop_assert_eq!(read_all(f.path()).unwrap().0, accesses);
    }
}

fn sample(n: usize) -> Vec<Access> {
    (0..n)
        .map(|i| Access {
            thread: (i / 7 % 4) as u32,
            addr: 0x1000 + 8 * i as u64,
            size: 8,
            kind: if i % 3 == 0 { Kind::Write } else { Kind::Read },
        })
        .collect()
}

#[test]
fn every_truncation_point_keeps_the_complete_chunks() {
    let accesses = sample(1000);
    let bytes = write_trace(&accesses, &[], 100);
    let full = save(&bytes);
    let r = NativeReader::open(full.path()).unwrap();
    let chunk_ends: Vec<u64> =
        r.chunks().iter().map(|c| c.offset + CHUNK_HEADER_LEN as u64 + c.header.payload_len as u64).collect();
    let data_start = r.chunks()[0].offset;
    for cut in data_start..bytes.len() as u64 {
        let f = save(&bytes[..cut as usize]);
        let (got, _, r) = read_all(f.path()).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let complete = chunk_ends.iter().filter(|&&e| e <= cut).count();
        assert_eq!(got.len(), complete * 100, "cut at {cut}");
        assert_eq!(&got[..], &accesses[..got.len()]);
        let expect_end = if complete == 10 {
            *chunk_ends.last().unwrap()
        } else if complete == 0 {
            data_start
        } else {
            chunk_ends[complete - 1]
        };
        assert_eq!(r.end(), &DataEnd::Truncated { offset: expect_end }, "cut at {cut}");
    }
}

#[test]
fn a_flipped_byte_is_detected_and_located() {
    let accesses = sample(500);
    let bytes = write_trace(&accesses, &[], 100);
    let r = NativeReader::open(save(&bytes).path()).unwrap();
    let chunks: Vec<ChunkInfo> = r.chunks().to_vec();
    for c in &chunks {
        for delta in [4u64, 20, CHUNK_HEADER_LEN as u64 + 3] {
            let mut bad = bytes.clone();
            bad[(c.offset + delta) as usize] ^= 0x55;
            let f = save(&bad);
            let err = match read_all(f.path()) {
                Err(e) => e,
                Ok(_) => panic!("flip at chunk {} + {delta} went unnoticed", c.offset),
            };
            match err {
                TraceError::Corrupt { offset, .. } => assert_eq!(offset, c.offset),
                other => panic!("unexpected error {other}"),
            }
            assert_eq!(err_code(&bad), 2);
        }
    }
}

fn err_code(bytes: &[u8]) -> i32 {
    let f = save(bytes);
    read_all(f.path()).err().map(|e| e.exit_code()).unwrap_or(0)
}

#[test]
fn garbage_never_panics() {
    let bytes = write_trace(&sample(300), &[], 64);
    let mut rng = 0x9e3779b97f4a7c15u64;
    for _ in 0..400 {
        let mut bad = bytes.clone();
        for _ in 0..3 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let i = (rng % bad.len() as u64) as usize;
            bad[i] = (rng >> 32) as u8;
        }
        let f = save(&bad);
        let _ = read_all(f.path());
    }
    for junk in [&b""[..], b"SHAREMAP", b"not a trace at all", &[0u8; 100]] {
        let f = save(junk);
        assert!(read_all(f.path()).is_err());
    }
}

/// The version-1 decoding path is as robust as the current one.
#[test]
fn garbage_in_a_version_1_file_never_panics() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1-phase-change.trace");
    let bytes = std::fs::read(path).unwrap();
    let start = NativeReader::open(save(&bytes).path()).unwrap().chunks()[0].offset as usize;
    let mut rng = 0x2545f4914f6cdd1du64;
    for _ in 0..300 {
        let mut bad = bytes.clone();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let i = start + (rng % (bad.len() - start) as u64) as usize;
        bad[i] = (rng >> 32) as u8;
        let _ = read_all(save(&bad).path());
    }
}

/// Fields a hostile file could set are checked: header flags, the footer's length, a chunk's
/// thread span (under a valid checksum), metadata values an analysis would divide by.
#[test]
fn fields_outside_the_checksums_are_checked() {
    let bytes = write_trace(&sample(300), &[], 100);
    let corrupt_at = |bad: &[u8]| match read_all(save(bad).path()) {
        Err(TraceError::Corrupt { offset, what, .. }) => (offset, what),
        other => panic!("expected corruption, got {:?}", other.map(|r| r.0.len())),
    };
    let mut flags = bytes.clone();
    flags[10] = 1;
    assert_eq!(corrupt_at(&flags).0, 10);

    let footer = u64::from_le_bytes(bytes[bytes.len() - 16..bytes.len() - 8].try_into().unwrap()) as usize;
    for delta in [1u32, 1000] {
        let mut len = bytes.clone();
        let v = u32::from_le_bytes(len[footer + 8..footer + 12].try_into().unwrap());
        len[footer + 8..footer + 12].copy_from_slice(&(v + delta).to_le_bytes());
        assert!(corrupt_at(&len).1.contains("footer (length"), "footer length +{delta}");
    }

    let r = NativeReader::open(save(&bytes).path()).unwrap();
    let at = r.chunks()[1].offset as usize;
    let mut span = bytes.clone();
    span[at + 24..at + 28].copy_from_slice(&u32::MAX.to_le_bytes());
    let crc = crc32fast::hash(&span[at + 8..at + 40]);
    span[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(corrupt_at(&span), (at as u64, "chunk header (impossible values)".to_string()));

    for (key, value) in [("page_size", (1u64 << 63) + 1), ("page_size", 0), ("threads", u32::MAX as u64)] {
        let json_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        let mut meta: serde_json::Value = serde_json::from_slice(&bytes[20..20 + json_len]).unwrap();
        meta[key] = value.into();
        let bad = with_header_metadata(&bytes, &serde_json::to_vec(&meta).unwrap()).unwrap();
        let (offset, what) = corrupt_at(&bad);
        assert!(offset == 20 && what.starts_with("metadata"), "{key}={value}: {what}");
    }
}

#[test]
fn an_unknown_format_version_is_refused_by_name() {
    let mut bytes = write_trace(&sample(10), &[], 100);
    bytes[8..10].copy_from_slice(&99u16.to_le_bytes());
    let err = read_all(save(&bytes).path()).err().expect("version 99 must be refused");
    assert!(err.to_string().contains("unsupported trace format version 99"), "{err}");
}

#[test]
fn parallel_decode_matches_sequential() {
    let accesses = sample(10_000);
    let f = save(&write_trace(&accesses, &[], 333));
    let r = NativeReader::open(f.path()).unwrap();
    let parts = r.par_map_chunks(|c| c.accesses.iter().collect::<Vec<_>>()).unwrap();
    assert_eq!(parts.concat(), accesses);
}

/// Runs in parts: each part's chunks in trace order, parts joined in index order give the
/// whole trace, for any number of parts (more parts than chunks included).
#[test]
fn parts_are_contiguous_runs_in_trace_order() {
    let accesses = sample(10_000);
    let f = save(&write_trace(&accesses, &[], 333));
    for parts in [1, 2, 3, 7, 31, 100] {
        let mut r = NativeReader::open(f.path()).unwrap();
        let seen = std::sync::Mutex::new(vec![Vec::new(); parts]);
        r.for_each_chunk_in_parts(parts, &|part, chunk| {
            seen.lock().unwrap()[part].push((chunk.first_access, chunk.accesses.iter().collect::<Vec<_>>()));
            Ok(())
        })
        .unwrap();
        let seen = seen.into_inner().unwrap();
        let used = seen.iter().filter(|s| !s.is_empty()).count();
        assert_eq!(used, parts.min(31), "{parts} parts");
        assert!(seen[..used].iter().all(|s| !s.is_empty()), "{parts} parts: runs fill the first indices");
        let chunks: Vec<_> = seen.into_iter().flatten().collect();
        assert!(chunks.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(chunks.into_iter().flat_map(|c| c.1).collect::<Vec<_>>(), accesses);
    }
}

/// Writers running on the threads of a rayon pool (traces written from a parallel loop)
/// encode in place rather than wait for pool tasks queued behind them: every thread of the
/// pool writing at once must not stall it.
#[test]
fn writers_on_the_pool_itself_finish() {
    let accesses: Vec<Access> = (0..50_000u64)
        .map(|i| Access { thread: (i % 3) as u32, addr: 0x1000 + 8 * (i % 977), size: 8, kind: Kind::Read })
        .collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let traces: Vec<Vec<u8>> = pool.install(|| {
        use rayon::prelude::*;
        (0..4).into_par_iter().map(|_| write_trace(&accesses, &[], 1000)).collect()
    });
    for bytes in traces {
        let f = save(&bytes);
        assert_eq!(read_all(f.path()).unwrap().0, accesses);
    }
}

/// An irregular solver's kernel: `val[j]` and `col[j]` read in order, `x[col[j]]` at random
/// over 32 MB, all three arrays of one heap within 4 bytes of each other. The random gather
/// keeps to a slot of its own, so the two sequential streams cost nothing: about 4 bytes per
/// gather, under 1.6 per access (3.3 when the gather took over their slot). Read back exact.
#[test]
fn a_random_gather_does_not_break_sequential_streams() {
    let (val, col, x) = (0x7f00_0000_0000u64, 0x7f00_0080_0000u64, 0x7f00_0100_0000u64);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut accesses = Vec::new();
    for j in 0..100_000u64 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        accesses.push(Access::read(0, val + 8 * j, 8));
        accesses.push(Access::read(0, col + 4 * j, 4));
        accesses.push(Access::read(0, x + 8 * (seed % (1 << 22)), 8));
    }
    let bytes = write_trace(&accesses, &[], DEFAULT_CHUNK_ACCESSES);
    let per_access = bytes.len() as f64 / accesses.len() as f64;
    assert!(per_access < 1.6, "{per_access:.2} bytes/access");
    assert_eq!(read_all(save(&bytes).path()).unwrap().0, accesses);
}

/// `bytes` with chunk `k`'s header field at `field` (a byte offset in the header) set to
/// `value` and the header's checksum recomputed, as a deliberate edit would leave it.
fn with_chunk_field(bytes: &[u8], k: usize, field: usize, value: u32) -> (Vec<u8>, u64) {
    let r = NativeReader::open(save(bytes).path()).unwrap();
    let at = r.chunks()[k].offset as usize;
    let mut bad = bytes.to_vec();
    bad[at + field..at + field + 4].copy_from_slice(&value.to_le_bytes());
    let crc = crc32fast::hash(&bad[at + 8..at + CHUNK_HEADER_LEN]);
    bad[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
    (bad, at as u64)
}

/// A chunk whose payload seems to run past the end, in a file whose end record is intact,
/// is corruption at that chunk, never a shorter trace; without the end record (a writer
/// stopped), the same bytes are a trace truncated there.
#[test]
fn a_complete_file_its_chunks_contradict_is_corrupt_not_truncated() {
    let bytes = write_trace(&sample(60_000), &[], 16_384);
    for (k, payload_len) in [(0, 0x7fff_ffff), (2, 0x1001), (2, u32::MAX)] {
        let (bad, at) = with_chunk_field(&bytes, k, 8, payload_len);
        let r = NativeReader::open(save(&bad).path());
        let (len, past) = (bad.len() as u64, at + CHUNK_HEADER_LEN as u64 + payload_len as u64);
        if past <= len {
            continue; // a length inside the file is caught as a bad magic after it
        }
        match r {
            Err(TraceError::Corrupt { offset, what, .. }) => {
                assert_eq!(offset, at, "chunk {k}: {what}");
                assert!(what.contains(&format!("chunk {k}")) && what.contains("intact footer"), "{what}");
            }
            other => panic!("chunk {k}, payload_len {payload_len:#x}: read as {:?}", other.map(|r| r.access_count())),
        }
        // Cut the end record off: now it is a truncated trace, readable up to chunk k.
        let footer = u64::from_le_bytes(bad[bad.len() - 16..bad.len() - 8].try_into().unwrap()) as usize;
        let r = NativeReader::open(save(&bad[..footer]).path()).unwrap();
        assert_eq!(r.end(), &DataEnd::Truncated { offset: at });
        assert_eq!(r.chunks().len(), k);
    }
}

/// A chunk header's event count that disagrees with the events it holds is corruption.
#[test]
fn a_chunk_header_miscounting_its_events_is_corrupt() {
    let events: Vec<(u64, Event)> =
        (0..5).map(|i| (i * 100, Event::new(0, 0, EventKind::PhaseChange, i, ""))).collect();
    let bytes = write_trace(&sample(1_000), &events, 300);
    for events in [0u32, 1, 1000] {
        let (bad, _) = with_chunk_field(&bytes, 0, 20, events);
        assert!(
            matches!(read_all(save(&bad).path()), Err(TraceError::Corrupt { .. })),
            "events = {events} in chunk 0's header was read"
        );
        // Truncated (no footer to compare with), the chunk's own events still disagree.
        let footer = u64::from_le_bytes(bad[bad.len() - 16..bad.len() - 8].try_into().unwrap()) as usize;
        assert!(
            matches!(read_all(save(&bad[..footer]).path()), Err(TraceError::Corrupt { .. })),
            "events = {events}, truncated, was read"
        );
    }
}
