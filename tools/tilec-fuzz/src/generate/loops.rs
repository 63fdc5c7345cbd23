//! Level 2: loop nests over buffers, written by hand the way the
//! scheduling passes write them: loops split into tiles (with guards for
//! partial tiles), CPU mappings (`parallel`, `unroll`, `vector`) or GPU
//! ones (`block.x`, `thread.x`), local accumulators with `fill`, staged
//! copies (`box`, `stride`, `permute`, `pad`, `cooperative` with a
//! `barrier`), `kernel` wrappers, and a compute op reading the result.

use super::{Config, Elem, Scalar, buffer_type, literal, tensor_type};
use crate::choices::G;

#[derive(Copy, Clone, PartialEq, Eq)]
enum Mode {
    Serial,
    Cpu,
    Gpu,
}

/// A loop over `[0, extent)`, split into an outer and inner loop or not:
/// the lines opening it, the index expression, and the guard a partial
/// tile needs.
struct AxisLoops {
    opens: Vec<String>,
    expr: String,
    guard: Option<String>,
}

fn cpu_inner(g: &mut G, innermost: bool) -> &'static str {
    if innermost {
        g.pick(&["", "", " map(vector)", " map(unroll)"])
    } else {
        g.pick(&["", "", " map(unroll)"])
    }
}

fn axis_loops(
    g: &mut G,
    name: &str,
    extent: u64,
    outer_map: &str,
    inner_map: &str,
    split: bool,
) -> AxisLoops {
    if !split || extent == 1 {
        let map = if inner_map.is_empty() {
            outer_map
        } else {
            inner_map
        };
        let tag = if g.chance(1, 2) {
            format!(" axis({name}.point)")
        } else {
            String::new()
        };
        return AxisLoops {
            opens: vec![format!("for %{name} = 0 to {extent}{map}{tag}")],
            expr: format!("%{name}"),
            guard: None,
        };
    }
    let tile = g.int(1, extent);
    let outer = extent.div_ceil(tile);
    let expr = format!("%{name}_o * {tile} + %{name}_i");
    let guard = if !extent.is_multiple_of(tile) || g.chance(1, 8) {
        Some(format!("{expr} < {extent}"))
    } else {
        None
    };
    AxisLoops {
        opens: vec![
            format!("for %{name}_o = 0 to {outer}{outer_map} axis({name}.core)"),
            format!("for %{name}_i = 0 to {tile}{inner_map} axis({name}.point)"),
        ],
        expr,
        guard,
    }
}

struct Writer {
    lines: Vec<String>,
    depth: usize,
}

impl Writer {
    fn open(&mut self, head: &str) {
        self.line(&format!("{head} {{"));
        self.depth += 1;
    }

    fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }

    fn line(&mut self, s: &str) {
        self.lines.push(format!("{}{s}", "  ".repeat(self.depth)));
    }

    fn indent(&self) -> String {
        "  ".repeat(self.depth)
    }
}

/// A function with loop-level code.
pub fn function(g: &mut G, cfg: &Config) -> String {
    let mode = match g.weighted(&[2, 4, 3]) {
        0 => Mode::Serial,
        1 => Mode::Cpu,
        _ => Mode::Gpu,
    };
    let e = if cfg.mixed_types && g.chance(1, 5) {
        Elem::I32
    } else {
        Elem::F32
    };
    let n = g.int(1, cfg.max_extent * 2);
    let m = g.int(1, cfg.max_extent);
    let template = g.weighted(&[4, 3, 3, if mode == Mode::Gpu { 3 } else { 0 }]);
    let mut params = vec![format!("%x: {}", tensor_type(&[n, m], e))];
    let mut w = Writer {
        lines: Vec::new(),
        depth: 1,
    };
    let mut counter = 0usize;
    let reduced = template == 1;
    let out_dims: Vec<u64> = if reduced { vec![n] } else { vec![n, m] };
    w.line(&format!(
        "%y = alloc : {}",
        buffer_type(&out_dims, e, "global")
    ));
    let kernel = g.chance(7, 10);
    if kernel {
        let target = if mode == Mode::Gpu {
            "sm90"
        } else {
            "x86-avx2"
        };
        let label = if g.chance(1, 2) { "\"k\" " } else { "" };
        w.open(&format!("kernel {label}schedule \"{target}\" {{}}"));
    }
    let (outer_map, inner_map) = match mode {
        Mode::Serial => ("", ""),
        Mode::Cpu => (
            g.pick(&[" map(parallel)", " map(parallel)", ""]),
            g.pick(&["", " map(unroll)"]),
        ),
        Mode::Gpu => (" map(block.x)", " map(thread.x)"),
    };
    let mut scalar_inputs: Vec<(String, Elem)> = Vec::new();
    let mut opened = 0;
    match template {
        // Elementwise over a (tiled) 2-D nest.
        0 => {
            let split_i = mode == Mode::Gpu || g.chance(2, 3);
            let li = axis_loops(g, "i", n, outer_map, inner_map, split_i);
            let j_map = match mode {
                Mode::Cpu => cpu_inner(g, true),
                Mode::Gpu if !split_i => " map(thread.x)",
                _ => g.pick(&["", " map(unroll)"]),
            };
            let split_j = mode == Mode::Cpu && g.chance(1, 3);
            let lj = axis_loops(g, "j", m, "", j_map, split_j);
            for o in li.opens.iter() {
                w.open(o);
                opened += 1;
            }
            let guards: Vec<String> = [li.guard.clone(), lj.guard.clone()]
                .into_iter()
                .flatten()
                .collect();
            // The guard of i goes outside j's loops, j's inside.
            if let Some(gi) = &li.guard {
                w.open(&format!("if {gi}"));
                opened += 1;
            }
            for o in lj.opens.iter() {
                w.open(o);
                opened += 1;
            }
            if let Some(gj) = &lj.guard {
                w.open(&format!("if {gj}"));
                opened += 1;
            }
            let _ = guards;
            let (ie, je) = (li.expr.clone(), lj.expr.clone());
            w.line(&format!("%a = load %x[{ie}, {je}] : {}", e.name()));
            scalar_inputs.push(("%a".into(), e));
            if g.chance(1, 2) {
                params.push(format!("%w: {}", tensor_type(&[m], e)));
                w.line(&format!("%b = load %w[{je}] : {}", e.name()));
                scalar_inputs.push(("%b".into(), e));
            }
            if g.chance(1, 3) {
                params.push(format!("%t: {}", tensor_type(&[m, n], e)));
                w.line(&format!("%c = load %t[{je}, {ie}] : {}", e.name()));
                scalar_inputs.push(("%c".into(), e));
            }
            if g.chance(1, 3) {
                // A shifted read, padded.
                w.line(&format!(
                    "%d = load %x[{ie}, {je} + 1] pad({}) : {}",
                    literal(g, e, false),
                    e.name()
                ));
                scalar_inputs.push(("%d".into(), e));
            }
            let ind = w.indent();
            let mut sc = Scalar {
                prefix: "v",
                counter: &mut counter,
                special: cfg.special_floats,
                invalid: 0,
            };
            let v = sc.value(
                g,
                &scalar_inputs,
                e,
                &[ie.clone(), je.clone()],
                3,
                &ind,
                &mut w.lines,
            );
            w.line(&format!("store {v}, %y[{ie}, {je}]"));
        }
        // A reduction into a local accumulator.
        1 => {
            let split_i = mode == Mode::Gpu || g.chance(1, 2);
            let li = axis_loops(g, "i", n, outer_map, inner_map, split_i);
            for o in li.opens.iter() {
                w.open(o);
                opened += 1;
            }
            if let Some(gi) = &li.guard {
                w.open(&format!("if {gi}"));
                opened += 1;
            }
            let ie = li.expr.clone();
            let (combine, init) = match g.index(3) {
                0 => ("add", if e.is_float() { "0.0" } else { "0" }),
                1 => ("max", if e.is_float() { "-inf" } else { "-2147483648" }),
                _ => ("min", if e.is_float() { "inf" } else { "2147483647" }),
            };
            w.line(&format!("%acc = alloc : {}", buffer_type(&[1], e, "local")));
            w.line(&format!("fill %acc, {init}"));
            let kmap = if mode == Mode::Cpu {
                g.pick(&["", " map(unroll)"])
            } else {
                ""
            };
            w.open(&format!("for %k = 0 to {m}{kmap} reduce(k.point)"));
            w.line(&format!("%a = load %x[{ie}, %k] : {}", e.name()));
            w.line(&format!("%c = load %acc[0] : {}", e.name()));
            let ind = w.indent();
            let mut sc = Scalar {
                prefix: "v",
                counter: &mut counter,
                special: cfg.special_floats,
                invalid: 0,
            };
            let v = sc.value(
                g,
                &[("%a".into(), e)],
                e,
                &["%k".to_string()],
                2,
                &ind,
                &mut w.lines,
            );
            w.line(&format!("%s = {combine} %c, {v} : {}", e.name()));
            w.line("store %s, %acc[0]");
            w.close();
            w.line(&format!("%r = load %acc[0] : {}", e.name()));
            w.line(&format!("store %r, %y[{ie}]"));
        }
        // A tile staged in a local buffer by `copy`.
        2 => {
            let tile = g.int(1, n);
            let outer = n.div_ceil(tile);
            let partial = !n.is_multiple_of(tile);
            let stride = if g.chance(1, 3) { g.int(2, 3) } else { 1 };
            let permute = g.chance(1, 3);
            let src_rows = (n - 1) * stride + 1;
            params[0] = format!("%x: {}", tensor_type(&[src_rows, m], e));
            let omap = if mode == Mode::Cpu { outer_map } else { "" };
            w.open(&format!("for %io = 0 to {outer}{omap}"));
            opened += 1;
            let bdims = if permute { [m, tile] } else { [tile, m] };
            w.line(&format!(
                "%tl = alloc : {}",
                buffer_type(&bdims, e, "local")
            ));
            let mut copy = format!(
                "copy %x[%io * {}, 0] -> %tl[0, 0] box [{tile}, {m}]",
                tile * stride
            );
            if stride > 1 {
                copy.push_str(&format!(" stride [{stride}, 1]"));
            }
            if permute {
                copy.push_str(" permute [1, 0]");
            }
            if partial || g.chance(1, 6) {
                copy.push_str(&format!(" pad({})", literal(g, e, false)));
            }
            w.line(&copy);
            w.open(&format!("for %ii = 0 to {tile}"));
            opened += 1;
            let row = format!("%io * {tile} + %ii");
            if partial {
                w.open(&format!("if {row} < {n}"));
                opened += 1;
            }
            let jmap = if mode == Mode::Cpu {
                cpu_inner(g, true)
            } else {
                ""
            };
            w.open(&format!("for %j = 0 to {m}{jmap}"));
            opened += 1;
            let at = if permute { "%j, %ii" } else { "%ii, %j" };
            w.line(&format!("%a = load %tl[{at}] : {}", e.name()));
            let ind = w.indent();
            let mut sc = Scalar {
                prefix: "v",
                counter: &mut counter,
                special: cfg.special_floats,
                invalid: 0,
            };
            let v = sc.value(
                g,
                &[("%a".into(), e)],
                e,
                std::slice::from_ref(&row),
                3,
                &ind,
                &mut w.lines,
            );
            w.line(&format!("store {v}, %y[{row}, %j]"));
        }
        // A GPU block stages its rows in shared memory, cooperatively.
        _ => {
            let tile = g.int(1, n.min(32));
            let outer = n.div_ceil(tile);
            let partial = !n.is_multiple_of(tile);
            w.open(&format!("for %b = 0 to {outer} map(block.x) axis(i.block)"));
            opened += 1;
            w.line(&format!(
                "%sh = alloc : {}",
                buffer_type(&[tile, m], e, "shared")
            ));
            w.open(&format!(
                "for %t = 0 to {tile} map(thread.x) axis(i.thread)"
            ));
            opened += 1;
            let pad = if partial {
                format!(" pad({})", literal(g, e, false))
            } else {
                String::new()
            };
            w.line(&format!(
                "copy %x[%b * {tile}, 0] -> %sh[0, 0] box [{tile}, {m}]{pad} cooperative"
            ));
            w.line("barrier");
            let row = format!("%b * {tile} + %t");
            if partial {
                w.open(&format!("if {row} < {n}"));
                opened += 1;
            }
            w.open(&format!("for %j = 0 to {m}"));
            opened += 1;
            w.line(&format!("%a = load %sh[%t, %j] read(a) : {}", e.name()));
            let ind = w.indent();
            let mut sc = Scalar {
                prefix: "v",
                counter: &mut counter,
                special: cfg.special_floats,
                invalid: 0,
            };
            let v = sc.value(g, &[("%a".into(), e)], e, &[], 3, &ind, &mut w.lines);
            w.line(&format!("store {v}, %y[{row}, %j]"));
        }
    }
    for _ in 0..opened {
        w.close();
    }
    if kernel {
        w.close();
    }
    let out_ty = tensor_type(&out_dims, e);
    let mut ret = "%y".to_string();
    if g.chance(1, 3) {
        // A compute op reading the loops' buffer.
        let axes: Vec<(&str, u64)> = ["i", "j"]
            .into_iter()
            .zip(out_dims.iter().copied())
            .collect();
        let decl = axes
            .iter()
            .map(|(a, x)| format!("{a}: {x}"))
            .collect::<Vec<_>>()
            .join(", ");
        let idx = axes.iter().map(|(a, _)| *a).collect::<Vec<_>>().join(", ");
        w.line(&format!(
            "%z = compute ({decl}) reads(%c = %y[{idx}]) -> {out_ty}[{idx}] {{"
        ));
        let mut lines = Vec::new();
        let mut counter = 0;
        let mut sc = Scalar {
            prefix: "",
            counter: &mut counter,
            special: cfg.special_floats,
            invalid: 0,
        };
        let v = sc.value(g, &[("%c".into(), e)], e, &[], 2, "    ", &mut lines);
        w.lines.extend(lines);
        w.line(&format!("  yield {v} : {}", e.name()));
        w.line("}");
        ret = "%z".into();
    }
    w.line(&format!("return {ret}"));
    format!(
        "func @loops({}) -> {out_ty} {{\n{}\n}}\n",
        params.join(", "),
        w.lines.join("\n")
    )
}
