//! The shared-memory handoff between the runtime linked into a traced program and
//! `sharemap record`. The recorder creates the region (a memfd the program inherits, its
//! descriptor named by `SHAREMAP_FD`); the program's threads write their accesses straight
//! into blocks of it and publish each record with a release store of the block's count. So
//! whatever a thread has handed off is in memory the recorder holds, whenever and however
//! the program ends, SIGKILL included: the program never needs to flush.
//!
//! Layout: a `Header` page, a string area (phase names), then `blocks` blocks, each a
//! `BlockHeader` (64 bytes) and `RECORDS_PER_BLOCK` records of 16 bytes. A block is FREE,
//! FILLING (owned by one thread) or FULL (handed over: all its records, or fewer when its
//! thread ended, are published); the recorder drains FULL blocks while the program runs and
//! frees them, and reads FILLING ones up to their count as it goes.
//!
//! Order: every record carries a number from one global counter, taken when the access is
//! recorded; each thread's records are in increasing order, and the recorder merges the
//! threads by that number into the trace's total order while the program runs. The numbers
//! are dense: a thread takes one only once it holds a block to write the record into, and
//! publishes every number it takes. So the recorder writes record n as soon as it holds every
//! record below n; a missing number is one a thread is still writing.

#![no_std]

use core::sync::atomic::{AtomicU32, AtomicU64};

/// Environment variable holding the region's file descriptor in the traced program.
pub const ENV_FD: &str = "SHAREMAP_FD";
/// Environment variable: record one access in K (per thread); unset or 1 records all.
pub const ENV_SAMPLE: &str = "SHAREMAP_SAMPLE";
/// Environment variable: when set to 1, accesses to the thread's stack are not recorded.
pub const ENV_NO_STACK: &str = "SHAREMAP_NO_STACK";
/// A burst-sampled build's setting for this recording, overriding its own (`record
/// --burst`): microseconds per burst (`BURST_ALL`: every access) and between bursts.
pub const ENV_BURST_ON: &str = "SHAREMAP_BURST_ON";
pub const ENV_BURST_OFF: &str = "SHAREMAP_BURST_OFF";
pub const BURST_ALL: u64 = u64::MAX;

pub const MAGIC: u64 = u64::from_le_bytes(*b"SHMAPRT1");
pub const VERSION: u32 = 9;

/// Threads recorded at most, as many as a trace holds (`sharemap_core::MAX_THREADS`): the
/// accesses of later threads are counted as lost.
pub const MAX_THREADS: u32 = 4096;

/// A producer waits this long for a free block before it counts its record as lost (and
/// stops waiting for later ones until a block is free again).
pub const WAIT_MS: u32 = 10_000;

pub const HEADER_BYTES: usize = 4096;
pub const STRING_BYTES: usize = 64 * 1024;
pub const RECORDS_PER_BLOCK: usize = 4096;
pub const BLOCK_HEADER_BYTES: usize = 64;
pub const RECORD_BYTES: usize = 16;
pub const BLOCK_BYTES: usize = BLOCK_HEADER_BYTES + RECORDS_PER_BLOCK * RECORD_BYTES;

/// Bytes of a region of `blocks` blocks.
pub const fn region_bytes(blocks: usize) -> usize {
    HEADER_BYTES + STRING_BYTES + blocks * BLOCK_BYTES
}

#[repr(C)]
pub struct Header {
    pub magic: u64,
    pub version: u32,
    pub blocks: u32,
    /// The global order counter.
    pub seq: AtomicU64,
    /// Dense thread ids handed out so far (the main thread is 0).
    pub threads: AtomicU32,
    /// Bytes of the string area in use.
    pub strings_used: AtomicU32,
    /// Records lost because a thread could not get a block (should stay 0: producers wait).
    pub lost: AtomicU64,
    /// The process id of the program the runtime attached in, set once (0: none yet). A
    /// process exec'd by the program later finds it taken and does not attach: the trace
    /// holds one address space.
    pub attached: AtomicU32,
    /// One more than the highest block index a producer has taken: the recorder looks no
    /// further (producers look from `free_hint` up, so this stays near the backlog).
    pub blocks_used: AtomicU32,
    /// The lowest block the recorder freed in its last round that freed any: where
    /// producers start looking for a free block.
    pub free_hint: AtomicU32,
    /// The recorder's process id: a producer waiting for a block checks it is still alive,
    /// and stops recording when it is gone (the program goes on unrecorded).
    pub recorder: AtomicU32,
    /// Times the program forked (its children are not recorded).
    pub forks: AtomicU32,
    /// The executable's load bias (0 unless position-independent), set at attach: the
    /// recorder places the program's symbols with it (`record --exclude NAME`).
    pub exe_base: AtomicU64,
    /// A burst-sampled build's microseconds per burst and between bursts (`sharemap cc
    /// --burst ON:OFF`), set at its first burst (0: none yet, or not such a build).
    pub burst_on: AtomicU64,
    pub burst_off: AtomicU64,
}

pub const FREE: u32 = 0;
pub const FILLING: u32 = 1;
pub const FULL: u32 = 2;

#[repr(C)]
pub struct BlockHeader {
    pub state: AtomicU32,
    pub thread: AtomicU32,
    /// Records written and published.
    pub count: AtomicU32,
    /// How many blocks its thread took before this one: the recorder takes a thread's
    /// blocks in this order, whichever of them one scan of the region happens to see.
    pub ordinal: AtomicU32,
}

/// One record: `seq_tag` = order number << 8 | tag; `payload` by tag.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    pub seq_tag: u64,
    pub payload: u64,
}

/// Tags. Accesses: `payload` = address (low 48 bits) | size << 48.
pub const TAG_READ: u8 = 0;
pub const TAG_WRITE: u8 = 1;
/// An event: `payload` = kind code (low 8 bits, the trace format's `EventKind` codes) |
/// string offset << 8 (24 bits) | string length << 32 (16 bits) | argument << 48 (16 bits).
pub const TAG_EVENT: u8 = 2;
/// A thread's start: `payload` = the trace format's thread-start code (low 8 bits) | the
/// thread's OS id << 8.
pub const TAG_THREAD_START: u8 = 3;
/// Where the thread runs, read as it takes a block: `payload` = the CPU the kernel numbers.
pub const TAG_CPU: u8 = 4;
/// A burst of a burst-sampled build ends on the thread: `payload` = the loop back-edges it
/// ran in the burst (low 32 bits) | those it ran between its previous burst and this one
/// << 32 (each saturating).
pub const TAG_BURST_END: u8 = 5;
/// The thread's next access was made by the instruction before code address `payload` (the
/// return address of the instrumentation's call): one access in `ACCESS_SITE_PERIOD`.
pub const TAG_ACCESS_SITE: u8 = 6;
/// An allocation, in three records: `TAG_ALLOC` (`payload` = address, low 48 bits | the
/// allocator's number in `ALLOCATORS` << 56), then `TAG_ALLOC_SIZE` (bytes) and
/// `TAG_ALLOC_SITE` (the call's return address, 0 when not known), the thread's next records
/// but for a `TAG_CPU` when it takes a block between them.
pub const TAG_ALLOC: u8 = 7;
pub const TAG_ALLOC_SIZE: u8 = 8;
pub const TAG_ALLOC_SITE: u8 = 9;
/// A release: `payload` = address, low 48 bits | the releaser's number in `RELEASERS` << 56.
pub const TAG_FREE: u8 = 10;

/// One recorded access in this many per thread carries its code address.
pub const ACCESS_SITE_PERIOD: u32 = 1024;

/// The allocators, by their number in `TAG_ALLOC`, as the trace's `alloc` events name them.
pub const ALLOCATORS: [&str; 8] = ["malloc", "calloc", "realloc", "aligned", "mmap", "new", "new[]", "stack"];
/// The releasers, by their number in `TAG_FREE`, as the trace's `free` events name them.
pub const RELEASERS: [&str; 4] = ["free", "realloc", "munmap", "delete"];

/// Largest size one access record holds; larger ranges are split (at page boundaries).
pub const MAX_ACCESS_SIZE: u64 = 4096;
pub const ADDR_BITS: u32 = 48;

impl Record {
    #[inline]
    pub fn access(seq: u64, write: bool, addr: u64, size: u64) -> Record {
        Record {
            seq_tag: seq << 8 | if write { TAG_WRITE } else { TAG_READ } as u64,
            payload: (addr & ((1 << ADDR_BITS) - 1)) | size << ADDR_BITS,
        }
    }

    pub fn cpu(seq: u64, cpu: u32) -> Record {
        Record { seq_tag: seq << 8 | TAG_CPU as u64, payload: cpu as u64 }
    }

    pub fn event(seq: u64, kind: u8, string: (u32, u32), arg: u16) -> Record {
        let payload =
            kind as u64 | (string.0 as u64 & 0xff_ffff) << 8 | (string.1 as u64 & 0xffff) << 32 | (arg as u64) << 48;
        Record { seq_tag: seq << 8 | TAG_EVENT as u64, payload }
    }

    pub fn burst_end(seq: u64, in_burst: u64, before: u64) -> Record {
        let payload = in_burst.min(u32::MAX as u64) | before.min(u32::MAX as u64) << 32;
        Record { seq_tag: seq << 8 | TAG_BURST_END as u64, payload }
    }

    pub fn tagged(seq: u64, tag: u8, payload: u64) -> Record {
        Record { seq_tag: seq << 8 | tag as u64, payload }
    }

    /// An allocation's or release's first record: the address and the allocator's number.
    pub fn alloc(seq: u64, tag: u8, addr: u64, how: u8) -> Record {
        Record::tagged(seq, tag, (addr & ((1 << ADDR_BITS) - 1)) | (how as u64) << 56)
    }

    /// (address, allocator's number) of a `TAG_ALLOC` or `TAG_FREE` record.
    pub fn alloc_parts(&self) -> (u64, u8) {
        (self.addr(), (self.payload >> 56) as u8)
    }

    pub fn thread_start(seq: u64, os_tid: u64) -> Record {
        Record { seq_tag: seq << 8 | TAG_THREAD_START as u64, payload: os_tid }
    }

    pub fn seq(&self) -> u64 {
        self.seq_tag >> 8
    }

    pub fn tag(&self) -> u8 {
        self.seq_tag as u8
    }

    pub fn addr(&self) -> u64 {
        self.payload & ((1 << ADDR_BITS) - 1)
    }

    pub fn size(&self) -> u64 {
        self.payload >> ADDR_BITS
    }

    /// (kind code, (string offset, length), argument) of an event record.
    pub fn event_parts(&self) -> (u8, (u32, u32), u16) {
        (
            self.payload as u8,
            ((self.payload >> 8) as u32 & 0xff_ffff, (self.payload >> 32) as u32 & 0xffff),
            (self.payload >> 48) as u16,
        )
    }
}

/// Offsets of the parts of a region.
pub const fn string_offset() -> usize {
    HEADER_BYTES
}

pub const fn block_offset(i: usize) -> usize {
    HEADER_BYTES + STRING_BYTES + i * BLOCK_BYTES
}

const _: () = assert!(core::mem::size_of::<Header>() <= HEADER_BYTES);
const _: () = assert!(core::mem::size_of::<BlockHeader>() <= BLOCK_HEADER_BYTES);
const _: () = assert!(core::mem::size_of::<Record>() == RECORD_BYTES);
