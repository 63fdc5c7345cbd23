//! The GPT-2 style model: configuration, deterministic initialisation, the
//! forward pass (full and key/value-cached) and the safetensors file format.
//!
//! Architecture (GPT-2): token embedding + learned position embedding, then
//! `layers` pre-LayerNorm blocks, each `x + attention(ln_1(x))` followed by
//! `x + mlp(ln_2(x))` with causal multi-head self-attention and a 4x-wide
//! GELU (tanh approximation) MLP, then a final LayerNorm. The LM head is
//! *tied* to the token embedding (logits = h · wteᵀ), as in GPT-2, so it has
//! no parameters of its own. There is no dropout: the models are small and
//! the data sets are generated, and dropout would need a second RNG stream to
//! stay deterministic.
//!
//! Parameter names follow GPT-2's (`wte.weight`, `h.0.attn.c_attn.weight`,
//! …) but linear weights are stored candle-style as `(out, in)`, not as
//! GPT-2's transposed `Conv1D` `(in, out)`.
//!
//! File format: one safetensors file with every parameter as an f32 tensor
//! and the [`GptConfig`] as JSON under the metadata key
//! [`CONFIG_METADATA_KEY`]. The file is byte-for-byte a function of the
//! weights and the configuration (safetensors sorts the tensors by name, and
//! there is a single metadata key, so no hash-map order leaks in).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use candle_core::{D, DType, Device, Tensor, Var};
use candle_nn::{Module, VarMap};
use rand::rngs::ChaCha8Rng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::{Result, TlmError, invalid_input};

/// The safetensors metadata key under which [`Gpt::save`] stores the
/// configuration as JSON.
pub const CONFIG_METADATA_KEY: &str = "tilec_tlm_config";

/// LayerNorm epsilon, as in GPT-2.
const LAYER_NORM_EPSILON: f64 = 1e-5;

/// Standard deviation of the initial weights, as in GPT-2.
const INITIAL_WEIGHT_STD: f64 = 0.02;

/// The shape of a model.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GptConfig {
    /// Number of distinct token ids; ids are `0..vocab_size`.
    pub vocab_size: usize,
    /// Maximum sequence length the model attends over (GPT-2's block size).
    pub context: usize,
    /// Number of transformer blocks.
    pub layers: usize,
    /// Attention heads per block; must divide `embedding`.
    pub heads: usize,
    /// Width of the residual stream.
    pub embedding: usize,
}

impl GptConfig {
    /// About 1.1 M parameters with a vocabulary of 2000: 4 layers, 4 heads,
    /// 128 wide, context 256. Trains at about 1,100 tokens/s on two CPU
    /// cores (full 256-token batches of 8).
    pub fn tiny(vocab_size: usize) -> GptConfig {
        GptConfig {
            vocab_size,
            context: 256,
            layers: 4,
            heads: 4,
            embedding: 128,
        }
    }

    /// About 5.4 M parameters with a vocabulary of 2000: 6 layers, 8 heads,
    /// 256 wide, context 512.
    pub fn small(vocab_size: usize) -> GptConfig {
        GptConfig {
            vocab_size,
            context: 512,
            layers: 6,
            heads: 8,
            embedding: 256,
        }
    }

    /// GPT-2 small: 12 layers, 12 heads, 768 wide, context 1024 (124 M
    /// parameters with GPT-2's vocabulary of 50257). Meant for GPU training.
    pub fn gpt2_small(vocab_size: usize) -> GptConfig {
        GptConfig {
            vocab_size,
            context: 1024,
            layers: 12,
            heads: 12,
            embedding: 768,
        }
    }

    /// The number of parameters a model of this shape has (the LM head is
    /// tied to the token embedding and so adds none).
    pub fn parameters(&self) -> usize {
        let width = self.embedding;
        let embeddings = (self.vocab_size + self.context) * width;
        // ln_1 and ln_2 (gain + bias each), c_attn (3w x w + 3w), attention
        // c_proj (w x w + w), mlp c_fc (4w x w + 4w), mlp c_proj (w x 4w + w).
        let per_block = 12 * width * width + 13 * width;
        let final_norm = 2 * width;
        embeddings + self.layers * per_block + final_norm
    }

    /// The width of one attention head.
    pub fn head_size(&self) -> usize {
        self.embedding / self.heads.max(1)
    }

    /// Checks that the shape is usable.
    pub fn validate(&self) -> Result<()> {
        if self.vocab_size == 0 || self.context == 0 || self.heads == 0 || self.embedding == 0 {
            return invalid_input(format!(
                "model configuration {self:?}: vocab_size, context, heads and embedding must be positive"
            ));
        }
        if !self.embedding.is_multiple_of(self.heads) {
            return invalid_input(format!(
                "model configuration {self:?}: embedding ({}) must be a multiple of heads ({})",
                self.embedding, self.heads
            ));
        }
        if u32::try_from(self.vocab_size).is_err() {
            return invalid_input(format!(
                "vocab_size {} does not fit token ids (u32)",
                self.vocab_size
            ));
        }
        Ok(())
    }
}

/// How a parameter starts out.
#[derive(Clone, Copy, Debug)]
enum Initial {
    Normal { std: f64 },
    Zeros,
    Ones,
}

/// One named parameter of the model.
#[derive(Clone, Debug)]
struct ParameterSpec {
    name: String,
    shape: Vec<usize>,
    initial: Initial,
}

/// Every parameter of a model of this shape, in a fixed order (the order in
/// which [`Gpt::new`] draws their initial values).
fn parameter_specs(config: &GptConfig) -> Vec<ParameterSpec> {
    let width = config.embedding;
    // GPT-2 scales the projections that write into the residual stream by
    // 1/sqrt(2 * layers) so that the stream's variance does not grow with
    // depth.
    let residual_std = INITIAL_WEIGHT_STD / ((2 * config.layers.max(1)) as f64).sqrt();
    let normal = Initial::Normal {
        std: INITIAL_WEIGHT_STD,
    };
    let residual = Initial::Normal { std: residual_std };
    let spec = |name: String, shape: &[usize], initial| ParameterSpec {
        name,
        shape: shape.to_vec(),
        initial,
    };
    let mut specs = vec![
        spec("wte.weight".into(), &[config.vocab_size, width], normal),
        spec("wpe.weight".into(), &[config.context, width], normal),
    ];
    // A linear layer's weight (out, in) and bias; a LayerNorm's gain and bias.
    let linear = |name: String, out: usize, input: usize, initial| {
        [spec(format!("{name}.weight"), &[out, input], initial), spec(format!("{name}.bias"), &[out], Initial::Zeros)]
    };
    let norm = |name: String| [spec(format!("{name}.weight"), &[width], Initial::Ones), spec(format!("{name}.bias"), &[width], Initial::Zeros)];
    for layer in 0..config.layers {
        let prefix = format!("h.{layer}");
        specs.extend(norm(format!("{prefix}.ln_1")));
        specs.extend(linear(format!("{prefix}.attn.c_attn"), 3 * width, width, normal));
        specs.extend(linear(format!("{prefix}.attn.c_proj"), width, width, residual));
        specs.extend(norm(format!("{prefix}.ln_2")));
        specs.extend(linear(format!("{prefix}.mlp.c_fc"), 4 * width, width, normal));
        specs.extend(linear(format!("{prefix}.mlp.c_proj"), width, 4 * width, residual));
    }
    specs.extend(norm("ln_f".into()));
    specs
}

/// Draws `count` samples of N(0, std²) with the Box–Muller transform. Written
/// out here rather than taken from a distribution crate so that the values
/// depend only on the ChaCha stream, not on a library's sampling algorithm.
fn normal_samples(rng: &mut ChaCha8Rng, count: usize, std: f64) -> Vec<f32> {
    let mut samples = Vec::with_capacity(count + 1);
    while samples.len() < count {
        // 53 random bits give a uniform in [0, 1); 1 - u is in (0, 1], so the
        // logarithm is finite.
        let uniform =
            |rng: &mut ChaCha8Rng| (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let radius = (-2.0 * (1.0 - uniform(rng)).ln()).sqrt() * std;
        let angle = 2.0 * std::f64::consts::PI * uniform(rng);
        samples.push((radius * angle.cos()) as f32);
        samples.push((radius * angle.sin()) as f32);
    }
    samples.truncate(count);
    samples
}

/// A LayerNorm's gain and bias.
struct Norm {
    gain: Tensor,
    bias: Tensor,
}

impl Norm {
    fn forward(&self, input: &Tensor) -> Result<Tensor> {
        // The "slow" LayerNorm is made of differentiable tensor ops; candle's
        // fused kernel has no backward pass.
        Ok(candle_nn::ops::layer_norm_slow(
            input,
            &self.gain,
            &self.bias,
            LAYER_NORM_EPSILON as f32,
        )?)
    }
}

/// One transformer block's weights.
struct Block {
    attention_norm: Norm,
    query_key_value: candle_nn::Linear,
    attention_output: candle_nn::Linear,
    mlp_norm: Norm,
    mlp_up: candle_nn::Linear,
    mlp_down: candle_nn::Linear,
}

/// The keys and values one block has computed for the tokens seen so far, each
/// `(batch, heads, tokens, head_size)`.
#[derive(Clone, Default)]
pub(crate) struct LayerCache {
    pub(crate) keys_and_values: Option<(Tensor, Tensor)>,
}

impl LayerCache {
    /// Keeps only the first `tokens` positions.
    pub(crate) fn truncate(&mut self, tokens: usize) -> Result<()> {
        if tokens == 0 {
            self.keys_and_values = None;
        } else if let Some((keys, values)) = &self.keys_and_values
            && keys.dim(2)? > tokens
        {
            self.keys_and_values = Some((keys.narrow(2, 0, tokens)?, values.narrow(2, 0, tokens)?));
        }
        Ok(())
    }
}

/// A GPT-2 style causal language model whose weights live in a
/// [`candle_nn::VarMap`] on the CPU.
pub struct Gpt {
    config: GptConfig,
    variables: VarMap,
    token_embedding: Tensor,
    position_embedding: Tensor,
    blocks: Vec<Block>,
    final_norm: Norm,
}

impl Gpt {
    /// A freshly initialised model. The initial weights are a function of
    /// `seed` alone: they are drawn from a ChaCha8 stream seeded with it
    /// (normal(0, 0.02) weights, 0.02/sqrt(2·layers) for the residual
    /// projections, zero biases, unit LayerNorm gains), never from candle's
    /// CPU RNG, which cannot be seeded reproducibly.
    pub fn new(config: GptConfig, seed: u64) -> Result<Gpt> {
        config.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut tensors = HashMap::new();
        for spec in parameter_specs(&config) {
            let count: usize = spec.shape.iter().product();
            let values = match spec.initial {
                Initial::Normal { std } => normal_samples(&mut rng, count, std),
                Initial::Zeros => vec![0.0; count],
                Initial::Ones => vec![1.0; count],
            };
            tensors.insert(
                spec.name,
                Tensor::from_vec(values, spec.shape, &Device::Cpu)?,
            );
        }
        Gpt::from_tensors(config, tensors)
    }

    /// Builds the model around the given parameter values, which must be
    /// exactly the parameters of `config` with the right shapes.
    fn from_tensors(config: GptConfig, mut tensors: HashMap<String, Tensor>) -> Result<Gpt> {
        let variables = VarMap::new();
        {
            let mut data = variables.data().lock().map_err(|_| {
                TlmError::InvalidInput("the variable map's lock is poisoned".into())
            })?;
            for spec in parameter_specs(&config) {
                let Some(tensor) = tensors.remove(&spec.name) else {
                    return invalid_input(format!("parameter {} is missing", spec.name));
                };
                if tensor.dims() != spec.shape.as_slice() {
                    return invalid_input(format!(
                        "parameter {} has shape {:?}, the configuration needs {:?}",
                        spec.name,
                        tensor.dims(),
                        spec.shape
                    ));
                }
                if tensor.dtype() != DType::F32 {
                    return invalid_input(format!(
                        "parameter {} is {:?}, not f32",
                        spec.name,
                        tensor.dtype()
                    ));
                }
                data.insert(spec.name, Var::from_tensor(&tensor)?);
            }
        }
        if let Some(extra) = tensors.keys().min() {
            return invalid_input(format!(
                "unexpected parameter {extra} for configuration {config:?}"
            ));
        }
        // The model keeps clones of the variables' tensors: they share the
        // variables' storage, so optimiser updates through `Var::set` are seen
        // by the next forward pass.
        let parameter = |name: &str| -> Result<Tensor> {
            let data = variables.data().lock().map_err(|_| {
                TlmError::InvalidInput("the variable map's lock is poisoned".into())
            })?;
            match data.get(name) {
                Some(var) => Ok(var.as_tensor().clone()),
                None => invalid_input(format!("parameter {name} is missing")),
            }
        };
        let norm = |prefix: &str| -> Result<Norm> {
            Ok(Norm {
                gain: parameter(&format!("{prefix}.weight"))?,
                bias: parameter(&format!("{prefix}.bias"))?,
            })
        };
        let linear = |prefix: &str| -> Result<candle_nn::Linear> {
            Ok(candle_nn::Linear::new(
                parameter(&format!("{prefix}.weight"))?,
                Some(parameter(&format!("{prefix}.bias"))?),
            ))
        };
        let mut blocks = Vec::with_capacity(config.layers);
        for layer in 0..config.layers {
            let prefix = format!("h.{layer}");
            blocks.push(Block {
                attention_norm: norm(&format!("{prefix}.ln_1"))?,
                query_key_value: linear(&format!("{prefix}.attn.c_attn"))?,
                attention_output: linear(&format!("{prefix}.attn.c_proj"))?,
                mlp_norm: norm(&format!("{prefix}.ln_2"))?,
                mlp_up: linear(&format!("{prefix}.mlp.c_fc"))?,
                mlp_down: linear(&format!("{prefix}.mlp.c_proj"))?,
            });
        }
        Ok(Gpt {
            token_embedding: parameter("wte.weight")?,
            position_embedding: parameter("wpe.weight")?,
            final_norm: norm("ln_f")?,
            blocks,
            variables,
            config,
        })
    }

    /// The model's shape.
    pub fn config(&self) -> &GptConfig {
        &self.config
    }

    /// The trainable variables, by parameter name.
    pub fn variables(&self) -> &VarMap {
        &self.variables
    }

    /// The trainable variables sorted by name: a fixed order for everything
    /// that must not depend on hash-map iteration (the optimiser's gradient
    /// norm, saving).
    pub(crate) fn sorted_variables(&self) -> Result<Vec<(String, Var)>> {
        let data =
            self.variables.data().lock().map_err(|_| {
                TlmError::InvalidInput("the variable map's lock is poisoned".into())
            })?;
        let sorted: BTreeMap<String, Var> = data
            .iter()
            .map(|(name, var)| (name.clone(), var.clone()))
            .collect();
        Ok(sorted.into_iter().collect())
    }

    /// The number of trainable parameters (equal to
    /// [`GptConfig::parameters`]).
    pub fn parameter_count(&self) -> usize {
        self.variables
            .all_vars()
            .iter()
            .map(|var| var.elem_count())
            .sum()
    }

    /// Logits for every position: `ids` is `(batch, time)` u32 with
    /// `1 <= time <= context`; the result is `(batch, time, vocab_size)` f32,
    /// where position `t` scores the token that follows `ids[.., ..=t]`.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        self.forward_from(ids, 0, None)
    }

    /// The forward pass for `ids` placed at positions `offset..offset + time`.
    /// With a cache (one entry per block) the new tokens also attend to the
    /// cached keys and values of positions `0..offset`, and the cache is
    /// extended with theirs.
    pub(crate) fn forward_from(
        &self,
        ids: &Tensor,
        offset: usize,
        mut cache: Option<&mut [LayerCache]>,
    ) -> Result<Tensor> {
        let (batch, time) = ids.dims2()?;
        self.check_ids(ids, offset + time)?;
        if let Some(cache) = &cache
            && cache.len() != self.blocks.len()
        {
            return invalid_input(format!(
                "cache has {} layers, the model {}",
                cache.len(),
                self.blocks.len()
            ));
        }
        let width = self.config.embedding;
        let tokens = self
            .token_embedding
            .index_select(&ids.flatten_all()?, 0)?
            .reshape((batch, time, width))?;
        let positions = self.position_embedding.narrow(0, offset, time)?;
        let mut stream = tokens.broadcast_add(&positions)?;
        let mask = causal_mask(time, offset)?;
        for (layer, block) in self.blocks.iter().enumerate() {
            let layer_cache = cache.as_deref_mut().map(|caches| &mut caches[layer]);
            let attended = self.attention(
                block,
                &block.attention_norm.forward(&stream)?,
                &mask,
                layer_cache,
            )?;
            stream = (stream + attended)?;
            let hidden = block
                .mlp_up
                .forward(&block.mlp_norm.forward(&stream)?)?
                .gelu()?;
            stream = (&stream + block.mlp_down.forward(&hidden)?)?;
        }
        let normed = self.final_norm.forward(&stream)?;
        let logits = normed
            .reshape((batch * time, width))?
            .matmul(&self.token_embedding.t()?)?;
        Ok(logits.reshape((batch, time, self.config.vocab_size))?)
    }

    /// Causal multi-head self-attention of one block over `input`
    /// `(batch, time, width)`.
    fn attention(
        &self,
        block: &Block,
        input: &Tensor,
        mask: &Tensor,
        cache: Option<&mut LayerCache>,
    ) -> Result<Tensor> {
        let (batch, time, width) = input.dims3()?;
        let heads = self.config.heads;
        let head_size = self.config.head_size();
        let query_key_value = block.query_key_value.forward(input)?;
        let split = |index: usize| -> Result<Tensor> {
            Ok(query_key_value
                .narrow(2, index * width, width)?
                .reshape((batch, time, heads, head_size))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        // Scaling the queries rather than the scores touches head_size
        // instead of tokens elements per query.
        let queries = (split(0)? * (1.0 / (head_size as f64).sqrt()))?;
        let mut keys = split(1)?;
        let mut values = split(2)?;
        if let Some(cache) = cache {
            if let Some((cached_keys, cached_values)) = &cache.keys_and_values {
                keys = Tensor::cat(&[cached_keys, &keys], 2)?;
                values = Tensor::cat(&[cached_values, &values], 2)?;
            }
            // Detached: the weights are training variables, so every op on
            // them records its inputs for the backward pass. A cache that
            // kept that record would hold every earlier step's tensors (and,
            // reused across sentences, every earlier sentence's): memory grew
            // by about 280 MB per 32 convolution sentences written.
            cache.keys_and_values = Some((keys.detach(), values.detach()));
        }
        let scores = queries.matmul(&keys.t()?)?;
        let weights = candle_nn::ops::softmax(&scores.broadcast_add(mask)?, D::Minus1)?;
        let mixed = weights
            .matmul(&values)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((batch, time, width))?;
        Ok(block.attention_output.forward(&mixed)?)
    }

    /// Checks dtype and range of token ids that will occupy positions up to
    /// `end`, so that a bad id is reported as such rather than as an index
    /// error deep inside candle.
    fn check_ids(&self, ids: &Tensor, end: usize) -> Result<()> {
        if ids.dtype() != DType::U32 {
            return invalid_input(format!("token ids must be u32, got {:?}", ids.dtype()));
        }
        if ids.elem_count() == 0 {
            return invalid_input("no token ids");
        }
        if end > self.config.context {
            return invalid_input(format!(
                "{end} positions exceed the model's context of {}",
                self.config.context
            ));
        }
        let largest = ids.max_all()?.to_scalar::<u32>()?;
        if largest as usize >= self.config.vocab_size {
            return invalid_input(format!(
                "token id {largest} is outside the vocabulary of {}",
                self.config.vocab_size
            ));
        }
        Ok(())
    }

    /// Writes the weights and configuration to `path` as one safetensors file
    /// (the configuration is JSON under the metadata key
    /// [`CONFIG_METADATA_KEY`]; there is no sibling file).
    pub fn save(&self, path: &Path) -> Result<()> {
        self.save_with_metadata(path, &[])
    }

    /// [`Gpt::save`] with more metadata entries (a caller's vocabulary);
    /// [`Gpt::load_with_metadata`] gives them back.
    pub fn save_with_metadata(&self, path: &Path, extra: &[(&str, String)]) -> Result<()> {
        let config_json =
            serde_json::to_string(&self.config).map_err(|error| TlmError::Format {
                path: path.to_path_buf(),
                message: format!("cannot encode the configuration: {error}"),
            })?;
        let mut metadata = HashMap::from([(CONFIG_METADATA_KEY.to_string(), config_json)]);
        metadata.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
        let variables = self.sorted_variables()?;
        let tensors: Vec<(&str, &Tensor)> = variables
            .iter()
            .map(|(name, var)| (name.as_str(), var.as_tensor()))
            .collect();
        safetensors::tensor::serialize_to_file(tensors, Some(metadata), path).map_err(|error| {
            match error {
                safetensors::SafeTensorError::IoError(source) => TlmError::Io {
                    path: path.to_path_buf(),
                    source,
                },
                other => TlmError::Format {
                    path: path.to_path_buf(),
                    message: other.to_string(),
                },
            }
        })
    }

    /// Reads a model written by [`Gpt::save`]. A missing file, a file that is
    /// not safetensors, one without the configuration, or one whose tensors
    /// do not match the configuration is an error naming the path.
    pub fn load(path: &Path) -> Result<Gpt> {
        Ok(Gpt::load_with_metadata(path)?.0)
    }

    /// [`Gpt::load`], with the file's metadata entries.
    pub fn load_with_metadata(path: &Path) -> Result<(Gpt, HashMap<String, String>)> {
        let bytes = std::fs::read(path).map_err(|source| TlmError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let format_error = |message: String| TlmError::Format {
            path: path.to_path_buf(),
            message,
        };
        let (_, metadata) = safetensors::SafeTensors::read_metadata(&bytes).map_err(|error| {
            format_error(format!("cannot read the safetensors header: {error}"))
        })?;
        let config_json = metadata
            .metadata()
            .as_ref()
            .and_then(|entries| entries.get(CONFIG_METADATA_KEY))
            .ok_or_else(|| {
                format_error(format!("the metadata has no {CONFIG_METADATA_KEY} entry"))
            })?;
        let config: GptConfig = serde_json::from_str(config_json).map_err(|error| {
            format_error(format!("malformed configuration {config_json:?}: {error}"))
        })?;
        config
            .validate()
            .map_err(|error| format_error(error.to_string()))?;
        let tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
            .map_err(|error| format_error(format!("cannot read the tensors: {error}")))?;
        let entries = metadata.metadata().clone().unwrap_or_default();
        let model = Gpt::from_tensors(config, tensors).map_err(|error| match error {
            TlmError::InvalidInput(message) => format_error(message),
            other => other,
        })?;
        Ok((model, entries.into_iter().collect()))
    }
}

/// The additive attention mask for `time` new queries at positions
/// `offset..offset + time` over keys at positions `0..offset + time`: zero
/// where the key is not in the query's future, -inf where it is.
fn causal_mask(time: usize, offset: usize) -> Result<Tensor> {
    let keys = offset + time;
    let mask: Vec<f32> = (0..time)
        .flat_map(|query| {
            (0..keys).map(move |key| {
                if key <= offset + query {
                    0.0
                } else {
                    f32::NEG_INFINITY
                }
            })
        })
        .collect();
    Ok(Tensor::from_vec(mask, (time, keys), &Device::Cpu)?)
}

#[cfg(test)]
pub(crate) fn parameter_count_from_specs(config: &GptConfig) -> usize {
    parameter_specs(config)
        .iter()
        .map(|spec| spec.shape.iter().product::<usize>())
        .sum()
}
