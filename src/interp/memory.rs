//! Memory limits for running functions on concrete tensors.
//!
//! A shape is data: `tensor<1x2147483647x32xf32>` verifies, and asking the
//! allocator for its 256 GiB aborts the process. So the interpreter (and
//! the tools and runtime that allocate tensors) check every tensor's and
//! buffer's size against a [`MemoryBudget`] *before* allocating it, and
//! allocate fallibly (`try_reserve`), so that an allocation the system
//! refuses despite the budget is an error too. Either way the error is a
//! [`MemoryError`] naming the tensor and its size, never an abort.
//!
//! What is counted is the sum of the bytes *live at once*, not each
//! allocation on its own: a run's inputs, every intermediate tensor and
//! buffer still in scope, the bookkeeping proportional to them (the
//! interpreter's written-element flags, race records and per-point
//! scratch) and the results. A per-allocation limit would let a function
//! of many medium tensors take the machine down; the sum is what bounds the
//! process's peak. Allocations are released when their scope ends (a
//! buffer allocated in a loop body, at the end of the iteration).

use std::collections::TryReserveError;
use std::fmt;

/// Limits that keep a run from exhausting the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes of tensors, buffers and their bookkeeping live at once.
    pub max_bytes: u64,
    /// Bytes the caller holds besides the run's own (results of an earlier
    /// run it keeps), counted against `max_bytes` from the start.
    pub held_bytes: u64,
}

impl Default for Limits {
    /// 16 GiB: the limit of library callers (tests, passes' checks) that
    /// do not choose one; `tilec-run` derives its own from the machine.
    fn default() -> Self {
        Limits::at_most(16 << 30)
    }
}

impl Limits {
    /// At most `max_bytes` live at once, none held by the caller.
    pub fn at_most(max_bytes: u64) -> Limits {
        Limits { max_bytes, held_bytes: 0 }
    }

    /// No limit of our own: only allocations the system refuses fail.
    pub fn unlimited() -> Limits {
        Limits::at_most(u64::MAX)
    }
}

/// Memory that could not be had: more than the limit allows, or refused
/// by the system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryError {
    /// What it was for, e.g. "input `x` (tensor<4xf32>)", "buffer %acc
    /// (buffer<4x4xf32, local>)".
    pub what: String,
    /// Bytes asked for; `None` when the size does not fit in 64 bits.
    pub bytes: Option<u64>,
    /// Bytes already live when it was asked for.
    pub in_use: u64,
    pub limit: u64,
    /// The limit allowed it, but the system's allocator refused.
    pub refused: bool,
}

impl MemoryError {
    /// The allocator refused `bytes` for `what` although the limit allowed them.
    pub fn refused(what: impl Into<String>, bytes: u64) -> MemoryError {
        MemoryError { what: what.into(), bytes: Some(bytes), in_use: 0, limit: u64::MAX, refused: true }
    }
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let size = match self.bytes {
            Some(b) if b < 1024 => format_bytes(b),
            Some(b) => format!("{} ({b} bytes)", format_bytes(b)),
            None => "more than 2^64 bytes".to_string(),
        };
        if self.refused {
            return write!(f, "{} needs {size}, and the system refused to allocate it", self.what);
        }
        write!(f, "{} needs {size}, more than the memory limit of {} allows", self.what, format_bytes(self.limit))?;
        if self.in_use > 0 {
            write!(f, " with {} already in use", format_bytes(self.in_use))?;
        }
        Ok(())
    }
}

impl std::error::Error for MemoryError {}

/// Bytes live at once against a limit.
#[derive(Clone, Debug)]
pub struct MemoryBudget {
    limit: u64,
    in_use: u64,
}

impl MemoryBudget {
    pub fn new(limits: &Limits) -> MemoryBudget {
        MemoryBudget { limit: limits.max_bytes, in_use: limits.held_bytes }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn in_use(&self) -> u64 {
        self.in_use
    }

    /// Counts `bytes` (`None`: more than fit in 64 bits) as live, or says
    /// why not; `what` names them for the message.
    pub fn reserve(&mut self, bytes: Option<u64>, what: impl FnOnce() -> String) -> Result<(), MemoryError> {
        match bytes.and_then(|b| self.in_use.checked_add(b)) {
            Some(total) if total <= self.limit => {
                self.in_use = total;
                Ok(())
            }
            _ => Err(MemoryError { what: what(), bytes, in_use: self.in_use, limit: self.limit, refused: false }),
        }
    }

    /// Counts `bytes` reserved earlier as free again.
    pub fn release(&mut self, bytes: u64) {
        self.in_use = self.in_use.saturating_sub(bytes);
    }
}

/// `n` copies of `x`, or the allocator's refusal (no abort).
pub fn try_filled<T: Clone>(n: usize, x: T) -> Result<Vec<T>, TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)?;
    v.resize(n, x);
    Ok(v)
}

/// The `n` items of `items`, in a vector reserved fallibly first.
pub fn try_collect<T>(n: usize, items: impl IntoIterator<Item = T>) -> Result<Vec<T>, TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)?;
    v.extend(items.into_iter().take(n));
    Ok(v)
}

/// A size for people: `512 MiB`, `1.5 GiB`, `100 bytes`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 { format!("{value:.0} {}", UNITS[unit]) } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// Parses a size: a whole number of bytes, optionally followed by `K`,
/// `M`, `G` or `T` (binary multiples, so `16G` is 16 GiB; a following
/// `iB` or `B` and any case are accepted): `1048576`, `512M`, `16G`,
/// `1.5GiB`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits_end);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("`{text}` is not a size: write bytes, or a number with K, M, G or T (e.g. 512M, 16G)")),
    };
    let scale = (1u64 << shift) as f64;
    let value: f64 = number.parse().map_err(|_| format!("`{text}` is not a size: write bytes, or a number with K, M, G or T (e.g. 512M, 16G)"))?;
    let bytes = value * scale;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is more than 2^64 bytes"));
    }
    if shift == 0 && value.fract() != 0.0 {
        return Err(format!("`{text}` is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("16G"), Ok(16 << 30));
        assert_eq!(parse_bytes("16gib"), Ok(16 << 30));
        assert_eq!(parse_bytes("1.5K"), Ok(1536));
        assert_eq!(parse_bytes("2T"), Ok(2 << 40));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert!(parse_bytes("12X").unwrap_err().contains("is not a size"));
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("G").is_err());
        assert!(parse_bytes("1.5").unwrap_err().contains("whole number"));
        assert!(parse_bytes("99999999999T").unwrap_err().contains("2^64"));
    }

    #[test]
    fn sizes_format_in_the_largest_unit() {
        assert_eq!(format_bytes(100), "100 bytes");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(256 << 30), "256 GiB");
        assert_eq!(format_bytes(u64::MAX), "16 EiB");
        assert_eq!(format_bytes((1 << 30) + (1 << 20)), "1.0 GiB");
    }

    #[test]
    fn the_budget_counts_live_bytes() {
        let mut b = MemoryBudget::new(&Limits::at_most(100));
        b.reserve(Some(60), || "a".into()).unwrap();
        let e = b.reserve(Some(50), || "b".into()).unwrap_err();
        assert_eq!((e.in_use, e.limit, e.refused), (60, 100, false));
        assert_eq!(e.to_string(), "b needs 50 bytes, more than the memory limit of 100 bytes allows with 60 bytes already in use");
        b.release(60);
        b.reserve(Some(100), || "c".into()).unwrap();
        assert!(b.reserve(None, || "d".into()).unwrap_err().to_string().contains("more than 2^64 bytes"));
        assert!(b.reserve(Some(u64::MAX), || "e".into()).is_err());
    }

    #[test]
    fn fallible_vectors_report_refusal() {
        assert_eq!(try_filled(3, 1u8).unwrap(), vec![1, 1, 1]);
        assert!(try_filled(usize::MAX, 0u64).is_err());
        assert!(try_collect(usize::MAX / 2, std::iter::repeat(0u32)).is_err());
        assert_eq!(try_collect(2, [1, 2]).unwrap(), vec![1, 2]);
    }
}
