//! Syntax tree → IR: resolves value, axis and type names, parses numbers,
//! normalises index expressions to affine form, turns schedule dictionaries
//! into [`Schedule`]s, and reports every error it finds (not just the
//! first). Semantic checks that do not need the source text (types of
//! operands, bounds, shapes, schedule arithmetic) are the verifier's.
//!
//! Scopes: the function body and the loop-level regions inside it (`for`,
//! `if`, `kernel`) nest like blocks: a region sees the values of the regions
//! around it, may not redefine them, and its own names end with it (so
//! sibling loops may reuse `%i`). Compute regions are isolated.

use super::ast::*;
use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::ir::ops::{OpDecl, OpPlace, op_decl, round_to};
use crate::ir::*;
use crate::ir::types::MAX_TENSOR_BYTES;
use std::collections::HashMap;

/// A clause of integers with where it is written (`stride [..]`,
/// `permute [..]`), if present.
type ListClause<'a> = Option<&'a (Vec<Word>, Span)>;

/// A copy's clauses of integers.
#[derive(Clone, Copy)]
struct CopyClauses<'a> {
    stride: ListClause<'a>,
    split: ListClause<'a>,
    permute: ListClause<'a>,
}

/// The keys of a schedule dictionary, in printing order.
const SCHEDULE_KEYS: [&str; 7] = ["tile", "order", "vthread", "cache", "unroll", "vector", "intrinsic"];
/// The keys of a schedule's `intrinsic` dictionary, in printing order.
const INTRINSIC_KEYS: [&str; 5] = ["name", "a", "m", "n", "k"];
/// The clauses of a `for` loop.
const LOOP_CLAUSES: [&str; 3] = ["map", "axis", "reduce"];

pub fn resolve(ast: &ModuleAst) -> Result<Module, Diagnostics> {
    let mut r = Resolver { diags: Diagnostics::new() };
    let funcs = ast.funcs.iter().map(|f| r.func(f)).collect();
    if r.diags.has_errors() { Err(r.diags) } else { Ok(Module { funcs, mlir: None }) }
}

struct Resolver {
    diags: Diagnostics,
}

/// Names visible in a region: the function body with the loop regions
/// being resolved, or one compute op (whose regions are isolated from the
/// function's values).
/// A name bound to `None` was defined by a statement that had errors: its
/// uses resolve silently to nothing, so one mistake is reported once.
#[derive(Default)]
struct Scope {
    values: HashMap<String, (Option<Value>, Span)>,
    /// Names in definition order, so that a loop region's names can be
    /// dropped when it ends.
    order: Vec<String>,
    /// Names of loop regions that have ended, to explain a use after them.
    ended: HashMap<String, Span>,
}

impl Scope {
    fn insert(&mut self, name: &Word, v: Option<Value>) {
        self.values.insert(name.text.clone(), (v, name.span));
        self.order.push(name.text.clone());
    }

    /// Where the names of a region about to be resolved start.
    fn mark(&self) -> usize {
        self.order.len()
    }

    /// Ends the region whose names start at `mark`.
    fn end_region(&mut self, mark: usize) {
        let names: Vec<String> = self.order.drain(mark..).collect();
        for name in names {
            if let Some((_, span)) = self.values.remove(&name) {
                self.ended.insert(name, span);
            }
        }
    }
}

/// Where statements are being resolved.
struct Place<'a> {
    region: Region,
    kind: OpPlace,
    /// The compute op whose region this is (for `index` and axis names).
    compute: Option<&'a Compute>,
    /// In an epilogue only spatial axes exist.
    epilogue: bool,
    /// The function scope, consulted only for a better error message.
    outer: Option<&'a Scope>,
}

impl Resolver {
    fn error(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn func(&mut self, f: &FuncAst) -> Function {
        let params: Vec<TensorType> = f.params.iter().map(|(_, t)| self.tensor_type(t, "a function parameter")).collect();
        let results: Vec<TensorType> = f.results.iter().map(|t| self.tensor_type(t, "a function result")).collect();
        let mut func = Function::new(&f.name.text, params, results);
        func.span = f.name.span;
        let mut scope = Scope::default();
        for (i, (name, _)) in f.params.iter().enumerate() {
            let v = func.params[i];
            self.define(&mut func, &mut scope, name, v);
        }
        let place = Place { region: func.body, kind: OpPlace::Function, compute: None, epilogue: false, outer: None };
        self.stmts(&mut func, &mut scope, &place, &f.body);
        func
    }

    fn stmts(&mut self, func: &mut Function, scope: &mut Scope, place: &Place<'_>, stmts: &[StmtAst]) {
        for s in stmts {
            self.stmt(func, scope, place, s);
        }
    }

    /// Binds `name` to `v` in `scope`, keeping the name as a printing hint.
    fn define(&mut self, func: &mut Function, scope: &mut Scope, name: &Word, v: Value) {
        if !self.bind(scope, name, Some(v)) {
            return;
        }
        func.value_spans[v] = name.span;
        if !name.text.bytes().all(|b| b.is_ascii_digit()) {
            func.values[v].name = Some(name.text.clone());
        }
    }

    /// Binds `name` in `scope`; false (and an error) if it is taken.
    fn bind(&mut self, scope: &mut Scope, name: &Word, v: Option<Value>) -> bool {
        if let Some(&(_, first)) = scope.values.get(&name.text) {
            self.error(
                Diagnostic::error(format!("redefinition of `%{}`", name.text))
                    .at(name.span, "defined again here")
                    .with_secondary(first, "first defined here"),
            );
            return false;
        }
        scope.insert(name, v);
        true
    }

    /// Looks `name` up in `scope`. `outer` (the function scope, or for an
    /// epilogue the body's scope) is only consulted to explain the error.
    fn lookup(&mut self, scope: &Scope, outer: Option<&Scope>, in_epilogue: bool, name: &Word) -> Option<Value> {
        if let Some(&(v, _)) = scope.values.get(&name.text) {
            return v;
        }
        let mut d = Diagnostic::error(format!("use of undefined value `%{}`", name.text)).at(name.span, "not defined");
        if let Some(&at) = scope.ended.get(&name.text) {
            d = d
                .with_secondary(at, "defined in a region that has ended")
                .with_help("a value defined inside a `for`, `if` or `kernel` is visible only inside it; keep results in a buffer");
        } else if let Some(&(_, at)) = outer.and_then(|o| o.values.get(&name.text)) {
            d = if in_epilogue {
                d.with_secondary(at, "defined in the compute body")
                    .with_help("the epilogue runs once per output element, after the reduction: it sees its accumulator and its own reads, not the body's values")
            } else {
                d.with_secondary(at, "defined outside the compute op")
                    .with_help("compute regions are isolated: bring tensors in with `reads(%x = %T[...])`")
            };
        }
        self.error(d);
        None
    }

    fn elem_type(&mut self, w: &Word) -> Option<ElemType> {
        let t = ElemType::from_name(&w.text);
        if t.is_none() {
            self.error(
                Diagnostic::error(format!("unknown element type `{}`", w.text))
                    .at(w.span, "not an element type")
                    .with_help(format!("element types are {}", elem_type_names("and"))),
            );
        }
        t
    }

    /// Resolves a type; errors leave `None`.
    fn ty(&mut self, t: &TypeAst) -> Option<Type> {
        match t {
            TypeAst::Scalar(w) => self.elem_type(w).map(Type::Scalar),
            TypeAst::Tensor { shape, .. } => {
                let tt = self.shape(shape, t.span(), "tensor")?;
                Some(Type::Tensor(tt))
            }
            TypeAst::Buffer { shape, scope, .. } => {
                let mem = MemScope::from_name(&scope.text);
                if mem.is_none() {
                    self.error(
                        Diagnostic::error(format!("unknown memory scope `{}`", scope.text))
                            .at(scope.span, "not a memory scope")
                            .with_help("buffers live in `global`, `shared` or `local` memory"),
                    );
                }
                let tt = self.shape(shape, t.span(), "buffer")?;
                Some(Type::Buffer(BufferType::new(tt.shape, tt.elem, mem?)))
            }
        }
    }

    /// The dimensions and element type of a shaped type (`4x8xf32`), with
    /// the 2^48-byte limit checked.
    fn shape(&mut self, shape: &Word, span: Span, what: &str) -> Option<TensorType> {
        let mut parts: Vec<&str> = shape.text.split('x').collect();
        let elem_text = parts.pop().unwrap_or_default();
        let elem_span = Span { start: shape.span.end - elem_text.len() as u32, ..shape.span };
        let elem = self.elem_type(&Word { text: elem_text.to_string(), span: elem_span });
        let mut dims = Vec::new();
        for p in parts {
            match p.parse::<u64>() {
                Ok(d) => dims.push(d),
                Err(_) => {
                    self.error(Diagnostic::error(format!("dimension `{p}` is too large")).at(shape.span, "in this shape"));
                    return None;
                }
            }
        }
        let tt = TensorType::new(dims, elem?);
        if tt.size_bytes().is_none_or(|b| b > MAX_TENSOR_BYTES) {
            let text = if what == "tensor" { tt.to_string() } else { format!("buffer<{}>", shape.text) };
            self.error(
                Diagnostic::error(format!("{what} type `{text}` is larger than {} bytes", MAX_TENSOR_BYTES))
                    .at(span, "too large")
                    .with_note(format!("tilec limits {what}s to 2^48 bytes so that sizes and offsets fit in 64 bits")),
            );
            return None;
        }
        Some(tt)
    }

    fn tensor_type(&mut self, t: &TypeAst, what: &str) -> TensorType {
        match self.ty(t) {
            Some(Type::Tensor(tt)) => tt,
            Some(other) => {
                let mut d = Diagnostic::error(format!("{what} must be a tensor, found `{other}`")).at(t.span(), "expected a tensor type");
                if let Type::Scalar(e) = other {
                    d = d.with_help(format!("write `tensor<{e}>` for a rank-0 tensor"));
                }
                self.error(d);
                placeholder_tensor()
            }
            None => placeholder_tensor(),
        }
    }

    fn scalar_type(&mut self, t: &TypeAst) -> Option<ElemType> {
        match self.ty(t)? {
            Type::Scalar(e) => Some(e),
            other => {
                self.error(Diagnostic::error(format!("expected a scalar type, found `{other}`")).at(t.span(), format!("expected {}", elem_type_names("or"))));
                None
            }
        }
    }

    fn literal(&mut self, lit: &LiteralAst, ty: ElemType) -> Option<Literal> {
        match lit {
            LiteralAst::Int { text, negative } => {
                if ty.is_float() {
                    return self.float_literal(text, *negative, ty);
                }
                let Ok(mag) = text.text.parse::<u64>() else {
                    self.error(Diagnostic::error(format!("integer `{}` is too large", text.text)).at(text.span, "too large"));
                    return None;
                };
                let value = if *negative { -(mag as i128) } else { mag as i128 };
                let (lo, hi) = ty.int_range().expect("integer type");
                if value < lo as i128 || value > hi as i128 {
                    self.error(
                        Diagnostic::error(format!("integer {value} does not fit in {ty}"))
                            .at(text.span, format!("{ty} holds {lo} to {hi}")),
                    );
                    return None;
                }
                Some(Literal::Int(value as i64))
            }
            LiteralAst::Float { text, negative } => {
                if ty.is_int() {
                    self.error(Diagnostic::error(format!("float literal for integer type {ty}")).at(text.span, "expected an integer"));
                    return None;
                }
                self.float_literal(text, *negative, ty)
            }
            LiteralAst::Special { text, negative } => {
                let x = match text.text.as_str() {
                    "inf" => f64::INFINITY,
                    "nan" if !negative => f64::NAN,
                    _ => {
                        self.error(
                            Diagnostic::error(format!("expected a number, found `{}{}`", if *negative { "-" } else { "" }, text.text))
                                .at(text.span, "not a literal")
                                .with_help("literals are integers, floats, `inf`, `-inf` or `nan`"),
                        );
                        return None;
                    }
                };
                if ty.is_int() {
                    self.error(Diagnostic::error(format!("`{}` is not a value of integer type {ty}", text.text)).at(text.span, "expected an integer"));
                    return None;
                }
                Some(Literal::Float(if *negative { -x } else { x }))
            }
        }
    }

    /// The text of a string literal with its escapes (`\"`, `\\`, `\n`,
    /// `\t`) replaced; another escape is an error.
    fn unescape(&mut self, w: &Word) -> Option<String> {
        let mut out = String::new();
        let mut chars = w.text.char_indices();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, c @ ('"' | '\\'))) => out.push(c),
                Some((_, other)) => {
                    // +1 for the opening quote.
                    let at = w.span.start as usize + 1 + i;
                    self.error(
                        Diagnostic::error(format!("invalid escape `\\{other}` in string"))
                            .at(Span { start: at as u32, end: (at + 1 + other.len_utf8()) as u32, ..w.span }, "invalid escape")
                            .with_help("strings accept the escapes \\\", \\\\, \\n and \\t"),
                    );
                    return None;
                }
                None => {}
            }
        }
        Some(out)
    }

    /// A finite number rounded to float type `ty`; overflow to infinity is
    /// an error (write `inf` for infinity).
    fn float_literal(&mut self, text: &Word, negative: bool, ty: ElemType) -> Option<Literal> {
        let x: f64 = text.text.parse().unwrap_or(f64::INFINITY);
        let x = if negative { -x } else { x };
        let rounded = round_to(ty, x);
        if rounded.is_infinite() {
            self.error(
                Diagnostic::error(format!("literal `{}{}` is out of range for {ty}", if negative { "-" } else { "" }, text.text))
                    .at(text.span, format!("rounds to infinity in {ty}"))
                    .with_help("write `inf` or `-inf` for infinity"),
            );
            return None;
        }
        Some(Literal::Float(rounded))
    }

    /// Resolves a non-compute statement into an op appended to
    /// `place.region` and names its result. A statement with errors still
    /// binds its name (to nothing), so its uses do not cascade into errors.
    fn stmt(&mut self, func: &mut Function, scope: &mut Scope, place: &Place<'_>, stmt: &StmtAst) {
        let (name, value) = match stmt {
            StmtAst::Compute(c) if place.kind == OpPlace::Function => {
                self.compute(func, scope, c);
                return;
            }
            StmtAst::Compute(c) => {
                let d = if place.kind == OpPlace::ComputeRegion {
                    Diagnostic::error("`compute` cannot be nested inside a compute region")
                        .at(c.keyword, "nested compute")
                        .with_help("define the inner computation as its own compute op in the function body")
                } else {
                    Diagnostic::error("`compute` cannot appear in a loop region")
                        .at(c.keyword, "inside loops")
                        .with_help("compute ops belong to the function body; inside loops, compute with loads, scalar ops and stores")
                };
                self.error(d);
                (Some(&c.result), None)
            }
            StmtAst::Const { result, value, ty, span } => (Some(result), self.const_op(func, place, value, ty, *span)),
            StmtAst::Weight { result, keyword, name, ty, span } => (Some(result), self.weight_op(func, place, keyword, name, ty, *span)),
            StmtAst::Index { result, expr, ty, span } => (Some(result), self.index_op(func, scope, place, expr, ty, *span)),
            StmtAst::Op { result, mnemonic, args, sig, span } => {
                (result.as_ref(), self.generic_op(func, scope, place, result.as_ref(), mnemonic, args, sig.as_ref(), *span))
            }
            StmtAst::For(l) => return self.for_stmt(func, scope, place, l),
            StmtAst::If(i) => return self.if_stmt(func, scope, place, i),
            StmtAst::Kernel(k) => return self.kernel_stmt(func, scope, place, k),
            StmtAst::Load { result, src, indices, pad, clauses, ty, span } => {
                (Some(result), self.load(func, scope, place, src, indices, pad.as_ref(), clauses, ty, *span))
            }
            StmtAst::Store { value, dst, indices, span } => return self.store(func, scope, place, value, dst, indices, *span),
            StmtAst::Copy { src, src_indices, dst, dst_indices, sizes, stride, split, permute, pad, cooperative, span } => {
                let clauses = CopyClauses { stride: stride.as_ref(), split: split.as_ref(), permute: permute.as_ref() };
                return self.copy(func, scope, place, (src, src_indices), (dst, dst_indices), sizes, clauses, pad.as_ref(), *cooperative, *span);
            }
            StmtAst::Fill { buffer, value, span } => return self.fill(func, scope, place, buffer, value, *span),
            StmtAst::Intrinsic(x) => return self.intrinsic(func, scope, place, x),
        };
        match (name, value) {
            (Some(name), Some(v)) => self.define(func, scope, name, v),
            (Some(name), None) if !scope.values.contains_key(&name.text) => scope.insert(name, None),
            _ => {}
        }
    }

    fn const_op(&mut self, func: &mut Function, place: &Place<'_>, value: &LiteralAst, ty: &TypeAst, span: Span) -> Option<Value> {
        if !self.check_place("const", place, span) {
            return None;
        }
        let t = self.scalar_type(ty)?;
        let lit = self.literal(value, t)?;
        let op = func.append_op(place.region, OpKind::Const(lit), vec![], vec![Type::Scalar(t)], span);
        Some(func.result(op))
    }

    /// `weight "name" : tensor<...>`: a tensor from the weights file.
    fn weight_op(&mut self, func: &mut Function, place: &Place<'_>, keyword: &Word, name: &Word, ty: &TypeAst, span: Span) -> Option<Value> {
        if keyword.text != "weight" {
            self.error(
                Diagnostic::error(format!("unknown statement `{}`", keyword.text))
                    .at(keyword.span, "expected `weight`")
                    .with_help("a statement of the form `%w = NAME \"...\" : type` is a `weight` op"),
            );
            return None;
        }
        if !self.check_place("weight", place, span) {
            return None;
        }
        let key = self.unescape(name)?;
        if key.is_empty() {
            self.error(Diagnostic::error("a weight's name is empty").at(name.span, "empty name").with_help("name the tensor of the weights file this weight is, e.g. `weight \"conv1.weight\"`"));
            return None;
        }
        let t = match self.ty(ty)? {
            t @ Type::Tensor(_) => t,
            other => {
                self.error(
                    Diagnostic::error(format!("a weight is a tensor, not `{other}`"))
                        .at(ty.span(), "not a tensor type")
                        .with_help("write its type as `tensor<DIMSxELEM>`, the shape and element type of the file's tensor"),
                );
                return None;
            }
        };
        let op = func.append_op(place.region, OpKind::Weight(key.into()), vec![], vec![t], span);
        Some(func.result(op))
    }

    /// `%y = cast|reshape %x : from -> to`: the operand (if it resolved)
    /// has type `from`; `None` after reporting it where it does not.
    fn operand_is(&mut self, func: &Function, m: &str, operand: Option<Value>, args: &[Word], from: &Type) -> Option<()> {
        let Some(v) = operand else { return Some(()) };
        let actual = func.value_type(v);
        if actual != from {
            self.error(Diagnostic::error(format!("{m} from `{from}` but `%{}` has type `{actual}`", args[0].text)).at(args[0].span, format!("has type {actual}")));
            return None;
        }
        Some(())
    }

    /// `index`: one axis name in a compute region (`AxisIndex`), an index
    /// expression over index values in loops (`IndexValue`).
    fn index_op(&mut self, func: &mut Function, scope: &Scope, place: &Place<'_>, expr: &IndexAst, ty: &TypeAst, span: Span) -> Option<Value> {
        if !self.check_place("index", place, span) {
            return None;
        }
        let t = self.scalar_type(ty);
        let (kind, operands) = if place.kind == OpPlace::ComputeRegion {
            let IndexAst::Var(axis) = expr else {
                self.error(
                    Diagnostic::error("in a compute region, `index` takes one axis name")
                        .at(expr.span(), "not an axis name")
                        .with_help("write `%i = index h : i32`, and compute with scalar ops from there"),
                );
                return None;
            };
            let id = place.compute.and_then(|c| self.axis(c, place.epilogue, axis));
            (OpKind::AxisIndex(id?), vec![])
        } else {
            let e = self.loop_index(scope, expr)?;
            let mut operands = Vec::new();
            let mut dims = index_operands(&mut operands, &[e]);
            (OpKind::IndexValue(dims.remove(0)), operands)
        };
        let op = func.append_op(place.region, kind, operands, vec![Type::Scalar(t?)], span);
        Some(func.result(op))
    }

    fn check_place(&mut self, mnemonic: &str, place: &Place<'_>, span: Span) -> bool {
        let Some(decl) = op_decl(mnemonic) else { return false };
        if decl.place.allows(place.kind) {
            return true;
        }
        let d = match place.kind {
            OpPlace::Function if decl.place == OpPlace::Scalar => Diagnostic::error(format!("`{mnemonic}` is a scalar op and cannot appear in a function body"))
                .at(span, "outside any compute region or loop")
                .with_help("scalar ops go in the body or epilogue of a `compute` op, or inside loops"),
            OpPlace::Function => Diagnostic::error(format!("`{mnemonic}` cannot appear in a function body"))
                .at(span, "outside any compute region")
                .with_help("`yield` ends a compute region; a function ends with `return`"),
            OpPlace::ComputeRegion | OpPlace::Scalar => {
                let hint = if mnemonic == "return" { "end a compute region with `yield %v : type`" } else { "only scalar ops and `yield` go in a compute region" };
                Diagnostic::error(format!("`{mnemonic}` cannot appear in a compute region")).at(span, "inside a compute region").with_help(hint)
            }
            OpPlace::Loops => {
                let hint = if mnemonic == "return" {
                    "`return` ends the function body, after the loops"
                } else {
                    "`yield` ends a compute region; loops write their results with `store`"
                };
                Diagnostic::error(format!("`{mnemonic}` cannot appear in a loop region")).at(span, "inside a loop region").with_help(hint)
            }
        };
        self.error(d);
        false
    }

    #[allow(clippy::too_many_arguments)]
    fn generic_op(
        &mut self,
        func: &mut Function,
        scope: &mut Scope,
        place: &Place<'_>,
        result: Option<&Word>,
        mnemonic: &Word,
        args: &[Word],
        sig: Option<&(TypeAst, Option<TypeAst>)>,
        span: Span,
    ) -> Option<Value> {
        let m = mnemonic.text.as_str();
        let Some(decl) = op_decl(m) else {
            let mut d = Diagnostic::error(format!("unknown op `{m}`")).at(mnemonic.span, "not a tile op");
            if let Some(best) = crate::diag::closest(m, crate::ir::ops::op_decls().iter().map(|d: &OpDecl| d.mnemonic)) {
                d = d.with_help(format!("did you mean `{best}`?"));
            }
            self.error(d.with_note("`tilec --list-ops` lists every op"));
            return None;
        };
        if !self.check_place(m, place, mnemonic.span) {
            return None;
        }
        let operands: Vec<Value> = args.iter().filter_map(|a| self.lookup(scope, place.outer, place.epilogue, a)).collect();
        if operands.len() != args.len() {
            return None;
        }
        let kind = match m {
            "return" => OpKind::Return,
            "yield" => OpKind::Yield,
            "cast" => OpKind::Cast,
            "reshape" => OpKind::Reshape,
            "alloc" => OpKind::Alloc,
            "barrier" => OpKind::Barrier,
            _ => match (UnaryOp::from_mnemonic(m), BinaryOp::from_mnemonic(m)) {
                (Some(u), _) => OpKind::Unary(u),
                (_, Some(b)) => OpKind::Binary(b),
                _ => {
                    // `compute`, `const`, `index` have their own syntax; a
                    // mnemonic that reaches here in generic form was misused.
                    self.error(
                        Diagnostic::error(format!("`{m}` is not written in this form"))
                            .at(mnemonic.span, "unexpected here")
                            .with_help(format!("syntax: {}", decl.syntax)),
                    );
                    return None;
                }
            },
        };
        if matches!(kind, OpKind::Alloc | OpKind::Barrier) && !args.is_empty() {
            self.error(
                Diagnostic::error(format!("`{m}` takes no operands"))
                    .at(args[0].span.to(args[args.len() - 1].span), "unexpected operands")
                    .with_help(format!("syntax: {}", decl.syntax)),
            );
            return None;
        }
        let has_result = !matches!(kind, OpKind::Return | OpKind::Yield | OpKind::Barrier);
        match (has_result, result) {
            (true, None) => {
                self.error(
                    Diagnostic::error(format!("`{m}` defines a value and needs a name"))
                        .at(mnemonic.span, "result not named")
                        .with_help(format!("write `%r = {m} ...`")),
                );
                return None;
            }
            (false, Some(r)) => {
                self.error(Diagnostic::error(format!("`{m}` has no result")).at(r.span, "nothing to name"));
                return None;
            }
            _ => {}
        }
        let result_type = match (&kind, sig) {
            (OpKind::Return | OpKind::Barrier, None) => None,
            (OpKind::Barrier, Some((t, _))) => {
                self.error(Diagnostic::error("`barrier` takes no type").at(t.span(), "remove this"));
                return None;
            }
            (OpKind::Alloc, Some((t, None))) => match self.ty(t)? {
                b @ Type::Buffer(_) => Some(b),
                other => {
                    self.error(
                        Diagnostic::error(format!("`alloc` makes a buffer, not `{other}`"))
                            .at(t.span(), "expected a buffer type")
                            .with_help("write `%b = alloc : buffer<16x8xf32, shared>`"),
                    );
                    return None;
                }
            },
            (OpKind::Return, Some((t, _))) => {
                self.error(
                    Diagnostic::error("`return` takes no type list")
                        .at(t.span(), "remove this")
                        .with_help("the function signature gives the result types"),
                );
                return None;
            }
            (OpKind::Yield, None) => None,
            (OpKind::Yield, Some((t, extra))) => {
                if let Some(x) = extra {
                    self.error(Diagnostic::error("`yield` takes a single type").at(x.span(), "unexpected"));
                    return None;
                }
                let Some(t) = self.scalar_type(t) else { return None };
                if let Some(&v) = operands.first() {
                    let actual = func.value_type(v).clone();
                    if actual != Type::Scalar(t) {
                        self.error(
                            Diagnostic::error(format!("`yield` says `{t}` but `%{}` has type `{actual}`", args[0].text))
                                .at(args[0].span, format!("has type {actual}")),
                        );
                    }
                }
                None
            }
            (OpKind::Cast, Some((from, Some(to)))) => {
                let (Some(from_t), Some(to_t)) = (self.scalar_type(from), self.scalar_type(to)) else { return None };
                self.operand_is(func, m, operands.first().copied(), args, &Type::Scalar(from_t))?;
                Some(Type::Scalar(to_t))
            }
            (OpKind::Reshape, Some((from, Some(to)))) => {
                let (Some(from_t), Some(to_t)) = (self.ty(from), self.ty(to)) else { return None };
                self.operand_is(func, m, operands.first().copied(), args, &from_t)?;
                Some(to_t)
            }
            (OpKind::Reshape, _) => {
                self.error(
                    Diagnostic::error("`reshape` needs the operand's type and the new one")
                        .at(span, "missing `: from -> to`")
                        .with_help("write `%v = reshape %x : tensor<4x4xf32> -> tensor<16xf32>`"),
                );
                return None;
            }
            (OpKind::Cast, _) => {
                self.error(
                    Diagnostic::error("`cast` needs the source and target types")
                        .at(span, "missing `: from -> to`")
                        .with_help("write `%y = cast %x : i8 -> i32`"),
                );
                return None;
            }
            (_, Some((t, None))) => Some(Type::Scalar(match self.scalar_type(t) {
                Some(t) => t,
                None => return None,
            })),
            (_, Some((_, Some(x)))) => {
                self.error(Diagnostic::error(format!("`{m}` takes a single type")).at(x.span(), "unexpected `->` type"));
                return None;
            }
            (_, None) => {
                let help = if kind == OpKind::Alloc {
                    "write `%b = alloc : buffer<16x8xf32, shared>`".to_string()
                } else {
                    format!("write `... : f32` after the operands, e.g. `%r = {m} ... : f32`")
                };
                self.error(Diagnostic::error(format!("`{m}` needs its type")).at(span, "missing `: type`").with_help(help));
                return None;
            }
        };
        let op = func.append_op(place.region, kind, operands, result_type.into_iter().collect(), span);
        func.ops[op].results.first().copied()
    }

    fn axis(&mut self, c: &Compute, epilogue: bool, w: &Word) -> Option<AxisId> {
        match c.axis_by_name(&w.text) {
            Some(id) if epilogue && c.axis(id).kind == AxisKind::Reduction => {
                self.error(
                    Diagnostic::error(format!("reduction axis `{}` is not defined in the epilogue", w.text))
                        .at(w.span, "reduction axis")
                        .with_secondary(c.axis(id).span, "declared here")
                        .with_note("the epilogue runs once per output element, after the reduction"),
                );
                None
            }
            Some(id) => Some(id),
            None => {
                let names: Vec<&str> = c.axes.iter().filter(|a| !epilogue || a.kind == AxisKind::Spatial).map(|a| a.name.as_str()).collect();
                let mut d = Diagnostic::error(format!("unknown axis `{}`", w.text)).at(w.span, "not an axis of this compute op");
                d = if names.is_empty() { d.with_note("this compute op has no axes") } else { d.with_note(format!("the axes here are: {}", names.join(", "))) };
                self.error(d);
                None
            }
        }
    }

    /// Normalises an index expression to affine form over the compute's axes.
    fn index(&mut self, c: &Compute, epilogue: bool, e: &IndexAst) -> Option<AffineExpr<AxisId>> {
        let mut atom = |r: &mut Resolver, a: &IndexAst| match a {
            IndexAst::Var(w) => r.axis(c, epilogue, w).map(AffineExpr::var),
            other => {
                let names: Vec<&str> = c.axes.iter().filter(|a| !epilogue || a.kind == AxisKind::Spatial).map(|a| a.name.as_str()).collect();
                let mut d = Diagnostic::error(format!("index expressions of compute ops use axis names, not values like `%{}`", atom_text(other)))
                    .at(other.span(), "not an axis");
                if !names.is_empty() {
                    d = d.with_note(format!("the axes here are: {}", names.join(", ")));
                }
                r.error(d);
                None
            }
        };
        self.index_expr(e, false, &mut atom)
    }

    /// Normalises an index expression of a loop-level op to affine form over
    /// the index values it uses.
    fn loop_index(&mut self, scope: &Scope, e: &IndexAst) -> Option<AffineExpr<Value>> {
        let mut atom = |r: &mut Resolver, a: &IndexAst| match a {
            IndexAst::Value(w) => r.lookup(scope, None, false, w).map(AffineExpr::var),
            other => {
                r.error(
                    Diagnostic::error(format!("`{}` is not an index value", atom_text(other)))
                        .at(other.span(), "expected `%name`")
                        .with_help("index expressions of loop-level ops are affine in index values such as loop variables: `%i * 16 + %p`"),
                );
                None
            }
        };
        self.index_expr(e, true, &mut atom)
    }

    /// An index expression `sum [div d]` in affine form; `atom` resolves the
    /// variables (axis names or index values).
    fn index_expr<V: Copy + Ord>(&mut self, e: &IndexAst, loops: bool, atom: &mut dyn FnMut(&mut Resolver, &IndexAst) -> Option<AffineExpr<V>>) -> Option<AffineExpr<V>> {
        match e {
            IndexAst::Div(num, d, _) => {
                let num = self.affine(num, loops, atom)?;
                let Ok(div) = d.text.parse::<i64>() else {
                    self.error(Diagnostic::error("index expression overflows 64-bit arithmetic").at(d.span, "too large"));
                    return None;
                };
                if div == 0 {
                    self.error(Diagnostic::error("division by zero in an index expression").at(d.span, "divisor is 0"));
                    return None;
                }
                Some(num.with_divisor(div))
            }
            other => self.affine(other, loops, atom),
        }
    }

    fn affine<V: Copy + Ord>(&mut self, e: &IndexAst, loops: bool, atom: &mut dyn FnMut(&mut Resolver, &IndexAst) -> Option<AffineExpr<V>>) -> Option<AffineExpr<V>> {
        let overflow = |r: &mut Resolver, span: Span| {
            r.error(Diagnostic::error("index expression overflows 64-bit arithmetic").at(span, "too large"));
        };
        match e {
            IndexAst::Int(w) => match w.text.parse::<i64>() {
                Ok(v) => Some(AffineExpr::constant(v)),
                Err(_) => {
                    overflow(self, w.span);
                    None
                }
            },
            IndexAst::Var(_) | IndexAst::Value(_) => atom(self, e),
            IndexAst::Neg { inner, odd, span } => {
                let a = self.affine(inner, loops, atom)?;
                if !odd {
                    return Some(a);
                }
                a.checked_scale(-1).map_err(|_| overflow(self, *span)).ok()
            }
            IndexAst::Sum { first, rest, span } => {
                let mut acc = self.affine(first, loops, atom);
                for (minus, t) in rest {
                    let t = self.affine(t, loops, atom);
                    acc = match (acc, t) {
                        (Some(a), Some(t)) => {
                            let t = if *minus { t.checked_scale(-1).ok() } else { Some(t) };
                            match t.and_then(|t| a.checked_add(&t).ok()) {
                                Some(s) => Some(s),
                                None => {
                                    overflow(self, *span);
                                    None
                                }
                            }
                        }
                        _ => None,
                    };
                }
                acc
            }
            IndexAst::Product { factors, span } => {
                let parts: Vec<Option<AffineExpr<V>>> = factors.iter().map(|f| self.affine(f, loops, atom)).collect();
                let parts: Vec<AffineExpr<V>> = parts.into_iter().collect::<Option<_>>()?;
                let mut acc = AffineExpr::constant(1);
                for (p, f) in parts.into_iter().zip(factors) {
                    let product = match (acc.as_constant(), p.as_constant()) {
                        (Some(k), _) => p.checked_scale(k),
                        (_, Some(k)) => acc.checked_scale(k),
                        _ => {
                            let (what, example) = if loops { ("index values", "`%i * 16 + %p`") } else { ("axes", "`h * 2 + r`") };
                            self.error(
                                Diagnostic::error(format!("index expressions must be affine: this multiplies two {} expressions", if loops { "index-value" } else { "axis" }))
                                    .at(f.span(), "not a constant")
                                    .with_help(format!("multiply {what} only by integer constants, e.g. {example}")),
                            );
                            return None;
                        }
                    };
                    acc = match product {
                        Ok(x) => x,
                        Err(_) => {
                            overflow(self, *span);
                            return None;
                        }
                    };
                }
                Some(acc)
            }
            IndexAst::Div(_, _, span) => {
                self.error(
                    Diagnostic::error("`div` must be the last operation of an index expression")
                        .at(*span, "nested `div`")
                        .with_help("write the whole numerator first: `(h - r + 1) div 2`"),
                );
                None
            }
        }
    }

    /// Resolves reads; `None` where a read has errors (already reported).
    fn reads(&mut self, func: &Function, c: &Compute, epilogue: bool, fscope: &Scope, reads: &[ReadAst]) -> Vec<Option<(Read, Value, ElemType)>> {
        reads.iter().map(|r| self.read(func, c, epilogue, fscope, r)).collect()
    }

    fn read(&mut self, func: &Function, c: &Compute, epilogue: bool, fscope: &Scope, r: &ReadAst) -> Option<(Read, Value, ElemType)> {
        let tensor = self.lookup(fscope, None, false, &r.tensor);
        let indices: Vec<Option<AffineExpr<AxisId>>> = r.indices.iter().map(|i| self.index(c, epilogue, i)).collect();
        let tensor = tensor?;
        let Some(tt) = func.value_type(tensor).readable() else {
            let other = func.value_type(tensor);
            self.error(
                Diagnostic::error(format!("`%{}` has type `{other}`; only tensors and buffers can be read", r.tensor.text)).at(r.tensor.span, "not a tensor"),
            );
            return None;
        };
        let pad = match &r.pad {
            Some(p) => Some(self.literal(p, tt.elem)?),
            None => None,
        };
        let indices = indices.into_iter().collect::<Option<Vec<_>>>()?;
        let index_spans = r.indices.iter().map(IndexAst::span).collect();
        Some((Read { indices, pad, index_spans }, tensor, tt.elem))
    }

    /// Binds the scalar of each read as an argument of `region` (or to
    /// nothing where the read failed).
    fn bind_reads(&mut self, func: &mut Function, scope: &mut Scope, region: Region, reads: &[Option<(Read, Value, ElemType)>], asts: &[ReadAst]) {
        for (r, ast) in reads.iter().zip(asts) {
            match r {
                Some((_, _, elem)) => {
                    let v = func.add_region_arg(region, Type::Scalar(*elem), None);
                    self.define(func, scope, &ast.bind, v);
                }
                None => {
                    self.bind(scope, &ast.bind, None);
                }
            }
        }
    }

    fn compute(&mut self, func: &mut Function, fscope: &mut Scope, c: &ComputeAst) {
        // Axes: spatial first, then reduction.
        let mut axes: Vec<AxisDecl> = Vec::new();
        let reduce_axes = c.reduce.as_ref().map(|(_, a)| a.as_slice()).unwrap_or(&[]);
        for (a, kind) in c.spatial.iter().map(|a| (a, AxisKind::Spatial)).chain(reduce_axes.iter().map(|a| (a, AxisKind::Reduction))) {
            if let Some(first) = axes.iter().find(|x| x.name == a.name.text) {
                self.error(
                    Diagnostic::error(format!("axis `{}` is declared twice", a.name.text))
                        .at(a.name.span, "declared again")
                        .with_secondary(first.span, "first declared here"),
                );
                continue;
            }
            if a.name.text.contains('.') {
                self.error(
                    Diagnostic::error(format!("axis name `{}` contains a dot", a.name.text))
                        .at(a.name.span, "not an axis name")
                        .with_note("dots separate an axis from a tile level in loop tags such as `axis(i.block)`, so axis names have none"),
                );
                continue;
            }
            let Ok(extent) = a.extent.text.parse::<u64>() else {
                self.error(Diagnostic::error(format!("axis extent `{}` is too large", a.extent.text)).at(a.extent.span, "too large"));
                continue;
            };
            axes.push(AxisDecl { name: a.name.text.clone(), extent, kind, span: a.name.span });
        }
        let combiner = c.reduce.as_ref().and_then(|(w, _)| {
            let comb = Combiner::from_name(&w.text);
            if comb.is_none() {
                let mut d = Diagnostic::error(format!("unknown combiner `{}`", w.text)).at(w.span, "expected `sum`, `max` or `min`");
                if matches!(w.text.as_str(), "avg" | "mean") {
                    d = d.with_help("average with `reduce sum` and scale in an `epilogue`");
                }
                self.error(d);
            }
            comb
        });
        let mut compute = Compute {
            label: c.label.as_ref().and_then(|l| self.unescape(l)),
            axes,
            combiner,
            reads: Vec::new(),
            output: Vec::new(),
            output_spans: c.out_index.iter().map(IndexAst::span).collect(),
            has_epilogue: c.epilogue.is_some(),
            epilogue_reads: Vec::new(),
            schedule: None,
        };
        let body_reads = self.reads(func, &compute, false, fscope, &c.reads);
        let epi_reads = c.epilogue.as_ref().map(|e| self.reads(func, &compute, true, fscope, &e.reads)).unwrap_or_default();
        let out_ty = self.tensor_type(&c.out_type, "the result of `compute`");
        // Partial reads and outputs only occur when errors were reported, in
        // which case this IR is discarded; the regions are still resolved so
        // that their errors are reported too.
        compute.output = c.out_index.iter().filter_map(|i| self.index(&compute, false, i)).collect();
        compute.reads = body_reads.iter().flatten().map(|(r, _, _)| r.clone()).collect();
        compute.epilogue_reads = epi_reads.iter().flatten().map(|(r, _, _)| r.clone()).collect();
        if let Some(s) = &c.schedule {
            // `cache` names reads by their binding, body reads first; a name
            // bound in both the body and the epilogue means the body's read.
            let epi_asts = c.epilogue.as_ref().map(|e| e.reads.as_slice()).unwrap_or(&[]);
            let names: Vec<String> = c.reads.iter().chain(epi_asts).map(|r| r.bind.text.clone()).collect();
            compute.schedule = Some(self.schedule(s, ScheduleOwner::Compute(&compute.axes), &names));
        }
        let operands = body_reads.iter().chain(&epi_reads).flatten().map(|(_, v, _)| *v).collect();
        let compute_for_regions = compute.clone();
        let span = Span { end: c.keyword.end, ..c.head_span };
        let op = func.append_op(func.body, OpKind::Compute(Box::new(compute)), operands, vec![Type::Tensor(out_ty.clone())], span);

        // One isolated scope for the body and the epilogue.
        let mut cscope = Scope::default();
        let body = func.new_region(Some(op));
        func.ops[op].regions.push(body);
        self.bind_reads(func, &mut cscope, body, &body_reads, &c.reads);
        let place = Place { region: body, kind: OpPlace::ComputeRegion, compute: Some(&compute_for_regions), epilogue: false, outer: Some(fscope) };
        for s in &c.body {
            self.stmt(func, &mut cscope, &place, s);
        }
        if let Some(e) = &c.epilogue {
            // The accumulator has the type the body yields.
            let acc_ty = func.regions[body]
                .ops
                .last()
                .filter(|&&o| matches!(func.ops[o].kind, OpKind::Yield))
                .and_then(|&o| func.ops[o].operands.first().map(|&v| func.value_type(v).clone()))
                .unwrap_or(Type::Scalar(out_ty.elem));
            let epi = func.new_region(Some(op));
            func.ops[op].regions.push(epi);
            // The epilogue runs once per output element: the body's values
            // do not exist there, so it gets a scope of its own.
            let mut escope = Scope::default();
            let acc = func.add_region_arg(epi, acc_ty, None);
            self.define(func, &mut escope, &e.acc, acc);
            self.bind_reads(func, &mut escope, epi, &epi_reads, &e.reads);
            let place = Place { region: epi, epilogue: true, outer: Some(&cscope), ..place };
            for s in &e.body {
                self.stmt(func, &mut escope, &place, s);
            }
        }
        let v = func.result(op);
        self.define(func, fscope, &c.result, v);
    }

    /// A loop-level region owned by `op` (a `for`, `if` or `kernel`), with
    /// `args` as its arguments, resolved in `scope`; its names end with it.
    fn loop_region(&mut self, func: &mut Function, scope: &mut Scope, op: Op, args: &[(&Word, Type)], body: &[StmtAst]) -> Region {
        let region = func.new_region(Some(op));
        func.ops[op].regions.push(region);
        let mark = scope.mark();
        for (name, ty) in args {
            let v = func.add_region_arg(region, ty.clone(), None);
            self.define(func, scope, name, v);
        }
        let place = Place { region, kind: OpPlace::Loops, compute: None, epilogue: false, outer: None };
        self.stmts(func, scope, &place, body);
        scope.end_region(mark);
        region
    }

    fn for_stmt(&mut self, func: &mut Function, scope: &mut Scope, place: &Place<'_>, l: &ForAst) {
        if !self.check_place("for", place, l.head_span) {
            return;
        }
        if l.lower.text.parse::<u64>() != Ok(0) {
            self.error(
                Diagnostic::error(format!("loops start at 0, not {}", l.lower.text))
                    .at(l.lower.span, "lower bound must be 0")
                    .with_help("write `for %i = 0 to N` and put the offset into the index expressions"),
            );
        }
        let extent = l.extent.text.parse::<u64>().unwrap_or_else(|_| {
            self.error(Diagnostic::error(format!("loop extent `{}` is too large", l.extent.text)).at(l.extent.span, "too large"));
            1
        });
        let mut mapping = Mapping::Serial;
        let mut tag = None;
        let mut seen: Vec<&Word> = Vec::new();
        for c in &l.clauses {
            if !LOOP_CLAUSES.contains(&c.name.text.as_str()) {
                let mut d = Diagnostic::error(format!("unknown loop clause `{}`", c.name.text)).at(c.name.span, "not a loop clause");
                if let Some(best) = crate::diag::closest(&c.name.text, LOOP_CLAUSES.into_iter()) {
                    d = d.with_help(format!("did you mean `{best}`?"));
                }
                self.error(d.with_note("loops take `map(<mapping>)` and a tag, `axis(<axis>.<level>)` or `reduce(<axis>.<level>)`"));
                continue;
            }
            if let Some(first) = seen.iter().find(|w| w.text == c.name.text) {
                self.error(
                    Diagnostic::error(format!("`{}` is given twice", c.name.text)).at(c.name.span, "given again").with_secondary(first.span, "first given here"),
                );
                continue;
            }
            seen.push(&c.name);
            if c.name.text == "map" {
                match Mapping::from_name(&c.arg.text) {
                    Some(m) => mapping = m,
                    None => self.error(
                        Diagnostic::error(format!("unknown loop mapping `{}`", c.arg.text))
                            .at(c.arg.span, "not a mapping")
                            .with_note("mappings are serial, parallel, block.x/y/z, thread.x/y/z, vthread, unroll and vector"),
                    ),
                }
            } else {
                if tag.is_some() {
                    self.error(Diagnostic::error("a loop has one tag: `axis(...)` or `reduce(...)`").at(c.name.span, "second tag"));
                    continue;
                }
                tag = self.loop_tag(&c.arg, c.name.text == "reduce");
            }
        }
        let kind = OpKind::For(Box::new(ForLoop { extent, mapping, tag }));
        let op = func.append_op(place.region, kind, vec![], vec![], l.head_span);
        self.loop_region(func, scope, op, &[(&l.var, Type::Index)], &l.body);
    }

    /// `axis.level`: the axis before the first dot, the tile level after
    /// it; `reduce(...)` tags a reduction axis' loop.
    fn loop_tag(&mut self, w: &Word, reduction: bool) -> Option<LoopTag> {
        match w.text.split_once('.') {
            Some((axis, level)) if !level.contains('.') => Some(LoopTag { axis: axis.to_string(), level: TagLevel::from_name(level), reduction }),
            Some(_) => {
                self.error(
                    Diagnostic::error(format!("loop tag `{}` has more than one dot", w.text))
                        .at(w.span, "expected `axis.level`")
                        .with_note("axis names and tile level names contain no dots"),
                );
                None
            }
            None => {
                self.error(
                    Diagnostic::error(format!("loop tag `{}` has no tile level", w.text))
                        .at(w.span, "expected `axis.level`")
                        .with_help(format!("name the axis and the tile level the loop came from, e.g. `axis({}.block)`", w.text)),
                );
                None
            }
        }
    }

    fn if_stmt(&mut self, func: &mut Function, scope: &mut Scope, place: &Place<'_>, i: &IfAst) {
        if !self.check_place("if", place, i.head_span) {
            return;
        }
        if i.conds.is_empty() {
            self.error(
                Diagnostic::error("`if` needs at least one condition")
                    .at(i.head_span, "no condition")
                    .with_help("write `if %i * 4 + %p < 10 { ... }`"),
            );
        }
        let mut exprs = Vec::new();
        let mut bounds = Vec::new();
        for c in &i.conds {
            let e = self.loop_index(scope, &c.expr);
            let b = match c.bound.text.parse::<i64>() {
                Ok(b) => Some(if c.negative { -b } else { b }),
                Err(_) => {
                    self.error(Diagnostic::error(format!("bound `{}` is too large", c.bound.text)).at(c.bound.span, "too large"));
                    None
                }
            };
            if let (Some(e), Some(b)) = (e, b) {
                exprs.push(e);
                bounds.push(b);
            }
        }
        let mut operands = Vec::new();
        let dims = index_operands(&mut operands, &exprs);
        let kind = OpKind::If(Box::new(Guard { conds: dims.into_iter().zip(bounds).collect() }));
        let op = func.append_op(place.region, kind, operands, vec![], i.head_span);
        self.loop_region(func, scope, op, &[], &i.body);
    }

    fn kernel_stmt(&mut self, func: &mut Function, scope: &mut Scope, place: &Place<'_>, k: &KernelAst) {
        if !self.check_place("kernel", place, k.head_span) {
            return;
        }
        let label = k.label.as_ref().and_then(|l| self.unescape(l));
        let kind = OpKind::Kernel(Box::new(Kernel { label, schedule: Schedule::new(""), prepack: k.prepack }));
        let op = func.append_op(place.region, kind, vec![], vec![], k.head_span);
        let body = self.loop_region(func, scope, op, &[], &k.body);
        // The schedule's `cache` names reads by the tags of the loads inside.
        let tags = func.load_read_tags(body);
        let schedule = self.schedule(&k.schedule, ScheduleOwner::Kernel, &tags);
        if let OpKind::Kernel(kernel) = &mut func.ops[op].kind {
            kernel.schedule = schedule;
        }
    }

    /// Resolves the index expressions of a loop-level op; `None` if any has
    /// errors (all are reported).
    fn loop_indices(&mut self, scope: &Scope, indices: &[IndexAst]) -> Option<Vec<AffineExpr<Value>>> {
        let exprs: Vec<Option<AffineExpr<Value>>> = indices.iter().map(|i| self.loop_index(scope, i)).collect();
        exprs.into_iter().collect()
    }

    /// The element type of something loads and copies read from.
    fn readable(&mut self, func: &Function, v: Value, name: &Word, what: &str) -> Option<TensorType> {
        let t = func.value_type(v).readable();
        if t.is_none() {
            self.error(
                Diagnostic::error(format!("`%{}` has type `{}`; only tensors and buffers can be {what}", name.text, func.value_type(v)))
                    .at(name.span, "not a tensor or buffer"),
            );
        }
        t
    }

    #[allow(clippy::too_many_arguments)]
    fn load(
        &mut self,
        func: &mut Function,
        scope: &Scope,
        place: &Place<'_>,
        src: &Word,
        indices: &[IndexAst],
        pad: Option<&LiteralAst>,
        clauses: &[ClauseAst],
        ty: &TypeAst,
        span: Span,
    ) -> Option<Value> {
        if !self.check_place("load", place, span) {
            return None;
        }
        let source = self.lookup(scope, None, false, src);
        let exprs = self.loop_indices(scope, indices);
        let t = self.scalar_type(ty);
        let mut read: Option<&Word> = None;
        for c in clauses {
            match (c.name.text.as_str(), read) {
                ("read", None) => read = Some(&c.arg),
                ("read", Some(first)) => self.error(
                    Diagnostic::error("`read` is given twice").at(c.name.span, "given again").with_secondary(first.span, "first given here"),
                ),
                (other, _) => self.error(
                    Diagnostic::error(format!("unknown load clause `{other}`"))
                        .at(c.name.span, "not a load clause")
                        .with_note("loads take `pad(<literal>)` and `read(<read name>)`"),
                ),
            }
        }
        let source = source?;
        let tt = self.readable(func, source, src, "loaded from")?;
        let pad = match pad {
            Some(p) => Some(self.literal(p, tt.elem)?),
            None => None,
        };
        let (exprs, t) = (exprs?, t?);
        let mut operands = vec![source];
        let indices = index_operands(&mut operands, &exprs);
        let read = match read {
            Some(w) => Some(self.unescape(w)?),
            None => None,
        };
        let access = Access { indices, pad, read };
        let op = func.append_op(place.region, OpKind::Load(Box::new(access)), operands, vec![Type::Scalar(t)], span);
        Some(func.result(op))
    }

    #[allow(clippy::too_many_arguments)]
    fn store(&mut self, func: &mut Function, scope: &Scope, place: &Place<'_>, value: &Word, dst: &Word, indices: &[IndexAst], span: Span) {
        if !self.check_place("store", place, span) {
            return;
        }
        let v = self.lookup(scope, None, false, value);
        let d = self.lookup(scope, None, false, dst);
        let exprs = self.loop_indices(scope, indices);
        let (Some(v), Some(d), Some(exprs)) = (v, d, exprs) else { return };
        let mut operands = vec![v, d];
        let indices = index_operands(&mut operands, &exprs);
        let access = Access { indices, pad: None, read: None };
        func.append_op(place.region, OpKind::Store(Box::new(access)), operands, vec![], span);
    }

    #[allow(clippy::too_many_arguments)]
    fn copy(
        &mut self,
        func: &mut Function,
        scope: &Scope,
        place: &Place<'_>,
        src: (&Word, &[IndexAst]),
        dst: (&Word, &[IndexAst]),
        sizes: &[Word],
        clauses: CopyClauses<'_>,
        pad: Option<&LiteralAst>,
        cooperative: bool,
        span: Span,
    ) {
        if !self.check_place("copy", place, span) {
            return;
        }
        let s = self.lookup(scope, None, false, src.0);
        let d = self.lookup(scope, None, false, dst.0);
        let src_exprs = self.loop_indices(scope, src.1);
        let dst_exprs = self.loop_indices(scope, dst.1);
        let sizes = self.ints::<u64>(sizes, "box size");
        // Whether the strides are one per box dimension, and the permutation
        // one of the box's dimensions, are the verifier's rules (passes make
        // copies too).
        let stride = clauses.stride.map_or(Some(Vec::new()), |(steps, _)| self.ints::<u64>(steps, "stride"));
        let split = match clauses.split {
            None => Some(None),
            Some((parts, at)) => self.copy_split(parts, *at).map(Some),
        };
        let permute = clauses.permute.map_or(Some(Vec::new()), |(dims, _)| self.ints::<usize>(dims, "dimension"));
        let (Some(s), Some(d), Some(stride), Some(split), Some(permute)) = (s, d, stride, split, permute) else { return };
        let Some(src_type) = self.readable(func, s, src.0, "copied from") else { return };
        let pad = match pad {
            Some(p) => match self.literal(p, src_type.elem) {
                Some(l) => Some(l),
                None => return,
            },
            None => None,
        };
        let (Some(src_exprs), Some(dst_exprs), Some(sizes)) = (src_exprs, dst_exprs, sizes) else { return };
        let mut operands = vec![s, d];
        let all: Vec<AffineExpr<Value>> = src_exprs.iter().chain(&dst_exprs).cloned().collect();
        let mut dims = index_operands(&mut operands, &all);
        let dst_dims = dims.split_off(src_exprs.len());
        let kind = OpKind::Copy(Box::new(CopyOp { src: dims, dst: dst_dims, sizes, stride, split, permute, pad, cooperative }));
        func.append_op(place.region, kind, operands, vec![], span);
    }

    /// A copy's `split [dim, factor]`. Whether the dimension is the box's
    /// and the factor divides its size are the verifier's rules (passes
    /// make copies too).
    fn copy_split(&mut self, parts: &[Word], at: Span) -> Option<CopySplit> {
        let [dim, factor] = parts else {
            self.error(
                Diagnostic::error(format!("`split` takes a box dimension and a factor, not {} number(s)", parts.len()))
                    .at(at, "expected `split [dimension, factor]`")
                    .with_help("`split [0, 4]` splits box dimension 0 into (size / 4, 4)"),
            );
            return None;
        };
        let dim = self.ints::<usize>(std::slice::from_ref(dim), "dimension");
        let factor = self.ints::<u64>(std::slice::from_ref(factor), "split factor");
        Some(CopySplit { dim: dim?[0], factor: factor?[0] })
    }

    /// The integers of a list clause; each one too large for `T` is an
    /// error naming it (`what`), and the list is then `None`.
    fn ints<T: std::str::FromStr>(&mut self, words: &[Word], what: &str) -> Option<Vec<T>> {
        let parsed: Vec<Option<T>> = words
            .iter()
            .map(|w| {
                let n = w.text.parse::<T>().ok();
                if n.is_none() {
                    self.error(Diagnostic::error(format!("{what} `{}` is too large", w.text)).at(w.span, "too large"));
                }
                n
            })
            .collect();
        parsed.into_iter().collect()
    }

    fn intrinsic(&mut self, func: &mut Function, scope: &Scope, place: &Place<'_>, x: &IntrinsicAst) {
        if x.keyword.text != "intrinsic" {
            self.error(
                Diagnostic::error(format!("unknown statement `{}`", x.keyword.text))
                    .at(x.keyword.span, "expected `intrinsic`")
                    .with_help("a statement of the form `NAME \"...\" kind [m, n, k] ...` is an `intrinsic` op"),
            );
            return;
        }
        if !self.check_place("intrinsic", place, x.span) {
            return;
        }
        let kind = IntrinsicKind::from_name(&x.kind.text);
        if kind.is_none() {
            let names: Vec<&str> = IntrinsicKind::ALL.iter().map(|k| k.name()).collect();
            let mut d = Diagnostic::error(format!("unknown intrinsic kind `{}`", x.kind.text)).at(x.kind.span, "not an intrinsic kind");
            d = match crate::diag::closest(&x.kind.text, names.iter().copied()) {
                Some(c) => d.with_help(format!("did you mean `{c}`?")),
                None => d.with_help(format!("the kinds are {}", names.join(", "))),
            };
            self.error(d);
        }
        // Per axis, its parts (one for a basic axis).
        let parts: Option<Vec<Vec<u64>>> = x.shape.iter().map(|entry| self.ints::<u64>(entry, "intrinsic size")).collect();
        if let Some(sh) = &parts
            && sh.len() != 3
        {
            let words = || x.shape.iter().flatten();
            let span = words().next().map_or(x.kind.span, |w| Span { end: words().last().expect("nonempty").span.end, ..w.span });
            self.error(Diagnostic::error(format!("an intrinsic's shape has 3 sizes (`m`, `n`, `k`), not {}", sh.len())).at(span, "expected `[m, n, k]`"));
            return;
        }
        let Some(parts) = parts.map(|p| [p[0].clone(), p[1].clone(), p[2].clone()]) else { return };
        if let Some(entry) = x.shape.iter().find(|e| e.len() > MAX_INTRINSIC_PARTS) {
            let span = Span { end: entry.last().expect("nonempty").span.end, ..entry[0].span };
            self.error(Diagnostic::error(format!("an intrinsic axis has {} parts, more than {MAX_INTRINSIC_PARTS}", entry.len())).at(span, "too many parts"));
            return;
        }
        let shape = parts.iter().map(|p| p.iter().try_fold(1u64, |a, &e| a.checked_mul(e))).collect::<Option<Vec<u64>>>();
        let Some(shape) = shape else {
            self.error(Diagnostic::error("an intrinsic's size overflows").at(x.kind.span, "in this intrinsic"));
            return;
        };
        if let Some(p) = &x.acc.pad {
            self.error(Diagnostic::error("the accumulator of an intrinsic has no padding").at(p.span(), "only `a` and `b` may read padding").with_help("remove `pad(...)` after the accumulator"));
            return;
        }
        let mut lane = None;
        if let Some((word, g, t)) = &x.lane {
            if word.text != "lane" {
                self.error(
                    Diagnostic::error(format!("unknown intrinsic clause `{}`", word.text))
                        .at(word.span, "expected `lane`")
                        .with_help("a warp intrinsic names its lane as `lane(%g, %t)`: its group (0..8) and index in the group (0..4)"),
                );
                return;
            }
            let (Some(g), Some(t)) = (self.loop_index(scope, g), self.loop_index(scope, t)) else { return };
            for (e, w) in [(&g, &x.lane.as_ref().expect("some").1), (&t, &x.lane.as_ref().expect("some").2)] {
                if let Some(&(v, _)) = e.terms().iter().find(|&&(v, _)| func.value_type(v) != &Type::Index) {
                    self.error(Diagnostic::error(format!("`lane` takes index values, not `{}`", func.value_type(v))).at(w.span(), "not an index value"));
                    return;
                }
                if e.divisor() != 1 {
                    self.error(Diagnostic::error("`lane` takes affine index expressions without a division").at(w.span(), "divided"));
                    return;
                }
            }
            lane = Some([g, t]);
        }
        let mut operands = Vec::new();
        let mut resolved = Vec::new();
        // A lane's fragment (the accumulator of a `lane` call) has one part
        // per axis, its `m` and `n` running over 2 × 2 elements, whatever
        // parts the tile's axes have.
        let fragment_parts: [Vec<u64>; 3] = [vec![2], vec![2], vec![parts[2].iter().product()]];
        let tile_parts = [if lane.is_some() { fragment_parts } else { parts.clone() }, parts.clone(), parts.clone()];
        for (t, tile_parts) in [&x.acc, &x.a, &x.b].into_iter().zip(&tile_parts) {
            let buf = self.lookup(scope, None, false, &t.buffer);
            let exprs: Vec<Option<(AffineExpr<Value>, [Vec<i64>; 3])>> = t.indices.iter().map(|e| self.tile_index(scope, e, tile_parts)).collect();
            let (Some(buf), Some(exprs)) = (buf, exprs.into_iter().collect::<Option<Vec<_>>>()) else { return };
            let Some(tt) = self.readable(func, buf, &t.buffer, "an intrinsic's operands") else { return };
            let pad = match &t.pad {
                Some(p) => Some(self.literal(p, tt.elem)),
                None => None,
            };
            if pad == Some(None) {
                return;
            }
            operands.push(buf);
            resolved.push((exprs, pad.flatten()));
        }
        let Some(kind) = kind else { return };
        let mut all: Vec<AffineExpr<Value>> = resolved.iter().flat_map(|(exprs, _)| exprs.iter().map(|(e, _)| e.clone())).collect();
        all.extend(lane.iter().flatten().cloned());
        let mut dims = index_operands(&mut operands, &all).into_iter();
        let mut reads = [None, x.reads.as_ref().map(|r| r.0.text.clone()), x.reads.as_ref().map(|r| r.1.text.clone())].into_iter();
        let mut tiles = resolved.into_iter().zip(&tile_parts).map(|((exprs, pad), tile_parts)| {
            let indices: Vec<AffineExpr<Dim>> = dims.by_ref().take(exprs.len()).collect();
            // Per axis, per part, per dimension.
            let steps = [0, 1, 2].map(|axis| (0..tile_parts[axis].len()).map(|part| exprs.iter().map(|(_, s)| s[axis][part]).collect()).collect());
            TileOperand { indices, steps, pad, read: reads.next().flatten() }
        });
        let (acc, a, b) = (tiles.next().expect("3 tiles"), tiles.next().expect("3 tiles"), tiles.next().expect("3 tiles"));
        let lane = lane.map(|_| [dims.next().expect("g"), dims.next().expect("t")]);
        let call = IntrinsicCall { name: x.name.text.clone(), kind, shape: [shape[0], shape[1], shape[2]], parts, acc, a, b, lane };
        func.append_op(place.region, OpKind::Intrinsic(Box::new(call)), operands, vec![], x.span);
    }

    /// An index expression of an `intrinsic` op's operand: affine in index
    /// values and the intrinsic's axes `m`, `n`, `k` (a fused axis' parts
    /// `m0`, `m1`, ..., `parts` giving how many each axis has), which must
    /// stay out of a division. Returns the part over index values and the
    /// steps of each axis' parts.
    fn tile_index(&mut self, scope: &Scope, e: &IndexAst, parts: &[Vec<u64>; 3]) -> Option<(AffineExpr<Value>, [Vec<i64>; 3])> {
        const LETTERS: [&str; 3] = ["m", "n", "k"];
        // `m` on a basic axis, `m0`, `m1`, ... on a fused one: (axis, part).
        let local = |name: &str| -> Option<(usize, usize)> {
            let axis = LETTERS.iter().position(|l| name.starts_with(l))?;
            let rest = &name[1..];
            match (parts[axis].len(), rest) {
                (1, "") => Some((axis, 0)),
                (n, digits) if n > 1 && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => digits.parse::<usize>().ok().filter(|&p| p < n).map(|p| (axis, p)),
                _ => None,
            }
        };
        let names = || -> String {
            let mut v = Vec::new();
            for (a, l) in LETTERS.iter().enumerate() {
                if parts[a].len() > 1 {
                    v.extend((0..parts[a].len()).map(|p| format!("`{l}{p}`")));
                } else {
                    v.push(format!("`{l}`"));
                }
            }
            v.join(", ")
        };
        // Index values are `Ok`, the intrinsic's axes `Err((axis, part))` (sorted last).
        let mut atom = |r: &mut Resolver, a: &IndexAst| match a {
            IndexAst::Value(w) => r.lookup(scope, None, false, w).map(|v| AffineExpr::var(Ok(v))),
            IndexAst::Var(w) if local(&w.text).is_some() => {
                let (axis, part) = local(&w.text).expect("checked");
                Some(AffineExpr::var(Err((axis, part))))
            }
            other => {
                r.error(
                    Diagnostic::error(format!("`{}` is neither an index value nor an intrinsic axis", atom_text(other)))
                        .at(other.span(), format!("expected `%name` or one of {}", names()))
                        .with_help("an intrinsic's operands are indexed by index values and its axes: `%acc[%i, %j * 8 + m]`; a fused axis (`[2 * 8, 1, 1]`) by its parts, outermost first: `%x[%oh + m0, %ow + m1]`; a lane's fragment (the accumulator after `lane(..)`) by `m` and `n` alone"),
                );
                None
            }
        };
        let full: AffineExpr<Result<Value, (usize, usize)>> = self.index_expr(e, true, &mut atom)?;
        let steps = [0, 1, 2].map(|axis| (0..parts[axis].len()).map(|part| full.coeff(Err((axis, part)))).collect::<Vec<i64>>());
        if full.divisor() != 1 && steps.iter().flatten().any(|&s| s != 0) {
            self.error(
                Diagnostic::error("an intrinsic's axis inside a division")
                    .at(e.span(), "`m`, `n` and `k` must step the index by a constant")
                    .with_help("write the axes outside the division"),
            );
            return None;
        }
        let origin = AffineExpr::from_parts(full.terms().iter().filter_map(|&(v, c)| v.ok().map(|v| (v, c))), full.constant_term(), full.divisor()).ok()?;
        Some((origin, steps))
    }

    fn fill(&mut self, func: &mut Function, scope: &Scope, place: &Place<'_>, buffer: &Word, value: &LiteralAst, span: Span) {
        if !self.check_place("fill", place, span) {
            return;
        }
        let Some(b) = self.lookup(scope, None, false, buffer) else { return };
        // Writing a tensor is the verifier's to report; its element type is
        // still what the literal is read as.
        let Some(tt) = self.readable(func, b, buffer, "filled") else { return };
        let Some(lit) = self.literal(value, tt.elem) else { return };
        func.append_op(place.region, OpKind::Fill(lit), vec![b], vec![], span);
    }

    /// Turns a schedule dictionary into a [`Schedule`]. Unknown keys, axes
    /// and reads and values of the wrong shape are reported here, at the
    /// entry; the arithmetic rules are the verifier's
    /// (`verify_schedule_structure`), since passes build schedules too.
    /// `reads` names the reads by position: the compute op's bindings, or
    /// the `read(...)` tags of a kernel's loads.
    fn schedule(&mut self, s: &ScheduleAst, owner: ScheduleOwner<'_>, reads: &[String]) -> Schedule {
        let mut sched = Schedule::new(self.unescape(&s.target).unwrap_or_default());
        sched.span = s.span;
        let mut seen: Vec<&Word> = Vec::new();
        for e in &s.entries {
            let key = e.key.text.as_str();
            if !SCHEDULE_KEYS.contains(&key) {
                let mut d = Diagnostic::error(format!("unknown schedule key `{key}`")).at(e.key.span, "not a schedule key");
                if let Some(best) = crate::diag::closest(key, SCHEDULE_KEYS.into_iter()) {
                    d = d.with_help(format!("did you mean `{best}`?"));
                }
                self.error(d.with_note("schedule keys are tile, order, vthread, cache, unroll, vector and intrinsic"));
                continue;
            }
            if let Some(first) = seen.iter().find(|w| w.text == key) {
                self.error(Diagnostic::error(format!("`{key}` is given twice")).at(e.key.span, "given again").with_secondary(first.span, "first given here"));
                continue;
            }
            seen.push(&e.key);
            match key {
                "tile" => {
                    for (axis, v) in self.axis_dict(e, &owner, "`{axis = [size, ...], ...}`") {
                        let AttrValue::List(items, _) = v else {
                            self.shape_error(key, "`{axis = [size, ...], ...}`", v, "expected a list of tile sizes");
                            continue;
                        };
                        let sizes: Vec<Option<u64>> = items.iter().map(|x| self.attr_int(key, "`{axis = [size, ...], ...}`", x)).collect();
                        if let Some(sizes) = sizes.into_iter().collect::<Option<Vec<u64>>>() {
                            sched.tiles.push((axis.text.clone(), sizes));
                        }
                    }
                }
                "order" => {
                    let shape = "`[axis, ...]`";
                    let AttrValue::List(items, span) = &e.value else {
                        self.shape_error(key, shape, &e.value, "expected a list of axes");
                        continue;
                    };
                    if items.is_empty() {
                        self.error(Diagnostic::error("`order` names no axis").at(*span, "empty").with_help("write the axes outermost first, e.g. `order = [j, i, k]`, or leave `order` out for declaration order"));
                    }
                    let mut listed: Vec<&Word> = Vec::new();
                    for x in items {
                        let AttrValue::Ident(axis) = x else {
                            self.shape_error(key, shape, x, "expected an axis name");
                            continue;
                        };
                        if let Some(first) = listed.iter().find(|w| w.text == axis.text) {
                            self.error(
                                Diagnostic::error(format!("axis `{}` is listed twice in `order`", axis.text))
                                    .at(axis.span, "listed again")
                                    .with_secondary(first.span, "first listed here"),
                            );
                            continue;
                        }
                        if let ScheduleOwner::Compute(axes) = &owner
                            && !axes.iter().any(|a| a.name == axis.text)
                        {
                            let names: Vec<&str> = axes.iter().map(|a| a.name.as_str()).collect();
                            self.error(
                                Diagnostic::error(format!("unknown axis `{}` in `order`", axis.text))
                                    .at(axis.span, "not an axis of this compute op")
                                    .with_note(format!("the axes are: {}", names.join(", "))),
                            );
                            continue;
                        }
                        listed.push(axis);
                        sched.order.push(axis.text.clone());
                    }
                }
                "vthread" => {
                    for (axis, v) in self.axis_dict(e, &owner, "`{axis = count, ...}`") {
                        if let Some(n) = self.attr_int(key, "`{axis = count, ...}`", v) {
                            sched.vthreads.push((axis.text.clone(), n));
                        }
                    }
                }
                "cache" => {
                    let shape = "`{read = memory level, ...}`";
                    let AttrValue::Dict(entries, _) = &e.value else {
                        self.shape_error(key, shape, &e.value, "expected a dictionary");
                        continue;
                    };
                    for x in entries {
                        let AttrValue::Ident(level) = &x.value else {
                            self.shape_error(key, shape, &x.value, "expected a memory level name");
                            continue;
                        };
                        let Some(pos) = reads.iter().position(|r| *r == x.key.text) else {
                            self.unknown_read(&x.key, "cache", &owner, reads);
                            continue;
                        };
                        sched.cache.push(CacheDirective { read: pos, read_name: x.key.text.clone(), level: level.text.clone() });
                    }
                }
                "unroll" => sched.unroll = self.attr_int(key, "an integer", &e.value).unwrap_or(0),
                "vector" => {
                    let entries = self.axis_dict(e, &owner, "`{axis = width}`");
                    if let AttrValue::Dict(all, span) = &e.value {
                        if all.is_empty() {
                            self.error(Diagnostic::error("`vector` names no axis").at(*span, "empty").with_help("write `vector = {j = 8}`"));
                        } else if all.len() > 1 {
                            self.error(
                                Diagnostic::error("`vector` takes one axis")
                                    .at(all[1].key.span, "a second axis")
                                    .with_note("one loop runs on vector lanes: the innermost loop of this axis"),
                            );
                        }
                    }
                    if let Some((axis, v)) = entries.first()
                        && let Some(w) = self.attr_int(key, "`{axis = width}`", v)
                    {
                        sched.vector = Some((axis.text.clone(), w));
                    }
                }
                "intrinsic" => sched.intrinsic = self.intrinsic_choice(e, &owner, reads),
                _ => unreachable!("checked against SCHEDULE_KEYS"),
            }
        }
        // Canonical order: axes in declaration order, reads by position.
        if let ScheduleOwner::Compute(axes) = owner {
            let pos = |name: &str| axes.iter().position(|a| a.name == name);
            sched.tiles.sort_by_key(|(a, _)| pos(a));
            sched.vthreads.sort_by_key(|(a, _)| pos(a));
        }
        sched.cache.sort_by_key(|c| c.read);
        sched
    }

    /// `intrinsic = {name = "...", a = read, m = [axis, ...], n = [...],
    /// k = [...]}`; `None` when an entry is wrong or `name` or `a` is
    /// missing (each reported). Whether the choice is one of the mapping
    /// candidates is the verifier's (`target::check`).
    fn intrinsic_choice(&mut self, e: &AttrEntry, owner: &ScheduleOwner<'_>, reads: &[String]) -> Option<IntrinsicChoice> {
        let shape = "`{name = \"intrinsic\", a = read, m = [axis, ...], n = [...], k = [...]}`";
        let AttrValue::Dict(entries, dict_span) = &e.value else {
            self.shape_error("intrinsic", shape, &e.value, "expected a dictionary");
            return None;
        };
        let mut ok = true;
        let (mut name, mut a): (Option<String>, Option<(usize, String)>) = (None, None);
        let mut axes: [Vec<String>; 3] = Default::default();
        let mut seen_keys: Vec<&Word> = Vec::new();
        // Keys an unknown key may be a misspelling of: not reported missing.
        let mut suggested: Vec<&str> = Vec::new();
        // Every axis listed so far, on any intrinsic axis.
        let mut listed: Vec<&Word> = Vec::new();
        for x in entries {
            let key = x.key.text.as_str();
            if !INTRINSIC_KEYS.contains(&key) {
                let mut d = Diagnostic::error(format!("unknown key `{key}` in `intrinsic`")).at(x.key.span, "not a key of `intrinsic`");
                if let Some(best) = crate::diag::closest(key, INTRINSIC_KEYS.into_iter()) {
                    d = d.with_help(format!("did you mean `{best}`?"));
                    suggested.push(best);
                }
                self.error(d.with_note("`intrinsic` takes name, a, m, n and k"));
                ok = false;
                continue;
            }
            if let Some(first) = seen_keys.iter().find(|w| w.text == key) {
                self.error(Diagnostic::error(format!("`{key}` is given twice in `intrinsic`")).at(x.key.span, "given again").with_secondary(first.span, "first given here"));
                ok = false;
                continue;
            }
            seen_keys.push(&x.key);
            match key {
                "name" => match &x.value {
                    AttrValue::Str(w) => name = self.unescape(w),
                    other => {
                        self.shape_error("intrinsic", "a string for `name`", other, "expected the intrinsic's name in quotes");
                        ok = false;
                    }
                },
                "a" => {
                    let AttrValue::Ident(read) = &x.value else {
                        self.shape_error("intrinsic", "a read name for `a`", &x.value, "expected the read that plays the intrinsic's `a`");
                        ok = false;
                        continue;
                    };
                    match reads.iter().position(|r| *r == read.text) {
                        Some(pos) => a = Some((pos, read.text.clone())),
                        None => {
                            self.unknown_read(read, "intrinsic", owner, reads);
                            ok = false;
                        }
                    }
                }
                _ => {
                    let slot = INTRINSIC_KEYS.iter().position(|k| *k == key).expect("a known key") - 2;
                    let AttrValue::List(items, _) = &x.value else {
                        self.shape_error("intrinsic", &format!("a list of axes for `{key}`"), &x.value, "expected a list of axes");
                        ok = false;
                        continue;
                    };
                    for item in items {
                        let AttrValue::Ident(axis) = item else {
                            self.shape_error("intrinsic", &format!("a list of axes for `{key}`"), item, "expected an axis name");
                            ok = false;
                            continue;
                        };
                        if let Some(first) = listed.iter().find(|w| w.text == axis.text) {
                            self.error(
                                Diagnostic::error(format!("axis `{}` is listed twice in `intrinsic`", axis.text))
                                    .at(axis.span, "listed again")
                                    .with_secondary(first.span, "first listed here")
                                    .with_note("each op axis goes onto at most one intrinsic axis"),
                            );
                            ok = false;
                            continue;
                        }
                        if let ScheduleOwner::Compute(decls) = owner
                            && !decls.iter().any(|d| d.name == axis.text)
                        {
                            let names: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
                            self.error(
                                Diagnostic::error(format!("unknown axis `{}` in `intrinsic`", axis.text))
                                    .at(axis.span, "not an axis of this compute op")
                                    .with_note(format!("the axes are: {}", names.join(", "))),
                            );
                            ok = false;
                            continue;
                        }
                        listed.push(axis);
                        axes[slot].push(axis.text.clone());
                    }
                }
            }
        }
        let example = "write e.g. `intrinsic = {name = \"vpdpbusd.zmm\", a = b, m = [j], k = [k]}`";
        let missing = |key: &str| !seen_keys.iter().any(|w| w.text == key) && !suggested.contains(&key);
        if name.is_none() && missing("name") {
            self.error(Diagnostic::error("`intrinsic` has no `name`").at(*dict_span, "no `name`").with_help(example));
            ok = false;
        }
        if a.is_none() && missing("a") {
            self.error(
                Diagnostic::error("`intrinsic` has no `a`")
                    .at(*dict_span, "no `a`")
                    .with_note("`a` names the read that plays the intrinsic's `a` operand; the other factor plays `b`")
                    .with_help(example),
            );
            ok = false;
        }
        let (Some(name), Some((a, a_name)), true) = (name, a, ok) else { return None };
        let [m, n, k] = axes;
        Some(IntrinsicChoice { name, a, a_name, m, n, k })
    }

    /// Reports `read`, named in schedule key `key`, as no read of `owner`.
    fn unknown_read(&mut self, read: &Word, key: &str, owner: &ScheduleOwner<'_>, reads: &[String]) {
        let what = match owner {
            ScheduleOwner::Compute(_) => "the reads of this compute op are",
            ScheduleOwner::Kernel => "the loads of this kernel are tagged",
        };
        let d = Diagnostic::error(format!("unknown read `{}` in `{key}`", read.text)).at(read.span, "not a read");
        self.error(if reads.is_empty() {
            d.with_note(match owner {
                ScheduleOwner::Compute(_) => "this compute op has no reads",
                ScheduleOwner::Kernel => "no load in this kernel has a `read(...)` tag",
            })
        } else {
            d.with_note(format!("{what}: {}", reads.join(", ")))
        });
    }

    /// The `axis = value` entries of a schedule entry whose value must be a
    /// dictionary keyed by axes; entries naming unknown axes are reported
    /// and left out.
    fn axis_dict<'e>(&mut self, e: &'e AttrEntry, owner: &ScheduleOwner<'_>, shape: &str) -> Vec<(&'e Word, &'e AttrValue)> {
        let AttrValue::Dict(entries, _) = &e.value else {
            self.shape_error(&e.key.text, shape, &e.value, "expected a dictionary");
            return Vec::new();
        };
        let mut out = Vec::new();
        for x in entries {
            let known = match owner {
                ScheduleOwner::Compute(axes) => {
                    let found = axes.iter().any(|a| a.name == x.key.text);
                    if !found {
                        let names: Vec<&str> = axes.iter().map(|a| a.name.as_str()).collect();
                        self.error(
                            Diagnostic::error(format!("unknown axis `{}` in `{}`", x.key.text, e.key.text))
                                .at(x.key.span, "not an axis of this compute op")
                                .with_note(format!("the axes are: {}", names.join(", "))),
                        );
                    }
                    found
                }
                ScheduleOwner::Kernel => {
                    let dotted = x.key.text.contains('.');
                    if dotted {
                        self.error(
                            Diagnostic::error(format!("axis name `{}` contains a dot", x.key.text))
                                .at(x.key.span, "not an axis name")
                                .with_note("dots separate an axis from a tile level in loop tags such as `axis(i.block)`, so axis names have none"),
                        );
                    }
                    !dotted
                }
            };
            if known {
                out.push((&x.key, &x.value));
            }
        }
        out
    }

    fn attr_int(&mut self, key: &str, shape: &str, v: &AttrValue) -> Option<u64> {
        match v {
            AttrValue::Int(w) => {
                let n = w.text.parse::<u64>().ok();
                if n.is_none() {
                    self.error(Diagnostic::error(format!("`{}` is too large", w.text)).at(w.span, "too large"));
                }
                n
            }
            other => {
                self.shape_error(key, shape, other, "expected an integer");
                None
            }
        }
    }

    fn shape_error(&mut self, key: &str, shape: &str, found: &AttrValue, label: &str) {
        self.error(Diagnostic::error(format!("`{key}` expects {shape}, found {}", found.describe())).at(found.span(), label.to_string()));
    }
}

/// What a schedule belongs to: a compute op (whose axes it names) or a
/// kernel (whose axes are gone; only their names remain).
enum ScheduleOwner<'a> {
    Compute(&'a [AxisDecl]),
    Kernel,
}

fn placeholder_tensor() -> TensorType {
    TensorType::new(vec![1], ElemType::F32)
}

/// The name in an axis or value atom of an index expression.
fn atom_text(a: &IndexAst) -> &str {
    match a {
        IndexAst::Var(w) | IndexAst::Value(w) | IndexAst::Int(w) => &w.text,
        _ => "",
    }
}

/// Appends the index values that `exprs` use to `operands`, in definition
/// order (so that printed expressions come out in the same normal form
/// whatever order they were written in), and rewrites the expressions over
/// their operand positions.
fn index_operands(operands: &mut Vec<Value>, exprs: &[AffineExpr<Value>]) -> Vec<AffineExpr<Dim>> {
    let mut used: Vec<Value> = exprs.iter().flat_map(|e| e.vars()).collect();
    used.sort();
    used.dedup();
    let base = operands.len();
    operands.extend(&used);
    let position = |v: Value| Dim::new(base + used.binary_search(&v).expect("collected above"));
    exprs.iter().map(|e| e.map_vars(position)).collect()
}

/// The element types' names as a list ending with `conjunction`:
/// "f32, f16, bf16, i8, u8 and i32".
fn elem_type_names(conjunction: &str) -> String {
    let names: Vec<&str> = ElemType::ALL.iter().map(|e| e.name()).collect();
    let (last, rest) = names.split_last().expect("there are element types");
    format!("{} {conjunction} {last}", rest.join(", "))
}

/// The most parts an intrinsic axis may be fused from (an op has at most
/// a handful of axes; the printer numbers parts below 64).
const MAX_INTRINSIC_PARTS: usize = 8;
