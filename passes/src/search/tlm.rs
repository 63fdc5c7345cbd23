//! `tlm`: schedules written by a tensor language model (seed 002, §5.2,
//! Algorithm 2).
//!
//! The prompt is the op's subgraph and the target's hardware
//! (`tensor_language::prompt`); then the walk of the space's decisions
//! goes on as in `tensor_language.rs`, and at each decision with more
//! than one option the model's next-token logits, masked to the options
//! the space allows there (and the vocabulary has), are sampled with
//! temperature `lm-temperature`. A sentence so written is a point of the
//! space by construction; one that does not fit the target (the resource
//! check) is written again, as the paper regenerates a program with an
//! invalid decision. `k` distinct valid points are generated (at most
//! 16·k + 64 sentences are written, or `budget`) and ranked
//! (`rank-by`: in the order written, or by the cost model); the pass
//! measures the first `measure-top-k`.
//!
//! The model itself is behind `tilec::lm::TokenModel`: the pass context
//! loads the file `model=PATH` names through the loader the driver
//! installed (`tilec-tlm`, over candle), so this crate links no ML
//! framework.

use super::registry::StrategyDecl;
use super::rng::Rng;
use super::space::{Config, Problem};
use super::tensor_language::{Step, UNK, Vocabulary, Walk};
use super::{SearchCx, Strategy};
use std::time::Instant;
use tilec::lm::TokenModel;
use tilec::pass::{OptionDecl, OptionKind, PassOptions};

pub const DECL: StrategyDecl = StrategyDecl {
    name: "tlm",
    summary: "TLM: a tensor language model writes the schedules, its logits masked to the space's options",
    options: &[
        OptionDecl { name: "model", kind: OptionKind::Str, default: "", help: "tlm: the model file `tilec-tlm pretrain` or `sft` wrote (safetensors)" },
        OptionDecl { name: "k", kind: OptionKind::UInt, default: "16", help: "tlm: distinct valid schedules generated per op (the paper's k_p)" },
        OptionDecl { name: "lm-temperature", kind: OptionKind::Float, default: "1.0", help: "tlm: sampling temperature of the model's masked logits (0: the most likely option)" },
        OptionDecl { name: "rank-by", kind: OptionKind::Enum(&["generation", "model"]), default: "generation", help: "tlm: the candidates' order: as generated, or by the cost model" },
    ],
    measures: false,
    create: |o: &PassOptions| Box::new(Tlm { k: o.uint("k") as usize, temperature: o.float("lm-temperature"), rank_by_model: o.str("rank-by") == "model", has_model: !o.str("model").is_empty() }),
};

/// Sentences written per candidate asked for (`k`), at most, before the
/// strategy stops with fewer (plus a fixed 64 for small `k`).
pub const MAX_SENTENCES_PER_CANDIDATE: u64 = 16;

/// Sentences written in lockstep at most ([`generate_batch`]): enough rows
/// that a step's fixed cost is small next to theirs, few enough that a
/// small `k` does not write many more sentences than it keeps.
pub const GENERATION_BATCH: usize = 32;

pub struct Tlm {
    pub k: usize,
    pub temperature: f64,
    pub rank_by_model: bool,
    has_model: bool,
}

/// One sentence the model wrote.
#[derive(Clone, Debug)]
pub struct Generated {
    pub config: Config,
    /// The sentence's tokens.
    pub tokens: Vec<String>,
    /// Decisions the model was asked (those with more than one option).
    pub decisions: usize,
    /// Decisions none of whose options the vocabulary has: drawn uniformly
    /// (the model never saw them; a vocabulary from a wider corpus fixes it).
    pub unseen: usize,
}

/// Writes one sentence of `p` with `model` (Algorithm 2): the walk's words
/// as they are; at each decision, the model's logits masked to the options
/// in `vocabulary`, sampled at `temperature` (0: the most likely, the
/// first on ties). The point may not fit the target; the caller checks.
pub fn generate(p: &Problem, model: &mut dyn TokenModel, vocabulary: &Vocabulary, temperature: f64, rng: &mut Rng) -> Result<Generated, String> {
    Ok(generate_batch(p, model, vocabulary, temperature, rng, 1)?.remove(0))
}

/// Writes `count` sentences of `p` as [`generate`] does, in lockstep: every
/// walk of one op has its words and decisions at the same positions (the
/// order of the space's decisions does not depend on what is decided), so
/// at each decision the model scores all the sentences' contexts as one
/// batch ([`TokenModel::next_token_logits_batch`]). The draws go sentence
/// by sentence within each decision, so the same seed and `count` write
/// the same sentences.
pub fn generate_batch(p: &Problem, model: &mut dyn TokenModel, vocabulary: &Vocabulary, temperature: f64, rng: &mut Rng, count: usize) -> Result<Vec<Generated>, String> {
    let unk = vocabulary.id(UNK).expect("a vocabulary has <unk>");
    let mut walks: Vec<Walk> = (0..count).map(|_| Walk::new(p)).collect();
    let mut ids: Vec<Vec<u32>> = vec![Vec::new(); count];
    // Per sentence: its tokens, decisions asked, decisions outside the
    // vocabulary.
    let mut out: Vec<(Vec<String>, usize, usize)> = vec![(Vec::new(), 0, 0); count];
    loop {
        let steps: Vec<Step> = walks.iter_mut().map(Walk::step).collect();
        match &steps[0] {
            Step::End => break,
            Step::Words(_) => {
                for ((step, ids), g) in steps.into_iter().zip(&mut ids).zip(&mut out) {
                    let Step::Words(w) = step else { unreachable!("the walks of one op step alike") };
                    ids.extend(vocabulary.encode(&w));
                    g.0.extend(w);
                }
            }
            Step::Decide { .. } => {
                let options: Vec<Vec<String>> = steps
                    .into_iter()
                    .map(|step| match step {
                        Step::Decide { options, .. } => options,
                        _ => unreachable!("the walks of one op step alike"),
                    })
                    .collect();
                let allowed: Vec<Vec<(usize, u32)>> = options.iter().map(|o| o.iter().enumerate().filter_map(|(i, t)| Some((i, vocabulary.id(t)?))).collect()).collect();
                let asks = |i: usize| options[i].len() > 1 && !allowed[i].is_empty();
                let logits = if (0..count).any(asks) {
                    if ids[0].len() >= model.context_len() {
                        return Err(format!("the sentence is longer than the model's context of {} tokens", model.context_len()));
                    }
                    model.next_token_logits_batch(&ids)?
                } else {
                    Vec::new()
                };
                for i in 0..count {
                    let (tokens, decisions, unseen) = &mut out[i];
                    let pick = if options[i].len() == 1 {
                        0
                    } else if allowed[i].is_empty() {
                        *decisions += 1;
                        *unseen += 1;
                        rng.below(options[i].len())
                    } else {
                        *decisions += 1;
                        let scores: Vec<f64> = allowed[i].iter().map(|&(_, id)| f64::from(logits[i].get(id as usize).copied().unwrap_or(f32::NEG_INFINITY))).collect();
                        allowed[i][sample_index(&scores, temperature, rng)].0
                    };
                    ids[i].push(vocabulary.id(&options[i][pick]).unwrap_or(unk));
                    tokens.push(options[i][pick].clone());
                    walks[i].choose(pick);
                }
            }
        }
    }
    Ok(out.into_iter().zip(&walks).map(|((tokens, decisions, unseen), walk)| Generated { config: walk.config().clone(), tokens, decisions, unseen }).collect())
}

/// An index drawn with probability softmax(scores / temperature); at
/// temperature 0 (or below) the largest score, the first on ties.
pub fn sample_index(scores: &[f64], temperature: f64, rng: &mut Rng) -> usize {
    let best = (0..scores.len()).fold(0, |b, i| if scores[i] > scores[b] { i } else { b });
    if temperature <= 0.0 || !scores[best].is_finite() {
        return best;
    }
    let weights: Vec<f64> = scores.iter().map(|&s| ((s - scores[best]) / temperature).exp()).collect();
    rng.roulette(&weights).unwrap_or(best)
}

impl Strategy for Tlm {
    fn name(&self) -> &'static str {
        "tlm"
    }

    fn check_options(&self) -> Result<(), String> {
        if !self.has_model {
            return Err("it needs a model: model=PATH, a file `tilec-tlm pretrain` or `tilec-tlm sft` wrote".into());
        }
        if self.k == 0 {
            return Err("k=0 generates nothing".into());
        }
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(format!("lm-temperature={} is not a temperature (0 or more)", self.temperature));
        }
        Ok(())
    }

    fn failure_help(&self) -> String {
        "a model trained on this target's sentences writes valid schedules; `tilec-tlm pretrain` makes one (docs/search.md, \"tlm\")".into()
    }

    fn run(&mut self, p: &Problem, cx: &mut SearchCx) -> Result<Vec<Config>, String> {
        let model = cx.take_language_model().ok_or("no language model was loaded")?;
        let vocabulary = Vocabulary::from_tokens(model.vocabulary().to_vec())?;
        let mut rng = Rng::new(cx.seed);
        let start = Instant::now();
        let (mut out, mut seen) = (Vec::new(), std::collections::HashSet::new());
        let (mut written, mut invalid, mut repeated, mut decisions, mut unseen) = (0u64, 0u64, 0u64, 0usize, 0usize);
        // A model that keeps writing the same few points would otherwise
        // spend the whole `budget` (20,000 sentences by default).
        let most = (self.k as u64).saturating_mul(MAX_SENTENCES_PER_CANDIDATE).saturating_add(64);
        while out.len() < self.k && written < most && !cx.spent() {
            // A batch as large as the candidates still wanted (a fifth more
            // for those that will not fit or repeat), within the limits.
            let wanted = (self.k - out.len()) as u64;
            let batch = (wanted + wanted / 5 + 1).min(GENERATION_BATCH as u64).min(most - written).min(cx.budget.saturating_sub(cx.visited).max(1));
            cx.visited += batch;
            written += batch;
            for g in generate_batch(p, model, &vocabulary, self.temperature, &mut rng, batch as usize)? {
                decisions += g.decisions;
                unseen += g.unseen;
                if !p.valid(&g.config) {
                    invalid += 1;
                } else if !seen.insert(g.config.clone()) {
                    repeated += 1;
                } else if out.len() < self.k {
                    out.push(g.config);
                }
            }
        }
        let ms = start.elapsed().as_secs_f64() * 1e3 / written.max(1) as f64;
        // The last batch may have written more distinct valid points than
        // were still wanted.
        let beyond = match written - invalid - repeated - out.len() as u64 {
            0 => String::new(),
            n => format!(", {n} beyond k"),
        };
        cx.note(format!("tlm: {} distinct valid schedules from {written} sentences ({invalid} did not fit the target, {repeated} repeated{beyond}); {ms:.1} ms per sentence", out.len()));
        if unseen > 0 {
            cx.note(format!("tlm: {unseen} of {decisions} decisions had no option in the model's vocabulary and were drawn uniformly"));
        }
        Ok(if self.rank_by_model { cx.rank(p, out) } else { out })
    }
}
