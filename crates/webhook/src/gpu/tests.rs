use super::*;
use crate::config::{GpuConfig, RuntimeClassPolicy};
use crate::patch;
use serde_json::json;

fn gpu_container(name: &str, requests: Value, limits: Value) -> Value {
    let mut resources = Map::new();
    if !requests.is_null() {
        resources.insert("requests".into(), requests);
    }
    if !limits.is_null() {
        resources.insert("limits".into(), limits);
    }
    json!({"name": name, "image": "cuda", "resources": resources})
}

fn limits_pod() -> Value {
    json!({"containers": [gpu_container("cuda", Value::Null, json!({"nvidia.com/gpu": "1"}))]})
}

/// The rules in a cluster that has a RuntimeClass `nvidia` (only).
fn fix(cfg: &GpuConfig, spec: &Value, at: &SpecLocation) -> Result<Outcome, BadSpec> {
    fix_pod_spec(cfg, cfg.runtime_class_name.resolve(|n| Some(n == "nvidia")), spec, at)
}

/// Runs the rules on a pod spec, applies the patch, checks idempotency, and
/// returns the outcome and the patched spec.
fn run(cfg: &GpuConfig, spec: &Value) -> (Outcome, Value) {
    let out = fix(cfg, spec, &SpecLocation::pod()).unwrap();
    let mut pod = json!({ "spec": spec });
    patch::apply(&mut pod, &out.ops).unwrap_or_else(|e| panic!("{e}: {:?}", out.ops));
    let again = fix(cfg, &pod["spec"], &SpecLocation::pod()).unwrap();
    assert!(again.ops.is_empty(), "not idempotent: {:?}", again.ops);
    (out, pod["spec"].clone())
}

fn expected_requirement() -> Value {
    json!({"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]})
}

#[test]
fn non_gpu_pod_is_untouched() {
    let spec = json!({"containers": [{"name": "app", "image": "nginx", "resources": {"limits": {"cpu": "1"}}}]});
    let (out, _) = run(&GpuConfig::default(), &spec);
    assert_eq!(out, Outcome::default());
}

#[test]
fn zero_gpu_counts_as_no_gpu() {
    let spec = json!({"containers": [gpu_container("c", Value::Null, json!({"nvidia.com/gpu": "0"}))]});
    let (out, _) = run(&GpuConfig::default(), &spec);
    assert!(out.ops.is_empty());
}

#[test]
fn runtime_class_set_when_unset_never_overwritten() {
    let cfg = GpuConfig::default();
    let (out, fixed) = run(&cfg, &limits_pod());
    assert_eq!(fixed["runtimeClassName"], "nvidia");
    assert!(out.fixes.contains(&FixKind::RuntimeClass));
    assert!(out.ops.contains(&PatchOp::add(
        &Pointer::from_plain("/spec/runtimeClassName"),
        json!("nvidia")
    )));

    let mut spec = limits_pod();
    spec["runtimeClassName"] = json!("kata-nvidia");
    let (out, fixed) = run(&cfg, &spec);
    assert_eq!(fixed["runtimeClassName"], "kata-nvidia");
    assert!(!out.fixes.contains(&FixKind::RuntimeClass));

    let cfg = GpuConfig {
        runtime_class_name: RuntimeClassPolicy::Off,
        ..GpuConfig::default()
    };
    let (out, fixed) = run(&cfg, &limits_pod());
    assert!(fixed.get("runtimeClassName").is_none());
    assert!(!out.fixes.contains(&FixKind::RuntimeClass));
}

#[test]
fn a_runtime_class_the_cluster_lacks_is_never_written() {
    // auto: nothing when there is no `nvidia` RuntimeClass (CDI, or nvidia
    // as the default runtime), and no warning either.
    let cfg = GpuConfig::default();
    let none = |_: &str| Some(false);
    let out = fix_pod_spec(
        &cfg,
        cfg.runtime_class_name.resolve(none),
        &limits_pod(),
        &SpecLocation::pod(),
    )
    .unwrap();
    assert!(!out.fixes.contains(&FixKind::RuntimeClass));
    assert!(
        !out.ops.iter().any(|op| op.path.ends_with("/runtimeClassName")),
        "{:?}",
        out.ops
    );
    assert!(
        !out.warnings.iter().any(|w| w.contains("runtimeClassName")),
        "{:?}",
        out.warnings
    );
    // Other fixes still apply.
    assert!(out.fixes.contains(&FixKind::Toleration));

    // A named class that does not exist: nothing written, and the warning
    // names it (a configuration to fix).
    let cfg = GpuConfig {
        runtime_class_name: RuntimeClassPolicy::Named("nvidia-cdi".into()),
        ..GpuConfig::default()
    };
    let out = fix(&cfg, &limits_pod(), &SpecLocation::template()).unwrap();
    assert!(
        !out.ops.iter().any(|op| op.path.ends_with("/runtimeClassName")),
        "{:?}",
        out.ops
    );
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("spec.template.spec.runtimeClassName left unset") && w.contains("\"nvidia-cdi\"")),
        "{:?}",
        out.warnings
    );
}

#[test]
fn toleration_cases() {
    let gpu_tol = json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"});
    let not_ready = json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300});
    // (existing tolerations, expected tolerations after the fix)
    let cases: Vec<(&str, Option<Value>, Value)> = vec![
        ("absent", None, json!([gpu_tol])),
        ("null", Some(Value::Null), json!([gpu_tol])),
        ("empty", Some(json!([])), json!([gpu_tol])),
        (
            "other taints kept",
            Some(json!([not_ready])),
            json!([not_ready, gpu_tol]),
        ),
        ("exact already", Some(json!([gpu_tol])), json!([gpu_tol])),
        (
            "any effect covers",
            Some(json!([{"key": "nvidia.com/gpu", "operator": "Exists"}])),
            json!([{"key": "nvidia.com/gpu", "operator": "Exists"}]),
        ),
        (
            "wildcard covers",
            Some(json!([{"operator": "Exists"}])),
            json!([{"operator": "Exists"}]),
        ),
        (
            "equal value does not cover exists",
            Some(json!([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}])),
            json!([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, gpu_tol]),
        ),
        (
            "other effect does not cover",
            Some(json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}])),
            json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, gpu_tol]),
        ),
        (
            "other key does not cover",
            Some(json!([{"key": "nvidia.com/gpu.product", "operator": "Exists"}])),
            json!([{"key": "nvidia.com/gpu.product", "operator": "Exists"}, gpu_tol]),
        ),
    ];
    for (name, existing, expected) in cases {
        let mut spec = limits_pod();
        if let Some(e) = existing {
            spec["tolerations"] = e;
        }
        let (out, fixed) = run(&GpuConfig::default(), &spec);
        assert_eq!(fixed["tolerations"], expected, "{name}");
        let before = spec.get("tolerations").and_then(Value::as_array).map_or(0, Vec::len);
        let added = out.fixes.contains(&FixKind::Toleration);
        assert_eq!(added, expected.as_array().unwrap().len() > before, "{name}");
    }
}

#[test]
fn toleration_matching_semantics() {
    let want = |key: &str, op: &str, value: &str, effect: &str, secs: Option<i64>| TolerationSpec {
        key: key.into(),
        operator: op.into(),
        value: value.into(),
        effect: effect.into(),
        toleration_seconds: secs,
    };
    let have = |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>, secs: Option<i64>| {
        Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: secs,
        }
    };
    // Equal is the default operator.
    assert!(toleration_covers(
        &have(Some("k"), None, Some("v"), None, None),
        &want("k", "Equal", "v", "NoSchedule", None)
    ));
    assert!(!toleration_covers(
        &have(Some("k"), None, Some("v"), None, None),
        &want("k", "Equal", "w", "NoSchedule", None)
    ));
    // Empty key with Equal tolerates nothing.
    assert!(!toleration_covers(
        &have(None, Some("Equal"), None, None, None),
        &want("k", "Exists", "", "NoSchedule", None)
    ));
    // NoExecute with a bound does not cover an unbounded NoExecute toleration.
    assert!(!toleration_covers(
        &have(Some("k"), Some("Exists"), None, Some("NoExecute"), Some(60)),
        &want("k", "Exists", "", "NoExecute", None)
    ));
    assert!(toleration_covers(
        &have(Some("k"), Some("Exists"), None, Some("NoExecute"), Some(600)),
        &want("k", "Exists", "", "NoExecute", Some(300))
    ));
    // tolerationSeconds is irrelevant for NoSchedule.
    assert!(toleration_covers(
        &have(Some("k"), Some("Exists"), None, None, Some(5)),
        &want("k", "Exists", "", "NoSchedule", None)
    ));
    // Unknown operators cover nothing.
    assert!(!toleration_covers(
        &have(Some("k"), Some("Gt"), None, None, None),
        &want("k", "Exists", "", "", None)
    ));
}

#[test]
fn affinity_created_when_absent() {
    let (out, fixed) = run(&GpuConfig::default(), &limits_pod());
    assert_eq!(
        fixed["affinity"],
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [expected_requirement()]}]}}})
    );
    assert!(out.fixes.contains(&FixKind::NodeAffinity));
}

#[test]
fn affinity_merge_cases() {
    let req = expected_requirement();
    let zone = json!({"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]});
    let pool = json!({"key": "pool", "operator": "NotIn", "values": ["spot"]});
    let host_field = json!({"key": "metadata.name", "operator": "In", "values": ["n1"]});
    let pref = json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {"matchExpressions": [zone.clone()]}}]});
    let pod_anti = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]}});
    let required =
        |terms: Value| json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}});
    // (name, affinity before, affinity after)
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "pod anti-affinity kept, node affinity added beside it",
            pod_anti.clone(),
            {
                let mut v = pod_anti.clone();
                v["nodeAffinity"] = required(json!([{"matchExpressions": [req.clone()]}]));
                v
            },
        ),
        (
            "preferred kept, required added",
            json!({"nodeAffinity": pref.clone()}),
            json!({"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": pref["preferredDuringSchedulingIgnoredDuringExecution"].clone(),
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [req.clone()]}]}
            }}),
        ),
        (
            "ANDed into the single term",
            json!({"nodeAffinity": required(json!([{"matchExpressions": [zone.clone()]}]))}),
            json!({"nodeAffinity": required(json!([{"matchExpressions": [zone.clone(), req.clone()]}]))}),
        ),
        (
            "ANDed into every ORed term, not appended as a new term",
            json!({"nodeAffinity": required(json!([{"matchExpressions": [zone.clone()]}, {"matchExpressions": [pool.clone()]}]))}),
            json!({"nodeAffinity": required(json!([{"matchExpressions": [zone.clone(), req.clone()]}, {"matchExpressions": [pool.clone(), req.clone()]}]))}),
        ),
        (
            "term with only matchFields gets matchExpressions",
            json!({"nodeAffinity": required(json!([{"matchFields": [host_field.clone()]}]))}),
            json!({"nodeAffinity": required(json!([{"matchFields": [host_field.clone()], "matchExpressions": [req.clone()]}]))}),
        ),
        (
            "term already requiring it is left alone, the other gets it",
            json!({"nodeAffinity": required(json!([{"matchExpressions": [req.clone()]}, {"matchExpressions": [zone.clone()]}]))}),
            json!({"nodeAffinity": required(json!([{"matchExpressions": [req.clone()]}, {"matchExpressions": [zone.clone(), req.clone()]}]))}),
        ),
        (
            "a narrower In on the same key implies it",
            json!({"nodeAffinity": required(json!([{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}, zone.clone()]}]))}),
            json!({"nodeAffinity": required(json!([{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}, zone.clone()]}]))}),
        ),
        (
            "empty terms list gets one term",
            json!({"nodeAffinity": required(json!([]))}),
            json!({"nodeAffinity": required(json!([{"matchExpressions": [req.clone()]}]))}),
        ),
        (
            "null matchExpressions replaced",
            json!({"nodeAffinity": required(json!([{"matchExpressions": null, "matchFields": [host_field.clone()]}]))}),
            json!({"nodeAffinity": required(json!([{"matchExpressions": [req.clone()], "matchFields": [host_field.clone()]}]))}),
        ),
        (
            "empty term (matches nothing) stays empty",
            json!({"nodeAffinity": required(json!([{}, {"matchExpressions": [zone.clone()]}]))}),
            json!({"nodeAffinity": required(json!([{}, {"matchExpressions": [zone.clone(), req.clone()]}]))}),
        ),
        (
            "null nodeAffinity",
            json!({"nodeAffinity": null, "podAntiAffinity": pod_anti["podAntiAffinity"].clone()}),
            json!({"nodeAffinity": required(json!([{"matchExpressions": [req.clone()]}])), "podAntiAffinity": pod_anti["podAntiAffinity"].clone()}),
        ),
    ];
    for (name, before, after) in cases {
        let mut spec = limits_pod();
        spec["affinity"] = before;
        let (_, fixed) = run(&GpuConfig::default(), &spec);
        assert_eq!(fixed["affinity"], after, "{name}");
    }
}

#[test]
fn affinity_disabled_by_config() {
    let cfg = GpuConfig {
        node_affinity: None,
        ..GpuConfig::default()
    };
    let (out, fixed) = run(&cfg, &limits_pod());
    assert!(fixed.get("affinity").is_none());
    assert!(!out.fixes.contains(&FixKind::NodeAffinity));
}

#[test]
fn requests_only_gpu_copied_to_limits() {
    let cfg = GpuConfig::default();
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "no limits map",
            gpu_container("cuda", json!({"nvidia.com/gpu": "1", "cpu": "4"}), Value::Null),
            json!({"requests": {"nvidia.com/gpu": "1", "cpu": "4"}, "limits": {"nvidia.com/gpu": "1"}}),
        ),
        (
            "limits with other resources kept",
            gpu_container("cuda", json!({"nvidia.com/gpu": "2"}), json!({"memory": "1Gi"})),
            json!({"requests": {"nvidia.com/gpu": "2"}, "limits": {"memory": "1Gi", "nvidia.com/gpu": "2"}}),
        ),
        (
            "mig profile",
            gpu_container("cuda", json!({"nvidia.com/mig-1g.5gb": "1"}), Value::Null),
            json!({"requests": {"nvidia.com/mig-1g.5gb": "1"}, "limits": {"nvidia.com/mig-1g.5gb": "1"}}),
        ),
        (
            "equal in another spelling is fine",
            gpu_container(
                "cuda",
                json!({"nvidia.com/gpu": "1"}),
                json!({"nvidia.com/gpu": "1000m"}),
            ),
            json!({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1000m"}}),
        ),
    ];
    for (name, container, resources) in cases {
        let spec = json!({"containers": [container]});
        let (out, fixed) = run(&cfg, &spec);
        assert_eq!(fixed["containers"][0]["resources"], resources, "{name}");
        assert!(out.denials.is_empty(), "{name}");
    }
}

#[test]
fn limits_fix_uses_escaped_paths_and_one_warning_per_resource() {
    let spec = json!({"initContainers": [gpu_container("warm", json!({"nvidia.com/gpu": "1"}), json!({"cpu": "1"}))],
                      "containers": [gpu_container("cuda", json!({"nvidia.com/gpu": "1"}), Value::Null)]});
    let (out, _) = run(&GpuConfig::default(), &spec);
    assert!(out.ops.contains(&PatchOp::add(
        &Pointer::from_plain("/spec/initContainers/0/resources/limits/nvidia.com~1gpu"),
        json!("1")
    )));
    assert!(out.ops.contains(&PatchOp::add(
        &Pointer::from_plain("/spec/containers/0/resources/limits"),
        json!({"nvidia.com/gpu": "1"})
    )));
    let limit_warnings: Vec<_> = out.warnings.iter().filter(|w| w.contains("to limits")).collect();
    assert_eq!(limit_warnings.len(), 2, "{:?}", out.warnings);
    assert!(limit_warnings[0].contains("spec.initContainers[0] (\"warm\")"));
    for w in &out.warnings {
        assert!(!w.contains('\n'));
    }
}

#[test]
fn requests_not_equal_limits_denied_naming_container_and_values() {
    let spec = json!({"containers": [
        gpu_container("ok", Value::Null, json!({"nvidia.com/gpu": "1"})),
        gpu_container("trainer", json!({"nvidia.com/gpu": "2"}), json!({"nvidia.com/gpu": "1"})),
    ]});
    let out = fix(&GpuConfig::default(), &spec, &SpecLocation::template()).unwrap();
    assert!(out.ops.is_empty());
    assert!(out.fixes.is_empty());
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    assert_eq!(out.denials.len(), 1);
    let d = &out.denials[0];
    assert!(d.contains("spec.template.spec.containers[1] (\"trainer\")"), "{d}");
    assert!(d.contains("requests 2") && d.contains("limits 1"), "{d}");
}

#[test]
fn visible_devices_without_gpu_by_policy() {
    let spec = json!({"containers": [
        gpu_container("cuda", Value::Null, json!({"nvidia.com/gpu": "1"})),
        {"name": "sidecar", "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]},
    ]});
    let deny = fix(&GpuConfig::default(), &spec, &SpecLocation::pod()).unwrap();
    assert_eq!(deny.denials.len(), 1);
    assert!(
        deny.denials[0].starts_with("spec.containers[1] (\"sidecar\").env[NVIDIA_VISIBLE_DEVICES]"),
        "{}",
        deny.denials[0]
    );
    assert!(deny.ops.is_empty());

    let warn_cfg = GpuConfig {
        visible_devices_policy: VisibleDevicesPolicy::Warn,
        ..GpuConfig::default()
    };
    let (warn, _) = run(&warn_cfg, &spec);
    assert!(warn.denials.is_empty());
    assert!(warn.warnings.iter().any(|w| w.contains("NVIDIA_VISIBLE_DEVICES")));
    assert!(!warn.ops.is_empty(), "other fixes still apply under warn");

    let allow_cfg = GpuConfig {
        visible_devices_policy: VisibleDevicesPolicy::Allow,
        ..GpuConfig::default()
    };
    let (allow, _) = run(&allow_cfg, &spec);
    assert!(allow.warnings.iter().all(|w| !w.contains("NVIDIA_VISIBLE_DEVICES")));

    // A pod with no GPU at all is still denied.
    let spec = json!({"containers": [{"name": "escape", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}]});
    let out = fix(&GpuConfig::default(), &spec, &SpecLocation::pod()).unwrap();
    assert_eq!(out.denials.len(), 1);
}

#[test]
fn visible_devices_allowed_with_gpu_or_void() {
    let spec = json!({"containers": [
        {"name": "cuda", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}], "resources": {"limits": {"nvidia.com/gpu": "1"}}},
        {"name": "cpu", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]},
    ]});
    let (out, _) = run(&GpuConfig::default(), &spec);
    assert!(out.denials.is_empty(), "{:?}", out.denials);
}

#[test]
fn visible_devices_checks_every_duplicate_entry() {
    // The API server keeps duplicate env names and the kubelet uses the
    // last: a harmless first entry must not hide a harmful later one.
    for env in [
        json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
        json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": ""}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "0"}]),
        json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]),
        json!([{"name": "NVIDIA_VISIBLE_DEVICES"}, {"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
    ] {
        let spec = json!({"containers": [{"name": "c", "image": "x", "env": env}]});
        let out = fix(&GpuConfig::default(), &spec, &SpecLocation::pod()).unwrap();
        assert_eq!(out.denials.len(), 1, "{env}: {:?}", out.denials);
    }
    // Only harmless values (including "" and no value): allowed.
    let env = json!([
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
        {"name": "NVIDIA_VISIBLE_DEVICES"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": " none "},
    ]);
    let spec = json!({"containers": [{"name": "c", "image": "x", "env": env}]});
    let out = fix(&GpuConfig::default(), &spec, &SpecLocation::pod()).unwrap();
    assert!(out.denials.is_empty(), "{:?}", out.denials);
}

#[test]
fn every_violation_is_reported() {
    let spec = json!({"containers": [
        gpu_container("a", json!({"nvidia.com/gpu": "2"}), json!({"nvidia.com/gpu": "1"})),
        {"name": "b", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0"}]},
    ]});
    let out = fix(&GpuConfig::default(), &spec, &SpecLocation::pod()).unwrap();
    assert_eq!(out.denials.len(), 2, "{:?}", out.denials);
}

#[test]
fn all_fixes_together_on_a_template() {
    let spec = json!({"containers": [gpu_container("cuda", json!({"nvidia.com/gpu": "1"}), Value::Null)], "restartPolicy": "Never"});
    let out = fix(&GpuConfig::default(), &spec, &SpecLocation::template()).unwrap();
    let mut kinds = out.fixes.clone();
    kinds.sort();
    assert_eq!(
        kinds,
        vec![
            FixKind::RuntimeClass,
            FixKind::Toleration,
            FixKind::NodeAffinity,
            FixKind::GpuLimits
        ]
    );
    assert_eq!(out.warnings.len(), 4, "{:?}", out.warnings);
    assert!(out.ops.iter().all(|o| o.path.starts_with("/spec/template/spec/")));
    // The API server may truncate warnings over 256 characters.
    for w in &out.warnings {
        assert!(w.len() <= 256, "{} chars: {w}", w.len());
    }
    let warn_cfg = GpuConfig {
        visible_devices_policy: VisibleDevicesPolicy::Warn,
        ..GpuConfig::default()
    };
    let spec = json!({"containers": [{"name": "a-long-sidecar-name", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]});
    let out = fix(&warn_cfg, &spec, &SpecLocation::template()).unwrap();
    assert!(out.warnings[0].len() <= 256, "{}", out.warnings[0]);
}

#[test]
fn undecodable_spec_is_an_error_naming_the_field() {
    let err = fix(
        &GpuConfig::default(),
        &json!({"containers": "nope"}),
        &SpecLocation::template(),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("spec.template.spec: not a valid pod spec"),
        "{err}"
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn quantity() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("0".to_owned()),
            Just("1".to_owned()),
            Just("2".to_owned()),
            Just("1000m".to_owned())
        ]
    }

    fn resource_map() -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
        proptest::option::of(proptest::collection::btree_map(
            prop_oneof![
                Just("nvidia.com/gpu".to_owned()),
                Just("nvidia.com/mig-1g.5gb".to_owned()),
                Just("cpu".to_owned()),
                Just("memory".to_owned()),
            ],
            quantity(),
            0..3,
        ))
    }

    fn container(i: usize) -> impl Strategy<Value = Value> {
        (
            resource_map(),
            resource_map(),
            proptest::option::of(prop_oneof![Just("all"), Just("void"), Just("0")]),
            any::<bool>(),
        )
            .prop_map(move |(req, lim, env, null_resources)| {
                let mut c = json!({"name": format!("c{i}"), "image": "img"});
                let mut res = Map::new();
                if let Some(r) = req {
                    res.insert("requests".into(), json!(r));
                }
                if let Some(l) = lim {
                    res.insert("limits".into(), json!(l));
                }
                if !res.is_empty() {
                    c["resources"] = Value::Object(res);
                } else if null_resources {
                    c["resources"] = Value::Null;
                }
                if let Some(v) = env {
                    c["env"] = json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": v}]);
                }
                c
            })
    }

    fn toleration() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})),
            Just(json!({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"})),
            Just(json!({"operator": "Exists"})),
            Just(
                json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
            ),
        ]
    }

    fn requirement() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(json!({"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]})),
            Just(json!({"key": "zone", "operator": "In", "values": ["a"]})),
            Just(json!({"key": "pool", "operator": "Exists"})),
        ]
    }

    fn term() -> impl Strategy<Value = Value> {
        (
            proptest::option::of(proptest::collection::vec(requirement(), 0..3)),
            any::<bool>(),
        )
            .prop_map(|(exprs, fields)| {
                let mut t = Map::new();
                if let Some(e) = exprs {
                    t.insert("matchExpressions".into(), json!(e));
                }
                if fields {
                    t.insert(
                        "matchFields".into(),
                        json!([{"key": "metadata.name", "operator": "In", "values": ["n1"]}]),
                    );
                }
                Value::Object(t)
            })
    }

    fn affinity() -> impl Strategy<Value = Option<Value>> {
        proptest::option::of(prop_oneof![
            Just(Value::Null),
            Just(json!({"podAffinity": {}})),
            Just(json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]}})),
            proptest::collection::vec(term(), 0..3).prop_map(|terms| json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})),
        ])
    }

    fn pod_spec() -> impl Strategy<Value = Value> {
        (
            proptest::collection::vec(0..1usize, 1..4),
            proptest::collection::vec(0..1usize, 0..2),
            proptest::option::of(prop_oneof![Just(Value::Null), Just(json!("kata"))]),
            proptest::option::of(proptest::collection::vec(toleration(), 0..3)),
            affinity(),
        )
            .prop_flat_map(|(cs, ics, rc, tols, aff)| {
                let containers: Vec<_> = (0..cs.len()).map(container).collect();
                let inits: Vec<_> = (0..ics.len()).map(|i| container(i + 10)).collect();
                (containers, inits, Just(rc), Just(tols), Just(aff))
            })
            .prop_map(|(cs, ics, rc, tols, aff)| {
                let mut spec = json!({"containers": cs, "restartPolicy": "Never", "unknownField": {"kept": true}});
                if !ics.is_empty() {
                    spec["initContainers"] = json!(ics);
                }
                if let Some(rc) = rc {
                    spec["runtimeClassName"] = rc;
                }
                if let Some(t) = tols {
                    spec["tolerations"] = json!(t);
                }
                if let Some(a) = aff {
                    spec["affinity"] = a;
                }
                spec
            })
    }

    /// Every value of `before` survives in `after` (objects may gain members,
    /// arrays may gain elements at the end, `null` may be replaced), except
    /// under paths the documented fixes own.
    fn preserved(before: &Value, after: &Value, path: &str) -> Result<(), String> {
        match (before, after) {
            (Value::Null, _) => Ok(()),
            (Value::Object(b), Value::Object(a)) => {
                for (k, v) in b {
                    let child = format!("{path}/{k}");
                    let Some(av) = a.get(k) else {
                        return Err(format!("{child} removed"));
                    };
                    preserved(v, av, &child)?;
                }
                Ok(())
            }
            (Value::Array(b), Value::Array(a)) => {
                if a.len() < b.len() {
                    return Err(format!("{path} shrank"));
                }
                for (i, v) in b.iter().enumerate() {
                    preserved(v, &a[i], &format!("{path}/{i}"))?;
                }
                Ok(())
            }
            (b, a) if b == a => Ok(()),
            (b, a) => Err(format!("{path} changed from {b} to {a}")),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn patch_applies_is_idempotent_and_preserves_user_fields(spec in pod_spec()) {
            let cfg = GpuConfig::default();
            for at in [SpecLocation::pod(), SpecLocation::template()] {
                let out = fix(&cfg, &spec, &at).unwrap();
                let mut doc = if at.field == "spec" { json!({"spec": spec}) } else { json!({"spec": {"template": {"spec": spec}}}) };
                let original = doc.clone();
                patch::apply(&mut doc, &out.ops).map_err(|e| TestCaseError::fail(format!("{e}: {:?}", out.ops)))?;
                let fixed = doc.pointer(at.pointer.as_str()).unwrap().clone();
                let again = fix(&cfg, &fixed, &at).unwrap();
                prop_assert!(again.ops.is_empty(), "not idempotent: {:?}", again.ops);
                prop_assert_eq!(again.denials.clone(), out.denials.clone());
                preserved(&original, &doc, "").map_err(TestCaseError::fail)?;
                // Only add ops, only under the pod spec, never touching requests.
                for op in &out.ops {
                    prop_assert_eq!(op.op, "add");
                    prop_assert!(op.path.starts_with(at.pointer.as_str()));
                    prop_assert!(!op.path.contains("/requests"));
                }
                prop_assert_eq!(out.fixes.is_empty(), out.ops.is_empty());
                if out.is_denied() {
                    prop_assert!(out.ops.is_empty());
                }
                // A GPU pod that was admitted ends with the fixes in place.
                let typed = PodSpec::deserialize(&fixed).unwrap();
                let gpu = typed.containers.iter().chain(typed.init_containers.iter().flatten()).any(|c| container_requests_gpu(&cfg, c));
                if gpu && !out.is_denied() {
                    prop_assert!(typed.runtime_class_name.is_some());
                    let tols = typed.tolerations.unwrap_or_default();
                    prop_assert!(tols.iter().any(|t| toleration_covers(t, &cfg.tolerations[0])));
                    for c in typed.containers.iter().chain(typed.init_containers.iter().flatten()) {
                        let res = c.resources.clone().unwrap_or_default();
                        for (name, q) in res.requests.unwrap_or_default() {
                            if cfg.is_gpu_resource(&name) {
                                let limit = res.limits.as_ref().and_then(|l| l.get(&name)).map(|l| l.0.clone());
                                prop_assert!(limit.is_some_and(|l| quantity::same_amount(&l, &q.0)), "{}", c.name);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A config whose whole-GPU pods go to `gpu.product In [A100]` nodes,
/// MIG pods to mixed-strategy MIG nodes with their own taint, and shared
/// GPUs keep no node affinity beyond their own selector.
fn per_kind_config() -> GpuConfig {
    serde_saphyr::from_str(
        "
nodeAffinity: {key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-A100-SXM4-80GB]}
migSlices:
  tolerations: [{key: nvidia.com/mig, operator: Exists, effect: NoSchedule}]
  nodeAffinity: {key: nvidia.com/mig.strategy, operator: In, values: [mixed]}
sharedGpus:
  nodeAffinity: null
",
    )
    .expect("config")
}

fn affinity_keys(spec: &Value) -> Vec<String> {
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["matchExpressions"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["key"].as_str().map(str::to_string))
        .collect()
}

fn toleration_keys(spec: &Value) -> Vec<String> {
    spec["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["key"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_mig_pod_gets_the_mig_toleration_and_affinity_not_the_whole_gpu_ones() {
    let cfg = per_kind_config();
    let mig = json!({"containers": [gpu_container("c", Value::Null, json!({"nvidia.com/mig-1g.10gb": "1"}))]});
    let (_, fixed) = run(&cfg, &mig);
    assert_eq!(affinity_keys(&fixed), vec!["nvidia.com/mig.strategy"]);
    assert_eq!(toleration_keys(&fixed), vec!["nvidia.com/mig"]);
    let (_, whole) = run(&cfg, &limits_pod());
    assert_eq!(affinity_keys(&whole), vec!["nvidia.com/gpu.product"]);
    assert_eq!(toleration_keys(&whole), vec!["nvidia.com/gpu"]);
}

#[test]
fn a_pod_that_asks_for_a_replica_gets_the_shared_settings() {
    let cfg = per_kind_config();
    let mut shared = limits_pod();
    shared["nodeSelector"] = json!({"nvidia.com/gpu.sharing-strategy": "time-slicing"});
    let (_, fixed) = run(&cfg, &shared);
    assert!(affinity_keys(&fixed).is_empty(), "nodeAffinity: null for shared GPUs");
    assert_eq!(
        toleration_keys(&fixed),
        vec!["nvidia.com/gpu"],
        "unset: the whole-GPU tolerations"
    );
    let renamed = json!({"containers": [gpu_container("c", Value::Null, json!({"nvidia.com/gpu.shared": "1"}))]});
    let cfg = GpuConfig {
        resource_names: vec!["nvidia.com/gpu".into(), "nvidia.com/gpu.shared".into()],
        ..per_kind_config()
    };
    let (_, fixed) = run(&cfg, &renamed);
    assert!(affinity_keys(&fixed).is_empty(), "a renamed shared GPU is a shared GPU");
    // `none` is no sharing: a whole GPU.
    let mut none = limits_pod();
    none["nodeSelector"] = json!({"nvidia.com/gpu.sharing-strategy": "none"});
    let (_, fixed) = run(&per_kind_config(), &none);
    assert_eq!(affinity_keys(&fixed), vec!["nvidia.com/gpu.product"]);
}

#[test]
fn unset_kinds_follow_the_whole_gpu_settings() {
    let cfg = GpuConfig::default();
    let mig = json!({"containers": [gpu_container("c", Value::Null, json!({"nvidia.com/mig-1g.10gb": "1"}))]});
    let (_, fixed) = run(&cfg, &mig);
    assert_eq!(affinity_keys(&fixed), vec!["nvidia.com/gpu.present"]);
    assert_eq!(toleration_keys(&fixed), vec!["nvidia.com/gpu"]);
}
