//! `tilec-run`: runs a function of a tile file on concrete inputs.
//!
//! Inputs come from `.npy` files or from a seeded generator; outputs go to
//! `.npy` files and a summary (text or `--json`). `--check` compares the
//! result with the interpreter on the program as written, before any pass.
//! Every user error is a diagnostic and exit status 1: a tensor too large
//! for `--max-memory` included, which is refused before it is allocated.

use clap::{Parser, ValueEnum};
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use termcolor::{ColorChoice, StandardStream};
use tilec::diag::{Diagnostic, Diagnostics, SourceMap};
use tilec::interp::compare::{Comparison, compare};
use tilec::interp::memory::{format_bytes, parse_bytes};
use tilec::interp::npy::{read_npy, write_npy};
use tilec::interp::{Limits, MemoryBudget, MemoryError, Tensor, run_function_with};
use tilec::ir::{ElemType, Function, Module, OpKind, Type};
use tilec::pass::{PassManager, parse_pipeline};
use tilec::target::{Target, TargetKind};
use std::sync::Arc;
use tilec::verify::verify_module;
use tilec_runtime::program::CpuRunError;

#[derive(Parser, Debug)]
#[command(name = "tilec-run", version, about = "Run a function of a tile file on .npy or seeded random inputs")]
struct Cli {
    /// The tile file (`-` for stdin).
    input: String,

    /// The function to run (needed when the file has several).
    #[arg(long = "func", value_name = "NAME")]
    func: Option<String>,

    /// An input: parameter name (without `%`) and a .npy file. Repeatable.
    #[arg(long = "input", value_name = "NAME=PATH")]
    inputs: Vec<String>,

    /// Seed for generated inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,

    /// Generate the inputs not given with --input (by default, inputs are
    /// generated only when no --input is given at all).
    #[arg(long = "fill-random")]
    fill_random: bool,

    /// The weights file for the function's `weight` ops (safetensors). By
    /// default the input's path with the extension `.safetensors`.
    #[arg(long = "weights", value_name = "PATH")]
    weights: Option<PathBuf>,

    /// Where to write an output: result name and a .npy path. Repeatable.
    #[arg(long = "output", value_name = "NAME=PATH")]
    outputs: Vec<String>,

    /// Write every result to DIR/<name>.npy (and generated inputs to DIR/inputs/<name>.npy).
    #[arg(long = "output-dir", value_name = "DIR")]
    output_dir: Option<PathBuf>,

    /// Pass pipeline to run before executing.
    #[arg(long = "pass-pipeline", value_name = "PIPELINE")]
    pass_pipeline: Option<String>,

    /// How to execute the function.
    #[arg(long, value_enum, default_value_t = Backend::Interp)]
    backend: Backend,

    /// The target to compile for (`--backend=cpu|cuda`): a name from
    /// `tilec --list-targets` or a TOML file. By default the target the
    /// schedules name, else `host` for `cpu`. Its code must run here.
    #[arg(long, value_name = "NAME|PATH")]
    target: Option<String>,

    /// A folder of target description files (`*.toml`) to add to the known
    /// targets (repeatable; `TILEC_TARGET_PATH` adds folders too).
    #[arg(long = "target-dir", value_name = "DIR")]
    target_dir: Vec<PathBuf>,

    /// Threads for the parallel (core-level) loops (`--backend=cpu`; 0:
    /// one per core of this machine).
    #[arg(long, default_value_t = 0)]
    threads: usize,

    /// Keep the compiled artifacts in DIR: the object and shared library
    /// (`--backend=cpu`), or the PTX and its launch metadata (`cuda`).
    #[arg(long = "keep-dir", value_name = "DIR")]
    keep_dir: Option<PathBuf>,

    /// Compare the results with the interpreter on the program before any
    /// pass; fail if they differ by more than the element type's tolerance.
    #[arg(long)]
    check: bool,

    /// Timed runs (the median, min and max are reported).
    #[arg(long, default_value_t = 1)]
    repeat: usize,

    /// Untimed runs before the timed ones.
    #[arg(long, default_value_t = 0)]
    warmup: usize,

    /// Time each kernel (`--backend=cpu`): a table of the kernels in run
    /// order, with their median time over the timed runs, their share of
    /// the run, and GFLOP/s where the kernel's compute op is known.
    #[arg(long)]
    profile: bool,

    /// Print a JSON summary on stdout instead of text.
    #[arg(long)]
    json: bool,

    /// Print the result values (up to 64 per tensor).
    #[arg(long)]
    print: bool,

    /// Most memory the run's tensors may take at once: inputs, the
    /// interpreter's intermediate tensors and buffers (or the compiled
    /// code's buffers and kernel stacks) and results. Bytes, or a number
    /// with K, M, G or T (binary: 16G is 16 GiB). Default: 3/4 of this
    /// machine's memory (MemTotal in /proc/meminfo, or the cgroup's
    /// memory limit if lower), 8 GiB where neither can be read.
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = parse_bytes)]
    max_memory: Option<u64>,
}

#[derive(Copy, Clone, Debug, ValueEnum, PartialEq, Eq)]
enum Backend {
    /// The reference interpreter.
    Interp,
    /// Compiled for this machine's CPU (through MLIR and LLVM) and run.
    Cpu,
    /// Compiled to PTX for a CUDA target and run on GPU 0 through the
    /// CUDA driver (which must be installed).
    Cuda,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Interp => "interp",
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
        }
    }
}

/// How a function is executed: interpreted, or compiled and loaded.
enum Executable<'f> {
    Interp(&'f Function),
    Cpu { program: tilec_codegen::CpuProgram, threads: usize },
    Cuda(tilec_runtime::CudaProgram),
}

impl Executable<'_> {
    /// The results and the time taken: by the kernels alone for compiled
    /// code (no copies in or out), the whole call for the interpreter; on
    /// the CPU backend, each kernel's time too (in run order).
    /// `limits` bound the memory of the run, inputs and results included.
    fn run(&self, inputs: &[Tensor], limits: &Limits, memory: &MemoryLimit) -> Result<TimedRun, Diagnostic> {
        match self {
            Executable::Interp(f) => {
                let start = Instant::now();
                let results = run_function_with(f, inputs, limits).map_err(|e| match e.memory() {
                    Some(m) => memory.diagnostic("interpreter: ", m),
                    None => Diagnostic::error(format!("interpreter: {e}")),
                })?;
                Ok(TimedRun { results, time: start.elapsed(), each_kernel: Vec::new(), prepack: None })
            }
            Executable::Cpu { program, threads } => {
                let run = program.run_within(inputs, *threads, limits).map_err(|e| match e {
                    CpuRunError::Memory(m) => memory.diagnostic("compiled code: ", &m),
                    CpuRunError::Failed(why) => Diagnostic::error(format!("compiled code: {why}")),
                })?;
                let each_kernel = run.each_kernel_seconds.iter().map(|&s| Duration::from_secs_f64(s)).collect();
                let prepack = run.prepack_seconds.map(Duration::from_secs_f64);
                Ok(TimedRun { results: run.results, time: Duration::from_secs_f64(run.kernel_seconds), each_kernel, prepack })
            }
            Executable::Cuda(program) => {
                let run = program.run(inputs).map_err(|e| Diagnostic::error(format!("GPU: {e}")))?;
                Ok(TimedRun { results: run.results, time: Duration::from_secs_f64(run.kernel_seconds), each_kernel: Vec::new(), prepack: None })
            }
        }
    }
}

/// One run's results and times.
struct TimedRun {
    results: Vec<Tensor>,
    time: Duration,
    /// Each kernel's time, in run order, prepack kernels left out (CPU
    /// backend only; else empty).
    each_kernel: Vec<Duration>,
    /// The prepack kernels' time (CPU backend, where there are any): not
    /// in `time`, since a deployment lays its weights out once.
    prepack: Option<Duration>,
}

/// One row of `--profile`: a kernel of the compiled function.
struct KernelProfile {
    /// Its label (that of the compute op it came from), if any.
    label: Option<String>,
    /// The median of its times over the timed runs.
    median: Duration,
    /// The flops of the compute op it came from, where that is known.
    flops: Option<u64>,
}

impl KernelProfile {
    /// Its GFLOP/s, where its flops are known and it took any time.
    fn gflops(&self) -> Option<f64> {
        self.flops.filter(|_| !self.median.is_zero()).map(|fl| fl as f64 / self.median.as_secs_f64() / 1e9)
    }
}

/// The `--profile` rows: `compiled`'s kernels in run order (as the CPU
/// backend numbers them), with the median of their `times` (one vector
/// per run). A kernel's flops are those of the compute op of `original`
/// it came from: the n-th kernel labelled L is taken to come from the
/// n-th compute op labelled L (tiling keeps the order of the ops); a
/// kernel with no label, or more kernels than compute ops of a label,
/// get none, and ops that fusion folded into a kernel's epilogue count
/// only as the ops they were folded into.
fn kernel_profile(original: &Function, compiled: &Function, times: &[Vec<Duration>]) -> Vec<KernelProfile> {
    let mut flops_by_label: HashMap<&str, VecDeque<u64>> = HashMap::new();
    for &op in &original.regions[original.body].ops {
        if let OpKind::Compute(c) = &original.ops[op].kind
            && let Some(label) = &c.label
        {
            flops_by_label.entry(label).or_default().push_back(tilec::ir::cost::op_flops(original, op));
        }
    }
    let labels = compiled.regions[compiled.body].ops.iter().filter_map(|&op| match &compiled.ops[op].kind {
        OpKind::Kernel(k) if !k.prepack => Some(k.label.clone()),
        _ => None,
    });
    labels
        .enumerate()
        .map(|(i, label)| {
            let flops = label.as_deref().and_then(|l| flops_by_label.get_mut(l)).and_then(|q| q.pop_front());
            let median = median(times.iter().filter_map(|run| run.get(i).copied()).collect());
            KernelProfile { label, median, flops }
        })
        .collect()
}

/// The memory limit of the run and where it comes from (for messages).
struct MemoryLimit {
    bytes: u64,
    origin: String,
}

impl MemoryLimit {
    fn of(cli: &Cli) -> MemoryLimit {
        match cli.max_memory {
            Some(bytes) => MemoryLimit { bytes, origin: "set with --max-memory".into() },
            None => default_memory_limit(),
        }
    }

    fn limits(&self) -> Limits {
        Limits::at_most(self.bytes)
    }

    /// The error for memory that could not be had; `prefix` says who
    /// asked (`interpreter: `).
    fn diagnostic(&self, prefix: &str, e: &MemoryError) -> Diagnostic {
        let d = Diagnostic::error(format!("{prefix}{e}"));
        if e.refused {
            return d.with_help(format!(
                "the system has less memory free than the limit ({}, {}) allows: lower --max-memory, free memory, or make the shape smaller",
                format_bytes(self.bytes),
                self.origin
            ));
        }
        let wanted = e.bytes.and_then(|b| b.checked_add(e.in_use));
        let raise = match wanted {
            Some(w) => format!("raise the limit (at least `--max-memory {}`) if this machine has the memory, or make the shape smaller", size_argument(w)),
            None => "make the shape smaller: no limit can allow this".to_string(),
        };
        d.with_note(format!("the limit is {} ({})", format_bytes(self.bytes), self.origin)).with_help(raise)
    }
}

/// `bytes` rounded up to a `--max-memory` argument in whole MiB, GiB or TiB.
fn size_argument(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    const TIB: u64 = 1 << 40;
    match bytes {
        b if b <= GIB => format!("{}M", b.div_ceil(MIB).max(1)),
        b if b <= TIB => format!("{}G", b.div_ceil(GIB)),
        b => format!("{}T", b.div_ceil(TIB)),
    }
}

/// What `--max-memory` is when not given: 3/4 of the memory this process
/// can have (the rest is for the program, the OS and other processes), or
/// 8 GiB where that cannot be read.
fn default_memory_limit() -> MemoryLimit {
    let physical = meminfo_total();
    let cgroup = cgroup_memory_limit();
    let (bytes, source) = match (physical, cgroup) {
        (Some(p), Some(c)) if c < p => (c, format!("this process's cgroup memory limit, {}", format_bytes(c))),
        (Some(p), _) => (p, format!("this machine's memory, {}", format_bytes(p))),
        (None, Some(c)) => (c, format!("this process's cgroup memory limit, {}", format_bytes(c))),
        (None, None) => return MemoryLimit { bytes: 8 << 30, origin: "the default where this machine's memory cannot be read; set it with --max-memory".into() },
    };
    MemoryLimit { bytes: bytes / 4 * 3, origin: format!("3/4 of {source}; set it with --max-memory") }
}

/// `MemTotal` of /proc/meminfo, in bytes.
fn meminfo_total() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.trim_start_matches("MemTotal:").trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The tightest memory limit of this process's cgroup and its ancestors
/// (cgroup v2 `memory.max`, or v1 `memory.limit_in_bytes`), if any.
fn cgroup_memory_limit() -> Option<u64> {
    let read = |path: &Path| std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse::<u64>().ok());
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut limit: Option<u64> = None;
    for line in own.lines() {
        // `0::/path` (v2) or `N:memory:/path` (v1).
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let (root, file) = match controllers {
            "" => (PathBuf::from("/sys/fs/cgroup"), "memory.max"),
            c if c.split(',').any(|c| c == "memory") => (PathBuf::from("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
            _ => continue,
        };
        let mut dir = root.join(path.trim_start_matches('/'));
        loop {
            if let Some(l) = read(&dir.join(file)) {
                limit = Some(limit.map_or(l, |x| x.min(l)));
            }
            if dir == root || !dir.pop() {
                break;
            }
        }
    }
    limit
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
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(diags) => {
            let choice = if std::io::stderr().is_terminal() { ColorChoice::Auto } else { ColorChoice::Never };
            sources.emit(&mut StandardStream::stderr(choice).lock(), &diags.0);
            ExitCode::FAILURE
        }
    }
}

/// A parameter's or result's user-facing name: its source name, else `argN` / `resultN`.
fn display_name(f: &Function, v: tilec::ir::Value, fallback: String) -> String {
    f.values[v].name.clone().unwrap_or(fallback)
}

/// Names of the results: the returned values' source names, else
/// `resultN`; made unique first come, first served (a later duplicate
/// gets a suffix `_1`, `_2`, ...). Taken from the program as
/// written, so a pipeline cannot change them.
fn result_names(f: &Function) -> Vec<String> {
    let ret = f.return_op().map(|op| f.ops[op].operands.clone()).unwrap_or_default();
    let wanted: Vec<String> = ret.iter().enumerate().map(|(i, &v)| display_name(f, v, format!("result{i}"))).collect();
    let mut names: Vec<String> = Vec::new();
    for w in &wanted {
        let mut name = w.clone();
        let mut k = 1;
        while names.contains(&name) {
            name = format!("{w}_{k}");
            k += 1;
        }
        names.push(name);
    }
    names
}

fn split_assignment(s: &str, flag: &str) -> Result<(String, PathBuf), Diagnostic> {
    match s.split_once('=') {
        Some((name, path)) if !name.is_empty() && !path.is_empty() => Ok((name.trim_start_matches('%').to_string(), PathBuf::from(path))),
        _ => Err(Diagnostic::error(format!("`{flag} {s}` is not of the form NAME=PATH")).with_help(format!("e.g. `{flag} A=a.npy`"))),
    }
}

fn load(cli: &Cli, sources: &mut SourceMap) -> Result<Module, Diagnostics> {
    let file = tilec::input::read_source(sources, &cli.input)?;
    let module = tilec::syntax::parse(sources, file)?;
    let diags = verify_module(&module);
    if diags.has_errors() {
        return Err(diags);
    }
    Ok(module)
}

fn pick_function<'m>(module: &'m Module, name: Option<&str>) -> Result<&'m Function, Diagnostic> {
    let names = || module.funcs.iter().map(|f| format!("@{}", f.name)).collect::<Vec<_>>().join(", ");
    match name {
        Some(n) => {
            let n = n.trim_start_matches('@');
            module.func(n).ok_or_else(|| {
                let mut d = Diagnostic::error(format!("no function `@{n}` in the file")).with_note(format!("the file defines {}", names()));
                if let Some(best) = tilec::diag::closest(n, module.funcs.iter().map(|f| f.name.as_str())) {
                    d = d.with_help(format!("did you mean `--func {best}`?"));
                }
                d
            })
        }
        None if module.funcs.len() == 1 => Ok(&module.funcs[0]),
        None => Err(Diagnostic::error(format!("the file defines {} functions; choose one with --func", module.funcs.len())).with_note(format!("the functions are {}", names()))),
    }
}

/// The tensors of the function's weights (`wanted`, in order), from the
/// weights file.
fn load_weights(cli: &Cli, func: &str, wanted: &[(String, tilec::ir::TensorType)]) -> Result<Vec<Tensor>, Diagnostic> {
    let path = match (&cli.weights, cli.input.as_str()) {
        (Some(p), _) => p.clone(),
        (None, "-") => {
            return Err(Diagnostic::error(format!("@{func} reads {} weight(s), and a tile file read from stdin has no weights file beside it", wanted.len()))
                .with_help("name the weights file with `--weights PATH`"));
        }
        (None, input) => tilec::interp::weights::sidecar_path(std::path::Path::new(input)),
    };
    let bytes: u64 = wanted.iter().map(|(_, t)| t.size_bytes().unwrap_or(0)).sum();
    let file = tilec::interp::weights::read_sidecar(&path).map_err(|e| {
        Diagnostic::error(format!("@{func} reads {} weight(s) ({}), but its weights file cannot be used: {e}", wanted.len(), tilec::interp::memory::format_bytes(bytes)))
            .with_help("`tilec import` writes NET.safetensors beside NET.tile; name another file with `--weights PATH`")
    })?;
    tilec::interp::weights::bind_weights(wanted, file, &path).map_err(|e| Diagnostic::error(e).with_help("the weights file must hold every tensor the function's `weight` ops name, with their shapes and element types"))
}

/// The inputs, from files or generated, in parameter order. Each is
/// counted against the memory limit before it is read or generated.
fn gather_inputs(cli: &Cli, f: &Function, real_params: usize, memory: &MemoryLimit) -> Result<(Vec<Tensor>, Vec<bool>), Diagnostics> {
    let params: Vec<String> = f.params[..real_params].iter().enumerate().map(|(i, &p)| display_name(f, p, format!("arg{i}"))).collect();
    let mut given: Vec<Option<PathBuf>> = vec![None; params.len()];
    let mut diags = Diagnostics::new();
    for spec in &cli.inputs {
        let (name, path) = match split_assignment(spec, "--input") {
            Ok(x) => x,
            Err(d) => {
                diags.push(d);
                continue;
            }
        };
        match params.iter().position(|p| *p == name) {
            Some(i) if given[i].is_some() => diags.push(Diagnostic::error(format!("input `{name}` is given twice"))),
            Some(i) => given[i] = Some(path),
            None => {
                let mut d = Diagnostic::error(format!("@{} has no parameter `{name}`", f.name)).with_note(format!("its parameters are: {}", params.join(", ")));
                if let Some(best) = tilec::diag::closest(&name, params.iter().map(String::as_str)) {
                    d = d.with_help(format!("did you mean `{best}`?"));
                }
                diags.push(d);
            }
        }
    }
    // A bad --input already explains itself; "missing" errors would only add noise.
    let input_errors = !diags.is_empty();
    let generate_missing = cli.inputs.is_empty() || cli.fill_random;
    let mut tensors = Vec::new();
    let mut generated = Vec::new();
    let mut budget = MemoryBudget::new(&memory.limits());
    for (i, &p) in f.params[..real_params].iter().enumerate() {
        let Type::Tensor(ty) = f.value_type(p) else { continue };
        let what = || format!("input `{}` ({ty})", params[i]);
        let wanted = given[i].is_some() || generate_missing;
        if wanted {
            if let Err(e) = budget.reserve(ty.size_bytes(), what) {
                diags.push(memory.diagnostic("", &e));
                // Later inputs are still checked, against what fits.
                continue;
            }
        }
        match &given[i] {
            Some(path) => match read_npy(path, ty) {
                Ok(t) => tensors.push(t),
                Err(msg) => diags.push(Diagnostic::error(format!("input `{}`: {msg}", params[i]))),
            },
            None if generate_missing => {
                match Tensor::try_random(ty, Tensor::input_seed(cli.seed, i)) {
                    Ok(t) => tensors.push(t),
                    Err(_) => diags.push(memory.diagnostic("", &MemoryError::refused(what(), ty.size_bytes().unwrap_or(u64::MAX)))),
                }
                generated.push(true);
                continue;
            }
            None if input_errors => {}
            None => diags.push(
                Diagnostic::error(format!("missing input `{}` ({ty})", params[i]))
                    .with_help(format!("give it with `--input {}=file.npy`, or add --fill-random to generate the inputs not given", params[i])),
            ),
        }
        generated.push(false);
    }
    diags.into_result().map(|()| (tensors, generated))
}

/// The target of `--backend=cpu|cuda`: --target, else the one the
/// schedules name, else (`cpu`) this machine; of the backend's kind.
fn resolve_target(cli: &Cli, sources: &mut SourceMap, module: &Module, kind: TargetKind) -> Result<Arc<Target>, Diagnostics> {
    let fallback = (kind == TargetKind::Cpu).then_some("host");
    let (_, target) = tilec_codegen::driver::resolve_target(sources, &cli.target_dir, cli.target.as_deref(), module, fallback)?;
    let Some(target) = target else {
        return Err(Diagnostic::error("`--backend=cuda` needs a CUDA target, and no schedule names one")
            .with_help("pass --target=sm80 or --target=sm90, and schedule every op for it")
            .into());
    };
    if target.kind != kind {
        let (backend, wanted, help) = match kind {
            TargetKind::Cpu => ("cpu", "CPU", "schedule the ops for a CPU target (`tilec --list-targets`), or pass --target=host"),
            _ => ("cuda", "CUDA", "schedule the ops for a CUDA target (sm80, sm90), or use --backend=cpu"),
        };
        return Err(Diagnostic::error(format!("`--backend={backend}` needs a {wanted} target; `{}` is a {} target", target.name, target.kind.name())).with_help(help).into());
    }
    Ok(target)
}

/// Compiles `f` (after `pipeline`) for `target`, links and loads it.
fn build_cpu(cli: &Cli, f: &Function, target: &Target, pipeline: Option<&str>) -> Result<tilec_codegen::CpuProgram, Diagnostics> {
    let llvm = tilec_codegen::driver::llvm_target_of(target);
    if let Err(missing) = tilec_codegen::driver::host_can_run(&llvm) {
        return Err(Diagnostic::error(format!("code for `{}` cannot run on this machine: it lacks {missing}", target.name))
            .with_help("pass --target=host to compile for this machine, or use `tilec --emit=obj` to only compile")
            .into());
    }
    // A compute op left untiled by the pipeline is the user's to fix (a
    // pipeline without `tile`); anything else failing to compile a
    // verified, tiled function is ours.
    untiled_compute_ops(f, pipeline)?;
    let compiled = tilec_codegen::compile_function_cpu(f, &llvm).map_err(|e| {
        let pipeline_flag = pipeline.map(|p| format!(" --pass-pipeline='{p}'")).unwrap_or_default();
        Diagnostic::error(format!("cannot compile @{}: {}", f.name, e.0))
            .with_note("this is a bug in tilec: the function verified and its compute ops are tiled, so it should compile")
            .with_help(format!("please report it, with the tile file and the output of `tilec --emit=mlir --target={}{pipeline_flag} {}`", target.name, cli.input))
    })?;
    let scratch;
    let dir = match &cli.keep_dir {
        Some(d) => d.clone(),
        None => {
            scratch = tempfile::tempdir().map_err(|e| Diagnostic::error(format!("cannot make a temporary folder: {e}")))?;
            scratch.path().to_path_buf()
        }
    };
    let so = tilec_codegen::link_shared(&compiled.artifacts.object, &dir, &f.name).map_err(|e| Diagnostic::error(e.0))?;
    // The library stays mapped after its file (in a temporary folder) is removed.
    let program = tilec_codegen::CpuProgram::load(&so, compiled.kernels.clone(), compiled.plan.clone()).map_err(Diagnostic::error)?;
    Ok(program.with_names_of(f))
}

/// Errors for the compute ops of `f` that have no loop nest (code is
/// generated from loops), pointing at each.
fn untiled_compute_ops(f: &Function, pipeline: Option<&str>) -> Result<(), Diagnostics> {
    let mut diags = Diagnostics::new();
    for &op in &f.regions[f.body].ops {
        if let tilec::ir::OpKind::Compute(c) = &f.ops[op].kind {
            let label = c.label.as_deref().map(|l| format!(" \"{l}\"")).unwrap_or_default();
            let help = match pipeline {
                Some(p) if p != tilec_codegen::driver::default_compiled_pipeline() => "every compute op must be tiled before it is compiled: give it a schedule and run `tile` in --pass-pipeline, or leave --pass-pipeline out for the default pipeline (which schedules and tiles every op)",
                _ => "every compute op must be tiled before it is compiled: give it a schedule",
            };
            diags.push(Diagnostic::error(format!("cannot compile @{}: compute op{label} has no loop nest", f.name)).at(f.op_spans[op], "not tiled").with_help(help));
        }
    }
    diags.into_result()
}

/// Compiles `f` (after the pipeline) to PTX for `target` and loads it on
/// GPU 0; the driver is looked for first.
fn build_cuda(cli: &Cli, f: &Function, target: &Target, pipeline: Option<&str>) -> Result<tilec_runtime::CudaProgram, Diagnostics> {
    tilec_runtime::cuda::driver_status().map_err(|why| {
        Diagnostic::error(format!("`--backend=cuda` cannot run here: {why}"))
            .with_help("run on a machine with an NVIDIA GPU and its driver, or compile only with `tilec --emit=ptx`")
    })?;
    untiled_compute_ops(f, pipeline)?;
    let compiled = tilec_codegen::compile_function_gpu(f, target).map_err(|e| {
        let pipeline_flag = pipeline.map(|p| format!(" --pass-pipeline='{p}'")).unwrap_or_default();
        Diagnostic::error(format!("cannot compile @{}: {}", f.name, e.0))
            .with_note("this is a bug in tilec: the function verified and its compute ops are tiled, so it should compile")
            .with_help(format!("please report it, with the tile file and the output of `tilec --emit=ptx --target={}{pipeline_flag} {}`", target.name, cli.input))
    })?;
    if let Some(dir) = &cli.keep_dir {
        std::fs::create_dir_all(dir).map_err(|e| Diagnostic::error(format!("cannot create `{}`: {e}", dir.display())))?;
        let ptx = dir.join(format!("{}.ptx", f.name));
        std::fs::write(&ptx, &compiled.ptx).map_err(|e| Diagnostic::error(format!("cannot write `{}`: {e}", ptx.display())))?;
    }
    Ok(tilec_runtime::CudaProgram::load(&compiled.ptx, compiled.kernels, tilec_runtime::HostPlan::of(f)).map_err(Diagnostic::error)?)
}

/// The element type that sets `f`'s peak: the operands of its largest
/// compute op where the target lists a peak for them (an f16 × f16 → f32
/// GEMM runs at the f16 Tensor Core rate, not the f32 one; u8 × i8 → i32
/// at the i8 dot-product rate), else `f`'s result type.
fn peak_elem(target: &Target, f: &Function) -> Option<ElemType> {
    let largest = f.walk().into_iter().filter(|&o| f.ops[o].kind.as_compute().is_some()).max_by_key(|&o| f.ops[o].kind.as_compute().and_then(|c| c.iteration_points()).unwrap_or(0));
    let operands = largest.and_then(|o| {
        let c = f.ops[o].kind.as_compute()?;
        let elems: Vec<ElemType> = f.ops[o].operands[..c.reads.len()].iter().filter_map(|&v| f.value_type(v).readable().map(|t| t.elem)).collect();
        // u8 × i8 is the i8 rate (VNNI multiplies unsigned by signed bytes).
        let key = |e: ElemType| if e == ElemType::U8 { ElemType::I8 } else { e };
        let first = key(*elems.first()?);
        elems.iter().all(|&e| key(e) == first).then_some(first)
    });
    operands.filter(|e| target.peak_gflops.contains_key(e.name())).or_else(|| Some(f.result_types.first()?.elem))
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs.get(xs.len() / 2).copied().unwrap_or_default()
}

fn run(cli: &Cli, sources: &mut SourceMap) -> Result<bool, Diagnostics> {
    if cli.repeat == 0 {
        return Err(Diagnostic::error("--repeat must be at least 1").into());
    }
    // Where results go is checked before any work, not after it.
    check_output_paths(cli)?;
    let memory = MemoryLimit::of(cli);
    let mut module = load(cli, sources)?;
    let func_name = pick_function(&module, cli.func.as_deref())?.name.clone();
    // The real inputs are the parameters; weights come from their file,
    // as trailing parameters (`tilec::ir::weights`).
    let real_params = module.func(&func_name).map_or(0, |f| f.params.len());
    // The pipeline sees the weights as weights (`prepack` lays them out
    // once); `lower-to-mlir` makes them trailing parameters in the same
    // order, as `hoist_weights` does here for the interpreter.
    let with_weights = module.clone();
    let wanted = module.funcs.iter_mut().find(|f| f.name == func_name).map(tilec::ir::weights::hoist_weights).unwrap_or_default();
    let original = pick_function(&module, Some(&func_name))?;
    let names = result_names(original);
    check_output_names(cli, original, &names)?;

    if cli.backend == Backend::Interp && (cli.target.is_some() || !cli.target_dir.is_empty() || cli.threads != 0 || cli.keep_dir.is_some()) {
        return Err(Diagnostic::error("--target, --target-dir, --threads and --keep-dir are options of `--backend=cpu` and `--backend=cuda`").into());
    }
    if cli.backend == Backend::Cuda && cli.threads != 0 {
        return Err(Diagnostic::error("--threads is an option of `--backend=cpu`").into());
    }
    if cli.profile && cli.backend != Backend::Cpu {
        return Err(Diagnostic::error("--profile is an option of `--backend=cpu`").with_help("each kernel is timed as the CPU backend runs it; pass --backend=cpu").into());
    }
    let target = match cli.backend {
        Backend::Cpu => Some(resolve_target(cli, sources, &module, TargetKind::Cpu)?),
        Backend::Cuda => Some(resolve_target(cli, sources, &module, TargetKind::Cuda)?),
        Backend::Interp => None,
    };
    let (mut inputs, mut generated) = gather_inputs(cli, original, real_params, &memory)?;
    if !wanted.is_empty() {
        inputs.extend(load_weights(cli, &func_name, &wanted)?);
        generated.resize(inputs.len(), false);
    }

    let threads = tilec::target::host::threads_or_every_core(cli.threads);
    // The program to execute: after the pipeline, if any.
    let mut transformed = with_weights;
    let pipeline_text = match (&cli.pass_pipeline, cli.backend) {
        (Some(text), _) => Some(text.clone()),
        (None, Backend::Cpu | Backend::Cuda) => Some(tilec_codegen::driver::default_compiled_pipeline()),
        (None, Backend::Interp) => None,
    };
    if let Some(text) = &pipeline_text {
        let registry = tilec_codegen::registry();
        let file = sources.add("<pass-pipeline>", text.clone());
        let pipeline = parse_pipeline(text, file, &registry)?;
        // A search that measures gets the evaluator `tilec` installs: its
        // candidates run in workers on this machine's CPU, or on its GPU
        // for a CUDA target, so one `tilec-run` tunes and times, on the
        // threads it runs the result on.
        let evaluator = tilec_codegen::evaluator::search_evaluator(&pipeline, target.as_deref(), threads);
        let mut pm = PassManager::new(pipeline);
        if let Some(t) = &target {
            pm.set_target(t.clone());
        }
        pm.install_evaluator(evaluator);
        pm.set_kernel_threads(threads);
        pm.run(&mut transformed)?;
    }
    // Weights the pipeline left as ops (it had no `lower-to-mlir`) become
    // the trailing parameters the inputs have.
    if let Some(f) = transformed.funcs.iter_mut().find(|f| f.name == func_name) {
        tilec::ir::weights::hoist_weights(f);
    }
    let f = transformed.func(&func_name).ok_or_else(|| Diagnostic::error(format!("the pipeline removed `@{func_name}`")))?;

    let executable = match (&target, cli.backend) {
        (Some(t), Backend::Cuda) => Executable::Cuda(build_cuda(cli, f, t, pipeline_text.as_deref())?),
        (Some(t), _) => Executable::Cpu { program: build_cpu(cli, f, t, pipeline_text.as_deref())?, threads },
        (None, _) => Executable::Interp(f),
    };
    let limits = memory.limits();
    for _ in 0..cli.warmup {
        executable.run(&inputs, &limits, &memory)?;
    }
    let mut times = Vec::new();
    let mut kernel_times = Vec::new();
    let mut prepack_times = Vec::new();
    let mut results = Vec::new();
    for _ in 0..cli.repeat {
        // The last run's results are dropped first: a run's memory is its own.
        results.clear();
        let run = executable.run(&inputs, &limits, &memory)?;
        results = run.results;
        times.push(run.time);
        kernel_times.push(run.each_kernel);
        prepack_times.extend(run.prepack);
    }
    let profile = cli.profile.then(|| kernel_profile(original, f, &kernel_times));
    let prepack = (!prepack_times.is_empty()).then(|| median(prepack_times));
    let (med, min, max) = (median(times.clone()), *times.iter().min().unwrap_or(&Duration::ZERO), *times.iter().max().unwrap_or(&Duration::ZERO));
    let flops = tilec::ir::cost::flops(original);
    let gflops = if med.as_secs_f64() > 0.0 { flops as f64 / med.as_secs_f64() / 1e9 } else { 0.0 };
    // On CPUs, this machine's peak where `tilec-bench --peak` measured it
    // (cached per machine and thread count), of the instruction that
    // computes the products (a dot intrinsic's for u8 × i8 or bf16 where
    // the target offers one; `Calibration::peak_for`); else the target's
    // nominal figure for the arithmetic's type, and the output says which.
    let arithmetic = target.as_ref().and_then(|t| peak_elem(t, original));
    let products = tilec::ir::cost::product_types(original);
    let measured = (cli.backend == Backend::Cpu).then(|| tilec::calibration::load(threads)).flatten().zip(target.as_ref()).and_then(|(c, t)| c.peak_for(t, products));
    // Integer arithmetic counts operations, not floating-point ones.
    let unit = if arithmetic.is_some_and(ElemType::is_int) { "GOP/s" } else { "GFLOP/s" };
    let peak_source = if measured.is_some() { "measured" } else { "nominal" };
    let peak = match &measured {
        Some(p) => Some(p.gops),
        // For the cores a CPU run uses (all of a GPU).
        None => target.as_ref().zip(arithmetic).and_then(|(t, e)| t.nominal_peak_gflops(e.name(), if cli.backend == Backend::Cpu { threads } else { 1 })),
    };

    let checks: Vec<Option<Comparison>> = if cli.check {
        // The results are kept for the comparison: they count against the limit.
        let held = results.iter().map(|t| t.ty.size_bytes().unwrap_or(0)).fold(0u64, u64::saturating_add);
        let reference_limits = Limits { held_bytes: held, ..memory.limits() };
        let reference = Executable::Interp(original).run(&inputs, &reference_limits, &memory)?.results;
        results.iter().zip(&reference).map(|(got, want)| Some(compare(got, want))).collect()
    } else {
        vec![None; results.len()]
    };
    let passed = checks.iter().flatten().all(|c| c.passed);

    write_outputs(cli, original, &names, &results, &inputs, &generated)?;

    let mut out = String::new();
    if cli.json {
        let outputs: Vec<_> = names
            .iter()
            .zip(&results)
            .zip(&checks)
            .map(|((name, t), c)| {
                let mut o = json!({ "name": name, "type": t.ty.to_string(), "checksum": json_number(checksum(t)) });
                if let Some(c) = c {
                    o["check"] = json!({ "max_abs_err": json_number(c.max_abs_err), "max_rel_err": json_number(c.max_rel_err), "rtol": c.rtol, "passed": c.passed });
                }
                if cli.print {
                    o["values"] = json!((0..t.len().min(64)).map(|i| json_number(t.get_f64(i))).collect::<Vec<_>>());
                }
                o
            })
            .collect();
        let mut summary = json!({
            "file": cli.input,
            "function": func_name,
            "backend": cli.backend.name(),
            "pipeline": pipeline_text,
            "target": target.as_ref().map(|t| t.name.clone()),
            "seed": cli.seed,
            "repeat": cli.repeat,
            "warmup": cli.warmup,
            "time_ms": { "median": ms(med), "min": ms(min), "max": ms(max) },
            "flops": flops,
            "gflops": gflops,
            "peak_gflops": peak,
            "peak_source": peak.map(|_| peak_source),
            "peak_of": measured.as_ref().map(|m| m.of.as_str()),
            "peak_fraction": peak.map(|p| gflops / p),
            "threads": (cli.backend == Backend::Cpu).then_some(threads),
            "outputs": outputs,
            "check": cli.check.then_some(passed),
        });
        // Where prepack kernels ran: their time, not in `time_ms`.
        if let Some(p) = prepack {
            summary["prepack_ms"] = json!(ms(p));
        }
        if let Some(rows) = &profile {
            summary["kernels"] = rows
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    json!({
                        "index": i,
                        "label": k.label,
                        "median_ms": ms(k.median),
                        "flops": k.flops,
                        "gflops": k.gflops(),
                    })
                })
                .collect();
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&summary).unwrap_or_default()).ok();
    } else {
        write!(out, "@{func_name} on {}: median {:.3} ms (min {:.3}, max {:.3}, {} run(s)), {:.3} {unit}", cli.backend.name(), ms(med), ms(min), ms(max), cli.repeat, gflops).ok();
        match (&target, peak) {
            (_, Some(p)) if measured.is_some() => {
                let of = measured.as_ref().map_or("", |m| m.of.as_str());
                write!(out, ", {:.1}% of this machine's measured {of} peak for {threads} core(s) ({p:.0} {unit}, tilec-bench --peak)", 100.0 * gflops / p).ok()
            }
            (Some(t), Some(p)) if cli.backend == Backend::Cpu => {
                write!(out, ", {:.1}% of `{}`'s nominal {} peak for {threads} core(s) ({p:.0} {unit})", 100.0 * gflops / p, t.name, arithmetic.map_or("f32", ElemType::name)).ok()
            }
            (Some(t), Some(p)) => write!(out, ", {:.1}% of `{}`'s nominal {} peak ({p:.0} {unit})", 100.0 * gflops / p, t.name, arithmetic.map_or("f32", ElemType::name)).ok(),
            _ => None,
        };
        writeln!(out).ok();
        if let Some(p) = prepack {
            writeln!(out, "  weights laid out by prepack kernels in {:.3} ms per run, before the timed kernels (not counted: a deployment does it once per set of weights)", ms(p)).ok();
        }
        for ((name, t), c) in names.iter().zip(&results).zip(&checks) {
            writeln!(out, "  {name}: {}  checksum {:.6e}", t.ty, checksum(t)).ok();
            if cli.print {
                let shown: Vec<String> = (0..t.len().min(64)).map(|i| format!("{}", t.get_f64(i))).collect();
                writeln!(out, "    [{}{}]", shown.join(", "), if t.len() > 64 { ", ..." } else { "" }).ok();
            }
            if let Some(c) = c {
                writeln!(
                    out,
                    "    check vs interpreter: max abs err {:.3e}, max rel err {:.3e} (rtol {:.0e}): {}",
                    c.max_abs_err,
                    c.max_rel_err,
                    c.rtol,
                    if c.passed { "passed" } else { "FAILED" }
                )
                .ok();
            }
        }
        if let Some(rows) = &profile {
            write_profile(&mut out, rows, med, cli.repeat);
        }
    }
    // A closed pipe (`tilec-run ... | head`) is not an error worth reporting.
    let _ = std::io::stdout().write_all(out.as_bytes());
    Ok(passed)
}

/// The `--profile` table: each kernel's median, its share of the median
/// run, and its GFLOP/s; then the kernels' sum against the run's median
/// (the difference is the loop between calls and the runs' spread).
fn write_profile(out: &mut String, rows: &[KernelProfile], run_median: Duration, runs: usize) {
    let sum: Duration = rows.iter().map(|k| k.median).sum();
    let share = |d: Duration| if run_median.is_zero() { 0.0 } else { 100.0 * d.as_secs_f64() / run_median.as_secs_f64() };
    writeln!(out, "kernels, in run order (medians of {runs} run(s)):").ok();
    writeln!(out, "  {:>4}  {:<32} {:>10} {:>7} {:>9}", "#", "label", "ms", "share", "GFLOP/s").ok();
    for (i, k) in rows.iter().enumerate() {
        let label = k.label.as_deref().map_or_else(|| "-".to_string(), |l| format!("\"{l}\""));
        let gflops = k.gflops().map_or_else(|| "-".to_string(), |g| format!("{g:.1}"));
        writeln!(out, "  {i:>4}  {label:<32} {:>10.3} {:>6.1}% {gflops:>9}", ms(k.median), share(k.median)).ok();
    }
    writeln!(out, "  sum of the kernels' medians: {:.3} ms ({:.1}% of the median run)", ms(sum), share(sum)).ok();
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A number for JSON: non-finite values (which JSON cannot hold) become
/// the strings "inf", "-inf" and "nan".
fn json_number(x: f64) -> serde_json::Value {
    if x.is_finite() {
        json!(x)
    } else if x.is_nan() {
        json!("nan")
    } else if x > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

/// Sum of the elements, for a quick comparison of runs.
fn checksum(t: &Tensor) -> f64 {
    (0..t.len()).map(|i| t.get_f64(i)).sum()
}

fn write_outputs(cli: &Cli, f: &Function, names: &[String], results: &[Tensor], inputs: &[Tensor], generated: &[bool]) -> Result<(), Diagnostics> {
    let mut diags = Diagnostics::new();
    let mut write = |path: &Path, t: &Tensor| {
        if let Err(msg) = write_npy(path, t) {
            diags.push(Diagnostic::error(msg));
        }
    };
    for spec in &cli.outputs {
        // Checked by `check_output_names` before the run.
        let (name, path) = split_assignment(spec, "--output")?;
        if let Some(i) = names.iter().position(|n| *n == name) {
            write(&path, &results[i]);
        }
    }
    if let Some(dir) = &cli.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| Diagnostic::error(format!("cannot create `{}`: {}", dir.display(), tilec::input::io_reason(&e))))?;
        for (name, t) in names.iter().zip(results) {
            write(&dir.join(format!("{name}.npy")), t);
        }
        // Generated inputs go to a folder of their own, so they cannot
        // collide with a result of the same name.
        if generated.iter().any(|&g| g) {
            let inputs_dir = dir.join("inputs");
            std::fs::create_dir_all(&inputs_dir).map_err(|e| Diagnostic::error(format!("cannot create `{}`: {}", inputs_dir.display(), tilec::input::io_reason(&e))))?;
            for (i, (&p, t)) in f.params.iter().zip(inputs).enumerate() {
                if generated[i] {
                    write(&inputs_dir.join(format!("{}.npy", display_name(f, p, format!("arg{i}")))), t);
                }
            }
        }
    }
    diags.into_result()
}

/// Checks, before any work, that every `--output` file can be created
/// where it is asked for (its folder exists and it is not a folder itself)
/// and that `--output-dir` and `--keep-dir` can be created.
fn check_output_paths(cli: &Cli) -> Result<(), Diagnostics> {
    let mut diags = Diagnostics::new();
    for spec in &cli.outputs {
        let (name, path) = match split_assignment(spec, "--output") {
            Ok(x) => x,
            Err(d) => {
                diags.push(d);
                continue;
            }
        };
        let cannot = |why: String| Diagnostic::error(format!("cannot write `{}`: {why}", path.display()));
        if path.is_dir() {
            diags.push(cannot("it is a folder".into()).with_help(format!("give a file name, e.g. `--output {name}={}`, or use --output-dir", path.join(format!("{name}.npy")).display())));
            continue;
        }
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        match std::fs::metadata(&folder) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => diags.push(cannot(format!("`{}` is not a folder", folder.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                diags.push(cannot(format!("no such folder `{}`", folder.display())).with_help("create the folder first, or use --output-dir, which creates its folder"))
            }
            Err(e) => diags.push(cannot(tilec::input::io_reason(&e))),
        }
    }
    for (flag, dir) in [("--output-dir", &cli.output_dir), ("--keep-dir", &cli.keep_dir)] {
        let Some(dir) = dir else { continue };
        // The nearest part of the path that exists must be a folder:
        // `create_dir_all` makes the rest.
        if let Some(existing) = dir.ancestors().find(|a| !a.as_os_str().is_empty() && a.exists()) {
            if !existing.is_dir() {
                let why = if existing == dir.as_path() { "it exists and is not a folder".to_string() } else { format!("`{}` is not a folder", existing.display()) };
                diags.push(Diagnostic::error(format!("cannot create `{}`: {why}", dir.display())).with_note(format!("it is the folder of {flag}")));
            }
        }
    }
    diags.into_result()
}

/// Checks that every `--output NAME=...` names a result of `f`.
fn check_output_names(cli: &Cli, f: &Function, names: &[String]) -> Result<(), Diagnostics> {
    let mut diags = Diagnostics::new();
    for spec in &cli.outputs {
        let (name, _) = split_assignment(spec, "--output")?;
        if !names.contains(&name) {
            let mut d = Diagnostic::error(format!("@{} has no result `{name}`", f.name)).with_note(format!("its results are: {}", names.join(", ")));
            if let Some(best) = tilec::diag::closest(&name, names.iter().map(String::as_str)) {
                d = d.with_help(format!("did you mean `{best}`?"));
            }
            diags.push(d);
        }
    }
    diags.into_result()
}
