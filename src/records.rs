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
//! Writing is durable: a search hands each record to a [`RecordSink`] as
//! soon as it is measured, and a [`RecordsFile`] appends it as one line in
//! one `write` and syncs it before the search goes on, so a search killed
//! at any point keeps every measurement it finished. A line cut short (a
//! crash inside a write, a full disk) is repaired before the next append:
//! it stays one bad line instead of swallowing the next record.
//!
//! Reading never fails as a whole: [`parse_records`] takes the file's bytes,
//! splits them at newlines and decodes each line on its own, and returns
//! the records of the good lines and, for each bad line (not UTF-8, not
//! JSON, truncated, missing fields), its line number and why. The driver
//! reads the file (passes do no I/O) and reports bad lines as warnings.

use crate::ir::{AffineExpr, AxisId, CacheDirective, Compute, Function, IntrinsicChoice, Op, Schedule};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// The `intrinsic` knob; absent in records written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intrinsic: Option<RecordIntrinsic>,
}

/// A schedule's `intrinsic` knob as data. Mirrors [`IntrinsicChoice`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordIntrinsic {
    pub name: String,
    /// (read position, read name) of the read playing `a`.
    pub a: (usize, String),
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub m: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub n: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub k: Vec<String>,
}

impl RecordIntrinsic {
    /// Is this the mapping `c` names (the read playing `a` by position;
    /// its name may differ between ops computing the same thing)?
    pub fn is_mapping(&self, c: &IntrinsicChoice) -> bool {
        self.name == c.name && self.a.0 == c.a && self.m == c.m && self.n == c.n && self.k == c.k
    }
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
            intrinsic: s.intrinsic.as_ref().map(|x| RecordIntrinsic { name: x.name.clone(), a: (x.a, x.a_name.clone()), m: x.m.clone(), n: x.n.clone(), k: x.k.clone() }),
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
        s.intrinsic = self.intrinsic.as_ref().map(|x| IntrinsicChoice { name: x.name.clone(), a: x.a.0, a_name: x.a.1.clone(), m: x.m.clone(), n: x.n.clone(), k: x.k.clone() });
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

impl Latency {
    /// The record of a measurement's timing.
    pub fn of(t: &crate::measure::Timing) -> Latency {
        Latency { median_s: t.median_s, min_s: t.min_s, max_s: t.max_s, runs: t.runs }
    }

    /// The timing a record keeps (a resumed measurement's).
    pub fn timing(&self) -> crate::measure::Timing {
        crate::measure::Timing { median_s: self.median_s, min_s: self.min_s, max_s: self.max_s, runs: self.runs }
    }
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
    /// Threads the candidate ran on (absent in records made before it was
    /// kept: those ran on one). A latency holds for its thread count only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    pub version: String,
}

impl Record {
    /// The record as one line of JSON (no newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("records serialise")
    }
}

/// A record with its line number in the file (from 1).
pub type NumberedRecord = (usize, Record);

/// A line that is not a record: its number (from 1) and why.
pub type BadLine = (usize, String);

/// Parses a records file's bytes: the records of the good lines (with
/// their line numbers, from 1), and (line, reason) for every line that is
/// not a record. Lines are split at `\n` and decoded one by one, so a line
/// that is not UTF-8 costs that line only. Blank lines are skipped
/// silently.
pub fn parse_records(bytes: &[u8]) -> (Vec<NumberedRecord>, Vec<BadLine>) {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    let unterminated = !bytes.is_empty() && !bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let last = lines.len();
    for (i, line) in lines.into_iter().enumerate() {
        let number = i + 1;
        if line.trim_ascii().is_empty() {
            continue;
        }
        let parsed = match std::str::from_utf8(line) {
            Err(e) => Err(format!("not UTF-8: invalid byte at column {}", e.valid_up_to() + 1)),
            Ok(text) => serde_json::from_str::<Record>(text).map_err(|e| e.to_string()),
        };
        match parsed {
            Ok(r) => good.push((number, r)),
            Err(why) if unterminated && number == last => bad.push((number, format!("{why}; the file ends inside this line, whose write was cut short"))),
            Err(why) => bad.push((number, why)),
        }
    }
    (good, bad)
}

/// Where a search's measurements go, as they are made. The driver installs
/// one on the pass context (`tilec --records FILE`: a [`RecordsFile`]);
/// a tuner serving several machines would install its own. Every strategy
/// measures through the search's one measuring path, which calls `append`
/// right after each measurement completes.
pub trait RecordSink {
    /// Stores one record, durably, before returning: a process killed
    /// after this call keeps it. `Err` is a sentence for a diagnostic
    /// (what could not be stored and why); the search stops measuring
    /// after it, since what it measured next would be lost.
    fn append(&mut self, record: &Record) -> Result<(), String>;
}

/// A records file open for appending: one line per record, written with
/// one `write` call (the file is opened with `O_APPEND`, so lines from
/// processes sharing the file do not interleave) and synced to the disk
/// (`sync_data`) before [`RecordsFile::append_line`] returns. Each append
/// first looks at the file's last byte: a file that ends without a newline
/// (a line cut short) gets one in the same write, so the cut line stays one
/// bad line and the record starts a line of its own.
///
/// Clones share the open file (`--split-input-file` runs one pipeline per
/// chunk, each given a clone).
#[derive(Clone, Debug)]
pub struct RecordsFile {
    file: Arc<File>,
    path: PathBuf,
    /// A regular file, which can be read back and repaired; a device or a
    /// pipe (`/dev/null`) is only written to.
    regular: bool,
}

impl RecordsFile {
    /// Opens `path` for reading and appending, creating it if it does not
    /// exist (its folder must). Opening is the check that the file can be
    /// written, done before a search spends time measuring.
    pub fn open(path: &Path) -> std::io::Result<RecordsFile> {
        let file = OpenOptions::new().read(true).append(true).create(true).open(path)?;
        let regular = file.metadata()?.is_file();
        Ok(RecordsFile { file: Arc::new(file), path: path.to_path_buf(), regular })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes the file holds now (for [`parse_records`]); nothing for a
    /// file that is not a regular file.
    pub fn read_all(&self) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        if self.regular {
            let mut file = &*self.file;
            file.seek(SeekFrom::Start(0))?;
            file.read_to_end(&mut bytes)?;
        }
        Ok(bytes)
    }

    /// Does the file end inside a line (its last byte is not a newline)?
    fn ends_inside_a_line(&self) -> std::io::Result<bool> {
        if !self.regular {
            return Ok(false);
        }
        let mut file = &*self.file;
        let len = file.seek(SeekFrom::End(0))?;
        if len == 0 {
            return Ok(false);
        }
        file.seek(SeekFrom::Start(len - 1))?;
        let mut last = [0u8];
        file.read_exact(&mut last)?;
        Ok(last[0] != b'\n')
    }

    /// Appends `line` (which must hold no newline) and a newline, repairing
    /// a cut last line first, in one `write`; then syncs the data.
    pub fn append_line(&self, line: &str) -> std::io::Result<()> {
        debug_assert!(!line.contains('\n'), "a record is one line");
        let mut bytes = Vec::with_capacity(line.len() + 2);
        if self.ends_inside_a_line()? {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        let mut file = &*self.file;
        // One write puts the whole line in the file at once. A regular
        // file takes all of it unless the disk is full; what a short
        // write left is then written after it (and most likely fails,
        // leaving a cut line that the next append repairs).
        let written = loop {
            match file.write(&bytes) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        file.write_all(&bytes[written..])?;
        file.flush()?;
        if self.regular { self.file.sync_data() } else { Ok(()) }
    }
}

impl RecordSink for RecordsFile {
    fn append(&mut self, record: &Record) -> Result<(), String> {
        self.append_line(&record.to_json_line()).map_err(|e| format!("cannot append a record to `{}`: {}", self.path.display(), crate::input::io_reason(&e)))
    }
}

/// Whether two workload keys compute the same thing: equal but for their
/// labels ([`computation_key`]), so that a record of one op applies to
/// every op computing what it computes (a network's repeated layers, named
/// apart).
pub fn same_computation(a: &str, b: &str) -> bool {
    let computation = |k: &str| k.find('(').map_or(k.len(), |i| i);
    a[computation(a)..] == b[computation(b)..]
}

/// The best (lowest median latency) measured record for `workload` on
/// `target` (of any op computing the same thing: [`same_computation`]).
pub fn best_record<'a>(records: &'a [Record], workload: &str, target: &str) -> Option<&'a Record> {
    records
        .iter()
        .filter(|r| r.target == target && same_computation(&r.workload, workload))
        .filter_map(|r| r.latency.as_ref().map(|l| (l.median_s, r)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, r)| r)
}

/// An index expression of `c` as text (`oh*2+kh`, `(i+1)/2`): the form
/// workload keys and TLM's sentences write.
pub fn expr_text(c: &Compute, e: &AffineExpr<AxisId>) -> String {
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
    let c = f.op(op).kind.as_compute()?;
    Some(format!("{}{}", c.label.as_deref().unwrap_or("compute"), computation_key(f, op)?))
}

/// [`workload_key`] without the label: what the op computes, whatever it
/// is called. A network's ops with the same computation key are one tuning
/// task (`tasks.rs`).
pub fn computation_key(f: &Function, op: Op) -> Option<String> {
    let data = f.op(op);
    let c = data.kind.as_compute()?;
    let mut k = String::new();
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
            schedule: RecordSchedule { tiles: vec![("i".into(), vec![4, 2, 1])], vthreads: vec![], cache: vec![], unroll: 0, vector: None, order: vec![], intrinsic: None },
            sentence: "op gemm".into(),
            strategy: "markov".into(),
            latency: Some(Latency { median_s: 1e-3, min_s: 9e-4, max_s: 2e-3, runs: 3 }),
            gflops: Some(1.0),
            error: None,
            threads: None,
            version: crate::VERSION.into(),
        }
    }

    #[test]
    fn a_record_applies_to_every_op_computing_the_same_thing() {
        let mut a = record();
        a.workload = "layer1.conv(n:1,f:8,c:r8) sum".into();
        let mut b = record();
        b.workload = "layer2.conv(n:1,f:8,c:r8) sum".into();
        b.latency.as_mut().unwrap().median_s = 5e-4;
        assert!(same_computation(&a.workload, "(n:1,f:8,c:r8) sum"));
        assert!(!same_computation(&a.workload, "layer1.conv(n:1,f:16,c:r8) sum"));
        let records = [a, b.clone()];
        assert_eq!(best_record(&records, "stem(n:1,f:8,c:r8) sum", "x86-avx2"), Some(&b));
        assert_eq!(best_record(&records, "stem(n:1,f:8,c:r8) sum", "x86-avx512"), None);
    }

    #[test]
    fn records_round_trip_and_bad_lines_are_skipped() {
        let r = record();
        let text = format!("{}\n{{\"workload\": 1}}\n\n{}\n{}", r.to_json_line(), r.to_json_line(), &r.to_json_line()[..20]);
        let (good, bad) = parse_records(text.as_bytes());
        assert_eq!(good.iter().map(|(l, _)| *l).collect::<Vec<_>>(), vec![1, 4]);
        assert_eq!(good[0].1, r);
        assert_eq!(bad.iter().map(|(l, _)| *l).collect::<Vec<_>>(), vec![2, 5]);
        // The last line has no newline: the reason says it was cut short.
        assert!(bad[1].1.ends_with("the file ends inside this line, whose write was cut short"), "{}", bad[1].1);
        assert!(!bad[0].1.contains("cut short"), "{}", bad[0].1);
    }

    #[test]
    fn a_schedule_with_an_intrinsic_round_trips_and_old_lines_load_without_one() {
        let mut s = Schedule::new("x86-avx512");
        s.tiles = vec![("j".into(), vec![64, 32, 16]), ("k".into(), vec![128, 64, 4])];
        s.intrinsic = Some(IntrinsicChoice { name: "vpdpbusd.zmm".into(), a: 1, a_name: "b".into(), m: vec!["j".into()], n: vec![], k: vec!["k".into()] });
        let mut r = record();
        r.schedule = RecordSchedule::of(&s);
        let line = r.to_json_line();
        assert!(line.contains(r#""intrinsic":{"name":"vpdpbusd.zmm","a":[1,"b"],"m":["j"],"k":["k"]}"#), "{line}");
        let (good, bad) = parse_records(line.as_bytes());
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(good[0].1, r);
        assert_eq!(good[0].1.schedule.to_schedule("x86-avx512"), s);
        // A line written before the knob existed has no `intrinsic` key.
        let old = record().to_json_line();
        assert!(!old.contains("intrinsic"), "{old}");
        let (good, _) = parse_records(old.as_bytes());
        assert_eq!(good[0].1.schedule.intrinsic, None);
    }

    #[test]
    fn a_line_that_is_not_utf8_is_skipped_with_its_number() {
        let r = record();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(r.to_json_line().as_bytes());
        bytes.extend_from_slice(b"\n{\"workload\":\"\xff\xfe\"}\n");
        bytes.extend_from_slice(r.to_json_line().as_bytes());
        bytes.push(b'\n');
        let (good, bad) = parse_records(&bytes);
        assert_eq!(good.iter().map(|(l, _)| *l).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(bad, vec![(2, "not UTF-8: invalid byte at column 14".to_string())]);
    }

    /// A fresh path in the temporary folder, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let path = std::env::temp_dir().join(format!("tilec-records-test-{}-{name}.jsonl", std::process::id()));
            let _ = std::fs::remove_file(&path);
            Scratch(path)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn each_append_is_one_whole_line() {
        let scratch = Scratch::new("append");
        let mut file = RecordsFile::open(&scratch.0).expect("open");
        // A second handle on the same file, as a second process would have.
        let mut other = RecordsFile::open(&scratch.0).expect("open");
        let mut records = Vec::new();
        for i in 0..4 {
            let mut r = record();
            r.sentence = format!("candidate {i}");
            let appended = if i % 2 == 0 { file.append(&r) } else { other.append(&r) };
            appended.expect("append");
            records.push(r);
        }
        let bytes = std::fs::read(&scratch.0).expect("read");
        let expected: String = records.iter().map(|r| r.to_json_line() + "\n").collect();
        assert_eq!(String::from_utf8(bytes.clone()).unwrap(), expected);
        assert_eq!(file.read_all().expect("read back"), bytes);
        let (good, bad) = parse_records(&bytes);
        assert!(bad.is_empty());
        assert_eq!(good.into_iter().map(|(_, r)| r).collect::<Vec<_>>(), records);
    }

    #[test]
    fn a_cut_last_line_is_repaired_before_the_next_append() {
        let scratch = Scratch::new("repair");
        let r = record();
        let whole = r.to_json_line();
        std::fs::write(&scratch.0, format!("{whole}\n{}", &whole[..30])).expect("write");
        let mut file = RecordsFile::open(&scratch.0).expect("open");
        file.append(&r).expect("append");
        file.append(&r).expect("append");
        let bytes = std::fs::read(&scratch.0).expect("read");
        assert_eq!(String::from_utf8(bytes.clone()).unwrap(), format!("{whole}\n{}\n{whole}\n{whole}\n", &whole[..30]));
        // The cut line is the only bad one; the record after it survives.
        let (good, bad) = parse_records(&bytes);
        assert_eq!(good.iter().map(|(l, _)| *l).collect::<Vec<_>>(), vec![1, 3, 4]);
        assert_eq!(bad.iter().map(|(l, _)| *l).collect::<Vec<_>>(), vec![2]);
        // A file that ends with its newline gets no extra one, nor does an empty file.
        let empty = Scratch::new("empty");
        RecordsFile::open(&empty.0).expect("open").append(&r).expect("append");
        assert_eq!(std::fs::read(&empty.0).expect("read"), format!("{whole}\n").into_bytes());
    }

    #[test]
    fn a_device_is_written_but_not_read_back() {
        let mut null = RecordsFile::open(Path::new("/dev/null")).expect("open /dev/null");
        null.append(&record()).expect("append");
        assert!(null.read_all().expect("read").is_empty());
        // A full disk is an error that names the file.
        if Path::new("/dev/full").exists() {
            let mut full = RecordsFile::open(Path::new("/dev/full")).expect("open /dev/full");
            let why = full.append(&record()).unwrap_err();
            assert!(why.starts_with("cannot append a record to `/dev/full`: "), "{why}");
        }
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
