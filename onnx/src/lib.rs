//! The ONNX importer: an ONNX model (protobuf bytes) → one tile module
//! whose function computes the graph, plus the weights for its sidecar
//! `.safetensors` file.
//!
//! The model's graph inputs become the function's parameters; initializers
//! and `Constant` nodes become `weight` statements keyed by their names
//! (their data goes to [`Imported::weights`], not into the IR) or, when a
//! node needs their values (a reshape's shape, a clip's bounds, a batch
//! norm folded into a convolution), are read at import time. Every shape
//! is inferred here, statically; each supported node becomes one or a few
//! `compute` ops (`docs/onnx.md` lists the ops and their attributes).
//!
//! The text written is parsed and verified with the core before it is
//! returned, and returned as the core prints it.

mod emit;
mod lower;
pub mod proto;

#[cfg(test)]
mod tests;

use prost::Message;
use std::collections::BTreeMap;
use std::fmt;
use tilec::interp::Tensor;

/// What the model does not say: values for dynamic dimensions, and the
/// function's name.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Full shapes of graph inputs by their ONNX names; they replace the
    /// model's shapes (whose fixed dimensions must agree).
    pub input_shapes: BTreeMap<String, Vec<u64>>,
    /// The function's name; by default the graph's, sanitised.
    pub func_name: Option<String>,
    /// How convolutions lay out the activations they write.
    pub layout: ActivationLayout,
}

/// How the importer lays out the (N, C, spatial...) activations that
/// convolutions write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ActivationLayout {
    /// As ONNX has them: N, C, then the spatial dimensions.
    #[default]
    Plain,
    /// Channels in blocks of `b` ("NCHW8c" for `b = 8`): a tensor of
    /// logical shape (N, C, H, W) is stored as (N, C/b, H, W, b), so that
    /// `b` output channels are contiguous and a convolution can compute
    /// them as one vector, with its weights repacked at import time to
    /// (F/b, C/b, R, S, b, b). This is onnxruntime's NCHWc layout and
    /// oneDNN's nChw8c. A convolution writes it where its output channels
    /// divide into blocks and its weights are constants; pooling, ReLU and
    /// other elementwise ops of blocked tensors keep it; any other op reads
    /// a plain copy, made once per tensor (as are the graph's outputs).
    Blocked(u64),
}

impl ActivationLayout {
    /// `nchw`, or `nchw<b>c` for channel blocks of `b` (2 to 64).
    pub fn parse(text: &str) -> Option<ActivationLayout> {
        if text == "nchw" {
            return Some(ActivationLayout::Plain);
        }
        let b: u64 = text.strip_prefix("nchw")?.strip_suffix('c')?.parse().ok()?;
        (2..=64)
            .contains(&b)
            .then_some(ActivationLayout::Blocked(b))
    }

    fn block(self) -> Option<u64> {
        match self {
            ActivationLayout::Plain => None,
            ActivationLayout::Blocked(b) => Some(b),
        }
    }
}

impl fmt::Display for ActivationLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActivationLayout::Plain => f.write_str("nchw"),
            ActivationLayout::Blocked(b) => write!(f, "nchw{b}c"),
        }
    }
}

/// An imported model.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The module, as the core prints it.
    pub module_text: String,
    /// The weights the `weight` statements name, in order of first use.
    pub weights: Vec<(String, Tensor)>,
    /// The function's parameters: (parameter name, ONNX input name).
    pub inputs: Vec<(String, String)>,
    /// The function's results: (ONNX output name, shape).
    pub outputs: Vec<(String, Vec<u64>)>,
    /// How many ONNX nodes the graph has.
    pub nodes: usize,
    /// How many `compute` ops the function has.
    pub compute_ops: usize,
}

/// Why a model could not be imported: what, where in the graph, and what
/// to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError {
    /// The node's name (or `<op_type>_<index>` for an unnamed node).
    pub node: Option<String>,
    pub op: Option<String>,
    pub attribute: Option<String>,
    pub message: String,
    pub hint: Option<String>,
}

impl ImportError {
    pub fn new(message: impl Into<String>) -> ImportError {
        ImportError {
            node: None,
            op: None,
            attribute: None,
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> ImportError {
        self.hint = Some(hint.into());
        self
    }

    /// Where the error is, in words: "node `conv1` (Conv), attribute `pads`".
    pub fn location(&self) -> Option<String> {
        let mut parts = Vec::new();
        match (&self.node, &self.op) {
            (Some(n), Some(op)) => parts.push(format!("node `{n}` ({op})")),
            (Some(n), None) => parts.push(format!("node `{n}`")),
            (None, Some(op)) => parts.push(format!("a {op} node")),
            (None, None) => {}
        }
        if let Some(a) = &self.attribute {
            parts.push(format!("attribute `{a}`"));
        }
        if parts.is_empty() {
            None
        } else {
            Some(parts.join(", "))
        }
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(location) = self.location() {
            write!(f, "{location}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\nhint: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ImportError {}

/// Imports an ONNX model from its protobuf bytes.
pub fn import_model(bytes: &[u8], options: &ImportOptions) -> Result<Imported, ImportError> {
    let model = proto::ModelProto::decode(bytes).map_err(|e| {
        ImportError::new(format!("not a readable ONNX model: {e}")).with_hint(
            "the file may be truncated, or not an ONNX model (`.onnx`, protobuf ModelProto)",
        )
    })?;
    let Some(graph) = &model.graph else {
        return Err(ImportError::new("the model has no graph")
            .with_hint("an ONNX model's `graph` field holds the network; is this an ONNX file?"));
    };
    let opset = default_opset(&model)?;
    let lowered = lower::lower_graph(graph, opset, options)?;
    let (module, _sources) = tilec::syntax::parse_str("imported.tile", &lowered.text)
        .map_err(|(diags, sources)| lowered.internal_error(&diags, &sources))?;
    let diags = tilec::verify::verify_module(&module);
    if diags.has_errors() {
        let mut sources = tilec::diag::SourceMap::new();
        sources.add("imported.tile", lowered.text.clone());
        return Err(lowered.internal_error(&diags, &sources));
    }
    Ok(Imported {
        module_text: tilec::syntax::print_module(&module),
        weights: lowered.weights,
        inputs: lowered.inputs,
        outputs: lowered.outputs,
        nodes: graph.node.len(),
        compute_ops: lowered.compute_ops,
    })
}

/// The version of the default ONNX operator set (domain "" or "ai.onnx")
/// the model imports; the meaning of some attributes depends on it.
fn default_opset(model: &proto::ModelProto) -> Result<i64, ImportError> {
    let versions: Vec<i64> = model
        .opset_import
        .iter()
        .filter(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .collect();
    match versions.as_slice() {
        [] if model.opset_import.is_empty() => {
            // IR version 2 and older had no opset imports: opset 1.
            Ok(1)
        }
        [] => Err(ImportError::new(
            "the model imports no version of the default ONNX operator set",
        )
        .with_hint("tilec imports models of the `ai.onnx` domain only")),
        [v] => Ok(*v),
        _ => Err(ImportError::new(
            "the model imports the default ONNX operator set more than once",
        )),
    }
}

/// `name` with every character outside `[A-Za-z0-9_]` replaced by `_`,
/// starting with a letter or `_`; `fallback` if nothing is left.
pub fn sanitise(name: &str, fallback: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        return fallback.to_string();
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}
