//! The input flags the subcommands share, and what they read: [`FileInputs`] for the views of
//! recording files (`profile`, `anomalies`, `flame`, `report`), [`TraceInputs`] for the
//! request-causality views, which can also fetch their traces from Jaeger.
//!
//! Warnings about the data go to stderr, so `--json` output on stdout stays exactly its
//! documented shape.

use std::path::PathBuf;

use clap::Args;
use ringtrace_analysis::{build_causality, fetch_jaeger, Causality, CausalityOptions, Dataset, JaegerQuery};

use crate::{load, parse};

/// Recording files and how a file cut short is treated.
#[derive(Args, Debug)]
pub struct FileInputs {
    /// Recording files or directories, OTLP/JSON lines, or Jaeger JSON.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Refuse a file cut short (a crash mid-write) instead of reading it up to the cut with a
    /// warning.
    #[arg(long)]
    pub strict: bool,
}

impl FileInputs {
    /// The inputs' spans, compact ([`load::read_compact`]), calling `on_file(done, total)` after
    /// each file.
    pub fn read_compact(&self, on_file: &mut dyn FnMut(usize, usize)) -> anyhow::Result<Dataset> {
        Ok(load::read_compact(&self.inputs, self.strict, on_file)?)
    }

    /// The inputs' spans, compact, with a progress bar on stderr while they are read
    /// ([`load::read_compact_showing_progress`]).
    pub fn read_compact_showing_progress(&self) -> anyhow::Result<Dataset> {
        Ok(load::read_compact_showing_progress(&self.inputs, self.strict)?)
    }
}

/// Where the traces come from, and how their times are treated.
#[derive(Args, Debug, Default)]
pub struct TraceInputs {
    /// Recording files or directories, OTLP/JSON lines, or Jaeger JSON; or a Parquet store
    /// (`ringtrace export --format parquet`), given alone.
    #[arg(required_unless_present = "jaeger", conflicts_with = "jaeger", value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Fetch traces from this Jaeger query service instead (e.g. http://localhost:16686).
    #[arg(long, value_name = "URL", requires = "service")]
    pub jaeger: Option<String>,
    /// With --jaeger: the service whose traces to fetch.
    #[arg(long, value_name = "S", requires = "jaeger")]
    pub service: Option<String>,
    /// With --jaeger: how far back to search, e.g. 1h, 30m.
    #[arg(long, default_value = "1h", value_parser = parse::parse_nanos, requires = "jaeger")]
    pub lookback: u64,
    /// With --jaeger: the most traces to fetch.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..), requires = "jaeger")]
    pub limit: u64,
    /// Correct clock skew between nodes before analysing, as Jaeger's adjuster does.
    #[arg(long)]
    pub adjust_skew: bool,
    /// Refuse an input file cut short (as by a crash mid-write) instead of reading its intact
    /// part with a warning.
    #[arg(long, conflicts_with = "jaeger")]
    pub strict: bool,
}

/// Marks the causality views' INPUT required, so `--help` shows `<INPUT>...`: [`TraceInputs`]
/// makes it `required_unless_present = "jaeger"`, which clap renders as optional. It also
/// conflicts with `--jaeger`, and clap excuses a missing required argument when a conflicting one
/// is present — so `--jaeger URL --service S` without an INPUT still parses.
pub fn inputs_required(arg: clap::Arg) -> clap::Arg {
    arg.required_unless_present(clap::builder::Resettable::<clap::Id>::Reset).required(true)
}

/// The Parquet store among `inputs` (a directory `ringtrace export --format parquet` wrote),
/// which the views read through the query engine; `None` when there is none. A store is read
/// alone: mixed with other inputs it is an error.
#[cfg(feature = "store")]
pub fn store_input(inputs: &[PathBuf]) -> anyhow::Result<Option<ringtrace_analysis::engine::Store>> {
    use ringtrace_analysis::engine::{is_store, Store};
    let Some(dir) = inputs.iter().find(|p| is_store(p)) else { return Ok(None) };
    if inputs.len() > 1 {
        anyhow::bail!(
            "{} is a Parquet store: it is read alone, through the query engine; give it as the only INPUT (export the other inputs into it first)",
            dir.display()
        );
    }
    #[cfg(feature = "distributed")]
    if let Some(scheduler) = SCHEDULER.get() {
        return Ok(Some(Store::open_on(dir, scheduler)?));
    }
    Ok(Some(Store::open(dir)?))
}

/// The Ballista scheduler the views over a store run on (`--scheduler`), when given.
#[cfg(feature = "distributed")]
static SCHEDULER: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Runs the views over a store on the Ballista cluster of `scheduler`, when given.
#[cfg(feature = "distributed")]
pub fn on_scheduler(scheduler: Option<String>) {
    if let Some(url) = scheduler {
        let _ = SCHEDULER.set(url);
    }
}

/// A scheduler's address: `df://HOST:PORT` (or `df://HOST`, port 50050).
#[cfg(feature = "distributed")]
pub fn parse_scheduler(s: &str) -> Result<String, String> {
    let rest = s.strip_prefix("df://").ok_or_else(|| format!("{s:?}: expected df://HOST:PORT"))?;
    let (host, port) = rest.rsplit_once(':').unwrap_or((rest, "50050"));
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("{s:?}: expected df://HOST:PORT, with a host and a port number"));
    }
    Ok(s.to_owned())
}

/// Without the `store` feature, a store is read as a directory of recordings (it holds none).
#[cfg(not(feature = "store"))]
pub fn store_input(_: &[PathBuf]) -> anyhow::Result<Option<std::convert::Infallible>> {
    Ok(None)
}

/// Traces read and arranged as trees.
pub struct Loaded {
    /// The spans.
    pub data: Dataset,
    /// One tree per trace.
    pub causality: Causality,
}

impl TraceInputs {
    /// The spans, compact: read from the inputs, or fetched from Jaeger.
    fn dataset(&self) -> anyhow::Result<Dataset> {
        match (&self.jaeger, &self.service) {
            (Some(endpoint), Some(service)) => {
                let mut query = JaegerQuery::new(endpoint.as_str(), service.as_str());
                query.lookback_ns = self.lookback;
                query.limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
                let mut data = fetch_jaeger(&query)?;
                data.spans.iter_mut().for_each(ringtrace_analysis::Span::compact);
                Ok(data)
            }
            _ => Ok(load::read_compact_showing_progress(&self.inputs, self.strict)?),
        }
    }

    /// How request trees are built from these inputs.
    pub fn causality_options(&self) -> CausalityOptions {
        CausalityOptions { adjust_skew: self.adjust_skew }
    }

    /// Reads the traces and builds every request's tree; prints what was repaired to stderr.
    pub fn load(&self) -> anyhow::Result<Loaded> {
        let data = self.dataset()?;
        let causality = build_causality(&data, &self.causality_options());
        report_warnings(&causality);
        Ok(Loaded { data, causality })
    }
}

/// Runs `view` over `store`, then prints to stderr what building its request trees repaired, as
/// the views over recordings do.
#[cfg(feature = "store")]
pub fn on_store<T, E: Into<anyhow::Error>>(
    store: &ringtrace_analysis::engine::Store,
    view: impl FnOnce(&ringtrace_analysis::engine::Store) -> Result<T, E>,
) -> anyhow::Result<T> {
    let out = view(store).map_err(Into::into)?;
    let repairs = store.repairs();
    report_repairs(&repairs);
    report_skew(&store.clock_skew(), &repairs);
    Ok(out)
}

/// An error writing a view's output while a store streams: kept aside, so that it is reported
/// as what it is (a full disk, a closed pipe) rather than as an error of the store.
#[cfg(feature = "store")]
#[derive(Default)]
pub struct OutputError(Option<std::io::Error>);

#[cfg(feature = "store")]
impl OutputError {
    /// `written`, kept aside when it failed; the stream is then stopped.
    pub fn keep(
        &mut self,
        written: std::io::Result<()>,
    ) -> Result<(), ringtrace_analysis::store::StoreError> {
        written.map_err(|e| {
            self.0 = Some(e);
            ringtrace_analysis::store::StoreError::Format("writing the output failed".to_owned())
        })
    }

    /// `streamed`, or the output's error when that is what stopped it.
    pub fn check<T>(self, streamed: anyhow::Result<T>) -> anyhow::Result<T> {
        match (self.0, streamed) {
            (Some(e), Err(_)) => Err(e.into()),
            (_, streamed) => streamed,
        }
    }
}

fn report_warnings(causality: &Causality) {
    report_repairs(&causality.warnings);
    report_skew(&causality.clock_skew, &causality.warnings);
}

fn report_repairs(w: &ringtrace_analysis::CausalityWarnings) {
    if !w.is_empty() {
        eprintln!("ringtrace: note: repaired or unusual spans: {}", w.described().join("; "));
    }
}

fn report_skew(
    clock_skew: &[ringtrace_analysis::ClockSkew],
    repairs: &ringtrace_analysis::CausalityWarnings,
) {
    for skew in clock_skew.iter().filter(|s| s.detected()) {
        eprintln!(
            "ringtrace: note: clock of {} appears {} ns {} {} ({} client/server pairs){}",
            skew.server_node,
            skew.offset_ns.unsigned_abs(),
            if skew.offset_ns >= 0 { "ahead of" } else { "behind" },
            skew.client_node,
            skew.pairs,
            if repairs.skew_adjusted_spans > 0 { "" } else { "; --adjust-skew corrects it" }
        );
    }
}
