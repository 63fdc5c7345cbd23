//! `tilec tasks NET.tile`: the tuning tasks of a network (`tilec::tasks`),
//! after `fuse` (or another pipeline), with their weights and flops.

use clap::Parser;
use std::process::ExitCode;
use termcolor::{ColorChoice, StandardStream};
use tilec::diag::{Diagnostic, Diagnostics, SourceMap};
use tilec::pass::{PassManager, parse_pipeline};
use tilec::tasks::extract_tasks;

#[derive(Parser, Debug)]
#[command(name = "tilec tasks", about = "List a network's tuning tasks: its compute ops grouped by what they compute, with weights and flops")]
pub struct TasksCli {
    /// The tile file (`-` for stdin).
    input: String,

    /// The function (needed when the file has several).
    #[arg(long = "func", value_name = "NAME")]
    func: Option<String>,

    /// The pipeline to run before grouping (the tasks a tuner sees are
    /// the fused ops).
    #[arg(long = "pass-pipeline", value_name = "PIPELINE", default_value = "builtin.module(fuse,collapse-axes)")]
    pass_pipeline: String,

    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `tilec tasks` with `args` (after the subcommand's name).
pub fn main(args: impl Iterator<Item = std::ffi::OsString>) -> ExitCode {
    let cli = match TasksCli::try_parse_from(std::iter::once("tilec tasks".into()).chain(args)) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
    };
    let mut sources = SourceMap::new();
    match run(&cli, &mut sources) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(diags) => {
            let stderr = StandardStream::stderr(ColorChoice::Never);
            sources.emit(&mut stderr.lock(), &diags.0);
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &TasksCli, sources: &mut SourceMap) -> Result<String, Diagnostics> {
    let file = tilec::input::read_source(sources, &cli.input)?;
    let mut module = tilec::syntax::parse(sources, file)?;
    tilec::verify::verify_module(&module).into_result()?;
    let registry = tilec_codegen::registry();
    let pfile = sources.add("<pass-pipeline>", cli.pass_pipeline.clone());
    let pipeline = parse_pipeline(&cli.pass_pipeline, pfile, &registry)?;
    PassManager::new(pipeline).run(&mut module)?;
    let f = match &cli.func {
        Some(name) => module.func(name.trim_start_matches('@')).ok_or_else(|| Diagnostic::error(format!("no function `@{}` in the file", name.trim_start_matches('@'))))?,
        None if module.funcs.len() == 1 => &module.funcs[0],
        None => return Err(Diagnostic::error(format!("the file defines {} functions; choose one with --func", module.funcs.len())).into()),
    };
    let tasks = extract_tasks(f);
    let total: u64 = tasks.iter().map(|t| t.flops.saturating_mul(t.weight() as u64)).sum();
    let ops: usize = tasks.iter().map(|t| t.weight()).sum();
    let describe = |t: &tilec::tasks::Task| {
        let c = f.ops[t.ops[0]].kind.as_compute().expect("tasks are compute ops");
        let label = c.label.as_deref().unwrap_or("compute");
        let axes = |kind| c.axes.iter().filter(|a| a.kind == kind).map(|a| format!("{}: {}", a.name, a.extent)).collect::<Vec<_>>().join(", ");
        let reduce = axes(tilec::ir::AxisKind::Reduction);
        let reduce = if reduce.is_empty() { String::new() } else { format!(" reduce ({reduce})") };
        (label.to_string(), format!("({}){reduce}", axes(tilec::ir::AxisKind::Spatial)))
    };
    if cli.json {
        let rows: Vec<serde_json::Value> = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (label, space) = describe(t);
                let names: Vec<String> = t.ops.iter().map(|&o| f.value_label(f.result(o)).trim_matches('`').to_string()).collect();
                serde_json::json!({ "task": i, "weight": t.weight(), "flops": t.flops, "label": label, "space": space, "ops": names, "key": t.key })
            })
            .collect();
        let doc = serde_json::json!({ "func": f.name, "ops": ops, "flops": total, "tasks": rows });
        return Ok(format!("{}\n", serde_json::to_string_pretty(&doc).expect("JSON of plain values")));
    }
    let mut out = format!("@{}: {} task(s) from {ops} compute op(s), {:.3} MFLOP in all\n", f.name, tasks.len(), total as f64 / 1e6);
    out.push_str(&format!("{:>4} {:>6} {:>12} {:>12} {:>6}  op\n", "task", "weight", "MFLOP/op", "MFLOP (ω·)", "share"));
    for (i, t) in tasks.iter().enumerate() {
        let (label, space) = describe(t);
        let weighted = t.flops.saturating_mul(t.weight() as u64);
        let share = if total > 0 { 100.0 * weighted as f64 / total as f64 } else { 0.0 };
        out.push_str(&format!("{i:>4} {:>6} {:>12.3} {:>12.3} {share:>5.1}%  \"{label}\" {space}\n", t.weight(), t.flops as f64 / 1e6, weighted as f64 / 1e6));
    }
    Ok(out)
}
