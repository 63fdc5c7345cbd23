//! Samples for tests across crates: tiny instances of every op kind, and
//! random schedules for them on any target. The scheduling passes'
//! property test and code generation's differential test draw from here,
//! so both cover the same ground. Not for production use: schedules are
//! drawn blindly and may fail the target's limits (callers redraw).

use tilec::ir::*;
use tilec::target::Target;

/// Tiny instances of every op kind (same structure as the workloads:
/// strides, padding, dilation, groups, transposition, epilogues).
pub const OPS: &[&str] = &[
    // GEMM with a fused epilogue
    "func @f(%A: tensor<5x6xf32>, %B: tensor<6x7xf32>, %bias: tensor<7xf32>) -> tensor<5x7xf32> {
  %C = compute (i: 5, j: 7) reduce sum (k: 6) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<5x7xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  } epilogue(%acc) reads(%bv = %bias[j]) {
    %1 = add %acc, %bv : f32
    %2 = relu %1 : f32
    yield %2 : f32
  }
  return %C
}",
    // batched GEMM, B transposed
    "func @f(%A: tensor<2x4x3xf32>, %B: tensor<2x5x3xf32>) -> tensor<2x4x5xf32> {
  %C = compute (b: 2, i: 4, j: 5) reduce sum (k: 3) reads(%x = %A[b, i, k], %y = %B[b, j, k]) -> tensor<2x4x5xf32>[b, i, j] {
    %0 = mul %x, %y : f32
    yield %0 : f32
  }
  return %C
}",
    // GEMV
    "func @f(%A: tensor<9x6xf32>, %x: tensor<6xf32>) -> tensor<9xf32> {
  %y = compute (i: 9) reduce sum (j: 6) reads(%a = %A[i, j], %v = %x[j]) -> tensor<9xf32>[i] {
    %0 = mul %a, %v : f32
    yield %0 : f32
  }
  return %y
}",
    // conv1d: stride 2, padding 1, dilation 2
    "func @f(%x: tensor<1x2x9xf32>, %k: tensor<3x2x3xf32>) -> tensor<1x3x4xf32> {
  %y = compute (n: 1, f: 3, o: 4) reduce sum (c: 2, r: 3) reads(%xv = %x[n, c, o * 2 + r * 2 - 1] pad(0.0), %kv = %k[f, c, r]) -> tensor<1x3x4xf32>[n, f, o] {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}",
    // conv2d: stride 2, padding 1
    "func @f(%x: tensor<1x2x6x6xf32>, %k: tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32> {
  %y = compute (n: 1, f: 4, oh: 3, ow: 3) reduce sum (c: 2, r: 3, s: 3) reads(%xv = %x[n, c, oh * 2 + r - 1, ow * 2 + s - 1] pad(0.0), %kv = %k[f, c, r, s]) -> tensor<1x4x3x3xf32>[n, f, oh, ow] {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}",
    // grouped conv2d (2 groups)
    "func @f(%x: tensor<1x4x4x4xf32>, %k: tensor<4x2x3x3xf32>) -> tensor<1x4x4x4xf32> {
  %y = compute (n: 1, g: 2, fg: 2, oh: 4, ow: 4) reduce sum (cg: 2, r: 3, s: 3) reads(%xv = %x[n, g * 2 + cg, oh + r - 1, ow + s - 1] pad(0.0), %kv = %k[g * 2 + fg, cg, r, s]) -> tensor<1x4x4x4xf32>[n, g * 2 + fg, oh, ow] {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}",
    // depthwise conv2d
    "func @f(%x: tensor<1x3x5x5xf32>, %k: tensor<3x1x3x3xf32>) -> tensor<1x3x5x5xf32> {
  %y = compute (n: 1, c: 3, oh: 5, ow: 5) reduce sum (r: 3, s: 3) reads(%xv = %x[n, c, oh + r - 1, ow + s - 1] pad(0.0), %kv = %k[c, 0, r, s]) -> tensor<1x3x5x5xf32>[n, c, oh, ow] {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}",
    // conv3d
    "func @f(%x: tensor<1x2x4x4x4xf32>, %k: tensor<2x2x3x3x3xf32>) -> tensor<1x2x2x2x2xf32> {
  %y = compute (n: 1, f: 2, od: 2, oh: 2, ow: 2) reduce sum (c: 2, t: 3, r: 3, s: 3) reads(%xv = %x[n, c, od + t, oh + r, ow + s], %kv = %k[f, c, t, r, s]) -> tensor<1x2x2x2x2xf32>[n, f, od, oh, ow] {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}",
    // transposed conv2d (exact division)
    "func @f(%x: tensor<1x2x3x3xf32>, %k: tensor<2x2x3x3xf32>) -> tensor<1x2x5x5xf32> {
  %y = compute (n: 1, f: 2, oh: 5, ow: 5) reduce sum (c: 2, r: 3, s: 3) reads(%xv = %x[n, c, (oh - r + 1) div 2, (ow - s + 1) div 2] pad(0.0), %kv = %k[c, f, r, s]) -> tensor<1x2x5x5xf32>[n, f, oh, ow] {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}",
    // average pooling (epilogue) and max pooling (-inf padding)
    "func @f(%x: tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32> {
  %y = compute (n: 1, c: 2, oh: 3, ow: 3) reduce sum (r: 2, s: 2) reads(%v = %x[n, c, oh * 2 + r, ow * 2 + s]) -> tensor<1x2x3x3xf32>[n, c, oh, ow] {
    yield %v : f32
  } epilogue(%sum) {
    %q = const 0.25 : f32
    %0 = mul %sum, %q : f32
    yield %0 : f32
  }
  return %y
}",
    "func @f(%x: tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32> {
  %y = compute (n: 1, c: 2, oh: 3, ow: 3) reduce max (r: 3, s: 3) reads(%v = %x[n, c, oh * 2 + r - 1, ow * 2 + s - 1] pad(-inf)) -> tensor<1x2x3x3xf32>[n, c, oh, ow] {
    yield %v : f32
  }
  return %y
}",
    // mean, scan, and an elementwise op using the axis index
    "func @f(%x: tensor<4x6xf32>) -> tensor<4xf32> {
  %y = compute (i: 4) reduce sum (j: 6) reads(%v = %x[i, j]) -> tensor<4xf32>[i] {
    yield %v : f32
  } epilogue(%s) {
    %n = const 6.0 : f32
    %0 = div %s, %n : f32
    yield %0 : f32
  }
  return %y
}",
    "func @f(%x: tensor<3x7xf32>) -> tensor<3x7xf32> {
  %y = compute (i: 3, j: 7) reduce sum (t: 7) reads(%v = %x[i, j - t] pad(0.0)) -> tensor<3x7xf32>[i, j] {
    yield %v : f32
  }
  return %y
}",
    "func @f(%x: tensor<6x5xf32>) -> tensor<6x5xf32> {
  %y = compute (i: 6, j: 5) reads(%v = %x[i, j]) -> tensor<6x5xf32>[i, j] {
    %p = index j : f32
    %0 = mul %v, %p : f32
    yield %0 : f32
  }
  return %y
}",
    // int8 with int32 accumulation, quantized: u8 activations (zero-extended)
    // times i8 weights (sign-extended)
    "func @f(%A: tensor<4x5xu8>, %B: tensor<5x6xi8>) -> tensor<4x6xi32> {
  %C = compute (i: 4, j: 6) reduce sum (k: 5) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<4x6xi32>[i, j] {
    %a32 = cast %a : u8 -> i32
    %b32 = cast %b : i8 -> i32
    %0 = mul %a32, %b32 : i32
    yield %0 : i32
  }
  return %C
}",
];

/// The choices of one random schedule: `rand`'s ChaCha8, seeded.
pub struct Choices(rand::rngs::ChaCha8Rng);

impl Choices {
    pub fn new(seed: u64) -> Choices {
        use rand::SeedableRng;
        Choices(rand::rngs::ChaCha8Rng::seed_from_u64(seed))
    }

    /// Uniform in [0, n) (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        use rand::RngExt;
        self.0.random_range(0..n.max(1))
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

fn divisors(n: u64) -> Vec<u64> {
    (1..=n).filter(|d| n % d == 0).collect()
}

/// A random schedule for the first compute op of `m` on `t`: per axis a
/// divisor chain of tile sizes, vthreads, caches, unroll, vector, loop order.
pub fn random_schedule(m: &Module, t: &Target, ch: &mut Choices) -> Schedule {
    let f = &m.funcs[0];
    let op = f.walk().into_iter().find(|&o| f.ops[o].kind.as_compute().is_some()).expect("a compute op");
    let c = f.ops[op].kind.as_compute().expect("compute");
    let levels = t.tile_levels.len();
    let mut s = Schedule::new(&t.name);
    for a in &c.axes {
        // Now and then an axis is left untiled: one tile of its extent.
        if ch.below(5) == 0 {
            continue;
        }
        let mut sizes = vec![1 + ch.below(a.extent)];
        for _ in 1..levels {
            let prev = *sizes.last().expect("non-empty");
            sizes.push(ch.pick(&divisors(prev)));
        }
        s.tiles.push((a.name.clone(), sizes));
    }
    // An axis' sizes per level (its extent at every level when untiled).
    let sizes_of = |s: &Schedule, a: &AxisDecl| s.tiles_of(&a.name).map(|t| t.to_vec()).unwrap_or_else(|| vec![a.extent; levels]);
    let last = |s: &Schedule, a: &AxisDecl| *sizes_of(s, a).last().expect("sizes");
    // Virtual threads on a spatial axis whose parent and point tiles allow it.
    let spatial: Vec<&AxisDecl> = c.axes.iter().filter(|a| a.kind == AxisKind::Spatial).collect();
    if let Some(a) = spatial.get(ch.below(spatial.len() as u64 + 1) as usize) {
        let v = ch.pick(&[2u64, 3]);
        let sizes = sizes_of(&s, a);
        let parent = if levels >= 2 { sizes[levels - 2] } else { a.extent };
        if last(&s, a) % v == 0 && parent % v == 0 {
            s.vthreads.push((a.name.clone(), v));
        }
    }
    // Caches: reads without `div`, at a level something can be staged into:
    // those of the tile levels, and managed ones no tile level uses (a CPU's
    // registers, staged over the innermost tile).
    let stageable: Vec<&str> = t
        .memory
        .iter()
        .filter(|m| m.scope.is_some() && (m.managed || t.tile_levels.iter().any(|l| l.memory == m.name)))
        .map(|m| m.name.as_str())
        .collect();
    for (i, r) in c.all_reads() {
        if ch.below(2) == 0 && r.indices.iter().all(|e| e.divisor() == 1) && !stageable.is_empty() {
            s.cache.push(CacheDirective { read: i, read_name: String::new(), level: ch.pick(&stageable).to_string() });
        }
    }
    s.unroll = ch.pick(&[0u64, 4, 16]);
    // Vector: any spatial axis whose innermost tile is longer than 1 (its
    // point loop goes innermost; the last axis is the usual choice, the
    // others gather); the width divides that tile's share of one virtual
    // thread.
    if t.isa.vector_bits > 0 && ch.below(2) == 0 {
        let candidates: Vec<&&AxisDecl> = spatial.iter().filter(|a| last(&s, a) > 1).collect();
        let pick = if candidates.is_empty() || ch.below(2) == 0 { candidates.last().copied() } else { Some(ch.pick(&candidates)) };
        if let Some(a) = pick {
            let trip = last(&s, a) / s.vthreads_of(&a.name);
            let widths: Vec<u64> = [2u64, 4].into_iter().filter(|w| trip % w == 0).collect();
            if !widths.is_empty() {
                s.vector = Some((a.name.clone(), ch.pick(&widths)));
            }
        }
    }
    // Now and then a loop order: the axes shuffled, sometimes only a prefix.
    if ch.below(3) == 0 {
        let mut names: Vec<String> = c.axes.iter().map(|a| a.name.clone()).collect();
        for i in (1..names.len()).rev() {
            names.swap(i, ch.below(i as u64 + 1) as usize);
        }
        names.truncate(1 + ch.below(names.len() as u64) as usize);
        s.order = names;
    }
    s
}

/// The cache directives need read names, which `tile` fills in from the
/// op; for hand-made schedules the names are the reads' bindings.
pub fn name_reads(m: &mut Module) {
    let f = &mut m.funcs[0];
    let op = f.walk().into_iter().find(|&o| f.ops[o].kind.as_compute().is_some()).expect("a compute op");
    let names: Vec<String> = {
        let c = f.ops[op].kind.as_compute().expect("compute");
        let body = f.ops[op].regions[0];
        (0..c.reads.len() + c.epilogue_reads.len())
            .map(|i| {
                let arg = if i < c.reads.len() { f.regions[body].args[i] } else { f.regions[f.ops[op].regions[1]].args[1 + i - c.reads.len()] };
                f.values[arg].name.clone().unwrap_or_default()
            })
            .collect()
    };
    if let Some(s) = f.ops[op].kind.as_compute_mut().and_then(|c| c.schedule.as_mut()) {
        for d in &mut s.cache {
            d.read_name = names[d.read].clone();
        }
    }
}

/// Draws schedules for the first compute op of `m` until one verifies on
/// `t` (at most `tries`), sets it, and returns whether one was found.
pub fn set_random_valid_schedule(m: &mut Module, t: &Target, ch: &mut Choices, tries: usize) -> bool {
    for _ in 0..tries {
        let s = random_schedule(m, t, ch);
        let f = &mut m.funcs[0];
        let op = f.walk().into_iter().find(|&o| f.ops[o].kind.as_compute().is_some()).expect("a compute op");
        f.ops[op].kind.as_compute_mut().expect("compute").schedule = Some(s);
        name_reads(m);
        if !tilec::verify::verify_module_with(m, Some(t)).has_errors() {
            return true;
        }
    }
    false
}

/// Makes every parameter of `m`'s function but the first a `weight` op:
/// the constants of a network, which `prepack` lays out.
pub fn params_as_weights(m: &mut Module) {
    tilec::ir::weights::params_into_weights(&mut m.funcs[0], 1);
}
