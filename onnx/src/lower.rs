//! ONNX graph → tile text, node by node, with every shape inferred here.
//!
//! Values are either runtime tensors (graph inputs and the results of the
//! compute ops written so far) or constants (initializers, `Constant`
//! nodes, and what the importer computes from them). A constant becomes a
//! `weight` statement the first time a compute op reads it; ops that need
//! a constant's values (shapes, bounds, batch-norm statistics) read them
//! at import time.

use crate::emit::{ACC, Body, Combiner, Compute, Epilogue, Read, affine, tensor_type};
use crate::proto::{
    AttributeProto, GraphProto, NodeProto, TensorProto, attribute_type, data_type,
    tensor_shape_proto::dimension, type_proto,
};
use crate::{ImportError, ImportOptions, sanitise};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::rc::Rc;
use tilec::diag::{Diagnostics, SourceMap};
use tilec::interp::{Tensor, TensorData};
use tilec::ir::{ElemType, TensorType};

type Result<T> = std::result::Result<T, ImportError>;

/// The lowered graph, before the core has parsed it.
pub struct Lowered {
    pub text: String,
    pub weights: Vec<(String, Tensor)>,
    pub inputs: Vec<(String, String)>,
    pub outputs: Vec<(String, Vec<u64>)>,
    pub compute_ops: usize,
    /// Where each node's text starts in `text`: (offset, node, op type).
    op_starts: Vec<(usize, String, String)>,
}

impl Lowered {
    /// A parse or verification failure of the importer's own text: a bug,
    /// reported at the node whose text it is.
    pub fn internal_error(&self, diags: &Diagnostics, sources: &SourceMap) -> ImportError {
        let first = diags
            .iter()
            .find(|d| d.is_error())
            .or_else(|| diags.iter().next());
        let offset = first
            .and_then(|d| d.span())
            .map(|s| s.range().start)
            .unwrap_or(0);
        let at = self
            .op_starts
            .iter()
            .rev()
            .find(|(start, _, _)| *start <= offset);
        ImportError {
            node: at.map(|(_, n, _)| n.clone()),
            op: at.map(|(_, _, op)| op.clone()),
            attribute: None,
            // The first error says enough; later ones often follow from it.
            message: format!(
                "internal error: the tile text written for this node does not verify ({} error(s)); the first:\n{}",
                diags.iter().filter(|d| d.is_error()).count(),
                sources.render(&first.into_iter().cloned().collect::<Vec<_>>())
            ),
            hint: Some("this is a bug in tilec's importer; please report it with the model".into()),
        }
    }
}

#[derive(Debug)]
enum ConstData {
    F32(Vec<f32>),
    I64(Vec<i64>),
    /// Data the importer cannot use (another type, external data): an error
    /// if a node reads it.
    Unreadable(String),
}

#[derive(Debug)]
struct Const {
    /// The weight's key: the initializer's name, or a derived one.
    key: String,
    shape: Vec<u64>,
    data: ConstData,
}

#[derive(Clone, Debug)]
enum Val {
    /// A runtime tensor of logical shape `shape`; with `block: Some(b)`,
    /// stored blocked (`ActivationLayout::Blocked`): (N, C/b, spatial..., b).
    Tensor {
        name: String,
        shape: Vec<u64>,
        block: Option<u64>,
    },
    Const(Rc<Const>),
}

impl Val {
    fn shape(&self) -> &[u64] {
        match self {
            Val::Tensor { shape, .. } => shape,
            Val::Const(c) => &c.shape,
        }
    }
}

/// A one-element f32 constant's value.
fn scalar_const(v: &Val) -> Option<f32> {
    match v {
        Val::Const(c) => match &c.data {
            ConstData::F32(d) if d.len() == 1 => Some(d[0]),
            _ => None,
        },
        Val::Tensor { .. } => None,
    }
}

/// The stored shape of a tensor of logical shape (N, C, spatial...) in
/// blocks of `b` channels: (N, C/b, spatial..., b).
fn blocked_shape(logical: &[u64], b: u64) -> Vec<u64> {
    let mut s = vec![logical[0], logical[1] / b];
    s.extend(&logical[2..]);
    s.push(b);
    s
}

/// How an elementwise result is stored: plain (`None`), or its logical
/// shape and channel block.
type Stored = Option<(Vec<u64>, u64)>;

/// An operand of an elementwise op: a tensor read, or a one-element
/// constant written into the body.
enum Operand {
    Tensor(String, Vec<u64>),
    Scalar(f32),
}

pub fn lower_graph(graph: &GraphProto, opset: i64, options: &ImportOptions) -> Result<Lowered> {
    let mut l = Lowerer::new(graph, opset);
    l.block = options.layout.block();
    for init in &graph.initializer {
        let c = read_tensor_proto(init, &init.name)?;
        l.values.insert(init.name.clone(), Val::Const(Rc::new(c)));
    }
    l.read_inputs(graph, options)?;
    let folds = plan_batchnorm_folds(graph, &l);
    let folded: HashSet<usize> = folds.values().copied().collect();
    for (index, node) in graph.node.iter().enumerate() {
        if folded.contains(&index) {
            continue; // folded into its convolution
        }
        let cx = NodeCx::new(node, index);
        l.node_start(&cx);
        let fold = folds
            .get(&index)
            .map(|&bn| NodeCx::new(&graph.node[bn], bn));
        l.lower_node(&cx, fold.as_ref())?;
    }
    l.finish(graph, options)
}

struct Lowerer {
    opset: i64,
    values: HashMap<String, Val>,
    used_names: HashSet<String>,
    /// Each constant written as a weight (by identity) → its value's name.
    /// The constant is kept alive here so that its address is not reused
    /// by a later constant (derived constants are built and dropped).
    weight_values: HashMap<*const Const, (Rc<Const>, String)>,
    /// The weights' keys so far: each is unique in the weights file.
    weight_keys: HashSet<String>,
    weights: Vec<(String, Tensor)>,
    weight_text: String,
    params: Vec<(String, Vec<u64>)>,
    inputs: Vec<(String, String)>,
    body: String,
    op_starts: Vec<(usize, String, String)>,
    compute_ops: usize,
    /// How many node inputs and graph outputs use each value.
    uses: HashMap<String, usize>,
    /// The channel block of `ActivationLayout::Blocked`, if asked for.
    block: Option<u64>,
    /// The plain copy of each blocked tensor some op read as plain.
    plain_copies: HashMap<String, String>,
}

impl Lowerer {
    fn new(graph: &GraphProto, opset: i64) -> Lowerer {
        let mut uses: HashMap<String, usize> = HashMap::new();
        for n in &graph.node {
            for i in n.input.iter().filter(|i| !i.is_empty()) {
                *uses.entry(i.clone()).or_default() += 1;
            }
        }
        for o in &graph.output {
            *uses.entry(o.name.clone()).or_default() += 1;
        }
        Lowerer {
            opset,
            values: HashMap::new(),
            used_names: HashSet::new(),
            weight_values: HashMap::new(),
            weight_keys: HashSet::new(),
            weights: Vec::new(),
            weight_text: String::new(),
            params: Vec::new(),
            inputs: Vec::new(),
            body: String::new(),
            op_starts: Vec::new(),
            compute_ops: 0,
            uses,
            block: None,
            plain_copies: HashMap::new(),
        }
    }

    fn fresh_name(&mut self, base: &str) -> String {
        let base = sanitise(base, "v");
        let mut name = base.clone();
        let mut k = 1;
        while self.used_names.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.used_names.insert(name.clone());
        name
    }

    fn read_inputs(&mut self, graph: &GraphProto, options: &ImportOptions) -> Result<()> {
        let real: Vec<_> = graph
            .input
            .iter()
            .filter(|i| !self.values.contains_key(&i.name))
            .collect();
        for name in options.input_shapes.keys() {
            if !real.iter().any(|i| &i.name == name) {
                let names: Vec<&str> = real.iter().map(|i| i.name.as_str()).collect();
                let mut e = ImportError::new(format!(
                    "`--input-shape` names `{name}`, which is not an input of the graph"
                ));
                e.hint = Some(match tilec::diag::closest(name, names.iter().copied()) {
                    Some(c) => format!("did you mean `{c}`? the inputs are: {}", names.join(", ")),
                    None => format!("the inputs are: {}", names.join(", ")),
                });
                return Err(e);
            }
        }
        for input in real {
            let shape = input_shape(input, options)?;
            let name = self.fresh_name(&input.name);
            self.params.push((name.clone(), shape.clone()));
            self.inputs.push((name.clone(), input.name.clone()));
            self.values.insert(
                input.name.clone(),
                Val::Tensor {
                    name,
                    shape,
                    block: None,
                },
            );
        }
        Ok(())
    }

    fn node_start(&mut self, cx: &NodeCx) {
        self.op_starts
            .push((self.body.len(), cx.name.clone(), cx.node.op_type.clone()));
    }

    fn value(&self, cx: &NodeCx, name: &str) -> Result<Val> {
        self.values.get(name).cloned().ok_or_else(|| {
            cx.err(format!("input `{name}` is not defined before this node"))
                .with_hint("ONNX graphs list their nodes in topological order, each input an initializer, a graph input or an earlier node's output")
        })
    }

    /// The node's `i`-th input, which it must have.
    fn input(&self, cx: &NodeCx, i: usize) -> Result<Val> {
        match cx.input(i) {
            Some(name) => self.value(cx, name),
            None => Err(cx.err(format!("input {i} is missing"))),
        }
    }

    fn optional_input(&self, cx: &NodeCx, i: usize) -> Result<Option<Val>> {
        cx.input(i).map(|name| self.value(cx, name)).transpose()
    }

    /// The name of a tensor to read in the plain layout: a runtime value
    /// (a blocked one through its plain copy), or a constant written as a
    /// weight on first use.
    fn tensor(&mut self, cx: &NodeCx, v: &Val) -> Result<String> {
        match v {
            Val::Tensor {
                name,
                shape,
                block: Some(b),
            } => Ok(self.plain_copy(cx, name, shape, *b)),
            Val::Tensor {
                name, block: None, ..
            } => Ok(name.clone()),
            Val::Const(c) => self.weight(cx, c),
        }
    }

    /// The plain copy of `name`, a tensor of logical shape `shape` stored
    /// in blocks of `b` channels; written (one compute op) the first time
    /// an op asks for it.
    fn plain_copy(&mut self, cx: &NodeCx, name: &str, shape: &[u64], b: u64) -> String {
        if let Some(p) = self.plain_copies.get(name) {
            return p.clone();
        }
        let spatial_axes = axis_names("d", shape.len() - 2);
        let mut axes = vec![
            ("n".to_string(), shape[0]),
            ("cb".to_string(), shape[1] / b),
        ];
        axes.extend(spatial_axes.iter().cloned().zip(shape[2..].iter().copied()));
        axes.push(("cl".to_string(), b));
        let mut read_index = vec!["n".to_string(), "cb".to_string()];
        read_index.extend(spatial_axes.iter().cloned());
        read_index.push("cl".to_string());
        let mut out_index = vec!["n".to_string(), affine(&[(b as i64, "cb"), (1, "cl")], 0)];
        out_index.extend(spatial_axes.iter().cloned());
        let c = Compute {
            label: format!("{}.to_nchw", cx.name),
            spatial: axes,
            reduce: None,
            reads: vec![Read::new("xv", name, read_index)],
            out_shape: shape.to_vec(),
            out_index,
            body: Body::default(),
            result: "xv".into(),
            epilogue: None,
        };
        let plain = self.fresh_name(&format!("{name}_nchw"));
        self.body.push_str(&c.text(&plain));
        self.compute_ops += 1;
        self.plain_copies.insert(name.to_string(), plain.clone());
        plain
    }

    /// A tensor to read as stored, blocked or not: its name and block.
    fn stored_tensor(&mut self, cx: &NodeCx, v: &Val) -> Result<(String, Option<u64>)> {
        match v {
            Val::Tensor { name, block, .. } => Ok((name.clone(), *block)),
            Val::Const(c) => Ok((self.weight(cx, c)?, None)),
        }
    }

    fn weight(&mut self, cx: &NodeCx, c: &Rc<Const>) -> Result<String> {
        let data = match &c.data {
            ConstData::F32(d) => d.clone(),
            ConstData::I64(_) => return Err(cx.err(format!("constant `{}` is an integer tensor used as data; tilec imports f32 computation only", c.key))),
            ConstData::Unreadable(why) => return Err(cx.err(format!("constant `{}` cannot be read: {why}", c.key))),
        };
        if let Some((_, name)) = self.weight_values.get(&Rc::as_ptr(c)) {
            return Ok(name.clone());
        }
        if c.shape.contains(&0) {
            return Err(cx.err(format!(
                "constant `{}` is empty (shape {}); tilec tensors have no empty dimension",
                c.key,
                shape_text(&c.shape)
            )));
        }
        let name = self.fresh_name(&c.key);
        let mut key = c.key.clone();
        for k in 1.. {
            if !self.weight_keys.contains(&key) {
                break;
            }
            key = format!("{}_{k}", c.key);
        }
        self.weight_keys.insert(key.clone());
        let ty = TensorType::new(c.shape.clone(), ElemType::F32);
        let tensor = Tensor::new(ty, TensorData::F32(data))
            .map_err(|e| cx.err(format!("constant `{}`: {}", c.key, e.0)))?;
        writeln!(
            self.weight_text,
            "  %{name} = weight \"{key}\" : {}",
            tensor_type(&c.shape)
        )
        .unwrap();
        self.weights.push((key, tensor));
        self.weight_values
            .insert(Rc::as_ptr(c), (c.clone(), name.clone()));
        Ok(name)
    }

    fn operand(&mut self, cx: &NodeCx, v: &Val) -> Result<Operand> {
        if let Some(x) = scalar_const(v) {
            return Ok(Operand::Scalar(x));
        }
        Ok(Operand::Tensor(self.tensor(cx, v)?, v.shape().to_vec()))
    }

    /// [`Lowerer::operand`], a blocked tensor read as it is stored.
    fn stored_operand(&mut self, cx: &NodeCx, v: &Val) -> Result<Operand> {
        match v {
            Val::Tensor {
                name,
                shape,
                block: Some(b),
            } => Ok(Operand::Tensor(name.clone(), blocked_shape(shape, *b))),
            _ => self.operand(cx, v),
        }
    }

    /// Writes a compute op defining ONNX value `out`.
    fn push(&mut self, c: Compute, out: &str) {
        let shape = c.out_shape.clone();
        self.push_stored(c, out, shape, None);
    }

    /// Writes a compute op defining ONNX value `out`, of logical shape
    /// `shape`, stored in blocks of `block` channels (if some).
    fn push_stored(&mut self, c: Compute, out: &str, shape: Vec<u64>, block: Option<u64>) {
        let name = self.fresh_name(out);
        self.body.push_str(&c.text(&name));
        self.compute_ops += 1;
        self.values
            .insert(out.to_string(), Val::Tensor { name, shape, block });
    }

    fn define_const(&mut self, out: &str, key: String, shape: Vec<u64>, data: ConstData) {
        self.values.insert(
            out.to_string(),
            Val::Const(Rc::new(Const { key, shape, data })),
        );
    }

    fn finish(mut self, graph: &GraphProto, options: &ImportOptions) -> Result<Lowered> {
        if graph.output.is_empty() {
            return Err(ImportError::new("the graph has no outputs"));
        }
        let mut results = Vec::new();
        let mut outputs = Vec::new();
        let mut returned = Vec::new();
        for o in &graph.output {
            let Some(v) = self.values.get(&o.name).cloned() else {
                return Err(ImportError::new(format!(
                    "graph output `{}` is computed by no node",
                    o.name
                )));
            };
            let cx = NodeCx::graph_output();
            returned.push(format!("%{}", self.tensor(&cx, &v)?));
            results.push(tensor_type(v.shape()));
            outputs.push((o.name.clone(), v.shape().to_vec()));
        }
        writeln!(self.body, "  return {}", returned.join(", ")).unwrap();
        let func = match &options.func_name {
            Some(f) => {
                if sanitise(f, "") != *f {
                    return Err(
                        ImportError::new(format!("`{f}` is not a valid function name")).with_hint(
                            "use letters, digits and `_`, starting with a letter or `_`",
                        ),
                    );
                }
                f.clone()
            }
            None => sanitise(&graph.name, "model"),
        };
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(n, s)| format!("%{n}: {}", tensor_type(s)))
            .collect();
        let results = if results.len() == 1 {
            results[0].clone()
        } else {
            format!("({})", results.join(", "))
        };
        let header = format!("func @{func}({}) -> {results} {{\n", params.join(", "));
        let prefix = header.len() + self.weight_text.len();
        let text = format!("{header}{}{}}}\n", self.weight_text, self.body);
        let op_starts = self
            .op_starts
            .into_iter()
            .map(|(o, n, op)| (o + prefix, n, op))
            .collect();
        Ok(Lowered {
            text,
            weights: self.weights,
            inputs: self.inputs,
            outputs,
            compute_ops: self.compute_ops,
            op_starts,
        })
    }
}

fn input_shape(input: &crate::proto::ValueInfoProto, options: &ImportOptions) -> Result<Vec<u64>> {
    let err = |msg: String| {
        let mut e = ImportError::new(msg);
        e.node = None;
        e
    };
    let tensor = match input.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => t,
        Some(_) => {
            return Err(err(format!(
                "graph input `{}` is not a tensor; tilec imports tensor inputs only",
                input.name
            )));
        }
        None => return Err(err(format!("graph input `{}` has no type", input.name))),
    };
    if tensor.elem_type != data_type::FLOAT {
        return Err(err(format!(
            "graph input `{}` has element type {}; tilec imports FLOAT (f32) models only",
            input.name,
            data_type::name(tensor.elem_type)
        )));
    }
    let dims = tensor.shape.as_ref().map(|s| s.dim.as_slice());
    if let Some(given) = options.input_shapes.get(&input.name) {
        if let Some(dims) = dims {
            if dims.len() != given.len() {
                return Err(err(format!(
                    "`--input-shape` gives `{}` {} dimensions, but the model's input has {}",
                    input.name,
                    given.len(),
                    dims.len()
                )));
            }
            for (i, (d, &g)) in dims.iter().zip(given).enumerate() {
                if let Some(dimension::Value::DimValue(v)) = d.value
                    && v != g as i64
                {
                    return Err(err(format!(
                        "`--input-shape` gives dimension {i} of `{}` as {g}, but the model fixes it to {v}",
                        input.name
                    )));
                }
            }
        }
        if given.contains(&0) {
            return Err(err(format!(
                "`--input-shape` gives `{}` an empty dimension; every dimension must be at least 1",
                input.name
            )));
        }
        return Ok(given.clone());
    }
    let Some(dims) = dims else {
        return Err(
            err(format!("graph input `{}` has no shape", input.name)).with_hint(format!(
                "give its shape with `--input-shape {}=1x3x224x224`",
                input.name
            )),
        );
    };
    let mut shape = Vec::new();
    for (i, d) in dims.iter().enumerate() {
        match &d.value {
            Some(dimension::Value::DimValue(v)) if *v >= 1 => shape.push(*v as u64),
            other => {
                let what = match other {
                    Some(dimension::Value::DimParam(p)) if !p.is_empty() => {
                        format!("dynamic dimension {i} (`{p}`)")
                    }
                    Some(dimension::Value::DimValue(v)) if *v < 1 => {
                        format!("dimension {i} of size {v}")
                    }
                    _ => format!("dynamic dimension {i}"),
                };
                let example: Vec<String> = dims
                    .iter()
                    .map(|d| match d.value {
                        Some(dimension::Value::DimValue(v)) if v >= 1 => v.to_string(),
                        _ => "1".to_string(),
                    })
                    .collect();
                return Err(err(format!(
                    "graph input `{}` has a {what} without a value",
                    input.name
                ))
                .with_hint(format!(
                    "give the input's whole shape, e.g. `--input-shape {}={}`",
                    input.name,
                    example.join("x")
                )));
            }
        }
    }
    Ok(shape)
}

/// A tensor proto's contents as a constant keyed by `key`.
fn read_tensor_proto(t: &TensorProto, key: &str) -> Result<Const> {
    let bad = |msg: String| ImportError::new(format!("tensor `{key}`: {msg}"));
    let mut shape = Vec::new();
    for &d in &t.dims {
        if d < 0 {
            return Err(bad(format!("negative dimension {d}")));
        }
        shape.push(d as u64);
    }
    let count = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .filter(|&n| n < (1 << 40))
        .ok_or_else(|| bad("too many elements".into()))? as usize;
    let key = sanitise_key(key);
    if t.data_location == crate::proto::DATA_LOCATION_EXTERNAL {
        let data = ConstData::Unreadable(
            "its data is in an external file, which tilec does not read".into(),
        );
        return Ok(Const { key, shape, data });
    }
    let check = |n: usize| {
        if n == count {
            Ok(())
        } else {
            Err(bad(format!("{n} values for a shape of {count} elements")))
        }
    };
    let data = match t.data_type {
        data_type::FLOAT => {
            let v: Vec<f32> = if !t.raw_data.is_empty() {
                if !t.raw_data.len().is_multiple_of(4) {
                    return Err(bad(format!(
                        "{} bytes of raw data is not a whole number of floats",
                        t.raw_data.len()
                    )));
                }
                t.raw_data
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()
            } else {
                t.float_data.clone()
            };
            check(v.len())?;
            ConstData::F32(v)
        }
        data_type::INT64 | data_type::INT32 => {
            let v: Vec<i64> = if !t.raw_data.is_empty() {
                let width = if t.data_type == data_type::INT64 {
                    8
                } else {
                    4
                };
                if !t.raw_data.len().is_multiple_of(width) {
                    return Err(bad(format!(
                        "{} bytes of raw data is not a whole number of integers",
                        t.raw_data.len()
                    )));
                }
                t.raw_data
                    .chunks_exact(width)
                    .map(|b| {
                        if width == 8 {
                            i64::from_le_bytes(b.try_into().unwrap())
                        } else {
                            i32::from_le_bytes(b.try_into().unwrap()) as i64
                        }
                    })
                    .collect()
            } else if t.data_type == data_type::INT64 {
                t.int64_data.clone()
            } else {
                t.int32_data.iter().map(|&x| x as i64).collect()
            };
            check(v.len())?;
            ConstData::I64(v)
        }
        other => ConstData::Unreadable(format!(
            "its element type is {}; tilec imports FLOAT (f32) data and integer shapes",
            data_type::name(other)
        )),
    };
    Ok(Const { key, shape, data })
}

/// A weight key that can be written in a tile string literal as it is.
fn sanitise_key(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c == '"' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if s.is_empty() {
        "weight".to_string()
    } else {
        s
    }
}

/// Batch normalisations to fold: conv node index → batch-norm node index,
/// where the conv's output feeds only the batch norm and every parameter
/// of both is a constant.
fn plan_batchnorm_folds(graph: &GraphProto, l: &Lowerer) -> HashMap<usize, usize> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for o in &n.output {
            producer.insert(o.as_str(), i);
        }
    }
    let is_const = |name: &str| matches!(l.values.get(name), Some(Val::Const(c)) if matches!(c.data, ConstData::F32(_)));
    let mut folds = HashMap::new();
    for (bi, bn) in graph.node.iter().enumerate() {
        if bn.op_type != "BatchNormalization"
            || !bn.domain.is_empty() && bn.domain != "ai.onnx"
            || bn.input.len() != 5
        {
            continue;
        }
        if bn.output.iter().skip(1).any(|o| !o.is_empty())
            || bn.input[1..].iter().any(|i| !is_const(i))
        {
            continue;
        }
        let Some(&ci) = producer.get(bn.input[0].as_str()) else {
            continue;
        };
        let conv = &graph.node[ci];
        let conv_ok = conv.op_type == "Conv"
            && (conv.domain.is_empty() || conv.domain == "ai.onnx")
            && conv.output.len() == 1
            && conv.input.len() >= 2;
        if !conv_ok || l.uses.get(&conv.output[0]).copied() != Some(1) || !is_const(&conv.input[1])
        {
            continue;
        }
        if conv
            .input
            .get(2)
            .is_some_and(|b| !b.is_empty() && !is_const(b))
        {
            continue;
        }
        folds.insert(ci, bi);
    }
    folds
}

/// A node being lowered, for attribute access and diagnostics.
struct NodeCx<'a> {
    node: &'a NodeProto,
    name: String,
    graph_output: bool,
}

impl<'a> NodeCx<'a> {
    fn new(node: &'a NodeProto, index: usize) -> NodeCx<'a> {
        let name = if node.name.is_empty() {
            format!("{}_{index}", node.op_type)
        } else {
            node.name.clone()
        };
        NodeCx {
            node,
            name,
            graph_output: false,
        }
    }

    fn graph_output() -> NodeCx<'static> {
        static EMPTY: std::sync::LazyLock<NodeProto> = std::sync::LazyLock::new(NodeProto::default);
        NodeCx {
            node: &EMPTY,
            name: String::new(),
            graph_output: true,
        }
    }

    fn op(&self) -> &str {
        &self.node.op_type
    }

    fn err(&self, message: impl Into<String>) -> ImportError {
        if self.graph_output {
            return ImportError::new(message);
        }
        ImportError {
            node: Some(self.name.clone()),
            op: Some(self.node.op_type.clone()),
            attribute: None,
            message: message.into(),
            hint: None,
        }
    }

    fn attr_err(&self, attribute: &str, message: impl Into<String>) -> ImportError {
        let mut e = self.err(message);
        e.attribute = Some(attribute.to_string());
        e
    }

    /// The `i`-th input's name; `None` where absent or empty (optional).
    fn input(&self, i: usize) -> Option<&'a str> {
        self.node
            .input
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    fn output(&self, i: usize) -> Result<&'a str> {
        self.node
            .output
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| self.err(format!("output {i} is missing")))
    }

    /// Refuses outputs past the first `n` that something uses.
    fn only_outputs(&self, n: usize, uses: &HashMap<String, usize>) -> Result<()> {
        for (i, o) in self.node.output.iter().enumerate().skip(n) {
            if !o.is_empty() && uses.get(o).copied().unwrap_or(0) > 0 {
                return Err(self.err(format!("output {i} (`{o}`) is used, and tilec imports only the first {n} output(s) of {}", self.op())));
            }
        }
        Ok(())
    }

    /// Refuses attributes outside `known`, and any that refers to a
    /// function's attribute.
    fn check_attributes(&self, known: &[&str]) -> Result<()> {
        for a in &self.node.attribute {
            if !known.contains(&a.name.as_str()) {
                let mut e = self.attr_err(
                    &a.name,
                    format!("unsupported attribute `{}` of {}", a.name, self.op()),
                );
                e.hint = Some(if known.is_empty() {
                    format!("tilec's {} takes no attributes", self.op())
                } else {
                    format!("tilec's {} knows: {}", self.op(), known.join(", "))
                });
                return Err(e);
            }
            if !a.ref_attr_name.is_empty() {
                return Err(self.attr_err(&a.name, "attribute refers to a function's attribute, which is meaningless in a main graph"));
            }
        }
        Ok(())
    }

    fn attr(&self, name: &str, ty: i32, type_name: &str) -> Result<Option<&'a AttributeProto>> {
        match self.node.attribute.iter().find(|a| a.name == name) {
            None => Ok(None),
            Some(a) if a.r#type == ty || a.r#type == 0 => Ok(Some(a)),
            Some(_) => Err(self.attr_err(
                name,
                format!("attribute `{name}` should be of type {type_name}"),
            )),
        }
    }

    fn int(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self
            .attr(name, attribute_type::INT, "INT")?
            .map_or(default, |a| a.i))
    }

    fn float(&self, name: &str, default: f32) -> Result<f32> {
        Ok(self
            .attr(name, attribute_type::FLOAT, "FLOAT")?
            .map_or(default, |a| a.f))
    }

    fn ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        Ok(self
            .attr(name, attribute_type::INTS, "INTS")?
            .map(|a| a.ints.clone()))
    }

    fn string(&self, name: &str, default: &str) -> Result<String> {
        match self.attr(name, attribute_type::STRING, "STRING")? {
            None => Ok(default.to_string()),
            Some(a) => String::from_utf8(a.s.clone())
                .map_err(|_| self.attr_err(name, format!("attribute `{name}` is not UTF-8"))),
        }
    }

    /// An attribute that must have one of `allowed` values.
    fn int_in(&self, name: &str, default: i64, allowed: &[i64]) -> Result<i64> {
        let v = self.int(name, default)?;
        if !allowed.contains(&v) {
            return Err(self
                .attr_err(
                    name,
                    format!("{} with {name} = {v} is not supported", self.op()),
                )
                .with_hint(format!(
                    "tilec supports {name} = {}",
                    allowed
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(" or ")
                )));
        }
        Ok(v)
    }

    /// An axis attribute in `[-rank, rank)`, made non-negative.
    fn axis(&self, name: &str, default: i64, rank: usize) -> Result<usize> {
        let a = self.int(name, default)?;
        normalise_axis(a, rank).ok_or_else(|| {
            self.attr_err(
                name,
                format!("{name} = {a} is out of range for a tensor of rank {rank}"),
            )
        })
    }
}

fn normalise_axis(a: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if a < 0 { a + r } else { a };
    (0..r).contains(&a).then_some(a as usize)
}

fn shape_text(shape: &[u64]) -> String {
    if shape.is_empty() {
        "[]".into()
    } else {
        format!(
            "[{}]",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Numpy broadcasting of two shapes.
fn broadcast(a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out.push(match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        });
    }
    Some(out)
}

/// The index that reads a tensor of `shape` broadcast to `out_shape`,
/// whose dimensions the axes `axes` run over.
fn broadcast_index(shape: &[u64], out_shape: &[u64], axes: &[String]) -> Vec<String> {
    let offset = out_shape.len() - shape.len();
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            if d == 1 && out_shape[i + offset] != 1 {
                "0".to_string()
            } else {
                axes[i + offset].clone()
            }
        })
        .collect()
}

fn axis_names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

fn product(shape: &[u64]) -> u64 {
    shape.iter().product()
}

/// Padding and output size of a sliding window along each spatial
/// dimension: (begin pads, end pads, output extents).
struct Window {
    begin: Vec<i64>,
    end: Vec<i64>,
    out: Vec<u64>,
}

/// A window's geometry from the ONNX attributes: `extent` is each
/// dimension's dilated kernel extent.
fn window(
    cx: &NodeCx,
    input: &[u64],
    extent: &[u64],
    strides: &[i64],
    ceil_mode: bool,
) -> Result<Window> {
    let n = input.len();
    let auto_pad = cx.string("auto_pad", "NOTSET")?;
    let pads = cx.ints("pads")?;
    let mut w = Window {
        begin: vec![0; n],
        end: vec![0; n],
        out: vec![0; n],
    };
    match auto_pad.as_str() {
        "NOTSET" | "VALID" => {
            if auto_pad == "NOTSET"
                && let Some(p) = pads
            {
                if p.len() != 2 * n || p.iter().any(|&x| x < 0) {
                    return Err(cx.attr_err(
                        "pads",
                        format!(
                            "pads {p:?} should be {} non-negative values (begins, then ends)",
                            2 * n
                        ),
                    ));
                }
                w.begin.copy_from_slice(&p[..n]);
                w.end.copy_from_slice(&p[n..]);
            }
            for i in 0..n {
                let span = input[i] as i64 + w.begin[i] + w.end[i] - extent[i] as i64;
                if span < 0 {
                    return Err(cx.err(format!(
                        "the window (extent {} along spatial dimension {i}) is larger than the padded input ({})",
                        extent[i],
                        input[i] as i64 + w.begin[i] + w.end[i]
                    )));
                }
                let s = strides[i];
                let mut out = if ceil_mode {
                    (span + s - 1) / s + 1
                } else {
                    span / s + 1
                };
                // The last window must start inside the input or its begin padding.
                if ceil_mode && (out - 1) * s >= input[i] as i64 + w.begin[i] {
                    out -= 1;
                }
                w.out[i] = out as u64;
            }
        }
        "SAME_UPPER" | "SAME_LOWER" => {
            for i in 0..n {
                let s = strides[i];
                let out = (input[i] as i64 + s - 1) / s;
                let total = ((out - 1) * s + extent[i] as i64 - input[i] as i64).max(0);
                let small = total / 2;
                w.begin[i] = if auto_pad == "SAME_UPPER" {
                    small
                } else {
                    total - small
                };
                w.end[i] = total - w.begin[i];
                w.out[i] = out as u64;
            }
        }
        other => {
            return Err(cx
                .attr_err(
                    "auto_pad",
                    format!("auto_pad = \"{other}\" is not supported"),
                )
                .with_hint("tilec supports NOTSET, VALID, SAME_UPPER and SAME_LOWER"));
        }
    }
    Ok(w)
}

/// Per-dimension attribute list of `n` positive values, default all 1.
fn positive_list(cx: &NodeCx, name: &str, n: usize) -> Result<Vec<i64>> {
    match cx.ints(name)? {
        None => Ok(vec![1; n]),
        Some(v) if v.len() == n && v.iter().all(|&x| x >= 1) => Ok(v),
        Some(v) => Err(cx.attr_err(
            name,
            format!("{name} {v:?} should be {n} positive values, one per spatial dimension"),
        )),
    }
}

/// Names of spatial output axes and kernel axes for 1 to 3 spatial
/// dimensions.
/// A convolution's weight `data` of shape `ws` = (F, C, kernel...) repacked
/// for blocked activations (`ActivationLayout::Blocked`) of `b` channels:
/// (F/b, C/b, kernel..., b, b) where the input is blocked too, else
/// (F/b, C, kernel..., b); the output channel's lane is innermost. Returns
/// the new shape and data.
fn pack_conv_weight(data: &[f32], ws: &[u64], b: u64, blocked_input: bool) -> (Vec<u64>, Vec<f32>) {
    let (f, c, b_) = (ws[0] as usize, ws[1] as usize, b as usize);
    let kernel = product(&ws[2..]) as usize;
    let at = |out_channel: usize, in_channel: usize, k: usize| {
        data[(out_channel * c + in_channel) * kernel + k]
    };
    let mut packed = Vec::with_capacity(data.len());
    let mut shape = vec![ws[0] / b];
    if blocked_input {
        shape.push(ws[1] / b);
        shape.extend(&ws[2..]);
        shape.extend([b, b]);
        for fb in 0..f / b_ {
            for cb in 0..c / b_ {
                for k in 0..kernel {
                    for cl in 0..b_ {
                        packed.extend((0..b_).map(|fl| at(fb * b_ + fl, cb * b_ + cl, k)));
                    }
                }
            }
        }
    } else {
        shape.push(ws[1]);
        shape.extend(&ws[2..]);
        shape.push(b);
        for fb in 0..f / b_ {
            for ci in 0..c {
                for k in 0..kernel {
                    packed.extend((0..b_).map(|fl| at(fb * b_ + fl, ci, k)));
                }
            }
        }
    }
    (shape, packed)
}

fn spatial_axes(n: usize) -> (Vec<String>, Vec<String>) {
    let (o, k): (&[&str], &[&str]) = match n {
        1 => (&["w"], &["s"]),
        2 => (&["h", "w"], &["r", "s"]),
        _ => (&["d", "h", "w"], &["q", "r", "s"]),
    };
    (
        o.iter().map(|s| s.to_string()).collect(),
        k.iter().map(|s| s.to_string()).collect(),
    )
}

impl Lowerer {
    fn lower_node(&mut self, cx: &NodeCx, fold: Option<&NodeCx>) -> Result<()> {
        let node = cx.node;
        if !node.domain.is_empty() && node.domain != "ai.onnx" {
            return Err(cx
                .err(format!(
                    "operator {} of domain `{}` is not supported",
                    node.op_type, node.domain
                ))
                .with_hint(
                    "tilec imports operators of the default ONNX domain; docs/onnx.md lists them",
                ));
        }
        match node.op_type.as_str() {
            "Conv" => self.conv(cx, fold),
            "ConvTranspose" => self.conv_transpose(cx),
            "BatchNormalization" => self.batchnorm(cx),
            "Relu" | "Sigmoid" | "Tanh" | "Erf" | "Exp" | "Log" | "Sqrt" | "Abs" | "Neg"
            | "Reciprocal" => self.unary(cx),
            "Gelu" => self.gelu(cx),
            "Clip" => self.clip(cx),
            "LeakyRelu" => self.leaky_relu(cx),
            "Add" | "Sub" | "Mul" | "Div" | "Max" | "Min" | "Sum" => self.binary(cx),
            "MaxPool" | "AveragePool" => self.pool(cx),
            "GlobalAveragePool" | "GlobalMaxPool" => self.global_pool(cx),
            "Gemm" => self.gemm(cx),
            "MatMul" => self.matmul(cx),
            "Softmax" | "LogSoftmax" => self.softmax(cx),
            "LRN" => self.lrn(cx),
            "LayerNormalization" => self.layernorm(cx),
            "Flatten" | "Reshape" | "Squeeze" | "Unsqueeze" => self.reshape_like(cx),
            "Transpose" => self.transpose(cx),
            "Concat" => self.concat(cx),
            "Identity" => {
                cx.check_attributes(&[])?;
                let v = self.input(cx, 0)?;
                self.values.insert(cx.output(0)?.to_string(), v);
                Ok(())
            }
            "Dropout" => self.dropout(cx),
            "Constant" => self.constant(cx),
            "ConstantOfShape" => self.constant_of_shape(cx),
            "Shape" => self.shape_op(cx),
            "Gather" => self.gather(cx),
            other => Err(cx
                .err(format!("unsupported operator {other}"))
                .with_hint("docs/onnx.md lists the operators tilec imports")),
        }
    }

    // ---- elementwise ------------------------------------------------------

    /// A compute op over the broadcast shape of `operands`, whose body `f`
    /// makes from the operands' scalars.
    fn elementwise(
        &mut self,
        cx: &NodeCx,
        operands: Vec<Operand>,
        out: &str,
        f: impl FnOnce(&mut Body, &[String]) -> String,
    ) -> Result<()> {
        self.elementwise_stored(cx, operands, out, None, f)
    }

    /// The operand of a one-input elementwise op: a blocked tensor as it is
    /// stored (with its logical shape and block, for the result), anything
    /// else plain.
    fn unary_operand(&mut self, cx: &NodeCx, x: &Val) -> Result<(Operand, Stored)> {
        Ok(match x {
            Val::Tensor {
                name,
                shape,
                block: Some(b),
            } => (
                Operand::Tensor(name.clone(), blocked_shape(shape, *b)),
                Some((shape.clone(), *b)),
            ),
            _ => (
                Operand::Tensor(self.tensor(cx, x)?, x.shape().to_vec()),
                None,
            ),
        })
    }

    /// [`Lowerer::elementwise`] over operands that may be stored blocked:
    /// with `stored` = (logical shape, block), the operands' shapes are
    /// the stored ones and the result is stored the same way.
    fn elementwise_stored(
        &mut self,
        cx: &NodeCx,
        operands: Vec<Operand>,
        out: &str,
        stored: Stored,
        f: impl FnOnce(&mut Body, &[String]) -> String,
    ) -> Result<()> {
        let mut shape: Vec<u64> = Vec::new();
        for o in &operands {
            if let Operand::Tensor(_, s) = o {
                shape = broadcast(&shape, s).ok_or_else(|| {
                    cx.err(format!(
                        "the shapes of the inputs, {} and {}, do not broadcast",
                        shape_text(&shape),
                        shape_text(s)
                    ))
                })?;
            }
        }
        let axes = axis_names("d", shape.len());
        let mut reads = Vec::new();
        let mut body = Body::default();
        let mut scalars = Vec::new();
        for (i, o) in operands.iter().enumerate() {
            match o {
                Operand::Tensor(name, s) => {
                    let bind = format!("x{i}");
                    reads.push(Read::new(&bind, name, broadcast_index(s, &shape, &axes)));
                    scalars.push(bind);
                }
                Operand::Scalar(v) => scalars.push(body.konst(*v)),
            }
        }
        let result = f(&mut body, &scalars);
        let c = Compute {
            label: cx.name.clone(),
            spatial: axes.iter().cloned().zip(shape.iter().copied()).collect(),
            reduce: None,
            reads,
            out_shape: shape,
            out_index: axes,
            body,
            result,
            epilogue: None,
        };
        match stored {
            Some((logical, b)) => self.push_stored(c, out, logical, Some(b)),
            None => self.push(c, out),
        }
        Ok(())
    }

    fn unary(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&[])?;
        let x = self.input(cx, 0)?;
        let (x, stored) = self.unary_operand(cx, &x)?;
        let op = cx.op().to_string();
        self.elementwise_stored(cx, vec![x], cx.output(0)?, stored, |b, s| {
            match op.as_str() {
                "Reciprocal" => {
                    let one = b.konst(1.0);
                    b.op("div", &[&one, &s[0]])
                }
                other => b.op(&other.to_ascii_lowercase(), &[&s[0]]),
            }
        })
    }

    fn gelu(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["approximate"])?;
        let approximate = cx.string("approximate", "none")?;
        if approximate != "none" && approximate != "tanh" {
            return Err(cx
                .attr_err(
                    "approximate",
                    format!("approximate = \"{approximate}\" is not a Gelu approximation"),
                )
                .with_hint("Gelu's approximate is \"none\" or \"tanh\""));
        }
        let x = self.input(cx, 0)?;
        let (x, stored) = self.unary_operand(cx, &x)?;
        self.elementwise_stored(cx, vec![x], cx.output(0)?, stored, |b, s| {
            let x = &s[0];
            let inner = if approximate == "none" {
                // 0.5 x (1 + erf(x / sqrt 2))
                let c = b.konst(std::f64::consts::FRAC_1_SQRT_2 as f32);
                let t = b.op("mul", &[x, &c]);
                b.op("erf", &[&t])
            } else {
                // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
                let x2 = b.op("mul", &[x, x]);
                let x3 = b.op("mul", &[&x2, x]);
                let k = b.konst(0.044715);
                let kx3 = b.op("mul", &[&x3, &k]);
                let sum = b.op("add", &[x, &kx3]);
                let c = b.konst((2.0 / std::f64::consts::PI).sqrt() as f32);
                let t = b.op("mul", &[&sum, &c]);
                b.op("tanh", &[&t])
            };
            let one = b.konst(1.0);
            let p = b.op("add", &[&inner, &one]);
            let xp = b.op("mul", &[x, &p]);
            let half = b.konst(0.5);
            b.op("mul", &[&xp, &half])
        })
    }

    fn leaky_relu(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["alpha"])?;
        let alpha = cx.float("alpha", 0.01)?;
        let x = self.input(cx, 0)?;
        let (x, stored) = self.unary_operand(cx, &x)?;
        self.elementwise_stored(cx, vec![x], cx.output(0)?, stored, |b, s| {
            // max(x, 0) + alpha * min(x, 0)
            let zero = b.konst(0.0);
            let a = b.konst(alpha);
            let pos = b.op("max", &[&s[0], &zero]);
            let neg = b.op("min", &[&s[0], &zero]);
            let scaled = b.op("mul", &[&neg, &a]);
            b.op("add", &[&pos, &scaled])
        })
    }

    /// A scalar bound of Clip: from an input (opset 11+) or an attribute.
    fn clip_bound(&self, cx: &NodeCx, input: usize, attribute: &str) -> Result<Option<f32>> {
        if self.opset < 11 {
            return Ok(cx
                .attr(attribute, attribute_type::FLOAT, "FLOAT")?
                .map(|a| a.f));
        }
        match self.optional_input(cx, input)? {
            None => Ok(None),
            Some(Val::Const(c)) => match &c.data {
                ConstData::F32(d) if d.len() == 1 => Ok(Some(d[0])),
                _ => Err(cx.err(format!(
                    "Clip's {attribute} (input {input}) must be a one-element f32 constant"
                ))),
            },
            Some(Val::Tensor { .. }) => Err(cx.err(format!(
                "Clip's {attribute} (input {input}) is computed at run time; tilec needs a constant"
            ))),
        }
    }

    fn clip(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(if self.opset < 11 {
            &["min", "max"]
        } else {
            &[]
        })?;
        let lo = self.clip_bound(cx, 1, "min")?;
        let hi = self.clip_bound(cx, 2, "max")?;
        let x = self.input(cx, 0)?;
        let (x, stored) = self.unary_operand(cx, &x)?;
        self.elementwise_stored(cx, vec![x], cx.output(0)?, stored, |b, s| {
            let mut v = s[0].clone();
            if let Some(lo) = lo {
                let c = b.konst(lo);
                v = b.op("max", &[&v, &c]);
            }
            if let Some(hi) = hi {
                let c = b.konst(hi);
                v = b.op("min", &[&v, &c]);
            }
            if v == s[0] {
                // Neither bound: a copy.
                let zero = b.konst(0.0);
                v = b.op("add", &[&v, &zero]);
            }
            v
        })
    }

    fn binary(&mut self, cx: &NodeCx) -> Result<()> {
        // `broadcast`/`axis` are opset-6-and-older; without them shapes must
        // broadcast the numpy way, which later opsets require.
        cx.check_attributes(&[])?;
        if cx.node.input.len() != 2 {
            return Err(cx.err(format!(
                "{} with {} inputs is not supported; tilec imports the two-input form",
                cx.op(),
                cx.node.input.len()
            )));
        }
        let a = self.input(cx, 0)?;
        let b = self.input(cx, 1)?;
        // Two tensors stored in the same blocks (a residual add), or one and
        // a scalar, stay blocked; anything else is read plain.
        let stored = match (&a, &b) {
            (
                Val::Tensor {
                    shape: sa,
                    block: Some(ba),
                    ..
                },
                Val::Tensor {
                    shape: sb,
                    block: Some(bb),
                    ..
                },
            ) if sa == sb && ba == bb => Some((sa.clone(), *ba)),
            (
                Val::Tensor {
                    shape,
                    block: Some(blk),
                    ..
                },
                other,
            )
            | (
                other,
                Val::Tensor {
                    shape,
                    block: Some(blk),
                    ..
                },
            ) if scalar_const(other).is_some() => Some((shape.clone(), *blk)),
            _ => None,
        };
        let (a, b) = match &stored {
            Some(_) => (self.stored_operand(cx, &a)?, self.stored_operand(cx, &b)?),
            None => (self.operand(cx, &a)?, self.operand(cx, &b)?),
        };
        if let (Operand::Scalar(_), Operand::Scalar(_)) = (&a, &b) {
            return Err(cx.err(format!(
                "{} of two constants; tilec does not fold constant arithmetic",
                cx.op()
            )));
        }
        // Sum (variadic; here of two inputs) is Add.
        let op = if cx.op() == "Sum" {
            "add".to_string()
        } else {
            cx.op().to_ascii_lowercase()
        };
        self.elementwise_stored(cx, vec![a, b], cx.output(0)?, stored, |body, s| {
            body.op(&op, &[&s[0], &s[1]])
        })
    }

    // ---- convolutions -------------------------------------------------------

    /// A convolution's bias as an epilogue `add`, read along the output
    /// channel index `out_channel`.
    fn bias_epilogue(
        &mut self,
        cx: &NodeCx,
        bias: Option<&Val>,
        out_channel: String,
    ) -> Result<Option<Epilogue>> {
        let Some(b) = bias else { return Ok(None) };
        let bname = self.tensor(cx, b)?;
        let mut body = Body::default();
        let result = body.op("add", &[ACC, "bv"]);
        Ok(Some(Epilogue {
            reads: vec![Read::new("bv", &bname, vec![out_channel])],
            body,
            result,
        }))
    }

    fn conv(&mut self, cx: &NodeCx, fold: Option<&NodeCx>) -> Result<()> {
        cx.check_attributes(&[
            "auto_pad",
            "dilations",
            "group",
            "kernel_shape",
            "pads",
            "strides",
        ])?;
        let x = self.input(cx, 0)?;
        let mut w = self.input(cx, 1)?;
        let mut bias = self.optional_input(cx, 2)?;
        let (xs, ws) = (x.shape().to_vec(), w.shape().to_vec());
        let sp = conv_rank(cx, &xs, &ws)?;
        let group = cx.int("group", 1)?;
        let (c, m) = (xs[1], ws[0]);
        if group < 1 || c % group as u64 != 0 || m % group as u64 != 0 || ws[1] != c / group as u64
        {
            return Err(cx.attr_err(
                "group",
                format!(
                    "group = {group} does not fit {c} input channels and a weight of shape {}",
                    shape_text(&ws)
                ),
            ));
        }
        let g = group as u64;
        let (cg, mg) = (c / g, m / g);
        check_kernel_shape(cx, &ws[2..])?;
        let strides = positive_list(cx, "strides", sp)?;
        let dilations = positive_list(cx, "dilations", sp)?;
        let extent: Vec<u64> = (0..sp)
            .map(|i| (ws[2 + i] - 1) * dilations[i] as u64 + 1)
            .collect();
        let win = window(cx, &xs[2..], &extent, &strides, false)?;
        if let Some(b) = &bias
            && b.shape() != [m]
        {
            return Err(cx.err(format!(
                "the bias has shape {}, but the convolution has {m} output channels",
                shape_text(b.shape())
            )));
        }
        let mut out_name = cx.output(0)?;
        if let Some(bn) = fold {
            let (scale, shift) = self.batchnorm_affine(bn, m)?;
            let (key_w, key_b) = (
                format!("{}.weight.folded", cx.name),
                format!("{}.bias.folded", cx.name),
            );
            let Val::Const(wc) = &w else {
                unreachable!("planned folds have constant weights")
            };
            let ConstData::F32(wd) = &wc.data else {
                unreachable!()
            };
            let per = wd.len() / m as usize;
            let folded: Vec<f32> = wd
                .iter()
                .enumerate()
                .map(|(i, &v)| (v as f64 * scale[i / per]) as f32)
                .collect();
            let old_bias: Vec<f64> = match &bias {
                Some(Val::Const(b)) => match &b.data {
                    ConstData::F32(d) => d.iter().map(|&v| v as f64).collect(),
                    _ => unreachable!("planned folds have f32 biases"),
                },
                _ => vec![0.0; m as usize],
            };
            let new_bias: Vec<f32> = (0..m as usize)
                .map(|f| (old_bias[f] * scale[f] + shift[f]) as f32)
                .collect();
            w = Val::Const(Rc::new(Const {
                key: sanitise_key(&key_w),
                shape: ws.clone(),
                data: ConstData::F32(folded),
            }));
            bias = Some(Val::Const(Rc::new(Const {
                key: sanitise_key(&key_b),
                shape: vec![m],
                data: ConstData::F32(new_bias),
            })));
            out_name = bn.output(0)?;
        }
        // Blocked activations (`ActivationLayout::Blocked`): the output
        // channels split into `fb` blocks of `fl` lanes, the weight is
        // repacked to match, and a blocked input's channels split the same
        // way (`cb`, `cl`); the spatial and kernel axes are as below.
        let block = match (&w, self.block) {
            (Val::Const(wc), Some(b)) if g == 1 && m % b == 0 => match &wc.data {
                ConstData::F32(wd) => Some((b, wc.clone(), wd)),
                _ => None,
            },
            _ => None,
        };
        let (xname, x_block) = match block {
            Some(_) => self.stored_tensor(cx, &x)?,
            None => (self.tensor(cx, &x)?, None),
        };
        let wname = match &block {
            Some((b, wc, wd)) => {
                let b = *b;
                let (shape, packed) = pack_conv_weight(wd, &ws, b, x_block.is_some());
                let key = sanitise_key(&format!("{}.nchw{b}c", wc.key));
                self.tensor(
                    cx,
                    &Val::Const(Rc::new(Const {
                        key,
                        shape,
                        data: ConstData::F32(packed),
                    })),
                )?
            }
            None => self.tensor(cx, &w)?,
        };
        let block = block.map(|(b, _, _)| b);
        let (oaxes, kaxes) = spatial_axes(sp);
        let mut spatial = vec![("n".to_string(), xs[0])];
        let (mut reduce, mut x_index, mut w_index, mut out_index, out_channel) = match block {
            Some(b) => {
                spatial.push(("fb".to_string(), m / b));
                let (channel, extent) = if x_block.is_some() {
                    ("cb", c / b)
                } else {
                    ("c", c)
                };
                (
                    vec![(channel.to_string(), extent)],
                    vec!["n".to_string(), channel.to_string()],
                    vec!["fb".to_string(), channel.to_string()],
                    vec!["n".to_string(), "fb".to_string()],
                    affine(&[(b as i64, "fb"), (1, "fl")], 0),
                )
            }
            None => {
                let (in_channel, out_channel, reduce) = if g == 1 {
                    spatial.push(("f".into(), m));
                    ("c".to_string(), "f".to_string(), vec![("c".to_string(), c)])
                } else {
                    spatial.push(("g".into(), g));
                    let out_channel = if mg > 1 {
                        spatial.push(("fg".into(), mg));
                        affine(&[(mg as i64, "g"), (1, "fg")], 0)
                    } else {
                        "g".to_string()
                    };
                    if cg > 1 {
                        (
                            affine(&[(cg as i64, "g"), (1, "cg")], 0),
                            out_channel,
                            vec![("cg".to_string(), cg)],
                        )
                    } else {
                        (affine(&[(cg as i64, "g")], 0), out_channel, vec![])
                    }
                };
                let w_channel = if g == 1 {
                    "c"
                } else if cg > 1 {
                    "cg"
                } else {
                    "0"
                };
                (
                    reduce,
                    vec!["n".to_string(), in_channel],
                    vec![out_channel.clone(), w_channel.to_string()],
                    vec!["n".to_string(), out_channel.clone()],
                    out_channel,
                )
            }
        };
        for i in 0..sp {
            spatial.push((oaxes[i].clone(), win.out[i]));
            reduce.push((kaxes[i].clone(), ws[2 + i]));
            x_index.push(affine(
                &[(strides[i], &oaxes[i]), (dilations[i], &kaxes[i])],
                -win.begin[i],
            ));
            w_index.push(kaxes[i].clone());
            out_index.push(oaxes[i].clone());
        }
        let mut out_shape = vec![xs[0], m / block.unwrap_or(1)];
        out_shape.extend(&win.out);
        let mut logical = vec![xs[0], m];
        logical.extend(&win.out);
        if let Some(b) = block {
            spatial.push(("fl".to_string(), b));
            if x_block.is_some() {
                reduce.push(("cl".to_string(), b));
                x_index.push("cl".to_string());
                w_index.push("cl".to_string());
            }
            w_index.push("fl".to_string());
            out_index.push("fl".to_string());
            out_shape.push(b);
        }
        let mut xread = Read::new("xv", &xname, x_index);
        if win.begin.iter().chain(&win.end).any(|&p| p > 0) {
            xread = xread.pad("0.0");
        }
        let mut body = Body::default();
        let result = body.op("mul", &["xv", "wv"]);
        let epilogue = self.bias_epilogue(cx, bias.as_ref(), out_channel)?;
        let c = Compute {
            label: cx.name.clone(),
            spatial,
            reduce: Some((Combiner::Sum, reduce)),
            reads: vec![xread, Read::new("wv", &wname, w_index)],
            out_shape,
            out_index,
            body,
            result,
            epilogue,
        };
        self.push_stored(c, out_name, logical, block);
        Ok(())
    }

    fn conv_transpose(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&[
            "auto_pad",
            "dilations",
            "group",
            "kernel_shape",
            "output_padding",
            "pads",
            "strides",
        ])?;
        let auto_pad = cx.string("auto_pad", "NOTSET")?;
        if auto_pad != "NOTSET" {
            return Err(cx
                .attr_err(
                    "auto_pad",
                    format!("ConvTranspose with auto_pad = \"{auto_pad}\" is not supported"),
                )
                .with_hint("give explicit `pads`"));
        }
        let x = self.input(cx, 0)?;
        let w = self.input(cx, 1)?;
        let bias = self.optional_input(cx, 2)?;
        let (xs, ws) = (x.shape().to_vec(), w.shape().to_vec());
        let sp = conv_rank(cx, &xs, &ws)?;
        let group = cx.int("group", 1)?;
        let c = xs[1];
        if group < 1 || c % group as u64 != 0 || ws[0] != c {
            return Err(cx.attr_err(
                "group",
                format!(
                    "group = {group} does not fit {c} input channels and a weight of shape {}",
                    shape_text(&ws)
                ),
            ));
        }
        let g = group as u64;
        let (cg, mg) = (c / g, ws[1]);
        let m = mg * g;
        check_kernel_shape(cx, &ws[2..])?;
        let strides = positive_list(cx, "strides", sp)?;
        let dilations = positive_list(cx, "dilations", sp)?;
        let pads = match cx.ints("pads")? {
            None => vec![0; 2 * sp],
            Some(p) if p.len() == 2 * sp && p.iter().all(|&v| v >= 0) => p,
            Some(p) => {
                return Err(cx.attr_err(
                    "pads",
                    format!("pads {p:?} should be {} non-negative values", 2 * sp),
                ));
            }
        };
        let output_padding = match cx.ints("output_padding")? {
            None => vec![0; sp],
            Some(p) if p.len() == sp && (0..sp).all(|i| p[i] >= 0 && p[i] < strides[i].max(dilations[i])) => p,
            Some(p) => return Err(cx.attr_err("output_padding", format!("output_padding {p:?} should be {sp} values, each less than its stride or dilation"))),
        };
        let mut out = Vec::new();
        for i in 0..sp {
            let o = strides[i] * (xs[2 + i] as i64 - 1)
                + output_padding[i]
                + (ws[2 + i] as i64 - 1) * dilations[i]
                + 1
                - pads[i]
                - pads[sp + i];
            if o < 1 {
                return Err(cx.attr_err(
                    "pads",
                    format!("the padding leaves no output along spatial dimension {i}"),
                ));
            }
            out.push(o as u64);
        }
        if let Some(b) = &bias
            && b.shape() != [m]
        {
            return Err(cx.err(format!(
                "the bias has shape {}, but the transposed convolution has {m} output channels",
                shape_text(b.shape())
            )));
        }
        let xname = self.tensor(cx, &x)?;
        let wname = self.tensor(cx, &w)?;
        let (oaxes, kaxes) = spatial_axes(sp);
        let mut spatial = vec![("n".to_string(), xs[0])];
        let (in_channel, out_channel, fg, mut reduce) = if g == 1 {
            spatial.push(("f".into(), m));
            (
                "c".to_string(),
                "f".to_string(),
                "f".to_string(),
                vec![("c".to_string(), c)],
            )
        } else {
            spatial.push(("g".into(), g));
            let (out_channel, fg) = if mg > 1 {
                spatial.push(("fg".into(), mg));
                (affine(&[(mg as i64, "g"), (1, "fg")], 0), "fg".to_string())
            } else {
                ("g".to_string(), "0".to_string())
            };
            if cg > 1 {
                (
                    affine(&[(cg as i64, "g"), (1, "cg")], 0),
                    out_channel,
                    fg,
                    vec![("cg".to_string(), cg)],
                )
            } else {
                (affine(&[(cg as i64, "g")], 0), out_channel, fg, vec![])
            }
        };
        let mut x_index = vec!["n".to_string(), in_channel.clone()];
        let mut w_index = vec![in_channel, fg];
        let mut out_index = vec!["n".to_string(), out_channel.clone()];
        for i in 0..sp {
            spatial.push((oaxes[i].clone(), out[i]));
            reduce.push((kaxes[i].clone(), ws[2 + i]));
            // out = in * stride + k * dilation - pad_begin, solved for in.
            let numerator = affine(&[(1, &oaxes[i]), (-dilations[i], &kaxes[i])], pads[i]);
            x_index.push(if strides[i] == 1 {
                numerator
            } else {
                format!("({numerator}) div {}", strides[i])
            });
            w_index.push(kaxes[i].clone());
            out_index.push(oaxes[i].clone());
        }
        let mut body = Body::default();
        let result = body.op("mul", &["xv", "wv"]);
        let epilogue = self.bias_epilogue(cx, bias.as_ref(), out_channel)?;
        let mut out_shape = vec![xs[0], m];
        out_shape.extend(&out);
        let c = Compute {
            label: cx.name.clone(),
            spatial,
            reduce: Some((Combiner::Sum, reduce)),
            reads: vec![
                Read::new("xv", &xname, x_index).pad("0.0"),
                Read::new("wv", &wname, w_index),
            ],
            out_shape,
            out_index,
            body,
            result,
            epilogue,
        };
        self.push(c, cx.output(0)?);
        Ok(())
    }

    /// Batch normalisation's per-channel (scale, shift) in f64, from its
    /// constant parameters: y = x * scale + shift.
    fn batchnorm_affine(&self, cx: &NodeCx, channels: u64) -> Result<(Vec<f64>, Vec<f64>)> {
        cx.check_attributes(&[
            "epsilon",
            "momentum",
            "spatial",
            "training_mode",
            "is_test",
            "consumed_inputs",
        ])?;
        cx.int_in("training_mode", 0, &[0])?;
        cx.int_in("spatial", 1, &[1])?;
        let eps = cx.float("epsilon", 1e-5)? as f64;
        let mut params = Vec::new();
        for (i, what) in [(1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var")] {
            let v = self.input(cx, i)?;
            let Val::Const(c) = v else {
                return Err(cx.err(format!("BatchNormalization's {what} is computed at run time; tilec needs constant statistics (inference)")));
            };
            let ConstData::F32(d) = &c.data else {
                return Err(cx.err(format!(
                    "BatchNormalization's {what} (`{}`) is not f32 data",
                    c.key
                )));
            };
            if d.len() as u64 != channels || c.shape.len() != 1 {
                return Err(cx.err(format!("BatchNormalization's {what} has shape {}, but the input has {channels} channels", shape_text(&c.shape))));
            }
            params.push(d.iter().map(|&v| v as f64).collect::<Vec<f64>>());
        }
        let scale: Vec<f64> = (0..channels as usize)
            .map(|f| params[0][f] / (params[3][f] + eps).sqrt())
            .collect();
        let shift: Vec<f64> = (0..channels as usize)
            .map(|f| params[1][f] - params[2][f] * scale[f])
            .collect();
        Ok((scale, shift))
    }

    /// A batch normalisation that is not folded: a per-channel affine op
    /// whose scale and shift are computed here.
    fn batchnorm(&mut self, cx: &NodeCx) -> Result<()> {
        cx.only_outputs(1, &self.uses)?;
        let x = self.input(cx, 0)?;
        let xs = x.shape().to_vec();
        if xs.len() < 2 {
            return Err(cx.err(format!(
                "BatchNormalization of a tensor of shape {}: the input needs a channel dimension",
                shape_text(&xs)
            )));
        }
        let (scale, shift) = self.batchnorm_affine(cx, xs[1])?;
        let to_const = |key: String, v: Vec<f64>| {
            Val::Const(Rc::new(Const {
                key: sanitise_key(&key),
                shape: vec![xs[1]],
                data: ConstData::F32(v.iter().map(|&x| x as f32).collect()),
            }))
        };
        let scale = to_const(format!("{}.scale", cx.name), scale);
        let shift = to_const(format!("{}.shift", cx.name), shift);
        let xname = self.tensor(cx, &x)?;
        let sname = self.tensor(cx, &scale)?;
        let bname = self.tensor(cx, &shift)?;
        let axes = axis_names("d", xs.len());
        let mut body = Body::default();
        let t = body.op("mul", &["xv", "sv"]);
        let result = body.op("add", &[&t, "bv"]);
        let c = Compute {
            label: cx.name.clone(),
            spatial: axes.iter().cloned().zip(xs.iter().copied()).collect(),
            reduce: None,
            reads: vec![
                Read::new("xv", &xname, axes.clone()),
                Read::new("sv", &sname, vec![axes[1].clone()]),
                Read::new("bv", &bname, vec![axes[1].clone()]),
            ],
            out_shape: xs,
            out_index: axes,
            body,
            result,
            epilogue: None,
        };
        self.push(c, cx.output(0)?);
        Ok(())
    }

    // ---- pooling ------------------------------------------------------------

    fn pool(&mut self, cx: &NodeCx) -> Result<()> {
        let is_max = cx.op() == "MaxPool";
        if is_max {
            cx.check_attributes(&[
                "auto_pad",
                "ceil_mode",
                "dilations",
                "kernel_shape",
                "pads",
                "storage_order",
                "strides",
            ])?;
            cx.only_outputs(1, &self.uses)?;
        } else {
            cx.check_attributes(&[
                "auto_pad",
                "ceil_mode",
                "count_include_pad",
                "dilations",
                "kernel_shape",
                "pads",
                "strides",
            ])?;
        }
        let x = self.input(cx, 0)?;
        let xs = x.shape().to_vec();
        if !(3..=5).contains(&xs.len()) {
            return Err(cx.err(format!(
                "{} of a tensor of shape {}: tilec pools 1 to 3 spatial dimensions (N, C, ...)",
                cx.op(),
                shape_text(&xs)
            )));
        }
        let sp = xs.len() - 2;
        let kernel = match cx.ints("kernel_shape")? {
            Some(k) if k.len() == sp && k.iter().all(|&v| v >= 1) => k,
            Some(k) => {
                return Err(cx.attr_err(
                    "kernel_shape",
                    format!("kernel_shape {k:?} should be {sp} positive values"),
                ));
            }
            None => {
                return Err(cx.attr_err("kernel_shape", format!("{} needs kernel_shape", cx.op())));
            }
        };
        let strides = positive_list(cx, "strides", sp)?;
        let dilations = positive_list(cx, "dilations", sp)?;
        let ceil_mode = cx.int_in("ceil_mode", 0, &[0, 1])? == 1;
        let count_include_pad = !is_max && cx.int_in("count_include_pad", 0, &[0, 1])? == 1;
        let extent: Vec<u64> = (0..sp)
            .map(|i| (kernel[i] as u64 - 1) * dilations[i] as u64 + 1)
            .collect();
        let win = window(cx, &xs[2..], &extent, &strides, ceil_mode)?;
        // Each channel pools alone: blocked channels stay blocked.
        let (xname, block) = self.stored_tensor(cx, &x)?;
        let (oaxes, kaxes) = spatial_axes(sp);
        let mut spatial = vec![
            ("n".to_string(), xs[0]),
            ("c".to_string(), xs[1] / block.unwrap_or(1)),
        ];
        let mut reduce = Vec::new();
        let mut x_index = vec!["n".to_string(), "c".to_string()];
        let mut out_index = x_index.clone();
        // Whether some window reaches past the input: padding, or ceil mode's last window.
        let mut reaches_out = false;
        for i in 0..sp {
            spatial.push((oaxes[i].clone(), win.out[i]));
            reduce.push((kaxes[i].clone(), kernel[i] as u64));
            x_index.push(affine(
                &[(strides[i], &oaxes[i]), (dilations[i], &kaxes[i])],
                -win.begin[i],
            ));
            out_index.push(oaxes[i].clone());
            let last = (win.out[i] as i64 - 1) * strides[i] + extent[i] as i64 - win.begin[i];
            reaches_out |= win.begin[i] > 0 || last > xs[2 + i] as i64;
        }
        let mut out_shape = vec![xs[0], xs[1] / block.unwrap_or(1)];
        out_shape.extend(&win.out);
        let mut logical = vec![xs[0], xs[1]];
        logical.extend(&win.out);
        if let Some(b) = block {
            spatial.push(("cl".to_string(), b));
            x_index.push("cl".to_string());
            out_index.push("cl".to_string());
            out_shape.push(b);
        }
        let mut read = Read::new("xv", &xname, x_index);
        if reaches_out {
            read = read.pad(if is_max { "-inf" } else { "0.0" });
        }
        let mut epilogue = None;
        if !is_max {
            // The divisor of each window: its elements inside the input
            // (count_include_pad = 0) or inside the padded input.
            let counts: Vec<Vec<u64>> = (0..sp)
                .map(|i| {
                    let (lo, hi) = if count_include_pad {
                        (-win.begin[i], xs[2 + i] as i64 + win.end[i])
                    } else {
                        (0, xs[2 + i] as i64)
                    };
                    (0..win.out[i] as i64)
                        .map(|o| {
                            (0..kernel[i])
                                .filter(|&k| {
                                    (lo..hi).contains(
                                        &(o * strides[i] + k * dilations[i] - win.begin[i]),
                                    )
                                })
                                .count() as u64
                        })
                        .collect()
                })
                .collect();
            let mut eb = Body::default();
            let mut reads = Vec::new();
            let uniform = counts.iter().all(|c| c.iter().all(|&v| v == c[0]));
            let divisor = if uniform {
                eb.konst(counts.iter().map(|c| c[0]).product::<u64>() as f32)
            } else {
                let mut table = vec![1.0f32];
                for c in &counts {
                    table = table
                        .iter()
                        .flat_map(|&t| c.iter().map(move |&v| t * v as f32))
                        .collect();
                }
                let key = sanitise_key(&format!("{}.window_sizes", cx.name));
                let cval = Val::Const(Rc::new(Const {
                    key,
                    shape: win.out.clone(),
                    data: ConstData::F32(table),
                }));
                let cname = self.tensor(cx, &cval)?;
                reads.push(Read::new("count", &cname, oaxes[..sp].to_vec()));
                "count".to_string()
            };
            let result = eb.op("div", &[ACC, &divisor]);
            epilogue = Some(Epilogue {
                reads,
                body: eb,
                result,
            });
        }
        let c = Compute {
            label: cx.name.clone(),
            spatial,
            reduce: Some((if is_max { Combiner::Max } else { Combiner::Sum }, reduce)),
            reads: vec![read],
            out_shape,
            out_index,
            body: Body::default(),
            result: "xv".into(),
            epilogue,
        };
        self.push_stored(c, cx.output(0)?, logical, block);
        Ok(())
    }

    fn global_pool(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&[])?;
        let is_max = cx.op() == "GlobalMaxPool";
        let x = self.input(cx, 0)?;
        let xs = x.shape().to_vec();
        if xs.len() < 3 {
            return Err(cx.err(format!(
                "{} of a tensor of shape {}: the input needs spatial dimensions (N, C, ...)",
                cx.op(),
                shape_text(&xs)
            )));
        }
        // Each channel pools alone: blocked channels stay blocked.
        let (xname, block) = self.stored_tensor(cx, &x)?;
        let sp = xs.len() - 2;
        let raxes = axis_names("r", sp);
        let unit = axis_names("u", sp);
        let mut spatial = vec![
            ("n".to_string(), xs[0]),
            ("c".to_string(), xs[1] / block.unwrap_or(1)),
        ];
        spatial.extend(unit.iter().map(|u| (u.clone(), 1)));
        let mut x_index = vec!["n".to_string(), "c".to_string()];
        x_index.extend(raxes.iter().cloned());
        let mut out_index = vec!["n".to_string(), "c".to_string()];
        out_index.extend(unit.iter().cloned());
        let mut out_shape = vec![xs[0], xs[1] / block.unwrap_or(1)];
        out_shape.extend(std::iter::repeat_n(1, sp));
        let mut logical = vec![xs[0], xs[1]];
        logical.extend(std::iter::repeat_n(1, sp));
        if let Some(b) = block {
            spatial.push(("cl".to_string(), b));
            x_index.push("cl".to_string());
            out_index.push("cl".to_string());
            out_shape.push(b);
        }
        let epilogue = (!is_max).then(|| {
            let mut eb = Body::default();
            let n = eb.konst(product(&xs[2..]) as f32);
            let result = eb.op("div", &[ACC, &n]);
            Epilogue {
                reads: vec![],
                body: eb,
                result,
            }
        });
        let c = Compute {
            label: cx.name.clone(),
            spatial,
            reduce: Some((
                if is_max { Combiner::Max } else { Combiner::Sum },
                raxes.iter().cloned().zip(xs[2..].iter().copied()).collect(),
            )),
            reads: vec![Read::new("xv", &xname, x_index)],
            out_shape,
            out_index,
            body: Body::default(),
            result: "xv".into(),
            epilogue,
        };
        self.push_stored(c, cx.output(0)?, logical, block);
        Ok(())
    }

    // ---- matrix products ----------------------------------------------------

    fn gemm(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["alpha", "beta", "transA", "transB", "broadcast"])?;
        let alpha = cx.float("alpha", 1.0)?;
        let beta = cx.float("beta", 1.0)?;
        let trans_a = cx.int_in("transA", 0, &[0, 1])? == 1;
        let trans_b = cx.int_in("transB", 0, &[0, 1])? == 1;
        let a = self.input(cx, 0)?;
        let b = self.input(cx, 1)?;
        let c = self.optional_input(cx, 2)?;
        let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
        if sa.len() != 2 || sb.len() != 2 {
            return Err(cx.err(format!(
                "Gemm of shapes {} and {}: both must be matrices",
                shape_text(&sa),
                shape_text(&sb)
            )));
        }
        let (m, k) = if trans_a {
            (sa[1], sa[0])
        } else {
            (sa[0], sa[1])
        };
        let (kb, n) = if trans_b {
            (sb[1], sb[0])
        } else {
            (sb[0], sb[1])
        };
        if k != kb {
            return Err(cx.err(format!("Gemm of shapes {} and {} (transA = {}, transB = {}): inner dimensions {k} and {kb} differ", shape_text(&sa), shape_text(&sb), trans_a as u8, trans_b as u8)));
        }
        let aname = self.tensor(cx, &a)?;
        let bname = self.tensor(cx, &b)?;
        let a_index = if trans_a {
            vec!["k".to_string(), "i".into()]
        } else {
            vec!["i".to_string(), "k".into()]
        };
        let b_index = if trans_b {
            vec!["j".to_string(), "k".into()]
        } else {
            vec!["k".to_string(), "j".into()]
        };
        let mut body = Body::default();
        let result = body.op("mul", &["av", "bv"]);
        let mut eb = Body::default();
        let mut ereads = Vec::new();
        let mut v = ACC.to_string();
        if alpha != 1.0 {
            let al = eb.konst(alpha);
            v = eb.op("mul", &[&v, &al]);
        }
        if let Some(c) = c.filter(|_| beta != 0.0) {
            let out = [m, n];
            if broadcast(c.shape(), &out).as_deref() != Some(&out[..]) {
                return Err(cx.err(format!(
                    "Gemm's C of shape {} does not broadcast to the result's {}",
                    shape_text(c.shape()),
                    shape_text(&out)
                )));
            }
            let mut cv = match self.operand(cx, &c)? {
                Operand::Scalar(s) => eb.konst(s),
                Operand::Tensor(name, shape) => {
                    ereads.push(Read::new(
                        "cv",
                        &name,
                        broadcast_index(&shape, &out, &["i".to_string(), "j".to_string()]),
                    ));
                    "cv".to_string()
                }
            };
            if beta != 1.0 {
                let be = eb.konst(beta);
                cv = eb.op("mul", &[&cv, &be]);
            }
            v = eb.op("add", &[&v, &cv]);
        }
        let epilogue = (v != ACC).then_some(Epilogue {
            reads: ereads,
            body: eb,
            result: v,
        });
        let c = Compute {
            label: cx.name.clone(),
            spatial: vec![("i".into(), m), ("j".into(), n)],
            reduce: Some((Combiner::Sum, vec![("k".into(), k)])),
            reads: vec![
                Read::new("av", &aname, a_index),
                Read::new("bv", &bname, b_index),
            ],
            out_shape: vec![m, n],
            out_index: vec!["i".into(), "j".into()],
            body,
            result,
            epilogue,
        };
        self.push(c, cx.output(0)?);
        Ok(())
    }

    fn matmul(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&[])?;
        let a = self.input(cx, 0)?;
        let b = self.input(cx, 1)?;
        let (sa, sb) = (a.shape().to_vec(), b.shape().to_vec());
        if sa.is_empty() || sb.is_empty() {
            return Err(cx.err("MatMul of a scalar"));
        }
        // numpy: a vector A is a row [1, K], a vector B a column [K, 1];
        // the added dimension is dropped from the result.
        let (m, k) = if sa.len() == 1 {
            (None, sa[0])
        } else {
            (Some(sa[sa.len() - 2]), sa[sa.len() - 1])
        };
        let (kb, n) = if sb.len() == 1 {
            (sb[0], None)
        } else {
            (sb[sb.len() - 2], Some(sb[sb.len() - 1]))
        };
        if k != kb {
            return Err(cx.err(format!(
                "MatMul of shapes {} and {}: inner dimensions {k} and {kb} differ",
                shape_text(&sa),
                shape_text(&sb)
            )));
        }
        let batch_a = &sa[..sa.len().saturating_sub(2)];
        let batch_b = &sb[..sb.len().saturating_sub(2)];
        let batch = broadcast(batch_a, batch_b).ok_or_else(|| {
            cx.err(format!(
                "MatMul of shapes {} and {}: the batch dimensions do not broadcast",
                shape_text(&sa),
                shape_text(&sb)
            ))
        })?;
        let baxes = axis_names("b", batch.len());
        let mut spatial: Vec<(String, u64)> =
            baxes.iter().cloned().zip(batch.iter().copied()).collect();
        let mut out_shape = batch.clone();
        let mut a_index = broadcast_index(batch_a, &batch, &baxes);
        let mut b_index = broadcast_index(batch_b, &batch, &baxes);
        if let Some(m) = m {
            spatial.push(("i".into(), m));
            out_shape.push(m);
            a_index.push("i".into());
        }
        a_index.push("k".into());
        b_index.push("k".into());
        if let Some(n) = n {
            spatial.push(("j".into(), n));
            out_shape.push(n);
            b_index.push("j".into());
        }
        let aname = self.tensor(cx, &a)?;
        let bname = self.tensor(cx, &b)?;
        let mut body = Body::default();
        let result = body.op("mul", &["av", "bv"]);
        let out_index = spatial.iter().map(|(a, _)| a.clone()).collect();
        let c = Compute {
            label: cx.name.clone(),
            spatial,
            reduce: Some((Combiner::Sum, vec![("k".into(), k)])),
            reads: vec![
                Read::new("av", &aname, a_index),
                Read::new("bv", &bname, b_index),
            ],
            out_shape,
            out_index,
            body,
            result,
            epilogue: None,
        };
        self.push(c, cx.output(0)?);
        Ok(())
    }

    // ---- normalisations -----------------------------------------------------

    /// Local response normalisation across channels (AlexNet, GoogLeNet):
    /// `y = x / (bias + alpha / size · Σ x²)^beta`, the sum over channels
    /// `c - floor((size-1)/2) ..= c + ceil((size-1)/2)` (outside: 0), as two
    /// ops: the windowed sum of squares, then the scaling, with the power
    /// as `exp(beta · log(...))` (the base is positive: bias > 0).
    fn lrn(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["alpha", "beta", "bias", "size"])?;
        let x = self.input(cx, 0)?;
        let xs = x.shape().to_vec();
        if xs.len() < 3 {
            return Err(cx.err(format!(
                "LRN of a tensor of rank {}: it needs (N, C, spatial...)",
                xs.len()
            )));
        }
        let size = cx.int("size", 0)?;
        if size < 1 {
            return Err(cx.attr_err("size", "LRN needs a size of at least 1"));
        }
        let (alpha, beta, bias) = (
            cx.float("alpha", 1e-4)?,
            cx.float("beta", 0.75)?,
            cx.float("bias", 1.0)?,
        );
        if bias <= 0.0 {
            return Err(cx.attr_err(
                "bias",
                "LRN with a bias of 0 or less is not supported (the power of a base that may be 0)",
            ));
        }
        let xname = self.tensor(cx, &x)?;
        let axes = axis_names("d", xs.len());
        let before = (size - 1) / 2;
        let mut window = axes.clone();
        window[1] = affine(&[(1, &axes[1]), (1, "k")], -before);
        let mut body = Body::default();
        let square = body.op("mul", &["xv", "xv"]);
        let out = cx.output(0)?;
        let sum_c = Compute {
            label: format!("{}.square_sum", cx.name),
            spatial: axes.iter().cloned().zip(xs.iter().copied()).collect(),
            reduce: Some((Combiner::Sum, vec![("k".into(), size as u64)])),
            reads: vec![Read::new("xv", &xname, window).pad("0.0")],
            out_shape: xs.clone(),
            out_index: axes,
            body,
            result: square,
            epilogue: None,
        };
        let sum_name = format!("{out}.square_sum");
        self.push(sum_c, &sum_name);
        let Some(Val::Tensor { name: sum_t, .. }) = self.values.get(&sum_name).cloned() else {
            unreachable!()
        };
        let x_and_sum = vec![
            Operand::Tensor(xname, xs.clone()),
            Operand::Tensor(sum_t, xs),
        ];
        self.elementwise(cx, x_and_sum, out, |body, s| {
            let scale = body.konst(alpha / size as f32);
            let shift = body.konst(bias);
            let power = body.konst(beta);
            let scaled = body.op("mul", &[&s[1], &scale]);
            let base = body.op("add", &[&scaled, &shift]);
            let log = body.op("log", &[&base]);
            let times = body.op("mul", &[&log, &power]);
            let denominator = body.op("exp", &[&times]);
            body.op("div", &[&s[0], &denominator])
        })
    }

    /// Softmax and LogSoftmax over the dimensions from `axis` on (opset
    /// < 13, which flattens them) or over `axis` alone (13+): a row
    /// maximum, a sum of exponentials and the normalisation, as in
    /// ir-spec/examples/softmax.tile.
    fn softmax(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["axis"])?;
        let log = cx.op() == "LogSoftmax";
        let x = self.input(cx, 0)?;
        let xs = x.shape().to_vec();
        if xs.is_empty() {
            return Err(cx.err(format!("{} of a scalar", cx.op())));
        }
        let (default, all_after) = if self.opset < 13 {
            (1, true)
        } else {
            (-1, false)
        };
        let axis = cx.axis("axis", default, xs.len())?;
        let reduced: Vec<bool> = (0..xs.len())
            .map(|d| if all_after { d >= axis } else { d == axis })
            .collect();
        let xname = self.tensor(cx, &x)?;
        let axes = axis_names("d", xs.len());
        let kept: Vec<usize> = (0..xs.len()).filter(|&d| !reduced[d]).collect();
        let red: Vec<usize> = (0..xs.len()).filter(|&d| reduced[d]).collect();
        let kept_axes: Vec<(String, u64)> =
            kept.iter().map(|&d| (axes[d].clone(), xs[d])).collect();
        let red_axes: Vec<(String, u64)> = red.iter().map(|&d| (axes[d].clone(), xs[d])).collect();
        let row_shape: Vec<u64> = kept.iter().map(|&d| xs[d]).collect();
        let row_index: Vec<String> = kept.iter().map(|&d| axes[d].clone()).collect();
        let out = cx.output(0)?;
        let max_c = Compute {
            label: format!("{}.max", cx.name),
            spatial: kept_axes.clone(),
            reduce: Some((Combiner::Max, red_axes.clone())),
            reads: vec![Read::new("xv", &xname, axes.clone())],
            out_shape: row_shape.clone(),
            out_index: row_index.clone(),
            body: Body::default(),
            result: "xv".into(),
            epilogue: None,
        };
        let max_name = format!("{out}.max");
        self.push(max_c, &max_name);
        let Some(Val::Tensor { name: max_t, .. }) = self.values.get(&max_name).cloned() else {
            unreachable!()
        };
        let mut body = Body::default();
        let d = body.op("sub", &["xv", "mx"]);
        let result = body.op("exp", &[&d]);
        let sum_c = Compute {
            label: format!("{}.sum_exp", cx.name),
            spatial: kept_axes,
            reduce: Some((Combiner::Sum, red_axes)),
            reads: vec![
                Read::new("xv", &xname, axes.clone()),
                Read::new("mx", &max_t, row_index.clone()),
            ],
            out_shape: row_shape,
            out_index: row_index.clone(),
            body,
            result,
            epilogue: None,
        };
        let sum_name = format!("{out}.sum_exp");
        self.push(sum_c, &sum_name);
        let Some(Val::Tensor { name: sum_t, .. }) = self.values.get(&sum_name).cloned() else {
            unreachable!()
        };
        let mut body = Body::default();
        let d = body.op("sub", &["xv", "mx"]);
        let result = if log {
            let l = body.op("log", &["sum"]);
            body.op("sub", &[&d, &l])
        } else {
            let e = body.op("exp", &[&d]);
            body.op("div", &[&e, "sum"])
        };
        let c = Compute {
            label: cx.name.clone(),
            spatial: axes.iter().cloned().zip(xs.iter().copied()).collect(),
            reduce: None,
            reads: vec![
                Read::new("xv", &xname, axes.clone()),
                Read::new("mx", &max_t, row_index.clone()),
                Read::new("sum", &sum_t, row_index),
            ],
            out_shape: xs,
            out_index: axes,
            body,
            result,
            epilogue: None,
        };
        self.push(c, out);
        Ok(())
    }

    /// LayerNormalization over the dimensions from `axis` on: the mean, the
    /// reciprocal standard deviation, then the scaled normalisation.
    fn layernorm(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["axis", "epsilon", "stash_type"])?;
        cx.only_outputs(1, &self.uses)?;
        let x = self.input(cx, 0)?;
        let scale = self.input(cx, 1)?;
        let bias = self.optional_input(cx, 2)?;
        let xs = x.shape().to_vec();
        let axis = cx.axis("axis", -1, xs.len())?;
        let eps = cx.float("epsilon", 1e-5)?;
        let norm_shape = xs[axis..].to_vec();
        for (what, v) in [("Scale", Some(&scale)), ("B", bias.as_ref())] {
            if let Some(v) = v
                && broadcast(v.shape(), &norm_shape).as_deref() != Some(&norm_shape[..])
            {
                return Err(cx.err(format!("LayerNormalization's {what} of shape {} does not broadcast to the normalised shape {}", shape_text(v.shape()), shape_text(&norm_shape))));
            }
        }
        let count = product(&norm_shape) as f32;
        let xname = self.tensor(cx, &x)?;
        let axes = axis_names("d", xs.len());
        let outer_axes: Vec<(String, u64)> = (0..axis).map(|d| (axes[d].clone(), xs[d])).collect();
        let red_axes: Vec<(String, u64)> =
            (axis..xs.len()).map(|d| (axes[d].clone(), xs[d])).collect();
        let row_index: Vec<String> = axes[..axis].to_vec();
        let row_shape = xs[..axis].to_vec();
        let out = cx.output(0)?;
        let mean_epilogue = |eb: &mut Body| {
            let n = eb.konst(count);
            eb.op("div", &[ACC, &n])
        };
        let mut eb = Body::default();
        let result = mean_epilogue(&mut eb);
        let mean_c = Compute {
            label: format!("{}.mean", cx.name),
            spatial: outer_axes.clone(),
            reduce: Some((Combiner::Sum, red_axes.clone())),
            reads: vec![Read::new("xv", &xname, axes.clone())],
            out_shape: row_shape.clone(),
            out_index: row_index.clone(),
            body: Body::default(),
            result: "xv".into(),
            epilogue: Some(Epilogue {
                reads: vec![],
                body: eb,
                result,
            }),
        };
        let mean_name = format!("{out}.mean");
        self.push(mean_c, &mean_name);
        let Some(Val::Tensor { name: mean_t, .. }) = self.values.get(&mean_name).cloned() else {
            unreachable!()
        };
        let mut body = Body::default();
        let d = body.op("sub", &["xv", "mean"]);
        let sq = body.op("mul", &[&d, &d]);
        let mut eb = Body::default();
        let var = mean_epilogue(&mut eb);
        let e = eb.konst(eps);
        let ve = eb.op("add", &[&var, &e]);
        let result_e = eb.op("rsqrt", &[&ve]);
        let inv_c = Compute {
            label: format!("{}.inv_std", cx.name),
            spatial: outer_axes,
            reduce: Some((Combiner::Sum, red_axes)),
            reads: vec![
                Read::new("xv", &xname, axes.clone()),
                Read::new("mean", &mean_t, row_index.clone()),
            ],
            out_shape: row_shape,
            out_index: row_index.clone(),
            body,
            result: sq,
            epilogue: Some(Epilogue {
                reads: vec![],
                body: eb,
                result: result_e,
            }),
        };
        let inv_name = format!("{out}.inv_std");
        self.push(inv_c, &inv_name);
        let Some(Val::Tensor { name: inv_t, .. }) = self.values.get(&inv_name).cloned() else {
            unreachable!()
        };
        let mut reads = vec![
            Read::new("xv", &xname, axes.clone()),
            Read::new("mean", &mean_t, row_index.clone()),
            Read::new("inv", &inv_t, row_index),
        ];
        let mut body = Body::default();
        let d = body.op("sub", &["xv", "mean"]);
        let mut v = body.op("mul", &[&d, "inv"]);
        for (bind, param, op) in [("scale", Some(scale), "mul"), ("bias", bias, "add")] {
            let Some(p) = param else { continue };
            let operand = match self.operand(cx, &p)? {
                Operand::Scalar(s) => body.konst(s),
                Operand::Tensor(name, shape) => {
                    reads.push(Read::new(bind, &name, broadcast_index(&shape, &xs, &axes)));
                    bind.to_string()
                }
            };
            v = body.op(op, &[&v, &operand]);
        }
        let c = Compute {
            label: cx.name.clone(),
            spatial: axes.iter().cloned().zip(xs.iter().copied()).collect(),
            reduce: None,
            reads,
            out_shape: xs,
            out_index: axes,
            body,
            result: v,
            epilogue: None,
        };
        self.push(c, out);
        Ok(())
    }

    // ---- layout -------------------------------------------------------------

    /// Flatten, Reshape, Squeeze and Unsqueeze: the new shape, then a copy
    /// (or a new constant, for constant data).
    fn reshape_like(&mut self, cx: &NodeCx) -> Result<()> {
        let x = self.input(cx, 0)?;
        let xs = x.shape().to_vec();
        let new_shape = match cx.op() {
            "Flatten" => {
                cx.check_attributes(&["axis"])?;
                let a = cx.int("axis", 1)?;
                let r = xs.len() as i64;
                let a = if a < 0 { a + r } else { a };
                if !(0..=r).contains(&a) {
                    return Err(cx.attr_err(
                        "axis",
                        format!("axis = {a} is out of range for a tensor of rank {r}"),
                    ));
                }
                vec![product(&xs[..a as usize]), product(&xs[a as usize..])]
            }
            "Reshape" => self.reshape_target(cx, &xs)?,
            "Squeeze" | "Unsqueeze" => self.squeeze_target(cx, &xs)?,
            _ => unreachable!(),
        };
        let out = cx.output(0)?;
        match &x {
            Val::Const(c) => {
                let key = format!("{}.{}", c.key, sanitise(out, "reshaped"));
                let data = match &c.data {
                    ConstData::F32(d) => ConstData::F32(d.clone()),
                    ConstData::I64(d) => ConstData::I64(d.clone()),
                    ConstData::Unreadable(w) => ConstData::Unreadable(w.clone()),
                };
                self.define_const(out, key, new_shape, data);
                Ok(())
            }
            Val::Tensor { .. } => {
                let name = self.tensor(cx, &x)?;
                let c = reshape_copy(&cx.name, &name, &xs, &new_shape);
                self.push(c, out);
                Ok(())
            }
        }
    }

    fn reshape_target(&self, cx: &NodeCx, xs: &[u64]) -> Result<Vec<u64>> {
        let spec: Vec<i64> = if self.opset < 5 {
            cx.check_attributes(&["shape", "consumed_inputs"])?;
            cx.ints("shape")?
                .ok_or_else(|| cx.attr_err("shape", "Reshape needs its shape"))?
        } else {
            cx.check_attributes(&["allowzero"])?;
            self.int_constant(cx, 1, "shape")?
        };
        let allowzero = self.opset >= 14 && cx.int_in("allowzero", 0, &[0, 1])? == 1;
        let total = product(xs);
        let mut shape = Vec::new();
        let mut infer = None;
        for (i, &d) in spec.iter().enumerate() {
            match d {
                -1 if infer.is_none() => {
                    infer = Some(i);
                    shape.push(1);
                }
                0 if !allowzero => shape.push(*xs.get(i).ok_or_else(|| {
                    cx.err(format!(
                        "shape {spec:?} copies dimension {i}, which the input (of shape {}) lacks",
                        shape_text(xs)
                    ))
                })?),
                d if d >= 1 => shape.push(d as u64),
                _ => {
                    return Err(cx.err(format!(
                        "shape {spec:?} is not a valid target shape for an input of shape {}",
                        shape_text(xs)
                    )));
                }
            }
        }
        let known = product(&shape);
        if let Some(i) = infer {
            if known == 0 || !total.is_multiple_of(known) {
                return Err(cx.err(format!(
                    "no shape {spec:?} holds the {total} elements of the input"
                )));
            }
            shape[i] = total / known;
        }
        if product(&shape) != total {
            return Err(cx.err(format!(
                "shape {} holds {} elements, the input (of shape {}) {total}",
                shape_text(&shape),
                product(&shape),
                shape_text(xs)
            )));
        }
        Ok(shape)
    }

    fn squeeze_target(&self, cx: &NodeCx, xs: &[u64]) -> Result<Vec<u64>> {
        let squeeze = cx.op() == "Squeeze";
        let axes: Option<Vec<i64>> = if self.opset < 13 {
            cx.check_attributes(&["axes"])?;
            cx.ints("axes")?
        } else {
            cx.check_attributes(&[])?;
            match cx.input(1) {
                None => None,
                Some(_) => Some(self.int_constant(cx, 1, "axes")?),
            }
        };
        if squeeze {
            let rank = xs.len();
            let axes: Vec<usize> = match axes {
                None => (0..rank).filter(|&d| xs[d] == 1).collect(),
                Some(a) => a
                    .iter()
                    .map(|&a| {
                        normalise_axis(a, rank)
                            .filter(|&d| xs[d] == 1)
                            .ok_or_else(|| {
                                cx.err(format!(
                                    "cannot squeeze axis {a} of a tensor of shape {}",
                                    shape_text(xs)
                                ))
                            })
                    })
                    .collect::<Result<_>>()?,
            };
            Ok((0..rank)
                .filter(|d| !axes.contains(d))
                .map(|d| xs[d])
                .collect())
        } else {
            let axes = axes.ok_or_else(|| cx.err("Unsqueeze needs its axes"))?;
            let rank = xs.len() + axes.len();
            let mut targets: Vec<usize> = axes
                .iter()
                .map(|&a| {
                    normalise_axis(a, rank).ok_or_else(|| {
                        cx.err(format!(
                            "axis {a} is out of range for the result's rank {rank}"
                        ))
                    })
                })
                .collect::<Result<_>>()?;
            targets.sort_unstable();
            targets.dedup();
            if targets.len() != axes.len() {
                return Err(cx.err(format!("axes {axes:?} repeat an axis")));
            }
            let mut it = xs.iter();
            Ok((0..rank)
                .map(|d| {
                    if targets.contains(&d) {
                        1
                    } else {
                        *it.next().unwrap()
                    }
                })
                .collect())
        }
    }

    /// An integer constant input (a shape, axes): its values.
    fn int_constant(&self, cx: &NodeCx, i: usize, what: &str) -> Result<Vec<i64>> {
        match self.input(cx, i)? {
            Val::Const(c) => match &c.data {
                ConstData::I64(d) => Ok(d.clone()),
                _ => Err(cx.err(format!("{}'s {what} (input {i}) must be an integer constant", cx.op()))),
            },
            Val::Tensor { .. } => Err(cx.err(format!("{}'s {what} (input {i}) is computed at run time; tilec needs a constant (static shapes)", cx.op()))),
        }
    }

    fn transpose(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["perm"])?;
        let x = self.input(cx, 0)?;
        let xs = x.shape().to_vec();
        let rank = xs.len();
        let perm: Vec<usize> = match cx.ints("perm")? {
            None => (0..rank).rev().collect(),
            Some(p) => {
                let mut sorted = p.clone();
                sorted.sort_unstable();
                if sorted != (0..rank as i64).collect::<Vec<_>>() {
                    return Err(cx.attr_err(
                        "perm",
                        format!("perm {p:?} is not a permutation of the {rank} dimensions"),
                    ));
                }
                p.iter().map(|&d| d as usize).collect()
            }
        };
        let xname = self.tensor(cx, &x)?;
        let axes = axis_names("d", rank);
        let out_shape: Vec<u64> = perm.iter().map(|&p| xs[p]).collect();
        let mut x_index = vec![String::new(); rank];
        for (j, &p) in perm.iter().enumerate() {
            x_index[p] = axes[j].clone();
        }
        let c = Compute {
            label: cx.name.clone(),
            spatial: axes
                .iter()
                .cloned()
                .zip(out_shape.iter().copied())
                .collect(),
            reduce: None,
            reads: vec![Read::new("xv", &xname, x_index)],
            out_shape,
            out_index: axes,
            body: Body::default(),
            result: "xv".into(),
            epilogue: None,
        };
        self.push(c, cx.output(0)?);
        Ok(())
    }

    /// Concat: each input read at its offset along the axis, padded with
    /// -inf outside its range, the reads combined with `max` (exactly the
    /// one value in range, -0.0 and NaN included).
    fn concat(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["axis"])?;
        let inputs: Vec<Val> = (0..cx.node.input.len())
            .map(|i| self.input(cx, i))
            .collect::<Result<_>>()?;
        let Some(first) = inputs.first() else {
            return Err(cx.err("Concat of no inputs"));
        };
        let rank = first.shape().len();
        let axis = cx
            .axis("axis", if self.opset < 4 { 1 } else { i64::MAX }, rank)
            .map_err(|e| {
                if cx
                    .attr("axis", attribute_type::INT, "INT")
                    .ok()
                    .flatten()
                    .is_none()
                {
                    cx.attr_err("axis", "Concat needs its axis")
                } else {
                    e
                }
            })?;
        let mut out_shape = first.shape().to_vec();
        out_shape[axis] = 0;
        for v in &inputs {
            let s = v.shape();
            if s.len() != rank || (0..rank).any(|d| d != axis && s[d] != first.shape()[d]) {
                return Err(cx.err(format!(
                    "Concat along axis {axis} of shapes {} and {}",
                    shape_text(first.shape()),
                    shape_text(s)
                )));
            }
            out_shape[axis] += s[axis];
        }
        // Integer constants (shape arithmetic) are concatenated here.
        if inputs
            .iter()
            .all(|v| matches!(v, Val::Const(c) if matches!(c.data, ConstData::I64(_))))
            && rank == 1
        {
            let data = inputs
                .iter()
                .flat_map(|v| {
                    if let Val::Const(c) = v
                        && let ConstData::I64(d) = &c.data
                    {
                        d.clone()
                    } else {
                        vec![]
                    }
                })
                .collect();
            self.define_const(
                cx.output(0)?,
                sanitise_key(&cx.name),
                out_shape,
                ConstData::I64(data),
            );
            return Ok(());
        }
        let axes = axis_names("d", rank);
        let mut reads = Vec::new();
        let mut offset = 0i64;
        for (i, v) in inputs.iter().enumerate() {
            let name = self.tensor(cx, v)?;
            let mut index = axes.clone();
            index[axis] = affine(&[(1, &axes[axis])], -offset);
            let mut read = Read::new(&format!("x{i}"), &name, index);
            if inputs.len() > 1 {
                read = read.pad("-inf");
            }
            reads.push(read);
            offset += v.shape()[axis] as i64;
        }
        let mut body = Body::default();
        let mut result = "x0".to_string();
        for i in 1..inputs.len() {
            result = body.op("max", &[&result, &format!("x{i}")]);
        }
        let c = Compute {
            label: cx.name.clone(),
            spatial: axes
                .iter()
                .cloned()
                .zip(out_shape.iter().copied())
                .collect(),
            reduce: None,
            reads,
            out_shape,
            out_index: axes,
            body,
            result,
            epilogue: None,
        };
        self.push(c, cx.output(0)?);
        Ok(())
    }

    fn dropout(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["ratio", "seed", "is_test"])?;
        cx.only_outputs(1, &self.uses)?;
        if let Some(t) = self.optional_input(cx, 2)? {
            let training = match &t {
                Val::Const(c) => match &c.data {
                    ConstData::I64(d) => d.iter().any(|&v| v != 0),
                    _ => true,
                },
                Val::Tensor { .. } => true,
            };
            if training {
                return Err(cx.err(
                    "Dropout in training mode is not supported; tilec imports models for inference",
                ));
            }
        }
        let v = self.input(cx, 0)?;
        self.values.insert(cx.output(0)?.to_string(), v);
        Ok(())
    }

    fn constant(&mut self, cx: &NodeCx) -> Result<()> {
        let out = cx.output(0)?;
        let [a] = cx.node.attribute.as_slice() else {
            return Err(cx.err("Constant needs exactly one attribute (value, value_float, value_floats, value_int or value_ints)"));
        };
        let key = sanitise_key(out);
        let (shape, data) = match a.name.as_str() {
            "value" => {
                let t =
                    a.t.as_ref()
                        .ok_or_else(|| cx.attr_err("value", "Constant's value holds no tensor"))?;
                let c = read_tensor_proto(t, out).map_err(|mut e| {
                    e.node = Some(cx.name.clone());
                    e.op = Some("Constant".into());
                    e
                })?;
                (c.shape, c.data)
            }
            "value_float" => (vec![], ConstData::F32(vec![a.f])),
            "value_floats" => (
                vec![a.floats.len() as u64],
                ConstData::F32(a.floats.clone()),
            ),
            "value_int" => (vec![], ConstData::I64(vec![a.i])),
            "value_ints" => (vec![a.ints.len() as u64], ConstData::I64(a.ints.clone())),
            other => {
                return Err(cx
                    .attr_err(
                        other,
                        format!("Constant with attribute `{other}` is not supported"),
                    )
                    .with_hint("tilec reads value, value_float(s) and value_int(s)"));
            }
        };
        if shape.contains(&0) {
            return Err(cx.err("an empty constant (a dimension of 0) is not supported"));
        }
        self.define_const(out, key, shape, data);
        Ok(())
    }

    /// A constant of a constant shape, filled with `value` (one element;
    /// float 0 by default): the weights of the onnx wheel's `light` models.
    fn constant_of_shape(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["value"])?;
        let out = cx.output(0)?;
        let Val::Const(shape) = self.input(cx, 0)? else {
            return Err(cx.err("ConstantOfShape of a run-time shape is not supported; its shape must be a constant"));
        };
        let ConstData::I64(dims) = &shape.data else {
            return Err(cx.err("ConstantOfShape's shape must be an integer constant"));
        };
        if dims.iter().any(|&d| d <= 0) {
            return Err(cx.err(format!(
                "ConstantOfShape of shape {dims:?}: every dimension must be at least 1"
            )));
        }
        let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        let n = dims
            .iter()
            .try_fold(1u64, |p, &d| p.checked_mul(d))
            .filter(|&n| n <= 1 << 31)
            .ok_or_else(|| cx.err(format!("ConstantOfShape of shape {dims:?} is too large")))?
            as usize;
        let data = match cx.node.attribute.iter().find(|a| a.name == "value") {
            None => ConstData::F32(vec![0.0; n]),
            Some(a) => {
                let t = a.t.as_ref().ok_or_else(|| {
                    cx.attr_err("value", "ConstantOfShape's value holds no tensor")
                })?;
                match read_tensor_proto(t, out)?.data {
                    ConstData::F32(v) if v.len() == 1 => ConstData::F32(vec![v[0]; n]),
                    ConstData::I64(v) if v.len() == 1 => ConstData::I64(vec![v[0]; n]),
                    _ => {
                        return Err(cx.attr_err(
                            "value",
                            "ConstantOfShape's value must be one f32 or integer element",
                        ));
                    }
                }
            }
        };
        self.define_const(out, sanitise_key(out), dims, data);
        Ok(())
    }

    /// Shape of a tensor whose shape is static: an integer constant.
    fn shape_op(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["start", "end"])?;
        let x = self.input(cx, 0)?;
        let dims: Vec<i64> = x.shape().iter().map(|&d| d as i64).collect();
        let r = dims.len() as i64;
        let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let (start, end) = (clamp(cx.int("start", 0)?), clamp(cx.int("end", r)?));
        let data: Vec<i64> = if start < end {
            dims[start..end].to_vec()
        } else {
            vec![]
        };
        if data.is_empty() {
            return Err(cx.err("Shape with an empty result is not supported"));
        }
        self.define_const(
            cx.output(0)?,
            sanitise_key(&cx.name),
            vec![data.len() as u64],
            ConstData::I64(data),
        );
        Ok(())
    }

    /// Gather on integer constants (shape arithmetic of exported models).
    fn gather(&mut self, cx: &NodeCx) -> Result<()> {
        cx.check_attributes(&["axis"])?;
        let (Val::Const(data), Val::Const(indices)) = (self.input(cx, 0)?, self.input(cx, 1)?)
        else {
            return Err(cx.err("Gather of run-time tensors is not supported; tilec folds Gather of constants (shape arithmetic) only"));
        };
        let (ConstData::I64(d), ConstData::I64(ix)) = (&data.data, &indices.data) else {
            return Err(cx.err("Gather of f32 constants is not supported; tilec folds Gather of integer constants (shape arithmetic) only"));
        };
        if data.shape.len() != 1 || cx.int("axis", 0)? != 0 {
            return Err(
                cx.err("Gather is folded for one-dimensional integer constants along axis 0 only")
            );
        }
        let n = d.len() as i64;
        let values: Vec<i64> = ix
            .iter()
            .map(|&i| {
                let j = if i < 0 { i + n } else { i };
                if (0..n).contains(&j) {
                    Ok(d[j as usize])
                } else {
                    Err(cx.err(format!("Gather index {i} is out of range for {n} values")))
                }
            })
            .collect::<Result<_>>()?;
        self.define_const(
            cx.output(0)?,
            sanitise_key(&cx.name),
            indices.shape.clone(),
            ConstData::I64(values),
        );
        Ok(())
    }
}

/// The number of spatial dimensions of a convolution, checked against its
/// weight.
fn conv_rank(cx: &NodeCx, xs: &[u64], ws: &[u64]) -> Result<usize> {
    if !(3..=5).contains(&xs.len()) || ws.len() != xs.len() {
        return Err(cx.err(format!(
            "{} of an input of shape {} with a weight of shape {}: tilec imports 1-D to 3-D convolutions (N, C, spatial...) with a weight of the same rank",
            cx.op(),
            shape_text(xs),
            shape_text(ws)
        )));
    }
    Ok(xs.len() - 2)
}

fn check_kernel_shape(cx: &NodeCx, kernel: &[u64]) -> Result<()> {
    if let Some(k) = cx.ints("kernel_shape")?
        && k.iter().map(|&v| v as u64).ne(kernel.iter().copied())
    {
        return Err(cx.attr_err(
            "kernel_shape",
            format!(
                "kernel_shape {k:?} differs from the weight's spatial shape {}",
                shape_text(kernel)
            ),
        ));
    }
    Ok(())
}

/// A copy of `x` (shape `xs`) into `new_shape`, row-major order kept.
///
/// Where the two shapes' dimension boundaries nest (every reshape that
/// splits or merges dimensions, Flatten, Squeeze, Unsqueeze), the copy
/// runs over the common refinement of both: one axis per piece, each
/// dimension of either side a mixed-radix sum of its pieces, so both the
/// read and the output index are affine. Otherwise (say 6x4 → 4x6) the
/// flat index is decomposed with exact division: the reduction axes run
/// over the input's trailing dimensions and the one read whose division
/// is exact supplies the value (a `max` over -inf padding), which costs
/// the product of the trailing dimensions per element.
fn reshape_copy(label: &str, x: &str, xs: &[u64], new_shape: &[u64]) -> Compute {
    let suffix = |s: &[u64]| -> Vec<u64> { (0..=s.len()).map(|i| product(&s[i..])).collect() };
    let (sin, sout) = (suffix(xs), suffix(new_shape));
    let mut bounds: Vec<u64> = sin.iter().chain(&sout).copied().collect();
    bounds.sort_unstable_by(|a, b| b.cmp(a));
    bounds.dedup();
    let nests = bounds.windows(2).all(|w| w[0] % w[1] == 0);
    let out_axes = axis_names("d", new_shape.len());
    if nests {
        // Piece p covers flat strides [bounds[p+1], bounds[p]).
        let pieces: Vec<(String, u64, u64)> = bounds
            .windows(2)
            .enumerate()
            .map(|(p, w)| (format!("p{p}"), w[0] / w[1], w[1]))
            .collect();
        let index_of = |suffixes: &[u64], dim: usize, unit: Option<&str>| -> String {
            let (hi, lo) = (suffixes[dim], suffixes[dim + 1]);
            let terms: Vec<(i64, &str)> = pieces
                .iter()
                .filter(|(_, _, stride)| *stride >= lo && *stride < hi)
                .map(|(a, _, stride)| ((stride / lo) as i64, a.as_str()))
                .collect();
            if terms.is_empty() {
                unit.unwrap_or("0").to_string()
            } else {
                affine(&terms, 0)
            }
        };
        let mut spatial: Vec<(String, u64)> =
            pieces.iter().map(|(a, e, _)| (a.clone(), *e)).collect();
        let mut out_index = Vec::new();
        for (j, &d) in new_shape.iter().enumerate() {
            if d == 1 {
                // A unit dimension needs an axis of its own in the output index.
                let u = format!("u{j}");
                spatial.push((u.clone(), 1));
                out_index.push(u);
            } else {
                out_index.push(index_of(&sout, j, None));
            }
        }
        let x_index = (0..xs.len()).map(|i| index_of(&sin, i, None)).collect();
        return Compute {
            label: label.to_string(),
            spatial,
            reduce: None,
            reads: vec![Read::new("xv", x, x_index)],
            out_shape: new_shape.to_vec(),
            out_index,
            body: Body::default(),
            result: "xv".into(),
            epilogue: None,
        };
    }
    let flat: Vec<(i64, &str)> = out_axes
        .iter()
        .enumerate()
        .map(|(j, a)| (sout[j + 1] as i64, a.as_str()))
        .collect();
    let raxes = axis_names("r", xs.len());
    let mut terms = flat.clone();
    for i in 1..xs.len() {
        terms.push((-(sin[i + 1] as i64), &raxes[i]));
    }
    let mut x_index = vec![format!("({}) div {}", affine(&terms, 0), sin[1])];
    x_index.extend(raxes[1..].iter().cloned());
    Compute {
        label: label.to_string(),
        spatial: out_axes
            .iter()
            .cloned()
            .zip(new_shape.iter().copied())
            .collect(),
        reduce: Some((
            Combiner::Max,
            raxes[1..]
                .iter()
                .cloned()
                .zip(xs[1..].iter().copied())
                .collect(),
        )),
        reads: vec![Read::new("xv", x, x_index).pad("-inf")],
        out_shape: new_shape.to_vec(),
        out_index: out_axes,
        body: Body::default(),
        result: "xv".into(),
        epilogue: None,
    }
}
