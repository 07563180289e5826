//! The API calls of self-signed mode against a mocked API server: each step
//! asserts the method, path and body of the request and replies with a real
//! payload (the ApiServerVerifier pattern).

use std::time::Duration;

use axum::http::{Method, Request, Response, StatusCode};
use base64::Engine as _;
use kube::client::Body;
use serde_json::{Value, json};

use super::*;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

fn mock() -> (Client, Handle) {
    let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(svc, "default"), handle)
}

fn opts() -> SelfSignedOptions {
    SelfSignedOptions {
        namespace: "sluice-system".to_owned(),
        secret_name: "sluice-webhook-tls".to_owned(),
        names: certs::service_dns_names("sluice-webhook", "sluice-system"),
        configuration_name: "sluice".to_owned(),
        validity_days: 365,
        renew_before_days: 30,
    }
}

fn reply(status: StatusCode, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap()
}

fn not_found(kind: &str, name: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": format!("{kind} \"{name}\" not found"), "reason": "NotFound", "code": 404})
}

fn conflict() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": "already exists", "reason": "AlreadyExists", "code": 409})
}

/// Waits for the next request and checks method and path (with query).
async fn expect(
    handle: &mut Handle,
    method: Method,
    path: &str,
) -> (Value, tower_test::mock::SendResponse<Response<Body>>) {
    let (req, send) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .unwrap_or_else(|_| panic!("no request came for {method} {path}"))
        .expect("service dropped");
    assert_eq!(req.method(), method, "{}", req.uri());
    assert_eq!(req.uri().to_string(), path);
    let bytes = req.into_body().collect_bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (body, send)
}

const SECRET_PATH: &str = "/api/v1/namespaces/sluice-system/secrets/sluice-webhook-tls";

#[tokio::test]
async fn missing_secret_is_generated_and_created() {
    let (client, mut handle) = mock();
    let task = tokio::spawn(async move { ensure_secret(&client, &opts()).await });
    let (_, send) = expect(&mut handle, Method::GET, SECRET_PATH).await;
    send.send_response(reply(
        StatusCode::NOT_FOUND,
        &not_found("secrets", "sluice-webhook-tls"),
    ));
    let (body, send) = expect(
        &mut handle,
        Method::POST,
        "/api/v1/namespaces/sluice-system/secrets?&fieldManager=sluice-webhook",
    )
    .await;
    assert_eq!(body["type"], "kubernetes.io/tls");
    assert_eq!(body["metadata"]["name"], "sluice-webhook-tls");
    assert_eq!(
        body["metadata"]["annotations"][NAMES_ANNOTATION],
        opts().names.join(",")
    );
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        assert!(body["data"][key].is_string(), "{key}");
    }
    send.send_response(reply(StatusCode::CREATED, &body));
    let g = task.await.unwrap().unwrap();
    let stored: Secret = serde_json::from_value(body).unwrap();
    assert_eq!(usable_certs(&stored, &opts(), SystemTime::now()), Some(g));
}

#[tokio::test]
async fn usable_secret_is_reused_without_writes() {
    let g = certs::generate(&opts().names, SystemTime::now(), 365).unwrap();
    let stored = serde_json::to_value(secret_for(&opts(), &g)).unwrap();
    let (client, mut handle) = mock();
    let task = tokio::spawn(async move { ensure_secret(&client, &opts()).await });
    let (_, send) = expect(&mut handle, Method::GET, SECRET_PATH).await;
    send.send_response(reply(StatusCode::OK, &stored));
    assert_eq!(task.await.unwrap().unwrap(), g);
    // No further request was made (the client is gone with the task).
    assert!(handle.next_request().await.is_none());
}

#[tokio::test]
async fn expiring_or_wrong_names_are_replaced_with_the_resource_version() {
    // Expires in 10 days, renewal is 30 days before expiry.
    let g = certs::generate(&opts().names, SystemTime::now(), 10).unwrap();
    let mut stored = serde_json::to_value(secret_for(&opts(), &g)).unwrap();
    stored["metadata"]["resourceVersion"] = json!("42");
    let (client, mut handle) = mock();
    let task = tokio::spawn(async move { ensure_secret(&client, &opts()).await });
    let (_, send) = expect(&mut handle, Method::GET, SECRET_PATH).await;
    send.send_response(reply(StatusCode::OK, &stored));
    let (body, send) = expect(
        &mut handle,
        Method::PUT,
        &format!("{SECRET_PATH}?&fieldManager=sluice-webhook"),
    )
    .await;
    assert_eq!(body["metadata"]["resourceVersion"], "42");
    assert_ne!(body["data"]["tls.crt"], stored["data"]["tls.crt"]);
    send.send_response(reply(StatusCode::OK, &body));
    let fresh = task.await.unwrap().unwrap();
    assert_ne!(fresh.cert_pem, g.cert_pem);

    let other = SelfSignedOptions {
        names: vec!["other.svc".to_owned()],
        ..opts()
    };
    let secret: Secret = serde_json::from_value(stored).unwrap();
    assert!(usable_certs(&secret, &other, SystemTime::now()).is_none());
}

#[tokio::test]
async fn losing_the_create_race_uses_the_winners_certificate() {
    let winner = certs::generate(&opts().names, SystemTime::now(), 365).unwrap();
    let winner_secret = serde_json::to_value(secret_for(&opts(), &winner)).unwrap();
    let (client, mut handle) = mock();
    let task = tokio::spawn(async move { ensure_secret(&client, &opts()).await });
    let (_, send) = expect(&mut handle, Method::GET, SECRET_PATH).await;
    send.send_response(reply(
        StatusCode::NOT_FOUND,
        &not_found("secrets", "sluice-webhook-tls"),
    ));
    let (_, send) = expect(
        &mut handle,
        Method::POST,
        "/api/v1/namespaces/sluice-system/secrets?&fieldManager=sluice-webhook",
    )
    .await;
    send.send_response(reply(StatusCode::CONFLICT, &conflict()));
    let (_, send) = expect(&mut handle, Method::GET, SECRET_PATH).await;
    send.send_response(reply(StatusCode::OK, &winner_secret));
    assert_eq!(task.await.unwrap().unwrap(), winner);
}

fn recorded_mutating() -> Value {
    let path = crate::testing::fixtures_dir().join("mutatingwebhookconfiguration-service-ref-create-response.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    for w in v["webhooks"].as_array_mut().unwrap() {
        w["clientConfig"].as_object_mut().unwrap().remove("caBundle");
    }
    v["metadata"]["name"] = json!("sluice");
    v
}

#[tokio::test]
async fn ca_bundle_is_written_into_every_webhook_of_both_configurations() {
    let ca = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".to_vec();
    let b64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
    let (client, mut handle) = mock();
    let ca2 = ca.clone();
    let task = tokio::spawn(async move { patch_ca_bundles(&client, "sluice", &ca2).await });
    let mpath = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sluice";
    let vpath = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/sluice";
    let (_, send) = expect(&mut handle, Method::GET, mpath).await;
    let recorded = recorded_mutating();
    send.send_response(reply(StatusCode::OK, &recorded));
    let (body, send) = expect(
        &mut handle,
        Method::PUT,
        &format!("{mpath}?&fieldManager=sluice-webhook"),
    )
    .await;
    let hooks = body["webhooks"].as_array().unwrap();
    assert_eq!(hooks.len(), recorded["webhooks"].as_array().unwrap().len());
    for w in hooks {
        assert_eq!(w["clientConfig"]["caBundle"], b64);
    }
    // Everything else is sent back as read (resourceVersion included).
    assert_eq!(
        body["metadata"]["resourceVersion"],
        recorded["metadata"]["resourceVersion"]
    );
    assert_eq!(hooks[0]["objectSelector"], recorded["webhooks"][0]["objectSelector"]);
    send.send_response(reply(StatusCode::OK, &body));
    // The validating configuration already has it: no write.
    let mut validating = serde_json::to_value(crate::manifests::validating_configuration(
        &crate::manifests::ManifestOptions {
            ca_bundle: Some(ca.clone()),
            ..Default::default()
        },
    ))
    .unwrap();
    validating["metadata"]["resourceVersion"] = json!("7");
    let (_, send) = expect(&mut handle, Method::GET, vpath).await;
    send.send_response(reply(StatusCode::OK, &validating));
    assert_eq!(task.await.unwrap().unwrap(), 1);
}

#[tokio::test]
async fn missing_configuration_is_an_error_that_keep_retries() {
    let (client, mut handle) = mock();
    let c2 = client.clone();
    let err = {
        let task = tokio::spawn(async move { patch_ca_bundles(&c2, "sluice", b"ca").await });
        let (_, send) = expect(
            &mut handle,
            Method::GET,
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sluice",
        )
        .await;
        send.send_response(reply(
            StatusCode::NOT_FOUND,
            &not_found("mutatingwebhookconfigurations", "sluice"),
        ));
        task.await.unwrap().unwrap_err()
    };
    assert!(
        err.to_string().contains("reading MutatingWebhookConfiguration sluice"),
        "{err}"
    );

    // keep_ca_bundles retries after a failure instead of giving up.
    let serving = certs::generate(&opts().names, SystemTime::now(), 365).unwrap();
    let stored = serde_json::to_value(secret_for(&opts(), &serving)).unwrap();
    tokio::time::pause();
    let keeper = tokio::spawn(keep_ca_bundles(
        client,
        opts(),
        Arc::new(SwappableCert::default()),
        serving,
        Duration::from_secs(300),
    ));
    let mpath = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sluice";
    for _ in 0..2 {
        // Second round after the 1 s backoff.
        let (_, send) = expect(&mut handle, Method::GET, SECRET_PATH).await;
        send.send_response(reply(StatusCode::OK, &stored));
        let (_, send) = expect(&mut handle, Method::GET, mpath).await;
        send.send_response(reply(
            StatusCode::NOT_FOUND,
            &not_found("mutatingwebhookconfigurations", "sluice"),
        ));
    }
    keeper.abort();
}

#[tokio::test]
async fn a_replica_adopts_the_certificate_another_replica_stored() {
    // This replica serves A; another replica renewed the Secret to B. The
    // configurations hold A's CA (mutating) and B's CA plus an extra one
    // (validating).
    let a = certs::generate(&opts().names, SystemTime::now(), 365).unwrap();
    let b = certs::generate(&opts().names, SystemTime::now(), 365).unwrap();
    assert_ne!(a.ca_pem, b.ca_pem);
    let cert = Arc::new(SwappableCert::default());
    cert.set(crate::tls::certified_key_from_pem(a.cert_pem.as_bytes(), a.key_pem.as_bytes(), "a").unwrap());
    let (client, mut handle) = mock();
    let (cert2, a2) = (cert.clone(), a.clone());
    let task = tokio::spawn(async move {
        let mut serving = a2;
        let n = sync_once(&client, &opts(), &cert2, &mut serving).await;
        (n, serving)
    });
    let (_, send) = expect(&mut handle, Method::GET, SECRET_PATH).await;
    send.send_response(reply(
        StatusCode::OK,
        &serde_json::to_value(secret_for(&opts(), &b)).unwrap(),
    ));
    let mpath = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sluice";
    let vpath = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/sluice";
    let with_bundle = |mut v: Value, pem: &str| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
        for w in v["webhooks"].as_array_mut().unwrap() {
            w["clientConfig"]["caBundle"] = json!(b64);
        }
        v["metadata"]["resourceVersion"] = json!("7");
        v
    };
    let (_, send) = expect(&mut handle, Method::GET, mpath).await;
    send.send_response(reply(StatusCode::OK, &with_bundle(recorded_mutating(), &a.ca_pem)));
    let (body, send) = expect(
        &mut handle,
        Method::PUT,
        &format!("{mpath}?&fieldManager=sluice-webhook"),
    )
    .await;
    for w in body["webhooks"].as_array().unwrap() {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(w["clientConfig"]["caBundle"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            pem,
            b.ca_pem.as_bytes(),
            "the Secret's CA, not the one this replica had"
        );
    }
    send.send_response(reply(StatusCode::OK, &body));
    let validating = serde_json::to_value(crate::manifests::validating_configuration(&Default::default())).unwrap();
    let (_, send) = expect(&mut handle, Method::GET, vpath).await;
    send.send_response(reply(
        StatusCode::OK,
        &with_bundle(validating, &format!("{}{}", a.ca_pem, b.ca_pem)),
    ));
    let (n, serving) = task.await.unwrap();
    assert_eq!(n.unwrap(), 1, "the validating configuration already trusts B");
    assert_eq!(serving, b);
    let now = cert.get().unwrap();
    let want = crate::tls::certified_key_from_pem(b.cert_pem.as_bytes(), b.key_pem.as_bytes(), "b").unwrap();
    assert_eq!(now.cert, want.cert, "the serving certificate was swapped to B");
}

#[tokio::test]
async fn no_ca_bundle_is_written_when_the_secret_cannot_be_read() {
    let a = certs::generate(&opts().names, SystemTime::now(), 365).unwrap();
    let (client, mut handle) = mock();
    let task = tokio::spawn(async move {
        let mut serving = a;
        sync_once(&client, &opts(), &SwappableCert::default(), &mut serving).await
    });
    let (_, send) = expect(&mut handle, Method::GET, SECRET_PATH).await;
    send.send_response(reply(
        StatusCode::FORBIDDEN,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "forbidden", "reason": "Forbidden", "code": 403}),
    ));
    assert!(task.await.unwrap().is_err());
    // No configuration was read or written.
    let next = tokio::time::timeout(Duration::from_millis(100), handle.next_request()).await;
    assert!(
        !matches!(next, Ok(Some(_))),
        "unexpected request after the Secret read failed"
    );
}
