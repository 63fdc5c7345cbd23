//! Weights: constant tensors a function reads from a file beside it
//! (`weight` ops), and turning them into parameters to run the function.
//!
//! The IR keeps weights as ops so that a network's text stays small and
//! says which tensors are the model's inputs (the parameters) and which
//! are trained constants (the `prepack` pass lays out a weight's staged
//! copies once, which it could not do for an input). Nothing downstream
//! of the passes needs a new notion for them: the interpreter and the
//! backends run functions of parameters, so tools call [`hoist_weights`]
//! after the pipeline (`lower-to-mlir` does) and pass the file's tensors
//! (`interp::weights`) after the real inputs.

use super::{Function, OpKind, TensorType, ValueDef};

/// The function's weights in order of appearance: name and type.
pub fn weights_of(f: &Function) -> Vec<(String, TensorType)> {
    f.regions[f.body]
        .ops
        .iter()
        .filter_map(|&o| match &f.ops[o].kind {
            OpKind::Weight(name) => f.value_type(f.result(o)).as_tensor().map(|t| (name.to_string(), t.clone())),
            _ => None,
        })
        .collect()
}

/// Turns every `weight` op of the function body into a trailing
/// parameter, in order of appearance, and returns their names and types
/// in that order. Uses are untouched: the op's result value becomes the
/// parameter.
pub fn hoist_weights(f: &mut Function) -> Vec<(String, TensorType)> {
    let weights = weights_of(f);
    let body = f.body;
    let ops = std::mem::take(&mut f.regions[body].ops);
    let mut kept = Vec::with_capacity(ops.len());
    for op in ops {
        if matches!(f.ops[op].kind, OpKind::Weight(_)) {
            let v = f.result(op);
            f.values[v].def = ValueDef::Param(f.params.len());
            f.params.push(v);
        } else {
            kept.push(op);
        }
    }
    f.regions[body].ops = kept;
    weights
}

/// The inverse of [`hoist_weights`] for a function written with its
/// weights as parameters: every parameter after the first `inputs` becomes
/// a `weight` op at the top of the body, named after the parameter (its
/// source name, else `w<position>`). Returns those names in order.
/// (`tilec-bench --weights`: a single op measured as it runs in a network,
/// beside onnxruntime, which gets its weights as initializers.)
pub fn params_into_weights(f: &mut Function, inputs: usize) -> Vec<String> {
    let params = f.params.clone();
    let mut names = Vec::new();
    for (i, &p) in params.iter().enumerate().skip(inputs) {
        let ty = f.value_type(p).clone();
        let name = f.values[p].name.clone().unwrap_or_else(|| format!("w{i}"));
        let op = f.build_op(super::builder::Cursor::at(f.body, i - inputs), OpKind::Weight(name.clone().into()), vec![], vec![ty], crate::diag::Span::DUMMY);
        let w = f.name_result(op, &name);
        f.replace_all_uses(p, w);
        names.push(name);
    }
    f.params.truncate(inputs.min(params.len()));
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{Tensor, run_function};
    use crate::ir::ElemType;

    const SCALE: &str = "func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = weight \"s\" : tensor<4xf32>
  %b = weight \"b\" : tensor<1xf32>
  %y = compute (i: 4) reads(%a = %x[i], %w = %s[i], %c = %b[0]) -> tensor<4xf32>[i] {
    %0 = mul %a, %w : f32
    %1 = add %0, %c : f32
    yield %1 : f32
  }
  return %y
}
";

    #[test]
    fn hoisted_weights_are_trailing_parameters_in_order() {
        let (mut m, _) = crate::syntax::parse_str("scale.tile", SCALE).ok().expect("parses");
        assert!(!crate::verify::verify_module(&m).has_errors());
        let f = &mut m.funcs[0];
        assert!(run_function(f, &[Tensor::zeros(&TensorType::new(vec![4], ElemType::F32))]).unwrap_err().0.contains("weight \"s\" has no value"));
        let w = hoist_weights(f);
        let names: Vec<&str> = w.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["s", "b"]);
        assert_eq!(f.params.len(), 3);
        assert!(!crate::verify::verify_module(&m).has_errors(), "still verifies");
        let f = &m.funcs[0];
        let t = |shape: u64, v: &[f64]| Tensor::from_f64(&TensorType::new(vec![shape], ElemType::F32), v).unwrap();
        let out = run_function(f, &[t(4, &[1.0, 2.0, 3.0, 4.0]), t(4, &[2.0, 2.0, 0.5, 1.0]), t(1, &[10.0])]).unwrap();
        assert_eq!(out[0].to_f64_vec(), [12.0, 14.0, 11.5, 14.0]);
    }

    #[test]
    fn parameters_become_weights_and_hoist_back_in_order() {
        let (mut m, _) = crate::syntax::parse_str("scale.tile", SCALE).ok().expect("parses");
        let f = &mut m.funcs[0];
        hoist_weights(f);
        let text = crate::syntax::print_module(&m);
        let f = &mut m.funcs[0];
        assert_eq!(params_into_weights(f, 1), ["s", "b"]);
        assert_eq!(f.params.len(), 1);
        assert!(!crate::verify::verify_module(&m).has_errors(), "verifies");
        let f = &mut m.funcs[0];
        assert_eq!(weights_of(f).iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["s", "b"]);
        hoist_weights(f);
        assert_eq!(crate::syntax::print_module(&m), text, "hoisted again, the same function");
    }
}
