//! `prepack`: lays out a network's weights once, in a kernel of their own,
//! instead of copying them into a kernel's staged layout on every call.
//!
//! `cache` stages a read into a local buffer at the tile level that keeps
//! it (on CPUs in the layout the micro-kernel reads: transposed, split into
//! VNNI's groups of 4, in panels). When the read is a `weight`, the copy
//! computes the same bytes on every call, and often several times per call
//! (once per tile of the axes the weight does not depend on). This pass
//! moves each such copy into a `prepack` kernel before its kernel, which
//! writes every tile the copy would make into one global buffer, tile after
//! tile; the kernel then reads its tile there.

use std::collections::HashMap;

use crate::nest::{for_loop, induction_var, kernels, subtree};
use tilec::diag::Diagnostics;
use tilec::ir::builder::Cursor;
use tilec::ir::*;
use tilec::pass::{Pass, PassContext, PassDecl, PassOptions};

pub static DECL: PassDecl = PassDecl {
    name: "prepack",
    summary: "Copy weights into their staged layouts once, in a prepack kernel",
    description: "
A copy that stages a `weight` (a network's constant) into a local buffer
makes the same bytes on every call, and often several times per call: once
per tile of the axes the weight does not depend on. For each such copy in a
CPU kernel this pass makes a global buffer holding every tile the copy can
make, one after another along the buffer's first dimension (tile `t` of
loops `l0, l1, ...`, row-major over the loops whose indices the copy's
origin uses), and a `prepack` kernel before the kernel that fills it with
the same copy, once per tile. The kernel's copy and its local buffer go; its
reads of the buffer read the tile in the global one instead, at the same
indices (the first one moved by `t` tiles).

A copy is moved when its source is a `weight` value, its destination is a
local buffer that nothing else writes, every read of the buffer lies inside
every loop the copy's origin uses, and no guard encloses the copy (it would
run for tiles the kernel skips). GPU kernels (block or thread loops,
barriers, cooperative copies) are left alone: their staging is into shared
memory, which a global buffer does not replace.

A `prepack` kernel reads only constants, so a runtime may run it once per
set of weights; `tilec-run` runs it before the kernels it feeds and does
not count its time as the function's (it reports it apart). It costs the
memory of the tiles: the weight's size, more where tiles overlap (a
strided or padded box) or are padded.",
    options: &[],
    statistics: &[("prepacked", "weight copies moved into prepack kernels"), ("bytes", "bytes of the global buffers they fill")],
    create: |_: &PassOptions| Box::new(Prepack),
};

pub struct Prepack;

impl Pass for Prepack {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        for f in &mut module.funcs {
            for (kernel, _) in kernels(f) {
                if is_prepack(f, kernel) || runs_on_a_gpu(f, kernel) {
                    continue;
                }
                for copy in subtree(f, kernel) {
                    if !matches!(f.ops[copy].kind, OpKind::Copy(_)) {
                        continue;
                    }
                    if let Some(plan) = plan_for(f, kernel, copy) {
                        cx.bump("bytes", plan.bytes(f));
                        prepack(f, kernel, copy, plan);
                        cx.bump("prepacked", 1);
                    }
                }
            }
        }
        Ok(())
    }
}

fn is_prepack(f: &Function, kernel: Op) -> bool {
    matches!(&f.ops[kernel].kind, OpKind::Kernel(k) if k.prepack)
}

/// Does the kernel run on a GPU: block, thread or lane loops, barriers,
/// cooperative copies?
fn runs_on_a_gpu(f: &Function, kernel: Op) -> bool {
    subtree(f, kernel).into_iter().any(|o| match &f.ops[o].kind {
        OpKind::Barrier => true,
        OpKind::Copy(c) => c.cooperative,
        OpKind::For(l) => matches!(l.mapping, Mapping::Block(_) | Mapping::Thread(_) | Mapping::Lane),
        _ => false,
    })
}

/// What moving one copy takes.
struct Plan {
    /// The local buffer the copy fills, and its `alloc`.
    local: Value,
    alloc: Op,
    /// The loops whose indices the copy's origin uses, outermost first,
    /// and their extents.
    loops: Vec<Op>,
    extents: Vec<u64>,
    /// Every op that reads the local buffer.
    readers: Vec<Op>,
}

impl Plan {
    fn tiles(&self) -> u64 {
        self.extents.iter().product()
    }

    fn local_type<'f>(&self, f: &'f Function) -> &'f BufferType {
        f.value_type(self.local).as_buffer().expect("an alloc's result is a buffer")
    }

    /// The global buffer: the tiles along the local buffer's first
    /// dimension.
    fn packed_type(&self, f: &Function) -> Option<BufferType> {
        let local = self.local_type(f);
        let mut shape = local.shape.clone();
        shape[0] = shape.first()?.checked_mul(self.tiles())?;
        let ty = BufferType::new(shape, local.elem, MemScope::Global);
        ty.as_tensor_type().size_bytes()?;
        Some(ty)
    }

    fn bytes(&self, f: &Function) -> u64 {
        self.packed_type(f).and_then(|t| t.as_tensor_type().size_bytes()).unwrap_or(0)
    }
}

/// Whether `copy` can move into a prepack kernel, and how.
fn plan_for(f: &Function, kernel: Op, copy: Op) -> Option<Plan> {
    let OpKind::Copy(c) = &f.ops[copy].kind else { return None };
    if c.cooperative {
        return None;
    }
    let (src, local) = (f.ops[copy].operands[0], f.ops[copy].operands[1]);
    if !f.def_op(src).is_some_and(|o| matches!(f.ops[o].kind, OpKind::Weight(_))) {
        return None;
    }
    let alloc = f.def_op(local).filter(|&o| f.ops[o].kind == OpKind::Alloc)?;
    if f.value_type(local).as_buffer().is_none_or(|b| b.scope != MemScope::Local || b.shape.is_empty()) {
        return None;
    }
    // The loops between the kernel and the copy; no guard among them.
    let ancestors = f.ancestors(copy);
    let inside = ancestors.iter().position(|&a| a == kernel)?;
    let enclosing = &ancestors[..inside];
    if enclosing.iter().any(|&a| for_loop(f, a).is_none()) {
        return None;
    }
    let origin: Vec<AffineExpr<Value>> = c.src.iter().chain(&c.dst).map(|e| f.expr_in_values(copy, e)).collect();
    let loops: Vec<Op> = enclosing.iter().rev().copied().filter(|&l| origin.iter().any(|e| e.uses(induction_var(f, l)))).collect();
    // Anything else the origin uses (an index value, say) is not a loop's
    // index, and the prepack kernel would not have it.
    let ivs: Vec<Value> = loops.iter().map(|&l| induction_var(f, l)).collect();
    if origin.iter().any(|e| e.vars().any(|v| !ivs.contains(&v))) {
        return None;
    }
    // Nothing else writes the buffer, and every reader lies inside every
    // loop the origin uses (where the tile index is defined).
    let mut readers = Vec::new();
    for o in subtree(f, kernel) {
        if o == copy {
            continue;
        }
        let ops = &f.ops[o].operands;
        let (reads, writes) = match &f.ops[o].kind {
            OpKind::Load(_) => (ops[0] == local, false),
            OpKind::Store(_) => (false, ops[1] == local),
            OpKind::Fill(_) => (false, ops[0] == local),
            OpKind::Copy(_) => (ops[0] == local, ops[1] == local),
            OpKind::Intrinsic(_) => (ops[1] == local || ops[2] == local, ops[0] == local),
            _ => (false, false),
        };
        if writes {
            return None;
        }
        if reads {
            let around = f.ancestors(o);
            if !loops.iter().all(|l| around.contains(l)) {
                return None;
            }
            readers.push(o);
        }
    }
    let extents = loops.iter().map(|&l| for_loop(f, l).map_or(1, |l| l.extent)).collect();
    let plan = Plan { local, alloc, loops, extents, readers };
    plan.packed_type(f)?;
    Some(plan)
}

/// `index`'s numerator moved by `by` (no divisor) times its divisor: the
/// same index, `by` further on.
fn shifted(index: &AffineExpr<Value>, by: &AffineExpr<Value>) -> Option<AffineExpr<Value>> {
    let d = index.divisor();
    let numerator = AffineExpr::from_parts(index.terms().iter().copied(), index.constant_term(), 1).ok()?;
    Some(numerator.checked_add(&by.checked_scale(d).ok()?).ok()?.with_divisor(d))
}

/// Moves `copy` into a prepack kernel before `kernel`, as `plan` says.
fn prepack(f: &mut Function, kernel: Op, copy: Op, plan: Plan) {
    let packed_ty = plan.packed_type(f).expect("checked by plan_for");
    let tile_rows = plan.local_type(f).shape[0] as i64;
    // Tile `t` of loop indices `i`: row-major over the loops.
    let tile_of = |ivs: &[Value]| -> AffineExpr<Value> {
        let mut stride = 1i64;
        let mut terms = Vec::new();
        for (&iv, &n) in ivs.iter().zip(&plan.extents).rev() {
            terms.push((iv, stride * tile_rows));
            stride *= n as i64;
        }
        AffineExpr::from_parts(terms, 0, 1).expect("the buffer's size fits")
    };
    let span = f.op_spans[copy];
    let pos = f.regions[f.body].ops.iter().position(|&o| o == kernel).expect("kernels are in the function body");
    let name = f.values[plan.local].name.clone().unwrap_or_else(|| "staged".into());
    let packed = f.build_alloc(Cursor::at(f.body, pos), packed_ty, &format!("{name}_packed"), span);
    let OpKind::Kernel(k) = &f.ops[kernel].kind else { unreachable!("a kernel") };
    let label = k.label.as_ref().map(|l| format!("{l}.prepack"));
    let header = Kernel { label, schedule: Schedule::new(&k.schedule.target), prepack: true };
    let (_, mut region) = f.build_kernel(Cursor::at(f.body, pos + 1), header, span);

    // The prepack kernel: the copy's loops, then the copy into tile `t`.
    let mut map: HashMap<Value, Value> = HashMap::new();
    let mut ivs = Vec::new();
    for (&l, &extent) in plan.loops.iter().zip(&plan.extents) {
        let old = induction_var(f, l);
        let hint = f.values[old].name.clone().unwrap_or_else(|| "t".into());
        let (_, body, iv) = f.build_for(Cursor::end(region), extent, Mapping::Serial, None, &hint, span);
        map.insert(old, iv);
        ivs.push(iv);
        region = body;
    }
    let in_new = |e: &AffineExpr<Value>| e.map_vars(|v| *map.get(&v).unwrap_or(&v));
    let (src, dst) = f.copy_indices(copy);
    let src: Vec<AffineExpr<Value>> = src.iter().map(in_new).collect();
    let mut dst: Vec<AffineExpr<Value>> = dst.iter().map(in_new).collect();
    dst[0] = shifted(&dst[0], &tile_of(&ivs)).expect("the buffer's size fits");
    let moved = f.build_op(Cursor::end(region), f.ops[copy].kind.clone(), vec![f.ops[copy].operands[0], packed], vec![], span);
    f.set_copy_indices(moved, &src, &dst);

    // The kernel reads its tile of the global buffer.
    let old_ivs: Vec<Value> = plan.loops.iter().map(|&l| induction_var(f, l)).collect();
    let here = tile_of(&old_ivs);
    for &o in &plan.readers {
        reread(f, o, plan.local, packed, &here);
    }
    f.remove_op(copy);
    f.remove_op(plan.alloc);
}

/// Makes `op` read `to` where it read `from`, its first index moved by
/// `by`.
fn reread(f: &mut Function, op: Op, from: Value, to: Value, by: &AffineExpr<Value>) {
    let move_first = |mut indices: Vec<AffineExpr<Value>>| {
        indices[0] = shifted(&indices[0], by).expect("the buffer's size fits");
        indices
    };
    match f.ops[op].kind {
        OpKind::Load(_) => {
            let indices = move_first(f.access_indices(op));
            f.ops[op].operands[0] = to;
            f.set_access_indices(op, &indices);
        }
        OpKind::Copy(_) => {
            let (src, dst) = f.copy_indices(op);
            f.ops[op].operands[0] = to;
            f.set_copy_indices(op, &move_first(src), &dst);
        }
        OpKind::Intrinsic(_) => {
            let (mut origins, lane) = f.intrinsic_indices(op);
            for (i, o) in origins.iter_mut().enumerate().skip(1) {
                if f.ops[op].operands[i] == from {
                    *o = move_first(std::mem::take(o));
                    f.ops[op].operands[i] = to;
                }
            }
            f.set_intrinsic_indices(op, &origins, &lane);
        }
        _ => unreachable!("plan_for collects loads, copies and intrinsics"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use crate::{cache, tile, unroll, vectorize};

    /// A conv whose weights are staged at `l2`, transposed so that `f`
    /// runs along the vector: the copy sits in the loops of `f` and `c`
    /// and, uselessly for a weight, in that of `oh`.
    const CONV: &str = r#"func @conv(%x: tensor<1x16x10x10xf32>) -> tensor<1x32x8x8xf32> {
  %k = weight "k" : tensor<32x16x3x3xf32>
  %y = compute "conv" (n: 1, f: 32, oh: 8, ow: 8) reduce sum (c: 16, r: 3, s: 3)
      reads(%xv = %x[n, c, oh + r, ow + s], %kv = %k[f, c, r, s]) -> tensor<1x32x8x8xf32>[n, f, oh, ow]
      schedule "x86-avx2" {
        tile = {n = [1, 1, 1], f = [32, 16, 16], oh = [8, 4, 2], ow = [8, 8, 4], c = [16, 8, 1], r = [3, 3, 3], s = [3, 3, 3]},
        cache = {kv = l2},
        unroll = 16,
        vector = {f = 8}
      } {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}
"#;

    fn run_passes(src: &str) -> (Module, u64) {
        let m = parse(src);
        let t = tilec::target::builtin("x86-avx2").expect("built-in target");
        let mut passes: Vec<Box<dyn Pass>> = [&tile::DECL, &cache::DECL, &vectorize::DECL, &DECL, &unroll::DECL].iter().map(|d| (d.create)(&PassOptions::defaults(d.options))).collect();
        let mut refs: Vec<&mut (dyn Pass + 'static)> = passes.iter_mut().map(|p| &mut **p).collect();
        let out = check_equivalent(&m, &t, &mut refs, 3);
        // The pass's statistics, from a second run of the same passes.
        let mut again = m.clone();
        let mut cx = PassContext::with_target(Some(t));
        let mut moved = 0;
        for d in [&tile::DECL, &cache::DECL, &vectorize::DECL, &DECL] {
            (d.create)(&PassOptions::defaults(d.options)).run(&mut again, &mut cx).expect("passes run");
            moved = cx.take_statistics().get("prepacked").copied().unwrap_or(0);
        }
        (out, moved)
    }

    fn kernels_of(f: &Function) -> Vec<(Op, bool)> {
        kernels(f).into_iter().map(|(k, _)| (k, is_prepack(f, k))).collect()
    }

    #[test]
    fn a_staged_weight_is_copied_once_per_tile_in_a_prepack_kernel() {
        let (m, moved) = run_passes(CONV);
        assert_eq!(moved, 1);
        let f = &m.funcs[0];
        let ks = kernels_of(f);
        assert_eq!(ks.iter().map(|k| k.1).collect::<Vec<_>>(), [true, false], "the prepack kernel comes first");
        // Every tile the copy makes, once: the loops of `f` and `c` (2 x 2
        // tiles of 8 x 3 x 3 x 16), not that of `oh`.
        let packed = subtree(f, ks[0].0).into_iter().find_map(|o| matches!(f.ops[o].kind, OpKind::Copy(_)).then(|| f.ops[o].operands[1])).expect("a copy");
        assert_eq!(f.value_type(packed).as_buffer().map(|b| b.shape.clone()), Some(vec![32, 3, 3, 16]));
        let loops = subtree(f, ks[0].0).into_iter().filter_map(|o| for_loop(f, o).map(|l| l.extent)).collect::<Vec<_>>();
        assert_eq!(loops, [2, 2]);
        // The kernel copies nothing but reads the packed tiles.
        let main = subtree(f, ks[1].0);
        assert!(!main.iter().any(|&o| matches!(f.ops[o].kind, OpKind::Copy(_))));
        assert!(main.iter().any(|&o| matches!(f.ops[o].kind, OpKind::Load(_)) && f.ops[o].operands[0] == packed));
    }

    #[test]
    fn parameters_are_not_weights() {
        let src = CONV.replace("(%x: tensor<1x16x10x10xf32>)", "(%x: tensor<1x16x10x10xf32>, %k: tensor<32x16x3x3xf32>)").replace("  %k = weight \"k\" : tensor<32x16x3x3xf32>\n", "");
        let (m, moved) = run_passes(&src);
        assert_eq!(moved, 0);
        assert!(kernels_of(&m.funcs[0]).iter().all(|k| !k.1));
    }

    #[test]
    fn a_partial_tile_is_packed_with_its_padding() {
        // f = 24 in tiles of 16: the second tile's copy reads 8 filters
        // past the weight, as `pad(0.0)`; the packed buffer holds the two
        // whole tiles, and the results stay the same (`check_equivalent`).
        let src = CONV.replace("32x16x3x3", "24x16x3x3").replace("1x32x8x8", "1x24x8x8").replace("f: 32", "f: 24").replace("f = [32, 16, 16]", "f = [24, 16, 16]");
        let (m, moved) = run_passes(&src);
        assert_eq!(moved, 1);
        let f = &m.funcs[0];
        let prepack = kernels_of(f).into_iter().find(|k| k.1).expect("a prepack kernel").0;
        let copy = subtree(f, prepack).into_iter().find(|&o| matches!(f.ops[o].kind, OpKind::Copy(_))).expect("a copy");
        assert!(matches!(&f.ops[copy].kind, OpKind::Copy(c) if c.pad.is_some()));
        assert_eq!(f.value_type(f.ops[copy].operands[1]).as_buffer().map(|b| b.shape.clone()), Some(vec![32, 3, 3, 16]));
    }
}
