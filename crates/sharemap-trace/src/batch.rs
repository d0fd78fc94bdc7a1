//! Columnar batches of accesses: what every reader produces and every writer consumes.

use crate::model::{Access, Event, Kind};

/// A run of consecutive accesses in column form. Columns always have equal lengths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessBatch {
    pub thread: Vec<u32>,
    pub addr: Vec<u64>,
    pub size: Vec<u32>,
    pub write: Vec<bool>,
}

impl AccessBatch {
    pub fn with_capacity(n: usize) -> Self {
        AccessBatch {
            thread: Vec::with_capacity(n),
            addr: Vec::with_capacity(n),
            size: Vec::with_capacity(n),
            write: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.thread.len()
    }

    pub fn is_empty(&self) -> bool {
        self.thread.is_empty()
    }

    pub fn clear(&mut self) {
        self.thread.clear();
        self.addr.clear();
        self.size.clear();
        self.write.clear();
    }

    #[inline]
    pub fn push(&mut self, a: Access) {
        self.thread.push(a.thread);
        self.addr.push(a.addr);
        self.size.push(a.size);
        self.write.push(a.kind == Kind::Write);
    }

    #[inline]
    pub fn get(&self, i: usize) -> Access {
        Access {
            thread: self.thread[i],
            addr: self.addr[i],
            size: self.size[i],
            kind: if self.write[i] { Kind::Write } else { Kind::Read },
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = Access> + '_ {
        (0..self.len()).map(move |i| self.get(i))
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
}
