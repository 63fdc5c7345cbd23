//! `markov`: Gensor's graph-based construction (seed `000_…`, §IV).
//!
//! A state is an ETIR: per axis a tile size per tile level, virtual threads,
//! and the current level (`Walk::level`, outermost first). From a state the
//! actions are `tile(a)` / `invTile(a)` (the next larger / smaller size of
//! axis `a` at the current level), `cache` (move to the next, inner, level)
//! and `setVThread(a)` (the next virtual-thread count of a spatial axis, at
//! the innermost level, on targets with banked staged memory). Benefits:
//!
//! - tiling, Formula 1: `Q(T)·F(T') / (Q(T')·F(T))` with Roller's traffic
//!   `Q` and footprint `F` at the current level ([`Problem::traffic`],
//!   [`Problem::footprint`]);
//! - caching, Formula 2: `(L_low + S/B_low) / (L_high + S/B_high)`, the
//!   latencies and bandwidths of the current level's memory (low) and the
//!   next one's (high), `S` the current tile's footprint; multiplied by the
//!   annealing boost `3 / (1 + e^{-ln5/10·(t-10)})` at step `t` and by the
//!   `cache-scale` option;
//! - virtual threads, Formula 3: `⌈x/(V·W)⌉ / ⌈x/(V'·W)⌉` going from `V` to
//!   `V'` virtual threads, `x` the axis' innermost tile, `W` the bank width
//!   in elements.
//!
//! A transition whose footprint exceeds the level's capacity (or, at the GPU
//! thread level, whose block exceeds the thread limit) has probability 0;
//! the others are normalised and one is drawn by roulette with the seeded
//! generator. Algorithm 1's annealing drives a walk: the temperature starts
//! at `temperature` and halves every step until it falls below `threshold`;
//! each new state joins the top results with probability
//! `1 - 1/(1 + e^{-0.5(-ln T - 10)})`, and the walk's last state always
//! does. Walks repeat from the initial state until `budget` states were
//! visited; the results are ranked by the analytic model.
//!
//! Algorithm 2 as printed draws with `rand() ≥ probList[i]`, which is not a
//! roulette over the normalised list; we implement the roulette the text
//! describes.
//!
//! On CPU targets (docs/search.md, "The CPU part of the space and the
//! model") the tile benefit also counts the micro-kernel terms the current
//! level decides, and every kept state gets the model's packing
//! ([`Problem::best_packing`]) instead of packing being walked.

use super::registry::StrategyDecl;
use super::rng::Rng;
use super::model::CostModel;
use super::space::{self, Config, Problem};
use super::{SearchCx, Steps, Strategy};
use tilec::pass::{OptionDecl, OptionKind, PassOptions};

pub const DECL: StrategyDecl = StrategyDecl {
    name: "markov",
    summary: "Gensor's Markov-chain construction with annealing",
    options: &[
        OptionDecl { name: "temperature", kind: OptionKind::Float, default: "1", help: "markov: initial temperature of the annealing" },
        OptionDecl { name: "threshold", kind: OptionKind::Float, default: "1e-30", help: "markov: a walk ends when the temperature falls below this (halving: log2(temperature/threshold) steps)" },
        OptionDecl { name: "cache-scale", kind: OptionKind::Float, default: "0", help: "markov: factor on the benefit of the cache action (Formula 2); 0: 0.1 on CPU targets, 0.01 on GPU targets" },
        OptionDecl { name: "polish", kind: OptionKind::UInt, default: "16", help: "markov: the best states improved by steepest descent on the model after the walks (0: none, the paper's algorithm alone)" },
        OptionDecl { name: "op-budget", kind: OptionKind::UInt, default: "0", help: "markov: walk steps per op over all its starts (vector axes, intrinsic options): each start gets budget, or op-budget / starts where that is less (0: no limit, every start gets budget)" },
    ],
    measures: false,
    create: |o: &PassOptions| Box::new(Markov { temperature: o.float("temperature"), threshold: o.float("threshold"), cache_scale: o.float("cache-scale"), polish: o.uint("polish"), op_budget: o.uint("op-budget") }),
};

pub struct Markov {
    pub temperature: f64,
    pub threshold: f64,
    pub cache_scale: f64,
    /// How many of the best-ranked states [`polish`] improves (0: the
    /// paper's construction alone).
    pub polish: u64,
    /// Walk steps per op over all starts (0: none): [`Markov::start_budget`].
    pub op_budget: u64,
}

impl Markov {
    /// The walk steps each of `starts` starts gets: `budget`, or an equal
    /// share of `op_budget` where that is less (0: no limit). A cap for
    /// users who want construction bounded on ops with many starts (a
    /// batched convolution has four vector axes: `ow`, `n`, `f`, `oh`).
    /// Not on by default: with 60,000 (15,000 per start there) the pick
    /// for the batched ResNet-18 layer C8 ran at 31–39 GFLOP/s against
    /// 54–56 with the full budget (2-vCPU AMD EPYC, docs/search.md,
    /// "Construction time").
    pub fn start_budget(&self, budget: u64, starts: usize) -> u64 {
        let starts = starts.max(1) as u64;
        if self.op_budget == 0 { budget } else { budget.min(self.op_budget / starts).max(1) }
    }
}

/// The most descent steps [`polish`] takes from one state.
const POLISH_STEPS: usize = 64;

/// Steepest descent on `model` from `start` (our addition to Gensor, see
/// docs/search.md): each step moves to the neighbour predicted fastest
/// while it beats the current state. A neighbour changes one tile size at
/// one level to the next choice up or down ([`steps`], the walk's), keeping
/// the packing and order; where no move helps, the packing is chosen anew
/// ([`Problem::best_packing`]) and descent goes on if that helped. Returns
/// the final state and the states evaluated.
///
/// Why: the walks sample; the ranking then keeps what they happened to
/// visit, and the best of it is often a few tile sizes from a much better
/// state. On BERT M1 for `x86-avx2` (seed 7, budget 2000) the best state
/// the walks visit is predicted at 2.47 ms, the best after polish at 1.04
/// ms, from 2500 more predictions (about 5 ms in a release build).
pub fn polish(p: &Problem, model: &dyn CostModel, start: Config) -> (Config, u64) {
    let mut cur = start;
    let mut time = model.predict_one(p, &cur);
    let mut evaluated = 0;
    for _ in 0..POLISH_STEPS {
        let mut best: Option<(f64, Config)> = None;
        for a in 0..p.axes.len() {
            for level in 0..p.levels {
                if p.fixed(a, level) {
                    continue;
                }
                let (up, down) = steps(&p.walk_choices(&cur, a, level), cur.tiles[a][level]);
                let single = up.into_iter().chain(down).map(|s| {
                    let mut n = cur.clone();
                    n.tiles[a][level] = s;
                    n
                });
                for n in single.chain(reblocked_rows(p, &cur, a, level)) {
                    if !(0..p.levels).all(|l| p.fits(&n, l) && p.keeps_parallelism(&cur, &n, l)) {
                        continue;
                    }
                    evaluated += 1;
                    let t = model.predict_one(p, &n);
                    if t < time && best.as_ref().is_none_or(|(bt, _)| t < *bt) && p.valid(&n) {
                        best = Some((t, n));
                    }
                }
            }
        }
        match best {
            Some((t, n)) => (time, cur) = (t, n),
            None => {
                let repacked = p.best_packing_with(&cur, &|c| model.predict_one(p, c));
                evaluated += 1;
                let t = model.predict_one(p, &repacked);
                if t < time && p.valid(&repacked) {
                    (time, cur) = (t, repacked);
                } else {
                    break;
                }
            }
        }
    }
    (cur, evaluated)
}

/// Polish's moves that change a middle tile level and the register tile
/// below it together: the middle level to the nearest sizes of 3 · 2^p
/// above and below its own (which a middle level may take under a tile
/// covering its axis, [`space::multiples_of_three`]), the register tile to
/// each of that size's divisors from half to twice its own. A register
/// tile of 6 rows needs a parent that 6 divides, and neither move alone
/// predicts faster (the parent's size alone changes little; the register
/// tile cannot change first), so descent by single steps never reaches
/// it, nor do walks, whose steps double and halve sizes.
fn reblocked_rows(p: &Problem, cur: &Config, a: usize, level: usize) -> Vec<Config> {
    let register = p.levels - 1;
    if level == 0 || level + 1 != register || p.fixed(a, register) || cur.vector == Some(a) {
        return Vec::new();
    }
    let (size, rows) = (cur.tiles[a][level], cur.tiles[a][register]);
    let threes: Vec<u64> = p.walk_choices(cur, a, level).into_iter().filter(|s| s % 3 == 0).collect();
    let above = threes.iter().copied().find(|&s| s > size);
    let below = threes.iter().copied().rev().find(|&s| s < size);
    let mut out = Vec::new();
    for s in above.into_iter().chain(below) {
        for r in space::divisors(s).into_iter().filter(|&r| r != rows && 2 * r >= rows && r <= 2 * rows) {
            let mut n = cur.clone();
            n.tiles[a][level] = s;
            n.tiles[a][register] = r;
            if p.tiles_fit(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The sizes a `tile` and an `invTile` step move a tile of size `cur` to,
/// among the sorted `choices`. A step at least doubles (halves) the size
/// where a choice allows it: an axis with many divisors (768) would
/// otherwise need dozens of steps to grow, and walks are ~100 steps.
fn steps(choices: &[u64], cur: u64) -> (Option<u64>, Option<u64>) {
    let up = choices.iter().find(|&&s| s >= 2 * cur).or_else(|| choices.iter().find(|&&s| s > cur));
    let down = choices.iter().rev().find(|&&s| 2 * s <= cur).or_else(|| choices.iter().rev().find(|&&s| s < cur));
    (up.copied(), down.copied())
}

#[derive(Clone, Debug)]
enum Action {
    Tile,
    InvTile,
    Cache,
    VThread,
}

/// `cache-scale=0`: Formula 2's ratios are about 4 between CPU caches and
/// about 30 between GPU shared memory and registers, against tile benefits
/// of 1–2; these factors let the walk stay at a level long enough to grow
/// its tile (docs/search.md, "How the defaults were chosen").
pub const DEFAULT_CACHE_SCALE_CPU: f64 = 0.1;
pub const DEFAULT_CACHE_SCALE_GPU: f64 = 0.01;

/// The cache boost of Algorithm 1 at step `t`.
pub fn cache_boost(t: f64) -> f64 {
    3.0 / (1.0 + (-(5f64.ln()) / 10.0 * (t - 10.0)).exp())
}

/// The probability that a state reached at temperature `temp` joins the
/// top results.
pub fn keep_probability(temp: f64) -> f64 {
    1.0 - 1.0 / (1.0 + (-0.5 * (-temp.ln() - 10.0)).exp())
}

/// Where an action goes from a state.
enum Move {
    Tile { axis: usize, level: usize, size: u64 },
    VThreads { axis: usize, vthreads: u64 },
    To(Config),
}

impl Move {
    /// The state the move makes from `cfg`.
    fn from(self, cfg: &Config) -> Config {
        match self {
            Move::Tile { axis, level, size } => {
                let mut n = cfg.clone();
                n.tiles[axis][level] = size;
                n
            }
            Move::VThreads { axis, vthreads } => {
                let mut n = cfg.clone();
                n.vthreads[axis] = vthreads;
                n
            }
            Move::To(n) => n,
        }
    }
}

/// What a step's tile benefits need of the state it moves from (its
/// traffic and footprint at the level, its micro-kernel's terms): the
/// same for every action of the step, so computed once, when first needed.
struct Here<'a> {
    p: &'a Problem,
    cfg: &'a Config,
    level: usize,
    traffic_footprint: std::cell::OnceCell<(f64, f64)>,
    kernel: std::cell::OnceCell<[f64; 4]>,
    /// Scratch for the completed states the step weighs.
    completed: std::cell::RefCell<Config>,
}

impl<'a> Here<'a> {
    fn new(p: &'a Problem, cfg: &'a Config, level: usize) -> Self {
        Here { p, cfg, level, traffic_footprint: std::cell::OnceCell::new(), kernel: std::cell::OnceCell::new(), completed: std::cell::RefCell::new(cfg.clone()) }
    }

    fn traffic_footprint(&self) -> (f64, f64) {
        *self.traffic_footprint.get_or_init(|| (self.p.traffic(self.cfg, self.level).max(1.0), self.p.footprint(self.cfg, self.level).max(1) as f64))
    }

    fn kernel_terms(&self) -> [f64; 4] {
        *self.kernel.get_or_init(|| self.kernel_terms_of(self.cfg))
    }

    /// The micro-kernel's terms of `cfg` completed below this level, made
    /// in the scratch state (a step weighs a dozen moves).
    fn kernel_terms_of(&self, cfg: &Config) -> [f64; 4] {
        let mut completed = self.completed.borrow_mut();
        self.p.complete_into(cfg, self.level, &mut completed);
        self.p.kernel_terms(&completed)
    }
}

impl Markov {
    /// Formula 1's benefit of the move of axis `axis`'s tile that makes
    /// `next`.
    fn tile_benefit(here: &Here<'_>, next: &Config, axis: usize) -> f64 {
        let (p, cfg, level) = (here.p, here.cfg, here.level);
        let Some(f2) = p.fitting_footprint(next, level) else { return 0.0 };
        if !p.keeps_parallelism(cfg, next, level) {
            return 0.0;
        }
        let (q, f) = here.traffic_footprint();
        // Roller's traffic takes reduction axes at their extent: a
        // reduction tile's move leaves it as it was.
        let q2 = if p.axes[axis].spatial { p.traffic(next, level).max(1.0) } else { q };
        let f2 = f2.max(1) as f64;
        q * f2 / (q2 * f) * Self::kernel_ratio(here, next)
    }

    /// On CPUs, what Formula 1 cannot see: the change in the micro-kernel's
    /// efficiency ([`Problem::kernel_terms`]) the move makes, counting the
    /// terms this level decides (the register tile at the innermost level,
    /// the accumulator's reduction run at [`Problem::run_level`]). 1 on
    /// GPUs.
    fn kernel_ratio(here: &Here<'_>, next: &Config) -> f64 {
        let (p, level) = (here.p, here.level);
        if p.gpu() {
            return 1.0;
        }
        let (innermost, run) = (level + 1 == p.levels, p.run_level() == Some(level));
        if !innermost && !run {
            return 1.0;
        }
        let (a, b) = (here.kernel_terms(), here.kernel_terms_of(next));
        let mut r = 1.0;
        if innermost {
            r *= b[0] * b[1] * b[2] / (a[0] * a[1] * a[2]).max(1e-12);
        }
        if run {
            r *= b[3] / a[3].max(1e-12);
        }
        r
    }

    fn cache_benefit(&self, p: &Problem, cfg: &Config, level: usize, step: usize) -> f64 {
        let t = &p.target;
        let (Some(low), Some(high)) = (t.memory_level(&t.tile_levels[level].memory), t.memory_level(&t.tile_levels[level + 1].memory)) else { return 0.0 };
        let s = p.footprint(cfg, level).max(low.line_bytes as u64) as f64;
        // GB/s is bytes per nanosecond.
        let b = (low.latency_ns + s / low.bandwidth_gbs.max(1e-9)) / (high.latency_ns + s / high.bandwidth_gbs.max(1e-9));
        b * cache_boost(step as f64) * self.scale(p)
    }

    /// The `cache-scale` in effect: the option, or for 0 the default of
    /// the target's kind (chosen by experiment, docs/search.md).
    fn scale(&self, p: &Problem) -> f64 {
        if self.cache_scale > 0.0 {
            self.cache_scale
        } else if p.gpu() {
            DEFAULT_CACHE_SCALE_GPU
        } else {
            DEFAULT_CACHE_SCALE_CPU
        }
    }

    /// Every action from (`cfg`, `level`) with its benefit (0: infeasible).
    fn actions(&self, p: &Problem, cfg: &Config, level: usize, step: usize) -> Vec<(Action, f64, Move)> {
        let mut out = Vec::new();
        let here = Here::new(p, cfg, level);
        // Each tile move is weighed on one scratch copy (set, weighed,
        // reset): the drawn move alone makes a new state.
        let mut scratch = cfg.clone();
        for a in 0..p.axes.len() {
            if p.fixed(a, level) {
                continue;
            }
            let (up, down) = steps(&p.walk_choices(cfg, a, level), cfg.tiles[a][level]);
            for (action, size) in [(Action::Tile, up), (Action::InvTile, down)] {
                if let Some(s) = size {
                    scratch.tiles[a][level] = s;
                    out.push((action, Self::tile_benefit(&here, &scratch, a), Move::Tile { axis: a, level, size: s }));
                    scratch.tiles[a][level] = cfg.tiles[a][level];
                }
            }
        }
        if level + 1 < p.levels {
            let mut n = cfg.clone();
            let ok = level + 1 != p.thread_level.unwrap_or(usize::MAX) || p.fix_threads(&mut n);
            let b = if ok && p.fits(&n, level + 1) { self.cache_benefit(p, cfg, level, step) } else { 0.0 };
            out.push((Action::Cache, b, Move::To(n)));
        } else if p.vthread_ok {
            for a in 0..p.axes.len() {
                if !p.axes[a].spatial {
                    continue;
                }
                let x = cfg.tiles[a][level];
                let v = cfg.vthreads[a];
                if let Some(v2) = super::space::divisors(x).into_iter().find(|&d| d > v) {
                    let w = p.bank_width_elems.max(1);
                    let b = x.div_ceil(v * w) as f64 / x.div_ceil(v2 * w) as f64;
                    out.push((Action::VThread, b, Move::VThreads { axis: a, vthreads: v2 }));
                }
            }
        }
        out
    }

    /// One walk of Algorithm 1; appends the kept states to `top`.
    fn walk(&self, p: &Problem, start: Config, rng: &mut Rng, steps: &mut Steps<'_>, top: &mut Top, taken: &mut [u64; 4]) {
        let mut e = start;
        let mut level = 0;
        let mut temp = self.temperature;
        let mut step = 0;
        while temp > self.threshold && !steps.spent() {
            let actions = self.actions(p, &e, level, step);
            let weights: Vec<f64> = actions.iter().map(|(_, b, _)| *b).collect();
            let Some(i) = rng.roulette(&weights) else { break };
            let (action, _, next) = actions.into_iter().nth(i).expect("drawn index");
            let next = next.from(&e);
            taken[action.clone() as usize] += 1;
            if matches!(action, Action::Cache) {
                level += 1;
            }
            e = next;
            *steps.visited += 1;
            if rng.unit() < keep_probability(temp) {
                top.keep(p, &e, level);
            }
            temp /= 2.0;
            step += 1;
        }
        top.keep(p, &e, level);
    }
}

/// The states the walks keep, each once, completed: they go to `packer`
/// to have their packing chosen. Completing a state and choosing its
/// packing costs dozens of model predictions, and walks revisit the same
/// states often: with a high `threshold` every walk is one step long and a
/// budget of 20000 made as many walks end in a handful of states (53 s in
/// a debug build before, found by tilec-fuzz). Ranking removes duplicates
/// and orders by prediction, so keeping each state once changes no pick.
struct Top {
    seen: std::collections::BTreeSet<(Config, usize)>,
    packer: std::sync::mpsc::SyncSender<Config>,
}

impl Top {
    fn keep(&mut self, p: &Problem, state: &Config, level: usize) {
        if self.seen.insert((state.clone(), level)) {
            // The packer only stops early if it panicked; its thread's join
            // reports that.
            let _ = self.packer.send(p.complete(state, level));
        }
    }
}

/// How many kept states may wait for the packer: the walks wait when it
/// falls that far behind, so a search stopped by `max-seconds` finishes
/// packing its states soon after.
const PACKER_QUEUE: usize = 64;

/// Runs `walks` (which keep states in the [`Top`] they are given) with
/// each kept state's packing chosen on another thread meanwhile
/// ([`Problem::best_packing_with`] by `model`), and returns the kept
/// states: the walks never read a packing, so they come back as if packed
/// in turn, in the order kept. (The packing was 40% of construction on
/// conv3d.)
fn walk_and_pack(p: &Problem, model: &dyn CostModel, walks: impl FnOnce(&mut Top)) -> Vec<Config> {
    std::thread::scope(|scope| {
        let (packer, queue) = std::sync::mpsc::sync_channel::<Config>(PACKER_QUEUE);
        let packed = scope.spawn(move || queue.into_iter().map(|c| p.best_packing_with(&c, &|c| model.predict_one(p, c))).collect::<Vec<_>>());
        let mut top = Top { seen: Default::default(), packer };
        walks(&mut top);
        drop(top);
        packed.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

impl Strategy for Markov {
    fn name(&self) -> &'static str {
        "markov"
    }

    fn run(&mut self, p: &Problem, cx: &mut SearchCx) -> Result<Vec<Config>, String> {
        if self.cache_scale < 0.0 {
            return Err(format!("cache-scale must not be negative (got {})", self.cache_scale));
        }
        if !(self.temperature > self.threshold && self.threshold > 0.0) {
            return Err(format!("markov needs temperature > threshold > 0 (got temperature={} threshold={})", self.temperature, self.threshold));
        }
        let mut rng = Rng::new(cx.seed);
        let mut walks = 0;
        let mut taken = [0u64; 4];
        // Each vector axis the space offers gets the budget: the walks
        // that grow a register tile along one axis are a different search
        // from those along another, and splitting one budget between them
        // starves both (measured: GEMM 1024 went from 59 to 43 GFLOP/s).
        //
        // Each `dot` intrinsic option gets the budget too, for the same
        // reason: its micro-kernel (k multiply-adds per lane and
        // instruction, its own throughput and latency) balances against
        // loads differently, so its register tiles are another search.
        // So does each warp (`mma`) option on GPUs: its warp tiles are
        // whole 16 × 8 intrinsic tiles. `fma` options get no walks: the
        // instruction is the vectorised loop's own, the model predicts
        // them alike, and their states are the vector walks' along the
        // `m` axis (docs/search.md).
        //
        // A restricted problem (one mapping, `mapping=K`) walks from its
        // option's start alone, whatever kind the option is.
        let dots: Vec<usize> = match p.only_intrinsic {
            Some(k) => vec![k],
            None => (0..p.intrinsics.len()).filter(|&i| p.intrinsics[i].is_dot() || p.intrinsics[i].is_warp()).collect(),
        };
        let plain = if p.only_intrinsic.is_some() { Vec::new() } else { p.vector_choices() };
        let starts: Vec<Config> = plain.iter().map(|&vector| Config { vector, ..p.initial() }).chain(dots.iter().map(|&i| p.start(Some(i)))).collect();
        let budget = cx.budget;
        let per_axis = self.start_budget(budget, starts.len());
        let (model, mut steps) = cx.model_and_steps();
        let kept = walk_and_pack(p, model, |top| {
            for start in starts {
                *steps.budget = steps.visited.saturating_add(per_axis);
                while !steps.spent() {
                    let before = *steps.visited;
                    self.walk(p, start.clone(), &mut rng, &mut steps, top, &mut taken);
                    walks += 1;
                    if *steps.visited == before {
                        break; // stuck at the start: nothing feasible to do
                    }
                }
            }
        });
        let axes: Vec<&str> = p.vector_axes.iter().map(|&v| p.axes[v].name.as_str()).collect();
        let mut over = if plain.len() > 1 { format!(", budget {per_axis} per vector axis ({})", axes.join(", ")) } else { String::new() };
        if !dots.is_empty() {
            let names: Vec<String> = dots.iter().map(|&i| p.describe_intrinsic(i)).collect();
            over.push_str(&format!(", and {per_axis} per intrinsic option ({})", names.join("; ")));
        }
        cx.budget = budget;
        if per_axis < budget {
            over.push_str(&format!(" (op-budget {} over {} starts)", self.op_budget, plain.len() + dots.len()));
        }
        cx.note(format!("{walks} walks of at most {} steps{over}, cache-scale {}", (self.temperature / self.threshold).log2().ceil(), self.scale(p)));
        cx.note(format!("actions taken: tile {}, invTile {}, cache {}, setVThread {}", taken[0], taken[1], taken[2], taken[3]));
        let mut ranked = cx.rank(p, kept);
        if self.polish > 0 && !ranked.is_empty() {
            let (mut evaluated, mut improved) = (0, 0);
            let mut polished = Vec::new();
            for c in ranked.iter().take(self.polish as usize) {
                let (n, e) = polish(p, cx.model(), c.clone());
                evaluated += e;
                improved += usize::from(n != *c);
                polished.push(n);
            }
            let best_before = cx.predict(p, &ranked[0]);
            let started = polished.len();
            // Polished and walked states alternate, each list in the
            // model's order: the measured top k then has both, so where
            // the model is wrong about a polished neighbourhood (measured
            // on ResNet-50 R8 on a Zen 4 host: polished states only, 74
            // GFLOP/s; the walks' best, 98) the walks' states still get
            // measured.
            let polished = cx.rank(p, polished);
            let mut both = Vec::with_capacity(polished.len() + ranked.len());
            let mut walked = ranked.into_iter();
            for c in polished {
                both.push(c);
                both.extend(walked.next());
            }
            both.extend(walked);
            let mut seen = std::collections::BTreeSet::new();
            both.retain(|c| seen.insert(c.clone()));
            ranked = both;
            cx.note(format!(
                "polish: {improved} of the best {} states improved, {evaluated} states evaluated; best predicted {:.2} -> {:.2} µs",
                started,
                best_before * 1e6,
                cx.predict(p, &ranked[0]) * 1e6
            ));
        }
        Ok(leaders_first(ranked))
    }
}

/// `ranked` with the best state of each start (each vector axis, each
/// intrinsic option) moved to the front, in the model's order, the rest
/// after them in theirs: the first state is the same, and a measured top
/// k sees every kind of micro-kernel the model could rank. The model is
/// least sure across starts (a masked tail against a transposed copy, a
/// gather against a broadcast): on ResNet-18 C9, a strided 1x1
/// convolution collapsed to a GEMM over 7 x 7 points, the walks along the
/// points took the whole measured top 8 while the vector along the output
/// channels, which divides them exactly, was never timed.
fn leaders_first(ranked: Vec<Config>) -> Vec<Config> {
    let mut starts = std::collections::BTreeSet::new();
    let (leaders, rest): (Vec<Config>, Vec<Config>) = ranked.into_iter().partition(|c| starts.insert((c.vector, c.intrinsic)));
    leaders.into_iter().chain(rest).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_keep_each_state_once() {
        let m = crate::testing::parse(crate::samples::OPS[0]);
        let f = &m.funcs[0];
        let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
        let p = Problem::new(f, op, tilec::target::builtin("x86-avx2").unwrap(), 16).unwrap();
        let start = p.initial();
        let kept = walk_and_pack(&p, &crate::search::AnalyticModel, |top| {
            top.keep(&p, &start, 0);
            top.keep(&p, &start, 0);
            top.keep(&p, &start, 1);
        });
        assert_eq!(kept, vec![p.best_packing(&p.complete(&start, 0)), p.best_packing(&p.complete(&start, 1))]);
    }

    #[test]
    fn each_starts_best_state_comes_before_the_rest() {
        let state = |vector: Option<usize>, intrinsic: Option<usize>, size: u64| Config { tiles: vec![vec![size]], vthreads: vec![1], pack: vec![0], order: vec![0], vector, intrinsic };
        let ranked = vec![state(Some(0), None, 1), state(Some(0), None, 2), state(Some(0), None, 3), state(Some(1), None, 1), state(Some(0), Some(0), 1), state(Some(1), None, 2), state(None, None, 1)];
        let reordered = leaders_first(ranked.clone());
        // The model's best stays first; every start's best follows, in the
        // model's order; then the others, in theirs. Nothing is lost.
        let want = [0, 3, 4, 6, 1, 2, 5].map(|i| ranked[i].clone());
        assert_eq!(reordered, want);
    }

    #[test]
    fn the_annealing_curves_are_the_papers() {
        assert!((cache_boost(10.0) - 1.5).abs() < 1e-12);
        assert!((cache_boost(0.0) - 0.5).abs() < 1e-12);
        assert!(cache_boost(100.0) > 2.99);
        assert!(keep_probability(1.0) > 0.99);
        assert!((keep_probability((-10f64).exp()) - 0.5).abs() < 1e-12);
        assert!(keep_probability(1e-30) < 0.01);
    }
}
