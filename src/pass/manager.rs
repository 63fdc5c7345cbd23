//! Runs a pipeline: constructs each pass from its validated options, calls
//! the instrumentation hooks around it, re-verifies the module after it,
//! and measures it.

use super::{Instrumentation, PassContext, PassEvent, Pipeline};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::Module;
use crate::verify::verify_module_with;
use std::time::{Duration, Instant};

pub struct PassManager {
    pipeline: Pipeline,
    instrumentations: Vec<Box<dyn Instrumentation>>,
    verify_each: bool,
    target: Option<std::sync::Arc<crate::target::Target>>,
    evaluator: Option<Box<dyn crate::measure::Evaluator>>,
    no_evaluator_reason: Option<String>,
    records: Vec<(String, std::sync::Arc<Vec<crate::records::Record>>)>,
    record_sink: Option<Box<dyn crate::records::RecordSink>>,
    language_models: crate::lm::LanguageModels,
    kernel_threads: Option<usize>,
}

/// What a run measured: wall time per pass (and for verification) and the
/// statistics each pass reported.
#[derive(Debug, Default)]
pub struct RunReport {
    pub timings: Vec<(String, Duration)>,
    /// Per pass run that declares statistics: every declared counter, in
    /// declaration order, zeros included.
    pub statistics: Vec<(String, Vec<(&'static str, u64)>)>,
    /// What the search pass reported (`--search-report`), in order.
    pub search_reports: Vec<String>,
    /// Measurements made during the run (each was stored in the record
    /// sink, if one was installed, as it was made).
    pub records: Vec<crate::records::Record>,
}

impl PassManager {
    pub fn new(pipeline: Pipeline) -> Self {
        PassManager {
            pipeline,
            instrumentations: Vec::new(),
            verify_each: true,
            target: None,
            evaluator: None,
            no_evaluator_reason: None,
            records: Vec::new(),
            record_sink: None,
            language_models: Default::default(),
            kernel_threads: None,
        }
    }

    /// The target passes compile for (`--target`).
    pub fn set_target(&mut self, target: std::sync::Arc<crate::target::Target>) {
        self.target = Some(target);
    }

    /// The evaluator measured search strategies use; it is handed to the
    /// passes through [`PassContext`] and kept across runs.
    pub fn set_evaluator(&mut self, e: Box<dyn crate::measure::Evaluator>) {
        self.evaluator = Some(e);
    }

    /// The threads the compiled kernels will run on (`--threads`), which
    /// the search's model predicts for when nothing measures its
    /// candidates (a measured search predicts for its evaluator's).
    pub fn set_kernel_threads(&mut self, threads: usize) {
        self.kernel_threads = Some(threads);
    }

    /// Why no evaluator is installed, for the search report.
    pub fn set_no_evaluator_reason(&mut self, why: impl Into<String>) {
        self.no_evaluator_reason = Some(why.into());
    }

    /// Installs what a driver's evaluator lookup found: an evaluator, none
    /// (the pipeline measures nothing), or why there is none where it
    /// would measure.
    pub fn install_evaluator(&mut self, found: Result<Option<Box<dyn crate::measure::Evaluator>>, String>) {
        match found {
            Ok(Some(e)) => self.set_evaluator(e),
            Ok(None) => {}
            Err(why) => self.set_no_evaluator_reason(why),
        }
    }

    /// Records the driver read from `file`, for `apply-records{file=...}`.
    pub fn add_records(&mut self, file: impl Into<String>, records: std::sync::Arc<Vec<crate::records::Record>>) {
        self.records.push((file.into(), records));
    }

    /// Where measurements are stored as they are made (`--records`); it
    /// is handed to the passes through [`PassContext`] and kept across runs.
    pub fn set_record_sink(&mut self, sink: Box<dyn crate::records::RecordSink>) {
        self.record_sink = Some(sink);
    }

    /// What loads `search{strategy=tlm model=PATH}`'s models (the driver
    /// installs `tilec-tlm`'s); they stay loaded across runs.
    pub fn set_model_loader(&mut self, loader: Box<dyn crate::lm::TokenModelLoader>) {
        self.language_models = crate::lm::LanguageModels::new(loader);
    }

    pub fn add_instrumentation(&mut self, i: Box<dyn Instrumentation>) {
        self.instrumentations.push(i);
    }

    /// Re-verify after every pass (on by default; a pass that breaks the IR
    /// is a compiler bug, and this is where it is caught).
    pub fn set_verify_each(&mut self, on: bool) {
        self.verify_each = on;
    }

    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Runs every pass in order. Stops at the first pass that fails, or
    /// whose output does not verify.
    pub fn run(&mut self, module: &mut Module) -> Result<RunReport, Diagnostics> {
        let mut report = RunReport::default();
        let mut cx = PassContext::with_target(self.target.clone());
        cx.set_evaluator(self.evaluator.take());
        cx.set_kernel_threads(self.kernel_threads);
        cx.set_no_evaluator_reason(self.no_evaluator_reason.clone());
        cx.set_record_sink(self.record_sink.take());
        cx.set_language_models(std::mem::take(&mut self.language_models));
        for (file, r) in &self.records {
            cx.add_records(file.clone(), r.clone());
        }
        let mut verify_time = Duration::ZERO;
        let mut result = Ok(());
        for inst in &mut self.instrumentations {
            inst.before_pipeline(module);
        }
        for (i, spec) in self.pipeline.passes.iter().enumerate() {
            let text = spec.to_string();
            let event = PassEvent { index: i + 1, name: spec.decl.name, spec: &text };
            for inst in &mut self.instrumentations {
                inst.before_pass(&event, module);
            }
            let start = Instant::now();
            let mut pass = (spec.decl.create)(&spec.options);
            let outcome = pass.run(module, &mut cx);
            let elapsed = start.elapsed();
            report.timings.push((text.clone(), elapsed));
            let mut stats = cx.take_statistics();
            if !spec.decl.statistics.is_empty() || !stats.is_empty() {
                let mut ordered: Vec<(&'static str, u64)> = spec.decl.statistics.iter().map(|(name, _)| (*name, stats.shift_remove(name).unwrap_or(0))).collect();
                // Counters a pass forgot to declare still show, after the rest.
                ordered.extend(stats);
                report.statistics.push((text.clone(), ordered));
            }
            if let Err(mut diags) = outcome {
                diags.push(Diagnostic::error(format!("pass `{text}` failed")).at(spec.span, "in this pass"));
                result = Err(diags);
                break;
            }
            if self.verify_each {
                let start = Instant::now();
                let diags = verify_module_with(module, self.target.as_deref());
                verify_time += start.elapsed();
                if diags.has_errors() {
                    let mut all = Diagnostics::from(
                        Diagnostic::error(format!("pass `{text}` produced invalid IR"))
                            .at(spec.span, "this pass")
                            .with_note("this is a bug in tilec; please report it with the input"),
                    );
                    all.extend(diags);
                    result = Err(all);
                    break;
                }
            }
            for inst in &mut self.instrumentations {
                inst.after_pass(&event, module, elapsed);
            }
        }
        self.evaluator = cx.take_evaluator();
        self.record_sink = cx.take_record_sink();
        self.language_models = cx.take_language_models();
        report.search_reports = cx.take_reports();
        report.records = cx.take_records();
        if self.verify_each && !self.pipeline.passes.is_empty() {
            report.timings.push(("(verify)".to_string(), verify_time));
        }
        for inst in &mut self.instrumentations {
            if let Err(msg) = inst.after_pipeline() {
                let d = Diagnostic::error(msg);
                match &mut result {
                    Err(diags) => diags.push(d),
                    Ok(()) => result = Err(d.into()),
                }
            }
        }
        result.map(|()| report)
    }
}
