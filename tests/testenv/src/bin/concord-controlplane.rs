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

use std::io::Read;

use concord_testenv::{ControlPlane, ControlPlaneOptions};

fn main() -> Result<(), concord_testenv::Error> {
    let control_plane = ControlPlane::start(ControlPlaneOptions::default())?;
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
