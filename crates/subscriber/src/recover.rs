//! What a process that died left in its ring files, added to its recording.
//!
//! A collector keeps its rings in files beside its raw recording (`crate::ringfile`) and frees a
//! record only once the recording holds it. A process killed at any moment (`kill -9`, the OOM
//! killer, a power-cut of the process but not of the machine) therefore leaves every record it
//! published either in the recording or in a ring file, and this module finds the latter: the
//! records each ring still held, minus those the recording already has (a ring records frame
//! names its ring and position, so nothing is added twice), as frames to follow the recording's
//! last whole frame. [`leftovers`] computes them; readers replay the recording followed by them,
//! and [`recover`] (`ringtrace recover`) appends them to the file for good and
//! removes the ring files.
//!
//! The ring directory of a process still running is left alone: its drain writes those records
//! itself, and the process holds a lock on the directory's metadata file while it runs.

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ringtrace_core::raw::{
    self, ClockAnchor, Frame, FrameReader, FrameWriter, RawError, RingPosition, SkipDamage,
};

use crate::ringfile::{ring_dir_of, try_lock, META_FILE};

/// What a dead process's ring files add to its recording.
#[derive(Debug, Clone, Default)]
pub struct Leftovers {
    /// The ring directory.
    pub dir: PathBuf,
    /// Bytes of the recording that hold whole frames: the leftovers follow them (a frame the
    /// process was writing when it died, cut short, is dropped).
    pub whole_len: u64,
    /// The frames to append: metadata, then the records.
    pub frames: Vec<u8>,
    /// Records added.
    pub records: u64,
    /// Ring files read.
    pub rings: usize,
    /// Ring files that could not be read, with why (their records are not added).
    pub unreadable: Vec<(PathBuf, String)>,
    /// The counters frame added: the recording's last one, with losses the process counted
    /// after it (from the ring files' loss counters); `None` when the recording had them all.
    pub counters: Option<Vec<(String, u64)>>,
    /// Damaged frames of the recording passed over (what they held is missing; readers warn of
    /// them too), and the first of them: its number, byte offset and damage.
    pub damaged_frames: u64,
    /// See `damaged_frames`.
    pub first_damaged: Option<String>,
    /// Damaged frames of the ring directory's metadata file passed over (a callsite, name or
    /// thread they defined is missing: records that name it are not decoded), and the first.
    pub meta_damaged_frames: u64,
    /// See `meta_damaged_frames`.
    pub meta_first_damaged: Option<String>,
}

/// The ring and its loss counters named by a metadata file's counters frame (the final counters
/// of a ring whose file was removed); `None` for another frame.
fn ring_losses(counters: &[(String, u64)]) -> Option<(u32, [u64; 4])> {
    let value = |name: &str| counters.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
    let ring = u32::try_from(value(raw::RING_COUNTER_KEY)?).ok()?;
    Some((ring, raw::RING_LOSS_COUNTERS.map(|name| value(name).unwrap_or(0))))
}

/// The recording's last counters, `recorded`, with each loss counter raised to what the rings
/// counted (`rings`, in [`raw::RING_LOSS_COUNTERS`]' order) where that is more: the process
/// went on counting after its last counters frame. The rings do not see what rings kept in
/// memory dropped (a ring file that could not be made), which the recording's counters do, up
/// to their last frame: the larger of the two is kept. `None` when nothing is raised.
fn later_counters(recorded: &[(String, u64)], rings: [u64; 4]) -> Option<Vec<(String, u64)>> {
    let mut counters = recorded.to_vec();
    let mut raised = false;
    for (name, n) in raw::RING_LOSS_COUNTERS.into_iter().zip(rings) {
        match counters.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) if *v < n => {
                *v = n;
                raised = true;
            }
            Some(_) => {}
            None if n > 0 => {
                counters.push((name.to_owned(), n));
                raised = true;
            }
            None => {}
        }
    }
    raised.then_some(counters)
}

/// Why leftovers could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The recording or the metadata file is damaged before its end.
    #[error("{path}: {source}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: RawError,
    },
    /// The process is still running: its drain writes those records.
    #[error("{0}: the process that writes it is still running")]
    Live(PathBuf),
    /// The ring directory belongs to another process than the recording (same name).
    #[error("{0}: its ring directory belongs to another process (pid {1} there, {2} in the recording)")]
    OtherProcess(PathBuf, u32, u32),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecoverError + '_ {
    move |source| RecoverError::Io { path: path.to_owned(), source }
}

/// What the recording at `recording` holds that recovery needs: its whole length, the end
/// position of each ring's records, the last clock anchor.
struct Held {
    whole_len: u64,
    ends: HashMap<u32, u64>,
    anchor: Option<ClockAnchor>,
    process: Option<raw::ProcessInfo>,
    /// The last counters frame.
    counters: Option<Vec<(String, u64)>>,
    /// Threads a thread frame names.
    threads: HashSet<u64>,
    /// Damaged frames passed over.
    damaged: Passed,
}

/// Damaged frames a scan passed over: how many, and the first (its number, byte offset and
/// damage).
#[derive(Default)]
struct Passed {
    frames: u64,
    first: Option<String>,
}

/// Hands each frame of `reader` to `each`, up to the end of the file or a cut, passing over
/// damaged frames as every reader does; damage that stops the reading is an error made by
/// `damaged`. Returns the offset after the last whole frame, and what was passed over.
fn each_frame<R: Read>(
    mut reader: FrameReader<R>,
    damaged: impl Fn(RawError) -> RecoverError,
    mut each: impl FnMut(Frame<'_>) -> Result<(), RecoverError>,
) -> Result<(u64, Passed), RecoverError> {
    let mut skip = SkipDamage::default();
    match reader.read_past_damage(&mut skip, |frame, _, _, _| each(frame))? {
        None | Some(RawError::Truncated { .. }) => {
            let passed = Passed { frames: skip.skipped, first: skip.first.map(|e| e.to_string()) };
            Ok((reader.offset(), passed))
        }
        Some(e) => Err(damaged(e)),
    }
}

fn scan(path: &Path, input: impl Read) -> Result<Held, RecoverError> {
    let damaged = |source| RecoverError::Damaged { path: path.to_owned(), source };
    let reader = FrameReader::new(input).map_err(damaged)?;
    let mut held = Held {
        whole_len: reader.offset(),
        ends: HashMap::new(),
        anchor: None,
        process: None,
        counters: None,
        threads: HashSet::new(),
        damaged: Passed::default(),
    };
    (held.whole_len, held.damaged) = each_frame(reader, damaged, |frame| {
        match frame {
            Frame::Records { at: Some(at), records, .. } => {
                let end = at.position + (records.len() / raw::RECORD_SIZE) as u64;
                let e = held.ends.entry(at.ring).or_default();
                *e = (*e).max(end);
            }
            Frame::Pass(anchor) => held.anchor = Some(anchor),
            Frame::Process(p) => held.process = Some(p),
            Frame::Counters(c) => held.counters = Some(c),
            Frame::Thread { thread_id, .. } => {
                held.threads.insert(thread_id);
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(held)
}

/// The leftovers of the process that wrote the raw recording at `recording`: `None` when it left
/// no ring directory (it shut down cleanly, or kept its rings in memory).
///
/// # Errors
/// [`RecoverError::Live`] while the process runs; damage in the recording or the metadata
/// file; a directory that cannot be read. A ring file that cannot be read is reported in
/// [`Leftovers::unreadable`], the others still read.
pub fn leftovers(recording: &Path) -> Result<Option<Leftovers>, RecoverError> {
    Ok(locked_leftovers(recording, false)?.map(|(l, _lock)| l))
}

/// [`leftovers`], with the metadata file's lock (shared, or exclusive for [`recover`]) held by
/// the file returned: no process can take the directory meanwhile.
fn locked_leftovers(recording: &Path, exclusive: bool) -> Result<Option<(Leftovers, File)>, RecoverError> {
    let Some(dir) = ring_dir_of(recording).filter(|d| d.is_dir()) else { return Ok(None) };
    let meta_path = dir.join(META_FILE);
    // A directory without it is being made (or its process died before any ring was).
    let lock = match try_lock(&meta_path, exclusive) {
        Ok(Some(lock)) => lock,
        Ok(None) => return Err(RecoverError::Live(recording.to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&meta_path)(e)),
    };
    let file = File::open(recording).map_err(io(recording))?;
    let mut held = scan(recording, BufReader::new(file))?;
    let mut out = Leftovers {
        dir: dir.clone(),
        whole_len: held.whole_len,
        damaged_frames: held.damaged.frames,
        first_damaged: held.damaged.first.take(),
        ..Leftovers::default()
    };
    // Threads already named, by the recording or the metadata file.
    let mut named = std::mem::take(&mut held.threads);
    let mut w = FrameWriter::default();
    // The metadata file's callsites, names and threads: every one the rings may name (a
    // second definition of one the recording has is harmless).
    let mut meta_anchor = None;
    // Loss counters by ring: first the final counts of rings whose files the process removed,
    // then (replacing them, the latest) those of the ring files still there.
    let mut losses_by_ring: HashMap<u32, [u64; 4]> = HashMap::new();
    let meta = File::open(&meta_path).map_err(io(&meta_path))?;
    let damaged = |source| RecoverError::Damaged { path: meta_path.clone(), source };
    let reader = FrameReader::new(BufReader::new(meta)).map_err(damaged)?;
    let (_, meta_damaged) = each_frame(reader, damaged, |frame| {
        match frame {
            Frame::Callsite(c) => w.callsite_info(&c),
            Frame::Name { address, name } => w.name_at(address, &name),
            Frame::Thread { thread_id, name } => {
                w.thread(thread_id, &name);
                named.insert(thread_id);
            }
            Frame::Pass(anchor) => meta_anchor = Some(anchor),
            Frame::Counters(c) => {
                if let Some((ring, losses)) = ring_losses(&c) {
                    losses_by_ring.insert(ring, losses);
                }
            }
            Frame::Process(p) => {
                if let Some(r) = held.process.as_ref().filter(|r| **r != p) {
                    return Err(RecoverError::OtherProcess(recording.to_owned(), p.pid, r.pid));
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    (out.meta_damaged_frames, out.meta_first_damaged) = (meta_damaged.frames, meta_damaged.first);
    let mut rings: Vec<(u32, PathBuf)> = std::fs::read_dir(&dir)
        .map_err(io(&dir))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some(raw::RING_EXTENSION))
        .filter_map(|p| Some((p.file_stem()?.to_str()?.parse().ok()?, p)))
        .collect();
    rings.sort();
    let mut records = Vec::new();
    for (_, path) in rings {
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                out.unreadable.push((path, e.to_string()));
                continue;
            }
        };
        // Its loss counters count even when its records cannot be read; they are the latest
        // when the metadata also has the ring's final counts (the process died removing it).
        if let Some((ring, losses)) = raw::ring_file_losses(&bytes) {
            losses_by_ring.insert(ring, losses);
        }
        let leftover = match raw::read_ring_file(&bytes) {
            Ok(l) => l,
            Err(e) => {
                out.unreadable.push((path, e));
                continue;
            }
        };
        out.rings += 1;
        let end = held.ends.get(&leftover.header.ring).copied().unwrap_or(0);
        // Skip what the recording has; start at a group boundary.
        let skip = end.saturating_sub(leftover.position).min(leftover.records.len() as u64) as usize;
        let skip = skip
            + leftover.records[skip..]
                .iter()
                .position(raw::RawRecord::is_header)
                .unwrap_or(leftover.records.len() - skip);
        let rest = &leftover.records[skip..];
        if rest.is_empty() {
            continue;
        }
        records.push((leftover.header, leftover.thread_name, leftover.position + skip as u64, rest.to_vec()));
    }
    let mut totals = [0u64; 4];
    for losses in losses_by_ring.values() {
        for (total, n) in totals.iter_mut().zip(losses) {
            *total += n;
        }
    }
    let counters = later_counters(held.counters.as_deref().unwrap_or_default(), totals);
    if records.is_empty() && counters.is_none() {
        return Ok(Some((out, lock)));
    }
    if !records.is_empty() {
        if let Some(anchor) = held.anchor.or(meta_anchor) {
            w.pass(anchor);
        }
    }
    for (header, thread_name, position, rest) in records {
        // The ring's header names its thread (the metadata file does for version 1 files); a
        // name the recording has whole is not replaced by the header's, which may be cut.
        if let Some(name) = thread_name.filter(|_| named.insert(header.thread_id)) {
            w.thread(header.thread_id, &name);
        }
        let mut start = 0;
        while start < rest.len() {
            let end = raw::frame_end(start, rest.len(), |i| rest[i].is_header());
            let at = RingPosition { ring: header.ring, position: position + start as u64 };
            let frame = w.begin_ring_records(header.thread_id, at);
            w.raw_records(&rest[start..end]);
            w.end(frame);
            start = end;
        }
        out.records += rest.len() as u64;
    }
    if let Some(counters) = counters {
        w.counters(counters.iter().map(|(name, n)| (name.as_str(), *n)));
        out.counters = Some(counters);
    }
    out.frames = w.buf;
    Ok(Some((out, lock)))
}

/// Appends the leftovers of the process that wrote `recording` to it (cutting off a frame it
/// was writing when it died) and removes its ring files. Returns what was added; `None` when it
/// left no ring directory.
///
/// # Errors
/// As [`leftovers`]; writing the file or removing the ring directory failing.
pub fn recover(recording: &Path) -> Result<Option<Leftovers>, RecoverError> {
    let Some((l, _lock)) = locked_leftovers(recording, true)? else { return Ok(None) };
    let mut file = OpenOptions::new().write(true).open(recording).map_err(io(recording))?;
    file.set_len(l.whole_len).map_err(io(recording))?;
    file.seek(SeekFrom::End(0)).map_err(io(recording))?;
    file.write_all(&l.frames).map_err(io(recording))?;
    file.sync_data().map_err(io(recording))?;
    if l.unreadable.is_empty() {
        std::fs::remove_dir_all(&l.dir).map_err(io(&l.dir))?;
        if let Some(parent) = l.dir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(Some(l))
}

/// The raw recordings in `dir` whose process left ring files.
pub fn with_leftovers(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let rings = dir.join(crate::ringfile::RINGS_DIR);
    let mut found = Vec::new();
    if !rings.is_dir() {
        return Ok(found);
    }
    for entry in std::fs::read_dir(&rings)? {
        let entry = entry?;
        if !entry.path().is_dir() {
            continue;
        }
        let recording = dir.join(format!("{}.{}", entry.file_name().to_string_lossy(), raw::EXTENSION));
        if recording.is_file() {
            found.push(recording);
        }
    }
    found.sort();
    Ok(found)
}
