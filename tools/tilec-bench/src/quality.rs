//! `--model-quality RECORDS.jsonl`: how well each cost model ranks the
//! measured points of a records file (docs/search.md, "Model quality").
//!
//! For each workload file given and each of its compute ops, the records
//! of that op (its workload key) on the records' target are read back as
//! points of the op's space, in file order; a quarter is held out, learned
//! models are trained on the rest, and the analytic model and each learned
//! one rank the held-out points (`tilec_passes::search::quality`).

use serde_json::{Value as Json, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tilec::records::Record;
use tilec::target::Target;
use tilec_passes::search::quality::{Quality, compare_models};
use tilec_passes::search::space::{Config, Problem};

/// One op's figures.
pub struct OpQuality {
    pub workload: String,
    pub op: String,
    pub points: usize,
    pub failed: usize,
    pub held_out: usize,
    pub models: Vec<Quality>,
}

/// Reads `records` and reports per op of every file in `files`.
pub fn model_quality(records_path: &Path, files: &[PathBuf], target: &Arc<Target>) -> Result<Vec<OpQuality>, String> {
    let bytes = std::fs::read(records_path).map_err(|e| format!("cannot read records file `{}`: {e}", records_path.display()))?;
    let (good, bad) = tilec::records::parse_records(&bytes);
    if good.is_empty() {
        return Err(format!("records file `{}` has no record ({} lines that are not records)", records_path.display(), bad.len()));
    }
    let records: Vec<Record> = good.into_iter().map(|(_, r)| r).collect();
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        let (mut module, mut sources) = tilec::syntax::parse_str(&path.display().to_string(), &text).map_err(|(d, sm)| sm.render(&d.0))?;
        let v = tilec::verify::verify_module(&module);
        if v.has_errors() {
            return Err(sources.render(&v.0));
        }
        // The ops as the search saw them: after the passes the default
        // pipeline runs before `search` (a 1x1 convolution collapsed into
        // a GEMM has that GEMM's workload key in the records).
        tilec_passes::before_search(target, &mut sources).and_then(|mut pm| pm.run(&mut module)).map_err(|d| sources.render(&d.0))?;
        let workload = path.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        for f in &module.funcs {
            for op in f.walk() {
                let Some(c) = f.ops[op].kind.as_compute() else { continue };
                let Some(p) = Problem::new(f, op, target.clone(), 16).map(|p| p.with_intrinsics(f)) else { continue };
                let mut measured: Vec<(Config, f64)> = Vec::new();
                let mut failed = 0;
                for r in records.iter().filter(|r| r.workload == p.workload && r.target == target.name) {
                    let Some(cfg) = p.config_of(&r.schedule.to_schedule(&target.name)) else { continue };
                    // The final rounds time points again: the first timing counts.
                    if measured.iter().any(|(m, _)| *m == cfg) {
                        continue;
                    }
                    let seconds = r.latency.as_ref().map_or(f64::INFINITY, |l| l.median_s);
                    failed += usize::from(!seconds.is_finite());
                    measured.push((cfg, seconds));
                }
                let Some(models) = compare_models(&p, &measured) else { continue };
                let ok = measured.len() - failed;
                out.push(OpQuality {
                    workload: workload.clone(),
                    op: c.label.clone().unwrap_or_else(|| "compute".into()),
                    points: measured.len(),
                    failed,
                    held_out: ok / tilec_passes::search::quality::HOLD_OUT_EVERY,
                    models,
                });
            }
        }
    }
    Ok(out)
}

/// A Markdown table: one row per op, Spearman's ρ and pairwise accuracy
/// per model.
pub fn markdown(rows: &[OpQuality]) -> String {
    let Some(first) = rows.first() else { return "No op had 8 timed records to hold a quarter out from.\n".to_string() };
    let names: Vec<&str> = first.models.iter().map(|q| q.model).collect();
    let mut s = String::from("| workload | op | points (failed) | held out |");
    for n in &names {
        s.push_str(&format!(" {n} ρ | {n} pairs |"));
    }
    s.push_str("\n|---|---|---|---|");
    s.push_str(&"---|---|".repeat(names.len()));
    s.push('\n');
    for r in rows {
        s.push_str(&format!("| {} | {} | {} ({}) | {} |", r.workload, r.op, r.points, r.failed, r.held_out));
        for q in &r.models {
            s.push_str(&format!(" {:.3} | {:.3} |", q.spearman, q.pairwise));
        }
        s.push('\n');
    }
    s
}

pub fn to_json(rows: &[OpQuality], target: &str, records: &Path) -> Json {
    json!({
        "target": target,
        "records": records.display().to_string(),
        "ops": rows.iter().map(|r| json!({
            "workload": r.workload,
            "op": r.op,
            "points": r.points,
            "failed": r.failed,
            "held_out": r.held_out,
            "models": r.models.iter().map(|q| json!({"model": q.model, "spearman": q.spearman, "pairwise": q.pairwise})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
