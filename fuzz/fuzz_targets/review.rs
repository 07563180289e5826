//! Review decoding and patch generation: any body, any endpoint, never a
//! panic; every patch applies to the object it was made for, and a patched
//! Pod reviewed again needs no further patch.
#![no_main]

use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use sluice_webhook::cache::MemoryView;
use sluice_webhook::config::WebhookConfig;
use sluice_webhook::review::{Endpoint, Reviewer};

fn reviewer() -> &'static Reviewer {
    static R: OnceLock<Reviewer> = OnceLock::new();
    R.get_or_init(|| {
        let view = MemoryView::synced_empty();
        view.upsert_namespace(
            "team-a",
            [("sluice.dev/default-queue".to_owned(), "enabled".to_owned())].into(),
        );
        view.upsert_local_queue("team-a", "default");
        Reviewer::new(WebhookConfig::default(), Arc::new(view))
    })
}

fn patch_of(body: &[u8]) -> Option<json_patch::Patch> {
    let v: Value = serde_json::from_slice(body).expect("response is JSON");
    let p = v["response"]["patch"].as_str()?;
    let raw = base64::engine::general_purpose::STANDARD.decode(p).expect("patch is base64");
    Some(serde_json::from_slice(&raw).expect("patch is a JSON patch"))
}

fuzz_target!(|data: &[u8]| {
    // First byte picks the endpoint, the rest is the body.
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let endpoint = Endpoint::ALL[usize::from(pick) % Endpoint::ALL.len()];
    let r = reviewer();
    let Ok(reply) = r.handle(endpoint, body) else {
        return;
    };
    let Some(patch) = patch_of(&reply.body) else {
        return;
    };
    // serde skips ignored members without validating every escape, so an
    // accepted body may still fail a strict parse: nothing to apply to then.
    let Ok(review) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let mut object = review["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).expect("patch applies to its object");
    if endpoint == Endpoint::MutatePods {
        let mut again = review.clone();
        again["request"]["object"] = object;
        let again = serde_json::to_vec(&again).unwrap();
        if let Ok(second) = r.handle(endpoint, &again) {
            assert!(patch_of(&second.body).is_none(), "second review patched again");
        }
    }
});
