use std::fs::{self, File};
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::Error;

/// The Go module under `tests/testenv/controlplane`, compiled into this crate's
/// search path at build time.
const SOURCE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/controlplane");

/// The `kube-controlplane` executable, built from its Go modules and cached.
///
/// The cache key is a hash of the module's `go.mod`, `go.sum` and `*.go`
/// files, so a second run with nothing changed starts at once and does no
/// build work. The cache lives in `$CONCORD_CONTROLPLANE_CACHE`, else
/// `$XDG_CACHE_HOME/concord`, else `~/.cache/concord`. Setting
/// `CONCORD_CONTROLPLANE_BIN` skips the build and uses that executable.
///
/// # Assumptions
///
/// `go` (1.26 or newer) is on `PATH` and the Go module proxy is reachable the
/// first time. The build runs with `GOTOOLCHAIN=local`: it never downloads a
/// toolchain.
#[derive(Clone, Debug)]
pub struct ControlPlaneBinary {
    path: PathBuf,
}

impl ControlPlaneBinary {
    /// Returns the cached executable, building it first if needed.
    ///
    /// Concurrent callers (several test binaries at once) serialise on a
    /// lock file, so the module is built once.
    ///
    /// # Errors
    ///
    /// [`Error::BuildFailed`] when `go build` fails, [`Error::Io`] when the
    /// cache directory cannot be written.
    pub fn ensure() -> Result<Self, Error> {
        if let Some(path) = std::env::var_os("CONCORD_CONTROLPLANE_BIN") {
            return Ok(ControlPlaneBinary { path: path.into() });
        }
        let path = GoProgram::new("kube-controlplane", SOURCE_DIR, WHAT)
            .with_ldflags(VERSION_LDFLAGS)
            .with_hint(SKIP_HINT)
            .ensure()?;
        Ok(ControlPlaneBinary { path })
    }

    /// The path of the executable.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A Go program built with the machine's `go` from its own module directory
/// on first use, and cached under a name keyed by a hash of its sources —
/// the control plane, and any Go peer a benchmark runs beside concord.
///
/// The cache lives in `$CONCORD_CONTROLPLANE_CACHE`, else
/// `$XDG_CACHE_HOME/concord`, else `~/.cache/concord`. The build runs with
/// `GOTOOLCHAIN=local` (it never downloads a toolchain), prints progress
/// lines on standard error while it runs, and is serialised between
/// processes by a lock file, so concurrent callers build once.
///
/// ```no_run
/// let peer = concord_testenv::GoProgram::new("my-peer", "/path/to/module", "the Go peer")
///     .ensure()?;
/// # Ok::<(), concord_testenv::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct GoProgram {
    name: String,
    source: PathBuf,
    what: String,
    ldflags: Option<String>,
    hint: Option<String>,
}

impl GoProgram {
    /// The program `name` (the cached file's prefix) built from the Go module
    /// in `source`; `what` names it in progress lines.
    pub fn new(
        name: impl Into<String>,
        source: impl Into<PathBuf>,
        what: impl Into<String>,
    ) -> Self {
        GoProgram {
            name: name.into(),
            source: source.into(),
            what: what.into(),
            ldflags: None,
            hint: None,
        }
    }

    /// Passes `-ldflags` to `go build`. The cache key is the sources' hash
    /// alone: change a source file when the flags change.
    #[must_use]
    pub fn with_ldflags(mut self, ldflags: impl Into<String>) -> Self {
        self.ldflags = Some(ldflags.into());
        self
    }

    /// A line printed once when a build starts: how to avoid it.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The cached executable's path, building it first if needed.
    ///
    /// # Errors
    ///
    /// [`Error::BuildFailed`] when `go` is missing or `go build` fails (the
    /// message holds its errors), [`Error::Io`] when the sources cannot be
    /// read or the cache cannot be written.
    pub fn ensure(&self) -> Result<PathBuf, Error> {
        let key = source_hash(&self.source)?;
        let cache = cache_dir();
        fs::create_dir_all(&cache)
            .map_err(|e| Error::io(format!("creating cache directory {}", cache.display()), e))?;
        let path = cache.join(format!("{}-{key:016x}", self.name));
        if path.is_file() {
            return Ok(path);
        }
        let lock_path = cache.join(format!("{}.lock", self.name));
        let lock = File::create(&lock_path)
            .map_err(|e| Error::io(format!("creating {}", lock_path.display()), e))?;
        if lock.try_lock().is_err() {
            eprintln!(
                "concord-testenv: another process is building {}; waiting for it ({})",
                self.name,
                lock_path.display()
            );
            lock.lock()
                .map_err(|e| Error::io(format!("locking {}", lock_path.display()), e))?;
        }
        if !path.is_file() {
            self.build(&path)?;
        }
        Ok(path)
    }
}

/// Stamps the version the API server reports at `/version`, as the
/// Kubernetes release build does (an unstamped build says `v0.0.0-master`,
/// which clients cannot parse).
const VERSION_LDFLAGS: &str = "-X k8s.io/component-base/version.gitVersion=v1.37.2 \
     -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
     -X k8s.io/component-base/version.gitTreeState=clean";

fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CONCORD_CONTROLPLANE_CACHE") {
        return dir.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("concord")
}

/// What the first build makes, for the progress lines.
const WHAT: &str = "the test control plane (kube-apiserver, etcd and kube-controller-manager)";

/// How to avoid the build, said once when it starts.
const SKIP_HINT: &str = "to skip it, point at a cluster you have: --kubeconfig PATH or $KUBECONFIG \
     (programs), CONCORD_TEST_KUBECONFIG (tests), or a built binary with CONCORD_CONTROLPLANE_BIN";

/// How often a line is printed when standard error is not a terminal.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);

impl GoProgram {
    fn build(&self, target: &Path) -> Result<(), Error> {
        let source = self.source.as_path();
        eprintln!(
            "concord-testenv: building {} from its Go modules in {} \
         -- the first build can take minutes on two cores, later runs start at once",
            self.what,
            source.display()
        );
        if let Some(hint) = &self.hint {
            eprintln!("concord-testenv: {hint}");
        }
        let failed = |message: String| Error::BuildFailed {
            dir: source.into(),
            message,
        };
        let partial = target.with_extension("partial");
        // `-v` names each package as it is compiled: the progress lines show it.
        let mut command = Command::new("go");
        command.args(["build", "-v"]);
        if let Some(flags) = &self.ldflags {
            command.args(["-ldflags", flags]);
        }
        let mut child = command
            .arg("-o")
            .arg(&partial)
            .arg(".")
            .current_dir(source)
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod -buildvcs=false")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot run `go`: {e}")))?;
        let progress = Arc::new(Mutex::new(Progress::new(&self.what)));
        let reader = child.stderr.take().map(|stderr| {
            let progress = progress.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Ok(mut p) = progress.lock() {
                        p.record(line);
                    }
                }
            })
        });
        let started = Instant::now();
        let terminal = std::io::stderr().is_terminal();
        let mut last_line = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => return Err(failed(format!("waiting for `go build`: {e}"))),
            }
            std::thread::sleep(Duration::from_millis(250));
            let due = if terminal {
                last_line.elapsed() >= Duration::from_secs(1)
            } else {
                last_line.elapsed() >= PROGRESS_EVERY
            };
            if due {
                last_line = Instant::now();
                let line = progress
                    .lock()
                    .map(|p| p.line(started.elapsed()))
                    .unwrap_or_default();
                if terminal {
                    eprint!("\r\x1b[2K{line}");
                } else {
                    eprintln!("{line}");
                }
            }
        };
        if let Some(reader) = reader {
            let _ = reader.join();
        }
        if terminal {
            eprintln!();
        }
        if !status.success() {
            let log = progress.lock().map(|p| p.log.clone()).unwrap_or_default();
            return Err(failed(log));
        }
        eprintln!(
            "concord-testenv: built {} in {:.0?}",
            target.display(),
            started.elapsed()
        );
        fs::rename(&partial, target)
            .map_err(|e| Error::io(format!("moving the build to {}", target.display()), e))
    }
}

/// What `go build -v` has said so far.
struct Progress {
    what: String,
    packages: usize,
    current: String,
    /// Lines that are not package names: the errors of a failed build.
    log: String,
}

impl Progress {
    fn new(what: &str) -> Self {
        Progress {
            what: what.to_owned(),
            packages: 0,
            current: String::new(),
            log: String::new(),
        }
    }

    fn record(&mut self, line: String) {
        if let Some(module) = line.strip_prefix("go: downloading ") {
            self.current = format!("downloading {module}");
            return;
        }
        // A package path has no spaces; an error line has.
        if !line.is_empty() && !line.contains(' ') {
            self.packages += 1;
            self.current = line;
        } else {
            self.log.push_str(&line);
            self.log.push('\n');
        }
    }

    fn line(&self, elapsed: Duration) -> String {
        let secs = elapsed.as_secs();
        let current = if self.current.is_empty() {
            "downloading modules"
        } else {
            &self.current
        };
        format!(
            "concord-testenv: building {}: {}m{:02}s, {} packages compiled, now {current}",
            self.what,
            secs / 60,
            secs % 60,
            self.packages
        )
    }
}

/// FNV-1a over the module's build inputs: stable across Rust releases, unlike
/// `DefaultHasher`.
fn source_hash(dir: &Path) -> Result<u64, Error> {
    let entries =
        fs::read_dir(dir).map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name == "go.mod" || name == "go.sum" || name.ends_with(".go")
        })
        .collect();
    files.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for file in files {
        let bytes =
            fs::read(&file).map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
        let name = file
            .file_name()
            .map(|n| n.as_encoded_bytes().to_vec())
            .unwrap_or_default();
        hash = fnv(fnv(hash, &name), &bytes);
    }
    Ok(hash)
}

/// Continues an FNV-1a hash over `bytes`.
fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_names_the_package_being_compiled_and_keeps_errors() {
        let mut progress = Progress::new("the test control plane");
        assert!(
            progress
                .line(Duration::from_secs(5))
                .contains("downloading modules")
        );
        progress.record("go: downloading k8s.io/api v0.37.2".into());
        assert!(
            progress
                .line(Duration::ZERO)
                .contains("now downloading k8s.io/api v0.37.2")
        );
        progress.record("k8s.io/apiserver/pkg/server".into());
        progress.record("go.etcd.io/etcd/server/v3/embed".into());
        progress.record("./main.go:3:2: undefined: foo".into());
        let line = progress.line(Duration::from_secs(95));
        assert!(line.contains("1m35s"), "{line}");
        assert!(line.contains("2 packages compiled"), "{line}");
        assert!(
            line.contains("now go.etcd.io/etcd/server/v3/embed"),
            "{line}"
        );
        assert_eq!(progress.log, "./main.go:3:2: undefined: foo\n");
    }
}
