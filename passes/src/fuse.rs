//! `fuse`: folds elementwise consumers into their producer's epilogue.
//!
//! A network imported op by op is a chain of compute ops: a convolution,
//! then its bias, its activation, a residual add. Run apart, each
//! elementwise op reads and writes a whole tensor for a few flops; folded
//! into the producer's epilogue it costs nothing but its reads, and the
//! network has one task per convolution to tune instead of four ops.
//!
//! A consumer `C` folds into the producer `P` of a tensor `T` when:
//! - `C` is elementwise: no reduction, no epilogue, no schedule, no `index`
//!   ops, and each dimension of its output index is one of its axes;
//! - `C` reads `T` only at its own output index, and its result has
//!   `T`'s shape (so each element of `T` becomes one element of `C`);
//! - nothing but `C` uses `T` (not the function's `return` either);
//! - `P` is a compute op without a schedule, and the fused op has at most
//!   `max-reads` reads.
//!
//! `C`'s other reads become epilogue reads of `P`, their indices rewritten
//! from `C`'s axes to `P`'s through the output indices (`C`'s axis at
//! dimension `d` is `P`'s output index at `d`). The fused op takes `C`'s
//! place in the body (its new reads may be defined after `P`), its result
//! and its name. Repeated until nothing folds, so conv → add → relu → add →
//! relu becomes one op.

use tilec::diag::Diagnostics;
use tilec::ir::*;
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};

pub static DECL: PassDecl = PassDecl {
    name: "fuse",
    summary: "Fold elementwise consumers (bias, activations, residual adds) into their producer's epilogue",
    description: "
Folds a compute op that is elementwise over another's result into that
producer's epilogue: the convolution + bias + ReLU of an imported network,
or a residual add, whose second tensor becomes an epilogue read. A consumer
folds when it has no reduction, epilogue, schedule or `index` op, reads the
producer's tensor only at its own output index (each dimension of which is
one axis) with the tensor's shape, and is the tensor's only user; the
producer must be unscheduled. The consumer's other reads are re-indexed
through the producer's output index. The fused op takes the consumer's
place, result and name; folding repeats until nothing changes. Results are
identical: the epilogue computes exactly what the consumer did, per element.",
    options: &[OptionDecl {
        name: "max-reads",
        kind: OptionKind::UInt,
        default: "12",
        help: "most reads (body and epilogue) a fused op may have; a compiled kernel takes at most 16 buffers",
    }],
    statistics: &[("fused", "consumers folded into a producer's epilogue")],
    create: |o: &PassOptions| Box::new(Fuse { max_reads: o.uint("max-reads") as usize }),
};

pub struct Fuse {
    max_reads: usize,
}

impl Pass for Fuse {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        for f in &mut module.funcs {
            while let Some((producer, consumer)) = next_fusion(f, self.max_reads) {
                fuse(f, producer, consumer);
                cx.bump("fused", 1);
            }
        }
        Ok(())
    }
}

/// The first (producer, consumer) pair in body order that may fuse.
fn next_fusion(f: &Function, max_reads: usize) -> Option<(Op, Op)> {
    let body = &f.regions[f.body].ops;
    let uses = f.use_counts();
    for &c_op in body {
        let Some(c) = f.ops[c_op].kind.as_compute() else { continue };
        if !is_elementwise(f, c_op, c) {
            continue;
        }
        let out_ty = f.value_type(f.result(c_op)).as_tensor()?;
        for &t in &f.ops[c_op].operands {
            let Some(p_op) = f.def_op(t) else { continue };
            let Some(p) = f.ops[p_op].kind.as_compute() else { continue };
            if p.schedule.is_some() || f.ops[p_op].parent != f.body || f.value_type(t).as_tensor().map(|tt| &tt.shape) != Some(&out_ty.shape) {
                continue;
            }
            // Every read of `t` is at the output index, and only `C` uses it.
            let reads_of_t: Vec<usize> = f.ops[c_op].operands.iter().enumerate().filter(|&(_, &v)| v == t).map(|(j, _)| j).collect();
            if reads_of_t.iter().any(|&j| c.reads[j].indices != c.output) || uses[t] as usize != reads_of_t.len() {
                continue;
            }
            let reads = p.reads.len() + p.epilogue_reads.len() + c.reads.len() - reads_of_t.len();
            if reads > max_reads {
                continue;
            }
            return Some((p_op, c_op));
        }
    }
    None
}

/// No reduction, epilogue, schedule or `index` op; each output dimension
/// one axis.
fn is_elementwise(f: &Function, op: Op, c: &Compute) -> bool {
    c.combiner.is_none()
        && !c.has_epilogue
        && c.schedule.is_none()
        && c.reduction_axes().next().is_none()
        && c.output.iter().all(|e| e.terms().len() == 1 && e.terms()[0].1 == 1 && e.constant_term() == 0 && e.divisor() == 1)
        && f.regions[f.ops[op].regions[0]].ops.iter().all(|&o| !matches!(f.ops[o].kind, OpKind::AxisIndex(_)))
}

fn fuse(f: &mut Function, p_op: Op, c_op: Op) {
    let t = f.result(p_op);
    let c = f.ops[c_op].kind.as_compute().expect("a compute consumer").clone();
    let p_output = f.ops[p_op].kind.as_compute().expect("a compute producer").output.clone();
    // `C`'s axis at output dimension d is `P`'s output index at d.
    let c_axis_in_p = |a: AxisId| -> AffineExpr<AxisId> {
        let d = c.output.iter().position(|e| e.is_var(a)).expect("every spatial axis of an elementwise op indexes the output");
        p_output[d].clone()
    };

    // The producer's epilogue, and the value its body or epilogue yields.
    let (epilogue, produced) = if f.ops[p_op].kind.as_compute().is_some_and(|p| p.has_epilogue) {
        let e = f.ops[p_op].regions[1];
        let y = *f.regions[e].ops.last().expect("an epilogue ends in yield");
        let v = f.ops[y].operands[0];
        f.remove_op(y);
        (e, v)
    } else {
        let body = f.ops[p_op].regions[0];
        let y = *f.regions[body].ops.last().expect("a body ends in yield");
        let acc_ty = f.value_type(f.ops[y].operands[0]).clone();
        let e = f.new_region(Some(p_op));
        let acc = f.add_region_arg(e, acc_ty, Some("acc".into()));
        f.ops[p_op].regions.push(e);
        (e, acc)
    };

    // `C`'s reads: of `T`, the produced value; the others, epilogue reads.
    let c_body = f.ops[c_op].regions[0];
    let c_args = f.regions[c_body].args.clone();
    let c_operands = f.ops[c_op].operands.clone();
    let mut new_reads = Vec::new();
    let mut new_operands = Vec::new();
    for ((read, &arg), &operand) in c.reads.iter().zip(&c_args).zip(&c_operands) {
        if operand == t {
            f.replace_all_uses(arg, produced);
            continue;
        }
        let indices = read.indices.iter().map(|e| e.substitute(c_axis_in_p).expect("re-indexing by an output index cannot overflow: it is bounded by the tensor")).collect();
        new_reads.push(Read { indices, pad: read.pad, index_spans: read.index_spans.clone() });
        let ty = f.value_type(arg).clone();
        let name = f.values[arg].name.clone();
        let e_arg = f.add_region_arg(epilogue, ty, name);
        f.replace_all_uses(arg, e_arg);
        new_operands.push(operand);
    }
    for op in std::mem::take(&mut f.regions[c_body].ops) {
        f.ops[op].parent = epilogue;
        f.regions[epilogue].ops.push(op);
    }

    let p = f.ops[p_op].kind.as_compute_mut().expect("a compute producer");
    p.has_epilogue = true;
    p.epilogue_reads.extend(new_reads);
    f.ops[p_op].operands.extend(new_operands);

    // The fused op is the consumer now: its type, name and place.
    let c_result = f.result(c_op);
    f.values[t].ty = f.values[c_result].ty.clone();
    f.values[t].name = f.values[c_result].name.clone();
    f.value_spans[t] = f.value_spans[c_result];
    f.replace_all_uses(c_result, t);
    let body = f.body;
    let at = f.regions[body].ops.iter().position(|&o| o == c_op).expect("the consumer is in the body");
    f.regions[body].ops[at] = p_op;
    let first = f.regions[body].ops.iter().position(|&o| o == p_op).expect("the producer is in the body");
    if first != at {
        f.regions[body].ops.remove(first);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tilec::interp::{Tensor, run_function};

    fn fused(src: &str) -> (Module, Module, u64) {
        let (m, _) = tilec::syntax::parse_str("t.tile", src).ok().expect("parses");
        assert!(!tilec::verify::verify_module(&m).has_errors());
        let mut out = m.clone();
        let mut cx = PassContext::default();
        Fuse { max_reads: 12 }.run(&mut out, &mut cx).unwrap();
        let diags = tilec::verify::verify_module(&out);
        assert!(!diags.has_errors(), "{diags:?}\n{}", tilec::syntax::print_module(&out));
        (m, out, cx.take_statistics().get("fused").copied().unwrap_or(0))
    }

    fn same_results(a: &Module, b: &Module) {
        let f = &a.funcs[0];
        let inputs: Vec<Tensor> = f.params.iter().enumerate().map(|(i, &p)| Tensor::random(f.value_type(p).as_tensor().unwrap(), i as u64 + 1)).collect();
        assert_eq!(run_function(f, &inputs).unwrap(), run_function(&b.funcs[0], &inputs).unwrap());
    }

    const CONV_BIAS_RELU_RESIDUAL: &str = "func @block(%x: tensor<1x4x6x6xf32>, %k: tensor<4x4x3x3xf32>, %bias: tensor<4xf32>, %skip: tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
  %c = compute \"conv\" (n: 1, f: 4, h: 6, w: 6) reduce sum (c: 4, r: 3, s: 3)
      reads(%xv = %x[n, c, h + r - 1, w + s - 1] pad(0.0), %kv = %k[f, c, r, s]) -> tensor<1x4x6x6xf32>[n, f, h, w] {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  %b = compute \"bias\" (a: 1, q: 4, y: 6, z: 6) reads(%v = %c[a, q, y, z], %bv = %bias[q]) -> tensor<1x4x6x6xf32>[a, q, y, z] {
    %0 = add %v, %bv : f32
    yield %0 : f32
  }
  %r = compute \"relu\" (a: 1, q: 4, y: 6, z: 6) reads(%v = %b[a, q, y, z]) -> tensor<1x4x6x6xf32>[a, q, y, z] {
    %0 = relu %v : f32
    yield %0 : f32
  }
  %s = compute \"residual\" (a: 1, q: 4, y: 6, z: 6) reads(%v = %r[a, q, y, z], %u = %skip[a, q, y, z]) -> tensor<1x4x6x6xf32>[a, q, y, z] {
    %0 = add %v, %u : f32
    yield %0 : f32
  }
  return %s
}
";

    #[test]
    fn a_chain_of_elementwise_ops_folds_into_the_convolution() {
        let (before, after, n) = fused(CONV_BIAS_RELU_RESIDUAL);
        assert_eq!(n, 3);
        let text = tilec::syntax::print_module(&after);
        assert_eq!(text.matches("compute").count(), 1, "{text}");
        assert!(text.contains("epilogue(%acc) reads(%bv = %bias[f], %u = %skip[n, f, h, w])"), "{text}");
        assert!(text.contains("%s = compute \"conv\""), "{text}");
        same_results(&before, &after);
    }

    #[test]
    fn a_tensor_with_two_users_or_a_transposed_read_does_not_fold() {
        // `%c` is read by two ops, and `%t` reads it transposed.
        let src = "func @f(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %c = compute (i: 4, j: 4) reads(%a = %x[i, j]) -> tensor<4x4xf32>[i, j] {
    %0 = exp %a : f32
    yield %0 : f32
  }
  %t = compute (i: 4, j: 4) reads(%a = %c[j, i]) -> tensor<4x4xf32>[i, j] {
    %0 = relu %a : f32
    yield %0 : f32
  }
  %u = compute (i: 4, j: 4) reads(%a = %c[i, j]) -> tensor<4x4xf32>[i, j] {
    %0 = neg %a : f32
    yield %0 : f32
  }
  return %t, %u
}
";
        let (_, _, n) = fused(src);
        assert_eq!(n, 0);
    }

    #[test]
    fn a_consumer_reading_the_tensor_twice_and_a_grouped_layout_fold() {
        // x * sigmoid(x) after a grouped op whose output index is mixed
        // radix: the consumer's `f` becomes `g * 2 + fg`.
        let src = "func @f(%x: tensor<4x3xf32>, %s: tensor<4xf32>) -> tensor<4x3xf32> {
  %c = compute (g: 2, fg: 2, j: 3) reads(%a = %x[g * 2 + fg, j]) -> tensor<4x3xf32>[g * 2 + fg, j] {
    %0 = exp %a : f32
    yield %0 : f32
  }
  %y = compute (f: 4, j: 3) reads(%a = %c[f, j], %b = %c[f, j], %w = %s[f]) -> tensor<4x3xf32>[f, j] {
    %0 = sigmoid %a : f32
    %1 = mul %b, %0 : f32
    %2 = mul %1, %w : f32
    yield %2 : f32
  }
  return %y
}
";
        let (before, after, n) = fused(src);
        assert_eq!(n, 1);
        let text = tilec::syntax::print_module(&after);
        assert!(text.contains("%w = %s[g * 2 + fg]"), "{text}");
        same_results(&before, &after);
    }

    #[test]
    fn the_read_limit_is_kept() {
        let (m, _) = tilec::syntax::parse_str("t.tile", CONV_BIAS_RELU_RESIDUAL).ok().expect("parses");
        let mut out = m.clone();
        let mut cx = PassContext::default();
        Fuse { max_reads: 2 }.run(&mut out, &mut cx).unwrap();
        // conv (2 reads) + bias would be 3 reads, bias + relu is 2, and
        // then + residual 3: only the ReLU folds (into the bias).
        assert_eq!(cx.take_statistics().get("fused"), Some(&1));
        let text = tilec::syntax::print_module(&out);
        assert_eq!(text.matches("compute").count(), 3, "{text}");
    }
}
