//! A fuzzing run: each target in turn for its share of the time (or a
//! number of iterations), inputs from `Inputs`, run by a `Supervisor`;
//! findings grouped by signature, the first input of each new one
//! minimised and saved; a summary at the end.

use crate::corpus::{self, signature};
use crate::inputs::Inputs;
use crate::minimize::minimize;
use crate::targets::{Kind, Outcome, Target};
use crate::worker::{Supervisor, WorkerCommand};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct Options {
    pub seed: u64,
    /// Total time over all targets (shared by weight), or
    pub seconds: Option<f64>,
    /// a number of iterations per target (a target not listed runs none).
    pub iterations: Option<BTreeMap<Target, u64>>,
    pub targets: Vec<Target>,
    /// The deadline of an input (else each target's default).
    pub timeout: Option<Duration>,
    /// Time to spend shrinking each new finding (0: none).
    pub minimize_seconds: u64,
    /// Where findings go: a plain folder, or the corpus (`to_corpus`).
    pub save_dir: PathBuf,
    pub to_corpus: bool,
    /// The corpus whose `open.md` lists the known findings.
    pub corpus: PathBuf,
}

#[derive(Debug)]
pub struct Found {
    pub signature: String,
    pub message: String,
    pub count: u64,
    /// Listed in the corpus' `open.md` already.
    pub known: bool,
    pub first_iteration: u64,
    pub saved: Option<PathBuf>,
    pub input_len: usize,
    pub minimized_len: usize,
}

#[derive(Debug)]
pub struct Stats {
    pub target: Target,
    pub iterations: u64,
    pub passed: u64,
    pub rejected: BTreeMap<String, u64>,
    /// The first iteration of each rejection reason (to look at with `print`).
    pub first_rejected: BTreeMap<String, u64>,
    pub findings: Vec<Found>,
    pub elapsed: Duration,
    /// Time spent running inputs (without minimisation): the rate's base.
    pub fuzzing: Duration,
    pub workers: usize,
    pub seed_files: usize,
}

impl Stats {
    pub fn new_findings(&self) -> usize {
        self.findings.iter().filter(|f| !f.known).count()
    }
}

/// A target's share of the time: compiling and interpreting cost more per input.
fn weight(t: Target) -> f64 {
    match t {
        Target::Parse | Target::Pipeline => 2.0,
        _ => 3.0,
    }
}

fn recycle_after(t: Target) -> usize {
    match t {
        Target::Compile => 100,
        Target::Interp => 1000,
        _ => 5000,
    }
}

pub fn run(opts: &Options) -> Vec<Stats> {
    crate::worker::install_quiet_panic_hook();
    let known: HashSet<String> = corpus::open_entries(&opts.corpus)
        .into_iter()
        .map(|e| e.signature)
        .collect();
    let total_weight: f64 = opts.targets.iter().map(|&t| weight(t)).sum();
    let mut all = Vec::new();
    for &target in &opts.targets {
        let budget = opts
            .seconds
            .map(|s| Duration::from_secs_f64(s * weight(target) / total_weight));
        all.push(run_target(opts, target, budget, &known));
    }
    all
}

fn run_target(
    opts: &Options,
    target: Target,
    budget: Option<Duration>,
    known: &HashSet<String>,
) -> Stats {
    let inputs = Inputs::new(target, opts.seed);
    let mut sup = Supervisor::new(
        WorkerCommand::this_executable(),
        opts.timeout.unwrap_or_else(|| target.default_timeout()),
    );
    sup.recycle_after = recycle_after(target);
    let start = Instant::now();
    let mut stats = Stats {
        target,
        iterations: 0,
        passed: 0,
        rejected: BTreeMap::new(),
        first_rejected: BTreeMap::new(),
        findings: Vec::new(),
        elapsed: Duration::ZERO,
        fuzzing: Duration::ZERO,
        workers: 0,
        seed_files: inputs.seed_files(),
    };
    let mut fuzzing_time = Duration::ZERO;
    let mut index = 0u64;
    loop {
        if opts
            .iterations
            .as_ref()
            .is_some_and(|m| index >= m.get(&target).copied().unwrap_or(0))
            || budget.is_some_and(|b| fuzzing_time >= b)
        {
            break;
        }
        let t0 = Instant::now();
        // A bug of the generator's costs its input, not the run.
        let Ok(input) = std::panic::catch_unwind(|| inputs.input(index)) else {
            let why = format!(
                "tilec-fuzz's generator panicked (its own bug): {}",
                crate::worker::take_panic_message()
            );
            *stats.rejected.entry(why).or_insert(0) += 1;
            stats.iterations += 1;
            index += 1;
            continue;
        };
        let outcome = sup.run(target, &input);
        fuzzing_time += t0.elapsed();
        stats.iterations += 1;
        match outcome {
            Outcome::Pass => stats.passed += 1,
            Outcome::Reject(why) if why.starts_with(crate::worker::CANNOT_START) => {
                // Nothing will run: say so once and stop this target.
                eprintln!(
                    "tilec-fuzz: [{}] {why}; stopping this target",
                    target.name()
                );
                *stats.rejected.entry(why).or_insert(0) += 1;
                break;
            }
            Outcome::Reject(why) => {
                stats.first_rejected.entry(why.clone()).or_insert(index);
                *stats.rejected.entry(why).or_insert(0) += 1;
            }
            Outcome::Finding(kind, message) => {
                let sig = signature(target, kind, &message);
                if let Some(f) = stats.findings.iter_mut().find(|f| f.signature == sig) {
                    f.count += 1;
                } else {
                    let is_known = known.contains(&sig);
                    let mut found = Found {
                        signature: sig.clone(),
                        message: message.clone(),
                        count: 1,
                        known: is_known,
                        first_iteration: index,
                        saved: None,
                        input_len: input.len(),
                        minimized_len: input.len(),
                    };
                    eprintln!(
                        "tilec-fuzz: [{}] {} at iteration {index}{}: {}",
                        target.name(),
                        kind.name(),
                        if is_known { " (known)" } else { "" },
                        message.lines().next().unwrap_or("")
                    );
                    if !is_known {
                        let mut small = input.clone();
                        if opts.minimize_seconds > 0 && kind != Kind::Hang {
                            let (m, tries) = minimize(
                                &mut sup,
                                target,
                                &input,
                                &sig,
                                Instant::now() + Duration::from_secs(opts.minimize_seconds),
                            );
                            eprintln!(
                                "tilec-fuzz:   minimised from {} to {} bytes in {tries} tries",
                                input.len(),
                                m.len()
                            );
                            small = m;
                        }
                        found.minimized_len = small.len();
                        let origin = format!("seed {}, iteration {index}", opts.seed);
                        match corpus::save_finding(
                            &opts.save_dir,
                            opts.to_corpus,
                            target,
                            kind,
                            &small,
                            &sig,
                            &message,
                            &origin,
                        ) {
                            Ok(p) => {
                                eprintln!("tilec-fuzz:   saved as {}", p.display());
                                found.saved = Some(p);
                            }
                            Err(e) => eprintln!("tilec-fuzz:   cannot save the input: {e}"),
                        }
                    }
                    stats.findings.push(found);
                }
            }
        }
        index += 1;
    }
    sup.stop();
    stats.workers = sup.workers_started();
    stats.elapsed = start.elapsed();
    stats.fuzzing = fuzzing_time;
    stats
}

/// The summary printed at the end of a run.
pub fn report(opts: &Options, all: &[Stats]) -> String {
    let mut s = String::new();
    let span = match (opts.seconds, &opts.iterations) {
        (Some(secs), _) => format!("{secs} s"),
        (_, Some(m)) => format!(
            "iterations {}",
            m.iter()
                .map(|(t, n)| format!("{}={n}", t.name()))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ => String::new(),
    };
    s.push_str(&format!("tilec-fuzz: seed {}, {span}\n", opts.seed));
    s.push_str(&format!(
        "{:<9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}\n",
        "target", "iterations", "per s", "passed", "rejected", "findings", "new", "workers"
    ));
    for st in all {
        let secs = st.fuzzing.as_secs_f64().max(1e-9);
        let rejected: u64 = st.rejected.values().sum();
        let findings: u64 = st.findings.iter().map(|f| f.count).sum();
        s.push_str(&format!(
            "{:<9} {:>10} {:>9.1} {:>9} {:>9} {:>9} {:>8} {:>8}\n",
            st.target.name(),
            st.iterations,
            st.iterations as f64 / secs,
            st.passed,
            rejected,
            findings,
            st.new_findings(),
            st.workers
        ));
    }
    let seeds: Vec<String> = all
        .iter()
        .filter(|st| st.seed_files > 0)
        .map(|st| format!("{} {}", st.seed_files, st.target.name()))
        .collect();
    if !seeds.is_empty() {
        s.push_str(&format!("seed files for mutation: {}\n", seeds.join(", ")));
    }
    for st in all {
        let mut reasons: Vec<(&String, &u64)> = st.rejected.iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        if !reasons.is_empty() {
            s.push_str(&format!(
                "rejected by {} (most common):\n",
                st.target.name()
            ));
            for (why, n) in reasons.iter().take(6) {
                let first = st
                    .first_rejected
                    .get(*why)
                    .map(|i| format!(" (first: iteration {i})"))
                    .unwrap_or_default();
                let why: String = why.chars().take(100).collect();
                s.push_str(&format!("  {n:>8}  {why}{first}\n"));
            }
        }
    }
    let findings: Vec<&Found> = all.iter().flat_map(|st| &st.findings).collect();
    if findings.is_empty() {
        s.push_str("no findings\n");
    } else {
        s.push_str("findings:\n");
        for f in findings {
            s.push_str(&format!(
                "  {}{} x{} (first at iteration {})\n",
                if f.known { "known: " } else { "NEW: " },
                f.signature,
                f.count,
                f.first_iteration
            ));
            for l in f.message.lines().take(4) {
                s.push_str(&format!("      {l}\n"));
            }
            if let Some(p) = &f.saved {
                s.push_str(&format!(
                    "      input: {} ({} bytes, from {})\n",
                    p.display(),
                    f.minimized_len,
                    f.input_len
                ));
            }
        }
    }
    s
}
