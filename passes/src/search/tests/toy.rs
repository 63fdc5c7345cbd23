//! A strategy defined outside the search's files and registered at run
//! time (`StrategyRegistry::with`): the proof that a strategy is one file
//! and one registration.

use super::*;

/// `toy`: a single candidate, every tile size 1 (the space's initial
/// state), which no built-in strategy picks for a GEMM.
struct Toy;

impl Strategy for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn run(&mut self, p: &Problem, cx: &mut SearchCx) -> Result<Vec<Config>, String> {
        cx.visited += 1;
        cx.note("toy: the initial state".to_string());
        Ok(vec![p.initial()])
    }
}

static TOY: StrategyDecl = StrategyDecl { name: "toy", summary: "the initial state", options: &[], measures: false, create: |_: &PassOptions| Box::new(Toy) };

#[test]
fn a_strategy_registered_at_run_time_picks_the_schedule() {
    let t = tilec::target::builtin("x86-avx2").unwrap();
    let mut o = PassOptions::defaults(DECL.options);
    o.set("strategy", OptionKind::Str.parse("toy").unwrap());
    let mut with_toy = Search::with_strategies(&o, StrategyRegistry::builtin().with(&TOY));
    let mut m = parse(GEMM);
    let mut cx = PassContext::with_target(Some(t.clone()));
    with_toy.run(&mut m, &mut cx).expect("the toy strategy runs");
    let f = &m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    let p = Problem::new(&parse(GEMM).funcs[0], op, t.clone(), 16).unwrap();
    let chosen = f.ops[op].kind.as_compute().unwrap().schedule.clone().expect("scheduled");
    assert_eq!(chosen, p.schedule(&p.initial()), "the toy's pick is written into the op");
    let markov = searched(GEMM, &t, search("markov", &[])).0;
    assert_ne!(tilec::syntax::print_module(&markov), tilec::syntax::print_module(&m), "markov picks another schedule: the test sees whose pick it is");
    let report = cx.take_reports().join("");
    assert!(report.contains("strategy toy") && report.contains("toy: the initial state"), "{report}");

    // The built-in registry does not know it: a diagnostic, not a panic.
    let mut plain = Search::from_options(&o);
    let err = plain.run(&mut parse(GEMM), &mut PassContext::with_target(Some(t))).unwrap_err();
    let d = err.iter().next().unwrap();
    assert_eq!(d.message, "unknown search strategy `toy`");
    assert!(d.notes.iter().any(|n| n == "help: the strategies are markov, roller, random, exhaustive, gradient, evolutionary, dual-task, tlm"), "{:?}", d.notes);
}

#[test]
fn the_pass_declaration_comes_from_the_strategy_list() {
    let strategy = DECL.options.iter().find(|o| o.name == "strategy").unwrap();
    assert_eq!(strategy.kind, OptionKind::Enum(&["markov", "roller", "random", "exhaustive", "gradient", "evolutionary", "dual-task", "tlm"]));
    assert_eq!(DECL.summary, "Choose a schedule for each unscheduled compute op (markov, roller, random, exhaustive, gradient, evolutionary, dual-task, tlm)");
    for s in STRATEGIES {
        assert!(DECL.description.contains(&format!("- `{}`: {}", s.name, s.summary)), "{}", DECL.description);
        for o in s.options {
            assert!(DECL.options.iter().any(|d| d.name == o.name && d.help == o.help), "option `{}` of {}", o.name, s.name);
            assert!(o.help.starts_with(&format!("{}: ", s.name)), "{}", o.help);
        }
    }
    // The common options, then each strategy's, then unroll; no name twice.
    let names: Vec<&str> = DECL.options.iter().map(|o| o.name).collect();
    let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "a strategy's option has the name of another option: {names:?}");
    assert_eq!(
        names,
        [
            "strategy",
            "seed",
            "budget",
            "max-seconds",
            "measure-top-k",
            "trials",
            "cost-model",
            "features",
            "final-rounds",
            "final-margin",
            "op",
            "intrinsics",
            "temperature",
            "threshold",
            "cache-scale",
            "polish",
            "op-budget",
            "beam",
            "max-space",
            "hops",
            "window",
            "score-threshold",
            "measure-threshold",
            "init-samples",
            "init-measured",
            "start-samples",
            "starts",
            "start-descent",
            "tile-moves",
            "constructed-starts",
            "restart",
            "population",
            "generations",
            "mutation-prob",
            "eps-greedy",
            "batch",
            "use-measured",
            "kappa",
            "explore-beta",
            "sub-tasks",
            "round-trials",
            "plain",
            "sub-strategy",
            "model",
            "k",
            "lm-temperature",
            "rank-by",
            "mapping",
            "unroll"
        ]
    );
    // Every strategy can be made from the defaults.
    let o = PassOptions::defaults(DECL.options);
    for s in STRATEGIES {
        assert_eq!(StrategyRegistry::builtin().create(s.name, &o).unwrap().name(), s.name);
    }
}

/// A cost model with another rule: the fewer parallel tiles, the faster
/// (the opposite of what the analytic model wants for a GEMM); it counts
/// the measurements it is taught.
struct FewestTiles {
    taught: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl CostModel for FewestTiles {
    fn name(&self) -> &'static str {
        "fewest-tiles"
    }

    fn predict(&self, p: &Problem, points: &[Config]) -> Vec<f64> {
        points.iter().map(|c| p.parallel_tiles(c) as f64).collect()
    }

    fn update(&mut self, _: &Problem, measured: &[(Config, f64)]) {
        self.taught.fetch_add(measured.len(), std::sync::atomic::Ordering::Relaxed);
    }

    fn features(&self, p: &Problem, point: &Config) -> Option<Vec<f32>> {
        Some(vec![p.parallel_tiles(point) as f32])
    }
}

#[test]
fn another_cost_model_changes_the_ranking_and_learns_from_measurements() {
    let t = tilec::target::builtin("x86-avx2").unwrap();
    let m = parse(GEMM);
    let f = &m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    let p = Problem::new(f, op, t.clone(), 16).unwrap();
    // Candidates: the initial state with the outermost tile of `i` at each
    // of its sizes.
    let cands: Vec<Config> = p
        .choices(&p.initial(), 0, 0)
        .into_iter()
        .map(|s| {
            let mut c = p.initial();
            c.tiles[0] = vec![s; p.levels];
            c
        })
        .filter(|c| p.valid(c))
        .collect();
    assert!(cands.len() > 3, "{cands:?}");
    let ranked_by = |model: &mut dyn CostModel| {
        let mut recorder = Recorder::default();
        let cx = SearchCx::detached(0, 1, m.clone(), &mut recorder, model, "test");
        cx.rank(&p, cands.clone())
    };
    let taught = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let analytic = ranked_by(&mut AnalyticModel);
    let toy = ranked_by(&mut FewestTiles { taught: taught.clone() });
    assert_eq!(analytic.len(), toy.len());
    assert_ne!(analytic[0], toy[0], "the two models prefer different tiles");
    assert_eq!(toy[0].tiles[0][0], 64, "one tile along i: the fewest parallel tiles");
    let tiles: Vec<u64> = toy.iter().map(|c| p.parallel_tiles(c)).collect();
    assert!(tiles.windows(2).all(|w| w[0] <= w[1]), "ranked by the toy's rule: {tiles:?}");
    assert!(analytic.iter().map(|c| p.predict(c)).collect::<Vec<_>>().windows(2).all(|w| w[0] <= w[1]));

    // The pass ranks by its model too, and teaches it what it measured
    // (the fake evaluator fails every third candidate: 3 of 4 succeed).
    let mut m2 = parse(GEMM);
    let mut cx = PassContext::with_target(Some(t.clone()));
    cx.set_evaluator(Some(Box::new(super::Fake { calls: 0, references: 0 })));
    let mut with_toy = search("roller", &[("measure-top-k", "4"), ("final-rounds", "0")]).with_model(Box::new(FewestTiles { taught: taught.clone() }));
    with_toy.run(&mut m2, &mut cx).expect("search");
    assert_eq!(taught.load(std::sync::atomic::Ordering::Relaxed), 3);
    let report = cx.take_reports().join("");
    let analytic_pick = tilec::syntax::print_module(&searched(GEMM, &t, search("roller", &[])).0);
    let toy_pick = tilec::syntax::print_module(&searched(GEMM, &t, search("roller", &[]).with_model(Box::new(FewestTiles { taught }))).0);
    assert_ne!(analytic_pick, toy_pick, "{report}");
}
