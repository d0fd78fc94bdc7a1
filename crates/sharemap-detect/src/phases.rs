//! Phase changes: the windows where the sharing pattern changes (seed 000's and numalize's
//! view of a program's phases).

use sharemap_core::SharingMatrix;

/// Windows over which a change must hold: a candidate window and the ones after it.
pub const PHASE_CONFIRM_WINDOWS: usize = 3;

/// Windows where the sharing pattern changes. A window starts a new phase when its pairs
/// correlate below `threshold` with the sharing accumulated since the last change, and so
/// do the candidate and the next windows taken together (`PHASE_CONFIRM_WINDOWS` in all).
/// The confirmation matters: one window often holds only part of a phase's pattern (a
/// thread meets its left neighbour at the start of its sweep and its right one at the end),
/// which alone correlates poorly with the whole. Windows without sharing are skipped.
/// Returns window indexes.
pub fn phase_changes(windows: &[SharingMatrix], threshold: f64) -> Vec<usize> {
    let mut out = Vec::new();
    let mut phase: Option<SharingMatrix> = None;
    let add = |acc: &mut SharingMatrix, w: &SharingMatrix| {
        let n = w.threads();
        acc.grow(n);
        for i in 0..n {
            for j in i + 1..n {
                acc.add(i, j, w.get(i, j));
            }
        }
    };
    for (k, w) in windows.iter().enumerate() {
        if w.total() == 0.0 {
            continue;
        }
        let Some(acc) = phase.as_mut() else {
            phase = Some(w.clone());
            continue;
        };
        let changed = acc.correlation(w) < threshold && {
            let mut ahead = w.clone();
            for next in windows.iter().skip(k + 1).take(PHASE_CONFIRM_WINDOWS - 1) {
                add(&mut ahead, next);
            }
            acc.correlation(&ahead) < threshold
        };
        if changed {
            out.push(k);
            phase = Some(w.clone());
        } else {
            add(acc, w);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_must_hold_over_the_next_windows() {
        let pairs = |list: &[(usize, usize)]| {
            let mut m = SharingMatrix::new(8);
            list.iter().for_each(|&(a, b)| m.add(a, b, 10.0));
            m
        };
        // A chain 0-1-2-3 whose windows each show part of it, with one window that shows
        // only 2-3: no change. Then 4-5 for good: one change, where it starts.
        let part_a = pairs(&[(0, 1), (1, 2)]);
        let part_b = pairs(&[(1, 2), (2, 3)]);
        let other = pairs(&[(4, 5)]);
        let windows = [
            part_a.clone(),
            part_b.clone(),
            pairs(&[(2, 3)]),
            part_a.clone(),
            part_b,
            other.clone(),
            other.clone(),
            other,
        ];
        assert_eq!(phase_changes(&windows, 0.5), vec![5]);
        // The lone 2-3 window alone correlates poorly with the phase so far (the two windows
        // before it): it is the confirmation that keeps it from being a change.
        let so_far = pairs(&[(0, 1), (1, 2), (1, 2), (2, 3)]);
        assert!(so_far.correlation(&pairs(&[(2, 3)])) < 0.5);
    }
}
