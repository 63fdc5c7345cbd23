//! Cost models: what ranks candidates between measurements.
//!
//! A [`CostModel`] predicts the run time of points of one op's space
//! ([`Problem`]), in batches (a learned model evaluates many at once), and
//! may learn from measured points ([`CostModel::update`]; Ansor-AF-DS and
//! TLM train on the records). [`SearchCx::rank`](super::SearchCx::rank)
//! and the strategies' own uses of the model go through the one the pass
//! holds, so a strategy written against the trait works with any model.
//!
//! [`AnalyticModel`] is the roofline of `space.rs` (`docs/search.md`, "What
//! every strategy shares"). Its code stays where it is, as methods of
//! [`Problem`] (`Problem::predict` and its terms: `kernel_terms`,
//! `register_tile`, `conflicts`, `pack_traffic`, ...), and the model calls
//! them: those methods use the hardware constants at the top of `space.rs`,
//! which are moving into the target descriptions, and `Problem` itself
//! uses parts of them for the space (the schedule's unroll limit is the
//! register tile, `best_order` counts packed traffic). Moving them here is
//! left until the constants have moved.

use super::space::{Config, Problem};

/// Predicts how long points of a space run, lower is better. (`Sync`: a
/// strategy may predict on more than one thread.)
pub trait CostModel: Sync {
    /// For reports and records (`analytic`).
    fn name(&self) -> &'static str;

    /// Predicted seconds for each of `points`, in their order. The points
    /// are whole states of `p`'s space (not necessarily valid ones).
    fn predict(&self, p: &Problem, points: &[Config]) -> Vec<f64>;

    /// Learns from measured points: `(point, median seconds)`, a failed
    /// measurement (crash, timeout, wrong result) as `f64::INFINITY`. The pass
    /// calls it with each op's successful measurements once that op is
    /// done; strategies that measure in their loops may call it too
    /// ([`SearchCx::model_mut`](super::SearchCx::model_mut)). A model
    /// that does not learn ignores it.
    fn update(&mut self, p: &Problem, measured: &[(Config, f64)]);

    /// The feature vector the model sees for `point` (for a learned model's
    /// training data); `None` for a model without features.
    fn features(&self, p: &Problem, point: &Config) -> Option<Vec<f32>>;

    /// Does [`CostModel::update`] change its predictions? (The search
    /// hands a learning model the op's records before its strategy runs.)
    fn learns(&self) -> bool {
        false
    }

    /// Measured points it has learned from (0 for a model that does not
    /// learn).
    fn rows(&self) -> usize {
        0
    }

    /// [`CostModel::predict`] of one point.
    fn predict_one(&self, p: &Problem, point: &Config) -> f64 {
        self.predict(p, std::slice::from_ref(point))[0]
    }
}

/// The analytic roofline of `space.rs` ([`Problem::predict`]): footprints,
/// traffic, bandwidths, peak throughput, and on CPUs the micro-kernel,
/// packing and cache-conflict terms. Learns nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct AnalyticModel;

impl CostModel for AnalyticModel {
    fn name(&self) -> &'static str {
        "analytic"
    }

    fn predict(&self, p: &Problem, points: &[Config]) -> Vec<f64> {
        points.iter().map(|c| p.predict(c)).collect()
    }

    fn predict_one(&self, p: &Problem, point: &Config) -> f64 {
        p.predict(point)
    }

    fn update(&mut self, _: &Problem, _: &[(Config, f64)]) {}

    fn features(&self, _: &Problem, _: &Config) -> Option<Vec<f32>> {
        None
    }
}
