//! `cache`: stages reads into a faster memory level (Gensor Formula 2's
//! caching action; GTA's multi-scope caching rule).
//!
//! For a directive `read → memory level`, the tile level whose tiles live
//! in that memory says where to stage: at the innermost loop of that level
//! in the target's loop order (on a GPU, `shared` ↔ the `block` level: per
//! step of the outer reduction loop; a managed memory no tile level uses,
//! a CPU's registers, means the innermost tile level). There a buffer of
//! the memory's scope receives the read's footprint — the box of elements the loads inside
//! touch — by a `copy`, and the loads read the buffer instead. Shared
//! buffers are filled cooperatively by the block's threads (the footprint
//! spans the thread loops), fenced by barriers before the first use and
//! after the last; local buffers are per thread.

use crate::nest::{OrderEntry, entry_of_level, for_loop, kernels, loop_order, subtree, target_for};
use tilec::diag::{Diagnostic, Diagnostics, Span};
use tilec::ir::builder::Cursor;
use tilec::ir::*;
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};
use tilec::target::{Binding, Target, TargetKind};

pub static DECL: PassDecl = PassDecl {
    name: "cache",
    summary: "Stage reads into faster memory (shared memory, registers, packed buffers)",
    description: "
For every kernel and every cache directive of its schedule (`cache = {a =
shared}`), or for the read and memory level given as options, stages the
read's footprint into a buffer of that memory level: at the innermost loop
of the tile level whose memory it is (in the target's loop order), a `copy`
fills the buffer with the box of elements the loads inside touch (padding
included), and those loads read the buffer. Shared-memory buffers are
allocated once per block, filled cooperatively by its threads and fenced
with barriers; register (local) buffers are per thread; on CPUs the local
buffers are packed copies per cache level, with the dimension the vector
loop walks moved innermost (`copy ... permute [...]`) and, where the
register tile along it is narrower than the box, split into panels of the
register tile's width, the panels outermost (`copy ... split [d, w]`: a
GEMM's `B[k, j]` becomes `[j / w][k][w]`, so each register tile's rows
are one contiguous run, as BLAS packs B; elements under 4 bytes are left
to `tensorize`'s layouts), and a read staged
in the registers (a memory no tile level uses) is staged at the innermost
tile level. A dimension the loops inside step through by a common stride
(a strided convolution's `2·oh`) is packed densely: the copy takes every
`g`-th element (`copy ... stride [...]`) and the loads index the buffer by
the loops themselves. Reads with an exact division (`div`) are not cached. A read may be
staged again into a level nearer the loads (shared memory, then registers:
the inner copy reads the outer buffer), not the other way round.",
    options: &[
        OptionDecl { name: "read", kind: OptionKind::Str, default: "", help: "the read to stage, by name (empty: each kernel's schedule)" },
        OptionDecl { name: "level", kind: OptionKind::Str, default: "shared", help: "the memory level to stage into when `read` is given" },
    ],
    statistics: &[("staged", "loads redirected to a staged buffer"), ("barriers", "barriers inserted")],
    create: |o: &PassOptions| Box::new(Cache { read: o.str("read").to_string(), level: o.str("level").to_string() }),
};

pub struct Cache {
    read: String,
    level: String,
}

impl Pass for Cache {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        let mut diags = Diagnostics::new();
        for f in &mut module.funcs {
            for (kernel, schedule) in kernels(f) {
                let directives: Vec<(String, String)> = if self.read.is_empty() {
                    schedule.cache.iter().map(|d| (d.read_name.clone(), d.level.clone())).collect()
                } else {
                    vec![(self.read.clone(), self.level.clone())]
                };
                if directives.is_empty() {
                    continue;
                }
                let span = f.op_spans[kernel];
                let target = match target_for(cx, &schedule.target, span) {
                    Ok(t) => t,
                    Err(d) => {
                        diags.push(d);
                        continue;
                    }
                };
                for (read, level) in directives {
                    match stage(f, kernel, &target, &read, &level, span) {
                        Ok((loads, barriers)) => {
                            cx.bump("staged", loads);
                            cx.bump("barriers", barriers);
                        }
                        Err(d) => diags.push(d),
                    }
                }
            }
        }
        diags.into_result()
    }
}

/// Stages read `read` into memory level `level`; returns the number of
/// loads redirected and barriers inserted.
fn stage(f: &mut Function, kernel: Op, t: &Target, read: &str, level: &str, span: Span) -> Result<(u64, u64), Diagnostic> {
    let mem = t.memory_level(level).ok_or_else(|| {
        Diagnostic::error(format!("target `{}` has no memory level `{level}`", t.name))
            .at(span, "in this kernel")
            .with_note(format!("its memory levels are: {}", t.memory.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")))
    })?;
    let scope = mem.scope.as_deref().and_then(MemScope::from_name).ok_or_else(|| {
        Diagnostic::error(format!("nothing can be staged into `{level}` of target `{}`", t.name)).at(span, "in this kernel")
    })?;
    // The tile level whose tiles live in that memory; a managed memory no
    // tile level uses (a CPU's registers) holds a piece of the innermost
    // tile, as the resource check counts it (`tilec::target::check`).
    let li = match t.tile_levels.iter().position(|l| l.memory == level) {
        Some(li) => li,
        None if mem.managed && !t.tile_levels.is_empty() => t.tile_levels.len() - 1,
        None => {
            return Err(Diagnostic::error(format!("no tile level of target `{}` lives in `{level}`", t.name))
                .at(span, "in this kernel")
                .with_note("a read is staged at the loops of the tile level whose memory it is staged into"));
        }
    };
    let order = loop_order(t).map_err(|m| Diagnostic::error(m).at(span, "in this kernel"))?;
    // Stage at the innermost loop of the level: its reduction loops if the
    // template has them, else its spatial loops.
    let staging_pos = order
        .iter()
        .rposition(|e| *e == OrderEntry::Reduction(li))
        .or_else(|| order.iter().rposition(|e| *e == OrderEntry::Spatial(li)))
        .ok_or_else(|| Diagnostic::error(format!("tile level `{level}` has no loops in the loop order")).at(span, "in this kernel"))?;
    // How the target runs the tile level a loop's tag names (none for the
    // loops below the tile levels).
    let tile_binding = |tag: &LoopTag| tag.level.tile().and_then(|name| t.tile_level(name)).map(|(_, l)| l.binding);
    let position_of = |f: &Function, o: Op| -> Option<usize> {
        let tag = for_loop(f, o)?.tag.as_ref()?;
        let entry = match &tag.level {
            TagLevel::Point | TagLevel::Vector => {
                if tag.reduction {
                    OrderEntry::ReductionPoint
                } else {
                    OrderEntry::SpatialPoint
                }
            }
            TagLevel::VThread => OrderEntry::VThread,
            TagLevel::Tile(name) => {
                let (l, _) = t.tile_level(name)?;
                return entry_of_level(&order, tag.reduction, l);
            }
            // The fold of a reduction vector axis' lanes has no entry.
            TagLevel::Lanes => return None,
        };
        order.iter().position(|&e| e == entry)
    };
    let is_thread_level = |f: &Function, o: Op| {
        for_loop(f, o).and_then(|l| l.tag.as_ref()).is_some_and(|tag| !tag.reduction && tile_binding(tag) == Some(Binding::Threads))
            || matches!(for_loop(f, o).map(|l| l.mapping), Some(Mapping::Thread(_)))
    };

    // The point loop of the schedule's vector axis (whose iterations become
    // vector lanes).
    // Virtual threads along the vector axis interleave its points (the
    // `vthread` pass rewrites the axis' whole index, tile loops included),
    // which panels, indexed by the tile loops apart, cannot follow.
    let (vector_axis, vector_vthreads) = match &f.ops[kernel].kind {
        OpKind::Kernel(k) => {
            let axis = k.schedule.vector.as_ref().map(|(a, _)| a.clone());
            let vthreads = k.schedule.vthreads.iter().any(|(a, n)| Some(a) == axis.as_ref() && *n > 1);
            (axis, vthreads)
        }
        _ => (None, false),
    };
    let is_vector_loop = |f: &Function, o: Op| {
        for_loop(f, o).and_then(|l| l.tag.as_ref()).is_some_and(|tag| Some(&tag.axis) == vector_axis.as_ref() && !tag.reduction && tag.level == TagLevel::Point)
    };
    let loads: Vec<Op> = subtree(f, kernel)
        .into_iter()
        .filter(|&o| matches!(&f.ops[o].kind, OpKind::Load(a) if a.read.as_deref() == Some(read)))
        .collect();
    if loads.is_empty() {
        return Err(Diagnostic::error(format!("no loads of read `{read}` in this kernel")).at(span, "in this kernel"));
    }
    let mut barriers = 0;
    for &load in &loads {
        let OpKind::Load(access) = f.ops[load].kind.clone() else { unreachable!("filtered loads") };
        if access.indices.iter().any(|e| e.divisor() != 1) {
            return Err(Diagnostic::error(format!("read `{read}` divides its indices (`div`) and cannot be staged"))
                .at(span, "in this kernel")
                .with_note("its footprint is not a box in the source's index space"));
        }
        // Ancestors inside the kernel, outermost first.
        let mut anc: Vec<Op> = f.ancestors(load).into_iter().take_while(|&a| a != kernel).collect();
        anc.reverse();
        let loops: Vec<Op> = anc.iter().copied().filter(|&a| for_loop(f, a).is_some()).collect();
        let staged_at = loops.iter().take_while(|&&l| position_of(f, l).is_some_and(|p| p <= staging_pos)).count();
        let mut j = staged_at;
        let cooperative = scope == MemScope::Shared;
        let varying: Vec<Op> = loops.iter().enumerate().filter(|&(i, &l)| i >= staged_at || (cooperative && is_thread_level(f, l))).map(|(_, &l)| l).collect();
        let trips: Vec<(Value, i64)> = varying.iter().map(|&l| (f.regions[f.ops[l].regions[0]].args[0], for_loop(f, l).expect("loop").extent as i64)).collect();
        let trip_of = |v: Value| trips.iter().find(|(x, _)| *x == v).map(|&(_, n)| n);

        let src = f.ops[load].operands[0];
        let src_ty = f.value_type(src).readable().expect("verified: readable source");
        let indices = f.access_indices(load);
        let mut origin = Vec::new();
        let mut sizes = Vec::new();
        let mut strides = Vec::new();
        let mut local = Vec::new();
        for e in indices.iter() {
            let mut o_terms = Vec::new();
            let mut l_terms = Vec::new();
            // In i128: a padded read may step far outside its tensor
            // (`h * (2^63 - 1)`), and the box's span overflows i64 before
            // its stride divides it.
            let mut o_const = i128::from(e.constant_term());
            let mut l_const = 0i128;
            let mut size = 1i128;
            for &(v, c) in e.terms() {
                match trip_of(v) {
                    Some(n) => {
                        let span = i128::from(c) * i128::from(n - 1);
                        size += span.abs();
                        l_terms.push((v, c));
                        if c < 0 {
                            o_const += span;
                            l_const -= span;
                        }
                    }
                    None => o_terms.push((v, c)),
                }
            }
            // A dimension the loops inside step through by a common stride
            // `g` (a strided convolution's `2·oh`) is packed densely: the
            // copy takes every `g`-th element, and the loads index the
            // buffer by `(index - origin) / g`.
            let g = l_terms.iter().fold(0, |g, &(_, c)| tilec::ir::affine::gcd(g, c)).max(1);
            if g > 1 {
                size = (size - 1) / i128::from(g) + 1;
                l_terms = l_terms.into_iter().map(|(v, c)| (v, c / g)).collect();
                l_const /= i128::from(g);
            }
            // Back in range: the verifier keeps every index's range inside
            // i64, and the box lies within it.
            let fits = "the verifier bounds every index's range to 64 bits";
            let (o_const, l_const) = (i64::try_from(o_const).expect(fits), i64::try_from(l_const).expect(fits));
            origin.push(AffineExpr::from_parts(o_terms, o_const, 1).expect(fits));
            local.push(AffineExpr::from_parts(l_terms, l_const, 1).expect(fits));
            sizes.push(u64::try_from(size).expect(fits));
            strides.push(g as u64);
        }
        // A thread's own copy moves out of the serial loops its box does not
        // depend on (and out of one-iteration loops, whose index is 0), so
        // that a packed panel is copied once and reused by every iteration
        // of those loops, as BLAS packs its panels. Shared copies stay: they
        // are fenced by barriers at their level. Parallel loops are never
        // crossed: each core packs its own.
        if !cooperative {
            while j > 0 {
                let l = loops[j - 1];
                let Some(lp) = for_loop(f, l) else { break };
                let serial_level = lp.tag.as_ref().is_some_and(|tag| tile_binding(tag) == Some(Binding::Serial));
                if !serial_level {
                    break;
                }
                let v = f.regions[f.ops[l].regions[0]].args[0];
                if lp.extent == 1 {
                    origin = origin.iter().map(|e| e.substitute(|x| if x == v { AffineExpr::constant(0) } else { AffineExpr::var(x) }).expect("small")).collect();
                } else if origin.iter().any(|e| e.uses(v)) {
                    break;
                }
                j -= 1;
            }
        }
        // Staging point: before the op of the staging region that holds the load.
        let (region, holder) = if j == 0 {
            (f.ops[kernel].regions[0], anc.first().copied().unwrap_or(load))
        } else {
            let outer = loops[j - 1];
            let body = f.ops[outer].regions[0];
            let holder = anc.iter().copied().chain([load]).find(|&o| f.ops[o].parent == body).expect("the load is inside");
            (body, holder)
        };
        // A read already staged inside this point (into a level nearer the
        // loads) cannot be staged again out here: its buffer does not exist
        // yet. Staging outer levels first (shared, then local) works.
        if f.def_op(f.ops[load].operands[0]).is_some_and(|d| d == holder || f.ancestors(d).contains(&holder)) {
            let inner = f.values[f.ops[load].operands[0]].name.clone().unwrap_or_default();
            return Err(Diagnostic::error(format!("read `{read}` is already staged inside the loops where `{level}` would stage it (in `%{inner}`)"))
                .at(span, "in this kernel")
                .with_help(format!("stage `{read}` into `{level}` before staging it into a level nearer the loads")));
        }
        // A CPU packs the dimension its vector loop runs along innermost,
        // so that the kernel loads whole vectors from the copy (a weight
        // tensor `W[f, c, r, s]` read along `f` becomes `[c, r, s, f]`).
        let vector_loop = loops.iter().find(|&&l| is_vector_loop(f, l)).map(|&l| f.regions[f.ops[l].regions[0]].args[0]);
        let permute = match vector_loop {
            Some(viv) if t.kind == TargetKind::Cpu && !cooperative && trip_of(viv).is_some() => vector_innermost(&local, viv),
            _ => Vec::new(),
        };
        let (sizes_dst, local) = if permute.is_empty() {
            (sizes.clone(), local)
        } else {
            (permute.iter().map(|&d| sizes[d]).collect(), permute.iter().map(|&d| local[d].clone()).collect())
        };
        // Where the vector loop's register tile is narrower than the box
        // along the innermost dimension, the copy lays the box out in
        // panels as BLAS does (`B[k, j]` becomes `[j / w][k][w]`): each
        // register tile's rows are then one contiguous run that the
        // micro-kernel walks, instead of `w`-wide strips a box row apart
        // that share a few L1 sets. Elements under 4 bytes (the operands
        // of `dot` intrinsics) are left to `tensorize`, which packs them
        // in the intrinsic's own layout; a vector axis with virtual
        // threads keeps the box's layout (above).
        let panel = match vector_loop {
            Some(viv) if t.kind == TargetKind::Cpu && !cooperative && !vector_vthreads && src_ty.elem.size_bytes() >= 4 && strides.iter().all(|&g| g == 1) => {
                trip_of(viv).and_then(|w| panel_width(&local, &sizes_dst, viv, w)).map(|w| (viv, w))
            }
            _ => None,
        };
        let (sizes_dst, local, split, permute) = match panel {
            Some((viv, w)) => in_panels(sizes_dst, local, permute, viv, w),
            None => (sizes_dst, local, None, permute),
        };
        let buf_ty = BufferType::new(sizes_dst, src_ty.elem, scope);
        // The box may reach outside the source (padding, or partial tiles
        // whose loads are guarded): then the copy needs a pad value. Where
        // the box provably stays inside over every enclosing loop, it needs
        // none, and code generation copies without bounds checks.
        let extents: Vec<(Value, i64)> = f
            .ancestors(load)
            .into_iter()
            .filter_map(|a| for_loop(f, a).map(|l| (f.regions[f.ops[a].regions[0]].args[0], l.extent as i64)))
            .collect();
        let range_of = |v: Value| extents.iter().find(|(x, _)| *x == v).map_or((0, 0), |&(_, n)| (0, n - 1));
        let inside = origin.iter().zip(sizes.iter().zip(&strides)).zip(&src_ty.shape).all(|((o, (&size, &g)), &dim)| {
            o.numerator_range(range_of).is_some_and(|(lo, hi)| lo >= 0 && hi + (g * (size - 1) + 1) as i64 <= dim as i64)
        });
        let pad = if inside { None } else { access.pad.or(Some(if src_ty.elem.is_int() { Literal::Int(0) } else { Literal::Float(0.0) })) };
        let hint = format!("{read}_{level}");

        // Shared buffers live per block: outside the thread loops.
        let holder_pos = f.regions[region].ops.iter().position(|&o| o == holder).expect("holder in region");
        let buf = match (cooperative, loops.iter().find(|&&l| is_thread_level(f, l))) {
            (true, Some(&first_thread)) => {
                let r = f.ops[first_thread].parent;
                let pos = f.regions[r].ops.iter().position(|&o| o == first_thread).expect("loop in region");
                f.build_alloc(Cursor::at(r, pos), buf_ty, &hint, span)
            }
            _ => f.build_alloc(Cursor::at(region, holder_pos), buf_ty, &hint, span),
        };
        let holder_pos = f.regions[region].ops.iter().position(|&o| o == holder).expect("holder in region");
        let zero = vec![AffineExpr::constant(0); sizes.len() + usize::from(split.is_some())];
        // A read staged at the same place as an earlier one shares its
        // barriers: its copy joins the others before the first barrier.
        let ops = &f.regions[region].ops;
        let is_barrier = |o: Option<&Op>| o.is_some_and(|&o| f.ops[o].kind == OpKind::Barrier);
        let fenced = cooperative && holder_pos > 0 && is_barrier(ops.get(holder_pos - 1)) && is_barrier(ops.get(holder_pos + 1));
        let copy = if fenced {
            f.build_copy(Cursor::at(region, holder_pos - 1), src, &origin, buf, &zero, sizes, pad, cooperative, span)
        } else {
            f.build_copy(Cursor::at(region, holder_pos), src, &origin, buf, &zero, sizes, pad, cooperative, span)
        };
        if let OpKind::Copy(c) = &mut f.ops[copy].kind {
            c.permute = permute;
            c.split = split;
            if strides.iter().any(|&g| g > 1) {
                c.stride = strides;
            }
        }
        if !fenced {
            if cooperative {
                f.build_barrier(Cursor::at(region, holder_pos + 1), span);
                let after = f.regions[region].ops.iter().position(|&o| o == holder).expect("holder in region") + 1;
                f.build_barrier(Cursor::at(region, after), span);
                barriers += 2;
            }
        }
        // The load now reads the staged buffer, in bounds by construction.
        f.ops[load].operands[0] = buf;
        if let OpKind::Load(a) = &mut f.ops[load].kind {
            a.pad = None;
        }
        f.set_access_indices(load, &local);
    }
    Ok((loads.len() as u64, barriers))
}

/// The destination order of a packed copy whose loads index it with
/// `local`: the dimension the vector loop `viv` walks with unit stride moved
/// innermost, or empty (the box's own order) when that is where it is, or
/// no dimension walks it with unit stride.
fn vector_innermost(local: &[AffineExpr<Value>], viv: Value) -> Vec<usize> {
    let n = local.len();
    let Some(d) = local.iter().position(|e| e.coeff(viv) == 1) else { return Vec::new() };
    if d == n - 1 || local[n - 1].uses(viv) {
        return Vec::new();
    }
    (0..n).filter(|&k| k != d).chain([d]).collect()
}

/// The panel width of a packed copy whose loads index it with `local`
/// (the destination's order) over a box of `sizes`: the vector loop
/// `viv`'s trip `w` where `viv` walks the innermost dimension with unit
/// stride, the rest of that index moves in whole panels (multiples of
/// `w`) and the box holds more than one panel, a whole number of them.
fn panel_width(local: &[AffineExpr<Value>], sizes: &[u64], viv: Value, w: i64) -> Option<u64> {
    let (last, &size) = (local.last()?, sizes.last()?);
    let w = u64::try_from(w).ok().filter(|&w| w > 1)?;
    if last.coeff(viv) != 1 || size <= w || !size.is_multiple_of(w) {
        return None;
    }
    panel_index(last, viv, w as i64)?;
    Some(w)
}

/// The destination of a packed copy laid out in panels of `w` along its
/// innermost dimension (which the vector loop `viv` walks): from its
/// sizes, the loads' indices and the permutation (empty: the box's
/// order), the panelled sizes `[n / w, .., w]`, indices `[(e - viv) / w,
/// .., viv]`, split of the box dimension and permutation of the expanded
/// box (the outer part first, the inner part last).
#[allow(clippy::type_complexity)]
fn in_panels(sizes: Vec<u64>, local: Vec<AffineExpr<Value>>, permute: Vec<usize>, viv: Value, w: u64) -> (Vec<u64>, Vec<AffineExpr<Value>>, Option<CopySplit>, Vec<usize>) {
    let last = sizes.len() - 1;
    let order: Vec<usize> = if permute.is_empty() { (0..sizes.len()).collect() } else { permute };
    let bd = order[last];
    let outer = panel_index(&local[last], viv, w as i64).expect("checked by panel_width");
    let shape = [sizes[last] / w].into_iter().chain(sizes[..last].iter().copied()).chain([w]).collect();
    let local = [outer].into_iter().chain(local[..last].iter().cloned()).chain([AffineExpr::var(viv)]).collect();
    let permute = [bd].into_iter().chain(order[..last].iter().map(|&x| if x > bd { x + 1 } else { x })).chain([bd + 1]).collect();
    (shape, local, Some(CopySplit { dim: bd, factor: w }), permute)
}

/// The panel index of `e`, `(e - viv) / w`, where the rest of `e` moves
/// in whole panels.
fn panel_index(e: &AffineExpr<Value>, viv: Value, w: i64) -> Option<AffineExpr<Value>> {
    AffineExpr::from_parts(e.terms().iter().copied().filter(|&(v, _)| v != viv), e.constant_term(), e.divisor()).ok()?.exact_quotient(w)
}
