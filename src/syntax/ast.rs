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
}

impl TypeAst {
    pub fn span(&self) -> Span {
        match self {
            TypeAst::Scalar(w) => w.span,
            TypeAst::Tensor { span, .. } => *span,
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
    /// `%r = index axis : type`
    Index { result: Word, axis: Word, ty: TypeAst, span: Span },
    Compute(Box<ComputeAst>),
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
    Var(Word),
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
            IndexAst::Int(w) | IndexAst::Var(w) => w.span,
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
