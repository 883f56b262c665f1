//! [`Builder`], [`init`], the flush [`Guard`] and the runtime [`Handle`].

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringtrace_core::{Clock, Identity};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;
use tracing_subscriber::EnvFilter;

use crate::drain::{self, Command};
use crate::layer::RingLayer;
use crate::local::filter::TargetFilter;
use crate::messages::{message, parse_quiet, QUIET_ENV};
use crate::ring_subscriber::{Levels, RingSubscriber};
use crate::shared::{Config, Shared};
use crate::sink::raw::RawRecording;
use crate::sink::{FlushWaiter, Sink};
use crate::stats::Stats;
use tracing_core::LevelFilter;

/// Environment variable: directory of the local recording.
pub const DIR_ENV: &str = "RINGTRACE_DIR";
/// Environment variable: records per thread ring.
pub const RING_CAPACITY_ENV: &str = "RINGTRACE_RING_CAPACITY";
/// Environment variable: `0` (or `false`) keeps rings in memory rather than in files beside the
/// recording (see [`Builder::ring_files`]).
pub const RING_FILES_ENV: &str = "RINGTRACE_RING_FILES";
/// Environment variable: events a span keeps (OpenTelemetry's span limit).
pub const SPAN_EVENT_LIMIT_ENV: &str = "OTEL_SPAN_EVENT_COUNT_LIMIT";
/// Environment variable: comma-separated target prefixes to record (all when unset).
pub const INCLUDE_ENV: &str = "RINGTRACE_INCLUDE";
/// Environment variable: comma-separated target prefixes never to record.
pub const EXCLUDE_ENV: &str = "RINGTRACE_EXCLUDE";
/// Default directory of the local recording.
pub const DEFAULT_DIR: &str = "ringtrace-recordings";
/// Default records per thread ring (64 bytes each: 1 MiB per recording thread).
pub const DEFAULT_RING_CAPACITY: usize = 16 * 1024;
/// Default number of concurrently open spans (a 64-byte table slot each: 4 MiB).
pub const DEFAULT_MAX_OPEN_SPANS: usize = 64 * 1024;
/// Default bound on the flush at shutdown.
pub const DEFAULT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors from setting ringtrace up.
///
/// `Debug` prints the same sentence as `Display` (as `anyhow::Error` does): `fn main() ->
/// Result<(), ringtrace::Error>` prints the error with `Debug`, and a person should read
/// `Error: RINGTRACE_RING_CAPACITY="lots" …`, not the enum's fields.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad configuration or I/O while starting.
    #[error(transparent)]
    Core(#[from] ringtrace_core::Error),
    /// A global subscriber was already installed.
    #[error("a global tracing subscriber is already installed: {0}")]
    AlreadyInstalled(String),
    /// The drain thread did not answer within the timeout.
    #[error("the drain thread did not finish within {0:?}")]
    Timeout(Duration),
    /// The drain thread has stopped (shut down already, or ended by a panic in a sink).
    #[error("the drain thread has stopped")]
    Stopped,
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

fn config_error(var: &'static str, value: &str, reason: &str) -> Error {
    Error::Core(ringtrace_core::Error::Config { var, value: value.to_owned(), reason: reason.to_owned() })
}

fn env_var(var: &'static str) -> Result<Option<String>, Error> {
    match std::env::var(var) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => {
            Err(config_error(var, &v.to_string_lossy(), "is not valid UTF-8"))
        }
    }
}

/// `var` as a count of at least `min`; `None` when it is not set. An error names the variable,
/// its value and what is wrong (`reason`).
fn env_count(var: &'static str, min: usize, reason: &str) -> Result<Option<usize>, Error> {
    let Some(v) = env_var(var)? else { return Ok(None) };
    match v.trim().parse::<usize>() {
        Ok(n) if n >= min => Ok(Some(n)),
        _ => Err(config_error(var, &v, reason)),
    }
}

fn prefixes(var: &'static str) -> Result<Vec<String>, Error> {
    let Some(v) = env_var(var)? else { return Ok(Vec::new()) };
    let list: Vec<String> =
        v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
    if list.is_empty() && !v.trim().is_empty() {
        return Err(config_error(var, &v, "has no target prefix"));
    }
    Ok(list)
}

/// Configures and starts a ringtrace collector.
///
/// Precedence for every setting: the builder (code), then the environment, then the default.
///
/// | setting | builder | environment | default |
/// |---|---|---|---|
/// | node | [`node`](Self::node) | `RINGTRACE_NODE` | hostname |
/// | daemon | [`daemon`](Self::daemon) | `OTEL_SERVICE_NAME` | executable name |
/// | recording directory | [`recording_dir`](Self::recording_dir), [`no_recording`](Self::no_recording) | `RINGTRACE_DIR` | `./ringtrace-recordings` |
/// | ring capacity (records per thread) | [`ring_capacity`](Self::ring_capacity) | `RINGTRACE_RING_CAPACITY` | 16384 |
/// | events kept per span | [`span_event_limit`](Self::span_event_limit) | `OTEL_SPAN_EVENT_COUNT_LIMIT` | 128 |
/// | target prefixes | [`include_target`](Self::include_target), [`exclude_target`](Self::exclude_target) | `RINGTRACE_INCLUDE`, `RINGTRACE_EXCLUDE` | all |
/// | level filter (with [`init`](Self::init)) | [`env_filter`](Self::env_filter) | `RUST_LOG` | `info` |
/// | extra resource attributes | [`resource_attribute`](Self::resource_attribute) | `OTEL_RESOURCE_ATTRIBUTES` | none |
/// | messages on stderr | [`quiet`](Self::quiet) | `RINGTRACE_QUIET` (`1`, `0`, `true`, `false`) | printed |
/// | OTLP export (feature `otlp`) | `otlp`, `otlp_endpoint`, `otlp_protocol`, [`no_otlp`](Self::no_otlp) | `OTEL_TRACES_EXPORTER`, `OTEL_EXPORTER_OTLP_*` | off |
///
/// Resource attributes merge key by key (code wins). Their `service.name` and `host.name` name
/// the daemon and node when neither the builder nor `OTEL_SERVICE_NAME` / `RINGTRACE_NODE` does.
/// The OTLP settings are in the `otlp` module's `OtlpConfig` (feature `otlp`). The variables
/// start no exporter of ringtrace's when a sink is the application's own exporter
/// ([`Sink::is_app_exporter`](crate::Sink::is_app_exporter): an `otel::SpanExporterSink`), which
/// reads them itself.
pub struct Builder {
    node: Option<String>,
    daemon: Option<String>,
    recording_dir: Option<PathBuf>,
    recording: bool,
    ring_files: Option<bool>,
    ring_capacity: Option<usize>,
    span_event_limit: Option<usize>,
    max_open_spans: usize,
    include: Vec<String>,
    exclude: Vec<String>,
    clock: Option<quanta::Clock>,
    sinks: Vec<Box<dyn Sink>>,
    drain_interval: Duration,
    batch_size: usize,
    flush_timeout: Duration,
    env_filter: Option<String>,
    resource_attributes: Vec<(String, String)>,
    #[cfg(feature = "otlp")]
    otlp: Option<crate::otlp::OtlpConfig>,
    no_otlp: bool,
    sampler: Option<crate::Sampler>,
    max_level: Option<LevelFilter>,
    sole_layer: bool,
    quiet: Option<bool>,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("node", &self.node)
            .field("daemon", &self.daemon)
            .field("recording_dir", &self.recording_dir)
            .field("ring_capacity", &self.ring_capacity)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// A builder with every setting at its default.
    pub fn new() -> Self {
        Self {
            node: None,
            daemon: None,
            recording_dir: None,
            recording: true,
            ring_files: None,
            ring_capacity: None,
            span_event_limit: None,
            max_open_spans: DEFAULT_MAX_OPEN_SPANS,
            include: Vec::new(),
            exclude: Vec::new(),
            clock: None,
            sinks: Vec::new(),
            drain_interval: Duration::from_millis(1),
            batch_size: 512,
            flush_timeout: DEFAULT_FLUSH_TIMEOUT,
            env_filter: None,
            resource_attributes: Vec::new(),
            #[cfg(feature = "otlp")]
            otlp: None,
            no_otlp: false,
            sampler: None,
            max_level: None,
            sole_layer: false,
            quiet: None,
        }
    }

    /// The node (machine) name, OTLP `host.name`.
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// The daemon (process role) name, OTLP `service.name`.
    pub fn daemon(mut self, daemon: impl Into<String>) -> Self {
        self.daemon = Some(daemon.into());
        self
    }

    /// Writes the local recording into `dir`.
    pub fn recording_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.recording_dir = Some(dir.into());
        self.recording = true;
        self
    }

    /// Writes no local recording (spans go only to the sinks added with [`sink`](Self::sink)).
    pub fn no_recording(mut self) -> Self {
        self.recording = false;
        self
    }

    /// Whether rings are kept in files beside the recording (default: yes, on Unix; else
    /// `RINGTRACE_RING_FILES`), `<dir>/.rings/<node>_<daemon>_<pid>/<n>.ring`, so that a process
    /// killed at any moment (`kill -9`, the OOM killer) leaves every record it published for
    /// readers and `ringtrace recover`. Each file is `4096 + 64 ×` [`ring_capacity`](Self::ring_capacity)
    /// bytes, reserved when its thread first records; a clean shutdown removes them. In memory,
    /// a killed process loses what the drain had not yet written (up to a few passes).
    pub fn ring_files(mut self, on: bool) -> Self {
        self.ring_files = Some(on);
        self
    }

    /// Records per thread ring; each record is 64 bytes.
    pub fn ring_capacity(mut self, records: usize) -> Self {
        self.ring_capacity = Some(records);
        self
    }

    /// How many events a span keeps (default [`MAX_EVENTS_PER_SPAN`](crate::MAX_EVENTS_PER_SPAN),
    /// OpenTelemetry's); later ones are counted on the span and in
    /// [`Stats::events_over_limit`](crate::Stats::events_over_limit), except a first `ERROR`
    /// event, which is kept so that the span's status says error.
    pub fn span_event_limit(mut self, events: usize) -> Self {
        self.span_event_limit = Some(events);
        self
    }

    /// How many spans may be open at once; more are dropped and counted.
    pub fn max_open_spans(mut self, spans: usize) -> Self {
        self.max_open_spans = spans;
        self
    }

    /// Records only targets starting with one of the included prefixes (when any is given).
    pub fn include_target(mut self, prefix: impl Into<String>) -> Self {
        self.include.push(prefix.into());
        self
    }

    /// Never records targets starting with `prefix`.
    pub fn exclude_target(mut self, prefix: impl Into<String>) -> Self {
        self.exclude.push(prefix.into());
        self
    }

    /// The clock to read; a `quanta::Clock::mock()` in tests.
    pub fn clock(mut self, clock: quanta::Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Adds a sink besides the recording.
    pub fn sink(mut self, sink: impl Sink) -> Self {
        self.sinks.push(Box::new(sink));
        self
    }

    /// How long the drain thread sleeps when every ring is empty.
    pub fn drain_interval(mut self, interval: Duration) -> Self {
        self.drain_interval = interval;
        self
    }

    /// The bound on the flush when the guard is dropped.
    pub fn flush_timeout(mut self, timeout: Duration) -> Self {
        self.flush_timeout = timeout;
        self
    }

    /// Prints nothing to stderr (`true`), or the usual messages (`false`, the default), whatever
    /// `RINGTRACE_QUIET` says. Losses are counted in [`Stats`] and the recording either way;
    /// the crate overview lists the messages.
    pub fn quiet(mut self, quiet: bool) -> Self {
        self.quiet = Some(quiet);
        self
    }

    /// Head sampling of new traces, instead of `OTEL_TRACES_SAMPLER`/`OTEL_TRACES_SAMPLER_ARG`
    /// (default `parentbased_always_on`). The decision is made once, at a trace's root, and
    /// inherited by its spans, in this process and, through the `traceparent` sampled flag, in
    /// every process the request reaches.
    pub fn sampler(mut self, sampler: crate::Sampler) -> Self {
        self.sampler = Some(sampler);
        self
    }

    /// The level filter [`init`](Self::init) installs (`EnvFilter` directives), instead of `RUST_LOG`.
    pub fn env_filter(mut self, directives: impl Into<String>) -> Self {
        self.env_filter = Some(directives.into());
        self
    }

    /// Adds an OTLP resource attribute (over `OTEL_RESOURCE_ATTRIBUTES`), e.g.
    /// `deployment.environment`. Resource attributes are process-wide: the last collector built
    /// in a process sets them for all.
    pub fn resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.resource_attributes.push((key.into(), value.into()));
        self
    }

    /// Exports to OTLP with these settings (unset ones come from the environment), whatever
    /// `OTEL_TRACES_EXPORTER` says.
    #[cfg(feature = "otlp")]
    pub fn otlp(mut self, config: crate::otlp::OtlpConfig) -> Self {
        self.otlp = Some(config);
        self
    }

    /// Exports to OTLP at `url` (see [`OtlpConfig::endpoint`](crate::otlp::OtlpConfig::endpoint)).
    #[cfg(feature = "otlp")]
    pub fn otlp_endpoint(mut self, url: impl Into<String>) -> Self {
        self.otlp = Some(self.otlp.take().unwrap_or_default().endpoint(url));
        self
    }

    /// Exports to OTLP over `protocol`.
    #[cfg(feature = "otlp")]
    pub fn otlp_protocol(mut self, protocol: crate::otlp::Protocol) -> Self {
        self.otlp = Some(self.otlp.take().unwrap_or_default().protocol(protocol));
        self
    }

    /// Never exports to OTLP, whatever the environment says.
    pub fn no_otlp(mut self) -> Self {
        self.no_otlp = true;
        self
    }

    /// The OTLP sink, when the code or the environment asks for one.
    #[cfg(feature = "otlp")]
    fn otlp_sink(&mut self, quiet: bool) -> Result<Option<crate::otlp::OtlpSink>, Error> {
        if self.no_otlp {
            return Ok(None);
        }
        let config = match self.otlp.take() {
            Some(c) => c,
            // The application exports through an exporter of its own (which reads the same
            // variables): one export is what it asked for.
            None if self.sinks.iter().any(|s| s.is_app_exporter()) => return Ok(None),
            None if crate::otlp::enabled_by_env(&|var| std::env::var(var).ok())? => Default::default(),
            None => return Ok(None),
        };
        // Unless the code or `OTEL_BSP_EXPORT_TIMEOUT` says otherwise, leave the guard's flush
        // time to finish after the wait for OTLP delivery gives up.
        let config = crate::otlp::OtlpConfig {
            default_flush_timeout: Some(crate::otlp::delivery_timeout(self.flush_timeout)),
            quiet: quiet || config.quiet,
            ..config
        };
        crate::otlp::OtlpSink::new(config).map(Some)
    }

    #[cfg(not(feature = "otlp"))]
    fn warn_without_otlp(&self, quiet: bool) {
        use std::sync::atomic::AtomicBool;
        static WARNED: AtomicBool = AtomicBool::new(false);
        let asked = ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
            .iter()
            .any(|v| std::env::var(v).is_ok_and(|v| !v.trim().is_empty()));
        if asked && !self.no_otlp && !WARNED.swap(true, Ordering::Relaxed) {
            message!(
                quiet,
                "ringtrace: OTEL_EXPORTER_OTLP_ENDPOINT is set but ringtrace was built without its `otlp` \
                 feature; spans go to the recording only"
            );
        }
    }

    /// The resource attributes (code over `OTEL_RESOURCE_ATTRIBUTES`).
    fn resolve_resource_attributes(&self) -> Result<Vec<(String, String)>, Error> {
        let var = crate::encode::RESOURCE_ATTRIBUTES_ENV;
        let mut attrs = match env_var(var)? {
            Some(v) => crate::encode::parse_resource_attributes(&v).map_err(|r| config_error(var, &v, &r))?,
            None => Vec::new(),
        };
        for (k, v) in &self.resource_attributes {
            attrs.retain(|(key, _)| key != k);
            attrs.push((k.clone(), v.clone()));
        }
        Ok(attrs)
    }

    /// Starts the drain thread and returns the layer to add to a subscriber, and its guard.
    pub fn build(self) -> Result<(RingLayer, Guard), Error> {
        let sole = self.sole_layer;
        let (shared, guard) = self.start()?;
        shared.owns_callsites.store(sole, Ordering::Relaxed);
        Ok((RingLayer::new(shared), guard))
    }

    /// Declares that the layer will be the only layer of its subscriber apart from level filters
    /// (`EnvFilter`, `Targets`, …): no `fmt` layer, no other exporter. Pausing then disables every
    /// callsite, as it does for the standalone subscriber, so that a paused collector costs what a
    /// disabled callsite does instead of the registry's work for every span. [`init`](Self::init)
    /// sets it when it installs the layer (for directives that need `EnvFilter`). Leave it unset
    /// when other layers share the registry: pausing would silence them too.
    pub fn sole_layer(mut self, sole: bool) -> Self {
        self.sole_layer = sole;
        self
    }

    /// Starts the drain thread and returns ringtrace's standalone subscriber (no registry, no
    /// other layer; see [`RingSubscriber`]) and its guard. Levels are filtered by
    /// [`max_level`](Self::max_level) (default `INFO`), targets by the include/exclude prefixes.
    pub fn build_subscriber(self) -> Result<(RingSubscriber, Guard), Error> {
        let levels = Levels::Max(self.max_level.unwrap_or(LevelFilter::INFO));
        self.build_subscriber_with(levels)
    }

    fn build_subscriber_with(self, levels: Levels) -> Result<(RingSubscriber, Guard), Error> {
        let (shared, guard) = self.start()?;
        shared.owns_callsites.store(true, Ordering::Relaxed);
        Ok((RingSubscriber::new(shared, levels), guard))
    }

    /// Builds the standalone subscriber and installs it as the global default.
    pub fn init_subscriber(self) -> Result<Guard, Error> {
        let (subscriber, guard) = self.build_subscriber()?;
        install(subscriber)?;
        Ok(guard)
    }

    /// The most verbose level the standalone subscriber records (default `INFO`) when built with
    /// [`build_subscriber`](Self::build_subscriber) or [`init_subscriber`](Self::init_subscriber);
    /// [`init`](Self::init) takes its levels from [`env_filter`](Self::env_filter) or `RUST_LOG`.
    pub fn max_level(mut self, level: LevelFilter) -> Self {
        self.max_level = Some(level);
        self
    }

    fn start(mut self) -> Result<(Arc<Shared>, Guard), Error> {
        let attrs = self.resolve_resource_attributes()?;
        let attr = |key: &str| attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let node = match &self.node {
            Some(n) => Some(n.clone()),
            None if env_var(ringtrace_core::identity::NODE_ENV)?.is_none() => attr("host.name"),
            None => None,
        };
        let daemon = match &self.daemon {
            Some(d) => Some(d.clone()),
            None if env_var(ringtrace_core::identity::DAEMON_ENV)?.is_none() => attr("service.name"),
            None => None,
        };
        let identity = Identity::resolve(node.as_deref(), daemon.as_deref())?;
        let quiet = match self.quiet {
            Some(q) => q,
            None => match env_var(QUIET_ENV)? {
                Some(v) => parse_quiet(&v)
                    .ok_or_else(|| config_error(QUIET_ENV, &v, "is not 1, 0, true or false"))?,
                None => false,
            },
        };
        #[cfg(feature = "otlp")]
        let otlp_sink = self.otlp_sink(quiet)?;
        #[cfg(not(feature = "otlp"))]
        self.warn_without_otlp(quiet);
        crate::encode::set_process_attributes(&attrs);
        let ring_capacity = match self.ring_capacity {
            Some(n) => n,
            None => env_count(RING_CAPACITY_ENV, 1, "is not a positive number of records")?
                .unwrap_or(DEFAULT_RING_CAPACITY),
        };
        if ring_capacity == 0 {
            return Err(config_error("ring_capacity", "0", "must be at least 1"));
        }
        let span_event_limit = match self.span_event_limit {
            Some(n) => n,
            None => env_count(SPAN_EVENT_LIMIT_ENV, 0, "is not a number of events")?
                .unwrap_or(crate::span_data::MAX_EVENTS_PER_SPAN),
        };
        let mut include = self.include;
        let mut exclude = self.exclude;
        if include.is_empty() {
            include = prefixes(INCLUDE_ENV)?;
        }
        if exclude.is_empty() {
            exclude = prefixes(EXCLUDE_ENV)?;
        }
        #[cfg_attr(not(feature = "otlp"), allow(unused_mut))]
        let mut sinks = std::mem::take(&mut self.sinks);
        // The guard waits for the drain's answer at shutdown, which comes after the wait for
        // OTLP delivery: never shorter than that wait plus a fifth of the flush timeout.
        #[cfg_attr(not(feature = "otlp"), allow(unused_mut))]
        let mut shutdown_timeout = self.flush_timeout;
        #[cfg(feature = "otlp")]
        if let Some(sink) = otlp_sink {
            shutdown_timeout = shutdown_timeout.max(sink.flush_timeout() + self.flush_timeout / 5);
            sinks.push(Box::new(sink));
        }
        let clock = match self.clock.take() {
            Some(q) => Clock::from_quanta(q),
            None => Clock::new(),
        };
        let ring_files = match self.ring_files {
            Some(on) => on,
            None => match env_var(RING_FILES_ENV)? {
                Some(v) => parse_quiet(&v)
                    .ok_or_else(|| config_error(RING_FILES_ENV, &v, "is not 1, 0, true or false"))?,
                None => true,
            },
        };
        let mut raw = None;
        #[cfg(all(unix, not(ringtrace_loom)))]
        let mut ring_dir = None;
        if self.recording {
            let dir = match self.recording_dir.take() {
                Some(d) => d,
                None => match env_var(DIR_ENV)? {
                    Some(v) if v.trim().is_empty() => {
                        return Err(config_error(DIR_ENV, &v, "must not be empty"))
                    }
                    Some(v) => PathBuf::from(v),
                    None => PathBuf::from(DEFAULT_DIR),
                },
            };
            let process = ringtrace_core::raw::ProcessInfo {
                node: identity.node.clone(),
                daemon: identity.daemon.clone(),
                pid: std::process::id(),
                span_event_limit: u32::try_from(span_event_limit).unwrap_or(u32::MAX),
                attributes: crate::encode::process_resource_attributes(),
            };
            let recording = RawRecording::create(&dir, &process, quiet).map_err(|source| {
                Error::Core(ringtrace_core::Error::Io {
                    context: format!("creating the recording in {}", dir.display()),
                    source,
                })
            })?;
            #[cfg(all(unix, not(ringtrace_loom)))]
            if ring_files {
                match crate::ringfile::RingDir::create(recording.path(), &process, clock.anchor()) {
                    Ok(d) => ring_dir = Some(Arc::new(d)),
                    Err(e) => crate::messages::message!(
                        quiet,
                        "ringtrace: the ring directory for {} could not be made ({e}): rings are kept in memory, and records not yet written are lost if the process is killed",
                        recording.path().display()
                    ),
                }
            }
            raw = Some(recording);
        }
        #[cfg(not(all(unix, not(ringtrace_loom))))]
        let _ = ring_files;
        let config = Config {
            identity,
            ring_capacity,
            span_event_limit,
            max_open_spans: self.max_open_spans,
            targets: TargetFilter { include, exclude },
            drain_interval: self.drain_interval,
            batch_size: self.batch_size,
            quiet,
            sampler: match self.sampler {
                Some(s) => s,
                None => crate::Sampler::from_env()?,
            },
        };
        #[cfg_attr(not(all(unix, not(ringtrace_loom))), allow(unused_mut))]
        let mut shared = Shared::new(config, clock);
        #[cfg(all(unix, not(ringtrace_loom)))]
        {
            shared.ring_dir = ring_dir;
        }
        let shared = Arc::new(shared);
        crate::panic::install_hook();
        // Taken before the sinks move to the drain thread: `Handle::flush` waits with them.
        let waiters: Arc<[FlushWaiter]> = sinks.iter().filter_map(|s| s.flush_waiter()).collect();
        let (tx, rx) = mpsc::channel();
        let thread = drain::spawn(shared.clone(), sinks, raw, rx).map_err(|source| {
            Error::Core(ringtrace_core::Error::Io { context: "starting the drain thread".into(), source })
        })?;
        crate::exit::register(shared.clone(), tx.clone(), shutdown_timeout);
        let guard = Guard {
            handle: Handle { shared: shared.clone(), commands: tx, waiters },
            thread: Some(thread),
            timeout: self.flush_timeout,
            shutdown_timeout,
        };
        Ok((shared, guard))
    }

    /// Builds and installs the global subscriber, with the level filter from
    /// [`env_filter`](Self::env_filter), else `RUST_LOG`, else `info` (`EnvFilter` syntax).
    ///
    /// Directives that only name targets and levels (`info`, `my_crate=debug,hyper=warn`) are
    /// decided once per callsite, so nothing else needs `tracing-subscriber`'s registry: `init`
    /// installs the standalone [`RingSubscriber`], which applies them with `tracing-subscriber`'s
    /// [`Targets`] filter and costs a span about 50 ns less than the registry and the layer
    /// (`benches/README.md`). Directives with a span or field part (`[...]`) need `EnvFilter`,
    /// which follows spans through the registry: `init` then installs the registry, the filter
    /// and the ring layer, as a sole layer ([`sole_layer`](Self::sole_layer)). Either way the
    /// spans, their identity, propagation ([`SpanExt`](crate::SpanExt)), sampling and sinks are
    /// the same, with one difference under overload: the handle of a span dropped because the
    /// open-span table was full (counted in `Stats`) gives no context of its own under the
    /// standalone subscriber, where the layer finds the recorded span above it in the registry
    /// ([`current_context`](crate::current_context) inside it gives that span's under both; a
    /// span dropped for want of ring room gives it under both). To add other layers (`fmt`, …),
    /// [`build`](Self::build) the layer instead.
    pub fn init(self) -> Result<Guard, Error> {
        let filter = match &self.env_filter {
            Some(d) => InitFilter::parse("env_filter", d)?,
            None => match env_var("RUST_LOG")? {
                Some(v) => InitFilter::parse("RUST_LOG", &v)?,
                None => InitFilter::Targets(Targets::new().with_default(tracing_core::Level::INFO)),
            },
        };
        match filter {
            InitFilter::Targets(targets) => {
                let (subscriber, guard) = self.build_subscriber_with(Levels::Targets(targets))?;
                install(subscriber)?;
                Ok(guard)
            }
            InitFilter::Env(env) => {
                let (layer, guard) = self.sole_layer(true).build()?;
                install(tracing_subscriber::registry().with(*env).with(layer))?;
                Ok(guard)
            }
        }
    }
}

/// Installs `subscriber` as the global default (and, when `tracing-subscriber`'s `tracing-log`
/// feature is on in the build, `log` records as `tracing` events, as its `try_init` does).
///
/// `try_init` installs the subscriber first and the `log` bridge second: when the application
/// has set a `log` logger of its own, only the bridge fails, and the subscriber, installed, must
/// keep its guard (an error here would drop it and stop the drain under an installed subscriber).
fn install(subscriber: impl tracing::Subscriber + Send + Sync + 'static) -> Result<(), Error> {
    let was_set = tracing::dispatcher::has_been_set();
    match subscriber.try_init() {
        Ok(()) => Ok(()),
        Err(_) if !was_set && tracing::dispatcher::has_been_set() => Ok(()),
        Err(e) => Err(Error::AlreadyInstalled(e.to_string())),
    }
}

/// The level filter [`Builder::init`] installs.
#[derive(Debug)]
enum InitFilter {
    /// Targets and levels only: decided per callsite, no per-span work.
    Targets(Targets),
    /// Span- or field-scoped directives, which need `EnvFilter`'s per-span tracking.
    Env(Box<EnvFilter>),
}

impl InitFilter {
    /// Parses `directives` (`EnvFilter` syntax; an error names `source` and the value).
    fn parse(source: &'static str, directives: &str) -> Result<Self, Error> {
        // `EnvFilter` is the reference grammar: what it rejects is an error, whichever filter runs.
        let env =
            EnvFilter::try_new(directives).map_err(|e| config_error(source, directives, &e.to_string()))?;
        let scoped = directives.contains(['[', '{']);
        match directives.parse::<Targets>() {
            Ok(targets) if !scoped && !directives.trim().is_empty() => Ok(Self::Targets(targets)),
            _ => Ok(Self::Env(Box::new(env))),
        }
    }
}

/// Starts ringtrace with every setting from the environment or its default, and installs it as
/// the global subscriber. See [`Builder`] for the settings.
pub fn init() -> Result<Guard, Error> {
    Builder::new().init()
}

/// Why waiting `timeout` for the drain thread's answer failed.
fn wait_error(e: mpsc::RecvTimeoutError, timeout: Duration) -> Error {
    match e {
        mpsc::RecvTimeoutError::Timeout => Error::Timeout(timeout),
        mpsc::RecvTimeoutError::Disconnected => Error::Stopped,
    }
}

/// Controls a running collector: pause and resume recording, flush.
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
    commands: Sender<Command>,
    /// Wait for the sinks that deliver over a network, on the flushing thread.
    waiters: Arc<[FlushWaiter]>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").field("paused", &self.is_paused()).finish()
    }
}

impl Handle {
    /// Stops recording new spans and events (spans already open still record their close).
    /// Under the standalone subscriber, and under the layer as [`init`] installs it (or built
    /// with [`Builder::sole_layer`]), the callsites are disabled (`tracing` rebuilds its interest
    /// cache, a pass over every callsite), so spans and events cost what a disabled callsite
    /// does. A layer sharing the registry with other layers leaves them enabled, so as not to
    /// silence the others: the registry still does its work and each ringtrace callback costs
    /// one relaxed atomic load.
    pub fn pause(&self) {
        self.shared.set_paused(true);
    }

    /// Resumes recording (no effect after shutdown).
    pub fn resume(&self) {
        if !self.shared.stopped.load(Ordering::Relaxed) {
            self.shared.set_paused(false);
        }
    }

    /// Whether recording is paused.
    pub fn is_paused(&self) -> bool {
        self.shared.is_paused()
    }

    /// Hands every span closed so far to the sinks and flushes them, then waits, on this thread
    /// and within what is left of `timeout`, for sinks that deliver over a network (OTLP) to
    /// deliver; the drain thread goes on emptying the rings meanwhile. Returns the totals as the
    /// drain saw them. A delivery that does not complete in time is said on stderr (why: the
    /// collector unreachable, slow or rejecting) and is not an error; its spans are counted
    /// when their fate is known.
    pub fn flush(&self, timeout: Duration) -> Result<Stats, Error> {
        let started = Instant::now();
        let (tx, rx) = mpsc::channel();
        self.commands.send(Command::Flush(tx)).map_err(|_| Error::Stopped)?;
        self.shared.waker.wake_now();
        let stats = rx.recv_timeout(timeout).map_err(|e| wait_error(e, timeout))?;
        for waiter in self.waiters.iter() {
            if let Err(e) = waiter(timeout.saturating_sub(started.elapsed())) {
                message!(self.shared.config.quiet, "ringtrace: flush: {e}");
            }
        }
        Ok(stats)
    }
}

/// Keeps the collector running; dropping it flushes every recorded span to every sink (within
/// the flush timeout, default 5 s) and stops the drain thread.
#[must_use = "dropping the guard stops recording and flushes; keep it alive for the program's lifetime"]
pub struct Guard {
    handle: Handle,
    thread: Option<std::thread::JoinHandle<()>>,
    timeout: Duration,
    /// The wait for the drain at shutdown: at least `timeout`, longer when an OTLP sink may wait
    /// longer for delivery.
    shutdown_timeout: Duration,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard").field("timeout", &self.timeout).finish()
    }
}

impl Guard {
    /// A handle to pause, resume and flush.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Flushes and returns the totals so far (see [`Handle::flush`]).
    pub fn flush(&self) -> Result<Stats, Error> {
        self.handle.flush(self.timeout)
    }

    /// Stops recording, flushes everything, exports spans still open as unclosed, writes the final
    /// counters and stops the drain thread; returns the final totals.
    pub fn shutdown(mut self) -> Result<Stats, Error> {
        self.stop()
    }

    fn stop(&mut self) -> Result<Stats, Error> {
        let Some(thread) = self.thread.take() else { return Err(Error::Stopped) };
        let shared = &self.handle.shared;
        shared.stopped.store(true, Ordering::Relaxed);
        shared.set_paused(true);
        let (tx, rx) = mpsc::channel();
        if self.handle.commands.send(Command::Shutdown(tx)).is_err() {
            return Err(Error::Stopped);
        }
        shared.waker.wake_now();
        // Unregistered only now: an exit while this waits still waits for the drain too.
        let result = match rx.recv_timeout(self.shutdown_timeout) {
            Ok(stats) => {
                let _ = thread.join();
                Ok(stats)
            }
            Err(e) => Err(wait_error(e, self.shutdown_timeout)),
        };
        crate::exit::unregister(shared.id);
        result
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.thread.is_some() {
            if let Err(e) = self.stop() {
                message!(
                    self.handle.shared.config.quiet,
                    "ringtrace: shutdown flush incomplete: {e}; spans not yet written are lost"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};

    use tracing::Level;
    use tracing_subscriber::layer::Context;
    use tracing_subscriber::prelude::*;

    use super::{EnvFilter, InitFilter};

    /// Records the (target, level) of every event that reaches it.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<BTreeSet<(String, Level)>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Seen {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            let m = event.metadata();
            self.0.lock().unwrap().insert((m.target().to_owned(), *m.level()));
        }
    }

    macro_rules! at_every_level {
        ($($target:literal),*) => {$(
            tracing::trace!(target: $target, "x");
            tracing::debug!(target: $target, "x");
            tracing::info!(target: $target, "x");
            tracing::warn!(target: $target, "x");
            tracing::error!(target: $target, "x");
        )*};
    }

    fn events_passed(
        subscriber: impl tracing::Subscriber + Send + Sync + 'static,
        seen: &Seen,
    ) -> BTreeSet<(String, Level)> {
        tracing::subscriber::with_default(subscriber, || {
            at_every_level!("app", "app::db", "app_other", "hyper::proto", "other");
        });
        std::mem::take(&mut *seen.0.lock().unwrap())
    }

    #[test]
    fn target_only_directives_filter_exactly_as_env_filter_does() {
        for directives in [
            "info",
            "warn,app=trace",
            "app::db=debug,app=warn",
            "app",
            "hyper=off,debug",
            "app=info,app::db=off",
            "ERROR",
            "off",
            "app=debug",
        ] {
            let InitFilter::Targets(targets) = InitFilter::parse("RUST_LOG", directives).unwrap() else {
                panic!("{directives:?} names only targets and levels");
            };
            let (seen_targets, seen_env) = (Seen::default(), Seen::default());
            let by_targets = events_passed(
                tracing_subscriber::registry().with(targets).with(seen_targets.clone()),
                &seen_targets,
            );
            let env = EnvFilter::try_new(directives).unwrap();
            let by_env =
                events_passed(tracing_subscriber::registry().with(env).with(seen_env.clone()), &seen_env);
            assert_eq!(by_targets, by_env, "{directives:?}");
        }
    }

    /// Passes everything to the subscriber it wraps, noting the events that reach it.
    struct Noting<S>(S, Seen);

    impl<S: tracing::Subscriber> tracing::Subscriber for Noting<S> {
        fn register_callsite(&self, meta: &'static tracing::Metadata<'static>) -> tracing_core::Interest {
            self.0.register_callsite(meta)
        }
        fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
            self.0.enabled(meta)
        }
        fn max_level_hint(&self) -> Option<tracing_core::LevelFilter> {
            self.0.max_level_hint()
        }
        fn new_span(&self, attrs: &tracing::span::Attributes<'_>) -> tracing::Id {
            self.0.new_span(attrs)
        }
        fn record(&self, span: &tracing::Id, values: &tracing::span::Record<'_>) {
            self.0.record(span, values)
        }
        fn record_follows_from(&self, span: &tracing::Id, follows: &tracing::Id) {
            self.0.record_follows_from(span, follows)
        }
        fn event(&self, event: &tracing::Event<'_>) {
            let m = event.metadata();
            (self.1).0.lock().unwrap().insert((m.target().to_owned(), *m.level()));
            self.0.event(event)
        }
        fn enter(&self, span: &tracing::Id) {
            self.0.enter(span)
        }
        fn exit(&self, span: &tracing::Id) {
            self.0.exit(span)
        }
    }

    #[test]
    fn the_standalone_subscriber_filters_target_directives_exactly_as_env_filter_does() {
        // What `init` installs for such directives: the standalone subscriber, its levels the
        // `Targets` parsed from them.
        for directives in
            ["info", "warn,app=trace", "app::db=debug,app=warn", "hyper=off,debug", "off", "app=debug"]
        {
            let InitFilter::Targets(targets) = InitFilter::parse("RUST_LOG", directives).unwrap() else {
                panic!("{directives:?} names only targets and levels");
            };
            let (subscriber, guard) = super::Builder::new()
                .no_recording()
                .quiet(true)
                .build_subscriber_with(super::Levels::Targets(targets))
                .unwrap();
            let env = EnvFilter::try_new(directives).unwrap();
            // `tracing` skips every callsite above the most verbose level any subscriber hints.
            assert_eq!(
                tracing::Subscriber::max_level_hint(&subscriber),
                tracing_subscriber::Layer::<tracing_subscriber::Registry>::max_level_hint(&env),
                "{directives:?}"
            );
            let (seen_standalone, seen_env) = (Seen::default(), Seen::default());
            let by_standalone = events_passed(Noting(subscriber, seen_standalone.clone()), &seen_standalone);
            drop(guard);
            let by_env =
                events_passed(tracing_subscriber::registry().with(env).with(seen_env.clone()), &seen_env);
            assert_eq!(by_standalone, by_env, "{directives:?}");
        }
    }

    #[test]
    fn span_and_field_directives_keep_env_filter_and_bad_ones_are_named() {
        for directives in ["app[request]=debug", "app[{user}]=trace,info", ""] {
            assert!(
                matches!(InitFilter::parse("RUST_LOG", directives), Ok(InitFilter::Env(_))),
                "{directives:?}"
            );
        }
        let e = InitFilter::parse("RUST_LOG", "app=loud").unwrap_err().to_string();
        assert!(e.contains("RUST_LOG") && e.contains("app=loud"), "{e}");
    }
}
