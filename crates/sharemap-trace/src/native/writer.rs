//! Streaming writer: accesses are buffered into one chunk at a time, so memory stays
//! bounded whatever the trace length.

use super::{ChunkEncoder, Footer, DEFAULT_CHUNK_ACCESSES, FILE_MAGIC, FOOTER_MAGIC, TRAILER_MAGIC};
use crate::batch::{Chunk, ChunkItem};
use crate::model::{Access, Event, EventKind, Metadata, FORMAT_VERSION};
use std::io::{self, Write};

pub struct NativeWriter<W: Write> {
    out: W,
    offset: u64,
    meta: Metadata,
    encoder: ChunkEncoder,
    pending: Chunk,
    payload: Vec<u8>,
    chunk_accesses: usize,
    accesses: u64,
    events: u64,
    chunks: u64,
    thread_span: u32,
}

/// Totals of a finished trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteSummary {
    pub accesses: u64,
    pub events: u64,
    pub chunks: u64,
    pub bytes: u64,
    pub threads: u32,
}

impl<W: Write> NativeWriter<W> {
    pub fn new(out: W, meta: Metadata) -> io::Result<Self> {
        Self::with_options(out, meta, DEFAULT_CHUNK_ACCESSES, super::DEFAULT_ZSTD_LEVEL)
    }

    pub fn with_options(mut out: W, mut meta: Metadata, chunk_accesses: usize, level: i32) -> io::Result<Self> {
        meta.format_version = FORMAT_VERSION;
        let json = serde_json::to_vec(&meta).map_err(io::Error::other)?;
        out.write_all(FILE_MAGIC)?;
        out.write_all(&(FORMAT_VERSION as u16).to_le_bytes())?;
        out.write_all(&0u16.to_le_bytes())?;
        out.write_all(&(json.len() as u32).to_le_bytes())?;
        out.write_all(&crc32fast::hash(&json).to_le_bytes())?;
        out.write_all(&json)?;
        Ok(NativeWriter {
            out,
            offset: (super::FILE_HEADER_LEN + json.len()) as u64,
            meta,
            encoder: ChunkEncoder::new(level)?,
            pending: Chunk::default(),
            payload: Vec::new(),
            chunk_accesses: chunk_accesses.clamp(1, super::MAX_CHUNK_ACCESSES as usize),
            accesses: 0,
            events: 0,
            chunks: 0,
            thread_span: 0,
        })
    }

    /// Number of accesses written so far (the position the next event will get).
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    #[inline]
    pub fn push(&mut self, a: Access) -> io::Result<()> {
        self.pending.accesses.push(a);
        self.accesses += 1;
        if self.pending.accesses.len() >= self.chunk_accesses {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Records an event just before the next access.
    pub fn event(&mut self, thread: u32, kind: EventKind, arg: u64, label: &str) -> io::Result<()> {
        self.pending.events.push(Event { at: self.accesses, thread, kind, arg, label: label.to_string() });
        self.events += 1;
        // A stream of events with no accesses must not grow without bound either.
        if self.pending.events.len() >= self.chunk_accesses {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Sets the thread count and OS tids to store in the footer (defaults to what was seen).
    pub fn set_threads(&mut self, threads: u32, os_tids: Vec<u64>) {
        self.meta.threads = threads;
        self.meta.os_tids = os_tids;
    }

    /// Appends a whole chunk whose events sit at absolute positions from
    /// `chunk.first_access`: encoded as it is when it starts at the writer's position and
    /// fits in one chunk (a source that builds chunks itself skips the per-access path),
    /// else access by access.
    pub fn write_chunk(&mut self, chunk: &Chunk) -> io::Result<()> {
        let fits = chunk.accesses.len() <= self.chunk_accesses && chunk.events.len() <= self.chunk_accesses;
        if fits && chunk.first_access == self.accesses && self.pending.accesses.is_empty() && self.pending.events.is_empty() {
            self.accesses += chunk.accesses.len() as u64;
            self.events += chunk.events.len() as u64;
            return self.emit(chunk);
        }
        for item in chunk.items() {
            match item {
                ChunkItem::Access(a) => self.push(a)?,
                ChunkItem::Event(e) => self.event(e.thread, e.kind, e.arg, &e.label)?,
            }
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> io::Result<()> {
        if self.pending.accesses.is_empty() && self.pending.events.is_empty() {
            return Ok(());
        }
        self.pending.first_access = self.accesses - self.pending.accesses.len() as u64;
        // Taken out for the call and put back: its buffers keep their capacity.
        let mut pending = std::mem::take(&mut self.pending);
        let r = self.emit(&pending);
        pending.clear();
        self.pending = pending;
        r
    }

    /// Encodes and writes one chunk.
    fn emit(&mut self, chunk: &Chunk) -> io::Result<()> {
        if chunk.accesses.is_empty() && chunk.events.is_empty() {
            return Ok(());
        }
        let header = self.encoder.encode(chunk, &mut self.payload)?;
        self.out.write_all(&header.to_bytes())?;
        self.out.write_all(&self.payload)?;
        self.offset += (super::CHUNK_HEADER_LEN + self.payload.len()) as u64;
        self.thread_span = self.thread_span.max(header.thread_span);
        self.chunks += 1;
        Ok(())
    }

    /// Writes the last chunk and the footer, and returns the writer's output.
    pub fn finish(mut self) -> io::Result<(W, WriteSummary)> {
        self.flush_chunk()?;
        self.meta.threads = self.meta.threads.max(self.thread_span);
        let footer = Footer { metadata: self.meta.clone(), accesses: self.accesses, events: self.events, chunks: self.chunks };
        let json = serde_json::to_vec(&footer).map_err(io::Error::other)?;
        let footer_offset = self.offset;
        self.out.write_all(FOOTER_MAGIC)?;
        self.out.write_all(&crc32fast::hash(&json).to_le_bytes())?;
        self.out.write_all(&(json.len() as u32).to_le_bytes())?;
        self.out.write_all(&json)?;
        self.out.write_all(&footer_offset.to_le_bytes())?;
        self.out.write_all(TRAILER_MAGIC)?;
        self.out.flush()?;
        let bytes = footer_offset + 12 + json.len() as u64 + 16;
        let summary = WriteSummary {
            accesses: self.accesses,
            events: self.events,
            chunks: self.chunks,
            bytes,
            threads: self.meta.threads,
        };
        Ok((self.out, summary))
    }
}

