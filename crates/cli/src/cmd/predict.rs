//! `ringtrace predict`: a many-task stage's I/O time from a file system's envelope
//! (`ringtrace_analysis::envelope`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use ringtrace_analysis::envelope::{predict, Envelope, Stage, StageKind};

use crate::parse;

/// The stage's kind.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StageArg {
    /// Each task creates and writes its own file.
    Write,
    /// Each task reads its own file (and a shared one with --shared-bytes).
    Read,
}

/// Arguments of `ringtrace predict`.
#[derive(Args, Debug)]
pub struct PredictArgs {
    /// The envelope (`ringtrace envelope --json` output, or one flat object of its keys).
    #[arg(long, value_name = "FILE")]
    pub envelope: PathBuf,
    /// What the stage's tasks do.
    #[arg(long, value_enum)]
    pub stage: StageArg,
    /// Tasks in the stage (N).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub tasks: u64,
    /// Nodes, one worker process each (C).
    #[arg(long, value_name = "C", value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: u32,
    /// Each task's file size (D): 4K, 1M, 8M…
    #[arg(long, value_name = "D", value_parser = parse::parse_bytes)]
    pub bytes: u64,
    /// Read stages: the fraction of reads that are local (A), from 0 to 1.
    #[arg(long, value_name = "A", default_value_t = 1.0)]
    pub local_fraction: f64,
    /// Read stages: every task also reads one shared file of this size (DN).
    #[arg(long, value_name = "DN", value_parser = parse::parse_bytes)]
    pub shared_bytes: Option<u64>,
    /// Print JSON: {"seconds":F,"rounds":R,"terms":[{"name","seconds","bound"}]}.
    #[arg(long)]
    pub json: bool,
    /// Also write, as SVG, heatmaps of the stage's predicted bandwidth over (tasks × file size)
    /// and (processes × file size), each cell marked B or T for what bounds it.
    #[arg(long, value_name = "FILE")]
    pub heatmap: Option<PathBuf>,
}

/// Runs `ringtrace predict`.
pub fn run(args: PredictArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.envelope)
        .with_context(|| format!("reading {}", args.envelope.display()))?;
    let envelope =
        Envelope::from_json(&text).with_context(|| format!("reading {}", args.envelope.display()))?;
    let stage = Stage {
        kind: match args.stage {
            StageArg::Write => StageKind::Write,
            StageArg::Read => StageKind::Read,
        },
        tasks: args.tasks,
        nodes: args.nodes,
        bytes: args.bytes,
        local_fraction: args.local_fraction,
        shared_bytes: args.shared_bytes,
    };
    if let Some(path) = &args.heatmap {
        let maps = ringtrace_analysis::envelope::heatmaps(&envelope, &stage);
        let title = format!(
            "{} stage on {} nodes, {} tasks",
            if stage.kind == StageKind::Write { "write" } else { "read" },
            stage.nodes,
            stage.tasks
        );
        std::fs::write(path, ringtrace_analysis::envelope::heatmaps_svg(&maps, &title))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let p = predict(&envelope, &stage)?;
    if args.json {
        serde_json::to_writer(&mut *out, &p.to_json())?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "predicted I/O time: {:.6} s over {} rounds of {} tasks", p.seconds, p.rounds, args.nodes)?;
    for t in &p.terms {
        writeln!(out, "  {:<12} {:>12.6} s  {}-bound", t.name, t.seconds, t.bound.as_str())?;
    }
    Ok(())
}
