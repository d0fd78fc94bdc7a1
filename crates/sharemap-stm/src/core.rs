//! The transactional core: the clock, the lock array, and one transaction's read and write
//! sets. Memory is accessed as machine words (`Word`) through atomics, so that a
//! transaction racing a committer reads a whole word, checked afterwards against its lock.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A machine word, the unit the STM reads and writes.
pub type Word = usize;

/// Why a transaction must roll back and retry (TinySTM's implicit abort reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abort {
    /// A location it reads is locked by another writer.
    ReadWrite,
    /// A location it writes is locked by another writer.
    WriteWrite,
    /// A value it read changed, so its snapshot could not be extended.
    ValidateRead,
    /// At commit, a value it read has changed.
    Validate,
}

/// Lock word: bit 0 set when owned (the rest is the owner's id), else the version << 1.
const OWNED: usize = 1;

/// An STM instance: its clock and lock array (a program has one, shared by all threads).
pub struct Stm {
    clock: AtomicU64,
    locks: Box<[AtomicUsize]>,
    /// log2 of the number of locks.
    bits: u32,
    next_id: AtomicUsize,
}

impl Stm {
    /// An STM with 2^`bits` locks (TinySTM's default is 2^20).
    pub fn new(bits: u32) -> Stm {
        let locks = (0..1usize << bits).map(|_| AtomicUsize::new(0)).collect();
        Stm { clock: AtomicU64::new(0), locks, bits, next_id: AtomicUsize::new(1) }
    }

    /// The current clock value.
    pub fn clock(&self) -> u64 {
        self.clock.load(Ordering::Acquire)
    }

    /// The lock covering an address (words of 8 bytes share none).
    fn lock_of(&self, addr: usize) -> usize {
        let word = addr >> 3;
        // Fibonacci hashing spreads neighbouring words over the array.
        (word.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - self.bits)) & ((1 << self.bits) - 1)
    }

    /// A new transaction context for one thread (reused across its transactions).
    pub fn thread(&self) -> Tx<'_> {
        // Ids are even (shifted left), so that the owned bit of a lock word stays free.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) << 1;
        Tx { stm: self, id, start: 0, end: 0, reads: Vec::new(), writes: Vec::new(), owned: Vec::new() }
    }
}

/// One thread's transaction state.
pub struct Tx<'a> {
    stm: &'a Stm,
    /// This context's owner id (even; the owned bit is added in lock words).
    id: usize,
    /// The snapshot: every value read is valid at all times in start..=end.
    start: u64,
    end: u64,
    /// Locks read and the version seen.
    reads: Vec<(usize, usize)>,
    /// Buffered writes: address and value, in order (a later write to an address wins).
    writes: Vec<(usize, Word)>,
    /// Locks taken and the lock word each held before.
    owned: Vec<(usize, usize)>,
}

impl Tx<'_> {
    /// Starts a transaction: its snapshot is the clock now.
    pub fn begin(&mut self) {
        self.reads.clear();
        self.writes.clear();
        self.owned.clear();
        self.start = self.stm.clock();
        self.end = self.start;
    }

    fn owner_word(&self) -> usize {
        self.id | OWNED
    }

    /// Reads a word.
    ///
    /// # Safety
    /// `addr` is a valid, aligned word that every thread accesses through the STM (or
    /// atomically) while transactions may touch it.
    pub unsafe fn load(&mut self, addr: *const Word) -> Result<Word, Abort> {
        let a = addr as usize;
        let lock = &self.stm.locks[self.stm.lock_of(a)];
        loop {
            let before = lock.load(Ordering::Acquire);
            if before == self.owner_word() {
                // Ours: the latest buffered value, else memory (unchanged while we hold it).
                if let Some(&(_, v)) = self.writes.iter().rev().find(|(w, _)| *w == a) {
                    return Ok(v);
                }
                // SAFETY: as the caller promises; read atomically as a word.
                return Ok(unsafe { (*(addr as *const AtomicUsize)).load(Ordering::Acquire) });
            }
            if before & OWNED != 0 {
                return Err(Abort::ReadWrite);
            }
            // SAFETY: as the caller promises; read atomically as a word.
            let value = unsafe { (*(addr as *const AtomicUsize)).load(Ordering::Acquire) };
            if lock.load(Ordering::Acquire) != before {
                continue; // a commit went through meanwhile: read again
            }
            let version = (before >> 1) as u64;
            if version > self.end {
                // Newer than the snapshot: extend it if all reads still hold, then retry.
                self.extend()?;
                continue;
            }
            self.reads.push((self.stm.lock_of(a), before));
            return Ok(value);
        }
    }

    /// Writes a word (buffered until commit; its lock is taken now).
    ///
    /// # Safety
    /// As `load`.
    pub unsafe fn store(&mut self, addr: *mut Word, value: Word) -> Result<(), Abort> {
        let a = addr as usize;
        let index = self.stm.lock_of(a);
        let lock = &self.stm.locks[index];
        let mine = self.owner_word();
        loop {
            let current = lock.load(Ordering::Acquire);
            if current == mine {
                break;
            }
            if current & OWNED != 0 {
                return Err(Abort::WriteWrite);
            }
            if (current >> 1) as u64 > self.end {
                self.extend()?;
                continue;
            }
            if lock.compare_exchange(current, mine, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                self.owned.push((index, current));
                break;
            }
        }
        self.writes.push((a, value));
        Ok(())
    }

    /// Whether every read still holds: its lock unchanged, or now ours with the version
    /// we read before taking it.
    fn valid(&self) -> bool {
        self.reads.iter().all(|&(index, seen)| {
            let now = self.stm.locks[index].load(Ordering::Acquire);
            now == seen
                || (now == self.owner_word() && self.owned.iter().any(|&(i, before)| i == index && before == seen))
        })
    }

    /// Moves the snapshot's end to the clock now, if every read still holds.
    fn extend(&mut self) -> Result<(), Abort> {
        let now = self.stm.clock();
        if self.valid() {
            self.end = now;
            Ok(())
        } else {
            self.rollback();
            Err(Abort::ValidateRead)
        }
    }

    /// Commits: a read-only transaction is done; a writer takes a new clock value, checks
    /// its reads (unless no other writer committed since its snapshot), writes back and
    /// releases its locks with the new version.
    pub fn commit(&mut self) -> Result<(), Abort> {
        if self.owned.is_empty() {
            return Ok(());
        }
        let version = self.stm.clock.fetch_add(1, Ordering::AcqRel) + 1;
        if version > self.end + 1 && !self.valid() {
            self.rollback();
            return Err(Abort::Validate);
        }
        for &(addr, value) in &self.writes {
            // SAFETY: `store` was given a valid word; we hold its lock.
            unsafe { (*(addr as *const AtomicUsize)).store(value, Ordering::Release) };
        }
        let released = (version as usize) << 1;
        for &(index, _) in &self.owned {
            self.stm.locks[index].store(released, Ordering::Release);
        }
        self.owned.clear();
        self.writes.clear();
        Ok(())
    }

    /// Drops the buffered writes and gives back the locks as they were.
    pub fn rollback(&mut self) {
        for &(index, before) in &self.owned {
            self.stm.locks[index].store(before, Ordering::Release);
        }
        self.owned.clear();
        self.writes.clear();
        self.reads.clear();
    }

    /// Runs `body` as a transaction until it commits; its result.
    pub fn atomically<T>(&mut self, mut body: impl FnMut(&mut Self) -> Result<T, Abort>) -> T {
        loop {
            self.begin();
            match body(self) {
                Ok(v) => {
                    if self.commit().is_ok() {
                        return v;
                    }
                }
                Err(_) => self.rollback(),
            }
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_sees_its_own_writes_and_commits_them() {
        let stm = Stm::new(10);
        let mut cell: Word = 5;
        let p = &mut cell as *mut Word;
        let mut tx = stm.thread();
        let seen = tx.atomically(|tx| {
            // SAFETY: a word on this stack, only this thread touches it.
            unsafe {
                tx.store(p, 7)?;
                let a = tx.load(p)?;
                tx.store(p, a + 1)?;
                tx.load(p)
            }
        });
        assert_eq!(seen, 8);
        assert_eq!(cell, 8);
        assert_eq!(stm.clock(), 1);
    }

    #[test]
    fn an_aborted_transaction_leaves_memory_and_locks_as_they_were() {
        let stm = Stm::new(10);
        let mut cell: Word = 5;
        let p = &mut cell as *mut Word;
        let (mut a, mut b) = (stm.thread(), stm.thread());
        a.begin();
        b.begin();
        // SAFETY: a word on this stack; both contexts run on this thread.
        unsafe {
            a.store(p, 9).unwrap();
            assert_eq!(b.load(p), Err(Abort::ReadWrite));
            assert_eq!(b.store(p, 1), Err(Abort::WriteWrite));
            a.rollback();
            assert_eq!(b.load(p), Ok(5));
        }
        assert_eq!(cell, 5);
    }

    /// Opacity and atomicity together: threads move money between accounts at random; every
    /// transaction (writers and read-only audits alike) sums all accounts, and must always
    /// see the total, even in transactions that later abort; the final total holds too.
    #[test]
    fn concurrent_transfers_never_show_an_inconsistent_snapshot() {
        const ACCOUNTS: usize = 64;
        const TOTAL: Word = ACCOUNTS * 100;
        let stm = Stm::new(8); // few locks: many share one, more conflicts
        let accounts: Vec<AtomicUsize> = (0..ACCOUNTS).map(|_| AtomicUsize::new(100)).collect();
        let addr = |i: usize| accounts[i].as_ptr() as *mut Word;
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let stm = &stm;
                let addr = &addr;
                s.spawn(move || {
                    let mut tx = stm.thread();
                    let mut seed = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    let mut next = move || {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed as usize
                    };
                    for round in 0..3000 {
                        let (from, to, amount) = (next() % ACCOUNTS, next() % ACCOUNTS, next() % 10);
                        tx.atomically(|tx| {
                            let mut sum = 0;
                            for i in 0..ACCOUNTS {
                                // SAFETY: the accounts outlive the scope; all access is transactional.
                                sum += unsafe { tx.load(addr(i))? };
                            }
                            assert_eq!(sum, TOTAL, "an inconsistent snapshot");
                            if round % 4 != 0 && from != to {
                                // SAFETY: as above.
                                unsafe {
                                    let f = tx.load(addr(from))?;
                                    if f >= amount {
                                        tx.store(addr(from), f - amount)?;
                                        let g = tx.load(addr(to))?;
                                        tx.store(addr(to), g + amount)?;
                                    }
                                }
                            }
                            Ok(())
                        });
                    }
                });
            }
        });
        assert_eq!(accounts.iter().map(|a| a.load(Ordering::Relaxed)).sum::<Word>(), TOTAL);
    }
}
