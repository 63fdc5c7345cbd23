//! Evaluation of one `compute` op.
//!
//! The body and epilogue are compiled to a small register program that runs
//! on *lanes*: up to [`LANES`] consecutive points of the spatial iteration
//! space at once, each with its own accumulator. The reduction axes are
//! walked in lexicographic order for all lanes together, so every output
//! element is folded in exactly the order the spec defines, while the
//! per-op dispatch is paid once per lane block instead of once per point.
//! Blocks run in parallel (rayon); each owns its outputs.
//!
//! Scalar arithmetic goes through `crate::ir::scalar`, the same functions
//! constant folding uses, so the interpreter and the folder cannot disagree.

use super::memory::{MemoryError, try_collect, try_filled};
use super::tensor::Tensor;
use super::InterpError;
use crate::ir::ops::round_to;
use crate::ir::scalar::{combiner_op, float_binary, float_to_int, float_unary, int_binary, int_unary, wrap_int};
use crate::ir::*;
use rayon::prelude::*;

/// Points evaluated together.
pub const LANES: usize = 64;

/// Where an instruction's value lives: a float register (f64 lanes) or an
/// integer register (i64 lanes).
#[derive(Copy, Clone, Debug)]
enum Reg {
    F(usize),
    I(usize),
}

#[derive(Clone, Debug)]
enum Instr {
    /// The value of read `read` (index into `ComputePlan::reads`).
    Read { read: usize, dst: Reg },
    /// The folded value (epilogue only).
    Acc { dst: Reg },
    Const { value: Literal, dst: Reg },
    Axis { axis: usize, ty: ElemType, dst: Reg },
    Unary { op: UnaryOp, ty: ElemType, src: Reg, dst: Reg },
    Binary { op: BinaryOp, ty: ElemType, a: Reg, b: Reg, dst: Reg },
    Cast { to: ElemType, src: Reg, dst: Reg },
}

/// A compiled region: instructions, the register yielded, and the number
/// of registers of each kind.
#[derive(Clone, Debug)]
struct Program {
    instrs: Vec<Instr>,
    result: Reg,
    result_ty: ElemType,
    n_float: usize,
    n_int: usize,
}

fn compile_region(f: &Function, region: Region, read_base: usize, has_acc: bool) -> Result<Program, InterpError> {
    let mut regs: std::collections::HashMap<Value, Reg> = std::collections::HashMap::new();
    let (mut n_float, mut n_int) = (0, 0);
    let mut alloc = |ty: ElemType| {
        if ty.is_int() {
            n_int += 1;
            Reg::I(n_int - 1)
        } else {
            n_float += 1;
            Reg::F(n_float - 1)
        }
    };
    let scalar = |v: Value| f.value_type(v).as_scalar().ok_or_else(|| InterpError::new("compute region value is not a scalar"));
    let mut instrs = Vec::new();
    for (i, &arg) in f.regions[region].args.iter().enumerate() {
        let dst = alloc(scalar(arg)?);
        regs.insert(arg, dst);
        instrs.push(if has_acc && i == 0 { Instr::Acc { dst } } else { Instr::Read { read: read_base + i - usize::from(has_acc), dst } });
    }
    let mut result = None;
    for &op in &f.regions[region].ops {
        let data = &f.ops[op];
        let src = |k: usize| regs.get(&data.operands[k]).copied().ok_or_else(|| InterpError::new("operand defined outside the region"));
        if let OpKind::Yield = data.kind {
            result = Some((src(0)?, scalar(data.operands[0])?));
            continue;
        }
        let r = data.results[0];
        let ty = scalar(r)?;
        let dst = alloc(ty);
        instrs.push(match &data.kind {
            OpKind::Const(l) => Instr::Const { value: *l, dst },
            OpKind::AxisIndex(a) => Instr::Axis { axis: a.index(), ty, dst },
            OpKind::Unary(u) => Instr::Unary { op: *u, ty, src: src(0)?, dst },
            OpKind::Binary(b) => Instr::Binary { op: *b, ty, a: src(0)?, b: src(1)?, dst },
            OpKind::Cast => Instr::Cast { to: ty, src: src(0)?, dst },
            other => return Err(InterpError::new(format!("`{}` cannot be interpreted inside a compute region", other.mnemonic()))),
        });
        regs.insert(r, dst);
    }
    let (result, result_ty) = result.ok_or_else(|| InterpError::new("compute region without `yield`"))?;
    Ok(Program { instrs, result, result_ty, n_float, n_int })
}

/// How one read finds its element: `offset = Σ coef[a]·axis[a] + base` when
/// the read is provably in bounds and exact (no pad), otherwise per
/// dimension numerators checked against bounds and divisors.
#[derive(Clone, Debug)]
struct ReadPlan {
    operand: usize,
    /// Offset coefficient per axis of the compute op (fast path).
    coef: Vec<i64>,
    base: i64,
    padded: Option<PaddedRead>,
}

#[derive(Clone, Debug)]
struct PaddedRead {
    /// Per dimension: coefficient per axis, constant, divisor, size, stride.
    dims: Vec<(Vec<i64>, i64, i64, i64, i64)>,
    pad_f: f64,
    pad_i: i64,
}

fn plan_read(c: &Compute, read: &Read, operand: usize, ty: &TensorType) -> ReadPlan {
    let strides = Tensor::strides(ty);
    let n_axes = c.axes.len();
    let coefs = |e: &AffineExpr<AxisId>| (0..n_axes).map(|a| e.coeff(AxisId::new(a))).collect::<Vec<i64>>();
    match read.pad {
        None => {
            // The verifier proved every divisor exact: divide coefficients.
            let mut coef = vec![0i64; n_axes];
            let mut base = 0i64;
            for (e, &s) in read.indices.iter().zip(&strides) {
                let d = e.divisor();
                for (a, k) in coefs(e).into_iter().enumerate() {
                    coef[a] += s * (k / d);
                }
                base += s * (e.constant_term() / d);
            }
            ReadPlan { operand, coef, base, padded: None }
        }
        Some(pad) => {
            let dims = read.indices.iter().zip(&strides).zip(&ty.shape).map(|((e, &s), &n)| (coefs(e), e.constant_term(), e.divisor(), n as i64, s)).collect();
            let (pad_f, pad_i) = match pad {
                Literal::Int(i) => (i as f64, i),
                Literal::Float(x) => (x, x as i64),
            };
            ReadPlan { operand, coef: Vec::new(), base: 0, padded: Some(PaddedRead { dims, pad_f, pad_i }) }
        }
    }
}

/// Everything needed to evaluate a compute op, independent of the block.
struct ComputePlan<'a> {
    inputs: Vec<&'a Tensor>,
    reads: Vec<ReadPlan>,
    body: Program,
    epilogue: Option<Program>,
    combiner: Option<Combiner>,
    extents: Vec<i64>,
    n_spatial: usize,
    out_coef: Vec<i64>,
}

/// Per-block scratch: registers and read offsets.
struct Lanes {
    f: Vec<f64>,
    i: Vec<i64>,
    n: usize,
    /// Axis values per lane: `axis_vals[a * LANES + l]`.
    axis_vals: Vec<i64>,
    /// Per read, the part of its address (fast path: one offset per lane)
    /// or of its numerators (padded: one per dimension and lane) that
    /// depends on the spatial axes only: computed once per block, since
    /// the reduction loop does not change it.
    spatial: Vec<Vec<i64>>,
    /// Per unpadded read, how its addresses run across the block's lanes.
    layout: Vec<Layout>,
    offsets: Vec<i64>,
    valid: Vec<bool>,
}

/// The shape of a read's addresses across lanes: the common cases are
/// copied or broadcast instead of gathered element by element.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Layout {
    /// Every lane reads the same element (e.g. `A[i, k]` across `j`).
    Uniform,
    /// Lane `l` reads element `first + l` (e.g. `B[k, j]` across `j`).
    Contiguous,
    General,
}

/// Splits a register file so that `dst` can be written while `srcs` are
/// read. Registers are SSA-allocated in definition order, so a result's
/// register always comes after its operands'.
fn split_regs<T>(regs: &mut [T], dst: usize, n: usize) -> (&[T], &mut [T]) {
    let (lo, hi) = regs.split_at_mut(dst * LANES);
    (lo, &mut hi[..n])
}

/// Evaluates compute op `op` (whose result is called `name` in messages)
/// on `inputs`. Its memory (the result, and 16 bytes of scratch per output
/// point) is allocated fallibly: the caller has counted it.
pub(super) fn eval(f: &Function, op: Op, inputs: Vec<&Tensor>, name: &str) -> Result<Tensor, InterpError> {
    let data = &f.ops[op];
    let c = data.kind.as_compute().ok_or_else(|| InterpError::new("not a compute op"))?;
    let out_ty = f.value_type(data.results[0]).as_tensor().ok_or_else(|| InterpError::new("compute result is not a tensor"))?.clone();
    let reads: Vec<ReadPlan> = c.all_reads().map(|(i, r)| plan_read(c, r, i, &inputs[i].ty)).collect();
    let body = compile_region(f, data.regions[0], 0, false)?;
    let epilogue = match data.regions.get(1) {
        Some(&r) => Some(compile_region(f, r, c.reads.len(), true)?),
        None => None,
    };
    let n_spatial = c.spatial_axes().count();
    let out_strides = Tensor::strides(&out_ty);
    let out_coef: Vec<i64> =
        (0..n_spatial).map(|a| c.output.iter().zip(&out_strides).map(|(e, &s)| s * e.coeff(AxisId::new(a))).sum()).collect();
    let plan = ComputePlan {
        inputs,
        reads,
        body,
        epilogue,
        combiner: c.combiner,
        extents: c.axes.iter().map(|a| a.extent as i64).collect(),
        n_spatial,
        out_coef,
    };
    let n_points: usize = plan.extents[..n_spatial].iter().product::<i64>() as usize;
    let out_elem = out_ty.elem;
    let refused = |what: String, bytes: u64| InterpError::from(MemoryError::refused(what, bytes));
    let mut out = Tensor::try_zeros(&out_ty).map_err(|_| refused(format!("tensor {name} ({out_ty})"), out_ty.size_bytes().unwrap_or(u64::MAX)))?;
    let scratch = || refused(format!("the interpreter's scratch for computing {name}"), 8 * n_points as u64);
    let offsets = plan.out_offsets(n_points).map_err(|_| scratch())?;
    // Results in flattened spatial order, then scattered by output index.
    if out_elem.is_int() {
        let mut results = try_filled(n_points, 0i64).map_err(|_| scratch())?;
        results.par_chunks_mut(LANES).enumerate().for_each(|(b, chunk)| {
            let mut lanes = plan.new_lanes();
            plan.block(&mut lanes, b * LANES, chunk.len());
            let r = match plan.final_program().result {
                Reg::I(r) => r,
                Reg::F(_) => unreachable!("verified: integer result"),
            };
            chunk.copy_from_slice(&lanes.i[r * LANES..r * LANES + chunk.len()]);
        });
        out.scatter_i64(&offsets, &results);
    } else {
        let mut results = try_filled(n_points, 0f64).map_err(|_| scratch())?;
        results.par_chunks_mut(LANES).enumerate().for_each(|(b, chunk)| {
            let mut lanes = plan.new_lanes();
            plan.block(&mut lanes, b * LANES, chunk.len());
            let r = match plan.final_program().result {
                Reg::F(r) => r,
                Reg::I(_) => unreachable!("verified: float result"),
            };
            chunk.copy_from_slice(&lanes.f[r * LANES..r * LANES + chunk.len()]);
        });
        out.scatter_f64(&offsets, &results);
    }
    Ok(out)
}

impl ComputePlan<'_> {
    fn final_program(&self) -> &Program {
        self.epilogue.as_ref().unwrap_or(&self.body)
    }

    fn new_lanes(&self) -> Lanes {
        let n_float = self.body.n_float.max(self.epilogue.as_ref().map_or(0, |p| p.n_float));
        let n_int = self.body.n_int.max(self.epilogue.as_ref().map_or(0, |p| p.n_int));
        Lanes {
            f: vec![0.0; n_float.max(1) * LANES],
            i: vec![0; n_int.max(1) * LANES],
            n: 0,
            axis_vals: vec![0; self.extents.len().max(1) * LANES],
            spatial: self.reads.iter().map(|r| vec![0; r.padded.as_ref().map_or(1, |p| p.dims.len()) * LANES]).collect(),
            layout: vec![Layout::General; self.reads.len()],
            offsets: vec![0; LANES],
            valid: vec![true; LANES],
        }
    }

    /// Output offsets of the spatial points in flattened order.
    fn out_offsets(&self, n_points: usize) -> Result<Vec<i64>, std::collections::TryReserveError> {
        let mut coords = vec![0i64; self.n_spatial];
        try_collect(
            n_points,
            std::iter::repeat_with(|| {
                let off = coords.iter().zip(&self.out_coef).map(|(x, k)| x * k).sum();
                increment(&mut coords, &self.extents[..self.n_spatial]);
                off
            }),
        )
    }

    /// Evaluates spatial points `[start, start + n)`: after the call the
    /// final program's result register holds their values.
    fn block(&self, lanes: &mut Lanes, start: usize, n: usize) {
        lanes.n = n;
        // Spatial coordinates of each lane.
        let mut coords = unflatten(start, &self.extents[..self.n_spatial]);
        for l in 0..n {
            for (a, &x) in coords.iter().enumerate() {
                lanes.axis_vals[a * LANES + l] = x;
            }
            increment(&mut coords, &self.extents[..self.n_spatial]);
        }
        self.precompute_spatial(lanes);
        let n_red = self.extents.len() - self.n_spatial;
        let red_extents = &self.extents[self.n_spatial..];
        let acc_ty = self.body.result_ty;
        let mut acc_f = vec![0.0f64; LANES];
        let mut acc_i = vec![0i64; LANES];
        match self.combiner {
            Some(comb) => match comb.identity(acc_ty) {
                Literal::Int(x) => acc_i[..n].fill(x),
                Literal::Float(x) => acc_f[..n].fill(x),
            },
            None => {}
        }
        let total: usize = red_extents.iter().product::<i64>() as usize;
        let mut red = vec![0i64; n_red];
        for _ in 0..total {
            for (k, &x) in red.iter().enumerate() {
                lanes.axis_vals[(self.n_spatial + k) * LANES..(self.n_spatial + k) * LANES + n].fill(x);
            }
            self.run(&self.body, lanes, None);
            match (self.combiner, self.body.result) {
                (None, Reg::F(r)) => acc_f[..n].copy_from_slice(&lanes.f[r * LANES..r * LANES + n]),
                (None, Reg::I(r)) => acc_i[..n].copy_from_slice(&lanes.i[r * LANES..r * LANES + n]),
                (Some(comb), Reg::F(r)) => {
                    let vals = &lanes.f[r * LANES..r * LANES + n];
                    combine_f(combiner_op(comb), acc_ty, &mut acc_f[..n], vals);
                }
                (Some(comb), Reg::I(r)) => {
                    let vals = &lanes.i[r * LANES..r * LANES + n];
                    let op = combiner_op(comb);
                    for (a, &v) in acc_i[..n].iter_mut().zip(vals) {
                        *a = wrap_int(acc_ty, int_binary(op, *a, v));
                    }
                }
            }
            increment(&mut red, red_extents);
        }
        match &self.epilogue {
            Some(epi) => self.run(epi, lanes, Some((&acc_f, &acc_i))),
            None => match self.body.result {
                Reg::F(r) => lanes.f[r * LANES..r * LANES + n].copy_from_slice(&acc_f[..n]),
                Reg::I(r) => lanes.i[r * LANES..r * LANES + n].copy_from_slice(&acc_i[..n]),
            },
        }
    }

    /// Runs a program on the current lanes (axis values already set).
    fn run(&self, p: &Program, lanes: &mut Lanes, acc: Option<(&[f64], &[i64])>) {
        let n = lanes.n;
        for ins in &p.instrs {
            match *ins {
                Instr::Read { read, dst } => self.read(read, lanes, dst),
                Instr::Acc { dst } => {
                    let (af, ai) = acc.expect("epilogue has an accumulator");
                    match dst {
                        Reg::F(r) => lanes.f[r * LANES..r * LANES + n].copy_from_slice(&af[..n]),
                        Reg::I(r) => lanes.i[r * LANES..r * LANES + n].copy_from_slice(&ai[..n]),
                    }
                }
                Instr::Const { value, dst } => match (dst, value) {
                    (Reg::F(r), v) => lanes.f[r * LANES..r * LANES + n].fill(v.as_f64()),
                    (Reg::I(r), Literal::Int(v)) => lanes.i[r * LANES..r * LANES + n].fill(v),
                    (Reg::I(r), Literal::Float(v)) => lanes.i[r * LANES..r * LANES + n].fill(v as i64),
                },
                Instr::Axis { axis, ty, dst } => {
                    let vals = &lanes.axis_vals[axis * LANES..axis * LANES + n];
                    match dst {
                        Reg::F(r) => lanes.f[r * LANES..r * LANES + n].iter_mut().zip(vals).for_each(|(o, &x)| *o = round_to(ty, x as f64)),
                        Reg::I(r) => lanes.i[r * LANES..r * LANES + n].iter_mut().zip(vals).for_each(|(o, &x)| *o = wrap_int(ty, x)),
                    }
                }
                Instr::Unary { op, ty, src, dst } => match (src, dst) {
                    (Reg::F(s), Reg::F(d)) => {
                        let (regs, out) = split_regs(&mut lanes.f, d, n);
                        unary_f(op, ty, &regs[s * LANES..s * LANES + n], out);
                    }
                    (Reg::I(s), Reg::I(d)) => {
                        for l in 0..n {
                            lanes.i[d * LANES + l] = wrap_int(ty, int_unary(op, lanes.i[s * LANES + l]));
                        }
                    }
                    _ => unreachable!("verified: unary operand and result share a type"),
                },
                Instr::Binary { op, ty, a, b, dst } => match (a, b, dst) {
                    (Reg::F(a), Reg::F(b), Reg::F(d)) => {
                        let (regs, out) = split_regs(&mut lanes.f, d, n);
                        binary_f(op, ty, &regs[a * LANES..a * LANES + n], &regs[b * LANES..b * LANES + n], out);
                    }
                    (Reg::I(a), Reg::I(b), Reg::I(d)) => {
                        for l in 0..n {
                            lanes.i[d * LANES + l] = wrap_int(ty, int_binary(op, lanes.i[a * LANES + l], lanes.i[b * LANES + l]));
                        }
                    }
                    _ => unreachable!("verified: binary operands and result share a type"),
                },
                Instr::Cast { to, src, dst } => match (src, dst) {
                    (Reg::F(s), Reg::F(d)) => {
                        for l in 0..n {
                            lanes.f[d * LANES + l] = round_to(to, lanes.f[s * LANES + l]);
                        }
                    }
                    (Reg::I(s), Reg::F(d)) => {
                        for l in 0..n {
                            lanes.f[d * LANES + l] = round_to(to, lanes.i[s * LANES + l] as f64);
                        }
                    }
                    (Reg::F(s), Reg::I(d)) => {
                        for l in 0..n {
                            lanes.i[d * LANES + l] = float_to_int(to, lanes.f[s * LANES + l]);
                        }
                    }
                    (Reg::I(s), Reg::I(d)) => {
                        for l in 0..n {
                            lanes.i[d * LANES + l] = wrap_int(to, lanes.i[s * LANES + l]);
                        }
                    }
                },
            }
        }
    }

    /// Fills `lanes.spatial` for the current block's spatial coordinates.
    fn precompute_spatial(&self, lanes: &mut Lanes) {
        let n = lanes.n;
        for (k, plan) in self.reads.iter().enumerate() {
            let out = &mut lanes.spatial[k];
            match &plan.padded {
                None => {
                    out[..n].fill(plan.base);
                    for a in 0..self.n_spatial {
                        let c = plan.coef[a];
                        if c != 0 {
                            let vals = &lanes.axis_vals[a * LANES..a * LANES + n];
                            out[..n].iter_mut().zip(vals).for_each(|(o, &x)| *o += c * x);
                        }
                    }
                    let first = out[0];
                    lanes.layout[k] = if out[..n].iter().all(|&o| o == first) {
                        Layout::Uniform
                    } else if out[..n].iter().enumerate().all(|(l, &o)| o == first + l as i64) {
                        Layout::Contiguous
                    } else {
                        Layout::General
                    };
                }
                Some(p) => {
                    for (d, (coef, constant, ..)) in p.dims.iter().enumerate() {
                        let row = &mut out[d * LANES..d * LANES + n];
                        row.fill(*constant);
                        for a in 0..self.n_spatial {
                            let c = coef[a];
                            if c != 0 {
                                let vals = &lanes.axis_vals[a * LANES..a * LANES + n];
                                row.iter_mut().zip(vals).for_each(|(o, &x)| *o += c * x);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Gathers read `k` for the current lanes into `dst`: the block's
    /// spatial part plus the current reduction point's part.
    fn read(&self, k: usize, lanes: &mut Lanes, dst: Reg) {
        let plan = &self.reads[k];
        let tensor = self.inputs[plan.operand];
        let n = lanes.n;
        // Reduction axes hold the same value in every lane: read lane 0.
        let red_part = |coef: &[i64], lanes: &Lanes| -> i64 {
            (self.n_spatial..self.extents.len()).map(|a| coef[a] * lanes.axis_vals[a * LANES]).sum()
        };
        match &plan.padded {
            None => {
                let first = lanes.spatial[k][0] + red_part(&plan.coef, lanes);
                match (lanes.layout[k], dst) {
                    (Layout::Uniform, Reg::F(r)) => lanes.f[r * LANES..r * LANES + n].fill(tensor.get_f64(first as usize)),
                    (Layout::Uniform, Reg::I(r)) => lanes.i[r * LANES..r * LANES + n].fill(tensor.get_i64(first as usize)),
                    (Layout::Contiguous, Reg::F(r)) => tensor.copy_f64(first as usize, &mut lanes.f[r * LANES..r * LANES + n]),
                    (Layout::Contiguous, Reg::I(r)) => tensor.copy_i64(first as usize, &mut lanes.i[r * LANES..r * LANES + n]),
                    (Layout::General, _) => {
                        let delta = first - lanes.spatial[k][0];
                        let spatial = &lanes.spatial[k];
                        lanes.offsets[..n].iter_mut().zip(&spatial[..n]).for_each(|(o, &s)| *o = s + delta);
                        match dst {
                            Reg::F(r) => tensor.gather_f64(&lanes.offsets[..n], &mut lanes.f[r * LANES..r * LANES + n]),
                            Reg::I(r) => tensor.gather_i64(&lanes.offsets[..n], &mut lanes.i[r * LANES..r * LANES + n]),
                        }
                    }
                }
                return;
            }
            Some(p) => {
                lanes.offsets[..n].fill(0);
                lanes.valid[..n].fill(true);
                for (d, (coef, _, divisor, size, stride)) in p.dims.iter().enumerate() {
                    let r = red_part(coef, lanes);
                    let row = &lanes.spatial[k][d * LANES..d * LANES + n];
                    for l in 0..n {
                        let num = row[l] + r;
                        let q = if *divisor == 1 {
                            num
                        } else if num.rem_euclid(*divisor) == 0 {
                            num.div_euclid(*divisor)
                        } else {
                            lanes.valid[l] = false;
                            0
                        };
                        lanes.valid[l] &= q >= 0 && q < *size;
                        // Only an index inside the dimension has an offset: a
                        // padded read may index far outside (`h * 2^63 - 1`,
                        // found by tilec-fuzz), where `q * stride` overflows.
                        if lanes.valid[l] {
                            lanes.offsets[l] += q * stride;
                        }
                    }
                }
                for l in 0..n {
                    if !lanes.valid[l] {
                        lanes.offsets[l] = 0;
                    }
                }
            }
        }
        match dst {
            Reg::F(r) => tensor.gather_f64(&lanes.offsets[..n], &mut lanes.f[r * LANES..r * LANES + n]),
            Reg::I(r) => tensor.gather_i64(&lanes.offsets[..n], &mut lanes.i[r * LANES..r * LANES + n]),
        }
        if let Some(p) = &plan.padded {
            for l in 0..n {
                if !lanes.valid[l] {
                    match dst {
                        Reg::F(r) => lanes.f[r * LANES + l] = p.pad_f,
                        Reg::I(r) => lanes.i[r * LANES + l] = p.pad_i,
                    }
                }
            }
        }
    }
}

/// `out = round(op(x))`, specialised per op so the loop body is branch-free.
fn unary_f(op: UnaryOp, ty: ElemType, x: &[f64], out: &mut [f64]) {
    macro_rules! arms {
        ($($v:ident),*) => {
            match op {
                $(UnaryOp::$v => for (o, &a) in out.iter_mut().zip(x) { *o = float_unary(UnaryOp::$v, a) },)*
            }
        };
    }
    arms!(Neg, Abs, Relu, Exp, Log, Sqrt, Rsqrt, Tanh, Erf, Sigmoid);
    round_lanes(ty, out);
}

fn binary_f(op: BinaryOp, ty: ElemType, x: &[f64], y: &[f64], out: &mut [f64]) {
    macro_rules! arms {
        ($($v:ident),*) => {
            match op {
                $(BinaryOp::$v => for ((o, &a), &b) in out.iter_mut().zip(x).zip(y) { *o = float_binary(BinaryOp::$v, a, b) },)*
            }
        };
    }
    arms!(Add, Sub, Mul, Div, Max, Min);
    round_lanes(ty, out);
}

fn combine_f(op: BinaryOp, ty: ElemType, acc: &mut [f64], vals: &[f64]) {
    macro_rules! arms {
        ($($v:ident),*) => {
            match op {
                $(BinaryOp::$v => for (a, &v) in acc.iter_mut().zip(vals) { *a = float_binary(BinaryOp::$v, *a, v) },)*
            }
        };
    }
    arms!(Add, Sub, Mul, Div, Max, Min);
    round_lanes(ty, acc);
}

fn round_lanes(ty: ElemType, xs: &mut [f64]) {
    match ty {
        ElemType::F32 => xs.iter_mut().for_each(|x| *x = *x as f32 as f64),
        ElemType::F16 => xs.iter_mut().for_each(|x| *x = half::f16::from_f64(*x).to_f64()),
        ElemType::BF16 => xs.iter_mut().for_each(|x| *x = half::bf16::from_f64(*x).to_f64()),
        ElemType::I8 | ElemType::U8 | ElemType::I32 => {}
    }
}

/// Row-major coordinates of flat index `i` in a box.
fn unflatten(mut i: usize, extents: &[i64]) -> Vec<i64> {
    let mut coords = vec![0i64; extents.len()];
    for d in (0..extents.len()).rev() {
        let e = extents[d] as usize;
        coords[d] = (i % e) as i64;
        i /= e;
    }
    coords
}

/// Advances row-major coordinates by one (wrapping to zero at the end).
fn increment(coords: &mut [i64], extents: &[i64]) {
    for d in (0..coords.len()).rev() {
        coords[d] += 1;
        if coords[d] < extents[d] {
            return;
        }
        coords[d] = 0;
    }
}
