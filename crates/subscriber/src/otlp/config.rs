//! [`OtlpConfig`]: settings from code, resolved against the standard environment variables.

use std::path::PathBuf;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri};

use crate::builder::Error;

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: base URL for every signal (`/v1/traces` is appended for HTTP).
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the traces URL, used as it is.
pub const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_PROTOCOL`: `grpc` or `http/protobuf`.
pub const PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`.
pub const TRACES_PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_HEADERS`: `key=value,...`, percent-encoded.
pub const HEADERS_ENV: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// `OTEL_EXPORTER_OTLP_TRACES_HEADERS`.
pub const TRACES_HEADERS_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
/// `OTEL_EXPORTER_OTLP_TIMEOUT`: milliseconds per export attempt.
pub const TIMEOUT_ENV: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`.
pub const TRACES_TIMEOUT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
/// `OTEL_EXPORTER_OTLP_COMPRESSION`: `gzip` or `none`.
pub const COMPRESSION_ENV: &str = "OTEL_EXPORTER_OTLP_COMPRESSION";
/// `OTEL_EXPORTER_OTLP_TRACES_COMPRESSION`.
pub const TRACES_COMPRESSION_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION";
/// `OTEL_EXPORTER_OTLP_CERTIFICATE`: PEM file of the CA that signed the collector's certificate.
pub const CERTIFICATE_ENV: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
/// `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE`.
pub const TRACES_CERTIFICATE_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE";
/// `OTEL_TRACES_EXPORTER`: `otlp` turns export on (to the default endpoint if none is set),
/// `none` turns it off.
pub const TRACES_EXPORTER_ENV: &str = "OTEL_TRACES_EXPORTER";
/// `OTEL_BSP_MAX_QUEUE_SIZE`: spans held for export, including the batch being sent.
pub const MAX_QUEUE_SIZE_ENV: &str = "OTEL_BSP_MAX_QUEUE_SIZE";
/// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`: spans per export request.
pub const MAX_EXPORT_BATCH_SIZE_ENV: &str = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE";
/// `OTEL_BSP_SCHEDULE_DELAY`: milliseconds a partial batch waits for more spans.
pub const SCHEDULE_DELAY_ENV: &str = "OTEL_BSP_SCHEDULE_DELAY";
/// `OTEL_BSP_EXPORT_TIMEOUT`: milliseconds one batch may take to export, retries included, and
/// the bound on the wait for delivery at shutdown.
pub const EXPORT_TIMEOUT_ENV: &str = "OTEL_BSP_EXPORT_TIMEOUT";
/// `RINGTRACE_OTLP_QUEUE_BYTES`: encoded bytes held for export, including the batch being sent.
pub const QUEUE_BYTES_ENV: &str = "RINGTRACE_OTLP_QUEUE_BYTES";

/// Default per-attempt timeout (the OpenTelemetry default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on queued spans.
pub const DEFAULT_MAX_QUEUE_SPANS: usize = 8192;
/// Default bound on queued encoded bytes.
pub const DEFAULT_MAX_QUEUE_BYTES: usize = 16 << 20;
/// Default spans per request (the OpenTelemetry default).
pub const DEFAULT_MAX_EXPORT_BATCH_SPANS: usize = 512;
/// Default wait for a partial batch to fill.
pub const DEFAULT_SCHEDULE_DELAY: Duration = Duration::from_millis(1000);
/// How long a flush waits for OTLP delivery, given the guard's flush bound: four fifths of it.
/// The guard's flush waits for delivery and then for the drain's answer, so delivery must give
/// up first and leave the drain and the recording the last fifth; otherwise the guard would
/// time out without the exporter's losses counted. Without a [`Builder`](crate::Builder):
/// four fifths of [`DEFAULT_FLUSH_TIMEOUT`](crate::DEFAULT_FLUSH_TIMEOUT), 4 s.
pub(crate) fn delivery_timeout(flush_timeout: Duration) -> Duration {
    flush_timeout.mul_f64(0.8)
}
/// Largest request body: below the 4 MiB that gRPC servers (collectors included) accept by default.
pub(crate) const MAX_REQUEST_BYTES: usize = 3 << 20;

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// OTLP/gRPC: unary `TraceService/Export` over HTTP/2 (port 4317 by convention).
    Grpc,
    /// OTLP/HTTP with binary protobuf bodies: `POST /v1/traces` (port 4318 by convention).
    HttpProtobuf,
}

impl Protocol {
    /// The name used by `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }

    fn parse(s: &str) -> Result<Self, &'static str> {
        match s.trim().to_ascii_lowercase().as_str() {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "http/json" => Err("is not supported (use grpc or http/protobuf)"),
            _ => Err("is not an OTLP protocol (grpc or http/protobuf)"),
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Request body compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Uncompressed.
    None,
    /// gzip (`Content-Encoding: gzip` for HTTP, `grpc-encoding: gzip` for gRPC).
    Gzip,
}

impl Compression {
    fn parse(s: &str) -> Result<Self, &'static str> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gzip" => Ok(Compression::Gzip),
            "none" => Ok(Compression::None),
            _ => Err("is not a supported compression (gzip or none)"),
        }
    }
}

/// How failed exports are retried.
///
/// A retryable failure (connection refused or reset, timeout, HTTP 429/502/503/504, gRPC
/// `UNAVAILABLE`, `RESOURCE_EXHAUSTED`, `DEADLINE_EXCEEDED`, `ABORTED`, ...) is retried after a
/// backoff that doubles from `initial_backoff` up to `max_backoff`, each wait drawn at random
/// between half and all of it (jitter); a server's `Retry-After` is honoured up to `max_backoff`.
/// A batch is dropped, and its spans counted as failed, when it has been retried for
/// `max_elapsed` or the failure is not retryable. Meanwhile the queue fills, and spans beyond its
/// bound are dropped and counted; export resumes by itself when the collector answers again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// First wait.
    pub initial_backoff: Duration,
    /// Longest wait.
    pub max_backoff: Duration,
    /// How long one batch is retried before it is given up.
    pub max_elapsed: Duration,
}

impl Default for RetryPolicy {
    /// 200 ms doubling to 5 s, for up to 60 s per batch.
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            max_elapsed: Duration::from_secs(60),
        }
    }
}

/// OTLP exporter settings set in code; each one left unset comes from the environment, then
/// from its default.
///
/// Precedence: **code > signal-specific variable (`..._TRACES_...`) > generic variable >
/// default**. Headers merge key by key in the same order. An empty variable counts as unset. A
/// malformed value is an error naming the variable (or the builder setting) and the value.
///
/// | setting | code | environment (signal, then generic) | default |
/// |---|---|---|---|
/// | endpoint | [`endpoint`](Self::endpoint) | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as is), `OTEL_EXPORTER_OTLP_ENDPOINT` (HTTP: `/v1/traces` appended) | `http://localhost:4318` (HTTP), `http://localhost:4317` (gRPC) |
/// | protocol | [`protocol`](Self::protocol) | `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL` | `grpc` if the endpoint's port is 4317, else `http/protobuf` |
/// | headers | [`header`](Self::header) | `OTEL_EXPORTER_OTLP_TRACES_HEADERS`, `OTEL_EXPORTER_OTLP_HEADERS` | none |
/// | timeout per attempt | [`timeout`](Self::timeout) | `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, `OTEL_EXPORTER_OTLP_TIMEOUT` (ms) | 10 s |
/// | compression | [`compression`](Self::compression) | `OTEL_EXPORTER_OTLP_TRACES_COMPRESSION`, `OTEL_EXPORTER_OTLP_COMPRESSION` (`gzip`, `none`) | none |
/// | CA certificate (`https://`) | [`certificate`](Self::certificate) | `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE`, `OTEL_EXPORTER_OTLP_CERTIFICATE` (PEM path) | system roots |
/// | queue bound, spans | [`max_queue_spans`](Self::max_queue_spans) | `OTEL_BSP_MAX_QUEUE_SIZE` | 8192 |
/// | queue bound, bytes | [`max_queue_bytes`](Self::max_queue_bytes) | `RINGTRACE_OTLP_QUEUE_BYTES` | 16 MiB |
/// | spans per request | [`max_export_batch_spans`](Self::max_export_batch_spans) | `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` | 512 (at most the queue bound) |
/// | wait for a partial batch | [`schedule_delay`](Self::schedule_delay) | `OTEL_BSP_SCHEDULE_DELAY` (ms) | 1 s |
/// | retry | [`retry`](Self::retry) | `OTEL_BSP_EXPORT_TIMEOUT` (ms) sets how long a batch is retried (`max_elapsed`) | [`RetryPolicy::default`] |
/// | flush bound at shutdown | [`flush_timeout`](Self::flush_timeout) | `OTEL_BSP_EXPORT_TIMEOUT` (ms) | 4 s (with [`Builder`](crate::Builder): 80% of its flush timeout) |
///
/// The OpenTelemetry batch variables that apply: `OTEL_BSP_SCHEDULE_DELAY`,
/// `OTEL_BSP_EXPORT_TIMEOUT`, `OTEL_BSP_MAX_QUEUE_SIZE` and `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`.
///
/// The endpoint must be an `http://` or `https://` URL with a host; anything else (`notaurl`,
/// `localhost:4317`) is an error when the collector is built, naming the variable (or
/// `otlp_endpoint`) and the value. Whether export is on at all is decided by
/// [`Builder`](crate::Builder): see the crate docs.
#[derive(Debug, Clone, Default)]
pub struct OtlpConfig {
    pub(crate) endpoint: Option<String>,
    pub(crate) protocol: Option<Protocol>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) compression: Option<Compression>,
    pub(crate) certificate: Option<PathBuf>,
    pub(crate) max_queue_spans: Option<usize>,
    pub(crate) max_queue_bytes: Option<usize>,
    pub(crate) max_export_batch_spans: Option<usize>,
    pub(crate) schedule_delay: Option<Duration>,
    pub(crate) retry: Option<RetryPolicy>,
    pub(crate) flush_timeout: Option<Duration>,
    /// The flush bound when neither the code nor `OTEL_BSP_EXPORT_TIMEOUT` sets one
    /// ([`Builder`](crate::Builder) derives it from its own flush timeout).
    pub(crate) default_flush_timeout: Option<Duration>,
    /// Print nothing to stderr ([`Builder::quiet`](crate::Builder::quiet)).
    pub(crate) quiet: bool,
}

impl OtlpConfig {
    /// Every setting from the environment or its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Prints nothing to stderr (`true`): not the exporter's failures and recoveries, nor its
    /// totals at shutdown. Lost spans are counted either way. [`Builder::quiet`](crate::Builder::quiet)
    /// (or `RINGTRACE_QUIET`) also silences the exporter the builder makes; an
    /// [`OtlpSink`](crate::otlp::OtlpSink) built by hand takes it from here only.
    pub fn quiet(mut self, quiet: bool) -> Self {
        self.quiet = quiet;
        self
    }

    /// The collector's URL, e.g. `http://localhost:4317`. For HTTP, `/v1/traces` is appended
    /// unless the path already ends with it.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// gRPC or HTTP/protobuf.
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = Some(protocol);
        self
    }

    /// Adds a header (gRPC metadata) to every request, e.g. an authorization token.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The bound on one export attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Request body compression.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = Some(compression);
        self
    }

    /// A PEM file of the CA that signed the collector's certificate, trusted besides the
    /// system roots (`https://` endpoints; feature `otlp-tls`).
    pub fn certificate(mut self, pem_path: impl Into<PathBuf>) -> Self {
        self.certificate = Some(pem_path.into());
        self
    }

    /// The most spans held for export (queued plus the batch being sent); more are dropped and
    /// counted.
    pub fn max_queue_spans(mut self, spans: usize) -> Self {
        self.max_queue_spans = Some(spans);
        self
    }

    /// The most encoded bytes held for export (queued plus the batch being sent); spans beyond
    /// are dropped and counted.
    pub fn max_queue_bytes(mut self, bytes: usize) -> Self {
        self.max_queue_bytes = Some(bytes);
        self
    }

    /// The most spans in one export request.
    pub fn max_export_batch_spans(mut self, spans: usize) -> Self {
        self.max_export_batch_spans = Some(spans);
        self
    }

    /// How long a partial batch waits for more spans before it is sent (a full batch, a flush
    /// or shutdown sends at once).
    pub fn schedule_delay(mut self, delay: Duration) -> Self {
        self.schedule_delay = Some(delay);
        self
    }

    /// Retry and backoff.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// How long the wait for delivery at shutdown lasts at most (a
    /// [`Handle::flush`](crate::Handle::flush) waits as long as its caller says).
    pub fn flush_timeout(mut self, timeout: Duration) -> Self {
        self.flush_timeout = Some(timeout);
        self
    }

    /// Resolves every setting against the process environment.
    pub(crate) fn resolve(&self) -> Result<Settings, Error> {
        self.resolve_with(&|var| std::env::var(var).ok())
    }

    pub(crate) fn resolve_with(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Settings, Error> {
        let env = |var: &'static str| -> Option<(String, &'static str)> {
            lookup(var).filter(|v| !v.trim().is_empty()).map(|v| (v, var))
        };
        // Endpoint and protocol decide each other's defaults.
        let endpoint_setting: Option<(String, Origin)> = match &self.endpoint {
            Some(e) => Some((e.clone(), Origin::Code("otlp_endpoint"))),
            None => env(TRACES_ENDPOINT_ENV)
                .map(|(v, var)| (v, Origin::Signal(var)))
                .or_else(|| env(ENDPOINT_ENV).map(|(v, var)| (v, Origin::Generic(var)))),
        };
        let protocol = match self.protocol {
            Some(p) => Some(p),
            None => match env(TRACES_PROTOCOL_ENV).or_else(|| env(PROTOCOL_ENV)) {
                Some((v, var)) => Some(Protocol::parse(&v).map_err(|r| config_error(var, &v, r))?),
                None => None,
            },
        };
        let (endpoint_text, origin) = match endpoint_setting {
            Some(e) => e,
            None => match protocol {
                Some(Protocol::Grpc) => ("http://localhost:4317".to_owned(), Origin::Default),
                _ => ("http://localhost:4318".to_owned(), Origin::Default),
            },
        };
        let uri =
            parse_endpoint(&endpoint_text).map_err(|r| config_error(origin.name(), &endpoint_text, &r))?;
        let protocol = protocol.unwrap_or(if uri.port_u16() == Some(4317) {
            Protocol::Grpc
        } else {
            Protocol::HttpProtobuf
        });
        let tls = uri.scheme_str() == Some("https");
        if tls && !cfg!(feature = "otlp-tls") {
            return Err(config_error(
                origin.name(),
                &endpoint_text,
                "is https://, which needs ringtrace-subscriber's `otlp-tls` feature",
            ));
        }
        let endpoint = match protocol {
            Protocol::Grpc => origin_only(&uri),
            Protocol::HttpProtobuf if matches!(origin, Origin::Signal(_)) => Ok(uri),
            Protocol::HttpProtobuf => with_traces_path(&uri),
        }
        .map_err(|r| config_error(origin.name(), &endpoint_text, &r))?;

        let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
        for var in [HEADERS_ENV, TRACES_HEADERS_ENV] {
            if let Some((v, var)) = env(var) {
                for (k, val) in parse_headers(&v).map_err(|r| config_error(var, &v, &r))? {
                    merge_header(&mut headers, k, val);
                }
            }
        }
        for (k, v) in &self.headers {
            let (name, value) =
                header(k, v).map_err(|r| config_error("otlp_header", &format!("{k}: {v}"), &r))?;
            merge_header(&mut headers, name, value);
        }

        let timeout = match self.timeout {
            Some(t) if t.is_zero() => return Err(config_error("otlp_timeout", "0", "must be positive")),
            Some(t) => t,
            None => match env(TRACES_TIMEOUT_ENV).or_else(|| env(TIMEOUT_ENV)) {
                Some((v, var)) => {
                    Duration::from_millis(positive(&v).map_err(|r| config_error(var, &v, r))? as u64)
                }
                None => DEFAULT_TIMEOUT,
            },
        };
        let compression = match self.compression {
            Some(c) => c,
            None => match env(TRACES_COMPRESSION_ENV).or_else(|| env(COMPRESSION_ENV)) {
                Some((v, var)) => Compression::parse(&v).map_err(|r| config_error(var, &v, r))?,
                None => Compression::None,
            },
        };
        let certificate = match &self.certificate {
            Some(p) => Some((p.clone(), "otlp_certificate")),
            None => env(TRACES_CERTIFICATE_ENV)
                .or_else(|| env(CERTIFICATE_ENV))
                .map(|(v, var)| (PathBuf::from(v.trim()), var)),
        };
        let ca_pem = match certificate {
            Some((path, var)) => {
                let pem = std::fs::read(&path).map_err(|e| {
                    config_error(var, &path.display().to_string(), &format!("cannot be read: {e}"))
                })?;
                if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
                    return Err(config_error(var, &path.display().to_string(), "holds no PEM certificate"));
                }
                Some(pem)
            }
            None => None,
        };

        let max_queue_spans = match self.max_queue_spans {
            Some(0) => return Err(config_error("otlp_max_queue_spans", "0", "must be positive")),
            Some(n) => n,
            None => env_count(env(MAX_QUEUE_SIZE_ENV))?.unwrap_or(DEFAULT_MAX_QUEUE_SPANS),
        };
        let max_queue_bytes = match self.max_queue_bytes {
            Some(0) => return Err(config_error("otlp_max_queue_bytes", "0", "must be positive")),
            Some(n) => n,
            None => env_count(env(QUEUE_BYTES_ENV))?.unwrap_or(DEFAULT_MAX_QUEUE_BYTES),
        };
        let max_export_batch_spans = match self.max_export_batch_spans {
            Some(0) => return Err(config_error("otlp_max_export_batch_spans", "0", "must be positive")),
            Some(n) => n,
            None => env_count(env(MAX_EXPORT_BATCH_SIZE_ENV))?.unwrap_or(DEFAULT_MAX_EXPORT_BATCH_SPANS),
        }
        .min(max_queue_spans);
        let schedule_delay = match self.schedule_delay {
            Some(d) => d,
            None => match env(SCHEDULE_DELAY_ENV) {
                Some((v, var)) => Duration::from_millis(
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| config_error(var, &v, "is not a number of milliseconds"))?,
                ),
                None => DEFAULT_SCHEDULE_DELAY,
            },
        };
        let export_timeout = match env(EXPORT_TIMEOUT_ENV) {
            Some((v, var)) => Some(Duration::from_millis(
                positive(&v).map_err(|_| config_error(var, &v, "is not a positive number of milliseconds"))?
                    as u64,
            )),
            None => None,
        };
        let retry = match self.retry {
            Some(r) => r,
            None => match export_timeout {
                Some(t) => RetryPolicy { max_elapsed: t, ..RetryPolicy::default() },
                None => RetryPolicy::default(),
            },
        };
        let flush_timeout = match self.flush_timeout {
            Some(t) => t,
            None => export_timeout
                .or(self.default_flush_timeout)
                .unwrap_or_else(|| delivery_timeout(crate::DEFAULT_FLUSH_TIMEOUT)),
        };
        if retry.initial_backoff.is_zero() || retry.max_backoff < retry.initial_backoff {
            return Err(config_error(
                "otlp_retry",
                &format!("{retry:?}"),
                "needs 0 < initial_backoff <= max_backoff",
            ));
        }
        Ok(Settings {
            endpoint_text: endpoint.to_string(),
            endpoint,
            protocol,
            tls,
            headers,
            timeout,
            compression,
            ca_pem,
            max_queue_spans,
            max_queue_bytes,
            max_export_batch_spans,
            schedule_delay,
            retry,
            flush_timeout,
            quiet: self.quiet,
        })
    }
}

/// Whether the environment turns OTLP export on: `OTEL_TRACES_EXPORTER` says `otlp` or `none`;
/// unset, an endpoint variable being set turns it on.
pub(crate) fn enabled_by_env(lookup: &dyn Fn(&str) -> Option<String>) -> Result<bool, Error> {
    if let Some(v) = lookup(TRACES_EXPORTER_ENV).filter(|v| !v.trim().is_empty()) {
        let mut on = false;
        for name in v.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name.to_ascii_lowercase().as_str() {
                "otlp" => on = true,
                "none" => return Ok(false),
                _ => {
                    return Err(config_error(
                        TRACES_EXPORTER_ENV,
                        &v,
                        "names an exporter other than otlp or none",
                    ))
                }
            }
        }
        return Ok(on);
    }
    Ok([TRACES_ENDPOINT_ENV, ENDPOINT_ENV]
        .iter()
        .any(|var| lookup(var).is_some_and(|v| !v.trim().is_empty())))
}

/// Where a setting came from, for error messages and endpoint path rules.
#[derive(Debug, Clone, Copy)]
enum Origin {
    Code(&'static str),
    Signal(&'static str),
    Generic(&'static str),
    Default,
}

impl Origin {
    fn name(self) -> &'static str {
        match self {
            Origin::Code(n) | Origin::Signal(n) | Origin::Generic(n) => n,
            Origin::Default => "default endpoint",
        }
    }
}

/// Every setting resolved.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// gRPC: scheme and authority; HTTP: the full URL posted to.
    pub endpoint: Uri,
    pub endpoint_text: String,
    pub protocol: Protocol,
    pub tls: bool,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub timeout: Duration,
    pub compression: Compression,
    #[cfg_attr(not(feature = "otlp-tls"), allow(dead_code))]
    pub ca_pem: Option<Vec<u8>>,
    pub max_queue_spans: usize,
    pub max_queue_bytes: usize,
    pub max_export_batch_spans: usize,
    pub schedule_delay: Duration,
    pub retry: RetryPolicy,
    pub flush_timeout: Duration,
    /// Print nothing to stderr.
    pub quiet: bool,
}

fn config_error(var: &'static str, value: &str, reason: &str) -> Error {
    Error::Core(ringtrace_core::Error::Config { var, value: value.to_owned(), reason: reason.to_owned() })
}

fn positive(v: &str) -> Result<usize, &'static str> {
    v.trim().parse::<usize>().ok().filter(|n| *n > 0).ok_or("is not a positive integer")
}

fn env_count(setting: Option<(String, &'static str)>) -> Result<Option<usize>, Error> {
    match setting {
        Some((v, var)) => positive(&v).map(Some).map_err(|r| config_error(var, &v, r)),
        None => Ok(None),
    }
}

/// An `http://` or `https://` URL with a host: the only form the OTLP exporter specification
/// allows, checked when the collector is built rather than at the first export.
fn parse_endpoint(text: &str) -> Result<Uri, String> {
    let text = text.trim();
    if !text.contains("://") {
        return Err(
            "is not a URL: an http:// or https:// scheme and a host are needed, e.g. http://localhost:4318"
                .into(),
        );
    }
    let uri: Uri = text.parse().map_err(|e| format!("is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err("must be an http:// or https:// URL".into()),
    }
    match uri.host() {
        Some(h) if !h.is_empty() => Ok(uri),
        _ => Err("has no host".into()),
    }
}

fn origin_only(uri: &Uri) -> Result<Uri, String> {
    let authority = uri.authority().ok_or("has no host")?;
    Uri::builder()
        .scheme(uri.scheme_str().unwrap_or("http"))
        .authority(authority.as_str())
        .path_and_query("/")
        .build()
        .map_err(|e| e.to_string())
}

fn with_traces_path(uri: &Uri) -> Result<Uri, String> {
    let path = uri.path().trim_end_matches('/');
    let path = if path.ends_with("/v1/traces") { path.to_owned() } else { format!("{path}/v1/traces") };
    let authority = uri.authority().ok_or("has no host")?;
    Uri::builder()
        .scheme(uri.scheme_str().unwrap_or("http"))
        .authority(authority.as_str())
        .path_and_query(path.as_str())
        .build()
        .map_err(|e| e.to_string())
}

fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), String> {
    let name = HeaderName::from_bytes(name.trim().to_ascii_lowercase().as_bytes())
        .map_err(|_| format!("{:?} is not a valid header name", name.trim()))?;
    let value = HeaderValue::from_str(value.trim())
        .map_err(|_| format!("the value of {name} is not a valid header value"))?;
    Ok((name, value))
}

/// `key=value,...` with percent-encoded keys and values (the OTLP exporter specification).
fn parse_headers(v: &str) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let mut out = Vec::new();
    for entry in v.split(',').filter(|e| !e.trim().is_empty()) {
        let Some((k, val)) = entry.split_once('=') else {
            return Err(format!("entry {:?} is not key=value", entry.trim()));
        };
        let k = crate::encode::percent_decode(k.trim())?;
        let val = crate::encode::percent_decode(val.trim())?;
        out.push(header(&k, &val)?);
    }
    Ok(out)
}

fn merge_header(headers: &mut Vec<(HeaderName, HeaderValue)>, name: HeaderName, value: HeaderValue) {
    headers.retain(|(k, _)| *k != name);
    headers.push((name, value));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(config: &OtlpConfig, vars: &[(&str, &str)]) -> Result<Settings, Error> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        config.resolve_with(&move |k| map.get(k).cloned())
    }

    fn ok(config: &OtlpConfig, vars: &[(&str, &str)]) -> Settings {
        resolve(config, vars).unwrap()
    }

    #[test]
    fn defaults() {
        let s = ok(&OtlpConfig::new(), &[]);
        assert_eq!(s.endpoint.to_string(), "http://localhost:4318/v1/traces");
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
        assert_eq!(s.timeout, DEFAULT_TIMEOUT);
        assert_eq!(s.compression, Compression::None);
        assert_eq!((s.max_queue_spans, s.max_export_batch_spans), (8192, 512));
        let s = ok(&OtlpConfig::new().protocol(Protocol::Grpc), &[]);
        assert_eq!(s.endpoint.to_string(), "http://localhost:4317/");
    }

    #[test]
    fn a_hand_built_exporter_can_be_quiet() {
        assert!(!ok(&OtlpConfig::new(), &[]).quiet, "messages are printed by default");
        assert!(ok(&OtlpConfig::new().quiet(true), &[]).quiet);
    }

    #[test]
    fn endpoint_paths_follow_the_specification() {
        let generic = ok(&OtlpConfig::new(), &[(ENDPOINT_ENV, "http://collector:4318/base/")]);
        assert_eq!(generic.endpoint.to_string(), "http://collector:4318/base/v1/traces");
        let signal = ok(&OtlpConfig::new(), &[(TRACES_ENDPOINT_ENV, "http://collector:9999/custom/path")]);
        assert_eq!(signal.endpoint.to_string(), "http://collector:9999/custom/path");
        let code = ok(&OtlpConfig::new().endpoint("http://c:4318/v1/traces"), &[]);
        assert_eq!(code.endpoint.to_string(), "http://c:4318/v1/traces");
        let grpc =
            ok(&OtlpConfig::new().protocol(Protocol::Grpc), &[(ENDPOINT_ENV, "http://c:1234/ignored")]);
        assert_eq!(grpc.endpoint.to_string(), "http://c:1234/");
        let port_4317 = ok(&OtlpConfig::new(), &[(ENDPOINT_ENV, "http://127.0.0.1:4317")]);
        assert_eq!(
            (port_4317.endpoint.to_string().as_str(), port_4317.protocol),
            ("http://127.0.0.1:4317/", Protocol::Grpc)
        );
    }

    #[test]
    fn an_endpoint_without_scheme_or_host_is_an_error_naming_its_source() {
        for value in ["notaurl", "127.0.0.1:4317", "localhost", "http://", "://x"] {
            for var in [ENDPOINT_ENV, TRACES_ENDPOINT_ENV] {
                let msg = resolve(&OtlpConfig::new(), &[(var, value)]).err().map(|e| e.to_string());
                let msg = msg.unwrap_or_else(|| panic!("{var}={value:?} accepted"));
                assert!(msg.contains(var) && msg.contains(&format!("{value:?}")), "{msg}");
            }
            let msg = resolve(&OtlpConfig::new().endpoint(value), &[]).err().map(|e| e.to_string());
            let msg = msg.unwrap_or_else(|| panic!("otlp_endpoint {value:?} accepted"));
            assert!(msg.contains("otlp_endpoint") && msg.contains(&format!("{value:?}")), "{msg}");
        }
    }

    #[test]
    fn batch_variables_set_the_batch_settings_and_code_wins() {
        let vars = [
            (SCHEDULE_DELAY_ENV, "250"),
            (EXPORT_TIMEOUT_ENV, "7000"),
            (MAX_QUEUE_SIZE_ENV, "300"),
            (MAX_EXPORT_BATCH_SIZE_ENV, "30"),
        ];
        let s = ok(&OtlpConfig::new(), &vars);
        assert_eq!(s.schedule_delay, Duration::from_millis(250));
        assert_eq!(s.retry.max_elapsed, Duration::from_millis(7000));
        assert_eq!(s.flush_timeout, Duration::from_millis(7000));
        assert_eq!((s.max_queue_spans, s.max_export_batch_spans), (300, 30));

        let defaults = ok(&OtlpConfig::new(), &[]);
        assert_eq!(defaults.schedule_delay, DEFAULT_SCHEDULE_DELAY);
        assert_eq!(defaults.retry, RetryPolicy::default());
        assert_eq!(defaults.flush_timeout, Duration::from_secs(4));

        // The builder's default flush bound sits below the variable.
        let builder_default =
            OtlpConfig { default_flush_timeout: Some(Duration::from_millis(123)), ..OtlpConfig::new() };
        assert_eq!(ok(&builder_default, &[]).flush_timeout, Duration::from_millis(123));
        assert_eq!(ok(&builder_default, &vars).flush_timeout, Duration::from_millis(7000));

        let retry = RetryPolicy { max_elapsed: Duration::from_secs(2), ..RetryPolicy::default() };
        let code = OtlpConfig::new()
            .schedule_delay(Duration::from_millis(5))
            .retry(retry)
            .flush_timeout(Duration::from_millis(900))
            .max_queue_spans(1000)
            .max_export_batch_spans(100);
        let s = ok(&code, &vars);
        assert_eq!(s.schedule_delay, Duration::from_millis(5));
        assert_eq!((s.retry, s.flush_timeout), (retry, Duration::from_millis(900)));
        assert_eq!((s.max_queue_spans, s.max_export_batch_spans), (1000, 100));
    }

    #[test]
    fn precedence_is_code_then_signal_then_generic_then_default() {
        let vars = [
            (ENDPOINT_ENV, "http://generic:4318"),
            (TRACES_ENDPOINT_ENV, "http://signal:4318/v1/traces"),
            (PROTOCOL_ENV, "grpc"),
            (TRACES_PROTOCOL_ENV, "http/protobuf"),
            (TIMEOUT_ENV, "1000"),
            (TRACES_TIMEOUT_ENV, "2000"),
            (COMPRESSION_ENV, "none"),
            (TRACES_COMPRESSION_ENV, "gzip"),
            (HEADERS_ENV, "a=generic,b=generic"),
            (TRACES_HEADERS_ENV, "b=signal,c=signal"),
        ];
        let s = ok(&OtlpConfig::new(), &vars);
        assert_eq!(s.endpoint.to_string(), "http://signal:4318/v1/traces");
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
        assert_eq!(s.timeout, Duration::from_millis(2000));
        assert_eq!(s.compression, Compression::Gzip);
        let h: Vec<_> = s.headers.iter().map(|(k, v)| (k.as_str(), v.to_str().unwrap())).collect();
        assert_eq!(h, [("a", "generic"), ("b", "signal"), ("c", "signal")]);

        let generic_only: Vec<_> = vars.iter().filter(|(k, _)| !k.contains("TRACES")).copied().collect();
        let s = ok(&OtlpConfig::new(), &generic_only);
        assert_eq!((s.endpoint.to_string().as_str(), s.protocol), ("http://generic:4318/", Protocol::Grpc));
        assert_eq!((s.timeout, s.compression), (Duration::from_millis(1000), Compression::None));

        let code = OtlpConfig::new()
            .endpoint("http://code:4317")
            .protocol(Protocol::Grpc)
            .timeout(Duration::from_millis(5))
            .compression(Compression::None)
            .header("C", "code");
        let s = ok(&code, &vars);
        assert_eq!((s.endpoint.to_string().as_str(), s.protocol), ("http://code:4317/", Protocol::Grpc));
        assert_eq!((s.timeout, s.compression), (Duration::from_millis(5), Compression::None));
        assert_eq!(s.headers.last().map(|(k, v)| (k.as_str(), v.to_str().unwrap())), Some(("c", "code")));
    }

    #[test]
    fn headers_are_percent_decoded() {
        let s = ok(&OtlpConfig::new(), &[(HEADERS_ENV, "Authorization=Basic%20abc%3D, x-tenant = t1 ,")]);
        let h: Vec<_> = s.headers.iter().map(|(k, v)| (k.as_str(), v.to_str().unwrap())).collect();
        assert_eq!(h, [("authorization", "Basic abc="), ("x-tenant", "t1")]);
    }

    #[test]
    fn malformed_values_are_errors_naming_variable_and_value() {
        for (var, value) in [
            (ENDPOINT_ENV, "ftp://x:1"),
            (ENDPOINT_ENV, "http://"),
            (TRACES_ENDPOINT_ENV, "http://a b"),
            (PROTOCOL_ENV, "http/json"),
            (TRACES_PROTOCOL_ENV, "udp"),
            (HEADERS_ENV, "novalue"),
            (TRACES_HEADERS_ENV, "bad header=x"),
            (HEADERS_ENV, "k=%zz"),
            (TIMEOUT_ENV, "10s"),
            (TRACES_TIMEOUT_ENV, "0"),
            (COMPRESSION_ENV, "zstd"),
            (CERTIFICATE_ENV, "/nonexistent/ca.pem"),
            (MAX_QUEUE_SIZE_ENV, "-1"),
            (MAX_EXPORT_BATCH_SIZE_ENV, "many"),
            (SCHEDULE_DELAY_ENV, "soon"),
            (SCHEDULE_DELAY_ENV, "-5"),
            (EXPORT_TIMEOUT_ENV, "30s"),
            (EXPORT_TIMEOUT_ENV, "0"),
            (MAX_QUEUE_SIZE_ENV, "0"),
            (MAX_EXPORT_BATCH_SIZE_ENV, "1.5"),
            (QUEUE_BYTES_ENV, "0"),
        ] {
            let err =
                resolve(&OtlpConfig::new(), &[(var, value)]).err().unwrap_or_else(|| panic!("{var}={value}"));
            let msg = err.to_string();
            assert!(msg.contains(var) && msg.contains(&format!("{value:?}")), "{var}={value:?}: {msg}");
        }
        let msg = resolve(&OtlpConfig::new().endpoint("::"), &[]).err().unwrap().to_string();
        assert!(msg.contains("otlp_endpoint"), "{msg}");
        let msg = resolve(&OtlpConfig::new().header("a b", "v"), &[]).err().unwrap().to_string();
        assert!(msg.contains("otlp_header"), "{msg}");
    }

    #[test]
    fn certificate_path_is_read_signal_first() {
        let dir = std::env::temp_dir();
        let generic = dir.join(format!("ringtrace-ca-generic-{}.pem", std::process::id()));
        let signal = dir.join(format!("ringtrace-ca-signal-{}.pem", std::process::id()));
        std::fs::write(&generic, "-----BEGIN CERTIFICATE-----\ngeneric\n-----END CERTIFICATE-----\n")
            .unwrap();
        std::fs::write(&signal, "-----BEGIN CERTIFICATE-----\nsignal\n-----END CERTIFICATE-----\n").unwrap();
        let g = generic.to_str().unwrap();
        let t = signal.to_str().unwrap();
        let s = ok(&OtlpConfig::new(), &[(CERTIFICATE_ENV, g), (TRACES_CERTIFICATE_ENV, t)]);
        assert!(String::from_utf8(s.ca_pem.unwrap()).unwrap().contains("signal"));
        let s = ok(&OtlpConfig::new(), &[(CERTIFICATE_ENV, g)]);
        assert!(String::from_utf8(s.ca_pem.unwrap()).unwrap().contains("generic"));
        std::fs::write(&generic, "not a certificate").unwrap();
        let msg = resolve(&OtlpConfig::new(), &[(CERTIFICATE_ENV, g)]).err().unwrap().to_string();
        assert!(msg.contains(CERTIFICATE_ENV) && msg.contains("no PEM certificate"), "{msg}");
        let _ = std::fs::remove_file(&generic);
        let _ = std::fs::remove_file(&signal);
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let s = ok(&OtlpConfig::new(), &[(ENDPOINT_ENV, " "), (PROTOCOL_ENV, ""), (TIMEOUT_ENV, "")]);
        assert_eq!(s.endpoint.to_string(), "http://localhost:4318/v1/traces");
    }

    #[test]
    fn batch_is_at_most_the_queue() {
        let s = ok(&OtlpConfig::new().max_queue_spans(100), &[(MAX_EXPORT_BATCH_SIZE_ENV, "1000")]);
        assert_eq!(s.max_export_batch_spans, 100);
    }

    #[test]
    fn https_needs_the_tls_feature() {
        let r = resolve(&OtlpConfig::new(), &[(ENDPOINT_ENV, "https://collector:4318")]);
        if cfg!(feature = "otlp-tls") {
            assert!(r.unwrap().tls);
        } else {
            let msg = r.err().unwrap().to_string();
            assert!(msg.contains(ENDPOINT_ENV) && msg.contains("otlp-tls"), "{msg}");
        }
    }

    #[test]
    fn exporter_switch() {
        let on = |vars: &[(&str, &str)]| {
            let map: HashMap<String, String> =
                vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            enabled_by_env(&move |k| map.get(k).cloned())
        };
        assert!(!on(&[]).unwrap());
        assert!(on(&[(ENDPOINT_ENV, "http://c:4318")]).unwrap());
        assert!(on(&[(TRACES_ENDPOINT_ENV, "http://c:4318")]).unwrap());
        assert!(on(&[(TRACES_EXPORTER_ENV, "otlp")]).unwrap());
        assert!(!on(&[(TRACES_EXPORTER_ENV, "none"), (ENDPOINT_ENV, "http://c:4318")]).unwrap());
        let msg = on(&[(TRACES_EXPORTER_ENV, "zipkin")]).unwrap_err().to_string();
        assert!(msg.contains(TRACES_EXPORTER_ENV) && msg.contains("\"zipkin\""), "{msg}");
    }
}
