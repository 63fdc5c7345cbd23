//! The strategies the `search` pass knows: one [`StrategyDecl`] each, in
//! [`STRATEGIES`]. Everything the pass says about its strategies comes from
//! that list: the values the `strategy` option accepts, the options only
//! one strategy reads (each declared by its strategy, gathered into the
//! pass's option table), the pass's summary and description (and with them
//! `tilec --list-passes` and `docs/passes.md`), and the strategy a run
//! constructs ([`StrategyRegistry::create`]).
//!
//! Adding a strategy is one new file with a `pub const DECL: StrategyDecl`
//! and its line in [`STRATEGIES`] (`docs/search.md`, "Adding a strategy").
//! A [`StrategyRegistry`] made at run time ([`StrategyRegistry::with`])
//! adds strategies the static list does not have, for embedders and tests;
//! the pipeline's option parser knows only the static ones.
//!
//! The pass declaration is a `static`, so the lists and texts it takes are
//! put together at compile time, by the `const fn`s below.

use super::{Strategy, baseline, dual_task, evolutionary, gradient, markov, roller, tlm};
use tilec::pass::{OptionDecl, OptionKind, PassOptions};

/// One strategy: its name (the `strategy` option's value), a line saying
/// what it does, the options only it reads, and its constructor.
pub struct StrategyDecl {
    pub name: &'static str,
    /// A phrase for the pass description: `markov` (this).
    pub summary: &'static str,
    /// Options only this strategy reads; their help starts with the
    /// strategy's name (`markov: ...`). Names must not clash with another
    /// strategy's or the pass's own options.
    pub options: &'static [OptionDecl],
    /// Does it measure in its own loop (learning from measurements), so
    /// that it needs an evaluator whatever `measure-top-k` says, spends
    /// `trials`, and gets the learned cost model under `cost-model=auto`?
    pub measures: bool,
    /// The strategy for a run, from the pass's options (all of them: the
    /// common ones and every strategy's).
    pub create: fn(&PassOptions) -> Box<dyn Strategy>,
}

impl std::fmt::Debug for StrategyDecl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StrategyDecl({})", self.name)
    }
}

/// Every built-in strategy, the default (`markov`) first. Add a strategy
/// here.
pub const STRATEGIES: &[StrategyDecl] = &[markov::DECL, roller::DECL, baseline::RANDOM, baseline::EXHAUSTIVE, gradient::DECL, evolutionary::DECL, dual_task::DECL, tlm::DECL];

/// The strategies a search may run, by name: the built-in ones, and any
/// added at run time.
#[derive(Clone, Debug)]
pub struct StrategyRegistry {
    decls: Vec<&'static StrategyDecl>,
}

impl Default for StrategyRegistry {
    fn default() -> Self {
        StrategyRegistry::builtin()
    }
}

impl StrategyRegistry {
    /// The strategies of [`STRATEGIES`].
    pub fn builtin() -> StrategyRegistry {
        StrategyRegistry { decls: STRATEGIES.iter().collect() }
    }

    /// This registry with `decl` added (replacing a strategy of the same
    /// name).
    pub fn with(mut self, decl: &'static StrategyDecl) -> StrategyRegistry {
        match self.decls.iter_mut().find(|d| d.name == decl.name) {
            Some(d) => *d = decl,
            None => self.decls.push(decl),
        }
        self
    }

    pub fn get(&self, name: &str) -> Option<&'static StrategyDecl> {
        self.decls.iter().copied().find(|d| d.name == name)
    }

    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.decls.iter().map(|d| d.name)
    }

    /// The strategy `name` for a run with options `o`; `None` if there is
    /// no such strategy.
    pub fn create(&self, name: &str, o: &PassOptions) -> Option<Box<dyn Strategy>> {
        self.get(name).map(|d| (d.create)(o))
    }
}

/// The names of [`STRATEGIES`], in order: the `strategy` option's values.
pub static STRATEGY_NAMES: [&str; STRATEGIES.len()] = {
    let mut names = [""; STRATEGIES.len()];
    let mut i = 0;
    while i < STRATEGIES.len() {
        names[i] = STRATEGIES[i].name;
        i += 1;
    }
    names
};

/// The `search` pass's options: `common`, then every strategy's own in the
/// order of [`STRATEGIES`], then `trailing`. (A macro because array lengths
/// must be constants, and a `const fn` cannot take the inputs' lengths as
/// one.)
macro_rules! pass_options {
    ($common:expr, $trailing:expr) => {{
        const COMMON: &[OptionDecl] = $common;
        const TRAILING: &[OptionDecl] = $trailing;
        const LEN: usize = COMMON.len() + $crate::search::registry::strategy_options_len() + TRAILING.len();
        const ALL: [OptionDecl; LEN] = {
            const BLANK: OptionDecl = OptionDecl { name: "", kind: OptionKind::Bool, default: "", help: "" };
            let mut all = [BLANK; LEN];
            let mut at = $crate::search::registry::copy_options(&mut all, 0, COMMON);
            let mut s = 0;
            while s < $crate::search::registry::STRATEGIES.len() {
                at = $crate::search::registry::copy_options(&mut all, at, $crate::search::registry::STRATEGIES[s].options);
                s += 1;
            }
            $crate::search::registry::copy_options(&mut all, at, TRAILING);
            all
        };
        &ALL
    }};
}
pub(crate) use pass_options;

/// How many options the strategies declare together.
pub const fn strategy_options_len() -> usize {
    let (mut n, mut s) = (0, 0);
    while s < STRATEGIES.len() {
        n += STRATEGIES[s].options.len();
        s += 1;
    }
    n
}

/// Copies `from` into `to` from `at`; returns where it stopped.
pub const fn copy_options(to: &mut [OptionDecl], at: usize, from: &[OptionDecl]) -> usize {
    let mut i = 0;
    while i < from.len() {
        let d = &from[i];
        to[at + i] = OptionDecl { name: d.name, kind: d.kind, default: d.default, help: d.help };
        i += 1;
    }
    at + from.len()
}

/// `text` into `out` from `at` where it fits (an empty `out` measures);
/// returns where it stopped.
const fn put(out: &mut [u8], at: usize, text: &str) -> usize {
    let bytes = text.as_bytes();
    if at + bytes.len() <= out.len() {
        let mut i = 0;
        while i < bytes.len() {
            out[at + i] = bytes[i];
            i += 1;
        }
    }
    at + bytes.len()
}

/// `head`, the strategies' names separated by `, `, then `tail`.
pub const fn write_names(out: &mut [u8], head: &str, tail: &str) -> usize {
    let mut at = put(out, 0, head);
    let mut s = 0;
    while s < STRATEGIES.len() {
        if s > 0 {
            at = put(out, at, ", ");
        }
        at = put(out, at, STRATEGIES[s].name);
        s += 1;
    }
    put(out, at, tail)
}

/// `head`, a Markdown list of the strategies (`` - `name`: summary ``), then
/// `tail`.
pub const fn write_list(out: &mut [u8], head: &str, tail: &str) -> usize {
    let mut at = put(out, 0, head);
    let mut s = 0;
    while s < STRATEGIES.len() {
        at = put(out, at, "\n- `");
        at = put(out, at, STRATEGIES[s].name);
        at = put(out, at, "`: ");
        at = put(out, at, STRATEGIES[s].summary);
        s += 1;
    }
    put(out, at, tail)
}

/// A `&'static str` made at compile time by `$write(out, head, tail)` (one
/// of [`write_names`], [`write_list`]).
macro_rules! const_text {
    ($write:path, $head:expr, $tail:expr) => {{
        const LEN: usize = $write(&mut [], $head, $tail);
        const BYTES: [u8; LEN] = {
            let mut b = [0u8; LEN];
            $write(&mut b, $head, $tail);
            b
        };
        match ::core::str::from_utf8(&BYTES) {
            Ok(s) => s,
            Err(_) => panic!("the strategies' texts are UTF-8"),
        }
    }};
}
pub(crate) use const_text;

/// `OptionKind::Enum` of the strategies' names.
pub const STRATEGY_KIND: OptionKind = OptionKind::Enum(&STRATEGY_NAMES);
