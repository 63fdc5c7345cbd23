//! The syntax tree built by the grammar: text and spans only, no meaning.
//! `resolve.rs` turns it into IR, reporting every name and structure error.

use crate::diag::Span;

/// A name or word with its location (`%acc` is stored as `acc`).
#[derive(Clone, Debug, PartialEq)]
pub struct Word {
    pub text: String,
    pub span: Span,
}

/// Widens a literal's span to start at its sign.
pub fn signed(mut w: Word, start: usize) -> Word {
    w.span.start = start as u32;
    w
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModuleAst {
    pub funcs: Vec<FuncAst>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FuncAst {
    pub name: Word,
    pub params: Vec<(Word, TypeAst)>,
    pub results: Vec<TypeAst>,
    pub body: Vec<StmtAst>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeAst {
    /// `f32`
    Scalar(Word),
    /// `tensor<4x8xf32>` (the shape text `4x8xf32`) or `tensor<f32>`.
    Tensor { shape: Word, span: Span },
    /// `buffer<4x8xf32, shared>`: the shape text and the memory scope.
    Buffer { shape: Word, scope: Word, span: Span },
}

impl TypeAst {
    pub fn span(&self) -> Span {
        match self {
            TypeAst::Scalar(w) => w.span,
            TypeAst::Tensor { span, .. } | TypeAst::Buffer { span, .. } => *span,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum LiteralAst {
    Int { text: Word, negative: bool },
    Float { text: Word, negative: bool },
    /// `inf`, `-inf`, `nan`.
    Special { text: Word, negative: bool },
}

impl LiteralAst {
    pub fn span(&self) -> Span {
        match self {
            LiteralAst::Int { text, .. } | LiteralAst::Float { text, .. } | LiteralAst::Special { text, .. } => text.span,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtAst {
    /// `[%r =] mnemonic %a, %b [: type [-> type]]`
    Op { result: Option<Word>, mnemonic: Word, args: Vec<Word>, sig: Option<(TypeAst, Option<TypeAst>)>, span: Span },
    /// `%r = const literal : type`
    Const { result: Word, value: LiteralAst, ty: TypeAst, span: Span },
    /// `%r = weight "name" : type` (`keyword` is checked to be `weight`
    /// when resolving: it is not a keyword of the lexer).
    Weight { result: Word, keyword: Word, name: Word, ty: TypeAst, span: Span },
    /// `%r = index axis : type` in a compute region; `%r = index <index
    /// expression over %values> : type` in loops.
    Index { result: Word, expr: IndexAst, ty: TypeAst, span: Span },
    Compute(Box<ComputeAst>),
    /// `for %i = 0 to N [map(m)] [axis(a.l)] { ... }`
    For(Box<ForAst>),
    /// `if e < n, ... { ... }`
    If(Box<IfAst>),
    /// `kernel ["label"] schedule "target" {...} { ... }`
    Kernel(Box<KernelAst>),
    /// `%v = load %src[i, ...] [pad(lit)] [read(name)] : type`
    Load { result: Word, src: Word, indices: Vec<IndexAst>, pad: Option<LiteralAst>, clauses: Vec<ClauseAst>, ty: TypeAst, span: Span },
    /// `store %v, %dst[i, ...]`
    Store { value: Word, dst: Word, indices: Vec<IndexAst>, span: Span },
    /// `copy %src[i, ...] -> %dst[i, ...] box [n, ...] [stride [g, ...]] [split [d, f]] [permute [d, ...]] [pad(lit)] [cooperative]`
    Copy {
        src: Word,
        src_indices: Vec<IndexAst>,
        dst: Word,
        dst_indices: Vec<IndexAst>,
        sizes: Vec<Word>,
        /// The source stride of each box dimension, and where the clause is.
        stride: Option<(Vec<Word>, Span)>,
        /// The box dimension split and the factor, and where the clause is.
        split: Option<(Vec<Word>, Span)>,
        /// The box dimension each destination dimension takes, and where
        /// the clause is.
        permute: Option<(Vec<Word>, Span)>,
        pad: Option<LiteralAst>,
        cooperative: bool,
        span: Span,
    },
    /// `fill %buf, literal`
    Fill { buffer: Word, value: LiteralAst, span: Span },
    /// `intrinsic "name" kind [m, n, k] %acc[...] += %a[...] * %b[...]`
    Intrinsic(Box<IntrinsicAst>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct IntrinsicAst {
    /// The word `intrinsic` (an identifier: schedules use it as a key).
    pub keyword: Word,
    pub name: Word,
    pub kind: Word,
    /// Per axis, its size, or the parts of a fused axis (`2 * 8`).
    pub shape: Vec<Vec<Word>>,
    /// The read names of `a` and `b` (`reads(b, a)`).
    pub reads: Option<(Word, Word)>,
    /// `lane(%g, %t)`: the clause's word (checked to be `lane`) and the
    /// lane's group and index in it, of a warp intrinsic (index
    /// expressions: a fused mapping's lanes run over several lane loops,
    /// `lane(%g_hi * 4 + %g_lo, %t)`).
    pub lane: Option<(Word, IndexAst, IndexAst)>,
    pub acc: TileAst,
    pub a: TileAst,
    pub b: TileAst,
    pub span: Span,
}

/// `%buf[index, ...] [pad(literal)]`: an operand of an `intrinsic` op.
#[derive(Clone, Debug, PartialEq)]
pub struct TileAst {
    pub buffer: Word,
    pub indices: Vec<IndexAst>,
    pub pad: Option<LiteralAst>,
}

/// A named clause `name(arg)`: `map(thread.x)`, `axis(i.block)`, `read(a)`.
/// The grammar accepts any name; the resolver checks it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClauseAst {
    pub name: Word,
    pub arg: Word,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ForAst {
    pub var: Word,
    pub lower: Word,
    pub extent: Word,
    pub clauses: Vec<ClauseAst>,
    pub body: Vec<StmtAst>,
    /// From `for` to the last clause.
    pub head_span: Span,
}

/// One guard condition `index < bound`.
#[derive(Clone, Debug, PartialEq)]
pub struct CondAst {
    pub expr: IndexAst,
    /// The bound, with its sign in the span.
    pub bound: Word,
    pub negative: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct IfAst {
    pub conds: Vec<CondAst>,
    pub body: Vec<StmtAst>,
    pub head_span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct KernelAst {
    pub label: Option<Word>,
    /// `prepack`: the kernel only lays out constants (`Kernel::prepack`).
    pub prepack: bool,
    pub schedule: ScheduleAst,
    pub body: Vec<StmtAst>,
    /// From `kernel` to the target name.
    pub head_span: Span,
}

/// `schedule "target" { key = value, ... }`
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleAst {
    pub target: Word,
    pub entries: Vec<AttrEntry>,
    /// `schedule "target"`.
    pub span: Span,
}

/// `key = value` in an attribute dictionary.
#[derive(Clone, Debug, PartialEq)]
pub struct AttrEntry {
    pub key: Word,
    pub value: AttrValue,
}

/// A value of an attribute dictionary.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Int(Word),
    Ident(Word),
    Str(Word),
    List(Vec<AttrValue>, Span),
    Dict(Vec<AttrEntry>, Span),
}

impl AttrValue {
    pub fn span(&self) -> Span {
        match self {
            AttrValue::Int(w) | AttrValue::Ident(w) | AttrValue::Str(w) => w.span,
            AttrValue::List(_, s) | AttrValue::Dict(_, s) => *s,
        }
    }

    /// What kind of value this is, for messages.
    pub fn describe(&self) -> &'static str {
        match self {
            AttrValue::Int(_) => "an integer",
            AttrValue::Ident(_) => "a name",
            AttrValue::Str(_) => "a string",
            AttrValue::List(..) => "a list",
            AttrValue::Dict(..) => "a dictionary",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct AxisAst {
    pub name: Word,
    pub extent: Word,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReadAst {
    pub bind: Word,
    pub tensor: Word,
    pub indices: Vec<IndexAst>,
    pub pad: Option<LiteralAst>,
}

/// An index expression as written; `resolve` normalises it to affine form.
/// Sums and products are flat so that long expressions do not nest.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexAst {
    Int(Word),
    /// An axis name (compute ops).
    Var(Word),
    /// `%i`: an index value (loop-level ops).
    Value(Word),
    /// One or more prefix minus signs; `odd` when they do not cancel.
    Neg { inner: Box<IndexAst>, odd: bool, span: Span },
    /// `first (+|-) t1 (+|-) t2 ...`; the flag is true for `-`.
    Sum { first: Box<IndexAst>, rest: Vec<(bool, IndexAst)>, span: Span },
    Product { factors: Vec<IndexAst>, span: Span },
    Div(Box<IndexAst>, Word, Span),
}

impl IndexAst {
    pub fn span(&self) -> Span {
        match self {
            IndexAst::Int(w) | IndexAst::Var(w) | IndexAst::Value(w) => w.span,
            IndexAst::Neg { span, .. } | IndexAst::Sum { span, .. } | IndexAst::Product { span, .. } | IndexAst::Div(_, _, span) => *span,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ComputeAst {
    pub result: Word,
    pub keyword: Span,
    pub label: Option<Word>,
    pub spatial: Vec<AxisAst>,
    /// `reduce <combiner> (axes)`
    pub reduce: Option<(Word, Vec<AxisAst>)>,
    pub reads: Vec<ReadAst>,
    pub out_type: TypeAst,
    pub out_index: Vec<IndexAst>,
    pub body: Vec<StmtAst>,
    pub schedule: Option<ScheduleAst>,
    pub body_close: Span,
    pub epilogue: Option<EpilogueAst>,
    /// From the result name to the end of the output index.
    pub head_span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EpilogueAst {
    pub acc: Word,
    pub reads: Vec<ReadAst>,
    pub body: Vec<StmtAst>,
    pub keyword: Span,
    pub body_close: Span,
}
