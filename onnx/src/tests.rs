//! Models built here with the prost structs, imported, run with the
//! interpreter and compared with a direct computation written below.

use crate::proto::*;
use crate::{ImportError, ImportOptions, Imported, import_model};
use prost::Message;
use tilec::interp::{Tensor, TensorData};
use tilec::ir::{ElemType, TensorType};

// ---- model building ----------------------------------------------------------

fn value_info(name: &str, shape: &[i64]) -> ValueInfoProto {
    let dim = shape
        .iter()
        .map(|&d| tensor_shape_proto::Dimension {
            value: Some(if d >= 0 {
                tensor_shape_proto::dimension::Value::DimValue(d)
            } else {
                tensor_shape_proto::dimension::Value::DimParam("N".into())
            }),
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShapeProto { dim }),
            })),
        }),
    }
}

fn init(name: &str, shape: &[u64], data: &[f32]) -> TensorProto {
    TensorProto {
        dims: shape.iter().map(|&d| d as i64).collect(),
        data_type: data_type::FLOAT,
        float_data: data.to_vec(),
        name: name.into(),
        ..Default::default()
    }
}

/// An initializer stored as raw little-endian bytes, as exporters write them.
fn init_raw(name: &str, shape: &[u64], data: &[f32]) -> TensorProto {
    let raw_data = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    TensorProto {
        dims: shape.iter().map(|&d| d as i64).collect(),
        data_type: data_type::FLOAT,
        raw_data,
        name: name.into(),
        ..Default::default()
    }
}

fn init_i64(name: &str, data: &[i64]) -> TensorProto {
    TensorProto {
        dims: vec![data.len() as i64],
        data_type: data_type::INT64,
        int64_data: data.to_vec(),
        name: name.into(),
        ..Default::default()
    }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        ints: v.to_vec(),
        r#type: attribute_type::INTS,
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        i: v,
        r#type: attribute_type::INT,
        ..Default::default()
    }
}

fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        f: v,
        r#type: attribute_type::FLOAT,
        ..Default::default()
    }
}

fn string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        s: v.as_bytes().to_vec(),
        r#type: attribute_type::STRING,
        ..Default::default()
    }
}

fn node(
    op: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: name.into(),
        op_type: op.into(),
        attribute,
        domain: String::new(),
    }
}

struct Graph {
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<String>,
    opset: i64,
}

impl Graph {
    fn new(inputs: &[(&str, &[i64])]) -> Graph {
        Graph {
            nodes: vec![],
            inits: vec![],
            inputs: inputs.iter().map(|(n, s)| value_info(n, s)).collect(),
            outputs: vec![],
            opset: 17,
        }
    }

    fn node(mut self, n: NodeProto) -> Graph {
        self.nodes.push(n);
        self
    }

    fn init(mut self, t: TensorProto) -> Graph {
        self.inits.push(t);
        self
    }

    fn output(mut self, name: &str) -> Graph {
        self.outputs.push(name.into());
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let graph = GraphProto {
            node: self.nodes.clone(),
            name: "test-net".into(),
            initializer: self.inits.clone(),
            input: self.inputs.clone(),
            output: self
                .outputs
                .iter()
                .map(|o| ValueInfoProto {
                    name: o.clone(),
                    r#type: None,
                })
                .collect(),
            value_info: vec![],
        };
        ModelProto {
            ir_version: 8,
            producer_name: "tilec-tests".into(),
            graph: Some(graph),
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: self.opset,
            }],
        }
        .encode_to_vec()
    }
}

// ---- running -----------------------------------------------------------------

fn random(shape: &[u64], seed: u64) -> Vec<f32> {
    let t = Tensor::random(&TensorType::new(shape.to_vec(), ElemType::F32), seed);
    match t.data {
        TensorData::F32(v) => v,
        _ => unreachable!(),
    }
}

fn tensor(shape: &[u64], data: Vec<f32>) -> Tensor {
    Tensor::new(
        TensorType::new(shape.to_vec(), ElemType::F32),
        TensorData::F32(data),
    )
    .unwrap()
}

/// Imports and runs the model on `inputs` (the weights appended), as
/// `tilec-run` does.
fn run(g: &Graph, inputs: Vec<Tensor>) -> (Imported, Vec<Vec<f32>>) {
    run_with(g, inputs, &ImportOptions::default())
}

/// [`run`], imported with `options`.
fn run_with(g: &Graph, inputs: Vec<Tensor>, options: &ImportOptions) -> (Imported, Vec<Vec<f32>>) {
    let imported = import_model(&g.bytes(), options).unwrap_or_else(|e| panic!("{e}"));
    let (mut module, _) = tilec::syntax::parse_str("t.tile", &imported.module_text)
        .unwrap_or_else(|_| panic!("{}", imported.module_text));
    let f = &mut module.funcs[0];
    let wanted = tilec::ir::weights::hoist_weights(f);
    let mut all = inputs;
    all.extend(
        tilec::interp::weights::bind_weights(
            &wanted,
            imported.weights.clone(),
            std::path::Path::new("t.safetensors"),
        )
        .unwrap(),
    );
    let results = tilec::interp::run_function(f, &all)
        .unwrap_or_else(|e| panic!("{e}\n{}", imported.module_text));
    let results = results
        .into_iter()
        .map(|t| t.to_f64_vec().into_iter().map(|v| v as f32).collect())
        .collect();
    (imported, results)
}

fn import_err(g: &Graph, options: &ImportOptions) -> ImportError {
    match import_model(&g.bytes(), options) {
        Ok(i) => panic!("expected an error, got\n{}", i.module_text),
        Err(e) => e,
    }
}

#[track_caller]
fn assert_close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: got {g}, want {w}"
        );
    }
}

// ---- reference computations --------------------------------------------------

/// Row-major offset of `ix` in `shape`.
fn at(shape: &[u64], ix: &[i64]) -> Option<usize> {
    let mut off = 0usize;
    for (&d, &i) in shape.iter().zip(ix) {
        if i < 0 || i >= d as i64 {
            return None;
        }
        off = off * d as usize + i as usize;
    }
    Some(off)
}

/// Every index of `shape`, row-major.
fn indices(shape: &[u64]) -> Vec<Vec<i64>> {
    let mut out = vec![vec![]];
    for &d in shape {
        out = out
            .into_iter()
            .flat_map(|p| (0..d as i64).map(move |i| [p.clone(), vec![i]].concat()))
            .collect();
    }
    out
}

struct ConvParams {
    group: u64,
    stride: [i64; 2],
    pad: [i64; 2],
    dilation: [i64; 2],
}

fn conv2d_ref(
    x: &[f32],
    xs: &[u64],
    w: &[f32],
    ws: &[u64],
    b: Option<&[f32]>,
    p: &ConvParams,
    out: &[u64],
) -> Vec<f64> {
    let (cg, mg) = (xs[1] / p.group, ws[0] / p.group);
    indices(out)
        .iter()
        .map(|o| {
            let (n, f, oh, ow) = (o[0], o[1], o[2], o[3]);
            let g = f as u64 / mg;
            let mut acc = b.map_or(0.0, |b| b[f as usize] as f64);
            for c in 0..cg as i64 {
                for r in 0..ws[2] as i64 {
                    for s in 0..ws[3] as i64 {
                        let ih = oh * p.stride[0] + r * p.dilation[0] - p.pad[0];
                        let iw = ow * p.stride[1] + s * p.dilation[1] - p.pad[1];
                        if let Some(xi) = at(xs, &[n, (g * cg) as i64 + c, ih, iw]) {
                            acc += x[xi] as f64 * w[at(ws, &[f, c, r, s]).unwrap()] as f64;
                        }
                    }
                }
            }
            acc
        })
        .collect()
}

// ---- tests -------------------------------------------------------------------

#[test]
fn conv_batchnorm_relu_folds_the_batchnorm() {
    let (xs, ws) = ([1u64, 4, 7, 7], [6u64, 2, 3, 3]);
    let (x, w, b) = (random(&xs, 1), random(&ws, 2), random(&[6], 3));
    let gamma = random(&[6], 4);
    let beta = random(&[6], 5);
    let mean = random(&[6], 6);
    let var: Vec<f32> = random(&[6], 7).iter().map(|v| v.abs() + 0.5).collect();
    let g = Graph::new(&[("data", &[1, 4, 7, 7])])
        .init(init("conv1.weight", &ws, &w))
        .init(init_raw("conv1.bias", &[6], &b))
        .init(init("bn.gamma", &[6], &gamma))
        .init(init("bn.beta", &[6], &beta))
        .init(init("bn.mean", &[6], &mean))
        .init(init("bn.var", &[6], &var))
        .node(node(
            "Conv",
            "conv1",
            &["data", "conv1.weight", "conv1.bias"],
            &["c1"],
            vec![
                int("group", 2),
                ints("pads", &[1, 1, 1, 1]),
                ints("strides", &[2, 2]),
                ints("kernel_shape", &[3, 3]),
            ],
        ))
        .node(node(
            "BatchNormalization",
            "bn1",
            &["c1", "bn.gamma", "bn.beta", "bn.mean", "bn.var"],
            &["b1"],
            vec![float("epsilon", 1e-3)],
        ))
        .node(node("Relu", "relu1", &["b1"], &["y"], vec![]))
        .output("y");
    let (imported, out) = run(&g, vec![tensor(&xs, x.clone())]);
    assert_eq!(imported.compute_ops, 2, "{}", imported.module_text);
    let keys: Vec<&str> = imported.weights.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["conv1.weight.folded", "conv1.bias.folded"]);
    assert_eq!(imported.inputs, [("data".to_string(), "data".to_string())]);
    assert_eq!(imported.outputs, [("y".to_string(), vec![1, 6, 4, 4])]);
    let p = ConvParams {
        group: 2,
        stride: [2, 2],
        pad: [1, 1],
        dilation: [1, 1],
    };
    let conv = conv2d_ref(&x, &xs, &w, &ws, Some(&b), &p, &[1, 6, 4, 4]);
    let want: Vec<f64> = conv
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let f = (i / 16) % 6;
            let y = (v - mean[f] as f64) / (var[f] as f64 + 1e-3).sqrt() * gamma[f] as f64
                + beta[f] as f64;
            y.max(0.0)
        })
        .collect();
    assert_close(&out[0], &want, 1e-5);
}

#[test]
fn batchnorm_after_a_shared_conv_is_an_affine_op() {
    let (xs, ws) = ([1u64, 3, 5, 5], [4u64, 3, 1, 1]);
    let (x, w) = (random(&xs, 1), random(&ws, 2));
    let ones = vec![1.0f32; 4];
    let g = Graph::new(&[("x", &[1, 3, 5, 5])])
        .init(init("w", &ws, &w))
        .init(init("s", &[4], &[2.0, 1.0, 0.5, 1.0]))
        .init(init("b", &[4], &[0.0, 1.0, 0.0, -1.0]))
        .init(init("m", &[4], &[0.0, 0.0, 1.0, 0.0]))
        .init(init("v", &[4], &ones))
        .node(node("Conv", "", &["x", "w"], &["c"], vec![]))
        .node(node(
            "BatchNormalization",
            "bn",
            &["c", "s", "b", "m", "v"],
            &["y"],
            vec![float("epsilon", 0.0)],
        ))
        .output("y")
        .output("c");
    let (imported, out) = run(&g, vec![tensor(&xs, x.clone())]);
    assert_eq!(imported.compute_ops, 2);
    let p = ConvParams {
        group: 1,
        stride: [1, 1],
        pad: [0, 0],
        dilation: [1, 1],
    };
    let conv = conv2d_ref(&x, &xs, &w, &ws, None, &p, &[1, 4, 5, 5]);
    assert_close(&out[1], &conv, 1e-6);
    let (s, b, m) = (
        [2.0, 1.0, 0.5, 1.0],
        [0.0, 1.0, 0.0, -1.0],
        [0.0, 0.0, 1.0, 0.0],
    );
    let want: Vec<f64> = conv
        .iter()
        .enumerate()
        .map(|(i, &v)| (v - m[i / 25]) * s[i / 25] + b[i / 25])
        .collect();
    assert_close(&out[0], &want, 1e-6);
}

#[test]
fn conv_same_padding_dilation_and_depthwise() {
    let (xs, ws) = ([2u64, 3, 9, 7], [3u64, 1, 3, 2]);
    let (x, w) = (random(&xs, 11), random(&ws, 12));
    for (auto_pad, pad_begin) in [("SAME_UPPER", [2, 1]), ("SAME_LOWER", [2, 2])] {
        let g = Graph::new(&[("x", &[2, 3, 9, 7])])
            .init(init("w", &ws, &w))
            .node(node(
                "Conv",
                "dw",
                &["x", "w"],
                &["y"],
                vec![
                    int("group", 3),
                    string("auto_pad", auto_pad),
                    ints("dilations", &[2, 3]),
                    ints("strides", &[1, 2]),
                ],
            ))
            .output("y");
        let (imported, out) = run(&g, vec![tensor(&xs, x.clone())]);
        assert_eq!(imported.outputs[0].1, [2, 3, 9, 4]);
        // Padding: h total (9-1)*1 + 5 - 9 = 4; w total (4-1)*2 + 4 - 7 = 3.
        let p = ConvParams {
            group: 3,
            stride: [1, 2],
            pad: pad_begin,
            dilation: [2, 3],
        };
        assert_close(
            &out[0],
            &conv2d_ref(&x, &xs, &w, &ws, None, &p, &[2, 3, 9, 4]),
            1e-6,
        );
    }
}

#[test]
fn conv_transpose_matches_the_scatter_definition() {
    let (xs, ws) = ([1u64, 2, 4, 4], [2u64, 3, 3, 3]);
    let (x, w, b) = (random(&xs, 21), random(&ws, 22), random(&[3], 23));
    let g = Graph::new(&[("x", &[1, 2, 4, 4])])
        .init(init("w", &ws, &w))
        .init(init("b", &[3], &b))
        .node(node(
            "ConvTranspose",
            "up",
            &["x", "w", "b"],
            &["y"],
            vec![
                ints("strides", &[2, 2]),
                ints("pads", &[1, 1, 1, 1]),
                ints("output_padding", &[1, 1]),
            ],
        ))
        .output("y");
    let (imported, out) = run(&g, vec![tensor(&xs, x.clone())]);
    let os = [1u64, 3, 8, 8];
    assert_eq!(imported.outputs[0].1, os);
    let mut want: Vec<f64> = (0..product(&os)).map(|i| b[(i / 64) % 3] as f64).collect();
    for ix in indices(&xs) {
        for f in 0..3 {
            for r in 0..3 {
                for s in 0..3 {
                    let (oh, ow) = (ix[2] * 2 + r - 1, ix[3] * 2 + s - 1);
                    if let Some(o) = at(&os, &[0, f, oh, ow]) {
                        want[o] += x[at(&xs, &ix).unwrap()] as f64
                            * w[at(&ws, &[ix[1], f, r, s]).unwrap()] as f64;
                    }
                }
            }
        }
    }
    assert_close(&out[0], &want, 1e-6);
}

fn product(s: &[u64]) -> usize {
    s.iter().product::<u64>() as usize
}

#[test]
fn residual_add_with_channel_and_scalar_constants() {
    let xs = [1u64, 3, 4, 4];
    let x = random(&xs, 31);
    let scale = [0.5f32, -1.0, 2.0];
    let g = Graph::new(&[("x", &[1, 3, 4, 4])])
        .init(init("scale", &[3, 1, 1], &scale))
        .init(init("two", &[], &[2.0]))
        .node(node("Mul", "scale", &["x", "scale"], &["a"], vec![]))
        .node(node("Add", "plus2", &["a", "two"], &["b"], vec![]))
        .node(node("Add", "residual", &["b", "x"], &["c"], vec![]))
        .node(node("Clip", "clip", &["c", "", "two"], &["y"], vec![]))
        .output("y");
    let (imported, out) = run(&g, vec![tensor(&xs, x.clone())]);
    // The scalar is written into the body: only the per-channel scale is a weight.
    assert_eq!(imported.weights.len(), 1, "{}", imported.module_text);
    let want: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| ((v * scale[i / 16] + 2.0) as f64 + v as f64).min(2.0))
        .collect();
    assert_close(&out[0], &want, 1e-6);
}

#[test]
fn pools_max_average_and_global() {
    let xs = [1u64, 2, 7, 7];
    let x = random(&xs, 41);
    let window = |node_: NodeProto| Graph::new(&[("x", &[1, 2, 7, 7])]).node(node_).output("y");
    let pool_attrs = || {
        vec![
            ints("kernel_shape", &[3, 3]),
            ints("strides", &[2, 2]),
            ints("pads", &[1, 1, 1, 1]),
        ]
    };
    let reference = |include_pad: bool, max: bool| -> Vec<f64> {
        indices(&[1, 2, 4, 4])
            .iter()
            .map(|o| {
                let mut vals = vec![];
                let mut count = 0;
                for r in 0..3 {
                    for s in 0..3 {
                        let (h, w) = (o[2] * 2 + r - 1, o[3] * 2 + s - 1);
                        if let Some(i) = at(&xs, &[0, o[1], h, w]) {
                            vals.push(x[i] as f64);
                            count += 1;
                        } else if (-1..8).contains(&h) && (-1..8).contains(&w) {
                            count += include_pad as i32;
                        }
                    }
                }
                if max {
                    vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                } else {
                    vals.iter().sum::<f64>() / count as f64
                }
            })
            .collect()
    };
    let (_, out) = run(
        &window(node("MaxPool", "mp", &["x"], &["y"], pool_attrs())),
        vec![tensor(&xs, x.clone())],
    );
    assert_close(&out[0], &reference(false, true), 0.0);
    let (imported, out) = run(
        &window(node("AveragePool", "ap", &["x"], &["y"], pool_attrs())),
        vec![tensor(&xs, x.clone())],
    );
    assert_eq!(imported.weights[0].0, "ap.window_sizes");
    assert_close(&out[0], &reference(false, false), 1e-6);
    let mut attrs = pool_attrs();
    attrs.push(int("count_include_pad", 1));
    let (imported, out) = run(
        &window(node("AveragePool", "ap", &["x"], &["y"], attrs)),
        vec![tensor(&xs, x.clone())],
    );
    assert!(imported.weights.is_empty(), "every window counts 9");
    assert_close(&out[0], &reference(true, false), 1e-6);
    let (imported, out) = run(
        &window(node("GlobalAveragePool", "gap", &["x"], &["y"], vec![])),
        vec![tensor(&xs, x.clone())],
    );
    assert_eq!(imported.outputs[0].1, [1, 2, 1, 1]);
    let want: Vec<f64> = (0..2)
        .map(|c| {
            x[c * 49..(c + 1) * 49]
                .iter()
                .map(|&v| v as f64)
                .sum::<f64>()
                / 49.0
        })
        .collect();
    assert_close(&out[0], &want, 1e-6);
}

/// A small residual network: a stem conv (3 input channels: read plain),
/// ReLU, max pooling, a bottleneck whose 1x1 (then a Clip), 3x3 (stride 2)
/// and 1x1 convs have biases and whose residual is a strided 1x1 conv, the
/// residual add, a product with a scalar and ReLU, a conv whose 6 output
/// channels do not divide into blocks of 4 (then ReLU), global average
/// pooling, Flatten and a Gemm.
fn residual_block_graph() -> Graph {
    let conv = |g: Graph,
                name: &str,
                input: &str,
                output: &str,
                ws: [u64; 4],
                stride: i64,
                pad: i64,
                seed: u64| {
        g.init(init(&format!("{name}.weight"), &ws, &random(&ws, seed)))
            .init(init(
                &format!("{name}.bias"),
                &[ws[0]],
                &random(&[ws[0]], seed + 1),
            ))
            .node(node(
                "Conv",
                name,
                &[input, &format!("{name}.weight"), &format!("{name}.bias")],
                &[output],
                vec![
                    ints("kernel_shape", &[ws[2] as i64, ws[3] as i64]),
                    ints("strides", &[stride, stride]),
                    ints("pads", &[pad; 4]),
                ],
            ))
    };
    let mut g = Graph::new(&[("data", &[1, 3, 12, 12])]);
    g = conv(g, "stem", "data", "s", [8, 3, 3, 3], 1, 1, 100);
    g = g
        .node(node("Relu", "stem.relu", &["s"], &["sr"], vec![]))
        .node(node(
            "MaxPool",
            "pool",
            &["sr"],
            &["p"],
            vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
        ));
    g = conv(g, "a", "p", "a", [4, 8, 1, 1], 1, 0, 110);
    g = g
        .init(init("lo", &[], &[0.0]))
        .init(init("hi", &[], &[0.5]))
        .node(node("Clip", "a.clip", &["a", "lo", "hi"], &["ar"], vec![]));
    g = conv(g, "b", "ar", "b", [4, 4, 3, 3], 2, 1, 120);
    g = g.node(node("Relu", "b.relu", &["b"], &["br"], vec![]));
    g = conv(g, "c", "br", "c", [16, 4, 1, 1], 1, 0, 130);
    g = conv(g, "down", "p", "d", [16, 8, 1, 1], 2, 0, 140);
    g = g
        .init(init("half", &[], &[0.5]))
        .node(node("Add", "add", &["c", "d"], &["sum"], vec![]))
        .node(node("Mul", "scale", &["sum", "half"], &["scaled"], vec![]))
        .node(node("Relu", "relu", &["scaled"], &["r"], vec![]));
    g = conv(g, "odd", "r", "o", [6, 16, 3, 3], 1, 1, 150);
    g.node(node("Relu", "odd.relu", &["o"], &["or"], vec![]))
        .node(node("GlobalAveragePool", "gap", &["or"], &["g"], vec![]))
        .node(node("Flatten", "flatten", &["g"], &["f"], vec![]))
        .init(init("fc.weight", &[5, 6], &random(&[5, 6], 300)))
        .node(node(
            "Gemm",
            "fc",
            &["f", "fc.weight"],
            &["y"],
            vec![int("transB", 1)],
        ))
        .output("y")
        .output("r")
}

#[test]
fn blocked_activations_compute_what_the_plain_ones_do() {
    let g = residual_block_graph();
    let x = tensor(&[1, 3, 12, 12], random(&[1, 3, 12, 12], 1));
    let (plain, want) = run(&g, vec![x.clone()]);
    assert!(!plain.module_text.contains("fl:"), "{}", plain.module_text);
    let want: Vec<Vec<f64>> = want
        .iter()
        .map(|o| o.iter().map(|&v| v as f64).collect())
        .collect();
    for b in [4, 8] {
        let options = ImportOptions {
            layout: crate::ActivationLayout::Blocked(b),
            ..ImportOptions::default()
        };
        let (blocked, got) = run_with(&g, vec![x.clone()], &options);
        let text = &blocked.module_text;
        // The outputs keep their ONNX shapes.
        assert_eq!(blocked.outputs, plain.outputs);
        for (got, want) in got.iter().zip(&want) {
            assert_close(got, want, 1e-5);
        }
        let has = |needle: String| text.contains(&needle);
        // The stem reads the plain input and writes blocks; the weights are
        // repacked, the input's channels unblocked where it is plain.
        let (c8, c16) = (8 / b, 16 / b);
        assert!(
            has(format!(
                "compute \"stem\" (n: 1, fb: {c8}, h: 12, w: 12, fl: {b}) reduce sum (c: 3, r: 3, s: 3)"
            )),
            "{text}"
        );
        assert!(
            has(format!(
                "weight \"stem.weight.nchw{b}c\" : tensor<{c8}x3x3x3x{b}xf32>"
            )),
            "{text}"
        );
        assert_eq!(
            has(format!(
                "weight \"c.weight.nchw{b}c\" : tensor<{c16}x1x1x1x{b}x{b}xf32>"
            )),
            b == 4,
            "{text}"
        );
        // Pooling, ReLU, the residual add and the product with a scalar keep
        // the blocks; so does the Clip where its input is blocked.
        assert!(
            has(format!(
                "compute \"pool\" (n: 1, c: {c8}, h: 6, w: 6, cl: {b})"
            )),
            "{text}"
        );
        for op in ["add", "scale"] {
            assert!(
                has(format!(
                    "compute \"{op}\" (d0: 1, d1: {c16}, d2: 3, d3: 3, d4: {b})"
                )),
                "{text}"
            );
        }
        assert_eq!(
            has("compute \"a.clip\" (d0: 1, d1: 1, d2: 6, d3: 6, d4: 4)".to_string()),
            b == 4,
            "{text}"
        );
        // Six channels do not divide into blocks: that conv, its ReLU and
        // the pooling after it stay plain. The returned `r` is unblocked
        // once (the conv after it reads the plain copy too); in blocks of 8,
        // so is the pooled `p`, which the plain 4-channel conv `a` reads.
        assert!(
            text.contains("compute \"odd\" (n: 1, f: 6, h: 3, w: 3)"),
            "{text}"
        );
        assert_eq!(
            text.matches(".to_nchw\"").count(),
            if b == 4 { 1 } else { 2 },
            "{text}"
        );
    }
}

#[test]
fn gemm_with_transposed_b_alpha_beta_and_bias() {
    let (a, b, c) = (random(&[3, 5], 51), random(&[4, 5], 52), random(&[4], 53));
    let g = Graph::new(&[("a", &[3, 5])])
        .init(init("fc.weight", &[4, 5], &b))
        .init(init("fc.bias", &[4], &c))
        .node(node(
            "Gemm",
            "fc",
            &["a", "fc.weight", "fc.bias"],
            &["y"],
            vec![int("transB", 1), float("alpha", 0.5), float("beta", 2.0)],
        ))
        .output("y");
    let (_, out) = run(&g, vec![tensor(&[3, 5], a.clone())]);
    let want: Vec<f64> = indices(&[3, 4])
        .iter()
        .map(|o| {
            0.5 * (0..5)
                .map(|k| a[o[0] as usize * 5 + k] as f64 * b[o[1] as usize * 5 + k] as f64)
                .sum::<f64>()
                + 2.0 * c[o[1] as usize] as f64
        })
        .collect();
    assert_close(&out[0], &want, 1e-6);
}

#[test]
fn matmul_batched_with_broadcast_batch_dimensions() {
    let (sa, sb) = ([2u64, 1, 3, 4], [3u64, 4, 2]);
    let (a, b) = (random(&sa, 61), random(&sb, 62));
    let g = Graph::new(&[("a", &[2, 1, 3, 4]), ("b", &[3, 4, 2])])
        .node(node("MatMul", "mm", &["a", "b"], &["y"], vec![]))
        .output("y");
    let (imported, out) = run(&g, vec![tensor(&sa, a.clone()), tensor(&sb, b.clone())]);
    let os = [2u64, 3, 3, 2];
    assert_eq!(imported.outputs[0].1, os);
    let want: Vec<f64> = indices(&os)
        .iter()
        .map(|o| {
            (0..4)
                .map(|k| {
                    a[at(&sa, &[o[0], 0, o[2], k]).unwrap()] as f64
                        * b[at(&sb, &[o[1], k, o[3]]).unwrap()] as f64
                })
                .sum()
        })
        .collect();
    assert_close(&out[0], &want, 1e-6);
    // A vector on the left: [4] x [3, 4, 2] -> [3, 2].
    let g = Graph::new(&[("a", &[4]), ("b", &[3, 4, 2])])
        .node(node("MatMul", "mv", &["a", "b"], &["y"], vec![]))
        .output("y");
    let (imported, out) = run(
        &g,
        vec![tensor(&[4], a[..4].to_vec()), tensor(&sb, b.clone())],
    );
    assert_eq!(imported.outputs[0].1, [3, 2]);
    let want: Vec<f64> = indices(&[3, 2])
        .iter()
        .map(|o| {
            (0..4)
                .map(|k| a[k as usize] as f64 * b[at(&sb, &[o[0], k, o[1]]).unwrap()] as f64)
                .sum()
        })
        .collect();
    assert_close(&out[0], &want, 1e-6);
}

fn softmax_ref(x: &[f32], rows: usize, len: usize) -> Vec<f64> {
    (0..rows)
        .flat_map(|r| {
            let row: Vec<f64> = x[r * len..(r + 1) * len]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
            row.into_iter().map(move |v| (v - m).exp() / s)
        })
        .collect()
}

#[test]
fn softmax_last_axis_and_old_opset_flattening() {
    let xs = [2u64, 3, 5];
    let x: Vec<f32> = random(&xs, 71).iter().map(|v| v * 4.0).collect();
    let g = Graph::new(&[("x", &[2, 3, 5])])
        .node(node("Softmax", "sm", &["x"], &["y"], vec![]))
        .output("y");
    let (imported, out) = run(&g, vec![tensor(&xs, x.clone())]);
    assert_eq!(imported.compute_ops, 3);
    assert_close(&out[0], &softmax_ref(&x, 6, 5), 1e-6);
    // Opset 11: axis 1 by default, over the flattened trailing dimensions.
    let mut g = Graph::new(&[("x", &[2, 3, 5])])
        .node(node("Softmax", "sm", &["x"], &["y"], vec![]))
        .output("y");
    g.opset = 11;
    let (_, out) = run(&g, vec![tensor(&xs, x.clone())]);
    assert_close(&out[0], &softmax_ref(&x, 2, 15), 1e-6);
}

#[test]
fn layernorm_over_the_last_axis() {
    let xs = [2u64, 3, 8];
    let (x, scale, bias) = (random(&xs, 81), random(&[8], 82), random(&[8], 83));
    let g = Graph::new(&[("x", &[2, 3, 8])])
        .init(init("ln.weight", &[8], &scale))
        .init(init("ln.bias", &[8], &bias))
        .node(node(
            "LayerNormalization",
            "ln",
            &["x", "ln.weight", "ln.bias"],
            &["y"],
            vec![float("epsilon", 1e-5)],
        ))
        .output("y");
    let (_, out) = run(&g, vec![tensor(&xs, x.clone())]);
    let want: Vec<f64> = (0..6)
        .flat_map(|r| {
            let row: Vec<f64> = x[r * 8..(r + 1) * 8].iter().map(|&v| v as f64).collect();
            let mean = row.iter().sum::<f64>() / 8.0;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 8.0;
            let (scale, bias) = (scale.clone(), bias.clone());
            row.into_iter().enumerate().map(move |(i, v)| {
                (v - mean) / (var + 1e-5).sqrt() * scale[i] as f64 + bias[i] as f64
            })
        })
        .collect();
    assert_close(&out[0], &want, 1e-5);
}

#[test]
fn layout_ops_copy_in_row_major_order() {
    let xs = [2u64, 3, 2, 2];
    let x = random(&xs, 91);
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    // Flatten, Reshape with 0 and -1, a reshape whose boundaries do not
    // nest (6x4 -> 4x6), Transpose, Unsqueeze/Squeeze.
    let g = Graph::new(&[("x", &[2, 3, 2, 2])])
        .init(init_i64("shape1", &[0, -1, 4]))
        .init(init_i64("shape2", &[4, 6]))
        .init(init_i64("axes", &[0]))
        .node(node(
            "Flatten",
            "flat",
            &["x"],
            &["f"],
            vec![int("axis", 1)],
        ))
        .node(node("Reshape", "r1", &["x", "shape1"], &["r1"], vec![]))
        .node(node("Reshape", "r2", &["r1", "shape2"], &["r2"], vec![]))
        .node(node(
            "Transpose",
            "t",
            &["r1"],
            &["t"],
            vec![ints("perm", &[0, 2, 1])],
        ))
        .node(node("Unsqueeze", "u", &["f", "axes"], &["u"], vec![]))
        .node(node("Squeeze", "s", &["u"], &["s"], vec![]))
        .output("f")
        .output("r1")
        .output("r2")
        .output("t")
        .output("s");
    let (imported, out) = run(&g, vec![tensor(&xs, x.clone())]);
    // 2x3x4 -> 4x6 has no common refinement: the exact-division copy.
    assert!(
        imported
            .module_text
            .contains("compute \"r2\" (d0: 4, d1: 6) reduce max (r1: 3, r2: 4)"),
        "{}",
        imported.module_text
    );
    let shapes: Vec<Vec<u64>> = imported.outputs.iter().map(|(_, s)| s.clone()).collect();
    assert_eq!(
        shapes,
        [
            vec![2, 12],
            vec![2, 3, 4],
            vec![4, 6],
            vec![2, 4, 3],
            vec![2, 12]
        ]
    );
    assert_close(&out[0], &xd, 0.0);
    assert_close(&out[1], &xd, 0.0);
    assert_close(&out[2], &xd, 0.0);
    let want: Vec<f64> = indices(&[2, 4, 3])
        .iter()
        .map(|o| xd[(o[0] * 12 + o[2] * 4 + o[1]) as usize])
        .collect();
    assert_close(&out[3], &want, 0.0);
    assert_close(&out[4], &xd, 0.0);
}

#[test]
fn concat_and_elementwise_activations() {
    let (x, y) = (random(&[2, 3], 101), random(&[2, 2], 102));
    let g = Graph::new(&[("x", &[2, 3]), ("y", &[2, 2])])
        .node(node(
            "Concat",
            "cat",
            &["x", "y"],
            &["c"],
            vec![int("axis", 1)],
        ))
        .node(node("Gelu", "gelu", &["c"], &["g"], vec![]))
        .node(node("Sigmoid", "sig", &["g"], &["s"], vec![]))
        .node(node("Tanh", "tanh", &["s"], &["t"], vec![]))
        .output("c")
        .output("t");
    let (_, out) = run(
        &g,
        vec![tensor(&[2, 3], x.clone()), tensor(&[2, 2], y.clone())],
    );
    let cat: Vec<f64> = (0..2)
        .flat_map(|r| {
            x[r * 3..r * 3 + 3]
                .iter()
                .chain(&y[r * 2..r * 2 + 2])
                .map(|&v| v as f64)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_close(&out[0], &cat, 0.0);
    let erf = |v: f64| tilec_erf(v);
    let want: Vec<f64> = cat
        .iter()
        .map(|&v| (1.0 / (1.0 + (-(0.5 * v * (1.0 + erf(v / 2f64.sqrt())))).exp())).tanh())
        .collect();
    assert_close(&out[1], &want, 1e-6);
}

/// erf by its series (|x| is small here), so that the test does not use
/// the interpreter's own function.
fn tilec_erf(x: f64) -> f64 {
    let mut sum = 0.0;
    let mut term = x;
    for n in 0..60 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

// ---- errors ------------------------------------------------------------------

fn small_conv() -> Graph {
    Graph::new(&[("x", &[1, 1, 4, 4])])
        .init(init("w", &[1, 1, 3, 3], &[0.0; 9]))
        .node(node("Conv", "conv0", &["x", "w"], &["y"], vec![]))
        .output("y")
}

#[test]
fn truncated_bytes_are_an_error() {
    let bytes = small_conv().bytes();
    let e = import_model(&bytes[..bytes.len() - 7], &ImportOptions::default()).unwrap_err();
    assert!(e.message.starts_with("not a readable ONNX model"), "{e}");
    assert!(e.hint.unwrap().contains("truncated"));
    let e = import_model(b"certainly not protobuf", &ImportOptions::default()).unwrap_err();
    assert!(e.message.starts_with("not a readable ONNX model"), "{e}");
}

#[test]
fn an_unsupported_op_names_the_node_and_the_op() {
    let g = small_conv()
        .node(node("NonMaxSuppression", "nms", &["y"], &["z"], vec![]))
        .output("z");
    let e = import_err(&g, &ImportOptions::default());
    assert_eq!(
        (e.node.as_deref(), e.op.as_deref()),
        (Some("nms"), Some("NonMaxSuppression"))
    );
    assert_eq!(
        e.to_string().lines().next().unwrap(),
        "node `nms` (NonMaxSuppression): unsupported operator NonMaxSuppression"
    );
    // An unnamed node is named by its op and position.
    let g = small_conv()
        .node(node("Einsum", "", &["y"], &["z"], vec![]))
        .output("z");
    assert_eq!(
        import_err(&g, &ImportOptions::default()).node.as_deref(),
        Some("Einsum_1")
    );
}

#[test]
fn an_unsupported_attribute_or_value_names_the_attribute() {
    let mut g = small_conv();
    g.nodes[0]
        .attribute
        .push(string("auto_pad", "SAME_SIDEWAYS"));
    let e = import_err(&g, &ImportOptions::default());
    assert_eq!(
        (e.node.as_deref(), e.op.as_deref(), e.attribute.as_deref()),
        (Some("conv0"), Some("Conv"), Some("auto_pad"))
    );
    assert!(e.message.contains("SAME_SIDEWAYS"), "{e}");
    let mut g = small_conv();
    g.nodes[0].attribute.push(int("fancy", 1));
    let e = import_err(&g, &ImportOptions::default());
    assert_eq!(e.attribute.as_deref(), Some("fancy"));
    assert_eq!(e.message, "unsupported attribute `fancy` of Conv");
    let g = Graph::new(&[("x", &[2, 2])])
        .node(node(
            "Gemm",
            "fc",
            &["x", "x"],
            &["y"],
            vec![int("transA", 2)],
        ))
        .output("y");
    let e = import_err(&g, &ImportOptions::default());
    assert_eq!(e.attribute.as_deref(), Some("transA"));
    assert_eq!(e.hint.as_deref(), Some("tilec supports transA = 0 or 1"));
}

#[test]
fn a_dynamic_dimension_needs_a_value() {
    let g = Graph::new(&[("x", &[-1, 1, 4, 4])])
        .init(init("w", &[1, 1, 3, 3], &[0.0; 9]))
        .node(node("Conv", "conv0", &["x", "w"], &["y"], vec![]))
        .output("y");
    let e = import_err(&g, &ImportOptions::default());
    assert_eq!(
        e.message,
        "graph input `x` has a dynamic dimension 0 (`N`) without a value"
    );
    assert_eq!(
        e.hint.as_deref(),
        Some("give the input's whole shape, e.g. `--input-shape x=1x1x4x4`")
    );
    let mut options = ImportOptions::default();
    options.input_shapes.insert("x".into(), vec![3, 1, 4, 4]);
    let imported = import_model(&g.bytes(), &options).unwrap();
    assert_eq!(imported.outputs[0].1, [3, 1, 2, 2]);
    // A shape that contradicts the model, and one for an input that does not exist.
    options.input_shapes.insert("x".into(), vec![3, 2, 4, 4]);
    assert!(import_err(&g, &options).message.contains("fixes it to 1"));
    options.input_shapes.clear();
    options.input_shapes.insert("X".into(), vec![1, 1, 4, 4]);
    assert_eq!(
        import_err(&g, &options).hint.as_deref(),
        Some("did you mean `x`? the inputs are: x")
    );
}

#[test]
fn names_are_sanitised_and_unique() {
    let g = Graph::new(&[("input:0", &[2]), ("input/0", &[2])])
        .node(node(
            "Add",
            "add/1",
            &["input:0", "input/0"],
            &["out.0"],
            vec![],
        ))
        .output("out.0");
    let (imported, out) = run(
        &g,
        vec![tensor(&[2], vec![1.0, 2.0]), tensor(&[2], vec![3.0, 4.0])],
    );
    let params: Vec<&str> = imported.inputs.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(params, ["input_0", "input_0_1"]);
    assert!(
        imported.module_text.starts_with(
            "func @test_net(%input_0: tensor<2xf32>, %input_0_1: tensor<2xf32>) -> tensor<2xf32>"
        ),
        "{}",
        imported.module_text
    );
    assert!(imported.module_text.contains("compute \"add/1\""));
    assert_close(&out[0], &[4.0, 6.0], 0.0);
}

#[test]
fn the_same_model_imports_to_the_same_text() {
    let g = small_conv();
    let a = import_model(&g.bytes(), &ImportOptions::default()).unwrap();
    let b = import_model(&g.bytes(), &ImportOptions::default()).unwrap();
    assert_eq!(a.module_text, b.module_text);
}

#[test]
fn weight_keys_are_unique_and_a_shared_constant_is_one_weight() {
    let ones = [1.0f32; 4];
    // An initializer whose name is the key a folded batch norm derives.
    let g = Graph::new(&[("x", &[1, 1, 2, 2])])
        .init(init("w", &[1, 1, 1, 1], &[3.0]))
        .init(init("s", &[1], &[2.0]))
        .init(init("z", &[1], &[0.0]))
        .init(init("o", &[1], &[1.0]))
        .init(init("c.weight.folded", &[1, 1, 2, 2], &ones))
        .node(node("Conv", "c", &["x", "w"], &["c"], vec![]))
        .node(node(
            "BatchNormalization",
            "bn",
            &["c", "s", "z", "z", "o"],
            &["b"],
            vec![float("epsilon", 0.0)],
        ))
        .node(node(
            "Add",
            "add",
            &["b", "c.weight.folded"],
            &["y"],
            vec![],
        ))
        .node(node(
            "Mul",
            "mul",
            &["y", "c.weight.folded"],
            &["y2"],
            vec![],
        ))
        .output("y2");
    let (imported, out) = run(&g, vec![tensor(&[1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0])]);
    let keys: Vec<&str> = imported.weights.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        ["c.weight.folded", "c.bias.folded", "c.weight.folded_1"]
    );
    assert_close(&out[0], &[7.0, 13.0, 19.0, 25.0], 0.0);
}

/// Folded constants are made and dropped node by node; each must stay a
/// weight of its own (a constant's address was once its identity, and a
/// later fold reused it).
#[test]
fn two_folded_batchnorms_keep_their_own_weights() {
    let (xs, w1s, w2s) = ([1u64, 2, 5, 5], [3u64, 2, 3, 3], [4u64, 3, 1, 1]);
    let (x, w1, w2) = (random(&xs, 111), random(&w1s, 112), random(&w2s, 113));
    let bn = |name: &str, c: usize, seed: u64| {
        let s: Vec<f32> = random(&[c as u64], seed).iter().map(|v| v + 2.0).collect();
        let b = random(&[c as u64], seed + 1);
        let m = random(&[c as u64], seed + 2);
        let v: Vec<f32> = random(&[c as u64], seed + 3)
            .iter()
            .map(|v| v.abs() + 0.5)
            .collect();
        let inits = [("s", s), ("b", b), ("m", m), ("v", v)]
            .map(|(k, d)| init(&format!("{name}.{k}"), &[c as u64], &d));
        (inits, [0, 1, 2, 3].map(|i| random(&[c as u64], seed + i)))
    };
    let (bn1, _) = bn("bn1", 3, 120);
    let (bn2, _) = bn("bn2", 4, 130);
    let mut g = Graph::new(&[("x", &[1, 2, 5, 5])])
        .init(init("w1", &w1s, &w1))
        .init(init("w2", &w2s, &w2));
    for t in bn1.iter().chain(&bn2) {
        g = g.init(t.clone());
    }
    let g = g
        .node(node(
            "Conv",
            "conv1",
            &["x", "w1"],
            &["c1"],
            vec![ints("pads", &[1, 1, 1, 1])],
        ))
        .node(node(
            "BatchNormalization",
            "bn1",
            &["c1", "bn1.s", "bn1.b", "bn1.m", "bn1.v"],
            &["b1"],
            vec![],
        ))
        .node(node("Conv", "conv2", &["b1", "w2"], &["c2"], vec![]))
        .node(node(
            "BatchNormalization",
            "bn2",
            &["c2", "bn2.s", "bn2.b", "bn2.m", "bn2.v"],
            &["y"],
            vec![],
        ))
        .output("y");
    let (imported, out) = run(&g, vec![tensor(&xs, x.clone())]);
    assert_eq!(imported.weights.len(), 4);
    let values = |t: &TensorProto| t.float_data.iter().map(|&v| v as f64).collect::<Vec<f64>>();
    let apply_bn = |conv: Vec<f64>, p: &[TensorProto; 4], hw: usize| -> Vec<f64> {
        let (s, b, m, v) = (values(&p[0]), values(&p[1]), values(&p[2]), values(&p[3]));
        conv.iter()
            .enumerate()
            .map(|(i, &y)| {
                let c = i / hw;
                (y - m[c]) / (v[c] + 1e-5).sqrt() * s[c] + b[c]
            })
            .collect()
    };
    let p1 = ConvParams {
        group: 1,
        stride: [1, 1],
        pad: [1, 1],
        dilation: [1, 1],
    };
    let b1 = apply_bn(
        conv2d_ref(&x, &xs, &w1, &w1s, None, &p1, &[1, 3, 5, 5]),
        &bn1,
        25,
    );
    let b1f: Vec<f32> = b1.iter().map(|&v| v as f32).collect();
    let p2 = ConvParams {
        group: 1,
        stride: [1, 1],
        pad: [0, 0],
        dilation: [1, 1],
    };
    let want = apply_bn(
        conv2d_ref(&b1f, &[1, 3, 5, 5], &w2, &w2s, None, &p2, &[1, 4, 5, 5]),
        &bn2,
        25,
    );
    assert_close(&out[0], &want, 1e-5);
}

#[test]
fn constant_of_shape_weights_and_a_two_input_sum() {
    // The onnx wheel's `light` models make their weights this way: a
    // constant shape, ConstantOfShape with one value.
    let xs = [1u64, 2, 3];
    let x = random(&xs, 41);
    let value = AttributeProto {
        name: "value".into(),
        t: Some(init("v", &[1], &[0.25])),
        r#type: attribute_type::TENSOR,
        ..Default::default()
    };
    let g = Graph::new(&[("x", &[1, 2, 3])])
        .init(init_i64("shape", &[1, 2, 3]))
        .node(node(
            "ConstantOfShape",
            "fill",
            &["shape"],
            &["w"],
            vec![value],
        ))
        .node(node("ConstantOfShape", "zeros", &["shape"], &["z"], vec![]))
        .node(node("Mul", "scale", &["x", "w"], &["a"], vec![]))
        .node(node("Sum", "sum", &["a", "z"], &["b"], vec![]))
        .node(node("Sum", "twice", &["b", "x"], &["y"], vec![]))
        .output("y");
    let (_, out) = run(&g, vec![tensor(&xs, x.clone())]);
    let want: Vec<f64> = x
        .iter()
        .map(|&v| (v * 0.25 + 0.0) as f64 + v as f64)
        .collect();
    assert_close(&out[0], &want, 1e-6);
    // A run-time shape is refused, naming the node.
    let g = Graph::new(&[("x", &[1, 2, 3])])
        .node(node("Shape", "shape_of", &["x"], &["s"], vec![]))
        .node(node("Relu", "r", &["x"], &["rx"], vec![]))
        .node(node("ConstantOfShape", "bad", &["rx"], &["y"], vec![]))
        .output("y");
    let e = import_err(&g, &ImportOptions::default());
    assert!(
        e.to_string()
            .contains("ConstantOfShape of a run-time shape"),
        "{e}"
    );
}

#[test]
fn lrn_across_channels() {
    let xs = [1u64, 5, 2, 2];
    let x = random(&xs, 43);
    let (size, alpha, beta, bias) = (3i64, 0.5f32, 0.75f32, 2.0f32);
    let g = Graph::new(&[("x", &[1, 5, 2, 2])])
        .node(node(
            "LRN",
            "norm",
            &["x"],
            &["y"],
            vec![
                int("size", size),
                float("alpha", alpha),
                float("beta", beta),
                float("bias", bias),
            ],
        ))
        .output("y");
    let (_, out) = run(&g, vec![tensor(&xs, x.clone())]);
    let mut want = Vec::new();
    for c in 0..5i64 {
        for p in 0..4usize {
            let lo = (c - (size - 1) / 2).max(0);
            let hi = (c + size / 2).min(4);
            let sq: f64 = (lo..=hi)
                .map(|i| (x[i as usize * 4 + p] as f64).powi(2))
                .sum();
            want.push(
                x[c as usize * 4 + p] as f64
                    / (bias as f64 + alpha as f64 / size as f64 * sq).powf(beta as f64),
            );
        }
    }
    assert_close(&out[0], &want, 1e-5);
}
