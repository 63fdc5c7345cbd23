//! Running kernels tilec compiled: loading a shared library, allocating
//! the host's buffers, calling kernels with their parallel ranges shared
//! out over threads, and the worker protocol measurements use. This crate
//! does not link LLVM: the measurement worker stays small.

pub mod cuda;
mod pool;
pub mod program;
pub mod worker;

pub use cuda::{CudaProgram, CudaRun};
pub use program::{BufferView, Caches, CpuProgram, CpuRun, HostPlan};

/// How a kernel is called: its MLIR/C symbol, its parameters (buffers of
/// the tile function, by value number, in order) and the trip count of its parallel region.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelAbi {
    pub symbol: String,
    /// Value numbers (`Value::as_u32`) of the tile function's buffers.
    pub params: Vec<u32>,
    /// CPU: iterations of the outermost parallel loop nest, shared out by
    /// the `[lo, hi)` parameters; 1 when the kernel has none.
    pub parallel_trip: u64,
    /// GPU: grid and block dimensions (x, y, z) and shared-memory bytes.
    pub grid: [u64; 3],
    pub block: [u64; 3],
    pub shared_bytes: u64,
    /// GPU: bytes of dynamic shared memory to give the launch (0 when the
    /// kernel's shared buffers are declared statically, as they are up to
    /// 48 KiB); above 48 KiB the kernel must be allowed them first.
    #[serde(default)]
    pub dynamic_shared_bytes: u64,
    /// CPU: bytes of local buffers (packed copies, accumulators) the kernel
    /// keeps on its stack; a thread calling it needs this much stack beyond
    /// its own use.
    #[serde(default)]
    pub stack_bytes: u64,
    /// A `prepack` kernel: it lays out weights for the kernels after it,
    /// reading only parameters and writing buffers nothing else writes.
    /// The CPU runtime runs these first, and apart from the timed kernels
    /// (`CpuRun::prepack_seconds`).
    #[serde(default)]
    pub prepack: bool,
}


