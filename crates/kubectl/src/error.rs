//! One-line errors a user can act on: what they may not do (403), a
//! cluster without Sluice, a name that is not there.

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("cannot reach the cluster: {0}")]
    Connect(String),
    #[error(
        "forbidden: you may not {verb} {resource}{scope}; ask your cluster admin for it ({})",
        rights_hint(verb, resource)
    )]
    Forbidden {
        verb: &'static str,
        resource: &'static str,
        scope: String,
    },
    #[error(
        "Sluice is not installed on this cluster: the API server does not serve {resource} (sluice.dev/v1alpha1); install the chart, or apply the CRDs with `kubectl apply --server-side -f crds/` (a later helm install then needs --set crds.install=false)"
    )]
    NotInstalled { resource: &'static str },
    #[error("{0}")]
    NotFound(String),
    #[error("{verb} {resource}: {message}")]
    Api {
        verb: &'static str,
        resource: &'static str,
        message: String,
    },
    #[error("{0}")]
    Usage(String),
    #[error("writing the output: {0}")]
    Output(String),
}

/// Which of the chart's user roles (`charts/sluice/templates/user-roles.yaml`)
/// grants `verb` on `resource`, for the hint of a 403: `sluice-viewer`
/// reads LocalQueues and Workloads, `sluice-editor` changes LocalQueues;
/// no role of the chart grants anything on ClusterQueues.
pub fn rights_hint(verb: &str, resource: &str) -> &'static str {
    let read = matches!(verb, "get" | "list" | "watch");
    match resource {
        "localqueues.sluice.dev" | "workloads.sluice.dev" if read => {
            "the chart's sluice-viewer ClusterRole grants reading LocalQueues and Workloads; the built-in view, edit and admin roles include it"
        }
        "localqueues.sluice.dev" => {
            "the chart's sluice-editor ClusterRole grants changing LocalQueues; the built-in admin role includes it"
        }
        "clusterqueues.sluice.dev" => "ClusterQueues are cluster-scoped; no role of the chart grants rights on them",
        _ => "no role of the chart grants it",
    }
}

/// Turns an API error of `verb resource` (in `namespace`, or cluster-wide)
/// into its one line.
pub fn api_error(err: kube::Error, verb: &'static str, resource: &'static str, namespace: Option<&str>) -> PluginError {
    let scope = match namespace {
        Some(ns) => format!(" in namespace {ns}"),
        None => " at the cluster scope".to_string(),
    };
    match &err {
        kube::Error::Api(s) if s.code == 403 => PluginError::Forbidden { verb, resource, scope },
        // The resource itself is not served (no CRD): a 404 on a list.
        kube::Error::Api(s) if s.code == 404 && verb == "list" => PluginError::NotInstalled { resource },
        kube::Error::Api(s) => PluginError::Api {
            verb,
            resource,
            message: s.message.clone(),
        },
        other => PluginError::Connect(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "message": message, "reason": "Forbidden", "code": code
            }))
            .unwrap(),
        )
    }

    #[test]
    fn forbidden_names_the_verb_the_resource_and_the_scope() {
        let e = api_error(
            status(403, "long server text"),
            "list",
            "clusterqueues.sluice.dev",
            None,
        );
        assert_eq!(
            e.to_string(),
            "forbidden: you may not list clusterqueues.sluice.dev at the cluster scope; ask your cluster admin for it (ClusterQueues are cluster-scoped; no role of the chart grants rights on them)"
        );
        let e = api_error(status(403, "x"), "list", "workloads.sluice.dev", Some("team-a"));
        assert_eq!(
            e.to_string(),
            "forbidden: you may not list workloads.sluice.dev in namespace team-a; ask your cluster admin for it (the chart's sluice-viewer ClusterRole grants reading LocalQueues and Workloads; the built-in view, edit and admin roles include it)"
        );
    }

    #[test]
    fn a_denied_stop_names_the_role_that_may_change_queues() {
        // `kubectl sluice stop team-a` as a viewer: the hint names the
        // editor role, not the read-only viewer role.
        let e = api_error(status(403, "x"), "patch", "localqueues.sluice.dev", Some("team-a"));
        assert_eq!(
            e.to_string(),
            "forbidden: you may not patch localqueues.sluice.dev in namespace team-a; ask your cluster admin for it (the chart's sluice-editor ClusterRole grants changing LocalQueues; the built-in admin role includes it)"
        );
        let e = api_error(status(403, "x"), "patch", "clusterqueues.sluice.dev", None);
        assert!(
            e.to_string()
                .ends_with("(ClusterQueues are cluster-scoped; no role of the chart grants rights on them)"),
            "{e}"
        );
    }

    /// The hint names the chart's roles by the verbs their rules grant.
    #[test]
    fn the_hints_match_the_charts_user_roles() {
        let roles = include_str!("../../../charts/sluice/templates/user-roles.yaml");
        let rule = |role: &str| {
            let start = roles
                .find(&format!("name: {{{{ include \"sluice.fullname\" . }}}}-{role}"))
                .expect(role);
            let rest = &roles[start..];
            let rules = &rest[rest.find("rules:").expect("rules")..];
            rules[..rules.find("---").unwrap_or(rules.len())].to_string()
        };
        let (viewer, editor) = (rule("viewer"), rule("editor"));
        assert!(
            viewer.contains("resources: [localqueues, localqueues/status, workloads, workloads/status]"),
            "{viewer}"
        );
        assert!(viewer.contains("verbs: [get, list, watch]"), "{viewer}");
        assert!(editor.contains("resources: [localqueues]"), "{editor}");
        assert!(editor.contains("verbs: [create, update, patch, delete]"), "{editor}");
        assert!(!roles.contains("clusterqueues"), "no user role grants ClusterQueues");
        for verb in ["get", "list", "watch"] {
            assert!(rights_hint(verb, "workloads.sluice.dev").contains("sluice-viewer"));
            assert!(rights_hint(verb, "localqueues.sluice.dev").contains("sluice-viewer"));
        }
        for verb in ["create", "update", "patch", "delete"] {
            assert!(rights_hint(verb, "localqueues.sluice.dev").contains("sluice-editor"));
            assert!(
                !rights_hint(verb, "workloads.sluice.dev").contains("sluice-"),
                "no role changes Workloads"
            );
        }
    }

    #[test]
    fn a_missing_resource_means_sluice_is_not_installed() {
        let e = api_error(
            status(404, "the server could not find the requested resource"),
            "list",
            "workloads",
            Some("a"),
        );
        assert_eq!(
            e.to_string(),
            "Sluice is not installed on this cluster: the API server does not serve workloads (sluice.dev/v1alpha1); \
             install the chart, or apply the CRDs with `kubectl apply --server-side -f crds/` \
             (a later helm install then needs --set crds.install=false)"
        );
    }
}
