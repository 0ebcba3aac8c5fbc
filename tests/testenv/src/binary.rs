use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

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
        let source = Path::new(SOURCE_DIR);
        let key = source_hash(source)?;
        let cache = cache_dir();
        fs::create_dir_all(&cache)
            .map_err(|e| Error::io(format!("creating cache directory {}", cache.display()), e))?;
        let path = cache.join(format!("kube-controlplane-{key:016x}"));
        if path.is_file() {
            return Ok(ControlPlaneBinary { path });
        }
        let lock_path = cache.join("build.lock");
        let lock = File::create(&lock_path)
            .map_err(|e| Error::io(format!("creating {}", lock_path.display()), e))?;
        lock.lock()
            .map_err(|e| Error::io(format!("locking {}", lock_path.display()), e))?;
        if !path.is_file() {
            build(source, &path)?;
        }
        Ok(ControlPlaneBinary { path })
    }

    /// The path of the executable.
    pub fn path(&self) -> &Path {
        &self.path
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

fn build(source: &Path, target: &Path) -> Result<(), Error> {
    eprintln!(
        "concord-testenv: building kube-controlplane from {} (the first build takes several minutes)",
        source.display()
    );
    let partial = target.with_extension("partial");
    let output = Command::new("go")
        .args(["build", "-ldflags", VERSION_LDFLAGS, "-o"])
        .arg(&partial)
        .arg(".")
        .current_dir(source)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod -buildvcs=false")
        .output()
        .map_err(|e| Error::BuildFailed {
            dir: source.into(),
            message: format!("cannot run `go`: {e}"),
        })?;
    if !output.status.success() {
        return Err(Error::BuildFailed {
            dir: source.into(),
            message: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    fs::rename(&partial, target)
        .map_err(|e| Error::io(format!("moving the build to {}", target.display()), e))
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
        for byte in name.iter().chain(&bytes) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    Ok(hash)
}
