//! `ringtrace recover`: appends to raw recordings what their processes, killed while recording,
//! left in their ring files, and removes those files.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use ringtrace_analysis::recover::{self, RecoverError};
use serde_json::json;

/// Arguments of `ringtrace recover`.
#[derive(Args, Debug)]
pub struct RecoverArgs {
    /// Recording directories (each recording in it whose process left ring files is recovered)
    /// or raw recordings (`.rtrace`).
    #[arg(required = true, value_name = "DIR")]
    pub inputs: Vec<PathBuf>,
    /// One JSON object per recording: `recording`, `records`, `rings`, `unreadable` (ring files
    /// not read, with why), `damaged_frames` (of the recording, passed over),
    /// `damaged_meta_frames` (of the ring directory's metadata file, passed over), `error`.
    #[arg(long)]
    pub json: bool,
}

/// Runs `ringtrace recover`; fails when some recording could not be recovered (the others
/// still are).
pub fn run(args: RecoverArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut recordings = Vec::new();
    for input in &args.inputs {
        if input.is_dir() {
            recordings.extend(
                recover::with_leftovers(input).map_err(|e| anyhow::anyhow!("{}: {e}", input.display()))?,
            );
        } else if input.is_file() {
            recordings.push(input.clone());
        } else {
            anyhow::bail!("{}: no such file or directory", input.display());
        }
    }
    let mut failed = 0;
    for recording in &recordings {
        let result = recover::recover(recording);
        // A process still running is not a failure: its drain writes its records.
        if result.as_ref().is_err_and(|e| !matches!(e, RecoverError::Live(_))) {
            failed += 1;
        }
        if args.json {
            writeln!(out, "{}", as_json(recording, &result))?;
        } else {
            writeln!(out, "{}", as_text(recording, &result))?;
        }
    }
    if recordings.is_empty() && !args.json {
        writeln!(out, "no ring files left by a process that died: nothing to recover")?;
    }
    if failed > 0 {
        anyhow::bail!("{failed} of {} recordings could not be recovered", recordings.len());
    }
    Ok(())
}

fn as_text(recording: &Path, result: &Result<Option<recover::Leftovers>, RecoverError>) -> String {
    let path = recording.display();
    match result {
        Ok(None) => format!("{path}: no ring files: nothing to recover"),
        Ok(Some(l)) => {
            let mut line = format!("{path}: {} records recovered from {} ring files", l.records, l.rings);
            if l.counters.is_some() {
                line.push_str("; loss counters brought up to date from them");
            }
            for (file, why) in &l.unreadable {
                line.push_str(&format!("; {} not read: {why} (kept)", file.display()));
            }
            if let Some(first) = &l.first_damaged {
                line.push_str(&format!(
                    "; {} damaged frames of the recording passed over, the first: {first}",
                    l.damaged_frames
                ));
            }
            if let Some(first) = &l.meta_first_damaged {
                line.push_str(&format!(
                    "; {} damaged frames of the ring directory's metadata file passed over (records naming what they defined are not read), the first: {first}",
                    l.meta_damaged_frames
                ));
            }
            line
        }
        Err(RecoverError::Live(_)) => format!("{path}: skipped: its process is still running"),
        Err(e) => format!("{path}: not recovered: {e}"),
    }
}

fn as_json(recording: &Path, result: &Result<Option<recover::Leftovers>, RecoverError>) -> serde_json::Value {
    let (records, rings, counters, unreadable, damaged, damaged_meta, error) = match result {
        Ok(None) => (0, 0, false, Vec::new(), 0, 0, None),
        Ok(Some(l)) => (
            l.records,
            l.rings,
            l.counters.is_some(),
            l.unreadable
                .iter()
                .map(|(f, why)| json!({"file": f.display().to_string(), "error": why}))
                .collect(),
            l.damaged_frames,
            l.meta_damaged_frames,
            None,
        ),
        Err(e) => (0, 0, false, Vec::new(), 0, 0, Some(e.to_string())),
    };
    json!({
        "recording": recording.display().to_string(),
        "records": records,
        "rings": rings,
        "counters_updated": counters,
        "unreadable": unreadable,
        "damaged_frames": damaged,
        "damaged_meta_frames": damaged_meta,
        "error": error,
    })
}
