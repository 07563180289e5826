//! What a run prints while it goes: a progress line and the first few
//! warnings of a kind.

use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

use crate::track::{Ms, Tracker};
use sluice_simulate::units::format_duration;

/// Warnings of one kind printed at most.
const MAX_WARNINGS: u64 = 5;

/// Counts warnings and prints the first few.
#[derive(Default)]
pub(super) struct Warnings(u64);

impl Warnings {
    pub(super) fn warn(&mut self, what: &str) {
        self.0 += 1;
        if self.0 <= MAX_WARNINGS {
            eprintln!("warning: {what}");
        } else if self.0 == MAX_WARNINGS + 1 {
            eprintln!("warning: more of these follow; not printed");
        }
    }
}

/// Progress on stderr: a line redrawn on a terminal, else one every 10 s.
pub(super) struct Progress {
    quiet: bool,
    terminal: bool,
    last: Instant,
    drawn: bool,
}

impl Progress {
    pub(super) fn new(quiet: bool) -> Self {
        Self {
            quiet,
            terminal: std::io::stderr().is_terminal(),
            last: Instant::now(),
            drawn: false,
        }
    }

    pub(super) fn period(&self) -> Duration {
        if self.terminal {
            Duration::from_millis(500)
        } else {
            Duration::from_secs(10)
        }
    }

    pub(super) fn show(&mut self, t: &Tracker, created: usize, elapsed: Ms) {
        if self.quiet || self.last.elapsed() < self.period() {
            return;
        }
        self.last = Instant::now();
        let admitted = t.records().iter().filter(|r| r.first_admitted_at.is_some()).count();
        let n = t.records().len();
        let line = format!(
            "{}: {created}/{n} created, {admitted} admitted, {} finished{}",
            format_duration(elapsed),
            t.finished(),
            if t.violations() > 0 {
                format!(", {} QUOTA VIOLATIONS", t.violations())
            } else {
                String::new()
            }
        );
        if self.terminal {
            self.drawn = true;
            let _ = write!(std::io::stderr(), "\r\x1b[2K{line}");
        } else {
            eprintln!("{line}");
        }
    }

    pub(super) fn clear(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
            self.drawn = false;
        }
    }
}
