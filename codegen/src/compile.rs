//! MLIR text → LLVM dialect (MLIR's own conversion passes, through melior)
//! → LLVM IR → optimised machine code (inkwell's TargetMachine, O3):
//! assembly, objects and shared libraries for CPUs, PTX for NVIDIA GPUs.
//!
//! See `../shared/design/TOOLCHAIN.md` for the recipe and its pitfalls;
//! the ones that matter here: the translated module has no triple or data
//! layout (set them before optimising), and the ExecutionEngine is not used
//! (we emit objects and load them), so a failed translation is an error
//! value, never a null dereference.

use melior::dialect::DialectRegistry;
use melior::ir::{BlockLike, Module, OperationRef};
use melior::ir::operation::OperationLike;
use melior::pass::PassManager;
use melior::utility::{parse_pass_pipeline, register_all_dialects, register_all_llvm_translations, register_all_passes};
use melior::Context;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Why compilation failed, with MLIR's or LLVM's own messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError(pub String);

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The MLIR conversion pipeline for CPU kernels (func + scf + memref +
/// arith + math + vector → LLVM dialect, memrefs as bare pointers).
///
/// Nothing becomes a library call, so vector code stays vector code:
/// - `tilec-math-approximation` (`cpp/mlir_passes.cpp`) rewrites `exp`,
///   `log`, `tanh` and `erf` into MLIR's polynomial approximations, on
///   vectors as on scalars; `convert-math-to-llvm` makes the other math ops
///   LLVM intrinsics (`sqrt`, `fabs`, `abs`, `fma`, `floor`). MLIR's
///   `convert-math-to-libm` is not used: it turns all of them, `sqrt` and
///   `absf` included, into a call per lane, spelled with `vector.extract`s
///   that it leaves behind `convert-vector-to-llvm`, and it refuses
///   `math.absi`.
/// - bf16 arithmetic is done in f32 (`arith-emulate-unsupported-floats`,
///   one rounding per op, as `tilec::ir::scalar` says), and the
///   conversions become integer operations (`tilec-expand-bf16`), not
///   LLVM's `__truncsfbf2` calls; before `convert-vector-to-llvm`, whose
///   folding would drop the rounding between a `contract` product and its
///   sum (`extf(truncf(x))` → `x`). Masked loads and stores of bf16 vectors
///   become i16 ones (`tilec-bf16-masked-as-i16`), which LLVM does not
///   take lane by lane through f32.
pub const CPU_PIPELINE: &str = "builtin.module(canonicalize,cse,tilec-math-approximation,convert-math-to-llvm,arith-emulate-unsupported-floats{source-types=bf16 target-type=f32},tilec-expand-bf16,convert-scf-to-cf,convert-vector-to-llvm,tilec-bf16-masked-as-i16,expand-strided-metadata,finalize-memref-to-llvm,convert-arith-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},convert-cf-to-llvm,reconcile-unrealized-casts)";

/// The MLIR conversion pipeline for GPU kernels, up to NVVM; `{chip}` and
/// `{features}` are filled in from the target. Math functions become calls
/// of libdevice's (`__nv_expf`, ...), which `gpu-module-to-binary` links
/// from `toolkit` (see [`cuda_toolkit`]).
pub fn gpu_pipeline(chip: &str, features: &str, toolkit: Option<&Path>) -> String {
    // A path is quoted (spaces are fine); `cuda_toolkit` takes none with a quote.
    let toolkit = toolkit.map(|t| format!(" toolkit=\"{}\"", t.display())).unwrap_or_default();
    format!(
        "builtin.module(nvvm-attach-target{{chip={chip} features={features} O=3}},gpu.module(canonicalize,cse,convert-scf-to-cf,convert-nvgpu-to-nvvm,convert-vector-to-llvm,convert-gpu-to-nvvm{{use-bare-ptr-memref-call-conv=1}},reconcile-unrealized-casts),gpu-module-to-binary{{format=isa{toolkit}}})"
    )
}

/// Where a CUDA toolkit keeps libdevice, the bitcode library of the GPU's
/// math functions.
const LIBDEVICE: &str = "nvvm/libdevice/libdevice.10.bc";

/// The CUDA toolkit whose libdevice GPU kernels are linked with: the first
/// of `$CUDA_ROOT`, `$CUDA_HOME` and `$CUDA_PATH` that is set (MLIR itself
/// reads `$CUDA_ROOT`), or, when none is, the toolkit of a `ptxas` on `PATH`
/// (`<toolkit>/bin/ptxas`, as in NVIDIA's pip package) or
/// `/usr/local/cuda`. The error says where it looked.
pub fn cuda_toolkit() -> Result<PathBuf, String> {
    let has_libdevice = |dir: &Path| dir.join(LIBDEVICE).is_file() && !dir.to_string_lossy().contains('"');
    for var in ["CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"] {
        if let Some(dir) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let dir = PathBuf::from(dir);
            return if has_libdevice(&dir) { Ok(dir) } else { Err(format!("${var} is `{}`, which has no {LIBDEVICE}", dir.display())) };
        }
    }
    let beside_ptxas = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .filter(|dir| dir.join("ptxas").is_file())
        .filter_map(|bin| bin.parent().map(Path::to_path_buf));
    beside_ptxas
        .chain([PathBuf::from("/usr/local/cuda")])
        .find(|dir| has_libdevice(dir))
        .ok_or_else(|| "none of $CUDA_ROOT, $CUDA_HOME and $CUDA_PATH is set, and there is none beside a `ptxas` on PATH or in /usr/local/cuda".to_string())
}

/// The first libdevice function that `ptx` declares but does not define.
fn unresolved_libdevice_call(ptx: &str) -> Option<&str> {
    ptx.lines().filter(|l| l.trim_start().starts_with(".extern .func")).find_map(|l| l.split_whitespace().find(|w| w.starts_with("__nv_")))
}

/// Whether MLIR's pass manager prints the IR after each of its passes
/// (to stderr), for `tilec --print-ir-after-all`.
static PRINT_MLIR_PASSES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn set_print_mlir_passes(on: bool) {
    PRINT_MLIR_PASSES.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// A pass manager for `ctx`, printing after every pass when asked.
fn pass_manager(ctx: &Context) -> PassManager<'_> {
    let pm = PassManager::new(ctx);
    if PRINT_MLIR_PASSES.load(std::sync::atomic::Ordering::Relaxed) {
        // IR printing needs a single-threaded context.
        ctx.enable_multi_threading(false);
        pm.enable_ir_printing(&melior::pass::PassIrPrintingOptions {
            before_all: false,
            after_all: true,
            module_scope: true,
            on_change: false,
            // true would print only after a pass that fails.
            on_failure: false,
            flags: melior::ir::operation::OperationPrintingFlags::new(),
            tree_printing_path: std::path::PathBuf::new(),
        });
    }
    pm
}

unsafe extern "C" {
    /// `cpp/mlir_passes.cpp`: registers `tilec-math-approximation` and
    /// `tilec-expand-bf16`.
    fn tilecRegisterMlirPasses();
}

/// A fresh MLIR context with every dialect, pass and LLVM translation,
/// and a handler that collects MLIR's error messages.
fn context() -> (Context, Arc<Mutex<Vec<String>>>) {
    let registry = DialectRegistry::new();
    register_all_dialects(&registry);
    let ctx = Context::new();
    ctx.append_dialect_registry(&registry);
    ctx.load_all_available_dialects();
    register_all_llvm_translations(&ctx);
    register_all_passes();
    // SAFETY: registers passes in MLIR's global registry (once per process,
    // guarded on the C++ side); no arguments, no result.
    unsafe { tilecRegisterMlirPasses() };
    let messages = Arc::new(Mutex::new(Vec::new()));
    let sink = messages.clone();
    ctx.attach_diagnostic_handler(move |d| {
        if let Ok(mut m) = sink.lock() {
            m.push(format!("{}: {}", d.location(), d));
        }
        true
    });
    (ctx, messages)
}

fn drain(messages: &Arc<Mutex<Vec<String>>>) -> String {
    messages.lock().map(|mut m| std::mem::take(&mut *m).join("\n")).unwrap_or_default()
}

/// MLIR text as MLIR prints it (parsed, verified, printed back).
pub fn normalize_mlir(mlir: &str) -> Result<String, CompileError> {
    let (ctx, messages) = context();
    let module = Module::parse(&ctx, mlir).ok_or_else(|| CompileError(format!("MLIR did not parse:\n{}", drain(&messages))))?;
    if !module.as_operation().verify() {
        return Err(CompileError(format!("generated MLIR does not verify (a tilec bug):\n{}", drain(&messages))));
    }
    Ok(format!("{}\n", module.as_operation()))
}

/// The artifacts of one CPU compilation.
pub struct CpuArtifacts {
    /// The LLVM-dialect MLIR after conversion.
    pub llvm_dialect: String,
    pub llvm_ir: String,
    pub asm: String,
    pub object: Vec<u8>,
}

/// The LLVM target of a tilec target description.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct LlvmTarget {
    pub triple: String,
    pub cpu: String,
    pub features: String,
}

impl LlvmTarget {
    /// The machine tilec runs on.
    pub fn host() -> LlvmTarget {
        use inkwell::targets::TargetMachine;
        LlvmTarget {
            triple: TargetMachine::get_default_triple().as_str().to_string_lossy().into_owned(),
            cpu: TargetMachine::get_host_cpu_name().to_string(),
            features: TargetMachine::get_host_cpu_features().to_string(),
        }
    }
}

/// Lowers CPU kernels' MLIR and compiles them for `target`.
pub fn compile_cpu(mlir: &str, target: &LlvmTarget) -> Result<CpuArtifacts, CompileError> {
    let (ctx, messages) = context();
    let mut module = Module::parse(&ctx, mlir).ok_or_else(|| CompileError(format!("MLIR did not parse:\n{}", drain(&messages))))?;
    if !module.as_operation().verify() {
        return Err(CompileError(format!("generated MLIR does not verify (a tilec bug):\n{}", drain(&messages))));
    }
    let pm = pass_manager(&ctx);
    parse_pass_pipeline(pm.as_operation_pass_manager(), CPU_PIPELINE).map_err(|_| CompileError(format!("bad MLIR pipeline:\n{}", drain(&messages))))?;
    pm.run(&mut module).map_err(|_| CompileError(format!("MLIR lowering failed:\n{}", drain(&messages))))?;
    let llvm_dialect = module.as_operation().to_string();
    let (llvm_ir, asm, object) = llvm_codegen(&module, target, &messages)?;
    Ok(CpuArtifacts { llvm_dialect, llvm_ir, asm, object })
}

/// Translates an LLVM-dialect module to LLVM IR, optimises it (O3) and
/// emits assembly and an object for `target`.
fn llvm_codegen(module: &Module, target: &LlvmTarget, messages: &Arc<Mutex<Vec<String>>>) -> Result<(String, String, Vec<u8>), CompileError> {
    use inkwell::OptimizationLevel;
    use inkwell::passes::PassBuilderOptions;
    use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetTriple};

    Target::initialize_all(&InitializationConfig::default());
    let llctx = inkwell::context::Context::create();
    // SAFETY: MLIR and inkwell link the same LLVM; the context pointer is
    // valid for the call, and a null result is checked before use.
    let raw = unsafe { mlir_sys::mlirTranslateModuleToLLVMIR(module.as_operation().to_raw(), llctx.raw() as mlir_sys::LLVMContextRef) };
    if raw.is_null() {
        return Err(CompileError(format!("translation to LLVM IR failed:\n{}", drain(messages))));
    }
    // SAFETY: `raw` is a module created in `llctx`, which outlives it.
    let m = unsafe { inkwell::module::Module::new(raw as inkwell::llvm_sys::prelude::LLVMModuleRef) };
    let triple = TargetTriple::create(&target.triple);
    let t = Target::from_triple(&triple).map_err(|e| CompileError(format!("unknown LLVM target `{}`: {e}", target.triple)))?;
    let tm = t
        .create_target_machine(&triple, &target.cpu, &target.features, OptimizationLevel::Aggressive, RelocMode::PIC, CodeModel::Default)
        .ok_or_else(|| CompileError(format!("LLVM cannot make a target machine for {} ({} {})", target.triple, target.cpu, target.features)))?;
    m.set_triple(&tm.get_triple());
    m.set_data_layout(&tm.get_target_data().get_data_layout());
    m.run_passes("default<O3>", &tm, PassBuilderOptions::create()).map_err(|e| CompileError(format!("LLVM optimisation failed: {e}")))?;
    let mut llvm_ir = m.print_to_string().to_string();
    if llvm_ir.contains("bfloat") {
        define_bf16_truncation(&llctx, &m)?;
        llvm_ir = m.print_to_string().to_string();
    }
    let asm = tm.write_to_memory_buffer(&m, FileType::Assembly).map_err(|e| CompileError(format!("LLVM code generation failed: {e}")))?;
    let obj = tm.write_to_memory_buffer(&m, FileType::Object).map_err(|e| CompileError(format!("LLVM code generation failed: {e}")))?;
    Ok((llvm_ir, String::from_utf8_lossy(asm.as_slice()).into_owned(), obj.as_slice().to_vec()))
}

/// compiler-rt's f32 -> bf16 conversion, defined in the kernels' own
/// module: rounding to nearest even, NaN to a quiet NaN, as
/// `tilec-expand-bf16` does.
///
/// Why: `tilec-expand-bf16` turns every conversion tilec emits into integer
/// operations, but LLVM's x86 back end makes conversions of its own when it
/// legalises bf16 values (a `phi` or `select` of bf16, from a padded read,
/// is promoted to f32 and truncated back) on CPUs without AVX-512 BF16, and
/// calls `__truncsfbf2` for them. Debian 12's libgcc (GCC 12) has no such
/// function, so such a kernel failed to load. Weak and hidden: the library
/// resolves the call itself and exports nothing new.
const BF16_TRUNCATION_IR: &str = r#"
define weak hidden bfloat @__truncsfbf2(float %x) {
  %bits = bitcast float %x to i32
  %nan = fcmp uno float %x, %x
  %high = lshr i32 %bits, 16
  %odd = and i32 %high, 1
  %bias = add i32 %odd, 32767
  %biased = add i32 %bits, %bias
  %rounded = lshr i32 %biased, 16
  %quiet = or i32 %high, 64
  %chosen = select i1 %nan, i32 %quiet, i32 %rounded
  %narrow = trunc i32 %chosen to i16
  %result = bitcast i16 %narrow to bfloat
  ret bfloat %result
}
"#;

/// Links [`BF16_TRUNCATION_IR`] into `m` unless `m` already has the symbol.
fn define_bf16_truncation<'ctx>(llctx: &'ctx inkwell::context::Context, m: &inkwell::module::Module<'ctx>) -> Result<(), CompileError> {
    if m.get_function("__truncsfbf2").is_some_and(|f| f.count_basic_blocks() > 0) {
        return Ok(());
    }
    let buffer = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(BF16_TRUNCATION_IR.as_bytes(), "tilec-bf16");
    let helper = llctx.create_module_from_ir(buffer).map_err(|e| CompileError(format!("the bf16 conversion helper does not parse (a tilec bug): {e}")))?;
    helper.set_triple(&m.get_triple());
    helper.set_data_layout(&m.get_data_layout());
    m.link_in_module(helper).map_err(|e| CompileError(format!("cannot link the bf16 conversion helper (a tilec bug): {e}")))
}

/// Lowers GPU kernels (a `gpu.container_module`) to PTX for `chip`, with
/// libdevice from [`cuda_toolkit`] where the kernels use math functions.
/// Returns the NVVM-level MLIR and the PTX text.
pub fn compile_gpu(mlir: &str, chip: &str, features: &str) -> Result<(String, String), CompileError> {
    let toolkit = cuda_toolkit();
    let (lowered, ptx) = compile_gpu_with(mlir, chip, features, toolkit.as_deref().ok())?;
    if let (Some(function), Err(why)) = (unresolved_libdevice_call(&ptx), &toolkit) {
        return Err(CompileError(format!(
            "the kernels call `{function}`: math functions on GPUs come from CUDA's libdevice, which needs a CUDA toolkit, but {why}; set CUDA_ROOT to a toolkit with {LIBDEVICE} (NVIDIA's pip package nvidia-cuda-nvcc-cu12 has one in nvidia/cuda_nvcc)"
        )));
    }
    Ok((lowered, ptx))
}

/// [`compile_gpu`] with libdevice from `toolkit` (none: math functions stay
/// calls that the PTX declares but does not define).
fn compile_gpu_with(mlir: &str, chip: &str, features: &str, toolkit: Option<&Path>) -> Result<(String, String), CompileError> {
    let (ctx, messages) = context();
    let mut module = Module::parse(&ctx, mlir).ok_or_else(|| CompileError(format!("MLIR did not parse:\n{}", drain(&messages))))?;
    if !module.as_operation().verify() {
        return Err(CompileError(format!("generated MLIR does not verify (a tilec bug):\n{}", drain(&messages))));
    }
    let pm = pass_manager(&ctx);
    parse_pass_pipeline(pm.as_operation_pass_manager(), &gpu_pipeline(chip, features, toolkit)).map_err(|_| CompileError(format!("bad MLIR pipeline:\n{}", drain(&messages))))?;
    pm.run(&mut module).map_err(|_| CompileError(format!("MLIR lowering to PTX failed:\n{}", drain(&messages))))?;
    let lowered = module.as_operation().to_string();
    let mut binaries = Vec::new();
    let body = module.body();
    let mut op: Option<OperationRef> = body.first_operation();
    while let Some(o) = op {
        if o.name().as_string_ref().as_str().ok() == Some("gpu.binary") {
            binaries.push(binary_object_text(&o)?);
        }
        op = o.next_in_block();
    }
    // One gpu.module (`gpu_module_text`), so one PTX module: two could not
    // be joined into one text the driver loads.
    match <[String; 1]>::try_from(binaries) {
        Ok([ptx]) => Ok((lowered, ptx)),
        Err(binaries) => Err(CompileError(format!("{} gpu.binary ops where one was expected (a tilec bug)", binaries.len()))),
    }
}

/// The PTX held by a `gpu.binary` op's first object.
fn binary_object_text(op: &OperationRef) -> Result<String, CompileError> {
    use melior::ir::attribute::{ArrayAttribute, AttributeLike};
    let attr = op.attribute("objects").map_err(|_| CompileError("gpu.binary without objects".into()))?;
    let array = ArrayAttribute::try_from(attr).map_err(|_| CompileError("gpu.binary objects is not an array".into()))?;
    let first = array.element(0).map_err(|_| CompileError("gpu.binary has no object".into()))?;
    // SAFETY: `first` is a #gpu.object attribute (checked by MLIR's
    // verifier of gpu.binary); the returned string lives in the context.
    let s = unsafe { mlir_sys::mlirGPUObjectAttrGetObject(first.to_raw()) };
    // SAFETY: the string ref points into attribute storage of the context.
    let bytes = unsafe { std::slice::from_raw_parts(s.data as *const u8, s.length) };
    Ok(String::from_utf8_lossy(bytes).into_owned())
}
