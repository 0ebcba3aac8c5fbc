//! Writes the deploy manifests of the example operators: for each, the
//! kustomize base `examples/deploy/<example>/` and the Helm chart
//! `examples/deploy/<example>/chart/<example>/`, from the one model in
//! `examples/src/deploy.rs`. Files of those directories that the model no
//! longer has are removed.
//!
//! ```text
//! cargo run -p concord-examples --example deploy-manifests
//! ```
//!
//! Needs nothing but the checkout; `tests/tests/examples/manifests.rs` fails
//! when the committed files differ from what this writes.

use concord_examples::deploy;

fn main() -> anyhow::Result<()> {
    for example in deploy::EXAMPLES {
        let dir = deploy::dir(example);
        let files = deploy::bundle(example)?.files()?;
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        for (file, text) in &files {
            let path = dir.join(file);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, text)?;
        }
        println!("{}: {} files", dir.display(), files.len());
    }
    Ok(())
}
