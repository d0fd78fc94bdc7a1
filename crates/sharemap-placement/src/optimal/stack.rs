//! What the forward pass leaves for the walk back, as stacks: the newest items stay in
//! memory, older ones go to a temporary file a block at a time, and the walk back takes
//! them newest first, a block at a time again. So a page with hundreds of millions of
//! writes is solved in the memory of two blocks per stack.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// An item of a stack, written to the file in a fixed number of bytes.
pub(super) trait Record: Copy {
    const BYTES: usize;
    fn put(&self, out: &mut Vec<u8>);
    fn get(bytes: &[u8]) -> Self;
}

pub(super) struct SpillStack<T> {
    items: Vec<T>,
    /// Items per block written to or read from the file.
    block: usize,
    file: Option<File>,
    blocks_on_disk: u64,
    bytes: Vec<u8>,
    /// The first I/O error: items are then lost, and the solver reports it.
    pub error: Option<std::io::Error>,
}

impl<T: Record> SpillStack<T> {
    /// A stack keeping at most about `memory` bytes of items in memory.
    pub fn new(memory: usize) -> Self {
        let block = (memory / T::BYTES.max(std::mem::size_of::<T>())).max(1);
        SpillStack { items: Vec::new(), block, file: None, blocks_on_disk: 0, bytes: Vec::new(), error: None }
    }

    /// Empties the stack (the file is kept for the next page).
    pub fn clear(&mut self) {
        self.items.clear();
        self.blocks_on_disk = 0;
        self.error = None;
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.blocks_on_disk == 0
    }

    #[inline]
    pub fn push(&mut self, item: T) {
        if self.items.len() == self.items.capacity() {
            self.grow();
        }
        self.items.push(item);
    }

    /// The newest item; None when empty (or when reading the file failed: see `error`).
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.items.is_empty() && self.blocks_on_disk > 0 {
            self.unspill();
        }
        self.items.pop()
    }

    /// Room for more items: up to a block in memory (never more: doubling past it would
    /// take twice the memory given), then the block goes to the file.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        if self.items.len() == self.block {
            self.spill();
        }
        let room = self.items.len().max(16).min(self.block - self.items.len());
        self.items.reserve_exact(room);
    }

    fn spill(&mut self) {
        self.bytes.clear();
        for item in &self.items {
            item.put(&mut self.bytes);
        }
        self.items.clear();
        let offset = self.blocks_on_disk * self.bytes.len() as u64;
        let written = match &self.file {
            Some(file) => file.write_all_at(&self.bytes, offset),
            None => tempfile::tempfile().and_then(|file| {
                let r = file.write_all_at(&self.bytes, offset);
                self.file = Some(file);
                r
            }),
        };
        match written {
            Ok(()) => self.blocks_on_disk += 1,
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn unspill(&mut self) {
        self.blocks_on_disk -= 1;
        let len = self.block * T::BYTES;
        self.bytes.resize(len, 0);
        let file = self.file.as_ref().expect("a block on disk has its file");
        match file.read_exact_at(&mut self.bytes, self.blocks_on_disk * len as u64) {
            Ok(()) => self.items.extend(self.bytes.chunks_exact(T::BYTES).map(T::get)),
            Err(e) => {
                self.blocks_on_disk = 0;
                self.error.get_or_insert(e);
            }
        }
    }
}

impl Record for u32 {
    const BYTES: usize = 4;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        u32::from_le_bytes(b.try_into().expect("4 bytes"))
    }
}

/// Reads fixed-size fields from a record's bytes, in the order they were put.
pub(super) struct Fields<'a>(pub &'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self.0.split_at(N);
        self.0 = rest;
        head.try_into().expect("N bytes")
    }
    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
    pub fn f64(&mut self) -> f64 {
        f64::from_le_bytes(self.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Items come back newest first whatever the block size, across any number of
        /// spills, and a cleared stack starts afresh on the same file.
        #[test]
        fn pops_what_was_pushed_in_reverse(items in prop::collection::vec(any::<u32>(), 0..500), memory in 4usize..64) {
            let mut stack = SpillStack::<u32>::new(memory);
            for round in 0..2 {
                for &i in &items {
                    stack.push(i ^ round);
                }
                let mut back = Vec::new();
                while let Some(i) = stack.pop() {
                    back.push(i ^ round);
                }
                back.reverse();
                prop_assert_eq!(&back, &items);
                prop_assert!(stack.is_empty() && stack.error.is_none());
                stack.clear();
            }
        }
    }
}
