//! `vthread`: Gensor's virtual threads (Fig. 3, Formula 3). A thread's
//! innermost tile of `T` elements along an axis is split into `V` sub-tiles
//! of `T/V` elements that are spread over the parent tile with stride
//! `S/V` (`S` the tile of the level above), so that neighbouring threads
//! touch neighbouring elements in each sub-tile (fewer bank conflicts,
//! coalesced accesses). Code generation re-aggregates the `V` virtual
//! threads onto the physical thread as an unrolled loop.

use crate::nest::{for_loop, induction_var, kernels, rewrite_index_exprs, subtree, tagged_loops, target_for};
use tilec::diag::{Diagnostic, Diagnostics};
use tilec::ir::builder::Cursor;
use tilec::ir::*;
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};

pub static DECL: PassDecl = PassDecl {
    name: "vthread",
    summary: "Split threads' tiles into interleaved virtual threads (Gensor's vThread)",
    description: "
For every kernel and every axis with virtual threads in its schedule
(`vthread = {i = 2}`), or for the axis and count given as options, wraps
each innermost (`point`) loop of the axis in a `vthread` loop of `V`
iterations and remaps the axis: the element a thread handles at point `p`
of virtual thread `v` is `v·(S/V) + t·(T/V) + p` within the parent tile
(`S` the parent tile size, `T` the innermost tile size, `t` the thread's
index at the innermost level) instead of `t·T + p`. Indices into the
thread's own accumulator become `v·(T/V) + p`. The computation is the same;
which thread handles which element changes.",
    options: &[
        OptionDecl { name: "axis", kind: OptionKind::Str, default: "", help: "the axis (empty: each kernel's schedule)" },
        OptionDecl { name: "count", kind: OptionKind::UInt, default: "2", help: "virtual threads when `axis` is given" },
    ],
    statistics: &[("vthreads", "point loops split into virtual threads")],
    create: |o: &PassOptions| Box::new(VThread { axis: o.str("axis").to_string(), count: o.uint("count") }),
};

pub struct VThread {
    axis: String,
    count: u64,
}

impl Pass for VThread {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        let mut diags = Diagnostics::new();
        for f in &mut module.funcs {
            for (kernel, schedule) in kernels(f) {
                let requests: Vec<(String, u64)> = if self.axis.is_empty() { schedule.vthreads.clone() } else { vec![(self.axis.clone(), self.count)] };
                if requests.is_empty() {
                    continue;
                }
                let target = match target_for(cx, &schedule.target, f.op_spans[kernel]) {
                    Ok(t) => t,
                    Err(d) => {
                        diags.push(d);
                        continue;
                    }
                };
                let levels: Vec<String> = target.tile_levels.iter().map(|l| l.name.clone()).collect();
                for (axis, v) in requests {
                    if v <= 1 {
                        continue;
                    }
                    let loops = tagged_loops(f, kernel, &axis, &TagLevel::Point);
                    if loops.is_empty() {
                        diags.push(
                            Diagnostic::error(format!("cannot split `{axis}` into {v} virtual threads: this kernel has no point loop of `{axis}`"))
                                .at(f.op_spans[kernel], "in this kernel")
                                .with_note("virtual threads split the innermost tile of a spatial axis; an axis whose innermost tile is 1 has no point loop"),
                        );
                        continue;
                    }
                    let tiles = schedule.tiles_of(&axis).map(|s| s.to_vec());
                    for lp in loops {
                        // An axis the schedule does not tile is one tile of
                        // its whole extent at every level: its point loop.
                        let sizes = tiles.clone().unwrap_or_else(|| vec![for_loop(f, lp).expect("tagged loop").extent; levels.len()]);
                        match split(f, lp, &axis, v, &sizes, &levels) {
                            Ok(()) => cx.bump("vthreads", 1),
                            Err(d) => {
                                // The other point loops of the axis fail alike.
                                diags.push(d);
                                break;
                            }
                        }
                    }
                }
            }
        }
        diags.into_result()
    }
}

fn split(f: &mut Function, lp: Op, axis: &str, v: u64, sizes: &[u64], levels: &[String]) -> Result<(), Diagnostic> {
    let span = f.op_spans[lp];
    let t_size = *sizes.last().expect("at least one level");
    let parent = if sizes.len() >= 2 { sizes[sizes.len() - 2] } else { t_size };
    let extent = for_loop(f, lp).expect("tagged loop").extent;
    if extent != t_size {
        return Err(Diagnostic::error(format!("cannot split `{axis}` into {v} virtual threads: its point loop runs {extent} iterations, not the {t_size} of its innermost tile"))
            .at(span, "here")
            .with_note("`vthread` splits the point loops as `tile` makes them: once, and before `vectorize`"));
    }
    if t_size % v != 0 || parent % v != 0 {
        return Err(Diagnostic::error(format!("cannot split `{axis}` into {v} virtual threads: its innermost tile is {t_size}"))
            .at(span, "here")
            .with_help(format!("the innermost tile of `{axis}` must be a multiple of {v}")));
    }
    // The thread's index at the innermost tile level, if that loop exists.
    let last_level = levels.last().map(String::as_str).unwrap_or("");
    let t_iv = f.ancestors(lp).into_iter().find_map(|a| {
        for_loop(f, a).and_then(|l| l.tag.as_ref()).filter(|t| t.axis == axis && t.level.tile() == Some(last_level)).map(|_| induction_var(f, a))
    });
    let p_iv = induction_var(f, lp);
    let (t, s, vv) = (t_size as i64, parent as i64, v as i64);
    // Per-thread staged copies (from `cache`) made for the old mapping hold
    // one contiguous run of the axis per thread; after the split a thread
    // needs V runs, so each such copy becomes V copies into V slices.
    let restaged = match t_iv {
        Some(ti) => restage_copies(f, lp, ti, axis, t, s, vv)?,
        None => Vec::new(),
    };
    // Wrap the point loop in the vthread loop, at the point loop's place.
    let region = f.ops[lp].parent;
    let pos = f.regions[region].ops.iter().position(|&o| o == lp).expect("loop in its region");
    f.regions[region].ops.remove(pos);
    let tag = LoopTag { axis: axis.to_string(), level: TagLevel::VThread, reduction: false };
    let (vt, vt_body, v_iv) = f.build_for(Cursor::at(region, pos), v, Mapping::VThread, Some(tag), &format!("{axis}_vthread"), span);
    f.regions[vt_body].ops.push(lp);
    f.ops[lp].parent = vt_body;
    if let OpKind::For(l) = &mut f.ops[lp].kind {
        l.extent = t_size / v;
    }
    let mut bad = false;
    let mut inside = subtree(f, vt);
    // Loads of re-staged buffers index their slice: `v·b + (k·p + rest)`.
    for &(buf, dim, slice) in &restaged {
        for &o in &inside {
            if matches!(f.ops[o].kind, OpKind::Load(_)) && f.ops[o].operands[0] == buf {
                let mut idx = f.access_indices(o);
                idx[dim] = idx[dim].checked_add(&AffineExpr::from_parts([(v_iv, slice)], 0, 1).expect("small")).expect("small");
                f.set_access_indices(o, &idx);
            }
        }
        inside.retain(|&o| !(matches!(f.ops[o].kind, OpKind::Load(_)) && f.ops[o].operands[0] == buf));
    }
    rewrite_index_exprs(f, &inside, |e| {
        let k = e.coeff(p_iv);
        if k == 0 {
            return e.clone();
        }
        let c_t = t_iv.map_or(0, |ti| e.coeff(ti));
        let replaced_t = c_t != 0;
        let mut terms: Vec<(Value, i64)> = e.terms().iter().copied().filter(|&(x, _)| x != p_iv && !(replaced_t && Some(x) == t_iv)).collect();
        if let Some(ti) = t_iv.filter(|_| c_t != 0) {
            // Global index: k·(t·T + p) becomes k·(v·S/V + t·T/V + p).
            if c_t != k * t {
                bad = true;
                return e.clone();
            }
            terms.extend([(v_iv, k * (s / vv)), (ti, k * (t / vv)), (p_iv, k)]);
        } else {
            // Index into the thread's own tile: k·p becomes k·(v·T/V + p).
            terms.extend([(v_iv, k * (t / vv)), (p_iv, k)]);
        }
        AffineExpr::from_parts(terms, e.constant_term(), 1).expect("small").with_divisor(e.divisor())
    });
    if bad {
        return Err(inconsistent(axis, span));
    }
    if t_size == v {
        // Each virtual thread has one point: the point loop of one
        // iteration goes, as `tile` leaves out loops of trip 1.
        let body = f.ops[lp].regions[0];
        let moved = std::mem::take(&mut f.regions[body].ops);
        let inside: Vec<Op> = moved.iter().flat_map(|&o| std::iter::once(o).chain(subtree(f, o))).collect();
        rewrite_index_exprs(f, &inside, |e| e.substitute(|x| if x == p_iv { AffineExpr::constant(0) } else { AffineExpr::var(x) }).expect("small"));
        let pos = f.regions[vt_body].ops.iter().position(|&o| o == lp).expect("point loop in the vthread loop");
        f.regions[vt_body].ops.remove(pos);
        for (k, &o) in moved.iter().enumerate() {
            f.ops[o].parent = vt_body;
            f.regions[vt_body].ops.insert(pos + k, o);
        }
    }
    Ok(())
}

fn inconsistent(axis: &str, span: tilec::diag::Span) -> Diagnostic {
    Diagnostic::error(format!("cannot split `{axis}` into virtual threads: an index uses the thread and point loops inconsistently"))
        .at(span, "here")
        .with_note("vthread rewrites loop nests made by `tile` (and `cache`)")
}

/// Re-stages the non-cooperative copies outside point loop `lp` whose
/// source depends on the thread index `ti`: each becomes a vthread loop of
/// `v` copies of `T/V`-long runs into slices of a buffer grown `v` times
/// along the dimension the axis indexes. Returns (buffer, dimension, slice
/// length) for each, so the loads can be rewritten.
#[allow(clippy::too_many_arguments)]
fn restage_copies(f: &mut Function, lp: Op, ti: Value, axis: &str, t: i64, s: i64, vv: i64) -> Result<Vec<(Value, usize, i64)>, Diagnostic> {
    let span = f.op_spans[lp];
    let enclosing: Vec<Region> = f.ancestors(lp).iter().flat_map(|&a| f.ops[a].regions.clone()).collect();
    let copies: Vec<Op> = enclosing
        .iter()
        .flat_map(|&r| f.regions[r].ops.clone())
        .filter(|&o| matches!(&f.ops[o].kind, OpKind::Copy(c) if !c.cooperative))
        .filter(|&o| subtree(f, lp).into_iter().chain([lp]).any(|x| matches!(f.ops[x].kind, OpKind::Load(_)) && f.ops[x].operands[0] == f.ops[o].operands[1]))
        .collect();
    let mut out = Vec::new();
    for c_op in copies {
        let OpKind::Copy(c) = f.ops[c_op].kind.clone() else { unreachable!("filtered copies") };
        let src: Vec<AffineExpr<Value>> = c.src.iter().map(|e| f.expr_in_values(c_op, e)).collect();
        let dims: Vec<usize> = (0..src.len()).filter(|&d| src[d].coeff(ti) != 0).collect();
        let [dim] = dims.as_slice() else {
            if dims.is_empty() {
                continue;
            }
            return Err(inconsistent(axis, span));
        };
        let dim = *dim;
        // The destination dimension the thread's slices go along: that of
        // the box dimension, unless a split made two of it.
        let expanded_dim = match c.split {
            Some(sp) if sp.dim == dim => {
                return Err(Diagnostic::error(format!("cannot split `{axis}` into virtual threads: a copy splits the dimension the thread indexes"))
                    .at(f.op_spans[c_op], "this copy (`split`)")
                    .with_note("run vthread before the passes that split copies (tensorize's packing)"));
            }
            Some(sp) if dim > sp.dim => dim + 1,
            _ => dim,
        };
        // In box coordinates (a strided copy steps `g` source elements per
        // box element), thread `ti` starts `k·t` elements further on.
        let g = c.stride_of(dim) as i64;
        let c_t = src[dim].coeff(ti);
        if c_t % (t * g) != 0 || c_t <= 0 {
            return Err(inconsistent(axis, span));
        }
        let k = c_t / (t * g);
        let slice = c.sizes[dim] as i64 - k * (t - t / vv);
        // The vthread loop around the copy, at its place.
        let region = f.ops[c_op].parent;
        let pos = f.regions[region].ops.iter().position(|&o| o == c_op).expect("copy in its region");
        f.regions[region].ops.remove(pos);
        let tag = LoopTag { axis: axis.to_string(), level: TagLevel::VThread, reduction: false };
        let (_, body, w) = f.build_for(Cursor::at(region, pos), vv as u64, Mapping::VThread, Some(tag), &format!("{axis}_vthread"), span);
        f.regions[body].ops.push(c_op);
        f.ops[c_op].parent = body;
        let mut new_src = src.clone();
        let others = AffineExpr::from_parts(src[dim].terms().iter().copied().filter(|&(x, _)| x != ti), src[dim].constant_term(), 1).expect("small");
        new_src[dim] = others.checked_add(&AffineExpr::from_parts([(w, g * k * (s / vv)), (ti, g * k * (t / vv))], 0, 1).expect("small")).expect("small");
        let mut dst: Vec<AffineExpr<Value>> = c.dst.iter().map(|e| f.expr_in_values(c_op, e)).collect();
        let ddim = c.dst_dim(expanded_dim);
        dst[ddim] = dst[ddim].checked_add(&AffineExpr::from_parts([(w, slice)], 0, 1).expect("small")).expect("small");
        let mut sizes = c.sizes.clone();
        sizes[dim] = slice as u64;
        let (src_v, dst_v) = (f.ops[c_op].operands[0], f.ops[c_op].operands[1]);
        let (operands, mut packed) = tilec::ir::builder::pack_indices(vec![src_v, dst_v], &[&new_src, &dst]);
        f.ops[c_op].operands = operands;
        if let OpKind::Copy(cc) = &mut f.ops[c_op].kind {
            cc.dst = packed.remove(1);
            cc.src = packed.remove(0);
            cc.sizes = sizes;
        }
        // The buffer grows to hold the v slices.
        if let Type::Buffer(b) = &mut f.values[dst_v].ty {
            b.shape[ddim] = (slice * vv) as u64;
        }
        out.push((dst_v, ddim, slice));
    }
    Ok(out)
}
