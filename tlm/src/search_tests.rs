//! The model in tilec's search: TLM-base trained on uniform sentences of
//! one op writes sentences of the space (every one decodes; those that fit
//! the target as often as uniform ones do), its decisions distributed like
//! uniform samples (the histograms), and the model file carries its
//! vocabulary.

use crate::*;
use std::collections::BTreeMap;
use tilec::diag::SourceMap;
use tilec_passes::search::rng::Rng;
use tilec_passes::search::space::Problem;
use tilec_passes::search::tensor_language::{self, Step, Vocabulary, Walk};

const GEMM: &str = "func @gemm(%A: tensor<24x16xf32>, %B: tensor<16x32xf32>) -> tensor<24x32xf32> {
  %C = compute \"gemm\" (i: 24, j: 32) reduce sum (k: 16) reads(%a = %A[i, k], %b = %B[k, j]) -> tensor<24x32xf32>[i, j] {
    %0 = mul %a, %b : f32
    yield %0 : f32
  }
  return %C
}";

fn problem() -> Problem {
    let mut sources = SourceMap::new();
    let file = sources.add("gemm.tile", GEMM);
    let m = tilec::syntax::parse(&sources, file).expect("parses");
    let f = &m.funcs[0];
    let op = f.walk().into_iter().find(|&o| f.ops[o].kind.as_compute().is_some()).expect("a compute op");
    Problem::new(f, op, tilec::target::builtin("x86-avx2").expect("built in"), 16).expect("a problem").with_intrinsics(f)
}

/// Per decision (its position among the decisions), how often each
/// option token was taken.
type Histograms = BTreeMap<usize, BTreeMap<String, usize>>;

fn histograms(p: &Problem, sentences: &[Vec<String>]) -> Histograms {
    let mut h = Histograms::new();
    for s in sentences {
        let mut walk = Walk::new(p);
        let (mut at, mut decision) = (0, 0);
        loop {
            match walk.step() {
                Step::Words(w) => at += w.len(),
                Step::Decide { options, .. } => {
                    let i = options.iter().position(|o| *o == s[at]).expect("a sentence of the space");
                    *h.entry(decision).or_default().entry(s[at].clone()).or_default() += 1;
                    walk.choose(i);
                    at += 1;
                    decision += 1;
                }
                Step::End => break,
            }
        }
    }
    h
}

/// The mean over decisions of the total variation distance between two
/// sets of histograms. (A decision's options depend on the decisions
/// before it; the histograms pool over those, for both sets alike.)
fn distance(a: &Histograms, b: &Histograms) -> f64 {
    let mut total = 0.0;
    for (d, ha) in a {
        let hb = &b[d];
        let (na, nb) = (ha.values().sum::<usize>() as f64, hb.values().sum::<usize>() as f64);
        let keys: std::collections::BTreeSet<&String> = ha.keys().chain(hb.keys()).collect();
        total += 0.5 * keys.iter().map(|k| (ha.get(*k).copied().unwrap_or(0) as f64 / na - hb.get(*k).copied().unwrap_or(0) as f64 / nb).abs()).sum::<f64>();
    }
    total / a.len() as f64
}

fn uniform_valid(p: &Problem, n: usize, seed: u64) -> Vec<Vec<String>> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| tensor_language::sentence_of(p, &tensor_language::sample_valid(p, &mut rng, 64).expect("a valid point")).expect("a sentence")).collect()
}

/// TLM-base (pre-trained only, no fine-tuning) samples like the uniform
/// walk it was trained on: every sentence it writes is one of the space,
/// and its decision histograms are as close to uniform samples' as two
/// uniform sample sets are to each other (within a margin), while a model
/// trained on a skewed corpus is far from them.
#[test]
fn tlm_base_writes_sentences_of_the_space_distributed_like_uniform_samples() {
    let p = problem();
    let corpus = uniform_valid(&p, 400, 1);
    let vocabulary = Vocabulary::from_sentences(corpus.iter().map(Vec::as_slice));
    let config = GptConfig { vocab_size: vocabulary.len(), context: 128, layers: 2, heads: 2, embedding: 48 };
    let train_on = |sentences: &[Vec<String>]| {
        let mut model = Gpt::new(config.clone(), 3).unwrap();
        let examples: Vec<Example> = sentences.iter().map(|s| Example::pretraining(vocabulary.encode(s))).collect();
        let options = TrainOptions { steps: Some(250), batch_size: 16, learning_rate: 3e-3, warmup_steps: 20, seed: 3, ..TrainOptions::default() };
        train(&mut model, &examples, &options).unwrap();
        TlmModel::new(model, vocabulary.tokens().to_vec())
    };
    let write = |model: &mut TlmModel, n: usize| -> (Vec<Vec<String>>, usize) {
        let mut rng = Rng::new(7);
        let mut fits = 0;
        let sentences = (0..n)
            .map(|_| {
                let g = tilec_passes::search::tlm::generate(&p, model, &vocabulary, 1.0, &mut rng).unwrap();
                assert_eq!(tensor_language::config_of_sentence(&p, &g.tokens).as_ref(), Ok(&g.config), "every sentence is one of the space");
                assert_eq!(g.unseen, 0);
                fits += usize::from(p.valid(&g.config));
                g.tokens
            })
            .collect();
        (sentences, fits)
    };
    let mut base = train_on(&corpus);
    let (written, fits) = write(&mut base, 200);
    let reference = histograms(&p, &uniform_valid(&p, 200, 2));
    let noise = distance(&histograms(&p, &uniform_valid(&p, 200, 3)), &reference);
    let model_distance = distance(&histograms(&p, &written), &reference);
    assert!(model_distance < noise + 0.06, "TLM-base {model_distance:.3} from uniform; two uniform sets {noise:.3}");
    assert!(fits >= 180, "{fits} of 200 fit the target (the corpus: all)");
    // A corpus of the smallest i tiles only: the model learns the skew.
    let skewed: Vec<Vec<String>> = corpus.iter().filter(|s| s.iter().any(|t| t == "i.core=1")).cloned().collect();
    let mut skewed_model = train_on(&skewed);
    let (skewed_written, _) = write(&mut skewed_model, 200);
    let skew_distance = distance(&histograms(&p, &skewed_written), &reference);
    assert!(skew_distance > model_distance + 0.03, "skewed {skew_distance:.3}, base {model_distance:.3}");
}

#[test]
fn the_model_file_holds_the_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let tokens: Vec<String> = ["<pad>", "<unk>", "<s>", "</s>", "a=1"].map(String::from).to_vec();
    let model = Gpt::new(GptConfig { vocab_size: 5, context: 8, layers: 1, heads: 1, embedding: 8 }, 0).unwrap();
    save_model(&model, &tokens, &path).unwrap();
    let (_, back) = load_model(&path).unwrap();
    assert_eq!(back, tokens);
    let loaded = TlmModel::load(&path).unwrap();
    assert_eq!(tilec::lm::TokenModel::vocabulary(&loaded), tokens.as_slice());
    assert!(save_model(&model, &tokens[..4], &path).unwrap_err().to_string().contains("a vocabulary of 4 tokens for a model of 5"));
    // A model without a vocabulary (Gpt::save) is not one tilec can use.
    model.save(&path).unwrap();
    assert!(load_model(&path).err().expect("no vocabulary").to_string().contains("not a model `tilec-tlm` wrote"));
    let missing = tilec::lm::TokenModelLoader::load(&TlmLoader, "/nonexistent/m.safetensors").err().unwrap();
    assert!(missing.contains("/nonexistent/m.safetensors"), "{missing}");
}
