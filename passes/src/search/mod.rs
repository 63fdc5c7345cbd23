//! `search`: fills in the schedule of every compute op that has none, for
//! the pipeline's target, through one [`Strategy`] interface (DESIGN §4).
//!
//! A strategy gets the op's [`Problem`] (its space on the target and the
//! analytic model, `space.rs`; the space as knobs, `knobs.rs`) and a
//! [`SearchCx`] (seeded budget, the ranking by the pass's [`CostModel`],
//! `model.rs`, measurement through the pass context's `Evaluator`), and
//! returns its candidates best first. The pass then
//! measures the first `measure-top-k` of them when an evaluator is
//! installed, takes the best measured (else the first), writes it into the
//! op and reports what happened (`tilec --search-report`). Every
//! measurement, whoever asks for it (a strategy, the top-k, the final
//! rounds), goes through [`SearchCx`]'s one measuring path, which hands
//! its record to the pass context's recorder the moment it completes (and
//! through it to the driver's sink: `tilec --records` appends and syncs
//! it then). Strategies: `markov` (Gensor), `roller`, `random`,
//! `exhaustive`, `gradient` (Ansor-AF-DS), `evolutionary` (Ansor) and
//! `dual-task` (GTA), each declared once in `registry.rs`
//! (`docs/search.md`).

mod analytic;
mod baseline;
pub mod dual_task;
mod evolutionary;
pub mod features;
mod gradient;
pub mod knobs;
pub mod learned;
mod markov;
pub mod model;
pub mod quality;
pub mod registry;
pub mod rng;
mod roller;
pub mod rules;
pub mod space;
pub mod tensor_language;
pub mod tlm;
#[cfg(test)]
mod tests;

use space::{Config, Problem};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tilec::diag::{Diagnostic, Diagnostics};
use tilec::ir::*;
use tilec::measure::{Evaluator, Measurement};
use tilec::pass::{OptionDecl, OptionKind, Pass, PassContext, PassDecl, PassOptions, Recorder};
use tilec::records::{Latency, Record, RecordSchedule};
use tilec::target::Target;

pub use learned::LearnedModel;
pub use model::{AnalyticModel, CostModel};
pub use registry::{STRATEGIES, StrategyDecl, StrategyRegistry};

pub static DECL: PassDecl = PassDecl {
    name: "search",
    summary: registry::const_text!(registry::write_names, "Choose a schedule for each unscheduled compute op (", ")"),
    description: registry::const_text!(
        registry::write_list,
        "
Fills in the schedule of every compute op that has none, for the target of
the pipeline (`--target`), with the chosen strategy (`strategy`):
",
        "

Strategies construct candidates and rank them with a cost model
(`cost-model`): the analytic model of the target (footprints, traffic,
bandwidths, peak throughput), or gradient-boosted trees that learn from
measurements on top of it. With `measure-top-k=K` and an evaluator (the
`tilec` driver installs one when the target runs on this machine), the best
K are compiled, run and timed, and the fastest wins. `measure-top-k=0` is
construction only: no measurement, and the same seed gives the same
schedule. `gradient` and `evolutionary` measure in their own loops, `trials`
measurements per op, and need an evaluator. Ops that
already have a schedule are left alone. `tilec --search-report` prints what
each search did; `tilec --records FILE` appends every measurement to a
records file, and a measured search does not measure again the candidates
that file has times for. Options that only some strategies read say so. See
`docs/search.md`."
    ),
    options: registry::pass_options!(
        &[
            OptionDecl { name: "strategy", kind: registry::STRATEGY_KIND, default: "markov", help: "how candidates are constructed" },
            OptionDecl { name: "seed", kind: OptionKind::UInt, default: "0", help: "seed of the strategy's random numbers" },
            OptionDecl { name: "budget", kind: OptionKind::UInt, default: "20000", help: "states a strategy may visit per op (markov: walk steps, per vector axis, per dot intrinsic option on CPUs and per mma option on GPUs; random: draws; gradient and evolutionary spend trials instead)" },
            OptionDecl { name: "max-seconds", kind: OptionKind::Float, default: "0", help: "wall-clock limit per op, construction and measurement together (0: none); a search stopped by it says so in --search-report, and its pick depends on the machine's speed" },
            OptionDecl { name: "measure-top-k", kind: OptionKind::UInt, default: "0", help: "candidates to compile and time per op (0: construction only)" },
            OptionDecl { name: "trials", kind: OptionKind::UInt, default: "64", help: "measurements per op of a strategy that learns from them (gradient, evolutionary; the op's timed records count, so a stopped search resumed with the same trials makes the rest); the others measure measure-top-k" },
            OptionDecl { name: "cost-model", kind: OptionKind::Enum(&["auto", "analytic", "gbdt"]), default: "auto", help: "what ranks candidates: the analytic model, or gradient-boosted trees learning from measurements on top of it (auto: gbdt for gradient and evolutionary, else analytic)" },
            OptionDecl { name: "features", kind: OptionKind::Enum(&features::FeatureSet::NAMES), default: "af", help: "the features the gbdt model sees: af (Ansor-AF-DS's analytical features) or loops (a richer Ansor-style set from the loop nest)" },
            OptionDecl { name: "final-rounds", kind: OptionKind::UInt, default: "2", help: "rounds in which the measured candidates within final-margin of the fastest (at most 3) are timed again, one after another, before the lowest median of each one's timings wins (0: the first timings decide)" },
            OptionDecl { name: "final-margin", kind: OptionKind::Float, default: "0.2", help: "how much slower than the fastest a measured candidate may be and still go to the final rounds (0.2: 20%)" },
            OptionDecl { name: "op", kind: OptionKind::Str, default: "", help: "only search ops with this label (all when empty)" },
            OptionDecl {
                name: "intrinsics",
                kind: OptionKind::Enum(&["auto", "none"]),
                default: "auto",
                help: "tensor intrinsics in the space: auto, every intrinsic the target offers that tensorize rewrites (vector ones on CPUs, m16n8 mma.sync of f16, bf16 and i8 on GPUs) with every mapping of the op onto it whose extents split its sizes (basic and fused ones); none, no intrinsic (the space without them)",
            },
        ],
        &[
            OptionDecl {
                name: "mapping",
                kind: OptionKind::Int,
                default: "-1",
                help: "only points computing with the op's intrinsic option K (0, 1, ... in the order --search-report lists them; one mapping candidate, a sub-task of GTA's dual-task scheduling); -1: any option, or none",
            },
            OptionDecl { name: "unroll", kind: OptionKind::UInt, default: "16", help: "the unroll limit written into every chosen schedule" },
        ]
    ),
    statistics: &[("ops", "compute ops scheduled"), ("states", "states visited"), ("measured", "candidates measured")],
    create: |o: &PassOptions| Box::new(Search::from_options(o)),
};

pub struct Search {
    pub strategy: String,
    pub seed: u64,
    pub budget: u64,
    /// Wall-clock limit per op in seconds (0: none).
    pub max_seconds: f64,
    pub measure_k: u64,
    /// Measurements per op of a strategy that measures in its loop.
    pub trials: u64,
    pub final_rounds: u64,
    pub final_margin: f64,
    pub only: String,
    /// Are the op's intrinsic options in the space (`intrinsics=auto`)?
    pub intrinsics: bool,
    /// `mapping=K`: only points computing with intrinsic option `K`.
    pub mapping: Option<usize>,
    pub unroll: u64,
    /// Every option, for the strategy's constructor (which reads its own).
    pub options: PassOptions,
    /// Where the strategy is found by name.
    pub strategies: StrategyRegistry,
    /// What ranks candidates; kept across the ops of a run, so a model that
    /// learns from measurements learns from every op's.
    pub model: Box<dyn CostModel>,
}

impl Search {
    /// The pass with the options of [`DECL`] and the built-in strategies.
    pub fn from_options(o: &PassOptions) -> Search {
        Search::with_strategies(o, StrategyRegistry::builtin())
    }

    /// The pass with the options of [`DECL`] (`strategy` may name any
    /// strategy of `strategies`: set it with `OptionKind::Str` for one
    /// the option's list does not have) and the strategies of
    /// `strategies`.
    pub fn with_strategies(o: &PassOptions, strategies: StrategyRegistry) -> Search {
        let learning = strategies.get(o.str("strategy")).is_some_and(|d| d.measures);
        let features = features::FeatureSet::from_name(o.str("features")).unwrap_or(features::FeatureSet::Analytical);
        let model: Box<dyn CostModel> = match o.str("cost-model") {
            "gbdt" => Box::new(LearnedModel::new(features)),
            "auto" if learning => Box::new(LearnedModel::new(features)),
            _ => Box::new(AnalyticModel),
        };
        Search {
            strategy: o.str("strategy").to_string(),
            seed: o.uint("seed"),
            budget: o.uint("budget"),
            max_seconds: o.float("max-seconds"),
            measure_k: o.uint("measure-top-k"),
            trials: o.uint("trials"),
            final_rounds: o.uint("final-rounds"),
            final_margin: o.float("final-margin"),
            only: o.str("op").to_string(),
            intrinsics: o.str("intrinsics") != "none",
            mapping: usize::try_from(o.int("mapping")).ok(),
            unroll: o.uint("unroll"),
            options: o.clone(),
            strategies,
            model,
        }
    }

    /// This pass with `model` in place of the analytic one.
    pub fn with_model(self, model: Box<dyn CostModel>) -> Search {
        Search { model, ..self }
    }
}

/// The one interface every strategy implements (markov, roller, random,
/// exhaustive, gradient, evolutionary, dual-task; TLM later).
pub trait Strategy {
    fn name(&self) -> &'static str;
    /// The candidates for `p`, best first. May measure through `cx`
    /// (strategies that learn from measurements); must count the states it
    /// visits in `cx.visited` and stop when [`SearchCx::spent`] says so
    /// (the budget, or `max-seconds`). `Err` is a message
    /// for a diagnostic at the op (e.g. a space too large).
    fn run(&mut self, p: &Problem, cx: &mut SearchCx) -> Result<Vec<Config>, String>;

    /// Refuses option values the strategy cannot run with (checked before
    /// anything is searched or measured); `Err` is the message.
    fn check_options(&self) -> Result<(), String> {
        Ok(())
    }

    /// The hint under the diagnostic when [`Strategy::run`] fails.
    fn failure_help(&self) -> String {
        "see docs/search.md for the options".to_string()
    }
}

/// What a strategy may use besides the problem.
pub struct SearchCx<'a> {
    pub seed: u64,
    pub budget: u64,
    pub visited: u64,
    /// When `max-seconds` runs out (none: no limit).
    deadline: Option<Instant>,
    /// Set once [`SearchCx::spent`] found the deadline passed.
    timed_out: bool,
    measure_k: u64,
    /// Measurements a strategy that measures in its loop may make
    /// ([`SearchCx::trials_spent`]).
    trials: u64,
    /// Does the strategy measure in its loop (`StrategyDecl::measures`)?
    measures: bool,
    evaluator: Option<&'a mut (dyn Evaluator + 'static)>,
    /// The op alone in a function, for measurement.
    base: Module,
    /// Every measurement, and whether it came from the records (resumed).
    measured: Vec<(Config, Measurement, bool)>,
    /// The final rounds' measurements.
    final_measured: Vec<(Config, Measurement)>,
    /// Successful records of this workload on this target from earlier runs.
    known: Vec<Record>,
    /// The op's workload key, for its records.
    workload: String,
    /// Where each measurement's record goes as soon as it is made.
    recorder: &'a mut Recorder,
    notes: Vec<String>,
    strategy: &'static str,
    /// What [`SearchCx::rank`] ranks by.
    model: &'a mut dyn CostModel,
    /// The language model `model=PATH` loaded (`strategy=tlm`).
    language_model: Option<&'a mut (dyn tilec::lm::TokenModel + 'static)>,
}

/// The states a strategy has visited, against its budget and its
/// deadline ([`SearchCx::model_and_steps`]).
pub struct Steps<'c> {
    pub visited: &'c mut u64,
    pub budget: &'c mut u64,
    deadline: Option<Instant>,
    timed_out: &'c mut bool,
}

impl Steps<'_> {
    /// [`SearchCx::spent`].
    pub fn spent(&mut self) -> bool {
        *self.visited >= *self.budget || self.past_deadline()
    }

    /// [`SearchCx::past_deadline`].
    pub fn past_deadline(&mut self) -> bool {
        if !*self.timed_out && self.deadline.is_some_and(|d| Instant::now() >= d) {
            *self.timed_out = true;
        }
        *self.timed_out
    }
}

impl<'a> SearchCx<'a> {
    /// The language model the `model` option loaded, once (`tlm.rs`).
    pub fn take_language_model(&mut self) -> Option<&'a mut (dyn tilec::lm::TokenModel + 'static)> {
        self.language_model.take()
    }

    /// Has the strategy used its budget of states, or its time
    /// (`max-seconds`)? Strategies call it before each state they visit.
    pub fn spent(&mut self) -> bool {
        self.model_and_steps().1.spent()
    }

    /// Is `max-seconds` over? Remembers it, for the report.
    pub fn past_deadline(&mut self) -> bool {
        self.model_and_steps().1.past_deadline()
    }

    /// The cost model, and the count of states visited against the budget
    /// and the deadline, apart: a strategy can hand the model to another
    /// thread while it goes on visiting states (markov chooses the packing
    /// of the states its walks keep beside the walks).
    pub fn model_and_steps(&mut self) -> (&dyn CostModel, Steps<'_>) {
        (&*self.model, Steps { visited: &mut self.visited, budget: &mut self.budget, deadline: self.deadline, timed_out: &mut self.timed_out })
    }

    /// Will the pass measure candidates?
    pub fn will_measure(&self) -> bool {
        (self.measure_k > 0 || self.measures) && self.evaluator.is_some()
    }

    /// Measurements made for this op so far (those the records had
    /// included).
    pub fn measurements(&self) -> usize {
        self.measured.len()
    }

    /// The op's measurements that count in `trials`: those made now, and
    /// the timed ones the records already had (so a stopped search,
    /// resumed with the same `trials`, makes only the rest).
    fn trials_used(&self) -> u64 {
        (self.measured.iter().filter(|(_, _, resumed)| !resumed).count() + self.known.len()) as u64
    }

    /// Has a strategy that measures in its loop made its `trials`
    /// measurements ([`SearchCx::trials_used`])?
    pub fn trials_spent(&self) -> bool {
        self.trials_used() >= self.trials
    }

    /// Measurements left of `trials`.
    pub fn trials_left(&self) -> usize {
        self.trials.saturating_sub(self.trials_used()) as usize
    }

    /// The measurements of points of `p`'s space, in measurement order (a
    /// search of one mapping, [`Problem::only_intrinsic`], sees its own
    /// points only).
    fn measured_in<'s>(&'s self, p: &'s Problem) -> impl Iterator<Item = &'s (Config, Measurement, bool)> + 's {
        self.measured.iter().filter(|(c, _, _)| p.in_space(c))
    }

    /// Every point of `p`'s space measured so far, in measurement order.
    pub fn measured_points(&self, p: &Problem) -> Vec<Config> {
        self.measured_in(p).map(|(c, _, _)| c.clone()).collect()
    }

    /// The best throughput measured so far in `p`'s space, GFLOP/s (0 if
    /// none succeeded).
    pub fn best_gflops(&self, p: &Problem) -> f64 {
        let s = self.best_seconds(p);
        if s.is_finite() { p.flops / s / 1e9 } else { 0.0 }
    }

    /// The successfully measured points of `p`'s space, fastest first
    /// (ties in the points' order), then `rest` ranked by the model: what a
    /// strategy that measures returns.
    pub fn ranked_by_measurement(&self, p: &Problem, rest: Vec<Config>) -> Vec<Config> {
        let mut ok: Vec<(f64, Config)> = self.measured_in(p).filter_map(|(c, m, _)| m.as_ref().ok().map(|t| (t.median_s, c.clone()))).collect();
        ok.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let mut out: Vec<Config> = ok.into_iter().map(|(_, c)| c).collect();
        let have: std::collections::BTreeSet<Config> = out.iter().cloned().collect();
        out.extend(self.rank(p, rest.into_iter().filter(|c| !have.contains(c)).collect()));
        out
    }

    /// Puts the timed records of the op ([`SearchCx::known`]) that are
    /// points of `p`'s space among the measurements, as resumed ones: a
    /// strategy that measures in its loop then goes on from them (gradient
    /// from the fastest) instead of starting over, and they are candidates
    /// for the pick. They count in `trials` once, as records.
    fn resume_from_records(&mut self, p: &Problem) {
        for r in &self.known {
            let (Some(c), Some(l)) = (p.config_of(&r.schedule.to_schedule(&p.target.name)), r.latency.as_ref()) else { continue };
            if p.valid(&c) && !self.measured.iter().any(|(m, _, _)| *m == c) {
                self.measured.push((c, Ok(l.timing()), true));
            }
        }
    }

    /// Measurements of `p`'s space so far (resumed ones included).
    pub fn measurements_of(&self, p: &Problem) -> usize {
        self.measured_in(p).count()
    }

    /// The fastest median measured in `p`'s space, seconds (infinite if
    /// none succeeded).
    pub fn best_seconds(&self, p: &Problem) -> f64 {
        self.measured_in(p).filter_map(|(_, m, _)| m.as_ref().ok()).map(|t| t.median_s).fold(f64::INFINITY, f64::min)
    }

    /// [`SearchCx::measure`], and the model learns the result at once.
    pub fn measure_and_learn(&mut self, p: &Problem, cfg: &Config) -> Option<Measurement> {
        let m = self.measure(p, cfg)?;
        self.model.update(p, &[(cfg.clone(), model_seconds(&m))]);
        Some(m)
    }

    /// A line for the report.
    pub fn note(&mut self, n: String) {
        self.notes.push(n);
    }

    /// The cost model the search ranks by.
    pub fn model(&self) -> &dyn CostModel {
        &*self.model
    }

    /// The cost model, to teach it what a strategy measured
    /// ([`CostModel::update`]).
    pub fn model_mut(&mut self) -> &mut dyn CostModel {
        &mut *self.model
    }

    /// The model's prediction for one point.
    pub fn predict(&self, p: &Problem, c: &Config) -> f64 {
        self.model.predict_one(p, c)
    }

    /// Valid candidates, duplicates removed, fastest predicted first (ties
    /// in the configurations' order, so ranking is deterministic).
    pub fn rank(&self, p: &Problem, cands: Vec<Config>) -> Vec<Config> {
        let mut seen = std::collections::BTreeSet::new();
        let valid: Vec<Config> = cands.into_iter().filter(|c| seen.insert(c.clone()) && p.valid(c)).collect();
        let times = self.model.predict(p, &valid);
        Self::by_time(times, valid)
    }

    /// Like [`SearchCx::rank`] for partial states chosen down to `level`:
    /// each is predicted as [`Problem::complete`] makes it whole, and kept
    /// when that is valid.
    pub fn rank_partial(&self, p: &Problem, cands: Vec<Config>, level: usize) -> Vec<Config> {
        let mut seen = std::collections::BTreeSet::new();
        let (wholes, partial): (Vec<Config>, Vec<Config>) = cands
            .into_iter()
            .filter(|c| seen.insert(c.clone()))
            .filter_map(|c| {
                let whole = p.complete(&c, level);
                p.valid(&whole).then_some((whole, c))
            })
            .unzip();
        let times = self.model.predict(p, &wholes);
        Self::by_time(times, partial)
    }

    /// `cands` sorted by `times` (one each), ties in the configurations'
    /// order.
    fn by_time(times: Vec<f64>, cands: Vec<Config>) -> Vec<Config> {
        assert_eq!(times.len(), cands.len(), "the model predicts one time per point");
        let mut v: Vec<(f64, Config)> = times.into_iter().zip(cands).collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        v.into_iter().map(|(_, c)| c).collect()
    }

    /// Compiles, runs and times `cfg` (once; later calls return the first
    /// result). `None` without an evaluator.
    pub fn measure(&mut self, p: &Problem, cfg: &Config) -> Option<Measurement> {
        if let Some((_, m, _)) = self.measured.iter().find(|(c, _, _)| c == cfg) {
            return Some(m.clone());
        }
        self.evaluator.as_ref()?;
        let data = RecordSchedule::of(&p.schedule(cfg));
        if let Some(l) = self.known.iter().find(|r| r.schedule == data).and_then(|r| r.latency.as_ref()) {
            let t = l.timing();
            self.measured.push((cfg.clone(), Ok(t.clone()), true));
            return Some(Ok(t));
        }
        let result = self.time(p, cfg)?;
        self.measured.push((cfg.clone(), result.clone(), false));
        Some(result)
    }

    /// The measured candidates within `margin` of the fastest (at most
    /// [`FINALISTS`], one of each kernel shape first), timed again in
    /// `rounds` rounds ([`time_finalists`]), each timing also kept in
    /// `final_measured`. A shared machine's slow
    /// phases last seconds: one measurement per candidate, taken candidate
    /// after candidate, lets a phase pick the winner among close ones
    /// (BERT M2: 94 against 112 GFLOP/s for two picks of one search).
    pub fn final_rounds(&mut self, p: &Problem, rounds: u64, margin: f64) -> Vec<(Config, Vec<f64>)> {
        let mut ok: Vec<(f64, Config)> = self.measured.iter().filter_map(|(c, m, _)| m.as_ref().ok().map(|t| (t.median_s, c.clone()))).collect();
        ok.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let spatial: Vec<&str> = p.compute.spatial_axes().map(|a| p.compute.axis(a).name.as_str()).collect();
        time_finalists(ok, FINALISTS, rounds, margin, |c| p.schedule(c).kernel_shape(spatial.iter().copied()), |c| {
            let result = self.time(p, c)?;
            let median = result.as_ref().ok().map(|t| t.median_s);
            self.final_measured.push((c.clone(), result));
            Some(median)
        })
    }

    /// Compiles, runs and times `cfg` now, and hands the record of the
    /// measurement to the recorder before anything else happens: this is
    /// the one place where the search measures. `None` without an
    /// evaluator, or once the recorder could not store a record (what is
    /// measured then would be lost; the pass reports the failure).
    fn time(&mut self, p: &Problem, cfg: &Config) -> Option<Measurement> {
        if self.recorder.failure().is_some() {
            return None;
        }
        let ev = self.evaluator.as_deref_mut()?;
        let schedule = p.schedule(cfg);
        let mut m = self.base.clone();
        let f = &mut m.funcs[0];
        f.ops[p.op].kind.as_compute_mut().expect("compute op").schedule = Some(schedule.clone());
        let result = match lower_for_measurement(&mut m, &p.target) {
            Ok(()) => ev.evaluate(&m, &p.func),
            Err(e) => Err(tilec::measure::Failure::Compile(e)),
        };
        let (latency, gflops, error) = match &result {
            Ok(t) => (Some(Latency::of(t)), Some(p.flops / t.median_s / 1e9), None),
            Err(e) => (None, None, Some(e.to_string())),
        };
        // A failure to store is kept by the recorder; the next call stops.
        let _ = self.recorder.push(Record {
            workload: self.workload.clone(),
            target: p.target.name.clone(),
            schedule: RecordSchedule::of(&schedule),
            // Every point a strategy makes is one the walk writes (a test
            // checks); an empty sentence would say one was not.
            sentence: tensor_language::sentence_of(p, cfg).map(|w| w.join(" ")).unwrap_or_default(),
            strategy: self.strategy.to_string(),
            latency,
            gflops,
            error,
            threads: Some(ev.threads()),
            version: tilec::VERSION.to_string(),
        });
        Some(result)
    }
}

#[cfg(test)]
impl<'a> SearchCx<'a> {
    /// A context outside the pass, for running a strategy in a unit test:
    /// no evaluator, no deadline, nothing known.
    pub(crate) fn detached(seed: u64, budget: u64, base: Module, recorder: &'a mut Recorder, model: &'a mut dyn CostModel, strategy: &'static str) -> SearchCx<'a> {
        SearchCx {
            seed,
            budget,
            visited: 0,
            deadline: None,
            timed_out: false,
            measure_k: 0,
            trials: 0,
            measures: false,
            evaluator: None,
            base,
            measured: Vec::new(),
            final_measured: Vec::new(),
            known: Vec::new(),
            workload: String::new(),
            recorder,
            notes: Vec::new(),
            strategy,
            model,
            language_model: None,
        }
    }
}

/// The mapping candidates of `f`'s op `op` on `target`, numbered as the
/// search option `mapping=K` numbers them (the space's intrinsic options):
/// each in words, and as the schedule knob its points carry. GTA's
/// sub-tasks (`dual_task.rs`).
pub fn mapping_candidates(f: &Function, op: Op, target: &Arc<Target>) -> Vec<(String, IntrinsicChoice)> {
    let Some(p) = Problem::new(f, op, target.clone(), 16) else { return Vec::new() };
    let p = p.with_intrinsics(f);
    (0..p.intrinsics.len()).filter_map(|k| Some((p.describe_intrinsic(k), p.schedule(&p.start(Some(k))).intrinsic?))).collect()
}

/// `tilec --print-space-rules`: for each compute op of `f`, the
/// resource-constrained rules of its space on `target` (GTA's R1–R5,
/// `rules.rs`), whether each applies, and the shares of the space each
/// removes, estimated from `draws` seeded draws.
pub fn space_rules_report(f: &Function, target: &Arc<Target>, draws: usize, seed: u64) -> String {
    let ops = f.regions[f.body].ops.iter().copied().filter(|&op| f.ops[op].kind.as_compute().is_some());
    ops.filter_map(|op| Problem::new(f, op, target.clone(), 16)).map(|p| rules::report(&p.with_intrinsics(f), draws, seed)).collect()
}

/// Does a `search` with `options` measure (an evaluator must be
/// installed): `measure-top-k` above 0, or a strategy that measures in its
/// loop?
pub fn measures(options: &PassOptions) -> bool {
    options.uint("measure-top-k") > 0 || STRATEGIES.iter().any(|d| d.measures && d.name == options.str("strategy"))
}

/// A measurement as a learned model's row takes it: median seconds,
/// `f64::INFINITY` for a failure ([`CostModel::update`]).
pub fn model_seconds(m: &Measurement) -> f64 {
    m.as_ref().map_or(f64::INFINITY, |t| t.median_s)
}

/// `Err` unless each `(option, value)` is a share, between 0 and 1 (for
/// [`Strategy::check_options`]).
pub fn check_shares(options: &[(&str, f64)]) -> Result<(), String> {
    match options.iter().find(|(_, v)| !(0.0..=1.0).contains(v)) {
        Some((name, v)) => Err(format!("{name} must be between 0 and 1 (got {v})")),
        None => Ok(()),
    }
}

/// At most this many candidates go to the final rounds (the search's,
/// and by default `tilec-tune`'s).
pub const FINALISTS: usize = 3;

/// Final rounds among measured candidates: those whose first timing is
/// within `margin` of the fastest (`first` sorted fastest first), timed
/// again in `rounds` rounds that take them one after another, with every
/// timing each got (its first included), fastest first timing first.
/// Alternating rounds spread a machine's phases over all of them.
///
/// At most `max` finalists, each candidate once: the fastest of each
/// `shape` (`Schedule::kernel_shape`) first, then the next fastest of
/// any. The close candidates of one search are mostly near-twins of the
/// fastest, its register tile under other outer loops: with them alone,
/// one first timing that fell in a slow phase of the machine would lose
/// a whole kind of kernel for good.
///
/// `time` gives a candidate's next timing in seconds, `Some(None)` where
/// it failed (it drops out), or `None` to give up (no evaluator left):
/// the result is then empty, as it is with fewer than two finalists or
/// no rounds.
pub fn time_finalists<C: PartialEq, K: PartialEq>(first: Vec<(f64, C)>, max: usize, rounds: u64, margin: f64, shape: impl Fn(&C) -> K, mut time: impl FnMut(&C) -> Option<Option<f64>>) -> Vec<(C, Vec<f64>)> {
    let Some(&(fastest, _)) = first.first() else { return Vec::new() };
    let close: Vec<(f64, C)> = first.into_iter().filter(|(t, _)| *t <= fastest * (1.0 + margin)).collect();
    let mut picked: Vec<usize> = Vec::new();
    let mut shapes: Vec<K> = Vec::new();
    for (i, (_, c)) in close.iter().enumerate() {
        let k = shape(c);
        if picked.len() < max && !shapes.contains(&k) {
            shapes.push(k);
            picked.push(i);
        }
    }
    for (i, (_, c)) in close.iter().enumerate() {
        if picked.len() < max && !picked.iter().any(|&p| p == i || close[p].1 == *c) {
            picked.push(i);
        }
    }
    // In `close`'s order: fastest first timing first.
    let mut finalists: Vec<(C, Vec<f64>)> = close.into_iter().enumerate().filter(|(i, _)| picked.contains(i)).map(|(_, (t, c))| (c, vec![t])).collect();
    if finalists.len() < 2 || rounds == 0 {
        return Vec::new();
    }
    for _ in 0..rounds {
        let mut kept = Vec::new();
        for (c, mut times) in finalists {
            match time(&c) {
                Some(Some(t)) => {
                    times.push(t);
                    kept.push((c, times));
                }
                Some(None) => {}
                None => return Vec::new(),
            }
        }
        finalists = kept;
    }
    finalists
}

/// The median of a finalist's timings (it has its first one at least).
fn median(times: &[f64]) -> f64 {
    tilec::measure::Timing::median_of(times).expect("a finalist has its first timing")
}

/// The scheduling passes a measured candidate goes through (the default
/// pipeline's after `search`, docs/codegen.md, for CPUs and GPUs alike:
/// a GPU candidate with a warp intrinsic is tensorized as the final
/// kernel will be), with their default options; then its weights become
/// trailing parameters, as `lower-to-mlir` makes them. Public for the
/// tools that time candidates outside a search (`tilec-tune`'s final
/// rounds).
pub fn lower_for_measurement(m: &mut Module, target: &Arc<Target>) -> Result<(), String> {
    let decls: &[&PassDecl] = &[
        &crate::tile::DECL,
        &crate::cache::DECL,
        &crate::vthread::DECL,
        &crate::bind::DECL,
        &crate::vectorize::DECL,
        &crate::tensorize::DECL,
        &crate::prepack::DECL,
        &crate::unroll::DECL,
        &crate::hoist_guards::DECL,
    ];
    let mut cx = PassContext::with_target(Some(target.clone()));
    for d in decls {
        let mut pass = (d.create)(&PassOptions::defaults(d.options));
        pass.run(m, &mut cx).map_err(|e| format!("pass `{}`: {}", d.name, e.iter().map(|x| x.message.clone()).collect::<Vec<_>>().join("; ")))?;
    }
    for f in &mut m.funcs {
        tilec::ir::weights::hoist_weights(f);
    }
    Ok(())
}

fn one_line(s: &Schedule, p: &Problem) -> String {
    let mut text = String::new();
    let names: Vec<String> = p.info.reads.iter().map(|r| r.name.trim_start_matches('%').to_string()).collect();
    let _ = tilec::ir::schedule::write_schedule_body(s, &mut text, "", &|i| names.get(i).cloned().unwrap_or_else(|| format!("read{i}")));
    // `{ a, b }` on one line, without the outer braces.
    let inner: Vec<&str> = text.split('\n').map(str::trim).filter(|l| *l != "{" && *l != "}").collect();
    if inner.is_empty() { "{}".to_string() } else { inner.join(" ") }
}

fn fmt_gflops(flops: f64, seconds: f64) -> String {
    format!("{:.2} GFLOP/s ({:.4} ms)", flops / seconds / 1e9, seconds * 1e3)
}

impl Search {
    /// The strategy the `strategy` option names, from the registry.
    fn strategy(&self) -> Result<Box<dyn Strategy>, Diagnostic> {
        self.strategies.create(&self.strategy, &self.options).ok_or_else(|| {
            let names: Vec<&str> = self.strategies.names().collect();
            Diagnostic::error(format!("unknown search strategy `{}`", self.strategy)).with_help(format!("the strategies are {}", names.join(", ")))
        })
    }

    /// Searches one op; returns its schedule.
    fn search_op(&mut self, f: &Function, op: Op, target: &Arc<Target>, cx: &mut PassContext) -> Result<Schedule, Diagnostic> {
        let span = f.op_spans[op];
        let at = |d: Diagnostic| d.at(span, "while searching a schedule for this op");
        let start = Instant::now();
        let p = Problem::new(f, op, target.clone(), self.unroll).ok_or_else(|| at(Diagnostic::error("not a well-formed compute op")))?;
        let p = if self.intrinsics { p.with_intrinsics(f) } else { p };
        let mut p = match self.mapping {
            Some(k) => p.restricted_to_intrinsic(k).map_err(|m| at(Diagnostic::error(m)).with_help("mapping=-1 searches every option; strategy=dual-task tunes them in turn"))?,
            None => p,
        };
        let mut strategy = self.strategy().map_err(at)?;
        let base = p.extract(f);
        let no_eval = cx.no_evaluator_reason().map(str::to_string);
        let key = tilec::records::workload_key(f, op).unwrap_or_default();
        let known: Vec<Record> = cx
            .records(tilec::records::RESUME)
            .map(|rs| rs.iter().filter(|r| r.target == target.name && r.latency.is_some() && tilec::records::same_computation(&r.workload, &key)).cloned().collect())
            .unwrap_or_default();
        // A search of one mapping (`mapping=K`) resumes from, and counts,
        // that mapping's records alone.
        let known: Vec<Record> = if p.only_intrinsic.is_some() { known.into_iter().filter(|r| p.config_of(&r.schedule.to_schedule(&target.name)).is_some_and(|c| p.in_space(&c))).collect() } else { known };
        strategy.check_options().map_err(|m| at(Diagnostic::error(format!("search strategy `{}` cannot run: {m}", self.strategy))).with_help("see docs/search.md for the options"))?;
        let measures = self.strategies.get(&self.strategy).is_some_and(|d| d.measures);
        // `strategy=tlm`'s model (the context keeps it loaded between ops).
        let model_path = self.options.str("model").to_string();
        let mut language_model = match model_path.as_str() {
            "" => None,
            path => Some(cx.take_language_model(path).map_err(|why| at(Diagnostic::error(format!("cannot load the language model `{path}`: {why}"))).with_help("`tilec-tlm pretrain` writes one (docs/search.md, \"tlm\")"))?),
        };
        let kernel_threads = cx.kernel_threads();
        let (evaluator, recorder) = cx.evaluator_and_recorder();
        let evaluator = if self.measure_k > 0 || measures { evaluator } else { None };
        // The model predicts for the cores the candidates run on (a search
        // measured on one thread of two cores: `tilec-bench --threads=1`),
        // or, with nothing measured, those the kernels will run on
        // (`tilec --threads=1`), or it charges schedules with fewer
        // core-level tiles than cores for the idle ones (docs/search.md,
        // "The cores the model predicts for").
        let measured_on = evaluator.as_ref().map(|e| e.threads());
        let kernel_threads = kernel_threads.and_then(|t| u32::try_from(t).ok());
        p.model_cores = measured_on.or(kernel_threads).filter(|&t| t < target.compute.units);
        // A latency holds for the threads it was measured on (records made
        // before they were kept ran on one): records of other thread
        // counts neither resume nor teach this search.
        let known: Vec<Record> = match measured_on {
            Some(threads) => known.into_iter().filter(|r| r.threads.unwrap_or(1) == threads).collect(),
            None => known,
        };
        if measures && evaluator.is_none() {
            return Err(at(Diagnostic::error(format!("search strategy `{}` learns from measurements, and nothing measures here", self.strategy)))
                .with_note(format!("no evaluator: {}", no_eval.as_deref().unwrap_or("none installed")))
                .with_help("run it where candidates can be measured: for a CPU target this machine runs (e.g. --target=host), or a CUDA target on a machine with an NVIDIA GPU; markov and roller construct without measuring"));
        }
        if self.model.learns() {
            // The records of this op teach the model before the search
            // (its persistence: learned.rs).
            let rows: Vec<(Config, f64)> = known.iter().filter_map(|r| Some((p.config_of(&r.schedule.to_schedule(&target.name))?, r.latency.as_ref()?.median_s))).collect();
            self.model.update(&p, &rows);
        }
        let mut checked: Result<(), String> = Ok(());
        let evaluator = match evaluator {
            Some(e) => {
                let mut reference = base.clone();
                reference.funcs[0].ops[op].kind.as_compute_mut().expect("compute").schedule = None;
                checked = e.set_reference(&reference, &p.func);
                Some(e)
            }
            None => None,
        };
        let mut scx = SearchCx {
            seed: self.seed,
            budget: self.budget,
            visited: 0,
            deadline: (self.max_seconds > 0.0).then(|| start + Duration::from_secs_f64(self.max_seconds.min(1e9))),
            timed_out: false,
            measure_k: self.measure_k,
            trials: self.trials,
            measures,
            evaluator,
            base,
            measured: Vec::new(),
            final_measured: Vec::new(),
            known,
            workload: key,
            recorder,
            notes: Vec::new(),
            strategy: strategy.name(),
            model: &mut *self.model,
            language_model: language_model.as_deref_mut(),
        };
        if measures {
            scx.resume_from_records(&p);
        }
        let ranked = strategy.run(&p, &mut scx).map_err(|m| at(Diagnostic::error(format!("search strategy `{}` failed: {m}", self.strategy))).with_help(strategy.failure_help()))?;
        if ranked.is_empty() {
            return Err(at(Diagnostic::error(format!("search strategy `{}` found no schedule of this op that fits target `{}`", self.strategy, target.name)))
                .with_help(format!("raise budget (now {}) or try another strategy", self.budget)));
        }
        let constructed = start.elapsed();
        // Measure the first K candidates.
        if scx.will_measure() {
            for (i, c) in ranked.iter().take(self.measure_k as usize).enumerate() {
                // The first candidate is measured even past the deadline:
                // a measured search reports a measured time.
                if i > 0 && scx.past_deadline() {
                    break;
                }
                scx.measure(&p, c);
            }
        }
        let finals = if scx.will_measure() && !scx.past_deadline() { scx.final_rounds(&p, self.final_rounds, self.final_margin) } else { Vec::new() };
        if let Some(why) = scx.recorder.failure() {
            return Err(at(Diagnostic::error(why.to_string())).with_note("the search stops measuring when a measurement cannot be recorded: what it measured next would be lost"));
        }
        let had_evaluator = scx.evaluator.is_some();
        let SearchCx { visited, measured, final_measured, notes, timed_out, .. } = scx;
        if let Some(lm) = language_model {
            cx.return_language_model(&model_path, lm);
        }
        // What was measured teaches the model (the analytic one ignores it).
        // (Resumed measurements taught it before the search.)
        let times: Vec<(Config, f64)> = measured.iter().filter(|(_, _, resumed)| !resumed).filter_map(|(c, m, _)| m.as_ref().ok().map(|t| (c.clone(), t.median_s))).collect();
        if !times.is_empty() {
            self.model.update(&p, &times);
        }
        let best_measured = measured.iter().filter_map(|(c, m, _)| m.as_ref().ok().map(|t| (t.median_s, c))).min_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        let best_final = finals.iter().map(|(c, times)| (median(times), c)).min_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        let (chosen, measured_s) = match best_final.or(best_measured) {
            Some((t, c)) => (c.clone(), Some(t)),
            None => (ranked[0].clone(), None),
        };
        let schedule = p.schedule(&chosen);
        let elapsed = start.elapsed();

        let failures = measured.iter().filter(|(_, m, _)| m.is_err()).count();
        let resumed = measured.iter().filter(|(_, _, r)| *r).count();
        cx.bump("ops", 1);
        cx.bump("states", visited);
        cx.bump("measured", measured.len() as u64);

        // The report.
        let label = p.compute.label.as_deref().map_or_else(String::new, |l| format!(" \"{l}\""));
        let mut r = format!("search: @{} compute{label} on `{}`: strategy {} (seed {}, budget {})\n", p.func, target.name, self.strategy, self.seed, self.budget);
        r.push_str(&format!("  states visited: {}, candidates ranked: {}, measured: {}", visited, ranked.len(), measured.len()));
        if failures > 0 {
            r.push_str(&format!(" ({failures} failed)"));
        }
        if resumed > 0 {
            r.push_str(&format!(" ({resumed} from the records)"));
        }
        r.push('\n');
        if self.model.learns() {
            r.push_str(&format!("  cost model: {}, learned from {} measurements\n", self.model.name(), self.model.rows()));
        }
        if self.measure_k == 0 && !measures {
            r.push_str("  construction only: measure-top-k=0\n");
        } else if !had_evaluator {
            r.push_str(&format!("  construction only: no evaluator ({})\n", no_eval.as_deref().unwrap_or("none installed")));
        } else if let Err(why) = &checked {
            r.push_str(&format!("  results not checked against the interpreter: {why}\n"));
        }
        for n in &notes {
            r.push_str(&format!("  {n}\n"));
        }
        if let Some(cores) = p.model_cores {
            r.push_str(&format!("  the model predicts for {cores} of the target's {} cores (the threads the kernels run on)\n", target.compute.units));
        }
        if timed_out {
            r.push_str(&format!("  stopped by max-seconds={} after {visited} states and {} measurements: the pick depends on this machine's speed\n", self.max_seconds, measured.len()));
        }
        if !finals.is_empty() {
            r.push_str(&format!("  final rounds: {} candidates within {:.0}% of the fastest, timed {} more times each, one after another:\n", finals.len(), self.final_margin * 100.0, self.final_rounds));
            for (c, times) in &finals {
                let ms: Vec<String> = times.iter().map(|t| format!("{:.4}", t * 1e3)).collect();
                r.push_str(&format!("    {} ms (median {:.4}): {}\n", ms.join(", "), median(times) * 1e3, one_line(&p.schedule(c), &p)));
            }
        }
        if measures {
            // Its measurements are in its loop: no construction time of its own.
            r.push_str(&format!("  time: {:.3} s (search and its measurements {:.3} s, final rounds {:.3} s)\n", elapsed.as_secs_f64(), constructed.as_secs_f64(), (elapsed - constructed).as_secs_f64()));
        } else {
            r.push_str(&format!("  time: {:.3} s (construction {:.3} s, measurement {:.3} s)\n", elapsed.as_secs_f64(), constructed.as_secs_f64(), (elapsed - constructed).as_secs_f64()));
        }
        r.push_str(&format!("  chosen: {}\n", one_line(&schedule, &p)));
        r.push_str(&format!("  predicted: {}", fmt_gflops(p.flops, self.model.predict_one(&p, &chosen))));
        match measured_s {
            Some(t) => r.push_str(&format!(", measured: {}\n", fmt_gflops(p.flops, t))),
            None => r.push_str(", measured: -\n"),
        }
        for (c, m) in measured.iter().map(|(c, m, _)| (c, m)).chain(final_measured.iter().map(|(c, m)| (c, m))) {
            if let Err(e) = m {
                r.push_str(&format!("  failed candidate {}: {e}\n", one_line(&p.schedule(c), &p)));
            }
        }
        cx.report(r);
        Ok(schedule)
    }
}

impl Pass for Search {
    fn run(&mut self, module: &mut Module, cx: &mut PassContext) -> Result<(), Diagnostics> {
        let mut diags = Diagnostics::new();
        if self.budget == 0 {
            diags.push(Diagnostic::error("search needs budget of at least 1"));
            return Err(diags);
        }
        if !(self.max_seconds >= 0.0) {
            diags.push(Diagnostic::error(format!("search needs max-seconds of at least 0 (got {})", self.max_seconds)).with_help("0 means no time limit"));
            return Err(diags);
        }
        for fi in 0..module.funcs.len() {
            let ops: Vec<Op> = module.funcs[fi].regions[module.funcs[fi].body].ops.clone();
            for op in ops {
                let f = &module.funcs[fi];
                let Some(c) = f.ops[op].kind.as_compute() else { continue };
                if c.schedule.is_some() || (!self.only.is_empty() && c.label.as_deref() != Some(self.only.as_str())) {
                    continue;
                }
                let Some(target) = cx.target().cloned().map(Arc::new) else {
                    diags.push(
                        Diagnostic::error("search needs a target to schedule for")
                            .at(f.op_spans[op], "this op has no schedule")
                            .with_help("pass --target (e.g. --target=host)"),
                    );
                    return Err(diags);
                };
                match self.search_op(f, op, &target, cx) {
                    Ok(s) => {
                        let f = &mut module.funcs[fi];
                        f.ops[op].kind.as_compute_mut().expect("compute").schedule = Some(s);
                    }
                    Err(d) => diags.push(d),
                }
            }
        }
        diags.into_result()
    }
}
