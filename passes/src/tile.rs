//! `tile`: materialises the multi-level loop nest of every scheduled
//! compute op (Gensor Table I's tiling; §IV-A's per-level tile sizes).
//!
//! The compute op `%C = compute ... schedule "sm90" {...}` becomes a global
//! output buffer and a `kernel` holding the loop nest: loops follow the
//! target's loop-order template (`S.<level>`, `R.<level>`, `S.point`, ...),
//! one loop per axis and level with trip count `parent size / size` (the
//! outermost `ceil(extent / size)`; loops of trip 1 are left out). Spatial
//! values are `Σ iv_l · size_l + iv_point`. A local accumulator covering the
//! spatial tile inside the first reduction loop (on CPUs, the first that
//! runs more than once) is filled with the
//! combiner's identity, updated in the innermost body, then passed through
//! the epilogue and stored. Partial tiles are guarded. All loops are serial
//! here: `bind`, `cache`, `vthread`, `unroll` and `vectorize` refine them.

use crate::nest::{AxisTiles, OrderEntry, axis_tiles, entry_levels, loop_order, target_for};
use std::collections::HashMap;
use tilec::diag::{Diagnostic, Diagnostics, Span};
use tilec::ir::builder::Cursor;
use tilec::ir::*;
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};
use tilec::target::{SchedulePlan, Target, TargetKind};

pub static DECL: PassDecl = PassDecl {
    name: "tile",
    summary: "Materialise the loop nest of each scheduled compute op",
    description: "
Turns every compute op that has a schedule into an output buffer and a
`kernel` op holding the multi-level loop nest of its schedule, in the
target's loop-order template: per axis and tile level one loop over the
level's sub-tiles (within a level in the schedule's `order`, else in
declaration order), innermost the point tile; a local accumulator for the
spatial tile inside the first reduction loop (on CPUs the first that runs
more than once: a reduction level split into one tile holds no partial
sums, and the register tile's accumulator then covers the whole
reduction), initialised with the combiner's identity; the body's reads as loads (keeping their padding); the
fold as load-combine-store on the accumulator; the epilogue and the store of
the result after the reduction; `if` guards for partial tiles. When the
schedule's vector axis is a reduction axis, its point loop goes innermost
and the accumulator gets a dimension for its points (each vector lane keeps
its own partial result), folded by a loop tagged `<axis>.lanes` before the
epilogue. Loops are
serial and tagged `axis(<axis>.<level>)`; the other scheduling passes find
them by their tags. Compute ops without a schedule are left alone, unless
`unscheduled=serial`: then, on a CPU target, each gets the plain schedule
(one output point per iteration of the core-level loops, the whole
reduction innermost) so that any operator compiles without a search.",
    options: &[
        OptionDecl { name: "op", kind: OptionKind::Str, default: "", help: "only tile compute ops with this label (all when empty)" },
        OptionDecl {
            name: "unscheduled",
            kind: OptionKind::Enum(&["keep", "serial"]),
            default: "keep",
            help: "what to do with compute ops without a schedule: leave them, or give them the plain CPU schedule",
        },
    ],
    statistics: &[("kernels", "compute ops turned into loop nests"), ("loops", "loops created")],
    create: |o: &PassOptions| Box::new(Tile { only: o.str("op").to_string(), plain_when_unscheduled: o.str("unscheduled") == "serial" }),
};

pub struct Tile {
    only: String,
    plain_when_unscheduled: bool,
}

/// The schedule `unscheduled=serial` gives an op on a CPU target: spatial
/// tiles of one point at every level (so the core-level loops, which `bind`
/// spreads over the cores, run over the output points and the accumulator
/// is a scalar), reduction tiles of the whole extent (the reduction runs
/// innermost, in one loop per axis).
pub fn plain_cpu_schedule(c: &Compute, target: &Target) -> Schedule {
    let levels = target.tile_levels.len();
    let mut s = Schedule::new(target.name.clone());
    for a in c.axis_ids() {
        let axis = c.axis(a);
        let size = if axis.kind == AxisKind::Spatial { 1 } else { axis.extent.max(1) };
        s.tiles.push((axis.name.clone(), vec![size; levels]));
    }
    s
}

impl Pass for Tile {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        let mut diags = Diagnostics::new();
        for f in &mut module.funcs {
            let ops: Vec<Op> = f.regions[f.body].ops.clone();
            for op in ops {
                let Some(c) = f.ops[op].kind.as_compute() else { continue };
                if !self.only.is_empty() && c.label.as_deref() != Some(self.only.as_str()) {
                    continue;
                }
                let span = f.op_spans[op];
                let schedule = match (&c.schedule, self.plain_when_unscheduled, cx.target()) {
                    (Some(s), _, _) => s.clone(),
                    (None, false, _) => continue,
                    (None, true, Some(t)) if t.kind == TargetKind::Cpu => plain_cpu_schedule(c, t),
                    (None, true, t) => {
                        let why = match t {
                            Some(t) => format!("`{}` is a GPU target, and a GPU kernel needs a real schedule", t.name),
                            None => "the pipeline has no target (pass --target)".to_string(),
                        };
                        diags.push(
                            Diagnostic::error(format!("cannot give compute op a plain schedule: {why}"))
                                .at(span, "this op has no schedule")
                                .with_help("write a `schedule` for it, or run `search` before `tile`"),
                        );
                        continue;
                    }
                };
                let target = match target_for(cx, &schedule.target, span) {
                    Ok(t) => t,
                    Err(d) => {
                        diags.push(d);
                        continue;
                    }
                };
                let order = match loop_order(&target) {
                    Ok(o) => o,
                    Err(msg) => {
                        diags.push(Diagnostic::error(format!("target `{}`: {msg}", target.name)).at(span, "while tiling this op"));
                        continue;
                    }
                };
                let loops = tile_compute(f, op, &schedule, &target, &order);
                cx.bump("kernels", 1);
                cx.bump("loops", loops);
            }
        }
        diags.into_result()
    }
}

/// Which loop an induction variable belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
enum Level {
    Tile(usize),
    Point,
}

struct Builder<'a> {
    f: &'a mut Function,
    op: Op,
    c: Compute,
    axes: Vec<AxisTiles>,
    levels: usize,
    order: &'a [OrderEntry],
    span: Span,
    out: Value,
    /// The induction variable of each (axis, level) loop made so far.
    ivs: HashMap<(usize, Level), Value>,
    loops: u64,
    acc: Option<Value>,
    /// Position in `order` of the first reduction entry (where the
    /// accumulator is allocated).
    acc_pos: usize,
    level_names: Vec<String>,
    /// The schedule's vector axis: its point loop goes innermost, whatever
    /// the loop order, so that the order can choose the order of the tile
    /// loops (which panel stays in cache) without forbidding vectors along
    /// the axis that is contiguous in memory.
    vector_axis: Option<usize>,
    /// The vector axis when it is a reduction axis: its point loop goes
    /// innermost too, and the accumulator gets a dimension for its points,
    /// one partial result per lane, folded together before the store.
    lane_axis: Option<usize>,
    /// Each axis' place in the schedule's loop order (`Schedule::order`):
    /// within a tile level, loops go outermost first by rank.
    rank: Vec<usize>,
}

/// Replaces compute op `op` by its loop nest; returns the number of loops.
pub(crate) fn tile_compute(f: &mut Function, op: Op, schedule: &Schedule, target: &Target, order: &[OrderEntry]) -> u64 {
    let levels = target.tile_levels.len();
    let c = f.ops[op].kind.as_compute().expect("compute op").clone();
    let span = f.op_spans[op];
    let result = f.result(op);
    let out_ty = f.value_type(result).as_tensor().expect("verified: tensor result").clone();
    let pos = f.regions[f.body].ops.iter().position(|&o| o == op).expect("op in the function body");
    let hint = f.values[result].name.clone().unwrap_or_else(|| "out".to_string());
    let out = f.build_alloc(Cursor::at(f.body, pos), BufferType::new(out_ty.shape.clone(), out_ty.elem, MemScope::Global), &hint, span);

    // The kernel keeps the schedule, with the cached reads' names at hand.
    let mut kernel_schedule = schedule.clone();
    let body_region = f.ops[op].regions[0];
    let read_names: Vec<String> = (0..c.reads.len() + c.epilogue_reads.len())
        .map(|i| {
            let arg = if i < c.reads.len() {
                f.regions[body_region].args.get(i).copied()
            } else {
                f.ops[op].regions.get(1).and_then(|&r| f.regions[r].args.get(1 + i - c.reads.len()).copied())
            };
            arg.and_then(|a| f.values[a].name.clone()).unwrap_or_else(|| format!("r{i}"))
        })
        .collect();
    for d in &mut kernel_schedule.cache {
        d.read_name = read_names.get(d.read).cloned().unwrap_or_default();
    }
    let (_, kernel_body) = f.build_kernel(Cursor::at(f.body, pos + 1), Kernel { label: c.label.clone(), schedule: kernel_schedule, prepack: false }, span);

    let plan = SchedulePlan::new(&c, schedule, target);
    let axes = axis_tiles(&c, &plan);
    let has_reduction = c.reduction_axes().next().is_some();
    let acc_pos = order.iter().position(|e| matches!(e, OrderEntry::Reduction(_) | OrderEntry::ReductionPoint)).unwrap_or(order.len());
    let level_names = target.tile_levels.iter().map(|l| l.name.clone()).collect();
    let vector_axis = plan.vector.map(|(a, _)| a.index());
    let rank = plan.ranks.clone();
    let lane_axis = vector_axis.filter(|&v| axes[v].kind == AxisKind::Reduction && axes[v].point_trip() > 1);
    let mut b = Builder { f, op, c, axes, levels, order, span, out, ivs: HashMap::new(), loops: 0, acc: None, acc_pos, level_names, vector_axis, lane_axis, rank };
    if target.kind == TargetKind::Cpu {
        b.acc_pos = b.first_reduction_with_loops().unwrap_or(acc_pos);
    }
    b.nest(0, kernel_body, false, has_reduction, &read_names);

    // Uses of the tensor now read the buffer; the compute op goes.
    b.f.replace_all_uses(result, out);
    b.f.remove_op(op);
    b.loops
}

impl Builder<'_> {
    fn tag(&self, axis: usize, level: Level) -> LoopTag {
        let level = match level {
            Level::Tile(l) => TagLevel::Tile(self.level_names[l].clone()),
            Level::Point => TagLevel::Point,
        };
        LoopTag { axis: self.axes[axis].name.clone(), level, reduction: self.axes[axis].kind == AxisKind::Reduction }
    }

    /// Loops of order entry `k`: (axis, level, trip), trip > 1 only,
    /// outer levels first, axes in the schedule's loop order within a level
    /// (the vector axis last among point loops).
    fn entry_loops(&self, k: usize) -> Vec<(usize, Level, u64)> {
        let spatial = |a: &AxisTiles| a.kind == AxisKind::Spatial;
        let levels: Vec<Level> = match self.order[k] {
            OrderEntry::Spatial(_) | OrderEntry::Reduction(_) => entry_levels(self.order, k).into_iter().map(Level::Tile).collect(),
            OrderEntry::SpatialPoint | OrderEntry::ReductionPoint => vec![Level::Point],
            OrderEntry::VThread => Vec::new(),
        };
        let wants = |a: &AxisTiles| match self.order[k] {
            OrderEntry::Spatial(_) | OrderEntry::SpatialPoint => spatial(a),
            OrderEntry::Reduction(_) | OrderEntry::ReductionPoint => !spatial(a),
            OrderEntry::VThread => false,
        };
        let mut out = Vec::new();
        for level in levels {
            let mut axes: Vec<usize> = (0..self.axes.len()).filter(|&i| wants(&self.axes[i])).collect();
            axes.sort_by_key(|&i| self.rank[i]);
            if level == Level::Point {
                axes.sort_by_key(|&i| Some(i) == self.vector_axis);
                // A reduction vector axis' point loop is made innermost of
                // all, by `nest`.
                axes.retain(|&i| Some(i) != self.lane_axis);
            }
            for (i, a) in axes.into_iter().map(|i| (i, &self.axes[i])) {
                let trip = match level {
                    Level::Tile(l) => a.trip(l),
                    Level::Point => a.point_trip(),
                };
                if trip > 1 {
                    out.push((i, level, trip));
                }
            }
        }
        out
    }

    /// The first reduction entry of the order with a loop that runs more
    /// than once. On a CPU the accumulator goes there, not at the first
    /// reduction entry: a reduction level whose loops all run once (the
    /// whole reduction inside one of its tiles, `k = [1024, 1024, 32]`)
    /// splits nothing, and an accumulator above the spatial loops inside
    /// it would hold the outer tile's partial sums in memory (8 x 512
    /// i32 for the int8 GEMM 1024), then copy them to the output, where
    /// the inner tile's (4 x 64) stay in registers through the whole
    /// reduction and are stored to the output once. (On GPUs the
    /// accumulator's level is the thread's, which `bind` and `vthread`
    /// rely on; left as it is.)
    fn first_reduction_with_loops(&self) -> Option<usize> {
        (self.acc_pos..self.order.len()).find(|&k| matches!(self.order[k], OrderEntry::Reduction(_) | OrderEntry::ReductionPoint) && !self.entry_loops(k).is_empty())
    }

    fn make_loops(&mut self, mut region: Region, loops: &[(usize, Level, u64)]) -> Region {
        for &(axis, level, trip) in loops {
            let tag = self.tag(axis, level);
            let hint = format!("{}_{}", tag.axis, tag.level);
            let (_, body, iv) = self.f.build_for(Cursor::end(region), trip, Mapping::Serial, Some(tag), &hint, self.span);
            self.ivs.insert((axis, level), iv);
            self.loops += 1;
            region = body;
        }
        region
    }

    /// The value of axis `a` from the loops made so far.
    fn axis_value(&self, a: usize) -> AffineExpr<Value> {
        let axis = &self.axes[a];
        let mut terms = Vec::new();
        for l in 0..self.levels {
            if let Some(&iv) = self.ivs.get(&(a, Level::Tile(l))) {
                terms.push((iv, axis.sizes[l] as i64));
            }
        }
        if let Some(&iv) = self.ivs.get(&(a, Level::Point)) {
            terms.push((iv, 1));
        }
        AffineExpr::from_parts(terms, 0, 1).expect("tile sizes are small")
    }

    /// The part of axis `a`'s value that loops after order position `pos`
    /// contribute (its index in the accumulator tile).
    fn inner_value(&self, a: usize, pos: usize) -> AffineExpr<Value> {
        let axis = &self.axes[a];
        let mut terms = Vec::new();
        for k in pos..self.order.len() {
            match self.order[k] {
                OrderEntry::Spatial(_) => {
                    for l in entry_levels(self.order, k) {
                        if let Some(&iv) = self.ivs.get(&(a, Level::Tile(l))) {
                            terms.push((iv, axis.sizes[l] as i64));
                        }
                    }
                }
                OrderEntry::SpatialPoint => {
                    if let Some(&iv) = self.ivs.get(&(a, Level::Point)) {
                        terms.push((iv, 1));
                    }
                }
                _ => {}
            }
        }
        AffineExpr::from_parts(terms, 0, 1).expect("tile sizes are small")
    }

    /// Span of axis `a` covered by loops after order position `pos`.
    fn inner_span(&self, a: usize, pos: usize) -> u64 {
        let axis = &self.axes[a];
        (pos..self.order.len())
            .map(|k| match self.order[k] {
                OrderEntry::Spatial(_) => entry_levels(self.order, k).into_iter().map(|l| axis.trip(l)).product(),
                OrderEntry::SpatialPoint => axis.point_trip(),
                _ => 1,
            })
            .product()
    }

    /// The spatial axes in the order of the accumulator's dimensions: the
    /// order the output's indices use them, then any other in declaration
    /// order, except that the vector axis goes last (so the accumulator is
    /// contiguous along the vector loop, which then loads and stores whole
    /// vectors, whichever output dimension the vector axis indexes).
    fn spatial(&self) -> Vec<usize> {
        let mut axes: Vec<usize> = (0..self.axes.len()).filter(|&a| self.axes[a].kind == AxisKind::Spatial).collect();
        let ids: Vec<AxisId> = self.c.axis_ids().collect();
        let first_use = |a: usize| self.c.output.iter().position(|e| e.uses(ids[a])).unwrap_or(usize::MAX);
        axes.sort_by_key(|&a| (Some(a) == self.vector_axis, first_use(a)));
        axes
    }

    /// Builds the nest from order position `k` into `region`.
    fn nest(&mut self, k: usize, region: Region, in_reduction: bool, has_reduction: bool, read_names: &[String]) {
        if k == self.acc_pos && has_reduction && !in_reduction {
            self.accumulate(k, region, read_names);
            return;
        }
        if k == self.order.len() {
            let region = match self.lane_axis {
                Some(v) => self.make_loops(region, &[(v, Level::Point, self.axes[v].point_trip())]),
                None => region,
            };
            self.innermost(region, read_names);
            return;
        }
        let loops = self.entry_loops(k);
        let inner = self.make_loops(region, &loops);
        self.nest(k + 1, inner, in_reduction, has_reduction, read_names);
    }

    /// At the first reduction entry: allocate and fill the accumulator,
    /// build the reduction nest, then the store loops.
    fn accumulate(&mut self, k: usize, region: Region, read_names: &[String]) {
        let acc_ty = self.f.value_type(self.yield_value(0)).as_scalar().expect("verified: scalar yield");
        let mut shape: Vec<u64> = self.spatial().iter().map(|&a| self.inner_span(a, k)).collect();
        if let Some(v) = self.lane_axis {
            shape.push(self.axes[v].point_trip());
        }
        let acc = self.f.build_alloc(Cursor::end(region), BufferType::new(shape, acc_ty, MemScope::Local), "acc", self.span);
        let identity = self.c.combiner.expect("reduction axes have a combiner").identity(acc_ty);
        self.f.build_fill(Cursor::end(region), acc, identity, self.span);
        self.acc = Some(acc);
        self.nest(k, region, true, true, read_names);
        // Store loops: the spatial loops inside the accumulator's position
        // again, now reading the folded values.
        let saved: Vec<((usize, Level), Value)> = self.ivs.iter().map(|(k, v)| (*k, *v)).collect();
        let mut inner = region;
        for e in k..self.order.len() {
            if matches!(self.order[e], OrderEntry::Spatial(_) | OrderEntry::SpatialPoint) {
                let loops = self.entry_loops(e);
                inner = self.make_loops(inner, &loops);
            }
        }
        let mut acc_index: Vec<AffineExpr<Value>> = self.spatial().iter().map(|&a| self.inner_value(a, k)).collect();
        let guarded = self.guard(inner, false);
        if let Some(v) = self.lane_axis {
            acc_index.push(AffineExpr::constant(0));
            self.fold_lanes(guarded, acc, &acc_index, v);
        }
        let folded = self.f.build_load(Cursor::end(guarded), acc, &acc_index, None, None, Some("folded"), self.span);
        self.finish(guarded, folded, read_names);
        self.ivs = saved.into_iter().collect();
    }

    /// Folds the per-lane partial results of a reduction vector axis `v`
    /// into the first: `for %t: acc[.., 0] = acc[.., 0] ⊕ acc[.., t + 1]`
    /// (`at_first` indexes the first).
    fn fold_lanes(&mut self, region: Region, acc: Value, at_first: &[AffineExpr<Value>], v: usize) {
        let points = self.axes[v].point_trip();
        let tag = LoopTag { axis: self.axes[v].name.clone(), level: TagLevel::Lanes, reduction: true };
        let hint = format!("{}_lanes", self.axes[v].name);
        let (_, body, t) = self.f.build_for(Cursor::end(region), points - 1, Mapping::Serial, Some(tag), &hint, self.span);
        self.loops += 1;
        let mut at_lane = at_first.to_vec();
        *at_lane.last_mut().expect("the lane dimension") = AffineExpr::from_parts([(t, 1)], 1, 1).expect("small");
        self.combine_into(body, acc, at_first, |b| b.f.build_load(Cursor::end(body), acc, &at_lane, None, None, None, b.span));
    }

    /// `acc[index] = acc[index] ⊕ value`, with the op's combiner (`value`
    /// builds its operand after the load of `acc[index]`).
    fn combine_into(&mut self, region: Region, acc: Value, index: &[AffineExpr<Value>], value: impl FnOnce(&mut Self) -> Value) {
        let old = self.f.build_load(Cursor::end(region), acc, index, None, None, None, self.span);
        let value = value(self);
        let ty = self.f.value_type(old).as_scalar().expect("scalar");
        let op = tilec::ir::scalar::combiner_op(self.c.combiner.expect("reduction has a combiner"));
        let combined = self.f.build_op(Cursor::end(region), OpKind::Binary(op), vec![old, value], vec![Type::Scalar(ty)], self.span);
        let combined = self.f.result(combined);
        self.f.build_store(Cursor::end(region), combined, acc, index, self.span);
    }

    /// Wraps `region` in a guard for the partial tiles of the spatial axes
    /// (and the reduction axes when `with_reduction`); returns the region
    /// to continue in.
    fn guard(&mut self, region: Region, with_reduction: bool) -> Region {
        let conds: Vec<(AffineExpr<Value>, i64)> = (0..self.axes.len())
            .filter(|&a| self.axes[a].partial() && (with_reduction || self.axes[a].kind == AxisKind::Spatial))
            .map(|a| (self.axis_value(a), self.axes[a].extent as i64))
            .collect();
        if conds.is_empty() {
            return region;
        }
        let (_, body) = self.f.build_if(Cursor::end(region), &conds, self.span);
        body
    }

    fn yield_value(&self, region_idx: usize) -> Value {
        let r = self.f.ops[self.op].regions[region_idx];
        let last = *self.f.regions[r].ops.last().expect("verified: region ends with yield");
        self.f.ops[last].operands[0]
    }

    /// Clones the scalar ops of compute region `region_idx` into `at`,
    /// with its arguments bound to `args`; returns the yielded value.
    fn clone_region(&mut self, region_idx: usize, at: Region, args: &[Value]) -> Value {
        let src = self.f.ops[self.op].regions[region_idx];
        let mut map: HashMap<Value, Value> = self.f.regions[src].args.iter().copied().zip(args.iter().copied()).collect();
        for o in self.f.regions[src].ops.clone() {
            let data = self.f.ops[o].clone();
            if data.kind == OpKind::Yield {
                return map[&data.operands[0]];
            }
            let new = match &data.kind {
                OpKind::AxisIndex(a) => {
                    let ty = self.f.value_type(data.results[0]).as_scalar().expect("verified: scalar");
                    let e = self.axis_value(a.index());
                    self.f.build_index_value(Cursor::end(at), &e, ty, self.f.op_spans[o])
                }
                kind => {
                    let operands = data.operands.iter().map(|v| map[v]).collect();
                    let types = data.results.iter().map(|&r| self.f.value_type(r).clone()).collect();
                    let op = self.f.build_op(Cursor::end(at), kind.clone(), operands, types, self.f.op_spans[o]);
                    self.f.result(op)
                }
            };
            self.f.values[new].name = self.f.values[data.results[0]].name.clone();
            map.insert(data.results[0], new);
        }
        unreachable!("verified: compute regions end with yield")
    }

    /// Loads read `r` (a position in all reads) at the current loops.
    fn load_read(&mut self, at: Region, r: usize, read_names: &[String]) -> Value {
        let read = if r < self.c.reads.len() { self.c.reads[r].clone() } else { self.c.epilogue_reads[r - self.c.reads.len()].clone() };
        let tensor = self.f.ops[self.op].operands[r];
        let indices: Vec<AffineExpr<Value>> =
            read.indices.iter().map(|e| e.substitute(|a| self.axis_value(a.index())).expect("index arithmetic fits in 64 bits")).collect();
        let name = read_names[r].clone();
        self.f.build_load(Cursor::end(at), tensor, &indices, read.pad, Some(name.clone()), Some(&name), self.span)
    }

    /// The innermost body: the reads, the body, and the fold into the
    /// accumulator (or, without reductions, the epilogue and the store).
    fn innermost(&mut self, region: Region, read_names: &[String]) {
        let region = self.guard(region, true);
        let args: Vec<Value> = (0..self.c.reads.len()).map(|r| self.load_read(region, r, read_names)).collect();
        let value = self.clone_region(0, region, &args);
        match self.acc {
            Some(acc) => {
                let mut acc_index: Vec<AffineExpr<Value>> = self.spatial().iter().map(|&a| self.inner_value(a, self.acc_pos)).collect();
                if let Some(v) = self.lane_axis {
                    acc_index.push(AffineExpr::var(self.ivs[&(v, Level::Point)]));
                }
                self.combine_into(region, acc, &acc_index, |_| value);
            }
            None => self.finish(region, value, read_names),
        }
    }

    /// Applies the epilogue (if any) to `folded` and stores the result.
    fn finish(&mut self, region: Region, folded: Value, read_names: &[String]) {
        let value = if self.c.has_epilogue {
            let mut args = vec![folded];
            for r in 0..self.c.epilogue_reads.len() {
                args.push(self.load_read(region, self.c.reads.len() + r, read_names));
            }
            self.clone_region(1, region, &args)
        } else {
            folded
        };
        let out_index: Vec<AffineExpr<Value>> =
            self.c.output.iter().map(|e| e.substitute(|a| self.axis_value(a.index())).expect("index arithmetic fits in 64 bits")).collect();
        self.f.build_store(Cursor::end(region), value, self.out, &out_index, self.span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    const GEMM: &str = "func @gemm(%A: tensor<30x12xf32>, %B: tensor<12x20xf32>, %bias: tensor<20xf32>) -> tensor<30x20xf32> {
  %C = compute \"gemm\" (i: 30, j: 20) reduce sum (k: 12)
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<30x20xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  } epilogue(%acc) reads(%bv = %bias[j]) {
    %1 = add %acc, %bv : f32
    %2 = relu %1 : f32
    yield %2 : f32
  }
  return %C
}";

    fn tile_pass() -> Tile {
        Tile { only: String::new(), plain_when_unscheduled: false }
    }


    #[test]
    fn gemm_tiles_for_gpu_and_cpu_with_partial_tiles() {
        let mut m = parse(GEMM);
        set_schedule(&mut m, schedule("test-gpu", &[("i", &[16, 4]), ("j", &[8, 2]), ("k", &[8, 2])]));
        let out = check_equivalent(&m, &target(GPU), &mut [&mut tile_pass()], 1);
        let f = &out.funcs[0];
        assert!(f.walk().iter().all(|&o| f.ops[o].kind.as_compute().is_none()), "the compute op is gone");
        let loops = f.walk().iter().filter(|&&o| matches!(f.ops[o].kind, OpKind::For(_))).count();
        assert!(loops >= 8, "{loops} loops");

        let mut m = parse(GEMM);
        set_schedule(&mut m, schedule("test-cpu", &[("i", &[16, 8, 4]), ("j", &[20, 10, 5]), ("k", &[12, 6, 3])]));
        check_equivalent(&m, &target(CPU), &mut [&mut tile_pass()], 2);
    }

    #[test]
    fn convolutions_pooling_and_elementwise_tile() {
        let conv = "func @conv(%x: tensor<1x3x9x9xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x5x5xf32> {
  %y = compute (n: 1, f: 4, oh: 5, ow: 5) reduce sum (c: 3, r: 3, s: 3)
      reads(%xv = %x[n, c, oh * 2 + r - 1, ow * 2 + s - 1] pad(0.0), %wv = %w[f, c, r, s]) -> tensor<1x4x5x5xf32>[n, f, oh, ow] {
    %0 = mul %xv, %wv : f32
    yield %0 : f32
  }
  return %y
}";
        let mut m = parse(conv);
        set_schedule(&mut m, schedule("test-gpu", &[("f", &[2, 1]), ("oh", &[4, 2]), ("ow", &[5, 5]), ("c", &[2, 1])]));
        check_equivalent(&m, &target(GPU), &mut [&mut tile_pass()], 3);

        let ew = "func @ew(%x: tensor<7x5xf32>) -> tensor<7x5xf32> {
  %y = compute (i: 7, j: 5) reads(%v = %x[i, j]) -> tensor<7x5xf32>[i, j] {
    %p = index i : f32
    %0 = add %v, %p : f32
    yield %0 : f32
  }
  return %y
}";
        let mut m = parse(ew);
        set_schedule(&mut m, schedule("test-cpu", &[("i", &[4, 2, 1]), ("j", &[5, 5, 5])]));
        check_equivalent(&m, &target(CPU), &mut [&mut tile_pass()], 4);
    }

    #[test]
    fn unscheduled_ops_are_left_alone() {
        let m = parse(GEMM);
        let out = check_equivalent(&m, &target(GPU), &mut [&mut tile_pass()], 5);
        assert!(out.funcs[0].walk().iter().any(|&o| out.funcs[0].ops[o].kind.as_compute().is_some()));
    }
}
