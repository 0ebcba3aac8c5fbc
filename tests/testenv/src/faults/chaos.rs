//! Random schedules for chaos runs: one seed, one rule of every fault class.

use std::time::Duration;

use crate::faults::schedule::mix;
use crate::faults::{Faults, Verb};

/// Draws from a seed, in order.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = mix(self.0);
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn name<'a>(&mut self, names: &[&'a str]) -> &'a str {
        names[self.below(names.len() as u64) as usize]
    }

    fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.below(high - low + 1))
    }
}

// Operators patch and update far more than they create or delete; weight
// the draw so that most rules meet traffic.
const WRITES: [Verb; 5] = [
    Verb::Patch,
    Verb::Update,
    Verb::Patch,
    Verb::Update,
    Verb::Create,
];

impl Faults {
    /// A schedule of one rule per fault class, drawn from `seed`: a
    /// conflict (409), a server error (500 or 503), a throttle, a timeout and a crash on writes to
    /// `writes`; a reset and latency on reads; stale and coalesced events
    /// on watches of `watches`. Every rule is bounded (`times`), so an
    /// operator that retries converges.
    ///
    /// Print it (`{}`) to replay a run: the output is the sentence that
    /// builds the same schedule.
    ///
    /// ```
    /// use concord_testenv::faults::Faults;
    /// let a = Faults::chaos(11, &["pods"], &["pods"]);
    /// assert_eq!(a, Faults::chaos(11, &["pods"], &["pods"]));
    /// assert_eq!(a.len(), 9);
    /// ```
    pub fn chaos(seed: u64, writes: &[&str], watches: &[&str]) -> Faults {
        let mut d = Draws(seed);
        let writes = if writes.is_empty() {
            &["*"][..]
        } else {
            writes
        };
        let watches = if watches.is_empty() {
            &["*"][..]
        } else {
            watches
        };
        let code = *d.pick(&[500u16, 503]);
        let probability = [0.1, 0.2, 0.3][d.below(3) as usize];
        let mut faults = Faults::seeded(seed)
            .on(*d.pick(&WRITES))
            .resource(d.name(writes))
            .fail_with(409)
            .with_probability(probability)
            .times(1 + d.below(3) as u32)
            .on(*d.pick(&WRITES))
            .resource(d.name(writes))
            .fail_with(code)
            .with_probability(probability)
            .times(1 + d.below(3) as u32)
            .on(*d.pick(&WRITES))
            .resource(d.name(writes))
            .throttle(1)
            .after(d.below(3) as u32)
            .times(1)
            .on(*d.pick(&WRITES))
            .resource(d.name(writes))
            .time_out()
            .after(d.below(3) as u32)
            .times(1)
            .on(*d.pick(&[Verb::Get, Verb::List, Verb::Watch]))
            .resource(d.name(watches))
            .reset_mid_response()
            .times(1)
            .on(*d.pick(&[Verb::Get, Verb::List]))
            .delay(d.millis(5, 50))
            .with_probability(0.2)
            .times(10);
        faults = if d.below(2) == 0 {
            faults
                .on(*d.pick(&WRITES))
                .resource(d.name(writes))
                .crash_before()
        } else {
            faults
                .on(*d.pick(&WRITES))
                .resource(d.name(writes))
                .crash_after()
        };
        faults
            .after(d.below(4) as u32)
            .times(1)
            .on(Verb::Watch)
            .resource(d.name(watches))
            .hold_events(d.millis(100, 400))
            .with_probability(0.5)
            .on(Verb::Watch)
            .resource(d.name(watches))
            .drop_intermediate(d.millis(100, 300))
            .with_probability(0.5)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::faults::FaultClass;

    #[test]
    fn chaos_schedules_hold_one_rule_of_every_class() {
        for seed in 1..50 {
            let faults = Faults::chaos(seed, &["pods"], &["pods"]);
            assert!(faults.problems().is_empty(), "{faults}");
            let classes: BTreeSet<FaultClass> = faults
                .rules
                .iter()
                .filter_map(|r| r.fault.map(|f| f.class()))
                .collect();
            assert_eq!(classes.len(), FaultClass::ALL.len(), "{faults}");
            println!("{faults}");
        }
    }
}
