//! What the harness reads about the controller: its API write counters
//! (Prometheus text from `--controller-metrics`) and its memory
//! (`/proc/<pid>/status` of `--controller-pid`). Parsing is pure and tested;
//! the fetching is a plain HTTP/1.0 GET (no client library: the endpoint is
//! the controller's own plain-HTTP `/metrics`) and a file read.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde::Serialize;

/// The controller's counter of API writes, labelled by `kind`.
pub const WRITES_METRIC: &str = "sluice_api_writes_total";
/// The controller's writes per lane of its write queue.
pub const LANE_WRITES_METRIC: &str = "sluice_lane_writes_total";

/// Time limit of connecting to, and of each read from, the metrics endpoint.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// An `http://host[:port]/path` URL, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    pub path: String,
}

/// Parses `--controller-metrics`: plain HTTP only (the controller serves
/// `/metrics` without TLS); the path defaults to `/metrics`.
pub fn parse_url(url: &str) -> Result<HttpUrl, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("--controller-metrics {url:?}: only http:// URLs are supported (e.g. http://127.0.0.1:8080/metrics)")
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
            let port = p
                .parse::<u16>()
                .map_err(|_| format!("--controller-metrics {url:?}: bad port {p:?}"))?;
            (h, port)
        }
        _ => (authority, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("--controller-metrics {url:?}: no host"));
    }
    Ok(HttpUrl {
        host: host.to_string(),
        port,
        path: path.to_string(),
    })
}

/// The body of a `200` answer; the status line otherwise as the error.
/// Handles `Content-Length`, chunked and read-to-close bodies.
pub fn parse_response(raw: &[u8]) -> Result<String, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of HTTP headers in the answer")?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|_| "HTTP headers are not UTF-8")?;
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let code = status.split_whitespace().nth(1).unwrap_or_default();
    if code != "200" {
        return Err(format!("answered {status:?}"));
    }
    let mut chunked = false;
    let mut length = None;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
                chunked = true;
            } else if k == "content-length" {
                length = v.parse::<usize>().ok();
            }
        }
    }
    let bytes = if chunked {
        dechunk(body)?
    } else if let Some(n) = length {
        body.get(..n)
            .ok_or("the body is shorter than its Content-Length")?
            .to_vec()
    } else {
        body.to_vec()
    };
    String::from_utf8(bytes).map_err(|_| "the body is not UTF-8".to_string())
}

fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk size line without an end")?;
        let line = std::str::from_utf8(&body[..eol]).map_err(|_| "a chunk size is not text")?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| format!("bad chunk size {size_text:?}"))?;
        body = &body[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = body.get(..size).ok_or("a chunk is shorter than its size")?;
        out.extend_from_slice(chunk);
        body = body.get(size + 2..).ok_or("a chunk without its line end")?;
    }
}

/// GETs the URL (blocking; call from `spawn_blocking`).
pub fn http_get(url: &HttpUrl) -> Result<String, String> {
    let addr = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", url.host))?
        .next()
        .ok_or_else(|| format!("{} has no address", url.host))?;
    let mut s =
        TcpStream::connect_timeout(&addr, HTTP_TIMEOUT).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    s.set_read_timeout(Some(HTTP_TIMEOUT)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(HTTP_TIMEOUT)).map_err(|e| e.to_string())?;
    // HTTP/1.0: the server closes the connection after the body.
    write!(
        s,
        "GET {} HTTP/1.0\r\nHost: {}:{}\r\nAccept: text/plain\r\n\r\n",
        url.path, url.host, url.port
    )
    .map_err(|e| format!("cannot send the request: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("cannot read the answer: {e}"))?;
    parse_response(&raw)
}

/// Fetches the controller's metrics (async wrapper of [`http_get`]).
pub async fn fetch(url: &HttpUrl) -> Result<String, String> {
    let url = url.clone();
    tokio::task::spawn_blocking(move || http_get(&url))
        .await
        .map_err(|e| format!("the metrics fetch did not finish: {e}"))?
}

/// One sample line of the text exposition format: name, labels, value.
fn sample(line: &str) -> Option<(&str, BTreeMap<String, String>, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices();
        let mut key = String::new();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '}' => {
                    end = Some(i);
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    // A quoted value with \\, \" and \n escapes.
                    if chars.next().map(|(_, c)| c) != Some('"') {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            '"' => break,
                            other => value.push(other),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), value);
                }
                c => key.push(c),
            }
        }
        rest = &inner[end? + 1..];
    }
    let value = rest.split_whitespace().next()?.parse::<f64>().ok()?;
    Some((name, labels, value))
}

/// `sluice_api_writes_total` per `kind` (summed over any other labels).
pub fn writes_by_kind(exposition: &str) -> BTreeMap<String, f64> {
    by_label(exposition, WRITES_METRIC, "kind")
}

/// `sluice_lane_writes_total` per `lane` (state, bookkeeping, explanation).
pub fn writes_by_lane(exposition: &str) -> BTreeMap<String, f64> {
    by_label(exposition, LANE_WRITES_METRIC, "lane")
}

fn by_label(exposition: &str, metric: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (name, labels, value) in exposition.lines().filter_map(sample) {
        if name == metric {
            let key = labels.get(label).cloned().unwrap_or_default();
            *out.entry(key).or_insert(0.0) += value;
        }
    }
    out
}

/// The controller's write counters at one moment: per kind and per lane.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteSample {
    pub kinds: BTreeMap<String, f64>,
    pub lanes: BTreeMap<String, f64>,
}

impl WriteSample {
    pub fn parse(exposition: &str) -> Self {
        Self {
            kinds: writes_by_kind(exposition),
            lanes: writes_by_lane(exposition),
        }
    }
}

/// API writes the controller made during the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteCounts {
    pub total: f64,
    pub per_kind: BTreeMap<String, f64>,
    /// Per lane of the controller's write queue (Events are in none).
    pub per_lane: BTreeMap<String, f64>,
}

/// After − before, per kind and per lane. A counter that went down means
/// the controller restarted between the scrapes: the difference is then
/// meaningless.
pub fn writes_delta(before: &WriteSample, after: &WriteSample) -> Result<WriteCounts, String> {
    let per_kind = delta(WRITES_METRIC, "kind", &before.kinds, &after.kinds)?;
    let per_lane = delta(LANE_WRITES_METRIC, "lane", &before.lanes, &after.lanes)?;
    Ok(WriteCounts {
        total: per_kind.values().sum(),
        per_kind,
        per_lane,
    })
}

fn delta(
    metric: &str,
    label: &str,
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> Result<BTreeMap<String, f64>, String> {
    let mut out = BTreeMap::new();
    for (key, a) in after {
        let b = before.get(key).copied().unwrap_or(0.0);
        if *a < b {
            return Err(format!(
                "{metric}{{{label}={key:?}}} went down from {b} to {a}: did the controller restart during the run?"
            ));
        }
        out.insert(key.clone(), a - b);
    }
    if let Some(key) = before.keys().find(|k| !after.contains_key(*k)) {
        return Err(format!(
            "{metric}{{{label}={key:?}}} disappeared: did the controller restart during the run?"
        ));
    }
    Ok(out)
}

/// Memory figures of `/proc/<pid>/status`, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcMemory {
    /// Resident set now.
    pub vm_rss: Option<u64>,
    /// Peak resident set over the process's life ("high water mark").
    pub vm_hwm: Option<u64>,
}

/// Reads `VmRSS` and `VmHWM` (written in kB) from `/proc/<pid>/status`.
pub fn parse_proc_status(text: &str) -> ProcMemory {
    let kb = |key: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        let mut parts = line[key.len()..].split_whitespace();
        let n: u64 = parts.next()?.parse().ok()?;
        Some(n * 1024)
    };
    ProcMemory {
        vm_rss: kb("VmRSS:"),
        vm_hwm: kb("VmHWM:"),
    }
}

/// Reads `/proc/<pid>/status`.
pub fn read_proc_status(pid: u32) -> Result<ProcMemory, String> {
    let path = format!("/proc/{pid}/status");
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("--controller-pid {pid}: cannot read {path}: {e}"))?;
    Ok(parse_proc_status(&text))
}

/// Clock ticks per second of the times in `/proc/<pid>/stat`. The kernel
/// reports them in `USER_HZ`, which `sysconf(_SC_CLK_TCK)` would read; libc
/// is not a dependency of the workspace (and this crate forbids unsafe
/// code), so this is the value Linux gives user space on every common
/// architecture (x86-64, arm64: 100), assumed rather than read.
pub const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// CPU time a process has used, user and system (`utime` + `stime`,
/// fields 14 and 15 of `/proc/<pid>/stat`), in clock ticks. The command
/// name (field 2, in parentheses) may hold spaces and parentheses itself,
/// so the fields are counted after the last `)`.
pub fn parse_proc_stat(text: &str) -> Result<u64, String> {
    let close = text.rfind(')').ok_or("no ')' closing the command name")?;
    // After the name comes field 3 (state): field n is at n − 3.
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> Result<u64, String> {
        let v = fields.get(n - 3).ok_or_else(|| format!("no field {n}"))?;
        v.parse().map_err(|_| format!("field {n} ({v:?}) is not a number"))
    };
    Ok(field(14)? + field(15)?)
}

/// Reads utime + stime of `/proc/<pid>/stat`, clock ticks.
pub fn read_proc_stat(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    parse_proc_stat(&text).map_err(|e| format!("{path}: {e}"))
}

/// The processes whose CPU time a run measures (`--controller-pid`,
/// `--apiserver-pid`, `--etcd-pid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuPids {
    pub controller: Option<u32>,
    pub apiserver: Option<u32>,
    pub etcd: Option<u32>,
}

/// utime + stime of each process at one moment, clock ticks; `None` for a
/// process not asked for or whose `/proc/<pid>/stat` cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    pub controller: Option<u64>,
    pub apiserver: Option<u64>,
    pub etcd: Option<u64>,
}

impl CpuPids {
    /// Reads each process's CPU time now.
    pub fn read(&self) -> CpuTicks {
        let read = |pid: Option<u32>| pid.and_then(|p| read_proc_stat(p).ok());
        CpuTicks {
            controller: read(self.controller),
            apiserver: read(self.apiserver),
            etcd: read(self.etcd),
        }
    }
}

/// CPU seconds each process used between two readings.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuSeconds {
    pub controller: Option<f64>,
    pub apiserver: Option<f64>,
    pub etcd: Option<f64>,
}

/// The CPU seconds between `before` and `after`: the difference of the
/// ticks ÷ [`CLOCK_TICKS_PER_SECOND`]; `None` for a process missing from
/// either reading, or whose count went down (another process under the
/// same id).
pub fn cpu_seconds(before: CpuTicks, after: CpuTicks) -> CpuSeconds {
    let diff = |b: Option<u64>, a: Option<u64>| Some(a?.checked_sub(b?)? as f64 / CLOCK_TICKS_PER_SECOND);
    CpuSeconds {
        controller: diff(before.controller, after.controller),
        apiserver: diff(before.apiserver, after.apiserver),
        etcd: diff(before.etcd, after.etcd),
    }
}

/// The controller's peak RSS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeakRss {
    pub bytes: u64,
    /// `VmHWM` (the kernel's peak over the process's whole life), or
    /// `sampledVmRSS` (the largest `VmRSS` read every 250 ms during the run).
    pub source: &'static str,
}

/// `VmHWM` at the end if the kernel reports it, else the largest sample.
pub fn peak_rss(at_end: Option<ProcMemory>, max_sampled_rss: u64) -> Option<PeakRss> {
    match at_end.and_then(|m| m.vm_hwm) {
        Some(bytes) => Some(PeakRss { bytes, source: "VmHWM" }),
        None if max_sampled_rss > 0 => Some(PeakRss {
            bytes: max_sampled_rss,
            source: "sampledVmRSS",
        }),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_plain_http() {
        assert_eq!(
            parse_url("http://127.0.0.1:8080/metrics"),
            Ok(HttpUrl {
                host: "127.0.0.1".into(),
                port: 8080,
                path: "/metrics".into()
            })
        );
        assert_eq!(
            parse_url("http://ctl:9090").map(|u| (u.port, u.path)),
            Ok((9090, "/metrics".into()))
        );
        assert_eq!(
            parse_url("http://ctl/m").map(|u| (u.host, u.port)),
            Ok(("ctl".into(), 80))
        );
        assert_eq!(parse_url("http://[::1]:8080/metrics").map(|u| u.host), Ok("::1".into()));
        assert!(parse_url("https://ctl/metrics").unwrap_err().contains("only http://"));
        assert!(parse_url("http://ctl:port/").unwrap_err().contains("bad port"));
        assert!(parse_url("http://:80/").unwrap_err().contains("no host"));
    }

    #[test]
    fn responses_with_length_chunks_or_close() {
        let by_length = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello, and more";
        assert_eq!(parse_response(by_length), Ok("hello".into()));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Ok("hello, world".into()));
        let to_close = b"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\na b\n";
        assert_eq!(parse_response(to_close), Ok("a b\n".into()));
        let err = parse_response(b"HTTP/1.1 503 Service Unavailable\r\n\r\n").unwrap_err();
        assert!(err.contains("503"), "{err}");
        assert!(parse_response(b"garbage").is_err());
    }

    #[test]
    fn gets_over_loopback() {
        use std::io::BufRead as _;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let port = listener.local_addr().expect("an address").port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("a connection");
            let mut request = String::new();
            let mut reader = std::io::BufReader::new(s.try_clone().expect("a clone"));
            while reader.read_line(&mut request).is_ok_and(|n| n > 2) {}
            let body = "sluice_api_writes_total{kind=\"event\"} 2\n";
            write!(s, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n{body}").expect("written");
            request
        });
        let url = parse_url(&format!("http://127.0.0.1:{port}/metrics")).expect("a URL");
        let body = http_get(&url).expect("an answer");
        assert_eq!(writes_by_kind(&body)["event"], 2.0);
        let request = server.join().expect("the server");
        assert!(request.starts_with("GET /metrics HTTP/1.0\r\n"), "{request}");
        // Nobody listens: an error naming the address.
        let err = http_get(&url).unwrap_err();
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    }

    #[test]
    fn counts_writes_per_kind_and_their_difference() {
        // The controller's own encoding (prometheus-client, OpenMetrics text).
        let m = sluice_controller::metrics::Metrics::new();
        for _ in 0..3 {
            m.write("workload_status", true);
        }
        m.write("event", true);
        m.write("event", false); // an error: counted apart
        m.lane_writes
            .get_or_create(&vec![("lane", "state".to_string())])
            .inc_by(3);
        let before = WriteSample::parse(&m.encode());
        assert_eq!(
            before.kinds,
            BTreeMap::from([("event".into(), 1.0), ("workload_status".into(), 3.0)])
        );
        assert_eq!(before.lanes, BTreeMap::from([("state".into(), 3.0)]));

        let after_text = "# HELP sluice_api_writes API writes made, by kind.\n\
            # TYPE sluice_api_writes counter\n\
            sluice_api_writes_total{kind=\"workload_status\"} 10\n\
            sluice_api_writes_total{kind=\"event\"} 4\n\
            sluice_api_writes_total{kind=\"queue_status\"} 2\n\
            sluice_api_write_errors_total{kind=\"event\"} 1\n\
            sluice_lane_writes_total{lane=\"state\"} 8\n\
            sluice_lane_writes_total{lane=\"bookkeeping\"} 4\n\
            # EOF\n";
        let after = WriteSample::parse(after_text);
        // 10 − 3 = 7 status writes, 4 − 1 = 3 events, 2 − 0 = 2 queue statuses: 12.
        let d = writes_delta(&before, &after).expect("monotonic");
        assert_eq!(d.total, 12.0);
        assert_eq!(d.per_kind["workload_status"], 7.0);
        assert_eq!(d.per_kind["queue_status"], 2.0);
        assert_eq!(
            d.per_lane,
            BTreeMap::from([("bookkeeping".into(), 4.0), ("state".into(), 5.0)])
        );
        let restarted = writes_delta(&after, &before).unwrap_err();
        assert!(restarted.contains("restart"), "{restarted}");
    }

    #[test]
    fn label_values_may_hold_escapes() {
        let (name, labels, value) = sample(r#"m{a="x\"y",b="1,2}"} 3.5"#).expect("a sample");
        assert_eq!(name, "m");
        assert_eq!(labels["a"], "x\"y");
        assert_eq!(labels["b"], "1,2}");
        assert_eq!(value, 3.5);
        assert_eq!(sample("plain 7").map(|s| s.2), Some(7.0));
        assert!(sample("# TYPE x counter").is_none());
    }

    #[test]
    fn proc_stat_cpu_ticks_after_the_last_parenthesis() {
        // Fields 14 (utime) and 15 (stime) of a real line: 1 234 + 567.
        let plain = "4242 (sluice) S 1 4242 4242 0 -1 4194560 5000 0 0 0 1234 567 0 0 20 0 9 0 100 0 0\n";
        assert_eq!(parse_proc_stat(plain), Ok(1_801));
        // A command name with spaces and parentheses: counted after the
        // last ')', the same fields.
        let odd = "77 (my (odd) name) R 1 77 77 0 -1 0 0 0 0 0 30 12 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_proc_stat(odd), Ok(42));
        assert!(parse_proc_stat("77 no name").unwrap_err().contains("')'"));
        assert!(parse_proc_stat("77 (x) S 1 2").unwrap_err().contains("no field 14"));
        let bad = "77 (x) S 1 77 77 0 -1 0 0 0 0 0 ab 12 0";
        assert!(parse_proc_stat(bad).unwrap_err().contains("field 14"));
        // This process has used some CPU by now.
        assert!(read_proc_stat(std::process::id()).is_ok());
    }

    #[test]
    fn cpu_seconds_are_differences_of_ticks() {
        let before = CpuTicks {
            controller: Some(1_000),
            apiserver: Some(50),
            etcd: None,
        };
        let after = CpuTicks {
            controller: Some(1_250),
            apiserver: Some(40),
            etcd: Some(9),
        };
        // 250 ticks at 100 per second: 2.5 s. The API server's count went
        // down (a new process under its id): unknown, as is etcd, read
        // only at the end.
        assert_eq!(
            cpu_seconds(before, after),
            CpuSeconds {
                controller: Some(2.5),
                apiserver: None,
                etcd: None
            }
        );
        let pids = CpuPids {
            controller: Some(std::process::id()),
            ..CpuPids::default()
        };
        let now = pids.read();
        assert!(now.controller.is_some() && now.apiserver.is_none(), "{now:?}");
    }

    #[test]
    fn proc_status_memory_in_bytes() {
        let text = "Name:\tsluice\nVmPeak:\t  900000 kB\nVmHWM:\t   86016 kB\nVmRSS:\t   81920 kB\nThreads:\t4\n";
        let m = parse_proc_status(text);
        // 86 016 kB × 1 024 = 88 080 384 bytes (84 MiB); 81 920 kB = 80 MiB.
        assert_eq!(m.vm_hwm, Some(88_080_384));
        assert_eq!(m.vm_rss, Some(83_886_080));
        assert_eq!(
            peak_rss(Some(m), 1).map(|p| (p.bytes, p.source)),
            Some((88_080_384, "VmHWM"))
        );
        // No VmHWM (some kernels, or the process is gone): the samples.
        let no_hwm = parse_proc_status("VmRSS:\t 100 kB\n");
        assert_eq!(peak_rss(Some(no_hwm), 204_800).map(|p| p.source), Some("sampledVmRSS"));
        assert_eq!(peak_rss(None, 0), None);
        // This process, as --controller-pid reads one.
        let me = read_proc_status(std::process::id()).expect("/proc of this process");
        assert!(me.vm_rss.unwrap_or(0) > 0 && me.vm_hwm >= me.vm_rss, "{me:?}");
    }
}
