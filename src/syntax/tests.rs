//! Parser, printer and verifier tests: round trips over every `.tile` file
//! in the repository, op examples, and robustness against bad input.

use super::*;
use crate::ir::{Dim, EntityRef, OpKind, TagLevel};
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

/// The parsed module, or a panic showing the errors.
fn module(text: &str) -> crate::ir::Module {
    parse_str("t.tile", text).map(|(m, _)| m).unwrap_or_else(|(d, sm)| panic!("{}", sm.render(&d.0)))
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
            // Chunks that exist to produce errors are exercised by lit; so are
            // RUN-only files that name another file as their input.
            let defines_a_function = chunk.lines().any(|l| l.trim_start().starts_with("func @"));
            if chunk.contains("expected-error") || chunk.contains("// NO-ROUND-TRIP") || !defines_a_function {
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
    // Loop nests recurse through the resolver, verifier and printer: as deep
    // as the lexer allows must work, deeper is a diagnostic.
    let nest = |n: usize| {
        let mut s = String::from("func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n");
        for i in 0..n {
            s += &format!("for %i{i} = 0 to 1 {{\n");
        }
        s += "%a = load %x[%i0] : f32\n";
        s += &"}\n".repeat(n);
        s + "return %x\n}\n"
    };
    assert!(reprint("nest", &nest(198)).is_ok());
    assert!(parse_errors(&nest(250)).contains("nest deeper than"));
}

/// A schedule with every key, written out of order, on one line.
const SCHEDULED: &str = "func @gemm(%A: tensor<64x32xf32>, %B: tensor<32x48xf32>, %bias: tensor<48xf32>) -> tensor<64x48xf32> {
  %C = compute \"gemm\" (i: 64, j: 48) reduce sum (k: 32) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<64x48xf32>[i, j] schedule \"sm90\" {vector = {j = 4}, cache = {bv = local, b = shared, a = shared}, unroll = 8, vthread = {i = 2}, tile = {k = [8, 2], i = [16, 4], j = [16, 4]}} {
    %0 = mul %a, %b : f32
    yield %0 : f32
  } epilogue(%acc) reads(%bv = %bias[j]) {
    %1 = add %acc, %bv : f32
    yield %1 : f32
  }
  return %C
}
";

#[test]
fn schedules_print_in_canonical_form() {
    let out = reprint("t", SCHEDULED).unwrap();
    let expected = "      schedule \"sm90\" {
        tile = {i = [16, 4], j = [16, 4], k = [8, 2]},
        vthread = {i = 2},
        cache = {a = shared, b = shared, bv = local},
        unroll = 8,
        vector = {j = 4}
      } {
";
    assert!(out.contains(&format!("reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<64x48xf32>[i, j]\n{expected}")), "{out}");
    assert_round_trip("scheduled", SCHEDULED);
    let m = module(SCHEDULED);
    let s = m.funcs[0].ops.values().find_map(|o| o.kind.as_compute()).and_then(|c| c.schedule.clone()).unwrap();
    let cache: Vec<(usize, &str, &str)> = s.cache.iter().map(|c| (c.read, c.read_name.as_str(), c.level.as_str())).collect();
    assert_eq!(cache, [(0, "a", "shared"), (1, "b", "shared"), (2, "bv", "local")]);
    assert_eq!(s.tiles_of("k"), Some(&[8, 2][..]));
    assert_eq!((s.unroll, s.vector.clone(), s.vthreads_of("i"), s.vthreads_of("j")), (8, Some(("j".to_string(), 4)), 2, 1));
}

#[test]
fn empty_schedules_print_as_empty_dictionaries() {
    let src = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = compute (i: 4) reads(%a = %x[i]) -> tensor<4xf32>[i] schedule \"x86-avx2\" {unroll = 0, tile = {}} {\n    yield %a : f32\n  }\n  return %y\n}\n";
    let out = reprint("t", src).unwrap();
    assert!(out.contains("-> tensor<4xf32>[i]\n      schedule \"x86-avx2\" {} {\n"), "{out}");
    assert_round_trip("empty schedule", src);
}

/// Target names are strings with the usual escapes; they print escaped and
/// parse back. (No target has such a name, so the verifier would reject
/// the schedule: this checks the syntax alone. lit-tests/verifier/
/// schedule-limits.tile shows the unknown-target error for it.)
#[test]
fn target_names_print_with_escapes() {
    let src = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = compute (i: 4) reads(%a = %x[i]) -> tensor<4xf32>[i] schedule \"my \\\"cpu\\\"\\n\" {} {\n    yield %a : f32\n  }\n  return %y\n}\n";
    let m = module(src);
    let s = m.funcs[0].ops.values().find_map(|o| o.kind.as_compute()).and_then(|c| c.schedule.clone()).unwrap();
    assert_eq!(s.target, "my \"cpu\"\n");
    let out = print_module(&m);
    assert!(out.contains("schedule \"my \\\"cpu\\\"\\n\" {} {\n"), "{out}");
    assert_eq!(print_module(&module(&out)), out, "print → parse → print is not stable");
}

/// The `intrinsic` knob resolves to read positions and axis names, prints
/// last with empty axis lists left out, and its name is a string with the
/// usual escapes. (Unverified here: `module` parses without verifying.)
#[test]
fn intrinsic_choices_parse_and_print() {
    let src = "func @q(%A: tensor<8x64xu8>, %B: tensor<64x32xi8>) -> tensor<8x32xi32> {
  %C = compute (i: 8, j: 32) reduce sum (k: 64) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<8x32xi32>[i, j] schedule \"x86-avx512\" {intrinsic = {k = [k], n = [], a = b, name = \"my \\\"dot\\\"\", m = [j]}, unroll = 4} {
    %0 = cast %a : u8 -> i32
    %1 = cast %b : i8 -> i32
    %2 = mul %0, %1 : i32
    yield %2 : i32
  }
  return %C
}
";
    let m = module(src);
    let s = m.funcs[0].ops.values().find_map(|o| o.kind.as_compute()).and_then(|c| c.schedule.clone()).unwrap();
    let x = s.intrinsic.clone().unwrap();
    assert_eq!((x.name.as_str(), x.a, x.a_name.as_str()), ("my \"dot\"", 1, "b"));
    assert_eq!((x.m, x.n, x.k), (vec!["j".to_string()], vec![], vec!["k".to_string()]));
    let out = print_module(&m);
    assert!(out.contains("        unroll = 4,\n        intrinsic = {name = \"my \\\"dot\\\"\", a = b, m = [j], k = [k]}\n      } {\n"), "{out}");
    assert_eq!(print_module(&module(&out)), out, "print → parse → print is not stable");
}

/// Every loop-level construct once, with index expressions out of normal
/// order and names reused by sibling loops.
const LOOPS: &str = "func @f(%x: tensor<10x8xf32>) -> tensor<10x8xf32> {
  %y = alloc : buffer<10x8xf32, global>
  kernel \"k\" schedule \"sm90\" {tile = {i = [4, 1]}, cache = {a = shared}} {
    for %b = 0 to 3 map(block.x) axis(i.block) {
      %s = alloc : buffer<4x8xf32, shared>
      for %t = 0 to 8 map(thread.x) axis(j.thread) {
        copy %x[%b * 4, 0] -> %s[0, 0] box [4, 8] pad(0.0) cooperative
        barrier
        %acc = alloc : buffer<4xf32, local>
        fill %acc, -inf
        for %p = 0 to 4 map(unroll) axis(i.point) {
          %a = load %s[%p, %t] read(a) : f32
          %q = load %x[%p + %b * 4, %t - 1] pad(0.0) : f32
          %m = max %a, %q : f32
          %n = index %p + 4 * %b : i32
          %c = cast %n : i32 -> f32
          %r = add %m, %c : f32
          store %r, %acc[%p]
        }
        for %p = 0 to 4 {
          if %p + %b * 4 < 10, -%t < 1 {
            %v = load %acc[%p] : f32
            store %v, %y[%b * 4 + %p, %t]
          }
        }
      }
    }
  }
  return %y
}
";

#[test]
fn loop_level_ops_round_trip() {
    assert_round_trip("loops", LOOPS);
    let out = reprint("loops", LOOPS).unwrap();
    // Terms in the order their index values were defined, outer loops first.
    assert!(out.contains("%q = load %x[%b * 4 + %p, %t - 1] pad(0.0) : f32"), "{out}");
    assert!(out.contains("%n = index %b * 4 + %p : i32"), "{out}");
    assert!(out.contains("if %b * 4 + %p < 10, -%t < 1 {"), "{out}");
    // Sibling loops keep their names; defaults are not printed.
    assert_eq!(out.matches("for %p = 0 to 4").count(), 2, "{out}");
    assert!(out.contains("for %p = 0 to 4 {"), "{out}");
    assert!(out.contains("copy %x[%b * 4, 0] -> %s[0, 0] box [4, 8] pad(0.0) cooperative"), "{out}");
    assert!(out.contains("fill %acc, -inf"), "{out}");
    assert!(out.contains("  kernel \"k\" schedule \"sm90\" {\n    tile = {i = [4, 1]},\n    cache = {a = shared}\n  } {\n"), "{out}");
}

/// Each kind of tag level: a tile level of the target, `point`, `vthread`,
/// `vector` and `lanes`, on spatial and reduction axes.
const TAGGED_LOOPS: &str = "func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = alloc : buffer<8xf32, global>
  kernel \"k\" schedule \"sm90\" {} {
    for %i_block = 0 to 2 map(block.x) axis(i.block) {
      for %i_vthread = 0 to 2 map(vthread) axis(i.vthread) {
        for %k_point = 0 to 2 reduce(k.point) {
          for %k_lanes = 0 to 1 reduce(k.lanes) {
            for %i_point = 0 to 2 map(unroll) axis(i.point) {
              for %i_vector = 0 to 1 map(vector) axis(i.vector) {
                %a = load %x[%i_block * 4 + %i_vthread * 2 + %i_point] : f32
                store %a, %y[%i_block * 4 + %i_vthread * 2 + %i_point]
              }
            }
          }
        }
      }
    }
  }
  return %y
}
";

#[test]
fn loop_tags_parse_to_their_levels_and_print_unchanged() {
    let m = module(TAGGED_LOOPS);
    let tags: Vec<(String, TagLevel, bool)> = m.funcs[0]
        .ops
        .values()
        .filter_map(|o| match &o.kind {
            OpKind::For(l) => l.tag.clone().map(|t| (t.axis, t.level, t.reduction)),
            _ => None,
        })
        .collect();
    let expected = [
        ("i", TagLevel::Tile("block".into()), false),
        ("i", TagLevel::VThread, false),
        ("k", TagLevel::Point, true),
        ("k", TagLevel::Lanes, true),
        ("i", TagLevel::Point, false),
        ("i", TagLevel::Vector, false),
    ];
    for e in &expected {
        assert!(tags.iter().any(|t| (t.0.as_str(), &t.1, t.2) == (e.0, &e.1, e.2)), "{e:?} not among {tags:?}");
    }
    assert_eq!(tags.len(), expected.len(), "{tags:?}");
    assert_eq!(print_module(&m), TAGGED_LOOPS, "a tag does not print as it was written");
    // The keywords are the names of the levels that are not tile levels.
    for k in TagLevel::KEYWORDS {
        assert!(TagLevel::from_name(k).tile().is_none() && TagLevel::from_name(k).name() == k, "{k}");
    }
    assert_eq!(TagLevel::from_name("thread"), TagLevel::Tile("thread".into()));
}

#[test]
fn loop_operands_are_index_values_in_definition_order() {
    let m = module(LOOPS);
    let f = &m.funcs[0];
    let load = f.walk().into_iter().find(|&o| matches!(&f.ops[o].kind, OpKind::Load(a) if a.pad.is_some())).unwrap();
    let names: Vec<_> = f.ops[load].operands.iter().map(|&v| f.values[v].name.clone().unwrap_or_default()).collect();
    // The source, then each distinct index value once, outer loops first.
    assert_eq!(names, ["x", "b", "t", "p"]);
    let OpKind::Load(a) = &f.ops[load].kind else { unreachable!() };
    assert_eq!(a.indices[0].terms(), &[(Dim::new(1), 4), (Dim::new(3), 1)]);
    assert_eq!((a.indices[1].terms(), a.indices[1].constant_term()), (&[(Dim::new(2), 1)][..], -1));
}

#[test]
fn numbering_continues_through_loops() {
    let src = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %7 = alloc : buffer<4xf32, global>\n  for %8 = 0 to 4 {\n    %9 = load %x[%8] : f32\n    store %9, %7[%8]\n  }\n  for %10 = 0 to 4 {\n    %11 = load %7[%10] : f32\n  }\n  return %7\n}\n";
    let out = reprint("t", src).unwrap();
    assert!(out.contains("%0 = alloc"), "{out}");
    assert!(out.contains("for %1 = 0 to 4 {\n    %2 = load %x[%1] : f32\n    store %2, %0[%1]"), "{out}");
    assert!(out.contains("for %3 = 0 to 4 {\n    %4 = load %0[%3] : f32"), "{out}");
}

#[test]
fn printed_index_expressions_do_not_depend_on_operand_order() {
    // A pass may append index operands in any order; the text is the same.
    let mut m = module(LOOPS);
    let before = print_module(&m);
    let f = &mut m.funcs[0];
    let load = f.walk().into_iter().find(|&o| matches!(&f.ops[o].kind, OpKind::Load(a) if a.pad.is_some())).unwrap();
    // Swap operands 1 and 3 and the expressions' variables with them.
    f.ops[load].operands.swap(1, 3);
    let swap = |d: Dim| match d.index() {
        1 => Dim::new(3),
        3 => Dim::new(1),
        _ => d,
    };
    if let OpKind::Load(a) = &mut f.ops[load].kind {
        a.indices = a.indices.iter().map(|e| e.map_vars(swap)).collect();
    }
    assert!(!verify_module(&m).has_errors());
    assert_eq!(print_module(&m), before);
}

#[test]
fn kernel_cache_names_reads_by_load_tags() {
    let m = module(LOOPS);
    let f = &m.funcs[0];
    let k = f.walk().into_iter().find_map(|o| match &f.ops[o].kind {
        OpKind::Kernel(k) => Some(k.clone()),
        _ => None,
    });
    let k = k.unwrap();
    assert_eq!(k.label.as_deref(), Some("k"));
    assert_eq!((k.schedule.cache[0].read, k.schedule.cache[0].read_name.as_str()), (0, "a"));
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

    /// Truncating or splicing a loop-level program never panics either.
    #[test]
    fn mutated_loop_programs_never_panic(cut in 0usize..LOOPS.len(), insert in "[ -~]{0,8}", at in 0usize..LOOPS.len()) {
        let _ = parse_errors(&LOOPS[..cut]);
        let mut spliced = LOOPS.to_string();
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
        Just("for"), Just("%i ="), Just("%i"), Just("0"), Just("to"), Just("map(thread.x)"), Just("axis(i.block)"),
        Just("if"), Just("<"), Just("load"), Just("store"), Just("copy"), Just("box"), Just("cooperative"),
        Just("fill"), Just("barrier"), Just("alloc"), Just("buffer<4xf32, local>"), Just("kernel"),
        Just("schedule"), Just("\"sm90\""), Just("tile"), Just("="), Just("read(a)"),
    ], 0..60)) {
        let _ = parse_errors(&tokens.join(" "));
    }
}
