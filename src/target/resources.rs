//! The resource and footprint model of one compute op on one target: what
//! a tile of each tile level holds, what one tile may hold, GPU threads and
//! registers, vector lanes.
//!
//! The verifier's resource check (`check.rs`, whose module documentation
//! gives the definitions) and the search's model
//! (`tilec_passes::search::space`) both count with [`OpResources`], so a
//! point the search accepts is a schedule the verifier accepts. Tile sizes
//! come in through closures (`t(axis)` for one tile's ranges, `size(axis,
//! level)` for raw sizes): the check reads them from a [`Schedule`], the
//! search from its own points, without building one.
//!
//! [`Schedule`]: crate::ir::Schedule

use super::{Binding, MemoryLevel, Per, Target};
use crate::ir::affine::AffineExpr;
use crate::ir::{AxisId, AxisKind, Compute, ElemType, TensorType};

use super::check::ComputeInfo;

/// Registers assumed for indices, addresses and loop counters in the
/// per-thread register estimate.
pub const INDEX_REGISTERS: u64 = 16;

/// How many distinct values affine index `e` takes over a tile whose axes
/// range over `0..t(axis)`, at most `dim` (the tensor's extent along that
/// dimension), at least 1: the lesser of the points of the axes it uses and
/// the width of its range over the divisor. A read's footprint is the
/// product of this over its indices.
///
/// The search asks this millions of times, so it asks `t` once per axis
/// and divides only by a divisor other than 1.
#[inline]
pub fn distinct_values<F: Fn(AxisId) -> u64 + ?Sized>(e: &AffineExpr<AxisId>, t: &F, dim: u64) -> u64 {
    // Most indices are one axis with coefficient ±1 and no divisor: the
    // axis' points (the range below caps its width at `i64::MAX`).
    if let [(v, c)] = e.terms()
        && c.unsigned_abs() == 1
        && e.divisor() == 1
        && e.constant_term() == 0
    {
        return t(*v).min(i64::MAX as u64).min(dim).max(1);
    }
    // The range's callback sees every axis once, so it multiplies the
    // points too; only where the range overflows (and stops early) are
    // they counted again.
    let mut points = 1u64;
    let range = e.numerator_range(|v| {
        let n = t(v);
        points = points.saturating_mul(n);
        (0, n.min(i64::MAX as u64) as i64 - 1)
    });
    if range.is_none() {
        points = e.vars().fold(1u64, |p, v| p.saturating_mul(t(v)));
    }
    let by_range = match range {
        Some((lo, hi)) => {
            let width = (hi as i128 - lo as i128 + 1) as u128;
            let d = e.divisor().max(1) as u128;
            let values = if d == 1 { width } else { width.div_ceil(d) };
            values.min(u64::MAX as u128) as u64
        }
        None => u64::MAX,
    };
    by_range.min(points).min(dim).max(1)
}

/// Bytes an access with `indices` into a tensor of type `ty` touches over
/// a tile with ranges `t`: the distinct values of each index, multiplied.
#[inline]
fn access_bytes<F: Fn(AxisId) -> u64 + ?Sized>(indices: &[AffineExpr<AxisId>], ty: &TensorType, t: &F) -> u64 {
    let elems = indices.iter().enumerate().fold(1u64, |p, (d, e)| p.saturating_mul(distinct_values(e, t, ty.shape.get(d).copied().unwrap_or(1))));
    elems.saturating_mul(ty.elem.size_bytes())
}

/// Does `compute` touch each element its read `r` (body reads, then
/// epilogue reads) of `tensor` reads once: as many distinct elements as
/// iteration points (for an epilogue read, output points)? The definition
/// of [`OpResources::streamed`], kept in [`ReadInfo`](super::check::ReadInfo).
pub fn touches_each_once(compute: &Compute, r: usize, tensor: &TensorType) -> bool {
    let Some((_, read)) = compute.all_reads().nth(r) else { return false };
    let extent = |a: AxisId| compute.axis(a).extent.max(1);
    let body = r < compute.reads.len();
    let points = if body { compute.axis_ids().fold(1u64, |p, a| p.saturating_mul(extent(a))) } else { compute.spatial_axes().fold(1u64, |p, a| p.saturating_mul(extent(a))) };
    let bytes = access_bytes(&read.indices, tensor, &extent);
    bytes > 0 && bytes / tensor.elem.size_bytes().max(1) >= points
}

/// One item a footprint counts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FootprintPart {
    /// Read `r` (body reads, then epilogue reads).
    Read(usize),
    /// The output tile (hardware caches).
    Output,
    /// One accumulator per spatial point (the innermost tile level's own
    /// managed memory: GPU registers).
    Accumulator,
}

/// What one tile of a tile level may hold in a memory level.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub bytes: u64,
    /// The units (cores, SMs) that share a per-device memory, when the
    /// tiles running at once split it.
    pub shared_by: Option<u64>,
}

/// A GPU block's threads: their number and the tile levels that make them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BlockThreads {
    pub threads: u64,
    /// The `grid` tile level (one block's tile) and the `threads` level
    /// (one thread's).
    pub grid_level: usize,
    pub thread_level: usize,
}

/// The widest element vector lanes along an axis carry, and who carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneElement {
    pub bits: u64,
    pub ty: ElemType,
    pub who: String,
}

/// The model for compute op `compute` (with `info`) on `target`.
#[derive(Copy, Clone)]
pub struct OpResources<'a> {
    pub compute: &'a Compute,
    pub info: &'a ComputeInfo,
    pub target: &'a Target,
}

impl<'a> OpResources<'a> {
    pub fn new(compute: &'a Compute, info: &'a ComputeInfo, target: &'a Target) -> Self {
        OpResources { compute, info, target }
    }

    /// The reads both the op and its information know (they agree on a
    /// well-formed op).
    pub fn reads(&self) -> usize {
        self.info.reads.len().min(self.compute.reads.len() + self.compute.epilogue_reads.len())
    }

    /// `t(a)` at `level` for a raw tile size `size`: the values axis `a`
    /// ranges over in one tile (a reduction axis covers its extent where
    /// the loop order has no reduction loops at `level`).
    #[inline]
    pub fn range(&self, a: AxisId, level: usize, size: u64) -> u64 {
        let decl = self.compute.axis(a);
        if decl.kind == AxisKind::Reduction && !self.target.has_reduction_loops(level) {
            return decl.extent.max(1);
        }
        size.min(decl.extent).max(1)
    }

    /// Bytes read `r` touches over a tile with ranges `t`.
    pub fn read_bytes<F: Fn(AxisId) -> u64 + ?Sized>(&self, r: usize, t: &F) -> u64 {
        let (Some((_, read)), Some(info)) = (self.compute.all_reads().nth(r), self.info.reads.get(r)) else { return 0 };
        access_bytes(&read.indices, &info.tensor, t)
    }

    /// Bytes of the output tile over a tile with ranges `t`.
    pub fn output_bytes<F: Fn(AxisId) -> u64 + ?Sized>(&self, t: &F) -> u64 {
        access_bytes(&self.compute.output, &self.info.output, t)
    }

    /// Bytes of the accumulators of a tile with ranges `t`: one per spatial
    /// point.
    pub fn accumulator_bytes<F: Fn(AxisId) -> u64 + ?Sized>(&self, t: &F) -> u64 {
        self.compute.spatial_axes().fold(1u64, |p, a| p.saturating_mul(t(a))).saturating_mul(self.info.acc.size_bytes())
    }

    /// Bytes of one footprint part over a tile with ranges `t` computed
    /// by `lanes` hardware threads: a warp intrinsic's lanes each hold a
    /// fragment of the accumulators (1: one thread holds them all).
    pub fn part_bytes<F: Fn(AxisId) -> u64 + ?Sized>(&self, part: FootprintPart, t: &F, lanes: u64) -> u64 {
        match part {
            FootprintPart::Read(r) => self.read_bytes(r, t),
            FootprintPart::Output => self.output_bytes(t),
            FootprintPart::Accumulator => self.accumulator_bytes(t).div_ceil(lanes.max(1)),
        }
    }

    /// Is read `r` streamed: does the op touch each of its elements once
    /// (as many distinct elements as iteration points; for an epilogue
    /// read, output points)? A hardware cache does not hold it
    /// ([`OpResources::footprint_parts`]).
    pub fn streamed(&self, r: usize) -> bool {
        self.info.reads.get(r).is_some_and(|i| i.streamed)
    }

    /// The parts of the footprint in memory `m` of a tile of `level`, in
    /// order, where `cached(r)` says whether the schedule stages read `r`
    /// in `m`: in a hardware cache every read but the streamed ones
    /// ([`OpResources::streamed`]) and the output tile; in a
    /// managed memory the staged reads, plus the accumulators when `m` is
    /// the innermost tile level's own memory. (`m` need not be `level`'s
    /// memory: the reads staged in a managed memory no tile level uses
    /// count over the innermost tile.)
    pub fn footprint_parts(&self, level: usize, m: &MemoryLevel, cached: &dyn Fn(usize) -> bool, each: &mut dyn FnMut(FootprintPart)) {
        let reads = self.reads();
        if m.managed {
            (0..reads).filter(|&r| cached(r)).for_each(|r| each(FootprintPart::Read(r)));
            let levels = &self.target.tile_levels;
            if level + 1 == levels.len() && levels[level].memory == m.name {
                each(FootprintPart::Accumulator);
            }
        } else {
            (0..reads).filter(|&r| !self.streamed(r)).for_each(|r| each(FootprintPart::Read(r)));
            each(FootprintPart::Output);
        }
    }

    /// The footprint's total bytes (see [`OpResources::footprint_parts`]
    /// and, for `lanes`, [`OpResources::part_bytes`]).
    pub fn footprint<F: Fn(AxisId) -> u64 + ?Sized>(&self, level: usize, m: &MemoryLevel, cached: &dyn Fn(usize) -> bool, t: &F, lanes: u64) -> u64 {
        let mut total = 0u64;
        self.footprint_parts(level, m, cached, &mut |p| total = total.saturating_add(self.part_bytes(p, t, lanes)));
        total
    }

    /// What one tile of `level` gets of memory `m`: its capacity, or, for a
    /// per-device memory used by tiles that run at once (at or inside a
    /// `parallel`/`grid` level), its share per core or SM.
    pub fn capacity(&self, level: usize, m: &MemoryLevel) -> Capacity {
        let t = self.target;
        let parallel = t.tile_levels[..=level].iter().any(|l| matches!(l.binding, Binding::Parallel | Binding::Grid));
        if m.per == Per::Device && parallel && t.compute.units > 1 {
            let units = t.compute.units as u64;
            Capacity { bytes: m.capacity_bytes / units, shared_by: Some(units) }
        } else {
            Capacity { bytes: m.capacity_bytes, shared_by: None }
        }
    }

    /// The `grid` tile level (one block's tile) and the `threads` level
    /// (one thread's), on targets that have both.
    pub fn block_levels(&self) -> Option<(usize, usize)> {
        let levels = &self.target.tile_levels;
        Some((levels.iter().position(|l| l.binding == Binding::Grid)?, levels.iter().position(|l| l.binding == Binding::Threads)?))
    }

    /// The threads of a block whose tiles at the `grid` and `threads`
    /// levels have raw sizes `size(axis, level)`: the product over spatial
    /// axes of the one over the other.
    #[inline]
    pub fn threads_between(&self, grid_level: usize, thread_level: usize, size: &dyn Fn(AxisId, usize) -> u64) -> u64 {
        self.compute.spatial_axes().fold(1u64, |p, a| p.saturating_mul(size(a, grid_level).div_ceil(size(a, thread_level).max(1))))
    }

    /// A GPU block's threads (see [`OpResources::threads_between`]);
    /// `None` on targets without both levels.
    pub fn block_threads(&self, size: &dyn Fn(AxisId, usize) -> u64) -> Option<BlockThreads> {
        let (grid_level, thread_level) = self.block_levels()?;
        Some(BlockThreads { threads: self.threads_between(grid_level, thread_level, size), grid_level, thread_level })
    }

    /// The per-thread register estimate of a GPU tile with ranges `t` at
    /// the innermost level computed by `lanes` hardware threads each, part
    /// by part (32-bit registers): accumulators (a warp intrinsic's lane
    /// holds its fragment), the reads `cached` in registers, one per other
    /// read, and [`INDEX_REGISTERS`] for indexing.
    pub fn register_parts(&self, cached: &[usize], t: &dyn Fn(AxisId) -> u64, lanes: u64) -> Vec<(String, u64)> {
        let words = |bytes: u64| bytes.div_ceil(4);
        let accumulator = if lanes > 1 { format!("accumulator fragment (1/{lanes})") } else { "accumulator".into() };
        let mut parts: Vec<(String, u64)> = vec![(accumulator, words(self.part_bytes(FootprintPart::Accumulator, t, lanes)))];
        for &r in cached {
            parts.push((self.read_name(r), words(self.read_bytes(r, t))));
        }
        let others = (self.info.reads.len() as u64).saturating_sub(cached.len() as u64);
        if others > 0 {
            parts.push(("other reads".into(), others));
        }
        parts.push(("indexing (assumed)".into(), INDEX_REGISTERS));
        parts
    }

    /// A name for read `r` in messages (`%a`).
    pub fn read_name(&self, r: usize) -> String {
        self.info.reads.get(r).map_or_else(|| format!("read {r}"), |i| i.name.clone())
    }

    /// The widest element vector lanes along axis `a` carry: the
    /// accumulator (along a reduction axis each lane accumulates its own
    /// partial result), the output along a spatial axis, and every read
    /// indexed by `a`.
    pub fn lane_element(&self, a: AxisId) -> LaneElement {
        let mut widest = LaneElement { bits: self.info.acc.size_bytes() * 8, ty: self.info.acc, who: "the accumulator".into() };
        let mut consider = |ty: ElemType, who: &dyn Fn() -> String| {
            let bits = ty.size_bytes() * 8;
            if bits > widest.bits {
                widest = LaneElement { bits, ty, who: who() };
            }
        };
        if self.compute.axis(a).kind == AxisKind::Spatial {
            consider(self.info.output.elem, &|| "the output".into());
        }
        for (i, r) in self.compute.all_reads() {
            if let Some(ri) = self.info.reads.get(i).filter(|_| r.indices.iter().any(|e| e.uses(a))) {
                consider(ri.tensor.elem, &|| ri.name.clone());
            }
        }
        widest
    }

    /// The lanes of a vector register along axis `a` (1 without vectors).
    pub fn lanes(&self, a: AxisId) -> u64 {
        match self.target.isa.vector_bits as u64 {
            0 => 1,
            bits => (bits / self.lane_element(a).bits.max(8)).max(1),
        }
    }
}
