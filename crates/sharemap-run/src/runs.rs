//! The runs file: every run's time, a row each (`configuration,run,seconds`), as
//! `sharemap run --csv` writes it and `sharemap report --runs` reads it back; pandas reads
//! it as is.

use crate::measure::{ConfigurationResult, compare};
use sharemap::{Error, ErrorKind, Result};
use std::path::Path;

/// The header line of a runs file.
pub const HEADER: &str = "configuration,run,seconds";

/// Writes every run's time of `results` to `path` whole, or nothing (a temporary file
/// renamed into place).
pub fn write(path: &Path, results: &[ConfigurationResult]) -> Result<()> {
    let mut text = format!("{HEADER}\n");
    for r in results {
        for (i, s) in r.seconds.iter().enumerate() {
            text.push_str(&format!("{},{},{s}\n", r.name, i + 1));
        }
    }
    sharemap::trace::write_whole(path, text.as_bytes())?;
    Ok(())
}

/// Each configuration's times, in its order of first appearance, compared as a
/// measurement compares them (the first is the baseline). A bad line is refused with its
/// number.
pub fn read(path: &Path) -> Result<Vec<ConfigurationResult>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::new(ErrorKind::Results, format!("{}: {e}", path.display())))?;
    parse(&text, &path.display().to_string())
}

/// The runs of a file's text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Vec<ConfigurationResult>> {
    let bad = |why: String| Error::new(ErrorKind::Results, why);
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, head)) if head.trim() == HEADER => {}
        _ => return Err(bad(format!("{file} line 1: expected the header {HEADER} (sharemap run --csv)"))),
    }
    let mut named: Vec<(String, Vec<f64>)> = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let at = format!("{file} line {}", i + 1);
        // A configuration's name may hold commas (`marathe:every=K,...`): the last two
        // fields are the run and its time.
        let mut fields = line.rsplitn(3, ',');
        let (Some(seconds), Some(_run), Some(name)) = (fields.next(), fields.next(), fields.next()) else {
            return Err(bad(format!("{at}: expected {HEADER}")));
        };
        let seconds: f64 = seconds.trim().parse().map_err(|_| bad(format!("{at}: '{seconds}' is not a time")))?;
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(bad(format!("{at}: '{seconds}' is not a time in seconds")));
        }
        match named.iter_mut().find(|(n, _)| n == name) {
            Some((_, times)) => times.push(seconds),
            None => named.push((name.to_string(), vec![seconds])),
        }
    }
    if named.is_empty() {
        return Err(bad(format!("{file}: no runs")));
    }
    Ok(compare(named))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is written reads back as the same times, names with commas included.
    #[test]
    fn runs_round_trip() {
        let results = compare(vec![
            ("os".into(), vec![1.5, 1.25, 1.75]),
            ("marathe:every=10,cache-kb=64".into(), vec![1.0, 0.5, 0.125]),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.csv");
        write(&path, &results).unwrap();
        let back = read(&path).unwrap();
        let times =
            |r: &[ConfigurationResult]| r.iter().map(|r| (r.name.clone(), r.seconds.clone())).collect::<Vec<_>>();
        assert_eq!(times(&back), times(&results));
        assert_eq!(back[1].normalized, results[1].normalized);
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, says) in [
            ("configuration,seconds\n", "f line 1: expected the header"),
            ("configuration,run,seconds\nos,1,1.0\nos,2,fast\n", "f line 3: 'fast' is not a time"),
            ("configuration,run,seconds\nos,1,-1\n", "f line 2: '-1' is not a time in seconds"),
            ("configuration,run,seconds\nos\n", "f line 2: expected configuration,run,seconds"),
            ("configuration,run,seconds\n", "f: no runs"),
        ] {
            let e = parse(text, "f").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Results);
            assert!(e.why().starts_with(says), "{text:?}: {}", e.why());
        }
    }
}
