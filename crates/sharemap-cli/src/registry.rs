//! `sharemap policies|detectors|algorithms|mechanisms`: a registry listed the same way for
//! each kind.

use sharemap::registry::Param;

/// One registry row as listed.
pub struct Row<'a> {
    pub name: &'a str,
    pub source: &'a str,
    pub summary: &'a str,
    pub params: &'a [Param],
}

impl<'a> Row<'a> {
    pub fn of(r: &'a sharemap::registry::Row) -> Row<'a> {
        Row { name: r.name, source: r.source, summary: r.summary, params: r.params }
    }
}

/// A parameter as a spec writes it: `name:key=default` (or `name:key` for a switch).
pub fn spec_form(name: &str, p: &Param) -> String {
    if p.default.is_empty() { format!("{name}:{}", p.key) } else { format!("{name}:{}={}", p.key, p.default) }
}

pub fn header(kind: &str) {
    println!("{kind:<28} source");
}

/// Name and source, the summary, then each parameter as `how` writes it and its meaning.
pub fn rows<'a>(rows: impl Iterator<Item = Row<'a>>, how: impl Fn(&str, &Param) -> String) {
    for r in rows {
        println!("{:<28} {}", r.name, r.source);
        println!("{:<28}   {}", "", r.summary);
        for p in r.params {
            println!("{:<28}   {}   {}", "", how(r.name, p), p.doc);
        }
    }
}
