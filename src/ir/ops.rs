//! The ops of the tile dialect and their one declaration each.
//!
//! [`OpKind`] is what the IR stores; [`op_decls`] is the table that the
//! parser (mnemonic lookup), the docs (`ir-spec/ops.md`, generated) and the
//! tests (every example must parse and verify) all read. Adding an op means
//! adding a variant here and a row to the table; a test fails until the
//! docs are regenerated.

use super::affine::AffineExpr;
use super::loops::{Access, CopyOp, Dim, ForLoop, Guard, IntrinsicCall, Kernel};
use super::schedule::Schedule;
use super::types::ElemType;
use crate::diag::Span;
use cranelift_entity::{EntityRef, entity_impl};
use std::fmt;
use std::sync::LazyLock;

/// Index of an axis within its compute op (`axes[id]`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AxisId(u32);
entity_impl!(AxisId, "axis");

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AxisKind {
    /// An axis of the output: every point is computed independently.
    Spatial,
    /// An axis folded away by the combiner.
    Reduction,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisDecl {
    pub name: String,
    pub extent: u64,
    pub kind: AxisKind,
    pub span: Span,
}

/// How a compute op folds the body's values over its reduction axes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Combiner {
    Sum,
    Max,
    Min,
}

impl Combiner {
    pub const ALL: [Combiner; 3] = [Combiner::Sum, Combiner::Max, Combiner::Min];

    pub fn name(self) -> &'static str {
        match self {
            Combiner::Sum => "sum",
            Combiner::Max => "max",
            Combiner::Min => "min",
        }
    }

    pub fn from_name(s: &str) -> Option<Combiner> {
        Combiner::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The identity the fold starts from.
    pub fn identity(self, ty: ElemType) -> Literal {
        match (self, ty.int_range()) {
            (Combiner::Sum, Some(_)) => Literal::Int(0),
            (Combiner::Sum, None) => Literal::Float(0.0),
            (Combiner::Max, Some((lo, _))) => Literal::Int(lo),
            (Combiner::Max, None) => Literal::Float(f64::NEG_INFINITY),
            (Combiner::Min, Some((_, hi))) => Literal::Int(hi),
            (Combiner::Min, None) => Literal::Float(f64::INFINITY),
        }
    }
}

/// A scalar constant. Its element type is the type of the value it defines
/// (or of the tensor it pads); floats are stored already rounded to it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Literal {
    Int(i64),
    Float(f64),
}

impl Literal {
    /// Writes the literal as it reads back for element type `ty`: floats in
    /// the shortest form that round-trips through `ty`.
    pub fn write(&self, f: &mut dyn fmt::Write, ty: ElemType) -> fmt::Result {
        match *self {
            Literal::Int(i) => write!(f, "{i}"),
            Literal::Float(x) if x.is_nan() => f.write_str("nan"),
            Literal::Float(x) if x.is_infinite() => f.write_str(if x < 0.0 { "-inf" } else { "inf" }),
            // Values are stored rounded to their type, so the shortest f32
            // text reads back to the same value for f32, f16 and bf16.
            Literal::Float(x) => write!(f, "{:?}", round_to(ty, x) as f32),
        }
    }

    pub fn to_string_as(&self, ty: ElemType) -> String {
        let mut s = String::new();
        self.write(&mut s, ty).expect("writing to a String cannot fail");
        s
    }

    pub fn as_f64(&self) -> f64 {
        match *self {
            Literal::Int(i) => i as f64,
            Literal::Float(x) => x,
        }
    }

    /// Bitwise equality (so `nan == nan` and `0.0 != -0.0`), for CSE.
    pub fn same_as(&self, other: &Literal) -> bool {
        match (self, other) {
            (Literal::Int(a), Literal::Int(b)) => a == b,
            (Literal::Float(a), Literal::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

/// Rounds `x` to the nearest value of a float element type (ties to even),
/// in one rounding step.
pub fn round_to(ty: ElemType, x: f64) -> f64 {
    match ty {
        ElemType::F32 => x as f32 as f64,
        // `half` converts f64 through f32, which rounds twice. Rounding to
        // f32 *to odd* first keeps the second rounding correct: f32 has more
        // than p + 2 bits for both f16 (p = 11) and bf16 (p = 8).
        ElemType::F16 => half::f16::from_f32(round_to_odd_f32(x)).to_f64(),
        ElemType::BF16 => half::bf16::from_f32(round_to_odd_f32(x)).to_f64(),
        ElemType::I8 | ElemType::U8 | ElemType::I32 => x,
    }
}

/// `x` rounded to f32 with round-to-odd: exact values stay; otherwise the
/// neighbour of `x` whose last mantissa bit is 1.
fn round_to_odd_f32(x: f64) -> f32 {
    let y = x as f32;
    if y as f64 == x || x.is_nan() || y.is_infinite() || y.to_bits() & 1 == 1 {
        return y;
    }
    // `y` is even and inexact: step one ulp towards `x` (an odd neighbour).
    let toward_x = if (y as f64) < x { y.next_up() } else { y.next_down() };
    toward_x
}

/// One tensor read of a compute op: an index expression per dimension of
/// the tensor, and the value read where the access falls outside the
/// tensor (or divides inexactly). Without `pad` the verifier proves every
/// access in bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Read {
    pub indices: Vec<AffineExpr<AxisId>>,
    pub pad: Option<Literal>,
    /// Location of each index expression, for diagnostics.
    pub index_spans: Vec<Span>,
}

/// The payload of a `compute` op: `out[output(s)] = epilogue(fold over r
/// of body(reads at (s, r)))`. See `ir-spec/README.md` for the semantics.
///
/// Operands are the read tensors: `operands[i]` is read by `reads[i]` for
/// `i < reads.len()`, then by `epilogue_reads`. Region 0 is the body, with
/// one argument per body read; region 1, present iff `has_epilogue`, has
/// the accumulator followed by one argument per epilogue read.
#[derive(Clone, Debug, PartialEq)]
pub struct Compute {
    pub label: Option<String>,
    /// Spatial axes first, then reduction axes.
    pub axes: Vec<AxisDecl>,
    pub combiner: Option<Combiner>,
    pub reads: Vec<Read>,
    pub output: Vec<AffineExpr<AxisId>>,
    pub output_spans: Vec<Span>,
    pub has_epilogue: bool,
    pub epilogue_reads: Vec<Read>,
    /// How to compute it (level 1), if decided.
    pub schedule: Option<Schedule>,
}

impl Compute {
    pub fn axis(&self, id: AxisId) -> &AxisDecl {
        &self.axes[id.index()]
    }

    pub fn axis_ids(&self) -> impl Iterator<Item = AxisId> + '_ {
        (0..self.axes.len()).map(AxisId::new)
    }

    pub fn spatial_axes(&self) -> impl Iterator<Item = AxisId> + '_ {
        self.axis_ids().filter(|&a| self.axis(a).kind == AxisKind::Spatial)
    }

    pub fn reduction_axes(&self) -> impl Iterator<Item = AxisId> + '_ {
        self.axis_ids().filter(|&a| self.axis(a).kind == AxisKind::Reduction)
    }

    pub fn axis_by_name(&self, name: &str) -> Option<AxisId> {
        self.axes.iter().position(|a| a.name == name).map(AxisId::new)
    }

    /// Every read, body reads first, paired with its operand position.
    pub fn all_reads(&self) -> impl Iterator<Item = (usize, &Read)> {
        self.reads.iter().chain(&self.epilogue_reads).enumerate()
    }

    /// Number of points of the iteration space (`None` on overflow).
    pub fn iteration_points(&self) -> Option<u64> {
        self.axes.iter().try_fold(1u64, |acc, a| acc.checked_mul(a.extent))
    }
}

macro_rules! scalar_op_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $mnemonic:literal, $float_only:literal, $summary:literal;)* }) => {
        $(#[$meta])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),* }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            pub fn mnemonic(self) -> &'static str {
                match self { $($name::$variant => $mnemonic),* }
            }

            /// Defined on float element types only.
            pub fn float_only(self) -> bool {
                match self { $($name::$variant => $float_only),* }
            }

            pub fn summary(self) -> &'static str {
                match self { $($name::$variant => $summary),* }
            }

            pub fn from_mnemonic(s: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|o| o.mnemonic() == s)
            }
        }
    };
}

scalar_op_enum! {
    /// Elementwise unary scalar ops.
    UnaryOp {
        Neg = "neg", false, "negation";
        Abs = "abs", false, "absolute value";
        Relu = "relu", false, "max(x, 0)";
        Exp = "exp", true, "e^x";
        Log = "log", true, "natural logarithm";
        Sqrt = "sqrt", true, "square root";
        Rsqrt = "rsqrt", true, "1 / sqrt(x)";
        Tanh = "tanh", true, "hyperbolic tangent";
        Erf = "erf", true, "the error function (for exact GELU)";
        Sigmoid = "sigmoid", true, "1 / (1 + e^-x)";
    }
}

scalar_op_enum! {
    /// Elementwise binary scalar ops; both operands and the result share a type.
    BinaryOp {
        Add = "add", false, "addition (wrapping on integers)";
        Sub = "sub", false, "subtraction (wrapping on integers)";
        Mul = "mul", false, "multiplication (wrapping on integers)";
        Div = "div", true, "IEEE division";
        Max = "max", false, "maximum (NaN if either operand is NaN)";
        Min = "min", false, "minimum (NaN if either operand is NaN)";
    }
}

/// What an op is. Operands, results and regions live in `OpData`.
#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// `%c = const 0.5 : f32`
    Const(Literal),
    /// `%y = exp %x : f32`
    Unary(UnaryOp),
    /// `%z = add %x, %y : f32`
    Binary(BinaryOp),
    /// `%y = cast %x : i8 -> i32`
    Cast,
    /// `%i = index h : i32` — the current value of an axis, inside a compute region.
    AxisIndex(AxisId),
    /// `yield %v : f32` — ends a compute region.
    Yield,
    /// `return %t, %u` — ends a function body.
    Return,
    /// `%C = compute ...` — see [`Compute`].
    Compute(Box<Compute>),
    /// `%w = weight "conv1.weight" : tensor<64x3x7x7xf32>` — a constant
    /// tensor whose contents live outside the IR, in the weights file
    /// beside the module, under this name (see `ir/weights.rs`).
    Weight(Box<str>),
    /// `%v = reshape %x : tensor<1x8x4x4xf32> -> tensor<1x8x16xf32>` — the
    /// same elements under another shape, in row-major order: a view, no
    /// copy (see `RESHAPE_DESCRIPTION`).
    Reshape,

    // Level 2: loops and memory (see `loops.rs`).
    /// `%b = alloc : buffer<4x4xf32, local>`
    Alloc,
    /// `for %i = 0 to 8 map(thread.x) axis(i.thread) { ... }`
    For(Box<ForLoop>),
    /// `%v = load %B[%k, %j * 4 + %p] : f32`
    Load(Box<Access>),
    /// `store %v, %C[%i, %j]`
    Store(Box<Access>),
    /// `copy %A[%i, %k] -> %As[0, 0] box [16, 8] cooperative`
    Copy(Box<CopyOp>),
    /// `fill %acc, 0.0`
    Fill(Literal),
    /// `intrinsic "vpdpbusd.ymm" dot [8, 1, 4] %acc[...] += %a[...] * %b[...]`
    Intrinsic(Box<IntrinsicCall>),
    /// `barrier` — all threads of the block reach it before any continues.
    Barrier,
    /// `if %i * 4 + %p < 10 { ... }`
    If(Box<Guard>),
    /// `kernel "gemm" schedule "sm90" {...} { ... }`
    Kernel(Box<Kernel>),
    /// `%x = index %i * 4 + %p : i32` — an index expression as a scalar.
    IndexValue(AffineExpr<Dim>),
}

impl OpKind {
    pub fn mnemonic(&self) -> &'static str {
        match self {
            OpKind::Const(_) => "const",
            OpKind::Unary(u) => u.mnemonic(),
            OpKind::Binary(b) => b.mnemonic(),
            OpKind::Cast => "cast",
            OpKind::AxisIndex(_) => "index",
            OpKind::Yield => "yield",
            OpKind::Return => "return",
            OpKind::Compute(_) => "compute",
            OpKind::Weight(_) => "weight",
            OpKind::Reshape => "reshape",
            OpKind::Alloc => "alloc",
            OpKind::For(_) => "for",
            OpKind::Load(_) => "load",
            OpKind::Store(_) => "store",
            OpKind::Copy(_) => "copy",
            OpKind::Fill(_) => "fill",
            OpKind::Intrinsic(_) => "intrinsic",
            OpKind::Barrier => "barrier",
            OpKind::If(_) => "if",
            OpKind::Kernel(_) => "kernel",
            OpKind::IndexValue(_) => "index",
        }
    }

    /// Ops that end a region.
    pub fn is_terminator(&self) -> bool {
        matches!(self, OpKind::Yield | OpKind::Return)
    }

    /// Ops without side effects whose result depends only on their
    /// operands (safe to fold, CSE and delete when unused).
    pub fn is_pure(&self) -> bool {
        matches!(
            self,
            OpKind::Const(_) | OpKind::Unary(_) | OpKind::Binary(_) | OpKind::Cast | OpKind::AxisIndex(_) | OpKind::IndexValue(_) | OpKind::Compute(_) | OpKind::Weight(_) | OpKind::Reshape
        )
    }

    /// Ops of the loop-level IR (level 2).
    pub fn is_loop_level(&self) -> bool {
        matches!(
            self,
            OpKind::Alloc
                | OpKind::For(_)
                | OpKind::Load(_)
                | OpKind::Store(_)
                | OpKind::Copy(_)
                | OpKind::Fill(_)
                | OpKind::Intrinsic(_)
                | OpKind::Barrier
                | OpKind::If(_)
                | OpKind::Kernel(_)
                | OpKind::IndexValue(_)
        )
    }

    pub fn as_compute(&self) -> Option<&Compute> {
        match self {
            OpKind::Compute(c) => Some(c),
            _ => None,
        }
    }

    pub fn as_compute_mut(&mut self) -> Option<&mut Compute> {
        match self {
            OpKind::Compute(c) => Some(c),
            _ => None,
        }
    }
}

/// Where an op may appear.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OpPlace {
    /// In a function body.
    Function,
    /// In a compute region (body or epilogue).
    ComputeRegion,
    /// In a function body or inside loop-level regions (`for`, `if`,
    /// `kernel`).
    Loops,
    /// Anywhere scalar code runs: compute regions and loop bodies.
    Scalar,
}

impl OpPlace {
    /// May an op declared with this placement appear in `here`?
    pub fn allows(self, here: OpPlace) -> bool {
        match self {
            OpPlace::Scalar => matches!(here, OpPlace::ComputeRegion | OpPlace::Loops),
            OpPlace::Loops => matches!(here, OpPlace::Function | OpPlace::Loops),
            other => other == here,
        }
    }
}

/// The documentation and placement of one op: the single source for the
/// dialect reference and for the parser's mnemonic table.
#[derive(Clone, Debug)]
pub struct OpDecl {
    pub mnemonic: &'static str,
    pub summary: String,
    pub description: &'static str,
    pub syntax: &'static str,
    /// A complete, valid module using the op.
    pub example: String,
    pub place: OpPlace,
}

const COMPUTE_DESCRIPTION: &str = "\
Computes a tensor over an iteration space of named axes. Spatial axes (in the
parenthesis after `compute`) index the output; reduction axes (after `reduce
<combiner>`) are folded away with the combiner `sum`, `max` or `min`. Each read
binds a scalar block argument to a tensor element addressed by one affine
index expression per dimension; reads that can fall outside the tensor must
carry `pad(<literal>)`, the value read there. The body computes one value per
point of the iteration space; the combiner folds these over the reduction axes
in lexicographic order, starting from its identity (0, -inf, +inf). The
optional epilogue maps the folded value (its first argument) and further
reads indexed by spatial axes only to the output element; without one, the
folded value is stored as is. The output index maps the spatial axes
one-to-one onto the result (each spatial axis exactly once; mixed-radix sums
such as `g * 32 + f` express grouped layouts). Reads may read tensors or
buffers. An optional `schedule` (level 1) says how to compute the op on a
target: tile sizes per axis and tile level, virtual threads, reads to cache,
unrolling and vectorisation; it does not change the result.";

const WEIGHT_DESCRIPTION: &str = "\
A tensor of constants, such as a model's trained parameters, kept out of the
IR text: its contents are the tensor of this name in the weights file beside
the module (`NET.safetensors` for `NET.tile`, or the file `tilec-run
--weights` names), whose shape and element type must match. It appears in the
function body, before its uses, and at most once per name. Compute ops read it
like a parameter; to run or compile the function, tools turn each weight into a
trailing parameter in order of appearance and pass the file's tensors there.";

const RESHAPE_DESCRIPTION: &str = "\
The elements of a tensor under another shape with the same element type and
number of elements, both in row-major order (element `i` of the flattened
operand is element `i` of the flattened result). Tensors are dense and
row-major, so this is a view: compiled code passes the operand's memory
under the new shape, and nothing is copied. `collapse-axes` inserts
reshapes around a compute op whose axes it merges (a 1x1 convolution over
`oh` and `ow` becomes a GEMM over their product); after `tile`, the operand
may be the global buffer that replaced a compute op's tensor.";

const INDEX_DESCRIPTION: &str = "\
In a compute region, reads the coordinate of the current iteration point along
an axis of the enclosing compute op (for masks, positions, iota). In loops,
evaluates an affine index expression over index values (loop variables), such
as `%i * 4 + %p`, as a scalar. Integer results must hold every value the
expression takes.";

const FOR_DESCRIPTION: &str = "\
Runs its body once for each value of the induction variable, `0` to `N - 1`
(the lower bound is always 0). `map(...)` says how iterations execute: `serial`
(the default, not printed) one after the other; `parallel` spread over CPU
cores; `block.x/y/z` as GPU thread blocks and `thread.x/y/z` as the threads of
a block, all iterations concurrently; `lane` loops, each the only op of a thread
or lane loop and splitting 32 lanes in all (the outermost most significant),
make each thread iteration a warp whose lanes run concurrently too (warp
intrinsics, `tensorize`); `vthread`, `unroll` and `vector` are serial
in meaning and tell code generation to interleave virtual threads, unroll, or
use vector lanes. Concurrent iterations must not write the same element.
`axis(a.level)` records which compute axis and tile level the loop came from.
Thread-mapped loops nest inside block-mapped loops, and not inside lane loops; a
mapping dimension occurs at most once on a nest; `vector` loops contain no loops.";

const COPY_DESCRIPTION: &str = "\
Copies a box of elements: for every offset `e` in the box, `dst[p + e] = src[o +
e]`. Source elements outside the source read the `pad` value; without `pad` the
source box must be in bounds (checked statically outside `if` guards). With
`stride [g...]` box dimension `d` steps `g_d` source elements. With `split [d,
f]` box dimension `d` is split into `(n_d / f, f)` (`f` divides its size) and
the destination has one dimension more than the source: the split box's point
`x` copies box point `e` with `e_d = f·x_d + x_{d+1}`. `permute [π...]` orders
the (split) box's dimensions for the destination: `dst[p_k + x_π(k)] = src[o +
g·e]`. The destination is a buffer. `cooperative` shares the copy out among the
threads of the enclosing thread-mapped loops (each copies a strided part, so a
`barrier` must follow before the data is read); without it, or outside any
thread-mapped loop, each executing thread copies the whole box.";

const INTRINSIC_DESCRIPTION: &str = "\
One call of a tensor intrinsic over an `m × n × k` tile: `acc[m, n] += Σ_k a[m,
k] · b[k, n]` for every `m < M`, `n < N`, summing `k < K`. Each operand is a
tensor or buffer element indexed by index values and the intrinsic's axes `m`,
`n`, `k` (outside any division); the accumulator, a buffer, may not use `k`, `a`
may not use `n`, `b` may not use `m`. An axis fused from several op axes is
written as its parts, outermost first (`[2 * 8, 1, 1]`), and indexed by one
variable per part (`m0`, `m1`): the point `m` is their mixed-radix number (`m =
8·m0 + m1`). The kind gives the rounding: `fma`
(`K = 1`) rounds `acc + a · b` once; `dot` adds `K` products to each lane, exactly
for integers (`u8`/`i8` operands widened to `i32`, wrapping) and, for `bf16`
operands into `f32`, each product exact and added one at a time from the last
`k` to the first, rounding each sum to `f32` (`vdpbf16ps`); `mma` and `wmma` add
each product, exact, in `k` order, rounding each sum to the accumulator's type
(integers: saturating the result to `i32`, as PTX's `.satfinite`). With `lane(g,
t)` (an `mma` of 16 × 8, inside `lane` loops; `g` and `t` affine expressions of
index values, such as `%g_hi * 4 + %g_lo` where a fused axis splits the lane
loops) the op is one lane's part of a warp's instruction: lane `4g + t` holds the
accumulator's rows `g`, `g + 8` and columns `2t`, `2t + 1`, so its accumulator
operand is that 2 × 2 fragment (`m` and `n` index it, one part each whatever the
tile's parts), while `a` and `b` address the whole tile. The name is the
target's (`tilec --list-targets -v`); `tensorize` makes these ops. Operands read
within bounds, or `pad` outside them (`a` and `b`).";

const KERNEL_DESCRIPTION: &str = "\
The loop nest made from one compute op, with the schedule it was made from; its
body is an ordinary loop region. The schedule's `cache` keys name reads by the
`read(...)` tags of the kernel's loads. Later scheduling passes read the
schedule; its meaning is the same as on a compute op.

A `prepack` kernel (made by the `prepack` pass) only lays out constants for
the kernels after it: it reads parameters and `weight` values, never a buffer,
and writes global buffers that nothing else writes. It runs like any kernel;
since its results depend only on the weights, a runtime may run it once per
set of weights, and `tilec-run` does not count its time as the function's.";

/// The declarations of the loop-level ops (level 2).
fn loop_op_decls() -> Vec<OpDecl> {
    let decl = |mnemonic, summary: &str, description, syntax, example: &str| OpDecl {
        mnemonic,
        summary: summary.into(),
        description,
        syntax,
        example: example.into(),
        place: OpPlace::Loops,
    };
    vec![
        decl(
            "alloc",
            "allocates a buffer",
            "Allocates a buffer of the given shape in a memory scope: `global` (device memory; in the function body only, and a function may return it), `shared` (one copy per GPU block; not inside thread-mapped loops) or `local` (private to each thread or iteration). Its contents are undefined until written.",
            "%b = alloc : buffer<d0 x ... x elem, global|shared|local>",
            "func @zeros() -> tensor<4x4xf32> {\n  %z = alloc : buffer<4x4xf32, global>\n  fill %z, 0.0\n  return %z\n}\n",
        ),
        decl(
            "fill",
            "sets every element of a buffer",
            "Writes the literal to every element of the buffer (initialising accumulators). The literal must fit the element type.",
            "fill %buf, literal",
            "func @ones() -> tensor<8xi32> {\n  %y = alloc : buffer<8xi32, global>\n  fill %y, 1\n  return %y\n}\n",
        ),
        decl(
            "for",
            "a counted loop, mapped to hardware",
            FOR_DESCRIPTION,
            "for %i = 0 to N [map(serial|parallel|block.x|...|thread.x|...|lane|vthread|unroll|vector)] [axis(a.level)] {\n  ...\n}",
            "func @double(%x: tensor<8xf32>) -> tensor<8xf32> {\n  %y = alloc : buffer<8xf32, global>\n  for %i = 0 to 8 map(parallel) {\n    %a = load %x[%i] : f32\n    %b = add %a, %a : f32\n    store %b, %y[%i]\n  }\n  return %y\n}\n",
        ),
        decl(
            "load",
            "reads one element of a tensor or buffer",
            "Reads the element at one affine index expression per dimension, over index values. With `pad(v)`, an index outside the source, or an inexact `div`, reads `v`; without it, every index must be in bounds over the enclosing loops' ranges (checked statically outside `if` guards, at run time inside them). `read(name)` tags the load with the compute read it came from, for schedules' `cache`. The type is the source's element type.",
            "%v = load %src[index, ...] [pad(literal)] [read(name)] : elem",
            "func @shift(%x: tensor<8xf32>) -> tensor<8xf32> {\n  %y = alloc : buffer<8xf32, global>\n  for %i = 0 to 8 {\n    %a = load %x[%i - 1] pad(0.0) : f32\n    store %a, %y[%i]\n  }\n  return %y\n}\n",
        ),
        decl(
            "store",
            "writes one element of a buffer",
            "Writes a scalar of the buffer's element type at one affine index expression per dimension. Only buffers are written: tensors (function parameters) are read-only. Indices must be in bounds (checked statically outside `if` guards, at run time inside them).",
            "store %v, %dst[index, ...]",
            "func @transpose(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {\n  %y = alloc : buffer<8x4xf32, global>\n  for %i = 0 to 4 {\n    for %j = 0 to 8 {\n      %a = load %x[%i, %j] : f32\n      store %a, %y[%j, %i]\n    }\n  }\n  return %y\n}\n",
        ),
        decl(
            "copy",
            "copies a box of elements into a buffer",
            COPY_DESCRIPTION,
            "copy %src[index, ...] -> %dst[index, ...] box [n, ...] [stride [g, ...]] [split [d, f]] [permute [π, ...]] [pad(literal)] [cooperative]",
            "func @stage(%x: tensor<64xf32>) -> tensor<64xf32> {\n  %y = alloc : buffer<64xf32, global>\n  for %b = 0 to 4 map(block.x) {\n    %tile = alloc : buffer<16xf32, shared>\n    for %t = 0 to 16 map(thread.x) {\n      copy %x[%b * 16] -> %tile[0] box [16] cooperative\n      barrier\n      %v = load %tile[%t] : f32\n      %w = mul %v, %v : f32\n      store %w, %y[%b * 16 + %t]\n    }\n  }\n  return %y\n}\n",
        ),
        decl(
            "intrinsic",
            "one tensor-intrinsic call over a tile",
            INTRINSIC_DESCRIPTION,
            "intrinsic \"name\" fma|dot|mma|wmma [size, size, size] [reads(name, name)] [lane(index, index)] %acc[index, ...] += %a[index, ...] [pad(literal)] * %b[index, ...] [pad(literal)]",
            "func @gemm_fma(%A: tensor<2x4xf32>, %B: tensor<4x8xf32>) -> tensor<2x8xf32> {\n  %C = alloc : buffer<2x8xf32, global>\n  fill %C, 0.0\n  for %i = 0 to 2 {\n    for %k = 0 to 4 {\n      intrinsic \"vfmadd231ps.ymm\" fma [8, 1, 1] %C[%i, m] += %B[%k, m] * %A[%i, %k]\n    }\n  }\n  return %C\n}\n",
        ),
        decl(
            "barrier",
            "synchronises the threads of a block",
            "Every iteration of the enclosing thread-mapped loops reaches the barrier before any continues past it, so writes to shared buffers before it are visible to every thread after it. Outside thread-mapped loops it does nothing.",
            "barrier",
            "func @reverse_blocks(%x: tensor<64xf32>) -> tensor<64xf32> {\n  %y = alloc : buffer<64xf32, global>\n  for %b = 0 to 4 map(block.x) {\n    %s = alloc : buffer<16xf32, shared>\n    for %t = 0 to 16 map(thread.x) {\n      %v = load %x[%b * 16 + %t] : f32\n      store %v, %s[%t]\n      barrier\n      %w = load %s[-%t + 15] : f32\n      store %w, %y[%b * 16 + %t]\n    }\n  }\n  return %y\n}\n",
        ),
        decl(
            "if",
            "runs its body where index conditions hold",
            "Runs its region where every condition `index < bound` holds; the guard of partial tiles. Inside a guard the verifier does not check bounds statically (the interpreter checks them at run time).",
            "if index < int, ... {\n  ...\n}",
            "func @relu10(%x: tensor<10xf32>) -> tensor<10xf32> {\n  %y = alloc : buffer<10xf32, global>\n  for %i_block = 0 to 3 {\n    for %i_point = 0 to 4 {\n      if %i_block * 4 + %i_point < 10 {\n        %a = load %x[%i_block * 4 + %i_point] : f32\n        %r = relu %a : f32\n        store %r, %y[%i_block * 4 + %i_point]\n      }\n    }\n  }\n  return %y\n}\n",
        ),
        decl(
            "kernel",
            "a scheduled loop nest, with its schedule",
            KERNEL_DESCRIPTION,
            "kernel [\"label\"] [prepack] schedule \"target\" {key = value, ...} {\n  ...\n}",
            "func @scale(%x: tensor<64xf32>) -> tensor<64xf32> {\n  %y = alloc : buffer<64xf32, global>\n  kernel \"scale\" schedule \"sm90\" {\n    tile = {i = [16, 1]},\n    cache = {a = local}\n  } {\n    for %i_block = 0 to 4 map(block.x) axis(i.block) {\n      for %i_thread = 0 to 16 map(thread.x) axis(i.thread) {\n        %a = load %x[%i_block * 16 + %i_thread] read(a) : f32\n        %c = const 2.0 : f32\n        %b = mul %a, %c : f32\n        store %b, %y[%i_block * 16 + %i_thread]\n      }\n    }\n  }\n  return %y\n}\n",
        ),
    ]
}

const SCALAR_EXAMPLE_PREFIX: &str = "func @f(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {\n  %z = compute (i: 8) reads(%a = %x[i], %b = %y[i]) -> tensor<8xf32>[i] {\n";
const SCALAR_EXAMPLE_SUFFIX: &str = "  }\n  return %z\n}\n";

/// All op declarations, in the order the reference lists them.
pub fn op_decls() -> &'static [OpDecl] {
    static DECLS: LazyLock<Vec<OpDecl>> = LazyLock::new(build_op_decls);
    &DECLS
}

fn build_op_decls() -> Vec<OpDecl> {
    let mut decls = vec![
        OpDecl {
            mnemonic: "compute",
            summary: "a tensor defined pointwise over spatial and reduction axes".into(),
            description: COMPUTE_DESCRIPTION,
            syntax: "%r = compute [\"label\"] (axis: extent, ...) [reduce sum|max|min (axis: extent, ...)]\n    reads(%a = %T[index, ...] [pad(literal)], ...) -> tensor<...>[index, ...]\n    [schedule \"target\" {key = value, ...}] {\n  body\n} [epilogue(%acc) [reads(...)] {\n  body\n}]",
            example: "func @gemm(%A: tensor<4x8xf32>, %B: tensor<8x2xf32>) -> tensor<4x2xf32> {\n  %C = compute \"matmul\" (i: 4, j: 2) reduce sum (k: 8)\n      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<4x2xf32>[i, j] {\n    %0 = mul %a, %b : f32\n    yield %0 : f32\n  }\n  return %C\n}\n".into(),
            place: OpPlace::Function,
        },
        OpDecl {
            mnemonic: "weight",
            summary: "a constant tensor read from the weights file beside the module".into(),
            description: WEIGHT_DESCRIPTION,
            syntax: "%w = weight \"name\" : tensor<...>",
            example: "func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %s = weight \"scale\" : tensor<4xf32>\n  %y = compute (i: 4) reads(%a = %x[i], %b = %s[i]) -> tensor<4xf32>[i] {\n    %0 = mul %a, %b : f32\n    yield %0 : f32\n  }\n  return %y\n}\n".into(),
            place: OpPlace::Function,
        },
        OpDecl {
            mnemonic: "reshape",
            summary: "the same elements under another shape (a view)".into(),
            description: RESHAPE_DESCRIPTION,
            syntax: "%v = reshape %x : tensor<...> -> tensor<...>",
            example: "func @rows(%x: tensor<2x3x4xf32>) -> tensor<6x4xf32> {\n  %v = reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>\n  %y = compute (i: 6, j: 4) reads(%a = %v[i, j]) -> tensor<6x4xf32>[i, j] {\n    %0 = mul %a, %a : f32\n    yield %0 : f32\n  }\n  return %y\n}\n".into(),
            place: OpPlace::Function,
        },
        OpDecl {
            mnemonic: "return",
            summary: "returns tensors from a function".into(),
            description: "Ends a function body. Its operands are the function's results, matching the signature in number and type.",
            syntax: "return %t, ...",
            example: "func @identity(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %x\n}\n".into(),
            place: OpPlace::Function,
        },
        OpDecl {
            mnemonic: "yield",
            summary: "ends a compute region with its value".into(),
            description: "Ends a compute body or epilogue. The body yields the value to fold (the accumulator type); the epilogue yields the output element.",
            syntax: "yield %v : type",
            example: "func @copy(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = compute (i: 4) reads(%a = %x[i]) -> tensor<4xf32>[i] {\n    yield %a : f32\n  }\n  return %y\n}\n".into(),
            place: OpPlace::ComputeRegion,
        },
        OpDecl {
            mnemonic: "const",
            summary: "a scalar constant".into(),
            description: "Defines a scalar constant. Float literals are rounded to the type; `inf`, `-inf` and `nan` are accepted. Integer literals must fit the type.",
            syntax: "%c = const literal : type",
            example: "func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = compute (i: 4) reads(%a = %x[i]) -> tensor<4xf32>[i] {\n    %c = const 0.5 : f32\n    %0 = mul %a, %c : f32\n    yield %0 : f32\n  }\n  return %y\n}\n".into(),
            place: OpPlace::Scalar,
        },
        OpDecl {
            mnemonic: "cast",
            summary: "converts a scalar between element types".into(),
            description: "Float to float rounds to nearest even; int to float rounds to nearest (exactly from i8 and u8); float to int truncates toward zero and saturates to the target's range (0 to 255 for u8; NaN gives 0); int to int wraps modulo 2^width of the target, so widening keeps the value (u8 zero-extends, i8 sign-extends) and narrowing keeps the low bits (300 : i32 becomes 44 : u8, -1 : i8 becomes 255 : u8).",
            syntax: "%y = cast %x : from -> to",
            example: "func @widen(%x: tensor<4xi8>) -> tensor<4xi32> {\n  %y = compute (i: 4) reads(%a = %x[i]) -> tensor<4xi32>[i] {\n    %0 = cast %a : i8 -> i32\n    yield %0 : i32\n  }\n  return %y\n}\n".into(),
            place: OpPlace::Scalar,
        },
        OpDecl {
            mnemonic: "index",
            summary: "the current value of an axis or index expression, as a scalar".into(),
            description: INDEX_DESCRIPTION,
            syntax: "%i = index axis : type                  (compute regions)\n%i = index <index expression> : type    (loops)",
            example: "func @iota() -> tensor<4xi32> {\n  %y = compute (i: 4) -> tensor<4xi32>[i] {\n    %0 = index i : i32\n    yield %0 : i32\n  }\n  return %y\n}\n\nfunc @iota_loops() -> tensor<8xi32> {\n  %y = alloc : buffer<8xi32, global>\n  for %i = 0 to 2 {\n    for %p = 0 to 4 {\n      %0 = index %i * 4 + %p : i32\n      store %0, %y[%i * 4 + %p]\n    }\n  }\n  return %y\n}\n".into(),
            place: OpPlace::Scalar,
        },
    ];
    for &u in UnaryOp::ALL {
        decls.push(OpDecl {
            mnemonic: u.mnemonic(),
            summary: format!("unary: {}", u.summary()),
            description: if u.float_only() { "Elementwise on a float scalar; f16 and bf16 compute in f32 and round the result." } else { "Elementwise on a scalar of any element type; integer negation wraps." },
            syntax: "%y = <op> %x : type",
            example: unary_example(u),
            place: OpPlace::Scalar,
        });
    }
    for &b in BinaryOp::ALL {
        decls.push(OpDecl {
            mnemonic: b.mnemonic(),
            summary: format!("binary: {}", b.summary()),
            description: if b.float_only() { "Elementwise on two float scalars of the same type." } else { "Elementwise on two scalars of the same element type." },
            syntax: "%z = <op> %x, %y : type",
            example: binary_example(b),
            place: OpPlace::Scalar,
        });
    }
    decls.extend(loop_op_decls());
    decls
}

fn unary_example(u: UnaryOp) -> String {
    format!("{SCALAR_EXAMPLE_PREFIX}    %0 = {} %a : f32\n    yield %0 : f32\n{SCALAR_EXAMPLE_SUFFIX}", u.mnemonic())
}

fn binary_example(b: BinaryOp) -> String {
    format!("{SCALAR_EXAMPLE_PREFIX}    %0 = {} %a, %b : f32\n    yield %0 : f32\n{SCALAR_EXAMPLE_SUFFIX}", b.mnemonic())
}

/// The declaration of the op spelled `mnemonic`.
pub fn op_decl(mnemonic: &str) -> Option<&'static OpDecl> {
    op_decls().iter().find(|d| d.mnemonic == mnemonic)
}

/// `ir-spec/ops.md`, generated from [`op_decls`].
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "# Tile dialect ops\n\n<!-- Generated from the op declarations in src/ir/ops.rs; do not edit by hand.\n     A test fails when this file is stale: regenerate it with `TILEC_BLESS=1 cargo test`. -->\n\nSee [README.md](README.md) for the grammar and the semantics of reads, padding, folds, schedules and loops.\n\n| op | where | summary |\n|---|---|---|\n",
    );
    let place = |p: OpPlace| match p {
        OpPlace::Function => "function body",
        OpPlace::ComputeRegion => "compute region",
        OpPlace::Loops => "function body, loops",
        OpPlace::Scalar => "compute region, loops",
    };
    for d in op_decls() {
        out.push_str(&format!("| [`{}`](#{}) | {} | {} |\n", d.mnemonic, d.mnemonic, place(d.place), d.summary));
    }
    for d in op_decls() {
        out.push_str(&format!("\n## `{}`\n\n{}\n\n{}\n\nSyntax:\n\n```\n{}\n```\n\nExample:\n\n```\n{}```\n", d.mnemonic, d.summary, d.description, d.syntax, d.example));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn narrow_floats_round_once() {
        // Just above a tie: double rounding through f32 would give 1.0.
        assert_eq!(round_to(ElemType::F16, 1.0004882812500002), 1.0009765625);
        assert_eq!(round_to(ElemType::BF16, 1.0039062500000002), 1.0078125);
        assert_eq!(round_to(ElemType::F16, 65519.999), 65504.0);
        assert_eq!(round_to(ElemType::F16, 65520.0), f64::INFINITY);
        // Exact ties still go to even.
        assert_eq!(round_to(ElemType::F16, 1.00048828125), 1.0);
        assert_eq!(round_to(ElemType::F16, -2.0f64.powi(-25) * 1.5), -(2.0f64.powi(-24)));
    }

    #[test]
    fn op_reference_is_up_to_date() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ir-spec/ops.md");
        crate::golden::check_or_bless(&path, &reference_markdown()).unwrap();
    }

    #[test]
    fn every_scalar_op_has_one_declaration() {
        for u in UnaryOp::ALL {
            assert_eq!(op_decls().iter().filter(|d| d.mnemonic == u.mnemonic()).count(), 1);
        }
        for b in BinaryOp::ALL {
            assert_eq!(op_decls().iter().filter(|d| d.mnemonic == b.mnemonic()).count(), 1);
        }
        let mut names: Vec<_> = op_decls().iter().map(|d| d.mnemonic).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), op_decls().len(), "duplicate op declaration");
    }
}
