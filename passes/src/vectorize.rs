//! `vectorize`: runs the innermost loop of the schedule's vector axis on
//! vector lanes.

use crate::nest::{for_loop, induction_var, kernels, rewrite_index_exprs, subtree, tagged_loops};
use tilec::diag::{Diagnostic, Diagnostics};
use tilec::ir::builder::Cursor;
use tilec::ir::*;
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};

pub static DECL: PassDecl = PassDecl {
    name: "vectorize",
    summary: "Run the vector axis' innermost loop on vector lanes",
    description: "
For every kernel whose schedule names a vector axis and width (`vector =
{j = 8}`), or for the axis and width given as options, splits each
innermost (`point`) loop of that axis into a loop over vectors and a
`vector` loop of `width` lanes (tagged `<axis>.vector`), rewriting the
index expressions inside. The axis' point loop must be the innermost loop
of its nest (`tile` puts the vector axis' point loop there, spatial or
reduction) and its trip count, after `vthread`, a multiple of the width; otherwise
the pass reports an error. (The verifier checks only that the width divides
the axis' innermost tile.)",
    options: &[
        OptionDecl { name: "axis", kind: OptionKind::Str, default: "", help: "the axis to vectorise (empty: each kernel's schedule)" },
        OptionDecl { name: "width", kind: OptionKind::UInt, default: "8", help: "vector lanes when `axis` is given" },
    ],
    statistics: &[("vectorized", "loops turned into vector loops")],
    create: |o: &PassOptions| Box::new(Vectorize { axis: o.str("axis").to_string(), width: o.uint("width") }),
};

pub struct Vectorize {
    axis: String,
    width: u64,
}

impl Pass for Vectorize {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        let mut diags = Diagnostics::new();
        for f in &mut module.funcs {
            for (kernel, schedule) in kernels(f) {
                let (axis, width) = if !self.axis.is_empty() {
                    (self.axis.clone(), self.width)
                } else if let Some((a, w)) = schedule.vector.clone() {
                    (a, w)
                } else {
                    continue;
                };
                let loops = tagged_loops(f, kernel, &axis, &TagLevel::Point);
                if loops.is_empty() && width > 1 {
                    diags.push(
                        Diagnostic::error(format!("cannot vectorise `{axis}` by {width}: this kernel has no point loop of `{axis}`"))
                            .at(f.op_spans[kernel], "in this kernel")
                            .with_note("an axis has no point loop when its innermost tile, or each virtual thread's share of it, is one point"),
                    );
                    continue;
                }
                for lp in loops {
                    match vectorize_loop(f, lp, &axis, width) {
                        Ok(()) => cx.bump("vectorized", 1),
                        Err(d) => {
                            // The other point loops of the axis fail alike.
                            diags.push(d);
                            break;
                        }
                    }
                }
            }
        }
        diags.into_result()
    }
}

fn vectorize_loop(f: &mut Function, lp: Op, axis: &str, width: u64) -> Result<(), Diagnostic> {
    let span = f.op_spans[lp];
    let l = for_loop(f, lp).expect("tagged loop").clone();
    let body = f.ops[lp].regions[0];
    if f.regions[body].ops.iter().any(|&o| subtree(f, o).into_iter().chain([o]).any(|x| for_loop(f, x).is_some())) {
        return Err(Diagnostic::error(format!("cannot vectorise `{axis}`: its innermost loop is not the innermost loop of the nest"))
            .at(span, "loops inside")
            .with_help("vectorise the last spatial axis (the one that varies fastest in memory)"));
    }
    if width == 0 || l.extent % width != 0 {
        // Virtual threads of the axis share its innermost tile out.
        let vthreads = f.ancestors(lp).into_iter().find_map(|a| {
            for_loop(f, a).filter(|x| x.tag.as_ref().is_some_and(|t| t.axis == axis && t.level == TagLevel::VThread)).map(|x| x.extent)
        });
        let help = match vthreads {
            Some(v) => format!("the innermost tile of `{axis}` is split into {v} virtual threads: make it a multiple of {v} x {width}"),
            None => format!("make the innermost tile of `{axis}` a multiple of {width}"),
        };
        return Err(Diagnostic::error(format!("cannot vectorise `{axis}` by {width}: its innermost loop runs {} iterations", l.extent))
            .at(span, "not a multiple of the width")
            .with_help(help));
    }
    let old_iv = induction_var(f, lp);
    let reduction = l.tag.as_ref().is_some_and(|t| t.reduction);
    let tag = LoopTag { axis: axis.to_string(), level: TagLevel::Vector, reduction };
    if l.extent == width {
        if let OpKind::For(x) = &mut f.ops[lp].kind {
            x.mapping = Mapping::Vector;
            x.tag = Some(tag);
        }
        return Ok(());
    }
    // point → (outer over vectors, inner lanes): iv = outer * width + lane.
    if let OpKind::For(x) = &mut f.ops[lp].kind {
        x.extent = l.extent / width;
    }
    let ops = std::mem::take(&mut f.regions[body].ops);
    let (vec_op, vec_body, lane) =
        f.build_for(Cursor::end(body), width, Mapping::Vector, Some(tag), &format!("{axis}_lane"), span);
    for &o in &ops {
        f.ops[o].parent = vec_body;
    }
    f.regions[vec_body].ops = ops;
    let replacement = AffineExpr::from_parts([(old_iv, width as i64), (lane, 1)], 0, 1).expect("small");
    let inside = subtree(f, vec_op);
    rewrite_index_exprs(f, &inside, |e| e.substitute(|v| if v == old_iv { replacement.clone() } else { AffineExpr::var(v) }).expect("small"));
    Ok(())
}
