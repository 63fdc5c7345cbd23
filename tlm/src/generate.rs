//! Generation: next-token logits with a key/value cache, and constrained
//! sampling.
//!
//! A [`Session`] remembers the tokens it has run and every block's keys and
//! values for them. When the next context extends the previous one (the usual
//! token-by-token generation), only the new tokens go through the model, so
//! a sentence of n tokens costs n one-token steps rather than n full passes.
//! When the context diverges, the cache is cut back to the common prefix and
//! the rest is recomputed. The cache grows by concatenation, which copies it
//! once per step; that is of the same order as the attention itself and
//! negligible next to the matmuls at these model sizes.
//!
//! Contexts longer than the model's `context` are an error; there is no
//! sliding window (learned position embeddings do not shift), so the caller
//! decides what to drop.

use candle_core::{Device, IndexOp, Tensor};
use std::borrow::Borrow;

use crate::error::{Result, TlmError, invalid_input};
use crate::gpt::{Gpt, LayerCache};

/// Incremental next-token prediction over one growing context, over a
/// model it borrows (`Session<&Gpt>`) or owns (`Session<Gpt>`: what
/// `search{strategy=tlm}` keeps loaded between ops).
pub struct Session<M: Borrow<Gpt> = Gpt> {
    model: M,
    /// The tokens whose keys and values are in `cache`.
    tokens: Vec<u32>,
    cache: Vec<LayerCache>,
}

impl<M: Borrow<Gpt>> Session<M> {
    /// An empty session over `model`.
    pub fn new(model: M) -> Session<M> {
        let layers = model.borrow().config().layers;
        Session { model, tokens: Vec::new(), cache: vec![LayerCache::default(); layers] }
    }

    /// The model.
    pub fn model(&self) -> &Gpt {
        self.model.borrow()
    }

    /// The logits (length `vocab_size`) for the token that follows
    /// `context`. The cache is reused for the longest common prefix of
    /// `context` and the previous call's context; the rest is recomputed.
    pub fn logits(&mut self, context: &[u32]) -> Result<Vec<f32>> {
        let limit = self.model.borrow().config().context;
        if context.is_empty() {
            return invalid_input("the context is empty: there is nothing to predict from");
        }
        if context.len() > limit {
            return invalid_input(format!(
                "the context has {} tokens, the model at most {limit}",
                context.len()
            ));
        }
        let common = self
            .tokens
            .iter()
            .zip(context)
            .take_while(|(cached, new)| cached == new)
            .count();
        // At least the last token is always run, since its output is the answer.
        let reused = common.min(context.len() - 1);
        if reused < self.tokens.len() {
            for layer in &mut self.cache {
                layer.truncate(reused)?;
            }
            self.tokens.truncate(reused);
        }
        let fresh = &context[reused..];
        let ids = Tensor::from_slice(fresh, (1, fresh.len()), &Device::Cpu)?;
        let result = self.model.borrow().forward_from(&ids, reused, Some(&mut self.cache));
        let logits = match result {
            Ok(logits) => logits,
            Err(error) => {
                // A failed step may have extended some layers' caches and not
                // others; start afresh next time.
                self.reset();
                return Err(error);
            }
        };
        self.tokens.extend_from_slice(fresh);
        Ok(logits.i((0, fresh.len() - 1))?.to_vec1::<f32>()?)
    }

    /// Forgets the cached context.
    pub fn reset(&mut self) {
        self.tokens.clear();
        for layer in &mut self.cache {
            layer.keys_and_values = None;
        }
    }

    /// The tokens currently held in the cache.
    pub fn cached_tokens(&self) -> &[u32] {
        &self.tokens
    }
}

/// Picks the next token among `allowed` ids only: softmax over
/// `logits[id] / temperature` for the allowed ids. A temperature of zero (or
/// below) takes the argmax, ties going to the lowest id. Duplicate ids in
/// `allowed` count once, and the order of `allowed` does not matter. Uses one
/// `next_u64` of `rng` when sampling, none for argmax. NaN logits count as
/// -inf. Errors when `allowed` is empty or names an id beyond `logits`.
pub fn sample(
    logits: &[f32],
    allowed: &[u32],
    temperature: f32,
    rng: &mut impl rand::Rng,
) -> Result<u32> {
    let mut candidates = allowed.to_vec();
    candidates.sort_unstable();
    candidates.dedup();
    let Some(&largest) = candidates.last() else {
        return invalid_input("no token is allowed");
    };
    if largest as usize >= logits.len() {
        return Err(TlmError::InvalidInput(format!(
            "allowed token {largest} is beyond the {} logits",
            logits.len()
        )));
    }
    let score = |id: u32| {
        let logit = logits[id as usize];
        if logit.is_nan() {
            f32::NEG_INFINITY
        } else {
            logit
        }
    };
    // Ascending ids and a strict comparison keep the lowest id on ties.
    let mut best = candidates[0];
    for &id in &candidates[1..] {
        if score(id) > score(best) {
            best = id;
        }
    }
    let best_score = score(best);
    if temperature.is_nan()
        || temperature <= 0.0
        || best_score == f32::NEG_INFINITY
        || best_score == f32::INFINITY
    {
        return Ok(best);
    }
    let weights: Vec<f64> = candidates
        .iter()
        .map(|&id| (f64::from(score(id) - best_score) / f64::from(temperature)).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    if !total.is_finite() || total <= 0.0 {
        return Ok(best);
    }
    let uniform = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
    let mut remaining = uniform * total;
    for (&id, &weight) in candidates.iter().zip(&weights) {
        if remaining < weight {
            return Ok(id);
        }
        remaining -= weight;
    }
    // Rounding can leave a sliver past the last weight; it belongs to the
    // last candidate with any weight.
    Ok(candidates
        .iter()
        .zip(&weights)
        .rev()
        .find(|(_, weight)| **weight > 0.0)
        .map_or(best, |(&id, _)| id))
}

/// Greedy (temperature 0) generation of up to `count` tokens after `prompt`,
/// stopping early at `stop` or at the model's context. Returns only the new
/// tokens.
pub fn generate_greedy(
    model: &Gpt,
    prompt: &[u32],
    count: usize,
    stop: Option<u32>,
) -> Result<Vec<u32>> {
    let vocabulary: Vec<u32> = (0..model.config().vocab_size as u32).collect();
    let mut session = Session::new(model);
    let mut context = prompt.to_vec();
    let mut generated = Vec::with_capacity(count);
    // The sampler draws nothing at temperature zero; any rng will do.
    let mut unused_rng = <rand::rngs::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0);
    while generated.len() < count && context.len() < model.config().context + 1 {
        let logits = session.logits(&context)?;
        let next = sample(&logits, &vocabulary, 0.0, &mut unused_rng)?;
        generated.push(next);
        context.push(next);
        if Some(next) == stop {
            break;
        }
    }
    Ok(generated)
}
