//! `kubeflow.org/v1` XGBoostJob (XGBoost, Kubeflow's training operator): a
//! map of roles at `spec.xgbReplicaSpecs` (Master, Worker), as a PyTorchJob
//! is; every rule is [`crate::kubeflow`]'s. Workload `xgboostjob-<name>`, one pod
//! set per role named after it in lower case; its pods carry
//! `training.kubeflow.org/job-name` and `operator-name=xgboostjob-controller`.

use crate::kubeflow::{GROUP, Kubeflow};
use crate::{JobKind, Resource};

pub(crate) const XGBOOST_JOB: Kubeflow = Kubeflow {
    kind: JobKind::XgBoostJob,
    resource: Resource {
        group: GROUP,
        version: "v1",
        api_version: "kubeflow.org/v1",
        kind: "XGBoostJob",
        plural: "xgboostjobs",
    },
    field: "xgbReplicaSpecs",
    flag: "kubeflow.org/xgboostjob",
    prefix: "xgboostjob-",
    operator: "xgboostjob-controller",
    invalid: "InvalidXGBoostJob",
};
