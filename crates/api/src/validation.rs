//! Validation of Sluice objects beyond what the CRD schema checks.
//!
//! Every kind implements [`Validate`]: `validate()` returns **every**
//! violation it finds, each with the field path a user would look for
//! (`spec.resourceGroups[0].flavors[1].resources[2].name`) and a message.
//! The webhook turns these into a denial, `sluice simulate` into an error.
//!
//! Some of the rules are also in the CRD as CEL `x-kubernetes-validations`,
//! but API servers with the CEL feature off drop those silently, so this
//! module is the rule of record.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

/// A single rule violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Field path in the object, e.g. `spec.podSets[1].count`.
    pub path: String,
    /// What is wrong, phrased for the person who wrote the manifest.
    pub message: String,
}

impl Violation {
    /// A violation at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// All violations of one object, as an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", display_violations(.0))]
pub struct ValidationError(pub Vec<Violation>);

fn display_violations(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Cross-field validation of one object.
pub trait Validate {
    /// Every violation found; empty when the object is valid.
    fn validate(&self) -> Vec<Violation>;

    /// `Ok(())` when valid, else all violations as one error.
    fn check(&self) -> Result<(), ValidationError> {
        let violations = self.validate();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(ValidationError(violations))
        }
    }
}

/// Maximum length of a DNS-1123 label (namespace, LocalQueue, pod set names).
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Maximum length of a DNS-1123 subdomain (ClusterQueue, flavor, cohort names).
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Maximum length of a qualified resource name (`prefix/name`).
pub const QUALIFIED_NAME_MAX_LENGTH: usize = DNS1123_SUBDOMAIN_MAX_LENGTH + 1 + 63;

/// Schema pattern for a DNS-1123 label.
pub const DNS1123_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// Schema pattern for a DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Schema pattern for a resource name such as `cpu` or `nvidia.com/mig-1g.10gb`.
pub const RESOURCE_NAME_PATTERN: &str =
    "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";

fn is_label_char(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
}

/// Whether `s` is a DNS-1123 label: lower-case alphanumerics and `-`,
/// starting and ending alphanumeric, at most 63 characters.
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= DNS1123_LABEL_MAX_LENGTH
        && b.iter().all(|&c| is_label_char(c))
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Whether `s` is a DNS-1123 subdomain: dot-separated labels, at most 253
/// characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= DNS1123_SUBDOMAIN_MAX_LENGTH
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty() && b.iter().all(|&c| is_label_char(c)) && b[0] != b'-' && b[b.len() - 1] != b'-'
        })
}

/// Whether `s` is a Kubernetes qualified name (`[prefix/]name`), the form of
/// resource names, label keys and taint keys.
pub fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(prefix) = prefix
        && !is_dns1123_subdomain(prefix)
    {
        return false;
    }
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Whether `s` is a valid label value (empty, or a qualified name part).
pub fn is_label_value(s: &str) -> bool {
    s.is_empty() || (!s.contains('/') && is_qualified_name(s))
}

/// Collects violations while walking an object.
#[derive(Debug, Default)]
pub(crate) struct Violations(pub(crate) Vec<Violation>);

impl Violations {
    pub(crate) fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(Violation::new(path, message));
    }

    /// Checks a DNS-1123 label.
    pub(crate) fn dns1123_label(&mut self, path: &str, value: &str) {
        if value.is_empty() {
            self.push(path, "must not be empty");
        } else if !is_dns1123_label(value) {
            self.push(
                path,
                format!(
                    "{value:?} is not a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit, at most {DNS1123_LABEL_MAX_LENGTH} characters)"
                ),
            );
        }
    }

    /// Checks a DNS-1123 subdomain.
    pub(crate) fn dns1123_subdomain(&mut self, path: &str, value: &str) {
        if value.is_empty() {
            self.push(path, "must not be empty");
        } else if !is_dns1123_subdomain(value) {
            self.push(
                path,
                format!(
                    "{value:?} is not a DNS-1123 subdomain (dot-separated lower-case labels, at most {DNS1123_SUBDOMAIN_MAX_LENGTH} characters)"
                ),
            );
        }
    }

    /// Checks a qualified name such as a resource name or label key.
    pub(crate) fn qualified_name(&mut self, path: &str, value: &str) {
        if value.is_empty() {
            self.push(path, "must not be empty");
        } else if !is_qualified_name(value) {
            self.push(
                path,
                format!(
                    "{value:?} is not a qualified name (an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.')"
                ),
            );
        }
    }

    /// Checks `metadata.name` of an object.
    pub(crate) fn metadata_name(&mut self, meta: &ObjectMeta, label: bool) {
        match meta.name.as_deref() {
            None => self.push("metadata.name", "is required"),
            Some(name) if label => self.dns1123_label("metadata.name", name),
            Some(name) => self.dns1123_subdomain("metadata.name", name),
        }
    }

    /// Checks a label selector's operators and values.
    pub(crate) fn label_selector(&mut self, path: &str, selector: &LabelSelector) {
        if let Some(labels) = &selector.match_labels {
            for (key, value) in labels {
                let p = format!("{path}.matchLabels[{key}]");
                self.qualified_name(&p, key);
                if !is_label_value(value) {
                    self.push(p, format!("{value:?} is not a valid label value"));
                }
            }
        }
        for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
            let p = format!("{path}.matchExpressions[{i}]");
            self.qualified_name(&format!("{p}.key"), &expr.key);
            let values = expr.values.as_deref().unwrap_or_default();
            match expr.operator.as_str() {
                "In" | "NotIn" => {
                    if values.is_empty() {
                        self.push(
                            format!("{p}.values"),
                            format!("must be non-empty when operator is {}", expr.operator),
                        );
                    }
                }
                "Exists" | "DoesNotExist" => {
                    if !values.is_empty() {
                        self.push(
                            format!("{p}.values"),
                            format!("must be empty when operator is {}", expr.operator),
                        );
                    }
                }
                other => self.push(
                    format!("{p}.operator"),
                    format!("{other:?} is not one of In, NotIn, Exists, DoesNotExist"),
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        assert!(is_dns1123_label("team-a"));
        assert!(is_dns1123_label("a"));
        assert!(is_dns1123_label("0a"));
        assert!(!is_dns1123_label(""));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label("a-"));
        assert!(!is_dns1123_label("Team"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_label(&"a".repeat(63)));

        assert!(is_dns1123_subdomain("a100-80gb"));
        assert!(is_dns1123_subdomain("gpu.pool.example"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain(".a"));
        assert!(!is_dns1123_subdomain("a_b"));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
    }

    #[test]
    fn qualified_names() {
        for ok in [
            "cpu",
            "memory",
            "nvidia.com/gpu",
            "nvidia.com/mig-1g.10gb",
            "hugepages-2Mi",
            "A_b.c",
        ] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in [
            "",
            "/gpu",
            "nvidia.com/",
            "Nvidia.com/gpu",
            "a/b/c",
            "-cpu",
            "cpu-",
            "a b",
        ] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
        assert!(is_label_value(""));
        assert!(is_label_value("NVIDIA-A100-SXM4-80GB"));
        assert!(!is_label_value("a/b"));
    }

    #[test]
    fn patterns_agree_with_functions_on_samples() {
        // The schema patterns are plain strings; make sure they at least
        // describe what the functions accept by checking the anchors.
        for p in [DNS1123_LABEL_PATTERN, DNS1123_SUBDOMAIN_PATTERN, RESOURCE_NAME_PATTERN] {
            assert!(p.starts_with('^') && p.ends_with('$'));
        }
    }

    #[test]
    fn error_lists_every_violation() {
        let err = ValidationError(vec![Violation::new("a", "x"), Violation::new("b", "y")]);
        assert_eq!(err.to_string(), "a: x; b: y");
    }
}
