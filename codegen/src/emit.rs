//! Loop-level tile IR → MLIR text (func, scf, memref, arith, math, vector;
//! gpu for CUDA targets).
//!
//! Each `kernel` op of a function becomes one MLIR function: the buffers and
//! tensors it uses from outside are its parameters (static-shape memrefs,
//! passed as bare pointers), in the order recorded in the [`KernelAbi`].
//! The host (`tilec_runtime`, or a user's program through the C
//! ABI in `docs/codegen.md`) allocates global buffers and calls the
//! kernels in order.
//!
//! Loops map as follows: serial loops to `scf.for`; `unroll` loops are
//! unrolled here, so register tiles become straight-line code whose
//! accumulators LLVM keeps in registers; `vector` loops become vector
//! operations (contiguous loads and stores as `vector.load`/`vector.store`,
//! uniform values broadcast, anything else gathered lane by lane; a
//! guard on the lane itself, the vector axis' partial last tile, becomes a
//! lane mask for the loads and stores of non-local memory); CPU
//! `parallel` loops become the kernel's `[lo, hi)` parameters, so the host
//! splits them over cores; GPU block and thread loops become
//! `gpu.block_id`/`gpu.thread_id`, shared buffers workgroup memory,
//! barriers `gpu.barrier`, cooperative copies loops strided by the block's
//! thread count; `lane` loops make each `thread.x` iteration a warp of 32
//! hardware threads along x, and an `mma` intrinsic with `lane(...)` the
//! warp's `nvgpu.mma.sync` on the lane's fragments.
//!
//! Arithmetic follows `tilec::ir::scalar`: f16/bf16 ops are computed in
//! f32 and rounded per op (by LLVM for f16, by MLIR's
//! `arith-emulate-unsupported-floats` for bf16, see `compile::CPU_PIPELINE`),
//! math functions too (widened, computed, rounded once); `max`/`min` propagate NaN
//! (`arith.maximumf`); float→int casts saturate and map NaN to 0. Products
//! feeding sums may be contracted into FMAs (`fastmath<contract>`), which
//! rounds once instead of twice: results match the interpreter within the
//! element type's tolerance, not bit for bit.

use std::collections::HashMap;
use std::fmt::Write;
use tilec::ir::*;

pub use tilec_runtime::KernelAbi;

/// What kernels are emitted for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Device {
    Cpu,
    /// A CUDA GPU that lets a kernel declare up to
    /// `max_static_shared_bytes` of shared memory statically (`.shared` in
    /// PTX); more is dynamic shared memory, sized at launch after an
    /// opt-in (the target's `compute.max_static_shared_bytes`).
    Gpu { max_static_shared_bytes: u64 },
}

impl Device {
    /// The device of target `t`'s kind, with its limits.
    pub fn of(t: &tilec::target::Target) -> Device {
        match t.kind {
            tilec::target::TargetKind::Cpu => Device::Cpu,
            tilec::target::TargetKind::Cuda => Device::Gpu { max_static_shared_bytes: t.compute.max_static_shared_bytes },
        }
    }

    pub fn is_gpu(self) -> bool {
        matches!(self, Device::Gpu { .. })
    }
}

/// Why code could not be generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmitError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, EmitError> {
    Err(EmitError(msg.into()))
}

/// The MLIR type of an element type. MLIR's integers are signless: u8 is
/// `i8` like i8, and the ops on it choose the unsigned forms (`extui`,
/// `uitofp`, `fptoui`, `maxui`, `minui`; see [`ElemType::is_signed_int`]).
pub fn mlir_elem(t: ElemType) -> &'static str {
    match t {
        ElemType::F32 => "f32",
        ElemType::F16 => "f16",
        ElemType::BF16 => "bf16",
        ElemType::I8 | ElemType::U8 => "i8",
        ElemType::I32 => "i32",
    }
}

/// Integer `value` of type `ty` as MLIR's signless integer of that width
/// reads it: a u8 above 127 is the negative i8 with the same bits.
fn signless_bits(ty: ElemType, value: i64) -> i64 {
    if ty == ElemType::U8 { value as u8 as i8 as i64 } else { value }
}

/// Zero of element type `ty`, as a literal.
fn zero_literal(ty: ElemType) -> Literal {
    if ty.is_int() { Literal::Int(0) } else { Literal::Float(0.0) }
}

/// How a CPU copy's innermost run is emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CopyRun {
    /// Element by element (LLVM vectorises contiguous runs).
    Elements,
    /// Every second element of the source's rows (a stride-2 read packed
    /// densely): two vector loads and a shuffle per vector stored, whatever
    /// LLVM's vectoriser would make of the strided loop. (On ResNet-50 R7
    /// with its input packed at `l3`, LLVM's own lowering of that copy ran
    /// level with this one: 0.600 against 0.609 ms a kernel.)
    EvenElements,
    /// A permuted copy whose destination runs along box dimension `rows`
    /// while the source's rows run along `cols` (its last dimension longer
    /// than 1: `W[f, c, 1, 1]` is contiguous along `c`): square blocks
    /// loaded along the source's rows, transposed in registers, stored
    /// along the destination's. LLVM would gather each destination vector from
    /// `width` source rows (ResNet-50 R7's weights packed `[c, f]`: 35-39%
    /// of the kernel's samples on a Zen 4, in gathers).
    Transposed { rows: usize, cols: usize },
    /// A split copy whose destination ends in the split's inner part (`f`
    /// elements) after box dimension `lanes`, which runs along the
    /// source's rows (`cols`): VNNI's `[c/4][h][w][4]` from `x[c][h][w]`.
    /// Each step loads `width` elements from each of the `f` source rows,
    /// interleaves them in registers and stores `f·width` contiguous
    /// elements; pad lanes (a halo) are filled apart. Element by element,
    /// the input copy of the int8 ResNet-50 layer R5 took 4% of its
    /// kernel's samples on a Zen 4, a byte load and store per element.
    Interleaved { lanes: usize, cols: usize, width: i64 },
    /// A split copy into 4-byte words (VNNI's 4 bytes, BF16's 2 halves)
    /// whose lanes (`lanes`, the destination's second-to-last dimension)
    /// come from a source dimension before the split one, while the split
    /// dimension and the `words` points after it lie within 64 bytes of
    /// the source: the convolution weights `w[f][c][r][s]` into
    /// `[c/4][r][s][f][4]` (or a tile of `r`). For 16 lanes at a time, each
    /// lane's run (4 channels x the taps) is one load, shuffled into words;
    /// the 16 x 16 words are transposed in registers and stored as
    /// `words` runs of 64 bytes. Element by element (LLVM: a masked load,
    /// `vpermb` and 9 scattered 4-byte stores per run) this copy took 38%
    /// of the int8 ResNet-18 layer C10's kernel on a Zen 4.
    WordTransposed { lanes: usize, words: u64 },
}

/// The type of a mask over `width` vector lanes.
fn mask_type(width: u64) -> String {
    format!("vector<{width}xi1>")
}

fn memref_type(shape: &[u64], elem: ElemType, space: &str) -> String {
    let mut s = String::from("memref<");
    for d in shape {
        write!(s, "{d}x").unwrap();
    }
    s.push_str(mlir_elem(elem));
    s.push_str(space);
    s.push('>');
    s
}

/// An emitted value: its SSA name and shape.
#[derive(Clone, Debug)]
enum Ev {
    Index(String),
    Scalar(String, ElemType),
    /// A vector of `lanes` values (inside a vector loop).
    Vector(String, ElemType),
    Memref(String, String),
}

impl Ev {
    fn name(&self) -> &str {
        match self {
            Ev::Index(n) | Ev::Scalar(n, _) | Ev::Vector(n, _) | Ev::Memref(n, _) => n,
        }
    }
}

/// Which loop the emitter is inside, for vector mode.
#[derive(Clone, Copy)]
struct Lanes {
    /// The vector loop's induction variable.
    iv: Value,
    width: u64,
    /// A vector whose first lane is past the extent may be skipped: the
    /// loop is a spatial axis' (tagged `axis`), so each lane computes its
    /// own output points and nothing flows between lanes (and the body is
    /// not bf16, see `for_loop`).
    skip_empty: bool,
}

pub struct Emitter<'f> {
    f: &'f Function,
    gpu: bool,
    /// GPU: shared memory up to this is declared statically.
    max_static_shared_bytes: u64,
    out: String,
    depth: usize,
    next: usize,
    vals: HashMap<Value, Ev>,
    lanes: Option<Lanes>,
    /// Inside a guard whose condition depends on the lane (the partial last
    /// tile of the vector axis): the `vector<W x i1>` of the lanes it holds
    /// for. Loads and stores of memory outside the kernel's local buffers
    /// are masked with it; local buffers cover whole tiles, so every lane
    /// of theirs is in bounds.
    mask: Option<String>,
    /// Allocations of local buffers, hoisted to the function entry (an
    /// `alloca` inside a loop would grow the stack every iteration).
    hoisted: Vec<String>,
    /// GPU: shared buffers, as workgroup attributions (name, type).
    shared: Vec<(String, String)>,
    /// GPU: each shared buffer's byte offset in the block's shared memory.
    shared_offsets: Vec<u64>,
    /// GPU: the block's linear thread index and thread count, once known.
    thread_linear: Option<(String, u64)>,
    /// GPU: the kernel has `lane` loops, so `threadIdx.x` is 32 times the
    /// `thread.x` loop's index plus the lane: the hardware `threadIdx.x`.
    warp_lanes: Option<String>,
    shared_bytes: u64,
    /// CPU: bytes of the local buffers on the stack (each 64-byte aligned).
    stack_bytes: u64,
    /// Inside unrolled loops: each one's index as the constant it is in
    /// this copy of the body.
    unrolled: HashMap<Value, i64>,
    /// CPU: inside an unrolled nest whose stores may be held
    /// ([`PendingStore`]): the nest's text depth and the buffers its ops read.
    holding: Option<(usize, std::collections::HashSet<Value>)>,
    /// CPU: scattered vector stores held back to the end of the unrolled
    /// nest, where runs of them are stored together ([`PendingStore`]).
    pending: Vec<PendingStore>,
}

/// A vector store whose lanes land a row apart (the accumulators of a
/// register tile with lanes along `f`, written to `y[f][oh][ow]`), held
/// back while an unrolled nest is emitted: the stores of neighbouring
/// points along the destination's last dimension (`ow`, `ow + 1`, ...)
/// are then interleaved in registers and each lane's run stored at once
/// (`Emitter::flush_stores`), where alone each lane is a scalar store.
/// Only stores into buffers that nothing in the nest reads, outside any
/// guard or mask, are held; the values are in the nest's block, so they
/// dominate its end.
struct PendingStore {
    buffer: Value,
    memref: (String, String),
    elem: ElemType,
    vector: String,
    width: u64,
    lane: Value,
    /// The indices, the unrolled loops' indices replaced by their values.
    idx: Vec<AffineExpr<Value>>,
}

/// The MLIR text of every kernel of `f`, and how to call each.
pub fn emit_function(f: &Function, device: Device) -> Result<(String, Vec<KernelAbi>), EmitError> {
    let mut text = String::new();
    let mut abis = Vec::new();
    for &op in &f.regions[f.body].ops {
        match &f.ops[op].kind {
            OpKind::Kernel(_) => {
                let symbol = format!("{}_k{}", f.name, abis.len());
                let (t, abi) = Emitter::kernel(f, op, &symbol, device)?;
                text.push_str(&t);
                abis.push(abi);
            }
            OpKind::Compute(c) => {
                return err(format!(
                    "compute op {} has no loop nest: schedule and tile it before code generation",
                    c.label.as_deref().map(|l| format!("\"{l}\"")).unwrap_or_default()
                ));
            }
            // A reshape is a view: the host passes its operand's memory.
            OpKind::Alloc | OpKind::Return | OpKind::Reshape => {}
            other => return err(format!("`{}` outside a kernel cannot be compiled", other.mnemonic())),
        }
    }
    Ok((text, abis))
}

impl<'f> Emitter<'f> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("%{prefix}{}", self.next)
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn constant_index(&mut self, x: i64) -> String {
        let n = self.fresh("c");
        self.line(&format!("{n} = arith.constant {x} : index"));
        n
    }

    fn get(&self, v: Value) -> Result<&Ev, EmitError> {
        self.vals.get(&v).ok_or_else(|| EmitError(format!("value #{} has no code (defined outside the kernel?)", v.as_u32())))
    }

    /// Emits one kernel as an MLIR function (CPU) or a GPU module with a
    /// kernel function.
    fn kernel(f: &'f Function, op: Op, symbol: &str, device: Device) -> Result<(String, KernelAbi), EmitError> {
        let gpu = device.is_gpu();
        let max_static_shared_bytes = match device {
            Device::Gpu { max_static_shared_bytes } => max_static_shared_bytes,
            Device::Cpu => 0,
        };
        let mut e = Emitter { f, gpu, max_static_shared_bytes, out: String::new(), depth: if gpu { 3 } else { 2 }, next: 0, vals: HashMap::new(), lanes: None, mask: None, hoisted: Vec::new(), shared: Vec::new(), shared_offsets: Vec::new(), thread_linear: None, warp_lanes: None, shared_bytes: 0, stack_bytes: 0, unrolled: HashMap::new(), holding: None, pending: Vec::new() };
        // Parameters: values used inside and defined outside the kernel.
        let inside: std::collections::HashSet<Op> = tilec_ops_inside(f, op);
        let mut params: Vec<Value> = Vec::new();
        for &o in &inside {
            for &v in &f.ops[o].operands {
                let defined_inside = f.def_op(v).is_some_and(|d| inside.contains(&d))
                    || matches!(f.values[v].def, ValueDef::RegionArg(r, _) if f.regions[r].owner.is_some_and(|w| inside.contains(&w) || w == op));
                if !defined_inside && !params.contains(&v) {
                    params.push(v);
                }
            }
        }
        params.sort();
        let mut sig = Vec::new();
        for (i, &p) in params.iter().enumerate() {
            let ty = match f.value_type(p) {
                Type::Tensor(t) => memref_type(&t.shape, t.elem, ""),
                Type::Buffer(b) if b.scope == MemScope::Global => memref_type(&b.shape, b.elem, ""),
                other => return err(format!("kernel uses {other} from outside; only tensors and global buffers can be passed")),
            };
            let name = format!("%arg{i}");
            sig.push(format!("{name}: {ty}"));
            e.vals.insert(p, Ev::Memref(name, ty));
        }
        let body = f.ops[op].regions[0];
        let mut abi = KernelAbi { symbol: symbol.to_string(), params: params.iter().map(|v| v.as_u32()).collect(), parallel_trip: 1, grid: [1; 3], block: [1; 3], shared_bytes: 0, dynamic_shared_bytes: 0, stack_bytes: 0, prepack: matches!(&f.ops[op].kind, OpKind::Kernel(k) if k.prepack) };
        if gpu {
            e.gpu_kernel_body(body, &mut abi)?;
        } else {
            e.cpu_kernel_body(body, &mut abi)?;
            abi.stack_bytes = e.stack_bytes;
        }
        let mut text = String::new();
        if gpu {
            let mut workgroup = Vec::new();
            if abi.dynamic_shared_bytes > 0 {
                // One dynamic block, each buffer a view at its offset.
                let mut views = vec!["%dynamic_shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>".to_string()];
                for ((name, ty), offset) in e.shared.iter().zip(&e.shared_offsets) {
                    views.push(format!("{name}_offset = arith.constant {offset} : index"));
                    views.push(format!("{name} = memref.view %dynamic_shared[{name}_offset][] : memref<?xi8, #gpu.address_space<workgroup>> to {ty}"));
                }
                e.hoisted.splice(0..0, views);
            } else {
                // 16-byte aligned, for the vector loads and stores of
                // cooperative copies and intrinsic operands.
                for (name, ty) in e.shared.iter() {
                    workgroup.push(format!("{name}: {ty} {{llvm.align = 16 : i64}}"));
                }
            }
            let wg = if workgroup.is_empty() { String::new() } else { format!(" workgroup({})", workgroup.join(", ")) };
            // The kernel alone: `gpu_module_text` puts a program's kernels
            // in one gpu.module, so they become one PTX module.
            writeln!(text, "    gpu.func @{symbol}({}){wg} kernel attributes {{known_block_size = array<i32: {}, {}, {}>}} {{", sig.join(", "), abi.block[0], abi.block[1], abi.block[2]).unwrap();
            for h in &e.hoisted {
                writeln!(text, "      {h}").unwrap();
            }
            text.push_str(&e.out);
            writeln!(text, "      gpu.return").unwrap();
            writeln!(text, "    }}").unwrap();
        } else {
            writeln!(text, "  func.func @{symbol}({}, %lo: index, %hi: index) attributes {{llvm.emit_c_interface}} {{", sig.join(", ")).unwrap();
            for h in &e.hoisted {
                writeln!(text, "    {h}").unwrap();
            }
            text.push_str(&e.out);
            writeln!(text, "    return").unwrap();
            writeln!(text, "  }}").unwrap();
        }
        Ok((text, abi))
    }
}

/// A copy over fewer dimensions that moves the same elements: runs of
/// box dimensions that are contiguous in both the source and the
/// destination merged into one ([`merge_contiguous_dims`]), with the
/// memrefs' dimensions grouped to match (`memref.collapse_shape`).
pub(crate) struct MergedCopy {
    pub(crate) copy: CopyOp,
    pub(crate) src_groups: Vec<Vec<usize>>,
    pub(crate) dst_groups: Vec<Vec<usize>>,
}

/// Merges box dimension `d + 1` into `d` wherever both memrefs run on
/// through it: the box reads all of the source's dimension `d + 1` from 0
/// at stride 1, and the destination has `d + 1` right after `d`, whole,
/// from 0. A permuted copy then transposes along the merged run: the
/// convolution weights `w[f][c][r][s]` packed as `[c][r][s][f]` become
/// `[f][c·r·s]` into `[c·r·s][f]`, whole 16 x 16 blocks, where the
/// source's last dimension alone (`s`, 3 wide) gave blocks of 3 columns:
/// on ResNet-50 R11 (3x3, 512 channels, Zen 4) the copy took 35% of the
/// kernel's samples. `None` where nothing merges, or for a split copy.
pub(crate) fn merge_contiguous_dims(c: &CopyOp, (so, src_shape): (&[AffineExpr<Value>], &[u64]), (d_o, dst_shape): (&[AffineExpr<Value>], &[u64])) -> Option<MergedCopy> {
    let n = c.sizes.len();
    if c.split.is_some() || n < 2 || so.len() != n || d_o.len() != n || src_shape.len() != n || dst_shape.len() != n || c.permute.iter().any(|&p| p >= n) {
        return None;
    }
    let joins = |d: usize| {
        let (k, next) = (c.dst_dim(d), c.dst_dim(d + 1));
        let source = c.stride_of(d) == 1 && c.stride_of(d + 1) == 1 && c.sizes[d + 1] == src_shape[d + 1] && so[d + 1].as_constant() == Some(0);
        source && next == k + 1 && dst_shape[next] == c.sizes[d + 1] && d_o[next].as_constant() == Some(0)
    };
    let mut src_groups: Vec<Vec<usize>> = vec![vec![0]];
    for d in 0..n - 1 {
        match joins(d) {
            true => src_groups.last_mut().expect("a group").push(d + 1),
            false => src_groups.push(vec![d + 1]),
        }
    }
    if src_groups.len() == n {
        return None;
    }
    // The groups in the destination's order, each over consecutive
    // destination dimensions.
    let mut order: Vec<usize> = (0..src_groups.len()).collect();
    order.sort_by_key(|&g| c.dst_dim(src_groups[g][0]));
    let dst_groups: Vec<Vec<usize>> = order.iter().map(|&g| src_groups[g].iter().map(|&d| c.dst_dim(d)).collect()).collect();
    let sizes: Vec<u64> = src_groups.iter().map(|g| g.iter().map(|&d| c.sizes[d]).product()).collect();
    let stride = if c.stride.is_empty() { Vec::new() } else { src_groups.iter().map(|g| c.stride_of(g[0])).collect() };
    let copy = CopyOp { src: Vec::new(), dst: Vec::new(), sizes, stride, split: None, permute: order, pad: c.pad, cooperative: c.cooperative };
    Some(MergedCopy { copy, src_groups, dst_groups })
}

/// `shape` with each group of dimensions as one.
fn collapsed_shape(shape: &[u64], groups: &[Vec<usize>]) -> Vec<u64> {
    groups.iter().map(|g| g.iter().map(|&d| shape[d]).product()).collect()
}

/// Whether a split copy runs as [`CopyRun::WordTransposed`] on a CPU, and
/// if so along which expanded box dimension and over how many words a
/// lane's run goes: 4-byte words (`factor` elements), the destination
/// ending in the lanes and the word, the lanes from a source dimension
/// before the split one, the split dimension and every one after it read
/// at stride 1 and each lane's elements within 64 bytes of the source, at
/// most 16 words, no pad.
fn word_transposed_run(c: &CopyOp, src_shape: &[u64], dst_shape: &[u64], elem: ElemType) -> Option<(usize, u64)> {
    let split = c.split?;
    let n = c.sizes.len();
    let last = c.expanded_rank().checked_sub(1)?;
    let lanes = c.box_dim(last.checked_sub(1)?);
    let factor = split.factor;
    let words: u64 = (split.dim + 1..n).map(|d| c.sizes[d]).product();
    let word = factor * elem.size_bytes() == 4 && c.box_dim(last) == split.dim + 1 && dst_shape.get(last) == Some(&factor);
    // A lane's elements lie within `span` consecutive source elements.
    let strides = row_major_strides(src_shape);
    let reach = |d: usize| if d == split.dim { factor } else { c.sizes[d] };
    let span = (split.dim..n).map(|d| reach(d).saturating_sub(1).saturating_mul(strides.get(d).copied().unwrap_or(u64::MAX))).fold(1u64, u64::saturating_add);
    let fits = src_shape.len() == n && (split.dim..n).all(|d| c.stride_of(d) == 1) && span <= 64 / elem.size_bytes().max(1);
    (word && fits && c.pad.is_none() && lanes < split.dim && (1..=16).contains(&words)).then_some((lanes, words))
}

/// The element strides of a row-major array of `shape`.
fn row_major_strides(shape: &[u64]) -> Vec<u64> {
    let mut strides = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].saturating_mul(shape[d + 1]);
    }
    strides
}

/// Whether a split copy runs as [`CopyRun::Interleaved`] on a CPU, and if
/// so along which expanded box dimension and how many elements of each
/// source row per step (a 64-byte store of `factor·width`): the
/// destination's last dimension is the split's inner part, whole (`factor`
/// elements, a power of 2), and the one before it comes from the source's
/// rows (`cols`, read at stride 1).
fn interleaved_run(c: &CopyOp, cols: usize, dst_shape: &[u64], elem: ElemType) -> Option<(usize, i64)> {
    let split = c.split?;
    let last = c.expanded_rank().checked_sub(1)?;
    let lanes = c.box_dim(last.checked_sub(1)?);
    let factor = split.factor;
    let width = 64 / (factor * elem.size_bytes()).max(1);
    let fits = c.box_dim(last) == split.dim + 1 && dst_shape.get(last) == Some(&factor) && factor.is_power_of_two() && factor > 1 && width >= 2;
    (fits && lanes != split.dim && lanes != split.dim + 1 && c.source_dim(lanes) == cols && c.stride_of(cols) == 1).then_some((lanes, width as i64))
}

/// The elements a cooperative GPU copy moves per 16-byte vector load and
/// store, where it can: a box whose innermost dimension runs along both
/// memrefs' last dimensions (stride 1, not permuted, split or padded) in
/// whole vectors, from and to 16-byte aligned places (the rows and both
/// offsets along them multiples of a vector; kernel buffers are at least
/// 256-byte aligned, shared ones 16). Else None: element by element.
fn cooperative_vector_width(c: &CopyOp, src: (&[u64], ElemType, &[AffineExpr<Value>], &str), dst: (&[u64], ElemType, &[AffineExpr<Value>], &str)) -> Option<u64> {
    let (s_shape, elem, s_off, s_ty) = src;
    let (d_shape, d_elem, d_off, d_ty) = dst;
    let bytes = elem.size_bytes();
    let width = 16 / bytes.max(1);
    let (last, d_last) = (c.sizes.len().checked_sub(1)?, d_shape.len().checked_sub(1)?);
    let aligned = |e: &AffineExpr<Value>| e.divisor() == 1 && e.constant_term() % width as i64 == 0 && e.terms().iter().all(|&(_, k)| k % width as i64 == 0);
    let whole = |n: u64| n.is_multiple_of(width);
    (width > 1
        && 16 % bytes == 0
        && d_elem == elem
        && c.split.is_none()
        && c.pad.is_none()
        && c.box_dim(d_last) == last
        && c.stride_of(last) == 1
        && s_shape.len() == c.sizes.len()
        && whole(c.sizes[last])
        && whole(s_shape[last])
        && whole(d_shape[d_last])
        && aligned(s_off.get(last)?)
        && aligned(d_off.get(d_last)?)
        && !s_ty.contains("strided")
        && !d_ty.contains("strided"))
    .then_some(width)
}

/// Whether the stores of the unrolled nest `op` may be held to its end
/// ([`PendingStore`]), and if so the buffers its ops read (every operand
/// but a store's destination). Only a nest of unrolled and vector loops
/// without guards: its code is one block (no `scf.if` or `scf.for`), no
/// store in it is masked, and so every store into a buffer is held or
/// none is.
fn holdable_nest(f: &Function, op: Op) -> Option<std::collections::HashSet<Value>> {
    let mut read = std::collections::HashSet::new();
    for o in tilec_ops_inside(f, op) {
        let operands = &f.ops[o].operands;
        match &f.ops[o].kind {
            OpKind::If(_) => return None,
            OpKind::For(l) if !matches!(l.mapping, Mapping::Unroll | Mapping::VThread | Mapping::Vector) => return None,
            OpKind::Store(_) => read.extend(operands.iter().take(1).copied()),
            _ => read.extend(operands.iter().copied()),
        }
    }
    Some(read)
}

/// `e` at lane `lane` of the vector loop whose index is `iv`.
fn lane_of(e: &AffineExpr<Value>, iv: Value, lane: i64) -> AffineExpr<Value> {
    if !e.uses(iv) {
        return e.clone();
    }
    let c = e.coeff(iv);
    AffineExpr::from_parts(e.terms().iter().copied().filter(|&(v, _)| v != iv), e.constant_term() + c * lane, 1).expect("small").with_divisor(e.divisor())
}

/// Every op inside `op`'s regions.
fn tilec_ops_inside(f: &Function, op: Op) -> std::collections::HashSet<Op> {
    let mut out = std::collections::HashSet::new();
    let mut stack: Vec<Region> = f.ops[op].regions.clone();
    while let Some(r) = stack.pop() {
        for &o in &f.regions[r].ops {
            out.insert(o);
            stack.extend(f.ops[o].regions.iter().copied());
        }
    }
    out
}

/// A float literal as MLIR reads it exactly: the bit pattern in hex.
fn float_literal(x: f64, ty: ElemType) -> String {
    match ty {
        ElemType::F16 => format!("0x{:04X}", half::f16::from_f64(x).to_bits()),
        ElemType::BF16 => format!("0x{:04X}", half::bf16::from_f64(x).to_bits()),
        _ => format!("0x{:08X}", (x as f32).to_bits()),
    }
}

/// How each access index is split in vector mode: the part that is the
/// same in every lane, and the lane coefficient.
struct LaneSplit {
    uniform: AffineExpr<Value>,
    lane: i64,
}

impl<'f> Emitter<'f> {
    // ---------------------------------------------------------------
    // Kernel bodies.

    fn cpu_kernel_body(&mut self, body: Region, abi: &mut KernelAbi) -> Result<(), EmitError> {
        let f = self.f;
        let ops = f.regions[body].ops.clone();
        // A parallel nest at the top becomes the [lo, hi) range.
        let nest = match ops.as_slice() {
            [only] => parallel_nest(f, *only),
            _ => Vec::new(),
        };
        if nest.is_empty() {
            return self.region(body);
        }
        let extents: Vec<u64> = nest.iter().map(|&o| loop_of(f, o).extent).collect();
        abi.parallel_trip = extents.iter().product();
        let one = self.constant_index(1);
        let lin = self.fresh("par");
        self.line(&format!("scf.for {lin} = %lo to %hi step {one} {{"));
        self.depth += 1;
        // Decompose the linear index, innermost loop fastest.
        let mut rem = lin.clone();
        for (k, &o) in nest.iter().enumerate().rev() {
            let iv = induction(f, o);
            let n = self.constant_index(extents[k] as i64);
            let x = self.fresh("pi");
            self.line(&format!("{x} = arith.remui {rem}, {n} : index"));
            let q = self.fresh("pq");
            self.line(&format!("{q} = arith.divui {rem}, {n} : index"));
            self.vals.insert(iv, Ev::Index(x));
            rem = q;
        }
        let inner = f.ops[*nest.last().expect("non-empty")].regions[0];
        self.region(inner)?;
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    fn gpu_kernel_body(&mut self, body: Region, abi: &mut KernelAbi) -> Result<(), EmitError> {
        // Launch dimensions come from the block and thread loops; `lane`
        // loops (32 lanes in all, the verifier's rule) make each thread a
        // warp along x.
        let mut lanes = 1;
        for o in tilec_ops_inside(self.f, self.f.regions[body].owner.expect("kernel region")) {
            if let OpKind::For(l) = &self.f.ops[o].kind {
                match l.mapping {
                    Mapping::Block(d) => abi.grid[d as usize] = l.extent,
                    Mapping::Thread(d) => abi.block[d as usize] = l.extent,
                    Mapping::Lane => lanes = WARP_LANES,
                    _ => {}
                }
            }
        }
        abi.block[0] *= lanes;
        let threads: u64 = abi.block.iter().product();
        let (x, y, z) = (self.fresh("tx"), self.fresh("ty"), self.fresh("tz"));
        if lanes > 1 {
            self.warp_lanes = Some(x.clone());
        }
        self.line(&format!("{x} = gpu.thread_id x"));
        self.line(&format!("{y} = gpu.thread_id y"));
        self.line(&format!("{z} = gpu.thread_id z"));
        let bx = self.constant_index(abi.block[0] as i64);
        let bxy = self.constant_index((abi.block[0] * abi.block[1]) as i64);
        let (t1, t2, t3, lin) = (self.fresh("t"), self.fresh("t"), self.fresh("t"), self.fresh("tlin"));
        self.line(&format!("{t1} = arith.muli {y}, {bx} : index"));
        self.line(&format!("{t2} = arith.muli {z}, {bxy} : index"));
        self.line(&format!("{t3} = arith.addi {x}, {t1} : index"));
        self.line(&format!("{lin} = arith.addi {t3}, {t2} : index"));
        self.thread_linear = Some((lin, threads));
        self.region(body)?;
        // Up to the target's static limit (48 KiB on NVIDIA GPUs) the
        // buffers are declared statically; beyond, they share one block of
        // dynamic shared memory, which the launch sizes (and allows, above
        // 48 KiB). The target's resource check has already held the total
        // to what one block may have.
        if self.shared_bytes > self.max_static_shared_bytes {
            abi.dynamic_shared_bytes = self.shared_bytes;
        }
        abi.shared_bytes = self.shared_bytes;
        Ok(())
    }

    fn region(&mut self, r: Region) -> Result<(), EmitError> {
        for o in self.f.regions[r].ops.clone() {
            self.op(o)?;
        }
        Ok(())
    }

    // ---------------------------------------------------------------
    // Ops.

    fn op(&mut self, op: Op) -> Result<(), EmitError> {
        let f = self.f;
        let data = &f.ops[op];
        match &data.kind {
            OpKind::Alloc => self.alloc(op),
            OpKind::For(l) => self.for_loop(op, l.extent, l.mapping),
            OpKind::Load(a) => {
                let v = self.load(op, a)?;
                self.vals.insert(data.results[0], v);
                Ok(())
            }
            OpKind::Store(a) => self.store(op, a),
            OpKind::Copy(c) => self.copy(op, c),
            OpKind::Fill(lit) => self.fill(op, *lit),
            OpKind::Intrinsic(x) => self.intrinsic(op, x),
            OpKind::Barrier => {
                if self.gpu {
                    self.line("gpu.barrier");
                }
                Ok(())
            }
            OpKind::If(g) => self.guard(op, g),
            OpKind::Kernel(_) => self.region(data.regions[0]),
            OpKind::IndexValue(e) => {
                let ty = f.value_type(data.results[0]).as_scalar().ok_or_else(|| EmitError("index value of a non-scalar type".into()))?;
                let e = f.expr_in_values(op, e);
                let v = self.index_value(&e, ty)?;
                self.vals.insert(data.results[0], v);
                Ok(())
            }
            OpKind::Const(lit) => {
                let ty = f.value_type(data.results[0]).as_scalar().ok_or_else(|| EmitError("constant of a non-scalar type".into()))?;
                let n = self.scalar_constant(*lit, ty);
                self.vals.insert(data.results[0], Ev::Scalar(n, ty));
                Ok(())
            }
            OpKind::Unary(u) => {
                let ty = f.value_type(data.results[0]).as_scalar().ok_or_else(|| EmitError("unary op of a non-scalar type".into()))?;
                let x = self.get(data.operands[0])?.clone();
                let v = self.unary(*u, ty, x)?;
                self.vals.insert(data.results[0], v);
                Ok(())
            }
            OpKind::Binary(b) => {
                let ty = f.value_type(data.results[0]).as_scalar().ok_or_else(|| EmitError("binary op of a non-scalar type".into()))?;
                let (x, y) = (self.get(data.operands[0])?.clone(), self.get(data.operands[1])?.clone());
                let v = self.binary(*b, ty, x, y)?;
                self.vals.insert(data.results[0], v);
                Ok(())
            }
            OpKind::Cast => {
                let to = f.value_type(data.results[0]).as_scalar().ok_or_else(|| EmitError("cast to a non-scalar type".into()))?;
                let from = f.value_type(data.operands[0]).as_scalar().ok_or_else(|| EmitError("cast from a non-scalar".into()))?;
                let x = self.get(data.operands[0])?.clone();
                let v = self.cast(x, from, to)?;
                self.vals.insert(data.results[0], v);
                Ok(())
            }
            other => err(format!("`{}` cannot be compiled here", other.mnemonic())),
        }
    }

    fn alloc(&mut self, op: Op) -> Result<(), EmitError> {
        let r = self.f.ops[op].results[0];
        let b = self.f.value_type(r).as_buffer().ok_or_else(|| EmitError("alloc of a non-buffer".into()))?.clone();
        let name = self.fresh("buf");
        match b.scope {
            MemScope::Local => {
                let ty = memref_type(&b.shape, b.elem, "");
                // Aligned to a cache line, so that no vector load of a
                // packed tile or an accumulator tile splits across two (a
                // 64-byte AVX-512 load would split at every other
                // alignment). On a Zen 3 VM (AVX2) it measured level.
                self.hoisted.push(format!("{name} = memref.alloca() {{alignment = 64}} : {ty}"));
                self.stack_bytes += b.size_bytes().unwrap_or(0).next_multiple_of(64);
                self.vals.insert(r, Ev::Memref(name, ty));
            }
            MemScope::Shared if self.gpu => {
                let ty = memref_type(&b.shape, b.elem, ", #gpu.address_space<workgroup>");
                // 16-byte aligned offsets, for vector loads.
                self.shared_bytes = self.shared_bytes.next_multiple_of(16);
                self.shared_offsets.push(self.shared_bytes);
                self.shared_bytes += b.size_bytes().unwrap_or(0);
                self.shared.push((name.clone(), ty.clone()));
                self.vals.insert(r, Ev::Memref(name, ty));
            }
            MemScope::Shared => return err("shared buffers exist on GPUs only"),
            MemScope::Global => return err("global buffers are allocated by the host, outside kernels"),
        }
        Ok(())
    }

    fn for_loop(&mut self, op: Op, extent: u64, mapping: Mapping) -> Result<(), EmitError> {
        let f = self.f;
        let body = f.ops[op].regions[0];
        let iv = induction(f, op);
        match mapping {
            Mapping::Block(d) | Mapping::Thread(d) if self.gpu => {
                let kind = if matches!(mapping, Mapping::Block(_)) { "block_id" } else { "thread_id" };
                let mut n = self.fresh("id");
                self.line(&format!("{n} = gpu.{kind} {}", ["x", "y", "z"][d as usize]));
                if mapping == Mapping::Thread(0) && self.warp_lanes.is_some() {
                    // One warp per thread: threadIdx.x / 32.
                    let (w, warp) = (self.constant_index(WARP_LANES as i64), self.fresh("warp"));
                    self.line(&format!("{warp} = arith.divui {n}, {w} : index"));
                    n = warp;
                }
                self.vals.insert(iv, Ev::Index(n));
                self.region(body)
            }
            Mapping::Lane if self.gpu => {
                // threadIdx.x % 32, split over the lane loops (outermost most
                // significant): this loop's part is lane / inner % extent.
                let tx = self.warp_lanes.clone().ok_or_else(|| EmitError("a lane loop in a kernel without lanes".into()))?;
                let mut inner = 1u64;
                let mut at = body;
                while let [only] = f.regions[at].ops.as_slice()
                    && let OpKind::For(l) = &f.ops[*only].kind
                    && l.mapping == Mapping::Lane
                {
                    inner *= l.extent;
                    at = f.ops[*only].regions[0];
                }
                let (w, lane) = (self.constant_index(WARP_LANES as i64), self.fresh("lane"));
                self.line(&format!("{lane} = arith.remui {tx}, {w} : index"));
                let (ci, ce, q, n) = (self.constant_index(inner as i64), self.constant_index(extent as i64), self.fresh("lq"), self.fresh("lane"));
                self.line(&format!("{q} = arith.divui {lane}, {ci} : index"));
                self.line(&format!("{n} = arith.remui {q}, {ce} : index"));
                self.vals.insert(iv, Ev::Index(n));
                self.region(body)
            }
            Mapping::Unroll | Mapping::VThread => {
                let outermost = self.unrolled.is_empty();
                if outermost && !self.gpu {
                    self.holding = holdable_nest(f, op).map(|read| (self.depth, read));
                }
                for i in 0..extent as i64 {
                    let c = self.constant_index(i);
                    self.vals.insert(iv, Ev::Index(c));
                    self.unrolled.insert(iv, i);
                    self.region(body)?;
                }
                self.unrolled.remove(&iv);
                if outermost {
                    self.holding = None;
                    self.flush_stores()?;
                }
                Ok(())
            }
            Mapping::Vector if self.lanes.is_none() && self.vectorizable(body) => {
                // bf16 bodies are left as they were: under the extra
                // `scf.if`, LLVM no longer folds a broadcast bf16 operand's
                // extension and truncation, and calls `__truncsfbf2` for it
                // in the loop (tests::bf16_arithmetic_rounds_per_op_...).
                let skip_empty = match &f.ops[op].kind {
                    OpKind::For(l) => l.tag.as_ref().is_some_and(|t| !t.reduction) && !self.holds_bf16(body),
                    _ => false,
                };
                self.lanes = Some(Lanes { iv, width: extent, skip_empty });
                let result = self.region(body);
                self.lanes = None;
                result
            }
            _ => {
                if self.lanes.is_some() {
                    return err("a loop inside a vector loop");
                }
                let (lo, hi, one) = (self.constant_index(0), self.constant_index(extent as i64), self.constant_index(1));
                let n = self.fresh("i");
                self.line(&format!("scf.for {n} = {lo} to {hi} step {one} {{"));
                self.depth += 1;
                self.vals.insert(iv, Ev::Index(n));
                self.region(body)?;
                self.depth -= 1;
                self.line("}");
                Ok(())
            }
        }
    }

    /// Whether a value of `body` (or of the regions in it) is bf16.
    fn holds_bf16(&self, body: Region) -> bool {
        let f = self.f;
        let is_bf16 = |v: Value| match f.value_type(v) {
            Type::Scalar(e) => *e == ElemType::BF16,
            t => t.readable().is_some_and(|t| t.elem == ElemType::BF16),
        };
        let mut stack = vec![body];
        while let Some(r) = stack.pop() {
            for &o in &f.regions[r].ops {
                if f.ops[o].results.iter().chain(&f.ops[o].operands).any(|&v| is_bf16(v)) {
                    return true;
                }
                stack.extend(f.ops[o].regions.iter().copied());
            }
        }
        false
    }

    /// Can a vector loop's body be emitted as vector code? (No loops,
    /// buffers, copies or barriers inside, and guards either the same in
    /// every lane or a bound on the lane itself, `base + lane < bound`,
    /// which becomes a lane mask.) Otherwise the loop runs as a scalar loop.
    fn vectorizable(&self, body: Region) -> bool {
        let f = self.f;
        let iv = f.regions[body].args[0];
        let mut stack = vec![body];
        while let Some(r) = stack.pop() {
            for &o in &f.regions[r].ops {
                match &f.ops[o].kind {
                    OpKind::For(_) | OpKind::Alloc | OpKind::Copy(_) | OpKind::Fill(_) | OpKind::Barrier | OpKind::Kernel(_) => return false,
                    OpKind::If(g) => {
                        let maskable = |e: &AffineExpr<Value>| !e.uses(iv) || (e.coeff(iv) == 1 && e.divisor() == 1);
                        if !g.conds.iter().all(|(e, _)| maskable(&f.expr_in_values(o, e))) {
                            return false;
                        }
                        stack.push(f.ops[o].regions[0]);
                    }
                    _ => {}
                }
            }
        }
        true
    }

    // ---------------------------------------------------------------
    // Index arithmetic.

    fn index_of(&mut self, v: Value) -> Result<String, EmitError> {
        match self.get(v)? {
            Ev::Index(n) => Ok(n.clone()),
            other => err(format!("index expression over a non-index value ({other:?})")),
        }
    }

    /// Emits the numerator of an affine expression as an `index` value
    /// (the lane variable, in vector mode, must not occur).
    fn numerator(&mut self, e: &AffineExpr<Value>) -> Result<String, EmitError> {
        let mut acc = self.constant_index(e.constant_term());
        for &(v, c) in e.terms() {
            let x = self.index_of(v)?;
            let term = if c == 1 {
                x
            } else {
                let k = self.constant_index(c);
                let t = self.fresh("m");
                self.line(&format!("{t} = arith.muli {x}, {k} : index"));
                t
            };
            let s = self.fresh("a");
            self.line(&format!("{s} = arith.addi {acc}, {term} : index"));
            acc = s;
        }
        Ok(acc)
    }

    fn split_lanes(&self, e: &AffineExpr<Value>) -> LaneSplit {
        match self.lanes {
            Some(l) if e.uses(l.iv) => LaneSplit {
                uniform: AffineExpr::from_parts(e.terms().iter().copied().filter(|&(v, _)| v != l.iv), e.constant_term(), 1).expect("small").with_divisor(e.divisor()),
                lane: e.coeff(l.iv),
            },
            _ => LaneSplit { uniform: e.clone(), lane: 0 },
        }
    }

    /// `idx` with the lane variable fixed to `lane`.
    fn at_lane(&self, e: &AffineExpr<Value>, lane: i64) -> AffineExpr<Value> {
        match self.lanes {
            Some(l) => lane_of(e, l.iv, lane),
            None => e.clone(),
        }
    }

    // ---------------------------------------------------------------
    // Memory.

    fn memref_of(&self, v: Value) -> Result<(String, String), EmitError> {
        match self.get(v)? {
            Ev::Memref(n, t) => Ok((n.clone(), t.clone())),
            other => err(format!("not a buffer: {other:?}")),
        }
    }

    /// A scalar load with padding semantics (bounds and exact division).
    fn scalar_load(&mut self, m: &str, mty: &str, shape: &[u64], elem: ElemType, idx: &[AffineExpr<Value>], pad: Option<Literal>) -> Result<String, EmitError> {
        let nums: Vec<(String, i64)> = idx
            .iter()
            .map(|e| Ok((self.numerator(&AffineExpr::from_parts(e.terms().iter().copied(), e.constant_term(), 1).expect("small"))?, e.divisor())))
            .collect::<Result<_, EmitError>>()?;
        self.scalar_load_at(m, mty, shape, elem, &nums, pad)
    }

    /// [`Self::scalar_load`] at indices already computed: each dimension's
    /// numerator and its exact divisor.
    fn scalar_load_at(&mut self, m: &str, mty: &str, shape: &[u64], elem: ElemType, nums: &[(String, i64)], pad: Option<Literal>) -> Result<String, EmitError> {
        let checked = pad.is_some();
        let mut quots = Vec::new();
        let mut conds = Vec::new();
        for (&(ref n, d), &dim) in nums.iter().zip(shape) {
            if d == 1 {
                quots.push(n.clone());
            } else {
                let dc = self.constant_index(d);
                let q = self.fresh("q");
                self.line(&format!("{q} = arith.floordivsi {n}, {dc} : index"));
                let r = self.fresh("r");
                self.line(&format!("{r} = arith.remsi {n}, {dc} : index"));
                let zero = self.constant_index(0);
                let exact = self.fresh("ex");
                self.line(&format!("{exact} = arith.cmpi eq, {r}, {zero} : index"));
                conds.push(exact);
                quots.push(q);
            }
            if checked {
                let q = quots.last().expect("pushed").clone();
                let zero = self.constant_index(0);
                let hi = self.constant_index(dim as i64);
                let (ge, lt) = (self.fresh("ge"), self.fresh("lt"));
                self.line(&format!("{ge} = arith.cmpi sge, {q}, {zero} : index"));
                self.line(&format!("{lt} = arith.cmpi slt, {q}, {hi} : index"));
                conds.push(ge);
                conds.push(lt);
            }
        }
        let load = |e: &mut Self, quots: &[String]| {
            let v = e.fresh("ld");
            e.line(&format!("{v} = memref.load {m}[{}] : {mty}", quots.join(", ")));
            v
        };
        let Some(pad) = pad else {
            return Ok(load(self, &quots));
        };
        let mut all = None;
        for c in conds {
            all = Some(self.and(all, c, "i1"));
        }
        Ok(self.load_or_pad(&all.expect("a padded load checks its bounds"), m, mty, &quots, pad, elem))
    }

    /// `cond ? memref.load m[idx] : pad`, as an `scf.if` (the load must not
    /// run when it would be out of bounds).
    fn load_or_pad(&mut self, cond: &str, m: &str, mty: &str, idx: &[String], pad: Literal, elem: ElemType) -> String {
        self.select_scalar(cond, elem, pad, |e| {
            let x = e.fresh("ld");
            e.line(&format!("{x} = memref.load {m}[{}] : {mty}", idx.join(", ")));
            Ok(x)
        })
        .expect("a plain load emits no errors")
    }

    /// `cond ? then() : otherwise`, as an `scf.if` whose first branch alone
    /// runs what `then` emits.
    fn select_scalar(&mut self, cond: &str, elem: ElemType, otherwise: Literal, then: impl FnOnce(&mut Self) -> Result<String, EmitError>) -> Result<String, EmitError> {
        let et = mlir_elem(elem);
        let v = self.fresh("pl");
        self.line(&format!("{v} = scf.if {cond} -> ({et}) {{"));
        self.depth += 1;
        let x = then(self)?;
        self.line(&format!("scf.yield {x} : {et}"));
        self.depth -= 1;
        self.line("} else {");
        self.depth += 1;
        let p = self.scalar_constant(otherwise, elem);
        self.line(&format!("scf.yield {p} : {et}"));
        self.depth -= 1;
        self.line("}");
        Ok(v)
    }

    fn load(&mut self, op: Op, a: &Access) -> Result<Ev, EmitError> {
        let f = self.f;
        let src = f.ops[op].operands[0];
        let (m, mty) = self.memref_of(src)?;
        let t = f.value_type(src).readable().ok_or_else(|| EmitError("load from a non-buffer".into()))?;
        let idx: Vec<AffineExpr<Value>> = a.indices.iter().map(|e| f.expr_in_values(op, e)).collect();
        let splits: Vec<LaneSplit> = idx.iter().map(|e| self.split_lanes(e)).collect();
        let Some(lanes) = self.lanes.filter(|_| splits.iter().any(|s| s.lane != 0)) else {
            let v = self.scalar_load(&m, &mty, &t.shape, t.elem, &idx, a.pad)?;
            return Ok(Ev::Scalar(v, t.elem));
        };
        let last = idx.len() - 1;
        // Lanes that move along the last dimension alone, `step` apart,
        // with nothing to pad.
        let along_last = |step: i64| a.pad.is_none() && idx.iter().all(|e| e.divisor() == 1) && splits[last].lane == step && splits[..last].iter().all(|s| s.lane == 0);
        let contiguous = along_last(1);
        let vty = format!("vector<{}x{}>", lanes.width, mlir_elem(t.elem));
        let mask = self.mask_for(src, &idx);
        if contiguous {
            let base: Vec<String> = splits.iter().map(|s| self.numerator(&s.uniform)).collect::<Result<_, _>>()?;
            let v = self.fresh("vl");
            match &mask {
                None => self.line(&format!("{v} = vector.load {m}[{}] : {mty}, {vty}", base.join(", "))),
                Some(mask) => {
                    let zero = self.zero_like(t.elem, true)?;
                    let maskty = mask_type(lanes.width);
                    self.line(&format!("{v} = vector.maskedload {m}[{}], {mask}, {zero} : {mty}, {maskty}, {vty} into {vty}", base.join(", ")));
                }
            }
            return Ok(Ev::Vector(v, t.elem));
        }
        // Every other element of the last dimension (a stride-2 window: a
        // pooling's or strided convolution's `2·ow + s`): two loads of `w`
        // that overlap by one, from the first lane's element to the last's,
        // and one shuffle of the even ones (`vpermt2ps`), where lane by
        // lane it was `w` scalar loads. Under a lane mask (a partial tile:
        // 56 outputs on 16 lanes) the loads are masked: element `j` of the
        // run is read where lane ⌈j/2⌉ is on. Every element a lane needs
        // (`2l`) is then read, and the odd ones read lie between two that
        // are, as the mask is a prefix of the lanes (`vector.create_mask`).
        if along_last(2) && lanes.width >= 2 {
            let w = lanes.width as i64;
            let base: Vec<String> = splits.iter().map(|s| self.numerator(&s.uniform)).collect::<Result<_, _>>()?;
            let upper = splits[last].uniform.checked_add(&AffineExpr::constant(w - 1)).map_err(|_| EmitError("an index overflows".into()))?;
            let mut high = base.clone();
            high[last] = self.numerator(&upper)?;
            let (lo, hi, v) = (self.fresh("vl"), self.fresh("vh"), self.fresh("ve"));
            match &mask {
                None => {
                    self.line(&format!("{lo} = vector.load {m}[{}] : {mty}, {vty}", base.join(", ")));
                    self.line(&format!("{hi} = vector.load {m}[{}] : {mty}, {vty}", high.join(", ")));
                }
                Some(mask) => {
                    let maskty = mask_type(lanes.width);
                    let off = self.fresh("off");
                    self.line(&format!("{off} = arith.constant dense<false> : {maskty}"));
                    // Lane ⌈j/2⌉'s bit, or a false one (numbered `w` in the
                    // shuffle) past the last lane.
                    let bit = |j: i64| ((j + 1) / 2).min(w).to_string();
                    let zero = self.zero_like(t.elem, true)?;
                    for (name, first, at) in [(&lo, 0, &base), (&hi, w - 1, &high)] {
                        let picks: Vec<String> = (first..first + w).map(bit).collect();
                        let elems = self.fresh("em");
                        self.line(&format!("{elems} = vector.shuffle {mask}, {off} [{}] : {maskty}, {maskty}", picks.join(", ")));
                        self.line(&format!("{name} = vector.maskedload {m}[{}], {elems}, {zero} : {mty}, {maskty}, {vty} into {vty}", at.join(", ")));
                    }
                }
            }
            // Lane l is element 2l of the run: in `lo` below w, else element
            // 2l - (w - 1) of `hi`, which the shuffle numbers w + that.
            let picks: Vec<String> = (0..w).map(|l| if 2 * l < w { 2 * l } else { 2 * l + 1 }.to_string()).collect();
            self.line(&format!("{v} = vector.shuffle {lo}, {hi} [{}] : {vty}, {vty}", picks.join(", ")));
            return Ok(Ev::Vector(v, t.elem));
        }
        // Gather lane by lane (a masked-off lane reads nothing and is 0).
        let mut parts = Vec::new();
        for l in 0..lanes.width as i64 {
            let at: Vec<AffineExpr<Value>> = idx.iter().map(|e| self.at_lane(e, l)).collect();
            let Some(mask) = &mask else {
                parts.push(self.scalar_load(&m, &mty, &t.shape, t.elem, &at, a.pad)?);
                continue;
            };
            let on = self.fresh("on");
            self.line(&format!("{on} = vector.extract {mask}[{l}] : i1 from {}", mask_type(lanes.width)));
            parts.push(self.select_scalar(&on, t.elem, zero_literal(t.elem), |e| e.scalar_load(&m, &mty, &t.shape, t.elem, &at, a.pad))?);
        }
        let v = self.fresh("vg");
        self.line(&format!("{v} = vector.from_elements {} : {vty}", parts.join(", ")));
        Ok(Ev::Vector(v, t.elem))
    }

    // ---------------------------------------------------------------
    // Tensor intrinsics.

    /// One `intrinsic` op on a CPU: the accumulator's lanes loaded, `a`'s
    /// lanes (with their `k` elements packed in each) loaded, `b`'s group
    /// of `k` elements broadcast to every lane, the instruction, the
    /// accumulator stored. Contiguous operands load as vectors; others are
    /// gathered element by element (with their padding).
    fn intrinsic(&mut self, op: Op, x: &IntrinsicCall) -> Result<(), EmitError> {
        if self.gpu {
            return match &x.lane {
                Some(lane) if x.kind == IntrinsicKind::Mma => self.warp_mma(op, x, lane),
                _ => err(format!("`{}`: a GPU runs warp intrinsics (`mma` with `lane(...)`, made by tensorize) only", x.name)),
            };
        }
        if !x.kind.is_vector() || x.shape[1] != 1 {
            return err(format!("`{}`: a CPU runs vector intrinsics (`fma`, `dot`) only", x.name));
        }
        let f = self.f;
        let (lanes, k) = (x.shape[0], x.shape[2]);
        let operands = &f.ops[op].operands;
        let elem = |i: usize| f.value_type(operands[i]).readable().map(|t| t.elem).ok_or_else(|| EmitError("intrinsic operand is not a buffer".into()));
        let (ec, ea, eb) = (elem(0)?, elem(1)?, elem(2)?);
        let acc_ty = format!("vector<{lanes}x{}>", mlir_elem(ec));
        // Lane `l`, element `q` of each operand (the accumulator has one per lane).
        let acc = self.tile_vector(op, 0, &x.acc, &x.parts, lanes, 1, |l, _| [l, 0, 0])?;
        let a = self.tile_vector(op, 1, &x.a, &x.parts, lanes, k, |l, q| [l, 0, q])?;
        let b_group = self.tile_vector(op, 2, &x.b, &x.parts, 1, k, |_, q| [0, 0, q])?;
        let b_ty = format!("vector<{k}x{}>", mlir_elem(eb));
        let b = self.fresh("bc");
        if k == 1 {
            let s = self.fresh("bs");
            self.line(&format!("{s} = vector.extract {b_group}[0] : {} from {b_ty}", mlir_elem(eb)));
            self.line(&format!("{b} = vector.broadcast {s} : {} to vector<{lanes}x{}>", mlir_elem(eb), mlir_elem(eb)));
        } else {
            let pattern: Vec<String> = (0..lanes * k).map(|i| (i % k).to_string()).collect();
            self.line(&format!("{b} = vector.shuffle {b_group}, {b_group} [{}] : {b_ty}, {b_ty}", pattern.join(", ")));
        }
        let r = self.fresh("ix");
        let src_ty = format!("vector<{}x{}>", lanes * k, mlir_elem(ea));
        match (x.kind, ec) {
            (IntrinsicKind::Fma, _) => self.line(&format!("{r} = vector.fma {a}, {b}, {acc} : {acc_ty}")),
            (IntrinsicKind::Dot, ElemType::I32) if k == 4 && matches!(lanes, 4 | 8 | 16) => {
                // vpdpbusd multiplies unsigned bytes (its first source) by signed ones.
                let (unsigned, signed) = match (ea, eb) {
                    (ElemType::U8, ElemType::I8) => (&a, &b),
                    (ElemType::I8, ElemType::U8) => (&b, &a),
                    _ => return err(format!("`{}`: x86 has no dot product of {ea} by {eb} (vpdpbusd multiplies u8 by i8)", x.name)),
                };
                let bits = lanes * 32;
                self.line(&format!(
                    "{r} = llvm.call_intrinsic \"llvm.x86.avx512.vpdpbusd.{bits}\"({acc}, {unsigned}, {signed}) : ({acc_ty}, {src_ty}, {src_ty}) -> {acc_ty}"
                ));
            }
            (IntrinsicKind::Dot, ElemType::F32) if k == 2 && ea == ElemType::BF16 && eb == ElemType::BF16 && matches!(lanes, 4 | 8 | 16) => {
                let bits = lanes * 32;
                self.line(&format!("{r} = llvm.call_intrinsic \"llvm.x86.avx512bf16.dpbf16ps.{bits}\"({acc}, {a}, {b}) : ({acc_ty}, {src_ty}, {src_ty}) -> {acc_ty}"));
            }
            _ => return err(format!("`{}`: no x86 instruction computes a {} of {lanes} lanes of {k} {ea} × {eb} products into {ec}", x.name, x.kind)),
        }
        self.store_tile_vector(op, &x.acc, &x.parts, lanes, &r, ec)
    }

    /// Lane `(g, t)`'s fragment of `mma.sync` operand `i` (`a`: 1, `b`: 2)
    /// through one `ldmatrix` (`nvgpu.ldmatrix`), in the scalar path's
    /// order (register, then element), or None where it does not apply.
    /// `ldmatrix` reads 8 × 8 matrices of 32-bit-register pairs: 8 rows of
    /// 16 contiguous, 16-byte aligned bytes each, lane `l` taking the 4
    /// bytes at `4·(l % 4)` of row `l / 4`, which is PTX's fragment layout
    /// for 16-bit elements (two a register, `k` = 16) and for bytes (four a
    /// register, `k` = 32) alike. A 16-byte row holds `c` = 8 or 16
    /// elements along `k`. `a` is four matrices (rows `m` 0-7 and 8-15 by
    /// `k` 0 to `c - 1`, then by `k` `c` to `2c - 1`), `b` two (rows `n`
    /// 0-7 by the two halves of `k`). Lane `l` gives the address of row
    /// `l % 8` of matrix `l / 8`. With `k` along the buffer's last
    /// dimension the rows are the operand's rows; with the rows' axis there
    /// (a `[k][n]` `b`), the rows are `k`'s and `.trans` hands each lane the
    /// transposed pairs, which exists for 16-bit elements only (bytes take
    /// the scalar path there). So: a shared buffer, no padded reads, `k`
    /// and the rows' axis each stepping one dimension by 1, one of them the
    /// last, whose extent and the origin's index in it are multiples of `c`
    /// (the buffer is 16-byte aligned).
    fn ldmatrix_fragment(&mut self, op: Op, i: usize, tile: &TileOperand, (g, t): (&AffineExpr<Value>, &AffineExpr<Value>), per_reg: i64) -> Result<Option<Vec<String>>, EmitError> {
        let f = self.f;
        let buf = f.ops[op].operands[i];
        let Type::Buffer(b) = f.value_type(buf) else {
            return Ok(None);
        };
        let rows_axis = if i == 1 { 0 } else { 1 };
        let unit_dim = |steps: &[i64]| -> Option<usize> {
            let moving: Vec<usize> = (0..steps.len()).filter(|&d| steps[d] != 0).collect();
            match moving.as_slice() {
                [d] if steps[*d] == 1 => Some(*d),
                _ => None,
            }
        };
        let last = b.shape.len().saturating_sub(1);
        let (Some(dk), Some(dr)) = (tile.axis_steps(2).and_then(unit_dim), tile.axis_steps(rows_axis).and_then(unit_dim)) else {
            return Ok(None);
        };
        let origin: Vec<AffineExpr<Value>> = tile.indices.iter().map(|e| f.expr_in_values(op, e)).collect();
        // Elements of one 16-byte matrix row.
        let row_elems = 16 / b.elem.size_bytes().max(1) as i64;
        let aligned = |e: &AffineExpr<Value>| e.divisor() == 1 && e.constant_term() % row_elems == 0 && e.terms().iter().all(|&(_, k)| k % row_elems == 0);
        let other_still = tile.steps[1 - rows_axis].iter().flatten().all(|&s| s == 0);
        let transpose = dr == last;
        if per_reg * b.elem.size_bytes() as i64 != 4
            || b.scope != MemScope::Shared
            || tile.pad.is_some()
            || dk == dr
            || !(dk == last || dr == last)
            || (transpose && b.elem.size_bytes() != 2)
            || !other_still
            || b.shape[last] % row_elems as u64 != 0
            || origin.iter().any(|e| e.divisor() != 1)
            || !aligned(&origin[last])
        {
            return Ok(None);
        }
        let tiles: i64 = if i == 1 { 4 } else { 2 };
        let (m, mty) = self.memref_of(buf)?;
        let mut idx: Vec<String> = origin.iter().map(|e| self.numerator(e)).collect::<Result<_, _>>()?;
        // Lane l = 4g + t (the lane loops' split), its matrix q and row w.
        let (gs, ts) = (self.numerator(g)?, self.numerator(t)?);
        let (four, eight, used, two, per_row) = (self.constant_index(4), self.constant_index(8), self.constant_index(8 * tiles), self.constant_index(2), self.constant_index(row_elems));
        let lines = |this: &mut Self, prefix: &str, text: String| {
            let v = this.fresh(prefix);
            this.line(&format!("{v} = {text}"));
            v
        };
        let g4 = lines(self, "lm", format!("arith.muli {gs}, {four} : index"));
        let lane = lines(self, "ln", format!("arith.addi {g4}, {ts} : index"));
        let l = lines(self, "ln", format!("arith.remui {lane}, {used} : index"));
        let q = lines(self, "lq", format!("arith.divui {l}, {eight} : index"));
        let w = lines(self, "lw", format!("arith.remui {l}, {eight} : index"));
        // Matrix q's first row and k: `a` (8·(q % 2), c·(q / 2)), `b` (0, c·q).
        let (row0, k0) = if i == 1 {
            let (qr, qk) = (lines(self, "lq", format!("arith.remui {q}, {two} : index")), lines(self, "lq", format!("arith.divui {q}, {two} : index")));
            (Some(lines(self, "lr", format!("arith.muli {qr}, {eight} : index"))), lines(self, "lk", format!("arith.muli {qk}, {per_row} : index")))
        } else {
            (None, lines(self, "lk", format!("arith.muli {q}, {per_row} : index")))
        };
        // Non-transposed: row w of the operand's rows; transposed (16-bit
        // elements, c = 8): k's row w.
        let (row, k) = if transpose {
            (row0, lines(self, "lk", format!("arith.addi {k0}, {w} : index")))
        } else {
            (Some(row0.map_or(w.clone(), |r| lines(self, "lr", format!("arith.addi {r}, {w} : index")))), k0)
        };
        if let Some(row) = row {
            idx[dr] = lines(self, "li", format!("arith.addi {}, {row} : index", idx[dr]));
        }
        idx[dk] = lines(self, "li", format!("arith.addi {}, {k} : index", idx[dk]));
        let et = mlir_elem(b.elem);
        let vty = format!("vector<{tiles}x{per_reg}x{et}>");
        let v = lines(self, "ldm", format!("nvgpu.ldmatrix {m}[{}] {{numTiles = {tiles} : i32, transpose = {transpose}}} : {mty} -> {vty}", idx.join(", ")));
        let mut parts = Vec::new();
        for r in 0..tiles {
            for e in 0..per_reg {
                parts.push(lines(self, "lx", format!("vector.extract {v}[{r}, {e}] : {et} from {vty}")));
            }
        }
        Ok(Some(parts))
    }

    /// A warp's `mma.sync` (`nvgpu.mma.sync`), in lane `(g, t)` of the
    /// warp: the lane loads its fragments of `a` and `b` from memory, in
    /// PTX's layouts ("Matrix Fragments for mma.m16n8k16 / m16n8k32"), and
    /// its accumulator fragment from the local buffer, where it stores the
    /// result. Register `r` of `a` holds elements `e` of row `g + 8·(r %
    /// 2)`, columns `c·t + e + 4·c·(r / 2)`; register `r` of `b` rows
    /// `c·t + e + 4·c·r` of column `g`; `c` is 2 for 16-bit types and 4 for
    /// bytes (`k` = 16 or 32).
    fn warp_mma(&mut self, op: Op, x: &IntrinsicCall, lane: &[AffineExpr<Dim>; 2]) -> Result<(), EmitError> {
        let f = self.f;
        let operands = &f.ops[op].operands;
        let elem = |i: usize| f.value_type(operands[i]).readable().map(|t| t.elem).ok_or_else(|| EmitError("intrinsic operand is not a buffer".into()));
        let (ec, ea, eb) = (elem(0)?, elem(1)?, elem(2)?);
        let per_reg: i64 = match (x.shape, ea, eb, ec) {
            ([16, 8, 16], ElemType::F16, ElemType::F16, ElemType::F32 | ElemType::F16) | ([16, 8, 16], ElemType::BF16, ElemType::BF16, ElemType::F32) => 2,
            ([16, 8, 32], ElemType::I8, ElemType::I8, ElemType::I32) => 4,
            _ => return err(format!("`{}`: mma.sync has no {}x{}x{} form of {ea} × {eb} into {ec} here (f16 or bf16 with k = 16, i8 with k = 32)", x.name, x.shape[0], x.shape[1], x.shape[2])),
        };
        let [g, t] = [f.expr_in_values(op, &lane[0]), f.expr_in_values(op, &lane[1])];
        let affine = |base: &AffineExpr<Value>, scale: i64, plus: i64| -> Result<AffineExpr<Value>, EmitError> {
            base.checked_scale(scale).and_then(|e| e.checked_add(&AffineExpr::constant(plus))).map_err(|_| EmitError("an intrinsic's operand index overflows".into()))
        };
        // Operand `i`'s element at intrinsic point `p` (expressions in the
        // lane). A fused axis' point is taken apart into its parts' digits
        // at run time (`TileOperand::offset`'s rule), each stepping the
        // indices on its own: a lane's rows of `m = [oh, ow]` are rows and
        // columns of the image. The digits are of lane numbers, constant
        // per thread, which LLVM computes once.
        let element = |this: &mut Self, i: usize, tile: &TileOperand, p: [AffineExpr<Value>; 3]| -> Result<String, EmitError> {
            let buf = operands[i];
            let (m, mty) = this.memref_of(buf)?;
            let tt = f.value_type(buf).readable().ok_or_else(|| EmitError("intrinsic operand is not a buffer".into()))?;
            let mut digits: [Vec<String>; 3] = Default::default();
            for axis in 0..3 {
                if tile.steps[axis].len() < 2 {
                    continue;
                }
                let sizes = &x.parts[axis];
                let mut rest = this.numerator(&p[axis])?;
                let mut ds = vec![String::new(); sizes.len()];
                for j in (1..sizes.len()).rev() {
                    let c = this.constant_index(sizes[j] as i64);
                    let (r, q) = (this.fresh("dg"), this.fresh("dq"));
                    this.line(&format!("{r} = arith.remui {rest}, {c} : index"));
                    this.line(&format!("{q} = arith.divui {rest}, {c} : index"));
                    ds[j] = r;
                    rest = q;
                }
                ds[0] = rest;
                digits[axis] = ds;
            }
            let mut at = Vec::new();
            for (d, e) in tile.indices.iter().enumerate() {
                let mut idx = f.expr_in_values(op, e);
                let mut runtime: Vec<(&str, i64)> = Vec::new();
                for (axis, offset) in p.iter().enumerate() {
                    let moves = tile.steps[axis].iter().any(|s| s[d] != 0);
                    if moves && idx.divisor() != 1 {
                        return err("an intrinsic's operand steps inside a division");
                    }
                    match tile.axis_steps(axis) {
                        Some(steps) if steps[d] != 0 => {
                            idx = offset.checked_scale(steps[d]).and_then(|o| idx.checked_add(&o)).map_err(|_| EmitError("an intrinsic's operand index overflows".into()))?;
                        }
                        Some(_) => {}
                        None => runtime.extend(tile.steps[axis].iter().zip(&digits[axis]).filter(|(s, _)| s[d] != 0).map(|(s, g)| (g.as_str(), s[d]))),
                    }
                }
                at.push((idx, runtime));
            }
            let mut nums = Vec::new();
            for (e, runtime) in at {
                let mut n = this.numerator(&AffineExpr::from_parts(e.terms().iter().copied(), e.constant_term(), 1).expect("small"))?;
                for (digit, step) in runtime {
                    let (c, prod, sum) = (this.constant_index(step), this.fresh("ds"), this.fresh("di"));
                    this.line(&format!("{prod} = arith.muli {digit}, {c} : index"));
                    this.line(&format!("{sum} = arith.addi {n}, {prod} : index"));
                    n = sum;
                }
                nums.push((n, e.divisor()));
            }
            this.scalar_load_at(&m, &mty, &tt.shape, tt.elem, &nums, tile.pad)
        };
        let zero = AffineExpr::constant(0);
        // Operand `i`'s fragment, register by register: from shared memory
        // through one `ldmatrix` where the layout allows, else
        // element by element (`a`: 4 registers, `b`: 2; the layouts above).
        let fragment = |this: &mut Self, i: usize, tile: &TileOperand| -> Result<Vec<String>, EmitError> {
            if let Some(parts) = this.ldmatrix_fragment(op, i, tile, (&g, &t), per_reg)? {
                return Ok(parts);
            }
            let mut parts = Vec::new();
            for r in 0..if i == 1 { 4 } else { 2 } {
                for e in 0..per_reg {
                    let point = if i == 1 {
                        [affine(&g, 1, 8 * (r % 2))?, zero.clone(), affine(&t, per_reg, e + 4 * per_reg * (r / 2))?]
                    } else {
                        [zero.clone(), g.clone(), affine(&t, per_reg, e + 4 * per_reg * r)?]
                    };
                    parts.push(element(this, i, tile, point)?);
                }
            }
            Ok(parts)
        };
        let a_parts = fragment(self, 1, &x.a)?;
        let b_parts = fragment(self, 2, &x.b)?;
        // The accumulator fragment: 2 × 2 elements at constant offsets.
        let acc_buf = operands[0];
        let (m, mty) = self.memref_of(acc_buf)?;
        let origin: Vec<AffineExpr<Value>> = x.acc.indices.iter().map(|e| f.expr_in_values(op, e)).collect();
        let mut acc_idx = Vec::new();
        for (fm, fn_) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let at: Vec<AffineExpr<Value>> = origin.iter().enumerate().map(|(d, e)| shifted(e, x.offset(&x.acc, d, [fm, fn_, 0]))).collect::<Result<_, _>>()?;
            let idx: Vec<String> = at.iter().map(|e| self.numerator(e)).collect::<Result<_, _>>()?;
            acc_idx.push(idx);
        }
        let mut c_parts = Vec::new();
        for idx in &acc_idx {
            let v = self.fresh("fr");
            self.line(&format!("{v} = memref.load {m}[{}] : {mty}", idx.join(", ")));
            c_parts.push(v);
        }
        let (et_a, et_c) = (mlir_elem(ea), mlir_elem(ec));
        if ea == ElemType::BF16 {
            return self.bf16_mma(&a_parts, &b_parts, &c_parts, (&m, &mty), &acc_idx);
        }
        let (a_ty, b_ty, c_ty) = (format!("vector<4x{per_reg}x{et_a}>"), format!("vector<2x{per_reg}x{et_a}>"), format!("vector<2x2x{et_c}>"));
        let (va, vb, vc, r) = (self.fresh("fa"), self.fresh("fb"), self.fresh("fc"), self.fresh("mma"));
        self.line(&format!("{va} = vector.from_elements {} : {a_ty}", a_parts.join(", ")));
        self.line(&format!("{vb} = vector.from_elements {} : {b_ty}", b_parts.join(", ")));
        self.line(&format!("{vc} = vector.from_elements {} : {c_ty}", c_parts.join(", ")));
        self.line(&format!("{r} = nvgpu.mma.sync({va}, {vb}, {vc}) {{mmaShape = [{}, {}, {}]}} : ({a_ty}, {b_ty}, {c_ty}) -> {c_ty}", x.shape[0], x.shape[1], x.shape[2]));
        for ((fm, fn_), idx) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().zip(&acc_idx) {
            let v = self.fresh("el");
            self.line(&format!("{v} = vector.extract {r}[{fm}, {fn_}] : {et_c} from {c_ty}"));
            self.line(&format!("memref.store {v}, {m}[{}] : {mty}", idx.join(", ")));
        }
        Ok(())
    }

    /// The bf16 m16n8k16 `mma.sync` into f32, which `nvgpu.mma.sync`
    /// cannot type: `nvvm.mma.sync` directly, each register two bf16
    /// packed into an i32 (the first element in the low half), the result
    /// an LLVM struct of the 4 accumulator elements (c0..c3, the fragment
    /// in row-major order, as `acc_idx`).
    fn bf16_mma(&mut self, a: &[String], b: &[String], c: &[String], (m, mty): (&str, &str), acc_idx: &[Vec<String>]) -> Result<(), EmitError> {
        let pack = |this: &mut Self, pair: &[String]| {
            let (v, w, r) = (this.fresh("bp"), this.fresh("bw"), this.fresh("br"));
            this.line(&format!("{v} = vector.from_elements {}, {} : vector<2xbf16>", pair[0], pair[1]));
            this.line(&format!("{w} = vector.bitcast {v} : vector<2xbf16> to vector<1xi32>"));
            this.line(&format!("{r} = vector.extract {w}[0] : i32 from vector<1xi32>"));
            r
        };
        let a_regs: Vec<String> = a.chunks(2).map(|p| pack(self, p)).collect();
        let b_regs: Vec<String> = b.chunks(2).map(|p| pack(self, p)).collect();
        let st = "!llvm.struct<(f32, f32, f32, f32)>";
        let r = self.fresh("mma");
        self.line(&format!(
            "{r} = nvvm.mma.sync A[{}] B[{}] C[{}] {{layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}} : (i32, i32, f32) -> {st}",
            a_regs.join(", "),
            b_regs.join(", "),
            c.join(", ")
        ));
        for (i, idx) in acc_idx.iter().enumerate() {
            let v = self.fresh("el");
            self.line(&format!("{v} = llvm.extractvalue {r}[{i}] : {st}"));
            self.line(&format!("memref.store {v}, {m}[{}] : {mty}", idx.join(", ")));
        }
        Ok(())
    }

    /// Operand `i` of an intrinsic as one vector of `lanes × k` elements,
    /// element `l·k + q` from intrinsic point `point(l, q)`: one vector load
    /// where those elements are consecutive in memory (and need no
    /// padding), else a gather.
    fn tile_vector(&mut self, op: Op, i: usize, t: &TileOperand, parts: &[Vec<u64>; 3], lanes: u64, k: u64, point: impl Fn(i64, i64) -> [i64; 3]) -> Result<String, EmitError> {
        let f = self.f;
        let buf = f.ops[op].operands[i];
        let (m, mty) = self.memref_of(buf)?;
        let tt = f.value_type(buf).readable().ok_or_else(|| EmitError("intrinsic operand is not a buffer".into()))?;
        let origin: Vec<AffineExpr<Value>> = t.indices.iter().map(|e| f.expr_in_values(op, e)).collect();
        let vty = format!("vector<{}x{}>", lanes * k, mlir_elem(tt.elem));
        if is_run(t, parts, &tt.shape, lanes, k, &point) {
            let base: Vec<String> = origin.iter().map(|e| self.numerator(e)).collect::<Result<_, _>>()?;
            let v = self.fresh("tv");
            self.line(&format!("{v} = vector.load {m}[{}] : {mty}, {vty}", base.join(", ")));
            return Ok(v);
        }
        let mut elements = Vec::new();
        for l in 0..lanes as i64 {
            for q in 0..k as i64 {
                let at: Vec<AffineExpr<Value>> = origin.iter().enumerate().map(|(d, e)| shifted(e, t.offset(parts, d, point(l, q)))).collect::<Result<_, _>>()?;
                elements.push(self.scalar_load(&m, &mty, &tt.shape, tt.elem, &at, t.pad)?);
            }
        }
        let v = self.fresh("tg");
        self.line(&format!("{v} = vector.from_elements {} : {vty}", elements.join(", ")));
        Ok(v)
    }

    /// Stores the accumulator's lanes back where [`Self::tile_vector`] read them.
    fn store_tile_vector(&mut self, op: Op, t: &TileOperand, parts: &[Vec<u64>; 3], lanes: u64, v: &str, elem: ElemType) -> Result<(), EmitError> {
        let f = self.f;
        let buf = f.ops[op].operands[0];
        let (m, mty) = self.memref_of(buf)?;
        let shape = f.value_type(buf).readable().ok_or_else(|| EmitError("intrinsic operand is not a buffer".into()))?.shape;
        let origin: Vec<AffineExpr<Value>> = t.indices.iter().map(|e| f.expr_in_values(op, e)).collect();
        let vty = format!("vector<{lanes}x{}>", mlir_elem(elem));
        if is_run(t, parts, &shape, lanes, 1, &|l, _| [l, 0, 0]) {
            let base: Vec<String> = origin.iter().map(|e| self.numerator(e)).collect::<Result<_, _>>()?;
            self.line(&format!("vector.store {v}, {m}[{}] : {mty}, {vty}", base.join(", ")));
            return Ok(());
        }
        for l in 0..lanes as i64 {
            let at: Vec<AffineExpr<Value>> = origin.iter().enumerate().map(|(d, e)| shifted(e, t.offset(parts, d, [l, 0, 0]))).collect::<Result<_, _>>()?;
            let idx: Vec<String> = at.iter().map(|e| self.numerator(e)).collect::<Result<_, _>>()?;
            let s = self.fresh("el");
            self.line(&format!("{s} = vector.extract {v}[{l}] : {} from {vty}", mlir_elem(elem)));
            self.line(&format!("memref.store {s}, {m}[{}] : {mty}", idx.join(", ")));
        }
        Ok(())
    }

    fn store(&mut self, op: Op, a: &Access) -> Result<(), EmitError> {
        let f = self.f;
        let value = self.get(f.ops[op].operands[0])?.clone();
        let dst = f.ops[op].operands[1];
        let (m, mty) = self.memref_of(dst)?;
        let idx: Vec<AffineExpr<Value>> = a.indices.iter().map(|e| f.expr_in_values(op, e)).collect();
        let splits: Vec<LaneSplit> = idx.iter().map(|e| self.split_lanes(e)).collect();
        let varying_index = splits.iter().any(|s| s.lane != 0);
        match (self.lanes, &value, varying_index) {
            (Some(lanes), _, true) => {
                let elem = match &value {
                    Ev::Scalar(_, t) | Ev::Vector(_, t) => *t,
                    _ => return err("store of a non-scalar"),
                };
                let vec = self.as_vector(value.clone(), lanes.width)?;
                let last = idx.len() - 1;
                let vty = format!("vector<{}x{}>", lanes.width, mlir_elem(elem));
                let mask = self.mask_for(dst, &idx);
                let maskty = mask_type(lanes.width);
                if splits[last].lane == 1 && splits[..last].iter().all(|s| s.lane == 0) {
                    let base: Vec<String> = splits.iter().map(|s| self.numerator(&s.uniform)).collect::<Result<_, _>>()?;
                    match &mask {
                        None => self.line(&format!("vector.store {vec}, {m}[{}] : {mty}, {vty}", base.join(", "))),
                        Some(mask) => self.line(&format!("vector.maskedstore {m}[{}], {mask}, {vec} : {mty}, {maskty}, {vty}", base.join(", "))),
                    }
                } else if mask.is_none() && self.holding.as_ref().is_some_and(|(depth, read)| *depth == self.depth && !read.contains(&dst)) {
                    let unrolled = &self.unrolled;
                    let idx = idx
                        .iter()
                        .map(|e| e.substitute(|v| unrolled.get(&v).map_or_else(|| AffineExpr::var(v), |&c| AffineExpr::constant(c))))
                        .collect::<Result<_, _>>()
                        .map_err(|_| EmitError("an index overflows".into()))?;
                    self.pending.push(PendingStore { buffer: dst, memref: (m, mty), elem, vector: vec, width: lanes.width, lane: lanes.iv, idx });
                } else {
                    self.store_lanes((&m, &mty), elem, &vec, (lanes.iv, lanes.width), &idx, mask.as_deref())?;
                }
            }
            (_, Ev::Vector(..), false) => return err("a vector stored to one element"),
            (_, v, false) => {
                let at: Vec<String> = idx.iter().map(|e| self.numerator(e)).collect::<Result<_, _>>()?;
                self.line(&format!("memref.store {}, {m}[{}] : {mty}", v.name(), at.join(", ")));
            }
            (None, _, true) => unreachable!("lanes vary only in vector mode"),
        }
        Ok(())
    }

    /// Emits the held stores ([`PendingStore`]): stores into one buffer
    /// whose indices differ only in the last one's constant, by 1 from one
    /// to the next, go in runs of 2, 4, 8 or 16: the run's vectors
    /// interleaved (lane `l·k + j` is vector `j`'s lane `l`) and each lane's
    /// `k` elements stored as one vector. The rest, and every store of a
    /// set where two would write one place, go lane by lane as before, in
    /// their order.
    fn flush_stores(&mut self) -> Result<(), EmitError> {
        let pending = std::mem::take(&mut self.pending);
        let same_place = |a: &PendingStore, b: &PendingStore| a.buffer == b.buffer && a.idx == b.idx;
        let overlap = pending.iter().enumerate().any(|(i, a)| pending[..i].iter().any(|b| same_place(a, b)));
        // Groups: one buffer, lane and width, the same indices but for the
        // last one's constant (which the lanes must not move).
        let key = |p: &PendingStore| {
            let last = p.idx.last().filter(|e| !e.uses(p.lane) && e.divisor() == 1)?;
            let base = AffineExpr::from_parts(last.terms().iter().copied(), 0, 1).ok()?;
            Some((p.buffer, p.lane, p.width, p.idx[..p.idx.len() - 1].to_vec(), base))
        };
        let mut groups: Vec<(Option<_>, Vec<usize>)> = Vec::new();
        for (i, p) in pending.iter().enumerate() {
            let k = if overlap { None } else { key(p) };
            match groups.iter_mut().find(|(g, _)| k.is_some() && *g == k) {
                Some((_, members)) => members.push(i),
                None => groups.push((k, vec![i])),
            }
        }
        for (k, mut members) in groups {
            if k.is_none() {
                for i in members {
                    self.scatter(&pending[i])?;
                }
                continue;
            }
            let offset = |i: usize| pending[i].idx.last().map_or(0, |e| e.constant_term());
            members.sort_by_key(|&i| offset(i));
            let mut at = 0;
            while at < members.len() {
                // The run of consecutive offsets from here, in chunks of a
                // power of 2 up to 16.
                let mut run = 1;
                while at + run < members.len() && offset(members[at + run]) == offset(members[at]) + run as i64 {
                    run += 1;
                }
                // At most 128 elements interleaved (8 runs of 16 lanes).
                let most = (128 / pending[members[at]].width.max(1)) as usize;
                let chunk = [16, 8, 4, 2, 1].into_iter().find(|&c| c <= run && c <= most).unwrap_or(1);
                if chunk == 1 {
                    self.scatter(&pending[members[at]])?;
                } else {
                    self.store_run(&pending, &members[at..at + chunk])?;
                }
                at += chunk;
            }
        }
        Ok(())
    }

    /// A held store, lane by lane.
    fn scatter(&mut self, p: &PendingStore) -> Result<(), EmitError> {
        self.store_lanes((&p.memref.0, &p.memref.1), p.elem, &p.vector, (p.lane, p.width), &p.idx, None)
    }

    /// Vector `vec` stored lane by lane at `idx` (the vector loop's index
    /// `lane` in it fixed to each lane in turn), each lane under `mask`'s
    /// bit where there is a mask.
    fn store_lanes(&mut self, (m, mty): (&str, &str), elem: ElemType, vec: &str, (lane, width): (Value, u64), idx: &[AffineExpr<Value>], mask: Option<&str>) -> Result<(), EmitError> {
        let ety = mlir_elem(elem);
        for l in 0..width as i64 {
            let x = self.fresh("x");
            self.line(&format!("{x} = vector.extract {vec}[{l}] : {ety} from vector<{width}x{ety}>"));
            let at: Vec<String> = idx.iter().map(|e| self.numerator(&lane_of(e, lane, l))).collect::<Result<_, _>>()?;
            let Some(mask) = mask else {
                self.line(&format!("memref.store {x}, {m}[{}] : {mty}", at.join(", ")));
                continue;
            };
            let on = self.fresh("on");
            self.line(&format!("{on} = vector.extract {mask}[{l}] : i1 from {}", mask_type(width)));
            self.line(&format!("scf.if {on} {{"));
            self.depth += 1;
            self.line(&format!("memref.store {x}, {m}[{}] : {mty}", at.join(", ")));
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }

    /// Held stores `members` of `pending`, at consecutive places along the
    /// last index (a power of 2 of them): interleaved, then one store of
    /// `k` elements per lane.
    fn store_run(&mut self, pending: &[PendingStore], members: &[usize]) -> Result<(), EmitError> {
        let first = &pending[members[0]];
        let (k, width, elem) = (members.len() as i64, first.width as i64, first.elem);
        let rows: Vec<String> = members.iter().map(|&i| pending[i].vector.clone()).collect();
        let (woven, wty) = self.interleave(rows, width, elem);
        let (m, mty) = &first.memref;
        let kty = format!("vector<{k}x{}>", mlir_elem(elem));
        for l in 0..width {
            let slice = self.fresh("run");
            self.line(&format!("{slice} = vector.extract_strided_slice {woven} {{offsets = [{}], sizes = [{k}], strides = [1]}} : {wty} to {kty}", l * k));
            let at: Vec<String> = first.idx.iter().map(|e| self.numerator(&lane_of(e, first.lane, l))).collect::<Result<_, _>>()?;
            self.line(&format!("vector.store {slice}, {m}[{}] : {mty}, {kty}", at.join(", ")));
        }
        Ok(())
    }

    /// `for e in box: dst[p + e] = src[o + stride·e]` (cooperative on GPUs: the
    /// block's threads take every `threads`-th element). A split copy walks
    /// its expanded box (`CopyOp`).
    fn copy(&mut self, op: Op, c: &CopyOp) -> Result<(), EmitError> {
        let f = self.f;
        let (src, dst) = (f.ops[op].operands[0], f.ops[op].operands[1]);
        let (sm, smty) = self.memref_of(src)?;
        let (dm, dmty) = self.memref_of(dst)?;
        let st = f.value_type(src).readable().ok_or_else(|| EmitError("copy from a non-buffer".into()))?;
        let so: Vec<AffineExpr<Value>> = c.src.iter().map(|e| f.expr_in_values(op, e)).collect();
        let d_o: Vec<AffineExpr<Value>> = c.dst.iter().map(|e| f.expr_in_values(op, e)).collect();
        let so_n: Vec<String> = so.iter().map(|e| self.numerator(e)).collect::<Result<_, _>>()?;
        let do_n: Vec<String> = d_o.iter().map(|e| self.numerator(e)).collect::<Result<_, _>>()?;
        let sizes = c.expanded_sizes();
        let total: u64 = sizes.iter().product();
        let (first, step) = match (&self.thread_linear, c.cooperative && self.gpu) {
            (Some((lin, n)), true) => (lin.clone(), *n as i64),
            _ => {
                let dt = f.value_type(dst).readable().ok_or_else(|| EmitError("copy to a non-buffer".into()))?;
                let Some(m) = merge_contiguous_dims(c, (&so, &st.shape), (&d_o, &dt.shape)).filter(|_| !self.gpu) else {
                    return self.copy_nested(c, (&sm, &smty, &st.shape, st.elem), (&dm, &dmty, &dt.shape), &so_n, &do_n);
                };
                let (sm, smty, so_n) = self.collapse(&sm, &smty, &m.src_groups, (&st.shape, st.elem), &so_n);
                let (dm, dmty, do_n) = self.collapse(&dm, &dmty, &m.dst_groups, (&dt.shape, dt.elem), &do_n);
                let (src_shape, dst_shape) = (collapsed_shape(&st.shape, &m.src_groups), collapsed_shape(&dt.shape, &m.dst_groups));
                return self.copy_nested(&m.copy, (&sm, &smty, &src_shape, st.elem), (&dm, &dmty, &dst_shape), &so_n, &do_n);
            }
        };
        let dt = f.value_type(dst).readable().ok_or_else(|| EmitError("copy to a non-buffer".into()))?;
        let width = cooperative_vector_width(c, (&st.shape, st.elem, &so, &smty), (&dt.shape, dt.elem, &d_o, &dmty));
        // Each thread takes every `step`-th element, or 16-byte vector.
        let mut units = sizes.clone();
        let last = units.len() - 1;
        units[last] /= width.unwrap_or(1);
        let (hi, st_c) = (self.constant_index((total / width.unwrap_or(1)) as i64), self.constant_index(step));
        let e = self.fresh("e");
        self.line(&format!("scf.for {e} = {first} to {hi} step {st_c} {{"));
        self.depth += 1;
        // Expanded box coordinates of unit e, innermost fastest.
        let mut coords = vec![String::new(); units.len()];
        let mut rem = e.clone();
        for d in (0..units.len()).rev() {
            let n = self.constant_index(units[d] as i64);
            let x = self.fresh("bx");
            self.line(&format!("{x} = arith.remui {rem}, {n} : index"));
            let q = self.fresh("bq");
            self.line(&format!("{q} = arith.divui {rem}, {n} : index"));
            coords[d] = x;
            rem = q;
        }
        if let Some(width) = width {
            let (w, x) = (self.constant_index(width as i64), self.fresh("bv"));
            self.line(&format!("{x} = arith.muli {}, {w} : index", coords[last]));
            coords[last] = x;
        }
        let (s_idx, d_idx) = self.copy_indices(c, &so_n, &do_n, &coords);
        match width {
            Some(width) => {
                let (vty, v) = (format!("vector<{width}x{}>", mlir_elem(st.elem)), self.fresh("cv"));
                self.line(&format!("{v} = vector.load {sm}[{}] {{alignment = 16}} : {smty}, {vty}", s_idx.join(", ")));
                self.line(&format!("vector.store {v}, {dm}[{}] {{alignment = 16}} : {dmty}, {vty}", d_idx.join(", ")));
            }
            None => {
                let v = self.padded_load_names(&sm, &smty, &st.shape, st.elem, &s_idx, c.pad)?;
                self.line(&format!("memref.store {v}, {dm}[{}] : {dmty}", d_idx.join(", ")));
            }
        }
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// `memref.collapse_shape` of memref `m` (of `shape`) into `groups`, and
    /// the collapsed origins: a group's is its first dimension's origin
    /// times the group's other extents (their origins are 0,
    /// [`merge_contiguous_dims`]).
    fn collapse(&mut self, m: &str, mty: &str, groups: &[Vec<usize>], (shape, elem): (&[u64], ElemType), origins: &[String]) -> (String, String, Vec<String>) {
        let (to, v) = (memref_type(&collapsed_shape(shape, groups), elem, ""), self.fresh("flat"));
        let assoc: Vec<String> = groups.iter().map(|g| format!("[{}]", g.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))).collect();
        self.line(&format!("{v} = memref.collapse_shape {m} [{}] : {mty} into {to}", assoc.join(", ")));
        let flat = groups
            .iter()
            .map(|g| {
                let inner: u64 = g[1..].iter().map(|&d| shape[d]).product();
                if inner == 1 {
                    return origins[g[0]].clone();
                }
                let (k, o) = (self.constant_index(inner as i64), self.fresh("o"));
                self.line(&format!("{o} = arith.muli {}, {k} : index", origins[g[0]]));
                o
            })
            .collect();
        (v, to, flat)
    }

    /// The source and destination indices of expanded box coordinates
    /// `coords` (per expanded box dimension, `CopyOp`): `o + stride·e` and
    /// `p_k + x_π(k)`, where `e` is the box point (`f·x_d + x_{d+1}` in a
    /// split dimension `d`).
    fn copy_indices(&mut self, c: &CopyOp, so_n: &[String], do_n: &[String], coords: &[String]) -> (Vec<String>, Vec<String>) {
        let mut s_idx = Vec::new();
        for d in 0..c.sizes.len() {
            let point = match c.split {
                Some(s) if s.dim == d => {
                    let (f, outer, x) = (self.constant_index(s.factor as i64), self.fresh("so"), self.fresh("sp"));
                    self.line(&format!("{outer} = arith.muli {}, {f} : index", coords[d]));
                    self.line(&format!("{x} = arith.addi {outer}, {} : index", coords[d + 1]));
                    x
                }
                Some(s) if d > s.dim => coords[d + 1].clone(),
                _ => coords[d].clone(),
            };
            let along = match c.stride_of(d) {
                1 => point,
                stride => {
                    let (g, x) = (self.constant_index(stride as i64), self.fresh("sx"));
                    self.line(&format!("{x} = arith.muli {point}, {g} : index"));
                    x
                }
            };
            let a = self.fresh("s");
            self.line(&format!("{a} = arith.addi {}, {along} : index", so_n[d]));
            s_idx.push(a);
        }
        let mut d_idx = Vec::new();
        for (k, p) in do_n.iter().enumerate() {
            let b = self.fresh("d");
            self.line(&format!("{b} = arith.addi {p}, {} : index", coords[c.box_dim(k)]));
            d_idx.push(b);
        }
        (s_idx, d_idx)
    }

    /// A vector of `width` zeros of `elem` (masked loads' pass-through).
    fn zero_vector(&mut self, elem: ElemType, width: i64) -> Result<String, EmitError> {
        let zero = self.scalar_constant(zero_literal(elem), elem);
        self.as_vector(Ev::Scalar(zero, elem), width as u64)
    }

    /// A copy by one thread: a loop per box dimension in the destination's
    /// order, the innermost over contiguous destination elements (so LLVM
    /// vectorises it like `memcpy`). Two kinds of strided CPU copy go a
    /// vector at a time instead (see [`CopyRun`]). A split copy loops over
    /// its expanded box, element by element, in the source's order where
    /// both innermost dimensions agree.
    fn copy_nested(&mut self, c: &CopyOp, src: (&str, &str, &[u64], ElemType), dst: (&str, &str, &[u64]), so_n: &[String], do_n: &[String]) -> Result<(), EmitError> {
        let (sm, smty, shape, elem) = src;
        let (dm, dmty, dst_shape) = dst;
        let n = c.sizes.len();
        let width = (64 / elem.size_bytes().max(1)).clamp(1, 16) as i64;
        // The source's rows: its last dimension longer than 1 (the ones
        // after it add nothing to the address, so a vector along the
        // memref's last dimension from there walks that dimension).
        let cols = (0..n).rev().find(|&d| shape.get(d).is_some_and(|&s| s > 1)).unwrap_or(n.saturating_sub(1));
        let sizes = c.expanded_sizes();
        let run = match n.checked_sub(1) {
            _ if c.split.is_some() => match (interleaved_run(c, cols, dst_shape, elem), word_transposed_run(c, shape, dst_shape, elem)) {
                _ if self.gpu => CopyRun::Elements,
                (Some((lanes, width)), _) => CopyRun::Interleaved { lanes, cols, width },
                (None, Some((lanes, words))) => CopyRun::WordTransposed { lanes, words },
                (None, None) => CopyRun::Elements,
            },
            Some(last) if !self.gpu && c.pad.is_none() && c.box_dim(last) == last && c.stride_of(last) == 2 => CopyRun::EvenElements,
            Some(last) if !self.gpu && c.pad.is_none() && c.box_dim(last) != cols && c.stride_of(cols) == 1 && c.sizes[cols] > 1 && width.count_ones() == 1 && width > 1 => {
                CopyRun::Transposed { rows: c.box_dim(last), cols }
            }
            _ => CopyRun::Elements,
        };
        // Box dimensions that step by whole vectors, innermost last, and
        // (expanded) box dimensions the run walks itself.
        let (blocked, walked): (Vec<usize>, Vec<usize>) = match run {
            CopyRun::Elements => (Vec::new(), Vec::new()),
            CopyRun::EvenElements => (vec![n - 1], Vec::new()),
            CopyRun::Transposed { rows, cols } => (vec![rows, cols], Vec::new()),
            CopyRun::Interleaved { lanes, .. } => (Vec::new(), c.split.map(|s| vec![lanes, s.dim + 1]).unwrap_or_default()),
            // The lanes, the split's inner part and the expanded dimensions
            // after it (the words).
            CopyRun::WordTransposed { lanes, .. } => (Vec::new(), c.split.map(|s| std::iter::once(lanes).chain(s.dim + 1..c.expanded_rank()).collect()).unwrap_or_default()),
        };
        let mut coords = vec![String::new(); sizes.len()];
        // A split copy whose innermost dimension is the source's too (B[k,
        // j] in panels, `[j / 16][k][16]`) loops in the source's order: it
        // reads whole rows and writes one line to each panel per row, where
        // the destination's order reads a line from each row down a
        // panel's column, a page apart in large operands. Measured on a
        // Zen 3 VM, GEMM 1024 with B packed per L2 tile (1024 x 48):
        // 26.8 against 29.1 ms; packed once per core tile, no change.
        let source_order = c.split.is_some() && sizes.len().checked_sub(1).is_some_and(|last| c.box_dim(last) == last);
        for k in 0..sizes.len() {
            let d = if source_order { k } else { c.box_dim(k) };
            if blocked.contains(&d) || walked.contains(&d) {
                continue;
            }
            let (lo, hi, one) = (self.constant_index(0), self.constant_index(sizes[d] as i64), self.constant_index(1));
            let i = self.fresh("cp");
            self.line(&format!("scf.for {i} = {lo} to {hi} step {one} {{"));
            self.depth += 1;
            coords[d] = i;
        }
        for &d in &blocked {
            let (lo, hi, w) = (self.constant_index(0), self.constant_index(c.sizes[d] as i64), self.constant_index(width));
            let i = self.fresh("cp");
            self.line(&format!("scf.for {i} = {lo} to {hi} step {w} {{"));
            self.depth += 1;
            coords[d] = i;
        }
        if let CopyRun::Interleaved { .. } = run {
            self.copy_interleaved(c, run, &mut coords, (sm, smty, shape, elem), (dm, dmty), so_n, do_n)?;
        } else if let CopyRun::WordTransposed { .. } = run {
            self.copy_words(c, run, &mut coords, (sm, smty, shape, elem), (dm, dmty), so_n, do_n)?;
        } else {
            self.copy_run(c, run, width, &coords, (sm, smty, shape, elem), (dm, dmty), so_n, do_n)?;
        }
        for _ in 0..sizes.len() - walked.len() {
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }

    /// The innermost run of a copy that is not [`CopyRun::Interleaved`], at box
    /// coordinates `coords`.
    #[allow(clippy::too_many_arguments)]
    fn copy_run(&mut self, c: &CopyOp, run: CopyRun, width: i64, coords: &[String], src: (&str, &str, &[u64], ElemType), dst: (&str, &str), so_n: &[String], do_n: &[String]) -> Result<(), EmitError> {
        let (sm, smty, shape, elem) = src;
        let (dm, dmty) = dst;
        let n = c.sizes.len();
        let (mut s_idx, d_idx) = self.copy_indices(c, so_n, do_n, coords);
        match run {
            CopyRun::Elements => {
                let v = self.padded_load_names(sm, smty, shape, elem, &s_idx, c.pad)?;
                self.line(&format!("memref.store {v}, {dm}[{}] : {dmty}", d_idx.join(", ")));
            }
            CopyRun::EvenElements => self.copy_pairs(c.sizes[n - 1] as i64, width, &coords[n - 1], (sm, smty, elem), (dm, dmty), &mut s_idx, &d_idx)?,
            CopyRun::Transposed { rows, cols } => self.copy_transposed(c, (rows, cols), width, coords, (sm, smty, elem), (dm, dmty), &s_idx, &d_idx)?,
            CopyRun::Interleaved { .. } | CopyRun::WordTransposed { .. } => unreachable!("these runs walk their own coordinates"),
        }
        Ok(())
    }

    /// An interleaved run ([`CopyRun::Interleaved`]) at box coordinates
    /// `coords` (all but `lanes` and the split's inner part set): along
    /// `lanes`, the box points whose source lies inside the tensor,
    /// `[inside, end)`, go `width` at a time, `f` masked loads (one per
    /// source row of the split) interleaved into one store of `f·width`;
    /// the points before and after (a halo, only with `pad`) get the pad
    /// value element by element. A source row outside the tensor in
    /// another dimension loads nothing (its mask is empty, its indices
    /// clamped to 0) and stores the pad value.
    #[allow(clippy::too_many_arguments)]
    fn copy_interleaved(&mut self, c: &CopyOp, run: CopyRun, coords: &mut [String], src: (&str, &str, &[u64], ElemType), dst: (&str, &str), so_n: &[String], do_n: &[String]) -> Result<(), EmitError> {
        let (sm, smty, shape, elem) = src;
        let (dm, dmty) = dst;
        let (CopyRun::Interleaved { lanes, cols, width }, Some(split)) = (run, c.split) else {
            return err("an interleaved copy without a split");
        };
        let (inner, f) = (split.dim + 1, split.factor as i64);
        let size = c.expanded_sizes()[lanes] as i64;
        let (zero, box_end) = (self.constant_index(0), self.constant_index(size));
        // [inside, end): the box points along `lanes` whose source index
        // `o + e` lies in [0, shape).
        let (inside, end) = match c.pad {
            None => (zero.clone(), box_end.clone()),
            Some(_) => {
                let o = &so_n[cols];
                let extent = self.constant_index(shape[cols] as i64);
                let (neg, lo, inside) = (self.fresh("neg"), self.fresh("lo"), self.fresh("inside"));
                self.line(&format!("{neg} = arith.subi {zero}, {o} : index"));
                self.line(&format!("{lo} = arith.maxsi {neg}, {zero} : index"));
                self.line(&format!("{inside} = arith.minsi {lo}, {box_end} : index"));
                let (room, hi, end) = (self.fresh("room"), self.fresh("hi"), self.fresh("end"));
                self.line(&format!("{room} = arith.subi {extent}, {o} : index"));
                self.line(&format!("{hi} = arith.minsi {room}, {box_end} : index"));
                self.line(&format!("{end} = arith.maxsi {hi}, {inside} : index"));
                (inside, end)
            }
        };
        if let Some(pad) = c.pad {
            for (from, to) in [(zero.clone(), inside.clone()), (end.clone(), box_end.clone())] {
                let (one, e) = (self.constant_index(1), self.fresh("halo"));
                self.line(&format!("scf.for {e} = {from} to {to} step {one} {{"));
                self.depth += 1;
                coords[lanes] = e;
                let value = self.scalar_constant(pad, elem);
                for k in 0..f {
                    coords[inner] = self.constant_index(k);
                    let (_, d_idx) = self.copy_indices(c, so_n, do_n, coords);
                    self.line(&format!("memref.store {value}, {dm}[{}] : {dmty}", d_idx.join(", ")));
                }
                self.depth -= 1;
                self.line("}");
            }
        }
        let (step, e) = (self.constant_index(width), self.fresh("run"));
        self.line(&format!("scf.for {e} = {inside} to {end} step {step} {{"));
        self.depth += 1;
        coords[lanes] = e.clone();
        let (left, count) = (self.fresh("left"), self.fresh("count"));
        self.line(&format!("{left} = arith.subi {end}, {e} : index"));
        self.line(&format!("{count} = arith.minsi {left}, {step} : index"));
        let (vty, mty) = (format!("vector<{width}x{}>", mlir_elem(elem)), mask_type(width as u64));
        let pad_value = self.scalar_constant(c.pad.unwrap_or(zero_literal(elem)), elem);
        let pass = self.as_vector(Ev::Scalar(pad_value, elem), width as u64)?;
        let mut rows = Vec::new();
        for k in 0..f {
            coords[inner] = self.constant_index(k);
            let (mut s_idx, _) = self.copy_indices(c, so_n, do_n, coords);
            let mut n = count.clone();
            if c.pad.is_some() {
                // The row's other indices: inside the tensor, or no lanes.
                let mut all: Option<String> = None;
                for (d, q) in s_idx.iter().enumerate().filter(|&(d, _)| d != cols) {
                    let hi = self.constant_index(shape[d] as i64);
                    let (ge, lt, both) = (self.fresh("ge"), self.fresh("lt"), self.fresh("and"));
                    self.line(&format!("{ge} = arith.cmpi sge, {q}, {zero} : index"));
                    self.line(&format!("{lt} = arith.cmpi slt, {q}, {hi} : index"));
                    self.line(&format!("{both} = arith.andi {ge}, {lt} : i1"));
                    all = Some(self.and(all, both, "i1"));
                }
                if let Some(valid) = all {
                    let m = self.fresh("n");
                    self.line(&format!("{m} = arith.select {valid}, {count}, {zero} : index"));
                    n = m;
                    for (_, q) in s_idx.iter_mut().enumerate().filter(|&(d, _)| d != cols) {
                        let at = self.fresh("at");
                        self.line(&format!("{at} = arith.select {valid}, {q}, {zero} : index"));
                        *q = at;
                    }
                }
            }
            let (mask, v) = (self.fresh("mask"), self.fresh("row"));
            self.line(&format!("{mask} = vector.create_mask {n} : {mty}"));
            self.line(&format!("{v} = vector.maskedload {sm}[{}], {mask}, {pass} : {smty}, {mty}, {vty} into {vty}", s_idx.join(", ")));
            rows.push(v);
        }
        let (v, out_ty) = self.interleave(rows, width, elem);
        coords[inner] = zero.clone();
        let (_, d_idx) = self.copy_indices(c, so_n, do_n, coords);
        let (fc, stored, mask) = (self.constant_index(f), self.fresh("stored"), self.fresh("mask"));
        self.line(&format!("{stored} = arith.muli {count}, {fc} : index"));
        self.line(&format!("{mask} = vector.create_mask {stored} : {}", mask_type((f * width) as u64)));
        self.line(&format!("vector.maskedstore {dm}[{}], {mask}, {v} : {dmty}, {}, {out_ty}", d_idx.join(", "), mask_type((f * width) as u64)));
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// A word-transposed run ([`CopyRun::WordTransposed`]) at box
    /// coordinates `coords` (all but the lanes, the split's inner part and
    /// the dimensions after it set).
    #[allow(clippy::too_many_arguments)]
    fn copy_words(&mut self, c: &CopyOp, run: CopyRun, coords: &mut [String], src: (&str, &str, &[u64], ElemType), dst: (&str, &str), so_n: &[String], do_n: &[String]) -> Result<(), EmitError> {
        let (sm, smty, shape, elem) = src;
        let (dm, dmty) = dst;
        let (CopyRun::WordTransposed { lanes, words }, Some(split)) = (run, c.split) else {
            return err("a word-transposed copy without a split");
        };
        let (n, f, words) = (c.sizes.len(), split.factor as i64, words as i64);
        // The source with the split dimension and those after it as one:
        // a lane's elements lie within `span` consecutive elements of it,
        // word `w`'s element `k` at `k·strides[split] + offset(w)`.
        let groups: Vec<Vec<usize>> = (0..split.dim).map(|d| vec![d]).chain(std::iter::once((split.dim..n).collect())).collect();
        let (flat, flat_ty, _) = self.collapse(sm, smty, &groups, (shape, elem), so_n);
        let strides: Vec<i64> = row_major_strides(shape).into_iter().map(|x| x as i64).collect();
        let span = 1 + (f - 1) * strides[split.dim] + (split.dim + 1..n).map(|d| (c.sizes[d] as i64 - 1) * strides[d]).sum::<i64>();
        // Word `w`'s point in the box dimensions after the split one
        // (row-major over their sizes), and its offset in a lane's run.
        let point = |w: i64| {
            let mut rest = w;
            let mut at: Vec<i64> = (split.dim + 1..n)
                .rev()
                .map(|d| {
                    let x = rest % c.sizes[d] as i64;
                    rest /= c.sizes[d] as i64;
                    x
                })
                .collect();
            at.reverse();
            at
        };
        let offset = |w: i64| point(w).iter().zip(&strides[split.dim + 1..]).map(|(x, s)| x * s).sum::<i64>();
        let per = 64 / elem.size_bytes() as i64;
        let (vty, mty, wty) = (format!("vector<{per}x{}>", mlir_elem(elem)), mask_type(per as u64), "vector<16xi32>".to_string());
        let size = c.expanded_sizes()[lanes] as i64;
        let (zero, sixteen, end, last) = (self.constant_index(0), self.constant_index(16), self.constant_index(size), self.constant_index(size - 1));
        let (run_len, fc) = (self.constant_index(span), self.constant_index(f));
        let pass = self.zero_vector(elem, per)?;
        let e = self.fresh("lanes");
        self.line(&format!("scf.for {e} = {zero} to {end} step {sixteen} {{"));
        self.depth += 1;
        let (left, count) = (self.fresh("left"), self.fresh("count"));
        self.line(&format!("{left} = arith.subi {end}, {e} : index"));
        self.line(&format!("{count} = arith.minsi {left}, {sixteen} : index"));
        // The split's inner part and the expanded dimensions after it (the
        // words' points) at 0: each lane's run starts there.
        for x in &mut coords[split.dim + 1..] {
            *x = zero.clone();
        }
        // Word w of a lane's run: its f elements, a split row apart.
        let order: Vec<String> = (0..per).map(|x| if x < f * words { (x % f) * strides[split.dim] + offset(x / f) } else { 0 }.to_string()).collect();
        let mut rows = Vec::new();
        for l in 0..16 {
            // Lanes past the box load nothing, from its last row.
            let at = self.plus(&e, l);
            let clamped = self.fresh("row");
            self.line(&format!("{clamped} = arith.minsi {at}, {last} : index"));
            coords[lanes] = clamped;
            let (s_idx, _) = self.copy_indices(c, so_n, do_n, coords);
            let mut idx = s_idx[..split.dim].to_vec();
            let mut start: Option<String> = None;
            for d in split.dim..n {
                let (k, x) = (self.constant_index(strides[d]), self.fresh("at"));
                self.line(&format!("{x} = arith.muli {}, {k} : index", s_idx[d]));
                start = Some(match start {
                    None => x,
                    Some(prev) => {
                        let sum = self.fresh("at");
                        self.line(&format!("{sum} = arith.addi {prev}, {x} : index"));
                        sum
                    }
                });
            }
            idx.push(start.ok_or_else(|| EmitError("a split copy without a split dimension".into()))?);
            let mask = self.lanes_if(l, &count, &run_len, &mty);
            let (v, w, b) = (self.fresh("run"), self.fresh("words"), self.fresh("wv"));
            self.line(&format!("{v} = vector.maskedload {flat}[{}], {mask}, {pass} : {flat_ty}, {mty}, {vty} into {vty}", idx.join(", ")));
            self.line(&format!("{w} = vector.shuffle {v}, {v} [{}] : {vty}, {vty}", order.join(", ")));
            self.line(&format!("{b} = vector.bitcast {w} : {vty} to {wty}"));
            rows.push(b);
        }
        let block = self.transpose_block(rows, &wty);
        coords[lanes] = e.clone();
        let stored = self.fresh("stored");
        self.line(&format!("{stored} = arith.muli {count}, {fc} : index"));
        let mask = self.fresh("mask");
        self.line(&format!("{mask} = vector.create_mask {stored} : {mty}"));
        for (w, word) in block.iter().take(words as usize).enumerate() {
            for (i, x) in point(w as i64).into_iter().enumerate() {
                coords[split.dim + 2 + i] = self.constant_index(x);
            }
            let (_, d_idx) = self.copy_indices(c, so_n, do_n, coords);
            let v = self.fresh("back");
            self.line(&format!("{v} = vector.bitcast {word} : {wty} to {vty}"));
            self.line(&format!("vector.maskedstore {dm}[{}], {mask}, {v} : {dmty}, {mty}, {vty}", d_idx.join(", ")));
        }
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// Interleaves `rows.len()` (a power of 2) vectors of `width` lanes:
    /// lane `l·f + k` of the result is lane `l` of row `k`. The rows are
    /// concatenated pairwise down to two, then one shuffle interleaves.
    fn interleave(&mut self, mut rows: Vec<String>, width: i64, elem: ElemType) -> (String, String) {
        let f = rows.len() as i64;
        let mut lanes = width;
        while rows.len() > 2 {
            let ty = format!("vector<{lanes}x{}>", mlir_elem(elem));
            let all: Vec<String> = (0..2 * lanes).map(|l| l.to_string()).collect();
            rows = rows
                .chunks(2)
                .map(|pair| {
                    let v = self.fresh("cat");
                    self.line(&format!("{v} = vector.shuffle {}, {} [{}] : {ty}, {ty}", pair[0], pair[1], all.join(", ")));
                    v
                })
                .collect();
            lanes *= 2;
        }
        let ty = format!("vector<{lanes}x{}>", mlir_elem(elem));
        // Row k's lane l sits at k·width + l of the two halves together.
        let order: Vec<String> = (0..f * width).map(|x| ((x % f) * width + x / f).to_string()).collect();
        let v = self.fresh("woven");
        self.line(&format!("{v} = vector.shuffle {}, {} [{}] : {ty}, {ty}", rows[0], rows[1], order.join(", ")));
        (v, format!("vector<{}x{}>", f * width, mlir_elem(elem)))
    }

    /// One block of a transposed copy ([`CopyRun::Transposed`]) at box
    /// coordinates `coords`: `width` rows of `width` source elements along
    /// box dimension `cols` (row `a` at box coordinate `rows` + a),
    /// transposed in registers, stored as `width` runs along the
    /// destination's innermost dimension. Masks cut the block at the box's
    /// edges.
    #[allow(clippy::too_many_arguments)]
    fn copy_transposed(&mut self, c: &CopyOp, (rows, cols): (usize, usize), width: i64, coords: &[String], src: (&str, &str, ElemType), dst: (&str, &str), s_idx: &[String], d_idx: &[String]) -> Result<(), EmitError> {
        let (sm, smty, elem) = src;
        let (dm, dmty) = dst;
        let left_rows = self.left(c.sizes[rows] as i64, &coords[rows]);
        let left_cols = self.left(c.sizes[cols] as i64, &coords[cols]);
        let (vty, mty) = (format!("vector<{width}x{}>", mlir_elem(elem)), mask_type(width as u64));
        let pass = self.zero_vector(elem, width)?;
        let mut block = Vec::new();
        for a in 0..width {
            let mask = self.lanes_if(a, &left_rows, &left_cols, &mty);
            let mut at = s_idx.to_vec();
            at[rows] = self.plus(&s_idx[rows], a);
            let v = self.fresh("row");
            self.line(&format!("{v} = vector.maskedload {sm}[{}], {mask}, {pass} : {smty}, {mty}, {vty} into {vty}", at.join(", ")));
            block.push(v);
        }
        let block = self.transpose_block(block, &vty);
        // Column b of the block is the destination's run at coordinate b
        // of the dimension the source's rows land in.
        let q = c.dst_dim(cols);
        for (b, v) in block.iter().enumerate() {
            let mask = self.lanes_if(b as i64, &left_cols, &left_rows, &mty);
            let mut at = d_idx.to_vec();
            at[q] = self.plus(&d_idx[q], b as i64);
            self.line(&format!("vector.maskedstore {dm}[{}], {mask}, {v} : {dmty}, {mty}, {vty}", at.join(", ")));
        }
        Ok(())
    }

    /// `size - at`: what remains of a run of `size` from `at`.
    fn left(&mut self, size: i64, at: &str) -> String {
        let (total, left) = (self.constant_index(size), self.fresh("left"));
        self.line(&format!("{left} = arith.subi {total}, {at} : index"));
        left
    }

    /// `base + k`, as an index.
    fn plus(&mut self, base: &str, k: i64) -> String {
        if k == 0 {
            return base.to_string();
        }
        let (c, x) = (self.constant_index(k), self.fresh("at"));
        self.line(&format!("{x} = arith.addi {base}, {c} : index"));
        x
    }

    /// The mask of a block's vector `k`: its first `lanes` lanes where
    /// `k < count`, none beyond.
    fn lanes_if(&mut self, k: i64, count: &str, lanes: &str, mty: &str) -> String {
        let (kc, zero) = (self.constant_index(k), self.constant_index(0));
        let (inside, n, mask) = (self.fresh("in"), self.fresh("n"), self.fresh("mask"));
        self.line(&format!("{inside} = arith.cmpi slt, {kc}, {count} : index"));
        self.line(&format!("{n} = arith.select {inside}, {lanes}, {zero} : index"));
        self.line(&format!("{mask} = vector.create_mask {n} : {mty}"));
        mask
    }

    /// Transposes a square block of vectors (`block[a][b]` becomes
    /// `out[b][a]`; the width a power of 2) with two-source shuffles: stage
    /// `k` swaps bit `k` of the row and column numbers between each pair of
    /// rows that differ in it, `log2(width)` stages of `width` shuffles
    /// (`vpermt2ps` on AVX-512).
    fn transpose_block(&mut self, mut block: Vec<String>, vty: &str) -> Vec<String> {
        let width = block.len() as i64;
        let mut bit = 1;
        while bit < width {
            for a in 0..width {
                if a & bit != 0 {
                    continue;
                }
                let (x, y) = (block[a as usize].clone(), block[(a | bit) as usize].clone());
                // Row a keeps x's lanes whose bit is clear and takes y's
                // from `bit` lanes lower; row a | bit the other way round.
                let low: Vec<String> = (0..width).map(|b| if b & bit == 0 { b } else { width + b - bit }.to_string()).collect();
                let high: Vec<String> = (0..width).map(|b| if b & bit == 0 { b + bit } else { width + b }.to_string()).collect();
                let (l, h) = (self.fresh("tl"), self.fresh("th"));
                self.line(&format!("{l} = vector.shuffle {x}, {y} [{}] : {vty}, {vty}", low.join(", ")));
                self.line(&format!("{h} = vector.shuffle {x}, {y} [{}] : {vty}, {vty}", high.join(", ")));
                block[a as usize] = l;
                block[(a | bit) as usize] = h;
            }
            bit <<= 1;
        }
        block
    }

    /// One step of a stride-2 copy's innermost run of `size` elements, at
    /// box coordinate `at`: the next `width` destination elements are the
    /// even elements of the `2·width` source elements from `s_idx`, loaded
    /// as two vectors and shuffled together. Masks keep the loads within
    /// the run's source span and the store within the run.
    #[allow(clippy::too_many_arguments)]
    fn copy_pairs(&mut self, size: i64, width: i64, at: &str, src: (&str, &str, ElemType), dst: (&str, &str), s_idx: &mut [String], d_idx: &[String]) -> Result<(), EmitError> {
        let (sm, smty, elem) = src;
        let (dm, dmty) = dst;
        let last = s_idx.len() - 1;
        let (vty, mty) = (format!("vector<{width}x{}>", mlir_elem(elem)), mask_type(width as u64));
        let pass = self.zero_vector(elem, width)?;
        // `left` destination elements remain; they span `2·left - 1` source elements.
        let left = self.left(size, at);
        let (two, one, w) = (self.constant_index(2), self.constant_index(1), self.constant_index(width));
        let (twice, span) = (self.fresh("twice"), self.fresh("span"));
        self.line(&format!("{twice} = arith.muli {left}, {two} : index"));
        self.line(&format!("{span} = arith.subi {twice}, {one} : index"));
        let mut halves = Vec::new();
        for half in 0..2 {
            let reach = if half == 0 {
                span.clone()
            } else {
                let r = self.fresh("span");
                self.line(&format!("{r} = arith.subi {span}, {w} : index"));
                let next = self.fresh("s");
                self.line(&format!("{next} = arith.addi {}, {w} : index", s_idx[last]));
                s_idx[last] = next;
                r
            };
            let (mask, v) = (self.fresh("mask"), self.fresh("vl"));
            self.line(&format!("{mask} = vector.create_mask {reach} : {mty}"));
            self.line(&format!("{v} = vector.maskedload {sm}[{}], {mask}, {pass} : {smty}, {mty}, {vty} into {vty}", s_idx.join(", ")));
            halves.push(v);
        }
        let evens: Vec<String> = (0..width).map(|l| (2 * l).to_string()).collect();
        let v = self.fresh("even");
        self.line(&format!("{v} = vector.shuffle {}, {} [{}] : {vty}, {vty}", halves[0], halves[1], evens.join(", ")));
        let mask = self.fresh("mask");
        self.line(&format!("{mask} = vector.create_mask {left} : {mty}"));
        self.line(&format!("vector.maskedstore {dm}[{}], {mask}, {v} : {dmty}, {mty}, {vty}", d_idx.join(", ")));
        Ok(())
    }

    /// A load at already-emitted indices, with bounds checks if `pad`.
    fn padded_load_names(&mut self, m: &str, mty: &str, shape: &[u64], elem: ElemType, idx: &[String], pad: Option<Literal>) -> Result<String, EmitError> {
        let Some(pad) = pad else {
            let v = self.fresh("ld");
            self.line(&format!("{v} = memref.load {m}[{}] : {mty}", idx.join(", ")));
            return Ok(v);
        };
        let mut all: Option<String> = None;
        for (q, &dim) in idx.iter().zip(shape) {
            let zero = self.constant_index(0);
            let hi = self.constant_index(dim as i64);
            let (ge, lt, both) = (self.fresh("ge"), self.fresh("lt"), self.fresh("and"));
            self.line(&format!("{ge} = arith.cmpi sge, {q}, {zero} : index"));
            self.line(&format!("{lt} = arith.cmpi slt, {q}, {hi} : index"));
            self.line(&format!("{both} = arith.andi {ge}, {lt} : i1"));
            all = Some(self.and(all, both, "i1"));
        }
        let Some(cond) = all else {
            // Rank 0: always in bounds.
            let v = self.fresh("ld");
            self.line(&format!("{v} = memref.load {m}[] : {mty}"));
            return Ok(v);
        };
        Ok(self.load_or_pad(&cond, m, mty, idx, pad, elem))
    }

    fn fill(&mut self, op: Op, lit: Literal) -> Result<(), EmitError> {
        let buf = self.f.ops[op].operands[0];
        let (m, mty) = self.memref_of(buf)?;
        let b = self.f.value_type(buf).as_buffer().ok_or_else(|| EmitError("fill of a non-buffer".into()))?.clone();
        let c = self.scalar_constant(lit, b.elem);
        let mut ivs = Vec::new();
        for &d in &b.shape {
            let (lo, hi, one) = (self.constant_index(0), self.constant_index(d as i64), self.constant_index(1));
            let i = self.fresh("f");
            self.line(&format!("scf.for {i} = {lo} to {hi} step {one} {{"));
            self.depth += 1;
            ivs.push(i);
        }
        self.line(&format!("memref.store {c}, {m}[{}] : {mty}", ivs.join(", ")));
        for _ in &b.shape {
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }

    fn guard(&mut self, op: Op, g: &Guard) -> Result<(), EmitError> {
        let f = self.f;
        let mut all: Option<String> = None;
        // Lane conditions narrow the enclosing guard's mask.
        let mut mask = self.mask.clone();
        for (e, bound) in &g.conds {
            let e = f.expr_in_values(op, e);
            let split = self.split_lanes(&e);
            if let (Some(lanes), true) = (self.lanes, split.lane != 0) {
                // `base + lane < bound` holds for the lanes below `bound - base`.
                let n = self.numerator(&split.uniform)?;
                let b = self.constant_index(*bound);
                let left = self.fresh("left");
                self.line(&format!("{left} = arith.subi {b}, {n} : index"));
                let m = self.fresh("mask");
                let mty = mask_type(lanes.width);
                self.line(&format!("{m} = vector.create_mask {left} : {mty}"));
                mask = Some(self.and(mask, m, &mty));
                if lanes.skip_empty {
                    // No lane holds when the first does not (the lanes'
                    // points only grow): skip the body then. On a spatial
                    // axis a lane past the extent feeds only its own
                    // points, which are never stored, so nothing is lost;
                    // and a partial tile of several vectors (49 points on
                    // 16-point tiles) no longer computes a vector with no
                    // lane in it, which LLVM cannot drop (`acc + w * 0` is
                    // not `acc`).
                    let first = self.fresh("g");
                    self.line(&format!("{first} = arith.cmpi slt, {n}, {b} : index"));
                    all = Some(self.and(all, first, "i1"));
                }
                continue;
            }
            let n = self.numerator(&e)?;
            let b = self.constant_index(*bound);
            let c = self.fresh("g");
            self.line(&format!("{c} = arith.cmpi slt, {n}, {b} : index"));
            all = Some(self.and(all, c, "i1"));
        }
        let outer_mask = std::mem::replace(&mut self.mask, mask);
        let result = match all {
            None => self.region(f.ops[op].regions[0]),
            Some(cond) => {
                self.line(&format!("scf.if {cond} {{"));
                self.depth += 1;
                let r = self.region(f.ops[op].regions[0]);
                self.depth -= 1;
                self.line("}");
                r
            }
        };
        self.mask = outer_mask;
        result
    }

    /// `prev && next` (just `next` without `prev`), of type `ty` (`i1` or a
    /// lane mask).
    fn and(&mut self, prev: Option<String>, next: String, ty: &str) -> String {
        let Some(prev) = prev else { return next };
        let a = self.fresh("and");
        self.line(&format!("{a} = arith.andi {prev}, {next} : {ty}"));
        a
    }

    /// The lane mask a load or store of `buffer` at `idx` needs: the
    /// guard's mask, unless the buffer is local and every index is in
    /// bounds over the loops' whole ranges, guards aside (accumulators and
    /// packed copies cover whole tiles). Those stay unmasked, so LLVM keeps
    /// accumulators in registers.
    fn mask_for(&self, buffer: Value, idx: &[AffineExpr<Value>]) -> Option<String> {
        let f = self.f;
        let mask = self.mask.clone()?;
        let Type::Buffer(b) = f.value_type(buffer) else { return Some(mask) };
        if b.scope != MemScope::Local {
            return Some(mask);
        }
        let in_bounds = idx.iter().zip(&b.shape).all(|(e, &dim)| {
            let range = e.numerator_range(|v| (0, f.loop_extent(v).map_or(i64::MAX, |x| x.saturating_sub(1).min(i64::MAX as u64) as i64)));
            matches!(range, Some((lo, hi)) if lo >= 0 && hi.div_euclid(e.divisor().max(1)) < dim as i64)
        });
        (!in_bounds).then_some(mask)
    }

    // ---------------------------------------------------------------
    // Scalars and vectors.

    fn scalar_constant(&mut self, lit: Literal, ty: ElemType) -> String {
        let n = self.fresh("k");
        let text = match (lit, ty.is_int()) {
            // A u8 is written as the i8 with its bits (200 as -56).
            (Literal::Int(i), true) => signless_bits(ty, i).to_string(),
            (Literal::Float(x), true) => signless_bits(ty, x as i64).to_string(),
            (l, false) => float_literal(l.as_f64(), ty),
        };
        self.line(&format!("{n} = arith.constant {text} : {}", mlir_elem(ty)));
        n
    }

    fn vty(&self, elem: ElemType) -> String {
        match self.lanes {
            Some(l) => format!("vector<{}x{}>", l.width, mlir_elem(elem)),
            None => mlir_elem(elem).to_string(),
        }
    }

    /// A value as a vector (broadcasting scalars).
    fn as_vector(&mut self, v: Ev, width: u64) -> Result<String, EmitError> {
        match v {
            Ev::Vector(n, _) => Ok(n),
            Ev::Scalar(n, t) => {
                let b = self.fresh("bc");
                self.line(&format!("{b} = vector.broadcast {n} : {} to vector<{width}x{}>", mlir_elem(t), mlir_elem(t)));
                Ok(b)
            }
            other => err(format!("cannot broadcast {other:?}")),
        }
    }

    /// Brings operands to one shape: all scalars stay scalars; otherwise
    /// everything becomes a vector. Returns the names and the result kind.
    fn align(&mut self, xs: Vec<Ev>) -> Result<(Vec<String>, bool), EmitError> {
        let any_vector = xs.iter().any(|x| matches!(x, Ev::Vector(..)));
        if !any_vector {
            return Ok((xs.iter().map(|x| x.name().to_string()).collect(), false));
        }
        let width = self.lanes.map(|l| l.width).ok_or_else(|| EmitError("vector outside a vector loop".into()))?;
        let names = xs.into_iter().map(|x| self.as_vector(x, width)).collect::<Result<_, _>>()?;
        Ok((names, true))
    }

    fn result(&self, name: String, ty: ElemType, vector: bool) -> Ev {
        if vector { Ev::Vector(name, ty) } else { Ev::Scalar(name, ty) }
    }

    /// The MLIR type of a value of element type `ty` (scalar or vector).
    fn ty_of(&self, ty: ElemType, vector: bool) -> String {
        if vector { self.vty(ty) } else { mlir_elem(ty).to_string() }
    }

    fn binary(&mut self, op: BinaryOp, ty: ElemType, x: Ev, y: Ev) -> Result<Ev, EmitError> {
        let (names, vector) = self.align(vec![x, y])?;
        let t = self.ty_of(ty, vector);
        let float = ty.is_float();
        let (mnemonic, flags) = match (op, float) {
            (BinaryOp::Add, true) => ("arith.addf", " fastmath<contract>"),
            (BinaryOp::Sub, true) => ("arith.subf", " fastmath<contract>"),
            (BinaryOp::Mul, true) => ("arith.mulf", " fastmath<contract>"),
            (BinaryOp::Div, true) => ("arith.divf", ""),
            // NaN propagates (the dialect's rule) but the sign of a zero
            // result is unspecified, as in the interpreter: without `nsz`
            // LLVM orders -0 below +0 with two blends per lane group.
            (BinaryOp::Max, true) => ("arith.maximumf", " fastmath<nsz>"),
            (BinaryOp::Min, true) => ("arith.minimumf", " fastmath<nsz>"),
            (BinaryOp::Add, false) => ("arith.addi", ""),
            (BinaryOp::Sub, false) => ("arith.subi", ""),
            (BinaryOp::Mul, false) => ("arith.muli", ""),
            (BinaryOp::Max, false) if ty.is_signed_int() => ("arith.maxsi", ""),
            (BinaryOp::Min, false) if ty.is_signed_int() => ("arith.minsi", ""),
            (BinaryOp::Max, false) => ("arith.maxui", ""),
            (BinaryOp::Min, false) => ("arith.minui", ""),
            (BinaryOp::Div, false) => return err("integer division is not in the dialect"),
        };
        let n = self.fresh("v");
        self.line(&format!("{n} = {mnemonic} {}, {}{flags} : {t}", names[0], names[1]));
        Ok(self.result(n, ty, vector))
    }

    fn zero_like(&mut self, ty: ElemType, vector: bool) -> Result<String, EmitError> {
        let z = self.scalar_constant(zero_literal(ty), ty);
        if vector {
            let w = self.lanes.map(|l| l.width).unwrap_or(1);
            self.as_vector(Ev::Scalar(z, ty), w)
        } else {
            Ok(z)
        }
    }

    fn unary(&mut self, op: UnaryOp, ty: ElemType, x: Ev) -> Result<Ev, EmitError> {
        let vector = matches!(x, Ev::Vector(..));
        let t = self.ty_of(ty, vector);
        let xn = x.name().to_string();
        let n = self.fresh("u");
        match (op, ty.is_float()) {
            (UnaryOp::Neg, true) => self.line(&format!("{n} = arith.negf {xn} : {t}")),
            (UnaryOp::Neg, false) => {
                let z = self.zero_like(ty, vector)?;
                self.line(&format!("{n} = arith.subi {z}, {xn} : {t}"));
            }
            (UnaryOp::Abs, true) if ty == ElemType::F32 => self.line(&format!("{n} = math.absf {xn} : {t}")),
            (UnaryOp::Abs, true) => {
                // f16/bf16: clear the sign bit. LLVM lowers `fabs` of a bf16
                // vector lane by lane on x86 (scalar `and`s and 16-bit moves).
                let it = match self.lanes.filter(|_| vector) {
                    Some(l) => format!("vector<{}xi16>", l.width),
                    None => "i16".to_string(),
                };
                let (bits, mask, cleared) = (self.fresh("b"), self.fresh("b"), self.fresh("b"));
                self.line(&format!("{bits} = arith.bitcast {xn} : {t} to {it}"));
                let magnitude = if vector { "dense<32767>" } else { "32767" };
                self.line(&format!("{mask} = arith.constant {magnitude} : {it}"));
                self.line(&format!("{cleared} = arith.andi {bits}, {mask} : {it}"));
                self.line(&format!("{n} = arith.bitcast {cleared} : {it} to {t}"));
            }
            // An unsigned value is its own absolute value and its own max
            // with 0 (`scalar::int_unary`).
            (UnaryOp::Abs | UnaryOp::Relu, false) if !ty.is_signed_int() => return Ok(x),
            (UnaryOp::Abs, false) => self.line(&format!("{n} = math.absi {xn} : {t}")),
            (UnaryOp::Relu, float) => {
                let z = self.zero_like(ty, vector)?;
                let m = if float { "arith.maximumf" } else { "arith.maxsi" };
                self.line(&format!("{n} = {m} {xn}, {z} : {t}"));
            }
            (_, false) => return err(format!("`{}` on integers", op.mnemonic())),
            (op, true) => {
                // Transcendentals of f16/bf16 are computed in f32 and rounded.
                let narrow = ty != ElemType::F32;
                let wt = self.ty_of(ElemType::F32, vector);
                let arg = if narrow {
                    let w = self.fresh("w");
                    self.line(&format!("{w} = arith.extf {xn} : {t} to {wt}"));
                    w
                } else {
                    xn.clone()
                };
                let r = self.transcendental(op, &arg, &wt, vector)?;
                if narrow {
                    self.line(&format!("{n} = arith.truncf {r} : {wt} to {t}"));
                } else {
                    return Ok(self.result(r, ty, vector));
                }
            }
        }
        Ok(self.result(n, ty, vector))
    }

    /// `op(arg)` in f32 (`wt` is f32 or a vector of it); returns its name.
    fn transcendental(&mut self, op: UnaryOp, arg: &str, wt: &str, vector: bool) -> Result<String, EmitError> {
        let r = self.fresh("m");
        let math = match op {
            UnaryOp::Exp => "math.exp",
            UnaryOp::Log => {
                // MLIR's approximation (`tilec-math-approximation`) takes
                // subnormal arguments for the smallest normal number, so
                // those are scaled by 2^24 first: log(x) = log(x·2^24) - 24·ln 2.
                let width = self.lanes.map(|l| l.width).unwrap_or(1);
                let constant = |this: &mut Self, x: f64| -> Result<String, EmitError> {
                    let c = this.scalar_constant(Literal::Float(x), ElemType::F32);
                    if vector { this.as_vector(Ev::Scalar(c, ElemType::F32), width) } else { Ok(c) }
                };
                let smallest_normal = constant(self, f32::MIN_POSITIVE as f64)?;
                let scale = constant(self, 16777216.0)?;
                let shift = constant(self, 24.0 * std::f64::consts::LN_2)?;
                let zero = constant(self, 0.0)?;
                let bool_t = if vector { mask_type(width) } else { "i1".into() };
                let (small, scaled, x, log, offset) = (self.fresh("l"), self.fresh("l"), self.fresh("l"), self.fresh("l"), self.fresh("l"));
                self.line(&format!("{small} = arith.cmpf olt, {arg}, {smallest_normal} : {wt}"));
                self.line(&format!("{scaled} = arith.mulf {arg}, {scale} : {wt}"));
                self.line(&format!("{x} = arith.select {small}, {scaled}, {arg} : {bool_t}, {wt}"));
                self.line(&format!("{log} = math.log {x} : {wt}"));
                self.line(&format!("{offset} = arith.select {small}, {shift}, {zero} : {bool_t}, {wt}"));
                self.line(&format!("{r} = arith.subf {log}, {offset} : {wt}"));
                return Ok(r);
            }
            UnaryOp::Sqrt => "math.sqrt",
            UnaryOp::Rsqrt => "math.rsqrt",
            UnaryOp::Tanh => "math.tanh",
            UnaryOp::Erf => "math.erf",
            UnaryOp::Sigmoid => {
                // 1 / (1 + exp(-x))
                let (ng, ex, den) = (self.fresh("s"), self.fresh("s"), self.fresh("s"));
                self.line(&format!("{ng} = arith.negf {arg} : {wt}"));
                self.line(&format!("{ex} = math.exp {ng} : {wt}"));
                let one = self.scalar_constant(Literal::Float(1.0), ElemType::F32);
                let one = if vector { self.as_vector(Ev::Scalar(one, ElemType::F32), self.lanes.map(|l| l.width).unwrap_or(1))? } else { one };
                self.line(&format!("{den} = arith.addf {ex}, {one} : {wt}"));
                self.line(&format!("{r} = arith.divf {one}, {den} : {wt}"));
                return Ok(r);
            }
            other => return err(format!("`{}` is not a transcendental", other.mnemonic())),
        };
        self.line(&format!("{r} = {math} {arg} : {wt}"));
        Ok(r)
    }

    fn cast(&mut self, x: Ev, from: ElemType, to: ElemType) -> Result<Ev, EmitError> {
        let vector = matches!(x, Ev::Vector(..));
        let (ft, tt) = (self.ty_of(from, vector), self.ty_of(to, vector));
        let xn = x.name().to_string();
        if from == to {
            return Ok(x);
        }
        let n = self.fresh("cv");
        match (from.is_float(), to.is_float()) {
            (true, true) => {
                let wider = |a: ElemType, b: ElemType| a.size_bytes() < b.size_bytes();
                if wider(from, to) {
                    self.line(&format!("{n} = arith.extf {xn} : {ft} to {tt}"));
                } else if wider(to, from) {
                    self.line(&format!("{n} = arith.truncf {xn} : {ft} to {tt}"));
                } else {
                    // f16 <-> bf16 through f32 (exact widening, one rounding).
                    let w = self.fresh("w");
                    let wt = self.ty_of(ElemType::F32, vector);
                    self.line(&format!("{w} = arith.extf {xn} : {ft} to {wt}"));
                    self.line(&format!("{n} = arith.truncf {w} : {wt} to {tt}"));
                }
            }
            (false, true) => {
                let convert = if from.is_signed_int() { "arith.sitofp" } else { "arith.uitofp" };
                self.line(&format!("{n} = {convert} {xn} : {ft} to {tt}"));
            }
            (false, false) => {
                if from.size_bytes() < to.size_bytes() {
                    // The value is kept: u8 zero-extends, i8 sign-extends.
                    let extend = if from.is_signed_int() { "arith.extsi" } else { "arith.extui" };
                    self.line(&format!("{n} = {extend} {xn} : {ft} to {tt}"));
                } else if from.size_bytes() > to.size_bytes() {
                    self.line(&format!("{n} = arith.trunci {xn} : {ft} to {tt}"));
                } else {
                    // i8 <-> u8: the same bits, read the other way.
                    return Ok(self.result(xn, to, vector));
                }
            }
            (true, false) => {
                // Saturate, and map NaN to 0, as the dialect's cast does.
                // The clamp keeps `fptosi` (`fptoui` for u8, whose 128..=255
                // `fptosi` to i8 would make poison) in range, except at the top: the
                // i32 maximum rounds up to 2^31 in f32, whose conversion
                // is poison (inf became 0; found by tilec-fuzz). Values at
                // or above max + 1 (exact in every float type, or inf)
                // select the maximum instead.
                let (lo, hi) = to.int_range().expect("integer type");
                let lo_c = self.scalar_constant(Literal::Float(lo as f64), from);
                let hi_c = self.scalar_constant(Literal::Float(hi as f64), from);
                let over_c = self.scalar_constant(Literal::Float(hi as f64 + 1.0), from);
                let max_c = self.scalar_constant(Literal::Int(hi), to);
                let (lo_v, hi_v, over_v, max_v) = if vector {
                    let w = self.lanes.map(|l| l.width).unwrap_or(1);
                    (
                        self.as_vector(Ev::Scalar(lo_c, from), w)?,
                        self.as_vector(Ev::Scalar(hi_c, from), w)?,
                        self.as_vector(Ev::Scalar(over_c, from), w)?,
                        self.as_vector(Ev::Scalar(max_c, to), w)?,
                    )
                } else {
                    (lo_c, hi_c, over_c, max_c)
                };
                let (a, b, nan, z, i) = (self.fresh("c"), self.fresh("c"), self.fresh("c"), self.fresh("c"), self.fresh("c"));
                let (over, top) = (self.fresh("c"), self.fresh("c"));
                self.line(&format!("{a} = arith.maxnumf {xn}, {lo_v} : {ft}"));
                self.line(&format!("{b} = arith.minnumf {a}, {hi_v} : {ft}"));
                let convert = if to.is_signed_int() { "arith.fptosi" } else { "arith.fptoui" };
                self.line(&format!("{i} = {convert} {b} : {ft} to {tt}"));
                let bool_t = if vector { mask_type(self.lanes.map(|l| l.width).unwrap_or(1)) } else { "i1".into() };
                self.line(&format!("{over} = arith.cmpf oge, {xn}, {over_v} : {ft}"));
                self.line(&format!("{top} = arith.select {over}, {max_v}, {i} : {bool_t}, {tt}"));
                self.line(&format!("{nan} = arith.cmpf uno, {xn}, {xn} : {ft}"));
                let zero = self.zero_like(to, vector)?;
                self.line(&format!("{z} = arith.select {nan}, {zero}, {top} : {bool_t}, {tt}"));
                return Ok(self.result(z, to, vector));
            }
        }
        Ok(self.result(n, to, vector))
    }

    /// An index expression as a scalar (or, if it varies with the lane, a
    /// vector) of element type `ty`.
    fn index_value(&mut self, e: &AffineExpr<Value>, ty: ElemType) -> Result<Ev, EmitError> {
        let s = self.split_lanes(e);
        let base = self.numerator(&s.uniform)?;
        let as_elem = |this: &mut Self, idx: &str, vector: bool| -> String {
            let it = if vector { format!("vector<{}xindex>", this.lanes.map(|l| l.width).unwrap_or(1)) } else { "index".into() };
            let i64t = if vector { format!("vector<{}xi64>", this.lanes.map(|l| l.width).unwrap_or(1)) } else { "i64".into() };
            let i = this.fresh("ic");
            this.line(&format!("{i} = arith.index_cast {idx} : {it} to {i64t}"));
            let out = this.fresh("iv");
            let tt = this.ty_of(ty, vector);
            if ty.is_float() {
                this.line(&format!("{out} = arith.sitofp {i} : {i64t} to {tt}"));
            } else {
                this.line(&format!("{out} = arith.trunci {i} : {i64t} to {tt}"));
            }
            out
        };
        if s.lane == 0 {
            let v = as_elem(self, &base, false);
            return Ok(Ev::Scalar(v, ty));
        }
        let w = self.lanes.map(|l| l.width).unwrap_or(1);
        let steps: Vec<String> = (0..w as i64).map(|l| (l * s.lane).to_string()).collect();
        let (c, b, sum) = (self.fresh("lv"), self.fresh("lb"), self.fresh("ls"));
        self.line(&format!("{c} = arith.constant dense<[{}]> : vector<{w}xindex>", steps.join(", ")));
        self.line(&format!("{b} = vector.broadcast {base} : index to vector<{w}xindex>"));
        self.line(&format!("{sum} = arith.addi {b}, {c} : vector<{w}xindex>"));
        let v = as_elem(self, &sum, true);
        Ok(Ev::Vector(v, ty))
    }
}

/// Are an intrinsic operand's elements at `point(l, q)` (`l < lanes`, `q <
/// k`) one run of memory, element `l·k + q` at offset `l·k + q` from the
/// origin, with no padding? The buffer is row-major, so this holds
/// whichever dimensions the steps move along: a lanes operand packed as
/// `[K/k][M][k]` moves `m` along its middle dimension and `k` along its
/// last, and is one run all the same. (The verifier keeps the whole tile in
/// bounds, so the run stays within the buffer.)
fn is_run(t: &TileOperand, parts: &[Vec<u64>; 3], shape: &[u64], lanes: u64, k: u64, point: &dyn Fn(i64, i64) -> [i64; 3]) -> bool {
    let mut strides = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].saturating_mul(shape[d + 1] as i64);
    }
    let linear = |p: [i64; 3]| (0..t.indices.len()).map(|d| t.offset(parts, d, p).saturating_mul(strides.get(d).copied().unwrap_or(0))).fold(0i64, i64::saturating_add);
    t.pad.is_none()
        && t.indices.len() == shape.len()
        && t.indices.iter().all(|e| e.divisor() == 1)
        && (0..lanes as i64).all(|l| (0..k as i64).all(|q| linear(point(l, q)) == l * k as i64 + q))
}

/// `e + offset` (an origin moved to another point of an intrinsic's tile;
/// the verifier keeps the steps out of divisions).
fn shifted(e: &AffineExpr<Value>, offset: i64) -> Result<AffineExpr<Value>, EmitError> {
    if offset == 0 {
        return Ok(e.clone());
    }
    if e.divisor() != 1 {
        return err("an intrinsic's operand steps inside a division");
    }
    e.checked_add(&AffineExpr::constant(offset)).map_err(|_| EmitError("an intrinsic's operand index overflows".into()))
}

fn loop_of(f: &Function, op: Op) -> &ForLoop {
    match &f.ops[op].kind {
        OpKind::For(l) => l,
        _ => unreachable!("a loop"),
    }
}

fn induction(f: &Function, op: Op) -> Value {
    f.regions[f.ops[op].regions[0]].args[0]
}

/// Loop `op` and the parallel loops directly nested in it, if `op` is a
/// parallel loop; else nothing.
fn parallel_nest(f: &Function, op: Op) -> Vec<Op> {
    let mut nest = Vec::new();
    let mut cur = op;
    loop {
        match &f.ops[cur].kind {
            OpKind::For(l) if l.mapping == Mapping::Parallel => nest.push(cur),
            _ => return nest,
        }
        match f.regions[f.ops[cur].regions[0]].ops.as_slice() {
            [only] => cur = *only,
            _ => return nest,
        }
    }
}
