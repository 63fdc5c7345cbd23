use super::*;
use crate::diag::SourceMap;
use crate::ir::{CacheDirective, EntityRef, Module};
use crate::ir::affine::AffineExpr;
use crate::target::TargetSet;
use crate::target::resources::distinct_values;
use std::sync::Arc;

const GEMM: &str = "
func @gemm(%A: tensor<1024x1024xf32>, %B: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %C = compute \"gemm\" (i: 1024, j: 1024) reduce sum (k: 1024)
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<1024x1024xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}
";

const GEMM_I8_BIAS: &str = "
func @g(%A: tensor<256x256xi8>, %B: tensor<256x256xi8>, %bias: tensor<256xf32>) -> tensor<256x256xf32> {
  %C = compute \"g\" (i: 256, j: 256) reduce sum (k: 256)
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<256x256xf32>[i, j] {
    %a32 = cast %a : i8 -> i32
    %b32 = cast %b : i8 -> i32
    %0 = mul %a32, %b32 : i32
    yield %0 : i32
  } epilogue(%acc) reads(%bv = %bias[j]) {
    %f = cast %acc : i32 -> f32
    %1 = add %f, %bv : f32
    yield %1 : f32
  }
  return %C
}
";

const CONV: &str = "
func @conv2d(%x: tensor<1x3x32x32xf32>, %k: tensor<8x3x7x7xf32>) -> tensor<1x8x16x16xf32> {
  %y = compute \"conv2d\" (n: 1, f: 8, h: 16, w: 16) reduce sum (c: 3, r: 7, s: 7)
      reads(%xv = %x[n, c, h * 2 + r - 3, w * 2 + s - 3] pad(0.0), %kv = %k[f, c, r, s]) -> tensor<1x8x16x16xf32>[n, f, h, w] {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}
";

struct Case {
    module: Module,
    sources: SourceMap,
}

impl Case {
    fn new(src: &str) -> Case {
        let (module, sources) = crate::syntax::parse_str("test.tile", src).unwrap_or_else(|(d, sm)| panic!("{}", sm.render(&d.0)));
        Case { module, sources }
    }

    fn op(&self) -> (&Function, Op) {
        let f = &self.module.funcs[0];
        let op = f.region(f.body).ops.iter().copied().find(|&o| matches!(f.op(o).kind, OpKind::Compute(_))).unwrap();
        (f, op)
    }

    fn compute(&self) -> &Compute {
        let (f, op) = self.op();
        f.op(op).kind.as_compute().unwrap()
    }

    fn info(&self) -> ComputeInfo {
        let (f, op) = self.op();
        ComputeInfo::of(f, op).unwrap()
    }

    /// The diagnostics of checking `s` against `target`, rendered.
    fn check(&self, s: &Schedule, target: &str) -> (Diagnostics, String) {
        let t = target_named(target);
        let (f, op) = self.op();
        let d = check_schedule(self.compute(), &self.info(), s, &t, f.op_spans[op]);
        let text = self.sources.render(&d.0);
        (d, text)
    }

    fn ok(&self, s: &Schedule, target: &str) {
        let (d, text) = self.check(s, target);
        assert!(d.is_empty(), "expected no diagnostics on {target}, got:\n{text}");
    }

    /// Exactly one error, containing every `want`.
    fn one_error(&self, s: &Schedule, target: &str, want: &[&str]) -> String {
        let (d, text) = self.check(s, target);
        assert_eq!(d.len(), 1, "expected one error on {target}, got:\n{text}");
        assert!(d.has_errors());
        for w in want {
            assert!(text.contains(w), "wanted `{w}` in:\n{text}");
        }
        text
    }
}

fn target_named(name: &str) -> Arc<Target> {
    TargetSet::new().lookup(&mut SourceMap::new(), name).unwrap()
}

fn sched(target: &str, tiles: &[(&str, &[u64])]) -> Schedule {
    let mut s = Schedule::new(target);
    s.tiles = tiles.iter().map(|(a, t)| (a.to_string(), t.to_vec())).collect();
    s
}

fn cache(mut s: Schedule, c: &Case, read: &str, level: &str) -> Schedule {
    let pos = c.info().reads.iter().position(|r| r.name == format!("%{read}")).unwrap();
    s.cache.push(CacheDirective { read: pos, read_name: read.into(), level: level.into() });
    s
}

/// A GPU GEMM schedule: 128x128 block tiles, 8x8 per thread (256 threads),
/// k in chunks of 32 staged in shared memory.
fn gpu_gemm(c: &Case, target: &str) -> Schedule {
    let s = sched(target, &[("i", &[128, 8]), ("j", &[128, 8]), ("k", &[32, 8])]);
    cache(cache(s, c, "a", "shared"), c, "b", "shared")
}

/// A CPU GEMM schedule with 8-lane (AVX2) or 16-lane (AVX-512) vectors.
fn cpu_gemm(target: &str, lanes: u64) -> Schedule {
    let mut s = sched(target, &[("i", &[64, 32, 8]), ("j", &[256, 64, 2 * lanes]), ("k", &[1024, 128, 32])]);
    s.vector = Some(("j".into(), lanes));
    s
}

#[test]
fn valid_schedules_on_every_target() {
    let c = Case::new(GEMM);
    c.ok(&gpu_gemm(&c, "sm80"), "sm80");
    c.ok(&gpu_gemm(&c, "sm90"), "sm90");
    c.ok(&cpu_gemm("x86-avx2", 8), "x86-avx2");
    c.ok(&cpu_gemm("x86-avx512", 16), "x86-avx512");
    let mut s = gpu_gemm(&c, "sm80");
    s.vthreads = vec![("i".into(), 2), ("j".into(), 2)];
    s.vector = Some(("j".into(), 4));
    c.ok(&s, "sm80");
    // Untiled axes range over their extent.
    let conv = Case::new(CONV);
    let s = sched("x86-avx2", &[("f", &[8, 8, 8]), ("h", &[16, 8, 4]), ("w", &[16, 8, 8])]);
    conv.ok(&s, "x86-avx2");
}

#[test]
fn footprints_follow_the_definition() {
    let c = Case::new(GEMM);
    let t = target_named("x86-avx2");
    let s = cpu_gemm("x86-avx2", 8);
    let info = c.info();
    let plan = SchedulePlan::new(c.compute(), &s, &t);
    let k = Checker::new(c.compute(), &info, &plan, &t, Span::DUMMY);
    // core: no R.core loop, so k spans its extent.
    assert_eq!(k.read_footprint(0, 0), 64 * 1024 * 4);
    assert_eq!(k.read_footprint(1, 0), 1024 * 256 * 4);
    assert_eq!(k.res.output_bytes(&|a| k.range_of(a, 0)), 64 * 256 * 4);
    // l2 and l1 use the k tiles.
    assert_eq!(k.read_footprint(0, 1), 32 * 128 * 4);
    assert_eq!(k.read_footprint(1, 2), 32 * 16 * 4);
    assert_eq!(k.res.accumulator_bytes(&|a| k.range_of(a, 2)), 8 * 16 * 4);
    // The share of L3 a core's tile gets.
    assert_eq!(k.res.capacity(0, t.memory_level("l3").unwrap()).bytes, 256 << 20 >> 6);

    // Strided, padded convolution input: 2h + r - 3 over h < 8, r < 7 takes
    // 21 values (of the 32 rows), w likewise with s.
    let conv = Case::new(CONV);
    let s = sched("x86-avx2", &[("h", &[8, 8, 8]), ("w", &[4, 4, 4])]);
    let info = conv.info();
    let plan = SchedulePlan::new(conv.compute(), &s, &t);
    let k = Checker::new(conv.compute(), &info, &plan, &t, Span::DUMMY);
    // n: 1, c: 3 (untiled), rows 21, cols 2*3 + 6 + 1 = 13.
    assert_eq!(k.read_footprint(0, 2), 3 * 21 * 13 * 4);
    // Clamped to the dimension: h over all 16 rows reaches 2*15 + 6 + 1 = 37 > 32 values.
    let s = sched("x86-avx2", &[("h", &[16, 16, 16]), ("w", &[16, 16, 16])]);
    let info = conv.info();
    let plan = SchedulePlan::new(conv.compute(), &s, &t);
    let k = Checker::new(conv.compute(), &info, &plan, &t, Span::DUMMY);
    assert_eq!(k.read_footprint(0, 2), 3 * 32 * 32 * 4);
}

#[test]
fn distinct_values_of_an_index() {
    let h = AxisId::new(0);
    let r = AxisId::new(1);
    let t = |a: AxisId| if a == h { 8 } else { 4 };
    // (h - r + 1) div 2: numerators -2..=8, 11 values, 6 multiples of 2 at most.
    let e = AffineExpr::from_parts([(h, 1), (r, -1)], 1, 1).unwrap().with_divisor(2);
    assert_eq!(distinct_values(&e, &t, 100), 6);
    // 4h: 8 values though the range spans 29.
    let e = AffineExpr::from_parts([(h, 4)], 0, 1).unwrap();
    assert_eq!(distinct_values(&e, &t, 100), 8);
    // h + r: 11 values, or the dimension's 5.
    let e = AffineExpr::from_parts([(h, 1), (r, 1)], 0, 1).unwrap();
    assert_eq!(distinct_values(&e, &t, 100), 11);
    assert_eq!(distinct_values(&e, &t, 5), 5);
    assert_eq!(distinct_values(&AffineExpr::constant(3), &t, 100), 1);
}

#[test]
fn wrong_number_of_tile_sizes() {
    let c = Case::new(GEMM);
    let s = sched("sm80", &[("i", &[128]), ("j", &[128, 8]), ("k", &[32, 8])]);
    let text = c.one_error(&s, "sm80", &["axis `i` has 1 tile size but target `sm80` has 2 tile levels (`block`, `thread`)", "test.tile:3:"]);
    assert!(text.contains("axis declared here"), "{text}");
    let s = sched("x86-avx2", &[("i", &[64, 8])]);
    c.one_error(&s, "x86-avx2", &["axis `i` has 2 tile sizes but target `x86-avx2` has 3 tile levels (`core`, `l2`, `l1`)"]);
}

#[test]
fn cache_directives_name_stageable_levels() {
    let c = Case::new(GEMM);
    let s = cache(sched("sm80", &[("i", &[128, 8]), ("j", &[128, 8]), ("k", &[32, 8])]), &c, "a", "shard");
    c.one_error(&s, "sm80", &["`shard` is not a memory level of target `sm80` (cache directive of %a)", "did you mean `shared`?", "reads can be staged into `shared`, `local` on `sm80`"]);
    let s = cache(sched("sm80", &[("i", &[128, 8]), ("j", &[128, 8]), ("k", &[32, 8])]), &c, "b", "global");
    let text = c.one_error(&s, "sm80", &["%b cannot be staged into `global`: target `sm80` has no buffers there"]);
    assert!(text.contains("read defined here"), "{text}");
    let s = cache(cpu_gemm("x86-avx2", 8), &c, "a", "dram");
    c.one_error(&s, "x86-avx2", &["%a cannot be staged into `dram`", "`l3`, `l2`, `l1`, `registers`"]);
}

#[test]
fn shared_memory_over_capacity() {
    let c = Case::new(GEMM);
    let s = sched("sm80", &[("i", &[256, 8]), ("j", &[256, 8]), ("k", &[128, 8])]);
    let s = cache(cache(s, &c, "a", "shared"), &c, "b", "shared");
    // 256x128 + 128x256 floats = 262144 bytes; 166912 available.
    let text = c.one_error(
        &s,
        "sm80",
        &["shared-memory footprint of tile level `block` is 262144 bytes (%a: 131072, %b: 131072), 95232 bytes over the 166912 bytes of `shared`", "%a: 131072 bytes at tile level `block`"],
    );
    assert!(text.contains("use smaller `block` tiles or stage fewer reads in `shared`"), "{text}");
    // Uncached reads take no shared memory.
    let s = sched("sm80", &[("i", &[256, 8]), ("j", &[256, 8]), ("k", &[128, 8])]);
    c.ok(&s, "sm80");
    // H100 has 227 KB per block: still too little for 256 KB.
    let s = cache(cache(sched("sm90", &[("i", &[256, 8]), ("j", &[256, 8]), ("k", &[128, 8])]), &c, "a", "shared"), &c, "b", "shared");
    c.one_error(&s, "sm90", &["29696 bytes over the 232448 bytes of `shared`"]);
}

#[test]
fn registers_over_capacity_and_the_register_estimate() {
    let c = Case::new(GEMM);
    // (thread tiles of i and j, read staged in registers, the error).
    let cases: [(u64, u64, Option<&str>, &str); 3] = [
        // 16x16 accumulators of 4 bytes: 1024 bytes of registers, 1020 allowed.
        (16, 16, None, "`local` footprint of tile level `thread` is 1024 bytes (accumulator: 1024), 4 bytes over the 1020 bytes of `local`"),
        // Staging %a's 16x8 thread tile in registers adds 512 bytes.
        (16, 8, Some("a"), "`local` footprint of tile level `thread` is 1024 bytes (%a: 512, accumulator: 512)"),
        // 15x16 accumulators fit the 1020 bytes, but with two reads and
        // indexing the estimate is 240 + 2 + 16 = 258 registers.
        (15, 16, None, "a `thread` tile needs about 258 registers per thread (accumulator: 240, other reads: 2, indexing (assumed): 16), 3 over the 255 registers per thread of `sm80`"),
    ];
    for (ti, tj, staged, error) in cases {
        let mut s = sched("sm80", &[("i", &[8 * ti, ti]), ("j", &[128, tj]), ("k", &[32, 8])]);
        if let Some(read) = staged {
            s = cache(s, &c, read, "local");
        }
        c.one_error(&s, "sm80", &[error]);
    }
}

#[test]
fn threads_per_block() {
    let c = Case::new(GEMM);
    let s = sched("sm90", &[("i", &[256, 2]), ("j", &[256, 4]), ("k", &[8, 8])]);
    c.one_error(&s, "sm90", &["a `block` tile has 8192 threads (i: 256 / 2, j: 256 / 4: `block` sizes over `thread` sizes), 7168 over the 1024 threads per block of `sm90`"]);
}

#[test]
fn vthreads_on_spatial_axes_only() {
    let c = Case::new(GEMM);
    let mut s = gpu_gemm(&c, "sm80");
    s.vthreads = vec![("k".into(), 2)];
    let text = c.one_error(&s, "sm80", &["virtual threads split spatial axes only; `k` is a reduction axis"]);
    assert!(text.contains("declared as a reduction axis here"), "{text}");
    // A target without a `V` loop has no virtual threads.
    let mut t = (*target_named("sm80")).clone();
    t.loop_order.retain(|e| e != "V");
    t.order.retain(|e| *e != crate::target::OrderEntry::VThread);
    let mut s = gpu_gemm(&c, "sm80");
    s.vthreads = vec![("i".into(), 2)];
    let (f, op) = c.op();
    let d = check_schedule(c.compute(), &c.info(), &s, &t, f.op_spans[op]);
    assert_eq!(d.len(), 1);
    assert!(d.0[0].message.contains("has no virtual-thread loop (`V` in its loop order), so `i` cannot have 2 virtual threads"), "{:?}", d);
}

#[test]
fn unknown_axes_are_left_to_the_structural_check() {
    let c = Case::new(GEMM);
    let mut s = gpu_gemm(&c, "sm80");
    s.tiles.push(("q".into(), vec![1, 2, 3]));
    c.ok(&s, "sm80");
}

#[test]
fn checking_an_op_with_its_schedule() {
    let mut c = Case::new(GEMM);
    let s = sched("sm80", &[("i", &[256, 8]), ("j", &[256, 8]), ("k", &[128, 8])]);
    let s = cache(cache(s, &c, "a", "shared"), &c, "b", "shared");
    let (_, op) = c.op();
    let t = target_named("sm80");
    assert!(check_op_schedule(&c.module.funcs[0], op, &t).is_empty(), "no schedule yet");
    c.module.funcs[0].ops[op].kind.as_compute_mut().unwrap().schedule = Some(s);
    let d = check_op_schedule(&c.module.funcs[0], op, &t);
    assert_eq!(d.len(), 1);
    let text = c.sources.render(&d.0);
    assert!(text.contains("test.tile:3:3"), "the op's span stands in for the schedule's:\n{text}");
}

#[test]
fn vector_width() {
    let c = Case::new(GEMM);
    let s = cpu_gemm("x86-avx2", 16);
    c.one_error(&s, "x86-avx2", &["vector width 16 of axis `j` takes 512 bits of f32 (the accumulator), 256 bits over the 256-bit vectors of `x86-avx2`", "use at most 8 lanes of f32"]);
    c.ok(&cpu_gemm("x86-avx512", 16), "x86-avx512");
    // GPUs: 128-bit loads and stores.
    let mut s = gpu_gemm(&c, "sm80");
    s.vector = Some(("j".into(), 8));
    c.one_error(&s, "sm80", &["vector width 8 of axis `j` takes 256 bits of f32"]);
    // The lanes carry the widest element: i32 accumulators of an i8 GEMM.
    let g = Case::new(GEMM_I8_BIAS);
    let mut s = sched("x86-avx512", &[("i", &[64, 32, 4]), ("j", &[256, 64, 32]), ("k", &[256, 64, 16])]);
    s.vector = Some(("j".into(), 32));
    g.one_error(&s, "x86-avx512", &["vector width 32 of axis `j` takes 1024 bits of i32 (the accumulator)"]);
    // Vectorising k carries the i8 reads only.
    s.vector = Some(("k".into(), 16));
    g.ok(&s, "x86-avx512");
}

#[test]
fn cpu_caches_over_capacity() {
    let c = Case::new(GEMM);
    // l1: 64x64 of a, b and the output = 49152 bytes, 32 KiB available.
    let s = sched("x86-avx2", &[("i", &[64, 64, 64]), ("j", &[256, 64, 64]), ("k", &[1024, 64, 64])]);
    c.one_error(&s, "x86-avx2", &["`l1` footprint of tile level `l1` is 49152 bytes (%a: 16384, %b: 16384, output: 16384), 16384 bytes over the 32768 bytes of `l1`", "every read and the output tile"]);
    // core: the whole k extent; 256x1024 + 1024x1024 + 256x1024 floats
    // against a core's share of L3.
    let s = sched("x86-avx2", &[("i", &[256, 32, 8]), ("j", &[1024, 64, 16]), ("k", &[1024, 128, 32])]);
    c.one_error(&s, "x86-avx2", &["`l3` footprint of tile level `core` is 6291456 bytes (%a: 1048576, %b: 4194304, output: 1048576), 2097152 bytes over the 4194304 bytes of `l3` per tile (268435456 bytes / 64 cores)"]);
    // Reads staged in registers count against the register file.
    let s = cache(cpu_gemm("x86-avx2", 8), &c, "b", "registers");
    let text = c.one_error(&s, "x86-avx2", &["`registers` footprint of tile level `l1` is 2048 bytes (%b: 2048), 1536 bytes over the 512 bytes of `registers`", "the footprint counts the reads staged in `registers`:"]);
    assert!(!text.contains("accumulators"), "accumulators are not counted against `registers`:\n{text}");
}

/// A GEMM at M = 1 (a GEMV written as a GEMM) with a residual add.
const GEMM_M1: &str = "
func @g(%A: tensor<1x4096xf32>, %B: tensor<4096x4096xf32>, %R: tensor<1x4096xf32>) -> tensor<1x4096xf32> {
  %C = compute (i: 1, j: 4096) reduce sum (k: 4096) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<1x4096xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  } epilogue(%acc) reads(%r = %R[i, j]) {
    %1 = add %acc, %r : f32
    yield %1 : f32
  }
  return %C
}
";

#[test]
fn streamed_reads_are_not_held_to_a_cache() {
    // B and the residual are each read once; A is read for every j; a
    // full GEMM's operands and a bias are reused.
    let m1 = Case::new(GEMM_M1);
    let t = target_named("x86-avx2");
    let (info, c) = (m1.info(), m1.compute());
    let res = OpResources::new(c, &info, &t);
    assert_eq!((0..3).map(|r| res.streamed(r)).collect::<Vec<_>>(), [false, true, true]);
    let g = Case::new(GEMM_I8_BIAS);
    let (gi, gc) = (g.info(), g.compute());
    let res = OpResources::new(gc, &gi, &t);
    assert_eq!((0..3).map(|r| res.streamed(r)).collect::<Vec<_>>(), [false, false, false]);
    // Whole rows of B in a core's tile: 64 MiB of B would be over a
    // core's 4 MiB of L3, but it streams; A's 16 KiB and the output's fit.
    let rows = sched("x86-avx2", &[("i", &[1, 1, 1]), ("j", &[4096, 4096, 64]), ("k", &[4096, 4, 4])]);
    m1.ok(&rows, "x86-avx2");
    // A's whole row and a 4096-wide output at l1 are the 32 KiB of L1
    // exactly.
    let wide = sched("x86-avx2", &[("i", &[1, 1, 1]), ("j", &[4096, 4096, 4096]), ("k", &[4096, 4096, 4096])]);
    m1.ok(&wide, "x86-avx2");
    // At M = 2 each element of B is read twice: it counts again.
    let two_rows = Case::new(&GEMM_M1.replace("(i: 1,", "(i: 2,").replace("1x4096xf32", "2x4096xf32"));
    let (d, text) = two_rows.check(&sched("x86-avx2", &[("i", &[2, 2, 2]), ("j", &[4096, 4096, 64]), ("k", &[4096, 4, 4])]), "x86-avx2");
    assert!(d.has_errors() && text.contains("`l3` footprint of tile level `core` is 67174400 bytes (%a: 32768, %b: 67108864, output: 32768)"), "{text}");
}

#[test]
fn epilogue_reads_and_accumulator_types() {
    let g = Case::new(GEMM_I8_BIAS);
    let info = g.info();
    assert_eq!(info.reads.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["%a", "%b", "%bv"]);
    assert_eq!(info.acc, ElemType::I32);
    assert_eq!(info.output.elem, ElemType::F32);
    // l1: a 4x16 i8, b 16x32 i8, bias 32 f32, output 4x32 f32.
    let s = sched("x86-avx512", &[("i", &[64, 32, 4]), ("j", &[256, 64, 32]), ("k", &[256, 64, 16])]);
    let t = target_named("x86-avx512");
    let plan = SchedulePlan::new(g.compute(), &s, &t);
    let k = Checker::new(g.compute(), &info, &plan, &t, Span::DUMMY);
    assert_eq!((k.read_footprint(0, 2), k.read_footprint(1, 2), k.read_footprint(2, 2), k.res.output_bytes(&|a| k.range_of(a, 2))), (64, 512, 128, 512));
    assert_eq!(k.res.accumulator_bytes(&|a| k.range_of(a, 2)), 4 * 32 * 4);
}

#[test]
fn several_errors_at_once() {
    let c = Case::new(GEMM);
    let mut s = cache(sched("sm80", &[("i", &[256, 2]), ("j", &[256, 2]), ("k", &[64, 8])]), &c, "a", "l2");
    s.vthreads = vec![("k".into(), 2)];
    let (d, text) = c.check(&s, "sm80");
    assert_eq!(d.len(), 3, "{text}");
    assert!(text.contains("cannot be staged into `l2`") && text.contains("vthread") && text.contains("threads per block"), "{text}");
}

#[test]
fn a_compute_op_reading_a_loop_nests_buffer_is_checked_like_one_reading_a_tensor() {
    // ir-spec/examples/gemm_cpu_loops.tile: a compute op reads the global
    // buffer a kernel wrote. Its reads have the buffer's shape and type; it
    // was once "not a well-formed compute op" to the search.
    let c = Case::new(
        "
func @f(%A: tensor<64x48xf32>, %bias: tensor<48xf32>) -> tensor<64x48xf32> {
  %C = alloc : buffer<64x48xf32, global>
  copy %A[0, 0] -> %C[0, 0] box [64, 48]
  %D = compute \"bias_relu\" (i: 64, j: 48)
      reads(%c = %C[i, j], %bv = %bias[j]) -> tensor<64x48xf32>[i, j] {
    %0 = add %c, %bv : f32
    %1 = relu %0 : f32
    yield %1 : f32
  }
  return %D
}
",
    );
    let info = c.info();
    assert_eq!(info.reads[0].name, "%c");
    assert_eq!(info.reads[0].tensor, TensorType::new(vec![64, 48], ElemType::F32));
    c.ok(&sched("x86-avx2", &[("i", &[16, 4, 1]), ("j", &[48, 8, 8])]), "x86-avx2");
}

const GEMM_U8: &str = "
func @q(%A: tensor<64x128xu8>, %B: tensor<128x64xi8>) -> tensor<64x64xi32> {
  %C = compute (i: 64, j: 64) reduce sum (k: 128) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<64x64xi32>[i, j] {
    %0 = cast %a : u8 -> i32
    %1 = cast %b : i8 -> i32
    %2 = mul %0, %1 : i32
    yield %2 : i32
  }
  return %C
}
";

fn knob(name: &str, a: (usize, &str), m: &[&str], n: &[&str], k: &[&str]) -> crate::ir::IntrinsicChoice {
    let names = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
    crate::ir::IntrinsicChoice { name: name.into(), a: a.0, a_name: a.1.into(), m: names(m), n: names(n), k: names(k) }
}

impl Case {
    /// The errors of [`check_op_schedule`] with schedule `s` on `t`,
    /// rendered.
    fn check_op(&self, s: &Schedule, t: &Target) -> (Diagnostics, String) {
        let mut module = self.module.clone();
        let f = &mut module.funcs[0];
        let op = f.region(f.body).ops.iter().copied().find(|&o| matches!(f.op(o).kind, OpKind::Compute(_))).unwrap();
        f.ops[op].kind.as_compute_mut().unwrap().schedule = Some(s.clone());
        let d = check_op_schedule(f, op, t);
        let text = self.sources.render(&d.0);
        (d, text)
    }
}

#[test]
fn intrinsic_choices_that_are_candidates_and_fit_verify() {
    let c = Case::new(GEMM_U8);
    let t = target_named("x86-avx512");
    let mut s = sched("x86-avx512", &[("i", &[64, 16, 4]), ("j", &[64, 32, 16]), ("k", &[128, 64, 4])]);
    s.intrinsic = Some(knob("vpdpbusd.zmm", (1, "b"), &["j"], &[], &["k"]));
    let (d, text) = c.check_op(&s, &t);
    assert!(d.is_empty(), "{text}");
    // The other candidate: the u8 read in the lanes.
    s.tiles[0].1 = vec![64, 32, 16];
    s.tiles[1].1 = vec![64, 16, 4];
    s.intrinsic = Some(knob("vpdpbusd.zmm", (0, "a"), &["i"], &[], &["k"]));
    let (d, text) = c.check_op(&s, &t);
    assert!(d.is_empty(), "{text}");
    // Without the knob nothing is checked about intrinsics.
    s.intrinsic = None;
    assert!(c.check_op(&s, &target_named("x86-avx2")).0.is_empty());
}

#[test]
fn intrinsic_rules_no_builtin_target_breaks() {
    let c = Case::new(GEMM_U8);
    let s = |x: crate::ir::IntrinsicChoice| {
        let mut s = sched("custom", &[("i", &[64, 16]), ("j", &[64, 8]), ("k", &[128, 32])]);
        s.intrinsic = Some(x);
        s
    };
    let base = target_named("sm80");
    let mut t = (*base).clone();
    t.name = "custom".into();
    // A warp intrinsic with u8 as `a` and i8 as `b`: not interchangeable.
    let mut mma = t.intrinsics.iter().find(|x| x.name == "mma.sync.m16n8k32.s32.s8.s8.s32").unwrap().clone();
    mma.name = "mma.u8".into();
    mma.a = "u8".into();
    t.intrinsics = vec![mma.clone()];
    let (d, text) = c.check_op(&s(knob("mma.u8", (1, "b"), &["j"], &["i"], &["k"])), &t);
    assert_eq!(d.len(), 1, "{text}");
    assert!(text.contains("%b cannot play `a` of `mma.u8`: it multiplies u8 (`a`) by i8 (`b`), and %b is i8"), "{text}");
    assert!(text.contains("the mapping candidates onto `mma.u8` are: a=%a b=%b m=[i] n=[j] k=[k]"), "{text}");
    // An intrinsic axis of size 1 takes no op axis.
    let mut narrow = mma.clone();
    narrow.name = "mma.n1".into();
    narrow.n = 1;
    t.intrinsics = vec![narrow];
    let (_, text) = c.check_op(&s(knob("mma.n1", (0, "a"), &["i"], &["j"], &["k"])), &t);
    assert!(text.contains("`mma.n1` has `n` = 1: its `n` takes no axis"), "{text}");
    // A target that lists none.
    t.intrinsics.clear();
    let (_, text) = c.check_op(&s(knob("mma.n1", (0, "a"), &["i"], &["j"], &["k"])), &t);
    assert!(text.contains("target `custom` has no intrinsic `mma.n1`") && text.contains("target `custom` lists no intrinsics"), "{text}");
}
