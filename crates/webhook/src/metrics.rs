//! Prometheus metrics of the webhook, prefixed `sluice_webhook_`. The
//! README's table of them ("Metrics") is [`markdown_table`]'s, made from
//! this registry and `LABELS`; a test keeps the two equal.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, &'static str)>;
/// `endpoint` (a path), and `result` where counted.
type EndpointLabels = Vec<(&'static str, String)>;

/// The labels of each registered metric (its name without the prefix and
/// `_total`), for the README's table ([`markdown_table`]).
const LABELS: &[(&str, &str)] = &[
    (
        "requests",
        "`endpoint`, `result` (allowed, patched, denied, skipped, bad_request, too_large, not_found)",
    ),
    ("request_duration_seconds", "`endpoint`"),
    (
        "patches",
        "`fix` (runtime_class, toleration, node_affinity, gpu_limits, suspend, queue_label)",
    ),
    ("certificate_reloads", "—"),
];

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

/// The metrics as the README's table: every metric the registry describes
/// (`# HELP` and `# TYPE`, in registration order), as scraped (`_total` on
/// counters), with its labels (`LABELS`; `?` without an entry) and help.
/// Each family is given a sample first: the exposition leaves out families
/// without one.
pub fn markdown_table() -> String {
    let m = Metrics::new();
    m.request("/", "allowed", 0.0);
    m.patch("toleration");
    let text = m.encode();
    let mut out = String::from("| metric | type | labels | what it counts |\n|---|---|---|---|\n");
    let mut help = "";
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').map_or("", |(_, h)| h);
        } else if let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|r| r.split_once(' ')) {
            let base = name.strip_prefix("sluice_webhook_").unwrap_or(name);
            let labels = LABELS.iter().find(|(n, _)| *n == base).map_or("?", |(_, l)| l);
            let scraped = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            out.push_str(&format!(
                "| `{scraped}` | {kind} | {labels} | {} |\n",
                help.trim_end_matches('.')
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README carries the table the registry makes, and every metric
    /// has its labels in `LABELS`. `SLUICE_BLESS=1 cargo test -p
    /// sluice-webhook --lib metrics` writes it there.
    #[test]
    fn the_readme_carries_the_metrics_table() {
        let table = markdown_table();
        assert!(!table.contains("| ? |"), "metrics without an entry in LABELS:\n{table}");
        assert_eq!(table.lines().count(), LABELS.len() + 2, "{table}");
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (begin, end) = (
            "<!-- metrics: generated by sluice_webhook::metrics::markdown_table -->\n",
            "<!-- end metrics -->",
        );
        let start = doc.find(begin).expect("the begin marker") + begin.len();
        let stop = doc.find(end).expect("the end marker");
        if std::env::var_os("SLUICE_BLESS").is_some() {
            std::fs::write(path, format!("{}{table}{}", &doc[..start], &doc[stop..])).unwrap();
            return;
        }
        assert_eq!(
            &doc[start..stop],
            table,
            "crates/webhook/README.md's metrics table differs from the registry's: run SLUICE_BLESS=1 cargo test -p sluice-webhook --lib metrics"
        );
    }

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
