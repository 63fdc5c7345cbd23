//! Tuning curves (`tilec-bench --curve`): how the best GFLOP/s a search
//! has found grows with its measurements and with wall time.
//!
//! The search pass hands every measurement, the moment it completes, to
//! the pass context's recorder and through it to the driver's
//! [`RecordSink`]. `--curve` installs a [`CurveSink`] there, which notes
//! when each record arrives: the pass is not changed, and the curve sees
//! every measurement a strategy, the top-k or the final rounds make.
//!
//! The sink sees records, not ops: a record's `workload` (the op's
//! workload key) changing is where one op's search ends and the next one's
//! begins. The first op's clock starts when the pipeline starts (the
//! search is its first pass); a later op's at the previous op's last
//! measurement, which is a little before its search starts. Two identical
//! ops in a row (the same key) make one curve.
//!
//! The curves are kept in the `--json` document (`curves`), from which
//! [`markdown`] and [`plot`] work, for a run and for saved runs alike.

use crate::report::Run;
use indicatif::ProgressBar;
use plotters::prelude::*;
use serde_json::{Map, Value as Json, json};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tilec::records::{Record, RecordSchedule, RecordSink};

/// A measurement as it reached the sink.
#[derive(Clone, Debug)]
struct Arrival {
    /// Seconds since the pipeline started.
    seconds: f64,
    workload_key: String,
    schedule: RecordSchedule,
    /// `None`: the candidate failed (compile error, crash, timeout, wrong
    /// result).
    gflops: Option<f64>,
}

/// What the sink saw of one pipeline run, shared between the sink (which
/// the pass manager owns while the pipeline runs) and tilec-bench.
#[derive(Default, Debug)]
pub struct Log {
    arrivals: Vec<Arrival>,
    /// The pipeline's wall seconds, set when it has run (ended or failed).
    run_s: Option<f64>,
}

pub type SharedLog = Arc<Mutex<Log>>;

/// The [`RecordSink`] of `--curve`: timestamps each record as it arrives
/// and moves the progress bar.
pub struct CurveSink {
    start: Instant,
    log: SharedLog,
    progress: ProgressBar,
    /// The bar's length as given: the measurements planned per op.
    planned: Option<u64>,
    /// The best GFLOP/s of the current op so far, for the progress bar.
    best: Option<f64>,
    /// Where each record is also appended (`--records`): the measured
    /// points themselves, for the model-quality report.
    file: Option<tilec::records::RecordsFile>,
}

impl CurveSink {
    /// A sink whose clock starts at `start` (when the pipeline starts).
    pub fn new(start: Instant, log: SharedLog, progress: ProgressBar) -> CurveSink {
        CurveSink {
            start,
            log,
            planned: progress.length(),
            progress,
            best: None,
            file: None,
        }
    }

    /// This sink, also appending every record to `file`.
    pub fn with_file(self, file: Option<tilec::records::RecordsFile>) -> CurveSink {
        CurveSink { file, ..self }
    }
}

impl RecordSink for CurveSink {
    fn append(&mut self, record: &Record) -> Result<(), String> {
        let seconds = self.start.elapsed().as_secs_f64();
        if let Some(f) = &self.file {
            f.append_line(&record.to_json_line()).map_err(|e| format!("cannot append a record to `{}`: {e}", f.path().display()))?;
        }
        let mut log = self
            .log
            .lock()
            .map_err(|_| "the tuning curve's log is unusable".to_string())?;
        if log
            .arrivals
            .last()
            .is_some_and(|a| a.workload_key != record.workload)
        {
            // The next op: its own count and best.
            self.best = None;
            self.progress.set_position(0);
            if let Some(n) = self.planned {
                self.progress.set_length(n);
            }
        }
        log.arrivals.push(Arrival {
            seconds,
            workload_key: record.workload.clone(),
            schedule: record.schedule.clone(),
            gflops: record.gflops,
        });
        if let Some(g) = record.gflops {
            self.best = Some(self.best.map_or(g, |b| b.max(g)));
        }
        self.progress.inc(1);
        // The final rounds time candidates again past the planned count.
        if self
            .progress
            .length()
            .is_some_and(|n| self.progress.position() > n)
        {
            self.progress.set_length(self.progress.position());
        }
        if let Some(b) = self.best {
            self.progress.set_message(format!("best {b:.2} GFLOP/s"));
        }
        Ok(())
    }
}

/// One point of a curve: after measurement `measurement` (from 1).
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub measurement: u64,
    /// Wall seconds since the op's search started.
    pub seconds: f64,
    /// This candidate's GFLOP/s; `None` if it failed.
    pub gflops: Option<f64>,
    /// The best GFLOP/s of the candidates' first measurements so far.
    pub best_gflops: Option<f64>,
    /// A candidate measured before, timed again (the final rounds): it
    /// costs time but finds nothing new, so it does not move the best.
    pub retimed: bool,
}

/// The curve of one op's search.
#[derive(Clone, Debug, PartialEq)]
pub struct OpCurve {
    /// The op's place among the searched ops of the run (from 0).
    pub op: usize,
    pub workload_key: String,
    pub points: Vec<Point>,
    /// Wall seconds of the op's search.
    pub total_s: f64,
}

impl OpCurve {
    /// The best GFLOP/s found.
    pub fn best(&self) -> Option<f64> {
        self.points.last().and_then(|p| p.best_gflops)
    }

    /// The first point at which the best reached `fraction` of the final
    /// best.
    pub fn reached(&self, fraction: f64) -> Option<&Point> {
        let best = self.best()?;
        self.points
            .iter()
            .find(|p| p.best_gflops.is_some_and(|b| b >= fraction * best))
    }

    /// The curve's fields for the JSON document.
    fn fields(&self) -> Map<String, Json> {
        let points: Vec<Json> = self
            .points
            .iter()
            .map(|p| {
                json!({
                    "measurement": p.measurement,
                    "seconds": p.seconds,
                    "gflops": p.gflops,
                    "best_gflops": p.best_gflops,
                    "retimed": p.retimed,
                })
            })
            .collect();
        let to_95 = self.reached(0.95);
        let fields = json!({
            "op": self.op,
            "workload_key": self.workload_key,
            "measurements": self.points.len(),
            "failures": self.points.iter().filter(|p| p.gflops.is_none()).count(),
            "best_gflops": self.best(),
            "measurements_to_95": to_95.map(|p| p.measurement),
            "seconds_to_95": to_95.map(|p| p.seconds),
            "total_s": self.total_s,
            "points": points,
        });
        match fields {
            Json::Object(m) => m,
            _ => unreachable!("json! of an object is an object"),
        }
    }
}

/// Notes that the pipeline has run (ended or failed) after `run_s` wall
/// seconds.
pub fn finish(log: &SharedLog, run_s: f64) {
    if let Ok(mut log) = log.lock() {
        log.run_s = Some(run_s);
    }
}

/// The curves of a pipeline run, one per op searched, or `None` if the
/// pipeline did not run. A run that measured nothing gives one empty
/// curve.
pub fn curves(log: &SharedLog) -> Option<Vec<OpCurve>> {
    let log = log.lock().ok()?;
    let run_s = log.run_s?;
    Some(curves_of(&log.arrivals, run_s))
}

fn curves_of(arrivals: &[Arrival], run_s: f64) -> Vec<OpCurve> {
    let mut out: Vec<OpCurve> = Vec::new();
    // Each op's arrivals, with the time its search began.
    let mut seen: Vec<&RecordSchedule> = Vec::new();
    let mut origin = 0.0;
    for a in arrivals {
        if out.last().is_none_or(|c| c.workload_key != a.workload_key) {
            if let Some(last) = out.last_mut() {
                let end = last.points.last().map_or(origin, |p| origin + p.seconds);
                last.total_s = end - origin;
                origin = end;
            }
            out.push(OpCurve {
                op: out.len(),
                workload_key: a.workload_key.clone(),
                points: Vec::new(),
                total_s: 0.0,
            });
            seen.clear();
        }
        let curve = out.last_mut().expect("pushed above");
        let retimed = seen.contains(&&a.schedule);
        if !retimed {
            seen.push(&a.schedule);
        }
        let previous = curve.points.last().and_then(|p| p.best_gflops);
        let best = match (previous, a.gflops.filter(|_| !retimed)) {
            (Some(b), Some(g)) => Some(b.max(g)),
            (b, g) => b.or(g),
        };
        curve.points.push(Point {
            measurement: curve.points.len() as u64 + 1,
            seconds: a.seconds - origin,
            gflops: a.gflops,
            best_gflops: best,
            retimed,
        });
    }
    match out.last_mut() {
        Some(last) => last.total_s = (run_s - origin).max(0.0),
        None => out.push(OpCurve {
            op: 0,
            workload_key: String::new(),
            points: Vec::new(),
            total_s: run_s,
        }),
    }
    out
}

/// A curve of the JSON document: `head`'s fields (the run's: workload,
/// strategy, seed, ...) then the curve's.
pub fn curve_json(head: Json, curve: &OpCurve) -> Json {
    let mut m = match head {
        Json::Object(m) => m,
        _ => Map::new(),
    };
    m.extend(curve.fields());
    Json::Object(m)
}

/// How many measurements a search was asked for, from its options:
/// `trials` (the learning strategies'), else `measure-top-k`. For the
/// progress bar only.
pub fn planned_measurements(search_options: &str) -> Option<u64> {
    let value = |key: &str| {
        search_options
            .split_whitespace()
            .find_map(|t| t.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&n| n > 0)
    };
    value("trials").or_else(|| value("measure-top-k"))
}

fn curves_of_run(run: &Run) -> impl Iterator<Item = &Json> {
    run.doc["curves"].as_array().into_iter().flatten()
}

/// Does the document hold tuning curves (`tilec-bench --curve --json`)?
pub fn has_curves(run: &Run) -> bool {
    run.doc["curves"].is_array()
}

/// The curves as one Markdown table: a row per curve (workload, strategy,
/// seed; the op too where a workload searched several; the run where
/// there are several) with its measurements, failures, best GFLOP/s, when
/// it reached 95% of that best, its wall seconds and the final pick's
/// GFLOP/s (tilec-bench's own timing of the compiled workload). Then each
/// run's machine, target, threads and search options.
pub fn markdown(runs: &[Run]) -> String {
    let mut out = String::new();
    let f = |v: &Json, digits: usize| {
        v.as_f64()
            .map_or("—".to_string(), |x| format!("{x:.digits$}"))
    };
    let runs: Vec<&Run> = runs.iter().filter(|r| has_curves(r)).collect();
    let several = runs.len() > 1;
    let (run_head, run_rule) = if several {
        ("| run ", "|---")
    } else {
        ("", "")
    };
    writeln!(
        out,
        "Tuning curves (best GFLOP/s: of the candidates' first timings):\n"
    )
    .ok();
    writeln!(out, "{run_head}| workload | strategy | seed | measurements | failures | best GFLOP/s | measurements to 95% | seconds to 95% | total seconds | final GFLOP/s |").ok();
    writeln!(
        out,
        "{run_rule}|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    .ok();
    for run in &runs {
        for c in curves_of_run(run) {
            if several {
                write!(out, "| {} ", run.name).ok();
            }
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |",
                panel_name(run, c),
                c["strategy"].as_str().unwrap_or("?"),
                c["seed"],
                c["measurements"],
                c["failures"],
                f(&c["best_gflops"], 2),
                c["measurements_to_95"]
                    .as_u64()
                    .map_or("—".to_string(), |n| n.to_string()),
                f(&c["seconds_to_95"], 2),
                f(&c["total_s"], 2),
                f(&c["final_gflops"], 2),
                c["error"]
                    .as_str()
                    .map_or(String::new(), |e| format!(" (error: {})", first_line(e))),
            )
            .ok();
        }
    }
    writeln!(out).ok();
    for run in &runs {
        writeln!(
            out,
            "- `{}`: {}, target `{}`, {} thread(s), search options `{}`.",
            run.name,
            run.doc["machine"].as_str().unwrap_or("?"),
            run.doc["target"].as_str().unwrap_or("?"),
            run.doc["threads"],
            run.doc["search_options"].as_str().unwrap_or(""),
        )
        .ok();
    }
    out
}

fn first_line(e: &str) -> &str {
    e.lines().next().unwrap_or("").trim_start_matches("error: ")
}

/// A curve's workload, with its op where the workload searched several.
fn panel_name(run: &Run, c: &Json) -> String {
    let w = c["workload"].as_str().unwrap_or("?");
    let several = curves_of_run(run)
        .any(|o| o["workload"] == c["workload"] && o["op"].as_u64().unwrap_or(0) > 0);
    match c["op"].as_u64() {
        Some(op) if several => format!("{w} (op {op})"),
        _ => w.to_string(),
    }
}

/// A curve's best-so-far as steps: (x, best) pairs, from its first success,
/// held to `end` on the x axis. `x` reads a point's position.
fn steps(c: &Json, x: impl Fn(&Json) -> Option<f64>, end: f64) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for p in c["points"].as_array().into_iter().flatten() {
        let (Some(x), Some(b)) = (x(p), p["best_gflops"].as_f64()) else {
            continue;
        };
        if let Some(&(_, previous)) = out.last() {
            out.push((x, previous));
        }
        out.push((x, b));
    }
    if let Some(&(last_x, b)) = out.last()
        && end > last_x
    {
        out.push((end, b));
    }
    out
}

/// The colour of line `i`: eight that tell apart on white (Tableau's),
/// then plotters' palette.
fn line_color(i: usize) -> RGBAColor {
    const COLORS: [(u8, u8, u8); 8] = [
        (31, 119, 180),
        (214, 39, 40),
        (44, 160, 44),
        (255, 127, 14),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (23, 190, 207),
    ];
    match COLORS.get(i) {
        Some(&(r, g, b)) => RGBColor(r, g, b).to_rgba(),
        None => Palette99::pick(i).to_rgba(),
    }
}

/// Draws the curves of `runs` into an SVG: per workload a pair of panels,
/// best GFLOP/s so far against measurements and against wall seconds, a
/// line per strategy and seed (and run, where two runs have the same).
pub fn plot(runs: &[Run], path: &Path) -> Result<(), String> {
    // Panels in the order workloads first appear; lines labelled by strategy
    // and seed, coloured the same in every panel.
    let mut panels: Vec<String> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    let mut lines: Vec<(usize, usize, &Json)> = Vec::new();
    for run in runs {
        for c in curves_of_run(run) {
            let panel = panel_name(run, c);
            let mut label = format!(
                "{}, seed {}",
                c["strategy"].as_str().unwrap_or("?"),
                c["seed"]
            );
            let p = panels.iter().position(|x| *x == panel).unwrap_or_else(|| {
                panels.push(panel.clone());
                panels.len() - 1
            });
            if lines
                .iter()
                .any(|&(lp, ll, _)| lp == p && labels[ll] == label)
            {
                label = format!("{label} ({})", run.name);
            }
            let l = labels.iter().position(|x| *x == label).unwrap_or_else(|| {
                labels.push(label.clone());
                labels.len() - 1
            });
            lines.push((p, l, c));
        }
    }
    let mut machines: Vec<String> = Vec::new();
    let mut threads: Vec<String> = Vec::new();
    for run in runs {
        let m = run.doc["machine"]
            .as_str()
            .unwrap_or("unknown machine")
            .to_string();
        let t = run.doc["threads"].to_string();
        if !machines.contains(&m) {
            machines.push(m);
        }
        if !threads.contains(&t) {
            threads.push(t);
        }
    }
    let title = format!(
        "tilec-bench tuning curves: best GFLOP/s so far ({}, {} thread(s))",
        machines.join("; "),
        threads.join("/"),
    );
    let rows = panels.len().max(1);
    let root = SVGBackend::new(path, (1200, 40 + 340 * rows as u32)).into_drawing_area();
    let e = |e: &dyn std::fmt::Display| format!("cannot draw `{}`: {e}", path.display());
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let body = root.titled(&title, ("sans-serif", 18)).map_err(|x| e(&x))?;
    let areas = body.split_evenly((rows, 2));
    for (p, panel) in panels.iter().enumerate() {
        let mine: Vec<&(usize, usize, &Json)> =
            lines.iter().filter(|(lp, _, _)| *lp == p).collect();
        let top = mine
            .iter()
            .filter_map(|(_, _, c)| c["best_gflops"].as_f64())
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.1;
        let max_measurements = mine
            .iter()
            .filter_map(|(_, _, c)| c["measurements"].as_f64())
            .fold(1.0f64, f64::max);
        let max_seconds = mine
            .iter()
            .filter_map(|(_, _, c)| c["total_s"].as_f64())
            .fold(1e-3f64, f64::max);
        type Axis = (
            &'static str,
            fn(&Json) -> Option<f64>,
            fn(&Json) -> Option<f64>,
        );
        let axes: [Axis; 2] = [
            (
                "measurements",
                |p| p["measurement"].as_f64(),
                |c| c["measurements"].as_f64(),
            ),
            (
                "wall seconds",
                |p| p["seconds"].as_f64(),
                |c| c["total_s"].as_f64(),
            ),
        ];
        for (k, (x_desc, x_of, end_of)) in axes.into_iter().enumerate() {
            let x_max = if k == 0 {
                max_measurements
            } else {
                max_seconds
            };
            let mut chart = ChartBuilder::on(&areas[2 * p + k])
                .caption(format!("{panel}: by {x_desc}"), ("sans-serif", 15))
                .margin(10)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..x_max, 0.0..top)
                .map_err(|x| e(&x))?;
            let x_label = |x: &f64| {
                if k == 0 {
                    format!("{x:.0}")
                } else {
                    format!("{x:.1}")
                }
            };
            chart
                .configure_mesh()
                .x_label_formatter(&x_label)
                .x_desc(x_desc)
                .y_desc("best GFLOP/s so far")
                .draw()
                .map_err(|x| e(&x))?;
            for &&(_, l, c) in &mine {
                let color = line_color(l);
                let end = end_of(c).unwrap_or(0.0);
                chart
                    .draw_series(LineSeries::new(steps(c, x_of, end), color.stroke_width(2)))
                    .map_err(|x| e(&x))?
                    .label(labels[l].clone())
                    .legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::LowerRight)
                .draw()
                .map_err(|x| e(&x))?;
        }
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(unroll: u64) -> RecordSchedule {
        RecordSchedule {
            tiles: Vec::new(),
            vthreads: Vec::new(),
            cache: Vec::new(),
            unroll,
            vector: None,
            order: Vec::new(),
            intrinsic: None,
        }
    }

    fn arrival(seconds: f64, key: &str, unroll: u64, gflops: Option<f64>) -> Arrival {
        Arrival {
            seconds,
            workload_key: key.to_string(),
            schedule: schedule(unroll),
            gflops,
        }
    }

    #[test]
    fn best_so_far_grows_from_first_timings_only() {
        let log = [
            arrival(0.5, "a", 1, None),
            arrival(1.0, "a", 2, Some(10.0)),
            arrival(1.5, "a", 3, Some(8.0)),
            arrival(2.0, "a", 4, Some(12.0)),
            // A final-round timing of candidate 2: counted, not a new best.
            arrival(2.5, "a", 2, Some(20.0)),
        ];
        let c = curves_of(&log, 3.0);
        assert_eq!(c.len(), 1);
        let best: Vec<Option<f64>> = c[0].points.iter().map(|p| p.best_gflops).collect();
        assert_eq!(best, [None, Some(10.0), Some(10.0), Some(12.0), Some(12.0)]);
        assert!(c[0].points[4].retimed && !c[0].points[1].retimed);
        assert_eq!(
            c[0].points
                .iter()
                .map(|p| p.measurement)
                .collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        assert_eq!(c[0].total_s, 3.0);
        // 95% of 12 is 11.4: reached at measurement 4.
        assert_eq!(
            c[0].reached(0.95).map(|p| (p.measurement, p.seconds)),
            Some((4, 2.0))
        );
        let j = Json::Object(c[0].fields());
        assert_eq!(j["failures"], 1);
        assert_eq!(j["measurements"], 5);
        assert_eq!(j["seconds_to_95"], 2.0);
    }

    #[test]
    fn ops_split_where_the_workload_changes() {
        let log = [
            arrival(1.0, "a", 1, Some(1.0)),
            arrival(2.0, "a", 2, Some(2.0)),
            arrival(3.0, "b", 1, Some(5.0)),
            arrival(4.5, "b", 2, Some(4.0)),
        ];
        let c = curves_of(&log, 5.0);
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].op, c[1].op), (0, 1));
        // The second op's clock starts at the first op's last measurement;
        // the two ops' times add up to the run's.
        assert_eq!(c[0].total_s, 2.0);
        assert_eq!(
            c[1].points.iter().map(|p| p.seconds).collect::<Vec<_>>(),
            [1.0, 2.5]
        );
        assert_eq!(c[1].total_s, 3.0);
        // Each op counts and bests on its own; the same schedule in
        // another op is not a re-timing.
        assert_eq!(c[1].points[0].measurement, 1);
        assert!(!c[1].points[0].retimed);
        assert_eq!(c[1].best(), Some(5.0));
    }

    #[test]
    fn a_run_that_measured_nothing_has_one_empty_curve() {
        let c = curves_of(&[], 2.0);
        assert_eq!(c.len(), 1);
        assert!(c[0].points.is_empty());
        assert_eq!(c[0].best(), None);
        assert_eq!(c[0].reached(0.95), None);
    }

    #[test]
    fn planned_measurements_read_trials_then_measure_top_k() {
        assert_eq!(planned_measurements("trials=64"), Some(64));
        assert_eq!(
            planned_measurements("measure-top-k=8 trials=1000"),
            Some(1000)
        );
        assert_eq!(planned_measurements("budget=10 measure-top-k=8"), Some(8));
        assert_eq!(planned_measurements("measure-top-k=0"), None);
        assert_eq!(planned_measurements("my-trials=3"), None);
        assert_eq!(planned_measurements(""), None);
    }

    #[test]
    fn steps_hold_the_best_until_the_end() {
        let c = json!({"points": [
            {"measurement": 1, "best_gflops": null},
            {"measurement": 2, "best_gflops": 3.0},
            {"measurement": 3, "best_gflops": 5.0},
        ]});
        let s = steps(&c, |p| p["measurement"].as_f64(), 4.0);
        assert_eq!(s, [(2.0, 3.0), (3.0, 3.0), (3.0, 5.0), (4.0, 5.0)]);
    }
}
