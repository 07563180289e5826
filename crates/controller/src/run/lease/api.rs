//! The Lease through the API server: reads, creates and replaces (with
//! the `resourceVersion` read as precondition), translated to and from the
//! protocol's records.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};

use super::protocol::{Millis, Read, Record, Stored, Write, Written};
use crate::writer::FIELD_MANAGER;

/// Why a call got no usable answer.
#[derive(Debug)]
pub(super) struct Failure {
    /// The server (or its store) is unavailable ([`crate::outage::unavailable`]),
    /// or did not answer in time.
    pub(super) unavailable: bool,
    pub(super) message: String,
}

impl Failure {
    fn of(e: &kube::Error) -> Self {
        Self {
            unavailable: crate::outage::unavailable(e),
            message: e.to_string(),
        }
    }

    fn timeout(after: Duration) -> Self {
        Self {
            unavailable: true,
            message: format!("no answer within {after:?}"),
        }
    }
}

/// The Lease of one election, as one replica reaches it.
pub(super) struct LeaseApi {
    api: Api<Lease>,
    name: String,
    params: PostParams,
    timeout: Duration,
    /// The Lease last read or written: a replace keeps its metadata
    /// (labels, annotations) and changes only the spec.
    last: Option<Lease>,
}

impl LeaseApi {
    /// `identity`'s view of Lease `namespace/name`; each call gives up
    /// after `timeout`.
    pub(super) fn new(client: Client, namespace: &str, name: &str, identity: &str, timeout: Duration) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            params: PostParams {
                field_manager: Some(field_manager(identity)),
                ..PostParams::default()
            },
            timeout,
            last: None,
        }
    }

    /// Reads the Lease; an error says why it could not.
    pub(super) async fn read(&mut self) -> Result<Read, Failure> {
        match tokio::time::timeout(self.timeout, self.api.get_opt(&self.name)).await {
            Ok(Ok(Some(lease))) => Ok(Read::Found(self.keep(lease))),
            Ok(Ok(None)) => {
                self.last = None;
                Ok(Read::Missing)
            }
            Ok(Err(e)) => Err(Failure::of(&e)),
            Err(_) => Err(Failure::timeout(self.timeout)),
        }
    }

    /// Writes the Lease; an error says why the answer is unknown.
    pub(super) async fn write(&mut self, write: &Write) -> Result<Written, Failure> {
        let call = async {
            match write {
                Write::Create(record) => {
                    let lease = lease_of(&self.name, record, None, None);
                    self.api.create(&self.params, &lease).await
                }
                Write::Replace { record, version } => {
                    let lease = lease_of(&self.name, record, self.last.as_ref(), Some(version));
                    self.api.replace(&self.name, &self.params, &lease).await
                }
            }
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(lease)) => Ok(Written::Stored(self.keep(lease))),
            Ok(Err(kube::Error::Api(e))) if e.code == 409 => Ok(Written::Conflict),
            Ok(Err(e)) => Err(Failure::of(&e)),
            Err(_) => Err(Failure::timeout(self.timeout)),
        }
    }

    fn keep(&mut self, lease: Lease) -> Stored {
        let stored = stored_of(&lease);
        self.last = Some(lease);
        stored
    }
}

/// The field manager of `identity`'s Lease writes: one per replica, so
/// the Lease's managed fields say which replica wrote what (at most 128
/// characters, as the API server requires).
pub(super) fn field_manager(identity: &str) -> String {
    format!("{FIELD_MANAGER}-lease/{identity}").chars().take(128).collect()
}

/// A Lease's record and `resourceVersion`. Missing fields read as a free,
/// never renewed Lease; times are cut to milliseconds.
pub(super) fn stored_of(lease: &Lease) -> Stored {
    let spec = lease.spec.clone().unwrap_or_default();
    let ms = |t: Option<MicroTime>| t.map_or(0, |t| t.0.as_millisecond());
    Stored {
        record: Record {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            acquired: ms(spec.acquire_time),
            renewed: ms(spec.renew_time),
            duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            transitions: spec.lease_transitions.unwrap_or(0),
        },
        version: lease.metadata.resource_version.clone().unwrap_or_default(),
    }
}

/// Lease `name` holding `record`: `base`'s metadata (if any) at `version`.
pub(super) fn lease_of(name: &str, record: &Record, base: Option<&Lease>, version: Option<&String>) -> Lease {
    let mut metadata = base.map(|b| b.metadata.clone()).unwrap_or_else(|| ObjectMeta {
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    });
    metadata.managed_fields = None;
    metadata.resource_version = version.cloned();
    let time = |ms: Millis| Timestamp::from_millisecond(ms).ok().map(MicroTime);
    Lease {
        metadata,
        spec: Some(LeaseSpec {
            holder_identity: record.holder.clone(),
            acquire_time: (record.acquired > 0).then(|| time(record.acquired)).flatten(),
            renew_time: time(record.renewed),
            lease_duration_seconds: Some(record.duration_seconds),
            lease_transitions: Some(record.transitions),
            ..LeaseSpec::default()
        }),
    }
}
