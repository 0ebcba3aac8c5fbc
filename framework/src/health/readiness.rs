use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::answer::Line;

/// The manager's readiness checks: named flags, each turned on by the part
/// it stands for. Ready when every flag is on.
#[derive(Clone, Debug, Default)]
pub(crate) struct Readiness {
    checks: Arc<Mutex<Vec<Check>>>,
}

#[derive(Debug)]
struct Check {
    name: String,
    passed: Arc<AtomicBool>,
    /// What the check reports until it passes.
    waiting: &'static str,
    /// While set, the check passes whatever `passed` says: a cold standby's
    /// caches, which fill only once it leads.
    waived: Option<Arc<AtomicBool>>,
}

impl Readiness {
    /// Adds a check named `name` (made unique with `#2`, `#3`… when taken),
    /// failing with `waiting` until `passed` is set.
    pub(crate) fn add(&self, name: &str, waiting: &'static str, passed: Arc<AtomicBool>) {
        self.add_waived(name, waiting, passed, None);
    }

    /// As [`add`](Self::add), passing while `waived` is set.
    pub(crate) fn add_waived(
        &self,
        name: &str,
        waiting: &'static str,
        passed: Arc<AtomicBool>,
        waived: Option<Arc<AtomicBool>>,
    ) {
        let mut checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
        let mut unique = name.to_owned();
        let mut n = 1;
        while checks.iter().any(|c| c.name == unique) {
            n += 1;
            unique = format!("{name}#{n}");
        }
        checks.push(Check {
            name: unique,
            passed,
            waiting,
            waived,
        });
    }

    /// Every check's outcome, in the order they were added.
    pub(crate) fn lines(&self) -> Vec<Line> {
        let checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
        checks
            .iter()
            .map(|c| Line {
                name: c.name.clone(),
                failure: (!c.passed.load(Ordering::Acquire)
                    && !c.waived.as_ref().is_some_and(|w| w.load(Ordering::Acquire)))
                .then(|| c.waiting.to_owned()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_when_every_flag_is_on_and_names_stay_unique() {
        let readiness = Readiness::default();
        let (a, b) = (Arc::<AtomicBool>::default(), Arc::<AtomicBool>::default());
        readiness.add("cache:configmaps", "not synced", a.clone());
        readiness.add("cache:configmaps", "not synced", b.clone());
        let names: Vec<_> = readiness.lines().into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["cache:configmaps", "cache:configmaps#2"]);
        a.store(true, Ordering::Release);
        assert!(readiness.lines().iter().any(|l| l.failure.is_some()));
        b.store(true, Ordering::Release);
        assert!(readiness.lines().iter().all(|l| l.failure.is_none()));
    }
}
