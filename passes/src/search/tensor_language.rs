//! TLM's tensor language (seed 002, §4.2–§4.3, Algorithms 1 and 2): one
//! schedule of one op on one target as a sentence of whitespace-separated
//! tokens, and back.
//!
//! A sentence is a prompt and the decisions of the space, in the order the
//! space is walked:
//!
//! ```text
//! <s> op=gemm reduce=sum body=mul axis=i:1024 axis=j:1024 axis=r:k:1024
//!     in0=f32[i,k] in1=f32[k,j] out=f32[i,j]                      subgraph
//!     target=x86-avx2 cores=64 vector-bits=256 vector-registers=16
//!     mem=dram:274877906944 ... has=vfmadd231ps.ymm               hardware
//!     split i=1024 i.core=64 i.l2=16 i.l1=4                       decisions
//!     split j=1024 ... split r:k=1024 k.core=all k.l2=64 k.l1=8
//!     pack in0.pack=none in1.pack=l2
//!     order loop=i loop=j loop=k  vector=j </s>
//! ```
//!
//! The prompt (everything up to the first decision) says what Algorithm 1's
//! `ExtractTokensFromSubgraph` and `ExtractTokensFromHardware` do: the op's
//! label, combiner, body and epilogue ops, axes with extents, each read's
//! element type and access pattern, the output; the target's name, cores,
//! vector width and registers, memory levels and the intrinsics it offers.
//! Then, per decision space, context words (`split i=1024`, the paper's
//! "split i=1024 to") and one token per decision (`i.core=64`; a level
//! that leaves its enclosing tile whole writes [`WHOLE`], `k.core=all`): the
//! intrinsic (where the op has options), every axis' tile sizes outermost
//! level first and its virtual threads (GPUs), where each read is packed
//! (CPUs), the loop order one axis at a time, and the vector axis.
//!
//! A [`Walk`] is that order as a state machine: it yields the words, and at
//! each decision the options the space allows given the decisions before
//! it (the knob space's values, `knobs.rs`). Encoding a point
//! ([`sentence_of`]), decoding a sentence ([`config_of_sentence`]), uniform
//! sampling ([`sample_sentence`], the pre-training corpus) and the language
//! model's constrained generation (`tlm.rs`: the logits masked to the
//! options) all drive the same walk, so a sentence any of them writes
//! decodes to the point it was written from, and generation can only write
//! sentences of the space. Whether the point then fits the target (the
//! resource check, [`Problem::valid`]) is known when the walk ends, as in
//! the paper, which regenerates a program whose decisions turn out invalid.

use super::rng::Rng;
use super::knobs::{Knob, KnobSpace};
use super::space::{Config, Problem};
use std::collections::HashMap;
use tilec::ir::EntityRef;

/// The special tokens, in their vocabulary positions.
pub const PAD: &str = "<pad>";
pub const UNK: &str = "<unk>";
pub const BOS: &str = "<s>";
pub const EOS: &str = "</s>";
pub const SPECIALS: [&str; 4] = [PAD, UNK, BOS, EOS];

/// The size a tile decision writes when it keeps the whole of the tile it
/// splits (`k.l2=all`: the level does not split `k`), whatever that size
/// is. "Keep it whole" is a choice that carries from one shape to another
/// (a GEMM's reduction kept whole in L2 is fast for K = 768 and for K =
/// 1024 alike), where `k.l2=768` and `k.l2=1024` are unrelated tokens that
/// a model must learn one shape at a time.
pub const WHOLE: &str = "all";

/// One decision of the walk: a knob of the space (`knobs.rs`), except the
/// loop order, which the sentence writes one axis at a time (so that
/// `loop=k` means the same in every op with a `k`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    Knob(Knob),
    /// The axis at position `position` of the loop order (outermost first).
    Loop { position: usize },
}

/// What the walk says next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Words the sentence has here whatever is decided (the prompt, and
    /// context such as `split i=1024`).
    Words(Vec<String>),
    /// A decision: the tokens of the options the space allows here, in a
    /// fixed order; [`Walk::choose`] takes one.
    Decide { slot: Slot, options: Vec<String> },
    /// The sentence is complete ([`Walk::config`]).
    End,
}

enum Item {
    Words(Vec<String>),
    Decide(Slot),
}

/// The walk of one problem's decisions (module docs). The knobs' values,
/// and how choosing one changes the point, are the knob space's, so a
/// sentence's point is one the other strategies' spaces have.
pub struct Walk<'p> {
    space: KnobSpace<'p>,
    items: Vec<Item>,
    next: usize,
    cfg: Config,
    loop_prefix: Vec<usize>,
    /// The decision [`Walk::step`] returned, with each option's value.
    pending: Option<(Slot, Vec<i64>)>,
}

impl<'p> Walk<'p> {
    pub fn new(p: &'p Problem) -> Walk<'p> {
        let mut items = vec![Item::Words(prompt(p))];
        if !p.intrinsics.is_empty() {
            items.push(Item::Decide(Slot::Knob(Knob::Intrinsic)));
        }
        for (a, axis) in p.axes.iter().enumerate() {
            items.push(Item::Words(vec!["split".into(), axis_word(p, a)]));
            items.extend((0..p.levels).map(|level| Item::Decide(Slot::Knob(Knob::Tile { axis: a, level }))));
            if p.vthread_ok && axis.spatial {
                items.push(Item::Decide(Slot::Knob(Knob::VThread { axis: a })));
            }
        }
        if !p.packable.is_empty() {
            items.push(Item::Words(vec!["pack".into()]));
            items.extend(p.packable.iter().map(|&read| Item::Decide(Slot::Knob(Knob::Pack { read }))));
        }
        items.push(Item::Words(vec!["order".into()]));
        items.extend((0..p.axes.len()).map(|position| Item::Decide(Slot::Loop { position })));
        items.push(Item::Decide(Slot::Knob(Knob::Vector)));
        items.push(Item::Words(vec![EOS.into()]));
        // An intrinsic decision restarts the point from its start; without
        // one, the start is the plain one (or the one option's).
        let cfg = p.start(p.only_intrinsic);
        Walk { space: KnobSpace::new(p), items, next: 0, cfg, loop_prefix: Vec::new(), pending: None }
    }

    /// The next words or decision. After a [`Step::Decide`], call
    /// [`Walk::choose`] before stepping again.
    pub fn step(&mut self) -> Step {
        assert!(self.pending.is_none(), "Walk::step before Walk::choose");
        let Some(item) = self.items.get(self.next) else { return Step::End };
        self.next += 1;
        match item {
            Item::Words(w) => Step::Words(w.clone()),
            &Item::Decide(slot) => {
                let (tokens, values): (Vec<String>, Vec<i64>) = self.options(slot).into_iter().unzip();
                self.pending = Some((slot, values));
                Step::Decide { slot, options: tokens }
            }
        }
    }

    /// Takes option `i` of the pending decision.
    pub fn choose(&mut self, i: usize) {
        let (slot, values) = self.pending.take().expect("Walk::choose without a decision");
        let v = values[i];
        match slot {
            Slot::Knob(knob) => {
                let stored = self.space.assign(&mut self.cfg, knob, v);
                debug_assert!(stored, "{knob:?} = {v} is one of its values");
                self.space.restart_after(&mut self.cfg, knob);
            }
            Slot::Loop { .. } => {
                self.loop_prefix.push(v as usize);
                if self.loop_prefix.len() == self.space.problem.axes.len() {
                    self.cfg.order = self.loop_prefix.clone();
                }
            }
        }
    }

    /// The point the decisions made (complete once [`Step::End`] came).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The options of `slot` given the decisions so far: (token, value).
    fn options(&self, slot: Slot) -> Vec<(String, i64)> {
        let p = self.space.problem;
        let knob = match slot {
            Slot::Knob(knob) => knob,
            Slot::Loop { .. } => {
                // The axes that can come next: those some order of the
                // space has after the prefix, in the orders' order.
                let mut next = Vec::new();
                for o in p.orders.iter().filter(|o| o.starts_with(&self.loop_prefix)) {
                    let a = o[self.loop_prefix.len()];
                    if !next.contains(&a) {
                        next.push(a);
                    }
                }
                return next.into_iter().map(|a| (format!("loop={}", p.axes[a].name), a as i64)).collect();
            }
        };
        // The size of the tile a tile decision splits: the axis' extent at
        // the outermost level, else the level above's (decided already:
        // the walk goes outermost first).
        let enclosing = match knob {
            Knob::Tile { axis, level: 0 } => Some(p.axes[axis].extent as i64),
            Knob::Tile { axis, level } => Some(self.space.value(&self.cfg, Knob::Tile { axis, level: level - 1 })),
            _ => None,
        };
        let word = |v: i64| -> String {
            match knob {
                Knob::Tile { axis, level } if Some(v) == enclosing => format!("{}.{}={WHOLE}", p.axes[axis].name, p.target.tile_levels[level].name),
                Knob::Intrinsic => intrinsic_word(p, usize::try_from(v).ok()),
                Knob::Tile { axis, level } => format!("{}.{}={v}", p.axes[axis].name, p.target.tile_levels[level].name),
                Knob::VThread { axis } => format!("{}.vthread={v}", p.axes[axis].name),
                Knob::Pack { read } => format!("in{read}.pack={}", if v == 0 { "none" } else { p.target.tile_levels[v as usize - 1].name.as_str() }),
                Knob::Vector => format!("vector={}", usize::try_from(v).map_or("none", |a| p.axes[a].name.as_str())),
                Knob::Order => unreachable!("the loop order is written one axis at a time"),
            }
        };
        self.space.values(&self.cfg, knob).into_iter().map(|v| (word(v), v)).collect()
    }

    /// The value `cfg` has at `slot` (what [`sentence_of`] looks for among
    /// the options).
    fn value_in(&self, cfg: &Config, slot: Slot) -> Option<i64> {
        match slot {
            Slot::Knob(knob) => Some(self.space.value(cfg, knob)),
            Slot::Loop { position } => cfg.order.get(position).map(|&a| a as i64),
        }
    }
}

fn axis_word(p: &Problem, a: usize) -> String {
    let axis = &p.axes[a];
    format!("{}{}={}", if axis.spatial { "" } else { "r:" }, axis.name, axis.extent)
}

fn intrinsic_word(p: &Problem, choice: Option<usize>) -> String {
    let Some(x) = choice.map(|k| &p.intrinsics[k]) else { return "intrinsic=none".into() };
    let names = |ids: &[tilec::ir::AxisId]| ids.iter().map(|id| p.axes[id.index()].name.clone()).collect::<Vec<_>>().join(",");
    format!("intrinsic={}:a=in{}:m={}:n={}:k={}", x.intrinsic.name, x.mapping.a, names(&x.mapping.m), names(&x.mapping.n), names(&x.mapping.k))
}

/// The prompt of `p`'s sentences: `<s>`, the subgraph, the hardware.
pub fn prompt(p: &Problem) -> Vec<String> {
    let c = &p.compute;
    let mut w: Vec<String> = vec![BOS.into(), format!("op={}", c.label.as_deref().unwrap_or("compute"))];
    w.push(format!("reduce={}", c.combiner.map_or("none", |k| k.name())));
    let names = ["body", "epilogue"];
    for (i, ops) in p.region_ops.iter().enumerate() {
        // `yield` ends every region.
        let ops: Vec<&str> = ops.iter().copied().filter(|&o| o != "yield").collect();
        w.push(format!("{}={}", names.get(i).copied().unwrap_or("region"), if ops.is_empty() { "none".to_string() } else { ops.join(",") }));
    }
    for a in 0..p.axes.len() {
        w.push(format!("axis={}", axis_word(p, a).replace('=', ":")));
    }
    for (i, (_, r)) in c.all_reads().enumerate() {
        let elem = p.info.reads.get(i).map_or("?".to_string(), |ri| ri.tensor.elem.to_string());
        let idx: Vec<String> = r.indices.iter().map(|e| tilec::records::expr_text(c, e)).collect();
        w.push(format!("in{i}={elem}[{}]{}", idx.join(","), if r.pad.is_some() { ":padded" } else { "" }));
    }
    let idx: Vec<String> = c.output.iter().map(|e| tilec::records::expr_text(c, e)).collect();
    w.push(format!("out={}[{}]", p.info.output.elem, idx.join(",")));
    let t = &p.target;
    w.push(format!("target={}", t.name));
    w.push(format!("cores={}", t.compute.units));
    w.push(format!("vector-bits={}", t.isa.vector_bits));
    if t.isa.vector_registers > 0 {
        w.push(format!("vector-registers={}", t.isa.vector_registers));
    }
    for m in &t.memory {
        w.push(format!("mem={}:{}", m.name, m.capacity_bytes));
    }
    for x in t.offered_intrinsics() {
        w.push(format!("has={}", x.name));
    }
    w
}

/// The number of prompt tokens of a sentence: those before its first
/// decision's words (`intrinsic=...`, or the first `split`).
pub fn prompt_len<S: AsRef<str>>(words: &[S]) -> usize {
    words.iter().position(|w| w.as_ref() == "split" || w.as_ref().starts_with("intrinsic=")).unwrap_or(words.len())
}

/// A sentence's decisions, without its prompt and `</s>` (for reports); a
/// record's sentence of an older format as it is.
pub fn decisions_text(sentence: &str) -> String {
    let words: Vec<&str> = sentence.split_whitespace().collect();
    if words.first() != Some(&BOS) {
        return sentence.to_string();
    }
    words[prompt_len(&words)..].iter().copied().filter(|&w| w != EOS).collect::<Vec<_>>().join(" ")
}

/// The sentence of point `cfg` of `p`. `Err` when `cfg` is not a point the
/// walk can write (a decision's value is not among its options: a point of
/// another space, or one no strategy should have made).
pub fn sentence_of(p: &Problem, cfg: &Config) -> Result<Vec<String>, String> {
    let mut walk = Walk::new(p);
    let mut out = Vec::new();
    loop {
        match walk.step() {
            Step::Words(w) => out.extend(w),
            Step::Decide { slot, options } => {
                let want = walk.value_in(cfg, slot).ok_or_else(|| format!("the point has no value for {slot:?}"))?;
                let values = &walk.pending.as_ref().expect("pending").1;
                let Some(i) = values.iter().position(|&v| v == want) else {
                    return Err(format!("{slot:?}: the point's value {want} is not one of the options ({})", options.join(" ")));
                };
                out.push(options[i].clone());
                walk.choose(i);
            }
            Step::End => return Ok(out),
        }
    }
}

/// The point sentence `tokens` writes in `p`'s walk. `Err` names the first
/// token that is not what the walk has there (a sentence of another op or
/// target, a decision the space does not allow, a truncated sentence).
pub fn config_of_sentence<S: AsRef<str>>(p: &Problem, tokens: &[S]) -> Result<Config, String> {
    let mut walk = Walk::new(p);
    let mut at = 0;
    let token = |at: usize| tokens.get(at).map(|t| t.as_ref());
    loop {
        match walk.step() {
            Step::Words(w) => {
                for word in w {
                    if token(at) != Some(word.as_str()) {
                        return Err(format!("token {at}: expected `{word}`, found `{}`", token(at).unwrap_or("the end")));
                    }
                    at += 1;
                }
            }
            Step::Decide { options, .. } => {
                let Some(i) = token(at).and_then(|t| options.iter().position(|o| o == t)) else {
                    return Err(format!("token {at}: `{}` is not one of the options here ({})", token(at).unwrap_or("the end"), options.join(" ")));
                };
                walk.choose(i);
                at += 1;
            }
            Step::End => {
                if at != tokens.len() {
                    return Err(format!("token {at}: `{}` after the end of the sentence", token(at).unwrap_or_default()));
                }
                return Ok(walk.config().clone());
            }
        }
    }
}

/// A point drawn by walking the decisions with a uniform choice at each,
/// and its sentence: Algorithm 1's `RandomSample`, per decision space (the
/// distribution of the `random` strategy's draws). It may not fit the
/// target.
pub fn sample_sentence(p: &Problem, rng: &mut Rng) -> (Config, Vec<String>) {
    let mut walk = Walk::new(p);
    let mut words = Vec::new();
    loop {
        match walk.step() {
            Step::Words(w) => words.extend(w),
            Step::Decide { mut options, .. } => {
                let i = rng.below(options.len());
                words.push(options.swap_remove(i));
                walk.choose(i);
            }
            Step::End => return (walk.config().clone(), words),
        }
    }
}

/// The point of [`sample_sentence`].
pub fn sample_uniform(p: &Problem, rng: &mut Rng) -> Config {
    sample_sentence(p, rng).0
}

/// A valid point by [`sample_uniform`], redrawing invalid ones: `None`
/// after `tries` draws that all failed the resource check.
pub fn sample_valid(p: &Problem, rng: &mut Rng, tries: usize) -> Option<Config> {
    (0..tries).map(|_| sample_uniform(p, rng)).find(|c| p.valid(c))
}

/// A vocabulary: the special tokens, then every token of a corpus in
/// sorted order (so the same corpus gives the same ids). Tokens not in it
/// read as [`UNK`]; a decision option not in it is never generated (§4.3).
#[derive(Clone, Debug, PartialEq)]
pub struct Vocabulary {
    tokens: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Vocabulary {
    /// The vocabulary of the sentences' tokens.
    pub fn from_sentences<'a>(sentences: impl IntoIterator<Item = &'a [String]>) -> Vocabulary {
        let mut set = std::collections::BTreeSet::new();
        for s in sentences {
            set.extend(s.iter().filter(|t| !SPECIALS.contains(&t.as_str())).cloned());
        }
        Vocabulary::from_tokens(SPECIALS.iter().map(|s| s.to_string()).chain(set).collect()).expect("distinct tokens")
    }

    /// A vocabulary of these tokens, in this order (a saved one); `Err`
    /// when it does not start with [`SPECIALS`] or repeats a token.
    pub fn from_tokens(tokens: Vec<String>) -> Result<Vocabulary, String> {
        if tokens.len() < SPECIALS.len() || tokens.iter().zip(SPECIALS).any(|(t, s)| t != s) {
            return Err(format!("a vocabulary starts with the special tokens {}", SPECIALS.join(" ")));
        }
        let mut ids = HashMap::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            if ids.insert(t.clone(), i as u32).is_some() {
                return Err(format!("the vocabulary has `{t}` twice"));
            }
        }
        Ok(Vocabulary { tokens, ids })
    }

    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    /// The ids of `tokens`, [`UNK`]'s for tokens not in the vocabulary.
    pub fn encode<S: AsRef<str>>(&self, tokens: &[S]) -> Vec<u32> {
        let unk = self.ids[UNK];
        tokens.iter().map(|t| self.id(t.as_ref()).unwrap_or(unk)).collect()
    }

    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    pub fn pad_id(&self) -> u32 {
        0
    }
}
