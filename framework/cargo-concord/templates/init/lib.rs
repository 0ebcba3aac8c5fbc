//! Helpers of the {{name}} operator that its tests share: an embedded
//! control plane for `--dev`, and the objects of `config/samples`.

pub mod dev;
