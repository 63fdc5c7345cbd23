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
}

/// Loads models by path (the I/O of `strategy=tlm`, which passes do not do).
pub trait TokenModelLoader {
    /// The model saved at `path`; `Err` says why it cannot be read.
    fn load(&self, path: &str) -> Result<Box<dyn TokenModel>, String>;
}
