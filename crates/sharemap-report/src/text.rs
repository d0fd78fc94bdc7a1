//! A sharing matrix as text, for a terminal.

use crate::plot::log_level;
use sharemap::SharingMatrix;

/// The shades of the text heatmap, lightest first.
const SHADES: &[u8] = b".:-=+*#%@";

/// The matrix as text rows, one character per thread pair, darker for more sharing on the
/// plots' logarithmic scale (blank: none; `.`: a thousandth of the largest or less).
pub fn heatmap(m: &SharingMatrix) -> Vec<String> {
    let max = m.max();
    (0..m.threads())
        .map(|i| {
            (0..m.threads())
                .map(|j| match log_level(m.get(i, j), max) {
                    None => ' ',
                    Some(t) => SHADES[((t * (SHADES.len() - 1) as f64).round() as usize).min(SHADES.len() - 1)] as char,
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest pair is the darkest, nothing is blank, a thousandth of it the lightest.
    #[test]
    fn shades_follow_the_log_scale() {
        let mut m = SharingMatrix::new(3);
        m.add(0, 1, 1000.0);
        m.add(1, 2, 1.0);
        let rows = heatmap(&m);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].as_bytes()[1], b'@');
        assert_eq!(rows[1].as_bytes()[2], b'.');
        assert_eq!(rows[0].as_bytes()[2], b' ');
    }
}
