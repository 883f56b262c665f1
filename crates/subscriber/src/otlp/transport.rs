//! OTLP/gRPC (tonic) and OTLP/HTTP (hyper, HTTP/1.1 keep-alive) clients. Both run on the
//! exporter thread's current-thread runtime.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use prost::Message;

use super::config::{Compression, Protocol, Settings};
use super::wire::{ExportTraceServiceResponse, RpcStatus, GRPC_PATH};

/// A successful export.
#[derive(Debug, Default)]
pub(crate) struct Accepted {
    /// Spans the collector said it rejected (partial success).
    pub rejected_spans: u64,
    pub message: String,
}

/// A failed export attempt.
#[derive(Debug)]
pub(crate) struct Failure {
    pub kind: FailureKind,
    pub reason: String,
    /// The server's `Retry-After`.
    pub retry_after: Option<Duration>,
}

/// What went wrong, which decides whether to retry and where the spans are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureKind {
    /// No connection: refused, no route, name not resolved, connect timed out. Retried.
    Unreachable,
    /// Connected, no answer within the timeout. Retried; the collector may have stored the
    /// spans, so giving up counts them as unconfirmed.
    Timeout,
    /// The connection broke during the request. Retried.
    Broken,
    /// An error status worth retrying (overloaded, restarting: HTTP 429/502/503/504, gRPC
    /// `UNAVAILABLE`, ...).
    Unavailable,
    /// An error status that retrying would not change (bad request, unauthorised): the
    /// collector refused the spans. Counted as rejected.
    Rejected,
    /// The server does not speak OTLP over this protocol (wrong port or protocol): counted as
    /// failed at once.
    WrongProtocol,
    /// Anything else that retrying would not change: counted as failed.
    Permanent,
}

impl FailureKind {
    pub(super) fn retryable(self) -> bool {
        matches!(
            self,
            FailureKind::Unreachable | FailureKind::Timeout | FailureKind::Broken | FailureKind::Unavailable
        )
    }
}

impl Failure {
    pub(super) fn new(kind: FailureKind, reason: impl Into<String>) -> Self {
        Failure { kind, reason: reason.into(), retry_after: None }
    }
}

const USER_AGENT: &str = concat!("ringtrace/", env!("CARGO_PKG_VERSION"));
/// Responses are small; a larger one is cut here.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

pub(crate) enum Transport {
    Grpc(GrpcClient),
    Http(HttpClient),
}

impl Transport {
    /// Must run inside the exporter's runtime (the gRPC channel spawns its worker task).
    pub(super) fn new(settings: &Settings) -> Result<Self, String> {
        match settings.protocol {
            Protocol::Grpc => GrpcClient::new(settings).map(Transport::Grpc),
            Protocol::HttpProtobuf => HttpClient::new(settings).map(Transport::Http),
        }
    }

    /// Turns an encoded request into the body to send (gzip for HTTP; gRPC compresses itself).
    pub(super) fn prepare(&self, body: Vec<u8>) -> Bytes {
        match self {
            Transport::Http(h) if h.gzip => Bytes::from(gzip(&body)),
            _ => Bytes::from(body),
        }
    }

    /// One attempt, bounded by `timeout`. `sent` is called once the request may reach the
    /// collector (HTTP: connected; gRPC: handed to the channel, which connects as needed).
    pub(super) async fn export(
        &mut self,
        body: Bytes,
        timeout: Duration,
        sent: &dyn Fn(),
    ) -> Result<Accepted, Failure> {
        match self {
            Transport::Grpc(g) => g.export(body, timeout, sent).await,
            Transport::Http(h) => h.export(body, timeout, sent).await,
        }
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc =
        flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 4), flate2::Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

fn accepted(r: ExportTraceServiceResponse) -> Accepted {
    match r.partial_success {
        Some(p) => Accepted {
            rejected_spans: u64::try_from(p.rejected_spans).unwrap_or(0),
            message: p.error_message,
        },
        None => Accepted::default(),
    }
}

// ---- gRPC ----

pub(crate) struct GrpcClient {
    grpc: tonic::client::Grpc<tonic::transport::Channel>,
    metadata: tonic::metadata::MetadataMap,
    /// For messages.
    endpoint: String,
}

impl GrpcClient {
    fn new(s: &Settings) -> Result<Self, String> {
        let endpoint = tonic::transport::Endpoint::from_shared(s.endpoint.to_string())
            .map_err(|e| format!("endpoint {}: {e}", s.endpoint))?
            // Under the attempt's own bound, so that a connect that hangs (a black-holed address)
            // is reported as unreachable rather than as a request without answer.
            .connect_timeout(s.timeout.mul_f64(0.9))
            .tcp_nodelay(true)
            .user_agent(USER_AGENT)
            .map_err(|e| e.to_string())?;
        #[cfg(feature = "otlp-tls")]
        let endpoint = if s.tls {
            let mut tls = tonic::transport::ClientTlsConfig::new().with_native_roots();
            if let Some(pem) = &s.ca_pem {
                tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(pem));
            }
            endpoint.tls_config(tls).map_err(|e| format!("TLS setup: {e}"))?
        } else {
            endpoint
        };
        let mut grpc = tonic::client::Grpc::new(endpoint.connect_lazy());
        if s.compression == Compression::Gzip {
            grpc = grpc.send_compressed(tonic::codec::CompressionEncoding::Gzip);
        }
        let mut headers = HeaderMap::new();
        for (k, v) in &s.headers {
            headers.insert(k.clone(), v.clone());
        }
        Ok(Self {
            grpc,
            metadata: tonic::metadata::MetadataMap::from_headers(headers),
            endpoint: s.endpoint_text.clone(),
        })
    }

    async fn export(&mut self, body: Bytes, timeout: Duration, sent: &dyn Fn()) -> Result<Accepted, Failure> {
        let call = async {
            self.grpc.ready().await.map_err(|e| {
                Failure::new(FailureKind::Unreachable, format!("connecting: {}", error_chain(&e)))
            })?;
            let mut request = tonic::Request::new(body);
            *request.metadata_mut() = self.metadata.clone();
            let path = http::uri::PathAndQuery::from_static(GRPC_PATH);
            sent();
            match self.grpc.unary(request, path, RawCodec).await {
                Ok(response) => Ok(accepted(response.into_inner())),
                Err(status) => Err(grpc_failure(&status, &self.endpoint)),
            }
        };
        tokio::time::timeout(timeout, call).await.unwrap_or_else(|_| {
            Err(Failure::new(FailureKind::Timeout, format!("no answer within {timeout:?}")))
        })
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}

/// Whether an error text says the connection was never made.
fn is_connect_error(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "tcp connect error",
        "error trying to connect",
        "connection refused",
        "dns error",
        "no route to host",
        "network is unreachable",
        "connect timed out",
        "timed out connecting",
        "failed to lookup address",
    ]
    .iter()
    .any(|m| t.contains(m))
}

/// Whether an error text says the peer does not speak HTTP/2 (an HTTP/1.1 server, or another
/// protocol altogether): what h2 reports when the answer to its preface is not HTTP/2 frames.
fn is_http2_framing_error(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "frame with invalid size",
        "frame_size_error",
        "protocol_error",
        "invalid preface",
        "http2 error: connection error",
        "connection error detected",
        "frame size",
        "unexpected frame",
    ]
    .iter()
    .any(|m| t.contains(m))
}

/// Classifies a gRPC failure: the retryable codes of the OTLP specification, transport errors by
/// what they say, and a framing error as a server that does not speak gRPC.
fn grpc_failure(status: &tonic::Status, endpoint: &str) -> Failure {
    use tonic::Code;
    let mut reason = format!("gRPC {:?}: {}", status.code(), status.message());
    let mut source = std::error::Error::source(status);
    while let Some(inner) = source {
        let text = inner.to_string();
        if !reason.contains(&text) {
            reason.push_str(": ");
            reason.push_str(&text);
        }
        source = inner.source();
    }
    let transport = std::error::Error::source(status).is_some();
    let kind = if is_http2_framing_error(&reason) {
        return Failure::new(
            FailureKind::WrongProtocol,
            format!("the server at {endpoint} does not speak gRPC ({reason})"),
        );
    } else if is_connect_error(&reason) {
        FailureKind::Unreachable
    } else {
        match status.code() {
            Code::DeadlineExceeded => FailureKind::Timeout,
            Code::Cancelled | Code::ResourceExhausted | Code::Aborted | Code::OutOfRange | Code::DataLoss => {
                FailureKind::Unavailable
            }
            // A transport error (connection reset) surfaces with a source.
            Code::Unavailable | Code::Unknown if transport => FailureKind::Broken,
            Code::Unavailable => FailureKind::Unavailable,
            // tonic's mapping of an HTTP 404 or of a server without the trace service.
            Code::Unimplemented => {
                return Failure::new(
                    FailureKind::WrongProtocol,
                    format!("the server at {endpoint} does not serve OTLP traces over gRPC ({reason})"),
                )
            }
            Code::Internal if status.message().starts_with(UNDECODABLE) => FailureKind::Permanent,
            _ => FailureKind::Rejected,
        }
    };
    Failure::new(kind, reason)
}

const UNDECODABLE: &str = "undecodable response";

/// Sends pre-encoded request bytes as they are; decodes the response with prost.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

struct RawEncoder;
struct ResponseDecoder;

impl tonic::codec::Codec for RawCodec {
    type Encode = Bytes;
    type Decode = ExportTraceServiceResponse;
    type Encoder = RawEncoder;
    type Decoder = ResponseDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        RawEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        ResponseDecoder
    }
}

impl tonic::codec::Encoder for RawEncoder {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, dst: &mut tonic::codec::EncodeBuf<'_>) -> Result<(), tonic::Status> {
        bytes::BufMut::put(dst, item);
        Ok(())
    }
}

impl tonic::codec::Decoder for ResponseDecoder {
    type Item = ExportTraceServiceResponse;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut tonic::codec::DecodeBuf<'_>) -> Result<Option<Self::Item>, tonic::Status> {
        ExportTraceServiceResponse::decode(src)
            .map(Some)
            .map_err(|e| tonic::Status::internal(format!("{UNDECODABLE}: {e}")))
    }
}

// ---- HTTP/protobuf ----

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

pub(crate) struct HttpClient {
    uri: Uri,
    host: String,
    port: u16,
    headers: HeaderMap,
    gzip: bool,
    #[cfg(feature = "otlp-tls")]
    tls: Option<(tokio_rustls::TlsConnector, tokio_rustls::rustls::pki_types::ServerName<'static>)>,
    conn: Option<Sender>,
}

impl HttpClient {
    fn new(s: &Settings) -> Result<Self, String> {
        let host = s.endpoint.host().ok_or("endpoint has no host")?.trim_matches(['[', ']']).to_owned();
        let port = s.endpoint.port_u16().unwrap_or(if s.tls { 443 } else { 80 });
        let mut headers = HeaderMap::new();
        for (k, v) in &s.headers {
            headers.insert(k.clone(), v.clone());
        }
        let authority = s.endpoint.authority().map(|a| a.as_str().to_owned()).unwrap_or_else(|| host.clone());
        headers.insert(
            header::HOST,
            authority.parse().map_err(|_| "endpoint authority is not a valid Host header")?,
        );
        headers.insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/x-protobuf"));
        headers.insert(header::USER_AGENT, http::HeaderValue::from_static(USER_AGENT));
        let gzip = s.compression == Compression::Gzip;
        if gzip {
            headers.insert(header::CONTENT_ENCODING, http::HeaderValue::from_static("gzip"));
        }
        let path = s.endpoint.path_and_query().map_or("/", |p| p.as_str());
        let uri: Uri = path.parse().map_err(|e| format!("endpoint path: {e}"))?;
        Ok(Self {
            uri,
            #[cfg(feature = "otlp-tls")]
            tls: if s.tls { Some(tls::connector(&host, s.ca_pem.as_deref())?) } else { None },
            host,
            port,
            headers,
            gzip,
            conn: None,
        })
    }

    async fn connect(&self) -> Result<Sender, Failure> {
        let unreachable = |what: String| Failure::new(FailureKind::Unreachable, what);
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| unreachable(format!("connecting to {}:{}: {e}", self.host, self.port)))?;
        let _ = tcp.set_nodelay(true);
        #[cfg(feature = "otlp-tls")]
        if let Some((connector, name)) = &self.tls {
            let stream = connector
                .connect(name.clone(), tcp)
                .await
                .map_err(|e| unreachable(format!("TLS handshake with {}: {e}", self.host)))?;
            return handshake(stream).await;
        }
        handshake(tcp).await
    }

    async fn export(&mut self, body: Bytes, timeout: Duration, sent: &dyn Fn()) -> Result<Accepted, Failure> {
        let deadline = tokio::time::Instant::now() + timeout;
        let reusable = match self.conn.as_mut() {
            Some(c) => !c.is_closed() && c.ready().await.is_ok(),
            None => false,
        };
        let mut sender = match self.conn.take() {
            Some(c) if reusable => c,
            _ => tokio::time::timeout_at(deadline, self.connect()).await.unwrap_or_else(|_| {
                Err(Failure::new(
                    FailureKind::Unreachable,
                    format!("connecting to {}:{}: no connection within {timeout:?}", self.host, self.port),
                ))
            })?,
        };
        let mut request = Request::post(self.uri.clone())
            .body(Full::new(body))
            .map_err(|e| Failure::new(FailureKind::Permanent, e.to_string()))?;
        *request.headers_mut() = self.headers.clone();
        sent();
        let exchange = async {
            let response = sender.send_request(request).await.map_err(|e| {
                let kind = if e.is_parse() { FailureKind::WrongProtocol } else { FailureKind::Broken };
                let mut reason = format!("sending: {}", error_chain(&e));
                if kind == FailureKind::WrongProtocol {
                    reason = format!(
                        "the server at {}:{} does not speak HTTP/1.1 (a gRPC port?): {reason}",
                        self.host, self.port
                    );
                }
                Failure::new(kind, reason)
            })?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES).collect().await;
            Ok::<_, Failure>((status, headers, body.map(|b| b.to_bytes()).ok()))
        };
        let (status, headers, body) =
            tokio::time::timeout_at(deadline, exchange).await.unwrap_or_else(|_| {
                Err(Failure::new(FailureKind::Timeout, format!("no answer within {timeout:?}")))
            })?;
        let body = match body {
            Some(b) => {
                // The whole response was read: the connection can carry the next request.
                self.conn = Some(sender);
                b
            }
            None => Bytes::new(),
        };
        http_outcome(status, &headers, body, &format!("{}:{}", self.host, self.port))
    }
}

/// What an OTLP/HTTP response means.
fn http_outcome(
    status: StatusCode,
    headers: &HeaderMap,
    body: Bytes,
    server: &str,
) -> Result<Accepted, Failure> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let is_protobuf = content_type.starts_with("application/x-protobuf");
    let is_html = content_type.starts_with("text/html") || body.trim_ascii_start().starts_with(b"<");
    if status.is_success() && !is_html {
        let decoded = if is_protobuf { ExportTraceServiceResponse::decode(body).ok() } else { None };
        return Ok(decoded.map(accepted).unwrap_or_default());
    }
    let text = if is_protobuf {
        RpcStatus::decode(body.clone()).map(|s| s.message).unwrap_or_default()
    } else {
        String::from_utf8_lossy(&body[..body.len().min(200)]).trim().to_owned()
    };
    let reason = format!("HTTP {status}{}{text}", if text.is_empty() { "" } else { ": " });
    let not_otlp = |reason: String| {
        Failure::new(
            FailureKind::WrongProtocol,
            format!("the server at {server} is not an OTLP/HTTP endpoint (wrong path or port?): {reason}"),
        )
    };
    if is_html || matches!(status, StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED) {
        return Err(not_otlp(reason));
    }
    let retry_after = headers
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let kind = match status {
        StatusCode::TOO_MANY_REQUESTS
        | StatusCode::BAD_GATEWAY
        | StatusCode::SERVICE_UNAVAILABLE
        | StatusCode::GATEWAY_TIMEOUT => FailureKind::Unavailable,
        _ => FailureKind::Rejected,
    };
    Err(Failure { kind, reason, retry_after })
}

async fn handshake<S>(stream: S) -> Result<Sender, Failure>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| Failure::new(FailureKind::Broken, format!("HTTP handshake: {e}")))?;
    tokio::spawn(async move {
        // Ends when the collector closes the connection or the sender is dropped.
        let _ = conn.await;
    });
    Ok(sender)
}

#[cfg(feature = "otlp-tls")]
mod tls {
    use std::sync::Arc;

    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

    /// A connector trusting the system roots plus `ca_pem`.
    pub(super) fn connector(
        host: &str,
        ca_pem: Option<&[u8]>,
    ) -> Result<(tokio_rustls::TlsConnector, ServerName<'static>), String> {
        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if let Some(pem) = ca_pem {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("CA certificate: {e}"))?;
                roots.add(cert).map_err(|e| format!("CA certificate: {e}"))?;
            }
        }
        if roots.is_empty() {
            return Err("no trusted root certificate: the system has none and no CA was given".into());
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = ServerName::try_from(host.to_owned()).map_err(|e| format!("{host}: {e}"))?;
        Ok((tokio_rustls::TlsConnector::from(Arc::new(config)), name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_codes_follow_the_otlp_retry_rules() {
        use tonic::{Code, Status};
        let kind = |code| grpc_failure(&Status::new(code, "x"), "http://c:4317").kind;
        for code in [Code::Unavailable, Code::ResourceExhausted, Code::Aborted, Code::Cancelled] {
            assert_eq!(kind(code), FailureKind::Unavailable, "{code:?}");
        }
        assert_eq!(kind(Code::DeadlineExceeded), FailureKind::Timeout);
        for code in [Code::InvalidArgument, Code::Unauthenticated, Code::PermissionDenied, Code::Unknown] {
            assert_eq!(kind(code), FailureKind::Rejected, "{code:?}");
        }
        assert_eq!(kind(Code::Unimplemented), FailureKind::WrongProtocol);
    }

    #[test]
    fn http_answers_that_are_not_otlp_are_permanent() {
        let html = |status: u16, body: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, http::HeaderValue::from_static("text/html"));
            http_outcome(
                StatusCode::from_u16(status).unwrap(),
                &h,
                Bytes::from_static(body.as_bytes()),
                "h:1",
            )
        };
        let f = html(200, "<html>welcome</html>").unwrap_err();
        assert_eq!(f.kind, FailureKind::WrongProtocol);
        assert!(f.reason.contains("not an OTLP/HTTP endpoint"), "{}", f.reason);
        assert_eq!(html(404, "<h1>Not Found</h1>").unwrap_err().kind, FailureKind::WrongProtocol);
        let status = RpcStatus { code: 3, message: "bad spans".into() }.encode_to_vec();
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/x-protobuf"));
        let f = http_outcome(StatusCode::BAD_REQUEST, &h, Bytes::from(status), "h:1").unwrap_err();
        assert_eq!((f.kind, f.reason.as_str()), (FailureKind::Rejected, "HTTP 400 Bad Request: bad spans"));
        let f = http_outcome(StatusCode::SERVICE_UNAVAILABLE, &HeaderMap::new(), Bytes::new(), "h:1")
            .unwrap_err();
        assert!(f.kind.retryable());
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read;
        let data: Vec<u8> = (0..10_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(gzip(&data).as_slice()).read_to_end(&mut out).unwrap();
        assert_eq!(out, data);
    }
}
