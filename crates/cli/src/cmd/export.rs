//! `ringtrace export`: recordings (raw or OTLP), OTLP/JSON or Jaeger JSON, written in a format
//! other tools read.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use ringtrace_analysis::export::{self, ExportFormat};

use crate::input::FileInputs;
use crate::load;

/// The formats `ringtrace export` writes.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    /// Length-delimited OTLP `TracesData` protobuf frames (the OpenTelemetry file exporter's
    /// binary form; ringtrace's own `.otlp` recordings).
    Otlp,
    /// OTLP/JSON lines, one `TracesData` per line (the Collector's file exporter).
    OtlpJson,
    /// Jaeger query-API JSON, `{"data": [trace, …]}`, which Jaeger UI opens.
    Jaeger,
    /// Parquet files in a directory, partitioned by day and node (`docs/parquet-store.md`),
    /// which DuckDB, Spark, Polars and DataFusion read as they are.
    Parquet,
}

/// Arguments of `ringtrace export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The format to write.
    #[arg(long, value_enum)]
    pub format: Format,
    /// The file to write (`-`: standard output); for `parquet`, the directory.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: PathBuf,
    #[command(flatten)]
    pub input: FileInputs,
}

/// Runs `ringtrace export`; prints what it wrote to `out`.
pub fn run(args: ExportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    #[cfg(feature = "store")]
    if matches!(args.format, Format::Parquet) && parquet_streamed(&args)? {
        return Ok(());
    }
    let read = ringtrace_analysis::read_inputs_with(&args.input.inputs, load::truncation(args.input.strict))?;
    load::print_warnings(&read.warnings, &mut std::io::stderr().lock());
    let mut data = read.data;
    // I/O calls imported from programs without spans join the traces of the requests they served.
    ringtrace_analysis::io::attach_to_traces(&mut data);
    let format = match args.format {
        Format::Otlp => ExportFormat::Otlp,
        Format::OtlpJson => ExportFormat::OtlpJson,
        Format::Jaeger => ExportFormat::Jaeger,
        Format::Parquet => return parquet(&data, &args.output),
    };
    if args.output.as_os_str() == "-" {
        export::write(&data, format, out)?;
        return Ok(());
    }
    let file = File::create(&args.output).with_context(|| format!("creating {}", args.output.display()))?;
    let mut w = BufWriter::new(file);
    export::write(&data, format, &mut w).with_context(|| format!("writing {}", args.output.display()))?;
    w.flush().with_context(|| format!("writing {}", args.output.display()))?;
    eprintln!(
        "ringtrace: wrote {} spans of {} processes to {}",
        data.spans.len(),
        data.processes.len(),
        args.output.display()
    );
    Ok(())
}

/// Writes the Parquet store reading the inputs batch by batch, in bounded memory; `false`, with
/// nothing written, when the inputs need the whole-dataset path (I/O calls to place in traces).
#[cfg(feature = "store")]
fn parquet_streamed(args: &ExportArgs) -> anyhow::Result<bool> {
    let dir = &args.output;
    if dir.as_os_str() == "-" {
        anyhow::bail!("--format parquet writes a directory of files: name it with -o DIR");
    }
    let files = ringtrace_analysis::list_inputs(&args.input.inputs)?;
    let Some(exported) =
        ringtrace_analysis::engine::export_files(&files, load::truncation(args.input.strict), dir)?
    else {
        return Ok(false);
    };
    load::print_warnings(&exported.warnings, &mut std::io::stderr().lock());
    report_parquet(&exported.written, exported.processes, dir);
    Ok(true)
}

#[cfg(feature = "store")]
fn report_parquet(written: &ringtrace_analysis::store::Written, processes: usize, dir: &std::path::Path) {
    eprintln!(
        "ringtrace: wrote {} spans of {processes} processes to {} ({} Parquet files)",
        written.spans,
        dir.display(),
        written.files.len()
    );
}

/// Writes the Parquet store into directory `dir`.
#[cfg(feature = "store")]
fn parquet(data: &ringtrace_analysis::Dataset, dir: &std::path::Path) -> anyhow::Result<()> {
    if dir.as_os_str() == "-" {
        anyhow::bail!("--format parquet writes a directory of files: name it with -o DIR");
    }
    let written = ringtrace_analysis::store::write_dir(data, dir)?;
    report_parquet(&written, data.processes.len(), dir);
    Ok(())
}

#[cfg(not(feature = "store"))]
fn parquet(_: &ringtrace_analysis::Dataset, _: &std::path::Path) -> anyhow::Result<()> {
    anyhow::bail!("this ringtrace was built without the `store` feature, which writes Parquet: build it with `--features store`")
}
