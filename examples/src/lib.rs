//! Shared plumbing for concord's runnable examples: connecting to the
//! cluster `--kubeconfig` names or, when none is given, to an embedded
//! control plane. The race
//! benchmark is a package of its own, `concord-race-bench`, in `race-bench/`.

mod cli;
mod connect;
mod demo;

pub mod argo;
pub mod deploy;
pub mod invariants;
pub mod kueue;
pub mod mirror;
pub mod pod_phase;
pub mod procfs;
pub mod widgets;
pub mod widgets_demo;
pub mod widgets_v1alpha1;
pub mod widgets_webhooks;

#[doc(inline)]
pub use cli::{
    ExampleArgs, KUBECONFIG_HELP, client_of, demo_connection, load_config,
    managed_certificates_rbac_yaml, role_yaml,
};
#[doc(inline)]
pub use connect::{Connection, RemoteConsent, connect};
#[doc(inline)]
pub use demo::{ensure_namespace, wait_until};
