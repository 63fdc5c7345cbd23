//! Padding shared tiles against bank conflicts (`tensorize{pad-shared}`,
//! on by default).
//!
//! Code generation loads a warp intrinsic's fragments from shared memory
//! with `ldmatrix` where it can (16-bit elements; bytes with `k`
//! innermost), which reads eight rows of 16 bytes at once.
//! Shared memory is the target's `banks` banks of `bank_width_bytes` (32
//! of 4 on NVIDIA GPUs: 128 bytes across): rows whose starts are a
//! multiple of that apart fall in the same banks and are served one after
//! another. With rows of 16 bytes the span holds `span / 16` row slots
//! (8), and eight rows a pitch `p` apart take distinct slots when `p / 16`
//! shares no factor with them: an odd multiple of 16 bytes. A `[32][128]`
//! f16 tile (256-byte rows) put all eight rows in the same banks. So a
//! shared buffer that warp intrinsics read gets 16 more bytes per row
//! until its pitch qualifies, while the kernel's shared tiles still fit
//! the target's shared memory.
//!
//! The copies that fill the buffer and the intrinsics that read it address
//! it by multi-dimensional indices, so each element keeps its indices and
//! the program computes what it did; the padding is never read. Buffers
//! used any other way (a view, a call) are left alone.
//!
//! Measured on an H200 (2026-11-28, docs/tensorize.md, "On a GPU"): f16
//! GEMMs 4096^3 ran 1.3-1.7x faster padded (the default pick 62 to 82
//! TFLOP/s, a hand schedule 94 to 152), and the padded kernels matched
//! the interpreter.

use crate::nest::subtree;
use tilec::ir::*;

/// The bytes of one row of an `ldmatrix` matrix (8 × 8 of 16-bit elements).
const LDMATRIX_ROW_BYTES: u64 = 16;

/// Pads the shared buffers that the `mma` intrinsics of `kernel` read (see
/// the module documentation) for `target`'s shared memory; returns how
/// many it padded.
pub fn pad_shared_operands(f: &mut Function, kernel: Op, target: &tilec::target::Target) -> u64 {
    let Some(shared) = target.memory.iter().find(|m| m.scope.as_deref() == Some("shared") && m.banks > 0) else {
        return 0;
    };
    let slots = (u64::from(shared.banks) * u64::from(shared.bank_width_bytes)) / LDMATRIX_ROW_BYTES;
    if slots < 2 {
        return 0;
    }
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
    // The kernel's shared bytes, which the padding must keep within the
    // target's shared memory.
    let mut total: u64 = ops.iter().filter(|&&op| matches!(f.ops[op].kind, OpKind::Alloc)).filter_map(|&op| shared_bytes(f, f.result(op))).sum();
    let mut padded = 0;
    for buffer in buffers {
        let Some((extra, rows)) = padding(f, buffer, slots) else { continue };
        let Type::Buffer(b) = f.value_type(buffer) else { continue };
        let grown = total.saturating_add(extra.saturating_mul(rows).saturating_mul(b.elem.size_bytes()));
        if grown > shared.capacity_bytes {
            continue;
        }
        if let Type::Buffer(b) = &mut f.values[buffer].ty
            && let Some(last) = b.shape.last_mut()
        {
            *last += extra;
            total = grown;
            padded += 1;
        }
    }
    padded
}

/// The bytes of `v` if it is a shared buffer.
fn shared_bytes(f: &Function, v: Value) -> Option<u64> {
    match f.value_type(v) {
        Type::Buffer(b) if b.scope == MemScope::Shared => b.size_bytes(),
        _ => None,
    }
}

/// The elements to add to each row of `buffer`, and its rows, if it is a
/// shared buffer of whole 16-byte rows whose pitch puts rows in the same
/// of the `slots` 16-byte slots of the banks, and that only copies, loads,
/// stores and intrinsics use.
fn padding(f: &Function, buffer: Value, slots: u64) -> Option<(u64, u64)> {
    let alloc = f.def_op(buffer)?;
    let Type::Buffer(b) = f.value_type(buffer) else {
        return None;
    };
    if !matches!(f.ops[alloc].kind, OpKind::Alloc) || b.scope != MemScope::Shared || b.shape.len() < 2 {
        return None;
    }
    let elem = b.elem.size_bytes();
    let pitch = b.shape.last()?.checked_mul(elem)?;
    if elem == 0 || pitch % LDMATRIX_ROW_BYTES != 0 || LDMATRIX_ROW_BYTES % elem != 0 {
        return None;
    }
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut step = pitch / LDMATRIX_ROW_BYTES;
    let mut extra = 0;
    while gcd(step, slots) != 1 {
        step += 1;
        extra += LDMATRIX_ROW_BYTES / elem;
    }
    let only_indexed = f.walk().into_iter().filter(|&op| op != alloc).all(|op| {
        let data = &f.ops[op];
        !data.operands.contains(&buffer) || matches!(data.kind, OpKind::Copy(_) | OpKind::Load(_) | OpKind::Store(_) | OpKind::Intrinsic(_))
    });
    let rows: u64 = b.shape[..b.shape.len() - 1].iter().product();
    (extra > 0 && only_indexed).then_some((extra, rows))
}
