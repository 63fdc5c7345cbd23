//! Prompts and sentences: the workloads' ops as search problems on a
//! target (one prompt each), uniform sampling of their sentences (the
//! pre-training corpus, §4.3), and demonstration data from measured
//! records (the best sentence per prompt, §5.1).

use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tilec::diag::{Diagnostic, Diagnostics, SourceMap};
use tilec::ir::Module;
use tilec::records::Record;
use tilec::target::Target;
use tilec_passes::search::rng::Rng;
use tilec_passes::search::space::Problem;
use tilec_passes::search::tensor_language::{self, Vocabulary};
use tilec_tlm::Example;

/// One op of one workload on one target: what a prompt asks for.
pub struct Prompt {
    /// `file.tile @func "label"`, for reports.
    pub name: String,
    pub problem: Problem,
}

/// The `.tile` files of `paths`: files as given, folders' files sorted by
/// name. `skip_small` leaves out the `_small` variants of the bench set.
pub fn workload_files(paths: &[PathBuf], skip_small: bool) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("cannot read folder `{}`: {}", p.display(), tilec::input::io_reason(&e)))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "tile"))
                .filter(|f| !skip_small || !f.file_stem().is_some_and(|s| s.to_string_lossy().ends_with("_small")))
                .collect();
            files.sort();
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    if out.is_empty() {
        return Err("no workload files (.tile) in the paths given".into());
    }
    Ok(out)
}

/// The prompts of `files` on `target`: every compute op of every function,
/// with its intrinsic options (the search's default, `intrinsics=auto`),
/// after the passes the default pipeline runs before `search`
/// (`tilec_passes::BEFORE_SEARCH`): the ops `search` tunes there, so the
/// corpus has their axes' tokens (a 1x1 convolution's `oh_ow`) and the
/// demonstrations' records name their workload keys. The module returned
/// is the one after those passes, which `iterate` searches.
pub fn load_prompts(files: &[PathBuf], target: &Arc<Target>, sources: &mut SourceMap) -> Result<Vec<(Module, Vec<Prompt>)>, Diagnostics> {
    let mut out = Vec::new();
    let mut before_search = tilec_passes::before_search(target, sources)?;
    for file in files {
        let id = tilec::input::read_source(sources, &file.to_string_lossy())?;
        let mut module = tilec::syntax::parse(sources, id)?;
        let diags = tilec::verify::verify_module(&module);
        if diags.has_errors() {
            return Err(diags);
        }
        before_search.run(&mut module)?;
        let mut prompts = Vec::new();
        for f in &module.funcs {
            for op in f.walk() {
                let Some(c) = f.ops[op].kind.as_compute() else { continue };
                let Some(p) = Problem::new(f, op, target.clone(), 16) else { continue };
                let short = file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned());
                prompts.push(Prompt { name: format!("{short} @{} \"{}\"", f.name, c.label.as_deref().unwrap_or("compute")), problem: p.with_intrinsics(f) });
            }
        }
        if prompts.is_empty() {
            return Err(Diagnostic::error(format!("`{}` has no compute op", file.display())).into());
        }
        out.push((module, prompts));
    }
    Ok(out)
}

/// `per_prompt` sentences of each problem that fit the target, each drawn
/// by a uniform walk (redrawn while it does not fit, at most 64 times), in
/// parallel; the same `seed` gives the same sentences whatever the threads.
/// Returns per problem its sentences, and the draws that did not fit.
pub fn sample(problems: &[&Problem], per_prompt: usize, seed: u64) -> Vec<(Vec<Vec<String>>, u64)> {
    problems
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            let mut rng = Rng::new(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut sentences = Vec::with_capacity(per_prompt);
            let mut misses = 0;
            while sentences.len() < per_prompt && misses < 64 * per_prompt.max(1) as u64 {
                let (c, words) = tensor_language::sample_sentence(p, &mut rng);
                if p.valid(&c) {
                    sentences.push(words);
                } else {
                    misses += 1;
                }
            }
            (sentences, misses)
        })
        .collect()
}

/// A corpus file: one sentence per line, tokens separated by spaces.
pub fn read_corpus(path: &Path) -> Result<Vec<Vec<String>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read corpus `{}`: {}", path.display(), tilec::input::io_reason(&e)))?;
    Ok(text.lines().filter(|l| !l.trim().is_empty()).map(|l| l.split_whitespace().map(str::to_string).collect()).collect())
}

/// The records of a records file (lines that are not records are skipped,
/// as `apply-records` skips them).
pub fn read_records(path: &Path) -> Result<Vec<Record>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read records `{}`: {}", path.display(), tilec::input::io_reason(&e)))?;
    Ok(tilec::records::parse_records(&bytes).0.into_iter().map(|(_, r)| r).collect())
}

/// One demonstration: a prompt's best measured sentence.
pub struct Demonstration {
    /// The prompt's name ([`Prompt::name`]).
    pub prompt: String,
    pub words: Vec<String>,
    /// Its median latency, seconds.
    pub seconds: f64,
}

/// The demonstration data of `records` for `prompts`: per prompt, the
/// sentence of its fastest successful record (same computation and
/// target: [`tilec::records::best_record`]), written anew from the
/// record's schedule so that records made before the sentence format
/// changed still serve.
pub fn demonstrations<'p>(prompts: impl IntoIterator<Item = &'p Prompt>, records: &[Record]) -> Vec<Demonstration> {
    let mut out = Vec::new();
    for pr in prompts {
        let p = &pr.problem;
        let Some(r) = tilec::records::best_record(records, &p.workload, &p.target.name) else { continue };
        let (Some(c), Some(l)) = (p.config_of(&r.schedule.to_schedule(&p.target.name)), &r.latency) else { continue };
        if let Ok(words) = tensor_language::sentence_of(p, &c) {
            out.push(Demonstration { prompt: pr.name.clone(), words, seconds: l.median_s });
        }
    }
    out
}

/// The supervised examples of demonstrations: the prompt (the sentence up
/// to its first decision) left out of the loss.
pub fn supervised_examples(vocabulary: &Vocabulary, demonstrations: &[Demonstration]) -> Vec<Example> {
    demonstrations
        .iter()
        .map(|d| {
            let ids = vocabulary.encode(&d.words);
            let prompt = tensor_language::prompt_len(&d.words);
            Example::supervised(&ids[..prompt], &ids[prompt..])
        })
        .collect()
}
