//! The tests' shadow of the data: which version of each line every core, shared cache and
//! memory holds, moved wherever the simulator says the data goes. A read that finds an
//! older version than the last write is a lost update.

use rustc_hash::FxHashMap;

#[derive(Default)]
pub struct Values {
    core: FxHashMap<(usize, u64), u64>,
    shared: FxHashMap<(usize, u64), u64>,
    memory: FxHashMap<u64, u64>,
    latest: FxHashMap<u64, u64>,
    writes: u64,
    /// The version a fetch brought, for the core that asked.
    incoming: Option<(usize, u64, u64)>,
    fetching: Option<(usize, u64)>,
    pub errors: Vec<String>,
}

impl Values {
    pub fn fetch_begin(&mut self, core: usize, line: u64) {
        self.fetching = Some((core, line));
        self.incoming = None;
    }

    fn bring(&mut self, v: u64) {
        if let Some((core, line)) = self.fetching {
            self.incoming = Some((core, line, v));
        }
    }

    pub fn served_by_core(&mut self, owner: usize) {
        let Some((_, line)) = self.fetching else { return };
        let v = self.core.get(&(owner, line)).copied();
        match v {
            Some(v) => self.bring(v),
            None => self.errors.push(format!("line {line}: served by core {owner}, which has no copy")),
        }
    }

    pub fn served_by_shared(&mut self, c: usize, line: u64) {
        match self.shared.get(&(c, line)).copied() {
            Some(v) => self.bring(v),
            None => self.errors.push(format!("line {line}: served by shared cache {c}, which has no copy")),
        }
    }

    pub fn served_by_memory(&mut self, line: u64) {
        let v = self.memory.get(&line).copied().unwrap_or(0);
        self.bring(v);
    }

    pub fn fill_shared(&mut self, c: usize, line: u64) {
        if let Some((_, l, v)) = self.incoming
            && l == line
        {
            self.shared.insert((c, line), v);
        }
    }

    pub fn core_access(&mut self, core: usize, line: u64, write: bool) {
        if let Some((c, l, v)) = self.incoming.take()
            && (c, l) == (core, line)
        {
            self.core.insert((core, line), v);
        }
        self.fetching = None;
        let Some(&have) = self.core.get(&(core, line)) else {
            self.errors.push(format!("line {line}: core {core} accessed it without a copy"));
            return;
        };
        let latest = self.latest.get(&line).copied().unwrap_or(0);
        if have != latest {
            self.errors.push(format!("line {line}: core {core} sees version {have}, the last write made {latest}"));
        }
        if write {
            self.writes += 1;
            self.core.insert((core, line), self.writes);
            self.latest.insert(line, self.writes);
        }
    }

    pub fn write_through(&mut self, shared_path: &[usize], line: u64) {
        self.writes += 1;
        self.memory.insert(line, self.writes);
        self.latest.insert(line, self.writes);
        for &c in shared_path {
            if self.shared.contains_key(&(c, line)) {
                self.shared.insert((c, line), self.writes);
            }
        }
        self.incoming = None;
        self.fetching = None;
    }

    pub fn core_to_memory(&mut self, core: usize, line: u64) {
        if let Some(&v) = self.core.get(&(core, line)) {
            self.memory.insert(line, v);
        }
    }

    pub fn shared_to_memory(&mut self, c: usize, line: u64) {
        if let Some(&v) = self.shared.get(&(c, line)) {
            self.memory.insert(line, v);
        }
    }

    pub fn core_to_shared(&mut self, core: usize, c: usize, line: u64) {
        if let Some(&v) = self.core.get(&(core, line)) {
            self.shared.insert((c, line), v);
        }
    }

    pub fn drop_core(&mut self, core: usize, line: u64) {
        self.core.remove(&(core, line));
    }

    pub fn drop_shared(&mut self, c: usize, line: u64) {
        self.shared.remove(&(c, line));
    }

    /// Reads through shared caches or memory (no private cache): checked where they land.
    pub fn check_uncached_read(&mut self, line: u64) {
        if let Some((_, l, v)) = self.incoming.take()
            && l == line
        {
            let latest = self.latest.get(&line).copied().unwrap_or(0);
            if v != latest {
                self.errors
                    .push(format!("line {line}: an uncached read sees version {v}, the last write made {latest}"));
            }
        }
        self.fetching = None;
    }
}
