//! The interpreter against independent references: hand-computed cases,
//! and naive loop nests written here from the operators' textbook
//! definitions (not from the tile programs), over random shapes.

use super::*;
use crate::syntax::parse_str;
use crate::verify::verify_module;
use proptest::prelude::*;

fn parse(src: &str) -> Module {
    let (m, sm) = parse_str("test.tile", src).unwrap_or_else(|(d, sm)| panic!("{}", sm.render(&d.0)));
    let d = verify_module(&m);
    assert!(!d.has_errors(), "{}\n{src}", sm.render(&d.0));
    m
}

fn run1(src: &str, inputs: &[Tensor]) -> Tensor {
    let m = parse(src);
    run_function(&m.funcs[0], inputs).unwrap().remove(0)
}

fn t32(shape: &[u64], values: &[f64]) -> Tensor {
    Tensor::from_f64(&TensorType::new(shape.to_vec(), ElemType::F32), values).unwrap()
}

fn assert_close(got: &[f64], want: &[f64], rtol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = rtol * (1.0 + w.abs());
        assert!((g - w).abs() <= tol || (g.is_nan() && w.is_nan()), "{what}: element {i}: got {g}, want {w}");
    }
}

#[test]
fn gemm_by_hand() {
    let src = "func @f(%A: tensor<2x3xf32>, %B: tensor<3x2xf32>) -> tensor<2x2xf32> {
  %C = compute (i: 2, j: 2) reduce sum (k: 3) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<2x2xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}";
    let a = t32(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let b = t32(&[3, 2], &[7., 8., 9., 10., 11., 12.]);
    assert_eq!(run1(src, &[a, b]).to_f64_vec(), vec![58., 64., 139., 154.]);
}

#[test]
fn maxpool_pads_with_minus_infinity() {
    let src = "func @f(%x: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
  %y = compute (n: 1, c: 1, h: 2, w: 2) reduce max (r: 3, s: 3)
      reads(%v = %x[n, c, h + r - 1, w + s - 1] pad(-inf)) -> tensor<1x1x2x2xf32>[n, c, h, w] {
    yield %v : f32
  }
  return %y
}";
    let x = t32(&[1, 1, 2, 2], &[-5., -6., -7., -8.]);
    // Every 3x3 window covers the whole 2x2 input; the padding never wins.
    assert_eq!(run1(src, &[x]).to_f64_vec(), vec![-5., -5., -5., -5.]);
}

#[test]
fn avgpool_epilogue_scales() {
    let src = "func @f(%x: tensor<1x1x2x4xf32>) -> tensor<1x1x1x2xf32> {
  %y = compute (n: 1, c: 1, h: 1, w: 2) reduce sum (r: 2, s: 2)
      reads(%v = %x[n, c, h * 2 + r, w * 2 + s]) -> tensor<1x1x1x2xf32>[n, c, h, w] {
    yield %v : f32
  } epilogue(%acc) {
    %q = const 0.25 : f32
    %0 = mul %acc, %q : f32
    yield %0 : f32
  }
  return %y
}";
    let x = t32(&[1, 1, 2, 4], &[1., 2., 3., 4., 5., 6., 7., 8.]);
    assert_eq!(run1(src, &[x]).to_f64_vec(), vec![3.5, 5.5]);
}

#[test]
fn int8_products_accumulate_in_int32_and_casts_wrap() {
    let src = "func @f(%A: tensor<1x2xi8>, %B: tensor<2x1xi8>) -> (tensor<1x1xi32>, tensor<1x1xi8>) {
  %C = compute (i: 1, j: 1) reduce sum (k: 2) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<1x1xi32>[i, j] {
    %a32 = cast %a : i8 -> i32
    %b32 = cast %b : i8 -> i32
    %0 = mul %a32, %b32 : i32
    yield %0 : i32
  }
  %D = compute (i: 1, j: 1) reads(%c = %C[i, j]) -> tensor<1x1xi8>[i, j] {
    %0 = cast %c : i32 -> i8
    yield %0 : i8
  }
  return %C, %D
}";
    let a = Tensor::from_i64(&TensorType::new(vec![1, 2], ElemType::I8), &[-128, 127]).unwrap();
    let b = Tensor::from_i64(&TensorType::new(vec![2, 1], ElemType::I8), &[-128, 127]).unwrap();
    let m = parse(src);
    let out = run_function(&m.funcs[0], &[a, b]).unwrap();
    assert_eq!(out[0].get_i64(0), 16384 + 16129);
    assert_eq!(out[1].get_i64(0), (16384 + 16129) as i8 as i64);
}

#[test]
fn u8_times_i8_zero_extends_and_u8_ops_are_unsigned() {
    // A u8 × i8 GEMM (quantized MatMulInteger) against a loop nest here;
    // then u8 arithmetic on the same inputs: wrapping sums, unsigned max
    // and min folds, a u8 pad, float → u8 saturation.
    let src = "func @f(%A: tensor<3x4xu8>, %B: tensor<4x2xi8>, %X: tensor<6xf32>) -> (tensor<3x2xi32>, tensor<3xu8>, tensor<3xu8>, tensor<3xu8>, tensor<4xu8>, tensor<6xu8>) {
  %C = compute (i: 3, j: 2) reduce sum (k: 4) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<3x2xi32>[i, j] {
    %a32 = cast %a : u8 -> i32
    %b32 = cast %b : i8 -> i32
    %0 = mul %a32, %b32 : i32
    yield %0 : i32
  }
  %S = compute (i: 3) reduce sum (k: 4) reads(%a = %A[i, k]) -> tensor<3xu8>[i] {
    yield %a : u8
  }
  %M = compute (i: 3) reduce max (k: 4) reads(%a = %A[i, k]) -> tensor<3xu8>[i] {
    yield %a : u8
  }
  %N = compute (i: 3) reduce min (k: 4) reads(%a = %A[i, k]) -> tensor<3xu8>[i] {
    yield %a : u8
  }
  %P = compute (k: 4) reads(%a = %A[k - 2, k] pad(200)) -> tensor<4xu8>[k] {
    %c = const 100 : u8
    %0 = add %a, %c : u8
    yield %0 : u8
  }
  %Q = compute (i: 6) reads(%x = %X[i]) -> tensor<6xu8>[i] {
    %0 = cast %x : f32 -> u8
    yield %0 : u8
  }
  return %C, %S, %M, %N, %P, %Q
}";
    let a_vals = [0, 127, 128, 255, 1, 2, 3, 4, 200, 100, 50, 255];
    let b_vals = [-128, 127, 127, -128, -1, 1, 5, -5];
    let a = Tensor::from_i64(&TensorType::new(vec![3, 4], ElemType::U8), &a_vals).unwrap();
    let b = Tensor::from_i64(&TensorType::new(vec![4, 2], ElemType::I8), &b_vals).unwrap();
    let x = t32(&[6], &[-1.5, -0.5, 127.9, 128.5, 255.9, 1e9]);
    let m = parse(src);
    let out = run_function(&m.funcs[0], &[a, b, x]).unwrap();
    let want_c: Vec<f64> = (0..3)
        .flat_map(|i| (0..2).map(move |j| (0..4).map(|k| a_vals[i * 4 + k] * b_vals[k * 2 + j]).sum::<i64>() as f64))
        .collect();
    assert_eq!(out[0].to_f64_vec(), want_c);
    // Row 0: 0 + 127 + 128 + 255 = 510 wraps to 254; row 2: 605 wraps to 93.
    assert_eq!(out[1].to_f64_vec(), vec![254.0, 10.0, 93.0]);
    assert_eq!(out[2].to_f64_vec(), vec![255.0, 4.0, 255.0]);
    assert_eq!(out[3].to_f64_vec(), vec![0.0, 1.0, 50.0]);
    // A[k - 2, k]: k = 0, 1 padded (200 + 100 wraps to 44); A[0, 2] = 128, A[1, 3] = 4.
    assert_eq!(out[4].to_f64_vec(), vec![44.0, 44.0, 228.0, 104.0]);
    assert_eq!(out[5].to_f64_vec(), vec![0.0, 0.0, 127.0, 128.0, 255.0, 255.0]);
}

#[test]
fn f16_sums_round_at_every_step() {
    // 2048 + 1 + 1 in f16: each addition rounds back to 2048.
    let src = "func @f(%x: tensor<3xf16>) -> tensor<f16> {
  %y = compute () reduce sum (k: 3) reads(%v = %x[k]) -> tensor<f16>[] {
    yield %v : f16
  }
  return %y
}";
    let x = Tensor::from_f64(&TensorType::new(vec![3], ElemType::F16), &[2048., 1., 1.]).unwrap();
    assert_eq!(run1(src, &[x]).to_f64_vec(), vec![2048.]);
}

#[test]
fn index_op_and_exact_division() {
    // y[i] = x[i div 2] where i is even, else -1; plus i as a float.
    let src = "func @f(%x: tensor<3xf32>) -> tensor<6xf32> {
  %y = compute (i: 6) reads(%v = %x[i div 2] pad(-1.0)) -> tensor<6xf32>[i] {
    %p = index i : f32
    %0 = add %v, %p : f32
    yield %0 : f32
  }
  return %y
}";
    let x = t32(&[3], &[10., 20., 30.]);
    assert_eq!(run1(src, &[x]).to_f64_vec(), vec![10., 0., 22., 2., 34., 4.]);
}

#[test]
fn multi_op_softmax_matches_a_direct_computation() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/ir-spec/examples/softmax.tile")).unwrap();
    let x = Tensor::random(&TensorType::new(vec![8, 128], ElemType::F32), 3);
    let got = run1(&src, std::slice::from_ref(&x)).to_f64_vec();
    let xs = x.to_f64_vec();
    for row in 0..8 {
        let r = &xs[row * 128..row * 128 + 128];
        let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
        let want: Vec<f64> = r.iter().map(|v| (v - m).exp() / s).collect();
        assert_close(&got[row * 128..row * 128 + 128], &want, 1e-5, "softmax");
    }
}

#[test]
fn wrong_inputs_are_errors() {
    let m = parse(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/ir-spec/examples/gemv.tile")).unwrap());
    let f = &m.funcs[0];
    assert!(run_function(f, &[]).unwrap_err().0.contains("takes 2 inputs"));
    let bad = [t32(&[2], &[1., 2.]), t32(&[128], &[0.; 128])];
    assert!(run_function(f, &bad).unwrap_err().0.contains("has type tensor<2xf32>"));
}

// ---------------------------------------------------------------------------
// Naive references, written from the operator definitions.

#[derive(Clone, Debug)]
struct Conv {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    f: usize,
    r: usize,
    s: usize,
    stride: usize,
    pad: usize,
    dil: usize,
    groups: usize,
}

impl Conv {
    fn out_hw(&self) -> (usize, usize) {
        let eff_r = self.dil * (self.r - 1) + 1;
        let eff_s = self.dil * (self.s - 1) + 1;
        ((self.h + 2 * self.pad - eff_r) / self.stride + 1, (self.w + 2 * self.pad - eff_s) / self.stride + 1)
    }

    /// The tile program, written with the mixed-radix group split.
    fn tile(&self) -> String {
        let (ho, wo) = self.out_hw();
        let (cg, fg, g) = (self.c / self.groups, self.f / self.groups, self.groups);
        format!(
            "func @conv(%x: tensor<{n}x{c}x{h}x{w}xf32>, %k: tensor<{f}x{cg}x{r}x{s}xf32>) -> tensor<{n}x{f}x{ho}x{wo}xf32> {{
  %y = compute (n: {n}, g: {g}, fg: {fg}, oh: {ho}, ow: {wo}) reduce sum (cg: {cg}, r: {r}, s: {s})
      reads(%xv = %x[n, g * {cg} + cg, oh * {st} + r * {d} - {p}, ow * {st} + s * {d} - {p}] pad(0.0), %kv = %k[g * {fg} + fg, cg, r, s])
      -> tensor<{n}x{f}x{ho}x{wo}xf32>[n, g * {fg} + fg, oh, ow] {{
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }}
  return %y
}}",
            n = self.n, c = self.c, h = self.h, w = self.w, f = self.f, r = self.r, s = self.s, st = self.stride, d = self.dil, p = self.pad
        )
    }

    fn reference(&self, x: &[f64], k: &[f64]) -> Vec<f64> {
        let (ho, wo) = self.out_hw();
        let (cg, fg) = (self.c / self.groups, self.f / self.groups);
        let mut y = vec![0.0; self.n * self.f * ho * wo];
        for n in 0..self.n {
            for f in 0..self.f {
                let g = f / fg;
                for oh in 0..ho {
                    for ow in 0..wo {
                        let mut acc = 0.0f32;
                        for ci in 0..cg {
                            let c = g * cg + ci;
                            for r in 0..self.r {
                                for s in 0..self.s {
                                    let ih = (oh * self.stride + r * self.dil) as i64 - self.pad as i64;
                                    let iw = (ow * self.stride + s * self.dil) as i64 - self.pad as i64;
                                    if ih < 0 || iw < 0 || ih >= self.h as i64 || iw >= self.w as i64 {
                                        continue;
                                    }
                                    let xv = x[((n * self.c + c) * self.h + ih as usize) * self.w + iw as usize] as f32;
                                    let kv = k[((f * cg + ci) * self.r + r) * self.s + s] as f32;
                                    acc += xv * kv;
                                }
                            }
                        }
                        y[((n * self.f + f) * ho + oh) * wo + ow] = acc as f64;
                    }
                }
            }
        }
        y
    }
}

fn conv_strategy() -> impl Strategy<Value = Conv> {
    (1usize..3, 1usize..4, 1usize..4, 3usize..9, 3usize..9, 1usize..4, 1usize..4, 1usize..3, 0usize..3, 1usize..3)
        .prop_filter_map("kernel must fit", |(n, cg, fg, h, w, r, s, stride, pad, dil)| {
            let groups = 1 + (cg + fg) % 3;
            let c = Conv { n, c: cg * groups, h, w, f: fg * groups, r, s, stride, pad, dil, groups };
            let eff_r = dil * (r - 1) + 1;
            let eff_s = dil * (s - 1) + 1;
            (h + 2 * pad >= eff_r && w + 2 * pad >= eff_s).then_some(c)
        })
}

fn pooling_reference(x: &[f64], n: usize, c: usize, h: usize, w: usize, k: usize, stride: usize, pad: usize, max: bool) -> Vec<f64> {
    let ho = (h + 2 * pad - k) / stride + 1;
    let wo = (w + 2 * pad - k) / stride + 1;
    let mut y = Vec::new();
    for b in 0..n * c {
        for oh in 0..ho {
            for ow in 0..wo {
                let mut acc = if max { f32::NEG_INFINITY } else { 0.0f32 };
                for r in 0..k {
                    for s in 0..k {
                        let ih = (oh * stride + r) as i64 - pad as i64;
                        let iw = (ow * stride + s) as i64 - pad as i64;
                        if ih < 0 || iw < 0 || ih >= h as i64 || iw >= w as i64 {
                            continue;
                        }
                        let v = x[(b * h + ih as usize) * w + iw as usize] as f32;
                        acc = if max { acc.max(v) } else { acc + v };
                    }
                }
                y.push(if max { acc as f64 } else { (acc * (1.0 / (k * k) as f32)) as f64 });
            }
        }
    }
    y
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn conv2d_matches_naive_reference(conv in conv_strategy(), seed in 0u64..1000) {
        let m = parse(&conv.tile());
        let f = &m.funcs[0];
        let x = Tensor::random(f.value_type(f.params[0]).as_tensor().unwrap(), seed);
        let k = Tensor::random(f.value_type(f.params[1]).as_tensor().unwrap(), seed + 1);
        let got = run_function(f, &[x.clone(), k.clone()]).unwrap().remove(0).to_f64_vec();
        let want = conv.reference(&x.to_f64_vec(), &k.to_f64_vec());
        assert_close(&got, &want, 1e-5, &format!("{conv:?}"));
    }

    #[test]
    fn batched_gemm_matches_naive_reference(b in 1usize..4, m in 1usize..20, n in 1usize..70, k in 1usize..20, seed in 0u64..1000, trans_b in any::<bool>()) {
        let b_shape = if trans_b { format!("{b}x{n}x{k}") } else { format!("{b}x{k}x{n}") };
        let b_index = if trans_b { "[bb, j, kk]" } else { "[bb, kk, j]" };
        let src = format!("func @bmm(%A: tensor<{b}x{m}x{k}xf32>, %B: tensor<{b_shape}xf32>) -> tensor<{b}x{m}x{n}xf32> {{
  %C = compute (bb: {b}, i: {m}, j: {n}) reduce sum (kk: {k}) reads(%a = %A[bb, i, kk], %v = %B{b_index}) -> tensor<{b}x{m}x{n}xf32>[bb, i, j] {{
    %0 = mul %a, %v : f32
    yield %0 : f32
  }}
  return %C
}}");
        let module = parse(&src);
        let f = &module.funcs[0];
        let a = Tensor::random(f.value_type(f.params[0]).as_tensor().unwrap(), seed);
        let bt = Tensor::random(f.value_type(f.params[1]).as_tensor().unwrap(), seed + 7);
        let got = run_function(f, &[a.clone(), bt.clone()]).unwrap().remove(0).to_f64_vec();
        let (av, bv) = (a.to_f64_vec(), bt.to_f64_vec());
        let mut want = vec![0.0; b * m * n];
        for bb in 0..b { for i in 0..m { for j in 0..n {
            let mut acc = 0.0f32;
            for kk in 0..k {
                let bval = if trans_b { bv[(bb * n + j) * k + kk] } else { bv[(bb * k + kk) * n + j] };
                acc += av[(bb * m + i) * k + kk] as f32 * bval as f32;
            }
            want[(bb * m + i) * n + j] = acc as f64;
        }}}
        assert_close(&got, &want, 1e-5, "bmm");
    }

    #[test]
    fn gemv_matches_naive_reference(m in 1usize..100, n in 1usize..100, seed in 0u64..1000) {
        let src = format!("func @gemv(%A: tensor<{m}x{n}xf32>, %x: tensor<{n}xf32>) -> tensor<{m}xf32> {{
  %y = compute (i: {m}) reduce sum (j: {n}) reads(%a = %A[i, j], %v = %x[j]) -> tensor<{m}xf32>[i] {{
    %0 = mul %a, %v : f32
    yield %0 : f32
  }}
  return %y
}}");
        let module = parse(&src);
        let f = &module.funcs[0];
        let a = Tensor::random(f.value_type(f.params[0]).as_tensor().unwrap(), seed);
        let x = Tensor::random(f.value_type(f.params[1]).as_tensor().unwrap(), seed + 3);
        let got = run_function(f, &[a.clone(), x.clone()]).unwrap().remove(0).to_f64_vec();
        let (av, xv) = (a.to_f64_vec(), x.to_f64_vec());
        let want: Vec<f64> = (0..m).map(|i| (0..n).fold(0.0f32, |acc, j| acc + av[i * n + j] as f32 * xv[j] as f32) as f64).collect();
        assert_close(&got, &want, 1e-5, "gemv");
    }

    #[test]
    fn pooling_matches_naive_reference(n in 1usize..3, c in 1usize..4, h in 2usize..12, w in 2usize..12, k in 1usize..4, stride in 1usize..3, pad in 0usize..2, max in any::<bool>(), seed in 0u64..1000) {
        prop_assume!(h + 2 * pad >= k && w + 2 * pad >= k && pad < k);
        let (ho, wo) = ((h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1);
        let (comb, padv, epi) = if max {
            ("max", "-inf", String::new())
        } else {
            ("sum", "0.0", format!(" epilogue(%acc) {{\n    %q = const {} : f32\n    %0 = mul %acc, %q : f32\n    yield %0 : f32\n  }}", 1.0f32 / (k * k) as f32))
        };
        let src = format!("func @pool(%x: tensor<{n}x{c}x{h}x{w}xf32>) -> tensor<{n}x{c}x{ho}x{wo}xf32> {{
  %y = compute (n: {n}, c: {c}, oh: {ho}, ow: {wo}) reduce {comb} (r: {k}, s: {k})
      reads(%v = %x[n, c, oh * {stride} + r - {pad}, ow * {stride} + s - {pad}] pad({padv})) -> tensor<{n}x{c}x{ho}x{wo}xf32>[n, c, oh, ow] {{
    yield %v : f32
  }}{epi}
  return %y
}}");
        let module = parse(&src);
        let f = &module.funcs[0];
        let x = Tensor::random(f.value_type(f.params[0]).as_tensor().unwrap(), seed);
        let got = run_function(f, std::slice::from_ref(&x)).unwrap().remove(0).to_f64_vec();
        let want = pooling_reference(&x.to_f64_vec(), n, c, h, w, k, stride, pad, max);
        assert_close(&got, &want, 1e-5, "pooling");
    }

    /// Transposed convolution: the tile program gathers with exact
    /// division; the reference scatters each input pixel, as the operator
    /// is usually defined.
    #[test]
    fn transposed_conv1d_matches_scatter_reference(c in 1usize..4, f in 1usize..4, l in 1usize..10, k in 1usize..5, stride in 1usize..4, pad in 0usize..3, seed in 0u64..1000) {
        prop_assume!((l - 1) * stride + k > 2 * pad);
        let lo = (l - 1) * stride + k - 2 * pad;
        let src = format!("func @tconv(%x: tensor<1x{c}x{l}xf32>, %w: tensor<{c}x{f}x{k}xf32>) -> tensor<1x{f}x{lo}xf32> {{
  %y = compute (n: 1, ff: {f}, o: {lo}) reduce sum (cc: {c}, r: {k})
      reads(%xv = %x[n, cc, (o - r + {pad}) div {stride}] pad(0.0), %wv = %w[cc, ff, r]) -> tensor<1x{f}x{lo}xf32>[n, ff, o] {{
    %0 = mul %xv, %wv : f32
    yield %0 : f32
  }}
  return %y
}}");
        let module = parse(&src);
        let func = &module.funcs[0];
        let x = Tensor::random(func.value_type(func.params[0]).as_tensor().unwrap(), seed);
        let w = Tensor::random(func.value_type(func.params[1]).as_tensor().unwrap(), seed + 5);
        let got = run_function(func, &[x.clone(), w.clone()]).unwrap().remove(0).to_f64_vec();
        let (xv, wv) = (x.to_f64_vec(), w.to_f64_vec());
        let mut want = vec![0.0f64; f * lo];
        for cc in 0..c { for i in 0..l { for ff in 0..f { for r in 0..k {
            let o = (i * stride + r) as i64 - pad as i64;
            if o >= 0 && (o as usize) < lo {
                want[ff * lo + o as usize] += xv[cc * l + i] * wv[(cc * f + ff) * k + r];
            }
        }}}}
        assert_close(&got, &want, 1e-5, "transposed conv1d");
    }
}

/// Every workload parses and verifies; every `_small` copy runs in the
/// interpreter and gives finite results, with a pair for every workload.
#[test]
fn workloads_parse_verify_and_small_copies_run() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benchmarks/workloads");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "tile")).collect();
    files.sort();
    assert!(files.len() >= 100, "expected the workload suite in {}", dir.display());
    let mut small = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let m = parse(&text);
        let stem = path.file_stem().unwrap().to_str().unwrap();
        if let Some(big) = stem.strip_suffix("_small") {
            assert!(dir.join(format!("{big}.tile")).exists(), "{stem} has no full-size workload");
            let f = &m.funcs[0];
            let inputs: Vec<Tensor> = f.params.iter().enumerate().map(|(i, &p)| Tensor::random(f.value_type(p).as_tensor().unwrap(), Tensor::input_seed(0, i))).collect();
            let out = run_function(f, &inputs).unwrap_or_else(|e| panic!("{stem}: {e}"));
            assert!(out[0].to_f64_vec().iter().all(|x| x.is_finite()), "{stem}: non-finite result");
            small += 1;
        } else {
            assert!(dir.join(format!("{stem}_small.tile")).exists(), "{stem} has no _small copy");
        }
    }
    assert_eq!(small * 2, files.len());
}

// ---------------------------------------------------------------------------
// Memory limits: sizes are checked before anything is allocated.

const HUGE_LOCAL: &str = r#"
func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = alloc : buffer<4xf32, global>
  kernel "k" schedule "host" {} {
    for %i = 0 to 4 {
      %acc = alloc : buffer<4000000x8000000xf32, local>
      %v = load %x[%i] : f32
      store %v, %y[%i]
    }
  }
  return %y
}
"#;

#[test]
fn a_buffer_over_the_limit_is_an_error_naming_it() {
    let m = parse(HUGE_LOCAL);
    let err = run_function(&m.funcs[0], &[t32(&[4], &[1., 2., 3., 4.])]).unwrap_err();
    let mem = err.memory().expect("a memory error");
    assert_eq!((mem.bytes, mem.limit, mem.refused), (Some(128_000_000_000_000), 16 << 30, false));
    // The input (16 bytes), %y and its written-element flags (16 + 4).
    assert_eq!(mem.in_use, 36);
    assert!(err.0.starts_with("buffer %acc (buffer<4000000x8000000xf32, local>) needs 116.4 TiB"), "{err}");
}

#[test]
fn a_compute_result_over_the_limit_is_an_error_naming_it() {
    let m = parse(
        "func @f(%x: tensor<100000xf32>) -> tensor<100000x100000xf32> {
  %y = compute (i: 100000, j: 100000) reads(%a = %x[i]) -> tensor<100000x100000xf32>[i, j] {
    yield %a : f32
  }
  return %y
}",
    );
    let x = Tensor::zeros(&TensorType::new(vec![100000], ElemType::F32));
    let err = run_function(&m.funcs[0], &[x]).unwrap_err();
    assert_eq!(err.memory().and_then(|m| m.bytes), Some(40_000_000_000), "{err}");
    assert!(err.0.starts_with("tensor %y (tensor<100000x100000xf32>)"), "{err}");
}

const COPY_1M: &str = "func @f(%x: tensor<262144xf32>) -> tensor<262144xf32> {
  %y = compute (i: 262144) reads(%a = %x[i]) -> tensor<262144xf32>[i] {
    yield %a : f32
  }
  return %y
}";

#[test]
fn the_limit_is_on_what_is_live_at_once() {
    // The input (1 MiB), the result (1 MiB) and 16 bytes of scratch per
    // point (4 MiB) while the op runs: 6 MiB at the peak.
    let m = parse(COPY_1M);
    let x = Tensor::random(&TensorType::new(vec![262144], ElemType::F32), 1);
    let inputs = std::slice::from_ref(&x);
    let fits = run_function_with(&m.funcs[0], inputs, &Limits::at_most(6 << 20)).unwrap();
    assert_eq!(fits[0], x);
    let err = run_function_with(&m.funcs[0], inputs, &Limits::at_most((6 << 20) - 1)).unwrap_err();
    assert!(err.0.starts_with("the interpreter's scratch for computing %y"), "{err}");
    // What the caller holds counts too.
    let held = Limits { max_bytes: 6 << 20, held_bytes: 1 };
    assert_eq!(run_function_with(&m.funcs[0], inputs, &held).unwrap_err().memory().map(|m| m.in_use), Some((2 << 20) + 1));
}

#[test]
fn buffers_of_a_loop_body_are_freed_after_each_iteration() {
    // A thousand 4 KiB buffers (and their 1 KiB of flags), one at a time.
    let m = parse(
        r#"func @f(%x: tensor<1000xf32>) -> tensor<1000xf32> {
  %y = alloc : buffer<1000xf32, global>
  kernel "k" schedule "host" {} {
    for %i = 0 to 1000 {
      %tmp = alloc : buffer<1024xf32, local>
      %v = load %x[%i] : f32
      store %v, %tmp[0]
      %w = load %tmp[0] : f32
      store %w, %y[%i]
    }
  }
  return %y
}"#,
    );
    let x = Tensor::random(&TensorType::new(vec![1000], ElemType::F32), 2);
    let out = run_function_with(&m.funcs[0], std::slice::from_ref(&x), &Limits::at_most(16 << 10)).unwrap();
    assert_eq!(out[0], x);
}

#[test]
fn a_returned_input_is_copied_and_counted() {
    let m = parse("func @f(%x: tensor<262144xf32>) -> tensor<262144xf32> {\n  return %x\n}");
    let x = Tensor::random(&TensorType::new(vec![262144], ElemType::F32), 3);
    let err = run_function_with(&m.funcs[0], std::slice::from_ref(&x), &Limits::at_most(3 << 19)).unwrap_err();
    assert!(err.0.starts_with("result 0 (%x, tensor<262144xf32>) needs 1 MiB"), "{err}");
    assert_eq!(run_function_with(&m.funcs[0], std::slice::from_ref(&x), &Limits::at_most(2 << 20)).unwrap()[0], x);
}

/// `split [0, 4] permute [0, 2, 1]` packs an 8x3 box as VNNI's
/// `[k/4][j][4]`: `y[a][b][c] = x[4a + c][b]`.
#[test]
fn split_copy_packs_four_rows_per_lane() {
    let src = "func @f(%x: tensor<8x3xf32>) -> tensor<2x3x4xf32> {
  %y = alloc : buffer<2x3x4xf32, global>
  copy %x[0, 0] -> %y[0, 0, 0] box [8, 3] split [0, 4] permute [0, 2, 1]
  return %y
}";
    let x: Vec<f64> = (0..24).map(f64::from).collect();
    let got = run1(src, &[t32(&[8, 3], &x)]).to_f64_vec();
    let mut want = Vec::new();
    for a in 0..2 {
        for b in 0..3 {
            for c in 0..4 {
                want.push(x[(4 * a + c) * 3 + b]);
            }
        }
    }
    assert_eq!(got, want);
}

/// With a stride, offsets and padding: the split dimension's box point is
/// `f·x_d + x_{d+1}`, stepped by the stride from the source origin.
#[test]
fn split_copy_with_stride_offsets_and_pad() {
    let src = "func @f(%x: tensor<5x6xi32>) -> tensor<3x2x2xi32> {
  %y = alloc : buffer<3x2x2xi32, global>
  copy %x[1, 3] -> %y[0, 0, 0] box [2, 6] stride [2, 1] split [1, 2] permute [1, 0, 2] pad(-1)
  return %y
}";
    let ty = TensorType::new(vec![5, 6], ElemType::I32);
    let x: Vec<i64> = (0..30).collect();
    let got = run1(src, &[Tensor::from_i64(&ty, &x).unwrap()]);
    // Expanded box (2, 3, 2): point (a, b, c) reads x[1 + 2a, 3 + 2b + c]
    // and lands at y[b, a, c].
    let mut want = vec![0i64; 12];
    for a in 0..2 {
        for b in 0..3 {
            for c in 0..2 {
                let (r, col) = (1 + 2 * a, 3 + 2 * b + c);
                want[(b * 2 + a) * 2 + c] = if col < 6 { x[r * 6 + col] } else { -1 };
            }
        }
    }
    assert_eq!((0..12).map(|i| got.get_i64(i)).collect::<Vec<_>>(), want);
}
