use super::*;
use crate::search::knobs::{Knob, KnobSpace};
use crate::testing::parse;
use std::sync::Arc;
use tilec::ir::Module;
use tilec::target::check_resources;

/// A 256³ GEMM with a residual add fused into its epilogue (what `fuse`
/// makes of a GEMM and an add).
const GEMM_RESIDUAL: &str = "func @f(%A: tensor<256x256xf32>, %B: tensor<256x256xf32>, %R: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %C = compute \"gemm\" (i: 256, j: 256) reduce sum (k: 256) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<256x256xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  } epilogue(%acc) reads(%r = %R[i, j]) {
    %1 = add %acc, %r : f32
    yield %1 : f32
  }
  return %C
}";

const MEAN: &str = "func @f(%x: tensor<64x96xf32>) -> tensor<64xf32> {
  %y = compute \"mean\" (i: 64) reduce sum (j: 96) reads(%v = %x[i, j]) -> tensor<64xf32>[i] {
    yield %v : f32
  } epilogue(%s) {
    %n = const 96.0 : f32
    %0 = div %s, %n : f32
    yield %0 : f32
  }
  return %y
}";

const SCAN: &str = "func @f(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %y = compute \"scan\" (i: 4, j: 16) reduce sum (t: 16) reads(%v = %x[i, j - t] pad(0.0)) -> tensor<4x16xf32>[i, j] {
    yield %v : f32
  }
  return %y
}";

/// ResNet-18's C1: a 3x3 convolution over 64 channels, padded.
const CONV: &str = "func @f(%x: tensor<1x64x56x56xf32>, %k: tensor<64x64x3x3xf32>) -> tensor<1x64x56x56xf32> {
  %y = compute \"conv2d\" (n: 1, f: 64, oh: 56, ow: 56) reduce sum (c: 64, r: 3, s: 3)
      reads(%xv = %x[n, c, oh + r - 1, ow + s - 1] pad(0.0), %kv = %k[f, c, r, s]) -> tensor<1x64x56x56xf32>[n, f, oh, ow] {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}";

const TINY_GEMM: &str = "func @f(%A: tensor<8x4xf32>, %B: tensor<4x8xf32>) -> tensor<8x8xf32> {
  %C = compute (i: 8, j: 8) reduce sum (k: 4) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<8x8xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}";

fn module_problem(m: &Module, target: &str, intrinsics: bool) -> Problem {
    let f = &m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    let p = Problem::new(f, op, tilec::target::builtin(target).unwrap(), 16).unwrap();
    if intrinsics { p.with_intrinsics(f) } else { p }
}

fn problem(src: &str, target: &str) -> Problem {
    module_problem(&parse(src), target, false)
}

/// `p`'s initial point with tiles `tiles[axis]` (outermost level first).
fn point(p: &Problem, tiles: &[&[u64]]) -> Config {
    let mut cfg = p.initial();
    for (a, t) in tiles.iter().enumerate() {
        cfg.tiles[a] = t.to_vec();
    }
    assert!(p.in_space(&cfg));
    cfg
}

fn removed_by(p: &Problem, cfg: &Config) -> Option<&'static str> {
    first_removing(p, cfg).map(|i| RULES[i].id)
}

fn resource_check_passes(p: &Problem, cfg: &Config) -> bool {
    !check_resources(&p.compute, &p.info, &p.resource_plan(cfg), &p.target, tilec::diag::Span::DUMMY).has_errors()
}

#[test]
fn the_rules_are_named_once_in_gta_order() {
    let ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
    assert_eq!(ids, ["R1", "R2", "R3", "R4", "R5"]);
    for r in &RULES {
        assert!(std::ptr::eq(rule(r.id).unwrap(), r) && std::ptr::eq(rule(r.name).unwrap(), r));
        assert!(!r.summary.is_empty() && !r.condition.is_empty() && !r.gta_name.is_empty());
    }
    assert!(rule("R6").is_none());
}

/// docs/search.md's table names each rule as `RULES` declares it.
#[test]
fn the_docs_name_every_rule_as_declared() {
    let docs = std::fs::read_to_string(format!("{}/../docs/search.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    for r in &RULES {
        let row = format!("| {} `{}` | {}; `{}` |", r.id, r.name, r.gta_name, r.condition);
        assert!(docs.contains(&row), "docs/search.md has no row starting `{row}`");
    }
}

#[test]
fn conditions_follow_table_4() {
    // HasDataReuse: a GEMM's operands and a scan's window are reused; a
    // row mean reads each element once.
    assert!(has_data_reuse(&problem(GEMM_RESIDUAL, "x86-avx2")));
    assert!(has_data_reuse(&problem(SCAN, "x86-avx2")));
    let mean = problem(MEAN, "x86-avx2");
    assert!(!has_data_reuse(&mean));
    assert!(!rule("R1").unwrap().applies(&mean) && !rule("R2").unwrap().applies(&mean));
    // HasStagesFused: an epilogue (R4); an intrinsic stage (R3).
    assert!(rule("R4").unwrap().applies(&mean) && !rule("R4").unwrap().applies(&problem(SCAN, "x86-avx2")));
    assert!(!rule("R3").unwrap().applies(&problem(GEMM_RESIDUAL, "x86-avx2")));
    assert!(rule("R3").unwrap().applies(&module_problem(&parse(GEMM_RESIDUAL), "x86-avx2", true)));
    // HasDSM: GPU shared memory, not a CPU's caches.
    assert!(rule("R5").unwrap().applies(&problem(GEMM_RESIDUAL, "sm80")));
    assert!(!rule("R5").unwrap().applies(&problem(GEMM_RESIDUAL, "x86-avx512")));
}

#[test]
fn r1_removes_an_l1_tile_over_the_l1_cache() {
    let p = problem(GEMM_RESIDUAL, "x86-avx2");
    // A 64x64x64 l1 tile: A, B and the output 16 KB each, 48 KB in a 32 KB L1.
    let over = point(&p, &[&[64, 64, 64], &[64, 64, 64], &[256, 64, 64]]);
    assert_eq!(removed_by(&p, &over), Some("R1"));
    assert!(!p.valid(&over) && !resource_check_passes(&p, &over));
    let fits = point(&p, &[&[64, 32, 16], &[64, 32, 16], &[256, 64, 32]]);
    assert_eq!(removed_by(&p, &fits), None);
    assert!(p.valid(&fits));
}

#[test]
fn r4_removes_what_the_fused_epilogue_pushes_over_a_cache() {
    // The residual add streams (each element read once): no cache holds
    // it, and R4 has nothing to remove.
    let p = problem(GEMM_RESIDUAL, "x86-avx2");
    assert!(p.resources().streamed(2) && !p.resources().streamed(0));
    let tile: &[&[u64]] = &[&[32, 32, 32], &[64, 64, 64], &[256, 64, 64]];
    assert!(p.valid(&point(&p, tile)));
    // An epilogue read with reuse (each element for two rows) counts.
    // 32x64 outputs, k 64 at l1: A 8 KB, B 16 KB, output 8 KB = the 32 KB
    // L1 exactly; the epilogue read's 4 KB tile puts it over.
    let shared = GEMM_RESIDUAL.replace("%R: tensor<256x256xf32>", "%R: tensor<128x256xf32>").replace("%R[i, j]", "%R[i div 2, j] pad(0.0)");
    let p = problem(&shared, "x86-avx2");
    assert!(!p.resources().streamed(2));
    let tipped = point(&p, tile);
    assert_eq!(removed_by(&p, &tipped), Some("R4"));
    assert!(!resource_check_passes(&p, &tipped));
    // The same tile without the epilogue's read fits.
    let plain = problem(&shared.replace(" reads(%r = %R[i div 2, j] pad(0.0))", "").replace("%1 = add %acc, %r", "%1 = add %acc, %acc"), "x86-avx2");
    assert!(plain.valid(&point(&plain, &[&[32, 32, 32], &[64, 64, 64], &[256, 64, 64]])));
    // A tile over without the epilogue is R1's, not R4's.
    let over = point(&p, &[&[64, 64, 64], &[64, 64, 64], &[256, 64, 64]]);
    assert!(rule("R4").unwrap().keeps(&p, &over) && !rule("R1").unwrap().keeps(&p, &over));
}

#[test]
fn r2_removes_a_gpu_thread_tile_over_the_registers_and_a_packed_copy_over_its_cache() {
    let p = problem(GEMM_RESIDUAL, "sm80");
    // Block 64x64 (k 16), thread 32x32: 4 threads, 1024 accumulators each.
    let k = if p.target.has_reduction_loops(0) { 16 } else { 256 };
    let heavy = point(&p, &[&[64, 32], &[64, 32], &[k, 1]]);
    assert_eq!(removed_by(&p, &heavy), Some("R2"));
    assert!(!resource_check_passes(&p, &heavy));
    let light = point(&p, &[&[64, 4], &[64, 4], &[k, 1]]);
    assert!(rule("R2").unwrap().keeps(&p, &light));
    // On a CPU: A packed at l1 with a 128x64 tile (32 KB) beside B's.
    let cpu = problem(GEMM_RESIDUAL, "x86-avx2");
    let mut packed = point(&cpu, &[&[128, 128, 128], &[64, 64, 64], &[256, 128, 128]]);
    packed.pack[0] = 3;
    assert!(cpu.in_space(&packed));
    assert!(!rule("R2").unwrap().keeps(&cpu, &packed));
}

#[test]
fn r3_removes_an_intrinsic_point_without_whole_intrinsic_tiles() {
    let m = parse(GEMM_RESIDUAL);
    let p = module_problem(&m, "x86-avx2", true);
    assert!(!p.intrinsics.is_empty());
    let mut cfg = p.start(Some(0));
    assert_eq!(removed_by(&p, &cfg), None);
    cfg.vector = p.vector_axes.iter().copied().find(|&a| Some(a) != p.intrinsics[0].m_axis());
    assert_eq!(removed_by(&p, &cfg), Some("R3"));
    assert!(!p.valid(&cfg));
}

#[test]
fn r5_removes_a_block_whose_staged_reads_exceed_its_shared_memory() {
    let p = problem(GEMM_RESIDUAL, "sm80");
    // Block 256x256 with k 128: A and B staged, 128 KB each, in 163 KB.
    let k = if p.target.has_reduction_loops(0) { 128 } else { 256 };
    let big = point(&p, &[&[256, 8], &[256, 8], &[k, 1]]);
    assert_eq!(removed_by(&p, &big), Some("R5"));
    assert!(!resource_check_passes(&p, &big));
}

/// Where every rule applies (or has nothing to hold), the rules keep
/// exactly the points the space calls valid, and those with the resource
/// check's constraints (all but R3, which is `Problem::fits_intrinsic`)
/// exactly the points the check accepts: the rules are the check, split.
#[test]
fn the_rules_split_the_resource_check_exactly() {
    let f16 = GEMM_RESIDUAL.replace("f32", "f16");
    // M = 1 with a residual add: B and the residual stream (no cache holds
    // them, packed or not).
    let m1 = GEMM_RESIDUAL
        .replace("%A: tensor<256x256xf32>", "%A: tensor<1x256xf32>")
        .replace("%R: tensor<256x256xf32>", "%R: tensor<1x256xf32>")
        .replace("-> tensor<256x256xf32>", "-> tensor<1x256xf32>")
        .replace("(i: 256,", "(i: 1,");
    let cases = [
        (m1.as_str(), "x86-avx2", false),
        (m1.as_str(), "x86-avx512", false),
        (GEMM_RESIDUAL, "x86-avx2", true),
        (CONV, "x86-avx2", false),
        (GEMM_RESIDUAL, "x86-avx512", true),
        (CONV, "x86-avx512", false),
        (GEMM_RESIDUAL, "sm80", false),
        (CONV, "sm80", false),
        (f16.as_str(), "sm80", true),
        (f16.as_str(), "sm90", true),
        (CONV, "sm90", false),
    ];
    for (src, target, intrinsics) in cases {
        let p = module_problem(&parse(src), target, intrinsics);
        // A rule applies or has nothing to hold on this op and target (R4
        // without epilogue reads, R5 without a scratchpad).
        let empty = |r: &SpaceRule| match r.id {
            "R4" => p.compute.epilogue_reads.is_empty(),
            "R5" => !has_dsm(&p),
            _ => false,
        };
        let all_apply = RULES.iter().filter(|r| r.id != "R3").all(|r| r.applies(&p) || empty(r));
        assert!(all_apply, "{target}: every rule applies to these ops");
        assert!(intrinsics == rule("R3").unwrap().applies(&p), "{target}");
        let space = KnobSpace::new(&p);
        let mut rng = Rng::new(7);
        let (mut kept, mut removed) = (0, 0);
        // Uniform draws keep small inner tiles; each also with its inner
        // levels taking an outer level's sizes, to reach the capacities.
        let draws: Vec<Config> = (0..300).filter_map(|_| space.draw(&mut rng)).flat_map(|(cfg, _)| (0..p.levels).map(move |l| (cfg.clone(), l))).map(|(cfg, l)| p.complete(&cfg, l)).collect();
        for cfg in draws {
            let rules = RULES.iter().filter(|r| r.id != "R3").all(|r| r.keeps(&p, &cfg));
            let check = resource_check_passes(&p, &cfg);
            assert_eq!(rules, check, "{target}: {cfg:?} (first removing: {:?})", removed_by(&p, &cfg));
            // (Beside the rules, the tile sizes' structural rules, the
            // verifier's: a tile past the extent only on the vector axis.)
            assert_eq!(p.valid(&cfg), p.in_space(&cfg) && p.tiles_fit(&cfg) && keeps_all(&p, &cfg), "{target}: {cfg:?}");
            if check { kept += 1 } else { removed += 1 }
        }
        // (Nothing of M = 1's is over a capacity: its big reads stream.)
        assert!(kept > 0 && (removed > 0 || src == m1), "{target}: {kept} kept, {removed} removed");
    }
}

/// Every point, counted by walking every knob's values.
fn exact_points(space: &KnobSpace, cfg: &Config, k: usize, out: &mut Vec<Config>) {
    let knobs = space.knobs();
    if k == knobs.len() {
        out.push(cfg.clone());
        return;
    }
    for v in space.values(cfg, knobs[k]) {
        let mut next = cfg.clone();
        space.assign(&mut next, knobs[k], v);
        space.restart_after(&mut next, knobs[k]);
        exact_points(space, &next, k + 1, out);
    }
}

#[test]
fn estimates_match_an_exact_count_and_are_seeded() {
    let p = problem(TINY_GEMM, "x86-avx2");
    let space = KnobSpace::new(&p);
    let mut all = Vec::new();
    exact_points(&space, &p.initial(), 0, &mut all);
    assert!(space.knobs().contains(&Knob::Order) && all.len() > 100);
    let valid = all.iter().filter(|c| p.valid(c)).count() as f64 / all.len() as f64;
    let s = estimate(&p, 20_000, &mut Rng::new(1));
    assert_eq!(s.draws, 20_000);
    assert!((s.points / all.len() as f64 - 1.0).abs() < 0.1, "{} estimated, {} exact", s.points, all.len());
    assert!((s.valid.1 - valid).abs() < 0.05, "{} estimated, {valid} exact", s.valid.1);
    let counted: usize = s.first.iter().map(|f| f.0).sum::<usize>() + s.verifier.0 + s.valid.0;
    let weighted: f64 = s.first.iter().map(|f| f.1).sum::<f64>() + s.verifier.1 + s.valid.1;
    assert_eq!(counted, s.draws);
    assert!(s.effective_draws > 1.0 && s.effective_draws <= s.draws as f64 + 1e-6);
    assert!((weighted - 1.0).abs() < 1e-9);
    let again = estimate(&p, 20_000, &mut Rng::new(1));
    assert_eq!((again.first.clone(), again.valid, again.points), (s.first.clone(), s.valid, s.points));
    // The report names every rule.
    let text = report(&p, 200, 3);
    for r in &RULES {
        assert!(text.contains(r.id) && text.contains(r.name), "{text}");
    }
    let _ = Arc::clone(&p.target);
}
