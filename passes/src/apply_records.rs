//! `apply-records{file=...}`: compiles with the best known schedules. Each
//! compute op without a schedule gets the schedule of the fastest measured
//! record of its workload on the pipeline's target.
//!
//! Passes do no I/O: the driver reads the file the option names (reporting
//! bad lines as warnings, `tilec::records::parse_records`) and hands the
//! records in through the pass context, keyed by the option's text.

use tilec::diag::{Diagnostic, Diagnostics};
use tilec::ir::*;
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};

pub static DECL: PassDecl = PassDecl {
    name: "apply-records",
    summary: "Give unscheduled compute ops the best schedule in a records file",
    description: "
Gives every compute op without a schedule the schedule of the fastest
successful measurement of the same workload (what is computed, independent
of value names and labels, so a network's repeated layers share records) on
the pipeline's target in the records file `file`, as
written by `tilec --records FILE` during a measured `search`. Ops without a
record keep no schedule (follow with `search` to schedule them, or with
`tile{unscheduled=serial}`); the search report (`--search-report`) lists
what was applied. The `tilec` driver reads the file: lines that are not
records (corrupt or truncated) are warnings, never errors.",
    options: &[OptionDecl { name: "file", kind: OptionKind::Str, default: "", help: "the records file (JSON lines)" }],
    statistics: &[("applied", "ops given a recorded schedule"), ("missing", "ops without a record")],
    create: |o: &PassOptions| Box::new(ApplyRecords { file: o.str("file").to_string() }),
};

pub struct ApplyRecords {
    pub file: String,
}

impl Pass for ApplyRecords {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        // Nothing to schedule, nothing to read.
        let unscheduled = module.funcs.iter().any(|f| f.regions[f.body].ops.iter().any(|&o| f.ops[o].kind.as_compute().is_some_and(|c| c.schedule.is_none())));
        if !unscheduled {
            return Ok(());
        }
        if self.file.is_empty() {
            return Err(Diagnostic::error("apply-records needs a records file: apply-records{file=PATH}").into());
        }
        let Some(target) = cx.target().map(|t| t.name.clone()) else {
            return Err(Diagnostic::error("apply-records needs a target to pick records for").with_help("pass --target").into());
        };
        let Some(records) = cx.records(&self.file).map(<[_]>::to_vec) else {
            return Err(Diagnostic::error(format!("the records file `{}` was not read", self.file))
                .with_note("the driver reads records files; run the pass through `tilec`")
                .into());
        };
        for f in &mut module.funcs {
            let ops: Vec<Op> = f.regions[f.body].ops.clone();
            for op in ops {
                let Some(c) = f.ops[op].kind.as_compute() else { continue };
                if c.schedule.is_some() {
                    continue;
                }
                let key = tilec::records::workload_key(f, op).unwrap_or_default();
                let label = c.label.as_deref().map_or_else(String::new, |l| format!(" \"{l}\""));
                match tilec::records::best_record(&records, &key, &target) {
                    Some(r) => {
                        let s = r.schedule.to_schedule(&target);
                        let median = r.latency.as_ref().map_or(0.0, |l| l.median_s);
                        cx.report(format!("apply-records: @{} compute{label} on `{target}`: {} ({:.4} ms measured)\n", f.name, crate::search::tensor_language::decisions_text(&r.sentence), median * 1e3));
                        f.ops[op].kind.as_compute_mut().expect("compute").schedule = Some(s);
                        cx.bump("applied", 1);
                    }
                    None => {
                        cx.report(format!("apply-records: @{} compute{label} on `{target}`: no record in `{}`\n", f.name, self.file));
                        cx.bump("missing", 1);
                    }
                }
            }
        }
        Ok(())
    }
}
