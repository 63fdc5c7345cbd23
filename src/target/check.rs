//! Resource verification: does a schedule fit what the target has?
//!
//! [`check_schedule`] checks what depends on the target's numbers — tile
//! sizes per tile level, memory levels named by cache directives, memory
//! footprints against capacities, threads and registers on GPUs, vector
//! widths. Structural rules (axes named exist, sizes divide, a read is
//! cached once, ...) are checked elsewhere; this check skips what it cannot
//! interpret rather than report it twice.
//!
//! # Footprints
//!
//! A tile of tile level `L` gives every axis `a` a range of
//! `t(a) = min(size of a at L, extent of a)` consecutive values; a
//! reduction axis ranges over its whole extent instead when the target's
//! loop order has no `R.<L>` loop (a CPU core's tile covers the whole
//! reduction). An axis the schedule does not tile ranges over its extent.
//!
//! The **footprint of a read** at `L` is the number of distinct elements
//! the tile reads times the element size, where the number of distinct
//! elements is the product over the tensor's dimensions of the number of
//! distinct index values of that dimension: for an index `(Σ cᵢ·aᵢ + c₀)
//! div d`, the numerator ranges over an interval of width `w` (exact:
//! `AffineExpr::numerator_range` with each `aᵢ` in `[0, t(aᵢ) - 1]`), which
//! holds at most `⌈w / d⌉` multiples of `d`; the count is that, but at most
//! `Π t(aᵢ)` (the points that index it) and at most the dimension's extent
//! (indices outside it are padding, not stored). The **output tile** is
//! counted the same way with the output's index expressions and element
//! type; the **accumulator tile** is one accumulator per spatial point,
//! `Π_spatial t(a)` times the accumulator's element size.
//!
//! The footprint of tile level `L`, whose memory level is `M`:
//! - `M` a hardware cache (`managed = false`): the footprint of every read
//!   but the streamed ones, plus the output tile. A read is **streamed**
//!   when the op touches each of its elements once: as many distinct
//!   elements as the op has iteration points (for an epilogue read, as it
//!   has output points), as a GEMV's matrix or a GEMM's `B` at `M = 1`.
//!   Nothing in it is reused, so keeping it in a cache gains nothing: it
//!   passes through (GTA's rules apply per read only where
//!   `HasDataReuse`);
//! - `M` software-managed: the footprints of the reads the schedule caches
//!   at `M`, plus, at the innermost tile level (GPU `thread`: registers),
//!   the accumulator tile.
//!
//! Reads cached at a managed memory level that no tile level uses (a CPU's
//! `registers`) are counted at the innermost tile level, against that
//! memory level.
//!
//! The footprint must fit the capacity one tile gets: `capacity_bytes` for
//! levels counted per unit, block or thread; for a level counted per device
//! (a shared L3) used by a tile level that is, or lies inside, a
//! `parallel`/`grid` level, the tiles running at once share it, and each
//! gets `capacity_bytes / compute.units`.
//!
//! # GPU limits
//!
//! Threads per block = `Π` over spatial axes of (size at the `grid` level /
//! size at the `threads` level), at most `max_threads_per_block`. Registers
//! per thread are estimated as the accumulator tile in 32-bit registers,
//! plus the reads cached in registers (their footprint in 32-bit words),
//! plus one register per other read, plus [`INDEX_REGISTERS`](super::resources::INDEX_REGISTERS) for indices,
//! addresses and loop counters; at most `max_registers_per_thread`. Virtual
//! threads split spatial axes only.
//!
//! # Vectors
//!
//! `vector = {a = w}` needs `w × bits ≤ isa.vector_bits` (when that is not
//! 0), where `bits` is the widest element the lanes carry: the accumulator
//! (along a reduction axis each lane accumulates its own partial result),
//! the output when `a` is spatial, and every read indexed by `a`.
//!
//! The counting itself (footprints, capacities, threads, registers, lanes)
//! is `resources.rs`'s [`OpResources`], which the search's model shares.

use super::plan::{MemoryId, SchedulePlan};
use super::resources::{FootprintPart, LaneElement, OpResources};
use super::{MemoryLevel, Target, TargetKind};
use crate::diag::{Diagnostic, Diagnostics, Span, closest};
use crate::ir::{AxisId, AxisKind, Compute, ElemType, Function, Op, OpKind, Schedule, TensorType};

/// What [`check_schedule`] needs about a compute op that [`Compute`] does
/// not carry: the tensors' types and the reads' names. Build it with
/// [`ComputeInfo::of`].
#[derive(Clone, Debug, PartialEq)]
pub struct ComputeInfo {
    /// Per read (body reads, then epilogue reads): a name for messages
    /// (`%a`), where it is defined, and the type of the tensor it reads.
    pub reads: Vec<ReadInfo>,
    pub output: TensorType,
    /// The accumulator's element type: what the body yields.
    pub acc: ElemType,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReadInfo {
    pub name: String,
    pub span: Span,
    pub tensor: TensorType,
    /// Does the op touch each element of this read once
    /// ([`OpResources::streamed`](super::resources::OpResources::streamed))?
    /// Worked out once here: the search asks for every footprint.
    pub streamed: bool,
}

impl ComputeInfo {
    /// The information of compute op `op` of `f`; `None` if `op` is not a
    /// well-formed compute op (the verifier reports that).
    pub fn of(f: &Function, op: Op) -> Option<ComputeInfo> {
        let data = f.op(op);
        let OpKind::Compute(c) = &data.kind else { return None };
        let output = f.value_type(*data.results.first()?).as_tensor()?.clone();
        let body = *data.regions.first()?;
        let epilogue = if c.has_epilogue { Some(*data.regions.get(1)?) } else { None };
        // Body arguments name the body reads; the epilogue's first argument
        // is the accumulator, the rest name the epilogue reads.
        let mut names = f.region(body).args.clone();
        let acc = match epilogue {
            Some(e) => {
                let args = &f.region(e).args;
                names.extend(args.iter().skip(1));
                f.value_type(*args.first()?).as_scalar()?
            }
            None => output.elem,
        };
        let nreads = c.reads.len() + c.epilogue_reads.len();
        if data.operands.len() < nreads {
            return None;
        }
        let mut reads = Vec::new();
        for i in 0..nreads {
            let tensor = f.value_type(data.operands[i]).readable()?;
            let (name, span) = match names.get(i) {
                Some(&v) => (f.values[v].name.as_ref().map_or_else(|| format!("read {i}"), |n| format!("%{n}")), f.value_spans[v]),
                None => (format!("read {i}"), Span::DUMMY),
            };
            let streamed = super::resources::touches_each_once(c, i, &tensor);
            reads.push(ReadInfo { name, span, tensor, streamed });
        }
        Some(ComputeInfo { reads, output, acc })
    }
}

/// Checks that schedule `s` of compute op `c` fits the resources of target
/// `t` (see the module documentation for the definitions). Errors point at
/// `span` (the schedule), with the axes and reads involved as secondary
/// labels.
pub fn check_schedule(c: &Compute, info: &ComputeInfo, s: &Schedule, t: &Target, span: Span) -> Diagnostics {
    let plan = SchedulePlan::new(c, s, t);
    let mut k = Checker::new(c, info, &plan, t, span);
    let counts_ok = k.tile_counts(s);
    k.cache_directives(s);
    k.vthreads(s);
    k.vector(s);
    if counts_ok {
        k.resources();
    }
    k.diags
}

/// The resource part of [`check_schedule`] for a plan that is well formed
/// by construction (the search's points: one size per tile level, virtual
/// threads on spatial axes where the target has `V` loops, vector widths
/// within the lanes, reads staged in memory levels that take buffers):
/// footprints against capacities, and on GPUs threads and registers.
pub fn check_resources(c: &Compute, info: &ComputeInfo, plan: &SchedulePlan, t: &Target, span: Span) -> Diagnostics {
    let mut k = Checker::new(c, info, plan, t, span);
    k.resources();
    k.diags
}

/// [`check_schedule`] for compute op `op` of `f` with its own schedule,
/// and its `intrinsic` knob (`check/intrinsic.rs`: the target offers the
/// intrinsic, the choice is a mapping candidate, the tiles fit it);
/// errors point at the schedule (or the op when the schedule has no span).
/// Nothing to check (no schedule, not a compute op) is no error.
pub fn check_op_schedule(f: &Function, op: Op, t: &Target) -> Diagnostics {
    let Some(c) = f.op(op).kind.as_compute() else { return Diagnostics::new() };
    let (Some(s), Some(info)) = (&c.schedule, ComputeInfo::of(f, op)) else { return Diagnostics::new() };
    let span = if s.span.is_dummy() { f.op_spans[op] } else { s.span };
    let mut diags = check_schedule(c, &info, s, t, span);
    diags.extend(intrinsic::check_intrinsic(f, op, c, &info, s, t, span));
    diags
}

struct Checker<'a> {
    c: &'a Compute,
    info: &'a ComputeInfo,
    plan: &'a SchedulePlan,
    t: &'a Target,
    res: OpResources<'a>,
    span: Span,
    diags: Diagnostics,
}

/// One contribution to a footprint: what, its bytes, where it is defined.
struct Part {
    what: String,
    bytes: u64,
    span: Span,
    /// A read (not the accumulator or output tile).
    read: bool,
}

impl<'a> Checker<'a> {
    fn new(c: &'a Compute, info: &'a ComputeInfo, plan: &'a SchedulePlan, t: &'a Target, span: Span) -> Self {
        Checker { c, info, plan, t, res: OpResources::new(c, info, t), span, diags: Diagnostics::new() }
    }

    /// Footprints, and on GPUs threads per block (registers are checked
    /// with the footprints).
    fn resources(&mut self) {
        self.footprints();
        if self.t.kind == TargetKind::Cuda {
            self.threads_per_block();
        }
    }

    fn error(&self, message: String, label: &str) -> Diagnostic {
        Diagnostic::error(message).at(self.span, label)
    }

    fn axis_span(&self, name: &str) -> Span {
        self.c.axis_by_name(name).map_or(Span::DUMMY, |a| self.c.axis(a).span)
    }

    fn level_names(&self) -> String {
        self.t.tile_levels.iter().map(|l| format!("`{}`", l.name)).collect::<Vec<_>>().join(", ")
    }

    /// Each tiled axis has one size per tile level.
    fn tile_counts(&mut self, s: &Schedule) -> bool {
        let n = self.t.tile_levels.len();
        let mut ok = true;
        for (axis, sizes) in &s.tiles {
            // Unknown axes are the structural check's to report.
            if sizes.len() != n && self.c.axis_by_name(axis).is_some() {
                ok = false;
                let d = self
                    .error(
                        format!("axis `{axis}` has {} tile size{} but target `{}` has {n} tile level{} ({})", sizes.len(), plural(sizes.len()), self.t.name, plural(n), self.level_names()),
                        "wrong number of tile sizes",
                    )
                    .with_secondary(self.axis_span(axis), "axis declared here")
                    .with_help(format!("give `{axis}` one size per tile level, outermost first"));
                self.diags.push(d);
            }
        }
        ok
    }

    fn read_name(&self, read: usize) -> String {
        self.res.read_name(read)
    }

    fn read_span(&self, read: usize) -> Span {
        self.info.reads.get(read).map_or(Span::DUMMY, |r| r.span)
    }

    /// Cache directives name memory levels that exist and take buffers.
    fn cache_directives(&mut self, s: &Schedule) {
        for dir in &s.cache {
            let read = if dir.read < self.info.reads.len() { self.read_name(dir.read) } else { format!("%{}", dir.read_name) };
            match self.t.memory_level(&dir.level) {
                None => {
                    let mut d = self
                        .error(format!("`{}` is not a memory level of target `{}` (cache directive of {read})", dir.level, self.t.name), "unknown memory level")
                        .with_secondary(self.read_span(dir.read), "read defined here");
                    if let Some(best) = closest(&dir.level, self.stageable().map(|m| m.name.as_str())) {
                        d = d.with_help(format!("did you mean `{best}`?"));
                    }
                    self.diags.push(d.with_note(self.stageable_note()));
                }
                Some(m) if m.scope.is_none() => {
                    let d = self
                        .error(format!("{read} cannot be staged into `{}`: target `{}` has no buffers there", m.name, self.t.name), "memory level without a buffer scope")
                        .with_secondary(self.read_span(dir.read), "read defined here")
                        .with_note(self.stageable_note());
                    self.diags.push(d);
                }
                Some(_) => {}
            }
        }
    }

    fn stageable(&self) -> impl Iterator<Item = &MemoryLevel> {
        self.t.memory.iter().filter(|m| m.scope.is_some())
    }

    fn stageable_note(&self) -> String {
        let names: Vec<String> = self.stageable().map(|m| format!("`{}`", m.name)).collect();
        format!("reads can be staged into {} on `{}`", names.join(", "), self.t.name)
    }

    /// Virtual threads split spatial axes only, and need a `V` loop.
    fn vthreads(&mut self, s: &Schedule) {
        let has_v = self.t.has_vthread_loops();
        for (axis, v) in &s.vthreads {
            let Some(id) = self.c.axis_by_name(axis) else { continue };
            if self.c.axis(id).kind == AxisKind::Reduction {
                let d = self
                    .error(format!("virtual threads split spatial axes only; `{axis}` is a reduction axis"), "vthread on a reduction axis")
                    .with_secondary(self.c.axis(id).span, "declared as a reduction axis here");
                self.diags.push(d);
            } else if *v > 1 && !has_v {
                let d = self.error(format!("target `{}` has no virtual-thread loop (`V` in its loop order), so `{axis}` cannot have {v} virtual threads", self.t.name), "vthread not supported");
                self.diags.push(d);
            }
        }
    }

    /// Vector lanes fit a vector register.
    fn vector(&mut self, s: &Schedule) {
        let Some((axis, width)) = &s.vector else { return };
        let bits_limit = self.t.isa.vector_bits as u64;
        let Some(id) = self.c.axis_by_name(axis) else { return };
        if bits_limit == 0 {
            return;
        }
        let LaneElement { bits, ty, who } = self.res.lane_element(id);
        let total = bits.saturating_mul(*width);
        if total > bits_limit {
            let d = self
                .error(
                    format!(
                        "vector width {width} of axis `{axis}` takes {total} bits of {ty} ({who}), {} bits over the {bits_limit}-bit vectors of `{}`",
                        total - bits_limit,
                        self.t.name
                    ),
                    "vector too wide",
                )
                .with_secondary(self.c.axis(id).span, "axis declared here")
                .with_help(format!("use at most {} lanes of {ty}", bits_limit / bits));
            self.diags.push(d);
        }
    }

    /// The raw schedule size of `axis` at tile level `level` (its extent
    /// when the axis is not tiled).
    fn raw_size(&self, a: AxisId, level: usize) -> u64 {
        self.plan.size(a, level).max(1)
    }

    /// `t(a)` at `level`: see the module documentation.
    fn range_of(&self, a: AxisId, level: usize) -> u64 {
        self.res.range(a, level, self.raw_size(a, level))
    }

    /// Bytes of read `r` in a tile of `level`.
    #[cfg(test)]
    fn read_footprint(&self, r: usize, level: usize) -> u64 {
        self.res.read_bytes(r, &|a| self.range_of(a, level))
    }

    /// Reads the schedule stages in memory level `m` (valid positions only).
    fn cached_at(&self, m: &str) -> Vec<usize> {
        let Some(m) = self.t.memory_index(m) else { return Vec::new() };
        self.plan.staged_in(MemoryId(m)).filter(|&r| r < self.info.reads.len()).collect()
    }

    /// The parts of the footprint in `m` of a tile of `level` (the
    /// resource model's, named for messages).
    fn parts(&self, level: usize, m: &MemoryLevel) -> Vec<Part> {
        let cached = self.cached_at(&m.name);
        let t = |a: AxisId| self.range_of(a, level);
        let mut parts = Vec::new();
        self.res.footprint_parts(level, m, &|r| cached.contains(&r), &mut |p| {
            // A warp's lanes each hold a fragment of the accumulator.
            let bytes = self.res.part_bytes(p, &t, self.plan.lanes);
            parts.push(match p {
                FootprintPart::Read(r) => Part { what: self.read_name(r), bytes, span: self.read_span(r), read: true },
                FootprintPart::Output => Part { what: "output".into(), bytes, span: Span::DUMMY, read: false },
                FootprintPart::Accumulator if self.plan.lanes > 1 => Part { what: format!("accumulator fragment (1/{})", self.plan.lanes), bytes, span: Span::DUMMY, read: false },
                FootprintPart::Accumulator => Part { what: "accumulator".into(), bytes, span: Span::DUMMY, read: false },
            })
        });
        parts
    }

    fn footprints(&mut self) {
        let innermost = self.t.tile_levels.len() - 1;
        let mut register_check_ok = true;
        for (level, tl) in self.t.tile_levels.iter().enumerate() {
            let Some(m) = self.t.memory_level(&tl.memory) else { continue };
            let parts = self.parts(level, m);
            let fits = self.report_footprint(level, m, &parts);
            if level == innermost && !fits {
                register_check_ok = false;
            }
        }
        // Managed memory levels no tile level uses (a CPU's registers):
        // their cached reads, over the innermost tile.
        for m in &self.t.memory {
            if !m.managed || self.t.tile_levels.iter().any(|l| l.memory == m.name) {
                continue;
            }
            let parts = self.parts(innermost, m);
            if !parts.is_empty() {
                self.report_footprint(innermost, m, &parts);
            }
        }
        if self.t.kind == TargetKind::Cuda && register_check_ok {
            self.registers(innermost);
        }
    }

    /// Reports a footprint over its memory's capacity; true if it fits.
    fn report_footprint(&mut self, level: usize, m: &MemoryLevel, parts: &[Part]) -> bool {
        let total = parts.iter().fold(0u64, |s, p| s.saturating_add(p.bytes));
        let capacity = self.res.capacity(level, m);
        let cap = capacity.bytes;
        if total <= cap {
            return true;
        }
        let what_units = if self.t.kind == TargetKind::Cuda { "SMs" } else { "cores" };
        let share = capacity.shared_by.map(|units| format!("{} bytes / {units} {what_units}", m.capacity_bytes));
        let list: Vec<String> = parts.iter().map(|p| format!("{}: {}", p.what, p.bytes)).collect();
        let of = match &share {
            Some(how) => format!("the {cap} bytes of `{}` per tile ({how})", m.name),
            None => format!("the {cap} bytes of `{}`", m.name),
        };
        let tl = &self.t.tile_levels[level].name;
        // "shared-memory footprint", "`l1` footprint".
        let what = if m.name == "shared" { "shared-memory".to_string() } else { format!("`{}`", m.name) };
        let mut d = self.error(format!("{what} footprint of tile level `{tl}` is {total} bytes ({}), {} bytes over {of}", list.join(", "), total - cap), "footprint too large");
        for p in parts.iter().filter(|p| p.bytes > 0) {
            d = d.with_secondary(p.span, format!("{}: {} bytes at tile level `{tl}`", p.what, p.bytes));
        }
        // The accumulators count where the innermost tile level's own
        // memory is checked, not for a memory no tile level uses.
        let with_acc = level + 1 == self.t.tile_levels.len() && self.t.tile_levels[level].memory == m.name;
        let what = if m.managed {
            format!("the reads staged in `{}`{}", m.name, if with_acc { " and the accumulators" } else { "" })
        } else {
            "every read and the output tile (but reads the op streams, touching each element once)".into()
        };
        d = d.with_note(format!("the footprint counts {what}: distinct elements a `{tl}` tile touches times their size (docs/targets.md)"));
        let staged = m.managed && parts.iter().any(|p| p.read);
        d = d.with_help(if staged { format!("use smaller `{tl}` tiles or stage fewer reads in `{}`", m.name) } else { format!("use smaller `{tl}` tiles") });
        self.diags.push(d);
        false
    }

    /// Threads per block within `max_threads_per_block`.
    fn threads_per_block(&mut self) {
        let t = self.t;
        let Some(block) = self.res.block_threads(&|a, l| self.raw_size(a, l)) else { return };
        let (g, th, threads) = (block.grid_level, block.thread_level, block.threads.saturating_mul(self.plan.lanes));
        let mut parts = Vec::new();
        for a in self.c.spatial_axes() {
            let (outer, inner) = (self.raw_size(a, g), self.raw_size(a, th));
            if outer.div_ceil(inner) > 1 {
                parts.push(format!("{}: {outer} / {inner}", self.c.axis(a).name));
            }
        }
        let limit = t.compute.max_threads_per_block as u64;
        let (gl, tl) = (&t.tile_levels[g].name, &t.tile_levels[th].name);
        if threads > limit {
            let d = self
                .error(
                    format!(
                        "a `{gl}` tile has {threads} threads ({}: `{gl}` sizes over `{tl}` sizes), {} over the {limit} threads per block of `{}`",
                        parts.join(", "),
                        threads - limit,
                        t.name
                    ),
                    "too many threads",
                )
                .with_note(if self.plan.lanes > 1 {
                    format!("threads per block are {} lanes (a warp intrinsic's) times the product over spatial axes of the `{gl}` size over the `{tl}` size", self.plan.lanes)
                } else {
                    format!("threads per block are the product over spatial axes of the `{gl}` size over the `{tl}` size")
                })
                .with_help(format!("use smaller `{gl}` tiles or larger `{tl}` tiles"));
            self.diags.push(d);
        }
    }

    /// The per-thread register estimate within `max_registers_per_thread`.
    fn registers(&mut self, innermost: usize) {
        let t = self.t;
        let Some(m) = t.memory_level(&t.tile_levels[innermost].memory) else { return };
        if !m.managed {
            return;
        }
        let cached = self.cached_at(&m.name);
        let parts = self.res.register_parts(&cached, &|a| self.range_of(a, innermost), self.plan.lanes);
        let total = parts.iter().fold(0u64, |s, (_, n)| s.saturating_add(*n));
        let limit = t.compute.max_registers_per_thread as u64;
        if total > limit {
            let list: Vec<String> = parts.iter().map(|(w, n)| format!("{w}: {n}")).collect();
            let tl = &t.tile_levels[innermost].name;
            let d = self
                .error(
                    format!("a `{tl}` tile needs about {total} registers per thread ({}), {} over the {limit} registers per thread of `{}`", list.join(", "), total - limit, t.name),
                    "too many registers",
                )
                .with_note("the estimate counts 32-bit registers: accumulators, reads staged in registers, one per other read, and indexing")
                .with_help(format!("use smaller `{tl}` tiles"));
            self.diags.push(d);
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

mod intrinsic;

#[cfg(test)]
mod tests;
