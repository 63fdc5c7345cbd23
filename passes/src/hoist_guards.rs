//! `hoist-guards`: runs the tiles that lie wholly inside the iteration
//! space without bounds checks.
//!
//! `tile` guards a partial tile's points in the innermost body, inside
//! the register tile's loops and inside serial loops the guard does not
//! depend on (the reduction steps). Left there, code generation keeps the
//! accumulators in memory (their stores are conditional, so LLVM cannot
//! promote them to registers) and, on the vector axis, masks every access
//! of every tile. This pass versions the nest instead: the copy that runs
//! for whole tiles has no guard.

use std::collections::{HashMap, HashSet};

use crate::nest::{dissolve_guard, for_loop, induction_var, kernels, subtree};
use tilec::diag::Diagnostics;
use tilec::ir::builder::Cursor;
use tilec::ir::*;
use tilec::pass::{Pass, PassContext, PassDecl, PassOptions};

pub static DECL: PassDecl = PassDecl {
    name: "hoist-guards",
    summary: "Version loop nests so that whole tiles run without bounds checks",
    description: "
A partial tile's guard (`if e < b`, made by `tile`) sits in the innermost
body, inside loops it does not depend on; there its conditional stores keep
accumulators out of registers and its lane conditions mask every vector
access of every tile. For each loop that stays a loop in the generated code
(serial or parallel; outer loops first), this pass takes the guard
conditions it can check in the loop's body: those whose loops between the
body and the guard are unrolled, vector lanes or virtual threads where the
condition uses them, with at least one loop between that stays a loop (else
nothing is gained). Each op of the body holding such a condition is split in
two:

    if e' < b { the op, with the condition dropped from its guards }
    if -e' < 1 - b { the op as it was }

where `e'` is `e` with the loops between at their largest values, so the
first copy runs exactly where the condition holds for every point inside
(the second is the first's complement). Where every store, copy, fill and
intrinsic of the op lies under the condition, the second copy also checks
that the condition holds for some point (`e'' < b`, the loops between at
their smallest values): a tile wholly past the extent skips its loops
instead of running them with every point's guard false. A guard left
without conditions gives way to its body. Ops holding allocations or
parallel loops are not copied (the check then moves to an inner loop);
conditions with a divisor, and kernels with barriers or GPU-mapped loops,
are left alone.

A padded read (`load %x[e...] pad(v)`, a convolution's or pooling's border)
checks `0 ≤ e < n` on every element. A bound that holds over the whole
iteration space is dropped, and a load left without any loses its padding.
Then, for each loop that stays a loop (outer loops first), each op of its
body whose padded loads in vector code have every remaining bound
checkable in the body, the loops between at the values that make each bound
tightest (unrolled, vector, serial: a pooling window's steps too), is
split:

    if c1, ..., ck { the op, its loads unpadded }
    if ¬c1 { the op as it was }
    if c1, ¬c2 { the op as it was }
    ...

so the tiles whose every read lies inside the source read without checks
(a stride-2 row of lanes then loads as two vectors and a shuffle), and the
border tiles as before. A load is versioned once: its padded copies are
not split again inside.",
    options: &[],
    statistics: &[
        ("versioned", "ops split into a guard-free and a guarded copy"),
        ("dropped", "conditions dropped from guard-free copies"),
        ("padding-versioned", "ops split into a copy whose loads read inside their source and copies that read the padding"),
        ("unpadded", "loads that lost their padding (read inside their source everywhere, or in a padding-free copy)"),
    ],
    create: |_: &PassOptions| Box::new(HoistGuards),
};

pub struct HoistGuards;

impl Pass for HoistGuards {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        for f in &mut module.funcs {
            for (kernel, _) in kernels(f) {
                let gpu_or_barrier = subtree(f, kernel).into_iter().any(|o| {
                    matches!(f.ops[o].kind, OpKind::Barrier) || for_loop(f, o).is_some_and(|l| matches!(l.mapping, Mapping::Block(_) | Mapping::Thread(_)))
                });
                if !gpu_or_barrier {
                    let body = f.ops[kernel].regions[0];
                    hoist_in(f, body, cx);
                    unpad_where_inside(f, kernel, cx);
                    version_padding_in(f, body, cx, &mut HashSet::new());
                }
            }
        }
        Ok(())
    }
}

/// A condition `e < b`, over values.
type Cond = (AffineExpr<Value>, i64);

/// Does loop `op` stay a loop in the generated code?
fn stays_a_loop(f: &Function, op: Op) -> bool {
    for_loop(f, op).is_some_and(|l| matches!(l.mapping, Mapping::Serial | Mapping::Parallel))
}

/// Versions the loops of region `r`, outer before inner.
fn hoist_in(f: &mut Function, r: Region, cx: &mut PassContext) {
    for op in f.regions[r].ops.clone() {
        if stays_a_loop(f, op) {
            version_loop(f, op, cx);
        }
        for inner in f.ops[op].regions.clone() {
            hoist_in(f, inner, cx);
        }
    }
}

/// Condition `cond` of guard `guard` as a condition of loop `l`'s body
/// (the loops between at their largest values), if it can be checked
/// there: every loop between that uses it is unrolled, vector lanes or
/// virtual threads, and at least one loop between stays a loop (else
/// nothing is gained).
fn hoisted_to(f: &Function, guard: Op, cond: &Cond, l: Op) -> Option<Cond> {
    hoisted(f, guard, cond, l, Extreme::Every)
}

/// Which points of the loops between a hoisted condition speaks for.
#[derive(Clone, Copy, PartialEq)]
enum Extreme {
    /// It holds for every point (the loops at their largest values):
    /// the guard-free copy's condition.
    Every,
    /// It holds for some point (the loops at their smallest values): the
    /// condition under which the guarded copy does anything.
    Some,
}

/// [`hoisted_to`], at the loops' values that `extreme` names.
fn hoisted(f: &Function, guard: Op, cond: &Cond, l: Op, extreme: Extreme) -> Option<Cond> {
    if cond.0.divisor() != 1 {
        return None;
    }
    let ancestors = f.ancestors(guard);
    let at = ancestors.iter().position(|&a| a == l)?;
    let between = &ancestors[..at];
    if !between.iter().any(|&a| stays_a_loop(f, a)) {
        return None;
    }
    // A loop that stays a loop cannot be checked outside it.
    if between.iter().any(|&a| stays_a_loop(f, a) && cond.0.uses(induction_var(f, a))) {
        return None;
    }
    at_extremes(f, cond, between, extreme)
}

/// `cond` with each loop of `between` that it uses at the value that
/// `extreme` names (for `Every`, the value that makes `e` largest), and
/// its constant moved to the bound: `e + k < b` reads better as `e < b -
/// k`.
fn at_extremes(f: &Function, cond: &Cond, between: &[Op], extreme: Extreme) -> Option<Cond> {
    let (e, bound) = cond;
    let mut at: HashMap<Value, i64> = HashMap::new();
    for &a in between {
        let Some(lp) = for_loop(f, a) else { continue };
        let iv = induction_var(f, a);
        if e.uses(iv) {
            let last = i64::try_from(lp.extent).ok()? - 1;
            at.insert(iv, if (e.coeff(iv) > 0) == (extreme == Extreme::Every) { last } else { 0 });
        }
    }
    let hoisted = e.substitute(|v| at.get(&v).map_or_else(|| AffineExpr::var(v), |&x| AffineExpr::constant(x))).ok()?;
    let k = hoisted.constant_term();
    let hoisted = hoisted.checked_add(&AffineExpr::constant(-k)).ok()?;
    Some((hoisted, bound.checked_sub(k)?))
}

/// Is `op` left uncopied? Allocations are not copied, and a parallel nest
/// stays one (its loops directly nested): the check moves inside.
fn is_kept(f: &Function, op: Op) -> bool {
    std::iter::once(op).chain(subtree(f, op)).any(|o| matches!(f.ops[o].kind, OpKind::Alloc) || for_loop(f, o).is_some_and(|x| x.mapping == Mapping::Parallel))
}

/// `e < b` negated: `-e < 1 - b`.
fn negated(cond: &Cond) -> Option<Cond> {
    Some((cond.0.checked_scale(-1).ok()?, 1i64.checked_sub(cond.1)?))
}

/// Has a guard around `op` already split on `cond` (so splitting again
/// would make a copy that never runs)?
fn decided(f: &Function, op: Op, cond: &Cond) -> bool {
    let negation = negated(cond);
    f.ancestors(op).into_iter().any(|a| f.guard_conds(a).iter().any(|c| c == cond || Some(c) == negation.as_ref()))
}

/// The guards inside `op` (and `op` itself if it is one).
fn guards_in(f: &Function, op: Op) -> Vec<Op> {
    std::iter::once(op).chain(subtree(f, op)).filter(|&o| matches!(f.ops[o].kind, OpKind::If(_))).collect()
}

/// Splits the ops of loop `l`'s body on each condition that belongs
/// there, one condition at a time.
fn version_loop(f: &mut Function, l: Op, cx: &mut PassContext) {
    let body = f.ops[l].regions[0];
    let mut done: Vec<Cond> = Vec::new();
    loop {
        let next = guards_in(f, l).into_iter().find_map(|g| {
            f.guard_conds(g).iter().filter_map(|c| hoisted_to(f, g, c, l)).find(|h| !done.contains(h) && !decided(f, g, h))
        });
        let Some(cond) = next else { return };
        for op in f.regions[body].ops.clone() {
            let holds = guards_in(f, op).into_iter().any(|g| !decided(f, g, &cond) && f.guard_conds(g).iter().any(|c| hoisted_to(f, g, c, l).as_ref() == Some(&cond)));
            if holds && !is_kept(f, op) {
                split(f, op, &cond, l, cx);
            }
        }
        done.push(cond);
    }
}

/// The condition under which `op` does anything, where every effect in it
/// (a store, copy, fill or intrinsic) lies under a guard whose condition hoists to
/// `cond` at `l` and all those conditions agree on it: some point of the
/// loops between passes ([`Extreme::Some`]). A tile that lies wholly past
/// the extent then skips its serial loops instead of running them with
/// every point's guard false (GEMM 512 x 768 x 3072 with `i = [512, 96,
/// 6]`: 11 of the last L2 tile's 16 register tiles lie past row 511, and
/// each ran its 256 reduction steps).
fn any_point(f: &Function, op: Op, cond: &Cond, l: Op) -> Option<Cond> {
    let mut any: Option<Cond> = None;
    for o in std::iter::once(op).chain(subtree(f, op)) {
        if !matches!(f.ops[o].kind, OpKind::Store(_) | OpKind::Copy(_) | OpKind::Fill(_) | OpKind::Intrinsic(_)) {
            continue;
        }
        let here = f.ancestors(o).into_iter().filter(|&g| matches!(f.ops[g].kind, OpKind::If(_))).find_map(|g| {
            let c = f.guard_conds(g).into_iter().find(|c| hoisted_to(f, g, c, l).as_ref() == Some(cond))?;
            hoisted(f, g, &c, l, Extreme::Some)
        })?;
        match &any {
            Some(a) if *a != here => return None,
            _ => any = Some(here),
        }
    }
    any
}

/// `if e' < b { op without the condition } if -e' < 1 - b { op }`, the
/// second with the condition that some point passes where
/// [`any_point`] finds one.
fn split(f: &mut Function, op: Op, cond: &Cond, l: Op, cx: &mut PassContext) {
    let Some(negation) = negated(cond) else { return };
    // Where no loop between moves the condition, "some point" is "every
    // point": the guarded copy is then the complement already.
    let any = any_point(f, op, cond, l).filter(|a| a != cond);
    let region = f.ops[op].parent;
    let pos = f.regions[region].ops.iter().position(|&o| o == op).expect("op is in its parent region");
    let span = f.op_spans[op];
    let (_, whole) = f.build_if(Cursor::at(region, pos), std::slice::from_ref(cond), span);
    let copy = f.clone_op(Cursor::end(whole), op, &mut HashMap::new());
    let partial_conds: Vec<Cond> = std::iter::once(negation).chain(any).collect();
    let (_, partial) = f.build_if(Cursor::at(region, pos + 1), &partial_conds, span);
    f.move_op(op, Cursor::end(partial));
    for g in guards_in(f, copy) {
        let conds = f.guard_conds(g);
        let kept: Vec<Cond> = conds.iter().filter(|c| hoisted_to(f, g, c, l).as_ref() != Some(cond)).cloned().collect();
        if kept.len() == conds.len() {
            continue;
        }
        cx.bump("dropped", (conds.len() - kept.len()) as u64);
        if kept.is_empty() {
            dissolve_guard(f, g);
        } else {
            f.set_guard_conds(g, &kept);
        }
    }
    cx.bump("versioned", 1);
}

/// The bounds a padded load checks: for each index `e` into a dimension of
/// `n`, `e < n` and `-e < 1` (that is, `e ≥ 0`). `None` when an index has
/// a divisor (its padding also stands for an inexact division) or the
/// source has no shape.
fn pad_bounds(f: &Function, load: Op) -> Option<Vec<Cond>> {
    let OpKind::Load(a) = &f.ops[load].kind else { return None };
    a.pad.as_ref()?;
    let shape = f.value_type(f.ops[load].operands[0]).readable()?.shape;
    let indices = f.access_indices(load);
    if indices.len() != shape.len() || indices.iter().any(|e| e.divisor() != 1) {
        return None;
    }
    let mut out = Vec::new();
    for (e, &n) in indices.iter().zip(&shape) {
        out.push((e.clone(), i64::try_from(n).ok()?));
        out.push(negated(&(e.clone(), 0))?);
    }
    Some(out)
}

/// Does `cond` hold at every point of the kernel (each variable a loop's
/// induction variable, over its whole range)?
fn holds_everywhere(cond: &Cond, extents: &HashMap<Value, u64>) -> bool {
    let (e, b) = cond;
    if e.vars().any(|v| !extents.contains_key(&v)) {
        return false;
    }
    e.value_range(|v| (0, extents[&v] as i64 - 1)).is_some_and(|(_, hi)| hi < *b)
}

/// The padded loads of `ops` (and everything inside them).
fn padded_loads(f: &Function, op: Op) -> Vec<Op> {
    std::iter::once(op).chain(subtree(f, op)).filter(|&o| matches!(&f.ops[o].kind, OpKind::Load(a) if a.pad.is_some())).collect()
}

/// Drops the padding of `kernel`'s loads whose every bound holds at every
/// point: a border the iteration space never reaches (ResNet's stem pooling
/// reads rows `2·oh + r - 1` up to 111 of 112, so only `≥ 0` is checked).
fn unpad_where_inside(f: &mut Function, kernel: Op, cx: &mut PassContext) {
    let extents: HashMap<Value, u64> = subtree(f, kernel).into_iter().filter_map(|o| for_loop(f, o).map(|l| (induction_var(f, o), l.extent))).collect();
    for load in padded_loads(f, kernel) {
        if pad_bounds(f, load).is_some_and(|bounds| bounds.iter().all(|c| holds_everywhere(c, &extents))) {
            unpad(f, load, cx);
        }
    }
}

fn unpad(f: &mut Function, load: Op, cx: &mut PassContext) {
    if let OpKind::Load(a) = &mut f.ops[load].kind {
        a.pad = None;
        cx.bump("unpadded", 1);
    }
}

/// Bound `cond` of padded load `load` as a condition of loop `l`'s body:
/// every loop between at the value that makes it tightest (any loop: a
/// window's serial steps as well as unrolled points and vector lanes), if
/// at least one loop lies between and what is left uses only `l` and the
/// loops around it (values the body can see). `None` when the bound holds
/// everywhere it is checked from here on (nothing to split on).
fn pad_bound_at(f: &Function, load: Op, cond: &Cond, l: Op) -> Option<Option<Cond>> {
    let ancestors = f.ancestors(load);
    let at = ancestors.iter().position(|&a| a == l)?;
    let between = &ancestors[..at];
    if !between.iter().any(|&a| for_loop(f, a).is_some()) {
        return None;
    }
    let cond = at_extremes(f, cond, between, Extreme::Every)?;
    let visible: HashMap<Value, u64> = std::iter::once(l).chain(f.ancestors(l)).filter_map(|a| for_loop(f, a).map(|x| (induction_var(f, a), x.extent))).collect();
    if cond.0.vars().any(|v| !visible.contains_key(&v)) {
        return None;
    }
    // A bound that holds wherever `l` runs needs no check (a border the
    // loops never reach).
    if holds_everywhere(&cond, &visible) {
        return Some(None);
    }
    Some(Some(cond))
}

/// Versions the ops of each loop of region `r` on their padded loads'
/// bounds, outer loops before inner ones; `done` holds the loads already
/// versioned (their padded copies are not split again).
fn version_padding_in(f: &mut Function, r: Region, cx: &mut PassContext, done: &mut HashSet<Op>) {
    for op in f.regions[r].ops.clone() {
        if stays_a_loop(f, op) {
            version_padding(f, op, cx, done);
        }
        for inner in f.ops[op].regions.clone() {
            version_padding_in(f, inner, cx, done);
        }
    }
}

/// Splits each op of loop `l`'s body whose padded loads can all have their
/// bounds checked in the body ([`pad_bound_at`]) into a copy that reads
/// without padding and copies that cover the rest.
fn version_padding(f: &mut Function, l: Op, cx: &mut PassContext, done: &mut HashSet<Op>) {
    let body = f.ops[l].regions[0];
    for op in f.regions[body].ops.clone() {
        if is_kept(f, op) {
            continue;
        }
        let loads: Vec<Op> = padded_loads(f, op).into_iter().filter(|o| !done.contains(o)).collect();
        let mut conds: Vec<Cond> = Vec::new();
        let mut unpadded: Vec<Op> = Vec::new();
        for &load in &loads {
            if !in_vector_code(f, load) {
                continue;
            }
            let Some(bounds) = pad_bound_at_all(f, load, l) else { continue };
            for c in bounds {
                if !conds.contains(&c) {
                    conds.push(c);
                }
            }
            unpadded.push(load);
        }
        if unpadded.is_empty() {
            continue;
        }
        split_on_padding(f, op, &conds, &unpadded, cx, done);
    }
}

/// Is `load` in vector code (inside a vector loop)? Those are the padded
/// loads worth a copy: unpadded, lanes that move along the row load as
/// vectors (one, or two and a shuffle) where each was a guarded scalar,
/// and a broadcast feeds its vector without a compare and a select (a 1-D
/// convolution's input, broadcast along 16 output channels: 0.073 ms
/// against 0.080). In scalar code the guard costs about as much as the
/// copies do, and three copies of a nest cost LLVM its grip on the
/// accumulators: ResNet's stem pooling, 14 x 2 scalar points a tile, ran
/// in 1.9-2.1 ms so against 1.2-1.6 (in turns, one thread, Zen 4).
fn in_vector_code(f: &Function, load: Op) -> bool {
    f.ancestors(load).into_iter().any(|a| for_loop(f, a).is_some_and(|x| x.mapping == Mapping::Vector))
}

/// Every bound of `load` at loop `l` ([`pad_bound_at`]), those decided
/// true left out; `None` if one cannot be checked there.
fn pad_bound_at_all(f: &Function, load: Op, l: Op) -> Option<Vec<Cond>> {
    pad_bounds(f, load)?.iter().map(|c| pad_bound_at(f, load, c, l)).collect::<Option<Vec<Option<Cond>>>>().map(|v| v.into_iter().flatten().collect())
}

/// `if c1..ck { op, `unpadded` read without padding }`, then the op as it
/// was under `c1..c(i-1), ¬ci` for each `i` (with no bounds left, just
/// the unpadded copy).
fn split_on_padding(f: &mut Function, op: Op, conds: &[Cond], unpadded: &[Op], cx: &mut PassContext, done: &mut HashSet<Op>) {
    let Some(negations) = conds.iter().map(negated).collect::<Option<Vec<Cond>>>() else { return };
    let region = f.ops[op].parent;
    let pos = f.regions[region].ops.iter().position(|&o| o == op).expect("op is in its parent region");
    let span = f.op_spans[op];
    let inside = std::iter::once(op).chain(subtree(f, op)).collect::<Vec<_>>();
    let copy = if conds.is_empty() {
        op
    } else {
        let (_, whole) = f.build_if(Cursor::at(region, pos), conds, span);
        f.clone_op(Cursor::end(whole), op, &mut HashMap::new())
    };
    // The clone's ops in the order of the original's.
    let cloned: Vec<Op> = std::iter::once(copy).chain(subtree(f, copy)).collect();
    debug_assert_eq!(cloned.len(), inside.len());
    for (orig, new) in inside.iter().zip(&cloned) {
        if unpadded.contains(orig) {
            unpad(f, *new, cx);
        }
    }
    if conds.is_empty() {
        return;
    }
    for i in 0..conds.len() {
        let guard: Vec<Cond> = conds[..i].iter().cloned().chain(std::iter::once(negations[i].clone())).collect();
        let (_, partial) = f.build_if(Cursor::at(region, pos + 1 + i), &guard, span);
        let border = if i + 1 == conds.len() { f.move_op(op, Cursor::end(partial)); op } else { f.clone_op(Cursor::end(partial), op, &mut HashMap::new()) };
        done.extend(padded_loads(f, border));
    }
    cx.bump("padding-versioned", 1);
}
