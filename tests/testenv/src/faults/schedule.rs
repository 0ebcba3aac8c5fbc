//! The seeded fault schedule: rules that read like a sentence, printed back
//! in the same words so that a failing run can be replayed exactly.

use std::fmt;
use std::time::Duration;

use crate::faults::Verb;

/// What the proxy does to a request or watch event a rule matches.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Fault {
    /// Answer with this status code (and a `metav1.Status` body) without
    /// forwarding the request. A `429` carries `Retry-After: retry_after`.
    Respond {
        /// The HTTP status code, 4xx or 5xx.
        code: u16,
        /// The `Retry-After` header of a `429`, in seconds.
        retry_after: u32,
    },
    /// Forward the request, discard the answer, and answer `504 Timeout`:
    /// the write may have happened although the client was told it timed out.
    TimeOut,
    /// Forward the request, then cut the connection halfway through the
    /// answer (after the first event of a watch).
    Reset,
    /// Forward the request after this delay.
    Delay(Duration),
    /// Crash the supervised operator instead of forwarding the request.
    CrashBefore,
    /// Forward the request, then crash the supervised operator before it
    /// sees the answer.
    CrashAfter,
    /// Deliver the watch events of a matching object this much later (a
    /// stale cache); per object, events keep their order.
    HoldEvents(Duration),
    /// Of the watch events of a matching object that arrive within this
    /// window, deliver only the last (an unobserved intermediate state).
    DropIntermediate(Duration),
}

impl Fault {
    /// Whether the fault acts on the events of a watch rather than on a
    /// request.
    pub fn on_events(&self) -> bool {
        matches!(self, Fault::HoldEvents(_) | Fault::DropIntermediate(_))
    }

    /// The class the fault is counted under in a [`FaultReport`](crate::faults::FaultReport).
    pub fn class(&self) -> FaultClass {
        match self {
            Fault::Respond { code: 409, .. } => FaultClass::Conflict,
            Fault::Respond { code: 429, .. } => FaultClass::Throttle,
            Fault::Respond { .. } => FaultClass::ServerError,
            Fault::TimeOut => FaultClass::Timeout,
            Fault::Reset => FaultClass::Reset,
            Fault::Delay(_) => FaultClass::Delay,
            Fault::CrashBefore | Fault::CrashAfter => FaultClass::Crash,
            Fault::HoldEvents(_) => FaultClass::StaleCache,
            Fault::DropIntermediate(_) => FaultClass::UnobservedState,
        }
    }
}

/// The classes of faults, for counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FaultClass {
    /// `409 Conflict`.
    Conflict,
    /// `429 Too Many Requests` with `Retry-After`.
    Throttle,
    /// Any other error status (`500`, `503`, ...).
    ServerError,
    /// `504` after the request was forwarded.
    Timeout,
    /// Connection cut mid-answer.
    Reset,
    /// Added latency.
    Delay,
    /// The operator crashed between two writes.
    Crash,
    /// Watch events delivered late.
    StaleCache,
    /// Intermediate watch events dropped.
    UnobservedState,
}

impl FaultClass {
    /// Every class, in report order.
    pub const ALL: [FaultClass; 9] = [
        FaultClass::Conflict,
        FaultClass::Throttle,
        FaultClass::ServerError,
        FaultClass::Timeout,
        FaultClass::Reset,
        FaultClass::Delay,
        FaultClass::Crash,
        FaultClass::StaleCache,
        FaultClass::UnobservedState,
    ];
}

impl fmt::Display for FaultClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultClass::Conflict => "conflict",
            FaultClass::Throttle => "throttle",
            FaultClass::ServerError => "server-error",
            FaultClass::Timeout => "timeout",
            FaultClass::Reset => "reset",
            FaultClass::Delay => "delay",
            FaultClass::Crash => "crash",
            FaultClass::StaleCache => "stale-cache",
            FaultClass::UnobservedState => "unobserved-state",
        })
    }
}

/// One rule: which requests (or watch events) it matches and what it does.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Rule {
    pub(crate) verb: Verb,
    pub(crate) resource: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) namespace: Option<String>,
    pub(crate) fault: Option<Fault>,
    pub(crate) times: Option<u32>,
    pub(crate) after: u32,
    pub(crate) probability: f64,
    pub(crate) per_object: bool,
}

/// A seeded schedule of faults, built like a sentence.
///
/// ```
/// use std::time::Duration;
/// use concord_testenv::faults::{Faults, Verb};
///
/// let faults = Faults::seeded(7)
///     .on(Verb::Patch).resource("pods").fail_with(409).times(3)
///     .on(Verb::Watch).resource("pods").hold_events(Duration::from_millis(300))
///     .on(Verb::Update).resource("widgets/status").crash_before().after(1).times(1);
/// // Printed back in the same words, to replay a failing run exactly.
/// assert!(faults.to_string().starts_with("Faults::seeded(7).on(Verb::Patch).resource(\"pods\")"));
/// ```
///
/// Every modifier applies to the rule the last [`on`](Self::on) started.
/// Mistakes (a modifier before any `on`, a success code in `fail_with`, a
/// watch-event fault on a verb other than `Watch`, a rule without a fault)
/// are reported, all at once, when the proxy starts.
///
/// # Determinism
///
/// Whether a rule with a [`probability`](Self::with_probability) fires is a
/// hash of the seed, the rule, the object and how many times the rule
/// matched that object before, so it does not depend on how requests for
/// different objects interleave. [`times`](Self::times) and
/// [`after`](Self::after) count matches of the rule over all objects,
/// unless the rule is [`per_object`](Self::per_object).
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub struct Faults {
    pub(crate) seed: u64,
    pub(crate) rules: Vec<Rule>,
    pub(crate) problems: Vec<String>,
}

impl Faults {
    /// An empty schedule whose random choices derive from `seed`.
    pub fn seeded(seed: u64) -> Self {
        Faults {
            seed,
            rules: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// No faults at all: the proxy only forwards.
    pub fn none() -> Self {
        Faults::seeded(0)
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// How many rules the schedule holds.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the schedule holds no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Starts a rule for requests with this verb.
    pub fn on(mut self, verb: Verb) -> Self {
        self.rules.push(Rule {
            verb,
            resource: None,
            name: None,
            namespace: None,
            fault: None,
            times: None,
            after: 0,
            probability: 1.0,
            per_object: false,
        });
        self
    }

    fn edit(mut self, what: &str, edit: impl FnOnce(&mut Rule)) -> Self {
        match self.rules.last_mut() {
            Some(rule) => edit(rule),
            None => self
                .problems
                .push(format!("`{what}` comes before any `on(verb)`")),
        }
        self
    }

    fn fault(self, fault: Fault) -> Self {
        self.edit("fault", |rule| rule.fault = Some(fault))
    }

    /// Only requests for this resource: `pods`, `pods/status`,
    /// `widgets.demo.concord.dev`, `widgets/status`; as in RBAC, `pods`
    /// does not cover `pods/status`. Without it, any resource.
    pub fn resource(self, resource: &str) -> Self {
        self.edit("resource", |r| r.resource = Some(resource.to_owned()))
    }

    /// Only this object (for watch-event faults: events of this object).
    pub fn named(self, name: &str) -> Self {
        self.edit("named", |r| r.name = Some(name.to_owned()))
    }

    /// Only requests in this namespace.
    pub fn in_namespace(self, namespace: &str) -> Self {
        self.edit("in_namespace", |r| r.namespace = Some(namespace.to_owned()))
    }

    /// Fire at most `n` times.
    pub fn times(self, n: u32) -> Self {
        self.edit("times", |r| r.times = Some(n))
    }

    /// Let the first `n` matches through untouched.
    pub fn after(self, n: u32) -> Self {
        self.edit("after", |r| r.after = n)
    }

    /// Count [`times`](Self::times) and [`after`](Self::after) per object
    /// rather than over all objects: `.after(2).per_object()` spares the
    /// first two events (or requests) of every object.
    pub fn per_object(self) -> Self {
        self.edit("per_object", |r| r.per_object = true)
    }

    /// Fire on a match with probability `p` (seeded, see # Determinism).
    pub fn with_probability(mut self, p: f64) -> Self {
        if !(0.0..=1.0).contains(&p) {
            self.problems
                .push(format!("probability {p} is outside 0..=1"));
        }
        self.edit("with_probability", |r| r.probability = p)
    }

    /// Answer with `code` (4xx or 5xx) instead of forwarding; a `429`
    /// carries `Retry-After: 1`.
    pub fn fail_with(mut self, code: u16) -> Self {
        if !(400..=599).contains(&code) {
            self.problems
                .push(format!("fail_with({code}) is not an error status"));
        }
        self.fault(Fault::Respond {
            code,
            retry_after: 1,
        })
    }

    /// Answer `429 Too Many Requests` with `Retry-After: seconds`.
    pub fn throttle(self, retry_after_seconds: u32) -> Self {
        self.fault(Fault::Respond {
            code: 429,
            retry_after: retry_after_seconds,
        })
    }

    /// Forward, then answer `504 Timeout` (see [`Fault::TimeOut`]).
    pub fn time_out(self) -> Self {
        self.fault(Fault::TimeOut)
    }

    /// Forward, then cut the connection mid-answer (see [`Fault::Reset`]).
    pub fn reset_mid_response(self) -> Self {
        self.fault(Fault::Reset)
    }

    /// Forward after `delay`.
    pub fn delay(self, delay: Duration) -> Self {
        self.fault(Fault::Delay(delay))
    }

    /// Crash the operator [supervised](crate::faults::FaultProxy::supervise)
    /// by the proxy instead of sending this write, and start it again.
    pub fn crash_before(self) -> Self {
        self.fault(Fault::CrashBefore)
    }

    /// Send this write, then crash the supervised operator before it sees
    /// the answer, and start it again.
    pub fn crash_after(self) -> Self {
        self.fault(Fault::CrashAfter)
    }

    /// Deliver watch events `delay` late (stale cache); only with
    /// `on(Verb::Watch)`.
    pub fn hold_events(self, delay: Duration) -> Self {
        self.fault(Fault::HoldEvents(delay))
    }

    /// Deliver only the last of the events of one object within `window`
    /// (unobserved states); only with `on(Verb::Watch)`.
    pub fn drop_intermediate(self, window: Duration) -> Self {
        self.fault(Fault::DropIntermediate(window))
    }

    /// Every mistake in the schedule, or nothing.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = self.problems.clone();
        for (index, rule) in self.rules.iter().enumerate() {
            let at = format!("rule {} (on {})", index + 1, rule.verb);
            match rule.fault {
                None => problems.push(format!("{at} has no fault")),
                Some(f) if f.on_events() && rule.verb != Verb::Watch => problems.push(format!(
                    "{at}: {f:?} acts on watch events, use on(Verb::Watch)"
                )),
                Some(Fault::CrashBefore | Fault::CrashAfter) if !rule.verb.is_write() => problems
                    .push(format!(
                        "{at}: a crash goes between two writes, use a write verb"
                    )),
                _ => {}
            }
        }
        problems
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faults::seeded({})", self.seed)?;
        for rule in &self.rules {
            write!(f, "{rule}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, ".on(Verb::{:?})", self.verb)?;
        if let Some(resource) = &self.resource {
            write!(f, ".resource({resource:?})")?;
        }
        if let Some(namespace) = &self.namespace {
            write!(f, ".in_namespace({namespace:?})")?;
        }
        if let Some(name) = &self.name {
            write!(f, ".named({name:?})")?;
        }
        match self.fault {
            Some(Fault::Respond {
                code: 429,
                retry_after,
            }) => write!(f, ".throttle({retry_after})")?,
            Some(Fault::Respond { code, .. }) => write!(f, ".fail_with({code})")?,
            Some(Fault::TimeOut) => f.write_str(".time_out()")?,
            Some(Fault::Reset) => f.write_str(".reset_mid_response()")?,
            Some(Fault::Delay(d)) => write!(f, ".delay({})", millis(d))?,
            Some(Fault::CrashBefore) => f.write_str(".crash_before()")?,
            Some(Fault::CrashAfter) => f.write_str(".crash_after()")?,
            Some(Fault::HoldEvents(d)) => write!(f, ".hold_events({})", millis(d))?,
            Some(Fault::DropIntermediate(d)) => write!(f, ".drop_intermediate({})", millis(d))?,
            None => {}
        }
        if self.after > 0 {
            write!(f, ".after({})", self.after)?;
        }
        if let Some(times) = self.times {
            write!(f, ".times({times})")?;
        }
        if self.probability < 1.0 {
            write!(f, ".with_probability({})", self.probability)?;
        }
        if self.per_object {
            f.write_str(".per_object()")?;
        }
        Ok(())
    }
}

fn millis(d: Duration) -> String {
    format!("Duration::from_millis({})", d.as_millis())
}

/// SplitMix64: a fixed, portable mix, so a seed means the same thing on
/// every platform and version.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// FNV-1a of a string, to fold object names into a seed.
pub(crate) fn fold(seed: u64, text: &str) -> u64 {
    text.bytes().fold(seed ^ 0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
    })
}

/// A uniform draw in `0..1` for the `occurrence`th match of `key` by rule `rule`.
pub(crate) fn draw(seed: u64, rule: usize, key: &str, occurrence: u32) -> f64 {
    let h = mix(fold(mix(seed ^ (rule as u64) << 32), key) ^ u64::from(occurrence));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_back_the_sentence_it_was_built_from() {
        let faults = Faults::seeded(42)
            .on(Verb::Patch)
            .resource("pods")
            .fail_with(409)
            .times(3)
            .on(Verb::Watch)
            .resource("pods")
            .hold_events(Duration::from_millis(250))
            .with_probability(0.5);
        assert_eq!(
            faults.to_string(),
            "Faults::seeded(42).on(Verb::Patch).resource(\"pods\").fail_with(409).times(3)\
             .on(Verb::Watch).resource(\"pods\").hold_events(Duration::from_millis(250)).with_probability(0.5)"
        );
        assert!(faults.problems().is_empty());
    }

    #[test]
    fn reports_every_mistake_at_once() {
        let faults = Faults::seeded(1)
            .times(2)
            .on(Verb::Patch)
            .fail_with(200)
            .on(Verb::Get)
            .hold_events(Duration::from_millis(1))
            .on(Verb::List)
            .on(Verb::Get)
            .crash_after()
            .with_probability(2.0);
        let problems = faults.problems();
        assert_eq!(problems.len(), 6, "{problems:#?}");
        assert!(problems[0].contains("`times` comes before any `on(verb)`"));
        assert!(problems.iter().any(|p| p.contains("fail_with(200)")));
        assert!(
            problems
                .iter()
                .any(|p| p.contains("rule 3 (on list) has no fault"))
        );
    }

    #[test]
    fn draws_depend_on_seed_and_object_not_on_order() {
        let a = draw(7, 0, "ns/a", 0);
        assert_eq!(a, draw(7, 0, "ns/a", 0));
        assert_ne!(a, draw(8, 0, "ns/a", 0));
        assert_ne!(a, draw(7, 1, "ns/a", 0));
        assert_ne!(a, draw(7, 0, "ns/b", 0));
        let mean = (0..1000).map(|i| draw(3, 0, "k", i)).sum::<f64>() / 1000.0;
        assert!((0.45..0.55).contains(&mean), "{mean}");
    }
}
