//! Comparing a result with the reference: the tolerance each element type
//! gets, and the error figures `tilec-run --check` reports.

use super::tensor::Tensor;
use crate::ir::ElemType;

/// Relative tolerance per element type. Compiled kernels reorder sums, so
/// they differ from the interpreter by rounding: a few ulps of the type
/// times the growth of a long sum. Integers must match exactly.
pub fn tolerance(elem: ElemType) -> f64 {
    match elem {
        ElemType::F32 => 1e-4,
        ElemType::F16 => 1e-2,
        ElemType::BF16 => 4e-2,
        ElemType::I8 | ElemType::U8 | ElemType::I32 => 0.0,
    }
}

/// The outcome of comparing `got` with `want`.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// max |got - want|
    pub max_abs_err: f64,
    /// max |got - want| / max |want| (the error relative to the result's scale)
    pub max_rel_err: f64,
    /// Where the largest error is (row-major index).
    pub worst_index: usize,
    pub rtol: f64,
    /// Every element within `rtol · (|want| + max |want|)`; NaN matches NaN.
    pub passed: bool,
}

/// Compares two tensors of the same type. An element passes when
/// `|got - want| <= rtol · (|want| + max|want|)`: relative to the element,
/// with an absolute floor proportional to the result's magnitude, so values
/// that cancel to near zero are not held to an impossible relative bound.
pub fn compare(got: &Tensor, want: &Tensor) -> Comparison {
    let rtol = tolerance(want.ty.elem);
    if got.ty != want.ty {
        return Comparison { max_abs_err: f64::INFINITY, max_rel_err: f64::INFINITY, worst_index: 0, rtol, passed: false };
    }
    let scale = (0..want.len()).map(|i| want.get_f64(i).abs()).filter(|x| x.is_finite()).fold(0.0f64, f64::max);
    let mut max_abs_err = 0.0f64;
    let mut worst_index = 0;
    let mut passed = true;
    for i in 0..want.len() {
        let (g, w) = (got.get_f64(i), want.get_f64(i));
        let err = if g.is_nan() && w.is_nan() || g == w { 0.0 } else { (g - w).abs() };
        let err = if err.is_nan() { f64::INFINITY } else { err };
        if err > rtol * (w.abs() + scale) {
            passed = false;
        }
        if err > max_abs_err {
            max_abs_err = err;
            worst_index = i;
        }
    }
    let max_rel_err = if scale > 0.0 { max_abs_err / scale } else { max_abs_err };
    Comparison { max_abs_err, max_rel_err, worst_index, rtol, passed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::TensorType;

    #[test]
    fn tolerances_scale_with_the_result() {
        let ty = TensorType::new(vec![3], ElemType::F32);
        let want = Tensor::from_f64(&ty, &[100.0, -50.0, 0.0]).unwrap();
        let close = Tensor::from_f64(&ty, &[100.001, -50.0, 0.001]).unwrap();
        let far = Tensor::from_f64(&ty, &[100.5, -50.0, 0.0]).unwrap();
        assert!(compare(&close, &want).passed);
        let c = compare(&far, &want);
        assert!(!c.passed);
        assert_eq!(c.worst_index, 0);
        assert!((c.max_rel_err - 0.005).abs() < 1e-9);
        let ity = TensorType::new(vec![1], ElemType::I32);
        assert!(!compare(&Tensor::from_i64(&ity, &[1]).unwrap(), &Tensor::from_i64(&ity, &[2]).unwrap()).passed);
    }
}
