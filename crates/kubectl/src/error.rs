//! One-line errors a user can act on: what they may not do (403), a
//! cluster without Sluice, a name that is not there.

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("cannot reach the cluster: {0}")]
    Connect(String),
    #[error(
        "forbidden: you may not {verb} {resource}{scope}; ask your cluster admin for it (the chart's sluice-viewer ClusterRole grants reading Sluice objects)"
    )]
    Forbidden {
        verb: &'static str,
        resource: &'static str,
        scope: String,
    },
    #[error(
        "Sluice is not installed on this cluster: the API server does not serve {resource} (sluice.dev/v1alpha1); install the chart, or `kubectl apply --server-side -f crds/`"
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
            "forbidden: you may not list clusterqueues.sluice.dev at the cluster scope; ask your cluster admin for it (the chart's sluice-viewer ClusterRole grants reading Sluice objects)"
        );
        let e = api_error(status(403, "x"), "patch", "localqueues.sluice.dev", Some("team-a"));
        assert!(
            e.to_string()
                .starts_with("forbidden: you may not patch localqueues.sluice.dev in namespace team-a;")
        );
    }

    #[test]
    fn a_missing_resource_means_sluice_is_not_installed() {
        let e = api_error(
            status(404, "the server could not find the requested resource"),
            "list",
            "workloads",
            Some("a"),
        );
        assert!(
            e.to_string().starts_with("Sluice is not installed on this cluster"),
            "{e}"
        );
    }
}
