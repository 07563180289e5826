//! The webhook's configuration file (`--config`, YAML).
//!
//! Every field has a default, so an empty file (or no file) gives the
//! behaviour documented in the issue: `nvidia.com/gpu` and `nvidia.com/mig-*`
//! count as GPUs, runtimeClassName `nvidia` where that RuntimeClass exists
//! (`auto`), the `nvidia.com/gpu` Exists NoSchedule toleration, node
//! affinity `nvidia.com/gpu.present In [true]`, `NVIDIA_VISIBLE_DEVICES`
//! escapes denied, `kube-system` and the GPU operator's namespaces
//! (`gpu-operator`, `nvidia-gpu-operator`) excluded.

use serde::{Deserialize, Serialize};

/// What to do with a container that sets `NVIDIA_VISIBLE_DEVICES` without
/// requesting a GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VisibleDevicesPolicy {
    /// Reject the object with an explanation.
    #[default]
    Deny,
    /// Admit it, with a warning to the user.
    Warn,
    /// Say nothing.
    Allow,
}

/// A toleration the webhook adds to GPU pods (Kubernetes `Toleration` fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TolerationSpec {
    #[serde(default)]
    pub key: String,
    /// `Exists` or `Equal` (Kubernetes' default is `Equal`).
    #[serde(default)]
    pub operator: String,
    #[serde(default)]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule`, `NoExecute`, or empty for all effects.
    #[serde(default)]
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// Which RuntimeClass GPU pods get (`gpu.runtimeClassName`): `auto` (the
/// default) sets `nvidia` where a RuntimeClass of that name exists, a name
/// sets that class where it exists, `none` (or `""`) never sets one. A
/// class known not to exist is never written: the API server would reject
/// every pod that names it, after the webhook said yes. Where the webhook
/// cannot know (it does not watch the cluster, or has not listed
/// RuntimeClasses yet), `auto` sets nothing and a name is trusted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum RuntimeClassPolicy {
    #[default]
    Auto,
    Off,
    Named(String),
}

impl RuntimeClassPolicy {
    /// The class `auto` looks for.
    pub const AUTO_NAME: &'static str = "nvidia";

    /// The class to set, given which RuntimeClasses exist (`None`: not
    /// known).
    pub fn resolve(&self, exists: impl Fn(&str) -> Option<bool>) -> RuntimeClass<'_> {
        match self {
            Self::Off => RuntimeClass::Off,
            Self::Auto if exists(Self::AUTO_NAME) == Some(true) => RuntimeClass::Set(Self::AUTO_NAME),
            Self::Auto => RuntimeClass::Off,
            Self::Named(name) if exists(name) == Some(false) => RuntimeClass::Missing(name),
            Self::Named(name) => RuntimeClass::Set(name),
        }
    }
}

impl From<String> for RuntimeClassPolicy {
    fn from(s: String) -> Self {
        match s.as_str() {
            "auto" => Self::Auto,
            "" | "none" => Self::Off,
            _ => Self::Named(s),
        }
    }
}

impl From<RuntimeClassPolicy> for String {
    fn from(p: RuntimeClassPolicy) -> Self {
        match p {
            RuntimeClassPolicy::Auto => "auto".to_owned(),
            RuntimeClassPolicy::Off => "none".to_owned(),
            RuntimeClassPolicy::Named(n) => n,
        }
    }
}

/// What a GPU pod gets for `runtimeClassName`, the cluster considered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeClass<'a> {
    /// Set this class (it exists).
    Set(&'a str),
    /// The configured class does not exist: set nothing, and say so.
    Missing(&'a str),
    /// Set nothing.
    Off,
}

/// The node-affinity requirement ANDed into every required node selector term.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAffinitySpec {
    pub key: String,
    /// Node selector operator: `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`.
    #[serde(default = "default_in")]
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

fn default_in() -> String {
    "In".to_owned()
}

/// GPU-fix settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GpuConfig {
    /// Resource names that are GPUs, exactly.
    pub resource_names: Vec<String>,
    /// Resource-name patterns that are GPUs: a trailing `*` matches any suffix.
    pub resource_patterns: Vec<String>,
    /// runtimeClassName set on GPU pods that have none: `auto`, a name, or
    /// `none` ([`RuntimeClassPolicy`]).
    pub runtime_class_name: RuntimeClassPolicy,
    /// Tolerations added to GPU pods unless an existing toleration covers them.
    pub tolerations: Vec<TolerationSpec>,
    /// Required node affinity added to GPU pods; `null` disables the fix.
    pub node_affinity: Option<NodeAffinitySpec>,
    /// Copy GPU amounts given only in requests into limits.
    pub copy_requests_to_limits: bool,
    /// `NVIDIA_VISIBLE_DEVICES` without a GPU request.
    pub visible_devices_policy: VisibleDevicesPolicy,
    /// Pods that ask for MIG slices (`nvidia.com/mig-*`): their own
    /// tolerations and node affinity instead of the whole-GPU ones.
    pub mig_slices: ShareFixes,
    /// Pods that ask for a replica of a shared (time-sliced or MPS) GPU:
    /// their node selector names `nvidia.com/gpu.sharing-strategy` or
    /// `nvidia.com/gpu.replicas`, or they request `nvidia.com/gpu.shared`.
    pub shared_gpus: ShareFixes,
}

/// The tolerations and node affinity of one kind of shared GPU; an unset
/// field takes the whole-GPU setting (`gpu.tolerations`, `gpu.nodeAffinity`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ShareFixes {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<TolerationSpec>>,
    /// `null`: no node affinity for these pods; absent: the whole-GPU one.
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<Option<NodeAffinitySpec>>,
}

/// A field that is present (even as `null`) is `Some`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// What kind of GPU a pod asks for, for its tolerations and node affinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuKind {
    /// Whole GPUs.
    Whole,
    /// MIG slices.
    MigSlice,
    /// A replica of a time-sliced or MPS GPU.
    Shared,
}

impl Default for GpuConfig {
    fn default() -> Self {
        Self {
            resource_names: vec!["nvidia.com/gpu".to_owned()],
            resource_patterns: vec!["nvidia.com/mig-*".to_owned()],
            runtime_class_name: RuntimeClassPolicy::Auto,
            tolerations: vec![TolerationSpec {
                key: "nvidia.com/gpu".to_owned(),
                operator: "Exists".to_owned(),
                value: String::new(),
                effect: "NoSchedule".to_owned(),
                toleration_seconds: None,
            }],
            node_affinity: Some(NodeAffinitySpec {
                key: "nvidia.com/gpu.present".to_owned(),
                operator: "In".to_owned(),
                values: vec!["true".to_owned()],
            }),
            copy_requests_to_limits: true,
            visible_devices_policy: VisibleDevicesPolicy::Deny,
            mig_slices: ShareFixes::default(),
            shared_gpus: ShareFixes::default(),
        }
    }
}

impl GpuConfig {
    /// The tolerations pods of `kind` get.
    pub fn tolerations_for(&self, kind: GpuKind) -> &[TolerationSpec] {
        let own = match kind {
            GpuKind::Whole => None,
            GpuKind::MigSlice => self.mig_slices.tolerations.as_deref(),
            GpuKind::Shared => self.shared_gpus.tolerations.as_deref(),
        };
        own.unwrap_or(&self.tolerations)
    }

    /// The node affinity pods of `kind` get (`None`: none).
    pub fn node_affinity_for(&self, kind: GpuKind) -> Option<&NodeAffinitySpec> {
        let own = match kind {
            GpuKind::Whole => None,
            GpuKind::MigSlice => self.mig_slices.node_affinity.as_ref(),
            GpuKind::Shared => self.shared_gpus.node_affinity.as_ref(),
        };
        own.map_or(self.node_affinity.as_ref(), Option::as_ref)
    }

    /// Whether a resource name counts as a GPU.
    pub fn is_gpu_resource(&self, name: &str) -> bool {
        self.resource_names.iter().any(|n| n == name)
            || self.resource_patterns.iter().any(|p| match p.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => p == name,
            })
    }
}

/// Namespaces excluded by default: the system's, and those the NVIDIA GPU
/// Operator installs into (its device plugin, DCGM exporter, validators
/// and node agents see every GPU without requesting one).
pub const DEFAULT_EXCLUDED_NAMESPACES: [&str; 3] = ["kube-system", "gpu-operator", "nvidia-gpu-operator"];

/// The service accounts the operators of the queued kinds run as in their
/// upstream default installs: JobSet (`jobset-system`), the MPI Operator
/// (`mpi-operator`), KubeRay (`ray-system`), Kubeflow Trainer v2
/// (`kubeflow-system`, whose controller makes a TrainJob's JobSet), the
/// Kubeflow training operator (`kubeflow`, which makes a PyTorchJob's,
/// TFJob's, … pods) and LeaderWorkerSet (`lws-system`). Objects and GPU
/// pods they make for the objects they run are those objects'.
pub const DEFAULT_OPERATORS: [&str; 6] = [
    "system:serviceaccount:jobset-system:jobset-controller-manager",
    "system:serviceaccount:mpi-operator:mpi-operator",
    "system:serviceaccount:ray-system:kuberay-operator",
    "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager",
    "system:serviceaccount:kubeflow:training-operator",
    "system:serviceaccount:lws-system:lws-controller-manager",
];

/// The whole webhook configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WebhookConfig {
    pub gpu: GpuConfig,
    /// Namespaces whose objects are never mutated. The namespace Sluice runs
    /// in is added at start-up (see [`WebhookConfig::with_own_namespace`]).
    pub excluded_namespaces: Vec<String>,
    /// The label that puts a Job in a LocalQueue.
    pub queue_label: String,
    /// Also honour Kueue's `kueue.x-k8s.io/queue-name` (the queue label wins
    /// when both are set), as the controller does with `--kueue-compat`.
    pub kueue_compat: bool,
    /// Users allowed to set or change a Workload's `status.admission`,
    /// besides the controller's service account, which
    /// [`WebhookConfig::with_own_namespace`] adds as
    /// `system:serviceaccount:<namespace>:<controllerServiceAccount>`.
    pub admission_writers: Vec<String>,
    /// The users the job operators run as (their service accounts): an
    /// object of a queued kind whose controller is a verified object of a
    /// kind that makes it (a JobSet's Job, a RayJob's RayCluster) is left
    /// to that owner only when one of these users, or an admission writer,
    /// creates or changes it. `userInfo.username` is set by the API server,
    /// so a tenant cannot claim it; an owner of the tenant's own making
    /// exempts nothing the tenant creates.
    pub operators: Vec<String>,
    /// Name of the controller's service account in the namespace Sluice
    /// runs in; empty trusts only `admissionWriters`.
    pub controller_service_account: String,
    /// How a queued GPU Pod (one with the queue label, or any GPU pod in a
    /// namespace that queues every object) that no queued object made is
    /// held until Sluice admits it.
    pub pods: PodHolding,
}

/// How a queued bare Pod is held (`pods` in the configuration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PodHolding {
    /// Gated where the API server has pod scheduling gates (Kubernetes
    /// 1.27+, read from its version when the webhook starts), else refused.
    #[default]
    Auto,
    /// Gated (`spec.schedulingGates`): the server must have them.
    Gate,
    /// Refused at create, with how to run it (a Job, a queued Deployment,
    /// or the admin's trust label).
    Refuse,
}

impl PodHolding {
    /// Whether pods are gated on a server that has (`true`) or lacks
    /// scheduling gates.
    pub fn gates(self, server_has_gates: bool) -> bool {
        match self {
            PodHolding::Auto => server_has_gates,
            PodHolding::Gate => true,
            PodHolding::Refuse => false,
        }
    }
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            gpu: GpuConfig::default(),
            excluded_namespaces: DEFAULT_EXCLUDED_NAMESPACES.iter().map(|n| (*n).to_owned()).collect(),
            queue_label: sluice_api::labels::QUEUE.to_owned(),
            kueue_compat: false,
            admission_writers: Vec::new(),
            operators: DEFAULT_OPERATORS.iter().map(|u| (*u).to_owned()).collect(),
            controller_service_account: crate::CONTROLLER_SERVICE_ACCOUNT.to_owned(),
            pods: PodHolding::default(),
        }
    }
}

/// A configuration file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing {path}: {message}")]
    Parse { path: String, message: String },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl WebhookConfig {
    /// Parses a YAML document; missing fields take their defaults.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let cfg: Self = if text.trim().is_empty() {
            Self::default()
        } else {
            serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
                path: origin.to_owned(),
                message: e.to_string(),
            })?
        };
        cfg.check()?;
        Ok(cfg)
    }

    /// Reads and parses a YAML file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_yaml(&text, &path.display().to_string())
    }

    /// Adds the namespace Sluice runs in to the excluded namespaces, and the
    /// controller's service account in it to the admission writers.
    pub fn with_own_namespace(mut self, namespace: &str) -> Self {
        if namespace.is_empty() {
            return self;
        }
        if !self.excluded_namespaces.iter().any(|n| n == namespace) {
            self.excluded_namespaces.push(namespace.to_owned());
        }
        if !self.controller_service_account.is_empty() {
            let user = format!("system:serviceaccount:{namespace}:{}", self.controller_service_account);
            if !self.admission_writers.contains(&user) {
                self.admission_writers.push(user);
            }
        }
        self
    }

    /// Whether this user may set or change a Workload's admission.
    pub fn is_admission_writer(&self, user: &str) -> bool {
        !user.is_empty() && self.admission_writers.iter().any(|w| w == user)
    }

    /// Whether objects this user makes for a verified owner are left to
    /// that owner: a job operator's service account, or an admission
    /// writer.
    pub fn acts_for_owners(&self, user: &str) -> bool {
        !user.is_empty() && (self.operators.iter().any(|o| o == user) || self.is_admission_writer(user))
    }

    /// The label that names a Job's queue, if any: the queue label, else
    /// (with `kueueCompat`) Kueue's.
    pub fn queue_label_of<'a>(
        &'a self,
        labels: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Option<&'a str> {
        let labels = labels?;
        if labels.contains_key(&self.queue_label) {
            Some(&self.queue_label)
        } else if self.kueue_compat && labels.contains_key(sluice_api::labels::KUEUE_QUEUE_NAME) {
            Some(sluice_api::labels::KUEUE_QUEUE_NAME)
        } else {
            None
        }
    }

    /// Whether objects in this namespace are left alone.
    pub fn is_excluded(&self, namespace: &str) -> bool {
        self.excluded_namespaces.iter().any(|n| n == namespace)
    }

    fn check(&self) -> Result<(), ConfigError> {
        for t in &self.gpu.tolerations {
            if !matches!(t.operator.as_str(), "" | "Equal" | "Exists") {
                return Err(ConfigError::Invalid(format!(
                    "gpu.tolerations: operator {:?} must be Equal or Exists",
                    t.operator
                )));
            }
            if t.operator == "Exists" && !t.value.is_empty() {
                return Err(ConfigError::Invalid(format!(
                    "gpu.tolerations: key {:?} has operator Exists and a value",
                    t.key
                )));
            }
            if t.key.is_empty() && t.operator != "Exists" {
                return Err(ConfigError::Invalid(
                    "gpu.tolerations: an empty key needs operator Exists".to_owned(),
                ));
            }
        }
        if let Some(a) = &self.gpu.node_affinity {
            if a.key.is_empty() {
                return Err(ConfigError::Invalid("gpu.nodeAffinity.key is empty".to_owned()));
            }
            let needs_values = matches!(a.operator.as_str(), "In" | "NotIn" | "Gt" | "Lt");
            let known = needs_values || matches!(a.operator.as_str(), "Exists" | "DoesNotExist");
            if !known || needs_values == a.values.is_empty() {
                return Err(ConfigError::Invalid(format!(
                    "gpu.nodeAffinity: operator {:?} with {} values is not a valid requirement",
                    a.operator,
                    a.values.len()
                )));
            }
        }
        if self.queue_label.is_empty() {
            return Err(ConfigError::Invalid("queueLabel is empty".to_owned()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        let cfg = WebhookConfig::from_yaml("", "t").unwrap();
        assert_eq!(cfg, WebhookConfig::default());
        assert!(cfg.gpu.is_gpu_resource("nvidia.com/gpu"));
        assert!(cfg.gpu.is_gpu_resource("nvidia.com/mig-1g.5gb"));
        assert!(!cfg.gpu.is_gpu_resource("nvidia.com/gpus"));
        assert!(!cfg.gpu.is_gpu_resource("cpu"));
        assert_eq!(cfg.gpu.visible_devices_policy, VisibleDevicesPolicy::Deny);
    }

    #[test]
    fn partial_yaml_overrides_only_what_it_names() {
        let yaml = "gpu:\n  runtimeClassName: nvidia-cdi\n  visibleDevicesPolicy: warn\n  resourcePatterns: []\nexcludedNamespaces: [kube-system, gpu-operator]\n";
        let cfg = WebhookConfig::from_yaml(yaml, "t").unwrap();
        assert_eq!(
            cfg.gpu.runtime_class_name,
            RuntimeClassPolicy::Named("nvidia-cdi".into())
        );
        assert_eq!(cfg.gpu.visible_devices_policy, VisibleDevicesPolicy::Warn);
        assert!(!cfg.gpu.is_gpu_resource("nvidia.com/mig-1g.5gb"));
        assert_eq!(cfg.gpu.tolerations, GpuConfig::default().tolerations);
        assert!(cfg.is_excluded("gpu-operator"));
        let cfg = cfg.with_own_namespace("sluice-system");
        assert!(cfg.is_excluded("sluice-system"));
    }

    #[test]
    fn runtime_class_is_auto_a_name_or_none_and_only_set_where_it_exists() {
        let policy = |yaml: &str| WebhookConfig::from_yaml(yaml, "t").unwrap().gpu.runtime_class_name;
        assert_eq!(policy(""), RuntimeClassPolicy::Auto);
        assert_eq!(policy("gpu: {runtimeClassName: auto}"), RuntimeClassPolicy::Auto);
        assert_eq!(policy("gpu: {runtimeClassName: none}"), RuntimeClassPolicy::Off);
        assert_eq!(policy("gpu: {runtimeClassName: \"\"}"), RuntimeClassPolicy::Off);
        let none = |_: &str| Some(false);
        let unknown = |_: &str| None;
        let nvidia = |n: &str| Some(n == "nvidia");
        assert_eq!(RuntimeClassPolicy::Auto.resolve(nvidia), RuntimeClass::Set("nvidia"));
        assert_eq!(RuntimeClassPolicy::Auto.resolve(none), RuntimeClass::Off);
        assert_eq!(RuntimeClassPolicy::Auto.resolve(unknown), RuntimeClass::Off);
        let named = RuntimeClassPolicy::Named("kata".into());
        assert_eq!(named.resolve(|n| Some(n == "kata")), RuntimeClass::Set("kata"));
        assert_eq!(named.resolve(nvidia), RuntimeClass::Missing("kata"));
        assert_eq!(
            named.resolve(unknown),
            RuntimeClass::Set("kata"),
            "trusted when it cannot be checked"
        );
        assert_eq!(RuntimeClassPolicy::Off.resolve(nvidia), RuntimeClass::Off);
        // Written back as it is read.
        let text = serde_saphyr::to_string(&WebhookConfig::default()).unwrap();
        assert!(text.contains("runtimeClassName: auto"), "{text}");
        assert_eq!(WebhookConfig::from_yaml(&text, "t").unwrap(), WebhookConfig::default());
    }

    #[test]
    fn gpu_operator_namespaces_are_excluded_by_default() {
        let cfg = WebhookConfig::default();
        for ns in ["kube-system", "gpu-operator", "nvidia-gpu-operator"] {
            assert!(cfg.is_excluded(ns), "{ns}");
        }
        assert!(!cfg.is_excluded("ml-team"));
    }

    #[test]
    fn admission_writers_follow_the_namespace_and_service_account() {
        let cfg = WebhookConfig::default();
        assert!(!cfg.is_admission_writer("system:serviceaccount:sluice-system:sluice-controller"));
        let cfg = cfg.with_own_namespace("queues");
        assert!(cfg.is_admission_writer("system:serviceaccount:queues:sluice-controller"));
        assert!(!cfg.is_admission_writer("system:serviceaccount:sluice-system:sluice-controller"));
        assert!(!cfg.is_admission_writer(""));

        let yaml = "controllerServiceAccount: sluice\nadmissionWriters: [ops-admin]\n";
        let cfg = WebhookConfig::from_yaml(yaml, "t")
            .unwrap()
            .with_own_namespace("queues");
        assert!(cfg.is_admission_writer("system:serviceaccount:queues:sluice"));
        assert!(cfg.is_admission_writer("ops-admin"));
        assert!(!cfg.is_admission_writer("system:serviceaccount:queues:sluice-controller"));
    }

    #[test]
    fn bad_config_is_rejected_with_the_field() {
        let err = WebhookConfig::from_yaml("gpu:\n  runtimeClas: x\n", "t").unwrap_err();
        assert!(err.to_string().contains("runtimeClas"), "{err}");
        let err = WebhookConfig::from_yaml("gpu:\n  tolerations: [{key: a, operator: Maybe}]\n", "t").unwrap_err();
        assert!(err.to_string().contains("Maybe"), "{err}");
        let err = WebhookConfig::from_yaml("gpu:\n  nodeAffinity: {key: a, operator: In}\n", "t").unwrap_err();
        assert!(err.to_string().contains("nodeAffinity"), "{err}");
    }
}
