//! Rings kept in files: the flight recorder's half that outlives the process.
//!
//! A collector that writes a raw recording `<dir>/<base>.rtrace` keeps its threads' rings in
//! `<dir>/.rings/<base>/<n>.ring`, files mapped shared into the process (the layout is in
//! `docs/raw-format.md`, "Ring files"). What an application thread publishes is then in the
//! kernel's page cache at once, and stays there if the process is killed: nothing it published
//! is only in the process's own memory. Beside them, `meta.rtrace` (a raw recording of its own,
//! with no records) gets every callsite when it is registered, before any record can name it; a
//! ring file's header names the thread writing it. The process holds an exclusive `flock` on
//! `meta.rtrace` while it runs, so a reader tells a live process's rings from a dead one's.
//!
//! The drain frees a ring's records once the recording's writer has written them (not when it
//! reads them), except when half a ring waits for a writer held up by the disk: then it frees
//! them as it hands them over, rather than have the application drop new records.
//!
//! A clean shutdown, once the recording holds everything, removes the directory. A process that
//! died leaves it: readers of the recording add the records its rings still hold, and
//! `ringtrace recover` (`crate::recover`) appends them to the recording for good.
//!
//! Each file's size is fixed when it is made, `4096 + 64 × ring capacity` bytes, and its blocks
//! are reserved then (`posix_fallocate`): a full disk makes the collector fall back to a ring
//! in memory (with a message), never a `SIGBUS` on a later write.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::hash::BuildHasherDefault;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use memmap2::MmapMut;
use ringtrace_core::raw::{
    self, ClockAnchor, FrameWriter, Header, ProcessInfo, RawRecord, RingFileHeader, RECORD_SIZE,
    RING_EXTENSION, RING_LOSSES_AT, RING_SLOTS_AT, RING_THREAD_AT, RING_THREAD_NAME_AT, RING_WRITE_AT,
};
use ringtrace_core::record::Meta;

use crate::drain::IdHasher;
use crate::ring::{self, Consumer, Indices, Producer, INDICES_SIZE};

/// The directory under a recording's directory that holds ring directories.
pub const RINGS_DIR: &str = ".rings";

/// The metadata file of a ring directory.
pub const META_FILE: &str = "meta.rtrace";

/// The ring directory of the recording at `recording` (`<dir>/.rings/<file stem>`).
pub fn ring_dir_of(recording: &Path) -> Option<PathBuf> {
    let stem = recording.file_stem()?;
    Some(recording.parent().unwrap_or(Path::new(".")).join(RINGS_DIR).join(stem))
}

/// A collector's ring directory: makes ring files and appends metadata.
pub(crate) struct RingDir {
    path: PathBuf,
    meta: Mutex<MetaFile>,
    /// The process that made it: a child made by `fork` leaves it alone (see [`at_fork_child`]).
    pid: u32,
    /// Its slot in [`META_FDS`].
    fd_slot: Option<usize>,
}

/// The metadata file and what it holds.
struct MetaFile {
    /// Held open for the `flock`, released when the process dies.
    file: File,
    callsites: HashSet<u64, BuildHasherDefault<IdHasher>>,
    frames: FrameWriter,
    /// A write failed: later callsites are not written (their records are still in the
    /// recording once the drain reads them; only recovery of a killed process misses them).
    failed: bool,
}

impl RingDir {
    /// Makes `<dir>/.rings/<base>/` for the recording at `recording` and its metadata file,
    /// with the process and the clock's anchor (callsites follow as `tracing` registers them
    /// with the new collector: it registers every callsite with each new dispatcher).
    ///
    /// The metadata file is made under a name of its own, locked, written and only then
    /// renamed `meta.rtrace`: a reader never finds it unlocked while the process lives. A
    /// directory that exists already (left by another process of the same name) is an error.
    pub(crate) fn create(
        recording: &Path,
        process: &ProcessInfo,
        anchor: ClockAnchor,
    ) -> std::io::Result<Self> {
        let path = ring_dir_of(recording)
            .ok_or_else(|| std::io::Error::other("a recording path without a file name"))?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::create_dir(&path)?;
        let made = (|| {
            let temporary = path.join(format!("{META_FILE}.new"));
            let file = OpenOptions::new().write(true).create_new(true).open(&temporary)?;
            lock(&file)?;
            let mut frames = FrameWriter::default();
            frames.buf.extend_from_slice(&Header::CURRENT.to_bytes());
            frames.process(process);
            frames.pass(anchor);
            frames.name(crate::callsites::REQUEST_ID_FIELD);
            let mut meta = MetaFile { file, callsites: HashSet::default(), frames, failed: false };
            meta.flush()?;
            std::fs::rename(&temporary, path.join(META_FILE))?;
            Ok::<_, std::io::Error>(meta)
        })();
        let meta = match made {
            Ok(meta) => meta,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&path);
                return Err(e);
            }
        };
        install_fork_handler();
        let fd_slot = claim_fd_slot(std::os::fd::AsRawFd::as_raw_fd(&meta.file));
        Ok(Self { path, meta: Mutex::new(meta), pid: crate::shared::process_id(), fd_slot })
    }

    /// Whether this process made it (not a child made by `fork`).
    pub(crate) fn ours(&self) -> bool {
        self.pid == crate::shared::process_id()
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `meta`'s callsite frame, unless written before.
    pub(crate) fn callsite(&self, meta: Meta) {
        if !self.ours() {
            return;
        }
        let mut m = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        if !m.failed && m.callsites.insert(raw::meta_address(meta)) {
            m.frames.callsite(meta);
            let _ = m.flush();
        }
    }

    /// Appends the final loss counters of ring `number`, whose file is about to be removed (a
    /// counters frame whose `ring` key names it). Returns whether they were written.
    pub(crate) fn retired_losses(&self, number: u32, losses: [u64; 4]) -> bool {
        if !self.ours() {
            return false;
        }
        let mut m = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        if m.failed {
            return false;
        }
        let named = raw::RING_LOSS_COUNTERS.iter().copied().zip(losses);
        m.frames.counters(std::iter::once((raw::RING_COUNTER_KEY, u64::from(number))).chain(named));
        m.flush().is_ok()
    }

    /// A new ring of `capacity` records in a file of its own, number `number` (the collector's
    /// count of rings, in files or not).
    pub(crate) fn ring(&self, number: u32, capacity: usize) -> std::io::Result<FileRing> {
        if !self.ours() {
            return Err(std::io::Error::other("a child made by fork keeps its rings in memory"));
        }
        let path = self.path.join(format!("{number}.{RING_EXTENSION}"));
        let len = RING_SLOTS_AT as u64 + capacity as u64 * RECORD_SIZE as u64;
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        let made = (|| {
            reserve(&file, len)?;
            // SAFETY: the file is ours, made just now; nothing else maps or truncates it while
            // the process lives (readers only read it, and `recover` only a dead process's).
            let mut map = unsafe { MmapMut::map_mut(&file)? };
            let header = RingFileHeader { capacity: capacity as u64, ring: number, thread_id: 0 };
            map[..40].copy_from_slice(&header.to_bytes());
            Ok::<_, std::io::Error>(map)
        })();
        let mut map = match made {
            Ok(map) => map,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        let base = map.as_mut_ptr();
        // SAFETY: the mapping is `len` bytes, page-aligned; the indices (128 bytes at
        // `RING_WRITE_AT`, a multiple of 64) and the slots (from `RING_SLOTS_AT`, a page) are
        // inside it, aligned for `Indices` (64) and `RawRecord` (64), disjoint. A fresh file is
        // zero, so both indices read 0.
        let (indices, slots) = unsafe {
            (
                NonNull::new_unchecked(base.add(RING_WRITE_AT).cast::<Indices>()),
                NonNull::new_unchecked(base.add(RING_SLOTS_AT).cast::<RawRecord>()),
            )
        };
        const _: () = assert!(
            RING_WRITE_AT % 64 == 0
                && RING_WRITE_AT + ring::WRITE_OFFSET == raw::RING_WRITE_AT
                && RING_WRITE_AT + ring::READ_OFFSET == raw::RING_READ_AT
                && RING_WRITE_AT + INDICES_SIZE <= RING_SLOTS_AT
        );
        let owner =
            NonNull::new(base.wrapping_add(RING_THREAD_AT).cast::<AtomicU64>()).expect("inside a mapping");
        const _: () = assert!(RING_LOSSES_AT % 8 == 0 && RING_LOSSES_AT >= RING_WRITE_AT + INDICES_SIZE);
        let losses = NonNull::new(base.wrapping_add(RING_LOSSES_AT).cast::<[AtomicU64; 4]>())
            .expect("inside a mapping");
        const _: () = assert!(
            RING_THREAD_NAME_AT == RING_THREAD_AT + 8
                && RING_THREAD_NAME_AT % 8 == 0
                && RING_THREAD_NAME_AT + NAME_WORDS * 8 == RING_WRITE_AT
                && raw::RING_THREAD_NAME_MAX == NAME_WORDS * 8 - 2
        );
        let name = NonNull::new(base.wrapping_add(RING_THREAD_NAME_AT).cast::<[AtomicU64; NAME_WORDS]>())
            .expect("inside a mapping");
        let file = Arc::new(Mapped { _map: map, owner, name, losses, number, path });
        // SAFETY: as above; `keep` holds the mapping for as long as the ring lives.
        let (prod, cons) = unsafe { ring::ring_in(indices, slots, capacity, Box::new(file.clone())) };
        Ok(FileRing { prod, cons, number, file })
    }

    /// Removes the directory: the recording holds everything the rings did (shutdown).
    pub(crate) fn remove(&self) -> std::io::Result<()> {
        if !self.ours() {
            return Ok(());
        }
        std::fs::remove_dir_all(&self.path)?;
        // `.rings` itself goes when no other process's rings are left in it.
        if let Some(parent) = self.path.parent() {
            let _ = std::fs::remove_dir(parent);
        }
        Ok(())
    }
}

impl MetaFile {
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.file.write_all(&self.frames.buf);
        self.frames.buf.clear();
        if r.is_err() {
            self.failed = true;
        }
        r
    }
}

/// A ring made in a file, with its ends.
pub(crate) struct FileRing {
    pub prod: Producer<RawRecord>,
    pub cons: Consumer<RawRecord>,
    pub number: u32,
    pub file: Arc<Mapped>,
}

/// A ring file's mapping.
#[derive(Debug)]
pub(crate) struct Mapped {
    _map: MmapMut,
    /// The header's owner thread id.
    owner: NonNull<AtomicU64>,
    /// The header's owner thread name: its length and bytes, as eleven words (bytes 40–127).
    name: NonNull<[AtomicU64; NAME_WORDS]>,
    /// The header's loss counters.
    losses: NonNull<[AtomicU64; 4]>,
    /// The ring's number.
    number: u32,
    path: PathBuf,
}

/// Words of a ring file's header that hold the owner thread's name (bytes 40–127).
const NAME_WORDS: usize = (RING_WRITE_AT - RING_THREAD_NAME_AT) / 8;

// SAFETY: `owner`, `name` and `losses` point into `_map`, which `Mapped` owns; they are only
// accessed atomically.
unsafe impl Send for Mapped {}
// SAFETY: as above.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Removes the file of a ring that is empty, every record freed, and that no thread will
    /// write again (its thread exited and the pool of rings is full): nothing in it is left to
    /// recover, and a service that churns threads would otherwise leave a file per ring.
    ///
    /// Its loss counters, when any is not zero, are first written to the metadata file: they
    /// are gone with the file, and the recording's last counters frame may not hold them yet.
    pub(crate) fn remove_file(&self, dir: &RingDir) {
        let losses = self.losses().each_ref().map(|c| c.load(Ordering::Relaxed));
        if losses.iter().any(|n| *n > 0) && !dir.retired_losses(self.number, losses) {
            return;
        }
        let _ = std::fs::remove_file(&self.path);
    }

    fn losses(&self) -> &[AtomicU64; 4] {
        // SAFETY: inside the mapping, 8-byte aligned (offset 256 of a page); nothing accesses
        // these bytes but atomically, and the reader of a dead process's file.
        unsafe { self.losses.as_ref() }
    }

    /// The ring file's loss counter of `what`: only the thread writing the ring writes it.
    pub(crate) fn loss_counter(&self, what: crate::stats::Dropped) -> &AtomicU64 {
        &self.losses()[what as usize]
    }

    /// Records `thread_id` as the thread now writing the ring (a thread taking a ring, new or
    /// pooled, before its first record).
    ///
    /// The header keeps the thread's name too (cut to [`raw::RING_THREAD_NAME_MAX`] bytes),
    /// so that a reader of the file left by a killed process names the thread of its records
    /// without a thread frame per thread in the metadata file: taking a ring writes no file.
    /// The name goes first: until the id changes, the ring holds no record of the new thread.
    pub(crate) fn set_owner(&self, thread_id: u64, name: &str) {
        let bytes = raw::ring_thread_name_bytes(name);
        // SAFETY: inside the mapping, 8-byte aligned (offsets 32 and 40 of a page); nothing
        // accesses these bytes but atomically, and the reader of a dead process's file.
        let words = unsafe { self.name.as_ref() };
        // The length (in the first word) last, so a name is never read longer than written.
        for (word, chunk) in words.iter().zip(bytes.chunks_exact(8)).rev() {
            let chunk: [u8; 8] = chunk.try_into().expect("eight bytes");
            word.store(u64::from_le_bytes(chunk), Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { self.owner.as_ref() }.store(thread_id, Ordering::Relaxed);
    }
}

impl Drop for RingDir {
    fn drop(&mut self) {
        if let Some(slot) = self.fd_slot {
            META_FDS[slot].store(-1, Ordering::Relaxed);
        }
    }
}

/// Takes an exclusive `flock` on `file`, held until it is closed (or the process dies); waits
/// for a reader that holds a shared one for a moment.
fn lock(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: a plain system call on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The metadata file at `path`, locked (exclusively or shared), when no live process holds it:
/// `None` while its process runs.
pub fn try_lock(path: &Path, exclusive: bool) -> std::io::Result<Option<File>> {
    use std::os::fd::AsRawFd;
    let file = OpenOptions::new().read(true).write(exclusive).open(path)?;
    let how = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH };
    // SAFETY: as in `lock`.
    if unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) } == 0 {
        return Ok(Some(file));
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::WouldBlock {
        Ok(None)
    } else {
        Err(e)
    }
}

/// The metadata files' descriptors of this process's ring directories (-1: free), for the
/// `fork` handler, which may take no lock.
static META_FDS: [AtomicI32; 64] = [const { AtomicI32::new(-1) }; 64];

fn claim_fd_slot(fd: i32) -> Option<usize> {
    META_FDS.iter().position(|s| s.compare_exchange(-1, fd, Ordering::Relaxed, Ordering::Relaxed).is_ok())
}

/// Installs [`at_fork_child`] once.
fn install_fork_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a handler that only calls async-signal-safe functions and touches
        // the forking thread's own thread-local state.
        unsafe {
            libc::pthread_atfork(None, None, Some(at_fork_child));
        }
    });
}

/// In a child made by `fork` (without `exec`): its thread must not write into the parent's
/// rings, which it shares (mapped shared), nor hold the parent's lock on its metadata files,
/// which would make a dead parent's rings look alive. The thread's rings are let go (never
/// written again; the child's next record takes a ring in memory), and each metadata file's
/// descriptor is pointed at `/dev/null`.
extern "C" fn at_fork_child() {
    crate::local::forget_rings_after_fork();
    // SAFETY: `open` and `dup2` are async-signal-safe; the descriptors are this process's.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null < 0 {
            return;
        }
        for slot in &META_FDS {
            let fd = slot.load(Ordering::Relaxed);
            if fd >= 0 {
                libc::dup2(null, fd);
            }
        }
        libc::close(null);
    }
}

/// Sizes `file` to `len` bytes with every block reserved.
fn reserve(file: &File, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len).map_err(|_| std::io::Error::other("ring file too large"))?;
    // SAFETY: a plain system call on a descriptor we own.
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) } {
        0 => Ok(()),
        // A file system without it: sized sparse, as the best available.
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(len as u64),
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new, empty directory `ringtrace-ringfile-<tag>-<pid>` and a ring directory in it.
    fn ring_dir(tag: &str) -> (PathBuf, RingDir) {
        let dir = std::env::temp_dir().join(format!("ringtrace-ringfile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let process = ProcessInfo {
            node: "n".into(),
            daemon: "d".into(),
            pid: 1,
            span_event_limit: 1,
            attributes: vec![],
        };
        let anchor = ClockAnchor { raw: 0, unix_ns: 0, nanos_per_2_32_ticks: 1 << 32 };
        let rings = RingDir::create(&dir.join("r.rtrace"), &process, anchor).unwrap();
        (dir, rings)
    }

    #[test]
    fn a_ring_files_header_names_the_thread_writing_it() {
        let (dir, rings) = ring_dir("name");
        let ring = rings.ring(1, 16).unwrap();
        let path = rings.path().join(format!("1.{RING_EXTENSION}"));
        let header = || {
            let leftover = raw::read_ring_file(&std::fs::read(&path).unwrap()).unwrap();
            (leftover.header.thread_id, leftover.thread_name)
        };
        assert_eq!(header(), (0, None), "no thread has taken it yet");
        ring.file.set_owner(5, "conn-127.0.0.1:54321");
        assert_eq!(header(), (5, Some("conn-127.0.0.1:54321".into())));
        // The next thread to take the ring from the pool: nothing of the longer name is left.
        ring.file.set_owner(6, "fan-out");
        assert_eq!(header(), (6, Some("fan-out".into())));
        ring.file.set_owner(7, "");
        assert_eq!(header(), (7, Some(String::new())));
        ring.file.set_owner(8, &"x".repeat(100));
        assert_eq!(header(), (8, Some("x".repeat(raw::RING_THREAD_NAME_MAX))));
        drop(ring);
        drop(rings);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Page faults the calling thread has taken so far.
    #[cfg(target_os = "linux")]
    fn thread_faults() -> i64 {
        // SAFETY: all zero is a valid `rusage` (integers and `timeval`s).
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `getrusage` fills the struct it is given.
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) }, 0);
        usage.ru_minflt + usage.ru_majflt
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_pages_a_ring_writes_next_are_faulted_in_for_its_thread() {
        let (dir, rings) = ring_dir("prefault");
        // 4 MiB of records: 1,024 pages.
        let capacity = 1 << 16;
        let FileRing { mut prod, mut cons, .. } = rings.ring(1, capacity).unwrap();
        let record = RawRecord([7; RECORD_SIZE]);
        // Writes `n` records one group at a time (as a thread's spans are) and returns the page
        // faults the thread took meanwhile; the drain's side reads and frees them.
        let write = |prod: &mut Producer<RawRecord>, cons: &mut Consumer<RawRecord>, n: usize| {
            let before = thread_faults();
            for _ in 0..n {
                let at = prod.write_index();
                assert!(prod.vacant_from(at, true) > 0);
                // SAFETY: a vacant slot, just checked; published at once.
                unsafe {
                    prod.write_at(at, record);
                    prod.publish(at + 1);
                }
            }
            let faults = thread_faults() - before;
            let read = cons.read_with(|a, b| a.len() + b.len());
            cons.skip(read);
            faults
        };
        write(&mut prod, &mut cons, 64);
        // The drain's side, after reading a page of records: 16 pages ahead of them.
        cons.prefault(1024);
        if cons.prefaulted() == capacity {
            eprintln!("this kernel has no MADV_POPULATE_WRITE (Linux 5.14): faulting ahead not checked");
            drop((prod, cons, rings));
            std::fs::remove_dir_all(&dir).unwrap();
            return;
        }
        assert_eq!(cons.prefaulted(), 64 + 1024);
        let ahead = write(&mut prod, &mut cons, 1024);
        // Past what was faulted in: half the ring, written by the thread itself.
        let not_ahead = write(&mut prod, &mut cons, capacity / 2);
        assert!(not_ahead > 0, "writing 2 MiB of a new ring file faults pages in (took {not_ahead} faults)");
        // 16 without faulting ahead. Up to two are allowed: the file system may write a page back
        // meanwhile (the first, which holds the write index, is written at every publish), and
        // the next write to it faults again.
        assert!(
            ahead <= 2,
            "the pages faulted in ahead took {ahead} faults (writing 2 MiB past them took {not_ahead})"
        );
        // Never behind the thread: what it wrote itself is not faulted in again.
        cons.prefault(1024);
        let prefaulted = 64 + 1024 + capacity / 2 + 1024;
        assert_eq!(cons.prefaulted(), prefaulted);
        // A few records more: less than half the window is new, so no call until there is.
        write(&mut prod, &mut cons, 10);
        cons.prefault(1024);
        assert_eq!(cons.prefaulted(), prefaulted);
        write(&mut prod, &mut cons, 600);
        cons.prefault(1024);
        assert_eq!(cons.prefaulted(), 64 + 1024 + capacity / 2 + 610 + 1024);
        // Once round the ring, every page has been written: nothing more to do.
        write(&mut prod, &mut cons, capacity);
        cons.prefault(1024);
        assert_eq!(cons.prefaulted(), capacity);
        drop((prod, cons, rings));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
