//! `--self-signed` mode: a CA and serving certificate kept in a Secret (so
//! every replica and every restart serves the same one), and the CA written
//! into the `caBundle` of Sluice's webhook configurations, retried until it
//! sticks and re-checked periodically (a Helm upgrade may reset it).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::Error;
use crate::certs::{self, GeneratedCerts};
use crate::tls::SwappableCert;

/// Annotation listing the names the stored certificate covers.
pub const NAMES_ANNOTATION: &str = "sluice.dev/certificate-names";
/// Annotation with the stored certificate's expiry (Unix seconds).
pub const NOT_AFTER_ANNOTATION: &str = "sluice.dev/certificate-not-after";

/// Where the certificate lives and what it is for.
#[derive(Clone, Debug)]
pub struct SelfSignedOptions {
    pub namespace: String,
    pub secret_name: String,
    /// DNS names (and IPs) the serving certificate must cover.
    pub names: Vec<String>,
    /// Name of the Mutating/ValidatingWebhookConfiguration to patch.
    pub configuration_name: String,
    pub validity_days: u32,
    /// Regenerate when fewer days than this remain.
    pub renew_before_days: u32,
}

fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// The Secret holding generated certificates.
pub fn secret_for(opts: &SelfSignedOptions, g: &GeneratedCerts) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(opts.secret_name.clone()),
            namespace: Some(opts.namespace.clone()),
            annotations: Some(BTreeMap::from([
                (NAMES_ANNOTATION.to_owned(), g.names.join(",")),
                (NOT_AFTER_ANNOTATION.to_owned(), g.not_after_unix.to_string()),
            ])),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "sluice".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(BTreeMap::from([
            ("ca.crt".to_owned(), ByteString(g.ca_pem.clone().into_bytes())),
            ("tls.crt".to_owned(), ByteString(g.cert_pem.clone().into_bytes())),
            ("tls.key".to_owned(), ByteString(g.key_pem.clone().into_bytes())),
        ])),
        ..Secret::default()
    }
}

/// The certificates in a Secret, if it holds a usable set for `opts` at `now`.
pub fn usable_certs(secret: &Secret, opts: &SelfSignedOptions, now: SystemTime) -> Option<GeneratedCerts> {
    let data = secret.data.as_ref()?;
    let text = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
    let annotations = secret.metadata.annotations.as_ref()?;
    let names: Vec<String> = annotations
        .get(NAMES_ANNOTATION)?
        .split(',')
        .map(str::to_owned)
        .collect();
    if !opts.names.iter().all(|n| names.contains(n)) {
        return None;
    }
    let not_after_unix: i64 = annotations.get(NOT_AFTER_ANNOTATION)?.parse().ok()?;
    let now_unix = now.duration_since(UNIX_EPOCH).ok()?.as_secs() as i64;
    if not_after_unix - now_unix < i64::from(opts.renew_before_days) * 86_400 {
        return None;
    }
    let g = GeneratedCerts {
        ca_pem: text("ca.crt")?,
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
        names,
        not_after_unix,
    };
    // The pair must load, or we would serve nothing.
    crate::tls::certified_key_from_pem(g.cert_pem.as_bytes(), g.key_pem.as_bytes(), "secret").ok()?;
    Some(g)
}

/// Reads the Secret, or generates and stores new certificates. When another
/// replica wins the race to write it, its certificates are used.
pub async fn ensure_secret(client: &Client, opts: &SelfSignedOptions) -> Result<GeneratedCerts, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &opts.namespace);
    let existing = api.get_opt(&opts.secret_name).await.map_err(kube_err(format!(
        "reading Secret {}/{}",
        opts.namespace, opts.secret_name
    )))?;
    if let Some(s) = &existing
        && let Some(g) = usable_certs(s, opts, SystemTime::now())
    {
        return Ok(g);
    }
    let g = certs::generate(&opts.names, SystemTime::now(), opts.validity_days)?;
    let mut secret = secret_for(opts, &g);
    let pp = PostParams {
        field_manager: Some("sluice-webhook".to_owned()),
        ..PostParams::default()
    };
    let written = match existing {
        None => api.create(&pp, &secret).await,
        Some(old) => {
            secret.metadata.resource_version = old.metadata.resource_version;
            api.replace(&opts.secret_name, &pp, &secret).await
        }
    };
    match written {
        Ok(_) => Ok(g),
        Err(e) if is_status(&e, 409) => {
            // Someone else wrote it first: use theirs.
            let s = api
                .get(&opts.secret_name)
                .await
                .map_err(kube_err("re-reading the certificate Secret after a conflict"))?;
            usable_certs(&s, opts, SystemTime::now()).ok_or_else(|| {
                Error::Other(format!(
                    "Secret {}/{} was written concurrently but holds no usable certificate",
                    opts.namespace, opts.secret_name
                ))
            })
        }
        Err(e) => Err(kube_err(format!(
            "writing Secret {}/{}",
            opts.namespace, opts.secret_name
        ))(e)),
    }
}

/// Whether a caBundle already holds `ca_pem` (it may hold other CAs too,
/// e.g. one an operator added for a rotation).
fn bundle_trusts(bundle: Option<&ByteString>, ca_pem: &[u8]) -> bool {
    let want = ca_pem.trim_ascii();
    bundle.is_some_and(|b| !want.is_empty() && b.0.windows(want.len()).any(|w| w == want))
}

/// Sets `caBundle` on every webhook of both configurations named `name`
/// unless it already holds `ca_pem`. Returns how many objects were updated
/// (0 when already right).
pub async fn patch_ca_bundles(client: &Client, name: &str, ca_pem: &[u8]) -> Result<usize, Error> {
    let mut updated = 0;
    let pp = PostParams {
        field_manager: Some("sluice-webhook".to_owned()),
        ..PostParams::default()
    };
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut m = mutating
        .get(name)
        .await
        .map_err(kube_err(format!("reading MutatingWebhookConfiguration {name}")))?;
    let mut changed = false;
    for w in m.webhooks.iter_mut().flatten() {
        if !bundle_trusts(w.client_config.ca_bundle.as_ref(), ca_pem) {
            w.client_config.ca_bundle = Some(ByteString(ca_pem.to_vec()));
            changed = true;
        }
    }
    if changed {
        mutating
            .replace(name, &pp, &m)
            .await
            .map_err(kube_err(format!("updating MutatingWebhookConfiguration {name}")))?;
        updated += 1;
    }
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mut v = validating
        .get(name)
        .await
        .map_err(kube_err(format!("reading ValidatingWebhookConfiguration {name}")))?;
    let mut changed = false;
    for w in v.webhooks.iter_mut().flatten() {
        if !bundle_trusts(w.client_config.ca_bundle.as_ref(), ca_pem) {
            w.client_config.ca_bundle = Some(ByteString(ca_pem.to_vec()));
            changed = true;
        }
    }
    if changed {
        validating
            .replace(name, &pp, &v)
            .await
            .map_err(kube_err(format!("updating ValidatingWebhookConfiguration {name}")))?;
        updated += 1;
    }
    Ok(updated)
}

/// One pass of [`keep_ca_bundles`]. The Secret is the source of truth:
/// when it holds another certificate than `serving` (another replica
/// renewed it, or lost a race and wrote its own), that certificate is
/// adopted and served; when it is missing or expiring, it is renewed. Only
/// then is the caBundle written, with the Secret's CA, so no replica ever
/// writes a caBundle without the CA stored in the Secret (and replicas
/// stop overwriting each other's CA). Nothing is written when the Secret
/// cannot be read.
pub async fn sync_once(
    client: &Client,
    opts: &SelfSignedOptions,
    cert: &SwappableCert,
    serving: &mut GeneratedCerts,
) -> Result<usize, Error> {
    let stored = ensure_secret(client, opts).await?;
    if stored != *serving {
        let key = crate::tls::certified_key_from_pem(
            stored.cert_pem.as_bytes(),
            stored.key_pem.as_bytes(),
            &opts.secret_name,
        )?;
        cert.set(key);
        tracing::info!(
            secret = %format!("{}/{}", opts.namespace, opts.secret_name),
            "serving the certificate now stored in the Secret"
        );
        *serving = stored;
    }
    patch_ca_bundles(client, &opts.configuration_name, serving.ca_pem.as_bytes()).await
}

/// Keeps the serving certificate and the caBundles right forever (see
/// [`sync_once`]): retries failures with backoff (1 s doubling to 60 s) and
/// re-checks every `every` after a success.
pub async fn keep_ca_bundles(
    client: Client,
    opts: SelfSignedOptions,
    cert: Arc<SwappableCert>,
    mut serving: GeneratedCerts,
    every: Duration,
) {
    let mut backoff = Duration::from_secs(1);
    loop {
        match sync_once(&client, &opts, &cert, &mut serving).await {
            Ok(n) => {
                if n > 0 {
                    tracing::info!(configuration = %opts.configuration_name, updated = n, "caBundle written");
                }
                backoff = Duration::from_secs(1);
                tokio::time::sleep(every).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "could not sync the certificate Secret or caBundle; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(60));
            }
        }
    }
}

#[cfg(test)]
mod tests;
