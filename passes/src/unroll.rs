//! `unroll`: marks small innermost loop nests for unrolling.

use crate::nest::{for_loop, kernels, subtree};
use tilec::diag::Diagnostics;
use tilec::ir::*;
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions};

pub static DECL: PassDecl = PassDecl {
    name: "unroll",
    summary: "Mark small innermost loop nests to be unrolled",
    description: "
Marks `unroll` every serial loop whose nest (the loop and the loops inside
it) runs at most `max-steps` iterations in total and contains no barrier,
no allocation and no copy, so code generation emits straight-line code
(register tiles stay in registers). A `vector` loop inside counts as one
step (one vector instruction), a `vthread` loop as its iterations. The limit comes from the option, or else from
each kernel's schedule (`unroll = N`); 0 disables it.",
    options: &[OptionDecl { name: "max-steps", kind: OptionKind::Int, default: "-1", help: "largest nest to unroll; -1 takes each kernel's schedule" }],
    statistics: &[("unrolled", "loops marked unroll")],
    create: |o: &PassOptions| Box::new(Unroll { max_steps: o.int("max-steps") }),
};

pub struct Unroll {
    max_steps: i64,
}

/// Total iterations of the nest rooted at loop `op`, or `None` if it holds
/// something that must not be unrolled. A `vector` loop is one step (its
/// lanes are one vector instruction); a `vthread` loop counts its
/// iterations (code generation unrolls virtual threads anyway); loops
/// mapped to hardware (blocks, threads, cores) are never unrolled.
fn nest_steps(f: &Function, op: Op) -> Option<u64> {
    let l = for_loop(f, op)?;
    match l.mapping {
        Mapping::Serial | Mapping::Unroll | Mapping::VThread => {}
        Mapping::Vector => return Some(1),
        _ => return None,
    }
    let mut inner = 1u64;
    for &o in &f.regions[f.ops[op].regions[0]].ops {
        match &f.ops[o].kind {
            OpKind::For(_) => inner = inner.max(nest_steps(f, o)?),
            OpKind::Barrier | OpKind::Alloc | OpKind::Copy(_) | OpKind::Kernel(_) => return None,
            OpKind::If(_) => {
                for &x in &f.regions[f.ops[o].regions[0]].ops {
                    if let OpKind::For(_) = f.ops[x].kind {
                        inner = inner.max(nest_steps(f, x)?);
                    } else if matches!(f.ops[x].kind, OpKind::Barrier | OpKind::Alloc | OpKind::Copy(_)) {
                        return None;
                    }
                }
            }
            _ => {}
        }
    }
    l.extent.checked_mul(inner)
}

impl Pass for Unroll {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        for f in &mut module.funcs {
            for (kernel, schedule) in kernels(f) {
                let limit = if self.max_steps >= 0 { self.max_steps as u64 } else { schedule.unroll };
                if limit == 0 {
                    continue;
                }
                for o in subtree(f, kernel) {
                    if nest_steps(f, o).is_some_and(|n| n <= limit) {
                        if let OpKind::For(l) = &mut f.ops[o].kind {
                            if l.mapping == Mapping::Serial && l.extent > 1 {
                                l.mapping = Mapping::Unroll;
                                cx.bump("unrolled", 1);
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
