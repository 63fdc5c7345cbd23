//! Tests of the model, training, generation and the file format, on toy
//! models small enough to train in a second or two in a debug build.

use candle_core::{Device, IndexOp, Tensor};
use rand::rngs::ChaCha8Rng;
use rand::{Rng, SeedableRng};

use crate::gpt::parameter_count_from_specs;
use crate::train::{Batch, masked_negative_log_likelihood};
use crate::*;

/// Counting sequences wrap around at this value.
const COUNTING_MODULUS: u32 = 16;

/// A 2-layer, 32-wide model over 20 ids.
fn toy_config() -> GptConfig {
    GptConfig {
        vocab_size: 20,
        context: 16,
        layers: 2,
        heads: 4,
        embedding: 32,
    }
}

/// `a, a+1, …` (mod 16) for every start `a`: each next token is a function
/// of the previous one.
fn counting_examples(length: usize) -> Vec<Example> {
    (0..COUNTING_MODULUS)
        .map(|start| {
            Example::pretraining(
                (0..length as u32)
                    .map(|step| (start + step) % COUNTING_MODULUS)
                    .collect(),
            )
        })
        .collect()
}

fn toy_options(steps: usize) -> TrainOptions {
    TrainOptions {
        steps: Some(steps),
        batch_size: 8,
        learning_rate: 3e-3,
        weight_decay: 0.01,
        warmup_steps: 10,
        seed: 5,
        pad_id: 19,
        ..TrainOptions::default()
    }
}

/// The logits of the last position of a full forward pass over `context`.
fn full_forward_last_logits(model: &Gpt, context: &[u32]) -> Vec<f32> {
    let ids = Tensor::from_slice(context, (1, context.len()), &Device::Cpu).unwrap();
    model
        .forward(&ids)
        .unwrap()
        .i((0, context.len() - 1))
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
}

fn max_difference(left: &[f32], right: &[f32]) -> f32 {
    assert_eq!(left.len(), right.len());
    left.iter()
        .zip(right)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

fn saved_bytes(model: &Gpt) -> Vec<u8> {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("model.safetensors");
    model.save(&path).unwrap();
    std::fs::read(&path).unwrap()
}

#[test]
fn parameter_counts_match_the_configurations() {
    for config in [
        GptConfig::tiny(2000),
        GptConfig::small(2000),
        GptConfig::gpt2_small(50257),
        toy_config(),
    ] {
        assert_eq!(
            config.parameters(),
            parameter_count_from_specs(&config),
            "{config:?}"
        );
    }
    // GPT-2 small's well-known count (tied LM head).
    assert_eq!(GptConfig::gpt2_small(50257).parameters(), 124_439_808);
    let tiny = GptConfig::tiny(2000);
    assert!((1_000_000..2_000_000).contains(&tiny.parameters()));
    assert!((4_000_000..6_000_000).contains(&GptConfig::small(2000).parameters()));
    assert_eq!(
        Gpt::new(tiny.clone(), 1).unwrap().parameter_count(),
        tiny.parameters()
    );
}

#[test]
fn invalid_configurations_are_rejected() {
    let mut config = toy_config();
    config.heads = 3;
    assert!(matches!(
        Gpt::new(config, 0),
        Err(TlmError::InvalidInput(_))
    ));
    let mut config = toy_config();
    config.vocab_size = 0;
    assert!(Gpt::new(config, 0).is_err());
}

#[test]
fn initialisation_depends_only_on_the_seed() {
    let first = saved_bytes(&Gpt::new(toy_config(), 7).unwrap());
    let again = saved_bytes(&Gpt::new(toy_config(), 7).unwrap());
    let other = saved_bytes(&Gpt::new(toy_config(), 8).unwrap());
    assert_eq!(first, again);
    assert_ne!(first, other);
}

#[test]
fn forward_has_the_documented_shape_and_checks_its_input() {
    let model = Gpt::new(toy_config(), 1).unwrap();
    let ids = Tensor::from_vec(vec![1u32, 2, 3, 4, 5, 6], (2, 3), &Device::Cpu).unwrap();
    assert_eq!(model.forward(&ids).unwrap().dims(), &[2, 3, 20]);
    let outside = Tensor::from_vec(vec![1u32, 20], (1, 2), &Device::Cpu).unwrap();
    assert!(matches!(
        model.forward(&outside),
        Err(TlmError::InvalidInput(_))
    ));
    let too_long = Tensor::from_vec(vec![0u32; 17], (1, 17), &Device::Cpu).unwrap();
    assert!(matches!(
        model.forward(&too_long),
        Err(TlmError::InvalidInput(_))
    ));
}

#[test]
fn causal_attention_ignores_later_tokens() {
    let model = Gpt::new(toy_config(), 3).unwrap();
    let prefix = full_forward_last_logits(&model, &[4, 5, 6]);
    let ids = Tensor::from_slice(&[4u32, 5, 6, 9, 1], (1, 5), &Device::Cpu).unwrap();
    let within_longer = model
        .forward(&ids)
        .unwrap()
        .i((0, 2))
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    assert!(max_difference(&prefix, &within_longer) < 1e-5);
}

#[test]
fn a_toy_language_is_learned_and_generated_back() {
    let mut model = Gpt::new(toy_config(), 11).unwrap();
    let examples = counting_examples(12);
    let report = train(&mut model, &examples, &toy_options(250)).unwrap();
    assert_eq!(report.steps, 250);
    assert_eq!(report.losses.len(), 250);
    assert_eq!(report.tokens, 250 * 8 * 11);
    assert!(report.first_loss > 2.5, "first loss {}", report.first_loss);
    let final_loss = evaluate_loss(&model, &examples, 19).unwrap();
    assert!(
        final_loss < 0.05 * report.first_loss,
        "loss {} -> {final_loss}",
        report.first_loss
    );
    for example in &examples {
        let generated = generate_greedy(&model, &example.ids[..1], 11, None).unwrap();
        assert_eq!(generated, example.ids[1..], "from {}", example.ids[0]);
    }
}

#[test]
fn training_is_bit_for_bit_reproducible() {
    // Wide enough (128) that gemm's matmuls reach its multi-threaded sizes.
    let config = GptConfig {
        vocab_size: 64,
        context: 48,
        layers: 1,
        heads: 4,
        embedding: 128,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let examples: Vec<Example> = (0..12)
        .map(|index| {
            Example::pretraining((0..20 + 2 * index).map(|_| rng.next_u32() % 64).collect())
        })
        .collect();
    let options = TrainOptions {
        epochs: 1.5,
        batch_size: 4,
        warmup_steps: 2,
        seed: 9,
        ..TrainOptions::default()
    };
    let run = |options: &TrainOptions| {
        let mut model = Gpt::new(config.clone(), 4).unwrap();
        let report = train(&mut model, &examples, options).unwrap();
        (saved_bytes(&model), report.losses)
    };
    let (first_bytes, first_losses) = run(&options);
    let (second_bytes, second_losses) = run(&options);
    assert_eq!(first_losses.len(), 5, "1.5 epochs of 3 batches");
    assert_eq!(first_losses, second_losses);
    assert!(
        first_bytes == second_bytes,
        "saved weights differ between two identical runs"
    );
    let (reshuffled_bytes, _) = run(&TrainOptions {
        seed: 10,
        ..options
    });
    assert!(
        first_bytes != reshuffled_bytes,
        "the shuffle seed had no effect"
    );
}

#[test]
fn supervised_loss_leaves_the_prompt_out() {
    let model = Gpt::new(toy_config(), 2).unwrap();
    let ids = [3u32, 9, 1, 4, 5, 6];
    let example = Example {
        ids: ids.to_vec(),
        loss_from: 3,
    };
    // By hand: targets ids[3..] predicted from positions 2.. of a full pass.
    let input = Tensor::from_slice(&ids[..5], (1, 5), &Device::Cpu).unwrap();
    let log_probabilities =
        candle_nn::ops::log_softmax(&model.forward(&input).unwrap().i(0).unwrap(), 1)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
    let expected = -(3..6)
        .map(|target| log_probabilities[target - 1][ids[target] as usize])
        .sum::<f32>()
        / 3.0;
    let evaluated = evaluate_loss(&model, std::slice::from_ref(&example), 0).unwrap();
    assert!(
        (evaluated - expected).abs() < 1e-5,
        "{evaluated} vs {expected}"
    );

    // Rewriting the targets of prompt positions (those with weight 0) leaves
    // the loss unchanged.
    let batch = Batch::new(&[&example], 16, 0).unwrap();
    assert_eq!(batch.counted_targets, 3);
    let logits = model.forward(&batch.inputs).unwrap().i(0).unwrap();
    let loss = |targets: &Tensor| {
        masked_negative_log_likelihood(&logits, targets, &batch.weights)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    };
    let mut rewritten = batch.targets.to_vec1::<u32>().unwrap();
    rewritten[0] = 17;
    rewritten[1] = 12;
    let rewritten = Tensor::from_vec(rewritten, 5, &Device::Cpu).unwrap();
    assert_eq!(loss(&batch.targets), loss(&rewritten));
    assert!((loss(&batch.targets) / 3.0 - expected).abs() < 1e-5);
}

#[test]
fn supervised_training_learns_completions_not_prompts() {
    // Prompts are three random tokens then a; the completion is a+1, a+2.
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut random_token = || rng.next_u32() % 20;
    let supervised: Vec<Example> = (0..32)
        .map(|index| {
            let start = index % COUNTING_MODULUS;
            let prompt = [random_token(), random_token(), random_token(), start];
            Example::supervised(
                &prompt,
                &[
                    (start + 1) % COUNTING_MODULUS,
                    (start + 2) % COUNTING_MODULUS,
                ],
            )
        })
        .collect();
    let prompts_only: Vec<Example> = supervised
        .iter()
        .map(|example| Example {
            ids: example.ids[..4].to_vec(),
            loss_from: 1,
        })
        .collect();
    let mut model = Gpt::new(toy_config(), 6).unwrap();
    let before = evaluate_loss(&model, &prompts_only, 0).unwrap();
    train(
        &mut model,
        &supervised,
        &TrainOptions {
            batch_size: 16,
            ..toy_options(150)
        },
    )
    .unwrap();
    let completion_loss = evaluate_loss(&model, &supervised, 0).unwrap();
    let prompt_loss = evaluate_loss(&model, &prompts_only, 0).unwrap();
    assert!(completion_loss < 0.1, "completion loss {completion_loss}");
    // Random prompt tokens cannot be predicted; had they been trained on,
    // their loss would have fallen towards ln(20) ≈ 3.0 or been memorised.
    assert!(
        prompt_loss > 2.5 && prompt_loss > 0.8 * before,
        "prompt loss {before} -> {prompt_loss}"
    );
}

#[test]
fn padding_does_not_change_the_loss() {
    let model = Gpt::new(toy_config(), 12).unwrap();
    let short = Example::pretraining(vec![1, 2, 3]);
    let long = Example::pretraining(vec![7, 8, 9, 10, 11, 12, 13]);
    let short_loss = evaluate_loss(&model, std::slice::from_ref(&short), 5).unwrap();
    let long_loss = evaluate_loss(&model, std::slice::from_ref(&long), 5).unwrap();
    let together = evaluate_loss(&model, &[short, long], 0).unwrap();
    let weighted = (2.0 * short_loss + 6.0 * long_loss) / 8.0;
    assert!(
        (together - weighted).abs() < 1e-5,
        "{together} vs {weighted}"
    );
}

#[test]
fn long_sequences_are_truncated_to_the_context() {
    let model = Gpt::new(toy_config(), 13).unwrap();
    let long: Vec<u32> = (0..40).map(|index| index % 20).collect();
    let whole = evaluate_loss(&model, &[Example::pretraining(long.clone())], 0).unwrap();
    let truncated = evaluate_loss(&model, &[Example::pretraining(long[..17].to_vec())], 0).unwrap();
    assert_eq!(whole, truncated);
    let mut trained = Gpt::new(toy_config(), 13).unwrap();
    train(&mut trained, &[Example::pretraining(long)], &toy_options(2)).unwrap();
}

#[test]
fn training_rejects_bad_input() {
    let mut model = Gpt::new(toy_config(), 1).unwrap();
    let outside = [Example::pretraining(vec![1, 25])];
    assert!(matches!(
        train(&mut model, &outside, &toy_options(1)),
        Err(TlmError::InvalidInput(_))
    ));
    let nothing_to_learn = [
        Example::pretraining(vec![1]),
        Example {
            ids: vec![1, 2],
            loss_from: 2,
        },
    ];
    assert!(train(&mut model, &nothing_to_learn, &toy_options(1)).is_err());
    let good = counting_examples(4);
    assert!(
        train(
            &mut model,
            &good,
            &TrainOptions {
                pad_id: 20,
                ..toy_options(1)
            }
        )
        .is_err()
    );
    assert!(
        train(
            &mut model,
            &good,
            &TrainOptions {
                batch_size: 0,
                ..toy_options(1)
            }
        )
        .is_err()
    );
}

#[test]
fn save_and_load_round_trip() {
    let mut model = Gpt::new(toy_config(), 21).unwrap();
    train(&mut model, &counting_examples(8), &toy_options(3)).unwrap();
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("model.safetensors");
    model.save(&path).unwrap();
    let loaded = Gpt::load(&path).unwrap();
    assert_eq!(loaded.config(), model.config());
    assert_eq!(loaded.parameter_count(), model.parameter_count());
    let ids = Tensor::from_vec(vec![1u32, 2, 3, 4, 9, 8, 7, 6], (2, 4), &Device::Cpu).unwrap();
    let logits = |m: &Gpt| m.forward(&ids).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_eq!(logits(&model), logits(&loaded));
    assert_eq!(saved_bytes(&loaded), std::fs::read(&path).unwrap());
}

#[test]
fn loading_a_missing_or_malformed_file_is_an_error() {
    let directory = tempfile::tempdir().unwrap();
    let missing = directory.path().join("absent.safetensors");
    let error = Gpt::load(&missing)
        .err()
        .expect("a missing file must not load");
    assert!(matches!(error, TlmError::Io { .. }));
    assert!(error.to_string().contains("absent.safetensors"), "{error}");

    let garbage = directory.path().join("garbage.safetensors");
    std::fs::write(&garbage, b"this is not a safetensors file at all").unwrap();
    assert!(matches!(Gpt::load(&garbage), Err(TlmError::Format { .. })));

    // Valid safetensors, but without the configuration.
    let bare = directory.path().join("bare.safetensors");
    let tensors = std::collections::HashMap::from([(
        "x",
        Tensor::zeros(3, candle_core::DType::F32, &Device::Cpu).unwrap(),
    )]);
    candle_core::safetensors::save(&tensors, &bare).unwrap();
    let error = Gpt::load(&bare)
        .err()
        .expect("a file without configuration must not load");
    assert!(error.to_string().contains(CONFIG_METADATA_KEY), "{error}");

    // The configuration does not match the tensors.
    let model = Gpt::new(toy_config(), 1).unwrap();
    let mismatched = directory.path().join("mismatched.safetensors");
    let mut config = toy_config();
    config.embedding = 64;
    let config_json = serde_json::to_string(&config).unwrap();
    let metadata =
        std::collections::HashMap::from([(CONFIG_METADATA_KEY.to_string(), config_json)]);
    let variables = model.sorted_variables().unwrap();
    let named: Vec<(&str, &Tensor)> = variables
        .iter()
        .map(|(name, var)| (name.as_str(), var.as_tensor()))
        .collect();
    safetensors::tensor::serialize_to_file(named, Some(metadata), &mismatched).unwrap();
    assert!(matches!(
        Gpt::load(&mismatched),
        Err(TlmError::Format { .. })
    ));
}

#[test]
fn cached_logits_equal_full_forward_logits() {
    let model = Gpt::new(toy_config(), 31).unwrap();
    let context: Vec<u32> = vec![3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3];
    let mut session = Session::new(&model);
    // Token by token, as in generation.
    for length in 1..=context.len() {
        let cached = session.logits(&context[..length]).unwrap();
        assert!(
            max_difference(
                &cached,
                &full_forward_last_logits(&model, &context[..length])
            ) < 1e-4
        );
        assert_eq!(session.cached_tokens(), &context[..length]);
    }
    // The same context again, a shorter one, a diverging one, and a jump of
    // several tokens.
    let mut probes: Vec<Vec<u32>> = vec![context.clone(), context[..7].to_vec()];
    probes.push([&context[..5], &[0, 0, 1]].concat());
    probes.push([&context[..5], &[0, 0, 1, 2, 3, 4, 5]].concat());
    probes.push(vec![19, 18]);
    for probe in &probes {
        let cached = session.logits(probe).unwrap();
        assert!(
            max_difference(&cached, &full_forward_last_logits(&model, probe)) < 1e-4,
            "{probe:?}"
        );
        assert_eq!(session.cached_tokens(), probe.as_slice());
    }
    assert!(session.logits(&[0; 17]).is_err());
    assert!(session.logits(&[]).is_err());
    assert!(session.logits(&[1, 20]).is_err());
    // An error leaves the session usable.
    let cached = session.logits(&context[..3]).unwrap();
    assert!(max_difference(&cached, &full_forward_last_logits(&model, &context[..3])) < 1e-4);
}

/// A batch of contexts of one length gives each row the logits that row
/// alone gives, growing in lockstep, after a divergence in one row, and
/// with a different number of rows; contexts of different lengths are an
/// error.
#[test]
fn batched_logits_equal_each_rows_own() {
    let model = Gpt::new(toy_config(), 32).unwrap();
    let rows: Vec<Vec<u32>> = vec![
        vec![3, 1, 4, 1, 5, 9, 2, 6, 5, 3],
        vec![3, 1, 4, 1, 5, 8, 9, 7, 9, 3],
        vec![2, 7, 1, 8, 2, 8, 1, 8, 2, 8],
    ];
    let mut session = Session::new(&model);
    let check = |session: &mut Session<&Gpt>, contexts: &[Vec<u32>]| {
        let batched = session.logits_batch(contexts).unwrap();
        assert_eq!(batched.len(), contexts.len());
        for (logits, context) in batched.iter().zip(contexts) {
            assert!(max_difference(logits, &full_forward_last_logits(&model, context)) < 1e-4, "{context:?}");
        }
    };
    for length in [4, 5, 6, 9, 10] {
        let contexts: Vec<Vec<u32>> = rows.iter().map(|r| r[..length].to_vec()).collect();
        check(&mut session, &contexts);
    }
    // One row diverges at position 2: the cache is cut back for all.
    let mut diverged: Vec<Vec<u32>> = rows.clone();
    diverged[1][2] = 0;
    check(&mut session, &diverged);
    // The cache holds values, not the record of the ops that made them
    // (the weights are training variables).
    assert!(!session.cache_records_ops());
    // Two rows, then one: the cache starts afresh.
    check(&mut session, &rows[..2]);
    check(&mut session, &rows[2..]);
    assert_eq!(session.cached_tokens(), rows[2].as_slice());
    let uneven = [rows[0].clone(), rows[1][..4].to_vec()];
    let e = session.logits_batch(&uneven).unwrap_err().to_string();
    assert!(e.contains("a batch's contexts have one length"), "{e}");
    assert!(session.logits_batch::<Vec<u32>>(&[]).is_err());
}

#[test]
fn sampling_at_temperature_zero_is_argmax_with_ties_to_the_lowest_id() {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let logits = [1.0, 5.0, 5.0, 2.0, 9.0];
    assert_eq!(sample(&logits, &[3, 2, 1], 0.0, &mut rng).unwrap(), 1);
    assert_eq!(sample(&logits, &[0, 3], 0.0, &mut rng).unwrap(), 3);
    assert_eq!(sample(&logits, &[4, 0], 0.0, &mut rng).unwrap(), 4);
    assert_eq!(sample(&[f32::NAN, 0.0], &[0, 1], 0.0, &mut rng).unwrap(), 1);
    assert_eq!(
        sample(&[f32::NEG_INFINITY; 3], &[2, 1], 1.0, &mut rng).unwrap(),
        1
    );
}

#[test]
fn sampling_draws_only_allowed_ids_with_softmax_frequencies() {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    // Id 0 dominates but is not allowed.
    let logits = [50.0, 0.0, 3f32.ln(), -1.0];
    let draws = 8000;
    let mut counts = [0usize; 4];
    for _ in 0..draws {
        counts[sample(&logits, &[1, 2], 1.0, &mut rng).unwrap() as usize] += 1;
    }
    assert_eq!(counts[0] + counts[3], 0);
    let share = counts[2] as f64 / draws as f64;
    assert!(
        (share - 0.75).abs() < 0.025,
        "id 2 drawn {share} of the time, expected 0.75"
    );
    // A high temperature flattens the distribution towards uniform.
    let mut counts = [0usize; 4];
    for _ in 0..draws {
        counts[sample(&logits, &[1, 2], 1000.0, &mut rng).unwrap() as usize] += 1;
    }
    let share = counts[2] as f64 / draws as f64;
    assert!(
        (share - 0.5).abs() < 0.025,
        "id 2 drawn {share} of the time at temperature 1000"
    );
}

#[test]
fn sampling_rejects_impossible_requests() {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    assert!(sample(&[1.0, 2.0], &[], 1.0, &mut rng).is_err());
    assert!(sample(&[1.0, 2.0], &[2], 0.0, &mut rng).is_err());
}

/// Training throughput of `GptConfig::tiny(2000)` on full-context batches:
/// `cargo test -p tilec-tlm --release -- --ignored --nocapture throughput`.
#[test]
#[ignore = "benchmark; run explicitly"]
fn throughput_of_tiny_training() {
    let config = GptConfig::tiny(2000);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let examples: Vec<Example> = (0..64)
        .map(|_| {
            Example::pretraining(
                (0..=config.context)
                    .map(|_| rng.next_u32() % 2000)
                    .collect(),
            )
        })
        .collect();
    let mut model = Gpt::new(config.clone(), 0).unwrap();
    let options = TrainOptions {
        steps: Some(12),
        batch_size: 8,
        warmup_steps: 2,
        progress: true,
        ..TrainOptions::default()
    };
    let report = train(&mut model, &examples, &options).unwrap();
    println!(
        "tiny(2000): {} parameters, {} steps of 8 x {} tokens, {:.1} s, {:.0} tokens/s, loss {:.3} -> {:.3}",
        model.parameter_count(),
        report.steps,
        config.context,
        report.seconds,
        report.tokens_per_second,
        report.first_loss,
        report.final_loss
    );
}
