//! Differential property test: random mappings, basic and fused, of random
//! contractions onto the vector intrinsics of the x86 targets, with random
//! tile sizes, caches and vectors; the interpreter's answer on the
//! tensorized kernel (each intrinsic with its own rounding) must match the
//! op's, and the tensorized IR must verify and print back. The lanes
//! operand is cached more often than the other reads, so that `dot`
//! kernels are often repacked (`pack`); `packing_is_exercised` checks
//! they are.

use super::*;
use crate::samples::{Choices, name_reads};
use crate::testing::*;
use crate::{bind, cache, tile, unroll, vectorize};
use proptest::prelude::*;
use std::sync::Arc;
use tilec::pass::{Pass, PassOptions};
use tilec::target::Target;
use tilec::target::mapping::{candidates, contraction, fused_parts};

/// Contractions over extents that the intrinsics' sizes (8, 16 lanes; 1,
/// 2, 4 products) divide, so that tiles divide them too.
const CONTRACTIONS: &[&str] = &[
    "func @f(%A: tensor<32x16xf32>, %B: tensor<16x32xf32>) -> tensor<32x32xf32> {
  %C = compute (i: 32, j: 32) reduce sum (k: 16) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<32x32xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}",
    "func @f(%A: tensor<16x32xu8>, %B: tensor<32x32xi8>) -> tensor<16x32xi32> {
  %C = compute (i: 16, j: 32) reduce sum (k: 32) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<16x32xi32>[i, j] {
    %x = cast %a : u8 -> i32
    %y = cast %b : i8 -> i32
    %0 = mul %x, %y : i32
    yield %0 : i32
  }
  return %C
}",
    "func @f(%A: tensor<16x16xbf16>, %B: tensor<16x32xbf16>) -> tensor<16x32xf32> {
  %C = compute (i: 16, j: 32) reduce sum (k: 16) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<16x32xf32>[i, j] {
    %x = cast %a : bf16 -> f32
    %y = cast %b : bf16 -> f32
    %0 = mul %x, %y : f32
    yield %0 : f32
  }
  return %C
}",
    // A padded, strided convolution (the input gathered lane by lane).
    "func @f(%x: tensor<1x4x17x17xf32>, %w: tensor<16x4x3x3xf32>) -> tensor<1x16x8x16xf32> {
  %y = compute (n: 1, f: 16, oh: 8, ow: 16) reduce sum (c: 4, r: 3, s: 3)
      reads(%xv = %x[n, c, oh * 2 + r - 1, ow + s - 1] pad(0.0), %wv = %w[f, c, r, s]) -> tensor<1x16x8x16xf32>[n, f, oh, ow] {
    %0 = mul %xv, %wv : f32
    yield %0 : f32
  }
  return %y
}",
    // A batched GEMM: `b` stays a loop around the intrinsic.
    "func @f(%A: tensor<2x16x8xu8>, %B: tensor<2x8x16xi8>) -> tensor<2x16x16xi32> {
  %C = compute (b: 2, i: 16, j: 16) reduce sum (k: 8) reads(%a = %A[b, i, k], %x = %B[b, k, j]) -> tensor<2x16x16xi32>[b, i, j] {
    %p = cast %a : u8 -> i32
    %q = cast %x : i8 -> i32
    %0 = mul %p, %q : i32
    yield %0 : i32
  }
  return %C
}",
    // An int8 convolution: `cache` stages the weights with `f` innermost
    // (a permuted copy), which packing composes with.
    "func @f(%x: tensor<1x8x6x6xu8>, %w: tensor<16x8x3x3xi8>) -> tensor<1x16x4x4xi32> {
  %y = compute (n: 1, f: 16, oh: 4, ow: 4) reduce sum (c: 8, r: 3, s: 3)
      reads(%xv = %x[n, c, oh + r, ow + s], %wv = %w[f, c, r, s]) -> tensor<1x16x4x4xi32>[n, f, oh, ow] {
    %p = cast %xv : u8 -> i32
    %q = cast %wv : i8 -> i32
    %0 = mul %p, %q : i32
    yield %0 : i32
  }
  return %y
}",
];

/// The x86 targets, and x86-avx512 with AVX512-BF16 (which offers `vdpbf16ps.zmm`).
fn targets() -> Vec<Arc<Target>> {
    let avx512 = include_str!("../../../targets/x86-avx512.toml").replace("name = \"x86-avx512\"", "name = \"x86-avx512-bf16\"").replace("+avx512vnni,", "+avx512vnni,+avx512bf16,");
    vec![tilec::target::builtin("x86-avx2").expect("built in"), tilec::target::builtin("x86-avx512").expect("built in"), target(&avx512)]
}

fn divisors(n: u64) -> Vec<u64> {
    (1..=n).filter(|&d| n.is_multiple_of(d)).collect()
}

/// A random schedule whose every tile divides its axis, the mapped axes'
/// innermost tiles multiples of the intrinsic's sizes (a fused axis' op
/// axes any tiles: the verifier turns away those that do not split the
/// size, and the caller draws again), maybe with caches (the lanes operand
/// `a`'s more often: `pack` repacks its buffer) and a basic `m` axis
/// vectorised at the intrinsic's width.
fn schedule_for(c: &Compute, t: &Target, x: &Intrinsic, mapping: &tilec::target::mapping::Mapping, ch: &mut Choices, pad: &mut Choices) -> Schedule {
    let levels = t.tile_levels.len();
    let mut s = Schedule::new(&t.name);
    let size_on = |a: AxisId| {
        if mapping.m == [a] {
            u64::from(x.m)
        } else if mapping.k == [a] {
            u64::from(x.k)
        } else {
            1
        }
    };
    let spatial: Vec<AxisId> = c.spatial_axes().collect();
    for (id, a) in c.axes.iter().enumerate() {
        let unit = size_on(AxisId::new(id));
        let mut fits: Vec<u64> = divisors(a.extent).into_iter().filter(|d| d % unit == 0).collect();
        // A spatial axis may end in a partial tile now and then, which
        // tensorize pads (padding.rs; drawn from `pad`, so that the other
        // draws stay those of the seed).
        if spatial.contains(&AxisId::new(id)) && pad.below(4) == 0 {
            fits.extend((1..=a.extent.div_ceil(unit)).map(|q| q * unit).filter(|b| !a.extent.is_multiple_of(*b)));
        }
        let mut sizes = vec![ch.pick(&fits)];
        while sizes.len() < levels {
            let below: Vec<u64> = divisors(*sizes.last().expect("one")).into_iter().filter(|d| d % unit == 0).collect();
            sizes.push(ch.pick(&below));
        }
        s.tiles.push((a.name.clone(), sizes));
    }
    for (i, _) in c.all_reads() {
        if ch.below(if i == mapping.a { 3 } else { 6 }) < 2 {
            s.cache.push(tilec::ir::schedule::CacheDirective { read: i, read_name: String::new(), level: ch.pick(&["l1", "l2", "l3"]).to_string() });
        }
    }
    if mapping.m.len() == 1 && ch.below(2) == 0 {
        s.vector = Some((c.axis(mapping.m[0]).name.clone(), u64::from(x.m)));
    }
    s.unroll = ch.pick(&[0, 8]);
    s
}

/// Contraction `src` parsed: the module, its compute op and the op's
/// contraction.
fn parsed(src: &str) -> (Module, Op, Compute, tilec::target::mapping::Contraction) {
    let m = parse(src);
    let f = &m.funcs[0];
    let cop = f.walk().into_iter().find(|&o| f.ops[o].kind.as_compute().is_some()).expect("a compute op");
    let c = f.ops[cop].kind.as_compute().expect("compute").clone();
    let con = contraction(f, cop).expect("a contraction");
    (m, cop, c, con)
}

/// The pass's choice for mapping `mapping` of compute op `cop` of `m`
/// onto `x`.
fn choice_of(m: &Module, cop: Op, c: &Compute, x: &Intrinsic, mapping: &tilec::target::mapping::Mapping) -> Choice {
    let info = tilec::target::ComputeInfo::of(&m.funcs[0], cop).expect("a compute op");
    Choice {
        name: x.name.clone(),
        a: info.reads[mapping.a].name.trim_start_matches('%').to_string(),
        axes: [&mapping.m, &mapping.n, &mapping.k].map(|axes| axes.iter().map(|&a| c.axis(a).name.clone()).collect()),
    }
}

/// What one case did: whether it tensorized (`None`: no offered intrinsic
/// maps the op, or no schedule was found), and how ([`Case`]).
fn tensorize_case(op: usize, which: usize, seed: u64) -> Result<Option<Case>, TestCaseError> {
    let t = &targets()[which];
    let (mut m, cop, c, con) = parsed(CONTRACTIONS[op]);
    let mut ch = Choices::new(seed);
    // An offered intrinsic with a mapping of this op, basic or fused (each
    // drawn as often as the other, where there are both).
    let fits = |x: &Intrinsic, mp: &tilec::target::mapping::Mapping| {
        // Tiles divide the axes: the mapped axes' extents must split the
        // intrinsic's sizes.
        let split = |axes: &[AxisId], size: u32| fused_parts(&axes.iter().map(|&a| c.axis(a).extent).collect::<Vec<_>>(), u64::from(size)).is_some();
        (mp.m.is_empty() || split(&mp.m, x.m)) && (mp.k.is_empty() || split(&mp.k, x.k))
    };
    let all: Vec<(&Intrinsic, tilec::target::mapping::Mapping)> =
        t.offered_intrinsics().filter(|x| x.is_vector()).flat_map(|x| candidates(&c, &con, x).unwrap_or_default().into_iter().map(move |mp| (x, mp))).filter(|(x, mp)| fits(x, mp)).collect();
    let (basic, fused): (Vec<_>, Vec<_>) = all.into_iter().partition(|(_, mp)| mp.is_basic());
    let options = if fused.is_empty() || !basic.is_empty() && ch.below(2) == 0 { basic } else { fused };
    if options.is_empty() {
        return Ok(None);
    }
    let (x, mapping) = options[ch.below(options.len() as u64) as usize].clone();
    let choice = choice_of(&m, cop, &c, x, &mapping);
    // A schedule the target's limits allow.
    let mut pad = Choices::new(seed ^ 0x9e37_79b9_7f4a_7c15);
    let padded;
    let mut tries = 0;
    loop {
        let s = schedule_for(&c, t, x, &mapping, &mut ch, &mut pad);
        let partial = c.axes.iter().any(|a| s.tiles_of(&a.name).and_then(|t| t.first().copied()).is_some_and(|b| !a.extent.is_multiple_of(b)));
        // (The pass is given the mapping, not the schedule: the verifier's
        // rule for a fused axis' tiles is checked here.)
        let innermost = |axes: &[AxisId]| axes.iter().map(|&a| s.tiles_of(&c.axis(a).name).and_then(|t| t.last().copied()).unwrap_or(c.axis(a).extent)).collect::<Vec<u64>>();
        let split = fused_parts(&innermost(&mapping.m), u64::from(x.m)).is_some() && fused_parts(&innermost(&mapping.k), u64::from(x.k)).is_some();
        set_schedule(&mut m, s);
        name_reads(&mut m);
        if split && !tilec::verify::verify_module_with(&m, Some(t)).has_errors() {
            padded = partial;
            break;
        }
        tries += 1;
        if tries >= 30 {
            return Ok(None);
        }
    }
    let make = |d: &PassDecl| (d.create)(&PassOptions::defaults(d.options));
    let mut passes: Vec<Box<dyn Pass>> = vec![make(&tile::DECL), make(&cache::DECL), make(&bind::DECL), make(&vectorize::DECL), Box::new(Tensorize::with(choice)), make(&unroll::DECL)];
    let mut refs: Vec<&mut (dyn Pass + 'static)> = passes.iter_mut().map(|p| &mut **p).collect();
    let after = check_equivalent(&m, t, &mut refs, seed);
    let g = &after.funcs[0];
    prop_assert!(g.walk().into_iter().any(|o| matches!(g.ops[o].kind, OpKind::Intrinsic(_))), "no intrinsic in\n{}", tilec::syntax::print_module(&after));
    let packed = g.walk().into_iter().any(|o| matches!(&g.ops[o].kind, OpKind::Copy(c) if c.split.is_some()));
    let fused = g.walk().into_iter().any(|o| matches!(&g.ops[o].kind, OpKind::Intrinsic(x) if x.is_fused()));
    Ok(Some(Case { packed, fused, padded }))
}

/// What a tensorized case did.
#[derive(Clone, Copy, Debug)]
struct Case {
    /// A lanes operand was repacked (a copy with `split`).
    packed: bool,
    /// An intrinsic has a fused axis (several parts).
    fused: bool,
    /// A spatial axis ended in a partial tile (`padding.rs`).
    padded: bool,
}

/// Partial tiles of vector intrinsics' spatial axes are tensorized and
/// checked, not only drawn.
#[test]
fn padded_vector_tiles_are_exercised() {
    let cases = (0..CONTRACTIONS.len()).flat_map(|op| (0..12u64).map(move |seed| (op, seed)));
    let (tensorized, padded) = count_cases(cases, |op, seed| tensorize_case(op, (seed % 3) as usize, seed), |case| case.padded);
    assert!(padded * 10 >= tensorized && padded > 0, "{padded} of {tensorized} tensorized cases padded");
}

/// Of `cases` (op, seed), how many `run` tensorized and how many of those
/// `flag` marks; a case that fails the check fails the test.
fn count_cases<C>(cases: impl Iterator<Item = (usize, u64)>, run: impl Fn(usize, u64) -> Result<Option<C>, TestCaseError>, flag: impl Fn(&C) -> bool) -> (u32, u32) {
    let (mut tensorized, mut flagged) = (0, 0);
    for (op, seed) in cases {
        match run(op, seed) {
            Ok(Some(case)) => {
                tensorized += 1;
                flagged += u32::from(flag(&case));
            }
            Ok(None) => {}
            Err(e) => panic!("op {op}, seed {seed}: {e}"),
        }
    }
    (tensorized, flagged)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_mappings_preserve_semantics(op in 0..CONTRACTIONS.len(), which in 0usize..3, seed in any::<u64>()) {
        prop_assume!(tensorize_case(op, which, seed)?.is_some());
    }
}

/// The `dot` contractions (u8 and bf16 GEMMs, the batched u8 GEMM, the
/// int8 convolution) on the targets that offer `dot` intrinsics, over
/// fixed seeds: some cases must repack the lanes operand, the convolution's
/// permuted weights among them, so the property test above covers packing.
#[test]
fn packing_is_exercised() {
    let (mut tensorized, mut packed, mut conv_packed) = (0, 0, 0);
    for seed in 0..24u64 {
        for (op, which) in [(1, 1), (2, 2), (4, 1), (5, 1)] {
            match tensorize_case(op, which, seed) {
                Ok(Some(Case { packed: p, .. })) => {
                    tensorized += 1;
                    packed += u32::from(p);
                    conv_packed += u32::from(p && op == 5);
                }
                Ok(None) => {}
                Err(e) => panic!("op {op}, target {which}, seed {seed}: {e}"),
            }
        }
    }
    assert!(packed * 5 >= tensorized, "{packed} of {tensorized} tensorized dot kernels repacked");
    assert!(conv_packed > 0, "no convolution repacked ({packed} of {tensorized} kernels)");
}

/// The convolutions (f32, and int8 with VNNI) over fixed seeds: some cases
/// must tensorize with a fused axis (lanes over `oh · ow`, or `dot` groups
/// over `c · s`), so the property test above covers fused mappings.
#[test]
fn fused_mappings_are_exercised() {
    let (mut tensorized, mut fused) = (0, 0);
    for seed in 0..24u64 {
        for (op, which) in [(3, 0), (3, 1), (5, 1)] {
            match tensorize_case(op, which, seed) {
                Ok(Some(case)) => {
                    tensorized += 1;
                    fused += u32::from(case.fused);
                }
                Ok(None) => {}
                Err(e) => panic!("op {op}, target {which}, seed {seed}: {e}"),
            }
        }
    }
    assert!(fused * 5 >= tensorized, "{fused} of {tensorized} tensorized convolutions fused");
}

/// Contractions for warp intrinsics (`mma.sync` on sm80): f16 into f32 and
/// into f16, bf16 into f32, s8 into s32, an f16 convolution; extents the
/// 16 × 8 × k tiles divide.
const WARP_CONTRACTIONS: &[&str] = &[
    "func @f(%A: tensor<32x32xf16>, %B: tensor<32x64xf16>) -> tensor<32x64xf32> {
  %C = compute (i: 32, j: 64) reduce sum (k: 32) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<32x64xf32>[i, j] {
    %x = cast %a : f16 -> f32
    %y = cast %b : f16 -> f32
    %0 = mul %x, %y : f32
    yield %0 : f32
  }
  return %C
}",
    "func @f(%A: tensor<32x16xf16>, %B: tensor<16x16xf16>) -> tensor<32x16xf16> {
  %C = compute (i: 32, j: 16) reduce sum (k: 16) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<32x16xf16>[i, j] {
    %0 = mul %a, %b : f16
    yield %0 : f16
  }
  return %C
}",
    "func @f(%A: tensor<16x32xbf16>, %B: tensor<32x32xbf16>) -> tensor<16x32xf32> {
  %C = compute (i: 16, j: 32) reduce sum (k: 32) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<16x32xf32>[i, j] {
    %x = cast %a : bf16 -> f32
    %y = cast %b : bf16 -> f32
    %0 = mul %x, %y : f32
    yield %0 : f32
  }
  return %C
}",
    "func @f(%A: tensor<32x64xi8>, %B: tensor<64x16xi8>) -> tensor<32x16xi32> {
  %C = compute (i: 32, j: 16) reduce sum (k: 64) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<32x16xi32>[i, j] {
    %x = cast %a : i8 -> i32
    %y = cast %b : i8 -> i32
    %0 = mul %x, %y : i32
    yield %0 : i32
  }
  return %C
}",
    "func @f(%x: tensor<1x16x6x10xf16>, %w: tensor<16x16x3x3xf16>) -> tensor<1x16x4x8xf32> {
  %y = compute (n: 1, f: 16, oh: 4, ow: 8) reduce sum (c: 16, r: 3, s: 3)
      reads(%xv = %x[n, c, oh + r, ow + s], %wv = %w[f, c, r, s]) -> tensor<1x16x4x8xf32>[n, f, oh, ow] {
    %p = cast %xv : f16 -> f32
    %q = cast %wv : f16 -> f32
    %0 = mul %p, %q : f32
    yield %0 : f32
  }
  return %y
}",
];

/// One warp case: a random mapping of contraction `op` onto an m16n8
/// `mma` of sm80 (basic, or fused where the op has such mappings: then
/// half the time), random divisor-chain tiles whose thread level is whole
/// intrinsic tiles (a fused axis' op axes any tiles: the verifier turns
/// away those that do not split its size, and the case draws again),
/// random shared caches; `None` where no mapping fits or no schedule
/// verifies, else what the case exercised.
fn warp_case(op: usize, seed: u64) -> Result<Option<WarpCase>, TestCaseError> {
    let t = tilec::target::builtin("sm80").expect("built in");
    let (mut m, cop, c, con) = parsed(WARP_CONTRACTIONS[op]);
    let mut ch = Choices::new(seed);
    let options: Vec<(&Intrinsic, tilec::target::mapping::Mapping)> = t
        .intrinsics
        .iter()
        .filter(|x| x.kind == "mma" && [x.m, x.n] == [16, 8])
        .flat_map(|x| candidates(&c, &con, x).unwrap_or_default().into_iter().map(move |mp| (x, mp)))
        .filter(|(x, mp)| {
            let fits = |axes: &[AxisId], size: u32| axes.is_empty() || fused_parts(&axes.iter().map(|&a| c.axis(a).extent).collect::<Vec<_>>(), u64::from(size)).is_some();
            fits(&mp.m, x.m) && fits(&mp.n, x.n) && fits(&mp.k, x.k)
        })
        .collect();
    let (basic, fused): (Vec<_>, Vec<_>) = options.into_iter().partition(|(_, mp)| mp.is_basic());
    let pool = if fused.is_empty() || !basic.is_empty() && ch.below(2) == 0 { basic } else { fused };
    if pool.is_empty() {
        return Ok(None);
    }
    let (x, mapping) = pool[ch.below(pool.len() as u64) as usize].clone();
    let choice = choice_of(&m, cop, &c, x, &mapping);
    let unit = |a: AxisId| {
        let on = |axes: &[AxisId], size: u32| (axes == [a]).then_some(u64::from(size));
        on(&mapping.m, x.m).or(on(&mapping.n, x.n)).or(on(&mapping.k, x.k)).unwrap_or(1)
    };
    let spatial: Vec<AxisId> = c.spatial_axes().collect();
    let block_of = |m: &Module, id: usize| -> u64 {
        let f = &m.funcs[0];
        let s = f.regions[f.body].ops.iter().find_map(|&o| f.ops[o].kind.as_compute().and_then(|c| c.schedule.as_ref())).expect("scheduled");
        s.tiles[id].1[0]
    };
    let padded;
    let mut tries = 0;
    loop {
        let mut s = Schedule::new(&t.name);
        for (id, a) in c.axes.iter().enumerate() {
            let u = unit(AxisId::new(id));
            let mut blocks: Vec<u64> = divisors(a.extent).into_iter().filter(|d| d % u == 0).collect();
            // A third of the time a spatial axis may end in a partial
            // tile, which tensorize pads (padding.rs).
            if spatial.contains(&AxisId::new(id)) && ch.below(3) == 0 {
                blocks.extend((1..=a.extent.div_ceil(u)).map(|q| q * u).filter(|b| !a.extent.is_multiple_of(*b)));
            }
            let block = ch.pick(&blocks);
            let thread = ch.pick(&divisors(block).into_iter().filter(|d| d % u == 0).collect::<Vec<_>>());
            s.tiles.push((a.name.clone(), vec![block, thread]));
        }
        for (i, _) in c.all_reads() {
            if ch.below(2) == 0 {
                s.cache.push(tilec::ir::schedule::CacheDirective { read: i, read_name: String::new(), level: "shared".to_string() });
            }
        }
        s.unroll = ch.pick(&[0, 64]);
        let threads = c.spatial_axes().fold(1, |p, a| p * (s.tiles[a.index()].1[0] / s.tiles[a.index()].1[1]));
        // (The choice is `tensorize`'s option, not the schedule's knob, so
        // the verifier does not see it: a fused axis' thread tiles must
        // split its size as `tensorize` splits it.)
        let splits = |axes: &[AxisId], size: u32| axes.len() < 2 || fused_parts(&axes.iter().map(|a| s.tiles[a.index()].1[1]).collect::<Vec<_>>(), u64::from(size)).is_some();
        let fits = splits(&mapping.m, x.m) && splits(&mapping.n, x.n) && splits(&mapping.k, x.k);
        set_schedule(&mut m, s);
        name_reads(&mut m);
        // A thread loop to make warps of (bind makes none of extent 1).
        if fits && threads > 1 && !tilec::verify::verify_module_with(&m, Some(&t)).has_errors() {
            padded = c.axes.iter().enumerate().any(|(id, a)| !a.extent.is_multiple_of(block_of(&m, id)));
            break;
        }
        tries += 1;
        if tries >= 60 {
            return Ok(None);
        }
    }
    let make = |d: &PassDecl| (d.create)(&PassOptions::defaults(d.options));
    let mut passes: Vec<Box<dyn Pass>> = vec![make(&tile::DECL), make(&cache::DECL), make(&bind::DECL), Box::new(Tensorize::with(choice)), make(&unroll::DECL)];
    let mut refs: Vec<&mut (dyn Pass + 'static)> = passes.iter_mut().map(|p| &mut **p).collect();
    let after = check_equivalent(&m, &t, &mut refs, seed);
    let g = &after.funcs[0];
    let warp = |o: Op| matches!(&g.ops[o].kind, OpKind::Intrinsic(x) if x.lane.is_some());
    prop_assert!(g.walk().into_iter().any(warp), "no warp intrinsic in\n{}", tilec::syntax::print_module(&after));
    Ok(Some(WarpCase { fused: !mapping.is_basic(), padded }))
}

/// What a warp case exercised.
#[derive(Clone, Copy, Debug)]
struct WarpCase {
    /// The mapping was fused.
    fused: bool,
    /// A spatial axis ended in a partial tile (`padding.rs`).
    padded: bool,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Warp intrinsics: the lanes, fragments and the fold over each lane's
    /// own elements compute what the op computes.
    #[test]
    fn random_warp_mappings_preserve_semantics(op in 0..WARP_CONTRACTIONS.len(), seed in any::<u64>()) {
        prop_assume!(warp_case(op, seed)?.is_some());
    }
}

/// Every warp contraction tensorizes for some seed (the property test
/// above would pass vacuously otherwise).
#[test]
fn warp_cases_are_exercised() {
    for op in 0..WARP_CONTRACTIONS.len() {
        let hits = (0..16u64).filter(|&seed| matches!(warp_case(op, seed), Ok(Some(_)))).count();
        assert!(hits * 2 >= 16, "warp contraction {op} tensorized for {hits} of 16 seeds");
    }
}

/// The convolution's fused warp mappings (its output rows and columns on
/// `m` or `n`, several axes on `k`) are tensorized and checked, not only
/// drawn: the lane loops split at the parts, the fragments and the fold
/// follow the digits.
#[test]
fn fused_warp_mappings_are_exercised() {
    let conv = WARP_CONTRACTIONS.len() - 1;
    let (tensorized, fused) = count_cases((0..32u64).map(|seed| (conv, seed)), warp_case, |case| case.fused);
    assert!(fused * 4 >= tensorized && fused > 0, "{fused} of {tensorized} tensorized convolutions fused");
}

/// Partial tiles of spatial axes (padding) are tensorized and checked
/// too, not only drawn.
#[test]
fn padded_warp_tiles_are_exercised() {
    let cases = (0..WARP_CONTRACTIONS.len()).flat_map(|op| (0..16u64).map(move |seed| (op, seed)));
    let (tensorized, padded) = count_cases(cases, warp_case, |case| case.padded);
    assert!(padded * 10 >= tensorized && padded > 0, "{padded} of {tensorized} tensorized warp cases padded");
}
