//! How well a cost model ranks: rank correlation on held-out measured
//! points (`tilec-bench --model-quality`, docs/search.md "Model quality").
//!
//! A search only ever uses a model's order, never its values, so the
//! figures here are about order: Spearman's ρ between predicted and
//! measured times, and pairwise accuracy (the share of pairs of points
//! with different measured times that the model orders the same way;
//! XGBoost's `rank:pairwise` objective, which Ansor trains with,
//! optimises this one).

use super::features::FeatureSet;
use super::learned::LearnedModel;
use super::model::{AnalyticModel, CostModel};
use super::space::{Config, Problem};

/// Ranks of `xs`, 0-based, ties given their average rank.
fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..xs.len()).collect();
    idx.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut r = vec![0.0; xs.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && xs[idx[j + 1]] == xs[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0;
        for &k in &idx[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}

/// Spearman's rank correlation of `a` and `b` (the Pearson correlation of
/// their ranks), in [-1, 1]; 0 when either is constant or shorter than 2.
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "one prediction per measurement");
    let n = a.len();
    if n < 2 {
        return 0.0;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let mean = (n - 1) as f64 / 2.0;
    let (mut cov, mut va, mut vb) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let (x, y) = (ra[i] - mean, rb[i] - mean);
        cov += x * y;
        va += x * x;
        vb += y * y;
    }
    if va == 0.0 || vb == 0.0 { 0.0 } else { cov / (va * vb).sqrt() }
}

/// The share of pairs with different measured times (`measured`) that
/// `predicted` orders the same way (a predicted tie counts half); 0.5 is
/// a coin, 1 is a perfect ranking. 0 when no pair differs.
pub fn pairwise_accuracy(predicted: &[f64], measured: &[f64]) -> f64 {
    assert_eq!(predicted.len(), measured.len(), "one prediction per measurement");
    let (mut right, mut pairs) = (0.0, 0u64);
    for i in 0..measured.len() {
        for j in i + 1..measured.len() {
            if measured[i] == measured[j] {
                continue;
            }
            pairs += 1;
            let want = measured[i] < measured[j];
            if predicted[i] == predicted[j] {
                right += 0.5;
            } else if (predicted[i] < predicted[j]) == want {
                right += 1.0;
            }
        }
    }
    if pairs == 0 { 0.0 } else { right / pairs as f64 }
}

/// One model's ranking of the held-out points.
#[derive(Clone, Debug, PartialEq)]
pub struct Quality {
    pub model: &'static str,
    pub spearman: f64,
    pub pairwise: f64,
}

/// The held-out split of [`compare_models`]: every `HOLD_OUT_EVERY`-th
/// successful measurement, in measurement order, is held out (a quarter:
/// the training part keeps points from the whole run, early and late).
pub const HOLD_OUT_EVERY: usize = 4;

/// Trains a learned model per feature set on `measured` less the held-out
/// quarter and reports how it and the analytic model rank the held-out
/// points. Failed measurements (non-finite seconds) train but are not
/// ranked. `None` with fewer than 8 successful measurements to hold out
/// from.
pub fn compare_models(p: &Problem, measured: &[(Config, f64)]) -> Option<Vec<Quality>> {
    let ok: Vec<usize> = (0..measured.len()).filter(|&i| measured[i].1.is_finite()).collect();
    if ok.len() < 8 {
        return None;
    }
    let held: Vec<usize> = ok.iter().copied().enumerate().filter(|(n, _)| n % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1).map(|(_, i)| i).collect();
    let train: Vec<(Config, f64)> = (0..measured.len()).filter(|i| !held.contains(i)).map(|i| measured[i].clone()).collect();
    let points: Vec<Config> = held.iter().map(|&i| measured[i].0.clone()).collect();
    let truth: Vec<f64> = held.iter().map(|&i| measured[i].1).collect();
    let score = |model: &'static str, predicted: Vec<f64>| Quality { model, spearman: spearman(&predicted, &truth), pairwise: pairwise_accuracy(&predicted, &truth) };
    let mut out = vec![score("analytic", AnalyticModel.predict(p, &points))];
    for set in [FeatureSet::Analytical, FeatureSet::Loops] {
        let mut m = LearnedModel::new(set);
        m.update(p, &train);
        out.push(score(m.name(), m.predict(p, &points)));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_figures_on_known_orders() {
        let a = [1.0, 2.0, 3.0, 4.0];
        assert!((spearman(&a, &[10.0, 20.0, 30.0, 40.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&a, &[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert_eq!(spearman(&a, &[5.0; 4]), 0.0);
        // One swapped pair of six: ρ = 1 − 6·2/(4·15) = 0.8.
        assert!((spearman(&a, &[1.0, 3.0, 2.0, 4.0]) - 0.8).abs() < 1e-12);
        assert_eq!(pairwise_accuracy(&[1.0, 3.0, 2.0, 4.0], &a), 5.0 / 6.0);
        assert_eq!(pairwise_accuracy(&[1.0, 1.0], &[1.0, 2.0]), 0.5);
        assert_eq!(ranks(&[3.0, 1.0, 3.0]), vec![1.5, 0.0, 1.5]);
    }
}
