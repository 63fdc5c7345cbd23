//! Generation: next-token logits with a key/value cache, and constrained
//! sampling.
//!
//! A [`Session`] remembers the tokens it has run and every block's keys and
//! values for them. When the next context extends the previous one (the usual
//! token-by-token generation), only the new tokens go through the model, so
//! a sentence of n tokens costs n one-token steps rather than n full passes.
//! When the context diverges, the cache is cut back to the common prefix and
//! the rest is recomputed. The cache grows by concatenation, which copies
//! it once per step; that is of the same order as the attention itself and
//! negligible next to the matmuls at these model sizes.
//!
//! A batch of contexts of one length (sentences of one op written in
//! lockstep) runs as one forward pass, a row each, over one cache: a
//! step's fixed cost (a few dozen small tensor ops per layer, which
//! dominate at these model sizes) is then paid once per batch.
//!
//! Contexts longer than the model's `context` are an error; there is no
//! sliding window (learned position embeddings do not shift), so the caller
//! decides what to drop.

use candle_core::{Device, IndexOp, Tensor};
use std::borrow::Borrow;

use crate::error::{Result, TlmError, invalid_input};
use crate::gpt::{Gpt, LayerCache};

/// Incremental next-token prediction over one growing context, or over a
/// batch of contexts of one length growing in lockstep (a row each), over
/// a model it borrows (`Session<&Gpt>`) or owns (`Session<Gpt>`: what
/// `search{strategy=tlm}` keeps loaded between ops).
pub struct Session<M: Borrow<Gpt> = Gpt> {
    model: M,
    /// Per row, the tokens whose keys and values are in `cache`.
    rows: Vec<Vec<u32>>,
    cache: Vec<LayerCache>,
}

impl<M: Borrow<Gpt>> Session<M> {
    /// An empty session over `model`.
    pub fn new(model: M) -> Session<M> {
        let layers = model.borrow().config().layers;
        Session { model, rows: Vec::new(), cache: vec![LayerCache::default(); layers] }
    }

    /// The model.
    pub fn model(&self) -> &Gpt {
        self.model.borrow()
    }

    /// The logits (length `vocab_size`) for the token that follows
    /// `context`. The cache is reused for the longest common prefix of
    /// `context` and the previous call's context; the rest is recomputed.
    pub fn logits(&mut self, context: &[u32]) -> Result<Vec<f32>> {
        let mut rows = self.logits_batch(&[context])?;
        Ok(rows.remove(0))
    }

    /// The logits after each of `contexts` (all of one length), computed as
    /// one batch. The cache is reused for the longest prefix every context
    /// shares with its row of the previous call (which must have had as many
    /// rows; otherwise it starts afresh); the rest is recomputed.
    pub fn logits_batch<C: AsRef<[u32]>>(&mut self, contexts: &[C]) -> Result<Vec<Vec<f32>>> {
        let limit = self.model.borrow().config().context;
        let Some(first) = contexts.first() else {
            return invalid_input("no contexts: there is nothing to predict from");
        };
        let len = first.as_ref().len();
        if len == 0 {
            return invalid_input("the context is empty: there is nothing to predict from");
        }
        if let Some(other) = contexts.iter().find(|c| c.as_ref().len() != len) {
            return invalid_input(format!(
                "contexts of {len} and {} tokens in one batch: a batch's contexts have one length",
                other.as_ref().len()
            ));
        }
        if len > limit {
            return invalid_input(format!("the context has {len} tokens, the model at most {limit}"));
        }
        if self.rows.len() != contexts.len() {
            self.reset();
            self.rows = vec![Vec::new(); contexts.len()];
        }
        let common = self
            .rows
            .iter()
            .zip(contexts)
            .map(|(cached, new)| cached.iter().zip(new.as_ref()).take_while(|(c, n)| c == n).count())
            .min()
            .unwrap_or(0);
        // At least the last token is always run, since its output is the answer.
        let reused = common.min(len - 1);
        if reused < self.rows[0].len() {
            for layer in &mut self.cache {
                layer.truncate(reused)?;
            }
            for row in &mut self.rows {
                row.truncate(reused);
            }
        }
        let fresh: Vec<u32> = contexts.iter().flat_map(|c| c.as_ref()[reused..].iter().copied()).collect();
        let time = len - reused;
        let ids = Tensor::from_vec(fresh, (contexts.len(), time), &Device::Cpu)?;
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
        for (row, context) in self.rows.iter_mut().zip(contexts) {
            row.extend_from_slice(&context.as_ref()[reused..]);
        }
        Ok(logits.i((.., time - 1))?.to_vec2::<f32>()?)
    }

    /// Forgets the cached contexts.
    pub fn reset(&mut self) {
        self.rows.clear();
        for layer in &mut self.cache {
            layer.keys_and_values = None;
        }
    }

    /// Does any cached key or value record the ops that made it (for a
    /// backward pass)? It must not: a record would chain every step's
    /// tensors to the next.
    #[cfg(test)]
    pub(crate) fn cache_records_ops(&self) -> bool {
        self.cache.iter().filter_map(|l| l.keys_and_values.as_ref()).any(|(k, v)| k.track_op() || v.track_op())
    }

    /// The tokens currently held in the cache (of the first row).
    pub fn cached_tokens(&self) -> &[u32] {
        self.rows.first().map_or(&[], Vec::as_slice)
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
