//! Label and annotation keys Sluice reads and writes, documented once.
//!
//! | key | on | meaning |
//! |-----|----|---------|
//! | [`QUEUE`] `sluice.dev/queue` | Job | name of the LocalQueue (in the Job's namespace) the Job is queued in; the webhook only looks at Jobs that carry it |
//! | [`PRIORITY_CLASS`] `sluice.dev/priority-class` | Job | name of a WorkloadPriorityClass; wins over the pod template's Kubernetes PriorityClass |
//! | [`GANG`] `sluice.dev/gang` | Job | gang name: Jobs in one namespace with the same value are admitted together or not at all |
//! | [`GANG_SIZE`] `sluice.dev/gang-size` | Job | number of Jobs in the gang; admission waits until that many have arrived |
//! | [`DEFAULT_QUEUE`] `sluice.dev/default-queue` | Namespace | set to [`DEFAULT_QUEUE_ENABLED`] to queue unlabelled Jobs into the namespace's LocalQueue named [`DEFAULT_LOCAL_QUEUE_NAME`] |
//! | [`KUEUE_QUEUE_NAME`] `kueue.x-k8s.io/queue-name` | Job | Kueue's queue label, honoured like [`QUEUE`] only when the compatibility option is on (off by default) |
//! | [`GPU_FIXES`] `sluice.dev/gpu-fixes` | Pod, Job pod template | [`GPU_FIXES_SKIP`] asks the webhook to leave the pod alone (no GPU fixes, no `NVIDIA_VISIBLE_DEVICES` check); honoured only in namespaces labelled [`ALLOW_GPU_FIXES_SKIP`] |
//! | [`ALLOW_GPU_FIXES_SKIP`] `sluice.dev/allow-gpu-fixes-skip` | Namespace | `"true"` marks the namespace as one for GPU system pods: its pods may opt out with [`GPU_FIXES`], and the pods of its DaemonSets (verified to exist) are left alone; namespace labels are the cluster admin's, so a pod author cannot grant it to itself |
//! | [`MIN_PARALLELISM`] `sluice.dev/min-parallelism` | batch/v1 Job (annotation) | fewest pods the Job can run with: the `minCount` of its Workload's pod set |
//! | [`PREEMPTION_NOTICE`] `sluice.dev/preemption-notice` | Pod (annotation, written by Sluice) | the RFC 3339 time at which the pod's preempted workload is suspended (ClusterQueue `spec.preemption.noticeSeconds`) |
//! | [`CHECKPOINT_DONE`] `sluice.dev/checkpoint-done` | queued object (annotation, written by the job) | an RFC 3339 time: a notice that began at or before it is acknowledged, and the workload is suspended at once |
//! | [`HELD_REPLICAS`] `sluice.dev/held-replicas` | Deployment, StatefulSet, LeaderWorkerSet (annotation, written by Sluice) | the replicas the owner asked for, kept while Sluice holds the object at `spec.replicas: 0` until it is admitted |
//! | [`POD_OWNER`] `sluice.dev/owner-uid` | pod template of a started Deployment, StatefulSet or LeaderWorkerSet (written by Sluice) | the object's uid: which pods are its |
//! | [`POD_GROUP`] `sluice.dev/pod-group` | Pod | pod group name: pods in one namespace with the same value are one Workload, admitted together (with [`POD_GROUP_TOTAL`]) |
//! | [`POD_GROUP_TOTAL`] `sluice.dev/pod-group-total-count` | Pod (annotation) | how many pods the group has: its Workload is made once that many exist |
//! | [`MANAGED_POD`] `sluice.dev/managed` | Pod (written by the webhook) | `"true"` on a pod the webhook gated ([`ADMISSION_GATE`]): the controller watches these |

/// Job label naming the LocalQueue (in the Job's namespace) that the Job is
/// queued in. Jobs without it are never held by Sluice.
pub const QUEUE: &str = "sluice.dev/queue";

/// Job label naming a WorkloadPriorityClass. When absent, the priority is the
/// value of the pod template's Kubernetes PriorityClass, else 0.
pub const PRIORITY_CLASS: &str = "sluice.dev/priority-class";

/// Job label naming a gang: Jobs in one namespace with the same value are
/// admitted together, all or nothing.
pub const GANG: &str = "sluice.dev/gang";

/// Job label with the number of Jobs in the gang (a positive integer written
/// as a string). The gang is not considered for admission until that many
/// Jobs with the same [`GANG`] value exist.
pub const GANG_SIZE: &str = "sluice.dev/gang-size";

/// Namespace label: with the value [`DEFAULT_QUEUE_ENABLED`], Jobs created in
/// the namespace without a [`QUEUE`] label are queued into the LocalQueue
/// named [`DEFAULT_LOCAL_QUEUE_NAME`].
pub const DEFAULT_QUEUE: &str = "sluice.dev/default-queue";

/// The value of [`DEFAULT_QUEUE`] that turns default queueing on.
pub const DEFAULT_QUEUE_ENABLED: &str = "enabled";

/// Name of the LocalQueue used for Jobs in namespaces labelled with
/// [`DEFAULT_QUEUE`].
pub const DEFAULT_LOCAL_QUEUE_NAME: &str = "default";

/// Kueue's queue label. Honoured like [`QUEUE`] only when the compatibility
/// option is on (off by default), so Kueue users can migrate Job manifests
/// unchanged. [`QUEUE`] wins when both are present.
pub const KUEUE_QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";

/// Pod (or Job pod template) label: with the value [`GPU_FIXES_SKIP`], the
/// webhook leaves the pod alone, in namespaces that allow it
/// ([`ALLOW_GPU_FIXES_SKIP`]). For GPU system pods (device plugins,
/// exporters, validators) that legitimately see every GPU.
pub const GPU_FIXES: &str = "sluice.dev/gpu-fixes";

/// The value of [`GPU_FIXES`] that opts a pod out.
pub const GPU_FIXES_SKIP: &str = "skip";

/// Namespace label: `"true"` honours [`GPU_FIXES`] on the namespace's pods,
/// and exempts the pods of the namespace's DaemonSets (node agents) from
/// the GPU rules. Only someone who may label namespaces (the cluster
/// admin) can set it, so a pod author cannot exempt a pod where the admin
/// did not allow it.
pub const ALLOW_GPU_FIXES_SKIP: &str = "sluice.dev/allow-gpu-fixes-skip";

/// Annotation on a queued object (Job, JobSet, …): how long it is expected
/// to run once admitted (`45m`, `2h`; a number needs its unit), for start-time
/// estimates. Without it, a Job's `spec.activeDeadlineSeconds`, else the
/// median run time observed in its ClusterQueue.
pub const EXPECTED_RUNTIME: &str = "sluice.dev/expected-runtime";

/// The [`EXPECTED_RUNTIME`] annotation read, in milliseconds: `Ok(None)`
/// without it, `Err` with what is wrong when it is not a duration.
pub fn expected_runtime_ms(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<Option<i64>, String> {
    let Some(text) = annotations.and_then(|a| a.get(EXPECTED_RUNTIME)) else {
        return Ok(None);
    };
    let d = crate::duration::parse(text, crate::duration::Units::FLAGS)
        .map_err(|e| format!("annotation {EXPECTED_RUNTIME}: expected a duration such as 45m or 2h; {e}"))?;
    Ok(Some(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
}

/// Annotation on a queued object: `required` places every pod set within
/// one topology domain of its flavor (the flavor's `topologyKey`).
pub const TOPOLOGY: &str = "sluice.dev/topology";

/// Whether the [`TOPOLOGY`] annotation requires one domain; `Err` with
/// what is wrong when its value is not `required`.
pub fn topology_required(annotations: Option<&std::collections::BTreeMap<String, String>>) -> Result<bool, String> {
    match annotations.and_then(|a| a.get(TOPOLOGY)).map(String::as_str) {
        None => Ok(false),
        Some("required") => Ok(true),
        Some(other) => Err(format!("annotation {TOPOLOGY}: expected \"required\", got {other:?}")),
    }
}

/// Annotation on a batch/v1 Job: the fewest pods it can run with, an
/// integer from 1 to its `spec.parallelism` written as a string. The
/// controller records it as the `minCount` of the Job's pod set (Kueue's
/// `kueue.x-k8s.io/job-min-parallelism`). Other kinds do not take it.
pub const MIN_PARALLELISM: &str = "sluice.dev/min-parallelism";

/// The [`MIN_PARALLELISM`] annotation read against the Job's
/// `parallelism`: `Ok(None)` without it, `Err` with what is wrong when it
/// is not an integer from 1 to `parallelism`.
pub fn min_parallelism(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
    parallelism: i32,
) -> Result<Option<i32>, String> {
    let Some(text) = annotations.and_then(|a| a.get(MIN_PARALLELISM)) else {
        return Ok(None);
    };
    match text.trim().parse::<i32>() {
        Ok(n) if (1..=parallelism).contains(&n) => Ok(Some(n)),
        _ => Err(format!(
            "annotation {MIN_PARALLELISM}: expected an integer from 1 to spec.parallelism ({parallelism}), got {text:?}"
        )),
    }
}

/// Annotation Sluice writes on the running pods of a workload it preempts
/// with a notice (ClusterQueue `spec.preemption.noticeSeconds`): the RFC
/// 3339 time at which the workload is suspended unless it acknowledges
/// sooner ([`CHECKPOINT_DONE`]). A container reads it through a downward
/// API volume (`metadata.annotations['sluice.dev/preemption-notice']`).
pub const PREEMPTION_NOTICE: &str = "sluice.dev/preemption-notice";

/// Annotation a job writes on its queued object (the Job, the PyTorchJob,
/// …) once it has saved its state: an RFC 3339 time. A preemption notice
/// that began at or before that time is acknowledged and the workload is
/// suspended at once; an earlier time (left from a previous preemption)
/// acknowledges nothing. It can only shorten a notice.
pub const CHECKPOINT_DONE: &str = "sluice.dev/checkpoint-done";

/// Annotation Sluice writes on a serving object it holds (a Deployment,
/// StatefulSet or LeaderWorkerSet queued and not admitted): the replicas
/// its owner asked for. The object is held at `spec.replicas: 0`; at
/// admission Sluice sets `spec.replicas` back to this and removes it.
pub const HELD_REPLICAS: &str = "sluice.dev/held-replicas";

/// Label Sluice puts on the pod templates of a serving object it starts
/// (a Deployment, StatefulSet or LeaderWorkerSet): the object's uid. It
/// tells which pods are that object's (their own labels are their
/// author's), and goes from the templates when Sluice puts back what the
/// user wrote.
pub const POD_OWNER: &str = "sluice.dev/owner-uid";

/// Pod label naming a pod group: the pods of one namespace with the same
/// value are one Workload, admitted together (Kueue's
/// `kueue.x-k8s.io/pod-group-name`).
pub const POD_GROUP: &str = "sluice.dev/pod-group";

/// Pod annotation: how many pods its group has (a positive integer). The
/// group's Workload is made once that many pods exist (Kueue's
/// `kueue.x-k8s.io/pod-group-total-count`).
pub const POD_GROUP_TOTAL: &str = "sluice.dev/pod-group-total-count";

/// Pod label the webhook writes, `"true"`, on a pod it gates with
/// [`ADMISSION_GATE`] (servers with pod scheduling gates): the controller
/// watches the pods that carry it.
pub const MANAGED_POD: &str = "sluice.dev/managed";

/// The pod scheduling gate (`spec.schedulingGates`, Kubernetes 1.27+) that
/// holds a queued pod until Sluice admits it.
pub const ADMISSION_GATE: &str = "sluice.dev/admission";

/// Returns the queue a Job's labels select: [`QUEUE`], else (when
/// `kueue_compat` is on) [`KUEUE_QUEUE_NAME`].
pub fn queue_name(labels: &std::collections::BTreeMap<String, String>, kueue_compat: bool) -> Option<&str> {
    labels
        .get(QUEUE)
        .or_else(|| {
            if kueue_compat {
                labels.get(KUEUE_QUEUE_NAME)
            } else {
                None
            }
        })
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn expected_runtime_is_a_duration() {
        let mut a = BTreeMap::new();
        assert_eq!(expected_runtime_ms(Some(&a)), Ok(None));
        a.insert(EXPECTED_RUNTIME.to_string(), "1h30m".to_string());
        assert_eq!(expected_runtime_ms(Some(&a)), Ok(Some(5_400_000)));
        a.insert(EXPECTED_RUNTIME.to_string(), "soon".to_string());
        assert!(
            expected_runtime_ms(Some(&a))
                .unwrap_err()
                .starts_with("annotation sluice.dev/expected-runtime: expected a duration")
        );
    }

    #[test]
    fn min_parallelism_is_an_integer_up_to_parallelism() {
        let mut a = BTreeMap::new();
        assert_eq!(min_parallelism(None, 4), Ok(None));
        assert_eq!(min_parallelism(Some(&a), 4), Ok(None));
        for (text, want) in [("1", 1), ("3", 3), ("4", 4), (" 2 ", 2)] {
            a.insert(MIN_PARALLELISM.to_string(), text.to_string());
            assert_eq!(min_parallelism(Some(&a), 4), Ok(Some(want)), "{text:?}");
        }
        for text in ["0", "5", "-1", "two", "", "1.5"] {
            a.insert(MIN_PARALLELISM.to_string(), text.to_string());
            assert_eq!(
                min_parallelism(Some(&a), 4),
                Err(format!(
                    "annotation sluice.dev/min-parallelism: expected an integer from 1 to spec.parallelism (4), got {text:?}"
                )),
            );
        }
    }

    #[test]
    fn queue_label_precedence() {
        let mut labels = BTreeMap::new();
        labels.insert(KUEUE_QUEUE_NAME.to_string(), "kq".to_string());
        assert_eq!(queue_name(&labels, false), None);
        assert_eq!(queue_name(&labels, true), Some("kq"));
        labels.insert(QUEUE.to_string(), "sq".to_string());
        assert_eq!(queue_name(&labels, true), Some("sq"));
        assert_eq!(queue_name(&labels, false), Some("sq"));
    }
}
