//! Weights files: the tensors a function's `weight` ops name, in the
//! safetensors format (a JSON header of names, dtypes, shapes and byte
//! ranges, then the raw little-endian data), through the `safetensors`
//! crate. The format is the one Hugging Face and PyTorch users already
//! write and read, it is memory-mappable and it cannot execute code.
//!
//! `NET.tile`'s weights are in `NET.safetensors` beside it
//! ([`sidecar_path`]); `tilec import` writes both.

use super::memory::format_bytes;
use super::tensor::Tensor;
use crate::ir::{ElemType, TensorType};
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use std::path::{Path, PathBuf};

/// Where the weights of the module in `tile_path` are by default: the
/// same path with the extension `.safetensors`.
pub fn sidecar_path(tile_path: &Path) -> PathBuf {
    tile_path.with_extension("safetensors")
}

fn dtype_of(elem: ElemType) -> Dtype {
    match elem {
        ElemType::F32 => Dtype::F32,
        ElemType::F16 => Dtype::F16,
        ElemType::BF16 => Dtype::BF16,
        ElemType::I8 => Dtype::I8,
        ElemType::U8 => Dtype::U8,
        ElemType::I32 => Dtype::I32,
    }
}

fn elem_of(dtype: Dtype) -> Option<ElemType> {
    Some(match dtype {
        Dtype::F32 => ElemType::F32,
        Dtype::F16 => ElemType::F16,
        Dtype::BF16 => ElemType::BF16,
        Dtype::I8 => ElemType::I8,
        Dtype::U8 => ElemType::U8,
        Dtype::I32 => ElemType::I32,
        _ => return None,
    })
}

/// Writes `weights` to `path` (names must be distinct). The file's bytes
/// depend only on the weights: the header's keys are sorted.
pub fn write_sidecar(path: &Path, weights: &[(String, Tensor)]) -> Result<(), String> {
    let bytes: Vec<Vec<u8>> = weights.iter().map(|(_, t)| t.to_le_bytes()).collect();
    let mut views = Vec::with_capacity(weights.len());
    for ((name, t), b) in weights.iter().zip(&bytes) {
        let shape: Vec<usize> = t.ty.shape.iter().map(|&d| d as usize).collect();
        let view = TensorView::new(dtype_of(t.ty.elem), shape, b).map_err(|e| format!("weight `{name}`: {e}"))?;
        views.push((name.as_str(), view));
    }
    safetensors::serialize_to_file(views, None, path).map_err(|e| format!("cannot write `{}`: {e}", path.display()))
}

/// Reads every tensor of the weights file at `path`, in the file's
/// (sorted) order.
pub fn read_sidecar(path: &Path) -> Result<Vec<(String, Tensor)>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read `{}`: {}", path.display(), crate::input::io_reason(&e)))?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| format!("`{}` is not a safetensors file: {e}", path.display()))?;
    let mut out = Vec::new();
    let mut names: Vec<String> = file.names().into_iter().map(str::to_string).collect();
    names.sort();
    for name in names {
        let view = file.tensor(&name).map_err(|e| format!("`{}`: tensor `{name}`: {e}", path.display()))?;
        let Some(elem) = elem_of(view.dtype()) else {
            return Err(format!("`{}`: tensor `{name}` is {:?}, which tilec has no element type for (f32, f16, bf16, i8, u8, i32)", path.display(), view.dtype()));
        };
        let ty = TensorType::new(view.shape().iter().map(|&d| d as u64).collect(), elem);
        let t = Tensor::try_from_le_bytes(&ty, view.data()).map_err(|_| format!("not enough memory for weight `{name}` ({})", format_bytes(view.data().len() as u64)))?;
        out.push((name, t));
    }
    Ok(out)
}

/// The tensors for `wanted` (a function's weights, `ir::weights`), in
/// its order, taken from `file` (a weights file's tensors, read from
/// `path`). A missing name or a different shape or type is an error that
/// says which.
pub fn bind_weights(wanted: &[(String, TensorType)], mut file: Vec<(String, Tensor)>, path: &Path) -> Result<Vec<Tensor>, String> {
    let mut out = Vec::with_capacity(wanted.len());
    for (name, ty) in wanted {
        let Some(i) = file.iter().position(|(n, _)| n == name) else {
            let names: Vec<&str> = file.iter().map(|(n, _)| n.as_str()).collect();
            let hint = crate::diag::closest(name, names.iter().copied()).map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default();
            return Err(format!("weight \"{name}\" is not in `{}`{hint}", path.display()));
        };
        let (_, t) = file.swap_remove(i);
        if t.ty != *ty {
            return Err(format!("weight \"{name}\" is {ty} in the IR but {} in `{}`", t.ty, path.display()));
        }
        out.push(t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_round_trip_and_bind_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("net.safetensors");
        let a = Tensor::random(&TensorType::new(vec![2, 3], ElemType::F32), 1);
        let b = Tensor::random(&TensorType::new(vec![4], ElemType::BF16), 2);
        let c = Tensor::random(&TensorType::new(vec![5], ElemType::I8), 3);
        write_sidecar(&path, &[("conv.w".into(), a.clone()), ("bn".into(), b.clone()), ("q".into(), c.clone())]).unwrap();
        let read = read_sidecar(&path).unwrap();
        assert_eq!(read.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["bn", "conv.w", "q"]);
        let wanted = vec![("q".to_string(), c.ty.clone()), ("conv.w".to_string(), a.ty.clone())];
        assert_eq!(bind_weights(&wanted, read.clone(), &path).unwrap(), vec![c, a.clone()]);
        let err = bind_weights(&[("conv.v".into(), a.ty.clone())], read.clone(), &path).unwrap_err();
        assert!(err.contains("weight \"conv.v\" is not in") && err.contains("did you mean `conv.w`?"), "{err}");
        let err = bind_weights(&[("bn".into(), TensorType::new(vec![4], ElemType::F32))], read, &path).unwrap_err();
        assert!(err.contains("is tensor<4xf32> in the IR but tensor<4xbf16>"), "{err}");
        std::fs::write(&path, b"not a file of tensors").unwrap();
        assert!(read_sidecar(&path).unwrap_err().contains("is not a safetensors file"));
    }
}
