use super::*;

/// A range-query answer as Prometheus 2.x gives it (labels as dcgm-exporter
/// sets them, aggregated by namespace and pod).
const SUCCESS: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[
 {"metric":{"namespace":"team-a","pod":"train-0"},"values":[[1700000000,"3"],[1700000060,"2.5"],[1700000120,"4"]]},
 {"metric":{"namespace":"team-a","pod":"train-1"},"values":[[1700000000,"88"],[1700000060,"91"]]},
 {"metric":{"namespace":"team-b"},"values":[[1700000000,"1"]]}
]}}"#;

#[test]
fn a_matrix_gives_samples_per_pod_in_milliseconds() {
    let m = parse_matrix(SUCCESS.as_bytes()).unwrap();
    assert_eq!(m.len(), 2, "the series without a pod label cannot be matched: skipped");
    assert_eq!(
        m[&("team-a".to_string(), "train-0".to_string())],
        vec![
            (1_700_000_000_000, 3.0),
            (1_700_000_060_000, 2.5),
            (1_700_000_120_000, 4.0)
        ]
    );
    assert_eq!(m[&("team-a".to_string(), "train-1".to_string())].len(), 2);
}

#[test]
fn an_empty_result_is_no_pods() {
    let m = parse_matrix(br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#).unwrap();
    assert!(m.is_empty());
}

#[test]
fn series_of_one_pod_per_gpu_are_averaged() {
    let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
     {"metric":{"namespace":"n","pod":"p","gpu":"0"},"values":[[10,"2"],[20,"4"]]},
     {"metric":{"namespace":"n","pod":"p","gpu":"1"},"values":[[10,"6"]]}]}}"#;
    let m = parse_matrix(body.as_bytes()).unwrap();
    assert_eq!(
        m[&("n".to_string(), "p".to_string())],
        vec![(10_000, 4.0), (20_000, 4.0)]
    );
}

#[test]
fn special_values_are_read_and_judged_unknown_later() {
    let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
     {"metric":{"namespace":"n","pod":"p"},"values":[[10,"NaN"],[20,"+Inf"]]}]}}"#;
    let m = parse_matrix(body.as_bytes()).unwrap();
    let s = &m[&("n".to_string(), "p".to_string())];
    assert!(s[0].1.is_nan() && s[1].1.is_infinite());
}

#[test]
fn an_error_answer_names_the_error() {
    let body = br#"{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected identifier"}"#;
    let e = parse_matrix(body).unwrap_err();
    assert!(matches!(e, PromError::Refused { .. }));
    assert_eq!(
        e.to_string(),
        "Prometheus refused the query (bad_data): 1:5: parse error: unexpected identifier"
    );
}

#[test]
fn non_json_and_wrong_shapes_are_malformed_with_where() {
    let e = parse_matrix(b"<html>502 Bad Gateway</html>").unwrap_err();
    assert!(
        e.to_string().contains("not JSON") && e.to_string().contains("502 Bad Gateway"),
        "{e}"
    );
    let e = parse_matrix(br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#).unwrap_err();
    assert!(e.to_string().contains("\"vector\", expected \"matrix\""), "{e}");
    let e = parse_matrix(
        br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"namespace":"n","pod":"p"},"values":[[1,"x"]]}]}}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("data.result[0].values[0]"), "{e}");
    let e = parse_matrix(br#"{"data":{}}"#).unwrap_err();
    assert!(e.to_string().contains("expected \"success\""), "{e}");
}

#[test]
fn a_huge_answer_parses_in_full() {
    // 2 000 pods × 31 samples: a 30-minute window at a 1-minute step.
    let mut body = String::from(r#"{"status":"success","data":{"resultType":"matrix","result":["#);
    for p in 0..2000 {
        if p > 0 {
            body.push(',');
        }
        body.push_str(&format!(r#"{{"metric":{{"namespace":"n","pod":"p{p}"}},"values":["#));
        let values: Vec<String> = (0..31).map(|i| format!(r#"[{},"{}"]"#, 1000 + i * 60, i % 7)).collect();
        body.push_str(&values.join(","));
        body.push_str("]}");
    }
    body.push_str("]}}");
    let m = parse_matrix(body.as_bytes()).unwrap();
    assert_eq!(m.len(), 2000);
    assert!(m.values().all(|s| s.len() == 31));
}

/// A one-shot HTTP server on loopback answering every request with
/// `status` and `body` (after `delay`); counts requests.
async fn serve(status: u16, body: Vec<u8>, delay: Duration) -> (String, std::sync::Arc<std::sync::atomic::AtomicU32>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = sock.read(&mut buf).await;
                tokio::time::sleep(delay).await;
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&body).await;
            });
        }
    });
    (url, hits)
}

fn settings(url: &str) -> PromSettings {
    PromSettings {
        timeout: Duration::from_millis(500),
        attempts: 2,
        ..PromSettings::new(url)
    }
}

#[tokio::test]
async fn a_query_reaches_the_server_and_is_parsed() {
    let (url, hits) = serve(200, SUCCESS.as_bytes().to_vec(), Duration::ZERO).await;
    let p = Prometheus::new(settings(&url)).unwrap();
    let m = p
        .query_range("avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL)", 0, 60_000, 60_000)
        .await
        .unwrap();
    assert_eq!(m.len(), 2);
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_server_error_is_retried_then_reported() {
    let (url, hits) = serve(503, b"overloaded".to_vec(), Duration::ZERO).await;
    let e = Prometheus::new(settings(&url))
        .unwrap()
        .query_range("up", 0, 1, 1)
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "Prometheus answered HTTP 503: overloaded");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 2, "retried once");
}

#[tokio::test]
async fn a_refused_query_is_not_retried() {
    let body = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#.to_vec();
    let (url, hits) = serve(400, body, Duration::ZERO).await;
    let e = Prometheus::new(settings(&url))
        .unwrap()
        .query_range("(", 0, 1, 1)
        .await
        .unwrap_err();
    assert!(matches!(e, PromError::Refused { .. }), "{e}");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let (url, _) = serve(200, SUCCESS.as_bytes().to_vec(), Duration::from_secs(5)).await;
    let s = PromSettings {
        attempts: 1,
        ..settings(&url)
    };
    let e = Prometheus::new(s)
        .unwrap()
        .query_range("up", 0, 1, 1)
        .await
        .unwrap_err();
    assert!(matches!(e, PromError::Timeout(_)), "{e}");
}

#[tokio::test]
async fn an_answer_over_the_cap_is_refused_whole() {
    let (url, _) = serve(200, SUCCESS.as_bytes().to_vec(), Duration::ZERO).await;
    let s = PromSettings {
        max_answer_bytes: 100,
        ..settings(&url)
    };
    let e = Prometheus::new(s)
        .unwrap()
        .query_range("up", 0, 1, 1)
        .await
        .unwrap_err();
    assert!(matches!(e, PromError::TooLarge(100)), "{e}");
}

#[tokio::test]
async fn nobody_listening_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let s = PromSettings {
        attempts: 1,
        ..settings(&url)
    };
    let e = Prometheus::new(s)
        .unwrap()
        .query_range("up", 0, 1, 1)
        .await
        .unwrap_err();
    assert!(matches!(e, PromError::Unreachable { .. }), "{e}");
}

#[test]
fn bad_urls_and_https_without_a_ca_are_refused_at_start() {
    assert!(matches!(
        Prometheus::new(PromSettings::new("prometheus:9090")),
        Err(PromError::BadUrl { .. })
    ));
    let e = Prometheus::new(PromSettings::new("https://prometheus:9090"))
        .err()
        .unwrap();
    assert!(e.to_string().contains("--prometheus-ca-file"), "{e}");
    let s = PromSettings {
        ca_file: Some("/nonexistent/ca.pem".into()),
        ..PromSettings::new("https://prometheus:9090")
    };
    let e = Prometheus::new(s).err().unwrap();
    assert!(e.to_string().starts_with("cannot read /nonexistent/ca.pem"), "{e}");
}

#[test]
fn the_query_is_form_encoded() {
    assert_eq!(
        encode(r#"avg by (namespace, pod) (X{a="b"})"#),
        "avg%20by%20%28namespace%2C%20pod%29%20%28X%7Ba%3D%22b%22%7D%29"
    );
    assert_eq!(seconds(1_700_000_000_123), "1700000000.123");
}

/// A CA and a certificate for 127.0.0.1 it signed: (CA PEM, cert PEM, key PEM).
fn loopback_certs() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

/// An HTTPS server on loopback answering SUCCESS only to `Bearer <token>`.
async fn serve_tls(cert_pem: &str, key_pem: &str, token: &'static str) -> String {
    use rustls::pki_types::PrivateKeyDer;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else { return };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(sock).await else {
                    return;
                };
                let mut buf = vec![0u8; 65536];
                let n = tls.read(&mut buf).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buf[..n]).to_lowercase();
                let (status, body) = if request.contains(&format!("authorization: bearer {token}")) {
                    (200, SUCCESS)
                } else {
                    (401, "Unauthorized")
                };
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = tls.write_all(head.as_bytes()).await;
                let _ = tls.write_all(body.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    url
}

#[tokio::test]
async fn https_with_a_given_ca_and_a_bearer_token() {
    let (ca, cert, key) = loopback_certs();
    let url = serve_tls(&cert, &key, "s3cret").await;
    let dir = std::env::temp_dir().join(format!("sluice-prom-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca_file, token_file) = (dir.join("ca.pem"), dir.join("token"));
    std::fs::write(&ca_file, ca).unwrap();
    std::fs::write(&token_file, "s3cret\n").unwrap();
    let with = |token: Option<std::path::PathBuf>| PromSettings {
        ca_file: Some(ca_file.clone()),
        token_file: token,
        attempts: 1,
        ..settings(&url)
    };
    let m = Prometheus::new(with(Some(token_file.clone())))
        .unwrap()
        .query_range("up", 0, 1, 1)
        .await
        .unwrap();
    assert_eq!(m.len(), 2);
    // Without the token: the server's 401, reported as such.
    let e = Prometheus::new(with(None))
        .unwrap()
        .query_range("up", 0, 1, 1)
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "Prometheus answered HTTP 401: Unauthorized");
    // A CA that did not sign the server's certificate: not trusted.
    let (other_ca, _, _) = loopback_certs();
    std::fs::write(&ca_file, other_ca).unwrap();
    let e = Prometheus::new(with(Some(token_file)))
        .unwrap()
        .query_range("up", 0, 1, 1)
        .await
        .unwrap_err();
    assert!(
        matches!(e, PromError::Unreachable { .. }) && e.to_string().contains("certificate"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_success_with_warnings_still_parses() {
    // Prometheus adds warnings to partial answers (e.g. a remote-read shard down).
    let body = r#"{"status":"success","warnings":["remote read: shard 2 unavailable"],
      "data":{"resultType":"matrix","result":[{"metric":{"namespace":"n","pod":"p"},"values":[[10,"1"]]}]}}"#;
    let m = parse_matrix(body.as_bytes()).unwrap();
    assert_eq!(
        m.len(),
        1,
        "what came is used; a pod it lacks is judged missing, never idle"
    );
}
