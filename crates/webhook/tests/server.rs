//! The real server on 127.0.0.1 over real TLS, fed recorded AdmissionReview
//! bodies and variations.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use sluice_webhook::cache::MemoryView;
use sluice_webhook::certs::{GeneratedCerts, generate};
use sluice_webhook::config::WebhookConfig;
use sluice_webhook::metrics::Metrics;
use sluice_webhook::review::Reviewer;
use sluice_webhook::server::{self, Running};
use sluice_webhook::tls::{CertFiles, SwappableCert, certified_key_from_pem};

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A recorded payload from the repository's `tests/fixtures/`.
fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The recorded bare GPU pod without its queue label: one the GPU fixes
/// apply to (with the label it would wait for admission, and is refused
/// on a server without scheduling gates).
fn unqueued_pod() -> Vec<u8> {
    let mut review: Value =
        serde_json::from_slice(&fixture("admissionreview-request-pod-create-gpu-requests-only.json")).unwrap();
    review["request"]["object"]["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("labels");
    serde_json::to_vec(&review).unwrap()
}

fn certs() -> GeneratedCerts {
    generate(&["127.0.0.1".to_owned(), "localhost".to_owned()], SystemTime::now(), 30).unwrap()
}

fn client(ca_pem: &str, versions: &[&'static rustls::SupportedProtocolVersion]) -> HttpsClient {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let tls = rustls::ClientConfig::builder_with_provider(sluice_webhook::tls::provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(https)
}

async fn start(cert: Arc<SwappableCert>) -> Running {
    let view = Arc::new(MemoryView::synced_with_nvidia_runtime_class());
    let reviewer = Reviewer::new(WebhookConfig::default(), view.clone());
    server::spawn(
        "127.0.0.1:0".parse().unwrap(),
        reviewer,
        cert,
        Some(view),
        Arc::new(Metrics::new()),
    )
    .await
    .unwrap()
}

async fn started() -> (Running, HttpsClient) {
    let g = certs();
    let cert = Arc::new(SwappableCert::default());
    cert.set(certified_key_from_pem(g.cert_pem.as_bytes(), g.key_pem.as_bytes(), "test").unwrap());
    let running = start(cert).await;
    (running, client(&g.ca_pem, rustls::DEFAULT_VERSIONS))
}

async fn call(client: &HttpsClient, method: &str, url: String, body: Vec<u8>) -> Result<(u16, Vec<u8>), String> {
    let req = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = client.request(req).await.map_err(|e| format!("{e:?}"))?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, body.to_vec()))
}

fn patch_ops(body: &[u8]) -> Vec<Value> {
    let v: Value = serde_json::from_slice(body).unwrap();
    match v["response"]["patch"].as_str() {
        None => Vec::new(),
        Some(p) => serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(p).unwrap()).unwrap(),
    }
}

#[tokio::test]
async fn shutdown_fails_readyz_but_keeps_serving_for_the_grace_period() {
    let (running, c) = started().await;
    let addr = running.addr;
    let base = format!("https://127.0.0.1:{}", addr.port());
    assert_eq!(call(&c, "GET", format!("{base}/readyz"), vec![]).await.unwrap().0, 200);
    let state = running.state.clone();
    let stopping = tokio::spawn(running.shutdown(Duration::from_millis(800)));
    // Not ready at once, but reviews are still answered.
    let mut saw = false;
    for _ in 0..50 {
        if state.ready.draining.load(std::sync::atomic::Ordering::Acquire) {
            saw = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(saw, "draining was never set");
    let (status, body) = call(&c, "GET", format!("{base}/readyz"), vec![]).await.unwrap();
    assert_eq!(
        (status, String::from_utf8_lossy(&body).into_owned()),
        (503, "shutting down".to_owned())
    );
    let (status, resp) = call(
        &c,
        "POST",
        format!("{base}/mutate/pods"),
        fixture("admissionreview-request-pod-create-gpu-requests-only-before-jsonpatch.json"),
    )
    .await
    .unwrap();
    assert_eq!(status, 200);
    assert!(!patch_ops(&resp).is_empty());
    assert!(!stopping.is_finished(), "stopped before the grace period ended");
    tokio::time::timeout(Duration::from_secs(15), stopping)
        .await
        .unwrap()
        .unwrap();
    // Then the listener is closed.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn health_ready_and_metrics() {
    let (running, c) = started().await;
    let base = format!("https://127.0.0.1:{}", running.addr.port());
    assert_eq!(
        call(&c, "GET", format!("{base}/healthz"), vec![]).await.unwrap(),
        (200, b"ok".to_vec())
    );
    assert_eq!(call(&c, "GET", format!("{base}/readyz"), vec![]).await.unwrap().0, 200);
    let body = unqueued_pod();
    assert_eq!(
        call(&c, "POST", format!("{base}/mutate/pods?timeout=5s"), body)
            .await
            .unwrap()
            .0,
        200
    );
    let (status, text) = call(&c, "GET", format!("{base}/metrics"), vec![]).await.unwrap();
    assert_eq!(status, 200);
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("sluice_webhook_requests_total{endpoint=\"/mutate/pods\",result=\"patched\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("sluice_webhook_patches_total{fix=\"gpu_limits\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("sluice_webhook_request_duration_seconds_bucket"),
        "{text}"
    );
    running.stop().await;
}

#[tokio::test]
async fn not_ready_without_a_certificate() {
    let running = start(Arc::new(SwappableCert::default())).await;
    assert_eq!(running.state.ready.check(), Err("no serving certificate loaded"));
    running.stop().await;
}

#[tokio::test]
async fn recorded_reviews_over_tls() {
    let (running, c) = started().await;
    let base = format!("https://127.0.0.1:{}", running.addr.port());
    // (fixture, endpoint, expect a patch)
    let cases = [
        (
            "admissionreview-request-job-create-suspended.json",
            "/mutate/jobs",
            true,
        ),
        ("admissionreview-request-job-create-dryrun.json", "/mutate/jobs", true),
        (
            "admissionreview-request-job-create-gpu-requests-only.json",
            "/mutate/jobs",
            true,
        ),
        (
            "admissionreview-request-job-create-before-jsonpatch.json",
            "/mutate/jobs",
            true,
        ),
        (
            "admissionreview-request-pod-create-gpu-requests-only-before-jsonpatch.json",
            "/mutate/pods",
            true,
        ),
        (
            "admissionreview-request-pod-create-by-job-controller.json",
            "/mutate/pods",
            true,
        ),
        ("admissionreview-request-job-delete.json", "/validate/jobs", false),
        ("admissionreview-request-job-delete.json", "/mutate/jobs", false),
    ];
    for (name, path, patched) in cases {
        let body = fixture(name);
        let uid = serde_json::from_slice::<Value>(&body).unwrap()["request"]["uid"].clone();
        let (status, resp) = call(&c, "POST", format!("{base}{path}?timeout=5s"), body)
            .await
            .unwrap();
        assert_eq!(status, 200, "{name}");
        let v: Value = serde_json::from_slice(&resp).unwrap();
        assert_eq!(v["response"]["uid"], uid, "{name}");
        assert_eq!(v["response"]["allowed"], true, "{name}");
        assert_eq!(!patch_ops(&resp).is_empty(), patched, "{name}");
    }
    // The recorded bare pod carries the queue label: on a server without
    // scheduling gates it is refused, saying how to run it.
    let (status, resp) = call(
        &c,
        "POST",
        format!("{base}/mutate/pods"),
        fixture("admissionreview-request-pod-create-gpu-requests-only.json"),
    )
    .await
    .unwrap();
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&resp).unwrap();
    assert_eq!(v["response"]["allowed"], false);
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("spec.containers[0].resources.requests[nvidia.com/gpu]: a Pod that asks for a GPU must wait for admission here (it is labelled sluice.dev/queue=\"team-a\")"),
        "{msg}"
    );
    assert!(msg.contains("run it as a Job"), "{msg}");
    let (status, resp) = call(&c, "POST", format!("{base}/mutate/pods"), unqueued_pod())
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert!(!patch_ops(&resp).is_empty());
    // Fixture (d): alice unsuspends a queued Job; only the controller may.
    let (status, resp) = call(
        &c,
        "POST",
        format!("{base}/validate/jobs"),
        fixture("admissionreview-request-job-update-unsuspend.json"),
    )
    .await
    .unwrap();
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&resp).unwrap();
    assert_eq!(v["response"]["allowed"], false);
    let msg = v["response"]["status"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("spec.suspend: cannot be changed from true to false"),
        "{msg}"
    );
    // The recorded limits patch is part of ours.
    let (_, resp) = call(
        &c,
        "POST",
        format!("{base}/mutate/pods"),
        fixture("admissionreview-request-pod-create-gpu-requests-only-before-jsonpatch.json"),
    )
    .await
    .unwrap();
    let recorded: Vec<Value> =
        serde_json::from_slice(&fixture("jsonpatch-pod-gpu-requests-to-limits-decoded.json")).unwrap();
    let ours = patch_ops(&resp);
    for op in recorded {
        assert!(ours.contains(&op), "{op} not in {ours:?}");
    }
    running.stop().await;
}

#[tokio::test]
async fn bad_inputs_get_http_errors_with_messages() {
    let (running, c) = started().await;
    let base = format!("https://127.0.0.1:{}", running.addr.port());
    let (status, body) = call(
        &c,
        "POST",
        format!("{base}/mutate/pods"),
        b"{\"kind\": \"AdmissionRev".to_vec(),
    )
    .await
    .unwrap();
    assert_eq!(status, 400);
    assert!(
        String::from_utf8(body)
            .unwrap()
            .starts_with("malformed AdmissionReview")
    );

    let mut big = unqueued_pod();
    big.truncate(big.len() - 1);
    big.extend_from_slice(b", \"padding\": \"");
    big.extend(std::iter::repeat_n(b'x', 3 * 1024 * 1024));
    big.extend_from_slice(b"\"}");
    let (status, _) = call(&c, "POST", format!("{base}/mutate/pods"), big).await.unwrap();
    assert_eq!(status, 413);

    let (status, _) = call(&c, "POST", format!("{base}/mutate/cronjobs"), b"{}".to_vec())
        .await
        .unwrap();
    assert_eq!(status, 404);
    let (_, metrics) = call(&c, "GET", format!("{base}/metrics"), vec![]).await.unwrap();
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(
        metrics.contains("sluice_webhook_requests_total{endpoint=\"(unknown)\",result=\"not_found\"} 1"),
        "{metrics}"
    );

    // A wrong kind on an endpoint is allowed with a warning.
    let body = fixture("admissionreview-request-job-create-suspended.json");
    let (status, resp) = call(&c, "POST", format!("{base}/mutate/pods"), body).await.unwrap();
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&resp).unwrap();
    assert_eq!(v["response"]["allowed"], true);
    assert!(v["response"]["warnings"][0].as_str().unwrap().contains("batch/v1 Job"));

    // A denial: NVIDIA_VISIBLE_DEVICES without a GPU.
    let mut review: Value = serde_json::from_slice(&unqueued_pod()).unwrap();
    let c0 = &mut review["request"]["object"]["spec"]["containers"][0];
    c0["resources"] = json!({});
    c0["env"] = json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]);
    let (status, resp) = call(
        &c,
        "POST",
        format!("{base}/mutate/pods"),
        serde_json::to_vec(&review).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&resp).unwrap();
    assert_eq!(v["response"]["allowed"], false);
    assert_eq!(v["response"]["status"]["code"], 403);
    assert!(
        v["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("env[NVIDIA_VISIBLE_DEVICES]")
    );

    // The server still serves after all that.
    assert_eq!(call(&c, "GET", format!("{base}/healthz"), vec![]).await.unwrap().0, 200);
    running.stop().await;
}

#[tokio::test]
async fn tls12_and_tls13_clients_both_work() {
    let g = certs();
    let cert = Arc::new(SwappableCert::default());
    cert.set(certified_key_from_pem(g.cert_pem.as_bytes(), g.key_pem.as_bytes(), "t").unwrap());
    let running = start(cert).await;
    let base = format!("https://127.0.0.1:{}", running.addr.port());
    for versions in [&[&rustls::version::TLS12][..], &[&rustls::version::TLS13][..]] {
        let c = client(&g.ca_pem, versions);
        assert_eq!(call(&c, "GET", format!("{base}/healthz"), vec![]).await.unwrap().0, 200);
    }
    running.stop().await;
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-webhook-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test]
async fn a_rotation_before_the_watch_starts_is_not_missed() {
    let dir = temp_dir("stamps");
    let files = CertFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    };
    let first = certs();
    std::fs::write(&files.cert, &first.cert_pem).unwrap();
    std::fs::write(&files.key, &first.key_pem).unwrap();
    let cert = Arc::new(SwappableCert::default());
    cert.set(files.load().unwrap());
    // Rotated after the initial load, before the watch takes its stamps.
    let second = certs();
    std::fs::write(&files.cert, &second.cert_pem).unwrap();
    std::fs::write(&files.key, &second.key_pem).unwrap();
    let watcher = tokio::spawn(files.clone().watch(cert.clone(), Duration::from_secs(3600)));
    let want = certified_key_from_pem(second.cert_pem.as_bytes(), second.key_pem.as_bytes(), "t").unwrap();
    let mut served = false;
    for _ in 0..100 {
        if cert.get().is_some_and(|k| k.cert == want.cert) {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    watcher.abort();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(served, "the rotated certificate was never loaded");
}

#[tokio::test]
async fn certificate_files_are_reloaded_without_dropping_the_server() {
    let dir = temp_dir("reload");
    let files = CertFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    };
    let first = certs();
    std::fs::write(&files.cert, &first.cert_pem).unwrap();
    std::fs::write(&files.key, &first.key_pem).unwrap();
    let cert = Arc::new(SwappableCert::default());
    cert.set(files.load().unwrap());
    let watcher = tokio::spawn(files.clone().watch(cert.clone(), Duration::from_millis(50)));
    let running = start(cert).await;
    let base = format!("https://127.0.0.1:{}", running.addr.port());

    let old_client = client(&first.ca_pem, rustls::DEFAULT_VERSIONS);
    assert_eq!(
        call(&old_client, "GET", format!("{base}/healthz"), vec![])
            .await
            .unwrap()
            .0,
        200
    );
    let second = certs();
    let new_client = client(&second.ca_pem, rustls::DEFAULT_VERSIONS);
    assert!(
        call(&new_client, "GET", format!("{base}/healthz"), vec![])
            .await
            .is_err(),
        "new CA not trusted yet"
    );

    // A half-written rotation (garbage key) keeps the old certificate.
    std::fs::write(&files.key, b"not a key").unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let fresh_old = client(&first.ca_pem, rustls::DEFAULT_VERSIONS);
    assert_eq!(
        call(&fresh_old, "GET", format!("{base}/healthz"), vec![])
            .await
            .unwrap()
            .0,
        200
    );

    std::fs::write(&files.cert, &second.cert_pem).unwrap();
    std::fs::write(&files.key, &second.key_pem).unwrap();
    let mut ok = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let c = client(&second.ca_pem, rustls::DEFAULT_VERSIONS);
        if call(&c, "GET", format!("{base}/healthz"), vec![]).await.is_ok() {
            ok = true;
            break;
        }
    }
    assert!(ok, "new certificate never served");
    // The connection made before the rotation still works (keep-alive).
    assert_eq!(
        call(&old_client, "GET", format!("{base}/healthz"), vec![])
            .await
            .unwrap()
            .0,
        200
    );
    watcher.abort();
    running.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn many_requests_on_keep_alive_connections() {
    let (running, c) = started().await;
    let base = format!("https://127.0.0.1:{}", running.addr.port());
    let body = unqueued_pod();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let c = c.clone();
        let url = format!("{base}/mutate/pods");
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                assert_eq!(call(&c, "POST", url.clone(), body.clone()).await.unwrap().0, 200);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let text = running.state.metrics.encode();
    assert!(
        text.contains("sluice_webhook_requests_total{endpoint=\"/mutate/pods\",result=\"patched\"} 200"),
        "{text}"
    );
    running.stop().await;
}

#[tokio::test]
async fn run_wires_config_file_certificate_files_and_own_namespace() {
    use sluice_webhook::run::{CertSource, ServeOptions, run};
    let dir = temp_dir("run");
    let g = certs();
    std::fs::write(dir.join("tls.crt"), &g.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &g.key_pem).unwrap();
    std::fs::write(dir.join("config.yaml"), "gpu:\n  runtimeClassName: nvidia-cdi\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let opts = ServeOptions {
        listen: format!("127.0.0.1:{port}").parse().unwrap(),
        config: Some(dir.join("config.yaml")),
        namespace: "team-b".to_owned(),
        certs: CertSource::Files(CertFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }),
        reload_every: Duration::from_secs(1),
        watch_cluster: false,
        kueue_compat: false,
        controller_service_account: None,
        shutdown_grace: Duration::ZERO,
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run(opts, async move {
        let _ = rx.await;
    }));
    let c = client(&g.ca_pem, rustls::DEFAULT_VERSIONS);
    let base = format!("https://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..100 {
        if matches!(call(&c, "GET", format!("{base}/readyz"), vec![]).await, Ok((200, _))) {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(up, "never ready");
    // The configured runtime class is used...
    let (_, resp) = call(&c, "POST", format!("{base}/mutate/pods"), unqueued_pod())
        .await
        .unwrap();
    assert!(
        patch_ops(&resp)
            .iter()
            .any(|op| op["path"] == "/spec/runtimeClassName" && op["value"] == "nvidia-cdi")
    );
    // ...and the namespace Sluice runs in (team-b here) is never mutated.
    let (_, resp) = call(
        &c,
        "POST",
        format!("{base}/mutate/pods"),
        fixture("admissionreview-request-pod-create-gpu-requests-only-before-jsonpatch.json"),
    )
    .await
    .unwrap();
    assert!(patch_ops(&resp).is_empty());
    tx.send(()).unwrap();
    server.await.unwrap().unwrap();
    assert!(
        call(
            &client(&g.ca_pem, rustls::DEFAULT_VERSIONS),
            "GET",
            format!("{base}/healthz"),
            vec![]
        )
        .await
        .is_err(),
        "stopped"
    );
    let _ = std::fs::remove_dir_all(dir);
}
