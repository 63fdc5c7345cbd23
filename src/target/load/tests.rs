use super::*;
use crate::target::{Binding, OrderEntry, TargetKind};

/// Parses `text` as `t.toml`; the rendered diagnostics on failure.
fn parse(text: &str) -> Result<Target, String> {
    let mut sm = SourceMap::new();
    parse_target(&mut sm, "t.toml", text).map_err(|d| sm.render(&d.0))
}

fn err(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e,
    }
}

fn builtin(name: &str) -> &'static str {
    BUILTIN.iter().find(|b| b.name == name).unwrap().text
}

/// `text` of built-in `name` with `from` replaced by `to` (once, and it must occur).
fn edit(name: &str, from: &str, to: &str) -> String {
    let text = builtin(name);
    assert!(text.contains(from), "`{from}` not in {name}");
    text.replacen(from, to, 1)
}

#[test]
fn every_builtin_parses_and_is_named_after_its_file() {
    for b in BUILTIN {
        let t = parse(b.text).unwrap_or_else(|e| panic!("{}:\n{e}", b.path));
        assert_eq!(t.name, b.name);
        assert!(b.path.ends_with(&format!("{}.toml", b.name)));
        assert!(!t.sources.is_empty());
    }
}

#[test]
fn builtins_describe_the_tile_model() {
    let gpu = ["sm80", "sm90"];
    for b in BUILTIN {
        let t = parse(b.text).unwrap();
        let levels: Vec<(&str, &str, Binding)> = t.tile_levels.iter().map(|l| (l.name.as_str(), l.memory.as_str(), l.binding)).collect();
        let names: Vec<&str> = t.memory.iter().map(|m| m.name.as_str()).collect();
        if gpu.contains(&b.name) {
            assert_eq!(t.kind, TargetKind::Cuda);
            assert_eq!(names, ["global", "l2", "shared", "local"]);
            assert_eq!(levels, [("block", "shared", Binding::Grid), ("thread", "local", Binding::Threads)]);
            assert_eq!(t.loop_order, ["S.block", "S.thread", "R.block", "R.thread", "R.point", "V", "S.point"]);
            use OrderEntry::*;
            assert_eq!(t.order, [Spatial(0), Spatial(1), Reduction(0), Reduction(1), ReductionPoint, VThread, SpatialPoint]);
            assert_eq!(t.memory_level("shared").unwrap().scope.as_deref(), Some("shared"));
            assert_eq!(t.memory_level("local").unwrap().scope.as_deref(), Some("local"));
            assert_eq!(t.memory_level("local").unwrap().capacity_bytes, 255 * 4);
            assert!(t.intrinsics.iter().any(|x| x.kind == "mma" && (x.m, x.n, x.k) == (16, 8, 32) && x.a == "i8"));
            assert!(t.intrinsics.iter().any(|x| x.kind == "wmma" && (x.m, x.n, x.k) == (16, 16, 16)));
            // The values the search model and code generation were
            // calibrated with (they were constants before).
            assert_eq!((t.compute.min_warps_per_block, t.compute.max_static_shared_bytes), (4, 48 * 1024));
        } else {
            assert_eq!(t.kind, TargetKind::Cpu);
            assert_eq!(names, ["dram", "l3", "l2", "l1", "registers"]);
            assert_eq!(levels, [("core", "l3", Binding::Parallel), ("l2", "l2", Binding::Serial), ("l1", "l1", Binding::Serial)]);
            assert_eq!(t.loop_order, ["S.core", "S.l2", "R.l2", "S.l1", "R.l1", "R.point", "V", "S.point"]);
            use OrderEntry::*;
            assert_eq!(t.order, [Spatial(0), Spatial(1), Reduction(1), Spatial(2), Reduction(2), ReductionPoint, VThread, SpatialPoint]);
            assert!(!t.has_reduction_loops(0) && t.has_reduction_loops(1) && t.has_vthread_loops());
            let regs = t.memory_level("registers").unwrap();
            assert_eq!(regs.capacity_bytes, (t.isa.vector_registers * t.isa.vector_bits / 8) as u64);
            assert!(regs.managed);
            assert!(t.intrinsics.iter().any(|x| x.kind == "fma" && x.m * 32 == t.isa.vector_bits));
            assert_eq!((t.compute.fma_latency_cycles, t.compute.misses_in_flight), (4.0, 10.0));
            assert_eq!((t.model.guarded_load_cost, t.model.gather_load_cost, t.model.scatter_lane_cost), (4.0, 2.0, 4.0));
        }
        // Parsed once, and printed back as written.
        let text: Vec<String> = t.order.iter().map(|e| e.text(&t.tile_levels)).collect();
        assert_eq!(text, t.loop_order);
        for ty in ["f32", "f16", "bf16", "i8"] {
            assert!(t.peak_gflops.contains_key(ty), "{} lacks a {ty} peak", b.name);
        }
    }
    let avx512 = parse(builtin("x86-avx512")).unwrap();
    assert!(avx512.intrinsics.iter().any(|x| x.kind == "dot" && x.acc == "i32" && x.k == 4));
}

#[test]
fn peak_f32_matches_units_clock_and_lanes() {
    // f32 peak = units x FMA/clk/unit x 2 x clock, with the documented units.
    let check = |name: &str, fma_per_clk_per_unit: f64| {
        let t = parse(builtin(name)).unwrap();
        let expect = t.compute.units as f64 * fma_per_clk_per_unit * 2.0 * t.compute.clock_ghz;
        let got = t.peak_gflops["f32"];
        assert!((got - expect).abs() / expect < 0.01, "{name}: {got} vs {expect}");
    };
    check("x86-avx2", 16.0);
    check("x86-avx512", 32.0);
    check("sm80", 64.0);
    check("sm90", 128.0);
}

#[test]
fn syntax_error_has_file_line_col() {
    let e = err("name = \"x\"\nkind = = \"cpu\"\n");
    assert!(e.contains("t.toml:2:"), "{e}");
    assert!(e.starts_with("error: "), "{e}");
}

#[test]
fn unknown_field_points_at_it() {
    let text = edit("x86-avx2", "line_bytes = 64\n", "line_bytes = 64\nlinesize = 64\n");
    let e = err(&text);
    assert!(e.contains("unknown field `linesize`"), "{e}");
    let line = text.lines().position(|l| l.starts_with("linesize")).unwrap() + 1;
    assert!(e.contains(&format!("t.toml:{line}:1")), "{e}");
}

#[test]
fn wrong_type_and_missing_field() {
    let e = err(&edit("sm80", "units = 108", "units = \"many\""));
    assert!(e.contains("invalid type") || e.contains("expected"), "{e}");
    let e = err(&edit("sm80", "kind = \"cuda\"\n", ""));
    assert!(e.contains("missing field `kind`"), "{e}");
    let e = err(&edit("sm80", "kind = \"cuda\"", "kind = \"fpga\""));
    assert!(e.contains("unknown variant `fpga`"), "{e}");
}

#[test]
fn semantic_errors_point_into_the_file() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("sm80", "memory = \"shared\"", "memory = \"sharde\"", "tile level `block` uses memory level `sharde`, which is not defined"),
        ("sm80", "memory = \"shared\"", "memory = \"sharde\"", "did you mean `shared`?"),
        ("sm80", "capacity_bytes = 41943040", "capacity_bytes = 0", "capacity of memory level `l2` must be positive"),
        ("sm80", "warp_size = 32                # [PG]\n", "", "cuda target needs a positive `compute.warp_size`"),
        ("sm80", "max_registers_per_thread = 255", "max_registers_per_thread = 0", "cuda target needs a positive `compute.max_registers_per_thread`"),
        ("x86-avx2", "vector_registers = 16", "vector_registers = 0", "cpu target needs a positive `isa.vector_registers`"),
        ("sm80", "\"R.block\", \"R.thread\"", "\"R.block\", \"R.warp\"", "`loop_order` entry `R.warp` names tile level `warp`, which is not defined"),
        ("sm80", "\"S.thread\", ", "", "`loop_order` lacks `S.thread`"),
        ("sm80", "\"R.point\", \"V\"", "\"R.point\", \"R.point\"", "`R.point` appears twice in `loop_order`"),
        ("sm80", "\"S.block\", \"S.thread\"", "\"S.thread\", \"S.block\"", "spatial loops in `loop_order` must follow the tile levels outermost first"),
        ("sm80", "\"V\"", "\"W\"", "invalid `loop_order` entry `W`"),
        ("sm80", "latency_ns = 150", "latency_ns = 1500", "memory levels must be listed slowest first, but `l2` (1500 ns) is slower than `global` (470 ns) before it"),
        ("sm80", "scope = \"shared\"", "scope = \"smem\"", "unknown buffer scope `smem`"),
        ("sm80", "binding = \"grid\"", "binding = \"parallel\"", "binding `parallel` is not available on a cuda target"),
        ("x86-avx2", "binding = \"parallel\"", "binding = \"grid\"", "binding `grid` is not available on a cpu target"),
        ("sm80", "f32 = 19500", "fp32 = 19500", "unknown element type `fp32` in `peak_gflops`"),
        ("sm80", "i8 = 624000", "i8 = -1", "peak of `i8` must be positive"),
        ("sm80", "kind = \"wmma\"", "kind = \"hmma\"", "unknown intrinsic kind `hmma`"),
        ("sm80", "a = \"tf32\"", "a = \"tf31\"", "unknown element type `tf31` in intrinsic"),
        ("sm80", "name = \"sm80\"", "name = \"my/sm80\"", "invalid target name `my/sm80`"),
        ("x86-avx2", "memory = \"l1\"", "memory = \"l3\"", "tile level `l1` uses `l3`, a slower memory than `l2` of the outer level `l2`"),
        ("x86-avx2", "per = \"thread\"", "per = \"block\"", "`per = \"block\"` is for GPU memories"),
        ("sm80", "unit_capacity_bytes = 167936", "unit_capacity_bytes = 1024", "`unit_capacity_bytes` of `shared` (1024) is less than its `capacity_bytes` (166912)"),
        ("sm80", "banks = 32 ", "", "gives `bank_width_bytes` without the other"),
        ("sm80", "min_warps_per_block = 4", "min_warps_per_block = 0", "cuda target needs a positive `compute.min_warps_per_block`"),
        ("sm80", "max_static_shared_bytes = 49152", "", "cuda target needs a positive `compute.max_static_shared_bytes`"),
        ("sm80", "max_static_shared_bytes = 49152", "max_static_shared_bytes = 200000", "`compute.max_static_shared_bytes` (200000) is more than the 166912 bytes a block may have of `shared`"),
        ("x86-avx2", "fma_latency_cycles = 4", "fma_latency_cycles = 0", "cpu target needs a positive `compute.fma_latency_cycles`"),
        ("x86-avx2", "misses_in_flight = 10", "misses_in_flight = -1", "cpu target needs a positive `compute.misses_in_flight`"),
        ("x86-avx2", "gather_load_cost = 2.0", "", "cpu target needs a positive `model.gather_load_cost`"),
        ("x86-avx2", "[model]", "[modle]", "unknown field `modle`"),
    ];
    for (base, from, to, want) in cases {
        let e = err(&edit(base, from, to));
        assert!(e.contains(want), "editing {base}: `{from}` → `{to}`: wanted `{want}` in\n{e}");
        assert!(e.contains("t.toml:"), "no location in\n{e}");
    }
}

#[test]
fn semantic_error_lines_are_right() {
    let text = edit("sm80", "capacity_bytes = 41943040", "capacity_bytes = 0");
    let line = text.lines().position(|l| l.starts_with("capacity_bytes = 0")).unwrap() + 1;
    let e = err(&text);
    assert!(e.contains(&format!("t.toml:{line}:18")), "{e}");
    // A missing required field points at its table.
    let text = edit("sm80", "warp_size = 32                # [PG]\n", "");
    let line = text.lines().position(|l| l.starts_with("[compute]")).unwrap() + 1;
    let e = err(&text);
    assert!(e.contains(&format!("t.toml:{}:", line)) || e.contains(&format!("t.toml:{}:", line + 1)), "{e}");
}

#[test]
fn all_semantic_errors_are_reported_at_once() {
    let text = edit("sm80", "capacity_bytes = 41943040", "capacity_bytes = 0").replacen("memory = \"shared\"", "memory = \"nope\"", 1);
    let mut sm = SourceMap::new();
    let d = parse_target(&mut sm, "t.toml", &text).unwrap_err();
    assert_eq!(d.len(), 2, "{}", sm.render(&d.0));
}

#[test]
fn target_set_lookup_and_suggestions() {
    let mut sm = SourceMap::new();
    let set = TargetSet::new();
    let names: Vec<&str> = set.names().collect();
    assert_eq!(names, ["x86-avx2", "x86-avx512", "sm80", "sm90", "host"]);
    let t = set.lookup(&mut sm, "sm90").unwrap();
    assert_eq!(t.compute.units, 132);
    // Parsed once: the same Arc comes back.
    assert!(Arc::ptr_eq(&t, &set.lookup(&mut sm, "sm90").unwrap()));
    let d = set.lookup(&mut sm, "sm85").unwrap_err();
    let text = sm.render(&d.0);
    assert!(text.contains("unknown target `sm85`"), "{text}");
    assert!(text.contains("did you mean `sm80`?"), "{text}");
    let d = set.lookup(&mut sm, "x86-avx521").unwrap_err();
    assert!(sm.render(&d.0).contains("did you mean `x86-avx512`?"));
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tilec-target-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn user_files_and_folders() {
    let dir = temp_dir("files");
    let h200 = edit("sm90", "name = \"sm90\"", "name = \"h200\"").replace("capacity_bytes = 85899345920", "capacity_bytes = 141000000000");
    std::fs::write(dir.join("h200.toml"), &h200).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a target").unwrap();
    let mut sm = SourceMap::new();
    let mut set = TargetSet::new();
    set.add_dir(&mut sm, &dir).unwrap();
    assert_eq!(set.names().last(), Some("h200"));
    let t = set.lookup(&mut sm, "h200").unwrap();
    assert_eq!(t.memory[0].capacity_bytes, 141_000_000_000);
    assert!(matches!(set.origin("h200"), Some(Origin::File(_))));

    // A path is read; a name clash is an error at the name.
    let clash = dir.join("clash.toml");
    std::fs::write(&clash, builtin("sm80")).unwrap();
    let d = set.resolve(&mut sm, clash.to_str().unwrap()).unwrap_err();
    let text = sm.render(&d.0);
    assert!(text.contains("target `sm80` is already defined"), "{text}");
    assert!(text.contains("clash.toml:"), "{text}");

    // By path, with a fresh name.
    let mine = dir.join("mine.toml");
    std::fs::write(&mine, edit("x86-avx2", "name = \"x86-avx2\"", "name = \"mine\"")).unwrap();
    let t = set.resolve(&mut sm, mine.to_str().unwrap()).unwrap();
    assert_eq!(t.name, "mine");

    // Missing files and bad files.
    let d = set.resolve(&mut sm, dir.join("missing.toml").to_str().unwrap()).unwrap_err();
    assert!(sm.render(&d.0).contains("cannot read target description"));
    std::fs::write(dir.join("bad.toml"), "name = ").unwrap();
    let d = TargetSet::new().add_dir(&mut sm, &dir).unwrap_err();
    assert!(sm.render(&d.0).contains("bad.toml:1:"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn load_target_file_reads_a_path() {
    let dir = temp_dir("load");
    let p = dir.join("x.toml");
    std::fs::write(&p, builtin("x86-avx512")).unwrap();
    let mut sm = SourceMap::new();
    assert_eq!(load_target_file(&mut sm, &p).unwrap().name, "x86-avx512");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn listing_shows_levels() {
    let t = parse(builtin("sm80")).unwrap();
    assert!(t.summary_line().starts_with("sm80         cuda  NVIDIA A100"));
    let d = t.details();
    assert!(d.contains("      block      memory shared     binding grid"), "{d}");
    assert!(d.contains("shared"), "{d}");
    assert!(d.contains("loop order: S.block S.thread R.block R.thread R.point V S.point"), "{d}");
}

