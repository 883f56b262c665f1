//! Rings kept in files: the flight recorder's half that outlives the process.
//!
//! A collector that writes a raw recording `<dir>/<base>.rtrace` keeps its threads' rings in
//! `<dir>/.rings/<base>/<n>.ring`, files mapped shared into the process (the layout is in
//! `docs/raw-format.md`, "Ring files"). What an application thread publishes is then in the
//! kernel's page cache at once, and stays there if the process is killed: nothing it published
//! is only in the process's own memory. Beside them, `meta.rtrace` (a raw recording of its own,
//! with no records) gets every callsite when it is registered and every thread when it takes a
//! ring, before any record can name them; the process holds an exclusive `flock` on it while it
//! runs, so a reader tells a live process's rings from a dead one's.
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
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use memmap2::MmapMut;
use ringtrace_core::raw::{
    self, ClockAnchor, FrameWriter, Header, ProcessInfo, RawRecord, RingFileHeader, RECORD_SIZE,
    RING_EXTENSION, RING_SLOTS_AT, RING_THREAD_AT, RING_WRITE_AT,
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
    next_ring: AtomicU32,
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
    /// with the process, the clock's anchor and the callsites registered so far.
    pub(crate) fn create(
        recording: &Path,
        process: &ProcessInfo,
        anchor: ClockAnchor,
    ) -> std::io::Result<Self> {
        let path = ring_dir_of(recording)
            .ok_or_else(|| std::io::Error::other("a recording path without a file name"))?;
        std::fs::create_dir_all(&path)?;
        let file = OpenOptions::new().write(true).create_new(true).open(path.join(META_FILE))?;
        lock(&file)?;
        let mut frames = FrameWriter::default();
        frames.buf.extend_from_slice(&Header::CURRENT.to_bytes());
        frames.process(process);
        frames.pass(anchor);
        frames.name(crate::callsites::REQUEST_ID_FIELD);
        let mut meta = MetaFile { file, callsites: HashSet::default(), frames, failed: false };
        meta.flush()?;
        Ok(Self { path, meta: Mutex::new(meta), next_ring: AtomicU32::new(1) })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `meta`'s callsite frame, unless written before.
    pub(crate) fn callsite(&self, meta: Meta) {
        let mut m = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        if !m.failed && m.callsites.insert(raw::meta_address(meta)) {
            m.frames.callsite(meta);
            let _ = m.flush();
        }
    }

    /// Appends a thread frame.
    pub(crate) fn thread(&self, thread_id: u64, name: &str) {
        let mut m = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        if !m.failed {
            m.frames.thread(thread_id, name);
            let _ = m.flush();
        }
    }

    /// A new ring of `capacity` records in a file of its own.
    pub(crate) fn ring(&self, capacity: usize) -> std::io::Result<FileRing> {
        let number = self.next_ring.fetch_add(1, Ordering::Relaxed);
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
        let file = Arc::new(Mapped { _map: map, owner });
        // SAFETY: as above; `keep` holds the mapping for as long as the ring lives.
        let (prod, cons) = unsafe { ring::ring_in(indices, slots, capacity, Box::new(file.clone())) };
        Ok(FileRing { prod, cons, number, file })
    }

    /// Removes the directory: the recording holds everything the rings did (shutdown).
    pub(crate) fn remove(&self) -> std::io::Result<()> {
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
pub(crate) struct Mapped {
    _map: MmapMut,
    /// The header's owner thread id.
    owner: NonNull<AtomicU64>,
}

// SAFETY: `owner` points into `_map`, which `Mapped` owns; it is only accessed atomically.
unsafe impl Send for Mapped {}
// SAFETY: as above.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Records `thread_id` as the thread now writing the ring (a thread taking a ring, new or
    /// pooled, before its first record).
    pub(crate) fn set_owner(&self, thread_id: u64) {
        // SAFETY: inside the mapping, 8-byte aligned (offset 32 of a page); nothing accesses
        // these bytes but atomically, and the reader of a dead process's file.
        unsafe { self.owner.as_ref() }.store(thread_id, Ordering::Relaxed);
    }
}

/// Takes an exclusive `flock` on `file`, held until it is closed (or the process dies).
fn lock(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain system call on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether some live process holds the `flock` of the metadata file at `path`.
pub fn is_locked(path: &Path) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let file = File::open(path)?;
    // SAFETY: as in `lock`.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0 {
        return Ok(false);
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::WouldBlock {
        Ok(true)
    } else {
        Err(e)
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
