//! A Job's gang labels as written: what the index keeps of each Job
//! ([`crate::job::JobView`]), read before anything about the gang is known.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::labels;

/// A Job's gang labels, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labels {
    /// [`labels::GANG`].
    pub name: String,
    /// [`labels::GANG_SIZE`], unparsed.
    pub size: Option<String>,
}

impl Labels {
    pub fn of(meta: &ObjectMeta) -> Option<Self> {
        let l = meta.labels.as_ref()?;
        Some(Labels {
            name: l.get(labels::GANG)?.clone(),
            size: l.get(labels::GANG_SIZE).cloned(),
        })
    }
}
