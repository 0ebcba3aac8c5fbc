//! `cargo run -p concord-layout` prints every pair of Rust source files of
//! the workspace that import each other, with the first path that makes each
//! direction, then a summary; it exits with 1 when there is such a pair.
//!
//! `cargo run -p concord-layout -- --edges FILE` prints what `FILE` (relative
//! to the workspace root) imports and which files import it.
//!
//! `--files` lists every file the check covers.
//!
//! `--root DIR` checks the workspace at `DIR` instead of this one.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use concord_layout::{Graph, import_graph};

/// How to call the program.
const USAGE: &str = "usage: concord-layout [--root DIR] [--edges FILE | --files]";

fn main() -> ExitCode {
    match run(std::env::args().skip(1)) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("concord-layout: {message}");
            ExitCode::from(2)
        }
    }
}

/// Parses the arguments and runs the check or prints one file's edges.
fn run(mut args: impl Iterator<Item = String>) -> Result<ExitCode, String> {
    let mut root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut edges_of = None;
    let mut list_files = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--root" => root = args.next().map(PathBuf::from).ok_or(USAGE)?,
            "--edges" => edges_of = Some(args.next().map(PathBuf::from).ok_or(USAGE)?),
            "--files" => list_files = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            _ => return Err(format!("unexpected argument `{arg}`\n{USAGE}")),
        }
    }
    let graph = import_graph(&root).map_err(|error| error.to_string())?;
    if list_files {
        graph
            .files()
            .for_each(|file| println!("{}", file.display()));
        return Ok(ExitCode::SUCCESS);
    }
    match edges_of {
        Some(file) => {
            print_edges(&graph, &file);
            Ok(ExitCode::SUCCESS)
        }
        None => Ok(print_pairs(&graph)),
    }
}

/// Prints every mutual pair and the summary; 1 when there is a pair.
fn print_pairs(graph: &Graph) -> ExitCode {
    let pairs = graph.mutual_pairs();
    for (a, b) in &pairs {
        println!("{} <-> {}", a.display(), b.display());
        for (from, to) in [(a, b), (b, a)] {
            let via = graph.via(from, to).unwrap_or_default();
            println!("    {} -> {}: {via}", from.display(), to.display());
        }
    }
    println!(
        "{} files, {} imports, {} pairs of files that import each other",
        graph.files().count(),
        graph.import_count(),
        pairs.len()
    );
    if pairs.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Prints what `file` imports and which files import it.
fn print_edges(graph: &Graph, file: &Path) {
    let file = graph
        .files()
        .find(|known| *known == file || file.ends_with(known))
        .map_or_else(|| file.to_path_buf(), Path::to_path_buf);
    if !graph.files().any(|known| known == file) {
        println!("{} is not in any crate's module tree", file.display());
        return;
    }
    let imports = graph.imports(&file);
    println!("{} imports {} files:", file.display(), imports.len());
    for (to, via) in imports {
        println!("    {}: {via}", to.display());
    }
    let importers = graph.importers(&file);
    println!(
        "{} is imported by {} files:",
        file.display(),
        importers.len()
    );
    for (from, via) in importers {
        println!("    {}: {via}", from.display());
    }
}
