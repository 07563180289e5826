//! The harness's API calls: server-side apply with field manager
//! [`FIELD_MANAGER`], a time limit on every call, retries of what may pass
//! on a second try, and cleanup by label.

use std::future::Future;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, Resource};
use serde_json::{Value, json};
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use sluice_controller::limit::Limiter;
use sluice_controller::writer::CALL_TIMEOUT;

use super::plan::{FIELD_MANAGER, Object, Plan, RUN_LABEL};

/// Tries of a call that failed in a way worth retrying.
const TRIES: u32 = 5;

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    Api(kube::Error),
    Timeout,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Api(e) => e.fmt(f),
            CallError::Timeout => write!(f, "no answer within {}s", CALL_TIMEOUT.as_secs()),
        }
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CallError::Api(e) => e.source(),
            CallError::Timeout => None,
        }
    }
}

impl CallError {
    /// Worth another try: a timeout, a transport error, 429, 5xx, or a 409
    /// (a conflict an apply with force does not have, but an object being
    /// deleted and re-created may).
    pub fn transient(&self) -> bool {
        match self {
            CallError::Timeout => true,
            CallError::Api(kube::Error::Api(s)) => s.code == 429 || s.code == 409 || s.code >= 500,
            // A body that does not serialize, or an answer that does not
            // decode, is the same on every try.
            CallError::Api(kube::Error::SerdeError(_)) => false,
            CallError::Api(_) => true,
        }
    }

    /// The HTTP status, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            CallError::Api(kube::Error::Api(s)) => Some(s.code),
            _ => None,
        }
    }
}

/// One call with the controller's time limit.
pub async fn call<T>(f: impl Future<Output = Result<T, kube::Error>>) -> Result<T, CallError> {
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(r) => r.map_err(CallError::Api),
        Err(_) => Err(CallError::Timeout),
    }
}

/// `f` until it succeeds, fails for good, or [`TRIES`] tries (backoff 200 ms,
/// doubling).
pub async fn retry<T, F, Fut>(mut f: F) -> Result<T, CallError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, CallError>>,
{
    let mut wait = Duration::from_millis(200);
    let mut tries = 0;
    loop {
        tries += 1;
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if e.transient() && tries < TRIES => {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            Err(e) => return Err(e),
        }
    }
}

fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// Untyped API of a Sluice kind: the server's answer need not fit our types.
fn dynamic<K: Resource<DynamicType = ()>>(client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
    let ar = ApiResource::erase::<K>(&());
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// Server-side apply of `obj` (the whole object, as ours).
pub async fn apply(api: &Api<DynamicObject>, name: &str, obj: &Value) -> Result<(), CallError> {
    let (params, patch) = (apply_params(), Patch::Apply(obj));
    retry(|| call(api.patch(name, &params, &patch))).await.map(drop)
}

/// [`apply`], each try waiting for a token of `limiter` first.
pub async fn apply_limited(
    api: &Api<DynamicObject>,
    name: &str,
    obj: &Value,
    limiter: &Limiter,
) -> Result<(), CallError> {
    let (params, patch) = (apply_params(), Patch::Apply(obj));
    retry(|| async {
        limiter.acquire().await;
        call(api.patch(name, &params, &patch)).await
    })
    .await
    .map(drop)
}

/// Server-side apply of `status` on `/status`.
pub async fn apply_status(api: &Api<DynamicObject>, name: &str, body: &Value) -> Result<(), CallError> {
    call(api.patch_status(name, &apply_params(), &Patch::Apply(body)))
        .await
        .map(drop)
}

/// The run's Namespace object.
/// A server-side apply of one Workload status condition (the harness's
/// field manager owns only that list entry: conditions are keyed by type).
pub fn condition_apply_body(
    namespace: &str,
    name: &str,
    condition: k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition,
) -> Value {
    serde_json::json!({
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"conditions": [condition]},
    })
}

pub fn namespace_object(run_id: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {RUN_LABEL: run_id}},
    })
}

/// Applies a namespace.
pub async fn apply_namespace(client: &Client, run_id: &str, name: &str) -> Result<()> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::erase::<Namespace>(&()));
    apply(&api, name, &namespace_object(run_id, name))
        .await
        .with_context(|| format!("creating namespace {name}"))
}

/// Setup calls in flight at once.
const SETUP_CONCURRENCY: usize = 16;

/// Applies objects of one kind, [`SETUP_CONCURRENCY`] at a time.
async fn apply_all(
    client: &Client,
    kind: &str,
    objects: &[Object],
    api: impl Fn(&Client, Option<&str>) -> Api<DynamicObject>,
) -> Result<()> {
    futures::stream::iter(objects)
        .map(|o| {
            let api = api(client, o.namespace.as_deref());
            async move {
                apply(&api, &o.name, &o.body).await.with_context(|| match &o.namespace {
                    Some(ns) => format!("creating {kind} {ns}/{}", o.name),
                    None => format!("creating {kind} {}", o.name),
                })
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// Applies the run's namespaces, flavors, cluster queues and local queues,
/// each kind after the ones it refers to.
pub async fn apply_setup(client: &Client, plan: &Plan) -> Result<()> {
    let namespaces: Vec<Object> = plan
        .namespaces
        .iter()
        .map(|ns| Object {
            namespace: None,
            name: ns.clone(),
            body: namespace_object(&plan.run_id, ns),
        })
        .collect();
    apply_all(client, "Namespace", &namespaces, |c, _| {
        Api::all_with(c.clone(), &ApiResource::erase::<Namespace>(&()))
    })
    .await?;
    apply_all(client, "ResourceFlavor", &plan.flavors, dynamic::<ResourceFlavor>).await?;
    apply_all(client, "ClusterQueue", &plan.cluster_queues, dynamic::<ClusterQueue>).await?;
    apply_all(client, "LocalQueue", &plan.local_queues, dynamic::<LocalQueue>).await
}

/// The API of Workloads in `namespace`.
pub fn workloads(client: &Client, namespace: &str) -> Api<DynamicObject> {
    dynamic::<Workload>(client, Some(namespace))
}

/// The API of Workloads in every namespace (for the watch).
pub fn all_workloads(client: &Client) -> Api<DynamicObject> {
    dynamic::<Workload>(client, None)
}

/// Every Workload of run `run_id` in every namespace, listed in pages of
/// 500; the objects that do not read as Workloads are counted, not
/// returned.
pub async fn run_workloads(client: &Client, run_id: &str) -> Result<(Vec<Workload>, usize)> {
    let api = all_workloads(client);
    let mut lp = ListParams::default().labels(&selector(Some(run_id))).limit(500);
    let (mut out, mut unreadable) = (Vec::new(), 0);
    loop {
        let page = retry(|| call(api.list(&lp)))
            .await
            .context("listing the run's Workloads")?;
        for o in page.items {
            match serde_json::to_value(o).and_then(serde_json::from_value::<Workload>) {
                Ok(wl) => out.push(wl),
                Err(_) => unreadable += 1,
            }
        }
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return Ok((out, unreadable)),
        }
    }
}

/// Waits until the controller has written the `Active` condition of one of
/// the run's ClusterQueues: it runs, leads, and watches them.
pub async fn wait_for_controller(client: &Client, plan: &Plan, timeout: Duration) -> Result<()> {
    let api = dynamic::<ClusterQueue>(client, None);
    let lp = ListParams::default().labels(&selector(Some(&plan.run_id)));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let list = call(api.list(&lp)).await;
        if let Ok(list) = &list {
            let active = list.items.iter().any(|cq| {
                cq.data["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Active" && c["status"] == "True"))
            });
            if active {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            let last = list.err().map(|e| format!(" (last error: {e})")).unwrap_or_default();
            bail!(
                "no ClusterQueue of this run became Active within {}s{last}: is `sluice controller` running against this cluster (and holding its Lease)?",
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The label selector of a run's objects (of every run without an id).
pub fn selector(run_id: Option<&str>) -> String {
    match run_id {
        Some(id) => format!("{RUN_LABEL}={id}"),
        None => RUN_LABEL.to_string(),
    }
}

/// Fails when objects labelled with `run_id` already exist (a run id used
/// before and not cleaned up): a run must start from nothing.
pub async fn ensure_fresh(client: &Client, run_id: &str) -> Result<()> {
    let lp = ListParams::default().labels(&selector(Some(run_id)));
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let queues = dynamic::<ClusterQueue>(client, None);
    let mut left: Vec<String> = retry(|| call(namespaces.list_metadata(&lp)))
        .await
        .context("listing namespaces")?
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name.map(|n| format!("namespace {n}")))
        .collect();
    left.extend(
        retry(|| call(queues.list_metadata(&lp)))
            .await
            .context("listing ClusterQueues")?
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name.map(|n| format!("ClusterQueue {n}"))),
    );
    if !left.is_empty() {
        bail!(
            "run id {run_id} is in use: {} (and maybe more) labelled {} exist; delete them with `sluice bench cleanup --run-id {run_id}` (namespaces take a while to go) or choose another --run-id",
            left.into_iter().take(3).collect::<Vec<_>>().join(", "),
            selector(Some(run_id))
        );
    }
    Ok(())
}

/// Namespaces of any bench run that are being deleted (their Workloads
/// still going).
pub async fn terminating_namespaces(client: &Client) -> Result<Vec<String>> {
    let lp = ListParams::default().labels(&selector(None));
    let namespaces: Api<Namespace> = Api::all(client.clone());
    Ok(retry(|| call(namespaces.list_metadata(&lp)))
        .await
        .context("listing the namespaces of earlier bench runs")?
        .items
        .into_iter()
        .filter(|o| o.metadata.deletion_timestamp.is_some())
        .filter_map(|o| o.metadata.name)
        .collect())
}

/// What [`delete_run`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deleted {
    pub namespaces: usize,
    pub cluster_queues: usize,
    pub flavors: usize,
}

/// Deletes a run's objects (every run's without an id) by label:
/// namespaces first (their Workloads and LocalQueues go with them), then
/// ClusterQueues, then ResourceFlavors. Deletion is not awaited: namespaces
/// finish terminating in the background.
pub async fn delete_run(client: &Client, run_id: Option<&str>) -> Result<Deleted> {
    let lp = ListParams::default().labels(&selector(run_id));
    let bg = DeleteParams::background();
    let mut deleted = Deleted::default();
    let mut errors = Vec::new();

    let namespaces: Api<Namespace> = Api::all(client.clone());
    match retry(|| call(namespaces.list(&lp))).await {
        Ok(list) => {
            for ns in list.items {
                let Some(name) = ns.metadata.name else { continue };
                if ns.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                match retry(|| call(namespaces.delete(&name, &bg))).await {
                    Ok(_) => deleted.namespaces += 1,
                    Err(e) if e.code() == Some(404) => {}
                    Err(e) => errors.push(format!("namespace {name}: {e}")),
                }
            }
        }
        Err(e) => errors.push(format!("listing namespaces: {e}")),
    }
    for (kind, api, count) in [
        (
            "ClusterQueue",
            dynamic::<ClusterQueue>(client, None),
            &mut deleted.cluster_queues,
        ),
        (
            "ResourceFlavor",
            dynamic::<ResourceFlavor>(client, None),
            &mut deleted.flavors,
        ),
    ] {
        match retry(|| call(api.list_metadata(&lp))).await {
            Ok(list) => {
                for o in list.items {
                    let Some(name) = o.metadata.name else { continue };
                    match retry(|| call(api.delete(&name, &bg))).await {
                        Ok(_) => *count += 1,
                        Err(e) if e.code() == Some(404) => {}
                        Err(e) => errors.push(format!("{kind} {name}: {e}")),
                    }
                }
            }
            Err(e) => errors.push(format!("listing {kind}s: {e}")),
        }
    }
    if !errors.is_empty() {
        bail!(
            "could not delete everything labelled {}: {}; run `sluice bench cleanup{}` again",
            selector(run_id),
            errors.join("; "),
            run_id.map(|id| format!(" --run-id {id}")).unwrap_or_default()
        );
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_pick_one_run_or_all() {
        assert_eq!(selector(Some("sb-1")), "sluice.dev/bench-run=sb-1");
        assert_eq!(selector(None), "sluice.dev/bench-run");
        let ns = namespace_object("sb-1", "sb-1-team");
        assert_eq!(ns["metadata"]["labels"][RUN_LABEL], "sb-1");
    }

    #[tokio::test]
    async fn retries_only_what_may_pass_later() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let status = |code: u16| {
            CallError::Api(kube::Error::Api(
                kube::core::Status::failure("x", "y").with_code(code).boxed(),
            ))
        };
        // A 500 twice, then fine: three tries.
        let tries = AtomicU32::new(0);
        let r = retry(|| async {
            let n = tries.fetch_add(1, Ordering::SeqCst);
            if n < 2 { Err(status(500)) } else { Ok(n) }
        })
        .await;
        assert_eq!(r.ok(), Some(2));
        // A 422 is final at once.
        let tries = AtomicU32::new(0);
        let r: Result<(), _> = retry(|| async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err(status(422))
        })
        .await;
        assert_eq!(r.err().and_then(|e| e.code()), Some(422));
        assert_eq!(tries.load(Ordering::SeqCst), 1);
        // A body or an answer that does not (de)serialize: the same next time.
        let serde = serde_json::from_str::<i32>("x").expect_err("not a number");
        assert!(!CallError::Api(kube::Error::SerdeError(serde)).transient());
        assert!(CallError::Timeout.transient() && status(429).transient() && status(503).transient());
    }
}
