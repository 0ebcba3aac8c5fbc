//! The control plane never outlives the process that started it.
//!
//! ```text
//! cargo test -p kube-concord-testenv --test orphans
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `pid` names a live process (a zombie counts as gone).
fn alive(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[test]
fn control_plane_exits_when_its_parent_is_killed() {
    let mut parent = Command::new(env!("CARGO_BIN_EXE_concord-controlplane"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(parent.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).expect("a ready line");
    let pid = ready["pid"].as_u64().unwrap();
    let data_dir = PathBuf::from(ready["dataDir"].as_str().unwrap());
    assert!(alive(pid) && data_dir.is_dir());

    parent.kill().unwrap(); // SIGKILL: no destructor, no cleanup code runs
    parent.wait().unwrap();

    let start = Instant::now();
    while (alive(pid) || data_dir.exists()) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!alive(pid), "control plane {pid} outlived its parent");
    assert!(!data_dir.exists(), "{} was left behind", data_dir.display());
}
