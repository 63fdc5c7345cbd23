//! `tensorize`: rewrites the innermost tile of a contraction into calls of
//! a tensor intrinsic (issue 22, docs/tensorize.md). The mapping
//! candidates it reads live in the core (`tilec::target::mapping`), where
//! the verifier checks a schedule's `intrinsic` knob against them.
//!
//! The rewrite, on a kernel's loop nest:
//!
//! 1. Find the contraction statement: `store (add (load acc[x]) (mul a b)),
//!    acc[x]`, `a` and `b` loads (each possibly `cast` first) tagged with
//!    the op's reads.
//! 2. For each intrinsic axis of size `S > 1`, the innermost loop of the op
//!    axis mapped onto it (its `vector` loop if `vectorize` made one, else
//!    its `point` loop) must run a multiple of `S` times. A loop of exactly
//!    `S` iterations becomes the intrinsic's axis; a longer one keeps
//!    `extent / S` iterations, each covering `S` points of the axis. A
//!    fused axis (several op axes) splits `S` into parts, one per op axis
//!    (`tilec::target::mapping::fused_parts`), each loop treated so with its
//!    part.
//! 3. The loops from the outermost of those down to the statement must
//!    nest perfectly (each holds only the next), so moving the intrinsic's
//!    parts of them innermost keeps every output's sum in its order.
//! 4. The statement becomes one `intrinsic` op whose operands' origins are
//!    the accesses at the tile's first point and whose steps are the
//!    accesses' coefficients of the mapped loops.
//! 5. A `dot` intrinsic's lanes operand staged in a buffer of the kernel's
//!    own takes VNNI's layout where it can (`pack`).

use crate::nest::{for_loop, induction_var, kernels, subtree, target_for};
use tilec::diag::{Diagnostic, Diagnostics};
use tilec::ir::builder::{Cursor, pack_indices};
use tilec::ir::*;
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};
use tilec::target::Intrinsic;

pub static DECL: PassDecl = PassDecl {
    name: "tensorize",
    summary: "Compute the innermost tile of a contraction with a tensor intrinsic",
    description: "
For every kernel whose schedule names an intrinsic (`intrinsic = {name =
\"vpdpbusd.zmm\", a = b, m = [j], k = [k]}`), or for the one given as
options, rewrites the contraction statement (`acc += a * b`, the operands
possibly cast) and the innermost loops of the mapped axes into one
`intrinsic` op per tile: the loops of exactly the intrinsic's size become
its axes, longer ones step by it. Run it after `vectorize` (a vector loop
of the `m` axis becomes the intrinsic's lanes) and before `unroll`. The
mapped axes' innermost loops must run a multiple of the intrinsic's sizes
and nest perfectly around the statement, with no guard inside; the
intrinsic must be one the target offers. Warp intrinsics (`mma.sync`
m16n8kK) make each thread-level tile a warp's: the thread's body runs in two
`lane` loops (the lane's group of 8 and index of 4), its accumulator becomes
the lane's fragments (`[M/16][2][N/8][2]`), the loops over the accumulator's
rows and columns elsewhere (the fold into the output) run over the lane's own,
and each intrinsic names its lane (`lane(%g, %t)`); run it after `bind`.
A fused mapping (several op axes on one intrinsic axis, `m = [oh, ow]`) splits
the intrinsic's axis into parts, one per op axis: each inner one takes what of
the size its innermost loop divides, innermost first, the outermost the rest (a
multiple of it must remain in its loop); the intrinsic then steps each part on
its own (`[4 * 4, 1, 1]`, `m0`, `m1`). For a warp intrinsic the lane loops
split where the parts begin (`lane(%lane_group_hi * 4 + %lane_group_lo, ..)`),
and each part's accumulator dimension holds the lane's digits of it (the AMOS
implicit GEMM of a convolution on `mma.sync`). `wmma` is not rewritten yet. A `dot` intrinsic's
`a` operand staged by `cache` in a local buffer that only the intrinsics
read is then repacked in VNNI's layout, `[K/k][M][k]` (the copy gets `split
[dk, k] permute [...]`), so that each lane's `k` elements and the lanes
follow each other and code generation loads them as one vector (not for a
fused mapping, whose operands are gathered lane by lane).",
    options: &[
        OptionDecl { name: "intrinsic", kind: OptionKind::Str, default: "", help: "the intrinsic (empty: each kernel's schedule)" },
        OptionDecl { name: "a", kind: OptionKind::Str, default: "", help: "with `intrinsic`: the read that plays `a`" },
        OptionDecl { name: "m", kind: OptionKind::Str, default: "", help: "with `intrinsic`: the op axis on `m`" },
        OptionDecl { name: "n", kind: OptionKind::Str, default: "", help: "with `intrinsic`: the op axis on `n`" },
        OptionDecl { name: "k", kind: OptionKind::Str, default: "", help: "with `intrinsic`: the op axis on `k`" },
        OptionDecl {
            name: "pad-shared",
            kind: OptionKind::Bool,
            default: "true",
            help: "pad the rows of the shared tiles warp intrinsics read by 16 bytes where their pitch puts ldmatrix's rows in the same banks (within the target's shared memory)",
        },
    ],
    statistics: &[
        ("tensorized", "contraction statements rewritten into intrinsic calls"),
        ("packed", "staged operands of `dot` intrinsics repacked with their `k` elements innermost (VNNI's layout)"),
        ("padded", "shared tiles of warp intrinsics with their rows padded by 16 bytes (`pad-shared`)"),
    ],
    create: |o: &PassOptions| {
        let axis = |name: &str| o.str(name).split(',').filter(|s| !s.is_empty()).map(str::to_string).collect();
        Box::new(Tensorize {
            forced: (!o.str("intrinsic").is_empty())
                .then(|| Choice { name: o.str("intrinsic").to_string(), a: o.str("a").to_string(), axes: [axis("m"), axis("n"), axis("k")] }),
            pad_shared: o.bool("pad-shared"),
        })
    },
};

/// Does `tensorize` rewrite intrinsic `x` into code that code generation
/// compiles? Vector intrinsics (`fma`, `dot`), and warp `mma` of 16 × 8
/// tiles with f16 operands (into f32 or f16), bf16 ones (into f32) or i8
/// ones (into i32) (tf32 is not compiled yet). What the search offers as
/// intrinsic options.
pub fn rewrites(x: &Intrinsic) -> bool {
    if x.is_vector() {
        return true;
    }
    let types = (x.a.as_str(), x.b.as_str(), x.acc.as_str());
    x.kind == "mma" && [x.m, x.n] == [16, 8] && matches!(types, ("f16", "f16", "f32" | "f16") | ("bf16", "bf16", "f32") | ("i8", "i8", "i32"))
}

/// Which intrinsic computes a kernel's contraction, and how its axes map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub name: String,
    /// The read (its `read(...)` tag) that plays `a`.
    pub a: String,
    /// The op axes on `m`, `n`, `k`.
    pub axes: [Vec<String>; 3],
}

impl Choice {
    /// The choice a schedule's `intrinsic` knob makes.
    pub fn of_schedule(s: &Schedule) -> Option<Choice> {
        s.intrinsic.as_ref().map(|x| Choice { name: x.name.clone(), a: x.a_name.clone(), axes: [x.m.clone(), x.n.clone(), x.k.clone()] })
    }
}

pub struct Tensorize {
    forced: Option<Choice>,
    /// Pad the shared tiles warp intrinsics read (`banks.rs`; the default).
    pad_shared: bool,
}

impl Tensorize {
    /// The pass with `choice` for every kernel, whatever its schedule says.
    pub fn with(choice: Choice) -> Tensorize {
        Tensorize { forced: Some(choice), pad_shared: true }
    }
}

impl Pass for Tensorize {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        let mut diags = Diagnostics::new();
        for f in &mut module.funcs {
            for (kernel, schedule) in kernels(f) {
                let Some(choice) = self.forced.clone().or_else(|| Choice::of_schedule(&schedule)) else { continue };
                let span = f.op_spans[kernel];
                let target = match target_for(cx, &schedule.target, span) {
                    Ok(t) => t,
                    Err(d) => {
                        diags.push(d);
                        continue;
                    }
                };
                let Some(x) = target.intrinsics.iter().find(|x| x.name == choice.name) else {
                    let names: Vec<&str> = target.intrinsics.iter().map(|x| x.name.as_str()).collect();
                    let mut d = Diagnostic::error(format!("target `{}` has no intrinsic `{}`", target.name, choice.name)).at(span, "in this kernel");
                    d = match tilec::diag::closest(&choice.name, names.iter().copied()) {
                        Some(c) => d.with_help(format!("did you mean `{c}`?")),
                        None => d.with_note(format!("its intrinsics: {}", if names.is_empty() { "none".to_string() } else { names.join(", ") })),
                    };
                    diags.push(d);
                    continue;
                };
                if !target.offers(x) {
                    diags.push(
                        Diagnostic::error(format!("target `{}` does not offer `{}`: it needs {}", target.name, x.name, x.features.join(", ")))
                            .at(span, "in this kernel")
                            .with_help("`--target=host` offers what this CPU runs; `tilec --list-targets -v` lists each target's intrinsics"),
                    );
                    continue;
                }
                match tensorize_kernel(f, kernel, x, &choice, u64::from(target.compute.max_threads_per_block)) {
                    Ok(r) => {
                        cx.bump("tensorized", r.statements);
                        cx.bump("packed", r.packed);
                        if self.pad_shared {
                            cx.bump("padded", banks::pad_shared_operands(f, kernel, &target));
                        }
                    }
                    Err(d) => diags.push(d),
                }
            }
        }
        diags.into_result()
    }
}

/// One contraction statement: the ops of `acc[x] += a * b`.
struct Statement {
    store: Op,
    /// The loads of `a` and `b` (as the choice assigns them) and of the
    /// accumulator, and every op of the statement.
    a: Op,
    b: Op,
    acc: Op,
    ops: Vec<Op>,
}

/// What [`tensorize_kernel`] rewrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rewritten {
    /// Contraction statements made intrinsic calls.
    pub statements: u64,
    /// Lanes-operand buffers repacked ([`pack::pack_lanes_operands`]).
    pub packed: u64,
}

/// Rewrites the contraction statements of `kernel`, then packs the lanes
/// operands it can.
///
/// `max_threads`: the target's threads per block, which a warp
/// intrinsic's lanes (32 per thread) must fit.
pub fn tensorize_kernel(f: &mut Function, kernel: Op, x: &Intrinsic, choice: &Choice, max_threads: u64) -> Result<Rewritten, Diagnostic> {
    let span = f.op_spans[kernel];
    let kind = IntrinsicKind::from_name(&x.kind).ok_or_else(|| Diagnostic::error(format!("intrinsic `{}` has an unknown kind `{}`", x.name, x.kind)).at(span, "in this kernel"))?;
    if kind == IntrinsicKind::Wmma || kind == IntrinsicKind::Mma && [x.m, x.n] != [16, 8] {
        return Err(Diagnostic::error(format!("`{}` is a {}×{} `{kind}` intrinsic: tensorize rewrites `mma` intrinsics of 16 × 8 tiles (and vector ones) only, so far", x.name, x.m, x.n))
            .at(span, "in this kernel")
            .with_note("lanes hold fragments of m16n8 accumulators (docs/tensorize.md); choose an `mma.sync.m16n8k*` intrinsic"));
    }
    let sizes = [u64::from(x.m), u64::from(x.n), u64::from(x.k)];
    let statements: Vec<Statement> = subtree(f, kernel).into_iter().filter_map(|op| statement(f, op, &choice.a)).collect();
    if statements.is_empty() {
        return Err(Diagnostic::error(format!("nothing to tensorize: no `acc += a * b` statement reads `{}` as a factor", choice.a))
            .at(span, "in this kernel")
            .with_note("tensorize rewrites the statement `tile` makes of a sum of products of two reads"));
    }
    for s in &statements {
        padding::unguard_statement(f, s);
        rewrite_statement(f, s, x, kind, choice, sizes)?;
    }
    if kind == IntrinsicKind::Mma {
        warp::spread_over_lanes(f, kernel, max_threads)?;
    }
    renumber_reads(f, kernel);
    let packed = pack::pack_lanes_operands(f, kernel);
    Ok(Rewritten { statements: statements.len() as u64, packed })
}

/// A kernel's schedule refers to reads by their position among the
/// kernel's read tags, in program order; an intrinsic lists `a` before
/// `b`, which may change that order. Renumbers the directives to match.
fn renumber_reads(f: &mut Function, kernel: Op) {
    let tags = f.load_read_tags(f.ops[kernel].regions[0]);
    if let OpKind::Kernel(k) = &mut f.ops[kernel].kind {
        for d in &mut k.schedule.cache {
            if let Some(p) = tags.iter().position(|t| *t == d.read_name) {
                d.read = p;
            }
        }
        if let Some(x) = &mut k.schedule.intrinsic
            && let Some(p) = tags.iter().position(|t| *t == x.a_name)
        {
            x.a = p;
        }
    }
}

/// The load defining `v`, looking through one `cast`.
fn load_through_cast(f: &Function, v: Value) -> Option<Op> {
    let op = f.def_op(v)?;
    match &f.ops[op].kind {
        OpKind::Load(_) => Some(op),
        OpKind::Cast => f.def_op(f.ops[op].operands[0]).filter(|&l| matches!(f.ops[l].kind, OpKind::Load(_))),
        _ => None,
    }
}

/// `store` as the end of a contraction statement whose factor `a_read` is
/// one of the two reads.
fn statement(f: &Function, store: Op, a_read: &str) -> Option<Statement> {
    let OpKind::Store(_) = &f.ops[store].kind else { return None };
    let (value, dst) = (f.ops[store].operands[0], f.ops[store].operands[1]);
    let add = f.def_op(value).filter(|&o| matches!(f.ops[o].kind, OpKind::Binary(BinaryOp::Add)))?;
    let [l, r] = [f.ops[add].operands[0], f.ops[add].operands[1]];
    let is_acc = |v: Value| f.def_op(v).filter(|&o| matches!(f.ops[o].kind, OpKind::Load(_)) && f.ops[o].operands[0] == dst && f.access_indices(o) == f.access_indices(store));
    let (acc, product) = match (is_acc(l), is_acc(r)) {
        (Some(acc), _) => (acc, r),
        (None, Some(acc)) => (acc, l),
        _ => return None,
    };
    let mul = f.def_op(product).filter(|&o| matches!(f.ops[o].kind, OpKind::Binary(BinaryOp::Mul)))?;
    let x = load_through_cast(f, f.ops[mul].operands[0])?;
    let y = load_through_cast(f, f.ops[mul].operands[1])?;
    let tag = |o: Op| match &f.ops[o].kind {
        OpKind::Load(a) => a.read.clone(),
        _ => None,
    };
    let (a, b) = if tag(x).as_deref() == Some(a_read) {
        (x, y)
    } else if tag(y).as_deref() == Some(a_read) {
        (y, x)
    } else {
        return None;
    };
    let mut ops: Vec<Op> = vec![store, add, acc, mul];
    for v in [f.ops[mul].operands[0], f.ops[mul].operands[1]] {
        ops.extend(f.def_op(v));
    }
    ops.extend([a, b]);
    ops.sort();
    ops.dedup();
    Some(Statement { store, a, b, acc, ops })
}

fn rewrite_statement(f: &mut Function, s: &Statement, x: &Intrinsic, kind: IntrinsicKind, choice: &Choice, sizes: [u64; 3]) -> Result<(), Diagnostic> {
    let span = f.op_spans[s.store];
    let region = f.ops[s.store].parent;
    // Only the statement in its region: anything else would be reordered
    // with it (or lose its loop).
    if let Some(&other) = f.regions[region].ops.iter().find(|o| !s.ops.contains(o)) {
        return Err(Diagnostic::error(format!("cannot tensorize: `{}` sits beside the contraction statement", f.ops[other].kind.mnemonic()))
            .at(f.op_spans[other], "here")
            .with_secondary(span, "the statement")
            .with_help("tensorize rewrites loop nests as `tile` makes them: the mapped loops around the statement alone"));
    }
    let ancestors = f.ancestors(s.store);
    // Per intrinsic axis, its parts: the innermost loop of each op axis
    // mapped onto it, outermost first, and how many of its iterations the
    // part covers.
    let mut mapped: [Vec<(Op, u64)>; 3] = Default::default();
    for (i, axes) in choice.axes.iter().enumerate() {
        let name = ["m", "n", "k"][i];
        let loops: Vec<Option<Op>> = axes
            .iter()
            .map(|axis| {
                ancestors.iter().copied().find(|&o| {
                    for_loop(f, o).and_then(|l| l.tag.as_ref()).is_some_and(|t| &t.axis == axis && matches!(t.level, TagLevel::Point | TagLevel::Vector))
                })
            })
            .collect();
        // A missing point loop is one iteration.
        let extents: Vec<u64> = loops.iter().map(|l| l.map_or(1, |l| for_loop(f, l).expect("a loop").extent)).collect();
        let Some(parts) = tilec::target::mapping::fused_parts(&extents, sizes[i]) else {
            // The outermost op axis' loop does not hold what the inner
            // ones leave of the size.
            let left = tilec::target::mapping::fused_split(&extents, sizes[i])[0];
            let axis = &axes[0];
            let Some(lp) = loops[0] else {
                return Err(Diagnostic::error(format!("cannot tensorize: `{axis}` (on `{name}`) has no point loop around the statement"))
                    .at(span, "the statement")
                    .with_note(format!("its innermost tile must be a multiple of {left} (the intrinsic's `{name}`)")));
            };
            let what = if axes.len() > 1 { format!("{left} (what the intrinsic's `{name}` leaves to it)") } else { format!("{left}") };
            return Err(Diagnostic::error(format!("cannot tensorize: the innermost loop of `{axis}` (on `{name}`) runs {} times, not a multiple of {what}", extents[0]))
                .at(f.op_spans[lp], "this loop")
                .with_help(format!("make the innermost tile of `{axis}` (per virtual thread) a multiple of {left}")));
        };
        // A fused axis' parts of one iteration do not move it.
        mapped[i] = loops.iter().zip(parts).filter_map(|(l, part)| l.filter(|_| part > 1 || axes.len() == 1).map(|l| (l, part))).collect();
    }
    // The loops from the outermost mapped one down nest perfectly.
    if let Some(top) = mapped.iter().flatten().map(|&(o, _)| o).max_by_key(|&o| ancestors.iter().position(|&a| a == o)) {
        let depth = ancestors.iter().position(|&a| a == top).expect("an ancestor");
        for &lp in &ancestors[..depth] {
            let Some(l) = for_loop(f, lp) else {
                if matches!(f.ops[lp].kind, OpKind::If(_)) {
                    // (A guard of spatial axes alone around a register
                    // accumulator went: `padding::unguard_statement`.)
                    return Err(Diagnostic::error("cannot tensorize: a guard sits between the mapped loops")
                        .at(f.op_spans[lp], "this guard")
                        .with_note("an intrinsic computes whole tiles: padding drops a partial tile's guard where it bounds spatial axes only and the accumulator is the tile's register buffer")
                        .with_help("make the reduction axes' tiles divide their extents (and stage the accumulator in registers)"));
                }
                return Err(Diagnostic::error(format!("cannot tensorize: a `{}` sits between the mapped loops", f.ops[lp].kind.mnemonic()))
                    .at(f.op_spans[lp], "here")
                    .with_help("make the mapped axes' tiles divide their extents, so that no guard is needed inside the tile"));
            };
            if l.mapping.is_concurrent() {
                return Err(Diagnostic::error(format!("cannot tensorize: the {} loop `{}` sits inside the intrinsic's tile", l.mapping, l.tag.as_ref().map_or("?".into(), |t| t.to_string())))
                    .at(f.op_spans[lp], "here"));
            }
        }
        for &lp in &ancestors[1..=depth] {
            if f.regions[f.ops[lp].regions[0]].ops.len() != 1 {
                return Err(Diagnostic::error("cannot tensorize: the mapped loops do not nest perfectly around the statement")
                    .at(f.op_spans[lp], "this loop holds more than the next one")
                    .with_help("tensorize rewrites loop nests as `tile` makes them: the mapped loops around the statement alone"));
            }
        }
    }
    // The element types must be the intrinsic's (the statement's casts are
    // the intrinsic's widening).
    let elem = |o: Op| f.value_type(f.ops[o].results[0]).as_scalar();
    let (ea, eb, ec) = (elem(s.a), elem(s.b), elem(s.acc));
    let types_fit = |lanes: Option<ElemType>, other: Option<ElemType>| {
        let (l, o) = (lanes.map(ElemType::name), other.map(ElemType::name));
        (l, o) == (Some(x.a.as_str()), Some(x.b.as_str())) || (l, o) == (Some(x.b.as_str()), Some(x.a.as_str()))
    };
    if !types_fit(ea, eb) || ec.map(ElemType::name) != Some(x.acc.as_str()) {
        let name = |e: Option<ElemType>| e.map_or("?", ElemType::name);
        return Err(Diagnostic::error(format!("cannot tensorize with `{}`: it computes {} × {} into {}, the statement {} × {} into {}", x.name, x.a, x.b, x.acc, name(ea), name(eb), name(ec)))
            .at(span, "the statement"));
    }
    // Origins and steps of the three operands.
    // Per mapped loop: its intrinsic axis, its part's position there, its
    // induction variable, whether the part is the whole loop, the part.
    let ivs: Vec<(usize, usize, Value, bool, u64)> = (0..3)
        .flat_map(|i| mapped[i].iter().enumerate().map(move |(j, &(lp, part))| (i, j, lp, part)))
        .map(|(i, j, lp, part)| (i, j, induction_var(f, lp), for_loop(f, lp).expect("a loop").extent == part, part))
        .collect();
    let mut origins: Vec<Vec<AffineExpr<Value>>> = Vec::new();
    let mut steps: Vec<[Vec<Vec<i64>>; 3]> = Vec::new();
    for op in [s.acc, s.a, s.b] {
        let exprs = f.access_indices(op);
        let mut o = Vec::new();
        let mut st: [Vec<Vec<i64>>; 3] = mapped.clone().map(|parts| vec![Vec::new(); parts.len().max(1)]);
        for e in &exprs {
            for (i, axis) in st.iter_mut().enumerate() {
                if mapped[i].is_empty() {
                    axis[0].push(0);
                }
            }
            for &(i, part, iv, _, _) in &ivs {
                let c = e.coeff(iv);
                if c != 0 && e.divisor() != 1 {
                    return Err(Diagnostic::error("cannot tensorize: a read divides the index of a mapped axis")
                        .at(f.op_spans[op], "this access")
                        .with_note(format!("the intrinsic's `{}` must step the index by a constant", ["m", "n", "k"][i])));
                }
                st[i][part].push(c);
            }
            // The tile's first point: a loop of its part's size is gone
            // (0); a longer one steps by the part.
            let origin = e
                .substitute(|v| match ivs.iter().find(|&&(_, _, iv, _, _)| iv == v) {
                    Some(&(_, _, _, true, _)) => AffineExpr::constant(0),
                    Some(&(_, _, _, false, part)) => AffineExpr::from_parts([(v, part as i64)], 0, 1).expect("small"),
                    None => AffineExpr::var(v),
                })
                .map_err(|_| Diagnostic::error("cannot tensorize: an index overflows").at(f.op_spans[op], "this access"))?;
            o.push(origin);
        }
        origins.push(o);
        steps.push(st);
    }
    let load = |op: Op| match &f.ops[op].kind {
        OpKind::Load(a) => (a.pad, a.read.clone()),
        _ => (None, None),
    };
    let (load_a, load_b) = (load(s.a), load(s.b));
    let buffers = vec![f.ops[s.store].operands[1], f.ops[s.a].operands[0], f.ops[s.b].operands[0]];
    let (operands, packed) = pack_indices(buffers, &[&origins[0], &origins[1], &origins[2]]);
    let mut packed = packed.into_iter();
    let mut steps = steps.into_iter();
    let mut tile = |(pad, read)| TileOperand { indices: packed.next().expect("3"), steps: steps.next().expect("3"), pad, read };
    let (acc, a, b) = (tile((None, None)), tile(load_a), tile(load_b));
    let parts = [0, 1, 2].map(|i| if mapped[i].is_empty() { vec![sizes[i]] } else { mapped[i].iter().map(|&(_, p)| p).collect() });
    let call = IntrinsicCall { name: x.name.clone(), kind, shape: sizes, parts, acc, a, b, lane: None };
    // Replace the statement, then the loops: those of the intrinsic's size
    // go (their one op moves up), longer ones step by it.
    for &op in &s.ops {
        f.remove_op(op);
    }
    f.build_op(Cursor::end(region), OpKind::Intrinsic(Box::new(call)), operands, vec![], span);
    for &(lp, part) in mapped.iter().flatten() {
        let extent = for_loop(f, lp).expect("a loop").extent;
        if extent == part {
            let body = f.ops[lp].regions[0];
            let inner = std::mem::take(&mut f.regions[body].ops);
            let parent = f.ops[lp].parent;
            let at = f.regions[parent].ops.iter().position(|&o| o == lp).expect("in its region");
            f.remove_op(lp);
            for (k, o) in inner.into_iter().enumerate() {
                f.ops[o].parent = parent;
                f.regions[parent].ops.insert(at + k, o);
            }
        } else if let OpKind::For(l) = &mut f.ops[lp].kind {
            l.extent = extent / part;
        }
    }
    Ok(())
}

mod banks;
mod pack;
mod padding;
mod warp;

#[cfg(test)]
mod tests;
