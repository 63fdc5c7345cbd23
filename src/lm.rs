//! A language model behind traits, for TLM's `search{strategy=tlm}`
//! (seed 002): the core and the passes do not link an ML framework. The
//! driver installs a [`TokenModelLoader`] (the `tilec-tlm` crate's, over
//! candle); the search asks the pass context for the model a `model=PATH`
//! option names, and reads its next-token logits.

/// A causal language model over a fixed vocabulary.
pub trait TokenModel {
    /// The vocabulary, by token id.
    fn vocabulary(&self) -> &[String];

    /// The longest context the model reads.
    fn context_len(&self) -> usize;

    /// The logits of the token after `context` (ids into
    /// [`TokenModel::vocabulary`]), one per vocabulary entry. Calls whose
    /// context extends the previous call's may reuse its work (a key/value
    /// cache), so generating token by token stays linear.
    fn next_token_logits(&mut self, context: &[u32]) -> Result<Vec<f32>, String>;

    /// The logits after each of `contexts`, which all have the same length
    /// (sentences written in lockstep, as `strategy=tlm` writes a batch of
    /// one op's). A model that runs them as one batch (a row per context,
    /// one key/value cache for all) amortises its per-step cost over the
    /// rows; the default asks one context at a time.
    fn next_token_logits_batch(&mut self, contexts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, String> {
        contexts.iter().map(|c| self.next_token_logits(c)).collect()
    }
}

/// Loads models by path (the I/O of `strategy=tlm`, which passes do not do).
pub trait TokenModelLoader {
    /// The model saved at `path`; `Err` says why it cannot be read.
    fn load(&self, path: &str) -> Result<Box<dyn TokenModel>, String>;
}

/// A loader and the models it loaded, by path: what the pass context and
/// the pass manager hand each other, so that the runs of one manager (a
/// tuner's many pipelines) load a model once.
#[derive(Default)]
pub struct LanguageModels {
    loader: Option<Box<dyn TokenModelLoader>>,
    loaded: Vec<(String, Box<dyn TokenModel>)>,
}

impl LanguageModels {
    pub fn new(loader: Box<dyn TokenModelLoader>) -> LanguageModels {
        LanguageModels { loader: Some(loader), loaded: Vec::new() }
    }

    /// The model saved at `path`, loaded once: taken out while a search
    /// uses it and handed back with [`LanguageModels::give_back`]. `Err`
    /// says why there is none.
    pub fn take(&mut self, path: &str) -> Result<Box<dyn TokenModel>, String> {
        if let Some(i) = self.loaded.iter().position(|(p, _)| p == path) {
            return Ok(self.loaded.swap_remove(i).1);
        }
        let loader = self.loader.as_ref().ok_or("this build of tilec has no language-model support (the driver installs it from the tilec-tlm crate)")?;
        loader.load(path)
    }

    /// Keeps a model [`LanguageModels::take`] gave, for the next op.
    pub fn give_back(&mut self, path: &str, model: Box<dyn TokenModel>) {
        self.loaded.push((path.to_string(), model));
    }
}
