//! What the concord operator and the controller-runtime operator are
//! started with: their executables, the kubeconfig, and each one's
//! command line.

use std::path::PathBuf;

use crate::args::Args;
use crate::choice::AllocatorChoice;
use crate::objects::Kind;
use crate::operator::CacheMode;

/// What the two operators are started with.
pub(crate) struct Programs {
    pub(crate) concord: PathBuf,
    pub(crate) peer: PathBuf,
    pub(crate) kubeconfig: PathBuf,
    /// How the concord operator's cache holds the objects.
    pub(crate) layout: concord::cache::CacheLayout,
}

impl Programs {
    /// The concord operator's command line.
    pub(crate) fn concord_args(
        &self,
        namespace: &str,
        kind: Kind,
        cache: CacheMode,
        concurrency: u16,
        sleep_ms: u64,
        choice: AllocatorChoice,
    ) -> Vec<String> {
        let mut argv: Vec<String> = vec![
            "operator".into(),
            "--kubeconfig".into(),
            self.kubeconfig.display().to_string(),
            "--namespace".into(),
            namespace.into(),
            "--kind".into(),
            kind.as_str().into(),
            "--cache".into(),
            cache.as_str().into(),
            "--layout".into(),
            self.layout.as_str().into(),
            "--concurrency".into(),
            concurrency.to_string(),
            "--sleep-ms".into(),
            sleep_ms.to_string(),
        ];
        if choice.trims() {
            argv.push("--trim-when-idle".into());
        }
        argv
    }

    /// The controller-runtime operator's command line.
    pub(crate) fn peer_args(&self, namespace: &str, args: &Args) -> Vec<String> {
        vec![
            format!("-kubeconfig={}", self.kubeconfig.display()),
            format!("-namespace={namespace}"),
            format!("-kind={}", args.kind.as_str()),
            format!("-cache={}", args.cache.peer().as_str()),
            format!("-concurrency={}", args.concurrency),
        ]
    }
}
