//! API outages, logged once each way instead of once per failed call.
//!
//! When the API server (or the etcd behind it) is unavailable every call
//! fails: each watch on each retry, each write and its retry a second
//! later, each Event. Logged one by one, an outage of a minute was
//! thousands of lines. Here a failure that says the server is unavailable
//! ([`unavailable`]: no connection, no answer in time, a 5xx, a 429)
//! starts an outage, logged once with its first error; further ones are
//! only counted; the next call that succeeds *at the server's store* ends
//! it, logged with its length and count. Watch events do not end one: an
//! API server without etcd still serves lists and watches from its cache.
//! Other failures (a 409, a 422, a 404) say something about one object
//! and are logged where they happen, as before.
//!
//! One outage state per process: there is one API server, whatever part
//! of the controller meets its failures.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Whether `e` says the API server (or its store) is unavailable, rather
/// than something about the object or the request.
pub fn unavailable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => unavailable_code(s.code),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// Whether an HTTP status says the server is unavailable.
pub fn unavailable_code(code: u16) -> bool {
    code >= 500 || code == 429
}

/// The outage state: since when, and how many calls failed in it.
#[derive(Debug, Default)]
pub struct Outages {
    current: Option<(Instant, u64)>,
}

/// What to log after a call.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// An outage began with this failure.
    Began,
    /// The outage that lasted this long, with this many failed calls, ended.
    Ended { lasted: Duration, failed: u64 },
}

impl Outages {
    /// A call failed with an unavailability at `now`.
    pub fn failed(&mut self, now: Instant) -> Option<Change> {
        match &mut self.current {
            Some((_, n)) => {
                *n += 1;
                None
            }
            None => {
                self.current = Some((now, 1));
                Some(Change::Began)
            }
        }
    }

    /// A call succeeded at `now`.
    pub fn succeeded(&mut self, now: Instant) -> Option<Change> {
        let (since, failed) = self.current.take()?;
        Some(Change::Ended {
            lasted: now.saturating_duration_since(since),
            failed,
        })
    }
}

static OUTAGES: Mutex<Outages> = Mutex::new(Outages { current: None });

/// A call (`what`: "watch", "write", "Lease", …) failed with `error`,
/// which [`unavailable`] said is an unavailability: logged if it begins
/// an outage.
pub fn failed(what: &str, error: &dyn std::fmt::Display) {
    let change = OUTAGES.lock().unwrap_or_else(|e| e.into_inner()).failed(Instant::now());
    if change.is_some() {
        tracing::warn!(
            call = what,
            %error,
            "the API server is unavailable; calls are retried, and failures are counted rather than logged until one succeeds"
        );
    }
}

/// A call that reached the server's store succeeded: logged if it ends
/// an outage.
pub fn succeeded() {
    let change = OUTAGES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .succeeded(Instant::now());
    if let Some(Change::Ended { lasted, failed }) = change {
        tracing::info!(
            after_ms = lasted.as_millis() as u64,
            failed_calls = failed,
            "the API server is available again"
        );
    }
}

/// A call failed with `error`: counted in the outage when it is an
/// unavailability, else logged as `message` (a warning).
pub fn report(what: &str, error: &kube::Error, message: &str) {
    if unavailable(error) {
        failed(what, error);
    } else {
        tracing::warn!(call = what, %error, "{message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_one_change_in_and_one_out_however_many_calls_fail() {
        let mut o = Outages::default();
        let t = Instant::now();
        assert_eq!(o.succeeded(t), None, "no outage: nothing to say");
        assert_eq!(o.failed(t), Some(Change::Began));
        for i in 1..2000 {
            assert_eq!(o.failed(t + Duration::from_millis(i)), None);
        }
        assert_eq!(
            o.succeeded(t + Duration::from_secs(50)),
            Some(Change::Ended {
                lasted: Duration::from_secs(50),
                failed: 2000
            })
        );
        assert_eq!(o.succeeded(t + Duration::from_secs(51)), None);
        assert_eq!(
            o.failed(t + Duration::from_secs(60)),
            Some(Change::Began),
            "a new outage"
        );
    }

    #[test]
    fn unavailability_is_no_answer_a_server_error_or_throttling() {
        let status = |code: u16| kube::Error::Api(Box::new(kube::core::Status::failure("x", "y").with_code(code)));
        for code in [500, 503, 504, 429] {
            assert!(unavailable(&status(code)), "{code}");
        }
        for code in [400, 403, 404, 409, 410, 422] {
            assert!(!unavailable(&status(code)), "{code}");
        }
        let io = kube::Error::ReadEvents(std::io::Error::other("connection reset"));
        assert!(unavailable(&io));
        let decode = kube::Error::SerdeError(serde_json::from_str::<u8>("x").unwrap_err());
        assert!(!unavailable(&decode));
    }
}
