//! Pass pipelines (MLIR's textual syntax, `src/pass/pipeline.rs`) built
//! from the registry's declarations: real pass names and options with
//! values of their kinds, and now and then a wrong name, a wrong value or
//! broken structure.

use crate::choices::G;
use tilec::pass::{OptionKind, Registry};

/// Values an option of `name` and `kind` may take; small where a large
/// value means a long run (search budgets), since a slow pass is not a bug.
fn option_value(g: &mut G, name: &str, kind: OptionKind, wrong: bool) -> String {
    if wrong {
        return g
            .pick(&[
                "",
                "-1",
                "18446744073709551616",
                "1e400",
                "nan",
                "x y",
                "\"unterminated",
                "{",
                "[1,2",
                "true",
                "ünï",
            ])
            .to_string();
    }
    match kind {
        OptionKind::Bool => g.pick(&["true", "false", "1", "0"]).to_string(),
        OptionKind::Int => g.pick(&["-1", "0", "1", "4", "16", "64"]).to_string(),
        OptionKind::UInt => match name {
            "budget" | "max-space" => g.pick(&["0", "1", "10", "100", "500"]).to_string(),
            "measure-top-k" => "0".to_string(),
            "beam" | "polish" => g.pick(&["0", "1", "2", "4"]).to_string(),
            _ => g
                .pick(&["0", "1", "2", "3", "4", "8", "16", "64"])
                .to_string(),
        },
        OptionKind::Float => g
            .pick(&["0", "0.5", "1", "2.5", "1e-30", "1e-3", "-1"])
            .to_string(),
        OptionKind::Str => match name {
            "op" => g.pick(&["", "gemm", "conv", "\"a b\"", "op"]).to_string(),
            "read" => g.pick(&["a", "b", "xv", "kv", "v", "\"a\""]).to_string(),
            "level" => g
                .pick(&["shared", "local", "registers", "l1", "l2", "global"])
                .to_string(),
            "axis" => g.pick(&["i", "j", "k", "oh", "n"]).to_string(),
            "file" => g.pick(&["", "records.jsonl", "\"a b.jsonl\""]).to_string(),
            _ => g.pick(&["", "x", "\"quoted value\""]).to_string(),
        },
        OptionKind::Enum(words) => g.pick(words).to_string(),
        OptionKind::IntList => g.pick(&["1,2,3", "[4,8]", "", "[]"]).to_string(),
    }
}

/// A pipeline over the passes of `registry`.
pub fn pipeline(g: &mut G, registry: &Registry, invalid: u32) -> String {
    let wrong = |g: &mut G| invalid > 0 && g.chance(invalid, 100);
    let decls: Vec<_> = registry.iter().collect();
    let n = g.int(0, 6);
    let mut passes = Vec::new();
    for _ in 0..n {
        let d = decls[g.index(decls.len())];
        let name = if wrong(g) {
            g.pick(&[
                "tiles",
                "canonicalise",
                "",
                "search.x",
                "lower-to-llvm",
                "Tile",
            ])
            .to_string()
        } else {
            d.name.to_string()
        };
        let mut opts = Vec::new();
        for o in d.options {
            if g.chance(1, 3) {
                let bad = wrong(g);
                let v = option_value(g, o.name, o.kind, bad);
                opts.push(if o.kind == OptionKind::Bool && g.chance(1, 4) {
                    o.name.to_string()
                } else {
                    format!("{}={v}", o.name)
                });
            }
        }
        if wrong(g) {
            opts.push(g.pick(&["bogus=1", "=1", "seed=", "seed==1"]).to_string());
        }
        let sep = if g.chance(1, 8) { "  " } else { " " };
        passes.push(if opts.is_empty() && g.chance(3, 4) {
            name
        } else {
            format!("{name}{{{}}}", opts.join(sep))
        });
    }
    let sep = if g.chance(1, 8) { ", " } else { "," };
    let list = passes.join(sep);
    match g.weighted(&[6, 1, 2, if invalid > 0 { 1 } else { 0 }]) {
        0 => format!("builtin.module({list})"),
        1 => format!("module({list})"),
        2 => list,
        _ => g.pick(&[
            format!("builtin.module({list}"),
            format!("func.func({list})"),
            format!("builtin.module(builtin.module({list}))"),
            format!("{list})"),
        ]),
    }
}
