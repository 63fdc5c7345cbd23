//! Affine index expressions: `(c₁·v₁ + … + cₙ·vₙ + c₀) div d`.
//!
//! Every tensor access in the tile IR indexes each dimension with one of
//! these. The variables are compute axes at level 0 (and loop induction
//! variables at the loop level). The optional exact divisor `d` expresses
//! fractionally strided accesses (transposed convolutions): the access
//! reads a real element only when the numerator is divisible by `d`; see
//! `ir-spec/README.md`, "Out-of-bounds and inexact reads".
//!
//! The representation is canonical: terms are sorted by variable, no
//! coefficient is zero, and `divisor >= 1`. Two expressions are equal as
//! functions exactly when they are equal as values, which is what
//! canonicalisation and CSE rely on.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AffineExpr<V> {
    terms: Vec<(V, i64)>,
    constant: i64,
    divisor: i64,
}

/// Arithmetic overflowed `i64` while building an expression.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AffineOverflow;

impl<V: Copy + Ord> AffineExpr<V> {
    pub fn constant(c: i64) -> Self {
        AffineExpr { terms: Vec::new(), constant: c, divisor: 1 }
    }

    pub fn var(v: V) -> Self {
        AffineExpr { terms: vec![(v, 1)], constant: 0, divisor: 1 }
    }

    /// Builds `(Σ terms + constant) div divisor`, merging duplicate variables.
    pub fn from_parts(terms: impl IntoIterator<Item = (V, i64)>, constant: i64, divisor: i64) -> Result<Self, AffineOverflow> {
        assert!(divisor >= 1, "affine divisor must be positive");
        let mut e = AffineExpr { terms: Vec::new(), constant, divisor };
        for (v, c) in terms {
            e.add_term(v, c)?;
        }
        Ok(e)
    }

    fn add_term(&mut self, v: V, c: i64) -> Result<(), AffineOverflow> {
        match self.terms.binary_search_by(|(w, _)| w.cmp(&v)) {
            Ok(i) => {
                let sum = self.terms[i].1.checked_add(c).ok_or(AffineOverflow)?;
                if sum == 0 {
                    self.terms.remove(i);
                } else {
                    self.terms[i].1 = sum;
                }
            }
            Err(i) if c != 0 => self.terms.insert(i, (v, c)),
            Err(_) => {}
        }
        Ok(())
    }

    /// `self + other`; both must have no divisor.
    pub fn checked_add(&self, other: &Self) -> Result<Self, AffineOverflow> {
        debug_assert!(self.divisor == 1 && other.divisor == 1);
        let mut out = self.clone();
        out.constant = out.constant.checked_add(other.constant).ok_or(AffineOverflow)?;
        for &(v, c) in &other.terms {
            out.add_term(v, c)?;
        }
        Ok(out)
    }

    /// `self * k`; `self` must have no divisor.
    pub fn checked_scale(&self, k: i64) -> Result<Self, AffineOverflow> {
        debug_assert!(self.divisor == 1);
        if k == 0 {
            return Ok(Self::constant(0));
        }
        let terms = self
            .terms
            .iter()
            .map(|&(v, c)| c.checked_mul(k).map(|c| (v, c)).ok_or(AffineOverflow))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AffineExpr { terms, constant: self.constant.checked_mul(k).ok_or(AffineOverflow)?, divisor: 1 })
    }

    /// `self / k` where `self` has no divisor and its constant and every
    /// coefficient are multiples of `k` (a packed or tiled index divided by
    /// its tile), else `None`.
    pub fn exact_quotient(&self, k: i64) -> Option<Self> {
        if k == 0 || self.divisor != 1 || self.constant % k != 0 || self.terms.iter().any(|&(_, c)| c % k != 0) {
            return None;
        }
        Some(AffineExpr { terms: self.terms.iter().map(|&(v, c)| (v, c / k)).collect(), constant: self.constant / k, divisor: 1 })
    }

    /// The same numerator with an exact divisor `d >= 1`, in lowest terms:
    /// the common factor of the divisor, the coefficients and the constant
    /// is cancelled (`(i * 4) div 2` is `i * 2`), which keeps the form
    /// canonical. Exactness is preserved: `n div d` is exact iff
    /// `(n/g) div (d/g)` is.
    pub fn with_divisor(mut self, d: i64) -> Self {
        assert!(d >= 1, "affine divisor must be positive");
        let g = self.terms.iter().fold(gcd(d * self.divisor, self.constant), |g, &(_, c)| gcd(g, c));
        let g = g.max(1);
        self.divisor = d * self.divisor / g;
        self.constant /= g;
        for t in &mut self.terms {
            t.1 /= g;
        }
        self
    }

    pub fn terms(&self) -> &[(V, i64)] {
        &self.terms
    }

    pub fn constant_term(&self) -> i64 {
        self.constant
    }

    pub fn divisor(&self) -> i64 {
        self.divisor
    }

    /// Coefficient of `v` (zero when `v` does not occur).
    pub fn coeff(&self, v: V) -> i64 {
        self.terms.binary_search_by(|(w, _)| w.cmp(&v)).map(|i| self.terms[i].1).unwrap_or(0)
    }

    pub fn vars(&self) -> impl Iterator<Item = V> + '_ {
        self.terms.iter().map(|&(v, _)| v)
    }

    pub fn uses(&self, v: V) -> bool {
        self.coeff(v) != 0
    }

    /// The expression's value if it has no variables and divides exactly.
    pub fn as_constant(&self) -> Option<i64> {
        if self.terms.is_empty() && self.constant % self.divisor == 0 {
            Some(self.constant / self.divisor)
        } else {
            None
        }
    }

    /// Is this exactly the variable `v`?
    pub fn is_var(&self, v: V) -> bool {
        self.terms == [(v, 1)] && self.constant == 0 && self.divisor == 1
    }

    /// Evaluates the numerator; `value` gives each variable's value.
    /// Wraps on overflow; callers bound variables so that it cannot happen.
    pub fn eval_numerator(&self, mut value: impl FnMut(V) -> i64) -> i64 {
        self.terms.iter().fold(self.constant, |acc, &(v, c)| acc.wrapping_add(c.wrapping_mul(value(v))))
    }

    /// Evaluates the expression: `None` when the exact division is inexact.
    pub fn eval(&self, value: impl FnMut(V) -> i64) -> Option<i64> {
        let n = self.eval_numerator(value);
        if self.divisor == 1 {
            Some(n)
        } else if n.rem_euclid(self.divisor) == 0 {
            Some(n.div_euclid(self.divisor))
        } else {
            None
        }
    }

    /// The interval `[lo, hi]` the numerator takes when each variable `v`
    /// ranges over `range(v) = [lo_v, hi_v]`. Exact (not just a bound),
    /// because the variables are independent. `None` on overflow.
    pub fn numerator_range(&self, mut range: impl FnMut(V) -> (i64, i64)) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (self.constant, self.constant);
        for &(v, c) in &self.terms {
            let (a, b) = range(v);
            let (x, y) = (c.checked_mul(a)?, c.checked_mul(b)?);
            lo = lo.checked_add(x.min(y))?;
            hi = hi.checked_add(x.max(y))?;
        }
        Some((lo, hi))
    }

    /// Interval of the values the expression reads, given variable ranges:
    /// the numerator's range divided (rounding inward) by the divisor.
    /// `None` on overflow or when no value divides exactly.
    pub fn value_range(&self, range: impl FnMut(V) -> (i64, i64)) -> Option<(i64, i64)> {
        let (lo, hi) = self.numerator_range(range)?;
        let d = self.divisor;
        let (lo, hi) = (div_ceil(lo, d), hi.div_euclid(d));
        (lo <= hi).then_some((lo, hi))
    }

    /// Replaces each variable by another expression (no divisors), e.g. a
    /// compute axis by `tile * 8 + point` when tiling.
    pub fn substitute<W: Copy + Ord>(&self, mut map: impl FnMut(V) -> AffineExpr<W>) -> Result<AffineExpr<W>, AffineOverflow> {
        let mut out = AffineExpr::<W>::constant(self.constant);
        for &(v, c) in &self.terms {
            out = out.checked_add(&map(v).checked_scale(c)?)?;
        }
        Ok(out.with_divisor(self.divisor))
    }

    /// Renames the variables, keeping the expression canonical.
    pub fn map_vars<W: Copy + Ord>(&self, mut map: impl FnMut(V) -> W) -> AffineExpr<W> {
        AffineExpr::from_parts(self.terms.iter().map(|&(v, c)| (map(v), c)), self.constant, self.divisor)
            .expect("renaming variables cannot overflow unless two merge")
    }

    /// Writes the expression in tile syntax: `h * 2 + r - 3`, `(h - r + 1) div 2`.
    pub fn write(&self, f: &mut dyn fmt::Write, mut name: impl FnMut(V) -> String) -> fmt::Result {
        // `r div 3` needs no parentheses; `(h * 3) div 2` and `(h + 1) div 2` do.
        let bare_var = self.terms.len() == 1 && self.terms[0].1 == 1 && self.constant == 0;
        let parens = self.divisor != 1 && !bare_var && !self.terms.is_empty();
        if parens {
            f.write_char('(')?;
        }
        let mut first = true;
        for &(v, c) in &self.terms {
            let n = name(v);
            let mag = c.unsigned_abs();
            if first {
                if c < 0 {
                    f.write_char('-')?;
                }
            } else {
                f.write_str(if c < 0 { " - " } else { " + " })?;
            }
            if mag == 1 {
                f.write_str(&n)?;
            } else {
                write!(f, "{n} * {mag}")?;
            }
            first = false;
        }
        if first {
            write!(f, "{}", self.constant)?;
        } else if self.constant != 0 {
            write!(f, " {} {}", if self.constant < 0 { '-' } else { '+' }, self.constant.unsigned_abs())?;
        }
        if parens {
            f.write_char(')')?;
        }
        if self.divisor != 1 {
            write!(f, " div {}", self.divisor)?;
        }
        Ok(())
    }

    pub fn to_string_with(&self, name: impl FnMut(V) -> String) -> String {
        let mut s = String::new();
        self.write(&mut s, name).expect("writing to a String cannot fail");
        s
    }
}

/// The greatest common divisor of `|a|` and `|b|` (0 when both are 0).
pub fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

fn div_ceil(a: i64, d: i64) -> i64 {
    -((-a).div_euclid(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    type E = AffineExpr<u32>;

    fn names(v: u32) -> String {
        ["h", "r", "w"][v as usize].to_string()
    }

    #[test]
    fn canonical_and_printed() {
        let e = E::from_parts([(1, 1), (0, 2), (1, -1), (2, -3)], -3, 1).unwrap();
        assert_eq!(e.to_string_with(names), "h * 2 - w * 3 - 3");
        let d = E::from_parts([(0, 1), (1, -1)], 1, 1).unwrap().with_divisor(2);
        assert_eq!(d.to_string_with(names), "(h - r + 1) div 2");
        assert_eq!(E::constant(-4).to_string_with(names), "-4");
        assert_eq!(E::var(1).with_divisor(3).to_string_with(names), "r div 3");
        assert_eq!(E::from_parts([(0, -1)], 0, 1).unwrap().to_string_with(names), "-h");
    }

    #[test]
    fn ranges_are_exact() {
        // h*2 + r - 3 for h in [0, 27], r in [0, 6]
        let e = E::from_parts([(0, 2), (1, 1)], -3, 1).unwrap();
        let range = |v: u32| if v == 0 { (0, 27) } else { (0, 6) };
        assert_eq!(e.numerator_range(range), Some((-3, 57)));
        let d = E::from_parts([(0, 1), (1, -1)], 1, 1).unwrap().with_divisor(2);
        assert_eq!(d.value_range(range), Some((-2, 14)));
    }

    #[test]
    fn exact_quotients() {
        let e = E::from_parts([(0, 16), (1, 32)], 48, 1).unwrap();
        assert_eq!(e.exact_quotient(16).unwrap().to_string_with(names), "h + r * 2 + 3");
        assert_eq!(e.exact_quotient(32), None);
        assert_eq!(E::var(0).with_divisor(2).exact_quotient(1), None);
    }

    #[test]
    fn eval_exact_division() {
        let d = E::var(0).with_divisor(2);
        assert_eq!(d.eval(|_| 6), Some(3));
        assert_eq!(d.eval(|_| 7), None);
        assert_eq!(d.eval(|_| -4), Some(-2));
    }

    #[test]
    fn substitution_distributes() {
        // (h*2 + 1)[h := 4*t + p]
        let e = E::from_parts([(0, 2)], 1, 1).unwrap();
        let s = e.substitute(|_| E::from_parts([(5u32, 4), (6, 1)], 0, 1).unwrap()).unwrap();
        assert_eq!(s.terms(), &[(5, 8), (6, 2)]);
        assert_eq!(s.constant_term(), 1);
    }

    #[test]
    fn divisions_are_kept_in_lowest_terms() {
        let e = E::var(0).checked_scale(4).unwrap().with_divisor(2);
        assert_eq!(e.to_string_with(names), "h * 2");
        assert_eq!(E::constant(8).with_divisor(2).as_constant(), Some(4));
        let f = E::from_parts([(0, 6), (1, 3)], 3, 1).unwrap().with_divisor(6);
        assert_eq!(f.to_string_with(names), "(h * 2 + r + 1) div 2");
    }

    #[test]
    fn overflow_is_reported() {
        assert_eq!(E::var(0).checked_scale(i64::MAX).unwrap().checked_scale(2), Err(AffineOverflow));
    }
}
