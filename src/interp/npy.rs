//! `.npy` files for tensors (numpy's format, through `npyz`).
//!
//! Element types map to numpy dtypes one-to-one (`f32` ↔ `float32`, `f16`
//! ↔ `float16`, `i8` ↔ `int8`, `u8` ↔ `uint8`, `i32` ↔ `int32`), except `bf16`, which numpy
//! does not have: bf16 tensors are read from and written as `float32`
//! arrays (reading rounds to bf16; writing is exact).

use super::tensor::{Tensor, TensorData};
use crate::ir::{ElemType, TensorType};
use half::{bf16, f16};
use npyz::{DType, TypeChar, WriterBuilder};
use super::memory::format_bytes;
use std::io::{BufReader, BufWriter, Read};
use std::path::Path;

/// numpy's name for the dtype a tensor of `elem` is stored as.
pub fn numpy_dtype(elem: ElemType) -> &'static str {
    match elem {
        ElemType::F32 | ElemType::BF16 => "float32",
        ElemType::F16 => "float16",
        ElemType::I8 => "int8",
        ElemType::U8 => "uint8",
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
///
/// The file is streamed, not read whole, and nothing the size of the data
/// is allocated before the header has been checked against `expected` and
/// the file's length against the header: a header claiming a huge shape
/// is an error, not an allocation. The tensor itself is allocated
/// fallibly; callers that count memory check `expected`'s size first.
pub fn read_npy(path: &Path, expected: &TensorType) -> Result<Tensor, String> {
    let cannot_read = |e: std::io::Error| format!("cannot read `{}`: {}", path.display(), crate::input::io_reason(&e));
    let file = std::fs::File::open(path).map_err(cannot_read)?;
    let metadata = file.metadata().map_err(cannot_read)?;
    if metadata.is_dir() {
        return Err(cannot_read(std::io::Error::from(std::io::ErrorKind::IsADirectory)));
    }
    let mut reader = BufReader::new(file);
    let (header, data_offset) = read_header(&mut reader, path)?;
    let npy = npyz::NpyFile::with_header(header, reader);
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
    // The shape is `expected`'s, whose size fits in 64 bits.
    let n = expected.num_elements().unwrap_or(u64::MAX);
    let item_bytes = if expected.elem == ElemType::BF16 { 4 } else { expected.elem.size_bytes() };
    let data_bytes = n.saturating_mul(item_bytes);
    let held = metadata.len().saturating_sub(data_offset);
    if held < data_bytes {
        return Err(format!("`{}` is truncated: its header says {found} of shape {shape:?}, {data_bytes} bytes of data, but the file holds {held} after its header", path.display()));
    }
    let refused = || format!("cannot read `{}`: its {} of data need more memory than the system gives", path.display(), format_bytes(data_bytes));
    let count = usize::try_from(n).map_err(|_| refused())?;
    let bad = |e: std::io::Error| format!("cannot read the data of `{}`: {e}", path.display());
    macro_rules! read_all {
        ($ty:ty, $conv:expr) => {{
            let mut values = Vec::new();
            values.try_reserve_exact(count).map_err(|_| refused())?;
            for x in npy.data::<$ty>().map_err(|e| bad(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))? {
                values.push($conv(x.map_err(bad)?));
            }
            values
        }};
    }
    let data = match expected.elem {
        ElemType::F32 => TensorData::F32(read_all!(f32, |x| x)),
        ElemType::BF16 => TensorData::BF16(read_all!(f32, bf16::from_f32)),
        ElemType::F16 => TensorData::F16(read_all!(f16, |x| x)),
        ElemType::I8 => TensorData::I8(read_all!(i8, |x| x)),
        ElemType::U8 => TensorData::U8(read_all!(u8, |x| x)),
        ElemType::I32 => TensorData::I32(read_all!(i32, |x| x)),
    };
    Tensor::new(expected.clone(), data).map_err(|e| format!("`{}`: {}", path.display(), e.0))
}

/// Reads the header of a .npy file (numpy's format, versions 1 to 3: a
/// magic string, a version, the header's length and a Python dict);
/// returns it with the offset of the data. A shape whose element count
/// does not fit in 64 bits is refused here, before `npyz` multiplies it
/// out (which overflows).
fn read_header(reader: &mut impl Read, path: &Path) -> Result<(npyz::NpyHeader, u64), String> {
    let not_npy = |why: &dyn std::fmt::Display| format!("`{}` is not a .npy file: {why}", path.display());
    let mut prefix = vec![0u8; 10];
    reader.read_exact(&mut prefix).map_err(|e| not_npy(&e))?;
    if &prefix[..6] != b"\x93NUMPY" {
        return Err(not_npy(&"it does not start with numpy's magic string"));
    }
    let header_len = match prefix[6] {
        1 => u16::from_le_bytes([prefix[8], prefix[9]]) as usize,
        2 | 3 => {
            let mut rest = [0u8; 2];
            reader.read_exact(&mut rest).map_err(|e| not_npy(&e))?;
            prefix.extend_from_slice(&rest);
            u32::from_le_bytes([prefix[8], prefix[9], rest[0], rest[1]]) as usize
        }
        v => return Err(not_npy(&format!("format version {v} is not one numpy writes"))),
    };
    let data_offset = (prefix.len() + header_len) as u64;
    let mut text = Vec::new();
    reader.take(header_len as u64).read_to_end(&mut text).map_err(|e| not_npy(&e))?;
    if text.len() < header_len {
        return Err(not_npy(&"its header is cut short"));
    }
    if header_elements(&String::from_utf8_lossy(&text)) == Some(None) {
        return Err(format!("`{}` has a header whose shape has more elements than fit in 64 bits", path.display()));
    }
    prefix.extend_from_slice(&text);
    let header = npyz::NpyHeader::from_reader(&prefix[..]).map_err(|e| not_npy(&e))?;
    Ok((header, data_offset))
}

/// The number of elements of the `'shape': (...)` entry of a header dict:
/// `Some(None)` when it does not fit in 64 bits, `None` when the entry is
/// not in the usual form (`npyz` then judges the header).
fn header_elements(header: &str) -> Option<Option<u64>> {
    let after = &header[header.find("'shape'")? + "'shape'".len()..];
    let tuple = after.trim_start().strip_prefix(':')?.trim_start().strip_prefix('(')?;
    let mut count = Some(1u64);
    for dim in tuple[..tuple.find(')')?].split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let d = match dim.parse::<u64>() {
            Ok(d) => Some(d),
            Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => None,
            Err(_) => return None,
        };
        count = count.zip(d).and_then(|(c, d)| c.checked_mul(d));
    }
    Some(count)
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
        TensorData::U8(v) => write_all!(u8, v.iter().copied()),
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

    /// The `descr` of a written file's header: numpy's own dtype strings.
    fn descr(path: &Path) -> String {
        let bytes = std::fs::read(path).unwrap();
        let text = String::from_utf8_lossy(&bytes[10..]);
        let start = text.find("'descr': '").unwrap() + "'descr': '".len();
        text[start..start + text[start..].find('\'').unwrap()].to_string()
    }

    #[test]
    fn u8_is_uint8_at_every_edge() {
        let dir = std::env::temp_dir().join(format!("tilec-npy-u8-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ty = TensorType::new(vec![2, 3], ElemType::U8);
        let t = Tensor::from_i64(&ty, &[0, 1, 127, 128, 254, 255]).unwrap();
        let path = dir.join("u8.npy");
        write_npy(&path, &t).unwrap();
        assert_eq!(descr(&path), "|u1");
        let back = read_npy(&path, &ty).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.to_f64_vec(), vec![0.0, 1.0, 127.0, 128.0, 254.0, 255.0]);
        // The other types keep numpy's dtypes (bf16 has none: float32).
        for (elem, want) in [(ElemType::I8, "|i1"), (ElemType::I32, "<i4"), (ElemType::F16, "<f2"), (ElemType::F32, "<f4"), (ElemType::BF16, "<f4")] {
            let p = dir.join(format!("{elem}.npy"));
            write_npy(&p, &Tensor::random(&TensorType::new(vec![2, 3], elem), 3)).unwrap();
            assert_eq!(descr(&p), want, "{elem}");
        }
        // A uint8 file is not an int8 tensor, nor the other way round.
        let err = read_npy(&path, &TensorType::new(vec![2, 3], ElemType::I8)).unwrap_err();
        assert!(err.contains("holds uint8, but tensor<2x3xi8> needs int8; convert with `a.astype(np.int8)`"), "{err}");
        let err = read_npy(&dir.join("i8.npy"), &ty).unwrap_err();
        assert!(err.contains("holds int8, but tensor<2x3xu8> needs uint8; convert with `a.astype(np.uint8)`"), "{err}");
        let err = read_npy(&dir.join("i32.npy"), &ty).unwrap_err();
        assert!(err.contains("holds int32, but tensor<2x3xu8> needs uint8"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A version 1.0 .npy file of float32 with `shape` (Python tuple
    /// syntax) and `data`, however little of it.
    fn write_raw(path: &Path, shape: &str, data: &[u8]) {
        let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
        header.push_str(&" ".repeat((64 - (10 + header.len() + 1) % 64) % 64));
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn headers_claiming_more_than_the_file_holds_allocate_nothing() {
        let dir = std::env::temp_dir().join(format!("tilec-npy-huge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // 256 GiB claimed, nothing held: found short before any allocation.
        let huge = dir.join("huge.npy");
        write_raw(&huge, "(1, 2147483647, 32)", &[]);
        let err = read_npy(&huge, &TensorType::new(vec![1, 2147483647, 32], ElemType::F32)).unwrap_err();
        assert!(err.contains("is truncated: its header says float32 of shape [1, 2147483647, 32], 274877906816 bytes of data, but the file holds 0"), "{err}");
        // More elements than 64 bits count: refused before `npyz` multiplies them.
        let overflow = dir.join("overflow.npy");
        write_raw(&overflow, "(4294967296, 4294967296, 4294967296)", &[]);
        let err = read_npy(&overflow, &TensorType::new(vec![4], ElemType::F32)).unwrap_err();
        assert!(err.contains("has a header whose shape has more elements than fit in 64 bits"), "{err}");
        // Half the data.
        let short = dir.join("short.npy");
        write_raw(&short, "(4,)", &[0; 8]);
        let err = read_npy(&short, &TensorType::new(vec![4], ElemType::F32)).unwrap_err();
        assert!(err.contains("16 bytes of data, but the file holds 8"), "{err}");
        // All of it, written by hand: read as written.
        let whole = dir.join("whole.npy");
        write_raw(&whole, "(2,)", &[0, 0, 128, 63, 0, 0, 0, 64]);
        assert_eq!(read_npy(&whole, &TensorType::new(vec![2], ElemType::F32)).unwrap().to_f64_vec(), vec![1.0, 2.0]);
        // Not a .npy file at all.
        std::fs::write(dir.join("text.npy"), "hello, world").unwrap();
        assert!(read_npy(&dir.join("text.npy"), &TensorType::new(vec![2], ElemType::F32)).unwrap_err().contains("is not a .npy file"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
