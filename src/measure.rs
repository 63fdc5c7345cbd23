//! Measurement behind a trait: the search pass asks an [`Evaluator`] how
//! fast a candidate is, without knowing how it is compiled or run. The
//! implementations (compile with LLVM, run in a worker process, time)
//! live in `tilec-codegen`; tests can supply their own.

use crate::ir::Module;

/// Wall-clock statistics of a candidate's timed runs, in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub runs: usize,
}

impl Timing {
    /// Statistics of a list of run times (`None` if empty).
    pub fn of(times: &[f64]) -> Option<Timing> {
        if times.is_empty() {
            return None;
        }
        let mut t = times.to_vec();
        t.sort_by(f64::total_cmp);
        Some(Timing { median_s: t[t.len() / 2], min_s: t[0], max_s: t[t.len() - 1], runs: t.len() })
    }

    /// The median of a list of times (`None` if empty): the upper one of
    /// an even count, as [`Timing::of`] takes it.
    pub fn median_of(times: &[f64]) -> Option<f64> {
        Timing::of(times).map(|t| t.median_s)
    }

    /// Relative spread, (max - min) / median.
    pub fn spread(&self) -> f64 {
        if self.median_s > 0.0 { (self.max_s - self.min_s) / self.median_s } else { 0.0 }
    }
}

/// Why a candidate has no time.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// It did not compile (a schedule the code generator cannot handle).
    Compile(String),
    /// It crashed while running.
    Crash(String),
    /// It ran past the time limit.
    Timeout(f64),
    /// It ran but computed something else than the reference.
    WrongResult(String),
    /// Anything else (the worker could not start, I/O).
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Compile(e) => write!(f, "compile error: {e}"),
            Failure::Crash(e) => write!(f, "crashed: {e}"),
            Failure::Timeout(s) => write!(f, "timed out after {s:.1} s"),
            Failure::WrongResult(e) => write!(f, "wrong result: {e}"),
            Failure::Other(e) => f.write_str(e),
        }
    }
}

/// The outcome of measuring one candidate.
pub type Measurement = Result<Timing, Failure>;

/// Measures candidates: a candidate is a module whose function `func` is
/// fully scheduled (loop-level IR).
pub trait Evaluator {
    fn evaluate(&mut self, candidate: &Module, func: &str) -> Measurement;

    /// Threads candidates run on (kept in each record: a latency holds for
    /// its thread count only).
    fn threads(&self) -> u32 {
        1
    }

    /// Tells the evaluator what the next candidates must compute: `func` of
    /// `reference` (level 0, unscheduled). An evaluator that checks results
    /// computes its reference here; `Err` says why it cannot (the search
    /// then reports its measurements as unchecked). The default checks
    /// nothing.
    fn set_reference(&mut self, reference: &Module, func: &str) -> Result<(), String> {
        let _ = (reference, func);
        Err("this evaluator does not check results".into())
    }
}
