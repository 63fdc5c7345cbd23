//! The fuzzer's tests: the corpus replay (CI), the runner's isolation,
//! determinism of generation, and that generated programs are valid.

use crate::generate::{Config, level0, loops};
use crate::inputs::Inputs;
use crate::targets::{Kind, Outcome, Target};
use crate::worker::{Supervisor, WORKER_ENV, WorkerCommand};
use std::time::Duration;

/// Not a test: the worker the other tests start (the test binary run
/// with `--exact tests::worker_process` and the worker variable set).
#[test]
fn worker_process() {
    if std::env::var_os(WORKER_ENV).is_some() {
        crate::worker::worker_main();
    }
}

/// Every corpus input passes, every open finding still fails and is listed.
#[test]
fn corpus_replays() {
    let dir = crate::corpus::default_dir();
    let r = crate::replay::replay_corpus(&dir, None);
    for l in &r.lines {
        eprintln!("{l}");
    }
    assert!(
        r.failures.is_empty(),
        "corpus replay failed:\n{}",
        r.failures.join("\n")
    );
    assert!(
        r.lines.iter().any(|l| l.starts_with("pass")),
        "the corpus has no passing inputs to replay"
    );
}

/// A panic, an abort, a stack overflow, a hang and an allocation failure
/// each cost one input; the worker is replaced and the next input runs.
#[test]
fn the_runner_survives_every_way_an_input_can_fail() {
    let mut sup = Supervisor::new(WorkerCommand::this_executable(), Duration::from_secs(2));
    let run = |sup: &mut Supervisor, s: &str| sup.run(Target::SelfTest, s.as_bytes());
    assert_eq!(run(&mut sup, "fine"), Outcome::Pass);
    match run(&mut sup, "panic") {
        Outcome::Finding(Kind::Panic, m) => assert!(
            m.contains("a panic on purpose") && m.contains("targets.rs"),
            "{m}"
        ),
        o => panic!("{o:?}"),
    }
    assert_eq!(
        run(&mut sup, "fine"),
        Outcome::Pass,
        "the worker survives a panic"
    );
    assert_eq!(sup.workers_started(), 1);
    match run(&mut sup, "abort") {
        Outcome::Finding(Kind::Crash, m) => assert!(m.contains("SIGABRT"), "{m}"),
        o => panic!("{o:?}"),
    }
    match run(&mut sup, "stack") {
        Outcome::Finding(Kind::Crash, m) => assert!(m.contains("overflow"), "{m}"),
        o => panic!("{o:?}"),
    }
    match run(&mut sup, "oom") {
        Outcome::Finding(Kind::Crash, m) => assert!(m.contains("memory allocation"), "{m}"),
        o => panic!("{o:?}"),
    }
    match run(&mut sup, "hang") {
        Outcome::Finding(Kind::Hang, _) => {}
        o => panic!("{o:?}"),
    }
    assert_eq!(
        run(&mut sup, "reject"),
        Outcome::Reject("rejected on purpose".into())
    );
    assert_eq!(run(&mut sup, "fine"), Outcome::Pass);
    assert_eq!(
        sup.workers_started(),
        5,
        "one new worker after each crash and the hang"
    );
}

/// A worker that cannot start is said once, and leaves no scratch folder.
#[test]
fn a_missing_worker_is_reported() {
    let command = WorkerCommand {
        program: "/nonexistent/tilec-fuzz".into(),
        args: vec![],
    };
    let mut sup = Supervisor::new(command, Duration::from_secs(1));
    match sup.run(Target::SelfTest, b"fine") {
        Outcome::Reject(why) => assert!(why.starts_with(crate::worker::CANNOT_START), "{why}"),
        o => panic!("{o:?}"),
    }
    let leftover = sup.last_scratch.clone().expect("a worker was tried");
    assert!(!leftover.exists(), "{} was left behind", leftover.display());
}

/// Minimisation keeps the failure and drops what does not matter.
#[test]
fn minimisation_keeps_the_failure() {
    let mut sup = Supervisor::new(WorkerCommand::this_executable(), Duration::from_secs(2));
    let input = b"  \n  panic  \nnoise line\nmore noise\n";
    let Outcome::Finding(kind, msg) = sup.run(Target::SelfTest, input) else {
        panic!("the input should fail")
    };
    let sig = crate::corpus::signature(Target::SelfTest, kind, &msg);
    let (small, _) = crate::minimize::minimize(
        &mut sup,
        Target::SelfTest,
        input,
        &sig,
        std::time::Instant::now() + Duration::from_secs(20),
    );
    assert_eq!(String::from_utf8_lossy(&small).trim(), "panic");
}

#[test]
fn a_seed_fixes_the_inputs() {
    for t in Target::ALL {
        let (a, b, c) = (Inputs::new(t, 7), Inputs::new(t, 7), Inputs::new(t, 8));
        let first: Vec<Vec<u8>> = (0..20).map(|i| a.input(i)).collect();
        assert_eq!(
            first,
            (0..20).map(|i| b.input(i)).collect::<Vec<_>>(),
            "{}",
            t.name()
        );
        assert_ne!(
            first,
            (0..20).map(|i| c.input(i)).collect::<Vec<_>>(),
            "{}",
            t.name()
        );
    }
}

fn verifies(text: &str) -> Result<(), String> {
    let (m, sm) = tilec::syntax::parse_str("gen.tile", text).map_err(|(d, sm)| sm.render(&d.0))?;
    let d = tilec::verify::verify_module(&m);
    if d.has_errors() {
        Err(sm.render(&d.0))
    } else {
        Ok(())
    }
}

/// The generator knows the dialect: valid configurations give programs
/// that parse and verify (all level-0 ones, most loop nests), and the
/// rule-breaking one gives some that do not.
#[test]
fn generated_programs_are_valid() {
    let mut rng = crate::choices::SplitMix(3);
    let mut failures = Vec::new();
    for i in 0..300 {
        let bytes = rng.bytes(4096);
        let mut g = crate::choices::G::new(&bytes);
        let cfg = if i % 2 == 0 {
            Config::interp()
        } else {
            Config {
                schedule: 100,
                schedule_target: Some("x86-avx2"),
                max_ops: 1,
                ..Config::compile()
            }
        };
        let text = level0::module(&mut g, &cfg);
        if let Err(e) = verifies(&text) {
            failures.push(format!("{text}\n{e}"));
        }
    }
    // Schedules drawn blindly may exceed the target's resources (as in
    // tilec_passes::samples); everything else must verify.
    let bad: Vec<&String> = failures
        .iter()
        .filter(|f| {
            !f.contains("exceeds") && !f.contains("too many") && !f.contains("does not fit")
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of 300 generated programs do not verify; the first:\n{}",
        bad.len(),
        bad[0]
    );
    let mut loop_ok = 0;
    for _ in 0..200 {
        let bytes = rng.bytes(4096);
        let text = loops::function(&mut crate::choices::G::new(&bytes), &Config::interp());
        loop_ok += verifies(&text).is_ok() as u32;
    }
    assert!(
        loop_ok >= 150,
        "only {loop_ok} of 200 generated loop nests verify"
    );
    let mut invalid = 0;
    for _ in 0..200 {
        let bytes = rng.bytes(4096);
        invalid += verifies(&level0::module(
            &mut crate::choices::G::new(&bytes),
            &Config::parse(),
        ))
        .is_err() as u32;
    }
    assert!(
        (10..190).contains(&invalid),
        "{invalid} of 200 rule-breaking programs fail to verify"
    );
}

/// Generated pipelines use the registry's passes and options.
#[test]
fn generated_pipelines_mostly_parse() {
    let reg = crate::targets::registry();
    let mut rng = crate::choices::SplitMix(5);
    let mut ok = 0;
    for _ in 0..200 {
        let bytes = rng.bytes(1024);
        let text = crate::generate::pipeline::pipeline(&mut crate::choices::G::new(&bytes), reg, 0);
        let mut sm = tilec::diag::SourceMap::new();
        let f = sm.add("p", text.clone());
        ok += tilec::pass::parse_pipeline(&text, f, reg).is_ok() as u32;
    }
    assert!(ok >= 190, "only {ok} of 200 generated pipelines parse");
}
