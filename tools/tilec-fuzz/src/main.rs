//! `tilec-fuzz`: a fuzzer for tilec on stable Rust (docs/fuzzing.md).
//!
//! Grammar-aware generation (`gen/`) and byte mutation (`mutate.rs`) make
//! inputs for four targets (`targets.rs`): the parser and verifier, the
//! pipeline parser, the interpreter, and compiled code against the
//! interpreter. Inputs run in worker processes (`worker.rs`), so an abort,
//! a stack overflow or a hang costs one input, not the run. A seed fixes
//! the inputs. `cargo test -p tilec-fuzz` replays the corpus.

mod choices;
mod corpus;
mod fuzz;
mod generate;
mod inputs;
mod minimize;
mod mutate;
mod replay;
mod targets;
mod worker;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use targets::{Outcome, Target};

#[derive(Parser, Debug)]
#[command(
    name = "tilec-fuzz",
    version,
    about = "Fuzz tilec: parser, verifier, pass pipelines, interpreter, and compiled code against the interpreter"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// The seed: the same seed generates the same inputs.
    #[arg(long, default_value_t = 1, global = true)]
    seed: u64,

    /// Total time, shared by the targets (default 60 unless --iterations).
    #[arg(long)]
    seconds: Option<f64>,

    /// Inputs per target instead of a time: N for every target of
    /// --target, or a list `parse=N,pipeline=N,interp=N,compile=N`.
    #[arg(long, conflicts_with = "seconds")]
    iterations: Option<String>,

    /// parse, pipeline, interp, compile, or all.
    #[arg(long, default_value = "all", global = true)]
    target: String,

    /// Seconds an input may take before it counts as a hang (default: 10,
    /// and 30 for compile, whose debug-build search and LLVM take seconds
    /// on a loaded machine).
    #[arg(long, global = true)]
    timeout: Option<f64>,

    /// Seconds to spend shrinking each new finding (0: none).
    #[arg(long, default_value_t = 20)]
    minimize_seconds: u64,

    /// Save new findings in the corpus (`<target>/open/` and `open.md`)
    /// instead of the findings folder.
    #[arg(long)]
    save_to_corpus: bool,

    /// Where new findings go without --save-to-corpus.
    #[arg(long, value_name = "DIR")]
    save_dir: Option<PathBuf>,

    /// The corpus folder (default: the crate's `corpus/`).
    #[arg(long, value_name = "DIR", global = true)]
    corpus: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run inputs from stdin (the driver starts these itself).
    #[command(hide = true)]
    Worker,
    /// Run files through --target in this process, panics printed in full.
    Replay { files: Vec<PathBuf> },
    /// Replay the corpus in workers, as `cargo test -p tilec-fuzz` does.
    ReplayCorpus,
    /// Shrink a failing input while it fails the same way.
    Minimize {
        file: PathBuf,
        /// Where to write the result (default: FILE.min).
        #[arg(short = 'o')]
        output: Option<PathBuf>,
        /// Time to spend.
        #[arg(long, default_value_t = 120)]
        seconds: u64,
    },
    /// Print the inputs a seed generates for --target.
    Print {
        #[arg(long, default_value_t = 0)]
        index: u64,
        #[arg(long, default_value_t = 1)]
        count: u64,
    },
}

fn parse_targets(s: &str) -> Result<Vec<Target>, String> {
    if s == "all" {
        return Ok(Target::ALL.to_vec());
    }
    s.split(',')
        .map(|t| {
            Target::from_name(t.trim()).ok_or_else(|| {
                format!("unknown target `{t}`: expected parse, pipeline, interp, compile or all")
            })
        })
        .collect()
}

/// `N` (for each of `targets`) or `target=N,...`.
fn parse_iterations(
    s: &str,
    targets: &[Target],
) -> Result<std::collections::BTreeMap<Target, u64>, String> {
    if let Ok(n) = s.trim().parse::<u64>() {
        return Ok(targets.iter().map(|&t| (t, n)).collect());
    }
    s.split(',')
        .map(|part| {
            let (t, n) = part.split_once('=').ok_or_else(|| {
                format!("--iterations: expected N or target=N,..., found `{part}`")
            })?;
            let t = Target::from_name(t.trim())
                .ok_or_else(|| format!("--iterations: unknown target `{t}`"))?;
            let n = n
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("--iterations: `{n}` is not a count"))?;
            Ok((t, n))
        })
        .collect()
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if matches!(cli.command, Some(Command::Worker)) {
        worker::worker_main();
        return ExitCode::SUCCESS;
    }
    let targets = match parse_targets(&cli.target) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("tilec-fuzz: {e}");
            return ExitCode::FAILURE;
        }
    };
    let timeout = match cli.timeout {
        Some(t) if t.is_finite() && t > 0.0 => Some(Duration::from_secs_f64(t)),
        Some(_) => {
            eprintln!("tilec-fuzz: --timeout must be a positive number of seconds");
            return ExitCode::FAILURE;
        }
        None => None,
    };
    let corpus_dir = cli.corpus.clone().unwrap_or_else(corpus::default_dir);
    match &cli.command {
        Some(Command::Worker) => unreachable!("handled above"),
        Some(Command::Replay { files }) => replay_files(&targets, files),
        Some(Command::ReplayCorpus) => {
            let r = replay::replay_corpus(&corpus_dir, timeout);
            for l in &r.lines {
                println!("{l}");
            }
            for f in &r.failures {
                println!("FAILED    {f}");
            }
            println!(
                "corpus: {} passed or open as listed, {} failed",
                r.lines.len(),
                r.failures.len()
            );
            if r.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Some(Command::Minimize {
            file,
            output,
            seconds,
        }) => {
            let [target] = targets.as_slice() else {
                eprintln!("tilec-fuzz: minimize needs one --target");
                return ExitCode::FAILURE;
            };
            let Ok(input) = std::fs::read(file) else {
                eprintln!("tilec-fuzz: cannot read `{}`", file.display());
                return ExitCode::FAILURE;
            };
            let mut sup = worker::Supervisor::new(
                worker::WorkerCommand::this_executable(),
                timeout.unwrap_or_else(|| target.default_timeout()),
            );
            let Outcome::Finding(kind, msg) = sup.run(*target, &input) else {
                eprintln!(
                    "tilec-fuzz: `{}` does not fail on {}",
                    file.display(),
                    target.name()
                );
                return ExitCode::FAILURE;
            };
            let sig = corpus::signature(*target, kind, &msg);
            let (small, tries) = minimize::minimize(
                &mut sup,
                *target,
                &input,
                &sig,
                std::time::Instant::now() + Duration::from_secs(*seconds),
            );
            let out = output
                .clone()
                .unwrap_or_else(|| file.with_extension(format!("{}.min", target.extension())));
            if let Err(e) = std::fs::write(&out, &small) {
                eprintln!("tilec-fuzz: cannot write `{}`: {e}", out.display());
                return ExitCode::FAILURE;
            }
            println!(
                "{sig}\n{} -> {} bytes in {tries} tries: {}",
                input.len(),
                small.len(),
                out.display()
            );
            ExitCode::SUCCESS
        }
        Some(Command::Print { index, count }) => {
            for &t in &targets {
                let inputs = inputs::Inputs::new(t, cli.seed);
                for i in *index..index + count {
                    println!("// ----- {} seed {} iteration {i}", t.name(), cli.seed);
                    println!("{}", String::from_utf8_lossy(&inputs.input(i)));
                }
            }
            ExitCode::SUCCESS
        }
        None => {
            let seconds = if cli.iterations.is_none() {
                Some(cli.seconds.unwrap_or(60.0))
            } else {
                None
            };
            let iterations = match cli
                .iterations
                .as_deref()
                .map(|s| parse_iterations(s, &targets))
                .transpose()
            {
                Ok(i) => i,
                Err(e) => {
                    eprintln!("tilec-fuzz: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let targets = match &iterations {
                Some(m) => targets.into_iter().filter(|t| m.contains_key(t)).collect(),
                None => targets,
            };
            let opts = fuzz::Options {
                seed: cli.seed,
                seconds,
                iterations,
                targets,
                timeout,
                minimize_seconds: cli.minimize_seconds,
                save_dir: if cli.save_to_corpus {
                    corpus_dir.clone()
                } else {
                    cli.save_dir
                        .clone()
                        .unwrap_or_else(|| corpus::repo_root().join("target/tilec-fuzz/findings"))
                },
                to_corpus: cli.save_to_corpus,
                corpus: corpus_dir,
            };
            let stats = fuzz::run(&opts);
            print!("{}", fuzz::report(&opts, &stats));
            if stats.iter().any(|s| s.new_findings() > 0) {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}

/// Runs files in this process with the default panic hook, so a panic
/// prints its message (and backtrace, with RUST_BACKTRACE=1).
fn replay_files(targets: &[Target], files: &[PathBuf]) -> ExitCode {
    let [target] = targets else {
        eprintln!("tilec-fuzz: replay needs one --target");
        return ExitCode::FAILURE;
    };
    let target = *target;
    let scratch = std::env::temp_dir().join(format!("tilec-fuzz-replay-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&scratch);
    let mut failed = false;
    for file in files {
        let Ok(input) = std::fs::read(file) else {
            eprintln!("tilec-fuzz: cannot read `{}`", file.display());
            failed = true;
            continue;
        };
        let dir = scratch.clone();
        let run = std::thread::Builder::new()
            .stack_size(worker::STACK_BYTES)
            .spawn(move || targets::run(target, &input, &dir))
            .expect("a thread");
        match run.join() {
            Ok(Outcome::Pass) => println!("{}: pass", file.display()),
            Ok(Outcome::Reject(why)) => println!("{}: rejected ({why})", file.display()),
            Ok(Outcome::Finding(kind, msg)) => {
                println!("{}: {}: {msg}", file.display(), kind.name());
                failed = true;
            }
            Err(_) => {
                println!("{}: panic (above)", file.display());
                failed = true;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests;
