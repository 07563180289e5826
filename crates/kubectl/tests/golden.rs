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
    assert!(usage::notes(&v).contains("LocalQueue sluice-e2e-ctl-dfee03568a/team: left out: status.usage"));
}

/// A budget that cannot be read is named by where it is: a ClusterQueue's
/// `status.budget`, a LocalQueue's `status.clusterQueue.budget`.
#[test]
fn a_budget_that_cannot_be_read_names_its_field_in_its_object() {
    let mut s = usage_admin();
    let lq = s.local_queues[0].status.as_mut().unwrap();
    lq.cluster_queue.as_mut().unwrap().budget.as_mut().unwrap().spent = "1,5".into();
    let v = usage::usage(&s, 3600);
    assert_eq!(v.unreadable.len(), 1, "{:?}", v.unreadable);
    assert_eq!(v.unreadable[0].queue, "LocalQueue sluice-e2e-ctl-dfee03568a/team");
    assert!(
        v.unreadable[0]
            .error
            .contains("status.clusterQueue.budget.spent: \"1,5\""),
        "{:?}",
        v.unreadable
    );
    assert!(v.rows.iter().all(|r| r.kind == "ClusterQueue"), "the rest is listed");

    let mut s = usage_admin();
    let cq = &mut s.cluster_queues.as_mut().unwrap()[0];
    cq.status.as_mut().unwrap().budget.as_mut().unwrap().limit = "one".into();
    let v = usage::usage(&s, 3600);
    assert_eq!(v.unreadable.len(), 1, "{:?}", v.unreadable);
    assert!(v.unreadable[0].queue.starts_with("ClusterQueue "), "{:?}", v.unreadable);
    assert!(
        v.unreadable[0].error.contains("status.budget.limit: \"one\""),
        "{:?}",
        v.unreadable
    );
}

/// `--since` counts a bucket the window covers in part by the part
/// covered, hourly buckets and daily ones alike; TOTAL is the status's.
#[test]
fn the_window_counts_buckets_by_the_part_it_covers() {
    let mut s = usage_admin();
    s.now = "2026-11-29T00:30:00Z".parse().unwrap();
    s.local_queues.clear();
    let status = s.cluster_queues.as_mut().unwrap()[0].status.as_mut().unwrap();
    // 4 GPU-hours in the hour from 22:00, 24 on Nov 26 (a daily bucket).
    status.usage = Some(Box::new(
        serde_json::from_value(serde_json::json!({
            "flushedAt": "2026-11-29T00:30:00Z",
            "resources": [{
                "flavor": "a100", "resource": "nvidia.com/gpu", "total": "28",
                "hourly": [{"start": "2026-11-28T22:00:00Z", "hours": "4"}],
                "daily": [{"start": "2026-11-26T00:00:00Z", "hours": "24"}],
            }],
        }))
        .unwrap(),
    ));
    status.budget = None;
    let used = |since: i64| {
        let v = usage::usage(&s, since);
        assert!(v.unreadable.is_empty(), "{:?}", v.unreadable);
        assert_eq!(v.rows.len(), 1);
        (v.rows[0].used_hours, v.rows[0].total_hours)
    };
    let hour = 3600;
    assert_eq!(used(hour), (0.0, 28.0), "from 23:30: nothing");
    assert_eq!(used(2 * hour), (4.0 / 2.0, 28.0), "from 22:30: half of the 22:00 hour");
    assert_eq!(used(3 * hour), (4.0, 28.0), "from 21:30: all of it");
    assert_eq!(
        used(3 * 24 * hour),
        (24.0 * 23.5 / 24.0 + 4.0, 28.0),
        "from Nov 26 00:30: 23.5 of that day's 24 hours, and the 22:00 hour"
    );
}

/// Over the limit: LEFT is 0, not negative, and the action reached is
/// shown in every output.
#[test]
fn a_spent_budget_leaves_nothing_and_shows_its_action() {
    let mut s = usage_admin();
    s.local_queues.clear();
    let b = s.cluster_queues.as_mut().unwrap()[0]
        .status
        .as_mut()
        .unwrap()
        .budget
        .as_mut()
        .unwrap();
    (b.spent, b.limit, b.percent, b.projected) = ("1.25".into(), "1".into(), 125, "3.5".into());
    b.action = Some(sluice_api::v1alpha1::BudgetAction::Stop);
    let v = usage::usage(&s, 7 * 24 * 3600);
    let budget = v.rows[0].budget.as_ref().unwrap();
    assert_eq!(
        (budget.spent_hours, budget.limit_hours, budget.left_hours),
        (1.25, 1.0, 0.0)
    );
    assert_eq!(budget.action.as_deref(), Some("Stop"));
    let table = usage::table(&v).render("");
    assert!(table.contains("1.25/1 (125%)"), "{table}");
    assert!(table.lines().nth(1).unwrap().trim_end().ends_with("Stop"), "{table}");
    let records = csv_records(&usage::csv(&v));
    let field = |name: &str| {
        let i = records[0].iter().position(|h| h == name).unwrap();
        records[1][i].clone()
    };
    assert_eq!(
        (field("budget_left_hours"), field("budget_percent"), field("action")),
        ("0".into(), "125".into(), "Stop".into())
    );
}
