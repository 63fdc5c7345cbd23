//! The meaning of every scalar op. This is the single definition that
//! constant folding (on [`Literal`]s) and the interpreter (on lanes of
//! `f64`/`i64`) share; compiled code is tested against it.
//!
//! Floats are carried as `f64`: each op is computed in f64 and rounded to
//! the op's type. For `add`, `sub`, `mul`, `div` and `sqrt` this equals the
//! correctly rounded IEEE result of the narrower type (f64 has more than
//! 2p+2 bits for every p ≤ 24). Transcendentals are rounded from f64's
//! result. Integers are carried as `i64` holding the value the type's
//! bits mean: i8 in -128..=127, i32 in its range, u8 in 0..=255. Every op
//! computes on those values and wraps the result to the type's width
//! (modulo 2^width, into the type's range), so one i64 definition serves
//! signed and unsigned types alike: `max`/`min` of two u8 values compare
//! them as unsigned because they are carried non-negative, `neg` of a u8
//! wraps to 256 - x, and `abs`/`relu` leave a u8 unchanged.

use super::ops::{BinaryOp, Combiner, Literal, UnaryOp, round_to};
use super::types::ElemType;

/// Wraps an integer to the width of `ty`.
#[inline(always)]
pub fn wrap_int(ty: ElemType, x: i64) -> i64 {
    match ty {
        ElemType::I8 => x as i8 as i64,
        ElemType::U8 => x as u8 as i64,
        ElemType::I32 => x as i32 as i64,
        _ => x,
    }
}

#[inline(always)]
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

#[inline(always)]
fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

/// A float unary op before rounding to the op's type.
#[inline(always)]
pub fn float_unary(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Relu => nan_max(x, 0.0),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Erf => libm::erf(x),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
    }
}

/// An integer unary op before wrapping. Float-only ops are rejected by the
/// verifier; they leave the value unchanged here.
#[inline(always)]
pub fn int_unary(op: UnaryOp, x: i64) -> i64 {
    match op {
        UnaryOp::Neg => x.wrapping_neg(),
        UnaryOp::Abs => x.wrapping_abs(),
        UnaryOp::Relu => x.max(0),
        _ => x,
    }
}

/// A float binary op before rounding to the op's type.
#[inline(always)]
pub fn float_binary(op: BinaryOp, x: f64, y: f64) -> f64 {
    match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
        BinaryOp::Max => nan_max(x, y),
        BinaryOp::Min => nan_min(x, y),
    }
}

/// An integer binary op before wrapping (operands are already in range,
/// so i64 arithmetic cannot overflow for i8/i32 operands).
#[inline(always)]
pub fn int_binary(op: BinaryOp, x: i64, y: i64) -> i64 {
    match op {
        BinaryOp::Add => x.wrapping_add(y),
        BinaryOp::Sub => x.wrapping_sub(y),
        BinaryOp::Mul => x.wrapping_mul(y),
        BinaryOp::Max => x.max(y),
        BinaryOp::Min => x.min(y),
        // Rejected by the verifier on integers.
        BinaryOp::Div => x,
    }
}

/// The binary op a combiner folds with.
pub fn combiner_op(c: Combiner) -> BinaryOp {
    match c {
        Combiner::Sum => BinaryOp::Add,
        Combiner::Max => BinaryOp::Max,
        Combiner::Min => BinaryOp::Min,
    }
}

/// Float → int conversion: truncate toward zero, saturate to the type's
/// range (0..=255 for u8), NaN → 0.
#[inline(always)]
pub fn float_to_int(to: ElemType, x: f64) -> i64 {
    let (lo, hi) = to.int_range().expect("integer type");
    if x.is_nan() { 0 } else { x.trunc().max(lo as f64).min(hi as f64) as i64 }
}

fn as_int(x: Literal) -> i64 {
    match x {
        Literal::Int(i) => i,
        Literal::Float(f) => f as i64,
    }
}

/// Brings a literal to the canonical form for `ty` (rounded or wrapped).
pub fn normalize(ty: ElemType, x: Literal) -> Literal {
    match (x, ty.is_int()) {
        (Literal::Int(i), true) => Literal::Int(wrap_int(ty, i)),
        (Literal::Float(f), true) => Literal::Int(wrap_int(ty, f as i64)),
        (Literal::Int(i), false) => Literal::Float(round_to(ty, i as f64)),
        (Literal::Float(f), false) => Literal::Float(round_to(ty, f)),
    }
}

pub fn unary(op: UnaryOp, ty: ElemType, x: Literal) -> Literal {
    if ty.is_int() {
        Literal::Int(wrap_int(ty, int_unary(op, as_int(x))))
    } else {
        Literal::Float(round_to(ty, float_unary(op, x.as_f64())))
    }
}

pub fn binary(op: BinaryOp, ty: ElemType, a: Literal, b: Literal) -> Literal {
    if ty.is_int() {
        Literal::Int(wrap_int(ty, int_binary(op, as_int(a), as_int(b))))
    } else {
        Literal::Float(round_to(ty, float_binary(op, a.as_f64(), b.as_f64())))
    }
}

/// Converts between element types: float→float rounds to nearest even,
/// int→float rounds to nearest (u8 and i8 exactly), float→int truncates
/// toward zero and saturates (NaN → 0), int→int wraps modulo 2^width of
/// the target: widening a u8 zero-extends, widening an i8 sign-extends
/// (the value is kept), narrowing keeps the low bits.
pub fn cast(from: ElemType, to: ElemType, x: Literal) -> Literal {
    match (from.is_int(), to.is_int()) {
        (true, true) => Literal::Int(wrap_int(to, as_int(x))),
        (_, false) => Literal::Float(round_to(to, x.as_f64())),
        (false, true) => Literal::Int(float_to_int(to, x.as_f64())),
    }
}

/// One step of a fold: `acc ⊕ x`.
pub fn combine(c: Combiner, ty: ElemType, acc: Literal, x: Literal) -> Literal {
    binary(combiner_op(c), ty, acc, x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_ops_wrap() {
        assert_eq!(binary(BinaryOp::Add, ElemType::I8, Literal::Int(127), Literal::Int(1)), Literal::Int(-128));
        assert_eq!(unary(UnaryOp::Neg, ElemType::I8, Literal::Int(-128)), Literal::Int(-128));
        assert_eq!(cast(ElemType::I32, ElemType::I8, Literal::Int(300)), Literal::Int(44));
        assert_eq!(binary(BinaryOp::Mul, ElemType::I32, Literal::Int(1 << 20), Literal::Int(1 << 20)), Literal::Int(0));
    }

    #[test]
    fn u8_ops_wrap_modulo_256() {
        let u8_bin = |op, a, b| binary(op, ElemType::U8, Literal::Int(a), Literal::Int(b));
        assert_eq!(u8_bin(BinaryOp::Add, 255, 1), Literal::Int(0));
        assert_eq!(u8_bin(BinaryOp::Add, 200, 100), Literal::Int(44));
        assert_eq!(u8_bin(BinaryOp::Sub, 0, 1), Literal::Int(255));
        assert_eq!(u8_bin(BinaryOp::Sub, 127, 128), Literal::Int(255));
        assert_eq!(u8_bin(BinaryOp::Mul, 16, 16), Literal::Int(0));
        assert_eq!(u8_bin(BinaryOp::Mul, 255, 255), Literal::Int(1));
        assert_eq!(u8_bin(BinaryOp::Mul, 128, 3), Literal::Int(128));
        assert_eq!(unary(UnaryOp::Neg, ElemType::U8, Literal::Int(1)), Literal::Int(255));
        assert_eq!(unary(UnaryOp::Neg, ElemType::U8, Literal::Int(0)), Literal::Int(0));
        assert_eq!(unary(UnaryOp::Neg, ElemType::U8, Literal::Int(128)), Literal::Int(128));
        // abs and relu of an unsigned value are the value.
        for x in [0, 127, 128, 255] {
            assert_eq!(unary(UnaryOp::Abs, ElemType::U8, Literal::Int(x)), Literal::Int(x));
            assert_eq!(unary(UnaryOp::Relu, ElemType::U8, Literal::Int(x)), Literal::Int(x));
        }
    }

    #[test]
    fn u8_max_and_min_compare_unsigned() {
        // 200 and 128 have the i8 bit patterns of -56 and -128: as u8 they
        // are the larger operands.
        let u8_bin = |op, a, b| binary(op, ElemType::U8, Literal::Int(a), Literal::Int(b));
        assert_eq!(u8_bin(BinaryOp::Max, 200, 100), Literal::Int(200));
        assert_eq!(u8_bin(BinaryOp::Min, 200, 100), Literal::Int(100));
        assert_eq!(u8_bin(BinaryOp::Max, 127, 128), Literal::Int(128));
        assert_eq!(u8_bin(BinaryOp::Min, 0, 255), Literal::Int(0));
        assert_eq!(combine(Combiner::Max, ElemType::U8, Combiner::Max.identity(ElemType::U8), Literal::Int(0)), Literal::Int(0));
        assert_eq!(Combiner::Max.identity(ElemType::U8), Literal::Int(0));
        assert_eq!(Combiner::Min.identity(ElemType::U8), Literal::Int(255));
        // The same bits as i8 compare signed.
        assert_eq!(binary(BinaryOp::Max, ElemType::I8, Literal::Int(-56), Literal::Int(100)), Literal::Int(100));
    }

    #[test]
    fn u8_casts_at_the_edges() {
        let c = |from, to, x| cast(from, to, Literal::Int(x));
        // u8 → wider or same-width integers: zero-extend, then wrap.
        for (x, as_i8) in [(0, 0), (127, 127), (128, -128), (255, -1)] {
            assert_eq!(c(ElemType::U8, ElemType::I32, x), Literal::Int(x));
            assert_eq!(c(ElemType::U8, ElemType::I8, x), Literal::Int(as_i8));
            assert_eq!(c(ElemType::I8, ElemType::U8, as_i8), Literal::Int(x));
            assert_eq!(c(ElemType::U8, ElemType::F32, x), Literal::Float(x as f64));
            assert_eq!(c(ElemType::U8, ElemType::BF16, x), Literal::Float(x as f64));
        }
        // i8 → i32 sign-extends, where u8 → i32 zero-extended the same bits.
        assert_eq!(c(ElemType::I8, ElemType::I32, -128), Literal::Int(-128));
        assert_eq!(c(ElemType::I8, ElemType::I32, -1), Literal::Int(-1));
        // i32 → u8 keeps the low 8 bits.
        assert_eq!(c(ElemType::I32, ElemType::U8, 256), Literal::Int(0));
        assert_eq!(c(ElemType::I32, ElemType::U8, 300), Literal::Int(44));
        assert_eq!(c(ElemType::I32, ElemType::U8, -1), Literal::Int(255));
        assert_eq!(c(ElemType::I32, ElemType::U8, i32::MIN as i64), Literal::Int(0));
        assert_eq!(c(ElemType::I32, ElemType::U8, 255), Literal::Int(255));
        // float → u8 truncates toward zero and saturates to 0..=255; NaN → 0.
        let f = |x: f64| cast(ElemType::F32, ElemType::U8, Literal::Float(x));
        assert_eq!(f(127.9), Literal::Int(127));
        assert_eq!(f(128.0), Literal::Int(128));
        assert_eq!(f(255.99), Literal::Int(255));
        assert_eq!(f(256.0), Literal::Int(255));
        assert_eq!(f(1e10), Literal::Int(255));
        assert_eq!(f(f64::INFINITY), Literal::Int(255));
        assert_eq!(f(-0.9), Literal::Int(0));
        assert_eq!(f(-1.0), Literal::Int(0));
        assert_eq!(f(f64::NEG_INFINITY), Literal::Int(0));
        assert_eq!(f(f64::NAN), Literal::Int(0));
        // The literal form constant folding keeps: wrapped into 0..=255.
        assert_eq!(normalize(ElemType::U8, Literal::Int(-1)), Literal::Int(255));
        assert_eq!(normalize(ElemType::U8, Literal::Int(256)), Literal::Int(0));
    }

    #[test]
    fn float_ops_round_to_type() {
        let third = binary(BinaryOp::Div, ElemType::F16, Literal::Float(1.0), Literal::Float(3.0));
        assert_eq!(third, Literal::Float(half::f16::from_f64(1.0 / 3.0).to_f64()));
        assert!(matches!(binary(BinaryOp::Max, ElemType::F32, Literal::Float(f64::NAN), Literal::Float(1.0)), Literal::Float(x) if x.is_nan()));
        assert_eq!(cast(ElemType::F32, ElemType::I8, Literal::Float(1000.7)), Literal::Int(127));
        assert_eq!(cast(ElemType::F32, ElemType::I32, Literal::Float(-2.9)), Literal::Int(-2));
        assert_eq!(cast(ElemType::F32, ElemType::I32, Literal::Float(f64::NAN)), Literal::Int(0));
        assert_eq!(cast(ElemType::I32, ElemType::F16, Literal::Int(2049)), Literal::Float(2048.0));
    }

    #[test]
    fn f32_arithmetic_in_f64_is_exactly_f32_arithmetic() {
        // The double-rounding argument, checked on awkward values.
        let xs = [1.0f32 / 3.0, 16777217.0, 1e-38, 3.4e38, -0.0, 0.1, 7.0e-45];
        for &a in &xs {
            for &b in &xs {
                for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
                    let native = match op {
                        BinaryOp::Add => a + b,
                        BinaryOp::Sub => a - b,
                        BinaryOp::Mul => a * b,
                        _ => a / b,
                    };
                    let via = round_to(ElemType::F32, float_binary(op, a as f64, b as f64)) as f32;
                    assert!(native.to_bits() == via.to_bits() || (native.is_nan() && via.is_nan()), "{op:?} {a} {b}");
                }
            }
        }
    }
}
