//! TLM's tensor language (`tensor_language.rs`) and the `tlm` strategy
//! (`tlm.rs`) with stand-in language models: sentences round-trip for
//! every strategy's points, decoding rejects what the space does not
//! allow, the vocabulary is stable, and generation is masked to the
//! space's options.

use super::super::tensor_language::{self, EOS, SPECIALS, Step, UNK, Vocabulary, Walk};
use super::super::tlm;
use super::*;
use proptest::prelude::*;

fn problem(src: &str, t: &Arc<Target>, intrinsics: bool) -> (Module, Problem) {
    let m = parse(src);
    let f = &m.funcs[0];
    let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
    let p = Problem::new(f, op, t.clone(), 16).unwrap();
    let p = if intrinsics { p.with_intrinsics(f) } else { p };
    (m, p)
}

/// Every op kind on every test target, and the u8 GEMM with VNNI and the
/// f16 GEMM with `mma` options in the space.
fn problems() -> Vec<(Module, Problem)> {
    let mut out = Vec::new();
    for src in crate::samples::OPS {
        for t in targets() {
            out.push(problem(src, &t, true));
        }
    }
    out.push(problem(GEMM_U8, &tilec::target::builtin("x86-avx512").unwrap(), true));
    out.push(problem(GEMM_F16, &tilec::target::builtin("sm80").unwrap(), true));
    out
}

fn assert_round_trip(p: &Problem, c: &Config, who: &str) {
    let words = tensor_language::sentence_of(p, c).unwrap_or_else(|e| panic!("{who}: {c:?} has no sentence: {e}"));
    assert_eq!(tensor_language::config_of_sentence(p, &words).as_ref(), Ok(c), "{who}: {}", words.join(" "));
    assert_eq!(words.first().map(String::as_str), Some("<s>"));
    assert_eq!(words.last().map(String::as_str), Some(EOS));
    assert!(words.starts_with(&tensor_language::prompt(p)));
    assert!(words.iter().all(|w| !w.is_empty() && !w.contains(char::is_whitespace)), "{words:?}");
}

/// The points markov, roller and random construct, and the knob space's
/// samples (gradient's and evolutionary's), are sentences that decode to
/// themselves: what any strategy records, TLM can learn and write.
#[test]
fn every_strategys_points_are_sentences_that_decode_to_themselves() {
    for (m, p) in problems() {
        for strategy in ["markov", "roller", "random"] {
            let mut st = search(strategy, &[]).strategy().expect("a strategy");
            let (mut recorder, mut model) = (Recorder::default(), AnalyticModel);
            let mut cx = SearchCx::detached(1, 300, m.clone(), &mut recorder, &mut model, st.name());
            for c in st.run(&p, &mut cx).unwrap().iter().take(40) {
                assert_round_trip(&p, c, strategy);
            }
        }
        let space = knobs::KnobSpace::new(&p);
        for c in space.distinct_samples(&mut rng::Rng::new(5), 30) {
            assert_round_trip(&p, &c, "knob space");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Uniform walks (the pre-training corpus) round-trip, valid or not,
    /// and decide every knob of the point: the walk's point is one the
    /// knob space calls consistent.
    #[test]
    fn uniform_sentences_round_trip(seed in any::<u64>(), which in 0usize..64) {
        let all = problems();
        let (_, p) = &all[which % all.len()];
        let c = tensor_language::sample_uniform(p, &mut rng::Rng::new(seed));
        prop_assert!(knobs::KnobSpace::new(p).consistent(&c), "{:?}", c);
        assert_round_trip(p, &c, "uniform");
    }
}

/// The sentence of a GEMM on `x86-avx2` reads as docs/search.md shows it.
#[test]
fn a_gemm_sentence_reads_as_documented() {
    let (_, p) = problem(GEMM, &tilec::target::builtin("x86-avx2").unwrap(), true);
    let words = tensor_language::sentence_of(&p, &p.initial()).unwrap().join(" ");
    let expected_prompt = "<s> op=gemm reduce=sum body=mul axis=i:64 axis=j:80 axis=r:k:48 in0=f32[i,k] in1=f32[k,j] out=f32[i,j] target=x86-avx2 cores=";
    assert!(words.starts_with(expected_prompt), "{words}");
    assert!(words.contains(" has=vfmadd231ps.ymm "), "{words}");
    assert!(words.contains(" intrinsic=none split i=64 i.core=1 i.l2=all i.l1=all split j=80 "), "{words}");
    assert!(words.ends_with(" pack in0.pack=none in1.pack=none order loop=i loop=j loop=k vector=j </s>"), "{words}");
}

/// A tile level that keeps the tile it splits whole writes `all` (the
/// outermost level: the axis' extent), and reads back as that size.
#[test]
fn a_tile_kept_whole_is_written_all() {
    let (_, p) = problem(GEMM, &tilec::target::builtin("x86-avx2").unwrap(), false);
    let k = p.axes.iter().position(|a| a.name == "k").unwrap();
    let mut c = p.initial();
    c.tiles[k] = vec![48, 48, 8];
    let words = tensor_language::sentence_of(&p, &c).unwrap();
    assert!(words.join(" ").contains(" split r:k=48 k.core=all k.l2=all k.l1=8 "), "{}", words.join(" "));
    assert_eq!(tensor_language::config_of_sentence(&p, &words), Ok(c.clone()));
    let i = p.axes.iter().position(|a| a.name == "i").unwrap();
    c.tiles[i] = vec![16, 16, 16];
    let words = tensor_language::sentence_of(&p, &c).unwrap().join(" ");
    assert!(words.contains(" split i=64 i.core=16 i.l2=all i.l1=all "), "{words}");
}

/// Decoding names the first token that is not what the space has there.
#[test]
fn decoding_rejects_what_the_space_does_not_allow() {
    let (_, p) = problem(GEMM, &tilec::target::builtin("x86-avx2").unwrap(), false);
    let words = tensor_language::sentence_of(&p, &p.initial()).unwrap();
    let at = words.iter().position(|w| w == "i.core=1").unwrap();
    let mut bad = words.clone();
    bad[at] = "i.core=7".into();
    let e = tensor_language::config_of_sentence(&p, &bad).unwrap_err();
    assert!(e.starts_with(&format!("token {at}: `i.core=7` is not one of the options here (i.core=1 i.core=2 ")), "{e}");
    let e = tensor_language::config_of_sentence(&p, &words[..words.len() - 3]).unwrap_err();
    assert!(e.contains("found `the end`") || e.contains("`the end` is not one of"), "{e}");
    let mut longer = words.clone();
    longer.push("loop=i".into());
    assert!(tensor_language::config_of_sentence(&p, &longer).unwrap_err().contains("after the end of the sentence"));
    let (_, other) = problem(GEMM, &tilec::target::builtin("x86-avx512").unwrap(), false);
    assert!(tensor_language::config_of_sentence(&other, &words).unwrap_err().contains("expected `target=x86-avx512`"));
}

#[test]
fn the_vocabulary_is_sorted_after_the_specials_and_reads_unknown_tokens_as_unk() {
    let a: Vec<String> = ["<s>", "b=2", "a=1", "</s>"].map(String::from).to_vec();
    let b: Vec<String> = ["<s>", "c=3", "a=1", "</s>"].map(String::from).to_vec();
    let v = Vocabulary::from_sentences([a.as_slice(), b.as_slice()]);
    assert_eq!(v.tokens(), ["<pad>", "<unk>", "<s>", "</s>", "a=1", "b=2", "c=3"]);
    assert_eq!(Vocabulary::from_sentences([b.as_slice(), a.as_slice()]), v, "the same corpus in another order");
    assert_eq!(v.encode(&["a=1", "d=4", "</s>"]), vec![4, 1, 3]);
    assert_eq!(v.token(6), Some("c=3"));
    assert_eq!(Vocabulary::from_tokens(v.tokens().to_vec()).as_ref(), Ok(&v));
    assert!(Vocabulary::from_tokens(vec!["a".into()]).unwrap_err().contains("starts with the special tokens"));
    let mut twice: Vec<String> = SPECIALS.iter().map(|s| s.to_string()).collect();
    twice.extend(["x".to_string(), "x".to_string()]);
    assert_eq!(Vocabulary::from_tokens(twice).unwrap_err(), "the vocabulary has `x` twice");
}

/// A stand-in language model: logits from a rule over the vocabulary.
struct RuleModel {
    vocabulary: Vec<String>,
    /// The logit of a token.
    rule: fn(&str) -> f32,
    calls: std::rc::Rc<std::cell::Cell<usize>>,
}

impl tilec::lm::TokenModel for RuleModel {
    fn vocabulary(&self) -> &[String] {
        &self.vocabulary
    }

    fn context_len(&self) -> usize {
        512
    }

    fn next_token_logits(&mut self, context: &[u32]) -> Result<Vec<f32>, String> {
        assert!(!context.is_empty());
        self.calls.set(self.calls.get() + 1);
        Ok(self.vocabulary.iter().map(|t| (self.rule)(t)).collect())
    }
}

/// The vocabulary of a few hundred uniform sentences of `p`.
fn corpus_vocabulary(p: &Problem) -> Vocabulary {
    let mut rng = rng::Rng::new(9);
    let sentences: Vec<Vec<String>> = (0..400).map(|_| tensor_language::sentence_of(p, &tensor_language::sample_uniform(p, &mut rng)).unwrap()).collect();
    Vocabulary::from_sentences(sentences.iter().map(Vec::as_slice))
}

/// The size in a tile token (`i.core=16` → 16; `i.core=all`, the largest
/// there is, → 1e9).
fn tile_size(t: &str) -> f32 {
    let size = |v: &str| if v == tensor_language::WHOLE { Some(1e9) } else { v.parse::<f32>().ok() };
    t.rsplit_once('=').and_then(|(k, v)| if k.contains('.') && !k.ends_with(".pack") { size(v) } else { None }).unwrap_or(0.0)
}

/// Masked generation writes only sentences of the space, follows the
/// model where the mask lets it (a model that prefers large tiles, at
/// temperature 0, writes the largest allowed tile at every decision), and
/// asks the model only about decisions with a choice.
#[test]
fn generation_is_masked_to_the_spaces_options_and_follows_the_model() {
    let (_, p) = problem(GEMM, &tilec::target::builtin("x86-avx2").unwrap(), true);
    let vocabulary = corpus_vocabulary(&p);
    let calls = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut model = RuleModel { vocabulary: vocabulary.tokens().to_vec(), rule: tile_size, calls: calls.clone() };
    let mut rng = rng::Rng::new(1);
    let g = tlm::generate(&p, &mut model, &vocabulary, 0.0, &mut rng).unwrap();
    assert_eq!(tensor_language::config_of_sentence(&p, &g.tokens).as_ref(), Ok(&g.config));
    assert_eq!(g.unseen, 0);
    assert_eq!(calls.get(), g.decisions);
    // Each tile is the largest its decision allowed.
    let mut walk = Walk::new(&p);
    let mut at = 0;
    loop {
        match walk.step() {
            Step::Words(w) => at += w.len(),
            Step::Decide { options, .. } => {
                let chosen = options.iter().position(|o| *o == g.tokens[at]).unwrap();
                if tile_size(&options[0]) > 0.0 {
                    let best = options.iter().map(|o| tile_size(o)).fold(0.0, f32::max);
                    assert_eq!(tile_size(&options[chosen]), best, "{}", g.tokens.join(" "));
                }
                walk.choose(chosen);
                at += 1;
            }
            Step::End => break,
        }
    }
    // At temperature 1 with a flat model, every sentence is still one of
    // the space, and different seeds write different ones.
    let mut flat = RuleModel { vocabulary: vocabulary.tokens().to_vec(), rule: |_| 0.0, calls };
    let written: std::collections::BTreeSet<Config> = (0..20)
        .map(|seed| {
            let g = tlm::generate(&p, &mut flat, &vocabulary, 1.0, &mut rng::Rng::new(seed)).unwrap();
            assert_eq!(tensor_language::config_of_sentence(&p, &g.tokens).as_ref(), Ok(&g.config));
            g.config
        })
        .collect();
    assert!(written.len() > 15, "{}", written.len());
    // A decision none of whose options the vocabulary has is drawn
    // uniformly, and counted.
    let small = Vocabulary::from_tokens(SPECIALS.iter().map(|s| s.to_string()).collect()).unwrap();
    let mut blind = RuleModel { vocabulary: small.tokens().to_vec(), rule: |_| 0.0, calls: Default::default() };
    let g = tlm::generate(&p, &mut blind, &small, 1.0, &mut rng::Rng::new(2)).unwrap();
    assert!(g.unseen > 0 && g.unseen == g.decisions);
    assert_eq!(small.encode(&g.tokens).iter().filter(|&&i| small.token(i) == Some(UNK)).count(), g.tokens.len() - 2, "all but <s> and </s>");
}

#[test]
fn sampling_follows_the_softmax_of_the_scores() {
    let mut rng = rng::Rng::new(4);
    assert_eq!(tlm::sample_index(&[1.0, 3.0, 3.0], 0.0, &mut rng), 1, "the first largest at temperature 0");
    let mut counts = [0usize; 2];
    for _ in 0..4000 {
        counts[tlm::sample_index(&[0.0, 2f64.ln()], 1.0, &mut rng)] += 1;
    }
    // P = 1/3, 2/3.
    assert!((counts[1] as f64 / 4000.0 - 2.0 / 3.0).abs() < 0.03, "{counts:?}");
    // A high temperature flattens it.
    let mut hot = [0usize; 2];
    for _ in 0..4000 {
        hot[tlm::sample_index(&[0.0, 2f64.ln()], 100.0, &mut rng)] += 1;
    }
    assert!((hot[1] as f64 / 4000.0 - 0.5).abs() < 0.03, "{hot:?}");
}

/// A model that must be asked for a batch of contexts of one length.
struct BatchingModel {
    inner: RuleModel,
    /// The rows of each call.
    rows: Vec<usize>,
}

impl tilec::lm::TokenModel for BatchingModel {
    fn vocabulary(&self) -> &[String] {
        self.inner.vocabulary()
    }

    fn context_len(&self) -> usize {
        self.inner.context_len()
    }

    fn next_token_logits(&mut self, _: &[u32]) -> Result<Vec<f32>, String> {
        panic!("asked one context at a time")
    }

    fn next_token_logits_batch(&mut self, contexts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, String> {
        assert!(contexts.iter().all(|c| c.len() == contexts[0].len()), "contexts of one length");
        self.rows.push(contexts.len());
        contexts.iter().map(|c| self.inner.next_token_logits(c)).collect()
    }
}

/// Sentences written in lockstep are sentences of the space, the same for
/// the same seed, and the model is asked about all of them at once.
#[test]
fn sentences_written_in_lockstep_are_of_the_space_and_asked_as_one_batch() {
    let (_, p) = problem(GEMM, &tilec::target::builtin("x86-avx2").unwrap(), true);
    let vocabulary = corpus_vocabulary(&p);
    let mut model = BatchingModel { inner: RuleModel { vocabulary: vocabulary.tokens().to_vec(), rule: |_| 0.0, calls: Default::default() }, rows: Vec::new() };
    let written = tlm::generate_batch(&p, &mut model, &vocabulary, 1.0, &mut rng::Rng::new(3), 8).unwrap();
    assert_eq!(written.len(), 8);
    assert!(!model.rows.is_empty() && model.rows.iter().all(|&n| n == 8), "{:?}", model.rows);
    for g in &written {
        assert_eq!(tensor_language::config_of_sentence(&p, &g.tokens).as_ref(), Ok(&g.config));
    }
    let again = tlm::generate_batch(&p, &mut model, &vocabulary, 1.0, &mut rng::Rng::new(3), 8).unwrap();
    assert_eq!(written.iter().map(|g| &g.tokens).collect::<Vec<_>>(), again.iter().map(|g| &g.tokens).collect::<Vec<_>>());
    let distinct: std::collections::BTreeSet<&Config> = written.iter().map(|g| &g.config).collect();
    assert!(distinct.len() > 4, "{}", distinct.len());
}

struct RuleLoader;

impl tilec::lm::TokenModelLoader for RuleLoader {
    fn load(&self, path: &str) -> Result<Box<dyn tilec::lm::TokenModel>, String> {
        if path != "rule.safetensors" {
            return Err(format!("no such file `{path}`"));
        }
        let (_, p) = problem(GEMM, &tilec::target::builtin("x86-avx2").unwrap(), true);
        // Larger tiles likelier (P ∝ size; a whole tile, whose size the
        // token does not say, as likely as size 1), but every option drawn.
        let rule = |t: &str| if t.ends_with(tensor_language::WHOLE) { 0.0 } else { tile_size(t).max(1.0).ln() };
        Ok(Box::new(RuleModel { vocabulary: corpus_vocabulary(&p).tokens().to_vec(), rule, calls: Default::default() }))
    }
}

/// `search{strategy=tlm}` through the pass: the model the context loads
/// writes `k` candidates, the pass picks one, and the errors are
/// diagnostics.
#[test]
fn the_tlm_strategy_searches_through_the_pass_and_reports_its_errors() {
    let t = tilec::target::builtin("x86-avx2").unwrap();
    let run = |extra: &[(&'static str, &str)]| {
        let mut m = parse(GEMM);
        let mut cx = PassContext::with_target(Some(t.clone()));
        cx.set_language_models(tilec::lm::LanguageModels::new(Box::new(RuleLoader)));
        let r = search("tlm", extra).run(&mut m, &mut cx);
        (r, m, cx.take_reports().join(""))
    };
    let (r, m, report) = run(&[("model", "rule.safetensors"), ("k", "4")]);
    r.unwrap_or_else(|d| panic!("{d:?}"));
    let (_, again, _) = run(&[("model", "rule.safetensors"), ("k", "4")]);
    assert_eq!(tilec::syntax::print_module(&m), tilec::syntax::print_module(&again), "the same seed, the same schedule");
    assert!(report.contains("tlm: 4 distinct valid schedules from "), "{report}");
    assert!(!tilec::verify::verify_module_with(&m, Some(&t)).has_errors());
    let (r, ..) = run(&[("model", "missing.safetensors")]);
    let d = r.unwrap_err().0.remove(0);
    assert_eq!(d.message, "cannot load the language model `missing.safetensors`: no such file `missing.safetensors`");
    let (r, ..) = run(&[]);
    let d = r.unwrap_err().0.remove(0);
    assert!(d.message.starts_with("search strategy `tlm` cannot run: it needs a model: model=PATH"), "{}", d.message);
    let (r, ..) = run(&[("model", "rule.safetensors"), ("lm-temperature", "-1")]);
    assert!(r.unwrap_err().0[0].message.contains("lm-temperature=-1 is not a temperature"));
    // Without a loader (a build without tilec-tlm).
    let mut m = parse(GEMM);
    let mut cx = PassContext::with_target(Some(t.clone()));
    let d = search("tlm", &[("model", "rule.safetensors")]).run(&mut m, &mut cx).unwrap_err().0.remove(0);
    assert!(d.message.contains("this build of tilec has no language-model support"), "{}", d.message);
}
