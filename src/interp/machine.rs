//! Execution of whole functions, level 0 and loop-level ops alike.
//!
//! Level-0 compute ops go to the vectorised evaluator (`compute.rs`);
//! everything else is walked op by op. The GPU model is the spec's:
//!
//! - block-mapped loops and parallel loops run their iterations as
//!   independent *agents* (one after another here); two agents touching the
//!   same element of a buffer they share, with at least one write, is a race
//!   and an error;
//! - the body of a thread-mapped loop (or a directly nested set of them)
//!   runs all its threads together in *phases* delimited by barriers: each
//!   op between two barriers runs for every thread before the next op, and
//!   loops containing barriers run in lockstep (their trip counts are
//!   static, so uniform); within a phase, a thread reading what another
//!   thread wrote, or two threads writing one element, is a race — the
//!   missing barrier is reported, not tolerated;
//! - buffers start uninitialised; reading an element never written is an
//!   error (it would be garbage on hardware).
//!
//! This walker is for correctness on small shapes; it is not fast.
//!
//! Memory: every tensor and buffer is counted against the run's
//! [`MemoryBudget`] before it is allocated (see `memory.rs`); buffers
//! allocated inside a loop body, `if` or kernel are freed when that region
//! ends, since no value defined in a region is visible outside it.

use super::compute;
use super::memory::{MemoryBudget, MemoryError, try_filled};
use super::tensor::Tensor;
use super::{InterpError, Limits};
use crate::ir::ops::round_to;
use crate::ir::scalar;
use crate::ir::*;
use std::borrow::Cow;
use std::collections::HashSet;

/// A runtime value.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Val {
    Index(i64),
    F(f64),
    I(i64),
    Buf(usize),
}

/// Race bookkeeping for one element: the last writer and reader as
/// `(epoch << 32) | (agent + 1)`; `READERS` marks several readers.
#[derive(Clone, Default)]
struct RaceCell {
    write: u64,
    read: u64,
}

const READERS: u64 = u32::MAX as u64;

struct Buffer<'i> {
    /// The function's inputs are borrowed, never copied.
    data: Cow<'i, Tensor>,
    /// Which elements have been written; `None` when all have (inputs
    /// and compute results).
    init: Option<Vec<bool>>,
    name: String,
    /// Bytes counted against the budget for it, released when it is freed.
    charged: u64,
    /// Function inputs and compute results: never written after creation,
    /// so never raced on.
    readonly: bool,
    /// Allocated by this thread inside a thread region (private to it).
    owner_thread: Option<u32>,
    /// Allocated inside this block or parallel iteration (private to it).
    owner_agent: Option<u32>,
    /// Between threads of a block (phases delimited by barriers).
    thread_races: Vec<RaceCell>,
    /// Between blocks of a grid / iterations of a parallel loop.
    agent_races: Vec<RaceCell>,
}

impl Buffer<'_> {
    fn written(&self, elem: usize) -> bool {
        self.init.as_ref().is_none_or(|init| init[elem])
    }

    fn first_unwritten(&self) -> Option<usize> {
        self.init.as_ref()?.iter().position(|&x| !x)
    }
}

/// Bytes of race bookkeeping per element of a shared buffer.
const RACE_CELL_BYTES: u64 = std::mem::size_of::<RaceCell>() as u64;

/// Bytes of scratch per output point while a compute op runs: its value
/// (f64 or i64) and its offset in the output.
const COMPUTE_SCRATCH_BYTES: u64 = 16;

/// Per-thread (or, outside thread regions, the only) value environment.
#[derive(Clone)]
struct Env {
    vals: Vec<Option<Val>>,
}

impl Env {
    fn get(&self, v: Value) -> Result<Val, InterpError> {
        self.vals[v.index()].ok_or_else(|| InterpError::new(format!("value #{} used before it was defined", v.as_u32())))
    }

    fn set(&mut self, v: Value, x: Val) {
        self.vals[v.index()] = Some(x);
    }
}

pub(super) struct Machine<'f, 'i> {
    f: &'f Function,
    buffers: Vec<Buffer<'i>>,
    budget: MemoryBudget,
    /// Ops that contain a barrier (or are one).
    has_barrier: HashSet<Op>,
    /// The thread running now inside a thread region, how many threads the
    /// region has, and the barrier phase.
    thread: Option<u32>,
    thread_count: Option<u32>,
    phase: u64,
    /// The block or parallel iteration running now, and its epoch.
    agent: Option<u32>,
    agent_epoch: u64,
}

impl<'f, 'i> Machine<'f, 'i> {
    pub(super) fn new(f: &'f Function, limits: &Limits) -> Self {
        let mut has_barrier = HashSet::new();
        for op in f.walk() {
            if f.ops[op].kind == OpKind::Barrier {
                has_barrier.insert(op);
                has_barrier.extend(f.ancestors(op));
            }
        }
        Machine { f, buffers: Vec::new(), budget: MemoryBudget::new(limits), has_barrier, thread: None, thread_count: None, phase: 0, agent: None, agent_epoch: 0 }
    }

    /// Adds a buffer whose `charged` bytes are already counted. `init`:
    /// the written-element flags, `None` for a tensor (an input or a
    /// compute result), which is read-only and written everywhere.
    fn push_buffer(&mut self, data: Cow<'i, Tensor>, init: Option<Vec<bool>>, name: String, charged: u64) -> usize {
        self.buffers.push(Buffer {
            data,
            readonly: init.is_none(),
            init,
            name,
            charged,
            owner_thread: self.thread,
            owner_agent: self.agent,
            thread_races: Vec::new(),
            agent_races: Vec::new(),
        });
        self.buffers.len() - 1
    }

    /// An input of the function: borrowed, but counted, since it is live
    /// for the whole run.
    fn input_buffer(&mut self, t: &'i Tensor, name: String) -> Result<usize, InterpError> {
        let bytes = t.ty.size_bytes();
        self.budget.reserve(bytes, || format!("input {name} ({})", t.ty))?;
        Ok(self.push_buffer(Cow::Borrowed(t), None, name, bytes.unwrap_or(0)))
    }

    /// A fresh, unwritten buffer of type `bt`, counted before it is allocated.
    fn alloc_buffer(&mut self, bt: &BufferType, name: String) -> Result<usize, InterpError> {
        let ty = bt.as_tensor_type();
        let what = || format!("buffer {name} ({bt})");
        let bytes = ty.size_bytes();
        self.budget.reserve(bytes, what)?;
        let flags = ty.num_elements();
        self.budget.reserve(flags, || format!("the interpreter's written-element flags for {name} (1 byte per element)"))?;
        let data = Tensor::try_zeros(&ty).map_err(|_| MemoryError::refused(what(), bytes.unwrap_or(u64::MAX)))?;
        let init = try_filled(data.len(), false).map_err(|_| MemoryError::refused(format!("the written-element flags for {name}"), data.len() as u64))?;
        let charged = bytes.unwrap_or(0) + flags.unwrap_or(0);
        Ok(self.push_buffer(Cow::Owned(data), Some(init), name, charged))
    }

    /// Frees the buffers from `mark` on: those allocated in a region that
    /// has ended (no value defined in it is visible any more).
    fn free_from(&mut self, mark: usize) {
        for b in self.buffers.drain(mark..) {
            self.budget.release(b.charged);
        }
    }

    fn name_of(&self, v: Value) -> String {
        match &self.f.values[v].name {
            Some(n) => format!("%{n}"),
            None => format!("#{}", v.as_u32()),
        }
    }

    /// Runs the function on `inputs` and returns its results.
    pub(super) fn run(mut self, inputs: &'i [Tensor]) -> Result<Vec<Tensor>, InterpError> {
        let f = self.f;
        let mut env = Env { vals: vec![None; f.values.len()] };
        for (&p, t) in f.params.iter().zip(inputs) {
            let b = self.input_buffer(t, self.name_of(p))?;
            env.set(p, Val::Buf(b));
        }
        let ops = f.regions[f.body].ops.clone();
        for op in ops {
            if let OpKind::Return = f.ops[op].kind {
                return self.results(op, &env);
            }
            self.exec(op, &mut env)?;
        }
        Err(InterpError::new(format!("@{} has no `return`", f.name)))
    }

    /// The returned tensors: moved out of their buffers, copied (and
    /// counted) only where a buffer is returned twice or is an input.
    fn results(&mut self, ret: Op, env: &Env) -> Result<Vec<Tensor>, InterpError> {
        let f = self.f;
        let mut bufs = Vec::new();
        for (i, &v) in f.ops[ret].operands.iter().enumerate() {
            let Val::Buf(b) = env.get(v)? else { return Err(InterpError::new("`return` of a non-tensor")) };
            if let Some(e) = self.buffers[b].first_unwritten() {
                return Err(InterpError::new(format!("result {i} ({}) has element {e} never written", self.buffers[b].name)));
            }
            bufs.push(b);
        }
        let mut out = Vec::new();
        for (i, &b) in bufs.iter().enumerate() {
            let returned_again = bufs[i + 1..].contains(&b);
            let buf = &mut self.buffers[b];
            let data = match &mut buf.data {
                Cow::Owned(t) if !returned_again => std::mem::replace(&mut t.data, super::TensorData::F32(Vec::new())),
                t => {
                    let bytes = t.ty.size_bytes();
                    let what = || format!("result {i} ({}, {})", buf.name, t.ty);
                    self.budget.reserve(bytes, what)?;
                    t.try_clone().map_err(|_| MemoryError::refused(format!("result {i} ({})", buf.name), bytes.unwrap_or(u64::MAX)))?.data
                }
            };
            out.push(Tensor { ty: f.result_types[i].clone(), data });
        }
        Ok(out)
    }

    fn buf_of(&self, env: &Env, v: Value) -> Result<usize, InterpError> {
        match env.get(v)? {
            Val::Buf(b) => Ok(b),
            other => Err(InterpError::new(format!("{} is not a buffer or tensor ({other:?})", self.name_of(v)))),
        }
    }

    fn eval_index(&self, op: Op, env: &Env, e: &AffineExpr<Dim>) -> Result<i64, InterpError> {
        let operands = &self.f.ops[op].operands;
        let mut err = None;
        let n = e.eval_numerator(|d| match env.get(operands[d.index()]) {
            Ok(Val::Index(i)) => i,
            Ok(_) | Err(_) => {
                err = Some(InterpError::new("index expression over a non-index value"));
                0
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        Ok(n)
    }

    /// Row-major offset of `idx` in `shape`, or `None` if out of bounds.
    fn offset(shape: &[u64], idx: &[i64]) -> Option<usize> {
        let mut off = 0usize;
        for (&i, &n) in idx.iter().zip(shape) {
            if i < 0 || i as u64 >= n {
                return None;
            }
            off = off * n as usize + i as usize;
        }
        Some(off)
    }

    /// Records an access for race detection; `Err` on a race.
    fn track(&mut self, b: usize, elem: usize, write: bool) -> Result<(), InterpError> {
        let (thread, phase, agent, epoch) = (self.thread, self.phase, self.agent, self.agent_epoch);
        let shared_by_threads = thread.is_some() && self.buffers[b].owner_thread.is_none();
        let shared_by_agents = agent.is_some() && self.buffers[b].owner_agent.is_none();
        if shared_by_threads && self.buffers[b].thread_races.is_empty() {
            self.buffers[b].thread_races = self.race_cells(b, "threads")?;
        }
        if shared_by_agents && self.buffers[b].agent_races.is_empty() {
            self.buffers[b].agent_races = self.race_cells(b, "blocks or parallel iterations")?;
        }
        let buf = &mut self.buffers[b];
        let check = |cells: &mut Vec<RaceCell>, epoch: u64, who: u32| -> Option<&'static str> {
            let cell = &mut cells[elem];
            let me = (epoch << 32) | (who as u64 + 1);
            let same_epoch = |x: u64| x >> 32 == epoch && x & 0xffff_ffff != 0;
            if write {
                if same_epoch(cell.write) && cell.write != me {
                    return Some("two writes");
                }
                if same_epoch(cell.read) && (cell.read & 0xffff_ffff == READERS || cell.read != me) {
                    return Some("a read and a write");
                }
                cell.write = me;
            } else {
                if same_epoch(cell.write) && cell.write != me {
                    return Some("a write and a read");
                }
                cell.read = if same_epoch(cell.read) && cell.read != me { (epoch << 32) | READERS } else { me };
            }
            None
        };
        if let (Some(t), true) = (thread, shared_by_threads) {
            {
                if let Some(what) = check(&mut buf.thread_races, phase, t) {
                    return Err(InterpError::new(format!(
                        "data race on {} element {elem}: {what} by different threads between two barriers (is a barrier missing?)",
                        buf.name
                    )));
                }
            }
        }
        if let (Some(a), true) = (agent, shared_by_agents) {
            {
                if let Some(what) = check(&mut buf.agent_races, epoch, a) {
                    return Err(InterpError::new(format!(
                        "data race on {} element {elem}: {what} by different blocks or parallel iterations",
                        buf.name
                    )));
                }
            }
        }
        Ok(())
    }

    /// Race records for every element of buffer `b`, shared between
    /// `sharers`: counted with the buffer, freed with it.
    fn race_cells(&mut self, b: usize, sharers: &str) -> Result<Vec<RaceCell>, InterpError> {
        let n = self.buffers[b].data.len();
        let bytes = (n as u64).saturating_mul(RACE_CELL_BYTES);
        let what = || format!("the interpreter's race records for {}, shared by {sharers} ({RACE_CELL_BYTES} bytes per element)", self.buffers[b].name);
        self.budget.reserve(Some(bytes), what)?;
        let cells = try_filled(n, RaceCell::default()).map_err(|_| MemoryError::refused(what(), bytes))?;
        self.buffers[b].charged += bytes;
        Ok(cells)
    }

    fn read_elem(&mut self, b: usize, elem: usize, what: &str) -> Result<Val, InterpError> {
        if !self.buffers[b].written(elem) {
            let hint = if self.thread.is_some() && self.buffers[b].owner_thread.is_none() {
                " (another thread may write it later: is a barrier missing?)"
            } else {
                ""
            };
            return Err(InterpError::new(format!("{what} reads element {elem} of {}, which was never written{hint}", self.buffers[b].name)));
        }
        if !self.buffers[b].readonly {
            self.track(b, elem, false)?;
        }
        let t = &self.buffers[b].data;
        Ok(if t.ty.elem.is_int() { Val::I(t.get_i64(elem)) } else { Val::F(t.get_f64(elem)) })
    }

    fn write_elem(&mut self, b: usize, elem: usize, v: Val) -> Result<(), InterpError> {
        if self.buffers[b].readonly {
            return Err(InterpError::new(format!("store to {}, which is a tensor (read-only)", self.buffers[b].name)));
        }
        self.track(b, elem, true)?;
        let buf = &mut self.buffers[b];
        if let Some(init) = &mut buf.init {
            init[elem] = true;
        }
        match v {
            Val::F(x) => buf.data.to_mut().scatter_f64(&[elem as i64], &[x]),
            Val::I(x) => buf.data.to_mut().scatter_i64(&[elem as i64], &[x]),
            other => return Err(InterpError::new(format!("cannot store {other:?}"))),
        }
        Ok(())
    }

    fn literal_val(lit: Literal, ty: ElemType) -> Val {
        match scalar::normalize(ty, lit) {
            Literal::Int(i) => Val::I(i),
            Literal::Float(x) => Val::F(x),
        }
    }

    fn val_literal(v: Val) -> Literal {
        match v {
            Val::F(x) => Literal::Float(x),
            Val::I(i) | Val::Index(i) => Literal::Int(i),
            Val::Buf(_) => Literal::Int(0),
        }
    }

    /// Executes one op (outside a thread region, or for the current thread).
    fn exec(&mut self, op: Op, env: &mut Env) -> Result<(), InterpError> {
        let f = self.f;
        let data = &f.ops[op];
        let result_elem = || data.results.first().and_then(|&r| f.value_type(r).as_scalar());
        match &data.kind {
            OpKind::Compute(c) => {
                let mut operands = Vec::new();
                for &v in &data.operands {
                    let b = self.buf_of(env, v)?;
                    if self.buffers[b].first_unwritten().is_some() {
                        return Err(InterpError::new(format!("compute reads {}, which is not fully written", self.buffers[b].name)));
                    }
                    operands.push(b);
                }
                let r = data.results[0];
                let name = self.name_of(r);
                let out_ty = f.value_type(r).as_tensor().ok_or_else(|| InterpError::new("compute result is not a tensor"))?;
                let out_bytes = out_ty.size_bytes();
                self.budget.reserve(out_bytes, || format!("tensor {name} ({out_ty})"))?;
                let points = c.spatial_axes().try_fold(1u64, |n, a| n.checked_mul(c.axis(a).extent));
                let scratch = points.and_then(|p| p.checked_mul(COMPUTE_SCRATCH_BYTES));
                self.budget.reserve(scratch, || {
                    format!("the interpreter's scratch for computing {name} ({COMPUTE_SCRATCH_BYTES} bytes for each of its {} points)", points.map_or("2^64 or more".to_string(), |p| p.to_string()))
                })?;
                let inputs: Vec<&Tensor> = operands.iter().map(|&b| &*self.buffers[b].data).collect();
                let out = compute::eval(f, op, inputs, &name);
                self.budget.release(scratch.unwrap_or(0));
                let b = self.push_buffer(Cow::Owned(out?), None, name, out_bytes.unwrap_or(0));
                env.set(r, Val::Buf(b));
            }
            OpKind::Reshape => {
                // A view in compiled code; here a read-only copy under the
                // new shape (the operand is complete by now: only params
                // and finished results are reshaped).
                let b = self.buf_of(env, data.operands[0])?;
                if self.buffers[b].first_unwritten().is_some() {
                    return Err(InterpError::new(format!("reshape of {}, which is not fully written", self.buffers[b].name)));
                }
                let r = data.results[0];
                let name = self.name_of(r);
                let ty = f.value_type(r).as_tensor().ok_or_else(|| InterpError::new("reshape result is not a tensor"))?.clone();
                let bytes = ty.size_bytes();
                self.budget.reserve(bytes, || format!("tensor {name} ({ty})"))?;
                let out = Tensor::new(ty, self.buffers[b].data.data.clone()).map_err(|e| InterpError::new(format!("reshape to {name}: {}", e.0)))?;
                let v = self.push_buffer(Cow::Owned(out), None, name, bytes.unwrap_or(0));
                env.set(r, Val::Buf(v));
            }
            OpKind::Weight(name) => {
                return Err(InterpError::new(format!(
                    "weight \"{name}\" has no value: run the function with its weights as trailing parameters (`tilec::ir::weights::hoist_weights`; tilec-run does this with the weights file)"
                )));
            }
            OpKind::Alloc => {
                let r = data.results[0];
                let Some(bt) = f.value_type(r).as_buffer() else { return Err(InterpError::new("alloc of a non-buffer")) };
                let b = self.alloc_buffer(bt, self.name_of(r))?;
                env.set(r, Val::Buf(b));
            }
            OpKind::For(l) => self.exec_for(op, l.extent, l.mapping, env)?,
            OpKind::Load(a) => {
                let b = self.buf_of(env, data.operands[0])?;
                let v = self.load(op, a, b, env)?;
                env.set(data.results[0], v);
            }
            OpKind::Store(a) => {
                let v = env.get(data.operands[0])?;
                let b = self.buf_of(env, data.operands[1])?;
                let idx: Vec<i64> = a.indices.iter().map(|e| self.eval_index(op, env, e)).collect::<Result<_, _>>()?;
                let Some(off) = Self::offset(&self.buffers[b].data.ty.shape, &idx) else {
                    return Err(InterpError::new(format!("store to {} at {idx:?} is out of bounds", self.buffers[b].name)));
                };
                self.write_elem(b, off, v)?;
            }
            OpKind::Copy(c) => self.copy(op, c, env)?,
            OpKind::Intrinsic(x) => self.intrinsic(op, x, env)?,
            OpKind::Fill(lit) => {
                let b = self.buf_of(env, data.operands[0])?;
                let elem = self.buffers[b].data.ty.elem;
                let v = Self::literal_val(*lit, elem);
                for i in 0..self.buffers[b].data.len() {
                    self.write_elem(b, i, v)?;
                }
            }
            // Outside a thread region a barrier has nothing to wait for;
            // inside one, `exec_threads` handles it.
            OpKind::Barrier => {}
            OpKind::If(g) => {
                if self.guard_holds(op, g, env)? {
                    self.exec_region(data.regions[0], env)?;
                }
            }
            OpKind::Kernel(_) => self.exec_region(data.regions[0], env)?,
            OpKind::IndexValue(e) => {
                let x = self.eval_index(op, env, e)?;
                let ty = result_elem().ok_or_else(|| InterpError::new("index value of a non-scalar type"))?;
                env.set(data.results[0], if ty.is_int() { Val::I(scalar::wrap_int(ty, x)) } else { Val::F(round_to(ty, x as f64)) });
            }
            OpKind::Const(lit) => {
                let ty = result_elem().ok_or_else(|| InterpError::new("constant of a non-scalar type"))?;
                env.set(data.results[0], Self::literal_val(*lit, ty));
            }
            OpKind::Unary(u) => {
                let ty = result_elem().ok_or_else(|| InterpError::new("unary op of a non-scalar type"))?;
                let x = Self::val_literal(env.get(data.operands[0])?);
                env.set(data.results[0], Self::literal_val(scalar::unary(*u, ty, x), ty));
            }
            OpKind::Binary(bop) => {
                let ty = result_elem().ok_or_else(|| InterpError::new("binary op of a non-scalar type"))?;
                let (x, y) = (Self::val_literal(env.get(data.operands[0])?), Self::val_literal(env.get(data.operands[1])?));
                env.set(data.results[0], Self::literal_val(scalar::binary(*bop, ty, x, y), ty));
            }
            OpKind::Cast => {
                let to = result_elem().ok_or_else(|| InterpError::new("cast to a non-scalar type"))?;
                let from = f.value_type(data.operands[0]).as_scalar().ok_or_else(|| InterpError::new("cast from a non-scalar"))?;
                let x = Self::val_literal(env.get(data.operands[0])?);
                env.set(data.results[0], Self::literal_val(scalar::cast(from, to, x), to));
            }
            OpKind::AxisIndex(_) | OpKind::Yield | OpKind::Return => {
                return Err(InterpError::new(format!("`{}` outside the place it belongs", data.kind.mnemonic())));
            }
        }
        Ok(())
    }

    /// Runs the ops of `region`, then frees the buffers allocated in it.
    fn exec_region(&mut self, region: Region, env: &mut Env) -> Result<(), InterpError> {
        let mark = self.buffers.len();
        for o in self.f.regions[region].ops.clone() {
            self.exec(o, env)?;
        }
        self.free_from(mark);
        Ok(())
    }

    fn guard_holds(&self, op: Op, g: &Guard, env: &Env) -> Result<bool, InterpError> {
        for (e, bound) in &g.conds {
            if self.eval_index(op, env, e)? >= *bound {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn load(&mut self, op: Op, a: &Access, b: usize, env: &Env) -> Result<Val, InterpError> {
        let mut idx = Vec::with_capacity(a.indices.len());
        let mut inexact = false;
        for e in &a.indices {
            let n = self.eval_index(op, env, e)?;
            let d = e.divisor();
            if n.rem_euclid(d) != 0 {
                inexact = true;
            }
            idx.push(n.div_euclid(d));
        }
        let elem = self.buffers[b].data.ty.elem;
        let off = if inexact { None } else { Self::offset(&self.buffers[b].data.ty.shape, &idx) };
        match (off, a.pad) {
            (Some(off), _) => self.read_elem(b, off, "load"),
            (None, Some(pad)) => Ok(Self::literal_val(pad, elem)),
            (None, None) => Err(InterpError::new(format!("load from {} at {idx:?} is out of bounds (and has no pad value)", self.buffers[b].name))),
        }
    }

    fn copy(&mut self, op: Op, c: &CopyOp, env: &Env) -> Result<(), InterpError> {
        let data = &self.f.ops[op];
        let src = self.buf_of(env, data.operands[0])?;
        let dst = self.buf_of(env, data.operands[1])?;
        let so: Vec<i64> = c.src.iter().map(|e| self.eval_index(op, env, e)).collect::<Result<_, _>>()?;
        let d_o: Vec<i64> = c.dst.iter().map(|e| self.eval_index(op, env, e)).collect::<Result<_, _>>()?;
        // Walk the expanded box (the box itself unless a dimension is split).
        let sizes = c.expanded_sizes();
        let total: u64 = sizes.iter().product();
        // A cooperative copy inside a thread region is shared out: thread t
        // of T copies elements t, t + T, ...
        let (first, step) = match (c.cooperative, self.thread, self.thread_count) {
            (true, Some(t), Some(n)) => (t as u64, n as u64),
            _ => (0, 1),
        };
        let elem = self.buffers[dst].data.ty.elem;
        let mut e = first;
        while e < total {
            let mut rem = e;
            let mut expanded = vec![0i64; sizes.len()];
            for x in (0..sizes.len()).rev() {
                expanded[x] = (rem % sizes[x]) as i64;
                rem /= sizes[x];
            }
            let box_idx = c.box_point(&expanded);
            let s: Vec<i64> = so.iter().zip(&box_idx).enumerate().map(|(d, (o, i))| o + c.stride_of(d) as i64 * i).collect();
            let t: Vec<i64> = d_o.iter().enumerate().map(|(k, o)| o + expanded[c.box_dim(k)]).collect();
            let v = match (Self::offset(&self.buffers[src].data.ty.shape, &s), c.pad) {
                (Some(off), _) => self.read_elem(src, off, "copy")?,
                (None, Some(p)) => Self::literal_val(p, elem),
                (None, None) => return Err(InterpError::new(format!("copy from {} at {s:?} is out of bounds (and has no pad value)", self.buffers[src].name))),
            };
            let Some(doff) = Self::offset(&self.buffers[dst].data.ty.shape, &t) else {
                return Err(InterpError::new(format!("copy to {} at {t:?} is out of bounds", self.buffers[dst].name)));
            };
            self.write_elem(dst, doff, v)?;
            e += step;
        }
        Ok(())
    }

    /// One `intrinsic` op, with the rounding of its kind (the op's
    /// description in `ir::ops`): what the hardware instruction computes,
    /// so that tensorized kernels are checked against their own semantics.
    fn intrinsic(&mut self, op: Op, x: &IntrinsicCall, env: &Env) -> Result<(), InterpError> {
        let data = &self.f.ops[op];
        let bufs = [self.buf_of(env, data.operands[0])?, self.buf_of(env, data.operands[1])?, self.buf_of(env, data.operands[2])?];
        let mut origins = Vec::new();
        for t in x.tiles() {
            let o: Vec<(i64, i64)> = t.indices.iter().map(|e| Ok((self.eval_index(op, env, e)?, e.divisor()))).collect::<Result<_, InterpError>>()?;
            origins.push(o);
        }
        let elems = bufs.map(|b| self.buffers[b].data.ty.elem);
        // The element of operand `i` at intrinsic point `p`: its offset in
        // the buffer, or `None` outside it (or on an inexact division).
        let locate = |this: &Self, i: usize, p: [i64; 3]| -> Option<usize> {
            let t = x.tiles()[i];
            let mut idx = Vec::with_capacity(origins[i].len());
            for (d, &(num, div)) in origins[i].iter().enumerate() {
                if num.rem_euclid(div) != 0 {
                    return None;
                }
                idx.push(num.div_euclid(div) + x.offset(t, d, p));
            }
            Self::offset(&this.buffers[bufs[i]].data.ty.shape, &idx)
        };
        let read = |this: &mut Self, i: usize, p: [i64; 3]| -> Result<Val, InterpError> {
            match (locate(this, i, p), x.tiles()[i].pad) {
                (Some(off), _) => this.read_elem(bufs[i], off, "intrinsic"),
                (None, Some(pad)) => Ok(Self::literal_val(pad, elems[i])),
                (None, None) => Err(InterpError::new(format!("intrinsic reads {} out of bounds at point {p:?} (m, n, k)", this.buffers[bufs[i]].name))),
            }
        };
        let [_, _, k] = x.shape.map(|s| s as i64);
        let [m, n] = x.acc_shape().map(|s| s as i64);
        // A lane's fragment element (fm, fn) is the tile's point
        // `fragment_point`; otherwise the accumulator spans the tile.
        let lane = match &x.lane {
            Some([g, t]) => Some((self.eval_index(op, env, g)?, self.eval_index(op, env, t)?)),
            None => None,
        };
        let acc_elem = elems[0];
        for mi in 0..m {
            for ni in 0..n {
                let at = [mi, ni, 0];
                let (tm, tn) = match lane {
                    Some((g, t)) => IntrinsicCall::fragment_point(g, t, mi, ni),
                    None => (mi, ni),
                };
                let acc = read(self, 0, at)?;
                let mut products = Vec::with_capacity(k as usize);
                for ki in 0..k {
                    products.push((read(self, 1, [tm, tn, ki])?, read(self, 2, [tm, tn, ki])?));
                }
                let result = match (acc, x.kind) {
                    (Val::I(acc), kind) => {
                        let sum = products.iter().try_fold(acc, |s, &(a, b)| match (a, b) {
                            (Val::I(a), Val::I(b)) => Ok(s.wrapping_add(a.wrapping_mul(b))),
                            _ => Err(InterpError::new("intrinsic: integer accumulator with float operands")),
                        })?;
                        // A warp's integer mma saturates its result (PTX
                        // `.satfinite`, as nvgpu emits it); vector dot products wrap.
                        match (kind, acc_elem.int_range()) {
                            (IntrinsicKind::Mma, Some((lo, hi))) => Val::I(sum.clamp(lo, hi)),
                            _ => Val::I(scalar::wrap_int(acc_elem, sum)),
                        }
                    }
                    (Val::F(acc), kind) => {
                        let mut floats = Vec::with_capacity(products.len());
                        for &(a, b) in &products {
                            match (a, b) {
                                (Val::F(a), Val::F(b)) => floats.push((a, b)),
                                _ => return Err(InterpError::new("intrinsic: float accumulator with integer operands")),
                            }
                        }
                        Val::F(intrinsic_float_sum(kind, acc_elem, acc, &floats))
                    }
                    (other, _) => return Err(InterpError::new(format!("intrinsic: accumulator holds {other:?}"))),
                };
                let off = locate(self, 0, at).ok_or_else(|| InterpError::new(format!("intrinsic writes {} out of bounds at point {at:?} (m, n, k)", self.buffers[bufs[0]].name)))?;
                self.write_elem(bufs[0], off, result)?;
            }
        }
        Ok(())
    }

    fn exec_for(&mut self, op: Op, extent: u64, mapping: Mapping, env: &mut Env) -> Result<(), InterpError> {
        let f = self.f;
        let body = f.ops[op].regions[0];
        let iv = f.regions[body].args[0];
        match mapping {
            Mapping::Thread(_) | Mapping::Lane => {
                if self.thread.is_some() {
                    // Directly nested thread loops are gathered by the outer
                    // one; anything else is a structure we do not execute.
                    return Err(InterpError::new("thread-mapped loop inside a thread region that is not directly nested"));
                }
                self.exec_threads(op, env)
            }
            Mapping::Block(_) | Mapping::Parallel if self.agent.is_none() => {
                // A new grid (or parallel loop): its iterations are agents,
                // numbered across directly nested block loops.
                self.agent_epoch += 1;
                let nest = self.concurrent_nest(op);
                let extents: Vec<u64> = nest.iter().map(|&o| match &f.ops[o].kind {
                    OpKind::For(l) => l.extent,
                    _ => 1,
                }).collect();
                let total: u64 = extents.iter().product();
                let inner = f.ops[*nest.last().expect("nest has a loop")].regions[0];
                for linear in 0..total {
                    let mut rem = linear;
                    for (k, &o) in nest.iter().enumerate().rev() {
                        let v = f.regions[f.ops[o].regions[0]].args[0];
                        env.set(v, Val::Index((rem % extents[k]) as i64));
                        rem /= extents[k];
                    }
                    self.agent = Some(linear as u32);
                    let result = self.exec_region(inner, env);
                    self.agent = None;
                    result?;
                }
                Ok(())
            }
            _ => {
                for i in 0..extent as i64 {
                    env.set(iv, Val::Index(i));
                    self.exec_region(body, env)?;
                }
                Ok(())
            }
        }
    }

    /// The loop `op` and the block/parallel loops directly nested in it
    /// (each the only op of its parent's body), outermost first.
    fn concurrent_nest(&self, op: Op) -> Vec<Op> {
        let f = self.f;
        let mut nest = vec![op];
        loop {
            let body = f.ops[*nest.last().expect("non-empty")].regions[0];
            match f.regions[body].ops.as_slice() {
                [only] if matches!(&f.ops[*only].kind, OpKind::For(l) if matches!(l.mapping, Mapping::Block(_) | Mapping::Parallel)) => nest.push(*only),
                _ => return nest,
            }
        }
    }

    /// Runs a thread-mapped loop (with directly nested thread loops) as a
    /// block of threads.
    fn exec_threads(&mut self, op: Op, env: &mut Env) -> Result<(), InterpError> {
        let f = self.f;
        let mut nest = vec![op];
        loop {
            let body = f.ops[*nest.last().expect("non-empty")].regions[0];
            match f.regions[body].ops.as_slice() {
                [only] if matches!(&f.ops[*only].kind, OpKind::For(l) if l.mapping.is_gpu_thread()) => nest.push(*only),
                _ => break,
            }
        }
        let extents: Vec<u64> = nest.iter().map(|&o| match &f.ops[o].kind {
            OpKind::For(l) => l.extent,
            _ => 1,
        }).collect();
        let total: u64 = extents.iter().product();
        let mut envs: Vec<Env> = (0..total)
            .map(|linear| {
                let mut e = env.clone();
                let mut rem = linear;
                for (k, &o) in nest.iter().enumerate().rev() {
                    let v = f.regions[f.ops[o].regions[0]].args[0];
                    e.set(v, Val::Index((rem % extents[k]) as i64));
                    rem /= extents[k];
                }
                e
            })
            .collect();
        let inner = f.ops[*nest.last().expect("non-empty")].regions[0];
        self.phase += 1;
        self.thread_count = Some(total as u32);
        let mark = self.buffers.len();
        let result = self.exec_collective(&f.regions[inner].ops.clone(), &mut envs);
        self.thread = None;
        self.thread_count = None;
        self.phase += 1;
        result?;
        self.free_from(mark);
        Ok(())
    }

    /// Runs `ops` for all threads: barrier-free ops one at a time for every
    /// thread, ops containing barriers in lockstep.
    fn exec_collective(&mut self, ops: &[Op], envs: &mut [Env]) -> Result<(), InterpError> {
        let f = self.f;
        for &op in ops {
            if !self.has_barrier.contains(&op) {
                for (t, env) in envs.iter_mut().enumerate() {
                    self.thread = Some(t as u32);
                    self.exec(op, env)?;
                }
                continue;
            }
            match &f.ops[op].kind {
                OpKind::Barrier => self.phase += 1,
                OpKind::For(l) => {
                    if l.mapping.is_concurrent() {
                        return Err(InterpError::new("a barrier inside a block, thread or parallel loop nested in a thread region"));
                    }
                    let body = f.ops[op].regions[0];
                    let iv = f.regions[body].args[0];
                    let body_ops = f.regions[body].ops.clone();
                    for i in 0..l.extent as i64 {
                        for env in envs.iter_mut() {
                            env.set(iv, Val::Index(i));
                        }
                        let mark = self.buffers.len();
                        self.exec_collective(&body_ops, envs)?;
                        self.free_from(mark);
                    }
                }
                OpKind::If(g) => {
                    let mut taken = Vec::with_capacity(envs.len());
                    for env in envs.iter() {
                        taken.push(self.guard_holds(op, g, env)?);
                    }
                    if taken.iter().any(|&t| t != taken[0]) {
                        return Err(InterpError::new("a barrier inside a condition that differs between threads (they would not all reach it)"));
                    }
                    if taken.first().copied().unwrap_or(false) {
                        let mark = self.buffers.len();
                        self.exec_collective(&f.regions[f.ops[op].regions[0]].ops.clone(), envs)?;
                        self.free_from(mark);
                    }
                }
                OpKind::Kernel(_) => {
                    let mark = self.buffers.len();
                    self.exec_collective(&f.regions[f.ops[op].regions[0]].ops.clone(), envs)?;
                    self.free_from(mark);
                }
                other => return Err(InterpError::new(format!("`{}` contains a barrier, which is not supported", other.mnemonic()))),
            }
        }
        Ok(())
    }
}

/// The float result of one accumulator element of an intrinsic: `acc`
/// plus the products `(a, b)` in `k` order, rounded as the kind's hardware
/// does (the `intrinsic` op's description). Products of f16 and bf16
/// values are exact in f32, so each step rounds once.
fn intrinsic_float_sum(kind: IntrinsicKind, acc_elem: ElemType, acc: f64, products: &[(f64, f64)]) -> f64 {
    match kind {
        IntrinsicKind::Fma => match acc_elem {
            ElemType::F32 => products.iter().fold(acc as f32, |s, &(a, b)| (a as f32).mul_add(b as f32, s)) as f64,
            // An f16 or bf16 product and sum are exact in f64 before the
            // one rounding (at most 22 + 1 significant bits apart by less
            // than f64's exponent range).
            other => products.iter().fold(acc, |s, &(a, b)| round_to(other, a.mul_add(b, s))),
        },
        IntrinsicKind::Dot => {
            // vdpbf16ps: denormal inputs read as zero, denormal sums
            // flush to zero, the last pair first (Intel SDM, VDPBF16PS).
            let flush = |x: f32| if x.is_subnormal() { 0.0f32.copysign(x) } else { x };
            let sum = products.iter().rev().fold(flush(acc as f32), |s, &(a, b)| flush(s + flush(a as f32) * flush(b as f32)));
            round_to(acc_elem, sum as f64)
        }
        IntrinsicKind::Mma | IntrinsicKind::Wmma => products.iter().fold(acc, |s, &(a, b)| round_to(acc_elem, s + a * b)),
    }
}
