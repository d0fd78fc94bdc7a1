//! Errors that name what went wrong and where (file, line or byte offset).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// Damaged data inside a complete part of a file (bad checksum, impossible values).
    #[error("{path}: corrupt {what} at byte {offset}")]
    Corrupt { path: PathBuf, offset: u64, what: String },
    /// A text input line that cannot be parsed.
    #[error("{path}:{line}: {what}")]
    Malformed { path: PathBuf, line: u64, what: String },
    /// Anything else about the input (unknown format, unsupported content).
    #[error("{path}: {what}")]
    Invalid { path: PathBuf, what: String },
    /// The reader's caller asked it to stop.
    #[error("interrupted")]
    Interrupted,
}

impl TraceError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        TraceError::Io { path: path.to_path_buf(), source }
    }
    pub fn corrupt(path: &Path, offset: u64, what: impl Into<String>) -> Self {
        TraceError::Corrupt { path: path.to_path_buf(), offset, what: what.into() }
    }
    pub fn malformed(path: &Path, line: u64, what: impl Into<String>) -> Self {
        TraceError::Malformed { path: path.to_path_buf(), line, what: what.into() }
    }
    pub fn invalid(path: &Path, what: impl Into<String>) -> Self {
        TraceError::Invalid { path: path.to_path_buf(), what: what.into() }
    }

    /// Exit status convention of the CLI: 2 for corruption, 1 for everything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            TraceError::Corrupt { .. } => 2,
            _ => 1,
        }
    }
}

/// `text` as an error message may quote it: control characters escaped (a CR-only file must
/// not repaint the terminal) and cut to 60 characters (a 10 MB line must not fill it).
pub fn excerpt(text: &str) -> String {
    const MAX: usize = 60;
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == MAX {
            out.push('…');
            break;
        }
        out.extend(c.escape_debug());
    }
    out
}

pub type Result<T> = std::result::Result<T, TraceError>;

impl From<sharemap_core::output::OutputError> for TraceError {
    fn from(e: sharemap_core::output::OutputError) -> Self {
        use sharemap_core::output::OutputError;
        match e {
            OutputError::Io { path, source } => TraceError::Io { path, source },
            OutputError::Invalid { path, what } => TraceError::Invalid { path, what },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::excerpt;

    #[test]
    fn excerpts_are_short_and_escaped() {
        assert_eq!(excerpt("1,0x10,8,R"), "1,0x10,8,R");
        assert_eq!(excerpt("a\rb"), "a\\rb");
        let long = "x".repeat(10_000);
        assert_eq!(excerpt(&long).chars().count(), 61);
    }
}
