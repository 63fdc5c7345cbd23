//! What a learned cost model sees of a point: its feature vector
//! (`docs/search.md`, "Features of the learned model").
//!
//! A learned model (gradient-boosted trees trained online on measured
//! schedules, Ansor-AF-DS, seed 003 §4) is trained on the rows of many ops
//! at once, a GEMM's and a 7-axis convolution's alike, so every feature
//! set gives every problem on targets of one kind (CPU, GPU) the same
//! columns, each dimensionless or counted per flop where it can be, so
//! what is learned on one workload transfers to the next. Two sets:
//!
//! - [`FeatureSet::Analytical`] (`af`): the seed's seven analytical
//!   features on GPUs (data movement as operational intensities at global
//!   memory, shared memory and registers; instruction- and warp-level
//!   parallelism, occupancy; wave efficiency), and the same three factors
//!   for caches and cores on CPUs, each from the analytic model's own
//!   terms (`analytic.rs`), plus a constant bias column.
//! - [`FeatureSet::Loops`] (`loops`): a richer Ansor-style set read off the
//!   loop nest the point's plan describes: arithmetic, the point loops with
//!   their vector and unroll annotations, parallelism, per tile level its
//!   loops, footprint and traffic (the arithmetic-intensity curve), and
//!   per buffer (the three largest reads and the output) bytes, lines,
//!   innermost stride and reuse, in fixed slots padded with zeros.
//!
//! Extraction is cheap (microseconds a point, `docs/search.md` has the
//! figures): a model predicts thousands of points per batch.

use super::space::{Config, Problem};
use std::sync::LazyLock;
use tilec::ir::affine::AffineExpr;
use tilec::ir::{AxisId, EntityRef};
use tilec::target::{Binding, OrderEntry, TargetKind, distinct_values};

/// Which features a learned cost model sees (the search pass's `features`
/// option).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatureSet {
    /// Ansor-AF's analytical features (`af`).
    Analytical,
    /// Ansor-style features of the loop nest (`loops`).
    Loops,
}

impl FeatureSet {
    /// The option's values, in order.
    pub const NAMES: [&'static str; 2] = ["af", "loops"];

    /// The set the option value `name` names.
    pub fn from_name(name: &str) -> Option<FeatureSet> {
        match name {
            "af" => Some(FeatureSet::Analytical),
            "loops" => Some(FeatureSet::Loops),
            _ => None,
        }
    }

    /// The option value of this set.
    pub fn name(self) -> &'static str {
        match self {
            FeatureSet::Analytical => Self::NAMES[0],
            FeatureSet::Loops => Self::NAMES[1],
        }
    }

    /// One name per column of [`FeatureSet::extract`] for `p` (for reports
    /// and docs): the same for every problem on targets of `p`'s kind.
    pub fn columns(self, p: &Problem) -> Vec<&'static str> {
        self.columns_for(p.target.kind).to_vec()
    }

    /// The columns of this set on targets of kind `kind`.
    pub fn columns_for(self, kind: TargetKind) -> &'static [&'static str] {
        match (self, kind) {
            (FeatureSet::Analytical, TargetKind::Cuda) => &GPU_AF_COLUMNS,
            (FeatureSet::Analytical, TargetKind::Cpu) => &CPU_AF_COLUMNS,
            (FeatureSet::Loops, _) => &LOOP_COLUMN_NAMES,
        }
    }

    /// The feature vector of point `cfg` of `p`'s space: one finite value
    /// per column of [`FeatureSet::columns`]. `cfg` should be a whole state
    /// of the space (it need not be valid).
    pub fn extract(self, p: &Problem, cfg: &Config) -> Vec<f32> {
        let mut row = Vec::with_capacity(self.columns_for(p.target.kind).len());
        self.extract_into(p, cfg, &mut row);
        row
    }

    /// [`FeatureSet::extract`], appended to `out` (a batch's rows laid end
    /// to end, without a vector per row).
    pub fn extract_into(self, p: &Problem, cfg: &Config, out: &mut Vec<f32>) {
        let start = out.len();
        match (self, p.gpu()) {
            (FeatureSet::Analytical, true) => push_all(out, &gpu_analytical(p, cfg)),
            (FeatureSet::Analytical, false) => push_all(out, &cpu_analytical(p, cfg)),
            (FeatureSet::Loops, _) => loop_features(p, cfg, out),
        }
        debug_assert_eq!(out.len() - start, self.columns_for(p.target.kind).len(), "one value per column");
    }
}

/// Appends `values` as `f32`s. Every value is finite by construction (the
/// ratios below divide by at least 1); one that is not would be a bug,
/// which debug builds (the tests) catch, and release builds write 0 rather
/// than hand the model a NaN.
fn push_all(out: &mut Vec<f32>, values: &[f64]) {
    out.extend(values.iter().map(|&x| {
        debug_assert!(x.is_finite(), "feature value {x}");
        if x.is_finite() { x.clamp(f32::MIN as f64, f32::MAX as f64) as f32 } else { 0.0 }
    }));
}

/// `log2(1 + x)`: counts and sizes that span orders of magnitude (Ansor
/// writes its counts this way).
fn log2p(x: f64) -> f64 {
    (1.0 + x.max(0.0)).log2()
}

/// `a / b`, 0 where `b` is not positive.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The most tile levels the per-level columns describe, counted from the
/// innermost (the built-in CPU targets have 3, the GPU targets 2); a
/// target with more leaves its outermost ones out.
pub const MAX_TILE_LEVELS: usize = 4;

/// The reads the `loops` set describes one by one: the largest (by the
/// bytes of the tensor read), then read order.
pub const MAX_READS: usize = 3;

// ---------------------------------------------------------------------------
// Shared by both sets.

/// The `grid` tile level of a GPU target (one block's tile; 0 without one).
fn grid_level(p: &Problem) -> usize {
    p.target.tile_levels.iter().position(|l| l.binding == Binding::Grid).unwrap_or(0)
}

/// `Π ⌈extent / t(a)⌉` over the axes `which` selects: the tiles of `level`
/// over the op (reduction axes included: the reduction steps of a tile
/// level's loops).
fn tiles_at(p: &Problem, cfg: &Config, level: usize, which: impl Fn(usize) -> bool) -> f64 {
    (0..p.axes.len()).filter(|&a| which(a)).map(|a| p.axes[a].extent.div_ceil(p.range_of(cfg, a, level).max(1)) as f64).product()
}

/// The output's bytes.
fn output_bytes(p: &Problem) -> f64 {
    p.info.output.shape.iter().product::<u64>() as f64 * p.info.output.elem.size_bytes() as f64
}

/// The bytes of the tensor read `r` reads.
fn tensor_bytes(p: &Problem, r: usize) -> f64 {
    let t = &p.info.reads[r].tensor;
    t.shape.iter().product::<u64>() as f64 * t.elem.size_bytes() as f64
}

/// Is read `r` an epilogue read (read once per output point, after the
/// reduction)?
fn is_epilogue(p: &Problem, r: usize) -> bool {
    r >= p.compute.reads.len()
}

/// A GPU point's blocks and what one SM holds of them (the seed's WLP,
/// occupancy and wave efficiency).
struct Blocks {
    threads: f64,
    /// 32-bit registers per thread: the resource check's estimate.
    registers: f64,
    /// Shared memory per block: the staged reads' tiles.
    shared_bytes: f64,
    /// Warps active per SM: the blocks one SM holds at once (the fewest its
    /// threads, registers, shared memory and block limits allow), but no
    /// more than the grid gives each SM, times warps per block.
    active_warps: f64,
    /// Active warps over the SM's warp limit.
    occupancy: f64,
    /// Blocks over the block slots of the waves they take: `blocks /
    /// (waves × SMs × resident)`, `waves = ⌈blocks / (SMs × resident)⌉`.
    wave_efficiency: f64,
}

impl Blocks {
    fn of(p: &Problem, cfg: &Config) -> Blocks {
        let c = &p.target.compute;
        let warp = c.warp_size.max(1) as f64;
        let threads = p.threads(cfg) as f64;
        let warps = (threads / warp).ceil().max(1.0);
        let blocks = p.parallel_tiles(cfg) as f64;
        let inner = p.levels - 1;
        // The space stages no read in registers on GPUs (`Problem::plan`
        // stages in shared memory only), so none is counted in full.
        let registers = p.resources().register_parts(&[], &|a| p.range_of(cfg, a.index(), inner), 1).iter().map(|(_, n)| *n as f64).sum::<f64>();
        let grid = grid_level(p);
        let shared_bytes = if p.shared_level.is_some() { p.footprint(cfg, grid) as f64 } else { 0.0 };
        let shared_per_unit = p.target.memory_level(&p.target.tile_levels[grid].memory).map_or(0, |m| m.unit_capacity_bytes.unwrap_or(m.capacity_bytes)) as f64;
        // Blocks one SM holds at once: the least of what each of its
        // limits allows (a limit the target does not give is no limit).
        let mut resident = f64::INFINITY;
        let mut limit = |blocks: f64| resident = resident.min(blocks.floor());
        if c.max_blocks_per_unit > 0 {
            limit(c.max_blocks_per_unit as f64);
        }
        if c.max_threads_per_unit > 0 {
            limit(c.max_threads_per_unit as f64 / (warps * warp));
        }
        if c.registers_per_unit > 0 {
            limit(c.registers_per_unit as f64 / (registers.max(1.0) * warps * warp));
        }
        if shared_bytes > 0.0 && shared_per_unit > 0.0 {
            limit(shared_per_unit / shared_bytes);
        }
        if !resident.is_finite() {
            resident = 1.0;
        }
        let units = c.units.max(1) as f64;
        let active_warps = resident.min((blocks / units).ceil()) * warps;
        let max_warps = if c.max_threads_per_unit > 0 { c.max_threads_per_unit as f64 / warp } else { warps * resident.max(1.0) };
        // A block that fits no SM (an invalid point) still gets a slot, so
        // the figure stays finite.
        let slots = units * resident.max(1.0);
        let waves = (blocks / slots).ceil().max(1.0);
        Blocks { threads, registers, shared_bytes, active_warps, occupancy: ratio(active_warps, max_warps), wave_efficiency: blocks / (waves * slots) }
    }
}

/// Loads of read `r` all of a GPU kernel's threads make from where it
/// lives (shared memory when staged, else global): per thread and
/// reduction step (an epilogue read: once), the distinct elements of the
/// read over the thread's spatial tile, which the unrolled point loops
/// load once each.
fn thread_loads(p: &Problem, cfg: &Config, r: usize) -> f64 {
    let inner = p.levels - 1;
    let threads = tiles_at(p, cfg, inner, |a| p.axes[a].spatial);
    let steps: f64 = if is_epilogue(p, r) { 1.0 } else { p.axes.iter().filter(|a| !a.spatial).map(|a| a.extent as f64).product() };
    let elem = p.info.reads[r].tensor.elem.size_bytes().max(1);
    let elems = p.read_bytes(r, &|id: AxisId| if p.axes[id.index()].spatial { p.range_of(cfg, id.index(), inner) } else { 1 }) / elem;
    threads * steps * elems as f64
}

/// The bank-conflict degree of the first warp's loads of staged read `r`
/// from its shared-memory tile: the most distinct 4-byte words (bank
/// width) that fall in one bank when every thread loads the element of its
/// first point (1: conflict free; threads loading one word share a
/// broadcast). Threads are numbered as `bind` maps them (the innermost
/// spatial axis is `x`, up to three axes), and neighbouring threads along
/// an axis are a thread's share of its tile apart (the tile over its
/// virtual threads, `vthread`'s interleaving); the buffer is the read's
/// box over the block tile, row-major, as `cache` allocates it. This is
/// the seed's estimate from the stride adjacent threads access, taken
/// over the whole warp.
fn bank_conflicts(p: &Problem, cfg: &Config, r: usize) -> f64 {
    let t = &p.target;
    let grid = grid_level(p);
    let Some(m) = t.memory_level(&t.tile_levels[grid].memory) else { return 1.0 };
    let (Some(thread_level), Some((_, read))) = (p.thread_level, p.compute.all_reads().nth(r)) else { return 1.0 };
    if m.banks == 0 || m.bank_width_bytes == 0 {
        return 1.0;
    }
    let ty = &p.info.reads[r].tensor;
    // (axis, threads along it, index step between neighbouring threads),
    // `x` first.
    let mut thread_axes: Vec<(usize, u64, i64)> = Vec::with_capacity(3);
    for &a in cfg.order.iter().rev() {
        if !p.axes[a].spatial || thread_axes.len() == 3 {
            continue;
        }
        let along = cfg.tiles[a][grid].div_ceil(cfg.tiles[a][thread_level].max(1));
        if along > 1 {
            let step = (p.range_of(cfg, a, thread_level) / cfg.vthreads[a].max(1)).max(1);
            thread_axes.push((a, along, step as i64));
        }
    }
    let threads = p.threads(cfg).min(t.compute.warp_size.max(1) as u64);
    // Row-major strides of the shared tile (elements).
    let box_dims: Vec<i64> = read.indices.iter().enumerate().map(|(d, e)| distinct_values(e, &|id| p.range_of(cfg, id.index(), grid), ty.shape.get(d).copied().unwrap_or(1)) as i64).collect();
    let mut strides = vec![1i64; box_dims.len()];
    for d in (0..box_dims.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].saturating_mul(box_dims[d + 1]);
    }
    let elem = ty.elem.size_bytes() as i64;
    let width = m.bank_width_bytes as i64;
    let banks = m.banks as i64;
    let mut value = vec![0i64; p.axes.len()];
    let mut words: Vec<(i64, i64)> = Vec::with_capacity(threads as usize);
    for id in 0..threads {
        let mut rest = id;
        for &(a, along, step) in &thread_axes {
            value[a] = (rest % along) as i64 * step;
            rest /= along;
        }
        let offset: i64 = read.indices.iter().zip(&strides).map(|(e, &s)| (index_value(e, &value) - index_value(e, &[])).saturating_mul(s)).sum();
        let word = offset.saturating_mul(elem).div_euclid(width);
        words.push((word.rem_euclid(banks), word));
    }
    words.sort_unstable();
    words.dedup();
    // The most distinct words of one bank: the runs of equal banks.
    let mut most = 1;
    let mut run = 0;
    for (i, w) in words.iter().enumerate() {
        run = if i > 0 && words[i - 1].0 == w.0 { run + 1 } else { 1 };
        most = most.max(run);
    }
    most as f64
}

/// The value of index `e` where each axis `a` has `value[a]` (0 past its
/// end), rounded down where it divides.
fn index_value(e: &AffineExpr<AxisId>, value: &[i64]) -> i64 {
    e.eval_numerator(|id| value.get(id.index()).copied().unwrap_or(0)).div_euclid(e.divisor().max(1))
}

// ---------------------------------------------------------------------------
// `af` on GPUs: the seed's seven features, and the bias.

const GPU_AF: usize = 8;

static GPU_AF_COLUMNS: [&str; GPU_AF] = ["oi_global", "oi_shared", "reg_reuse", "ilp", "wlp", "occupancy", "wave_efficiency", "bias"];

/// The seed's analytical features (§4.1) of a GPU point.
fn gpu_analytical(p: &Problem, cfg: &Config) -> [f64; GPU_AF] {
    let grid = grid_level(p);
    let inner = p.levels - 1;
    let warp = p.target.compute.warp_size.max(1) as f64;
    // Global memory → shared memory: each staged read's block tile once
    // per block and step of the block's reduction loop (the copy's trip
    // counts); reads that cannot be staged load from global memory at
    // every use.
    let block_steps = tiles_at(p, cfg, grid, |_| true);
    let blocks = tiles_at(p, cfg, grid, |a| p.axes[a].spatial);
    // A warp-wide load serves the threads of one warp: all 32 but in a
    // block of fewer threads (or the last warp of one that is not a
    // multiple of 32).
    let threads = p.threads(cfg).max(1) as f64;
    let warp_loads_per_thread_load = (threads / warp).ceil() / threads;
    let (mut global, mut shared) = (0.0, 0.0);
    for r in 0..p.info.reads.len() {
        if p.stageable.contains(&r) {
            let copies = if is_epilogue(p, r) { blocks } else { block_steps };
            global += copies * p.read_bytes(r, &|id| p.range_of(cfg, id.index(), grid)) as f64;
            // Shared memory → registers: warp-wide loads, each taking as
            // many transactions as its worst bank has distinct words.
            shared += thread_loads(p, cfg, r) * warp_loads_per_thread_load * bank_conflicts(p, cfg, r);
        } else {
            global += thread_loads(p, cfg, r) * p.info.reads[r].tensor.elem.size_bytes() as f64;
        }
    }
    let ilp: f64 = (0..p.axes.len()).filter(|&a| p.axes[a].spatial).map(|a| p.range_of(cfg, a, inner) as f64).product();
    let b = Blocks::of(p, cfg);
    [
        ratio(p.flops, global.max(1.0)),
        ratio(p.flops, shared.max(1.0)),
        // Registers → global memory: each output element once, from the
        // registers it accumulated in.
        ratio(p.flops, output_bytes(p).max(1.0)),
        ilp,
        b.active_warps,
        b.occupancy,
        b.wave_efficiency,
        1.0,
    ]
}

// ---------------------------------------------------------------------------
// `af` on CPUs: the same three factors for caches and cores, and the bias.

const CPU_AF: usize = 9 + MAX_TILE_LEVELS;

static CPU_AF_COLUMNS: [&str; CPU_AF] = [
    "bytes_per_flop_inner0",
    "bytes_per_flop_inner1",
    "bytes_per_flop_inner2",
    "bytes_per_flop_inner3",
    "pack_bytes_per_flop",
    "reg_reuse",
    "vector_occupancy",
    "kernel_issue",
    "kernel_latency",
    "kernel_registers",
    "kernel_accumulate",
    "wave_efficiency",
    "bias",
];

/// The analytical features of a CPU point: data movement per flop into
/// each tile level (innermost first) and by packed copies, register-tile
/// reuse, vector and FMA-port occupancy (the micro-kernel's terms), load
/// balance over the cores.
fn cpu_analytical(p: &Problem, cfg: &Config) -> [f64; CPU_AF] {
    let mut v = [0.0; CPU_AF];
    for (k, slot) in v.iter_mut().take(MAX_TILE_LEVELS).enumerate() {
        if k < p.levels {
            *slot = ratio(p.traffic(cfg, p.levels - 1 - k), p.flops);
        }
    }
    let packed: f64 = (0..p.info.reads.len()).filter_map(|r| cfg.pack_level(r).map(|l| p.pack_traffic(cfg, r, l))).sum();
    let (acc, loads, _) = p.register_tile(cfg);
    let [issue, latency, registers, accumulate] = p.kernel_terms(cfg);
    let rest = [
        ratio(packed, p.flops),
        // FMAs (one per accumulator register) per load slot of a step.
        acc / loads.max(1.0),
        p.vector_width(cfg).max(1) as f64 / p.lanes_of(cfg).max(1) as f64,
        issue,
        latency,
        registers,
        accumulate,
        cpu_wave_efficiency(p, cfg),
        1.0,
    ];
    v[MAX_TILE_LEVELS..].copy_from_slice(&rest);
    v
}

/// The outermost tiles over the core slots of the waves they take:
/// `tiles / (⌈tiles / cores⌉ × cores)` (the seed's 2.5 / 3 for 160 tiles on
/// 64 cores).
fn cpu_wave_efficiency(p: &Problem, cfg: &Config) -> f64 {
    let tiles = p.parallel_tiles(cfg) as f64;
    let units = p.target.compute.units.max(1) as f64;
    tiles / ((tiles / units).ceil().max(1.0) * units)
}

// ---------------------------------------------------------------------------
// `loops`: the loop nest.

/// Where a loop of the nest comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// A tile level's loops (`S.<level>`, `R.<level>`).
    Tile(usize),
    /// Virtual-thread loops (`V`).
    VThread,
    /// The innermost tile's points (`S.point`, `R.point`); the vector
    /// axis' steps a vector at a time.
    Point,
}

#[derive(Clone, Copy, Debug)]
struct Loop {
    axis: usize,
    trip: u64,
    place: Place,
}

/// The loops `tile` builds for `cfg`, outermost first: the target's loop
/// order, each entry's axes in `cfg`'s order, loops of one trip left out.
fn loop_nest(p: &Problem, cfg: &Config) -> Vec<Loop> {
    let inner = p.levels - 1;
    let w = p.vector_width(cfg).max(1);
    let mut nest = Vec::with_capacity(p.order.len() * p.axes.len());
    let mut push = |axis: usize, trip: u64, place: Place| {
        if trip > 1 {
            nest.push(Loop { axis, trip, place });
        }
    };
    for entry in &p.order {
        let (spatial, place) = match *entry {
            OrderEntry::Spatial(l) => (true, Place::Tile(l)),
            OrderEntry::Reduction(l) => (false, Place::Tile(l)),
            OrderEntry::VThread => (true, Place::VThread),
            OrderEntry::SpatialPoint => (true, Place::Point),
            OrderEntry::ReductionPoint => (false, Place::Point),
        };
        for &a in cfg.order.iter().filter(|&&a| p.axes[a].spatial == spatial) {
            match place {
                Place::Tile(l) if !p.fixed(a, l) => {
                    let outer = if l == 0 { p.axes[a].extent } else { p.range_of(cfg, a, l - 1) };
                    push(a, outer.div_ceil(p.range_of(cfg, a, l).max(1)), place);
                }
                Place::Tile(_) => {}
                Place::VThread => push(a, cfg.vthreads[a], place),
                Place::Point => {
                    let share = p.range_of(cfg, a, inner) / cfg.vthreads[a].max(1);
                    push(a, if cfg.vector == Some(a) { share / w } else { share }, place);
                }
            }
        }
    }
    nest
}

/// The axis whose steps are innermost: the vector axis where the point
/// has a vector, else the innermost loop's.
fn innermost_axis(p: &Problem, cfg: &Config, nest: &[Loop]) -> Option<usize> {
    if p.vector_width(cfg) > 1 { cfg.vector } else { nest.last().map(|l| l.axis) }
}

const ARITH: usize = 8;
const ARITH_COLUMNS: [&str; ARITH] = ["flops", "outputs", "reduction", "flops_per_point", "acc_bytes", "int_acc", "reads", "epilogue"];

/// The op's arithmetic: the same for every point of a problem.
fn arithmetic(p: &Problem) -> [f64; ARITH] {
    let outputs: f64 = p.axes.iter().filter(|a| a.spatial).map(|a| a.extent as f64).product();
    let reduction: f64 = p.axes.iter().filter(|a| !a.spatial).map(|a| a.extent as f64).product();
    [
        log2p(p.flops),
        log2p(outputs),
        log2p(reduction),
        p.flops / (outputs * reduction).max(1.0),
        p.info.acc.size_bytes() as f64,
        if p.info.acc.is_int() { 1.0 } else { 0.0 },
        p.info.reads.len() as f64,
        if p.compute.has_epilogue { 1.0 } else { 0.0 },
    ]
}

const POINT: usize = 13;
const POINT_COLUMNS: [&str; POINT] = [
    "spatial_points",
    "reduction_points",
    "point_loops",
    "vthreads",
    "vector_width",
    "vector_lanes",
    "vector_on_reduction",
    "vector_len",
    "vector_pos",
    "vector_active_lanes",
    "unroll_limit",
    "unroll_steps",
    "unroll_loops",
];

/// The innermost tile and its annotations: its points, virtual threads,
/// the vector (width, lanes, the axis' kind and share, how many point
/// loops lie inside its loop, the lanes its partial tiles keep busy), and
/// what `unroll` makes straight-line code (the innermost loops whose steps
/// multiply to at most the limit, inside any hardware-bound loop and any
/// copy).
fn point_loops(p: &Problem, cfg: &Config, nest: &[Loop]) -> [f64; POINT] {
    let inner = p.levels - 1;
    let points = |spatial: bool| -> f64 { (0..p.axes.len()).filter(|&a| p.axes[a].spatial == spatial).map(|a| p.range_of(cfg, a, inner) as f64).product() };
    let w = p.vector_width(cfg);
    let vector = cfg.vector.filter(|_| w > 1);
    let (len, pos, active) = match vector {
        Some(v) => {
            let share = p.range_of(cfg, v, inner) / cfg.vthreads[v].max(1);
            let pos = nest.iter().rposition(|l| l.axis == v && l.place == Place::Point).map_or(0, |i| nest.len() - 1 - i);
            let (extent, tile) = (p.axes[v].extent, cfg.tiles[v][0].max(1));
            (share as f64, pos as f64, extent as f64 / (extent.div_ceil(tile) * tile) as f64)
        }
        None => (0.0, 0.0, 1.0),
    };
    // The plan's limit: on CPUs at least the register tile's steps.
    let limit = if p.gpu() { p.unroll } else { p.unroll.max(p.register_tile(cfg).0 as u64) };
    // Copies sit in the innermost loop of the level they stage at.
    let staged_deepest = (0..p.info.reads.len()).filter_map(|r| if p.gpu() { p.stageable.contains(&r).then(|| grid_level(p)) } else { cfg.pack_level(r) }).max();
    let mut steps = 1u64;
    let mut unrolled = 0;
    for l in nest.iter().rev() {
        let bound = match l.place {
            Place::Tile(level) => p.target.tile_levels[level].binding != Binding::Serial || staged_deepest.is_some_and(|s| level <= s),
            _ => false,
        };
        if bound || steps.saturating_mul(l.trip) > limit {
            break;
        }
        steps *= l.trip;
        unrolled += 1;
    }
    [
        log2p(points(true)),
        log2p(points(false)),
        nest.iter().filter(|l| !matches!(l.place, Place::Tile(_))).count() as f64,
        log2p(cfg.vthreads.iter().map(|&v| v as f64).product()),
        w as f64,
        if vector.is_some() { p.lanes_of(cfg) as f64 } else { 0.0 },
        if p.lane_axis(cfg).is_some() { 1.0 } else { 0.0 },
        log2p(len),
        pos,
        active,
        log2p(limit as f64),
        log2p(if unrolled > 0 { steps as f64 } else { 0.0 }),
        unrolled as f64,
    ]
}

const PARALLEL: usize = 7;
const PARALLEL_COLUMNS: [&str; PARALLEL] = ["parallel_tiles", "tiles_per_unit", "wave_efficiency", "threads_per_block", "register_pressure", "shared_bytes", "occupancy"];

/// Parallelism and resources: the outermost tiles (blocks, core tiles)
/// against the units, and on GPUs a block's threads, registers, shared
/// memory and the occupancy they allow; on CPUs the register tile's
/// registers over the register file.
fn parallel(p: &Problem, cfg: &Config) -> [f64; PARALLEL] {
    let tiles = p.parallel_tiles(cfg) as f64;
    let units = p.target.compute.units.max(1) as f64;
    if p.gpu() {
        let b = Blocks::of(p, cfg);
        let max_registers = p.target.compute.max_registers_per_thread.max(1) as f64;
        [log2p(tiles), tiles / units, b.wave_efficiency, log2p(b.threads), b.registers / max_registers, log2p(b.shared_bytes), b.occupancy]
    } else {
        let (acc, _, held) = p.register_tile(cfg);
        let registers = p.target.isa.vector_registers.max(1) as f64;
        [log2p(tiles), tiles / units, cpu_wave_efficiency(p, cfg), 0.0, (acc + held + 1.0) / registers, 0.0, 0.0]
    }
}

const LEVEL: usize = 9;
const LEVEL_COLUMNS: [&str; LEVEL] = ["spatial_trips", "reduction_trips", "loops", "innermost_trip", "tiles", "footprint", "fill", "bytes_per_flop", "self_evicting_reads"];

/// Tile level `l`: its loops (the trips of its spatial and reduction loops,
/// how many, the innermost one's), its tiles over the op, a tile's
/// footprint and how full it fills its memory, the bytes moved into its
/// tiles per flop (Roller's `Q(T, l)`: over the levels, the
/// arithmetic-intensity curve), and the reads whose tiles evict themselves
/// there (CPU caches).
fn level(p: &Problem, cfg: &Config, nest: &[Loop], l: usize) -> [f64; LEVEL] {
    let (mut spatial, mut reduction, mut loops, mut innermost) = (1.0, 1.0, 0, 0);
    for lp in nest.iter().filter(|lp| lp.place == Place::Tile(l)) {
        if p.axes[lp.axis].spatial {
            spatial *= lp.trip as f64;
        } else {
            reduction *= lp.trip as f64;
        }
        loops += 1;
        innermost = lp.trip;
    }
    let footprint = p.footprint(cfg, l) as f64;
    let conflicts = if p.gpu() { 0 } else { (0..p.info.reads.len()).filter(|&r| p.conflicts(cfg, r, l)).count() };
    [
        spatial.log2(),
        reduction.log2(),
        loops as f64,
        log2p(innermost as f64),
        log2p(tiles_at(p, cfg, l, |_| true)),
        log2p(footprint),
        ratio(footprint, p.capacity(l) as f64),
        ratio(p.traffic(cfg, l), p.flops),
        conflicts as f64,
    ]
}

const BUFFER: usize = 13;
const BUFFER_COLUMNS: [&str; BUFFER] = [
    "unique_bytes",
    "elem_bytes",
    "outer_bytes_per_flop",
    "inner_bytes_per_flop",
    "lines_per_flop",
    "innermost_stride",
    "contiguous_vector",
    "reuse_distance",
    "reuse_count",
    "staged_depth",
    "self_evicting_levels",
    "bank_conflicts",
    "padded",
];

/// What a buffer access is, for [`buffer`]: read `r`, or the output.
#[derive(Clone, Copy)]
enum Access {
    Read(usize),
    Output,
}

/// One buffer's access: its tensor's bytes and element size; the bytes
/// moved into the outermost and innermost tile levels' tiles per flop
/// (Roller's traffic of this buffer), the cache lines the innermost tiles
/// touch per flop (lines of the memory they are filled from); the stride
/// in elements of the stored tensor along the innermost axis (0: not
/// indexed by it, a broadcast) and whether it is contiguous along the
/// vector; the reuse the nest carries (the innermost loop whose axis does
/// not index the buffer: the iterations inside it, and its trip); where it
/// is staged or packed (tile levels from the innermost, 1 = innermost; 0:
/// not); the CPU tile levels at which its tile evicts itself; its GPU
/// shared-memory bank-conflict degree; whether it is padded.
fn buffer(p: &Problem, cfg: &Config, nest: &[Loop], access: Access) -> [f64; BUFFER] {
    let inner = p.levels - 1;
    let (indices, ty) = match access {
        Access::Read(r) => (&p.compute.all_reads().nth(r).expect("a read of the op").1.indices, &p.info.reads[r].tensor),
        Access::Output => (&p.compute.output, &p.info.output),
    };
    let elem = ty.elem.size_bytes() as f64;
    let unique = ty.shape.iter().product::<u64>() as f64 * elem;
    // Roller's traffic of this buffer into the tiles of `level`: the
    // spatial tiles times its tile with the reduction at full extent (the
    // output: once).
    let traffic = |level: usize| -> f64 {
        match access {
            Access::Read(r) => {
                let t = |id: AxisId| if p.axes[id.index()].spatial { p.range_of(cfg, id.index(), level) } else { p.axes[id.index()].extent };
                tiles_at(p, cfg, level, |a| p.axes[a].spatial) * p.read_bytes(r, &t) as f64
            }
            Access::Output => unique,
        }
    };
    // Lines of one innermost tile: its rows (runs contiguous in memory)
    // times the lines of a run.
    let from_line = p.target.memory_index(&p.target.tile_levels[inner].memory).and_then(|m| p.target.memory.get(m.saturating_sub(1))).map_or(64, |m| m.line_bytes.max(1)) as f64;
    let dims: Vec<u64> = indices.iter().enumerate().map(|(d, e)| distinct_values(e, &|id| p.range_of(cfg, id.index(), inner), ty.shape.get(d).copied().unwrap_or(1))).collect();
    let mut d = dims.len();
    while d > 1 && ty.shape.get(d - 1) == Some(&dims[d - 1]) {
        d -= 1;
    }
    let (rows, run) =
        if dims.is_empty() { (1.0, 1.0) } else { (dims[..d - 1].iter().map(|&x| x as f64).product::<f64>(), dims[d - 1] as f64 * ty.shape.iter().skip(d).map(|&x| x as f64).product::<f64>()) };
    let lines = tiles_at(p, cfg, inner, |_| true) * rows * (run * elem / from_line).ceil();
    // The stride along the innermost axis, in the tensor as stored.
    let ids: Vec<AxisId> = p.compute.axis_ids().collect();
    let stride = innermost_axis(p, cfg, nest).map_or(0.0, |a| {
        let mut row = 1.0;
        let mut s = 0.0;
        for (dim, e) in indices.iter().enumerate().rev() {
            s += e.coeff(ids[a]) as f64 / e.divisor().max(1) as f64 * row;
            row *= ty.shape.get(dim).copied().unwrap_or(1) as f64;
        }
        s.abs()
    });
    let w = p.vector_width(cfg);
    let contiguous = w > 1 && cfg.vector.is_some_and(|v| Problem::walks_contiguously(indices, ids[v], None));
    let (distance, count) = match nest.iter().rposition(|l| !indices.iter().any(|e| e.uses(ids[l.axis]))) {
        Some(i) => (nest[i + 1..].iter().map(|l| l.trip as f64).product::<f64>(), nest[i].trip as f64),
        None => (0.0, 0.0),
    };
    let (staged, evicting, banks, padded) = match access {
        Access::Read(r) => {
            let staged_at = if p.gpu() { p.stageable.contains(&r).then(|| grid_level(p)) } else { cfg.pack_level(r) };
            let evicting = if p.gpu() { 0 } else { (0..p.levels).filter(|&l| p.conflicts(cfg, r, l)).count() };
            let banks = if p.gpu() && p.stageable.contains(&r) { bank_conflicts(p, cfg, r) } else { 0.0 };
            let padded = p.compute.all_reads().nth(r).is_some_and(|(_, read)| read.pad.is_some());
            (staged_at.map_or(0.0, |l| (p.levels - l) as f64), evicting as f64, banks, if padded { 1.0 } else { 0.0 })
        }
        Access::Output => (0.0, 0.0, 0.0, 0.0),
    };
    [
        log2p(unique),
        elem,
        ratio(traffic(0), p.flops),
        ratio(traffic(inner), p.flops),
        ratio(lines, p.flops),
        log2p(stride),
        if contiguous { 1.0 } else { 0.0 },
        log2p(distance),
        log2p(count),
        staged,
        evicting,
        banks,
        padded,
    ]
}

/// Every column of the `loops` set, in order: the op's arithmetic, the
/// point loops, parallelism, [`MAX_TILE_LEVELS`] tile levels from the
/// innermost (`inner0_...`), [`MAX_READS`] reads largest first
/// (`read0_...`), the output (`output_...`).
static LOOP_COLUMNS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut names: Vec<String> = ARITH_COLUMNS.iter().chain(&POINT_COLUMNS).chain(&PARALLEL_COLUMNS).map(|s| s.to_string()).collect();
    for k in 0..MAX_TILE_LEVELS {
        names.extend(LEVEL_COLUMNS.iter().map(|c| format!("inner{k}_{c}")));
    }
    for r in 0..MAX_READS {
        names.extend(BUFFER_COLUMNS.iter().map(|c| format!("read{r}_{c}")));
    }
    names.extend(BUFFER_COLUMNS.iter().map(|c| format!("output_{c}")));
    names
});

static LOOP_COLUMN_NAMES: LazyLock<Vec<&'static str>> = LazyLock::new(|| LOOP_COLUMNS.iter().map(String::as_str).collect());

/// The `loops` features of `cfg` (see [`LOOP_COLUMNS`]), appended to `out`.
fn loop_features(p: &Problem, cfg: &Config, out: &mut Vec<f32>) {
    let nest = loop_nest(p, cfg);
    push_all(out, &arithmetic(p));
    push_all(out, &point_loops(p, cfg, &nest));
    push_all(out, &parallel(p, cfg));
    for k in 0..MAX_TILE_LEVELS {
        match p.levels.checked_sub(k + 1) {
            Some(l) => push_all(out, &level(p, cfg, &nest, l)),
            None => push_all(out, &[0.0; LEVEL]),
        }
    }
    for r in largest_reads(p).into_iter().map(Some).chain(std::iter::repeat(None)).take(MAX_READS) {
        match r {
            Some(r) => push_all(out, &buffer(p, cfg, &nest, Access::Read(r))),
            None => push_all(out, &[0.0; BUFFER]),
        }
    }
    push_all(out, &buffer(p, cfg, &nest, Access::Output));
}

/// The reads `loops` describes: at most [`MAX_READS`], the largest tensors
/// first (ties: read order). The same for every point of a problem, so a
/// read keeps its slot.
fn largest_reads(p: &Problem) -> Vec<usize> {
    let mut reads: Vec<usize> = (0..p.info.reads.len()).collect();
    reads.sort_by(|&a, &b| tensor_bytes(p, b).total_cmp(&tensor_bytes(p, a)).then(a.cmp(&b)));
    reads.truncate(MAX_READS);
    reads
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::knobs::KnobSpace;
    use crate::search::rng::Rng;
    use crate::search::tests::GEMM;
    use crate::testing::parse;
    use proptest::prelude::*;

    fn problem(src: &str, target: &str) -> Problem {
        let m = parse(src);
        let f = &m.funcs[0];
        let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
        Problem::new(f, op, tilec::target::builtin(target).unwrap(), 16).unwrap()
    }

    fn workload(name: &str, target: &str) -> Problem {
        problem(&std::fs::read_to_string(format!("{}/../benchmarks/workloads/{name}.tile", env!("CARGO_MANIFEST_DIR"))).unwrap(), target)
    }

    /// A point of GEMM 64x80x48 (`i`, `j`, `k`) with the given tiles.
    fn gemm_point(p: &Problem, tiles: [&[u64]; 3], vthreads: [u64; 3]) -> Config {
        let cfg = Config { tiles: tiles.iter().map(|t| t.to_vec()).collect(), vthreads: vthreads.to_vec(), pack: vec![0; 2], order: vec![0, 1, 2], vector: Some(1), intrinsic: None };
        assert!(p.valid(&cfg), "{cfg:?}");
        cfg
    }

    /// The value of column `name`.
    fn column(set: FeatureSet, p: &Problem, cfg: &Config, name: &str) -> f64 {
        let i = set.columns(p).iter().position(|c| *c == name).unwrap_or_else(|| panic!("no column {name}"));
        set.extract(p, cfg)[i] as f64
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-5 * b.abs().max(1.0)
    }

    #[test]
    fn the_option_names_the_sets() {
        assert_eq!(FeatureSet::NAMES, ["af", "loops"]);
        for name in FeatureSet::NAMES {
            assert_eq!(FeatureSet::from_name(name).unwrap().name(), name);
        }
        assert_eq!(FeatureSet::from_name("ansor"), None);
        assert_eq!(FeatureSet::Analytical.columns_for(TargetKind::Cuda), GPU_AF_COLUMNS);
        assert_eq!(FeatureSet::Analytical.columns_for(TargetKind::Cpu), CPU_AF_COLUMNS);
        let loops = FeatureSet::Loops.columns_for(TargetKind::Cpu);
        assert_eq!(loops.len(), ARITH + POINT + PARALLEL + MAX_TILE_LEVELS * LEVEL + (MAX_READS + 1) * BUFFER);
        assert!((40..=120).contains(&loops.len()), "{}", loops.len());
        let distinct: std::collections::BTreeSet<&&str> = loops.iter().collect();
        assert_eq!(distinct.len(), loops.len(), "column names are distinct");
    }

    /// GEMM 64x80x48 on `sm90`, blocks of 32x16 (k chunks of 8), threads of
    /// 4x2: the seven features by hand.
    #[test]
    fn the_seven_gpu_features_of_a_gemm_by_hand() {
        let p = problem(GEMM, "sm90");
        let cfg = gemm_point(&p, [&[32, 4], &[16, 2], &[8, 1]], [1; 3]);
        let af = FeatureSet::Analytical.extract(&p, &cfg);
        assert_eq!(af.len(), 8);
        let af: Vec<f64> = af.into_iter().map(f64::from).collect();
        // flops = 64·80·48 points × 2 (mul, add) = 491520.
        // Global → shared: 2·5 blocks × 6 k chunks = 60 copies of A's 32x8
        // and B's 8x16 f32 tiles: 60 × (1024 + 512) = 92160 bytes.
        assert!(close(af[0], 491520.0 / 92160.0), "oi_global {}", af[0]);
        // Shared → registers: 640 threads × 48 steps × (4 elements of A +
        // 2 of B) = 122880 + 61440 loads, 3840 + 1920 warp loads. Threads:
        // x along j (8), y along i (8); a warp is x 0..8, y 0..4. A's tile
        // is 32 rows of 8 floats and y steps 4 rows: words 0, 32, 64, 96,
        // all in bank 0 (degree 4); B: x steps 2 floats, banks 0, 2, ..., 14
        // (degree 1). 3840·4 + 1920 = 17280 transactions.
        assert_eq!(bank_conflicts(&p, &cfg, 0), 4.0);
        assert_eq!(bank_conflicts(&p, &cfg, 1), 1.0);
        assert!(close(af[1], 491520.0 / 17280.0), "oi_shared {}", af[1]);
        // Registers → global: the 64x80 f32 output once.
        assert!(close(af[2], 491520.0 / 20480.0), "reg_reuse {}", af[2]);
        // ILP: 4x2 accumulators per thread.
        assert_eq!(af[3], 8.0);
        // 64 threads = 2 warps, 26 registers each (8 accumulators, 2 reads,
        // 16 indexing): an SM would hold min(32 blocks, 2048/64 = 32,
        // 65536/(26·64) = 39, 233472/1536 = 152) = 32 blocks, but 10 blocks
        // on 132 SMs give each at most 1: 2 active warps of 64.
        assert_eq!(af[4], 2.0);
        assert!(close(af[5], 2.0 / 64.0));
        // One wave of 132 SMs × 32 slots holds the 10 blocks.
        assert!(close(af[6], 10.0 / (132.0 * 32.0)), "wave_efficiency {}", af[6]);
        assert_eq!(af[7], 1.0);

        // Two virtual threads along i put A's neighbouring rows 2 apart:
        // words 0, 16, 32, 48 in banks 0 and 16 (degree 2): 3840·2 + 1920 =
        // 9600 transactions.
        let vthreads = gemm_point(&p, [&[32, 4], &[16, 2], &[8, 1]], [2, 1, 1]);
        assert_eq!(bank_conflicts(&p, &vthreads, 0), 2.0);
        assert!(close(column(FeatureSet::Analytical, &p, &vthreads, "oi_shared"), 491520.0 / 9600.0));
    }

    /// GEMM 64x80x48 on `x86-avx2`: core tiles 4x16, l2 tiles 4x16 (k 48),
    /// l1 tiles 2x8 (k 8), vector j.
    #[test]
    fn the_cpu_analytical_features_of_a_gemm_by_hand() {
        let p = problem(GEMM, "x86-avx2");
        let cfg = gemm_point(&p, [&[4, 4, 2], &[16, 16, 8], &[48, 48, 8]], [1; 3]);
        let af: Vec<f64> = FeatureSet::Analytical.extract(&p, &cfg).into_iter().map(f64::from).collect();
        assert_eq!(af.len(), CPU_AF_COLUMNS.len());
        // Into l1 tiles: 32·10 tiles × (A 2x48 + B 48x8 floats = 1920
        // bytes) + the 20480-byte output = 634880 bytes over 491520 flops.
        assert!(close(af[0], 634880.0 / 491520.0), "l1 {}", af[0]);
        // Into l2 and core tiles: 16·5 × (4x48 + 48x16 floats) + output.
        assert!(close(af[1], 327680.0 / 491520.0), "l2 {}", af[1]);
        assert!(close(af[2], 327680.0 / 491520.0), "core {}", af[2]);
        assert_eq!(af[3], 0.0, "no fourth tile level");
        assert_eq!(af[4], 0.0, "nothing packed");
        // Register tile 2x8: 2 accumulators of 8 lanes; per step 2
        // broadcasts of A and 1 vector of B.
        assert!(close(af[5], 2.0 / 3.0), "reg_reuse {}", af[5]);
        assert_eq!(af[6], 1.0, "8 of 8 lanes");
        let terms = p.kernel_terms(&cfg);
        for (i, t) in terms.iter().enumerate() {
            assert!(close(af[7 + i], *t), "kernel term {i}");
        }
        // 80 core tiles on 64 cores: 2 waves, 80 / 128.
        assert!(close(af[11], 80.0 / 128.0));
        assert_eq!(af[12], 1.0);
    }

    /// The seed's example: work for 2.5 waves takes 3, 2.5 / 3 = 0.83; a
    /// tile count that is a multiple of the cores wastes none.
    #[test]
    fn a_tile_count_that_is_not_a_multiple_of_the_cores_lowers_wave_efficiency() {
        let p = problem(GEMM, "x86-avx2");
        let whole = gemm_point(&p, [&[1, 1, 1], &[16, 16, 8], &[48, 48, 8]], [1; 3]);
        let partial = gemm_point(&p, [&[2, 2, 2], &[16, 16, 8], &[48, 48, 8]], [1; 3]);
        assert_eq!((p.parallel_tiles(&whole), p.parallel_tiles(&partial)), (320, 160));
        for set in [FeatureSet::Analytical, FeatureSet::Loops] {
            assert_eq!(column(set, &p, &whole, "wave_efficiency"), 1.0);
            assert!(close(column(set, &p, &partial, "wave_efficiency"), 2.5 / 3.0));
        }
        // On a GPU: 10 blocks of 32x16 fill fewer of sm90's slots than 40
        // blocks of 16x8.
        let p = problem(GEMM, "sm90");
        let few = gemm_point(&p, [&[32, 4], &[16, 2], &[8, 1]], [1; 3]);
        let more = gemm_point(&p, [&[16, 2], &[8, 1], &[8, 1]], [1; 3]);
        assert!(column(FeatureSet::Analytical, &p, &few, "wave_efficiency") < column(FeatureSet::Analytical, &p, &more, "wave_efficiency"));
    }

    #[test]
    fn a_bigger_register_tile_raises_ilp_and_register_reuse() {
        let p = problem(GEMM, "sm90");
        let small = gemm_point(&p, [&[32, 4], &[16, 2], &[8, 1]], [1; 3]);
        // Twice the rows per block and per thread: 64 threads each.
        let big = gemm_point(&p, [&[64, 8], &[16, 2], &[8, 1]], [1; 3]);
        let af = FeatureSet::Analytical;
        assert_eq!((column(af, &p, &small, "ilp"), column(af, &p, &big, "ilp")), (8.0, 16.0));
        // Fewer loads from shared memory per flop: per thread and k step 8
        // + 2 loads (A's 4-way conflicted) for 16 FMAs against 4 + 2 for 8;
        // 320 threads in warps of 32.
        assert!(close(column(af, &p, &big, "oi_shared"), 491520.0 / (320.0 * 48.0 / 32.0 * (8.0 * 4.0 + 2.0))));
        assert!(column(af, &p, &big, "oi_shared") > column(af, &p, &small, "oi_shared"));
        // In blocks of 16 threads, half of each warp-wide load is idle: 160
        // threads in warps of 16, per k step 8 loads of A (4-way) and 4 of B.
        let half_warps = gemm_point(&p, [&[32, 8], &[16, 4], &[8, 1]], [1; 3]);
        assert_eq!(p.threads(&half_warps), 16);
        assert!(close(column(af, &p, &half_warps, "oi_shared"), 491520.0 / (160.0 * 48.0 / 16.0 * (8.0 * 4.0 + 4.0))));
        assert!(column(FeatureSet::Loops, &p, &big, "spatial_points") > column(FeatureSet::Loops, &p, &small, "spatial_points"));

        let p = problem(GEMM, "x86-avx2");
        let small = gemm_point(&p, [&[4, 4, 2], &[16, 16, 8], &[48, 48, 8]], [1; 3]);
        let big = gemm_point(&p, [&[4, 4, 4], &[16, 16, 16], &[48, 48, 8]], [1; 3]);
        // 4x16: 8 accumulators against 4 broadcasts and 2 vectors per step.
        assert!(close(column(af, &p, &small, "reg_reuse"), 2.0 / 3.0));
        assert!(close(column(af, &p, &big, "reg_reuse"), 8.0 / 6.0));
        assert!(column(af, &p, &big, "kernel_latency") > column(af, &p, &small, "kernel_latency"));
    }

    /// The `loops` set reads the nest: B (the larger read) is walked along
    /// the vector with stride 1, A not at all (a broadcast); the output is
    /// reused across the reduction loops inside its innermost spatial one.
    #[test]
    fn the_loop_features_of_a_gemm() {
        let p = problem(GEMM, "x86-avx2");
        let cfg = gemm_point(&p, [&[4, 4, 2], &[16, 16, 8], &[48, 48, 8]], [1; 3]);
        let nest = loop_nest(&p, &cfg);
        // S.core i 16, j 5; R.l2 none (48 / 48); S.l1 i 2, j 2; R.l1 k 6;
        // R.point k 8; S.point i 2 (j's 8 points are one vector).
        let loops: Vec<(usize, u64)> = nest.iter().map(|l| (l.axis, l.trip)).collect();
        assert_eq!(loops, [(0, 16), (1, 5), (0, 2), (1, 2), (2, 6), (2, 8), (0, 2)]);
        let loops_set = FeatureSet::Loops;
        assert_eq!(largest_reads(&p), [1, 0], "B (48x80) before A (64x48)");
        let get = |name: &str| column(loops_set, &p, &cfg, name);
        assert_eq!(get("read0_innermost_stride"), 1.0, "log2(1 + 1): B along j");
        assert_eq!(get("read1_innermost_stride"), 0.0, "A does not use j");
        assert_eq!(get("read0_contiguous_vector"), 1.0);
        assert_eq!(get("read1_contiguous_vector"), 0.0);
        // The innermost loop not indexing A is S.l1 j (trip 2), with the
        // 6·8·2 iterations of R.l1 k, R.point k and S.point i inside.
        assert_eq!(get("read1_reuse_count"), log2p(2.0) as f32 as f64);
        assert_eq!(get("read1_reuse_distance"), log2p(96.0) as f32 as f64);
        // The output: R.point k (trip 8) with the i point loop inside.
        assert_eq!(get("output_reuse_count"), log2p(8.0) as f32 as f64);
        assert_eq!(get("output_reuse_distance"), log2p(2.0) as f32 as f64);
        assert_eq!(get("read2_unique_bytes"), 0.0, "no third read");
        assert_eq!(get("vector_width"), 8.0);
        assert_eq!(get("inner3_tiles"), 0.0, "no fourth tile level");
        assert!(close(get("inner0_bytes_per_flop"), 634880.0 / 491520.0));
        // Of the 16 ymm registers: 2 accumulators, the 2 broadcasts of A
        // and the vector of B a step holds, and one more.
        assert!(close(get("register_pressure"), 6.0 / 16.0));
        // The innermost loops up to 16 steps unroll: i's points (2) and
        // k's (8); with R.l1 (6) it would be 96.
        assert_eq!(get("unroll_loops"), 2.0);
        assert_eq!(get("unroll_steps"), log2p(16.0) as f32 as f64);
    }

    fn kind_problems(targets: &[&str]) -> Vec<Problem> {
        let mut v = Vec::new();
        for target in targets {
            v.push(problem(GEMM, target));
            v.extend(crate::samples::OPS.iter().map(|src| problem(src, target)));
        }
        v
    }

    /// One model learns from every op on a kind of target: a GEMM, a
    /// batched GEMM, a conv2d (and every sample op) give rows of one
    /// length.
    #[test]
    fn every_op_on_a_kind_of_target_has_the_same_columns() {
        for (kind, targets) in [(TargetKind::Cpu, ["x86-avx2", "x86-avx512"]), (TargetKind::Cuda, ["sm80", "sm90"])] {
            let problems = kind_problems(&targets);
            // GEMM, batched GEMM (samples 1) and conv2d (samples 4) among them.
            assert!(problems.iter().any(|p| p.axes.len() == 7) && problems.iter().any(|p| p.axes.len() == 4));
            for set in [FeatureSet::Analytical, FeatureSet::Loops] {
                let n = set.columns_for(kind).len();
                for p in &problems {
                    assert_eq!(set.columns(p).len(), n);
                    assert_eq!(set.extract(p, &p.initial()).len(), n, "{} on {}", p.func, p.target.name);
                }
            }
        }
    }

    fn check_row(set: FeatureSet, p: &Problem, cfg: &Config) -> Result<(), TestCaseError> {
        let row = set.extract(p, cfg);
        prop_assert_eq!(row.len(), set.columns(p).len());
        prop_assert!(row.iter().all(|x| x.is_finite()), "{} {:?}: {:?}", set.name(), cfg, row);
        prop_assert_eq!(&row, &set.extract(p, cfg), "deterministic");
        let mut batch = vec![7.0];
        set.extract_into(p, cfg, &mut batch);
        prop_assert_eq!(&batch[1..], &row[..]);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// Every value of every set is finite, and the same twice, for
        /// random valid points of every sample op on a CPU and a GPU target
        /// (and for their starting states, valid or not).
        #[test]
        fn features_of_random_points_are_finite_and_deterministic(seed in any::<u64>()) {
            let mut sampled = 0;
            for p in kind_problems(&["x86-avx2", "sm90"]) {
                let space = KnobSpace::new(&p);
                let mut rng = Rng::new(seed);
                let points: Vec<Config> = (0..2).filter_map(|_| space.sample_uniform(&mut rng)).chain([p.initial()]).collect();
                sampled += points.len() - 1;
                for cfg in &points {
                    for set in [FeatureSet::Analytical, FeatureSet::Loops] {
                        check_row(set, &p, cfg)?;
                    }
                }
            }
            prop_assert!(sampled > 0);
        }
    }

    /// How long extraction takes (not a test of it: run by hand, in
    /// release, with
    /// `cargo test --release -p tilec-passes extraction_time -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn extraction_time() {
        for (name, target) in [("gemm_1024", "x86-avx2"), ("conv2d_resnet18_c1", "x86-avx2"), ("gemm_1024", "sm90"), ("conv2d_resnet18_c1", "sm90")] {
            let p = workload(name, target);
            let space = KnobSpace::new(&p);
            let mut rng = Rng::new(1);
            let points: Vec<Config> = (0..1000).filter_map(|_| space.sample_uniform(&mut rng)).collect();
            for set in [FeatureSet::Analytical, FeatureSet::Loops] {
                let mut rows = Vec::with_capacity(points.len() * set.columns(&p).len());
                let start = std::time::Instant::now();
                for _ in 0..5 {
                    rows.clear();
                    for c in &points {
                        set.extract_into(&p, c, &mut rows);
                    }
                }
                let each = start.elapsed().as_secs_f64() / (5 * points.len()) as f64;
                println!("{name} on {target}, {}: {:.2} µs per point ({} points, {} columns)", set.name(), each * 1e6, points.len(), set.columns(&p).len());
            }
        }
    }
}
