//! The evaluator isolates candidates: a kernel that crashes, hangs or
//! computes the wrong thing is a failed measurement, and the next
//! candidate is measured as usual.

use std::path::PathBuf;
use std::time::Duration;
use tilec::ir::Module;
use tilec::measure::{Evaluator, Failure};
use tilec_codegen::LlvmTarget;
use tilec_codegen::evaluator::WorkerEvaluator;

fn parse(src: &str) -> Module {
    let (m, sm) = tilec::syntax::parse_str("test.tile", src).unwrap_or_else(|(d, sm)| panic!("{}", sm.render(&d.0)));
    let d = tilec::verify::verify_module(&m);
    assert!(!d.has_errors(), "{}", sm.render(&d.0));
    m
}

const REFERENCE: &str = "func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %y = compute (i: 64) reads(%a = %x[i]) -> tensor<64xf32>[i] {
    %c = const 3.0 : f32
    %0 = mul %a, %c : f32
    yield %0 : f32
  }
  return %y
}";

/// A loop-level candidate for @f whose loop body is `body`.
fn candidate(extent: u64, body: &str) -> Module {
    parse(&format!(
        "func @f(%x: tensor<64xf32>) -> tensor<64xf32> {{
  %y = alloc : buffer<64xf32, global>
  kernel schedule \"x86-avx2\" {{}} {{
    for %i = 0 to {extent} {{
{body}
    }}
  }}
  return %y
}}"
    ))
}

fn good() -> Module {
    candidate(64, "      %a = load %x[%i] : f32\n      %c = const 3.0 : f32\n      %0 = mul %a, %c : f32\n      store %0, %y[%i]")
}

fn evaluator() -> WorkerEvaluator {
    let worker = PathBuf::from(env!("CARGO_BIN_EXE_tilec-worker"));
    let dir = std::env::temp_dir().join(format!("tilec-eval-test-{}", std::process::id()));
    let mut e = WorkerEvaluator::new(LlvmTarget::host(), worker, dir);
    e.timeout = Duration::from_secs(3);
    e.repeat = 3;
    e.set_reference_from(&parse(REFERENCE), "f").expect("reference");
    e
}

#[test]
fn a_correct_candidate_is_timed() {
    let mut e = evaluator();
    let t = e.evaluate(&good(), "f").expect("measured");
    // At least `repeat` runs; more until 50 ms of runs (at most 1000).
    assert!((3..=tilec_runtime::worker::MAX_RUNS as u64).contains(&(t.runs as u64)), "{} runs", t.runs);
    assert!(t.min_s <= t.median_s && t.median_s <= t.max_s);
}

#[test]
fn crashes_hangs_and_wrong_results_fail_one_candidate_only() {
    let mut e = evaluator();
    // A store a long way out of the buffer: the worker dies of a signal.
    let crash = candidate(64, "      %a = load %x[%i] : f32\n      if %i < 64 {\n        store %a, %y[%i * 1000000000000]\n      }");
    match e.evaluate(&crash, "f") {
        Err(Failure::Crash(msg)) => assert!(msg.contains("signal") || msg.contains("exit status"), "{msg}"),
        other => panic!("expected a crash, got {other:?}"),
    }
    // 10^13 iterations: it runs past the limit and is stopped.
    let hang = candidate(10_000_000_000_000, "      %a = load %y[0] : f32\n      %b = load %x[0] : f32\n      %0 = add %a, %b : f32\n      store %0, %y[0]");
    match e.evaluate(&hang, "f") {
        Err(Failure::Timeout(s)) => assert!((2.9..=3.1).contains(&s), "{s}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    // It computes 2x where 3x is expected.
    let wrong = candidate(64, "      %a = load %x[%i] : f32\n      %c = const 2.0 : f32\n      %0 = mul %a, %c : f32\n      store %0, %y[%i]");
    match e.evaluate(&wrong, "f") {
        Err(Failure::WrongResult(msg)) => assert!(msg.contains("max abs err"), "{msg}"),
        other => panic!("expected a wrong result, got {other:?}"),
    }
    // A compute op nobody scheduled cannot be compiled.
    match e.evaluate(&parse(REFERENCE), "f") {
        Err(Failure::Compile(msg)) => assert!(msg.contains("tile it"), "{msg}"),
        other => panic!("expected a compile error, got {other:?}"),
    }
    // And the evaluator goes on measuring.
    assert!(e.evaluate(&good(), "f").is_ok());
}

#[test]
fn slow_candidates_are_cut_off_once_a_fast_one_is_known() {
    let mut e = evaluator();
    e.timeout = Duration::from_secs(20);
    assert!(e.evaluate(&good(), "f").is_ok());
    // The fast candidate takes microseconds, so the next one gets the
    // floor of one second, not the 20 s timeout.
    let slow = candidate(10_000_000_000_000, "      %a = load %y[0] : f32\n      %b = load %x[0] : f32\n      %0 = add %a, %b : f32\n      store %0, %y[0]");
    match e.evaluate(&slow, "f") {
        Err(Failure::Timeout(s)) => assert!((0.9..=1.5).contains(&s), "{s}"),
        other => panic!("expected a cut-off, got {other:?}"),
    }
    // A new op starts afresh.
    e.new_op();
    e.cutoff_factor = 0.0;
    e.timeout = Duration::from_secs(2);
    match e.evaluate(&slow, "f") {
        Err(Failure::Timeout(s)) => assert!((1.9..=2.5).contains(&s), "{s}"),
        other => panic!("expected the full timeout, got {other:?}"),
    }
}

#[test]
fn timing_goes_on_until_its_minimum_time() {
    let mut e = evaluator();
    e.repeat = 1;
    // 200 ms, not less: on a loaded 2-core machine one run of this
    // microsecond kernel once took over 10 ms (a first run's page faults,
    // a descheduled thread).
    e.min_time_s = 0.2;
    let t = e.evaluate(&good(), "f").expect("measured");
    assert!(t.runs > 1, "a kernel of microseconds runs more than once in 200 ms: {} runs", t.runs);
    e.min_time_s = 0.0;
    let t = e.evaluate(&good(), "f").expect("measured");
    assert_eq!(t.runs, 1, "without a minimum time, `repeat` runs");
}

#[test]
fn timing_stops_once_its_budget_is_spent() {
    let mut e = evaluator();
    e.time_budget_s = 0.0;
    let t = e.evaluate(&good(), "f").expect("measured");
    assert_eq!(t.runs, 1, "one run spends a zero budget");
}

/// A GPU candidate (the sm90 GEMM example, scheduled by the default
/// pipeline's passes after `search`) goes to a worker as PTX: measured
/// where the CUDA driver sees a GPU, else one failed measurement that
/// says why, never a crash of the tuner.
#[test]
fn a_cuda_candidate_is_measured_in_a_worker_or_fails_with_the_reason() {
    let target = tilec::target::builtin("sm90").expect("sm90");
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/gemm_sm90.tile")).expect("example");
    let mut m = parse(&src);
    let pipeline = "builtin.module(tile,cache,vthread,bind,vectorize,tensorize,unroll,hoist-guards)";
    let registry = tilec_codegen::registry();
    let mut sm = tilec::diag::SourceMap::new();
    let file = sm.add("<pipeline>", pipeline);
    let p = tilec::pass::parse_pipeline(pipeline, file, &registry).unwrap_or_else(|d| panic!("{}", sm.render(&d.0)));
    let mut pm = tilec::pass::PassManager::new(p);
    pm.set_target(target.clone());
    pm.run(&mut m).unwrap_or_else(|d| panic!("{}", sm.render(&d.0)));
    let worker = PathBuf::from(env!("CARGO_BIN_EXE_tilec-worker"));
    let dir = std::env::temp_dir().join(format!("tilec-eval-cuda-test-{}", std::process::id()));
    let machine = tilec_codegen::evaluator::Machine::Cuda(Box::new((*target).clone()));
    let mut e = WorkerEvaluator::for_machine(machine, worker, dir);
    e.repeat = 3;
    let func = m.funcs[0].name.clone();
    match (tilec_runtime::cuda::driver_status(), e.evaluate(&m, &func)) {
        (Ok(_), Ok(t)) => assert!(t.runs >= 3 && t.median_s > 0.0, "{t:?}"),
        (Ok(gpu), Err(f)) => panic!("a GPU is here ({gpu}) but the candidate failed: {f:?}"),
        (Err(why), Err(Failure::Crash(message))) => assert!(message.contains(&why), "{message}"),
        (Err(why), other) => panic!("no GPU here ({why}), yet: {other:?}"),
    }
}
