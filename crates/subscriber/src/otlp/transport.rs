//! OTLP/gRPC (tonic) and OTLP/HTTP (hyper, HTTP/1.1 keep-alive) clients. Both run on the
//! exporter thread's current-thread runtime.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use prost::Message;

use super::config::{Compression, Protocol, Settings};
use super::wire::{ExportTraceServiceResponse, GRPC_PATH};

/// A successful export.
#[derive(Debug, Default)]
pub(crate) struct Accepted {
    /// Spans the collector said it rejected (partial success).
    pub rejected_spans: u64,
    pub message: String,
}

/// A failed export attempt.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Worth retrying: the collector is unreachable, overloaded or restarting.
    Retryable { reason: String, retry_after: Option<Duration> },
    /// Retrying would fail the same way (bad request, unauthorised, not found, ...).
    Permanent(String),
}

impl Failure {
    fn retryable(reason: impl Into<String>) -> Self {
        Failure::Retryable { reason: reason.into(), retry_after: None }
    }

    pub fn reason(&self) -> &str {
        match self {
            Failure::Retryable { reason, .. } | Failure::Permanent(reason) => reason,
        }
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
    pub fn new(settings: &Settings) -> Result<Self, String> {
        match settings.protocol {
            Protocol::Grpc => GrpcClient::new(settings).map(Transport::Grpc),
            Protocol::HttpProtobuf => HttpClient::new(settings).map(Transport::Http),
        }
    }

    /// Turns an encoded request into the body to send (gzip for HTTP; gRPC compresses itself).
    pub fn prepare(&self, body: Vec<u8>) -> Bytes {
        match self {
            Transport::Http(h) if h.gzip => Bytes::from(gzip(&body)),
            _ => Bytes::from(body),
        }
    }

    pub async fn export(&mut self, body: Bytes) -> Result<Accepted, Failure> {
        match self {
            Transport::Grpc(g) => g.export(body).await,
            Transport::Http(h) => h.export(body).await,
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
}

impl GrpcClient {
    fn new(s: &Settings) -> Result<Self, String> {
        let endpoint = tonic::transport::Endpoint::from_shared(s.endpoint.to_string())
            .map_err(|e| format!("endpoint {}: {e}", s.endpoint))?
            .connect_timeout(s.timeout)
            .timeout(s.timeout)
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
        Ok(Self { grpc, metadata: tonic::metadata::MetadataMap::from_headers(headers) })
    }

    async fn export(&mut self, body: Bytes) -> Result<Accepted, Failure> {
        self.grpc
            .ready()
            .await
            .map_err(|e| Failure::retryable(format!("connecting: {}", error_chain(&e))))?;
        let mut request = tonic::Request::new(body);
        *request.metadata_mut() = self.metadata.clone();
        let path = http::uri::PathAndQuery::from_static(GRPC_PATH);
        match self.grpc.unary(request, path, RawCodec).await {
            Ok(response) => Ok(accepted(response.into_inner())),
            Err(status) => Err(grpc_failure(&status)),
        }
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

/// The retryable gRPC codes of the OTLP specification.
fn grpc_failure(status: &tonic::Status) -> Failure {
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
    match status.code() {
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::ResourceExhausted
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss => Failure::Retryable { reason, retry_after: None },
        // A transport error (connection reset, refused) surfaces as Unknown with a source.
        Code::Unknown if std::error::Error::source(status).is_some() => {
            Failure::Retryable { reason, retry_after: None }
        }
        _ => Failure::Permanent(reason),
    }
}

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
            .map_err(|e| tonic::Status::internal(format!("undecodable response: {e}")))
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
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| Failure::retryable(format!("connecting to {}:{}: {e}", self.host, self.port)))?;
        let _ = tcp.set_nodelay(true);
        #[cfg(feature = "otlp-tls")]
        if let Some((connector, name)) = &self.tls {
            let stream = connector
                .connect(name.clone(), tcp)
                .await
                .map_err(|e| Failure::retryable(format!("TLS handshake with {}: {e}", self.host)))?;
            return handshake(stream).await;
        }
        handshake(tcp).await
    }

    async fn export(&mut self, body: Bytes) -> Result<Accepted, Failure> {
        let reusable = match self.conn.as_mut() {
            Some(c) => !c.is_closed() && c.ready().await.is_ok(),
            None => false,
        };
        let mut sender = match self.conn.take() {
            Some(c) if reusable => c,
            _ => self.connect().await?,
        };
        let mut request = Request::post(self.uri.clone())
            .body(Full::new(body))
            .map_err(|e| Failure::Permanent(e.to_string()))?;
        *request.headers_mut() = self.headers.clone();
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| Failure::retryable(format!("sending: {}", error_chain(&e))))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let is_protobuf = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-protobuf"));
        let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES).collect().await;
        let body = match body {
            Ok(b) => {
                // The whole response was read: the connection can carry the next request.
                self.conn = Some(sender);
                b.to_bytes()
            }
            Err(_) => Bytes::new(),
        };
        if status.is_success() {
            let decoded = if is_protobuf { ExportTraceServiceResponse::decode(body).ok() } else { None };
            return Ok(decoded.map(accepted).unwrap_or_default());
        }
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).trim().to_owned();
        let reason = format!("HTTP {status}{}{text}", if text.is_empty() { "" } else { ": " });
        match status {
            StatusCode::TOO_MANY_REQUESTS
            | StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT => Err(Failure::Retryable { reason, retry_after }),
            _ => Err(Failure::Permanent(reason)),
        }
    }
}

async fn handshake<S>(stream: S) -> Result<Sender, Failure>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| Failure::retryable(format!("HTTP handshake: {e}")))?;
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
        for code in [
            Code::Unavailable,
            Code::ResourceExhausted,
            Code::DeadlineExceeded,
            Code::Aborted,
            Code::Cancelled,
        ] {
            assert!(matches!(grpc_failure(&Status::new(code, "x")), Failure::Retryable { .. }), "{code:?}");
        }
        for code in [
            Code::InvalidArgument,
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::Unimplemented,
            Code::Unknown,
        ] {
            assert!(matches!(grpc_failure(&Status::new(code, "x")), Failure::Permanent(_)), "{code:?}");
        }
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
