//! tilec's code generation: loop-level tile IR → MLIR → LLVM → x86
//! objects and shared libraries, or PTX; and running compiled CPU code.
//! This crate links LLVM and MLIR; the core crate never does.

pub mod compile;
pub mod compile_worker;
pub mod driver;
pub mod emit;
pub mod evaluator;
pub mod lower_pass;
pub mod peak;

use std::path::{Path, PathBuf};
use tilec::ir::Function;

pub use compile::{CompileError, LlvmTarget};
pub use emit::KernelAbi;
pub use tilec_runtime::{CpuProgram, HostPlan};

/// Every pass tilec knows: the transformations of `tilec-passes` and the
/// code-generation passes of this crate.
pub fn registry() -> tilec::pass::Registry {
    let mut r = tilec_passes::registry();
    r.register(&lower_pass::DECL);
    r
}

/// A function compiled for a CPU.
pub struct CpuCompiled {
    pub mlir: String,
    pub artifacts: compile::CpuArtifacts,
    pub kernels: Vec<KernelAbi>,
    pub plan: HostPlan,
}

/// Wraps kernels' MLIR in a module.
pub fn cpu_module_text(kernels: &str) -> String {
    format!("module {{\n{kernels}}}\n")
}

/// Compiles the kernels of `f` (a function whose compute ops are all
/// tiled) for `target`.
pub fn compile_function_cpu(f: &Function, target: &LlvmTarget) -> Result<CpuCompiled, CompileError> {
    let (mlir, kernels) = emit_cpu_module(f)?;
    let artifacts = compile::compile_cpu(&mlir, target)?;
    Ok(CpuCompiled { mlir, artifacts, kernels, plan: HostPlan::of(f) })
}

/// The MLIR module of `f`'s CPU kernels, and their ABI: what
/// [`compile_function_cpu`] compiles (the evaluator compiles it in a
/// child process, `compile_worker`).
pub fn emit_cpu_module(f: &Function) -> Result<(String, Vec<KernelAbi>), CompileError> {
    let (text, kernels) = emit::emit_function(f, emit::Device::Cpu).map_err(|e| CompileError(e.0))?;
    Ok((cpu_module_text(&text), kernels))
}

/// Links an object into a shared library with the system C compiler.
pub fn link_shared(object: &[u8], dir: &Path, name: &str) -> Result<PathBuf, CompileError> {
    std::fs::create_dir_all(dir).map_err(|e| CompileError(format!("cannot create `{}`: {e}", dir.display())))?;
    let obj = dir.join(format!("{name}.o"));
    std::fs::write(&obj, object).map_err(|e| CompileError(format!("cannot write `{}`: {e}", obj.display())))?;
    link_object_file(&obj, dir, name)
}

/// Links the object file `obj` into `dir/lib{name}.so` with the system C
/// compiler.
pub fn link_object_file(obj: &Path, dir: &Path, name: &str) -> Result<PathBuf, CompileError> {
    let so = dir.join(format!("lib{name}.so"));
    let out = std::process::Command::new("cc")
        // Every symbol resolved now: a call the kernels cannot satisfy is a
        // link error here, not a loader abort (exit 127) in the middle of a run.
        .args(["-shared", "-Wl,--no-undefined", "-Wl,-z,now", "-o"])
        .arg(&so)
        .arg(&obj)
        .arg("-lm")
        .output()
        .map_err(|e| CompileError(format!("cannot run `cc` to link: {e} (install build-essential)")))?;
    if !out.status.success() {
        return Err(CompileError(format!("linking failed:\n{}", String::from_utf8_lossy(&out.stderr))));
    }
    Ok(so)
}

/// Compiles, links and loads `f` for this machine.
pub fn build_for_host(f: &Function, dir: &Path) -> Result<(CpuCompiled, CpuProgram), CompileError> {
    let compiled = compile_function_cpu(f, &LlvmTarget::host())?;
    let so = link_shared(&compiled.artifacts.object, dir, &f.name)?;
    let program = CpuProgram::load(&so, compiled.kernels.clone(), compiled.plan.clone()).map_err(CompileError)?;
    Ok((compiled, program))
}

#[cfg(test)]
mod tests;

/// A function compiled for an NVIDIA GPU: PTX and launch metadata per kernel.
pub struct GpuCompiled {
    pub mlir: String,
    pub nvvm: String,
    pub ptx: String,
    pub kernels: Vec<KernelAbi>,
}

/// Wraps GPU kernels' MLIR (`gpu.func`s) in a container module with one
/// `gpu.module`: `gpu-module-to-binary` makes one PTX module of each
/// gpu.module, and the runtime loads the program's PTX as one module (PTX
/// modules cannot be concatenated: each has its own `.version` header).
pub fn gpu_module_text(kernels: &str) -> String {
    format!("module attributes {{gpu.container_module}} {{\n  gpu.module @tilec_kernels {{\n{kernels}  }}\n}}\n")
}

/// Compiles the kernels of `f` to PTX for CUDA target `target`: its chip
/// (`isa.cpu`: `sm_80`, `sm_90`), LLVM NVPTX features (`+ptx80`) and
/// static shared memory limit.
pub fn compile_function_gpu(f: &Function, target: &tilec::target::Target) -> Result<GpuCompiled, CompileError> {
    if target.kind != tilec::target::TargetKind::Cuda {
        return Err(CompileError(format!("`{}` is not a CUDA target: PTX needs one", target.name)));
    }
    let (mlir, kernels) = emit_gpu_module(f, target)?;
    let (nvvm, ptx) = compile::compile_gpu(&mlir, &target.isa.cpu, &target.isa.features)?;
    Ok(GpuCompiled { mlir, nvvm, ptx, kernels })
}

/// The MLIR container module of `f`'s GPU kernels for CUDA target
/// `target`, and their ABI: what [`compile_function_gpu`] compiles.
pub fn emit_gpu_module(f: &Function, target: &tilec::target::Target) -> Result<(String, Vec<KernelAbi>), CompileError> {
    let (text, kernels) = emit::emit_function(f, emit::Device::of(target)).map_err(|e| CompileError(e.0))?;
    Ok((gpu_module_text(&text), kernels))
}
