//! LEB128 varints and zigzag mapping, used by every column of the native format.

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads one varint at `*pos`; `None` if the buffer ends first or the value overflows u64.
#[inline]
pub fn get(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    if first < 0x80 {
        *pos += 1;
        return Some(first as u64);
    }
    let mut value = (first & 0x7f) as u64;
    let mut shift = 7;
    let mut i = *pos + 1;
    loop {
        let b = *buf.get(i)?;
        i += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        value |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            *pos = i;
            return Some(value);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varint_round_trip(v in any::<u64>()) {
            let mut buf = Vec::new();
            put(&mut buf, v);
            let mut pos = 0;
            prop_assert_eq!(get(&buf, &mut pos), Some(v));
            prop_assert_eq!(pos, buf.len());
        }

        #[test]
        fn zigzag_round_trip(v in any::<i64>()) {
            prop_assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn small_magnitudes_stay_small() {
        assert_eq!(zigzag(0), 0);
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
        let mut buf = Vec::new();
        put(&mut buf, 127);
        assert_eq!(buf.len(), 1);
    }

    #[test]
    fn truncated_and_overlong_varints_are_rejected() {
        let mut pos = 0;
        assert_eq!(get(&[0x80, 0x80], &mut pos), None);
        let overlong = [0xffu8; 11];
        let mut pos = 0;
        assert_eq!(get(&overlong, &mut pos), None);
    }
}
