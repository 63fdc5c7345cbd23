//! Target descriptions: what a machine offers (memory levels, compute
//! units, peak throughput, intrinsics) and how tilec tiles for it (tile
//! levels and the loop-order template). Read from TOML files in
//! `targets/` (built in) or given by path; `host` is detected at run time.
//!
//! Every number in a shipped file cites its source in the file.
//! `docs/targets.md` describes the format, the tile-level model and host
//! detection.
//!
//! - `load.rs`: TOML → [`Target`] with diagnostics pointing into the file,
//!   semantic validation, the built-in files, [`TargetSet`].
//! - `host.rs`: the `host` target, detected at run time.
//! - `plan.rs`: a schedule read against its target once, typed.
//! - `resources.rs`: the resource and footprint model of an op on a target,
//!   shared by the resource check and the search.
//! - `check.rs`: does a schedule fit the target's resources?
//! - `show.rs`: the text of `tilec --list-targets`.

pub mod check;
pub mod cores;
pub mod host;
pub mod mapping;
pub mod plan;
pub mod resources;
mod load;
mod show;

pub use check::{ComputeInfo, ReadInfo, check_op_schedule, check_resources, check_schedule};
pub use plan::{MemoryId, SchedulePlan};
pub use resources::{Capacity, FootprintPart, OpResources, distinct_values};
pub use load::{BUILTIN, Builtin, Origin, TargetSet, load_target_file, parse_target};

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    Cpu,
    Cuda,
}

/// One target.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// The name schedules and `--target` use (`sm90`, `x86-avx2`, `host`).
    pub name: String,
    pub kind: TargetKind,
    pub description: String,
    /// Where the numbers come from (vendor documents, measurements).
    pub sources: Vec<String>,
    pub isa: Isa,
    pub compute: ComputeUnits,
    /// Peak throughput in GFLOP/s (GOP/s for integers) per element type
    /// name (`f32`, `f16`, ...), for the whole device.
    pub peak_gflops: BTreeMap<String, f64>,
    /// Memory levels, slowest (largest) first.
    pub memory: Vec<MemoryLevel>,
    /// Tile levels, outermost first: a schedule gives each axis one tile
    /// size per level.
    pub tile_levels: Vec<TileLevel>,
    /// The loop nest `tile` builds, outermost first, as the file writes
    /// it: `S.<level>` (spatial loops of a tile level), `R.<level>`
    /// (reduction loops), `V` (virtual-thread loops), `R.point` and
    /// `S.point` (the innermost tile). Code reads [`Target::order`].
    pub loop_order: Vec<String>,
    /// `loop_order` parsed, by the loader once it has validated it: tile
    /// levels by index. (Empty on a `Target` deserialized without
    /// [`parse_target`]/[`TargetSet`], which nothing should do.)
    #[serde(skip)]
    pub order: Vec<OrderEntry>,
    /// Per tile level, whether `order` has its reduction loops (`R.<l>`),
    /// set with `order`: the search's model asks this in its innermost
    /// loops ([`Target::has_reduction_loops`]).
    #[serde(skip)]
    reduction_loops: Vec<bool>,
    #[serde(default)]
    pub intrinsics: Vec<Intrinsic>,
    /// What the search's performance model charges a CPU micro-kernel
    /// (`[model]`, required on cpu targets).
    #[serde(default)]
    pub model: ModelCosts,
}

/// One entry of the loop-order template (`loop_order`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OrderEntry {
    /// Spatial loops of tile level `l` (`S.<level>`).
    Spatial(usize),
    /// Reduction loops of tile level `l` (`R.<level>`).
    Reduction(usize),
    /// Virtual-thread loops, made by `vthread` (`V`).
    VThread,
    /// The innermost tile of the spatial axes (`S.point`).
    SpatialPoint,
    /// The innermost tile of the reduction axes (`R.point`).
    ReductionPoint,
}

impl OrderEntry {
    /// The entry as `loop_order` writes it, with `levels` naming the tile
    /// levels.
    pub fn text(self, levels: &[TileLevel]) -> String {
        let level = |l: usize| levels.get(l).map_or("?", |t| t.name.as_str());
        match self {
            OrderEntry::Spatial(l) => format!("S.{}", level(l)),
            OrderEntry::Reduction(l) => format!("R.{}", level(l)),
            OrderEntry::VThread => "V".into(),
            OrderEntry::SpatialPoint => "S.point".into(),
            OrderEntry::ReductionPoint => "R.point".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Isa {
    /// LLVM target triple.
    pub triple: String,
    /// LLVM CPU name (`skylake-avx512`, `sm_90`, ...).
    pub cpu: String,
    /// LLVM feature string (`+avx2,+fma`, `+ptx80`).
    pub features: String,
    /// Width of a vector register in bits (CPU), or of the widest vector
    /// load/store (GPU: 128 for `v4.b32`); 0 means no vector check.
    #[serde(default)]
    pub vector_bits: u32,
    /// Number of vector registers (CPU).
    #[serde(default)]
    pub vector_registers: u32,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeUnits {
    /// Cores (CPU) or streaming multiprocessors (GPU).
    pub units: u32,
    pub clock_ghz: f64,
    /// GPU only below.
    #[serde(default)]
    pub warp_size: u32,
    #[serde(default)]
    pub max_threads_per_block: u32,
    #[serde(default)]
    pub max_threads_per_unit: u32,
    #[serde(default)]
    pub max_blocks_per_unit: u32,
    /// 32-bit registers per SM.
    #[serde(default)]
    pub registers_per_unit: u32,
    /// 32-bit registers one thread may use.
    #[serde(default)]
    pub max_registers_per_thread: u32,
    /// Warps per block below which an SM cannot hide latency: one per warp
    /// scheduler (an SM has four since Volta). The search model scales a
    /// block's throughput by warps / this below it.
    #[serde(default)]
    pub min_warps_per_block: u32,
    /// The most shared memory a kernel may declare statically (`.shared`
    /// in PTX), per block. More is dynamic shared memory, sized at launch
    /// after an opt-in (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`);
    /// code generation switches to it above this.
    #[serde(default)]
    pub max_static_shared_bytes: u64,
    /// CPU only below.
    ///
    /// Cycles from an FMA's inputs to its result: the search model wants
    /// this many independent accumulators per FMA unit.
    #[serde(default)]
    pub fma_latency_cycles: f64,
    /// Cache misses one core keeps in flight (L1 fill buffers): the search
    /// model stalls a kernel for a conflict miss's latency over this.
    #[serde(default)]
    pub misses_in_flight: f64,
}

/// Costs the search's performance model charges a CPU micro-kernel, in
/// issue slots or cycles per element against one for a vector load
/// (`[model]`; see `docs/targets.md` and `docs/search.md`). They come from
/// measurements of generated kernels rather than vendor documents.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelCosts {
    /// Issue slots of a guarded element load (a scalar load, the bounds
    /// compare, a select and an insert into the vector); also the cycles
    /// per element of a packed copy of a padded read.
    #[serde(default)]
    pub guarded_load_cost: f64,
    /// Issue slots of a gathered vector lane (a scalar load and an
    /// insert); also the cycles per element of a permuted or strided
    /// packed copy.
    #[serde(default)]
    pub gather_load_cost: f64,
    /// Cycles per lane of a vector stored lane by lane (the extract, the
    /// store, and the line it lands in).
    #[serde(default)]
    pub scatter_lane_cost: f64,
    /// How readily a micro-kernel's accumulators hide the FMA latency: the
    /// latency term is `1 - exp(-h · A / (U · L))` for `A` accumulators,
    /// `U` FMA units and `L` cycles of latency. With exactly `U · L`
    /// accumulators every chain is busy only if no operand load is ever
    /// late; spare accumulators absorb the late ones.
    #[serde(default = "default_latency_hiding")]
    pub latency_hiding: f64,
}

/// [`ModelCosts::latency_hiding`] where a target gives none: fitted on a
/// Zen 3 core (AMD EPYC, 2-vCPU VM, 2026-11-28) to ResNet-50 R12 as a GEMM
/// (N = 49) with its weights in L2, register tiles of 7, 8, 10 and 12
/// accumulators: 8 ran at 0.90 of 12's speed and 7 at 0.68 in the
/// recorded pass (docs/search.md, "Spare accumulators and uneven register
/// tiles"; 0.91 and 0.74 in the first, which the value was fitted to).
pub fn default_latency_hiding() -> f64 {
    2.4
}

impl Default for ModelCosts {
    fn default() -> Self {
        ModelCosts { guarded_load_cost: 0.0, gather_load_cost: 0.0, scatter_lane_cost: 0.0, latency_hiding: default_latency_hiding() }
    }
}

/// What a capacity is counted per.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    Device,
    /// Per SM (GPU) or per core (CPU).
    Unit,
    /// Per GPU thread block (shared memory a block may allocate).
    Block,
    Thread,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryLevel {
    /// `global`, `l2`, `shared`, `local`, `l1`, `l3`, `dram`, `registers`, ...
    pub name: String,
    pub capacity_bytes: u64,
    pub per: Per,
    /// For levels counted per block or per thread: what one unit (SM) has
    /// in all, shared by its resident blocks or threads (informational:
    /// occupancy, not a tile's limit).
    #[serde(default)]
    pub unit_capacity_bytes: Option<u64>,
    /// Sustained bandwidth in GB/s for the whole device.
    pub bandwidth_gbs: f64,
    /// For a level shared by the device's cores (`per = "device"`): the
    /// most one core draws from it, in GB/s. A core keeps only so many
    /// misses in flight, so a few cores of a big chip get far less than
    /// the chip's figure (one core of an EPYC 7763 streams about 32 GB/s
    /// from DRAM against the socket's 204.8). `None`: no per-core limit.
    #[serde(default)]
    pub core_bandwidth_gbs: Option<f64>,
    /// Load-to-use latency in nanoseconds.
    pub latency_ns: f64,
    /// Line (CPU) or transaction (GPU) size in bytes.
    pub line_bytes: u32,
    /// Associativity of a hardware cache (lines per set); 0 where unknown
    /// or not a set-associative cache. The search model uses it to tell
    /// which unpacked tiles conflict with themselves (rows whose stride is
    /// a multiple of the set span map to the same sets).
    #[serde(default)]
    pub ways: u32,
    #[serde(default)]
    pub banks: u32,
    #[serde(default)]
    pub bank_width_bytes: u32,
    /// Software-managed (GPU shared memory, registers): only what a
    /// schedule stages there occupies it. Hardware caches hold a tile's
    /// whole working set.
    pub managed: bool,
    /// The buffer scope code for this level uses when a schedule stages a
    /// read here (`shared`, `local`); absent where nothing can be staged.
    #[serde(default)]
    pub scope: Option<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Binding {
    /// Spatial loops of this level become GPU thread blocks.
    Grid,
    /// Spatial loops of this level become GPU threads.
    Threads,
    /// Spatial loops of this level run on parallel cores.
    Parallel,
    Serial,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TileLevel {
    pub name: String,
    /// The memory level whose capacity bounds a tile of this level.
    pub memory: String,
    pub binding: Binding,
}

/// A hardware instruction that computes a small tile (Tensor Core MMA,
/// vector FMA, VNNI or BF16 dot product), as data: what it computes, on
/// which types, how its operands are held, what it costs, and what the CPU
/// must have to run it. Every intrinsic computes
/// `acc[m, n] += Σ_k a[m, k] · b[k, n]` over its `m × n × k` tile;
/// `layout` says how each operand sits in registers. docs/tensorize.md.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intrinsic {
    pub name: String,
    /// `mma`, `wmma`, `fma`, `dot` ([`INTRINSIC_KINDS`]).
    pub kind: String,
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// Element types of A, B and the accumulator.
    pub a: String,
    pub b: String,
    pub acc: String,
    pub layout: IntrinsicLayout,
    /// Cycles from issue until the accumulator can be used again.
    pub latency_cycles: u32,
    /// Instructions a core (CPU) or an SM (GPU) starts per clock.
    pub per_cycle: f64,
    /// The CPU features it needs, as LLVM and `is_x86_feature_detected!`
    /// spell them (`avx512vnni`); empty on GPUs. A target offers the
    /// intrinsic only where its `isa.features` has every one
    /// ([`Target::offers`]): `host` adds those the CPU has.
    #[serde(default)]
    pub features: Vec<String>,
}

/// How an intrinsic's operands are held.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntrinsicLayout {
    pub a: OperandLayout,
    pub b: OperandLayout,
    pub acc: OperandLayout,
}

/// How one operand of an intrinsic is held.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OperandLayout {
    /// A warp's fragment of a row-major tile (PTX `.row`).
    Row,
    /// A warp's fragment of a column-major tile (PTX `.col`).
    Col,
    /// One vector register, lane `i` holding row `i` of the `m` dimension
    /// (and its `k` consecutive elements, packed in the lane, for `dot`).
    Lanes,
    /// One value (or one group of `k`) repeated in every lane.
    Broadcast,
}

impl OperandLayout {
    pub fn name(self) -> &'static str {
        match self {
            OperandLayout::Row => "row",
            OperandLayout::Col => "col",
            OperandLayout::Lanes => "lanes",
            OperandLayout::Broadcast => "broadcast",
        }
    }
}

impl Intrinsic {
    /// A warp's instruction (`mma`, `wmma`), for cuda targets, its
    /// operands in `row`/`col` fragments.
    pub fn is_warp(&self) -> bool {
        matches!(self.kind.as_str(), "mma" | "wmma")
    }

    /// One vector instruction (`fma`, `dot`), for cpu targets: `a` and
    /// `acc` in lanes, `b` broadcast.
    pub fn is_vector(&self) -> bool {
        matches!(self.kind.as_str(), "fma" | "dot")
    }
}

impl Target {
    /// The features `isa.features` enables (`+avx512vnni` gives
    /// `avx512vnni`).
    pub fn isa_features(&self) -> impl Iterator<Item = &str> {
        self.isa.features.split(',').filter_map(|f| f.trim().strip_prefix('+'))
    }

    /// Does this target offer intrinsic `x`: does its ISA have every
    /// feature `x` needs?
    pub fn offers(&self, x: &Intrinsic) -> bool {
        x.features.iter().all(|f| self.isa_features().any(|g| g == f))
    }

    /// The intrinsics this target offers ([`Target::offers`]), in file
    /// order.
    pub fn offered_intrinsics(&self) -> impl Iterator<Item = &Intrinsic> {
        self.intrinsics.iter().filter(|x| self.offers(x))
    }

    /// The nominal peak for element type `elem` (GFLOP/s, GOP/s for
    /// integers) of what a run uses: `threads` of a CPU's cores (the
    /// figure is per chip), or the whole GPU.
    pub fn nominal_peak_gflops(&self, elem: &str, threads: usize) -> Option<f64> {
        let chip = *self.peak_gflops.get(elem)?;
        Some(match self.kind {
            TargetKind::Cpu => {
                let units = self.compute.units.max(1) as usize;
                chip * threads.clamp(1, units) as f64 / units as f64
            }
            _ => chip,
        })
    }

    /// The bandwidth of memory level `m` in GB/s when `units` cores draw
    /// from it: the device's figure, or less where its per-core limit
    /// times the cores is less.
    pub fn bandwidth_for_units(m: &MemoryLevel, units: f64) -> f64 {
        match m.core_bandwidth_gbs {
            Some(core) => m.bandwidth_gbs.min(core * units),
            None => m.bandwidth_gbs,
        }
    }

    pub fn memory_level(&self, name: &str) -> Option<&MemoryLevel> {
        self.memory.iter().find(|m| m.name == name)
    }

    pub fn tile_level(&self, name: &str) -> Option<(usize, &TileLevel)> {
        self.tile_levels.iter().enumerate().find(|(_, l)| l.name == name)
    }

    pub fn memory_index(&self, name: &str) -> Option<usize> {
        self.memory.iter().position(|m| m.name == name)
    }

    /// Whether the loop order has virtual-thread loops (`V`).
    pub fn has_vthread_loops(&self) -> bool {
        self.order.contains(&OrderEntry::VThread)
    }

    /// Whether tile level `l` has reduction loops (`R.<level>`); without
    /// them a tile of that level spans whole reduction axes.
    #[inline]
    pub fn has_reduction_loops(&self, l: usize) -> bool {
        self.reduction_loops.get(l).copied().unwrap_or(false)
    }

    /// Sets the parsed loop order (the loader's, once it has validated
    /// `loop_order`) and what is derived from it.
    pub(crate) fn set_order(&mut self, order: Vec<OrderEntry>) {
        self.reduction_loops = (0..self.tile_levels.len()).map(|l| order.contains(&OrderEntry::Reduction(l))).collect();
        self.order = order;
    }
}

impl TargetKind {
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Cpu => "cpu",
            TargetKind::Cuda => "cuda",
        }
    }
}

impl Per {
    pub fn name(self) -> &'static str {
        match self {
            Per::Device => "device",
            Per::Unit => "unit",
            Per::Block => "block",
            Per::Thread => "thread",
        }
    }
}

impl Binding {
    pub fn name(self) -> &'static str {
        match self {
            Binding::Grid => "grid",
            Binding::Threads => "threads",
            Binding::Parallel => "parallel",
            Binding::Serial => "serial",
        }
    }
}

/// Element-type names a target may use in `peak_gflops` and intrinsics
/// besides the tile IR's own (`f32`, `f16`, `bf16`, `i8`, `u8`, `i32`):
/// `tf32` (Tensor Core operands).
pub const EXTRA_TYPE_NAMES: &[&str] = &["tf32"];

/// The intrinsic kinds: `mma` (PTX `mma.sync`), `wmma` (PTX `wmma`), `fma`
/// (vector fused multiply-add, `m` lanes), `dot` (vector dot-product
/// accumulate: `m` lanes, `k` products per lane).
pub const INTRINSIC_KINDS: &[&str] = &["mma", "wmma", "fma", "dot"];

/// The CPU features an intrinsic may need (what [`host`] detects beyond
/// the base ISA): AVX-512 VNNI and BF16, and AVX-VNNI (the VEX-encoded
/// `vpdpbusd` of CPUs with AVX2 only).
pub const INTRINSIC_FEATURES: &[&str] = &["avx512vnni", "avx512bf16", "avxvnni"];

/// A built-in target (or `host`) by name, without a source map at hand:
/// description errors (which built-in files do not have) give `None`.
pub fn builtin(name: &str) -> Option<std::sync::Arc<Target>> {
    TargetSet::new().get(&mut crate::diag::SourceMap::new(), name).and_then(Result::ok)
}
