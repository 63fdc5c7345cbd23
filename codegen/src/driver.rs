//! What the tools share: the default scheduling pipeline, target lookup
//! (`--target NAME|PATH|host`, `--target-dir`, `TILEC_TARGET_PATH`), and
//! what `tilec --emit` and `tilec-run --backend` use, a tiled module
//! compiled for a target, to each stage's artifact.

use crate::compile::{self, CompileError, LlvmTarget};
use crate::emit::{self, Device, KernelAbi};
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Arc;
use tilec::diag::{Diagnostic, Diagnostics, SourceMap, Span};
use tilec::ir::Module;
use tilec::target::{Target, TargetKind, TargetSet};
use tilec_runtime::HostPlan;

/// The scheduling passes after `tile`, in the order they compose.
const SCHEDULING_PASSES: &[&str] = &["cache", "vthread", "bind", "vectorize", "tensorize", "prepack", "unroll", "hoist-guards"];

/// The pipeline that schedules and tiles a module, written once for every
/// tool: `collapse-axes` (unscheduled ops over fewer, longer axes: a 1x1
/// convolution as a GEMM), `pad-axes` (a reduction lengthened onto the
/// target's dot intrinsics: ResNet's 7x7 stem onto VNNI), `search` with `search_options` (`Some("")`: its defaults, markov,
/// construction only, seed 0; `None`: no search), `tile` (with
/// `{unscheduled=serial}` where `serial_unscheduled`: an op left without a
/// schedule gets a serial one), the other scheduling passes, then `then`
/// (`lower-to-mlir`, `canonicalize`).
pub fn scheduling_pipeline(search_options: Option<&str>, serial_unscheduled: bool, then: &[&str]) -> String {
    let mut passes: Vec<String> = tilec_passes::BEFORE_SEARCH.iter().map(|p| p.to_string()).collect();
    match search_options.map(str::trim) {
        Some("") => passes.push("search".into()),
        Some(options) => passes.push(format!("search{{{options}}}")),
        None => {}
    }
    passes.push(if serial_unscheduled { "tile{unscheduled=serial}" } else { "tile" }.into());
    passes.extend(SCHEDULING_PASSES.iter().chain(then).map(|p| p.to_string()));
    format!("builtin.module({})", passes.join(","))
}

/// The pipeline `tilec --emit` runs past the tile IR when none is given:
/// the default search schedules the ops that have no schedule, then the
/// scheduling passes, then `lower-to-mlir`.
pub fn default_codegen_pipeline() -> String {
    scheduling_pipeline(Some(""), false, &["lower-to-mlir"])
}

/// The pipeline `tilec-run --backend=cpu|cuda` runs when none is given:
/// [`default_codegen_pipeline`] without the lowering (`tilec-run`
/// compiles the tiled functions itself).
pub fn default_compiled_pipeline() -> String {
    scheduling_pipeline(Some(""), false, &[])
}

/// The targets a tool knows: the built-ins, `host`, and every `*.toml` of
/// the `--target-dir` folders `dirs` and of the folders in
/// `TILEC_TARGET_PATH` (separated as the platform separates `PATH`). Every
/// bad folder or file is reported.
pub fn target_set(sources: &mut SourceMap, dirs: &[PathBuf]) -> Result<TargetSet, Diagnostics> {
    let mut set = TargetSet::new();
    let mut dirs: Vec<PathBuf> = dirs.to_vec();
    if let Some(path) = std::env::var_os("TILEC_TARGET_PATH") {
        dirs.extend(std::env::split_paths(&path).filter(|p| !p.as_os_str().is_empty()));
    }
    let mut diags = Diagnostics::new();
    for dir in dirs {
        if let Err(d) = set.add_dir(sources, &dir) {
            diags.extend(d);
        }
    }
    diags.into_result().map(|()| set)
}

/// The target a module's schedules name, looked up in `set`; else
/// `fallback` (`host` for a CPU run); `None` when there is neither.
/// Schedules naming several targets are an error: one module compiles for
/// one target.
pub fn scheduled_target(set: &TargetSet, sources: &mut SourceMap, module: &Module, fallback: Option<&str>) -> Result<Option<Arc<Target>>, Diagnostics> {
    let name = match module.schedule_targets().as_slice() {
        [] => match fallback {
            Some(name) => name.to_string(),
            None => return Ok(None),
        },
        [one] => one.clone(),
        [first, second, ..] => {
            let at = module.funcs.first().map_or(Span::DUMMY, |f| f.span);
            return Err(Diagnostic::error(format!("the schedules are for different targets (`{first}` and `{second}`): one module compiles for one target"))
                .at(at, "in this module")
                .with_help("pass --target, and schedule every op for it")
                .into());
        }
    };
    set.lookup(sources, &name).map(Some)
}

/// Target lookup as every tool does it: the targets of [`target_set`]
/// (built-ins, `host`, the `--target-dir` folders `dirs` and
/// `TILEC_TARGET_PATH`), and in it `spec` (`--target`: a name, `host`, or
/// the path of a description file, which is added) if given, else the
/// target `module`'s schedules name or `fallback` ([`scheduled_target`]).
pub fn resolve_target(sources: &mut SourceMap, dirs: &[PathBuf], spec: Option<&str>, module: &Module, fallback: Option<&str>) -> Result<(TargetSet, Option<Arc<Target>>), Diagnostics> {
    let mut set = target_set(sources, dirs)?;
    let target = match spec {
        Some(spec) => Some(set.resolve(sources, spec)?),
        None => scheduled_target(&set, sources, module, fallback)?,
    };
    Ok((set, target))
}

/// The stages `--emit` can stop at past the tile IR.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    Mlir,
    Llvm,
    Asm,
    Obj,
    Ptx,
}

/// The LLVM target of a tilec target: its ISA fields, or the machine's
/// own CPU for `host`.
pub fn llvm_target_of(t: &Target) -> LlvmTarget {
    if t.name == "host" {
        LlvmTarget::host()
    } else {
        LlvmTarget { triple: t.isa.triple.clone(), cpu: t.isa.cpu.clone(), features: t.isa.features.clone() }
    }
}

/// The MLIR of every kernel of the module, and how to call them.
pub struct Lowered {
    pub mlir: String,
    /// Per function: its name, kernels and host plan.
    pub functions: Vec<(String, Vec<KernelAbi>, HostPlan)>,
}

/// Lowers every function of a fully tiled module to MLIR text for
/// `device`.
pub fn lower(m: &Module, device: Device) -> Result<Lowered, CompileError> {
    let gpu = device.is_gpu();
    let mut text = String::new();
    let mut functions = Vec::new();
    for f in &m.funcs {
        let (t, kernels) = emit::emit_function(f, device).map_err(|e| CompileError(format!("@{}: {}", f.name, e.0)))?;
        text.push_str(&t);
        functions.push((f.name.clone(), kernels, HostPlan::of(f)));
    }
    let mlir = if gpu { crate::gpu_module_text(&text) } else { crate::cpu_module_text(&text) };
    Ok(Lowered { mlir, functions })
}

/// An artifact: text, or bytes (objects).
pub enum Artifact {
    Text(String),
    Bytes(Vec<u8>),
}

/// Compiles `m` for `t` and returns the artifact of `stage`, plus, for
/// PTX, the launch metadata of every kernel as JSON.
pub fn emit_stage(m: &Module, t: &Target, stage: Stage) -> Result<(Artifact, Option<String>), CompileError> {
    let gpu = t.kind == TargetKind::Cuda;
    match (stage, gpu) {
        (Stage::Obj, true) => return Err(CompileError(format!("`--emit=obj` makes CPU objects; `{}` is a GPU target: use `--emit=ptx`", t.name))),
        (Stage::Ptx, false) => return Err(CompileError(format!("`--emit=ptx` needs a CUDA target; `{}` is a CPU target", t.name))),
        _ => {}
    }
    let lowered = lower(m, Device::of(t))?;
    let mlir = m.mlir.clone().unwrap_or(lowered.mlir.clone());
    if stage == Stage::Mlir {
        return Ok((Artifact::Text(compile::normalize_mlir(&mlir)?), None));
    }
    if gpu {
        let chip = t.isa.cpu.clone();
        let (nvvm, ptx) = compile::compile_gpu(&mlir, &chip, &t.isa.features)?;
        let meta = launch_metadata(&lowered, &chip);
        return Ok(match stage {
            Stage::Llvm => (Artifact::Text(nvvm), None),
            _ => (Artifact::Text(ptx), Some(meta)),
        });
    }
    let artifacts = compile::compile_cpu(&mlir, &llvm_target_of(t))?;
    Ok(match stage {
        Stage::Llvm => (Artifact::Text(artifacts.llvm_ir), None),
        Stage::Asm => (Artifact::Text(artifacts.asm), None),
        _ => (Artifact::Bytes(artifacts.object), Some(cpu_metadata(&lowered, t))),
    })
}

/// `{"target", "kernels": [{"function", "symbol", "parallel_trip", "stack_bytes", "params"}]}`:
/// how to call the kernels of a CPU object (docs/codegen.md, "The C ABI");
/// a prepack kernel also has `"prepack": true`.
fn cpu_metadata(l: &Lowered, t: &Target) -> String {
    cpu_library_metadata(&t.name, l.functions.iter().map(|(func, kernels, plan)| (func.as_str(), kernels.as_slice(), plan)))
}

/// [`cpu_metadata`] of the kernels and host plans of `functions` (name,
/// kernels, plan), compiled for target `target`: the `LIB.json` that
/// `tilec --emit=lib` writes beside a library, for the benchmark scripts
/// that call its kernels (`benchmarks/kernel_lib.py`).
pub fn cpu_library_metadata<'a>(target: &str, functions: impl IntoIterator<Item = (&'a str, &'a [KernelAbi], &'a HostPlan)>) -> String {
    let mut s = format!("{{\n  \"target\": \"{target}\",\n  \"kernels\": [");
    let mut first = true;
    for (func, kernels, plan) in functions {
        for k in kernels {
            if !first {
                s.push(',');
            }
            first = false;
            let params: Vec<String> = k
                .params
                .iter()
                .map(|v| {
                    let spec = plan.spec(*v);
                    match spec {
                        Some(b) => format!("{{\"value\": {v}, \"shape\": {:?}, \"elem\": \"{}\"}}", b.shape, b.elem),
                        None => format!("{{\"value\": {v}}}"),
                    }
                })
                .collect();
            let prepack = if k.prepack { ", \"prepack\": true" } else { "" };
            write!(s, "\n    {{\"function\": \"{func}\", \"symbol\": \"{}\", \"parallel_trip\": {}, \"stack_bytes\": {}{prepack}, \"params\": [{}]}}", k.symbol, k.parallel_trip, k.stack_bytes, params.join(", ")).unwrap();
        }
    }
    s.push_str("\n  ]\n}\n");
    s
}

/// `{"kernels": [{"function", "symbol", "grid", "block", "shared_bytes", "params"}]}`.
fn launch_metadata(l: &Lowered, chip: &str) -> String {
    let mut s = format!("{{\n  \"chip\": \"{chip}\",\n  \"kernels\": [");
    let mut first = true;
    for (func, kernels, _) in &l.functions {
        for k in kernels {
            if !first {
                s.push(',');
            }
            first = false;
            write!(
                s,
                "\n    {{\"function\": \"{func}\", \"symbol\": \"{}\", \"grid\": [{}, {}, {}], \"block\": [{}, {}, {}], \"shared_bytes\": {}, \"dynamic_shared_bytes\": {}, \"params\": {:?}}}",
                k.symbol, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2], k.shared_bytes, k.dynamic_shared_bytes, k.params
            )
            .unwrap();
        }
    }
    s.push_str("\n  ]\n}\n");
    s
}

/// Whether code compiled for `t` runs on this machine: `Err` names the
/// CPU features `t` enables that this machine lacks.
pub fn host_can_run(t: &LlvmTarget) -> Result<(), String> {
    let host = LlvmTarget::host();
    if t.triple.split('-').next() != host.triple.split('-').next() {
        return Err(format!("the `{}` architecture (this machine is `{}`)", t.triple, host.triple));
    }
    let have: Vec<&str> = host.features.split(',').filter(|f| f.starts_with('+')).collect();
    let missing: Vec<&str> = t.features.split(',').filter(|f| f.starts_with('+') && !have.contains(f)).map(|f| f.trim_start_matches('+')).collect();
    if missing.is_empty() { Ok(()) } else { Err(missing.join(", ")) }
}
