//! The crate's one error type.
//!
//! Candle reports tensor-level failures (shape mismatches, out-of-range ids)
//! with its own error; everything that comes from the caller's data or from a
//! file on disk gets its own variant so that the message says which input or
//! which path was wrong.

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong in this crate.
#[derive(Debug)]
pub enum TlmError {
    /// A tensor operation failed inside candle.
    Candle(candle_core::Error),
    /// Reading or writing a model file failed at the operating-system level.
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A model file exists but is not a model this crate wrote (bad
    /// safetensors, missing or malformed configuration, wrong tensors).
    Format { path: PathBuf, message: String },
    /// The caller passed something the model cannot use (an id outside the
    /// vocabulary, a context longer than the model's, an empty example set…).
    InvalidInput(String),
}

impl fmt::Display for TlmError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlmError::Candle(error) => write!(formatter, "tensor error: {error}"),
            TlmError::Io { path, source } => write!(formatter, "`{}`: {}", path.display(), tilec::input::io_reason(source)),
            TlmError::Format { path, message } => {
                write!(
                    formatter,
                    "{}: not a valid tilec-tlm model: {message}",
                    path.display()
                )
            }
            TlmError::InvalidInput(message) => write!(formatter, "invalid input: {message}"),
        }
    }
}

impl std::error::Error for TlmError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TlmError::Candle(error) => Some(error),
            TlmError::Io { source, .. } => Some(source),
            TlmError::Format { .. } | TlmError::InvalidInput(_) => None,
        }
    }
}

impl From<candle_core::Error> for TlmError {
    fn from(error: candle_core::Error) -> Self {
        TlmError::Candle(error)
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, TlmError>;

/// Shorthand for an [`TlmError::InvalidInput`] error.
pub(crate) fn invalid_input<T>(message: impl Into<String>) -> Result<T> {
    Err(TlmError::InvalidInput(message.into()))
}
