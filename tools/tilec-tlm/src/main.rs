//! `tilec-tlm`: TLM (seed 002) for tilec — the pre-training corpus, the
//! tensor language model's training, generation, and the iterative
//! optimisation of §5.3.
//!
//! - `sample`: uniform sentences of every op of the workloads on each
//!   target (Algorithm 1), in parallel; the corpus is one sentence a line.
//! - `pretrain`: a vocabulary from the corpus and a GPT trained on it
//!   (TLM-base), written as one safetensors file.
//! - `sft`: TLM-base fine-tuned on demonstration data, the best measured
//!   sentence per prompt in the records.
//! - `generate`: sentences a model writes for one workload (Algorithm 2;
//!   what `search{strategy=tlm}` runs), with their validity and timing.
//! - `iterate`: §5.3's loop: the prompts in `k_b` batches; per batch,
//!   `k_p` sentences per prompt generated and measured, then TLM-base
//!   fine-tuned on the best sentence per prompt so far, the fine-tuning
//!   overlapping the next batch's measurement.

mod corpus;
mod iterate;

use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use termcolor::{ColorChoice, StandardStream};
use tilec::diag::{Diagnostic, Diagnostics, SourceMap};
use tilec::target::Target;
use tilec_passes::search::rng::Rng;
use tilec_passes::search::tensor_language::{self, Vocabulary};
use tilec_tlm::{Example, Gpt, GptConfig, TrainOptions};

#[derive(Parser, Debug)]
#[command(name = "tilec-tlm", version, about = "TLM for tilec: sample the tensor-language corpus, pre-train and fine-tune the model, generate, iterate")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Size {
    Tiny,
    Small,
    Gpt2Small,
}

#[derive(clap::Args, Debug)]
struct TrainArgs {
    /// Passes over the data (fractions stop part-way).
    #[arg(long, default_value_t = 2.0)]
    epochs: f64,
    /// An exact number of optimiser steps instead of epochs.
    #[arg(long)]
    steps: Option<usize>,
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Peak learning rate (after a linear warm-up; cosine decay to a tenth).
    #[arg(long = "learning-rate", default_value_t = 1e-3)]
    learning_rate: f64,
    #[arg(long = "warmup-steps", default_value_t = 50)]
    warmup_steps: usize,
    /// Seeds the initial weights and the order of the examples.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

impl TrainArgs {
    fn options(&self, pad_id: u32) -> TrainOptions {
        TrainOptions {
            epochs: self.epochs,
            steps: self.steps,
            batch_size: self.batch,
            learning_rate: self.learning_rate,
            warmup_steps: self.warmup_steps,
            seed: self.seed,
            pad_id,
            progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            // In a log: a line every twentieth of the run.
            log_lines: 20,
            ..TrainOptions::default()
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write uniform sentences of every op of the workloads on each target.
    Sample {
        /// Workload files, or folders of them.
        #[arg(required = true)]
        workloads: Vec<PathBuf>,
        /// Targets (built-in names or TOML files); repeat for several.
        #[arg(long = "target", default_values = ["x86-avx2", "x86-avx512"])]
        targets: Vec<String>,
        /// Sentences per prompt (op and target).
        #[arg(long = "per-prompt", default_value_t = 256)]
        per_prompt: usize,
        /// Leave out the `_small` variants of the bench set.
        #[arg(long = "skip-small")]
        skip_small: bool,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The corpus file to write.
        #[arg(short = 'o', long = "out")]
        out: PathBuf,
    },
    /// Pre-train TLM-base on a corpus.
    Pretrain {
        /// The corpus (`tilec-tlm sample`).
        corpus: PathBuf,
        #[arg(long, value_enum, default_value_t = Size::Tiny)]
        size: Size,
        /// Use at most this many sentences of the corpus (its first ones
        /// after a seeded shuffle; 0: all).
        #[arg(long = "max-sentences", default_value_t = 0)]
        max_sentences: usize,
        #[command(flatten)]
        train: TrainArgs,
        /// The model file to write (safetensors: weights, shape, vocabulary).
        #[arg(short = 'o', long = "out")]
        out: PathBuf,
    },
    /// Fine-tune a model on the best measured sentence per prompt.
    Sft {
        /// The model to start from (TLM-base).
        #[arg(long)]
        base: PathBuf,
        /// Records files (`tilec --records`, `tilec-tune --records`).
        #[arg(long = "records", required = true)]
        records: Vec<PathBuf>,
        /// The workloads the records measured (files or folders).
        #[arg(required = true)]
        workloads: Vec<PathBuf>,
        #[arg(long, default_value = "host")]
        target: String,
        #[command(flatten)]
        train: TrainArgs,
        #[arg(short = 'o', long = "out")]
        out: PathBuf,
    },
    /// Write sentences for the ops of one workload with a model.
    Generate {
        #[arg(long)]
        model: PathBuf,
        workload: PathBuf,
        #[arg(long, default_value = "x86-avx2")]
        target: String,
        /// Sentences per op.
        #[arg(short = 'n', default_value_t = 8)]
        count: usize,
        #[arg(long, default_value_t = 1.0)]
        temperature: f64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// §5.3's iterative optimisation: generate, measure, fine-tune, batch by batch.
    Iterate(iterate::IterateArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut sources = SourceMap::new();
    let result = match &cli.command {
        Command::Sample { workloads, targets, per_prompt, skip_small, seed, out } => sample(&mut sources, workloads, targets, *per_prompt, *skip_small, *seed, out),
        Command::Pretrain { corpus, size, max_sentences, train, out } => pretrain(corpus, *size, *max_sentences, train, out),
        Command::Sft { base, records, workloads, target, train, out } => sft(&mut sources, base, records, workloads, target, train, out),
        Command::Generate { model, workload, target, count, temperature, seed } => generate(&mut sources, model, workload, target, *count, *temperature, *seed),
        Command::Iterate(args) => iterate::run(&mut sources, args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(diags) => {
            let color = if std::io::IsTerminal::is_terminal(&std::io::stderr()) { ColorChoice::Auto } else { ColorChoice::Never };
            sources.emit(&mut StandardStream::stderr(color).lock(), &diags.0);
            ExitCode::FAILURE
        }
    }
}

/// An error without a source position.
pub(crate) fn fail(message: impl Into<String>) -> Diagnostics {
    Diagnostic::error(message.into()).into()
}

pub(crate) fn resolve_target(sources: &mut SourceMap, spec: &str) -> Result<Arc<Target>, Diagnostics> {
    let mut set = tilec_codegen::driver::target_set(sources, &[])?;
    set.resolve(sources, spec)
}

fn sample(sources: &mut SourceMap, workloads: &[PathBuf], targets: &[String], per_prompt: usize, skip_small: bool, seed: u64, out: &Path) -> Result<(), Diagnostics> {
    let files = corpus::workload_files(workloads, skip_small).map_err(fail)?;
    let mut loaded = Vec::new();
    for spec in targets {
        let t = resolve_target(sources, spec)?;
        loaded.extend(corpus::load_prompts(&files, &t, sources)?);
    }
    let prompts: Vec<&corpus::Prompt> = loaded.iter().flat_map(|(_, p)| p).collect();
    let problems: Vec<&tilec_passes::search::space::Problem> = prompts.iter().map(|p| &p.problem).collect();
    let start = Instant::now();
    let sampled = corpus::sample(&problems, per_prompt, seed);
    let seconds = start.elapsed().as_secs_f64();
    let mut text = String::new();
    let (mut count, mut misses, mut tokens) = (0usize, 0u64, 0usize);
    for (sentences, missed) in &sampled {
        misses += missed;
        for s in sentences {
            count += 1;
            tokens += s.len();
            text.push_str(&s.join(" "));
            text.push('\n');
        }
    }
    std::fs::write(out, text).map_err(|e| fail(format!("cannot write `{}`: {}", out.display(), tilec::input::io_reason(&e))))?;
    let vocabulary = Vocabulary::from_sentences(sampled.iter().flat_map(|(s, _)| s.iter().map(Vec::as_slice)));
    eprintln!(
        "tilec-tlm sample: {count} sentences of {} prompts ({} files x {} targets) in {seconds:.2} s on {} threads: {:.0} sentences/s; {:.1} tokens per sentence, a vocabulary of {} tokens; {misses} draws did not fit their target",
        prompts.len(),
        files.len(),
        targets.len(),
        rayon::current_num_threads(),
        count as f64 / seconds.max(1e-9),
        tokens as f64 / count.max(1) as f64,
        vocabulary.len()
    );
    Ok(())
}

fn config_of(size: Size, vocab_size: usize) -> GptConfig {
    match size {
        Size::Tiny => GptConfig::tiny(vocab_size),
        Size::Small => GptConfig::small(vocab_size),
        Size::Gpt2Small => GptConfig::gpt2_small(vocab_size),
    }
}

fn pretrain(corpus_path: &Path, size: Size, max_sentences: usize, train: &TrainArgs, out: &Path) -> Result<(), Diagnostics> {
    let mut sentences = corpus::read_corpus(corpus_path).map_err(fail)?;
    if sentences.is_empty() {
        return Err(fail(format!("the corpus `{}` has no sentences", corpus_path.display())));
    }
    if max_sentences > 0 && sentences.len() > max_sentences {
        // A seeded shuffle, so that a smaller run sees every prompt.
        let mut rng = Rng::new(train.seed);
        for i in (1..sentences.len()).rev() {
            sentences.swap(i, rng.below(i + 1));
        }
        sentences.truncate(max_sentences);
    }
    let vocabulary = Vocabulary::from_sentences(sentences.iter().map(Vec::as_slice));
    let config = config_of(size, vocabulary.len());
    let longest = sentences.iter().map(Vec::len).max().unwrap_or(0);
    if longest > config.context {
        return Err(fail(format!("the corpus has a sentence of {longest} tokens, longer than the {size:?} model's context of {}", config.context)));
    }
    let examples: Vec<Example> = sentences.iter().map(|s| Example::pretraining(vocabulary.encode(s))).collect();
    let mut model = Gpt::new(config.clone(), train.seed).map_err(|e| fail(e.to_string()))?;
    eprintln!("tilec-tlm pretrain: {} sentences, vocabulary {}, model {size:?} ({} parameters)", examples.len(), vocabulary.len(), model.parameter_count());
    let report = tilec_tlm::train(&mut model, &examples, &train.options(vocabulary.pad_id())).map_err(|e| fail(e.to_string()))?;
    tilec_tlm::save_model(&model, vocabulary.tokens(), out).map_err(|e| fail(e.to_string()))?;
    eprintln!(
        "tilec-tlm pretrain: {} steps, {} tokens in {:.1} s ({:.0} tokens/s); loss {:.3} -> {:.3}; wrote `{}`",
        report.steps,
        report.tokens,
        report.seconds,
        report.tokens_per_second,
        report.first_loss,
        report.final_loss,
        out.display()
    );
    Ok(())
}

fn sft(sources: &mut SourceMap, base: &Path, records: &[PathBuf], workloads: &[PathBuf], target: &str, train: &TrainArgs, out: &Path) -> Result<(), Diagnostics> {
    let t = resolve_target(sources, target)?;
    let files = corpus::workload_files(workloads, false).map_err(fail)?;
    let loaded = corpus::load_prompts(&files, &t, sources)?;
    let mut all = Vec::new();
    for path in records {
        all.extend(corpus::read_records(path).map_err(fail)?);
    }
    let demos = corpus::demonstrations(loaded.iter().flat_map(|(_, p)| p), &all);
    if demos.is_empty() {
        return Err(fail(format!("the records have no successful measurement of these workloads on `{}`", t.name)));
    }
    let (mut model, tokens) = tilec_tlm::load_model(base).map_err(|e| fail(e.to_string()))?;
    let vocabulary = Vocabulary::from_tokens(tokens).map_err(fail)?;
    let examples = corpus::supervised_examples(&vocabulary, &demos);
    let report = tilec_tlm::train(&mut model, &examples, &train.options(vocabulary.pad_id())).map_err(|e| fail(e.to_string()))?;
    tilec_tlm::save_model(&model, vocabulary.tokens(), out).map_err(|e| fail(e.to_string()))?;
    eprintln!("tilec-tlm sft: {} demonstrations, {} steps in {:.1} s; loss {:.3} -> {:.3}; wrote `{}`", examples.len(), report.steps, report.seconds, report.first_loss, report.final_loss, out.display());
    Ok(())
}

fn generate(sources: &mut SourceMap, model_path: &Path, workload: &Path, target: &str, count: usize, temperature: f64, seed: u64) -> Result<(), Diagnostics> {
    let t = resolve_target(sources, target)?;
    let loaded = corpus::load_prompts(&[workload.to_path_buf()], &t, sources)?;
    let mut model = tilec_tlm::TlmModel::load(model_path).map_err(|e| fail(e.to_string()))?;
    let vocabulary = Vocabulary::from_tokens(tilec::lm::TokenModel::vocabulary(&model).to_vec()).map_err(fail)?;
    let mut rng = Rng::new(seed);
    for prompt in loaded.iter().flat_map(|(_, p)| p) {
        let p = &prompt.problem;
        let start = Instant::now();
        let (mut valid, mut unseen, mut decisions) = (0, 0, 0);
        // In lockstep batches of the pass's size.
        let batch_size = tilec_passes::search::tlm::GENERATION_BATCH;
        let batches = (0..count).step_by(batch_size).map(|from| (count - from).min(batch_size));
        for batch in batches {
            for g in tilec_passes::search::tlm::generate_batch(p, &mut model, &vocabulary, temperature, &mut rng, batch).map_err(fail)? {
                let ok = p.valid(&g.config);
                valid += usize::from(ok);
                unseen += g.unseen;
                decisions += g.decisions;
                debug_assert_eq!(tensor_language::config_of_sentence(p, &g.tokens).as_ref(), Ok(&g.config));
                println!("{} {}", if ok { "valid  " } else { "invalid" }, g.tokens[tensor_language::prompt_len(&g.tokens)..].join(" "));
            }
        }
        eprintln!(
            "tilec-tlm generate: {}: {valid} of {count} fit `{}`; {:.1} ms per sentence; {unseen} of {decisions} decisions outside the vocabulary",
            prompt.name,
            t.name,
            start.elapsed().as_secs_f64() * 1e3 / count.max(1) as f64
        );
    }
    Ok(())
}
