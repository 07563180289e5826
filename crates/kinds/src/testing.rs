//! Helpers shared by unit tests (here and in the controller): recorded API
//! payloads from the repository's `tests/fixtures/`, and a flavor.

use std::path::PathBuf;

use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};
use sluice_api::v1alpha1::ResourceFlavor;

/// The repository's recorded API payloads (`tests/fixtures/`, see its
/// README), found from this crate's directory.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

pub fn fixture(name: &str) -> Value {
    let path = fixtures_dir().join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

pub fn job_fixture(name: &str) -> Job {
    serde_json::from_value(fixture(name)).unwrap()
}

/// A GPU flavor labelled `gpu: <name>` that tolerates the GPU taint.
pub fn flavor(name: &str) -> ResourceFlavor {
    serde_json::from_value(json!({
        "apiVersion": "sluice.dev/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": name},
        "spec": {"nodeLabels": {"gpu": name},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    }))
    .unwrap()
}

/// `obj` with `patches` applied in order, as the API server applies them.
#[cfg(test)]
pub fn apply_patches(obj: &Value, patches: &[(bool, crate::ObjPatch)]) -> Value {
    let mut v = obj.clone();
    for (_, p) in patches {
        match p {
            crate::ObjPatch::Merge(m) => json_patch::merge(&mut v, m),
            crate::ObjPatch::Json(ops) => {
                let ops: json_patch::Patch = serde_json::from_value(ops.clone()).unwrap();
                json_patch::patch(&mut v, &ops).unwrap();
            }
        }
    }
    v
}
