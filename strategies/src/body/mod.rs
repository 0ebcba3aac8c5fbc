//! Building the request body each strategy sends: merge patches, guarded
//! JSON patches with their `test`s, whole objects, apply configurations
//! and their field managers, encoded as Go encodes JSON.

pub(crate) mod field_manager;
pub(crate) mod go_json;
pub(crate) mod guarded_patch;
pub(crate) mod merge_patch;
pub(crate) mod request;
