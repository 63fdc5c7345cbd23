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
//! A reduction that reads its input at a stride, `x[n, c, oh · 2, ow · 2]`
//! (a strided 1x1 convolution), has no such pair: its rows are read at
//! every other point. Where copying the points read into a dense tensor
//! first (`x_s[n, c, oh, ow] = x[n, c, oh · 2, ow · 2]`, one more compute
//! op) lets axes merge, the read is *subsampled* so: the copy touches each
//! input point once, and the reduction, which reads each of them once per
//! output channel, becomes the GEMM of the stride-1 case. Elementwise ops
//! are not subsampled (they read each point once anyway).
//!
//! Only unscheduled ops change (a schedule names the op's axes), and only
//! where no `index` op of the region names an axis that would change.

use std::collections::HashMap;
use tilec::diag::{Diagnostics, Span};
use tilec::ir::*;
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};

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

- with `subsample` (the default), a **strided read** of a reduction,
  some dimension indexed by an axis times a stride (`x[n, c, oh * 2, ow *
  2]`, a strided 1x1 convolution), is first copied densely by a new
  compute op `subsample` (`x_s[n, c, oh, ow] = x[n, c, oh * 2, ow * 2]`)
  when that lets axes merge; the reduction then reads the copy.

The merged axis visits the same elements in the same order, so results are
bit-identical, and nothing is copied at run time (`reshape` is a view)
except by a `subsample` op. A 1x1 convolution over NCHW tensors becomes a
GEMM over `oh * ow` points, an elementwise op over a whole tensor a loop
over its elements. Ops with a schedule, and axes named by an `index` op,
are left alone. Run it after `fuse` (which folds consumers at the
producer's output index) and before `search`.",
    options: &[OptionDecl {
        name: "subsample",
        kind: OptionKind::Bool,
        default: "true",
        help: "copy a reduction's strided reads densely first where that lets axes merge (a strided 1x1 convolution becomes a GEMM)",
    }],
    statistics: &[
        ("dropped", "reduction axes of extent 1 removed"),
        ("merged", "pairs of axes merged into one"),
        ("reshapes", "reshape ops inserted"),
        ("subsampled", "strided reads copied densely first"),
    ],
    create: |o: &PassOptions| Box::new(CollapseAxes { subsample: o.bool("subsample") }),
};

pub struct CollapseAxes {
    pub subsample: bool,
}

impl Pass for CollapseAxes {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        for f in &mut module.funcs {
            let mut pending: Vec<Op> = f.regions[f.body].ops.iter().copied().filter(|&o| f.ops[o].kind.as_compute().is_some_and(|c| c.schedule.is_none())).collect();
            pending.reverse();
            // The `subsample` copies are collapsed too (their batch and
            // channel axes merge), so that a second run finds nothing.
            while let Some(op) = pending.pop() {
                pending.extend(collapse_op(f, op, self.subsample, cx));
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
    /// A read with a padding value (it may read outside the tensor).
    padded: bool,
}

/// A read to copy densely before the op: its position among the reads,
/// the stride per dimension (1: the dimension is copied whole), the
/// copy's shape, and a name per dimension for the copy's axes.
struct Subsample {
    read: usize,
    strides: Vec<u64>,
    shape: Vec<u64>,
    axis_names: Vec<String>,
}

/// The op's axes and accesses while it is being rewritten: reads (body,
/// then epilogue, as the operands), then the output.
#[derive(Clone)]
struct Collapsing {
    axes: Vec<AxisDecl>,
    accesses: Vec<AccessShape>,
    /// Axes named by an `index` op, which must keep their meaning.
    indexed: Vec<AxisId>,
}

/// Rewrites one op; returns the `subsample` ops it inserted.
fn collapse_op(f: &mut Function, op: Op, subsample: bool, cx: &mut PassContext) -> Vec<Op> {
    let c = f.ops[op].kind.as_compute().expect("a compute op").clone();
    let Some(out_ty) = f.value_type(f.result(op)).as_tensor().cloned() else { return Vec::new() };
    let mut accesses = Vec::new();
    for ((_, read), &v) in c.all_reads().zip(&f.ops[op].operands) {
        let Some(t) = f.value_type(v).as_tensor() else { return Vec::new() };
        accesses.push(AccessShape { indices: read.indices.clone(), spans: read.index_spans.clone(), shape: t.shape.clone(), padded: read.pad.is_some() });
    }
    accesses.push(AccessShape { indices: c.output.clone(), spans: c.output_spans.clone(), shape: out_ty.shape.clone(), padded: false });
    let indexed = f.indexed_axes(op);
    let mut state = Collapsing { axes: c.axes.clone(), accesses, indexed };
    let mut dropped = 0;
    while let Some(r) = state.droppable_axis() {
        state.remove_axis(r);
        dropped += 1;
    }
    let subsamples = if subsample { state.subsample_strided_reads() } else { Vec::new() };
    let mut merged = 0;
    while let Some((a, b)) = state.mergeable_pair() {
        state.merge(a, b);
        merged += 1;
    }
    if dropped + merged == 0 {
        return Vec::new();
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
    let span = f.op_spans[op];

    // The dense copies of strided reads, before the op; the op reads them.
    let mut copies = Vec::new();
    for s in &subsamples {
        let v = f.ops[op].operands[s.read];
        let copy = insert_subsample(f, op, v, s, span);
        f.ops[op].operands[s.read] = f.result(copy);
        copies.push(copy);
    }
    cx.bump("subsampled", copies.len() as u64);

    // Views of the reads whose shape changed, before the op (one per
    // tensor and shape).
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
    copies
}

/// Inserts, just before `op`, the compute op `subsample` that copies the
/// points of `v` that `s` names into a dense tensor: `v_s[i, j, ..] =
/// v[i · stride_0, j · stride_1, ..]`.
fn insert_subsample(f: &mut Function, op: Op, v: Value, s: &Subsample, span: Span) -> Op {
    let elem = f.value_type(v).as_tensor().expect("a tensor read").elem;
    let dims = s.shape.len();
    let axes = (0..dims).map(|d| AxisDecl { name: s.axis_names[d].clone(), extent: s.shape[d], kind: AxisKind::Spatial, span }).collect();
    let read = Read {
        indices: (0..dims).map(|d| AffineExpr::var(AxisId::new(d)).checked_scale(s.strides[d] as i64).expect("a stride the read already used")).collect(),
        pad: None,
        index_spans: vec![span; dims],
    };
    let copy = Compute {
        label: Some("subsample".to_string()),
        axes,
        combiner: None,
        reads: vec![read],
        output: (0..dims).map(|d| AffineExpr::var(AxisId::new(d))).collect(),
        output_spans: vec![span; dims],
        has_epilogue: false,
        epilogue_reads: Vec::new(),
        schedule: None,
    };
    let new = create_beside(f, op, 0, OpKind::Compute(Box::new(copy)), v, TensorType::new(s.shape.clone(), elem), span);
    let body = f.new_region(Some(new));
    f.ops[new].regions.push(body);
    let point = f.add_region_arg(body, Type::Scalar(elem), Some("v".to_string()));
    let yield_op = f.create_op(body, OpKind::Yield, vec![point], Vec::new(), span);
    f.regions[body].ops.push(yield_op);
    let hint = format!("{}_s", f.values[v].name.clone().unwrap_or_else(|| "in".to_string()));
    f.name_result(new, &hint);
    new
}

/// A reshape of `v` to `ty` in the function body, `after` ops past `op`
/// (0: just before it, 1: just after).
fn insert_reshape(f: &mut Function, op: Op, after: usize, v: Value, ty: TensorType, span: Span, cx: &mut PassContext) -> Op {
    cx.bump("reshapes", 1);
    create_beside(f, op, after, OpKind::Reshape, v, ty, span)
}

/// An op of `kind` over `v` with one result of type `ty`, placed in the
/// function body `after` ops past `op` (0: just before it, 1: just after).
fn create_beside(f: &mut Function, op: Op, after: usize, kind: OpKind, v: Value, ty: TensorType, span: Span) -> Op {
    let pos = f.regions[f.body].ops.iter().position(|&o| o == op).expect("op in the body");
    let new = f.create_op(f.body, kind, vec![v], vec![Type::Tensor(ty)], span);
    f.regions[f.body].ops.insert(pos + after, new);
    new
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

    /// Pairs of axes that would merge, one after another.
    fn merge_count(&self) -> usize {
        let mut trial = self.clone();
        let mut n = 0;
        while let Some((a, b)) = trial.mergeable_pair() {
            trial.merge(a, b);
            n += 1;
        }
        n
    }

    /// Rewrites the strided reads of a reduction as reads of their dense
    /// copies, if that lets more axes merge; returns the copies to make.
    fn subsample_strided_reads(&mut self) -> Vec<Subsample> {
        if !self.axes.iter().any(|a| a.kind == AxisKind::Reduction) {
            return Vec::new();
        }
        let mut trial = self.clone();
        let mut picks = Vec::new();
        for read in 0..self.accesses.len() - 1 {
            if let Some(s) = trial.densify(read) {
                picks.push(s);
            }
        }
        if picks.is_empty() || trial.merge_count() <= self.merge_count() {
            return Vec::new();
        }
        *self = trial;
        picks
    }

    /// Reads access `read` through its dense copy when some dimension is
    /// indexed by exactly `axis · stride` (stride > 1, in bounds, no
    /// padding): that dimension becomes the axis's extent, indexed by the
    /// axis; the other dimensions are copied whole.
    fn densify(&mut self, read: usize) -> Option<Subsample> {
        let acc = &self.accesses[read];
        if acc.padded {
            return None;
        }
        let mut strides = vec![1; acc.indices.len()];
        let mut shape = acc.shape.clone();
        let mut names = Vec::new();
        for (d, e) in acc.indices.iter().enumerate() {
            let axis = match e.terms() {
                [(a, k)] if e.constant_term() == 0 && e.divisor() == 1 => Some((*a, *k)),
                _ => None,
            };
            if let Some((a, k)) = axis
                && k > 1
                && (k as u64).checked_mul(self.axes[a.index()].extent.saturating_sub(1)).is_some_and(|last| last < acc.shape[d])
            {
                strides[d] = k as u64;
                shape[d] = self.axes[a.index()].extent;
            }
            let base = axis.map_or_else(|| format!("d{d}"), |(a, _)| self.axes[a.index()].name.clone());
            names.push(fresh(&base, |n| names.iter().any(|m| m == n)));
        }
        if strides.iter().all(|&s| s == 1) {
            return None;
        }
        let acc = &mut self.accesses[read];
        for (index, &stride) in acc.indices.iter_mut().zip(&strides) {
            if stride > 1 {
                let (a, _) = index.terms()[0];
                *index = AffineExpr::var(a);
            }
        }
        acc.shape = shape.clone();
        Some(Subsample { read, strides, shape, axis_names: names })
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
        fresh(base, |n| self.axes.iter().any(|a| a.name == n))
    }
}

/// `base`, or `base1`, `base2`, ...: the first that is not `taken`.
fn fresh(base: &str, taken: impl Fn(&str) -> bool) -> String {
    let mut name = base.to_string();
    let mut k = 1;
    while taken(&name) {
        name = format!("{base}{k}");
        k += 1;
    }
    name
}

/// The axis an index is, exactly (coefficient 1, no constant or divisor).
fn plain(e: &AffineExpr<AxisId>) -> Option<AxisId> {
    match e.terms() {
        [(a, 1)] if e.constant_term() == 0 && e.divisor() == 1 => Some(*a),
        _ => None,
    }
}
