//! The help of a scaffolded operator opens with its own description, not
//! with the documentation of the `ManagerArgs` it flattens: the `Cli` below
//! carries the attributes `templates/init/main.rs` gives the project's.
#![allow(clippy::unwrap_used)]

use clap::{CommandFactory, Parser};

#[derive(Parser)]
#[command(name = "demo", version, about = "The demo Kubernetes operator", long_about = None)]
struct Cli {
    #[command(flatten)]
    manager: concord::ManagerArgs,
}

#[test]
fn an_operators_help_opens_with_its_own_description() {
    let help = Cli::command().render_long_help().to_string();
    assert!(help.starts_with("The demo Kubernetes operator\n"), "{help}");
    let template = include_str!("../templates/init/main.rs");
    assert!(
        template.contains(
            "#[command(version, about = \"The {{name}} Kubernetes operator\", long_about = None)]"
        ),
        "the template's Cli has these attributes"
    );
}
