//! The transactional core: the global clock, the lock array, and one transaction's read and
//! write sets. Memory is accessed as machine words (`Word`) through atomics, so that a
//! transaction racing a committer reads a whole word, checked afterwards against its lock.
//!
//! A lock word is either a version (`version << 1`, bit 0 clear: the clock value of the last
//! commit that wrote under it) or, while a writer holds it, bit 0 set, the owner's id in bits
//! 1..=16 and the index of the owner's first write under that lock above: the owner finds
//! its buffered writes under that lock in O(1), others only need to see that it is taken.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// A machine word, the unit the STM reads and writes.
pub type Word = usize;

/// log2 of the number of locks (TinySTM's default: 2^20).
pub const LOCK_BITS: u32 = 20;
/// log2 of the bytes one lock covers: 4 words, so the fields of a small node share a lock
/// (fewer locks to take and validate; TinySTM's default too).
pub const LOCK_GRANULE_BITS: u32 = 5;
/// The largest owner id (16 bits of the lock word); 0 is the owner of unit stores.
pub const MAX_OWNER: usize = (1 << 16) - 1;

const OWNED: usize = 1;
const OWNER_SHIFT: u32 = 1;
const INDEX_SHIFT: u32 = 17;
const NIL: u32 = u32::MAX;

#[repr(align(128))]
struct Padded<T>(T);

static CLOCK: Padded<AtomicU64> = Padded(AtomicU64::new(0));
static LOCKS: [AtomicUsize; 1 << LOCK_BITS] = [const { AtomicUsize::new(0) }; 1 << LOCK_BITS];
/// The owner id of the irrevocable transaction, if one runs (0: none).
static IRREVOCABLE: Padded<AtomicUsize> = Padded(AtomicUsize::new(0));
/// Whether that transaction is serial: no transaction starts while it runs.
static SERIAL: Padded<AtomicBool> = Padded(AtomicBool::new(false));

/// Advances the clock by one (`stm_inc_clock`).
pub fn inc_clock() {
    CLOCK.0.fetch_add(1, Ordering::AcqRel);
}

/// The current clock value.
#[inline]
pub fn clock() -> u64 {
    CLOCK.0.load(Ordering::Acquire)
}

/// The lock of the granule at `addr`. The bits above the table's reach are folded in: the
/// table covers 32 MiB, and glibc gives each thread an arena aligned to 64 MiB, so the
/// same offset in two threads' arenas (their nodes, allocated in the same order) would
/// otherwise always share a lock: two threads each reusing its freed node conflicted 20
/// times as often. Inside any aligned 32 MiB the map stays one to one.
#[inline]
fn lock_index(addr: usize) -> usize {
    let granule = addr >> LOCK_GRANULE_BITS;
    (granule ^ (granule >> LOCK_BITS)) & ((1 << LOCK_BITS) - 1)
}

#[inline]
fn version(lock: usize) -> u64 {
    (lock >> 1) as u64
}

#[inline]
fn owner(lock: usize) -> usize {
    (lock >> OWNER_SHIFT) & MAX_OWNER
}

/// The word at `addr`, as an atomic.
///
/// # Safety
/// `addr` is a valid, aligned word.
#[inline]
unsafe fn word<'a>(addr: usize) -> &'a AtomicUsize {
    // SAFETY: as the caller promises; AtomicUsize has the layout of usize.
    unsafe { &*(addr as *const AtomicUsize) }
}

/// Why a transaction must roll back (TinySTM's implicit abort reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abort {
    /// A location it reads is locked by another writer (TinySTM's WR conflict).
    ReadLocked,
    /// A location it writes is locked by another writer (WW conflict).
    WriteLocked,
    /// A location it read changed, so its snapshot could not be extended on a read.
    ValidateRead,
    /// ... or on a write.
    ValidateWrite,
    /// At commit, a location it read has changed.
    Validate,
    /// An irrevocable transaction runs: a writer gives way at commit.
    Irrevocable,
    /// A transaction started read-only writes (or must become irrevocable): it restarts as
    /// an update transaction (TinySTM's documented behaviour; its "other" reason code).
    ReadOnly,
}

impl Abort {
    /// Whether a read-only attempt can abort so and retry read-only: a conflict, not a
    /// write.
    pub fn is_reader_conflict(self) -> bool {
        matches!(self, Abort::ReadLocked | Abort::ValidateRead)
    }

    /// TinySTM's detailed reason code: `(1 << 6) | (k << 8)`.
    pub fn code(self) -> i32 {
        let k = match self {
            Abort::ReadLocked => 3,
            Abort::WriteLocked => 4,
            Abort::ValidateRead => 5,
            Abort::ValidateWrite => 6,
            Abort::Validate => 7,
            Abort::Irrevocable => 9,
            Abort::ReadOnly => 0xF,
        };
        (1 << 6) | (k << 8)
    }
}

/// A buffered write. The first write under a lock took the lock and remembers it (one
/// entry per store, as TinySTM's write set: no second list of locks to fill and walk).
#[derive(Clone, Copy)]
struct Write {
    addr: usize,
    value: Word,
    /// The bits of the word this transaction writes.
    mask: Word,
    /// For the first write under a lock: the lock word before we took it (a version),
    /// restored on rollback and what a read of ours under it must have seen. `NOT_FIRST`
    /// for the others.
    before: usize,
    lock: u32,
    /// The next write under the same lock.
    next: u32,
}

/// `Write::before` of a write that is not the first under its lock (a version is even).
const NOT_FIRST: usize = usize::MAX;

/// One thread's transaction state, reused across its transactions.
pub struct Tx {
    id: usize,
    /// The snapshot: every value read is valid at all times in start..=end.
    start: u64,
    end: u64,
    /// The latest end the reads were valid at (`end` unless `bound_end` lowered it since).
    /// A read's lock is unchanged exactly while it is free with a version at most this:
    /// a commit after the read took a later clock value (TL2's check, so a read is logged
    /// as its lock's index alone, four bytes).
    horizon: u64,
    /// The locks read, by index.
    reads: Vec<u32>,
    writes: Vec<Write>,
    /// Locks held: the writes that are first under their lock.
    locks: usize,
    irrevocable: bool,
    serial: bool,
    /// Whether a set grew beyond its first capacity (then `begin` shrinks them).
    grown: bool,
    /// Whether the snapshot may be extended (TinySTM's `no_extend` attribute clears it).
    pub can_extend: bool,
    /// A read-only attempt (TinySTM's `read_only` attribute): reads are not logged, so the
    /// snapshot cannot be extended (a read newer than it aborts) and there is nothing to
    /// validate at commit; a write aborts, and the transaction restarts as an update one.
    /// Set by the caller before `begin`, for each attempt (`first_attempt`, `retry`).
    pub read_only: bool,
    /// How this thread's read-only transactions retry.
    reader_retries: ReaderRetries,
    /// Whether the running attempt is a read-only transaction's retry with its reads
    /// logged: its extensions count in `reader_retries`.
    tallying: bool,
}

/// How a read-only transaction retries after a conflict. A retry that logs its reads can
/// extend its snapshot past later commits (a reader walking a list survives a write ahead
/// of it), but a logged read costs more than an unlogged one, and where extensions mostly
/// fail the log buys nothing: in TinySTM's bank a reader of every account extends one time
/// in three (each transfer touches two accounts, often ones it has read), restarts about
/// as often as unlogged retries do, and pays for the log besides. So each thread tallies
/// how its logged retries' extensions end, and logs while at least half succeed; one retry
/// in 16 logs regardless, so that a change of phase is seen.
#[derive(Default)]
struct ReaderRetries {
    extended: u32,
    failed: u32,
    retries: u32,
}

impl ReaderRetries {
    /// Whether the next retry logs its reads.
    fn logs_next(&mut self) -> bool {
        self.retries = self.retries.wrapping_add(1);
        self.extended >= self.failed || self.retries.is_multiple_of(16)
    }

    /// One extension's outcome; older outcomes weigh half at every 64.
    fn record(&mut self, extended: bool) {
        if extended {
            self.extended += 1;
        } else {
            self.failed += 1;
        }
        if self.extended + self.failed >= 64 {
            self.extended /= 2;
            self.failed /= 2;
        }
    }
}

impl Tx {
    /// A context with owner id `id` (1..=MAX_OWNER, unique among live contexts).
    pub fn new(id: usize) -> Tx {
        assert!((1..=MAX_OWNER).contains(&id), "owner id {id} out of range");
        Tx {
            id,
            start: 0,
            end: 0,
            horizon: 0,
            reads: Vec::with_capacity(1024),
            writes: Vec::with_capacity(256),
            locks: 0,
            irrevocable: false,
            serial: false,
            grown: false,
            can_extend: true,
            read_only: false,
            reader_retries: ReaderRetries::default(),
            tallying: false,
        }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    /// Makes the next attempt a transaction's first: read-only (its reads not logged) or not.
    #[inline]
    pub fn first_attempt(&mut self, read_only: bool) {
        self.read_only = read_only;
        self.tallying = false;
    }

    /// Makes the next attempt a retry. One of a read-only transaction that lost a conflict
    /// (`reader_conflict`) is read-only again or logs its reads, as `ReaderRetries` decides;
    /// any other is an update attempt (a read-only one that wrote, or made irrevocable).
    pub fn retry(&mut self, reader_conflict: bool) {
        self.read_only = reader_conflict && !self.reader_retries.logs_next();
        self.tallying = reader_conflict && !self.read_only;
    }

    /// Starts a transaction: its snapshot is the clock now.
    #[inline]
    pub fn begin(&mut self) {
        self.reads.clear();
        self.writes.clear();
        self.locks = 0;
        if self.grown {
            self.shrink();
        }
        self.can_extend = true;
        self.start = clock();
        self.end = self.start;
        self.horizon = self.start;
    }

    /// A huge transaction once does not keep its sets' memory for good.
    #[cold]
    #[inline(never)]
    fn shrink(&mut self) {
        const KEEP: usize = 1 << 16;
        self.reads.shrink_to(KEEP);
        self.writes.shrink_to(KEEP);
        self.grown = false;
    }

    /// The snapshot's start (the clock when the transaction began).
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The snapshot's end.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Lowers the snapshot's upper bound (`stm_set_extension` with a timestamp).
    pub fn bound_end(&mut self, end: u64) {
        self.end = self.end.min(end);
    }

    /// Read-set and write-set sizes: (reads, writes, locks held). A read-only attempt logs
    /// no reads.
    pub fn set_sizes(&self) -> (usize, usize, usize) {
        (self.reads.len(), self.writes.len(), self.locks)
    }

    pub fn is_read_only(&self) -> bool {
        self.writes.is_empty()
    }

    pub fn is_irrevocable(&self) -> bool {
        self.irrevocable
    }

    #[inline]
    fn owner_bits(&self) -> usize {
        OWNED | (self.id << OWNER_SHIFT)
    }

    /// Whether lock word `l` is held by this transaction.
    #[inline(always)]
    fn holds(&self, l: usize) -> bool {
        l & (OWNED | (MAX_OWNER << OWNER_SHIFT)) == self.owner_bits()
    }

    /// Our buffered value of `addr` under the lock whose first write of ours is `first`,
    /// merged with memory for the bits we do not write.
    #[inline]
    fn own_value(&self, first: usize, addr: usize) -> Word {
        let mut w = first as u32;
        while w != NIL {
            // SAFETY: a chain links entries of the write set (`chained`).
            let e = unsafe { self.chained(w) };
            if e.addr == addr {
                if e.mask == Word::MAX {
                    return e.value;
                }
                // SAFETY: `store` was given a valid word; we hold its lock, so no
                // transactional writer changes it.
                let mem = unsafe { word(addr) }.load(Ordering::Acquire);
                return (mem & !e.mask) | (e.value & e.mask);
            }
            w = e.next;
        }
        // SAFETY: as the caller of `load` promises.
        unsafe { word(addr) }.load(Ordering::Acquire)
    }

    /// The write-set entry `w` of a lock's chain. Entries are only added (a chain's links
    /// point back into the set, which is cleared with every lock released), so an index on a
    /// chain of a lock we hold is always inside it; unchecked, because a chain is walked on
    /// every read and write near a word the transaction wrote (kmeans' pairs of floats).
    ///
    /// # Safety
    /// `w` is the index of a lock we hold, or a `next` link of an entry of ours.
    #[inline(always)]
    unsafe fn chained(&self, w: u32) -> &Write {
        debug_assert!((w as usize) < self.writes.len());
        // SAFETY: as the caller promises.
        unsafe { self.writes.get_unchecked(w as usize) }
    }

    /// `chained`, to update the entry.
    ///
    /// # Safety
    /// As `chained`.
    #[inline(always)]
    unsafe fn chained_mut(&mut self, w: u32) -> &mut Write {
        debug_assert!((w as usize) < self.writes.len());
        // SAFETY: as the caller promises.
        unsafe { self.writes.get_unchecked_mut(w as usize) }
    }

    /// Reads a word.
    ///
    /// # Safety
    /// `addr` is a valid, aligned word that every thread accesses through the STM (or
    /// atomically) while transactions may touch it.
    #[inline(always)]
    pub unsafe fn load(&mut self, addr: usize) -> Result<Word, Abort> {
        // SAFETY: as the caller promises.
        match unsafe { self.load_fast(addr) } {
            Ok(v) => Ok(v),
            // SAFETY: as the caller promises.
            Err(_) => unsafe { self.load_slow(addr) },
        }
    }

    /// `load`'s common case, inlined into the caller: unlocked, inside the snapshot, room
    /// in the read set. Otherwise the lock word it saw, for `load_own`, then `load_slow`
    /// (kept out of line so that the fast path needs few registers and no stack frame).
    ///
    /// # Safety
    /// As `load`.
    #[inline(always)]
    pub unsafe fn load_fast(&mut self, addr: usize) -> Result<Word, usize> {
        let index = lock_index(addr);
        let lock = &LOCKS[index];
        let l = lock.load(Ordering::Acquire);
        if l & OWNED != 0 || version(l) > self.end {
            return Err(l);
        }
        // SAFETY: as the caller promises.
        let value = unsafe { word(addr) }.load(Ordering::Acquire);
        if lock.load(Ordering::Acquire) != l {
            return Err(l);
        }
        if self.read_only {
            return Ok(value);
        }
        let n = self.reads.len();
        if n == self.reads.capacity() {
            return Err(l);
        }
        // SAFETY: n < capacity, checked above; Read is Copy (no drop to skip).
        unsafe {
            self.reads.as_mut_ptr().add(n).write(index as u32);
            self.reads.set_len(n + 1);
        }
        Ok(value)
    }

    /// A read of a word under a lock this transaction holds (it wrote near it: the other
    /// half of a pair of floats, another field of a node), the commonest load off the fast
    /// path, given the lock word `load_fast` saw (a lock we hold stays ours until we release
    /// it); None when the lock is not ours. Kept apart from `load_slow`, whose frame and
    /// retry loop it does not need.
    ///
    /// # Safety
    /// As `load`.
    #[inline(always)]
    pub unsafe fn load_own(&self, l: usize, addr: usize) -> Option<Word> {
        self.holds(l).then(|| self.own_value(l >> INDEX_SHIFT, addr))
    }

    /// `load` when the lock is taken, newer than the snapshot, or changed while reading, or
    /// the read set is full.
    ///
    /// # Safety
    /// As `load`.
    #[inline(never)]
    #[cold]
    pub unsafe fn load_slow(&mut self, addr: usize) -> Result<Word, Abort> {
        let index = lock_index(addr);
        let lock = &LOCKS[index];
        loop {
            let l = lock.load(Ordering::Acquire);
            if l & OWNED != 0 {
                if owner(l) == self.id {
                    return Ok(self.own_value(l >> INDEX_SHIFT, addr));
                }
                if self.irrevocable {
                    // An irrevocable transaction waits: the owner commits or aborts soon.
                    backoff_once();
                    continue;
                }
                return Err(Abort::ReadLocked);
            }
            // SAFETY: as the caller promises.
            let value = unsafe { word(addr) }.load(Ordering::Acquire);
            if lock.load(Ordering::Acquire) != l {
                continue; // a commit went through meanwhile: read again
            }
            if version(l) > self.end {
                // Newer than the snapshot: extend it if every read still holds (a
                // read-only attempt has no reads to check: it aborts).
                if self.read_only {
                    return Err(Abort::ValidateRead);
                }
                self.extend().map_err(|_| Abort::ValidateRead)?;
                continue;
            }
            if self.read_only {
                return Ok(value);
            }
            self.grown |= self.reads.len() == self.reads.capacity();
            self.reads.push(index as u32);
            return Ok(value);
        }
    }

    /// Writes the bits `mask` of a word (buffered until commit; its lock is taken now).
    ///
    /// # Safety
    /// As `load`.
    #[inline(always)]
    pub unsafe fn store(&mut self, addr: usize, value: Word, mask: Word) -> Result<(), Abort> {
        // SAFETY: as the caller promises.
        if unsafe { self.store_fast(addr, value, mask) } {
            return Ok(());
        }
        // SAFETY: as the caller promises.
        unsafe { self.store_slow(addr, value, mask) }
    }

    /// `store`'s common case, inlined: the first write under an unlocked lock inside the
    /// snapshot, with room in the sets. False: call `store_slow`.
    ///
    /// # Safety
    /// As `load`.
    #[inline(always)]
    pub unsafe fn store_fast(&mut self, addr: usize, value: Word, mask: Word) -> bool {
        let index = lock_index(addr);
        let lock = &LOCKS[index];
        let w = self.writes.len();
        let l = lock.load(Ordering::Acquire);
        if l & OWNED != 0 {
            // Ours (another word of a small object already written): update or link in.
            return self.holds(l) && self.store_owned(l >> INDEX_SHIFT, index, addr, value, mask);
        }
        if version(l) > self.end || w == self.writes.capacity() || self.read_only {
            return false;
        }
        let mine = self.owner_bits() | (w << INDEX_SHIFT);
        if lock.compare_exchange(l, mine, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return false;
        }
        // SAFETY: below capacity, checked above; the entry is Copy.
        unsafe {
            let entry = Write { addr, value: value & mask, mask, before: l, lock: index as u32, next: NIL };
            self.writes.as_mut_ptr().add(w).write(entry);
            self.writes.set_len(w + 1);
        }
        self.locks += 1;
        true
    }

    /// A write under a lock we hold, whose first write of ours is `first`: the word's
    /// entry updated, or a new one linked after the first (the lock word keeps pointing to
    /// it). False when a new entry finds the write set full.
    #[inline(always)]
    fn store_owned(&mut self, first: usize, index: usize, addr: usize, value: Word, mask: Word) -> bool {
        let mut w = first as u32;
        while w != NIL {
            // SAFETY: a chain links entries of the write set (`chained`).
            let e = unsafe { self.chained_mut(w) };
            if e.addr == addr {
                e.value = (e.value & !mask) | (value & mask);
                e.mask |= mask;
                return true;
            }
            w = e.next;
        }
        let n = self.writes.len();
        if n == self.writes.capacity() {
            return false;
        }
        let next = std::mem::replace(&mut self.writes[first].next, n as u32);
        // SAFETY: below capacity, checked above; the entry is Copy.
        unsafe {
            let entry = Write { addr, value: value & mask, mask, before: NOT_FIRST, lock: index as u32, next };
            self.writes.as_mut_ptr().add(n).write(entry);
            self.writes.set_len(n + 1);
        }
        true
    }

    /// `store` under a lock we hold, a lock held by another, newer than the snapshot, or
    /// lost to a racing writer, or with the sets full.
    ///
    /// # Safety
    /// As `load`.
    #[inline(never)]
    pub unsafe fn store_slow(&mut self, addr: usize, value: Word, mask: Word) -> Result<(), Abort> {
        if self.read_only {
            return Err(Abort::ReadOnly);
        }
        let index = lock_index(addr);
        let lock = &LOCKS[index];
        loop {
            let l = lock.load(Ordering::Acquire);
            if l & OWNED != 0 {
                if owner(l) != self.id {
                    if self.irrevocable {
                        backoff_once();
                        continue;
                    }
                    return Err(Abort::WriteLocked);
                }
                let first = l >> INDEX_SHIFT;
                if !self.store_owned(first, index, addr, value, mask) {
                    // The write set is full: grow it, then link in.
                    self.grown = true;
                    self.writes.reserve(1);
                    self.store_owned(first, index, addr, value, mask);
                }
                return Ok(());
            }
            if version(l) > self.end {
                // Memory under this lock is newer than our snapshot: what we read (and will
                // read through our own lock) must still hold at the lock's version.
                self.extend().map_err(|_| Abort::ValidateWrite)?;
                continue;
            }
            let mine = self.owner_bits() | (self.writes.len() << INDEX_SHIFT);
            if lock.compare_exchange(l, mine, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                self.grown |= self.writes.len() == self.writes.capacity();
                self.writes.push(Write { addr, value: value & mask, mask, before: l, lock: index as u32, next: NIL });
                self.locks += 1;
                return Ok(());
            }
        }
    }

    /// Whether every read still holds: its lock free at a version inside the horizon, or
    /// now ours, taken at such a version.
    fn valid(&self) -> bool {
        let horizon = self.horizon;
        self.reads.iter().all(|&r| {
            let now = LOCKS[r as usize].load(Ordering::Acquire);
            let seen = if now & OWNED == 0 {
                now
            } else if owner(now) == self.id {
                self.writes[now >> INDEX_SHIFT].before
            } else {
                return false;
            };
            version(seen) <= horizon
        })
    }

    /// Moves the snapshot's end to the clock now, if every read still holds.
    fn extend(&mut self) -> Result<(), ()> {
        if !self.can_extend {
            return Err(());
        }
        let now = clock();
        let valid = self.valid();
        if self.tallying {
            self.reader_retries.record(valid);
        }
        if valid {
            self.end = now;
            self.horizon = now;
            Ok(())
        } else {
            Err(())
        }
    }

    /// Commits: a read-only transaction is done; a writer takes a new clock value, checks
    /// its reads (unless no other writer committed since its snapshot), writes back and
    /// releases its locks with the new version: that version (0 for a read-only one). On an
    /// error nothing was written: roll back.
    #[inline(always)]
    pub fn commit(&mut self) -> Result<u64, Abort> {
        // A reader's commit, inlined: nothing to check (its reads held at its snapshot).
        if self.writes.is_empty() && !self.irrevocable {
            self.reads.clear();
            return Ok(0);
        }
        self.commit_writes()
    }

    #[inline(never)]
    fn commit_writes(&mut self) -> Result<u64, Abort> {
        if self.writes.is_empty() {
            self.reads.clear();
            self.leave_irrevocable();
            return Ok(0);
        }
        let t = CLOCK.0.fetch_add(1, Ordering::AcqRel) + 1;
        if !self.irrevocable && IRREVOCABLE.0.load(Ordering::Acquire) != 0 {
            return Err(Abort::Irrevocable);
        }
        if t > self.end + 1 && !self.valid() {
            return Err(Abort::Validate);
        }
        for w in &self.writes {
            // SAFETY: `store` was given a valid word; we hold its lock.
            let cell = unsafe { word(w.addr) };
            match w.mask {
                Word::MAX => cell.store(w.value, Ordering::Release),
                0 => {}
                m => {
                    let old = cell.load(Ordering::Relaxed);
                    cell.store((old & !m) | (w.value & m), Ordering::Release);
                }
            }
        }
        let released = (t as usize) << 1;
        for w in self.writes.iter().filter(|w| w.before != NOT_FIRST) {
            LOCKS[w.lock as usize].store(released, Ordering::Release);
        }
        self.writes.clear();
        self.locks = 0;
        self.reads.clear();
        self.leave_irrevocable();
        Ok(t)
    }

    /// Drops the buffered writes and gives back the locks as they were.
    pub fn rollback(&mut self) {
        for w in self.writes.iter().filter(|w| w.before != NOT_FIRST) {
            LOCKS[w.lock as usize].store(w.before, Ordering::Release);
        }
        self.writes.clear();
        self.locks = 0;
        self.reads.clear();
        self.leave_irrevocable();
    }

    /// Makes the transaction irrevocable: it never aborts from now on. Writers that would
    /// commit while it runs abort and wait (`wait_irrevocable`); read-only transactions go
    /// on. Serial: transactions do not start either while it runs (`serial_running`); the
    /// caller waits for those running to end. Waits for another irrevocable transaction to
    /// end: call it while no other thread can wait for this one (before the transaction's
    /// start is published). Only valid before the transaction has read or written anything.
    pub fn become_irrevocable(&mut self, serial: bool) {
        while !self.try_become_irrevocable(serial) {
            backoff_once();
        }
    }

    /// `become_irrevocable` if no other irrevocable transaction runs; false otherwise.
    pub fn try_become_irrevocable(&mut self, serial: bool) -> bool {
        debug_assert!(self.reads.is_empty() && self.writes.is_empty());
        if IRREVOCABLE.0.compare_exchange(0, self.id, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return false;
        }
        if serial {
            SERIAL.0.store(true, Ordering::SeqCst);
        }
        // A writer whose commit takes a later clock value sees the flag; one that took an
        // earlier one wrote versions inside our snapshot, and holds its locks until then.
        let t = CLOCK.0.fetch_add(1, Ordering::AcqRel) + 1;
        self.start = t;
        self.end = t;
        self.horizon = t;
        self.irrevocable = true;
        self.serial = serial;
        true
    }

    /// Whether the transaction runs irrevocable and serial (alone once the others ended).
    pub fn is_serial(&self) -> bool {
        self.irrevocable && self.serial
    }

    fn leave_irrevocable(&mut self) {
        if self.irrevocable {
            // Serial mode ends before the next irrevocable transaction may begin: it may be
            // serial too, and its flag must not be cleared by ours.
            if std::mem::take(&mut self.serial) {
                SERIAL.0.store(false, Ordering::Release);
            }
            self.irrevocable = false;
            IRREVOCABLE.0.store(0, Ordering::Release);
        }
    }

    /// Runs `body` as a transaction until it commits; its result (the Rust interface; the C
    /// API retries through sigsetjmp instead). Set `read_only` before for a read-only
    /// transaction; it retries as the C API's do (`retry`).
    pub fn atomically<T>(&mut self, mut body: impl FnMut(&mut Self) -> Result<T, Abort>) -> T {
        let reader = self.read_only;
        self.tallying = false;
        let mut attempt = 0u32;
        loop {
            wait_irrevocable();
            self.begin();
            match body(self).and_then(|v| self.commit().map(|_| v)) {
                Ok(v) => return v,
                Err(a) => {
                    self.rollback();
                    self.retry(reader && a.is_reader_conflict());
                }
            }
            attempt += 1;
            backoff(attempt);
        }
    }
}

/// Whether an irrevocable transaction runs.
#[inline]
pub fn irrevocable_running() -> bool {
    IRREVOCABLE.0.load(Ordering::Relaxed) != 0
}

/// Whether a serial irrevocable transaction runs: transactions wait before they start.
#[inline]
pub fn serial_running() -> bool {
    SERIAL.0.load(Ordering::Relaxed)
}

/// Waits while a serial irrevocable transaction runs.
pub fn wait_serial() {
    while serial_running() {
        backoff_once();
    }
}

/// Waits while an irrevocable transaction runs (writers would only abort at commit).
#[inline]
pub fn wait_irrevocable() {
    while irrevocable_running() {
        backoff_once();
    }
}

/// A pause before the next attempt: spins first, then yields the CPU (a conflicting writer
/// may be descheduled: more threads than cores).
pub fn backoff(attempt: u32) {
    if attempt < 4 {
        for _ in 0..(16u32 << attempt) {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
}

pub fn backoff_once() {
    std::hint::spin_loop();
    std::thread::yield_now();
}

/// The lock's word once no writer holds it (unit operations wait rather than abort).
fn unlocked(lock: &AtomicUsize) -> usize {
    loop {
        let l = lock.load(Ordering::Acquire);
        if l & OWNED == 0 {
            return l;
        }
        backoff_once();
    }
}

/// A load outside any transaction that behaves as a one-read transaction that never aborts
/// (`stm_unit_load`): waits while the location is locked. Returns the value and its version.
///
/// # Safety
/// As `Tx::load`.
pub unsafe fn unit_load(addr: usize) -> (Word, u64) {
    let lock = &LOCKS[lock_index(addr)];
    loop {
        let l = unlocked(lock);
        // SAFETY: as the caller promises.
        let value = unsafe { word(addr) }.load(Ordering::Acquire);
        if lock.load(Ordering::Acquire) == l {
            return (value, version(l));
        }
    }
}

/// A store outside any transaction (`stm_unit_store2`): takes the lock (waiting while
/// another holds it); with `newer_than` given, writes only if the location's version is not
/// above it. Returns whether it wrote, and the location's version after.
///
/// # Safety
/// As `Tx::load`.
pub unsafe fn unit_store(addr: usize, value: Word, mask: Word, newer_than: Option<u64>) -> (bool, u64) {
    let lock = &LOCKS[lock_index(addr)];
    loop {
        let l = unlocked(lock);
        if let Some(ts) = newer_than
            && version(l) > ts
        {
            return (false, version(l));
        }
        // Owner id 0 with bit 0 set: a unit store holds it.
        if lock.compare_exchange(l, OWNED, Ordering::Acquire, Ordering::Relaxed).is_err() {
            continue;
        }
        let t = CLOCK.0.fetch_add(1, Ordering::AcqRel) + 1;
        if irrevocable_running() {
            // Its snapshot must hold: give the lock back untouched and wait, as writers do.
            lock.store(l, Ordering::Release);
            wait_irrevocable();
            continue;
        }
        // SAFETY: as the caller promises; we hold the lock.
        let cell = unsafe { word(addr) };
        let old = cell.load(Ordering::Relaxed);
        cell.store((old & !mask) | (value & mask), Ordering::Release);
        lock.store((t as usize) << 1, Ordering::Release);
        return (true, t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A word with a lock of its own (cells in different lock granules).
    #[repr(align(64))]
    struct Cell(AtomicUsize);

    impl Cell {
        fn new(v: usize) -> Cell {
            Cell(AtomicUsize::new(v))
        }
        fn load(&self, o: Ordering) -> usize {
            self.0.load(o)
        }
        fn as_ptr(&self) -> *mut usize {
            self.0.as_ptr()
        }
    }

    /// Owner ids for the tests, unique across the tests of this binary (they share the
    /// lock array).
    fn tx() -> Tx {
        static NEXT: AtomicUsize = AtomicUsize::new(1000);
        Tx::new(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    fn at(c: &Cell) -> usize {
        c.as_ptr() as usize
    }

    #[test]
    fn a_transaction_sees_its_own_writes_and_commits_them() {
        let cell = Cell::new(5);
        let before = clock();
        let seen = tx().atomically(|tx| {
            // SAFETY: a word on this stack, only reached through the STM.
            unsafe {
                tx.store(at(&cell), 7, !0)?;
                let a = tx.load(at(&cell))?;
                tx.store(at(&cell), a + 1, !0)?;
                tx.load(at(&cell))
            }
        });
        assert_eq!(seen, 8);
        assert_eq!(cell.load(Ordering::Relaxed), 8);
        assert!(clock() > before);
    }

    #[test]
    fn masked_stores_change_only_their_bits() {
        let cell = Cell::new(0x1111_2222_3333_4444);
        let seen = tx().atomically(|tx| {
            // SAFETY: as above.
            unsafe {
                tx.store(at(&cell), 0xAA00, 0xFF00)?;
                let mid = tx.load(at(&cell))?;
                tx.store(at(&cell), 0xBB_0000_0000, 0xFF_0000_0000)?;
                Ok(mid)
            }
        });
        assert_eq!(seen, 0x1111_2222_3333_AA44);
        assert_eq!(cell.load(Ordering::Relaxed), 0x1111_22BB_3333_AA44);
    }

    #[test]
    fn an_aborted_transaction_leaves_memory_and_locks_as_they_were() {
        let cell = Cell::new(5);
        let (mut a, mut b) = (tx(), tx());
        a.begin();
        b.begin();
        // SAFETY: a word on this stack; both contexts run on this thread.
        unsafe {
            a.store(at(&cell), 9, !0).unwrap();
            assert_eq!(b.load(at(&cell)), Err(Abort::ReadLocked));
            assert_eq!(b.store(at(&cell), 1, !0), Err(Abort::WriteLocked));
            a.rollback();
            assert_eq!(b.load(at(&cell)), Ok(5));
        }
        assert_eq!(cell.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn a_stale_read_fails_validation_at_commit() {
        let (x, y) = (Cell::new(1), Cell::new(1));
        let (mut a, mut b) = (tx(), tx());
        a.begin();
        // SAFETY: words on this stack.
        unsafe {
            assert_eq!(a.load(at(&x)), Ok(1));
            b.begin();
            b.store(at(&x), 2, !0).unwrap();
            b.commit().unwrap();
            a.store(at(&y), 5, !0).unwrap();
        }
        assert_eq!(a.commit(), Err(Abort::Validate));
        a.rollback();
        assert_eq!(y.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_read_newer_than_the_snapshot_extends_it_or_aborts() {
        let (x, y) = (Cell::new(1), Cell::new(1));
        let (mut a, mut b) = (tx(), tx());
        // SAFETY: words on this stack.
        unsafe {
            a.begin();
            assert_eq!(a.load(at(&x)), Ok(1));
            b.begin();
            b.store(at(&y), 2, !0).unwrap();
            b.commit().unwrap();
            // y is newer, x unchanged: the snapshot extends.
            assert_eq!(a.load(at(&y)), Ok(2));
            b.begin();
            b.store(at(&x), 3, !0).unwrap();
            b.store(at(&y), 3, !0).unwrap();
            b.commit().unwrap();
            // Now x changed too: reading y again cannot extend.
            assert_eq!(a.load(at(&y)), Err(Abort::ValidateRead));
            a.rollback();
            a.begin();
            a.can_extend = false;
            b.begin();
            b.store(at(&y), 4, !0).unwrap();
            b.commit().unwrap();
            assert_eq!(a.load(at(&y)), Err(Abort::ValidateRead), "no extension allowed");
            a.rollback();
        }
    }

    /// Reads are logged as lock indices and checked against the horizon: a lock taken and
    /// given back unchanged still validates, and so does a read above an end lowered after
    /// it (`bound_end`); a commit over a read does not.
    #[test]
    fn reads_hold_until_a_commit_over_them() {
        let (x, y, z) = (Cell::new(1), Cell::new(1), Cell::new(1));
        let (mut a, mut b) = (tx(), tx());
        // SAFETY: words on this stack.
        unsafe {
            b.begin();
            b.store(at(&x), 2, !0).unwrap();
            b.commit().unwrap();
            a.begin();
            assert_eq!(a.load(at(&x)), Ok(2));
            a.bound_end(a.start() - 1);
            b.begin();
            b.store(at(&x), 7, !0).unwrap();
            b.rollback();
            b.begin();
            b.store(at(&y), 3, !0).unwrap();
            b.commit().unwrap();
            assert_eq!(a.load(at(&y)), Ok(3), "x still holds: the snapshot extends");
            b.begin();
            b.store(at(&x), 4, !0).unwrap();
            b.commit().unwrap();
            b.begin();
            b.store(at(&z), 4, !0).unwrap();
            b.commit().unwrap();
            assert_eq!(a.load(at(&z)), Err(Abort::ValidateRead));
            a.rollback();
        }
    }

    /// Read-only retries log their reads while at least half of their extensions succeed,
    /// and otherwise run read-only, but for one in 16.
    #[test]
    fn read_only_retries_log_while_extensions_succeed() {
        let mut r = ReaderRetries::default();
        assert!(r.logs_next(), "no tally yet: log");
        for _ in 0..40 {
            r.record(false);
        }
        r.record(true);
        let logged = (0..64).filter(|_| r.logs_next()).count();
        assert_eq!(logged, 4, "one retry in 16 while extensions fail");
        for _ in 0..40 {
            r.record(true);
        }
        assert!((0..64).all(|_| r.logs_next()), "extensions succeed again: always log");
        let mut a = tx();
        a.reader_retries = r;
        a.retry(false);
        assert!(!a.read_only && !a.tallying, "a retry after a write is an update attempt");
        for _ in 0..100 {
            a.reader_retries.record(false);
        }
        a.retry(true);
        assert!(a.read_only && !a.tallying);
    }

    /// A read-only attempt logs no reads, aborts rather than extend, and cannot write.
    #[test]
    fn a_read_only_attempt_neither_logs_nor_extends_nor_writes() {
        let (x, y) = (Cell::new(1), Cell::new(1));
        let (mut a, mut b) = (tx(), tx());
        // SAFETY: words on this stack.
        unsafe {
            a.read_only = true;
            a.begin();
            assert_eq!(a.load(at(&x)), Ok(1));
            assert_eq!(a.set_sizes(), (0, 0, 0), "no read logged");
            b.begin();
            b.store(at(&y), 2, !0).unwrap();
            b.commit().unwrap();
            // An update transaction would extend here (x is unchanged): a reader cannot.
            assert_eq!(a.load(at(&y)), Err(Abort::ValidateRead));
            a.rollback();
            a.begin();
            assert_eq!(a.load(at(&y)), Ok(2));
            assert_eq!(a.store(at(&x), 5, !0), Err(Abort::ReadOnly));
            a.rollback();
            a.read_only = false;
            a.begin();
            a.store(at(&x), 5, !0).unwrap();
            assert!(a.commit().unwrap() > 0);
        }
        assert_eq!(x.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn unit_operations_respect_versions() {
        let cell = Cell::new(3);
        // SAFETY: a word on this stack.
        unsafe {
            let (v, ts) = unit_load(at(&cell));
            assert_eq!(v, 3);
            let (wrote, t) = unit_store(at(&cell), 4, !0, Some(ts));
            assert!(wrote && t > ts);
            let (wrote, t2) = unit_store(at(&cell), 5, !0, Some(ts));
            assert!(!wrote, "the location is newer than the given timestamp");
            assert_eq!(t2, t);
        }
        assert_eq!(cell.load(Ordering::Relaxed), 4);
    }

    /// Opacity and atomicity together: threads move money between accounts at random; every
    /// transaction (writers and read-only audits alike) sums all accounts, and must always
    /// see the total, even in transactions that later abort; the final total holds too.
    #[test]
    fn concurrent_transfers_never_show_an_inconsistent_snapshot() {
        const ACCOUNTS: usize = 64;
        const TOTAL: Word = ACCOUNTS * 100;
        let accounts: Vec<Cell> = (0..ACCOUNTS).map(|_| Cell::new(100)).collect();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let accounts = &accounts;
                s.spawn(move || {
                    let mut tx = tx();
                    let mut seed = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    let mut next = move || {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed as usize
                    };
                    for round in 0..3000 {
                        let (from, to, amount) = (next() % ACCOUNTS, next() % ACCOUNTS, next() % 10);
                        // The audits run read-only (no read set), on thread 0 as update ones.
                        tx.read_only = round % 4 == 0 && t != 0;
                        tx.atomically(|tx| {
                            let mut sum = 0;
                            for a in accounts {
                                // SAFETY: the accounts outlive the scope; all access is transactional.
                                sum += unsafe { tx.load(at(a))? };
                            }
                            assert_eq!(sum, TOTAL, "an inconsistent snapshot");
                            if round % 4 != 0 && from != to {
                                // SAFETY: as above.
                                unsafe {
                                    let f = tx.load(at(&accounts[from]))?;
                                    if f >= amount {
                                        tx.store(at(&accounts[from]), f - amount, !0)?;
                                        let g = tx.load(at(&accounts[to]))?;
                                        tx.store(at(&accounts[to]), g + amount, !0)?;
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

    /// An irrevocable transaction never aborts while writers run beside it, and its effects
    /// and theirs all land.
    #[test]
    fn an_irrevocable_transaction_runs_to_completion_beside_writers() {
        let counter = Cell::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    let mut tx = tx();
                    for _ in 0..2000 {
                        tx.atomically(|tx| {
                            // SAFETY: a word that outlives the scope, reached through the STM.
                            unsafe {
                                let v = tx.load(at(&counter))?;
                                tx.store(at(&counter), v + 1, !0)
                            }
                        });
                    }
                });
            }
            s.spawn(|| {
                let mut tx = tx();
                for _ in 0..200 {
                    wait_irrevocable();
                    tx.begin();
                    tx.become_irrevocable(false);
                    // SAFETY: as above.
                    unsafe {
                        let v = tx.load(at(&counter)).expect("irrevocable reads never abort");
                        tx.store(at(&counter), v + 1, !0).expect("irrevocable writes never abort");
                    }
                    tx.commit().expect("irrevocable commits never abort");
                }
            });
        });
        assert_eq!(counter.load(Ordering::Relaxed), 3 * 2000 + 200);
    }
}
