//! The verifier: every rule of the tile dialect that IR can break, checked
//! on IR however it was made (parsed, built by a pass, built by a test).
//! It reports every problem it finds, each at the span of the offending
//! source, and never stops at the first.
//!
//! The rules are written in `ir-spec/README.md`; each check names its rule.

use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::ir::ops::{OpPlace, op_decl};
use crate::ir::*;
use crate::ir::types;
use std::collections::HashSet;

/// Verifies every function of a module (and that names are distinct).
pub fn verify_module(m: &Module) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for (i, f) in m.funcs.iter().enumerate() {
        if let Some(first) = m.funcs[..i].iter().find(|g| g.name == f.name) {
            diags.push(
                Diagnostic::error(format!("function `@{}` is defined twice", f.name))
                    .at(f.span, "defined again here")
                    .with_secondary(first.span, "first defined here"),
            );
        }
        diags.extend(verify_function(f));
    }
    diags
}

pub fn verify_function(f: &Function) -> Diagnostics {
    let mut v = Verifier { f, diags: Diagnostics::new() };
    v.function();
    v.diags
}

struct Verifier<'f> {
    f: &'f Function,
    diags: Diagnostics,
}

impl Verifier<'_> {
    fn err(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn op_span(&self, op: Op) -> Span {
        self.f.op_spans[op]
    }

    fn value_span(&self, v: Value) -> Span {
        let s = self.f.value_spans[v];
        if !s.is_dummy() {
            return s;
        }
        match self.f.values[v].def {
            ValueDef::Result(op, _) => self.op_span(op),
            _ => self.f.span,
        }
    }

    fn function(&mut self) {
        let f = self.f;
        if f.result_types.is_empty() {
            self.err(
                Diagnostic::error(format!("function `@{}` returns nothing", f.name))
                    .at(f.span, "no results")
                    .with_help("a tile function computes tensors: declare them with `-> tensor<...>`"),
            );
        }
        for &p in &f.params {
            let t = f.value_type(p);
            if t.as_tensor().is_none() {
                self.err(Diagnostic::error(format!("function parameter of type `{t}` is not a tensor")).at(self.value_span(p), "here"));
            }
        }
        for t in &f.result_types {
            self.tensor_size(t, f.span);
        }
        for &p in &f.params {
            if let Type::Tensor(t) = f.value_type(p) {
                self.tensor_size(t, self.value_span(p));
            }
        }
        // Dominance: function values visible in the body, in order.
        let mut visible: HashSet<Value> = f.params.iter().copied().collect();
        let ops = f.regions[f.body].ops.clone();
        match ops.last() {
            Some(&last) if matches!(f.ops[last].kind, OpKind::Return) => {}
            _ => self.err(
                Diagnostic::error(format!("function `@{}` does not end with `return`", f.name))
                    .at(f.span, "missing `return`")
                    .with_help("end the body with `return %result`"),
            ),
        }
        for (i, &op) in ops.iter().enumerate() {
            self.check_operands_visible(op, &visible);
            self.check_place(op, OpPlace::Function);
            match &f.ops[op].kind {
                OpKind::Compute(c) => self.compute(op, c),
                OpKind::Return => {
                    if i + 1 != ops.len() {
                        self.err(Diagnostic::error("`return` must be the last op of the function").at(self.op_span(op), "ops follow it"));
                    }
                    self.return_op(op);
                }
                _ => {}
            }
            visible.extend(f.ops[op].results.iter().copied());
        }
    }

    fn tensor_size(&mut self, t: &TensorType, span: Span) {
        if t.shape.contains(&0) {
            self.err(Diagnostic::error(format!("tensor type `{t}` has a dimension of size 0")).at(span, "dimensions must be at least 1"));
        }
        if t.size_bytes().is_none_or(|b| b > types::MAX_TENSOR_BYTES) {
            self.err(Diagnostic::error(format!("tensor type `{t}` is too large")).at(span, "larger than 2^48 bytes"));
        }
    }

    fn check_operands_visible(&mut self, op: Op, visible: &HashSet<Value>) {
        for &v in &self.f.ops[op].operands {
            if !visible.contains(&v) {
                self.err(
                    Diagnostic::error(format!("operand {} of `{}` is not defined before its use", self.f.value_label(v), self.f.ops[op].kind.mnemonic()))
                        .at(self.op_span(op), "used here")
                        .with_secondary(self.value_span(v), "defined here"),
                );
            }
        }
    }

    fn check_place(&mut self, op: Op, place: OpPlace) {
        let kind = &self.f.ops[op].kind;
        if let Some(decl) = op_decl(kind.mnemonic()) {
            if !decl.place.allows(place) {
                let where_ = if place == OpPlace::Function { "a function body" } else { "a compute region" };
                self.err(Diagnostic::error(format!("`{}` cannot appear in {where_}", kind.mnemonic())).at(self.op_span(op), "misplaced op"));
            }
        }
    }

    fn return_op(&mut self, op: Op) {
        let f = self.f;
        let operands = &f.ops[op].operands;
        if operands.len() != f.result_types.len() {
            self.err(
                Diagnostic::error(format!("`return` has {} operand(s) but `@{}` returns {}", operands.len(), f.name, f.result_types.len()))
                    .at(self.op_span(op), "wrong number of results")
                    .with_secondary(f.span, "signature declared here"),
            );
            return;
        }
        for (i, (&v, t)) in operands.iter().zip(&f.result_types).enumerate() {
            if f.value_type(v) != &Type::Tensor(t.clone()) {
                self.err(
                    Diagnostic::error(format!("result {i} of `@{}` is declared `{t}` but `return` gives `{}`", f.name, f.value_type(v)))
                        .at(self.op_span(op), "type mismatch")
                        .with_secondary(self.value_span(v), "value defined here"),
                );
            }
        }
    }

    fn compute(&mut self, op: Op, c: &Compute) {
        let f = self.f;
        let data = &f.ops[op];
        let span = self.op_span(op);
        // Axes.
        let mut seen_reduction = false;
        for (i, a) in c.axes.iter().enumerate() {
            if a.extent == 0 {
                self.err(Diagnostic::error(format!("axis `{}` has extent 0", a.name)).at(a.span, "extent must be at least 1"));
            }
            if c.axes[..i].iter().any(|b| b.name == a.name) {
                self.err(Diagnostic::error(format!("axis `{}` is declared twice", a.name)).at(a.span, "duplicate axis"));
            }
            match a.kind {
                AxisKind::Reduction => seen_reduction = true,
                AxisKind::Spatial if seen_reduction => {
                    self.err(Diagnostic::error(format!("spatial axis `{}` follows a reduction axis", a.name)).at(a.span, "spatial axes come first"));
                }
                AxisKind::Spatial => {}
            }
        }
        if c.iteration_points().is_none() {
            self.err(Diagnostic::error("the iteration space of this compute op has more than 2^64 points").at(span, "too large"));
        }
        match (c.combiner, seen_reduction) {
            (Some(comb), false) => self.err(
                Diagnostic::error(format!("combiner `{}` without reduction axes", comb.name()))
                    .at(span, "nothing to reduce")
                    .with_help("declare reduction axes after the combiner, e.g. `reduce sum (k: 64)`"),
            ),
            (None, true) => self.err(Diagnostic::error("reduction axes without a combiner").at(span, "add `reduce sum|max|min`")),
            _ => {}
        }
        // Operands and regions.
        let nreads = c.reads.len() + c.epilogue_reads.len();
        if data.operands.len() != nreads {
            self.err(Diagnostic::error(format!("compute op has {} operands for {nreads} reads", data.operands.len())).at(span, "malformed compute op"));
            return;
        }
        let expected_regions = 1 + usize::from(c.has_epilogue);
        if data.regions.len() != expected_regions {
            self.err(Diagnostic::error(format!("compute op has {} regions, expected {expected_regions}", data.regions.len())).at(span, "malformed compute op"));
            return;
        }
        let Some(out_ty) = data.results.first().and_then(|&r| f.value_type(r).as_tensor()).filter(|_| data.results.len() == 1) else {
            self.err(Diagnostic::error("compute op must have exactly one tensor result").at(span, "malformed compute op"));
            return;
        };
        self.tensor_size(out_ty, span);
        for (i, (pos, read)) in c.all_reads().enumerate() {
            let epilogue = i >= c.reads.len();
            self.read(c, read, data.operands[pos], epilogue);
        }
        self.output(c, out_ty, span);

        // Body: arguments are the body reads' scalars.
        let body = data.regions[0];
        let body_args: Vec<Type> = data.operands[..c.reads.len()].iter().map(|&t| read_scalar_type(f, t)).collect();
        self.region_args(body, &body_args, "body", span);
        let acc = self.compute_region(c, body, false);
        if c.has_epilogue {
            let epi = data.regions[1];
            let mut epi_args = vec![acc.clone().map(Type::Scalar).unwrap_or(Type::Scalar(out_ty.elem))];
            epi_args.extend(data.operands[c.reads.len()..].iter().map(|&t| read_scalar_type(f, t)));
            self.region_args(epi, &epi_args, "epilogue", span);
            let y = self.compute_region(c, epi, true);
            if let Some(y) = y {
                if y != out_ty.elem {
                    self.yield_mismatch(epi, y, out_ty.elem, "the epilogue must yield the result's element type");
                }
            }
        } else if let Some(a) = acc {
            if a != out_ty.elem {
                self.yield_mismatch(body, a, out_ty.elem, "without an epilogue the body yields the result's element type; convert in an epilogue");
            }
        }
        // A reduction axis that no body read uses folds identical values.
        for a in c.reduction_axes() {
            let used = c.reads.iter().any(|r| r.indices.iter().any(|e| e.uses(a)))
                || f.regions[body].ops.iter().any(|&o| f.ops[o].kind == OpKind::AxisIndex(a));
            if !used {
                self.diags.push(
                    Diagnostic::warning(format!("reduction axis `{}` is not used by any read", c.axis(a).name))
                        .at(c.axis(a).span, "the fold repeats the same value")
                        .with_note(format!("the result is the body's value combined {} times with itself", c.axis(a).extent)),
                );
            }
        }
    }

    fn yield_mismatch(&mut self, region: Region, got: ElemType, want: ElemType, why: &str) {
        let at = self.f.regions[region].ops.last().map(|&o| self.op_span(o)).unwrap_or(Span::DUMMY);
        self.err(Diagnostic::error(format!("yields `{got}` but the result element type is `{want}`")).at(at, "type mismatch").with_note(why.to_string()));
    }

    fn region_args(&mut self, r: Region, expected: &[Type], what: &str, span: Span) {
        let args = &self.f.regions[r].args;
        if args.len() != expected.len() || args.iter().zip(expected).any(|(&a, t)| self.f.value_type(a) != t) {
            self.err(Diagnostic::error(format!("the {what} region's arguments do not match the reads")).at(span, "malformed compute op"));
        }
    }

    /// Checks one compute region; returns the type it yields.
    fn compute_region(&mut self, c: &Compute, r: Region, epilogue: bool) -> Option<ElemType> {
        let f = self.f;
        let mut visible: HashSet<Value> = f.regions[r].args.iter().copied().collect();
        let ops = &f.regions[r].ops;
        let mut yielded = None;
        let what = if epilogue { "epilogue" } else { "body" };
        match ops.last() {
            Some(&last) if f.ops[last].kind == OpKind::Yield => {}
            _ => {
                let at = ops.last().map(|&o| self.op_span(o)).unwrap_or(self.f.op_spans[f.regions[r].owner.expect("compute region")]);
                self.err(Diagnostic::error(format!("the compute {what} does not end with `yield`")).at(at, "missing `yield`").with_help("end the region with `yield %v : type`"));
            }
        }
        for (i, &op) in ops.iter().enumerate() {
            self.check_operands_visible(op, &visible);
            self.check_place(op, OpPlace::ComputeRegion);
            let ty = self.scalar_op(c, op, epilogue);
            if f.ops[op].kind == OpKind::Yield {
                if i + 1 != ops.len() {
                    self.err(Diagnostic::error("`yield` must be the last op of its region").at(self.op_span(op), "ops follow it"));
                }
                yielded = ty;
            }
            visible.extend(f.ops[op].results.iter().copied());
        }
        yielded
    }

    /// Checks a scalar op; returns its result type (or, for `yield`, the
    /// yielded type).
    fn scalar_op(&mut self, c: &Compute, op: Op, epilogue: bool) -> Option<ElemType> {
        let f = self.f;
        let data = &f.ops[op];
        let span = self.op_span(op);
        let m = data.kind.mnemonic();
        let operand_types: Vec<Option<ElemType>> = data.operands.iter().map(|&v| f.value_type(v).as_scalar()).collect();
        if operand_types.iter().any(Option::is_none) {
            self.err(Diagnostic::error(format!("`{m}` takes scalar operands")).at(span, "tensor operand"));
            return None;
        }
        let operand_types: Vec<ElemType> = operand_types.into_iter().flatten().collect();
        let result = data.results.first().map(|&r| f.value_type(r).as_scalar());
        let arity = |this: &mut Self, n: usize, results: usize| -> bool {
            if operand_types.len() != n || data.results.len() != results {
                this.err(Diagnostic::error(format!("`{m}` takes {n} operand(s) and {results} result(s)")).at(span, "wrong arity"));
                false
            } else {
                true
            }
        };
        match &data.kind {
            OpKind::Const(lit) => {
                if !arity(self, 0, 1) {
                    return None;
                }
                let t = result.flatten()?;
                match (lit, t.int_range()) {
                    (Literal::Int(i), Some((lo, hi))) if *i < lo || *i > hi => {
                        self.err(Diagnostic::error(format!("constant {i} does not fit in {t}")).at(span, "out of range"));
                    }
                    (Literal::Float(_), Some(_)) => self.err(Diagnostic::error(format!("float constant of integer type {t}")).at(span, "type mismatch")),
                    (Literal::Int(_), None) => self.err(Diagnostic::error(format!("integer constant of float type {t}")).at(span, "type mismatch")),
                    _ => {}
                }
                Some(t)
            }
            OpKind::AxisIndex(a) => {
                if !arity(self, 0, 1) {
                    return None;
                }
                let t = result.flatten()?;
                match c.axes.get(a.index()) {
                    None => self.err(Diagnostic::error(format!("`index` names {a}, which this compute op does not have")).at(span, "unknown axis")),
                    Some(axis) if epilogue && axis.kind == AxisKind::Reduction => {
                        self.err(Diagnostic::error(format!("reduction axis `{}` is not defined in the epilogue", axis.name)).at(span, "reduction axis"))
                    }
                    Some(axis) => {
                        if let Some((_, hi)) = t.int_range() {
                            if axis.extent.saturating_sub(1) > hi as u64 {
                                self.err(
                                    Diagnostic::error(format!("axis `{}` reaches {} which does not fit in {t}", axis.name, axis.extent.saturating_sub(1)))
                                        .at(span, "would wrap")
                                        .with_help("use i32 (or a float type)"),
                                );
                            }
                        }
                    }
                }
                Some(t)
            }
            OpKind::Unary(u) => {
                if !arity(self, 1, 1) {
                    return None;
                }
                let t = result.flatten()?;
                if operand_types[0] != t {
                    self.err(Diagnostic::error(format!("`{m}` operand has type `{}` but the op says `{t}`", operand_types[0])).at(span, "type mismatch"));
                }
                if u.float_only() && t.is_int() {
                    self.err(Diagnostic::error(format!("`{m}` is defined on float types only, not `{t}`")).at(span, "integer operand").with_help("cast to f32 first"));
                }
                Some(t)
            }
            OpKind::Binary(b) => {
                if !arity(self, 2, 1) {
                    return None;
                }
                let t = result.flatten()?;
                if operand_types.iter().any(|&o| o != t) {
                    self.err(
                        Diagnostic::error(format!("`{m}` operands have types `{}` and `{}` but the op says `{t}`", operand_types[0], operand_types[1]))
                            .at(span, "type mismatch")
                            .with_help("operands and result share one type; convert with `cast`"),
                    );
                }
                if b.float_only() && t.is_int() {
                    self.err(
                        Diagnostic::error(format!("`{m}` is defined on float types only, not `{t}`"))
                            .at(span, "integer operands")
                            .with_note("integer division is not in the dialect: its rounding and division by zero have no single answer"),
                    );
                }
                Some(t)
            }
            OpKind::Cast => {
                if !arity(self, 1, 1) {
                    return None;
                }
                result.flatten()
            }
            OpKind::Yield => {
                if !arity(self, 1, 0) {
                    return None;
                }
                Some(operand_types[0])
            }
            OpKind::Return | OpKind::Compute(_) => None,
            // TEMPORARY (branch level2): loop-level verification is being written.
            _ => None,
        }
    }

    fn read(&mut self, c: &Compute, read: &Read, tensor: Value, epilogue: bool) {
        let f = self.f;
        let Some(tt) = f.value_type(tensor).as_tensor() else {
            self.err(Diagnostic::error(format!("compute reads {tensor}, which is not a tensor")).at(self.value_span(tensor), "not a tensor"));
            return;
        };
        let read_span = read.index_spans.iter().copied().reduce(Span::to).unwrap_or(self.value_span(tensor));
        if read.indices.len() != tt.rank() {
            self.err(
                Diagnostic::error(format!("read of a rank-{} tensor `{tt}` has {} index expression(s)", tt.rank(), read.indices.len()))
                    .at(read_span, format!("expected {} indices", tt.rank())),
            );
            return;
        }
        if let Some(pad) = &read.pad {
            match (pad, tt.elem.int_range()) {
                (Literal::Float(_), Some(_)) => self.err(Diagnostic::error(format!("float pad value for a tensor of {}", tt.elem)).at(read_span, "type mismatch")),
                (Literal::Int(_), None) => self.err(Diagnostic::error(format!("integer pad value for a tensor of {}", tt.elem)).at(read_span, "type mismatch")),
                (Literal::Int(i), Some((lo, hi))) if *i < lo || *i > hi => {
                    self.err(Diagnostic::error(format!("pad value {i} does not fit in {}", tt.elem)).at(read_span, "out of range"))
                }
                _ => {}
            }
        }
        let range = |a: AxisId| (0i64, c.axes.get(a.index()).map_or(0, |x| x.extent.saturating_sub(1).min(i64::MAX as u64) as i64));
        for (d, (e, &dim)) in read.indices.iter().zip(&tt.shape).enumerate() {
            let span = read.index_spans.get(d).copied().unwrap_or(read_span);
            let text = e.to_string_with(|a| c.axes.get(a.index()).map_or_else(|| a.to_string(), |x| x.name.clone()));
            if let Some(a) = e.vars().find(|a| a.index() >= c.axes.len()) {
                self.err(Diagnostic::error(format!("index uses {a}, which this compute op does not have")).at(span, "unknown axis"));
                continue;
            }
            if epilogue {
                if let Some(a) = e.vars().find(|&a| c.axis(a).kind == AxisKind::Reduction) {
                    self.err(
                        Diagnostic::error(format!("epilogue read uses reduction axis `{}`", c.axis(a).name))
                            .at(span, "reduction axis")
                            .with_note("the epilogue runs once per output element, after the reduction"),
                    );
                    continue;
                }
            }
            let Some((lo, hi)) = e.numerator_range(range) else {
                self.err(Diagnostic::error(format!("index `{text}` overflows 64-bit arithmetic")).at(span, "too large"));
                continue;
            };
            if read.pad.is_some() {
                continue;
            }
            let d_ = e.divisor();
            if d_ != 1 && (e.constant_term() % d_ != 0 || e.terms().iter().any(|&(_, k)| k % d_ != 0)) {
                self.err(
                    Diagnostic::error(format!("index `{text}` of dimension {d} does not always divide exactly, and the read has no pad value"))
                        .at(span, "inexact division")
                        .with_help("add `pad(0.0)` (or the value inexact points should read)"),
                );
                continue;
            }
            let (vlo, vhi) = e.value_range(range).unwrap_or((lo, hi));
            if vlo < 0 || vhi >= dim as i64 {
                self.err(
                    Diagnostic::error(format!("index `{text}` of dimension {d} ranges over [{vlo}, {vhi}], outside [0, {}] of `{tt}`", dim as i64 - 1))
                        .at(span, "may read out of bounds")
                        .with_help("add `pad(<value>)` to the read to define out-of-bounds elements (e.g. `pad(0.0)` for zero padding)"),
                );
            }
        }
    }

    /// The output index must map the spatial axes one-to-one onto the result.
    fn output(&mut self, c: &Compute, out: &TensorType, span: Span) {
        if c.output.len() != out.rank() {
            self.err(
                Diagnostic::error(format!("result `{out}` has rank {} but the output index has {} expression(s)", out.rank(), c.output.len()))
                    .at(c.output_spans.iter().copied().reduce(Span::to).unwrap_or(span), format!("expected {} indices", out.rank())),
            );
            return;
        }
        let mut used: HashSet<AxisId> = HashSet::new();
        for (d, (e, &dim)) in c.output.iter().zip(&out.shape).enumerate() {
            let at = c.output_spans.get(d).copied().unwrap_or(span);
            let text = e.to_string_with(|a| c.axes.get(a.index()).map_or_else(|| a.to_string(), |x| x.name.clone()));
            if let Some(a) = e.vars().find(|a| a.index() >= c.axes.len() || c.axis(*a).kind == AxisKind::Reduction) {
                let name = c.axes.get(a.index()).map_or_else(|| a.to_string(), |x| x.name.clone());
                self.err(Diagnostic::error(format!("output index uses reduction axis `{name}`")).at(at, "only spatial axes index the result"));
                continue;
            }
            for a in e.vars() {
                if !used.insert(a) {
                    self.err(Diagnostic::error(format!("spatial axis `{}` appears twice in the output index", c.axis(a).name)).at(at, "used again"));
                }
            }
            if !is_mixed_radix_onto(c, e, dim) {
                self.err(
                    Diagnostic::error(format!("output index `{text}` does not cover dimension {d} (size {dim}) exactly once"))
                        .at(at, "not a one-to-one map")
                        .with_note("each output dimension is an axis, or a mixed-radix sum like `g * 16 + f` whose coefficients multiply up to the size"),
                );
            }
        }
        for a in c.spatial_axes() {
            if !used.contains(&a) {
                self.err(
                    Diagnostic::error(format!("spatial axis `{}` does not appear in the output index", c.axis(a).name))
                        .at(c.axis(a).span, "never indexes the result")
                        .with_help("make it a reduction axis, or use it in the output index"),
                );
            }
        }
    }
}

/// Does `e` map the box of its axes one-to-one onto `[0, dim)`? True for
/// `sum cᵢ·aᵢ` with coefficients, sorted, `1, e₁, e₁·e₂, ...` and product
/// of extents `dim` (a mixed-radix numeral); a constant 0 covers a size-1
/// dimension.
fn is_mixed_radix_onto(c: &Compute, e: &AffineExpr<AxisId>, dim: u64) -> bool {
    if e.divisor() != 1 || e.constant_term() != 0 {
        return false;
    }
    let mut terms: Vec<(i64, u64)> = e.terms().iter().map(|&(a, k)| (k, c.axis(a).extent)).collect();
    terms.sort();
    let mut radix: u64 = 1;
    for (k, extent) in terms {
        if k <= 0 || k as u64 != radix {
            return false;
        }
        radix = match radix.checked_mul(extent) {
            Some(r) => r,
            None => return false,
        };
    }
    radix == dim
}

fn read_scalar_type(f: &Function, tensor: Value) -> Type {
    Type::Scalar(f.value_type(tensor).as_tensor().map_or(ElemType::F32, |t| t.elem))
}
