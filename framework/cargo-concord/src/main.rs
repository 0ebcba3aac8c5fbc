//! The `cargo-concord` executable: `cargo concord <command>` once
//! installed, `cargo run -p cargo-concord -- <command>` in the repository.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cargo_concord::Cli::parse_args(std::env::args_os());
    match cargo_concord::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::FAILURE
        }
    }
}
