//! The analytic cost model (Roller's and Gensor's roofline, with our CPU
//! micro-kernel and cache-conflict terms): how long the schedule of a
//! point of the space runs, predicted from the target's numbers. The
//! space itself (its points, their sizes and footprints) is `space.rs`;
//! this file is the model `AnalyticModel` (`model.rs`) puts behind the
//! `CostModel` trait, and the model-driven choices the strategies share
//! (the best loop order and packing of a point).
//!
//! Definitions (`docs/search.md`): the **traffic** `Q(T, l)` is the bytes
//! moved into tiles of level `l` over the whole op: the number of spatial
//! tiles times each read's tile with the reduction axes at their full
//! extent, plus the output. The **prediction** is a roofline: the larger
//! of the compute time (peak throughput, scaled by how evenly the
//! outermost tiles fill the cores or SMs, by vector-lane use on CPUs and
//! warp use on GPUs) and, per tile level, its traffic over the bandwidth
//! of the memory it is filled from.

use super::space::{Axis, Config, Problem, gcd};
use crate::nest::OrderEntry;
use tilec::ir::affine::AffineExpr;
use tilec::ir::*;
use tilec::target::{Binding, MemoryLevel, Per, Target, TargetKind, distinct_values};

/// The source stride a packed copy takes along an index: the common
/// divisor of the coefficients of the axes that vary (a strided
/// convolution's `2·oh + r` with `r` of extent 1 is packed every second
/// element, densely; the `cache` pass does the same with the loops inside
/// the copy, which may be fewer).
pub(super) struct PackedStrides<'a> {
    axes: &'a [Axis],
}

impl PackedStrides<'_> {
    fn of(&self, e: &AffineExpr<AxisId>) -> i64 {
        e.terms().iter().filter(|&&(a, _)| self.axes.get(a.index()).is_some_and(|axis| axis.extent > 1)).fold(0, |g, &(_, c)| tilec::ir::affine::gcd(g, c)).max(1)
    }
}

/// The span a hardware prefetcher watches: x86 cores' L1 and L2
/// prefetchers do not follow an access stream into another 4 KiB page
/// (Intel's and AMD's optimisation manuals), whatever the page size.
pub const PREFETCH_WINDOW_BYTES: u64 = 4096;

/// The speed of a GPU block whose registers spill, relative to the share
/// of them the register file holds (`Problem::register_file_share`):
/// spilled accumulators make every `mma` a round trip to local memory. One
/// measurement so far (an H200, 2026-11-28, f16 `mma` GEMM 4096^3): 16
/// warps of 64 x 64 (128 accumulator registers a lane, the estimate 9%
/// over the file) ran at 14.5 TFLOP/s, 8 warps of the same tiles within
/// it at 61-71, so 0.2-0.24. That kernel also had its `mma` loops rolled
/// (an unroll limit of 16), which alone puts the fragments in local
/// memory, so the figure mixes both causes.
const SPILLED_SHARE: f64 = 0.2;

/// Do `rows` runs, `stride` bytes apart, evict each other from cache `m`
/// (hardware-managed, with its `ways` known)? Rows whose starts share
/// cache sets compete for the set's ways, so only `ways × (set span /
/// gcd(stride, set span))` of them stay.
fn evict_each_other(m: &MemoryLevel, rows: u64, stride: u64) -> bool {
    let span = if m.ways == 0 { 0 } else { m.capacity_bytes / m.ways as u64 };
    span > 0 && rows > m.ways as u64 * (span / gcd(stride, span))
}

/// The seconds filling a tile level with `q` bytes takes
/// ([`Problem::fill_rate`]): at least `floor` (the op's bytes crossing
/// once), else `q` at `bandwidth`.
#[derive(Copy, Clone, Debug)]
struct FillRate {
    floor: f64,
    bandwidth: f64,
}

impl FillRate {
    fn seconds(&self, q: f64) -> f64 {
        self.floor.max(q / self.bandwidth)
    }
}

/// The seconds packed copies moving a number of bytes take
/// ([`Problem::copy_rate`]).
#[derive(Copy, Clone, Debug)]
struct CopyRate {
    from_bandwidth: f64,
    to_bandwidth: f64,
    elem_bytes: f64,
    cycles_per_element: f64,
    cycles_per_second: f64,
}

impl CopyRate {
    /// A level without a memory: no copies.
    const FREE: CopyRate = CopyRate { from_bandwidth: f64::INFINITY, to_bandwidth: f64::INFINITY, elem_bytes: 1.0, cycles_per_element: 0.0, cycles_per_second: 1.0 };

    fn seconds(&self, bytes: f64) -> f64 {
        let mut seconds = bytes / self.from_bandwidth + bytes / self.to_bandwidth;
        if self.cycles_per_element > 0.0 {
            seconds += bytes / self.elem_bytes * self.cycles_per_element / self.cycles_per_second;
        }
        seconds
    }
}

/// The misses of one read's fresh tiles, per tile level
/// ([`Problem::fresh_misses`]).
struct FreshMisses {
    /// Per tile level (outermost first; `None`: the level has no memory):
    /// its misses' cap and the latency of the memory serving them.
    levels: Vec<Option<MissLevel>>,
    /// Misses waited on at a time: per core times the cores at work.
    in_flight: f64,
}

struct MissLevel {
    /// The level misses at most this many bytes (the read's, where it holds
    /// them all; else no cap).
    at_most: f64,
    line_bytes: f64,
    latency_ns: f64,
}

impl FreshMisses {
    /// The seconds waited, given the fresh bytes of each level.
    fn seconds(&self, fresh: impl Fn(usize) -> f64) -> f64 {
        let (mut outer, mut seconds) = (0.0f64, 0.0);
        for (level, m) in self.levels.iter().enumerate() {
            let Some(m) = m else { continue };
            let misses = fresh(level).min(m.at_most).max(outer);
            seconds += (misses - outer) / m.line_bytes * m.latency_ns * 1e-9;
            outer = misses;
        }
        seconds / self.in_flight
    }
}

/// What holds a read's tile between the tiles of its level that use it:
/// its packed copy, which the `cache` pass never hoists out of a parallel
/// loop (each core packs its own), or the hardware cache, which keeps it
/// across consecutive iterations of one too (each thread runs its range of
/// the parallel iterations in order, docs/codegen.md).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Holder {
    Copy,
    Cache,
}

/// How the register-tile loads of a read whose reduction steps are a
/// prefetch window apart or more miss ([`Problem::page_steps`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PageSteps {
    /// Its steps are closer, or it is streamed, or packed and kept.
    Never,
    /// On every load: the rows one reduction run walks evict each other
    /// from the innermost tile's cache before the next register tile comes
    /// back to them (more rows than the cache's ways hold at their stride,
    /// as in [`Problem::conflicts`]).
    EveryLoad,
    /// Unpacked, with its rows kept: where the loop order brings a tile in
    /// afresh, each of its lines misses.
    FreshTiles,
}

/// One entry of the target's loop order as a packed copy sees it
/// ([`Problem::entry_copies`]): the product of its loops' trips up to the
/// last loop the copy stays in (`kept`: there is one), and of all of them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
struct EntryCopies {
    kept: bool,
    prefix: u64,
    full: u64,
}

impl EntryCopies {
    /// Over the entry's loops in order: each one's trips, and whether the
    /// copy stays inside it ([`Problem::copy_loop`]).
    fn over(loops: impl Iterator<Item = (u64, bool)>) -> Self {
        let mut e = EntryCopies { kept: false, prefix: 1, full: 1 };
        for (trip, kept) in loops {
            e.full = e.full.saturating_mul(trip);
            if kept {
                e.kept = true;
                e.prefix = e.full;
            }
        }
        e
    }
}

/// What [`Problem::best_order`] works out for one state's tiles, kept
/// across the pack choices [`Problem::best_packing_with`] weighs: per
/// (read, level, holder) its [`ReadCopies`]; the classes of parts under
/// which every read's tiles are loaded as often into the caches (and, for
/// reduction parts, the micro-kernel's reduction axis is the same), which
/// the tiles alone decide; and per (read, that axis, pack choice) its
/// [`PageSteps`].
#[derive(Default)]
struct OrderCopies {
    copies: rustc_hash::FxHashMap<(usize, usize, Holder), ReadCopies>,
    cached: Option<CachedClasses>,
    page_steps: rustc_hash::FxHashMap<(usize, Option<usize>, u8), PageSteps>,
}

/// The joint classes of the parts of the loop orders that the tiles alone
/// decide ([`OrderCopies`]): each part's class and each class' first part.
struct CachedClasses {
    spatial: (Vec<u32>, Vec<usize>),
    reduction: (Vec<u32>, Vec<usize>),
    /// Per reduction part, the class of its micro-kernel reduction axis;
    /// per such class, the axis.
    k_class: Vec<u32>,
    k_axes: Vec<Option<usize>>,
}

/// The packed copies of one read at one level under every loop order of
/// [`Problem::orders`], by class. Two spatial parts of orders are in one
/// class when the copy sees the same loops in them (equal
/// [`EntryCopies`] in every entry), and so for reduction parts: the
/// copies depend on the pair of classes only. Most of the up to 14,400
/// orders fall into a few classes (the axes a read does not use, or that
/// run once, can go in any order), so the copies are worked out per pair
/// of classes instead of per order.
struct ReadCopies {
    /// A packed copy's bytes.
    bytes: f64,
    /// The class of each spatial part (of [`OrderParts::spatial`]) and of
    /// each reduction part.
    spatial_class: Vec<u32>,
    reduction_class: Vec<u32>,
    /// How many reduction classes there are.
    reduction_classes: usize,
    /// The copies of a pair of classes, at `spatial class × reduction
    /// classes + reduction class`.
    copies: Vec<f64>,
}

impl ReadCopies {
    fn copies(&self, spatial_part: usize, reduction_part: usize) -> f64 {
        self.copies[self.spatial_class[spatial_part] as usize * self.reduction_classes + self.reduction_class[reduction_part] as usize]
    }
}

/// The classes of parts that are in the same class in `joint` and in
/// `class` (each a class per part), numbered as [`classes`] numbers them,
/// with the first part of each.
fn refine(joint: &[u32], class: &[u32]) -> (Vec<u32>, Vec<usize>) {
    classes(joint.iter().zip(class).map(|(&a, &b)| (u64::from(a) << 32) | u64::from(b)))
}

/// Numbers equal keys in first-seen order: each item's class, and the
/// first item of each class.
fn classes<K: Eq + std::hash::Hash>(keys: impl Iterator<Item = K>) -> (Vec<u32>, Vec<usize>) {
    // Most orders tie, so there are few classes: up to `SCANNED` of them a
    // scan of the keys seen beats hashing every key (the search numbers
    // the classes of a dozen reads and levels for every state it keeps).
    const SCANNED: usize = 16;
    let (mut class, mut first) = (Vec::new(), Vec::new());
    let mut seen: Vec<K> = Vec::new();
    let mut ids: Option<rustc_hash::FxHashMap<K, u32>> = None;
    for (i, k) in keys.enumerate() {
        let next = first.len() as u32;
        let id = match &mut ids {
            Some(ids) => *ids.entry(k).or_insert(next),
            None => match seen.iter().position(|s| *s == k) {
                Some(p) => p as u32,
                None if seen.len() < SCANNED => {
                    seen.push(k);
                    next
                }
                None => {
                    let mut map: rustc_hash::FxHashMap<K, u32> = seen.drain(..).zip(0..).collect();
                    map.insert(k, next);
                    ids = Some(map);
                    next
                }
            },
        };
        if id == next {
            first.push(i);
        }
        class.push(id);
    }
    (class, first)
}

/// The tile level whose reduction sizes bound the accumulator's run: the
/// reduction loops after the last spatial tile loop of `order` cover the
/// tile of the level above the outermost of them (`None`: they start at
/// the outermost level, or there are none).
pub(super) fn run_level_of(order: &[OrderEntry], levels: usize) -> Option<usize> {
    let last_s = order.iter().rposition(|e| matches!(e, OrderEntry::Spatial(_))).unwrap_or(0);
    let inner = order[last_s..]
        .iter()
        .filter_map(|e| match *e {
            OrderEntry::Reduction(l) => Some(l),
            OrderEntry::ReductionPoint => Some(levels),
            _ => None,
        })
        .min()?;
    inner.checked_sub(1)
}

impl Problem {
    /// Roller's memory traffic `Q` into tiles of `level` over the whole op:
    /// spatial tiles × (each read's tile with the reduction at full extent)
    /// plus the output, in bytes.
    pub fn traffic(&self, cfg: &Config, level: usize) -> f64 {
        let t = |id: AxisId| {
            let a = id.index();
            if self.axes[a].spatial { cfg.tiles[a][level].min(self.axes[a].extent).max(1) } else { self.axes[a].extent }
        };
        let tiles: f64 = self.axes.iter().enumerate().filter(|(_, a)| a.spatial).map(|(i, a)| a.extent.div_ceil(cfg.tiles[i][level].max(1)) as f64).product();
        let per: u64 = (0..self.nreads()).fold(0u64, |b, r| b.saturating_add(self.read_bytes(r, &t)));
        tiles * per as f64 + self.info.output.shape.iter().product::<u64>() as f64 * self.info.output.elem.size_bytes() as f64
    }

    /// The register tile of a CPU schedule: the accumulator's vector
    /// registers (the innermost tile's spatial points over the vector
    /// width; with a reduction vector axis, the spatial points times that
    /// axis' innermost tile over the width), and per reduction step (a
    /// reduction vector axis' whole innermost tile) the loads that feed it
    /// (a vector per `w` contiguous elements of a read along the vector
    /// axis; one broadcast or scalar load per element otherwise) and how
    /// many of those are held in registers while the step runs (the loads
    /// of reads that do not use the outermost point loop's axis, which
    /// the others stream past; without such an axis, the vector loads; and
    /// broadcasts that feed a single FMA).
    pub fn register_tile(&self, cfg: &Config) -> (f64, f64, f64) {
        let inner = self.levels - 1;
        let w = self.register_lanes(cfg).max(1);
        let lane_axis = self.lane_axis(cfg);
        // A fused `m`'s op axes: the lanes of each register, gathered.
        let fused_lanes = self.intrinsic_of(cfg).map_or(&[][..], |x| x.lane_axes());
        let points: u64 = self.axes.iter().enumerate().filter(|&(i, a)| a.spatial || Some(i) == lane_axis).map(|(i, _)| self.range_of(cfg, i, inner)).product();
        let acc = points.div_ceil(w) as f64;
        let t = |id: AxisId| {
            let a = id.index();
            if self.axes[a].spatial || Some(a) == lane_axis { self.range_of(cfg, a, inner) } else { 1 }
        };
        // The register tile's outermost point loop (the vector axis' is
        // innermost whatever the order): the loads of a read that does not
        // use it are the same on each of its trips, so LLVM loads them
        // once and holds them all while it streams the others one at a
        // time. (ResNet-50 R8 with `oh` 3 rows outermost, `f` 4 and `ow`
        // a vector: the 4 broadcasts of the weights stay in registers
        // beside 12 accumulators and a row of the input, 17 of 16, and two
        // accumulators went to the stack every step: 9.6 ms against 5.6
        // for 8 accumulators.)
        let outer = cfg.order.iter().copied().find(|&a| self.axes[a].spatial && Some(a) != cfg.vector && !fused_lanes.contains(&AxisId::new(a)) && self.range_of(cfg, a, inner) > 1).filter(|_| lane_axis.is_none());
        let (mut loads, mut vector_loads) = (0.0, 0.0);
        // The innermost reduction point loop (the taps of a convolution's
        // `s`), where LLVM unrolls it whole: then a read whose window slides
        // over it (`x[.., ow + s]`) serves the next tap from the same
        // elements, and LLVM loads each once. It holds them either tap by
        // tap (the step's elements, beside each tap's vectors) or element
        // by element (one broadcast, beside every tap's vectors), whichever
        // takes fewer registers: ResNet-50 R5's 12 columns x 2 vectors
        // fitted so (24 accumulators and 6 weight vectors), R11's 2 rows x
        // 7 columns x 2 vectors did not (28 and 6, or 28 and 14 broadcasts
        // beside 2): 171 zmm moves to and from the stack, 2.63 ms against
        // 2.18 for one row. LLVM unrolled 3 taps of 28 FMAs, not 7 of 24
        // (ResNet's stem, a conv3d), whose windows then are not reused.
        const LLVM_UNROLLED_FMAS: u64 = 128;
        let slide = self.intrinsic_of(cfg).is_none()
            .then(|| cfg.order.iter().rev().map(|&a| (a, self.range_of(cfg, a, inner))).find(|&(a, trips)| !self.axes[a].spatial && Some(a) != lane_axis && trips > 1))
            .flatten()
            .map(|(a, trips)| (AxisId::new(a), trips))
            .filter(|&(_, trips)| trips * (acc as u64) <= LLVM_UNROLLED_FMAS);
        let (mut held_by_tap_order, mut held_by_window_order) = (0.0, 0.0);
        // The body's reads feed each reduction step; an epilogue's are read
        // once per output element, after the reduction, like the output is
        // written (a fused bias or residual add: counted per step, they
        // made the model pick register tiles a quarter the size and the
        // convolution ran at half the speed).
        for (r, read) in self.compute.reads.iter().enumerate() {
            let elems = (self.read_bytes(r, &t) / self.info.reads[r].tensor.elem.size_bytes().max(1)).max(1);
            let packed = cfg.pack_level(r).map(|_| self.packed_strides());
            let contiguous = w > 1 && fused_lanes.is_empty() && cfg.vector.is_some_and(|v| Self::walks_contiguously(&read.indices, AxisId::new(v), packed.as_ref()));
            // Guarded loads are scalar for a padded read that no packed
            // copy (which holds the padding) stands in for, unless its
            // lanes walk only dimensions they never leave (a pooling's
            // channel lanes in a blocked layout, `x[n, c, 2h + r - 1,
            // 2w + s - 1, cl]`): then every lane has the same guard, and
            // LLVM loads them as one vector under one check (max pooling
            // at 56 x 56 x 64 in blocks of 16: the tuned pick's tiles ran in
            // 0.258 ms so, 0.284 with the input packed to hold its padding,
            // and markov's construction went from 0.302 ms to 0.152). (Partial tiles are not: a guard on another
            // axis is a branch around vector code, and the vector axis'
            // own partial tile masks its lanes, which `predict` charges.)
            let stride_two = w > 1
                && fused_lanes.is_empty()
                && cfg.vector.is_some_and(|v| {
                    let unmasked = cfg.pack_level(r).is_none() && (0..self.levels).all(|l| (if l == 0 { self.axes[v].extent } else { cfg.tiles[v][l - 1] }).is_multiple_of(cfg.tiles[v][l].max(1)));
                    let v = AxisId::new(v);
                    unmasked && read.indices.split_last().is_some_and(|(last, rest)| last.coeff(v) == 2 && last.divisor() == 1 && rest.iter().all(|e| !e.uses(v)))
                });
            let guarded = read.pad.is_some() && cfg.pack_level(r).is_none();
            // The read's loads and the registers they hold, read without
            // guards.
            let unguarded = || -> (f64, f64, f64, f64) {
                let (mut l, mut vl, mut tap_order, mut window_order) = (0.0, 0.0, 0.0, 0.0);
                let streamed = outer.is_some_and(|o| read.indices.iter().any(|e| e.uses(AxisId::new(o))));
                let slides = slide.is_some_and(|(tap, _)| self.slides_over(cfg, &read.indices, tap));
                if contiguous {
                    let v = elems.div_ceil(w) as f64;
                    l += v;
                    if !streamed {
                        vl += v;
                        // Every tap's vectors, where the window's
                        // broadcasts are used one at a time.
                        if let Some((_, trips)) = slide.filter(|&(tap, _)| read.indices.iter().any(|e| e.uses(tap))) {
                            window_order += (trips - 1) as f64 * v;
                        }
                    }
                    return (l, vl, tap_order, window_order);
                }
                let uses_vector = cfg.vector.is_some_and(|v| read.indices.iter().any(|e| e.uses(AxisId::new(v)))) || fused_lanes.iter().any(|&a| read.indices.iter().any(|e| e.uses(a)));
                // Lanes two elements apart in the last dimension (a pooling's
                // or strided convolution's `2·ow + s`), read unpadded from the
                // source in whole vectors: code generation
                // loads them as two overlapping vectors and one shuffle of the
                // even elements. (Under a partial tile's mask it loads them
                // masked, but the model is not trusted with that: charged so,
                // markov vectorised a 10-wide average pooling on 16 lanes,
                // which ran 2.7x slower than its scalar pick.) (ResNet's stem max pooling, one output row per
                // packed copy: 0.415 ms so, 0.493 with every lane a scalar load;
                // 8 rows per copy, by hand: 0.202 ms, against 0.299 for the
                // scalar pick; in turns on the Zen 4, one thread.)
                // From a packed copy code generation does the same, but the
                // model is not trusted with it yet: charging those so, markov's
                // construction moved to packed, vectorised picks that ran
                // 0.25-0.91x the old ones' time on a 1-D convolution, ResNet-18's
                // stem and its stride-2 3x3, and 1.36-2.8x on an average pooling
                // of 139 MB and a batch-128 3x3 convolution, where the copy
                // costs more than the model says. They stay charged as gathers.
                // What a vector of them costs, in vector loads: its two loads
                // and the shuffle, which on Zen 4 and Intel's AVX-512 cores is
                // a 512-bit two-source permute (one a clock or two), counted
                // as two more; with the copy that packs the padding, pooling
                // picks at 3 ran slower than the scalar ones (an average
                // pooling of 3 x 3 windows 1.6x).
                const STRIDE_TWO_LOADS: f64 = 6.0;
                if stride_two {
                    let v = elems.div_ceil(w) as f64;
                    l += STRIDE_TWO_LOADS * v;
                    if !streamed {
                        vl += 2.0 * v;
                    }
                    return (l, vl, tap_order, window_order);
                }
                if w > 1 && uses_vector {
                    // Lanes gathered one element at a time.
                    l += elems as f64 * self.target.model.gather_load_cost;
                } else {
                    l += elems as f64;
                    // Broadcasts are held across the outer point loop they do
                    // not use. A broadcast that feeds a single FMA (a register
                    // tile one vector wide) becomes that FMA's destination
                    // register: LLVM issues the step's loads ahead of its FMAs,
                    // so each is held meanwhile. (An 8x8 GEMM register tile, 8
                    // accumulators, 1 vector and 8 such broadcasts, spilled an
                    // accumulator and ran at 41 GFLOP/s against 81 for 4x16 on
                    // the AMD EPYC host.)
                    // Otherwise a window sliding over unrolled taps is held
                    // (`slide` above says how much).
                    if (outer.is_some() && !streamed && !uses_vector) || acc <= elems as f64 {
                        vl += elems as f64;
                    } else if slides && !uses_vector {
                        tap_order += elems as f64;
                    }
                }
                (l, vl, tap_order, window_order)
            };
            if !guarded {
                let (l, vl, tap, window) = unguarded();
                loads += l;
                vector_loads += vl;
                held_by_tap_order += tap;
                held_by_window_order += window;
                continue;
            }
            // `hoist-guards` versions the nest on a padded read's bounds:
            // the register tiles whose windows lie inside the source read
            // it unpadded, and only the border tiles pay the guards
            // (ResNet's stem max pooling, 8 x 8 outputs a tile, 8 lanes
            // along `ow`: 0.184 ms so, 0.294 with every tile guarded; in
            // turns, one thread, Zen 4). Where the unguarded reads would
            // cost no less (a gather), the model keeps the guarded figure.
            let uniform = contiguous && cfg.vector.is_some_and(|v| self.lanes_stay_inside(r, AxisId::new(v)));
            let guarded_loads = if uniform { elems.div_ceil(w) } else { elems } as f64 * self.target.model.guarded_load_cost;
            // (Only vector code is versioned, `hoist-guards`. The model is
            // trusted with it for a pooling's stride-2 lanes alone so far:
            // counted for every padded read of vector code (and masked
            // stride-2 lanes as whole vectors), markov's construction
            // moved on 30 of 74 workloads, most of them
            // convolutions whose broadcast inputs it then charged at one
            // load an element; for stride-2 lanes of convolutions too, it
            // picked unpacked 4-lane schedules for ResNet-18's stride-2 3x3
            // and a grouped convolution that ran 2.6-3.3x slower than the
            // packed picks, where their input's reuse across output
            // channels is the packed copy's to exploit.)
            let pooling = self.nreads() == 1;
            let inside = if stride_two && pooling { self.padding_interior_share(r, cfg) } else { 0.0 };
            let (l, vl, _, _) = if inside > 0.0 { unguarded() } else { (f64::INFINITY, 0.0, 0.0, 0.0) };
            if l < guarded_loads {
                loads += inside * l + (1.0 - inside) * guarded_loads;
                vector_loads += vl;
            } else {
                loads += guarded_loads;
            }
        }
        if held_by_tap_order > 0.0 {
            vector_loads += f64::min(held_by_tap_order, held_by_window_order);
        }
        (acc, loads, vector_loads)
    }

    /// Does a read with `indices` slide over the point loop of `tap` in
    /// `cfg`: does one of its indices combine `tap` with a spatial axis whose
    /// point loop runs more than once (`ow + s` over a row of columns)?
    fn slides_over(&self, cfg: &Config, indices: &[AffineExpr<AxisId>], tap: AxisId) -> bool {
        let inner = self.levels - 1;
        indices.iter().any(|e| e.uses(tap) && self.axes.iter().enumerate().any(|(a, axis)| axis.spatial && e.uses(AxisId::new(a)) && self.range_of(cfg, a, inner) > 1))
    }

    /// The share of the register tiles whose points all read read `r`
    /// inside its source (`hoist-guards` runs those unpadded): per
    /// dimension whose index moves with one spatial axis (coefficient
    /// above 0, the reductions at any step), the tiles of that axis'
    /// innermost size that lie wholly inside; a dimension indexed by
    /// several spatial axes counts as border everywhere.
    pub(super) fn padding_interior_share(&self, r: usize, cfg: &Config) -> f64 {
        let Some((_, read)) = self.compute.all_reads().nth(r) else { return 0.0 };
        let shape = &self.info.reads[r].tensor.shape;
        let inner = self.levels - 1;
        let mut share = 1.0;
        for (e, &n) in read.indices.iter().zip(shape) {
            if e.divisor() != 1 {
                return 0.0;
            }
            let (mut lo, mut hi) = (e.constant_term(), e.constant_term());
            let mut spatial: Option<(usize, i64)> = None;
            for a in e.vars() {
                let (i, c) = (a.index(), e.coeff(a));
                if self.axes[i].spatial {
                    if spatial.is_some() || c < 0 {
                        return 0.0;
                    }
                    spatial = Some((i, c));
                } else {
                    let last = c * (self.axes[i].extent as i64 - 1);
                    lo += last.min(0);
                    hi += last.max(0);
                }
            }
            let n = n as i64;
            let Some((a, c)) = spatial else {
                if lo < 0 || hi >= n {
                    return 0.0;
                }
                continue;
            };
            // Tile `t` of `size` points reads from `c·t·size + lo` to
            // `c·(t·size + size - 1) + hi`.
            let size = self.range_of(cfg, a, inner).max(1) as i64;
            let tiles = self.axes[a].extent.div_ceil(size as u64) as i64;
            let first = if lo >= 0 { 0 } else { (-lo as u64).div_ceil((c * size) as u64) as i64 };
            let room = n - 1 - hi - c * (size - 1);
            let last = if room < 0 { -1 } else { (room / (c * size)).min(tiles - 1) };
            share *= (last - first + 1).max(0) as f64 / tiles as f64;
        }
        share
    }

    /// Does every index of read `r` that uses axis `v` stay inside its
    /// dimension over the whole iteration space (so padding never falls
    /// between a vector's lanes along `v`)?
    pub(super) fn lanes_stay_inside(&self, r: usize, v: AxisId) -> bool {
        let Some((_, read)) = self.compute.all_reads().nth(r) else { return false };
        let shape = &self.info.reads[r].tensor.shape;
        let range = |a: AxisId| (0, self.axes[a.index()].extent as i64 - 1);
        read.indices.iter().zip(shape).filter(|(e, _)| e.uses(v)).all(|(e, &n)| e.value_range(range).is_some_and(|(lo, hi)| lo >= 0 && hi < n as i64))
    }

    /// Does an access with `indices` walk axis `id` with unit stride in
    /// memory: through its last dimension alone, or, for a packed copy
    /// (`packed`: the stride each index is packed with; the `cache` pass
    /// puts the dimension the vector walks innermost and packs a strided
    /// one densely), through any one dimension alone with its packed
    /// stride?
    pub(super) fn walks_contiguously(indices: &[AffineExpr<AxisId>], id: AxisId, packed: Option<&PackedStrides<'_>>) -> bool {
        let using: Vec<&AffineExpr<AxisId>> = indices.iter().filter(|e| e.uses(id)).collect();
        let [e] = using.as_slice() else { return false };
        if e.divisor() != 1 {
            return false;
        }
        match packed {
            Some(stride) => e.coeff(id) == stride.of(e),
            None => e.coeff(id) == 1 && indices.last().is_some_and(|l| std::ptr::eq(l, *e)),
        }
    }

    /// The strides of a packed copy's dimensions (see [`PackedStrides`]).
    fn packed_strides(&self) -> PackedStrides<'_> {
        PackedStrides { axes: &self.axes }
    }

    /// Cycles per element a packed copy of read `r` takes beyond moving its
    /// bytes: the target's `guarded_load_cost` for a padded read (each element's
    /// bounds are checked), the target's `gather_load_cost` for one the `cache` pass
    /// permutes (the vector axis walks a dimension other than its last: a
    /// transpose) or packs densely from a read with a stride above 2
    /// (element by element), else 0 (rows copied as runs; stride 2 goes by
    /// vector shuffles).
    fn pack_cycles_per_element(&self, cfg: &Config, r: usize) -> f64 {
        let Some((_, read)) = self.compute.all_reads().nth(r) else { return 0.0 };
        if read.pad.is_some() {
            return self.target.model.guarded_load_cost;
        }
        let permuted = self.vector_width(cfg) > 1 && self.packed_innermost(cfg, &read.indices).is_some();
        let strides = self.packed_strides();
        // Stride 2 is copied a vector at a time (two loads and a shuffle,
        // `docs/codegen.md`); larger strides element by element.
        let strided = read.indices.iter().any(|e| strides.of(e) > 2);
        // A permuted copy is transposed in 16 x 16 register blocks now,
        // about 0.4 cycles an element (ResNet-50 R10's weights per L1
        // tile), but charging that made markov pack weights where it did
        // not pay (R8 at 78-82 GFLOP/s against 94-97, R4 79 against
        // 84-86, side by side): the gather cost stays until the model
        // sees why.
        if permuted || strided { self.target.model.gather_load_cost } else { 0.0 }
    }

    /// The dimension of a read with `indices` that its packed copy moves
    /// innermost (the `cache` pass's permutation): the one `cfg`'s vector
    /// axis walks with unit stride, where that is not already the last.
    fn packed_innermost(&self, cfg: &Config, indices: &[AffineExpr<AxisId>]) -> Option<usize> {
        let v = self.compute.axis_ids().nth(cfg.vector?)?;
        if !Self::walks_contiguously(indices, v, Some(&self.packed_strides())) || Self::walks_contiguously(indices, v, None) {
            return None;
        }
        indices.iter().position(|e| e.uses(v))
    }

    /// The peak GFLOP/s (GOP/s) `cfg`'s micro-kernel runs at: with a
    /// `dot` or warp intrinsic, its own (`per_cycle` instructions per core and
    /// clock, each `m` lanes of `k` multiply-adds: `vpdpbusd.zmm` on the
    /// Xeon 8380, 2 × 16 × 4 × 2 × 40 × 2.3 = 23552, the target's i8
    /// figure); else the target's for the accumulator's type (an `fma`
    /// intrinsic is the vectorised loop's own instruction).
    fn kernel_peak_gflops(&self, cfg: &Config) -> f64 {
        match self.intrinsic_of(cfg).filter(|x| x.is_dot() || x.is_warp()) {
            Some(x) => {
                // A warp's `mma`: `per_cycle` instructions per SM and clock
                // of m·n·k multiply-adds (sm80's m16n8k16 f16: 0.5 × 2048
                // × 2 × 108 × 1.41 = 312 TFLOP/s, the datasheet's).
                let t = &self.target;
                let ops = x.intrinsic.per_cycle * f64::from(x.intrinsic.m) * f64::from(x.intrinsic.n) * f64::from(x.intrinsic.k) * 2.0;
                ops * t.compute.units.max(1) as f64 * t.compute.clock_ghz.max(1e-3)
            }
            None => self.peak_gflops(),
        }
    }

    /// The target's peak GFLOP/s for the accumulator's type (else f32's).
    fn peak_gflops(&self) -> f64 {
        let t = &self.target;
        t.peak_gflops.get(self.info.acc.name()).or_else(|| t.peak_gflops.get("f32")).copied().unwrap_or(1.0)
    }

    /// The reduction steps a CPU register tile accumulates before its
    /// accumulator is stored: the span of the reduction loops after the
    /// last spatial tile loop of the target's loop order (∞ without
    /// reduction axes).
    pub fn reduction_run(&self, cfg: &Config) -> f64 {
        let level = self.run_level();
        let mut run = 1.0;
        let mut any = false;
        for (a, axis) in self.axes.iter().enumerate() {
            if axis.spatial {
                continue;
            }
            any = true;
            run *= match level {
                None => axis.extent as f64,
                Some(l) => self.range_of(cfg, a, l) as f64,
            };
        }
        if any { run } else { f64::INFINITY }
    }

    /// How close a CPU schedule's micro-kernel comes to the FMA peak, in
    /// (0, 1]: the product of
    /// - issue: FMAs per step over the larger of FMA and load issue time
    ///   (FMA and load units per cycle come from the target's peak and L1
    ///   bandwidth);
    /// - latency: enough independent accumulators to cover
    ///   the target's `fma_latency_cycles` on every FMA unit;
    /// - registers: the accumulators plus the step's vector operands and a
    ///   broadcast must fit the register file, else they spill (half speed
    ///   per register short);
    /// - the accumulator's load and store once per reduction run, and the
    ///   output's lane-by-lane store where it is not contiguous along the
    ///   vector axis.
    pub fn kernel_efficiency(&self, cfg: &Config) -> f64 {
        self.kernel_terms(cfg).iter().product::<f64>().clamp(1e-6, 1.0)
    }

    /// The factors of [`Problem::kernel_efficiency`]: issue, latency,
    /// registers (decided by the innermost tile level), and the
    /// accumulator's run (decided at [`Problem::run_level`]).
    ///
    /// With a `dot` intrinsic, one instruction per accumulator does `k`
    /// reduction steps: its issue time per step is a `k`-th, the units
    /// and latency are the intrinsic's `per_cycle` and `latency_cycles`,
    /// and the accumulator's run counts instructions. Its operands are
    /// loaded once per instruction as the vector loop's are once per step
    /// (a vector of `a`'s `m × k` elements, a broadcast of `b`'s `k`), so
    /// loads per step are a `k`-th too: the VNNI layout, each lane's `k`
    /// elements consecutive. `tensorize` makes that layout when `a` is
    /// packed (a packed copy becomes VNNI's `[K/k][M][k]`); unpacked, `a`'s
    /// `m × k` elements are gathered one by one for every instruction, at
    /// the target's `scatter_lane_cost` each, so packing wins.
    pub fn kernel_terms(&self, cfg: &Config) -> [f64; 4] {
        let t = &self.target;
        let (acc, loads, vector_loads) = self.register_tile(cfg);
        let lanes = self.lanes_of(cfg).max(1) as f64;
        let per_clock = t.compute.units.max(1) as f64 * t.compute.clock_ghz.max(1e-3);
        let peak = self.peak_gflops();
        let dot = self.intrinsic_of(cfg).filter(|x| x.is_dot()).map(|x| &x.intrinsic);
        let fma_units = dot.map_or_else(|| (peak / (per_clock * lanes * 2.0)).round().max(1.0), |x| x.per_cycle.max(1e-3));
        let steps_per_op = dot.map_or(1.0, |x| f64::from(x.k.max(1)));
        let latency_cycles = dot.map_or(self.target.compute.fma_latency_cycles, |x| f64::from(x.latency_cycles));
        let vector_bytes = (t.isa.vector_bits.max(8) / 8) as f64;
        let l1 = t.tile_levels.last().and_then(|l| t.memory_level(&l.memory));
        let load_units = l1.map_or(1.0, |m| (m.bandwidth_gbs / per_clock / vector_bytes).round().max(1.0));
        let fma_cycles = acc / fma_units / steps_per_op;
        let mut issue = fma_cycles / fma_cycles.max(loads / steps_per_op / load_units);
        if let Some(x) = self.intrinsic_of(cfg).filter(|x| x.is_dot()) {
            // Per instruction, the elements gathered one by one: an
            // unpacked lanes operand's `m × k`; an unpacked broadcast
            // operand's `k` where they are not consecutive in its source
            // (a convolution's input channels, a plane apart).
            // A fused mapping's operands are not repacked (`tensorize`
            // packs basic ones): its lanes operand is gathered, and a
            // fused `k`'s broadcast elements are not consecutive.
            let mut gathered = 0.0;
            if cfg.pack_level(x.mapping.a).is_none() || x.fused_lanes() || x.fused_k() {
                gathered += f64::from(x.intrinsic.m * x.intrinsic.k);
            }
            let k_axis = x.mapping.k.first().copied().filter(|_| !x.fused_k());
            let b_consecutive = self.compute.all_reads().nth(x.mapping.b).zip(k_axis).is_some_and(|((_, read), k)| Self::walks_contiguously(&read.indices, k, None));
            if cfg.pack_level(x.mapping.b).is_none() && !b_consecutive {
                gathered += f64::from(x.intrinsic.k);
            }
            let per_instruction = 1.0 / fma_units;
            issue *= per_instruction / (per_instruction + gathered * t.model.scatter_lane_cost);
        }
        let latency = 1.0 - (-self.target.model.latency_hiding * acc / (fma_units * latency_cycles)).exp();
        let regs = t.isa.vector_registers.max(1) as f64;
        let need = acc + vector_loads + 1.0;
        let registers = if need <= regs { 1.0 } else { 0.5 * regs / need };
        // Loading and storing the accumulator costs about as many cycles
        // as this many reduction steps.
        let lane_axis = self.lane_axis(cfg);
        // A reduction vector axis' innermost tile is one step.
        let step = lane_axis.map_or(1.0, |v| self.range_of(cfg, v, self.levels - 1) as f64);
        let run = self.reduction_run(cfg) / step / steps_per_op;
        let overhead = fma_units / load_units + fma_units;
        let mut accumulate = if run.is_finite() { run / (run + overhead) } else { 1.0 };
        let w = self.vector_width(cfg);
        let reduction: f64 = self.axes.iter().filter(|a| !a.spatial).map(|a| a.extent as f64).product();
        if lane_axis.is_some() {
            // Each output point folds its `step` partial results, a scalar
            // load and combine each, against its FMAs.
            let fma = reduction / (w as f64 * fma_units);
            accumulate *= fma / (fma + step);
        } else if w > 1 && cfg.vector.is_some_and(|v| !Self::walks_contiguously(&self.compute.output, AxisId::new(v), None)) {
            // An output not contiguous along the vector axis is stored lane
            // by lane (the target's `scatter_lane_cost` cycles each), once per output
            // vector after the whole reduction: against the FMAs of that
            // reduction.
            let fma = reduction / fma_units / steps_per_op;
            accumulate *= fma / (fma + w as f64 * self.target.model.scatter_lane_cost);
        }
        [issue, latency, registers, accumulate]
    }

    /// The tile level whose reduction sizes set [`Problem::reduction_run`]
    /// (`None`: the run is the whole extent, or the register tile's own).
    pub fn run_level(&self) -> Option<usize> {
        self.run_level
    }

    /// Does unpacked read `r`'s tile at `level` evict itself from that
    /// level's cache? Its rows (runs contiguous in memory) start a stride
    /// apart; rows whose starts fall on the same cache sets compete for the
    /// set's `ways` lines, so only `ways × (set span / gcd(stride, set
    /// span))` rows stay. (A 256-row panel of a 1024-float-wide matrix
    /// keeps 12 rows in a 48 KiB 12-way L1: every row starts on the same
    /// set.) A read packed at an outer level is a tile of its packed copy,
    /// whose rows are that copy's box wide (a B panel packed per core tile,
    /// 512 floats wide, puts the rows of its L1 tiles 2 KiB apart: 16 of
    /// them stay in a 32 KiB 8-way L1). False for a read packed at this
    /// level or deeper, hardware levels without a known associativity, and
    /// tiles that are one run.
    pub fn conflicts(&self, cfg: &Config, r: usize, level: usize) -> bool {
        let t = &self.target;
        let Some(m) = t.memory_level(&t.tile_levels[level].memory) else { return false };
        let packed = cfg.pack_level(r);
        if m.managed || m.ways == 0 || packed.is_some_and(|l| l >= level) {
            return false;
        }
        let Some((_, read)) = self.compute.all_reads().nth(r) else { return false };
        let ty = &self.info.reads[r].tensor;
        let n = read.indices.len();
        if n < 2 {
            return false;
        }
        // The tile's box and the storage's sizes, in the storage's order.
        let (sizes, layout) = self.storage(cfg, r);
        let tile = self.box_at(cfg, r, level);
        let dims: Vec<u64> = layout.iter().map(|&d| tile[d]).collect();
        let shape: Vec<u64> = layout.iter().map(|&d| sizes[d]).collect();
        // The contiguous run: the trailing dimensions the tile covers whole,
        // and the first one it covers in part.
        let mut d = n;
        while d > 1 && dims[d - 1] == shape[d - 1] {
            d -= 1;
        }
        let rows: u64 = dims[..d - 1].iter().product();
        if rows <= 1 {
            return false;
        }
        let stride = shape[d - 1..].iter().product::<u64>() * ty.elem.size_bytes();
        evict_each_other(m, rows, stride)
    }

    /// The distinct elements read `r` touches along each of its dimensions
    /// over a tile of `level`.
    fn box_at(&self, cfg: &Config, r: usize, level: usize) -> Vec<u64> {
        let (Some((_, read)), Some(info)) = (self.compute.all_reads().nth(r), self.info.reads.get(r)) else { return Vec::new() };
        let range = |id: AxisId| self.range_of(cfg, id.index(), level);
        read.indices.iter().enumerate().map(|(d, e)| distinct_values(e, &range, info.tensor.shape.get(d).copied().unwrap_or(1))).collect()
    }

    /// Where read `r`'s elements are stored: the sizes of its dimensions
    /// (its packed copy's box where it is packed, else its tensor's
    /// shape), and the order memory keeps the dimensions in, outermost
    /// first (a packed copy puts the dimension the vector walks innermost).
    fn storage(&self, cfg: &Config, r: usize) -> (Vec<u64>, Vec<usize>) {
        let (Some((_, read)), Some(info)) = (self.compute.all_reads().nth(r), self.info.reads.get(r)) else { return (Vec::new(), Vec::new()) };
        let mut layout: Vec<usize> = (0..read.indices.len()).collect();
        let Some(p) = cfg.pack_level(r) else { return (info.tensor.shape.clone(), layout) };
        if let Some(d) = self.packed_innermost(cfg, &read.indices) {
            layout.retain(|&x| x != d);
            layout.push(d);
        }
        let mut sizes = self.box_at(cfg, r, p);
        // In panels (`[j / w][k][w]`) the rows of a register tile's strip
        // are `w` elements apart: the strip is one contiguous run.
        if let Some(&d) = layout.last()
            && let Some(w) = self.panel_width(cfg, r, d, sizes[d])
        {
            sizes[d] = w;
        }
        (sizes, layout)
    }

    /// The panel width of read `r`'s packed copy, as the `cache` pass lays
    /// it out on a CPU, given the copy's innermost dimension `d` and the
    /// box's `size` along it: the register tile along the vector axis,
    /// where that axis walks `d` with unit stride, the box holds more than
    /// one panel and a whole number of them, and the dimension's other axes
    /// either stay put within the box or move in whole panels; elements of
    /// 4 bytes or more, and no virtual threads along the vector axis. (The
    /// pass decides on the loops' indices; this is the same rule on the
    /// axes.)
    fn panel_width(&self, cfg: &Config, r: usize, d: usize, size: u64) -> Option<u64> {
        let (Some((_, read)), p) = (self.compute.all_reads().nth(r), cfg.pack_level(r)?) else { return None };
        if self.target.kind != TargetKind::Cpu || self.vector_width(cfg) <= 1 || self.info.reads.get(r)?.tensor.elem.size_bytes() < 4 {
            return None;
        }
        let v = cfg.vector?;
        if cfg.vthreads.get(v).is_some_and(|&n| n > 1) {
            return None;
        }
        let strides = self.packed_strides();
        if read.indices.iter().any(|e| strides.of(e) != 1) {
            return None;
        }
        let e = read.indices.get(d)?;
        let w = cfg.tiles[v][self.levels - 1];
        if e.divisor() != 1 || e.coeff(AxisId::new(v)) != 1 || w <= 1 || size <= w || !size.is_multiple_of(w) {
            return None;
        }
        let others_fit = e.terms().iter().all(|&(a, c)| a.index() == v || c.unsigned_abs().is_multiple_of(w) || self.range_of(cfg, a.index(), p) == 1);
        others_fit.then_some(w)
    }

    /// Bytes read `r` moves when every tile of the given sizes (per axis)
    /// loads its box once.
    fn read_traffic(&self, r: usize, size: &dyn Fn(usize) -> u64) -> f64 {
        let tiles: f64 = self.axes.iter().enumerate().map(|(a, axis)| axis.extent.div_ceil(size(a).max(1)) as f64).product();
        tiles * self.read_bytes(r, &|id: AxisId| size(id.index()).min(self.axes[id.index()].extent).max(1)) as f64
    }

    /// Bytes read `r` moves into the tiles of `level` (Roller's `Q` for one
    /// read); `level == levels` is the register tile's loads, one
    /// reduction step at a time.
    fn read_traffic_at(&self, cfg: &Config, r: usize, level: usize) -> f64 {
        if level >= self.levels {
            return self.read_traffic(r, &|a| if self.axes[a].spatial { self.range_of(cfg, a, self.levels - 1) } else { 1 });
        }
        self.read_traffic(r, &|a| if self.axes[a].spatial { cfg.tiles[a][level] } else { self.axes[a].extent })
    }

    /// Bytes the packed copies of read `r` at tile level `level` move: one
    /// copy of its box per iteration of the loops around the copy (the
    /// target's loop order, and `cfg.order` within each level, down to that
    /// level's innermost loop), except the innermost loops the box does not
    /// depend on, which `cache` hoists the copy out of.
    pub fn pack_traffic(&self, cfg: &Config, r: usize, level: usize) -> f64 {
        self.pack_copies(cfg, r, level) * self.pack_box_bytes(cfg, r, level)
    }

    /// The bytes of one packed copy of read `r` at tile level `level` (its
    /// box).
    fn pack_box_bytes(&self, cfg: &Config, r: usize, level: usize) -> f64 {
        self.read_bytes(r, &|id: AxisId| self.range_of(cfg, id.index(), level)) as f64
    }

    /// How many packed copies of read `r` at tile level `level` run: the
    /// product of the trips of the loops around the copy down to the last
    /// one it cannot be hoisted out of ([`Problem::pack_traffic`]).
    fn pack_copies(&self, cfg: &Config, r: usize, level: usize) -> f64 {
        self.tile_loads(cfg, r, level, Holder::Copy)
    }

    /// The bytes of read `r`'s tiles at `level` the loop order brings into
    /// that level's cache afresh: its tile is loaded again only where a
    /// loop its box depends on moves (as its packed copies would be, but
    /// kept across parallel iterations too, [`Holder::Cache`]).
    pub fn fresh_traffic(&self, cfg: &Config, r: usize, level: usize) -> f64 {
        self.tile_loads(cfg, r, level, Holder::Cache) * self.pack_box_bytes(cfg, r, level)
    }

    /// How many times read `r`'s tile at `level` is loaded into what holds
    /// it (`holder`): the product of the trips of the loops around it down
    /// to the last one whose iterations need another tile.
    fn tile_loads(&self, cfg: &Config, r: usize, level: usize, holder: Holder) -> f64 {
        let Some((_, read)) = self.compute.all_reads().nth(r) else { return 0.0 };
        Self::copies_over(self.copy_entries(level).map(|(l, sp)| self.entry_copies(cfg, &read.indices, l, sp, holder, cfg.order.iter().copied())))
    }

    /// The entries of the target's loop order at or above `level`, with
    /// their level and kind (spatial or not), outermost first.
    fn copy_entries(&self, level: usize) -> impl Iterator<Item = (usize, bool)> + '_ {
        self.order.iter().filter_map(move |e| match *e {
            OrderEntry::Spatial(l) if l <= level => Some((l, true)),
            OrderEntry::Reduction(l) if l <= level => Some((l, false)),
            _ => None,
        })
    }

    /// One entry of the loop order for a copy reading `indices`: its loops
    /// are those of `axes` (in loop order) of the entry's kind (`spatial`)
    /// at level `l`, each running `trip` times; a copy moves out of the
    /// serial loops its box does not depend on, and a tile the cache holds
    /// out of the parallel ones too ([`Holder`]). Products are exact
    /// integers (they count iterations of the op).
    fn entry_copies(&self, cfg: &Config, indices: &[AffineExpr<AxisId>], l: usize, spatial: bool, holder: Holder, axes: impl IntoIterator<Item = usize>) -> EntryCopies {
        EntryCopies::over(axes.into_iter().map(|a| self.copy_loop(cfg, indices, a, l, spatial, holder)))
    }

    /// Axis `a`'s loop at level `l` in an entry of kind `spatial`, as a
    /// copy reading `indices` (held by `holder`) sees it: its trips, and
    /// whether the copy stays inside it ([`Problem::entry_copies`]). A loop
    /// the entry does not make (another kind's axis, or a size fixed at the
    /// level) is one trip the copy leaves.
    fn copy_loop(&self, cfg: &Config, indices: &[AffineExpr<AxisId>], a: usize, l: usize, spatial: bool, holder: Holder) -> (u64, bool) {
        let axis = &self.axes[a];
        if axis.spatial != spatial || self.fixed(a, l) {
            return (1, false);
        }
        let per_core = holder == Holder::Copy && axis.spatial && matches!(self.target.tile_levels[l].binding, Binding::Parallel);
        let trip = self.trips(cfg, a, l);
        (trip, per_core || (trip > 1 && indices.iter().any(|x| x.uses(AxisId::new(a)))))
    }

    /// The trips of axis `a`'s loop at tile level `l`: the level above's
    /// range (the extent at the outermost) over this level's.
    fn trips(&self, cfg: &Config, a: usize, l: usize) -> u64 {
        let outer = if l == 0 { self.axes[a].extent } else { self.range_of(cfg, a, l - 1) };
        outer.div_ceil(self.range_of(cfg, a, l).max(1))
    }

    /// The copies of a read over the loop order's entries (outermost
    /// first): the trips of every loop up to the last one it stays in.
    fn copies_over(entries: impl Iterator<Item = EntryCopies>) -> f64 {
        let (mut before, mut copies) = (1u64, 1u64);
        for e in entries {
            if e.kept {
                copies = before.saturating_mul(e.prefix);
            }
            before = before.saturating_mul(e.full);
        }
        copies as f64
    }

    /// The share of a GPU block's per-thread register estimate that one
    /// SM's register file (`registers_per_unit`) holds for all its threads
    /// (1 where it holds all): a block over it still runs, with `ptxas`
    /// capping each thread's registers for the block size (`.maxntid`) and
    /// spilling the rest to local memory, so it is priced, not ruled out
    /// (the verifier accepts it); see [`SPILLED_SHARE`].
    fn register_file_share(&self, cfg: &Config) -> f64 {
        let file = self.target.compute.registers_per_unit as f64;
        if file <= 0.0 {
            return 1.0;
        }
        let inner = self.levels - 1;
        let per_thread: u64 = self.resources().register_parts(&[], &|a| self.range_of(cfg, a.index(), inner), self.lanes_per_tile(cfg)).iter().map(|(_, n)| *n).sum();
        let need = per_thread as f64 * self.threads(cfg) as f64;
        if need <= file { 1.0 } else { SPILLED_SHARE * file / need }
    }

    /// Predicted run time in seconds (the roofline of the module docs).
    pub fn predict(&self, cfg: &Config) -> f64 {
        let t = &self.target;
        let peak = self.kernel_peak_gflops(cfg).max(1e-3) * 1e9 * self.core_share();
        let units = self.cores_predicted_for();
        let par_eff = self.parallel_efficiency(cfg);
        let mut eff = par_eff;
        if self.gpu() {
            let th = self.threads(cfg) as f64;
            let warp = t.compute.warp_size.max(1) as f64;
            eff *= th / ((th / warp).ceil() * warp);
            // Too few threads per SM cannot hide latency.
            eff *= (th / (self.target.compute.min_warps_per_block as f64 * warp)).min(1.0);
            eff *= self.register_file_share(cfg);
        } else {
            let w = self.vector_width(cfg).max(1) as f64;
            eff *= w / self.lanes_of(cfg).max(1) as f64;
            // The vector axis' partial last tile runs whole vectors, its
            // lanes past the extent masked off.
            if let Some(v) = cfg.vector {
                let (extent, tile) = (self.axes[v].extent, cfg.tiles[v][0].max(1));
                eff *= extent as f64 / (extent.div_ceil(tile) * tile) as f64;
            }
            eff *= self.kernel_efficiency(cfg);
        }
        let compute = self.flops / (peak * eff.max(1e-9));
        // Every byte the op touches once: what crosses into a hardware
        // cache that holds all of it (the re-reads of neighbouring tiles hit
        // that cache, at its own bandwidth).
        let unique = self.unique_bytes();
        let mut mem: f64 = 0.0;
        let mut mem_sum: f64 = 0.0;
        let mut stall: f64 = 0.0;
        // The time a CPU core waits on memory shared by the cores (L3,
        // DRAM): a miss there outlasts what the core can run ahead, so the
        // kernel does not compute meanwhile (measured on BERT M5, a 4-row
        // strip streaming B from L3: 48 ms, the sum of its compute and its
        // L3 time, not their maximum).
        let mut exposed: f64 = 0.0;
        // Packed copies: loops of their own, between the compute's, so
        // they add to it at every level (measured on BERT M1: A packed per
        // L1 tile, copied again for each of 16 column tiles, 75 GFLOP/s;
        // packed per L2 tile, 82).
        let mut copies: f64 = 0.0;
        // The innermost tiles' fill time (a CPU's L1 from L2).
        let mut fill: f64 = 0.0;
        for level in 0..self.levels {
            let Some(mi) = t.memory_index(&t.tile_levels[level].memory) else { continue };
            let m = &t.memory[mi];
            // Filled from the next slower memory level.
            let from = &t.memory[mi.saturating_sub(1)];
            let total = self.capacity_of(m);
            let from_bw = self.drawn_bandwidth(from, par_eff);
            // On a CPU the loop order decides what stays in the caches
            // between tiles (`reused_traffic`); a GPU's tiles are Roller's.
            let q = if self.gpu() { self.traffic(cfg, level) } else { self.reused_traffic(cfg, level) };
            let mut time = self.fill_rate(level, par_eff).seconds(q);
            let mut copy = 0.0;
            if !self.gpu() {
                for r in 0..self.nreads() {
                    // A tile that evicts itself gives no reuse here: the
                    // next level's tiles come from the slower memory.
                    if self.conflicts(cfg, r, level) {
                        // What re-reads the tile: the next level's tiles,
                        // or, for a read packed deeper, the packed copies
                        // (which may read each element just once).
                        let bytes = match cfg.pack_level(r) {
                            Some(p) if p > level => (self.pack_traffic(cfg, r, p) - self.read_traffic_at(cfg, r, level)).max(0.0),
                            _ => self.read_traffic_at(cfg, r, level + 1),
                        };
                        time += bytes / from_bw;
                        // And the misses stall the kernel: a line's latency
                        // each, the target's `misses_in_flight` at a time per core.
                        stall += bytes / from.line_bytes.max(1) as f64 * from.latency_ns * 1e-9 / (self.target.compute.misses_in_flight * units * par_eff);
                    }
                    // A packed copy reads its box there and writes it here,
                    // at memory speed where its rows are plain runs; a
                    // padded copy checks every element's bounds, and a
                    // permuted one loads element by element.
                    if cfg.pack_level(r) == Some(level) {
                        copy += self.copy_rate(cfg, r, level, par_eff).seconds(self.pack_traffic(cfg, r, level));
                    }
                }
            }
            // A streamed read (nothing in it reused: a GEMV's matrix) is
            // read once from wherever the op's data lives, in runs: each
            // run starts with a miss the prefetchers have not foreseen,
            // a line's latency, `misses_in_flight` at a time per core. A
            // GEMM at M = 1 that walks B 128 bytes a row, rows 16 KB
            // apart, ran 3.4x slower than one sweeping whole rows, 4 at a
            // time (docs/performance.md).
            if !self.gpu() && level == 0 {
                stall += self.stream_stall(cfg, if !m.managed && unique <= total { m } else { from }, units * par_eff);
            }
            // A read whose micro-kernel steps land a prefetch window apart
            // misses wherever no cache holds its tile: no prefetcher
            // follows it.
            if !self.gpu() && level + 1 == self.levels {
                stall += self.page_step_stall(cfg, units * par_eff);
                stall += self.dot_strip_stall(cfg, units * par_eff);
                fill = time;
            }
            if !self.gpu() && from.per == Per::Device {
                exposed = exposed.max(time);
            }
            copies += copy;
            time += copy;
            mem = mem.max(time);
            mem_sum += time;
        }
        let busy = compute + exposed + copies;
        // The roofline, plus a hundredth of every term: between schedules
        // the roofline ties (a memory-bound op), the one that also computes
        // and moves data faster wins.
        busy.max(mem) + fill_contention(busy, fill) + stall + 0.01 * (compute + mem_sum)
    }

    /// The share of the cores the outermost (core) tiles keep busy.
    ///
    /// On a GPU, tiles over the waves of them the SMs run times the SMs.
    /// On a CPU, the op's points over the cores times the busiest core's
    /// points ([`core_tile_balance`]): a partial last tile holds fewer
    /// points than a whole one, and the runtime shares iterations out
    /// whole (`runtime/src/pool.rs`). Counted as tiles, a split of 56
    /// columns into 32 and 24 kept two cores busy; it keeps them busy 56
    /// of every 64 column-times. ResNet-50 R2's pick was that split, the
    /// same on two threads as on one, and scaled 1.75x from one thread to
    /// two where onnxruntime's scaled 2.0x.
    fn parallel_efficiency(&self, cfg: &Config) -> f64 {
        let units = self.cores_predicted_for();
        let core_tiles: Vec<(u64, u64)> = self.axes.iter().enumerate().filter(|(_, a)| a.spatial).map(|(i, a)| (a.extent, cfg.tiles[i][0].max(1))).collect();
        if self.gpu() {
            let par: f64 = core_tiles.iter().map(|&(extent, tile)| extent.div_ceil(tile) as f64).product();
            let waves = (par / units).ceil().max(1.0);
            return par / (waves * units);
        }
        core_tile_balance(&core_tiles, units as usize)
    }

    /// The bytes per second the cores at work (the share `par_eff` of
    /// them) draw from memory `m`: a per-core level's bandwidth is theirs
    /// alone; a shared level's is the device's, up to what that many cores
    /// can draw.
    fn drawn_bandwidth(&self, m: &MemoryLevel, par_eff: f64) -> f64 {
        let units = self.cores_predicted_for();
        if m.per != Per::Device { m.bandwidth_gbs * 1e9 * self.core_share() * par_eff } else { Target::bandwidth_for_units(m, units * par_eff) * 1e9 }
    }

    /// The cores the model predicts for ([`Problem::model_cores`]: the
    /// target's, or the fewer the candidates are measured on).
    pub(super) fn cores_predicted_for(&self) -> f64 {
        let units = self.target.compute.units.max(1);
        self.model_cores.map_or(units, |c| c.clamp(1, units)) as f64
    }

    /// [`Problem::cores_predicted_for`] over the target's cores: the share of the
    /// chip's peak and per-core bandwidths the prediction gets.
    fn core_share(&self) -> f64 {
        self.cores_predicted_for() / self.target.compute.units.max(1) as f64
    }

    /// What packed copies of read `r` at tile level `level` cost per byte
    /// ([`CopyRate`]): they read the box from the memory the level is
    /// filled from and write it to the level's, at memory speed where its
    /// rows are plain runs; a padded copy checks every element's bounds,
    /// and a permuted one loads element by element
    /// ([`Problem::pack_cycles_per_element`]). A weight's copies were laid
    /// out once by `prepack`: each is its packed tile read, in plain runs.
    fn copy_rate(&self, cfg: &Config, r: usize, level: usize, par_eff: f64) -> CopyRate {
        let t = &self.target;
        let Some(mi) = t.memory_index(&t.tile_levels[level].memory) else { return CopyRate::FREE };
        let (m, from) = (&t.memory[mi], &t.memory[mi.saturating_sub(1)]);
        let rate = CopyRate {
            from_bandwidth: self.drawn_bandwidth(from, par_eff),
            to_bandwidth: self.drawn_bandwidth(m, par_eff),
            elem_bytes: self.info.reads[r].tensor.elem.size_bytes().max(1) as f64,
            cycles_per_element: self.pack_cycles_per_element(cfg, r),
            cycles_per_second: t.compute.clock_ghz.max(1e-3) * 1e9 * self.cores_predicted_for() * par_eff,
        };
        if self.weights.get(r).copied().unwrap_or(false) && !self.gpu() {
            return CopyRate { to_bandwidth: f64::INFINITY, cycles_per_element: 0.0, ..rate };
        }
        rate
    }

    /// The bytes moved into the tiles of `level` over the whole op on a
    /// CPU: each read's tiles as the loop order brings them into the
    /// level's cache ([`Problem::fresh_traffic`]), plus the output. Roller's
    /// `traffic` loads every read's tile for every spatial tile; here a
    /// tile stays while the loops inside do not move it (a 1x1
    /// convolution's input tile, with the output channels' tiles
    /// innermost, stays in L1 while the weights stream by).
    pub fn reused_traffic(&self, cfg: &Config, level: usize) -> f64 {
        let mut q = 0.0;
        for r in 0..self.nreads() {
            q += self.fresh_traffic(cfg, r, level);
        }
        q + self.output_bytes()
    }

    /// The output tensor's bytes.
    fn output_bytes(&self) -> f64 {
        (self.info.output.shape.iter().product::<u64>() * self.info.output.elem.size_bytes()) as f64
    }

    /// How long filling the tiles of `level` takes (with the share
    /// `par_eff` of the cores at work, [`FillRate`]): its bytes come from
    /// the memory the level is filled from, except where the level's
    /// memory holds all the op's data: then each byte crosses once, and
    /// the re-reads hit that memory at its own bandwidth.
    fn fill_rate(&self, level: usize, par_eff: f64) -> FillRate {
        let t = &self.target;
        let Some(mi) = t.memory_index(&t.tile_levels[level].memory) else { return FillRate { floor: 0.0, bandwidth: f64::INFINITY } };
        let (m, from) = (&t.memory[mi], &t.memory[mi.saturating_sub(1)]);
        let total = self.capacity_of(m);
        let (from_bw, m_bw) = (self.drawn_bandwidth(from, par_eff), self.drawn_bandwidth(m, par_eff));
        let unique = self.unique_bytes();
        if !m.managed && unique <= total { FillRate { floor: unique / from_bw, bandwidth: m_bw } } else { FillRate { floor: 0.0, bandwidth: from_bw } }
    }

    /// The seconds of `cfg`'s prediction its loop order decides, summed:
    /// filling each level's tiles ([`Problem::reused_traffic`]), its packed
    /// copies ([`Problem::copy_rate`]), and the misses of the tiles it
    /// brings in afresh of the reads with [`PageSteps::FreshTiles`]
    /// ([`Problem::fresh_misses`]). [`Problem::best_order`] takes the
    /// order where they are least. (The prediction takes the slowest
    /// level's fill, not the sum: the sum stands for it here, as the
    /// classes of orders are weighed without a whole prediction each.)
    pub fn order_seconds(&self, cfg: &Config) -> f64 {
        let par_eff = self.parallel_efficiency(cfg);
        let cores = self.cores_predicted_for() * par_eff;
        let mut seconds = 0.0;
        for level in 0..self.levels {
            seconds += self.fill_rate(level, par_eff).seconds(self.reused_traffic(cfg, level));
        }
        for r in 0..self.nreads() {
            if let Some(l) = cfg.pack_level(r) {
                seconds += self.copy_rate(cfg, r, l, par_eff).seconds(self.pack_traffic(cfg, r, l));
            }
        }
        for r in 0..self.compute.reads.len() {
            if self.page_steps(cfg, r) == PageSteps::FreshTiles {
                seconds += self.fresh_misses(r, cores).seconds(|l| self.fresh_traffic(cfg, r, l));
            }
        }
        seconds
    }

    /// The seconds the cores at work (`cores`) wait on the loads of the
    /// body reads that step across pages ([`Problem::page_steps`]), a
    /// line's latency per miss, the target's `misses_in_flight` at a time
    /// per core:
    /// - [`PageSteps::EveryLoad`]: every register-tile load is a miss
    ///   served from the level above the innermost tile's. (GEMM 1024 with
    ///   B unpacked, rows 4 KiB apart, ran at 21-23 GFLOP/s on a Zen 1
    ///   core; with B packed per L2 tile, rows 1 KiB apart, 30-31.)
    /// - [`PageSteps::FreshTiles`]: the loads of the tiles the loop order
    ///   brings in afresh miss ([`Problem::fresh_misses`]).
    pub fn page_step_stall(&self, cfg: &Config, cores: f64) -> f64 {
        let t = &self.target;
        let served = self.innermost_fill_source();
        (0..self.compute.reads.len())
            .map(|r| match self.page_steps(cfg, r) {
                PageSteps::Never => 0.0,
                PageSteps::EveryLoad => served.map_or(0.0, |served| {
                    let lines = self.read_traffic_at(cfg, r, self.levels) / served.line_bytes.max(1) as f64;
                    lines * served.latency_ns * 1e-9 / (t.compute.misses_in_flight * cores)
                }),
                PageSteps::FreshTiles => self.fresh_misses(r, cores).seconds(|l| self.fresh_traffic(cfg, r, l)),
            })
            .sum()
    }

    /// The memory the innermost tiles are filled from (a CPU's L2, for
    /// tiles in L1): what serves the micro-kernel's misses.
    fn innermost_fill_source(&self) -> Option<&MemoryLevel> {
        let t = &self.target;
        t.tile_levels.last().and_then(|l| t.memory_index(&l.memory)).map(|mi| &t.memory[mi.saturating_sub(1)])
    }

    /// The seconds the cores at work (`cores`) wait on the rows of a
    /// `dot` intrinsic's packed lanes operand that are not one run. Its
    /// copy has VNNI's layout, `[K/k][M][k]` over the copy's box (the
    /// `cache` pass leaves operands under 4 bytes to `tensorize`, which
    /// lays them out so, not in panels as f32 copies are). Where the box
    /// is wider along `m` than the register tile, a register tile's rows
    /// (its `m` lanes' `k` elements, one instruction's operand) are the
    /// box's width apart, and each row is a run the prefetchers did not
    /// foresee: a miss of the memory above the innermost tile, a line's
    /// latency, the target's `misses_in_flight` at a time per core, as
    /// [`Problem::stream_stall`] charges a streamed read's runs. Where the
    /// box is the register tile's width (a panel), the rows are one run
    /// and cost nothing here. (int8 GEMM 1024 on a Zen 4 core, `B` packed
    /// per core tile 512 wide against panels 64 wide, the same 4 x 64
    /// register tile: 5.51 against 4.97 ms in turns; the model without
    /// this term ranked the strips first, for their fewer re-reads of `A`.)
    pub fn dot_strip_stall(&self, cfg: &Config, cores: f64) -> f64 {
        let t = &self.target;
        let Some(x) = self.intrinsic_of(cfg).filter(|x| x.is_dot()) else { return 0.0 };
        let (r, [m]) = (x.mapping.a, x.mapping.m.as_slice()) else { return 0.0 };
        let (Some(p), Some((_, read))) = (cfg.pack_level(r), self.compute.all_reads().nth(r)) else { return 0.0 };
        let Some(d) = read.indices.iter().position(|e| e.uses(*m)) else { return 0.0 };
        let lanes = self.range_of(cfg, m.index(), self.levels - 1);
        let width = self.box_at(cfg, r, p).get(d).copied().unwrap_or(1);
        if width <= lanes {
            return 0.0;
        }
        let Some(served) = self.innermost_fill_source() else { return 0.0 };
        let row_bytes = (lanes * u64::from(x.intrinsic.k) * self.info.reads[r].tensor.elem.size_bytes()).max(1) as f64;
        let rows = self.read_traffic_at(cfg, r, self.levels) / row_bytes;
        rows * served.latency_ns * 1e-9 / (t.compute.misses_in_flight * cores)
    }

    /// Does read `r` miss the innermost tile's cache on every load of the
    /// micro-kernel ([`PageSteps::EveryLoad`])?
    pub fn steps_across_pages(&self, cfg: &Config, r: usize) -> bool {
        self.page_steps(cfg, r) == PageSteps::EveryLoad
    }

    /// How read `r`'s register-tile loads miss when its consecutive
    /// reduction steps are at least [`PREFETCH_WINDOW_BYTES`] apart
    /// ([`Problem::reduction_step_bytes`]), so that no prefetcher fetches
    /// the next one ([`PageSteps`]). Not a streamed read, whose runs
    /// [`Problem::stream_stall`] charges.
    pub fn page_steps(&self, cfg: &Config, r: usize) -> PageSteps {
        self.page_steps_along(cfg, r, self.innermost_reduction(cfg, &cfg.order))
    }

    /// [`Problem::page_steps`] with `k` the micro-kernel's innermost
    /// reduction axis ([`Problem::innermost_reduction`]).
    fn page_steps_along(&self, cfg: &Config, r: usize, k: Option<usize>) -> PageSteps {
        // A streamed read misses on every line anyway: `stream_stall`
        // charges its runs.
        if self.resources().streamed(r) {
            return PageSteps::Never;
        }
        let Some((k, step)) = k.and_then(|k| Some((k, self.step_along(cfg, r, k)?))) else { return PageSteps::Never };
        let t = &self.target;
        let Some(m) = t.tile_levels.last().and_then(|l| t.memory_level(&l.memory)) else { return PageSteps::Never };
        if step < PREFETCH_WINDOW_BYTES || m.managed || m.ways == 0 {
            return PageSteps::Never;
        }
        let rows = self.run_level().map_or(self.axes[k].extent, |l| self.range_of(cfg, k, l));
        if evict_each_other(m, rows, step) {
            PageSteps::EveryLoad
        } else if cfg.pack_level(r).is_none() {
            PageSteps::FreshTiles
        } else {
            PageSteps::Never
        }
    }

    /// What the cores at work (`cores`) wait on the misses of read `r`'s
    /// tiles that no prefetcher foresees ([`FreshMisses`]), given the bytes
    /// of its tiles at each level that the loop order brings into that
    /// level's cache afresh ([`Problem::fresh_traffic`]). Those are the
    /// level's misses; a level that holds all the op's data, or twice the
    /// read's (a core's share of a shared level), misses each byte once.
    /// Each miss is served by the next level out that holds the line: of
    /// the misses of level `l`, those not missing the level outside it cost
    /// that outer level's latency, the target's `misses_in_flight` at a
    /// time per core. (ResNet-50 R3, a 1x1 convolution over 64 channels
    /// 12.5 KB apart at 56x56: with the output channels' tiles outermost,
    /// every register tile reads its 64 input rows from L3, 5.6 ms on a
    /// Zen 1 core; with them innermost, from L1, 3.6 ms.)
    fn fresh_misses(&self, r: usize, cores: f64) -> FreshMisses {
        let t = &self.target;
        let tensor = self.tensor_bytes(r);
        let unique = self.unique_bytes();
        let levels = (0..self.levels)
            .map(|level| {
                let mi = t.memory_index(&t.tile_levels[level].memory)?;
                let (m, from) = (&t.memory[mi], &t.memory[mi.saturating_sub(1)]);
                let total = self.capacity_of(m);
                // A cache that holds all the op's data, or twice this
                // read's (whatever else streams through, lines in use
                // stay), misses each of its bytes once.
                let share = if m.per == Per::Device { m.capacity_bytes as f64 / self.cores_predicted_for() } else { m.capacity_bytes as f64 };
                let once = !m.managed && (unique <= total || 2.0 * tensor <= share);
                Some(MissLevel { at_most: if once { tensor } else { f64::INFINITY }, line_bytes: from.line_bytes.max(1) as f64, latency_ns: from.latency_ns })
            })
            .collect();
        FreshMisses { levels, in_flight: t.compute.misses_in_flight * cores }
    }

    /// Every byte the op touches once: its reads' tensors and its output.
    fn unique_bytes(&self) -> f64 {
        (0..self.nreads()).map(|r| self.tensor_bytes(r)).sum::<f64>() + self.output_bytes()
    }

    /// Read `r`'s tensor's bytes.
    fn tensor_bytes(&self, r: usize) -> f64 {
        self.info.reads.get(r).map_or(0.0, |info| (info.tensor.shape.iter().product::<u64>() * info.tensor.elem.size_bytes()) as f64)
    }

    /// What memory `m` holds for the whole op: a per-core level's capacity
    /// times the cores, a shared level's once.
    fn capacity_of(&self, m: &MemoryLevel) -> f64 {
        if m.per == Per::Device { m.capacity_bytes as f64 } else { m.capacity_bytes as f64 * self.cores_predicted_for() }
    }

    /// The bytes between read `r`'s elements at consecutive steps of the
    /// micro-kernel's innermost reduction loop (the last reduction axis of
    /// `cfg.order` whose innermost tile is more than one point, else the
    /// last with more than one), in its packed copy's layout where it is
    /// packed, else in its tensor's; 0 where the read does not use that
    /// axis.
    pub fn reduction_step_bytes(&self, cfg: &Config, r: usize) -> u64 {
        self.innermost_reduction(cfg, &cfg.order).and_then(|k| self.step_along(cfg, r, k)).unwrap_or(0)
    }

    /// The micro-kernel's innermost reduction axis under loop order
    /// `order` (a whole order, or its reduction part): the last reduction
    /// axis whose innermost tile is more than one point, else the last
    /// with more than one.
    fn innermost_reduction(&self, cfg: &Config, order: &[usize]) -> Option<usize> {
        let inner = self.levels - 1;
        let reductions = || order.iter().rev().copied().filter(|&a| !self.axes[a].spatial && self.axes[a].extent > 1);
        reductions().find(|&a| self.range_of(cfg, a, inner) > 1).or_else(|| reductions().next())
    }

    /// The bytes between read `r`'s elements at consecutive steps of axis
    /// `k` ([`Problem::reduction_step_bytes`]).
    fn step_along(&self, cfg: &Config, r: usize, k: usize) -> Option<u64> {
        let (Some((_, read)), Some(info)) = (self.compute.all_reads().nth(r), self.info.reads.get(r)) else { return None };
        let id = AxisId::new(k);
        let (sizes, layout) = self.storage(cfg, r);
        let packed = cfg.pack_level(r).map(|_| self.packed_strides());
        let mut stride = info.tensor.elem.size_bytes();
        let mut step = 0u64;
        for &d in layout.iter().rev() {
            let e = &read.indices[d];
            // Elements per step along this dimension: a packed copy keeps
            // a strided read's elements side by side.
            let per = match &packed {
                Some(ps) => e.coeff(id).unsigned_abs() / ps.of(e).unsigned_abs().max(1),
                None => e.coeff(id).unsigned_abs() / e.divisor().unsigned_abs().max(1),
            };
            step = step.saturating_add(per.saturating_mul(stride));
            stride = stride.saturating_mul(sizes.get(d).copied().unwrap_or(1).max(1));
        }
        Some(step)
    }

    /// The seconds the cores at work (`cores`) wait on the first miss of
    /// each run of the streamed reads (`OpResources::streamed`), which
    /// come from memory `served`: a miss's latency per run, the target's
    /// `misses_in_flight` at a time per core.
    pub fn stream_stall(&self, cfg: &Config, served: &MemoryLevel, cores: f64) -> f64 {
        let res = self.resources();
        (0..self.compute.reads.len())
            .filter(|&r| res.streamed(r))
            .map(|r| {
                let tensor = &self.info.reads[r].tensor;
                let bytes = (tensor.shape.iter().product::<u64>() * tensor.elem.size_bytes()) as f64;
                let run = self.stream_run_bytes(cfg, r).max(served.line_bytes.max(1) as f64);
                bytes / run * served.latency_ns * 1e-9 / (self.target.compute.misses_in_flight * cores)
            })
            .sum()
    }

    /// The bytes a core reads of read `r` in one contiguous run: walking
    /// the loop nest from the innermost loop out, a loop along the read's
    /// last (contiguous) dimension lengthens the runs, a loop along its
    /// other dimensions multiplies the rows read side by side, each a
    /// stream of its own; once there are more streams than the core keeps
    /// misses in flight (`misses_in_flight`), the runs are what they were.
    pub fn stream_run_bytes(&self, cfg: &Config, r: usize) -> f64 {
        let Some((_, read)) = self.compute.all_reads().nth(r) else { return 0.0 };
        let Some((last, rows)) = read.indices.split_last() else { return 0.0 };
        let elem = self.info.reads[r].tensor.elem.size_bytes() as f64;
        let dim = self.info.reads[r].tensor.shape.last().copied().unwrap_or(1) as f64;
        let max_streams = self.target.compute.misses_in_flight.max(1.0);
        let inner = self.levels - 1;
        // Every loop, outermost first: its axis and trips.
        let mut loops: Vec<(usize, u64)> = Vec::new();
        for e in &self.order {
            let (spatial, level) = match *e {
                OrderEntry::Spatial(l) => (true, Some(l)),
                OrderEntry::Reduction(l) => (false, Some(l)),
                OrderEntry::SpatialPoint => (true, None),
                OrderEntry::ReductionPoint => (false, None),
                OrderEntry::VThread => continue,
            };
            for &a in cfg.order.iter().filter(|&&a| self.axes[a].spatial == spatial) {
                match level {
                    Some(l) if !self.fixed(a, l) => loops.push((a, self.trips(cfg, a, l))),
                    Some(_) => {}
                    None => loops.push((a, self.range_of(cfg, a, inner))),
                }
            }
        }
        let (mut run, mut streams) = (1.0f64, 1.0f64);
        for (a, trips) in loops.into_iter().rev().filter(|&(_, t)| t > 1) {
            let id = AxisId::new(a);
            if rows.iter().any(|e| e.uses(id)) {
                streams *= trips as f64;
                if streams > max_streams {
                    break;
                }
            } else if last.uses(id) {
                run *= trips as f64;
            }
        }
        run.min(dim) * elem
    }

    /// The loop order under which the terms of the prediction an order
    /// decides are least ([`Problem::order_seconds`]: the packed copies'
    /// time, which loops a copy is hoisted out of, and the misses of the
    /// tiles an unpacked read that steps across pages brings in afresh).
    /// Ties, and nothing the order decides: the earlier order of
    /// [`Problem::orders`], declaration order first.
    pub fn best_order(&self, cfg: &Config) -> Vec<usize> {
        self.best_order_with(cfg, &mut OrderCopies::default())
    }

    /// [`Problem::best_order`] with the copies per order of `cfg`'s tiles
    /// kept in `memo` (which must only ever see states with these tiles:
    /// [`Problem::best_packing_with`] weighs every pack choice of one
    /// state's tiles).
    fn best_order_with(&self, cfg: &Config, memo: &mut OrderCopies) -> Vec<usize> {
        if self.orders.len() == 1 {
            return self.orders[0].clone();
        }
        let parts = &self.order_parts;
        let nreads = self.nreads();
        let packed: Vec<(usize, usize)> = (0..nreads).filter_map(|r| cfg.pack_level(r).map(|l| (r, l))).collect();
        for &(r, l) in &packed {
            if !memo.copies.contains_key(&(r, l, Holder::Copy)) {
                memo.copies.insert((r, l, Holder::Copy), self.copies_per_order(cfg, r, l, Holder::Copy));
            }
        }
        if memo.cached.is_none() {
            memo.cached = Some(self.cached_classes(cfg, &mut memo.copies));
        }
        let Some(view) = &memo.cached else { unreachable!("set above") };
        // Which reads miss on fresh tiles depends on the micro-kernel's
        // reduction axis (which the reduction part of the order decides)
        // and on the read's packing: per class of parts with the same axis.
        let mut fresh: Vec<(usize, Vec<bool>)> = Vec::new();
        for r in 0..self.compute.reads.len() {
            let pack = cfg.pack.get(r).copied().unwrap_or(0);
            let per_k: Vec<bool> = view.k_axes.iter().map(|&k| *memo.page_steps.entry((r, k, pack)).or_insert_with(|| self.page_steps_along(cfg, r, k)) == PageSteps::FreshTiles).collect();
            if per_k.contains(&true) {
                fresh.push((r, per_k));
            }
        }
        let packed_copies: Vec<&ReadCopies> = packed.iter().map(|&(r, l)| &memo.copies[&(r, l, Holder::Copy)]).collect();
        let cached: Vec<&ReadCopies> = (0..self.levels).flat_map(|l| (0..nreads).map(move |r| (r, l, Holder::Cache))).map(|k| &memo.copies[&k]).collect();
        // The orders whose parts are in the same classes for every one of
        // those (and, for reduction parts, the same micro-kernel axis)
        // cost the same; of each pair of joint classes, the first order
        // (the first part of each) stands for all. Ties go to the
        // earliest order, as when every order was weighed in turn.
        let (mut spatial, mut reduction) = (view.spatial.clone(), view.reduction.clone());
        for c in &packed_copies {
            spatial = refine(&spatial.0, &c.spatial_class);
            reduction = refine(&reduction.0, &c.reduction_class);
        }
        let (spatial_first, reduction_first) = (spatial.1, reduction.1);
        let k_class = &view.k_class;
        let par_eff = self.parallel_efficiency(cfg);
        let cores = self.cores_predicted_for() * par_eff;
        let fresh_at = |r: usize, l: usize, si: usize, ri: usize| {
            let c = cached[l * nreads + r];
            c.copies(si, ri) * c.bytes
        };
        let output = self.output_bytes();
        let fills: Vec<FillRate> = (0..self.levels).map(|l| self.fill_rate(l, par_eff)).collect();
        let copy_rates: Vec<CopyRate> = packed.iter().map(|&(r, l)| self.copy_rate(cfg, r, l, par_eff)).collect();
        let misses: Vec<FreshMisses> = fresh.iter().map(|&(r, _)| self.fresh_misses(r, cores)).collect();
        let mut best: Option<(f64, usize)> = None;
        for &si in &spatial_first {
            for &ri in &reduction_first {
                // As `order_seconds` adds them, one order at a time.
                let mut seconds = 0.0;
                for (l, fill) in fills.iter().enumerate() {
                    let mut q = 0.0;
                    for r in 0..nreads {
                        q += fresh_at(r, l, si, ri);
                    }
                    seconds += fill.seconds(q + output);
                }
                for (rate, c) in copy_rates.iter().zip(&packed_copies) {
                    seconds += rate.seconds(c.copies(si, ri) * c.bytes);
                }
                for ((r, per_k), m) in fresh.iter().zip(&misses) {
                    if per_k[k_class[ri] as usize] {
                        seconds += m.seconds(|l| fresh_at(*r, l, si, ri));
                    }
                }
                let o = parts.order_of(si, ri);
                if best.is_none_or(|(b, first)| seconds < b || (seconds == b && o < first)) {
                    best = Some((seconds, o));
                }
            }
        }
        best.map_or_else(|| self.orders[0].clone(), |(_, o)| self.orders[o].clone())
    }

    /// The classes of the parts of the loop orders `cfg`'s tiles decide
    /// ([`CachedClasses`]), with the [`ReadCopies`] of every read at every
    /// level as the caches hold its tiles, put in `copies`.
    fn cached_classes(&self, cfg: &Config, copies: &mut rustc_hash::FxHashMap<(usize, usize, Holder), ReadCopies>) -> CachedClasses {
        let parts = &self.order_parts;
        let (k_class, k_first) = classes(parts.reduction.iter().map(|o| self.innermost_reduction(cfg, o)));
        let k_axes = k_first.iter().map(|&p| self.innermost_reduction(cfg, &parts.reduction[p])).collect();
        let mut spatial = (vec![0; parts.spatial.len()], vec![0]);
        let mut reduction = (k_class.clone(), k_first);
        for l in 0..self.levels {
            for r in 0..self.nreads() {
                let c = copies.entry((r, l, Holder::Cache)).or_insert_with(|| self.copies_per_order(cfg, r, l, Holder::Cache));
                spatial = refine(&spatial.0, &c.spatial_class);
                reduction = refine(&reduction.0, &c.reduction_class);
            }
        }
        CachedClasses { spatial, reduction, k_class, k_axes }
    }

    /// The packed copies of read `r` at level `l` ([`Problem::pack_copies`])
    /// under each of [`Problem::orders`], by class ([`ReadCopies`]). A
    /// copy's loops in an entry of the target's loop order depend only on
    /// the order of the axes of the entry's kind, and the orders are every
    /// spatial permutation times every reduction one: each permutation's
    /// entries are computed once, and the copies once per pair of classes.
    fn copies_per_order(&self, cfg: &Config, r: usize, level: usize, holder: Holder) -> ReadCopies {
        let indices: &[AffineExpr<AxisId>] = self.compute.all_reads().nth(r).map_or(&[][..], |(_, read)| &read.indices[..]);
        // The entries in the target's order: (spatial, position among the
        // entries of that kind).
        let mut seen = [0usize; 2];
        let layout: Vec<(bool, usize)> = self
            .copy_entries(level)
            .map(|(_, sp)| {
                seen[usize::from(sp)] += 1;
                (sp, seen[usize::from(sp)] - 1)
            })
            .collect();
        let parts = &self.order_parts;
        // Per kind: each part's entries of that kind, one after another,
        // from each loop's trips and stay worked out once.
        let naxes = self.axes.len();
        let entries = |sp: bool, parts: &[Vec<usize>]| -> (Vec<EntryCopies>, usize) {
            // Each entry's loops, `naxes` at a time.
            let loops: Vec<(u64, bool)> = self.copy_entries(level).filter(|&(_, k)| k == sp).flat_map(|(l, _)| (0..naxes).map(move |a| self.copy_loop(cfg, indices, a, l, sp, holder))).collect();
            let n = loops.len() / naxes.max(1);
            let mut out = Vec::with_capacity(parts.len() * n);
            for axes in parts {
                out.extend(loops.chunks_exact(naxes.max(1)).map(|per_axis| EntryCopies::over(axes.iter().map(|&a| per_axis[a]))));
            }
            (out, n)
        };
        let classes_of = |(flat, n): &(Vec<EntryCopies>, usize), parts: usize| if *n == 0 { (vec![0; parts], vec![0]) } else { classes(flat.chunks_exact(*n)) };
        let (spatial, reduction) = (entries(true, &parts.spatial), entries(false, &parts.reduction));
        let (spatial_class, spatial_first) = classes_of(&spatial, parts.spatial.len());
        let (reduction_class, reduction_first) = classes_of(&reduction, parts.reduction.len());
        let entry = |(flat, n): &(Vec<EntryCopies>, usize), part: usize, k: usize| flat[part * n + k];
        let mut copies = Vec::with_capacity(spatial_first.len() * reduction_first.len());
        for &si in &spatial_first {
            for &ri in &reduction_first {
                copies.push(Self::copies_over(layout.iter().map(|&(sp, k)| if sp { entry(&spatial, si, k) } else { entry(&reduction, ri, k) })));
            }
        }
        ReadCopies { bytes: self.pack_box_bytes(cfg, r, level), spatial_class, reduction_class, reduction_classes: reduction_first.len(), copies }
    }

    /// `cfg` with each packable read, in turn, given the pack choice the
    /// model predicts fastest (ties: the earlier choice, unpacked first),
    /// each choice with its [`Problem::best_order`].
    pub fn best_packing(&self, cfg: &Config) -> Config {
        self.best_packing_with(cfg, &|c| self.predict(c))
    }

    /// [`Problem::best_packing`] by another prediction (a cost model's).
    pub fn best_packing_with(&self, cfg: &Config, predict: &dyn Fn(&Config) -> f64) -> Config {
        let mut best = cfg.clone();
        // Every choice has `cfg`'s tiles: the copies per order are shared.
        let mut memo = OrderCopies::default();
        best.order = self.best_order_with(&best, &mut memo);
        for &r in &self.packable {
            let mut time = predict(&best);
            for c in self.pack_choices(r) {
                let mut n = best.clone();
                n.pack[r] = c;
                n.order = self.best_order_with(&n, &mut memo);
                let t = predict(&n);
                if t < time {
                    time = t;
                    best = n;
                }
            }
        }
        best
    }
}

/// What the micro-kernel loses to its own cache fills beyond the
/// roofline's `max(busy, fill)`: the lines the innermost tiles bring in
/// from the memory above (a CPU's L1 from L2) share the load pipes and
/// fill buffers with the micro-kernel's loads, so as the fill time nears
/// the kernel's own the two stop overlapping, as a queue's wait grows near
/// full use. The overlap is taken as the 4-norm of the two times, which is
/// the larger where one is much the smaller (a fill at a quarter of the
/// compute costs 0.1% more) and 19% above it where they are equal. (int8
/// GEMM 1024 on a Zen 4 core: a 2 x 128 register tile, whose panel of `B`
/// comes from L2 at 93% of its 32 bytes a clock, ran 4.9 ms against 4.7
/// for 4 x 64 at half that, and 6.2 against 5.2 in turns with
/// onnxruntime; the roofline ranked the first one ahead.)
pub(super) fn fill_contention(busy: f64, fill: f64) -> f64 {
    if busy <= 0.0 || fill <= 0.0 {
        return 0.0;
    }
    let (hi, lo) = (busy.max(fill), busy.min(fill));
    hi * ((1.0 + (lo / hi).powi(4)).powf(0.25) - 1.0)
}

/// Iterations per core past which a parallel nest's partial tiles are
/// left to the wave count: there they shift each core's share by under
/// 1/64, and dealing them out costs the model time on every prediction.
const DEALT_PER_CORE: u64 = 64;

/// The most iterations dealt out in all, whatever the cores: a prediction
/// is made tens of thousands of times a search, and on many cores the
/// deal would cost more than the rest of it (issue 23's 2 s construction).
const MOST_DEALT: u64 = 1024;

/// The share of `cores` kept busy by a parallel nest whose axes, given as
/// (extent, core tile) pairs, each run whole tiles and at most one partial
/// tile: the nest's points over the cores times the points of the busiest
/// core. The iterations are dealt largest first, each to the core with the
/// fewest points so far, as the runtime's shares and stealing come close
/// to (`runtime/src/pool.rs`). Nests of more than [`DEALT_PER_CORE`]
/// iterations a core, or [`MOST_DEALT`] in all, are counted in waves of
/// whole tiles, as before.
pub(crate) fn core_tile_balance(axes: &[(u64, u64)], cores: usize) -> f64 {
    let cores = cores.max(1);
    let iterations: u64 = axes.iter().map(|&(extent, tile)| extent.div_ceil(tile.max(1))).product();
    if cores == 1 || iterations == 0 {
        return 1.0;
    }
    if iterations > (DEALT_PER_CORE * cores as u64).min(MOST_DEALT) {
        let waves = iterations.div_ceil(cores as u64);
        return iterations as f64 / (waves * cores as u64) as f64;
    }
    // The distinct iteration sizes (points) and how many of each: every
    // axis gives its whole tiles and its partial one.
    let mut sizes: Vec<(u64, u64)> = vec![(1, 1)];
    for &(extent, tile) in axes {
        let tile = tile.max(1);
        let (whole, rest) = (extent / tile, extent % tile);
        let parts: Vec<(u64, u64)> = [(tile, whole), (rest, u64::from(rest > 0))].into_iter().filter(|&(_, n)| n > 0).collect();
        sizes = sizes.iter().flat_map(|&(size, count)| parts.iter().map(move |&(s, n)| (size * s, count * n))).collect();
    }
    sizes.sort_unstable_by(|a, b| b.0.cmp(&a.0));
    let mut loads = std::collections::BinaryHeap::from(vec![std::cmp::Reverse(0u64); cores]);
    for (size, count) in sizes {
        for _ in 0..count {
            let std::cmp::Reverse(least) = loads.pop().expect("one load per core");
            loads.push(std::cmp::Reverse(least + size));
        }
    }
    let busiest = loads.into_iter().map(|std::cmp::Reverse(l)| l).max().unwrap_or(0);
    let points: u64 = axes.iter().map(|&(extent, _)| extent).product();
    if busiest == 0 { 1.0 } else { points as f64 / (busiest as f64 * cores as f64) }
}
