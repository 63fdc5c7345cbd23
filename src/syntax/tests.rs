//! Parser, printer and verifier tests: round trips over every `.tile` file
//! in the repository, op examples, and robustness against bad input.

use super::*;
use crate::verify::verify_module;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.tile` file under the repository's source folders.
fn tile_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if p.is_dir() && name != "target" && name != "Output" && !name.starts_with('.') {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "tile") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for dir in ["ir-spec", "lit-tests", "benchmarks", "examples", "docs"] {
        walk(&repo_root().join(dir), &mut out);
    }
    out
}

/// print(parse(text)), or the rendered errors.
fn reprint(name: &str, text: &str) -> Result<String, String> {
    match parse_str(name, text) {
        Ok((m, sm)) => {
            let d = verify_module(&m);
            if d.has_errors() { Err(sm.render(&d.0)) } else { Ok(print_module(&m)) }
        }
        Err((d, sm)) => Err(sm.render(&d.0)),
    }
}

/// Checks print → parse → print is byte-identical.
fn assert_round_trip(name: &str, text: &str) {
    let once = reprint(name, text).unwrap_or_else(|e| panic!("{name} does not parse:\n{e}"));
    let twice = reprint(name, &once).unwrap_or_else(|e| panic!("{name}: printed form does not parse:\n{e}\n--- printed ---\n{once}"));
    assert_eq!(once, twice, "{name}: print → parse → print is not stable");
}

#[test]
fn every_tile_file_in_the_repository_round_trips() {
    let mut checked = 0;
    for path in tile_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let rel = path.strip_prefix(repo_root()).unwrap().display().to_string();
        for (i, range) in crate::input::split_input_file(&text).into_iter().enumerate() {
            let chunk = &text[range];
            // Chunks that exist to produce errors are exercised by lit.
            if chunk.contains("expected-error") || chunk.contains("// NO-ROUND-TRIP") || !chunk.contains("func") {
                continue;
            }
            assert_round_trip(&format!("{rel} (chunk {i})"), chunk);
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} tile chunks found; is the repository layout intact?");
}

#[test]
fn every_op_example_parses_verifies_and_round_trips() {
    for d in crate::ir::ops::op_decls() {
        assert!(d.example.contains(d.mnemonic), "example of `{}` does not use it", d.mnemonic);
        assert_round_trip(&format!("example of `{}`", d.mnemonic), &d.example);
    }
}

#[test]
fn names_are_kept_and_anonymous_values_numbered() {
    let src = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %7 = compute (i: 4) reads(%a = %x[i]) -> tensor<4xf32>[i] {\n    %42 = exp %a : f32\n    %t = neg %42 : f32\n    yield %t : f32\n  }\n  return %7\n}\n";
    let out = reprint("t", src).unwrap();
    assert!(out.contains("%0 = compute"), "{out}");
    assert!(out.contains("%0 = exp %a : f32\n    %t = neg %0 : f32"), "{out}");
}

#[test]
fn index_expressions_are_normalised() {
    let src = "func @f(%x: tensor<16xf32>) -> tensor<4xf32> {\n  %y = compute (i: 4) reads(%a = %x[(i + 1) * 2 - 2 + i * 2 + -(0)]) -> tensor<4xf32>[i] {\n    yield %a : f32\n  }\n  return %y\n}\n";
    let out = reprint("t", src).unwrap();
    assert!(out.contains("%x[i * 4]"), "{out}");
}

fn parse_errors(src: &str) -> String {
    match parse_str("t.tile", src) {
        Ok((m, sm)) => sm.render(&verify_module(&m).0),
        Err((d, sm)) => sm.render(&d.0),
    }
}

#[test]
fn verifier_reports_every_error_not_just_the_first() {
    let src = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = compute (i: 4) reads(%a = %x[i + 1], %b = %x[i * 2]) -> tensor<4xf32>[i] {\n    %0 = add %a, %b : f32\n    yield %0 : f32\n  }\n  return %y\n}\n";
    let text = parse_errors(src);
    assert!(text.contains("index `i + 1` of dimension 0 ranges over [1, 4]"), "{text}");
    assert!(text.contains("index `i * 2` of dimension 0 ranges over [0, 6]"), "{text}");
    assert!(text.contains("t.tile:2:37"), "{text}");
}

#[test]
fn grouped_output_index_must_be_one_to_one() {
    let ok = "func @f(%x: tensor<8xf32>) -> tensor<8xf32> {\n  %y = compute (g: 2, c: 4) reads(%a = %x[g * 4 + c]) -> tensor<8xf32>[g * 4 + c] {\n    yield %a : f32\n  }\n  return %y\n}\n";
    assert!(reprint("ok", ok).is_ok());
    let bad = ok.replace("-> tensor<8xf32>[g * 4 + c]", "-> tensor<8xf32>[g * 3 + c]");
    assert!(parse_errors(&bad).contains("does not cover dimension 0 (size 8) exactly once"));
}

#[test]
fn deep_nesting_is_a_diagnostic_not_a_stack_overflow() {
    let deep = format!("func @f(%x: tensor<4xf32>) -> tensor<4xf32> {{\n  %y = compute (i: 4) reads(%a = %x[{}i{}]) -> tensor<4xf32>[i] {{\n    yield %a : f32\n  }}\n  return %y\n}}\n", "(".repeat(100_000), ")".repeat(100_000));
    assert!(parse_errors(&deep).contains("nest deeper than"));
    let long_sum = format!("func @f(%x: tensor<4xf32>) -> tensor<4xf32> {{\n  %y = compute (i: 4) reads(%a = %x[i{}]) -> tensor<4xf32>[i] {{\n    yield %a : f32\n  }}\n  return %y\n}}\n", " + 0".repeat(200_000));
    assert!(reprint("long", &long_sum).is_ok());
    let negs = format!("func @f(%x: tensor<4xf32>) -> tensor<4xf32> {{\n  %y = compute (i: 4) reads(%a = %x[{}i]) -> tensor<4xf32>[i] {{\n    yield %a : f32\n  }}\n  return %y\n}}\n", "- ".repeat(200_000));
    assert!(reprint("negs", &negs).is_ok());
}

const GEMM: &str = "func @gemm(%A: tensor<4x8xf32>, %B: tensor<8x2xf32>, %bias: tensor<2xf32>) -> tensor<4x2xf32> {
  %C = compute \"matmul\" (i: 4, j: 2) reduce sum (k: 8)
      reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<4x2xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  } epilogue(%acc) reads(%bv = %bias[j]) {
    %1 = add %acc, %bv : f32
    %2 = relu %1 : f32
    yield %2 : f32
  }
  return %C
}
";

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic the parser.
    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
        let _ = parse_errors(&s);
    }

    /// Truncating or splicing a valid program never panics, and the printed
    /// result of anything that still parses round-trips.
    #[test]
    fn mutated_programs_never_panic(cut in 0usize..GEMM.len(), insert in "[ -~]{0,8}", at in 0usize..GEMM.len()) {
        let truncated = &GEMM[..cut];
        let _ = parse_errors(truncated);
        let mut spliced = GEMM.to_string();
        spliced.insert_str(at, &insert);
        if let Ok(once) = reprint("spliced", &spliced) {
            let again = reprint("again", &once);
            prop_assert_eq!(again, Ok(once));
        }
    }

    /// Token soup from the dialect's own vocabulary never panics.
    #[test]
    fn token_soup_never_panics(tokens in proptest::collection::vec(prop_oneof![
        Just("func"), Just("@f"), Just("("), Just(")"), Just("{"), Just("}"), Just("["), Just("]"),
        Just("%x"), Just("%y ="), Just(":"), Just(","), Just("->"), Just("tensor<4xf32>"), Just("f32"),
        Just("compute"), Just("reduce"), Just("sum"), Just("reads"), Just("epilogue"), Just("pad(0.0)"),
        Just("i"), Just("4"), Just("+"), Just("-"), Just("*"), Just("div"), Just("yield"), Just("return"),
        Just("add"), Just("const"), Just("index"), Just("1.5"), Just("\n"),
    ], 0..60)) {
        let _ = parse_errors(&tokens.join(" "));
    }
}
