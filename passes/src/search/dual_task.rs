//! `dual-task`: GTA's dual-task scheduling (`../shared/seeds/001_ba74524f88cc158d.txt`,
//! §4, Algorithm 1) at the level of one op, and the sub-task bookkeeping
//! `tilec-tune --scheduler=dual-task` shares with it.
//!
//! A **main-task** is an op (a network's task); its **sub-tasks** are its
//! intrinsic mapping candidates, the space's intrinsic options
//! ([`Problem::intrinsics`]; each one a [`Problem::restricted_to_intrinsic`]).
//! A round of the main-task tunes sub-tasks, each one `round-trials`
//! measurements: the first round (the warm-up) every candidate, later
//! rounds only those [`probability_sample`] kept after the round before.
//! An op with no candidate (no intrinsic the target offers computes it,
//! or `intrinsics=none`) is tuned as usual, by `sub-strategy`. With
//! `plain=true` the op's plain space (no intrinsic) is one more sub-task,
//! the last: on a CPU, where a vector FMA "intrinsic" is the vectorised
//! loop's own instruction, a mapping only narrows the space, and the plain
//! one can be the fastest (docs/networks.md, the GEMV of ResNet-18).
//!
//! A sub-task's first tune is Gensor's construction in its space with its
//! best `round-trials` candidates measured; its later tunes are
//! `sub-strategy` (gradient by default) resumed from its fastest point.
//! The op's pick is the fastest point measured in any sub-task.
//!
//! **`probability_sample`**, as §4.2 gives it, over the results `R` (each
//! candidate's best latency so far, `V(r_i)`):
//!
//! ```text
//! W      = Σ_i (1/V(r_i)) / max_j (1/V(r_j))
//! P(r_i) = ((1/V(r_i)) / max_j (1/V(r_j))) / W
//! P'(r_i) = (1 + β_i) · P(r_i) / Σ_j (1 + β_j) · P(r_j)
//! kept   = Top_N(P'),  N = ⌈κ · |R|⌉
//! ```
//!
//! `V` is a latency here: the paper calls it a performance value but
//! requires that "candidates with lower time costs are assigned higher
//! probabilities" and that the weights are "relative to the most
//! performant candidate", which the formula gives for `V` = time (the
//! fastest gets weight 1). A candidate that never ran (every schedule
//! failed) gets `P = 0`.
//!
//! Which candidates are "selected" for the exploration boost (`β_j = β`)
//! the paper does not say, and its code is not public. We draw them: `N`
//! candidates, without replacement, with probability `P` (seeded), so a
//! slow candidate is drawn now and then and, boosted by `1 + β`, can win
//! back a place in the top `N` from one just above it. A discarded
//! candidate comes back only that way. `β` defaults to 0.5: a drawn
//! candidate displaces an undrawn one that is at most 1.5 times as fast.

use super::registry::StrategyDecl;
use super::rng::Rng;
use super::space::{Config, Problem};
use super::{SearchCx, Strategy};
use tilec::pass::{OptionDecl, OptionKind, PassOptions};

pub const DECL: StrategyDecl = StrategyDecl {
    name: "dual-task",
    summary: "GTA's dual-task scheduling at one op: its intrinsic mapping candidates (sub-tasks) tuned in rounds, all of them once, then the ⌈κ·|R|⌉ that probability sampling keeps",
    options: &[
        OptionDecl { name: "kappa", kind: OptionKind::Float, default: "0.2", help: "dual-task: κ, the share of mapping candidates kept after each round (N = ⌈κ·|R|⌉; 1 keeps all, GTA-Raw)" },
        OptionDecl { name: "explore-beta", kind: OptionKind::Float, default: "0.5", help: "dual-task: β, the exploration boost of the candidates drawn by their probability (P' ∝ (1+β)·P)" },
        OptionDecl {
            name: "sub-tasks",
            kind: OptionKind::Enum(&["sampled", "equal"]),
            default: "sampled",
            help: "dual-task: sampled (GTA: the warm-up, then probability sampling) or equal (AMOS-style: every candidate every round, round-trials shared equally, no sampling)",
        },
        OptionDecl { name: "round-trials", kind: OptionKind::UInt, default: "8", help: "dual-task: measurements of a sub-task per round (MEASURE_NUM)" },
        OptionDecl { name: "plain", kind: OptionKind::Bool, default: "false", help: "dual-task: the op's plain space (no intrinsic) is one more sub-task, sampled like the mappings (GTA has mappings only)" },
        OptionDecl {
            name: "sub-strategy",
            kind: OptionKind::Enum(&["gradient", "evolutionary"]),
            default: "gradient",
            help: "dual-task: how a sub-task is tuned after its first round (which is Gensor's construction, measured), and an op without candidates throughout",
        },
    ],
    measures: true,
    create: |o: &PassOptions| {
        Box::new(DualTask {
            allocation: if o.str("sub-tasks") == "equal" { Allocation::Equal } else { Allocation::Sampled { kappa: o.float("kappa"), beta: o.float("explore-beta") } },
            round_trials: o.uint("round-trials") as usize,
            plain: o.bool("plain"),
            sub_strategy: o.str("sub-strategy").to_string(),
            options: o.clone(),
        })
    },
};

/// How a main-task's rounds are shared among its sub-tasks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Allocation {
    /// GTA: every candidate in the warm-up, then those
    /// [`probability_sample`] keeps, each a whole round's measurements.
    Sampled { kappa: f64, beta: f64 },
    /// AMOS-style: every candidate every round, the round's measurements
    /// shared equally; no sampling.
    Equal,
}

impl Allocation {
    pub fn check(&self) -> Result<(), String> {
        match *self {
            Allocation::Sampled { kappa, .. } if !(kappa > 0.0 && kappa <= 1.0) => Err(format!("kappa must be in (0, 1] (got {kappa})")),
            Allocation::Sampled { beta, .. } if !(beta >= 0.0 && beta.is_finite()) => Err(format!("explore-beta must be at least 0 (got {beta})")),
            _ => Ok(()),
        }
    }
}

/// What [`probability_sample`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// `P(r_i)`.
    pub probability: Vec<f64>,
    /// The candidates drawn for the boost (`β_j = β`), in the order drawn.
    pub boosted: Vec<usize>,
    /// `P'(r_i)`.
    pub adjusted: Vec<f64>,
    /// `Top_N(P')`, best first (ties: the lower index).
    pub kept: Vec<usize>,
}

/// GTA's `probability_sample` (module docs) over `latencies` (seconds; not
/// finite: the candidate has no successful measurement). Deterministic for
/// `rng`'s state. Empty input, empty sample.
pub fn probability_sample(latencies: &[f64], kappa: f64, beta: f64, rng: &mut Rng) -> Sample {
    let n = latencies.len();
    let inverse: Vec<f64> = latencies.iter().map(|&v| if v.is_finite() && v > 0.0 { 1.0 / v } else { 0.0 }).collect();
    let max_inverse = inverse.iter().copied().fold(0.0, f64::max);
    let probability: Vec<f64> = if max_inverse > 0.0 {
        let weights: Vec<f64> = inverse.iter().map(|w| w / max_inverse).collect();
        let total: f64 = weights.iter().sum();
        weights.iter().map(|w| w / total).collect()
    } else {
        vec![0.0; n]
    };
    let top_n = ((kappa * n as f64).ceil() as usize).clamp(usize::from(n > 0), n);
    // The boost goes to `top_n` candidates drawn by probability.
    let mut boosted = Vec::new();
    let mut left = probability.clone();
    while boosted.len() < top_n {
        let Some(i) = rng.roulette(&left) else { break };
        boosted.push(i);
        left[i] = 0.0;
    }
    let boost = |i: usize| if boosted.contains(&i) { 1.0 + beta } else { 1.0 };
    let norm: f64 = (0..n).map(|j| boost(j) * probability[j]).sum();
    let adjusted: Vec<f64> = (0..n).map(|i| if norm > 0.0 { boost(i) * probability[i] / norm } else { 0.0 }).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| adjusted[b].total_cmp(&adjusted[a]).then(a.cmp(&b)));
    // A candidate with no successful measurement is kept only when none
    // has one (then the top N by index: nothing is known to prefer).
    let any = adjusted.iter().any(|&p| p > 0.0);
    let kept: Vec<usize> = order.into_iter().filter(|&i| !any || adjusted[i] > 0.0).take(top_n).collect();
    Sample { probability, boosted, adjusted, kept }
}

/// One main-task's sub-tasks: which are in play, and what each achieved.
#[derive(Clone, Debug)]
pub struct SubTasks {
    pub allocation: Allocation,
    /// Each candidate's best latency (seconds; infinite while none).
    pub best: Vec<f64>,
    /// Rounds in which each candidate was tuned.
    pub tuned: Vec<usize>,
    /// The candidates the last sampling kept (`None` until the warm-up
    /// is over).
    pub kept: Option<Vec<usize>>,
    /// Each sampling, in order.
    pub samples: Vec<Sample>,
}

impl SubTasks {
    pub fn new(candidates: usize, allocation: Allocation) -> SubTasks {
        SubTasks { allocation, best: vec![f64::INFINITY; candidates], tuned: vec![0; candidates], kept: None, samples: Vec::new() }
    }

    /// The candidates the next round tunes, in index order: all of them
    /// in the warm-up and under [`Allocation::Equal`], else those kept.
    pub fn this_round(&self) -> Vec<usize> {
        match (&self.allocation, &self.kept) {
            (Allocation::Sampled { .. }, Some(kept)) => {
                let mut k = kept.clone();
                k.sort_unstable();
                k
            }
            _ => (0..self.best.len()).collect(),
        }
    }

    /// Measurements each candidate of a round gets: the round's own under
    /// sampling (Algorithm 1 tunes each sampled candidate); a share of it,
    /// at least 1, under [`Allocation::Equal`].
    pub fn share(&self, round_trials: usize) -> usize {
        match self.allocation {
            Allocation::Sampled { .. } => round_trials,
            Allocation::Equal => round_trials.div_ceil(self.best.len().max(1)).max(1),
        }
    }

    /// After a round that tuned `tuned` and reached `best` (each
    /// candidate's best latency now): under sampling, once every candidate
    /// has been tuned (the warm-up), draws the next round's candidates.
    pub fn after_round(&mut self, tuned: &[usize], best: &[f64], rng: &mut Rng) -> Option<&Sample> {
        self.best.copy_from_slice(best);
        for &k in tuned {
            self.tuned[k] += 1;
        }
        let Allocation::Sampled { kappa, beta } = self.allocation else { return None };
        if self.tuned.contains(&0) {
            return None;
        }
        let s = probability_sample(&self.best, kappa, beta, rng);
        self.kept = Some(s.kept.clone());
        self.samples.push(s);
        self.samples.last()
    }
}

pub struct DualTask {
    pub allocation: Allocation,
    pub round_trials: usize,
    /// `plain`: the plain space is a sub-task too (the last).
    pub plain: bool,
    pub sub_strategy: String,
    /// The pass's options, for the sub-strategies.
    options: PassOptions,
}

impl DualTask {
    fn sub_strategy(&self) -> Result<Box<dyn Strategy>, String> {
        super::registry::StrategyRegistry::builtin().create(&self.sub_strategy, &self.options).ok_or_else(|| format!("no strategy `{}`", self.sub_strategy))
    }

    /// Gensor's construction in `sub`'s space, its best `share` measured.
    fn construct_and_measure(&self, sub: &Problem, cx: &mut SearchCx, share: usize) -> Result<(), String> {
        // Markov gives each of its starts `budget` states from where the
        // count stands, so each sub-task's construction gets the same.
        let mut markov = (super::markov::DECL.create)(&self.options);
        for c in markov.run(sub, cx)?.iter().take(share) {
            if cx.trials_spent() || cx.past_deadline() {
                break;
            }
            cx.measure_and_learn(sub, c);
        }
        Ok(())
    }
}

/// A round's line for the report: the candidates kept, discarded and
/// boosted, by number.
fn describe_sample(s: &Sample, n: usize) -> String {
    let list = |v: &[usize]| if v.is_empty() { "none".to_string() } else { v.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",") };
    let discarded: Vec<usize> = (0..n).filter(|i| !s.kept.contains(i)).collect();
    format!("kept {} (P' {}), discarded {}, boosted {}", list(&s.kept), s.kept.iter().map(|&i| format!("{:.3}", s.adjusted[i])).collect::<Vec<_>>().join(","), list(&discarded), list(&s.boosted))
}

impl Strategy for DualTask {
    fn name(&self) -> &'static str {
        "dual-task"
    }

    fn check_options(&self) -> Result<(), String> {
        self.allocation.check()?;
        if self.round_trials == 0 {
            return Err("round-trials must be at least 1".into());
        }
        self.sub_strategy()?.check_options()
    }

    fn run(&mut self, p: &Problem, cx: &mut SearchCx) -> Result<Vec<Config>, String> {
        let n = if p.only_intrinsic.is_some() { 0 } else { p.intrinsics.len() };
        if n == 0 {
            cx.note("dual-task: no mapping candidates (no intrinsic the target offers computes this op, or the space is one mapping): tuned by the sub-strategy alone".to_string());
            return self.sub_strategy()?.run(p, cx);
        }
        let mut subs: Vec<Problem> = (0..n).map(|k| p.clone().restricted_to_intrinsic(k)).collect::<Result<_, _>>()?;
        for k in 0..n {
            cx.note(format!("dual-task: sub-task {k}: {}", p.describe_intrinsic(k)));
        }
        if self.plain {
            subs.push(p.clone().without_intrinsics());
            cx.note(format!("dual-task: sub-task {n}: plain (no intrinsic)"));
        }
        let n = subs.len();
        let mut book = SubTasks::new(n, self.allocation);
        let mut rng = Rng::new(cx.seed ^ 0x9e37_79b9_7f4a_7c15);
        let trials = cx.trials;
        let mut rounds = 0usize;
        while !cx.trials_spent() && !cx.past_deadline() {
            let before = cx.measurements();
            // The candidates the round tuned before the budget ran out.
            let mut tuned = Vec::new();
            for k in book.this_round() {
                if cx.trials_spent() || cx.past_deadline() {
                    break;
                }
                // The sub-task's share of what is left, as its own budget.
                let share = book.share(self.round_trials).min(cx.trials_left());
                cx.trials = cx.trials_used() + share as u64;
                let result = if cx.measurements_of(&subs[k]) == 0 { self.construct_and_measure(&subs[k], cx, share) } else { self.sub_strategy()?.run(&subs[k], cx).map(|_| ()) };
                cx.trials = trials;
                if let Err(why) = result {
                    cx.note(format!("dual-task: sub-task {k} round {}: {why}", rounds + 1));
                }
                tuned.push(k);
            }
            rounds += 1;
            let best: Vec<f64> = subs.iter().map(|s| cx.best_seconds(s)).collect();
            let sampled = book.after_round(&tuned, &best, &mut rng).map(|s| describe_sample(s, n));
            let bests: Vec<String> = best.iter().map(|&b| if b.is_finite() { format!("{:.4}", b * 1e3) } else { "-".into() }).collect();
            cx.note(format!("dual-task: round {rounds}: tuned {:?}; best ms per sub-task [{}]{}", tuned, bests.join(", "), sampled.map(|s| format!("; {s}")).unwrap_or_default()));
            if cx.measurements() == before {
                break; // nothing left to measure in any sub-task in play
            }
        }
        Ok(cx.ranked_by_measurement(p, Vec::new()))
    }

    fn failure_help(&self) -> String {
        "dual-task needs an evaluator (a CPU target this machine runs); see docs/search.md, `dual-task`".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn probabilities_follow_the_formulas() {
        // Latencies 1, 2 and 4 ms: weights 1, 1/2, 1/4 relative to the
        // fastest, W = 1.75.
        let s = probability_sample(&[1e-3, 2e-3, 4e-3], 1.0, 0.0, &mut Rng::new(1));
        let want = [1.0 / 1.75, 0.5 / 1.75, 0.25 / 1.75];
        for (p, w) in s.probability.iter().zip(want) {
            assert!(close(*p, w), "{:?}", s.probability);
        }
        assert!(close(s.probability.iter().sum::<f64>(), 1.0));
        // β = 0: P' = P.
        assert_eq!(s.probability, s.adjusted);
        assert_eq!(s.kept, vec![0, 1, 2]);
    }

    #[test]
    fn the_boost_goes_to_the_drawn_candidates_only_and_keeps_a_distribution() {
        let lat = [1e-3, 1.2e-3, 1.5e-3, 3e-3, 6e-3];
        for seed in 0..50 {
            let s = probability_sample(&lat, 0.4, 2.0, &mut Rng::new(seed));
            assert_eq!(s.boosted.len(), 2);
            let norm: f64 = (0..5).map(|j| if s.boosted.contains(&j) { 3.0 } else { 1.0 } * s.probability[j]).sum();
            for i in 0..5 {
                let b = if s.boosted.contains(&i) { 3.0 } else { 1.0 };
                assert!(close(s.adjusted[i], b * s.probability[i] / norm), "seed {seed}: {s:?}");
            }
            assert!(close(s.adjusted.iter().sum::<f64>(), 1.0));
        }
    }

    #[test]
    fn top_n_is_kappa_of_the_candidates_rounded_up() {
        let lat: Vec<f64> = (1..=10).map(|i| i as f64 * 1e-3).collect();
        for (kappa, n) in [(0.2, 2), (0.21, 3), (0.4, 4), (0.6, 6), (1.0, 10), (0.01, 1)] {
            let s = probability_sample(&lat, kappa, 0.5, &mut Rng::new(7));
            assert_eq!(s.kept.len(), n, "kappa {kappa}");
            // Kept are the best by P', best first.
            for w in s.kept.windows(2) {
                assert!(s.adjusted[w[0]] >= s.adjusted[w[1]]);
            }
            let worst_kept = s.kept.iter().map(|&i| s.adjusted[i]).fold(f64::INFINITY, f64::min);
            assert!((0..10).filter(|i| !s.kept.contains(i)).all(|i| s.adjusted[i] <= worst_kept));
        }
    }

    #[test]
    fn a_discarded_candidate_comes_back_only_through_sampling() {
        // Two near-equal candidates and κ = 0.5: one place. Without a
        // boost the faster always wins it; with one, the slower wins it
        // exactly when it is drawn and the faster is not.
        let lat = [1.0e-3, 1.1e-3];
        let mut slower_kept = 0;
        for seed in 0..200 {
            let s = probability_sample(&lat, 0.5, 0.5, &mut Rng::new(seed));
            assert_eq!(s.kept.len(), 1);
            assert_eq!(s.kept[0] == 1, s.boosted == vec![1], "seed {seed}: {s:?}");
            slower_kept += usize::from(s.kept[0] == 1);
            assert_eq!(probability_sample(&lat, 0.5, 0.0, &mut Rng::new(seed)).kept, vec![0]);
        }
        // Drawn with P = 0.476: about half the time, neither never nor always.
        assert!((60..140).contains(&slower_kept), "{slower_kept}");
    }

    #[test]
    fn failed_candidates_get_no_probability() {
        let s = probability_sample(&[f64::INFINITY, 2e-3, f64::INFINITY], 1.0, 0.5, &mut Rng::new(3));
        assert_eq!(s.probability, vec![0.0, 1.0, 0.0]);
        assert_eq!(s.kept, vec![1], "only the candidate that ran is worth a round");
        // Nothing ran anywhere: keep the top N by index.
        let s = probability_sample(&[f64::INFINITY; 4], 0.5, 0.5, &mut Rng::new(3));
        assert_eq!(s.kept, vec![0, 1]);
        assert!(probability_sample(&[], 0.2, 0.5, &mut Rng::new(3)).kept.is_empty());
    }

    #[test]
    fn sampling_is_deterministic_for_a_seed() {
        let lat = [1e-3, 1.3e-3, 1.1e-3, 2e-3, 1.05e-3];
        assert_eq!(probability_sample(&lat, 0.4, 1.0, &mut Rng::new(9)), probability_sample(&lat, 0.4, 1.0, &mut Rng::new(9)));
    }

    #[test]
    fn the_warm_up_tunes_every_candidate_then_only_the_kept() {
        // A fake measurer: candidate k's latency is (k + 1) ms, improving
        // by 10% each time it is tuned.
        let mut book = SubTasks::new(5, Allocation::Sampled { kappa: 0.4, beta: 0.0 });
        let mut rng = Rng::new(0);
        let mut lat: Vec<f64> = (0..5).map(|k| (k + 1) as f64 * 1e-3).collect();
        let mut tuned_per_round = Vec::new();
        for _ in 0..4 {
            let tuned = book.this_round();
            for &k in &tuned {
                lat[k] *= 0.9;
            }
            let best: Vec<f64> = lat.clone();
            book.after_round(&tuned, &best, &mut rng);
            tuned_per_round.push(tuned);
        }
        assert_eq!(tuned_per_round[0], vec![0, 1, 2, 3, 4], "the warm-up");
        // κ = 0.4 of 5: two candidates, the fastest two (β = 0).
        assert_eq!(&tuned_per_round[1..], &[vec![0, 1], vec![0, 1], vec![0, 1]]);
        assert_eq!(book.tuned, vec![4, 4, 1, 1, 1]);
        assert_eq!(book.samples.len(), 4);
        assert_eq!(book.share(8), 8, "each sampled candidate gets the whole round");
    }

    #[test]
    fn equal_allocation_tunes_every_candidate_every_round_on_a_share() {
        let mut book = SubTasks::new(3, Allocation::Equal);
        let mut rng = Rng::new(0);
        for _ in 0..3 {
            let tuned = book.this_round();
            assert_eq!(tuned, vec![0, 1, 2]);
            assert!(book.after_round(&tuned, &[1e-3, 2e-3, 3e-3], &mut rng).is_none(), "no sampling");
        }
        assert_eq!(book.share(8), 3);
        assert_eq!(SubTasks::new(20, Allocation::Equal).share(8), 1);
    }

    #[test]
    fn options_are_checked() {
        assert!(Allocation::Sampled { kappa: 0.0, beta: 0.5 }.check().is_err());
        assert!(Allocation::Sampled { kappa: 1.5, beta: 0.5 }.check().is_err());
        assert!(Allocation::Sampled { kappa: 0.2, beta: -1.0 }.check().is_err());
        assert!(Allocation::Sampled { kappa: 1.0, beta: 0.0 }.check().is_ok());
    }
}
