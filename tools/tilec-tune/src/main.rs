//! `tilec-tune NET.tile`: tunes a whole network.
//!
//! The network's compute ops are fused (`fuse`) and grouped into tasks
//! (`tilec::tasks`: ops computing the same thing, weighted by their count).
//! A task scheduler (`scheduler.rs`: round-robin, or Ansor's gradient
//! scheduler) hands out rounds of measurements; a round of task `i` runs
//! the `search` pass on the task's representative op with `trials` set to
//! the task's measurements so far plus the round's, so the search resumes
//! from the task's records (a strategy's warm start). Every measurement is
//! appended to `--records` as it completes, so a killed run loses nothing
//! and a rerun with the same file resumes. At the end, every op gets the
//! best schedule of its task, the tuned network is written, compiled and
//! timed end to end, and the report (JSON) and the curve of the objective
//! against tuning time (SVG) are written.
//!
//! `--scheduler=dual-task` is GTA's dual-task scheduling (Algorithm 1 of
//! `../shared/seeds/001_ba74524f88cc158d.txt`): the gradient scheduler
//! picks the main-task; a main-task with intrinsic mapping candidates
//! (`tilec_passes::search::mapping_candidates`) tunes them as sub-tasks,
//! each with the search restricted to its mapping (`mapping=K`): all of
//! them in its first round, then those `probability_sample` keeps
//! (`tilec_passes::search::dual_task`). `--sub-tasks=equal` is the
//! AMOS-style baseline (every candidate every round, the round shared
//! equally); `--search-options=intrinsics=none` the Ansor-style one.

mod scheduler;

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use scheduler::{Scheduler, TaskView};
use serde_json::json;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use termcolor::{ColorChoice, StandardStream};
use tilec::diag::{Diagnostic, Diagnostics, SourceMap};
use tilec::interp::Tensor;
use tilec::ir::{Function, Module};
use tilec::pass::{PassManager, parse_pipeline};
use tilec::ir::IntrinsicChoice;
use tilec::records::{Record, RecordsFile, best_record, parse_records, same_computation, workload_key};
use tilec_passes::search::dual_task::{Allocation, SubTasks};
use tilec_passes::search::rng::Rng;
use tilec::target::Target;
use tilec::tasks::{Task, extract_tasks};

#[derive(Parser, Debug)]
#[command(name = "tilec-tune", version, about = "Tune a network: search its tasks in rounds a task scheduler allots, then compile and time it end to end")]
struct Cli {
    /// The network (a tile file, e.g. from `tilec import`); its weights are
    /// read from the file beside it (`--weights`) for the end-to-end run.
    #[arg(required_unless_present = "plot_only")]
    input: Option<PathBuf>,

    /// The function (needed when the file has several).
    #[arg(long = "func", value_name = "NAME")]
    func: Option<String>,

    /// Where to write the tuned network (schedules on every op); its
    /// weights are linked or copied beside it. Default: NET.tuned.tile.
    #[arg(short = 'o', value_name = "OUT")]
    output: Option<PathBuf>,

    /// The weights file (default: beside the input).
    #[arg(long, value_name = "PATH")]
    weights: Option<PathBuf>,

    /// The target (a name from `tilec --list-targets`, or a TOML file);
    /// its code must run here.
    #[arg(long, default_value = "host")]
    target: String,

    /// Measurements in all (0: 64 per task).
    #[arg(long, default_value_t = 0)]
    trials: usize,

    /// Measurements per round of a task (of each sub-task tuned in the
    /// round, under `--scheduler=dual-task`: Algorithm 1's MEASURE_NUM).
    #[arg(long = "round-trials", default_value_t = 16)]
    round_trials: usize,

    /// After tuning, each task's measured schedules within
    /// `--final-margin` of its fastest (at most `--finalists`) are timed
    /// again in this many rounds, one after another, and the lowest median
    /// of each one's timings (its first included) picks the task's
    /// schedule (0: the fastest single measurement does). Measured minutes
    /// apart, a candidate timed in a fast phase of a shared machine
    /// otherwise wins over a faster one.
    #[arg(long = "final-rounds", default_value_t = 2)]
    final_rounds: usize,

    /// How much slower than a task's fastest a schedule may have measured
    /// and still go to the final rounds (0.2: 20%).
    #[arg(long = "final-margin", default_value_t = 0.2)]
    final_margin: f64,

    /// At most this many schedules of a task go to the final rounds.
    #[arg(long, default_value_t = tilec_passes::search::FINALISTS)]
    finalists: usize,

    /// Stop after this many rounds (0: no limit). Algorithm 1's `trials`
    /// is `--rounds` × `--round-trials`: a round counts once however many
    /// sub-tasks it tunes.
    #[arg(long, default_value_t = 0)]
    rounds: usize,

    /// dual-task: κ, the share of a main-task's mapping candidates kept
    /// after each round (⌈κ·|R|⌉; 1 keeps all: GTA-Raw).
    #[arg(long, default_value_t = 0.2)]
    kappa: f64,

    /// dual-task: β, the exploration boost of the candidates drawn by their
    /// probability (P' ∝ (1+β)·P).
    #[arg(long = "explore-beta", default_value_t = 0.5)]
    explore_beta: f64,

    /// dual-task: how a main-task's rounds go to its mapping candidates.
    #[arg(long = "sub-tasks", value_enum, default_value_t = SubTaskMode::Sampled)]
    sub_tasks: SubTaskMode,

    /// dual-task: a task with mapping candidates gets its plain space (no
    /// intrinsic) as one more sub-task (GTA has mappings only; on a CPU a
    /// vector FMA mapping only narrows the space).
    #[arg(long = "with-plain")]
    with_plain: bool,

    /// Stop after this many seconds of tuning (0: no limit); the round
    /// under way finishes.
    #[arg(long = "max-seconds", default_value_t = 0.0)]
    max_seconds: f64,

    /// How rounds are allotted to tasks.
    #[arg(long, value_enum, default_value_t = SchedulerKind::Gradient)]
    scheduler: SchedulerKind,

    /// The gradient scheduler's α (weight of the recent improvement).
    #[arg(long, default_value_t = 0.2)]
    alpha: f64,

    /// The gradient scheduler's β (how far past the fastest similar task's
    /// speed a task may hope to get).
    #[arg(long, default_value_t = 2.0)]
    beta: f64,

    /// The gradient scheduler's backward window, in rounds.
    #[arg(long, default_value_t = 3)]
    window: usize,

    /// The search strategy of every task: one that measures (gradient,
    /// evolutionary), or one whose first `--round-trials` candidates each
    /// round measures (markov, roller, random; `tlm`, with
    /// `--search-options "model=PATH k=N"`).
    #[arg(long, default_value = "gradient")]
    strategy: String,

    /// How a task's first round is searched: `markov` (Gensor's
    /// construction, its best `--round-trials` candidates measured), so the
    /// strategy's later rounds go on from the analytic model's best points;
    /// `none`: the strategy from the first round.
    #[arg(long = "first-round", value_enum, default_value_t = FirstRound::Markov)]
    first_round: FirstRound,

    /// More options for the search pass, as in a pipeline, e.g.
    /// `features=loops`.
    #[arg(long = "search-options", default_value = "")]
    search_options: String,

    /// Seed of the searches.
    #[arg(long, default_value_t = 0)]
    seed: u64,

    /// The records file: every measurement is appended as it completes,
    /// and the records already there are reused (a rerun resumes).
    #[arg(long, value_name = "FILE")]
    records: Option<PathBuf>,

    /// Threads of the end-to-end runs (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,

    /// Where a candidate's data is when each of its timed runs starts: as
    /// a layer of the network finds it (the weights flushed, pushed out
    /// by the layers since its last run; the input activations warm, just
    /// written by the layer before), all flushed (Ansor's CPU cache
    /// flush), or all warm from the run before, as a kernel timed alone
    /// finds them.
    #[arg(long, value_enum, default_value_t = CacheState::Network)]
    caches: CacheState,

    /// Timed end-to-end runs (after one warm-up); the median is reported.
    #[arg(long, default_value_t = 10)]
    repeat: usize,

    /// Seconds a candidate may take to compile before it is stopped and
    /// counted as failed (compiles run in a child process, `tilec
    /// compile-worker`).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    compile_timeout: f64,

    /// Compare the tuned network's outputs with the reference interpreter's
    /// on the network as written (small networks: the interpreter is slow);
    /// a mismatch fails the run.
    #[arg(long)]
    check: bool,

    /// Skip compiling and timing the untuned network before tuning.
    #[arg(long = "no-untuned")]
    no_untuned: bool,

    /// Write the report (tasks, rounds, the objective's history, the
    /// end-to-end latencies) as JSON.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,

    /// Draw the objective against tuning time and measurements (SVG), with
    /// the runs of `--compare` reports beside it.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,

    /// Reports of other runs to draw in the same plot (repeatable).
    #[arg(long, value_name = "REPORT")]
    compare: Vec<PathBuf>,

    /// Draw `--plot` from the `--compare` reports alone: no network, no
    /// tuning (to draw runs made apart in one figure).
    #[arg(long = "plot-only", requires = "plot", conflicts_with = "input")]
    plot_only: bool,
}

impl Cli {
    fn input(&self) -> &Path {
        self.input.as_deref().expect("clap requires INPUT unless --plot-only")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CacheState {
    /// The weights and the intermediate buffers written back and evicted
    /// before every timed run, the input activations left warm.
    Network,
    /// Written back and evicted before every timed run.
    Flushed,
    /// As the run before left them.
    Warm,
}

impl CacheState {
    fn caches(self) -> tilec_runtime::Caches {
        match self {
            CacheState::Network => tilec_runtime::Caches::Network,
            CacheState::Flushed => tilec_runtime::Caches::Flushed,
            CacheState::Warm => tilec_runtime::Caches::Warm,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FirstRound {
    /// Gensor's Markov construction, its top candidates measured.
    Markov,
    /// The `--strategy` itself.
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum SchedulerKind {
    /// Every task in turn.
    RoundRobin,
    /// Ansor's: the task whose next round should lower Σ ω·latency most.
    Gradient,
    /// GTA's: main-tasks by the gradient scheduler, their mapping
    /// candidates (sub-tasks) by probability sampling.
    DualTask,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum SubTaskMode {
    /// GTA: every candidate once, then the ⌈κ·|R|⌉ probability sampling
    /// keeps, each a whole round.
    Sampled,
    /// AMOS-style: every candidate every round on an equal share of it.
    Equal,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
    };
    let mut sources = SourceMap::new();
    match run(&cli, &mut sources) {
        Ok(()) => ExitCode::SUCCESS,
        Err(diags) => {
            let color = if std::io::stderr().is_terminal() { ColorChoice::Auto } else { ColorChoice::Never };
            sources.emit(&mut StandardStream::stderr(color).lock(), &diags.0);
            ExitCode::FAILURE
        }
    }
}

/// One task being tuned.
struct TaskRun {
    task: Task,
    /// The representative op alone (what a round searches).
    module: Module,
    /// Its workload key (records are matched by computation).
    key: String,
    label: String,
    view: TaskView,
    measurements: usize,
    failures_in_a_row: usize,
    /// Its mapping candidates (dual-task; empty otherwise, or where no
    /// intrinsic computes it): each in words and as the schedule's knob,
    /// `None` for the plain space (`--with-plain`, last).
    candidates: Vec<(String, Option<IntrinsicChoice>)>,
    /// Their rounds and sampling (dual-task with candidates).
    subs: Option<SubTasks>,
    /// Each round's sub-task line, for the report.
    sub_rounds: Vec<serde_json::Value>,
}

impl TaskRun {
    /// The records of what this task computes, on `target`.
    fn records_in<'r>(&self, records: &'r [Record], target: &str) -> impl Iterator<Item = &'r Record> {
        let key = self.key.clone();
        let target = target.to_string();
        records.iter().filter(move |r| r.target == target && same_computation(&r.workload, &key))
    }

    /// The task's best measured latency (seconds), infinite if none.
    fn best_latency(&self, records: &[Record], target: &str) -> f64 {
        best_record(records, &self.key, target).and_then(|r| r.latency.as_ref()).map_or(f64::INFINITY, |l| l.median_s)
    }

    /// The task's records of mapping candidate `k` (all of them for
    /// `None`).
    fn mapping_records<'r>(&self, records: &'r [Record], target: &str, k: Option<usize>) -> Vec<&'r Record> {
        let Some(k) = k else { return self.records_in(records, target).collect() };
        let choice = &self.candidates[k].1;
        self.records_in(records, target)
            .filter(|r| match (choice, &r.schedule.intrinsic) {
                (Some(c), Some(x)) => x.is_mapping(c),
                (None, None) => true,
                _ => false,
            })
            .collect()
    }

    /// The best latency of mapping candidate `k` (infinite if none).
    fn mapping_best(&self, records: &[Record], target: &str, k: usize) -> f64 {
        self.mapping_records(records, target, Some(k)).iter().filter_map(|r| r.latency.as_ref()).map(|l| l.median_s).fold(f64::INFINITY, f64::min)
    }
}

/// A point of the objective's history.
struct Step {
    seconds: f64,
    measurements: usize,
    task: usize,
    objective_s: f64,
}

fn run(cli: &Cli, sources: &mut SourceMap) -> Result<(), Diagnostics> {
    if cli.plot_only {
        return draw_plot(cli, Vec::new());
    }
    if cli.round_trials == 0 {
        return Err(Diagnostic::error("--round-trials must be at least 1").into());
    }
    if cli.repeat == 0 {
        return Err(Diagnostic::error("--repeat must be at least 1").into());
    }
    if !(cli.compile_timeout > 0.0 && cli.compile_timeout.is_finite()) {
        return Err(Diagnostic::error(format!("--compile-timeout must be a positive number of seconds (got {})", cli.compile_timeout)).into());
    }
    if tilec_codegen::compile_worker::CompileWorker::find().is_none() {
        eprintln!("tilec-tune: warning: no `tilec` executable beside tilec-tune (nor $TILEC_COMPILER): candidates compile in this process, without --compile-timeout");
    }
    if !(cli.final_margin >= 0.0 && cli.final_margin.is_finite()) {
        return Err(Diagnostic::error(format!("--final-margin must be a number ≥ 0 (got {})", cli.final_margin)).into());
    }
    if !(0.0..=1.0).contains(&cli.alpha) || cli.beta <= 0.0 || cli.window == 0 {
        return Err(Diagnostic::error("the gradient scheduler needs 0 ≤ --alpha ≤ 1, --beta > 0 and --window ≥ 1").into());
    }
    let allocation = match cli.sub_tasks {
        SubTaskMode::Sampled => Allocation::Sampled { kappa: cli.kappa, beta: cli.explore_beta },
        SubTaskMode::Equal => Allocation::Equal,
    };
    allocation.check().map_err(|m| Diagnostic::error(format!("the dual-task scheduler cannot run: {}", m.replace("kappa", "--kappa").replace("explore-beta", "--explore-beta"))))?;
    let output = cli.output.clone().unwrap_or_else(|| cli.input().with_extension("tuned.tile"));
    for p in std::iter::once(&output).chain(&cli.report).chain(&cli.plot) {
        tilec::input::check_writable(p).map_err(Diagnostic::error)?;
    }
    let file = tilec::input::read_source(sources, &cli.input().to_string_lossy())?;
    let mut module = tilec::syntax::parse(sources, file)?;
    tilec::verify::verify_module(&module).into_result()?;
    let func = match &cli.func {
        Some(n) => n.trim_start_matches('@').to_string(),
        None if module.funcs.len() == 1 => module.funcs[0].name.clone(),
        None => return Err(Diagnostic::error(format!("the file defines {} functions; choose one with --func", module.funcs.len())).into()),
    };
    if module.func(&func).is_none() {
        return Err(Diagnostic::error(format!("no function `@{func}` in the file")).into());
    }
    module.funcs.retain(|f| f.name == func);
    let original = module.clone();
    let registry = tilec_codegen::registry();
    let mut targets = tilec_codegen::driver::target_set(sources, &[])?;
    let target = targets.resolve(sources, &cli.target)?;
    let llvm = tilec_codegen::driver::llvm_target_of(&target);
    tilec_codegen::driver::host_can_run(&llvm).map_err(|missing| Diagnostic::error(format!("code for `{}` cannot run on this machine: it lacks {missing}", target.name)))?;
    // The tasks: epilogues fused, then what the default pipeline runs
    // before `search` (axes collapsed, reductions padded onto the target's
    // dot intrinsics; `pad-axes` needs the target).
    let fuse_text = format!("builtin.module(fuse,{})", tilec_passes::BEFORE_SEARCH.join(","));
    let fuse_file = sources.add("<fuse>", fuse_text.clone());
    let mut fuse = PassManager::new(parse_pipeline(&fuse_text, fuse_file, &registry)?);
    fuse.set_target(target.clone());
    fuse.run(&mut module)?;
    let threads = tilec::target::host::threads_or_every_core(cli.threads);

    // The network's inputs (seeded) and weights, for the end-to-end runs.
    let inputs = network_inputs(cli, &module.funcs[0])?;

    // Records: those of the file, then every new measurement.
    let mut records: Vec<Record> = Vec::new();
    let mut sink = None;
    if let Some(path) = &cli.records {
        let file = RecordsFile::open(path).map_err(|e| Diagnostic::error(format!("cannot open the records file `{}`: {}", path.display(), tilec::input::io_reason(&e))))?;
        let bytes = file.read_all().map_err(|e| Diagnostic::error(format!("cannot read `{}`: {}", path.display(), tilec::input::io_reason(&e))))?;
        let (good, bad) = parse_records(&bytes);
        for (line, why) in bad {
            eprintln!("warning: {}:{line}: not a record, skipped: {why}", path.display());
        }
        // A latency holds for the thread count it was measured on (records
        // without one ran on one thread).
        let total = good.len();
        records.extend(good.into_iter().map(|(_, r)| r).filter(|r| r.threads.unwrap_or(1) as usize == threads));
        if records.len() < total {
            eprintln!("warning: {}: {} record(s) measured on another thread count than {threads} are not used", path.display(), total - records.len());
        }
        sink = Some(file);
    }

    let f = &module.funcs[0];
    let mut tasks: Vec<TaskRun> = extract_tasks(f)
        .into_iter()
        .map(|task| {
            let op = task.ops[0];
            let c = f.ops[op].kind.as_compute().expect("tasks are compute ops");
            let label = c.label.clone().unwrap_or_else(|| "compute".into());
            let kind: String = task.key.chars().filter(|ch| !ch.is_ascii_digit()).collect();
            let view = TaskView { weight: task.weight() as f64, flops: task.flops as f64, kind, history: Vec::new(), done: false };
            let mut candidates: Vec<(String, Option<IntrinsicChoice>)> =
                if cli.scheduler == SchedulerKind::DualTask && !intrinsics_off(cli) { tilec_passes::search::mapping_candidates(f, op, &target).into_iter().map(|(w, c)| (w, Some(c))).collect() } else { Vec::new() };
            if cli.with_plain && !candidates.is_empty() {
                candidates.push(("plain (no intrinsic)".to_string(), None));
            }
            let subs = (!candidates.is_empty()).then(|| SubTasks::new(candidates.len(), allocation));
            TaskRun { module: f.extract_op(op), key: workload_key(f, op).unwrap_or_default(), label, view, task, measurements: 0, failures_in_a_row: 0, candidates, subs, sub_rounds: Vec::new() }
        })
        .collect();
    // Resumed tasks start from their records.
    for t in &mut tasks {
        t.measurements = t.records_in(&records, &target.name).count();
        if t.measurements > 0 {
            t.view.history.push(t.best_latency(&records, &target.name));
        }
    }
    let resumed: usize = tasks.iter().map(|t| t.measurements).sum();
    if let (Some(path), true) = (&cli.records, resumed > 0) {
        eprintln!("tilec-tune: resuming: {resumed} record(s) of this network's tasks in `{}`", path.display());
    }
    let budget = if cli.trials == 0 { 64 * tasks.len() } else { cli.trials };
    let ops: usize = tasks.iter().map(|t| t.task.weight()).sum();
    if cli.scheduler == SchedulerKind::DualTask {
        let with: Vec<&TaskRun> = tasks.iter().filter(|t| !t.candidates.is_empty()).collect();
        let subs: usize = with.iter().map(|t| t.candidates.len()).sum();
        eprintln!("tilec-tune: dual-task: {} of {} task(s) have mapping candidates ({subs} sub-tasks in all); {}", with.len(), tasks.len(), match allocation {
            Allocation::Sampled { kappa, beta } => format!("κ {kappa}, β {beta}"),
            Allocation::Equal => "AMOS-style equal shares".to_string(),
        });
    }
    eprintln!("tilec-tune: @{func}: {} task(s) from {ops} fused op(s); {budget} measurements in rounds of {}, {} scheduler, `{}` search, target `{}`, candidates timed with caches {}", tasks.len(), cli.round_trials, scheduler_name(cli.scheduler), cli.strategy, target.name, cli.caches.caches().name());

    let untuned = if cli.no_untuned {
        None
    } else {
        eprintln!("tilec-tune: compiling and timing the untuned network (schedules from construction alone)");
        Some(time_network(&module, &target, &inputs, threads, cli.repeat)?.0)
    };
    if let Some(s) = untuned {
        eprintln!("tilec-tune: untuned: {:.3} ms end to end ({threads} thread(s))", s * 1e3);
    }

    let scheduler = match cli.scheduler {
        SchedulerKind::RoundRobin => Scheduler::RoundRobin,
        SchedulerKind::Gradient | SchedulerKind::DualTask => Scheduler::Gradient { alpha: cli.alpha, beta: cli.beta, window: cli.window },
    };
    let mut sub_rng = Rng::new(cli.seed ^ 0x9e37_79b9_7f4a_7c15);
    let progress = if std::io::stderr().is_terminal() { ProgressBar::new(budget as u64) } else { ProgressBar::hidden() };
    progress.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} measurements, {elapsed} {msg}").expect("a valid template"));
    let start = Instant::now();
    let mut steps: Vec<Step> = Vec::new();
    let mut spent = 0usize;
    let mut rounds = 0usize;
    while spent < budget && (cli.max_seconds <= 0.0 || start.elapsed().as_secs_f64() < cli.max_seconds) && (cli.rounds == 0 || rounds < cli.rounds) {
        let views: Vec<TaskView> = tasks.iter().map(|t| t.view.clone()).collect();
        let Some(i) = scheduler.next(&views, rounds) else { break };
        let made = if tasks[i].subs.is_some() {
            dual_task_round(cli, &registry, sources, &target, threads, &mut tasks[i], &mut records, sink.as_ref(), budget - spent, &mut sub_rng, rounds + 1)?
        } else {
            let want = cli.round_trials.min(budget - spent);
            tune_round(cli, &registry, sources, &target, threads, &mut tasks[i], &mut records, sink.as_ref(), want, None)?
        };
        spent += made;
        rounds += 1;
        let t = &mut tasks[i];
        let best = t.best_latency(&records, &target.name);
        t.view.history.push(best);
        t.failures_in_a_row = if best.is_finite() { 0 } else { t.failures_in_a_row + 1 };
        // A space with nothing left to measure, or rounds that all fail.
        if made == 0 || t.failures_in_a_row >= 3 {
            t.view.done = true;
        }
        let views: Vec<TaskView> = tasks.iter().map(|t| t.view.clone()).collect();
        let objective = Scheduler::objective(&views);
        let seconds = start.elapsed().as_secs_f64();
        steps.push(Step { seconds, measurements: spent, task: i, objective_s: objective });
        let t = &tasks[i];
        let line = format!(
            "round {rounds}: task {i} \"{}\" (ω {}): {made} measured, best {} ; estimate Σω·latency {}",
            t.label,
            t.task.weight(),
            ms(best),
            ms(objective)
        );
        progress.set_position(spent as u64);
        progress.set_message(format!("estimate {}", ms(objective)));
        progress.suspend(|| eprintln!("{line}"));
    }
    progress.finish_and_clear();
    let tuning_s = start.elapsed().as_secs_f64();

    // Close candidates timed again side by side.
    let finals = final_rounds(cli, &target, threads, &tasks, &records)?;
    let final_s = start.elapsed().as_secs_f64() - tuning_s;
    if finals.iter().any(Option::is_some) {
        eprintln!("tilec-tune: final rounds took {final_s:.1} s");
    }
    // The tuned network: each op gets its task's best schedule.
    let mut tuned = module.clone();
    let applied = apply_best(&mut tuned, &tasks, &records, &finals, &target);
    std::fs::write(&output, tilec::syntax::print_module(&tuned)).map_err(|e| Diagnostic::error(format!("cannot write `{}`: {}", output.display(), tilec::input::io_reason(&e))))?;
    link_weights(cli, &output)?;
    eprintln!("tilec-tune: {applied} op(s) scheduled from records; tuned network written to `{}`", output.display());
    let (tuned_s, outputs) = time_network(&tuned, &target, &inputs, threads, cli.repeat)?;
    let speedup = untuned.map(|u| format!(" ({:.2}x the untuned network)", u / tuned_s)).unwrap_or_default();
    println!("@{func}: {:.3} ms end to end on {threads} thread(s) after {spent} measurements in {tuning_s:.1} s of tuning{speedup}", tuned_s * 1e3);
    for (i, t) in tasks.iter().enumerate() {
        let best = t.view.best();
        let gflops = if best.is_finite() { t.task.flops as f64 / best / 1e9 } else { 0.0 };
        println!("  task {i:>3} ω {:>2} {:>4} measured {:>10} {gflops:>8.2} GFLOP/s  \"{}\"", t.task.weight(), t.measurements, ms(best), t.label);
    }
    let mut checked = None;
    if cli.check {
        let mut reference = original.clone();
        tilec::ir::weights::hoist_weights(&mut reference.funcs[0]);
        let want = tilec::interp::run_function(&reference.funcs[0], &inputs).map_err(|e| Diagnostic::error(format!("the reference interpreter failed: {}", e.0)))?;
        let comparisons: Vec<tilec::interp::compare::Comparison> = outputs.iter().zip(&want).map(|(g, w)| tilec::interp::compare::compare(g, w)).collect();
        for (i, c) in comparisons.iter().enumerate() {
            println!("  output {i}: check vs interpreter: max abs err {:.3e}, max rel err {:.3e} (rtol {:.0e}): {}", c.max_abs_err, c.max_rel_err, c.rtol, if c.passed { "passed" } else { "FAILED" });
        }
        checked = Some(comparisons.iter().all(|c| c.passed));
    }

    let doc = json!({
        "tool": "tilec-tune",
        "input": cli.input().display().to_string(),
        "func": func,
        "machine": tilec::target::host::machine_description(),
        "target": target.name,
        "threads": threads,
        "scheduler": scheduler_name(cli.scheduler),
        "caches": cli.caches.caches().name(),
        "strategy": cli.strategy,
        "first_round": match cli.first_round { FirstRound::Markov => "markov", FirstRound::None => "none" },
        "search_options": cli.search_options,
        "seed": cli.seed,
        "round_trials": cli.round_trials,
        "measurements": spent,
        "tuning_s": tuning_s,
        "final_rounds": { "rounds": cli.final_rounds, "margin": cli.final_margin, "finalists": cli.finalists, "seconds": final_s },
        "untuned_ms": untuned.map(|s| s * 1e3),
        "tuned_ms": tuned_s * 1e3,
        "checked": checked,
        "rounds": rounds,
        "sub_tasks": (cli.scheduler == SchedulerKind::DualTask).then(|| match allocation {
            Allocation::Sampled { kappa, beta } => json!({ "allocation": "sampled", "kappa": kappa, "explore_beta": beta, "with_plain": cli.with_plain }),
            Allocation::Equal => json!({ "allocation": "equal", "with_plain": cli.with_plain }),
        }),
        "tasks": tasks.iter().zip(&finals).map(|(t, fin)| json!({
            "final": fin.as_ref().map(|f| json!({
                "winner": f.winner,
                "medians_ms": f.finalists.iter().map(|(_, times)| finite_ms(tilec::measure::Timing::median_of(times).unwrap_or(f64::INFINITY))).collect::<Vec<_>>(),
                "times_ms": f.finalists.iter().map(|(_, times)| times.iter().map(|&t| finite_ms(t)).collect::<Vec<_>>()).collect::<Vec<_>>(),
            })),
            "label": t.label, "weight": t.task.weight(), "flops": t.task.flops, "measurements": t.measurements,
            "rounds": t.view.history.len(), "best_ms": finite_ms(t.view.best()), "history_ms": t.view.history.iter().map(|&s| finite_ms(s)).collect::<Vec<_>>(),
            "mappings": t.candidates.iter().enumerate().map(|(k, (words, _))| {
                let subs = t.subs.as_ref().expect("candidates come with their sub-tasks");
                json!({
                    "index": k, "mapping": words, "rounds": subs.tuned[k], "measurements": t.mapping_records(&records, &target.name, Some(k)).len(),
                    "best_ms": finite_ms(t.mapping_best(&records, &target.name, k)), "kept": subs.kept.as_ref().is_none_or(|kept| kept.contains(&k)),
                })
            }).collect::<Vec<_>>(),
            "sub_rounds": t.sub_rounds,
        })).collect::<Vec<_>>(),
        "steps": steps.iter().map(|s| json!({ "seconds": s.seconds, "measurements": s.measurements, "task": s.task, "objective_ms": finite_ms(s.objective_s) })).collect::<Vec<_>>(),
    });
    if let Some(path) = &cli.report {
        std::fs::write(path, format!("{}\n", serde_json::to_string_pretty(&doc).expect("JSON of plain values"))).map_err(|e| Diagnostic::error(format!("cannot write `{}`: {}", path.display(), tilec::input::io_reason(&e))))?;
    }
    if cli.plot.is_some() {
        draw_plot(cli, vec![doc])?;
    }
    if checked == Some(false) {
        return Err(Diagnostic::error("the tuned network's outputs differ from the interpreter's").with_note("this is a bug in tilec: tuning must not change results").into());
    }
    Ok(())
}

mod plot;

fn scheduler_name(s: SchedulerKind) -> &'static str {
    match s {
        SchedulerKind::RoundRobin => "round-robin",
        SchedulerKind::Gradient => "gradient",
        SchedulerKind::DualTask => "dual-task",
    }
}

fn ms(s: f64) -> String {
    if s.is_finite() { format!("{:.4} ms", s * 1e3) } else { "none".into() }
}

fn finite_ms(s: f64) -> Option<f64> {
    s.is_finite().then_some(s * 1e3)
}

/// Is `intrinsics=none` among the search options (the Ansor-style
/// baseline: no mapping candidates)?
fn intrinsics_off(cli: &Cli) -> bool {
    cli.search_options.split_whitespace().any(|o| o == "intrinsics=none")
}

/// One round of a main-task with mapping candidates (dual-task): each
/// candidate the sub-tasks put in play gets a round of its own, then the
/// sampling for the next round. Returns how many it measured.
#[allow(clippy::too_many_arguments)]
fn dual_task_round(cli: &Cli, registry: &tilec::pass::Registry, sources: &mut SourceMap, target: &Arc<Target>, threads: usize, t: &mut TaskRun, records: &mut Vec<Record>, sink: Option<&RecordsFile>, left: usize, rng: &mut Rng, round: usize) -> Result<usize, Diagnostics> {
    let subs = t.subs.as_ref().expect("a main-task with candidates");
    let tuned = subs.this_round();
    let share = subs.share(cli.round_trials);
    let mut made = 0;
    let mut done = Vec::new();
    for &k in &tuned {
        if made >= left {
            break;
        }
        made += tune_round(cli, registry, sources, target, threads, t, records, sink, share.min(left - made), Some(k))?;
        done.push(k);
    }
    let best: Vec<f64> = (0..t.candidates.len()).map(|k| t.mapping_best(records, &target.name, k)).collect();
    let subs = t.subs.as_mut().expect("a main-task with candidates");
    let sample = subs.after_round(&done, &best, rng).cloned();
    let line = match &sample {
        Some(s) => format!("kept {:?}, boosted {:?}", s.kept, s.boosted),
        None => "no sampling yet".to_string(),
    };
    eprintln!("  sub-tasks of \"{}\": tuned {done:?} ({share} measurement(s) each); best {}; {line}", t.label, best.iter().map(|&b| ms(b)).collect::<Vec<_>>().join(", "));
    t.sub_rounds.push(json!({
        "round": round, "tuned": done, "best_ms": best.iter().map(|&b| finite_ms(b)).collect::<Vec<_>>(),
        "probability": sample.as_ref().map(|s| s.probability.clone()), "adjusted": sample.as_ref().map(|s| s.adjusted.clone()),
        "boosted": sample.as_ref().map(|s| s.boosted.clone()), "kept": sample.as_ref().map(|s| s.kept.clone()),
    }));
    Ok(made)
}

/// One round of a task: the search pass on its op, with `trials` its
/// measurements so far plus `want`; with `mapping`, the search of that
/// mapping candidate alone, on its own records. Returns how many it
/// measured.
#[allow(clippy::too_many_arguments)]
fn tune_round(cli: &Cli, registry: &tilec::pass::Registry, sources: &mut SourceMap, target: &Arc<Target>, threads: usize, t: &mut TaskRun, records: &mut Vec<Record>, sink: Option<&RecordsFile>, want: usize, mapping: Option<usize>) -> Result<usize, Diagnostics> {
    // The task's records (of the mapping, for a candidate's round).
    let mine: Vec<Record> = t.mapping_records(records, &target.name, mapping).into_iter().cloned().collect();
    // The search counts the timed records in its `trials` (failures are
    // not resumed), and makes the rest.
    let trials = mine.iter().filter(|r| r.latency.is_some()).count() + want;
    // Each round its own seed, so a resumed search does not redraw what
    // the last round drew.
    let seed = cli.seed.wrapping_add(t.view.history.len() as u64);
    // The space: a mapping candidate's alone, the plain one without
    // intrinsics, or the task's (which `--search-options` may say has
    // none).
    let space = match mapping {
        Some(k) if t.candidates[k].1.is_some() => format!(" mapping={k}"),
        Some(_) => " intrinsics=none".to_string(),
        None if intrinsics_off(cli) => " intrinsics=none".to_string(),
        None => String::new(),
    };
    let text = if mine.is_empty() && cli.first_round == FirstRound::Markov {
        format!("builtin.module(search{{strategy=markov measure-top-k={want} seed={seed} final-rounds=0{space}}})")
    } else {
        // `--search-options` already says intrinsics=none where it does.
        let extra = if mapping.is_some() { space } else { String::new() };
        let options = cli.search_options.trim();
        let options = if options.is_empty() { String::new() } else { format!(" {options}") };
        // A strategy that measures in its loop spends `trials`; one that
        // constructs (or, `tlm`, generates) has its first `want` measured.
        let constructs = tilec_passes::search::registry::StrategyRegistry::builtin().get(&cli.strategy).is_some_and(|d| !d.measures);
        let spend = if constructs { format!("measure-top-k={want}") } else { format!("trials={trials}") };
        format!("builtin.module(search{{strategy={} {spend} seed={seed} final-rounds=0{options}{extra}}})", cli.strategy)
    };
    let file = sources.add("<round pipeline>", text.clone());
    let pipeline = parse_pipeline(&text, file, registry)?;
    let mut pm = PassManager::new(pipeline);
    pm.set_target(target.clone());
    pm.set_kernel_threads(threads);
    // Candidates are timed on the threads the network will run on.
    match tilec_codegen::evaluator::cpu_evaluator(target, threads) {
        Ok(mut e) => {
            e.0.caches = cli.caches.caches();
            if let Some(c) = &mut e.0.compiler {
                c.timeout = std::time::Duration::from_secs_f64(cli.compile_timeout);
            }
            pm.set_evaluator(Box::new(e))
        }
        Err(why) => pm.set_no_evaluator_reason(why),
    }
    pm.set_model_loader(Box::new(tilec_tlm::TlmLoader));
    pm.add_records(tilec::records::RESUME, Arc::new(mine));
    if let Some(file) = sink {
        pm.set_record_sink(Box::new(file.clone()));
    }
    let mut m = t.module.clone();
    let report = pm.run(&mut m)?;
    let made = report.records.len();
    t.measurements += made;
    records.extend(report.records);
    Ok(made)
}

/// Gives every op of the network its task's best schedule; returns how
/// many got one (the others are scheduled by construction when compiled).
fn apply_best(module: &mut Module, tasks: &[TaskRun], records: &[Record], finals: &[Option<Final>], target: &Target) -> usize {
    let f = &mut module.funcs[0];
    let mut applied = 0;
    for (t, fin) in tasks.iter().zip(finals) {
        let schedule = match fin {
            Some(fin) => fin.finalists[fin.winner].0.clone(),
            None => match best_record(records, &t.key, &target.name) {
                Some(r) => r.schedule.clone(),
                None => continue,
            },
        };
        for &op in &t.task.ops {
            if let Some(c) = f.ops[op].kind.as_compute_mut() {
                c.schedule = Some(schedule.to_schedule(&target.name));
                applied += 1;
            }
        }
    }
    applied
}

/// A task's final rounds: its finalists with every median each got (the
/// record's first), and which won.
struct Final {
    finalists: Vec<(tilec::records::RecordSchedule, Vec<f64>)>,
    winner: usize,
}

/// Times each task's close schedules again (`--final-rounds`), each round
/// taking them one after another, on the tuning's evaluator; `None` for a
/// task with fewer than two finalists. A finalist that fails a round drops
/// out.
fn final_rounds(cli: &Cli, target: &Arc<Target>, threads: usize, tasks: &[TaskRun], records: &[Record]) -> Result<Vec<Option<Final>>, Diagnostics> {
    let mut finals = Vec::new();
    // Made when a task first has finalists to time.
    let mut evaluator: Option<tilec_codegen::evaluator::CheckedEvaluator> = None;
    let mut no_evaluator = None;
    for t in tasks {
        let mut first: Vec<(f64, tilec::records::RecordSchedule)> = t.records_in(records, &target.name).filter_map(|r| Some((r.latency.as_ref()?.median_s, r.schedule.clone()))).collect();
        first.sort_by(|a, b| a.0.total_cmp(&b.0));
        let func = t.module.funcs[0].name.clone();
        // `extract_op` keeps the op's id: the representative is the first.
        let op = t.task.ops[0];
        let mut referenced = false;
        let compute = t.module.funcs[0].ops[op].kind.as_compute().expect("the task's op is a compute op");
        let spatial: Vec<&str> = compute.spatial_axes().map(|a| compute.axis(a).name.as_str()).collect();
        let shape = |schedule: &tilec::records::RecordSchedule| schedule.to_schedule(&target.name).kernel_shape(spatial.iter().copied());
        let finalists = tilec_passes::search::time_finalists(first, cli.finalists, cli.final_rounds as u64, cli.final_margin, shape, |schedule| {
            if evaluator.is_none() {
                match tilec_codegen::evaluator::cpu_evaluator(target, threads) {
                    Ok(mut e) => {
                        e.0.caches = cli.caches.caches();
                        evaluator = Some(e);
                    }
                    Err(why) => {
                        no_evaluator = Some(why);
                        return None;
                    }
                }
            }
            let e = evaluator.as_mut().expect("made above");
            if !referenced {
                // Checked against the interpreter where the evaluator can.
                let _ = tilec::measure::Evaluator::set_reference(e, &t.module, &func);
                referenced = true;
            }
            let mut m = t.module.clone();
            m.funcs[0].ops[op].kind.as_compute_mut().expect("the task's op is a compute op").schedule = Some(schedule.to_schedule(&target.name));
            let timed = tilec_passes::search::lower_for_measurement(&mut m, target).ok().and_then(|()| tilec::measure::Evaluator::evaluate(e, &m, &func).ok());
            Some(timed.map(|t| t.median_s))
        });
        if let Some(why) = no_evaluator {
            return Err(Diagnostic::error(format!("the final rounds cannot time candidates: {why}")).with_help("--final-rounds 0 keeps each task's fastest measurement").into());
        }
        let medians: Vec<f64> = finalists.iter().map(|(_, times)| tilec::measure::Timing::median_of(times).unwrap_or(f64::INFINITY)).collect();
        let Some(winner) = (0..finalists.len()).min_by(|&a, &b| medians[a].total_cmp(&medians[b])) else {
            finals.push(None);
            continue;
        };
        eprintln!(
            "final rounds: \"{}\": {} schedule(s) within {:.0}% timed {} more time(s) each, medians {}; {} wins",
            t.label,
            finalists.len(),
            cli.final_margin * 100.0,
            cli.final_rounds,
            medians.iter().map(|&m| ms(m)).collect::<Vec<_>>().join(", "),
            if winner == 0 { "the fastest first measurement".to_string() } else { format!("number {} of the first measurements", winner + 1) }
        );
        finals.push(Some(Final { finalists, winner }));
    }
    Ok(finals)
}

/// Draws `--plot`: `runs` (this run's report, if any) and the `--compare`
/// reports.
fn draw_plot(cli: &Cli, mut runs: Vec<serde_json::Value>) -> Result<(), Diagnostics> {
    let path = cli.plot.as_ref().expect("only called with --plot");
    for p in &cli.compare {
        let text = std::fs::read_to_string(p).map_err(|e| Diagnostic::error(format!("cannot read `{}`: {}", p.display(), tilec::input::io_reason(&e))))?;
        runs.push(serde_json::from_str(&text).map_err(|e| Diagnostic::error(format!("`{}` is not a tilec-tune report: {e}", p.display())))?);
    }
    if runs.is_empty() {
        return Err(Diagnostic::error("--plot-only draws the --compare reports, and none was given").with_help("name a report of `tilec-tune --report` with `--compare FILE`").into());
    }
    tilec::input::check_writable(path).map_err(Diagnostic::error)?;
    plot::draw(&runs, path).map_err(Diagnostic::error)?;
    Ok(())
}

/// The network's inputs, seeded random, then its weights from the file.
fn network_inputs(cli: &Cli, f: &Function) -> Result<Vec<Tensor>, Diagnostics> {
    let mut inputs: Vec<Tensor> = f.params.iter().enumerate().filter_map(|(i, &p)| f.value_type(p).as_tensor().map(|t| Tensor::random(t, Tensor::input_seed(cli.seed, i)))).collect();
    let wanted = tilec::ir::weights::weights_of(f);
    if !wanted.is_empty() {
        let path = cli.weights.clone().unwrap_or_else(|| tilec::interp::weights::sidecar_path(cli.input()));
        let file = tilec::interp::weights::read_sidecar(&path)
            .map_err(|e| Diagnostic::error(format!("@{} reads {} weight(s), but its weights file cannot be used: {e}", f.name, wanted.len())).with_help("name the weights file with `--weights PATH`"))?;
        inputs.extend(tilec::interp::weights::bind_weights(&wanted, file, &path).map_err(Diagnostic::error)?);
    }
    Ok(inputs)
}

/// The weights beside the tuned network: a hard link to the input's, or a
/// copy where links are not possible.
fn link_weights(cli: &Cli, output: &Path) -> Result<(), Diagnostics> {
    let from = cli.weights.clone().unwrap_or_else(|| tilec::interp::weights::sidecar_path(cli.input()));
    if !from.exists() {
        return Ok(());
    }
    let to = tilec::interp::weights::sidecar_path(output);
    if to == from {
        return Ok(());
    }
    let _ = std::fs::remove_file(&to);
    if std::fs::hard_link(&from, &to).is_err() {
        std::fs::copy(&from, &to).map_err(|e| Diagnostic::error(format!("cannot copy the weights to `{}`: {}", to.display(), tilec::input::io_reason(&e))))?;
    }
    Ok(())
}

/// Compiles the network (the default pipeline: construction for ops
/// without a schedule, then the scheduling passes) and returns the median
/// of `repeat` timed runs after a warm-up, in seconds, and the outputs.
fn time_network(module: &Module, target: &Arc<Target>, inputs: &[Tensor], threads: usize, repeat: usize) -> Result<(f64, Vec<Tensor>), Diagnostics> {
    // The pipeline sees the weights as weights (`prepack` lays them out
    // once); after it they become trailing parameters, in the order
    // `hoist_weights` gave the inputs.
    let mut m = module.clone();
    let registry = tilec_codegen::registry();
    let text = tilec_codegen::driver::default_compiled_pipeline();
    let mut sources = SourceMap::new();
    let file = sources.add("<default pipeline>", text.clone());
    let mut pm = PassManager::new(parse_pipeline(&text, file, &registry)?);
    pm.set_target(target.clone());
    pm.run(&mut m)?;
    for f in &mut m.funcs {
        tilec::ir::weights::hoist_weights(f);
    }
    let f = &m.funcs[0];
    let llvm = tilec_codegen::driver::llvm_target_of(target);
    let compiled = tilec_codegen::compile_function_cpu(f, &llvm).map_err(|e| Diagnostic::error(format!("cannot compile @{}: {}", f.name, e.0)))?;
    let dir = tempfile::tempdir().map_err(|e| Diagnostic::error(format!("cannot make a temporary folder: {e}")))?;
    let so = tilec_codegen::link_shared(&compiled.artifacts.object, dir.path(), &f.name).map_err(|e| Diagnostic::error(e.0))?;
    let program = tilec_codegen::CpuProgram::load(&so, compiled.kernels.clone(), compiled.plan.clone()).map_err(Diagnostic::error)?;
    let outputs = program.run_timed(inputs, threads).map_err(Diagnostic::error)?.results;
    let mut times: Vec<f64> = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        times.push(program.run_timed(inputs, threads).map_err(Diagnostic::error)?.kernel_seconds);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], outputs))
}
