//! The command line of the race benchmark.

use std::fmt;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use concord::strategies::StrategyName;

use crate::sequential::Stopping;

/// Rounds of a run that names neither `--rounds` nor `--baseline`.
const DEFAULT_ROUNDS: u32 = 5;

/// Which incident the benchmark reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Our controller removes its finalizer from every pod while a separate
    /// client adds a foreign finalizer to the same pods at random moments.
    Kueue,
    /// Two paths of one process remove the same finalizer from every pod at
    /// once, one of them also setting a `completed` label.
    Argo,
    /// Many writers, few objects: every writer keeps setting its own label.
    Hotspot,
}

/// How the races of a scenario are brought about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RaceMode {
    /// Every raced write is raced for certain: in `kueue` the other
    /// controller adds its finalizer after our controller has read the pod
    /// from its cache and before it writes; in `argo` both paths send their
    /// writes at once from the same cached object. `--race-intensity`
    /// chooses the share of pods raced.
    Lockstep,
    /// The old mode: the other controller walks a shuffled order with
    /// random pauses, and races happen only where timings happen to meet.
    Random,
}

impl RaceMode {
    /// The command-line spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            RaceMode::Lockstep => "lockstep",
            RaceMode::Random => "random",
        }
    }
}

impl Scenario {
    /// The command-line spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scenario::Kueue => "kueue",
            Scenario::Argo => "argo",
            Scenario::Hotspot => "hotspot",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One way of sending the scenario's writes: a concord strategy, or one of
/// the two baselines written with bare kube-rs calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum Contender {
    /// concord's `lax` strategy.
    Lax,
    /// concord's `strict` strategy.
    Strict,
    /// concord's `update` strategy.
    Update,
    /// concord's `locked` strategy.
    Locked,
    /// concord's `apply` strategy.
    Apply,
    /// concord's `guarded` strategy.
    Guarded,
    /// `strict`'s requests sent with bare kube-rs calls: a merge patch with
    /// the observed resourceVersion, GET and retry on 409.
    Raw,
    /// Argo Workflows' original code: a JSON patch removing
    /// `/metadata/finalizers/<i>`, `i` taken from the observed object, no
    /// lock and no precondition.
    JsonIndex,
    /// The API server's own capacity: the same logical changes as bare
    /// strategic-merge PATCHes, no cache read, no precondition, no
    /// bookkeeping.
    Ceiling,
    /// A Go program doing the work the controller-runtime way: informer
    /// cache, `MergeFromWithOptimisticLock` and `RetryOnConflict`.
    ControllerRuntime,
    /// The same Go program with a plain `MergeFrom`: controller-runtime's
    /// `lax`.
    ControllerRuntimeLax,
    /// `lax` through a real `Manager` and `Reconciler`, chosen by the YAML
    /// strategy table.
    ManagerLax,
    /// `strict` through a real `Manager` and `Reconciler`.
    ManagerStrict,
    /// `update` through a real `Manager` and `Reconciler`.
    ManagerUpdate,
    /// `locked` through a real `Manager` and `Reconciler`.
    ManagerLocked,
    /// `apply` through a real `Manager` and `Reconciler`.
    ManagerApply,
    /// `guarded` through a real `Manager` and `Reconciler`.
    ManagerGuarded,
    /// `manager-guarded` with read-your-own-writes off
    /// (`.with_read_your_writes(false)`): `manager-guarded`'s ratio to it
    /// is what the gate costs. Not run unless named.
    ManagerGuardedUngated,
}

impl Contender {
    /// The concord strategy this contender runs, if it is one.
    pub const fn strategy(self) -> Option<StrategyName> {
        match self {
            Contender::Lax => Some(StrategyName::Lax),
            Contender::Strict => Some(StrategyName::Strict),
            Contender::Update => Some(StrategyName::Update),
            Contender::Locked => Some(StrategyName::Locked),
            Contender::Apply => Some(StrategyName::Apply),
            Contender::Guarded => Some(StrategyName::Guarded),
            _ => None,
        }
    }

    /// The strategy this contender runs through a `Manager`, if it does.
    pub const fn manager_strategy(self) -> Option<StrategyName> {
        match self {
            Contender::ManagerLax => Some(StrategyName::Lax),
            Contender::ManagerStrict => Some(StrategyName::Strict),
            Contender::ManagerUpdate => Some(StrategyName::Update),
            Contender::ManagerLocked => Some(StrategyName::Locked),
            Contender::ManagerApply => Some(StrategyName::Apply),
            Contender::ManagerGuarded | Contender::ManagerGuardedUngated => {
                Some(StrategyName::Guarded)
            }
            _ => None,
        }
    }

    /// Whether a `Manager` contender's controller waits for its cache to
    /// show the manager's own writes (concord's default).
    pub const fn read_your_writes(self) -> bool {
        !matches!(self, Contender::ManagerGuardedUngated)
    }

    /// The direct-call contender of the same strategy, for a manager
    /// contender: the pair whose ratio is the framework's overhead.
    pub const fn direct(self) -> Option<Contender> {
        match self {
            Contender::ManagerLax => Some(Contender::Lax),
            Contender::ManagerStrict => Some(Contender::Strict),
            Contender::ManagerUpdate => Some(Contender::Update),
            Contender::ManagerLocked => Some(Contender::Locked),
            Contender::ManagerApply => Some(Contender::Apply),
            Contender::ManagerGuarded | Contender::ManagerGuardedUngated => {
                Some(Contender::Guarded)
            }
            _ => None,
        }
    }

    /// The mode of the controller-runtime peer, if this contender is it.
    pub const fn peer_mode(self) -> Option<&'static str> {
        match self {
            Contender::ControllerRuntime => Some("strict"),
            Contender::ControllerRuntimeLax => Some("lax"),
            _ => None,
        }
    }

    /// The name used on the command line, in tables and in `results.json`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Contender::Raw => "raw",
            Contender::JsonIndex => "json-index",
            Contender::Ceiling => "ceiling",
            Contender::ControllerRuntime => "controller-runtime",
            Contender::ControllerRuntimeLax => "controller-runtime-lax",
            Contender::ManagerLax => "manager-lax",
            Contender::ManagerStrict => "manager-strict",
            Contender::ManagerUpdate => "manager-update",
            Contender::ManagerLocked => "manager-locked",
            Contender::ManagerApply => "manager-apply",
            Contender::ManagerGuarded => "manager-guarded",
            Contender::ManagerGuardedUngated => "manager-guarded-ungated",
            other => match other.strategy() {
                Some(name) => name.as_str(),
                None => "?",
            },
        }
    }

    /// The contenders a scenario runs when `--strategies` is not given:
    /// the six strategies, `strict` and `guarded` through a `Manager`,
    /// `raw`, `ceiling` and `controller-runtime`, plus `json-index` in
    /// `argo`.
    pub fn defaults(scenario: Scenario) -> Vec<Contender> {
        let mut all = vec![
            Contender::Lax,
            Contender::Strict,
            Contender::Update,
            Contender::Locked,
            Contender::Apply,
            Contender::Guarded,
            Contender::ManagerStrict,
            Contender::ManagerGuarded,
            Contender::Raw,
            Contender::Ceiling,
            Contender::ControllerRuntime,
        ];
        if scenario == Scenario::Argo {
            all.push(Contender::JsonIndex);
        }
        all
    }
}

impl fmt::Display for Contender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// ANCHOR: args
/// Reproduce the Kueue and Argo write races at scale and compare every
/// write strategy in one run.
#[derive(Clone, Debug, Parser)]
#[command(name = "race-bench", version, about, long_about = None)]
pub struct Args {
    /// The incident to reproduce.
    #[arg(long, value_enum, default_value_t = Scenario::Kueue)]
    pub scenario: Scenario,
    /// Pods per contender over all rounds (in `hotspot`: writes in all);
    /// each round gives every contender `pods / rounds` fresh pods.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=200_000))]
    pub pods: u32,
    /// A fixed number of rounds: each runs every contender once on its own
    /// slice of pods, in an order rotated per round, so load drift hits all
    /// alike; ratios get a 95% interval paired by round [default: 5, or
    /// `--until-decided` when `--baseline` is named].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100),
          conflicts_with_all = ["until_decided", "max_rounds", "max_minutes"])]
    pub rounds: Option<u32>,
    /// Keep adding rounds until every checked ratio (each concord
    /// strategy's against the baseline, and the targets) is decided, or
    /// `--max-rounds` or `--max-minutes` ends the run; each look uses a
    /// Bonferroni share of the 5% error rate. The default with
    /// `--baseline`.
    #[arg(long)]
    pub until_decided: bool,
    /// With sequential rounds: the most rounds; each gets `pods /
    /// max-rounds` pods per contender.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(3..=100))]
    pub max_rounds: u32,
    /// With sequential rounds: start no round after this many minutes.
    #[arg(long, value_parser = minutes)]
    pub max_minutes: Option<f64>,
    /// How races are brought about.
    #[arg(long, value_enum, default_value_t = RaceMode::Lockstep)]
    pub race: RaceMode,
    /// With `--race lockstep`: the share of pods raced, 0 to 1. The default
    /// is the Kueue incident's magnitude (7,297 of 10,000 finalizers lost).
    #[arg(long, default_value_t = 0.75, value_parser = intensity)]
    pub race_intensity: f64,
    /// Concurrent writer tasks of our controller.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=512))]
    pub writers: u32,
    /// Comma-separated contenders [default: lax,strict,update,locked,apply,
    /// guarded,manager-strict,manager-guarded,raw,ceiling,controller-runtime
    /// (+json-index in argo)].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub strategies: Option<Vec<Contender>>,
    /// Seed of every random choice (foreign-writer order and timing, which
    /// pods carry a second finalizer).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory for `results.json`, `results.md` and `results.svg`; by default
    /// `target/race-bench/SCENARIO`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Kubeconfig of the cluster to run on [default: the embedded control
    /// plane; `$KUBECONFIG` is ignored].
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Consent to run on a cluster that is not on this machine.
    #[command(flatten)]
    pub consent: concord_examples::RemoteConsent,
    /// Contender whose writes/s the others are compared with [default: lax,
    /// when it runs]. Naming it asks for the graduation check: the run
    /// fails unless every concord strategy's interval clears the floor.
    #[arg(long, value_enum)]
    pub baseline: Option<Contender>,
    /// The floor of the speed verdicts: a concord strategy's writes/s ratio
    /// to the baseline is "met" when its 95% interval lies above
    /// `1 - this/100`, "undecided" when it straddles that line; with
    /// `--baseline`, anything but "met" fails the run.
    #[arg(long, default_value_t = 5.0)]
    pub max_regression: f64,
    /// The pid of the API server process on this machine (kube-apiserver,
    /// or the embedded control plane holding it and etcd), for its CPU
    /// time per write [default: the embedded control plane's, when it
    /// runs; otherwise not measured].
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// How the `manager-*` contenders' shared cache holds the pods:
    /// `compact` (JSON decoded per read, concord's default; each manager
    /// round prints what decoding cost) or `decoded` (typed objects).
    #[arg(long, value_enum, default_value_t)]
    pub cache_layout: concord::cache::CacheLayout,
}
// ANCHOR_END: args

/// Parse a race intensity: a share from 0 to 1.
fn intensity(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is not between 0 and 1"))
    }
}

/// Parse a number of minutes: positive.
fn minutes(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if value > 0.0 && value.is_finite() {
        Ok(value)
    } else {
        Err(format!("{value} is not a positive number of minutes"))
    }
}

impl Args {
    /// How many rounds the run makes: `--rounds N`, else until decided
    /// when asked for or when `--baseline` is named, else 5.
    pub fn stopping(&self) -> Stopping {
        match self.rounds {
            Some(n) => Stopping::Fixed(n),
            None if self.until_decided || self.baseline.is_some() => Stopping::UntilDecided {
                max_rounds: self.max_rounds,
                max_time: self
                    .max_minutes
                    .map(|m| std::time::Duration::from_secs_f64(m * 60.0)),
            },
            None => Stopping::Fixed(DEFAULT_ROUNDS),
        }
    }

    /// The baseline: `--baseline`, else `lax` when it runs.
    pub fn baseline(&self) -> Option<Contender> {
        self.baseline.or_else(|| {
            self.contenders()
                .contains(&Contender::Lax)
                .then_some(Contender::Lax)
        })
    }

    /// Where `results.json`, `results.md` and `results.svg` go.
    pub fn out_dir(&self) -> PathBuf {
        self.out
            .clone()
            .unwrap_or_else(|| PathBuf::from("target/race-bench").join(self.scenario.as_str()))
    }

    /// The contenders to run, in order, without duplicates.
    pub fn contenders(&self) -> Vec<Contender> {
        let wanted = self
            .strategies
            .clone()
            .unwrap_or_else(|| Contender::defaults(self.scenario));
        let mut unique = Vec::with_capacity(wanted.len());
        for c in wanted {
            if !unique.contains(&c) {
                unique.push(c);
            }
        }
        unique
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
