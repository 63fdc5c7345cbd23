//! Compiled kernels against the interpreter.

use super::*;

#[test]
fn pass_docs_are_up_to_date() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/passes.md");
    tilec::golden::check_or_bless(&path, &registry().markdown()).unwrap();
}

/// The tools' default pipelines, built in one place, and the variants
/// tilec-bench and tilec-fuzz make of it.
#[test]
fn default_pipelines() {
    let codegen = driver::default_codegen_pipeline();
    assert_eq!(codegen, "builtin.module(collapse-axes,pad-axes,search,tile,cache,vthread,bind,vectorize,tensorize,prepack,unroll,hoist-guards,lower-to-mlir)");
    assert_eq!(driver::default_compiled_pipeline(), "builtin.module(collapse-axes,pad-axes,search,tile,cache,vthread,bind,vectorize,tensorize,prepack,unroll,hoist-guards)");
    let bench = driver::scheduling_pipeline(Some("strategy=roller seed=3 budget=64"), true, &[]);
    assert_eq!(bench, "builtin.module(collapse-axes,pad-axes,search{strategy=roller seed=3 budget=64},tile{unscheduled=serial},cache,vthread,bind,vectorize,tensorize,prepack,unroll,hoist-guards)");
    let plain = driver::scheduling_pipeline(None, true, &["canonicalize"]);
    assert_eq!(plain, "builtin.module(collapse-axes,pad-axes,tile{unscheduled=serial},cache,vthread,bind,vectorize,tensorize,prepack,unroll,hoist-guards,canonicalize)");
    for text in [codegen, bench, plain] {
        let mut sources = SourceMap::new();
        let file = sources.add("<pipeline>", text.clone());
        parse_pipeline(&text, file, &registry()).unwrap_or_else(|d| panic!("{text}: {}", sources.render(&d.0)));
    }
}

use std::sync::Arc;
use tilec::diag::SourceMap;
use tilec::interp::{Tensor, compare::compare, run_function};
use tilec::ir::Module;
use tilec::pass::{PassManager, parse_pipeline};
use tilec::target::Target;
use tilec_runtime::Caches;

fn parse(src: &str) -> Module {
    let (m, sm) = tilec::syntax::parse_str("test.tile", src).unwrap_or_else(|(d, sm)| panic!("{}", sm.render(&d.0)));
    let d = tilec::verify::verify_module(&m);
    assert!(!d.has_errors(), "{}", sm.render(&d.0));
    m
}

fn schedule(m: &mut Module, pipeline: &str, target: &Arc<Target>) {
    let registry = registry();
    let mut sm = SourceMap::new();
    let file = sm.add("<pipeline>", pipeline);
    let p = parse_pipeline(pipeline, file, &registry).unwrap_or_else(|d| panic!("{}", sm.render(&d.0)));
    let mut pm = PassManager::new(p);
    pm.set_target(target.clone());
    pm.run(m).unwrap_or_else(|d| panic!("{}", sm.render(&d.0)));
}

fn llvm_target(t: &Target) -> LlvmTarget {
    LlvmTarget { triple: t.isa.triple.clone(), cpu: t.isa.cpu.clone(), features: t.isa.features.clone() }
}

/// Compiles `src` (scheduled for x86-avx2) through `pipeline`, runs it on
/// this machine, and compares with the interpreter on the unscheduled op.
fn check_cpu(name: &str, src: &str, pipeline: &str) -> CpuCompiled {
    let target = tilec::target::builtin("x86-avx2").expect("built-in target");
    let original = parse(src);
    let mut m = original.clone();
    schedule(&mut m, pipeline, &target);
    let compiled = compile_function_cpu(&m.funcs[0], &llvm_target(&target)).unwrap_or_else(|e| panic!("{name}: {e}\n{}", tilec::syntax::print_module(&m)));
    let dir = std::env::temp_dir().join(format!("tilec-codegen-test-{}", std::process::id()));
    let so = link_shared(&compiled.artifacts.object, &dir, name).expect("links");
    let program = CpuProgram::load(&so, compiled.kernels.clone(), compiled.plan.clone()).expect("loads");
    let f = &original.funcs[0];
    let inputs: Vec<Tensor> = f.params.iter().enumerate().map(|(i, &p)| Tensor::random(f.value_type(p).as_tensor().unwrap(), Tensor::input_seed(1, i))).collect();
    let want = run_function(f, &inputs).expect("interpreter");
    // Flushing the caches before the timed kernels (`Caches::Flushed`, or
    // the weights alone, `Caches::Network`, as network tuning measures)
    // leaves every byte as it was. (For `Network` the last parameter plays
    // a weight.)
    let with_weight = CpuProgram::load(&so, compiled.kernels.clone(), tilec_runtime::HostPlan { weights: Some(1), ..compiled.plan.clone() }).expect("loads");
    for (threads, caches) in [(1, Caches::Warm), (2, Caches::Warm), (1, Caches::Flushed), (2, Caches::Flushed), (1, Caches::Network), (2, Caches::Network)] {
        let program = if caches == Caches::Network { &with_weight } else { &program };
        let got = program.run_timed_with(&inputs, threads, caches).expect("runs").results;
        for (g, w) in got.iter().zip(&want) {
            let c = compare(g, w);
            assert!(c.passed, "{name} with {threads} threads, caches {}: {c:?}\n{}", caches.name(), compiled.mlir);
        }
    }
    compiled
}

const GEMM: &str = "func @gemm(%A: tensor<64x48xf32>, %B: tensor<48x40xf32>, %bias: tensor<40xf32>) -> tensor<64x40xf32> {
  %C = compute \"gemm\" (i: 64, j: 40) reduce sum (k: 48)
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<64x40xf32>[i, j]
      schedule \"x86-avx2\" {
        tile = {i = [32, 16, 4], j = [40, 40, 8], k = [48, 16, 16]},
        unroll = 64,
        vector = {j = 8}
      } {
    %0 = mul %a, %b : f32
    yield %0 : f32
  } epilogue(%acc) reads(%bv = %bias[j]) {
    %1 = add %acc, %bv : f32
    %2 = relu %1 : f32
    yield %2 : f32
  }
  return %C
}";

#[test]
fn scheduled_gemm_compiles_to_fma_vectors_and_matches() {
    let c = check_cpu("gemm", GEMM, "builtin.module(tile,cache,bind,vectorize,unroll,hoist-guards)");
    assert!(c.artifacts.asm.contains("vfmadd"), "no FMA in the assembly");
    assert!(c.artifacts.asm.contains("ymm"), "no 256-bit vectors in the assembly");
}

/// A packed copy bigger than a thread's default stack (2.5 MiB at the
/// core level): the kernel keeps it on its stack, so the threads that run
/// it must get `stack_bytes` more.
#[test]
fn kernels_with_local_buffers_bigger_than_a_default_stack_run() {
    let src = "func @rowsum(%A: tensor<16x40960xf32>) -> tensor<16xf32> {
  %C = compute \"rowsum\" (i: 16) reduce sum (k: 40960) reads(%a = %A[i, k]) -> tensor<16xf32>[i]
      schedule \"x86-avx2\" { tile = {i = [16, 8, 8], k = [40960, 4096, 256]}, cache = {a = l3}, vector = {i = 8} } {
    yield %a : f32
  }
  return %C
}";
    let c = check_cpu("big_local", src, "builtin.module(tile,cache,bind,vectorize,unroll,hoist-guards)");
    assert!(c.kernels[0].stack_bytes >= 16 * 40960 * 4, "stack bytes: {}", c.kernels[0].stack_bytes);
}

#[test]
#[ignore = "prints generated code; run by hand"]
fn show_gemm() {
    let c = check_cpu("gemm_show", GEMM, "builtin.module(tile,cache,bind,vectorize,unroll,hoist-guards)");
    std::fs::write("/tmp/t/gemm.mlir", &c.mlir).unwrap();
    std::fs::write("/tmp/t/gemm.s", &c.artifacts.asm).unwrap();
}

/// GFLOP/s of a scheduled GEMM on this machine (one thread), by hand:
/// `GEMM_TILES="i=..;j=..;k=.." cargo test -p tilec-codegen --release gemm_speed -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a test"]
fn gemm_speed() {
    let n = std::env::var("GEMM_N").ok().and_then(|v| v.parse().ok()).unwrap_or(1024u64);
    let tiles = std::env::var("GEMM_TILES").unwrap_or_else(|_| "i = [1024, 96, 6], j = [1024, 256, 16], k = [1024, 256, 256]".into());
    let cache = std::env::var("GEMM_CACHE").unwrap_or_default();
    let tname = std::env::var("GEMM_TARGET").unwrap_or_else(|_| "x86-avx2".into());
    let width = std::env::var("GEMM_VEC").unwrap_or_else(|_| "8".into());
    // The loop order within a tile level follows the axes' order.
    let axes = if std::env::var("GEMM_J_FIRST").is_ok() { format!("j: {n}, i: {n}") } else { format!("i: {n}, j: {n}") };
    let src = format!("func @g(%A: tensor<{n}x{n}xf32>, %B: tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32> {{
  %C = compute ({axes}) reduce sum (k: {n}) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<{n}x{n}xf32>[i, j]
      schedule \"{tname}\" {{ tile = {{{tiles}}}, {cache} unroll = 512, vector = {{j = {width}}} }} {{
    %0 = mul %a, %b : f32
    yield %0 : f32
  }}
  return %C
}}");
    let target = tilec::target::builtin(&tname).expect("built-in target");
    let mut m = parse(&src);
    schedule(&mut m, "builtin.module(tile,cache,bind,vectorize,unroll,hoist-guards)", &target);
    let compiled = compile_function_cpu(&m.funcs[0], &LlvmTarget::host()).unwrap();
    std::fs::write("/tmp/t/speed.mlir", &compiled.mlir).unwrap();
    std::fs::write("/tmp/t/speed.s", &compiled.artifacts.asm).unwrap();
    let dir = std::env::temp_dir().join("tilec-speed");
    let so = link_shared(&compiled.artifacts.object, &dir, "speed").unwrap();
    let program = CpuProgram::load(&so, compiled.kernels.clone(), compiled.plan.clone()).unwrap();
    let f = &m.funcs[0];
    let inputs: Vec<Tensor> = f.params.iter().enumerate().map(|(i, &p)| Tensor::random(f.value_type(p).as_tensor().unwrap(), i as u64)).collect();
    let mut times = Vec::new();
    let runs = std::env::var("GEMM_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(7usize);
    for _ in 0..runs {
        times.push(program.run_timed(&inputs, 1).unwrap().kernel_seconds);
    }
    times.sort_by(f64::total_cmp);
    eprintln!("times (ms, sorted): {:?}", times.iter().map(|t| (t * 1e4).round() / 10.0).collect::<Vec<_>>());
    let mid = times[times.len() / 2];
    let gflops = 2.0 * (n * n * n) as f64 / mid / 1e9;
    let best = 2.0 * (n * n * n) as f64 / times[0] / 1e9;
    let lanes = if width == "16" { 16 } else { 8 };
    let peak = peak::measure_fma_peak(&LlvmTarget::host(), lanes, 1, 7).unwrap();
    eprintln!(
        "GEMM {n}: median {:.2} ms, {gflops:.1} GFLOP/s (best {best:.1}) over {runs} runs; measured {lanes}-lane FMA peak {:.1} GFLOP/s: {:.1}% (best {:.1}%)",
        mid * 1e3,
        peak.gflops,
        100.0 * gflops / peak.gflops,
        100.0 * best / peak.gflops
    );
}

#[test]
fn scheduled_gemm_compiles_to_ptx_with_shared_tiles_and_barriers() {
    let src = "func @gemm(%A: tensor<256x128xf32>, %B: tensor<128x192xf32>) -> tensor<256x192xf32> {
  %C = compute \"gemm\" (i: 256, j: 192) reduce sum (k: 128)
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<256x192xf32>[i, j]
      schedule \"sm90\" {
        tile = {i = [64, 4], j = [64, 4], k = [16, 4]},
        vthread = {i = 2, j = 2},
        cache = {a = shared, b = shared},
        unroll = 64
      } {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}";
    let target = tilec::target::builtin("sm90").expect("built-in target");
    let mut m = parse(src);
    schedule(&mut m, "builtin.module(tile,cache,vthread,bind,unroll)", &target);
    let c = compile_function_gpu(&m.funcs[0], &target).unwrap_or_else(|e| panic!("{e}\n{}", tilec::syntax::print_module(&m)));
    for needle in ["ld.shared", "st.shared", "bar.sync", "%tid.x", "%ctaid.x", "fma.rn.f32"] {
        assert!(c.ptx.contains(needle), "PTX lacks `{needle}`:\n{}", c.ptx);
    }
    let k = &c.kernels[0];
    assert_eq!(k.grid, [3, 4, 1]);
    assert_eq!(k.block, [16, 16, 1]);
    assert_eq!(k.shared_bytes, (64 * 16 + 16 * 64) * 4);
}

/// An elementwise op `y = <op> x` on a `rows`x`cols` tensor of `elem`, `j`
/// in tiles of 32 (a partial last one unless 32 divides `cols`), with the
/// vector axis `j` in 8 lanes (or `vector = {}` left out when `vectorised`
/// is false).
fn elementwise_src(op: &str, elem: &str, rows: u64, cols: u64, vectorised: bool) -> String {
    let vector = if vectorised { ", vector = {j = 8}" } else { "" };
    format!(
        "func @{op}_{elem}(%x: tensor<{rows}x{cols}x{elem}>) -> tensor<{rows}x{cols}x{elem}> {{
  %y = compute \"{op}_{elem}\" (i: {rows}, j: {cols}) reads(%v = %x[i, j]) -> tensor<{rows}x{cols}x{elem}>[i, j]
      schedule \"x86-avx2\" {{ tile = {{i = [{rows}, 4, 1], j = [32, 32, 16]}}{vector} }} {{
    %0 = {op} %v : {elem}
    yield %0 : {elem}
  }}
  return %y
}}"
    )
}

/// Compiles a one-op function for x86-avx2 and runs it on `input`; returns
/// the result, the interpreter's, and the assembly.
fn run_one_op(name: &str, src: &str, input: Tensor, dir: &std::path::Path) -> (Tensor, Tensor, String) {
    let target = tilec::target::builtin("x86-avx2").expect("built-in target");
    let original = parse(src);
    let mut m = original.clone();
    schedule(&mut m, "builtin.module(tile,cache,bind,vectorize,unroll,hoist-guards)", &target);
    let compiled = compile_function_cpu(&m.funcs[0], &llvm_target(&target)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let so = link_shared(&compiled.artifacts.object, dir, name).expect("links");
    let program = CpuProgram::load(&so, compiled.kernels.clone(), compiled.plan.clone()).expect("loads");
    let inputs = vec![input];
    let got = program.run(&inputs, 1).unwrap_or_else(|e| panic!("{name}: {e}")).remove(0);
    let want = run_function(&original.funcs[0], &inputs).expect("interpreter").remove(0);
    (got, want, compiled.artifacts.asm)
}

/// Inputs across a float function's whole domain: the special values
/// (zeros, infinities, NaN, f32's subnormals and extremes), every binade of
/// f32 on both signs, and a fine grid over [-20, 20]; `n` of them.
fn math_inputs(n: usize) -> Vec<f64> {
    let mut v = vec![0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e-45, -1e-45, 1e-40, -3e-39];
    v.extend([f32::MIN_POSITIVE as f64, f32::MAX as f64, -(f32::MAX as f64), 1.0, -1.0, 0.5, 88.7, 88.8, -87.4, -104.0]);
    for e in -126..=127 {
        let x = 1.37 * 2f64.powi(e);
        v.extend([x, -x]);
    }
    assert!(v.len() < n / 2, "room for the grid");
    let left = n - v.len();
    v.extend((0..left).map(|k| -20.0 + 40.0 * k as f64 / left as f64));
    v
}

/// Whether `got` is `want` within the element type's tolerance with the
/// element as its own scale (`compare` on that element alone, far
/// stricter than on a whole tensor), NaN matching NaN. Results below f32's
/// smallest normal number may be flushed to zero: MLIR's `exp` does so.
fn close_alone(got: f64, want: f64, elem: tilec::ir::ElemType) -> bool {
    let rtol = tilec::interp::compare::tolerance(elem);
    let flushed = want.abs() < f32::MIN_POSITIVE as f64 && got.abs() <= f32::MIN_POSITIVE as f64;
    (got.is_nan() && want.is_nan()) || got == want || (got - want).abs() <= rtol * 2.0 * want.abs() || flushed
}

/// Error of `got` in units in the last place of f32 at `want`.
fn f32_ulps(got: f64, want: f64) -> f64 {
    if got == want || (got.is_nan() && want.is_nan()) {
        return 0.0;
    }
    let ulp = (want.abs() as f32).max(f32::MIN_POSITIVE);
    let ulp = f32::from_bits(ulp.to_bits() + 1) as f64 - ulp as f64;
    (got - want).abs() / ulp
}

/// Can this machine run `x86-avx2` code? Says so when it cannot (the
/// test that asks is then skipped).
fn host_runs_avx2() -> bool {
    let ok = driver::host_can_run(&llvm_target(&tilec::target::builtin("x86-avx2").unwrap())).is_ok();
    if !ok {
        eprintln!("this machine cannot run x86-avx2 code: skipped");
    }
    ok
}

/// Every math function, in f32, f16 and bf16, in a vectorised kernel with
/// whole and partial (masked) vector tiles: vector code with no library
/// call (the functions MLIR approximates by polynomials, the others as
/// LLVM's vector instructions), matching the interpreter on every element
/// of the inputs of `math_inputs`.
#[test]
fn vectorised_math_functions_are_vector_code_and_match_the_interpreter() {
    use tilec::ir::{ElemType, TensorType};
    if !host_runs_avx2() {
        return;
    }
    let dir = tempfile::tempdir().expect("temporary folder");
    let (rows, cols) = (48, 61);
    let mut failures = Vec::new();
    for (elem, name) in [(ElemType::F32, "f32"), (ElemType::F16, "f16"), (ElemType::BF16, "bf16")] {
        let input = Tensor::from_f64(&TensorType::new(vec![rows, cols], elem), &math_inputs((rows * cols) as usize)).unwrap();
        for op in ["exp", "log", "tanh", "erf", "sigmoid", "sqrt", "rsqrt", "abs"] {
            let what = format!("{op} on {name}");
            let (got, want, asm) = run_one_op(&format!("{op}_{name}"), &elementwise_src(op, name, rows, cols, true), input.clone(), dir.path());
            assert!(!asm.contains("call"), "{what}: a call in the kernel:\n{asm}");
            // A 16-bit abs is one `vpand`/`vandps` on 8 lanes, an xmm register.
            let vector_register = if op == "abs" && elem != ElemType::F32 { "xmm" } else { "ymm" };
            assert!(asm.contains(vector_register), "{what}: no {vector_register} register:\n{asm}");
            let mut worst_ulps = 0.0f64;
            for i in 0..want.len() {
                let (g, w, x) = (got.get_f64(i), want.get_f64(i), input.get_f64(i));
                if !close_alone(g, w, elem) {
                    failures.push(format!("{what}({x:e}) = {g:e}, interpreter {w:e}"));
                }
                if elem == ElemType::F32 && w.is_finite() && w.abs() >= f32::MIN_POSITIVE as f64 {
                    worst_ulps = worst_ulps.max(f32_ulps(g, w));
                }
            }
            if elem == ElemType::F32 {
                eprintln!("{what}: at most {worst_ulps:.1} ulp from the interpreter (normal results)");
            }
        }
    }
    assert!(failures.is_empty(), "{} elements differ:\n{}", failures.len(), failures.join("\n"));
}

/// `abs` of i32 and i8, vectorised and not: LLVM's `abs` intrinsic
/// (`vpabsd`/`vpabsb` in vector code), wrapping at the minimum as the
/// dialect says (`abs(-128) == -128` in i8).
#[test]
fn integer_abs_compiles_and_wraps_at_the_minimum() {
    use tilec::ir::{ElemType, TensorType};
    if !host_runs_avx2() {
        return;
    }
    let dir = tempfile::tempdir().expect("temporary folder");
    for (elem, name, min, instruction) in [(ElemType::I32, "i32", i32::MIN as i64, "vpabsd"), (ElemType::I8, "i8", i8::MIN as i64, "vpabsb")] {
        let values: Vec<i64> = (0..4 * 64).map(|k| if k % 7 == 0 { min } else { (k * 37 % 255) - 127 }).collect();
        let input = Tensor::from_i64(&TensorType::new(vec![4, 64], elem), &values).unwrap();
        for vectorised in [true, false] {
            let what = format!("abs on {name} (vectorised: {vectorised})");
            let (got, want, asm) = run_one_op(&format!("abs_{name}_{vectorised}"), &elementwise_src("abs", name, 4, 64, vectorised), input.clone(), dir.path());
            assert_eq!(got.to_f64_vec(), want.to_f64_vec(), "{what}");
            assert_eq!(want.get_i64(0), min, "{what}: abs of the minimum wraps");
            if vectorised {
                assert!(asm.contains(instruction), "{what}: no {instruction}:\n{asm}");
            }
        }
    }
}

/// bf16 arithmetic in compiled code rounds after every op, as the
/// interpreter does (computing in f32 and rounding to bf16 is exact for
/// `mul` and `add`), so a bf16 GEMM matches it bit for bit, in whole and in
/// masked partial vector tiles: the rounding between a `contract` product
/// and its sum survives (`tilec-expand-bf16` runs before the vector
/// lowering's folding), and masked bf16 loads and stores link (no
/// `__truncsfbf2`).
#[test]
fn bf16_arithmetic_rounds_per_op_and_matches_the_interpreter_exactly() {
    use tilec::ir::{ElemType, TensorType};
    if !host_runs_avx2() {
        return;
    }
    let src = "func @gemm_bf16(%A: tensor<13x16xbf16>, %B: tensor<16x21xbf16>) -> tensor<13x21xbf16> {
  %C = compute \"gemm_bf16\" (i: 13, j: 21) reduce sum (k: 16) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<13x21xbf16>[i, j]
      schedule \"x86-avx2\" { tile = {i = [4, 4, 2], j = [16, 16, 16], k = [16, 16, 4]}, vector = {j = 8} } {
    %0 = mul %a, %b : bf16
    yield %0 : bf16
  }
  return %C
}";
    let target = tilec::target::builtin("x86-avx2").expect("built-in target");
    let original = parse(src);
    let mut m = original.clone();
    schedule(&mut m, "builtin.module(tile,cache,bind,vectorize,unroll,hoist-guards)", &target);
    let compiled = compile_function_cpu(&m.funcs[0], &llvm_target(&target)).expect("compiles");
    assert!(!compiled.artifacts.asm.contains("call"), "a call in the kernel:\n{}", compiled.artifacts.asm);
    let dir = tempfile::tempdir().expect("temporary folder");
    let so = link_shared(&compiled.artifacts.object, dir.path(), "gemm_bf16").expect("links");
    let program = CpuProgram::load(&so, compiled.kernels.clone(), compiled.plan.clone()).expect("loads");
    let f = &original.funcs[0];
    for seed in 0..3 {
        let inputs: Vec<Tensor> = f.params.iter().enumerate().map(|(i, &p)| Tensor::random(f.value_type(p).as_tensor().unwrap(), Tensor::input_seed(seed, i))).collect();
        let want = run_function(f, &inputs).expect("interpreter");
        let got = program.run(&inputs, 2).expect("runs");
        assert_eq!(got[0].ty, TensorType::new(vec![13, 21], ElemType::BF16));
        assert_eq!(got[0].to_f64_vec(), want[0].to_f64_vec(), "seed {seed}");
    }
}

/// How many random schedules per op kind and target the differential tests
/// draw (`TILEC_DIFF_CASES`, default 3; CI runs the default).
fn diff_cases() -> u64 {
    std::env::var("TILEC_DIFF_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
}

/// The CPU targets whose code runs on this machine.
fn runnable_cpu_targets() -> Vec<Arc<Target>> {
    ["x86-avx2", "x86-avx512"]
        .into_iter()
        .map(|n| tilec::target::builtin(n).expect("built-in target"))
        .filter(|t| driver::host_can_run(&llvm_target(t)).is_ok())
        .collect()
}

/// Compiles `m`'s function for `target`, links it as library `name` in
/// `dir`, runs it on 1 and 2 threads and compares each output with
/// `want`; `what` and `text` (the module as scheduled) go in the failure
/// message.
fn run_and_compare(m: &Module, target: &Target, (dir, name): (&std::path::Path, &str), (inputs, want): (&[Tensor], &[Tensor]), what: &str, text: &str) {
    // Weights are trailing parameters, as `lower-to-mlir` makes them (and
    // as the inputs have them: `params_as_weights` keeps their order).
    let mut f = m.funcs[0].clone();
    tilec::ir::weights::hoist_weights(&mut f);
    let compiled = compile_function_cpu(&f, &llvm_target(target)).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
    let so = link_shared(&compiled.artifacts.object, dir, name).expect("links");
    let program = CpuProgram::load(&so, compiled.kernels.clone(), compiled.plan.clone()).expect("loads");
    for threads in [1, 2] {
        let got = program.run(inputs, threads).unwrap_or_else(|e| panic!("{what}: {e}"));
        for (g, w) in got.iter().zip(want) {
            let c = compare(g, w);
            assert!(c.passed, "{what}, {threads} threads: {c:?}\n{text}");
        }
    }
}

/// Differential test: every op kind, under random valid schedules (and the
/// plain one), through every scheduling pass, compiled for each CPU target
/// this machine runs, executed with 1 and 2 threads, compared with the
/// interpreter on the op as written. Odd seeds read every operand but the
/// first as a `weight`, so that `prepack` moves their staged copies.
#[test]
fn random_schedules_compile_and_match_the_interpreter_on_the_cpu() {
    let full = "builtin.module(tile,cache,vthread,bind,vectorize,prepack,unroll,hoist-guards)";
    let plain = "builtin.module(collapse-axes,tile{unscheduled=serial},cache,vthread,bind,vectorize,unroll,hoist-guards)";
    let dir = tempfile::tempdir().expect("temporary folder");
    let (mut compiled_count, mut prepacked) = (0, 0);
    for target in runnable_cpu_targets() {
        for (op, src) in tilec_passes::samples::OPS.iter().enumerate() {
            let original = parse(src);
            let f0 = &original.funcs[0];
            let inputs: Vec<Tensor> = f0.params.iter().enumerate().map(|(i, &p)| Tensor::random(f0.value_type(p).as_tensor().unwrap(), Tensor::input_seed(7, i))).collect();
            let want = run_function(f0, &inputs).expect("interpreter");
            let mut cases: Vec<(String, Module, &str)> = vec![("plain".into(), original.clone(), plain)];
            for seed in 0..diff_cases() {
                let mut m = original.clone();
                if seed % 2 == 1 {
                    tilec_passes::samples::params_as_weights(&mut m);
                }
                let mut choices = tilec_passes::samples::Choices::new(seed * 1000 + op as u64);
                if tilec_passes::samples::set_random_valid_schedule(&mut m, &target, &mut choices, 50) {
                    cases.push((format!("seed {seed}"), m, full));
                }
            }
            for (case, mut m, pipeline) in cases {
                let what = format!("op {op} on {} ({case})", target.name);
                let schedule_text = tilec::syntax::print_module(&m);
                schedule(&mut m, pipeline, &target);
                prepacked += usize::from(tilec::syntax::print_module(&m).contains(" prepack schedule"));
                run_and_compare(&m, &target, (dir.path(), &format!("diff{compiled_count}")), (&inputs, &want), &what, &schedule_text);
                compiled_count += 1;
            }
        }
    }
    eprintln!("{compiled_count} compiled kernels matched the interpreter, {prepacked} of them with weights laid out by a prepack kernel");
    assert!(compiled_count > 0 || runnable_cpu_targets().is_empty());
    assert!(compiled_count == 0 || prepacked > 0, "no case prepacked a weight");
}

/// Which copies merge dimensions before emission: runs contiguous on both
/// sides merge (the weights `w[f][c][r][s]` packed `[c][r][s][f]`), a
/// dimension read from a non-zero origin, in part, or landing elsewhere in
/// the destination does not.
#[test]
fn copies_merge_the_dimensions_both_sides_run_on_through() {
    use tilec::ir::{AffineExpr, CopyOp};
    let zero = || AffineExpr::constant(0);
    let copy = |sizes: Vec<u64>, permute: Vec<usize>| CopyOp { src: Vec::new(), dst: Vec::new(), sizes, stride: Vec::new(), split: None, permute, pad: None, cooperative: false };
    let origins = |n: usize| (0..n).map(|_| zero()).collect::<Vec<_>>();
    // w[f][c][r][s], 32 of 512 f from f0 (not constant), into [c][r][s][f].
    let weights = copy(vec![32, 512, 3, 3], vec![1, 2, 3, 0]);
    let f0 = tilec::ir::Value::from_u32(0);
    let mut src = origins(4);
    src[0] = AffineExpr::var(f0);
    let m = crate::emit::merge_contiguous_dims(&weights, (&src, &[512, 512, 3, 3]), (&origins(4), &[512, 3, 3, 32])).expect("merges");
    assert_eq!((m.src_groups, m.dst_groups), (vec![vec![0], vec![1, 2, 3]], vec![vec![0, 1, 2], vec![3]]));
    assert_eq!((m.copy.sizes, m.copy.permute), (vec![32, 4608], vec![1, 0]));
    // Half of `c`: `r` and `s` still merge into it, `c` not into `f`.
    let half = copy(vec![32, 256, 3, 3], vec![1, 2, 3, 0]);
    let m = crate::emit::merge_contiguous_dims(&half, (&origins(4), &[512, 512, 3, 3]), (&origins(4), &[256, 3, 3, 32])).expect("merges");
    assert_eq!(m.copy.sizes, vec![32, 2304]);
    // A halo (origin -1 along the last dimension) merges nothing there.
    let mut halo = origins(2);
    halo[1] = AffineExpr::constant(-1);
    assert!(crate::emit::merge_contiguous_dims(&copy(vec![4, 9], Vec::new()), (&halo, &[4, 7]), (&origins(2), &[4, 9])).is_none());
    // Whole rows, but the destination's rows are wider than the box's.
    assert!(crate::emit::merge_contiguous_dims(&copy(vec![4, 7], Vec::new()), (&origins(2), &[4, 7]), (&origins(2), &[4, 8])).is_none());
    // Transposed 2-D: nothing to merge.
    assert!(crate::emit::merge_contiguous_dims(&copy(vec![4, 7], vec![1, 0]), (&origins(2), &[4, 7]), (&origins(2), &[7, 4])).is_none());
}

/// Contractions onto `dot` intrinsics whose operands `tensorize` repacks
/// with split copies: a u8 GEMM and a bf16 GEMM (the lanes operand into
/// VNNI's `[k/4][j][4]`, `[k/2][j][2]`), and a padded int8 convolution
/// (the weights permuted and split; the input split with a halo on every
/// side, its rows 9 wide: one partial step of 16). Extents the
/// intrinsics' 16 lanes and 4 (2) products divide.
const DOT_CONTRACTIONS: &[&str] = &[
    "func @f(%A: tensor<20x32xu8>, %B: tensor<32x48xi8>) -> tensor<20x48xi32> {
  %C = compute (i: 20, j: 48) reduce sum (k: 32) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<20x48xi32>[i, j] {
    %x = cast %a : u8 -> i32
    %y = cast %b : i8 -> i32
    %0 = mul %x, %y : i32
    yield %0 : i32
  }
  return %C
}",
    "func @f(%A: tensor<12x16xbf16>, %B: tensor<16x48xbf16>) -> tensor<12x48xf32> {
  %C = compute (i: 12, j: 48) reduce sum (k: 16) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<12x48xf32>[i, j] {
    %x = cast %a : bf16 -> f32
    %y = cast %b : bf16 -> f32
    %0 = mul %x, %y : f32
    yield %0 : f32
  }
  return %C
}",
    "func @f(%x: tensor<1x8x9x9xu8>, %w: tensor<16x8x3x3xi8>) -> tensor<1x16x9x9xi32> {
  %y = compute (n: 1, f: 16, oh: 9, ow: 9) reduce sum (c: 8, r: 3, s: 3)
      reads(%xv = %x[n, c, oh + r - 1, ow + s - 1] pad(0), %wv = %w[f, c, r, s]) -> tensor<1x16x9x9xi32>[n, f, oh, ow] {
    %p = cast %xv : u8 -> i32
    %q = cast %wv : i8 -> i32
    %0 = mul %p, %q : i32
    yield %0 : i32
  }
  return %y
}",
];

/// Differential test of compiled `dot` kernels: each of
/// [`DOT_CONTRACTIONS`] under random schedules that compute with a dot
/// intrinsic (`search{strategy=random mapping=0}`), through `tensorize` and
/// the scheduling passes, compiled for x86-avx512 (with AVX512-BF16 added
/// for the bf16 GEMM) where this machine runs it, executed on 1 and 2
/// threads, compared with the interpreter on the op as written. The
/// repacking copies (`split`) run compiled here, not only interpreted as in
/// the passes' property test.
#[test]
fn random_dot_schedules_compile_and_match_the_interpreter_on_the_cpu() {
    let avx512 = tilec::target::builtin("x86-avx512").expect("built-in target");
    let text = include_str!("../../targets/x86-avx512.toml").replace("name = \"x86-avx512\"", "name = \"x86-avx512-bf16\"").replace("+avx512vnni,", "+avx512vnni,+avx512bf16,");
    let mut sources = SourceMap::new();
    let bf16 = Arc::new(tilec::target::parse_target(&mut sources, "x86-avx512-bf16.toml", &text).unwrap_or_else(|d| panic!("{}", sources.render(&d.0))));
    let dir = tempfile::tempdir().expect("temporary folder");
    let (mut compiled_count, mut packed, mut prepacked) = (0, 0, 0);
    for (op, src) in DOT_CONTRACTIONS.iter().enumerate() {
        let target = if src.contains("bf16") { &bf16 } else { &avx512 };
        if driver::host_can_run(&llvm_target(target)).is_err() {
            eprintln!("dot contraction {op}: this machine does not run {}; skipped", target.name);
            continue;
        }
        let original = parse(src);
        let f0 = &original.funcs[0];
        let inputs: Vec<Tensor> = f0.params.iter().enumerate().map(|(i, &p)| Tensor::random(f0.value_type(p).as_tensor().unwrap(), Tensor::input_seed(11, i))).collect();
        let want = run_function(f0, &inputs).expect("interpreter");
        for seed in 0..diff_cases() + 1 {
            let mut m = original.clone();
            // Odd seeds: the second operand is a network's weight.
            if seed % 2 == 1 {
                tilec_passes::samples::params_as_weights(&mut m);
            }
            let pipeline = format!("builtin.module(search{{strategy=random seed={seed} budget=4 mapping=0}},tile,cache,vthread,bind,vectorize,tensorize,prepack,unroll,hoist-guards)");
            schedule(&mut m, &pipeline, target);
            let what = format!("dot contraction {op} on {} (seed {seed})", target.name);
            let text = tilec::syntax::print_module(&m);
            assert!(text.contains("intrinsic \"vp") || text.contains("intrinsic \"vdp"), "{what}: no dot intrinsic\n{text}");
            packed += usize::from(text.contains("split ["));
            prepacked += usize::from(text.contains(" prepack schedule"));
            run_and_compare(&m, target, (dir.path(), &format!("dot{compiled_count}")), (&inputs, &want), &what, &text);
            compiled_count += 1;
        }
    }
    eprintln!("{compiled_count} compiled dot kernels matched the interpreter, {packed} of them with repacked operands, {prepacked} with weights laid out by a prepack kernel");
    assert!(compiled_count == 0 || packed > 0, "no compiled dot kernel repacked an operand");
    assert!(compiled_count == 0 || prepacked > 0, "no compiled dot kernel prepacked a weight");
}

/// Every op kind under random valid GPU schedules compiles to PTX for
/// sm_80 and sm_90; where `TILEC_PTXAS` names NVIDIA's assembler, the PTX
/// is assembled too (the test says so when it is not).
#[test]
fn random_schedules_compile_to_ptx_for_both_gpus() {
    let ptxas = std::env::var_os("TILEC_PTXAS").map(std::path::PathBuf::from).filter(|p| p.exists());
    if ptxas.is_none() {
        eprintln!("TILEC_PTXAS not set: PTX is generated but not assembled");
    }
    let dir = tempfile::tempdir().expect("temporary folder");
    let mut made = 0;
    for name in ["sm80", "sm90"] {
        let target = tilec::target::builtin(name).expect("built-in target");
        for (op, src) in tilec_passes::samples::OPS.iter().enumerate() {
            for seed in 0..diff_cases().min(2) {
                let mut m = parse(src);
                let mut choices = tilec_passes::samples::Choices::new(seed * 1000 + op as u64 + 17);
                if !tilec_passes::samples::set_random_valid_schedule(&mut m, &target, &mut choices, 50) {
                    continue;
                }
                let what = format!("op {op} on {name} (seed {seed})");
                let schedule_text = tilec::syntax::print_module(&m);
                schedule(&mut m, "builtin.module(tile,cache,vthread,bind,vectorize,unroll,hoist-guards)", &target);
                let c = match compile_function_gpu(&m.funcs[0], &target) {
                    Ok(c) => c,
                    // Random schedules may stage more than static shared
                    // memory holds; that refusal is tested in lit.
                    Err(e) if e.0.contains("statically declared shared memory") => continue,
                    Err(e) => panic!("{what}: {e}\n{schedule_text}"),
                };
                assert!(c.ptx.contains(&format!(".target {}", target.isa.cpu)), "{what}: PTX for the wrong chip");
                if let Some(ptxas) = &ptxas {
                    let path = dir.path().join(format!("k{made}.ptx"));
                    std::fs::write(&path, &c.ptx).unwrap();
                    let arch = format!("-arch={}", target.isa.cpu);
                    let out = std::process::Command::new(ptxas).arg(&arch).arg(&path).arg("-o").arg(path.with_extension("cubin")).output().expect("runs ptxas");
                    assert!(out.status.success(), "{what}: ptxas rejects the PTX:\n{}\n{}", String::from_utf8_lossy(&out.stderr), c.ptx);
                }
                made += 1;
            }
        }
    }
    eprintln!("{made} PTX modules generated{}", if ptxas.is_some() { " and assembled" } else { "" });
    assert!(made >= 2 * tilec_passes::samples::OPS.len(), "too few valid GPU schedules drawn ({made})");
}

/// This machine's f32 FMA peak, by hand:
/// `cargo test -p tilec-codegen --release fma_peak -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a test"]
fn fma_peak() {
    let host = LlvmTarget::host();
    for lanes in [8, 16] {
        if lanes == 16 && driver::host_can_run(&llvm_target(&tilec::target::builtin("x86-avx512").unwrap())).is_err() {
            continue;
        }
        for threads in [1, 2] {
            let p = peak::measure_fma_peak(&host, lanes, threads, 7).unwrap();
            eprintln!("{lanes} lanes, {threads} thread(s): {:.1} GFLOP/s", p.gflops);
        }
    }
}

#[test]
fn the_bandwidth_kernel_runs_and_reports_a_positive_rate() {
    let b = peak::measure_bandwidth(&LlvmTarget::host(), 2, 1).expect("triad kernel compiles and runs");
    assert!(b.gbs > 0.1 && b.gbs.is_finite(), "{b:?}");
}

/// Every accumulator chain the peak kernel's FLOPs count must survive LLVM:
/// with constant starts, the chain starting at 1.0 (a fixed point of
/// `x * 0.999999 + 0.000001` in f32) folded away and the measured peak
/// read 12/11 of the truth (126.5 against 116.7 GFLOP/s on a Zen 4 core).
#[test]
fn the_peak_kernel_keeps_every_accumulator_chain() {
    for (target, lanes) in [("x86-avx2", 8), ("x86-avx512", 16)] {
        let llvm = llvm_target(&tilec::target::builtin(target).unwrap());
        let asm = compile::compile_cpu(&peak::peak_kernel_mlir(lanes, peak::PEAK_CHAINS, 1), &llvm).unwrap().asm;
        let accumulators: std::collections::BTreeSet<&str> =
            asm.lines().filter(|l| l.trim_start().starts_with("vfmadd")).filter_map(|l| l.split(',').next_back()).map(str::trim).collect();
        assert_eq!(accumulators.len(), peak::PEAK_CHAINS, "{target}: FMA accumulators {accumulators:?}");
    }
}

/// Fewer chains than latency × units cannot reach the peak: one chain's
/// rate is at most half of twelve's on any x86 core with FMA (latency 4
/// or more), and the chain count found is in range.
#[test]
fn fma_chains_bound_the_rate() {
    let host = LlvmTarget::host();
    let one = peak::measure_fma_rate(&host, 8, 1, 1, 3).unwrap();
    let peak = peak::measure_fma_peak(&host, 8, 1, 3).unwrap();
    assert!(one.gflops < 0.5 * peak.gflops, "1 chain {one:?} against 12 {peak:?}");
    let chains = peak::measure_fma_chains(&host, 8, peak.gflops, 3).unwrap();
    assert!((2..=peak::PEAK_CHAINS).contains(&chains), "{chains}");
}

#[test]
fn the_peak_kernel_runs_and_reports_a_positive_rate() {
    let p = peak::measure_fma_peak(&LlvmTarget::host(), 8, 1, 1).expect("peak kernel compiles and runs");
    assert!(p.gflops > 0.1 && p.gflops.is_finite(), "{p:?}");
}

/// The dot-product peak kernels (VNNI, BF16) compile for a target with the
/// features, and every accumulator chain survives LLVM (the op count
/// assumes `PEAK_CHAINS` instructions per step). Running them needs the
/// CPU feature: `tilec-bench --peak` measures them where `host` offers them.
#[test]
fn the_dot_peak_kernels_keep_every_accumulator_chain() {
    let avx512 = tilec::target::builtin("x86-avx512").unwrap();
    let mut llvm = llvm_target(&avx512);
    llvm.features.push_str(",+avx512bf16");
    for (name, mnemonic) in [("vpdpbusd.zmm", "vpdpbusd"), ("vdpbf16ps.zmm", "vdpbf16ps")] {
        let x = avx512.intrinsics.iter().find(|x| x.name == name).unwrap_or_else(|| panic!("x86-avx512 lists {name}"));
        let mlir = peak::dot_peak_kernel_mlir(x, peak::PEAK_CHAINS, 1).expect("a known dot product");
        let asm = compile::compile_cpu(&mlir, &llvm).unwrap().asm;
        let accumulators: std::collections::BTreeSet<&str> =
            asm.lines().filter(|l| l.trim_start().starts_with(mnemonic)).filter_map(|l| l.split(',').next_back()).map(str::trim).collect();
        assert_eq!(accumulators.len(), peak::PEAK_CHAINS, "{name}: accumulators {accumulators:?}");
    }
    let fma = avx512.intrinsics.iter().find(|x| x.kind == "fma").unwrap();
    assert!(peak::dot_peak_kernel_mlir(fma, peak::PEAK_CHAINS, 1).is_none(), "an FMA has its own peak kernel");
}

/// The evaluator learns how many of an op's parameters are weights with
/// its reference (what `Caches::Network` flushes), also for an op too
/// large to check against the interpreter.
#[test]
fn the_evaluator_counts_the_weights_it_hoists() {
    use tilec::measure::Evaluator;
    let small = parse(
        "func @normalize(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %mean = weight \"mean\" : tensor<8xf32>
  %scale = weight \"scale\" : tensor<8xf32>
  %y = compute (b: 2, c: 8) reads(%v = %x[b, c], %m = %mean[c], %k = %scale[c]) -> tensor<2x8xf32>[b, c] {
    %d = sub %v, %m : f32
    %r = mul %d, %k : f32
    yield %r : f32
  }
  return %y
}
",
    );
    let large = parse(
        "func @big(%x: tensor<8192x4096xf32>) -> tensor<8192x4096xf32> {
  %s = weight \"s\" : tensor<8192x4096xf32>
  %y = compute (i: 8192, j: 4096) reads(%a = %x[i, j], %w = %s[i, j]) -> tensor<8192x4096xf32>[i, j] {
    %0 = mul %a, %w : f32
    yield %0 : f32
  }
  return %y
}
",
    );
    let target = tilec::target::builtin("x86-avx2").expect("built-in target");
    let dir = std::env::temp_dir().join(format!("tilec-evaluator-weights-{}", std::process::id()));
    let mut e = crate::evaluator::CheckedEvaluator(crate::evaluator::WorkerEvaluator::new(llvm_target(&target), PathBuf::from("no-worker"), dir));
    assert_eq!(e.0.weights, None);
    e.set_reference(&small, "normalize").expect("a reference for a small op");
    assert_eq!(e.0.weights, Some(2));
    assert!(e.0.reference.is_some());
    let why = e.set_reference(&large, "big").expect_err("too many points for the interpreter");
    assert!(why.contains("iteration points"), "{why}");
    assert_eq!(e.0.weights, Some(1));
    assert!(e.0.reference.is_none());
}
