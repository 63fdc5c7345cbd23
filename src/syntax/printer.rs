//! IR → tile syntax. The output parses back to the same IR, and printing
//! that again gives the same bytes: names are the source's hints where they
//! are free in their scope, `%0`, `%1`, ... otherwise, assigned in
//! definition order, so numbering is deterministic.
//!
//! Scopes follow the resolver's: the function body and its loop regions
//! share one numbering, a loop region's names are free again after it (so
//! sibling loops keep their `%i`), and each compute op numbers its own.

use crate::ir::schedule::{escape_string, write_schedule_body};
use crate::ir::*;
use std::collections::HashSet;
use std::fmt::Write;

pub fn print_module(m: &Module) -> String {
    let mut out = String::new();
    for (i, f) in m.funcs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&print_function(f));
    }
    out
}

/// Value names of one scope (a function body with its loops, or one
/// compute op).
struct Names {
    used: HashSet<String>,
    /// Names taken, in order, so that a region's can be released.
    order: Vec<String>,
    next_number: usize,
}

impl Names {
    fn new() -> Self {
        Names { used: HashSet::new(), order: Vec::new(), next_number: 0 }
    }

    /// Where the names of a region about to be printed start.
    fn mark(&self) -> usize {
        self.order.len()
    }

    /// Frees the names taken since `mark` (a loop region has ended). Numbers
    /// are not reused: numbering continues through the function.
    fn release(&mut self, mark: usize) {
        for name in self.order.drain(mark..) {
            self.used.remove(&name);
        }
    }

    fn assign(&mut self, hint: Option<&str>) -> String {
        match hint {
            Some(h) => {
                let mut name = h.to_string();
                let mut k = 1;
                while self.used.contains(&name) {
                    name = format!("{h}_{k}");
                    k += 1;
                }
                self.used.insert(name.clone());
                self.order.push(name.clone());
                name
            }
            None => {
                let n = self.next_number.to_string();
                self.next_number += 1;
                n
            }
        }
    }
}

struct Printer<'f> {
    f: &'f Function,
    out: String,
    /// Printed name of each value (without `%`), filled at definition.
    names: Vec<Option<String>>,
    /// When each value was defined in the printed text: index expressions
    /// print their terms in this order, outer loops first.
    defined_at: Vec<usize>,
    defined: usize,
}

pub fn print_function(f: &Function) -> String {
    let mut p = Printer { f, out: String::new(), names: vec![None; f.values.len()], defined_at: vec![usize::MAX; f.values.len()], defined: 0 };
    p.function();
    p.out
}

impl Printer<'_> {
    fn define(&mut self, scope: &mut Names, v: Value) -> String {
        let name = scope.assign(self.f.values[v].name.as_deref());
        self.names[v.index()] = Some(name.clone());
        self.defined_at[v.index()] = self.defined;
        self.defined += 1;
        format!("%{name}")
    }

    fn name(&self, v: Value) -> String {
        match &self.names[v.index()] {
            Some(n) => format!("%{n}"),
            // A use of a value that was never defined in a visible scope:
            // only possible in IR that fails verification. Print something
            // recognisable rather than panic.
            None => format!("%<undefined {v}>"),
        }
    }

    fn function(&mut self) {
        let f = self.f;
        let mut scope = Names::new();
        let params: Vec<String> = f.params.iter().map(|&v| format!("{}: {}", self.define(&mut scope, v), f.value_type(v))).collect();
        write!(self.out, "func @{}({})", f.name, params.join(", ")).unwrap();
        match f.result_types.as_slice() {
            [] => {}
            [t] => write!(self.out, " -> {t}").unwrap(),
            ts => write!(self.out, " -> ({})", ts.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")).unwrap(),
        }
        self.out.push_str(" {\n");
        for &op in &f.regions[f.body].ops {
            self.op(&mut scope, op, 1);
        }
        self.out.push_str("}\n");
    }

    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
    }

    fn op(&mut self, scope: &mut Names, op: Op, depth: usize) {
        let f = self.f;
        let data = &f.ops[op];
        if let OpKind::Compute(c) = &data.kind {
            return self.compute(scope, op, c, depth);
        }
        self.indent(depth);
        let operands: Vec<String> = data.operands.iter().map(|&v| self.name(v)).collect();
        if let Some(&r) = data.results.first() {
            let name = self.define(scope, r);
            write!(self.out, "{name} = ").unwrap();
        }
        let result_ty = data.results.first().map(|&r| f.value_type(r).clone());
        match &data.kind {
            OpKind::Const(lit) => {
                let ty = result_ty.and_then(|t| t.as_scalar()).unwrap_or(ElemType::F32);
                write!(self.out, "const {} : {ty}", lit.to_string_as(ty)).unwrap();
            }
            OpKind::AxisIndex(axis) => {
                let axis_name = self.enclosing_compute(op).map(|c| c.axis(*axis).name.clone()).unwrap_or_else(|| format!("<axis {axis}>"));
                write!(self.out, "index {axis_name} : {}", result_ty.map(|t| t.to_string()).unwrap_or_default()).unwrap();
            }
            kind @ (OpKind::Cast | OpKind::Reshape) => {
                let from = data.operands.first().map(|&v| f.value_type(v).to_string()).unwrap_or_default();
                write!(self.out, "{} {} : {from} -> {}", kind.mnemonic(), operands.join(", "), result_ty.map(|t| t.to_string()).unwrap_or_default()).unwrap();
            }
            OpKind::Yield => {
                let ty = data.operands.first().map(|&v| f.value_type(v).to_string());
                write!(self.out, "yield {}", operands.join(", ")).unwrap();
                if let Some(ty) = ty {
                    write!(self.out, " : {ty}").unwrap();
                }
            }
            OpKind::Return => {
                self.out.push_str("return");
                if !operands.is_empty() {
                    write!(self.out, " {}", operands.join(", ")).unwrap();
                }
            }
            kind @ (OpKind::Unary(_) | OpKind::Binary(_)) => {
                write!(self.out, "{} {} : {}", kind.mnemonic(), operands.join(", "), result_ty.map(|t| t.to_string()).unwrap_or_default()).unwrap();
            }
            OpKind::Compute(_) => unreachable!("handled above"),
            OpKind::Weight(name) => write!(self.out, "weight \"{}\" : {}", escape_string(name), result_ty.map(|t| t.to_string()).unwrap_or_default()).unwrap(),
            OpKind::Alloc => write!(self.out, "alloc : {}", result_ty.map(|t| t.to_string()).unwrap_or_default()).unwrap(),
            OpKind::Barrier => self.out.push_str("barrier"),
            OpKind::Load(a) => {
                let src = operands.first().cloned().unwrap_or_default();
                write!(self.out, "load {src}[{}]", self.indices(op, &a.indices)).unwrap();
                if let Some(pad) = &a.pad {
                    write!(self.out, " pad({})", pad.to_string_as(self.elem_of(data.operands.first()))).unwrap();
                }
                if let Some(r) = &a.read {
                    write!(self.out, " read({})", name_text(r)).unwrap();
                }
                write!(self.out, " : {}", result_ty.map(|t| t.to_string()).unwrap_or_default()).unwrap();
            }
            OpKind::Store(a) => {
                let (v, dst) = (operands.first().cloned().unwrap_or_default(), operands.get(1).cloned().unwrap_or_default());
                write!(self.out, "store {v}, {dst}[{}]", self.indices(op, &a.indices)).unwrap();
            }
            OpKind::Copy(c) => {
                let (src, dst) = (operands.first().cloned().unwrap_or_default(), operands.get(1).cloned().unwrap_or_default());
                let sizes = c.sizes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
                write!(self.out, "copy {src}[{}] -> {dst}[{}] box [{sizes}]", self.indices(op, &c.src), self.indices(op, &c.dst)).unwrap();
                if !c.stride.is_empty() {
                    write!(self.out, " stride [{}]", c.stride.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")).unwrap();
                }
                if let Some(s) = c.split {
                    write!(self.out, " split [{}, {}]", s.dim, s.factor).unwrap();
                }
                if !c.permute.is_empty() {
                    write!(self.out, " permute [{}]", c.permute.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")).unwrap();
                }
                if let Some(pad) = &c.pad {
                    write!(self.out, " pad({})", pad.to_string_as(self.elem_of(data.operands.first()))).unwrap();
                }
                if c.cooperative {
                    self.out.push_str(" cooperative");
                }
            }
            OpKind::Intrinsic(x) => {
                // A fused axis prints its parts (`2 * 8`), a basic one its size.
                let sizes: Vec<String> = (0..3)
                    .map(|a| if x.parts[a].len() > 1 { x.parts[a].iter().map(ToString::to_string).collect::<Vec<_>>().join(" * ") } else { x.shape[a].to_string() })
                    .collect();
                write!(self.out, "intrinsic \"{}\" {} [{}] ", escape_string(&x.name), x.kind, sizes.join(", ")).unwrap();
                if let (Some(a), Some(b)) = (&x.a.read, &x.b.read) {
                    write!(self.out, "reads({}, {}) ", name_text(a), name_text(b)).unwrap();
                }
                if let Some([g, t]) = &x.lane {
                    write!(self.out, "lane({}, {}) ", self.index_text(op, g), self.index_text(op, t)).unwrap();
                }
                for (i, t) in x.tiles().into_iter().enumerate() {
                    let buf = operands.get(i).cloned().unwrap_or_default();
                    let indices = (0..t.indices.len()).map(|d| self.tile_index_text(op, t, d)).collect::<Vec<_>>().join(", ");
                    write!(self.out, "{}{buf}[{indices}]", ["", " += ", " * "][i]).unwrap();
                    if let Some(pad) = &t.pad {
                        write!(self.out, " pad({})", pad.to_string_as(self.elem_of(data.operands.get(i)))).unwrap();
                    }
                }
            }
            OpKind::Fill(lit) => {
                let buf = operands.first().cloned().unwrap_or_default();
                write!(self.out, "fill {buf}, {}", lit.to_string_as(self.elem_of(data.operands.first()))).unwrap();
            }
            OpKind::IndexValue(e) => {
                write!(self.out, "index {} : {}", self.index_text(op, e), result_ty.map(|t| t.to_string()).unwrap_or_default()).unwrap();
            }
            OpKind::For(l) => {
                let mark = scope.mark();
                let body = data.regions.first().copied();
                let var = body.and_then(|b| f.regions[b].args.first().copied()).map(|v| self.define(scope, v)).unwrap_or_default();
                write!(self.out, "for {var} = 0 to {}", l.extent).unwrap();
                if l.mapping != Mapping::Serial {
                    write!(self.out, " map({})", l.mapping).unwrap();
                }
                if let Some(tag) = &l.tag {
                    write!(self.out, " {tag}").unwrap();
                }
                self.loop_body(scope, body, depth, mark);
            }
            OpKind::If(g) => {
                let conds: Vec<String> = g.conds.iter().map(|(e, b)| format!("{} < {b}", self.index_text(op, e))).collect();
                write!(self.out, "if {}", conds.join(", ")).unwrap();
                let mark = scope.mark();
                self.loop_body(scope, data.regions.first().copied(), depth, mark);
            }
            OpKind::Kernel(k) => {
                self.out.push_str("kernel ");
                if let Some(label) = &k.label {
                    write!(self.out, "\"{}\" ", escape_string(label)).unwrap();
                }
                if k.prepack {
                    self.out.push_str("prepack ");
                }
                let read_name = |pos: usize| {
                    let cached = k.schedule.cache.iter().find(|c| c.read == pos).map(|c| c.read_name.clone());
                    let mapped = || k.schedule.intrinsic.as_ref().filter(|x| x.a == pos).map(|x| x.a_name.clone());
                    name_text(&cached.or_else(mapped).unwrap_or_default())
                };
                self.schedule(&k.schedule, depth, &read_name);
                let mark = scope.mark();
                self.loop_body(scope, data.regions.first().copied(), depth, mark);
            }
        }
        self.out.push('\n');
    }

    /// ` {`, the ops of a loop-level region one level deeper, and `}`; the
    /// region's names (taken since `mark`) are free again afterwards.
    fn loop_body(&mut self, scope: &mut Names, region: Option<Region>, depth: usize, mark: usize) {
        self.out.push_str(" {\n");
        if let Some(r) = region {
            for &o in &self.f.regions[r].ops {
                self.op(scope, o, depth + 1);
            }
        }
        scope.release(mark);
        self.indent(depth);
        self.out.push('}');
    }

    /// `schedule "target" {...}`, the dictionary's keys one per line, closed
    /// at `depth`.
    fn schedule(&mut self, s: &Schedule, depth: usize, read_name: &dyn Fn(usize) -> String) {
        write!(self.out, "schedule \"{}\" ", escape_string(&s.target)).unwrap();
        let indent = "  ".repeat(depth);
        write_schedule_body(s, &mut self.out, &indent, read_name).unwrap();
    }

    /// The element type of a tensor or buffer operand (what its literals
    /// are written in).
    fn elem_of(&self, v: Option<&Value>) -> ElemType {
        v.and_then(|&v| self.f.value_type(v).readable()).map_or(ElemType::F32, |t| t.elem)
    }

    fn indices(&self, op: Op, exprs: &[AffineExpr<Dim>]) -> String {
        exprs.iter().map(|e| self.index_text(op, e)).collect::<Vec<_>>().join(", ")
    }

    /// An index expression of a loop-level op, its variables named after
    /// the op's operands. Terms print in the order their values were
    /// defined (outer loops first), whatever the order of the operands, so
    /// that the text is in normal form.
    fn index_text(&self, op: Op, e: &AffineExpr<Dim>) -> String {
        let operands = &self.f.ops[op].operands;
        let name = |d: Dim| match operands.get(d.index()) {
            Some(&v) => self.name(v),
            None => format!("%<operand {}>", d.index()),
        };
        let order = |d: Dim| (operands.get(d.index()).map_or(usize::MAX, |v| self.defined_at[v.index()]), d);
        let reordered = AffineExpr::from_parts(e.terms().iter().map(|&(d, c)| (order(d), c)), e.constant_term(), 1).map(|x| x.with_divisor(e.divisor()));
        match reordered {
            Ok(x) => x.to_string_with(|(_, d)| name(d)),
            Err(_) => e.to_string_with(name),
        }
    }

    /// Dimension `d` of an `intrinsic` op's operand: its origin's index
    /// expression plus the intrinsic's axes `m`, `n`, `k` (or a fused
    /// axis' parts `m0`, `m1`, ...) times their steps, after the operands'
    /// terms.
    fn tile_index_text(&self, op: Op, t: &TileOperand, d: usize) -> String {
        let Some(e) = t.indices.get(d) else { return String::new() };
        let operands = &self.f.ops[op].operands;
        // (definition order, operand) for operands; (MAX, axis · 64 + part)
        // for the intrinsic's axes and their parts.
        let order = |x: Dim| operands.get(x.index()).map_or(usize::MAX - 1, |v| self.defined_at[v.index()]);
        let terms = e.terms().iter().map(|&(x, c)| ((order(x), x.index()), c));
        let locals = (0..3).flat_map(|axis| t.steps[axis].iter().enumerate().map(move |(part, s)| ((usize::MAX, axis * 64 + part), s.get(d).copied().unwrap_or(0))));
        let fused = |axis: usize| t.steps[axis].len() > 1;
        let name = |(o, i): (usize, usize)| {
            if o == usize::MAX {
                let (axis, part) = (i / 64, i % 64);
                let letter = ["m", "n", "k"][axis];
                if fused(axis) { format!("{letter}{part}") } else { letter.to_string() }
            } else {
                match operands.get(i) {
                    Some(&v) => self.name(v),
                    None => format!("%<operand {i}>"),
                }
            }
        };
        match AffineExpr::from_parts(terms.chain(locals), e.constant_term(), 1) {
            // A divided origin has no text with the axes added (the
            // verifier rejects it); print the parts.
            Ok(x) if e.divisor() == 1 => x.to_string_with(name),
            _ => format!(
                "{} + <steps {:?}>",
                self.index_text(op, e),
                t.steps.iter().map(|s| s.iter().map(|p| p.get(d).copied().unwrap_or(0)).collect::<Vec<_>>()).collect::<Vec<_>>()
            ),
        }
    }

    fn enclosing_compute(&self, op: Op) -> Option<&Compute> {
        let region = self.f.ops[op].parent;
        let owner = self.f.regions[region].owner?;
        self.f.ops[owner].kind.as_compute()
    }

    fn compute(&mut self, scope: &mut Names, op: Op, c: &Compute, depth: usize) {
        let f = self.f;
        let data = &f.ops[op];
        let axis_name = |a: AxisId| c.axis(a).name.clone();
        let index_list = |indices: &[AffineExpr<AxisId>]| indices.iter().map(|e| e.to_string_with(axis_name)).collect::<Vec<_>>().join(", ");
        // Operand names belong to the function scope; print them first.
        let operand_names: Vec<String> = data.operands.iter().map(|&v| self.name(v)).collect();
        let result = self.define(scope, data.results[0]);
        self.indent(depth);
        write!(self.out, "{result} = compute ").unwrap();
        if let Some(label) = &c.label {
            write!(self.out, "\"{}\" ", escape_string(label)).unwrap();
        }
        let axes_text = |kind: AxisKind| {
            c.axes.iter().filter(|a| a.kind == kind).map(|a| format!("{}: {}", a.name, a.extent)).collect::<Vec<_>>().join(", ")
        };
        write!(self.out, "({})", axes_text(AxisKind::Spatial)).unwrap();
        if let Some(comb) = c.combiner {
            write!(self.out, " reduce {} ({})", comb.name(), axes_text(AxisKind::Reduction)).unwrap();
        }
        // The compute op's regions form one isolated scope.
        let mut inner = Names::new();
        let body = data.regions.first().copied();
        let read_text = |p: &mut Printer<'_>, inner: &mut Names, reads: &[Read], args: &[Value], names: &[String]| {
            let mut parts = Vec::new();
            for ((r, &arg), tensor) in reads.iter().zip(args).zip(names) {
                let bind = p.define(inner, arg);
                let mut s = format!("{bind} = {tensor}[{}]", index_list(&r.indices));
                if let Some(pad) = &r.pad {
                    let ty = f.value_type(arg).as_scalar().unwrap_or(ElemType::F32);
                    write!(s, " pad({})", pad.to_string_as(ty)).unwrap();
                }
                parts.push(s);
            }
            format!("reads({})", parts.join(", "))
        };
        if !c.reads.is_empty() {
            let args = body.map(|b| f.regions[b].args.clone()).unwrap_or_default();
            let text = read_text(self, &mut inner, &c.reads, &args, &operand_names[..c.reads.len().min(operand_names.len())]);
            self.out.push('\n');
            self.indent(depth + 2);
            self.out.push_str(&text);
            self.out.push(' ');
        } else {
            self.out.push(' ');
        }
        let out_ty = f.value_type(data.results[0]);
        write!(self.out, "-> {out_ty}[{}]", index_list(&c.output)).unwrap();
        // The regions print first, into a buffer of their own: a schedule
        // names epilogue reads, whose printed names are assigned there.
        let head = std::mem::take(&mut self.out);
        self.out.push_str("{\n");
        if let Some(body) = body {
            for &o in &f.regions[body].ops {
                self.op(&mut inner, o, depth + 1);
            }
        }
        self.indent(depth);
        self.out.push('}');
        if let Some(&epi) = data.regions.get(1) {
            let args = f.regions[epi].args.clone();
            let acc = args.first().map(|&a| self.define(&mut inner, a)).unwrap_or_default();
            write!(self.out, " epilogue({acc}) ").unwrap();
            if !c.epilogue_reads.is_empty() {
                let names = operand_names.get(c.reads.len()..).unwrap_or(&[]).to_vec();
                let text = read_text(self, &mut inner, &c.epilogue_reads, args.get(1..).unwrap_or(&[]), &names);
                write!(self.out, "{text} ").unwrap();
            }
            self.out.push_str("{\n");
            for &o in &f.regions[epi].ops {
                self.op(&mut inner, o, depth + 1);
            }
            self.indent(depth);
            self.out.push('}');
        }
        let regions = std::mem::replace(&mut self.out, head);
        if let Some(s) = &c.schedule {
            let arg_name = |region: usize, arg: usize| {
                let v = data.regions.get(region).and_then(|&r| f.regions[r].args.get(arg).copied());
                v.and_then(|v| self.names[v.index()].clone())
            };
            // Body reads are the body's arguments; epilogue reads follow the
            // accumulator in the epilogue's.
            let names: Vec<Option<String>> =
                (0..c.reads.len()).map(|i| arg_name(0, i)).chain((0..c.epilogue_reads.len()).map(|i| arg_name(1, i + 1))).collect();
            let read_name = |pos: usize| {
                let name = names.get(pos).cloned().flatten();
                let cached = || s.cache.iter().find(|d| d.read == pos).map(|d| d.read_name.clone());
                let mapped = || s.intrinsic.as_ref().filter(|x| x.a == pos).map(|x| x.a_name.clone());
                name_text(&name.or_else(cached).or_else(mapped).unwrap_or_default())
            };
            self.out.push('\n');
            self.indent(depth + 2);
            self.schedule(s, depth + 2, &read_name);
        }
        self.out.push(' ');
        self.out.push_str(&regions);
        self.out.push('\n');
    }
}

/// A read name as a schedule key or `read(...)` argument: bare when it is
/// an identifier, quoted otherwise (value names such as `%1st` or `%out$1`
/// are not identifiers).
fn name_text(name: &str) -> String {
    let mut chars = name.chars();
    let ident = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.split('.').all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    if ident { name.to_string() } else { format!("\"{}\"", escape_string(name)) }
}

