//! `kubeflow.org/v1` PaddleJob (PaddlePaddle, Kubeflow's training operator): a
//! map of roles at `spec.paddleReplicaSpecs` (Master, Worker), as a PyTorchJob
//! is; every rule is [`crate::kubeflow`]'s. Workload `paddlejob-<name>`, one pod
//! set per role named after it in lower case; its pods carry
//! `training.kubeflow.org/job-name` and `operator-name=paddlejob-controller`.

use crate::kubeflow::{GROUP, Kubeflow};
use crate::{JobKind, Resource};

pub(crate) const PADDLE_JOB: Kubeflow = Kubeflow {
    kind: JobKind::PaddleJob,
    resource: Resource {
        group: GROUP,
        version: "v1",
        api_version: "kubeflow.org/v1",
        kind: "PaddleJob",
        plural: "paddlejobs",
    },
    field: "paddleReplicaSpecs",
    flag: "kubeflow.org/paddlejob",
    prefix: "paddlejob-",
    operator: "paddlejob-controller",
    invalid: "InvalidPaddleJob",
};
