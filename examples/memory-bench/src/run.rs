//! The whole benchmark: one control plane, one namespace of objects, the
//! two operators in interleaved rounds, then the burst.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::args::Args;
use crate::burst;
use crate::choice::AllocatorChoice;
use crate::example::Example;
use crate::hold::{self, HoldPrograms};
use crate::measure::{self, RunFigures};
use crate::objects::{self, Kind};
use crate::operator::CacheMode;
use crate::programs::Programs;
use crate::report::Report;

/// The Go module of the controller-runtime operator.
const PEER_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peer");

/// The controller-runtime operator's executable, built from `peer/` on
/// first use and cached like the control plane.
///
/// # Errors
///
/// When `go` is missing or the build fails.
pub fn peer() -> anyhow::Result<PathBuf> {
    concord_testenv::GoProgram::new(
        "memory-bench-peer",
        PEER_SOURCE,
        "the memory benchmark's controller-runtime operator",
    )
    .ensure()
    .context("building the controller-runtime operator")
}

/// Runs the benchmark `args` describes and returns its report.
///
/// # Errors
///
/// When the control plane, an operator or a request fails, or a phase does
/// not complete in time.
pub async fn run(args: &Args) -> anyhow::Result<Report> {
    if args.cache == CacheMode::View && args.kind != Kind::Pods {
        anyhow::bail!("--cache view: there is a view of Pods only (use --kind pods)");
    }
    if let Some(example) = args.example {
        if args.kind != Kind::Pods {
            anyhow::bail!(
                "--example {}: the example holds Pods (use --kind pods)",
                example.as_str()
            );
        }
        if !matches!(args.cache, CacheMode::Full | CacheMode::View) {
            anyhow::bail!(
                "--example {} --cache {}: the example caches what its code says (its view) and the controller-runtime operator its default (whole objects); leave --cache out",
                example.as_str(),
                args.cache.as_str()
            );
        }
    }
    let connection = concord_examples::connect(args.kubeconfig.clone(), &args.consent).await?;
    let kubeconfig = connection.kubeconfig.clone();
    let client = connection.client.clone();
    let programs = Programs {
        concord: match &args.operator {
            Some(path) => path.clone(),
            None => std::env::current_exe().context("this executable's path")?,
        },
        peer: tokio::task::spawn_blocking(peer).await??,
        kubeconfig,
        layout: args.layout,
    };
    objects::install(&client, args.kind).await?;

    let mut report = Report::new(args);
    if args.rounds > 0 {
        let namespace =
            concord_race_bench::create_namespace(&client, "memory", args.kind.as_str()).await?;
        let api = objects::api(&client, &namespace, args.kind);
        let extra = args.example.map(Example::metadata);
        objects::create(&api, args.kind, args.pods, extra.as_ref()).await?;
        let result = match args.example {
            Some(example) => {
                let held = HoldPrograms {
                    example: hold::example_path(example, args.operator.as_deref())?,
                    peer: programs.peer.clone(),
                    kubeconfig: programs.kubeconfig.clone(),
                };
                let result = hold::rounds(args, example, &held, &namespace).await;
                hold::release(&api, args.pods).await?;
                result.map(|held| report.hold = Some(held))
            }
            None => rounds(args, &programs, &namespace, &api, &mut report.runs).await,
        };
        cleanup(&client, &namespace, args.pods).await?;
        result?;
    }
    if args.burst {
        let namespace = concord_race_bench::create_namespace(&client, "memory", "burst").await?;
        let result = burst::run(args, &programs, &client, &namespace).await;
        cleanup(&client, &namespace, args.burst_pods).await?;
        report.burst = Some(result?);
    }
    report.summarise();
    if let Some(path) = &args.json {
        write_file(path, &serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(path) = &args.table {
        write_file(path, crate::table(&report).trim_start())?;
    }
    Ok(report)
}

/// The rounds: the concord operator once per `--allocators` choice, then
/// controller-runtime (unless `--no-peer`), `args.rounds` times, after
/// `args.warmup` rounds that are not reported and run the first choice
/// only.
async fn rounds(
    args: &Args,
    programs: &Programs,
    namespace: &str,
    api: &kube::Api<kube::api::DynamicObject>,
    runs: &mut Vec<RunFigures>,
) -> anyhow::Result<()> {
    let peer_args = programs.peer_args(namespace, args);
    for index in 0..args.warmup + args.rounds {
        let round = index.checked_sub(args.warmup);
        let choices = match round {
            Some(_) => args.allocators.as_slice(),
            None => &args.allocators[..1.min(args.allocators.len())],
        };
        let mut operators: Vec<(&'static str, &Path, Vec<String>, Option<AllocatorChoice>)> =
            choices
                .iter()
                .map(|&choice| {
                    let argv = programs.concord_args(
                        namespace,
                        args.kind,
                        args.cache,
                        args.concurrency,
                        0,
                        choice,
                    );
                    ("concord", programs.concord.as_path(), argv, Some(choice))
                })
                .collect();
        if !args.no_peer {
            operators.push((
                "controller-runtime",
                programs.peer.as_path(),
                peer_args.clone(),
                None,
            ));
        }
        for (who, program, argv, choice) in operators {
            let name = choice.map_or(who, AllocatorChoice::as_str);
            let (token, what) = match round {
                Some(r) => (format!("{who}-{name}-{r}"), format!("round {r}")),
                None => (format!("{who}-{name}-w{index}"), format!("warm-up {index}")),
            };
            let env = choice.map(AllocatorChoice::env);
            let env: &[(&str, &str)] = env.as_deref().unwrap_or_default();
            let figures = measure::round(
                (who, program, &argv, env),
                api,
                args.pods,
                index,
                &token,
                args.settle(),
            )
            .await
            .with_context(|| format!("{what}, the {who} operator ({name})"))?;
            let figures = RunFigures {
                allocator: choice.map_or("go", AllocatorChoice::as_str),
                ..figures
            };
            match round {
                Some(r) => {
                    let figures = RunFigures {
                        round: r,
                        ..figures
                    };
                    println!("{}", crate::report::run_line(&figures));
                    runs.push(figures);
                }
                None => println!(
                    "{what} (not reported): {}",
                    crate::report::run_line(&figures)
                ),
            }
        }
    }
    Ok(())
}

/// Deletes `namespace` and waits until it is gone.
async fn cleanup(client: &kube::Client, namespace: &str, objects: usize) -> anyhow::Result<()> {
    let objects = u32::try_from(objects).unwrap_or(u32::MAX);
    concord_race_bench::delete_namespace(client, namespace, objects).await
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
