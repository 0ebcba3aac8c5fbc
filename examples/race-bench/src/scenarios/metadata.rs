//! The finalizers and labels the scenarios put on their pods.

/// Our finalizer in `kueue`.
pub(crate) const OURS: &str = "kueue.x-k8s.io/managed";
/// The finalizer the separate client adds in `kueue`.
pub(crate) const FOREIGN: &str = "example.com/foreign";
/// Argo's finalizer, removed by both paths in `argo`.
pub(crate) const ARGO: &str = "workflows.argoproj.io/status";
/// Another owner's finalizer behind Argo's on half the pods in `argo`: an
/// index-based removal that runs twice takes it away by mistake.
pub(crate) const KEEP: &str = "example.com/keep";
/// The label Argo's "label pod completed" path sets.
pub(crate) const COMPLETED: &str = "workflows.argoproj.io/completed";
/// The label every benchmark pod carries.
pub(crate) const BENCH_LABEL: &str = "race.concord.dev/bench";
