//! Pass instrumentation: hooks around every pass, used for IR printing
//! (`--print-ir-*`), dumps to a directory, and timing. IR printing is not
//! done by passes themselves; the banner is a tile comment, so a dump can
//! be fed back to `tilec`.

use crate::ir::Module;

/// The module as dumps show it: tile IR, or its MLIR once lowered (then a
/// dump is MLIR text, which `mlir-opt` reads, not tilec).
fn print_module(m: &Module) -> String {
    match &m.mlir {
        Some(mlir) => mlir.clone(),
        None => crate::syntax::print_module(m),
    }
}
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// What the manager tells instrumentations about one pass run.
pub struct PassEvent<'a> {
    /// Position in the pipeline, from 1.
    pub index: usize,
    pub name: &'static str,
    /// The pass as written in the pipeline, with its options.
    pub spec: &'a str,
}

pub trait Instrumentation {
    /// Called once before the first pass (also when there is none).
    fn before_pipeline(&mut self, _module: &Module) {}
    fn before_pass(&mut self, _event: &PassEvent<'_>, _module: &Module) {}
    /// Called after a pass succeeded (and its output verified).
    fn after_pass(&mut self, _event: &PassEvent<'_>, _module: &Module, _elapsed: Duration) {}
    /// Called once when the whole pipeline has run; an error (a dump that
    /// could not be written) is reported to the user.
    fn after_pipeline(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// Which passes `IrPrinting` prints around.
#[derive(Clone, Debug, Default)]
pub struct PrintWhen {
    pub before_all: bool,
    pub after_all: bool,
    /// Print after passes with these names.
    pub after: Vec<String>,
    /// Print after a pass only if it changed the IR.
    pub after_change: bool,
}

/// `--print-ir-before-all`, `--print-ir-after-all`, `--print-ir-after=`,
/// `--print-ir-after-change`.
pub struct IrPrinting {
    when: PrintWhen,
    out: Box<dyn Write>,
    /// The module as printed before the current pass (change detection).
    before_text: Option<String>,
}

impl IrPrinting {
    pub fn new(when: PrintWhen, out: Box<dyn Write>) -> Self {
        IrPrinting { when, out, before_text: None }
    }

    fn wants_after(&self, name: &str) -> bool {
        self.when.after_all || self.when.after_change || self.when.after.iter().any(|n| n == name)
    }

    fn dump(&mut self, banner: &str, text: &str) {
        // Errors writing a dump (closed pipe) must not fail compilation.
        let _ = write!(self.out, "// -----// {banner} //----- //\n{text}\n");
        let _ = self.out.flush();
    }
}

impl Instrumentation for IrPrinting {
    fn before_pass(&mut self, event: &PassEvent<'_>, module: &Module) {
        let needs_text = self.when.before_all || self.when.after_change;
        if !needs_text {
            return;
        }
        let text = print_module(module);
        if self.when.before_all {
            self.dump(&format!("IR Dump Before {}", event.spec), &text);
        }
        if self.when.after_change {
            self.before_text = Some(text);
        }
    }

    fn after_pass(&mut self, event: &PassEvent<'_>, module: &Module, _elapsed: Duration) {
        if !self.wants_after(event.name) {
            return;
        }
        let text = print_module(module);
        let explicitly = self.when.after_all || self.when.after.iter().any(|n| n == event.name);
        let changed = self.before_text.take().is_none_or(|before| before != text);
        if explicitly || (self.when.after_change && changed) {
            self.dump(&format!("IR Dump After {}", event.spec), &text);
        }
    }
}

/// `--dump-ir-dir=DIR`: the input as `00_input.tile`, then one numbered
/// file per pass (`01_canonicalize.tile`, ...), each name preceded by
/// `prefix` (the driver uses `chunkN_` for `--split-input-file`).
pub struct DumpDir {
    dir: PathBuf,
    prefix: String,
    /// The first write error, reported after the run.
    error: Option<String>,
}

impl DumpDir {
    pub fn new(dir: PathBuf, prefix: String) -> Self {
        DumpDir { dir, prefix, error: None }
    }

    fn write(&mut self, file: String, text: &str) {
        if self.error.is_some() {
            return;
        }
        let path = self.dir.join(format!("{}{file}", self.prefix));
        if let Err(e) = std::fs::write(&path, text) {
            self.error = Some(format!("cannot write {}: {e}", path.display()));
        }
    }
}

impl Instrumentation for DumpDir {
    fn after_pipeline(&mut self) -> Result<(), String> {
        self.error.take().map_or(Ok(()), Err)
    }

    fn before_pipeline(&mut self, module: &Module) {
        self.write("00_input.tile".to_string(), &print_module(module));
    }

    fn after_pass(&mut self, event: &PassEvent<'_>, module: &Module, _elapsed: Duration) {
        let text = format!("// -----// IR Dump After {} //----- //\n{}", event.spec, print_module(module));
        self.write(format!("{:02}_{}.tile", event.index, event.name), &text);
    }
}

/// The `--timing` table: wall time per row (passes, and whatever else the
/// driver measures), in MLIR's layout.
pub fn timing_report(rows: &[(String, Duration)], total: Duration) -> String {
    let total_s = total.as_secs_f64();
    let pct = |d: Duration| if total_s > 0.0 { 100.0 * d.as_secs_f64() / total_s } else { 0.0 };
    let rule = "===-------------------------------------------------------------------------===";
    let mut s = format!("{rule}\n                         ... Execution time report ...\n{rule}\n");
    s.push_str(&format!("  Total Execution Time: {total_s:.4} seconds\n\n   ----Wall Time----  ----Name----\n"));
    for (name, d) in rows {
        s.push_str(&format!("   {:.4} ({:5.1}%)  {name}\n", d.as_secs_f64(), pct(*d)));
    }
    s.push_str(&format!("   {total_s:.4} (100.0%)  Total\n"));
    s
}
