//! Helpers shared by the unit tests.

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value;

use crate::cache::ClusterView;
use crate::config::WebhookConfig;
use crate::review::Reviewer;

/// The repository's recorded API payloads (`tests/fixtures/`, see its
/// README), found from this crate's directory.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

pub fn fixture_bytes(name: &str) -> Vec<u8> {
    let path = fixtures_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn fixture(name: &str) -> Value {
    serde_json::from_slice(&fixture_bytes(name)).unwrap()
}

pub fn reviewer_with(view: Arc<dyn ClusterView>) -> Reviewer {
    Reviewer::new(WebhookConfig::default(), view)
}

/// The decoded JSON patch of an AdmissionReview response body (empty when
/// there is none).
pub fn patch_of(body: &[u8]) -> json_patch::Patch {
    let v: Value = serde_json::from_slice(body).unwrap();
    match v["response"]["patch"].as_str() {
        None => json_patch::Patch(Vec::new()),
        Some(b64) => {
            let raw = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
            serde_json::from_slice(&raw).unwrap()
        }
    }
}
