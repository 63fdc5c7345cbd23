//! The records database: every measurement a search makes, one JSON object
//! per line (JSON Lines), so that tuning can resume and `apply-records` can
//! compile with the best known schedule without searching.
//!
//! A line holds the workload key (what is computed, independent of value
//! names: [`workload_key`]), the target, the schedule as data, the decision
//! sentence (TLM's "tensor sentence": the op, the target, then one token per
//! decision in a fixed order), the strategy that proposed it, the latency
//! statistics or the failure, and the tilec version.
//!
//! Reading never fails as a whole: [`parse_records`] returns the records of
//! the good lines and, for each bad line (not JSON, truncated, missing
//! fields), its line number and why. The driver reads the file (passes do
//! no I/O) and reports bad lines as warnings.

use crate::ir::{AffineExpr, AxisId, CacheDirective, Compute, Function, Op, Schedule};
use serde::{Deserialize, Serialize};

/// The name under which the driver hands the search the records already in
/// the `--records` file, so that a search resumes: a candidate measured
/// before (same workload, target and schedule) is not measured again.
pub const RESUME: &str = "<--records>";

/// The schedule of a record, as data (not text: records are read without
/// the op's source at hand). Mirrors [`Schedule`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordSchedule {
    pub tiles: Vec<(String, Vec<u64>)>,
    #[serde(default)]
    pub vthreads: Vec<(String, u64)>,
    /// (read position, read name, memory level).
    #[serde(default)]
    pub cache: Vec<(usize, String, String)>,
    #[serde(default)]
    pub unroll: u64,
    #[serde(default)]
    pub vector: Option<(String, u64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<String>,
}

impl RecordSchedule {
    pub fn of(s: &Schedule) -> RecordSchedule {
        RecordSchedule {
            tiles: s.tiles.clone(),
            vthreads: s.vthreads.clone(),
            cache: s.cache.iter().map(|c| (c.read, c.read_name.clone(), c.level.clone())).collect(),
            unroll: s.unroll,
            vector: s.vector.clone(),
            order: s.order.clone(),
        }
    }

    pub fn to_schedule(&self, target: &str) -> Schedule {
        let mut s = Schedule::new(target);
        s.tiles = self.tiles.clone();
        s.vthreads = self.vthreads.clone();
        s.cache = self.cache.iter().map(|(read, name, level)| CacheDirective { read: *read, read_name: name.clone(), level: level.clone() }).collect();
        s.unroll = self.unroll;
        s.vector = self.vector.clone();
        s.order = self.order.clone();
        s
    }
}

/// Run-time statistics of a measured candidate, in seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub runs: usize,
}

/// One measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub workload: String,
    pub target: String,
    pub schedule: RecordSchedule,
    pub sentence: String,
    pub strategy: String,
    /// The timing, when the candidate ran and computed the right thing.
    pub latency: Option<Latency>,
    /// GFLOP/s at the median time.
    pub gflops: Option<f64>,
    /// Why there is no latency (compile error, crash, timeout, wrong result).
    #[serde(default)]
    pub error: Option<String>,
    pub version: String,
}

impl Record {
    /// The record as one line of JSON (no newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("records serialise")
    }
}

/// Parses a records file: the records of the good lines (with their line
/// numbers, from 1), and (line, reason) for every line that is not a
/// record. Blank lines are skipped silently.
pub fn parse_records(text: &str) -> (Vec<(usize, Record)>, Vec<(usize, String)>) {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(r) => good.push((i + 1, r)),
            Err(e) => bad.push((i + 1, e.to_string())),
        }
    }
    (good, bad)
}

/// The best (lowest median latency) measured record for `workload` on
/// `target`.
pub fn best_record<'a>(records: &'a [Record], workload: &str, target: &str) -> Option<&'a Record> {
    records
        .iter()
        .filter(|r| r.workload == workload && r.target == target)
        .filter_map(|r| r.latency.as_ref().map(|l| (l.median_s, r)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, r)| r)
}

fn expr_text(c: &Compute, e: &AffineExpr<AxisId>) -> String {
    let mut s = String::new();
    for (i, &(v, k)) in e.terms().iter().enumerate() {
        if i > 0 {
            s.push('+');
        }
        if k != 1 {
            s.push_str(&format!("{k}*"));
        }
        s.push_str(&c.axis(v).name);
    }
    if e.constant_term() != 0 || e.terms().is_empty() {
        if !s.is_empty() {
            s.push('+');
        }
        s.push_str(&e.constant_term().to_string());
    }
    if e.divisor() != 1 {
        s = format!("({s})/{}", e.divisor());
    }
    s
}

/// What a compute op computes, as text independent of value names and
/// source positions: label, axes with extents and kinds, the combiner, each
/// read's tensor type, indices and padding, the output's type and indices,
/// and the mnemonics of the body's and epilogue's ops. Two ops with the same
/// key have the same iteration space and access pattern, so a schedule of
/// one is a valid schedule of the other.
pub fn workload_key(f: &Function, op: Op) -> Option<String> {
    let data = f.op(op);
    let c = data.kind.as_compute()?;
    let mut k = String::new();
    k.push_str(c.label.as_deref().unwrap_or("compute"));
    k.push('(');
    let axes: Vec<String> = c.axes.iter().map(|a| format!("{}{}{}", a.name, if a.kind == crate::ir::AxisKind::Spatial { ":" } else { ":r" }, a.extent)).collect();
    k.push_str(&axes.join(","));
    k.push(')');
    if let Some(comb) = c.combiner {
        k.push_str(&format!(" {}", comb.name()));
    }
    for (i, r) in c.all_reads() {
        let ty = f.value_type(*data.operands.get(i)?);
        let idx: Vec<String> = r.indices.iter().map(|e| expr_text(c, e)).collect();
        k.push_str(&format!(" {}[{}]", ty, idx.join(",")));
        if let Some(p) = &r.pad {
            k.push_str(&format!("pad{}", p.as_f64()));
        }
    }
    let out = f.value_type(*data.results.first()?);
    let idx: Vec<String> = c.output.iter().map(|e| expr_text(c, e)).collect();
    k.push_str(&format!(" -> {}[{}]", out, idx.join(",")));
    for &r in &data.regions {
        let ops: Vec<&str> = f.region(r).ops.iter().map(|&o| f.op(o).kind.mnemonic()).collect();
        k.push_str(&format!(" {{{}}}", ops.join(" ")));
    }
    Some(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            workload: "gemm(i:4,j:4,k:r4) sum".into(),
            target: "x86-avx2".into(),
            schedule: RecordSchedule { tiles: vec![("i".into(), vec![4, 2, 1])], vthreads: vec![], cache: vec![], unroll: 0, vector: None, order: vec![] },
            sentence: "op gemm".into(),
            strategy: "markov".into(),
            latency: Some(Latency { median_s: 1e-3, min_s: 9e-4, max_s: 2e-3, runs: 3 }),
            gflops: Some(1.0),
            error: None,
            version: crate::VERSION.into(),
        }
    }

    #[test]
    fn records_round_trip_and_bad_lines_are_skipped() {
        let r = record();
        let text = format!("{}\n{{\"workload\": 1}}\n\n{}\n{}", r.to_json_line(), r.to_json_line(), &r.to_json_line()[..20]);
        let (good, bad) = parse_records(&text);
        assert_eq!(good.iter().map(|(l, _)| *l).collect::<Vec<_>>(), vec![1, 4]);
        assert_eq!(good[0].1, r);
        assert_eq!(bad.iter().map(|(l, _)| *l).collect::<Vec<_>>(), vec![2, 5]);
    }

    #[test]
    fn the_best_record_has_the_lowest_median() {
        let mut a = record();
        let mut b = record();
        b.latency.as_mut().unwrap().median_s = 5e-4;
        b.sentence = "b".into();
        a.schedule.tiles[0].1 = vec![4, 4, 4];
        let mut failed = record();
        failed.latency = None;
        let all = vec![a, b.clone(), failed];
        assert_eq!(best_record(&all, "gemm(i:4,j:4,k:r4) sum", "x86-avx2"), Some(&b));
        assert_eq!(best_record(&all, "other", "x86-avx2"), None);
    }
}
