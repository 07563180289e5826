//! Memory measurements (ignored; run alone, in release):
//! `cargo test -p sluice-controller --release -- --ignored memory --nocapture`.

use super::*;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Memory with 15 000 Workloads (and their Jobs) and 30 ClusterQueues
/// cached and indexed, after the first cycle. Run with
/// `cargo test -p sluice-controller --release -- --ignored memory --nocapture`.
#[test]
#[ignore = "measurement; run alone"]
fn memory_with_15000_workloads_and_30_cluster_queues() {
    let before = rss_kib();
    let mut cache = Cache::default();
    for k in Kind::all() {
        handle(&mut cache, None, Msg::Init(k), 0);
    }
    let mut add = |o: Obj| handle(&mut cache, None, Msg::Apply(o), 0);
    add(Obj::Flavor(Box::new(flavor("a100"))));
    for q in 0..30 {
        add(Obj::ClusterQueue(Box::new(cq(&format!("cq-{q}"), 64))));
        add(Obj::LocalQueue(Box::new(lq(
            "research",
            &format!("lq-{q}"),
            &format!("cq-{q}"),
        ))));
    }
    let template = job_fixture("job-suspended-create-response.json");
    // One at a time, as the watches deliver them.
    for i in 0..15_000 {
        let mut j = template.clone();
        j.metadata.name = Some(format!("job-{i}"));
        j.metadata.uid = Some(format!("job-uid-{i}"));
        j.metadata
            .labels
            .get_or_insert_default()
            .insert(sluice_api::labels::QUEUE.into(), format!("lq-{}", i % 30));
        let mut wl = sluice_kinds::job::workload_for_job(&j, false, |_| None, |_| None).unwrap();
        wl.metadata.uid = Some(format!("wl-uid-{i}"));
        sluice_kinds::job::slim_template(&mut wl.spec.pod_sets[0].template);
        add(Obj::Job(Arc::new(j)));
        add(Obj::Workload(Arc::new(wl)));
    }
    for k in Kind::all() {
        handle(&mut cache, None, Msg::InitDone(k), 0);
    }
    eprintln!("cached: {} MiB", rss_kib() / 1024);
    let mut ix = build_index(&cache, &IndexConfig::default());
    eprintln!("indexed: {} MiB", rss_kib() / 1024);
    let (plans, _) = ix.cycle(now_ms());
    let admitted = plans.iter().filter(|p| p.purpose.label() == "admit").count();
    drop(plans);
    let after = rss_kib();
    eprintln!(
        "RSS {} MiB (grew {} MiB) with 15000 Workloads + Jobs, 30 ClusterQueues, {admitted} admitted",
        after / 1024,
        after.saturating_sub(before) / 1024
    );
    // The target is 100 MiB; measured 90 MiB (release build, glibc
    // malloc): ~34 MiB cache, ~42 MiB index and engine, ~14 MiB the first
    // cycle (500 explanation plans). A guard against regressions (debug
    // builds use more), not the target.
    assert!(after <= 130 * 1024, "RSS {after} KiB");
    // The positions tick: a forecast on a copy of the engine, then the
    // LocalQueues' lists and the workloads' positions.
    let started = std::time::Instant::now();
    let job = ix.forecast_job(now_ms());
    let copied = started.elapsed();
    let estimates = job.run();
    let forecast = started.elapsed();
    let peak = rss_kib();
    ix.refresh_positions(estimates, now_ms(), true);
    eprintln!(
        "positions tick: engine copied in {copied:?}, forecast done in {forecast:?}, refreshed in {:?}; RSS {} MiB during, {} MiB after",
        started.elapsed(),
        peak / 1024,
        rss_kib() / 1024
    );
}

/// Memory that placement adds: 5 000 Nodes and 100 000 bound pods (the
/// recorded payloads, varied), decoded as the watches decode them and
/// applied to a leader's cache and index, then a cycle. Run with
/// `cargo test -p sluice-controller --release -- --ignored memory --nocapture`.
#[test]
#[ignore = "measurement; run alone"]
fn memory_with_5000_nodes_and_100000_pods() {
    use k8s_openapi::api::core::v1::{Node, Pod};
    let config = IndexConfig {
        placement: sluice_scheduler::PlacementMode::Nodes,
        ..IndexConfig::default()
    };
    let mut ix = crate::index::Index::new(config);
    let mut cache = Cache::default();
    for k in Kind::all() {
        handle(&mut cache, Some(&mut ix), Msg::Init(k), 0);
    }
    handle(
        &mut cache,
        Some(&mut ix),
        Msg::Apply(Obj::Flavor(Box::new(flavor("a100")))),
        0,
    );
    let before = rss_kib();
    let node: Node = serde_json::from_value(crate::testing::fixture("node-gpu-create-response.json")).unwrap();
    let pod: Pod = serde_json::from_value(crate::testing::fixture("pod-of-job-running.json")).unwrap();
    for i in 0..5_000 {
        let mut n = node.clone();
        let name = format!("gpu-node-{i}");
        n.metadata.name = Some(name.clone());
        let labels = n.metadata.labels.get_or_insert_default();
        labels.insert("kubernetes.io/hostname".into(), name);
        labels.insert("gpu".into(), "a100".into());
        labels.insert("rack".into(), format!("rack-{}", i / 32));
        let spec = sluice_convert::nodes::node(&n).unwrap();
        handle(&mut cache, Some(&mut ix), Msg::Apply(Obj::Node(Box::new(spec))), 0);
    }
    let nodes = rss_kib();
    for i in 0..100_000 {
        let mut p = pod.clone();
        p.metadata.name = Some(format!("pod-{i}"));
        p.metadata.namespace = Some(format!("team-{}", i % 50));
        p.metadata
            .labels
            .get_or_insert_default()
            .insert("controller-uid".into(), format!("job-uid-{}", i / 8));
        p.spec.as_mut().unwrap().node_name = Some(format!("gpu-node-{}", i % 5_000));
        let key = format!("team-{}/pod-{i}", i % 50);
        let entry = sluice_convert::nodes::bound_pod(&p).unwrap().map(|b| {
            Arc::new(crate::index::PodEntry::new(
                &format!("team-{}", i % 50),
                p.metadata.labels.as_ref(),
                b,
            ))
        });
        handle(&mut cache, Some(&mut ix), Msg::Apply(Obj::Pod(key, entry)), 0);
    }
    for k in Kind::all() {
        handle(&mut cache, Some(&mut ix), Msg::InitDone(k), 0);
    }
    let pods = rss_kib();
    let _ = ix.cycle(now_ms());
    let after = rss_kib();
    assert_eq!(ix.placement_counts(), (100_000, 5_000));
    eprintln!(
        "placement: before {} MiB; +5000 nodes {} MiB; +100000 pods {} MiB; after a cycle {} MiB: {} MiB added",
        before / 1024,
        nodes / 1024,
        pods / 1024,
        after / 1024,
        after.saturating_sub(before) / 1024
    );
    // The budget: at most 150 MiB for 5 000 nodes and 100 000 pods.
    assert!(
        after.saturating_sub(before) <= 150 * 1024,
        "added {} KiB",
        after - before
    );
}
