//! Golden files: generated text checked into the repository (the op
//! reference, the pass docs, later PTX and assembly samples). Tests compare
//! the generated text with the file and fail when it is stale; running
//! them with `TILEC_BLESS=1` rewrites the file instead, so golden outputs
//! are regenerated, never edited by hand, and reviewed as diffs.

use std::path::Path;

/// Compares `actual` with the file at `path`, or rewrites the file when
/// `TILEC_BLESS=1`. Returns a description of the mismatch on failure.
pub fn check_or_bless(path: &Path, actual: &str) -> Result<(), String> {
    if std::env::var_os("TILEC_BLESS").is_some_and(|v| v == "1") {
        return std::fs::write(path, actual).map_err(|e| format!("cannot write {}: {e}", path.display()));
    }
    let expected = std::fs::read_to_string(path).unwrap_or_default();
    if expected == actual {
        return Ok(());
    }
    let first_diff = expected.lines().zip(actual.lines()).position(|(a, b)| a != b).unwrap_or(expected.lines().count().min(actual.lines().count()));
    Err(format!(
        "{} is stale (first difference at line {}); regenerate it with `TILEC_BLESS=1 cargo test` and review the diff",
        path.display(),
        first_diff + 1
    ))
}
