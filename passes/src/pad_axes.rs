//! `pad-axes`: lengthens a contraction's reduction axis to a multiple of a
//! dot intrinsic's `k` where no mapping of the op fits the intrinsic as it
//! is, reading zeros past the axis' end (issue 22's "padding where extents
//! do not divide").
//!
//! Why: `vpdpbusd` sums 4 products per lane, `vdpbf16ps` 2. The search
//! offers a mapping only where the mapped axes' extents are whole
//! intrinsic tiles (docs/search.md, "Tensor intrinsics in the space"), so
//! a convolution whose reduction axes are all odd, ResNet's stem (3 input
//! channels, a 7 × 7 filter), has none, and its u8 × i8 products run as
//! 32-bit multiplies at a quarter of VNNI's rate or less. With the filter's
//! `s` padded from 7 to 8, one in eight products is a zero, and every
//! other product runs on VNNI.
//!
//! The rewrite keeps the op's value: a padded point is a point of the
//! reduction whose product has a factor read past the end of a tensor
//! dimension that the padded axis indexes alone (`w[f, c, r, s]` at `s =
//! 7`), where that read now reads zero (`pad(0)`), and a sum of products
//! with a zero factor adds nothing. Every other read of the axis gets
//! `pad(0)` too where it had no padding, so that none reads out of bounds.

use tilec::diag::Diagnostics;
use tilec::ir::*;
use tilec::pass::{Pass, PassContext, PassDecl, PassOptions};
use tilec::target::Intrinsic;
use tilec::target::mapping::{IntrinsicAxis, Mapping, candidates, contraction};

pub static DECL: PassDecl = PassDecl {
    name: "pad-axes",
    summary: "Pad a contraction's reduction axis to a whole number of dot-intrinsic steps, reading zeros past its end (ResNet's 7 x 7 stem onto VNNI)",
    description: "
For each unscheduled compute op that is a contraction (a `reduce sum` of
the product of two reads, each possibly cast) and that no basic mapping
fits any dot intrinsic the target offers (`vpdpbusd`: 16 lanes by 4
products; `vdpbf16ps`: 16 by 2) as it is, lengthens one reduction axis
to the next multiple of the intrinsic's `k`, so that a mapping fits. The
axis must be the whole index of some dimension of one of the two reads,
of the axis' length (`w[f, c, r, s]` for `s`): that read gets `pad(0)`
and so reads zero at every added point, whose product then adds nothing.
The other reads of the axis get `pad(0)` where they had no padding. Of
the axes that qualify, the one that adds the least work is padded (ties:
the one declared last, innermost in the reads), and only if it adds at
most half. The op's results are the same; the search then finds the
intrinsic's mapping in its space. Ops with a schedule, ops that already
have a fitting mapping, and targets without dot intrinsics are left
alone. Run it before `search`.",
    options: &[],
    statistics: &[("padded", "reduction axes padded")],
    create: |_: &PassOptions| Box::new(PadAxes),
};

/// The most work padding may add: a 3-long axis padded to 4 adds a third.
const MAX_ADDED_WORK: f64 = 0.5;

pub struct PadAxes;

impl Pass for PadAxes {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        let Some(target) = cx.target() else { return Ok(()) };
        let dots: Vec<Intrinsic> = target.offered_intrinsics().filter(|x| x.kind == "dot" && x.k > 1).cloned().collect();
        if dots.is_empty() {
            return Ok(());
        }
        let mut padded = 0;
        for f in &mut module.funcs {
            let ops: Vec<Op> = f.regions[f.body].ops.iter().copied().filter(|&o| f.ops[o].kind.as_compute().is_some_and(|c| c.schedule.is_none())).collect();
            for op in ops {
                if let Some(choice) = padding_for(f, op, &dots) {
                    pad_axis(f, op, choice);
                    padded += 1;
                }
            }
        }
        cx.bump("padded", padded);
        Ok(())
    }
}

/// A reduction axis to lengthen, and its new extent.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Padding {
    axis: AxisId,
    extent: u64,
}

/// The axis `op` should be padded along, if no basic mapping fits a dot
/// intrinsic of `dots` as it is and one fits after padding one axis.
fn padding_for(f: &Function, op: Op, dots: &[Intrinsic]) -> Option<Padding> {
    let con = contraction(f, op).ok()?;
    let c = f.ops[op].kind.as_compute()?;
    let whole = |m: &Mapping, x: &Intrinsic, axis: IntrinsicAxis| m.fused_extent(c, axis) % u64::from(axis.size(x)) == 0;
    let indexed = f.indexed_axes(op);
    // (added work, the axis' declaration index, the padding)
    let mut best: Option<(f64, usize, Padding)> = None;
    for x in dots {
        let Ok(maps) = candidates(c, &con, x) else { continue };
        let basic: Vec<&Mapping> = maps.iter().filter(|m| m.is_basic()).collect();
        if basic.iter().any(|m| IntrinsicAxis::ALL.iter().all(|&a| whole(m, x, a))) {
            return None;
        }
        for m in basic {
            let [k] = m.k[..] else { continue };
            if !whole(m, x, IntrinsicAxis::M) || !whole(m, x, IntrinsicAxis::N) || indexed.contains(&k) {
                continue;
            }
            let extent = c.axis(k).extent;
            let step = u64::from(x.k);
            let padded = extent.div_ceil(step) * step;
            let added = padded as f64 / extent as f64 - 1.0;
            if added > MAX_ADDED_WORK || !has_zeroing_read(f, op, k, [con.lhs, con.rhs]) {
                continue;
            }
            let key = (added, usize::MAX - k.index());
            if best.as_ref().is_none_or(|(w, i, _)| key < (*w, *i)) {
                best = Some((key.0, key.1, Padding { axis: k, extent: padded }));
            }
        }
    }
    best.map(|(_, _, p)| p)
}

/// Does a read among `reads` (body reads) index a dimension of the axis'
/// length with exactly `axis`, with no padding or zero padding? Past the
/// axis' end it then reads zero once padded.
fn has_zeroing_read(f: &Function, op: Op, axis: AxisId, reads: [usize; 2]) -> bool {
    let Some(c) = f.ops[op].kind.as_compute() else { return false };
    let extent = c.axis(axis).extent;
    reads.into_iter().any(|r| {
        let read = &c.reads[r];
        let Some(t) = f.value_type(f.ops[op].operands[r]).as_tensor() else { return false };
        let zero_pad = read.pad.is_none_or(|p| is_zero(p));
        zero_pad && read.indices.iter().zip(&t.shape).any(|(e, &dim)| e.is_var(axis) && dim == extent)
    })
}

fn is_zero(p: Literal) -> bool {
    match p {
        Literal::Int(i) => i == 0,
        Literal::Float(x) => x == 0.0,
    }
}

/// Lengthens `p.axis` of `op` and gives every read that uses it padding.
fn pad_axis(f: &mut Function, op: Op, p: Padding) {
    let elems: Vec<Option<ElemType>> = f.ops[op].operands.iter().map(|&v| f.value_type(v).as_tensor().map(|t| t.elem)).collect();
    let OpKind::Compute(c) = &mut f.ops[op].kind else { return };
    c.axes[p.axis.index()].extent = p.extent;
    let body_reads = c.reads.len();
    for (i, read) in c.reads.iter_mut().chain(c.epilogue_reads.iter_mut()).enumerate() {
        // Epilogue reads cannot index a reduction axis.
        if i >= body_reads || read.pad.is_some() || !read.indices.iter().any(|e| e.uses(p.axis)) {
            continue;
        }
        read.pad = elems[i].map(|e| if e.is_int() { Literal::Int(0) } else { Literal::Float(0.0) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{check_equivalent, parse};

    const STEM: &str = r#"
func @stem(%x: tensor<1x3x20x20xu8>, %w: tensor<32x3x7x7xi8>) -> tensor<1x32x10x10xi32> {
  %y = compute "conv2d_int8" (n: 1, f: 32, oh: 10, ow: 10) reduce sum (c: 3, r: 7, s: 7)
      reads(%xv = %x[n, c, oh * 2 + r - 3, ow * 2 + s - 3] pad(0), %wv = %w[f, c, r, s]) -> tensor<1x32x10x10xi32>[n, f, oh, ow] {
    %a = cast %xv : u8 -> i32
    %b = cast %wv : i8 -> i32
    %0 = mul %a, %b : i32
    yield %0 : i32
  }
  return %y
}
"#;

    /// `pad-axes` on `src` for `target`, checked to keep the results (and
    /// to verify and print back); the output's text.
    fn padded(target: &str, src: &str) -> String {
        let t = tilec::target::builtin(target).expect("a built-in target");
        let after = check_equivalent(&parse(src), &t, &mut [&mut PadAxes], 7);
        tilec::syntax::print_module(&after)
    }

    #[test]
    fn the_stem_pads_its_filter_width_onto_vnni_and_keeps_its_value() {
        let text = padded("x86-avx512", STEM);
        // s (7 -> 8) adds the least work, with r; s is declared last. The
        // weights index it alone and read zero past 7; the input already
        // had padding.
        assert!(text.contains("reduce sum (c: 3, r: 7, s: 8)"), "{text}");
        assert!(text.contains("%wv = %w[f, c, r, s] pad(0)"), "{text}");
        // A second run finds a mapping that fits and changes nothing.
        assert_eq!(padded("x86-avx512", &text), text);
        // With a 3 x 3 filter, c, r and s (3 -> 4) each add a third: s,
        // declared last, is padded.
        let small = STEM.replace("32x3x7x7", "32x3x3x3").replace("r: 7, s: 7", "r: 3, s: 3").replace("r - 3", "r - 1").replace("s - 3", "s - 1");
        assert!(padded("x86-avx512", &small).contains("reduce sum (c: 3, r: 3, s: 4)"));
    }

    #[test]
    fn nothing_is_padded_without_a_dot_intrinsic_or_where_a_mapping_fits() {
        // x86-avx2 offers no u8 x i8 dot product.
        let stem = tilec::syntax::print_module(&parse(STEM));
        assert_eq!(padded("x86-avx2", STEM), stem);
        // 64 input channels: k = [c] fits VNNI as it is.
        let fits = STEM.replace("3x20x20", "64x20x20").replace("32x3x7x7", "32x64x7x7").replace("(c: 3,", "(c: 64,");
        assert_eq!(padded("x86-avx512", &fits), tilec::syntax::print_module(&parse(&fits)));
    }

    #[test]
    fn a_read_with_nonzero_padding_cannot_zero_the_added_points() {
        // Every reduction axis is indexed alone only by reads padded with
        // 1: past the end they would add products of 1.
        let src = STEM.replace("ow * 2 + s - 3] pad(0)", "ow * 2 + s - 3] pad(1)").replace("%w[f, c, r, s]", "%w[f, c, r, s] pad(1)");
        assert_eq!(padded("x86-avx512", &src), tilec::syntax::print_module(&parse(&src)));
    }
}
