//! tilec core: the tile IR, its text syntax, the verifier, diagnostics and
//! the pass manager.
//!
//! This crate never links LLVM, MLIR or CUDA (see `docs/ARCHITECTURE.md`);
//! transformations live in `tilec-passes`, the driver in `tools/tilec`.

pub mod calibration;
pub mod diag;
pub mod expected;
pub mod golden;
pub mod input;
pub mod interp;
pub mod ir;
pub mod lm;
pub mod measure;
pub mod pass;
pub mod records;
pub mod syntax;
pub mod tasks;
pub mod target;
pub mod verify;

/// The version printed by the tools and written into records.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
