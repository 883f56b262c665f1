//! Traces fetched from a Jaeger query service (`GET /api/traces`), read like a Jaeger JSON file.
//!
//! [`fetch_jaeger`] asks `<endpoint>/api/traces?service=S&start=…&end=…&limit=N` — the query
//! Jaeger UI's search page sends, with the time window given as `end` = now and `start` =
//! now − lookback, in microseconds — and reads the response with the Jaeger reader
//! ([`read_jaeger_bytes`]). It speaks plain HTTP/1.1 over `std::net` (no TLS: put an
//! `https://` query service behind a port-forward or proxy), follows no redirects, accepts
//! `Content-Length`, chunked and close-delimited bodies, and gives up after the configured
//! timeout on connect, read and write. Every failure is a [`FetchError`] naming the URL.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{read_jaeger_bytes, ReadError};
use crate::model::Dataset;

/// The largest response body accepted: 1 GiB.
pub const MAX_RESPONSE_BYTES: u64 = 1 << 30;

/// A search for traces on a Jaeger query service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JaegerQuery {
    /// The query service's base URL, e.g. `http://localhost:16686` (a path prefix is kept).
    pub endpoint: String,
    /// The service whose traces to fetch.
    pub service: String,
    /// How far back from `end_unix_ns` to search.
    pub lookback_ns: u64,
    /// The most traces to fetch.
    pub limit: usize,
    /// The end of the search window, Unix nanoseconds.
    pub end_unix_ns: u64,
    /// Timeout for connecting, and for each read and write.
    pub timeout: Duration,
}

impl JaegerQuery {
    /// A search of `service`'s traces over the last hour, at most 20, ending now, with a 30 s
    /// timeout.
    pub fn new(endpoint: impl Into<String>, service: impl Into<String>) -> Self {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Self {
            endpoint: endpoint.into(),
            service: service.into(),
            lookback_ns: 3_600_000_000_000,
            limit: 20,
            end_unix_ns: u64::try_from(now.as_nanos()).unwrap_or(u64::MAX),
            timeout: Duration::from_secs(30),
        }
    }

    /// The full request URL.
    pub fn url(&self) -> String {
        format!("{}{}", self.endpoint.trim_end_matches('/'), self.path_and_query())
    }

    /// The request path below the endpoint, with its query string.
    fn path_and_query(&self) -> String {
        let end_us = self.end_unix_ns / 1000;
        let start_us = end_us.saturating_sub(self.lookback_ns / 1000);
        format!(
            "/api/traces?service={}&start={start_us}&end={end_us}&limit={}",
            percent_encode(&self.service),
            self.limit
        )
    }
}

/// Why traces could not be fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The endpoint is not an `http://host[:port][/path]` URL.
    #[error("{url}: {why}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// Connecting, sending or receiving failed.
    #[error("{url}: {doing}: {source}")]
    Io {
        /// The request URL.
        url: String,
        /// What was being done.
        doing: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The server answered with a status other than 200.
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        /// The request URL.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The response is not valid HTTP.
    #[error("{url}: bad HTTP response: {why}")]
    Response {
        /// The request URL.
        url: String,
        /// What was wrong.
        why: String,
    },
    /// The body is not a Jaeger document.
    #[error(transparent)]
    Read(#[from] ReadError),
}

/// Fetches the traces `query` selects and reads them into a [`Dataset`] whose processes' source
/// is the request URL.
pub fn fetch_jaeger(query: &JaegerQuery) -> Result<Dataset, FetchError> {
    let url = query.url();
    let target = Target::parse(&query.endpoint)?;
    let path_and_query = format!("{}{}", target.path_prefix, query.path_and_query());
    let body = get(&url, &target, &path_and_query, query.timeout)?;
    Ok(read_jaeger_bytes(Path::new(&url), &body)?)
}

/// Where to connect, parsed from an endpoint URL.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    host: String,
    port: u16,
    path_prefix: String,
}

impl Target {
    fn parse(endpoint: &str) -> Result<Target, FetchError> {
        let bad = |why: &str| FetchError::BadUrl { url: endpoint.to_owned(), why: why.to_owned() };
        let rest = match endpoint.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("https") => {
                return Err(bad(
                    "https is not supported; reach the query service over http (e.g. a port-forward)",
                ))
            }
            Some((scheme, _)) => {
                return Err(bad(&format!("unsupported scheme {scheme:?}; expected http://")))
            }
            None => return Err(bad("expected http://host[:port][/path]")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if path.contains(['?', '#']) {
            return Err(bad("the endpoint must not have a query or fragment"));
        }
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed.split_once(']').ok_or_else(|| bad("unclosed '[' in host"))?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() || host.contains('@') {
            return Err(bad("expected a host name or address"));
        }
        let port = match port {
            None => 80,
            Some(p) => p.parse().map_err(|_| bad(&format!("port {p:?} is not a number from 0 to 65535")))?,
        };
        Ok(Target { host: host.to_owned(), port, path_prefix: path.to_owned() })
    }
}

fn get(url: &str, target: &Target, path: &str, timeout: Duration) -> Result<Vec<u8>, FetchError> {
    let io = |doing: &'static str| move |source| FetchError::Io { url: url.to_owned(), doing, source };
    let addrs: Vec<_> =
        (target.host.as_str(), target.port).to_socket_addrs().map_err(io("resolving the host"))?.collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let mut stream = stream.ok_or_else(|| io("connecting")(last))?;
    stream.set_read_timeout(Some(timeout)).map_err(io("connecting"))?;
    stream.set_write_timeout(Some(timeout)).map_err(io("connecting"))?;
    let host = if target.host.contains(':') { format!("[{}]", target.host) } else { target.host.clone() };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{}\r\nAccept: application/json\r\nUser-Agent: ringtrace\r\nConnection: close\r\n\r\n",
        target.port
    );
    stream.write_all(request.as_bytes()).map_err(io("sending the request"))?;
    read_response(url, BufReader::new(stream))
}

/// Reads an HTTP/1.1 response; the body of a 200, or an error.
fn read_response(url: &str, input: impl BufRead) -> Result<Vec<u8>, FetchError> {
    let mut response = Response { url, input, line: String::new() };
    let status = response.status()?;
    let framing = response.headers()?;
    let body =
        if framing.chunked { response.chunked_body()? } else { response.body(framing.content_length)? };
    if status != 200 {
        let text = String::from_utf8_lossy(&body[..body.len().min(300)]).trim().to_owned();
        return Err(FetchError::Status { url: url.to_owned(), status, body: text });
    }
    Ok(body)
}

/// An HTTP response being read, and the line last read from it.
struct Response<'u, R> {
    url: &'u str,
    input: R,
    line: String,
}

/// How a response's body is delimited, from its headers.
struct Framing {
    /// `Content-Length`, if given.
    content_length: Option<u64>,
    /// `Transfer-Encoding` includes `chunked`.
    chunked: bool,
}

impl<R: BufRead> Response<'_, R> {
    fn bad(&self, why: String) -> FetchError {
        FetchError::Response { url: self.url.to_owned(), why }
    }

    fn io(url: &str, source: io::Error) -> FetchError {
        FetchError::Io { url: url.to_owned(), doing: "reading the response", source }
    }

    /// Reads a line of the head (or a chunk's size line) into `self.line`.
    fn read_line(&mut self) -> Result<(), FetchError> {
        self.line.clear();
        let url = self.url;
        let n = (&mut self.input).take(64 * 1024).read_line(&mut self.line).map_err(|e| Self::io(url, e))?;
        if n == 0 {
            return Err(self.bad("connection closed in the headers".into()));
        }
        if !self.line.ends_with('\n') {
            return Err(self.bad("header line too long".into()));
        }
        Ok(())
    }

    /// The status code of the status line.
    fn status(&mut self) -> Result<u16, FetchError> {
        self.read_line()?;
        let line = self.line.trim_end();
        let mut parts = line.splitn(3, ' ');
        let (version, status) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if !version.starts_with("HTTP/1.") {
            return Err(self.bad(format!("status line {line:?}")));
        }
        status.parse().map_err(|_| self.bad(format!("status line {line:?}")))
    }

    /// Reads the headers (at most 1000) up to the blank line; keeps those that delimit the body.
    fn headers(&mut self) -> Result<Framing, FetchError> {
        let mut framing = Framing { content_length: None, chunked: false };
        for _ in 0..1000 {
            self.read_line()?;
            let header = self.line.trim_end();
            if header.is_empty() {
                break;
            }
            let Some((name, value)) = header.split_once(':') else {
                return Err(self.bad(format!("header {header:?}")));
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                let length =
                    value.parse::<u64>().map_err(|_| self.bad(format!("Content-Length {value:?}")))?;
                framing.content_length = Some(length);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                framing.chunked = value.to_ascii_lowercase().split(',').any(|v| v.trim() == "chunked");
            }
        }
        Ok(framing)
    }

    /// A chunked body, up to its zero-size chunk.
    fn chunked_body(&mut self) -> Result<Vec<u8>, FetchError> {
        let mut body = Vec::new();
        loop {
            self.read_line()?;
            let size = self.line.trim_end().split(';').next().unwrap_or("").trim();
            let size = chunk_size(size).ok_or_else(|| self.bad(format!("chunk size {size:?}")))?;
            if size == 0 {
                return Ok(body);
            }
            if body.len() as u64 + size > MAX_RESPONSE_BYTES {
                return Err(self.bad(format!("body larger than {MAX_RESPONSE_BYTES} bytes")));
            }
            let start = body.len();
            let url = self.url;
            (&mut self.input).take(size).read_to_end(&mut body).map_err(|e| Self::io(url, e))?;
            if (body.len() - start) as u64 != size {
                return Err(self.bad("connection closed inside a chunk".into()));
            }
            self.read_line()?;
        }
    }

    /// A body of `Content-Length` bytes, or without it, up to the end of the connection.
    fn body(&mut self, length: Option<u64>) -> Result<Vec<u8>, FetchError> {
        let url = self.url;
        let too_large = || FetchError::Response {
            url: url.to_owned(),
            why: format!("body larger than {MAX_RESPONSE_BYTES} bytes"),
        };
        let mut body = Vec::new();
        match length {
            Some(n) if n > MAX_RESPONSE_BYTES => return Err(too_large()),
            Some(n) => {
                (&mut self.input).take(n).read_to_end(&mut body).map_err(|e| Self::io(url, e))?;
                if body.len() as u64 != n {
                    return Err(self.bad(format!("body ended after {} of {n} bytes", body.len())));
                }
            }
            None => {
                (&mut self.input)
                    .take(MAX_RESPONSE_BYTES + 1)
                    .read_to_end(&mut body)
                    .map_err(|e| Self::io(url, e))?;
                if body.len() as u64 > MAX_RESPONSE_BYTES {
                    return Err(too_large());
                }
            }
        }
        Ok(body)
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl fmt::Display for JaegerQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url())
    }
}

/// An HTTP chunk size: hex digits of either case, at least one, fitting in a `u64`.
fn chunk_size(digits: &str) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits
        .bytes()
        .try_fold(0u64, |v, b| v.checked_mul(16)?.checked_add(u64::from(ringtrace_core::hex::digit(b)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_are_hex_of_either_case_that_fit() {
        assert_eq!(chunk_size("1A"), Some(26));
        assert_eq!(chunk_size("1a"), Some(26));
        assert_eq!(chunk_size("000000000000000000ff"), Some(255), "leading zeros");
        assert_eq!(chunk_size("ffffffffffffffff"), Some(u64::MAX));
        for bad in ["", "+1", "1g", "10000000000000000", " 1"] {
            assert_eq!(chunk_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn urls_parse_and_errors_name_the_url() {
        let t = Target::parse("http://localhost:16686").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path_prefix.as_str()), ("localhost", 16686, ""));
        let t = Target::parse("HTTP://[::1]/jaeger/").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path_prefix.as_str()), ("::1", 80, "/jaeger"));
        for bad in ["https://h", "ftp://h", "localhost:16686", "http://:80", "http://h:99999", "http://h/x?y"]
        {
            let e = Target::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(bad), "{e}");
        }
    }

    #[test]
    fn query_url_encodes_the_service_and_the_window() {
        let mut q = JaegerQuery::new("http://h:1/", "my service/ü");
        q.end_unix_ns = 2_000_000_000_000;
        q.lookback_ns = 1_000_000_000_000;
        q.limit = 5;
        assert_eq!(
            q.url(),
            "http://h:1/api/traces?service=my%20service%2F%C3%BC&start=1000000000&end=2000000000&limit=5"
        );
    }

    #[test]
    fn responses_by_length_chunks_and_close() {
        let ok = |raw: &str| read_response("u", raw.as_bytes());
        assert_eq!(ok("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef").unwrap(), b"abc");
        assert_eq!(
            ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n")
                .unwrap(),
            b"abcde"
        );
        assert_eq!(ok("HTTP/1.0 200 OK\r\n\r\nall of it").unwrap(), b"all of it");
        let e = ok("HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nboom").unwrap_err();
        assert_eq!(e.to_string(), "u: HTTP 500: boom");
        for bad in [
            "",
            "SSH-2.0\r\n\r\n",
            "HTTP/1.1 200\r\nContent-Length: 9\r\n\r\nabc",
            "HTTP/1.1 200\r\nbad\r\n\r\n",
        ] {
            assert!(ok(bad).unwrap_err().to_string().starts_with("u: "), "{bad:?}");
        }
    }
}
