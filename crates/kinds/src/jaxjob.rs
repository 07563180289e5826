//! `kubeflow.org/v1` JAXJob (JAX, Kubeflow's training operator): a
//! map of roles at `spec.jaxReplicaSpecs` (Worker), as a PyTorchJob
//! is; every rule is [`crate::kubeflow`]'s. Workload `jaxjob-<name>`, one pod
//! set per role named after it in lower case; its pods carry
//! `training.kubeflow.org/job-name` and `operator-name=jaxjob-controller`.

use crate::kubeflow::{GROUP, Kubeflow};
use crate::{JobKind, Resource};

pub(crate) const JAX_JOB: Kubeflow = Kubeflow {
    kind: JobKind::JaxJob,
    resource: Resource {
        group: GROUP,
        version: "v1",
        api_version: "kubeflow.org/v1",
        kind: "JAXJob",
        plural: "jaxjobs",
    },
    field: "jaxReplicaSpecs",
    flag: "kubeflow.org/jaxjob",
    prefix: "jaxjob-",
    operator: "jaxjob-controller",
    invalid: "InvalidJAXJob",
};
