//! The sharing matrix: for each pair of threads, how much data they share (symmetric), and
//! the file formats other tools use for it.

use std::fmt::Write as _;
use std::path::Path;

/// A symmetric threads x threads matrix of sharing amounts (diagonal unused, zero). It
/// serialises as `{threads, cells}`, the cells row by row.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SharingMatrix {
    #[serde(rename = "threads")]
    n: usize,
    cells: Vec<f64>,
}

/// A matrix file that cannot be read: which file, which line when one is to blame, what kind
/// of problem; its message says all three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct MatrixError {
    pub kind: MatrixErrorKind,
    pub path: std::path::PathBuf,
    pub line: Option<usize>,
    message: String,
}

/// What is wrong with a matrix file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatrixErrorKind {
    /// It cannot be read (missing, unreadable).
    Io,
    /// Larger than any matrix sharemap reads, or more rows or columns than threads it takes.
    TooLarge,
    /// Not UTF-8 text.
    NotText,
    /// No rows.
    Empty,
    /// A row whose length is not the number of rows.
    NotSquare,
    /// A field that is not a finite, non-negative number.
    NotACount,
}

impl MatrixError {
    fn new(kind: MatrixErrorKind, path: &Path, line: Option<usize>, what: impl std::fmt::Display) -> MatrixError {
        let at = line.map_or(String::new(), |l| format!(":{l}"));
        MatrixError { kind, path: path.to_path_buf(), line, message: format!("{}{at}: {what}", path.display()) }
    }
}

impl SharingMatrix {
    pub fn new(n: usize) -> Self {
        SharingMatrix { n, cells: vec![0.0; n * n] }
    }

    pub fn threads(&self) -> usize {
        self.n
    }

    #[inline]
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.cells[i * self.n + j]
    }

    /// Adds `v` to the pair (i, j), both ways; pairs of a thread with itself are ignored.
    #[inline]
    pub fn add(&mut self, i: usize, j: usize, v: f64) {
        if i != j {
            self.cells[i * self.n + j] += v;
            self.cells[j * self.n + i] += v;
        }
    }

    /// Multiplies each pair's cell by `factor(i, j)` (a sample's weight: what one counted
    /// unit stands for).
    pub fn scale_pairs(&mut self, factor: impl Fn(usize, usize) -> f64) {
        for i in 0..self.n {
            for j in 0..self.n {
                self.cells[i * self.n + j] *= factor(i.min(j), i.max(j));
            }
        }
    }

    /// Grows the matrix to `n` threads (new rows and columns are zero).
    pub fn grow(&mut self, n: usize) {
        if n <= self.n {
            return;
        }
        let mut bigger = SharingMatrix::new(n);
        for i in 0..self.n {
            for j in 0..self.n {
                bigger.cells[i * n + j] = self.get(i, j);
            }
        }
        *self = bigger;
    }

    pub fn total(&self) -> f64 {
        self.cells.iter().sum::<f64>() / 2.0
    }

    pub fn max(&self) -> f64 {
        self.cells.iter().copied().fold(0.0, f64::max)
    }

    /// The pairs that share (i < j, with their sharing), the most sharing first (ties in
    /// pair order).
    pub fn sharing_pairs(&self) -> Vec<(usize, usize, f64)> {
        let mut pairs: Vec<(usize, usize, f64)> = (0..self.n)
            .flat_map(|i| (i + 1..self.n).map(move |j| (i, j)))
            .map(|(i, j)| (i, j, self.get(i, j)))
            .filter(|p| p.2 > 0.0)
            .collect();
        pairs.sort_by(|a, b| b.2.total_cmp(&a.2));
        pairs
    }

    /// The upper triangle (i < j), row by row: each pair once.
    pub fn pairs(&self) -> impl Iterator<Item = f64> + '_ {
        (0..self.n).flat_map(move |i| (i + 1..self.n).map(move |j| self.get(i, j)))
    }

    /// Mean squared error between the two matrices after scaling each to a maximum of 1
    /// (seed 002's accuracy measure), over the pairs.
    pub fn mse(&self, other: &SharingMatrix) -> f64 {
        let (a, b) = (self.max(), other.max());
        let (a, b) = (if a > 0.0 { a } else { 1.0 }, if b > 0.0 { b } else { 1.0 });
        let pairs: Vec<(f64, f64)> = self.pairs().zip(other.pairs()).collect();
        if pairs.is_empty() {
            return 0.0;
        }
        pairs.iter().map(|(x, y)| (x / a - y / b).powi(2)).sum::<f64>() / pairs.len() as f64
    }

    /// Pearson correlation of the pairs (NaN when either matrix is constant).
    pub fn correlation(&self, other: &SharingMatrix) -> f64 {
        let xs: Vec<f64> = self.pairs().collect();
        let ys: Vec<f64> = other.pairs().collect();
        let n = xs.len().min(ys.len()) as f64;
        let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
        let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
        for (x, y) in xs.iter().zip(&ys) {
            sxy += (x - mx) * (y - my);
            sxx += (x - mx) * (x - mx);
            syy += (y - my) * (y - my);
        }
        sxy / (sxx * syy).sqrt()
    }

    /// numalize's comm CSV: comma-separated, one row per thread from the last thread to the
    /// first, columns in thread order.
    pub fn to_numalize_csv(&self) -> String {
        let mut out = String::new();
        for i in (0..self.n).rev() {
            let row: Vec<String> = (0..self.n).map(|j| number(self.get(i, j))).collect();
            let _ = writeln!(out, "{}", row.join(","));
        }
        out
    }

    /// TopoMatch's .mat: whitespace-separated, one row per thread in thread order.
    pub fn to_topomatch(&self) -> String {
        let mut out = String::new();
        for i in 0..self.n {
            let row: Vec<String> = (0..self.n).map(|j| number(self.get(i, j))).collect();
            let _ = writeln!(out, "{}", row.join(" "));
        }
        out
    }

    /// Reads numalize comm CSV (rows in reverse thread order).
    pub fn from_numalize_csv(text: &str, origin: &Path) -> Result<Self, MatrixError> {
        let mut rows = parse_rows(text, origin, |l| l.split(',').collect())?;
        rows.reverse();
        Self::from_rows(rows, origin)
    }

    /// Reads a TopoMatch .mat file (rows in thread order).
    pub fn from_topomatch(text: &str, origin: &Path) -> Result<Self, MatrixError> {
        let rows = parse_rows(text, origin, |l| l.split_whitespace().collect())?;
        Self::from_rows(rows, origin)
    }

    /// Reads either format: `.mat` is TopoMatch, anything else numalize CSV.
    pub fn read(path: &Path) -> Result<Self, MatrixError> {
        let io = |e: std::io::Error| MatrixError::new(MatrixErrorKind::Io, path, None, e);
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_FILE_BYTES {
            let what =
                format!("{len} bytes is too large for a sharing matrix of at most {} threads", crate::MAX_THREADS);
            return Err(MatrixError::new(MatrixErrorKind::TooLarge, path, None, what));
        }
        let bytes = std::fs::read(path).map_err(io)?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            MatrixError::new(MatrixErrorKind::NotText, path, None, format!("not UTF-8 text (byte {at})"))
        })?;
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("mat")) {
            Self::from_topomatch(&text, path)
        } else {
            Self::from_numalize_csv(&text, path)
        }
    }

    fn from_rows(rows: Vec<(usize, Vec<f64>)>, origin: &Path) -> Result<Self, MatrixError> {
        let n = rows.len();
        if n == 0 {
            return Err(MatrixError::new(MatrixErrorKind::Empty, origin, None, "empty matrix"));
        }
        let mut m = SharingMatrix::new(n);
        for (i, (line, row)) in rows.iter().enumerate() {
            if row.len() != n {
                let what = format!("{} values in a row of a {n} x {n} matrix (it must be square)", row.len());
                return Err(MatrixError::new(MatrixErrorKind::NotSquare, origin, Some(*line), what));
            }
            for (j, &v) in row.iter().enumerate() {
                if i != j {
                    // Both halves are summed, so asymmetric inputs become symmetric.
                    m.cells[i * n + j] += v / 2.0;
                    m.cells[j * n + i] += v / 2.0;
                }
            }
        }
        Ok(m)
    }
}

/// Largest matrix file read: a 4096-thread matrix as text is under 400 MB.
const MAX_FILE_BYTES: u64 = 1 << 30;

/// Non-empty lines as (line number, numbers), each number checked.
fn parse_rows<'a>(
    text: &'a str,
    origin: &Path,
    split: impl Fn(&'a str) -> Vec<&'a str>,
) -> Result<Vec<(usize, Vec<f64>)>, MatrixError> {
    let max = crate::MAX_THREADS as usize;
    let too_many = |line_no: usize| {
        let what = format!("more than {max} threads (a matrix has at most {max} rows)");
        MatrixError::new(MatrixErrorKind::TooLarge, origin, Some(line_no), what)
    };
    let mut rows = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let line_no = k + 1;
        if line.trim().is_empty() {
            continue;
        }
        if rows.len() == max {
            return Err(too_many(line_no));
        }
        let mut row = Vec::new();
        for field in split(line) {
            if row.len() == max {
                return Err(too_many(line_no));
            }
            let f = field.trim();
            // Quoted in errors: at most 40 characters of a field.
            let quoted = || f.char_indices().nth(40).map_or(f, |(end, _)| &f[..end]);
            let v: f64 = f.parse().ok().filter(|v: &f64| v.is_finite()).ok_or_else(|| {
                MatrixError::new(
                    MatrixErrorKind::NotACount,
                    origin,
                    Some(line_no),
                    format!("'{}' is not a number", quoted()),
                )
            })?;
            if v < 0.0 {
                let what = format!("negative value {}", quoted());
                return Err(MatrixError::new(MatrixErrorKind::NotACount, origin, Some(line_no), what));
            }
            row.push(v);
        }
        rows.push((line_no, row));
    }
    Ok(rows)
}

/// Integers without a fraction, other values as Rust prints them.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> SharingMatrix {
        let mut m = SharingMatrix::new(3);
        m.add(0, 1, 5.0);
        m.add(1, 2, 2.0);
        m
    }

    proptest! {
        /// Every sharing pair once, none that does not share, the most first.
        #[test]
        fn sharing_pairs_are_the_nonzero_pairs_by_size(cells in proptest::collection::vec(0u8..4, 15)) {
            let mut m = SharingMatrix::new(6);
            let all: Vec<(usize, usize)> = (0..6).flat_map(|i| (i + 1..6).map(move |j| (i, j))).collect();
            for (&(i, j), &v) in all.iter().zip(&cells) {
                m.add(i, j, v as f64);
            }
            let pairs = m.sharing_pairs();
            prop_assert_eq!(pairs.len(), cells.iter().filter(|&&v| v > 0).count());
            prop_assert!(pairs.windows(2).all(|w| w[0].2 >= w[1].2));
            prop_assert!(pairs.iter().all(|&(i, j, v)| i < j && m.get(i, j) == v && v > 0.0));
        }
    }

    #[test]
    fn numalize_rows_come_last_thread_first() {
        let m = sample();
        assert_eq!(m.to_numalize_csv(), "0,2,0\n5,0,2\n0,5,0\n");
        assert_eq!(m.to_topomatch(), "0 5 0\n5 0 2\n0 2 0\n");
        let p = Path::new("m.csv");
        assert_eq!(SharingMatrix::from_numalize_csv(&m.to_numalize_csv(), p).unwrap(), m);
        assert_eq!(SharingMatrix::from_topomatch(&m.to_topomatch(), Path::new("m.mat")).unwrap(), m);
    }

    #[test]
    fn bad_matrices_are_located() {
        let p = Path::new("x.csv");
        let err = |t: &str| {
            let e = SharingMatrix::from_numalize_csv(t, p).unwrap_err();
            (e.to_string(), e.kind, e.line)
        };
        use MatrixErrorKind::{Empty, NotACount, NotSquare};
        let square = "x.csv:2: 3 values in a row of a 2 x 2 matrix (it must be square)";
        assert_eq!(err("0,1\n1,0,3\n"), (square.into(), NotSquare, Some(2)));
        assert_eq!(err("0,1\n-1,0\n"), ("x.csv:2: negative value -1".into(), NotACount, Some(2)));
        assert_eq!(err("0,a\n1,0\n"), ("x.csv:1: 'a' is not a number".into(), NotACount, Some(1)));
        assert_eq!(err("\n\n"), ("x.csv: empty matrix".into(), Empty, None));
        let e = SharingMatrix::from_topomatch("1 2\n3", Path::new("y.mat")).unwrap_err();
        assert!(e.to_string().starts_with("y.mat:2:") && e.path == Path::new("y.mat"), "{e}");
    }

    #[test]
    fn accuracy_measures() {
        let m = sample();
        assert_eq!(m.mse(&m), 0.0);
        assert!((m.correlation(&m) - 1.0).abs() < 1e-12);
        let mut scaled = SharingMatrix::new(3);
        scaled.add(0, 1, 50.0);
        scaled.add(1, 2, 20.0);
        assert!(m.mse(&scaled) < 1e-12, "scaling does not matter");
        let mut other = SharingMatrix::new(3);
        other.add(0, 2, 1.0);
        // Pairs (0,1), (0,2), (1,2): m = (5, 0, 2) / 5, other = (0, 1, 0).
        let expect = ((1.0f64).powi(2) + (1.0f64).powi(2) + (0.4f64).powi(2)) / 3.0;
        assert!((m.mse(&other) - expect).abs() < 1e-12);
        assert!(m.correlation(&other) < 0.0);
    }

    proptest! {
        #[test]
        fn both_formats_round_trip(n in 1usize..12, cells in prop::collection::vec(0u32..1000, 0..80)) {
            let mut m = SharingMatrix::new(n);
            for (k, &v) in cells.iter().enumerate() {
                m.add(k % n, (k / n) % n, v as f64);
            }
            let p = Path::new("p");
            prop_assert_eq!(SharingMatrix::from_numalize_csv(&m.to_numalize_csv(), p).unwrap(), m.clone());
            prop_assert_eq!(SharingMatrix::from_topomatch(&m.to_topomatch(), p).unwrap(), m);
        }
    }
}
