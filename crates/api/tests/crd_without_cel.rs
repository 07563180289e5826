//! What the API server refuses by the CRDs' OpenAPI schema alone: on a
//! server without CEL (Kubernetes 1.24, the oldest supported) and without
//! the webhook, the `x-kubernetes-validations` rules are dropped, so a
//! negative quota or a `borrowingLimit` without a cohort must be refused
//! by `pattern`, `minimum`, `required`, `enum`, `anyOf` and `not`.
//!
//! The objects are checked against the generated CRDs by a small
//! evaluator of the OpenAPI keywords the CRDs use (defaults applied first,
//! as the API server does; CEL rules ignored, as a 1.24 server does). The
//! refusals are taken from `tests/data/invalid/` (which `validate()`, the
//! rule of record, refuses too); every example object must be taken.
//! `tests/tests/api_view.rs` sends the same objects to a real server
//! (`#[ignore]`d).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sluice_api::crd;
use sluice_api::manifest::parse_manifests;
use sluice_api::validation::Validate;

/// The OpenAPI schema of `kind`'s CRD, as JSON.
fn schema_of(kind: &str) -> Value {
    static CRDS: std::sync::OnceLock<Vec<(String, Value)>> = std::sync::OnceLock::new();
    let crds = CRDS.get_or_init(|| {
        crd::all()
            .into_iter()
            .map(|c| {
                let schema = c.spec.versions[0]
                    .schema
                    .as_ref()
                    .unwrap()
                    .open_api_v3_schema
                    .as_ref()
                    .unwrap();
                (c.spec.names.kind.clone(), serde_json::to_value(schema).unwrap())
            })
            .collect()
    });
    crds.iter()
        .find(|(k, _)| k == kind)
        .map(|(_, s)| s.clone())
        .unwrap_or_else(|| panic!("no CRD for {kind}"))
}

/// Fills in `default`s of absent properties, top down, as the API server
/// does before it validates.
fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (name, prop) in schema["properties"].as_object().into_iter().flatten() {
                if !map.contains_key(name)
                    && let Some(d) = prop.get("default")
                {
                    map.insert(name.clone(), d.clone());
                }
                if let Some(v) = map.get_mut(name) {
                    apply_defaults(prop, v);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                apply_defaults(&schema["items"], item);
            }
        }
        _ => {}
    }
}

/// Whether `s` matches `pattern` (compiled once).
fn matches(pattern: &str, s: &str) -> bool {
    thread_local! {
        static COMPILED: std::cell::RefCell<std::collections::BTreeMap<String, regex::Regex>> = Default::default();
    }
    COMPILED.with_borrow_mut(|c| {
        c.entry(pattern.to_string())
            .or_insert_with(|| regex::Regex::new(pattern).unwrap())
            .is_match(s)
    })
}

/// The violations of `value` against `schema` at `path` (empty: valid).
fn violations(schema: &Value, value: &Value, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut say = |what: String| out.push(format!("{path}: {what}"));
    if value.is_null() {
        if schema["nullable"] != true {
            say("must not be null".into());
        }
        return out;
    }
    if schema["x-kubernetes-int-or-string"] == true {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            say(format!("{value} is neither an integer nor a string"));
        }
    } else if let Some(t) = schema["type"].as_str() {
        let ok = match t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            _ => true,
        };
        if !ok {
            say(format!("{value} is not of type {t}"));
        }
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        say(format!("{value} is not one of {allowed:?}"));
    }
    if let (Some(p), Some(s)) = (schema["pattern"].as_str(), value.as_str())
        && !matches(p, s)
    {
        say(format!("{s:?} does not match {p}"));
    }
    if let (Some(min), Some(n)) = (schema["minimum"].as_f64(), value.as_f64())
        && n < min
    {
        say(format!("{n} is below {min}"));
    }
    if let (Some(max), Some(n)) = (schema["maximum"].as_f64(), value.as_f64())
        && n > max
    {
        say(format!("{n} is above {max}"));
    }
    if let Some(s) = value.as_str() {
        if schema["maxLength"]
            .as_u64()
            .is_some_and(|m| s.chars().count() as u64 > m)
        {
            say("is too long".into());
        }
        if schema["minLength"]
            .as_u64()
            .is_some_and(|m| (s.chars().count() as u64) < m)
        {
            say("is too short".into());
        }
    }
    if let Some(items) = value.as_array() {
        if schema["maxItems"].as_u64().is_some_and(|m| items.len() as u64 > m) {
            say("has too many items".into());
        }
        if schema["minItems"].as_u64().is_some_and(|m| (items.len() as u64) < m) {
            say("has too few items".into());
        }
        // List types: keys (a map) or items (a set) are unique.
        let keys: Option<Vec<&str>> = schema["x-kubernetes-list-map-keys"]
            .as_array()
            .map(|k| k.iter().filter_map(Value::as_str).collect());
        let mut seen = BTreeSet::new();
        for item in items {
            let key = match (&keys, schema["x-kubernetes-list-type"].as_str()) {
                (Some(keys), _) => Some(keys.iter().map(|k| item[*k].to_string()).collect::<Vec<_>>().join("/")),
                (None, Some("set")) => Some(item.to_string()),
                _ => None,
            };
            if let Some(key) = key
                && !seen.insert(key.clone())
            {
                say(format!("duplicate item {key}"));
            }
        }
        for (i, item) in items.iter().enumerate() {
            if schema.get("items").is_some() {
                out.extend(violations(&schema["items"], item, &format!("{path}[{i}]")));
            }
        }
    }
    if let Some(map) = value.as_object() {
        for required in schema["required"].as_array().into_iter().flatten() {
            let name = required.as_str().unwrap();
            if !map.contains_key(name) {
                out.push(format!("{path}.{name}: is required"));
            }
        }
        for (name, v) in map {
            if let Some(prop) = schema["properties"].get(name) {
                out.extend(violations(prop, v, &format!("{path}.{name}")));
            } else if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                out.extend(violations(extra, v, &format!("{path}[{name}]")));
            }
        }
    }
    if let Some(branches) = schema["anyOf"].as_array() {
        let results: Vec<Vec<String>> = branches.iter().map(|b| violations(b, value, path)).collect();
        // As the API server: the failure, and what each branch said.
        if results.iter().all(|r| !r.is_empty()) {
            out.push(format!("{path}: must validate at least one schema (anyOf)"));
            out.extend(results.into_iter().flatten());
        }
    }
    if let Some(not) = schema.get("not")
        && violations(not, value, path).is_empty()
    {
        out.push(format!("{path}: matches the schema it must not ({not})"));
    }
    out
}

/// What the API server without CEL says about `object` (a Sluice object
/// as JSON): its violations, empty when it is created.
fn server_without_cel(object: &Value) -> Vec<String> {
    let kind = object["kind"].as_str().unwrap();
    let schema = schema_of(kind);
    let mut object = object.clone();
    apply_defaults(&schema, &mut object);
    violations(&schema, &object, "")
        .into_iter()
        .map(|v| v.trim_start_matches('.').to_string())
        .collect()
}

fn documents(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.split("\n---")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{}: {e}", file.display())))
        .collect()
}

fn invalid(file: &str, name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/invalid")
        .join(file);
    documents(&path)
        .into_iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{file} has no {name}"))
}

/// Objects of `tests/data/invalid/` the schema alone refuses, each with a
/// field its refusal names (on the object or, for a rule across fields,
/// where the rule sits).
const REFUSED: &[(&str, &str, &str)] = &[
    // Negative and malformed quantities.
    (
        "cq-bad-quantities.yaml",
        "q",
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
    ),
    (
        "cohort-quantities.yaml",
        "research",
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
    ),
    ("cq-fair-sharing.yaml", "q", "spec.fairSharing.weight"),
    ("cq-fair-sharing.yaml", "q2", "spec.fairSharing.weight"),
    ("cohort-quantities.yaml", "training", "spec.fairSharing.weight"),
    // borrowingLimit / lendingLimit without a cohort (a parent).
    ("cq-limits-without-cohort.yaml", "q", "spec.cohort"),
    ("cohort-limits-without-parent.yaml", "company", "spec.parent"),
    // Preemption: borrowWithinCohort needs reclaimWithinCohort, a
    // threshold needs a policy; minRuntimeSeconds is not negative.
    ("cq-preemption.yaml", "q", "spec.preemption"),
    ("cq-preemption.yaml", "q2", "spec.preemption.borrowWithinCohort"),
    ("cq-preemption.yaml", "q2", "spec.minRuntimeSeconds"),
    (
        "cq-preemption.yaml",
        "q3",
        "spec.preemption.recentlyPreemptedGraceMinutes",
    ),
    (
        "cq-preemption.yaml",
        "q4",
        "spec.preemption.recentlyPreemptedGraceMinutes",
    ),
    ("cq-preemption.yaml", "q5", "spec.preemption.noticeSeconds"),
    ("cq-preemption.yaml", "q6", "spec.preemption.noticeSeconds"),
    ("cq-preemption.yaml", "q7", "spec.backfill.maxDelayMinutes"),
    ("cq-preemption.yaml", "q8", "spec.backfill.maxDelayMinutes"),
    ("cq-preemption.yaml", "q9", "spec.backfill.depth"),
    ("cq-preemption.yaml", "q10", "spec.backfill.depth"),
    ("cq-budget.yaml", "b2", "spec.budget.hours"),
    ("cq-budget.yaml", "b3", "spec.budget.actions[0].atPercent"),
    // Empty groups.
    ("cq-empty-group.yaml", "q", "spec.resourceGroups[0].coveredResources"),
    // Names of the cohort, flavors and resources.
    ("cq-bad-names.yaml", "Team_A", "spec.cohort"),
    // Required fields and ranges of the other kinds.
    ("lq-invalid.yaml", "team.a", "spec.clusterQueue"),
    ("wpc-out-of-range.yaml", "too-important", "value"),
    ("wl-min-count.yaml", "job-sweep", "spec.podSets[0].minCount"),
];

#[test]
fn the_schema_refuses_invalid_queues_without_cel() {
    let mut failures = Vec::new();
    for (file, name, field) in REFUSED {
        let object = invalid(file, name);
        let said = server_without_cel(&object);
        if !said
            .iter()
            .any(|v| v.starts_with(&format!("{field}:")) || v.starts_with(&format!("{field}.")))
        {
            failures.push(format!("{file} {name}: not refused at {field}: {said:?}"));
        }
        let sluice = parse_manifests(&serde_json::to_string(&object).unwrap()).unwrap();
        assert!(
            !sluice[0].as_sluice().unwrap().validate().is_empty(),
            "{file} {name}: validate() takes it"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Quotas as people write them, limits with a cohort, and preemption
/// settings that go together are all taken.
#[test]
fn the_schema_takes_valid_queues() {
    let queue = |spec: Value| json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": spec});
    let quota = |resource: Value| {
        queue(
            json!({"cohort": "co", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "a100", "resources": [resource]}]}]}),
        )
    };
    let mut cases = vec![];
    for q in [
        json!(16),
        json!("16"),
        json!("512Gi"),
        json!("500m"),
        json!("+2"),
        json!("1e3"),
        json!("0"),
        json!(".5"),
    ] {
        cases.push(quota(
            json!({"name": "nvidia.com/gpu", "nominalQuota": q, "borrowingLimit": q, "lendingLimit": q}),
        ));
    }
    cases.push(queue(json!({"preemption": {"reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10}}})));
    cases.push(queue(json!({"preemption": {"reclaimWithinCohort": "Never"}})));
    cases.push(queue(json!({"preemption": {"withinClusterQueue": "LowerPriority",
        "victimOrder": "LeastWorkLost", "recentlyPreemptedGraceMinutes": 30}})));
    cases.push(queue(
        json!({"preemption": {"victimOrder": "Newest", "recentlyPreemptedGraceMinutes": 10080}}),
    ));
    cases.push(queue(
        json!({"preemption": {"withinClusterQueue": "LowerPriority", "noticeSeconds": 1}}),
    ));
    cases.push(queue(json!({"preemption": {"noticeSeconds": 3600}})));
    cases.push(queue(json!({"fairSharing": {"weight": "0.5"}})));
    cases.push(queue(json!({})));
    cases.push(json!({"apiVersion": "sluice.dev/v1alpha1", "kind": "Cohort", "metadata": {"name": "c"},
        "spec": {"parent": "org", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8", "lendingLimit": "4"}]}]}]}}));
    for case in &cases {
        assert_eq!(server_without_cel(case), Vec::<String>::new(), "{case}");
    }
    // And the same without a cohort: the limit is what makes it invalid.
    let mut lone = quota(json!({"name": "nvidia.com/gpu", "nominalQuota": "8"}));
    assert_eq!(server_without_cel(&lone), Vec::<String>::new());
    lone["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = json!("4");
    lone["spec"].as_object_mut().unwrap().remove("cohort");
    assert_ne!(server_without_cel(&lone), Vec::<String>::new());
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

/// Every Sluice object of `examples/` is created by a server without CEL
/// (the schema's rules refuse nothing valid).
#[test]
fn the_schema_takes_every_example() {
    let mut files = Vec::new();
    yaml_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples"),
        &mut files,
    );
    let mut checked = 0;
    let mut failures = Vec::new();
    for file in files {
        for doc in documents(&file) {
            let kinds = [
                "ResourceFlavor",
                "ClusterQueue",
                "Cohort",
                "LocalQueue",
                "WorkloadPriorityClass",
                "Workload",
            ];
            if doc["apiVersion"] != "sluice.dev/v1alpha1" || !kinds.iter().any(|k| doc["kind"] == *k) {
                continue;
            }
            checked += 1;
            let said = server_without_cel(&doc);
            if !said.is_empty() {
                failures.push(format!("{} {}: {said:?}", file.display(), doc["metadata"]["name"]));
            }
        }
    }
    assert!(checked > 20, "only {checked} example objects found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
