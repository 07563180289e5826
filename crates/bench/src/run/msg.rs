//! What the watch and the writes tell the run loop.

use std::time::Instant;

use crate::cluster::CallError;
use crate::track::Observation;

pub(super) enum WatchMsg {
    Init,
    InitDone,
    Object(String, Result<Observation, String>),
    Error(String),
}

pub(super) enum Msg {
    Watch(Instant, WatchMsg),
    Created {
        index: usize,
        at: Instant,
        result: Result<(), CallError>,
    },
    Finished {
        index: usize,
        epoch: u32,
        result: Result<(), CallError>,
    },
}
