//! `tilec import MODEL.onnx -o NET.tile`: an ONNX model to a tile module
//! (`NET.tile`) and its weights (`NET.safetensors` beside it), through
//! `tilec-onnx`. Errors are diagnostics naming the model file and, where
//! there is one, the node, its op and the attribute; exit status 1.

use clap::Parser;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use termcolor::StandardStream;
use tilec::diag::{Diagnostic, SourceMap};
use tilec_onnx::{ActivationLayout, ImportError, ImportOptions, import_model};

#[derive(Parser, Debug)]
#[command(
    name = "tilec import",
    version,
    about = "Import an ONNX model: writes NET.tile and its weights, NET.safetensors, beside it"
)]
struct ImportCli {
    /// The ONNX model (`.onnx`).
    model: PathBuf,

    /// The tile module to write; the weights go to the same path with the
    /// extension `.safetensors`.
    #[arg(short = 'o', value_name = "NET.tile")]
    output: PathBuf,

    /// The full shape of a graph input, for models with dynamic
    /// dimensions: `NAME=DIMS`, e.g. `data=1x3x224x224`. Repeatable.
    #[arg(long = "input-shape", value_name = "NAME=DIMS")]
    input_shapes: Vec<String>,

    /// The function's name (default: the graph's name, sanitised).
    #[arg(long = "func", value_name = "NAME")]
    func: Option<String>,

    /// How convolutions store their outputs: `nchw` (as ONNX has them),
    /// or `nchw<b>c` (e.g. `nchw8c`), channels in blocks of b, innermost,
    /// with the weights repacked to match (docs/onnx.md). Blocks of the
    /// target's vector width (8 for AVX2, 16 for AVX-512) let a
    /// convolution compute b output channels as one vector.
    #[arg(long, value_name = "LAYOUT", default_value = "nchw", value_parser = parse_layout)]
    layout: ActivationLayout,

    /// Colour diagnostics: auto, always or never.
    #[arg(long, value_enum, default_value = "auto")]
    color: super::Color,
}

fn parse_layout(text: &str) -> Result<ActivationLayout, String> {
    ActivationLayout::parse(text).ok_or_else(|| format!("`{text}` is not a layout: use nchw, or nchw<b>c with a channel block b from 2 to 64 (nchw8c, nchw16c)"))
}

/// Runs `tilec import` with the arguments after `import`.
pub fn main(args: Vec<std::ffi::OsString>) -> ExitCode {
    let cli = match ImportCli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(&cli) {
        Ok(summary) => {
            eprintln!("{summary}");
            ExitCode::SUCCESS
        }
        Err(d) => {
            let stderr = StandardStream::stderr(super::color_choice(cli.color));
            SourceMap::new().emit(&mut stderr.lock(), &[*d]);
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &ImportCli) -> Result<String, Box<Diagnostic>> {
    let weights_path = tilec::interp::weights::sidecar_path(&cli.output);
    if weights_path == cli.output {
        return Err(Box::new(
            Diagnostic::error(format!(
                "`{}` is both the module and the weights file",
                cli.output.display()
            ))
            .with_help("name the module `NET.tile`; its weights go to `NET.safetensors`"),
        ));
    }
    for path in [&cli.output, &weights_path] {
        tilec::input::check_writable(path).map_err(|why| {
            Diagnostic::error(format!("cannot write `{}`: {why}", path.display()))
        })?;
    }
    let mut options = ImportOptions {
        input_shapes: BTreeMap::new(),
        func_name: cli.func.clone(),
        layout: cli.layout,
    };
    for spec in &cli.input_shapes {
        let (name, dims) = parse_input_shape(spec)?;
        options.input_shapes.insert(name, dims);
    }
    let bytes = std::fs::read(&cli.model).map_err(|e| {
        Diagnostic::error(format!(
            "cannot read `{}`: {}",
            cli.model.display(),
            tilec::input::io_reason(&e)
        ))
    })?;
    let imported = import_model(&bytes, &options).map_err(|e| import_diagnostic(&cli.model, e))?;
    std::fs::write(&cli.output, &imported.module_text).map_err(|e| {
        Diagnostic::error(format!(
            "cannot write `{}`: {}",
            cli.output.display(),
            tilec::input::io_reason(&e)
        ))
    })?;
    tilec::interp::weights::write_sidecar(&weights_path, &imported.weights)
        .map_err(Diagnostic::error)?;
    let bytes: u64 = imported
        .weights
        .iter()
        .filter_map(|(_, t)| t.ty.size_bytes())
        .sum();
    Ok(format!(
        "imported `{}`: {} nodes, {} compute ops, {} weights ({:.2} MiB) -> `{}`, `{}`",
        cli.model.display(),
        imported.nodes,
        imported.compute_ops,
        imported.weights.len(),
        bytes as f64 / (1024.0 * 1024.0),
        cli.output.display(),
        weights_path.display()
    ))
}

/// `NAME=DIMS` with DIMS like `1x3x224x224`.
fn parse_input_shape(spec: &str) -> Result<(String, Vec<u64>), Box<Diagnostic>> {
    let bad = |why: &str| {
        Box::new(
            Diagnostic::error(format!("invalid `--input-shape {spec}`: {why}")).with_help(
                "write `--input-shape NAME=DIMS`, e.g. `--input-shape data=1x3x224x224`",
            ),
        )
    };
    let Some((name, dims)) = spec.rsplit_once('=') else {
        return Err(bad("no `=`"));
    };
    if name.is_empty() {
        return Err(bad("the input's name is empty"));
    }
    let dims: Vec<u64> = dims
        .split('x')
        .map(|d| d.parse::<u64>().ok().filter(|&d| d >= 1))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("each dimension must be a positive integer"))?;
    Ok((name.to_string(), dims))
}

/// An importer error as a diagnostic: the model file and where in its
/// graph, the message, the hint.
fn import_diagnostic(model: &Path, e: ImportError) -> Box<Diagnostic> {
    let location = e.location().map(|l| format!(": {l}")).unwrap_or_default();
    let mut d = Diagnostic::error(format!("{}{location}: {}", model.display(), e.message));
    if let Some(h) = e.hint {
        d = d.with_help(h);
    }
    Box::new(d)
}
