//! Syntax tree → IR: resolves value, axis and type names, parses numbers,
//! normalises index expressions to affine form, and reports every error it
//! finds (not just the first). Semantic checks that do not need the source
//! text (types of operands, bounds, shapes) are the verifier's.

use super::ast::*;
use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::ir::ops::{OpDecl, OpPlace, op_decl, round_to};
use crate::ir::*;
use crate::ir::types::MAX_TENSOR_BYTES;
use std::collections::HashMap;

pub fn resolve(ast: &ModuleAst) -> Result<Module, Diagnostics> {
    let mut r = Resolver { diags: Diagnostics::new() };
    let funcs = ast.funcs.iter().map(|f| r.func(f)).collect();
    if r.diags.has_errors() { Err(r.diags) } else { Ok(Module { funcs }) }
}

struct Resolver {
    diags: Diagnostics,
}

/// Names visible in a region: the function body, or one compute op (whose
/// regions are isolated from the function's values).
/// A name bound to `None` was defined by a statement that had errors: its
/// uses resolve silently to nothing, so one mistake is reported once.
#[derive(Default)]
struct Scope {
    values: HashMap<String, (Option<Value>, Span)>,
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
        for stmt in &f.body {
            match stmt {
                StmtAst::Compute(c) => self.compute(&mut func, &mut scope, c),
                other => self.stmt(&mut func, &mut scope, &place, other),
            }
        }
        func
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
        scope.values.insert(name.text.clone(), (v, name.span));
        true
    }

    /// Looks `name` up in `scope`. `outer` (the function scope, or for an
    /// epilogue the body's scope) is only consulted to explain the error.
    fn lookup(&mut self, scope: &Scope, outer: Option<&Scope>, in_epilogue: bool, name: &Word) -> Option<Value> {
        if let Some(&(v, _)) = scope.values.get(&name.text) {
            return v;
        }
        let mut d = Diagnostic::error(format!("use of undefined value `%{}`", name.text)).at(name.span, "not defined");
        if let Some(&(_, at)) = outer.and_then(|o| o.values.get(&name.text)) {
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
                    .with_help("element types are f32, f16, bf16, i8 and i32"),
            );
        }
        t
    }

    /// Resolves a type; errors leave `None`.
    fn ty(&mut self, t: &TypeAst) -> Option<Type> {
        match t {
            TypeAst::Scalar(w) => self.elem_type(w).map(Type::Scalar),
            TypeAst::Tensor { shape, .. } => {
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
                    self.error(
                        Diagnostic::error(format!("tensor type `{tt}` is larger than {} bytes", MAX_TENSOR_BYTES))
                            .at(t.span(), "too large")
                            .with_note("tilec limits tensors to 2^48 bytes so that sizes and offsets fit in 64 bits"),
                    );
                    return None;
                }
                Some(Type::Tensor(tt))
            }
        }
    }

    fn tensor_type(&mut self, t: &TypeAst, what: &str) -> TensorType {
        match self.ty(t) {
            Some(Type::Tensor(tt)) => tt,
            Some(other) => {
                self.error(
                    Diagnostic::error(format!("{what} must be a tensor, found `{other}`"))
                        .at(t.span(), "expected a tensor type")
                        .with_help(format!("write `tensor<{other}>` for a rank-0 tensor")),
                );
                placeholder_tensor()
            }
            None => placeholder_tensor(),
        }
    }

    fn scalar_type(&mut self, t: &TypeAst) -> Option<ElemType> {
        match self.ty(t)? {
            Type::Scalar(e) => Some(e),
            other => {
                self.error(Diagnostic::error(format!("expected a scalar type, found `{other}`")).at(t.span(), "expected f32, f16, bf16, i8 or i32"));
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
            StmtAst::Compute(c) => {
                self.error(
                    Diagnostic::error("`compute` cannot be nested inside a compute region")
                        .at(c.keyword, "nested compute")
                        .with_help("define the inner computation as its own compute op in the function body"),
                );
                (Some(&c.result), None)
            }
            StmtAst::Const { result, value, ty, span } => (Some(result), self.const_op(func, place, value, ty, *span)),
            StmtAst::Index { result, axis, ty, span } => (Some(result), self.index_op(func, place, axis, ty, *span)),
            StmtAst::Op { result, mnemonic, args, sig, span } => {
                (result.as_ref(), self.generic_op(func, scope, place, result.as_ref(), mnemonic, args, sig.as_ref(), *span))
            }
        };
        match (name, value) {
            (Some(name), Some(v)) => self.define(func, scope, name, v),
            (Some(name), None) if !scope.values.contains_key(&name.text) => {
                scope.values.insert(name.text.clone(), (None, name.span));
            }
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

    fn index_op(&mut self, func: &mut Function, place: &Place<'_>, axis: &Word, ty: &TypeAst, span: Span) -> Option<Value> {
        if !self.check_place("index", place, span) {
            return None;
        }
        let t = self.scalar_type(ty);
        let id = place.compute.and_then(|c| self.axis(c, place.epilogue, axis));
        let op = func.append_op(place.region, OpKind::AxisIndex(id?), vec![], vec![Type::Scalar(t?)], span);
        Some(func.result(op))
    }

    fn check_place(&mut self, mnemonic: &str, place: &Place<'_>, span: Span) -> bool {
        let Some(decl) = op_decl(mnemonic) else { return false };
        if decl.place.allows(place.kind) {
            return true;
        }
        let d = match place.kind {
            OpPlace::Function => Diagnostic::error(format!("`{mnemonic}` is a scalar op and cannot appear in a function body"))
                .at(span, "outside any compute region")
                .with_help("scalar ops go in the body or epilogue of a `compute` op"),
            OpPlace::ComputeRegion | OpPlace::Loops | OpPlace::Scalar => {
                let hint = if mnemonic == "return" { "end a compute region with `yield %v : type`" } else { "only scalar ops and `yield` go in a compute region" };
                Diagnostic::error(format!("`{mnemonic}` cannot appear in a compute region")).at(span, "inside a compute region").with_help(hint)
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
        let has_result = !kind.is_terminator();
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
            (OpKind::Return, None) => None,
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
                if let Some(&v) = operands.first() {
                    let actual = func.value_type(v).clone();
                    if actual != Type::Scalar(from_t) {
                        self.error(
                            Diagnostic::error(format!("cast from `{from_t}` but `%{}` has type `{actual}`", args[0].text))
                                .at(args[0].span, format!("has type {actual}")),
                        );
                        return None;
                    }
                }
                Some(Type::Scalar(to_t))
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
                self.error(
                    Diagnostic::error(format!("`{m}` needs its type"))
                        .at(span, "missing `: type`")
                        .with_help(format!("write `... : f32` after the operands, e.g. `%r = {m} ... : f32`")),
                );
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
        let overflow = |r: &mut Resolver, span: Span| {
            r.error(Diagnostic::error("index expression overflows 64-bit arithmetic").at(span, "too large"));
        };
        match e {
            IndexAst::Div(num, d, span) => {
                let num = self.affine(c, epilogue, num)?;
                let Ok(div) = d.text.parse::<i64>() else {
                    overflow(self, d.span);
                    return None;
                };
                if div == 0 {
                    self.error(Diagnostic::error("division by zero in an index expression").at(d.span, "divisor is 0"));
                    return None;
                }
                let _ = span;
                Some(num.with_divisor(div))
            }
            other => self.affine(c, epilogue, other),
        }
    }

    fn affine(&mut self, c: &Compute, epilogue: bool, e: &IndexAst) -> Option<AffineExpr<AxisId>> {
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
            IndexAst::Var(w) => self.axis(c, epilogue, w).map(AffineExpr::var),
            IndexAst::Neg { inner, odd, span } => {
                let a = self.affine(c, epilogue, inner)?;
                if !odd {
                    return Some(a);
                }
                a.checked_scale(-1).map_err(|_| overflow(self, *span)).ok()
            }
            IndexAst::Sum { first, rest, span } => {
                let mut acc = self.affine(c, epilogue, first);
                for (minus, t) in rest {
                    let t = self.affine(c, epilogue, t);
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
                let parts: Vec<Option<AffineExpr<AxisId>>> = factors.iter().map(|f| self.affine(c, epilogue, f)).collect();
                let parts: Vec<AffineExpr<AxisId>> = parts.into_iter().collect::<Option<_>>()?;
                let mut acc = AffineExpr::constant(1);
                for (p, f) in parts.into_iter().zip(factors) {
                    let product = match (acc.as_constant(), p.as_constant()) {
                        (Some(k), _) => p.checked_scale(k),
                        (_, Some(k)) => acc.checked_scale(k),
                        _ => {
                            self.error(
                                Diagnostic::error("index expressions must be affine: this multiplies two axis expressions")
                                    .at(f.span(), "not a constant")
                                    .with_help("multiply axes only by integer constants, e.g. `h * 2 + r`"),
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
        let tt = match func.value_type(tensor) {
            Type::Tensor(t) => t.clone(),
            other => {
                self.error(Diagnostic::error(format!("`%{}` has type `{other}`; only tensors can be read", r.tensor.text)).at(r.tensor.span, "not a tensor"));
                return None;
            }
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
}

fn placeholder_tensor() -> TensorType {
    TensorType::new(vec![1], ElemType::F32)
}


