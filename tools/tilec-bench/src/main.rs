//! `tilec-bench`: runs workloads through tilec's scheduling strategies,
//! compiles them for this machine, times the kernels and reports GFLOP/s
//! against this machine's measured peak and, with `--baseline`, against
//! numpy and onnxruntime measured in the same run (`--baseline=tvm`:
//! against TVM's MetaSchedule, with its tuning time beside the search's).
//!
//! It installs nothing: baselines run where those Python packages are
//! installed (`tools/bench-env.sh [--tvm]`) and are reported as skipped
//! otherwise.
//!
//! With `--curve` it also records each search's tuning curve: the best
//! GFLOP/s found after each measurement and when (`curve.rs`).

mod curve;
mod quality;
mod report;

use clap::Parser;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::{Value as Json, json};
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use termcolor::{ColorChoice, StandardStream};
use tilec::calibration::{Calibration, Peak};
use tilec::diag::{Diagnostic, Diagnostics, SourceMap};
use tilec::interp::{Tensor, compare::compare, run_function};
use tilec::ir::ElemType;
use tilec::measure::Timing;
use tilec::pass::{PassManager, parse_pipeline};
use tilec::target::{Target, TargetKind, TargetSet};
use tilec_codegen::LlvmTarget;

#[derive(Parser, Debug)]
#[command(name = "tilec-bench", version, about = "Benchmark workloads through tilec's strategies on this machine")]
struct Cli {
    /// Tile files to run (default: the CPU-sized workloads of benchmarks/workloads/).
    files: Vec<PathBuf>,

    /// Strategies, comma-separated: `plain` (no search: the plain schedule;
    /// the default) or a strategy of the `search` pass (`markov`, `roller`,
    /// `random`, ...).
    #[arg(long, value_delimiter = ',')]
    strategy: Vec<String>,

    /// Threads for the kernels (0: one per core).
    #[arg(long, default_value_t = 1)]
    threads: usize,

    /// The target to schedule and compile for (must run on this machine);
    /// by default the target a workload's schedules name, else `host`.
    #[arg(long, value_name = "NAME|PATH")]
    target: Option<String>,

    /// A folder of target description files (`*.toml`) to add to the known
    /// targets (repeatable; `TILEC_TARGET_PATH` adds folders too).
    #[arg(long = "target-dir", value_name = "DIR")]
    target_dir: Vec<PathBuf>,

    /// Seed of the search and of the inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,

    /// Extra options for the search pass, as in a pipeline (`budget=64 measure-top-k=8`).
    #[arg(long = "search-options", default_value = "")]
    search_options: String,

    /// Timed runs per round (see --rounds).
    #[arg(long, default_value_t = 10)]
    repeat: usize,

    /// Untimed runs first.
    #[arg(long, default_value_t = 2)]
    warmup: usize,

    /// Rounds of `--repeat` timed runs per workload, each followed by the
    /// baseline's measurement with `--baseline`; the figures are the
    /// medians of the rounds' medians. A shared machine's slow phases last
    /// seconds: in rounds that alternate with the baseline, one phase
    /// moves one round of each, not the whole figure of one side.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,

    /// With `--baseline` (the libraries) on one thread: time tilec's kernels
    /// and the baseline in turns, one call of each alternately in the
    /// baseline's process (`benchmarks/baseline.py --tilec-lib`), `--rounds`
    /// times; the figures are then the medians of those rounds' medians.
    /// Blocks of runs on each side leave a machine's slow phases (seconds
    /// long) on one side's runs; turns give both sides the same ones.
    #[arg(long = "in-turns")]
    in_turns: bool,

    /// Skip the comparison with the interpreter.
    #[arg(long = "no-check")]
    no_check: bool,

    /// Read every parameter of a workload but the first as a network's
    /// weight (a `weight` op, random values like the inputs'), as
    /// onnxruntime's baseline gets its weights as initializers and
    /// prepacks them: `prepack` lays their staged copies out once, and the
    /// timing leaves that out, as the search's measurements do.
    #[arg(long)]
    weights: bool,

    /// Also measure a baseline on the same workloads, side by side:
    /// `libraries` (the default) is numpy (GEMM, GEMV, batched GEMM) and
    /// onnxruntime (convolutions, pooling); `tvm` is TVM's MetaSchedule
    /// (GEMMs, GEMV, convolutions), tuned once per workload with
    /// `--tvm-trials` measured candidates (the tuning is cached, and its
    /// seconds are reported beside the search's), then timed in each round
    /// (`tools/bench-env.sh --tvm` installs it).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "libraries", require_equals = true)]
    baseline: Option<BaselineKind>,

    /// Candidates MetaSchedule measures with `--baseline=tvm`.
    #[arg(long, default_value_t = 64)]
    tvm_trials: u32,

    /// Measure this machine's FMA peak and memory bandwidth first, with
    /// generated kernels; ratios to peak then use it (else the target's
    /// nominal peak). Alone (no files, no strategy given), only that.
    #[arg(long)]
    peak: bool,

    /// Record each search's tuning curve: after every measurement, its
    /// number, the wall seconds since the op's search started, the
    /// candidate's GFLOP/s (none if it failed) and the best so far. Needs
    /// a strategy that measures (e.g. `--strategy=random
    /// --search-options='measure-top-k=20'`); the candidates run on
    /// --threads threads, as the chosen kernel does. Prints a Markdown table of the curves, a row per
    /// workload and strategy (measurements, failures, best GFLOP/s,
    /// measurements and seconds to 95% of it, total seconds, the final
    /// pick's GFLOP/s); with --json the curves go into the document
    /// (`curves`); with --plot they are drawn. On a terminal a second bar
    /// counts measurements (out of `trials`, else `measure-top-k`).
    #[arg(long, conflicts_with = "from")]
    curve: bool,

    /// With --curve: also append every measurement to this records file
    /// (JSON lines, as `tilec --records` writes them), for
    /// `--model-quality`.
    #[arg(long, value_name = "FILE.jsonl", requires = "curve")]
    records: Option<PathBuf>,

    /// Measure nothing: read this records file and report, per op of the
    /// workload files given, how well each cost model ranks the recorded
    /// points (Spearman's ρ and pairwise accuracy on a held-out quarter:
    /// the analytic model, and gbdt over the af and loops features trained
    /// on the rest). The target is --target (default host), as the records
    /// were made for.
    #[arg(long = "model-quality", value_name = "RECORDS.jsonl", conflicts_with_all = ["from", "curve"])]
    model_quality: Option<PathBuf>,

    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,

    /// Draw GFLOP/s per workload as an SVG bar chart into this file (with
    /// the baselines and the peak); with --curve, or from saved runs with
    /// curves, the tuning curves instead: per workload, best GFLOP/s so far
    /// against measurements and against wall seconds, a line per strategy
    /// and seed.
    #[arg(long, value_name = "OUT.svg")]
    plot: Option<PathBuf>,

    /// Measure nothing: read saved runs (`--json` documents), print them
    /// side by side as one Markdown table (then one of the tuning curves
    /// of the runs that have them), and with --plot draw them.
    #[arg(long, value_name = "RUN.json")]
    from: Vec<PathBuf>,
}

/// The workloads run by default: those sized for a CPU (the GPU-sized
/// Gensor shapes and the largest pooling are left out).
const DEFAULT_WORKLOADS: &[&str] = &[
    "gemm_1024",
    "gemm_bert_m0",
    "gemm_bert_m1",
    "gemm_bert_m2",
    "gemm_bert_m3",
    "gemm_bert_m4",
    "gemm_bert_m5",
    "gemm_gta_16x512x128",
    "gemm_gta_1024x16x256",
    "gemm_gta_256x1024x256",
    "gemm_gta_512x256x16",
    "bmm_bert_qk",
    "bmm_bert_sv",
    "gemv_v3",
    "conv2d_resnet50_r0",
    "conv2d_resnet50_r1",
    "conv2d_resnet50_r2",
    "conv2d_resnet50_r3",
    "conv2d_resnet50_r4",
    "conv2d_resnet50_r5",
    "conv2d_resnet50_r6",
    "conv2d_resnet50_r7",
    "conv2d_resnet50_r8",
    "conv2d_resnet50_r9",
    "conv2d_resnet50_r10",
    "conv2d_resnet50_r11",
    "conv2d_resnet50_r12",
    "avgpool_p1",
    "maxpool_resnet_stem",
    // Quantized (u8 x i8 -> i32; GFLOP/s counts integer multiply-adds as
    // two ops), beside onnxruntime's MatMulInteger and ConvInteger.
    "gemm_int8_1024",
    "conv2d_int8_resnet50_r5",
];

fn repo_root() -> PathBuf {
    // The binary lives in <repo>/target/<profile>/; fall back to the
    // current folder.
    std::env::current_exe()
        .ok()
        .and_then(|p| p.ancestors().nth(3).map(Path::to_path_buf))
        .filter(|r| r.join("benchmarks/workloads").is_dir())
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The CPU's model name (`/proc/cpuinfo`).
/// The machine, in words, for the report.
fn machine() -> String {
    tilec::target::host::machine_description()
}

/// Measures this machine's peak for `threads` threads: f32 FMA GFLOP/s,
/// triad bandwidth, and the GOP/s of each dot-product intrinsic (VNNI,
/// BF16) the target offers; what `--peak` caches (`tilec::calibration`).
fn measure_peak(target: &tilec::target::Target, threads: usize) -> Result<Calibration, String> {
    let host = LlvmTarget::host();
    let lanes = if host.features.split(',').any(|f| f == "+avx512f") { 16 } else { 8 };
    let p = tilec_codegen::peak::measure_fma_peak(&host, lanes, threads, 7).map_err(|e| e.0)?;
    let b = tilec_codegen::peak::measure_bandwidth(&host, threads, 7).map_err(|e| e.0)?;
    // Chains are a core's: measured on one thread.
    let fma_chains = if threads == 1 { Some(tilec_codegen::peak::measure_fma_chains(&host, lanes, p.gflops, 7).map_err(|e| e.0)? as u32) } else { None };
    // Each dot product the target offers (it runs here: checked before),
    // compiled with the target's features (the host's may not name them).
    let llvm = tilec_codegen::driver::llvm_target_of(target);
    let mut dots = Vec::new();
    for x in target.offered_intrinsics().filter(|x| x.kind == "dot") {
        let d = tilec_codegen::peak::measure_dot_peak(&llvm, x, threads, 7).map_err(|e| format!("{}: {}", x.name, e.0))?;
        dots.push((x.name.clone(), d.gflops));
    }
    let measured_unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Ok(Calibration { machine: tilec::calibration::machine_id(), threads, gflops: p.gflops, lanes, bandwidth_gbs: b.gbs, fma_chains, dots, measured_unix })
}

/// One workload under one strategy.
struct Row {
    workload: String,
    strategy: String,
    result: Result<Measured, String>,
    /// With `--curve`, the tuning curve of each op searched (none if the
    /// pipeline did not run).
    curves: Option<Vec<curve::OpCurve>>,
}

struct Measured {
    search_s: f64,
    compile_s: f64,
    measurements: Option<u64>,
    /// The median of the rounds' medians.
    median_s: f64,
    /// Each round's median.
    round_medians_s: Vec<f64>,
    min_s: f64,
    flops: u64,
    /// Bytes of the function's inputs and results: what a memory-bound op
    /// must move at least once.
    bytes: u64,
    check: Option<bool>,
    baseline: Option<Result<Baseline, String>>,
    /// The schedule each kernel was compiled with, on one line.
    schedules: Vec<String>,
    /// The element types the heaviest op multiplies: which peak the row is
    /// held to.
    product_types: Option<(ElemType, ElemType)>,
    /// Timed in turns with the baseline (`--in-turns`), every round.
    in_turns: bool,
}

/// Bytes of `f`'s tensor inputs and results.
fn moved_bytes(f: &tilec::ir::Function) -> u64 {
    let inputs: u64 = f.params.iter().filter_map(|&v| f.value_type(v).as_tensor().and_then(|t| t.size_bytes())).sum();
    inputs + f.result_types.iter().filter_map(|t| t.size_bytes()).sum::<u64>()
}

/// The peak a row is held to: this machine's measured peak of the
/// instruction that computes its products (`Calibration::peak_for`), else
/// the target's nominal one.
fn row_peak(products: Option<(ElemType, ElemType)>, target: &Target, measured: Option<&Calibration>, threads: usize) -> Option<Peak> {
    match measured {
        Some(c) => c.peak_for(target, products),
        None => tilec::calibration::nominal_peak_for(target, products, threads),
    }
}

/// Operations per byte moved below which a row's GB/s is reported against
/// the triad bandwidth (a GEMV does 0.5; a GEMM 1024 about 170).
const MEMORY_BOUND_INTENSITY: f64 = 2.0;

fn pipeline_for(strategy: &str, seed: u64, options: &str) -> String {
    let search = match strategy {
        "plain" => None,
        s => {
            let extra = if options.trim().is_empty() { String::new() } else { format!(" {}", options.trim()) };
            Some(format!("strategy={s} seed={seed}{extra}"))
        }
    };
    tilec_codegen::driver::scheduling_pipeline(search.as_deref(), true, &[])
}

/// `--curve`: where the run's measurements are logged, and the bar that
/// shows them.
struct CurveWatch {
    log: curve::SharedLog,
    progress: ProgressBar,
}

/// What every run of an invocation shares.
#[derive(Clone, Copy)]
struct Env<'a> {
    targets: &'a TargetSet,
    target: &'a Arc<Target>,
    threads: usize,
    /// Where the kernels' shared libraries go.
    dir: &'a Path,
}

fn run_one(cli: &Cli, env: Env, path: &Path, strategy: &str, watch: Option<&CurveWatch>) -> Result<Measured, String> {
    let Env { targets, target, threads, dir } = env;
    let render = |sources: &SourceMap, d: &Diagnostics| sources.render(&d.0);
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let (mut module, mut sources) = tilec::syntax::parse_str(&path.display().to_string(), &text).map_err(|(d, sm)| render(&sm, &d))?;
    let v = tilec::verify::verify_module(&module);
    if v.has_errors() {
        return Err(render(&sources, &v));
    }
    if cli.weights {
        for f in &mut module.funcs {
            tilec::ir::weights::params_into_weights(f, 1);
        }
    }
    // Without --target, a workload scheduled by hand runs for the target
    // its schedules name.
    let named;
    let target = match (&cli.target, module.schedule_targets().as_slice()) {
        (None, [one]) if *one != target.name => {
            named = targets.lookup(&mut sources, one).map_err(|d| render(&sources, &d))?;
            if named.kind != TargetKind::Cpu {
                return Err(format!("the schedules are for `{one}`, a {} target; tilec-bench runs on this machine's CPU", named.kind.name()));
            }
            tilec_codegen::driver::host_can_run(&tilec_codegen::driver::llvm_target_of(&named)).map_err(|missing| format!("code for `{one}` cannot run on this machine: it lacks {missing}"))?;
            &named
        }
        _ => target,
    };
    // What runs and what the interpreter checks: the weights (if any) as
    // trailing parameters, with random values like the inputs'.
    let mut original = module.funcs.first().ok_or("no function")?.clone();
    tilec::ir::weights::hoist_weights(&mut original);
    let registry = tilec_codegen::registry();
    let pipeline_text = pipeline_for(strategy, cli.seed, &cli.search_options);
    let pfile = sources.add("<pipeline>", pipeline_text.clone());
    let pipeline = parse_pipeline(&pipeline_text, pfile, &registry).map_err(|d| render(&sources, &d))?;
    // A search that measures (`measure-top-k` > 0) gets the worker-process
    // evaluator, as in `tilec`.
    let evaluator = tilec_codegen::evaluator::search_evaluator(&pipeline, Some(target), threads);
    let mut pm = PassManager::new(pipeline);
    pm.set_target(target.clone());
    pm.set_model_loader(Box::new(tilec_tlm::TlmLoader));
    if let Err(why) = &evaluator {
        // The search options ask for measurements: a figure from
        // construction alone must not pass for one.
        eprintln!("warning: the search measures no candidate here: {why}");
    }
    pm.install_evaluator(evaluator);
    pm.set_kernel_threads(threads);
    let mut scheduled = module.clone();
    let start = Instant::now();
    if let Some(w) = watch {
        let file = match &cli.records {
            Some(path) => Some(tilec::records::RecordsFile::open(path).map_err(|e| format!("cannot open records file `{}`: {e}", path.display()))?),
            None => None,
        };
        pm.set_record_sink(Box::new(curve::CurveSink::new(start, w.log.clone(), w.progress.clone()).with_file(file)));
    }
    let ran = pm.run(&mut scheduled);
    let search_s = start.elapsed().as_secs_f64();
    if let Some(w) = watch {
        curve::finish(&w.log, search_s);
    }
    let report = ran.map_err(|d| render(&sources, &d))?;
    let measurements = report.statistics.iter().flat_map(|(_, counters)| counters.iter()).filter(|(name, _)| *name == "measured").map(|(_, n)| *n).reduce(|a, b| a + b);

    let f = scheduled.funcs.first_mut().ok_or("the pipeline removed the function")?;
    tilec::ir::weights::hoist_weights(f);
    let f = &*f;
    let schedules = kernel_schedules(f);
    let start = Instant::now();
    let compiled = tilec_codegen::compile_function_cpu(f, &tilec_codegen::driver::llvm_target_of(target)).map_err(|e| e.0)?;
    let so = tilec_codegen::link_shared(&compiled.artifacts.object, dir, &f.name).map_err(|e| e.0)?;
    let program = tilec_codegen::CpuProgram::load(&so, compiled.kernels.clone(), compiled.plan.clone())?;
    // The call metadata beside the library, for the baseline script's
    // calls of it (`--in-turns`).
    if cli.in_turns {
        let meta = PathBuf::from(format!("{}.json", so.display()));
        let text = tilec_codegen::driver::cpu_library_metadata(&target.name, [(f.name.as_str(), compiled.kernels.as_slice(), &compiled.plan)]);
        std::fs::write(&meta, text).map_err(|e| format!("cannot write `{}`: {e}", meta.display()))?;
    }
    let compile_s = start.elapsed().as_secs_f64();

    let inputs: Vec<Tensor> = original
        .params
        .iter()
        .enumerate()
        .map(|(i, &p)| original.value_type(p).as_tensor().map(|t| Tensor::random(t, Tensor::input_seed(cli.seed, i))).ok_or("a parameter is not a tensor"))
        .collect::<Result<_, _>>()?;
    for _ in 0..cli.warmup {
        program.run(&inputs, threads)?;
    }
    let mut round_medians_s = Vec::new();
    let mut min_s = f64::INFINITY;
    let mut results = Vec::new();
    let mut baseline_rounds: Option<Result<(BaselineRun, Vec<f64>), String>> = cli.baseline.map(|_| Ok((BaselineRun::default(), Vec::new())));
    for _ in 0..cli.rounds {
        if cli.in_turns && matches!(baseline_rounds, Some(Ok(_))) {
            // One round in turns: the baseline's script times both.
            if results.is_empty() {
                results = program.run_timed(&inputs, threads)?.results;
            }
            if let (Some(Ok((run, medians))), Some(kind)) = (&mut baseline_rounds, cli.baseline) {
                match run_baseline(path, threads, kind, cli.tvm_trials, Some(&so)) {
                    Ok((r, t, Some((ours, ours_min)))) => {
                        *run = r;
                        medians.push(t);
                        round_medians_s.push(ours);
                        min_s = min_s.min(ours_min);
                        continue;
                    }
                    Ok(_) => baseline_rounds = Some(Err("the baseline script did not time tilec's kernels".into())),
                    Err(why) => baseline_rounds = Some(Err(why)),
                }
            }
        }
        let mut times = Vec::new();
        for _ in 0..cli.repeat.max(1) {
            let run = program.run_timed(&inputs, threads)?;
            times.push(run.kernel_seconds);
            results = run.results;
        }
        let round = Timing::of(&times).expect("at least one run a round");
        min_s = min_s.min(round.min_s);
        round_medians_s.push(round.median_s);
        if let (Some(Ok((run, medians))), Some(kind)) = (&mut baseline_rounds, cli.baseline) {
            match run_baseline(path, threads, kind, cli.tvm_trials, None) {
                Ok((r, t, _)) => {
                    *run = r;
                    medians.push(t);
                }
                Err(why) => baseline_rounds = Some(Err(why)),
            }
        }
    }
    let check = if cli.no_check {
        None
    } else {
        let want = run_function(&original, &inputs).map_err(|e| format!("interpreter: {e}"))?;
        Some(results.iter().zip(&want).all(|(g, w)| compare(g, w).passed))
    };
    let timed_in_turns = cli.in_turns && matches!(baseline_rounds, Some(Ok(_)));
    let baseline = baseline_rounds.map(|b| b.map(|(run, round_medians_s)| Baseline { run, median_s: median(&round_medians_s), round_medians_s }));
    Ok(Measured {
        search_s,
        compile_s,
        measurements,
        median_s: median(&round_medians_s),
        round_medians_s,
        min_s,
        flops: tilec::ir::cost::flops(&original),
        bytes: moved_bytes(&original),
        check,
        baseline,
        schedules,
        product_types: tilec::ir::cost::product_types(&original),
        in_turns: timed_in_turns,
    })
}

/// A baseline library's figures: the median of its rounds' medians.
struct Baseline {
    run: BaselineRun,
    median_s: f64,
    round_medians_s: Vec<f64>,
}

/// The median of the rounds' medians (`--rounds` is at least 1).
fn median(round_medians_s: &[f64]) -> f64 {
    Timing::median_of(round_medians_s).expect("at least one round")
}

/// The schedules of `f`'s kernels, each on one line as `tilec` prints it
/// (`schedule "host" {tile = {...}, order = [...], ...}`).
fn kernel_schedules(f: &tilec::ir::Function) -> Vec<String> {
    f.walk()
        .into_iter()
        .filter_map(|op| match &f.ops[op].kind {
            tilec::ir::OpKind::Kernel(k) => {
                let s = &k.schedule;
                let mut body = String::new();
                let names = |r: usize| s.cache.iter().find(|c| c.read == r).map_or_else(|| format!("r{r}"), |c| c.read_name.clone());
                tilec::ir::schedule::write_schedule_body(s, &mut body, "", &names).ok()?;
                let one_line = body.lines().map(str::trim).collect::<Vec<_>>().join(" ").replace("{ ", "{").replace(", }", "}").replace(" }", "}");
                Some(format!("schedule \"{}\" {one_line}", s.target))
            }
            _ => None,
        })
        .collect()
}

/// Which baseline `--baseline` measures.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
enum BaselineKind {
    /// numpy/OpenBLAS and onnxruntime (`benchmarks/baseline.py`).
    Libraries,
    /// TVM MetaSchedule (`benchmarks/tvm_baseline.py`).
    Tvm,
}

/// What one baseline measurement says besides its time.
#[derive(Default)]
struct BaselineRun {
    library: String,
    /// Seconds the baseline spent tuning (TVM), where it tunes.
    tuning_s: Option<f64>,
}

/// The first Python of `candidates` that runs.
fn first_python(candidates: impl IntoIterator<Item = String>) -> Option<String> {
    candidates.into_iter().find(|p| std::process::Command::new(p).arg("-c").arg("pass").output().is_ok_and(|o| o.status.success()))
}

/// The baseline of `kind` on the same workload: what it is and its median
/// seconds, or why it was skipped.
/// The baseline's median for workload `path` (and, given `tilec_lib`, the
/// median and minimum of that library's kernels, timed in turns with it).
fn run_baseline(path: &Path, threads: usize, kind: BaselineKind, tvm_trials: u32, tilec_lib: Option<&Path>) -> Result<(BaselineRun, f64, Option<(f64, f64)>), String> {
    // Each found once per run, not once per workload: $TILEC_PYTHON, then
    // the environment tools/bench-env.sh makes, then the system's.
    static PYTHON: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    static TVM_PYTHON: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let venv = |name: &str| {
        let p = repo_root().join(".tools").join(name).join("bin/python");
        p.is_file().then(|| p.display().to_string())
    };
    let system = || ["/usr/bin/python3".to_string(), "python3".to_string()];
    let (script, python) = match kind {
        BaselineKind::Libraries => ("benchmarks/baseline.py", PYTHON.get_or_init(|| first_python(std::env::var("TILEC_PYTHON").ok().into_iter().chain(venv("bench-venv")).chain(system())))),
        BaselineKind::Tvm => ("benchmarks/tvm_baseline.py", TVM_PYTHON.get_or_init(|| first_python(std::env::var("TILEC_TVM_PYTHON").ok().into_iter().chain(venv("tvm-venv")).chain(system())))),
    };
    let python = python.as_deref().ok_or("no python3")?;
    let script = repo_root().join(script);
    let mut command = std::process::Command::new(python);
    command.arg(&script).arg(path).arg("--threads").arg(threads.to_string());
    if kind == BaselineKind::Tvm {
        command.arg("--trials").arg(tvm_trials.to_string());
    }
    if let Some(lib) = tilec_lib {
        command.arg("--tilec-lib").arg(lib);
    }
    let out = command
        .env("OMP_NUM_THREADS", threads.to_string())
        .env("OPENBLAS_NUM_THREADS", threads.to_string())
        .env("MKL_NUM_THREADS", threads.to_string())
        .env("TVM_NUM_THREADS", threads.to_string())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let doc: Json = serde_json::from_slice(&out.stdout).map_err(|_| {
        let err = String::from_utf8_lossy(&out.stderr);
        // The last line of a traceback says what went wrong.
        format!("baseline failed: {}", err.trim().lines().last().unwrap_or(""))
    })?;
    match (doc["library"].as_str(), doc["median_s"].as_f64(), doc["skipped"].as_str()) {
        (Some(lib), Some(t), _) => {
            let ours = doc["tilec_median_s"].as_f64().zip(doc["tilec_min_s"].as_f64());
            Ok((BaselineRun { library: lib.to_string(), tuning_s: doc["tuning_s"].as_f64() }, t, ours))
        }
        (_, _, Some(why)) => Err(why.to_string()),
        _ => Err("baseline gave no figure".into()),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
    };
    match run(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(d) => {
            let choice = if std::io::stderr().is_terminal() { ColorChoice::Auto } else { ColorChoice::Never };
            SourceMap::new().emit(&mut StandardStream::stderr(choice).lock(), &d.0);
            ExitCode::FAILURE
        }
    }
}

/// `--from`: the saved runs as one table (then one of the tuning curves of
/// the runs that have them), and with `--plot` a chart: the curves if the
/// runs have them, else the bar chart.
fn report_from(cli: &Cli) -> Result<bool, Diagnostics> {
    let runs = cli.from.iter().map(|p| report::load(p)).collect::<Result<Vec<_>, _>>().map_err(|e| Diagnostic::error(e).with_help("pass files written by `tilec-bench --json`"))?;
    let with_curves = runs.iter().filter(|r| curve::has_curves(r)).count();
    if cli.plot.is_some() && with_curves > 0 && with_curves < runs.len() {
        let (with, without): (Vec<&report::Run>, Vec<&report::Run>) = runs.iter().partition(|r| curve::has_curves(r));
        let names = |rs: &[&report::Run]| rs.iter().map(|r| format!("`{}`", r.name)).collect::<Vec<_>>().join(", ");
        return Err(Diagnostic::error("cannot draw saved runs with tuning curves and runs without them in one chart")
            .with_note(format!("with curves: {}; without: {}", names(&with), names(&without)))
            .with_help("pass the `--curve --json` documents alone to draw their curves, or the others alone for the bar chart")
            .into());
    }
    print!("{}", report::markdown(&runs));
    if with_curves > 0 {
        print!("\n{}", curve::markdown(&runs));
    }
    if let Some(svg) = &cli.plot {
        if with_curves > 0 {
            curve::plot(&runs, svg).map_err(Diagnostic::error)?;
        } else {
            report::plot(&runs, svg).map_err(Diagnostic::error)?;
        }
    }
    Ok(true)
}

/// `--curve` needs searches that measure: checked before
/// anything runs. A strategy whose pipeline does not parse is left to its
/// rows, which report the error as without `--curve`.
fn check_curve(cli: &Cli, strategies: &[String], target: &Target, threads: usize) -> Result<(), Diagnostics> {
    let example = "e.g. --strategy=random --search-options='measure-top-k=20'";
    let registry = tilec_codegen::registry();
    for s in strategies {
        if s == "plain" {
            return Err(Diagnostic::error("--curve needs a search that measures; strategy `plain` runs no search").with_help(format!("pass a search strategy that measures, {example}")).into());
        }
        let text = pipeline_for(s, cli.seed, &cli.search_options);
        let mut sources = SourceMap::new();
        let file = sources.add("<pipeline>", text.clone());
        let Ok(pipeline) = parse_pipeline(&text, file, &registry) else { continue };
        match tilec_codegen::evaluator::search_evaluator(&pipeline, Some(target), threads) {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(Diagnostic::error(format!("--curve needs a search that measures; strategy `{s}` with --search-options='{}' measures nothing", cli.search_options.trim()))
                    .with_help(format!("ask for measurements in --search-options: measure-top-k=K (K > 0), or trials=N for a strategy that takes it; {example}"))
                    .into());
            }
            Err(why) => return Err(Diagnostic::error(format!("--curve: strategy `{s}` cannot measure on this machine: {why}")).into()),
        }
    }
    Ok(())
}

/// With `--curve`, the bar of one run's measurements: out of the planned
/// count when the search options give it, with the best GFLOP/s so far.
fn measurement_bar(multi: &MultiProgress, visible: bool, planned: Option<u64>) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let (bar, template) = match planned {
        Some(n) => (ProgressBar::new(n), "  {spinner} {bar:24} {pos}/{len} measurements, {elapsed} {msg}"),
        None => (ProgressBar::no_length(), "  {spinner} {pos} measurements, {elapsed} {msg}"),
    };
    bar.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
    let bar = multi.add(bar);
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    bar
}

/// The `curves` of the `--json` document: per run and op searched, the
/// run's fields, then the curve's, then the final pick's GFLOP/s
/// (tilec-bench's timing of the compiled workload) and the run's error.
fn curves_json(rows: &[Row], cli: &Cli, target: &str, threads: usize) -> Vec<Json> {
    let cpu = tilec::target::host::cpu_model();
    let mut out = Vec::new();
    for r in rows {
        for c in r.curves.iter().flatten() {
            let head = json!({
                "workload": r.workload,
                "strategy": r.strategy,
                "seed": cli.seed,
                "search_options": cli.search_options.trim(),
                "target": target,
                "threads": threads,
                "cpu": cpu,
            });
            let mut j = curve::curve_json(head, c);
            let (final_gflops, error) = match &r.result {
                Ok(m) => (Some(m.flops as f64 / m.median_s / 1e9), c.points.is_empty().then(|| "the search measured nothing".to_string())),
                Err(e) => (None, Some(e.clone())),
            };
            j["final_gflops"] = json!(final_gflops);
            j["error"] = json!(error);
            out.push(j);
        }
    }
    out
}

fn run(cli: &Cli) -> Result<bool, Diagnostics> {
    // The chart is drawn at the end: a path it cannot be written to is
    // reported before the runs, not after them.
    if let Some(svg) = &cli.plot {
        tilec::input::check_writable(svg).map_err(|why| Diagnostic::error(format!("cannot write `{}`: {why}", svg.display())))?;
    }
    if !cli.from.is_empty() {
        return report_from(cli);
    }
    if let Some(records) = &cli.model_quality {
        let mut sources = SourceMap::new();
        let mut targets = tilec_codegen::driver::target_set(&mut sources, &cli.target_dir)?;
        let target = targets.resolve(&mut sources, cli.target.as_deref().unwrap_or("host"))?;
        if cli.files.is_empty() {
            return Err(Diagnostic::error("--model-quality needs the workload files the records are of").with_help("e.g. tilec-bench --model-quality run.records.jsonl benchmarks/workloads/gemm_1024.tile").into());
        }
        let rows = quality::model_quality(records, &cli.files, &target).map_err(Diagnostic::error)?;
        if cli.json {
            println!("{}", serde_json::to_string_pretty(&quality::to_json(&rows, &target.name, records)).expect("JSON"));
        } else {
            print!("{}", quality::markdown(&rows));
        }
        return Ok(!rows.is_empty());
    }
    let threads = tilec::target::host::threads_or_every_core(cli.threads);
    let mut sources = SourceMap::new();
    let mut targets = tilec_codegen::driver::target_set(&mut sources, &cli.target_dir)?;
    let target = targets.resolve(&mut sources, cli.target.as_deref().unwrap_or("host"))?;
    if target.kind != TargetKind::Cpu {
        return Err(Diagnostic::error(format!("tilec-bench runs on this machine's CPU; `{}` is a {} target", target.name, target.kind.name())).with_help("pass a CPU target, e.g. --target=host").into());
    }
    if let Err(missing) = tilec_codegen::driver::host_can_run(&tilec_codegen::driver::llvm_target_of(&target)) {
        return Err(Diagnostic::error(format!("code for `{}` cannot run on this machine: it lacks {missing}", target.name)).with_help("pass --target=host").into());
    }
    let strategies: Vec<String> = if cli.strategy.is_empty() { vec!["plain".to_string()] } else { cli.strategy.clone() };
    if cli.curve {
        check_curve(cli, &strategies, &target, threads)?;
    }
    if cli.in_turns && (cli.baseline != Some(BaselineKind::Libraries) || threads != 1) {
        return Err(Diagnostic::error("--in-turns times tilec and the library baseline in turns, in one process on one thread")
            .with_help(format!("pass --baseline and --threads=1{}", if threads != 1 { format!(" (not {threads})") } else { String::new() }))
            .into());
    }
    // The peak ratios use: a peak measured now (--peak, which also caches
    // it), else one an earlier --peak cached for this machine, else the
    // target's nominal figure (and the report says which).
    let (peak, measured_source) = if cli.peak {
        eprintln!("measuring this machine's peak ({threads} thread(s))...");
        let p = measure_peak(&target, threads).map_err(|e| Diagnostic::error(format!("cannot measure the peak: {e}")))?;
        if let Err(e) = tilec::calibration::store(&p) {
            eprintln!("warning: the measured peak is not cached: {e}");
        }
        (Some(p), "measured")
    } else {
        (tilec::calibration::load(threads), "cached")
    };
    let peak_only = cli.peak && cli.files.is_empty() && cli.strategy.is_empty();
    let files: Vec<PathBuf> = if peak_only {
        Vec::new()
    } else if cli.files.is_empty() {
        let dir = repo_root().join("benchmarks/workloads");
        DEFAULT_WORKLOADS.iter().map(|w| dir.join(format!("{w}.tile"))).collect()
    } else {
        cli.files.clone()
    };
    let nominal = target.nominal_peak_gflops("f32", threads);
    let (peak_gflops, peak_source) = match &peak {
        Some(p) => (Some(p.gflops), measured_source),
        None => (nominal, "nominal"),
    };

    let dir = tempfile::tempdir().map_err(|e| Diagnostic::error(format!("cannot make a temporary folder: {e}")))?;
    let total = (files.len() * strategies.len()) as u64;
    let bar = if total > 0 && std::io::stderr().is_terminal() { ProgressBar::new(total) } else { ProgressBar::hidden() };
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}").unwrap_or_else(|_| ProgressStyle::default_bar()));
    // With --curve, a second bar under it counts each run's measurements.
    let multi = MultiProgress::new();
    let visible = !bar.is_hidden();
    let bar = if cli.curve && visible { multi.add(bar) } else { bar };
    let planned = curve::planned_measurements(&cli.search_options);
    let env = Env { targets: &targets, target: &target, threads, dir: dir.path() };
    let mut rows = Vec::new();
    for path in &files {
        let workload = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        for strategy in &strategies {
            bar.set_message(format!("{workload} ({strategy})"));
            let watch = cli.curve.then(|| CurveWatch { log: curve::SharedLog::default(), progress: measurement_bar(&multi, visible, planned) });
            let result = run_one(cli, env, path, strategy, watch.as_ref());
            let curves = watch.as_ref().and_then(|w| {
                w.progress.finish_and_clear();
                multi.remove(&w.progress);
                curve::curves(&w.log)
            });
            if !cli.json && visible {
                let best = curves.iter().flatten().filter_map(curve::OpCurve::best).reduce(f64::max).map_or(String::new(), |b| format!(": best {b:.2} GFLOP/s"));
                bar.println(format!("{workload} ({strategy}) done{best}"));
            }
            rows.push(Row { workload: workload.clone(), strategy: strategy.clone(), result, curves });
            bar.inc(1);
        }
    }
    bar.finish_and_clear();

    // A curve run that measured nothing failed, whatever its kernel did.
    let all_ok = rows.iter().all(|r| r.result.as_ref().is_ok_and(|m| m.check != Some(false)) && r.curves.iter().flatten().all(|c| !c.points.is_empty()));
    let mut out = String::new();
    let bandwidth = peak.as_ref().map(|p| p.bandwidth_gbs);
    // Each row is held to the peak of the instruction its products use.
    let row_peaks: Vec<Option<Peak>> = rows.iter().map(|r| r.result.as_ref().ok().and_then(|m| row_peak(m.product_types, &target, peak.as_ref(), threads))).collect();
    let records: Vec<Json> = rows.iter().zip(&row_peaks).map(|(r, p)| row_json(r, p.as_ref(), bandwidth)).collect();
    let mut doc = json!({
        "machine": machine(),
        "target": target.name,
        "threads": threads,
        "peak": {
            "source": peak_source,
            "gflops": peak_gflops,
            "lanes": peak.as_ref().map(|p| p.lanes),
            "bandwidth_gbs": peak.as_ref().map(|p| p.bandwidth_gbs),
            "dot_gops": peak.as_ref().map(|p| p.dots.iter().map(|(n, g)| (n.clone(), json!(g))).collect::<serde_json::Map<_, _>>()),
        },
        "repeat": cli.repeat,
        "rounds": cli.rounds,
        "warmup": cli.warmup,
        "seed": cli.seed,
        "weights": cli.weights,
        "records": records,
    });
    if cli.curve {
        doc["cpu"] = json!(tilec::target::host::cpu_model());
        doc["search_options"] = json!(cli.search_options.trim());
        doc["curves"] = json!(curves_json(&rows, cli, &target.name, threads));
    }
    let this_run = || [report::Run { name: "this run".into(), doc: doc.clone() }];
    if let Some(svg) = &cli.plot {
        if cli.curve {
            curve::plot(&this_run(), svg).map_err(Diagnostic::error)?;
        } else {
            report::plot(&this_run(), svg).map_err(Diagnostic::error)?;
        }
    }
    if cli.json {
        out = serde_json::to_string_pretty(&doc).unwrap_or_default();
        out.push('\n');
    } else {
        use std::fmt::Write as _;
        writeln!(out, "machine: {}; target `{}`, {threads} thread(s)", machine(), target.name).ok();
        match (&peak, peak_gflops) {
            (Some(p), _) => {
                let dots: String = p.dots.iter().map(|(n, g)| format!(", {g:.1} GOP/s {n}")).collect();
                let when = if measured_source == "cached" { " (cached by an earlier --peak on this machine)" } else { "" };
                let chains = p.fma_chains.map_or(String::new(), |c| format!(" (reached with {c} FMA chains: latency × FMA units)"));
                writeln!(out, "measured peak{when}: {:.1} GFLOP/s f32 FMA ({}-lane vectors){chains}{dots}, {:.1} GB/s triad", p.gflops, p.lanes, p.bandwidth_gbs).ok()
            }
            (None, Some(g)) => writeln!(out, "peak: {g:.1} GFLOP/s, the target's nominal figure (pass --peak to measure it)").ok(),
            (None, None) => writeln!(out, "peak: unknown").ok(),
        };
        // The column says whose peak the ratio is to.
        let pct_header = if peak.is_some() { "% peak" } else { "% nominal" };
        if !rows.is_empty() {
            writeln!(out, "{:<24} {:<9} {:>9} {:>6} {:>11} {:>9} {:>9} {:>6} {:>22} {:>7}", "workload", "strategy", "search s", "meas", "median ms", "GFLOP/s", pct_header, "check", "baseline GFLOP/s", "ratio").ok();
        }
        for (r, row_peak) in rows.iter().zip(&row_peaks) {
            match &r.result {
                Ok(m) => {
                    let gflops = m.flops as f64 / m.median_s / 1e9;
                    let pct = row_peak.as_ref().map_or("-".to_string(), |p| format!("{:.1}", 100.0 * gflops / p.gops));
                    let check = match m.check {
                        Some(true) => "ok",
                        Some(false) => "FAIL",
                        None => "-",
                    };
                    let (base, ratio) = match &m.baseline {
                        Some(Ok(b)) => {
                            let g = m.flops as f64 / b.median_s / 1e9;
                            (format!("{g:.1} ({})", b.run.library), format!("{:.2}", gflops / g))
                        }
                        Some(Err(_)) => ("skipped".to_string(), "-".to_string()),
                        None => ("-".to_string(), "-".to_string()),
                    };
                    let meas = m.measurements.map_or("-".to_string(), |n| n.to_string());
                    writeln!(out, "{:<24} {:<9} {:>9.2} {:>6} {:>11.3} {:>9.2} {:>9} {:>6} {:>22} {:>7}", r.workload, r.strategy, m.search_s, meas, m.median_s * 1e3, gflops, pct, check, base, ratio).ok();
                }
                Err(e) => {
                    let first = e.lines().next().unwrap_or("").trim_start_matches("error: ");
                    writeln!(out, "{:<24} {:<9} error: {first}", r.workload, r.strategy).ok();
                }
            }
        }
        // Rows held to another peak than the f32 FMA's say whose.
        let f32_of = if peak.is_some() { "f32 FMA" } else { "nominal f32" };
        for (r, row_peak) in rows.iter().zip(&row_peaks) {
            let Ok(m) = &r.result else { continue };
            match row_peak {
                Some(p) if p.of != f32_of => writeln!(out, "% peak: {} ({}) is held to {}'s {:.1} GOP/s", r.workload, r.strategy, p.of, p.gops).ok(),
                None => {
                    let (a, b) = m.product_types.map_or(("?", "?"), |(a, b)| (a.name(), b.name()));
                    writeln!(out, "% peak: {} ({}) has none: no peak was measured for the instruction that multiplies {a} x {b} on `{}` (32-bit multiplies where there is no dot intrinsic)", r.workload, r.strategy, target.name).ok()
                }
                Some(_) => None,
            };
        }
        // Memory-bound rows (a GEMV): bytes moved per second, against the
        // measured triad bandwidth where there is one.
        for r in &rows {
            let Ok(m) = &r.result else { continue };
            if m.bytes == 0 || (m.flops as f64 / m.bytes as f64) >= MEMORY_BOUND_INTENSITY {
                continue;
            }
            let gbs = m.bytes as f64 / m.median_s / 1e9;
            let of = match &peak {
                Some(p) => format!(", {:.0}% of the measured {:.1} GB/s triad", 100.0 * gbs / p.bandwidth_gbs, p.bandwidth_gbs),
                None => " (pass --peak to measure the triad bandwidth)".to_string(),
            };
            writeln!(out, "memory-bound: {} ({}) moves {:.1} MB at {gbs:.1} GB/s{of}", r.workload, r.strategy, m.bytes as f64 / 1e6).ok();
        }
        // A tuning baseline (TVM): its tuning time beside the search's.
        for r in &rows {
            let Ok(m) = &r.result else { continue };
            let Some(Ok(b)) = &m.baseline else { continue };
            let Some(tuning_s) = b.run.tuning_s else { continue };
            writeln!(out, "tuning time: {} ({}) searched in {:.1} s, {} tuned in {tuning_s:.1} s ({:.1}x the search's time)", r.workload, r.strategy, m.search_s, b.run.library, tuning_s / m.search_s.max(1e-9)).ok();
        }
        let skipped: Vec<String> = rows.iter().filter_map(|r| r.result.as_ref().ok().and_then(|m| m.baseline.as_ref()).and_then(|b| b.as_ref().err()).map(|why| format!("{}: {why}", r.workload))).collect();
        if let Some(first) = skipped.first() {
            writeln!(out, "baselines skipped: {first}{}", if skipped.len() > 1 { format!(" (and {} more)", skipped.len() - 1) } else { String::new() }).ok();
        }
        if cli.curve {
            write!(out, "\n{}", curve::markdown(&this_run())).ok();
        }
    }
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(all_ok)
}

fn row_json(r: &Row, peak: Option<&Peak>, bandwidth: Option<f64>) -> Json {
    match &r.result {
        Ok(m) => {
            let gflops = m.flops as f64 / m.median_s / 1e9;
            let gbs = m.bytes as f64 / m.median_s / 1e9;
            let (baseline, ratio) = match &m.baseline {
                Some(Ok(b)) => {
                    let g = m.flops as f64 / b.median_s / 1e9;
                    let rounds: Vec<f64> = b.round_medians_s.iter().map(|t| t * 1e3).collect();
                    (json!({ "library": b.run.library, "median_ms": b.median_s * 1e3, "round_medians_ms": rounds, "gflops": g, "tuning_s": b.run.tuning_s }), json!(gflops / g))
                }
                Some(Err(why)) => (json!({ "skipped": why }), Json::Null),
                None => (Json::Null, Json::Null),
            };
            json!({
                "workload": r.workload,
                "strategy": r.strategy,
                "search_s": m.search_s,
                "compile_s": m.compile_s,
                "measurements": m.measurements,
                "median_ms": m.median_s * 1e3,
                "round_medians_ms": m.round_medians_s.iter().map(|t| t * 1e3).collect::<Vec<_>>(),
                "in_turns": m.in_turns,
                "min_ms": m.min_s * 1e3,
                "flops": m.flops,
                "gflops": gflops,
                "peak_fraction": peak.map(|p| gflops / p.gops),
                "peak_of": peak.map(|p| p.of.as_str()),
                "bytes": m.bytes,
                "gbs": gbs,
                "bandwidth_fraction": bandwidth.map(|b| gbs / b),
                "check": m.check,
                "baseline": baseline,
                "ratio_to_baseline": ratio,
                "schedules": m.schedules,
            })
        }
        Err(e) => json!({ "workload": r.workload, "strategy": r.strategy, "error": e }),
    }
}
