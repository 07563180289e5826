//! Helpers shared by the unit tests: recorded API payloads from
//! `shared/fixtures` (or `SLUICE_FIXTURES`).

use std::path::PathBuf;

use k8s_openapi::api::batch::v1::Job;
use serde_json::Value;

pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("SLUICE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"))
}

pub fn fixture(name: &str) -> Value {
    let path = fixtures_dir().join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

pub fn job_fixture(name: &str) -> Job {
    serde_json::from_value(fixture(name)).unwrap()
}
