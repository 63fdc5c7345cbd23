//! Padding shared tiles against bank conflicts (`tensorize{pad-shared=true}`).
//!
//! Code generation loads a warp intrinsic's 16-bit fragments from shared
//! memory with `ldmatrix`, which reads eight rows of 16 bytes at once.
//! Shared memory is 32 banks of 4 bytes, 128 bytes across (on every NVIDIA
//! GPU since Kepler): rows that start 128 bytes apart, or any multiple of
//! that, fall in the same four banks and are served one after another. A
//! row pitch that is an even multiple of 16 bytes puts at least two of the
//! eight rows in the same banks (a `[32][128]` f16 tile, 256-byte rows:
//! all eight), an odd multiple spreads them over all 32 banks. So a shared
//! buffer that warp intrinsics read gets 16 more bytes per row where its
//! pitch is an even multiple of 16 bytes.
//!
//! The copies that fill the buffer and the intrinsics that read it address
//! it by multi-dimensional indices, so each element keeps its indices and
//! the program computes what it did; the padding is never read. Buffers
//! used any other way (a view, a call) are left alone.
//!
//! Off by default: not measured yet (the GPU lent to the session that wrote
//! it was gone); docs/tensorize.md, "On a GPU".

use crate::nest::subtree;
use tilec::ir::*;

/// The bytes of one row of an `ldmatrix` 8 × 8 matrix of 16-bit elements.
const LDMATRIX_ROW_BYTES: u64 = 16;

/// Pads the shared buffers that the `mma` intrinsics of `kernel` read (see
/// the module documentation); returns how many it padded.
pub fn pad_shared_operands(f: &mut Function, kernel: Op) -> u64 {
    let ops = subtree(f, kernel);
    let mut buffers: Vec<Value> = Vec::new();
    for &op in &ops {
        if let OpKind::Intrinsic(x) = &f.ops[op].kind
            && x.kind == IntrinsicKind::Mma
        {
            for i in [1, 2] {
                let v = f.ops[op].operands[i];
                if !buffers.contains(&v) {
                    buffers.push(v);
                }
            }
        }
    }
    let mut padded = 0;
    for buffer in buffers {
        if let Some(extra) = padding(f, buffer) {
            if let Type::Buffer(b) = &mut f.values[buffer].ty
                && let Some(last) = b.shape.last_mut()
            {
                *last += extra;
                padded += 1;
            }
        }
    }
    padded
}

/// The elements to add to each row of `buffer`, if it is a shared buffer
/// whose pitch is an even multiple of [`LDMATRIX_ROW_BYTES`] and that only
/// copies, loads, stores and intrinsics use.
fn padding(f: &Function, buffer: Value) -> Option<u64> {
    let alloc = f.def_op(buffer)?;
    let Type::Buffer(b) = f.value_type(buffer) else {
        return None;
    };
    if !matches!(f.ops[alloc].kind, OpKind::Alloc) || b.scope != MemScope::Shared || b.shape.len() < 2 {
        return None;
    }
    let elem = b.elem.size_bytes();
    let pitch = b.shape.last()?.checked_mul(elem)?;
    if elem == 0 || pitch % LDMATRIX_ROW_BYTES != 0 || (pitch / LDMATRIX_ROW_BYTES) % 2 != 0 || LDMATRIX_ROW_BYTES % elem != 0 {
        return None;
    }
    let only_indexed = f.walk().into_iter().filter(|&op| op != alloc).all(|op| {
        let data = &f.ops[op];
        !data.operands.contains(&buffer) || matches!(data.kind, OpKind::Copy(_) | OpKind::Load(_) | OpKind::Store(_) | OpKind::Intrinsic(_))
    });
    only_indexed.then_some(LDMATRIX_ROW_BYTES / elem)
}
