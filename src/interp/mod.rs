//! The reference interpreter: the oracle every pass and every compiled
//! kernel is tested against.
//!
//! It runs a verified function on concrete tensors, op by op. Each op kind
//! has its own evaluator (`compute.rs` for level-0 compute ops); loop-level
//! IR adds evaluators for loops, buffers, copies and barriers alongside.
//! Written for clarity first, but fast enough for the papers' CPU-sized
//! workloads (see `docs/interpreter.md` for what it costs).

pub mod compare;
mod compute;
mod machine;
pub mod memory;
pub mod npy;
pub mod tensor;
pub mod weights;

pub use memory::{Limits, MemoryBudget, MemoryError};
pub use tensor::{ShapeError, Tensor, TensorData};

use crate::ir::*;
use std::fmt;

/// Why a function could not be interpreted: a message, and for memory the
/// details (what, how much), so that a tool can say which option to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterpError(pub String, Option<Box<MemoryError>>);

impl InterpError {
    pub fn new(msg: impl Into<String>) -> Self {
        InterpError(msg.into(), None)
    }

    /// The memory that could not be had, if that is why the run failed.
    pub fn memory(&self) -> Option<&MemoryError> {
        self.1.as_deref()
    }
}

impl From<MemoryError> for InterpError {
    fn from(e: MemoryError) -> Self {
        InterpError(e.to_string(), Some(Box::new(e)))
    }
}

impl fmt::Display for InterpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InterpError {}

/// Runs `f` on `inputs` (one per parameter, matching its type). Returns
/// the function's results in order.
pub fn run_function(f: &Function, inputs: &[Tensor]) -> Result<Vec<Tensor>, InterpError> {
    run_function_with(f, inputs, &Limits::default())
}

/// [`run_function`] within `limits`: the inputs, every tensor and buffer
/// the run allocates (with the interpreter's bookkeeping for them) and the
/// results count against `limits.max_bytes` while they are live (see
/// [`memory`]); a run that would exceed it fails with an error naming the
/// tensor (`InterpError::memory`), before allocating it.
pub fn run_function_with(f: &Function, inputs: &[Tensor], limits: &Limits) -> Result<Vec<Tensor>, InterpError> {
    if inputs.len() != f.params.len() {
        return Err(InterpError::new(format!("@{} takes {} inputs, {} given", f.name, f.params.len(), inputs.len())));
    }
    for (i, (&p, t)) in f.params.iter().zip(inputs).enumerate() {
        let expected = f.value_type(p);
        if &Type::Tensor(t.ty.clone()) != expected {
            return Err(InterpError::new(format!("input {i} of @{} has type {} but {expected} is expected", f.name, t.ty)));
        }
    }
    machine::Machine::new(f, limits).run(inputs)
}

#[cfg(test)]
mod tests;
