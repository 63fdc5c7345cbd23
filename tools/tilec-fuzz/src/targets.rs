//! The fuzz targets: what one input is run through, in-process, and what
//! counts as a finding beyond a panic (which the worker catches):
//!
//! - `parse`: read (UTF-8 and control-character checks), split at
//!   `// -----`, parse, verify, render every diagnostic, check
//!   `expected-error` annotations; a module that verifies must print,
//!   re-parse, re-verify and print the same text again (invariant 3).
//! - `pipeline`: parse a pass pipeline against the real registry; one that
//!   parses must print back to text that parses to the same pipeline, and
//!   runs on a small sample module (a pass that produces invalid IR, or a
//!   result that differs from the interpreter's before the passes, is a
//!   finding).
//! - `interp`: a valid program runs in the interpreter; the scheduling
//!   passes (where it has schedules) and `canonicalize` must keep its
//!   results, and their output must survive printing and re-parsing.
//! - `compile`: a valid program through the default CPU pipeline (search
//!   and the scheduling passes), compiled for this machine, run with 1
//!   and 2 threads, compared with the interpreter within the element
//!   type's tolerance.

use crate::choices::fnv1a;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use tilec::diag::{Diagnostics, SourceMap};
use tilec::interp::compare::{Comparison, compare, tolerance};
use tilec::interp::{Limits, Tensor, run_function_with};
use tilec::ir::{Module, OpKind, Region, Type, Value};
use tilec::pass::{PassManager, Registry, parse_pipeline};
use tilec::target::Target as TargetDesc;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    Parse,
    Pipeline,
    Interp,
    Compile,
    /// The runner's own test: inputs that panic, abort, overflow the
    /// stack or hang on purpose (not part of `all`).
    SelfTest,
}

impl Target {
    pub const ALL: [Target; 4] = [
        Target::Parse,
        Target::Pipeline,
        Target::Interp,
        Target::Compile,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::Parse => "parse",
            Target::Pipeline => "pipeline",
            Target::Interp => "interp",
            Target::Compile => "compile",
            Target::SelfTest => "selftest",
        }
    }

    pub fn from_name(s: &str) -> Option<Target> {
        [
            Target::Parse,
            Target::Pipeline,
            Target::Interp,
            Target::Compile,
            Target::SelfTest,
        ]
        .into_iter()
        .find(|t| t.name() == s)
    }

    /// How long an input may take before it is a hang.
    pub fn default_timeout(self) -> std::time::Duration {
        std::time::Duration::from_secs(if self == Target::Compile { 30 } else { 10 })
    }

    /// The extension of its corpus files.
    pub fn extension(self) -> &'static str {
        match self {
            Target::Pipeline | Target::SelfTest => "txt",
            _ => "tile",
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A Rust panic, caught in the worker.
    Panic,
    /// The worker died: an abort, a signal, a stack overflow.
    Crash,
    /// No answer within the deadline.
    Hang,
    /// Compiled or transformed code computes something else.
    Mismatch,
    /// A broken invariant that is not a panic: a pass produced invalid IR,
    /// printed text does not parse back.
    Invariant,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Panic => "panic",
            Kind::Crash => "crash",
            Kind::Hang => "hang",
            Kind::Mismatch => "mismatch",
            Kind::Invariant => "invariant",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        [
            Kind::Panic,
            Kind::Crash,
            Kind::Hang,
            Kind::Mismatch,
            Kind::Invariant,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Ran through every check.
    Pass,
    /// The input stopped early for a legitimate reason (a diagnostic, too
    /// large); the reason is a short phrase, counted in the statistics.
    Reject(String),
    Finding(Kind, String),
}

fn reject(why: impl Into<String>) -> Outcome {
    Outcome::Reject(why.into())
}

/// First line of a rendered diagnostic list, for rejection statistics.
fn first_message(d: &Diagnostics) -> String {
    d.iter()
        .find(|x| x.is_error())
        .map(|x| x.message.clone())
        .unwrap_or_default()
}

/// Runs `input` through `target`. `scratch` is a folder of this worker's
/// for files (the input file, compiled libraries).
pub fn run(target: Target, input: &[u8], scratch: &Path) -> Outcome {
    match target {
        Target::Parse => parse(input, scratch),
        Target::Pipeline => pipeline(input),
        Target::Interp => interp(input),
        Target::Compile => compile(input, scratch),
        Target::SelfTest => self_test(input),
    }
}

fn parse(input: &[u8], scratch: &Path) -> Outcome {
    // Through a file, so that the driver's reading checks run too.
    let path = scratch.join("input.tile");
    if let Err(e) = std::fs::write(&path, input) {
        return reject(format!("cannot write the input file: {e}"));
    }
    let mut sources = SourceMap::new();
    let file = match tilec::input::read_source(&mut sources, &path.to_string_lossy()) {
        Ok(f) => f,
        Err(d) => {
            let _ = sources.render(&[d]);
            return reject("not text");
        }
    };
    let text = sources.source(file).to_string();
    // As `--split-input-file --verify-diagnostics` would.
    let chunks = tilec::input::split_input_file(&text);
    if chunks.len() > 1 {
        for range in chunks {
            let produced = match tilec::syntax::parse_range(&sources, file, range.clone()) {
                Ok(m) => tilec::verify::verify_module(&m),
                Err(d) => d,
            };
            let _ = sources.render(&produced.0);
            match tilec::expected::parse_expectations(&sources, file, range) {
                Ok(exp) => {
                    let checked = tilec::expected::check(&sources, exp, &produced.0);
                    let _ = sources.render(&checked.0);
                }
                Err(d) => {
                    let _ = sources.render(&d.0);
                }
            }
        }
    }
    let module = match tilec::syntax::parse(&sources, file) {
        Ok(m) => m,
        Err(d) => {
            let _ = sources.render(&d.0);
            return reject("syntax or resolution error");
        }
    };
    let diags = tilec::verify::verify_module(&module);
    let _ = sources.render(&diags.0);
    if diags.has_errors() {
        return reject("verifier error");
    }
    match round_trip(&module) {
        Ok(()) => Outcome::Pass,
        Err(why) => Outcome::Finding(Kind::Invariant, why),
    }
}

/// Invariant 3: `print(parse(print(m))) == print(m)`, and the printed
/// module verifies.
fn round_trip(module: &Module) -> Result<(), String> {
    let printed = tilec::syntax::print_module(module);
    let again = match tilec::syntax::parse_str("<printed>", &printed) {
        Ok((m, sm)) => {
            let d = tilec::verify::verify_module(&m);
            if d.has_errors() {
                return Err(format!(
                    "the printed module does not verify:\n{}\n--- printed:\n{printed}",
                    sm.render(&d.0)
                ));
            }
            m
        }
        Err((d, sm)) => {
            return Err(format!(
                "the printed module does not parse:\n{}\n--- printed:\n{printed}",
                sm.render(&d.0)
            ));
        }
    };
    let second = tilec::syntax::print_module(&again);
    if second != printed {
        let line = printed
            .lines()
            .zip(second.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!(
            "printing is not stable: line {} differs:\n  first:  {}\n  second: {}\n--- printed:\n{printed}",
            line + 1,
            printed.lines().nth(line).unwrap_or(""),
            second.lines().nth(line).unwrap_or("")
        ));
    }
    Ok(())
}

pub fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(tilec_codegen::registry)
}

fn builtin(name: &str) -> Option<Arc<TargetDesc>> {
    tilec::target::builtin(name)
}

/// The modules a fuzzed pipeline runs on: tiny instances of every op
/// kind (`tilec_passes::samples`), unscheduled, plus two scheduled GEMMs;
/// each with the target it runs for.
fn pipeline_samples() -> Vec<(String, &'static str)> {
    let mut v: Vec<(String, &'static str)> = Vec::new();
    for (i, s) in tilec_passes::samples::OPS.iter().enumerate() {
        v.push((s.to_string(), if i % 2 == 0 { "x86-avx2" } else { "sm90" }));
    }
    v.push((SCHEDULED_CPU.to_string(), "x86-avx2"));
    v.push((SCHEDULED_GPU.to_string(), "sm90"));
    v
}

const SCHEDULED_CPU: &str =
    "func @gemm(%A: tensor<12x10xf32>, %B: tensor<10x16xf32>) -> tensor<12x16xf32> {
  %C = compute \"gemm\" (i: 12, j: 16) reduce sum (k: 10)
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<12x16xf32>[i, j]
      schedule \"x86-avx2\" {
        tile = {i = [6, 6, 2], j = [16, 16, 8], k = [10, 5, 5]},
        cache = {b = l1},
        unroll = 16,
        vector = {j = 8}
      } {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}
";

const SCHEDULED_GPU: &str =
    "func @gemm(%A: tensor<16x8xf32>, %B: tensor<8x12xf32>) -> tensor<16x12xf32> {
  %C = compute \"gemm\" (i: 16, j: 12) reduce sum (k: 8)
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<16x12xf32>[i, j]
      schedule \"sm90\" {
        tile = {i = [8, 2], j = [6, 2], k = [4, 2]},
        vthread = {i = 2},
        cache = {a = shared, b = shared},
        unroll = 8,
        vector = {j = 2}
      } {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}
";

/// Seconds a search that asks for more work than the defaults may run.
const LONG_SEARCH_SECONDS: f64 = 3.0;

/// A search that raises its `budget` or `max-space` above the defaults, or
/// sets `max-seconds` above [`LONG_SEARCH_SECONDS`], is long by request
/// (2^63 walk steps never end; an exhaustive search of 10^11 points with
/// `max-seconds=255` takes 255 s): it gets `max-seconds` =
/// [`LONG_SEARCH_SECONDS`] so that it cannot count as a hang. Searches
/// within the defaults run unbounded: one of those taking seconds is a
/// finding (a threshold that made 20000 one-step walks once took 53 s).
fn bound_long_searches(mut pipeline: tilec::pass::Pipeline) -> tilec::pass::Pipeline {
    for spec in &mut pipeline.passes {
        if spec.decl.name != "search" {
            continue;
        }
        let defaults = tilec::pass::PassOptions::defaults(spec.decl.options);
        let raised = |name: &str| spec.options.uint(name) > defaults.uint(name);
        let limit = spec.options.float("max-seconds");
        let long = raised("budget") || raised("max-space") || limit > LONG_SEARCH_SECONDS;
        if long && (limit == 0.0 || limit > LONG_SEARCH_SECONDS) {
            spec.options.set("max-seconds", tilec::pass::OptionValue::Float(LONG_SEARCH_SECONDS));
        }
    }
    pipeline
}

fn pipeline(input: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(input).into_owned();
    let reg = registry();
    let mut sources = SourceMap::new();
    let file = sources.add("<pass-pipeline>", text.clone());
    let parsed = match parse_pipeline(&text, file, reg) {
        Ok(p) => p,
        Err(d) => {
            let _ = sources.render(&d.0);
            return reject("pipeline error");
        }
    };
    // Printed back (`--dump-pass-pipeline`, reports), it must mean the same.
    let printed = parsed.to_string();
    let file2 = sources.add("<printed pipeline>", printed.clone());
    match parse_pipeline(&printed, file2, reg) {
        Ok(p) if p.to_string() == printed => {}
        Ok(p) => {
            return Outcome::Finding(
                Kind::Invariant,
                format!(
                    "a printed pipeline prints differently after parsing: `{printed}` then `{p}`"
                ),
            );
        }
        Err(d) => {
            return Outcome::Finding(
                Kind::Invariant,
                format!(
                    "a printed pipeline does not parse: `{printed}`:\n{}",
                    sources.render(&d.0)
                ),
            );
        }
    }
    let samples = pipeline_samples();
    let h = fnv1a(input);
    let (src, target_name) = &samples[(h % samples.len() as u64) as usize];
    let (module, _) = tilec::syntax::parse_str("<sample>", src).unwrap_or_else(|(d, sm)| {
        panic!("tilec-fuzz's sample does not parse: {}", sm.render(&d.0))
    });
    let target = builtin(target_name).expect("a built-in target");
    let inputs = seeded_inputs(&module, h);
    let before = interpret(&module, &inputs);
    let parsed = bound_long_searches(parsed);
    let transform = |m: &mut Module| {
        let mut pm = PassManager::new(parsed.clone());
        pm.set_target(target.clone());
        pm.run(m)
    };
    let mut after = module.clone();
    if let Err(d) = transform(&mut after) {
        let text = sources.render(&d.0);
        if d.iter().any(|x| x.message.contains("produced invalid IR")) {
            return Outcome::Finding(Kind::Invariant, format!("{}\n{text}", first_message(&d)));
        }
        return reject(format!("pass failed: {}", first_message(&d)));
    }
    compare_runs(&module, &before, &after, &inputs, "after the pipeline", &|m| transform(m).is_ok())
}

/// Inputs for every function of `m`, seeded by the input's hash.
fn seeded_inputs(m: &Module, seed: u64) -> Vec<Vec<Tensor>> {
    m.funcs
        .iter()
        .map(|f| {
            f.params
                .iter()
                .enumerate()
                .filter_map(|(i, &p)| {
                    f.value_type(p)
                        .as_tensor()
                        .map(|t| Tensor::random(t, Tensor::input_seed(seed, i)))
                })
                .collect()
        })
        .collect()
}

fn interp_limits() -> Limits {
    Limits::at_most(512 << 20)
}

/// The interpreter's results for every function (or why it refused).
fn interpret(m: &Module, inputs: &[Vec<Tensor>]) -> Vec<Result<Vec<Tensor>, String>> {
    m.funcs
        .iter()
        .zip(inputs)
        .map(|(f, ins)| run_function_with(f, ins, &interp_limits()).map_err(|e| e.0))
        .collect()
}

/// Compares the results of `after` (`original` transformed by
/// `transform`; functions matched by name) with `before` (`original`'s).
fn compare_runs(
    original: &Module,
    before: &[Result<Vec<Tensor>, String>],
    after: &Module,
    inputs: &[Vec<Tensor>],
    what: &str,
    transform: &dyn Fn(&mut Module) -> bool,
) -> Outcome {
    let before_funcs = &original.funcs;
    let names: Vec<String> = after.funcs.iter().map(|f| f.name.clone()).collect();
    let mut ran = false;
    for (i, want) in before.iter().enumerate() {
        let Ok(want) = want else { continue };
        let Some(f) = after.funcs.get(i).filter(|f| names.contains(&f.name)) else {
            continue;
        };
        ran = true;
        match run_function_with(f, &inputs[i], &interp_limits()) {
            Err(e) => {
                return Outcome::Finding(
                    Kind::Mismatch,
                    format!(
                        "the interpreter fails {what} on @{} but not before: {}",
                        f.name, e.0
                    ),
                );
            }
            Ok(got) => {
                if let Some((k, amounts)) = scaled_mismatch(&got, want, tolerance_for(f), &before_funcs[i], &inputs[i]) {
                    if accumulators_agree(original, i, &inputs[i], transform) {
                        continue;
                    }
                    return Outcome::Finding(Kind::Mismatch, format!("@{} result {k} differs {what}: {amounts}", f.name));
                }
            }
        }
    }
    if ran {
        Outcome::Pass
    } else {
        reject("the interpreter refused the input")
    }
}

/// Every element type of a function's values and scalar ops: a sum
/// reordered in an f16 accumulator differs by f16's rounding even when
/// the result is f32, so comparisons take the coarsest type's tolerance.
fn before_module_elems(f: &tilec::ir::Function) -> Vec<tilec::ir::ElemType> {
    let mut elems = Vec::new();
    for (v, _) in f.values.iter() {
        let e = match f.value_type(v) {
            Type::Tensor(t) => Some(t.elem),
            Type::Buffer(b) => Some(b.elem),
            Type::Scalar(e) => Some(*e),
            _ => None,
        };
        if let Some(e) = e.filter(|e| !elems.contains(e)) {
            elems.push(e);
        }
    }
    elems
}

/// The tolerance results of `f` are compared with: the coarsest element
/// type's (`tilec::interp::compare::tolerance`), relative to the scale of
/// [`magnitude_scale`].
fn tolerance_for(f: &tilec::ir::Function) -> f64 {
    before_module_elems(f).iter().map(|&e| tolerance(e)).fold(0.0, f64::max)
}

/// The magnitude the rounding of a reordered computation scales with:
/// the largest result of `f` run on the inputs' absolute values, with
/// every epilogue that keeps the accumulator's type yielding the
/// accumulator itself (0 where that run fails).
///
/// Why: the spec lets tiling and virtual threads reorder a sum, and a
/// reordered sum differs by roundings of its partial sums, which are as
/// large as the sum of its terms' magnitudes, not as its result: terms of
/// both signs that cancel leave a small result with a large error (f16
/// over 56 terms: 0.00098 against 0.00244, fuzz finding
/// interp/cancelling-f16-sum.tile), and an epilogue that cancels,
/// `acc * acc / acc - acc`, turns an accumulator's rounding near 1 into
/// 1.5e-8 against an exact 0 (interp/cancelling-epilogue.tile). With the
/// sum of magnitudes as the scale the tolerance needs no factor for the
/// sum's length (a rounding error of u per partial sum adds up, over n
/// terms of random sign, to about u times that sum), so an index error,
/// which is of the order of the result itself, is still found.
fn magnitude_scale(f: &tilec::ir::Function, inputs: &[Tensor]) -> f64 {
    let probe = yielding_accumulators(f).unwrap_or_else(|| f.clone());
    let magnitudes: Option<Vec<Tensor>> = inputs
        .iter()
        .map(|t| {
            let abs: Vec<f64> = (0..t.len()).map(|i| t.get_f64(i).abs()).collect();
            Tensor::from_f64(&t.ty, &abs).ok()
        })
        .collect();
    let Some(magnitudes) = magnitudes else { return 0.0 };
    match run_function_with(&probe, &magnitudes, &interp_limits()) {
        Ok(results) => results.iter().map(max_finite_magnitude).fold(0.0, f64::max),
        Err(_) => 0.0,
    }
}

/// `f` with every epilogue yielding its accumulator itself, or the
/// accumulator cast to the scalar type the epilogue yields; `None` where
/// no epilogue does. (Without the cast, a bf16 sum of 1008 terms whose
/// epilogue ends in `sigmoid` and `cast ... -> f32` was judged by its
/// result's scale: reordered by tiling, its bf16 partial sums near 500
/// round by 2 at a time, and 0.594 against 0.504 after the sigmoid is
/// rounding the spec allows, not a bug. Fuzz finding
/// interp/bf16-sum-cast-epilogue.tile.)
fn yielding_accumulators(f: &tilec::ir::Function) -> Option<tilec::ir::Function> {
    let mut probe = f.clone();
    let mut changed = false;
    let epilogues: Vec<(Region, Value)> = probe
        .ops
        .iter()
        .filter(|(_, op)| op.kind.as_compute().is_some_and(|c| c.has_epilogue))
        .filter_map(|(_, op)| op.regions.get(1).map(|&r| (r, probe.regions[r].args[0])))
        .collect();
    for (region, acc) in epilogues {
        let Some(&last) = probe.regions[region].ops.last() else { continue };
        let Some(yielded) = probe.ops[last].operands.first().copied().filter(|_| matches!(probe.ops[last].kind, OpKind::Yield)) else { continue };
        let (from, to) = (probe.value_type(acc).clone(), probe.value_type(yielded).clone());
        if from == to {
            probe.ops[last].operands[0] = acc;
        } else if matches!((&from, &to), (Type::Scalar(_), Type::Scalar(_))) {
            let span = probe.op_spans[last];
            let cast = probe.create_op(region, OpKind::Cast, vec![acc], vec![to], span);
            let at = probe.regions[region].ops.len() - 1;
            probe.regions[region].ops.insert(at, cast);
            probe.ops[last].operands[0] = probe.result(cast);
        } else {
            continue;
        }
        changed = true;
    }
    changed.then_some(probe)
}

/// After a mismatch of function `i`: do its accumulators still agree when
/// every epilogue yields its accumulator, before and after the same
/// transformation? Then the mismatch is the epilogue amplifying a
/// reordered sum's rounding — `log`, `rsqrt` or a division of an
/// accumulator that cancels to near 0 (`log(acc)` with `acc` 0.0005 in
/// f16 against 0.001 after tiling: 7.6 against 6.9; fuzz finding
/// interp/log-of-cancelling-sum.tile) — which the spec allows. The
/// epilogue's own lowering is still checked by every program whose
/// epilogue does not amplify.
fn accumulators_agree(original: &Module, i: usize, inputs: &[Tensor], transform: &dyn Fn(&mut Module) -> bool) -> bool {
    let Some(probe) = yielding_accumulators(&original.funcs[i]) else { return false };
    let mut before = original.clone();
    before.funcs[i] = probe;
    let mut after = before.clone();
    if !transform(&mut after) {
        return false;
    }
    let (Ok(want), Some(Ok(got))) = (
        run_function_with(&before.funcs[i], inputs, &interp_limits()),
        after.funcs.get(i).map(|f| run_function_with(f, inputs, &interp_limits())),
    ) else {
        return false;
    };
    scaled_mismatch(&got, &want, tolerance_for(&before.funcs[i]), &before.funcs[i], inputs).is_none()
}

fn max_finite_magnitude(t: &Tensor) -> f64 {
    (0..t.len()).map(|i| t.get_f64(i).abs()).filter(|x| x.is_finite()).fold(0.0, f64::max)
}

/// [`first_mismatch`] with the scale of [`magnitude_scale`] for
/// `reference` (whose results on `inputs` are `want`). That scale costs
/// one more interpreter run and only loosens the comparison, so it is
/// computed only for results that differ beyond the result's own scale.
fn scaled_mismatch(got: &[Tensor], want: &[Tensor], rtol: f64, reference: &tilec::ir::Function, inputs: &[Tensor]) -> Option<(usize, String)> {
    first_mismatch(got, want, rtol, 0.0)?;
    first_mismatch(got, want, rtol, magnitude_scale(reference, inputs))
}

/// The first result that differs beyond `rtol`: its position and the
/// amounts (worst error, its element, the two values). Errors are
/// relative to the element plus the larger of the result's largest
/// element and `floor` (see [`magnitude_scale`]).
fn first_mismatch(got: &[Tensor], want: &[Tensor], rtol: f64, floor: f64) -> Option<(usize, String)> {
    got.iter().zip(want).enumerate().find_map(|(k, (g, w))| {
        let c = compare_within(g, w, rtol, floor);
        (!c.passed).then(|| {
            let i = c.worst_index;
            (k, format!("max abs err {:.3e} at element {i} (got {}, want {}; rtol {:.0e})", c.max_abs_err, g.get_f64(i), w.get_f64(i), c.rtol))
        })
    })
}

/// `tilec::interp::compare::compare` with the given tolerance.
fn compare_within(got: &Tensor, want: &Tensor, rtol: f64, floor: f64) -> Comparison {
    let mut c = compare(got, want);
    if got.ty != want.ty {
        return c;
    }
    let scale = max_finite_magnitude(want).max(floor);
    c.rtol = rtol;
    c.passed = (0..want.len()).all(|i| {
        let (g, w) = (got.get_f64(i), want.get_f64(i));
        (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rtol * (w.abs() + scale)
    });
    c
}

/// Parses and verifies; the module, or why not.
/// The source map holds the input, so that later diagnostics (of passes)
/// render against it.
fn load(input: &[u8]) -> Result<(Module, SourceMap), Outcome> {
    let Ok(text) = std::str::from_utf8(input) else {
        return Err(reject("not UTF-8"));
    };
    match tilec::syntax::parse_str("<input>", text) {
        Ok((m, sm)) => {
            if tilec::verify::verify_module(&m).has_errors() {
                return Err(reject("verifier error"));
            }
            Ok((m, sm))
        }
        Err(_) => Err(reject("syntax or resolution error")),
    }
}

/// Rejects programs too large to run quickly: tensors and buffers over
/// `max_elems`, iteration spaces over `max_points`.
fn small_enough(m: &Module, max_elems: u64, max_points: u64) -> Result<(), Outcome> {
    for f in &m.funcs {
        for (v, _) in f.values.iter() {
            let elems = match f.value_type(v) {
                Type::Tensor(t) => t.num_elements(),
                Type::Buffer(b) => b.as_tensor_type().num_elements(),
                _ => Some(1),
            };
            if elems.is_none_or(|n| n > max_elems) {
                return Err(reject("too large"));
            }
        }
        let mut loop_points: u64 = 1;
        for (_, op) in f.ops.iter() {
            match &op.kind {
                OpKind::Compute(c) if c.iteration_points().is_none_or(|n| n > max_points) => {
                    return Err(reject("too large"));
                }
                OpKind::For(l) => loop_points = loop_points.saturating_mul(l.extent),
                _ => {}
            }
        }
        if loop_points > max_points {
            return Err(reject("too large"));
        }
    }
    Ok(())
}

/// The pipeline the interp target checks: the scheduling passes where the
/// module has schedules, and canonicalisation.
fn scheduling_pipeline() -> String {
    tilec_codegen::driver::scheduling_pipeline(None, false, &["canonicalize"])
}

fn interp(input: &[u8]) -> Outcome {
    let (module, mut sources) = match load(input) {
        Ok(m) => m,
        Err(o) => return o,
    };
    if let Err(o) = small_enough(&module, 1 << 18, 1 << 22) {
        return o;
    }
    let inputs = seeded_inputs(&module, fnv1a(input));
    let before = interpret(&module, &inputs);
    if before.iter().all(|r| r.is_err()) {
        return reject("the interpreter refused the input");
    }
    let targets = module.schedule_targets();
    let (text, target) = match targets.as_slice() {
        [] => ("builtin.module(canonicalize)".to_string(), "x86-avx2"),
        [one] => (scheduling_pipeline(), one.as_str()),
        _ => return reject("schedules for several targets"),
    };
    let Some(target) = builtin(target) else {
        return reject("unknown target");
    };
    let file = sources.add("<pipeline>", text.clone());
    let pipeline =
        parse_pipeline(&text, file, registry()).expect("the interp target's pipeline parses");
    let transform = |m: &mut Module| {
        let mut pm = PassManager::new(pipeline.clone());
        pm.set_target(target.clone());
        pm.run(m)
    };
    let mut after = module.clone();
    if let Err(d) = transform(&mut after) {
        if d.iter().any(|x| x.message.contains("produced invalid IR")) {
            return Outcome::Finding(
                Kind::Invariant,
                format!("{}\n{}", first_message(&d), sources.render(&d.0)),
            );
        }
        return reject(format!("pass failed: {}", first_message(&d)));
    }
    if let Err(why) = round_trip(&after) {
        return Outcome::Finding(Kind::Invariant, format!("after `{text}`: {why}"));
    }
    compare_runs(&module, &before, &after, &inputs, &format!("after `{text}`"), &|m| transform(m).is_ok())
}

/// What `tilec-run --backend=cpu` runs when no pipeline is given
/// (`tilec_codegen::driver::default_compiled_pipeline`), with a tenth of
/// the search's default budget: the target tests code generation, and a
/// debug build's search takes seconds.
pub fn default_compiled_pipeline() -> String {
    tilec_codegen::driver::scheduling_pipeline(Some("budget=2000"), false, &[])
}

fn compile(input: &[u8], scratch: &Path) -> Outcome {
    let (module, mut sources) = match load(input) {
        Ok(m) => m,
        Err(o) => return o,
    };
    if let Err(o) = small_enough(&module, 1 << 16, 1 << 20) {
        return o;
    }
    // The target as tilec-run chooses it: the schedules', else this machine.
    let target = match module.schedule_targets().as_slice() {
        [] => builtin("host"),
        [one] => builtin(one),
        _ => return reject("schedules for several targets"),
    };
    let Some(target) = target else {
        return reject("no such target here");
    };
    if target.kind != tilec::target::TargetKind::Cpu {
        return reject("not a CPU target");
    }
    let llvm = tilec_codegen::driver::llvm_target_of(&target);
    if tilec_codegen::driver::host_can_run(&llvm).is_err() {
        return reject("the target's code cannot run here");
    }
    let inputs = seeded_inputs(&module, fnv1a(input));
    let want = interpret(&module, &inputs);
    if want.iter().all(|r| r.is_err()) {
        return reject("the interpreter refused the input");
    }
    let text = default_compiled_pipeline();
    let file = sources.add("<default pipeline>", text.clone());
    let pipeline = parse_pipeline(&text, file, registry()).expect("the default pipeline parses");
    let mut lowered = module.clone();
    let mut pm = PassManager::new(pipeline);
    pm.set_target(target.clone());
    if let Err(d) = pm.run(&mut lowered) {
        if d.iter().any(|x| x.message.contains("produced invalid IR")) {
            return Outcome::Finding(
                Kind::Invariant,
                format!("{}\n{}", first_message(&d), sources.render(&d.0)),
            );
        }
        return reject(format!("pass failed: {}", first_message(&d)));
    }
    let mut ran = false;
    for (i, f) in lowered.funcs.iter().enumerate() {
        let Ok(want) = &want[i] else { continue };
        let compiled = match tilec_codegen::compile_function_cpu(f, &llvm) {
            Ok(c) => c,
            Err(e) => {
                // The default pipeline accepted a valid program: code
                // generation has no reason to refuse it.
                let last =
                    e.0.lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("");
                let last = last.split_once("): ").map_or(last, |(_, m)| m);
                return Outcome::Finding(
                    Kind::Invariant,
                    format!(
                        "code generation failed after the default pipeline: {last}\n{}",
                        e.0
                    ),
                );
            }
        };
        let so =
            match tilec_codegen::link_shared(&compiled.artifacts.object, scratch, &format!("k{i}"))
            {
                Ok(p) => p,
                // Kernels link with `--no-undefined`: a failure is a
                // symbol the generated code needs and nothing defines.
                Err(e) => {
                    return Outcome::Finding(
                        Kind::Invariant,
                        format!("the compiled kernels do not link: {}", e.0),
                    );
                }
            };
        let program = match tilec_codegen::CpuProgram::load(
            &so,
            compiled.kernels.clone(),
            compiled.plan.clone(),
        ) {
            Ok(p) => p,
            Err(e) => return reject(format!("cannot load: {e}")),
        };
        for threads in [1, 2] {
            let got = match program.run(&inputs[i], threads) {
                Ok(g) => g,
                Err(e) => {
                    return Outcome::Finding(
                        Kind::Mismatch,
                        format!("compiled @{} fails with {threads} thread(s): {e}", f.name),
                    );
                }
            };
            if let Some((k, amounts)) = scaled_mismatch(&got, want, tolerance_for(&module.funcs[i]), &module.funcs[i], &inputs[i]) {
                return Outcome::Finding(
                    Kind::Mismatch,
                    format!("compiled @{} result {k} differs from the interpreter with {threads} thread(s) on `{}`: {amounts}", f.name, target.name),
                );
            }
        }
        ran = true;
    }
    if ran {
        Outcome::Pass
    } else {
        reject("nothing ran")
    }
}

/// Inputs that go wrong on purpose, one per way a worker can fail.
fn self_test(input: &[u8]) -> Outcome {
    let text = std::str::from_utf8(input).unwrap_or("");
    let known = [
        "panic", "abort", "stack", "hang", "oom", "mismatch", "reject",
    ];
    match text
        .split_whitespace()
        .find(|w| known.contains(w))
        .unwrap_or("")
    {
        "panic" => panic!("a panic on purpose"),
        "abort" => std::process::abort(),
        "stack" => {
            fn deep(n: u64) -> u64 {
                let pad = std::hint::black_box([n; 64]);
                if n == u64::MAX {
                    0
                } else {
                    deep(n + 1) + pad[(n % 64) as usize]
                }
            }
            Outcome::Reject(deep(0).to_string())
        }
        "hang" => loop {
            std::thread::sleep(std::time::Duration::from_millis(50));
        },
        "oom" => {
            let v: Vec<u8> = Vec::with_capacity(1 << 46);
            Outcome::Reject(v.capacity().to_string())
        }
        "mismatch" => Outcome::Finding(Kind::Mismatch, "a mismatch on purpose".into()),
        "reject" => reject("rejected on purpose"),
        _ => Outcome::Pass,
    }
}

#[cfg(test)]
mod tolerance_tests {
    use super::*;

    fn results(src: &str, inputs: &[Tensor]) -> (tilec::ir::Function, Vec<Tensor>) {
        let (m, _) = tilec::syntax::parse_str("<test>", src).unwrap_or_else(|(d, sm)| panic!("{}", sm.render(&d.0)));
        let f = m.funcs[0].clone();
        let out = run_function_with(&f, inputs, &interp_limits()).expect("runs");
        (f, out)
    }

    /// The tolerance scales with the sum of the terms' magnitudes, and
    /// still finds an index error in a long low-precision sum: a GEMM whose
    /// reduction reads `A[i, k]` as `A[k, i]` (same shape), and one that
    /// drops a term.
    #[test]
    fn the_magnitude_scale_keeps_index_errors_visible() {
        for elem in ["f16", "bf16", "f32"] {
            let gemm = |a_index: &str, k: usize| {
                format!(
                    "func @f(%A: tensor<64x64x{elem}>, %B: tensor<64x8x{elem}>) -> tensor<64x8x{elem}> {{
  %C = compute (i: 64, j: 8) reduce sum (k: {k}) reads(%a = %A[{a_index}], %b = %B[k, j]) -> tensor<64x8x{elem}>[i, j] {{
    %0 = mul %a, %b : {elem}
    yield %0 : {elem}
  }}
  return %C
}}"
                )
            };
            let Ok((m, _)) = tilec::syntax::parse_str("<test>", &gemm("i, k", 64)) else { panic!("does not parse") };
            let inputs = seeded_inputs(&m, 3).remove(0);
            let (f, want) = results(&gemm("i, k", 64), &inputs);
            let rtol = tolerance_for(&f);
            let floor = magnitude_scale(&f, &inputs);
            assert!(floor > want.iter().map(max_finite_magnitude).fold(0.0, f64::max), "{elem}: the sum of magnitudes exceeds the result");
            assert!(first_mismatch(&want, &want, rtol, floor).is_none());
            let (_, transposed) = results(&gemm("k, i", 64), &inputs);
            assert!(first_mismatch(&transposed, &want, rtol, floor).is_some(), "{elem}: a transposed read passes");
            let (_, shorter) = results(&gemm("i, k", 63), &inputs);
            assert!(first_mismatch(&shorter, &want, rtol, floor).is_some(), "{elem}: a dropped term passes");
        }
    }

    /// A mismatch is forgiven as the epilogue's amplification only when the
    /// accumulators agree through the same transformation: one that reads
    /// the wrong element changes them.
    #[test]
    fn only_agreeing_accumulators_excuse_an_amplifying_epilogue() {
        let gemm = |a_index: &str| {
            format!(
                "func @f(%A: tensor<16x16xf16>, %B: tensor<16x4xf16>) -> tensor<16x4xf16> {{
  %C = compute (i: 16, j: 4) reduce sum (k: 16) reads(%a = %A[{a_index}], %b = %B[k, j]) -> tensor<16x4xf16>[i, j] {{
    %0 = mul %a, %b : f16
    yield %0 : f16
  }} epilogue(%acc) {{
    %1 = log %acc : f16
    yield %1 : f16
  }}
  return %C
}}"
            )
        };
        let parse = |src: &str| match tilec::syntax::parse_str("<test>", src) {
            Ok((m, _)) => m,
            Err(_) => panic!("does not parse"),
        };
        let original = parse(&gemm("i, k"));
        let inputs = seeded_inputs(&original, 5).remove(0);
        let identity = |_: &mut Module| true;
        assert!(accumulators_agree(&original, 0, &inputs, &identity));
        // The "transformation" reads A transposed, in the probe as well.
        let transposing = |m: &mut Module| {
            let wrong = yielding_accumulators(&parse(&gemm("k, i")).funcs[0]).expect("has an epilogue");
            m.funcs[0] = wrong;
            true
        };
        assert!(!accumulators_agree(&original, 0, &inputs, &transposing));
    }
}
