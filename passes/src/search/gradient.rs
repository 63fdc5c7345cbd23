//! `gradient`: Ansor-AF-DS's dynamic gradient descent (DGD_Search and
//! DGD_Move, Fig. 9 of `../shared/seeds/003_7b598cfdbb7b1c62.txt`, §5).
//!
//! From a start point, the search predicts every valid `n`-hop neighbour
//! ([`KnobSpace::neighbours`]: `n` knobs moved one step each, `n` from 1
//! up to `hops`), sorts them by predicted score (throughput, higher is
//! better) and measures them a sliding `window` at a time, best predicted
//! first (DGD_Move). The first window with a point faster than the current
//! one moves the search there; it stops looking at a distance when the
//! next window's scores fall below `score-threshold` of the best score, or
//! a window's best measured throughput falls below `measure-threshold` of
//! the best measured so far. No move at any distance up to `hops` is a
//! local minimum: the model learns from what was measured, and the search
//! restarts at a random point. It ends when `trials` measurements are
//! made (or `max-seconds` passes).
//!
//! Where we differ from the figure, and why:
//! - The first start point is not a random one: of `start-samples`
//!   random points, the `starts` (16) best predicted are each descended on
//!   the model alone (`start-descent`: to the best predicted neighbour
//!   within `hops` while the prediction improves), measured, and the
//!   fastest is the start. The model (the analytic one before any
//!   measurement, `learned.rs`) already knows which points are poor, and
//!   predicting is cheap where measuring is not; measuring 16 of them
//!   keeps one wrong prediction from choosing the start and gives the
//!   model measurements from as many places before the descent. (With 3,
//!   the first version, gradient's best on the GEMMs depended on the seed:
//!   54 against 79 GFLOP/s on gemm_1024; docs/search.md.) Restarts are
//!   random, as in the paper.
//! - A resumed search (records of the op measured points: `tilec
//!   --records`, or a tuner's later round of the op) goes on from the
//!   fastest measured point, the point a descent had reached, instead of
//!   new starts.
//! - The paper's `init-samples` random points are measured only with
//!   `init-measured=true`: the learned model starts as the analytic model
//!   and needs no measured warm-up (records of the op, when there are any,
//!   train it before the search starts), and measuring 64 points first
//!   would spend the whole default `trials`.
//! - A neighbour measured before (on an earlier path) is not measured
//!   again; its time is known, so a window holds only new points.
//! - A window takes the points at or above the score threshold, so the
//!   last window of a distance may be short (the figure asks the whole
//!   window to clear it).

use super::knobs::{KnobSpace, TileMoves};
use super::registry::StrategyDecl;
use super::rng::Rng;
use super::space::{Config, Problem};
use super::{SearchCx, Strategy};
use std::collections::BTreeSet;
use tilec::pass::{OptionDecl, OptionKind, PassOptions};

pub const DECL: StrategyDecl = StrategyDecl {
    name: "gradient",
    summary: "Ansor-AF-DS's dynamic gradient descent over n-hop neighbours, ranked by the learned model and moved by measurements",
    options: &[
        OptionDecl { name: "hops", kind: OptionKind::UInt, default: "3", help: "gradient: the farthest neighbours looked at before a point counts as a local minimum (knobs moved at once)" },
        OptionDecl { name: "window", kind: OptionKind::UInt, default: "3", help: "gradient: neighbours measured per step of the sliding window" },
        OptionDecl { name: "score-threshold", kind: OptionKind::Float, default: "0.6", help: "gradient: stop a distance's windows at neighbours predicted below this share of its best prediction" },
        OptionDecl {
            name: "measure-threshold",
            kind: OptionKind::Float,
            default: "0.6",
            help: "gradient: stop a distance's windows when one measures below this share of the best throughput measured",
        },
        OptionDecl { name: "init-samples", kind: OptionKind::UInt, default: "64", help: "gradient: random valid points measured to train the initial model, with init-measured" },
        OptionDecl {
            name: "init-measured",
            kind: OptionKind::Bool,
            default: "false",
            help: "gradient: measure init-samples random points first, as the paper does (they count in trials; without, the model starts as the analytic one)",
        },
        OptionDecl {
            name: "start-samples",
            kind: OptionKind::UInt,
            default: "1024",
            help: "gradient: random valid points predicted to choose the first start from (the `starts` best predicted are measured, the fastest starts; restarts are random)",
        },
        OptionDecl {
            name: "starts",
            kind: OptionKind::UInt,
            default: "16",
            help: "gradient: predicted start points measured before the first descent (the best predicted of start-samples, each descended on the model); the fastest is the first start",
        },
        OptionDecl {
            name: "start-descent",
            kind: OptionKind::Bool,
            default: "true",
            help: "gradient: before measuring, descend from the first start on the model alone (to the best predicted neighbour within hops, while the prediction improves); false starts at the best sample itself",
        },
        OptionDecl {
            name: "tile-moves",
            kind: OptionKind::Enum(&["level", "chain"]),
            default: "level",
            help: "gradient: how a hop moves a tile size: chain (to the next size the axis may take at that level, its other levels repaired to stay nested) or level (to the next size that fits between the levels above and below)",
        },
        OptionDecl {
            name: "constructed-starts",
            kind: OptionKind::UInt,
            default: "4",
            help: "gradient: markov's best constructed states (its walks on the model, measured nothing) measured as start points beside the predicted ones (0: none, the random samples alone)",
        },
        OptionDecl { name: "restart", kind: OptionKind::Enum(&["random", "predicted"]), default: "random", help: "gradient: where to go at a local minimum: a random point (the paper's), or the best predicted of start-samples fresh random points (descended on the model as the first start is)" },
    ],
    measures: true,
    create: |o: &PassOptions| {
        Box::new(Gradient {
            hops: o.uint("hops") as usize,
            window: o.uint("window") as usize,
            score_threshold: o.float("score-threshold"),
            measure_threshold: o.float("measure-threshold"),
            init_samples: o.uint("init-samples") as usize,
            init_measured: o.bool("init-measured"),
            start_samples: o.uint("start-samples") as usize,
            starts: o.uint("starts") as usize,
            start_descent: o.bool("start-descent"),
            constructed_starts: o.uint("constructed-starts") as usize,
            constructor: Some((super::markov::DECL.create)(o)),
            restart_predicted: o.str("restart") == "predicted",
            tile_moves: if o.str("tile-moves") == "chain" { TileMoves::Chain } else { TileMoves::Level },
        })
    },
};

pub struct Gradient {
    pub hops: usize,
    pub window: usize,
    pub score_threshold: f64,
    pub measure_threshold: f64,
    pub init_samples: usize,
    pub init_measured: bool,
    pub start_samples: usize,
    /// `starts`: predicted start points measured before the first descent.
    pub starts: usize,
    pub start_descent: bool,
    /// `constructed-starts`: markov's best constructed states measured as
    /// start points too.
    pub constructed_starts: usize,
    /// What constructs them: markov, with the pass's markov options.
    pub constructor: Option<Box<dyn Strategy>>,
    /// `restart=predicted`: restart at the best predicted of fresh
    /// samples, not a random point.
    pub restart_predicted: bool,
    /// `tile-moves`: how a hop moves a tile size.
    pub tile_moves: TileMoves,
}

/// What DGD_Move decided.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Move {
    /// A measured neighbour faster than the base: go there.
    To(Config, f64),
    /// No window found one: try farther neighbours, or restart.
    Stay,
}

impl Gradient {
    fn check(&self) -> Result<(), String> {
        if self.hops == 0 || self.hops > super::knobs::MAX_HOPS {
            return Err(format!("hops must be between 1 and {} (got {})", super::knobs::MAX_HOPS, self.hops));
        }
        if self.window == 0 {
            return Err("window must be at least 1".into());
        }
        super::check_shares(&[("score-threshold", self.score_threshold), ("measure-threshold", self.measure_threshold)])?;
        if self.start_samples == 0 || self.starts == 0 {
            return Err("start-samples and starts must be at least 1".into());
        }
        Ok(())
    }

    /// DGD_Move (Fig. 9b): `ranked` are `(point, predicted score)`, best
    /// first; `base` is the current point's measured throughput, `best`
    /// the best measured so far (raised by what this measures). `measure`
    /// times a point: its throughput (0 for a failure), `None` once the
    /// budget is spent.
    pub(crate) fn dgd_move(&self, ranked: &[(Config, f64)], base: f64, best: &mut f64, measure: &mut dyn FnMut(&Config) -> Option<f64>) -> Move {
        let Some(&(_, top)) = ranked.first() else { return Move::Stay };
        let score_floor = top * self.score_threshold;
        let measure_floor = *best * self.measure_threshold;
        let mut i = 0;
        while i < ranked.len() {
            let window: Vec<&(Config, f64)> = ranked[i..(i + self.window).min(ranked.len())].iter().take_while(|(_, s)| *s >= score_floor).collect();
            if window.is_empty() {
                break;
            }
            let mut local: Option<(f64, &Config)> = None;
            for (c, _) in &window {
                let Some(perf) = measure(c) else { return Move::Stay };
                if local.is_none_or(|(p, _)| perf > p) {
                    local = Some((perf, c));
                }
            }
            let Some((local_best, at)) = local else { break };
            if local_best > base {
                *best = best.max(local_best);
                return Move::To(at.clone(), local_best);
            }
            *best = best.max(local_best);
            if local_best < measure_floor {
                break;
            }
            i += self.window;
        }
        Move::Stay
    }
}

impl Gradient {
    /// Up to `count` start points: the best predicted of `samples` not
    /// measured yet, each descended on the model (`start-descent`),
    /// without repeats or measured points.
    fn predicted_starts(&self, p: &Problem, space: &KnobSpace, cx: &mut SearchCx, samples: Vec<Config>, measured: &BTreeSet<Config>, count: usize) -> Vec<Config> {
        cx.visited += samples.len() as u64;
        let mut starts: Vec<Config> = Vec::new();
        for s in cx.rank(p, samples.into_iter().filter(|c| !measured.contains(c)).collect()).into_iter().take(count) {
            let s = if self.start_descent { self.descend_on_model(p, space, cx, s) } else { s };
            if !starts.contains(&s) && !measured.contains(&s) {
                starts.push(s);
            }
        }
        starts
    }

    /// Up to `constructed-starts` start points: markov's best constructed
    /// states (its walks and polish on the current model, nothing
    /// measured) that are points of the knob space and not measured yet.
    /// Markov's construction puts whole register tiles, tile levels and
    /// packing together as random draws seldom do; a start there spends
    /// the descent's measurements near the model's best instead of
    /// climbing to it. (It is what evolutionary's first batch gets from
    /// the model too: its best predicted points.)
    fn constructed_starts(&mut self, p: &Problem, space: &KnobSpace, cx: &mut SearchCx, measured: &BTreeSet<Config>) -> Result<Vec<Config>, String> {
        if self.constructed_starts == 0 {
            return Ok(Vec::new());
        }
        let Some(markov) = self.constructor.as_mut() else { return Ok(Vec::new()) };
        let mut ranked = markov.run(p, cx)?;
        ranked.retain(|c| space.valid(c) && !measured.contains(c));
        ranked.truncate(self.constructed_starts);
        cx.note(format!("gradient: {} constructed starts (markov's best states, the walks above)", ranked.len()));
        Ok(ranked)
    }

    /// Steepest descent on the model alone: from `start`, to the best
    /// predicted of the neighbours within `hops` while that beats the
    /// current point's prediction (at most [`MAX_MODEL_STEPS`] steps). No
    /// measurement: where the model is confident, measuring its way there
    /// would spend trials on what it already knows.
    fn descend_on_model(&self, p: &Problem, space: &KnobSpace, cx: &mut SearchCx, start: Config) -> Config {
        let mut cur = start;
        let mut cur_time = cx.predict(p, &cur);
        for _ in 0..MAX_MODEL_STEPS {
            let mut neighbours = Vec::new();
            for n in 1..=self.hops {
                neighbours.extend(space.neighbours(&cur, n, self.tile_moves));
            }
            cx.visited += neighbours.len() as u64;
            let Some(best) = cx.rank(p, neighbours).into_iter().next() else { break };
            let t = cx.predict(p, &best);
            if t >= cur_time || cx.past_deadline() {
                break;
            }
            (cur, cur_time) = (best, t);
        }
        cur
    }
}

/// The most steps [`Gradient::descend_on_model`] takes.
pub const MAX_MODEL_STEPS: usize = 64;

/// Throughput of a measured point in GFLOP/s (0 for a failure).
fn gflops(p: &Problem, m: &tilec::measure::Measurement) -> f64 {
    m.as_ref().map_or(0.0, |t| p.flops / t.median_s / 1e9)
}

impl Strategy for Gradient {
    fn name(&self) -> &'static str {
        "gradient"
    }

    fn run(&mut self, p: &Problem, cx: &mut SearchCx) -> Result<Vec<Config>, String> {
        let space = KnobSpace::new(p);
        let mut rng = Rng::new(cx.seed);
        if self.init_measured {
            for c in space.distinct_samples(&mut rng, self.init_samples) {
                if cx.trials_spent() || cx.past_deadline() {
                    break;
                }
                cx.visited += 1;
                cx.measure_and_learn(p, &c);
            }
        }
        let samples = space.distinct_samples(&mut rng, self.start_samples);
        if samples.is_empty() {
            return Err(format!("no valid point of this op's space fits target `{}`", p.target.name));
        }
        let mut measured: BTreeSet<Config> = cx.measured_points(p).into_iter().collect();
        let mut best = cx.best_gflops(p);
        // A resumed search (the op's records measured points) goes on from
        // the fastest of them; a new one starts at the best measured of a
        // window of the best predicted samples (each descended on the
        // model first).
        let mut resume: Option<(Config, f64)> = if best > 0.0 { cx.ranked_by_measurement(p, Vec::new()).into_iter().next().map(|c| (c, best)) } else { None };
        let mut starts = Vec::new();
        if resume.is_none() {
            starts = self.constructed_starts(p, &space, cx, &measured)?;
            for c in self.predicted_starts(p, &space, cx, samples.clone(), &measured, self.starts.saturating_sub(starts.len())) {
                if !starts.contains(&c) {
                    starts.push(c);
                }
            }
        }
        let (mut moves, mut restarts) = (0u64, 0u64);
        while !cx.trials_spent() && (resume.is_some() || !starts.is_empty()) {
            let mut start: Option<(Config, f64)> = resume.take();
            for s in std::mem::take(&mut starts) {
                if cx.trials_spent() || cx.past_deadline() {
                    break;
                }
                let Some(m) = cx.measure_and_learn(p, &s) else { break };
                measured.insert(s.clone());
                let perf = gflops(p, &m);
                if start.as_ref().is_none_or(|(_, b)| perf > *b) {
                    start = Some((s, perf));
                }
            }
            let Some((mut cur, mut base)) = start else { break };
            best = best.max(base);
            // A start that fails is a local minimum at once.
            while base > 0.0 && !cx.trials_spent() {
                let mut step: Vec<(Config, f64)> = Vec::new();
                let mut moved = Move::Stay;
                for n in 1..=self.hops {
                    let neighbours: Vec<Config> = space.neighbours(&cur, n, self.tile_moves).into_iter().filter(|c| !measured.contains(c)).collect();
                    cx.visited += neighbours.len() as u64;
                    let times = cx.model().predict(p, &neighbours);
                    let mut ranked: Vec<(Config, f64)> = neighbours.into_iter().zip(times).map(|(c, t)| (c, 1.0 / t.max(1e-30))).collect();
                    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                    moved = self.dgd_move(&ranked, base, &mut best, &mut |c| {
                        if cx.trials_spent() || cx.past_deadline() {
                            return None;
                        }
                        let m = cx.measure(p, c)?;
                        step.push((c.clone(), super::model_seconds(&m)));
                        Some(gflops(p, &m))
                    });
                    if moved != Move::Stay || cx.trials_spent() || cx.past_deadline() {
                        break;
                    }
                }
                measured.extend(step.iter().map(|(c, _)| c.clone()));
                // The model learns from each step's measurements (Fig. 9a,
                // line 19).
                cx.model_mut().update(p, &step);
                match moved {
                    Move::To(c, perf) => {
                        cur = c;
                        base = perf;
                        moves += 1;
                    }
                    Move::Stay => break,
                }
            }
            if cx.past_deadline() {
                break;
            }
            // A local minimum: restart at a random point not measured yet
            // (or the best predicted of fresh samples).
            restarts += 1;
            if self.restart_predicted {
                let fresh = space.distinct_samples(&mut rng, self.start_samples);
                starts = self.predicted_starts(p, &space, cx, fresh, &measured, 1);
            } else {
                starts.extend((0..super::knobs::MAX_TRIES).find_map(|_| space.sample_uniform(&mut rng).filter(|c| !measured.contains(c))));
            }
        }
        cx.note(format!("gradient: {} measurements, {moves} moves, {restarts} local minima; best {best:.2} GFLOP/s", cx.measurements()));
        Ok(cx.ranked_by_measurement(p, samples))
    }


    fn check_options(&self) -> Result<(), String> {
        self.check()
    }

    fn failure_help(&self) -> String {
        "gradient needs an evaluator (a CPU target this machine runs); see docs/search.md, `gradient`".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient() -> Gradient {
        Gradient { hops: 3, window: 3, score_threshold: 0.6, measure_threshold: 0.6, init_samples: 64, init_measured: false, start_samples: 1024, starts: 16, start_descent: true, constructed_starts: 0, constructor: None, restart_predicted: false, tile_moves: TileMoves::Level }
    }

    /// Points standing in for configurations (only their order and the
    /// fake measurements matter to DGD_Move).
    fn pts(scores: &[f64]) -> Vec<(Config, f64)> {
        scores.iter().enumerate().map(|(i, &s)| (Config { tiles: vec![vec![i as u64 + 1]], vthreads: vec![1], pack: vec![], order: vec![0], vector: None, intrinsic: None }, s)).collect()
    }

    /// Measures from a table by the point's first tile, logging the order.
    fn fake<'a>(perf: &'a [f64], log: &'a mut Vec<usize>) -> impl FnMut(&Config) -> Option<f64> + 'a {
        move |c: &Config| {
            let i = c.tiles[0][0] as usize - 1;
            log.push(i);
            Some(perf[i])
        }
    }

    #[test]
    fn the_first_window_with_a_faster_point_moves_there() {
        // Fig. 10's story with a window of 3: the first window is slower
        // than the base (1.0), the second has the winner.
        let ranked = pts(&[0.9, 0.85, 0.8, 0.78, 0.75, 0.7, 0.65]);
        let perf = [0.5, 0.6, 0.7, 0.8, 1.4, 1.2, 3.0];
        let mut log = Vec::new();
        let mut best = 1.0;
        let m = gradient().dgd_move(&ranked, 1.0, &mut best, &mut fake(&perf, &mut log));
        assert_eq!(m, Move::To(ranked[4].0.clone(), 1.4));
        // The whole second window is measured before moving (the best of it wins).
        assert_eq!(log, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(best, 1.4);
    }

    #[test]
    fn windows_stop_at_the_score_threshold() {
        // 0.6 of the top score 1.0: the fourth point (0.5) is never measured.
        let ranked = pts(&[1.0, 0.9, 0.61, 0.5, 0.4]);
        let perf = [0.9; 5];
        let mut log = Vec::new();
        let mut best = 1.0;
        assert_eq!(gradient().dgd_move(&ranked, 1.0, &mut best, &mut fake(&perf, &mut log)), Move::Stay);
        assert_eq!(log, vec![0, 1, 2]);
    }

    #[test]
    fn windows_stop_when_a_measurement_falls_below_the_measure_threshold() {
        // Best so far 10: a window whose best is under 6 ends the move.
        let ranked = pts(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        let perf = [5.0, 4.0, 3.0, 20.0, 20.0, 20.0, 20.0];
        let mut log = Vec::new();
        let mut best = 10.0;
        assert_eq!(gradient().dgd_move(&ranked, 8.0, &mut best, &mut fake(&perf, &mut log)), Move::Stay);
        assert_eq!(log, vec![0, 1, 2]);
        // Above the floor the windows go on, and the best seen is kept.
        let perf = [7.0, 6.5, 6.1, 7.5, 9.0, 7.0, 1.0];
        let mut log = Vec::new();
        let mut best = 10.0;
        assert_eq!(gradient().dgd_move(&ranked, 8.0, &mut best, &mut fake(&perf, &mut log)), Move::To(ranked[4].0.clone(), 9.0));
        assert_eq!(log, vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_spent_budget_ends_the_move_at_once() {
        let ranked = pts(&[1.0, 0.9, 0.8]);
        let mut n = 0;
        let mut best = 0.0;
        let m = gradient().dgd_move(&ranked, 1.0, &mut best, &mut |_| {
            n += 1;
            (n < 2).then_some(0.5)
        });
        assert_eq!(m, Move::Stay);
        assert_eq!(n, 2);
    }

    #[test]
    fn bad_options_are_refused() {
        let mut g = gradient();
        g.hops = 0;
        assert!(g.check().unwrap_err().contains("hops"));
        let mut g = gradient();
        g.score_threshold = 1.5;
        assert!(g.check().unwrap_err().contains("score-threshold"));
        let mut g = gradient();
        g.window = 0;
        assert!(g.check().unwrap_err().contains("window"));
    }
}
