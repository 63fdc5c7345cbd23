//! Property test: random valid schedules, for every target kind, on tiny
//! instances of every op kind; the interpreter's answer must not change
//! through any scheduling pass, alone or in the whole pipeline.

use crate::samples::*;
use crate::testing::*;
use crate::{bind, cache, hoist_guards, prepack, tile, unroll, vectorize, vthread};
use proptest::prelude::*;
use std::sync::Arc;
use tilec::pass::{Pass, PassDecl, PassOptions};
use tilec::target::Target;

fn make(decl: &PassDecl) -> Box<dyn Pass> {
    (decl.create)(&PassOptions::defaults(decl.options))
}

/// The targets schedules are drawn for: the small test targets and the
/// built-in `sm90` and `x86-avx2` (real capacities, `l3` staging at the
/// core level, `local` registers on the GPU).
fn some_target(which: usize) -> Arc<Target> {
    match which {
        0 => target(GPU),
        1 => target(CPU),
        2 => tilec::target::builtin("sm90").expect("built-in target"),
        _ => tilec::target::builtin("x86-avx2").expect("built-in target"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn random_schedules_preserve_semantics(op in 0..OPS.len(), which in 0usize..4, seed in any::<u64>(), subset in 0u32..128, weights in any::<bool>()) {
        let t = some_target(which);
        let mut m = parse(OPS[op]);
        // Half the cases read their operands but the first as a network's
        // weights (`prepack` moves their staged copies).
        if weights {
            params_as_weights(&mut m);
        }
        // A valid schedule: draw until one passes the target's limits.
        let mut choices = Choices::new(seed);
        let mut tries = 0;
        loop {
            let s = random_schedule(&m, &t, &mut choices);
            set_schedule(&mut m, s);
            name_reads(&mut m);
            if !tilec::verify::verify_module_with(&m, Some(&t)).has_errors() {
                break;
            }
            tries += 1;
            prop_assume!(tries < 50);
        }
        // `tile`, then a random subset of the other passes in pipeline order
        // (all of them for subset 127).
        let decls = [&cache::DECL, &vthread::DECL, &bind::DECL, &vectorize::DECL, &prepack::DECL, &unroll::DECL, &hoist_guards::DECL];
        let mut passes: Vec<Box<dyn Pass>> = vec![make(&tile::DECL)];
        passes.extend(decls.iter().enumerate().filter(|(i, _)| subset & (1 << i) != 0).map(|(_, d)| make(d)));
        let mut refs: Vec<&mut (dyn Pass + 'static)> = passes.iter_mut().map(|p| &mut **p).collect();
        check_equivalent(&m, &t, &mut refs, seed);
    }
}

#[test]
fn debug_case() {
    let var = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let (Some(op), Some(seed), Some(subset), Some(which)) = (var("OP"), var("SEED"), var("SUBSET"), var("TARGET")) else { return };
    let t = some_target(which as usize);
    let mut m = parse(OPS[op as usize]);
    if var("WEIGHTS") == Some(1) {
        params_as_weights(&mut m);
    }
    let s = random_schedule(&m, &t, &mut Choices::new(seed));
    eprintln!("{s:?}");
    set_schedule(&mut m, s);
    name_reads(&mut m);
    let decls = [&cache::DECL, &vthread::DECL, &bind::DECL, &vectorize::DECL, &prepack::DECL, &unroll::DECL, &hoist_guards::DECL];
    let mut passes: Vec<Box<dyn Pass>> = vec![make(&tile::DECL)];
    passes.extend(decls.iter().enumerate().filter(|(i, _)| subset & (1 << i) != 0).map(|(_, d)| make(d)));
    let mut refs: Vec<&mut (dyn Pass + 'static)> = passes.iter_mut().map(|p| &mut **p).collect();
    check_equivalent(&m, &t, &mut refs, seed);
}
