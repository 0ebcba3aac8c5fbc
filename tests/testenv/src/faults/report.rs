//! What a proxy injected: counts by class and a log to read after a failure.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

use crate::faults::{Fault, FaultClass};

/// The faults a proxy injected, by class, with a log line for each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultReport {
    /// How many faults of each class were injected.
    pub counts: BTreeMap<FaultClass, u64>,
    /// One line per injected fault: when, what, on which request or object.
    pub log: Vec<String>,
    /// Requests forwarded untouched.
    pub passed: u64,
}

impl FaultReport {
    /// Faults of `class` injected.
    pub fn count(&self, class: FaultClass) -> u64 {
        self.counts.get(&class).copied().unwrap_or(0)
    }

    /// Faults injected in all.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Adds another report's figures to this one.
    pub fn add(&mut self, other: &FaultReport) {
        for (class, n) in &other.counts {
            *self.counts.entry(*class).or_default() += n;
        }
        self.passed += other.passed;
    }

    pub(crate) fn record(&mut self, started: Instant, fault: &Fault, target: &str) {
        *self.counts.entry(fault.class()).or_default() += 1;
        // The log is for reading; keep it to a screenful and a half.
        if self.log.len() < 200 {
            let ms = started.elapsed().as_millis();
            self.log.push(format!("+{ms}ms {fault:?} {target}"));
        }
    }
}

impl fmt::Display for FaultReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} passed", self.passed)?;
        for class in FaultClass::ALL {
            write!(f, ", {class} {}", self.count(class))?;
        }
        Ok(())
    }
}
