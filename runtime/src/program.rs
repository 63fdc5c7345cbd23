//! Running compiled CPU kernels: a shared library loaded with
//! `libloading`, global buffers allocated here, kernels called in order,
//! each kernel's parallel range shared out over the kernel threads
//! (`pool`).

use crate::KernelAbi;
use crate::pool::{CallerPin, Job, run_job};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use tilec::interp::{Limits, MemoryBudget, MemoryError, Tensor, TensorData};
use tilec::ir::*;

/// A tile function compiled for this machine.
pub struct CpuProgram {
    /// Keeps the shared library loaded while `kernels` point into it.
    _lib: libloading::Library,
    path: PathBuf,
    kernels: Vec<(KernelAbi, *const ())>,
    plan: HostPlan,
    /// Where the function's global buffers live in the run's one arena.
    arena: ArenaPlan,
    /// The tile function's names of its buffers (by value number), for
    /// messages; `#N` where there is none.
    names: HashMap<u32, String>,
}

// SAFETY: the kernel pointers point into the loaded library, which lives
// as long as the program; kernels are pure functions of their buffers.
unsafe impl Send for CpuProgram {}
unsafe impl Sync for CpuProgram {}

/// The result of one run: the function's results and the wall time of its
/// kernels (handing their parts to the kernel threads and waiting for them
/// included; starting threads not, since they persist (`pool`); buffer
/// set-up not).
pub struct CpuRun {
    pub results: Vec<Tensor>,
    /// The kernels' wall time, prepack kernels not counted.
    pub kernel_seconds: f64,
    /// Each kernel's wall time, in run order, prepack kernels left out
    /// (`tilec-run --profile`); they add up to `kernel_seconds`, less the
    /// loop between calls.
    pub each_kernel_seconds: Vec<f64>,
    /// The wall time of the prepack kernels, which lay out weights before
    /// the others run (a deployment runs them once per set of weights);
    /// `None` where there are none.
    pub prepack_seconds: Option<f64>,
}

/// Why a run of compiled code failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuRunError {
    /// Memory for an input's copy, a buffer, the kernels' stacks or a
    /// result is more than the limit allows, or the system refused it.
    Memory(MemoryError),
    Failed(String),
}

impl fmt::Display for CpuRunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuRunError::Memory(e) => e.fmt(f),
            CpuRunError::Failed(why) => f.write_str(why),
        }
    }
}

impl From<MemoryError> for CpuRunError {
    fn from(e: MemoryError) -> Self {
        CpuRunError::Memory(e)
    }
}

impl From<String> for CpuRunError {
    fn from(why: String) -> Self {
        CpuRunError::Failed(why)
    }
}

/// A buffer the host provides: the tile value it is (by number), its
/// shape and element type (by name).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BufferSpec {
    pub value: u32,
    pub shape: Vec<u64>,
    pub elem: String,
}

impl BufferSpec {
    fn of(value: Value, t: &TensorType) -> BufferSpec {
        BufferSpec { value: value.as_u32(), shape: t.shape.clone(), elem: t.elem.name().to_string() }
    }

    pub fn tensor_type(&self) -> Result<TensorType, String> {
        let elem = ElemType::from_name(&self.elem).ok_or_else(|| format!("unknown element type `{}`", self.elem))?;
        Ok(TensorType::new(self.shape.clone(), elem))
    }
}

/// What the host does around the kernels: which buffers are inputs, which
/// it allocates, which it returns.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostPlan {
    pub params: Vec<BufferSpec>,
    pub buffers: Vec<BufferSpec>,
    /// Returned values, in order, with the result types.
    pub results: Vec<BufferSpec>,
    /// Reshapes (`reshape` ops): each is the memory of `of` under its own
    /// shape, so the host gives it `of`'s buffer.
    #[serde(default)]
    pub views: Vec<BufferView>,
    /// How many of the trailing `params` are the function's weights
    /// (hoisted `weight` ops, `tilec::ir::weights`): what
    /// [`Caches::Network`] flushes beside the intermediate buffers. None
    /// where the plan's maker cannot say (`HostPlan::of`: the weights are
    /// parameters by then; the evaluator, which hoisted them, says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<usize>,
}

/// A value that is another's memory under another shape.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BufferView {
    pub spec: BufferSpec,
    /// The value whose memory it is (a parameter, a buffer or a view).
    pub of: u32,
}

impl HostPlan {
    /// The parameters a timed run under `caches` leaves in the caches
    /// as the run before left them, by value number: under
    /// [`Caches::Network`] those before the trailing `weights`, the
    /// activations a layer's producer has just written; none otherwise,
    /// or where the plan does not say which are weights.
    pub fn activations(&self, caches: Caches) -> Vec<u32> {
        match (caches, self.weights) {
            (Caches::Network, Some(w)) => self.params[..self.params.len().saturating_sub(w)].iter().map(|p| p.value).collect(),
            _ => Vec::new(),
        }
    }

    pub fn of(f: &Function) -> HostPlan {
        let params = f.params.iter().filter_map(|&p| f.value_type(p).as_tensor().map(|t| BufferSpec::of(p, t))).collect();
        let buffers = f.regions[f.body]
            .ops
            .iter()
            .filter(|&&o| f.ops[o].kind == OpKind::Alloc)
            .filter_map(|&o| {
                let v = f.result(o);
                f.value_type(v).as_buffer().map(|b| BufferSpec::of(v, &b.as_tensor_type()))
            })
            .collect();
        let views = f.regions[f.body]
            .ops
            .iter()
            .filter(|&&o| f.ops[o].kind == OpKind::Reshape)
            .filter_map(|&o| {
                let v = f.result(o);
                f.value_type(v).as_tensor().map(|t| BufferView { spec: BufferSpec::of(v, t), of: f.ops[o].operands[0].as_u32() })
            })
            .collect();
        let ret = f.return_op().map(|r| f.ops[r].operands.clone()).unwrap_or_default();
        let results = ret.iter().zip(&f.result_types).map(|(&v, t)| BufferSpec::of(v, t)).collect();
        HostPlan { params, buffers, results, views, weights: None }
    }

    /// The value whose memory `value` is: itself, unless it is a view.
    pub fn storage(&self, value: u32) -> u32 {
        let mut v = value;
        // Each view is of a value defined before it, so the walk ends.
        while let Some(view) = self.views.iter().find(|w| w.spec.value == v) {
            v = view.of;
        }
        v
    }

    /// The shape and element type of a parameter, buffer or view.
    pub fn spec(&self, value: u32) -> Option<&BufferSpec> {
        self.params.iter().chain(&self.buffers).chain(self.views.iter().map(|w| &w.spec)).find(|b| b.value == value)
    }
}

impl HostPlan {
    /// The parameters paired with `inputs`, once their number and types
    /// are checked.
    pub(crate) fn checked_inputs<'a>(&'a self, inputs: &'a [Tensor]) -> Result<impl Iterator<Item = (&'a BufferSpec, &'a Tensor)>, String> {
        if inputs.len() != self.params.len() {
            return Err(format!("{} inputs given, {} expected", inputs.len(), self.params.len()));
        }
        for (p, t) in self.params.iter().zip(inputs) {
            if p.tensor_type()? != t.ty {
                return Err(format!("input of type {} where {} is expected", t.ty, p.tensor_type()?));
            }
        }
        Ok(self.params.iter().zip(inputs))
    }

    /// The function's results, in order: `read` turns each returned
    /// buffer (by value number) into a tensor of its type.
    pub(crate) fn collect_results(&self, mut read: impl FnMut(u32, &TensorType) -> Result<Tensor, String>) -> Result<Vec<Tensor>, String> {
        self.results.iter().map(|r| read(self.storage(r.value), &r.tensor_type()?)).collect()
    }
}

/// Most buffer parameters a kernel may have (the host calls kernels
/// through a fixed set of C signatures).
pub const MAX_KERNEL_PARAMS: usize = 16;

/// One buffer the host owns: 64-byte aligned so that vector loads of a row
/// start never split a cache line; buffers of 2 MiB and more are aligned to
/// 2 MiB and offered transparent huge pages (fewer TLB misses on strided
/// panels). Every page is touched when allocated, so that first-touch page
/// faults are not timed as kernel time.
struct HostBuffer {
    ptr: *mut u8,
    layout: std::alloc::Layout,
    bytes: usize,
}

const HUGE_PAGE: usize = 2 << 20;

impl HostBuffer {
    /// `bytes` zeroed bytes, or `None` where the system refuses them.
    fn zeroed(bytes: u64) -> Option<HostBuffer> {
        let bytes = usize::try_from(bytes).ok()?;
        let align = if bytes >= HUGE_PAGE { HUGE_PAGE } else { 64 };
        let size = bytes.max(1).checked_next_multiple_of(align)?;
        let layout = std::alloc::Layout::from_size_align(size, align).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            return None;
        }
        #[cfg(target_os = "linux")]
        if align == HUGE_PAGE {
            // SAFETY: the range is this allocation; advice changes no contents.
            unsafe { libc::madvise(ptr.cast(), size, libc::MADV_HUGEPAGE) };
        }
        // SAFETY: `ptr` owns `size` bytes; writing them faults every page in.
        unsafe { std::ptr::write_bytes(ptr, 0, size) };
        Some(HostBuffer { ptr, layout, bytes })
    }

    fn ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    fn as_bytes(&self) -> &[u8] {
        // SAFETY: the allocation holds at least `bytes` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `as_bytes`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// Writes `t`'s elements into `dst` (which holds exactly their bytes),
/// little-endian, without a copy on the way.
fn write_tensor_bytes(t: &Tensor, dst: &mut [u8]) {
    macro_rules! put {
        ($v:expr, $n:expr) => {
            dst.chunks_exact_mut($n).zip($v).for_each(|(d, x)| d.copy_from_slice(&x.to_le_bytes()))
        };
    }
    match &t.data {
        TensorData::F32(v) => put!(v, 4),
        TensorData::F16(v) => put!(v, 2),
        TensorData::BF16(v) => put!(v, 2),
        TensorData::I8(v) => put!(v, 1),
        TensorData::U8(v) => dst.copy_from_slice(v),
        TensorData::I32(v) => put!(v, 4),
    }
}

pub(crate) fn tensor_from_bytes(ty: &TensorType, b: &[u8]) -> Tensor {
    Tensor::try_from_le_bytes(ty, b).expect("memory for a result")
}

impl CpuProgram {
    /// Loads a compiled library.
    pub fn load(path: &Path, kernels: Vec<KernelAbi>, plan: HostPlan) -> Result<CpuProgram, String> {
        // SAFETY: the library is one tilec just built; loading runs no
        // initialisers beyond the C runtime's.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("cannot load `{}`: {e}", path.display()))?;
        let mut ks = Vec::new();
        for k in kernels {
            if k.params.len() > MAX_KERNEL_PARAMS {
                return Err(format!("kernel `{}` takes {} buffers; at most {MAX_KERNEL_PARAMS} are supported", k.symbol, k.params.len()));
            }
            // SAFETY: the symbol is a function generated with the C ABI
            // `void(ptr x params, i64 lo, i64 hi)`.
            let sym: libloading::Symbol<'_, unsafe extern "C" fn()> =
                unsafe { lib.get(k.symbol.as_bytes()) }.map_err(|e| format!("kernel `{}` missing from `{}`: {e}", k.symbol, path.display()))?;
            let p = *sym as *const ();
            ks.push((k, p));
        }
        // Prepack kernels read only parameters and write what nothing else
        // writes (the verifier's rule), so they can all run first: the
        // weights are then laid out before the timed kernels start, as a
        // deployment would have them from loading on.
        ks.sort_by_key(|(k, _)| !k.prepack);
        let arena = arena_for(&plan, ks.iter().map(|(k, _)| k))?;
        Ok(CpuProgram { _lib: lib, path: path.to_path_buf(), kernels: ks, plan, arena, names: HashMap::new() })
    }

    /// Names the host's buffers after `f`'s values (`%x`), for messages.
    pub fn with_names_of(mut self, f: &Function) -> CpuProgram {
        self.names = f.values.iter().filter_map(|(v, data)| data.name.as_ref().map(|n| (v.as_u32(), format!("%{n}")))).collect();
        self
    }

    fn name(&self, value: u32) -> String {
        self.names.get(&value).cloned().unwrap_or_else(|| format!("#{value}"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the global buffers live: the arena's size, and what they
    /// would take apart.
    pub fn arena(&self) -> &ArenaPlan {
        &self.arena
    }

    /// Runs the function on `inputs` with `threads` threads.
    pub fn run(&self, inputs: &[Tensor], threads: usize) -> Result<Vec<Tensor>, String> {
        self.run_timed(inputs, threads).map(|r| r.results)
    }

    /// Runs the function and times its kernels alone: copying the inputs
    /// in and the results out is not counted. No memory limit but the
    /// system's: see [`CpuProgram::run_within`].
    pub fn run_timed(&self, inputs: &[Tensor], threads: usize) -> Result<CpuRun, String> {
        self.run_within(inputs, threads, &Limits::unlimited()).map_err(|e| e.to_string())
    }

    /// [`CpuProgram::run_timed`] with the kernels' data in the caches as
    /// `caches` says.
    pub fn run_timed_with(&self, inputs: &[Tensor], threads: usize, caches: Caches) -> Result<CpuRun, String> {
        self.run_inner(inputs, threads, &Limits::unlimited(), caches).map_err(|e| e.to_string())
    }

    /// [`CpuProgram::run_timed`] within `limits`. Counted as live for the
    /// whole run, and checked before anything is allocated: the caller's
    /// inputs, the host's copies of them, the function's global buffers,
    /// the kernels' local buffers (on each kernel thread's stack: the
    /// largest need of any kernel, since they run one after another) and
    /// the results. Allocations the system refuses are errors too.
    pub fn run_within(&self, inputs: &[Tensor], threads: usize, limits: &Limits) -> Result<CpuRun, CpuRunError> {
        self.run_inner(inputs, threads, limits, Caches::Warm)
    }

    fn run_inner(&self, inputs: &[Tensor], threads: usize, limits: &Limits, caches: Caches) -> Result<CpuRun, CpuRunError> {
        let mut budget = MemoryBudget::new(limits);
        let params: Vec<(&BufferSpec, &Tensor)> = self.plan.checked_inputs(inputs)?.collect();
        for (p, t) in &params {
            budget.reserve(t.ty.size_bytes(), || format!("input {} ({})", self.name(p.value), t.ty))?;
        }
        let mut bufs: HashMap<u32, HostBuffer> = HashMap::new();
        for (p, t) in &params {
            let what = || format!("the host's copy of input {} ({})", self.name(p.value), t.ty);
            let bytes = t.ty.size_bytes();
            budget.reserve(bytes, what)?;
            let mut b = HostBuffer::zeroed(bytes.unwrap_or(u64::MAX)).ok_or_else(|| MemoryError::refused(what(), bytes.unwrap_or(u64::MAX)))?;
            write_tensor_bytes(t, b.as_bytes_mut());
            bufs.insert(p.value, b);
        }
        // The global buffers share one arena, by lifetime (`ArenaPlan`).
        let mut arena = None;
        if !self.plan.buffers.is_empty() {
            let what = || match &self.plan.buffers[..] {
                [b] => format!("buffer {} ({})", self.name(b.value), b.tensor_type().map_or_else(|e| e, |t| t.to_string())),
                all => format!(
                    "the arena of the function's {} global buffers (they share bytes by lifetime; apart they would take {})",
                    all.len(),
                    tilec::interp::memory::format_bytes(self.arena.unshared_bytes)
                ),
            };
            budget.reserve(Some(self.arena.bytes), what)?;
            arena = Some(HostBuffer::zeroed(self.arena.bytes).ok_or_else(|| MemoryError::refused(what(), self.arena.bytes))?);
        }
        let arena_base = arena.as_mut().map_or(std::ptr::null_mut(), HostBuffer::ptr) as usize;
        let ptr_of = |bufs: &mut HashMap<u32, HostBuffer>, v: u32| -> Option<usize> {
            let v = self.plan.storage(v);
            match self.arena.offsets.get(&v) {
                Some(&off) => Some(arena_base + off as usize),
                None => bufs.get_mut(&v).map(|b| b.ptr() as usize),
            }
        };
        let parts_of = |k: &KernelAbi| threads.clamp(1, k.parallel_trip.max(1).min(usize::MAX as u64) as usize);
        if let Some(k) = self.kernels.iter().map(|(k, _)| k).max_by_key(|k| (parts_of(k) as u64).saturating_mul(k.stack_bytes)) {
            let n = parts_of(k);
            let stacks = (n as u64).checked_mul(k.stack_bytes);
            budget.reserve(stacks, || {
                format!("stack space for the local buffers of kernel `{}` ({} per thread, {n} thread(s))", k.symbol, tilec::interp::memory::format_bytes(k.stack_bytes))
            })?;
        }
        let result_types: Vec<TensorType> = self.plan.results.iter().map(BufferSpec::tensor_type).collect::<Result<_, _>>()?;
        for (i, (r, ty)) in self.plan.results.iter().zip(&result_types).enumerate() {
            budget.reserve(ty.size_bytes(), || format!("result {i} ({}, {ty})", self.name(r.value)))?;
        }
        // The prepack kernels come first (`load`) and are timed apart.
        let prepacks = self.kernels.partition_point(|(k, _)| k.prepack);
        // The bytes to flush before the timed kernels (the buffers stay
        // where they are for the whole run).
        let kept_warm = self.plan.activations(caches);
        let flushed: Vec<(usize, usize)> = match caches {
            Caches::Warm => Vec::new(),
            Caches::Flushed | Caches::Network => bufs
                .iter()
                .filter(|(v, _)| !kept_warm.contains(v))
                .map(|(_, b)| b.as_bytes())
                .chain(arena.as_ref().map(HostBuffer::as_bytes))
                .map(|b| (b.as_ptr() as usize, b.len()))
                .collect(),
        };
        let mut call = |(k, f): &(KernelAbi, *const ())| -> Result<(), String> {
            let ptrs: Vec<usize> = k.params.iter().map(|&v| ptr_of(&mut bufs, v).ok_or_else(|| format!("kernel `{}` uses a buffer the host does not have", k.symbol))).collect::<Result<_, _>>()?;
            let trip = k.parallel_trip.max(1);
            let threads = parts_of(k);
            // Local buffers live on the kernel's stack: each thread gets
            // them on top of the usual stack. The threads outlive the run
            // (`pool`), so their stacks' pages stay mapped.
            let stack = usize::try_from(k.stack_bytes).ok().and_then(|b| b.checked_add(THREAD_STACK_BYTES)).ok_or_else(|| format!("kernel `{}` needs {} bytes of stack", k.symbol, k.stack_bytes))?;
            let job = Job::new(*f as usize, ptrs, trip, threads).ok_or_else(|| format!("kernel `{}` has a parallel range of {trip} iterations, more than the runtime shares out ({})", k.symbol, u32::MAX))?;
            run_job(job, stack).map_err(|e| format!("kernel `{}`: {e}", k.symbol))
        };
        // Outside the timed region: pinning costs microseconds.
        let _pinned = CallerPin::new(self.kernels.iter().map(|(k, _)| parts_of(k)).max().unwrap_or(1));
        let prepack_start = std::time::Instant::now();
        self.kernels[..prepacks].iter().try_for_each(&mut call)?;
        let prepack_seconds = (prepacks > 0).then(|| prepack_start.elapsed().as_secs_f64());
        for &(ptr, len) in &flushed {
            flush_from_caches(ptr as *const u8, len);
        }
        let start = std::time::Instant::now();
        let mut each_kernel_seconds = Vec::with_capacity(self.kernels.len() - prepacks);
        for kernel in &self.kernels[prepacks..] {
            let kernel_start = std::time::Instant::now();
            call(kernel)?;
            each_kernel_seconds.push(kernel_start.elapsed().as_secs_f64());
        }
        let kernel_seconds = start.elapsed().as_secs_f64();
        let mut results = Vec::new();
        for (i, (r, ty)) in self.plan.results.iter().zip(&result_types).enumerate() {
            let storage = self.plan.storage(r.value);
            let bytes: &[u8] = match (self.arena.offsets.get(&storage), &arena) {
                (Some(&off), Some(a)) => {
                    let len = ty.size_bytes().unwrap_or(0) as usize;
                    &a.as_bytes()[off as usize..off as usize + len]
                }
                _ => bufs.get(&storage).ok_or_else(|| "a result the host does not have".to_string())?.as_bytes(),
            };
            let refused = || MemoryError::refused(format!("result {i} ({}, {ty})", self.name(r.value)), bytes.len() as u64);
            results.push(Tensor::try_from_le_bytes(ty, bytes).map_err(|_| refused())?);
        }
        Ok(CpuRun { results, kernel_seconds, each_kernel_seconds, prepack_seconds })
    }
}

/// Where the kernels' data is when a timed run starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Caches {
    /// As copying the inputs in (and the prepack kernels) left it: a
    /// kernel timed again and again reads its operands from the caches
    /// they fit in.
    #[default]
    Warm,
    /// Written back and evicted from every cache level (the inputs, the
    /// prepacked weights, the intermediate buffers): read from memory, as
    /// a layer of a network whose weights outgrow the last-level cache
    /// reads its weights. TVM's and Ansor's `enable_cpu_cache_flush`
    /// measures so for networks on CPUs. (On x86 only; elsewhere the
    /// caches are left as they are.)
    Flushed,
    /// As a layer of a network finds them: the weights (the plan's
    /// trailing [`HostPlan::weights`] parameters and their prepacked
    /// copies) and the intermediate buffers flushed, the other inputs,
    /// the activations the layer before has just written, left in the
    /// caches. A 1x1 convolution of ResNet-50's layer 3 ranks its
    /// schedules as it does in the network only so: flushed, a 4 x 2
    /// register tile timed 2-10% slower than a 2 x 8, and a tuning kept
    /// it; in the network, and here, it is 11-23% slower. Like `Flushed`
    /// where the plan does not say which parameters are weights.
    Network,
}

impl Caches {
    pub const NAMES: [&'static str; 3] = ["warm", "flushed", "network"];

    pub fn name(self) -> &'static str {
        match self {
            Caches::Warm => "warm",
            Caches::Flushed => "flushed",
            Caches::Network => "network",
        }
    }
}

impl std::str::FromStr for Caches {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "warm" => Ok(Caches::Warm),
            "flushed" => Ok(Caches::Flushed),
            "network" => Ok(Caches::Network),
            _ => Err(format!("unknown cache state `{s}` (expected {})", Caches::NAMES.join(", "))),
        }
    }
}

/// Writes `bytes` back and evicts them from every cache level, a line at a
/// time (`clflush`), so that the next reads of them come from memory.
/// The `len` bytes at `ptr` must be one live allocation.
fn flush_from_caches(ptr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_clflush, _mm_mfence};
        // 64-byte lines on every x86-64 core; a smaller step would only
        // flush some lines twice.
        const LINE: usize = 64;
        for off in (0..len).step_by(LINE) {
            // SAFETY: `off` is inside the allocation; `clflush` (SSE2,
            // part of x86-64) writes the line back and invalidates it,
            // leaving its bytes as they are.
            unsafe { _mm_clflush(ptr.add(off)) };
        }
        // SAFETY: a fence; no memory is touched.
        unsafe { _mm_mfence() };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, len);
}

/// Where a function's global buffers (intermediate tensors, results) live
/// in one arena. A buffer is live from the first kernel that uses it to the
/// last (a result to the end of the run); buffers whose lifetimes do not
/// overlap share bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArenaPlan {
    /// Byte offset of each buffer (by value number).
    pub offsets: HashMap<u32, u64>,
    /// The arena's size.
    pub bytes: u64,
    /// What the buffers would take, each in its own allocation.
    pub unshared_bytes: u64,
}

/// One buffer to place: value number, bytes, first and last kernel (by
/// index) that is live with it.
#[derive(Clone, Copy, Debug)]
pub struct Lifetime {
    pub value: u32,
    pub bytes: u64,
    pub first: usize,
    pub last: usize,
}

/// Places `buffers` in one arena: largest first, each at the lowest offset
/// clear of every placed buffer whose lifetime overlaps its own (a greedy
/// by-size heuristic; not optimal in general). Offsets are
/// 64-byte aligned, and 2 MiB aligned for buffers of 2 MiB or more (as a
/// `HostBuffer` of their own would be, for huge pages).
pub fn plan_arena(buffers: &[Lifetime]) -> ArenaPlan {
    let mut order: Vec<&Lifetime> = buffers.iter().collect();
    order.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.value.cmp(&b.value)));
    let mut placed: Vec<(&Lifetime, u64)> = Vec::new();
    let mut plan = ArenaPlan { unshared_bytes: buffers.iter().map(|b| b.bytes).sum(), ..ArenaPlan::default() };
    for b in order {
        let align = if b.bytes >= HUGE_PAGE as u64 { HUGE_PAGE as u64 } else { 64 };
        let mut clashes: Vec<(u64, u64)> = placed.iter().filter(|(p, _)| p.first <= b.last && b.first <= p.last).map(|&(p, off)| (off, off + p.bytes)).collect();
        clashes.sort();
        // The lowest aligned offset whose range is clear of every clash.
        let mut offset = 0u64;
        for &(lo, hi) in &clashes {
            if offset + b.bytes <= lo {
                break;
            }
            offset = offset.max(hi.next_multiple_of(align));
        }
        plan.bytes = plan.bytes.max(offset + b.bytes);
        plan.offsets.insert(b.value, offset);
        placed.push((b, offset));
    }
    plan
}

/// The arena of `plan`'s global buffers, from the kernels that use them
/// (in run order).
fn arena_for<'k>(plan: &HostPlan, kernels: impl Iterator<Item = &'k KernelAbi>) -> Result<ArenaPlan, String> {
    let kernels: Vec<&KernelAbi> = kernels.collect();
    let mut lifetimes = Vec::new();
    for b in &plan.buffers {
        // A kernel that uses a view of the buffer uses the buffer.
        let uses: Vec<usize> = kernels.iter().enumerate().filter(|(_, k)| k.params.iter().any(|&v| plan.storage(v) == b.value)).map(|(i, _)| i).collect();
        let returned = plan.results.iter().any(|r| plan.storage(r.value) == b.value);
        let (first, last) = match (uses.first(), uses.last()) {
            (Some(&f), Some(&l)) => (f, if returned { kernels.len() } else { l }),
            _ => (0, kernels.len()),
        };
        let bytes = b.tensor_type()?.size_bytes().ok_or_else(|| format!("buffer #{} is too large", b.value))?;
        lifetimes.push(Lifetime { value: b.value, bytes, first, last });
    }
    Ok(plan_arena(&lifetimes))
}

/// Stack for a kernel thread besides the kernel's local buffers (Rust's
/// default for spawned threads).
const THREAD_STACK_BYTES: usize = 2 << 20;

/// Calls kernel `f` with `ptrs` and the range: one C signature per arity.
pub(crate) fn call(f: usize, ptrs: &[usize], lo: i64, hi: i64) {
    type P = usize;
    macro_rules! arity {
        ($($i:tt),*) => {{
            // SAFETY: `f` has exactly this C signature (see `load`).
            let g: unsafe extern "C" fn($(arity!(@ty $i),)* i64, i64) = unsafe { std::mem::transmute(f) };
            unsafe { g($(ptrs[$i],)* lo, hi) }
        }};
        (@ty $i:tt) => { P };
    }
    match ptrs.len() {
        0 => arity!(),
        1 => arity!(0),
        2 => arity!(0, 1),
        3 => arity!(0, 1, 2),
        4 => arity!(0, 1, 2, 3),
        5 => arity!(0, 1, 2, 3, 4),
        6 => arity!(0, 1, 2, 3, 4, 5),
        7 => arity!(0, 1, 2, 3, 4, 5, 6),
        8 => arity!(0, 1, 2, 3, 4, 5, 6, 7),
        9 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8),
        10 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
        11 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
        12 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11),
        13 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12),
        14 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13),
        15 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14),
        _ => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
    }
}

#[cfg(test)]
mod arena_tests {
    use super::*;

    fn life(value: u32, bytes: u64, first: usize, last: usize) -> Lifetime {
        Lifetime { value, bytes, first, last }
    }

    /// No two buffers alive at once share a byte.
    fn assert_disjoint(buffers: &[Lifetime], plan: &ArenaPlan) {
        for a in buffers {
            for b in buffers.iter().filter(|b| b.value < a.value) {
                if a.first <= b.last && b.first <= a.last {
                    let (oa, ob) = (plan.offsets[&a.value], plan.offsets[&b.value]);
                    assert!(oa + a.bytes <= ob || ob + b.bytes <= oa, "{a:?} at {oa} overlaps {b:?} at {ob}");
                }
            }
            assert!(plan.offsets[&a.value] + a.bytes <= plan.bytes);
        }
    }

    #[test]
    fn a_chain_of_activations_takes_its_two_largest_neighbours() {
        // t0 -> k0 -> t1 -> k1 -> t2 -> k2 -> t3 (result): each tensor is
        // live from the kernel writing it to the kernel reading it.
        let buffers = [life(0, 4096, 0, 1), life(1, 1024, 1, 2), life(2, 4096, 2, 3), life(3, 64, 3, 4)];
        let plan = plan_arena(&buffers);
        assert_disjoint(&buffers, &plan);
        assert_eq!(plan.unshared_bytes, 9280);
        assert_eq!(plan.bytes, 4096 + 1024);
    }

    #[test]
    fn random_lifetimes_never_overlap() {
        let mut state = 7u64;
        let mut next = |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        for _ in 0..200 {
            let buffers: Vec<Lifetime> = (0..12)
                .map(|v| {
                    let first = next(10) as usize;
                    life(v, 1 + next(3 << 20), first, first + next(4) as usize)
                })
                .collect();
            let plan = plan_arena(&buffers);
            assert_disjoint(&buffers, &plan);
            assert!(plan.bytes <= plan.unshared_bytes + 12 * (2 << 20));
        }
    }
}
