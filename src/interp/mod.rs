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
pub mod npy;
pub mod tensor;

pub use tensor::{ShapeError, Tensor, TensorData};

use crate::ir::*;
use std::fmt;

/// Why a function could not be interpreted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterpError(pub String);

impl InterpError {
    pub fn new(msg: impl Into<String>) -> Self {
        InterpError(msg.into())
    }
}

impl fmt::Display for InterpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InterpError {}

/// Limits that keep a run from exhausting the machine.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Total bytes of tensors the interpreter may allocate.
    pub max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bytes: 16 << 30 }
    }
}

/// Runs `f` on `inputs` (one per parameter, matching its type). Returns
/// the function's results in order.
pub fn run_function(f: &Function, inputs: &[Tensor]) -> Result<Vec<Tensor>, InterpError> {
    run_function_with(f, inputs, &Limits::default())
}

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
