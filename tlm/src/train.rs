//! Training: next-token cross-entropy with AdamW, padding and prompt masks,
//! a warmup + cosine learning-rate schedule, seeded shuffling.
//!
//! Batching: examples are shuffled once per epoch with a ChaCha8 stream
//! seeded by [`TrainOptions::seed`] and cut into batches of
//! [`TrainOptions::batch_size`] (the last batch of an epoch may be smaller).
//! Each batch is right-padded with [`TrainOptions::pad_id`] to its longest
//! sequence; because attention is causal, real tokens never see the padding,
//! and padded targets get weight zero in the loss, so the pad id's value does
//! not matter beyond being a valid id.
//!
//! Loss: example `ids` of length n gives the model `ids[..n-1]` as input and
//! scores the targets `ids[t]` for `max(loss_from, 1) <= t < n`. The step
//! loss is the mean over the batch's counted targets (every target token
//! weighs the same, whatever its sequence's length). Sequences longer than
//! `context + 1` tokens are truncated to their first `context + 1` tokens
//! (context inputs and as many targets); nothing after that is seen.
//!
//! Determinism: training is a pure function of the model's initial weights,
//! the examples and the options. Candle's CPU matmul (the gemm crate) splits
//! the output across threads but always sums the inner dimension in the same
//! blocked order, and its other kernels reduce within one thread, so results
//! do not depend on scheduling or even on the thread count (checked: the
//! same weights, bit for bit, with RAYON_NUM_THREADS=1, 2 and 4). Every
//! order-sensitive sum this module makes itself (the global gradient norm)
//! runs over the parameters sorted by name, never in hash-map order.
//! `tests::training_is_bit_for_bit_reproducible` checks byte-identical saved
//! files with matmuls large enough for gemm to use several threads.

use std::time::Instant;

use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor, Var};
use rand::rngs::ChaCha8Rng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::{Result, invalid_input};
use crate::gpt::Gpt;

/// One training sequence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Example {
    /// The token ids.
    pub ids: Vec<u32>,
    /// The first target position whose prediction counts in the loss: the
    /// loss covers predicting `ids[t]` for `t >= loss_from` (and t >= 1, since
    /// `ids[0]` has nothing to be predicted from). Pre-training uses 1;
    /// supervised fine-tuning uses the prompt's length, so that only the
    /// completion is learned.
    pub loss_from: usize,
}

impl Example {
    /// A pre-training example: every next token counts.
    pub fn pretraining(ids: Vec<u32>) -> Example {
        Example { ids, loss_from: 1 }
    }

    /// A supervised example: the model sees `prompt` followed by
    /// `completion` and learns only to produce the completion.
    pub fn supervised(prompt: &[u32], completion: &[u32]) -> Example {
        Example {
            ids: [prompt, completion].concat(),
            loss_from: prompt.len(),
        }
    }

    /// How many targets this example contributes to the loss with a model
    /// of the given context.
    fn counted_targets(&self, context: usize) -> usize {
        let length = self.ids.len().min(context + 1);
        length.saturating_sub(self.loss_from.max(1))
    }
}

/// How to train.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainOptions {
    /// Passes over the examples; fractional values stop part-way through the
    /// last epoch. Ignored when `steps` is set.
    pub epochs: f64,
    /// An exact number of optimiser steps, overriding `epochs`.
    pub steps: Option<usize>,
    /// Sequences per optimiser step.
    pub batch_size: usize,
    /// Peak learning rate, reached at the end of the warmup.
    pub learning_rate: f64,
    /// AdamW's decoupled weight decay, applied to matrices and embeddings
    /// only (not to biases or LayerNorm parameters), as in GPT-2.
    pub weight_decay: f64,
    /// Steps of linear warmup from lr/warmup to lr; after it the rate
    /// follows a cosine down to a tenth of the peak at the last step.
    pub warmup_steps: usize,
    /// Clips the global gradient norm to this value (0 disables clipping).
    pub max_grad_norm: f64,
    /// Seeds the shuffling of examples (the weights' initial values come
    /// from the seed given to [`Gpt::new`]).
    pub seed: u64,
    /// The id used to pad short sequences in a batch; must be in the
    /// vocabulary.
    pub pad_id: u32,
    /// Shows a progress bar on stderr with the running loss and tokens/s.
    pub progress: bool,
    /// Without the bar (a log, not a terminal): this many lines on stderr
    /// over the run, each with the step, the running loss and tokens/s
    /// (0: none).
    pub log_lines: usize,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            epochs: 1.0,
            steps: None,
            batch_size: 16,
            learning_rate: 6e-4,
            weight_decay: 0.1,
            warmup_steps: 100,
            max_grad_norm: 1.0,
            seed: 0,
            pad_id: 0,
            progress: false,
            log_lines: 0,
        }
    }
}

/// What a training run did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    /// Optimiser steps taken.
    pub steps: usize,
    /// Input tokens processed, padding excluded.
    pub tokens: usize,
    /// Wall-clock time of the run.
    pub seconds: f64,
    /// `tokens / seconds`.
    pub tokens_per_second: f64,
    /// The loss of the first step's batch (before any update).
    pub first_loss: f32,
    /// The loss of the last step's batch (before its update).
    pub final_loss: f32,
    /// Each step's batch loss, in order.
    pub losses: Vec<f32>,
}

/// The fraction of the peak learning rate that the cosine decay ends at.
const FINAL_LEARNING_RATE_FRACTION: f64 = 0.1;

/// AdamW's moment decay rates; 0.95 for the second moment as in GPT-2/3.
const ADAM_BETAS: (f64, f64) = (0.9, 0.95);
const ADAM_EPSILON: f64 = 1e-8;

/// Trains `model` in place and reports the per-step losses. Examples with no
/// counted target (shorter than two tokens, or a `loss_from` past their end)
/// are skipped.
pub fn train(model: &mut Gpt, examples: &[Example], options: &TrainOptions) -> Result<TrainReport> {
    let context = model.config().context;
    validate_examples(model, examples, options.pad_id)?;
    if options.batch_size == 0 {
        return invalid_input("batch_size must be positive");
    }
    if !(options.learning_rate.is_finite() && options.learning_rate > 0.0) {
        return invalid_input(format!(
            "learning rate {} must be positive",
            options.learning_rate
        ));
    }
    let usable: Vec<&Example> = examples
        .iter()
        .filter(|example| example.counted_targets(context) > 0)
        .collect();
    if usable.is_empty() {
        return invalid_input(
            "no example has a target to learn (each needs two tokens and loss_from < its length)",
        );
    }
    let batches_per_epoch = usable.len().div_ceil(options.batch_size);
    let total_steps = match options.steps {
        Some(steps) => steps,
        None if options.epochs.is_finite() && options.epochs >= 0.0 => {
            (options.epochs * batches_per_epoch as f64).ceil() as usize
        }
        None => {
            return invalid_input(format!(
                "epochs {} must be a non-negative number",
                options.epochs
            ));
        }
    };
    if total_steps == 0 {
        return invalid_input("nothing to train: the options give zero steps");
    }

    let mut optimizer = AdamW::new(model)?;
    let mut shuffler = ChaCha8Rng::seed_from_u64(options.seed);
    let mut order: Vec<usize> = Vec::new();
    let mut cursor = 0;
    let progress = options.progress.then(|| progress_bar(total_steps));
    let started = Instant::now();
    let mut tokens = 0;
    let mut losses = Vec::with_capacity(total_steps);
    let mut running_loss = None;
    for step in 0..total_steps {
        if cursor >= order.len() {
            order = (0..usable.len()).collect();
            shuffle(&mut order, &mut shuffler);
            cursor = 0;
        }
        let end = (cursor + options.batch_size).min(order.len());
        let batch_examples: Vec<&Example> = order[cursor..end]
            .iter()
            .map(|&index| usable[index])
            .collect();
        cursor = end;
        let batch = Batch::new(&batch_examples, context, options.pad_id)?;
        let loss = (batch.summed_loss(model)? / batch.counted_targets as f64)?;
        let loss_value = loss.to_scalar::<f32>()?;
        let gradients = loss.backward()?;
        optimizer.step(
            &gradients,
            learning_rate_at(step, total_steps, options),
            options,
        )?;
        tokens += batch.input_tokens;
        losses.push(loss_value);
        if let Some(bar) = &progress {
            let running = running_loss.map_or(loss_value, |previous: f32| {
                0.9 * previous + 0.1 * loss_value
            });
            running_loss = Some(running);
            let rate = tokens as f64 / started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("loss {running:.4}  {rate:.0} tok/s"));
            bar.inc(1);
        }
        if progress.is_none() && options.log_lines > 0 {
            let running = running_loss.map_or(loss_value, |previous: f32| 0.9 * previous + 0.1 * loss_value);
            running_loss = Some(running);
            let every = total_steps.div_ceil(options.log_lines).max(1);
            if (step + 1) % every == 0 || step + 1 == total_steps {
                let rate = tokens as f64 / started.elapsed().as_secs_f64().max(1e-9);
                eprintln!("step {}/{total_steps}: loss {running:.4}, {rate:.0} tokens/s", step + 1);
            }
        }
    }
    if let Some(bar) = &progress {
        bar.finish();
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(TrainReport {
        steps: total_steps,
        tokens,
        seconds,
        tokens_per_second: tokens as f64 / seconds.max(1e-9),
        first_loss: losses[0],
        final_loss: losses[losses.len() - 1],
        losses,
    })
}

/// The mean next-token loss of `model` over every counted target of
/// `examples` (each target weighs the same), without changing the model.
pub fn evaluate_loss(model: &Gpt, examples: &[Example], pad_id: u32) -> Result<f32> {
    /// Sequences per forward pass; bounds the memory of the logits.
    const EVALUATION_BATCH: usize = 16;
    let context = model.config().context;
    validate_examples(model, examples, pad_id)?;
    let usable: Vec<&Example> = examples
        .iter()
        .filter(|example| example.counted_targets(context) > 0)
        .collect();
    if usable.is_empty() {
        return invalid_input("no example has a target to score");
    }
    let mut total_loss = 0.0f64;
    let mut total_targets = 0usize;
    for chunk in usable.chunks(EVALUATION_BATCH) {
        let batch = Batch::new(chunk, context, pad_id)?;
        total_loss += f64::from(batch.summed_loss(model)?.detach().to_scalar::<f32>()?);
        total_targets += batch.counted_targets;
    }
    Ok((total_loss / total_targets as f64) as f32)
}

/// Rejects token ids and pad ids outside the vocabulary.
fn validate_examples(model: &Gpt, examples: &[Example], pad_id: u32) -> Result<()> {
    let vocab_size = model.config().vocab_size;
    if pad_id as usize >= vocab_size {
        return invalid_input(format!(
            "pad id {pad_id} is outside the vocabulary of {vocab_size}"
        ));
    }
    for (index, example) in examples.iter().enumerate() {
        if let Some(id) = example.ids.iter().find(|&&id| id as usize >= vocab_size) {
            return invalid_input(format!(
                "example {index} has token id {id}, outside the vocabulary of {vocab_size}"
            ));
        }
    }
    Ok(())
}

/// One padded batch: inputs `(batch, time)`, and per input position the
/// target id and its loss weight (1 counted, 0 padding or prompt), flattened
/// to `batch * time`.
pub(crate) struct Batch {
    pub(crate) inputs: Tensor,
    pub(crate) targets: Tensor,
    pub(crate) weights: Tensor,
    pub(crate) counted_targets: usize,
    input_tokens: usize,
}

impl Batch {
    pub(crate) fn new(examples: &[&Example], context: usize, pad_id: u32) -> Result<Batch> {
        let lengths: Vec<usize> = examples
            .iter()
            .map(|example| example.ids.len().min(context + 1))
            .collect();
        let time = lengths
            .iter()
            .map(|length| length.saturating_sub(1))
            .max()
            .unwrap_or(0);
        if time == 0 {
            return invalid_input("a batch needs a sequence of at least two tokens");
        }
        let size = examples.len() * time;
        let mut inputs = vec![pad_id; size];
        let mut targets = vec![pad_id; size];
        let mut weights = vec![0.0f32; size];
        let mut counted_targets = 0;
        let mut input_tokens = 0;
        for (row, (example, &length)) in examples.iter().zip(&lengths).enumerate() {
            let first_counted = example.loss_from.max(1);
            for position in 0..length.saturating_sub(1) {
                let slot = row * time + position;
                inputs[slot] = example.ids[position];
                targets[slot] = example.ids[position + 1];
                if position + 1 >= first_counted {
                    weights[slot] = 1.0;
                    counted_targets += 1;
                }
                input_tokens += 1;
            }
        }
        Ok(Batch {
            inputs: Tensor::from_vec(inputs, (examples.len(), time), &Device::Cpu)?,
            targets: Tensor::from_vec(targets, size, &Device::Cpu)?,
            weights: Tensor::from_vec(weights, size, &Device::Cpu)?,
            counted_targets,
            input_tokens,
        })
    }

    /// The sum over counted targets of -log p(target), as a scalar tensor
    /// that can be differentiated.
    pub(crate) fn summed_loss(&self, model: &Gpt) -> Result<Tensor> {
        let logits = model.forward(&self.inputs)?;
        let (batch, time, vocab) = logits.dims3()?;
        masked_negative_log_likelihood(
            &logits.reshape((batch * time, vocab))?,
            &self.targets,
            &self.weights,
        )
    }
}

/// Σ weight · -log softmax(logits)[target] over rows: logits `(rows, vocab)`,
/// targets `(rows,)` u32, weights `(rows,)` f32.
pub(crate) fn masked_negative_log_likelihood(
    logits: &Tensor,
    targets: &Tensor,
    weights: &Tensor,
) -> Result<Tensor> {
    let log_probabilities = candle_nn::ops::log_softmax(logits, 1)?;
    let picked = log_probabilities
        .gather(&targets.unsqueeze(1)?, 1)?
        .squeeze(1)?;
    Ok((picked * weights)?.sum_all()?.neg()?)
}

/// The learning rate of step `step` (0-based) of `total`: linear warmup, then
/// cosine decay to [`FINAL_LEARNING_RATE_FRACTION`] of the peak.
fn learning_rate_at(step: usize, total: usize, options: &TrainOptions) -> f64 {
    let peak = options.learning_rate;
    let warmup = options.warmup_steps.min(total);
    if step < warmup {
        return peak * (step + 1) as f64 / warmup as f64;
    }
    let decay_steps = total - warmup;
    if decay_steps <= 1 {
        return peak;
    }
    let progress = (step - warmup) as f64 / (decay_steps - 1) as f64;
    let floor = peak * FINAL_LEARNING_RATE_FRACTION;
    floor + 0.5 * (1.0 + (std::f64::consts::PI * progress).cos()) * (peak - floor)
}

/// Fisher–Yates with the rng's raw output, so that the order depends only on
/// the ChaCha stream and not on a library's sampling algorithm.
fn shuffle(items: &mut [usize], rng: &mut ChaCha8Rng) {
    for index in (1..items.len()).rev() {
        // Multiply-shift maps 64 random bits onto 0..=index; its bias is below
        // 2^-32 for any realistic data set size.
        let other = ((u128::from(rng.next_u64()) * (index as u128 + 1)) >> 64) as usize;
        items.swap(index, other);
    }
}

fn progress_bar(total_steps: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total_steps as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:30} {pos}/{len} steps  {msg}  [{elapsed_precise} < {eta_precise}]",
    ) {
        bar.set_style(style);
    }
    bar
}

/// One parameter's AdamW state.
struct AdamSlot {
    variable: Var,
    first_moment: Tensor,
    second_moment: Tensor,
    decays: bool,
}

/// AdamW (decoupled weight decay) with global gradient-norm clipping. Written
/// here rather than taken from candle-nn because GPT training decays only
/// matrices and embeddings, and because the clipping norm must be summed in
/// a fixed order to stay deterministic.
struct AdamW {
    slots: Vec<AdamSlot>,
    steps_taken: i32,
}

impl AdamW {
    fn new(model: &Gpt) -> Result<AdamW> {
        let slots = model
            .sorted_variables()?
            .into_iter()
            .map(|(_, variable)| {
                let zeros = variable.as_tensor().zeros_like()?.detach();
                Ok(AdamSlot {
                    decays: variable.rank() >= 2,
                    first_moment: zeros.clone(),
                    second_moment: zeros,
                    variable,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AdamW {
            slots,
            steps_taken: 0,
        })
    }

    fn step(
        &mut self,
        gradients: &GradStore,
        learning_rate: f64,
        options: &TrainOptions,
    ) -> Result<()> {
        self.steps_taken += 1;
        // Detached, so that the moments do not keep this step's graph alive.
        let gradients: Vec<Option<Tensor>> = self
            .slots
            .iter()
            .map(|slot| gradients.get(slot.variable.as_tensor()).map(Tensor::detach))
            .collect();
        let mut squared_norm = 0.0f64;
        for gradient in gradients.iter().flatten() {
            squared_norm += f64::from(gradient.sqr()?.sum_all()?.to_scalar::<f32>()?);
        }
        let norm = squared_norm.sqrt();
        let clip = if options.max_grad_norm > 0.0 && norm > options.max_grad_norm {
            options.max_grad_norm / norm
        } else {
            1.0
        };
        let (beta1, beta2) = ADAM_BETAS;
        let first_correction = 1.0 / (1.0 - beta1.powi(self.steps_taken));
        let second_correction = 1.0 / (1.0 - beta2.powi(self.steps_taken));
        for (slot, gradient) in self.slots.iter_mut().zip(gradients) {
            let Some(gradient) = gradient else { continue };
            let gradient = (gradient * clip)?;
            slot.first_moment = ((&slot.first_moment * beta1)? + (&gradient * (1.0 - beta1))?)?;
            slot.second_moment =
                ((&slot.second_moment * beta2)? + (gradient.sqr()? * (1.0 - beta2))?)?;
            let update = ((&slot.first_moment * first_correction)?
                / ((&slot.second_moment * second_correction)?.sqrt()? + ADAM_EPSILON)?)?;
            let weights = slot.variable.as_tensor().detach();
            let decayed = if slot.decays {
                (weights * (1.0 - learning_rate * options.weight_decay))?
            } else {
                weights
            };
            slot.variable.set(&(decayed - (update * learning_rate)?)?)?;
        }
        Ok(())
    }
}
