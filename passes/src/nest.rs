//! What the scheduling passes share: the target a schedule is for, the loop
//! levels of each axis, and the loop-order template.

use std::sync::Arc;
use tilec::diag::{Diagnostic, Span};
use tilec::ir::*;
use tilec::pass::PassContext;
use tilec::target::{SchedulePlan, Target};

/// The target a schedule names: the `--target` one if the names agree.
pub fn target_for(cx: &PassContext, name: &str, span: Span) -> Result<Arc<Target>, Diagnostic> {
    match cx.target() {
        Some(t) if t.name == name => Ok(Arc::new(t.clone())),
        Some(t) => Err(Diagnostic::error(format!("the schedule is for target `{name}`, but the pipeline runs for `{}`", t.name))
            .at(span, "scheduled here")
            .with_help(format!("pass --target={name}, or schedule for `{}`", t.name))),
        None => tilec::target::builtin(name).ok_or_else(|| {
            Diagnostic::error(format!("unknown target `{name}` in the schedule")).at(span, "scheduled here").with_note("`tilec --list-targets` lists the targets")
        }),
    }
}

/// One entry of the loop-order template; the target owns the type and
/// parses its `loop_order` once, when it is loaded.
pub use tilec::target::OrderEntry;

/// The target's loop-order template, as the loader parsed it. An error only
/// for a target that did not come through the loader (`parse_target`,
/// `TargetSet`), which leaves it unparsed.
pub fn loop_order(t: &Target) -> Result<Vec<OrderEntry>, String> {
    if t.order.len() != t.loop_order.len() {
        return Err(format!("the loop order of target `{}` was not parsed (a target must be read with `tilec::target::parse_target`)", t.name));
    }
    Ok(t.order.clone())
}

/// An axis as the scheduling passes see it: extent and one tile size per
/// tile level (the last is the innermost, "point", tile).
#[derive(Clone, Debug)]
pub struct AxisTiles {
    pub name: String,
    pub kind: AxisKind,
    pub extent: u64,
    pub sizes: Vec<u64>,
}

impl AxisTiles {
    /// Trip count of this axis' loop at tile level `l`.
    pub fn trip(&self, l: usize) -> u64 {
        let parent = if l == 0 { self.extent } else { self.sizes[l - 1] };
        parent.div_ceil(self.sizes[l])
    }

    /// Trip count of the point loop.
    pub fn point_trip(&self) -> u64 {
        *self.sizes.last().unwrap_or(&self.extent)
    }

    /// Does a tile overhang the extent: the last of the outermost level,
    /// or of a level that splits the one above unevenly (which the
    /// verifier allows only where the level above covers the axis, so the
    /// overhang lies past the extent too)?
    pub fn partial(&self) -> bool {
        self.extent % self.sizes[0] != 0 || self.sizes.windows(2).any(|w| w[0] % w[1].max(1) != 0)
    }
}

/// The axes of a compute op with their tile sizes from its plan (an axis
/// the schedule does not tile spans the extent at every level).
pub fn axis_tiles(c: &Compute, plan: &SchedulePlan) -> Vec<AxisTiles> {
    c.axes.iter().zip(&plan.sizes).map(|(a, sizes)| AxisTiles { name: a.name.clone(), kind: a.kind, extent: a.extent, sizes: sizes.clone() }).collect()
}

/// The kernels of a function with their schedules.
pub fn kernels(f: &Function) -> Vec<(Op, Schedule)> {
    f.walk()
        .into_iter()
        .filter_map(|op| match &f.ops[op].kind {
            OpKind::Kernel(k) => Some((op, k.schedule.clone())),
            _ => None,
        })
        .collect()
}

/// Every op inside `op`'s regions, outer before inner.
pub fn subtree(f: &Function, op: Op) -> Vec<Op> {
    let mut out = Vec::new();
    let mut stack: Vec<Region> = f.ops[op].regions.iter().rev().copied().collect();
    while let Some(r) = stack.pop() {
        for &o in &f.regions[r].ops {
            out.push(o);
            stack.extend(f.ops[o].regions.iter().rev());
        }
    }
    // Regions were visited depth-first but ops of a region in order; sort
    // is not needed by callers, who only filter.
    out
}

/// The loops in `op`'s subtree tagged `axis.level`.
pub fn tagged_loops(f: &Function, op: Op, axis: &str, level: &TagLevel) -> Vec<Op> {
    subtree(f, op)
        .into_iter()
        .filter(|&o| matches!(&f.ops[o].kind, OpKind::For(l) if l.tag.as_ref().is_some_and(|t| t.axis == axis && t.level == *level)))
        .collect()
}

/// The loop-carried facts of a `for` op.
pub fn for_loop(f: &Function, op: Op) -> Option<&ForLoop> {
    match &f.ops[op].kind {
        OpKind::For(l) => Some(l),
        _ => None,
    }
}

/// Replaces guard `g` by its body, in its place (a guard whose conditions
/// all went).
pub fn dissolve_guard(f: &mut Function, g: Op) {
    let parent = f.ops[g].parent;
    let at = f.regions[parent].ops.iter().position(|&o| o == g).expect("guard is in its parent region");
    let inner = f.ops[g].regions[0];
    for (i, o) in f.regions[inner].ops.clone().into_iter().enumerate() {
        f.move_op(o, tilec::ir::builder::Cursor::at(parent, at + 1 + i));
    }
    f.remove_op(g);
}

/// The induction variable of loop `op`.
pub fn induction_var(f: &Function, op: Op) -> Value {
    f.regions[f.ops[op].regions[0]].args[0]
}

/// Rewrites every index expression (loads, stores, copies, intrinsics'
/// origins, guards, index values) in `ops` with `rewrite`, which sees and returns expressions over
/// values.
pub fn rewrite_index_exprs(f: &mut Function, ops: &[Op], mut rewrite: impl FnMut(&AffineExpr<Value>) -> AffineExpr<Value>) {
    use tilec::ir::builder::pack_indices;
    for &op in ops {
        let kind = f.ops[op].kind.clone();
        match kind {
            OpKind::Load(_) | OpKind::Store(_) => {
                let new: Vec<AffineExpr<Value>> = f.access_indices(op).iter().map(&mut rewrite).collect();
                f.set_access_indices(op, &new);
            }
            OpKind::Copy(_) => {
                let (src, dst) = f.copy_indices(op);
                let src: Vec<AffineExpr<Value>> = src.iter().map(&mut rewrite).collect();
                let dst: Vec<AffineExpr<Value>> = dst.iter().map(&mut rewrite).collect();
                f.set_copy_indices(op, &src, &dst);
            }
            OpKind::Intrinsic(_) => {
                // The origins move; the steps of `m`, `n`, `k` do not.
                let (origins, lane) = f.intrinsic_indices(op);
                let origins = origins.map(|o| o.iter().map(&mut rewrite).collect());
                let lane: Vec<AffineExpr<Value>> = lane.iter().map(&mut rewrite).collect();
                f.set_intrinsic_indices(op, &origins, &lane);
            }
            OpKind::If(g) => {
                let exprs: Vec<AffineExpr<Value>> = g.conds.iter().map(|(e, _)| rewrite(&f.expr_in_values(op, e))).collect();
                let (operands, mut packed) = pack_indices(vec![], &[&exprs]);
                f.ops[op].operands = operands;
                if let OpKind::If(g) = &mut f.ops[op].kind {
                    for (c, e) in g.conds.iter_mut().zip(packed.remove(0)) {
                        c.0 = e;
                    }
                }
            }
            OpKind::IndexValue(e) => {
                let new = rewrite(&f.expr_in_values(op, &e));
                let (operands, mut packed) = pack_indices(vec![], &[std::slice::from_ref(&new)]);
                f.ops[op].operands = operands;
                f.ops[op].kind = OpKind::IndexValue(packed.remove(0).remove(0));
            }
            _ => {}
        }
    }
}

/// The levels whose loops an order entry makes: a `S.<l>`/`R.<l>` entry
/// also makes the loops of levels the template leaves out before it (a CPU
/// template has no `R.core`: reductions are not split across cores, so a
/// tiled reduction's core-level loop runs just outside its `R.l2` loop).
pub fn entry_levels(order: &[OrderEntry], k: usize) -> Vec<usize> {
    let (reduction, l) = match order[k] {
        OrderEntry::Spatial(l) => (false, l),
        OrderEntry::Reduction(l) => (true, l),
        _ => return Vec::new(),
    };
    let covered_before = |x: usize| {
        order[..k].iter().any(|e| match *e {
            OrderEntry::Spatial(y) => !reduction && y >= x,
            OrderEntry::Reduction(y) => reduction && y >= x,
            _ => false,
        })
    };
    let present = |x: usize| order.iter().any(|e| *e == if reduction { OrderEntry::Reduction(x) } else { OrderEntry::Spatial(x) });
    (0..=l).filter(|&x| x == l || (!present(x) && !covered_before(x))).collect()
}

/// The position in `order` of the entry that makes the loops of a tile
/// level (`None` for point, vthread and vector loops' own entries).
pub fn entry_of_level(order: &[OrderEntry], reduction: bool, level: usize) -> Option<usize> {
    (0..order.len()).find(|&k| {
        matches!((order[k], reduction), (OrderEntry::Spatial(_), false) | (OrderEntry::Reduction(_), true)) && entry_levels(order, k).contains(&level)
    })
}
