//! `canonicalize`: folds constants, applies exact algebraic identities,
//! removes common subexpressions, unused reads and dead ops.
//!
//! Index arithmetic needs no folding here: the parser already brings every
//! index expression to affine normal form. Everything this pass does is
//! exact under the semantics of `tilec::ir::scalar` (no fast-math): e.g.
//! `x + 0.0` is *not* folded (it is `0.0` for `x = -0.0`), `x - 0.0` is.

use std::collections::HashMap;
use tilec::diag::Diagnostics;
use tilec::ir::scalar;
use tilec::ir::*;
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};

pub static DECL: PassDecl = PassDecl {
    name: "canonicalize",
    summary: "Fold constants and exact identities, CSE, drop unused reads and dead ops",
    description: "
Simplifies compute regions and function bodies until nothing changes (or
`max-iterations` rounds have run):

- **constant folding**: scalar ops whose operands are all constants become a
  constant, evaluated with the same semantics as the interpreter;
- **exact identities**: `x * 1`, `x / 1.0`, `x - 0`, `x + -0.0`, `max(x, x)`,
  `min(x, x)`, `neg(neg(x))`, `relu(relu(x))`, `cast x : T -> T` become `x`
  (only rewrites that hold for every input, NaN and signed zero included);
- **reshapes**: a reshape of a reshape views the first one's operand, and a
  reshape to its operand's own type is that operand (`collapse-axes` leaves
  such chains between consecutive 1x1 convolutions);
- **CSE**: identical scalar ops and identical reads (same tensor, indices and
  pad) of one compute op are merged;
- **dead code**: unused scalar ops, reads whose value is unused, and compute
  and reshape ops whose result is not used are removed.

Index expressions are already folded to affine normal form by the parser.",
    options: &[OptionDecl { name: "max-iterations", kind: OptionKind::UInt, default: "10", help: "upper bound on simplification rounds" }],
    statistics: &[
        ("folded", "scalar ops replaced by constants"),
        ("simplified", "ops replaced by an operand through an identity"),
        ("cse", "ops and reads merged with an identical one"),
        ("removed-reads", "reads whose value was unused"),
        ("erased", "dead ops removed"),
    ],
    create: |o: &PassOptions| Box::new(Canonicalize { max_iterations: o.uint("max-iterations") }),
};

pub struct Canonicalize {
    max_iterations: u64,
}

impl Pass for Canonicalize {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        for f in &mut module.funcs {
            for _ in 0..self.max_iterations {
                let mut changed = false;
                let computes: Vec<Op> = f.regions[f.body].ops.iter().copied().filter(|&o| f.ops[o].kind.as_compute().is_some()).collect();
                for op in computes {
                    for r in f.ops[op].regions.clone() {
                        changed |= simplify_region(f, r, cx);
                    }
                    changed |= merge_reads(f, op, cx);
                    changed |= remove_unused_reads(f, op, cx);
                }
                changed |= fold_reshapes(f, cx);
                changed |= erase_dead_body_ops(f, cx);
                if !changed {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// The constant an op defines, if it is a `const`.
fn constant_of(f: &Function, v: Value) -> Option<Literal> {
    match f.def_op(v).map(|op| &f.ops[op].kind) {
        Some(OpKind::Const(l)) => Some(*l),
        _ => None,
    }
}

fn is_const(f: &Function, v: Value, pred: impl Fn(f64) -> bool) -> bool {
    constant_of(f, v).is_some_and(|l| pred(l.as_f64()))
}

fn defining_kind(f: &Function, v: Value) -> Option<&OpKind> {
    f.def_op(v).map(|op| &f.ops[op].kind)
}

/// Folds, simplifies, CSEs and erases dead ops in one compute region.
fn simplify_region(f: &mut Function, region: Region, cx: &mut PassContext) -> bool {
    let mut changed = false;
    let mut seen: HashMap<String, Value> = HashMap::new();
    for op in f.regions[region].ops.clone() {
        let data = &f.ops[op];
        let Some(&result) = data.results.first() else { continue };
        let ty = f.value_type(result).as_scalar();
        let operands = data.operands.clone();
        // Constant folding.
        let consts: Option<Vec<Literal>> = operands.iter().map(|&v| constant_of(f, v)).collect();
        let folded = match (&data.kind, consts.as_deref(), ty) {
            (OpKind::Unary(u), Some([a]), Some(t)) => Some(scalar::unary(*u, t, *a)),
            (OpKind::Binary(b), Some([a, c]), Some(t)) => Some(scalar::binary(*b, t, *a, *c)),
            (OpKind::Cast, Some([a]), Some(t)) => f.value_type(operands[0]).as_scalar().map(|from| scalar::cast(from, t, *a)),
            _ => None,
        };
        if let Some(lit) = folded {
            f.ops[op].kind = OpKind::Const(lit);
            f.ops[op].operands.clear();
            cx.bump("folded", 1);
            changed = true;
        } else if let Some(replacement) = identity(f, op) {
            f.replace_all_uses(result, replacement);
            cx.bump("simplified", 1);
            changed = true;
            continue;
        }
        // CSE: ops are pure, so equal kind, operands and type mean equal value.
        let key = format!("{:?}|{:?}|{:?}", f.ops[op].kind, f.ops[op].operands, f.value_type(result));
        match seen.get(&key) {
            Some(&earlier) => {
                f.replace_all_uses(result, earlier);
                cx.bump("cse", 1);
                changed = true;
            }
            None => {
                seen.insert(key, result);
            }
        }
    }
    // Dead code: walk backwards so chains die in one sweep.
    let uses = f.use_counts();
    let mut uses = uses;
    for op in f.regions[region].ops.clone().into_iter().rev() {
        let data = &f.ops[op];
        if data.kind.is_pure() && data.results.iter().all(|&r| uses[r] == 0) {
            for &v in &f.ops[op].operands.clone() {
                uses[v] -= 1;
            }
            f.remove_op(op);
            cx.bump("erased", 1);
            changed = true;
        }
    }
    changed
}

/// `Some(v)` if `op` always equals its operand `v`.
fn identity(f: &Function, op: Op) -> Option<Value> {
    let data = &f.ops[op];
    let ops = &data.operands;
    match (&data.kind, ops.as_slice()) {
        (OpKind::Binary(BinaryOp::Mul), &[a, b]) => {
            if is_const(f, b, |x| x == 1.0) {
                Some(a)
            } else if is_const(f, a, |x| x == 1.0) {
                Some(b)
            } else {
                None
            }
        }
        (OpKind::Binary(BinaryOp::Div), &[a, b]) if is_const(f, b, |x| x == 1.0) => Some(a),
        // x - 0.0 == x for every x, but x - (-0.0) is +0.0 for x = -0.0.
        (OpKind::Binary(BinaryOp::Sub), &[a, b]) if is_const(f, b, |x| x == 0.0 && x.is_sign_positive()) => Some(a),
        (OpKind::Binary(BinaryOp::Add), &[a, b]) => {
            let neg_zero_or_int_zero = |v: Value| {
                constant_of(f, v).is_some_and(|l| match l {
                    Literal::Int(0) => true,
                    Literal::Float(x) => x == 0.0 && x.is_sign_negative(),
                    _ => false,
                })
            };
            if neg_zero_or_int_zero(b) {
                Some(a)
            } else if neg_zero_or_int_zero(a) {
                Some(b)
            } else {
                None
            }
        }
        (OpKind::Binary(BinaryOp::Max | BinaryOp::Min), &[a, b]) if a == b => Some(a),
        (OpKind::Unary(UnaryOp::Neg), &[a]) => match (f.def_op(a), defining_kind(f, a)) {
            (Some(inner), Some(OpKind::Unary(UnaryOp::Neg))) => Some(f.ops[inner].operands[0]),
            _ => None,
        },
        (OpKind::Unary(UnaryOp::Relu), &[a]) if matches!(defining_kind(f, a), Some(OpKind::Unary(UnaryOp::Relu))) => Some(a),
        (OpKind::Cast, &[a]) if f.value_type(a) == f.value_type(data.results[0]) => Some(a),
        _ => None,
    }
}

/// Merges reads of one compute op that read the same element.
fn merge_reads(f: &mut Function, op: Op, cx: &mut PassContext) -> bool {
    let mut changed = false;
    for (region_idx, epilogue) in [(0usize, false), (1, true)] {
        let Some(&region) = f.ops[op].regions.get(region_idx) else { continue };
        let arg_offset = usize::from(epilogue); // the epilogue's first argument is the accumulator
        let c = f.ops[op].kind.as_compute().expect("compute op");
        let (reads, operand_offset) = if epilogue { (&c.epilogue_reads, c.reads.len()) } else { (&c.reads, 0) };
        let mut replace = Vec::new();
        for j in 0..reads.len() {
            for i in 0..j {
                let same_tensor = f.ops[op].operands[operand_offset + i] == f.ops[op].operands[operand_offset + j];
                let same_pad = match (reads[i].pad, reads[j].pad) {
                    (None, None) => true,
                    (Some(x), Some(y)) => x.same_as(&y),
                    _ => false,
                };
                if same_tensor && same_pad && reads[i].indices == reads[j].indices {
                    let args = &f.regions[region].args;
                    replace.push((args[arg_offset + j], args[arg_offset + i]));
                    break;
                }
            }
        }
        for (from, to) in replace {
            f.replace_all_uses(from, to);
            cx.bump("cse", 1);
            changed = true;
        }
    }
    changed
}

/// Drops reads whose bound value is unused (with their operand and region
/// argument), keeping the op's parallel lists in step.
fn remove_unused_reads(f: &mut Function, op: Op, cx: &mut PassContext) -> bool {
    let uses = f.use_counts();
    let mut changed = false;
    for epilogue in [false, true] {
        let Some(&region) = f.ops[op].regions.get(usize::from(epilogue)) else { continue };
        let arg_offset = usize::from(epilogue);
        let n = {
            let c = f.ops[op].kind.as_compute().expect("compute op");
            if epilogue { c.epilogue_reads.len() } else { c.reads.len() }
        };
        for j in (0..n).rev() {
            let arg = f.regions[region].args[arg_offset + j];
            if uses[arg] != 0 {
                continue;
            }
            let body_reads = f.ops[op].kind.as_compute().expect("compute op").reads.len();
            let operand_idx = if epilogue { body_reads + j } else { j };
            f.ops[op].operands.remove(operand_idx);
            f.regions[region].args.remove(arg_offset + j);
            let c = f.ops[op].kind.as_compute_mut().expect("compute op");
            if epilogue {
                c.epilogue_reads.remove(j);
            } else {
                c.reads.remove(j);
            }
            cx.bump("removed-reads", 1);
            changed = true;
        }
        // Region arguments record their position; renumber after removal.
        for (i, &a) in f.regions[region].args.clone().iter().enumerate() {
            f.values[a].def = ValueDef::RegionArg(region, i);
        }
    }
    changed
}

/// Reshape chains: `reshape (reshape x)` views `x` directly; a reshape to
/// its operand's type is the operand. The views left unused go with the
/// dead code.
fn fold_reshapes(f: &mut Function, cx: &mut PassContext) -> bool {
    let mut changed = false;
    for op in f.regions[f.body].ops.clone() {
        if f.ops[op].kind != OpKind::Reshape {
            continue;
        }
        let operand = f.ops[op].operands[0];
        if let Some(inner) = f.def_op(operand).filter(|&d| f.ops[d].kind == OpKind::Reshape) {
            f.ops[op].operands[0] = f.ops[inner].operands[0];
            cx.bump("simplified", 1);
            changed = true;
        }
        let (operand, result) = (f.ops[op].operands[0], f.result(op));
        if f.value_type(operand) == f.value_type(result) && f.use_counts()[result] > 0 {
            f.replace_all_uses(result, operand);
            cx.bump("simplified", 1);
            changed = true;
        }
    }
    changed
}

/// Removes compute and reshape ops whose result nothing uses.
fn erase_dead_body_ops(f: &mut Function, cx: &mut PassContext) -> bool {
    let mut changed = false;
    loop {
        let uses = f.use_counts();
        let dead: Vec<Op> = f.regions[f.body]
            .ops
            .iter()
            .copied()
            .filter(|&o| (f.ops[o].kind.as_compute().is_some() || f.ops[o].kind == OpKind::Reshape) && uses[f.result(o)] == 0)
            .collect();
        if dead.is_empty() {
            return changed;
        }
        for o in dead {
            f.remove_op(o);
            cx.bump("erased", 1);
        }
        changed = true;
    }
}
