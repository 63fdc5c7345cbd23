//! `lower-to-mlir`: the pass that ends the tile pipeline, turning a fully
//! tiled module into MLIR (kept on the module; `--emit` compiles it on).

use tilec::diag::{Diagnostic, Diagnostics, Span};
use tilec::ir::{Module, OpKind};
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};
use crate::emit::Device;
use tilec::target::TargetKind;

pub static DECL: PassDecl = PassDecl {
    name: "lower-to-mlir",
    summary: "Lower the tiled module to MLIR (func/scf/memref/arith/math/vector, or gpu)",
    description: "
Emits every kernel of the module as MLIR: for CPU targets `func` functions
over bare-pointer memrefs, with `scf` loops, `vector` operations for vector
loops, unrolled register tiles and a `[lo, hi)` range for the parallel
loop; for CUDA targets a `gpu.module` of `gpu.func` kernels using block and
thread ids, workgroup memory for shared buffers and `gpu.barrier`. MLIR
parses and verifies the result. After this pass the module's dumps are MLIR
text; `--emit` compiles it further (see `docs/codegen.md`). Every compute
op must have been tiled. Weights (`weight` ops) become trailing parameters
of their function, in order of appearance: the host passes the weights
file's tensors there.",
    options: &[OptionDecl { name: "gpu", kind: OptionKind::Enum(&["auto", "true", "false"]), default: "auto", help: "emit GPU kernels (auto: when the target is a CUDA target; true needs one)" }],
    statistics: &[("kernels", "kernels emitted")],
    create: |o: &PassOptions| Box::new(LowerToMlir { gpu: o.str("gpu").to_string() }),
};

pub struct LowerToMlir {
    gpu: String,
}

impl Pass for LowerToMlir {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        let cuda = cx.target().filter(|t| t.kind == TargetKind::Cuda);
        let device = match (self.gpu.as_str(), cuda) {
            ("false", _) | ("auto", None) => Device::Cpu,
            (_, Some(t)) => Device::of(t),
            // GPU kernels take their limits (static shared memory) from
            // the target.
            _ => {
                let at = module.funcs.first().map_or(Span::DUMMY, |f| f.span);
                let what = cx.target().map_or("the run has no target".to_string(), |t| format!("the target is `{}`, a {} target", t.name, t.kind.name()));
                return Err(Diagnostic::error(format!("`lower-to-mlir{{gpu=true}}` needs a CUDA target, but {what}"))
                    .at(at, "in this module")
                    .with_help("pass --target with a cuda target, or leave `gpu` at `auto`")
                    .into());
            }
        };
        // Untiled compute ops are the usual mistake: point at each one.
        let mut untiled = Diagnostics::new();
        for f in &module.funcs {
            for &op in &f.regions[f.body].ops {
                if let OpKind::Compute(c) = &f.ops[op].kind {
                    let name = c.label.as_deref().map(|l| format!(" \"{l}\"")).unwrap_or_default();
                    untiled.push(
                        Diagnostic::error(format!("cannot lower to MLIR: compute op{name} in @{} has no loop nest", f.name))
                            .at(f.op_spans[op], "not tiled")
                            .with_help("give every compute op a schedule (or run `search`) and run `tile` before `lower-to-mlir`"),
                    );
                }
            }
        }
        untiled.into_result()?;
        for f in &mut module.funcs {
            tilec::ir::weights::hoist_weights(f);
        }
        let at = module.funcs.first().map_or(Span::DUMMY, |f| f.span);
        let lowered = crate::driver::lower(module, device).map_err(|e| Diagnostic::error(format!("cannot lower to MLIR: {}", e.0)).at(at, "in this module"))?;
        let text = crate::compile::normalize_mlir(&lowered.mlir).map_err(|e| Diagnostic::error(format!("generated MLIR is invalid (a tilec bug): {}", e.0)).at(at, "in this module"))?;
        cx.bump("kernels", lowered.functions.iter().map(|(_, k, _)| k.len() as u64).sum());
        module.mlir = Some(text);
        Ok(())
    }
}
