//! Warp intrinsics (`mma.sync`): one IR thread becomes one warp.
//!
//! `rewrite_statement` turns the contraction into whole-tile `intrinsic
//! ... mma` ops, as for vector intrinsics: the thread computes its 16 × 8
//! tiles. The hardware instruction is the warp's, with the tile spread over
//! its 32 lanes, so this step makes the lanes explicit in the IR:
//!
//! 1. The body of the innermost thread loop is wrapped in two `lane` loops,
//!    the lane's group `g` (8) and its index in the group `t` (4). All of
//!    the thread's work runs in each lane, on the same values, except what
//!    touches the accumulator; cooperative copies are shared by all lanes.
//! 2. The accumulator (the thread's `local` register tile) becomes each
//!    lane's fragment: its `m` dimension `M` becomes `[M / 16, 2]` and its
//!    `n` dimension `N` becomes `[N / 8, 2]`, lane `(g, t)` holding the
//!    tile's rows `16·q + g + 8·h` and columns `8·q' + 2·t + p` (PTX's
//!    m16n8 accumulator layout, `IntrinsicCall::fragment_point`).
//! 3. Every other access of the accumulator (the fold into the output,
//!    an epilogue) sits in loops over its whole `m` and `n` dimensions;
//!    each such loop now runs over the lane's rows (or columns) only: its
//!    variable `i` becomes `16·i + 8·h + g` (`8·j + 2·t + p`) with a new
//!    inner loop over `h` (`p`). The lanes together still cover every
//!    element once, so the nest computes what it did.
//! 4. The intrinsics get `lane(%g, %t)` and the fragment as accumulator;
//!    `a` and `b` keep addressing the whole tile in memory, from which each
//!    lane loads its own fragment of them (code generation).

use crate::nest::{for_loop, induction_var, rewrite_index_exprs, subtree};
use tilec::diag::Diagnostic;
use tilec::ir::builder::{Cursor, pack_indices};
use tilec::ir::*;

/// Rows and columns of the accumulator tile one `mma` covers (`m16n8`).
const TILE: [i64; 2] = [16, 8];

fn cannot(what: impl Into<String>) -> Diagnostic {
    Diagnostic::error(format!("cannot spread the warp intrinsic over lanes: {}", what.into()))
}

/// `e` as `1 · v` for a loop variable `v`.
fn lone_var(e: &AffineExpr<Value>) -> Option<Value> {
    match e.terms() {
        [(v, 1)] if e.constant_term() == 0 && e.divisor() == 1 => Some(*v),
        _ => None,
    }
}

/// The one dimension a step list moves by 1 (the others 0).
fn unit_dim(steps: &[i64]) -> Option<usize> {
    let moved: Vec<usize> = (0..steps.len()).filter(|&d| steps[d] != 0).collect();
    match moved.as_slice() {
        [d] if steps[*d] == 1 => Some(*d),
        _ => None,
    }
}

/// The accumulator dimensions an intrinsic's `m` and `n` step by 1 (two
/// different ones), if they are.
fn acc_dims(f: &Function, call: Op) -> Option<(usize, usize)> {
    let OpKind::Intrinsic(x) = &f.ops[call].kind else { return None };
    let (dm, dn) = (unit_dim(x.acc.axis_steps(0)?)?, unit_dim(x.acc.axis_steps(1)?)?);
    (dm != dn).then_some((dm, dn))
}

/// Spreads the whole-tile `mma` intrinsics of `kernel` over the lanes of
/// a warp (the module doc). `max_threads`: the target's threads per block.
pub(super) fn spread_over_lanes(f: &mut Function, kernel: Op, max_threads: u64) -> Result<(), Diagnostic> {
    let span = f.op_spans[kernel];
    let calls: Vec<Op> = subtree(f, kernel)
        .into_iter()
        .filter(|&o| matches!(&f.ops[o].kind, OpKind::Intrinsic(x) if x.kind == IntrinsicKind::Mma && x.lane.is_none()))
        .collect();
    let Some(&first) = calls.first() else { return Ok(()) };
    let acc = f.ops[first].operands[0];
    if let Some(&other) = calls.iter().find(|&&o| f.ops[o].operands[0] != acc) {
        return Err(cannot("two accumulators").at(f.op_spans[other], "this intrinsic").with_secondary(f.op_spans[first], "and this one"));
    }
    let alloc = f.def_op(acc).filter(|&o| matches!(f.ops[o].kind, OpKind::Alloc));
    let buf = f.value_type(acc).as_buffer().cloned();
    let (Some(alloc), Some(buf)) = (alloc, buf.filter(|b| b.scope == MemScope::Local)) else {
        return Err(cannot("the accumulator is not a `local` buffer of the kernel")
            .at(f.op_spans[first], "this intrinsic")
            .with_note("a warp intrinsic accumulates in the thread's register tile, which becomes each lane's fragment"));
    };
    // The accumulator's `m` and `n` dimensions.
    let Some((dm, dn)) = acc_dims(f, first) else {
        return Err(cannot("the accumulator's `m` and `n` are not two of its dimensions").at(f.op_spans[first], "this intrinsic"));
    };
    if let Some(&o) = calls.iter().find(|&&o| acc_dims(f, o) != Some((dm, dn))) {
        return Err(cannot("the intrinsics use the accumulator's dimensions differently").at(f.op_spans[o], "this intrinsic"));
    }
    let [sm, sn] = [buf.shape[dm], buf.shape[dn]];
    if sm % TILE[0] as u64 != 0 || sn % TILE[1] as u64 != 0 {
        return Err(cannot(format!("the accumulator's tile is {sm} × {sn}, not a multiple of 16 × 8"))
            .at(f.op_spans[alloc], "the accumulator")
            .with_help("make the thread level's tiles of the axes on `m` and `n` multiples of 16 and 8"));
    }
    // The innermost thread loop: its iterations become warps.
    let ancestors = f.ancestors(alloc);
    let Some(&thread) = ancestors.iter().find(|&&o| for_loop(f, o).is_some_and(|l| matches!(l.mapping, Mapping::Thread(_)))) else {
        return Err(cannot("the accumulator is outside the thread loops")
            .at(f.op_spans[alloc], "the accumulator")
            .with_note("each thread-loop iteration becomes a warp; run tensorize after `bind`"));
    };
    let threads: u64 = ancestors.iter().filter_map(|&o| for_loop(f, o)).filter(|l| matches!(l.mapping, Mapping::Thread(_))).map(|l| l.extent).product();
    if threads * WARP_LANES > max_threads {
        return Err(cannot(format!("{threads} threads of {WARP_LANES} lanes are {} hardware threads, over the block's {max_threads}", threads * WARP_LANES))
            .at(span, "in this kernel")
            .with_help("with a warp intrinsic each thread-level tile is a warp's: use fewer, larger thread tiles"));
    }
    // Every other access of the accumulator, and the loops over its
    // `m` and `n` dimensions around it.
    let mut accesses: Vec<Op> = Vec::new();
    let mut row_loops: Vec<Op> = Vec::new();
    let mut col_loops: Vec<Op> = Vec::new();
    for o in subtree(f, kernel) {
        if !f.ops[o].operands.contains(&acc) || o == alloc || calls.contains(&o) || matches!(f.ops[o].kind, OpKind::Fill(_)) {
            continue;
        }
        let is_access = match f.ops[o].kind {
            OpKind::Load(_) => f.ops[o].operands[0] == acc,
            OpKind::Store(_) => f.ops[o].operands[1] == acc && f.ops[o].operands[0] != acc,
            _ => false,
        };
        if !is_access {
            return Err(cannot(format!("`{}` uses the accumulator", f.ops[o].kind.mnemonic()))
                .at(f.op_spans[o], "here")
                .with_note("only `fill`, loads and stores of the accumulator can follow it into the lanes' fragments"));
        }
        let idx = f.access_indices(o);
        for (d, size, loops) in [(dm, sm, &mut row_loops), (dn, sn, &mut col_loops)] {
            let lp = lone_var(&idx[d])
                .filter(|&v| f.loop_extent(v) == Some(size) && (0..idx.len()).all(|e| e == d || idx[e].coeff(v) == 0))
                .and_then(|v| match f.values[v].def {
                    ValueDef::RegionArg(r, 0) => f.regions[r].owner,
                    _ => None,
                })
                .filter(|&l| f.ancestors(l).contains(&thread));
            let Some(lp) = lp else {
                return Err(cannot(format!("this access of the accumulator does not index dimension {d} by a loop over all its {size} elements"))
                    .at(f.op_spans[o], "this access")
                    .with_note("each lane reaches its own elements by running such loops over its rows and columns only"));
            };
            if !loops.contains(&lp) {
                loops.push(lp);
            }
        }
        accesses.push(o);
    }
    if let Some(&both) = row_loops.iter().find(|l| col_loops.contains(l)) {
        return Err(cannot("one loop runs over both the accumulator's rows and columns").at(f.op_spans[both], "this loop"));
    }

    // 1. The lane loops.
    let body = f.ops[thread].regions[0];
    let ops = f.regions[body].ops.clone();
    let (_, group_body, g) = f.build_for(Cursor::end(body), 8, Mapping::Lane, None, "lane_group", span);
    let (_, lane_body, t) = f.build_for(Cursor::end(group_body), 4, Mapping::Lane, None, "lane_in_group", span);
    for o in ops {
        f.move_op(o, Cursor::end(lane_body));
    }
    // 2. The fragment's type: `m` → [M / 16, 2], `n` → [N / 8, 2].
    let mut shape = Vec::new();
    for (d, &s) in buf.shape.iter().enumerate() {
        match d {
            _ if d == dm => shape.extend([s / 16, 2]),
            _ if d == dn => shape.extend([s / 8, 2]),
            _ => shape.push(s),
        }
    }
    f.values[acc].ty = Type::Buffer(BufferType { shape, ..buf.clone() });
    let split = |old: &[AffineExpr<Value>], m: [AffineExpr<Value>; 2], n: [AffineExpr<Value>; 2]| -> Vec<AffineExpr<Value>> {
        let mut out = Vec::new();
        for (d, e) in old.iter().enumerate() {
            match d {
                _ if d == dm => out.extend(m.clone()),
                _ if d == dn => out.extend(n.clone()),
                _ => out.push(e.clone()),
            }
        }
        out
    };
    // 3. The loops over rows and columns run over the lane's own: the new
    // indices of the accumulator's accesses first, then the variables.
    let mut inner: std::collections::HashMap<Value, Value> = std::collections::HashMap::new();
    let mut substitutions: Vec<(Op, Value, AffineExpr<Value>)> = Vec::new();
    for (loops, tile, lane, lane_scale) in [(&row_loops, TILE[0], g, 1), (&col_loops, TILE[1], t, 2)] {
        for &lp in loops {
            let l = for_loop(f, lp).expect("a loop").clone();
            let v = induction_var(f, lp);
            let lp_body = f.ops[lp].regions[0];
            let moved = f.regions[lp_body].ops.clone();
            let (_, half_body, half) = f.build_for(Cursor::end(lp_body), 2, l.mapping, None, if lane_scale == 1 { "row_half" } else { "col_pair" }, f.op_spans[lp]);
            for o in moved {
                f.move_op(o, Cursor::end(half_body));
            }
            if let OpKind::For(l) = &mut f.ops[lp].kind {
                l.extent /= tile as u64;
            }
            inner.insert(v, half);
            // v → tile·v + (tile / 2)·half + lane_scale·lane (rows g + 8h;
            // columns 2t + p).
            let half_step = if lane_scale == 1 { tile / 2 } else { 1 };
            let e = AffineExpr::from_parts([(v, tile), (half, half_step), (lane, lane_scale)], 0, 1).expect("small");
            substitutions.push((lp, v, e));
        }
    }
    for &o in &accesses {
        let idx = f.access_indices(o);
        let part = |d: usize| {
            let v = lone_var(&idx[d]).expect("checked");
            [AffineExpr::var(v), AffineExpr::var(inner[&v])]
        };
        let new = split(&idx, part(dm), part(dn));
        f.set_access_indices(o, &new);
    }
    for (lp, v, e) in substitutions {
        let inside: Vec<Op> = subtree(f, lp).into_iter().filter(|o| !accesses.contains(o)).collect();
        rewrite_index_exprs(f, &inside, |x| x.substitute(|w| if w == v { e.clone() } else { AffineExpr::var(w) }).expect("small"));
    }
    // 4. The intrinsics: the lane and its fragment.
    let pos = |d: usize| d + usize::from(dm < d) + usize::from(dn < d);
    let rank = buf.shape.len() + 2;
    for &o in &calls {
        let OpKind::Intrinsic(y) = &f.ops[o].kind else { unreachable!("collected intrinsics") };
        let mut y = (**y).clone();
        let origins: Vec<Vec<AffineExpr<Value>>> = y.tiles().iter().map(|t| t.indices.iter().map(|e| f.expr_in_values(o, e)).collect()).collect();
        let (Some(qm), Some(qn)) = (origins[0][dm].exact_quotient(TILE[0]), origins[0][dn].exact_quotient(TILE[1])) else {
            return Err(cannot("a tile of the accumulator does not start at a multiple of 16 × 8").at(f.op_spans[o], "this intrinsic"));
        };
        let zero = AffineExpr::constant(0);
        let acc_origin = split(&origins[0], [qm, zero.clone()], [qn, zero]);
        let mut steps: [Vec<i64>; 3] = [vec![0; rank], vec![0; rank], vec![0; rank]];
        steps[0][pos(dm) + 1] = 1;
        steps[1][pos(dn) + 1] = 1;
        let lane = [AffineExpr::var(g), AffineExpr::var(t)];
        let buffers = f.ops[o].operands[..3].to_vec();
        let (operands, mut packed) = pack_indices(buffers, &[&acc_origin, &origins[1], &origins[2], &lane]);
        let lane_dims = packed.pop().expect("4 groups");
        y.lane = Some([lane_dims[0].clone(), lane_dims[1].clone()]);
        for (tile, indices) in y.tiles_mut().into_iter().zip(packed) {
            tile.indices = indices;
        }
        y.acc.steps = steps.map(|s| vec![s]);
        f.ops[o].operands = operands;
        f.ops[o].kind = OpKind::Intrinsic(Box::new(y));
    }
    Ok(())
}
