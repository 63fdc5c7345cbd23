//! Level 2: the loop-level IR — explicit loops with a mapping to hardware,
//! buffers in memory scopes, loads, stores, copies between scopes, guards
//! and barriers. This is what the scheduling passes produce and what
//! `lower-to-mlir` consumes.
//!
//! Index expressions here are affine in *operands* of the op: an
//! `AffineExpr<Dim>` whose variable `Dim(k)` stands for `operands[k]`, a
//! value of type `index` (a loop induction variable). Keeping the variables
//! among the operands (as MLIR's affine ops do) means use-def utilities
//! (`replace_all_uses`, dominance) see them like any other use.

use super::affine::AffineExpr;
use super::ops::Literal;
use super::schedule::Schedule;
use cranelift_entity::entity_impl;
use std::fmt;

/// An operand position, used as the variable of loop-level index
/// expressions: `Dim(k)` is the op's `operands[k]`.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dim(u32);
entity_impl!(Dim, "d");

/// The lanes of a GPU warp (NVIDIA's warp size): what `lane` loops split.
pub const WARP_LANES: u64 = 32;

/// How the iterations of a loop are executed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Mapping {
    /// One after the other.
    Serial,
    /// Independent iterations spread over CPU cores.
    Parallel,
    /// GPU thread blocks along a grid dimension (0 = x, 1 = y, 2 = z).
    Block(u8),
    /// GPU threads of a block along a dimension; barriers inside the loop
    /// synchronise all its iterations.
    Thread(u8),
    /// Virtual threads: serial, one interleaved sub-tile per iteration
    /// (Gensor's vThread), re-aggregated onto the physical thread.
    VThread,
    /// Serial, to be unrolled by code generation.
    Unroll,
    /// Serial, to be executed as vector lanes by code generation.
    Vector,
    /// The lanes of a GPU warp (`tensorize` makes them for warp
    /// intrinsics): the lane loops directly nested in a thread loop split
    /// the 32 lanes, the outermost most significant, so that each iteration
    /// of the thread loops is one warp. Concurrent like threads: barriers
    /// and cooperative copies count every lane.
    Lane,
}

impl Mapping {
    pub fn name(self) -> String {
        let dim = |d: u8| ["x", "y", "z"].get(d as usize).copied().unwrap_or("?");
        match self {
            Mapping::Serial => "serial".into(),
            Mapping::Parallel => "parallel".into(),
            Mapping::Block(d) => format!("block.{}", dim(d)),
            Mapping::Thread(d) => format!("thread.{}", dim(d)),
            Mapping::VThread => "vthread".into(),
            Mapping::Unroll => "unroll".into(),
            Mapping::Vector => "vector".into(),
            Mapping::Lane => "lane".into(),
        }
    }

    pub fn from_name(s: &str) -> Option<Mapping> {
        let dim = |d: &str| ["x", "y", "z"].iter().position(|&x| x == d).map(|p| p as u8);
        Some(match s {
            "serial" => Mapping::Serial,
            "parallel" => Mapping::Parallel,
            "vthread" => Mapping::VThread,
            "unroll" => Mapping::Unroll,
            "vector" => Mapping::Vector,
            "lane" => Mapping::Lane,
            _ => {
                let (kind, d) = s.split_once('.')?;
                match kind {
                    "block" => Mapping::Block(dim(d)?),
                    "thread" => Mapping::Thread(dim(d)?),
                    _ => return None,
                }
            }
        })
    }

    /// Iterations run as concurrent hardware threads or blocks.
    pub fn is_concurrent(self) -> bool {
        matches!(self, Mapping::Parallel | Mapping::Block(_) | Mapping::Thread(_) | Mapping::Lane)
    }

    /// A GPU thread or warp lane: the loops a block's threads run as.
    pub fn is_gpu_thread(self) -> bool {
        matches!(self, Mapping::Thread(_) | Mapping::Lane)
    }
}

impl fmt::Display for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The level part of a loop tag (`block` in `axis(i.block)`): a tile level
/// of the target, or one of the loops the passes make below the tile
/// levels. Passes match on it; its textual form is defined here alone
/// (`name`, `from_name`), for the printer and the parser.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TagLevel {
    /// The loop of a tile level of the target, by the level's name.
    Tile(String),
    /// The loop over the innermost tile (`point`).
    Point,
    /// A virtual-thread loop split off a point loop (`vthread`).
    VThread,
    /// What is left of a point loop after vectorising it (`vector`).
    Vector,
    /// The loop folding the per-lane partial results of a reduction vector
    /// axis (`lanes`).
    Lanes,
}

impl TagLevel {
    /// The words that name the levels below the tile levels; no tile level
    /// of a target may take one (the target loader rejects it), or its tags
    /// would read as another level's.
    pub const KEYWORDS: [&'static str; 4] = ["point", "vthread", "vector", "lanes"];

    /// The level as tags print it.
    pub fn name(&self) -> &str {
        match self {
            TagLevel::Tile(name) => name,
            TagLevel::Point => "point",
            TagLevel::VThread => "vthread",
            TagLevel::Vector => "vector",
            TagLevel::Lanes => "lanes",
        }
    }

    /// The level a tag names: a keyword, else a tile level of that name.
    pub fn from_name(s: &str) -> TagLevel {
        match s {
            "point" => TagLevel::Point,
            "vthread" => TagLevel::VThread,
            "vector" => TagLevel::Vector,
            "lanes" => TagLevel::Lanes,
            _ => TagLevel::Tile(s.to_string()),
        }
    }

    /// The name of the target's tile level, for a tile level's loop.
    pub fn tile(&self) -> Option<&str> {
        match self {
            TagLevel::Tile(name) => Some(name),
            _ => None,
        }
    }
}

impl fmt::Display for TagLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which axis and tile level a loop came from, so later passes can find
/// the loops a schedule speaks of: `axis(i.block)` for a spatial axis,
/// `reduce(k.block)` for a reduction axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LoopTag {
    pub axis: String,
    pub level: TagLevel,
    pub reduction: bool,
}

impl LoopTag {
    /// The keyword the tag prints with.
    pub fn keyword(&self) -> &'static str {
        if self.reduction { "reduce" } else { "axis" }
    }
}

impl fmt::Display for LoopTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({}.{})", self.keyword(), self.axis, self.level)
    }
}

/// `for %i = 0 to extent map(m) axis(a.l) { ... }`: region 0 is the body,
/// whose one argument is the induction variable (type `index`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForLoop {
    pub extent: u64,
    pub mapping: Mapping,
    pub tag: Option<LoopTag>,
}

/// A load or store: operand 0 (loads) or 1 (stores) is the tensor or
/// buffer; the index expressions range over the remaining operands.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub indices: Vec<AffineExpr<Dim>>,
    /// For loads: the value read outside the source or on an inexact
    /// division, as for compute reads. Stores have none.
    pub pad: Option<Literal>,
    /// The compute read this load came from (for `cache`), by name.
    pub read: Option<String>,
}

/// `copy %src[o...] -> %dst[p...] box [n...]`: for every `e` in the box,
/// `dst[p + e] = src[o + e]` (source elements outside the source read
/// `pad`). With `stride [g...]` the box steps through the source by `g`:
/// `dst[p + e] = src[o + g·e]` (a packed copy of a strided read holds only
/// the elements read, densely).
///
/// With `split [d, f]` box dimension `d` (of size `n_d`, a multiple of `f`)
/// is split into two, `(n_d / f, f)`, and the destination has one
/// dimension more than the box: the *expanded box* has the dimensions
/// `(n_0, .., n_d / f, f, .., n_{r-1})`, numbered in that order, and
/// expanded point `x` copies box point `e` with `e_d = f·x_d + x_{d+1}`
/// (the other dimensions in order, skipping `d + 1`): `dst[p + x] =
/// src[o + g·e]` (VNNI's `[k/4][j][4]` layout, with `permute`).
///
/// With `permute [π...]` (a permutation of the expanded box's dimensions)
/// the destination's dimensions are the expanded box's in the order π:
/// `dst[p_k + x_π(k)] = src[o + g·e]` (a packed copy that puts another
/// dimension innermost). `cooperative`: the box is shared out among the
/// threads of the enclosing thread-mapped loops (each copies a strided
/// part); outside any thread-mapped loop one thread copies all of it.
///
/// Source-side helpers (`stride_of`, `src_extent`) number the box's
/// dimensions; destination-side ones (`box_dim`, `dst_dim`, `dst_sizes`)
/// the expanded box's, which are the box's when there is no split.
#[derive(Clone, Debug, PartialEq)]
pub struct CopyOp {
    pub src: Vec<AffineExpr<Dim>>,
    pub dst: Vec<AffineExpr<Dim>>,
    /// The box's sizes, one per source dimension.
    pub sizes: Vec<u64>,
    /// The source stride of each box dimension; empty: all 1.
    pub stride: Vec<u64>,
    /// The box dimension split in two for the destination, if any.
    pub split: Option<CopySplit>,
    /// The expanded box dimension each destination dimension takes,
    /// outermost first; empty: the expanded box's own order.
    pub permute: Vec<usize>,
    pub pad: Option<Literal>,
    pub cooperative: bool,
}

/// `split [dim, factor]` of a copy: box dimension `dim` becomes the
/// expanded box's dimensions `dim` (`size / factor`, the outer part) and
/// `dim + 1` (`factor`, the inner part).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CopySplit {
    pub dim: usize,
    pub factor: u64,
}

impl CopyOp {
    /// The source stride of box dimension `d`.
    pub fn stride_of(&self, d: usize) -> u64 {
        self.stride.get(d).copied().unwrap_or(1)
    }

    /// The source elements box dimension `d` spans, from the first to the
    /// last it reads (saturating: a stride near 2^64 is still a span the
    /// verifier can compare with the tensor and reject, not an overflow).
    /// A split does not change it.
    pub fn src_extent(&self, d: usize) -> u64 {
        self.sizes.get(d).map_or(1, |&n| self.stride_of(d).saturating_mul(n.saturating_sub(1)).saturating_add(1))
    }

    /// The sizes of the expanded box: the box's, with the split dimension
    /// (if any) as `(size / factor, factor)`. Its length is the
    /// destination's rank.
    pub fn expanded_sizes(&self) -> Vec<u64> {
        let mut sizes = self.sizes.clone();
        if let Some(s) = self.split
            && s.dim < sizes.len()
        {
            let f = s.factor.max(1);
            sizes[s.dim] /= f;
            sizes.insert(s.dim + 1, f);
        }
        sizes
    }

    /// The expanded box's rank (the destination's): the box's, plus one
    /// with a split.
    pub fn expanded_rank(&self) -> usize {
        self.sizes.len() + usize::from(self.split.is_some())
    }

    /// The box dimension expanded box dimension `x` comes from (both parts
    /// of a split dimension come from it).
    pub fn source_dim(&self, x: usize) -> usize {
        match self.split {
            Some(s) if x > s.dim => x - 1,
            _ => x,
        }
    }

    /// The box point of expanded box point `x`: `e_d = f·x_d + x_{d+1}` for
    /// the split dimension, the others as they are.
    pub fn box_point(&self, x: &[i64]) -> Vec<i64> {
        match self.split {
            None => x.to_vec(),
            Some(s) => (0..self.sizes.len())
                .map(|d| match d.cmp(&s.dim) {
                    std::cmp::Ordering::Less => x.get(d).copied().unwrap_or(0),
                    std::cmp::Ordering::Equal => s.factor as i64 * x.get(d).copied().unwrap_or(0) + x.get(d + 1).copied().unwrap_or(0),
                    std::cmp::Ordering::Greater => x.get(d + 1).copied().unwrap_or(0),
                })
                .collect(),
        }
    }

    /// The expanded box dimension destination dimension `k` takes.
    pub fn box_dim(&self, k: usize) -> usize {
        self.permute.get(k).copied().unwrap_or(k)
    }

    /// The destination dimension expanded box dimension `x` lands in
    /// (without a split, `x` is a box dimension; with one, see
    /// [`CopyOp::source_dim`]).
    pub fn dst_dim(&self, x: usize) -> usize {
        self.permute.iter().position(|&p| p == x).unwrap_or(x)
    }

    /// The expanded box's sizes in destination order.
    pub fn dst_sizes(&self) -> Vec<u64> {
        let expanded = self.expanded_sizes();
        (0..expanded.len()).map(|k| expanded.get(self.box_dim(k)).copied().unwrap_or(1)).collect()
    }
}

/// `if e0 < b0, e1 < b1 { ... }`: runs its region where every condition
/// holds (guards for partial tiles).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    pub conds: Vec<(AffineExpr<Dim>, i64)>,
}

/// `kernel "label" schedule "target" {...} { ... }`: the loop nest made from
/// one compute op, with the schedule it was made from (the later scheduling
/// passes read it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub label: Option<String>,
    pub schedule: Schedule,
    /// `kernel "label" prepack schedule ...`: a kernel that only lays out
    /// constants (a network's weights) for the kernels after it (made by
    /// the `prepack` pass). It runs like any kernel; a runtime may run it
    /// once per set of weights, so its time is not the function's.
    pub prepack: bool,
}

/// What an `intrinsic` op computes (its text: `fma`, `dot`, `mma`,
/// `wmma`), as the target's `[[intrinsics]]` kinds. Every kind computes
/// `acc[m, n] += Σ_k a[m, k] · b[k, n]` over its `m × n × k` tile; they
/// differ in how the sum is rounded (the interpreter gives each its
/// hardware's order, `interp::machine`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum IntrinsicKind {
    /// One vector FMA: `k = 1`, rounded once (`vfmadd231ps`).
    Fma,
    /// One vector dot product: each lane adds `k` products (`vpdpbusd`,
    /// `vdpbf16ps`).
    Dot,
    /// A warp's matrix instruction (`mma.sync`).
    Mma,
    /// A warp's matrix instruction through WMMA fragments.
    Wmma,
}

impl IntrinsicKind {
    pub const ALL: [IntrinsicKind; 4] = [IntrinsicKind::Fma, IntrinsicKind::Dot, IntrinsicKind::Mma, IntrinsicKind::Wmma];

    pub fn name(self) -> &'static str {
        match self {
            IntrinsicKind::Fma => "fma",
            IntrinsicKind::Dot => "dot",
            IntrinsicKind::Mma => "mma",
            IntrinsicKind::Wmma => "wmma",
        }
    }

    pub fn from_name(s: &str) -> Option<IntrinsicKind> {
        IntrinsicKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// One vector instruction of a CPU (`a` and `acc` in lanes along `m`,
    /// `b` broadcast, `n = 1`).
    pub fn is_vector(self) -> bool {
        matches!(self, IntrinsicKind::Fma | IntrinsicKind::Dot)
    }
}

impl fmt::Display for IntrinsicKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One operand of an `intrinsic` op: the element at intrinsic point
/// `(m, n, k)` is at `indices + m·steps[0] + n·steps[1] + k·steps[2]`
/// (dimension by dimension). Its text is the index expressions with the
/// intrinsic's axes as the variables `m`, `n`, `k`: `%acc[%i, %j * 8 + m]`.
///
/// An axis fused from several op axes (AMOS's "complex" mapping: a
/// convolution's `oh · ow` on `m`) has several *parts* (the call's
/// [`IntrinsicCall::parts`]): the point along it is their mixed-radix
/// number, outermost part first, and each part steps the indices on its
/// own. Its text names the parts `m0`, `m1`, ...: `%x[%c, %oh + m0, %ow + m1]`.
#[derive(Clone, Debug, PartialEq)]
pub struct TileOperand {
    /// The element at `(0, 0, 0)`, over the op's index operands.
    pub indices: Vec<AffineExpr<Dim>>,
    /// Per intrinsic axis (`m`, `n`, `k`), per part of it (one for an axis
    /// one op axis maps onto), per dimension: how far one step along the
    /// part moves.
    pub steps: [Vec<Vec<i64>>; 3],
    /// The value read outside the source, as a load's (`a` and `b` only).
    pub pad: Option<Literal>,
    /// The compute read the operand came from, by name, as a load's
    /// (`a` and `b`: the kernel's `cache` directives name them).
    pub read: Option<String>,
}

impl TileOperand {
    /// Index of dimension `d` at intrinsic point `p = (m, n, k)`, as an
    /// offset from the origin; `parts` are the call's. Each axis' point is
    /// taken apart into its parts' digits, innermost first; the outermost
    /// part takes the rest (a single part is the point itself, also past
    /// its extent, as a warp fragment's rows are).
    pub fn offset(&self, parts: &[Vec<u64>; 3], d: usize, p: [i64; 3]) -> i64 {
        (0..3)
            .map(|x| {
                let mut rest = p[x];
                let mut sum = 0;
                for (i, (steps, &e)) in self.steps[x].iter().zip(&parts[x]).enumerate().rev() {
                    let radix = e.max(1) as i64;
                    let digit = if i == 0 { rest } else { rest.rem_euclid(radix) };
                    rest = rest.div_euclid(radix);
                    sum += steps.get(d).copied().unwrap_or(0) * digit;
                }
                sum
            })
            .sum()
    }

    /// The steps of axis `x`, per dimension, where one op axis maps onto
    /// it (one part); `None` for a fused axis.
    pub fn axis_steps(&self, x: usize) -> Option<&[i64]> {
        match self.steps[x].as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }
}

/// `intrinsic "vpdpbusd.ymm" dot [8, 1, 4] %acc[...] += %a[...] * %b[...]`:
/// one tensor-intrinsic call over an `m × n × k` tile, made by `tensorize`.
/// Operands: the accumulator buffer, the `a` and `b` sources, then the
/// index values the operands' index expressions range over.
#[derive(Clone, Debug, PartialEq)]
pub struct IntrinsicCall {
    /// The target's name for the intrinsic (`tilec --list-targets -v`).
    pub name: String,
    pub kind: IntrinsicKind,
    /// `m`, `n`, `k`.
    pub shape: [u64; 3],
    /// Per axis, the extents of its parts, outermost first, whose product
    /// is its size: `[size]` where one op axis maps onto it, several for
    /// a fused mapping (see [`TileOperand`]).
    pub parts: [Vec<u64>; 3],
    pub acc: TileOperand,
    pub a: TileOperand,
    pub b: TileOperand,
    /// A warp intrinsic computed by the lanes of a warp (`lane(%g, %t)`,
    /// the text after `reads`): the lane's group `g` (0..8) and its index
    /// `t` in the group (0..4), lane = 4·g + t. The accumulator is then
    /// the lane's *fragment*: its `m` and `n` run over 2 × 2 elements, the
    /// tile's rows `g + 8·m` and columns `2·t + n` (PTX's layout of an
    /// m16n8 accumulator), while `a` and `b` address the whole tile in
    /// memory. `None`: every operand is the whole tile.
    pub lane: Option<[AffineExpr<Dim>; 2]>,
}

impl IntrinsicCall {
    /// Rows and columns of the warp tile that lane `(g, t)` holds in its
    /// fragment element `(fm, fn)` (`lane` above).
    pub fn fragment_point(g: i64, t: i64, fm: i64, fn_: i64) -> (i64, i64) {
        (g + 8 * fm, 2 * t + fn_)
    }

    /// The extent of the accumulator's `m` and `n` axes: the whole tile's,
    /// or the 2 × 2 of a lane's fragment.
    pub fn acc_shape(&self) -> [u64; 2] {
        if self.lane.is_some() { [2, 2] } else { [self.shape[0], self.shape[1]] }
    }

    /// Does an axis have several parts (a fused mapping)?
    pub fn is_fused(&self) -> bool {
        self.parts.iter().any(|p| p.len() > 1)
    }

    /// Index of dimension `d` of operand `t` at point `p`, from its origin.
    pub fn offset(&self, t: &TileOperand, d: usize, p: [i64; 3]) -> i64 {
        t.offset(&self.parts, d, p)
    }

    /// The operands in operand order: `acc`, `a`, `b`.
    pub fn tiles(&self) -> [&TileOperand; 3] {
        [&self.acc, &self.a, &self.b]
    }

    pub fn tiles_mut(&mut self) -> [&mut TileOperand; 3] {
        [&mut self.acc, &mut self.a, &mut self.b]
    }
}
