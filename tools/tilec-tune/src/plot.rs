//! `--plot`: the objective (the network's estimated latency, Σ ω·latency
//! of the tasks' best measurements) against tuning seconds and against
//! measurements, one line per run (this one and the `--compare` reports),
//! each labelled with its measured end-to-end latency.

use plotters::prelude::*;
use serde_json::Value as Json;
use std::path::Path;

const COLORS: [RGBColor; 6] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40), RGBColor(44, 160, 44), RGBColor(148, 103, 189), RGBColor(255, 127, 14), RGBColor(23, 190, 207)];

/// The run's objective as (x, ms) steps for the x of `x_key`, from the
/// first round at which every task had a latency.
fn points(run: &Json, x_key: &str) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for s in run["steps"].as_array().into_iter().flatten() {
        if let (Some(x), Some(y)) = (s[x_key].as_f64(), s["objective_ms"].as_f64()) {
            if let Some(&(_, last)) = out.last() {
                out.push((x, last));
            }
            out.push((x, y));
        }
    }
    out
}

pub fn draw(runs: &[Json], path: &Path) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| format!("cannot draw `{}`: {x}", path.display());
    // Runs on different thread counts (drawn together with `--plot-only`)
    // say theirs in their labels, not in the title.
    let one_thread_count = runs.iter().all(|r| r["threads"] == runs[0]["threads"]);
    let label = |r: &Json| {
        let tuned = r["tuned_ms"].as_f64().map_or(String::new(), |t| format!(", end to end {t:.2} ms"));
        // Runs that differ only in how sub-tasks are shared, or in the
        // search's options, must still be told apart.
        let subs = match (r["sub_tasks"]["allocation"].as_str(), r["sub_tasks"]["kappa"].as_f64()) {
            (Some("sampled"), Some(k)) => format!(" (κ {k})"),
            (Some("equal"), _) => " (AMOS-style)".to_string(),
            _ => String::new(),
        };
        let subs = if r["sub_tasks"]["with_plain"].as_bool() == Some(true) { format!("{subs} (with plain)") } else { subs };
        let options = r["search_options"].as_str().filter(|o| !o.is_empty()).map_or(String::new(), |o| format!(" {o}"));
        let threads = if one_thread_count { String::new() } else { format!(", {} thread(s)", r["threads"]) };
        format!("{}{subs} scheduler, {} search{options}, seed {}{threads}{tuned}", r["scheduler"].as_str().unwrap_or("?"), r["strategy"].as_str().unwrap_or("?"), r["seed"])
    };
    let first = &runs[0];
    let threads = if one_thread_count { format!(", {} thread(s)", first["threads"]) } else { String::new() };
    let title = format!(
        "tilec-tune @{}: estimated latency (Σ ω·best task latency) while tuning ({}{threads})",
        first["func"].as_str().unwrap_or("?"),
        first["machine"].as_str().unwrap_or("unknown machine"),
    );
    let root = SVGBackend::new(path, (1200, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let body = root.titled(&title, ("sans-serif", 16)).map_err(|x| e(&x))?;
    let areas = body.split_evenly((1, 2));
    for (k, (x_key, x_desc)) in [("seconds", "tuning seconds"), ("measurements", "measurements")].into_iter().enumerate() {
        let lines: Vec<Vec<(f64, f64)>> = runs.iter().map(|r| points(r, x_key)).collect();
        let x_max = lines.iter().flatten().map(|p| p.0).fold(1e-3f64, f64::max);
        let y_max = lines.iter().flat_map(|l| l.iter().skip(l.len().saturating_sub(l.len() * 9 / 10))).map(|p| p.1).fold(1e-3f64, f64::max) * 1.1;
        let y_min = lines.iter().flatten().map(|p| p.1).fold(f64::INFINITY, f64::min).min(y_max) * 0.9;
        let mut chart = ChartBuilder::on(&areas[k])
            .caption(format!("by {x_desc}"), ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, y_min..y_max)
            .map_err(|x| e(&x))?;
        chart.configure_mesh().x_desc(x_desc).y_desc("estimated latency (ms)").draw().map_err(|x| e(&x))?;
        for (i, (run, line)) in runs.iter().zip(&lines).enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(line.iter().copied(), color.stroke_width(2)))
                .map_err(|x| e(&x))?
                .label(label(run))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2)));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).position(SeriesLabelPosition::UpperRight).draw().map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
