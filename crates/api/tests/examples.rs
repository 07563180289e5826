//! Every manifest in `examples/` parses into the typed API and passes
//! `validate()`, and the examples are consistent with each other: queues
//! point at existing ClusterQueues and flavors, Jobs at existing queues and
//! priority classes, and every Job resource is covered by its queue.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::batch::v1::Job;
use sluice_api::labels;
use sluice_api::manifest::{SluiceObject, parse_manifests};
use sluice_api::v1alpha1::PodSet;
use sluice_api::validation::Validate;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

struct Examples {
    objects: Vec<(PathBuf, SluiceObject)>,
    jobs: Vec<(PathBuf, Job)>,
}

/// The GPU setup: `examples/*.yaml` and `examples/jobs/`. Other
/// subdirectories (simulator scenarios) are self-contained and only checked
/// for validity.
fn gpu_setup_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            files.push(path);
        }
    }
    yaml_files(&examples_dir().join("jobs"), &mut files);
    files.sort();
    files
}

fn all_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    yaml_files(&examples_dir(), &mut files);
    files.sort();
    files
}

fn load(files: Vec<PathBuf>) -> Examples {
    assert!(files.len() >= 6, "expected the example files, found {files:?}");
    let mut objects = Vec::new();
    let mut jobs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let documents = parse_manifests(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for document in documents {
            if let Some(object) = document.as_sluice() {
                objects.push((file.clone(), object.clone()));
            } else {
                let other = document.as_other().unwrap();
                if other.kind.as_deref() == Some("Job") {
                    let job: Job = other
                        .decode()
                        .unwrap_or_else(|(path, msg)| panic!("{}: {path}: {msg}", file.display()));
                    jobs.push((file.clone(), job));
                }
            }
        }
    }
    Examples { objects, jobs }
}

#[test]
fn every_example_is_valid() {
    let examples = load(all_files());
    let mut failures = Vec::new();
    for (file, object) in &examples.objects {
        for v in object.validate() {
            failures.push(format!("{} {} {:?}: {v}", file.display(), object.kind(), object.name()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn gpu_setup_has_every_piece() {
    let examples = load(gpu_setup_files());
    let count = |kind: &str| examples.objects.iter().filter(|(_, o)| o.kind() == kind).count();
    assert_eq!(count("ResourceFlavor"), 5);
    assert_eq!(count("ClusterQueue"), 3);
    assert!(count("LocalQueue") >= 3);
    assert_eq!(count("WorkloadPriorityClass"), 3);
    assert!(examples.jobs.len() >= 3);
}

#[test]
fn examples_reference_each_other_consistently() {
    let examples = load(gpu_setup_files());
    let mut flavors = BTreeSet::new();
    let mut cluster_queues = BTreeMap::new();
    let mut local_queues = BTreeMap::new();
    let mut priority_classes = BTreeMap::new();
    for (_, object) in &examples.objects {
        match object {
            SluiceObject::ResourceFlavor(rf) => {
                flavors.insert(rf.metadata.name.clone().unwrap());
            }
            SluiceObject::ClusterQueue(cq) => {
                cluster_queues.insert(cq.metadata.name.clone().unwrap(), cq.spec.clone());
            }
            SluiceObject::LocalQueue(lq) => {
                let key = (
                    lq.metadata.namespace.clone().unwrap(),
                    lq.metadata.name.clone().unwrap(),
                );
                local_queues.insert(key, lq.spec.cluster_queue.clone());
            }
            SluiceObject::WorkloadPriorityClass(pc) => {
                priority_classes.insert(pc.metadata.name.clone().unwrap(), pc.spec.value);
            }
            SluiceObject::Cohort(_) | SluiceObject::Workload(_) => {}
        }
    }
    for (name, spec) in &cluster_queues {
        for flavor in spec.flavor_names() {
            assert!(
                flavors.contains(flavor),
                "ClusterQueue {name} uses unknown flavor {flavor}"
            );
        }
        assert_eq!(spec.cohort.as_deref(), Some("gpu-cohort"), "{name}");
    }
    for ((ns, name), cq) in &local_queues {
        assert!(
            cluster_queues.contains_key(cq),
            "LocalQueue {ns}/{name} points at unknown {cq}"
        );
    }
    assert_eq!(priority_classes["training"], 100);
    assert_eq!(priority_classes["inference-critical"], 100000);

    for (file, job) in &examples.jobs {
        let job_labels = job.metadata.labels.clone().unwrap_or_default();
        let ns = job.metadata.namespace.clone().unwrap();
        let queue = labels::queue_name(&job_labels, false)
            .unwrap_or_else(|| panic!("{}: Job without {}", file.display(), labels::QUEUE));
        let cq = local_queues
            .get(&(ns.clone(), queue.to_string()))
            .unwrap_or_else(|| panic!("{}: no LocalQueue {ns}/{queue}", file.display()));
        if let Some(class) = job_labels.get(labels::PRIORITY_CLASS) {
            assert!(
                priority_classes.contains_key(class),
                "{}: unknown priority class {class}",
                file.display()
            );
        }
        // Every resource the pods request is covered by the ClusterQueue.
        let spec = job.spec.clone().unwrap();
        let pod_set = PodSet {
            name: "main".into(),
            count: spec.parallelism.unwrap_or(1),
            min_count: None,
            topology: None,
            template: spec.template,
        };
        let covered: BTreeSet<&str> = cluster_queues[cq]
            .resource_groups
            .iter()
            .flat_map(|g| g.covered_resources.iter().map(String::as_str))
            .collect();
        let requests = pod_set.total_requests("spec").unwrap();
        for resource in requests.keys() {
            assert!(
                covered.contains(resource.as_str()),
                "{}: {resource} not covered by {cq}",
                file.display()
            );
        }
    }
}

#[test]
fn gang_example_is_a_4x8_gpu_gang() {
    let examples = load(gpu_setup_files());
    let gang: Vec<&Job> = examples
        .jobs
        .iter()
        .map(|(_, j)| j)
        .filter(|j| j.metadata.labels.as_ref().and_then(|l| l.get(labels::GANG)).is_some())
        .collect();
    assert_eq!(gang.len(), 2);
    for job in &gang {
        let l = job.metadata.labels.as_ref().unwrap();
        assert_eq!(l[labels::GANG_SIZE], gang.len().to_string());
    }
    let workers = gang
        .iter()
        .find(|j| j.spec.as_ref().unwrap().parallelism == Some(4))
        .unwrap();
    let pod_set = PodSet {
        name: "workers".into(),
        count: 4,
        min_count: None,
        topology: None,
        template: workers.spec.clone().unwrap().template,
    };
    assert_eq!(pod_set.total_requests("spec").unwrap()["nvidia.com/gpu"], 32_000);
}

/// `examples/simulate/gpu-teams.yaml` says it holds the cluster of
/// `examples/*.yaml` "copied below unchanged": every object of those files
/// is in it, equal, and it holds no other (but its Trace).
#[test]
fn gpu_teams_scenario_carries_the_example_cluster_unchanged() {
    fn objects(file: &Path) -> BTreeMap<String, serde_json::Value> {
        let text = std::fs::read_to_string(file).unwrap();
        text.split("\n---")
            .filter(|d| {
                d.lines()
                    .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            })
            .map(|d| {
                serde_saphyr::from_str::<serde_json::Value>(d).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
            })
            .filter(|v| v["kind"] != "Trace")
            .map(|v| {
                let key = format!(
                    "{} {}/{}",
                    v["kind"].as_str().unwrap_or_default(),
                    v["metadata"]["namespace"].as_str().unwrap_or_default(),
                    v["metadata"]["name"].as_str().unwrap_or_default()
                );
                (key, v)
            })
            .collect()
    }
    let mut cluster = BTreeMap::new();
    for file in gpu_setup_files()
        .iter()
        .filter(|f| f.parent() == Some(examples_dir().as_path()))
    {
        cluster.extend(objects(file));
    }
    assert!(cluster.len() > 10, "{:?}", cluster.keys());
    let scenario = objects(&examples_dir().join("simulate/gpu-teams.yaml"));
    let differ: Vec<&String> = cluster
        .keys()
        .chain(scenario.keys())
        .filter(|k| cluster.get(*k) != scenario.get(*k))
        .collect();
    assert!(
        differ.is_empty(),
        "gpu-teams.yaml and examples/*.yaml disagree on {differ:?}"
    );
}

/// examples/README.md says how to apply the example jobs: those of core
/// kinds (batch/v1 Jobs, v1 Services) on the plain `kubectl apply` lines,
/// each of another kind on its own line whose comment names the API group
/// whose CRDs it needs (kubectl refuses a kind it does not know, so
/// `kubectl apply -f examples/jobs/` fails without the operators).
#[test]
fn the_readme_says_which_example_jobs_need_an_operators_crds() {
    let readme = std::fs::read_to_string(examples_dir().join("README.md")).unwrap();
    let mut files = Vec::new();
    yaml_files(&examples_dir().join("jobs"), &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(file).unwrap();
        let groups: BTreeSet<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("apiVersion: "))
            .filter_map(|v| v.trim().split_once('/').map(|(g, _)| g.to_string()))
            .filter(|g| g != "batch")
            .collect();
        let mention = format!("examples/jobs/{name}");
        let lines: Vec<&str> = readme.lines().filter(|l| l.contains(&mention)).collect();
        let ok = match groups.iter().next() {
            None => !lines.is_empty() && lines.iter().all(|l| !l.contains('#')),
            Some(group) => {
                groups.len() == 1
                    && !lines.is_empty()
                    && lines
                        .iter()
                        .all(|l| l.split_once('#').is_some_and(|(_, c)| c.contains(group.as_str())))
            }
        };
        if !ok {
            wrong.push(format!("{name} (API groups {groups:?}): {lines:?}"));
        }
    }
    assert!(files.len() >= 8, "{files:?}");
    assert!(
        wrong.is_empty(),
        "examples/README.md does not say how to apply these: {wrong:?}"
    );
}
