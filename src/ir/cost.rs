//! Static work counts used to report throughput.

use super::{Function, Op, OpKind};

/// Floating-point (or integer) operations a function performs, counted the
/// way papers count them: per point of each compute op's iteration space,
/// one per arithmetic op of the body plus one for the combine; per output
/// element, one per arithmetic op of the epilogue. Casts, constants and
/// axis indices are free. GEMM gives 2·M·N·K, convolution 2·N·F·Ho·Wo·C·R·S.
pub fn flops(f: &Function) -> u64 {
    f.regions[f.body].ops.iter().map(|&op| op_flops(f, op)).fold(0u64, u64::saturating_add)
}

/// [`flops`] of one op of the function body (0 for anything but a
/// compute op).
pub fn op_flops(f: &Function, op: Op) -> u64 {
    let arith = |r| f.regions[r].ops.iter().filter(|&&o| matches!(f.ops[o].kind, OpKind::Unary(_) | OpKind::Binary(_))).count() as u64;
    let OpKind::Compute(c) = &f.ops[op].kind else { return 0 };
    let points = c.iteration_points().unwrap_or(u64::MAX);
    let outputs: u64 = c.spatial_axes().map(|a| c.axis(a).extent).product();
    let regions = &f.ops[op].regions;
    let per_point = arith(regions[0]) + u64::from(c.combiner.is_some());
    let per_output = regions.get(1).map_or(0, |&r| arith(r));
    points.saturating_mul(per_point).saturating_add(outputs.saturating_mul(per_output))
}

/// The element types the heaviest compute op of `f` multiplies: those of
/// its first two body reads (none for an op with fewer, a pooling). What
/// decides which instruction's peak a kernel is held to
/// ([`crate::calibration::Calibration::peak_for`]).
pub fn product_types(f: &Function) -> Option<(super::ElemType, super::ElemType)> {
    let op = *f.regions[f.body].ops.iter().max_by_key(|&&op| op_flops(f, op))?;
    let OpKind::Compute(c) = &f.ops[op].kind else { return None };
    if c.reads.len() < 2 {
        return None;
    }
    let elem = |i: usize| f.value_type(*f.ops[op].operands.get(i)?).readable().map(|t| t.elem);
    Some((elem(0)?, elem(1)?))
}
