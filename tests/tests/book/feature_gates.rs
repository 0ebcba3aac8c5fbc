//! The output that "Feature gates and configuration" shows is the output
//! of the code: `--explain` on the page's Kueue sample, the errors of its
//! broken sample, the message of every configuration problem and of a
//! warning, each rendered here and compared with the file the page
//! includes from `book/src/feature-gates/`. `CONCORD_BLESS=1` rewrites
//! the files.
//!
//! `--explain` and the broken sample go through what the kueue-finalizer
//! example's `main` runs: its flags parsed by clap, its registry,
//! `ManagerBuilder::build_or_explain`, and an error printed as a
//! `main` returning `anyhow::Result` prints it. Paths are shown relative
//! to the workspace, as `cargo run` from there gives them.
//!
//! ```text
//! cargo test -p concord-tests --test book feature_gates::
//! CONCORD_BLESS=1 cargo test -p concord-tests --test book feature_gates::
//! ```

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, Result, ensure};
use clap::Parser;
use concord::featuregates::FeatureSpec;
use concord::{Manager, ManagerArgs, featuregates::FeatureRegistry, manager::Built};
use concord_featuregates::ConfigLoader;
use concord_tests::workspace;

/// The page's output files.
const PAGES: &str = "book/src/feature-gates";
const BLESS: &str = "CONCORD_BLESS=1 cargo test -p concord-tests --test book feature_gates::";

/// The flags of the kueue-finalizer example's manager.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
}

/// What `kueue-finalizer <args>` prints on stdout, or as its error.
async fn kueue_finalizer(args: &[&str]) -> Result<String> {
    let cli = Cli::try_parse_from(std::iter::once("kueue-finalizer").chain(args.iter().copied()))?;
    let (registry, _) = concord_examples::kueue::registry()?;
    let built = Manager::builder("kueue-finalizer")
        .with_args(cli.manager)
        .with_registry(registry)
        .build_or_explain()
        .await;
    let text = match built {
        Ok(Built::Explained(text)) => text,
        Ok(Built::Manager(_)) => anyhow::bail!("{args:?} built a manager"),
        // What `fn main() -> anyhow::Result<()>` prints, less the stack
        // backtrace it adds when `RUST_BACKTRACE` or `RUST_LIB_BACKTRACE`
        // is set (as in many shells and CI runners).
        Err(error) => {
            let printed = format!("Error: {:?}", anyhow::Error::from(error));
            let message = printed
                .split_once("\n\nStack backtrace:")
                .map_or(printed.as_str(), |(message, _)| message);
            format!("{message}\n")
        }
    };
    Ok(relative(&text))
}

/// `text` with the workspace's path left out.
fn relative(text: &str) -> String {
    text.replace(&format!("{}/", workspace().display()), "")
}

/// The sources a user's shell could add: this test's output must not
/// depend on them.
fn environment_is_clean() -> Result<()> {
    let set: Vec<String> = std::env::vars()
        .map(|(k, _)| k)
        .filter(|k| k == "CONCORD_FEATURE_GATES" || k.starts_with("CONCORD_GATE_"))
        .collect();
    ensure!(
        set.is_empty(),
        "unset {set:?}: the page shows the output without them"
    );
    Ok(())
}

/// A registry with a GA (locked) gate beside the example's, for the
/// messages no other gate can show.
fn registry_with_ga_gate() -> Result<FeatureRegistry> {
    let (mut registry, _) = concord_examples::kueue::registry()?;
    concord::featuregates::register_framework_gates(&mut registry)?;
    registry.register(FeatureSpec::ga("LockedOn"))?;
    Ok(registry)
}

/// One configuration mistake: what it is, the source it is in, and how
/// the page shows that source.
struct Case {
    problem: &'static str,
    source: Source,
}

enum Source {
    /// `c.yaml` holding this text.
    Yaml(&'static [u8]),
    /// A file that does not exist.
    Missing(&'static str),
    /// `--feature-gates=<value>`.
    Flag(&'static str),
    /// An environment variable.
    Env(&'static str, &'static str),
}

const CASES: &[Case] = &[
    Case {
        problem: "unreadable file",
        source: Source::Missing("/etc/concord/missing.yaml"),
    },
    Case {
        problem: "not UTF-8",
        source: Source::Yaml(b"featureGates: {A: \xff}"),
    },
    Case {
        problem: "malformed YAML",
        source: Source::Yaml(b"strategies: [\n"),
    },
    Case {
        problem: "unknown key",
        source: Source::Yaml(b"colour: blue"),
    },
    Case {
        problem: "wrong type",
        source: Source::Yaml(b"strategies: {default: 3}"),
    },
    Case {
        problem: "unknown gate",
        source: Source::Flag("Nope=true"),
    },
    Case {
        problem: "locked gate",
        source: Source::Yaml(b"featureGates: {LockedOn: false}"),
    },
    Case {
        problem: "not a boolean",
        source: Source::Env("CONCORD_GATE_REMOVE_FINALIZERS_WITH_STRICT_PATCH", "off"),
    },
    Case {
        problem: "missing value",
        source: Source::Env("CONCORD_FEATURE_GATES", "AllAlpha"),
    },
    Case {
        problem: "unknown strategy",
        source: Source::Yaml(b"strategies: {default: optimistic}"),
    },
    Case {
        problem: "unknown resource form",
        source: Source::Yaml(b"strategies: {resources: {Pod: {default: strict}}}"),
    },
    Case {
        problem: "unknown operation",
        source: Source::Yaml(b"strategies: {operations: {labels: strict}}"),
    },
    Case {
        problem: "strategy cannot serve operation",
        source: Source::Yaml(b"strategies: {operations: {other: apply}}"),
    },
    Case {
        problem: "conflict policy not allowed",
        source: Source::Yaml(b"strategies: {default: {strategy: lax, onConflict: retry}}"),
    },
    Case {
        problem: "unknown conflict policy",
        source: Source::Yaml(b"strategies: {default: {strategy: strict, onConflict: shrug}}"),
    },
    Case {
        problem: "bad retry setting",
        source: Source::Yaml(b"strategies: {default: {strategy: strict, retry: {steps: 0}}}"),
    },
    Case {
        problem: "inconsistent rule",
        source: Source::Yaml(b"strategies: {default: {gate: StrictWritesByDefault}}"),
    },
];

/// `text` as one inline code span of a table cell.
fn code(text: &str) -> String {
    format!("`` {} ``", text.replace('|', "\\|"))
}

/// The page's table: each mistake, its source and the one message it gives.
fn problems_table() -> Result<String> {
    let mut table = String::from("| problem | source | message |\n| --- | --- | --- |\n");
    for case in CASES {
        let loader = ConfigLoader::new();
        let (loader, source) = match &case.source {
            Source::Yaml(text) => (
                loader.with_yaml("c.yaml", *text),
                // Bytes as Rust writes them: `\n` for a newline, `\xff` for a
                // byte that is not UTF-8.
                format!("`c.yaml`: {}", code(&text.escape_ascii().to_string())),
            ),
            Source::Missing(path) => (loader.with_file(path), format!("`{path}`, not there")),
            Source::Flag(value) => (
                loader.with_feature_gates(*value),
                format!("`--feature-gates={value}`"),
            ),
            Source::Env(var, value) => (
                loader.with_env_vars([(*var, *value)]),
                format!("`{var}={value}`"),
            ),
        };
        let problems = match loader.load(registry_with_ga_gate()?) {
            Ok(_) => Vec::new(),
            Err(error) => error.problems.iter().map(ToString::to_string).collect(),
        };
        ensure!(
            problems.len() == 1,
            "{}: expected one problem, got {problems:?}",
            case.problem
        );
        writeln!(
            table,
            "| {} | {source} | {} |",
            case.problem,
            code(&problems[0])
        )?;
    }
    Ok(table)
}

/// The warning of a GA gate set on the command line.
fn ga_warning() -> Result<String> {
    let config = ConfigLoader::new()
        .with_feature_gates("LockedOn=true")
        .load(registry_with_ga_gate()?)?;
    let warnings: Vec<String> = config.warnings().iter().map(ToString::to_string).collect();
    ensure!(warnings.len() == 1, "{warnings:?}");
    Ok(format!("{}\n", warnings[0]))
}

/// Each output file of the page and what the code prints for it.
async fn outputs() -> Result<Vec<(PathBuf, String)>> {
    let pages = workspace().join(PAGES);
    let kueue = pages.join("kueue.yaml");
    let broken = pages.join("errors/broken.yaml");
    let (kueue, broken) = (kueue.to_string_lossy(), broken.to_string_lossy());
    Ok(vec![
        (
            pages.join("explain.txt"),
            kueue_finalizer(&[
                "--config",
                &kueue,
                "--feature-gates=RemoveFinalizersWithStrictPatch=false",
                "--explain",
            ])
            .await?,
        ),
        (
            pages.join("errors/broken.txt"),
            kueue_finalizer(&[
                "--config",
                &broken,
                "--feature-gates=RemoveFinalizersWithStrictPatch=maybe",
                "--explain",
            ])
            .await?,
        ),
        (pages.join("errors/problems.md"), problems_table()?),
        (pages.join("errors/warning.txt"), ga_warning()?),
    ])
}

#[tokio::test]
async fn the_feature_gates_page_shows_what_the_code_prints() -> Result<()> {
    environment_is_clean()?;
    let bless = std::env::var_os("CONCORD_BLESS").is_some();
    let mut stale = Vec::new();
    for (path, text) in outputs().await? {
        if bless {
            std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
        }
        if std::fs::read_to_string(&path).unwrap_or_default() != text {
            stale.push(relative(&path.display().to_string()));
        }
    }
    ensure!(stale.is_empty(), "stale {stale:?}: run {BLESS}");
    Ok(())
}

#[tokio::test]
async fn explain_refuses_a_configuration_it_cannot_load() -> Result<()> {
    environment_is_clean()?;
    let broken = workspace().join(PAGES).join("errors/broken.yaml");
    let text = kueue_finalizer(&["--config", &broken.to_string_lossy(), "--explain"]).await?;
    assert!(
        text.starts_with("Error: invalid concord configuration"),
        "--explain explained a broken configuration: {text}"
    );
    assert!(!text.contains("strategy table:"), "{text}");
    Ok(())
}
