//! The tile IR: modules of functions, each an SSA graph of ops in regions.
//!
//! Storage follows Cranelift: values, ops and regions are typed `u32` ids
//! into `PrimaryMap`s owned by the [`Function`]; side data (source spans)
//! lives in `SecondaryMap`s. Passes take `&mut Function` and edit in place.
//! An op that is removed from its region's op list is dead: the arenas are
//! append-only, and everything that walks the IR starts from regions.

pub mod affine;
pub mod builder;
pub mod cost;
pub mod loops;
pub mod ops;
pub mod scalar;
pub mod schedule;
pub mod types;
pub mod weights;

use crate::diag::Span;
use cranelift_entity::{PrimaryMap, SecondaryMap, entity_impl};
/// `new` and `index` of the typed ids.
pub use cranelift_entity::EntityRef;

pub use affine::AffineExpr;
pub use loops::{Access, CopyOp, CopySplit, Dim, ForLoop, Guard, IntrinsicCall, IntrinsicKind, Kernel, LoopTag, Mapping, TagLevel, TileOperand, WARP_LANES};
pub use ops::{AxisDecl, AxisId, AxisKind, BinaryOp, Combiner, Compute, Literal, OpKind, Read, UnaryOp};
pub use schedule::{CacheDirective, IntrinsicChoice, Schedule};
pub use types::{BufferType, ElemType, MemScope, TensorType, Type};

/// An SSA value: a function parameter, a region argument or an op result.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(u32);
entity_impl!(Value, "v");

/// An operation.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Op(u32);
entity_impl!(Op, "op");

/// A region: a list of ops with arguments, owned by an op or the function.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Region(u32);
entity_impl!(Region, "region");

/// Where a value comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ValueDef {
    Param(usize),
    RegionArg(Region, usize),
    Result(Op, usize),
}

#[derive(Clone, Debug)]
pub struct ValueData {
    pub ty: Type,
    pub def: ValueDef,
    /// The name the value had in the source (`%acc`), kept by the printer
    /// when it is free in its scope. Purely numeric names are not kept:
    /// the printer numbers anonymous values itself.
    pub name: Option<String>,
}

#[derive(Clone, Debug)]
pub struct OpData {
    pub kind: OpKind,
    pub operands: Vec<Value>,
    pub results: Vec<Value>,
    pub regions: Vec<Region>,
    /// The region whose op list holds this op.
    pub parent: Region,
}

#[derive(Clone, Debug, Default)]
pub struct RegionData {
    pub args: Vec<Value>,
    pub ops: Vec<Op>,
    /// The op that owns the region, or `None` for a function body.
    pub owner: Option<Op>,
}

#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub params: Vec<Value>,
    pub result_types: Vec<TensorType>,
    pub body: Region,
    pub values: PrimaryMap<Value, ValueData>,
    pub ops: PrimaryMap<Op, OpData>,
    pub regions: PrimaryMap<Region, RegionData>,
    /// Source location of each op; ops built by a pass inherit the span of
    /// the op they replace, so later diagnostics still point at the source.
    pub op_spans: SecondaryMap<Op, Span>,
    /// Source location of each value's definition (its name in the source).
    pub value_spans: SecondaryMap<Value, Span>,
    /// Location of the function's name.
    pub span: Span,
}

/// A compilation unit: a list of functions with distinct names.
#[derive(Clone, Debug, Default)]
pub struct Module {
    pub funcs: Vec<Function>,
    /// The module's kernels in MLIR, once `lower-to-mlir` has run: the
    /// next stage of the program, which IR dumps show from then on.
    pub mlir: Option<String>,
}

impl Module {
    pub fn func(&self, name: &str) -> Option<&Function> {
        self.funcs.iter().find(|f| f.name == name)
    }

    /// The targets named by the schedules of the module's compute ops and
    /// kernels (nested ones included), each once, in order of appearance.
    pub fn schedule_targets(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for f in &self.funcs {
            for (_, op) in f.ops.iter() {
                let target = match &op.kind {
                    OpKind::Compute(c) => c.schedule.as_ref().map(|s| &s.target),
                    OpKind::Kernel(k) => Some(&k.schedule.target),
                    _ => None,
                };
                if let Some(t) = target.filter(|t| !names.contains(t)) {
                    names.push(t.clone());
                }
            }
        }
        names
    }
}

impl Function {
    /// An empty function with the given signature; parameters get fresh values.
    pub fn new(name: impl Into<String>, params: Vec<TensorType>, result_types: Vec<TensorType>) -> Function {
        let mut regions = PrimaryMap::new();
        let body = regions.push(RegionData::default());
        let mut f = Function {
            name: name.into(),
            params: Vec::new(),
            result_types,
            body,
            values: PrimaryMap::new(),
            ops: PrimaryMap::new(),
            regions,
            op_spans: SecondaryMap::with_default(Span::DUMMY),
            value_spans: SecondaryMap::with_default(Span::DUMMY),
            span: Span::DUMMY,
        };
        for (i, t) in params.into_iter().enumerate() {
            let v = f.values.push(ValueData { ty: Type::Tensor(t), def: ValueDef::Param(i), name: None });
            f.params.push(v);
        }
        f
    }

    pub fn value_type(&self, v: Value) -> &Type {
        &self.values[v].ty
    }

    pub fn op(&self, op: Op) -> &OpData {
        &self.ops[op]
    }

    pub fn region(&self, r: Region) -> &RegionData {
        &self.regions[r]
    }

    /// The axes that `index` ops in compute op `op`'s regions name: axes a
    /// rewrite of the op must keep as they are.
    pub fn indexed_axes(&self, op: Op) -> Vec<AxisId> {
        self.ops[op]
            .regions
            .iter()
            .flat_map(|&r| self.regions[r].ops.iter())
            .filter_map(|&o| match self.ops[o].kind {
                OpKind::AxisIndex(a) => Some(a),
                _ => None,
            })
            .collect()
    }

    /// A new empty region owned by `owner` (attach it with `OpData::regions`).
    pub fn new_region(&mut self, owner: Option<Op>) -> Region {
        self.regions.push(RegionData { args: Vec::new(), ops: Vec::new(), owner })
    }

    /// Appends an argument of type `ty` to region `r`.
    pub fn add_region_arg(&mut self, r: Region, ty: Type, name: Option<String>) -> Value {
        let idx = self.regions[r].args.len();
        let v = self.values.push(ValueData { ty, def: ValueDef::RegionArg(r, idx), name });
        self.regions[r].args.push(v);
        v
    }

    /// Creates an op with results of the given types, appended to `region`.
    pub fn append_op(&mut self, region: Region, kind: OpKind, operands: Vec<Value>, result_types: Vec<Type>, span: Span) -> Op {
        let op = self.create_op(region, kind, operands, result_types, span);
        self.regions[region].ops.push(op);
        op
    }

    /// Creates an op whose parent is `region` without placing it in the op
    /// list; the caller inserts it where it belongs.
    pub fn create_op(&mut self, region: Region, kind: OpKind, operands: Vec<Value>, result_types: Vec<Type>, span: Span) -> Op {
        let op = self.ops.push(OpData { kind, operands, results: Vec::new(), regions: Vec::new(), parent: region });
        for (i, ty) in result_types.into_iter().enumerate() {
            let v = self.values.push(ValueData { ty, def: ValueDef::Result(op, i), name: None });
            self.ops[op].results.push(v);
        }
        self.op_spans[op] = span;
        op
    }

    /// The single result of an op that has exactly one.
    pub fn result(&self, op: Op) -> Value {
        let r = &self.ops[op].results;
        debug_assert_eq!(r.len(), 1, "op has {} results", r.len());
        r[0]
    }

    /// How messages name a value: its source name, or its id.
    pub fn value_label(&self, v: Value) -> String {
        match &self.values[v].name {
            Some(n) => format!("`%{n}`"),
            None => format!("#{}", v.as_u32()),
        }
    }

    /// The op defining `v`, if it is an op result.
    pub fn def_op(&self, v: Value) -> Option<Op> {
        match self.values[v].def {
            ValueDef::Result(op, _) => Some(op),
            _ => None,
        }
    }

    /// All ops of the function, outer ops before the ops of their regions,
    /// in program order.
    pub fn walk(&self) -> Vec<Op> {
        let mut out = Vec::new();
        // Depth-first with an explicit stack so that deep nests cannot
        // overflow the call stack.
        let mut pending: Vec<(Region, usize)> = vec![(self.body, 0)];
        while let Some((r, i)) = pending.pop() {
            let ops = &self.regions[r].ops;
            if i < ops.len() {
                pending.push((r, i + 1));
                let op = ops[i];
                out.push(op);
                for &sub in self.ops[op].regions.iter().rev() {
                    pending.push((sub, 0));
                }
            }
        }
        out
    }

    /// Replaces every use of `from` by `to` in the operands of live ops.
    pub fn replace_all_uses(&mut self, from: Value, to: Value) {
        for op in self.walk() {
            for v in &mut self.ops[op].operands {
                if *v == from {
                    *v = to;
                }
            }
        }
    }

    /// Number of uses of each value by live ops.
    pub fn use_counts(&self) -> SecondaryMap<Value, u32> {
        let mut counts = SecondaryMap::with_default(0);
        for op in self.walk() {
            for &v in &self.ops[op].operands {
                counts[v] += 1;
            }
        }
        counts
    }

    /// Removes `op` from its region's op list, making it dead.
    pub fn remove_op(&mut self, op: Op) {
        let parent = self.ops[op].parent;
        self.regions[parent].ops.retain(|&o| o != op);
    }

    /// The distinct `read(...)` tags of the loads (and `reads(...)` of the
    /// intrinsics) in `region` and the
    /// regions nested in it, in program order: the reads a kernel's `cache`
    /// directives name.
    pub fn load_read_tags(&self, region: Region) -> Vec<String> {
        let mut tags: Vec<String> = Vec::new();
        let mut pending: Vec<(Region, usize)> = vec![(region, 0)];
        while let Some((r, i)) = pending.pop() {
            let Some(&op) = self.regions[r].ops.get(i) else { continue };
            pending.push((r, i + 1));
            let reads: Vec<&String> = match &self.ops[op].kind {
                OpKind::Load(a) => a.read.iter().collect(),
                OpKind::Intrinsic(x) => x.a.read.iter().chain(&x.b.read).collect(),
                _ => Vec::new(),
            };
            for t in reads {
                if !tags.contains(t) {
                    tags.push(t.clone());
                }
            }
            for &sub in self.ops[op].regions.iter().rev() {
                pending.push((sub, 0));
            }
        }
        tags
    }

    /// The value returned by the `return` op of the body, by position.
    pub fn return_op(&self) -> Option<Op> {
        self.regions[self.body].ops.iter().copied().find(|&op| matches!(self.ops[op].kind, OpKind::Return))
    }

    /// A module of one function with the same name: the compute op `op` of
    /// the body alone, its operands as parameters (in order of first use)
    /// but for weights, which stay `weight` ops (so the op is measured as
    /// it runs in its network, weights laid out by `prepack`), its result
    /// returned. What a search measures, or a tuner tunes, of one op.
    pub fn extract_op(&self, op: Op) -> Module {
        let mut g = self.clone();
        let data = g.ops[op].clone();
        let mut params: Vec<Value> = Vec::new();
        let mut weights: Vec<Op> = Vec::new();
        for &v in &data.operands {
            match g.def_op(v).filter(|&d| matches!(g.ops[d].kind, OpKind::Weight(_))) {
                Some(w) if !weights.contains(&w) => weights.push(w),
                Some(_) => {}
                None if !params.contains(&v) => params.push(v),
                None => {}
            }
        }
        for (i, &v) in params.iter().enumerate() {
            g.values[v].def = ValueDef::Param(i);
        }
        g.params = params;
        let ret = g.return_op().expect("a function ends in return");
        let result = data.results[0];
        g.ops[ret].operands = vec![result];
        g.result_types = g.values[result].ty.as_tensor().cloned().into_iter().collect();
        g.regions[g.body].ops = weights.into_iter().chain([op, ret]).collect();
        Module { funcs: vec![g], mlir: None }
    }
}
