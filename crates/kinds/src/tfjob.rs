//! `kubeflow.org/v1` TFJob (TensorFlow, Kubeflow's training operator): a
//! map of roles at `spec.tfReplicaSpecs` (Chief, Master, PS, Worker, Evaluator), as a PyTorchJob
//! is; every rule is [`crate::kubeflow`]'s. Workload `tfjob-<name>`, one pod
//! set per role named after it in lower case; its pods carry
//! `training.kubeflow.org/job-name` and `operator-name=tfjob-controller`.

use crate::kubeflow::{GROUP, Kubeflow};
use crate::{JobKind, Resource};

pub(crate) const TF_JOB: Kubeflow = Kubeflow {
    kind: JobKind::TfJob,
    resource: Resource {
        group: GROUP,
        version: "v1",
        api_version: "kubeflow.org/v1",
        kind: "TFJob",
        plural: "tfjobs",
    },
    field: "tfReplicaSpecs",
    flag: "kubeflow.org/tfjob",
    prefix: "tfjob-",
    operator: "tfjob-controller",
    invalid: "InvalidTFJob",
};
