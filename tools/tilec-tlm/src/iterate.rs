//! `tilec-tlm iterate`: the iterative optimisation of §5.3 (Fig. 8).
//!
//! The prompts (one per workload file here: the bench set has one op a
//! file) are sorted by subgraph type and dealt into `k_b` batches, one
//! every `k_b`, so each batch has every type. Step `s` takes batch
//! `s mod k_b`: the model TLM_s writes `k_p` distinct valid sentences per
//! prompt (`search{strategy=tlm}`), all measured (records appended as
//! they are made). Then the demonstration data — the best measured
//! sentence of every prompt so far, and of any `--seed-records` —
//! fine-tunes TLM-base into TLM_{s+2} (TLM_0 = TLM_1 = TLM-base). The
//! fine-tuning runs on a thread while batch `s+1` is measured with
//! TLM_{s+1}, so measurement, the slow part, never waits for it; the paper
//! puts the two on separate GPUs, and on one CPU they share the cores
//! (`--no-overlap` runs them one after the other, for clean timings).

use crate::corpus::{self, Prompt};
use crate::{TrainArgs, fail, resolve_target};
use serde_json::json;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Instant;
use tilec::diag::{Diagnostics, SourceMap};
use tilec::ir::Module;
use tilec::pass::{PassManager, parse_pipeline};
use tilec::records::RecordsFile;
use tilec_passes::search::tensor_language::Vocabulary;

#[derive(clap::Args, Debug)]
pub struct IterateArgs {
    /// TLM-base (`tilec-tlm pretrain`).
    #[arg(long)]
    base: PathBuf,
    /// Workload files, or folders of them: the prompts.
    #[arg(required = true)]
    workloads: Vec<PathBuf>,
    /// Leave out the `_small` variants of the bench set.
    #[arg(long = "skip-small")]
    skip_small: bool,
    #[arg(long, default_value = "host")]
    target: String,
    /// k_b: the batches the prompts are dealt into.
    #[arg(long, default_value_t = 4)]
    batches: usize,
    /// k_p: sentences generated and measured per prompt and step.
    #[arg(long = "per-prompt", default_value_t = 16)]
    per_prompt: usize,
    /// Passes over all the batches.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Sampling temperature of generation.
    #[arg(long, default_value_t = 1.0)]
    temperature: f64,
    /// Threads each candidate runs on (0: every core).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Records appended as measurements are made; read first, so a rerun
    /// resumes with their demonstrations.
    #[arg(long)]
    records: PathBuf,
    /// Records of other strategies whose best sentences seed the
    /// demonstration data.
    #[arg(long = "seed-records")]
    seed_records: Vec<PathBuf>,
    /// Where the fine-tuned models and `report.json` go.
    #[arg(long = "out-dir")]
    out_dir: PathBuf,
    /// Fine-tune after each batch's measurement instead of during the next.
    #[arg(long = "no-overlap")]
    no_overlap: bool,
    #[command(flatten)]
    train: TrainArgs,
}

/// The subgraph type a prompt is sorted by: its op, combiner, body and
/// axis kinds (the prompt's first words, without extents).
fn subgraph_type(p: &Prompt) -> String {
    let pr = &p.problem;
    let axes: String = pr.axes.iter().map(|a| if a.spatial { 's' } else { 'r' }).collect();
    format!("{} {:?} {:?} {axes}", pr.compute.label.as_deref().unwrap_or("compute"), pr.compute.combiner, pr.region_ops)
}

/// A fine-tuning on its thread: the step whose model it makes, and the
/// model file it writes.
struct Finetune {
    step: usize,
    out: PathBuf,
    handle: JoinHandle<Result<(usize, f64, f32), String>>,
}

impl Finetune {
    /// Waits for the model; says what the fine-tuning did.
    fn finish(self) -> Result<PathBuf, Diagnostics> {
        let (n, secs, loss) = self.handle.join().map_err(|_| fail("the fine-tuning thread panicked"))?.map_err(fail)?;
        eprintln!("tilec-tlm iterate: TLM_{} fine-tuned on {n} demonstrations in {secs:.1} s (final loss {loss:.3})", self.step);
        Ok(self.out)
    }
}

pub fn run(sources: &mut SourceMap, args: &IterateArgs) -> Result<(), Diagnostics> {
    if args.batches == 0 || args.per_prompt == 0 || args.rounds == 0 {
        return Err(fail("--batches, --per-prompt and --rounds must be at least 1"));
    }
    let target = resolve_target(sources, &args.target)?;
    let files = corpus::workload_files(&args.workloads, args.skip_small).map_err(fail)?;
    let loaded: Vec<(Module, Vec<Prompt>)> = corpus::load_prompts(&files, &target, sources)?;
    std::fs::create_dir_all(&args.out_dir).map_err(|e| fail(format!("cannot create `{}`: {}", args.out_dir.display(), tilec::input::io_reason(&e))))?;
    // Sorted by type, dealt one every k_b.
    let mut order: Vec<usize> = (0..loaded.len()).collect();
    order.sort_by_key(|&i| (subgraph_type(&loaded[i].1[0]), i));
    let batches: Vec<Vec<usize>> = (0..args.batches).map(|b| order.iter().copied().skip(b).step_by(args.batches).collect()).collect();
    let (_, base_tokens) = tilec_tlm::load_model(&args.base).map_err(|e| fail(e.to_string()))?;
    let vocabulary = Vocabulary::from_tokens(base_tokens).map_err(fail)?;
    let sink = RecordsFile::open(&args.records).map_err(|e| fail(format!("cannot open the records file `{}`: {}", args.records.display(), tilec::input::io_reason(&e))))?;
    // What the demonstrations come from: the records file's, the seed
    // records, then each step's measurements.
    let mut records = corpus::read_records(&args.records).map_err(fail)?;
    for p in &args.seed_records {
        records.extend(corpus::read_records(p).map_err(fail)?);
    }
    let registry = tilec_codegen::registry();
    let steps = args.rounds * args.batches;
    // The fine-tuned models by the step they are for (TLM_{s+2}); a step
    // without one generates with TLM-base.
    let mut tuned: BTreeMap<usize, PathBuf> = BTreeMap::new();
    // Fine-tunings on their threads, in step order (those for s+1 and s+2
    // can run at once).
    let mut running: VecDeque<Finetune> = VecDeque::new();
    let mut log = Vec::new();
    let started = Instant::now();
    let (mut measure_seconds, mut wait_seconds) = (0.0, 0.0);
    for s in 0..steps {
        // TLM_s: wait for its fine-tuning if it is still running.
        if running.front().is_some_and(|ft| ft.step == s) {
            let wait = Instant::now();
            let ft = running.pop_front().expect("a fine-tuning for this step");
            tuned.insert(s, ft.finish()?);
            wait_seconds += wait.elapsed().as_secs_f64();
        }
        let model = tuned.remove(&s).unwrap_or_else(|| args.base.clone());
        let batch = &batches[s % args.batches];
        let t0 = Instant::now();
        let seed = args.train.seed.wrapping_add(s as u64);
        let text = format!(
            "builtin.module(search{{strategy=tlm model=\"{}\" k={} measure-top-k={} lm-temperature={} seed={seed} final-rounds=0}})",
            model.display(),
            args.per_prompt,
            args.per_prompt,
            args.temperature
        );
        let file = sources.add("<iterate pipeline>", text.clone());
        let pipeline = parse_pipeline(&text, file, &registry)?;
        let mut pm = PassManager::new(pipeline);
        pm.set_target(target.clone());
        match tilec_codegen::evaluator::cpu_evaluator(&target, args.threads) {
            Ok(e) => pm.set_evaluator(Box::new(e)),
            Err(why) => return Err(fail(format!("iterate measures, and cannot here: {why}"))),
        }
        pm.set_model_loader(Box::new(tilec_tlm::TlmLoader));
        pm.set_record_sink(Box::new(sink.clone()));
        let mut made = 0;
        for &w in batch {
            let mut m = loaded[w].0.clone();
            let report = pm.run(&mut m)?;
            made += report.records.len();
            records.extend(report.records);
        }
        let secs = t0.elapsed().as_secs_f64();
        measure_seconds += secs;
        // The demonstrations so far: every prompt's best sentence.
        let demos = corpus::demonstrations(loaded.iter().flat_map(|(_, p)| p), &records);
        let total: f64 = demos.iter().map(|d| d.seconds).sum();
        eprintln!("tilec-tlm iterate: step {s}: batch {} ({} prompts) with `{}`: {made} measurements in {secs:.1} s; {} prompts have a demonstration, their best latencies sum to {:.4} ms", s % args.batches, batch.len(), model.display(), demos.len(), total * 1e3);
        log.push(json!({"step": s, "batch": s % args.batches, "model": model.display().to_string(), "measurements": made, "seconds": secs, "elapsed_s": started.elapsed().as_secs_f64(),
            "demonstrations": demos.len(), "best_sum_s": total, "best": demos.iter().map(|d| json!({"prompt": d.prompt, "latency_s": d.seconds})).collect::<Vec<_>>()}));
        // TLM_{s+2} from TLM-base and the demonstrations.
        if s + 2 < steps && !demos.is_empty() {
            let out = args.out_dir.join(format!("tlm-{}.safetensors", s + 2));
            let examples = corpus::supervised_examples(&vocabulary, &demos);
            let options = args.train.options(vocabulary.pad_id());
            let (base, dest) = (args.base.clone(), out.clone());
            let handle = std::thread::spawn(move || -> Result<(usize, f64, f32), String> {
                let (mut model, tokens) = tilec_tlm::load_model(&base).map_err(|e| e.to_string())?;
                let report = tilec_tlm::train(&mut model, &examples, &options).map_err(|e| e.to_string())?;
                tilec_tlm::save_model(&model, &tokens, &dest).map_err(|e| e.to_string())?;
                Ok((examples.len(), report.seconds, report.final_loss))
            });
            let ft = Finetune { step: s + 2, out, handle };
            if args.no_overlap {
                let wait = Instant::now();
                tuned.insert(s + 2, ft.finish()?);
                wait_seconds += wait.elapsed().as_secs_f64();
            } else {
                running.push_back(ft);
            }
        }
    }
    let report = json!({
        "machine": tilec::target::host::machine_description(),
        "target": target.name,
        "batches": args.batches, "per_prompt": args.per_prompt, "rounds": args.rounds, "overlap": !args.no_overlap,
        "prompts": loaded.len(),
        "seconds": started.elapsed().as_secs_f64(), "measure_seconds": measure_seconds, "waiting_for_sft_seconds": wait_seconds,
        "steps": log,
    });
    let path = args.out_dir.join("report.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report).expect("json")).map_err(|e| fail(format!("cannot write `{}`: {}", path.display(), tilec::input::io_reason(&e))))?;
    eprintln!("tilec-tlm iterate: {steps} steps in {:.1} s ({measure_seconds:.1} s measuring, {wait_seconds:.1} s waiting for fine-tuning); wrote `{}`", started.elapsed().as_secs_f64(), path.display());
    Ok(())
}
