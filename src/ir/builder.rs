//! Building loop-level IR: passes create loops, buffers and accesses
//! through these helpers, which keep the op invariants (index variables
//! among the operands, region arguments typed, spans set).
//!
//! Index expressions are given over `Value`s (`AffineExpr<Value>`); the
//! helpers turn them into expressions over operand positions, appending
//! each distinct index value to the op's operands.

use super::loops::{Access, CopyOp, Dim, ForLoop, Guard, Kernel, LoopTag, Mapping};
use super::*;
use crate::diag::Span;

/// Where a new op goes: a region, and a position in its op list (`None`:
/// at the end).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub region: Region,
    pub pos: Option<usize>,
}

impl Cursor {
    pub fn end(region: Region) -> Cursor {
        Cursor { region, pos: None }
    }

    pub fn at(region: Region, pos: usize) -> Cursor {
        Cursor { region, pos: Some(pos) }
    }
}

/// Operands and operand-relative expressions for index expressions over
/// values: `fixed` operands come first, then each distinct index value in
/// order of first appearance.
pub fn pack_indices(fixed: Vec<Value>, groups: &[&[AffineExpr<Value>]]) -> (Vec<Value>, Vec<Vec<AffineExpr<Dim>>>) {
    let mut operands = fixed;
    let base = operands.len();
    let mut packed = Vec::new();
    for exprs in groups {
        let mut out = Vec::new();
        for e in exprs.iter() {
            out.push(e.map_vars(|v| {
                let pos = match operands[base..].iter().position(|&o| o == v) {
                    Some(p) => base + p,
                    None => {
                        operands.push(v);
                        operands.len() - 1
                    }
                };
                Dim::new(pos)
            }));
        }
        packed.push(out);
    }
    (operands, packed)
}

impl Function {
    fn place(&mut self, at: Cursor, op: Op) {
        match at.pos {
            Some(p) => self.regions[at.region].ops.insert(p, op),
            None => self.regions[at.region].ops.push(op),
        }
    }

    fn new_op(&mut self, at: Cursor, kind: OpKind, operands: Vec<Value>, results: Vec<Type>, span: Span) -> Op {
        let op = self.create_op(at.region, kind, operands, results, span);
        self.place(at, op);
        op
    }

    /// Gives an op's single result a name hint (printed when free).
    pub fn name_result(&mut self, op: Op, hint: &str) -> Value {
        let v = self.result(op);
        self.values[v].name = Some(hint.to_string());
        v
    }

    pub fn build_alloc(&mut self, at: Cursor, ty: BufferType, hint: &str, span: Span) -> Value {
        let op = self.new_op(at, OpKind::Alloc, vec![], vec![Type::Buffer(ty)], span);
        self.name_result(op, hint)
    }

    /// A loop; returns the op, its body region and its induction variable.
    pub fn build_for(&mut self, at: Cursor, extent: u64, mapping: Mapping, tag: Option<LoopTag>, hint: &str, span: Span) -> (Op, Region, Value) {
        let op = self.new_op(at, OpKind::For(Box::new(ForLoop { extent, mapping, tag })), vec![], vec![], span);
        let body = self.new_region(Some(op));
        self.ops[op].regions.push(body);
        let iv = self.add_region_arg(body, Type::Index, Some(hint.to_string()));
        (op, body, iv)
    }

    /// `load src[indices]`; the result has the source's element type.
    #[allow(clippy::too_many_arguments)]
    pub fn build_load(&mut self, at: Cursor, src: Value, indices: &[AffineExpr<Value>], pad: Option<Literal>, read: Option<String>, hint: Option<&str>, span: Span) -> Value {
        let elem = self.value_type(src).readable().map_or(ElemType::F32, |t| t.elem);
        let (operands, mut exprs) = pack_indices(vec![src], &[indices]);
        let access = Access { indices: exprs.remove(0), pad, read };
        let op = self.new_op(at, OpKind::Load(Box::new(access)), operands, vec![Type::Scalar(elem)], span);
        match hint {
            Some(h) => self.name_result(op, h),
            None => self.result(op),
        }
    }

    pub fn build_store(&mut self, at: Cursor, value: Value, dst: Value, indices: &[AffineExpr<Value>], span: Span) -> Op {
        let (operands, mut exprs) = pack_indices(vec![value, dst], &[indices]);
        self.new_op(at, OpKind::Store(Box::new(Access { indices: exprs.remove(0), pad: None, read: None })), operands, vec![], span)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn build_copy(&mut self, at: Cursor, src: Value, src_idx: &[AffineExpr<Value>], dst: Value, dst_idx: &[AffineExpr<Value>], sizes: Vec<u64>, pad: Option<Literal>, cooperative: bool, span: Span) -> Op {
        let (operands, mut exprs) = pack_indices(vec![src, dst], &[src_idx, dst_idx]);
        let dst_e = exprs.remove(1);
        let src_e = exprs.remove(0);
        self.new_op(at, OpKind::Copy(Box::new(CopyOp { src: src_e, dst: dst_e, sizes, stride: Vec::new(), split: None, permute: Vec::new(), pad, cooperative })), operands, vec![], span)
    }

    pub fn build_fill(&mut self, at: Cursor, buf: Value, value: Literal, span: Span) -> Op {
        self.new_op(at, OpKind::Fill(value), vec![buf], vec![], span)
    }

    pub fn build_barrier(&mut self, at: Cursor, span: Span) -> Op {
        self.new_op(at, OpKind::Barrier, vec![], vec![], span)
    }

    /// `if e0 < b0, ... { }`; returns the op and its region.
    pub fn build_if(&mut self, at: Cursor, conds: &[(AffineExpr<Value>, i64)], span: Span) -> (Op, Region) {
        let op = self.new_op(at, OpKind::If(Box::new(Guard { conds: Vec::new() })), vec![], vec![], span);
        self.set_guard_conds(op, conds);
        let body = self.new_region(Some(op));
        self.ops[op].regions.push(body);
        (op, body)
    }

    pub fn build_kernel(&mut self, at: Cursor, kernel: Kernel, span: Span) -> (Op, Region) {
        let op = self.new_op(at, OpKind::Kernel(Box::new(kernel)), vec![], vec![], span);
        let body = self.new_region(Some(op));
        self.ops[op].regions.push(body);
        (op, body)
    }

    /// `index expr : ty` — an index expression as a scalar.
    pub fn build_index_value(&mut self, at: Cursor, expr: &AffineExpr<Value>, ty: ElemType, span: Span) -> Value {
        let (operands, mut packed) = pack_indices(vec![], &[std::slice::from_ref(expr)]);
        let op = self.new_op(at, OpKind::IndexValue(packed.remove(0).remove(0)), operands, vec![Type::Scalar(ty)], span);
        self.result(op)
    }

    /// Any op with the given operands and result types, at a cursor.
    pub fn build_op(&mut self, at: Cursor, kind: OpKind, operands: Vec<Value>, results: Vec<Type>, span: Span) -> Op {
        self.new_op(at, kind, operands, results, span)
    }

    /// The extent of the loop whose induction variable `v` is, if it is one.
    pub fn loop_extent(&self, v: Value) -> Option<u64> {
        let ValueDef::RegionArg(r, 0) = self.values[v].def else { return None };
        match &self.ops[self.regions[r].owner?].kind {
            OpKind::For(l) => Some(l.extent),
            _ => None,
        }
    }

    /// An operand-relative expression of `op` in terms of values.
    pub fn expr_in_values(&self, op: Op, e: &AffineExpr<Dim>) -> AffineExpr<Value> {
        let operands = &self.ops[op].operands;
        e.map_vars(|d| operands[d.index()])
    }

    /// The index expressions of a load or store, in terms of values.
    pub fn access_indices(&self, op: Op) -> Vec<AffineExpr<Value>> {
        match &self.ops[op].kind {
            OpKind::Load(a) | OpKind::Store(a) => a.indices.iter().map(|e| self.expr_in_values(op, e)).collect(),
            _ => Vec::new(),
        }
    }

    /// Replaces the index expressions of a load or store (rebuilding its
    /// index operands).
    pub fn set_access_indices(&mut self, op: Op, indices: &[AffineExpr<Value>]) {
        let fixed_len = match self.ops[op].kind {
            OpKind::Load(_) => 1,
            OpKind::Store(_) => 2,
            _ => return,
        };
        let fixed = self.ops[op].operands[..fixed_len].to_vec();
        let (operands, mut packed) = pack_indices(fixed, &[indices]);
        self.ops[op].operands = operands;
        if let OpKind::Load(a) | OpKind::Store(a) = &mut self.ops[op].kind {
            a.indices = packed.remove(0);
        }
    }

    /// A copy's source and destination index expressions, in terms of
    /// values.
    pub fn copy_indices(&self, op: Op) -> (Vec<AffineExpr<Value>>, Vec<AffineExpr<Value>>) {
        match &self.ops[op].kind {
            OpKind::Copy(c) => (c.src.iter().map(|e| self.expr_in_values(op, e)).collect(), c.dst.iter().map(|e| self.expr_in_values(op, e)).collect()),
            _ => (Vec::new(), Vec::new()),
        }
    }

    /// Replaces a copy's index expressions (rebuilding its index operands;
    /// its source and destination, operands 0 and 1, stay).
    pub fn set_copy_indices(&mut self, op: Op, src: &[AffineExpr<Value>], dst: &[AffineExpr<Value>]) {
        let fixed = self.ops[op].operands[..2].to_vec();
        let (operands, mut packed) = pack_indices(fixed, &[src, dst]);
        self.ops[op].operands = operands;
        if let OpKind::Copy(c) = &mut self.ops[op].kind {
            c.dst = packed.remove(1);
            c.src = packed.remove(0);
        }
    }

    /// An intrinsic's operand origins (`acc`, `a`, `b`) and its lane
    /// expressions (none unless a warp's), in terms of values.
    pub fn intrinsic_indices(&self, op: Op) -> ([Vec<AffineExpr<Value>>; 3], Vec<AffineExpr<Value>>) {
        match &self.ops[op].kind {
            OpKind::Intrinsic(x) => (x.tiles().map(|t| t.indices.iter().map(|e| self.expr_in_values(op, e)).collect()), x.lane.iter().flatten().map(|e| self.expr_in_values(op, e)).collect()),
            _ => Default::default(),
        }
    }

    /// Replaces an intrinsic's origins and lane expressions (rebuilding its
    /// index operands; its three tiles' buffers, operands 0 to 2, stay).
    /// The steps of `m`, `n`, `k` do not change.
    pub fn set_intrinsic_indices(&mut self, op: Op, origins: &[Vec<AffineExpr<Value>>; 3], lane: &[AffineExpr<Value>]) {
        let fixed = self.ops[op].operands[..3].to_vec();
        let (operands, mut packed) = pack_indices(fixed, &[&origins[0], &origins[1], &origins[2], lane]);
        self.ops[op].operands = operands;
        if let OpKind::Intrinsic(x) = &mut self.ops[op].kind {
            let lane = packed.pop().expect("4 groups");
            if let Some(l) = &mut x.lane {
                *l = [lane[0].clone(), lane[1].clone()];
            }
            for (t, indices) in x.tiles_mut().into_iter().zip(packed) {
                t.indices = indices;
            }
        }
    }

    /// A copy of `op` and everything inside it, placed at `at`. Operands
    /// defined outside `op` are shared; values defined inside (results,
    /// region arguments) are new, and `map` records old → new (values
    /// already in `map` are replaced too).
    pub fn clone_op(&mut self, at: Cursor, op: Op, map: &mut std::collections::HashMap<Value, Value>) -> Op {
        let data = self.ops[op].clone();
        let operands = data.operands.iter().map(|v| *map.get(v).unwrap_or(v)).collect();
        let types = data.results.iter().map(|&r| self.values[r].ty.clone()).collect();
        let span = self.op_spans[op];
        let new = self.new_op(at, data.kind, operands, types, span);
        for (i, &old) in data.results.iter().enumerate() {
            let v = self.ops[new].results[i];
            self.values[v].name = self.values[old].name.clone();
            map.insert(old, v);
        }
        for r in data.regions {
            let copy = self.new_region(Some(new));
            self.ops[new].regions.push(copy);
            for a in self.regions[r].args.clone() {
                let arg = self.add_region_arg(copy, self.values[a].ty.clone(), self.values[a].name.clone());
                map.insert(a, arg);
            }
            for o in self.regions[r].ops.clone() {
                self.clone_op(Cursor::end(copy), o, map);
            }
        }
        new
    }

    /// Moves `op` from its region to `at`.
    pub fn move_op(&mut self, op: Op, at: Cursor) {
        self.remove_op(op);
        self.ops[op].parent = at.region;
        self.place(at, op);
    }

    /// Replaces a guard's conditions (rebuilding its operands).
    pub fn set_guard_conds(&mut self, op: Op, conds: &[(AffineExpr<Value>, i64)]) {
        let exprs: Vec<AffineExpr<Value>> = conds.iter().map(|(e, _)| e.clone()).collect();
        let (operands, mut packed) = pack_indices(vec![], &[&exprs]);
        self.ops[op].operands = operands;
        if let OpKind::If(g) = &mut self.ops[op].kind {
            g.conds = packed.remove(0).into_iter().zip(conds.iter().map(|&(_, b)| b)).collect();
        }
    }

    /// A guard's conditions, in terms of values.
    pub fn guard_conds(&self, op: Op) -> Vec<(AffineExpr<Value>, i64)> {
        match &self.ops[op].kind {
            OpKind::If(g) => g.conds.iter().map(|(e, b)| (self.expr_in_values(op, e), *b)).collect(),
            _ => Vec::new(),
        }
    }

    /// The ops enclosing `op`, innermost first.
    pub fn ancestors(&self, op: Op) -> Vec<Op> {
        let mut out = Vec::new();
        let mut region = self.ops[op].parent;
        while let Some(owner) = self.regions[region].owner {
            out.push(owner);
            region = self.ops[owner].parent;
        }
        out
    }
}
