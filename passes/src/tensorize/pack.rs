//! Repacking the operands of `dot` intrinsics (VNNI's layout).
//!
//! `vpdpbusd` (and `vdpbf16ps`) want lane `m`'s `k` elements of `a`
//! consecutive, the lanes one after the other: `[K/k][M][k]`. `cache`
//! stages a GEMM's `B[k, j]` as `%b_l3[k, j]`, where lane `j`'s elements
//! are a row apart and code generation gathers them one by one. When the
//! staging buffer is private to the kernel (filled by one plain copy and
//! read only by the intrinsics), it can take the packed layout instead:
//! the copy splits the `k` dimension and moves its inner part innermost
//! (`split [dk, k] permute [...]`), and the intrinsics read the packed
//! indices, so each intrinsic's `a` is one contiguous vector load.
//! The broadcast operand `b` is packed the same way where its `k`
//! elements are not already consecutive: a convolution's input tile
//! `x[n, c, h, w]` becomes `[n][c/4][h][w][4]`, so each instruction's four
//! channels are one 32-bit load and a broadcast instead of four byte
//! loads. (A copy that already permutes, like `cache`'s weights with `f`
//! innermost, composes with the split.)
//!
//! The rewrite only changes where the buffer's elements live, never which
//! element an access reaches, so it is skipped, not reported, whenever one
//! of its conditions fails.

use crate::nest::subtree;
use tilec::ir::*;

/// Packs the lanes operand of the `dot` intrinsics in `kernel` where the
/// conditions hold (module documentation), and the broadcast operand the
/// same way where its `k` elements are not already consecutive (a
/// convolution's input channels: NCHW becomes NC/4HW4); returns how many
/// buffers it packed.
pub fn pack_lanes_operands(f: &mut Function, kernel: Op) -> u64 {
    let ops = subtree(f, kernel);
    // (buffer, operand): the lanes operand `a` (1) and the broadcast one
    // `b` (2), whose `k` elements a lane reads together either way.
    let mut buffers: Vec<(Value, usize)> = Vec::new();
    for &op in &ops {
        if let OpKind::Intrinsic(x) = &f.ops[op].kind
            && x.kind == IntrinsicKind::Dot
            && x.shape[2] > 1
        {
            for operand in [1, 2] {
                let v = f.ops[op].operands[operand];
                if !buffers.iter().any(|&(b, _)| b == v) {
                    buffers.push((v, operand));
                }
            }
        }
    }
    let mut packed = 0;
    for (buffer, operand) in buffers {
        if let Some(plan) = plan(f, &ops, buffer, operand) {
            apply(f, buffer, &plan, operand);
            packed += 1;
        }
    }
    packed
}

/// How a buffer is packed: dimension `dim` split by `factor`, the inner
/// part moved innermost.
struct Plan {
    dim: usize,
    factor: u64,
    copy: Op,
    intrinsics: Vec<Op>,
}

/// The one dimension an axis' steps move along, with step 1; `None` if it
/// moves along none, several, or by another step.
fn unit_step_dim(steps: &[i64]) -> Option<usize> {
    let moving: Vec<usize> = (0..steps.len()).filter(|&d| steps[d] != 0).collect();
    match moving.as_slice() {
        [d] if steps[*d] == 1 => Some(*d),
        _ => None,
    }
}

/// The packing of `buffer`, if every condition holds: a local `alloc`,
/// written by exactly one copy (no split or stride; a permute is composed
/// with the packing) and otherwise
/// read only as the `a` operand of `dot` intrinsics of one `k`, each
/// stepping `k` along one dimension `dk` (the same for all) and `m` along
/// another, with origins and the copy's destination in `dk` divisible by
/// `k`, and the copy's box and the buffer in `dk` multiples of `k`.
fn plan(f: &Function, ops: &[Op], buffer: Value, operand: usize) -> Option<Plan> {
    let alloc = f.def_op(buffer)?;
    let Type::Buffer(b) = f.value_type(buffer) else {
        return None;
    };
    if !matches!(f.ops[alloc].kind, OpKind::Alloc) || b.scope != MemScope::Local {
        return None;
    }
    let mut copy = None;
    let mut intrinsics = Vec::new();
    let mut packing: Option<(usize, u64)> = None;
    for &op in ops {
        let data = &f.ops[op];
        let Some(at) = data.operands.iter().position(|&v| v == buffer) else {
            continue;
        };
        match &data.kind {
            OpKind::Copy(c) if at == 1 && data.operands[0] != buffer && copy.is_none() => {
                if c.split.is_some() || !c.stride.is_empty() {
                    return None;
                }
                copy = Some(op);
            }
            OpKind::Intrinsic(x) if at == operand && !data.operands[..3].iter().enumerate().any(|(i, &v)| i != operand && v == buffer) => {
                let k = x.shape[2];
                let t = if operand == 1 { &x.a } else { &x.b };
                // (A fused mapping's operand is not repacked.)
                if x.kind != IntrinsicKind::Dot || k <= 1 || x.is_fused() || t.steps.iter().flatten().any(|s| s.len() != t.indices.len()) {
                    return None;
                }
                let dk = unit_step_dim(t.axis_steps(2)?)?;
                // The lanes operand moves along `m` in another dimension
                // (the broadcast one does not move along `m`).
                if operand == 1 && unit_step_dim(t.axis_steps(0)?)? == dk {
                    return None;
                }
                if t.steps[1].iter().flatten().any(|&s| s != 0) || (operand == 2 && t.steps[0].iter().flatten().any(|&s| s != 0)) {
                    return None;
                }
                // A broadcast operand whose `k` elements are already the
                // buffer's innermost run is consecutive as it is.
                if operand == 2 && dk + 1 == t.indices.len() {
                    return None;
                }
                if packing.is_some_and(|p| p != (dk, k)) {
                    return None;
                }
                packing = Some((dk, k));
                t.indices.get(dk)?.exact_quotient(k as i64)?;
                intrinsics.push(op);
            }
            _ => return None,
        }
    }
    let (dim, factor) = packing?;
    let copy = copy?;
    let OpKind::Copy(c) = &f.ops[copy].kind else {
        return None;
    };
    // The box dimension the buffer's `dim` holds (a permuted copy, such as
    // `cache`'s weights with the output channels innermost, reorders them).
    let box_dim = c.permute.get(dim).copied().unwrap_or(dim);
    if c.sizes.len() != b.shape.len() || !c.sizes.get(box_dim)?.is_multiple_of(factor) || !b.shape[dim].is_multiple_of(factor) {
        return None;
    }
    c.dst.get(dim)?.exact_quotient(factor as i64)?;
    Some(Plan { dim, factor, copy, intrinsics })
}

/// Packs `buffer` as `plan` says: the buffer's type, its copy and the
/// intrinsics' `a` operands.
fn apply(f: &mut Function, buffer: Value, plan: &Plan, operand: usize) {
    let (dim, k) = (plan.dim, plan.factor);
    // Old index `y` in `dim` becomes `y / k` there and `y % k` innermost.
    if let Type::Buffer(b) = &mut f.values[buffer].ty {
        b.shape[dim] /= k;
        b.shape.push(k);
    }
    if let OpKind::Copy(c) = &mut f.ops[plan.copy].kind {
        let rank = c.sizes.len();
        c.dst[dim] = c.dst[dim].exact_quotient(k as i64).expect("checked by plan");
        c.dst.push(AffineExpr::constant(0));
        // The buffer's `dim` holds box dimension `bd`; split that one. In
        // the expanded box (.., n / k, k, ..) box dimension `x` is `x`
        // before `bd`, `x + 1` after it; each destination dimension keeps
        // its box dimension (`bd`'s outer part), and the inner part, `bd +
        // 1`, goes last.
        let bd = c.permute.get(dim).copied().unwrap_or(dim);
        let old: Vec<usize> = (0..rank).map(|d| c.permute.get(d).copied().unwrap_or(d)).collect();
        c.split = Some(CopySplit { dim: bd, factor: k });
        c.permute = old.into_iter().map(|x| if x > bd { x + 1 } else { x }).chain([bd + 1]).collect();
    }
    for &op in &plan.intrinsics {
        if let OpKind::Intrinsic(x) = &mut f.ops[op].kind {
            let a = if operand == 1 { &mut x.a } else { &mut x.b };
            a.indices[dim] = a.indices[dim].exact_quotient(k as i64).expect("checked by plan");
            a.indices.push(AffineExpr::constant(0));
            for steps in a.steps.iter_mut().flatten() {
                steps.push(0);
            }
            // `k` (one part: `plan` checked) steps the inner part
            // (innermost) instead of `dim`.
            a.steps[2][0][dim] = 0;
            *a.steps[2][0].last_mut().expect("pushed") = 1;
        }
    }
}
