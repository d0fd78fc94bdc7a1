//! Leaving address ranges out of a trace: a spin-wait flag or a lock word can take most of a
//! recording's accesses and swamp every analysis. [`Ranges`] parses what the user gives
//! (`0x7f00-0x7f40`, `0x601040+64`, comma-separated); [`Excluding`] reads a trace without
//! the accesses that touch them, events moved to their place among the accesses kept.

use crate::batch::Chunk;
use crate::error::Result;
use crate::model::Metadata;
use crate::source::TraceSource;

/// Sorted, disjoint address ranges [start, end).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    /// `LO-HI` (HI excluded) or `LO+SIZE`, hexadecimal with 0x or decimal, comma-separated.
    pub fn parse(text: &str) -> std::result::Result<Ranges, RangesError> {
        let mut out = Ranges::default();
        let items = sharemap_core::spec::comma_items(text)
            .map_err(|k| RangesError::new(text, sharemap_core::spec::empty_item(k)))?;
        for item in items {
            let bad = || RangesError::new(item, "expected LO-HI or LO+SIZE (0x-hex or decimal), e.g. 0x601040+64");
            let (lo, hi) = if let Some((a, b)) = item.split_once('+') {
                let lo = number(a).ok_or_else(bad)?;
                (lo, lo.checked_add(number(b).ok_or_else(bad)?).ok_or_else(bad)?)
            } else if let Some((a, b)) = item.split_once('-') {
                (number(a).ok_or_else(bad)?, number(b).ok_or_else(bad)?)
            } else {
                return Err(bad());
            };
            if hi <= lo {
                return Err(RangesError::new(item, "the range is empty"));
            }
            out.add(lo, hi);
        }
        Ok(out)
    }

    /// Adds [lo, hi), merging with the ranges it touches.
    pub fn add(&mut self, lo: u64, hi: u64) {
        self.0.push((lo, hi));
        self.0.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.0.len());
        for &(a, b) in &self.0 {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        self.0 = merged;
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.0
    }

    /// Whether an access of `size` bytes at `addr` touches a range.
    #[inline]
    pub fn touches(&self, addr: u64, size: u32) -> bool {
        let end = addr.saturating_add(size.max(1) as u64);
        // The first range ending after addr is the only candidate.
        let i = self.0.partition_point(|&(_, hi)| hi <= addr);
        self.0.get(i).is_some_and(|&(lo, _)| lo < end)
    }
}

/// Address ranges that do not parse: the item at fault (the whole text when it is the list
/// that is wrong) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{item}': {why}")]
pub struct RangesError {
    pub item: String,
    why: String,
}

impl RangesError {
    fn new(item: &str, why: impl std::fmt::Display) -> RangesError {
        RangesError { item: item.to_string(), why: why.to_string() }
    }
}

fn number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A trace read without the accesses that touch `ranges`. Positions are those of the
/// accesses kept: an event keeps its place before the next kept access.
pub struct Excluding<S> {
    inner: S,
    ranges: Ranges,
    raw: Chunk,
    /// Accesses kept so far (the next chunk's first position).
    kept: u64,
    /// Accesses left out so far.
    pub excluded: u64,
}

impl<S: TraceSource> Excluding<S> {
    /// `inner` may be borrowed (`&mut dyn TraceSource`) or owned (`Box<dyn TraceSource>`).
    pub fn new(inner: S, ranges: Ranges) -> Self {
        Excluding { inner, ranges, raw: Chunk::default(), kept: 0, excluded: 0 }
    }
}

impl<S: TraceSource> TraceSource for Excluding<S> {
    fn metadata(&self) -> &Metadata {
        self.inner.metadata()
    }

    /// The unfiltered count: an upper bound, for progress and sizing.
    fn access_count_hint(&self) -> Option<u64> {
        self.inner.access_count_hint()
    }

    fn truncated_at(&self) -> Option<u64> {
        self.inner.truncated_at()
    }

    fn next_chunk(&mut self, out: &mut Chunk) -> Result<bool> {
        out.clear();
        out.first_access = self.kept;
        loop {
            if !self.inner.next_chunk(&mut self.raw)? {
                return Ok(false);
            }
            self.excluded += keep_outside(&self.ranges, &self.raw, out, &mut self.kept);
            // A chunk whose accesses were all left out and that has no events is skipped.
            if !out.accesses.is_empty() || !out.events.is_empty() {
                return Ok(true);
            }
        }
    }
}

/// Appends to `out` the accesses of `raw` that touch none of `ranges`, and its events at
/// their place among them; `kept` counts the accesses kept so far (the position of the next
/// one). Returns how many accesses were left out.
pub fn keep_outside(ranges: &Ranges, raw: &Chunk, out: &mut Chunk, kept: &mut u64) -> u64 {
    let a = &raw.accesses;
    let mut excluded = 0;
    let mut events = raw.events.iter().peekable();
    for i in 0..a.len() {
        let at = raw.first_access + i as u64;
        while let Some(e) = events.next_if(|e| e.at <= at) {
            out.events.push(crate::Event { at: *kept, ..e.clone() });
        }
        let (addr, size) = (a.addr[i], a.size(i));
        if ranges.touches(addr, size) {
            excluded += 1;
            continue;
        }
        out.accesses.push(crate::Access {
            thread: a.thread[i],
            addr,
            size,
            kind: if a.is_write(i) { crate::Kind::Write } else { crate::Kind::Read },
        });
        *kept += 1;
    }
    for e in events {
        out.events.push(crate::Event { at: *kept, ..e.clone() });
    }
    excluded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, EventKind, MemoryTrace};

    #[test]
    fn ranges_parse_merge_and_match() {
        let r = Ranges::parse("0x100+16, 0x108-0x120,4096+8").unwrap();
        assert_eq!(r.ranges(), &[(0x100, 0x120), (4096, 4104)]);
        assert!(r.touches(0x11f, 1) && r.touches(0xfc, 8) && r.touches(4100, 4));
        assert!(!r.touches(0xf8, 8) && !r.touches(0x120, 8) && !r.touches(4104, 8));
        for bad in ["0x10", "0x20-0x10", "x+1", "5+0"] {
            assert!(Ranges::parse(bad).is_err(), "{bad}");
        }
        // The item at fault, as data and in the message.
        let e = Ranges::parse("0x100+16, 0x20-0x10").unwrap_err();
        assert_eq!((e.item.as_str(), e.to_string().as_str()), ("0x20-0x10", "'0x20-0x10': the range is empty"));
    }

    /// Every kept access in order, the excluded ones counted, events before the same kept
    /// access as before (checked against filtering the access list by hand).
    #[test]
    fn excluded_accesses_leave_and_events_keep_their_place() {
        let mut t = MemoryTrace::new(Default::default()).with_chunk_accesses(7);
        let mut expect = Vec::new();
        let mut expect_events = Vec::new();
        for i in 0..100u64 {
            if i % 10 == 0 {
                t.event((i % 3) as u32, EventKind::PhaseChange, i, "");
                expect_events.push(expect.len() as u64);
            }
            let addr = if i % 3 == 0 { 0x5000 } else { 0x1000 + 8 * i };
            let a = Access::write((i % 4) as u32, addr, 8);
            t.access(a);
            if addr != 0x5000 {
                expect.push(a);
            }
        }
        let mut ex = Excluding::new(&mut t, Ranges::parse("0x5000+8").unwrap());
        let (mut got, mut events) = (Vec::new(), Vec::new());
        let mut c = Chunk::default();
        while ex.next_chunk(&mut c).unwrap() {
            assert_eq!(c.first_access, got.len() as u64);
            got.extend(c.accesses.iter());
            events.extend(c.events.iter().map(|e| e.at));
        }
        assert_eq!(got, expect);
        assert_eq!(events, expect_events);
        assert_eq!(ex.excluded, 34);
    }
}
