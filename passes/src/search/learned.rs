//! The learned cost model (Ansor-AF-DS §4; Ansor §5.2): gradient-boosted
//! regression trees trained online on measured points, over the features
//! of `features.rs` (the paper's analytical ones, `af`, or the richer
//! loop-nest set, `loops`).
//!
//! **What the trees learn.** Not the time itself, but how far the
//! analytic model ([`Problem::predict`]) is off: each measured point
//! gives the row `ln(measured seconds / analytic seconds)`, and a
//! prediction is the analytic time times `e^(trees)`. Three things follow:
//! - a model without rows predicts exactly what the analytic model does,
//!   so a learning strategy starts where the construction strategies are,
//!   and needs no measured warm-up before its first ranking (measuring the
//!   paper's 64 random samples first would spend a whole default budget
//!   of `trials`; `gradient`'s `init-measured` does it where wanted);
//! - its predictions are seconds, like every [`CostModel`]'s, so reports
//!   and thresholds read the same for every model;
//! - a ratio transfers between workloads where a time does not: one model
//!   learns from every op of a run (a GEMM's rows help the next GEMM).
//!
//! A failed measurement (a crash, a timeout, a wrong result) is a row too,
//! [`FAILED_LOG_RATIO`]: the trees learn to steer away from its
//! neighbourhood, as Ansor's zero throughput for a failure does.
//!
//! **Rows and persistence.** A row is keyed by its workload and its knob
//! vector ([`KnobSpace::encode`]); measuring a point again replaces its
//! row, so the pass's and a strategy's updates with the same measurement
//! do not count twice. The rows are the measurements, and the measurements
//! are the records file's (`tilec --records`): the search hands a learning
//! model the records it has for the op before the strategy starts, and the
//! model refits on them. That is the model's persistence: rebuilding it
//! from the records (one fit; docs/dependencies.md has its cost) keeps
//! it in step with them by construction, where a saved model file could
//! go stale.
//!
//! **Fitting.** Every update refits from all rows, in key order, with the
//! `gbdt` crate's exact greedy trees, without sampling rows or features:
//! the same rows give the same trees, bit for bit.

use super::features::FeatureSet;
use super::knobs::KnobSpace;
use super::model::CostModel;
use super::space::{Config, Problem};
use gbdt::decision_tree::Data;
use gbdt::gradient_boost::GBDT;
use std::collections::BTreeMap;

/// The row a failed measurement gives: `ln 100`, a point a hundred times
/// slower than the analytic model says.
pub const FAILED_LOG_RATIO: f64 = 4.605_170_185_988_091;

/// The fewest rows the trees are fitted on; below, the model is the
/// analytic one.
pub const MIN_ROWS: usize = 4;

/// The trees' settings. Ansor fits XGBoost with depth 6 (XGBoost's
/// default) and learning rate 0.2; rounds are fixed here, where XGBoost
/// stops early on a held-out part.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TreeSettings {
    pub trees: usize,
    pub depth: u32,
    pub learning_rate: f32,
    /// The fewest rows a leaf keeps.
    pub min_leaf: usize,
}

impl Default for TreeSettings {
    fn default() -> Self {
        TreeSettings { trees: 100, depth: 6, learning_rate: 0.2, min_leaf: 2 }
    }
}

/// One measured point.
#[derive(Clone, Debug)]
struct Row {
    features: Vec<f32>,
    /// `ln(measured / analytic)`, or [`FAILED_LOG_RATIO`].
    log_ratio: f32,
}

/// Gradient-boosted trees over `features`, on top of the analytic model
/// (module docs).
pub struct LearnedModel {
    features: FeatureSet,
    settings: TreeSettings,
    rows: BTreeMap<(String, Vec<i64>), Row>,
    trees: Option<GBDT>,
}

impl LearnedModel {
    pub fn new(features: FeatureSet) -> LearnedModel {
        LearnedModel::with_settings(features, TreeSettings::default())
    }

    pub fn with_settings(features: FeatureSet, settings: TreeSettings) -> LearnedModel {
        LearnedModel { features, settings, rows: BTreeMap::new(), trees: None }
    }

    pub fn feature_set(&self) -> FeatureSet {
        self.features
    }

    /// Are trees fitted (else predictions are the analytic model's)?
    pub fn fitted(&self) -> bool {
        self.trees.is_some()
    }

    /// The trees' correction of each point's analytic time, `ln(ratio)`
    /// (0 without trees).
    fn log_ratios(&self, p: &Problem, points: &[Config]) -> Vec<f64> {
        let Some(trees) = &self.trees else { return vec![0.0; points.len()] };
        let data: Vec<Data> = points.iter().map(|c| Data::new_test_data(self.features.extract(p, c), None)).collect();
        trees.predict(&data).into_iter().map(f64::from).collect()
    }

    /// Fits the trees on every row (none below [`MIN_ROWS`]).
    fn refit(&mut self) {
        if self.rows.len() < MIN_ROWS {
            self.trees = None;
            return;
        }
        let Some(width) = self.rows.values().next().map(|r| r.features.len()) else { return };
        let mut config = gbdt::config::Config::new();
        config.set_feature_size(width);
        config.set_max_depth(self.settings.depth);
        config.set_iterations(self.settings.trees);
        config.set_shrinkage(self.settings.learning_rate);
        config.set_min_leaf_size(self.settings.min_leaf);
        config.set_loss("SquaredError");
        // No sampling: the same rows give the same trees.
        config.set_data_sample_ratio(1.0);
        config.set_feature_sample_ratio(1.0);
        config.set_training_optimization_level(2);
        // Rows of another width (a CPU and a GPU op in one run) are left
        // out: one model sees one feature layout.
        let mut data: Vec<Data> = self.rows.values().filter(|r| r.features.len() == width).map(|r| Data::new_training_data(r.features.clone(), 1.0, r.log_ratio, None)).collect();
        let mut trees = GBDT::new(&config);
        trees.fit(&mut data);
        self.trees = Some(trees);
    }
}

impl CostModel for LearnedModel {
    fn name(&self) -> &'static str {
        match self.features {
            FeatureSet::Analytical => "gbdt-af",
            FeatureSet::Loops => "gbdt-loops",
        }
    }

    fn predict(&self, p: &Problem, points: &[Config]) -> Vec<f64> {
        let ratios = self.log_ratios(p, points);
        points.iter().zip(ratios).map(|(c, r)| p.predict(c) * r.exp()).collect()
    }

    fn update(&mut self, p: &Problem, measured: &[(Config, f64)]) {
        if measured.is_empty() {
            return;
        }
        let space = KnobSpace::new(p);
        for (c, seconds) in measured {
            let log_ratio = if seconds.is_finite() && *seconds > 0.0 { (seconds / p.predict(c).max(1e-12)).ln() } else { FAILED_LOG_RATIO };
            let row = Row { features: self.features.extract(p, c), log_ratio: log_ratio as f32 };
            self.rows.insert((p.workload.clone(), space.encode(c)), row);
        }
        self.refit();
    }

    fn features(&self, p: &Problem, point: &Config) -> Option<Vec<f32>> {
        Some(self.features.extract(p, point))
    }

    fn learns(&self) -> bool {
        true
    }

    fn rows(&self) -> usize {
        self.rows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::knobs::KnobSpace;
    use crate::search::rng::Rng;
    use crate::testing::parse;

    fn gemm() -> Problem {
        gemm_on("x86-avx2")
    }

    fn gemm_on(target: &str) -> Problem {
        let m = parse(
            "func @g(%A: tensor<64x64xf32>, %B: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %C = compute \"gemm\" (i: 64, j: 64) reduce sum (k: 64) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<64x64xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}",
        );
        let f = &m.funcs[0];
        let op = f.regions[f.body].ops[0];
        let target = tilec::target::builtin(target).expect("builtin target");
        Problem::new(f, op, target, 16).expect("a compute op")
    }

    fn samples(p: &Problem, n: usize, seed: u64) -> Vec<Config> {
        let space = KnobSpace::new(p);
        let mut rng = Rng::new(seed);
        let mut out: Vec<Config> = Vec::new();
        while out.len() < n {
            let c = space.sample_uniform(&mut rng).expect("a valid point");
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn without_rows_it_is_the_analytic_model() {
        let p = gemm();
        let m = LearnedModel::new(FeatureSet::Analytical);
        let pts = samples(&p, 8, 1);
        let want: Vec<f64> = pts.iter().map(|c| p.predict(c)).collect();
        assert_eq!(m.predict(&p, &pts), want);
        assert!(!m.fitted());
    }

    /// Times made up by rules the analytic model does not know: after
    /// learning from some points, the model ranks held-out points by them.
    /// The loop features see every tile size, so they learn a rule of the
    /// outermost `i` tile (twice as slow for every doubling); the
    /// analytical ones see tiles only through what they cost (the
    /// outermost tile through the cores' load balance, equal here), so
    /// they are taught a rule of the register tile's rows, which sets its
    /// reuse. One draw of 80 points may teach little (with the analytical
    /// features the gain in rank correlation over the analytic model's
    /// ranged from -0.13 to 0.14 over eight seeds), so the gain is averaged
    /// over eight draws of 160.
    #[test]
    fn an_update_teaches_it_what_the_analytic_model_misses() {
        let p = gemm();
        let gain = |features: FeatureSet, truth: &dyn Fn(&Config) -> f64| {
            let (mut before, mut after) = (0.0, 0.0);
            for seed in 0..8 {
                let pts = samples(&p, 240, seed);
                let (train, held) = pts.split_at(160);
                let mut m = LearnedModel::new(features);
                let rows: Vec<(Config, f64)> = train.iter().map(|c| (c.clone(), truth(c))).collect();
                m.update(&p, &rows);
                assert!(m.fitted());
                assert_eq!(m.rows(), 160);
                // The same update again changes nothing: rows are keyed by point.
                m.update(&p, &rows);
                assert_eq!(m.rows(), 160);
                let times: Vec<f64> = held.iter().map(truth).collect();
                before += spearman(&crate::search::AnalyticModel.predict(&p, held), &times) / 8.0;
                after += spearman(&m.predict(&p, held), &times) / 8.0;
            }
            (before, after)
        };
        let (before, after) = gain(FeatureSet::Loops, &|c| p.predict(c) * c.tiles[0][0] as f64);
        assert!(after > before + 0.2 && after > 0.9, "loops: mean rank correlation before {before:.3}, after {after:.3}");
        let (before, after) = gain(FeatureSet::Analytical, &|c| p.predict(c) * c.tiles[0][2] as f64);
        assert!(after > before + 0.03 && after > 0.6, "af: mean rank correlation before {before:.3}, after {after:.3}");
    }

    fn spearman(a: &[f64], b: &[f64]) -> f64 {
        crate::search::quality::spearman(a, b)
    }

    #[test]
    fn failures_are_predicted_slow_and_fits_are_deterministic() {
        let p = gemm();
        let pts = samples(&p, 40, 3);
        let rows: Vec<(Config, f64)> = pts.iter().enumerate().map(|(i, c)| (c.clone(), if i % 4 == 0 { f64::INFINITY } else { p.predict(c) })).collect();
        let mut a = LearnedModel::new(FeatureSet::Analytical);
        let mut b = LearnedModel::new(FeatureSet::Analytical);
        a.update(&p, &rows);
        b.update(&p, &rows[..20]);
        b.update(&p, &rows[20..]);
        let (pa, pb) = (a.predict(&p, &pts), b.predict(&p, &pts));
        assert_eq!(pa, pb, "the same rows give the same trees, however they arrived");
        let failed: f64 = (0..pts.len()).filter(|i| i % 4 == 0).map(|i| (pa[i] / p.predict(&pts[i])).ln()).sum::<f64>() / 10.0;
        let ok: f64 = (0..pts.len()).filter(|i| i % 4 != 0).map(|i| (pa[i] / p.predict(&pts[i])).ln()).sum::<f64>() / 30.0;
        assert!(failed > ok + 1.0, "failed points {failed:.2} against {ok:.2}");
    }

    /// A record's schedule reads back as the point it was made from (what
    /// warming the model up from records rests on).
    #[test]
    fn schedules_read_back_as_their_points() {
        let conv = "func @c(%x: tensor<1x64x16x16xf32>, %w: tensor<32x64x1x1xf32>) -> tensor<1x32x8x8xf32> {
  %y = compute \"conv2d\" (n: 1, f: 32, oh: 8, ow: 8) reduce sum (c: 64, r: 1, s: 1) reads(%a = %x[n, c, 2 * oh + r, 2 * ow + s], %b = %w[f, c, r, s]) -> tensor<1x32x8x8xf32>[n, f, oh, ow] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %y
}";
        let conv_on = |target: &str| {
            let m = parse(conv);
            let f = &m.funcs[0];
            Problem::new(f, f.regions[f.body].ops[0], tilec::target::builtin(target).expect("builtin target"), 16).expect("a compute op")
        };
        for (target, p) in [("x86-avx2", gemm_on("x86-avx2")), ("sm90", gemm_on("sm90")), ("x86-avx2", conv_on("x86-avx2")), ("sm90", conv_on("sm90"))] {
            for c in samples(&p, 40, 5) {
                let s = p.schedule(&c);
                let back = p.config_of(&s).unwrap_or_else(|| panic!("{target}: no point for {s:?}"));
                assert_eq!(p.schedule(&back), s, "{target}");
            }
        }
    }
}
