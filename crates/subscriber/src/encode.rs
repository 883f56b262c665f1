//! Assembled spans to OTLP messages, following the conventions of `tracing-opentelemetry`
//! and the OpenTelemetry semantic conventions.
//!
//! | OTLP | from |
//! |---|---|
//! | resource `service.name` / `host.name` | daemon / node |
//! | resource `process.pid`, `telemetry.sdk.*` | the process, ringtrace |
//! | resource `service.instance.id` | a random UUID per process (unless given below) |
//! | resource `host.id` | the machine id, `/etc/machine-id` or `/var/lib/dbus/machine-id` (unless given below) |
//! | resource `ringtrace.boot_id` | the kernel's boot id, `/proc/sys/kernel/random/boot_id` (Linux) |
//! | other resource attributes | `OTEL_RESOURCE_ATTRIBUTES` and [`Builder::resource_attribute`](crate::Builder::resource_attribute) |
//! | resource `ringtrace.dropped_spans` … | cumulative loss counters ([`Stats`]) |
//! | span name | `otel.name` field, else the callsite name |
//! | span kind | `otel.kind` field (`server`, `client`, `producer`, `consumer`, `internal`) |
//! | status | `otel.status_code` (`ok`/`error`) + `otel.status_message`; else error when an ERROR event was recorded |
//! | attributes | the span's fields, `request.id`, `target`, `code.namespace`, `code.filepath`, `code.lineno`, `level`, `thread.id`, `thread.name` |
//! | events | tracing events: name = the `message` field, attributes = other fields, `level`, `target` |

use ringtrace_core::otlp::KeyValueExt as _;
use std::sync::{OnceLock, RwLock};

use ringtrace_core::otlp::{self, any_value, KeyValue};
use tracing_core::Level;

use ringtrace_core::record::Meta;

use crate::span_data::{EventData, ResourceInfo, SpanData, Value};
use crate::stats::Stats;

/// Environment variable: extra resource attributes, `key1=value1,key2=value2` (percent-encoded).
pub const RESOURCE_ATTRIBUTES_ENV: &str = "OTEL_RESOURCE_ATTRIBUTES";

/// Resource attributes for a process.
pub fn resource(info: &ResourceInfo) -> otlp::Resource {
    resource_with(info, std::iter::empty())
}

/// Resource attributes for a process, followed by `extra` (a sink's own counters).
pub fn resource_with(info: &ResourceInfo, extra: impl IntoIterator<Item = KeyValue>) -> otlp::Resource {
    let process = process_attributes();
    resource_of(info, &process, service_instance_id(), &machine_attributes(&process), extra)
}

/// What names this process's machine and its boot, unless `given` (the attributes of
/// `OTEL_RESOURCE_ATTRIBUTES` and the builder) names the machine already: `host.id` and
/// `ringtrace.boot_id`, each when known.
fn machine_attributes(given: &[(String, String)]) -> Vec<(&'static str, &'static str)> {
    let host = host_id().filter(|_| !given.iter().any(|(k, _)| k == HOST_ID));
    host.map(|id| (HOST_ID, id)).into_iter().chain(boot_id().map(|id| (BOOT_ID, id))).collect()
}

/// This process's resource attributes besides identity, pid, SDK and counters: those of
/// `OTEL_RESOURCE_ATTRIBUTES` and the builder, `service.instance.id`, and `host.id` and
/// `ringtrace.boot_id` when known (`host.id` unless given). A raw recording keeps them, for its
/// readers' [`traces_data_of`].
pub fn process_resource_attributes() -> Vec<(String, String)> {
    let mut attrs = process_attributes().to_vec();
    for (k, v) in machine_attributes(&attrs).into_iter().rev() {
        attrs.insert(0, (k.to_owned(), v.to_owned()));
    }
    if !attrs.iter().any(|(k, _)| k == "service.instance.id") {
        attrs.insert(0, ("service.instance.id".to_owned(), service_instance_id().to_owned()));
    }
    attrs
}

/// A resource: identity, pid and SDK, `service.instance.id` (`instance_id`, unless `process`
/// has one), `machine` (this process's machine and boot; never a recording's reader's), the
/// `process` attributes, counters, then `extra`.
fn resource_of(
    info: &ResourceInfo,
    process: &[(String, String)],
    instance_id: &str,
    machine: &[(&str, &str)],
    extra: impl IntoIterator<Item = KeyValue>,
) -> otlp::Resource {
    let mut attributes = Vec::with_capacity(16 + process.len());
    attributes.extend([
        KeyValue::string("service.name", &info.identity.daemon),
        KeyValue::string("host.name", &info.identity.node),
        KeyValue::int("process.pid", i64::from(info.pid)),
        KeyValue::string("telemetry.sdk.name", "ringtrace"),
        KeyValue::string("telemetry.sdk.language", "rust"),
        KeyValue::string("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
    ]);
    if !process.iter().any(|(k, _)| k == "service.instance.id") {
        attributes.push(KeyValue::string("service.instance.id", instance_id));
    }
    attributes.extend(machine.iter().map(|&(k, v)| KeyValue::string(k, v)));
    attributes.extend(process.iter().map(|(k, v)| KeyValue::string(k.as_str(), v.as_str())));
    attributes.extend(counter_attributes(&info.stats));
    attributes.extend(extra);
    otlp::Resource { attributes, ..Default::default() }
}

/// This process's `service.instance.id`: a random (version 4) UUID, the same for every collector
/// of the process.
pub fn service_instance_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let mut ids = ringtrace_core::ids::IdGenerator::from_entropy(u64::from(std::process::id()) << 20);
        let v = ids.trace_id().get();
        let v = (v & !(0xf << 76) & !(0x3 << 62)) | (0x4 << 76) | (0x2 << 62);
        let h = format!("{v:032x}");
        format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
    })
}

/// This machine's `host.id` (OpenTelemetry's semantic conventions: the machine id): the first
/// of `/etc/machine-id` and `/var/lib/dbus/machine-id` that holds one (32 hexadecimal digits),
/// read once. Readers take processes of one `host.id` for one clock where a boot id
/// ([`boot_id`]) does not tell, whatever their `host.name` (the demo's nodes all run on one
/// machine).
pub fn host_id() -> Option<&'static str> {
    static ID: OnceLock<Option<String>> = OnceLock::new();
    ID.get_or_init(|| MACHINE_ID_FILES.iter().find_map(|path| machine_id(&std::fs::read(path).ok()?)))
        .as_deref()
}

/// Where [`host_id`] looks for the machine id, in order.
const MACHINE_ID_FILES: [&str; 2] = ["/etc/machine-id", "/var/lib/dbus/machine-id"];

/// The resource attribute that names the machine ([`host_id`]; OpenTelemetry's).
pub const HOST_ID: &str = "host.id";

/// The resource attribute that names the kernel's boot ([`boot_id`]).
pub const BOOT_ID: &str = "ringtrace.boot_id";

/// This boot's id, `/proc/sys/kernel/random/boot_id` (Linux; a random UUID made at each boot),
/// read once. Readers take processes of one boot id for one clock: they ran under one kernel
/// (containers of one host share it; machines cloned from one image, which may share a machine
/// id, do not).
pub fn boot_id() -> Option<&'static str> {
    static ID: OnceLock<Option<String>> = OnceLock::new();
    ID.get_or_init(|| uuid_text(&std::fs::read("/proc/sys/kernel/random/boot_id").ok()?)).as_deref()
}

/// The UUID a `boot_id` file's bytes hold: 36 characters, hexadecimal digits with dashes at
/// 8, 13, 18 and 23, and a line end.
fn uuid_text(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    let well_formed = text.len() == 36
        && text.bytes().enumerate().all(|(i, b)| {
            matches!(i, 8 | 13 | 18 | 23) == (b == b'-') && (b == b'-' || b.is_ascii_hexdigit())
        });
    well_formed.then(|| text.to_ascii_lowercase())
}

/// The machine id a `machine-id` file's bytes hold: 32 hexadecimal digits and a line end.
fn machine_id(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    (text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit())).then(|| text.to_ascii_lowercase())
}

/// Attributes set by a ringtrace itself, which `OTEL_RESOURCE_ATTRIBUTES` cannot override
/// (`service.name` and `host.name` choose the daemon and node instead, see [`Builder`](crate::Builder)).
fn is_reserved(key: &str) -> bool {
    matches!(key, "service.name" | "host.name" | "process.pid")
        || key.starts_with("telemetry.sdk.")
        || key.starts_with("ringtrace.")
}

type Attributes = std::sync::Arc<[(String, String)]>;

fn process_attributes_cell() -> &'static RwLock<Attributes> {
    static ATTRS: OnceLock<RwLock<Attributes>> = OnceLock::new();
    ATTRS.get_or_init(|| RwLock::new(std::sync::Arc::from(Vec::new())))
}

fn process_attributes() -> Attributes {
    process_attributes_cell().read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Sets the process's extra resource attributes (reserved keys are left out). Resource
/// attributes describe the process, so they are process-wide: the collector built last sets them.
pub(crate) fn set_process_attributes(attrs: &[(String, String)]) {
    let attrs: Vec<_> = attrs.iter().filter(|(k, _)| !is_reserved(k)).cloned().collect();
    *process_attributes_cell().write().unwrap_or_else(|e| e.into_inner()) = std::sync::Arc::from(attrs);
}

/// Parses `OTEL_RESOURCE_ATTRIBUTES` (W3C baggage syntax without properties):
/// `key1=value1,key2=value2`, keys and values percent-encoded, spaces around them trimmed,
/// empty entries skipped. Later duplicates win. The error says what is wrong.
pub fn parse_resource_attributes(value: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for entry in value.split(',') {
        if entry.trim().is_empty() {
            continue;
        }
        let Some((k, v)) = entry.split_once('=') else {
            return Err(format!("entry {:?} is not key=value", entry.trim()));
        };
        let key = percent_decode(k.trim()).map_err(|e| format!("key {:?}: {e}", k.trim()))?;
        let val = percent_decode(v.trim()).map_err(|e| format!("value {:?}: {e}", v.trim()))?;
        if key.is_empty() {
            return Err(format!("entry {:?} has an empty key", entry.trim()));
        }
        out.retain(|(k, _)| *k != key);
        out.push((key, val));
    }
    Ok(out)
}

/// Decodes `%XX` escapes; the result must be UTF-8.
pub(crate) fn percent_decode(s: &str) -> Result<String, String> {
    let out = ringtrace_core::hex::percent_decode(s.as_bytes())
        .map_err(|i| format!("bad percent escape at byte {i}"))?;
    String::from_utf8(out).map_err(|_| "is not UTF-8 after percent-decoding".to_owned())
}

fn counter_attributes(s: &Stats) -> impl Iterator<Item = KeyValue> {
    let sat = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    [
        ("ringtrace.recorded_spans", s.recorded_spans),
        ("ringtrace.dropped_spans", s.dropped_spans),
        ("ringtrace.dropped_closes", s.dropped_closes),
        ("ringtrace.dropped_events", s.dropped_events),
        ("ringtrace.events_over_limit", s.events_over_limit),
        ("ringtrace.sink_failed_spans", s.sink_failed_spans),
        ("ringtrace.sink_dropped_spans", s.sink_dropped_spans),
        ("ringtrace.sink_rejected_spans", s.sink_rejected_spans),
        ("ringtrace.sink_unconfirmed_spans", s.sink_unconfirmed_spans),
        ("ringtrace.sink_unsent_spans", s.sink_unsent_spans),
        ("ringtrace.dropped_updates", s.dropped_updates),
        ("ringtrace.unclosed_spans", s.unclosed_spans),
        ("ringtrace.orphan_records", s.orphan_records),
        ("ringtrace.propagation_malformed", s.propagation_malformed),
    ]
    .into_iter()
    .map(move |(k, v)| KeyValue::int(k, sat(v)))
}

/// One `TracesData` message holding `batch` (possibly empty: a counters-only frame).
pub fn traces_data(batch: &[SpanData], info: &ResourceInfo) -> otlp::TracesData {
    traces_data_with_resource(batch, resource(info))
}

/// [`traces_data`] for spans of another process, whose resource attributes besides identity,
/// pid and counters are `attributes` (`service.instance.id` included), as a raw recording keeps
/// them ([`process_resource_attributes`]).
pub fn traces_data_of(
    batch: &[SpanData],
    info: &ResourceInfo,
    attributes: &[(String, String)],
) -> otlp::TracesData {
    traces_data_with_resource(batch, resource_of_recorded(info, attributes))
}

/// The resource of spans of another process, as [`traces_data_of`] exports them.
pub fn resource_of_recorded(info: &ResourceInfo, attributes: &[(String, String)]) -> otlp::Resource {
    let instance_id =
        attributes.iter().find(|(k, _)| k == "service.instance.id").map_or("", |(_, v)| v.as_str());
    resource_of(info, attributes, instance_id, &[], std::iter::empty())
}

fn traces_data_with_resource(batch: &[SpanData], resource: otlp::Resource) -> otlp::TracesData {
    otlp::TracesData {
        resource_spans: vec![otlp::ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![otlp::ScopeSpans {
                scope: Some(otlp::InstrumentationScope {
                    name: "ringtrace".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans: batch.iter().map(span).collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// An attribute's value as a span is exported with it, borrowed from the span where it can be.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeValue<'a> {
    /// A signed integer (a `u64` above `i64::MAX` becomes a string, as OTLP has no unsigned).
    Int(i64),
    /// A float.
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(std::borrow::Cow<'a, str>),
}

impl AttributeValue<'_> {
    /// The OTLP value.
    pub fn into_otlp(self) -> any_value::Value {
        match self {
            AttributeValue::Int(v) => any_value::Value::IntValue(v),
            AttributeValue::Double(v) => any_value::Value::DoubleValue(v),
            AttributeValue::Bool(v) => any_value::Value::BoolValue(v),
            AttributeValue::Str(s) => any_value::Value::StringValue(s.into_owned()),
        }
    }
}

impl<'a> From<&'a Value> for AttributeValue<'a> {
    fn from(v: &'a Value) -> Self {
        match v {
            Value::I64(v) => AttributeValue::Int(*v),
            Value::U64(v) => match i64::try_from(*v) {
                Ok(i) => AttributeValue::Int(i),
                Err(_) => AttributeValue::Str(v.to_string().into()),
            },
            Value::F64(v) => AttributeValue::Double(*v),
            Value::Bool(v) => AttributeValue::Bool(*v),
            Value::Str(s) => AttributeValue::Str(s.as_str().into()),
        }
    }
}

/// The OpenTelemetry/`tracing-opentelemetry` text of a level.
pub(crate) fn level_str(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => "INFO",
        Level::WARN => "WARN",
        _ => "ERROR",
    }
}

/// The span kind named by an `otel.kind` value.
pub(crate) fn kind(v: Option<&Value>) -> otlp::SpanKind {
    let Some(Value::Str(s)) = v else { return otlp::SpanKind::Internal };
    match s.to_ascii_lowercase().as_str() {
        "server" => otlp::SpanKind::Server,
        "client" => otlp::SpanKind::Client,
        "producer" => otlp::SpanKind::Producer,
        "consumer" => otlp::SpanKind::Consumer,
        _ => otlp::SpanKind::Internal,
    }
}

/// Fields that steer the OTLP span itself rather than becoming attributes.
pub(crate) const RESERVED_FIELDS: [&str; 4] =
    ["otel.name", "otel.kind", "otel.status_code", "otel.status_message"];

/// The span kind from the `otel.kind` field (`internal` without one).
pub fn kind_of(s: &SpanData) -> otlp::SpanKind {
    kind(s.field("otel.kind"))
}

/// W3C flags in bits 0-7; bit 8 says the parent-is-remote bit 9 is known.
pub(crate) fn flags_of(s: &SpanData) -> u32 {
    let mut flags = u32::from(s.sampled) | 0x100;
    if s.parent_is_remote {
        flags |= 0x200;
    }
    flags
}

/// The span's status from `otel.status_code`/`otel.status_message` or its ERROR events.
pub fn status_of(s: &SpanData) -> Option<otlp::Status> {
    let message = match s.field("otel.status_message") {
        Some(v) => v.to_string(),
        None => String::new(),
    };
    let code = status_code(s.field("otel.status_code"), &s.events);
    (code != otlp::StatusCode::Unset || !message.is_empty())
        .then_some(otlp::Status { message, code: code as i32 })
}

/// The status code from the `otel.status_code` field (`error` or `ok`, any case), else `Error`
/// when an event is at `ERROR` level, else `Unset`.
pub(crate) fn status_code(field: Option<&Value>, events: &[EventData]) -> otlp::StatusCode {
    match field {
        Some(Value::Str(c)) if c.eq_ignore_ascii_case("error") => otlp::StatusCode::Error,
        Some(Value::Str(c)) if c.eq_ignore_ascii_case("ok") => otlp::StatusCode::Ok,
        _ if events.iter().any(|e| *e.meta.level() == Level::ERROR) => otlp::StatusCode::Error,
        _ => otlp::StatusCode::Unset,
    }
}

/// An event's name as exported: its `message` field, else its callsite's name.
pub fn event_name(e: &EventData) -> String {
    match e.fields.iter().find(|(k, _)| *k == "message") {
        Some((_, v)) => v.to_string(),
        None => e.meta.name().to_owned(),
    }
}

/// Calls `f` with each attribute an event is exported with, in order: its fields but the
/// `message` that names it, then `level` and `target`. With [`span_attributes`], the one mapping
/// of events to attributes, for the OTLP encoder and for readers of raw recordings alike.
pub fn event_attributes<'a>(e: &'a EventData, mut f: impl FnMut(&'static str, AttributeValue<'a>)) {
    let mut named = false;
    for (k, v) in &e.fields {
        if *k == "message" && !named {
            named = true;
        } else {
            f(k, v.into());
        }
    }
    f("level", AttributeValue::Str(level_str(e.meta.level()).into()));
    f("target", AttributeValue::Str(e.meta.target().into()));
}

fn event(e: &EventData) -> otlp::Event {
    let mut attributes = Vec::with_capacity(e.fields.len() + 2);
    event_attributes(e, |k, v| attributes.push(KeyValue::new(k, v.into_otlp())));
    otlp::Event { time_unix_nano: e.unix_ns, name: event_name(e), attributes, dropped_attributes_count: 0 }
}

/// Calls `f` with each attribute a span is exported with, in order: its fields but those that
/// steer the span itself (`otel.*`) and `request.id`; its request id; `target`,
/// `code.namespace`, `code.filepath`, `code.lineno`, `level`; `thread.id`, `thread.name`; and
/// `ringtrace.unclosed` for a span still open at shutdown.
///
/// The one mapping of spans to attributes: the OTLP encoder ([`span`]), the recording's direct
/// encoder (which keeps each callsite's and thread's part encoded, so it calls the parts below
/// in this order) and readers of raw recordings, which build their own model from it without
/// going through OTLP.
pub fn span_attributes<'a>(s: &'a SpanData, mut f: impl FnMut(&'static str, AttributeValue<'a>)) {
    for (k, v) in &s.fields {
        if !steers(k) {
            f(k, v.into());
        }
    }
    if let Some(r) = &s.request_id {
        f(ringtrace_core::propagation::REQUEST_ID_KEY, AttributeValue::Str(r.as_ref().into()));
    }
    callsite_attributes(s.meta, &mut f);
    thread_attributes(s.thread_id, &s.thread_name, &mut f);
    if s.unclosed {
        f(UNCLOSED, AttributeValue::Bool(true));
    }
}

/// The attribute marking a span still open at shutdown.
pub(crate) const UNCLOSED: &str = "ringtrace.unclosed";

/// A field that steers the exported span rather than becoming an attribute: one of
/// [`RESERVED_FIELDS`], or `request.id` (exported after the fields, once).
#[inline]
pub(crate) fn steers(key: &str) -> bool {
    RESERVED_FIELDS.contains(&key) || key == ringtrace_core::propagation::REQUEST_ID_KEY
}

/// The attributes of a span that depend only on its callsite, in [`span_attributes`]' order.
pub(crate) fn callsite_attributes<'a>(meta: Meta, mut f: impl FnMut(&'static str, AttributeValue<'a>)) {
    let str = |s: &'static str| AttributeValue::Str(s.into());
    f("target", str(meta.target()));
    if let Some(m) = meta.module_path() {
        f("code.namespace", str(m));
    }
    if let Some(file) = meta.file() {
        f("code.filepath", str(file));
    }
    if let Some(l) = meta.line() {
        f("code.lineno", AttributeValue::Int(i64::from(l)));
    }
    f("level", str(level_str(meta.level())));
}

/// The attributes of a span that depend only on the thread that created it, in
/// [`span_attributes`]' order.
pub(crate) fn thread_attributes<'a>(
    thread_id: u64,
    thread_name: &'a str,
    mut f: impl FnMut(&'static str, AttributeValue<'a>),
) {
    f("thread.id", AttributeValue::Int(i64::try_from(thread_id).unwrap_or(i64::MAX)));
    if !thread_name.is_empty() {
        f("thread.name", AttributeValue::Str(thread_name.into()));
    }
}

/// One span as OTLP.
pub fn span(s: &SpanData) -> otlp::Span {
    let mut attributes = Vec::with_capacity(s.fields.len() + 8);
    span_attributes(s, |k, v| attributes.push(KeyValue::new(k, v.into_otlp())));
    let flags = flags_of(s);
    otlp::Span {
        trace_id: s.trace_id.to_bytes().to_vec(),
        span_id: s.span_id.to_bytes().to_vec(),
        trace_state: String::new(),
        parent_span_id: s.parent_span_id.map(|p| p.to_bytes().to_vec()).unwrap_or_default(),
        flags,
        name: s.name().into_owned(),
        kind: kind_of(s) as i32,
        start_time_unix_nano: s.start_unix_ns,
        end_time_unix_nano: s.end_unix_ns,
        attributes,
        dropped_attributes_count: 0,
        events: s.events.iter().map(event).collect(),
        dropped_events_count: s.dropped_events,
        links: s
            .links
            .iter()
            .map(|l| otlp::Link {
                trace_id: l.trace_id.to_bytes().to_vec(),
                span_id: l.span_id.to_bytes().to_vec(),
                flags: 0x101,
                ..Default::default()
            })
            .collect(),
        dropped_links_count: 0,
        status: status_of(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_attributes_parse_and_decode() {
        let attrs =
            parse_resource_attributes(" deployment.environment = prod ,, team=a%2Cb, team=c ").unwrap();
        assert_eq!(
            attrs,
            vec![("deployment.environment".into(), "prod".into()), ("team".into(), "c".into())]
        );
        assert_eq!(parse_resource_attributes("k=a%2Cb%20c").unwrap(), vec![("k".into(), "a,b c".into())]);
        assert!(parse_resource_attributes("novalue").unwrap_err().contains("novalue"));
        assert!(parse_resource_attributes("=v").is_err());
        assert!(parse_resource_attributes("k=%zz").is_err());
        assert!(parse_resource_attributes("k=%ff").is_err(), "not UTF-8");
        assert!(parse_resource_attributes("").unwrap().is_empty());
    }

    #[test]
    fn service_instance_id_is_a_stable_v4_uuid() {
        let id = service_instance_id();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        assert_eq!(id, service_instance_id());
    }

    #[test]
    fn boot_id_is_the_kernels_and_kept_with_the_machine() {
        let id = "0c4d9f3e-8a1b-4f2c-9d7e-6b5a4c3d2e1f";
        assert_eq!(uuid_text(format!("{}\n", id.to_uppercase()).as_bytes()).as_deref(), Some(id));
        for bad in [
            "",
            "0c4d9f3e8a1b4f2c9d7e6b5a4c3d2e1f",
            "0c4d9f3e-8a1b-4f2c-9d7e-6b5a4c3d2e1",
            "0c4d9f3e-8a1b-4f2c-9d7e-6b5a4c3d2e1g",
            "0c4d9f3e-8a1b-4f2c-9d7e6-b5a4c3d2e1f",
        ] {
            assert_eq!(uuid_text(bad.as_bytes()), None, "{bad:?}");
        }
        let expected = std::fs::read("/proc/sys/kernel/random/boot_id").ok().and_then(|b| uuid_text(&b));
        assert_eq!(boot_id(), expected.as_deref());
        let attributes = process_resource_attributes();
        let kept: Vec<&str> =
            attributes.iter().filter(|(k, _)| k == BOOT_ID).map(|(_, v)| v.as_str()).collect();
        assert_eq!(kept, boot_id().into_iter().collect::<Vec<_>>());
        // Even beside a `host.id` given: the boot is still this one.
        let given = [("host.id".to_owned(), "given".to_owned())];
        assert_eq!(
            machine_attributes(&given),
            boot_id().map(|id| (BOOT_ID, id)).into_iter().collect::<Vec<_>>()
        );
    }

    #[test]
    fn host_id_is_the_machine_id_and_yields_to_one_given() {
        assert_eq!(
            machine_id(b"3D1219C7C4C5404AAA1F6D2A48ADFDA4\n").as_deref(),
            Some("3d1219c7c4c5404aaa1f6d2a48adfda4")
        );
        for bad in [
            &b""[..],
            b"uninitialized\n",
            b"3d1219c7c4c5404aaa1f6d2a48adfda",
            b"3d1219c7c4c5404aaa1f6d2a48adfdz4",
            b"\xff",
        ] {
            assert_eq!(machine_id(bad), None, "{bad:?}");
        }
        let expected = MACHINE_ID_FILES.iter().find_map(|p| machine_id(&std::fs::read(p).ok()?));
        assert_eq!(host_id(), expected.as_deref());
        let identity = ringtrace_core::Identity { node: "n".into(), daemon: "d".into() };
        let info = ResourceInfo { identity, pid: 1, stats: Stats::default() };
        let host_ids = |resource: otlp::Resource| -> Vec<String> {
            resource
                .attributes
                .iter()
                .filter(|kv| kv.key == "host.id")
                .map(|kv| format!("{:?}", kv.value))
                .collect()
        };
        // This process's resource: the machine's id.
        let own = host_ids(resource_with(&info, std::iter::empty()));
        match host_id() {
            Some(id) => assert!(own.len() == 1 && own[0].contains(id), "{own:?}"),
            None => assert!(own.is_empty(), "{own:?}"),
        }
        // What a raw recording keeps of this process: the same.
        let attributes = process_resource_attributes();
        let kept: Vec<&str> =
            attributes.iter().filter(|(k, _)| k == "host.id").map(|(_, v)| v.as_str()).collect();
        assert_eq!(kept, host_id().into_iter().collect::<Vec<_>>());
        // A recording's: the id it recorded, never the reader's.
        assert_eq!(host_ids(resource_of_recorded(&info, &[])), Vec::<String>::new());
        let given = [("host.id".to_owned(), "given".to_owned())];
        let ids = host_ids(resource_of_recorded(&info, &given));
        assert!(ids.len() == 1 && ids[0].contains("given"), "{ids:?}");
        // Given by `OTEL_RESOURCE_ATTRIBUTES` or the builder, it wins over the machine's.
        let ids = host_ids(resource_of(&info, &given, "i", &machine_attributes(&given), std::iter::empty()));
        assert!(ids.len() == 1 && ids[0].contains("given"), "{ids:?}");
    }
}
