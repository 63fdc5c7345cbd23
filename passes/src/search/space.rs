//! The schedule space one compute op has on one target, and the analytic
//! model every strategy shares.
//!
//! A [`Config`] is Gensor's ETIR state without its current level: per axis
//! one tile size per tile level of the target (outermost first, each
//! dividing the one before), and per axis a virtual-thread count. It becomes
//! a [`Schedule`] by [`Problem::schedule`], which adds what follows from the
//! target and is the same for every strategy: on GPUs every stageable read
//! staged into the block level's shared memory, a vector width on the last
//! spatial axis where its innermost tile allows one, and an unroll limit.
//!
//! The model (Roller's definitions, `docs/search.md`): the **footprint**
//! `F(T, l)` of a tile at tile level `l` counts bytes the way the resource
//! check does (`tilec::target::check`), so a state the model accepts is a
//! state the verifier accepts; the **traffic** `Q(T, l)` is the bytes moved
//! into tiles of level `l` over the whole op: the number of spatial tiles
//! times each read's tile with the reduction axes at their full extent,
//! plus the output. The **prediction** is a roofline: the larger of the
//! compute time (peak throughput, scaled by how evenly the outermost tiles
//! fill the cores or SMs, by vector-lane use on CPUs and warp use on GPUs)
//! and, per tile level, its traffic over the bandwidth of the memory it is
//! filled from.

use crate::nest::{OrderEntry, loop_order};
use std::sync::Arc;
use tilec::ir::affine::AffineExpr;
use tilec::ir::*;
use tilec::target::{Binding, ComputeInfo, MemoryLevel, OpResources, Per, Target, TargetKind, check_schedule, distinct_values};

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
/// [`Problem::vector_axes`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Config {
    pub tiles: Vec<Vec<u64>>,
    pub vthreads: Vec<u64>,
    pub pack: Vec<u8>,
    pub order: Vec<usize>,
    pub vector: Option<usize>,
}

impl Config {
    /// The tile level read `r` is packed at, if it is.
    pub fn pack_level(&self, r: usize) -> Option<usize> {
        self.pack.get(r).copied().filter(|&p| p > 0).map(|p| p as usize - 1)
    }
}

/// One op on one target.
pub struct Problem {
    pub func: String,
    pub op: Op,
    pub compute: Compute,
    pub info: ComputeInfo,
    pub target: Arc<Target>,
    pub axes: Vec<Axis>,
    pub levels: usize,
    /// Per tile level: does the loop order have reduction loops there? (A
    /// CPU core's tile covers the whole reduction.)
    pub red_loop: Vec<bool>,
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
    run_level: Option<usize>,
    /// The loop orders the space offers, declaration order first: on CPU
    /// targets every permutation of the spatial axes longer than 1, then of
    /// the reduction axes (at most [`MAX_PERMUTED_AXES`] of each are
    /// permuted); on GPUs declaration order alone.
    pub orders: Vec<Vec<usize>>,
}

/// The most axes of one kind (spatial, reduction) whose order the CPU space
/// permutes (5! = 120 orders); the others keep declaration order after them.
pub const MAX_PERMUTED_AXES: usize = 5;

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

/// The loop orders of axes `axes` (see [`Problem::orders`]).
fn loop_orders(axes: &[Axis], gpu: bool) -> Vec<Vec<usize>> {
    let identity: Vec<usize> = (0..axes.len()).collect();
    if gpu {
        return vec![identity];
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
    for s in permutations(&spatial) {
        for r in permutations(&reduction) {
            let mut o = s.clone();
            o.extend(&spatial_rest);
            o.extend(&r);
            o.extend(&reduction_rest);
            out.push(o);
        }
    }
    out
}

/// The source stride a packed copy takes along an index: the common
/// divisor of the coefficients of the axes that vary (a strided
/// convolution's `2·oh + r` with `r` of extent 1 is packed every second
/// element, densely; the `cache` pass does the same with the loops inside
/// the copy, which may be fewer).
struct PackedStrides<'a> {
    axes: &'a [Axis],
}

impl PackedStrides<'_> {
    fn of(&self, e: &AffineExpr<AxisId>) -> i64 {
        e.terms().iter().filter(|&&(a, _)| self.axes.get(a.index()).is_some_and(|axis| axis.extent > 1)).fold(0, |g, &(_, c)| tilec::ir::affine::gcd(g, c)).max(1)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
}

/// The tile level whose reduction sizes bound the accumulator's run: the
/// reduction loops after the last spatial tile loop of `order` cover the
/// tile of the level above the outermost of them (`None`: they start at
/// the outermost level, or there are none).
fn run_level_of(order: &[OrderEntry], levels: usize) -> Option<usize> {
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

pub fn divisors(n: u64) -> Vec<u64> {
    let mut d: Vec<u64> = (1..).take_while(|i| i * i <= n).filter(|i| n % i == 0).flat_map(|i| [i, n / i]).collect();
    d.sort_unstable();
    d.dedup();
    d
}

impl Problem {
    /// The problem of compute op `op` of `f` on `target`; `None` if `op` is
    /// not a well-formed compute op.
    pub fn new(f: &Function, op: Op, target: Arc<Target>, unroll: u64) -> Option<Problem> {
        let c = f.op(op).kind.as_compute()?.clone();
        let info = ComputeInfo::of(f, op)?;
        let axes: Vec<Axis> = c.axes.iter().map(|a| Axis { name: a.name.clone(), extent: a.extent.max(1), spatial: a.kind == AxisKind::Spatial }).collect();
        let levels = target.tile_levels.len();
        let red_loop = (0..target.tile_levels.len()).map(|l| target.has_reduction_loops(l)).collect();
        let points: f64 = axes.iter().map(|a| a.extent as f64).product();
        let regions = &f.op(op).regions;
        let arith = |r: Region| f.region(r).ops.iter().filter(|&&o| matches!(f.op(o).kind, OpKind::Unary(_) | OpKind::Binary(_))).count() as f64;
        let per_point = regions.first().map_or(0.0, |&r| arith(r)) + if c.combiner.is_some() { 1.0 } else { 0.0 };
        let outputs: f64 = axes.iter().filter(|a| a.spatial).map(|a| a.extent as f64).product();
        let flops = (points * per_point.max(1.0) + outputs * regions.get(1).map_or(0.0, |&r| arith(r))).max(1.0);
        let gpu = target.kind == TargetKind::Cuda;
        let first_mem = target.tile_levels.first().and_then(|l| target.memory_level(&l.memory));
        let shared_level = first_mem.filter(|m| gpu && m.managed && m.scope.is_some()).map(|m| m.name.clone());
        let stageable = if shared_level.is_some() { c.all_reads().filter(|(_, r)| r.indices.iter().all(|e| e.divisor() == 1)).map(|(i, _)| i).collect() } else { Vec::new() };
        let (packable, pack_levels) = if gpu {
            (Vec::new(), Vec::new())
        } else {
            let levels = (0..levels).filter(|&l| target.memory_level(&target.tile_levels[l].memory).is_some_and(|m| m.scope.is_some() && !m.managed)).collect::<Vec<_>>();
            let reads = if levels.is_empty() { Vec::new() } else { c.all_reads().filter(|(_, r)| r.indices.iter().all(|e| e.divisor() == 1)).map(|(i, _)| i).collect() };
            (reads, levels)
        };
        let order = loop_order(&target).unwrap_or_default();
        let run_level = run_level_of(&order, levels);
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
        Some(Problem {
            func: f.name.clone(),
            op,
            compute: c,
            info,
            target,
            levels,
            red_loop,
            flops,
            stageable,
            packable,
            pack_levels,
            shared_level,
            thread_level,
            vthread_ok,
            bank_width_elems,
            vector_axes,
            lanes,
            unroll,
            order,
            run_level,
            orders: loop_orders(&axes, gpu),
            axes,
        })
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
        !self.axes[a].spatial && !self.red_loop[level]
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
        Config { tiles, vthreads: vec![1; self.axes.len()], pack: vec![0; self.nreads()], order: self.orders[0].clone(), vector: self.vector_axes.first().copied() }
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

    /// The sizes axis `a` may take at `level` given the other levels of
    /// `cfg`: at the outermost level the divisors of the extent and the
    /// powers of two below it (partial tiles are legal), else the divisors
    /// of the level above; multiples of the level below (and of the
    /// virtual threads at the innermost level). Ascending.
    pub fn choices(&self, cfg: &Config, a: usize, level: usize) -> Vec<u64> {
        let ext = self.axes[a].extent;
        if self.fixed(a, level) {
            return vec![if level == 0 { ext } else { cfg.tiles[a][level - 1] }];
        }
        let mut c = if level == 0 {
            let mut d = divisors(ext);
            let mut p = 1;
            while p < ext {
                d.push(p);
                p *= 2;
            }
            d.sort_unstable();
            d.dedup();
            d
        } else {
            divisors(cfg.tiles[a][level - 1])
        };
        let below = if level + 1 < self.levels { cfg.tiles[a][level + 1] } else { cfg.vthreads[a] };
        c.retain(|s| s % below.max(1) == 0);
        c
    }

    /// `t(a)` at `level`, as the resource check defines it.
    fn range_of(&self, cfg: &Config, a: usize, level: usize) -> u64 {
        self.resources().range(AxisId::new(a), level, cfg.tiles[a][level])
    }

    /// Bytes of read `r` over a tile with ranges `t`.
    fn read_bytes(&self, r: usize, t: &dyn Fn(AxisId) -> u64) -> u64 {
        self.resources().read_bytes(r, t)
    }

    fn nreads(&self) -> usize {
        self.info.reads.len()
    }

    /// Gensor's/Roller's footprint `F` of a tile of `level`, in bytes, as
    /// the resource check counts it for the schedule [`Problem::schedule`]
    /// makes (which stages the stageable reads in the shared level).
    pub fn footprint(&self, cfg: &Config, level: usize) -> u64 {
        let Some(m) = self.target.memory_level(&self.target.tile_levels[level].memory) else { return 0 };
        let staged = self.shared_level.as_deref() == Some(m.name.as_str());
        self.resources().footprint(level, m, &|r| staged && self.stageable.contains(&r), &|id| self.range_of(cfg, id.index(), level))
    }

    /// The capacity a tile of `level` gets (a per-device cache is shared by
    /// the tiles running at once on the cores or SMs).
    pub fn capacity(&self, level: usize) -> u64 {
        let Some(m) = self.target.memory_level(&self.target.tile_levels[level].memory) else { return u64::MAX };
        self.resources().capacity(level, m).bytes
    }

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

    /// GPU threads per block.
    pub fn threads(&self, cfg: &Config) -> u64 {
        self.resources().block_threads(&|a, l| cfg.tiles[a.index()][l]).map_or(1, |b| b.threads)
    }

    /// Does `level` of `cfg` fit (footprint within capacity; on GPUs at the
    /// thread level, threads within the block limit)?
    pub fn fits(&self, cfg: &Config, level: usize) -> bool {
        if self.footprint(cfg, level) > self.capacity(level) {
            return false;
        }
        if self.thread_level == Some(level) && self.threads(cfg) > self.target.compute.max_threads_per_block.max(1) as u64 {
            return false;
        }
        true
    }

    /// A state whose levels below `level` are not chosen yet, made a whole
    /// schedule: on CPUs the inner levels take the sizes of `level` (not
    /// tiled further); on GPUs the thread tile is the smallest that keeps
    /// the block within its thread limit ([`Problem::fix_threads`]).
    pub fn complete(&self, cfg: &Config, level: usize) -> Config {
        let mut c = cfg.clone();
        for l in level + 1..self.levels {
            if self.thread_level.is_some_and(|tl| l >= tl) {
                for a in 0..self.axes.len() {
                    if !self.fixed(a, l) {
                        c.tiles[a][l] = 1;
                    }
                }
            } else {
                for a in 0..self.axes.len() {
                    c.tiles[a][l] = c.tiles[a][l - 1];
                }
            }
        }
        if level + 1 < self.levels {
            c.vthreads = vec![1; self.axes.len()];
        }
        self.fix_threads(&mut c);
        c
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
    pub fn vector_width(&self, cfg: &Config) -> u64 {
        let Some(v) = cfg.vector else { return 0 };
        let share = cfg.tiles[v][self.levels - 1] / cfg.vthreads[v].max(1);
        let mut w = self.lanes_of(cfg);
        while w > 1 {
            if share % w == 0 {
                return w;
            }
            w /= 2;
        }
        0
    }

    /// The schedule of a state.
    pub fn schedule(&self, cfg: &Config) -> Schedule {
        let mut s = Schedule::new(self.target.name.clone());
        for (a, axis) in self.axes.iter().enumerate() {
            s.tiles.push((axis.name.clone(), cfg.tiles[a].clone()));
            if cfg.vthreads[a] > 1 {
                s.vthreads.push((axis.name.clone(), cfg.vthreads[a]));
            }
        }
        if let Some(level) = &self.shared_level {
            for &r in &self.stageable {
                let name = self.info.reads[r].name.trim_start_matches('%').to_string();
                s.cache.push(CacheDirective { read: r, read_name: name, level: level.clone() });
            }
        }
        for r in 0..self.nreads() {
            if let Some(l) = cfg.pack_level(r) {
                let name = self.info.reads[r].name.trim_start_matches('%').to_string();
                s.cache.push(CacheDirective { read: r, read_name: name, level: self.target.tile_levels[l].memory.clone() });
            }
        }
        // The register tile unrolls whole, so its accumulators stay in
        // registers (a vector step counts once).
        s.unroll = if self.gpu() { self.unroll } else { self.unroll.max(self.register_tile(cfg).0 as u64) };
        let w = self.vector_width(cfg);
        if w > 1 {
            s.vector = Some((self.axes[cfg.vector.expect("a width needs an axis")].name.clone(), w));
        }
        // The axes that make loops, in the chosen order; nothing where that
        // is declaration order.
        let looping: Vec<usize> = cfg.order.iter().copied().filter(|&a| self.axes[a].extent > 1).collect();
        if looping.windows(2).any(|w| w[0] > w[1]) {
            s.order = looping.iter().map(|&a| self.axes[a].name.clone()).collect();
        }
        s
    }

    /// Does the schedule of `cfg` pass the target's resource check? (The
    /// divisibility rules hold by construction.)
    pub fn valid(&self, cfg: &Config) -> bool {
        (0..self.levels).all(|l| self.fits(cfg, l)) && !check_schedule(&self.compute, &self.info, &self.schedule(cfg), &self.target, tilec::diag::Span::DUMMY).has_errors()
    }

    /// The register tile of a CPU schedule: the accumulator's vector
    /// registers (the innermost tile's spatial points over the vector
    /// width; with a reduction vector axis, the spatial points times that
    /// axis' innermost tile over the width), and per reduction step (a
    /// reduction vector axis' whole innermost tile) the loads that feed it
    /// (a vector per `w` contiguous elements of a read along the vector
    /// axis; one broadcast or scalar load per element otherwise) and how
    /// many of those are held in registers while the step runs (vector
    /// loads, and broadcasts that feed a single FMA).
    pub fn register_tile(&self, cfg: &Config) -> (f64, f64, f64) {
        let inner = self.levels - 1;
        let w = self.vector_width(cfg).max(1);
        let lane_axis = self.lane_axis(cfg);
        let points: u64 = self.axes.iter().enumerate().filter(|&(i, a)| a.spatial || Some(i) == lane_axis).map(|(i, _)| self.range_of(cfg, i, inner)).product();
        let acc = points.div_ceil(w) as f64;
        let ids: Vec<AxisId> = self.compute.axis_ids().collect();
        let t = |id: AxisId| {
            let a = id.index();
            if self.axes[a].spatial || Some(a) == lane_axis { self.range_of(cfg, a, inner) } else { 1 }
        };
        let (mut loads, mut vector_loads) = (0.0, 0.0);
        for (r, read) in self.compute.all_reads() {
            let elems = (self.read_bytes(r, &t) / self.info.reads[r].tensor.elem.size_bytes().max(1)).max(1);
            // Guarded loads are scalar for a padded read that no packed
            // copy (which holds the padding) stands in for. (Partial tiles
            // are not: a guard on another axis is a branch around vector
            // code, and the vector axis' own partial tile masks its lanes,
            // which `predict` charges.)
            if read.pad.is_some() && cfg.pack_level(r).is_none() {
                loads += elems as f64 * self.target.model.guarded_load_cost;
                continue;
            }
            let packed = cfg.pack_level(r).map(|_| self.packed_strides());
            let contiguous = w > 1 && cfg.vector.is_some_and(|v| Self::walks_contiguously(&read.indices, ids[v], packed.as_ref()));
            if contiguous {
                let v = elems.div_ceil(w) as f64;
                loads += v;
                vector_loads += v;
            } else if w > 1 && cfg.vector.is_some_and(|v| read.indices.iter().any(|e| e.uses(ids[v]))) {
                // Lanes gathered one element at a time.
                loads += elems as f64 * self.target.model.gather_load_cost;
            } else {
                loads += elems as f64;
                // A broadcast that feeds a single FMA (a register tile one
                // vector wide) becomes that FMA's destination register:
                // LLVM issues the step's loads ahead of its FMAs, so each
                // is held meanwhile. (An 8x8 GEMM register tile, 8
                // accumulators, 1 vector and 8 such broadcasts, spilled an
                // accumulator and ran at 41 GFLOP/s against 81 for 4x16 on
                // the AMD EPYC host.)
                if acc <= elems as f64 {
                    vector_loads += elems as f64;
                }
            }
        }
        (acc, loads, vector_loads)
    }

    /// Does an access with `indices` walk axis `id` with unit stride in
    /// memory: through its last dimension alone, or, for a packed copy
    /// (`packed`: the stride each index is packed with; the `cache` pass
    /// puts the dimension the vector walks innermost and packs a strided
    /// one densely), through any one dimension alone with its packed
    /// stride?
    fn walks_contiguously(indices: &[AffineExpr<AxisId>], id: AxisId, packed: Option<&PackedStrides<'_>>) -> bool {
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

    /// `cfg`'s vector axis when it is a reduction axis with a vector width.
    pub fn lane_axis(&self, cfg: &Config) -> Option<usize> {
        cfg.vector.filter(|&v| !self.axes[v].spatial && self.vector_width(cfg) > 1)
    }

    /// The vector-axis choices of a state: each of [`Problem::vector_axes`],
    /// or no vector where there is none (an op without spatial axes).
    pub fn vector_choices(&self) -> Vec<Option<usize>> {
        if self.vector_axes.is_empty() { vec![None] } else { self.vector_axes.iter().map(|&v| Some(v)).collect() }
    }

    /// The lanes of a vector along `cfg`'s vector axis (1 without one).
    pub fn lanes_of(&self, cfg: &Config) -> u64 {
        cfg.vector.and_then(|v| self.lanes.get(v).copied()).unwrap_or(1)
    }

    /// The target's peak GFLOP/s for the accumulator's type (else f32's).
    fn peak_gflops(&self) -> f64 {
        let t = &self.target;
        t.peak_gflops.get(&self.info.acc.to_string()).or_else(|| t.peak_gflops.get("f32")).copied().unwrap_or(1.0)
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
    pub fn kernel_terms(&self, cfg: &Config) -> [f64; 4] {
        let t = &self.target;
        let (acc, loads, vector_loads) = self.register_tile(cfg);
        let lanes = self.lanes_of(cfg).max(1) as f64;
        let per_clock = t.compute.units.max(1) as f64 * t.compute.clock_ghz.max(1e-3);
        let peak = self.peak_gflops();
        let fma_units = (peak / (per_clock * lanes * 2.0)).round().max(1.0);
        let vector_bytes = (t.isa.vector_bits.max(8) / 8) as f64;
        let l1 = t.tile_levels.last().and_then(|l| t.memory_level(&l.memory));
        let load_units = l1.map_or(1.0, |m| (m.bandwidth_gbs / per_clock / vector_bytes).round().max(1.0));
        let fma_cycles = acc / fma_units;
        let issue = fma_cycles / fma_cycles.max(loads / load_units);
        let latency = (acc / (fma_units * self.target.compute.fma_latency_cycles)).min(1.0);
        let regs = t.isa.vector_registers.max(1) as f64;
        let need = acc + vector_loads + 1.0;
        let registers = if need <= regs { 1.0 } else { 0.5 * regs / need };
        // Loading and storing the accumulator costs about as many cycles
        // as this many reduction steps.
        let lane_axis = self.lane_axis(cfg);
        // A reduction vector axis' innermost tile is one step.
        let step = lane_axis.map_or(1.0, |v| self.range_of(cfg, v, self.levels - 1) as f64);
        let run = self.reduction_run(cfg) / step;
        let overhead = fma_units / load_units + fma_units;
        let mut accumulate = if run.is_finite() { run / (run + overhead) } else { 1.0 };
        let ids: Vec<AxisId> = self.compute.axis_ids().collect();
        let w = self.vector_width(cfg);
        let reduction: f64 = self.axes.iter().filter(|a| !a.spatial).map(|a| a.extent as f64).product();
        if lane_axis.is_some() {
            // Each output point folds its `step` partial results, a scalar
            // load and combine each, against its FMAs.
            let fma = reduction / (w as f64 * fma_units);
            accumulate *= fma / (fma + step);
        } else if w > 1 && cfg.vector.is_some_and(|v| !Self::walks_contiguously(&self.compute.output, ids[v], None)) {
            // An output not contiguous along the vector axis is stored lane
            // by lane (the target's `scatter_lane_cost` cycles each), once per output
            // vector after the whole reduction: against the FMAs of that
            // reduction.
            let fma = reduction / fma_units;
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
        let box_at = |l: usize| -> Vec<u64> {
            let range = |id: AxisId| self.range_of(cfg, id.index(), l);
            read.indices.iter().enumerate().map(|(d, e)| distinct_values(e, &range, ty.shape.get(d).copied().unwrap_or(1))).collect()
        };
        let mut dims = box_at(level);
        let mut shape = packed.map_or_else(|| ty.shape.clone(), box_at);
        if let Some(d) = packed.and_then(|_| self.packed_innermost(cfg, &read.indices)) {
            let (a, b) = (dims.remove(d), shape.remove(d));
            dims.push(a);
            shape.push(b);
        }
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
        let span = m.capacity_bytes / m.ways as u64;
        if span == 0 {
            return false;
        }
        let offsets = span / gcd(stride, span);
        rows > m.ways as u64 * offsets
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
        let Some((_, read)) = self.compute.all_reads().nth(r) else { return 0.0 };
        let ids: Vec<AxisId> = self.compute.axis_ids().collect();
        // (axis, trip, bound to cores): a copy moves out of the serial loops
        // its box does not depend on, never out of a parallel one (each
        // core packs its own).
        let mut loops: Vec<(usize, u64, bool)> = Vec::new();
        for e in &self.order {
            let (spatial, l) = match *e {
                OrderEntry::Spatial(l) => (true, l),
                OrderEntry::Reduction(l) => (false, l),
                _ => continue,
            };
            if l > level {
                continue;
            }
            for &a in &cfg.order {
                let axis = &self.axes[a];
                if axis.spatial != spatial || self.fixed(a, l) {
                    continue;
                }
                let outer = if l == 0 { axis.extent } else { self.range_of(cfg, a, l - 1) };
                let parallel = spatial && matches!(self.target.tile_levels[l].binding, Binding::Parallel);
                loops.push((a, outer.div_ceil(self.range_of(cfg, a, l).max(1)), parallel));
            }
        }
        while let Some(&(a, trip, parallel)) = loops.last() {
            if parallel || (trip > 1 && read.indices.iter().any(|e| e.uses(ids[a]))) {
                break;
            }
            loops.pop();
        }
        let copies: f64 = loops.iter().map(|&(_, trip, _)| trip as f64).product();
        let box_bytes = self.read_bytes(r, &|id: AxisId| self.range_of(cfg, id.index(), level));
        copies * box_bytes as f64
    }

    /// Predicted run time in seconds (the roofline of the module docs).
    pub fn predict(&self, cfg: &Config) -> f64 {
        let t = &self.target;
        let peak = self.peak_gflops().max(1e-3) * 1e9;
        let units = t.compute.units.max(1) as f64;
        let par: f64 = self.axes.iter().enumerate().filter(|(_, a)| a.spatial).map(|(i, a)| a.extent.div_ceil(cfg.tiles[i][0].max(1)) as f64).product();
        let waves = (par / units).ceil().max(1.0);
        let par_eff = par / (waves * units);
        let mut eff = par_eff;
        if self.gpu() {
            let th = self.threads(cfg) as f64;
            let warp = t.compute.warp_size.max(1) as f64;
            eff *= th / ((th / warp).ceil() * warp);
            // Too few threads per SM cannot hide latency.
            eff *= (th / (self.target.compute.min_warps_per_block as f64 * warp)).min(1.0);
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
        let unique: f64 = self.info.reads.iter().map(|r| (r.tensor.shape.iter().product::<u64>() * r.tensor.elem.size_bytes()) as f64).sum::<f64>()
            + (self.info.output.shape.iter().product::<u64>() * self.info.output.elem.size_bytes()) as f64;
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
        for level in 0..self.levels {
            let Some(mi) = t.memory_index(&t.tile_levels[level].memory) else { continue };
            let m = &t.memory[mi];
            // Filled from the next slower memory level.
            let from = &t.memory[mi.saturating_sub(1)];
            // What the cores at work draw: a per-core level's bandwidth is
            // theirs alone; a shared level's is the device's, up to what
            // that many cores can draw.
            let scale = |m: &MemoryLevel| if m.per != Per::Device { m.bandwidth_gbs * 1e9 * par_eff } else { Target::bandwidth_for_units(m, units * par_eff) * 1e9 };
            let q = self.traffic(cfg, level);
            let total = if m.per == Per::Device { m.capacity_bytes as f64 } else { m.capacity_bytes as f64 * units };
            let (from_bw, m_bw) = (scale(from), scale(m));
            let mut time = if !m.managed && unique <= total { (unique / from_bw).max(q / m_bw) } else { q / from_bw };
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
                        let bytes = self.pack_traffic(cfg, r, level);
                        copy += bytes / from_bw + bytes / m_bw;
                        let cycles = self.pack_cycles_per_element(cfg, r);
                        if cycles > 0.0 {
                            let elems = bytes / self.info.reads[r].tensor.elem.size_bytes().max(1) as f64;
                            copy += elems * cycles / (t.compute.clock_ghz.max(1e-3) * 1e9 * units * par_eff);
                        }
                    }
                }
            }
            if !self.gpu() && from.per == Per::Device {
                exposed = exposed.max(time);
            }
            copies += copy;
            time += copy;
            mem = mem.max(time);
            mem_sum += time;
        }
        // The roofline, plus a hundredth of every term: between schedules
        // the roofline ties (a memory-bound op), the one that also computes
        // and moves data faster wins.
        (compute + exposed + copies).max(mem) + stall + 0.01 * (compute + mem_sum)
    }

    /// The tensor sentence of a state: the op, the target, then one token
    /// per decision in a fixed order (every axis' size at every tile level,
    /// outermost first; virtual threads; cache directives; the loop order,
    /// every axis outermost first; unroll; vector).
    pub fn sentence(&self, s: &Schedule) -> String {
        let mut w: Vec<String> = vec!["op".into(), self.compute.label.clone().unwrap_or_else(|| "compute".into())];
        for a in &self.axes {
            w.push(format!("{}{}={}", if a.spatial { "" } else { "r:" }, a.name, a.extent));
        }
        w.push("target".into());
        w.push(self.target.name.clone());
        w.push("tile".into());
        for (name, sizes) in &s.tiles {
            for (l, size) in sizes.iter().enumerate() {
                w.push(format!("{name}.{}={size}", self.target.tile_levels[l].name));
            }
        }
        w.push("vthread".into());
        for a in &self.axes {
            if a.spatial {
                w.push(format!("{}={}", a.name, s.vthreads_of(&a.name)));
            }
        }
        w.push("cache".into());
        for (i, r) in self.info.reads.iter().enumerate() {
            w.push(format!("{}={}", r.name.trim_start_matches('%'), s.cache_level_of(i).unwrap_or("none")));
        }
        w.push("order".into());
        let rank = s.axis_ranks(self.axes.iter().map(|a| a.name.as_str()));
        let mut by_rank: Vec<usize> = (0..self.axes.len()).collect();
        by_rank.sort_by_key(|&a| rank[a]);
        w.extend(by_rank.into_iter().map(|a| self.axes[a].name.clone()));
        w.push(format!("unroll={}", s.unroll));
        w.push(match &s.vector {
            Some((a, n)) => format!("vector={a}:{n}"),
            None => "vector=none".into(),
        });
        w.join(" ")
    }

    /// The number of states of the space [`Problem::enumerate`] walks
    /// (saturating).
    pub fn space_size(&self) -> u128 {
        let mut total: u128 = self.packable.iter().map(|&r| self.pack_choices(r).len() as u128).product::<u128>() * self.orders.len() as u128 * self.vector_choices().len() as u128;
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

    /// The loop order the packed copies of `cfg` move the fewest bytes
    /// under (the order changes nothing else the model sees: which loops a
    /// copy is hoisted out of). Ties, and nothing packed: the earlier order
    /// of [`Problem::orders`], declaration order first.
    pub fn best_order(&self, cfg: &Config) -> Vec<usize> {
        let packed: Vec<(usize, usize)> = (0..self.nreads()).filter_map(|r| cfg.pack_level(r).map(|l| (r, l))).collect();
        if packed.is_empty() || self.orders.len() == 1 {
            return self.orders[0].clone();
        }
        let mut n = cfg.clone();
        let mut best: Option<(f64, &Vec<usize>)> = None;
        for o in &self.orders {
            n.order.clone_from(o);
            let bytes: f64 = packed.iter().map(|&(r, l)| self.pack_traffic(&n, r, l)).sum();
            if best.is_none_or(|(b, _)| bytes < b) {
                best = Some((bytes, o));
            }
        }
        best.map_or_else(|| self.orders[0].clone(), |(_, o)| o.clone())
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
        best.order = self.best_order(&best);
        for &r in &self.packable {
            let mut time = predict(&best);
            for c in self.pack_choices(r) {
                let mut n = best.clone();
                n.pack[r] = c;
                n.order = self.best_order(&n);
                let t = predict(&n);
                if t < time {
                    time = t;
                    best = n;
                }
            }
        }
        best
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
        let mut g = f.clone();
        let data = g.op(self.op).clone();
        let mut params: Vec<Value> = Vec::new();
        for &v in &data.operands {
            if !params.contains(&v) {
                params.push(v);
            }
        }
        for (i, &v) in params.iter().enumerate() {
            g.values[v].def = ValueDef::Param(i);
        }
        g.params = params;
        let ret = g.return_op().expect("a function ends in return");
        let result = data.results[0];
        g.ops[ret].operands = vec![result];
        g.result_types = vec![self.info.output.clone()];
        g.regions[g.body].ops = vec![self.op, ret];
        Module { funcs: vec![g], mlir: None }
    }
}

#[cfg(test)]
pub fn set_op_schedule(m: &mut Module, s: Schedule) {
    let f = &mut m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).expect("compute op");
    f.ops[op].kind.as_compute_mut().expect("compute").schedule = Some(s);
}
