//! Reports from saved runs: `tilec-bench --from RUN.json ... [--plot
//! OUT.svg]` prints one Markdown table of the runs side by side and draws
//! GFLOP/s per workload as an SVG bar chart (`docs/performance.md` is
//! made this way). The runs are `tilec-bench --json` documents; nothing is
//! measured again.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One saved run (a `--json` document) and where it came from.
pub struct Run {
    pub name: String,
    pub doc: Json,
}

pub fn load(path: &Path) -> Result<Run, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let doc: Json = serde_json::from_str(&text).map_err(|e| {
        format!(
            "`{}` is not a tilec-bench --json document: {e}",
            path.display()
        )
    })?;
    if !doc["records"].is_array() {
        return Err(format!(
            "`{}` has no `records`: not a tilec-bench --json document",
            path.display()
        ));
    }
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Run { name, doc })
}

fn threads(run: &Run) -> u64 {
    run.doc["threads"].as_u64().unwrap_or(1)
}

/// The distinct values of a record field (`workload`, `strategy`) over
/// the runs' records, in the order they first appear.
fn distinct(runs: &[Run], field: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in runs.iter().flat_map(|run| run.doc["records"].as_array().into_iter().flatten()) {
        if let Some(v) = r[field].as_str() {
            if !out.iter().any(|o| o == v) {
                out.push(v.to_string());
            }
        }
    }
    out
}

fn record<'a>(run: &'a Run, workload: &str, strategy: &str) -> Option<&'a Json> {
    run.doc["records"]
        .as_array()?
        .iter()
        .find(|r| r["workload"] == workload && r["strategy"] == strategy)
}

/// The runs grouped by thread count, in the order the counts first appear.
fn by_threads(runs: &[Run]) -> Vec<(u64, Vec<&Run>)> {
    let mut groups: Vec<(u64, Vec<&Run>)> = Vec::new();
    for run in runs {
        let t = threads(run);
        match groups.iter_mut().find(|(g, _)| *g == t) {
            Some((_, g)) => g.push(run),
            None => groups.push((t, vec![run])),
        }
    }
    groups
}

/// The Markdown table: a row per workload and strategy; per thread count
/// GFLOP/s, % of that run's peak (headed "% nominal" where no run of the
/// thread count measured its peak), the baseline's GFLOP/s and the ratio;
/// whether every kernel of the row agreed with the interpreter. Then the
/// runs' machines and peaks.
pub fn markdown(runs: &[Run]) -> String {
    let mut out = String::new();
    let groups = by_threads(runs);
    let mut head = String::from("| workload | strategy |");
    let mut rule = String::from("|---|---|");
    for (t, group) in &groups {
        // A peak that was not measured is the target's nominal figure, which
        // a fast core can exceed: the column says so, as the live table does.
        let pct = if group.iter().all(|run| run.doc["peak"]["source"] == "nominal") {
            "% nominal"
        } else {
            "% peak"
        };
        write!(
            head,
            " GFLOP/s, {t}t | {pct}, {t}t | baseline, {t}t | ratio, {t}t |"
        )
        .ok();
        rule.push_str("---:|---:|---:|---:|");
    }
    writeln!(out, "{head} check |\n{rule}---|").ok();
    let all_strategies = distinct(runs, "strategy");
    let f = |v: &Json, scale: f64, digits: usize| {
        v.as_f64()
            .map_or("—".to_string(), |x| format!("{:.*}", digits, x * scale))
    };
    for w in distinct(runs, "workload") {
        for s in &all_strategies {
            let found: Vec<Option<&Json>> = groups
                .iter()
                .map(|(_, g)| g.iter().find_map(|run| record(run, &w, s)))
                .collect();
            if found.iter().all(Option::is_none) {
                continue;
            }
            let mut line = format!("| {w} | {s} |");
            let mut checks: Vec<Option<bool>> = Vec::new();
            for r in &found {
                match r {
                    Some(r) if r["error"].is_string() => {
                        line.push_str(" error | | | |");
                        checks.push(Some(false));
                    }
                    Some(r) => {
                        write!(
                            line,
                            " {} | {} | {} | {} |",
                            f(&r["gflops"], 1.0, 1),
                            f(&r["peak_fraction"], 100.0, 0),
                            f(&r["baseline"]["gflops"], 1.0, 1),
                            f(&r["ratio_to_baseline"], 1.0, 2)
                        )
                        .ok();
                        checks.push(r["check"].as_bool());
                    }
                    None => line.push_str(" | | | |"),
                }
            }
            let check = if checks.contains(&Some(false)) {
                "FAIL"
            } else if checks.iter().all(|c| *c == Some(true)) {
                "ok"
            } else {
                "—"
            };
            writeln!(out, "{line} {check} |").ok();
        }
    }
    writeln!(out).ok();
    for run in runs {
        let p = &run.doc["peak"];
        let mut libs: Vec<String> = run.doc["records"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["baseline"]["library"].as_str().map(str::to_string))
            .collect();
        libs.sort();
        libs.dedup();
        // Timed in turns with the baselines (`--in-turns`, every row).
        let records = run.doc["records"].as_array().into_iter().flatten();
        let in_turns = run.doc["records"].as_array().is_some_and(|r| !r.is_empty()) && records.clone().all(|r| r["in_turns"].as_bool() == Some(true));
        let timing = if in_turns {
            let rounds = run.doc["rounds"].as_u64().unwrap_or(1);
            format!("timed in turns with the baselines, one call of each alternately, {rounds} round(s) of 30 calls each (the medians of the rounds' medians)")
        } else {
            format!(
                "{} timed runs{} after {} warm-up(s)",
                run.doc["repeat"],
                run.doc["rounds"].as_u64().filter(|&r| r > 1).map_or(String::new(), |r| format!(" in each of {r} rounds (alternating with the baselines; the medians of the rounds' medians)")),
                run.doc["warmup"]
            )
        };
        writeln!(
            out,
            "- `{}`: {}, target `{}`, {} thread(s); peak {} GFLOP/s ({}){}; {timing}, seed {}; baselines: {}{}.",
            run.name,
            run.doc["machine"].as_str().unwrap_or("?"),
            run.doc["target"].as_str().unwrap_or("?"),
            threads(run),
            f(&p["gflops"], 1.0, 1),
            p["source"].as_str().unwrap_or("?"),
            p["bandwidth_gbs"].as_f64().map_or(String::new(), |b| format!(", triad {b:.1} GB/s")),
            run.doc["seed"],
            if libs.is_empty() { "none".to_string() } else { libs.join(", ") },
            if run.doc["weights"].as_bool() == Some(true) { "; parameters after the first as weights, laid out once (`--weights`)" } else { "" },
        )
        .ok();
    }
    out
}

/// The bottom of the chart's GFLOP/s axis (log scale).
const BOTTOM: f64 = 0.5;

/// Draws GFLOP/s per workload: per run, a bar per strategy and one for the
/// baseline library, and each run's peak as a line.
pub fn plot(runs: &[Run], path: &Path) -> Result<(), String> {
    let names = distinct(runs, "workload");
    // Series: (label, per workload GFLOP/s).
    let mut series: Vec<(String, BTreeMap<usize, f64>)> = Vec::new();
    for run in runs {
        let t = threads(run);
        for s in distinct(std::slice::from_ref(run), "strategy") {
            let mut tilec = BTreeMap::new();
            let mut base = BTreeMap::new();
            for (i, w) in names.iter().enumerate() {
                if let Some(r) = record(run, w, &s) {
                    if let Some(g) = r["gflops"].as_f64() {
                        tilec.insert(i, g);
                    }
                    if let Some(g) = r["baseline"]["gflops"].as_f64() {
                        base.insert(i, g);
                    }
                }
            }
            series.push((format!("tilec {s}, {t} thread(s)"), tilec));
            // One baseline series per run (every strategy measures the same).
            let label = format!("numpy / onnxruntime, {t} thread(s)");
            if !base.is_empty() && !series.iter().any(|(l, _)| *l == label) {
                series.push((label, base));
            }
        }
    }
    let top = series
        .iter()
        .flat_map(|(_, v)| v.values().copied())
        .chain(runs.iter().filter_map(|r| r.doc["peak"]["gflops"].as_f64()))
        .fold(1.0f64, f64::max)
        // Room above the bars (log scale) for the legend.
        * 40.0;
    let width = (names.len() as u32 * 60).max(640) + 120;
    let root = SVGBackend::new(path, (width, 560)).into_drawing_area();
    let e = |e: &dyn std::fmt::Display| format!("cannot draw `{}`: {e}", path.display());
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let title = runs
        .first()
        .and_then(|r| r.doc["machine"].as_str())
        .unwrap_or("this machine")
        .to_string();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("tilec-bench: GFLOP/s per workload ({title})"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(150)
        .y_label_area_size(60)
        // Log scale: pooling's few GFLOP/s and GEMM's hundred both show.
        .build_cartesian_2d(-0.5f64..names.len() as f64 - 0.5, (BOTTOM..top).log_scale())
        .map_err(|x| e(&x))?;
    // Workload i's bars are centred on x = i; its label is drawn below,
    // rotated, starting at the axis (the mesh would centre it on the tick).
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("GFLOP/s (median)")
        .draw()
        .map_err(|x| e(&x))?;
    let label_style = ("sans-serif", 11).into_font().transform(FontTransform::Rotate90).into_text_style(&root).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, name) in names.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64, BOTTOM));
        root.draw(&Text::new(name.clone(), (x, y + 6), label_style.clone())).map_err(|x| e(&x))?;
    }
    let n = series.len().max(1) as f64;
    for (k, (label, values)) in series.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        let w = 0.8 / n;
        chart
            .draw_series(values.iter().map(|(&i, &g)| {
                let x0 = i as f64 - 0.4 + k as f64 * w;
                Rectangle::new([(x0, BOTTOM), (x0 + w * 0.95, g.max(BOTTOM))], color.filled())
            }))
            .map_err(|x| e(&x))?
            .label(label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    // One peak line per thread count: the first run's.
    for (k, run) in by_threads(runs).into_iter().map(|(_, g)| g[0]).enumerate() {
        if let Some(p) = run.doc["peak"]["gflops"].as_f64() {
            let color = Palette99::pick(series.len() + k).to_rgba();
            let source = run.doc["peak"]["source"].as_str().unwrap_or("");
            chart
                .draw_series(LineSeries::new(
                    [(-0.5, p), (names.len() as f64 - 0.5, p)],
                    color.stroke_width(2),
                ))
                .map_err(|x| e(&x))?
                .label(format!("{source} peak, {} thread(s): {p:.0}", threads(run)))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 10, y)], color.stroke_width(2))
                });
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
