//! Runs the embedded test control plane until interrupted, for poking at it
//! with kubectl or pointing an operator at it.
//!
//! ```text
//! cargo run -p kube-concord-testenv --bin concord-controlplane
//! export KUBECONFIG=<the printed path>
//! ```
//!
//! It prints one JSON line once the API server is ready:
//! `{"server": …, "kubeconfig": …, "dataDir": …, "pid": …}`.
//!
//! Every argument is a kube-apiserver flag, added after the embedded
//! defaults (so it wins over one of them), for instance
//! `concord-controlplane --profiling=true` to read the API server's CPU
//! profile at `/debug/pprof/profile`. An argument that is not a flag
//! (`--name=value` or `--name`) is refused.

use std::io::Read;

use concord_testenv::{ControlPlane, ControlPlaneOptions};

fn main() -> Result<(), concord_testenv::Error> {
    let mut options = ControlPlaneOptions::default();
    for arg in std::env::args().skip(1) {
        if !arg.starts_with("--") || arg.len() < 3 {
            eprintln!("concord-controlplane: `{arg}` is not a kube-apiserver flag (--name=value)");
            std::process::exit(2);
        }
        options = options.with_apiserver_arg(arg);
    }
    let control_plane = ControlPlane::start(options)?;
    println!(
        "{}",
        serde_json::json!({
            "server": control_plane.server(),
            "kubeconfig": control_plane.kubeconfig_path(),
            "dataDir": control_plane.data_dir(),
            "pid": control_plane.pid(),
        })
    );
    eprintln!("control plane ready; close standard input (Ctrl-D) or press Ctrl-C to stop");
    // Ctrl-C kills this process; the control plane follows by itself.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(control_plane);
    Ok(())
}
