//! Reader: `open` checks the header and walks the chunk headers (no decompression) to
//! learn where every chunk is and whether the file ends cleanly. Chunks are then decoded
//! one at a time in order, or in parallel by position.

use super::*;
use crate::batch::Chunk;
use crate::error::{Result, TraceError};
use crate::model::{Event, MAX_THREADS, Metadata};
use crate::source::TraceSource;
use rayon::prelude::*;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Where a chunk sits in the file.
#[derive(Clone, Copy, Debug)]
pub struct ChunkInfo {
    pub offset: u64,
    pub header: ChunkHeader,
}

/// How the data ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataEnd {
    /// Footer and trailer present: the writer finished.
    Complete,
    /// The file stops before the footer: data ends at `offset`, after the last complete chunk.
    Truncated { offset: u64 },
}

pub struct NativeReader {
    path: PathBuf,
    file: File,
    meta: Metadata,
    chunks: Vec<ChunkInfo>,
    end: DataEnd,
    footer: Option<Footer>,
    next: usize,
    /// Format version from the file header; chunks are decoded by its rules.
    version: u16,
    decoder: ChunkDecoder,
    payload: Vec<u8>,
}

impl NativeReader {
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let len = file.metadata().map_err(|e| TraceError::io(path, e))?.len();
        let io = |e| TraceError::io(path, e);

        let mut fixed = [0u8; FILE_HEADER_LEN];
        if len < FILE_HEADER_LEN as u64 {
            return Err(TraceError::corrupt(path, len, "file header (file too short)"));
        }
        file.read_exact_at(&mut fixed, 0).map_err(io)?;
        if &fixed[0..8] != FILE_MAGIC {
            return Err(TraceError::invalid(path, "not a sharemap trace (bad magic)"));
        }
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        let Some(decoder) = ChunkDecoder::for_version(version) else {
            return Err(TraceError::invalid(
                path,
                format!(
                    "unsupported trace format version {version} (this sharemap reads 1 to {})",
                    crate::model::FORMAT_VERSION
                ),
            ));
        };
        // No flag is defined yet: a set bit is damage (or a newer writer this reader cannot follow).
        let flags = u16::from_le_bytes([fixed[10], fixed[11]]);
        if flags != 0 {
            return Err(TraceError::corrupt(path, 10, format!("file header (unknown flags {flags:#06x})")));
        }
        let json_len = u32::from_le_bytes(fixed[12..16].try_into().unwrap()) as u64;
        let json_crc = u32::from_le_bytes(fixed[16..20].try_into().unwrap());
        if FILE_HEADER_LEN as u64 + json_len > len {
            return Err(TraceError::corrupt(path, FILE_HEADER_LEN as u64, "file header (metadata cut short)"));
        }
        let mut json = vec![0u8; json_len as usize];
        file.read_exact_at(&mut json, FILE_HEADER_LEN as u64).map_err(io)?;
        if crc32fast::hash(&json) != json_crc {
            return Err(TraceError::corrupt(path, FILE_HEADER_LEN as u64, "metadata (checksum mismatch)"));
        }
        let mut meta: Metadata = serde_json::from_slice(&json)
            .map_err(|e| TraceError::corrupt(path, FILE_HEADER_LEN as u64, format!("metadata ({e})")))?;

        meta.check().map_err(|what| TraceError::corrupt(path, FILE_HEADER_LEN as u64, format!("metadata ({what})")))?;

        let (chunks, end, footer) = scan(path, &file, FILE_HEADER_LEN as u64 + json_len, len)?;
        match &footer {
            Some(f) => meta = f.metadata.clone(),
            None => {
                let span = chunks.iter().map(|c| c.header.thread_span).max().unwrap_or(0);
                meta.threads = meta.threads.max(span);
            }
        }
        Ok(NativeReader {
            path: path.to_path_buf(),
            file,
            meta,
            chunks,
            end,
            footer,
            next: 0,
            version,
            decoder,
            payload: Vec::new(),
        })
    }

    pub fn chunks(&self) -> &[ChunkInfo] {
        &self.chunks
    }
    pub fn end(&self) -> &DataEnd {
        &self.end
    }
    pub fn footer(&self) -> Option<&Footer> {
        self.footer.as_ref()
    }
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accesses in the complete chunks.
    pub fn access_count(&self) -> u64 {
        self.chunks.iter().map(|c| c.header.accesses as u64).sum()
    }

    /// The trace's region and phase marks: the footer's list, or, in a file without it, the
    /// marks among the events of the chunks that hold some.
    pub fn marks(&self) -> Result<Vec<Event>> {
        if let Some(marks) = self.footer.as_ref().and_then(|f| f.marks.as_ref()) {
            return Ok(marks.clone());
        }
        self.events_where(|e| super::is_mark(e.kind))
    }

    /// The trace's events, decoding only the chunks that hold some (their headers say).
    pub fn events(&self) -> Result<Vec<Event>> {
        self.events_where(|_| true)
    }

    /// The events `keep` keeps, chunk by chunk: a recording's millions of allocations need
    /// not be held to find its few marks.
    pub fn events_where(&self, keep: impl Fn(&Event) -> bool + Sync) -> Result<Vec<Event>> {
        let with_events: Vec<&ChunkInfo> = self.chunks.iter().filter(|c| c.header.events > 0).collect();
        let parts: Vec<Vec<Event>> = with_events
            .par_iter()
            .map_init(
                || (ChunkDecoder::for_version(self.version).expect("checked at open"), Vec::new(), Chunk::default()),
                |(decoder, payload, chunk), info| {
                    read_chunk(&self.path, &self.file, info, decoder, payload, chunk)?;
                    // Copied out, not taken: a chunk's event buffer holds up to 16,384
                    // events' room, which each chunk's few marks must not keep.
                    Ok(chunk.events.iter().filter(|e| keep(e)).cloned().collect::<Vec<Event>>())
                },
            )
            .collect::<Result<_>>()?;
        Ok(parts.concat())
    }

    /// Decodes every chunk in parallel (rayon), calling `f` on each; results come back in
    /// file order. Each worker holds one chunk at a time, so memory stays bounded.
    pub fn par_map_chunks<R, F>(&self, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&Chunk) -> R + Sync,
    {
        self.chunks
            .par_iter()
            .map_init(
                || (ChunkDecoder::for_version(self.version).expect("checked at open"), Vec::new(), Chunk::default()),
                |(decoder, payload, chunk), info| {
                    read_chunk(&self.path, &self.file, info, decoder, payload, chunk)?;
                    Ok(f(chunk))
                },
            )
            .collect()
    }
}

impl TraceSource for NativeReader {
    fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// Decodes the next chunk in file order into `out`; `false` when there are no more.
    fn next_chunk(&mut self, out: &mut Chunk) -> Result<bool> {
        let Some(info) = self.chunks.get(self.next).copied() else { return Ok(false) };
        self.next += 1;
        read_chunk(&self.path, &self.file, &info, &mut self.decoder, &mut self.payload, out)?;
        Ok(true)
    }

    fn access_count_hint(&self) -> Option<u64> {
        Some(self.access_count())
    }

    fn truncated_at(&self) -> Option<u64> {
        match self.end {
            DataEnd::Truncated { offset } => Some(offset),
            DataEnd::Complete => None,
        }
    }

    /// Each worker decodes chunks and hands them to `sink` itself.
    fn for_each_chunk_unordered(&mut self, sink: &(dyn Fn(usize, &Chunk) -> Result<()> + Sync)) -> Result<()> {
        let rest = &self.chunks[self.next..];
        self.next = self.chunks.len();
        let (path, file, version) = (&self.path, &self.file, self.version);
        rest.par_iter().try_for_each_init(
            || (ChunkDecoder::for_version(version).expect("checked at open"), Vec::new(), Chunk::default()),
            |(decoder, payload, chunk), info| {
                read_chunk(path, file, info, decoder, payload, chunk)?;
                sink(rayon::current_thread_index().unwrap_or(0), chunk)
            },
        )
    }

    /// Runs of about equal accesses, each decoded and handed out by one worker.
    fn for_each_chunk_in_parts(
        &mut self,
        parts: usize,
        sink: &(dyn Fn(usize, &Chunk) -> Result<()> + Sync),
    ) -> Result<()> {
        let rest = &self.chunks[self.next..];
        self.next = self.chunks.len();
        let runs = split_runs(rest, parts);
        let (path, file, version) = (&self.path, &self.file, self.version);
        runs.par_iter().enumerate().try_for_each(|(part, run)| {
            let mut decoder = ChunkDecoder::for_version(version).expect("checked at open");
            let (mut payload, mut chunk) = (Vec::new(), Chunk::default());
            run.iter().try_for_each(|info| {
                read_chunk(path, file, info, &mut decoder, &mut payload, &mut chunk)?;
                sink(part, &chunk)
            })
        })
    }

    /// Decodes a window of chunks on rayon's pool while `sink` takes the previous window
    /// on this thread: the caller's analysis never waits for zstd.
    fn for_each_chunk(&mut self, sink: &mut dyn FnMut(&Chunk) -> Result<()>) -> Result<()> {
        let rest = &self.chunks[self.next..];
        self.next = self.chunks.len();
        let window = 16 * rayon::current_num_threads().max(1);
        let slot = || DecodeSlot {
            decoder: ChunkDecoder::for_version(self.version).expect("checked at open"),
            payload: Vec::new(),
            chunk: Chunk::default(),
        };
        let (mut ready, mut next): (Vec<DecodeSlot>, Vec<DecodeSlot>) =
            ((0..window).map(|_| slot()).collect(), (0..window).map(|_| slot()).collect());
        let mut windows = rest.chunks(window);
        let Some(first) = windows.next() else { return Ok(()) };
        self.decode_window(first, &mut ready)?;
        let mut ready_len = first.len();
        loop {
            let upcoming = windows.next();
            let mut decoded = Ok(());
            let mut taken = Ok(());
            rayon::in_place_scope(|s| {
                if let Some(infos) = upcoming {
                    let (me, next, decoded) = (&*self, &mut next, &mut decoded);
                    s.spawn(move |_| *decoded = me.decode_window(infos, next));
                }
                taken = ready[..ready_len].iter().try_for_each(|slot| sink(&slot.chunk));
            });
            taken?;
            decoded?;
            let Some(infos) = upcoming else { return Ok(()) };
            std::mem::swap(&mut ready, &mut next);
            ready_len = infos.len();
        }
    }
}

/// A decoder with its buffers, one per chunk of a decode-ahead window.
struct DecodeSlot {
    decoder: ChunkDecoder,
    payload: Vec<u8>,
    chunk: Chunk,
}

impl NativeReader {
    /// Decodes `infos` into the first slots, in parallel.
    fn decode_window(&self, infos: &[ChunkInfo], slots: &mut [DecodeSlot]) -> Result<()> {
        slots[..infos.len()].par_iter_mut().zip(infos).try_for_each(|(slot, info)| {
            read_chunk(&self.path, &self.file, info, &mut slot.decoder, &mut slot.payload, &mut slot.chunk)
        })
    }
}

/// At most `parts` contiguous runs of `chunks`, cut where the accesses so far pass each
/// multiple of total / parts; no run is empty.
fn split_runs(chunks: &[ChunkInfo], parts: usize) -> Vec<&[ChunkInfo]> {
    let total: u64 = chunks.iter().map(|c| c.header.accesses as u64).sum();
    let parts = parts.clamp(1, chunks.len().max(1)) as u64;
    let mut runs = Vec::new();
    let (mut start, mut seen) = (0, 0u64);
    for (i, c) in chunks.iter().enumerate() {
        seen += c.header.accesses as u64;
        let cut = (runs.len() as u64 + 1) * total / parts;
        if seen >= cut && (runs.len() as u64) + 1 < parts {
            runs.push(&chunks[start..=i]);
            start = i + 1;
        }
    }
    if start < chunks.len() {
        runs.push(&chunks[start..]);
    }
    runs
}

fn read_chunk(
    path: &Path,
    file: &File,
    info: &ChunkInfo,
    decoder: &mut ChunkDecoder,
    payload: &mut Vec<u8>,
    out: &mut Chunk,
) -> Result<()> {
    let h = &info.header;
    payload.resize(h.payload_len as usize, 0);
    file.read_exact_at(payload, info.offset + CHUNK_HEADER_LEN as u64).map_err(|e| TraceError::io(path, e))?;
    if crc32fast::hash(payload) != h.payload_crc {
        return Err(TraceError::corrupt(path, info.offset, "chunk (checksum mismatch)"));
    }
    decoder.decode(h, payload, out).map_err(|what| TraceError::corrupt(path, info.offset, format!("chunk ({what})")))
}

/// Whether the file ends in an intact trailer naming `footer_start`.
fn trailer_points_to(file: &File, len: u64, footer_start: u64) -> std::io::Result<bool> {
    if len < footer_start + 12 + 16 {
        return Ok(false);
    }
    let mut trailer = [0u8; 16];
    file.read_exact_at(&mut trailer, len - 16)?;
    Ok(&trailer[8..16] == TRAILER_MAGIC && u64::from_le_bytes(trailer[0..8].try_into().unwrap()) == footer_start)
}

/// Where the footer starts when the file ends in an intact end record: a trailer naming a
/// footer whose length reaches exactly to the trailer and whose checksum holds. A file
/// stopped by a crash has none (its last bytes are a chunk's), so a file with one is
/// complete, and a chunk that seems to run past the end is damage, not truncation.
fn intact_end(file: &File, len: u64) -> std::io::Result<Option<u64>> {
    if len < 12 + 16 {
        return Ok(None);
    }
    let mut trailer = [0u8; 16];
    file.read_exact_at(&mut trailer, len - 16)?;
    let footer_start = u64::from_le_bytes(trailer[0..8].try_into().unwrap());
    if &trailer[8..16] != TRAILER_MAGIC || footer_start > len - 16 - 12 {
        return Ok(None);
    }
    let mut fh = [0u8; 12];
    file.read_exact_at(&mut fh, footer_start)?;
    let json_len = u32::from_le_bytes(fh[8..12].try_into().unwrap()) as u64;
    if &fh[0..4] != FOOTER_MAGIC || footer_start + 12 + json_len + 16 != len {
        return Ok(None);
    }
    let mut json = vec![0u8; json_len as usize];
    file.read_exact_at(&mut json, footer_start + 12)?;
    Ok((crc32fast::hash(&json) == u32::from_le_bytes(fh[4..8].try_into().unwrap())).then_some(footer_start))
}

/// Walks chunk headers from `start`. A file that stops inside a chunk or before the footer is
/// truncated (readable up to there); anything malformed inside the complete part is corrupt,
/// and so is a file that seems to stop early but ends in an intact end record.
fn scan(path: &Path, file: &File, start: u64, len: u64) -> Result<(Vec<ChunkInfo>, DataEnd, Option<Footer>)> {
    let io = |e| TraceError::io(path, e);
    let footer_at = intact_end(file, len).map_err(io)?;
    let truncated = |chunks: Vec<ChunkInfo>, offset: u64, what: &str| match footer_at {
        Some(f) => Err(TraceError::corrupt(
            path,
            offset,
            format!(
                "{what} (chunk {}: the file ends in an intact footer at byte {f}, so it is complete and this disagrees with it)",
                chunks.len()
            ),
        )),
        None => Ok((chunks, DataEnd::Truncated { offset }, None)),
    };
    let mut chunks = Vec::new();
    let mut pos = start;
    let mut expected_first = 0u64;
    loop {
        if len - pos < 4 {
            return truncated(chunks, pos, "no end record after the last chunk");
        }
        let mut magic = [0u8; 4];
        file.read_exact_at(&mut magic, pos).map_err(io)?;
        if &magic == CHUNK_MAGIC {
            if len - pos < CHUNK_HEADER_LEN as u64 {
                return truncated(chunks, pos, "chunk header cut short");
            }
            let mut hb = [0u8; CHUNK_HEADER_LEN];
            file.read_exact_at(&mut hb, pos).map_err(io)?;
            let header = ChunkHeader::from_bytes(&hb)
                .ok_or_else(|| TraceError::corrupt(path, pos, "chunk header (checksum mismatch)"))?;
            if header.accesses > MAX_CHUNK_ACCESSES
                || header.raw_len > MAX_CHUNK_RAW_BYTES
                || header.thread_span > MAX_THREADS
                || header.first_access != expected_first
            {
                return Err(TraceError::corrupt(path, pos, "chunk header (impossible values)"));
            }
            let end = pos + CHUNK_HEADER_LEN as u64 + header.payload_len as u64;
            if end > len {
                let what = format!("chunk header (payload_len {} runs past the file's end)", header.payload_len);
                return truncated(chunks, pos, &what);
            }
            expected_first += header.accesses as u64;
            chunks.push(ChunkInfo { offset: pos, header });
            pos = end;
        } else if &magic == FOOTER_MAGIC {
            let footer_start = pos;
            if len - pos < 12 {
                return truncated(chunks, footer_start, "footer cut short");
            }
            let mut fh = [0u8; 12];
            file.read_exact_at(&mut fh, pos).map_err(io)?;
            let crc = u32::from_le_bytes(fh[4..8].try_into().unwrap());
            let json_len = u32::from_le_bytes(fh[8..12].try_into().unwrap()) as u64;
            if len - pos != 12 + json_len + 16 {
                // The footer is the file's last part. A length that disagrees with where the
                // file ends is damage when the trailer is intact (it points back here), and a
                // footer cut short otherwise.
                if trailer_points_to(file, len, footer_start).map_err(io)? {
                    return Err(TraceError::corrupt(path, pos + 8, "footer (length disagrees with the file's end)"));
                }
                if len - pos < 12 + json_len + 16 {
                    return truncated(chunks, footer_start, "footer cut short");
                }
            }
            let mut json = vec![0u8; json_len as usize];
            file.read_exact_at(&mut json, pos + 12).map_err(io)?;
            if crc32fast::hash(&json) != crc {
                return Err(TraceError::corrupt(path, footer_start, "footer (checksum mismatch)"));
            }
            let footer: Footer = serde_json::from_slice(&json)
                .map_err(|e| TraceError::corrupt(path, footer_start, format!("footer ({e})")))?;
            footer
                .metadata
                .check()
                .map_err(|what| TraceError::corrupt(path, footer_start, format!("footer metadata ({what})")))?;
            let mut trailer = [0u8; 16];
            file.read_exact_at(&mut trailer, pos + 12 + json_len).map_err(io)?;
            if &trailer[8..16] != TRAILER_MAGIC || u64::from_le_bytes(trailer[0..8].try_into().unwrap()) != footer_start
            {
                return Err(TraceError::corrupt(path, pos + 12 + json_len, "trailer"));
            }
            let span = chunks.iter().map(|c: &ChunkInfo| c.header.thread_span).max().unwrap_or(0);
            if footer.accesses != expected_first
                || footer.chunks != chunks.len() as u64
                || footer.events != chunks.iter().map(|c| c.header.events as u64).sum::<u64>()
                || footer.metadata.threads < span
            {
                return Err(TraceError::corrupt(path, footer_start, "footer (totals disagree with chunks)"));
            }
            if pos + 12 + json_len + 16 != len {
                return Err(TraceError::corrupt(path, pos + 12 + json_len + 16, "trailing bytes after the trace"));
            }
            return Ok((chunks, DataEnd::Complete, Some(footer)));
        } else {
            return Err(TraceError::corrupt(path, pos, "chunk header (bad magic)"));
        }
    }
}
