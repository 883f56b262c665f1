//! OTLP over TLS (feature `otlp-tls`): a TLS front (tokio-rustls, a certificate from a test CA)
//! before a real collector (`rotel-agent`, which has no TLS receiver), over gRPC and HTTP. The
//! custom CA given by path makes it work; without it the system roots do not trust the front and
//! the spans are counted as failed.
//!
//! Needs `rotel-agent`: `scripts/install-test-deps.sh`. Without it this test fails and says so.
#![cfg(feature = "otlp-tls")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ringtrace_subscriber::otlp::{OtlpConfig, OtlpSink, Protocol, RetryPolicy};
use ringtrace_subscriber::Builder;
use ringtrace_test_support::otlp_collector::Rotel;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tracing_subscriber::prelude::*;

/// A CA (its PEM) and a certificate for 127.0.0.1 signed by it (DER and key).
fn test_pki() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "ringtrace test CA");
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
    let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let mut leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    leaf.distinguished_name.push(rcgen::DnType::CommonName, "127.0.0.1");
    let leaf = leaf.signed_by(&leaf_key, &ca).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    (ca.pem(), leaf.der().clone(), key)
}

/// Serves TLS on a free loopback port, forwarding the plaintext to `backend`. Runs on its own
/// thread for the rest of the test process.
fn tls_front(
    backend: u16,
    alpn: &[u8],
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> SocketAddr {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    config.alpn_protocols = vec![alpn.to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(("127.0.0.1", backend)).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
    });
    addr
}

fn export_50(service: &str, config: OtlpConfig) -> ringtrace_subscriber::otlp::OtlpStats {
    let sink = OtlpSink::new(config).unwrap();
    let stats = sink.stats_handle();
    let (layer, guard) =
        Builder::new().node("node-tls").daemon(service).no_recording().sink(sink).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        for i in 0..50 {
            tracing::info_span!("over_tls", i).in_scope(|| {});
        }
    });
    guard.shutdown().unwrap();
    stats.stats()
}

#[test]
fn https_endpoints_with_a_custom_ca() {
    let rotel = Rotel::start();
    let (ca_pem, cert, key) = test_pki();
    let ca_path = std::env::temp_dir().join(format!("ringtrace-otlp-test-ca-{}.pem", std::process::id()));
    std::fs::write(&ca_path, ca_pem).unwrap();
    let grpc = tls_front(rotel.grpc_port, b"h2", cert.clone(), key.clone_key());
    let http = tls_front(rotel.http_port, b"http/1.1", cert, key);
    for (tag, protocol, front) in [("grpc", Protocol::Grpc, grpc), ("http", Protocol::HttpProtobuf, http)] {
        let endpoint = format!("https://127.0.0.1:{}", front.port());
        let service = format!("svc-tls-{tag}");
        let s = export_50(
            &service,
            OtlpConfig::new().endpoint(&endpoint).protocol(protocol).certificate(&ca_path),
        );
        assert_eq!((s.exported_spans, s.lost_spans()), (50, 0), "{tag}: {s}");
        let all = rotel.wait_for(Duration::from_secs(20), |all| {
            all.iter().filter(|r| r.res("service.name") == Some(service.as_str())).count() >= 50
        });
        assert_eq!(
            all.iter().filter(|r| r.res("service.name") == Some(service.as_str())).count(),
            50,
            "{tag}"
        );

        // Without the CA the front's certificate is not trusted: nothing is sent, all is counted.
        let untrusted = format!("{service}-untrusted");
        let s = export_50(
            &untrusted,
            OtlpConfig::new()
                .endpoint(&endpoint)
                .protocol(protocol)
                .flush_timeout(Duration::from_secs(10))
                .retry(RetryPolicy {
                    initial_backoff: Duration::from_millis(20),
                    max_backoff: Duration::from_millis(50),
                    max_elapsed: Duration::from_millis(300),
                }),
        );
        assert_eq!((s.exported_spans, s.failed_spans), (0, 50), "{tag}: {s}");
        assert!(rotel.spans().iter().all(|r| r.res("service.name") != Some(untrusted.as_str())));
    }
    let _ = std::fs::remove_file(&ca_path);
}
