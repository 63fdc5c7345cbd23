//! tilec-tlm: a small GPT-style causal language model over token ids.
//!
//! The model is GPT-2's architecture ([`Gpt`]: learned token and position
//! embeddings, pre-LayerNorm blocks of causal multi-head attention and a 4x
//! GELU MLP, final LayerNorm, LM head tied to the token embedding) at three
//! sizes ([`GptConfig`]; counts with a vocabulary of 2000):
//!
//! | config        | layers | heads | width | context | parameters |
//! |---------------|--------|-------|-------|---------|------------|
//! | `tiny`        | 4      | 4     | 128   | 256     | 1.08 M     |
//! | `small`       | 6      | 8     | 256   | 512     | 5.38 M     |
//! | `gpt2_small`  | 12     | 12    | 768   | 1024    | 87.4 M (124.4 M with GPT-2's 50257) |
//!
//! Training ([`train`]) is next-token cross-entropy with AdamW, with a
//! per-example `loss_from` so that supervised fine-tuning can leave the
//! prompt out of the loss, and is deterministic: the same initial seed,
//! examples and options give byte-identical saved weights. Generation
//! ([`Session`]) reuses a key/value cache across calls, and [`sample`] picks
//! among an allowed subset of ids.
//!
//! Why candle: it is pure Rust (no libtorch, no C++ toolchain or Python in
//! the build), its CPU matmul is the SIMD `gemm` crate, it has reverse-mode
//! autograd and the usual layers, it reads and writes safetensors natively,
//! and the same code runs on a GPU with its `cuda` feature when a model
//! outgrows the CPU (gpt2_small). This crate uses only the CPU device.
//!
//! It depends on tilec's core crate only for the `tilec::lm` traits its
//! [`TlmModel`] implements (`tilec_model.rs`); the core and the passes do
//! not depend on it.

mod error;
mod generate;
mod gpt;
mod tilec_model;
mod train;

#[cfg(test)]
mod search_tests;
#[cfg(test)]
mod tests;

pub use error::{Result, TlmError};
pub use generate::{Session, generate_greedy, sample};
pub use gpt::{CONFIG_METADATA_KEY, Gpt, GptConfig};
pub use tilec_model::{TlmLoader, TlmModel, VOCABULARY_METADATA_KEY, load_model, save_model};
pub use train::{Example, TrainOptions, TrainReport, evaluate_loss, train};

/// Re-exported so that callers can build input tensors for
/// [`Gpt::forward`] without naming candle's crate themselves.
pub use candle_core::{Device, Tensor};
