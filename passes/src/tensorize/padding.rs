//! Padded tiles: an intrinsic over a spatial axis whose extent its tiles
//! do not divide (issue 22's "padding where extents do not divide").
//!
//! `tile` guards a partial tile's statement (`if %i < 40 { acc[..] += a ·
//! b }`) and the fold that stores the accumulator (`if %i < 40 { C[..] =
//! acc[..] }`). An intrinsic computes a whole tile, so the statement's
//! guard has to go. That is sound where the guard only bounds spatial
//! axes and the accumulator is the tile's own register buffer: the points
//! past the extent then only write accumulator elements that the fold's
//! guard never stores, whatever they read. Their reads must stay in
//! bounds: a read that may leave its buffer over the whole tile gets
//! `pad(0)` (the value is never used); staged reads (`cache`) read their
//! buffer, whose copy already pads the box past the source.
//!
//! So a GEMM with `M = 40` runs on `mma.sync` with 48 rows computed, and a
//! 14 × 14 convolution's `h · w` fused onto 16 rows pads `h` to 16.

use super::Statement;
use crate::nest::{dissolve_guard, for_loop};
use tilec::ir::*;

/// Removes the guard around statement `s` where padding makes it
/// unnecessary (the module doc). Leaves anything else alone: `tensorize`
/// then reports the guard.
pub(super) fn unguard_statement(f: &mut Function, s: &Statement) {
    let region = f.ops[s.store].parent;
    let Some(guard) = f.regions[region].owner.filter(|&g| matches!(f.ops[g].kind, OpKind::If(_))) else { return };
    // The guard holds the statement alone.
    if f.regions[region].ops.iter().any(|o| !s.ops.contains(o)) || f.ops[guard].regions.len() != 1 {
        return;
    }
    // It bounds spatial axes only: every variable of its conditions is a
    // loop variable of a spatial axis' loop.
    let spatial_loop = |v: Value| match f.values[v].def {
        ValueDef::RegionArg(r, 0) => f.regions[r].owner.and_then(|o| for_loop(f, o)).and_then(|l| l.tag.as_ref()).is_some_and(|t| !t.reduction),
        _ => false,
    };
    if !f.guard_conds(guard).iter().all(|(e, _)| e.terms().iter().all(|&(v, _)| spatial_loop(v))) {
        return;
    }
    // The accumulator is the tile's register buffer.
    let acc = f.ops[s.store].operands[1];
    if f.value_type(acc).as_buffer().is_none_or(|b| b.scope != MemScope::Local) {
        return;
    }
    dissolve_guard(f, guard);
    // Reads that may now leave their buffers read zero there.
    for load in [s.a, s.b] {
        if in_bounds(f, load) {
            continue;
        }
        let zero = match f.value_type(f.ops[load].results[0]).as_scalar() {
            Some(e) if e.is_float() => Literal::Float(0.0),
            _ => Literal::Int(0),
        };
        if let OpKind::Load(access) = &mut f.ops[load].kind {
            access.pad.get_or_insert(zero);
        }
    }
}

/// Does `load` stay inside its source for every iteration of the loops
/// around it (each index's range over the loops' ranges)?
fn in_bounds(f: &Function, load: Op) -> bool {
    let Some(shape) = f.value_type(f.ops[load].operands[0]).readable().map(|t| t.shape.clone()) else { return false };
    let indices = f.access_indices(load);
    indices.len() == shape.len()
        && indices.iter().zip(&shape).all(|(e, &n)| {
            e.divisor() == 1
                && e.terms().iter().all(|&(v, _)| f.loop_extent(v).is_some())
                && e.numerator_range(|v| (0, f.loop_extent(v).map_or(0, |x| x as i64 - 1))).is_some_and(|(lo, hi)| lo >= 0 && hi < n as i64)
        })
}
