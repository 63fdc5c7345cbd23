//! Test support: small target descriptions and an interpreter-based
//! equivalence check for schedules and pass pipelines.

use std::sync::Arc;
use tilec::interp::{Tensor, run_function};
use tilec::ir::*;
use tilec::pass::{PassContext, Pass};
use tilec::target::Target;

/// A GPU-like target (the shape of sm90's description, small numbers).
pub const GPU: &str = r#"
name = "test-gpu"
kind = "cuda"
description = "test GPU"
sources = ["tests"]
loop_order = ["S.block", "S.thread", "R.block", "R.thread", "R.point", "V", "S.point"]
[isa]
triple = "nvptx64-nvidia-cuda"
cpu = "sm_90"
features = "+ptx80"
[compute]
units = 4
clock_ghz = 1.0
warp_size = 32
max_threads_per_block = 1024
max_threads_per_unit = 2048
max_blocks_per_unit = 32
registers_per_unit = 65536
max_registers_per_thread = 255
min_warps_per_block = 4
max_static_shared_bytes = 49152
[peak_gflops]
f32 = 1000.0
[[memory]]
name = "global"
capacity_bytes = 1073741824
per = "device"
bandwidth_gbs = 1000.0
latency_ns = 500.0
line_bytes = 32
managed = false
[[memory]]
name = "shared"
capacity_bytes = 49152
per = "block"
bandwidth_gbs = 10000.0
latency_ns = 20.0
line_bytes = 128
banks = 32
bank_width_bytes = 4
managed = true
scope = "shared"
[[memory]]
name = "registers"
capacity_bytes = 1020
per = "thread"
bandwidth_gbs = 100000.0
latency_ns = 1.0
line_bytes = 4
managed = true
scope = "local"
[[tile_levels]]
name = "block"
memory = "shared"
binding = "grid"
[[tile_levels]]
name = "thread"
memory = "registers"
binding = "threads"
"#;

/// A CPU-like target.
pub const CPU: &str = r#"
name = "test-cpu"
kind = "cpu"
description = "test CPU"
sources = ["tests"]
loop_order = ["S.core", "S.l2", "R.l2", "S.l1", "R.l1", "R.point", "V", "S.point"]
[isa]
triple = "x86_64-unknown-linux-gnu"
cpu = "x86-64-v3"
features = "+avx2,+fma"
vector_bits = 256
vector_registers = 16
[compute]
units = 2
clock_ghz = 3.0
fma_latency_cycles = 4
misses_in_flight = 10
[model]
guarded_load_cost = 4.0
gather_load_cost = 2.0
scatter_lane_cost = 4.0
[peak_gflops]
f32 = 192.0
[[memory]]
name = "dram"
capacity_bytes = 17179869184
per = "device"
bandwidth_gbs = 30.0
latency_ns = 90.0
line_bytes = 64
managed = false
[[memory]]
name = "l2"
capacity_bytes = 524288
per = "unit"
bandwidth_gbs = 200.0
latency_ns = 4.0
line_bytes = 64
managed = false
scope = "local"
[[memory]]
name = "l1"
capacity_bytes = 32768
per = "unit"
bandwidth_gbs = 400.0
latency_ns = 1.3
line_bytes = 64
managed = false
scope = "local"
[[tile_levels]]
name = "core"
memory = "l2"
binding = "parallel"
[[tile_levels]]
name = "l2"
memory = "l2"
binding = "serial"
[[tile_levels]]
name = "l1"
memory = "l1"
binding = "serial"
"#;

/// Parses and validates a test target description (through the loader,
/// which also parses its loop order).
pub fn target(text: &str) -> Arc<Target> {
    let mut sources = tilec::diag::SourceMap::new();
    Arc::new(tilec::target::parse_target(&mut sources, "test-target.toml", text).unwrap_or_else(|d| panic!("test target does not parse:\n{}", sources.render(&d.0))))
}

pub fn parse(src: &str) -> Module {
    let (m, sm) = tilec::syntax::parse_str("test.tile", src).unwrap_or_else(|(d, sm)| panic!("{}", sm.render(&d.0)));
    let d = tilec::verify::verify_module(&m);
    assert!(!d.has_errors(), "{}", sm.render(&d.0));
    m
}

/// Sets the schedule of the first compute op with `label` (or the first).
pub fn set_schedule(m: &mut Module, s: Schedule) {
    let f = &mut m.funcs[0];
    let op = f.walk().into_iter().find(|&o| f.ops[o].kind.as_compute().is_some()).expect("a compute op");
    f.ops[op].kind.as_compute_mut().expect("compute").schedule = Some(s);
}

pub fn schedule(target: &str, tiles: &[(&str, &[u64])]) -> Schedule {
    let mut s = Schedule::new(target);
    s.tiles = tiles.iter().map(|(a, t)| (a.to_string(), t.to_vec())).collect();
    s
}

/// Seeded inputs for every parameter of the first function.
pub fn inputs(m: &Module, seed: u64) -> Vec<Tensor> {
    let f = hoisted(m);
    f.params.iter().enumerate().map(|(i, &p)| Tensor::random(f.value_type(p).as_tensor().expect("tensor param"), Tensor::input_seed(seed, i))).collect()
}

/// `m`'s function with its weights as trailing parameters, as tools run
/// it (`inputs` makes values for them too).
pub fn hoisted(m: &Module) -> Function {
    let mut f = m.funcs[0].clone();
    tilec::ir::weights::hoist_weights(&mut f);
    f
}

/// Runs `passes` on a copy of `m` for `target` and checks that the
/// interpreter gives the same results before and after (within the element
/// type's tolerance; loop nests may reorder nothing, so this is usually
/// exact). Returns the transformed module.
pub fn check_equivalent(m: &Module, target: &Arc<Target>, passes: &mut [&mut (dyn Pass + 'static)], seed: u64) -> Module {
    let ins = inputs(m, seed);
    let before = run_function(&hoisted(m), &ins).expect("reference run");
    let mut after_m = m.clone();
    let mut cx = PassContext::with_target(Some(target.clone()));
    for p in passes.iter_mut() {
        p.run(&mut after_m, &mut cx).unwrap_or_else(|d| panic!("pass failed: {d:?}"));
        let v = tilec::verify::verify_module_with(&after_m, Some(target));
        assert!(!v.has_errors(), "pass output does not verify: {v:?}\n{}", tilec::syntax::print_module(&after_m));
    }
    // What the passes make prints, parses back and prints the same.
    let printed = tilec::syntax::print_module(&after_m);
    let (reparsed, sm) = tilec::syntax::parse_str("printed.tile", &printed).unwrap_or_else(|(d, sm)| panic!("printed pass output does not parse:\n{}\n{printed}", sm.render(&d.0)));
    let v = tilec::verify::verify_module_with(&reparsed, Some(target));
    assert!(!v.has_errors(), "printed pass output does not verify:\n{}\n{printed}", sm.render(&v.0));
    assert_eq!(tilec::syntax::print_module(&reparsed), printed, "print → parse → print of pass output is not stable");
    let after = run_function(&hoisted(&after_m), &ins).unwrap_or_else(|e| panic!("transformed program fails: {e}"));
    for (a, b) in after.iter().zip(&before) {
        let c = tilec::interp::compare::compare(a, b);
        assert!(c.passed, "results differ: {c:?}");
    }
    after_m
}
