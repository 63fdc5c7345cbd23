//! Passes: one declaration each, a registry, textual pipelines, and the
//! manager that runs them with instrumentation.
//!
//! A pass is declared once as a static [`PassDecl`] (name, summary, typed
//! options with defaults, statistics, constructor). The registry, the
//! pipeline parser's option checking, `tilec --list-passes` and
//! `docs/passes.md` all read that declaration, so they cannot drift apart.
//! Passes transform IR in memory and do no I/O.

mod instrument;
mod manager;
mod options;
mod pipeline;

pub use instrument::{DumpDir, Instrumentation, IrPrinting, PassEvent, PrintWhen, timing_report};
pub use manager::{PassManager, RunReport};
pub use options::{OptionDecl, OptionKind, OptionValue, PassOptions};
pub use pipeline::{PassSpec, Pipeline, parse_pipeline};

use crate::diag::Diagnostics;
use crate::ir::Module;
use indexmap::IndexMap;

/// A transformation over a module. Constructed per pipeline entry from
/// validated options; `run` may be called once per module.
pub trait Pass {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics>;
}

/// What a pass may use besides the module: the target it compiles for,
/// statistics, and for the search pass an optional [`Evaluator`] (how fast
/// is a candidate?), records handed in by the driver (`apply-records`, and
/// the `--records` file a search resumes from), the [`Recorder`] its
/// measurements go to (and through it the driver's [`RecordSink`], which
/// stores each one as it is made), and the search's reports, which the
/// driver prints. Passes do no I/O: everything they read or produce goes
/// through here.
///
/// [`Evaluator`]: crate::measure::Evaluator
/// [`RecordSink`]: crate::records::RecordSink
#[derive(Default)]
pub struct PassContext {
    statistics: IndexMap<&'static str, u64>,
    target: Option<std::sync::Arc<crate::target::Target>>,
    evaluator: Option<Box<dyn crate::measure::Evaluator>>,
    /// Why there is no evaluator, for reports (`None`: none was asked for).
    no_evaluator_reason: Option<String>,
    /// Records read by the driver, by the file name a pass option gives.
    records: Vec<(String, std::sync::Arc<Vec<crate::records::Record>>)>,
    recorder: Recorder,
    reports: Vec<String>,
    /// The language models `search{strategy=tlm model=PATH}` names, and
    /// their loader (installed by the driver; none: this build has none).
    language_models: crate::lm::LanguageModels,
    /// The threads the compiled kernels run on, where the driver says.
    kernel_threads: Option<usize>,
}

/// The measurements of a run. Each is kept (for [`RunReport::records`])
/// and, when the driver
/// installed a [`RecordSink`](crate::records::RecordSink), stored there
/// at once, so that a run that dies keeps what it measured.
#[derive(Default)]
pub struct Recorder {
    records: Vec<crate::records::Record>,
    sink: Option<Box<dyn crate::records::RecordSink>>,
    /// The sink's first failure; nothing is stored after it.
    failure: Option<String>,
}

impl Recorder {
    /// Adds a measurement and stores it in the sink, if one is installed.
    /// `Err` says why the sink could not store it, now or at an earlier
    /// call (it is not tried again).
    pub fn push(&mut self, r: crate::records::Record) -> Result<(), String> {
        let stored = match (&self.failure, &mut self.sink) {
            (Some(why), _) => Err(why.clone()),
            (None, Some(sink)) => sink.append(&r),
            (None, None) => Ok(()),
        };
        self.records.push(r);
        if let Err(why) = &stored {
            self.failure.get_or_insert_with(|| why.clone());
        }
        stored
    }

    /// Why the sink failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }
}

impl PassContext {
    pub fn new() -> Self {
        PassContext::default()
    }

    pub fn with_target(target: Option<std::sync::Arc<crate::target::Target>>) -> Self {
        PassContext { target, ..PassContext::default() }
    }

    /// The target given with `--target`, if any.
    pub fn target(&self) -> Option<&crate::target::Target> {
        self.target.as_deref()
    }

    /// Installs the evaluator measured strategies use.
    pub fn set_evaluator(&mut self, e: Option<Box<dyn crate::measure::Evaluator>>) {
        self.evaluator = e;
    }

    /// Takes the evaluator back (the pass manager returns it to its owner).
    pub fn take_evaluator(&mut self) -> Option<Box<dyn crate::measure::Evaluator>> {
        self.evaluator.take()
    }

    pub fn evaluator(&mut self) -> Option<&mut (dyn crate::measure::Evaluator + 'static)> {
        self.evaluator.as_deref_mut()
    }

    /// The threads the compiled kernels run on (`--threads`), where the
    /// driver said.
    pub fn set_kernel_threads(&mut self, threads: Option<usize>) {
        self.kernel_threads = threads;
    }

    pub fn kernel_threads(&self) -> Option<usize> {
        self.kernel_threads
    }

    /// The evaluator and the recorder together, for a search that records
    /// each measurement as it makes it.
    pub fn evaluator_and_recorder(&mut self) -> (Option<&mut (dyn crate::measure::Evaluator + 'static)>, &mut Recorder) {
        (self.evaluator.as_deref_mut(), &mut self.recorder)
    }

    /// Installs `strategy=tlm`'s language models (their loader, and any
    /// loaded before).
    pub fn set_language_models(&mut self, models: crate::lm::LanguageModels) {
        self.language_models = models;
    }

    /// Takes the language models back (the pass manager keeps them across
    /// runs).
    pub fn take_language_models(&mut self) -> crate::lm::LanguageModels {
        std::mem::take(&mut self.language_models)
    }

    /// The language model saved at `path` ([`crate::lm::LanguageModels::take`]).
    pub fn take_language_model(&mut self, path: &str) -> Result<Box<dyn crate::lm::TokenModel>, String> {
        self.language_models.take(path)
    }

    /// Keeps a model [`PassContext::take_language_model`] gave.
    pub fn return_language_model(&mut self, path: &str, model: Box<dyn crate::lm::TokenModel>) {
        self.language_models.give_back(path, model);
    }

    /// Says why no evaluator is installed (e.g. the target does not run on
    /// this machine); reports quote it.
    pub fn set_no_evaluator_reason(&mut self, why: Option<String>) {
        self.no_evaluator_reason = why;
    }

    pub fn no_evaluator_reason(&self) -> Option<&str> {
        self.no_evaluator_reason.as_deref()
    }

    /// Hands in the records the driver read from `file`.
    pub fn add_records(&mut self, file: String, records: std::sync::Arc<Vec<crate::records::Record>>) {
        self.records.push((file, records));
    }

    /// The records read from `file`, if the driver read it.
    pub fn records(&self, file: &str) -> Option<&[crate::records::Record]> {
        self.records.iter().find(|(f, _)| f == file).map(|(_, r)| r.as_slice())
    }

    /// Installs where measurements are stored as they are made
    /// (`tilec --records`: the records file).
    pub fn set_record_sink(&mut self, sink: Option<Box<dyn crate::records::RecordSink>>) {
        self.recorder.sink = sink;
    }

    /// Takes the sink back (the pass manager returns it to its owner).
    pub fn take_record_sink(&mut self) -> Option<Box<dyn crate::records::RecordSink>> {
        self.recorder.sink.take()
    }

    /// Adds a measurement to the run's records and stores it in the sink
    /// ([`Recorder::push`]).
    pub fn push_record(&mut self, r: crate::records::Record) -> Result<(), String> {
        self.recorder.push(r)
    }

    /// The measurements made since the last call.
    pub fn take_records(&mut self) -> Vec<crate::records::Record> {
        std::mem::take(&mut self.recorder.records)
    }

    /// Adds a paragraph to the search report (`tilec --search-report`).
    pub fn report(&mut self, text: String) {
        self.reports.push(text);
    }

    pub fn take_reports(&mut self) -> Vec<String> {
        std::mem::take(&mut self.reports)
    }

    /// Adds `n` to the statistic `name` (declared in the pass's `statistics`).
    pub fn bump(&mut self, name: &'static str, n: u64) {
        *self.statistics.entry(name).or_insert(0) += n;
    }

    /// Takes the statistics gathered since the last call.
    pub fn take_statistics(&mut self) -> IndexMap<&'static str, u64> {
        std::mem::take(&mut self.statistics)
    }
}

/// The one declaration of a pass.
pub struct PassDecl {
    /// The name used in pipelines, e.g. `canonicalize`.
    pub name: &'static str,
    /// One line, shown by `--list-passes`.
    pub summary: &'static str,
    /// Paragraphs for `docs/passes.md`.
    pub description: &'static str,
    pub options: &'static [OptionDecl],
    /// (name, meaning) of each counter the pass reports.
    pub statistics: &'static [(&'static str, &'static str)],
    pub create: fn(&PassOptions) -> Box<dyn Pass>,
}

impl std::fmt::Debug for PassDecl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PassDecl({})", self.name)
    }
}

/// All passes a tool knows, by name, in registration order.
#[derive(Default, Debug)]
pub struct Registry {
    passes: IndexMap<&'static str, &'static PassDecl>,
}

impl Registry {
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers a pass; a duplicate name is a programming error.
    pub fn register(&mut self, decl: &'static PassDecl) {
        let previous = self.passes.insert(decl.name, decl);
        assert!(previous.is_none(), "pass `{}` registered twice", decl.name);
    }

    pub fn get(&self, name: &str) -> Option<&'static PassDecl> {
        self.passes.get(name).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = &'static PassDecl> + '_ {
        self.passes.values().copied()
    }

    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.passes.keys().copied()
    }

    /// The text of `tilec --list-passes`.
    pub fn list_text(&self) -> String {
        let mut out = String::from("Available passes:\n");
        for d in self.iter() {
            out.push_str(&format!("  {:<20} {}\n", d.name, d.summary));
            for o in d.options {
                out.push_str(&format!("    {:<18} {} (default: {})\n", format!("{}=<{}>", o.name, o.kind.describe()), o.help, display_default(o.default)));
            }
        }
        out
    }

    /// `docs/passes.md`, generated from the declarations.
    pub fn markdown(&self) -> String {
        let mut out = String::from(
            "# Passes\n\n<!-- Generated from the pass declarations; do not edit by hand. A test fails when\n     this file is stale: regenerate it with `TILEC_BLESS=1 cargo test`. -->\n\nRun passes with `tilec --pass-pipeline='builtin.module(pass1,pass2{option=value other=value})'`.\n",
        );
        for d in self.iter() {
            out.push_str(&format!("\n## `{}`\n\n{}\n\n{}\n", d.name, d.summary, d.description.trim()));
            if !d.options.is_empty() {
                out.push_str("\n| option | type | default | meaning |\n|---|---|---|---|\n");
                for o in d.options {
                    out.push_str(&format!("| `{}` | {} | `{}` | {} |\n", o.name, o.kind.describe(), display_default(o.default), o.help));
                }
            }
            if !d.statistics.is_empty() {
                out.push_str("\nStatistics (`--pass-statistics`):\n\n");
                for (name, meaning) in d.statistics {
                    out.push_str(&format!("- `{name}`: {meaning}\n"));
                }
            }
        }
        out
    }
}

fn display_default(d: &str) -> &str {
    if d.is_empty() { "\"\"" } else { d }
}
