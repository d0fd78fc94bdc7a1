//! Per-page chains of packed 4-byte reference records: what the partition keeps of each page
//! for one run of the trace. A record goes to its page's current block; blocks are cut from
//! one arena, so appending never copies what is stored, and a page's records come back in
//! order by following its blocks. A store that outgrows its budget writes every chain to a
//! temporary file (one segment per page) and reuses its arena.

use crate::page::Ref;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;

/// A packed record: bits 0-21 the distance of its position from the page's previous
/// record's, 22-28 the node, then the flags. Node 127 (beyond `MAX_NODES`) marks a record
/// that only advances the position, by its 25 other bits times 2^22: longer gaps between two
/// references to a page take one or two of those.
type Rec = u32;
pub(crate) const WRITE: u32 = 1 << 29;
pub(crate) const SAMPLED: u32 = 1 << 30;
/// Not an access: a TLB event of the page from the node, at the position.
pub(crate) const TLB_EVENT: u32 = 1 << 31;
const DELTA_BITS: u32 = 22;
const MAX_DELTA: u64 = (1 << DELTA_BITS) - 1;
const NODE_MASK: u32 = 0x7f;
const SKIP_NODE: u32 = 127;
const MAX_SKIP: u64 = (1 << 25) - 1;
const REC_BYTES: usize = std::mem::size_of::<Rec>();

/// Blocks grow from 8 to 1024 records as a page keeps being referenced, so a page touched a
/// few times wastes little and a hot page costs one block per 1024 records.
const FIRST_BLOCK: u32 = 8;
const MAX_BLOCK: u32 = 1024;
/// The smallest arena, whatever the budget.
const MIN_ARENA: usize = 1 << 10;
const NONE: u32 = u32::MAX;

/// Records arena[start..start + cap]; full unless it is its chain's tail.
#[derive(Clone, Copy)]
struct Block {
    start: usize,
    cap: u32,
    next: u32,
}

/// One page's records in memory: its first and last blocks, where the next record goes and
/// how many more fit there, the size of its next block and the position of its last record.
#[derive(Clone, Copy, Debug)]
struct Chain {
    head: u32,
    tail: u32,
    room: u32,
    next_cap: u16,
    /// The node of every record so far (`NO_NODE` before the first, `MIXED` once two
    /// differ, or a record is not a plain access).
    node: u16,
    pos: usize,
    last_at: u64,
}

const NO_NODE: u16 = u16::MAX;
const MIXED: u16 = u16::MAX - 1;

impl Chain {
    /// Nothing in memory; the position of the last record is kept across spills.
    fn empty(last_at: u64, node: u16) -> Self {
        Chain { head: NONE, tail: NONE, room: 0, next_cap: FIRST_BLOCK as u16, pos: 0, last_at, node }
    }
}

/// The records of one run's pages (page = index in the order `add_page` was called).
pub(crate) struct ChainStore {
    /// One allocation of the budget's size: the OS maps it in as it fills, and a spill
    /// empties it for reuse without giving it back.
    arena: Vec<Rec>,
    fill: usize,
    blocks: Vec<Block>,
    chains: Vec<Chain>,
    spill: Option<Spill>,
    /// Per page, the position of its first record (deltas start there), or `u64::MAX`.
    first_at: Vec<u64>,
}

struct Spill {
    file: File,
    /// Records written so far.
    len: u64,
    /// Per page, its segments in order: (first record, records).
    segments: Vec<Vec<(u64, u64)>>,
}

impl ChainStore {
    /// A store holding at most `budget` bytes of records in memory.
    pub fn new(budget: usize) -> Self {
        let arena: Vec<Rec> = vec![0; (budget / REC_BYTES).max(MIN_ARENA)];
        ChainStore { arena, fill: 0, blocks: Vec::new(), chains: Vec::new(), spill: None, first_at: Vec::new() }
    }

    pub fn add_page(&mut self) {
        self.chains.push(Chain::empty(0, NO_NODE));
        self.first_at.push(u64::MAX);
    }

    /// Appends a record to `page` at position `at` (never before the page's previous one).
    #[inline]
    pub fn push(&mut self, page: usize, at: u64, node: u16, flags: u32) -> std::io::Result<()> {
        let c = &mut self.chains[page];
        let delta = at.wrapping_sub(c.last_at);
        if delta <= MAX_DELTA && c.room > 0 && flags & TLB_EVENT == 0 {
            if c.node != node {
                c.node = if c.node == NO_NODE { node } else { MIXED };
            }
            // The common case, kept small enough to inline into the caller's loop.
            c.last_at = at;
            self.arena[c.pos] = pack(delta, node, flags);
            c.pos += 1;
            c.room -= 1;
            return Ok(());
        }
        self.push_slow(page, at, node, flags)
    }

    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, page: usize, at: u64, node: u16, flags: u32) -> std::io::Result<()> {
        let c = &mut self.chains[page];
        if self.first_at[page] == u64::MAX {
            // The page's first record: positions count from here.
            self.first_at[page] = at;
            c.last_at = at;
        }
        if flags & TLB_EVENT != 0 || at - c.last_at > MAX_DELTA {
            // Not a count of plain accesses any more (see `private`).
            c.node = MIXED;
        } else if c.node != node {
            c.node = if c.node == NO_NODE { node } else { MIXED };
        }
        let last = &mut self.chains[page].last_at;
        debug_assert!(at >= *last);
        let mut delta = at - *last;
        *last = at;
        while delta > MAX_DELTA {
            let units = (delta >> DELTA_BITS).min(MAX_SKIP);
            let rec =
                (units as u32 & MAX_DELTA as u32) | SKIP_NODE << DELTA_BITS | ((units >> DELTA_BITS) as u32) << 29;
            self.append(page, rec)?;
            delta -= units << DELTA_BITS;
        }
        self.append(page, pack(delta, node, flags))
    }

    #[inline]
    fn append(&mut self, page: usize, rec: Rec) -> std::io::Result<()> {
        if self.chains[page].room == 0 {
            self.new_block(page)?;
        }
        let c = &mut self.chains[page];
        self.arena[c.pos] = rec;
        c.pos += 1;
        c.room -= 1;
        Ok(())
    }

    /// Gives `page` a new tail block, spilling everything first when the arena is full.
    #[cold]
    #[inline(never)]
    fn new_block(&mut self, page: usize) -> std::io::Result<()> {
        let cap = (self.chains[page].next_cap as usize).min(self.arena.len());
        if self.fill + cap > self.arena.len() {
            self.spill()?;
        }
        let c = &mut self.chains[page];
        c.next_cap = (c.next_cap * 2).min(MAX_BLOCK as u16);
        let id = self.blocks.len() as u32;
        self.blocks.push(Block { start: self.fill, cap: cap as u32, next: NONE });
        match c.tail {
            NONE => c.head = id,
            tail => self.blocks[tail as usize].next = id,
        }
        (c.tail, c.pos, c.room) = (id, self.fill, cap as u32);
        self.fill += cap;
        Ok(())
    }

    /// When every record of `page` is a plain access from one node: that node and how many
    /// there are, without reading them.
    pub fn private(&self, page: usize) -> Option<(u16, u64)> {
        let node = self.chains[page].node;
        (node < MIXED).then(|| (node, self.records(page)))
    }

    pub fn spilled(&self) -> bool {
        self.spill.is_some()
    }

    /// Writes every chain's records in memory to the temporary file, one segment per page,
    /// and empties the arena for reuse.
    fn spill(&mut self) -> std::io::Result<()> {
        if self.spill.is_none() {
            self.spill = Some(Spill { file: tempfile::tempfile()?, len: 0, segments: Vec::new() });
        }
        let Spill { file, len, segments } = self.spill.as_mut().expect("just made");
        segments.resize_with(self.chains.len(), Vec::new);
        let mut out = BufWriter::with_capacity(1 << 20, &*file);
        let mut bytes = Vec::with_capacity(MAX_BLOCK as usize * REC_BYTES);
        for (page, chain) in self.chains.iter_mut().enumerate() {
            let mut n = 0u64;
            for block in blocks(&self.blocks, &self.arena, chain) {
                bytes.clear();
                for r in block {
                    bytes.extend_from_slice(&r.to_le_bytes());
                }
                out.write_all(&bytes)?;
                n += block.len() as u64;
            }
            if n > 0 {
                segments[page].push((*len, n));
                *len += n;
            }
            *chain = Chain::empty(chain.last_at, chain.node);
        }
        out.flush()?;
        self.blocks.clear();
        self.fill = 0;
        Ok(())
    }

    /// How many records `page` has (accesses, TLB events and position skips): a bound on
    /// what reading it yields, known without reading.
    pub fn records(&self, page: usize) -> u64 {
        let spilled: u64 =
            self.spill.as_ref().map_or(0, |s| s.segments.get(page).map_or(0, |v| v.iter().map(|&(_, n)| n).sum()));
        spilled + blocks(&self.blocks, &self.arena, &self.chains[page]).map(|b| b.len() as u64).sum::<u64>()
    }

    /// Appends `page`'s records to `refs` (accesses) and `events` (TLB events), in order.
    /// `buf` is scratch for reading spilled segments.
    pub fn read(
        &self,
        page: usize,
        buf: &mut Vec<u8>,
        refs: &mut Vec<Ref>,
        events: &mut Vec<Ref>,
    ) -> std::io::Result<()> {
        let mut cursor = self.cursor(page);
        let mut unlimited = usize::MAX;
        while self.read_some(&mut cursor, &mut unlimited, buf, Some(refs), Some(events))? {}
        Ok(())
    }

    /// A reading of `page`'s records from the start (see `read_some`).
    pub fn cursor(&self, page: usize) -> Cursor {
        Cursor { page, at: self.first_at[page], segment: 0, offset: 0, block: None }
    }

    /// Decodes at most `left` more records of the cursor's page (counting them off `left`),
    /// appending its accesses to `refs` and its TLB events to `events` where given (the
    /// others are skipped), so that a page of any length is read in bounded pieces. False
    /// once the page is read to the end.
    pub fn read_some(
        &self,
        cur: &mut Cursor,
        left: &mut usize,
        buf: &mut Vec<u8>,
        mut refs: Option<&mut Vec<Ref>>,
        mut events: Option<&mut Vec<Ref>>,
    ) -> std::io::Result<bool> {
        let mut out = |r: Rec, at: &mut u64| match unpack(at, r) {
            Decoded::Skip => {}
            Decoded::Ref(rf) => refs.as_mut().map_or((), |v| v.push(rf)),
            Decoded::Event(rf) => events.as_mut().map_or((), |v| v.push(rf)),
        };
        // Spilled segments first, in pieces of at most 64K records.
        let segments = self.spill.as_ref().and_then(|s| s.segments.get(cur.page).map(|v| (s, &v[..])));
        if let Some((spill, segments)) = segments {
            while *left > 0 && cur.segment < segments.len() {
                let (first, n) = segments[cur.segment];
                let take = (n - cur.offset).min(*left as u64).min(1 << 16);
                buf.resize(take as usize * REC_BYTES, 0);
                spill.file.read_exact_at(buf, (first + cur.offset) * REC_BYTES as u64)?;
                for b in buf.chunks_exact(REC_BYTES) {
                    out(Rec::from_le_bytes(b.try_into().expect("4 bytes")), &mut cur.at);
                }
                *left -= take as usize;
                cur.offset += take;
                if cur.offset == n {
                    (cur.segment, cur.offset) = (cur.segment + 1, 0);
                }
            }
            if cur.segment < segments.len() {
                return Ok(true);
            }
        }
        // Then the blocks in memory.
        let chain = &self.chains[cur.page];
        let (mut b, mut from) = cur.block.unwrap_or((chain.head, 0));
        while *left > 0 {
            let Some(block) = self.blocks.get(b as usize) else { break };
            let len = if b == chain.tail { block.cap - chain.room } else { block.cap };
            let to = len.min(from.saturating_add((*left).min(u32::MAX as usize) as u32));
            for &r in &self.arena[block.start + from as usize..block.start + to as usize] {
                out(r, &mut cur.at);
            }
            *left -= (to - from) as usize;
            if to < len {
                from = to;
            } else {
                (b, from) = (block.next, 0);
            }
        }
        cur.block = Some((b, from));
        Ok(self.blocks.get(b as usize).is_some())
    }
}

/// Where a reading of one page's records is: the next spilled segment and record in it, then
/// the next block in memory and record in it, and the position of the last record read.
pub(crate) struct Cursor {
    page: usize,
    at: u64,
    segment: usize,
    offset: u64,
    block: Option<(u32, u32)>,
}

/// A chain's records in memory, block by block.
fn blocks<'a>(blocks: &'a [Block], arena: &'a [Rec], chain: &'a Chain) -> impl Iterator<Item = &'a [Rec]> + 'a {
    let mut b = chain.head;
    std::iter::from_fn(move || {
        let block = *blocks.get(b as usize)?;
        let len = if b == chain.tail { block.cap - chain.room } else { block.cap };
        b = block.next;
        Some(&arena[block.start..block.start + len as usize])
    })
}

#[inline]
fn pack(delta: u64, node: u16, flags: u32) -> Rec {
    debug_assert!(delta <= MAX_DELTA && (node as u32) < SKIP_NODE);
    delta as u32 | (node as u32) << DELTA_BITS | flags
}

enum Decoded {
    Ref(Ref),
    Event(Ref),
    Skip,
}

#[inline]
fn unpack(at: &mut u64, r: Rec) -> Decoded {
    let node = r >> DELTA_BITS & NODE_MASK;
    if node == SKIP_NODE {
        let units = (r as u64 & MAX_DELTA) | ((r >> 29) as u64) << DELTA_BITS;
        *at += units << DELTA_BITS;
        return Decoded::Skip;
    }
    *at += r as u64 & MAX_DELTA;
    let rf = Ref { at: *at, node: node as u16, write: r & WRITE != 0, sampled: r & SAMPLED != 0 };
    if r & TLB_EVENT != 0 { Decoded::Event(rf) } else { Decoded::Ref(rf) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_full_arena_spills() {
        let mut store = ChainStore::new(0);
        store.add_page();
        for at in 0..MIN_ARENA as u64 + 1 {
            store.push(0, at, 1, 0).unwrap();
        }
        assert!(store.spilled());
        let (mut refs, mut events) = (Vec::new(), Vec::new());
        store.read(0, &mut Vec::new(), &mut refs, &mut events).unwrap();
        assert_eq!(refs.iter().map(|r| r.at).collect::<Vec<_>>(), (0..MIN_ARENA as u64 + 1).collect::<Vec<_>>());
    }

    proptest! {
        /// Whatever is pushed comes back per page in order, with positions exact across
        /// gaps of any length, whether it stayed in memory or was spilled (any number of
        /// times, at any point).
        #[test]
        fn pages_read_back_what_was_pushed(
            pushes in prop::collection::vec((0usize..5, prop_oneof![4 => 0u64..5_000_000, 1 => 0u64..1 << 50], prop_oneof![0u16..2, 0u16..127], prop_oneof![0u8..4, 0u8..8]), 0..3000),
            spill_every in prop::option::of(1usize..700),
            node_per_page in any::<bool>(),
            piece in 1usize..40,
        ) {
            // A small arena (several blocks), so pushes also spill when it fills.
            let mut store = ChainStore::new(4096 * REC_BYTES);
            (0..5).for_each(|_| store.add_page());
            let mut expect: Vec<(Vec<Ref>, Vec<Ref>)> = vec![Default::default(); 5];
            let mut at = 0u64;
            for (i, &(page, step, node, flags)) in pushes.iter().enumerate() {
                at += step;
                let node = if node_per_page { page as u16 } else { node };
                let flags = [0, WRITE, SAMPLED, WRITE | SAMPLED, TLB_EVENT, TLB_EVENT, 0, WRITE][flags as usize];
                store.push(page, at, node, flags).unwrap();
                let r = Ref { at, node, write: flags & WRITE != 0, sampled: flags & SAMPLED != 0 };
                if flags & TLB_EVENT != 0 { expect[page].1.push(r) } else { expect[page].0.push(r) }
                if spill_every.is_some_and(|k| i % k == k - 1) {
                    store.spill().unwrap();
                }
            }
            if spill_every.is_some_and(|k| pushes.len() >= k) {
                prop_assert!(store.spilled());
            }
            let mut buf = Vec::new();
            for (page, (refs, events)) in expect.iter().enumerate() {
                let (mut got_refs, mut got_events) = (Vec::new(), Vec::new());
                store.read(page, &mut buf, &mut got_refs, &mut got_events).unwrap();
                prop_assert_eq!(&got_refs, refs);
                prop_assert_eq!(&got_events, events);
                // Read a few records at a time, one kind per pass, the same comes back.
                for want_events in [false, true] {
                    let (mut cursor, mut got) = (store.cursor(page), Vec::new());
                    loop {
                        let mut left = piece;
                        let (r, e) = if want_events { (None, Some(&mut got)) } else { (Some(&mut got), None) };
                        let more = store.read_some(&mut cursor, &mut left, &mut buf, r, e).unwrap();
                        prop_assert!(left == 0 || !more);
                        if !more {
                            break;
                        }
                    }
                    prop_assert_eq!(&got, if want_events { events } else { refs });
                }
                // Counted without reading exactly when every record is a plain access from
                // one node with no gap of 2^22 accesses or more.
                let plain = !refs.is_empty()
                    && events.is_empty()
                    && refs.iter().all(|r| r.node == refs[0].node)
                    && refs.windows(2).all(|w| w[1].at - w[0].at <= MAX_DELTA);
                let expect = plain.then(|| (refs[0].node, refs.len() as u64));
                prop_assert_eq!(store.private(page), expect);
            }
        }
    }
}
