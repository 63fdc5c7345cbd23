//! `.npy` files for tensors (numpy's format, through `npyz`).
//!
//! Element types map to numpy dtypes one-to-one (`f32` ↔ `float32`, `f16`
//! ↔ `float16`, `i8` ↔ `int8`, `i32` ↔ `int32`), except `bf16`, which numpy
//! does not have: bf16 tensors are read from and written as `float32`
//! arrays (reading rounds to bf16; writing is exact).

use super::tensor::{Tensor, TensorData};
use crate::ir::{ElemType, TensorType};
use half::{bf16, f16};
use npyz::{DType, TypeChar, WriterBuilder};
use std::io::BufWriter;
use std::path::Path;

/// numpy's name for the dtype a tensor of `elem` is stored as.
pub fn numpy_dtype(elem: ElemType) -> &'static str {
    match elem {
        ElemType::F32 | ElemType::BF16 => "float32",
        ElemType::F16 => "float16",
        ElemType::I8 => "int8",
        ElemType::I32 => "int32",
    }
}

fn describe(dtype: &DType) -> String {
    match dtype {
        DType::Plain(ts) => {
            let kind = match ts.type_char() {
                TypeChar::Float => "float",
                TypeChar::Int => "int",
                TypeChar::Uint => "uint",
                TypeChar::Bool => return "bool".into(),
                _ => return format!("`{ts}`"),
            };
            format!("{kind}{}", ts.size_field() * 8)
        }
        other => format!("a structured dtype ({})", other.descr()),
    }
}

/// Reads `path` as a tensor of type `expected`; the error says what differs.
pub fn read_npy(path: &Path, expected: &TensorType) -> Result<Tensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{}`: {}", path.display(), crate::input::io_reason(&e)))?;
    let npy = npyz::NpyFile::new(&bytes[..]).map_err(|e| format!("`{}` is not a .npy file: {e}", path.display()))?;
    if npy.order() != npyz::Order::C {
        return Err(format!("`{}` is in Fortran order; save it with `np.save(path, np.ascontiguousarray(a))`", path.display()));
    }
    let shape: Vec<u64> = npy.shape().to_vec();
    if shape != expected.shape {
        return Err(format!("`{}` has shape {:?}, but {expected} has shape {:?}", path.display(), shape, expected.shape));
    }
    let found = describe(&npy.dtype());
    let want = numpy_dtype(expected.elem);
    if found != want {
        return Err(format!("`{}` holds {found}, but {expected} needs {want}; convert with `a.astype(np.{want})`", path.display()));
    }
    let bad = |e: std::io::Error| format!("cannot read the data of `{}`: {e}", path.display());
    let data = match expected.elem {
        ElemType::F32 => TensorData::F32(npy.into_vec::<f32>().map_err(bad)?),
        ElemType::BF16 => TensorData::BF16(npy.into_vec::<f32>().map_err(bad)?.into_iter().map(bf16::from_f32).collect()),
        ElemType::F16 => TensorData::F16(npy.into_vec::<f16>().map_err(bad)?),
        ElemType::I8 => TensorData::I8(npy.into_vec::<i8>().map_err(bad)?),
        ElemType::I32 => TensorData::I32(npy.into_vec::<i32>().map_err(bad)?),
    };
    Tensor::new(expected.clone(), data).map_err(|e| format!("`{}`: {}", path.display(), e.0))
}

/// Writes a tensor to `path` (bf16 as float32).
pub fn write_npy(path: &Path, t: &Tensor) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("cannot write `{}`: {}", path.display(), crate::input::io_reason(&e));
    let file = std::fs::File::create(path).map_err(fail)?;
    let out = BufWriter::new(file);
    macro_rules! write_all {
        ($ty:ty, $iter:expr) => {{
            let mut w = npyz::WriteOptions::<$ty>::new().default_dtype().shape(&t.ty.shape).writer(out).begin_nd().map_err(fail)?;
            w.extend($iter).map_err(fail)?;
            w.finish().map_err(fail)?;
        }};
    }
    match &t.data {
        TensorData::F32(v) => write_all!(f32, v.iter().copied()),
        TensorData::BF16(v) => write_all!(f32, v.iter().map(|x| x.to_f32())),
        TensorData::F16(v) => write_all!(f16, v.iter().copied()),
        TensorData::I8(v) => write_all!(i8, v.iter().copied()),
        TensorData::I32(v) => write_all!(i32, v.iter().copied()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_through_npy() {
        let dir = std::env::temp_dir().join(format!("tilec-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for elem in ElemType::ALL {
            let ty = TensorType::new(vec![2, 3], elem);
            let t = Tensor::random(&ty, 11);
            let path = dir.join(format!("{elem}.npy"));
            write_npy(&path, &t).unwrap();
            assert_eq!(read_npy(&path, &ty).unwrap(), t, "{elem}");
        }
        let path = dir.join("f32.npy");
        let err = read_npy(&path, &TensorType::new(vec![3, 2], ElemType::F32)).unwrap_err();
        assert!(err.contains("has shape [2, 3], but tensor<3x2xf32> has shape [3, 2]"), "{err}");
        let err = read_npy(&path, &TensorType::new(vec![2, 3], ElemType::I32)).unwrap_err();
        assert!(err.contains("holds float32, but tensor<2x3xi32> needs int32"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
