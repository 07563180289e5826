//! Prometheus metrics of the webhook.
//!
//! | name | type | labels |
//! |------|------|--------|
//! | `sluice_webhook_requests_total` | counter | `endpoint`, `result` (allowed, patched, denied, skipped, bad_request, too_large, not_found) |
//! | `sluice_webhook_request_duration_seconds` | histogram | `endpoint` |
//! | `sluice_webhook_patches_total` | counter | `fix` (runtime_class, toleration, node_affinity, gpu_limits, suspend, queue_label) |
//! | `sluice_webhook_certificate_reloads_total` | counter | — |

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, &'static str)>;
/// `endpoint` (a path), and `result` where counted.
type EndpointLabels = Vec<(&'static str, String)>;

fn latency_histogram() -> Histogram {
    // 50 µs .. ~1.6 s.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_05, 2.0, 16,
    ))
}

/// The webhook's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    requests: Family<EndpointLabels, Counter>,
    latency: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    patches: Family<Labels, Counter>,
    pub cert_reloads: Counter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sluice_webhook");
        let requests = Family::<EndpointLabels, Counter>::default();
        let latency = Family::<EndpointLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let patches = Family::<Labels, Counter>::default();
        let cert_reloads = Counter::default();
        registry.register(
            "requests",
            "Admission requests by endpoint and result",
            requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time to review one admission request (decode, rules, encode)",
            latency.clone(),
        );
        registry.register(
            "patches",
            "Fixes applied in admission patches, by kind of fix",
            patches.clone(),
        );
        registry.register(
            "certificate_reloads",
            "Serving certificates loaded after start-up",
            cert_reloads.clone(),
        );
        Self {
            registry,
            requests,
            latency,
            patches,
            cert_reloads,
        }
    }

    pub fn request(&self, endpoint: &str, result: &'static str, seconds: f64) {
        self.requests
            .get_or_create(&vec![("endpoint", endpoint.to_owned()), ("result", result.to_owned())])
            .inc();
        self.latency
            .get_or_create(&vec![("endpoint", endpoint.to_owned())])
            .observe(seconds);
    }

    pub fn patch(&self, fix: &'static str) {
        self.patches.get_or_create(&vec![("fix", fix)]).inc();
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_show_up_in_the_exposition() {
        let m = Metrics::new();
        m.request("/mutate/pods", "patched", 0.001);
        m.request("/mutate/pods", "patched", 0.002);
        m.patch("gpu_limits");
        let text = m.encode();
        assert!(
            text.contains("sluice_webhook_requests_total{endpoint=\"/mutate/pods\",result=\"patched\"} 2"),
            "{text}"
        );
        assert!(text.contains("sluice_webhook_patches_total{fix=\"gpu_limits\"} 1"));
        assert!(text.contains("sluice_webhook_request_duration_seconds_count{endpoint=\"/mutate/pods\"} 2"));
    }
}
