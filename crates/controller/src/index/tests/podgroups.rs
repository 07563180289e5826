//! Gated pods (servers with pod scheduling gates; objects with
//! `spec.schedulingGates`, as the webhook leaves them): a Workload per
//! pod group, made once whole; admission ungates, eviction deletes.

use super::*;
use sluice_kinds::pod::{GatedPod, gated_pod};

fn gated(name: &str, group: Option<(&str, u32)>, gpus: u32) -> GatedPod {
    let mut labels = json!({"sluice.dev/queue": "team-a", "sluice.dev/managed": "true"});
    let mut annotations = json!({});
    if let Some((g, n)) = group {
        labels["sluice.dev/pod-group"] = json!(g);
        annotations["sluice.dev/pod-group-total-count"] = json!(n.to_string());
    }
    gated_pod(
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
                         "labels": labels, "annotations": annotations},
            "spec": {"schedulingGates": [{"name": "sluice.dev/admission"}],
                     "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
            "status": {"phase": "Pending"}
        }),
        false,
    )
    .unwrap()
}

fn pod_key(name: &str) -> ObjKey {
    ObjKey::new(NS, name)
}

fn gated_index() -> Index {
    ready_index_with(IndexConfig {
        pod_gates: true,
        ..IndexConfig::default()
    })
}

/// Applies the pods and stores the Workload the plans create.
fn apply(ix: &mut Index, pods: &[GatedPod], now: i64) -> Vec<Plan> {
    for p in pods {
        ix.apply_gated_pod(&pod_key(&p.name), Some(p.clone()), now);
    }
    let plans = ix.take_plans();
    for p in &plans {
        if let Some(Step::ApplyWorkload(wl)) = p.steps.first() {
            let mut wl = (**wl).clone();
            wl.metadata.uid = Some(format!("wl-uid-{}", wl.metadata.name.clone().unwrap()));
            wl.metadata.generation = Some(1);
            wl.metadata.creation_timestamp = Some(time_of(T0));
            ix.apply_workload(wl, now);
        }
    }
    plans
}

fn steps_of<'a>(plans: &'a [Plan], kind: &str) -> Vec<&'a Step> {
    plans
        .iter()
        .flat_map(|p| p.steps.iter())
        .filter(|s| s.kind() == kind)
        .collect()
}

#[test]
fn a_pod_group_is_made_once_whole_and_its_pods_are_ungated_at_admission() {
    let mut ix = gated_index();
    let group = [gated("w-0", Some(("g", 2)), 4), gated("w-1", Some(("g", 2)), 4)];
    assert!(apply(&mut ix, &group[..1], T0).is_empty(), "waits for the whole group");
    let plans = apply(&mut ix, &group[1..], T0);
    assert_eq!(purposes(&plans), ["create_workload"]);
    let Step::ApplyWorkload(wl) = &plans[0].steps[0] else {
        panic!()
    };
    assert_eq!(wl.metadata.name.as_deref(), Some("pod-g"));
    assert_eq!(wl.spec.pod_sets[0].count, 2);
    let (plans, _) = ix.cycle(T0 + 1000);
    assert_eq!(purposes(&plans), ["admit"]);
    let patches = steps_of(&plans, "pod");
    assert_eq!(patches.len(), 2, "{plans:?}");
    let Step::PatchPod {
        key,
        patch: sluice_kinds::ObjPatch::Json(ops),
    } = patches[0]
    else {
        panic!()
    };
    assert_eq!(key, &pod_key("w-0"));
    let ops = ops.as_array().unwrap();
    assert_eq!(ops[0]["op"], "test");
    assert_eq!(ops[1], json!({"op": "remove", "path": "/spec/schedulingGates/0"}));
    assert!(
        ops.iter()
            .any(|o| o["path"] == "/spec/nodeSelector" && o["value"] == json!({"gpu": "a100"}))
    );
    // The pods observed ungated and running: nothing more.
    let running: Vec<GatedPod> = group
        .iter()
        .map(|p| GatedPod {
            gate_at: None,
            ..p.clone()
        })
        .collect();
    assert!(apply(&mut ix, &running, T0 + 2000).is_empty());
    // They all succeed: the Workload finishes and releases its quota.
    let done: Vec<GatedPod> = running
        .iter()
        .map(|p| GatedPod {
            finished: Some(true),
            ..p.clone()
        })
        .collect();
    let plans = apply(&mut ix, &done, T0 + 3000);
    assert_eq!(purposes(&plans), ["release"]);
}

#[test]
fn an_evicted_groups_pods_are_deleted_and_its_quota_released_once_they_are_gone() {
    let mut ix = gated_index();
    let pods = [gated("solo", None, 8)];
    apply(&mut ix, &pods, T0);
    let (plans, _) = ix.cycle(T0 + 1000);
    assert_eq!(purposes(&plans), ["admit"]);
    let running = GatedPod {
        gate_at: None,
        ..pods[0].clone()
    };
    apply(&mut ix, std::slice::from_ref(&running), T0 + 2000);
    // An urgent Job of another kind needs the 8 GPUs: the pod is deleted.
    let urgent = mk_job("urgent", "team-a", 1, 8);
    ix.apply_job(urgent.clone(), T0 + 3000);
    ix.take_plans();
    ix.apply_workload(stored_workload(&urgent, 100, 3), T0 + 3000);
    let (plans, _) = ix.cycle(T0 + 4000);
    let deletions = steps_of(&plans, "pod");
    assert!(
        deletions
            .iter()
            .any(|s| matches!(s, Step::DeletePod { key } if key == &pod_key("solo"))),
        "{plans:?}"
    );
    // Still there: the quota is held. Gone: released, and the Job admitted.
    assert!(ix.engine().workload_state("wl-uid-pod-solo") == Some(sluice_scheduler::WorkloadState::Evicting));
    ix.apply_gated_pod(&pod_key("solo"), None, T0 + 5000);
    let (plans, _) = ix.cycle(T0 + 6000);
    assert!(purposes(&plans).contains(&"admit"), "{:?}", purposes(&plans));
}

#[test]
fn a_pod_deleted_while_its_group_waits_breaks_it_until_it_is_whole_again() {
    let mut ix = ready_index_with(IndexConfig {
        pod_gates: true,
        ..IndexConfig::default()
    });
    // 3 × 4 GPUs never fit 8: the group waits.
    let group = [
        gated("a", Some(("big", 3)), 4),
        gated("b", Some(("big", 3)), 4),
        gated("c", Some(("big", 3)), 4),
    ];
    apply(&mut ix, &group, T0);
    ix.cycle(T0 + 1000);
    ix.apply_gated_pod(&pod_key("c"), None, T0 + 2000);
    let plans = ix.take_plans();
    assert!(
        plans
            .iter()
            .flat_map(|p| &p.steps)
            .any(|s| matches!(s, Step::DeleteWorkload { .. })),
        "{plans:?}"
    );
}
