//! The measurement worker's protocol. A measurement runs in a separate
//! process (`tilec-worker`): a kernel that crashes, hangs or scribbles over
//! memory costs that one candidate, not the tuner. The parent sends a
//! [`Job`] as JSON on the worker's stdin and reads a [`Report`] from its
//! stdout; it kills the worker when it overruns its time. A GPU kernel
//! that faults leaves its CUDA context unusable and one that hangs holds
//! the GPU until its process dies, so GPU candidates run in workers too.

use crate::{Caches, CpuProgram, CudaProgram, HostPlan, KernelAbi};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tilec::interp::Tensor;

/// What to run and how often.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Job {
    pub code: Code,
    pub kernels: Vec<KernelAbi>,
    pub plan: HostPlan,
    /// Inputs: `.npy` files in parameter order, or generated from `seed`
    /// (as `tilec-run` does) when empty.
    pub inputs: Vec<PathBuf>,
    pub seed: u64,
    pub warmup: u32,
    pub repeat: u32,
    /// Stop timing once the timed runs add up to this many seconds (at
    /// least one run): a slow kernel's figure is precise after a run or
    /// two, and more would only spend the tuning budget. None: all runs.
    #[serde(default)]
    pub time_budget_s: Option<f64>,
    /// Go on past `repeat` runs until they have taken this many seconds
    /// of wall time (at most [`MAX_RUNS`] runs): five runs of a 0.3 ms
    /// kernel are one moment of a shared machine, and its median is that
    /// moment's. Wall time, not the timed runs' sum: what a run costs
    /// around its kernel (its inputs, outputs and cache state) is what
    /// the tuning waits for, and it spans the moment as well. Counted as
    /// kernel time, a 30 µs copy ran its 1000 runs, 1.1 s of the
    /// machine's time a candidate (ResNet-50 R4's `subsample` op: 9.2 of
    /// its search's 11.7 s). None: `repeat` runs.
    #[serde(default)]
    pub min_time_s: Option<f64>,
    /// CPU threads (unused by a CUDA job).
    pub threads: usize,
    /// Where a CPU job's data is when each timed run starts (unused by a
    /// CUDA job).
    #[serde(default)]
    pub caches: Caches,
    /// If set, the results of the last run are written here as
    /// `result<i>.npy`, for the parent to check.
    pub outputs_dir: Option<PathBuf>,
}

/// The compiled code a job runs.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Code {
    /// A shared library of CPU kernels.
    Cpu { library: PathBuf },
    /// A PTX module of the program's kernels, run on GPU 0; each run's
    /// time is the GPU's between CUDA events around the launches.
    Cuda { ptx: PathBuf },
}

impl Code {
    /// The file that holds the code.
    pub fn path(&self) -> &Path {
        match self {
            Code::Cpu { library } => library,
            Code::Cuda { ptx } => ptx,
        }
    }
}

/// The most timed runs `min_time_s` asks for.
pub const MAX_RUNS: usize = 1000;

/// What the worker measured: wall time of each timed run, in seconds.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub times_s: Vec<f64>,
    pub error: Option<String>,
}

/// Runs a job in this process (the worker's main calls this).
pub fn run_job(job: &Job) -> Report {
    match run_job_inner(job) {
        Ok(times_s) => Report { times_s, error: None },
        Err(e) => Report { times_s: Vec::new(), error: Some(e) },
    }
}

/// One run of a loaded program: its results and its kernels' seconds.
type RunOnce<'a> = Box<dyn Fn(&[Tensor]) -> Result<(Vec<Tensor>, f64), String> + 'a>;

fn run_job_inner(job: &Job) -> Result<Vec<f64>, String> {
    let run_once: RunOnce = match &job.code {
        Code::Cpu { library } => {
            let program = CpuProgram::load(library, job.kernels.clone(), job.plan.clone())?;
            let (threads, caches) = (job.threads, job.caches);
            Box::new(move |inputs| program.run_timed_with(inputs, threads, caches).map(|r| (r.results, r.kernel_seconds)))
        }
        Code::Cuda { ptx } => {
            let text = std::fs::read_to_string(ptx).map_err(|e| format!("cannot read {}: {e}", ptx.display()))?;
            let program = CudaProgram::load(&text, job.kernels.clone(), job.plan.clone())?;
            Box::new(move |inputs| program.run(inputs).map(|r| (r.results, r.kernel_seconds)))
        }
    };
    let inputs: Vec<Tensor> = if job.inputs.is_empty() {
        job.plan
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| Ok(Tensor::random(&p.tensor_type()?, Tensor::input_seed(job.seed, i))))
            .collect::<Result<_, String>>()?
    } else {
        job.plan.params.iter().zip(&job.inputs).map(|(p, path)| tilec::interp::npy::read_npy(path, &p.tensor_type()?)).collect::<Result<_, _>>()?
    };
    for _ in 0..job.warmup {
        run_once(&inputs)?;
    }
    let started = std::time::Instant::now();
    let (times, last) = timed_runs(job, || run_once(&inputs), || started.elapsed().as_secs_f64())?;
    if let Some(dir) = &job.outputs_dir {
        for (i, t) in last.iter().enumerate() {
            tilec::interp::npy::write_npy(&dir.join(format!("result{i}.npy")), t)?;
        }
    }
    Ok(times)
}

/// How running a job in a worker failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerFailure {
    /// The worker could not be started.
    Spawn(String),
    /// The worker died (a crash in the kernel): exit status and stderr.
    Crashed(String),
    /// It ran past its time and was killed.
    TimedOut(Duration),
    /// It answered something that is not a report.
    Protocol(String),
}

impl std::fmt::Display for WorkerFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerFailure::Spawn(e) => write!(f, "cannot start the worker: {e}"),
            WorkerFailure::Crashed(e) => write!(f, "the kernel crashed: {e}"),
            WorkerFailure::TimedOut(d) => write!(f, "the kernel ran past {:.1} s and was stopped", d.as_secs_f64()),
            WorkerFailure::Protocol(e) => write!(f, "the worker answered nonsense: {e}"),
        }
    }
}

/// Runs `job` in the worker executable `worker`, killing it after `timeout`.
pub fn run_in_worker(worker: &Path, job: &Job, timeout: Duration) -> Result<Report, WorkerFailure> {
    let text = serde_json::to_string(job).map_err(|e| WorkerFailure::Protocol(e.to_string()))?;
    let out = run_child(&mut Command::new(worker), &text, timeout)?;
    serde_json::from_str(out.trim()).map_err(|e| WorkerFailure::Protocol(format!("{e}: {out:.200}")))
}

/// Runs `command` as a child process with `input` on its stdin, killing it
/// after `timeout`; its stdout, once it exits with success. A child that
/// dies (a signal, a non-zero exit) is `Crashed`, with the last lines of
/// its stderr. The measurement worker and the compile worker
/// (`tilec compile-worker`, `tilec_codegen::compile_worker`) both run
/// under it.
pub fn run_child(command: &mut Command, input: &str, timeout: Duration) -> Result<String, WorkerFailure> {
    die_with_parent(command);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| WorkerFailure::Spawn(format!("{}: {e}", command.get_program().to_string_lossy())))?;
    // Read the pipes on threads so a chatty child cannot block on a full
    // pipe, and write the input on one so that a child which stops reading
    // (it crashed) cannot block the parent before its timeout starts.
    let mut in_pipe = child.stdin.take().expect("piped");
    let input = input.to_string();
    let in_thread = std::thread::spawn(move || in_pipe.write_all(input.as_bytes()));
    let mut out_pipe = child.stdout.take().expect("piped");
    let mut err_pipe = child.stderr.take().expect("piped");
    let out_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(WorkerFailure::TimedOut(timeout));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(WorkerFailure::Crashed(e.to_string())),
        }
    };
    // (A child that exited without reading all its input broke the pipe:
    // its exit status says what happened, not the write's error.)
    let _ = in_thread.join();
    let out = out_thread.join().unwrap_or_default();
    let err = err_thread.join().unwrap_or_default();
    if !status.success() {
        let how = match status.code() {
            Some(c) => format!("exit status {c}"),
            None => describe_signal(&status),
        };
        let tail: String = err.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        return Err(WorkerFailure::Crashed(if tail.is_empty() { how } else { format!("{how}: {tail}") }));
    }
    Ok(out)
}

/// Makes the child die when the thread that spawned it does (Linux's
/// parent-death signal). `run_child` waits on that thread for the child, so
/// this changes nothing while the parent lives; but a tuner that is killed
/// (^C, a time limit, `kill`) would otherwise leave a worker running its
/// candidate for as long as that takes, on the core the next run measures
/// on.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec the closure calls only prctl, getppid
    // and _exit, which are async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the signal was asked for.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_: &mut Command) {}

#[cfg(unix)]
fn describe_signal(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(11) => "segmentation fault (signal 11)".into(),
        Some(6) => "abort (signal 6)".into(),
        Some(8) => "floating-point exception (signal 8)".into(),
        Some(4) => "illegal instruction (signal 4: the kernel uses an instruction this CPU lacks)".into(),
        Some(s) => format!("killed by signal {s}"),
        None => "terminated".into(),
    }
}

#[cfg(not(unix))]
fn describe_signal(_: &std::process::ExitStatus) -> String {
    "terminated".into()
}

/// Runs `run` (results and kernel seconds) as `job` asks: `repeat` runs,
/// then on until `min_time_s` of wall time (`wall`: seconds since the
/// first run began) has passed, at most [`MAX_RUNS`], and no more once
/// the kernel seconds reach `time_budget_s`. The kernel seconds of every
/// run, and the last run's results.
fn timed_runs<R>(job: &Job, mut run: impl FnMut() -> Result<(R, f64), String>, wall: impl Fn() -> f64) -> Result<(Vec<f64>, R), String> {
    let mut times = Vec::new();
    let repeat = job.repeat.max(1) as usize;
    loop {
        let (results, seconds) = run()?;
        times.push(seconds);
        let spent: f64 = times.iter().sum();
        let enough = times.len() >= repeat && job.min_time_s.is_none_or(|min| wall() >= min);
        if enough || times.len() >= MAX_RUNS.max(repeat) || job.time_budget_s.is_some_and(|budget| spent >= budget) {
            return Ok((times, results));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(repeat: u32, min_time_s: Option<f64>, time_budget_s: Option<f64>) -> Job {
        Job {
            code: Code::Cpu { library: PathBuf::from("k.so") },
            kernels: Vec::new(),
            plan: HostPlan { params: Vec::new(), buffers: Vec::new(), results: Vec::new(), views: Vec::new(), weights: None },
            inputs: Vec::new(),
            seed: 0,
            warmup: 1,
            repeat,
            time_budget_s,
            min_time_s,
            threads: 1,
            caches: Caches::Warm,
            outputs_dir: None,
        }
    }

    /// How many runs a kernel of `kernel_s` seconds gets when each run
    /// takes `run_s` of wall time in all.
    fn runs(job: &Job, kernel_s: f64, run_s: f64) -> usize {
        let clock = std::cell::Cell::new(0.0);
        let (times, ()) = timed_runs(job, || {
            clock.set(clock.get() + run_s);
            Ok(((), kernel_s))
        }, || clock.get())
        .unwrap();
        times.len()
    }

    /// `min_time_s` is wall time: a 30 µs kernel whose runs take 1 ms each
    /// (inputs, outputs, caches) stops after 50 of them, not after the
    /// 1000 its kernel time alone would ask for; a 0.3 ms kernel that
    /// costs only itself runs 0.05 s of them; `repeat` and the budget
    /// still bound it.
    #[test]
    fn runs_go_on_for_min_time_of_wall_time() {
        let j = job(5, Some(0.05), Some(1.0));
        assert_eq!(runs(&j, 30e-6, 1e-3), 50);
        assert_eq!(runs(&j, 0.3e-3, 0.3e-3), 167);
        assert_eq!(runs(&j, 0.1, 0.1), 5);
        assert_eq!(runs(&j, 0.4, 0.4), 3, "the budget stops a slow kernel before `repeat`");
        assert_eq!(runs(&job(5, None, None), 30e-6, 1e-3), 5);
        assert_eq!(runs(&job(5, Some(10.0), None), 1e-6, 1e-6), MAX_RUNS);
    }

    /// A job without `caches` (written by a build from before it) still
    /// reads, with the caches warm as they were then.
    #[test]
    fn jobs_without_a_cache_state_run_warm() {
        let job = Job { caches: Caches::Flushed, ..job(5, None, None) };
        let mut json: serde_json::Value = serde_json::to_value(&job).unwrap();
        assert_eq!(json["caches"], "flushed");
        json.as_object_mut().unwrap().remove("caches");
        let old: Job = serde_json::from_value(json).unwrap();
        assert_eq!(old.caches, Caches::Warm);
        for name in Caches::NAMES {
            assert_eq!(name.parse::<Caches>().unwrap().name(), name);
        }
        assert!("cold".parse::<Caches>().unwrap_err().contains("warm, flushed, network"));
    }

    /// `Caches::Network` keeps the activations warm: the parameters before
    /// the plan's trailing weights; every other state, and a plan that
    /// does not say which are weights (one from before `weights`), none.
    #[test]
    fn the_network_cache_state_keeps_the_activations_warm() {
        let spec = |value| crate::program::BufferSpec { value, shape: vec![4], elem: "f32".into() };
        let plan = |weights| HostPlan { params: vec![spec(0), spec(1), spec(2)], buffers: vec![spec(3)], results: vec![spec(3)], views: Vec::new(), weights };
        assert_eq!(plan(Some(2)).activations(Caches::Network), [0]);
        assert_eq!(plan(Some(0)).activations(Caches::Network), [0, 1, 2]);
        assert_eq!(plan(Some(5)).activations(Caches::Network), Vec::<u32>::new());
        assert_eq!(plan(None).activations(Caches::Network), Vec::<u32>::new());
        assert_eq!(plan(Some(2)).activations(Caches::Flushed), Vec::<u32>::new());
        let mut json = serde_json::to_value(plan(Some(2))).unwrap();
        assert_eq!(json["weights"], 2);
        json.as_object_mut().unwrap().remove("weights");
        assert_eq!(serde_json::from_value::<HostPlan>(json).unwrap().weights, None);
    }
}
