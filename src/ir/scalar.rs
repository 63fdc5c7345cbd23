//! The meaning of every scalar op, on [`Literal`]s. This is the single
//! definition that constant folding and the interpreter share; compiled
//! code is tested against it.
//!
//! Floats: each op is computed in f64 and rounded to the op's type. For
//! `add`, `sub`, `mul`, `div` and `sqrt` this equals the correctly rounded
//! IEEE result of the narrower type (f64 has more than 2p+2 bits for every
//! p ≤ 24). Transcendentals are rounded from f64's result.
//! Integers: two's-complement, wrapping at the type's width.

use super::ops::{BinaryOp, Combiner, Literal, UnaryOp, round_to};
use super::types::ElemType;

/// Wraps an integer to the width of `ty`.
pub fn wrap_int(ty: ElemType, x: i64) -> i64 {
    match ty {
        ElemType::I8 => x as i8 as i64,
        ElemType::I32 => x as i32 as i64,
        _ => x,
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

fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}

pub fn unary(op: UnaryOp, ty: ElemType, x: Literal) -> Literal {
    if ty.is_int() {
        let i = as_int(x);
        let r = match op {
            UnaryOp::Neg => i.wrapping_neg(),
            UnaryOp::Abs => i.wrapping_abs(),
            UnaryOp::Relu => i.max(0),
            // Float-only ops are rejected by the verifier; keep the value.
            _ => i,
        };
        return Literal::Int(wrap_int(ty, r));
    }
    let f = x.as_f64();
    let r = match op {
        UnaryOp::Neg => -f,
        UnaryOp::Abs => f.abs(),
        UnaryOp::Relu => nan_max(f, 0.0),
        UnaryOp::Exp => f.exp(),
        UnaryOp::Log => f.ln(),
        UnaryOp::Sqrt => f.sqrt(),
        UnaryOp::Rsqrt => 1.0 / f.sqrt(),
        UnaryOp::Tanh => f.tanh(),
        UnaryOp::Erf => erf(f),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-f).exp()),
    };
    Literal::Float(round_to(ty, r))
}

pub fn binary(op: BinaryOp, ty: ElemType, a: Literal, b: Literal) -> Literal {
    if ty.is_int() {
        let (x, y) = (as_int(a), as_int(b));
        let r = match op {
            BinaryOp::Add => x.wrapping_add(y),
            BinaryOp::Sub => x.wrapping_sub(y),
            BinaryOp::Mul => x.wrapping_mul(y),
            BinaryOp::Max => x.max(y),
            BinaryOp::Min => x.min(y),
            // Rejected by the verifier on integers.
            BinaryOp::Div => x,
        };
        return Literal::Int(wrap_int(ty, r));
    }
    let (x, y) = (a.as_f64(), b.as_f64());
    let r = match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
        BinaryOp::Max => nan_max(x, y),
        BinaryOp::Min => nan_min(x, y),
    };
    Literal::Float(round_to(ty, r))
}

/// Converts between element types: float→float rounds to nearest even,
/// int→float rounds to nearest, float→int truncates toward zero and
/// saturates (NaN → 0), int→int wraps.
pub fn cast(from: ElemType, to: ElemType, x: Literal) -> Literal {
    match (from.is_int(), to.is_int()) {
        (true, true) => Literal::Int(wrap_int(to, as_int(x))),
        (true, false) => Literal::Float(round_to(to, x.as_f64())),
        (false, false) => Literal::Float(round_to(to, x.as_f64())),
        (false, true) => {
            let f = x.as_f64();
            let (lo, hi) = to.int_range().expect("integer type");
            Literal::Int(if f.is_nan() { 0 } else { (f.trunc().max(lo as f64).min(hi as f64)) as i64 })
        }
    }
}

/// One step of a fold: `acc ⊕ x`.
pub fn combine(c: Combiner, ty: ElemType, acc: Literal, x: Literal) -> Literal {
    let op = match c {
        Combiner::Sum => BinaryOp::Add,
        Combiner::Max => BinaryOp::Max,
        Combiner::Min => BinaryOp::Min,
    };
    binary(op, ty, acc, x)
}

fn as_int(x: Literal) -> i64 {
    match x {
        Literal::Int(i) => i,
        Literal::Float(f) => f as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_ops_wrap() {
        assert_eq!(binary(BinaryOp::Add, ElemType::I8, Literal::Int(127), Literal::Int(1)), Literal::Int(-128));
        assert_eq!(unary(UnaryOp::Neg, ElemType::I8, Literal::Int(-128)), Literal::Int(-128));
        assert_eq!(cast(ElemType::I32, ElemType::I8, Literal::Int(300)), Literal::Int(44));
    }

    #[test]
    fn float_ops_round_to_type() {
        let third = binary(BinaryOp::Div, ElemType::F16, Literal::Float(1.0), Literal::Float(3.0));
        assert_eq!(third, Literal::Float(half::f16::from_f64(1.0 / 3.0).to_f64()));
        assert!(matches!(binary(BinaryOp::Max, ElemType::F32, Literal::Float(f64::NAN), Literal::Float(1.0)), Literal::Float(x) if x.is_nan()));
        assert_eq!(cast(ElemType::F32, ElemType::I8, Literal::Float(1000.7)), Literal::Int(127));
        assert_eq!(cast(ElemType::F32, ElemType::I32, Literal::Float(-2.9)), Literal::Int(-2));
        assert_eq!(cast(ElemType::F32, ElemType::I32, Literal::Float(f64::NAN)), Literal::Int(0));
    }
}
