//! A page size that every analysis can divide and shift by: a power of two within the range
//! real machines and seed 004's sweeps use.

use serde::Serialize;

/// Page size in bytes: a power of two from [`PageSize::MIN`] to [`PageSize::MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct PageSize(u64);

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("page size {0}: expected a power of two from 64 bytes to 1 GiB")]
pub struct PageSizeError(pub u64);

impl PageSize {
    /// One cache line: the smallest block a page-level analysis makes sense at.
    pub const MIN: u64 = 64;
    /// 1 GiB, the largest huge page of current processors.
    pub const MAX: u64 = 1 << 30;
    pub const DEFAULT: PageSize = PageSize(4096);

    pub fn new(bytes: u64) -> Result<PageSize, PageSizeError> {
        if bytes.is_power_of_two() && (Self::MIN..=Self::MAX).contains(&bytes) {
            Ok(PageSize(bytes))
        } else {
            Err(PageSizeError(bytes))
        }
    }

    pub fn bytes(self) -> u64 {
        self.0
    }

    /// log2 of the size: `addr >> shift` is the page number.
    pub fn shift(self) -> u32 {
        self.0.trailing_zeros()
    }

    #[inline]
    pub fn number(self, addr: u64) -> u64 {
        addr >> self.shift()
    }
}

impl Default for PageSize {
    fn default() -> Self {
        PageSize::DEFAULT
    }
}

impl std::fmt::Display for PageSize {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_powers_of_two_in_range() {
        for ok in [64, 4096, 2 << 20, 1 << 30] {
            assert_eq!(PageSize::new(ok).unwrap().bytes(), ok);
        }
        for bad in [0, 1, 32, 4095, 4097, 1 << 31, (1 << 63) + 1, u64::MAX] {
            assert_eq!(PageSize::new(bad), Err(PageSizeError(bad)));
        }
        let p = PageSize::new(4096).unwrap();
        assert_eq!((p.shift(), p.number(0x2fff)), (12, 2));
    }
}
