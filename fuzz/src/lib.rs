//! The webhook's fuzz check, shared by the libFuzzer target
//! (`fuzz_targets/review.rs`) and the corpus test (`tests/corpus.rs`), which
//! replays the seeds, the kept corpus and every input that once failed.

use std::sync::{Arc, OnceLock};

use base64::Engine as _;
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

/// Every endpoint, in [`Endpoint::all`]'s order: an input's first byte
/// picks one (modulo their number). The first four are stable: 0
/// `/mutate/jobs`, 1 its default-queue path, 2 `/mutate/pods`, 3
/// `/validate/jobs`.
pub fn endpoints() -> &'static [Endpoint] {
    static E: OnceLock<Vec<Endpoint>> = OnceLock::new();
    E.get_or_init(Endpoint::all)
}

fn patch_of(body: &[u8]) -> Option<json_patch::Patch> {
    let v: Value = serde_json::from_slice(body).expect("response is JSON");
    let p = v["response"]["patch"].as_str()?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(p)
        .expect("patch is base64");
    Some(serde_json::from_slice(&raw).expect("patch is a JSON patch"))
}

/// One input: the first byte picks the endpoint, the rest is the body.
/// Panics if reviewing it panics, if a patch does not apply to the object
/// it was made for, or if a patched Pod reviewed again is patched again.
pub fn review(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let all = endpoints();
    let endpoint = all[usize::from(pick) % all.len()];
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
        let again = serde_json::to_vec(&again).expect("a JSON value serializes");
        if let Ok(second) = r.handle(endpoint, &again) {
            assert!(patch_of(&second.body).is_none(), "second review patched again");
        }
    }
}
