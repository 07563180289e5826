//! Throughput and latency of `/mutate/pods` over loopback TLS with
//! keep-alive: the real server and N client connections in one process.
//!
//! `cargo bench -p sluice-webhook --bench loopback [-- CONNECTIONS SECONDS]`
//! (defaults: 16 connections, 10 s). Target: ≥ 5 000 reviews/s and
//! p99 ≤ 5 ms on 2 cores.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use sluice_webhook::cache::MemoryView;
use sluice_webhook::certs::generate;
use sluice_webhook::config::WebhookConfig;
use sluice_webhook::metrics::Metrics;
use sluice_webhook::review::Reviewer;
use sluice_webhook::tls::{SwappableCert, certified_key_from_pem};

/// A recorded review from the repository's `tests/fixtures/`.
fn fixture() -> Vec<u8> {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/admissionreview-request-pod-create-gpu-requests-only.json");
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // Without its queue label: a pod the GPU fixes apply to (with it, the
    // pod waits for admission and is refused where there are no gates).
    let mut review: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    review["request"]["object"]["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("labels");
    serde_json::to_vec(&review).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let connections: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(16);
    let seconds: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    review_only();
    rt.block_on(bench(connections, Duration::from_secs(seconds)));
}

/// CPU cost of one review without HTTP or TLS (decode, rules, encode).
fn review_only() {
    let body = fixture();
    let r = Reviewer::new(
        WebhookConfig::default(),
        Arc::new(MemoryView::synced_with_nvidia_runtime_class()),
    );
    let n = 20_000;
    let start = Instant::now();
    for _ in 0..n {
        let reply = r.handle(sluice_webhook::review::Endpoint::MutatePods, &body).unwrap();
        assert!(!reply.fixes.is_empty());
    }
    let per = start.elapsed() / n;
    println!(
        "review only (/mutate/pods, recorded requests-only GPU pod, patched): {:.1} µs/review on one thread",
        per.as_secs_f64() * 1e6
    );
}

async fn bench(connections: usize, duration: Duration) {
    let g = generate(&["127.0.0.1".to_owned()], SystemTime::now(), 1).unwrap();
    let cert = Arc::new(SwappableCert::default());
    cert.set(certified_key_from_pem(g.cert_pem.as_bytes(), g.key_pem.as_bytes(), "bench").unwrap());
    let view = Arc::new(MemoryView::synced_with_nvidia_runtime_class());
    let running = sluice_webhook::server::spawn(
        "127.0.0.1:0".parse().unwrap(),
        Reviewer::new(WebhookConfig::default(), view.clone()),
        cert,
        Some(view),
        Arc::new(Metrics::new()),
    )
    .await
    .unwrap();
    let addr = running.addr;

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(g.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let tls = Arc::new(
        rustls::ClientConfig::builder_with_provider(sluice_webhook::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let body = Bytes::from(fixture());

    // Warm-up, then the measured run.
    for (label, d) in [("warm-up", Duration::from_secs(1)), ("measured", duration)] {
        let start = Instant::now();
        let deadline = start + d;
        let mut tasks = Vec::new();
        for _ in 0..connections {
            let tls = tls.clone();
            let body = body.clone();
            tasks.push(tokio::spawn(async move {
                let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                tcp.set_nodelay(true).unwrap();
                let stream = tokio_rustls::TlsConnector::from(tls)
                    .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
                    .await
                    .unwrap();
                let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .unwrap();
                tokio::spawn(conn);
                let mut latencies = Vec::with_capacity(100_000);
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let req = hyper::Request::post("/mutate/pods?timeout=5s")
                        .header("host", "127.0.0.1")
                        .header("content-type", "application/json")
                        .body(Full::new(body.clone()))
                        .unwrap();
                    let resp = send.send_request(req).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    let out = resp.into_body().collect().await.unwrap().to_bytes();
                    assert!(out.len() > 100);
                    latencies.push(t.elapsed());
                }
                latencies
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let elapsed = start.elapsed();
        if label == "warm-up" {
            continue;
        }
        all.sort();
        let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
        println!(
            "/mutate/pods over TLS, {connections} keep-alive connections, {:.1} s: {} reviews, {:.0} reviews/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            elapsed.as_secs_f64(),
            all.len(),
            all.len() as f64 / elapsed.as_secs_f64(),
            pct(0.50).as_secs_f64() * 1e3,
            pct(0.99).as_secs_f64() * 1e3,
            all.last().unwrap().as_secs_f64() * 1e3,
        );
    }
    running.stop().await;
}
