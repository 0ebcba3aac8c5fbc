//! concord's integration tests. The tests are in `tests/`, one binary per
//! concern, each starting one real control plane (see `kube-concord-testenv`);
//! this library is empty and exists only because a package needs a target.
