use super::*;

fn names(m: &MutatingWebhookConfiguration) -> Vec<&str> {
    m.webhooks.iter().flatten().map(|w| w.name.as_str()).collect()
}

#[test]
fn mutating_entries_match_the_issue() {
    let o = ManifestOptions::default();
    let m = mutating_configuration(&o);
    assert_eq!(m.metadata.name.as_deref(), Some("sluice"));
    assert_eq!(
        names(&m),
        [
            "queued-jobs.mutate.sluice.dev",
            "default-queue-jobs.mutate.sluice.dev",
            "pods.mutate.sluice.dev",
            "queued-jobsets.mutate.sluice.dev",
            "queued-pytorchjobs.mutate.sluice.dev",
            "queued-mpijobs.mutate.sluice.dev",
            "queued-rayjobs.mutate.sluice.dev",
            "queued-tfjobs.mutate.sluice.dev",
            "queued-xgboostjobs.mutate.sluice.dev",
            "queued-paddlejobs.mutate.sluice.dev",
            "queued-jaxjobs.mutate.sluice.dev",
            "queued-rayclusters.mutate.sluice.dev",
            "queued-trainjobs.mutate.sluice.dev",
            "default-queue-jobsets.mutate.sluice.dev",
            "default-queue-pytorchjobs.mutate.sluice.dev",
            "default-queue-mpijobs.mutate.sluice.dev",
            "default-queue-rayjobs.mutate.sluice.dev",
            "default-queue-tfjobs.mutate.sluice.dev",
            "default-queue-xgboostjobs.mutate.sluice.dev",
            "default-queue-paddlejobs.mutate.sluice.dev",
            "default-queue-jaxjobs.mutate.sluice.dev",
            "default-queue-rayclusters.mutate.sluice.dev",
            "default-queue-trainjobs.mutate.sluice.dev"
        ]
    );
    let hooks = m.webhooks.unwrap();
    for w in &hooks {
        assert_eq!(w.side_effects, "None");
        assert_eq!(w.admission_review_versions, ["v1"]);
        assert_eq!(w.timeout_seconds, Some(5));
        let ns = w.namespace_selector.as_ref().unwrap();
        let exprs = ns.match_expressions.as_ref().unwrap();
        assert_eq!(exprs[0].key, "kubernetes.io/metadata.name");
        assert_eq!(exprs[0].operator, "NotIn");
        assert_eq!(
            exprs[0].values.as_deref().unwrap(),
            ["kube-system", "gpu-operator", "nvidia-gpu-operator", "sluice-system"]
        );
    }
    let (queued, default_queue, pods) = (&hooks[0], &hooks[1], &hooks[2]);
    // JobSets: like queued Jobs, on their own path.
    let jobsets = &hooks[3];
    assert_eq!(jobsets.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(jobsets.object_selector, queued.object_selector);
    let rule = &jobsets.rules.as_ref().unwrap()[0];
    assert_eq!(
        (
            rule.api_groups.as_deref().unwrap(),
            rule.api_versions.as_deref().unwrap(),
            rule.resources.as_deref().unwrap(),
            rule.operations.as_deref().unwrap()
        ),
        (
            &["jobset.x-k8s.io".to_string()][..],
            &["v1alpha2".to_string()][..],
            &["jobsets".to_string()][..],
            &["CREATE".to_string()][..]
        )
    );
    assert_eq!(
        jobsets.client_config.service.as_ref().unwrap().path.as_deref(),
        Some("/mutate/jobsets")
    );
    assert_eq!(queued.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(default_queue.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(pods.failure_policy.as_deref(), Some("Ignore"));
    let obj = queued
        .object_selector
        .as_ref()
        .unwrap()
        .match_expressions
        .as_ref()
        .unwrap();
    assert_eq!(
        (obj[0].key.as_str(), obj[0].operator.as_str()),
        ("sluice.dev/queue", "Exists")
    );
    assert_eq!(
        default_queue
            .namespace_selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            .unwrap()
            .get("sluice.dev/default-queue")
            .map(String::as_str),
        Some("enabled")
    );
    let obj = default_queue
        .object_selector
        .as_ref()
        .unwrap()
        .match_expressions
        .as_ref()
        .unwrap();
    assert_eq!(obj[0].operator, "DoesNotExist");
    let rule = &queued.rules.as_ref().unwrap()[0];
    assert_eq!(rule.api_groups.as_deref().unwrap(), ["batch"]);
    assert_eq!(rule.resources.as_deref().unwrap(), ["jobs"]);
    assert_eq!(rule.operations.as_deref().unwrap(), ["CREATE"]);
    let rule = &pods.rules.as_ref().unwrap()[0];
    assert_eq!(rule.api_groups.as_deref().unwrap(), [""]);
    assert_eq!(rule.resources.as_deref().unwrap(), ["pods"]);
    // kubectl debug adds containers through the subresource.
    let rule = &pods.rules.as_ref().unwrap()[1];
    assert_eq!(rule.resources.as_deref().unwrap(), ["pods/ephemeralcontainers"]);
    assert_eq!(rule.operations.as_deref().unwrap(), ["UPDATE"]);
    let svc = queued.client_config.service.as_ref().unwrap();
    assert_eq!(
        (svc.namespace.as_str(), svc.name.as_str(), svc.path.as_deref(), svc.port),
        ("sluice-system", "sluice-webhook", Some("/mutate/jobs"), Some(443))
    );
    assert!(queued.client_config.ca_bundle.is_none());
    // The default-queue entry has its own path: requests on it are trusted
    // to come from opted-in namespaces.
    let svc = default_queue.client_config.service.as_ref().unwrap();
    assert_eq!(svc.path.as_deref(), Some("/mutate/jobs/default-queue"));
}

#[test]
fn validating_entries_cover_jobs_and_every_sluice_kind() {
    let v = validating_configuration(&ManifestOptions::default());
    let hooks = v.webhooks.unwrap();
    let paths: Vec<_> = hooks
        .iter()
        .map(|w| w.client_config.service.as_ref().unwrap().path.clone().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/validate/jobs",
            "/validate/jobsets",
            "/validate/pytorchjobs",
            "/validate/mpijobs",
            "/validate/rayjobs",
            "/validate/tfjobs",
            "/validate/xgboostjobs",
            "/validate/paddlejobs",
            "/validate/jaxjobs",
            "/validate/rayclusters",
            "/validate/trainjobs",
            "/validate/resourceflavors",
            "/validate/clusterqueues",
            "/validate/cohorts",
            "/validate/localqueues",
            "/validate/workloadpriorityclasses",
            "/validate/workloads"
        ]
    );
    for w in &hooks {
        assert_eq!(w.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(w.side_effects, "None");
        assert_eq!(w.timeout_seconds, Some(5));
    }
    assert_eq!(
        hooks[0].rules.as_ref().unwrap()[0].operations.as_deref().unwrap(),
        ["UPDATE"]
    );
    // Every UPDATE of a queued Job (label on the old or the new object)
    // reaches /validate/jobs, where unsuspending is checked.
    assert_eq!(
        hooks[0].rules.as_ref().unwrap()[0].resources.as_deref().unwrap(),
        ["jobs"]
    );
    let sel = hooks[0].object_selector.as_ref().unwrap();
    let exprs = sel.match_expressions.as_ref().unwrap();
    assert!(
        exprs
            .iter()
            .any(|e| e.key == "sluice.dev/queue" && e.operator == "Exists")
    );
    // JobSets: the same check, on their own path.
    assert_eq!(
        hooks[1].rules.as_ref().unwrap()[0].resources.as_deref().unwrap(),
        ["jobsets"]
    );
    assert_eq!(hooks[1].object_selector, hooks[0].object_selector);
    for (i, plural, group) in [
        (2, "pytorchjobs", "kubeflow.org"),
        (3, "mpijobs", "kubeflow.org"),
        (4, "rayjobs", "ray.io"),
    ] {
        let rule = &hooks[i].rules.as_ref().unwrap()[0];
        assert_eq!(rule.resources.as_deref().unwrap(), [plural]);
        assert_eq!(rule.api_groups.as_deref().unwrap(), [group]);
        assert_eq!(hooks[i].object_selector, hooks[0].object_selector);
    }
    // After the queued kinds' (jobs and the 10 others): the Sluice kinds'.
    let cohorts = hooks[13].rules.as_ref().unwrap();
    assert_eq!(cohorts.len(), 1);
    assert_eq!(cohorts[0].resources.as_deref().unwrap(), ["cohorts"]);
    assert_eq!(cohorts[0].operations.as_deref().unwrap(), ["CREATE", "UPDATE"]);
    let wl = hooks[16].rules.as_ref().unwrap();
    assert_eq!(wl[1].resources.as_deref().unwrap(), ["workloads/status"]);
    assert_eq!(wl[0].api_groups.as_deref().unwrap(), ["sluice.dev"]);
    assert_eq!(wl[0].api_versions.as_deref().unwrap(), ["v1alpha1"]);
}

#[test]
fn url_target_and_ca_bundle() {
    let o = ManifestOptions {
        target: Target::Url("https://127.0.0.1:9443/".to_owned()),
        ca_bundle: Some(b"-----BEGIN CERTIFICATE-----\n".to_vec()),
        excluded_namespaces: Vec::new(),
        ..ManifestOptions::default()
    };
    let m = mutating_configuration(&o);
    let pods = &m.webhooks.as_ref().unwrap()[2];
    assert_eq!(
        pods.client_config.url.as_deref(),
        Some("https://127.0.0.1:9443/mutate/pods")
    );
    assert!(pods.client_config.service.is_none());
    assert!(pods.client_config.ca_bundle.is_some());
    assert!(pods.namespace_selector.as_ref().unwrap().match_expressions.is_none());
    let json = serde_json::to_value(&m).unwrap();
    assert_eq!(
        json["webhooks"][2]["clientConfig"]["caBundle"],
        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
    );
}

#[test]
fn yaml_has_both_documents_and_round_trips() {
    let text = render_yaml(&ManifestOptions::default()).unwrap();
    let docs: Vec<&str> = text.split("---\n").filter(|d| !d.trim().is_empty()).collect();
    assert_eq!(docs.len(), 2);
    let m: MutatingWebhookConfiguration = serde_saphyr::from_str(docs[0]).unwrap();
    assert_eq!(m, mutating_configuration(&ManifestOptions::default()));
    let v: ValidatingWebhookConfiguration = serde_saphyr::from_str(docs[1]).unwrap();
    assert_eq!(v, validating_configuration(&ManifestOptions::default()));
    assert!(docs[0].contains("kind: MutatingWebhookConfiguration"));
    assert!(docs[1].contains("kind: ValidatingWebhookConfiguration"));
}

#[test]
fn recorded_server_defaults_are_what_we_set_or_harmless() {
    // The API server's reply to a service-ref configuration like ours: the
    // defaults it fills in must not contradict our explicit settings.
    let path = crate::testing::fixtures_dir().join("mutatingwebhookconfiguration-service-ref-create-response.json");
    let mut raw: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    // The recording replaced caBundle with a placeholder that is not base64.
    for w in raw["webhooks"].as_array_mut().unwrap() {
        w["clientConfig"].as_object_mut().unwrap().remove("caBundle");
    }
    let recorded: MutatingWebhookConfiguration = serde_json::from_value(raw).unwrap();
    let recorded = recorded.webhooks.unwrap();
    let ours = mutating_configuration(&ManifestOptions::default()).webhooks.unwrap();
    let by_name = |name: &str| ours.iter().find(|w| w.name == name).unwrap();
    // The recording's job entry (queue label objectSelector) and pod entry
    // are the shapes of our queued-jobs and pods entries.
    for (theirs, mine) in [
        (&recorded[0], by_name("queued-jobs.mutate.sluice.dev")),
        (&recorded[1], by_name("pods.mutate.sluice.dev")),
    ] {
        // Server defaults we set explicitly must be what the server fills in.
        assert_eq!(mine.match_policy, theirs.match_policy, "{}", mine.name);
        assert_eq!(mine.side_effects, theirs.side_effects, "{}", mine.name);
        assert_eq!(mine.admission_review_versions, theirs.admission_review_versions);
        assert_eq!(mine.failure_policy, theirs.failure_policy, "{}", mine.name);
        let (ms, ts) = (
            mine.client_config.service.as_ref().unwrap(),
            theirs.client_config.service.as_ref().unwrap(),
        );
        assert_eq!((&ms.namespace, &ms.name, ms.port), (&ts.namespace, &ts.name, ts.port));
        // Our first rule is theirs, up to the scope the server defaults to "*".
        let (mr, tr) = (&mine.rules.as_ref().unwrap()[0], &theirs.rules.as_ref().unwrap()[0]);
        assert_eq!(tr.scope.as_deref(), Some("*"));
        assert!(mr.scope.is_none() || mr.scope == tr.scope);
        assert_eq!(
            (&mr.api_groups, &mr.api_versions, &mr.resources, &mr.operations),
            (&tr.api_groups, &tr.api_versions, &tr.resources, &tr.operations),
            "{}",
            mine.name
        );
    }
    assert_eq!(
        by_name("queued-jobs.mutate.sluice.dev").object_selector,
        recorded[0].object_selector
    );
}

#[test]
fn kueue_compat_adds_entries_for_the_kueue_label() {
    let o = ManifestOptions {
        kueue_compat: true,
        ..ManifestOptions::default()
    };
    let m = mutating_configuration(&o);
    let kueue_names: Vec<&str> = names(&m).into_iter().filter(|n| n.starts_with("kueue-")).collect();
    assert_eq!(
        kueue_names,
        [
            "kueue-jobs.mutate.sluice.dev",
            "kueue-jobsets.mutate.sluice.dev",
            "kueue-pytorchjobs.mutate.sluice.dev",
            "kueue-mpijobs.mutate.sluice.dev",
            "kueue-rayjobs.mutate.sluice.dev",
            "kueue-tfjobs.mutate.sluice.dev",
            "kueue-xgboostjobs.mutate.sluice.dev",
            "kueue-paddlejobs.mutate.sluice.dev",
            "kueue-jaxjobs.mutate.sluice.dev",
            "kueue-rayclusters.mutate.sluice.dev",
            "kueue-trainjobs.mutate.sluice.dev"
        ]
    );
    let hooks = m.webhooks.unwrap();
    // Every Kueue entry selects the same way; the last is TrainJobs'.
    let kueue = hooks.last().unwrap();
    assert_eq!(
        kueue.client_config.service.as_ref().unwrap().path.as_deref(),
        Some("/mutate/trainjobs")
    );
    assert_eq!(kueue.failure_policy.as_deref(), Some("Fail"));
    let exprs = kueue
        .object_selector
        .as_ref()
        .unwrap()
        .match_expressions
        .clone()
        .unwrap();
    assert_eq!(
        (exprs[0].key.as_str(), exprs[0].operator.as_str()),
        ("kueue.x-k8s.io/queue-name", "Exists")
    );
    assert_eq!(
        (exprs[1].key.as_str(), exprs[1].operator.as_str()),
        ("sluice.dev/queue", "DoesNotExist")
    );
    let default_queue = hooks[1]
        .object_selector
        .as_ref()
        .unwrap()
        .match_expressions
        .clone()
        .unwrap();
    assert_eq!(default_queue.len(), 2);
    let v = validating_configuration(&o);
    let hooks = v.webhooks.unwrap();
    for plural in [
        "jobs",
        "jobsets",
        "pytorchjobs",
        "mpijobs",
        "rayjobs",
        "tfjobs",
        "xgboostjobs",
        "paddlejobs",
        "jaxjobs",
        "rayclusters",
        "trainjobs",
    ] {
        assert!(
            hooks
                .iter()
                .any(|w| w.name == format!("kueue-{plural}.validate.sluice.dev")),
            "{plural}"
        );
    }
    // Off by default.
    assert_eq!(
        mutating_configuration(&ManifestOptions::default())
            .webhooks
            .unwrap()
            .len(),
        23
    );
}

#[test]
fn every_queued_kind_has_a_default_queue_entry_like_jobs() {
    let m = mutating_configuration(&ManifestOptions::default());
    let hooks = m.webhooks.unwrap();
    let jobs = hooks
        .iter()
        .find(|w| w.name == "default-queue-jobs.mutate.sluice.dev")
        .unwrap();
    for plural in ["jobsets", "pytorchjobs", "mpijobs", "rayjobs"] {
        let w = hooks
            .iter()
            .find(|w| w.name == format!("default-queue-{plural}.mutate.sluice.dev"))
            .unwrap_or_else(|| panic!("{plural}"));
        assert_eq!(w.namespace_selector, jobs.namespace_selector, "{plural}");
        assert_eq!(w.object_selector, jobs.object_selector, "{plural}");
        assert_eq!(w.failure_policy.as_deref(), Some("Fail"));
        let rule = &w.rules.as_ref().unwrap()[0];
        assert_eq!(rule.resources.as_deref().unwrap(), [plural]);
        assert_eq!(rule.operations.as_deref().unwrap(), ["CREATE"]);
        let path = w.client_config.service.as_ref().unwrap().path.as_deref();
        assert_eq!(path, Some(format!("/mutate/{plural}/default-queue").as_str()));
    }
}
