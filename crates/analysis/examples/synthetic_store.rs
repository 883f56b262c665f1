//! Writes a large synthetic Parquet store — what `ringtrace export --format parquet` writes —
//! straight from generated requests, a piece at a time, so that a store larger than memory (50
//! million spans) can be made: the same word-count requests as `synthetic_recording`, with the
//! same attributes, through the streaming export.
//!
//! ```text
//! cargo run --release -p ringtrace-analysis --features store --example synthetic_store -- OUT_DIR [SPANS]
//! ```
//!
//! `SPANS` defaults to 1,000,000 (in requests of 43 spans). `FILE_ROWS` in the environment sets
//! the rows per file (the export's 1,048,576 otherwise), to make a store of many files.

use std::path::PathBuf;

use ringtrace_analysis::engine::StoreExport;
use ringtrace_test_support::synthetic;

const FANOUT: usize = 8;

/// Requests generated at a time.
const PIECE: usize = 1_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out: PathBuf = args.next().ok_or("usage: synthetic_store OUT_DIR [SPANS]")?.into();
    let spans: usize = match args.next() {
        Some(s) => s.parse().map_err(|_| format!("SPANS {s:?} is not a number"))?,
        None => 1_000_000,
    };
    let traces = spans.div_ceil(3 + 5 * FANOUT);
    let mut export = match std::env::var("FILE_ROWS").ok().and_then(|v| v.parse().ok()) {
        Some(rows) => StoreExport::with_limits(&out, 65_536, rows)?,
        None => StoreExport::new(&out)?,
    };
    for first in (0..traces).step_by(PIECE) {
        let piece = synthetic::requests(first..(first + PIECE).min(traces), FANOUT, 7);
        // A process's spans at a time, as a recording's reader hands them over.
        let mut by_process = vec![Vec::new(); piece.processes.len()];
        for span in piece.spans {
            by_process[span.process].push(synthetic::with_recorded_attributes(span));
        }
        for (spans, process) in by_process.into_iter().zip(&piece.processes) {
            export.add(spans, process)?;
        }
    }
    let written = export.finish()?;
    println!("{}: {} spans", out.display(), written.spans);
    Ok(())
}
