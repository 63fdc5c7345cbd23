//! `bind`: maps the loops of each kernel to the hardware, as the target's
//! tile levels say: spatial loops of a `grid` level become GPU blocks, of a
//! `threads` level GPU threads, of a `parallel` level CPU cores.

use crate::nest::{for_loop, kernels, subtree, target_for};
use tilec::diag::Diagnostics;
use tilec::ir::*;
use tilec::pass::{Pass, PassContext, PassDecl, PassOptions};
use tilec::target::Binding;

pub static DECL: PassDecl = PassDecl {
    name: "bind",
    summary: "Map loops to GPU blocks and threads or CPU cores",
    description: "
For every kernel, gives the loops made for each tile level the binding the
target declares for it: `grid` levels become `block.x/y/z` loops, `threads`
levels `thread.x/y/z` loops (the innermost axis gets `x`; a level with more
than three loops keeps the outer extra ones serial), `parallel` levels
`parallel` loops (directly nested parallel loops form one parallel region;
a core loop with other ops beside it in the outer core loop's body stays
serial, with every core loop inside it).
Reduction loops stay serial. After `bind`, thread loops run concurrently:
barriers synchronise them and a missing barrier is a race.",
    options: &[],
    statistics: &[("bound", "loops given a hardware mapping")],
    create: |_: &PassOptions| Box::new(Bind),
};

pub struct Bind;

impl Pass for Bind {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        let mut diags = Diagnostics::new();
        for f in &mut module.funcs {
            for (kernel, schedule) in kernels(f) {
                let target = match target_for(cx, &schedule.target, f.op_spans[kernel]) {
                    Ok(t) => t,
                    Err(d) => {
                        diags.push(d);
                        continue;
                    }
                };
                let loops: Vec<Op> = subtree(f, kernel).into_iter().filter(|&o| for_loop(f, o).is_some()).collect();
                for level in &target.tile_levels {
                    // The loops of this level that carry a spatial axis (the
                    // reduction axes of a level are never bound).
                    let mut level_loops: Vec<Op> = loops
                        .iter()
                        .copied()
                        .filter(|&o| {
                            for_loop(f, o).and_then(|l| l.tag.as_ref()).is_some_and(|t| t.level.tile() == Some(level.name.as_str()) && !t.reduction)
                        })
                        .collect();
                    // Outermost first: loops of one level are directly nested.
                    level_loops.sort_by_key(|&o| f.ancestors(o).len());
                    let n = level_loops.len();
                    let mut outer_parallel: Option<Op> = None;
                    for (k, &o) in level_loops.iter().enumerate() {
                        let from_inner = (n - 1 - k) as u8;
                        let mapping = match level.binding {
                            Binding::Grid if from_inner < 3 => Mapping::Block(from_inner),
                            Binding::Threads if from_inner < 3 => Mapping::Thread(from_inner),
                            // Parallel loops form one region only when each is
                            // the sole op of the one outside it (the
                            // verifier's rule); a core loop with other ops
                            // beside it (a hand-written kernel) and every
                            // core loop inside it stay serial.
                            Binding::Parallel if outer_parallel.is_none_or(|outer| directly_inside(f, o, outer)) => Mapping::Parallel,
                            Binding::Parallel => break,
                            _ => continue,
                        };
                        if mapping == Mapping::Parallel {
                            outer_parallel = Some(o);
                        }
                        if let OpKind::For(l) = &mut f.ops[o].kind {
                            if l.mapping == Mapping::Serial {
                                l.mapping = mapping;
                                cx.bump("bound", 1);
                            }
                        }
                    }
                }
            }
        }
        diags.into_result()
    }
}

/// Is loop `inner` the only op of the body of loop `outer`?
fn directly_inside(f: &Function, inner: Op, outer: Op) -> bool {
    let region = &f.regions[f.ops[inner].parent];
    region.owner == Some(outer) && region.ops.len() == 1
}
