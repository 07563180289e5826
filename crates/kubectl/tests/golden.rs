//! Every command's output, from objects recorded from a real API server
//! (`tests/fixtures/`, written by the e2e test
//! `admins_and_viewers_see_queues_positions_reasons_and_estimates` with
//! `SLUICE_RECORD_DIR`): one ClusterQueue of 2 GPUs, a Job admitted and
//! expected to run 30 minutes, two waiting behind it. Rendered as the admin
//! (ClusterQueues readable) and as a namespaced viewer (not), at the time
//! of the recording.

use k8s_openapi::jiff::Timestamp;
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, Workload};
use sluice_kubectl::Snapshot;
use sluice_kubectl::view::{queues, top, usage, why, workloads};

fn fixture<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn admin() -> Snapshot {
    let now: Timestamp = std::fs::read_to_string(format!("{}/tests/fixtures/now.txt", env!("CARGO_MANIFEST_DIR")))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    Snapshot {
        cluster_queues: Some(fixture::<Vec<ClusterQueue>>("clusterqueues.json")),
        local_queues: fixture::<Vec<LocalQueue>>("localqueues.json"),
        workloads: fixture::<Vec<Workload>>("workloads.json"),
        now,
    }
}

fn viewer() -> Snapshot {
    Snapshot {
        cluster_queues: None,
        ..admin()
    }
}

fn namespace(s: &Snapshot) -> String {
    s.local_queues[0].metadata.namespace.clone().unwrap()
}

#[test]
fn queues_as_admin_and_as_viewer() {
    let a = queues::queues(&admin());
    insta::assert_snapshot!("queues_admin", queues::table(&a, false).render("No queues found."));
    insta::assert_json_snapshot!("queues_admin_json", a);
    let v = queues::queues(&viewer());
    insta::assert_snapshot!("queues_viewer", queues::table(&v, false).render("No queues found."));
    insta::assert_snapshot!("queues_viewer_wide", queues::table(&v, true).render("No queues found."));
    insta::assert_json_snapshot!("queues_viewer_json", v);
    insta::assert_snapshot!("queues_viewer_yaml", serde_saphyr::to_string(&v).unwrap());
}

#[test]
fn workloads_table_wide_and_json() {
    let s = admin();
    let all = workloads::workloads(&s, workloads::Filter::All);
    insta::assert_snapshot!(
        "workloads",
        workloads::table(&all, &s, false, false, false).render("No workloads found.")
    );
    insta::assert_snapshot!(
        "workloads_wide_all_namespaces",
        workloads::table(&all, &s, true, true, false).render("")
    );
    insta::assert_json_snapshot!("workloads_json", all);
    let pending = workloads::workloads(&s, workloads::Filter::Pending);
    assert_eq!(
        pending.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(),
        ["job-waiting", "job-behind"]
    );
    let admitted = workloads::workloads(&s, workloads::Filter::Admitted);
    assert_eq!(
        admitted.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(),
        ["job-running"]
    );
}

#[test]
fn why_as_admin_and_as_viewer() {
    let s = admin();
    let ns = namespace(&s);
    let w = why::find(&s, &ns, "waiting").expect("found by its Job's name");
    assert_eq!(
        why::find(&s, &ns, "job/waiting").map(|x| &x.metadata.name),
        Some(&w.metadata.name)
    );
    assert_eq!(
        why::find(&s, &ns, "job-waiting").map(|x| &x.metadata.name),
        Some(&w.metadata.name)
    );
    assert!(why::find(&s, &ns, "jobset/waiting").is_none(), "not a JobSet's");
    let holders = workloads::workloads(&s, workloads::Filter::Admitted);
    let v = why::why(&s, w, Vec::new(), Some(holders));
    insta::assert_snapshot!("why_admin", why::text(&v, &s));
    insta::assert_json_snapshot!("why_admin_json", v);
    let s = viewer();
    let w = why::find(&s, &ns, "waiting").unwrap();
    let v = why::why(&s, w, Vec::new(), None);
    insta::assert_snapshot!("why_viewer", why::text(&v, &s));
}

#[test]
fn top_with_bars() {
    let rows = top::usage(&queues::queues(&admin()));
    insta::assert_snapshot!("top", top::table(&rows, false).render("No queues found."));
    insta::assert_json_snapshot!("top_json", rows);
    assert_eq!(
        rows,
        top::usage(&queues::queues(&viewer())),
        "the same numbers through the LocalQueue"
    );
}

/// Issue 39: a LocalQueue whose ClusterQueue does not select its namespace
/// is shown inactive with the controller's reason, to the viewer (its own
/// LocalQueue) and to the admin (under the ClusterQueue); `why` gives a
/// held workload's reason.
#[test]
fn local_queues_not_selected_are_shown_inactive_and_why_says_so() {
    let why_text = "namespace team-b is not selected by ClusterQueue team-a: it has no namespaceSelector, which \
                    selects no namespace (set namespaceSelector: {} to serve every namespace)";
    let mut s = admin();
    let condition: k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition =
        serde_json::from_value(serde_json::json!({
            "type": "Active", "status": "False", "reason": "NamespaceNotSelected", "message": why_text,
            "lastTransitionTime": "2026-01-01T00:00:00Z"
        }))
        .unwrap();
    let lq = &mut s.local_queues[0];
    let key = format!(
        "{}/{}",
        lq.metadata.namespace.clone().unwrap(),
        lq.metadata.name.clone().unwrap()
    );
    let status = lq.status.get_or_insert_with(Default::default);
    status.conditions.retain(|c| c.type_ != "Active");
    status.conditions.push(condition);
    let want = format!("LocalQueue {key} is inactive (NamespaceNotSelected): {why_text}\n");
    let as_admin = queues::queues(&s);
    assert_eq!(queues::notes(&as_admin), want);
    let as_viewer = queues::queues(&Snapshot {
        cluster_queues: None,
        ..s.clone()
    });
    assert_eq!(queues::notes(&as_viewer), want);
    let json = serde_json::to_value(&as_viewer).unwrap();
    assert_eq!(json[0]["inactive"][0]["reason"], "NamespaceNotSelected");
    // Active queues have no notes (the recorded cluster).
    assert_eq!(queues::notes(&queues::queues(&admin())), "");

    // A pending workload held for that reason: `why` says it.
    let ns = namespace(&s);
    let mut w = s
        .workloads
        .iter()
        .find(|w| w.metadata.name.as_deref() == Some("job-waiting"))
        .unwrap()
        .clone();
    let st = w.status.as_mut().unwrap();
    let p = st.pending.get_or_insert_with(Default::default);
    p.reason = "NamespaceNotSelected".into();
    p.message = why_text.into();
    p.flavors.clear();
    let v = why::why(&s, &w, Vec::new(), None);
    assert_eq!(v.message.as_deref(), Some(why_text));
    let text = why::text(&v, &s);
    assert!(text.contains(why_text), "{text}");
    assert_eq!(w.metadata.namespace.as_deref(), Some(ns.as_str()));
}

/// Issue 29: `top` shows memory in binary units (`1Gi/512Gi`, not
/// `1073741824/549755813888`), CPUs and GPUs as numbers. The recorded
/// ClusterQueue with a second resource group of CPU and memory, and usage
/// as the controller writes it (memory in bytes).
#[test]
fn top_shows_memory_in_binary_units() {
    let mut s = admin();
    let cq = &mut s.cluster_queues.as_mut().unwrap()[0];
    let mut v = serde_json::to_value(&*cq).unwrap();
    v["spec"]["resourceGroups"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": "cpu-pool", "resources": [
                {"name": "cpu", "nominalQuota": "64"},
                {"name": "memory", "nominalQuota": "512Gi"}
            ]}]
        }));
    v["status"]["flavorsUsage"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"name": "cpu-pool", "resources": [
            {"name": "cpu", "total": "1500m"},
            {"name": "memory", "total": "1073741824", "borrowed": "0"}
        ]}));
    *cq = serde_json::from_value(v).unwrap();
    let rows = top::usage(&queues::queues(&s));
    let text = top::table(&rows, false).render("No queues found.");
    assert!(text.contains("1Gi/512Gi"), "{text}");
    assert!(!text.contains("1073741824"), "{text}");
    insta::assert_snapshot!("top_memory", text);
}

/// The recording of the e2e test
/// `admins_and_viewers_see_gpu_hours_and_budgets_as_tables_json_and_csv`
/// (`tests/fixtures/usage/`): a ClusterQueue of 4 GPUs with a budget of
/// one GPU-hour a week, a 4-GPU Job admitted for some seconds.
fn usage_admin() -> Snapshot {
    let now: Timestamp =
        std::fs::read_to_string(format!("{}/tests/fixtures/usage/now.txt", env!("CARGO_MANIFEST_DIR")))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
    Snapshot {
        cluster_queues: Some(fixture::<Vec<ClusterQueue>>("usage/clusterqueues.json")),
        local_queues: fixture::<Vec<LocalQueue>>("usage/localqueues.json"),
        workloads: Vec::new(),
        now,
    }
}

/// RFC 4180 records of `text` (no quoted line breaks in these fixtures).
fn csv_records(text: &str) -> Vec<Vec<String>> {
    text.split_terminator("\r\n")
        .map(|line| {
            let mut fields = Vec::new();
            let (mut field, mut quoted, mut chars) = (String::new(), false, line.chars().peekable());
            while let Some(c) = chars.next() {
                match (quoted, c) {
                    (true, '"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    (true, '"') => quoted = false,
                    (false, '"') if field.is_empty() => quoted = true,
                    (false, ',') => fields.push(std::mem::take(&mut field)),
                    (_, c) => field.push(c),
                }
            }
            fields.push(field);
            fields
        })
        .collect()
}

#[test]
fn usage_as_admin_and_as_viewer() {
    let day = 24 * 3600;
    let a = usage::usage(&usage_admin(), 7 * day);
    assert!(a.unreadable.is_empty(), "{:?}", a.unreadable);
    let cq = a.rows.iter().find(|r| r.kind == "ClusterQueue").unwrap();
    let lq = a.rows.iter().find(|r| r.kind == "LocalQueue").unwrap();
    // One Job: the ClusterQueue's and the LocalQueue's usage are the same.
    assert_eq!((cq.used_hours, cq.total_hours), (lq.used_hours, lq.total_hours));
    assert!(cq.total_hours > 0.0);
    let b = cq.budget.as_ref().unwrap();
    assert_eq!((b.limit_hours, b.left_hours), (1.0, 1.0 - b.spent_hours));
    insta::assert_snapshot!(
        "usage_admin",
        format!("{}\n{}", usage::table(&a).render(""), usage::notes(&a))
    );
    insta::assert_json_snapshot!("usage_admin_json", a);
    let csv = usage::csv(&a);
    insta::assert_snapshot!("usage_admin_csv", csv);
    let records = csv_records(&csv);
    assert_eq!(records.len(), 1 + a.rows.len());
    assert!(records.iter().all(|r| r.len() == records[0].len()));
    assert_eq!(
        records[1][6].parse::<f64>().unwrap(),
        a.rows[0].used_hours,
        "numbers are plain"
    );

    let mut viewer = usage_admin();
    viewer.cluster_queues = None;
    let v = usage::usage(&viewer, 7 * day);
    assert!(v.rows.iter().all(|r| r.kind == "LocalQueue"));
    assert_eq!(
        v.rows[0].budget, lq.budget,
        "the LocalQueue carries its ClusterQueue's budget"
    );
    insta::assert_snapshot!(
        "usage_viewer",
        format!("{}\n{}", usage::table(&v).render(""), usage::notes(&v))
    );
    insta::assert_snapshot!("usage_viewer_csv", usage::csv(&v));
    // A window before the Job ran counts none of it.
    let before = usage::usage(&viewer, 1);
    assert!(before.rows[0].used_hours < v.rows[0].used_hours);
}

#[test]
fn a_usage_status_that_cannot_be_read_is_reported_and_left_out() {
    let mut s = usage_admin();
    let lq = &mut s.local_queues[0];
    lq.status.as_mut().unwrap().usage.as_mut().unwrap().resources[0].total = "lots".into();
    let v = usage::usage(&s, 3600);
    assert_eq!(v.unreadable.len(), 1);
    assert!(
        v.unreadable[0]
            .error
            .contains("status.usage.resources[0].total: \"lots\" is not a number of resource-hours"),
        "{:?}",
        v.unreadable
    );
    assert!(v.rows.iter().all(|r| r.kind == "ClusterQueue"), "the rest is listed");
    assert!(usage::notes(&v).contains("status.usage left out"));
}
