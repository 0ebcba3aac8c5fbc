//! Carrying out a parsed command line ([`run`]).

use std::path::PathBuf;

use crate::cli::{Cli, Command, Create};
use crate::{Error, create_api, generate, init};

/// Runs a parsed command line, printing what it did.
///
/// # Errors
///
/// The command's [`Error`].
pub fn run(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Init(args) => {
            let made = init::init(&args)?;
            println!(
                "created {} ({} files), depending on {}. Next:\n  cd {}\n  cargo concord create api --group ships --version v1 --kind Frigate\n  cargo run -- --dev\n  cargo test",
                made.dir.display(),
                made.files.len(),
                made.source.describe(),
                made.dir.display()
            );
        }
        Command::Create(Create::Api(args)) => {
            let changed = create_api::create_api(&args)?;
            report("create api", &changed);
        }
        Command::Generate(args) => {
            let changed = generate::generate(&args)?;
            report("generate", &changed);
        }
        Command::Explain(args) => generate::explain(&args)?,
    }
    Ok(())
}

fn report(command: &str, changed: &[PathBuf]) {
    if changed.is_empty() {
        println!("{command}: nothing to change");
    }
    for path in changed {
        println!("{command}: wrote {}", path.display());
    }
}
