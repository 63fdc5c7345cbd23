//! What `tilec --emit` and `tilec-run --backend` use: a tiled module
//! compiled for a target, to each stage's artifact.

use crate::compile::{self, CompileError, LlvmTarget};
use crate::emit::{self, Device, KernelAbi};
use std::fmt::Write;
use tilec::ir::Module;
use tilec::target::{Target, TargetKind};
use tilec_runtime::HostPlan;

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
/// how to call the kernels of a CPU object (docs/codegen.md, "The C ABI").
fn cpu_metadata(l: &Lowered, t: &Target) -> String {
    let mut s = format!("{{\n  \"target\": \"{}\",\n  \"kernels\": [", t.name);
    let mut first = true;
    for (func, kernels, plan) in &l.functions {
        for k in kernels {
            if !first {
                s.push(',');
            }
            first = false;
            let params: Vec<String> = k
                .params
                .iter()
                .map(|v| {
                    let spec = plan.params.iter().chain(&plan.buffers).find(|b| b.value == *v);
                    match spec {
                        Some(b) => format!("{{\"value\": {v}, \"shape\": {:?}, \"elem\": \"{}\"}}", b.shape, b.elem),
                        None => format!("{{\"value\": {v}}}"),
                    }
                })
                .collect();
            write!(s, "\n    {{\"function\": \"{func}\", \"symbol\": \"{}\", \"parallel_trip\": {}, \"stack_bytes\": {}, \"params\": [{}]}}", k.symbol, k.parallel_trip, k.stack_bytes, params.join(", ")).unwrap();
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
