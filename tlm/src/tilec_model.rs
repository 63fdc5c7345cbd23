//! The model as tilec's search sees it: a model file that also holds its
//! vocabulary, and [`TlmModel`], the `tilec::lm::TokenModel` that
//! `search{strategy=tlm model=PATH}` reads next-token logits from (loaded
//! through [`TlmLoader`], which the drivers install).

use crate::error::{Result, TlmError};
use crate::generate::Session;
use crate::gpt::Gpt;
use std::path::Path;

/// The safetensors metadata key of the vocabulary (a JSON array of the
/// tokens, by id).
pub const VOCABULARY_METADATA_KEY: &str = "tilec_tlm_vocabulary";

/// Writes `model` and its `vocabulary` (one token per id) as one file.
pub fn save_model(model: &Gpt, vocabulary: &[String], path: &Path) -> Result<()> {
    if vocabulary.len() != model.config().vocab_size {
        return Err(TlmError::InvalidInput(format!("a vocabulary of {} tokens for a model of {}", vocabulary.len(), model.config().vocab_size)));
    }
    let json = serde_json::to_string(vocabulary).map_err(|e| TlmError::InvalidInput(e.to_string()))?;
    model.save_with_metadata(path, &[(VOCABULARY_METADATA_KEY, json)])
}

/// Reads a file [`save_model`] wrote: the model and its vocabulary.
pub fn load_model(path: &Path) -> Result<(Gpt, Vec<String>)> {
    let (model, metadata) = Gpt::load_with_metadata(path)?;
    let format_error = |message: String| TlmError::Format { path: path.to_path_buf(), message };
    let json = metadata.get(VOCABULARY_METADATA_KEY).ok_or_else(|| format_error(format!("the metadata has no {VOCABULARY_METADATA_KEY} entry: not a model `tilec-tlm` wrote")))?;
    let vocabulary: Vec<String> = serde_json::from_str(json).map_err(|e| format_error(format!("malformed vocabulary: {e}")))?;
    if vocabulary.len() != model.config().vocab_size {
        return Err(format_error(format!("a vocabulary of {} tokens for a model of {}", vocabulary.len(), model.config().vocab_size)));
    }
    Ok((model, vocabulary))
}

/// A loaded model with its vocabulary and a key/value cache.
pub struct TlmModel {
    session: Session<Gpt>,
    vocabulary: Vec<String>,
}

impl TlmModel {
    pub fn new(model: Gpt, vocabulary: Vec<String>) -> TlmModel {
        TlmModel { session: Session::new(model), vocabulary }
    }

    pub fn load(path: &Path) -> Result<TlmModel> {
        let (model, vocabulary) = load_model(path)?;
        Ok(TlmModel::new(model, vocabulary))
    }
}

impl tilec::lm::TokenModel for TlmModel {
    fn vocabulary(&self) -> &[String] {
        &self.vocabulary
    }

    fn context_len(&self) -> usize {
        self.session.model().config().context
    }

    fn next_token_logits(&mut self, context: &[u32]) -> std::result::Result<Vec<f32>, String> {
        self.session.logits(context).map_err(|e| e.to_string())
    }

    fn next_token_logits_batch(&mut self, contexts: &[Vec<u32>]) -> std::result::Result<Vec<Vec<f32>>, String> {
        self.session.logits_batch(contexts).map_err(|e| e.to_string())
    }
}

/// Loads [`TlmModel`]s by path (what the drivers install in the pass
/// manager).
pub struct TlmLoader;

impl tilec::lm::TokenModelLoader for TlmLoader {
    fn load(&self, path: &str) -> std::result::Result<Box<dyn tilec::lm::TokenModel>, String> {
        Ok(Box::new(TlmModel::load(Path::new(path)).map_err(|e| e.to_string())?))
    }
}
