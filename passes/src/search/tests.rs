//! Tests of the search pass: every strategy's schedules verify and compute
//! what the op computes (through the whole scheduling pipeline, in the
//! interpreter), seeds reproduce, errors are diagnostics, measurement goes
//! through the evaluator and into records.

use super::*;
use crate::testing::{CPU, GPU, check_equivalent, parse, target};
use tilec::measure::{Failure, Timing};
use tilec::target::TargetKind;

mod language;
mod toy;

fn search(strategy: &str, extra: &[(&'static str, &str)]) -> Search {
    let mut o = PassOptions::defaults(DECL.options);
    o.set("strategy", OptionKind::Str.parse(strategy).unwrap());
    for (k, v) in extra {
        let kind = DECL.options.iter().find(|d| d.name == *k).expect("option").kind;
        o.set(k, kind.parse(v).unwrap());
    }
    Search::from_options(&o)
}

fn make(decl: &PassDecl) -> Box<dyn Pass> {
    (decl.create)(&PassOptions::defaults(decl.options))
}

fn targets() -> Vec<Arc<Target>> {
    vec![target(CPU), target(GPU), tilec::target::builtin("x86-avx2").unwrap(), tilec::target::builtin("sm90").unwrap()]
}

/// The scheduling pipeline of the target after `search`, checked against
/// the interpreter by `check_equivalent` (verification after every pass,
/// print → parse → print, the same results).
fn search_and_check(src: &str, t: &Arc<Target>, s: Search) -> Module {
    let m = parse(src);
    let mut passes: Vec<Box<dyn Pass>> = vec![Box::new(s)];
    let order: &[&PassDecl] = if t.kind == TargetKind::Cuda {
        &[&crate::tile::DECL, &crate::cache::DECL, &crate::vthread::DECL, &crate::bind::DECL, &crate::vectorize::DECL, &crate::tensorize::DECL, &crate::unroll::DECL]
    } else {
        &[&crate::tile::DECL, &crate::cache::DECL, &crate::vthread::DECL, &crate::bind::DECL, &crate::vectorize::DECL, &crate::tensorize::DECL, &crate::unroll::DECL, &crate::hoist_guards::DECL]
    };
    passes.extend(order.iter().map(|d| make(d)));
    let mut refs: Vec<&mut (dyn Pass + 'static)> = passes.iter_mut().map(|p| p.as_mut()).collect();
    check_equivalent(&m, t, &mut refs, 3)
}

fn searched(src: &str, t: &Arc<Target>, s: Search) -> (Module, Vec<String>) {
    let mut m = parse(src);
    let mut cx = PassContext::with_target(Some(t.clone()));
    let mut s = s;
    s.run(&mut m, &mut cx).unwrap_or_else(|d| panic!("search failed: {d:?}"));
    let v = tilec::verify::verify_module_with(&m, Some(t));
    assert!(!v.has_errors(), "searched module does not verify: {v:?}\n{}", tilec::syntax::print_module(&m));
    (m, cx.take_reports())
}

#[test]
fn every_strategy_schedules_every_op_kind_correctly() {
    for (i, src) in crate::samples::OPS.iter().enumerate() {
        for t in targets() {
            for strategy in ["markov", "roller", "random"] {
                let s = search(strategy, &[("budget", "300"), ("seed", &i.to_string())]);
                let out = search_and_check(src, &t, s);
                assert!(out.funcs[0].walk().iter().any(|&o| matches!(out.funcs[0].ops[o].kind, OpKind::Kernel(_))), "no kernel for op {i} on {}", t.name);
            }
        }
    }
}

#[test]
fn exhaustive_schedules_small_ops_and_refuses_large_spaces() {
    let gemv = crate::samples::OPS[2];
    for t in targets() {
        search_and_check(gemv, &t, search("exhaustive", &[]));
    }
    let mut m = parse("func @f(%A: tensor<256x256xf32>, %B: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %C = compute (i: 256, j: 256) reduce sum (k: 256) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<256x256xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}");
    let t = tilec::target::builtin("x86-avx2").unwrap();
    let mut cx = PassContext::with_target(Some(t));
    let d = search("exhaustive", &[]).run(&mut m, &mut cx).expect_err("too large");
    let msg = &d.iter().next().unwrap().message;
    assert!(msg.contains("points, more than max-space=100000"), "{msg}");
}

pub(super) const GEMM: &str = "func @gemm(%A: tensor<64x48xf32>, %B: tensor<48x80xf32>) -> tensor<64x80xf32> {
  %C = compute \"gemm\" (i: 64, j: 80) reduce sum (k: 48) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<64x80xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}";

#[test]
fn the_same_seed_gives_the_same_schedule() {
    for t in targets() {
        // Those that measure have their own test of this
        // (`learning_strategies_spend_their_trials_...`): without an
        // evaluator they do not run; `tlm` needs a model (its test:
        // `language::the_tlm_strategy_...`).
        for strategy in STRATEGIES.iter().filter(|s| !s.measures && s.name != "tlm").map(|s| &s.name) {
            let extra: &[(&'static str, &str)] = if *strategy == "exhaustive" { &[("max-space", "100000000")] } else { &[("seed", "42")] };
            if *strategy == "exhaustive" && t.kind == TargetKind::Cpu && t.tile_levels.len() > 2 {
                continue; // too large a space for a unit test
            }
            let a = tilec::syntax::print_module(&searched(GEMM, &t, search(strategy, extra)).0);
            let b = tilec::syntax::print_module(&searched(GEMM, &t, search(strategy, extra)).0);
            assert_eq!(a, b, "{strategy} on {}", t.name);
            assert!(a.contains("schedule"), "{a}");
        }
    }
}

#[test]
fn markov_schedules_are_not_trivial_and_gpu_schedules_stage_and_thread() {
    let sm90 = tilec::target::builtin("sm90").unwrap();
    let (m, reports) = searched(GEMM, &sm90, search("markov", &[]));
    let text = tilec::syntax::print_module(&m);
    assert!(text.contains("cache = {a = shared, b = shared}"), "{text}");
    assert!(reports[0].contains("strategy markov") && reports[0].contains("construction only: measure-top-k=0"), "{}", reports[0]);
    let avx2 = tilec::target::builtin("x86-avx2").unwrap();
    let (m, _) = searched(GEMM, &avx2, search("markov", &[]));
    let f = &m.funcs[0];
    let c = f.walk().into_iter().find_map(|o| f.ops[o].kind.as_compute()).unwrap();
    let s = c.schedule.as_ref().unwrap();
    // Some axis is tiled below its extent, and the last axis is vectorised.
    assert!(s.tiles.iter().any(|(_, t)| t.iter().any(|&x| x > 1)), "{s:?}");
    assert!(s.vector.is_some(), "{s:?}");
}

#[test]
fn search_without_a_target_is_an_error() {
    let mut m = parse(GEMM);
    let mut cx = PassContext::new();
    let d = search("markov", &[]).run(&mut m, &mut cx).expect_err("no target");
    assert!(d.iter().next().unwrap().message.contains("search needs a target"));
}

/// An evaluator that times candidates by the model, with a twist: it
/// prefers schedules with small innermost tiles, so the measured choice
/// differs from the predicted one; every third candidate fails.
struct Fake {
    calls: usize,
    references: usize,
}

impl Evaluator for Fake {
    fn evaluate(&mut self, candidate: &Module, func: &str) -> Measurement {
        self.calls += 1;
        assert!(candidate.func(func).is_some());
        let f = &candidate.funcs[0];
        assert!(f.walk().iter().any(|&o| matches!(f.ops[o].kind, OpKind::Kernel(_))), "a loop-level candidate");
        if self.calls % 3 == 0 {
            return Err(Failure::Crash("fake crash".into()));
        }
        let t = 1e-3 * self.calls as f64;
        Ok(Timing { median_s: t, min_s: t, max_s: t, runs: 1 })
    }

    fn set_reference(&mut self, _: &Module, _: &str) -> Result<(), String> {
        self.references += 1;
        Ok(())
    }
}

/// An evaluator whose first timing is a lucky moment: every candidate has
/// a true time (the second one measured is the fastest), but the very
/// first call answers faster than any.
struct LuckyFirst {
    seen: Vec<String>,
    calls: usize,
}

impl Evaluator for LuckyFirst {
    fn evaluate(&mut self, candidate: &Module, _: &str) -> Measurement {
        self.calls += 1;
        let text = tilec::syntax::print_module(candidate);
        let index = self.seen.iter().position(|s| *s == text).unwrap_or_else(|| {
            self.seen.push(text);
            self.seen.len() - 1
        });
        let t = if self.calls == 1 { 0.9e-3 } else { [1.1e-3, 1.0e-3].get(index).copied().unwrap_or(1.5e-3) };
        Ok(Timing { median_s: t, min_s: t, max_s: t, runs: 1 })
    }
}

#[test]
fn final_rounds_overrule_a_lucky_first_timing() {
    let t = tilec::target::builtin("x86-avx2").unwrap();
    let chosen_and_records = |rounds: &str| {
        let mut m = parse(GEMM);
        let mut cx = PassContext::with_target(Some(t.clone()));
        cx.set_evaluator(Some(Box::new(LuckyFirst { seen: Vec::new(), calls: 0 })));
        search("roller", &[("measure-top-k", "3"), ("final-rounds", rounds)]).run(&mut m, &mut cx).expect("search");
        let f = &m.funcs[0];
        let c = f.walk().into_iter().find_map(|o| f.ops[o].kind.as_compute()).unwrap();
        (RecordSchedule::of(c.schedule.as_ref().unwrap()), cx.take_records(), cx.take_reports().join(""))
    };
    // The first timings alone: the lucky first candidate wins.
    let (chosen, records, _) = chosen_and_records("0");
    assert_eq!(records.len(), 3);
    assert_eq!(chosen, records[0].schedule);
    // Two rounds for the two within 20% (the third is 50% slower): the
    // first one's timings are 0.9, 1.1, 1.1 ms (median 1.1), the second's
    // 1.0 three times; the second wins, and all seven timings are recorded.
    let (chosen, records, report) = chosen_and_records("2");
    assert_eq!(records.len(), 3 + 2 * 2, "{report}");
    assert_eq!(chosen, records[1].schedule, "{report}");
    assert!(report.contains("final rounds: 2 candidates within 20% of the fastest, timed 2 more times each"), "{report}");
    assert!(report.contains("0.9000, 1.1000, 1.1000 ms (median 1.1000)") && report.contains("1.0000, 1.0000, 1.0000 ms (median 1.0000)"), "{report}");
}

#[test]
fn finalists_take_one_of_each_kernel_shape_first() {
    // Near-twins of the fastest ("a") and one other shape ("b") within 20%;
    // "c" is 50% slower. The shape is the name's first letter.
    let first = || vec![(1.00, "a1"), (1.01, "a2"), (1.02, "a3"), (1.15, "b1"), (1.16, "b2"), (1.50, "c1")];
    let names = |max: usize| {
        let mut timed = Vec::new();
        let finalists = crate::search::time_finalists(first(), max, 1, 0.2, |c: &&str| c.as_bytes()[0], |c| {
            timed.push(c.to_string());
            Some(Some(1.0))
        });
        (finalists.iter().map(|(c, times)| format!("{c}:{}", times.len())).collect::<Vec<_>>().join(" "), timed.join(" "))
    };
    // Two: the fastest of each shape, not the fastest twin.
    assert_eq!(names(2), ("a1:2 b1:2".to_string(), "a1 b1".to_string()));
    // Three: then the next fastest of any shape; fastest first timing first.
    assert_eq!(names(3).0, "a1:2 a2:2 b1:2");
    // All within the margin, each once; never "c".
    assert_eq!(names(9).0, "a1:2 a2:2 a3:2 b1:2 b2:2");
    // One candidate alone has no final rounds.
    assert!(crate::search::time_finalists(vec![(1.0, "a1"), (2.0, "b1")], 3, 1, 0.2, |c: &&str| c.as_bytes()[0], |_| Some(Some(1.0))).is_empty());
}

#[test]
fn measurement_goes_through_the_evaluator_and_into_records() {
    let t = tilec::target::builtin("x86-avx2").unwrap();
    let mut m = parse(GEMM);
    let mut cx = PassContext::with_target(Some(t.clone()));
    cx.set_evaluator(Some(Box::new(Fake { calls: 0, references: 0 })));
    search("roller", &[("measure-top-k", "4")]).run(&mut m, &mut cx).expect("search");
    let records = cx.take_records();
    assert_eq!(records.len(), 4);
    assert_eq!(records.iter().filter(|r| r.error.is_some()).count(), 1);
    // The fake evaluator times the first candidate fastest: it wins.
    let f = &m.funcs[0];
    let c = f.walk().into_iter().find_map(|o| f.ops[o].kind.as_compute()).unwrap();
    let chosen = RecordSchedule::of(c.schedule.as_ref().unwrap());
    assert_eq!(chosen, records[0].schedule);
    assert!(records[0].sentence.starts_with("<s> op=gemm reduce=sum body=mul axis=i:64 axis=j:80 axis=r:k:48 "), "{}", records[0].sentence);
    assert!(records[0].sentence.contains(" target=x86-avx2 "), "{}", records[0].sentence);
    let report = cx.take_reports().join("");
    assert!(report.contains("measured: 4 (1 failed)") && report.contains("fake crash"), "{report}");

    // apply-records picks the fastest record of the workload.
    let mut fresh = parse(GEMM);
    let mut cx2 = PassContext::with_target(Some(t.clone()));
    cx2.add_records("r.jsonl".into(), Arc::new(records.clone()));
    crate::apply_records::ApplyRecords { file: "r.jsonl".into() }.run(&mut fresh, &mut cx2).expect("apply");
    assert_eq!(tilec::syntax::print_module(&fresh), tilec::syntax::print_module(&m));
    // A search given these records as the --records file's resumes: the
    // three timed candidates are not measured again, the failed one is.
    let mut again = parse(GEMM);
    let mut cx4 = PassContext::with_target(Some(t.clone()));
    cx4.set_evaluator(Some(Box::new(Fake { calls: 0, references: 0 })));
    cx4.add_records(tilec::records::RESUME.into(), Arc::new(records.clone()));
    // (Final rounds would time the close ones again, records or not.)
    search("roller", &[("measure-top-k", "4"), ("final-rounds", "0")]).run(&mut again, &mut cx4).expect("search");
    let new = cx4.take_records();
    assert_eq!(new.len(), 1, "only the failed candidate is measured again");
    assert_eq!(new[0].schedule, records.iter().find(|r| r.error.is_some()).unwrap().schedule);
    assert!(cx4.take_reports().join("").contains("measured: 4 (3 from the records)"));
    // Records timed on other threads than the evaluator's hold for those
    // threads only: all four are measured again.
    let on_two: Vec<Record> = records.iter().cloned().map(|r| Record { threads: Some(2), ..r }).collect();
    assert!(records.iter().all(|r| r.threads == Some(1)));
    let mut cx5 = PassContext::with_target(Some(t.clone()));
    cx5.set_evaluator(Some(Box::new(Fake { calls: 0, references: 0 })));
    cx5.add_records(tilec::records::RESUME.into(), Arc::new(on_two));
    search("roller", &[("measure-top-k", "4"), ("final-rounds", "0")]).run(&mut parse(GEMM), &mut cx5).expect("search");
    assert_eq!(cx5.take_records().len(), 4, "records of two threads resume no one-thread search");
    // Without records read: an error.
    let mut cx3 = PassContext::with_target(Some(t));
    assert!(crate::apply_records::ApplyRecords { file: "other.jsonl".into() }.run(&mut parse(GEMM), &mut cx3).is_err());
}

/// The order of evaluations and stored records, shared by [`Logged`] and
/// [`LoggedSink`].
type Log = std::rc::Rc<std::cell::RefCell<Vec<String>>>;

struct Logged(Log);

impl Evaluator for Logged {
    fn evaluate(&mut self, _: &Module, _: &str) -> Measurement {
        self.0.borrow_mut().push("evaluate".into());
        Ok(Timing { median_s: 1e-3, min_s: 1e-3, max_s: 1e-3, runs: 1 })
    }
}

/// A sink that stores the first `capacity` records and fails after.
struct LoggedSink {
    log: Log,
    capacity: usize,
}

impl tilec::records::RecordSink for LoggedSink {
    fn append(&mut self, r: &Record) -> Result<(), String> {
        if self.capacity == 0 {
            return Err("cannot append a record to `sink`: no space left on the device".into());
        }
        self.capacity -= 1;
        self.log.borrow_mut().push(format!("append {}", r.sentence));
        Ok(())
    }
}

/// GEMM on `x86-avx2` with an evaluator and a record sink that log what
/// happens, in order; the sink takes `capacity` records.
fn logged_search(capacity: usize) -> (Log, Module, PassContext) {
    let t = tilec::target::builtin("x86-avx2").unwrap();
    let log = Log::default();
    let mut cx = PassContext::with_target(Some(t));
    cx.set_evaluator(Some(Box::new(Logged(log.clone()))));
    cx.set_record_sink(Some(Box::new(LoggedSink { log: log.clone(), capacity })));
    (log, parse(GEMM), cx)
}

#[test]
fn each_measurement_reaches_the_sink_before_the_next_one_starts() {
    let (log, mut m, mut cx) = logged_search(usize::MAX);
    // Three candidates, then two final rounds of the three (all tie).
    search("roller", &[("measure-top-k", "3"), ("final-rounds", "2"), ("final-margin", "100")]).run(&mut m, &mut cx).expect("search");
    let log = log.borrow();
    assert_eq!(log.len(), 2 * 9, "{log:?}");
    for pair in log.chunks(2) {
        assert_eq!(pair[0], "evaluate", "{log:?}");
        assert!(pair[1].starts_with("append <s> op=gemm "), "{log:?}");
    }
    // The run's records are the ones the sink got, in order.
    let kept: Vec<String> = cx.take_records().iter().map(|r| format!("append {}", r.sentence)).collect();
    assert_eq!(kept, log.iter().skip(1).step_by(2).cloned().collect::<Vec<_>>());
}

#[test]
fn a_sink_that_fails_stops_the_search_with_its_reason() {
    let (log, mut m, mut cx) = logged_search(1);
    let err = search("roller", &[("measure-top-k", "4")]).run(&mut m, &mut cx).unwrap_err();
    let messages: Vec<&str> = err.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(messages, vec!["cannot append a record to `sink`: no space left on the device"]);
    // The first record was stored; the second could not be, and nothing
    // was measured after it.
    assert_eq!(log.borrow().iter().filter(|l| *l == "evaluate").count(), 2, "{:?}", log.borrow());
    assert_eq!(log.borrow().iter().filter(|l| l.starts_with("append")).count(), 1);
}

#[test]
fn construction_takes_well_under_seconds_on_paper_workloads() {
    // A ResNet-sized convolution and a BERT GEMM on both kinds of target.
    let conv = "func @f(%x: tensor<1x64x56x56xf32>, %k: tensor<64x64x3x3xf32>) -> tensor<1x64x56x56xf32> {
  %y = compute (n: 1, f: 64, oh: 56, ow: 56) reduce sum (c: 64, r: 3, s: 3) reads(%xv = %x[n, c, oh + r - 1, ow + s - 1] pad(0.0), %kv = %k[f, c, r, s]) -> tensor<1x64x56x56xf32>[n, f, oh, ow] {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}";
    let gemm = "func @f(%A: tensor<512x768xf32>, %B: tensor<768x3072xf32>) -> tensor<512x3072xf32> {
  %C = compute (i: 512, j: 3072) reduce sum (k: 768) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<512x3072xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}";
    for src in [conv, gemm] {
        for t in [tilec::target::builtin("x86-avx2").unwrap(), tilec::target::builtin("sm90").unwrap()] {
            let start = std::time::Instant::now();
            searched(src, &t, search("markov", &[]));
            // Debug builds; generous, but catches a blow-up.
            assert!(start.elapsed().as_secs_f64() < 30.0, "{:?}", start.elapsed());
        }
    }
}

/// Prints each strategy's best candidates with their predictions (for
/// tuning; `cargo test -p tilec-passes show_candidates -- --ignored --nocapture`).
#[test]
#[ignore]
fn show_candidates() {
    let src = std::env::var("SRC").map(|p| std::fs::read_to_string(p).unwrap()).unwrap_or_else(|_| GEMM.to_string());
    let t = tilec::target::builtin(&std::env::var("TARGET").unwrap_or_else(|_| "x86-avx2".into())).unwrap();
    let m = parse(&src);
    let f = &m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    let p = Problem::new(f, op, t.clone(), 16).unwrap();
    for strategy in ["markov", "roller", "random"] {
        let s = search(strategy, &[("cache-scale", &std::env::var("CACHE_SCALE").unwrap_or_else(|_| "0".into()))]);
        let mut st = s.strategy().expect("a strategy");
        let (mut recorder, mut model) = (Recorder::default(), AnalyticModel);
        let mut cx = SearchCx::detached(0, 2000, m.clone(), &mut recorder, &mut model, st.name());
        let ranked = st.run(&p, &mut cx).unwrap();
        println!("{strategy}: {} candidates; {:?}", ranked.len(), cx.notes);
        for c in ranked.iter().take(5) {
            println!("  {:8.2} GFLOP/s  {}", p.flops / p.predict(c) / 1e9, one_line(&p.schedule(c), &p));
        }
    }
}

/// Markov's polish (docs/search.md, "Polish"): from the same walks, the
/// best state after descent is predicted no slower than the best the walks
/// visited, and on BERT M1 for `x86-avx2` strictly faster; the walks' best
/// state comes right after the best of each start (the two lists
/// alternate); every
/// polished state is valid and no slower than where it started.
#[test]
fn markov_polish_descends_from_the_walks_best_states() {
    let src = std::fs::read_to_string(format!("{}/../benchmarks/workloads/gemm_bert_m1.tile", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let m = parse(&src);
    let p = workload_problem("gemm_bert_m1", "x86-avx2");
    let best = |polish: &str| {
        let mut st = search("markov", &[("polish", polish)]).strategy().expect("a strategy");
        let (mut recorder, mut model) = (Recorder::default(), AnalyticModel);
        let mut cx = SearchCx::detached(7, 2000, m.clone(), &mut recorder, &mut model, st.name());
        let ranked = st.run(&p, &mut cx).unwrap();
        (ranked, cx.notes)
    };
    let (walked, notes) = best("0");
    assert!(!notes.iter().any(|n| n.starts_with("polish")), "{notes:?}");
    let (polished, notes) = best("16");
    assert!(notes.iter().any(|n| n.starts_with("polish: ")), "{notes:?}");
    assert!(p.predict(&polished[0]) < p.predict(&walked[0]), "{} against {}", p.predict(&polished[0]), p.predict(&walked[0]));
    // Each start's best comes first (`leaders_first`), then the polished
    // and walked states alternate.
    let starts = polished.iter().map(|c| (c.vector, c.intrinsic)).collect::<std::collections::BTreeSet<_>>().len();
    assert!(polished[..starts + 1].contains(&walked[0]), "polished and walked states alternate after each start's best");
    for start in walked.iter().take(16) {
        let (end, evaluated) = markov::polish(&p, &AnalyticModel, start.clone());
        assert!(p.valid(&end) && evaluated > 0);
        assert!(p.predict(&end) <= p.predict(start));
    }
}

/// The search problem of the compute op of `benchmarks/workloads/<name>.tile`
/// on a built-in target (unroll 16).
/// GEMV's vector goes along its rows, the reduction axis: the matrix loads
/// whole vectors and each lane keeps a partial sum, where vectors along the
/// output would gather the matrix's columns.
#[test]
fn the_cpu_model_vectorizes_gemv_along_the_reduction() {
    let p = workload_problem("gemv_v3", "x86-avx512");
    assert_eq!(p.vector_axes, vec![0, 1], "i (the default), then the reduction axis j");
    let cfg = |vector: usize| Config { tiles: vec![vec![32, 8, 8], vec![1000, 40, 8]], vthreads: vec![1; 2], pack: vec![0; 2], order: vec![0, 1], vector: Some(vector), intrinsic: None };
    let along_j = cfg(1);
    assert!(p.valid(&along_j));
    assert_eq!(p.vector_width(&along_j), 8);
    assert_eq!(p.lane_axis(&along_j), Some(1));
    assert_eq!(p.register_tile(&along_j), (8.0, 9.0, 9.0), "8 rows x 8 lanes of partial sums; 8 row vectors and one of x per step");
    assert_eq!(p.schedule(&along_j).vector, Some(("j".to_string(), 8)));
    let along_i = cfg(0);
    assert_eq!(p.lane_axis(&along_i), None);
    assert!(p.predict(&along_i) > 1.5 * p.predict(&along_j));
}

fn workload_problem(name: &str, target: &str) -> space::Problem {
    workload_problem_on(name, tilec::target::builtin(target).unwrap())
}

/// `x86-avx2` cut to a 2-core VM with `l3_bytes` of L3.
fn avx2_vm(l3_bytes: u64) -> Arc<tilec::target::Target> {
    let mut vm = (*tilec::target::builtin("x86-avx2").unwrap()).clone();
    vm.compute.units = 2;
    vm.memory.iter_mut().filter(|m| m.name == "l3").for_each(|m| m.capacity_bytes = l3_bytes);
    Arc::new(vm)
}

/// The Zen 1 VM some CPU terms were measured on: 8 MiB of L3.
fn zen1_vm() -> Arc<tilec::target::Target> {
    avx2_vm(8 << 20)
}

/// The Zen 3 VM of 2026-11-28: 32 MiB of L3.
fn zen3_vm() -> Arc<tilec::target::Target> {
    avx2_vm(32 << 20)
}

/// The text of `benchmarks/workloads/{name}.tile`.
fn workload_source(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../benchmarks/workloads/{name}.tile", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn workload_problem_on(name: &str, target: Arc<tilec::target::Target>) -> space::Problem {
    let m = parse(&workload_source(name));
    let f = &m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    space::Problem::new(f, op, target, 16).unwrap()
}

/// A read whose micro-kernel steps land a page apart, and whose rows evict
/// each other from L1, misses there on every load: the model charges it
/// (`page_step_stall`). On GEMM 1024 B's rows are 4 KiB apart unpacked,
/// and 64 bytes apart packed, per L2 tile or per L1 tile: `cache` lays a
/// copy out in panels as wide as the register tile (16 columns), and an
/// L1 tile's copy is one panel; without panels (a register tile as wide as
/// the copy's box: nothing to split) the rows are the box's width apart. A
/// 4-row B (Gensor's M2, K = 4) stays in L1 however far apart
/// its rows are, and a streamed B (M = 1) is `stream_stall`'s. On a Zen 1
/// core the unpacked schedule below ran at 21-23 GFLOP/s and the one
/// packed at L2 at 30-31.
#[test]
fn the_model_charges_reduction_steps_across_pages() {
    let p = workload_problem("gemm_1024", "x86-avx2");
    let tiles = vec![vec![256, 128, 4], vec![512, 256, 16], vec![1024, 128, 8]];
    let cfg = |pack: [u8; 2]| Config { tiles: tiles.clone(), vthreads: vec![1; 3], pack: pack.to_vec(), order: vec![0, 1, 2], vector: Some(1), intrinsic: None };
    let (unpacked, at_l2, at_l1) = (cfg([0, 0]), cfg([0, 2]), cfg([0, 3]));
    assert_eq!([p.reduction_step_bytes(&unpacked, 0), p.reduction_step_bytes(&unpacked, 1)], [4, 4096], "A walks along k, B down its rows");
    assert_eq!(p.reduction_step_bytes(&at_l2, 1), 64, "in panels of 16 columns");
    assert_eq!(p.reduction_step_bytes(&at_l1, 1), 64);
    // A register tile of one vector in a box 2 vectors wide: 2 panels.
    let narrow = Config { tiles: vec![vec![256, 128, 4], vec![512, 16, 8], vec![1024, 128, 8]], ..at_l2.clone() };
    assert_eq!(p.reduction_step_bytes(&narrow, 1), 32);
    // Without a vector axis there are no panels: the box's rows, 256
    // floats apart.
    let scalar = Config { vector: None, ..at_l2.clone() };
    assert_eq!(p.reduction_step_bytes(&scalar, 1), 1024);
    assert!(p.steps_across_pages(&unpacked, 1) && !p.steps_across_pages(&unpacked, 0));
    assert!(!p.steps_across_pages(&at_l2, 1) && !p.steps_across_pages(&at_l1, 1));
    assert!(p.page_step_stall(&unpacked, 1.0) > 0.0 && p.page_step_stall(&at_l2, 1.0) == 0.0);
    assert!(p.predict(&at_l2) < p.predict(&unpacked), "packing B pays");

    let m2 = workload_problem("gemm_gensor_m2", "x86-avx2");
    let c = Config { tiles: vec![vec![256, 64, 4], vec![1024, 256, 16], vec![4, 4, 4]], vthreads: vec![1; 3], pack: vec![0, 0], order: vec![0, 1, 2], vector: Some(1), intrinsic: None };
    assert_eq!(m2.reduction_step_bytes(&c, 1), 4096);
    assert!(!m2.steps_across_pages(&c, 1), "4 rows stay in L1");

    // At M = 1, B is streamed: `stream_stall` charges its runs, not this.
    let m1 = workload_problem("gemm_m1_4096", "x86-avx2");
    let c = Config { tiles: vec![vec![1, 1, 1], vec![256, 128, 16], vec![4096, 128, 8]], vthreads: vec![1; 3], pack: vec![0, 0], order: vec![0, 1, 2], vector: Some(1), intrinsic: None };
    assert_eq!(m1.reduction_step_bytes(&c, 1), 16384);
    assert!(!m1.steps_across_pages(&c, 1));
}

/// A weight's packed copies are laid out once (`prepack`), so the model
/// charges them the reading of their tiles: GEMM 1024 with B a network's
/// weight predicts faster than with B an input, packed alike, and the
/// same unpacked.
#[test]
fn a_weight_packed_costs_its_tiles_read_not_its_copies_made() {
    let src = std::fs::read_to_string(format!("{}/../benchmarks/workloads/gemm_1024.tile", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let problem = |m: &Module| {
        let f = &m.funcs[0];
        let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
        space::Problem::new(f, op, tilec::target::builtin("x86-avx2").unwrap(), 16).unwrap()
    };
    let input = problem(&parse(&src));
    let mut m = parse(&src);
    crate::samples::params_as_weights(&mut m);
    let weight = problem(&m);
    assert_eq!(input.weights, [false, false]);
    assert_eq!(weight.weights, [false, true], "A stays an input, B is the weight");
    let tiles = vec![vec![256, 128, 4], vec![512, 256, 16], vec![1024, 128, 8]];
    let cfg = |pack: [u8; 2]| Config { tiles: tiles.clone(), vthreads: vec![1; 3], pack: pack.to_vec(), order: vec![0, 1, 2], vector: Some(1), intrinsic: None };
    let (unpacked, at_l2) = (cfg([0, 0]), cfg([0, 2]));
    assert!(weight.predict(&at_l2) < input.predict(&at_l2));
    assert_eq!(weight.predict(&unpacked), input.predict(&unpacked));
}

/// A padded read whose vector lanes walk a dimension they never leave
/// (max pooling in a blocked layout: the lanes along `cl`) has one guard
/// for all its lanes, and loads them as one vector: the model charges it
/// per vector, not per element (markov packed the input only to hold its
/// padding before; on a Zen 4, in turns, its construction went from 0.302
/// ms to 0.152 unpacked). Lanes along a padded dimension (a convolution's `ow`) may
/// straddle the padding, and stay per element.
#[test]
fn padded_reads_with_lanes_inside_their_dimension_load_whole_vectors() {
    let pool = parse(
        "func @mp(%x: tensor<4x112x112x16xf32>) -> tensor<4x56x56x16xf32> {
  %y = compute \"maxpool\" (n_c: 4, h: 56, w: 56, cl: 16) reduce max (r: 3, s: 3)
      reads(%xv = %x[n_c, h * 2 + r - 1, w * 2 + s - 1, cl] pad(-inf)) -> tensor<4x56x56x16xf32>[n_c, h, w, cl] {
    yield %xv : f32
  }
  return %y
}",
    );
    let f = &pool.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    let p = space::Problem::new(f, op, tilec::target::builtin("x86-avx512").unwrap(), 16).unwrap();
    let (w, cl) = (tilec::ir::AxisId::new(2), tilec::ir::AxisId::new(3));
    assert!(p.lanes_stay_inside(0, cl));
    assert!(!p.lanes_stay_inside(0, w), "`2w + s - 1` leaves the rows at the edges");
    let tiles = vec![vec![1, 1, 1], vec![56, 8, 2], vec![56, 8, 4], vec![16, 16, 16], vec![3, 3, 3], vec![3, 3, 3]];
    let vector = Config { tiles, vthreads: vec![1; 6], pack: vec![0], order: vec![0, 1, 2, 3, 4, 5], vector: Some(3), intrinsic: None };
    assert!(p.valid(&vector));
    // The register tile (2 x 4 points, a vector each) loads 8 vectors per
    // reduction step, each under one guard: 8 x the guarded load's cost,
    // not 8 x 16.
    let (acc, loads, _) = p.register_tile(&vector);
    assert_eq!(acc, 8.0);
    assert_eq!(loads, 8.0 * p.target.model.guarded_load_cost);
    let conv = workload_problem("conv2d_resnet50_r2", "x86-avx512");
    let ow = tilec::ir::AxisId::new(3);
    assert!(!conv.lanes_stay_inside(0, ow), "a padded convolution's lanes along `ow` may straddle the padding");
}

/// What the caches keep between tiles depends on the loop order
/// (`fresh_traffic`, `reused_traffic`): ResNet-50 R3 (1x1, 64 -> 256
/// channels at 56x56, input channels 12.5 KB apart) with a 4 x 2 x 8
/// register tile at every level. With the output channels' tiles
/// outermost, every register tile loads its input tile afresh, from L3
/// (the input is 800 KB), and no prefetcher follows its page-sized steps;
/// with them innermost, each input tile is loaded once and stays in L1
/// while the weights go by. On a Zen 1 core (1 thread) the first ran in
/// 5.6 ms, the second in 3.6 (onnxruntime 3.2, in rounds alternating with
/// both).
#[test]
fn the_model_sees_what_the_loop_order_keeps_in_cache() {
    // The machine it was measured on (on 64 cores the op's data would fit
    // their L2s together).
    let p = workload_problem_on("conv2d_resnet50_r3", zen1_vm());
    // Axes n, f, oh, ow, c, r, s; reads x, then the weights.
    let order = |named: [usize; 3]| p.orders.iter().find(|o| o.iter().filter(|a| named.contains(a)).eq(named.iter())).unwrap().clone();
    let tiles = [1, 4, 2, 8, 64, 1, 1].iter().map(|&t| vec![t; 3]).collect();
    let f_outer = Config { tiles, vthreads: vec![1; 7], pack: vec![0; 2], order: order([1, 2, 3]), vector: Some(3), intrinsic: None };
    let f_inner = Config { order: order([2, 3, 1]), ..f_outer.clone() };
    assert!(p.valid(&f_outer) && p.valid(&f_inner));
    let (x_bytes, w_bytes) = (64.0 * 56.0 * 56.0 * 4.0, 256.0 * 64.0 * 4.0);
    for level in 0..3 {
        assert_eq!(p.fresh_traffic(&f_outer, 0, level), 64.0 * x_bytes, "x again for each of f's 64 tiles");
        assert_eq!(p.fresh_traffic(&f_inner, 0, level), x_bytes, "x once");
        assert_eq!(p.fresh_traffic(&f_outer, 1, level), w_bytes, "the weights once");
        assert_eq!(p.fresh_traffic(&f_inner, 1, level), 28.0 * 7.0 * w_bytes, "the weights again for each of the 196 spatial tiles");
    }
    // The core loops are parallel: a packed copy is made in each of their
    // iterations, while the cache keeps the tile across them.
    assert_eq!(p.pack_traffic(&f_inner, 0, 0), 64.0 * x_bytes);
    assert_eq!(p.reused_traffic(&f_inner, 2), x_bytes + 196.0 * w_bytes + 256.0 * 56.0 * 56.0 * 4.0);
    assert!(p.reused_traffic(&f_inner, 2) < p.traffic(&f_inner, 2) / 3.0, "Roller's counts x for every tile");
    // The input's steps are 12.5 KB apart, and its 64 rows stay in L1:
    // its fresh tiles miss.
    assert_eq!(p.reduction_step_bytes(&f_outer, 0), 12544);
    assert_eq!([p.page_steps(&f_outer, 0), p.page_steps(&f_outer, 1)], [analytic::PageSteps::FreshTiles, analytic::PageSteps::Never]);
    let cores = p.target.compute.units as f64;
    // From L3 for every register tile, against each input line once from
    // DRAM.
    assert!(p.page_step_stall(&f_outer, cores) > 5.0 * p.page_step_stall(&f_inner, cores), "{} {}", p.page_step_stall(&f_outer, cores), p.page_step_stall(&f_inner, cores));
    assert!(p.predict(&f_inner) < p.predict(&f_outer));
    // `best_order` puts f's loops inside oh's and ow's.
    let best = p.best_order(&f_outer);
    let at = |a: usize| best.iter().position(|&b| b == a).unwrap();
    assert!(at(1) > at(2) && at(1) > at(3), "{best:?}");
    assert!(p.order_seconds(&Config { order: best, ..f_outer.clone() }) < p.order_seconds(&f_outer));
}

/// `best_order` weighs the orders by classes of their parts
/// (`ReadCopies`), not one by one: on drawn points of a batched
/// convolution (144 orders) and a 3-D one (576), each packed at random,
/// it picks what weighing every order's `order_seconds` in turn picks,
/// the earliest of the cheapest.
#[test]
fn best_order_is_the_cheapest_order_weighed_one_by_one() {
    for name in ["conv2d_resnet18_c1_b16", "conv3d_ansor"] {
        let p = workload_problem(name, "x86-avx2");
        assert!(p.orders.len() >= 144, "{name}: {} orders", p.orders.len());
        let space = knobs::KnobSpace::new(&p);
        let mut rng = rng::Rng::new(7);
        let mut packed_points = 0;
        for _ in 0..60 {
            let Some((mut cfg, _)) = space.draw(&mut rng) else { continue };
            for r in 0..cfg.pack.len() {
                let choices = p.pack_choices(r);
                cfg.pack[r] = choices[rng.below(choices.len())];
            }
            let packed: Vec<(usize, usize)> = (0..cfg.pack.len()).filter_map(|r| cfg.pack_level(r).map(|l| (r, l))).collect();
            packed_points += usize::from(!packed.is_empty());
            let mut best: Option<(f64, &Vec<usize>)> = None;
            for o in &p.orders {
                let seconds = p.order_seconds(&Config { order: o.clone(), ..cfg.clone() });
                if best.is_none_or(|(b, _)| seconds < b) {
                    best = Some((seconds, o));
                }
            }
            assert_eq!(&p.best_order(&cfg), best.unwrap().1, "{name}: {cfg:?}");
        }
        assert!(packed_points > 30, "{name}: {packed_points} points with packed reads");
    }
}

/// A GEMM at M = 1 streams B: the model charges each run's first miss.
/// On a Zen 1 EPYC, a schedule that walks B 128 bytes a row, rows 16 KiB
/// apart, ran in 13-15 ms; one that sweeps 8 KiB of 8 rows side by side
/// (what markov picks with this term) in 4.5 ms, and whole rows 4 at a
/// time in 4.4 ms. The resource check lets whole rows of B into a core's
/// tile (B is held to no cache's capacity).
#[test]
fn the_model_charges_short_runs_through_a_streamed_read() {
    // The machine it was measured on: B (64 MiB) comes from DRAM.
    let p = workload_problem_on("gemm_m1_4096", zen1_vm());
    assert!(p.resources().streamed(1) && !p.resources().streamed(0));
    let cfg = |j: [u64; 3], k: [u64; 3]| Config { tiles: vec![vec![1; 3], j.to_vec(), k.to_vec()], vthreads: vec![1; 3], pack: vec![0; 2], order: vec![0, 1, 2], vector: Some(1), intrinsic: None };
    let rows = cfg([4096, 4096, 64], [4096, 4, 4]);
    let sweeps = cfg([2048, 2048, 32], [4096, 8, 1]);
    let columns = cfg([2048, 2048, 32], [4096, 4096, 2]);
    for c in [&rows, &sweeps, &columns] {
        assert!(p.valid(c), "{c:?}");
    }
    // Runs: a row's 4096 floats (4 rows side by side); 2048 (8 rows); 32,
    // since the 2048 rows walked inside a column are more streams than a
    // core keeps misses in flight.
    assert_eq!([&rows, &sweeps, &columns].map(|c| p.stream_run_bytes(c, 1)), [16384.0, 8192.0, 128.0]);
    // 64 MiB in 128-byte runs: 2^19 misses of 110 ns, 10 at a time on
    // each of 2 cores, 2.9 ms; in 8 KiB runs, 45 µs.
    let dram = &p.target.memory[0];
    let stall = |c: &Config| p.stream_stall(c, dram, 2.0);
    assert!((stall(&columns) - 2.88e-3).abs() < 0.01e-3 && (stall(&sweeps) - 45e-6).abs() < 1e-6, "{} {}", stall(&columns), stall(&sweeps));
    assert!(p.predict(&columns) > stall(&columns));
}

/// The CPU terms of the model (docs/search.md, "The CPU model") on GEMM
/// 1024 for `x86-avx512`: the BLIS-like schedule of
/// `examples/gemm1024_avx512.tile` is predicted faster than the same tiles
/// with a short accumulator run, with a spilling register tile, or without
/// packing the B panel (whose 256 rows, 4 KiB apart, share L1 sets); and
/// its loop order is the one that copies the B panel least often.
#[test]
fn the_cpu_model_sees_register_tiles_reduction_runs_and_conflicts() {
    let p = workload_problem("gemm_1024", "x86-avx512");
    let cfg = |tiles: [[u64; 3]; 3], pack: [u8; 2]| Config { tiles: tiles.iter().map(|t| t.to_vec()).collect(), vthreads: vec![1; 3], pack: pack.to_vec(), order: vec![0, 1, 2], vector: Some(1), intrinsic: None };
    let blis = cfg([[64, 64, 8], [256, 256, 32], [1024, 256, 256]], [2, 3]);
    assert!(p.valid(&blis));
    assert_eq!(p.register_tile(&blis), (16.0, 10.0, 2.0), "8 rows x 2 zmm accumulators; 8 broadcasts and 2 loads per step");
    assert_eq!(p.reduction_run(&blis), 256.0);
    assert!(p.kernel_efficiency(&blis) > 0.95);
    assert!(!(0..3).any(|l| p.conflicts(&blis, 1, l)));

    let unpacked = cfg([[64, 64, 8], [256, 256, 32], [1024, 256, 256]], [0, 0]);
    assert!(p.conflicts(&unpacked, 1, 2), "B's 256 x 32 panel keeps 12 of its rows in L1");
    assert!(!p.conflicts(&unpacked, 0, 2), "A's 8 rows fit the ways");
    let short_run = cfg([[64, 64, 8], [256, 256, 32], [1024, 4, 4]], [2, 3]);
    let spilling = cfg([[64, 64, 32], [256, 256, 32], [1024, 256, 256]], [2, 3]);
    assert!(p.kernel_efficiency(&spilling) < 0.5);
    // The example's loop order (`j` outside `i`, below) copies B's panel
    // least often; the packing pays for its copies against that.
    let example = Config { order: vec![1, 0, 2], ..blis.clone() };
    for worse in [&unpacked, &short_run, &spilling] {
        assert!(p.predict(worse) > p.predict(&example) * 1.1, "{:?}: {} against {}", worse, p.predict(worse), p.predict(&example));
    }
    let packed = p.best_packing(&unpacked);
    assert!(!(0..3).any(|l| p.conflicts(&packed, 1, l)), "the model packs B: {:?}", packed.pack);

    // The loop order: with `j` outside `i`, B's packed 256 x 32 panel is
    // copied once per l1 tile of `j` instead of once per (j, i) pair.
    assert_eq!(p.orders, vec![vec![0, 1, 2], vec![1, 0, 2]], "i and j swap; k alone");
    let j_outer = example;
    let j_outer_unpacked = |c: &Config| Config { order: vec![1, 0, 2], ..c.clone() };
    assert_eq!(p.best_order(&blis), j_outer.order);
    assert_eq!(p.pack_traffic(&blis, 1, 2), 8.0 * p.pack_traffic(&j_outer, 1, 2), "i's l1 loop (64 / 8) no longer repeats the copy");
    assert!(p.predict(&j_outer) < p.predict(&blis));
    assert_eq!(p.schedule(&j_outer).order, ["j", "i", "k"]);
    assert!(p.schedule(&blis).order.is_empty(), "declaration order is not written");
    // Unpacked, the order still decides what the caches keep: with `j`
    // outside `i`, B's 256 x 32 l1 tile stays for the 8 tiles of `i`.
    assert!(p.reused_traffic(&j_outer_unpacked(&unpacked), 2) < p.reused_traffic(&unpacked, 2));
    assert_eq!(p.best_order(&unpacked), vec![1, 0, 2]);
}

/// The vector axis is part of the CPU space: for ResNet-50 R10 (1x1,
/// 1024 -> 512 channels, 7x7 outputs) a register tile of 32 output channels
/// (2 zmm) by 7 columns, with the weights packed (so `f` is contiguous in
/// the copy), is predicted faster than the same tiles vectorised along `ow`
/// (7 columns: no whole vector) or along `f` with the weights gathered.
#[test]
fn the_cpu_model_chooses_the_vector_axis() {
    let p = workload_problem("conv2d_resnet50_r10", "x86-avx512");
    // Axes n, f, oh, ow, c, r, s; the default (last spatial) first, n (1
    // long) left out; no read walks c, r or s contiguously, so no
    // reduction axis.
    assert_eq!(p.vector_axes, vec![3, 1, 2]);
    let tiles: Vec<Vec<u64>> = [[1, 1, 1], [256, 64, 32], [7, 7, 1], [7, 7, 7], [1024, 256, 256], [1, 1, 1], [1, 1, 1]].iter().map(|t| t.to_vec()).collect();
    let cfg = |vector: usize, pack_kv: u8| Config { tiles: tiles.clone(), vthreads: vec![1; 7], pack: vec![0, pack_kv], order: (0..7).collect(), vector: Some(vector), intrinsic: None };
    let along_f = cfg(1, 3);
    assert!(p.valid(&along_f));
    assert_eq!(p.vector_width(&along_f), 16);
    assert_eq!(p.register_tile(&along_f), (14.0, 9.0, 2.0), "2 x 7 accumulators; 7 broadcasts of x and 2 vectors of the packed weights per step");
    assert_eq!(p.schedule(&along_f).vector, Some(("f".to_string(), 16)));
    let gathered = cfg(1, 0);
    let along_ow = cfg(3, 3);
    assert_eq!(p.vector_width(&along_ow), 0, "7 columns hold no whole vector");
    for worse in [&gathered, &along_ow] {
        assert!(p.predict(worse) > 1.5 * p.predict(&along_f), "{worse:?}");
    }
}

/// The vector axis' outermost tile may round its extent up to whole
/// vectors (the verifier allows it, the last vector's lanes past the
/// extent are masked): ResNet-50 R12's `ow` (7) as one vector of 8, only
/// while `ow` carries the vector, and only as far as the point's vector
/// width rounds.
#[test]
fn the_vector_axis_may_round_its_extent_up_to_whole_vectors() {
    let p = workload_problem("conv2d_resnet50_r12", "x86-avx2");
    // Axes n, f, oh, ow, c, r, s; `ow` carries the vector at first.
    let start = p.initial();
    assert_eq!(start.vector, Some(3));
    // The knob's values offer it on every axis that may carry the vector
    // (the vector knob comes after the tiles); a walk whose vector is
    // chosen steps only through what its vector axis may take.
    assert_eq!(p.choices(&start, 3, 0), vec![1, 2, 4, 7, 8]);
    assert_eq!(p.choices(&start, 2, 0), vec![1, 2, 4, 7, 8]);
    assert_eq!(p.walk_choices(&start, 3, 0), vec![1, 2, 4, 7, 8]);
    assert_eq!(p.walk_choices(&start, 2, 0), vec![1, 2, 4, 7], "`oh` carries no vector");
    assert_eq!(p.walk_choices(&Config { vector: Some(1), ..start.clone() }, 3, 0), vec![1, 2, 4, 7]);
    assert_eq!(p.choices(&start, 4, 0), vec![512], "`c` is a reduction axis the core tile spans");
    let tiles: Vec<Vec<u64>> = [[1, 1, 1], [256, 64, 2], [7, 7, 1], [8, 8, 8], [512, 128, 128], [1, 1, 1], [1, 1, 1]].iter().map(|t| t.to_vec()).collect();
    let cfg = |ow: [u64; 3], vector: usize| {
        let mut tiles = tiles.clone();
        tiles[3] = ow.to_vec();
        Config { tiles, vthreads: vec![1; 7], pack: vec![0, 0], order: (0..7).collect(), vector: Some(vector), intrinsic: None }
    };
    let whole = cfg([8, 8, 8], 3);
    assert!(p.valid(&whole));
    assert_eq!(p.schedule(&whole).vector, Some(("ow".to_string(), 8)));
    assert!(p.valid(&cfg([8, 8, 4], 3)), "vectors of 4 round 7 up to 8 too");
    assert!(!p.valid(&cfg([8, 8, 1], 3)), "no vector: the tile is larger than the axis");
    assert!(!p.valid(&cfg([8, 8, 8], 1)), "the vector is along `f`");
    // The model charges the masked lane (7 of 8 lanes compute).
    let divisor = cfg([7, 7, 7], 3);
    assert!(p.valid(&divisor));
    assert_eq!(p.vector_width(&divisor), 0, "7 columns hold no whole vector");
    assert!(p.predict(&whole) < p.predict(&divisor));
}

/// Where a tile covers its whole axis, the level below may split it
/// unevenly (the verifier's rule; the last tile is partial and guarded):
/// ResNet-50 R12 with its output points collapsed (N = 49) gets register
/// tiles of 3 vectors under a core tile of 7 vectors, the 4 x 24 tile whose
/// 12 accumulators hide the FMA latency that 8 only just cover (4 x 24 ran
/// in 1.66 ms, 2 x 32 in 2.67-3.7 ms on a Zen 3 VM), and the model's
/// latency term tells the two apart.
#[test]
fn a_tile_that_covers_its_axis_may_be_split_unevenly() {
    let m = parse(
        "func @r12(%x: tensor<1x512x49xf32>, %k: tensor<2048x512xf32>) -> tensor<1x2048x49xf32> {
  %y = compute \"conv2d\" (n: 1, f: 2048, p: 49) reduce sum (c: 512)
      reads(%xv = %x[n, c, p], %kv = %k[f, c]) -> tensor<1x2048x49xf32>[n, f, p]
  {
    %0 = mul %xv, %kv : f32
    yield %0 : f32
  }
  return %y
}",
    );
    let f = &m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    let p = space::Problem::new(f, op, tilec::target::builtin("x86-avx2").unwrap(), 16).unwrap();
    let cfg = |f: [u64; 3], pt: [u64; 3], vector: usize| Config {
        tiles: vec![vec![1; 3], f.to_vec(), pt.to_vec(), vec![512, 128, 128]],
        vthreads: vec![1; 4],
        pack: vec![0, 0],
        order: (0..4).collect(),
        vector: Some(vector),
        intrinsic: None,
    };
    let base = cfg([1024, 64, 4], [56, 56, 1], 2);
    assert_eq!(p.choices(&base, 2, 2), vec![1, 2, 4, 7, 8, 14, 16, 24, 28, 32, 40, 48, 56], "whole vectors under a tile covering the axis");
    assert_eq!(p.choices(&cfg([1024, 64, 4], [32, 32, 1], 2), 2, 2), vec![1, 2, 4, 8, 16, 32], "32 does not cover 49: divisors only");
    assert!(!p.choices(&base, 1, 2).contains(&3), "`f` (2048) is never covered by 64");
    let (uneven, even) = (cfg([1024, 64, 4], [56, 56, 24], 2), cfg([1024, 64, 2], [56, 56, 32], 2));
    assert!(p.valid(&uneven) && p.valid(&even));
    assert_eq!(p.register_tile(&uneven).0, 12.0);
    assert!(!p.valid(&cfg([1024, 64, 4], [56, 56, 12], 2)), "not whole vectors");
    assert!(!p.valid(&cfg([1024, 64, 4], [56, 32, 24], 2)), "32 does not cover the axis");
    assert!(!p.valid(&cfg([1024, 64, 3], [56, 56, 24], 2)), "64 rows do not cover `f`");
    let latency = |c: &Config| p.kernel_terms(c)[1];
    assert!(latency(&uneven) > latency(&even) + 0.05, "12 accumulators hide the latency better than 8: {} against {}", latency(&uneven), latency(&even));
    assert!(p.predict(&uneven) < p.predict(&even));
    // The schedule keeps them (`lit-tests/passes/tile/uneven-tiles.tile`
    // runs such tiles against the interpreter).
    let s = p.schedule(&uneven);
    assert_eq!(s.tiles.iter().find(|(n, _)| n == "p").map(|(_, t)| t.clone()), Some(vec![56, 56, 24]));
}

/// Under a tile covering its axis, a middle level may take the sizes 3 ·
/// 2^p that do not divide it, so that register tiles of 6 rows exist
/// along a 1024-row axis (`i = [1024, 96, 6]`: 6 x 16, 12 accumulators on
/// AVX2, which ran GEMM 1024 1.6-2.8% faster than `[512, 64, 4]` on a Zen 3
/// VM); under a tile that does not cover it, divisors only; and markov's
/// polish reaches such a tile from the 4-row one, which single steps (that
/// double or halve a size) cannot. (On a 2-core target with the Zen 3
/// VM's 32 MiB of L3: a 64-core one wants more core tiles than a
/// covering `i` leaves.)
#[test]
fn a_middle_level_under_a_covering_tile_may_carry_six_rows() {
    let p = workload_problem_on("gemm_1024", zen3_vm());
    let cfg =
        |i: [u64; 3]| Config { tiles: vec![i.to_vec(), vec![256, 256, 16], vec![1024, 256, 256]], vthreads: vec![1; 3], pack: vec![2, 1], order: vec![1, 0, 2], vector: Some(1), intrinsic: None };
    assert_eq!(space::multiples_of_three(1024).collect::<Vec<_>>(), vec![6, 12, 24, 48, 96, 192, 384, 768]);
    assert_eq!(space::multiples_of_three(96).count(), 0, "3 · 2^p below 96 all divide it");
    let four = cfg([1024, 64, 4]);
    assert!(p.choices(&four, 0, 1).contains(&96), "1024 covers `i`");
    assert!(!p.choices(&cfg([512, 64, 4]), 0, 1).contains(&96), "512 does not cover `i`");
    assert!(p.walk_choices(&four, 0, 1).contains(&96), "off the vector axis too");
    let six = cfg([1024, 96, 6]);
    assert!(p.valid(&six), "6 divides 96, and 96 splits the covering 1024 unevenly");
    assert!(!p.valid(&cfg([1024, 100, 4])), "only 3 · 2^p");
    assert!(!p.valid(&cfg([512, 96, 6])), "512 does not cover `i`");
    assert_eq!(p.register_tile(&six).0, 12.0);
    assert!(p.predict(&six) < p.predict(&four), "12 accumulators against 8");
    let (polished, _) = markov::polish(&p, &AnalyticModel, four.clone());
    assert_eq!(polished.tiles[0][2] % 3, 0, "polish re-blocks the rows: {:?}", polished.tiles);
}

/// The loads of a read that does not use the register tile's outermost
/// point loop are held in registers across it (LLVM loads them once), the
/// others stream: GEMM's 6 x 16 holds B's 2 vectors beside its 12
/// accumulators (15 registers with a broadcast of A), and a convolution
/// tile of 3 rows (outermost) x 4 output channels x 1 vector holds the 4
/// broadcasts of the weights (17 with the input's row: LLVM spilled two
/// accumulators every step, ResNet-50 R8 at 9.6 ms against 5.6 for its
/// 8-accumulator tile on a Zen 3 VM), so the model charges it for the
/// registers it lacks.
#[test]
fn the_loads_that_the_outer_point_loop_reuses_are_held_in_registers() {
    let gemm = workload_problem_on("gemm_1024", zen3_vm());
    let six = Config { tiles: vec![vec![1024, 96, 6], vec![256, 256, 16], vec![1024, 256, 256]], vthreads: vec![1; 3], pack: vec![2, 1], order: vec![1, 0, 2], vector: Some(1), intrinsic: None };
    assert_eq!(gemm.register_tile(&six), (12.0, 8.0, 2.0), "6 broadcasts and 2 vectors a step, the vectors held");
    assert_eq!(gemm.kernel_terms(&six)[2], 1.0, "15 of 16 registers");
    let conv = workload_problem("conv2d_resnet50_r8", "x86-avx2");
    // n, f, oh, ow, c, r, s; the vector along `ow`, `oh` outermost.
    let tiles = |f: u64, oh: u64| vec![vec![1, 1, 1], vec![256, 128, f], vec![14, 12, oh], vec![8, 8, 8], vec![256, 64, 1], vec![3, 3, 3], vec![3, 3, 3]];
    let cfg = |f: u64, oh: u64| Config { tiles: tiles(f, oh), vthreads: vec![1; 7], pack: vec![0, 0], order: vec![2, 3, 1, 0, 4, 5, 6], vector: Some(3), intrinsic: None };
    let (acc, _, held) = conv.register_tile(&cfg(4, 3));
    assert_eq!((acc, held), (12.0, 4.0), "the weights' 4 broadcasts are held, the input's rows stream");
    assert!(conv.kernel_terms(&cfg(4, 3))[2] < 1.0, "12 + 4 + 1 registers do not fit in 16");
    assert_eq!(conv.kernel_terms(&cfg(2, 3))[2], 1.0, "6 accumulators and 2 broadcasts fit");
}

/// A read whose window slides over a reduction axis the register tile
/// unrolls holds its elements across that axis' points: ResNet-50 R11's
/// construction pick, 2 vectors of output channels x 2 rows x 7 columns
/// with the 3 taps of `s` unrolled, reuses each tap's 14 broadcasts of the
/// input for the next, so LLVM holds them beside 28 accumulators and spilled
/// 171 zmm moves (2.63 ms against 2.18 for one row, 14 accumulators, on the
/// Zen 4 VM; benchmarks/results/2026-12-06-panels/r11-register-tiles.txt).
#[test]
fn a_window_sliding_over_unrolled_taps_is_held_in_registers() {
    let mut zen4_vm = (*tilec::target::builtin("x86-avx512").unwrap()).clone();
    zen4_vm.compute.units = 2;
    let p = workload_problem_on("conv2d_resnet50_r11", Arc::new(zen4_vm));
    // n, f, oh, ow, c, r, s; the vector along `f`, both reads packed.
    let cfg = |oh: Vec<u64>| Config { tiles: vec![vec![1, 1, 1], vec![512, 32, 32], oh, vec![7, 7, 7], vec![512, 512, 8], vec![3, 3, 3], vec![3, 3, 3]], vthreads: vec![1; 7], pack: vec![1, 2], order: (0..7).collect(), vector: Some(1), intrinsic: None };
    let (two_rows, one_row) = (cfg(vec![7, 6, 2]), cfg(vec![7, 7, 1]));
    assert!(p.valid(&two_rows) && p.valid(&one_row));
    let (acc, _, held) = p.register_tile(&two_rows);
    assert_eq!((acc, held), (28.0, 6.0), "the 3 taps' 2 weight vectors, the fewer: the 14 broadcasts of a tap beside 2 would be 16");
    assert!(p.kernel_terms(&two_rows)[2] < 1.0, "28 + 6 + 1 registers do not fit in 32");
    assert_eq!(p.register_tile(&one_row).2, 6.0);
    assert_eq!(p.kernel_terms(&one_row)[2], 1.0, "14 + 6 + 1 fit");
    assert!(p.predict(&one_row) < p.predict(&two_rows));
    // Without the taps in the register tile nothing is reused across them:
    // the rows stream past as before.
    let taps_outside = Config { tiles: vec![vec![1, 1, 1], vec![512, 32, 32], vec![7, 6, 2], vec![7, 7, 7], vec![512, 512, 8], vec![3, 3, 1], vec![3, 3, 1]], ..two_rows.clone() };
    assert_eq!(p.register_tile(&taps_outside).2, 2.0);
    // ResNet-50 R5's 12 columns x 2 vectors with 3 taps: the broadcasts one
    // at a time beside the 3 taps' 6 weight vectors, 24 + 6 + 1 registers
    // (LLVM did so: no spills).
    let r5 = workload_problem_on("conv2d_resnet50_r5", p.target.clone());
    let twelve = Config { tiles: vec![vec![1, 1, 1], vec![128, 128, 32], vec![28, 28, 1], vec![28, 12, 12], vec![128, 128, 1], vec![3, 3, 3], vec![3, 3, 3]], ..two_rows.clone() };
    assert!(r5.valid(&twelve));
    assert_eq!(r5.register_tile(&twelve).2, 6.0);
    assert_eq!(r5.kernel_terms(&twelve)[2], 1.0);
    // 7 taps of 24 FMAs stay a loop (ResNet's stem): nothing is reused
    // across them.
    let stem = workload_problem_on("conv2d_resnet50_r0", p.target.clone());
    let seven = Config { tiles: vec![vec![1, 1, 1], vec![64, 32, 32], vec![112, 24, 3], vec![112, 16, 4], vec![3, 3, 3], vec![7, 7, 7], vec![7, 7, 7]], pack: vec![1, 3], ..two_rows.clone() };
    assert!(stem.valid(&seven));
    assert_eq!(stem.register_tile(&seven).2, 2.0);
}

/// A read with a stride packs densely (the `cache` pass's `copy ...
/// stride`): ResNet-50 R4 (1x1, stride 2, 28x28 outputs) vectorised along
/// `ow` reads `x[.., oh * 2, ow * 2]`, whose lanes are 2 apart in the
/// tensor but contiguous in a packed copy; the model counts them as whole
/// vector loads there and as gathered lanes otherwise.
#[test]
fn the_cpu_model_sees_strided_reads_packed_densely() {
    let p = workload_problem("conv2d_resnet50_r4", "x86-avx512");
    let tiles: Vec<Vec<u64>> = [[1, 1, 1], [32, 32, 8], [28, 28, 2], [16, 16, 16], [256, 64, 64], [1, 1, 1], [1, 1, 1]].iter().map(|t| t.to_vec()).collect();
    let cfg = |pack_xv: u8| Config { tiles: tiles.clone(), vthreads: vec![1; 7], pack: vec![pack_xv, 0], order: (0..7).collect(), vector: Some(3), intrinsic: None };
    let (packed, unpacked) = (cfg(1), cfg(0));
    assert!(p.valid(&packed));
    assert_eq!(p.register_tile(&packed), (16.0, 10.0, 2.0), "8 x 2 accumulators; 2 vectors of the packed input and 8 broadcasts per step");
    let (_, gathered, _) = p.register_tile(&unpacked);
    assert_eq!(gathered, 8.0 + 32.0 * p.target.model.gather_load_cost, "32 lanes gathered, 2 apart");
    assert!(p.predict(&packed) < p.predict(&unpacked));
}

/// Prints the model's view of a few GEMM schedules on `host` (the
/// hand-written one of `examples/gemm1024_avx2.tile`, it without A packed,
/// and those given in `C`): prediction, micro-kernel terms, and per tile
/// level the traffic, footprint, packed traffic and conflicts. For tuning:
/// `W=gemm_bert_m5 cargo test -p tilec-passes show_gemm_predictions -- --ignored --nocapture`.
#[test]
#[ignore]
fn show_gemm_predictions() {
    let name = std::env::var("W").unwrap_or_else(|_| "gemm_1024".into());
    let p = workload_problem(&name, "host");
    let cfg = |tiles: [[u64; 3]; 3], pack: [u8; 2], order: [usize; 3]| Config { tiles: tiles.iter().map(|t| t.to_vec()).collect(), vthreads: vec![1; 3], pack: pack.to_vec(), order: order.to_vec(), vector: Some(1), intrinsic: None };
    let ext: Vec<u64> = p.axes.iter().map(|a| a.extent).collect();
    let k = ext[2];
    let mut cands = vec![
        ("hand".to_string(), cfg([[64, 64, 4], [256, 256, 16], [k, 256, 256]], [2, 3], [1, 0, 2])),
        ("hand-b".to_string(), cfg([[64, 64, 4], [256, 256, 16], [k, 256, 256]], [0, 3], [1, 0, 2])),
    ];
    // More from `C`: `name=i.core/i.l2/i.l1,j..,k..,pack a/pack b,order`
    // separated by `;`, e.g. `C='strip=4/4/4,256/64/16,3072/128/32,0/0,0/1/2'`.
    for spec in std::env::var("C").unwrap_or_default().split(';').filter(|s| !s.is_empty()) {
        let (name, fields) = spec.split_once('=').expect("name=...");
        let nums: Vec<Vec<u64>> = fields.split(',').map(|f| f.split('/').map(|n| n.parse().expect("a number")).collect()).collect();
        let tile = |a: usize| [nums[a][0], nums[a][1], nums[a][2]];
        let order = [nums[4][0] as usize, nums[4][1] as usize, nums[4][2] as usize];
        cands.push((name.to_string(), cfg([tile(0), tile(1), tile(2)], [nums[3][0] as u8, nums[3][1] as u8], order)));
    }
    for (n, c) in &cands {
        println!("{n:12} valid {} pred {:7.1} GFLOP/s terms {:?} regtile {:?} run {}", p.valid(c), p.flops / p.predict(c) / 1e9, p.kernel_terms(c), p.register_tile(c), p.reduction_run(c));
        for l in 0..3 {
            println!("    level {l}: traffic {:.3e} footprint {} cap {} pack a {:.3e} pack b {:.3e} conflicts a {} b {}", p.traffic(c, l), p.footprint(c, l), p.capacity(l), p.pack_traffic(c, 0, l), p.pack_traffic(c, 1, l), p.conflicts(c, 0, l), p.conflicts(c, 1, l));
        }
    }
}

/// Prints the model's view of the schedules (for `$TARGET`, default `host`) of the tile
/// files in `FILES` (separated by spaces): the prediction, the micro-kernel
/// terms, the terms the loop order decides, and per tile level the traffic
/// and each read's packed or fresh bytes. A diagnostic, not a check:
/// `FILES='a.tile b.tile' cargo test -p tilec-passes show_predictions -- --ignored --nocapture`.
#[test]
#[ignore]
fn show_predictions() {
    let target = tilec::target::builtin(&std::env::var("TARGET").unwrap_or_else(|_| "host".into())).unwrap();
    // Relative paths are the workspace root's (cargo runs tests in the crate's folder).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for path in std::env::var("FILES").unwrap_or_default().split_whitespace() {
        let m = parse(&std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}")));
        let f = &m.funcs[0];
        let op = f.walk().into_iter().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
        let mut p = space::Problem::new(f, op, target.clone(), 16).unwrap().with_intrinsics(f);
        // `CORES=1`: predicted for one core, as a search measured on one thread is.
        p.model_cores = std::env::var("CORES").ok().and_then(|c| c.parse().ok());
        let s = f.ops[op].kind.as_compute().unwrap().schedule.clone().unwrap();
        // A hand-written order the space writes otherwise (or not at all):
        // the first of its orders with the named axes in that order.
        let named: Vec<usize> = s.order.iter().filter_map(|n| p.axes.iter().position(|a| &a.name == n)).collect();
        let Some(c) = p.config_of(&s).or_else(|| {
            let c = p.config_of(&Schedule { order: Vec::new(), ..s.clone() })?;
            let order = p.orders.iter().find(|o| o.iter().filter(|a| named.contains(a)).eq(named.iter()))?;
            Some(Config { order: order.clone(), ..c })
        }) else {
            println!("{path}: not a point of the space");
            continue;
        };
        let cores = target.compute.units as f64;
        println!(
            "{path}: valid {} pred {:.1} GFLOP/s ({:.3} ms) terms {:?} regtile {:?} run {} order {:?} order_s {:.3e} page_stall(all cores) {:.3e}",
            p.valid(&c),
            p.flops / p.predict(&c) / 1e9,
            p.predict(&c) * 1e3,
            p.kernel_terms(&c),
            p.register_tile(&c),
            p.reduction_run(&c),
            c.order,
            p.order_seconds(&c),
            p.page_step_stall(&c, cores)
        );
        for l in 0..p.levels {
            let reads: Vec<String> = (0..c.pack.len())
                .map(|r| format!("r{r}: copies {:.3e} fresh {:.3e} {:?} conflicts {}", p.pack_traffic(&c, r, l), p.fresh_traffic(&c, r, l), p.page_steps(&c, r), p.conflicts(&c, r, l)))
                .collect();
            println!("    level {l}: traffic {:.3e} footprint {} cap {} | {}", p.traffic(&c, l), p.footprint(&c, l), p.capacity(l), reads.join(" | "));
        }
    }
}

/// Two CPU terms measured on BERT M5 (512x768x3072) on an AMD EPYC 7763
/// host, on `x86-avx2` (docs/search.md, "The CPU part of the space and the
/// model"): a register tile one vector wide holds a broadcast per row until
/// its FMA (8x8 spilled an accumulator: 41 GFLOP/s against 81 for 4x16),
/// and a core tile of 4 rows re-reads all of B from L3 per strip, time the
/// core spends waiting rather than computing (48 ms against 29).
#[test]
fn the_cpu_model_sees_held_broadcasts_and_waits_on_shared_caches() {
    // The host's description: `x86-avx2` cut to 2 of its 64 cores (with
    // 64 the hand-written tiles leave most cores idle).
    let mut t = (*tilec::target::builtin("x86-avx2").unwrap()).clone();
    let share = 2.0 / t.compute.units as f64;
    t.compute.units = 2;
    for v in t.peak_gflops.values_mut() {
        *v *= share;
    }
    for m in t.memory.iter_mut().filter(|m| m.name == "l3" || m.name == "l2" || m.name == "l1") {
        m.bandwidth_gbs *= share;
    }
    t.memory.iter_mut().find(|m| m.name == "l3").unwrap().capacity_bytes = 32 << 20;
    let p = workload_problem_on("gemm_bert_m5", Arc::new(t));
    let cfg = |tiles: [[u64; 3]; 3], pack: [u8; 2], order: [usize; 3]| Config { tiles: tiles.iter().map(|t| t.to_vec()).collect(), vthreads: vec![1; 3], pack: pack.to_vec(), order: order.to_vec(), vector: Some(1), intrinsic: None };
    let hand = cfg([[64, 64, 4], [256, 256, 16], [3072, 256, 256]], [2, 3], [1, 0, 2]);
    let narrow = cfg([[64, 64, 8], [256, 256, 8], [3072, 256, 256]], [2, 3], [1, 0, 2]);
    let strip = cfg([[4, 4, 4], [256, 64, 16], [3072, 128, 32]], [0, 0], [0, 1, 2]);
    for c in [&hand, &narrow, &strip] {
        assert!(p.valid(c), "{c:?}");
    }
    assert_eq!(p.register_tile(&hand), (8.0, 6.0, 2.0), "4 rows x 2 vectors; 4 broadcasts, each feeding 2 FMAs, and 2 vector loads");
    assert_eq!(p.register_tile(&narrow), (8.0, 9.0, 9.0), "8 rows x 1 vector; 8 broadcasts, each held for its one FMA, and 1 vector load");
    assert_eq!(p.kernel_terms(&hand)[2], 1.0);
    assert!(p.kernel_terms(&narrow)[2] < 0.5);
    let (t_hand, t_narrow, t_strip) = (p.predict(&hand), p.predict(&narrow), p.predict(&strip));
    assert!(t_narrow > 1.8 * t_hand, "{t_narrow} vs {t_hand}");
    assert!(t_strip > 1.4 * t_hand, "{t_strip} vs {t_hand}");
}

/// A made-up landscape: each candidate's time follows from its printed
/// module (the same candidate, the same time, whatever the order), and
/// about one in five crashes.
struct Landscape {
    calls: usize,
}

impl Evaluator for Landscape {
    fn evaluate(&mut self, candidate: &Module, _: &str) -> Measurement {
        self.calls += 1;
        let text = tilec::syntax::print_module(candidate);
        let h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        if h % 5 == 0 {
            return Err(Failure::Crash("landscape crash".into()));
        }
        let t = 1e-3 * (1.0 + (h % 1000) as f64 / 100.0);
        Ok(Timing { median_s: t, min_s: t, max_s: t, runs: 1 })
    }
}

/// GEMM on `x86-avx2` searched by `strategy` with the landscape evaluator:
/// the records, the report, the chosen schedule.
fn learning_search(strategy: &str, extra: &[(&'static str, &str)], known: Option<Vec<Record>>) -> (Vec<Record>, String, RecordSchedule) {
    let t = tilec::target::builtin("x86-avx2").unwrap();
    let mut m = parse(GEMM);
    let mut cx = PassContext::with_target(Some(t));
    cx.set_evaluator(Some(Box::new(Landscape { calls: 0 })));
    if let Some(k) = known {
        cx.add_records(tilec::records::RESUME.into(), Arc::new(k));
    }
    let mut options = vec![("final-rounds", "0")];
    options.extend_from_slice(extra);
    search(strategy, &options).run(&mut m, &mut cx).unwrap_or_else(|d| panic!("{strategy}: {d:?}"));
    let f = &m.funcs[0];
    let c = f.walk().into_iter().find_map(|o| f.ops[o].kind.as_compute()).unwrap();
    (cx.take_records(), cx.take_reports().join(""), RecordSchedule::of(c.schedule.as_ref().unwrap()))
}

#[test]
fn learning_strategies_spend_their_trials_survive_failures_and_repeat_themselves() {
    for (strategy, extra) in [("gradient", vec![("trials", "20"), ("start-samples", "64")]), ("evolutionary", vec![("trials", "20"), ("batch", "8"), ("population", "64")])] {
        let (records, report, chosen) = learning_search(strategy, &extra, None);
        assert_eq!(records.len(), 20, "{strategy}: every trial is one measurement\n{report}");
        let distinct: std::collections::BTreeSet<String> = records.iter().map(|r| r.sentence.clone()).collect();
        assert_eq!(distinct.len(), 20, "{strategy}: no point measured twice");
        assert!(records.iter().any(|r| r.error.is_some()), "{strategy}: the landscape crashes some");
        // The fastest measured point wins.
        let fastest = records.iter().filter(|r| r.latency.is_some()).min_by(|a, b| a.latency.as_ref().unwrap().median_s.total_cmp(&b.latency.as_ref().unwrap().median_s)).unwrap();
        assert_eq!(chosen, fastest.schedule, "{strategy}\n{report}");
        assert!(report.contains("cost model: gbdt-af, learned from 20 measurements"), "{report}");
        // The same seed and the same measurements: the same search.
        let (again, _, chosen_again) = learning_search(strategy, &extra, None);
        assert_eq!(again.iter().map(|r| &r.sentence).collect::<Vec<_>>(), records.iter().map(|r| &r.sentence).collect::<Vec<_>>(), "{strategy}");
        assert_eq!(chosen_again, chosen);
        // Another seed walks elsewhere.
        let mut other = extra.clone();
        other.push(("seed", "7"));
        let (moved, _, _) = learning_search(strategy, &other, None);
        assert_ne!(moved.iter().map(|r| &r.sentence).collect::<Vec<_>>(), records.iter().map(|r| &r.sentence).collect::<Vec<_>>(), "{strategy}");
        // Given its records (a warm start), the model learns from the timed
        // ones before the search, and a timed point is not timed again.
        let (resumed, report, _) = learning_search(strategy, &extra, Some(records.clone()));
        let learned: usize = report.split("learned from ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).expect("the model's line");
        let timed = records.iter().filter(|r| r.latency.is_some()).count();
        assert!(learned >= timed + resumed.len() - 1, "{learned} rows, {timed} timed records\n{report}");
        let old: std::collections::BTreeSet<String> = records.iter().filter(|r| r.latency.is_some()).map(|r| r.sentence.clone()).collect();
        assert!(resumed.iter().all(|r| !old.contains(&r.sentence)), "{strategy}: a timed point is not timed again");
    }
}

/// Gradient's first measurements are markov's best constructed states
/// (`constructed-starts`), before any predicted random sample; with none,
/// its first measurement is another point.
#[test]
fn gradient_measures_markovs_construction_first() {
    let mut m = parse(GEMM);
    let mut cx = PassContext::with_target(Some(tilec::target::builtin("x86-avx2").unwrap()));
    search("markov", &[]).run(&mut m, &mut cx).unwrap();
    let f = &m.funcs[0];
    let constructed = RecordSchedule::of(f.walk().into_iter().find_map(|o| f.ops[o].kind.as_compute()).unwrap().schedule.as_ref().unwrap());
    let (records, report, _) = learning_search("gradient", &[("trials", "6"), ("start-samples", "64"), ("constructed-starts", "2")], None);
    assert_eq!(records[0].schedule, constructed, "{report}");
    assert_eq!(records.len(), 6);
    let (records, report, _) = learning_search("gradient", &[("trials", "6"), ("start-samples", "64"), ("constructed-starts", "0")], None);
    assert_ne!(records[0].schedule, constructed, "{report}");
}

#[test]
fn learning_strategies_need_an_evaluator() {
    for strategy in ["gradient", "evolutionary"] {
        let mut m = parse(GEMM);
        let mut cx = PassContext::with_target(Some(tilec::target::builtin("x86-avx2").unwrap()));
        let d = search(strategy, &[]).run(&mut m, &mut cx).expect_err("no evaluator");
        let d = d.iter().next().unwrap();
        assert!(d.message.contains(&format!("search strategy `{strategy}` learns from measurements, and nothing measures here")), "{}", d.message);
    }
}

// Tensor intrinsics in the space (docs/search.md).

/// A u8 × i8 GEMM accumulating in i32: what `vpdpbusd` computes.
pub(super) const GEMM_U8: &str = "func @gemm_u8(%A: tensor<64x128xu8>, %B: tensor<128x96xi8>) -> tensor<64x96xi32> {
  %C = compute \"gemm_u8\" (i: 64, j: 96) reduce sum (k: 128) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<64x96xi32>[i, j] {
    %x = cast %a : u8 -> i32
    %y = cast %b : i8 -> i32
    %0 = mul %x, %y : i32
    yield %0 : i32
  }
  return %C
}";

/// The problem of the first compute op of `src` on built-in `target`, with
/// its intrinsic options (`intrinsics=auto`).
fn problem_with_intrinsics(src: &str, target: &str) -> (Module, Problem) {
    let m = parse(src);
    let f = &m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    let p = Problem::new(f, op, tilec::target::builtin(target).unwrap(), 16).unwrap().with_intrinsics(f);
    (m, p)
}

fn option_names(p: &Problem) -> Vec<String> {
    (0..p.intrinsics.len()).map(|i| p.describe_intrinsic(i)).collect()
}

/// The options are every offered vector intrinsic with every basic mapping
/// whose extents are whole intrinsic tiles: `vpdpbusd.zmm` both ways round
/// for the u8 GEMM on `x86-avx512` (its `vdpbf16ps.zmm` is listed, not
/// offered), `vfmadd231ps` for f32 GEMMs; none for the u8 GEMM on
/// `x86-avx2` (it does not offer `vpdpbusd.ymm`), on GPUs, for an op that
/// is no contraction, and without `with_intrinsics`.
#[test]
fn the_intrinsic_options_of_an_op_are_its_offered_vector_intrinsics_and_basic_mappings() {
    let (_, p) = problem_with_intrinsics(GEMM_U8, "x86-avx512");
    assert_eq!(option_names(&p), ["vpdpbusd.zmm a=%a b=%b m=[i] n=[] k=[k]", "vpdpbusd.zmm a=%b b=%a m=[j] n=[] k=[k]"]);
    assert!(p.intrinsics.iter().all(|x| x.is_dot()));
    // f32: `m` takes i (64) or j (80), both multiples of 16 lanes.
    let (_, p) = problem_with_intrinsics(GEMM, "x86-avx512");
    assert_eq!(option_names(&p), ["vfmadd231ps.zmm a=%a b=%b m=[i] n=[] k=[]", "vfmadd231ps.zmm a=%b b=%a m=[j] n=[] k=[]"]);
    assert!(!p.intrinsics[0].is_dot());
    let (_, p) = problem_with_intrinsics(GEMM, "x86-avx2");
    assert_eq!(option_names(&p), ["vfmadd231ps.ymm a=%a b=%b m=[i] n=[] k=[]", "vfmadd231ps.ymm a=%b b=%a m=[j] n=[] k=[]"]);
    // An extent that is not whole lanes leaves that mapping out: j = 72 is
    // not a multiple of 16.
    let (_, p) = problem_with_intrinsics(&GEMM.replace("80", "72"), "x86-avx512");
    assert_eq!(option_names(&p), ["vfmadd231ps.zmm a=%a b=%b m=[i] n=[] k=[]"]);
    let (_, p) = problem_with_intrinsics(GEMM_U8, "x86-avx2");
    assert!(p.intrinsics.is_empty(), "{:?}", option_names(&p));
    let (_, p) = problem_with_intrinsics(GEMM, "sm90");
    assert!(p.intrinsics.is_empty());
    // GEMV's vector read is walked along the reduction only: no axis goes
    // onto `m` with 16 lanes (i = 9); pooling is no contraction.
    for src in [crate::samples::OPS[2], crate::samples::OPS[9]] {
        let (_, p) = problem_with_intrinsics(src, "x86-avx512");
        assert!(p.intrinsics.is_empty(), "{:?}", option_names(&p));
    }
    let (m, _) = problem_with_intrinsics(GEMM_U8, "x86-avx512");
    let f = &m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    assert!(Problem::new(f, op, tilec::target::builtin("x86-avx512").unwrap(), 16).unwrap().intrinsics.is_empty());
}

/// An int8 convolution's options: `vpdpbusd.zmm` with the lanes on `f`
/// (basic) and on `oh · ow` (fused: 28 × 28 splits 16 lanes 4 × 4); the
/// fused option's parts size its tiles, its point has no vector and
/// verifies, its schedule names both axes and `tensorize` compiles it
/// with 4 × 4 parts; tiles that split the lanes otherwise (`ow` taking 8)
/// are not its points; the model charges its gathered lanes, so the same
/// tiles are predicted slower than with the lanes on `f`.
#[test]
fn a_fused_mapping_is_an_option_whose_tiles_split_the_lanes() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../benchmarks/workloads/conv2d_int8_resnet50_r5.tile")).unwrap();
    let (m, p) = problem_with_intrinsics(&src, "x86-avx512");
    let names = option_names(&p);
    let fused = names.iter().position(|n| n.contains("m=[oh, ow]")).unwrap_or_else(|| panic!("{names:?}"));
    let basic = names.iter().position(|n| n.contains("m=[f]")).unwrap_or_else(|| panic!("{names:?}"));
    let x = &p.intrinsics[fused];
    let axis = |name: &str| p.compute.axes.iter().position(|a| a.name == name).unwrap();
    let (f, oh, ow, c) = (axis("f"), axis("oh"), axis("ow"), axis("c"));
    assert_eq!((x.size_of(oh), x.size_of(ow), x.size_of(c), x.size_of(f)), (4, 4, 4, 1));
    assert!(x.fused_lanes() && x.m_axis().is_none());
    let start = p.start(Some(fused));
    assert_eq!(start.vector, None);
    assert!(p.fits_intrinsic(&start));
    assert_eq!(p.register_lanes(&start), 16);
    let mut wider = start.clone();
    let last = p.levels - 1;
    for l in 0..p.levels {
        wider.tiles[ow][l] = 8;
        wider.tiles[oh][l] = if l == last { 2 } else { 4 };
    }
    assert!(!p.fits_intrinsic(&wider), "ow's 8 would take 8 of the lanes, not the option's 4");
    let s = p.schedule(&start);
    let knob = s.intrinsic.as_ref().expect("a knob");
    assert_eq!(knob.m, ["oh", "ow"]);
    let mut scheduled = m.clone();
    crate::testing::set_schedule(&mut scheduled, s.clone());
    let v = tilec::verify::verify_module_with(&scheduled, Some(&p.target));
    assert!(!v.has_errors(), "{v:?}");
    // The same register tile (16 f × 4 oh × 4 ow, 16 accumulators) with
    // the lanes on f, vectorised, the weights packed as a dot option starts.
    let mut fused_tile = start.clone();
    let mut along_f = p.start(Some(basic));
    along_f.tiles.clone_from(&start.tiles);
    for l in 0..p.levels {
        fused_tile.tiles[f][l] = 16;
        along_f.tiles[f][l] = 16;
    }
    assert!(p.valid(&along_f) && p.valid(&fused_tile), "{along_f:?} {fused_tile:?}");
    assert_eq!(p.register_tile(&fused_tile).0, p.register_tile(&along_f).0);
    assert!(p.predict(&fused_tile) > p.predict(&along_f), "fused {} against basic {}", p.predict(&fused_tile), p.predict(&along_f));
}

/// A point of a GEMM with intrinsic choice `option`: `tiles[level]` the
/// sizes of `(i, j, k)` at `core`, `l2`, `l1`.
fn vnni_point(p: &Problem, option: Option<usize>, tiles: [[u64; 3]; 3]) -> Config {
    let mut cfg = p.start(option);
    cfg.tiles = (0..3).map(|a| tiles.iter().map(|level| level[a]).collect()).collect();
    cfg
}

/// `schedule` writes the knob and `config_of` reads it back; the
/// schedule passes the verifier's check of the knob against the target
/// and the mapping candidates; what `valid` refuses with an intrinsic:
/// partial tiles, innermost tiles that are not whole intrinsic tiles, a
/// vector off the `m` axis.
#[test]
fn the_intrinsic_knob_round_trips_through_schedules_and_valid_checks_its_rules() {
    let (m, p) = problem_with_intrinsics(GEMM_U8, "x86-avx512");
    let t = p.target.clone();
    let along_j = vnni_point(&p, Some(1), [[32, 96, 128], [8, 48, 32], [4, 16, 8]]);
    assert!(p.valid(&along_j));
    assert_eq!(p.vector_width(&along_j), 16);
    let s = p.schedule(&along_j);
    let x = s.intrinsic.as_ref().expect("an intrinsic knob");
    assert_eq!((x.name.as_str(), x.a, x.a_name.as_str()), ("vpdpbusd.zmm", 1, "b"));
    assert_eq!((x.m.clone(), x.n.clone(), x.k.clone()), (vec!["j".to_string()], vec![], vec!["k".to_string()]));
    assert_eq!(s.vector, Some(("j".to_string(), 16)));
    assert_eq!(p.config_of(&s), Some(along_j.clone()));
    let sentence = tensor_language::sentence_of(&p, &along_j).unwrap().join(" ");
    assert!(sentence.contains(" intrinsic=vpdpbusd.zmm:a=in1:m=j:n=:k=k split "), "{sentence}");
    let mut scheduled = m.clone();
    crate::testing::set_schedule(&mut scheduled, s.clone());
    let v = tilec::verify::verify_module_with(&scheduled, Some(&t));
    assert!(!v.has_errors(), "{v:?}");
    // The same tiles without the intrinsic are another point, and map back
    // to it.
    let plain = Config { intrinsic: None, ..along_j.clone() };
    assert!(p.valid(&plain));
    assert_eq!(p.schedule(&plain).intrinsic, None);
    assert_eq!(p.config_of(&p.schedule(&plain)), Some(plain));
    // The other option, lanes along i.
    let along_i = vnni_point(&p, Some(0), [[16, 96, 128], [16, 16, 32], [16, 4, 8]]);
    assert!(p.valid(&along_i), "{along_i:?}");
    assert_eq!(p.config_of(&p.schedule(&along_i)), Some(along_i));
    // What valid refuses.
    let partial = vnni_point(&p, Some(1), [[32, 64, 128], [8, 64, 32], [4, 32, 8]]);
    assert!(!p.valid(&partial), "j tiles of 64 leave a partial tile of 96");
    assert!(p.valid(&Config { intrinsic: None, ..partial }), "legal without the intrinsic");
    let narrow = vnni_point(&p, Some(1), [[32, 96, 128], [8, 48, 32], [4, 8, 8]]);
    assert!(!p.valid(&narrow), "an innermost j tile of 8 is half the 16 lanes");
    let short_k = vnni_point(&p, Some(1), [[32, 96, 128], [8, 48, 32], [4, 16, 2]]);
    assert!(!p.valid(&short_k), "an innermost k tile of 2 is half of k = 4");
    let off_axis = Config { vector: Some(0), ..along_j.clone() };
    assert!(!p.valid(&off_axis), "the vector must be on m");
    // A schedule whose knob names no option of this space maps to no point.
    let mut other = s.clone();
    other.intrinsic.as_mut().unwrap().name = "vdpbf16ps.zmm".into();
    assert_eq!(p.config_of(&other), None);
    assert_eq!(Problem::new(&m.funcs[0], p.op, t, 16).unwrap().config_of(&s), None, "intrinsics=none has no such point");
}

/// The model (docs/search.md): a `dot` intrinsic does `k` multiply-adds
/// per lane and instruction at its own rate, so the VNNI point of the u8
/// GEMM is predicted faster than the same tiles vectorised; an `fma`
/// intrinsic is the vector loop's own instruction, predicted the same.
#[test]
fn the_model_predicts_vnni_faster_and_fma_the_same() {
    let (_, p) = problem_with_intrinsics(GEMM_U8, "x86-avx512");
    // A 4 x 16 register tile (4 accumulators: 0.4 of vpdpbusd's latency
    // hidden), and an 8 x 48 one (24: all of it).
    for (tiles, speedup) in [([[32, 96, 128], [8, 48, 32], [4, 16, 8]], 1.5), ([[32, 96, 128], [8, 48, 32], [8, 48, 8]], 3.0)] {
        let vnni = vnni_point(&p, Some(1), tiles);
        assert!(p.valid(&vnni), "{vnni:?}");
        assert!(vnni.pack_level(1).is_some(), "the lanes operand (`%b`) starts packed: {vnni:?}");
        let plain = Config { intrinsic: None, ..vnni.clone() };
        // Unpacked, `%b`'s 64 bytes are gathered for every instruction.
        let gathered = Config { pack: vec![0; vnni.pack.len()], ..vnni.clone() };
        assert!(p.predict(&vnni) * 2.0 < p.predict(&gathered), "packed {:e} s against gathered {:e} s", p.predict(&vnni), p.predict(&gathered));
        let (with, without) = (p.predict(&vnni), p.predict(&plain));
        eprintln!("{tiles:?}: vpdpbusd {:.1} GOP/s, vectorised {:.1} GOP/s; kernel terms {:?} against {:?}", p.flops / with / 1e9, p.flops / without / 1e9, p.kernel_terms(&vnni), p.kernel_terms(&plain));
        assert!(with * speedup < without, "vpdpbusd {with:e} s against {without:e} s vectorised");
    }
    let (_, f) = problem_with_intrinsics(GEMM, "x86-avx512");
    let fma = vnni_point(&f, Some(1), [[32, 80, 48], [8, 80, 48], [4, 16, 8]]);
    assert!(f.fits_intrinsic(&fma), "{fma:?}");
    assert!(f.valid(&fma), "{fma:?}");
    let vector = Config { intrinsic: None, ..fma.clone() };
    assert_eq!(f.predict(&fma), f.predict(&vector));
    assert_eq!(f.kernel_terms(&fma), f.kernel_terms(&vector));
}

/// Markov on the u8 GEMM for `x86-avx512` picks `vpdpbusd.zmm`, and the
/// pick goes through `tile`, `cache`, `vthread`, `bind`, `vectorize`,
/// `tensorize`, `unroll` into `intrinsic` ops that compute what the op
/// computes; `intrinsics=none` picks none.
#[test]
fn markov_picks_vnni_for_a_u8_gemm_and_the_pick_tensorizes_correctly() {
    let t = tilec::target::builtin("x86-avx512").unwrap();
    let mut passes: Vec<Box<dyn Pass>> = vec![Box::new(search("markov", &[("budget", "1000")]))];
    for d in [&crate::tile::DECL, &crate::cache::DECL, &crate::vthread::DECL, &crate::bind::DECL, &crate::vectorize::DECL, &crate::tensorize::DECL, &crate::unroll::DECL] {
        passes.push(make(d));
    }
    let mut refs: Vec<&mut (dyn Pass + 'static)> = passes.iter_mut().map(|p| p.as_mut()).collect();
    let out = check_equivalent(&parse(GEMM_U8), &t, &mut refs, 5);
    let text = tilec::syntax::print_module(&out);
    assert!(text.contains("intrinsic = {name = \"vpdpbusd.zmm\""), "{text}");
    assert!(text.contains("intrinsic \"vpdpbusd.zmm\" dot"), "{text}");
    let (m, reports) = searched(GEMM_U8, &t, search("markov", &[("budget", "1000")]));
    assert!(reports[0].contains("per intrinsic option (vpdpbusd.zmm a=%a b=%b m=[i] n=[] k=[k]; vpdpbusd.zmm a=%b b=%a m=[j] n=[] k=[k])"), "{}", reports[0]);
    assert!(tilec::syntax::print_module(&m).contains("vpdpbusd.zmm"));
    let (m, reports) = searched(GEMM_U8, &t, search("markov", &[("budget", "1000"), ("intrinsics", "none")]));
    assert!(!tilec::syntax::print_module(&m).contains("intrinsic"), "{}", tilec::syntax::print_module(&m));
    assert!(!reports[0].contains("intrinsic option"), "{}", reports[0]);
}

/// Every strategy that does not measure schedules the u8 GEMM on
/// `x86-avx512` correctly through the pipeline with `tensorize`, whichever
/// intrinsic choice it makes; markov and random reach the intrinsic.
#[test]
fn every_strategy_schedules_the_u8_gemm_with_intrinsics_in_the_space() {
    let t = tilec::target::builtin("x86-avx512").unwrap();
    for strategy in ["markov", "roller", "random"] {
        let out = search_and_check(GEMM_U8, &t, search(strategy, &[("budget", "300")]));
        let text = tilec::syntax::print_module(&out);
        // Roller grows tiles by traffic per footprint, and a VNNI start's
        // packed operand weighs on its footprints: its beam may end
        // without the intrinsic (correct either way, checked above).
        if strategy != "roller" {
            assert!(text.contains("intrinsic \"vpdpbusd.zmm\" dot"), "{strategy}: {text}");
        }
    }
}

/// The knob space draws and moves the intrinsic knob: samples with and
/// without an intrinsic, all valid, each decoding back.
#[test]
fn the_knob_space_samples_the_intrinsic_choice() {
    let (_, p) = problem_with_intrinsics(GEMM_U8, "x86-avx512");
    let space = knobs::KnobSpace::new(&p);
    assert_eq!(space.knobs()[0], knobs::Knob::Intrinsic);
    assert_eq!(space.values(&p.initial(), knobs::Knob::Intrinsic), vec![-1, 0, 1]);
    let mut rng = rng::Rng::new(3);
    let samples = space.distinct_samples(&mut rng, 60);
    let mut seen = std::collections::BTreeSet::new();
    for c in &samples {
        assert!(space.valid(c), "{c:?}");
        assert_eq!(space.decode(&space.encode(c)), Some(c.clone()));
        seen.insert(c.intrinsic);
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![None, Some(0), Some(1)]);
    // A mutation or a hop of the knob gives valid points too.
    let with = samples.iter().find(|c| c.intrinsic.is_some()).unwrap();
    let hops = space.neighbours(with, 1, knobs::TileMoves::Level);
    assert!(hops.iter().all(|h| space.valid(h)) && !hops.is_empty());
}

const GEMM_F16: &str = "func @hgemm(%A: tensor<64x64xf16>, %B: tensor<64x64xf16>) -> tensor<64x64xf32> {
  %C = compute \"hgemm\" (i: 64, j: 64) reduce sum (k: 64) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<64x64xf32>[i, j] {
    %x = cast %a : f16 -> f32
    %y = cast %b : f16 -> f32
    %0 = mul %x, %y : f32
    yield %0 : f32
  }
  return %C
}";

/// Up to `take` distinct points of `p`'s knob space (from 400 draws of
/// seed `seed`) whose intrinsic option `wanted` accepts, each valid and
/// tensorized on sm80 against the interpreter ([`tensorized_on_sm80`]):
/// the points and the tensorized modules.
fn warp_points_tensorized(m: &Module, p: &Problem, seed: u64, take: usize, wanted: impl Fn(usize) -> bool) -> Vec<(Config, Module)> {
    let space = knobs::KnobSpace::new(p);
    let mut rng = rng::Rng::new(seed);
    let points: Vec<Config> = space.distinct_samples(&mut rng, 400).into_iter().filter(|c| c.intrinsic.is_some_and(&wanted)).take(take).collect();
    points
        .into_iter()
        .map(|cfg| {
            assert!(space.valid(&cfg), "{cfg:?}");
            let out = tensorized_on_sm80(m, p, &cfg, seed);
            (cfg, out)
        })
        .collect()
}

/// `m` scheduled by point `cfg` of `p`, through the GPU pipeline down to
/// `tensorize` and `unroll` on sm80, checked against the interpreter.
fn tensorized_on_sm80(m: &Module, p: &Problem, cfg: &Config, seed: u64) -> Module {
    let t = tilec::target::builtin("sm80").unwrap();
    let mut with = m.clone();
    crate::testing::set_schedule(&mut with, p.schedule(cfg));
    let mut passes: Vec<Box<dyn Pass>> = Vec::new();
    for d in [&crate::tile::DECL, &crate::cache::DECL, &crate::vthread::DECL, &crate::bind::DECL, &crate::vectorize::DECL, &crate::tensorize::DECL, &crate::unroll::DECL] {
        passes.push(make(d));
    }
    let mut refs: Vec<&mut (dyn Pass + 'static)> = passes.iter_mut().map(|p| p.as_mut()).collect();
    check_equivalent(&with, &t, &mut refs, seed)
}

/// On GPUs the options are the warp intrinsics `tensorize` rewrites: for
/// an f16 GEMM on sm80 the m16n8k16 `mma` into f32 both ways round (not
/// the f16-accumulating one, nor bf16, tf32 or `wmma`); the knob space
/// draws points with them, and every such point is one `tensorize` makes
/// warps of, computing what the op computes (interpreted).
#[test]
fn warp_intrinsic_points_of_the_space_tensorize_correctly() {
    let (m, p) = problem_with_intrinsics(GEMM_F16, "sm80");
    assert_eq!(
        option_names(&p),
        ["mma.sync.m16n8k16.f32.f16.f16.f32 a=%a b=%b m=[i] n=[j] k=[k]", "mma.sync.m16n8k16.f32.f16.f16.f32 a=%b b=%a m=[j] n=[i] k=[k]"]
    );
    assert!(p.intrinsics.iter().all(|x| x.is_warp()));
    let space = knobs::KnobSpace::new(&p);
    let mut rng = rng::Rng::new(7);
    let warps: Vec<Config> = space.distinct_samples(&mut rng, 200).into_iter().filter(|c| c.intrinsic.is_some()).take(6).collect();
    assert!(warps.len() >= 3, "{} warp points", warps.len());
    for cfg in &warps {
        assert!(space.valid(cfg), "{cfg:?}");
        assert_eq!(p.threads(cfg), p.tiles_per_block(cfg) * 32);
        let out = tensorized_on_sm80(&m, &p, cfg, 3);
        let text = tilec::syntax::print_module(&out);
        assert!(text.contains("map(lane)") && text.contains("lane(%lane_group, %lane_in_group)"), "{text}");
    }
}

/// An f16 convolution on a 12 x 12 image: 12 is no multiple of 16 or 8,
/// so only fused mappings (`h · w`, 4 x 4 of `m`'s 16 rows or 4 x 2 of
/// `n`'s 8 columns) put the image on the intrinsic.
const CONV_F16_12: &str = "func @conv(%x: tensor<1x16x14x14xf16>, %w: tensor<16x16x3x3xf16>) -> tensor<1x16x12x12xf32> {
  %y = compute \"conv\" (n: 1, f: 16, oh: 12, ow: 12) reduce sum (c: 16, r: 3, s: 3)
      reads(%xv = %x[n, c, oh + r, ow + s], %wv = %w[f, c, r, s]) -> tensor<1x16x12x12xf32>[n, f, oh, ow] {
    %p = cast %xv : f16 -> f32
    %q = cast %wv : f16 -> f32
    %0 = mul %p, %q : f32
    yield %0 : f32
  }
  return %y
}";

/// Fused mappings of warp intrinsics are in the space (AMOS's implicit
/// GEMM), and the points the knob space draws with them are ones
/// `tensorize` makes warps of, computing what the op computes.
#[test]
fn fused_warp_points_of_the_space_tensorize_correctly() {
    let (m, p) = problem_with_intrinsics(CONV_F16_12, "sm80");
    let names = option_names(&p);
    assert!(names.contains(&"mma.sync.m16n8k16.f32.f16.f16.f32 a=%xv b=%wv m=[oh, ow] n=[f] k=[c]".to_string()), "{names:#?}");
    assert!(names.contains(&"mma.sync.m16n8k16.f32.f16.f16.f32 a=%wv b=%xv m=[f] n=[oh, ow] k=[c]".to_string()), "{names:#?}");
    let fused = |i: usize| p.intrinsics[i].mapping.m.len() > 1 || p.intrinsics[i].mapping.n.len() > 1;
    let points = warp_points_tensorized(&m, &p, 11, 4, fused);
    assert!(points.len() >= 2, "{} fused warp points", points.len());
    for (_, out) in &points {
        let g = &out.funcs[0];
        let fused_warp = |o: Op| matches!(&g.ops[o].kind, OpKind::Intrinsic(x) if x.lane.is_some() && x.is_fused());
        assert!(g.walk().into_iter().any(fused_warp), "no fused warp intrinsic in\n{}", tilec::syntax::print_module(&out));
    }
}

/// A GEMM whose `M` (40) is no multiple of `mma`'s 16 rows, and whose `N`
/// (24) is none of 16: both ways round an option pads the axis on `m`.
const GEMM_F16_40: &str = "func @hgemm(%A: tensor<40x32xf16>, %B: tensor<32x24xf16>) -> tensor<40x24xf32> {
  %C = compute \"hgemm\" (i: 40, j: 24) reduce sum (k: 32) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<40x24xf32>[i, j] {
    %x = cast %a : f16 -> f32
    %y = cast %b : f16 -> f32
    %0 = mul %x, %y : f32
    yield %0 : f32
  }
  return %C
}";

/// Padded options of warp intrinsics: an extent that is not a whole
/// number of the intrinsic's rows or columns is padded where that adds at
/// most half the work, their spatial axes may end in a partial tile, and
/// the points the knob space draws with them tensorize (the guard of the
/// statement dropped, the fold's kept) into what the op computes.
#[test]
fn padded_warp_points_of_the_space_tensorize_correctly() {
    let (m, p) = problem_with_intrinsics(GEMM_F16_40, "sm80");
    // i: 40 → 48 (×1.2) on `m`, j: 24 on `n` (whole): padded; the other
    // way round i on `n` is whole, j: 24 → 32 on `m` (×1.33): padded too.
    assert_eq!(
        option_names(&p),
        ["mma.sync.m16n8k16.f32.f16.f16.f32 a=%a b=%b m=[i] n=[j] k=[k] (padded)", "mma.sync.m16n8k16.f32.f16.f16.f32 a=%b b=%a m=[j] n=[i] k=[k] (padded)"]
    );
    assert!(p.intrinsics.iter().all(|x| x.padded));
    let points = warp_points_tensorized(&m, &p, 13, 6, |_| true);
    assert!(points.len() >= 3, "{} padded warp points", points.len());
    let mut partial = 0;
    for (cfg, out) in &points {
        partial += usize::from((0..2).any(|a| !p.axes[a].extent.is_multiple_of(cfg.tiles[a][0])));
        let g = &out.funcs[0];
        let warp = |o: Op| matches!(&g.ops[o].kind, OpKind::Intrinsic(x) if x.lane.is_some());
        assert!(g.walk().into_iter().any(warp), "no warp intrinsic in\n{}", tilec::syntax::print_module(&out));
    }
    assert!(partial > 0, "no point with a partial tile");
    // 17 rows padded to 32 would nearly double the work: no option.
    let gemm_17 = GEMM_F16_40.replace("40x24xf32", "17x17xf32").replace("40x32xf16", "17x32xf16").replace("32x24xf16", "32x17xf16").replace("i: 40, j: 24", "i: 17, j: 17");
    let (_, p17) = problem_with_intrinsics(&gemm_17, "sm80");
    assert!(p17.intrinsics.is_empty(), "{:?}", option_names(&p17));
}

/// A batched convolution: four vector axes (`ow`, `n`, `f`, `oh`), so four
/// markov starts.
const CONV_BATCHED: &str = "func @conv(%x: tensor<4x8x10x10xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<4x16x8x8xf32> {
  %y = compute \"conv\" (n: 4, f: 16, oh: 8, ow: 8) reduce sum (c: 8, r: 3, s: 3)
      reads(%xv = %x[n, c, oh + r, ow + s], %wv = %w[f, c, r, s]) -> tensor<4x16x8x8xf32>[n, f, oh, ow] {
    %0 = mul %xv, %wv : f32
    yield %0 : f32
  }
  return %y
}";

/// Markov's budget (issue 23): `budget` walk steps per start (vector axis
/// or intrinsic option), at most `op-budget` per op where one is given:
/// with 60,000 ops with up to three starts get the full budget each, an op
/// with four shares it; `op-budget=0` (the default) gives every start the
/// budget.
#[test]
fn markov_shares_the_op_budget_among_more_than_three_starts() {
    let m = super::markov::Markov { temperature: 1.0, threshold: 1e-30, cache_scale: 0.0, polish: 0, op_budget: 60000 };
    assert_eq!([1, 2, 3, 4, 5, 6].map(|n| m.start_budget(20000, n)), [20000, 20000, 20000, 15000, 12000, 10000]);
    assert_eq!(m.start_budget(100, 4), 100, "a smaller budget is not raised");
    let unlimited = super::markov::Markov { op_budget: 0, ..m };
    assert_eq!(unlimited.start_budget(20000, 4), 20000);
    let t = tilec::target::builtin("x86-avx2").unwrap();
    let visited = |extra: &[(&'static str, &str)]| {
        let mut opts = vec![("budget", "1000"), ("polish", "0")];
        opts.extend_from_slice(extra);
        let (_, reports) = searched(CONV_BATCHED, &t, search("markov", &opts));
        let line = reports[0].lines().find(|l| l.contains("states visited")).unwrap().to_string();
        (line.split(':').nth(1).unwrap().split(',').next().unwrap().trim().parse::<u64>().unwrap(), reports[0].clone())
    };
    let (shared, report) = visited(&[("op-budget", "3000")]);
    assert!(report.contains("budget 750 per vector axis (ow, n, f, oh) (op-budget 3000 over 4 starts)"), "{report}");
    assert_eq!(shared, 3000, "{report}");
    let (full, report) = visited(&[("op-budget", "0")]);
    assert_eq!(full, 4000, "{report}");
    let (default, report) = visited(&[]);
    assert_eq!(default, 4000, "{report}");
    // Three starts or fewer: the op-budget does not bind (a GEMM).
    let (_, report) = searched(GEMM, &t, search("markov", &[("budget", "1000"), ("polish", "0"), ("op-budget", "3000")]));
    assert!(!report[0].contains("op-budget"), "{}", report[0]);
}

/// `mapping_candidates` numbers an op's candidates as `mapping=K` does
/// (tilec-tune runs one search per candidate by that number): a search
/// restricted to candidate K picks a schedule computing with exactly that
/// candidate, and the pick computes what the op computes.
#[test]
fn mapping_candidates_are_numbered_as_the_mapping_option() {
    const GEMM: &str = "func @gemm(%A: tensor<32x64xf32>, %B: tensor<64x48xf32>) -> tensor<32x48xf32> {
  %C = compute \"gemm\" (i: 32, j: 48) reduce sum (k: 64) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<32x48xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}";
    let t = tilec::target::builtin("x86-avx512").unwrap();
    let m = parse(GEMM);
    let f = &m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    let candidates = mapping_candidates(f, op, &t);
    assert_eq!(candidates.iter().map(|(w, _)| w.as_str()).collect::<Vec<_>>(), ["vfmadd231ps.zmm a=%a b=%b m=[i] n=[] k=[]", "vfmadd231ps.zmm a=%b b=%a m=[j] n=[] k=[]"]);
    for (k, (_, choice)) in candidates.iter().enumerate() {
        for strategy in ["markov", "roller", "random"] {
            let s = search(strategy, &[("mapping", &k.to_string())]);
            let (out, _) = searched(GEMM, &t, s);
            let schedule = out.funcs[0].ops[op].kind.as_compute().unwrap().schedule.clone().expect("scheduled");
            assert_eq!(schedule.intrinsic.as_ref(), Some(choice), "{strategy}, mapping={k}");
            search_and_check(GEMM, &t, search(strategy, &[("mapping", &k.to_string())]));
        }
    }
}

/// The model predicts for the cores the candidates run on (`model_cores`,
/// which the `search` pass sets from its evaluator's threads). For all of
/// a 2-core target, a schedule with one core-level tile leaves a core
/// idle and is predicted at about half the speed of one with four; for
/// one core, nothing is idle and the two are near each other. (On one
/// thread, a blocked ResNet-50 R8 schedule with one core-level tile ran in
/// 2.81 ms, where the pick predicted faster for two cores took 4.46.)
#[test]
fn the_model_predicts_for_the_cores_the_candidates_run_on() {
    // BERT M0: 512 x 64, k 1024.
    let mut p = workload_problem_on("gemm_bert_m0", zen1_vm());
    let cfg =
        |i_core: u64| Config { tiles: vec![vec![i_core, 32, 4], vec![64, 64, 16], vec![1024, 128, 8]], vthreads: vec![1; 3], pack: vec![0, 2], order: vec![0, 1, 2], vector: Some(1), intrinsic: None };
    let (one_tile, four_tiles) = (cfg(512), cfg(128));
    assert!(p.valid(&one_tile) && p.valid(&four_tiles));
    let ratio = |p: &space::Problem| p.predict(&one_tile) / p.predict(&four_tiles);
    assert_eq!(p.cores_predicted_for(), 2.0);
    assert!(ratio(&p) > 1.6, "for 2 cores: {}", ratio(&p));
    p.model_cores = Some(1);
    assert_eq!(p.cores_predicted_for(), 1.0);
    assert!((0.8..1.25).contains(&ratio(&p)), "for 1 core: {}", ratio(&p));
    // For one core, the whole op takes longer than for two.
    let mut both = p.clone();
    both.model_cores = None;
    assert!(p.predict(&four_tiles) > 1.6 * both.predict(&four_tiles));
    // More cores than the target has are the target's.
    p.model_cores = Some(8);
    assert_eq!(p.cores_predicted_for(), 2.0);
}

/// A `dot` operand packed in VNNI's layout over a box wider than the
/// register tile is read in strips, each register tile's row a run of its
/// own (`dot_strip_stall`); a box as wide as the register tile is one
/// panel, one run, and costs nothing there. On int8 GEMM 1024 the model
/// then ranks B in 64-wide panels (the box of an L2 tile 64 wide) ahead
/// of 256-wide strips (on a Zen 4 core, 512-wide strips ran 5.51 ms and
/// 64-wide panels 4.97).
#[test]
fn a_dot_operand_packed_wider_than_its_register_tile_is_charged_its_strips() {
    let (_, p) = problem_with_intrinsics(&workload_source("gemm_int8_1024"), "x86-avx512");
    let along_j = p.intrinsics.iter().position(|x| x.mapping.m == [AxisId::new(1)]).expect("vpdpbusd along j");
    let point = |l2: [u64; 3]| {
        let mut c = vnni_point(&p, Some(along_j), [[256, 256, 1024], l2, [4, 64, 32]]);
        c.pack = vec![0, 2];
        c.order = p.orders.iter().find(|o| o.iter().position(|&a| a == 1) < o.iter().position(|&a| a == 0)).expect("an order with j before i").clone();
        c
    };
    let (strips, panels) = (point([8, 256, 1024]), point([64, 64, 1024]));
    assert!(p.valid(&strips) && p.valid(&panels));
    assert_eq!(p.dot_strip_stall(&panels, 1.0), 0.0);
    // Each register tile (4 rows of A) reads B's K x N bytes in rows of 64
    // lanes x 4: 2^30 / (4 x 64 x 4) = 2^20 rows, each a miss of L2
    // (6.1 ns), 10 in flight.
    let l2 = p.target.memory_level("l2").unwrap();
    let rows = (1u64 << 20) as f64;
    let want = rows * l2.latency_ns * 1e-9 / p.target.compute.misses_in_flight;
    assert!((p.dot_strip_stall(&strips, 1.0) - want).abs() < 1e-9 * want.max(1.0), "{} against {want}", p.dot_strip_stall(&strips, 1.0));
    assert!(p.predict(&panels) < p.predict(&strips));
}

/// Lanes two elements apart in the last dimension of a read with no
/// padding (an average pooling's `2·ow + s`), in whole vectors: two vector
/// loads and a shuffle per vector of lanes, as code generation emits them
/// (`STRIDE_TWO_LOADS`, 6 loads' worth), where every lane was charged a
/// gathered load. Packed, or with a partial vector, they are still charged
/// as gathers (see `register_tile`).
#[test]
fn lanes_two_apart_load_as_two_vectors_and_a_shuffle() {
    let (_, p) = problem_with_intrinsics(&workload_source("avgpool_p1"), "x86-avx512");
    let ow = p.compute.axes.iter().position(|a| a.name == "ow").unwrap();
    let mut cfg = p.initial();
    cfg.tiles[ow] = vec![24, 24, 8];
    cfg.vector = Some(ow);
    assert_eq!(p.vector_width(&cfg), 8);
    let (_, loads, _) = p.register_tile(&cfg);
    assert_eq!(loads, 6.0);
    // A partial vector (16 lanes over 24 columns) gathers its lanes.
    let mut partial = cfg.clone();
    partial.tiles[ow] = vec![32, 32, 16];
    assert_eq!(p.vector_width(&partial), 16);
    assert!(p.register_tile(&partial).1 > 16.0, "{}", p.register_tile(&partial).1);
}

/// A padded pooling's stride-2 lanes read straight from the source: the
/// register tiles whose windows lie inside it (`hoist-guards` runs them
/// unpadded) cost two vectors and a shuffle a vector, the border tiles a
/// guarded load a lane. ResNet's stem, 8-lane tiles along `ow` and one row
/// along `oh`: rows from 1 (55 of 56 tiles) and columns from 1 (6 of 7
/// tiles) are inside.
#[test]
fn padded_pooling_lanes_cost_what_the_inside_tiles_run() {
    let (_, p) = problem_with_intrinsics(&workload_source("maxpool_resnet_stem"), "x86-avx512");
    let axis = |name: &str| p.compute.axes.iter().position(|a| a.name == name).unwrap();
    let (oh, ow) = (axis("oh"), axis("ow"));
    let mut cfg = p.initial();
    cfg.tiles[oh] = vec![1, 1, 1];
    cfg.tiles[ow] = vec![8, 8, 8];
    cfg.vector = Some(ow);
    assert_eq!(p.vector_width(&cfg), 8);
    let inside = (55.0 / 56.0) * (6.0 / 7.0);
    assert!((p.padding_interior_share(0, &cfg) - inside).abs() < 1e-12, "{}", p.padding_interior_share(0, &cfg));
    let guarded = 8.0 * p.target.model.guarded_load_cost;
    let (_, loads, _) = p.register_tile(&cfg);
    assert!((loads - (inside * 6.0 + (1.0 - inside) * guarded)).abs() < 1e-9, "{loads}");
    // Without a vector the nest is not versioned: every load is guarded.
    let mut scalar = cfg.clone();
    scalar.vector = None;
    let (_, loads, _) = p.register_tile(&scalar);
    assert!((loads - guarded).abs() < 1e-9, "{loads}");
}

/// The micro-kernel's fills overlap its compute less as they near it: the
/// 4-norm of the two over their larger, nothing where either is nothing.
#[test]
fn fills_near_the_compute_time_stop_overlapping_it() {
    use super::analytic::fill_contention;
    assert_eq!(fill_contention(1.0, 0.0), 0.0);
    assert_eq!(fill_contention(0.0, 1.0), 0.0);
    assert!((fill_contention(1.0, 1.0) - (2f64.powf(0.25) - 1.0)).abs() < 1e-12);
    assert!(fill_contention(1.0, 0.25) < 1e-3);
    assert_eq!(fill_contention(2.0, 1.0), fill_contention(1.0, 2.0));
    assert!(fill_contention(1.0, 0.9) > fill_contention(1.0, 0.5));
}

/// A CPU's core tiles keep its cores busy by their points, not their
/// count: a partial last tile holds fewer points than the others, and the
/// runtime shares iterations out whole. (ResNet-50 R2's pick split its 56
/// columns into 32 and 24 on two threads and scaled 1.75x from one thread
/// to two, where onnxruntime's kernel scaled 2.0x.)
#[test]
fn core_tiles_keep_the_cores_busy_by_their_points() {
    use super::analytic::core_tile_balance;
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(core_tile_balance(&[(56, 32)], 2), 56.0 / 64.0));
    assert!(close(core_tile_balance(&[(56, 28)], 2), 1.0));
    // 32, 32 and 24 on two cores: one core runs 32 + 24.
    assert!(close(core_tile_balance(&[(88, 32)], 2), 88.0 / 112.0));
    // One tile leaves a core idle; one core is always busy.
    assert!(close(core_tile_balance(&[(7, 7), (64, 64)], 2), 0.5));
    assert!(close(core_tile_balance(&[(56, 32), (7, 4)], 1), 1.0));
    // Two axes: 4 + 3 rows by 32 + 24 columns over four cores.
    assert!(close(core_tile_balance(&[(7, 4), (56, 32)], 4), (7.0 * 56.0) / (4.0 * 128.0)));
    // Past 1024 iterations (here 2000 on 64 cores) they are counted in
    // waves: 2000 whole tiles in 32 waves of 64.
    assert!(close(core_tile_balance(&[(4000, 2)], 64), 2000.0 / (32.0 * 64.0)));
    // BERT M0 (512 rows) on a 2-core target: 384 + 128 rows keep the cores
    // 2/3 busy and predict slower than 256 + 256 (by less than 1.5: the
    // model's other terms move too).
    let p = workload_problem_on("gemm_bert_m0", zen3_vm());
    let cfg =
        |i_core: u64| Config { tiles: vec![vec![i_core, 32, 4], vec![64, 64, 16], vec![1024, 128, 8]], vthreads: vec![1; 3], pack: vec![0, 2], order: vec![0, 1, 2], vector: Some(1), intrinsic: None };
    let (even, ragged) = (cfg(256), cfg(384));
    assert!(p.valid(&even) && p.valid(&ragged));
    let ratio = p.predict(&ragged) / p.predict(&even);
    assert!(ratio > 1.2, "ragged / even: {ratio}");
}
