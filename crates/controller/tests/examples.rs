//! Every shipped example job fits the shipped example queues and nodes:
//! each file of `examples/jobs/` is put, alone, into an index holding
//! `examples/*.yaml` (flavors, ClusterQueues, LocalQueues, namespaces,
//! priority classes) and the nodes of the shipped node model,
//! `examples/simulate/gpu-teams.yaml` (read as `sluice simulate` reads
//! them), all empty, exactly as the controller would with `--placement
//! nodes`: the object's Workload is made by the kind's integration, and one
//! cycle must admit it, every pod placed on a node, where the file's comment
//! says it runs (the lines `# Admitted (alone, on the empty nodes of
//! gpu-teams.yaml) into ClusterQueue Q:` and `# N GPUs on FLAVOR, …`). A
//! job that can never run in the queues and on the nodes its docs send it
//! to fails here with the engine's reason; one that runs elsewhere than its
//! comment says, with what the engine did. A job with pods that request no
//! GPU must say so (`# CPU-only pods: …`, naming each such pod set): they
//! need nodes without the GPU taint. Every example queue must be active
//! (valid, its flavors there, its namespaces selected).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sluice_controller::index::{Index, IndexConfig, Kind};
use sluice_controller::plan::{ObjKey, Purpose, Step};
use sluice_kinds::JobKind;

const T0: i64 = 1_800_000_000_000;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split("\n---")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

fn typed<T: serde::de::DeserializeOwned>(v: &Value, file: &Path) -> T {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The shipped node model: the nodes of `examples/simulate/gpu-teams.yaml`,
/// as `sluice simulate` builds them (the flavors' labels and taints added).
fn nodes() -> Vec<sluice_scheduler::NodeSpec> {
    let file = examples().join("simulate/gpu-teams.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let scenario = sluice_simulate::scenario::load("gpu-teams.yaml", &text)
        .unwrap_or_else(|e| panic!("{}: {e:?}", file.display()));
    assert!(scenario.nodes.len() >= 10, "{:?}", scenario.nodes);
    scenario.nodes.into_iter().map(|n| n.spec).collect()
}

/// An index with the example queues and the node model's empty nodes,
/// everything listed, admitting only what fits on the nodes.
fn queues() -> Index {
    let mut ix = Index::new(IndexConfig {
        integrations: JobKind::ALL.into_iter().collect(),
        placement: sluice_scheduler::PlacementMode::Nodes,
        ..IndexConfig::default()
    });
    for node in nodes() {
        ix.apply_node(node);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for file in files {
        for doc in documents(&file) {
            match doc["kind"].as_str() {
                Some("ResourceFlavor") => ix.apply_flavor(typed(&doc, &file)),
                Some("ClusterQueue") => ix.apply_cluster_queue(typed(&doc, &file)),
                Some("Cohort") => ix.apply_cohort(typed(&doc, &file)),
                Some("LocalQueue") => ix.apply_local_queue(typed(&doc, &file)),
                Some("WorkloadPriorityClass") => ix.apply_workload_priority_class(typed(&doc, &file)),
                Some("Namespace") => {
                    let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
                    let mut labels: BTreeMap<String, String> =
                        serde_json::from_value(doc["metadata"]["labels"].clone()).unwrap_or_default();
                    labels.insert("kubernetes.io/metadata.name".into(), name.clone());
                    ix.apply_namespace(&name, labels, T0);
                }
                _ => {}
            }
        }
    }
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    ix.take_plans();
    assert!(
        ix.errors().is_empty(),
        "the example queues are refused: {:?}",
        ix.errors()
    );
    ix
}

/// Every example ClusterQueue and LocalQueue can admit: none would show
/// `Active=False` (an invalid queue, a flavor that does not exist, a
/// namespace its ClusterQueue does not select).
#[test]
fn every_example_queue_is_active() {
    let ix = queues();
    let file = examples().join("local-queues.yaml");
    let local: Vec<ObjKey> = documents(&file)
        .into_iter()
        .filter(|d| d["kind"] == "LocalQueue")
        .map(|d| {
            ObjKey::new(
                d["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
                d["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(local.len() >= 4, "{local:?}");
    let mut inactive: Vec<String> = ix
        .cluster_queue_names()
        .into_iter()
        .filter_map(|q| ix.cluster_queue_problem(&q).map(|p| format!("ClusterQueue {q}: {p:?}")))
        .collect();
    inactive.extend(
        local
            .iter()
            .filter_map(|k| ix.local_queue_problem(k).map(|p| format!("LocalQueue {k}: {p:?}"))),
    );
    assert_eq!(ix.cluster_queue_names().len(), 3);
    assert!(inactive.is_empty(), "inactive example queues: {inactive:?}");
}

/// Where an example file says its job runs: the ClusterQueue, and the
/// number of GPUs (or MIG slices) on one flavor.
#[derive(Debug, PartialEq)]
struct RunsOn {
    cluster_queue: String,
    gpus: i64,
    flavor: String,
}

/// The line that says where an example runs.
const ADMITTED: &str = "# Admitted (alone, on the empty nodes of gpu-teams.yaml) into ClusterQueue ";

/// The two comment lines `# Admitted (alone, on the empty nodes of
/// gpu-teams.yaml) into ClusterQueue Q:` and `# N GPUs on FLAVOR, …` of an
/// example file.
fn said(file: &Path) -> RunsOn {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines = text.lines();
    let cluster_queue = lines
        .find_map(|l| l.strip_prefix(ADMITTED))
        .and_then(|q| q.strip_suffix(':'))
        .unwrap_or_else(|| panic!("{}: no '{ADMITTED}Q:' line", file.display()))
        .to_string();
    let next = lines.next().and_then(|l| l.strip_prefix("# ")).unwrap_or_default();
    let (gpus, rest) = next.split_once(' ').unwrap_or_default();
    let flavor = rest
        .split_once(" on ")
        .and_then(|(_, f)| f.split(',').next())
        .unwrap_or_else(|| {
            panic!(
                "{}: the line after it is not '# N GPUs on FLAVOR, …': {next:?}",
                file.display()
            )
        });
    RunsOn {
        cluster_queue,
        gpus: gpus
            .parse()
            .unwrap_or_else(|e| panic!("{}: {gpus:?} GPUs: {e}", file.display())),
        flavor: flavor.to_string(),
    }
}

/// The pod sets an example file says request no GPU: the names in
/// backquotes on its line `# CPU-only pods: …`, sorted.
fn said_cpu_only(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut names: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# CPU-only pods: "))
        .flat_map(|l| l.split('`').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>())
        .collect();
    names.sort();
    names
}

/// The admitted pod sets that were given no GPU (no resource but cpu and
/// memory), sorted.
fn cpu_only(admission: &sluice_api::v1alpha1::Admission) -> Vec<String> {
    let mut names: Vec<String> = (admission.pod_set_assignments.iter())
        .filter(|a| a.flavors.keys().all(|r| r == "cpu" || r == "memory"))
        .map(|a| a.name.clone())
        .collect();
    names.sort();
    names
}

/// What the engine did: the admitting ClusterQueue, and the GPUs (every
/// resource but cpu and memory) it gave and on which flavor.
fn ran_on(admission: &sluice_api::v1alpha1::Admission) -> RunsOn {
    let mut flavors = std::collections::BTreeSet::new();
    let mut gpus = 0;
    for a in &admission.pod_set_assignments {
        for (resource, flavor) in &a.flavors {
            if resource == "cpu" || resource == "memory" {
                continue;
            }
            flavors.insert(flavor.clone());
            let used = a.resource_usage.get(resource).map(|q| q.0.clone()).unwrap_or_default();
            gpus += used
                .parse::<i64>()
                .unwrap_or_else(|e| panic!("{resource} usage {used:?}: {e}"));
        }
    }
    RunsOn {
        cluster_queue: admission.cluster_queue.clone(),
        gpus,
        flavor: flavors.into_iter().collect::<Vec<_>>().join(" and "),
    }
}

/// The example's objects go in; its Workload (one, for a gang too) comes
/// out; a cycle on the empty nodes admits it (the admission), or says why
/// not.
fn admitted(file: &Path) -> Result<sluice_api::v1alpha1::Admission, String> {
    admitted_documents(documents(file))
}

fn admitted_documents(docs: Vec<Value>) -> Result<sluice_api::v1alpha1::Admission, String> {
    let mut ix = queues();
    for (i, mut doc) in docs.into_iter().enumerate() {
        doc["metadata"]["uid"] = Value::from(format!("uid-{i}"));
        doc["metadata"]["creationTimestamp"] = Value::from("2027-01-15T08:00:00Z");
        let kind = JobKind::ALL
            .into_iter()
            .find(|k| doc["apiVersion"].as_str() == Some(k.api_version()) && doc["kind"].as_str() == Some(k.kind()));
        // What a kind reads its pod sets from (a TrainJob's runtime).
        let referent = JobKind::ALL
            .into_iter()
            .flat_map(|k| k.referent_kinds().iter().copied())
            .find(|r| doc["apiVersion"].as_str() == Some(r.api_version) && doc["kind"].as_str() == Some(r.kind));
        if let Some(r) = referent {
            let key = match doc["metadata"]["namespace"].as_str() {
                Some(ns) => format!("{ns}/{}", doc["metadata"]["name"].as_str().unwrap_or_default()),
                None => doc["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            };
            ix.apply_referent(r, &key, std::sync::Arc::new(doc));
            continue;
        }
        match kind {
            Some(JobKind::Job) => ix.apply_job(
                serde_json::from_value::<k8s_openapi::api::batch::v1::Job>(doc).unwrap(),
                T0,
            ),
            Some(k) => ix.apply_object(k, &doc, T0),
            None => {}
        }
    }
    let made: Vec<sluice_api::v1alpha1::Workload> = ix
        .take_plans()
        .into_iter()
        .flat_map(|p| p.steps)
        .filter_map(|s| match s {
            Step::ApplyWorkload(wl) => Some(*wl),
            _ => None,
        })
        .collect();
    let [wl] = made.as_slice() else {
        return Err(format!("{} Workloads made, not one", made.len()));
    };
    let mut wl = wl.clone();
    wl.metadata.uid = Some("wl-uid".into());
    wl.metadata.creation_timestamp = Some(serde_json::from_value(Value::from("2027-01-15T08:00:00Z")).unwrap());
    let key = ObjKey::new(
        wl.metadata.namespace.clone().unwrap_or_default(),
        wl.metadata.name.clone().unwrap_or_default(),
    );
    ix.apply_workload(wl, T0);
    let (plans, _) = ix.cycle(T0 + 1);
    let admission = plans
        .iter()
        .filter(|p| p.purpose == Purpose::Admit { uid: "wl-uid".into() })
        .flat_map(|p| p.steps.iter())
        .find_map(|s| match s {
            Step::ApplyWorkloadStatus { status, .. } => status.admission.as_ref(),
            _ => None,
        });
    if let Some(admission) = admission {
        return Ok(admission.clone());
    }
    let why = plans
        .iter()
        .flat_map(|p| p.steps.iter())
        .find_map(|s| match s {
            Step::ApplyWorkloadStatus { status, .. } => status.condition("QuotaReserved").map(|c| c.message.clone()),
            _ => None,
        })
        .unwrap_or_else(|| format!("not admitted: {:?}", ix.workload_status(&key)));
    Err(why)
}

/// The nodes are in force: the distributed gang with workers of 16 GPUs
/// (more than any node has) fits team A's quota, and is refused as no node
/// could ever hold it.
#[test]
fn a_pod_larger_than_every_node_is_not_admitted() {
    let mut docs = documents(&examples().join("jobs/distributed-gang.yaml"));
    docs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "16".into();
    docs[0]["spec"]["parallelism"] = 2.into();
    docs[0]["spec"]["completions"] = 2.into();
    let why = admitted_documents(docs).expect_err("admitted on nodes of 8 GPUs");
    assert!(why.contains("no node could ever hold it"), "{why}");
}

#[test]
fn every_example_job_is_placed_alone_on_the_example_nodes_and_queues() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples().join("jobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    let failures: Vec<String> = files
        .iter()
        .filter_map(|f| match admitted(f) {
            Err(why) => Some(format!("{}: never runs: {why}", f.display())),
            Ok(a) if ran_on(&a) != said(f) => Some(format!(
                "{}: the comment says {:?}, the engine admitted {:?}",
                f.display(),
                said(f),
                ran_on(&a)
            )),
            Ok(a) if cpu_only(&a) != said_cpu_only(f) => Some(format!(
                "{}: pod sets {:?} request no GPU (they need nodes without the GPU taint), the `# CPU-only pods:` line names {:?}",
                f.display(),
                cpu_only(&a),
                said_cpu_only(f)
            )),
            Ok(_) => None,
        })
        .collect();
    assert!(
        failures.is_empty(),
        "example jobs that do not run as their comments say:\n{}",
        failures.join("\n")
    );
}

/// No example queue has a borrowing limit it could never use: for every
/// `borrowingLimit` on a flavor's resource, some other queue of its cohort
/// lends some of that resource of that flavor (its nominal quota, or its
/// `lendingLimit`).
#[test]
fn every_example_borrowing_limit_has_something_to_borrow() {
    let file = examples().join("cluster-queues.yaml");
    let queues: Vec<Value> = documents(&file)
        .into_iter()
        .filter(|d| d["kind"] == "ClusterQueue")
        .collect();
    let lends = |q: &Value, flavor: &str, resource: &str| -> bool {
        q["spec"]["resourceGroups"].as_array().into_iter().flatten().any(|g| {
            g["flavors"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| f["name"] == flavor)
                .any(|f| {
                    f["resources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|r| r["name"] == resource)
                        .any(|r| {
                            let lendable = r.get("lendingLimit").unwrap_or(&r["nominalQuota"]);
                            !matches!(
                                lendable
                                    .as_str()
                                    .map(str::to_string)
                                    .unwrap_or_else(|| lendable.to_string())
                                    .as_str(),
                                "0" | "null"
                            )
                        })
                })
        })
    };
    let mut useless = Vec::new();
    for q in &queues {
        let cohort = &q["spec"]["cohort"];
        for g in q["spec"]["resourceGroups"].as_array().into_iter().flatten() {
            for f in g["flavors"].as_array().into_iter().flatten() {
                for r in f["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r.get("borrowingLimit").is_some())
                {
                    let (flavor, resource) = (f["name"].as_str().unwrap_or(""), r["name"].as_str().unwrap_or(""));
                    let lenders = queues
                        .iter()
                        .filter(|o| o["metadata"]["name"] != q["metadata"]["name"] && o["spec"]["cohort"] == *cohort)
                        .any(|o| lends(o, flavor, resource));
                    if !lenders {
                        useless.push(format!("{}: {flavor} {resource}", q["metadata"]["name"]));
                    }
                }
            }
        }
    }
    assert!(
        useless.is_empty(),
        "borrowing limits nothing can ever fill: {useless:?}"
    );
}

/// Every option a `torchrun` of PyTorch 2.4 (the examples' image,
/// `nvcr.io/nvidia/pytorch:24.08-py3`) accepts before the script
/// (`torch/distributed/run.py`'s parser; `_` and `-` spellings both).
const TORCHRUN_OPTIONS: &[&str] = &[
    "nnodes",
    "nproc-per-node",
    "rdzv-backend",
    "rdzv-endpoint",
    "rdzv-id",
    "rdzv-conf",
    "standalone",
    "max-restarts",
    "monitor-interval",
    "start-method",
    "role",
    "module",
    "no-python",
    "run-path",
    "log-dir",
    "redirects",
    "tee",
    "local-ranks-filter",
    "node-rank",
    "master-addr",
    "master-port",
    "local-addr",
    "logs-specs",
];

/// Each command list (`command` or `args`) of `v` that runs `program`.
fn commands_running<'a>(v: &'a Value, program: &str, out: &mut Vec<&'a [Value]>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                if let (true, Some(list)) = (k == "command" || k == "args", child.as_array())
                    && list.first().and_then(Value::as_str) == Some(program)
                {
                    out.push(list);
                }
                commands_running(child, program, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| commands_running(i, program, out)),
        _ => {}
    }
}

/// The example launchers pass `torchrun` only options it has (one once
/// passed `--standalone-rdzv-server`, which torchrun refuses).
#[test]
fn every_torchrun_in_the_examples_takes_only_options_torchrun_has() {
    let mut seen = 0;
    for entry in std::fs::read_dir(examples().join("jobs")).unwrap() {
        let file = entry.unwrap().path();
        for doc in documents(&file) {
            let mut lists = Vec::new();
            commands_running(&doc, "torchrun", &mut lists);
            for list in lists {
                seen += 1;
                let options = list[1..]
                    .iter()
                    .filter_map(Value::as_str)
                    .take_while(|a| a.starts_with('-'));
                for option in options {
                    let name = option
                        .trim_start_matches('-')
                        .split('=')
                        .next()
                        .unwrap_or("")
                        .replace('_', "-");
                    assert!(
                        TORCHRUN_OPTIONS.contains(&name.as_str()) || ["m", "r", "t"].contains(&name.as_str()),
                        "{}: torchrun has no option {option:?}",
                        file.display()
                    );
                }
            }
        }
    }
    assert!(seen >= 2, "the examples run torchrun in the gang and the JobSet");
}
