//! A real Kubernetes control plane for tests: kube-apiserver backed by etcd,
//! with kube-controller-manager's garbage collector, namespace and
//! service-account controllers, started on 127.0.0.1 by the test itself.
//!
//! This is the role envtest plays for controller-runtime, without downloading
//! anything: the control plane is built from its Go modules on first use and
//! cached (see [`ControlPlaneBinary`]).
//!
//! # Contents
//!
//! | item | what it does |
//! | --- | --- |
//! | [`TestEnv::shared`] | one control plane per test binary, or an existing cluster when `CONCORD_TEST_KUBECONFIG` is set |
//! | [`TestEnv::namespace`] | a fresh namespace per test, its default ServiceAccount ready |
//! | [`TestEnv::install_crd`] | installs a CustomResourceDefinition and waits until it is established |
//! | [`TestEnv::restricted_client`] | a client for an identity that holds only the given RBAC rules |
//! | [`TestCa`] | a throw-away CA and serving certificates for webhook servers the API server calls |
//! | [`ControlPlane`] | start, stop and restart a control plane yourself (same data, same ports) |
//! | [`faults::FaultProxy`] | a proxy that injects stale, unobserved and failing answers and crashes, from a seeded schedule |
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let env = concord_testenv::TestEnv::shared()?;
//! let ns = env.namespace().await?;
//! let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(ns.client(), ns.name());
//! assert!(pods.list(&Default::default()).await?.items.is_empty());
//! # Ok(()) }
//! ```
//!
//! # Guarantees
//!
//! The control plane exits and removes its temporary directory when the
//! process that started it ends, however it ends (SIGKILL included): it
//! watches a pipe whose write end only the test process holds.

mod binary;
mod certs;
mod control_plane;
mod env;
mod error;
pub mod faults;
mod namespace;
mod poll;

#[doc(inline)]
pub use binary::{ControlPlaneBinary, GoProgram};
#[doc(inline)]
pub use certs::{CertError, ServingCert, TestCa};
#[doc(inline)]
pub use control_plane::{ControlPlane, ControlPlaneOptions, START_ATTEMPTS};
#[doc(inline)]
pub use env::{KUBECONFIG_ENV, SHARDED_LIST_AND_WATCH, TestEnv, restricted_config};
#[doc(inline)]
pub use error::Error;
#[doc(inline)]
pub use namespace::TestNamespace;
