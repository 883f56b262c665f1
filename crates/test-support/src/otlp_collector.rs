//! A real OTLP collector for tests: `rotel-agent` (PyPI package `rotel`) on free loopback ports,
//! printing every span it receives, and a parser of what it prints.
//!
//! A missing `rotel-agent` fails the test with the command that installs it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The rotel version `scripts/install-test-deps.sh` installs.
pub const ROTEL_PIN: &str = "rotel==0.0.1a15";

/// How to get the collector.
pub fn install_hint() -> String {
    format!(
        "rotel-agent (the test OTLP collector) is not installed: run scripts/install-test-deps.sh \
         (it installs {ROTEL_PIN} into the virtualenv .venv-test/), or set ROTEL_AGENT to the \
         rotel-agent executable"
    )
}

/// Finds `rotel-agent`: `$ROTEL_AGENT` (what `scripts/test.sh` exports), then the virtualenv
/// `scripts/install-test-deps.sh` makes (`.venv-test/` at the repository root), then `PATH`, then
/// the `rotel` package of the system's Python.
pub fn rotel_agent() -> PathBuf {
    if let Some(p) = std::env::var_os("ROTEL_AGENT") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "ROTEL_AGENT={} is not a file. {}", p.display(), install_hint());
        return p;
    }
    let script = "import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))";
    let from_python = |python: &std::ffi::OsStr| -> Option<PathBuf> {
        let out = Command::new(python).args(["-c", script]).stderr(Stdio::null()).output().ok()?;
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        (out.status.success() && p.is_file()).then_some(p)
    };
    // Every crate that includes this file sits two levels below the repository root.
    let venv_python = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv-test/bin/python");
    if let Some(p) = from_python(venv_python.as_ref()) {
        return p;
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join("rotel-agent");
            if p.is_file() {
                return p;
            }
        }
    }
    for python in ["python3", "python"] {
        if let Some(p) = from_python(python.as_ref()) {
            return p;
        }
    }
    panic!("{}", install_hint());
}

/// A free loopback port (bound and released; the collector binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A running `rotel-agent`.
pub struct Rotel {
    child: Option<Child>,
    /// The loopback port of its OTLP/gRPC receiver.
    pub grpc_port: u16,
    /// The loopback port of its OTLP/HTTP receiver.
    pub http_port: u16,
    output: Arc<Mutex<String>>,
    dir: PathBuf,
}

impl Rotel {
    /// Starts a collector on two free ports.
    pub fn start() -> Rotel {
        Self::launch_free(true)
    }

    /// Starts a collector on these ports, waiting until both accept connections.
    pub fn start_on(grpc_port: u16, http_port: u16) -> Rotel {
        Self::launch(grpc_port, http_port, true).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a collector that prints nothing per span (for benchmarks): spans are not parsed.
    pub fn start_quiet() -> Rotel {
        Self::launch_free(false)
    }

    /// Starts a collector on free ports. A port found free can be taken by another test before
    /// the collector binds it: then it starts again on other ports (a few times).
    fn launch_free(print_spans: bool) -> Rotel {
        let mut attempts = 0;
        loop {
            attempts += 1;
            match Self::launch(free_port(), free_port(), print_spans) {
                Ok(rotel) => return rotel,
                Err(e) if attempts < 5 && e.contains("Address already in use") => continue,
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// The collector's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn launch(grpc_port: u16, http_port: u16, print_spans: bool) -> Result<Rotel, String> {
        let agent = rotel_agent();
        let dir = std::env::temp_dir().join(format!("ringtrace-rotel-{}-{grpc_port}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let mut cmd = Command::new(&agent);
        cmd.arg("start")
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc_port}")])
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http_port}")])
            .args(["--exporter", "blackhole"])
            .args(if print_spans {
                &["--debug-log", "traces", "--debug-log-verbosity", "detailed"][..]
            } else {
                &[]
            })
            .arg("--pid-file")
            .arg(dir.join("rotel.pid"))
            .arg("--log-file")
            .arg(dir.join("rotel.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Settings of an outer rotel must not leak in.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("ROTEL_") {
                cmd.env_remove(k);
            }
        }
        let mut child =
            cmd.spawn().unwrap_or_else(|e| panic!("starting {}: {e}. {}", agent.display(), install_hint()));
        let output = Arc::new(Mutex::new(String::new()));
        for stream in [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child.stderr.take().map(|s| Box::new(s) as _),
        ]
        .into_iter()
        .flatten()
        {
            let output = output.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                let mut line = String::new();
                while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                    output.lock().unwrap().push_str(&line);
                    line.clear();
                }
            });
        }
        let mut rotel = Rotel { child: Some(child), grpc_port, http_port, output, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if [grpc_port, http_port].iter().all(|p| TcpStream::connect(("127.0.0.1", *p)).is_ok()) {
                return Ok(rotel);
            }
            if let Some(status) = rotel.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                // The threads reading its output may still be at it: a moment for them.
                std::thread::sleep(Duration::from_millis(100));
                return Err(format!("rotel-agent exited with {status} while starting:\n{}", rotel.output()));
            }
            assert!(Instant::now() < deadline, "rotel-agent did not listen within 20 s:\n{}", rotel.output());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The `http://` endpoint of its gRPC receiver.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// The `http://` endpoint of its HTTP receiver.
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// Kills the collector (SIGKILL) and waits for it to exit.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Everything the collector printed so far.
    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// The spans received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        parse(&self.output())
    }

    /// Waits (at most `timeout`) until `done` holds for the spans received; returns them.
    pub fn wait_for(&self, timeout: Duration, done: impl Fn(&[ReceivedSpan]) -> bool) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() >= deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Rotel {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One span as the collector printed it.
#[derive(Debug, Clone, Default)]
pub struct ReceivedSpan {
    /// Hex, as printed.
    pub trace_id: String,
    /// Hex, as printed.
    pub span_id: String,
    /// Empty for a root span.
    pub parent_id: String,
    /// The span's name.
    pub name: String,
    /// As printed: `SPAN_KIND_CLIENT`, `SPAN_KIND_INTERNAL`…
    pub kind: String,
    /// As printed: `STATUS_CODE_ERROR`…
    pub status_code: String,
    /// Values without their type: `Str(x)` → `x`, `Int(7)` → `7`.
    pub attributes: BTreeMap<String, String>,
    /// The resource's attributes, likewise.
    pub resource: BTreeMap<String, String>,
    /// The events' names.
    pub events: Vec<String>,
}

impl ReceivedSpan {
    /// The span attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }

    /// The resource attribute `key`.
    pub fn res(&self, key: &str) -> Option<&str> {
        self.resource.get(key).map(String::as_str)
    }
}

fn key_value(line: &str) -> Option<(String, String)> {
    let rest = line.trim_start().strip_prefix("-> ")?;
    let (k, v) = rest.split_once(": ")?;
    let v = match (v.find('('), v.ends_with(')')) {
        (Some(i), true) => &v[i + 1..v.len() - 1],
        _ => v,
    };
    Some((k.to_owned(), v.to_owned()))
}

#[derive(PartialEq)]
enum Section {
    None,
    Resource,
    SpanAttributes,
    Events,
}

/// Parses rotel's `--debug-log traces --debug-log-verbosity detailed` output.
pub fn parse(text: &str) -> Vec<ReceivedSpan> {
    let mut spans: Vec<ReceivedSpan> = Vec::new();
    let mut resource = BTreeMap::new();
    let mut current: Option<ReceivedSpan> = None;
    let mut section = Section::None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("ResourceSpans #") {
            spans.extend(current.take());
            resource = BTreeMap::new();
            section = Section::None;
        } else if trimmed == "Resource attributes:" {
            section = Section::Resource;
        } else if trimmed.starts_with("ScopeSpans #") {
            spans.extend(current.take());
            section = Section::None;
        } else if trimmed.starts_with("Span #") {
            spans.extend(current.take());
            current = Some(ReceivedSpan { resource: resource.clone(), ..Default::default() });
            section = Section::None;
        } else if trimmed == "Attributes:" {
            section = Section::SpanAttributes;
        } else if trimmed == "Events:" {
            section = Section::Events;
        } else if let Some((k, v)) = trimmed.split_once(" : ").filter(|_| !trimmed.starts_with("->")) {
            if let Some(s) = current.as_mut() {
                match k.trim() {
                    "Trace ID" => s.trace_id = v.trim().to_owned(),
                    "Parent ID" => s.parent_id = v.trim().to_owned(),
                    "ID" => s.span_id = v.trim().to_owned(),
                    "Name" => s.name = v.trim().to_owned(),
                    "Kind" => s.kind = v.trim().to_owned(),
                    "Status code" => s.status_code = v.trim().to_owned(),
                    _ => {}
                }
            }
        } else if let Some(name) = trimmed.strip_suffix(" :").filter(|_| trimmed.contains("ID")) {
            // "Parent ID      :" with an empty value.
            if let Some(s) = current.as_mut() {
                if name.trim() == "Parent ID" {
                    s.parent_id.clear();
                }
            }
        } else if let Some((k, v)) = key_value(line) {
            match section {
                Section::Resource => {
                    resource.insert(k, v);
                }
                Section::SpanAttributes => {
                    if let Some(s) = current.as_mut() {
                        s.attributes.insert(k, v);
                    }
                }
                Section::Events if k == "Name" => {
                    if let Some(s) = current.as_mut() {
                        s.events.push(v);
                    }
                }
                _ => {}
            }
        }
    }
    spans.extend(current);
    spans
}

/// A TCP server on a free loopback port that accepts connections, reads what is sent and never
/// answers: a collector that hangs. Its threads live as long as the test process.
pub fn never_answering_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 16 * 1024];
                // Read (so the client's writes never block) until the client goes away.
                while std::io::Read::read(&mut stream, &mut buf).map(|n| n > 0).unwrap_or(false) {}
            });
        }
    });
    port
}

/// A plain HTTP/1.1 server on a free loopback port that answers every request with `response`
/// (a whole HTTP/1.1 response, head and body) and keeps the connection open unless the response
/// says `Connection: close` (then it closes as web servers do: its side first, reading what the
/// client still sends). Returns the port and the number of requests answered so far.
pub fn http_server(response: &'static str) -> (u16, Arc<std::sync::atomic::AtomicU64>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicU64, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicU64::new(0));
    let counter = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut pending: Vec<u8> = Vec::new();
                let mut buf = [0u8; 16 * 1024];
                loop {
                    // One request: the head, then Content-Length bytes of body.
                    let head_end = loop {
                        if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        match stream.read(&mut buf) {
                            Ok(n) if n > 0 => pending.extend_from_slice(&buf[..n]),
                            _ => return,
                        }
                    };
                    let head = String::from_utf8_lossy(&pending[..head_end]).to_ascii_lowercase();
                    let body_len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    while pending.len() < head_end + body_len {
                        match stream.read(&mut buf) {
                            Ok(n) if n > 0 => pending.extend_from_slice(&buf[..n]),
                            _ => return,
                        }
                    }
                    pending.drain(..head_end + body_len);
                    counter.fetch_add(1, Ordering::SeqCst);
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                    if response.to_ascii_lowercase().contains("connection: close") {
                        // A lingering close, as web servers do: the client reads the answer
                        // rather than a reset.
                        let _ = stream.shutdown(std::net::Shutdown::Write);
                        while stream.read(&mut buf).map(|n| n > 0).unwrap_or(false) {}
                        return;
                    }
                }
            });
        }
    });
    (port, requests)
}

/// The resource attributes of the last frame of the one recording in `dir`, as integers (the
/// counters) — what the recording says the totals are.
pub fn recording_counters(dir: &std::path::Path) -> BTreeMap<String, i64> {
    use ringtrace_core::otlp;
    let files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "one recording in {}: {files:?}", dir.display());
    let file = std::fs::File::open(&files[0]).unwrap();
    let replayed =
        ringtrace_subscriber::replay::replay(file, &mut |_, _| {}).expect("a well-formed recording");
    let process = replayed.process.expect("the recording has a process frame");
    let data = ringtrace_subscriber::encode::traces_data_of(&[], &process.resource, &process.attributes);
    let resource = data.resource_spans.into_iter().next().and_then(|rs| rs.resource).expect("a resource");
    resource
        .attributes
        .into_iter()
        .filter_map(|kv| match kv.value?.value? {
            otlp::any_value::Value::IntValue(v) => Some((kv.key, v)),
            _ => None,
        })
        .collect()
}

/// Every span in the recordings in `dir`.
pub fn recorded_spans(dir: &std::path::Path) -> Vec<ringtrace_core::otlp::Span> {
    let mut spans = Vec::new();
    for file in std::fs::read_dir(dir).unwrap() {
        let file = std::fs::File::open(file.unwrap().path()).unwrap();
        ringtrace_subscriber::replay::replay(file, &mut |batch, _| {
            spans.extend(batch.iter().map(ringtrace_subscriber::encode::span));
        })
        .expect("a well-formed recording");
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn parser_reads_rotel_output() {
        let text = "\
ResourceSpans #0
Resource SchemaURL: 
Resource attributes:
     -> service.name: Str(svc-a)
     -> process.pid: Int(42)
ScopeSpans #0
InstrumentationScope x 1
Span #0
    Trace ID       : 5b8efff798038103d269b633813fc60c
    Parent ID      : 
    ID             : eee19b7ec3c1b174
    Name           : op a
    Kind           : SPAN_KIND_CLIENT
Start time: 1544712660000000000
    Status code    : STATUS_CODE_ERROR
Attributes:
     -> request.id: Str(req-1)
     -> n: Int(7)
Events:
SpanEvent #0
     -> Name: ev one
     -> Attributes::
          -> level: Str(INFO)
Span #1
    Trace ID       : 5b8efff798038103d269b633813fc60c
    Parent ID      : eee19b7ec3c1b174
    ID             : eee19b7ec3c1b175
    Name           : child
    Kind           : SPAN_KIND_INTERNAL
    ";
        let spans = parse(text);
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[0].parent_id, "");
        assert_eq!(spans[0].attr("request.id"), Some("req-1"));
        assert_eq!(spans[0].attr("n"), Some("7"));
        assert_eq!(spans[0].attr("level"), None, "event attributes are not span attributes");
        assert_eq!(spans[0].events, ["ev one"]);
        assert_eq!(spans[0].status_code, "STATUS_CODE_ERROR");
        assert_eq!(spans[1].parent_id, "eee19b7ec3c1b174");
        assert_eq!(spans[1].res("process.pid"), Some("42"));
        assert_eq!(spans[1].name, "child");
    }
}
