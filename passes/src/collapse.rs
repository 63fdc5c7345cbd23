//! `collapse-axes`: merges two axes of a compute op into one where they
//! only ever index adjacent, whole dimensions of its tensors, and views the
//! tensors under the collapsed shapes (`reshape`).
//!
//! Why: a 1x1 convolution over NCHW tensors, `y[n, f, oh, ow] = Σ_c
//! k[f, c] · x[n, c, oh, ow]`, is a GEMM over `oh·ow` points, but with `oh`
//! and `ow` apart a vector along `ow` ends at every row (28 or 14 or 7
//! floats: masked tails, loads that straddle cache lines) and the search
//! sees two short axes instead of one long one. Merged, the op is the GEMM
//! `y'[n, f, p] = Σ_c k[f, c] · x'[n, c, p]` over views `x'`, `y'` of the
//! same memory: nothing is copied. The same holds for any elementwise op
//! over whole tensors, and for the residual read of a fused epilogue.
//!
//! A pair `(a, b)` of axes of one kind merges when, in every access (each
//! read and the output), either neither appears, or `a` alone is the index
//! of some dimension `d` and `b` alone that of `d + 1` (coefficient 1, no
//! constant, no divisor), the two appear nowhere else, and the
//! dimensions' sizes are the axes' extents. Then index `a · extent(b) + b`
//! is exactly the row-major position in the collapsed dimension, so the
//! merged axis reads and writes the same elements in the same order.
//! Reduction axes of extent 1 (the `r`, `s` of a 1x1 filter) are dropped
//! first (they index 0), so that `oh + r` becomes `oh`.
//!
//! Only unscheduled ops change (a schedule names the op's axes), and only
//! where no `index` op of the region names an axis that would change.

use std::collections::HashMap;
use tilec::diag::{Diagnostics, Span};
use tilec::ir::*;
use tilec::pass::{Pass, PassContext, PassDecl, PassOptions};

pub static DECL: PassDecl = PassDecl {
    name: "collapse-axes",
    summary: "Merge axes that index adjacent whole dimensions of every tensor (a 1x1 convolution becomes a GEMM)",
    description: "
Rewrites each unscheduled compute op whose axes can be fewer:

- a **reduction axis of extent 1** that another reduction axis outlives is
  dropped (it indexes 0): the `r` and `s` of a 1x1 filter;
- two axes `a`, `b` of one kind **merge** into one axis `a_b` of extent
  `extent(a) * extent(b)` when every read and the output either use
  neither, or index adjacent dimensions `d`, `d + 1` with exactly `a` and
  `b`, whose sizes are the axes' extents. The tensor is then read (or
  written) through a `reshape` view with those two dimensions collapsed
  into one, and the op's result is reshaped back after it.

The merged axis visits the same elements in the same order, so results are
bit-identical, and nothing is copied at run time (`reshape` is a view). A
1x1 convolution over NCHW tensors becomes a GEMM over `oh * ow` points, an
elementwise op over a whole tensor a loop over its elements. Ops with a
schedule, and axes named by an `index` op, are left alone. Run it after
`fuse` (which folds consumers at the producer's output index) and before
`search`.",
    options: &[],
    statistics: &[("dropped", "reduction axes of extent 1 removed"), ("merged", "pairs of axes merged into one"), ("reshapes", "reshape ops inserted")],
    create: |_: &PassOptions| Box::new(CollapseAxes),
};

pub struct CollapseAxes;

impl Pass for CollapseAxes {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        for f in &mut module.funcs {
            let computes: Vec<Op> = f.regions[f.body].ops.iter().copied().filter(|&o| f.ops[o].kind.as_compute().is_some_and(|c| c.schedule.is_none())).collect();
            for op in computes {
                collapse_op(f, op, cx);
            }
        }
        Ok(())
    }
}

/// One access of the op as the pass rewrites it: the index per dimension,
/// their spans, the dimensions' sizes.
#[derive(Clone)]
struct AccessShape {
    indices: Vec<AffineExpr<AxisId>>,
    spans: Vec<Span>,
    shape: Vec<u64>,
}

/// The op's axes and accesses while it is being rewritten: reads (body,
/// then epilogue, as the operands), then the output.
struct Collapsing {
    axes: Vec<AxisDecl>,
    accesses: Vec<AccessShape>,
    /// Axes named by an `index` op, which must keep their meaning.
    indexed: Vec<AxisId>,
}

fn collapse_op(f: &mut Function, op: Op, cx: &mut PassContext) {
    let c = f.ops[op].kind.as_compute().expect("a compute op").clone();
    let Some(out_ty) = f.value_type(f.result(op)).as_tensor().cloned() else { return };
    let mut accesses = Vec::new();
    for ((_, read), &v) in c.all_reads().zip(&f.ops[op].operands) {
        let Some(t) = f.value_type(v).as_tensor() else { return };
        accesses.push(AccessShape { indices: read.indices.clone(), spans: read.index_spans.clone(), shape: t.shape.clone() });
    }
    accesses.push(AccessShape { indices: c.output.clone(), spans: c.output_spans.clone(), shape: out_ty.shape.clone() });
    let indexed: Vec<AxisId> = f.ops[op]
        .regions
        .iter()
        .flat_map(|&r| f.regions[r].ops.clone())
        .filter_map(|o| match f.ops[o].kind {
            OpKind::AxisIndex(a) => Some(a),
            _ => None,
        })
        .collect();
    let mut state = Collapsing { axes: c.axes.clone(), accesses, indexed };
    let mut dropped = 0;
    while let Some(r) = state.droppable_axis() {
        state.remove_axis(r);
        dropped += 1;
    }
    let mut merged = 0;
    while let Some((a, b)) = state.mergeable_pair() {
        state.merge(a, b);
        merged += 1;
    }
    if dropped + merged == 0 {
        return;
    }
    cx.bump("dropped", dropped);
    cx.bump("merged", merged);

    // The op with its new axes and indices. Axes that an `index` op names
    // neither merge nor drop, so they keep their names: map them by name.
    let renumber = |old: AxisId| -> Option<AxisId> { state.axes.iter().position(|a| a.name == c.axis(old).name).map(AxisId::new) };
    let mut new_c = c.clone();
    new_c.axes = state.axes.clone();
    let (reads, output) = state.accesses.split_at(state.accesses.len() - 1);
    for (i, acc) in reads.iter().enumerate() {
        let read = if i < c.reads.len() { &mut new_c.reads[i] } else { &mut new_c.epilogue_reads[i - c.reads.len()] };
        read.indices = acc.indices.clone();
        read.index_spans = acc.spans.clone();
    }
    new_c.output = output[0].indices.clone();
    new_c.output_spans = output[0].spans.clone();
    for &r in &f.ops[op].regions.clone() {
        for o in f.regions[r].ops.clone() {
            if let OpKind::AxisIndex(a) = f.ops[o].kind {
                let to = renumber(a).expect("axes named by `index` neither merge nor drop");
                f.ops[o].kind = OpKind::AxisIndex(to);
            }
        }
    }
    f.ops[op].kind = OpKind::Compute(Box::new(new_c));

    // Views of the reads whose shape changed, before the op (one per
    // tensor and shape).
    let span = f.op_spans[op];
    let mut views: HashMap<(Value, Vec<u64>), Value> = HashMap::new();
    for (i, acc) in reads.iter().enumerate() {
        let v = f.ops[op].operands[i];
        let t = f.value_type(v).as_tensor().expect("checked above").clone();
        if t.shape == acc.shape {
            continue;
        }
        let view = *views.entry((v, acc.shape.clone())).or_insert_with(|| {
            let hint = format!("{}_c", f.values[v].name.clone().unwrap_or_else(|| "in".to_string()));
            let r = insert_reshape(f, op, 0, v, TensorType::new(acc.shape.clone(), t.elem), span, cx);
            f.name_result(r, &hint)
        });
        f.ops[op].operands[i] = view;
    }
    // The result under the collapsed shape, reshaped back after the op.
    if output[0].shape != out_ty.shape {
        let result = f.result(op);
        f.values[result].ty = Type::Tensor(TensorType::new(output[0].shape.clone(), out_ty.elem));
        let name = f.values[result].name.clone();
        let r = insert_reshape(f, op, 1, result, out_ty, span, cx);
        let back = f.result(r);
        f.replace_all_uses(result, back);
        f.ops[r].operands[0] = result;
        f.values[back].name = name.clone();
        f.values[result].name = Some(format!("{}_c", name.unwrap_or_else(|| "out".to_string())));
    }
}

/// A reshape of `v` to `ty` in the function body, `after` ops past `op`
/// (0: just before it, 1: just after).
fn insert_reshape(f: &mut Function, op: Op, after: usize, v: Value, ty: TensorType, span: Span, cx: &mut PassContext) -> Op {
    let pos = f.regions[f.body].ops.iter().position(|&o| o == op).expect("op in the body");
    let r = f.create_op(f.body, OpKind::Reshape, vec![v], vec![Type::Tensor(ty)], span);
    f.regions[f.body].ops.insert(pos + after, r);
    cx.bump("reshapes", 1);
    r
}

impl Collapsing {
    /// A reduction axis of extent 1 that no `index` op names, while another
    /// reduction axis remains.
    fn droppable_axis(&self) -> Option<AxisId> {
        let reductions: Vec<AxisId> = (0..self.axes.len()).map(AxisId::new).filter(|&a| self.axes[a.index()].kind == AxisKind::Reduction).collect();
        if reductions.len() < 2 {
            return None;
        }
        reductions.into_iter().find(|&a| self.axes[a.index()].extent == 1 && !self.indexed.contains(&a))
    }

    /// The first pair of axes, in the order they appear as adjacent
    /// indices of an access, that merges (see the module docs).
    fn mergeable_pair(&self) -> Option<(AxisId, AxisId)> {
        for acc in &self.accesses {
            for d in 0..acc.indices.len().saturating_sub(1) {
                let (Some(a), Some(b)) = (plain(&acc.indices[d]), plain(&acc.indices[d + 1])) else { continue };
                if a != b && self.merges(a, b) {
                    return Some((a, b));
                }
            }
        }
        None
    }

    fn merges(&self, a: AxisId, b: AxisId) -> bool {
        let (da, db) = (&self.axes[a.index()], &self.axes[b.index()]);
        if da.kind != db.kind || self.indexed.contains(&a) || self.indexed.contains(&b) || da.extent.checked_mul(db.extent).is_none() {
            return false;
        }
        self.accesses.iter().all(|acc| {
            let uses = |x: AxisId| -> Vec<usize> { (0..acc.indices.len()).filter(|&d| acc.indices[d].uses(x)).collect() };
            match (uses(a).as_slice(), uses(b).as_slice()) {
                ([], []) => true,
                (&[d], &[e]) => e == d + 1 && plain(&acc.indices[d]) == Some(a) && plain(&acc.indices[e]) == Some(b) && acc.shape[d] == da.extent && acc.shape[e] == db.extent,
                _ => false,
            }
        })
    }

    /// Merges `b` into `a`: `a` becomes the axis over both, each access's
    /// two dimensions one.
    fn merge(&mut self, a: AxisId, b: AxisId) {
        let extent = self.axes[a.index()].extent * self.axes[b.index()].extent;
        let name = self.fresh_name(&format!("{}_{}", self.axes[a.index()].name, self.axes[b.index()].name));
        for acc in &mut self.accesses {
            if let Some(d) = acc.indices.iter().position(|e| plain(e) == Some(a)) {
                acc.shape[d] *= acc.shape[d + 1];
                acc.shape.remove(d + 1);
                acc.indices.remove(d + 1);
                let span = acc.spans[d].to(acc.spans[d + 1]);
                acc.spans.remove(d + 1);
                acc.spans[d] = span;
            }
        }
        let decl = &mut self.axes[a.index()];
        decl.extent = extent;
        decl.name = name;
        self.remove_axis(b);
    }

    /// Removes axis `x` (indexing 0 where it appeared) and renumbers the
    /// axes after it.
    fn remove_axis(&mut self, x: AxisId) {
        let renumber = |v: AxisId| -> AffineExpr<AxisId> {
            if v == x {
                AffineExpr::constant(0)
            } else if v.index() > x.index() {
                AffineExpr::var(AxisId::new(v.index() - 1))
            } else {
                AffineExpr::var(v)
            }
        };
        for acc in &mut self.accesses {
            for e in &mut acc.indices {
                *e = e.substitute(renumber).expect("dropping a variable cannot overflow");
            }
        }
        self.indexed = self.indexed.iter().filter(|&&v| v != x).map(|&v| if v.index() > x.index() { AxisId::new(v.index() - 1) } else { v }).collect();
        self.axes.remove(x.index());
    }

    fn fresh_name(&self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while self.axes.iter().any(|a| a.name == name) {
            name = format!("{base}{k}");
            k += 1;
        }
        name
    }
}

/// The axis an index is, exactly (coefficient 1, no constant or divisor).
fn plain(e: &AffineExpr<AxisId>) -> Option<AxisId> {
    match e.terms() {
        [(a, 1)] if e.constant_term() == 0 && e.divisor() == 1 => Some(*a),
        _ => None,
    }
}
