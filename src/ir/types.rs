//! Types of tile IR values: scalar element types, tensors and the `index` type.
//!
//! `Display` for every type is its text syntax, and `ElemType::from_name`
//! is its inverse, so the printer and the parser cannot disagree.

use std::fmt;

/// Element types of tensors and scalar values.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElemType {
    F32,
    F16,
    BF16,
    I8,
    /// Unsigned 8-bit integers (quantized inputs: onnxruntime's
    /// MatMulInteger, x86 VNNI's u8 × s8 products).
    U8,
    I32,
}

impl ElemType {
    pub const ALL: [ElemType; 6] = [ElemType::F32, ElemType::F16, ElemType::BF16, ElemType::I8, ElemType::U8, ElemType::I32];

    pub fn name(self) -> &'static str {
        match self {
            ElemType::F32 => "f32",
            ElemType::F16 => "f16",
            ElemType::BF16 => "bf16",
            ElemType::I8 => "i8",
            ElemType::U8 => "u8",
            ElemType::I32 => "i32",
        }
    }

    pub fn from_name(name: &str) -> Option<ElemType> {
        ElemType::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn is_float(self) -> bool {
        matches!(self, ElemType::F32 | ElemType::F16 | ElemType::BF16)
    }

    pub fn is_int(self) -> bool {
        !self.is_float()
    }

    /// Whether an integer type is signed (two's complement): i8 and i32
    /// are, u8 is not. Comparisons, widening and conversions to and from
    /// floats depend on it; wrapping addition and multiplication do not.
    /// False for floats.
    pub fn is_signed_int(self) -> bool {
        matches!(self, ElemType::I8 | ElemType::I32)
    }

    /// Size of one element in bytes.
    pub fn size_bytes(self) -> u64 {
        match self {
            ElemType::F32 | ElemType::I32 => 4,
            ElemType::F16 | ElemType::BF16 => 2,
            ElemType::I8 | ElemType::U8 => 1,
        }
    }

    /// Inclusive range of an integer type.
    pub fn int_range(self) -> Option<(i64, i64)> {
        match self {
            ElemType::I8 => Some((i8::MIN as i64, i8::MAX as i64)),
            ElemType::U8 => Some((u8::MIN as i64, u8::MAX as i64)),
            ElemType::I32 => Some((i32::MIN as i64, i32::MAX as i64)),
            _ => None,
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Tensors bigger than this (2^48 bytes) are refused, so that sizes and
/// byte offsets always fit in 64-bit arithmetic.
pub const MAX_TENSOR_BYTES: u64 = 1 << 48;

/// A statically shaped tensor type, `tensor<4x8xf32>`; rank 0 is `tensor<f32>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub shape: Vec<u64>,
    pub elem: ElemType,
}

impl TensorType {
    pub fn new(shape: Vec<u64>, elem: ElemType) -> Self {
        TensorType { shape, elem }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements, or `None` if it does not fit in a `u64`.
    pub fn num_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }

    /// Size in bytes, or `None` on overflow.
    pub fn size_bytes(&self) -> Option<u64> {
        self.num_elements()?.checked_mul(self.elem.size_bytes())
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.elem)
    }
}

/// Where a buffer lives. The loop-level IR allocates buffers in a scope;
/// targets map scopes to their memories (GPU: global, shared memory,
/// registers; CPU: memory, and stack or registers for `local`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemScope {
    /// Device memory, visible to every thread.
    Global,
    /// Memory shared by the threads of one GPU block.
    Shared,
    /// Private to one thread (registers, local memory, the CPU stack).
    Local,
}

impl MemScope {
    pub const ALL: [MemScope; 3] = [MemScope::Global, MemScope::Shared, MemScope::Local];

    pub fn name(self) -> &'static str {
        match self {
            MemScope::Global => "global",
            MemScope::Shared => "shared",
            MemScope::Local => "local",
        }
    }

    pub fn from_name(s: &str) -> Option<MemScope> {
        MemScope::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// A mutable, statically shaped buffer of the loop-level IR:
/// `buffer<4x8xf32, shared>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufferType {
    pub shape: Vec<u64>,
    pub elem: ElemType,
    pub scope: MemScope,
}

impl BufferType {
    pub fn new(shape: Vec<u64>, elem: ElemType, scope: MemScope) -> Self {
        BufferType { shape, elem, scope }
    }

    /// The tensor type with the same shape and element type.
    pub fn as_tensor_type(&self) -> TensorType {
        TensorType::new(self.shape.clone(), self.elem)
    }

    pub fn size_bytes(&self) -> Option<u64> {
        self.as_tensor_type().size_bytes()
    }
}

impl fmt::Display for BufferType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("buffer<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}, {}>", self.elem, self.scope.name())
    }
}

/// The type of an SSA value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    Scalar(ElemType),
    Tensor(TensorType),
    /// A buffer of the loop-level IR.
    Buffer(BufferType),
    /// A loop induction variable.
    Index,
}

impl Type {
    pub fn as_tensor(&self) -> Option<&TensorType> {
        match self {
            Type::Tensor(t) => Some(t),
            _ => None,
        }
    }

    pub fn as_scalar(&self) -> Option<ElemType> {
        match self {
            Type::Scalar(t) => Some(*t),
            _ => None,
        }
    }

    pub fn as_buffer(&self) -> Option<&BufferType> {
        match self {
            Type::Buffer(b) => Some(b),
            _ => None,
        }
    }

    /// Shape and element type of anything that can be read (a tensor or a
    /// buffer).
    pub fn readable(&self) -> Option<TensorType> {
        match self {
            Type::Tensor(t) => Some(t.clone()),
            Type::Buffer(b) => Some(b.as_tensor_type()),
            _ => None,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Scalar(t) => t.fmt(f),
            Type::Tensor(t) => t.fmt(f),
            Type::Buffer(b) => b.fmt(f),
            Type::Index => f.write_str("index"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_type_prints_mlir_style() {
        assert_eq!(TensorType::new(vec![4, 8], ElemType::F16).to_string(), "tensor<4x8xf16>");
        assert_eq!(TensorType::new(vec![], ElemType::I32).to_string(), "tensor<i32>");
    }

    #[test]
    fn elem_names_round_trip() {
        for t in ElemType::ALL {
            assert_eq!(ElemType::from_name(t.name()), Some(t));
        }
        assert_eq!(ElemType::from_name("f64"), None);
        assert_eq!(ElemType::from_name("u8"), Some(ElemType::U8));
    }

    #[test]
    fn u8_is_an_unsigned_byte() {
        assert_eq!(ElemType::U8.size_bytes(), 1);
        assert_eq!(ElemType::U8.int_range(), Some((0, 255)));
        assert!(ElemType::U8.is_int() && !ElemType::U8.is_signed_int());
        assert!(ElemType::I8.is_signed_int() && ElemType::I32.is_signed_int());
        assert!(!ElemType::F32.is_signed_int());
        assert_eq!(TensorType::new(vec![4, 8], ElemType::U8).to_string(), "tensor<4x8xu8>");
    }

    #[test]
    fn sizes_overflow_to_none() {
        let t = TensorType::new(vec![u64::MAX, 2], ElemType::F32);
        assert_eq!(t.num_elements(), None);
        assert_eq!(TensorType::new(vec![3, 5], ElemType::BF16).size_bytes(), Some(30));
    }
}
