//! The scheduling passes together, checked against the interpreter on
//! GPU-like and CPU-like targets.

use crate::testing::*;
use crate::{bind, cache, tile, unroll, vectorize, vthread};
use tilec::interp::run_function;
use tilec::ir::*;
use tilec::pass::{Pass, PassDecl, PassOptions};

const GEMM: &str = "func @gemm(%A: tensor<30x12xf32>, %B: tensor<12x20xf32>, %bias: tensor<20xf32>) -> tensor<30x20xf32> {
  %C = compute \"gemm\" (i: 30, j: 20) reduce sum (k: 12)
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<30x20xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  } epilogue(%acc) reads(%bv = %bias[j]) {
    %1 = add %acc, %bv : f32
    %2 = relu %1 : f32
    yield %2 : f32
  }
  return %C
}";

/// A pass with its default options, built through its declaration.
fn make(decl: &PassDecl) -> Box<dyn Pass> {
    (decl.create)(&PassOptions::defaults(decl.options))
}

type Passes = (Box<dyn Pass>, Box<dyn Pass>, Box<dyn Pass>, Box<dyn Pass>, Box<dyn Pass>, Box<dyn Pass>);

fn passes() -> Passes {
    (make(&tile::DECL), make(&cache::DECL), make(&vthread::DECL), make(&bind::DECL), make(&unroll::DECL), make(&vectorize::DECL))
}

fn gpu_schedule() -> Schedule {
    let mut s = schedule("test-gpu", &[("i", &[16, 4]), ("j", &[8, 4]), ("k", &[4, 2])]);
    s.vthreads = vec![("i".into(), 2), ("j".into(), 2)];
    s.cache = vec![
        CacheDirective { read: 0, read_name: "a".into(), level: "shared".into() },
        CacheDirective { read: 1, read_name: "b".into(), level: "shared".into() },
    ];
    s.unroll = 8;
    s
}

fn count(f: &Function, pred: impl Fn(&OpKind) -> bool) -> usize {
    f.walk().into_iter().filter(|&o| pred(&f.ops[o].kind)).count()
}

#[test]
fn gpu_pipeline_gives_the_same_answer_and_the_expected_structure() {
    let mut m = parse(GEMM);
    set_schedule(&mut m, gpu_schedule());
    let (mut t, mut c, mut v, mut b, mut u, mut vec) = passes();
    let out = check_equivalent(&m, &target(GPU), &mut [&mut *t, &mut *c, &mut *v, &mut *b, &mut *u, &mut *vec], 7);
    let f = &out.funcs[0];
    assert_eq!(count(f, |k| matches!(k, OpKind::For(l) if matches!(l.mapping, Mapping::Block(_)))), 2, "two grid dimensions");
    assert_eq!(count(f, |k| matches!(k, OpKind::For(l) if matches!(l.mapping, Mapping::Thread(_)))), 2, "two thread dimensions");
    assert_eq!(count(f, |k| matches!(k, OpKind::For(l) if l.mapping == Mapping::VThread)), 4, "vthreads in both nests");
    assert_eq!(count(f, |k| matches!(k, OpKind::Copy(c) if c.cooperative)), 2, "cooperative copies of both reads");
    assert!(count(f, |k| *k == OpKind::Barrier) >= 2);
    let shared = f.walk().into_iter().filter(|&o| matches!(f.ops[o].kind, OpKind::Alloc) && f.value_type(f.result(o)).as_buffer().is_some_and(|b| b.scope == MemScope::Shared)).count();
    assert_eq!(shared, 2);
    // `unroll` counts a vthread loop's iterations: the nest of the i point
    // loop (2 x j vthreads 2 x j points 2) fits the schedule's 8.
    assert!(count(f, |k| matches!(k, OpKind::For(l) if l.mapping == Mapping::Unroll)) >= 2, "{}", tilec::syntax::print_module(&out));
}

#[test]
fn every_pass_alone_after_tile_preserves_semantics() {
    for pass_index in 0..5 {
        let mut m = parse(GEMM);
        set_schedule(&mut m, gpu_schedule());
        let (mut t, mut c, mut v, mut b, mut u, _) = passes();
        let mut chosen: Vec<&mut dyn Pass> = vec![&mut *t];
        match pass_index {
            0 => {}
            1 => chosen.push(&mut *c),
            2 => chosen.push(&mut *v),
            3 => chosen.push(&mut *b),
            _ => chosen.push(&mut *u),
        }
        check_equivalent(&m, &target(GPU), &mut chosen, 11 + pass_index as u64);
    }
}

#[test]
fn a_missing_barrier_is_reported_as_a_race() {
    let mut m = parse(GEMM);
    set_schedule(&mut m, gpu_schedule());
    let (mut t, mut c, _, mut b, _, _) = passes();
    let staged = check_equivalent(&m, &target(GPU), &mut [&mut *t, &mut *c, &mut *b], 3);
    let barriers: Vec<Op> = staged.funcs[0].walk().into_iter().filter(|&o| staged.funcs[0].ops[o].kind == OpKind::Barrier).collect();
    assert_eq!(barriers.len(), 2, "both reads are staged behind one pair of barriers");
    // Without the barrier after the copies, threads read what others copied
    // in the same phase; without the one after the use, the next copy
    // overwrites what others still read.
    for (which, expect) in [(0, "data race"), (1, "data race")] {
        let mut out = staged.clone();
        let f = &mut out.funcs[0];
        f.remove_op(barriers[which]);
        let err = run_function(&out.funcs[0], &inputs(&out, 3)).unwrap_err();
        assert!(err.0.contains(expect), "{err}");
        assert!(err.0.contains("barrier"), "the message points at the barrier: {err}");
    }
}

#[test]
fn cpu_pipeline_with_packing_and_vectors() {
    let mut m = parse(GEMM);
    let mut s = schedule("test-cpu", &[("i", &[16, 8, 4]), ("j", &[20, 20, 4]), ("k", &[12, 4, 2])]);
    s.cache = vec![
        CacheDirective { read: 1, read_name: "b".into(), level: "l2".into() },
        CacheDirective { read: 0, read_name: "a".into(), level: "l1".into() },
    ];
    s.vector = Some(("j".into(), 4));
    s.unroll = 16;
    set_schedule(&mut m, s);
    let (mut t, mut c, mut v, mut b, mut u, mut vec) = passes();
    let out = check_equivalent(&m, &target(CPU), &mut [&mut *t, &mut *c, &mut *v, &mut *b, &mut *vec, &mut *u], 9);
    let f = &out.funcs[0];
    assert!(count(f, |k| matches!(k, OpKind::For(l) if l.mapping == Mapping::Parallel)) >= 1);
    assert!(count(f, |k| matches!(k, OpKind::For(l) if l.mapping == Mapping::Vector)) >= 1);
    assert_eq!(count(f, |k| matches!(k, OpKind::Copy(c) if !c.cooperative)), 2);
    // `unroll` after `vectorize`: a vector loop is one step, so the point
    // loops around it (4 rows of one vector) are unrolled.
    assert!(count(f, |k| matches!(k, OpKind::For(l) if l.mapping == Mapping::Unroll && l.tag.as_ref().is_some_and(|t| t.axis == "i" && t.level == TagLevel::Point))) >= 1, "{}", tilec::syntax::print_module(&out));
}

#[test]
fn vthreads_on_an_untiled_axis() {
    // An axis the schedule does not tile is one tile of its extent; its
    // point loop splits like any other (the verifier accepts the schedule,
    // so `vthread` must too).
    let src = "func @f(%A: tensor<8x12xf32>, %B: tensor<12x20xf32>) -> tensor<8x20xf32> {
  %C = compute (i: 8, j: 20) reduce sum (k: 12) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<8x20xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}";
    for (t, tiles) in [(GPU, &[("j", &[10u64, 2][..]), ("k", &[4, 2])][..]), (CPU, &[("j", &[20, 10, 5]), ("k", &[12, 6, 3])])] {
        let t = target(t);
        let mut m = parse(src);
        let mut s = schedule(&t.name, tiles);
        s.vthreads = vec![("i".into(), 2)];
        set_schedule(&mut m, s);
        let (mut tp, _, mut v, mut b, _, _) = passes();
        let out = check_equivalent(&m, &t, &mut [&mut *tp, &mut *v, &mut *b], 21);
        let f = &out.funcs[0];
        assert_eq!(count(f, |k| matches!(k, OpKind::For(l) if l.mapping == Mapping::VThread)), 2, "{}", tilec::syntax::print_module(&out));
    }
}
