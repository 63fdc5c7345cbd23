//! The typed schedule plan: a schedule of one compute op read against its
//! target once, with axes as [`AxisId`]s, memory levels as [`MemoryId`]s
//! and tile levels by index.
//!
//! A [`Schedule`] is the schedule as the IR prints it: keyed by axis and
//! memory-level names, with only what the author wrote. The plan is what the
//! code that computes with a schedule reads: the resource check
//! (`check.rs`), the `tile` pass (the loop nest) and the search (whose
//! points become plans, checked without a detour through a `Schedule`, and
//! schedules only for output). Records keep `RecordSchedule`, a serializable
//! copy of the `Schedule`, because they are read without the op at hand.

use super::Target;
use crate::ir::{AxisId, CacheDirective, Compute, EntityRef, Schedule};

/// A memory level of a target: its position in [`Target::memory`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemoryId(pub usize);

/// One schedule of one compute op on one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulePlan {
    /// Per axis (by [`AxisId`] index), one tile size per tile level of the
    /// target, outermost first. An axis the schedule does not tile spans
    /// its extent at every level.
    pub sizes: Vec<Vec<u64>>,
    /// Per axis, its virtual threads (1: none).
    pub vthreads: Vec<u64>,
    /// Per read (body reads, then epilogue reads), the memory level the
    /// schedule stages it in.
    pub staged: Vec<Option<MemoryId>>,
    /// Unroll innermost loops of at most this many steps (0: none).
    pub unroll: u64,
    /// The axis whose innermost loop runs on vector lanes, and the width.
    pub vector: Option<(AxisId, u64)>,
    /// Per axis, its place in the loop order within each tile level,
    /// outermost 0 (a permutation of the axes).
    pub ranks: Vec<usize>,
    /// Lanes per thread-level tile: [`WARP_LANES`](crate::ir::WARP_LANES)
    /// where a warp intrinsic (`mma`) computes it, whose accumulator the
    /// lanes share as fragments; else 1.
    pub lanes: u64,
}

impl SchedulePlan {
    /// The plan of schedule `s` of compute op `c` on target `t`. It reads
    /// what the verifier's structural rules allow and leaves out what they
    /// reject (they report it): an unknown axis, a tile list of the wrong
    /// length (the axis counts as untiled), a directive for an unknown read
    /// or memory level.
    pub fn new(c: &Compute, s: &Schedule, t: &Target) -> SchedulePlan {
        let levels = t.tile_levels.len();
        let sizes = c.axes.iter().map(|a| s.tiles_of(&a.name).filter(|sizes| sizes.len() == levels).map_or_else(|| vec![a.extent; levels], <[u64]>::to_vec)).collect();
        let vthreads = c.axes.iter().map(|a| s.vthreads_of(&a.name)).collect();
        let reads = c.reads.len() + c.epilogue_reads.len();
        let mut staged = vec![None; reads];
        for d in &s.cache {
            if let (Some(slot), Some(m)) = (staged.get_mut(d.read), t.memory_index(&d.level)) {
                *slot = Some(MemoryId(m));
            }
        }
        let vector = s.vector.as_ref().and_then(|(name, w)| Some((c.axis_by_name(name)?, *w)));
        let ranks = s.axis_ranks(c.axes.iter().map(|a| a.name.as_str()));
        let warp = s.intrinsic.as_ref().and_then(|x| t.intrinsics.iter().find(|i| i.name == x.name)).is_some_and(|i| !i.is_vector());
        let lanes = if warp { crate::ir::WARP_LANES } else { 1 };
        SchedulePlan { sizes, vthreads, staged, unroll: s.unroll, vector, ranks, lanes }
    }

    /// The tile size of axis `a` at tile level `level`.
    pub fn size(&self, a: AxisId, level: usize) -> u64 {
        self.sizes[a.index()][level]
    }

    /// The reads staged in memory level `m`, in read order.
    pub fn staged_in(&self, m: MemoryId) -> impl Iterator<Item = usize> + '_ {
        self.staged.iter().enumerate().filter(move |(_, s)| **s == Some(m)).map(|(r, _)| r)
    }

    /// The axes in loop order, outermost first.
    pub fn loop_order(&self) -> Vec<usize> {
        let mut axes: Vec<usize> = (0..self.ranks.len()).collect();
        axes.sort_by_key(|&a| self.ranks[a]);
        axes
    }

    /// The schedule this plan is, for target `t`, naming read `r`
    /// `read_name(r)` (without `%`): every axis' sizes, the virtual threads
    /// above 1, the staged reads in read order, and a loop order only where
    /// the axes that make loops (extent above 1) are not in declaration
    /// order.
    pub fn to_schedule(&self, c: &Compute, t: &Target, read_name: &dyn Fn(usize) -> String) -> Schedule {
        let mut s = Schedule::new(t.name.clone());
        for (a, axis) in c.axes.iter().enumerate() {
            s.tiles.push((axis.name.clone(), self.sizes[a].clone()));
            if self.vthreads[a] > 1 {
                s.vthreads.push((axis.name.clone(), self.vthreads[a]));
            }
        }
        for (r, m) in self.staged.iter().enumerate() {
            if let Some(m) = m {
                s.cache.push(CacheDirective { read: r, read_name: read_name(r), level: t.memory[m.0].name.clone() });
            }
        }
        s.unroll = self.unroll;
        s.vector = self.vector.map(|(a, w)| (c.axis(a).name.clone(), w));
        let looping: Vec<usize> = self.loop_order().into_iter().filter(|&a| c.axes[a].extent > 1).collect();
        if looping.windows(2).any(|w| w[0] > w[1]) {
            s.order = looping.iter().map(|&a| c.axes[a].name.clone()).collect();
        }
        s
    }
}
