//! Level 0: functions of compute ops. Each family builds the shapes and
//! index expressions of one kind of operator so that reads are in bounds
//! (or padded) and the output index is one-to-one; the scalar code of the
//! body and epilogue is random but well typed.

use super::{Config, Elem, Scalar, TensorVal, literal, tensor_type};
use crate::choices::G;

#[derive(Clone, Debug)]
pub struct Axis {
    pub name: String,
    pub extent: u64,
}

#[derive(Clone, Debug)]
pub struct Read {
    /// Binding name, without `%`.
    pub name: String,
    pub tensor: String,
    pub elem: Elem,
    pub idx: Vec<String>,
    pub pad: Option<String>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// The product of the reads (GEMM, convolution).
    Product,
    /// The first read as is (pooling, reductions, copies).
    Identity,
    /// Random scalar code over the reads.
    Random,
}

#[derive(Clone, Debug)]
pub enum EpilogueKind {
    /// A read of a tensor indexed by spatial axes, added, then maybe an activation.
    Bias(Read),
    /// Multiplied by a constant (average pooling, means).
    Scale(String),
    /// An activation only.
    Activation,
    /// Random scalar code over the accumulator and reads.
    Random(Vec<Read>),
}

#[derive(Clone, Debug)]
pub struct Compute {
    pub result: String,
    pub label: Option<String>,
    pub spatial: Vec<Axis>,
    pub reduce: Option<(&'static str, Vec<Axis>)>,
    pub reads: Vec<Read>,
    pub out_dims: Vec<u64>,
    pub out_elem: Elem,
    pub out_index: Vec<String>,
    pub acc: Elem,
    pub body: BodyKind,
    pub epilogue: Option<EpilogueKind>,
    pub schedule: Option<String>,
}

impl Compute {
    pub fn axes(&self) -> impl Iterator<Item = &Axis> {
        self.spatial
            .iter()
            .chain(self.reduce.iter().flat_map(|(_, r)| r.iter()))
    }

    pub fn all_reads(&self) -> Vec<&Read> {
        let mut v: Vec<&Read> = self.reads.iter().collect();
        match &self.epilogue {
            Some(EpilogueKind::Bias(r)) => v.push(r),
            Some(EpilogueKind::Random(rs)) => v.extend(rs.iter()),
            _ => {}
        }
        v
    }
}

/// A function being generated: its parameters and the tensors defined so far.
pub struct Func {
    pub params: Vec<TensorVal>,
    pub values: Vec<TensorVal>,
    next: usize,
}

impl Func {
    pub fn new() -> Func {
        Func {
            params: Vec::new(),
            values: Vec::new(),
            next: 0,
        }
    }

    pub fn param(&mut self, base: &str, dims: Vec<u64>, elem: Elem) -> String {
        let name = format!("%{base}{}", self.next);
        self.next += 1;
        self.params.push(TensorVal {
            name: name.clone(),
            dims,
            elem,
        });
        name
    }

    pub fn result_name(&mut self, base: &str) -> String {
        let name = format!("%{base}{}", self.next);
        self.next += 1;
        name
    }
}

const SPATIAL_NAMES: [&str; 6] = ["i", "j", "l", "m", "p", "q"];
const REDUCE_NAMES: [&str; 4] = ["k", "r", "s", "t"];
const READ_NAMES: [&str; 8] = ["a", "b", "c", "x", "w", "v", "u", "z"];

fn element_count(dims: &[u64]) -> u64 {
    dims.iter().fold(1u64, |a, &d| a.saturating_mul(d))
}

/// Extents for `n` axes, each at most `cap`, whose product stays under `max`.
fn extents(g: &mut G, n: usize, cap: u64, max: u64) -> Vec<u64> {
    let mut dims: Vec<u64> = (0..n)
        .map(|_| if g.chance(1, 5) { 1 } else { g.int(1, cap) })
        .collect();
    while element_count(&dims) > max {
        let i = dims
            .iter()
            .enumerate()
            .max_by_key(|(_, d)| **d)
            .map(|(i, _)| i)
            .unwrap_or(0);
        dims[i] = (dims[i] / 2).max(1);
    }
    dims
}

fn elem(g: &mut G, cfg: &Config) -> Elem {
    if cfg.mixed_types && g.chance(1, 4) {
        g.pick(&[Elem::F16, Elem::BF16, Elem::I32, Elem::I8, Elem::U8])
    } else {
        Elem::F32
    }
}

fn label(g: &mut G) -> Option<String> {
    if g.chance(1, 2) {
        return None;
    }
    Some(
        g.pick(&[
            "gemm", "conv", "pool", "op", "a b", "x\\\"y", "tab\\t", "ünï", "",
        ])
        .to_string(),
    )
}

/// One compute op of a random family, reading parameters (new ones) or
/// earlier results.
pub fn compute(g: &mut G, cfg: &Config, f: &mut Func) -> Compute {
    let family = g.weighted(&[
        4,
        3,
        4,
        1,
        4,
        1,
        2,
        if f.values.is_empty() { 0 } else { 4 },
        1,
    ]);
    let mut c = match family {
        0 => elementwise(g, cfg, f, None),
        1 => reduction(g, cfg, f, None),
        2 => gemm(g, cfg, f),
        3 => gemv(g, cfg, f),
        4 => conv(g, cfg, f),
        5 => conv_transposed(g, cfg, f),
        6 => pool(g, cfg, f),
        7 => {
            let prev = g.pick(&f.values);
            if g.chance(1, 2) {
                elementwise(g, cfg, f, Some(prev))
            } else {
                reduction(g, cfg, f, Some(prev))
            }
        }
        _ => scan(g, cfg, f),
    };
    c.label = label(g);
    if cfg.invalid > 0 {
        break_rules(g, cfg, &mut c);
    }
    if g.chance(cfg.schedule, 100) {
        c.schedule = Some(
            match cfg.schedule_target.and_then(super::schedule::target) {
                Some(t) => super::schedule::on_target(g, &c, t, cfg.invalid),
                None => super::schedule::for_compute(g, &c, cfg.invalid),
            },
        );
    }
    c
}

fn read(name: &str, tensor: &str, elem: Elem, idx: Vec<String>, pad: Option<&str>) -> Read {
    Read {
        name: name.to_string(),
        tensor: tensor.to_string(),
        elem,
        idx,
        pad: pad.map(str::to_string),
    }
}

fn pad_of(elem: Elem) -> &'static str {
    if elem.is_float() { "0.0" } else { "0" }
}

fn elementwise(g: &mut G, cfg: &Config, f: &mut Func, from: Option<TensorVal>) -> Compute {
    let dims = match &from {
        Some(t) => t.dims.clone(),
        None => {
            let rank = g.weighted(&[1, 3, 4, 2]);
            extents(g, rank, cfg.max_extent, cfg.max_elems)
        }
    };
    let axes: Vec<Axis> = dims
        .iter()
        .enumerate()
        .map(|(i, &e)| Axis {
            name: SPATIAL_NAMES[i].to_string(),
            extent: e,
        })
        .collect();
    let out_elem = elem(g, cfg);
    let mut reads = Vec::new();
    if let Some(t) = &from {
        reads.push(read(
            "a",
            &t.name,
            t.elem,
            axes.iter().map(|a| a.name.clone()).collect(),
            None,
        ));
    }
    let n = g.int(if from.is_some() { 0 } else { 1 }, 3);
    for _ in 0..n {
        let name = READ_NAMES[reads.len()];
        let e = if g.chance(2, 3) {
            out_elem
        } else {
            elem(g, cfg)
        };
        let kind = if axes.is_empty() {
            0
        } else {
            g.weighted(&[4, 3, 2, 2, 2, 1, 1])
        };
        let r = match kind {
            // Same shape.
            0 => {
                let t = f.param("x", dims.clone(), e);
                read(
                    name,
                    &t,
                    e,
                    axes.iter().map(|a| a.name.clone()).collect(),
                    None,
                )
            }
            // Broadcast: a subset of the axes.
            1 => {
                let keep: Vec<&Axis> = axes.iter().filter(|_| g.chance(1, 2)).collect();
                let t = f.param("w", keep.iter().map(|a| a.extent).collect(), e);
                read(
                    name,
                    &t,
                    e,
                    keep.iter().map(|a| a.name.clone()).collect(),
                    None,
                )
            }
            // Transposed.
            2 => {
                let mut perm: Vec<&Axis> = axes.iter().collect();
                g.shuffle(&mut perm);
                let t = f.param("t", perm.iter().map(|a| a.extent).collect(), e);
                read(
                    name,
                    &t,
                    e,
                    perm.iter().map(|a| a.name.clone()).collect(),
                    None,
                )
            }
            // Shifted, padded.
            3 => {
                let k = g.index(axes.len());
                let c = g.pick(&[-2i64, -1, 1, 2, 3]);
                let t = f.param("x", dims.clone(), e);
                let idx = axes
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        if i == k {
                            shifted(&a.name, c)
                        } else {
                            a.name.clone()
                        }
                    })
                    .collect();
                read(name, &t, e, idx, Some(pad_of(e)))
            }
            // Strided, in bounds.
            4 => {
                let k = g.index(axes.len());
                let s = g.int(2, 3);
                let c = g.int(0, 2);
                let extra = g.int(0, 2);
                let tdims: Vec<u64> = axes
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        if i == k {
                            (a.extent - 1) * s + c + 1 + extra
                        } else {
                            a.extent
                        }
                    })
                    .collect();
                let t = f.param("x", tdims, e);
                let idx = axes
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        if i == k {
                            format!("{} * {s}{}", a.name, plus(c as i64))
                        } else {
                            a.name.clone()
                        }
                    })
                    .collect();
                read(name, &t, e, idx, None)
            }
            // Reversed.
            5 => {
                let k = g.index(axes.len());
                let t = f.param("x", dims.clone(), e);
                let idx = axes
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        if i == k {
                            format!("{} - {}", a.extent - 1, a.name)
                        } else {
                            a.name.clone()
                        }
                    })
                    .collect();
                read(name, &t, e, idx, None)
            }
            // A constant index in an extra dimension.
            _ => {
                let d = g.int(1, 4);
                let at = g.int(0, d - 1);
                let mut tdims = dims.clone();
                tdims.push(d);
                let t = f.param("x", tdims, e);
                let mut idx: Vec<String> = axes.iter().map(|a| a.name.clone()).collect();
                idx.push(at.to_string());
                read(name, &t, e, idx, None)
            }
        };
        reads.push(r);
    }
    let result = f.result_name("y");
    let out_index = axes.iter().map(|a| a.name.clone()).collect();
    let epilogue = None;
    Compute {
        result,
        label: None,
        spatial: axes,
        reduce: None,
        reads,
        out_dims: dims,
        out_elem,
        out_index,
        acc: out_elem,
        body: BodyKind::Random,
        epilogue,
        schedule: None,
    }
}

fn shifted(axis: &str, c: i64) -> String {
    format!("{axis}{}", plus(c))
}

/// ` + c`, ` - c`, or nothing for 0.
fn plus(c: i64) -> String {
    match c {
        0 => String::new(),
        c if c > 0 => format!(" + {c}"),
        c => format!(" - {}", -c),
    }
}

fn combiner(g: &mut G) -> &'static str {
    g.pick(&["sum", "sum", "max", "min"])
}

fn reduction(g: &mut G, cfg: &Config, f: &mut Func, from: Option<TensorVal>) -> Compute {
    let (all, input, input_elem) = match &from {
        Some(t) if !t.dims.is_empty() => (t.dims.clone(), t.name.clone(), t.elem),
        _ => {
            let rank = g.int(1, 3) as usize;
            let dims = extents(g, rank, cfg.max_extent, cfg.max_elems);
            let e = elem(g, cfg);
            let name = f.param("x", dims.clone(), e);
            (dims, name, e)
        }
    };
    // The last `nr` dimensions are reduced, the others kept (in a random order).
    let nr = g.int(1, all.len().min(REDUCE_NAMES.len()) as u64) as usize;
    let ns = (all.len() - nr).min(SPATIAL_NAMES.len());
    let all = &all[all.len() - nr - ns..];
    let spatial: Vec<Axis> = (0..ns)
        .map(|i| Axis {
            name: SPATIAL_NAMES[i].to_string(),
            extent: all[i],
        })
        .collect();
    let reduce: Vec<Axis> = (0..nr)
        .map(|i| Axis {
            name: REDUCE_NAMES[i].to_string(),
            extent: all[ns + i],
        })
        .collect();
    let idx: Vec<String> = spatial
        .iter()
        .chain(&reduce)
        .map(|a| a.name.clone())
        .collect();
    let mut reads = vec![read("a", &input, input_elem, idx, None)];
    if !spatial.is_empty() && g.chance(1, 3) {
        let e = input_elem;
        let t = f.param("m", spatial.iter().map(|a| a.extent).collect(), e);
        reads.push(read(
            "b",
            &t,
            e,
            spatial.iter().map(|a| a.name.clone()).collect(),
            None,
        ));
    }
    let acc = if input_elem.is_byte() {
        Elem::I32
    } else if g.chance(1, 5) {
        elem(g, cfg)
    } else {
        input_elem
    };
    let out_elem = if g.chance(1, 4) { elem(g, cfg) } else { acc };
    let epilogue = if out_elem != acc || g.chance(1, 2) {
        Some(match g.index(3) {
            0 => EpilogueKind::Scale(literal(g, acc, false)),
            1 => EpilogueKind::Activation,
            _ => EpilogueKind::Random(Vec::new()),
        })
    } else {
        None
    };
    let mut out_index: Vec<String> = spatial.iter().map(|a| a.name.clone()).collect();
    let mut out_dims: Vec<u64> = spatial.iter().map(|a| a.extent).collect();
    if out_index.len() > 1 && g.chance(1, 4) {
        out_index.reverse();
        out_dims.reverse();
    }
    let body = if g.chance(1, 2) {
        BodyKind::Identity
    } else {
        BodyKind::Random
    };
    let result = f.result_name("r");
    Compute {
        result,
        label: None,
        spatial,
        reduce: Some((combiner(g), reduce)),
        reads,
        out_dims,
        out_elem,
        out_index,
        acc,
        body,
        epilogue,
        schedule: None,
    }
}

/// Element types of a product: inputs, accumulator, output.
fn product_types(g: &mut G, cfg: &Config) -> (Elem, Elem, Elem) {
    if !cfg.mixed_types {
        return (Elem::F32, Elem::F32, Elem::F32);
    }
    match g.weighted(&[6, 2, 1, 2, 1, 1]) {
        0 => (Elem::F32, Elem::F32, Elem::F32),
        1 => (Elem::F16, Elem::F32, g.pick(&[Elem::F16, Elem::F32])),
        2 => (Elem::BF16, Elem::F32, g.pick(&[Elem::BF16, Elem::F32])),
        3 => (Elem::I8, Elem::I32, Elem::I32),
        4 => (Elem::U8, Elem::I32, g.pick(&[Elem::I32, Elem::U8])),
        _ => (Elem::F16, Elem::F16, Elem::F16),
    }
}

fn product_epilogue(
    g: &mut G,
    f: &mut Func,
    acc: Elem,
    out: Elem,
    bias_axes: &[&Axis],
) -> Option<EpilogueKind> {
    let want = if acc != out { 1 } else { 0 };
    match g.int(want, 3) {
        0 => None,
        1 => Some(EpilogueKind::Activation),
        2 if !bias_axes.is_empty() => {
            let t = f.param("bias", bias_axes.iter().map(|a| a.extent).collect(), acc);
            Some(EpilogueKind::Bias(read(
                "bv",
                &t,
                acc,
                bias_axes.iter().map(|a| a.name.clone()).collect(),
                None,
            )))
        }
        _ => Some(EpilogueKind::Random(Vec::new())),
    }
}

fn gemm(g: &mut G, cfg: &Config, f: &mut Func) -> Compute {
    let batch = g.chance(1, 4);
    let cap = cfg.max_extent;
    let dims = extents(g, 4, cap, cfg.max_elems);
    let (bn, m, n, k) = (
        if batch { dims[0].min(4) } else { 1 },
        dims[1],
        dims[2],
        dims[3],
    );
    let (ein, acc, out) = product_types(g, cfg);
    let b_ax = Axis {
        name: "b".into(),
        extent: bn,
    };
    let i = Axis {
        name: "i".into(),
        extent: m,
    };
    let j = Axis {
        name: "j".into(),
        extent: n,
    };
    let kk = Axis {
        name: "k".into(),
        extent: k,
    };
    let bpre = |v: Vec<String>| {
        if batch {
            [vec!["b".to_string()], v].concat()
        } else {
            v
        }
    };
    let bdim = |v: Vec<u64>| if batch { [vec![bn], v].concat() } else { v };
    let a_t = g.chance(1, 4);
    let b_t = g.chance(1, 3);
    let ta = f.param("A", bdim(if a_t { vec![k, m] } else { vec![m, k] }), ein);
    let tb = f.param("B", bdim(if b_t { vec![n, k] } else { vec![k, n] }), ein);
    let ra = read(
        "a",
        &ta,
        ein,
        bpre(if a_t {
            vec!["k".into(), "i".into()]
        } else {
            vec!["i".into(), "k".into()]
        }),
        None,
    );
    let rb = read(
        "b",
        &tb,
        ein,
        bpre(if b_t {
            vec!["j".into(), "k".into()]
        } else {
            vec!["k".into(), "j".into()]
        }),
        None,
    );
    let spatial: Vec<Axis> = if batch { vec![b_ax, i, j] } else { vec![i, j] };
    let epilogue = product_epilogue(g, f, acc, out, &[spatial.last().expect("j")]);
    let out_dims = spatial.iter().map(|a| a.extent).collect();
    let out_index = spatial.iter().map(|a| a.name.clone()).collect();
    let result = f.result_name("C");
    Compute {
        result,
        label: None,
        spatial,
        reduce: Some(("sum", vec![kk])),
        reads: vec![ra, rb],
        out_dims,
        out_elem: out,
        out_index,
        acc,
        body: BodyKind::Product,
        epilogue,
        schedule: None,
    }
}

fn gemv(g: &mut G, cfg: &Config, f: &mut Func) -> Compute {
    let d = extents(g, 2, cfg.max_extent * 2, cfg.max_elems);
    let (ein, acc, out) = product_types(g, cfg);
    let ta = f.param("A", vec![d[0], d[1]], ein);
    let tx = f.param("x", vec![d[1]], ein);
    let i = Axis {
        name: "i".into(),
        extent: d[0],
    };
    let j = Axis {
        name: "j".into(),
        extent: d[1],
    };
    let reads = vec![
        read("a", &ta, ein, vec!["i".into(), "j".into()], None),
        read("v", &tx, ein, vec!["j".into()], None),
    ];
    let epilogue = product_epilogue(g, f, acc, out, &[&i]);
    let result = f.result_name("y");
    Compute {
        result,
        label: None,
        spatial: vec![i.clone()],
        reduce: Some(("sum", vec![j])),
        reads,
        out_dims: vec![d[0]],
        out_elem: out,
        out_index: vec!["i".into()],
        acc,
        body: BodyKind::Product,
        epilogue,
        schedule: None,
    }
}

/// Output size of a convolution (None if the window does not fit).
fn conv_out(input: u64, kernel: u64, stride: u64, dilation: u64, pad: u64) -> Option<u64> {
    let span = dilation * (kernel - 1) + 1;
    (input + 2 * pad).checked_sub(span).map(|x| x / stride + 1)
}

fn conv(g: &mut G, cfg: &Config, f: &mut Func) -> Compute {
    let nd = 1 + g.weighted(&[3, 5, 1]);
    let (ein, acc, out) = product_types(g, cfg);
    let n = g.int(1, 2);
    // Grouped (g > 1), depthwise, or plain.
    let mode = g.weighted(&[5, 2, 2]);
    let groups = if mode == 1 { g.int(2, 3) } else { 1 };
    let cg = g.int(1, 3);
    let fg = g.int(1, 3);
    let (c, fo) = match mode {
        2 => (cg, cg),
        _ => (groups * cg, groups * fg),
    };
    let mut spatial_out = Vec::new();
    let mut x_idx_sp = Vec::new();
    let mut in_dims = Vec::new();
    let mut kernels = Vec::new();
    let mut padded = false;
    for d in 0..nd {
        let kernel = g.int(1, 3);
        let stride = g.int(1, 3);
        let dilation = if g.chance(1, 3) { 2 } else { 1 };
        let pad = g.int(0, 2);
        let max_in = if nd == 3 { 6 } else { cfg.max_extent.max(4) };
        let mut input = g.int(1, max_in);
        while conv_out(input, kernel, stride, dilation, pad).is_none() {
            input += 1;
        }
        let o = conv_out(input, kernel, stride, dilation, pad).expect("fits");
        let (oname, rname) = (["oh", "ow", "od"][d], ["r", "s", "t"][d]);
        let mut e = oname.to_string();
        if stride > 1 {
            e = format!("{oname} * {stride}");
        }
        e.push_str(&if dilation > 1 {
            format!(" + {rname} * {dilation}")
        } else {
            format!(" + {rname}")
        });
        e.push_str(&plus(-(pad as i64)));
        padded |= pad > 0;
        x_idx_sp.push(e);
        in_dims.push(input);
        spatial_out.push(Axis {
            name: oname.into(),
            extent: o,
        });
        kernels.push(Axis {
            name: rname.into(),
            extent: kernel,
        });
    }
    let pad = if padded { Some(pad_of(ein)) } else { None };
    let nax = Axis {
        name: "n".into(),
        extent: n,
    };
    let (mut spatial, mut reduce, x_chan, k_lead, out_chan): (
        Vec<Axis>,
        Vec<Axis>,
        String,
        Vec<String>,
        String,
    );
    match mode {
        1 => {
            spatial = vec![
                nax,
                Axis {
                    name: "g".into(),
                    extent: groups,
                },
                Axis {
                    name: "fg".into(),
                    extent: fg,
                },
            ];
            reduce = vec![Axis {
                name: "cg".into(),
                extent: cg,
            }];
            x_chan = format!("g * {cg} + cg");
            k_lead = vec![format!("g * {fg} + fg"), "cg".into()];
            out_chan = format!("g * {fg} + fg");
        }
        2 => {
            spatial = vec![
                nax,
                Axis {
                    name: "c".into(),
                    extent: c,
                },
            ];
            reduce = vec![];
            x_chan = "c".into();
            k_lead = vec!["c".into(), "0".into()];
            out_chan = "c".into();
        }
        _ => {
            spatial = vec![
                nax,
                Axis {
                    name: "f".into(),
                    extent: fo,
                },
            ];
            reduce = vec![Axis {
                name: "c".into(),
                extent: c,
            }];
            x_chan = "c".into();
            k_lead = vec!["f".into(), "c".into()];
            out_chan = "f".into();
        }
    }
    spatial.extend(spatial_out.iter().cloned());
    reduce.extend(kernels.iter().cloned());
    let mut xd = vec![n, c];
    xd.extend(&in_dims);
    let mut kd = vec![fo, if mode == 2 { 1 } else { cg }];
    if mode == 0 {
        kd[1] = c;
    }
    kd.extend(kernels.iter().map(|a| a.extent));
    let tx = f.param("x", xd, ein);
    let tk = f.param("k", kd, ein);
    let mut xi = vec!["n".to_string(), x_chan];
    xi.extend(x_idx_sp);
    let mut ki = k_lead;
    ki.extend(kernels.iter().map(|a| a.name.clone()));
    let reads = vec![
        read("xv", &tx, ein, xi, pad),
        read("kv", &tk, ein, ki, None),
    ];
    let mut out_dims = vec![n, fo];
    out_dims.extend(spatial_out.iter().map(|a| a.extent));
    let mut out_index = vec!["n".to_string(), out_chan];
    out_index.extend(spatial_out.iter().map(|a| a.name.clone()));
    let chan_axes: Vec<&Axis> = spatial
        .iter()
        .filter(|a| a.name == "f" || a.name == "c")
        .collect();
    let epilogue = product_epilogue(g, f, acc, out, &chan_axes);
    let result = f.result_name("y");
    Compute {
        result,
        label: None,
        spatial,
        reduce: Some(("sum", reduce)),
        reads,
        out_dims,
        out_elem: out,
        out_index,
        acc,
        body: BodyKind::Product,
        epilogue,
        schedule: None,
    }
}

fn conv_transposed(g: &mut G, cfg: &Config, f: &mut Func) -> Compute {
    let nd = g.int(1, 2) as usize;
    let (ein, acc, out) = product_types(g, cfg);
    let (c, fo) = (g.int(1, 3), g.int(1, 3));
    let mut spatial = vec![
        Axis {
            name: "n".into(),
            extent: 1,
        },
        Axis {
            name: "f".into(),
            extent: fo,
        },
    ];
    let mut reduce = vec![Axis {
        name: "c".into(),
        extent: c,
    }];
    let mut xi = vec!["n".to_string(), "c".to_string()];
    let mut xd = vec![1, c];
    let mut kd = vec![c, fo];
    let mut ki = vec!["c".to_string(), "f".to_string()];
    let mut out_dims = vec![1, fo];
    let mut out_index = vec!["n".to_string(), "f".to_string()];
    for d in 0..nd {
        let (s, p, r, input) = (g.int(2, 3), g.int(0, 1), g.int(1, 3), g.int(2, 5));
        let o = ((input - 1) * s + r).saturating_sub(2 * p).max(1);
        let (oname, rname) = (["oh", "ow"][d], ["r", "s"][d]);
        xi.push(format!("({oname} - {rname}{}) div {s}", plus(p as i64)));
        xd.push(input);
        kd.push(r);
        ki.push(rname.to_string());
        out_dims.push(o);
        out_index.push(oname.to_string());
        spatial.push(Axis {
            name: oname.into(),
            extent: o,
        });
        reduce.push(Axis {
            name: rname.into(),
            extent: r,
        });
    }
    let tx = f.param("x", xd, ein);
    let tk = f.param("k", kd, ein);
    let reads = vec![
        read("xv", &tx, ein, xi, Some(pad_of(ein))),
        read("kv", &tk, ein, ki, None),
    ];
    let epilogue = product_epilogue(g, f, acc, out, &[]);
    let result = f.result_name("y");
    let _ = cfg;
    Compute {
        result,
        label: None,
        spatial,
        reduce: Some(("sum", reduce)),
        reads,
        out_dims,
        out_elem: out,
        out_index,
        acc,
        body: BodyKind::Product,
        epilogue,
        schedule: None,
    }
}

fn pool(g: &mut G, cfg: &Config, f: &mut Func) -> Compute {
    let nd = g.int(1, 2) as usize;
    let max = g.chance(1, 2);
    let e = if cfg.mixed_types && g.chance(1, 4) {
        g.pick(&[Elem::F16, Elem::I32, Elem::I8, Elem::U8])
    } else {
        Elem::F32
    };
    let ch = g.int(1, 3);
    let mut spatial = vec![
        Axis {
            name: "n".into(),
            extent: 1,
        },
        Axis {
            name: "c".into(),
            extent: ch,
        },
    ];
    let mut reduce = Vec::new();
    let mut xi = vec!["n".to_string(), "c".to_string()];
    let mut xd = vec![1, ch];
    let mut padded = false;
    let mut window = 1u64;
    for d in 0..nd {
        let (r, s) = (g.int(1, 3), g.int(1, 3));
        let p = if max { g.int(0, (r - 1).min(1)) } else { 0 };
        let mut input = g.int(r, cfg.max_extent.max(r));
        while conv_out(input, r, s, 1, p).is_none() {
            input += 1;
        }
        let o = conv_out(input, r, s, 1, p).expect("fits");
        let (oname, rname) = (["oh", "ow"][d], ["r", "s"][d]);
        let mut idx = if s > 1 {
            format!("{oname} * {s} + {rname}")
        } else {
            format!("{oname} + {rname}")
        };
        idx.push_str(&plus(-(p as i64)));
        padded |= p > 0;
        window *= r;
        xi.push(idx);
        xd.push(input);
        spatial.push(Axis {
            name: oname.into(),
            extent: o,
        });
        reduce.push(Axis {
            name: rname.into(),
            extent: r,
        });
    }
    let tx = f.param("x", xd, e);
    let pad = match (padded, e.is_float()) {
        (false, _) => None,
        (true, true) => Some("-inf"),
        (true, false) => Some(match e {
            Elem::I8 => "-128",
            Elem::U8 => "0",
            _ => "-2147483648",
        }),
    };
    let reads = vec![read("v", &tx, e, xi, pad)];
    let out_dims: Vec<u64> = spatial.iter().map(|a| a.extent).collect();
    let out_index = spatial.iter().map(|a| a.name.clone()).collect();
    let (combine, epilogue) = if max || !e.is_float() {
        ("max", None)
    } else {
        (
            "sum",
            Some(EpilogueKind::Scale(format!("{:.6}", 1.0 / window as f64))),
        )
    };
    let result = f.result_name("y");
    Compute {
        result,
        label: None,
        spatial,
        reduce: Some((combine, reduce)),
        reads,
        out_dims,
        out_elem: e,
        out_index,
        acc: e,
        body: BodyKind::Identity,
        epilogue,
        schedule: None,
    }
}

/// A running sum along a dimension: `x[i, j - t] pad(0)` reduced over t.
fn scan(g: &mut G, cfg: &Config, f: &mut Func) -> Compute {
    let d = extents(g, 2, cfg.max_extent, cfg.max_elems);
    let e = elem(g, cfg);
    let acc = if e.is_byte() { Elem::I32 } else { e };
    let t = f.param("x", d.clone(), e);
    let i = Axis {
        name: "i".into(),
        extent: d[0],
    };
    let j = Axis {
        name: "j".into(),
        extent: d[1],
    };
    let tt = Axis {
        name: "t".into(),
        extent: d[1],
    };
    let reads = vec![read(
        "v",
        &t,
        e,
        vec!["i".into(), "j - t".into()],
        Some(pad_of(e)),
    )];
    let result = f.result_name("y");
    let epilogue = None;
    Compute {
        result,
        label: None,
        spatial: vec![i, j],
        reduce: Some(("sum", vec![tt])),
        reads,
        out_dims: d,
        out_elem: acc,
        out_index: vec!["i".into(), "j".into()],
        acc,
        body: BodyKind::Identity,
        epilogue,
        schedule: None,
    }
}

/// Breaks one rule of the dialect, now and then (`Config::invalid`).
fn break_rules(g: &mut G, cfg: &Config, c: &mut Compute) {
    if !g.chance(cfg.invalid * 3, 100) {
        return;
    }
    match g.index(9) {
        0 => {
            // A padded read without its pad.
            if let Some(r) = c.reads.iter_mut().find(|r| r.pad.is_some()) {
                r.pad = None;
            }
        }
        1 => {
            // An output index that repeats an axis.
            if let Some(first) = c.out_index.first().cloned() {
                c.out_index.push(first);
            }
        }
        2 => {
            // A tensor dimension one too small or a missing index.
            if let Some(r) = c.reads.first_mut() {
                r.idx.pop();
            }
        }
        3 => {
            if let Some(a) = c.spatial.first_mut() {
                a.extent = g.pick(&[0, 1 << 40, u64::MAX]);
            }
        }
        4 => c.out_elem = g.pick(&Elem::ALL),
        5 => {
            if let Some(r) = c.reads.first_mut() {
                r.tensor = "%undefined".into();
            }
        }
        6 => {
            if let Some((_, red)) = &c.reduce
                && let Some(a) = red.first()
            {
                c.out_index.push(a.name.clone());
                c.out_dims.push(a.extent);
            }
        }
        7 => {
            if let Some(r) = c.reads.first_mut() {
                r.pad = Some(g.pick(&["1e39", "300", "nan", "-129", "\"x\""]).to_string());
            }
        }
        _ => {
            if let Some(r) = c.reads.first_mut()
                && let Some(i) = r.idx.first_mut()
            {
                *i = g
                    .pick(&[
                        "i * 0",
                        "(i + 1) div 0",
                        "i div 3",
                        "-i",
                        "i * 99999999999",
                        "zz",
                    ])
                    .to_string();
            }
        }
    }
}

/// The text of a compute op (indented by two spaces).
pub fn render(g: &mut G, cfg: &Config, c: &Compute) -> String {
    let mut s = format!("  {} = compute ", c.result);
    if let Some(l) = &c.label {
        s.push_str(&format!("\"{l}\" "));
    }
    let axes = |xs: &[Axis]| {
        xs.iter()
            .map(|a| format!("{}: {}", a.name, a.extent))
            .collect::<Vec<_>>()
            .join(", ")
    };
    s.push_str(&format!("({})", axes(&c.spatial)));
    if let Some((comb, red)) = &c.reduce
        && !red.is_empty()
    {
        s.push_str(&format!(" reduce {comb} ({})", axes(red)));
    }
    let render_reads = |rs: &[Read]| {
        rs.iter()
            .map(|r| {
                format!(
                    "%{} = {}[{}]{}",
                    r.name,
                    r.tensor,
                    r.idx.join(", "),
                    r.pad
                        .as_ref()
                        .map(|p| format!(" pad({p})"))
                        .unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !c.reads.is_empty() {
        s.push_str(&format!("\n      reads({})", render_reads(&c.reads)));
    }
    s.push_str(&format!(
        " -> {}[{}]",
        tensor_type(&c.out_dims, c.out_elem),
        c.out_index.join(", ")
    ));
    if let Some(sch) = &c.schedule {
        s.push_str(&format!("\n      {sch}"));
    }
    s.push_str(" {\n");
    let mut counter = 0usize;
    let mut lines = Vec::new();
    let inputs: Vec<(String, Elem)> = c
        .reads
        .iter()
        .map(|r| (format!("%{}", r.name), r.elem))
        .collect();
    let all_axes: Vec<String> = c.axes().map(|a| a.name.clone()).collect();
    let mut sc = Scalar {
        prefix: "",
        counter: &mut counter,
        special: cfg.special_floats,
        invalid: cfg.invalid,
    };
    let v = match c.body {
        BodyKind::Product if !inputs.is_empty() => {
            let mut cast: Vec<String> = Vec::new();
            for (name, e) in &inputs {
                if *e == c.acc {
                    cast.push(name.clone());
                } else {
                    let v = sc.value(g, &[(name.clone(), *e)], c.acc, &[], 0, "    ", &mut lines);
                    cast.push(v);
                }
            }
            let mut acc = cast[0].clone();
            for other in &cast[1..] {
                let v = format!("%{}", *sc.counter);
                *sc.counter += 1;
                lines.push(format!("    {v} = mul {acc}, {other} : {}", c.acc.name()));
                acc = v;
            }
            acc
        }
        BodyKind::Identity if !inputs.is_empty() => {
            sc.value(g, &inputs[..1], c.acc, &[], 0, "    ", &mut lines)
        }
        _ => sc.value(g, &inputs, c.acc, &all_axes, 4, "    ", &mut lines),
    };
    for l in lines.drain(..) {
        s.push_str(&l);
        s.push('\n');
    }
    let acc_ty = if c.epilogue.is_none() && cfg.invalid > 0 && g.chance(cfg.invalid, 100) {
        g.pick(&Elem::ALL)
    } else {
        c.acc
    };
    s.push_str(&format!("    yield {v} : {}\n  }}", acc_ty.name()));
    if let Some(ep) = &c.epilogue {
        let acc = "%acc".to_string();
        let spatial: Vec<String> = c.spatial.iter().map(|a| a.name.clone()).collect();
        let mut inputs = vec![(acc.clone(), c.acc)];
        let mut reads: Vec<Read> = Vec::new();
        match ep {
            EpilogueKind::Bias(r) => {
                reads.push(r.clone());
                inputs.push((format!("%{}", r.name), r.elem));
            }
            EpilogueKind::Random(rs) => {
                for r in rs {
                    reads.push(r.clone());
                    inputs.push((format!("%{}", r.name), r.elem));
                }
            }
            _ => {}
        }
        s.push_str(" epilogue(%acc)");
        if !reads.is_empty() {
            s.push_str(&format!(" reads({})", render_reads(&reads)));
        }
        s.push_str(" {\n");
        let mut sc = Scalar {
            prefix: "",
            counter: &mut counter,
            special: cfg.special_floats,
            invalid: cfg.invalid,
        };
        let mut v = match ep {
            EpilogueKind::Bias(_) => {
                let b = sc.value(g, &inputs[1..], c.acc, &[], 0, "    ", &mut lines);
                let v = format!("%{}", *sc.counter);
                *sc.counter += 1;
                lines.push(format!("    {v} = add {acc}, {b} : {}", c.acc.name()));
                v
            }
            EpilogueKind::Scale(k) => {
                let kv = format!("%{}", *sc.counter);
                let v = format!("%{}", *sc.counter + 1);
                *sc.counter += 2;
                lines.push(format!("    {kv} = const {k} : {}", c.acc.name()));
                lines.push(format!("    {v} = mul {acc}, {kv} : {}", c.acc.name()));
                v
            }
            EpilogueKind::Activation => acc.clone(),
            EpilogueKind::Random(_) => sc.value(g, &inputs, c.acc, &spatial, 3, "    ", &mut lines),
        };
        if matches!(ep, EpilogueKind::Activation | EpilogueKind::Bias(_)) && g.chance(2, 3) {
            let ops: &[&str] = if c.acc.is_float() {
                &["relu", "tanh", "sigmoid", "erf", "abs"]
            } else {
                &["relu", "abs", "neg"]
            };
            let op = g.pick(ops);
            let w = format!("%{}", *sc.counter);
            *sc.counter += 1;
            lines.push(format!("    {w} = {op} {v} : {}", c.acc.name()));
            v = w;
        }
        if c.out_elem != c.acc {
            v = sc.value(g, &[(v, c.acc)], c.out_elem, &[], 0, "    ", &mut lines);
        }
        for l in lines.drain(..) {
            s.push_str(&l);
            s.push('\n');
        }
        s.push_str(&format!("    yield {v} : {}\n  }}", c.out_elem.name()));
    }
    s.push('\n');
    s
}

/// A function of one to `cfg.max_ops` compute ops; returns its text and
/// the compute ops (for schedules and level 2).
pub fn function(g: &mut G, cfg: &Config, name: &str) -> (String, Vec<Compute>) {
    let mut f = Func::new();
    let n = g.int(1, cfg.max_ops);
    let mut ops = Vec::new();
    let mut body = String::new();
    for _ in 0..n {
        let c = compute(g, cfg, &mut f);
        body.push_str(&render(g, cfg, &c));
        f.values.push(TensorVal {
            name: c.result.clone(),
            dims: c.out_dims.clone(),
            elem: c.out_elem,
        });
        ops.push(c);
    }
    // Return the last result, and sometimes an earlier one or a parameter too.
    let mut ret = vec![f.values.last().expect("an op").clone()];
    if f.values.len() > 1 && g.chance(1, 3) {
        ret.insert(0, f.values[0].clone());
    }
    if g.chance(1, 12)
        && let Some(p) = f.params.first()
    {
        ret.push(p.clone());
    }
    let params = f
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, tensor_type(&p.dims, p.elem)))
        .collect::<Vec<_>>()
        .join(", ");
    let results = ret
        .iter()
        .map(|r| tensor_type(&r.dims, r.elem))
        .collect::<Vec<_>>();
    let results = if results.len() == 1 && g.chance(3, 4) {
        results[0].clone()
    } else {
        format!("({})", results.join(", "))
    };
    let names = ret
        .iter()
        .map(|r| r.name.clone())
        .collect::<Vec<_>>()
        .join(", ");
    let text = format!("func @{name}({params}) -> {results} {{\n{body}  return {names}\n}}\n");
    (text, ops)
}

/// A module: one function, sometimes more.
pub fn module(g: &mut G, cfg: &Config) -> String {
    let n = if g.chance(1, 6) { 2 } else { 1 };
    let mut out = String::new();
    if g.chance(1, 4) {
        out.push_str("// generated by tilec-fuzz\n");
    }
    for k in 0..n {
        let name = if cfg.invalid > 0 && k > 0 && g.chance(cfg.invalid, 100) {
            "f0".to_string()
        } else {
            format!("f{k}")
        };
        out.push_str(&function(g, cfg, &name).0);
    }
    out
}
