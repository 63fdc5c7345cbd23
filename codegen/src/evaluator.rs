//! The evaluator: compiles a candidate with LLVM (a shared library for a
//! CPU, PTX for a CUDA GPU), runs it in a `tilec-worker` process with a
//! time limit, checks its results against a reference, and reports the
//! median and spread of its run times.

use crate::LlvmTarget;
use crate::compile_worker::{CompileJob, CompileWorker, compile_job};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tilec::interp::{Tensor, compare::compare, npy::read_npy};
use tilec::ir::Module;
use tilec::measure::{Evaluator, Failure, Measurement, Timing};
use tilec_runtime::worker::{Code, Job, WorkerFailure, run_in_worker};

/// Where the worker executable is: `$TILEC_WORKER`, else next to the
/// running executable (cargo puts all of tilec's binaries in one folder),
/// or one folder up (a test binary runs from cargo's `deps/`).
pub fn find_worker() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TILEC_WORKER") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join("tilec-worker"), dir.join("../tilec-worker")].into_iter().find(|p| p.is_file())
}

/// What candidates are compiled for.
pub enum Machine {
    /// This machine's CPU (`threads` of its cores).
    Cpu(LlvmTarget),
    /// GPU 0, through the CUDA driver: the target gives the chip.
    Cuda(Box<tilec::target::Target>),
}

pub struct WorkerEvaluator {
    pub machine: Machine,
    pub worker: PathBuf,
    pub dir: PathBuf,
    pub timeout: Duration,
    pub warmup: u32,
    pub repeat: u32,
    pub threads: usize,
    pub seed: u64,
    /// The expected results for `seed`'s inputs; candidates that differ
    /// are failures.
    pub reference: Option<Vec<Tensor>>,
    /// A candidate is cut off once it has run this many times longer than
    /// the fastest candidate of the same op needs for all its runs: it has
    /// lost, and measuring it to the end would only spend the tuning
    /// budget (a 5 s kernel would cost 30 s). 0 disables it.
    pub cutoff_factor: f64,
    /// Seconds of timed runs after which a candidate's timing stops (see
    /// `Job::time_budget_s`).
    pub time_budget_s: f64,
    /// Seconds of timed runs a candidate gets at least (see
    /// `Job::min_time_s`).
    pub min_time_s: f64,
    /// Where a CPU candidate's data is when each timed run starts: warm
    /// from the runs before, flushed from the caches, or as in a network
    /// (its weights flushed, its activations warm).
    pub caches: tilec_runtime::Caches,
    /// How many of the current op's parameters are its weights, hoisted
    /// to the end (`tilec::ir::weights::hoist_weights`, as
    /// `lower_for_measurement` hoists them): the ones
    /// `Caches::Network` flushes. Set with the reference.
    pub weights: Option<usize>,
    /// Where candidates compile: a child process under a time limit, or
    /// this one when there is no `tilec` executable to run as
    /// `compile-worker` (docs/search.md, "Measurement").
    pub compiler: Option<CompileWorker>,
    /// The fastest median so far for the current op (reset by
    /// `set_reference_from`).
    best_median_s: Option<f64>,
    count: u64,
    /// The current op's candidates already compiled, by their printed
    /// module: the search times its finalists again (docs/search.md), and
    /// compiling each again would cost more than the runs.
    compiled: HashMap<String, Compiled>,
}

/// A candidate's kernels, host plan and code (a linked library or a PTX
/// file).
struct Compiled {
    kernels: Vec<crate::KernelAbi>,
    plan: tilec_runtime::HostPlan,
    code: Code,
}

impl WorkerEvaluator {
    /// An evaluator of CPU candidates for `target` (this machine's CPU).
    pub fn new(target: LlvmTarget, worker: PathBuf, dir: PathBuf) -> Self {
        Self::for_machine(Machine::Cpu(target), worker, dir)
    }

    /// An evaluator of candidates for `machine`.
    pub fn for_machine(machine: Machine, worker: PathBuf, dir: PathBuf) -> Self {
        WorkerEvaluator { machine, worker, dir, timeout: Duration::from_secs(20), warmup: 1, repeat: 5, threads: 1, seed: 0, reference: None, cutoff_factor: 10.0, time_budget_s: 1.0, min_time_s: 0.05, caches: tilec_runtime::Caches::Warm, weights: None, compiler: CompileWorker::find(), best_median_s: None, count: 0, compiled: HashMap::new() }
    }

    /// The time limit for the next candidate: the fixed timeout, or less
    /// once a fast candidate is known (never under the worker's setup:
    /// starting it and loading the code, [`WorkerEvaluator::setup_seconds`]).
    fn time_limit(&self) -> Duration {
        match self.best_median_s {
            Some(best) if self.cutoff_factor > 0.0 => {
                let runs = (self.warmup + self.repeat.max(1)) as f64;
                Duration::from_secs_f64((best * runs * self.cutoff_factor).max(self.setup_seconds())).min(self.timeout)
            }
            _ => self.timeout,
        }
    }

    /// Seconds a worker may take before its first run: a second on a CPU
    /// (start, load the library, make the inputs); ten on a GPU, where it
    /// also opens a CUDA context, has the driver compile the PTX (seconds
    /// for a large unrolled kernel) and copies the inputs over.
    fn setup_seconds(&self) -> f64 {
        match self.machine {
            Machine::Cpu(_) => 1.0,
            Machine::Cuda(_) => 10.0,
        }
    }

    /// Forgets the fastest time seen: the next candidates are of another op.
    pub fn new_op(&mut self) {
        self.best_median_s = None;
        for (_, c) in self.compiled.drain() {
            let _ = std::fs::remove_file(c.code.path());
        }
    }

    /// Computes the reference results of `func` with the interpreter.
    pub fn set_reference_from(&mut self, original: &Module, func: &str) -> Result<(), String> {
        let mut f = original.func(func).ok_or_else(|| format!("no function @{func}"))?.clone();
        // Weights are inputs like the others (random), after them, as the
        // compiled candidate takes them.
        self.weights = Some(tilec::ir::weights::hoist_weights(&mut f).len());
        let f = &f;
        let inputs: Vec<Tensor> = f
            .params
            .iter()
            .enumerate()
            .map(|(i, &p)| Tensor::random(f.value_type(p).as_tensor().expect("tensor parameter"), Tensor::input_seed(self.seed, i)))
            .collect();
        self.reference = Some(tilec::interp::run_function(f, &inputs).map_err(|e| e.to_string())?);
        self.new_op();
        Ok(())
    }

    /// Runs `job` in the compile worker, or in this process without one.
    fn compile_in_worker(&self, job: CompileJob) -> Result<(), Failure> {
        match &self.compiler {
            // (An error in words, a timeout or a crash with its reason.)
            Some(worker) => worker.run(&job).map_err(|e| Failure::Compile(e.to_string())),
            None => compile_job(&job).map_err(|e| Failure::Compile(e.0)),
        }
    }

    /// Compiles (and, for a CPU, links) `candidate`, or finds it compiled
    /// for this op.
    fn compile(&mut self, candidate: &Module, func: &str) -> Result<&Compiled, Failure> {
        let key = format!("{func}\n{}", tilec::syntax::print_module(candidate));
        if !self.compiled.contains_key(&key) {
            let f = candidate.func(func).ok_or_else(|| Failure::Other(format!("no function @{func}")))?;
            let name = format!("cand{}", self.count);
            // (`compile_job` makes the folder its output goes in.)
            let compiled = match &self.machine {
                Machine::Cpu(target) => {
                    let (mlir, kernels) = crate::emit_cpu_module(f).map_err(|e| Failure::Compile(e.0))?;
                    let object = self.dir.join(format!("{name}.o"));
                    self.compile_in_worker(CompileJob::Cpu { mlir, target: target.clone(), object: object.clone() })?;
                    let library = crate::link_object_file(&object, &self.dir, &name).map_err(|e| Failure::Compile(e.0))?;
                    let _ = std::fs::remove_file(&object);
                    Compiled { kernels, plan: tilec_runtime::HostPlan::of(f), code: Code::Cpu { library } }
                }
                Machine::Cuda(target) => {
                    let (mlir, kernels) = crate::emit_gpu_module(f, target).map_err(|e| Failure::Compile(e.0))?;
                    let ptx = self.dir.join(format!("{name}.ptx"));
                    self.compile_in_worker(CompileJob::Gpu { mlir, chip: target.isa.cpu.clone(), features: target.isa.features.clone(), ptx: ptx.clone() })?;
                    Compiled { kernels, plan: tilec_runtime::HostPlan::of(f), code: Code::Cuda { ptx } }
                }
            };
            self.compiled.insert(key.clone(), compiled);
        }
        Ok(&self.compiled[&key])
    }
}

/// Numbers candidates across every evaluator of the process, so that two
/// evaluators sharing a folder never overwrite each other's files.
static CANDIDATES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Evaluator for WorkerEvaluator {
    fn threads(&self) -> u32 {
        self.threads.max(1) as u32
    }

    fn evaluate(&mut self, candidate: &Module, func: &str) -> Measurement {
        self.count = CANDIDATES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let count = self.count;
        let outputs = self.reference.as_ref().map(|_| self.dir.join(format!("cand{count}-out")));
        let time_limit = self.time_limit();
        let weights = self.weights;
        let compiled = self.compile(candidate, func)?;
        if let Some(d) = &outputs {
            std::fs::create_dir_all(d).map_err(|e| Failure::Other(format!("cannot create {}: {e}", d.display())))?;
        }
        let job = Job {
            code: compiled.code.clone(),
            kernels: compiled.kernels.clone(),
            plan: tilec_runtime::HostPlan { weights, ..compiled.plan.clone() },
            inputs: Vec::new(),
            seed: self.seed,
            warmup: self.warmup,
            repeat: self.repeat,
            time_budget_s: Some(self.time_budget_s),
            min_time_s: Some(self.min_time_s),
            threads: self.threads,
            caches: self.caches,
            outputs_dir: outputs.clone(),
        };
        let report = run_in_worker(&self.worker, &job, time_limit).map_err(|e| match e {
            WorkerFailure::Crashed(m) => Failure::Crash(m),
            WorkerFailure::TimedOut(d) => Failure::Timeout(d.as_secs_f64()),
            other => Failure::Other(other.to_string()),
        });
        let report = report?;
        if let Some(e) = report.error {
            return Err(Failure::Crash(e));
        }
        if let (Some(reference), Some(dir)) = (&self.reference, &outputs) {
            check_results(reference, dir)?;
            let _ = std::fs::remove_dir_all(dir);
        }
        let timing = Timing::of(&report.times_s).ok_or_else(|| Failure::Other("no timed run".into()))?;
        self.best_median_s = Some(self.best_median_s.map_or(timing.median_s, |b| b.min(timing.median_s)));
        Ok(timing)
    }
}

fn check_results(reference: &[Tensor], dir: &Path) -> Result<(), Failure> {
    for (i, want) in reference.iter().enumerate() {
        let got = read_npy(&dir.join(format!("result{i}.npy")), &want.ty).map_err(Failure::Other)?;
        let c = compare(&got, want);
        if !c.passed {
            return Err(Failure::WrongResult(format!(
                "result {i}: max abs err {:.3e}, max rel err {:.3e} (rtol {:.0e}) at element {}",
                c.max_abs_err, c.max_rel_err, c.rtol, c.worst_index
            )));
        }
    }
    Ok(())
}

/// The evaluator for a pipeline whose `search` measures (`measure-top-k`
/// above 0): a CPU evaluator timing candidates on `threads` threads (as
/// many as the chosen kernel will run on: the model predicts for them,
/// and a schedule's parallel split only shows on them) when the target's
/// code runs on this machine, a GPU one for a CUDA target when the driver
/// sees a GPU, and the worker is found. `Ok(None)`: nothing measures;
/// `Err`: why there is no evaluator (the search report says it).
pub fn search_evaluator(pipeline: &tilec::pass::Pipeline, target: Option<&tilec::target::Target>, threads: usize) -> Result<Option<Box<dyn tilec::measure::Evaluator>>, String> {
    let measures = pipeline.passes.iter().any(|p| p.decl.name == "search" && tilec_passes::search::measures(&p.options));
    let Some(t) = target.filter(|_| measures) else { return Ok(None) };
    match t.kind {
        tilec::target::TargetKind::Cuda => cuda_evaluator(t).map(Some),
        _ => cpu_evaluator(t, threads.max(1)).map(|e| Some(Box::new(e) as Box<dyn tilec::measure::Evaluator>)),
    }
}

/// The checking evaluator of candidates for CUDA target `t` on GPU 0, each
/// run in a worker; `Err` says why there is none (no CUDA driver or GPU,
/// no `tilec-worker`).
pub fn cuda_evaluator(t: &tilec::target::Target) -> Result<Box<dyn tilec::measure::Evaluator>, String> {
    if t.kind != tilec::target::TargetKind::Cuda {
        return Err(format!("`{}` is not a CUDA target", t.name));
    }
    tilec_runtime::cuda::driver_status().map_err(|why| format!("`{}` is a GPU target, and {why}", t.name))?;
    let (worker, dir) = worker_and_folder()?;
    Ok(Box::new(CheckedEvaluator(WorkerEvaluator::for_machine(Machine::Cuda(Box::new(t.clone())), worker, dir))))
}

/// The worker executable, and the folder this process's candidates go in.
fn worker_and_folder() -> Result<(PathBuf, PathBuf), String> {
    let worker = find_worker().ok_or("the `tilec-worker` executable was not found next to `tilec` (set TILEC_WORKER)")?;
    Ok((worker, std::env::temp_dir().join(format!("tilec-search-{}", std::process::id()))))
}

/// The checking CPU evaluator for `target`, timing candidates on `threads`
/// threads; `Err` says why there is none (a GPU target, code this machine
/// cannot run, no `tilec-worker`).
pub fn cpu_evaluator(t: &tilec::target::Target, threads: usize) -> Result<CheckedEvaluator, String> {
    if t.kind != tilec::target::TargetKind::Cpu {
        return Err(format!("`{}` is a GPU target: its candidates are measured by `cuda_evaluator`", t.name));
    }
    let llvm = crate::driver::llvm_target_of(t);
    crate::driver::host_can_run(&llvm).map_err(|missing| format!("this machine cannot run code for `{}` (it lacks {missing})", t.name))?;
    let (worker, dir) = worker_and_folder()?;
    let mut e = WorkerEvaluator::new(llvm, worker, dir);
    e.threads = threads;
    Ok(CheckedEvaluator(e))
}

/// The worker evaluator, checking results against the interpreter when
/// the op is small enough for it.
pub struct CheckedEvaluator(pub WorkerEvaluator);

/// Iteration points above which the interpreter would take too long to
/// compute a reference (it runs about a million points a second).
const REFERENCE_POINTS: u64 = 20_000_000;

impl tilec::measure::Evaluator for CheckedEvaluator {
    fn evaluate(&mut self, candidate: &tilec::ir::Module, func: &str) -> tilec::measure::Measurement {
        self.0.evaluate(candidate, func)
    }

    fn threads(&self) -> u32 {
        tilec::measure::Evaluator::threads(&self.0)
    }

    fn set_reference(&mut self, reference: &tilec::ir::Module, func: &str) -> Result<(), String> {
        self.0.reference = None;
        self.0.new_op();
        let f = reference.func(func).ok_or_else(|| format!("no function @{func}"))?;
        // Known without a reference: `Caches::Network` needs it for ops
        // too large to check.
        self.0.weights = Some(tilec::ir::weights::weights_of(f).len());
        let points: u64 = f.walk().iter().filter_map(|&o| f.ops[o].kind.as_compute()).map(|c| c.iteration_points().unwrap_or(u64::MAX)).sum();
        if points > REFERENCE_POINTS {
            return Err(format!("{points} iteration points are too many for the interpreter (at most {REFERENCE_POINTS})"));
        }
        self.0.set_reference_from(reference, func)
    }
}

impl Drop for WorkerEvaluator {
    fn drop(&mut self) {
        self.new_op();
    }
}
