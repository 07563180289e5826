use super::*;

fn names(m: &MutatingWebhookConfiguration) -> Vec<&str> {
    m.webhooks.iter().flatten().map(|w| w.name.as_str()).collect()
}

/// Every queued kind's plural, in registry order.
fn m2(o: &ManifestOptions) -> MutatingWebhookConfiguration {
    mutating_configuration(o)
}

fn plurals() -> Vec<&'static str> {
    JobKind::ALL.map(|k| k.plural()).to_vec()
}

fn mutating_named<'a>(m: &'a MutatingWebhookConfiguration, name: &str) -> &'a MutatingWebhook {
    m.webhooks
        .iter()
        .flatten()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("{name}"))
}

fn validating_named<'a>(v: &'a ValidatingWebhookConfiguration, name: &str) -> &'a ValidatingWebhook {
    v.webhooks
        .iter()
        .flatten()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("{name}"))
}

fn first_rule(rules: &Option<Vec<RuleWithOperations>>) -> (Vec<String>, Vec<String>, Vec<String>, Vec<String>) {
    let r = &rules.as_ref().unwrap()[0];
    (
        r.api_groups.clone().unwrap(),
        r.api_versions.clone().unwrap(),
        r.resources.clone().unwrap(),
        r.operations.clone().unwrap(),
    )
}

#[test]
fn mutating_entries_match_the_issue() {
    let o = ManifestOptions::default();
    let m = mutating_configuration(&o);
    assert_eq!(m.metadata.name.as_deref(), Some("sluice"));
    let mut want = vec!["pods.mutate.sluice.dev".to_owned()];
    want.extend(plurals().iter().map(|p| format!("queued-{p}.mutate.sluice.dev")));
    want.extend(plurals().iter().map(|p| format!("default-queue-{p}.mutate.sluice.dev")));
    assert_eq!(names(&m), want);
    assert!(names(&m).contains(&"queued-deployments.mutate.sluice.dev"));
    let hooks = m.webhooks.as_ref().unwrap();
    for w in hooks {
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
    let queued = mutating_named(&m, "queued-jobs.mutate.sluice.dev");
    let default_queue = mutating_named(&m, "default-queue-jobs.mutate.sluice.dev");
    let pods = mutating_named(&m, "pods.mutate.sluice.dev");
    // JobSets: like queued Jobs, on their own path.
    let jobsets = mutating_named(&m, "queued-jobsets.mutate.sluice.dev");
    assert_eq!(jobsets.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(jobsets.object_selector, queued.object_selector);
    assert_eq!(
        first_rule(&jobsets.rules),
        (
            vec!["jobset.x-k8s.io".to_string()],
            vec!["v1alpha2".to_string()],
            vec!["jobsets".to_string()],
            vec!["CREATE".to_string()]
        )
    );
    assert_eq!(
        jobsets.client_config.service.as_ref().unwrap().path.as_deref(),
        Some("/mutate/jobsets")
    );
    // A serving kind's held object is mutated on UPDATE too.
    let deployments = mutating_named(&m, "queued-deployments.mutate.sluice.dev");
    assert_eq!(
        first_rule(&deployments.rules),
        (
            vec!["apps".to_string()],
            vec!["v1".to_string()],
            vec!["deployments".to_string()],
            vec!["CREATE".to_string(), "UPDATE".to_string()]
        )
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
    let (groups, _, resources, operations) = first_rule(&queued.rules);
    assert_eq!(
        (groups, resources, operations),
        (
            vec!["batch".to_string()],
            vec!["jobs".to_string()],
            vec!["CREATE".to_string()]
        )
    );
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
fn validating_entries_cover_every_queued_kind_scale_replicasets_and_every_sluice_kind() {
    let v = validating_configuration(&ManifestOptions::default());
    let paths: Vec<String> = v
        .webhooks
        .iter()
        .flatten()
        .map(|w| w.client_config.service.as_ref().unwrap().path.clone().unwrap())
        .collect();
    let mut want: Vec<String> = plurals().iter().map(|p| format!("/validate/{p}")).collect();
    want.extend(plurals().iter().map(|p| format!("/validate/{p}/default-queue")));
    want.extend(["deployments", "statefulsets", "leaderworkersets"].map(|p| format!("/validate/{p}/scale")));
    want.push("/validate/pods".into());
    want.push("/validate/replicasets".into());
    want.extend(
        [
            "resourceflavors",
            "clusterqueues",
            "cohorts",
            "localqueues",
            "workloadpriorityclasses",
            "workloads",
        ]
        .map(|p| format!("/validate/{p}")),
    );
    assert_eq!(paths, want);
    for w in v.webhooks.iter().flatten() {
        assert_eq!(w.side_effects, "None");
        assert_eq!(w.timeout_seconds, Some(5));
        // An outage never stops autoscaling or ReplicaSets anywhere.
        let ignore = w.name.ends_with("-scale.validate.sluice.dev") || w.name == "replicasets.validate.sluice.dev";
        let policy = if ignore { "Ignore" } else { "Fail" };
        assert_eq!(w.failure_policy.as_deref(), Some(policy), "{}", w.name);
    }
    // Every UPDATE of a queued Job (label on the old or the new object)
    // reaches /validate/jobs, where unsuspending is checked.
    let jobs = validating_named(&v, "jobs.validate.sluice.dev");
    let (_, _, resources, operations) = first_rule(&jobs.rules);
    assert_eq!(
        (resources, operations),
        (vec!["jobs".to_string()], vec!["UPDATE".to_string()])
    );
    let exprs = jobs
        .object_selector
        .as_ref()
        .unwrap()
        .match_expressions
        .as_ref()
        .unwrap();
    assert!(
        exprs
            .iter()
            .any(|e| e.key == "sluice.dev/queue" && e.operator == "Exists")
    );
    for (plural, group) in [
        ("jobsets", "jobset.x-k8s.io"),
        ("pytorchjobs", "kubeflow.org"),
        ("rayjobs", "ray.io"),
        ("deployments", "apps"),
    ] {
        let w = validating_named(&v, &format!("{plural}.validate.sluice.dev"));
        let (groups, _, resources, _) = first_rule(&w.rules);
        assert_eq!((groups, resources), (vec![group.to_string()], vec![plural.to_string()]));
        assert_eq!(w.object_selector, jobs.object_selector);
    }
    // An unlabelled Job in a namespace that queues every object: its
    // unsuspend is checked too.
    let dq = validating_named(&v, "default-queue-jobs.validate.sluice.dev");
    assert_eq!(
        dq.namespace_selector.as_ref().unwrap().match_labels.as_ref().unwrap()["sluice.dev/default-queue"],
        "enabled"
    );
    assert_eq!(
        dq.object_selector.as_ref().unwrap().match_expressions.as_ref().unwrap()[0].operator,
        "DoesNotExist"
    );
    // A Scale has no labels: no objectSelector.
    let scale = validating_named(&v, "deployments-scale.validate.sluice.dev");
    assert!(scale.object_selector.is_none());
    assert_eq!(first_rule(&scale.rules).2, ["deployments/scale"]);
    let rs = validating_named(&v, "replicasets.validate.sluice.dev");
    assert_eq!(first_rule(&rs.rules).3, ["CREATE", "UPDATE"]);
    assert_eq!(rs.namespace_selector, dq.namespace_selector);
    let cohorts = validating_named(&v, "cohorts.validate.sluice.dev")
        .rules
        .as_ref()
        .unwrap();
    assert_eq!(cohorts.len(), 1);
    assert_eq!(cohorts[0].resources.as_deref().unwrap(), ["cohorts"]);
    assert_eq!(cohorts[0].operations.as_deref().unwrap(), ["CREATE", "UPDATE"]);
    let wl = validating_named(&v, "workloads.validate.sluice.dev")
        .rules
        .as_ref()
        .unwrap();
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
    let pods = &m.webhooks.as_ref().unwrap()[0];
    assert_eq!(
        pods.client_config.url.as_deref(),
        Some("https://127.0.0.1:9443/mutate/pods")
    );
    assert!(pods.client_config.service.is_none());
    assert!(pods.client_config.ca_bundle.is_some());
    assert!(pods.namespace_selector.as_ref().unwrap().match_expressions.is_none());
    let json = serde_json::to_value(&m).unwrap();
    assert_eq!(
        json["webhooks"][0]["clientConfig"]["caBundle"],
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
    let want: Vec<String> = plurals()
        .iter()
        .map(|p| format!("kueue-{p}.mutate.sluice.dev"))
        .collect();
    assert_eq!(kueue_names, want);
    let hooks = m.webhooks.unwrap();
    // Every Kueue entry selects the same way; the last is the last kind's.
    let kueue = hooks.last().unwrap();
    assert_eq!(
        kueue.client_config.service.as_ref().unwrap().path.as_deref(),
        Some(format!("/mutate/{}", plurals().last().unwrap()).as_str())
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
    let default_queue = mutating_named(&m2(&o), "default-queue-jobs.mutate.sluice.dev")
        .object_selector
        .clone()
        .as_ref()
        .unwrap()
        .match_expressions
        .clone()
        .unwrap();
    assert_eq!(default_queue.len(), 2);
    let v = validating_configuration(&o);
    let hooks = v.webhooks.unwrap();
    for plural in plurals() {
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
        1 + 2 * plurals().len()
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
