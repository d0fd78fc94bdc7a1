//! Columnar batches of accesses: what every reader produces and every writer consumes.

use crate::model::{Access, Event, Kind};

/// A run of consecutive accesses in column form. `thread`, `addr` and `op` always have
/// equal lengths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessBatch {
    pub thread: Vec<u32>,
    pub addr: Vec<u64>,
    /// Per access: bit 7 set for a write; bits 0..7 the size in bytes, or 0 when the size
    /// (0 or 128 and above) is in `big_sizes`. The native format stores this byte as is.
    pub op: Vec<u8>,
    /// (index, size) of the accesses whose op byte holds size 0, in index order.
    pub big_sizes: Vec<(u32, u32)>,
}

/// The op byte of an access whose size fits in 7 bits (1..=127), else None.
#[inline]
pub fn op_byte(size: u32, write: bool) -> Option<u8> {
    (1..0x80).contains(&size).then_some(size as u8 | if write { 0x80 } else { 0 })
}

impl AccessBatch {
    pub fn len(&self) -> usize {
        self.thread.len()
    }

    pub fn is_empty(&self) -> bool {
        self.thread.is_empty()
    }

    pub fn clear(&mut self) {
        self.thread.clear();
        self.addr.clear();
        self.op.clear();
        self.big_sizes.clear();
    }

    #[inline]
    pub fn push(&mut self, a: Access) {
        let write = a.kind == Kind::Write;
        let op = op_byte(a.size, write).unwrap_or_else(|| {
            self.big_sizes.push((self.thread.len() as u32, a.size));
            if write { 0x80 } else { 0 }
        });
        self.thread.push(a.thread);
        self.addr.push(a.addr);
        self.op.push(op);
    }

    #[inline]
    pub fn is_write(&self, i: usize) -> bool {
        self.op[i] & 0x80 != 0
    }

    #[inline]
    pub fn size(&self, i: usize) -> u32 {
        match self.op[i] & 0x7f {
            0 => self.big_sizes.binary_search_by_key(&(i as u32), |&(k, _)| k).map_or(0, |k| self.big_sizes[k].1),
            s => s as u32,
        }
    }

    #[inline]
    pub fn get(&self, i: usize) -> Access {
        Access {
            thread: self.thread[i],
            addr: self.addr[i],
            size: self.size(i),
            kind: if self.is_write(i) { Kind::Write } else { Kind::Read },
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = Access> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }

    /// Appends `other`'s accesses `range` (indices of `other`), sizes kept.
    pub fn extend_from(&mut self, other: &AccessBatch, range: std::ops::Range<usize>) {
        let base = self.len() as u32;
        let (lo, hi) = (range.start as u32, range.end as u32);
        let first = other.big_sizes.partition_point(|&(i, _)| i < lo);
        for &(i, size) in other.big_sizes[first..].iter().take_while(|&&(i, _)| i < hi) {
            self.big_sizes.push((base + i - lo, size));
        }
        self.thread.extend_from_slice(&other.thread[range.clone()]);
        self.addr.extend_from_slice(&other.addr[range.clone()]);
        self.op.extend_from_slice(&other.op[range]);
    }
}

/// A chunk as readers hand it out: accesses numbered from `first_access`, and the events
/// that fall in this chunk (`first_access <= event.at <= first_access + len`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    pub first_access: u64,
    pub accesses: AccessBatch,
    pub events: Vec<Event>,
}

impl Chunk {
    pub fn clear(&mut self) {
        self.first_access = 0;
        self.accesses.clear();
        self.events.clear();
    }

    /// Accesses and events in trace order: an event comes just before the access at its
    /// position.
    pub fn items(&self) -> ChunkItems<'_> {
        ChunkItems { chunk: self, access: 0, event: 0 }
    }
}

/// One element of a chunk, in trace order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkItem<'a> {
    Access(Access),
    Event(&'a Event),
}

/// See [`Chunk::items`].
pub struct ChunkItems<'a> {
    chunk: &'a Chunk,
    access: usize,
    event: usize,
}

impl<'a> Iterator for ChunkItems<'a> {
    type Item = ChunkItem<'a>;

    fn next(&mut self) -> Option<ChunkItem<'a>> {
        let c = self.chunk;
        let more_accesses = self.access < c.accesses.len();
        if let Some(e) = c.events.get(self.event)
            && (!more_accesses || e.at <= c.first_access + self.access as u64)
        {
            self.event += 1;
            return Some(ChunkItem::Event(e));
        }
        more_accesses.then(|| {
            self.access += 1;
            ChunkItem::Access(c.accesses.get(self.access - 1))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventKind;

    #[test]
    fn items_put_each_event_before_the_access_at_its_position() {
        let mut c = Chunk { first_access: 10, ..Chunk::default() };
        for i in 0..3 {
            c.accesses.push(Access { thread: 0, addr: i, size: 4, kind: Kind::Read });
        }
        let event = |at| Event::new(at, 1, EventKind::PhaseChange, at, "");
        c.events = vec![event(10), event(10), event(12), event(13)];
        let order: Vec<String> = c
            .items()
            .map(|item| match item {
                ChunkItem::Access(a) => format!("a{}", a.addr),
                ChunkItem::Event(e) => format!("e{}", e.at),
            })
            .collect();
        assert_eq!(order, ["e10", "e10", "a0", "a1", "e12", "a2", "e13"]);
        assert_eq!(Chunk::default().items().count(), 0);
    }
}
