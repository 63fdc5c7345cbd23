//! Mapping candidates: the ways a compute op's iteration axes can be laid
//! onto an intrinsic's `m × n × k` tile (AMOS's mapping abstraction, which
//! GTA builds on: `../shared/seeds/001_ba74524f88cc158d.txt`, §2.2 and
//! Table 2).
//!
//! An intrinsic computes `acc[m, n] += Σ_k a[m, k] · b[k, n]`
//! ([`crate::target::Intrinsic`]). An op it can compute is a **contraction**:
//! a `sum` over the product of two reads (each possibly `cast` to the
//! accumulator's type first), `out[s] = Σ_r x[..] · y[..]`. A **mapping**
//! chooses which read plays `a` and which `b`, and which op axes fuse onto
//! each intrinsic axis, outermost first. An op axis may go onto
//!
//! - `m` if it is spatial and indexes `a` and the output, not `b`;
//! - `n` if it is spatial and indexes `b` and the output, not `a`;
//! - `k` if it is a reduction axis indexing both `a` and `b`.
//!
//! Those are the conditions under which the fused loops compute exactly
//! the intrinsic's formula: each `a` element is shared along `n`, each `b`
//! element along `m`, and each output element sums over `k`. Axes left
//! out stay loops around the intrinsic (a batch axis, a reduction axis
//! only one read uses, an axis of extent 1). Every intrinsic axis longer
//! than 1 takes at least one op axis; an axis of extent 1 (the `n` of a
//! vector FMA or dot product, whose `b` is broadcast) takes none.
//!
//! A **basic** mapping puts at most one op axis on each intrinsic axis; a
//! **fused** (AMOS's "complex") one puts several, such as a convolution's
//! `oh · ow` onto `m`. A fused extent that the intrinsic's size does not
//! divide is padded ([`Mapping::padding`]).
//!
//! The element types must be the intrinsic's exactly: the reads' types
//! for `a` and `b` (before any cast; either way round for a vector
//! intrinsic, whose two sources are both full registers), the body's yield
//! for `acc`. A tf32
//! intrinsic is never a candidate: it rounds f32 operands, which changes
//! the result.

use std::fmt::Write as _;
use crate::ir::{AxisId, AxisKind, BinaryOp, Compute, ElemType, Function, Op, OpKind, ValueDef};
use super::{ComputeInfo, Intrinsic};

/// An op the intrinsics may compute: `out = Σ lhs · rhs`.
#[derive(Clone, Debug, PartialEq)]
pub struct Contraction {
    /// The body reads (indices into [`Compute::reads`]) multiplied.
    pub lhs: usize,
    pub rhs: usize,
    /// Their tensors' element types.
    pub lhs_elem: ElemType,
    pub rhs_elem: ElemType,
    /// The accumulator's type: what the body yields.
    pub acc: ElemType,
}

/// Compute op `op` of `f` as a contraction, or why it is not one.
pub fn contraction(f: &Function, op: Op) -> Result<Contraction, String> {
    let data = f.op(op);
    let OpKind::Compute(c) = &data.kind else { return Err("not a compute op".into()) };
    let info = ComputeInfo::of(f, op).ok_or("not a well-formed compute op")?;
    if c.combiner != Some(crate::ir::Combiner::Sum) {
        return Err("it is not a `reduce sum`".into());
    }
    let body = f.region(*data.regions.first().ok_or("no body")?);
    let not_product = || "its body does not yield the product of two reads".to_string();
    let yield_op = *body.ops.last().ok_or_else(not_product)?;
    let &yielded = f.op(yield_op).operands.first().ok_or_else(not_product)?;
    let ValueDef::Result(mul, _) = f.values[yielded].def else { return Err(not_product()) };
    if f.op(mul).kind != OpKind::Binary(BinaryOp::Mul) {
        return Err(not_product());
    }
    // A factor is a body argument, or a cast of one.
    let read_of = |v: crate::ir::Value| -> Option<usize> {
        let v = match f.values[v].def {
            ValueDef::Result(cast, _) if f.op(cast).kind == OpKind::Cast => *f.op(cast).operands.first()?,
            _ => v,
        };
        match f.values[v].def {
            ValueDef::RegionArg(r, i) if r == data.regions[0] && i < c.reads.len() => Some(i),
            _ => None,
        }
    };
    let factors = &f.op(mul).operands;
    let (Some(lhs), Some(rhs)) = (factors.first().and_then(|&v| read_of(v)), factors.get(1).and_then(|&v| read_of(v))) else { return Err(not_product()) };
    if lhs == rhs {
        return Err("its body squares one read".into());
    }
    let acc = f.value_type(yielded).as_scalar().ok_or_else(not_product)?;
    Ok(Contraction { lhs, rhs, lhs_elem: info.reads[lhs].tensor.elem, rhs_elem: info.reads[rhs].tensor.elem, acc })
}

/// One intrinsic axis.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum IntrinsicAxis {
    M,
    N,
    K,
}

impl IntrinsicAxis {
    pub const ALL: [IntrinsicAxis; 3] = [IntrinsicAxis::M, IntrinsicAxis::N, IntrinsicAxis::K];

    pub fn name(self) -> &'static str {
        match self {
            IntrinsicAxis::M => "m",
            IntrinsicAxis::N => "n",
            IntrinsicAxis::K => "k",
        }
    }

    /// The intrinsic's size along this axis.
    pub fn size(self, x: &Intrinsic) -> u32 {
        match self {
            IntrinsicAxis::M => x.m,
            IntrinsicAxis::N => x.n,
            IntrinsicAxis::K => x.k,
        }
    }
}

/// One way to compute a contraction with an intrinsic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// The read that plays the intrinsic's `a` (in fragments, or the
    /// vector lanes), and `b`'s (the broadcast one of a vector intrinsic).
    pub a: usize,
    pub b: usize,
    /// The op axes fused onto `m`, `n` and `k`, outermost first.
    pub m: Vec<AxisId>,
    pub n: Vec<AxisId>,
    pub k: Vec<AxisId>,
}

impl Mapping {
    pub fn axes(&self, x: IntrinsicAxis) -> &[AxisId] {
        match x {
            IntrinsicAxis::M => &self.m,
            IntrinsicAxis::N => &self.n,
            IntrinsicAxis::K => &self.k,
        }
    }

    /// At most one op axis per intrinsic axis.
    pub fn is_basic(&self) -> bool {
        self.m.len() <= 1 && self.n.len() <= 1 && self.k.len() <= 1
    }

    /// The extent of the op axes fused onto `x` (1 for none).
    pub fn fused_extent(&self, c: &Compute, x: IntrinsicAxis) -> u64 {
        self.axes(x).iter().map(|&a| c.axis(a).extent).product()
    }

    /// The share of the intrinsic's work spent on padding: the padded
    /// `m × n × k` points over the op's, minus one (0 when every fused
    /// extent is a multiple of the intrinsic's size).
    pub fn padding(&self, c: &Compute, x: &Intrinsic) -> f64 {
        let (mut real, mut padded) = (1.0, 1.0);
        for axis in IntrinsicAxis::ALL {
            let (e, size) = (self.fused_extent(c, axis), u64::from(axis.size(x)));
            real *= e as f64;
            padded *= (e.div_ceil(size) * size) as f64;
        }
        padded / real - 1.0
    }

    /// `a=%x b=%w m=[oh, ow] n=[f] k=[c]`.
    pub fn describe(&self, c: &Compute, info: &ComputeInfo) -> String {
        let axes = |v: &[AxisId]| v.iter().map(|&a| c.axis(a).name.as_str()).collect::<Vec<_>>().join(", ");
        format!("a={} b={} m=[{}] n=[{}] k=[{}]", info.reads[self.a].name, info.reads[self.b].name, axes(&self.m), axes(&self.n), axes(&self.k))
    }
}

/// How an intrinsic axis of `size` splits over the loops of the op axes
/// mapped onto it, of `extents` (outermost first): each inner one takes
/// what of the size its extent divides (their greatest common divisor),
/// innermost first, and the outermost the rest. The parts, outermost first
/// (their product is `size`), whether or not the outermost extent holds its
/// part ([`fused_parts`] checks that; a diagnostic names the part).
pub fn fused_split(extents: &[u64], size: u64) -> Vec<u64> {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    let mut parts = vec![0; extents.len()];
    let mut remaining = size;
    for j in (1..extents.len()).rev() {
        parts[j] = gcd(extents[j], remaining);
        remaining /= parts[j].max(1);
    }
    if let Some(outermost) = parts.first_mut() {
        *outermost = remaining;
    }
    parts
}

/// [`fused_split`] where the outermost extent is a multiple of its part,
/// else `None`. One extent is a basic mapping: its part is the whole size.
/// (The rule `tensorize` rewrites a fused mapping by, the verifier checks a
/// schedule's tiles by, and the search sizes tiles by.)
pub fn fused_parts(extents: &[u64], size: u64) -> Option<Vec<u64>> {
    let parts = fused_split(extents, size);
    extents.first().zip(parts.first()).is_none_or(|(&e, &p)| e.is_multiple_of(p)).then_some(parts)
}

/// Why no mapping of a contraction onto `x` exists, or every mapping, in
/// a fixed order: the contraction's `lhs` as `a` first (then swapped where
/// the types allow), then by the axes on `m`, `n` and `k`, fewer first.
pub fn candidates(c: &Compute, con: &Contraction, x: &Intrinsic) -> Result<Vec<Mapping>, String> {
    if x.a == "tf32" || x.b == "tf32" {
        return Err("tf32 rounds f32 operands: not exact".into());
    }
    if x.acc != con.acc.name() {
        return Err(format!("it accumulates {}, the op {}", x.acc, con.acc));
    }
    // The reads' types must be the operands' types. A vector intrinsic's
    // sources are two registers multiplied lane by lane: which one was
    // broadcast into its register does not matter, so its operand types
    // may also come the other way round (`vpdpbusd` with the s8 factor in
    // the lanes and the u8 one broadcast).
    let fits = |lanes: ElemType, other: ElemType| {
        let (l, o) = (lanes.name(), other.name());
        (l, o) == (x.a.as_str(), x.b.as_str()) || x.is_vector() && (l, o) == (x.b.as_str(), x.a.as_str())
    };
    let mut roles = Vec::new();
    if fits(con.lhs_elem, con.rhs_elem) {
        roles.push((con.lhs, con.rhs));
    }
    if fits(con.rhs_elem, con.lhs_elem) {
        roles.push((con.rhs, con.lhs));
    }
    if roles.is_empty() {
        return Err(format!("it multiplies {} by {}, the op {} by {}", x.a, x.b, con.lhs_elem, con.rhs_elem));
    }
    let mut out = Vec::new();
    let mut unfilled = None;
    for (a, b) in roles {
        let uses = |read: usize, axis: AxisId| c.reads[read].indices.iter().any(|e| e.uses(axis));
        let in_output = |axis: AxisId| c.output.iter().any(|e| e.uses(axis));
        let eligible = |want: IntrinsicAxis| -> Vec<AxisId> {
            c.axis_ids()
                .filter(|&ax| c.axis(ax).extent > 1)
                .filter(|&ax| match want {
                    IntrinsicAxis::M => c.axis(ax).kind == AxisKind::Spatial && uses(a, ax) && in_output(ax) && !uses(b, ax),
                    IntrinsicAxis::N => c.axis(ax).kind == AxisKind::Spatial && uses(b, ax) && in_output(ax) && !uses(a, ax),
                    IntrinsicAxis::K => c.axis(ax).kind == AxisKind::Reduction && uses(a, ax) && uses(b, ax),
                })
                .collect()
        };
        let mut choices: Vec<Vec<Vec<AxisId>>> = Vec::new();
        for axis in IntrinsicAxis::ALL {
            if axis.size(x) == 1 {
                choices.push(vec![Vec::new()]);
                continue;
            }
            let subsets = nonempty_subsets(&eligible(axis));
            if subsets.is_empty() {
                unfilled.get_or_insert(axis);
            }
            choices.push(subsets);
        }
        for m in &choices[0] {
            for n in &choices[1] {
                for k in &choices[2] {
                    out.push(Mapping { a, b, m: m.clone(), n: n.clone(), k: k.clone() });
                }
            }
        }
    }
    if out.is_empty() {
        // Every role left an intrinsic axis without op axes.
        let axis = unfilled.unwrap_or(IntrinsicAxis::M);
        let what = match axis {
            IntrinsicAxis::M => "spatial axis (longer than 1) indexes `a` and the output but not `b`",
            IntrinsicAxis::N => "spatial axis (longer than 1) indexes `b` and the output but not `a`",
            IntrinsicAxis::K => "reduction axis (longer than 1) indexes both `a` and `b`",
        };
        return Err(format!("no op axis can go onto its `{}`: no {what}", axis.name()));
    }
    Ok(out)
}

/// Every non-empty subset of `axes`, each in `axes`' order: smaller
/// subsets first, then lexicographically.
fn nonempty_subsets(axes: &[AxisId]) -> Vec<Vec<AxisId>> {
    let mut out: Vec<Vec<AxisId>> = (1u32..1 << axes.len()).map(|bits| axes.iter().enumerate().filter(|(i, _)| bits >> i & 1 == 1).map(|(_, &a)| a).collect()).collect();
    out.sort_by(|x, y| x.len().cmp(&y.len()).then_with(|| x.cmp(y)));
    out
}

/// The mapping candidates of every compute op of `f` on every intrinsic
/// `intrinsics` gives, as the text `tilec --print-mappings` prints.
pub fn report(f: &Function, intrinsics: &[&Intrinsic], target: &str) -> String {
    let mut s = String::new();
    for &op in &f.regions[f.body].ops {
        let Some(c) = f.op(op).kind.as_compute() else { continue };
        let Some(info) = ComputeInfo::of(f, op) else { continue };
        let axes = |kind: AxisKind| c.axes.iter().filter(|a| a.kind == kind).map(|a| format!("{}: {}", a.name, a.extent)).collect::<Vec<_>>().join(", ");
        let label = c.label.as_ref().map_or(String::new(), |l| format!(" \"{l}\""));
        let _ = write!(s, "@{} compute{label} ({})", f.name, axes(AxisKind::Spatial));
        let reduction = axes(AxisKind::Reduction);
        if !reduction.is_empty() {
            let _ = write!(s, " reduce ({reduction})");
        }
        let _ = writeln!(s, " on {target}:");
        let con = match contraction(f, op) {
            Ok(con) => con,
            Err(why) => {
                let _ = writeln!(s, "  no intrinsic applies: {why}");
                continue;
            }
        };
        for x in intrinsics {
            match candidates(c, &con, x) {
                Err(why) => {
                    let _ = writeln!(s, "  {}: not applicable: {why}", x.name);
                }
                Ok(maps) => {
                    let basic = maps.iter().filter(|m| m.is_basic()).count();
                    let _ = writeln!(s, "  {}: {} candidates ({basic} basic, {} fused)", x.name, maps.len(), maps.len() - basic);
                    for (i, m) in maps.iter().enumerate() {
                        let kind = if m.is_basic() { "basic" } else { "fused" };
                        let _ = writeln!(s, "    #{i:<3} {kind}  {:<44} padding {:.1}%", m.describe(c, &info), 100.0 * m.padding(c, x));
                    }
                }
            }
        }
        if intrinsics.is_empty() {
            let _ = writeln!(s, "  the target offers no intrinsic");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Module;

    fn parse(src: &str) -> Module {
        let (m, sm) = crate::syntax::parse_str("test.tile", src).unwrap_or_else(|(d, sm)| panic!("{}", sm.render(&d.0)));
        assert!(!crate::verify::verify_module(&m).has_errors(), "{}", sm.render(&crate::verify::verify_module(&m).0));
        m
    }

    const GEMM_F32: &str = "func @gemm(%A: tensor<64x48xf32>, %B: tensor<48x80xf32>) -> tensor<64x80xf32> {
  %C = compute (i: 64, j: 80) reduce sum (k: 48) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<64x80xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}";

    const CONV_F16: &str = "func @conv(%x: tensor<2x64x58x58xf16>, %k: tensor<32x64x3x3xf16>) -> tensor<2x32x56x56xf32> {
  %y = compute (n: 2, f: 32, oh: 56, ow: 56) reduce sum (c: 64, r: 3, s: 3)
      reads(%xv = %x[n, c, oh + r, ow + s], %kv = %k[f, c, r, s]) -> tensor<2x32x56x56xf32>[n, f, oh, ow] {
    %a = cast %xv : f16 -> f32
    %b = cast %kv : f16 -> f32
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %y
}";

    /// A batched GEMM: `b` indexes both factors and the output.
    const BMM_F16: &str = "func @bmm(%A: tensor<4x32x16xf16>, %B: tensor<4x16x24xf16>) -> tensor<4x32x24xf32> {
  %C = compute (b: 4, i: 32, j: 24) reduce sum (k: 16) reads(%x = %A[b, i, k], %y = %B[b, k, j]) -> tensor<4x32x24xf32>[b, i, j] {
    %0 = cast %x : f16 -> f32
    %1 = cast %y : f16 -> f32
    %2 = mul %1, %0 : f32
    yield %2 : f32
  }
  return %C
}";

    fn first_compute(m: &Module) -> (&Function, Op, &Compute) {
        let f = &m.funcs[0];
        let op = f.regions[f.body].ops.iter().copied().find(|&o| f.op(o).kind.as_compute().is_some()).unwrap();
        (f, op, f.op(op).kind.as_compute().unwrap())
    }

    fn intrinsic(target: &str, name: &str) -> Intrinsic {
        let t = crate::target::builtin(target).unwrap();
        t.intrinsics.iter().find(|x| x.name == name).unwrap().clone()
    }

    fn names(c: &Compute, axes: &[AxisId]) -> Vec<String> {
        axes.iter().map(|&a| c.axis(a).name.clone()).collect()
    }

    #[test]
    fn a_gemm_maps_onto_a_vector_fma_with_either_factor_in_the_lanes() {
        let m = parse(GEMM_F32);
        let (f, op, c) = first_compute(&m);
        let con = contraction(f, op).unwrap();
        assert_eq!((con.lhs, con.rhs, con.acc), (0, 1, ElemType::F32));
        let maps = candidates(c, &con, &intrinsic("x86-avx2", "vfmadd231ps.ymm")).unwrap();
        let shown: Vec<(usize, Vec<String>, usize, usize)> = maps.iter().map(|m| (m.a, names(c, &m.m), m.n.len(), m.k.len())).collect();
        // `n` and `k` are 1 for an FMA: nothing goes onto them.
        assert_eq!(shown, [(0, vec!["i".to_string()], 0, 0), (1, vec!["j".to_string()], 0, 0)]);
        assert!(maps.iter().all(|m| m.is_basic() && m.padding(c, &intrinsic("x86-avx2", "vfmadd231ps.ymm")) == 0.0));
        // An f16 MMA takes f16 factors; an i32 dot product accumulates i32.
        assert_eq!(candidates(c, &con, &intrinsic("sm80", "mma.sync.m16n8k16.f32.f16.f16.f32")).unwrap_err(), "it multiplies f16 by f16, the op f32 by f32");
        assert_eq!(candidates(c, &con, &intrinsic("sm80", "mma.sync.m16n8k32.s32.s8.s8.s32")).unwrap_err(), "it accumulates i32, the op f32");
        assert_eq!(candidates(c, &con, &intrinsic("sm80", "mma.sync.m16n8k8.f32.tf32.tf32.f32")).unwrap_err(), "tf32 rounds f32 operands: not exact");
    }

    #[test]
    fn a_convolution_has_every_basic_and_fused_mapping() {
        let m = parse(CONV_F16);
        let (f, op, c) = first_compute(&m);
        let con = contraction(f, op).unwrap();
        let mma = intrinsic("sm80", "mma.sync.m16n8k16.f32.f16.f16.f32");
        let maps = candidates(c, &con, &mma).unwrap();
        // Input as `a`: m ⊆ {n, oh, ow}, n = {f}, k ⊆ {c, r, s}; weights as
        // `a`: m = {f}, n ⊆ {n, oh, ow}. (2³−1)·1·(2³−1) each way.
        assert_eq!(maps.len(), 2 * 7 * 7);
        assert_eq!(maps.iter().filter(|m| m.is_basic()).count(), 2 * 3 * 3);
        let implicit_gemm = maps.iter().find(|m| m.a == 0 && names(c, &m.m) == ["n", "oh", "ow"] && names(c, &m.k) == ["c", "r", "s"]).unwrap();
        assert_eq!(names(c, &implicit_gemm.n), ["f"]);
        assert_eq!(implicit_gemm.fused_extent(c, IntrinsicAxis::M), 2 * 56 * 56);
        assert_eq!(implicit_gemm.padding(c, &mma), 0.0);
        // k = r alone: 3 padded to 16.
        let on_r = maps.iter().find(|m| m.is_basic() && m.a == 0 && names(c, &m.m) == ["oh"] && names(c, &m.k) == ["r"]).unwrap();
        let expected = (64.0 * 32.0 * 16.0) / (56.0 * 32.0 * 3.0) - 1.0;
        assert!((on_r.padding(c, &mma) - expected).abs() < 1e-12);
        // Every candidate obeys the conditions, and no axis is used twice.
        for m in &maps {
            for (axes, want, a_uses, b_uses) in [(&m.m, AxisKind::Spatial, true, false), (&m.n, AxisKind::Spatial, false, true), (&m.k, AxisKind::Reduction, true, true)] {
                for &ax in axes {
                    assert_eq!(c.axis(ax).kind, want);
                    assert_eq!(c.reads[m.a].indices.iter().any(|e| e.uses(ax)), a_uses);
                    assert_eq!(c.reads[m.b].indices.iter().any(|e| e.uses(ax)), b_uses);
                }
            }
            let all: Vec<AxisId> = m.m.iter().chain(&m.n).chain(&m.k).copied().collect();
            let distinct: std::collections::BTreeSet<AxisId> = all.iter().copied().collect();
            assert_eq!(distinct.len(), all.len());
        }
        assert_eq!(maps, candidates(c, &con, &mma).unwrap(), "deterministic");
    }

    #[test]
    fn a_batch_axis_stays_a_loop_and_operand_order_does_not_matter() {
        let m = parse(BMM_F16);
        let (f, op, c) = first_compute(&m);
        let con = contraction(f, op).unwrap();
        // The body multiplies %y by %x: lhs is read 1.
        assert_eq!((con.lhs, con.rhs), (1, 0));
        let maps = candidates(c, &con, &intrinsic("sm90", "mma.sync.m16n8k16.f32.f16.f16.f32")).unwrap();
        assert_eq!(maps.len(), 2);
        assert!(maps.iter().all(|m| !m.m.iter().chain(&m.n).chain(&m.k).any(|&a| c.axis(a).name == "b")));
    }

    #[test]
    fn a_vector_dot_product_takes_its_operand_types_either_way_round() {
        let src = "func @q(%A: tensor<8x64xu8>, %B: tensor<64x32xi8>) -> tensor<8x32xi32> {
  %C = compute (i: 8, j: 32) reduce sum (k: 64) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<8x32xi32>[i, j] {
    %0 = cast %a : u8 -> i32
    %1 = cast %b : i8 -> i32
    %2 = mul %0, %1 : i32
    yield %2 : i32
  }
  return %C
}";
        let m = parse(src);
        let (f, op, c) = first_compute(&m);
        let con = contraction(f, op).unwrap();
        let vnni = intrinsic("x86-avx512", "vpdpbusd.zmm");
        let maps = candidates(c, &con, &vnni).unwrap();
        let shown: Vec<(usize, Vec<String>, Vec<String>)> = maps.iter().map(|m| (m.a, names(c, &m.m), names(c, &m.k))).collect();
        assert_eq!(shown, [(0, vec!["i".to_string()], vec!["k".to_string()]), (1, vec!["j".to_string()], vec!["k".to_string()])]);
        // i = 8 fills half of the 16 lanes.
        assert_eq!(maps[0].padding(c, &vnni), 1.0);
        // A Tensor Core's fragments are not interchangeable: s8 x s8 only.
        assert_eq!(candidates(c, &con, &intrinsic("sm90", "mma.sync.m16n8k32.s32.s8.s8.s32")).unwrap_err(), "it multiplies i8 by i8, the op u8 by i8");
    }

    #[test]
    fn ops_that_are_not_contractions_say_why() {
        let max = "func @pool(%x: tensor<8x8xf32>) -> tensor<8xf32> {
  %y = compute (i: 8) reduce max (r: 8) reads(%v = %x[i, r]) -> tensor<8xf32>[i] {
    yield %v : f32
  }
  return %y
}";
        let add = "func @add(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8xf32> {
  %y = compute (i: 8) reduce sum (r: 8) reads(%v = %x[i, r], %u = %w[r, i]) -> tensor<8xf32>[i] {
    %0 = add %v, %u : f32
    yield %0 : f32
  }
  return %y
}";
        let square = "func @sq(%x: tensor<8x8xf32>) -> tensor<8xf32> {
  %y = compute (i: 8) reduce sum (r: 8) reads(%v = %x[i, r]) -> tensor<8xf32>[i] {
    %0 = mul %v, %v : f32
    yield %0 : f32
  }
  return %y
}";
        for (src, why) in [(max, "it is not a `reduce sum`"), (add, "its body does not yield the product of two reads"), (square, "its body squares one read")] {
            let m = parse(src);
            let (f, op, _) = first_compute(&m);
            assert_eq!(contraction(f, op).unwrap_err(), why);
        }
        // A GEMV on an MMA: no spatial axis indexes only `b`.
        let gemv = "func @gemv(%A: tensor<32x16xf16>, %x: tensor<16xf16>) -> tensor<32xf32> {
  %y = compute (i: 32) reduce sum (k: 16) reads(%a = %A[i, k], %v = %x[k]) -> tensor<32xf32>[i] {
    %0 = cast %a : f16 -> f32
    %1 = cast %v : f16 -> f32
    %2 = mul %0, %1 : f32
    yield %2 : f32
  }
  return %y
}";
        let m = parse(gemv);
        let (f, op, c) = first_compute(&m);
        let err = candidates(c, &contraction(f, op).unwrap(), &intrinsic("sm80", "mma.sync.m16n8k16.f32.f16.f16.f32")).unwrap_err();
        assert_eq!(err, "no op axis can go onto its `n`: no spatial axis (longer than 1) indexes `b` and the output but not `a`");
    }
}
