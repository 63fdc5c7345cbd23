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
/// Schedules are checked against the built-in targets.
pub fn verify_module(m: &Module) -> Diagnostics {
    verify_module_with(m, None)
}

/// Like [`verify_module`], resolving schedules naming `target` to it (the
/// `--target` of a run) and others to the built-in targets.
pub fn verify_module_with(m: &Module, target: Option<&crate::target::Target>) -> Diagnostics {
    let mut diags = Diagnostics::new();
    for (i, f) in m.funcs.iter().enumerate() {
        if let Some(first) = m.funcs[..i].iter().find(|g| g.name == f.name) {
            diags.push(
                Diagnostic::error(format!("function `@{}` is defined twice", f.name))
                    .at(f.span, "defined again here")
                    .with_secondary(first.span, "first defined here"),
            );
        }
        diags.extend(verify_function_with(f, target));
    }
    diags
}

pub fn verify_function(f: &Function) -> Diagnostics {
    verify_function_with(f, None)
}

pub fn verify_function_with(f: &Function, target: Option<&crate::target::Target>) -> Diagnostics {
    let mut v = Verifier { f, diags: Diagnostics::new(), target };
    v.function();
    v.diags
}

struct Verifier<'f> {
    f: &'f Function,
    diags: Diagnostics,
    /// The run's target, for schedules naming it.
    target: Option<&'f crate::target::Target>,
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
        match f.regions[f.body].ops.last() {
            Some(&last) if matches!(f.ops[last].kind, OpKind::Return) => {}
            _ => self.err(
                Diagnostic::error(format!("function `@{}` does not end with `return`", f.name))
                    .at(f.span, "missing `return`")
                    .with_help("end the body with `return %result`"),
            ),
        }
        // Dominance: function values visible in the body, in order; loop
        // regions see what encloses them.
        let mut visible = Visible::default();
        for &p in &f.params {
            visible.add(p);
        }
        self.block(f.body, OpPlace::Function, &LoopCtx { function_level: true, ..LoopCtx::default() }, &mut visible);
    }

    /// Checks the ops of the function body or of a loop-level region.
    fn block(&mut self, r: Region, place: OpPlace, ctx: &LoopCtx, visible: &mut Visible) {
        let f = self.f;
        let ops = &f.regions[r].ops;
        for (i, &op) in ops.iter().enumerate() {
            self.check_operands_visible(op, &visible.set);
            self.check_place(op, place);
            match &f.ops[op].kind {
                OpKind::Compute(c) => self.compute(op, c),
                OpKind::Weight(name) => self.weight(op, name),
                OpKind::Reshape => self.reshape(op),
                OpKind::Return => {
                    if place == OpPlace::Function && i + 1 != ops.len() {
                        self.err(Diagnostic::error("`return` must be the last op of the function").at(self.op_span(op), "ops follow it"));
                    }
                    self.return_op(op);
                }
                kind if kind.is_loop_level() => self.loop_op(op, ctx, visible),
                _ if place == OpPlace::Loops => {
                    self.scalar_op(None, op, false);
                }
                _ => {}
            }
            for &v in &f.ops[op].results {
                visible.add(v);
            }
        }
    }

    /// A weight: no operands, one tensor result of a valid size, a name no
    /// other weight of the function has (a weights file holds one tensor
    /// per name).
    fn weight(&mut self, op: Op, name: &str) {
        if !self.arity(op, Some(0), 1, 0) {
            return;
        }
        let f = self.f;
        let span = self.op_span(op);
        match f.value_type(f.result(op)) {
            Type::Tensor(t) => self.tensor_size(t, span),
            other => self.err(Diagnostic::error(format!("a weight is a tensor, not `{other}`")).at(span, "not a tensor")),
        }
        if name.is_empty() {
            self.err(Diagnostic::error("a weight's name is empty").at(span, "empty name"));
        }
        let first = f.regions[f.body].ops.iter().copied().find(|&o| matches!(&f.ops[o].kind, OpKind::Weight(n) if **n == *name));
        if let Some(first) = first.filter(|&o| o != op) {
            self.err(
                Diagnostic::error(format!("weight \"{name}\" is declared twice"))
                    .at(span, "declared again here")
                    .with_secondary(self.op_span(first), "first declared here")
                    .with_help("declare each weight once and use its value wherever it is read"),
            );
        }
    }

    /// A reshape: one operand, a tensor or (after `tile`) a global buffer;
    /// one tensor result with the operand's element type and number of
    /// elements.
    fn reshape(&mut self, op: Op) {
        if !self.arity(op, Some(1), 1, 0) {
            return;
        }
        let f = self.f;
        let span = self.op_span(op);
        let from = match f.value_type(f.ops[op].operands[0]) {
            Type::Tensor(t) => t.clone(),
            Type::Buffer(b) if b.scope == MemScope::Global => b.as_tensor_type(),
            other => {
                self.err(
                    Diagnostic::error(format!("`reshape` takes a tensor, not `{other}`"))
                        .at(span, "not a tensor")
                        .with_help("reshape a parameter or a compute op's result"),
                );
                return;
            }
        };
        let Type::Tensor(to) = f.value_type(f.result(op)) else {
            self.err(Diagnostic::error("`reshape` makes a tensor").at(span, "the result is not a tensor").with_help("write `%v = reshape %x : tensor<4x4xf32> -> tensor<16xf32>`"));
            return;
        };
        self.tensor_size(to, span);
        if from.elem != to.elem {
            self.err(
                Diagnostic::error(format!("`reshape` keeps the element type: `{}` cannot become `{}`", from.elem, to.elem))
                    .at(span, "element types differ")
                    .with_help("convert elements in a compute op with `cast`"),
            );
        }
        let (n_from, n_to) = (from.num_elements(), to.num_elements());
        if n_from != n_to {
            let count = |n: Option<u64>| n.map_or("more than 2^64".to_string(), |n| n.to_string());
            self.err(
                Diagnostic::error(format!("`reshape` keeps the number of elements: {from} has {}, {to} has {}", count(n_from), count(n_to)))
                    .at(span, "element counts differ")
                    .with_help("the new shape's dimensions must multiply to the operand's number of elements"),
            );
        }
    }

    fn tensor_size(&mut self, t: &TensorType, span: Span) {
        self.shape_size(&t.to_string(), "tensor", t, span);
    }

    /// Dimensions at least 1 and at most 2^48 bytes, for tensors and buffers.
    fn shape_size(&mut self, text: &str, what: &str, t: &TensorType, span: Span) {
        if t.shape.contains(&0) {
            self.err(Diagnostic::error(format!("{what} type `{text}` has a dimension of size 0")).at(span, "dimensions must be at least 1"));
        }
        if t.size_bytes().is_none_or(|b| b > types::MAX_TENSOR_BYTES) {
            self.err(Diagnostic::error(format!("{what} type `{text}` is too large")).at(span, "larger than 2^48 bytes"));
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
                let where_ = match place {
                    OpPlace::Function => "a function body",
                    OpPlace::Loops => "a loop region",
                    _ => "a compute region",
                };
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
            let ok = match f.value_type(v) {
                Type::Tensor(tt) => tt == t,
                // A kernel's result buffer is returned as the tensor it holds.
                Type::Buffer(b) if b.as_tensor_type() == *t => {
                    if b.scope != MemScope::Global {
                        self.err(
                            Diagnostic::error(format!("result {i} of `@{}` is a `{}` buffer; only `global` buffers can be returned", f.name, b.scope.name()))
                                .at(self.op_span(op), "not a global buffer")
                                .with_secondary(self.value_span(v), "allocated here"),
                        );
                    }
                    true
                }
                _ => false,
            };
            if !ok {
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
        if let Some(sched) = &c.schedule {
            let owner = ScheduleOwner::Compute { axes: &c.axes, reads: nreads };
            let before = self.diags.len();
            verify_schedule_structure(sched, &owner, span, &mut self.diags);
            // Resource limits need a well-formed schedule and its target.
            if self.diags.len() == before {
                self.schedule_resources(op, sched, span);
            }
        }
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
            let ty = self.scalar_op(Some(c), op, epilogue);
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
    /// `c` is the enclosing compute op, `None` in loops.
    fn scalar_op(&mut self, c: Option<&Compute>, op: Op, epilogue: bool) -> Option<ElemType> {
        let f = self.f;
        let data = &f.ops[op];
        let span = self.op_span(op);
        let m = data.kind.mnemonic();
        if let OpKind::IndexValue(_) = data.kind {
            // In loops `loop_op` checks it; here it is the wrong form.
            self.err(
                Diagnostic::error("`index` over index values belongs in loops; in a compute region it names an axis")
                    .at(span, "index expression in a compute region"),
            );
            return None;
        }
        if data.kind.is_loop_level() {
            // Misplaced, which `check_place` reports.
            return None;
        }
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
                let Some(c) = c else {
                    self.err(
                        Diagnostic::error("`index` names an axis, but there is no compute op here")
                            .at(span, "axis index in a loop region")
                            .with_help("in loops, `index` takes an expression over index values: `%x = index %i * 4 + %p : i32`"),
                    );
                    return Some(t);
                };
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
            OpKind::Return | OpKind::Compute(_) | OpKind::Weight(_) | OpKind::Reshape => None,
            // Filtered out above.
            OpKind::IndexValue(_)
            | OpKind::Alloc
            | OpKind::For(_)
            | OpKind::Load(_)
            | OpKind::Store(_)
            | OpKind::Copy(_)
            | OpKind::Fill(_)
            | OpKind::Intrinsic(_)
            | OpKind::Barrier
            | OpKind::If(_)
            | OpKind::Kernel(_) => None,
        }
    }

    fn read(&mut self, c: &Compute, read: &Read, tensor: Value, epilogue: bool) {
        let f = self.f;
        // Compute ops read tensors, and buffers that loops wrote.
        let Some(tt) = f.value_type(tensor).readable() else {
            self.err(Diagnostic::error(format!("compute reads {tensor}, which is not a tensor or buffer")).at(self.value_span(tensor), "not a tensor"));
            return;
        };
        let tt = &tt;
        // Messages name the type as written (a tensor or a buffer).
        let ty = f.value_type(tensor);
        let read_span = read.index_spans.iter().copied().reduce(Span::to).unwrap_or(self.value_span(tensor));
        if read.indices.len() != tt.rank() {
            let what = if ty.as_buffer().is_some() { "buffer" } else { "tensor" };
            self.err(
                Diagnostic::error(format!("read of a rank-{} {what} `{ty}` has {} index expression(s)", tt.rank(), read.indices.len()))
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
                    Diagnostic::error(format!("index `{text}` of dimension {d} ranges over [{vlo}, {vhi}], outside [0, {}] of `{ty}`", dim as i64 - 1))
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

/// Values visible where ops are being checked: a set for lookups and the
/// order they were added in, so a region's values can be dropped when it
/// ends (values of loop regions are not visible after them).
#[derive(Default)]
struct Visible {
    set: HashSet<Value>,
    order: Vec<Value>,
}

impl Visible {
    fn add(&mut self, v: Value) {
        if self.set.insert(v) {
            self.order.push(v);
        }
    }

    fn mark(&self) -> usize {
        self.order.len()
    }

    fn end(&mut self, mark: usize) {
        for v in self.order.drain(mark..) {
            self.set.remove(&v);
        }
    }
}

/// Where loop-level ops being checked are.
#[derive(Clone, Default)]
struct LoopCtx {
    /// The enclosing `for` ops, outermost first.
    loops: Vec<Op>,
    /// Inside an `if`: accesses are bounds-checked at run time (by the
    /// interpreter), not statically, because the guard is what keeps them in
    /// bounds.
    guarded: bool,
    /// Directly in the function body.
    function_level: bool,
}

/// The loop-level rules (level 2): op shapes and types, placement of
/// allocations, mappings of loop nests, static bounds of accesses.
impl Verifier<'_> {
    fn loop_op(&mut self, op: Op, ctx: &LoopCtx, visible: &mut Visible) {
        let f = self.f;
        match &f.ops[op].kind {
            OpKind::Alloc => self.alloc(op, ctx),
            OpKind::For(l) => self.for_op(op, l, ctx, visible),
            OpKind::If(g) => self.if_op(op, g, ctx, visible),
            OpKind::Kernel(k) => self.kernel_op(op, k, ctx, visible),
            OpKind::Load(a) => self.load(op, a, ctx),
            OpKind::Store(a) => self.store(op, a, ctx),
            OpKind::Copy(c) => self.copy(op, c, ctx),
            OpKind::Fill(lit) => self.fill(op, lit),
            OpKind::Intrinsic(x) => self.intrinsic(op, x, ctx),
            OpKind::Barrier => {
                self.arity(op, Some(0), 0, 0);
            }
            OpKind::IndexValue(e) => self.index_value(op, e),
            _ => {}
        }
    }

    /// Checks the numbers of operands (`None`: at least the ones the op
    /// needs, checked by the caller), results and regions.
    fn arity(&mut self, op: Op, operands: Option<usize>, results: usize, regions: usize) -> bool {
        let data = &self.f.ops[op];
        let ok = operands.is_none_or(|n| data.operands.len() == n) && data.results.len() == results && data.regions.len() == regions;
        if !ok {
            self.err(
                Diagnostic::error(format!(
                    "malformed `{}`: {} operand(s), {} result(s) and {} region(s)",
                    data.kind.mnemonic(),
                    data.operands.len(),
                    data.results.len(),
                    data.regions.len()
                ))
                .at(self.op_span(op), "malformed op"),
            );
        }
        ok
    }

    /// Enters a loop-level region: its arguments become visible, its ops are
    /// checked, and its values are dropped afterwards.
    fn loop_region(&mut self, r: Region, ctx: &LoopCtx, visible: &mut Visible) {
        let mark = visible.mark();
        for &a in &self.f.regions[r].args {
            visible.add(a);
        }
        self.block(r, OpPlace::Loops, ctx, visible);
        visible.end(mark);
    }

    fn mapping_of(&self, op: Op) -> Mapping {
        match &self.f.ops[op].kind {
            OpKind::For(l) => l.mapping,
            _ => Mapping::Serial,
        }
    }

    fn alloc(&mut self, op: Op, ctx: &LoopCtx) {
        if !self.arity(op, Some(0), 1, 0) {
            return;
        }
        let span = self.op_span(op);
        let Type::Buffer(b) = self.f.value_type(self.f.ops[op].results[0]) else {
            let t = self.f.value_type(self.f.ops[op].results[0]);
            self.err(Diagnostic::error(format!("`alloc` must define a buffer, not `{t}`")).at(span, "not a buffer"));
            return;
        };
        self.shape_size(&b.to_string(), "buffer", &b.as_tensor_type(), span);
        match b.scope {
            MemScope::Global if !ctx.function_level => self.err(
                Diagnostic::error("`global` buffers are allocated in the function body")
                    .at(span, "inside a loop region")
                    .with_help("allocate it before the loops; kernels write their results into buffers of the function"),
            ),
            MemScope::Shared => {
                if let Some(&t) = ctx.loops.iter().rev().find(|&&l| self.mapping_of(l).is_gpu_thread()) {
                    self.err(
                        Diagnostic::error("`shared` buffer allocated inside a thread-mapped loop")
                            .at(span, "one copy per block, not per thread")
                            .with_secondary(self.op_span(t), "thread-mapped loop")
                            .with_help("allocate it in the block-mapped loop, before the thread loops"),
                    );
                }
            }
            _ => {}
        }
    }

    fn for_op(&mut self, op: Op, l: &ForLoop, ctx: &LoopCtx, visible: &mut Visible) {
        if !self.arity(op, Some(0), 0, 1) {
            return;
        }
        let f = self.f;
        let span = self.op_span(op);
        let body = f.ops[op].regions[0];
        let args = &f.regions[body].args;
        if args.len() != 1 || f.value_type(args[0]) != &Type::Index {
            self.err(Diagnostic::error("the body of `for` must have one argument of type `index`").at(span, "malformed loop"));
            return;
        }
        if l.extent == 0 {
            self.err(Diagnostic::error("loop extent must be at least 1").at(span, "runs no iteration"));
        }
        if let Some(&v) = ctx.loops.iter().find(|&&o| self.mapping_of(o) == Mapping::Vector) {
            self.err(
                Diagnostic::error("loop inside a `vector` loop")
                    .at(span, "nested in a vector loop")
                    .with_secondary(self.op_span(v), "vector loop")
                    .with_note("a vector loop is innermost: its iterations become the lanes of vector instructions"),
            );
        }
        self.mapping(op, l.mapping, ctx);
        let mut inner = ctx.clone();
        inner.loops.push(op);
        inner.function_level = false;
        self.loop_region(body, &inner, visible);
    }

    /// The rules of mapped loop nests: GPU threads inside blocks, each
    /// hardware dimension once per nest, one level of CPU parallelism, and
    /// no mixing of CPU and GPU mappings.
    fn mapping(&mut self, op: Op, m: Mapping, ctx: &LoopCtx) {
        let span = self.op_span(op);
        let find = |this: &Self, pred: &dyn Fn(Mapping) -> bool| ctx.loops.iter().rev().copied().find(|&o| pred(this.mapping_of(o)));
        let gpu = |m: Mapping| matches!(m, Mapping::Block(_) | Mapping::Thread(_));
        match m {
            Mapping::Block(_) | Mapping::Thread(_) => {
                if let Some(o) = find(self, &|x| x == m) {
                    self.err(
                        Diagnostic::error(format!("`{m}` is mapped twice on this loop nest"))
                            .at(span, "mapped again")
                            .with_secondary(self.op_span(o), "first mapped here")
                            .with_note("each grid and block dimension indexes one loop of a nest"),
                    );
                }
                if let Some(o) = find(self, &|x| x == Mapping::Parallel) {
                    self.err(
                        Diagnostic::error("CPU (`parallel`) and GPU mappings are mixed on this loop nest")
                            .at(span, "GPU mapping")
                            .with_secondary(self.op_span(o), "`parallel` loop"),
                    );
                }
            }
            Mapping::Parallel => {
                // Directly nested parallel loops (each the only op of the
                // outer one's body) form one parallel region over their
                // product; a parallel loop deeper inside is an error.
                let parent_region = self.f.ops[op].parent;
                let direct = |o: Op| self.f.regions[parent_region].owner == Some(o) && self.f.regions[parent_region].ops.len() == 1;
                if let Some(o) = find(self, &|x| x == Mapping::Parallel).filter(|&o| !direct(o)) {
                    self.err(
                        Diagnostic::error("`parallel` loop nested in a `parallel` loop")
                            .at(span, "nested parallel loop")
                            .with_secondary(self.op_span(o), "outer `parallel` loop")
                            .with_help("parallel loops form one region only when directly nested, each the only op of the loop around it"),
                    );
                }
                if let Some(o) = find(self, &gpu) {
                    self.err(
                        Diagnostic::error("CPU (`parallel`) and GPU mappings are mixed on this loop nest")
                            .at(span, "`parallel` loop")
                            .with_secondary(self.op_span(o), "GPU-mapped loop"),
                    );
                }
            }
            _ => {}
        }
        if m == Mapping::Lane {
            self.lane_loop(op);
        }
        if matches!(m, Mapping::Thread(_))
            && let Some(o) = find(self, &|x| x == Mapping::Lane)
        {
            self.err(
                Diagnostic::error(format!("thread-mapped loop `map({m})` inside a lane loop"))
                    .at(span, "warps contain lanes, not threads")
                    .with_secondary(self.op_span(o), "lane loop"),
            );
        }
        if matches!(m, Mapping::Block(_))
            && let Some(o) = find(self, &|x| x.is_gpu_thread())
        {
            self.err(
                Diagnostic::error(format!("block-mapped loop `map({m})` inside a thread-mapped loop"))
                    .at(span, "blocks contain threads, not the other way round")
                    .with_secondary(self.op_span(o), "thread-mapped loop"),
            );
        }
    }

    /// A `lane` loop: directly inside a thread or lane loop (its only op),
    /// and, at the outermost one, lane loops splitting a warp's 32 lanes.
    fn lane_loop(&mut self, op: Op) {
        let f = self.f;
        let span = self.op_span(op);
        let parent = f.ops[op].parent;
        let owner = f.regions[parent].owner;
        let direct = f.regions[parent].ops.len() == 1;
        let owner_mapping = owner.filter(|&o| matches!(f.ops[o].kind, OpKind::For(_))).map(|o| self.mapping_of(o));
        if !direct || !owner_mapping.is_some_and(Mapping::is_gpu_thread) {
            self.err(
                Diagnostic::error("a `lane` loop must be the only op of a thread or lane loop")
                    .at(span, "not directly inside a thread loop")
                    .with_note("the lane loops split each thread's iteration into the 32 lanes of a warp"),
            );
            return;
        }
        if owner_mapping == Some(Mapping::Lane) {
            return;
        }
        let mut lanes = 1u64;
        let mut at = op;
        while let OpKind::For(l) = &f.ops[at].kind
            && l.mapping == Mapping::Lane
        {
            lanes = lanes.saturating_mul(l.extent);
            match f.regions[f.ops[at].regions[0]].ops.as_slice() {
                [only] => at = *only,
                _ => break,
            }
        }
        if lanes != WARP_LANES {
            self.err(
                Diagnostic::error(format!("the lane loops here split {lanes} lanes, not a warp's {WARP_LANES}"))
                    .at(span, "lane loops")
                    .with_help("nest lane loops whose extents multiply to 32 (`mma` uses 8 × 4: the lane's group and its index in it)"),
            );
        }
    }

    fn if_op(&mut self, op: Op, g: &Guard, ctx: &LoopCtx, visible: &mut Visible) {
        if !self.arity(op, None, 0, 1) {
            return;
        }
        let span = self.op_span(op);
        if g.conds.is_empty() {
            self.err(Diagnostic::error("`if` has no condition").at(span, "malformed guard"));
        }
        self.index_operands(op, 0, g.conds.iter().map(|(e, _)| e));
        let body = self.f.ops[op].regions[0];
        if !self.f.regions[body].args.is_empty() {
            self.err(Diagnostic::error("the body of `if` takes no arguments").at(span, "malformed guard"));
        }
        let inner = LoopCtx { guarded: true, function_level: false, ..ctx.clone() };
        self.loop_region(body, &inner, visible);
    }

    fn kernel_op(&mut self, op: Op, k: &Kernel, ctx: &LoopCtx, visible: &mut Visible) {
        if !self.arity(op, Some(0), 0, 1) {
            return;
        }
        let body = self.f.ops[op].regions[0];
        if !self.f.regions[body].args.is_empty() {
            self.err(Diagnostic::error("the body of `kernel` takes no arguments").at(self.op_span(op), "malformed kernel"));
        }
        let tags = self.f.load_read_tags(body);
        verify_schedule_structure(&k.schedule, &ScheduleOwner::Kernel { read_tags: &tags }, self.op_span(op), &mut self.diags);
        let inner = LoopCtx { function_level: false, ..ctx.clone() };
        self.loop_region(body, &inner, visible);
        if k.prepack {
            self.prepack_kernel(op, body);
        }
    }

    /// A `prepack` kernel lays out constants: it reads parameters, weights
    /// and its own buffers, and what it writes nothing else writes (so a
    /// runtime may run it once per set of weights).
    fn prepack_kernel(&mut self, kernel: Op, body: Region) {
        let mut own = Vec::new();
        let mut pending = vec![body];
        let mut ops = Vec::new();
        while let Some(r) = pending.pop() {
            for &o in &self.f.regions[r].ops {
                ops.push(o);
                own.extend(self.f.ops[o].results.iter().copied());
                pending.extend(self.f.ops[o].regions.iter().copied());
            }
        }
        let mut laid_out = Vec::new();
        for &o in &ops {
            let (reads, writes) = reads_and_writes(self.f, o);
            let constant = |v: Value| match self.f.values[v].def {
                ValueDef::Param(_) => true,
                ValueDef::Result(d, _) => matches!(self.f.ops[d].kind, OpKind::Weight(_)),
                ValueDef::RegionArg(..) => false,
            };
            if let Some(&v) = reads.iter().find(|&&v| !constant(v) && !own.contains(&v)) {
                let name = self.f.value_label(v);
                self.err(
                    Diagnostic::error(format!("a `prepack` kernel reads only parameters, weights and its own buffers; it reads {name}"))
                        .at(self.op_span(o), "reads a value another op computes")
                        .with_help("a prepack kernel may run once per set of weights, before anything else; drop `prepack`, or read a weight"),
                );
            }
            // (Writes are to buffers: tensors are read-only, and a kernel
            // is in the function body, where buffers are global.)
            laid_out.extend(writes.iter().copied().filter(|v| !own.contains(v)));
        }
        // What it lays out stays as it left it.
        for o in self.f.walk() {
            if ops.contains(&o) || o == kernel {
                continue;
            }
            if let Some(&v) = reads_and_writes(self.f, o).1.iter().find(|v| laid_out.contains(v)) {
                let name = self.f.value_label(v);
                self.err(
                    Diagnostic::error(format!("{name} is laid out by a `prepack` kernel, and written again here"))
                        .at(self.op_span(o), "writes a prepacked buffer")
                        .with_secondary(self.op_span(kernel), "the prepack kernel")
                        .with_help("a prepack kernel may run once per set of weights: nothing else may write what it writes"),
                );
            }
        }
    }

    /// The operands from `base` on are index values, and every variable of
    /// `exprs` is one of them.
    fn index_operands<'e>(&mut self, op: Op, base: usize, exprs: impl Iterator<Item = &'e AffineExpr<Dim>>) -> bool {
        let f = self.f;
        let data = &f.ops[op];
        let m = data.kind.mnemonic();
        let mut ok = true;
        for &v in data.operands.iter().skip(base) {
            let t = f.value_type(v);
            if t != &Type::Index {
                self.err(
                    Diagnostic::error(format!("index operand {} of `{m}` has type `{t}`, not `index`", f.value_label(v)))
                        .at(self.op_span(op), "not an index value")
                        .with_secondary(self.value_span(v), "defined here")
                        .with_note("index expressions are affine in index values: loop variables"),
                );
                ok = false;
            }
        }
        for e in exprs {
            if let Some(d) = e.vars().find(|d| d.index() < base || d.index() >= data.operands.len()) {
                self.err(
                    Diagnostic::error(format!("an index expression of `{m}` uses operand {}, which is not one of its index operands", d.index()))
                        .at(self.op_span(op), "malformed index expression"),
                );
                ok = false;
            }
        }
        ok
    }

    /// How messages write an index expression of a loop-level op.
    fn index_text(&self, op: Op, e: &AffineExpr<Dim>) -> String {
        let operands = &self.f.ops[op].operands;
        e.to_string_with(|d| match operands.get(d.index()).and_then(|&v| self.f.values[v].name.clone()) {
            Some(n) => format!("%{n}"),
            None => format!("%{}", operands.get(d.index()).map_or_else(|| d.to_string(), |v| v.to_string())),
        })
    }

    /// The exact range of an expression's numerator over the enclosing
    /// loops: `None` when a variable is not a loop variable (reported
    /// elsewhere) or on overflow.
    fn numerator_range(&self, op: Op, e: &AffineExpr<Dim>) -> Option<(i64, i64)> {
        let operands = &self.f.ops[op].operands;
        let mut extents = Vec::new();
        for d in e.vars() {
            let v = *operands.get(d.index())?;
            let extent = self.f.loop_extent(v)?;
            if extent == 0 {
                return None;
            }
            extents.push((d, extent.min(i64::MAX as u64) as i64 - 1));
        }
        e.numerator_range(|d| (0, extents.iter().find(|&&(x, _)| x == d).map_or(0, |&(_, hi)| hi)))
    }

    /// Static bounds of an access to `ty`: over the enclosing loops, each
    /// index divides exactly and the box from it (`sizes`, 1 for loads and
    /// stores) stays inside the dimension.
    fn access_bounds(&mut self, op: Op, what: &str, exprs: &[AffineExpr<Dim>], sizes: Option<&[u64]>, ty: &Type, help: &str) {
        let Some(tt) = ty.readable() else { return };
        for (d, (e, &dim)) in exprs.iter().zip(&tt.shape).enumerate() {
            let text = self.index_text(op, e);
            let Some((lo, hi)) = self.numerator_range(op, e) else { continue };
            let div = e.divisor();
            if div != 1 && (e.constant_term() % div != 0 || e.terms().iter().any(|&(_, k)| k % div != 0)) {
                self.err(
                    Diagnostic::error(format!("index `{text}` of dimension {d} does not always divide exactly, and the {what} has no pad value"))
                        .at(self.op_span(op), "inexact division")
                        .with_help(help.to_string()),
                );
                continue;
            }
            // Exact from here on: every coefficient and the constant are
            // multiples of the divisor.
            let (vlo, mut vhi) = (lo / div, hi / div);
            let size = sizes.and_then(|s| s.get(d).copied()).unwrap_or(1);
            vhi = vhi.saturating_add(size.saturating_sub(1).min(i64::MAX as u64) as i64);
            if vlo < 0 || vhi >= dim as i64 {
                let covers = if size > 1 { format!(" spanning {size} elements covers [{vlo}, {vhi}]") } else { format!(" ranges over [{vlo}, {vhi}]") };
                self.err(
                    Diagnostic::error(format!("{what} index `{text}` of dimension {d}{covers}, outside [0, {}] of `{ty}`", dim as i64 - 1))
                        .at(self.op_span(op), format!("{what} may be out of bounds"))
                        .with_help(help.to_string()),
                );
            }
        }
    }

    /// A literal written into (or read as) element type `elem`.
    fn literal_fits(&mut self, lit: &Literal, elem: ElemType, what: &str, span: Span) {
        match (lit, elem.int_range()) {
            (Literal::Float(_), Some(_)) => self.err(Diagnostic::error(format!("float {what} for elements of {elem}")).at(span, "type mismatch")),
            (Literal::Int(_), None) => self.err(Diagnostic::error(format!("integer {what} for elements of {elem}")).at(span, "type mismatch")),
            (Literal::Int(i), Some((lo, hi))) if *i < lo || *i > hi => {
                self.err(Diagnostic::error(format!("{what} {i} does not fit in {elem}")).at(span, "out of range"))
            }
            _ => {}
        }
    }

    /// The buffer an op writes; tensors are read-only.
    fn written_buffer(&mut self, op: Op, v: Value) -> Option<BufferType> {
        let m = self.f.ops[op].kind.mnemonic();
        match self.f.value_type(v) {
            Type::Buffer(b) => Some(b.clone()),
            Type::Tensor(t) => {
                self.err(
                    Diagnostic::error(format!("`{m}` writes {}, a tensor; tensors are read-only", self.f.value_label(v)))
                        .at(self.op_span(op), "writes a tensor")
                        .with_secondary(self.value_span(v), format!("`{t}` defined here"))
                        .with_help("write into a buffer (`alloc`) and return the buffer"),
                );
                None
            }
            other => {
                self.err(Diagnostic::error(format!("`{m}` writes {}, which is not a buffer but `{other}`", self.f.value_label(v))).at(self.op_span(op), "not a buffer"));
                None
            }
        }
    }

    fn rank_matches(&mut self, op: Op, what: &str, n: usize, t: &Type, rank: usize) -> bool {
        if n != rank {
            self.err(
                Diagnostic::error(format!("{what} of a rank-{rank} `{t}` has {n} index expression(s)"))
                    .at(self.op_span(op), format!("expected {rank} indices")),
            );
        }
        n == rank
    }

    fn load(&mut self, op: Op, a: &Access, ctx: &LoopCtx) {
        let f = self.f;
        let data = &f.ops[op];
        if data.operands.is_empty() || !self.arity(op, None, 1, 0) {
            self.arity(op, Some(1), 1, 0);
            return;
        }
        let span = self.op_span(op);
        let src = data.operands[0];
        let src_ty = f.value_type(src);
        let Some(tt) = src_ty.readable() else {
            self.err(Diagnostic::error(format!("`load` reads {}, which is not a tensor or buffer but `{src_ty}`", f.value_label(src))).at(span, "not readable"));
            return;
        };
        let result = f.value_type(data.results[0]);
        if result != &Type::Scalar(tt.elem) {
            self.err(
                Diagnostic::error(format!("`load` from `{src_ty}` has type `{}`, not `{result}`", tt.elem))
                    .at(span, "type mismatch")
                    .with_help(format!("write `: {}`", tt.elem)),
            );
        }
        if let Some(p) = &a.pad {
            self.literal_fits(p, tt.elem, "pad value", span);
        }
        let ok = self.index_operands(op, 1, a.indices.iter());
        if self.rank_matches(op, "`load`", a.indices.len(), src_ty, tt.rank()) && ok && a.pad.is_none() && !ctx.guarded {
            let help = "add `pad(<value>)` to define out-of-bounds elements, or guard the load with `if`";
            self.access_bounds(op, "load", &a.indices, None, src_ty, help);
        }
    }

    fn store(&mut self, op: Op, a: &Access, ctx: &LoopCtx) {
        let f = self.f;
        let data = &f.ops[op];
        if data.operands.len() < 2 || !self.arity(op, None, 0, 0) {
            self.arity(op, Some(2), 0, 0);
            return;
        }
        let span = self.op_span(op);
        let (value, dst) = (data.operands[0], data.operands[1]);
        let Some(b) = self.written_buffer(op, dst) else { return };
        let vt = f.value_type(value);
        if vt != &Type::Scalar(b.elem) {
            self.err(
                Diagnostic::error(format!("`store` of {} (`{vt}`) into a buffer of {}", f.value_label(value), b.elem))
                    .at(span, "type mismatch")
                    .with_help("convert with `cast` first"),
            );
        }
        if a.pad.is_some() {
            self.err(Diagnostic::error("`store` has a pad value").at(span, "stores do not pad"));
        }
        let ok = self.index_operands(op, 2, a.indices.iter());
        let ty = Type::Buffer(b.clone());
        if self.rank_matches(op, "`store`", a.indices.len(), &ty, b.shape.len()) && ok && !ctx.guarded {
            self.access_bounds(op, "store", &a.indices, None, &ty, "guard the store with `if` (partial tiles)");
        }
    }

    fn copy(&mut self, op: Op, c: &CopyOp, ctx: &LoopCtx) {
        let f = self.f;
        let data = &f.ops[op];
        if data.operands.len() < 2 || !self.arity(op, None, 0, 0) {
            self.arity(op, Some(2), 0, 0);
            return;
        }
        let span = self.op_span(op);
        let (src, dst) = (data.operands[0], data.operands[1]);
        let src_ty = f.value_type(src);
        let Some(st) = src_ty.readable() else {
            self.err(Diagnostic::error(format!("`copy` reads {}, which is not a tensor or buffer but `{src_ty}`", f.value_label(src))).at(span, "not readable"));
            return;
        };
        let Some(b) = self.written_buffer(op, dst) else { return };
        let dst_ty = Type::Buffer(b.clone());
        let mut ok = true;
        if st.elem != b.elem {
            self.err(Diagnostic::error(format!("`copy` from `{src_ty}` into `{dst_ty}`: the element types differ")).at(span, "type mismatch"));
            ok = false;
        }
        match c.split {
            None if st.rank() != b.shape.len() => {
                self.err(Diagnostic::error(format!("`copy` from rank {} `{src_ty}` into rank {} `{dst_ty}`", st.rank(), b.shape.len())).at(span, "ranks differ"));
                ok = false;
            }
            Some(_) if st.rank() + 1 != b.shape.len() => {
                self.err(
                    Diagnostic::error(format!("`copy` with `split` from rank {} `{src_ty}` into rank {} `{dst_ty}`", st.rank(), b.shape.len()))
                        .at(span, format!("expected a rank-{} destination", st.rank() + 1))
                        .with_note("a split box dimension takes two destination dimensions: the destination has one more than the source"),
                );
                ok = false;
            }
            _ => {}
        }
        if c.sizes.len() != st.rank() {
            self.err(
                Diagnostic::error(format!("`copy` box has {} size(s) for rank-{} buffers", c.sizes.len(), st.rank()))
                    .at(span, format!("expected {} sizes", st.rank())),
            );
            ok = false;
        }
        if let Some(d) = c.sizes.iter().position(|&n| n == 0) {
            self.err(Diagnostic::error(format!("`copy` box size of dimension {d} is 0")).at(span, "box sizes must be at least 1"));
            ok = false;
        }
        if !c.stride.is_empty() && c.stride.len() != c.sizes.len() {
            self.err(
                Diagnostic::error(format!("`copy` stride has {} entries for a box of {} dimension(s)", c.stride.len(), c.sizes.len()))
                    .at(span, format!("expected {} strides", c.sizes.len()))
                    .with_note("give one source stride per box dimension"),
            );
            ok = false;
        }
        if let Some(d) = c.stride.iter().position(|&g| g == 0) {
            self.err(Diagnostic::error(format!("`copy` stride of dimension {d} is 0")).at(span, "strides must be at least 1"));
            ok = false;
        }
        if let Some(s) = c.split {
            if s.dim >= c.sizes.len() {
                self.err(
                    Diagnostic::error(format!("`copy` splits dimension {}, but the box has {} dimension(s)", s.dim, c.sizes.len()))
                        .at(span, "no such box dimension")
                        .with_note("`split [d, f]` splits box dimension d (counted from 0) into (size / f, f)"),
                );
                ok = false;
            } else if s.factor == 0 {
                self.err(Diagnostic::error("`copy` split factor is 0").at(span, "split factors must be at least 1"));
                ok = false;
            } else if !c.sizes[s.dim].is_multiple_of(s.factor) {
                self.err(
                    Diagnostic::error(format!("`copy` split factor {} does not divide the box size {} of dimension {}", s.factor, c.sizes[s.dim], s.dim))
                        .at(span, "inexact split")
                        .with_help("split by a divisor of the box size, or make the box a multiple of the factor"),
                );
                ok = false;
            }
        }
        if !c.permute.is_empty() {
            let rank = c.expanded_rank();
            let mut seen = c.permute.clone();
            seen.sort_unstable();
            if seen != (0..rank).collect::<Vec<_>>() {
                let (whose, which) = if c.split.is_some() { ("split box's", "split box dimension") } else { ("box's", "box dimension") };
                self.err(
                    Diagnostic::error(format!(
                        "`copy` permute [{}] is not a permutation of the {whose} {rank} dimension(s)",
                        c.permute.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
                    ))
                    .at(span, "not a permutation")
                    .with_note(format!("list each of 0 to {} once: destination dimension k takes {which} permute[k]", rank.saturating_sub(1))),
                );
                ok = false;
            }
        }
        if let Some(p) = &c.pad {
            self.literal_fits(p, st.elem, "pad value", span);
        }
        ok &= self.index_operands(op, 2, c.src.iter().chain(&c.dst));
        ok &= self.rank_matches(op, "`copy` source", c.src.len(), src_ty, st.rank());
        ok &= self.rank_matches(op, "`copy` destination", c.dst.len(), &dst_ty, b.shape.len());
        if ok && !ctx.guarded {
            if c.pad.is_none() {
                let help = "add `pad(<value>)` to define elements outside the source, or guard the copy with `if`";
                let spans: Vec<u64> = (0..c.sizes.len()).map(|d| c.src_extent(d)).collect();
                self.access_bounds(op, "copy source", &c.src, Some(&spans), src_ty, help);
            }
            self.access_bounds(op, "copy destination", &c.dst, Some(&c.dst_sizes()), &dst_ty, "guard the copy with `if` (partial tiles)");
        }
    }

    fn fill(&mut self, op: Op, lit: &Literal) {
        if !self.arity(op, Some(1), 0, 0) {
            return;
        }
        let Some(b) = self.written_buffer(op, self.f.ops[op].operands[0]) else { return };
        self.literal_fits(lit, b.elem, "fill value", self.op_span(op));
    }

    fn intrinsic(&mut self, op: Op, x: &IntrinsicCall, ctx: &LoopCtx) {
        let f = self.f;
        let data = &f.ops[op];
        if data.operands.len() < 3 || !self.arity(op, None, 0, 0) {
            self.arity(op, Some(3), 0, 0);
            return;
        }
        let span = self.op_span(op);
        let Some(acc) = self.written_buffer(op, data.operands[0]) else { return };
        let mut types = vec![Type::Buffer(acc.clone())];
        for (role, &v) in ["a", "b"].iter().zip(&data.operands[1..3]) {
            let t = f.value_type(v);
            if t.readable().is_none() {
                self.err(Diagnostic::error(format!("`intrinsic` reads {} as `{role}`, which is not a tensor or buffer but `{t}`", f.value_label(v))).at(span, "not readable"));
                return;
            }
            types.push(t.clone());
        }
        let elems: Vec<ElemType> = types.iter().map(|t| t.readable().expect("checked").elem).collect();
        let (ea, eb, ec) = (elems[1], elems[2], elems[0]);
        let [m, n, k] = x.shape;
        let mut ok = true;
        if x.shape.contains(&0) {
            self.err(Diagnostic::error(format!("`intrinsic` shape [{m}, {n}, {k}] has a size 0")).at(span, "sizes must be at least 1"));
            ok = false;
        }
        for (a, parts) in x.parts.iter().enumerate() {
            let product = parts.iter().try_fold(1u64, |p, &e| p.checked_mul(e));
            if parts.is_empty() || parts.contains(&0) || product != Some(x.shape[a]) {
                self.err(Diagnostic::error(format!("malformed `intrinsic`: the parts of `{}` ({parts:?}) do not multiply to its size {}", ["m", "n", "k"][a], x.shape[a])).at(span, "malformed op"));
                ok = false;
            }
        }
        if x.kind.is_vector() && n != 1 {
            self.err(
                Diagnostic::error(format!("a `{}` intrinsic has `n` = 1, not {n}", x.kind))
                    .at(span, "vector intrinsics compute one column")
                    .with_note("`a` and the accumulator are in vector lanes along `m`; `b` is broadcast"),
            );
            ok = false;
        }
        if x.kind == IntrinsicKind::Fma && k != 1 {
            self.err(Diagnostic::error(format!("an `fma` intrinsic has `k` = 1, not {k}")).at(span, "one product per lane").with_help("use `dot` for several products per lane"));
            ok = false;
        }
        let int8 = |e: ElemType| matches!(e, ElemType::I8 | ElemType::U8);
        let half = |e: ElemType| matches!(e, ElemType::F16 | ElemType::BF16);
        let types_ok = match x.kind {
            IntrinsicKind::Fma => ea.is_float() && ea == eb && eb == ec,
            IntrinsicKind::Dot => int8(ea) && int8(eb) && ec == ElemType::I32 || half(ea) && ea == eb && ec == ElemType::F32,
            IntrinsicKind::Mma | IntrinsicKind::Wmma => {
                int8(ea) && int8(eb) && ec == ElemType::I32 || half(ea) && ea == eb && (ec == ElemType::F32 || ec == ea && ea == ElemType::F16)
            }
        };
        if !types_ok {
            let expected = match x.kind {
                IntrinsicKind::Fma => "one float type for all three",
                IntrinsicKind::Dot => "u8/i8 operands into i32, or f16/bf16 operands into f32",
                IntrinsicKind::Mma | IntrinsicKind::Wmma => "u8/i8 operands into i32, or f16/bf16 operands into f32 (f16 also into f16)",
            };
            self.err(
                Diagnostic::error(format!("a `{}` intrinsic does not compute {ea} × {eb} into {ec}", x.kind))
                    .at(span, "element types do not fit")
                    .with_note(format!("`{}` takes {expected}", x.kind)),
            );
            ok = false;
        }
        if let Some(lane) = &x.lane {
            ok &= self.index_operands(op, 3, lane.iter());
            if x.kind != IntrinsicKind::Mma {
                self.err(
                    Diagnostic::error(format!("a `{}` intrinsic has no `lane` clause", x.kind))
                        .at(span, "not a warp's fragment")
                        .with_note("`lane(%g, %t)` makes the accumulator a lane's fragment of an `mma` intrinsic's tile"),
                );
                ok = false;
            } else if [m, n] != [16, 8] {
                self.err(
                    Diagnostic::error(format!("a lane's fragment is defined for `mma` tiles of 16 × 8, not {m} × {n}"))
                        .at(span, "no fragment layout")
                        .with_note("lane (g, t) holds rows g and g + 8, columns 2t and 2t + 1 (PTX's m16n8 accumulator)"),
                );
                ok = false;
            }
        }
        // Which axes an operand may move along: the accumulator not along
        // `k`, `a` not along `n`, `b` not along `m`.
        let roles = [("accumulator", 2usize), ("`a`", 1), ("`b`", 0)];
        for (i, (t, &(role, fixed))) in x.tiles().into_iter().zip(&roles).enumerate() {
            let ty = &types[i];
            let rank = ty.readable().expect("checked").rank();
            ok &= self.index_operands(op, 3, t.indices.iter());
            if !self.rank_matches(op, &format!("`intrinsic` {role}"), t.indices.len(), ty, rank) {
                ok = false;
                continue;
            }
            // A lane's fragment (the accumulator of a `lane` call) has one
            // part per axis whatever the tile's parts.
            let parts_of = |a: usize| if i == 0 && x.lane.is_some() { 1 } else { x.parts[a].len() };
            if (0..3).any(|a| t.steps[a].len() != parts_of(a) || t.steps[a].iter().any(|s| s.len() != rank)) {
                self.err(Diagnostic::error(format!("malformed `intrinsic`: the {role}'s steps are not one per part and dimension")).at(span, "malformed op"));
                ok = false;
                continue;
            }
            if t.steps[fixed].iter().flatten().any(|&s| s != 0) {
                let axis = ["m", "n", "k"][fixed];
                self.err(
                    Diagnostic::error(format!("the {role} of `intrinsic` is indexed by `{axis}`"))
                        .at(span, format!("{role} must not depend on `{axis}`"))
                        .with_note("acc[m, n] += Σ_k a[m, k] · b[k, n]: the accumulator does not use `k`, `a` not `n`, `b` not `m`"),
                );
                ok = false;
            }
            if let Some(d) = (0..rank).find(|&d| t.indices[d].divisor() != 1 && (0..3).any(|a| t.steps[a].iter().any(|s| s[d] != 0))) {
                self.err(Diagnostic::error(format!("the {role} of `intrinsic` steps dimension {d} inside a division")).at(span, "malformed op"));
                ok = false;
            }
            if let Some(p) = &t.pad {
                if i == 0 {
                    self.err(Diagnostic::error("the accumulator of `intrinsic` has a pad value").at(span, "accumulators do not pad"));
                    ok = false;
                } else {
                    self.literal_fits(p, ty.readable().expect("checked").elem, "pad value", span);
                }
            }
        }
        if !ok || ctx.guarded {
            return;
        }
        for (i, (t, &(role, _))) in x.tiles().into_iter().zip(&roles).enumerate() {
            if t.pad.is_some() {
                continue;
            }
            // The tile covers, per dimension, the origin plus every offset
            // the steps reach: shift the origin to the lowest and span the rest.
            let mut origins = Vec::new();
            let mut spans = Vec::new();
            for (d, e) in t.indices.iter().enumerate() {
                let (mut lo, mut hi) = (0i64, 0i64);
                for a in 0..3 {
                    // A lane's fragment is one part of 2; a fused axis'
                    // parts each reach their own extent.
                    let extents = match (i, x.lane.is_some()) {
                        (0, true) if a < 2 => vec![x.acc_shape()[a]],
                        (0, true) => vec![x.shape[a]],
                        _ => x.parts[a].clone(),
                    };
                    for (s, extent) in t.steps[a].iter().zip(extents) {
                        let reach = s[d].saturating_mul(extent.saturating_sub(1).min(i64::MAX as u64) as i64);
                        if reach < 0 { lo = lo.saturating_add(reach) } else { hi = hi.saturating_add(reach) }
                    }
                }
                let shifted = if lo == 0 { Ok(e.clone()) } else { e.checked_add(&AffineExpr::constant(lo)) };
                let Ok(shifted) = shifted else { return };
                origins.push(shifted);
                spans.push(hi.saturating_sub(lo).saturating_add(1) as u64);
            }
            let help = if i == 0 { "guard the intrinsic with `if` (partial tiles)" } else { "add `pad(<value>)` to define elements outside the source, or guard the intrinsic with `if`" };
            let what = if i == 0 { "intrinsic accumulator".to_string() } else { format!("intrinsic operand {role}") };
            self.access_bounds(op, &what, &origins, Some(&spans), &types[i], help);
        }
    }

    fn index_value(&mut self, op: Op, e: &AffineExpr<Dim>) {
        if !self.arity(op, None, 1, 0) {
            return;
        }
        let f = self.f;
        let span = self.op_span(op);
        let Some(t) = f.value_type(f.ops[op].results[0]).as_scalar() else {
            self.err(Diagnostic::error(format!("`index` must define a scalar, not `{}`", f.value_type(f.ops[op].results[0]))).at(span, "not a scalar"));
            return;
        };
        if !self.index_operands(op, 0, std::iter::once(e)) {
            return;
        }
        let text = self.index_text(op, e);
        let div = e.divisor();
        if div != 1 && (e.constant_term() % div != 0 || e.terms().iter().any(|&(_, k)| k % div != 0)) {
            self.err(Diagnostic::error(format!("`index` expression `{text}` does not always divide exactly")).at(span, "inexact division"));
            return;
        }
        if let (Some((lo, hi)), Some((tlo, thi))) = (self.numerator_range(op, e), t.int_range()) {
            let (lo, hi) = (lo / div, hi / div);
            if lo < tlo || hi > thi {
                self.err(
                    Diagnostic::error(format!("`index` expression `{text}` ranges over [{lo}, {hi}], which does not fit in {t}"))
                        .at(span, "would wrap")
                        .with_help("use i32 (or a float type)"),
                );
            }
        }
    }
}



/// What a schedule belongs to, for [`verify_schedule_structure`].
pub enum ScheduleOwner<'a> {
    /// A compute op: its axes and its number of reads (body and epilogue).
    Compute { axes: &'a [AxisDecl], reads: usize },
    /// A kernel: its axes are gone; its reads are the `read(...)` tags of
    /// its loads.
    Kernel { read_tags: &'a [String] },
}

/// The target-independent rules of a schedule (level 1): tile lists well
/// formed (sizes ≥ 1, each dividing the one before, the first within the
/// axis, one size per tile level for every axis), virtual threads on
/// spatial axes dividing their innermost tiles, the vector width dividing
/// its axis' innermost tile, cache directives naming reads once each, a
/// loop order naming known axes once each, an `intrinsic` naming a known
/// read as `a` and known axes once each, spatial ones on `m` and `n` and
/// reduction ones on `k`.
///
/// Whether the sizes fit the target (its number of tile levels, threads
/// per block, memory sizes) and whether the intrinsic takes the mapping
/// are checked with the target description, in
/// `crate::target`. Errors point at the schedule (`at` when it has no
/// source location).
impl Verifier<'_> {
    /// Checks a compute op's schedule against its target's capacities and
    /// limits (`target::check`).
    fn schedule_resources(&mut self, op: Op, s: &Schedule, span: Span) {
        let found = match self.target {
            Some(t) if t.name == s.target => Some(std::sync::Arc::new(t.clone())),
            _ => crate::target::builtin(&s.target),
        };
        match found {
            Some(t) => self.diags.extend(crate::target::check_op_schedule(self.f, op, &t)),
            None => {
                let at = if s.span.is_dummy() { span } else { s.span };
                let mut d = Diagnostic::error(format!("unknown target `{}` in schedule", s.target)).at(at, "no target of this name");
                if let Some(best) = crate::diag::closest(&s.target, crate::target::TargetSet::new().names().map(|n| n.to_string()).collect::<Vec<_>>().iter().map(String::as_str)) {
                    d = d.with_help(format!("did you mean `{best}`?"));
                }
                self.err(d.with_note("`tilec --list-targets` lists the targets; a description file given with --target names its own"));
            }
        }
    }
}

pub fn verify_schedule_structure(s: &Schedule, owner: &ScheduleOwner<'_>, at: Span, diags: &mut Diagnostics) {
    let span = if s.span.is_dummy() { at } else { s.span };
    let mut err = |d: Diagnostic| diags.push(d);
    let axes = match owner {
        ScheduleOwner::Compute { axes, .. } => Some(*axes),
        ScheduleOwner::Kernel { .. } => None,
    };
    let axis = |name: &str| axes.and_then(|a| a.iter().find(|x| x.name == name));
    // An axis named in the schedule exists (on a compute op) and, whatever
    // it belongs to, has no dot (loop tags are `axis.level`).
    let known = |name: &str, key: &str, err: &mut dyn FnMut(Diagnostic)| -> bool {
        if name.contains('.') {
            err(Diagnostic::error(format!("axis name `{name}` in `{key}` contains a dot")).at(span, "not an axis name"));
            return false;
        }
        if axes.is_some() && axis(name).is_none() {
            let names: Vec<&str> = axes.unwrap_or_default().iter().map(|a| a.name.as_str()).collect();
            err(Diagnostic::error(format!("`{key}` names axis `{name}`, which the compute op does not have"))
                .at(span, "unknown axis")
                .with_note(format!("the axes are: {}", names.join(", "))));
            return false;
        }
        true
    };
    // tile
    for (i, (name, sizes)) in s.tiles.iter().enumerate() {
        if s.tiles[..i].iter().any(|(n, _)| n == name) {
            err(Diagnostic::error(format!("axis `{name}` has tile sizes twice")).at(span, "duplicate axis in `tile`"));
            continue;
        }
        if !known(name, "tile", &mut err) {
            continue;
        }
        if sizes.is_empty() {
            err(Diagnostic::error(format!("axis `{name}` has an empty list of tile sizes")).at(span, "no tile sizes").with_note("give one size per tile level of the target"));
            continue;
        }
        if sizes.contains(&0) {
            err(Diagnostic::error(format!("axis `{name}` has a tile size of 0")).at(span, "tile sizes must be at least 1"));
            continue;
        }
        // A level may split the one above unevenly where that one covers
        // the whole axis: its last tile then overhangs the extent, which
        // the partial tiles' guards check (7 vectors of 8 for a 49-point
        // axis, in register tiles of 3 vectors). On a kernel the extent is
        // not at hand; its compute op was checked.
        for w in sizes.windows(2) {
            let covers = axes.is_none() || axis(name).is_some_and(|a| w[0] >= a.extent);
            if w[0] % w[1] != 0 && !(covers && w[1] < w[0]) {
                err(Diagnostic::error(format!("tile size {} of axis `{name}` does not divide the size before it, {}", w[1], w[0]))
                    .at(span, "not a divisor")
                    .with_note("each tile level splits the tiles of the level above it into whole tiles, unless the level above covers the whole axis (its last tile is then partial)"));
            }
        }
        // The vector axis may round its extent up to whole vectors: the
        // last vector's lanes past the extent are masked off (a 49-point
        // axis as 7 vectors of 8 instead of 4 and a partial tile of 17).
        let vector_width = s.vector.as_ref().filter(|(v, _)| v == name).map_or(1, |&(_, w)| w.max(1));
        if let Some(a) = axis(name)
            && sizes[0] > crate::ir::schedule::outermost_tile_limit(a.extent, vector_width)
        {
            let mut d = Diagnostic::error(format!("the outermost tile size of axis `{name}`, {}, is larger than its extent {}", sizes[0], a.extent))
                .at(span, "tile larger than the axis")
                .with_help(format!("use a size of at most {}", crate::ir::schedule::outermost_tile_limit(a.extent, vector_width)));
            if vector_width > 1 {
                d = d.with_note(format!("the vector axis may round its extent up to whole vectors of {vector_width}, no further"));
            }
            err(d);
        }
    }
    // (Empty lists are reported above.)
    if let Some((first, first_sizes)) = s.tiles.iter().find(|(_, t)| !t.is_empty())
        && let Some((other, sizes)) = s.tiles.iter().find(|(_, t)| !t.is_empty() && t.len() != first_sizes.len())
    {
        err(Diagnostic::error(format!(
            "axes have different numbers of tile sizes: `{first}` has {}, `{other}` has {}",
            first_sizes.len(),
            sizes.len()
        ))
        .at(span, "tile lists of different lengths")
        .with_note("a schedule gives every axis one size per tile level of the target"));
    }
    // The innermost tile of an axis: its last tile size, or the whole axis
    // when it is not tiled (unknown for kernels).
    let innermost = |name: &str| s.tiles_of(name).and_then(|t| t.last().copied()).or_else(|| axis(name).map(|a| a.extent));
    // vthread
    for (i, (name, n)) in s.vthreads.iter().enumerate() {
        if s.vthreads[..i].iter().any(|(x, _)| x == name) {
            err(Diagnostic::error(format!("axis `{name}` has virtual threads twice")).at(span, "duplicate axis in `vthread`"));
            continue;
        }
        if !known(name, "vthread", &mut err) {
            continue;
        }
        if axis(name).is_some_and(|a| a.kind == AxisKind::Reduction) {
            err(Diagnostic::error(format!("virtual threads on reduction axis `{name}`"))
                .at(span, "not a spatial axis")
                .with_note("virtual threads split a thread's output tile; a reduction axis indexes no output"));
            continue;
        }
        if *n == 0 {
            err(Diagnostic::error(format!("axis `{name}` has 0 virtual threads")).at(span, "at least 1"));
            continue;
        }
        if let Some(t) = innermost(name).filter(|&t| t % n != 0) {
            err(Diagnostic::error(format!("{n} virtual threads do not divide the innermost tile of axis `{name}` ({t})"))
                .at(span, "not a divisor")
                .with_note("each virtual thread takes an equal part of the innermost tile"));
        }
    }
    // order
    for (i, name) in s.order.iter().enumerate() {
        if s.order[..i].contains(name) {
            err(Diagnostic::error(format!("axis `{name}` is listed twice in `order`")).at(span, "duplicate axis in `order`"));
            continue;
        }
        known(name, "order", &mut err);
    }
    // vector
    if let Some((name, w)) = &s.vector
        && known(name, "vector", &mut err)
    {
        if *w == 0 {
            err(Diagnostic::error(format!("vector width of axis `{name}` is 0")).at(span, "at least 1"));
        } else if let Some(t) = innermost(name).filter(|&t| t % w != 0) {
            err(Diagnostic::error(format!("vector width {w} does not divide the innermost tile of axis `{name}` ({t})"))
                .at(span, "not a divisor")
                .with_note("the innermost loop of the axis runs in whole vectors"));
        }
    }
    // cache
    for (i, c) in s.cache.iter().enumerate() {
        match owner {
            ScheduleOwner::Compute { reads, .. } if c.read >= *reads => {
                err(Diagnostic::error(format!("`cache` names read {} (`{}`), but the compute op has {reads} read(s)", c.read, c.read_name)).at(span, "no such read"));
                continue;
            }
            ScheduleOwner::Kernel { read_tags } if !read_tags.contains(&c.read_name) => {
                err(Diagnostic::error(format!("`cache` names read `{}`, but no load of the kernel is tagged `read({})`", c.read_name, c.read_name))
                    .at(span, "no such read"));
                continue;
            }
            _ => {}
        }
        let same = |d: &CacheDirective| match owner {
            ScheduleOwner::Compute { .. } => d.read == c.read,
            ScheduleOwner::Kernel { .. } => d.read_name == c.read_name,
        };
        if s.cache[..i].iter().any(same) {
            err(Diagnostic::error(format!("read `{}` has two cache directives", c.read_name)).at(span, "cached twice"));
        }
    }
    // intrinsic: a known read as `a`; known axes, each on one intrinsic
    // axis, spatial ones on `m` and `n` and reduction ones on `k`. Which
    // choices the intrinsic takes is the target's (`target::check`).
    if let Some(x) = &s.intrinsic {
        match owner {
            ScheduleOwner::Compute { reads, .. } if x.a >= *reads => {
                err(Diagnostic::error(format!("`intrinsic` names read {} (`{}`) as `a`, but the compute op has {reads} read(s)", x.a, x.a_name)).at(span, "no such read"));
            }
            ScheduleOwner::Kernel { read_tags } if !read_tags.contains(&x.a_name) => {
                err(Diagnostic::error(format!("`intrinsic` names read `{}` as `a`, but no load of the kernel is tagged `read({})`", x.a_name, x.a_name))
                    .at(span, "no such read"));
            }
            _ => {}
        }
        let mapped: Vec<&str> = x.axes().collect();
        let mut position = 0;
        for (key, names) in x.by_intrinsic_axis() {
            for name in names {
                let earlier = mapped[..position].contains(&name.as_str());
                position += 1;
                if earlier {
                    err(Diagnostic::error(format!("axis `{name}` is listed twice in `intrinsic`")).at(span, "duplicate axis in `intrinsic`"));
                    continue;
                }
                if !known(name, "intrinsic", &mut err) {
                    continue;
                }
                let Some(kind) = axis(name).map(|a| a.kind) else { continue };
                let wants = if key == "k" { AxisKind::Reduction } else { AxisKind::Spatial };
                if kind != wants {
                    let (what, takes) = match wants {
                        AxisKind::Reduction => ("spatial", "`k` takes reduction axes"),
                        AxisKind::Spatial => ("reduction", "`m` and `n` take spatial axes"),
                    };
                    err(Diagnostic::error(format!("`intrinsic` maps {what} axis `{name}` onto `{key}`"))
                        .at(span, "wrong kind of axis")
                        .with_note(format!("{takes}: the intrinsic computes `acc[m, n] += Σ_k a[m, k] · b[k, n]`")));
                }
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
    Type::Scalar(f.value_type(tensor).readable().map_or(ElemType::F32, |t| t.elem))
}

/// The buffers (or tensors) loop-level op `o` reads and writes.
fn reads_and_writes(f: &Function, o: Op) -> (&[Value], &[Value]) {
    let operands = &f.ops[o].operands;
    match &f.ops[o].kind {
        OpKind::Load(_) if !operands.is_empty() => (&operands[..1], &[]),
        OpKind::Store(_) if operands.len() >= 2 => (&[], &operands[1..2]),
        OpKind::Fill(_) if !operands.is_empty() => (&[], &operands[..1]),
        OpKind::Copy(_) if operands.len() >= 2 => (&operands[..1], &operands[1..2]),
        OpKind::Intrinsic(_) if operands.len() >= 3 => (&operands[1..3], &operands[..1]),
        _ => (&[], &[]),
    }
}

#[cfg(test)]
mod tests {
    //! Rules that parsed input cannot break (the resolver refuses such
    //! input first) but passes can: IR is parsed, then edited as a pass
    //! might, then verified.
    use super::*;
    use crate::syntax::parse_str;

    const LOOPS: &str = "func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = alloc : buffer<8xf32, global>
  kernel schedule \"sm90\" {
    tile = {i = [4, 2]},
    cache = {a = shared}
  } {
    for %i = 0 to 8 {
      %a = load %x[%i] read(a) : f32
      %n = index %i : i32
      if %i < 8 {
        store %a, %y[%i]
      }
      barrier
    }
  }
  return %y
}
";

    const COMPUTE: &str = "func @f(%A: tensor<8x4xf32>) -> tensor<8xf32> {
  %C = compute (i: 8) reduce sum (k: 4) reads(%a = %A[i, k]) -> tensor<8xf32>[i] schedule \"sm90\" {tile = {i = [4, 1], k = [2, 1]}} {
    %0 = index i : i32
    yield %a : f32
  }
  return %C
}
";

    fn parse(src: &str) -> Function {
        let (m, _) = parse_str("t.tile", src).unwrap_or_else(|(d, sm)| panic!("{}", sm.render(&d.0)));
        let f = m.funcs.into_iter().next().unwrap();
        assert!(!verify_function(&f).has_errors(), "the unedited IR must verify");
        f
    }

    fn find(f: &Function, mnemonic: &str) -> Op {
        f.walk().into_iter().find(|&o| f.ops[o].kind.mnemonic() == mnemonic).unwrap_or_else(|| panic!("no `{mnemonic}`"))
    }

    /// Verifies `f` and checks that some error contains `message`.
    fn expect(f: &Function, message: &str) {
        let d = verify_function(f);
        let all: Vec<&str> = d.0.iter().map(|x| x.message.as_str()).collect();
        assert!(all.iter().any(|m| m.contains(message)), "no error containing {message:?} in {all:#?}");
    }

    fn kernel_schedule(f: &mut Function) -> &mut Schedule {
        let k = find(f, "kernel");
        match &mut f.ops[k].kind {
            OpKind::Kernel(k) => &mut k.schedule,
            _ => unreachable!(),
        }
    }

    #[test]
    fn malformed_loop_ops() {
        let mut f = parse(LOOPS);
        let l = find(&f, "for");
        f.ops[l].regions.clear();
        expect(&f, "malformed `for`: 0 operand(s), 0 result(s) and 0 region(s)");

        let mut f = parse(LOOPS);
        let l = find(&f, "for");
        let body = f.ops[l].regions[0];
        let iv = f.regions[body].args[0];
        f.values[iv].ty = Type::Scalar(ElemType::I32);
        expect(&f, "the body of `for` must have one argument of type `index`");

        let mut f = parse(LOOPS);
        let g = find(&f, "if");
        f.ops[g].kind = OpKind::If(Box::new(Guard { conds: vec![] }));
        expect(&f, "`if` has no condition");

        let mut f = parse(LOOPS);
        let g = find(&f, "if");
        let body = f.ops[g].regions[0];
        f.add_region_arg(body, Type::Index, None);
        expect(&f, "the body of `if` takes no arguments");

        let mut f = parse(LOOPS);
        let k = find(&f, "kernel");
        let body = f.ops[k].regions[0];
        f.add_region_arg(body, Type::Index, None);
        expect(&f, "the body of `kernel` takes no arguments");

        let mut f = parse(LOOPS);
        let a = find(&f, "alloc");
        let r = f.ops[a].results[0];
        f.values[r].ty = Type::Scalar(ElemType::F32);
        expect(&f, "`alloc` must define a buffer, not `f32`");
    }

    #[test]
    fn index_expressions_use_index_operands() {
        let mut f = parse(LOOPS);
        let l = find(&f, "load");
        if let OpKind::Load(a) = &mut f.ops[l].kind {
            a.indices = vec![AffineExpr::var(Dim::new(0))];
        }
        expect(&f, "an index expression of `load` uses operand 0, which is not one of its index operands");

        let mut f = parse(LOOPS);
        let s = find(&f, "store");
        if let OpKind::Store(a) = &mut f.ops[s].kind {
            a.indices = vec![AffineExpr::var(Dim::new(7))];
        }
        expect(&f, "an index expression of `store` uses operand 7");
    }

    #[test]
    fn loads_and_stores_of_pass_built_ir() {
        let mut f = parse(LOOPS);
        let s = find(&f, "store");
        if let OpKind::Store(a) = &mut f.ops[s].kind {
            a.pad = Some(Literal::Float(0.0));
        }
        expect(&f, "`store` has a pad value");

        let mut f = parse(LOOPS);
        let l = find(&f, "load");
        let iv = f.ops[l].operands[1];
        f.ops[l].operands[0] = iv;
        expect(&f, "`load` reads `%i`, which is not a tensor or buffer but `index`");

        let mut f = parse(LOOPS);
        let l = find(&f, "load");
        if let OpKind::Load(a) = &mut f.ops[l].kind {
            a.pad = Some(Literal::Int(1));
        }
        expect(&f, "integer pad value for elements of f32");

        let mut f = parse(LOOPS);
        let a = find(&f, "alloc");
        let y = f.ops[a].results[0];
        let fill = f.create_op(f.body, OpKind::Fill(Literal::Int(300)), vec![y], vec![], Span::DUMMY);
        f.regions[f.body].ops.insert(1, fill);
        expect(&f, "integer fill value for elements of f32");
    }

    #[test]
    fn values_of_a_loop_are_not_visible_after_it() {
        let mut f = parse(LOOPS);
        let l = find(&f, "load");
        let v = f.ops[l].results[0];
        let a = find(&f, "alloc");
        let y = f.ops[a].results[0];
        let store = f.create_op(f.body, OpKind::Store(Box::new(Access { indices: vec![AffineExpr::constant(0)], pad: None, read: None })), vec![v, y], vec![], Span::DUMMY);
        let n = f.regions[f.body].ops.len();
        f.regions[f.body].ops.insert(n - 1, store);
        expect(&f, "operand `%a` of `store` is not defined before its use");
    }

    #[test]
    fn index_forms_belong_to_their_regions() {
        let mut f = parse(LOOPS);
        let i = find(&f, "index");
        f.ops[i].kind = OpKind::AxisIndex(AxisId::new(0));
        f.ops[i].operands.clear();
        expect(&f, "`index` names an axis, but there is no compute op here");

        let mut f = parse(COMPUTE);
        let i = find(&f, "index");
        f.ops[i].kind = OpKind::IndexValue(AffineExpr::constant(0));
        expect(&f, "`index` over index values belongs in loops");

        let mut f = parse(LOOPS);
        let b = find(&f, "barrier");
        let a = find(&f, "load");
        let v = f.ops[a].results[0];
        f.ops[b].kind = OpKind::Yield;
        f.ops[b].operands = vec![v];
        expect(&f, "`yield` cannot appear in a loop region");
    }

    #[test]
    fn schedules_of_pass_built_ir() {
        let mut f = parse(COMPUTE);
        let c = find(&f, "compute");
        let s = f.ops[c].kind.as_compute_mut().unwrap().schedule.as_mut().unwrap();
        s.tiles.push(("zz".into(), vec![1]));
        s.cache.push(CacheDirective { read: 5, read_name: "q".into(), level: "shared".into() });
        expect(&f, "`tile` names axis `zz`, which the compute op does not have");
        expect(&f, "`cache` names read 5 (`q`), but the compute op has 1 read(s)");

        let mut f = parse(LOOPS);
        let s = kernel_schedule(&mut f);
        s.cache.push(CacheDirective { read: 1, read_name: "b".into(), level: "local".into() });
        s.vthreads.push(("i.x".into(), 2));
        expect(&f, "`cache` names read `b`, but no load of the kernel is tagged `read(b)`");
        expect(&f, "axis name `i.x` in `vthread` contains a dot");

        // Errors of schedules without a source location point at the op.
        let mut f = parse(LOOPS);
        let s = kernel_schedule(&mut f);
        s.span = Span::DUMMY;
        s.tiles[0].1 = vec![3, 4];
        let d = verify_function(&f);
        let k = find(&f, "kernel");
        assert_eq!(d.0[0].primary.as_ref().map(|l| l.span), Some(f.op_spans[k]), "{:?}", d.0);
    }

    #[test]
    fn intrinsic_choices_of_pass_built_ir() {
        let choice = |a: usize, a_name: &str, m: &[&str], k: &[&str]| IntrinsicChoice {
            name: "vfmadd231ps.zmm".into(),
            a,
            a_name: a_name.into(),
            m: m.iter().map(|x| x.to_string()).collect(),
            n: Vec::new(),
            k: k.iter().map(|x| x.to_string()).collect(),
        };
        let mut f = parse(COMPUTE);
        let c = find(&f, "compute");
        let s = f.ops[c].kind.as_compute_mut().unwrap().schedule.as_mut().unwrap();
        s.intrinsic = Some(choice(3, "q", &["i", "zz", "k"], &["i"]));
        expect(&f, "`intrinsic` names read 3 (`q`) as `a`, but the compute op has 1 read(s)");
        expect(&f, "`intrinsic` names axis `zz`, which the compute op does not have");
        expect(&f, "`intrinsic` maps reduction axis `k` onto `m`");
        expect(&f, "axis `i` is listed twice in `intrinsic`");

        let mut f = parse(COMPUTE);
        let c = find(&f, "compute");
        let s = f.ops[c].kind.as_compute_mut().unwrap().schedule.as_mut().unwrap();
        s.intrinsic = Some(choice(0, "a", &[], &["i"]));
        expect(&f, "`intrinsic` maps spatial axis `i` onto `k`");

        let mut f = parse(LOOPS);
        kernel_schedule(&mut f).intrinsic = Some(choice(0, "b", &["i.x"], &[]));
        expect(&f, "`intrinsic` names read `b` as `a`, but no load of the kernel is tagged `read(b)`");
        expect(&f, "axis name `i.x` in `intrinsic` contains a dot");
        // A kernel's knob names its loads' tags and any axis name.
        let mut f = parse(LOOPS);
        kernel_schedule(&mut f).intrinsic = Some(choice(0, "a", &["i"], &["k"]));
        assert!(!verify_function(&f).has_errors(), "{:?}", verify_function(&f).0);
    }

    /// u8 literals a pass writes must be in 0..=255: constants, pads and
    /// fill values (parsed text is refused by the resolver first).
    #[test]
    fn u8_literals_of_pass_built_ir() {
        const U8: &str = "func @f(%x: tensor<8xu8>) -> tensor<8xu8> {
  %y = compute (i: 8) reads(%a = %x[i - 1] pad(255)) -> tensor<8xu8>[i] {
    %c = const 0 : u8
    %0 = max %a, %c : u8
    yield %0 : u8
  }
  %b = alloc : buffer<8xu8, global>
  fill %b, 255
  return %y
}
";
        let mut f = parse(U8);
        let c = find(&f, "const");
        f.ops[c].kind = OpKind::Const(Literal::Int(256));
        expect(&f, "constant 256 does not fit in u8");
        f.ops[c].kind = OpKind::Const(Literal::Int(-1));
        expect(&f, "constant -1 does not fit in u8");
        f.ops[c].kind = OpKind::Const(Literal::Float(1.0));
        expect(&f, "float constant of integer type u8");

        let mut f = parse(U8);
        let op = find(&f, "compute");
        f.ops[op].kind.as_compute_mut().unwrap().reads[0].pad = Some(Literal::Int(-1));
        expect(&f, "pad value -1 does not fit in u8");
        f.ops[op].kind.as_compute_mut().unwrap().reads[0].pad = Some(Literal::Float(0.0));
        expect(&f, "float pad value for a tensor of u8");

        let mut f = parse(U8);
        let fill = find(&f, "fill");
        f.ops[fill].kind = OpKind::Fill(Literal::Int(300));
        expect(&f, "fill value 300 does not fit in u8");
    }
}
