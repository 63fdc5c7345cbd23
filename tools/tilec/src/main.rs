//! `tilec`: the compiler driver, modelled on `mlir-opt`.
//!
//! Reads a tile file (or stdin), verifies it, runs a pass pipeline, and
//! prints the result. Every error a user can cause ends in diagnostics on
//! stderr and exit status 1; a panic is a bug.

use clap::{Parser, ValueEnum};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use termcolor::{ColorChoice, StandardStream};
use tilec::diag::{Diagnostic, Diagnostics, FileId, Severity, SourceMap};
use tilec::expected;
use tilec::ir::Module;
use tilec::pass::{DumpDir, IrPrinting, PassManager, Pipeline, PrintWhen, Registry, parse_pipeline, timing_report};
use tilec::syntax::{parse_range, print_module};
use tilec::target::{Origin, Target, TargetSet};
use tilec::verify::verify_module_with;

#[derive(Parser, Debug)]
#[command(name = "tilec", version, about = "The tilec tensor compiler: parse, verify, transform and print tile IR")]
struct Cli {
    /// Input file (`-` for stdin).
    #[arg(default_value = "-")]
    input: String,

    /// Output file (default: stdout).
    #[arg(short = 'o', value_name = "OUT")]
    output: Option<PathBuf>,

    /// Pass pipeline to run, e.g. `builtin.module(canonicalize)`.
    #[arg(long = "pass-pipeline", value_name = "PIPELINE")]
    pass_pipeline: Option<String>,

    /// The stage to stop at and print: the tile IR (`tile`, the default
    /// unless the pipeline lowered to MLIR), MLIR (`mlir`), LLVM IR (`llvm`),
    /// assembly (`asm`), an object file (`obj`, needs -o), a shared
    /// library (`lib`, needs -o; linked with the system `cc`) or PTX (`ptx`).
    /// Past `tile`, without --pass-pipeline, the default pipeline runs
    /// (docs/codegen.md).
    #[arg(long, value_enum)]
    emit: Option<Emit>,

    /// List the registered passes and their options, then exit.
    #[arg(long = "list-passes")]
    list_passes: bool,

    /// List the ops of the tile dialect, then exit.
    #[arg(long = "list-ops")]
    list_ops: bool,

    /// List the targets (built in, `host`, and description files from
    /// --target-dir and TILEC_TARGET_PATH), then exit.
    #[arg(long = "list-targets")]
    list_targets: bool,

    /// With --list-targets: also print each target's memory levels, tile
    /// levels, loop order, intrinsics and sources.
    #[arg(short = 'v', long = "verbose")]
    verbose: bool,

    /// The target to compile for: a name (`tilec --list-targets`) or the
    /// path of a target description file (`.toml`).
    #[arg(long = "target", value_name = "NAME|PATH")]
    target: Option<String>,

    /// A folder of target description files (`*.toml`) to add to the known
    /// targets; repeatable. TILEC_TARGET_PATH (folders separated by `:`)
    /// adds more.
    #[arg(long = "target-dir", value_name = "DIR")]
    target_dir: Vec<PathBuf>,

    /// Split the input at `// -----` lines and process each chunk on its own.
    #[arg(long = "split-input-file")]
    split_input_file: bool,

    /// Check diagnostics against `// expected-error@+N {{...}}` annotations.
    #[arg(long = "verify-diagnostics")]
    verify_diagnostics: bool,

    /// Print the IR before every pass (to stderr).
    #[arg(long = "print-ir-before-all")]
    print_ir_before_all: bool,

    /// Print the IR after every pass (to stderr).
    #[arg(long = "print-ir-after-all")]
    print_ir_after_all: bool,

    /// Print the IR after the named passes (repeatable or comma-separated).
    #[arg(long = "print-ir-after", value_name = "PASS", value_delimiter = ',')]
    print_ir_after: Vec<String>,

    /// Print the IR after a pass only when the pass changed it.
    #[arg(long = "print-ir-after-change")]
    print_ir_after_change: bool,

    /// Write the input and the IR after each pass to numbered files in DIR.
    #[arg(long = "dump-ir-dir", value_name = "DIR")]
    dump_ir_dir: Option<PathBuf>,

    /// Print a table of the time spent in each pass.
    #[arg(long)]
    timing: bool,

    /// Print the statistics each pass reported.
    #[arg(long = "pass-statistics")]
    pass_statistics: bool,

    /// Re-verify the IR after every pass.
    #[arg(long = "verify-each", default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    verify_each: bool,

    /// Print the parsed pipeline, with every option spelled out, to stderr.
    #[arg(long = "dump-pass-pipeline")]
    dump_pass_pipeline: bool,

    /// Print, for each compute op, the ways the target's intrinsics can
    /// compute it (its mapping candidates, docs/tensorize.md) instead of
    /// the IR. Needs --target.
    #[arg(long = "print-mappings")]
    print_mappings: bool,

    /// Print, for each compute op, the resource-constrained rules of its
    /// search space on the target (GTA's R1–R5: docs/search.md), whether
    /// each applies, and the share of the space each removes, estimated
    /// from DRAWS draws (default 10000, seeded with 0) instead of the IR.
    /// Needs --target.
    #[arg(long = "print-space-rules", value_name = "DRAWS", num_args = 0..=1, default_missing_value = "10000", require_equals = true, value_parser = clap::value_parser!(u64).range(1..))]
    print_space_rules: Option<u64>,

    /// Print what each `search` did (per op: strategy, states visited,
    /// candidates measured, time, predicted and measured figures) to stderr.
    #[arg(long = "search-report")]
    search_report: bool,

    /// Append every measurement `search` makes to this records file (JSON
    /// lines; docs/search.md), each as soon as it is made. Candidates the
    /// file already has a time for (same workload, target and schedule)
    /// are not measured again, so a search that was stopped resumes.
    #[arg(long = "records", value_name = "FILE")]
    records: Option<PathBuf>,

    /// Threads a `search` that measures runs its candidates on: as many as
    /// the compiled kernels will run on (`tilec-run --threads`), since the
    /// cost model predicts for them and a parallel split that leaves a
    /// core idle only shows there. 0: one per core of this machine, as
    /// `tilec-run` runs by default.
    #[arg(long, default_value_t = 0, value_name = "N")]
    threads: usize,

    /// Colour diagnostics.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    color: Color,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Emit {
    Tile,
    Mlir,
    Llvm,
    Asm,
    Obj,
    Lib,
    Ptx,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum Color {
    Auto,
    Always,
    Never,
}

mod import;
mod tasks;

fn main() -> ExitCode {
    // Subcommands with options of their own: `tilec import MODEL.onnx -o
    // NET.tile`, `tilec tasks NET.tile`. A file named like one is still
    // read as `./import`.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "import") {
        args.remove(1);
        return import::main(args);
    }
    if args.get(1).is_some_and(|a| a == "tasks") {
        return tasks::main(args.into_iter().skip(2));
    }
    // The evaluator's compile child (`tilec_codegen::compile_worker`): one
    // job on stdin, not for users.
    if args.len() == 2 && args[1] == "compile-worker" {
        return tilec_codegen::compile_worker::serve();
    }
    // Usage errors exit with 1 like every other user error (clap's default
    // is 2); `--help` and `--version` exit with 0.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
    };
    let mut driver = Driver { sources: SourceMap::new(), registry: tilec_codegen::registry(), color: color_choice(cli.color), target: None, targets: None, records_file: None };
    match driver.run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(diags) => {
            driver.emit(&diags);
            ExitCode::FAILURE
        }
    }
}

fn color_choice(color: Color) -> ColorChoice {
    match color {
        Color::Always => ColorChoice::Always,
        Color::Never => ColorChoice::Never,
        Color::Auto if std::io::stderr().is_terminal() => ColorChoice::Auto,
        Color::Auto => ColorChoice::Never,
    }
}

struct Driver {
    sources: SourceMap,
    registry: Registry,
    color: ColorChoice,
    /// The `--target`, handed to every pass manager.
    target: Option<Arc<Target>>,
    /// Without --target, for code generation: the targets a schedule may
    /// name, and `host` (this machine) for modules whose schedules name
    /// none.
    targets: Option<TargetSet>,
    /// The `--records` file, open for appending from the start; every
    /// pass manager gets it as its record sink.
    records_file: Option<tilec::records::RecordsFile>,
}

impl Driver {
    fn emit(&self, diags: &Diagnostics) {
        let stderr = StandardStream::stderr(self.color);
        let mut lock = stderr.lock();
        self.sources.emit(&mut lock, &diags.0);
    }

    fn run(&mut self, cli: &Cli) -> Result<(), Diagnostics> {
        if cli.list_passes {
            print!("{}", self.registry.list_text());
            return Ok(());
        }
        if cli.list_ops {
            println!("Tile dialect ops:");
            for d in tilec::ir::ops::op_decls() {
                println!("  {:<10} {}", d.mnemonic, d.summary);
            }
            return Ok(());
        }
        if cli.list_targets || cli.target.is_some() {
            let mut targets = self.target_set(cli)?;
            if let Some(spec) = &cli.target {
                self.target = Some(targets.resolve(&mut self.sources, spec)?);
            }
            if cli.list_targets {
                return self.list_targets(&targets, cli.verbose);
            }
        }
        let total = Instant::now();
        let mut timings: Vec<(String, Duration)> = Vec::new();
        let codegen = cli.emit.is_some_and(|e| e != Emit::Tile);
        if codegen && self.target.is_none() {
            // Without --target, code is generated for the target the
            // schedules name, or else for this machine.
            self.targets = Some(self.target_set(cli)?);
        }
        let pipeline = match (&cli.pass_pipeline, codegen) {
            (Some(text), _) => {
                let file = self.sources.add("<pass-pipeline>", text.clone());
                parse_pipeline(text, file, &self.registry)?
            }
            (None, true) => {
                let text = tilec_codegen::driver::default_codegen_pipeline();
                let file = self.sources.add("<default pipeline>", text.clone());
                parse_pipeline(&text, file, &self.registry)?
            }
            (None, false) => Pipeline::default(),
        };
        tilec_codegen::compile::set_print_mlir_passes(cli.print_ir_after_all);
        self.check_pass_names(&cli.print_ir_after)?;
        if cli.dump_pass_pipeline {
            let full: Vec<String> = pipeline
                .passes
                .iter()
                .map(|p| {
                    let opts: Vec<String> = p.decl.options.iter().map(|o| format!("{}={}", o.name, p.options.text(o.name))).collect();
                    if opts.is_empty() { p.decl.name.to_string() } else { format!("{}{{{}}}", p.decl.name, opts.join(" ")) }
                })
                .collect();
            eprintln!("Pass Manager with {} passes:\nbuiltin.module({})", pipeline.passes.len(), full.join(","));
        }
        self.check_outputs(cli)?;

        let start = Instant::now();
        let file = self.read_input(&cli.input)?;
        let source = self.sources.source(file);
        let chunks: Vec<_> = if cli.split_input_file {
            // Chunks with nothing but comments (a dump's leading banner, a
            // trailing separator) are skipped, as mlir-opt does.
            let all = tilec::input::split_input_file(source);
            let nonblank: Vec<_> = all.iter().filter(|r| !tilec::syntax::is_blank(&source[(*r).clone()])).cloned().collect();
            if nonblank.is_empty() { vec![0..source.len()] } else { nonblank }
        } else {
            vec![0..source.len()]
        };
        let split = chunks.len() > 1;
        timings.push(("read input".into(), start.elapsed()));
        let records = self.read_records(&pipeline)?;
        // Bad lines of records files are reported before anything runs.
        if !records.warnings.is_empty() {
            self.emit(&Diagnostics(records.warnings.clone()));
        }

        // Diagnostics of all chunks, in input order; the run fails if any
        // chunk failed, but the chunks that worked are still printed.
        let mut outputs = Vec::new();
        let mut diagnostics = Diagnostics::new();
        let mut failed = false;
        let mut statistics = Vec::new();
        for (index, range) in chunks.into_iter().enumerate() {
            let dump_prefix = if split { format!("chunk{index}_") } else { String::new() };
            let (result, produced) = self.process_chunk(cli, file, range.clone(), &pipeline, &records, &dump_prefix, &mut timings, &mut statistics);
            let ok = result.is_ok();
            if let Ok(o) = result {
                outputs.push(o);
            }
            if cli.verify_diagnostics {
                match expected::parse_expectations(&self.sources, file, range) {
                    Ok(exp) => diagnostics.extend(expected::check(&self.sources, exp, &produced.0)),
                    Err(d) => diagnostics.extend(d),
                }
                continue;
            }
            failed |= !ok;
            diagnostics.extend(produced);
        }
        failed |= diagnostics.has_errors();
        if !diagnostics.is_empty() {
            self.emit(&diagnostics);
        }

        let start = Instant::now();
        let mut text: Vec<u8> = Vec::new();
        for (i, o) in outputs.iter().enumerate() {
            if i > 0 {
                text.extend_from_slice(b"// -----\n");
            }
            text.extend_from_slice(&o.bytes);
        }
        if let (Some(path), false) = (&cli.output, failed) {
            for o in &outputs {
                if let Some(meta) = &o.metadata {
                    let mut json = path.clone().into_os_string();
                    json.push(".json");
                    let json = std::path::PathBuf::from(json);
                    std::fs::write(&json, meta).map_err(|e| Diagnostic::error(format!("cannot write `{}`: {}", json.display(), tilec::input::io_reason(&e))))?;
                }
            }
        }
        if cli.emit == Some(Emit::Obj) && cli.output.is_none() && !failed {
            return Err(Diagnostic::error("`--emit=obj` writes an object file: give it a name with -o").into());
        }
        if cli.emit == Some(Emit::Lib) && cli.output.is_none() && !failed {
            return Err(Diagnostic::error("`--emit=lib` writes a shared library: give it a name with -o").into());
        }
        match &cli.output {
            // Like mlir-opt, an output file is only kept when everything worked.
            Some(_) if failed => {}
            Some(path) => std::fs::write(path, &text)
                .map_err(|e| Diagnostic::error(format!("cannot write `{}`: {}", path.display(), tilec::input::io_reason(&e))))?,
            None => {
                let mut out = std::io::stdout().lock();
                // A closed pipe (`tilec x | head`) is not an error worth reporting.
                let _ = out.write_all(&text).and_then(|()| out.flush());
            }
        }
        timings.push(("output".into(), start.elapsed()));
        if cli.timing {
            eprint!("{}", timing_report(&timings, total.elapsed()));
        }
        if cli.pass_statistics {
            eprint!("{}", statistics_report(&statistics, &self.registry));
        }
        // The diagnostics were printed above; an empty list only sets the status.
        if failed { Err(Diagnostics::new()) } else { Ok(()) }
    }

    /// The built-in targets, `host`, and the files of --target-dir and
    /// TILEC_TARGET_PATH folders.
    fn target_set(&mut self, cli: &Cli) -> Result<TargetSet, Diagnostics> {
        tilec_codegen::driver::target_set(&mut self.sources, &cli.target_dir)
    }

    /// `--list-targets`: one line per target; with `-v`, the details too.
    /// A target that cannot be had here (`host` on a machine it cannot
    /// describe) is listed with the reason.
    fn list_targets(&mut self, targets: &TargetSet, verbose: bool) -> Result<(), Diagnostics> {
        let mut out = String::from("Available targets:\n");
        let mut diags = Diagnostics::new();
        let names: Vec<String> = targets.names().map(String::from).collect();
        for name in names {
            match targets.get(&mut self.sources, &name) {
                Some(Ok(t)) => {
                    out.push_str(&format!("  {}\n", t.summary_line()));
                    if verbose {
                        if let Some(origin) = targets.origin(&name) {
                            out.push_str(&format!("    from: {}\n", origin.describe()));
                        }
                        out.push_str(&t.details());
                        out.push('\n');
                    }
                }
                Some(Err(d)) if matches!(targets.origin(&name), Some(Origin::Host)) => {
                    let why = d.iter().next().map_or_else(String::new, |d| d.message.clone());
                    out.push_str(&format!("  {:<12} {:<5} unavailable: {why}\n", name, "-"));
                }
                Some(Err(d)) => diags.extend(d),
                None => {}
            }
        }
        print!("{out}");
        diags.into_result()
    }

    /// Before any work: the files the run will write can be written. The
    /// --dump-ir-dir folder is made, and the --records file opened for
    /// appending (made if new); `-o` is only checked, since an output file
    /// is written only when everything worked.
    fn check_outputs(&mut self, cli: &Cli) -> Result<(), Diagnostics> {
        if let Some(path) = &cli.output {
            tilec::input::check_writable(path).map_err(|why| Diagnostic::error(format!("cannot write `{}`: {why}", path.display())))?;
        }
        if let Some(dir) = &cli.dump_ir_dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| Diagnostic::error(format!("cannot create --dump-ir-dir `{}`: {}", dir.display(), tilec::input::io_reason(&e))))?;
            tilec::input::check_folder_writable(dir).map_err(|why| Diagnostic::error(format!("cannot write into --dump-ir-dir `{}`: {why}", dir.display())))?;
        }
        if let Some(path) = &cli.records {
            let file = tilec::records::RecordsFile::open(path).map_err(|e| {
                // The check says which part of the path is wrong.
                let why = tilec::input::check_writable(path).err().unwrap_or_else(|| tilec::input::io_reason(&e));
                Diagnostic::error(format!("cannot open the records file `{}`: {why}", path.display())).with_note("--records appends every measurement to this file as it is made")
            })?;
            self.records_file = Some(file);
        }
        Ok(())
    }

    fn check_pass_names(&self, names: &[String]) -> Result<(), Diagnostics> {
        let mut diags = Diagnostics::new();
        for n in names {
            if self.registry.get(n).is_none() {
                let mut d = Diagnostic::error(format!("--print-ir-after: unknown pass `{n}`"));
                if let Some(best) = tilec::diag::closest(n, self.registry.names()) {
                    d = d.with_help(format!("did you mean `{best}`?"));
                }
                diags.push(d.with_note("`tilec --list-passes` lists the passes"));
            }
        }
        diags.into_result()
    }

    fn read_input(&mut self, input: &str) -> Result<FileId, Diagnostics> {
        Ok(tilec::input::read_source(&mut self.sources, input)?)
    }

    /// Parses, verifies, transforms and prints one chunk. Returns the text
    /// (or failure) and every diagnostic produced, warnings included.
    fn process_chunk(
        &mut self,
        cli: &Cli,
        file: FileId,
        range: std::ops::Range<usize>,
        pipeline: &Pipeline,
        records: &LoadedRecords,
        dump_prefix: &str,
        timings: &mut Vec<(String, Duration)>,
        statistics: &mut Vec<(String, Vec<(&'static str, u64)>)>,
    ) -> (Result<Output, ()>, Diagnostics) {
        let start = Instant::now();
        let parsed = parse_range(&self.sources, file, range);
        timings.push(("parse".into(), start.elapsed()));
        let mut module: Module = match parsed {
            Ok(m) => m,
            Err(d) => return (Err(()), d),
        };
        let start = Instant::now();
        let diags = verify_module_with(&module, self.target.as_deref());
        timings.push(("verify input".into(), start.elapsed()));
        if diags.has_errors() {
            return (Err(()), diags);
        }
        let target = match (&self.target, &self.targets) {
            (Some(t), _) => Some(t.clone()),
            (None, Some(set)) => match tilec_codegen::driver::scheduled_target(set, &mut self.sources, &module, Some("host")) {
                Ok(t) => t,
                Err(d) => return (Err(()), d),
            },
            (None, None) => None,
        };
        let mut pm = PassManager::new(pipeline.clone());
        pm.set_verify_each(cli.verify_each);
        if let Some(t) = &target {
            pm.set_target(t.clone());
        }
        for (name, r) in &records.files {
            pm.add_records(name.clone(), r.clone());
        }
        if let Some(file) = &self.records_file {
            pm.set_record_sink(Box::new(file.clone()));
        }
        pm.set_model_loader(Box::new(tilec_tlm::TlmLoader));
        let threads = tilec::target::host::threads_or_every_core(cli.threads);
        pm.install_evaluator(tilec_codegen::evaluator::search_evaluator(pipeline, target.as_deref(), threads));
        // (Only where given: by default the kernels are for the target's
        // cores, which need not be this machine's.)
        if cli.threads > 0 {
            pm.set_kernel_threads(cli.threads);
        }
        let when = PrintWhen {
            before_all: cli.print_ir_before_all,
            after_all: cli.print_ir_after_all,
            after: cli.print_ir_after.clone(),
            after_change: cli.print_ir_after_change,
        };
        if when.before_all || when.after_all || when.after_change || !when.after.is_empty() {
            pm.add_instrumentation(Box::new(IrPrinting::new(when, Box::new(std::io::stderr()))));
        }
        if let Some(dir) = &cli.dump_ir_dir {
            pm.add_instrumentation(Box::new(DumpDir::new(dir.clone(), dump_prefix.to_string())));
        }
        let mut all = diags;
        match pm.run(&mut module) {
            Ok(report) => {
                timings.extend(report.timings);
                statistics.extend(report.statistics);
                if cli.search_report {
                    for r in &report.search_reports {
                        eprint!("{r}");
                    }
                }
            }
            Err(mut d) => {
                // Under --verify-diagnostics a failing pass's own errors in
                // the input are what the annotations check, as with
                // mlir-opt; the manager's summary at the pipeline text
                // ("pass `X` failed") is then left out.
                if cli.verify_diagnostics && d.iter().any(|x| x.severity == Severity::Error && x.span().is_some_and(|s| s.file == file)) {
                    let in_pipeline = |x: &Diagnostic| x.span().is_some_and(|s| pipeline.passes.iter().any(|p| p.span.file == s.file));
                    d.0.retain(|x| !(in_pipeline(x) && x.message.starts_with("pass `") && x.message.ends_with("` failed")));
                }
                all.extend(d);
                return (Err(()), all);
            }
        }
        let start = Instant::now();
        let stage = match cli.emit {
            None | Some(Emit::Tile) if cli.emit.is_some() || module.mlir.is_none() => None,
            None | Some(Emit::Tile) | Some(Emit::Mlir) => Some(tilec_codegen::driver::Stage::Mlir),
            Some(Emit::Llvm) => Some(tilec_codegen::driver::Stage::Llvm),
            Some(Emit::Asm) => Some(tilec_codegen::driver::Stage::Asm),
            Some(Emit::Obj) | Some(Emit::Lib) => Some(tilec_codegen::driver::Stage::Obj),
            Some(Emit::Ptx) => Some(tilec_codegen::driver::Stage::Ptx),
        };
        if cli.print_mappings {
            let Some(t) = &target else {
                all.push(Diagnostic::error("--print-mappings needs a target: the intrinsics are the target's").with_help("name one with --target, e.g. --target=sm90 or --target=host"));
                return (Err(()), all);
            };
            let offered: Vec<&tilec::target::Intrinsic> = t.offered_intrinsics().collect();
            let text: String = module.funcs.iter().map(|f| tilec::target::mapping::report(f, &offered, &t.name)).collect();
            timings.push(("mapping candidates".into(), start.elapsed()));
            return (Ok(Output { bytes: text.into_bytes(), metadata: None }), all);
        }
        if let Some(draws) = cli.print_space_rules {
            let Some(t) = &target else {
                all.push(Diagnostic::error("--print-space-rules needs a target: the rules count the target's memories").with_help("name one with --target, e.g. --target=x86-avx2 or --target=sm80"));
                return (Err(()), all);
            };
            let text: String = module.funcs.iter().map(|f| tilec_passes::search::space_rules_report(f, t, draws as usize, 0)).collect();
            timings.push(("space rules".into(), start.elapsed()));
            return (Ok(Output { bytes: text.into_bytes(), metadata: None }), all);
        }
        let output = match (stage, &target) {
            (None, _) => Output { bytes: print_module(&module).into_bytes(), metadata: None },
            // A pipeline that ends in `lower-to-mlir` without --emit prints
            // the MLIR it made; that needs no target.
            (Some(_), None) => match &module.mlir {
                Some(mlir) => Output { bytes: mlir.clone().into_bytes(), metadata: None },
                None => Output { bytes: print_module(&module).into_bytes(), metadata: None },
            },
            (Some(stage), Some(t)) => match tilec_codegen::driver::emit_stage(&module, t, stage) {
                Ok((artifact, metadata)) => {
                    let bytes = match artifact {
                        tilec_codegen::driver::Artifact::Text(t) => t.into_bytes(),
                        tilec_codegen::driver::Artifact::Bytes(b) => b,
                    };
                    let bytes = if cli.emit == Some(Emit::Lib) {
                        match link_library(&bytes) {
                            Ok(lib) => lib,
                            Err(e) => {
                                all.push(Diagnostic::error(format!("cannot make a shared library: {e}")).with_help("install a C toolchain (`build-essential`), or use `--emit=obj` and link it yourself"));
                                return (Err(()), all);
                            }
                        }
                    } else {
                        bytes
                    };
                    Output { bytes, metadata }
                }
                Err(e) => {
                    let at = module.funcs.first().map_or(tilec::diag::Span::DUMMY, |f| f.span);
                    all.push(Diagnostic::error(format!("code generation failed: {}", e.0)).at(at, "in this module"));
                    return (Err(()), all);
                }
            },
        };
        timings.push((if stage.is_some() { "code generation" } else { "print" }.into(), start.elapsed()));
        (Ok(output), all)
    }
}

/// Links an object into a shared library (in a scratch folder) and returns
/// the library's bytes.
fn link_library(object: &[u8]) -> Result<Vec<u8>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary folder: {e}"))?;
    let so = tilec_codegen::link_shared(object, dir.path(), "kernels").map_err(|e| e.0)?;
    std::fs::read(&so).map_err(|e| format!("cannot read `{}`: {e}", so.display()))
}

/// Records files named by `apply-records{file=...}` in the pipeline, read
/// once; lines that are not records are warnings.
#[derive(Default)]
struct LoadedRecords {
    files: Vec<(String, Arc<Vec<tilec::records::Record>>)>,
    warnings: Vec<Diagnostic>,
}

impl Driver {
    /// The records of a file's bytes; each bad line is a warning at it.
    fn parse_records_file(&mut self, name: &str, bytes: &[u8], warnings: &mut Vec<Diagnostic>) -> Arc<Vec<tilec::records::Record>> {
        let (good, bad) = tilec::records::parse_records(bytes);
        // Lines that are not UTF-8 are shown with U+FFFD for their bad
        // bytes; the line structure, which the warnings need, is the same.
        let file = self.sources.add(name.to_string(), String::from_utf8_lossy(bytes).into_owned());
        let source = self.sources.source(file);
        let mut starts = vec![0usize];
        starts.extend(source.match_indices('\n').map(|(i, _)| i + 1));
        for (line, why) in bad {
            let start = starts[line - 1];
            let end = source[start..].find('\n').map_or(source.len(), |e| start + e);
            let span = tilec::diag::Span::new(file, start..end);
            warnings.push(
                Diagnostic::warning(format!("skipped line {line} of records file `{name}`: not a record ({why})"))
                    .at(span, "this line")
                    .with_note("the other lines are used"),
            );
        }
        Arc::new(good.into_iter().map(|(_, r)| r).collect())
    }

    fn read_records(&mut self, pipeline: &Pipeline) -> Result<LoadedRecords, Diagnostics> {
        let mut loaded = LoadedRecords::default();
        for spec in &pipeline.passes {
            if spec.decl.name != "apply-records" {
                continue;
            }
            let name = spec.options.text("file");
            if name.is_empty() || loaded.files.iter().any(|(f, _)| *f == name) {
                continue;
            }
            let bytes = std::fs::read(&name).map_err(|e| {
                Diagnostic::error(format!("cannot read records file `{name}`: {}", tilec::input::io_reason(&e))).at(spec.span, "named here")
            })?;
            let records = self.parse_records_file(&name, &bytes, &mut loaded.warnings);
            loaded.files.push((name, records));
        }
        // The records already in the --records file: a measured search
        // resumes from them.
        if let Some(file) = self.records_file.clone() {
            let name = file.path().display().to_string();
            let bytes = file.read_all().map_err(|e| Diagnostic::error(format!("cannot read the records file `{name}`: {}", tilec::input::io_reason(&e))))?;
            let records = self.parse_records_file(&name, &bytes, &mut loaded.warnings);
            loaded.files.push((tilec::records::RESUME.to_string(), records));
        }
        Ok(loaded)
    }
}

/// What one input chunk produced: the bytes to write, and for PTX the
/// launch metadata to write next to them.
struct Output {
    bytes: Vec<u8>,
    metadata: Option<String>,
}

fn statistics_report(stats: &[(String, Vec<(&'static str, u64)>)], registry: &Registry) -> String {
    let rule = "===-------------------------------------------------------------------------===";
    let mut s = format!("{rule}\n                         ... Pass statistics report ...\n{rule}\n");
    for (pass, counters) in stats {
        s.push_str(&format!("{pass}\n"));
        let decl = registry.get(pass.split('{').next().unwrap_or(pass));
        for (name, n) in counters {
            let meaning = decl.and_then(|d| d.statistics.iter().find(|(k, _)| k == name)).map_or("", |(_, m)| m);
            s.push_str(&format!("  ({name}) {n} : {meaning}\n"));
        }
    }
    s
}
