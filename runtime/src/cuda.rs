//! Running compiled GPU kernels through the CUDA driver API (`cudarc`).
//!
//! The driver library (`libcuda.so`) is loaded when first needed, not
//! linked: tilec builds and runs everywhere, and only `--backend=cuda`
//! asks for a GPU. [`driver_status`] says, without panicking, whether one
//! is usable here.

use crate::program::{HostPlan, tensor_from_bytes};
use crate::KernelAbi;
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg, sys};
use std::collections::HashMap;
use std::sync::Arc;
use tilec::interp::Tensor;

/// Why no GPU can be used here, in words for a diagnostic.
pub fn driver_status() -> Result<String, String> {
    // SAFETY: only tries to open the library; no symbol is called.
    if !unsafe { sys::is_culib_present() } {
        return Err("the CUDA driver library (libcuda.so) is not installed on this machine".to_string());
    }
    let count = CudaContext::device_count().map_err(|e| format!("the CUDA driver is installed but reports no usable GPU: {e}"))?;
    if count < 1 {
        return Err("the CUDA driver is installed but sees no GPU".to_string());
    }
    let ctx = CudaContext::new(0).map_err(|e| format!("cannot open GPU 0: {e}"))?;
    ctx.name().map_err(|e| format!("cannot query GPU 0: {e}"))
}

/// Turns a driver error into a message saying what was being done.
fn err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> String {
    move |e| format!("{what}: {e}")
}

/// A tile function compiled to PTX and loaded on GPU 0.
pub struct CudaProgram {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernels: Vec<(KernelAbi, CudaFunction)>,
    plan: HostPlan,
    device: String,
}

/// The result of one run: the function's results and the time the GPU
/// spent in its kernels (between CUDA events around the launches).
pub struct CudaRun {
    pub results: Vec<Tensor>,
    pub kernel_seconds: f64,
}

impl CudaProgram {
    /// Loads `ptx` (every kernel of one function) on GPU 0.
    pub fn load(ptx: &str, kernels: Vec<KernelAbi>, plan: HostPlan) -> Result<CudaProgram, String> {
        let device = driver_status()?;
        let ctx = CudaContext::new(0).map_err(|e| format!("cannot open GPU 0: {e}"))?;
        let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx)).map_err(|e| format!("the driver rejects the PTX: {e}"))?;
        let mut loaded = Vec::new();
        for k in kernels {
            let f = module.load_function(&k.symbol).map_err(|e| format!("kernel `{}` is not in the PTX: {e}", k.symbol))?;
            loaded.push((k, f));
        }
        let stream = ctx.default_stream();
        Ok(CudaProgram { ctx, stream, kernels: loaded, plan, device })
    }

    /// The GPU's name, as the driver reports it.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// Copies `inputs` to the GPU, runs the kernels in order, copies the
    /// results back.
    pub fn run(&self, inputs: &[Tensor]) -> Result<CudaRun, String> {
        let mut bufs: HashMap<u32, CudaSlice<u8>> = HashMap::new();
        for (p, t) in self.plan.checked_inputs(inputs)? {
            bufs.insert(p.value, self.stream.clone_htod(&t.to_le_bytes()).map_err(err("cannot copy an input to the GPU"))?);
        }
        for b in &self.plan.buffers {
            let bytes = b.tensor_type()?.size_bytes().unwrap_or(0).max(1) as usize;
            bufs.insert(b.value, self.stream.alloc_zeros::<u8>(bytes).map_err(err("cannot allocate GPU memory"))?);
        }
        let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self.ctx.new_event(timing).map_err(err("cannot create an event"))?;
        let end = self.ctx.new_event(timing).map_err(err("cannot create an event"))?;
        start.record(&self.stream).map_err(err("cannot record an event"))?;
        for (k, f) in &self.kernels {
            let args: Vec<&CudaSlice<u8>> =
                k.params.iter().map(|&v| bufs.get(&self.plan.storage(v)).ok_or_else(|| format!("kernel `{}` uses a buffer the host does not have", k.symbol))).collect::<Result<_, _>>()?;
            let dim = |d: [u64; 3]| -> Result<(u32, u32, u32), String> {
                let c = |x: u64| u32::try_from(x.max(1)).map_err(|_| format!("kernel `{}`: launch dimension {x} exceeds 2^32", k.symbol));
                Ok((c(d[0])?, c(d[1])?, c(d[2])?))
            };
            // Shared memory is static (declared in the PTX) up to the
            // target's `max_static_shared_bytes`; code generation makes it
            // dynamic only beyond that, and the function must be allowed
            // dynamic shared memory first.
            let dynamic = u32::try_from(k.dynamic_shared_bytes).map_err(|_| format!("kernel `{}`: too much shared memory", k.symbol))?;
            if dynamic > 0 {
                f.set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic as i32)
                    .map_err(|e| format!("kernel `{}` cannot have {dynamic} bytes of shared memory on this GPU: {e}", k.symbol))?;
            }
            let config = LaunchConfig { grid_dim: dim(k.grid)?, block_dim: dim(k.block)?, shared_mem_bytes: dynamic };
            let mut launch = self.stream.launch_builder(f);
            for a in &args {
                launch.arg(*a);
            }
            // SAFETY: the kernel's parameters are exactly these buffers (bare
            // pointers, in `k.params` order), each as large as its tile type.
            unsafe { launch.launch(config) }.map_err(|e| format!("cannot launch `{}`: {e}", k.symbol))?;
        }
        end.record(&self.stream).map_err(err("cannot record an event"))?;
        self.stream.synchronize().map_err(err("a kernel failed"))?;
        let kernel_seconds = start.elapsed_ms(&end).map_err(err("cannot read the kernel time"))? as f64 / 1e3;
        let results = self.plan.collect_results(|value, ty| {
            let b = bufs.get(&value).ok_or_else(|| "a result the host does not have".to_string())?;
            let bytes = self.stream.clone_dtoh(b).map_err(err("cannot copy a result back"))?;
            Ok(tensor_from_bytes(ty, &bytes[..ty.size_bytes().unwrap_or(0) as usize]))
        })?;
        Ok(CudaRun { results, kernel_seconds })
    }
}
