//! Writes a large synthetic recording — one OTLP recording (`.otlp`, as `ringtrace export
//! --format otlp` writes them: frames of 1,000 spans) per process — shaped like the demo
//! cluster's word counts, with node-2's disk ten times slower.
//!
//! ```text
//! cargo run --release -p ringtrace-analysis --example synthetic_recording -- OUT_DIR [SPANS]
//! ```
//!
//! `SPANS` defaults to 1,000,000 (in requests of 43 spans). The files are what `ringtrace`'s
//! analysis subcommands read, for measuring their time and memory at scale.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use ringtrace_analysis::model::{Dataset, Process, Value};
use ringtrace_test_support::synthetic;

const FANOUT: usize = 8;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out: PathBuf = args.next().ok_or("usage: synthetic_recording OUT_DIR [SPANS]")?.into();
    let spans: usize = match args.next() {
        Some(s) => s.parse().map_err(|_| format!("SPANS {s:?} is not a number"))?,
        None => 1_000_000,
    };
    std::fs::create_dir_all(&out)?;
    let data = synthetic::dataset(spans.div_ceil(3 + 5 * FANOUT), FANOUT, 7);
    for (p, (node, daemon)) in synthetic::PROCESSES.iter().enumerate() {
        let path = out.join(format!("{node}_{daemon}_{}.otlp", 1000 + p));
        let process = Process {
            node: (*node).to_owned(),
            daemon: (*daemon).to_owned(),
            pid: Some(1000 + p as u32),
            attributes: vec![("telemetry.sdk.name".to_owned(), Value::Str("ringtrace".to_owned()))],
            ..Process::default()
        };
        let spans =
            data.spans.iter().filter(|s| s.process == p).map(|s| with_attributes(s.clone())).collect();
        let mine = Dataset { processes: vec![process], spans };
        let mut file = BufWriter::new(File::create(&path)?);
        ringtrace_analysis::export::write_otlp(&mine, &mut file)?;
        println!("{}: {} spans", path.display(), mine.spans.len());
    }
    Ok(())
}

/// The span of process 0 of its file, with the attributes a recording gives it.
fn with_attributes(s: ringtrace_analysis::Span) -> ringtrace_analysis::Span {
    let mut s = synthetic::with_recorded_attributes(s);
    s.process = 0;
    s
}
