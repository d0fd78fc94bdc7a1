//! The native trace format: a header, independent zstd-compressed checksummed chunks of
//! columnar accesses, and a footer. The byte layout is specified in docs/trace-format.md.

mod codec;
mod reader;
mod writer;

pub use codec::{ChunkDecoder, ChunkEncoder};
pub use reader::{ChunkInfo, DataEnd, NativeReader};
pub use writer::{NativeWriter, WriteSummary};

pub const FILE_MAGIC: &[u8; 8] = b"SHAREMAP";
pub const CHUNK_MAGIC: &[u8; 4] = b"SMCK";
pub const FOOTER_MAGIC: &[u8; 4] = b"SMFT";
pub const TRAILER_MAGIC: &[u8; 8] = b"SMEND\0\0\0";
/// Fixed part of the file header: magic, version u16, flags u16, json length u32, json crc u32.
pub const FILE_HEADER_LEN: usize = 20;
pub const CHUNK_HEADER_LEN: usize = 40;
/// Accesses per chunk written by default: ~210 KiB decoded, so a decoded chunk stays in a
/// core's L2 cache (measured faster than 8K or 64K; see CHANGELOG.md, the native format).
pub const DEFAULT_CHUNK_ACCESSES: usize = 1 << 14;
/// zstd level writers use (with literals left uncoded and a minimum match of 7, see
/// `ChunkEncoder::new`). Level 3's match finder turns the periodic columns of a gather
/// loop into fewer, longer matches than the fast levels do, which is what decoding time
/// depends on; higher levels decode no faster on stencils and encode slower (see
/// CHANGELOG.md, the native format).
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;
/// Readers refuse chunks claiming more than this, so a damaged header cannot exhaust memory.
pub const MAX_CHUNK_ACCESSES: u32 = 1 << 24;
pub const MAX_CHUNK_RAW_BYTES: u32 = 1 << 30;

/// The 40-byte header in front of each chunk's compressed payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    pub payload_len: u32,
    pub raw_len: u32,
    pub accesses: u32,
    pub events: u32,
    /// 1 + the largest thread id in the chunk (0 if it has no accesses or events).
    pub thread_span: u32,
    pub payload_crc: u32,
    pub first_access: u64,
}

impl ChunkHeader {
    pub fn to_bytes(&self) -> [u8; CHUNK_HEADER_LEN] {
        let mut b = [0u8; CHUNK_HEADER_LEN];
        b[0..4].copy_from_slice(CHUNK_MAGIC);
        b[8..12].copy_from_slice(&self.payload_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.raw_len.to_le_bytes());
        b[16..20].copy_from_slice(&self.accesses.to_le_bytes());
        b[20..24].copy_from_slice(&self.events.to_le_bytes());
        b[24..28].copy_from_slice(&self.thread_span.to_le_bytes());
        b[28..32].copy_from_slice(&self.payload_crc.to_le_bytes());
        b[32..40].copy_from_slice(&self.first_access.to_le_bytes());
        let crc = crc32fast::hash(&b[8..]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses a header whose magic is already known to be CHUNK_MAGIC; `None` on a bad checksum.
    pub fn from_bytes(b: &[u8; CHUNK_HEADER_LEN]) -> Option<Self> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        if u32_at(4) != crc32fast::hash(&b[8..]) {
            return None;
        }
        Some(ChunkHeader {
            payload_len: u32_at(8),
            raw_len: u32_at(12),
            accesses: u32_at(16),
            events: u32_at(20),
            thread_span: u32_at(24),
            payload_crc: u32_at(28),
            first_access: u64::from_le_bytes(b[32..40].try_into().unwrap()),
        })
    }
}

/// Final totals written in the footer when the writer finishes cleanly.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Footer {
    pub metadata: crate::model::Metadata,
    pub accesses: u64,
    pub events: u64,
    pub chunks: u64,
    /// Every region and phase mark of the trace (`is_mark`), in order: what resolves a
    /// window without decoding the chunks (a recording's allocations and access sites put
    /// events in every chunk). Absent in files written before it, and past `MAX_MARKS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marks: Option<Vec<crate::model::Event>>,
}

/// Marks a footer lists at most.
pub const MAX_MARKS: usize = 1 << 20;

/// The kinds a window is resolved from: regions of interest and phases.
pub fn is_mark(kind: crate::model::EventKind) -> bool {
    use crate::model::EventKind::*;
    matches!(kind, RoiBegin | RoiEnd | PhaseChange)
}

/// A native file's bytes with its header metadata replaced by `json` (length and checksum
/// set to match), everything after the header kept: for tools that craft or repair files, and
/// the tests that check readers refuse impossible metadata. None if `file` is too short.
pub fn with_header_metadata(file: &[u8], json: &[u8]) -> Option<Vec<u8>> {
    let old_len = u32::from_le_bytes(file.get(12..16)?.try_into().ok()?) as usize;
    let rest = file.get(FILE_HEADER_LEN + old_len..)?;
    let mut out = file[..FILE_HEADER_LEN].to_vec();
    out[12..16].copy_from_slice(&(json.len() as u32).to_le_bytes());
    out[16..20].copy_from_slice(&crc32fast::hash(json).to_le_bytes());
    out.extend_from_slice(json);
    out.extend_from_slice(rest);
    Some(out)
}

#[cfg(test)]
mod tests;
