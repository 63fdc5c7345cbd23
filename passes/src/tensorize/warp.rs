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
//!
//! **Fused mappings** (several op axes on `m` or `n`, AMOS's implicit
//! GEMM: a convolution's `h · w` on `m`) split the axis into parts, the
//! innermost part the least significant digits of the row (column). A
//! row `g + 8·h` is 4 bits, bits 0-2 the lane's group and bit 3 the
//! fragment's; a column `2·t + p` is 3 bits, bit 0 the fragment's and bits
//! 1-2 the lane's index. Each part holds a range of those bits
//! ([`AccPart`]). The lane loops are split where a part begins (`m = [h,
//! w]` of 4 × 4: the group's high bit, `lane_group_hi` of 2, and its two
//! low bits, `lane_group_lo` of 4), so each part's digit is a sum of loop
//! variables and every index stays affine: `w = g_lo`, `h = g_hi +
//! 2·h_frag`. Step 2 then works per part: a part's accumulator
//! dimension `T` becomes `[T / size]`, with `[.., 2]` for the part holding
//! the fragment's bit, and step 3's loops run over the lane's digits of
//! it. A basic mapping is the case of one part per axis.

use crate::nest::{for_loop, induction_var, rewrite_index_exprs, subtree};
use tilec::diag::Diagnostic;
use tilec::ir::builder::{Cursor, pack_indices};
use tilec::ir::*;

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

/// One part of the accumulator's `m` (`axis` 0) or `n` (1) (the whole
/// axis for a basic mapping): the accumulator dimension it steps by 1, its
/// size, and the bits of the tile's row (or column) it holds, `lo..lo +
/// log2(size)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AccPart {
    axis: usize,
    dim: usize,
    size: u64,
    lo: u32,
}

impl AccPart {
    fn hi(&self) -> u32 {
        self.lo + self.size.trailing_zeros()
    }

    /// Where its axis' rows (columns) come from.
    fn bits(&self) -> &'static Bits {
        if self.axis == 0 { &ROW_BITS } else { &COL_BITS }
    }

    /// The place of the fragment's bit in the part's digit, if the part
    /// holds it (exactly one part of each axis does).
    fn frag_place(&self) -> Option<u32> {
        let frag = self.bits().frag;
        (self.lo..self.hi()).contains(&frag).then(|| frag - self.lo)
    }
}

/// Where a lane's fragment takes a row or column from: the lane's bits
/// `lane_lo..lane_hi` of it and the fragment's one bit `frag` (`m`: rows
/// `g + 8·h`, bits 0-2 the lane's group, bit 3 the fragment's; `n`:
/// columns `2·t + p`, bit 0 the fragment's, bits 1-2 the lane's index in
/// its group).
struct Bits {
    lane_lo: u32,
    lane_hi: u32,
    frag: u32,
}

const ROW_BITS: Bits = Bits { lane_lo: 0, lane_hi: 3, frag: 3 };
const COL_BITS: Bits = Bits { lane_lo: 1, lane_hi: 3, frag: 0 };

/// The accumulator's parts of intrinsic axis `axis` (`m` 0, `n` 1) in
/// `call`, outermost first, leaving out parts of one point: each steps
/// one dimension by 1, the sizes powers of two (they multiply to 16 or
/// 8), each part's bits above the inner ones'.
fn acc_parts(f: &Function, call: Op, axis: usize) -> Option<Vec<AccPart>> {
    let OpKind::Intrinsic(x) = &f.ops[call].kind else { return None };
    let mut out = Vec::new();
    let mut lo = 0;
    for (steps, &size) in x.acc.steps[axis].iter().zip(&x.parts[axis]).rev() {
        if size == 1 {
            continue;
        }
        if !size.is_power_of_two() {
            return None;
        }
        let part = AccPart { axis, dim: unit_dim(steps)?, size, lo };
        lo = part.hi();
        out.push(part);
    }
    out.reverse();
    Some(out)
}

/// The lane loops' bit ranges over `bits`' lane bits: split where a part
/// begins or ends, most significant first.
fn lane_segments(parts: &[AccPart], bits: &Bits) -> Vec<(u32, u32)> {
    let mut cuts: Vec<u32> = parts.iter().flat_map(|p| [p.lo, p.hi()]).filter(|&b| b > bits.lane_lo && b < bits.lane_hi).collect();
    cuts.extend([bits.lane_lo, bits.lane_hi]);
    cuts.sort_unstable();
    cuts.dedup();
    cuts.windows(2).rev().map(|w| (w[0], w[1])).collect()
}

/// Names of the lane loops of `n` segments, by the name of the whole.
fn segment_names(whole: &str, n: usize) -> Vec<String> {
    match n {
        1 => vec![whole.to_string()],
        2 => vec![format!("{whole}_hi"), format!("{whole}_lo")],
        _ => (0..n).map(|i| format!("{whole}_{}", n - 1 - i)).collect(),
    }
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
    // The accumulator's parts of `m` and `n` (one each for a basic
    // mapping), on distinct dimensions.
    let parts_of = |o: Op| -> Option<[Vec<AccPart>; 2]> {
        let (m, n) = (acc_parts(f, o, 0)?, acc_parts(f, o, 1)?);
        let mut dims: Vec<usize> = m.iter().chain(&n).map(|p| p.dim).collect();
        let count = dims.len();
        dims.sort_unstable();
        dims.dedup();
        (dims.len() == count && !m.is_empty() && !n.is_empty()).then_some([m, n])
    };
    let Some(parts) = parts_of(first) else {
        return Err(cannot("the accumulator's `m` and `n` are not two of its dimensions").at(f.op_spans[first], "this intrinsic"));
    };
    if let Some(&o) = calls.iter().find(|&&o| parts_of(o).as_ref() != Some(&parts)) {
        return Err(cannot("the intrinsics use the accumulator's dimensions differently").at(f.op_spans[o], "this intrinsic"));
    }
    let all_parts: Vec<AccPart> = parts.iter().flatten().copied().collect();
    if let Some(p) = all_parts.iter().find(|p| !buf.shape[p.dim].is_multiple_of(p.size)) {
        let [m, n] = &parts;
        let tile = match (m.as_slice(), n.as_slice()) {
            ([pm], [pn]) => format!("{} × {}, not a multiple of 16 × 8", buf.shape[pm.dim], buf.shape[pn.dim]),
            _ => format!("{} along dimension {}, not a multiple of the {} points of the intrinsic's axis it holds", buf.shape[p.dim], p.dim, p.size),
        };
        return Err(cannot(format!("the accumulator's tile is {tile}"))
            .at(f.op_spans[alloc], "the accumulator")
            .with_help("make the thread level's tiles of the axes on `m` and `n` multiples of 16 and 8 (of their parts' sizes for a fused mapping)"));
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
    // Every other access of the accumulator, and the loops over each
    // part's dimension around it.
    let mut accesses: Vec<Op> = Vec::new();
    let mut part_loops: Vec<Vec<Op>> = vec![Vec::new(); all_parts.len()];
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
        for (p, loops) in all_parts.iter().zip(&mut part_loops) {
            let (d, size) = (p.dim, buf.shape[p.dim]);
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
    for (i, loops) in part_loops.iter().enumerate() {
        if let Some(&both) = loops.iter().find(|l| part_loops[i + 1..].iter().any(|other| other.contains(l))) {
            let what = if parts[0].len() + parts[1].len() == 2 { "both the accumulator's rows and columns" } else { "two of the accumulator's dimensions of `m` and `n`" };
            return Err(cannot(format!("one loop runs over {what}")).at(f.op_spans[both], "this loop"));
        }
    }

    // 1. The lane loops: the lane's group (8) and its index in the group
    // (4), each split where a part of a fused `m` (`n`) begins, most
    // significant first, so that each part's lanes are one loop.
    let body = f.ops[thread].regions[0];
    let ops = f.regions[body].ops.clone();
    let segments = parts.each_ref().map(|ps| lane_segments(ps, ps[0].bits()));
    let names = [segment_names("lane_group", segments[0].len()), segment_names("lane_in_group", segments[1].len())];
    let mut at = body;
    let mut lane_vars: [Vec<(u32, Value)>; 2] = [Vec::new(), Vec::new()];
    for axis in 0..2 {
        for (&(lo, hi), name) in segments[axis].iter().zip(&names[axis]) {
            let (_, inner, v) = f.build_for(Cursor::end(at), 1 << (hi - lo), Mapping::Lane, None, name, span);
            lane_vars[axis].push((lo, v));
            at = inner;
        }
    }
    for o in ops {
        f.move_op(o, Cursor::end(at));
    }
    // The lane's group g (the row bits 0-2) and index t (column bits 1-2).
    let lane_expr = |axis: usize, bits: &Bits| {
        AffineExpr::from_parts(lane_vars[axis].iter().map(|&(lo, v)| (v, 1i64 << (lo - bits.lane_lo))), 0, 1).expect("small")
    };
    let lane = [lane_expr(0, &ROW_BITS), lane_expr(1, &COL_BITS)];
    // A part's own lane bits, as a term of its digit: the lane loop of its
    // bits above the fragment's, scaled to its place in the part.
    let lane_term = |p: &AccPart| -> Option<(Value, i64)> {
        lane_vars[p.axis].iter().find(|&&(lo, _)| lo >= p.lo && lo < p.hi()).map(|&(lo, v)| (v, 1i64 << (lo - p.lo)))
    };
    let part_at = |d: usize| all_parts.iter().find(|p| p.dim == d);

    // 2. The fragment's type: a part's dimension `T` becomes `[T / size]`,
    // and `[T / size, 2]` for the part holding the fragment's bit.
    let mut shape = Vec::new();
    for (d, &s) in buf.shape.iter().enumerate() {
        match part_at(d) {
            Some(p) if p.frag_place().is_some() => shape.extend([s / p.size, 2]),
            Some(p) => shape.push(s / p.size),
            None => shape.push(s),
        }
    }
    let frag_dim = |d: usize| part_at(d).is_some_and(|p| p.frag_place().is_some());
    // The fragment's dimensions of old dimension `d` (a part's carries its
    // fragment dimension after it).
    let new_dim = |d: usize| (0..d).map(|e| if frag_dim(e) { 2 } else { 1 }).sum::<usize>();
    f.values[acc].ty = Type::Buffer(BufferType { shape, ..buf.clone() });
    // New indices of old ones: a part's dimension by its digit (and its
    // fragment element), the others as they were.
    let split = |old: &[AffineExpr<Value>], digit: &dyn Fn(usize) -> Option<[AffineExpr<Value>; 2]>| -> Vec<AffineExpr<Value>> {
        let mut out = Vec::new();
        for (d, e) in old.iter().enumerate() {
            match digit(d) {
                Some([q, h]) if frag_dim(d) => out.extend([q, h]),
                Some([q, _]) => out.push(q),
                None => out.push(e.clone()),
            }
        }
        out
    };
    // 3. The loops over each part's dimension run over the lane's own
    // elements: variable `v` of a loop over `T` becomes `size·v + (the
    // lane's bits) + (the fragment's bit)·(its place)`, over `T / size`,
    // the part holding the fragment's bit with a new inner loop over it.
    let mut inner: std::collections::HashMap<Value, Value> = std::collections::HashMap::new();
    let mut substitutions: Vec<(Op, Value, AffineExpr<Value>)> = Vec::new();
    for (p, loops) in all_parts.iter().zip(&part_loops) {
        for &lp in loops {
            let l = for_loop(f, lp).expect("a loop").clone();
            let v = induction_var(f, lp);
            let mut terms: Vec<(Value, i64)> = vec![(v, p.size as i64)];
            terms.extend(lane_term(p));
            if let Some(place) = p.frag_place() {
                let lp_body = f.ops[lp].regions[0];
                let moved = f.regions[lp_body].ops.clone();
                let (_, half_body, half) = f.build_for(Cursor::end(lp_body), 2, l.mapping, None, if p.axis == 0 { "row_half" } else { "col_pair" }, f.op_spans[lp]);
                for o in moved {
                    f.move_op(o, Cursor::end(half_body));
                }
                inner.insert(v, half);
                terms.push((half, 1i64 << place));
            }
            if let OpKind::For(l) = &mut f.ops[lp].kind {
                l.extent /= p.size;
            }
            substitutions.push((lp, v, AffineExpr::from_parts(terms, 0, 1).expect("small")));
        }
    }
    for &o in &accesses {
        let idx = f.access_indices(o);
        let digit = |d: usize| -> Option<[AffineExpr<Value>; 2]> {
            all_parts.iter().any(|p| p.dim == d).then(|| {
                let v = lone_var(&idx[d]).expect("checked");
                [AffineExpr::var(v), inner.get(&v).map_or(AffineExpr::constant(0), |&h| AffineExpr::var(h))]
            })
        };
        let new = split(&idx, &digit);
        f.set_access_indices(o, &new);
    }
    for (lp, v, e) in substitutions {
        let inside: Vec<Op> = subtree(f, lp).into_iter().filter(|o| !accesses.contains(o)).collect();
        rewrite_index_exprs(f, &inside, |x| x.substitute(|w| if w == v { e.clone() } else { AffineExpr::var(w) }).expect("small"));
    }
    // 4. The intrinsics: the lane and its fragment, whose `m` (`n`) steps
    // the fragment dimension of the part holding its bit.
    // (One part of `m` and one of `n` hold a fragment's bit.)
    let rank = buf.shape.len() + 2;
    for &o in &calls {
        let OpKind::Intrinsic(y) = &f.ops[o].kind else { unreachable!("collected intrinsics") };
        let mut y = (**y).clone();
        let origins: Vec<Vec<AffineExpr<Value>>> = y.tiles().iter().map(|t| t.indices.iter().map(|e| f.expr_in_values(o, e)).collect()).collect();
        let mut quotients = std::collections::HashMap::new();
        for p in &all_parts {
            let Some(q) = origins[0][p.dim].exact_quotient(p.size as i64) else {
                let what = if all_parts.len() == 2 { "16 × 8".to_string() } else { "its parts' sizes".to_string() };
                return Err(cannot(format!("a tile of the accumulator does not start at a multiple of {what}")).at(f.op_spans[o], "this intrinsic"));
            };
            quotients.insert(p.dim, q);
        }
        let acc_origin = split(&origins[0], &|d| quotients.get(&d).map(|q| [q.clone(), AffineExpr::constant(0)]));
        let mut steps: [Vec<i64>; 3] = [vec![0; rank], vec![0; rank], vec![0; rank]];
        for p in all_parts.iter().filter(|p| p.frag_place().is_some()) {
            steps[p.axis][new_dim(p.dim) + 1] = 1;
        }
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
