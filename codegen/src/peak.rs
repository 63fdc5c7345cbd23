//! Measuring this machine's floating-point peak with a generated kernel, so
//! that "% of peak" figures come from the machine, not a datasheet.
//!
//! The kernel keeps `chains` independent accumulators of `lanes`-wide f32
//! vectors and updates each with a fused multiply-add per step. With at
//! least latency x throughput chains (4 x 2 on current x86 cores) the FMA
//! units never wait, so its rate is the core's FMA peak. It goes through
//! the same MLIR → LLVM path as every tilec kernel and runs through the
//! same runtime, one parallel iteration per thread.

use crate::compile::{CompileError, LlvmTarget, compile_cpu};
use crate::{CpuProgram, HostPlan, KernelAbi, link_shared};
use std::fmt::Write;
use tilec_runtime::program::BufferSpec;

/// FMA steps per accumulator and call (long enough to dwarf the call).
const STEPS: u64 = 1 << 22;

/// Accumulator chains of the peak kernel: more than latency (4) x FMA
/// units (2), fewer than the 16 (ymm) or 32 (zmm) vector registers.
pub(crate) const PEAK_CHAINS: usize = 12;

/// The MLIR of the peak kernel: `peak_k0(out: memref<T x lanes x f32>, lo, hi)`,
/// one parallel iteration per thread, each writing its accumulators' sum
/// to its row of `out` (so nothing is optimised away).
pub(crate) fn peak_kernel_mlir(lanes: u64, chains: usize, threads: u64) -> String {
    let v = format!("vector<{lanes}xf32>");
    let mut s = String::new();
    writeln!(s, "module {{").unwrap();
    writeln!(s, "  func.func @peak_k0(%out: memref<{threads}x{lanes}xf32>, %lo: index, %hi: index) {{").unwrap();
    writeln!(s, "    %c0 = arith.constant 0 : index").unwrap();
    writeln!(s, "    %c1 = arith.constant 1 : index").unwrap();
    writeln!(s, "    %steps = arith.constant {STEPS} : index").unwrap();
    // Multiplier and addend close to 1 and 0 keep the values finite.
    writeln!(s, "    %m = arith.constant dense<0.999999> : {v}").unwrap();
    writeln!(s, "    %a = arith.constant dense<0.000001> : {v}").unwrap();
    writeln!(s, "    scf.for %t = %lo to %hi step %c1 {{").unwrap();
    // The accumulators start from what `out` holds (plus 1, 2, ...), not
    // from constants: LLVM folds a chain whose start is a fixed point of
    // `x * m + a` (1.0 is, in f32), and each folded chain's FMAs still
    // counted in the FLOPs inflated the peak by chains / (chains - 1).
    writeln!(s, "      %seed = vector.load %out[%t, %c0] : memref<{threads}x{lanes}xf32>, {v}").unwrap();
    let inits: Vec<String> = (0..chains).map(|i| format!("%init{i}")).collect();
    for (i, name) in inits.iter().enumerate() {
        writeln!(s, "      %offset{i} = arith.constant dense<{}.0> : {v}", i + 1).unwrap();
        writeln!(s, "      {name} = arith.addf %seed, %offset{i} : {v}").unwrap();
    }
    let iter_args: Vec<String> = (0..chains).map(|i| format!("%x{i} = {}", inits[i])).collect();
    let types = vec![v.clone(); chains].join(", ");
    let results: Vec<String> = (0..chains).map(|i| format!("%r#{i}")).collect();
    writeln!(s, "      %r:{chains} = scf.for %i = %c0 to %steps step %c1 iter_args({}) -> ({types}) {{", iter_args.join(", ")).unwrap();
    for i in 0..chains {
        writeln!(s, "        %y{i} = vector.fma %x{i}, %m, %a : {v}").unwrap();
    }
    let ys: Vec<String> = (0..chains).map(|i| format!("%y{i}")).collect();
    writeln!(s, "        scf.yield {} : {types}", ys.join(", ")).unwrap();
    writeln!(s, "      }}").unwrap();
    let mut acc = results[0].clone();
    for (i, r) in results.iter().enumerate().skip(1) {
        writeln!(s, "      %s{i} = arith.addf {acc}, {r} : {v}").unwrap();
        acc = format!("%s{i}");
    }
    writeln!(s, "      vector.store {acc}, %out[%t, %c0] : memref<{threads}x{lanes}xf32>, {v}").unwrap();
    writeln!(s, "    }}").unwrap();
    writeln!(s, "    return").unwrap();
    writeln!(s, "  }}").unwrap();
    writeln!(s, "}}").unwrap();
    s
}

/// A measured peak: GFLOP/s over all threads, median of the runs.
#[derive(Clone, Debug)]
pub struct Peak {
    pub gflops: f64,
    pub lanes: u64,
    pub threads: usize,
}

/// Measures the f32 FMA peak of `target` (which must run here) with
/// `threads` threads: median of `runs` timed calls after one warm-up.
pub fn measure_fma_peak(target: &LlvmTarget, lanes: u64, threads: usize, runs: usize) -> Result<Peak, CompileError> {
    measure_fma_rate(target, lanes, PEAK_CHAINS, threads, runs)
}

/// The f32 FMA rate of [`measure_fma_peak`]'s kernel with `chains`
/// accumulators: below latency × units chains, the rate shows how many
/// FMAs the core really keeps in flight.
pub fn measure_fma_rate(target: &LlvmTarget, lanes: u64, chains: usize, threads: usize, runs: usize) -> Result<Peak, CompileError> {
    let t = threads.max(1) as u64;
    let out = BufferSpec { value: 0, shape: vec![t, lanes], elem: "f32".into() };
    let plan = HostPlan { params: vec![], buffers: vec![out.clone()], results: vec![out], views: vec![], weights: None };
    let abi = KernelAbi { symbol: "peak_k0".into(), params: vec![0], parallel_trip: t, grid: [1; 3], block: [1; 3], shared_bytes: 0, dynamic_shared_bytes: 0, stack_bytes: 0, prepack: false };
    let median_s = median_kernel_seconds(&peak_kernel_mlir(lanes, chains, t), target, abi, plan, &[], threads, runs)?;
    let flops = 2.0 * (STEPS * lanes * chains as u64 * t) as f64;
    Ok(Peak { gflops: flops / median_s / 1e9, lanes, threads })
}

/// The fewest accumulator chains whose FMA rate on one thread is within
/// 5% of `peak_gflops` (the [`PEAK_CHAINS`]-chain rate), up to
/// `PEAK_CHAINS`: latency × FMA units as the core really runs them, which
/// the target's `fma_latency_cycles` and the FMA intrinsic's `per_cycle`
/// should multiply to (`tilec::target::host` checks them with it).
pub fn measure_fma_chains(target: &LlvmTarget, lanes: u64, peak_gflops: f64, runs: usize) -> Result<usize, CompileError> {
    for chains in 1..PEAK_CHAINS {
        if measure_fma_rate(target, lanes, chains, 1, runs)?.gflops >= 0.95 * peak_gflops {
            return Ok(chains);
        }
    }
    Ok(PEAK_CHAINS)
}

/// The LLVM intrinsic and vector types of a dot-product instruction
/// (`vpdpbusd`, `vdpbf16ps`) of `x`: (name, accumulator type, operand
/// type); `None` for an instruction this kernel does not know.
fn dot_instruction(x: &tilec::target::Intrinsic) -> Option<(String, String, String)> {
    let (m, k) = (u64::from(x.m), u64::from(x.k));
    let bits = m * 32;
    if !matches!(bits, 128 | 256 | 512) || x.n != 1 {
        return None;
    }
    match (x.kind.as_str(), x.a.as_str(), x.b.as_str(), x.acc.as_str(), k) {
        ("dot", "u8" | "i8", "u8" | "i8", "i32", 4) => Some((format!("llvm.x86.avx512.vpdpbusd.{bits}"), format!("vector<{m}xi32>"), format!("vector<{}xi8>", m * k))),
        ("dot", "bf16", "bf16", "f32", 2) => Some((format!("llvm.x86.avx512bf16.dpbf16ps.{bits}"), format!("vector<{m}xf32>"), format!("vector<{}xbf16>", m * k))),
        _ => None,
    }
}

/// The MLIR of a dot-product instruction's peak kernel, as
/// [`peak_kernel_mlir`]'s: `chains` accumulators, each updated by one
/// instruction per step, from operands held in registers. `None` for an
/// intrinsic that is not a known dot product.
pub(crate) fn dot_peak_kernel_mlir(x: &tilec::target::Intrinsic, chains: usize, threads: u64) -> Option<String> {
    let (name, acc, src) = dot_instruction(x)?;
    let m = x.m;
    let elem = if x.acc == "i32" { "i32" } else { "f32" };
    let src_one = if elem == "i32" { "1" } else { "1.0" };
    let mut s = String::new();
    writeln!(s, "module {{").unwrap();
    writeln!(s, "  func.func @peak_k0(%out: memref<{threads}x{m}x{elem}>, %lo: index, %hi: index) {{").unwrap();
    writeln!(s, "    %c0 = arith.constant 0 : index").unwrap();
    writeln!(s, "    %c1 = arith.constant 1 : index").unwrap();
    writeln!(s, "    %steps = arith.constant {STEPS} : index").unwrap();
    writeln!(s, "    %src = arith.constant dense<{src_one}> : {src}").unwrap();
    writeln!(s, "    scf.for %t = %lo to %hi step %c1 {{").unwrap();
    // Starting from memory keeps LLVM from folding the chains.
    writeln!(s, "      %seed = vector.load %out[%t, %c0] : memref<{threads}x{m}x{elem}>, {acc}").unwrap();
    for i in 0..chains {
        writeln!(s, "      %offset{i} = arith.constant dense<{}> : {acc}", if elem == "i32" { (i + 1).to_string() } else { format!("{}.0", i + 1) }).unwrap();
        let add = if elem == "i32" { "arith.addi" } else { "arith.addf" };
        writeln!(s, "      %init{i} = {add} %seed, %offset{i} : {acc}").unwrap();
    }
    let iter_args: Vec<String> = (0..chains).map(|i| format!("%x{i} = %init{i}")).collect();
    let types = vec![acc.clone(); chains].join(", ");
    writeln!(s, "      %r:{chains} = scf.for %i = %c0 to %steps step %c1 iter_args({}) -> ({types}) {{", iter_args.join(", ")).unwrap();
    for i in 0..chains {
        writeln!(s, "        %y{i} = llvm.call_intrinsic \"{name}\"(%x{i}, %src, %src) : ({acc}, {src}, {src}) -> {acc}").unwrap();
    }
    let ys: Vec<String> = (0..chains).map(|i| format!("%y{i}")).collect();
    writeln!(s, "        scf.yield {} : {types}", ys.join(", ")).unwrap();
    writeln!(s, "      }}").unwrap();
    let add = if elem == "i32" { "arith.addi" } else { "arith.addf" };
    let mut sum = "%r#0".to_string();
    for i in 1..chains {
        writeln!(s, "      %s{i} = {add} {sum}, %r#{i} : {acc}").unwrap();
        sum = format!("%s{i}");
    }
    writeln!(s, "      vector.store {sum}, %out[%t, %c0] : memref<{threads}x{m}x{elem}>, {acc}").unwrap();
    writeln!(s, "    }}").unwrap();
    writeln!(s, "    return").unwrap();
    writeln!(s, "  }}").unwrap();
    writeln!(s, "}}").unwrap();
    Some(s)
}

/// Measures the peak of a dot-product intrinsic (`vpdpbusd`, `vdpbf16ps`)
/// that `target` runs, in GOP/s (a multiply and an add per product: `2 ·
/// m · k` ops per instruction), with `threads` threads: median of `runs`.
/// The target must have the instruction's CPU features.
pub fn measure_dot_peak(target: &LlvmTarget, x: &tilec::target::Intrinsic, threads: usize, runs: usize) -> Result<Peak, CompileError> {
    let chains = PEAK_CHAINS;
    let t = threads.max(1) as u64;
    let mlir = dot_peak_kernel_mlir(x, chains, t).ok_or_else(|| CompileError(format!("`{}` is not a dot product this peak kernel knows", x.name)))?;
    let lanes = u64::from(x.m);
    let out = BufferSpec { value: 0, shape: vec![t, lanes], elem: x.acc.clone() };
    let plan = HostPlan { params: vec![], buffers: vec![out.clone()], results: vec![out], views: vec![], weights: None };
    let abi = KernelAbi { symbol: "peak_k0".into(), params: vec![0], parallel_trip: t, grid: [1; 3], block: [1; 3], shared_bytes: 0, dynamic_shared_bytes: 0, stack_bytes: 0, prepack: false };
    let median_s = median_kernel_seconds(&mlir, target, abi, plan, &[], threads, runs)?;
    let ops = 2.0 * (STEPS * lanes * u64::from(x.k) * chains as u64 * t) as f64;
    Ok(Peak { gflops: ops / median_s / 1e9, lanes, threads })
}

/// A measured memory bandwidth: GB/s of the STREAM triad over all threads.
#[derive(Clone, Debug)]
pub struct Bandwidth {
    pub gbs: f64,
    pub threads: usize,
}

/// The MLIR of the triad kernel `a[i] = b[i] + 3 * c[i]` over `n` f32 in
/// 16-lane vectors, `parts` parallel iterations each doing `n / parts`.
fn triad_kernel_mlir(n: u64, parts: u64) -> String {
    let chunk = n / parts;
    let v = "vector<16xf32>";
    let m = format!("memref<{n}xf32>");
    format!(
        "module {{
  func.func @triad_k0(%a: {m}, %b: {m}, %c: {m}, %lo: index, %hi: index) {{
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %chunk = arith.constant {chunk} : index
    %s = arith.constant dense<3.0> : {v}
    scf.for %t = %lo to %hi step %c1 {{
      %start = arith.muli %t, %chunk : index
      %end = arith.addi %start, %chunk : index
      scf.for %i = %start to %end step %c16 {{
        %x = vector.load %b[%i] : {m}, {v}
        %y = vector.load %c[%i] : {m}, {v}
        %z = vector.fma %y, %s, %x : {v}
        vector.store %z, %a[%i] : {m}, {v}
      }}
    }}
    return
  }}
}}
"
    )
}

/// Measures the STREAM-triad bandwidth with `threads` threads over three
/// arrays of 32 MiB each (far larger than any cache): median of `runs`.
/// Counts 3 x 4 bytes per element (the write-allocate read is not counted,
/// as STREAM does not count it).
pub fn measure_bandwidth(target: &LlvmTarget, threads: usize, runs: usize) -> Result<Bandwidth, CompileError> {
    let n: u64 = 1 << 23;
    let parts = 64;
    let spec = |value| BufferSpec { value, shape: vec![n], elem: "f32".into() };
    let plan = HostPlan { params: vec![spec(1), spec(2)], buffers: vec![spec(0)], results: vec![spec(0)], views: vec![], weights: None };
    let abi =
        KernelAbi { symbol: "triad_k0".into(), params: vec![0, 1, 2], parallel_trip: parts, grid: [1; 3], block: [1; 3], shared_bytes: 0, dynamic_shared_bytes: 0, stack_bytes: 0, prepack: false };
    let input = tilec::interp::Tensor::random(&tilec::ir::TensorType::new(vec![n], tilec::ir::ElemType::F32), 1);
    let median_s = median_kernel_seconds(&triad_kernel_mlir(n, parts), target, abi, plan, &[input.clone(), input], threads, runs)?;
    Ok(Bandwidth { gbs: 12.0 * n as f64 / median_s / 1e9, threads })
}

/// Compiles a one-kernel MLIR module for `target`, links and loads it, runs
/// it once untimed, then returns the median kernel time of `runs` runs.
#[allow(clippy::too_many_arguments)]
fn median_kernel_seconds(mlir: &str, target: &LlvmTarget, abi: KernelAbi, plan: HostPlan, inputs: &[tilec::interp::Tensor], threads: usize, runs: usize) -> Result<f64, CompileError> {
    let artifacts = compile_cpu(mlir, target)?;
    let dir = tempfile::tempdir().map_err(|e| CompileError(format!("cannot make a temporary folder: {e}")))?;
    let name = abi.symbol.trim_end_matches("_k0").to_string();
    let so = link_shared(&artifacts.object, dir.path(), &name)?;
    let program = CpuProgram::load(&so, vec![abi], plan).map_err(CompileError)?;
    program.run(inputs, threads).map_err(CompileError)?;
    let mut times: Vec<f64> = (0..runs.max(1)).map(|_| program.run_timed(inputs, threads).map(|r| r.kernel_seconds)).collect::<Result<_, _>>().map_err(CompileError)?;
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}
