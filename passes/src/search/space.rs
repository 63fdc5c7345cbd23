//! The schedule space one compute op has on one target.
//!
//! A [`Config`] is Gensor's ETIR state without its current level: per axis
//! one tile size per tile level of the target (outermost first, each
//! dividing the one before), per axis a virtual-thread count, and on CPUs
//! packing, loop order and vector axis. It becomes a typed
//! [`SchedulePlan`] by [`Problem::plan`] (and a [`Schedule`] by
//! [`Problem::schedule`]), which adds what follows from the target and is
//! the same for every strategy: on GPUs every stageable read staged into
//! the block level's shared memory, a vector width where the vector axis'
//! innermost tile allows one, and an unroll limit.
//!
//! The **footprint** `F(T, l)` of a tile at tile level `l` is counted by
//! the resource check's model (`tilec::target::resources::OpResources`),
//! and a point is valid when the resource check accepts its plan, so a
//! state the search accepts is a schedule the verifier accepts. The
//! analytic cost model over these points is `analytic.rs`.

use crate::nest::{OrderEntry, loop_order};
use std::sync::Arc;
use tilec::ir::schedule::outermost_tile_limit;
use tilec::ir::*;
use tilec::target::mapping::{self, IntrinsicAxis, Mapping};
use tilec::target::{Binding, ComputeInfo, Intrinsic, MemoryId, OpResources, SchedulePlan, Target, TargetKind, check_resources};

#[derive(Clone, Debug)]
pub struct Axis {
    pub name: String,
    pub extent: u64,
    pub spatial: bool,
}

/// A point of the space: `tiles[axis][level]`, `vthreads[axis]`, per read
/// where it is packed (CPU targets: 0 not packed, `l + 1` packed into a
/// contiguous buffer per tile of tile level `l`; always 0 on GPUs, whose
/// staging follows from the target), the loop order within the tile
/// levels (one of [`Problem::orders`]: axis indices, outermost first), and
/// the axis whose innermost loop runs on vector lanes (one of
/// [`Problem::vector_axes`]), and the tensor intrinsic that computes the
/// innermost tile (an index into [`Problem::intrinsics`]; `None`: the
/// vectorised loops do).
#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Config {
    pub tiles: Vec<Vec<u64>>,
    pub vthreads: Vec<u64>,
    pub pack: Vec<u8>,
    pub order: Vec<usize>,
    pub vector: Option<usize>,
    pub intrinsic: Option<usize>,
}

impl Clone for Config {
    fn clone(&self) -> Self {
        Config { tiles: self.tiles.clone(), vthreads: self.vthreads.clone(), pack: self.pack.clone(), order: self.order.clone(), vector: self.vector, intrinsic: self.intrinsic }
    }

    /// Field by field, keeping `self`'s buffers: the search completes a
    /// scratch copy for every move it weighs ([`Problem::complete_into`]).
    fn clone_from(&mut self, source: &Self) {
        self.tiles.clone_from(&source.tiles);
        self.vthreads.clone_from(&source.vthreads);
        self.pack.clone_from(&source.pack);
        self.order.clone_from(&source.order);
        self.vector = source.vector;
        self.intrinsic = source.intrinsic;
    }
}

impl Config {
    /// The tile level read `r` is packed at, if it is.
    pub fn pack_level(&self, r: usize) -> Option<usize> {
        self.pack.get(r).copied().filter(|&p| p > 0).map(|p| p as usize - 1)
    }
}

/// One intrinsic option of an op: an intrinsic the target offers and a
/// mapping of the op onto it whose mapped axes' extents split the
/// intrinsic's sizes (docs/search.md, "Tensor intrinsics in the space").
#[derive(Clone, Debug, PartialEq)]
pub struct IntrinsicOption {
    /// The intrinsic (a copy of the target's entry).
    pub intrinsic: Intrinsic,
    pub mapping: Mapping,
    /// Per op axis, its part of the intrinsic axis it is mapped onto (the
    /// whole size for a basic mapping, [`mapping::fused_parts`] of the op's
    /// extents for a fused one; 1 for an axis the mapping leaves out).
    parts: Vec<u64>,
    /// A warp intrinsic over a spatial axis whose extent is not a whole
    /// number of its part: its last tile computes padding, which
    /// `tensorize` keeps out of the output (`tensorize/padding.rs`).
    pub padded: bool,
}

/// The most work a padded option may add to its op: ResNet's 14 × 14
/// padded to 16 rows adds 14%, a GEMM's 40 rows padded to 48 20%.
const MAX_PADDING: f64 = 0.5;

impl IntrinsicOption {
    /// The option of `mapping` onto `x` for op `c`, if the mapped extents
    /// split the intrinsic's sizes, and for a fused mapping every op axis
    /// of a fused intrinsic axis gets a part of more than one point (else
    /// it is a basic mapping's, listed once as that). A warp intrinsic's
    /// `m` and `n` may also take an extent that is not a whole number of
    /// its part (the outermost op axis of a fused one; the inner ones
    /// always divide), padded, where that adds at most [`MAX_PADDING`] of
    /// the work; `k` is not padded here (`pad-axes` pads dot intrinsics'
    /// reductions).
    pub fn new(c: &Compute, x: &Intrinsic, mapping: Mapping) -> Option<IntrinsicOption> {
        let mut parts = vec![1; c.axes.len()];
        let mut work = 1.0;
        for ax in IntrinsicAxis::ALL {
            let axes = mapping.axes(ax);
            if axes.is_empty() {
                if ax.size(x) > 1 {
                    return None;
                }
                continue;
            }
            let extents: Vec<u64> = axes.iter().map(|&a| c.axis(a).extent).collect();
            let size = u64::from(ax.size(x));
            let split = match mapping::fused_parts(&extents, size) {
                Some(split) => split,
                None if !x.is_vector() && ax != IntrinsicAxis::K => mapping::fused_split(&extents, size),
                None => return None,
            };
            if axes.len() > 1 && split.contains(&1) {
                return None;
            }
            for ((&a, p), &e) in axes.iter().zip(split).zip(&extents) {
                parts[a.index()] = p;
                work *= (e.div_ceil(p.max(1)) * p) as f64 / e as f64;
            }
        }
        (work <= 1.0 + MAX_PADDING).then(|| IntrinsicOption { intrinsic: x.clone(), mapping, parts, padded: work > 1.0 })
    }

    /// The part of the intrinsic axis op axis `a` is mapped onto that it
    /// covers (1 for an axis the mapping leaves out): its innermost tile
    /// is a multiple of it.
    pub fn size_of(&self, a: usize) -> u64 {
        self.parts.get(a).copied().unwrap_or(1)
    }

    /// The op axis on the intrinsic's `m` (the lanes of a vector
    /// intrinsic), where one is (`None` for a fused `m`).
    pub fn m_axis(&self) -> Option<usize> {
        match self.mapping.m.as_slice() {
            [one] => Some(one.index()),
            _ => None,
        }
    }

    /// A vector intrinsic whose lanes run over several op axes (a fused
    /// `m`): no vector loop makes them; `tensorize` does, from the point
    /// loops, and their operands are gathered lane by lane.
    pub fn fused_lanes(&self) -> bool {
        !self.is_warp() && self.mapping.m.len() > 1
    }

    /// The op axes of a fused `m` (empty otherwise).
    pub fn lane_axes(&self) -> &[AxisId] {
        if self.fused_lanes() { &self.mapping.m } else { &[] }
    }

    /// Several op axes on the intrinsic's `k`.
    pub fn fused_k(&self) -> bool {
        self.mapping.k.len() > 1
    }

    /// A `dot` intrinsic: `k` multiply-adds per lane per instruction.
    pub fn is_dot(&self) -> bool {
        self.intrinsic.kind == "dot"
    }

    /// A warp intrinsic (`mma`): each thread-level tile is a warp's.
    pub fn is_warp(&self) -> bool {
        !self.intrinsic.is_vector()
    }
}

/// The intrinsic options of compute op `op` of `f` (with compute `c`) on
/// `target`, in a fixed order: the target's offered intrinsics that
/// `tensorize` rewrites and code generation compiles
/// ([`crate::tensorize::rewrites`]: vector ones on CPUs, m16n8 `mma` of
/// f16, bf16 and i8 on GPUs) in file order, each with its mapping
/// candidates in their order ([`mapping::candidates`]: basic ones, then
/// fused ones), keeping those whose mapped axes' extents split the
/// intrinsic's sizes ([`IntrinsicOption::new`]).
fn intrinsic_options(f: &Function, op: Op, c: &Compute, target: &Target) -> Vec<IntrinsicOption> {
    let Ok(con) = mapping::contraction(f, op) else { return Vec::new() };
    let mut out = Vec::new();
    for x in target.offered_intrinsics().filter(|x| crate::tensorize::rewrites(x)) {
        let Ok(maps) = mapping::candidates(c, &con, x) else { continue };
        let (basic, fused): (Vec<Mapping>, Vec<Mapping>) = maps.into_iter().partition(Mapping::is_basic);
        out.extend(basic.into_iter().chain(fused).filter_map(|m| IntrinsicOption::new(c, x, m)));
    }
    out
}

/// One op on one target. (Clone: a search of one mapping candidate is a
/// restricted copy, `Problem::restricted_to_intrinsic`.)
#[derive(Clone)]
pub struct Problem {
    pub func: String,
    pub op: Op,
    /// The op's workload key (`tilec::records::workload_key`): what records
    /// and a learned model's rows of this op are filed under.
    pub workload: String,
    pub compute: Compute,
    pub info: ComputeInfo,
    pub target: Arc<Target>,
    pub axes: Vec<Axis>,
    pub levels: usize,
    pub flops: f64,
    /// Reads that can be staged into the block level's shared memory (GPU;
    /// reads whose indices divide cannot be staged).
    pub stageable: Vec<usize>,
    /// Reads a CPU schedule may pack into a contiguous buffer (the same
    /// rule: indices that do not divide), and the tile levels whose memory
    /// can hold a packed copy (a `scope`).
    pub packable: Vec<usize>,
    pub pack_levels: Vec<usize>,
    /// The managed memory level of the outermost tile level (GPU `shared`).
    pub shared_level: Option<String>,
    /// The tile level whose spatial loops become GPU threads.
    pub thread_level: Option<usize>,
    /// The `grid` and `threads` tile levels a block's threads count
    /// between ([`OpResources::block_levels`]).
    block_levels: Option<(usize, usize)>,
    /// Virtual threads: Gensor's Formula 3 needs banks; only targets whose
    /// innermost staged memory has banks (GPU shared memory) get them.
    pub vthread_ok: bool,
    pub bank_width_elems: u64,
    /// The axes a vector width may go on, the default (the last spatial
    /// axis) first: on CPU targets every axis longer than 1 (a read walked
    /// along it that is not contiguous gathers, unless a packed copy puts
    /// it innermost; along a reduction axis each lane accumulates its own
    /// partial result, folded before the store); on GPUs the default alone.
    pub vector_axes: Vec<usize>,
    /// Per axis, the lanes of a vector register for the widest element a
    /// vector along it carries.
    pub lanes: Vec<u64>,
    /// The unroll limit every schedule gets.
    pub unroll: u64,
    /// The target's loop-order template, parsed (empty if it does not
    /// parse: the scheduling passes report that).
    pub order: Vec<OrderEntry>,
    /// See [`Problem::run_level`].
    pub(super) run_level: Option<usize>,
    /// The loop orders the space offers, declaration order first: on CPU
    /// targets every permutation of the spatial axes longer than 1, then of
    /// the reduction axes (at most [`MAX_PERMUTED_AXES`] of each are
    /// permuted); on GPUs declaration order alone.
    pub orders: Vec<Vec<usize>>,
    /// How each of [`Problem::orders`] is made: the order of its spatial
    /// axes and of its reduction axes (what the model's packed copies see,
    /// `analytic.rs`).
    pub order_parts: OrderParts,
    /// The tensor intrinsics a point may compute its innermost tile with
    /// ([`Problem::with_intrinsics`]; empty with the search option
    /// `intrinsics=none`).
    pub intrinsics: Vec<IntrinsicOption>,
    /// The mnemonics of the ops of the body and of the epilogue (TLM's
    /// sentences name them: `tensor_language.rs`).
    pub region_ops: Vec<Vec<&'static str>>,
    /// The one option of [`Problem::intrinsics`] every point must compute
    /// with (the search option `mapping=K`: one sub-task of GTA's dual-task
    /// scheduling, `dual_task.rs`); `None`: any option, or none.
    pub only_intrinsic: Option<usize>,
    /// The cores the analytical model predicts for: the target's (`None`),
    /// or fewer where the candidates are measured on fewer threads (the
    /// `search` pass sets it from its evaluator). The space and the rules
    /// keep to the target's: a schedule is valid for the target it names.
    pub model_cores: Option<u32>,
    /// Per read (as [`ComputeInfo`] numbers them): does it read a
    /// network's weight (a `weight` op)? On CPUs the `prepack` pass lays a
    /// weight's packed copies out once, outside the timed kernels, so the
    /// model charges such a copy the reading of its tile, not its making.
    pub weights: Vec<bool>,
}

/// The most axes of one kind (spatial, reduction) whose order the CPU space
/// permutes (5! = 120 orders); the others keep declaration order after them.
pub const MAX_PERMUTED_AXES: usize = 5;

/// On CPUs, the register tile is unrolled whole up to this many times as
/// many accumulators as the core has vector registers ([`Problem::plan`]).
pub const MAX_REGISTER_TILES: u64 = 4;

/// Every permutation of `xs`, in lexicographic order of positions (`xs`
/// itself first).
fn permutations(xs: &[usize]) -> Vec<Vec<usize>> {
    if xs.len() <= 1 {
        return vec![xs.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..xs.len() {
        let mut rest = xs.to_vec();
        let first = rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, first);
            out.push(tail);
        }
    }
    out
}

/// Each loop order of [`Problem::orders`] as a spatial part and a
/// reduction part: the axes of each kind in the order's order.
#[derive(Clone, Debug, Default)]
pub struct OrderParts {
    /// The distinct orders of the spatial axes, and of the reduction axes.
    pub spatial: Vec<Vec<usize>>,
    pub reduction: Vec<Vec<usize>>,
}

impl OrderParts {
    /// The order with spatial part `s` and reduction part `r`: the orders
    /// are every spatial part with every reduction part, spatial-major.
    pub fn order_of(&self, s: usize, r: usize) -> usize {
        s * self.reduction.len() + r
    }
}

/// The loop orders of axes `axes` (see [`Problem::orders`]), and how each
/// is made.
fn loop_orders(axes: &[Axis], gpu: bool) -> (Vec<Vec<usize>>, OrderParts) {
    let identity: Vec<usize> = (0..axes.len()).collect();
    let kind = |o: &[usize], spatial: bool| -> Vec<usize> { o.iter().copied().filter(|&a| axes[a].spatial == spatial).collect() };
    if gpu {
        let parts = OrderParts { spatial: vec![kind(&identity, true)], reduction: vec![kind(&identity, false)] };
        return (vec![identity], parts);
    }
    // Per kind: the axes that make loops (permuted) and the rest.
    let group = |spatial: bool| -> (Vec<usize>, Vec<usize>) {
        let of_kind: Vec<usize> = (0..axes.len()).filter(|&a| axes[a].spatial == spatial).collect();
        let moving: Vec<usize> = of_kind.iter().copied().filter(|&a| axes[a].extent > 1).take(MAX_PERMUTED_AXES).collect();
        let rest = of_kind.into_iter().filter(|a| !moving.contains(a)).collect();
        (moving, rest)
    };
    let (spatial, spatial_rest) = group(true);
    let (reduction, reduction_rest) = group(false);
    let mut out = Vec::new();
    let (spatial_perms, reduction_perms) = (permutations(&spatial), permutations(&reduction));
    let mut parts = OrderParts::default();
    for s in &spatial_perms {
        parts.spatial.push(s.iter().chain(&spatial_rest).copied().collect());
    }
    for r in &reduction_perms {
        parts.reduction.push(r.iter().chain(&reduction_rest).copied().collect());
    }
    for (si, s) in spatial_perms.iter().enumerate() {
        for (ri, r) in reduction_perms.iter().enumerate() {
            let mut o = s.clone();
            o.extend(&spatial_rest);
            o.extend(r);
            o.extend(&reduction_rest);
            // The order's parts are the kinds' axes in its order (spatial
            // and reduction axes never interleave here).
            debug_assert_eq!((kind(&o, true), kind(&o, false)), (parts.spatial[si].clone(), parts.reduction[ri].clone()));
            debug_assert_eq!(parts.order_of(si, ri), out.len());
            out.push(o);
        }
    }
    (out, parts)
}

pub fn divisors(n: u64) -> Vec<u64> {
    let mut d: Vec<u64> = (1..).take_while(|i| i * i <= n).filter(|i| n % i == 0).flat_map(|i| [i, n / i]).collect();
    d.sort_unstable();
    d.dedup();
    d
}

/// The sizes 3 · 2^p (p ≥ 1) below `parent` that do not divide it: what
/// a middle tile level may take under a tile covering its axis
/// ([`Problem::uneven_middle_ok`]), for register tiles of 3, 6 or 12.
pub fn multiples_of_three(parent: u64) -> impl Iterator<Item = u64> {
    (1..u64::BITS - 2).map(|p| 3u64 << p).take_while(move |&s| s < parent).filter(move |&s| !parent.is_multiple_of(s))
}

/// The greatest common divisor of `a` and `b` (1 when both are 0, so it
/// can divide).
pub fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
}

impl Problem {
    /// The problem of compute op `op` of `f` on `target`; `None` if `op` is
    /// not a well-formed compute op.
    pub fn new(f: &Function, op: Op, target: Arc<Target>, unroll: u64) -> Option<Problem> {
        let c = f.op(op).kind.as_compute()?.clone();
        let info = ComputeInfo::of(f, op)?;
        let axes: Vec<Axis> = c.axes.iter().map(|a| Axis { name: a.name.clone(), extent: a.extent.max(1), spatial: a.kind == AxisKind::Spatial }).collect();
        let levels = target.tile_levels.len();
        let points: f64 = axes.iter().map(|a| a.extent as f64).product();
        let regions = &f.op(op).regions;
        let arith = |r: Region| f.region(r).ops.iter().filter(|&&o| matches!(f.op(o).kind, OpKind::Unary(_) | OpKind::Binary(_))).count() as f64;
        let per_point = regions.first().map_or(0.0, |&r| arith(r)) + if c.combiner.is_some() { 1.0 } else { 0.0 };
        let outputs: f64 = axes.iter().filter(|a| a.spatial).map(|a| a.extent as f64).product();
        let flops = (points * per_point.max(1.0) + outputs * regions.get(1).map_or(0.0, |&r| arith(r))).max(1.0);
        let gpu = target.kind == TargetKind::Cuda;
        let first_mem = target.tile_levels.first().and_then(|l| target.memory_level(&l.memory));
        let shared_level = first_mem.filter(|m| gpu && m.managed && m.scope.is_some()).map(|m| m.name.clone());
        // Only the body's reads are worth a copy: an epilogue's are read
        // once per output element, after the reduction.
        let stageable = if shared_level.is_some() { c.reads.iter().enumerate().filter(|(_, r)| r.indices.iter().all(|e| e.divisor() == 1)).map(|(i, _)| i).collect() } else { Vec::new() };
        let (packable, pack_levels) = if gpu {
            (Vec::new(), Vec::new())
        } else {
            let levels = (0..levels).filter(|&l| target.memory_level(&target.tile_levels[l].memory).is_some_and(|m| m.scope.is_some() && !m.managed)).collect::<Vec<_>>();
            let reads = if levels.is_empty() { Vec::new() } else { c.reads.iter().enumerate().filter(|(_, r)| r.indices.iter().all(|e| e.divisor() == 1)).map(|(i, _)| i).collect() };
            (reads, levels)
        };
        let order = loop_order(&target).unwrap_or_default();
        let run_level = super::analytic::run_level_of(&order, levels);
        let thread_level = target.tile_levels.iter().position(|l| l.binding == Binding::Threads);
        let has_v = target.has_vthread_loops();
        let banks = first_mem.filter(|m| m.banks > 0 && m.bank_width_bytes > 0);
        let vthread_ok = gpu && has_v && banks.is_some() && !stageable.is_empty();
        let elem = info.acc.size_bytes().max(1);
        let bank_width_elems = banks.map_or(1, |m| (m.bank_width_bytes as u64 / elem).max(1));
        let default_vector = c.axes.iter().rposition(|a| a.kind == AxisKind::Spatial);
        // The widest element the vector lanes carry, as the resource check
        // counts it.
        let lanes = c.axis_ids().map(|id| OpResources::new(&c, &info, &target).lanes(id)).collect::<Vec<u64>>();
        let mut vector_axes: Vec<usize> = default_vector.into_iter().collect();
        if !gpu {
            vector_axes.extend((0..axes.len()).filter(|&a| axes[a].spatial && axes[a].extent > 1 && Some(a) != default_vector));
            // A reduction axis is worth a vector where a read walks it
            // contiguously as it is (GEMV's rows) for at least a whole
            // vector; otherwise its lanes would gather, and markov would
            // spend a whole budget on it (each vector axis gets one).
            let ids: Vec<AxisId> = c.axis_ids().collect();
            vector_axes.extend((0..axes.len()).filter(|&a| {
                !axes[a].spatial && axes[a].extent >= lanes[a] && lanes[a] > 1 && c.all_reads().any(|(_, r)| Self::walks_contiguously(&r.indices, ids[a], None))
            }));
        }
        let block_levels = OpResources::new(&c, &info, &target).block_levels();
        let (orders, order_parts) = loop_orders(&axes, gpu);
        let nreads = info.reads.len();
        Some(Problem {
            func: f.name.clone(),
            op,
            workload: tilec::records::workload_key(f, op).unwrap_or_default(),
            compute: c,
            info,
            target,
            levels,
            flops,
            stageable,
            packable,
            pack_levels,
            shared_level,
            thread_level,
            block_levels,
            vthread_ok,
            bank_width_elems,
            vector_axes,
            lanes,
            unroll,
            order,
            run_level,
            orders,
            order_parts,
            axes,
            intrinsics: Vec::new(),
            region_ops: regions.iter().map(|&r| f.region(r).ops.iter().map(|&o| f.op(o).kind.mnemonic()).collect()).collect(),
            only_intrinsic: None,
            model_cores: None,
            weights: f.op(op).operands.iter().take(nreads).map(|&v| f.def_op(v).is_some_and(|d| matches!(f.op(d).kind, OpKind::Weight(_)))).collect(),
        })
    }

    /// The problem with the intrinsic options of its op (`f` is the
    /// function [`Problem::new`] had): [`intrinsic_options`]. (The search
    /// option `intrinsics=auto`; [`Problem::new`] alone is
    /// `intrinsics=none`.)
    pub fn with_intrinsics(mut self, f: &Function) -> Problem {
        self.intrinsics = intrinsic_options(f, self.op, &self.compute, &self.target);
        self
    }

    /// The problem whose points all compute with intrinsic option `k`
    /// (the space of one mapping candidate: a GTA sub-task). Option
    /// numbers stay those of the whole space, so points of different
    /// sub-tasks of one op never compare equal. `Err` names the options
    /// when there is no option `k`.
    pub fn restricted_to_intrinsic(mut self, k: usize) -> Result<Problem, String> {
        if k >= self.intrinsics.len() {
            let listed: Vec<String> = (0..self.intrinsics.len()).map(|i| format!("{i}: {}", self.describe_intrinsic(i))).collect();
            return Err(if listed.is_empty() {
                format!("mapping={k}, but no intrinsic the target offers computes this op (or intrinsics=none)")
            } else {
                format!("mapping={k}, but this op has {} intrinsic option(s) in the space ({})", listed.len(), listed.join("; "))
            });
        }
        self.only_intrinsic = Some(k);
        Ok(self)
    }

    /// Is `cfg` a point of this problem's mapping ([`Problem::only_intrinsic`];
    /// every point is, without a restriction)? Points of one op's other
    /// mappings share its search's measurements but not its space.
    pub fn in_space(&self, cfg: &Config) -> bool {
        match self.only_intrinsic {
            Some(k) => cfg.intrinsic == Some(k),
            // Without options (`Problem::without_intrinsics`), plain points.
            None => cfg.intrinsic.is_none_or(|i| i < self.intrinsics.len()),
        }
    }

    /// The problem without its intrinsic options: the plain space
    /// (`intrinsics=none`), whose points a search of the whole op shares.
    pub fn without_intrinsics(mut self) -> Problem {
        self.intrinsics.clear();
        self.only_intrinsic = None;
        self
    }

    /// The intrinsic option `cfg` computes with, if any.
    pub fn intrinsic_of(&self, cfg: &Config) -> Option<&IntrinsicOption> {
        cfg.intrinsic.and_then(|i| self.intrinsics.get(i))
    }

    /// Option `i` in words: `vpdpbusd.zmm a=%B m=[j] n=[] k=[k]`.
    pub fn describe_intrinsic(&self, i: usize) -> String {
        let x = &self.intrinsics[i];
        let padded = if x.padded { " (padded)" } else { "" };
        format!("{} {}{padded}", x.intrinsic.name, x.mapping.describe(&self.compute, &self.info))
    }

    /// The intrinsic choices of a point: none, then each option (just the
    /// one option of a restricted problem, [`Problem::only_intrinsic`]).
    pub fn intrinsic_choices(&self) -> Vec<Option<usize>> {
        match self.only_intrinsic {
            Some(k) => vec![Some(k)],
            None => std::iter::once(None).chain((0..self.intrinsics.len()).map(Some)).collect(),
        }
    }

    /// The smallest innermost tile axis `a` may take in `cfg`: its virtual
    /// threads, times the intrinsic's size along it where `cfg` maps it
    /// onto an intrinsic.
    fn innermost_unit(&self, cfg: &Config, a: usize) -> u64 {
        cfg.vthreads[a].max(1) * self.intrinsic_of(cfg).map_or(1, |x| x.size_of(a))
    }

    /// The starting state of a search with intrinsic choice `intrinsic`:
    /// [`Problem::initial`], or for an option, its mapped axes' tiles one
    /// intrinsic tile at every level the target does not fix, and the
    /// vector on its `m` axis.
    pub fn start(&self, intrinsic: Option<usize>) -> Config {
        let mut cfg = self.initial();
        let Some(x) = intrinsic.and_then(|i| self.intrinsics.get(i)) else { return cfg };
        cfg.intrinsic = intrinsic;
        for a in 0..self.axes.len() {
            for l in 0..self.levels {
                if !self.fixed(a, l) {
                    cfg.tiles[a][l] = x.size_of(a);
                }
            }
        }
        // A vector intrinsic's lanes are the vector loop's; a warp's are
        // its own.
        cfg.vector = if x.is_warp() { None } else { x.m_axis() };
        // A dot product's lanes operand starts packed (where it can be):
        // `tensorize` turns a packed copy into VNNI's layout, and the model
        // charges an unpacked one a gather per instruction.
        if x.is_dot()
            && !x.fused_lanes()
            && !x.fused_k()
            && self.packable.contains(&x.mapping.a)
            && let Some(&l) = self.pack_levels.first()
        {
            cfg.pack[x.mapping.a] = l as u8 + 1;
        }
        cfg
    }

    pub fn gpu(&self) -> bool {
        self.target.kind == TargetKind::Cuda
    }

    /// The resource model the verifier's check counts with.
    pub fn resources(&self) -> OpResources<'_> {
        OpResources::new(&self.compute, &self.info, &self.target)
    }

    /// Is the size of axis `a` at `level` fixed at the extent (a reduction
    /// axis at a level without reduction loops)?
    pub fn fixed(&self, a: usize, level: usize) -> bool {
        // A CPU core's tile covers the whole reduction: its level has no
        // reduction loops.
        !self.axes[a].spatial && !self.target.has_reduction_loops(level)
    }

    /// The starting state: every size 1, except fixed ones (the extent).
    pub fn initial(&self) -> Config {
        let tiles = (0..self.axes.len())
            .map(|a| {
                let mut t = vec![1; self.levels];
                let mut l = 0;
                while l < self.levels && self.fixed(a, l) {
                    t[l] = self.axes[a].extent;
                    l += 1;
                }
                t
            })
            .collect();
        Config { tiles, vthreads: vec![1; self.axes.len()], pack: vec![0; self.nreads()], order: self.orders[0].clone(), vector: self.vector_axes.first().copied(), intrinsic: None }
    }

    /// The pack choices of read `r` (0: none, `l + 1`: tile level `l`);
    /// just `[0]` for a read that cannot be packed.
    pub fn pack_choices(&self, r: usize) -> Vec<u8> {
        let mut v = vec![0u8];
        if self.packable.contains(&r) {
            v.extend(self.pack_levels.iter().map(|&l| l as u8 + 1));
        }
        v
    }

    /// On CPUs, a spatial axis that may carry the vector (one of
    /// [`Problem::vector_axes`]) and whose extent is not whole vectors:
    /// its extent rounded up to whole vectors, an outermost tile whose last
    /// vector is masked (a 49-point axis as 7 vectors of 8, where the
    /// powers of two give 32 and a partial tile of 17, and the divisors 7
    /// lanes at most; a 7-point axis as one vector of 8). Offered whatever
    /// the point's vector axis (the vector knob comes after the tiles), and
    /// kept by [`Problem::valid`] only on the vector axis and within the
    /// vector width the point ends up with, as the verifier does.
    fn whole_vectors(&self, a: usize) -> Option<u64> {
        let lanes = self.cpu_vector_lanes(a)?;
        let ext = self.axes[a].extent;
        (ext > 1 && !ext.is_multiple_of(lanes)).then(|| outermost_tile_limit(ext, lanes))
    }

    /// The lanes of a vector along axis `a` where, on a CPU, it is a
    /// spatial axis that may carry the vector ([`Problem::vector_axes`])
    /// with more than one lane: the axes the vector-only tile sizes are
    /// offered on.
    fn cpu_vector_lanes(&self, a: usize) -> Option<u64> {
        let lanes = self.lanes.get(a).copied().unwrap_or(1);
        (!self.gpu() && self.axes[a].spatial && self.vector_axes.contains(&a) && lanes > 1).then_some(lanes)
    }

    /// Does every outermost tile lie within its axis' extent, but for the
    /// vector axis' rounded up to whole vectors of the point's width (the
    /// verifier's [`outermost_tile_limit`])?
    pub fn tiles_within_extents(&self, cfg: &Config) -> bool {
        (0..self.axes.len()).all(|a| {
            let width = if cfg.vector == Some(a) { self.vector_width(cfg) } else { 1 };
            cfg.tiles[a][0] <= outermost_tile_limit(self.axes[a].extent, width)
        })
    }

    /// The sizes axis `a` may take at `level` given the other levels of
    /// `cfg`: at the outermost level the divisors of the extent, the
    /// powers of two below it (partial tiles are legal) and the extent in
    /// whole vectors ([`Problem::whole_vectors`]), else the divisors
    /// of the level above; multiples of the level below (and of the
    /// virtual threads at the innermost level). Ascending. With an
    /// intrinsic, no partial tiles (the outermost level divides the
    /// extent) and the innermost tile of a mapped axis whole intrinsic
    /// tiles per virtual thread.
    pub fn choices(&self, cfg: &Config, a: usize, level: usize) -> Vec<u64> {
        let ext = self.axes[a].extent;
        if self.fixed(a, level) {
            return vec![if level == 0 { ext } else { cfg.tiles[a][level - 1] }];
        }
        let mut c = if level == 0 && cfg.intrinsic.is_some() {
            let mut d = divisors(ext);
            // A padded option's spatial axis: whole intrinsic parts past
            // the extent too (40 rows in tiles of 16 or 32: 48 or 64 computed).
            if let Some(x) = self.intrinsic_of(cfg).filter(|x| x.padded && self.axes[a].spatial) {
                let unit = x.size_of(a).max(1);
                d.extend((1..=ext.div_ceil(unit)).map(|q| q * unit));
                d.sort_unstable();
                d.dedup();
            }
            d
        } else if level == 0 {
            let mut d = divisors(ext);
            let mut p = 1;
            while p < ext {
                d.push(p);
                p *= 2;
            }
            if let Some(whole) = self.whole_vectors(a) {
                d.push(whole);
            }
            d.sort_unstable();
            d.dedup();
            d
        } else {
            let parent = cfg.tiles[a][level - 1];
            let mut d = divisors(parent);
            if level + 1 == self.levels
                && let Some(lanes) = self.cpu_vector_lanes(a)
            {
                // Uneven sizes are whole vectors: only those are tried.
                d.extend((lanes..parent).step_by(lanes as usize).take(self.target.isa.vector_registers as usize).filter(|&s| self.uneven_ok(cfg, a, parent, s)));
            }
            if level + 1 < self.levels && self.uneven_middle_ok(cfg, a, parent) {
                d.extend(multiples_of_three(parent));
            }
            d.sort_unstable();
            d.dedup();
            d
        };
        let below = if level + 1 < self.levels { cfg.tiles[a][level + 1] } else { self.innermost_unit(cfg, a) };
        c.retain(|&s| s % below.max(1) == 0 || (level + 2 == self.levels && self.uneven_ok(cfg, a, s, below)) || (level + 2 < self.levels && self.uneven_middle(cfg, a, s, below)));
        c
    }

    /// May an innermost (register) tile of `size` split axis `a`'s tiles
    /// of `parent` unevenly (the last one partial, guarded)? On CPUs,
    /// where the tile above covers the whole axis (so the overhang lies
    /// past the extent, which the guards already check: the verifier's
    /// rule), on an axis that may carry the vector (spatial, no virtual
    /// threads, no intrinsic), in whole vectors, at most a register file
    /// of them (on another axis than the point's vector axis it is valid,
    /// as the verifier says, but a walk does not step there:
    /// [`Problem::walk_choices`]). This is what gives a 49-point axis the 3-vector register
    /// tiles that 12 accumulators need on 16 registers (4 x 24: ResNet-50
    /// R12 as a GEMM with N = 49), where its divisors allow 7 lanes and the
    /// powers of two 4 vectors over 2 rows. (The verifier allows more: any
    /// level and axis under a covering tile. The space keeps to the
    /// register tile along the vector axis, which pays without repacking
    /// an operand, and so grows little.)
    fn uneven_ok(&self, cfg: &Config, a: usize, parent: u64, size: u64) -> bool {
        let Some(lanes) = self.cpu_vector_lanes(a) else { return false };
        let plain = cfg.intrinsic.is_none() && cfg.vthreads.get(a).is_none_or(|&v| v <= 1);
        plain && parent >= self.axes[a].extent && size < parent && !parent.is_multiple_of(size.max(1)) && size.is_multiple_of(lanes) && size <= lanes * u64::from(self.target.isa.vector_registers)
    }

    /// May a middle tile level (neither the outermost nor the register
    /// tile) of axis `a` split its `parent` unevenly? On CPUs, where the
    /// parent covers the whole axis (the verifier's rule: the overhang
    /// lies past the extent, where the guards stop it), on a spatial axis
    /// without virtual threads or an intrinsic. The space offers such a
    /// level only sizes of 3 · 2^p ([`multiples_of_three`]): they carry
    /// register tiles of 3, 6 or 12 rows, which divide no power of two.
    /// With 16 vector registers a register tile of 6 rows by 2 vectors
    /// keeps 12 accumulators (BLIS's 6 x 16 on AVX2) where rows dividing
    /// 1024 allow 8 (4 x 2) or 16, which leaves no register for the
    /// operands; with 32 registers, 6 x 4 or 12 x 2 keep 24. Measured on
    /// a Zen 3 VM (docs/performance.md, "Register tiles of 6 rows"):
    /// GEMM 1024 with `i = [1024, 96, 6]` ran 1.6-2.8% faster than with
    /// `i = [512, 64, 4]`, the same schedule otherwise.
    fn uneven_middle_ok(&self, cfg: &Config, a: usize, parent: u64) -> bool {
        let plain = cfg.intrinsic.is_none() && cfg.vthreads.get(a).is_none_or(|&v| v <= 1);
        !self.gpu() && self.axes[a].spatial && plain && parent >= self.axes[a].extent
    }

    /// Is `size` one of the uneven sizes a middle level under `parent`
    /// may take ([`Problem::uneven_middle_ok`], [`multiples_of_three`])?
    fn uneven_middle(&self, cfg: &Config, a: usize, parent: u64, size: u64) -> bool {
        self.uneven_middle_ok(cfg, a, parent) && multiples_of_three(parent).any(|s| s == size)
    }

    /// Does every tile level split the level above into whole tiles, or
    /// the innermost unevenly where [`Problem::uneven_ok`] allows it, or a
    /// middle one where [`Problem::uneven_middle_ok`] does?
    pub fn tiles_nest(&self, cfg: &Config) -> bool {
        (0..self.axes.len()).all(|a| {
            let t = &cfg.tiles[a];
            (1..t.len())
                .all(|l| t[l - 1].is_multiple_of(t[l].max(1)) || (l + 1 == t.len() && self.uneven_ok(cfg, a, t[l - 1], t[l])) || (l + 1 < t.len() && self.uneven_middle(cfg, a, t[l - 1], t[l])))
        })
    }

    /// [`Problem::tiles_within_extents`] and [`Problem::tiles_nest`]: the
    /// tile sizes' structural rules (the verifier's), beside the resource
    /// check's.
    pub fn tiles_fit(&self, cfg: &Config) -> bool {
        self.tiles_within_extents(cfg) && self.tiles_nest(cfg)
    }

    /// [`Problem::choices`] without the sizes meant for the vector axis (a
    /// tile past the extent, which only it may take; an uneven register
    /// tile, whose whole vectors pay only along it) where `cfg`'s vector
    /// is on another axis: what a walk that has chosen its vector steps
    /// through. (An uneven middle level stays: it carries register tiles
    /// of 3, 6 or 12 rows off the vector axis.)
    pub fn walk_choices(&self, cfg: &Config, a: usize, level: usize) -> Vec<u64> {
        let mut c = self.choices(cfg, a, level);
        if cfg.vector != Some(a) {
            let ext = self.axes[a].extent;
            c.retain(|&s| if level == 0 { s <= ext } else { cfg.tiles[a][level - 1].is_multiple_of(s.max(1)) || (level + 1 < self.levels && self.uneven_middle(cfg, a, cfg.tiles[a][level - 1], s)) });
        }
        c
    }

    /// `t(a)` at `level`, as the resource check defines it.
    pub(super) fn range_of(&self, cfg: &Config, a: usize, level: usize) -> u64 {
        self.resources().range(AxisId::new(a), level, cfg.tiles[a][level])
    }

    /// Bytes of read `r` over a tile with ranges `t`.
    pub(super) fn read_bytes<F: Fn(AxisId) -> u64 + ?Sized>(&self, r: usize, t: &F) -> u64 {
        self.resources().read_bytes(r, t)
    }

    pub(super) fn nreads(&self) -> usize {
        self.info.reads.len()
    }

    /// Gensor's/Roller's footprint `F` of a tile of `level`, in bytes, as
    /// the resource check counts it for the schedule [`Problem::schedule`]
    /// makes (which stages the stageable reads in the shared level).
    pub fn footprint(&self, cfg: &Config, level: usize) -> u64 {
        let Some(m) = self.target.memory_level(&self.target.tile_levels[level].memory) else { return 0 };
        let staged = self.shared_level.as_deref() == Some(m.name.as_str());
        // Each axis' range once: the footprint asks for them per index.
        let ranges: Vec<u64> = (0..self.axes.len()).map(|a| self.range_of(cfg, a, level)).collect();
        self.resources().footprint(level, m, &|r| staged && self.stageable.contains(&r), &|id| ranges[id.index()], self.lanes_per_tile(cfg))
    }

    /// The capacity a tile of `level` gets (a per-device cache is shared by
    /// the tiles running at once on the cores or SMs).
    pub fn capacity(&self, level: usize) -> u64 {
        let Some(m) = self.target.memory_level(&self.target.tile_levels[level].memory) else { return u64::MAX };
        self.resources().capacity(level, m).bytes
    }

    /// Tiles of the outermost level (what runs in parallel on the cores or
    /// SMs).
    pub fn parallel_tiles(&self, cfg: &Config) -> u64 {
        self.axes.iter().enumerate().filter(|(_, a)| a.spatial).map(|(i, a)| a.extent.div_ceil(cfg.tiles[i][0].max(1))).product()
    }

    /// Does a move from `cfg` to `next` at `level` keep the machine busy? At
    /// a `parallel`/`grid` level, a move that leaves fewer tiles than cores
    /// or SMs (and fewer than before) does not; at a GPU `threads` level,
    /// one that leaves fewer than the target's `min_warps_per_block` warps per block (and fewer
    /// than before). The model gives such moves probability 0, as it does
    /// to a move over a capacity.
    pub fn keeps_parallelism(&self, cfg: &Config, next: &Config, level: usize) -> bool {
        let (n, n2, min) = match self.target.tile_levels[level].binding {
            Binding::Parallel | Binding::Grid => (self.parallel_tiles(cfg), self.parallel_tiles(next), self.target.compute.units.max(1) as u64),
            Binding::Threads => (self.threads(cfg), self.threads(next), self.target.compute.min_warps_per_block as u64 * self.target.compute.warp_size.max(1) as u64),
            Binding::Serial => return true,
        };
        n2 >= n || n2 >= min
    }

    /// GPU threads per block: the thread-level tiles, times 32 lanes each
    /// with a warp intrinsic.
    pub fn threads(&self, cfg: &Config) -> u64 {
        self.tiles_per_block(cfg).saturating_mul(self.lanes_per_tile(cfg))
    }

    /// Thread-level tiles per block (the IR's threads).
    pub fn tiles_per_block(&self, cfg: &Config) -> u64 {
        self.block_levels.map_or(1, |(g, t)| self.resources().threads_between(g, t, &|a, l| cfg.tiles[a.index()][l]))
    }

    /// Hardware threads per thread-level tile: a warp's 32 lanes with a
    /// warp intrinsic, else 1.
    pub fn lanes_per_tile(&self, cfg: &Config) -> u64 {
        if self.intrinsic_of(cfg).is_some_and(IntrinsicOption::is_warp) { WARP_LANES } else { 1 }
    }

    /// Does `level` of `cfg` fit (footprint within capacity; on GPUs at the
    /// thread level, threads within the block limit)?
    pub fn fits(&self, cfg: &Config, level: usize) -> bool {
        self.fitting_footprint(cfg, level).is_some()
    }

    /// [`Problem::fits`], with the footprint it computed where it does.
    pub fn fitting_footprint(&self, cfg: &Config, level: usize) -> Option<u64> {
        let footprint = self.footprint(cfg, level);
        if footprint > self.capacity(level) {
            return None;
        }
        if self.thread_level == Some(level) && self.threads(cfg) > self.target.compute.max_threads_per_block.max(1) as u64 {
            return None;
        }
        Some(footprint)
    }

    /// A state whose levels below `level` are not chosen yet, made a whole
    /// schedule: on CPUs the inner levels take the sizes of `level` (not
    /// tiled further); on GPUs the thread tile is the smallest that keeps
    /// the block within its thread limit ([`Problem::fix_threads`]).
    pub fn complete(&self, cfg: &Config, level: usize) -> Config {
        let mut c = cfg.clone();
        self.complete_in_place(&mut c, level);
        c
    }

    /// [`Problem::complete`] into `out`, reusing its buffers.
    pub fn complete_into(&self, cfg: &Config, level: usize, out: &mut Config) {
        out.clone_from(cfg);
        self.complete_in_place(out, level);
    }

    fn complete_in_place(&self, c: &mut Config, level: usize) {
        for l in level + 1..self.levels {
            if self.thread_level.is_some_and(|tl| l >= tl) {
                for a in 0..self.axes.len() {
                    if !self.fixed(a, l) {
                        // The smallest tile: one intrinsic tile where one is chosen.
                        c.tiles[a][l] = self.intrinsic_of(c).map_or(1, |x| x.size_of(a));
                    }
                }
            } else {
                for a in 0..self.axes.len() {
                    c.tiles[a][l] = c.tiles[a][l - 1];
                }
            }
        }
        if level + 1 < self.levels {
            c.vthreads.clear();
            c.vthreads.resize(self.axes.len(), 1);
        }
        self.fix_threads(c);
    }

    /// On GPUs, grows the thread tile of `cfg` (from its current sizes) until
    /// the block has at most the allowed threads: the axis with the most
    /// threads first. Returns false if it cannot.
    pub fn fix_threads(&self, cfg: &mut Config) -> bool {
        let Some(tl) = self.thread_level.filter(|&l| l > 0) else { return true };
        let max = self.target.compute.max_threads_per_block.max(1) as u64;
        while self.threads(cfg) > max {
            let best = (0..self.axes.len()).filter(|&a| self.axes[a].spatial).max_by_key(|&a| (cfg.tiles[a][tl - 1] / cfg.tiles[a][tl].max(1), std::cmp::Reverse(a)));
            let Some(a) = best else { return false };
            let next = self.choices(cfg, a, tl).into_iter().find(|&s| s > cfg.tiles[a][tl]);
            match next {
                Some(s) => cfg.tiles[a][tl] = s,
                None => return false,
            }
        }
        true
    }

    /// The vector width the schedule of `cfg` gets: the largest power of two
    /// up to the lanes that divides a virtual thread's share of the vector
    /// axis' innermost tile (0: none).
    /// With an intrinsic: its `m` lanes, on its `m` axis only.
    pub fn vector_width(&self, cfg: &Config) -> u64 {
        let Some(v) = cfg.vector else { return 0 };
        let share = cfg.tiles[v][self.levels - 1] / cfg.vthreads[v].max(1);
        if let Some(x) = self.intrinsic_of(cfg) {
            let m = u64::from(x.intrinsic.m);
            return if x.m_axis() == Some(v) && share.is_multiple_of(m) { m } else { 0 };
        }
        let mut w = self.lanes_of(cfg);
        while w > 1 {
            if share % w == 0 {
                return w;
            }
            w /= 2;
        }
        0
    }

    /// The typed plan of a state: its sizes, virtual threads, loop order
    /// and vector axis, plus what follows from the target (module docs):
    /// on GPUs the stageable reads staged in the block level's shared
    /// memory, on CPUs the packed reads staged in their tile level's
    /// memory, the vector width, the unroll limit.
    pub fn plan(&self, cfg: &Config) -> SchedulePlan {
        let mut plan = self.resource_plan(cfg);
        // The register tile unrolls whole, so its accumulators stay in
        // registers (a vector step counts once), up to a few times as many
        // accumulators as the core has vector registers: past that they
        // live in memory however the loops are unrolled, and unrolling
        // them whole makes one block of thousands of vector operations
        // that LLVM's machine scheduler (quadratic in a block) takes
        // minutes to compile. (An int8 GEMM without intrinsics, 4 x 64
        // points with the vector along a 256-long `k`: 4,096
        // accumulators, one candidate compiled for 2.5 minutes and stalled
        // the network tuner.)
        if !self.gpu() {
            let most = MAX_REGISTER_TILES * u64::from(self.target.isa.vector_registers.max(1));
            plan.unroll = plan.unroll.max((self.register_tile(cfg).0 as u64).min(most));
        } else if let Some(x) = self.intrinsic_of(cfg).filter(|x| x.is_warp()) {
            plan.unroll = plan.unroll.max(self.warp_unroll(cfg, x));
        }
        plan
    }

    /// The unroll limit that keeps a warp intrinsic's accumulator in
    /// registers: each lane's fragments (the thread tile's points over 32
    /// lanes) are indexed by the loops around the `mma`s and by the fold
    /// into the output, and a loop left rolled puts them in local memory
    /// (measured on an H200, 2026-11-28: a 4096^3 f16 GEMM with 64 x 64
    /// warp tiles and an unroll limit of 16 had its accumulators in local
    /// memory, `st.local` in its PTX, and ran at 14.5 TFLOP/s). The `mma` nest per block step of the
    /// reduction runs `points / (m·n)` tiles times the step's `k`-tiles.
    fn warp_unroll(&self, cfg: &Config, x: &IntrinsicOption) -> u64 {
        let inner = self.levels - 1;
        let (mut points, mut chunk) = (1u64, 1u64);
        for (a, axis) in self.axes.iter().enumerate() {
            if axis.spatial {
                points = points.saturating_mul(self.range_of(cfg, a, inner));
            } else {
                chunk = chunk.saturating_mul(self.range_of(cfg, a, inner.saturating_sub(1)));
            }
        }
        let tile = u64::from(x.intrinsic.m) * u64::from(x.intrinsic.n);
        let fold = points / WARP_LANES;
        let mmas = (points / tile.max(1)).saturating_mul(chunk / u64::from(x.intrinsic.k).max(1));
        fold.max(mmas)
    }

    /// [`Problem::plan`] without the unroll limit the register tile sets:
    /// all the resource check reads, without the register-tile model.
    pub(super) fn resource_plan(&self, cfg: &Config) -> SchedulePlan {
        let shared = self.shared_level.as_deref().and_then(|m| self.target.memory_index(m));
        let staged = (0..self.nreads())
            .map(|r| {
                let packed = cfg.pack_level(r).and_then(|l| self.target.memory_index(&self.target.tile_levels[l].memory));
                let in_shared = shared.filter(|_| self.stageable.contains(&r));
                in_shared.or(packed).map(MemoryId)
            })
            .collect();
        let w = self.vector_width(cfg);
        let vector = cfg.vector.filter(|_| w > 1).map(|a| (AxisId::new(a), w));
        let mut ranks = vec![0; self.axes.len()];
        for (rank, &a) in cfg.order.iter().enumerate() {
            ranks[a] = rank;
        }
        SchedulePlan { sizes: cfg.tiles.clone(), vthreads: cfg.vthreads.clone(), staged, unroll: self.unroll, vector, ranks, lanes: self.lanes_per_tile(cfg) }
    }

    /// The schedule of a state (its plan, as the IR writes it, and its
    /// intrinsic knob).
    pub fn schedule(&self, cfg: &Config) -> Schedule {
        let read_name = |r: usize| self.info.reads[r].name.trim_start_matches('%').to_string();
        let mut s = self.plan(cfg).to_schedule(&self.compute, &self.target, &read_name);
        s.intrinsic = self.intrinsic_of(cfg).map(|x| {
            let names = |ids: &[AxisId]| ids.iter().map(|&id| self.axes[id.index()].name.clone()).collect();
            let m = &x.mapping;
            IntrinsicChoice { name: x.intrinsic.name.clone(), a: m.a, a_name: read_name(m.a), m: names(&m.m), n: names(&m.n), k: names(&m.k) }
        });
        s
    }

    /// The point of this space whose schedule is `s` (a record's, read
    /// back), or `None` when no point gives exactly `s` (a schedule written
    /// by hand, or for another version of the space). The unroll limit is
    /// not compared: the space's own follows from the point.
    pub fn config_of(&self, s: &Schedule) -> Option<Config> {
        let axis = |name: &str| self.axes.iter().position(|a| a.name == name);
        let mut cfg = self.initial();
        if let Some(choice) = &s.intrinsic {
            // The option the knob names (its schedule is compared below).
            let ids = |names: &[String]| names.iter().map(|n| axis(n).map(AxisId::new)).collect::<Option<Vec<AxisId>>>();
            let (m, n, k) = (ids(&choice.m)?, ids(&choice.n)?, ids(&choice.k)?);
            let named = |x: &IntrinsicOption| x.intrinsic.name == choice.name && x.mapping.a == choice.a && x.mapping.m == m && x.mapping.n == n && x.mapping.k == k;
            cfg.intrinsic = Some(self.intrinsics.iter().position(named)?);
        }
        for (name, sizes) in &s.tiles {
            let a = axis(name)?;
            if sizes.len() != self.levels {
                return None;
            }
            cfg.tiles[a].clone_from(sizes);
        }
        for (name, v) in &s.vthreads {
            cfg.vthreads[axis(name)?] = *v;
        }
        for c in &s.cache {
            // Packed at the first tile level whose memory is the one named
            // (on GPUs staging follows from the target: nothing to set).
            if let Some(&l) = self.pack_levels.iter().find(|&&l| self.target.tile_levels[l].memory == c.level) {
                *cfg.pack.get_mut(c.read)? = l as u8 + 1;
            }
        }
        // The schedule names the axes whose place matters, in order (the
        // others follow in declaration order, and extent-1 axes are left
        // out): the orders of the space that have the named axes in that
        // order are the ones it may be.
        let named: Vec<usize> = s.order.iter().map(|n| axis(n)).collect::<Option<_>>()?;
        let orders: Vec<&Vec<usize>> = self.orders.iter().filter(|o| o.iter().filter(|a| named.contains(a)).eq(named.iter())).collect();
        let vectors: Vec<Option<usize>> = match &s.vector {
            Some((name, _)) => vec![Some(axis(name)?)],
            // No vector: an axis whose width comes out 1 (the space's
            // points always name one where there is one), or none.
            None => self.vector_choices().into_iter().chain(std::iter::once(None)).collect(),
        };
        let same = |t: &Schedule| {
            let mut t = t.clone();
            t.unroll = s.unroll;
            t.span = s.span;
            t == *s
        };
        orders.into_iter().find_map(|order| {
            vectors.iter().find_map(|&v| {
                let c = Config { vector: v, order: order.clone(), ..cfg.clone() };
                same(&self.schedule(&c)).then_some(c)
            })
        })
    }

    /// Is `cfg` a point of this (possibly restricted) space that every
    /// resource-constrained rule keeps (`rules.rs`, GTA's R1–R5) and whose
    /// plan passes the target's resource check? (The structural rules
    /// hold by construction: sizes divide, one per tile level, virtual
    /// threads on spatial axes where the target has `V` loops, vector
    /// widths within the lanes.) With an intrinsic, also
    /// [`Problem::fits_intrinsic`] (rule R3, checked here too where the op
    /// has no intrinsic options to make R3 apply).
    pub fn valid(&self, cfg: &Config) -> bool {
        self.in_space(cfg)
            && self.tiles_fit(cfg)
            && self.fits_intrinsic(cfg)
            && super::rules::keeps_all(self, cfg)
            && (0..self.levels).all(|l| self.fits(cfg, l))
            && !check_resources(&self.compute, &self.info, &self.resource_plan(cfg), &self.target, tilec::diag::Span::DUMMY).has_errors()
    }

    /// Can `cfg`'s intrinsic (if any) compute its innermost tiles, as
    /// `tensorize` rewrites them: no partial tiles (every size divides the
    /// extent and the size above it, so no guard lands inside the
    /// tensorized nest), each mapped axis' innermost tile per virtual
    /// thread whole intrinsic tiles (a fused axis' tiles split into the
    /// option's parts), and the vector on the `m` axis as wide as the
    /// intrinsic's lanes (none for a fused `m`).
    pub fn fits_intrinsic(&self, cfg: &Config) -> bool {
        let Some(i) = cfg.intrinsic else { return true };
        let Some(x) = self.intrinsics.get(i) else { return false };
        // (A padded option's spatial axes may end in a partial tile:
        // `tensorize` computes it whole and the fold stores what is real.)
        let nested = (0..self.axes.len()).all(|a| {
            let t = &cfg.tiles[a];
            let partial_ok = x.padded && self.axes[a].spatial;
            (partial_ok || self.axes[a].extent.is_multiple_of(t[0].max(1))) && t.windows(2).all(|w| w[0].is_multiple_of(w[1].max(1)))
        });
        let whole = (0..self.axes.len()).all(|a| cfg.tiles[a][self.levels - 1].is_multiple_of(self.innermost_unit(cfg, a)));
        if x.mapping.m.len() > 1 || x.mapping.n.len() > 1 || x.fused_k() {
            // A fused axis: its op axes' innermost tiles (per virtual
            // thread) split it into the option's parts, as `tensorize`
            // splits it (an inner axis' tile that took more would make
            // another mapping than the one the model sees); a fused `m`
            // has no vector loop.
            let split_as_planned = [&x.mapping.m, &x.mapping.n, &x.mapping.k].into_iter().zip([x.intrinsic.m, x.intrinsic.n, x.intrinsic.k]).all(|(axes, size)| {
                let tiles: Vec<u64> = axes.iter().map(|&a| cfg.tiles[a.index()][self.levels - 1] / cfg.vthreads[a.index()].max(1)).collect();
                axes.is_empty() || mapping::fused_parts(&tiles, u64::from(size)).is_some_and(|p| axes.iter().zip(p).all(|(&a, p)| p == x.size_of(a.index())))
            });
            if !split_as_planned {
                return false;
            }
        }
        if x.is_warp() {
            // A warp's tile: no vector, no virtual threads (the lanes
            // rewrite the plain loops over the accumulator), and thread
            // loops to make warps of.
            return nested && whole && cfg.vector.is_none() && cfg.vthreads.iter().all(|&v| v <= 1) && self.tiles_per_block(cfg) > 1;
        }
        if x.fused_lanes() {
            return nested && whole && cfg.vector.is_none();
        }
        nested && whole && cfg.vector == x.m_axis() && self.vector_width(cfg) == u64::from(x.intrinsic.m)
    }

    /// The lanes a register of `cfg`'s register tile holds: the vector
    /// width, or a vector intrinsic's lanes where they run over several op
    /// axes (a fused `m`, which has no vector loop).
    pub fn register_lanes(&self, cfg: &Config) -> u64 {
        match self.intrinsic_of(cfg) {
            Some(x) if x.fused_lanes() => u64::from(x.intrinsic.m),
            _ => self.vector_width(cfg),
        }
    }

    /// `cfg`'s vector axis when it is a reduction axis with a vector width.
    pub fn lane_axis(&self, cfg: &Config) -> Option<usize> {
        cfg.vector.filter(|&v| !self.axes[v].spatial && self.vector_width(cfg) > 1)
    }

    /// The vector-axis choices of a state: each of [`Problem::vector_axes`],
    /// or no vector where there is none (an op without spatial axes).
    pub fn vector_choices(&self) -> Vec<Option<usize>> {
        if self.vector_axes.is_empty() { vec![None] } else { self.vector_axes.iter().map(|&v| Some(v)).collect() }
    }

    /// The lanes of a vector along `cfg`'s vector axis (1 without one; an
    /// intrinsic's `m`).
    pub fn lanes_of(&self, cfg: &Config) -> u64 {
        if let Some(x) = self.intrinsic_of(cfg) {
            return u64::from(x.intrinsic.m);
        }
        cfg.vector.and_then(|v| self.lanes.get(v).copied()).unwrap_or(1)
    }

    /// The number of states of the space [`Problem::enumerate`] walks
    /// (saturating): without intrinsics, and as many again per intrinsic
    /// option (an upper bound: an option's points are a subset).
    pub fn space_size(&self) -> u128 {
        let mut total: u128 = self.packable.iter().map(|&r| self.pack_choices(r).len() as u128).product::<u128>() * self.orders.len() as u128 * self.vector_choices().len() as u128;
        total *= 1 + self.intrinsics.len() as u128;
        for a in 0..self.axes.len() {
            let chains = self.chains(a).len() as u128;
            let v = if self.vthread_ok && self.axes[a].spatial { 3 } else { 1 };
            total = total.saturating_mul(chains.saturating_mul(v));
        }
        total
    }

    /// Every combination of pack choices of the reads (one entry, all
    /// unpacked, where nothing can be packed).
    pub fn pack_combinations(&self) -> Vec<Vec<u8>> {
        let mut out = vec![vec![0u8; self.nreads()]];
        for &r in &self.packable {
            out = out.into_iter().flat_map(|p| self.pack_choices(r).into_iter().map(move |c| {
                let mut p = p.clone();
                p[r] = c;
                p
            })).collect();
        }
        out
    }

    /// Every chain of sizes axis `a` may take (outermost first).
    pub fn chains(&self, a: usize) -> Vec<Vec<u64>> {
        let mut out = Vec::new();
        let mut cfg = self.initial();
        self.chains_rec(a, 0, &mut cfg, &mut out);
        out
    }

    fn chains_rec(&self, a: usize, level: usize, cfg: &mut Config, out: &mut Vec<Vec<u64>>) {
        if level == self.levels {
            out.push(cfg.tiles[a].clone());
            return;
        }
        // Sizes at this level divide the one above; the levels below are
        // still 1 here, so every choice is allowed.
        for s in self.choices(cfg, a, level) {
            cfg.tiles[a][level] = s;
            for l in level + 1..self.levels {
                cfg.tiles[a][l] = 1;
            }
            self.chains_rec(a, level + 1, cfg, out);
            if out.len() > 1_000_000 {
                return;
            }
        }
    }

    /// The module that measures one candidate: a function `@<func>` with
    /// the op alone, its operands as parameters, its result returned.
    pub fn extract(&self, f: &Function) -> Module {
        let mut m = f.extract_op(self.op);
        m.funcs[0].result_types = vec![self.info.output.clone()];
        m
    }
}

#[cfg(test)]
pub fn set_op_schedule(m: &mut Module, s: Schedule) {
    let f = &mut m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).expect("compute op");
    f.ops[op].kind.as_compute_mut().expect("compute").schedule = Some(s);
}
