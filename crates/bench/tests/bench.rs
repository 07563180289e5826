//! `sluice bench run` and `sluice bench floor` against a fake API server.
//!
//! No cluster runs here, so a small in-process API server stands in for
//! one (a `tower_test` mock behind a real `kube::Client`): it stores what
//! is applied, answers lists, serves the Workload watch as long polls (a
//! watch answer ends once it has events; the watcher then watches on from
//! the last resourceVersion, as after a server-side timeout), and plays a
//! controller that admits Workloads within quota and releases it when they
//! are marked Finished. Every request is checked against what a real API
//! server expects: paths, server-side apply with field manager
//! `sluice-bench` and `force=true`, the apply content type.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use sluice_bench::cluster;
use sluice_bench::floor::FloorOptions;
use sluice_bench::plan::{self, Plan};
use sluice_bench::run::{RunOptions, execute};
use sluice_simulate::scenario::{LoadOptions, load_with};

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
type Respond = tower_test::mock::SendResponse<Response<Body>>;

const SCENARIO: &str = "\
apiVersion: sluice.dev/v1alpha1
kind: ResourceFlavor
metadata: {name: default}
spec: {}
---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq-a}
spec: {namespaceSelector: {}, cohort: co, resourceGroups: [{coveredResources: [cpu], flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2, borrowingLimit: 1}]}]}]}
---
apiVersion: sluice.dev/v1alpha1
kind: ClusterQueue
metadata: {name: cq-b}
spec: {namespaceSelector: {}, cohort: co, resourceGroups: [{coveredResources: [cpu], flavors: [{name: default, resources: [{name: cpu, nominalQuota: 2, borrowingLimit: 1}]}]}]}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: cq-a}
---
apiVersion: sluice.dev/v1alpha1
kind: LocalQueue
metadata: {name: lq, namespace: team-b}
spec: {clusterQueue: cq-b}
---
apiVersion: sluice.dev/v1alpha1
kind: Trace
metadata: {name: fake}
spec:
  generators:
  - class: small
    count: 8
    interval: 10ms
    duration: 40ms
    requests: {cpu: 1}
    queues: [team-a/lq, team-b/lq]
  - class: large
    count: 2
    interval: 50ms
    duration: 60ms
    requests: {cpu: 2}
    queues: [team-a/lq]
";

/// A request as the fake saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: String,
    content_type: String,
    body: Value,
}

#[derive(Default)]
struct State {
    rv: u64,
    /// By API path.
    objects: BTreeMap<String, Value>,
    /// Workload watch events: (resourceVersion, event).
    events: Vec<(u64, Value)>,
    watches: Vec<(u64, Respond)>,
    seen: Vec<Seen>,
    /// Play a broken controller that ignores quota.
    over_admit: bool,
    /// Play a controller with `--placement=nodes` on a cluster without
    /// Nodes: it admits nothing, and explains every workload but the
    /// first (by creation) as one no node could ever hold.
    no_nodes: bool,
    /// Once, at the first Finished mark: the events it causes (its release
    /// and the admissions that follow) are not sent; the watch is told 410
    /// Gone instead and must list again.
    relist_once: bool,
    /// Events are kept but not sent to waiting watches.
    hold_watches: bool,
    /// The next watch answer is 410 Gone.
    gone: bool,
    /// Requests seen when the 410 was sent, when the list after it was
    /// asked for, and when it was answered (1.5 s later).
    gone_sent_at: Option<usize>,
    relist_asked_at: Option<usize>,
    relisted_at: Option<usize>,
    /// Workload creations (by path) still to fail with a 500.
    failing_creates: BTreeMap<String, u32>,
    /// When each harness write of a run Workload (not the floor's) came.
    write_times: Vec<std::time::Instant>,
}

fn query_param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

fn labelled(obj: &Value, selector: Option<&str>) -> bool {
    let Some(sel) = selector else { return true };
    let sel = sel.replace("%3D", "=").replace("%2F", "/");
    let labels = &obj["metadata"]["labels"];
    match sel.split_once('=') {
        Some((k, v)) => labels[k] == v,
        None => !labels[sel.as_str()].is_null(),
    }
}

fn milli(q: &Value) -> i64 {
    let text = match q {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    sluice_api::quantity::parse_milli("", &text).expect("a quantity") as i64
}

fn reply(send: Respond, code: u16, body: &Value) {
    send.send_response(
        Response::builder()
            .status(code)
            .body(Body::from(serde_json::to_vec(body).expect("json")))
            .expect("a response"),
    );
}

impl State {
    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn is_workload(path: &str) -> bool {
        path.contains("/workloads/")
    }

    fn event(&mut self, kind: &str, obj: Value) {
        let rv = obj["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(self.rv);
        self.events.push((rv, json!({"type": kind, "object": obj})));
        if self.hold_watches {
            return;
        }
        let pending = std::mem::take(&mut self.watches);
        for (from, send) in pending {
            self.answer_watch(from, send);
        }
    }

    fn answer_watch(&mut self, from: u64, send: Respond) {
        if self.gone {
            self.gone = false;
            self.gone_sent_at = Some(self.seen.len());
            let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "too old resource version", "reason": "Expired", "code": 410}});
            send.send_response(
                Response::builder()
                    .status(200)
                    .body(Body::from(format!("{gone}\n").into_bytes()))
                    .expect("a response"),
            );
            return;
        }
        let lines: Vec<String> = self
            .events
            .iter()
            .filter(|(rv, _)| *rv > from)
            .map(|(_, e)| e.to_string())
            .collect();
        if lines.is_empty() {
            self.watches.push((from, send));
        } else {
            send.send_response(
                Response::builder()
                    .status(200)
                    .body(Body::from((lines.join("\n") + "\n").into_bytes()))
                    .expect("a response"),
            );
        }
    }

    /// Server-side apply of a whole object (create or update; status kept).
    fn apply(&mut self, path: &str, body: Value) -> Value {
        let rv = self.bump().to_string();
        let mut obj = body;
        let old = self.objects.get(path).cloned();
        obj["metadata"]["resourceVersion"] = json!(rv);
        obj["metadata"]["uid"] = json!(format!("uid-{path}"));
        obj["metadata"]["generation"] = json!(1);
        obj["metadata"]["creationTimestamp"] = json!("2025-01-01T00:00:00Z");
        if let Some(old) = &old
            && !old["status"].is_null()
        {
            obj["status"] = old["status"].clone();
        }
        if path.contains("/clusterqueues/") {
            // The controller marks a valid queue Active.
            obj["status"] = json!({"conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}]});
        }
        self.objects.insert(path.to_string(), obj.clone());
        if Self::is_workload(path) {
            self.event(if old.is_some() { "MODIFIED" } else { "ADDED" }, obj.clone());
            self.admit();
        }
        obj
    }

    /// Server-side apply on `/status`: conditions merged by type.
    fn apply_status(&mut self, path: &str, body: &Value) -> Option<Value> {
        let finished = body["status"]["conditions"][0]["type"] == "Finished";
        if finished && self.relist_once {
            self.relist_once = false;
            self.hold_watches = true;
            let obj = self.apply_status_now(path, body);
            self.hold_watches = false;
            self.gone = true;
            if let Some((from, send)) = self.watches.pop() {
                self.answer_watch(from, send);
            }
            return obj;
        }
        self.apply_status_now(path, body)
    }

    fn apply_status_now(&mut self, path: &str, body: &Value) -> Option<Value> {
        let obj = self.objects.get(path)?.clone();
        let mut obj = obj;
        let mut conditions: Vec<Value> = obj["status"]["conditions"].as_array().cloned().unwrap_or_default();
        for c in body["status"]["conditions"].as_array().into_iter().flatten() {
            conditions.retain(|x| x["type"] != c["type"]);
            conditions.push(c.clone());
        }
        obj["status"]["conditions"] = json!(conditions);
        obj["metadata"]["resourceVersion"] = json!(self.bump().to_string());
        self.objects.insert(path.to_string(), obj.clone());
        self.event("MODIFIED", obj.clone());
        self.admit();
        Some(obj)
    }

    fn condition(obj: &Value, t: &str) -> bool {
        obj["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
    }

    /// Plays the controller: admits pending active Workloads in order of
    /// priority then creation while the queue (nominal + borrowingLimit)
    /// and the cohort (Σ nominal) have room.
    fn admit(&mut self) {
        if self.no_nodes {
            self.explain_no_nodes();
            return;
        }
        let queue_of: BTreeMap<String, String> = self
            .objects
            .iter()
            .filter(|(p, _)| p.contains("/localqueues/"))
            .map(|(_, lq)| {
                (
                    format!(
                        "{}/{}",
                        lq["metadata"]["namespace"].as_str().unwrap_or_default(),
                        lq["metadata"]["name"].as_str().unwrap_or_default()
                    ),
                    lq["spec"]["clusterQueue"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let mut queues: BTreeMap<String, (String, String, i64, i64)> = BTreeMap::new();
        for (p, cq) in &self.objects {
            if p.contains("/clusterqueues/") {
                let f = &cq["spec"]["resourceGroups"][0]["flavors"][0];
                let r = &f["resources"][0];
                queues.insert(
                    cq["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                    (
                        cq["spec"]["cohort"].as_str().unwrap_or_default().to_string(),
                        f["name"].as_str().unwrap_or_default().to_string(),
                        milli(&r["nominalQuota"]),
                        if r["borrowingLimit"].is_null() {
                            0
                        } else {
                            milli(&r["borrowingLimit"])
                        },
                    ),
                );
            }
        }
        let mut used: BTreeMap<String, i64> = BTreeMap::new();
        let mut pending = Vec::new();
        for (p, wl) in &self.objects {
            if !Self::is_workload(p) || p.ends_with("/status") {
                continue;
            }
            let cpu =
                milli(&wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]);
            if Self::condition(wl, "QuotaReserved") && !Self::condition(wl, "Finished") {
                let cq = wl["status"]["admission"]["clusterQueue"].as_str().unwrap_or_default();
                *used.entry(cq.to_string()).or_default() += cpu;
            } else if wl["spec"]["active"] != false && !Self::condition(wl, "QuotaReserved") {
                let prio = wl["spec"]["priority"].as_i64().unwrap_or(0);
                pending.push((-prio, p.clone(), cpu));
            }
        }
        pending.sort();
        for (_, path, cpu) in pending {
            let wl = &self.objects[&path];
            let key = format!(
                "{}/{}",
                wl["metadata"]["namespace"].as_str().unwrap_or_default(),
                wl["spec"]["queueName"].as_str().unwrap_or_default()
            );
            let Some(cq) = queue_of.get(&key) else { continue };
            let Some((cohort, flavor, nominal, borrowing)) = queues.get(cq).cloned() else {
                continue;
            };
            let cohort_nominal: i64 = queues.values().filter(|q| q.0 == cohort).map(|q| q.2).sum();
            let cohort_used: i64 = queues
                .iter()
                .filter(|(_, q)| q.0 == cohort)
                .map(|(n, _)| used.get(n).copied().unwrap_or(0))
                .sum();
            let queue_used = used.get(cq).copied().unwrap_or(0);
            let fits = queue_used + cpu <= nominal + borrowing && cohort_used + cpu <= cohort_nominal;
            if !(fits || self.over_admit) {
                continue;
            }
            *used.entry(cq.clone()).or_default() += cpu;
            let mut obj = wl.clone();
            let t = "2025-01-01T00:00:01Z";
            obj["status"] = json!({
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": t},
                    {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": t}
                ],
                "admission": {"clusterQueue": cq, "podSetAssignments": [
                    {"name": "main", "count": 1, "flavors": {"cpu": flavor}, "resourceUsage": {"cpu": format!("{cpu}m")}}
                ]}
            });
            obj["metadata"]["resourceVersion"] = json!(self.bump().to_string());
            self.objects.insert(path.clone(), obj.clone());
            self.event("MODIFIED", obj);
        }
    }

    /// What the controller writes on a workload no node could ever hold
    /// (the explanation of every Workload not explained yet, but the
    /// first, as if the controller had not come to it yet).
    fn explain_no_nodes(&mut self) {
        let unexplained: Vec<String> = self
            .objects
            .iter()
            .filter(|(p, o)| Self::is_workload(p) && o["status"]["pending"].is_null())
            .map(|(p, _)| p.clone())
            .filter(|p| !p.ends_with("-team-a/workloads/small-lq-0"))
            .collect();
        for (i, path) in unexplained.into_iter().enumerate() {
            let mut obj = self.objects[&path].clone();
            let flavor = format!(
                "{}-default",
                obj["metadata"]["labels"]["sluice.dev/bench-run"]
                    .as_str()
                    .unwrap_or_default()
            );
            let summary =
                "no node could ever hold it, even with nothing else running: more quota or waiting does not help";
            let detail = "pod set main: no node matches its flavor's labels, its node selector and its tolerations";
            let position = format!(" (position {i} in ClusterQueue, {i} in LocalQueue)");
            obj["status"] = json!({
                "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "NeverPlaceable",
                    "message": format!("{summary}; pod set main: {flavor}: {detail}{position}"),
                    "lastTransitionTime": "2025-01-01T00:00:01Z"}],
                "pending": {"reason": "NeverPlaceable", "message": format!("{summary}{position}"),
                    "flavors": [{"name": flavor, "reason": "NeverOnNodes", "message": detail}]},
            });
            obj["metadata"]["resourceVersion"] = json!(self.bump().to_string());
            self.objects.insert(path, obj.clone());
            self.event("MODIFIED", obj);
        }
    }

    fn list(&self, prefix: &str, kind: &str, selector: Option<&str>) -> Value {
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|(p, o)| {
                p.starts_with(prefix) && p[prefix.len()..].matches('/').count() == 0 && labelled(o, selector)
            })
            .map(|(_, o)| o.clone())
            .collect();
        json!({"apiVersion": "v1", "kind": format!("{kind}List"), "metadata": {"resourceVersion": self.rv.to_string()}, "items": items})
    }
}

async fn serve(mut handle: Handle, state: Arc<Mutex<State>>) {
    while let Some((req, send)) = handle.next_request().await {
        let method = req.method().to_string();
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or_default().to_string();
        let content_type = req
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let bytes = req.into_body().collect_bytes().await.expect("a body");
        let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let mut s = state.lock().expect("state");
        s.seen.push(Seen {
            method: method.clone(),
            path: path.clone(),
            query: query.clone(),
            content_type,
            body: body.clone(),
        });
        let selector = query_param(&query, "labelSelector").map(String::from);
        match method.as_str() {
            "PATCH" if path.ends_with("/status") => {
                if !path.contains("-floor/") {
                    s.write_times.push(std::time::Instant::now());
                }
                let obj_path = path.trim_end_matches("/status").to_string();
                match s.apply_status(&obj_path, &body) {
                    Some(obj) => reply(send, 200, &obj),
                    None => reply(
                        send,
                        404,
                        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
                    ),
                }
            }
            "PATCH" => {
                if State::is_workload(&path) && !path.contains("-floor/") {
                    s.write_times.push(std::time::Instant::now());
                }
                if let Some(left) = s.failing_creates.get_mut(&path)
                    && *left > 0
                {
                    *left -= 1;
                    reply(
                        send,
                        500,
                        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "InternalError", "code": 500, "message": "etcd is having a bad day"}),
                    );
                    continue;
                }
                let obj = s.apply(&path, body);
                reply(send, 200, &obj);
            }
            "GET" if query.contains("watch=true") => {
                let from = query_param(&query, "resourceVersion")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                s.answer_watch(from, send);
            }
            "GET" => {
                let (prefix, kind) = match path.as_str() {
                    "/api/v1/namespaces" => ("/api/v1/namespaces/", "Namespace"),
                    "/apis/sluice.dev/v1alpha1/clusterqueues" => {
                        ("/apis/sluice.dev/v1alpha1/clusterqueues/", "ClusterQueue")
                    }
                    "/apis/sluice.dev/v1alpha1/resourceflavors" => {
                        ("/apis/sluice.dev/v1alpha1/resourceflavors/", "ResourceFlavor")
                    }
                    "/apis/sluice.dev/v1alpha1/workloads" => {
                        // Every namespace's Workloads, the most recently
                        // written first (a list's order is the server's
                        // business; this one puts an admission made while
                        // the watch was away before the release that made
                        // room for it).
                        let mut items: Vec<Value> = s
                            .objects
                            .iter()
                            .filter(|(p, o)| State::is_workload(p) && labelled(o, selector.as_deref()))
                            .map(|(_, o)| o.clone())
                            .collect();
                        let rv = |o: &Value| {
                            o["metadata"]["resourceVersion"]
                                .as_str()
                                .and_then(|v| v.parse::<u64>().ok())
                                .unwrap_or(0)
                        };
                        items.sort_by_key(|o| std::cmp::Reverse(rv(o)));
                        let list = json!({"apiVersion": "v1", "kind": "WorkloadList", "metadata": {"resourceVersion": s.rv.to_string()}, "items": items});
                        if s.gone_sent_at.is_some() && s.relist_asked_at.is_none() {
                            // The list after the 410 takes a while (as a
                            // big one does): the harness is without a watch
                            // meanwhile.
                            s.relist_asked_at = Some(s.seen.len());
                            let state = state.clone();
                            tokio::spawn(async move {
                                tokio::time::sleep(Duration::from_millis(1_500)).await;
                                let mut s = state.lock().expect("state");
                                s.relisted_at = Some(s.seen.len());
                                reply(send, 200, &list);
                            });
                            continue;
                        }
                        reply(send, 200, &list);
                        continue;
                    }
                    other => panic!("unexpected GET {other}?{query}"),
                };
                let list = s.list(prefix, kind, selector.as_deref());
                reply(send, 200, &list);
            }
            "DELETE" => {
                let gone: Vec<String> = s
                    .objects
                    .keys()
                    .filter(|p| {
                        **p == path
                            || p.starts_with(&format!(
                                "{}/",
                                path.replace("/api/v1/namespaces/", "/apis/sluice.dev/v1alpha1/namespaces/")
                            ))
                    })
                    .cloned()
                    .collect();
                let obj = s.objects.get(&path).cloned();
                for p in gone {
                    s.objects.remove(&p);
                }
                match obj {
                    Some(o) => reply(send, 200, &o),
                    None => reply(
                        send,
                        404,
                        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
                    ),
                }
            }
            other => panic!("unexpected {other} {path}"),
        }
    }
}

fn fake(over_admit: bool) -> (Client, Arc<Mutex<State>>) {
    fake_with(State {
        over_admit,
        ..State::default()
    })
}

fn fake_with(state: State) -> (Client, Arc<Mutex<State>>) {
    let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let state = Arc::new(Mutex::new(state));
    tokio::spawn(serve(handle, state.clone()));
    (Client::new(svc, "default"), state)
}

fn plan(run_id: &str) -> Plan {
    plan_of(run_id, SCENARIO)
}

fn plan_of(run_id: &str, scenario: &str) -> Plan {
    let (s, m) = load_with("fake.yaml", scenario, &LoadOptions::default()).expect("the scenario loads");
    plan::build(run_id, &s, &m, 1.0).expect("plans")
}

fn options(floor: bool) -> RunOptions {
    RunOptions {
        timeout: Duration::from_secs(60),
        concurrency: 4,
        settle: Duration::ZERO,
        metrics: None,
        pid: None,
        apiserver_pid: None,
        etcd_pid: None,
        floor: floor.then_some(FloorOptions {
            count: 12,
            concurrency: 3,
            kube_qps: 0.0,
            kube_burst: 1,
            quiet: true,
        }),
        harness_qps: 0.0,
        harness_burst: 1,
        stall_window: Duration::from_secs(60),
        quiet: true,
    }
}

#[tokio::test]
async fn a_run_creates_finishes_and_reports_every_workload() {
    let (client, state) = fake(false);
    let plan = plan("sb-fake");
    let report = tokio::time::timeout(Duration::from_secs(60), execute(&client, &plan, &options(true)))
        .await
        .expect("the run ends")
        .expect("the run succeeds");

    // 8 small in each of 2 queues + 2 large = 18, all admitted and finished.
    assert!(report.complete && !report.timed_out, "{report:#?}");
    assert_eq!(report.workloads.planned, 18);
    assert_eq!(report.workloads.admitted, 18);
    assert_eq!(report.workloads.finished, 18);
    assert_eq!(report.workloads.admissions, 18);
    assert!(report.quota_violations.is_empty(), "{:?}", report.quota_violations);
    let classes: Vec<(&str, u64)> = report
        .classes
        .iter()
        .map(|c| (c.name.as_str(), c.time_to_admission.count))
        .collect();
    assert_eq!(classes, vec![("large", 2), ("small", 16)]);
    // Each small one runs 40 ms and each large one 60 ms; a run takes at
    // least its longest chain, and the queues were used.
    assert!(report.wall_ms >= 60, "{}", report.wall_ms);
    assert!(report.total_usage[0].usage.unwrap_or(0.0) > 0.0);
    let floor = report.floor.as_ref().expect("--with-floor");
    assert_eq!((floor.patches, floor.failed), (12, 0));
    assert!(report.vs_floor.is_some());

    {
        let s = state.lock().expect("state");
        // Every write is a server-side apply by sluice-bench, forced.
        let writes: Vec<&Seen> = s.seen.iter().filter(|r| r.method == "PATCH").collect();
        for w in &writes {
            assert_eq!(w.content_type, "application/apply-patch+yaml", "{w:?}");
            assert!(w.query.contains("fieldManager=sluice-bench"), "{w:?}");
            assert!(w.query.contains("force=true"), "{w:?}");
            let name = w
                .path
                .trim_end_matches("/status")
                .rsplit('/')
                .next()
                .unwrap_or_default();
            assert_eq!(w.body["metadata"]["name"], name, "{w:?}");
            assert!(w.body["apiVersion"].is_string() && w.body["kind"].is_string(), "{w:?}");
        }
        let paths: Vec<&str> = writes.iter().map(|w| w.path.as_str()).collect();
        for expected in [
            "/api/v1/namespaces/sb-fake-floor",
            "/apis/sluice.dev/v1alpha1/namespaces/sb-fake-floor/workloads/floor-0",
            "/apis/sluice.dev/v1alpha1/namespaces/sb-fake-floor/workloads/floor-0/status",
            "/api/v1/namespaces/sb-fake-team-a",
            "/apis/sluice.dev/v1alpha1/resourceflavors/sb-fake-default",
            "/apis/sluice.dev/v1alpha1/clusterqueues/sb-fake-cq-a",
            "/apis/sluice.dev/v1alpha1/namespaces/sb-fake-team-b/localqueues/lq",
            "/apis/sluice.dev/v1alpha1/namespaces/sb-fake-team-a/workloads/small-lq-0",
            "/apis/sluice.dev/v1alpha1/namespaces/sb-fake-team-a/workloads/small-lq-0/status",
        ] {
            assert!(paths.contains(&expected), "no apply of {expected} in {paths:#?}");
        }
        // The floor namespace was deleted before the run; the floor's status
        // patches carried a BenchFloor condition, the run's a Finished one.
        assert!(
            s.seen
                .iter()
                .any(|r| r.method == "DELETE" && r.path == "/api/v1/namespaces/sb-fake-floor")
        );
        for w in writes.iter().filter(|w| w.path.ends_with("/status")) {
            let conditions = w.body["status"]["conditions"].as_array().expect("conditions");
            assert_eq!(conditions.len(), 1, "{w:?}");
            let expected = if w.path.contains("-floor/") {
                "BenchFloor"
            } else {
                "Finished"
            };
            assert_eq!(conditions[0]["type"], expected, "{w:?}");
        }
        // One Finished mark per workload: 18.
        let finished = writes
            .iter()
            .filter(|w| w.path.ends_with("/status") && !w.path.contains("-floor/"))
            .count();
        assert_eq!(finished, 18);
        // The watch was of this run's label only, in every namespace.
        assert!(s.seen.iter().any(|r| r.path == "/apis/sluice.dev/v1alpha1/workloads"
            && r.query.contains("watch=true")
            && r.query.contains("labelSelector=sluice.dev%2Fbench-run%3Dsb-fake")));
    }

    // Cleanup finds everything by label.
    let deleted = cluster::delete_run(&client, Some("sb-fake")).await.expect("cleanup");
    assert_eq!((deleted.namespaces, deleted.cluster_queues, deleted.flavors), (2, 2, 1));
    let s = state.lock().expect("state");
    assert!(s.objects.is_empty(), "left: {:?}", s.objects.keys().collect::<Vec<_>>());
}

#[tokio::test]
async fn a_controller_that_ignores_quota_is_caught() {
    let (client, _state) = fake(true);
    let plan = plan("sb-over");
    let report = tokio::time::timeout(Duration::from_secs(60), execute(&client, &plan, &options(false)))
        .await
        .expect("the run ends")
        .expect("the run succeeds");
    assert!(report.complete);
    // Up to 8 + 2 CPU arrive at once in cq-a (nominal 2 + borrowing 1).
    assert!(!report.quota_violations.is_empty());
    let v = report
        .quota_violations
        .iter()
        .find(|v| v.name == "cq-a")
        .expect("cq-a over its cap");
    assert_eq!(
        (v.flavor.as_str(), v.resource.as_str(), v.limit),
        ("default", "cpu", 3.0)
    );
    assert!(v.peak > 3.0);
    assert!(
        report.quota_violations.iter().any(|v| v.name == "co"),
        "the cohort (4 CPU) too"
    );
}

#[tokio::test]
async fn a_run_without_a_controller_fails_clearly() {
    // No queue ever becomes Active: the fake plays no controller for them.
    let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(svc, "default");
    tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let body = if req.method() == "GET" {
                json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": []})
            } else {
                let bytes = req.into_body().collect_bytes().await.expect("a body");
                serde_json::from_slice(&bytes).expect("json")
            };
            reply(send, 200, &body);
        }
    });
    let plan = plan("sb-none");
    let run = sluice_bench::cluster::wait_for_controller(&client, &plan, Duration::from_millis(600));
    let err = run.await.expect_err("no controller");
    assert!(err.to_string().contains("is `sluice controller` running"), "{err}");
}

#[tokio::test]
async fn a_run_id_in_use_is_refused() {
    let (client, state) = fake(false);
    {
        let mut s = state.lock().expect("state");
        let ns = cluster::namespace_object("sb-used", "sb-used-team-a");
        s.apply("/api/v1/namespaces/sb-used-team-a", ns);
    }
    let err = cluster::ensure_fresh(&client, "sb-used").await.expect_err("refused");
    let text = format!("{err:#}");
    assert!(
        text.contains("run id sb-used is in use: namespace sb-used-team-a"),
        "{text}"
    );
    assert!(text.contains("sluice bench cleanup --run-id sb-used"), "{text}");
    // Nothing was written; a fresh id is fine.
    cluster::ensure_fresh(&client, "sb-new").await.expect("fresh");
    let s = state.lock().expect("state");
    assert_eq!(s.seen.iter().filter(|r| r.method != "GET").count(), 0);
}

#[tokio::test]
async fn a_relist_of_the_watch_shows_no_violation_that_never_happened() {
    // At the first Finished mark the watch misses the release and the
    // admissions that fill the freed room, and lists again; the list gives
    // the newly admitted before the finished one. Taken one by one that
    // would count both for a moment, over quota; as the one moment the list
    // is, the quota held.
    let (client, state) = fake_with(State {
        relist_once: true,
        ..State::default()
    });
    // The large ones run 2 s: the first one's time is up while the watch
    // is away (the relist is asked for 0.8 to 1.6 s after the 410, the
    // watcher's backoff, and answered 1.5 s later).
    let scenario = SCENARIO.replace("duration: 60ms", "duration: 2000ms");
    assert_ne!(scenario, SCENARIO);
    let plan = plan_of("sb-relist", &scenario);
    let report = tokio::time::timeout(Duration::from_secs(60), execute(&client, &plan, &options(false)))
        .await
        .expect("the run ends")
        .expect("the run succeeds");
    assert!(report.complete, "{report:#?}");
    assert_eq!(report.watch_restarts, 1, "the watch listed again once");
    assert_eq!(report.workloads.finished, 18);
    assert!(report.quota_violations.is_empty(), "{:#?}", report.quota_violations);
    // While the watch listed again, nothing was marked Finished on what it
    // had seen before (a workload preempted meanwhile would have been).
    let s = state.lock().expect("state");
    let (from, to) = (
        s.relist_asked_at.expect("listed again"),
        s.relisted_at.expect("answered"),
    );
    let marks: Vec<&str> = s.seen[from..to]
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.ends_with("/status"))
        .map(|r| r.path.as_str())
        .collect();
    assert!(marks.is_empty(), "Finished marks during the relist: {marks:?}");
}

#[tokio::test]
async fn a_creation_that_keeps_failing_is_tried_again_later() {
    // The API server fails one creation 7 times in a row (more than the
    // 5 tries of a call): the run goes on, creates it later, and says so.
    let path = "/apis/sluice.dev/v1alpha1/namespaces/sb-retry-team-a/workloads/small-lq-0".to_string();
    let (client, state) = fake_with(State {
        failing_creates: BTreeMap::from([(path.clone(), 7)]),
        ..State::default()
    });
    let plan = plan("sb-retry");
    let report = tokio::time::timeout(Duration::from_secs(60), execute(&client, &plan, &options(false)))
        .await
        .expect("the run ends")
        .expect("a failing creation does not end the run");
    assert!(report.complete, "{report:#?}");
    assert_eq!((report.workloads.created, report.workloads.finished), (18, 18));
    assert_eq!(report.create_write_errors, 1, "one creation gave up its 5 tries once");
    let tries = state
        .lock()
        .expect("state")
        .seen
        .iter()
        .filter(|r| r.method == "PATCH" && r.path == path)
        .count();
    assert_eq!(tries, 8, "5 tries, 2 more a second later, then it went through");
}

#[tokio::test]
async fn the_harness_writes_under_its_own_rate_limit() {
    // 18 creations and 18 Finished marks at --harness-qps 40 with a burst
    // of 1: 36 writes take at least 35 / 40 s = 875 ms.
    let (client, state) = fake(false);
    let plan = plan("sb-qps");
    let mut opts = options(false);
    opts.harness_qps = 40.0;
    opts.harness_burst = 1;
    let report = tokio::time::timeout(Duration::from_secs(60), execute(&client, &plan, &opts))
        .await
        .expect("the run ends")
        .expect("the run succeeds");
    assert!(report.complete, "{report:#?}");
    let times = state.lock().expect("state").write_times.clone();
    assert_eq!(times.len(), 36);
    let span = times[35].duration_since(times[0]);
    assert!(span >= Duration::from_millis(860), "{span:?}");
    // No 10 of them within 200 ms (at most 1 + 40 × 0.2 = 9).
    for w in times.windows(10) {
        assert!(
            w[9].duration_since(w[0]) >= Duration::from_millis(200),
            "{:?}",
            w[9].duration_since(w[0])
        );
    }
}

#[tokio::test]
async fn namespaces_of_earlier_runs_still_terminating_are_named() {
    let (client, state) = fake(false);
    {
        let mut s = state.lock().expect("state");
        for (run, ns) in [("sb-old", "sb-old-team-a"), ("sb-live", "sb-live-team-a")] {
            s.apply(&format!("/api/v1/namespaces/{ns}"), cluster::namespace_object(run, ns));
        }
        let old = s.objects.get_mut("/api/v1/namespaces/sb-old-team-a").expect("stored");
        old["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
    }
    let names = cluster::terminating_namespaces(&client).await.expect("listed");
    assert_eq!(names, vec!["sb-old-team-a".to_string()]);
    let s = state.lock().expect("state");
    let list = s.seen.last().expect("a request");
    assert_eq!(
        (list.method.as_str(), list.path.as_str()),
        ("GET", "/api/v1/namespaces")
    );
    assert!(
        list.query.contains("labelSelector=sluice.dev%2Fbench-run"),
        "{}",
        list.query
    );
}

#[tokio::test]
async fn a_run_where_nothing_is_admitted_stops_and_says_why() {
    // The run: the controller runs with --placement=nodes and the
    // harness makes no Nodes, so nothing is ever admitted. With a window
    // of 1 s the run stops about a second after its workloads wait,
    // instead of at --timeout (60 s here), and reports why they wait.
    let (client, state) = fake_with(State {
        no_nodes: true,
        ..State::default()
    });
    let plan = plan("sb-stall");
    let mut opts = options(false);
    opts.stall_window = Duration::from_secs(1);
    let started = std::time::Instant::now();
    let report = tokio::time::timeout(Duration::from_secs(30), execute(&client, &plan, &opts))
        .await
        .expect("the run ends before its timeout")
        .expect("a stall is reported, not an error");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(!report.complete && !report.timed_out, "{report:#?}");
    assert_eq!((report.workloads.admitted, report.workloads.finished), (0, 0));
    let stalled = report.stalled.as_ref().expect("stalled");
    assert_eq!(stalled.window_ms, 1_000);
    assert_eq!(stalled.pending, report.workloads.created);
    let reasons: Vec<(u64, Option<&str>)> = stalled
        .reasons
        .iter()
        .map(|r| (r.workloads, r.reason.as_deref()))
        .collect();
    assert_eq!(
        reasons,
        vec![
            (
                17,
                Some(
                    "NeverPlaceable: no node could ever hold it, even with nothing else running: more quota or waiting does not help; sb-stall-default: pod set main: no node matches its flavor's labels, its node selector and its tolerations"
                )
            ),
            (1, None),
        ]
    );
    let text = sluice_bench::report::render(&report);
    assert!(
        text.contains("STALLED: nothing admitted or finished for 1s while 18 workloads waited"),
        "{text}"
    );
    assert!(text.contains("--placement=quota-only"), "{text}");
    // The reasons were read with one list of the run's Workloads, by label.
    let s = state.lock().expect("state");
    assert!(s.seen.iter().any(|r| r.method == "GET"
        && r.path == "/apis/sluice.dev/v1alpha1/workloads"
        && !r.query.contains("watch=true")
        && r.query.contains("limit=500")
        && r.query.contains("labelSelector=sluice.dev%2Fbench-run%3Dsb-stall")));
}

#[tokio::test]
async fn a_stall_window_of_zero_never_stops_a_run() {
    // The same cluster, the check off: the run waits until --timeout.
    let (client, _state) = fake_with(State {
        no_nodes: true,
        ..State::default()
    });
    let plan = plan("sb-nostall");
    let mut opts = options(false);
    opts.stall_window = Duration::ZERO;
    opts.timeout = Duration::from_secs(3);
    let report = tokio::time::timeout(Duration::from_secs(30), execute(&client, &plan, &opts))
        .await
        .expect("the run ends")
        .expect("the run succeeds");
    assert!(report.timed_out && report.stalled.is_none(), "{report:#?}");
}
