//! CSV traces: header `thread,addr,size,kind`, one access per line; addr as 0x-hex on export,
//! hex or decimal on import; kind R or W. Lines starting with '#' and blank lines are skipped.
//! CSV carries accesses only: events are dropped on export (the writer counts them).

use crate::batch::Chunk;
use crate::error::{Result, TraceError, excerpt};
use crate::model::{Access, Kind, MAX_THREADS, Metadata, Source};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

pub const HEADER: &str = "thread,addr,size,kind";

pub struct CsvReader {
    path: PathBuf,
    lines: BufReader<File>,
    line_no: u64,
    line: String,
    meta: Metadata,
    next_index: u64,
    pub chunk_accesses: usize,
}

impl CsvReader {
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let mut r = CsvReader {
            path: path.to_path_buf(),
            lines: BufReader::with_capacity(1 << 20, file),
            line_no: 0,
            line: String::new(),
            meta: Metadata::with_source(Source {
                kind: "import".into(),
                name: path.display().to_string(),
                ..Source::default()
            }),
            next_index: 0,
            chunk_accesses: crate::native::DEFAULT_CHUNK_ACCESSES,
        };
        match r.next_line()? {
            Some(h) if normalise_header(&h) == HEADER => Ok(r),
            Some(h) => Err(TraceError::malformed(
                path,
                r.line_no,
                format!("expected header '{HEADER}', found '{}'", excerpt(h.trim())),
            )),
            None => Err(TraceError::malformed(path, 1, format!("empty file (expected header '{HEADER}')"))),
        }
    }

    /// The next line that is not blank or a comment, trimmed. Lines are read up to
    /// `MAX_LINE` bytes, so a file without line ends cannot fill memory.
    fn next_line(&mut self) -> Result<Option<String>> {
        loop {
            self.line.clear();
            let mut bytes = std::mem::take(&mut self.line).into_bytes();
            let n = std::io::Read::take(&mut self.lines, MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut bytes)
                .map_err(|e| TraceError::io(&self.path, e))?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            let text = match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) => {
                    let at = e.utf8_error().valid_up_to();
                    return Err(TraceError::malformed(
                        &self.path,
                        self.line_no,
                        format!("not UTF-8 text (byte {} of the line)", at + 1),
                    ));
                }
            };
            self.line = text;
            let line = self.line.trim_end_matches(['\n', '\r']);
            if line.contains('\r') {
                return Err(TraceError::malformed(
                    &self.path,
                    self.line_no,
                    "carriage return inside a line: lines must end in LF or CRLF (convert with: tr '\\r' '\\n')",
                ));
            }
            if n > MAX_LINE && !self.line.ends_with('\n') {
                return Err(TraceError::malformed(
                    &self.path,
                    self.line_no,
                    format!("line longer than {MAX_LINE} bytes: '{}'", excerpt(line)),
                ));
            }
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            return Ok(Some(t.to_string()));
        }
    }
}

/// Longest line a CSV trace may have; an access line is under 60 bytes.
const MAX_LINE: usize = 4096;

fn normalise_header(h: &str) -> String {
    h.split(',').map(|f| f.trim().trim_matches('"').to_ascii_lowercase()).collect::<Vec<_>>().join(",")
}

impl crate::source::TraceSource for CsvReader {
    fn metadata(&self) -> &Metadata {
        &self.meta
    }

    fn next_chunk(&mut self, out: &mut Chunk) -> Result<bool> {
        out.clear();
        out.first_access = self.next_index;
        while out.accesses.len() < self.chunk_accesses {
            let Some(line) = self.next_line()? else { break };
            let a =
                parse_line(&line).map_err(|what| TraceError::malformed(&self.path, self.line_no, what.to_string()))?;
            self.meta.threads = self.meta.threads.max(a.thread + 1);
            out.accesses.push(a);
        }
        self.next_index += out.accesses.len() as u64;
        Ok(!out.accesses.is_empty())
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// One access of a CSV line, or what is wrong with the line.
pub fn parse_line(line: &str) -> std::result::Result<Access, LineError> {
    let mut f = line.split(',').map(|x| x.trim().trim_matches('"'));
    let (Some(t), Some(a), Some(s), Some(k), None) = (f.next(), f.next(), f.next(), f.next(), f.next()) else {
        return Err(LineError::Fields(excerpt(line)));
    };
    let thread = t.parse::<u32>().ok().filter(|&t| t < MAX_THREADS).ok_or_else(|| LineError::Thread(excerpt(t)))?;
    let addr = parse_u64(a).ok_or_else(|| LineError::Address(excerpt(a)))?;
    let size = s.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| LineError::Size(excerpt(s)))?;
    let kind = match k {
        "R" | "r" => Kind::Read,
        "W" | "w" => Kind::Write,
        _ => return Err(LineError::Kind(excerpt(k))),
    };
    Ok(Access { thread, addr, size, kind })
}

/// What is wrong with a CSV trace line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("expected 4 fields thread,addr,size,kind in '{0}'")]
    Fields(String),
    #[error("bad thread '{0}' (an integer below {max}: a trace holds at most {max} threads)", max = MAX_THREADS)]
    Thread(String),
    #[error("bad address '{0}' (0x-hex or decimal)")]
    Address(String),
    #[error("bad size '{0}' (bytes: an integer from 1 to 4294967295)")]
    Size(String),
    #[error("bad kind '{0}' (R or W)")]
    Kind(String),
}

pub struct CsvWriter<W: Write> {
    out: W,
    pub dropped_events: u64,
}

impl<W: Write> CsvWriter<W> {
    pub fn new(mut out: W) -> std::io::Result<Self> {
        writeln!(out, "{HEADER}")?;
        Ok(CsvWriter { out, dropped_events: 0 })
    }

    pub fn write_chunk(&mut self, chunk: &Chunk) -> std::io::Result<()> {
        self.dropped_events += chunk.events.len() as u64;
        let mut line = Vec::with_capacity(48);
        for a in chunk.accesses.iter() {
            line.clear();
            write!(line, "{},{:#x},{},{}", a.thread, a.addr, a.size, a.kind.letter())?;
            line.push(b'\n');
            self.out.write_all(&line)?;
        }
        Ok(())
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_in_hex_and_decimal() {
        assert_eq!(parse_line("3,0x10,8,W").unwrap(), Access { thread: 3, addr: 16, size: 8, kind: Kind::Write });
        assert_eq!(
            parse_line(" 0 , 4096 , 4 , r ").unwrap(),
            Access { thread: 0, addr: 4096, size: 4, kind: Kind::Read }
        );
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        for (line, what) in [
            ("1,2,3", "4 fields"),
            ("x,0x10,8,R", "bad thread"),
            ("-1,0x10,8,R", "bad thread"),
            ("1,0xzz,8,R", "bad address"),
            ("1,16,eight,R", "bad size"),
            ("1,16,0,R", "bad size '0' (bytes: an integer from 1"),
            ("1,16,8,X", "bad kind"),
            ("1,16,8,R,extra", "4 fields"),
            ("4096,16,8,R", "at most 4096 threads"),
            ("4294967295,16,8,R", "bad thread"),
        ] {
            assert!(parse_line(line).unwrap_err().to_string().contains(what), "{line}");
        }
        assert_eq!(parse_line("4095,16,8,R").unwrap().thread, 4095);
    }

    fn first_error(text: &[u8]) -> String {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        let mut r = match CsvReader::open(f.path()) {
            Ok(r) => r,
            Err(e) => return e.to_string(),
        };
        let mut c = Chunk::default();
        loop {
            match crate::source::TraceSource::next_chunk(&mut r, &mut c) {
                Err(e) => return e.to_string(),
                Ok(false) => return String::new(),
                Ok(true) => {}
            }
        }
    }

    #[test]
    fn odd_files_get_one_short_located_line() {
        let cr = first_error(b"thread,addr,size,kind\r1,0x10,8,R\r");
        assert!(cr.contains(":1: carriage return inside a line"), "{cr}");
        assert!(first_error(b"thread,addr,size,kind\r\n1,0x10,8,R\r\n").is_empty(), "CRLF is fine");
        let utf8 = first_error(b"thread,addr,size,kind\n1,0x10,8,R\n\xff,0x10,8,R\n");
        assert!(utf8.contains(":3: not UTF-8 text"), "{utf8}");
        let mut long = b"thread,addr,size,kind\n".to_vec();
        long.extend(std::iter::repeat_n(b'7', 10 << 20));
        let e = first_error(&long);
        assert!(e.contains(":2: line longer than 4096 bytes") && e.len() < 200, "{}", &e[..e.len().min(300)]);
    }
}
