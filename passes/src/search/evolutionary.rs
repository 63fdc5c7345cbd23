//! `evolutionary`: the Ansor / TVM MetaSchedule baseline Ansor-AF-DS is
//! compared against (§3.2 of `../shared/seeds/003_7b598cfdbb7b1c62.txt`;
//! Ansor's evolutionary search).
//!
//! Each round builds a population of `population` points (a
//! `use-measured` share of the best measured so far, Ansor's 0.2; the rest
//! random valid samples) and evolves it for
//! `generations` generations: parents are drawn by roulette on predicted
//! throughput; a child is a mutation of one parent (one knob set to another
//! of its values, with probability `mutation-prob`) or a crossover of two
//! (each knob from either parent). Of every point the round saw and nothing
//! has measured, the `batch` best predicted are measured, except an
//! `eps-greedy` share drawn at random (5%: what keeps a wrong model from
//! hiding a good region for ever); then the model is refitted on every
//! measurement (`learned.rs`) and the next round starts, until `trials`
//! measurements are made (or `max-seconds` passes).

use super::knobs::KnobSpace;
use super::registry::StrategyDecl;
use super::rng::Rng;
use super::space::{Config, Problem};
use super::{SearchCx, Strategy};
use std::collections::BTreeSet;
use tilec::pass::{OptionDecl, OptionKind, PassOptions};

pub const DECL: StrategyDecl = StrategyDecl {
    name: "evolutionary",
    summary: "Ansor's evolutionary search: mutation and crossover ranked by the learned model, measured in batches",
    options: &[
        OptionDecl { name: "population", kind: OptionKind::UInt, default: "2048", help: "evolutionary: points per generation" },
        OptionDecl { name: "generations", kind: OptionKind::UInt, default: "4", help: "evolutionary: generations evolved before each batch is measured" },
        OptionDecl { name: "mutation-prob", kind: OptionKind::Float, default: "0.85", help: "evolutionary: chance a child is a mutation (else a crossover)" },
        OptionDecl { name: "eps-greedy", kind: OptionKind::Float, default: "0.05", help: "evolutionary: share of each batch drawn at random instead of from the top predictions" },
        OptionDecl { name: "batch", kind: OptionKind::UInt, default: "64", help: "evolutionary: points measured per round, after which the model is refitted" },
        OptionDecl {
            name: "use-measured",
            kind: OptionKind::Float,
            default: "0.2",
            help: "evolutionary: share of each round's first population taken from the best measured points (the rest are random samples)",
        },
    ],
    measures: true,
    create: |o: &PassOptions| {
        Box::new(Evolutionary {
            population: o.uint("population") as usize,
            generations: o.uint("generations") as usize,
            mutation_prob: o.float("mutation-prob"),
            eps_greedy: o.float("eps-greedy"),
            batch: o.uint("batch") as usize,
            use_measured: o.float("use-measured"),
        })
    },
};

pub struct Evolutionary {
    pub population: usize,
    pub generations: usize,
    pub mutation_prob: f64,
    pub eps_greedy: f64,
    pub batch: usize,
    pub use_measured: f64,
}

impl Evolutionary {
    fn check(&self) -> Result<(), String> {
        if self.population < 2 {
            return Err(format!("population must be at least 2 (got {})", self.population));
        }
        if self.batch == 0 {
            return Err("batch must be at least 1".into());
        }
        super::check_shares(&[("mutation-prob", self.mutation_prob), ("eps-greedy", self.eps_greedy), ("use-measured", self.use_measured)])
    }

    /// The next generation of `pop` (predicted throughputs `fitness`):
    /// `population` distinct valid children, or fewer when the draws run
    /// dry.
    fn evolve(&self, space: &KnobSpace, rng: &mut Rng, pop: &[Config], fitness: &[f64]) -> Vec<Config> {
        let mut next: Vec<Config> = Vec::with_capacity(self.population);
        let mut seen: BTreeSet<Config> = BTreeSet::new();
        let mut misses = 0;
        while next.len() < self.population && misses < self.population {
            let Some(a) = rng.roulette(fitness) else { break };
            let child = if rng.unit() < self.mutation_prob { space.mutate(rng, &pop[a]) } else { rng.roulette(fitness).and_then(|b| space.crossover(rng, &pop[a], &pop[b])) };
            match child {
                Some(c) if seen.insert(c.clone()) => next.push(c),
                _ => misses += 1,
            }
        }
        next
    }
}

impl Strategy for Evolutionary {
    fn name(&self) -> &'static str {
        "evolutionary"
    }

    fn run(&mut self, p: &Problem, cx: &mut SearchCx) -> Result<Vec<Config>, String> {
        let space = KnobSpace::new(p);
        let mut rng = Rng::new(cx.seed);
        let first = space.distinct_samples(&mut rng, self.population);
        if first.is_empty() {
            return Err(format!("no valid point of this op's space fits target `{}`", p.target.name));
        }
        let mut rounds = 0u64;
        while !cx.trials_spent() && !cx.past_deadline() {
            rounds += 1;
            let measured: BTreeSet<Config> = cx.measured_points(p).into_iter().collect();
            // The population: the best measured, then random samples.
            let mut pop: Vec<Config> = cx.ranked_by_measurement(p, Vec::new());
            pop.truncate((self.population as f64 * self.use_measured) as usize);
            let fresh = if rounds == 1 { first.clone() } else { space.distinct_samples(&mut rng, self.population - pop.len()) };
            pop.extend(fresh.into_iter().filter(|c| !measured.contains(c)));
            pop.truncate(self.population);
            let mut seen: BTreeSet<Config> = pop.iter().cloned().collect();
            for _ in 0..self.generations {
                let times = cx.model().predict(p, &pop);
                let fitness: Vec<f64> = times.iter().map(|t| 1.0 / t.max(1e-30)).collect();
                let next = self.evolve(&space, &mut rng, &pop, &fitness);
                if next.is_empty() {
                    break;
                }
                cx.visited += next.len() as u64;
                seen.extend(next.iter().cloned());
                pop = next;
            }
            // The batch: the best predicted of everything seen, and an
            // eps-greedy share of random points.
            let want = self.batch.min(cx.trials_left());
            let random = ((want as f64) * self.eps_greedy).round() as usize;
            let candidates: Vec<Config> = seen.into_iter().filter(|c| !measured.contains(c)).collect();
            let mut batch: Vec<Config> = cx.rank(p, candidates).into_iter().take(want - random).collect();
            let chosen: BTreeSet<Config> = batch.iter().cloned().collect();
            let extra = space.distinct_samples(&mut rng, random * 4);
            batch.extend(extra.into_iter().filter(|c| !measured.contains(c) && !chosen.contains(c)).take(random));
            if batch.is_empty() {
                cx.note("evolutionary: every point the rounds found is measured".to_string());
                break;
            }
            let mut results = Vec::with_capacity(batch.len());
            for c in &batch {
                if cx.trials_spent() || cx.past_deadline() {
                    break;
                }
                let Some(m) = cx.measure(p, c) else { break };
                results.push((c.clone(), super::model_seconds(&m)));
            }
            // Retrained after each batch.
            cx.model_mut().update(p, &results);
            if results.is_empty() {
                break;
            }
        }
        cx.note(format!("evolutionary: {} measurements in {rounds} rounds; best {:.2} GFLOP/s", cx.measurements(), cx.best_gflops(p)));
        Ok(cx.ranked_by_measurement(p, first))
    }


    fn check_options(&self) -> Result<(), String> {
        self.check()
    }

    fn failure_help(&self) -> String {
        "evolutionary needs an evaluator (a CPU target this machine runs); see docs/search.md, `evolutionary`".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_refused() {
        let e = Evolutionary { population: 1, generations: 4, mutation_prob: 0.85, eps_greedy: 0.05, batch: 64, use_measured: 0.2 };
        assert!(e.check().unwrap_err().contains("population"));
        let e = Evolutionary { population: 64, generations: 4, mutation_prob: 0.85, eps_greedy: 1.5, batch: 64, use_measured: 0.2 };
        assert!(e.check().unwrap_err().contains("eps-greedy"));
        let e = Evolutionary { population: 64, generations: 4, mutation_prob: 0.85, eps_greedy: 0.05, batch: 0, use_measured: 0.2 };
        assert!(e.check().unwrap_err().contains("batch"));
    }
}
