//! Kueue's Configuration (`config.kueue.x-k8s.io` `v1beta1`, `v1beta2`) as
//! the `sluice controller` flags and chart values that give the same
//! behaviour. Every key is accounted for by the mapping table; the
//! settings follow Kueue's defaults of the Configuration's version where a
//! field is unset and Sluice's default differs (fair sharing, the pods-ready
//! check, the integrations).

use std::time::Duration;

use serde_json::{Value, json};
use sluice_api::duration::{Units, parse};
use sluice_api::transform::{ResourceTransformation, Strategy};

use super::Note;
use super::walk;
use crate::mapping::{self, Status, When};

/// The job frameworks Sluice queues, by Kueue's names (`--integrations`).
pub const SLUICE_FRAMEWORKS: [&str; 14] = [
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/jaxjob",
    "ray.io/raycluster",
    "trainer.kubeflow.org/trainjob",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
];

/// Kueue's plain-Pod framework: Sluice needs no flag for it (pods are
/// queued where the webhook gates them, on servers with scheduling gates;
/// refused where they would have to wait without them).
pub const POD_FRAMEWORK: &str = "pod";

/// Fair sharing as Kueue's Configuration sets it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FairSharing {
    /// Whether it is on (Kueue's default: off).
    pub enabled: bool,
    /// `preemptionStrategies` as written (empty: Kueue's default, both).
    pub strategies: Vec<String>,
}

/// Flags, and the same settings as chart values.
#[derive(Default)]
pub(super) struct Controller {
    pub(super) flags: Vec<String>,
    pub(super) values: Value,
    pub(super) fair_sharing: FairSharing,
}

impl Controller {
    /// `--flag=value`, and the chart value at `chart` (under `controller`),
    /// or in `controller.extraArgs` when the chart has none.
    fn set(&mut self, flag: &str, value: impl ToString, chart: Option<(&[&str], Value)>) {
        let arg = format!("--{flag}={}", value.to_string());
        let controller = self
            .values
            .as_object_mut()
            .and_then(|m| m.entry("controller").or_insert_with(|| json!({})).as_object_mut());
        let Some(controller) = controller else { return };
        match chart {
            Some((path, v)) => {
                let mut at = controller;
                for key in &path[..path.len() - 1] {
                    let next = at.entry(key.to_string()).or_insert_with(|| json!({}));
                    let Some(next) = next.as_object_mut() else { return };
                    at = next;
                }
                at.insert(path[path.len() - 1].to_string(), v);
            }
            None => {
                let extra = controller.entry("extraArgs").or_insert_with(|| json!([]));
                if let Some(list) = extra.as_array_mut() {
                    list.push(json!(arg));
                }
            }
        }
        self.flags.push(arg);
    }
}

/// A `v1` ConfigMap holding Kueue's Configuration (as Kueue's manifests
/// ship it, in `kueue-manager-config`): where it is, its version and the
/// Configuration.
pub(super) fn in_config_map(doc: &Value) -> Option<(String, String, Value)> {
    let data = doc["data"].as_object()?;
    data.iter().find_map(|(key, text)| {
        let inner: Value = serde_saphyr::from_str(text.as_str()?).ok()?;
        let version = inner["apiVersion"].as_str()?.strip_prefix("config.kueue.x-k8s.io/")?;
        if inner["kind"] != "Configuration" {
            return None;
        }
        let meta = &doc["metadata"];
        let name = meta["name"].as_str().unwrap_or("(unnamed)");
        let place = match meta["namespace"].as_str() {
            Some(ns) => format!("Configuration (ConfigMap {ns}/{name}, {key})"),
            None => format!("Configuration (ConfigMap {name}, {key})"),
        };
        Some((place, version.to_string(), inner))
    })
}

/// The controller settings of a Configuration, and the notes.
pub(super) fn translate(version: &str, doc: &Value, place: &str) -> (Controller, Vec<Note>) {
    let mut notes = Notes {
        version,
        place,
        list: walk::walk("Configuration", version, place, doc).notes,
    };
    let mut c = Controller {
        values: json!({}),
        ..Controller::default()
    };
    fair_sharing(&mut c, &doc["fairSharing"], &mut notes);
    pods_ready(&mut c, doc, &mut notes);
    client(&mut c, &doc["clientConnection"]);
    leader_election(&mut c, &doc["leaderElection"], &mut notes);
    integrations(&mut c, &doc["integrations"]["frameworks"], &mut notes);
    transformations(&mut c, &doc["resources"]["transformations"], &mut notes);
    (c, notes.list)
}

/// The notes of one Configuration.
struct Notes<'a> {
    version: &'a str,
    place: &'a str,
    list: Vec<Note>,
}

impl Notes<'_> {
    /// The table's note for `path` unset, where Kueue's default applies.
    fn unset(&mut self, path: &str) {
        let row = mapping::row("Configuration", self.version, path, When::Unset);
        self.push(path, row.status, row.note.to_string());
    }

    fn push(&mut self, path: &str, status: Status, message: String) {
        self.list.push(Note {
            place: format!("{}: {path}", self.place),
            status,
            message,
        });
    }

    /// A duration Sluice cannot read: reported, `fallback` used.
    fn duration(&mut self, path: &str, text: Option<&str>, fallback: Duration) -> Duration {
        match text.map(|t| (t, parse(t, Units::FLAGS))) {
            None => fallback,
            Some((_, Ok(d))) => d,
            Some((t, Err(e))) => {
                let message = format!("{t:?} is not a duration Sluice reads ({}): not copied", e.reason);
                self.push(path, Status::Unsupported, message);
                fallback
            }
        }
    }
}

/// `fairSharing`: v1beta1 by `enable` (default off), v1beta2 by presence.
fn fair_sharing(c: &mut Controller, fair: &Value, notes: &mut Notes<'_>) {
    if fair.is_null() {
        notes.unset("fairSharing");
    }
    let on = match notes.version {
        "v1beta1" => fair["enable"].as_bool().unwrap_or(false),
        _ => !fair.is_null(),
    };
    let switch = if on { "on" } else { "off" };
    c.set("fair-sharing", switch, Some((&["fairSharing", "enabled"], json!(on))));
    c.fair_sharing.enabled = on;
    if let Some(list) = fair["preemptionStrategies"].as_array().filter(|l| !l.is_empty()) {
        let names: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
        c.fair_sharing.strategies = names.iter().map(|n| n.to_string()).collect();
        c.set(
            "fair-sharing-strategies",
            names.join(","),
            Some((&["fairSharing", "strategies"], json!(names))),
        );
    }
}

/// `waitForPodsReady`: on in v1beta1 with `enable: true` (timeout default
/// 5m), in v1beta2 unless the `DisableWaitForPodsReady` gate is set
/// (timeout default 30m); then the requeuing strategy.
fn pods_ready(c: &mut Controller, doc: &Value, notes: &mut Notes<'_>) {
    let ready = &doc["waitForPodsReady"];
    if ready.is_null() {
        notes.unset("waitForPodsReady");
    }
    let disabled = doc["featureGates"]["DisableWaitForPodsReady"].as_bool() == Some(true);
    let (on, default) = match notes.version {
        "v1beta1" => (
            ready["enable"].as_bool() == Some(true) && !disabled,
            Duration::from_secs(300),
        ),
        _ => (!disabled, Duration::from_secs(1800)),
    };
    let timeout = match on {
        true => notes.duration("waitForPodsReady.timeout", ready["timeout"].as_str(), default),
        false => Duration::ZERO,
    };
    let timeout = format_duration(timeout);
    c.set(
        "pods-ready-timeout",
        &timeout,
        Some((&["podsReadyTimeout"], json!(timeout))),
    );
    if !on {
        return;
    }
    if notes.version == "v1beta1" && ready["blockAdmission"].is_null() {
        notes.unset("waitForPodsReady.blockAdmission");
    }
    if ready["recoveryTimeout"].is_null() {
        notes.unset("waitForPodsReady.recoveryTimeout");
    }
    let requeue = &ready["requeuingStrategy"];
    if let Some(n) = requeue["backoffLimitCount"].as_u64() {
        c.set("requeue-limit", n, None);
    }
    for (field, flag, chart) in [
        ("backoffBaseSeconds", "requeue-backoff-base", "requeueBackoffBase"),
        ("backoffMaxSeconds", "requeue-backoff-max", "requeueBackoffMax"),
    ] {
        if let Some(secs) = requeue[field].as_u64() {
            let d = format_duration(Duration::from_secs(secs));
            c.set(flag, &d, Some((&[chart], json!(d))));
        }
    }
}

/// `clientConnection`: Kueue's request rate, as Sluice's write rate.
fn client(c: &mut Controller, client: &Value) {
    for (field, flag, chart) in [("qps", "kube-qps", "kubeQps"), ("burst", "kube-burst", "kubeBurst")] {
        if let Some(n) = client[field].as_number() {
            c.set(flag, n, Some((&[chart], json!(n))));
        }
    }
}

/// `leaderElection`: on or off, and the Lease's duration in whole seconds.
fn leader_election(c: &mut Controller, election: &Value, notes: &mut Notes<'_>) {
    if let Some(on) = election["leaderElect"].as_bool() {
        c.set("leader-elect", on, Some((&["leaderElect"], json!(on))));
    }
    let path = "leaderElection.leaseDuration";
    let lease = notes.duration(path, election["leaseDuration"].as_str(), Duration::ZERO);
    if !lease.is_zero() {
        let secs = lease.as_secs() + u64::from(lease.subsec_nanos() > 0);
        c.set(
            "lease-duration-seconds",
            secs,
            Some((&["leaseDurationSeconds"], json!(secs))),
        );
    }
}

/// `integrations.frameworks`: the ones Sluice queues become
/// `--integrations`; each other one is reported. Unset: Kueue's default,
/// batch/job alone.
fn integrations(c: &mut Controller, frameworks: &Value, notes: &mut Notes<'_>) {
    let path = "integrations.frameworks";
    let Some(list) = frameworks.as_array() else {
        notes.unset(path);
        c.set("integrations", "batch/job", None);
        return;
    };
    let mut kept = Vec::new();
    for (i, name) in list.iter().enumerate() {
        let name = name.as_str().unwrap_or_default();
        if SLUICE_FRAMEWORKS.contains(&name) {
            kept.push(name);
        } else if name == POD_FRAMEWORK {
            notes.push(
                &format!("{path}[{i}]"),
                Status::Difference,
                "pod: no flag in Sluice: a Pod with the queue label, or any GPU Pod in a namespace labelled sluice.dev/default-queue: enabled, is gated until admitted on servers with pod scheduling gates (1.27+), refused at create on older ones; pods of queued objects are left to them".to_string(),
            );
        } else {
            let message = format!(
                "{name}: Sluice does not queue it (it queues {})",
                SLUICE_FRAMEWORKS.join(", ")
            );
            notes.push(&format!("{path}[{i}]"), Status::Unsupported, message);
        }
    }
    c.set("integrations", kept.join(","), None);
}

/// `resources.transformations`: the same list as `--resource-transformations`
/// (chart value `controller.resourceTransformations`); a list Sluice would
/// refuse is reported, mistake by mistake, and not copied.
fn transformations(c: &mut Controller, list: &Value, notes: &mut Notes<'_>) {
    let path = "resources.transformations";
    let Some(items) = list.as_array().filter(|l| !l.is_empty()) else {
        return;
    };
    let parsed: Result<Vec<ResourceTransformation>, String> = items
        .iter()
        .map(|t| {
            let outputs = t["outputs"]
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(r, q)| (r.clone(), q.as_str().map_or_else(|| q.to_string(), str::to_string)))
                        .collect()
                })
                .unwrap_or_default();
            let strategy = match t["strategy"].as_str() {
                None | Some("Retain") => Strategy::Retain,
                Some("Replace") => Strategy::Replace,
                Some(other) => return Err(format!("strategy {other:?} is neither Retain nor Replace")),
            };
            Ok(ResourceTransformation {
                input: t["input"].as_str().unwrap_or_default().to_string(),
                strategy,
                outputs,
            })
        })
        .collect();
    let list = match parsed {
        Ok(list) => list,
        Err(e) => {
            notes.push(path, Status::Unsupported, format!("{e}: not copied"));
            return;
        }
    };
    let violations = sluice_api::transform::validate(&list);
    if !violations.is_empty() {
        for v in violations {
            notes.push(
                &format!("{path}{}", v.path),
                Status::Unsupported,
                format!("{}: not copied", v.message),
            );
        }
        return;
    }
    let value = serde_json::to_value(&list).unwrap_or_default();
    c.set(
        "resource-transformations",
        value.to_string(),
        Some((&["resourceTransformations"], value)),
    );
}

/// A duration as Sluice's flags write it: `30m`, `90s`, `1h`, `0`.
fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0 => "0".to_string(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1_000 == 0 => format!("{}s", ms / 1_000),
        ms => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_in_their_largest_whole_unit() {
        for (secs, text) in [(0, "0"), (90, "90s"), (300, "5m"), (3600, "1h"), (5400, "90m")] {
            assert_eq!(format_duration(Duration::from_secs(secs)), text);
        }
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        // Kueue writes Go durations: 5m0s reads as 5m.
        assert_eq!(parse("5m0s", Units::FLAGS).map(format_duration), Ok("5m".to_string()));
    }

    /// The table's note names the frameworks the importer keeps.
    #[test]
    fn the_frameworks_sluice_queues_are_the_tables() {
        let row = mapping::row("Configuration", "v1beta2", "integrations.frameworks", When::Any);
        assert!(
            row.note
                .starts_with(&format!("Sluice queues {};", SLUICE_FRAMEWORKS.join(", "))),
            "{}",
            row.note
        );
    }

    #[test]
    fn chart_values_nest_and_extra_args_collect() {
        let mut c = Controller {
            values: json!({}),
            ..Controller::default()
        };
        c.set("fair-sharing", "on", Some((&["fairSharing", "enabled"], json!(true))));
        c.set("requeue-limit", 3, None);
        c.set("integrations", "batch/job", None);
        assert_eq!(
            c.flags,
            ["--fair-sharing=on", "--requeue-limit=3", "--integrations=batch/job"]
        );
        assert_eq!(
            c.values,
            json!({"controller": {"fairSharing": {"enabled": true},
                   "extraArgs": ["--requeue-limit=3", "--integrations=batch/job"]}})
        );
    }
}
