//! Runtime tensors: a shape, an element type and a dense row-major buffer
//! of that type (f16/bf16 via `half`).

use super::memory::{try_collect, try_filled};
use crate::ir::ops::round_to;
use crate::ir::{ElemType, TensorType};
use half::{bf16, f16};
use std::collections::TryReserveError;

#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
    I32(Vec<i32>),
}

impl TensorData {
    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::F16(v) => v.len(),
            TensorData::BF16(v) => v.len(),
            TensorData::I8(v) => v.len(),
            TensorData::U8(v) => v.len(),
            TensorData::I32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn elem(&self) -> ElemType {
        match self {
            TensorData::F32(_) => ElemType::F32,
            TensorData::F16(_) => ElemType::F16,
            TensorData::BF16(_) => ElemType::BF16,
            TensorData::I8(_) => ElemType::I8,
            TensorData::U8(_) => ElemType::U8,
            TensorData::I32(_) => ElemType::I32,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub ty: TensorType,
    pub data: TensorData,
}

/// A tensor whose data does not match its declared type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError(pub String);

impl Tensor {
    /// Wraps data, checking its length and type against `ty`.
    pub fn new(ty: TensorType, data: TensorData) -> Result<Tensor, ShapeError> {
        let n = ty.num_elements().ok_or_else(|| ShapeError(format!("{ty} has too many elements")))?;
        if data.elem() != ty.elem {
            return Err(ShapeError(format!("data of type {} for a tensor of {}", data.elem(), ty.elem)));
        }
        if data.len() as u64 != n {
            return Err(ShapeError(format!("{} elements for {ty}, which has {n}", data.len())));
        }
        Ok(Tensor { ty, data })
    }

    /// A tensor of zeros. Aborts if the allocator refuses: callers that
    /// take sizes from user input use [`Tensor::try_zeros`].
    pub fn zeros(ty: &TensorType) -> Tensor {
        Tensor::try_zeros(ty).expect("memory for a tensor of zeros")
    }

    /// A tensor of zeros, or the allocator's refusal.
    pub fn try_zeros(ty: &TensorType) -> Result<Tensor, TryReserveError> {
        let n = elements(ty)?;
        let data = match ty.elem {
            ElemType::F32 => TensorData::F32(try_filled(n, 0.0)?),
            ElemType::F16 => TensorData::F16(try_filled(n, f16::ZERO)?),
            ElemType::BF16 => TensorData::BF16(try_filled(n, bf16::ZERO)?),
            ElemType::I8 => TensorData::I8(try_filled(n, 0)?),
            ElemType::U8 => TensorData::U8(try_filled(n, 0)?),
            ElemType::I32 => TensorData::I32(try_filled(n, 0)?),
        };
        Ok(Tensor { ty: ty.clone(), data })
    }

    /// A copy, or the allocator's refusal.
    pub fn try_clone(&self) -> Result<Tensor, TryReserveError> {
        let n = self.len();
        let data = match &self.data {
            TensorData::F32(v) => TensorData::F32(try_collect(n, v.iter().copied())?),
            TensorData::F16(v) => TensorData::F16(try_collect(n, v.iter().copied())?),
            TensorData::BF16(v) => TensorData::BF16(try_collect(n, v.iter().copied())?),
            TensorData::I8(v) => TensorData::I8(try_collect(n, v.iter().copied())?),
            TensorData::U8(v) => TensorData::U8(try_collect(n, v.iter().copied())?),
            TensorData::I32(v) => TensorData::I32(try_collect(n, v.iter().copied())?),
        };
        Ok(Tensor { ty: self.ty.clone(), data })
    }

    /// The elements' little-endian bytes, row-major (the layout kernels,
    /// `.npy` files and weights files use).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match &self.data {
            TensorData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::U8(v) => v.clone(),
            TensorData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }

    /// The tensor of type `ty` whose little-endian bytes are `b`
    /// (`b.len()` must be `ty`'s size in bytes), allocated fallibly.
    pub fn try_from_le_bytes(ty: &TensorType, b: &[u8]) -> Result<Tensor, TryReserveError> {
        let n = b.len() / ty.elem.size_bytes() as usize;
        let data = match ty.elem {
            ElemType::F32 => TensorData::F32(try_collect(n, b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])))?),
            ElemType::F16 => TensorData::F16(try_collect(n, b.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]])))?),
            ElemType::BF16 => TensorData::BF16(try_collect(n, b.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]])))?),
            ElemType::I8 => TensorData::I8(try_collect(n, b.iter().map(|&x| x as i8))?),
            ElemType::U8 => TensorData::U8(try_collect(n, b.iter().copied())?),
            ElemType::I32 => TensorData::I32(try_collect(n, b.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])))?),
        };
        Ok(Tensor { ty: ty.clone(), data })
    }

    /// Builds a float tensor from f64 values, rounding to the element type.
    pub fn from_f64(ty: &TensorType, values: &[f64]) -> Result<Tensor, ShapeError> {
        let data = match ty.elem {
            ElemType::F32 => TensorData::F32(values.iter().map(|&x| x as f32).collect()),
            ElemType::F16 => TensorData::F16(values.iter().map(|&x| f16::from_f64(x)).collect()),
            ElemType::BF16 => TensorData::BF16(values.iter().map(|&x| bf16::from_f64(x)).collect()),
            ElemType::I8 | ElemType::U8 | ElemType::I32 => return Err(ShapeError(format!("float values for an integer tensor {ty}"))),
        };
        Tensor::new(ty.clone(), data)
    }

    /// Builds an integer tensor from i64 values, wrapping to the type.
    pub fn from_i64(ty: &TensorType, values: &[i64]) -> Result<Tensor, ShapeError> {
        let data = match ty.elem {
            ElemType::I8 => TensorData::I8(values.iter().map(|&x| x as i8).collect()),
            ElemType::U8 => TensorData::U8(values.iter().map(|&x| x as u8).collect()),
            ElemType::I32 => TensorData::I32(values.iter().map(|&x| x as i32).collect()),
            _ => return Err(ShapeError(format!("integer values for a float tensor {ty}"))),
        };
        Tensor::new(ty.clone(), data)
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Element `i` (row-major) as f64; exact for every element type.
    pub fn get_f64(&self, i: usize) -> f64 {
        match &self.data {
            TensorData::F32(v) => v[i] as f64,
            TensorData::F16(v) => v[i].to_f64(),
            TensorData::BF16(v) => v[i].to_f64(),
            TensorData::I8(v) => v[i] as f64,
            TensorData::U8(v) => v[i] as f64,
            TensorData::I32(v) => v[i] as f64,
        }
    }

    /// Element `i` as i64 (integer tensors; floats truncate).
    pub fn get_i64(&self, i: usize) -> i64 {
        match &self.data {
            TensorData::I8(v) => v[i] as i64,
            TensorData::U8(v) => v[i] as i64,
            TensorData::I32(v) => v[i] as i64,
            _ => self.get_f64(i) as i64,
        }
    }

    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.get_f64(i)).collect()
    }

    /// Gathers `self[offsets[l]]` into `out[l]` as f64; the type dispatch
    /// happens once per call, not per element.
    pub(crate) fn gather_f64(&self, offsets: &[i64], out: &mut [f64]) {
        macro_rules! go {
            ($v:expr, $conv:expr) => {
                for (o, &off) in out.iter_mut().zip(offsets) {
                    *o = $conv($v[off as usize]);
                }
            };
        }
        match &self.data {
            TensorData::F32(v) => go!(v, |x: f32| x as f64),
            TensorData::F16(v) => go!(v, |x: f16| x.to_f64()),
            TensorData::BF16(v) => go!(v, |x: bf16| x.to_f64()),
            TensorData::I8(v) => go!(v, |x: i8| x as f64),
            TensorData::U8(v) => go!(v, |x: u8| x as f64),
            TensorData::I32(v) => go!(v, |x: i32| x as f64),
        }
    }

    /// Copies `out.len()` consecutive elements from `start`, as f64.
    pub(crate) fn copy_f64(&self, start: usize, out: &mut [f64]) {
        let n = out.len();
        match &self.data {
            TensorData::F32(v) => out.iter_mut().zip(&v[start..start + n]).for_each(|(o, &x)| *o = x as f64),
            TensorData::F16(v) => out.iter_mut().zip(&v[start..start + n]).for_each(|(o, &x)| *o = x.to_f64()),
            TensorData::BF16(v) => out.iter_mut().zip(&v[start..start + n]).for_each(|(o, &x)| *o = x.to_f64()),
            TensorData::I8(v) => out.iter_mut().zip(&v[start..start + n]).for_each(|(o, &x)| *o = x as f64),
            TensorData::U8(v) => out.iter_mut().zip(&v[start..start + n]).for_each(|(o, &x)| *o = x as f64),
            TensorData::I32(v) => out.iter_mut().zip(&v[start..start + n]).for_each(|(o, &x)| *o = x as f64),
        }
    }

    /// Copies `out.len()` consecutive elements from `start`, as i64.
    pub(crate) fn copy_i64(&self, start: usize, out: &mut [i64]) {
        let n = out.len();
        match &self.data {
            TensorData::I8(v) => out.iter_mut().zip(&v[start..start + n]).for_each(|(o, &x)| *o = x as i64),
            TensorData::U8(v) => out.iter_mut().zip(&v[start..start + n]).for_each(|(o, &x)| *o = x as i64),
            TensorData::I32(v) => out.iter_mut().zip(&v[start..start + n]).for_each(|(o, &x)| *o = x as i64),
            _ => out.iter_mut().enumerate().for_each(|(l, o)| *o = self.get_f64(start + l) as i64),
        }
    }

    /// Like [`Tensor::gather_f64`] for integer tensors.
    pub(crate) fn gather_i64(&self, offsets: &[i64], out: &mut [i64]) {
        match &self.data {
            TensorData::I8(v) => out.iter_mut().zip(offsets).for_each(|(o, &off)| *o = v[off as usize] as i64),
            TensorData::U8(v) => out.iter_mut().zip(offsets).for_each(|(o, &off)| *o = v[off as usize] as i64),
            TensorData::I32(v) => out.iter_mut().zip(offsets).for_each(|(o, &off)| *o = v[off as usize] as i64),
            _ => out.iter_mut().zip(offsets).for_each(|(o, &off)| *o = self.get_f64(off as usize) as i64),
        }
    }

    /// Stores f64 values (already rounded to the type) at `offsets`.
    pub(crate) fn scatter_f64(&mut self, offsets: &[i64], values: &[f64]) {
        macro_rules! go {
            ($v:expr, $conv:expr) => {
                for (&off, &x) in offsets.iter().zip(values) {
                    $v[off as usize] = $conv(x);
                }
            };
        }
        match &mut self.data {
            TensorData::F32(v) => go!(v, |x: f64| x as f32),
            TensorData::F16(v) => go!(v, f16::from_f64),
            TensorData::BF16(v) => go!(v, bf16::from_f64),
            TensorData::I8(v) => go!(v, |x: f64| x as i8),
            TensorData::U8(v) => go!(v, |x: f64| x as u8),
            TensorData::I32(v) => go!(v, |x: f64| x as i32),
        }
    }

    pub(crate) fn scatter_i64(&mut self, offsets: &[i64], values: &[i64]) {
        match &mut self.data {
            TensorData::I8(v) => offsets.iter().zip(values).for_each(|(&off, &x)| v[off as usize] = x as i8),
            TensorData::U8(v) => offsets.iter().zip(values).for_each(|(&off, &x)| v[off as usize] = x as u8),
            TensorData::I32(v) => offsets.iter().zip(values).for_each(|(&off, &x)| v[off as usize] = x as i32),
            _ => {
                let as_f: Vec<f64> = values.iter().map(|&x| x as f64).collect();
                self.scatter_f64(offsets, &as_f);
            }
        }
    }

    /// Row-major strides of the shape, in elements.
    pub fn strides(ty: &TensorType) -> Vec<i64> {
        let mut strides = vec![1i64; ty.rank()];
        for d in (0..ty.rank().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * ty.shape[d + 1] as i64;
        }
        strides
    }

    /// The seed for input `index` of a run seeded with `seed`: distinct
    /// inputs and distinct seeds give unrelated streams (`seed + index`
    /// would make input 1 of seed 0 equal input 0 of seed 1).
    pub fn input_seed(seed: u64, index: usize) -> u64 {
        splitmix64(seed ^ splitmix64(index as u64 + 1))
    }

    /// Deterministic pseudo-random contents from `seed` (SplitMix64; the
    /// stream is fixed here, not by a dependency's version): floats
    /// uniform in [-1, 1) rounded to the type, i8 and u8 over their whole
    /// ranges, i32 in [-1000, 1000].
    pub fn random(ty: &TensorType, seed: u64) -> Tensor {
        Tensor::try_random(ty, seed).expect("memory for a random tensor")
    }

    /// [`Tensor::random`], or the allocator's refusal. The values go
    /// straight into the tensor's own type (no wider copy on the way).
    pub fn try_random(ty: &TensorType, seed: u64) -> Result<Tensor, TryReserveError> {
        let n = elements(ty)?;
        let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            splitmix64(state)
        };
        let data = match ty.elem {
            ElemType::I8 => TensorData::I8(try_collect(n, std::iter::repeat_with(|| (next() >> 56) as i8))?),
            ElemType::U8 => TensorData::U8(try_collect(n, std::iter::repeat_with(|| (next() >> 56) as u8))?),
            ElemType::I32 => TensorData::I32(try_collect(n, std::iter::repeat_with(|| (next() % 2001) as i32 - 1000))?),
            float => {
                let mut uniform = move || round_to(float, (next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0);
                match float {
                    ElemType::F16 => TensorData::F16(try_collect(n, std::iter::repeat_with(|| f16::from_f64(uniform())))?),
                    ElemType::BF16 => TensorData::BF16(try_collect(n, std::iter::repeat_with(|| bf16::from_f64(uniform())))?),
                    _ => TensorData::F32(try_collect(n, std::iter::repeat_with(|| uniform() as f32))?),
                }
            }
        };
        Ok(Tensor { ty: ty.clone(), data })
    }
}

/// The number of elements of `ty` as a `usize`; a count that does not fit
/// is reported as a refused allocation, which it would be.
fn elements(ty: &TensorType) -> Result<usize, TryReserveError> {
    match ty.num_elements().and_then(|n| usize::try_from(n).ok()) {
        Some(n) => Ok(n),
        // `try_reserve` of more than `isize::MAX` bytes builds the error.
        None => Err(Vec::<u64>::new().try_reserve_exact(usize::MAX).expect_err("usize::MAX elements of 8 bytes overflow")),
    }
}

/// SplitMix64's output function (Steele, Lea, Flood 2014).
fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_is_deterministic_and_in_range() {
        let ty = TensorType::new(vec![3, 5], ElemType::F16);
        let a = Tensor::random(&ty, 7);
        assert_eq!(a, Tensor::random(&ty, 7));
        assert_ne!(a, Tensor::random(&ty, 8));
        assert!(a.to_f64_vec().iter().all(|&x| (-1.0..1.0).contains(&x)));
        let i = Tensor::random(&TensorType::new(vec![100], ElemType::I32), 1);
        assert!(i.to_f64_vec().iter().all(|&x| (-1000.0..=1000.0).contains(&x)));
        // u8 covers 0..=255, both halves of it (the i8 stream's bits, read unsigned).
        let u = Tensor::random(&TensorType::new(vec![1000], ElemType::U8), 1).to_f64_vec();
        assert!(u.iter().all(|&x| (0.0..=255.0).contains(&x)));
        assert!(u.iter().any(|&x| x < 128.0) && u.iter().any(|&x| x >= 128.0));
    }

    #[test]
    fn input_seeds_do_not_overlap_across_seeds() {
        let seeds: std::collections::HashSet<u64> = (0..8).flat_map(|s| (0..8).map(move |i| Tensor::input_seed(s, i))).collect();
        assert_eq!(seeds.len(), 64);
    }

    #[test]
    fn strides_are_row_major() {
        assert_eq!(Tensor::strides(&TensorType::new(vec![2, 3, 4], ElemType::F32)), vec![12, 4, 1]);
        assert_eq!(Tensor::strides(&TensorType::new(vec![], ElemType::F32)), Vec::<i64>::new());
    }

    #[test]
    fn new_checks_length_and_type() {
        let ty = TensorType::new(vec![2], ElemType::F32);
        assert!(Tensor::new(ty.clone(), TensorData::F32(vec![1.0])).is_err());
        assert!(Tensor::new(ty.clone(), TensorData::I8(vec![1, 2])).is_err());
        assert!(Tensor::new(ty, TensorData::F32(vec![1.0, 2.0])).is_ok());
    }
}
