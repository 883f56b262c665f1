//! `ringtrace io`: I/O calls — imported from `strace` logs of any program, or recorded by
//! `ringtrace::io` — linked to the requests they served, and summarised.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use ringtrace_analysis::io::views::{io_breakdown, io_call_types, io_sizes, io_stacks, StackOrder};
use ringtrace_analysis::io::{self as io_analysis, import::import_strace, io_calls, link_requests, strace};
use ringtrace_analysis::{export, io_output};

use crate::input::FileInputs;

/// Arguments of `ringtrace io`.
#[derive(Args, Debug)]
pub struct IoArgs {
    #[command(subcommand)]
    pub command: IoCommand,
}

/// The `ringtrace io` subcommands.
#[derive(Subcommand, Debug)]
pub enum IoCommand {
    /// Turn an `strace -f -ttt -T -yy [-k]` log of any program into a recording of its I/O
    /// calls, tagged with node NAME.
    Import(ImportArgs),
    /// The requests and the I/O calls each made, on every host, linked by addresses, turns on
    /// each connection, threads and spans.
    Requests(RequestsArgs),
    /// Total I/O time per (client, serving host and process, operation).
    Breakdown(ViewArgs),
    /// Count and total time per call type and host, with the files and peers that dominate.
    Calls(ViewArgs),
    /// Transfer sizes per (operation, process, peer), and bytes sent against bytes asked for.
    Sizes(ViewArgs),
    /// For the slowest or most frequent call groups: their code locations, what they share and
    /// where they part.
    Stacks(StacksArgs),
    /// The I/O envelope of the file system the recorded processes used, derived from their file
    /// calls (what `ringtrace envelope` measures with a benchmark); `ringtrace predict
    /// --envelope` reads its JSON.
    Envelope(PassiveEnvelopeArgs),
}

/// Arguments of `ringtrace io envelope`.
#[derive(Args, Debug)]
pub struct PassiveEnvelopeArgs {
    /// Only the calls of this node; repeatable (default: every node).
    #[arg(long, value_name = "NODE")]
    pub node: Vec<String>,
    /// Print the envelope as JSON, as `ringtrace envelope --json` does.
    #[arg(long)]
    pub json: bool,
    /// Write the JSON envelope to this file too.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub input: FileInputs,
}

/// The format `ringtrace io import` writes.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ImportFormat {
    /// OTLP protobuf frames, as ringtrace's `.otlp` recordings.
    Otlp,
    /// OTLP/JSON lines.
    OtlpJson,
}

/// Arguments of `ringtrace io import`.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The node (host name) the log was taken on.
    #[arg(long, value_name = "NAME")]
    pub host: String,
    /// Names a traced process (its daemon): `PID=NAME`; repeatable. Unnamed processes take their
    /// program's name, else `pid-N`.
    #[arg(long = "pid-name", value_name = "PID=NAME", value_parser = parse_pid_name)]
    pub pid_names: Vec<(u32, String)>,
    /// The strace log (`-`: standard input).
    #[arg(value_name = "LOG")]
    pub log: PathBuf,
    /// The recording to write.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,
    /// The format to write.
    #[arg(long, value_enum, default_value = "otlp")]
    pub format: ImportFormat,
}

fn parse_pid_name(s: &str) -> Result<(u32, String), String> {
    let (pid, name) = s.split_once('=').ok_or_else(|| format!("`{s}`: expected PID=NAME"))?;
    let pid = pid.trim().parse::<u32>().map_err(|_| format!("`{s}`: `{pid}` is not a process id"))?;
    if name.trim().is_empty() {
        return Err(format!("`{s}`: the name is empty"));
    }
    Ok((pid, name.trim().to_owned()))
}

/// Arguments of the `ringtrace io` views.
#[derive(Args, Debug)]
pub struct ViewArgs {
    /// Print JSON (the shape is in `ringtrace_analysis::io_output`).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub input: FileInputs,
}

/// Arguments of `ringtrace io requests`.
#[derive(Args, Debug)]
pub struct RequestsArgs {
    /// Print JSON: {"requests":[{"request":"...","calls":[{"host","tid","fd","op",
    /// "start_unix_ns","end_unix_ns","ok","bytes","local","remote"}]}],"unlinked_calls":N}
    /// (`local`/`remote` only for socket calls; each call also has `daemon` and `pid`, and
    /// `path` and `error` when known).
    #[arg(long)]
    pub json: bool,
    /// The table shows this many requests, most I/O time first.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    #[command(flatten)]
    pub input: FileInputs,
}

/// What `ringtrace io stacks` ranks by.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StacksBy {
    /// Total time.
    Time,
    /// Number of calls.
    Count,
}

/// Arguments of `ringtrace io stacks`.
#[derive(Args, Debug)]
pub struct StacksArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Rank call groups by total time or by number of calls.
    #[arg(long, value_enum, default_value = "time")]
    pub by: StacksBy,
    /// How many call groups.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
    #[command(flatten)]
    pub input: FileInputs,
}

/// Runs `ringtrace io …`.
pub fn run(args: IoArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    match args.command {
        IoCommand::Import(a) => import(a, out),
        IoCommand::Requests(a) => {
            let calls = calls(&a.input)?;
            let links = link_requests(&calls);
            if a.json {
                io_output::write_requests_json(&calls, &links, out)?;
            } else {
                io_output::write_requests_table(&calls, &links, a.top, out)?;
            }
            Ok(())
        }
        IoCommand::Breakdown(a) => {
            let calls = calls(&a.input)?;
            let rows = io_breakdown(&calls, &link_requests(&calls));
            if a.json {
                io_output::write_breakdown_json(&rows, out)?;
            } else {
                io_output::write_breakdown_table(&rows, out)?;
            }
            Ok(())
        }
        IoCommand::Calls(a) => {
            let rows = io_call_types(&calls(&a.input)?);
            if a.json {
                io_output::write_call_types_json(&rows, out)?;
            } else {
                io_output::write_call_types_table(&rows, out)?;
            }
            Ok(())
        }
        IoCommand::Sizes(a) => {
            let sizes = io_sizes(&calls(&a.input)?);
            if a.json {
                io_output::write_sizes_json(&sizes, out)?;
            } else {
                io_output::write_sizes_table(&sizes, out)?;
            }
            Ok(())
        }
        IoCommand::Stacks(a) => {
            let order = match a.by {
                StacksBy::Time => StackOrder::Slowest,
                StacksBy::Count => StackOrder::MostFrequent,
            };
            let groups = io_stacks(&calls(&a.input)?, order, a.top);
            if a.json {
                io_output::write_stacks_json(&groups, out)?;
            } else {
                io_output::write_stacks_table(&groups, out)?;
            }
            Ok(())
        }
        IoCommand::Envelope(a) => passive_envelope(a, out),
    }
}

/// Runs `ringtrace io envelope`.
fn passive_envelope(args: PassiveEnvelopeArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let data = args.input.read_compact_showing_progress()?;
    let envelope = io_analysis::passive_envelope(&data, &args.node);
    if envelope.points.is_empty() {
        let nodes =
            if args.node.is_empty() { String::new() } else { format!(" of node {}", args.node.join(", ")) };
        bail!(
            "the inputs hold no file reads or writes{nodes} ({} spans): record them with `ringtrace::io`, \
             or import an strace log with `ringtrace io import`",
            data.spans.len()
        );
    }
    let json = envelope.to_json();
    if let Some(path) = &args.output {
        std::fs::write(path, format!("{json}\n")).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        writeln!(out, "{json}")?;
        return Ok(());
    }
    super::envelope::write_table(&envelope, "I/O envelope of the recorded file calls (busy time)", out)
}

/// The inputs' I/O calls; an error when they hold none, naming how to get some.
fn calls(input: &FileInputs) -> anyhow::Result<Vec<io_analysis::IoCall>> {
    let data = input.read_compact_showing_progress()?;
    let calls = io_calls(&data);
    if calls.is_empty() {
        bail!(
            "the inputs hold no I/O calls ({} spans, none with an `io.op` attribute): record them with \
             `ringtrace::io`, or import an strace log with `ringtrace io import`",
            data.spans.len()
        );
    }
    Ok(calls)
}

fn import(args: ImportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let log = if args.log.as_os_str() == "-" {
        strace::read(std::io::stdin().lock()).context("reading the strace log from standard input")?
    } else {
        let file = File::open(&args.log).with_context(|| format!("opening {}", args.log.display()))?;
        strace::read(BufReader::new(file)).with_context(|| format!("reading {}", args.log.display()))?
    };
    let names: BTreeMap<u32, String> = args.pid_names.into_iter().collect();
    let data = import_strace(&log, &args.host, &names);
    let file = File::create(&args.output).with_context(|| format!("creating {}", args.output.display()))?;
    let mut w = BufWriter::new(file);
    let format = match args.format {
        ImportFormat::Otlp => export::ExportFormat::Otlp,
        ImportFormat::OtlpJson => export::ExportFormat::OtlpJson,
    };
    export::write(&data, format, &mut w).with_context(|| format!("writing {}", args.output.display()))?;
    w.flush().with_context(|| format!("writing {}", args.output.display()))?;
    let ignored: u64 = log.ignored_syscalls.values().sum();
    writeln!(
        out,
        "ringtrace: {} I/O calls of {} processes from {} to {}; {} other system calls ignored, {} other lines, \
         {} malformed lines{}{}",
        data.spans.len(),
        data.processes.len(),
        args.log.display(),
        args.output.display(),
        ignored,
        log.other_lines,
        log.malformed,
        if log.truncated { ", the log ends cut short" } else { "" },
        if log.unfinished > 0 { format!(", {} calls unfinished", log.unfinished) } else { String::new() },
    )?;
    for p in &log.problems {
        eprintln!("ringtrace: {}: line {}: {}", args.log.display(), p.line, p.message);
    }
    Ok(())
}
