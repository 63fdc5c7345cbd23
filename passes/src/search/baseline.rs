//! The baselines: `random` (seeded uniform draws from the space) and
//! `exhaustive` (every point of a small space; with enough measurements,
//! the true optimum every other strategy's regret is measured against).

use super::registry::StrategyDecl;
use super::rng::Rng;
use super::space::{Config, Problem};
use super::{SearchCx, Strategy};
use tilec::pass::{OptionDecl, OptionKind, PassOptions};

pub const RANDOM: StrategyDecl = StrategyDecl { name: "random", summary: "seeded draws", options: &[], measures: false, create: |_: &PassOptions| Box::new(Random) };

pub const EXHAUSTIVE: StrategyDecl = StrategyDecl {
    name: "exhaustive",
    summary: "every point of a small space",
    options: &[OptionDecl { name: "max-space", kind: OptionKind::UInt, default: "100000", help: "exhaustive: refuse spaces with more points than this" }],
    measures: false,
    create: |o: &PassOptions| Box::new(Exhaustive { max_space: o.uint("max-space") }),
};

/// `random`: `budget` draws, each axis a uniformly drawn chain of sizes (and
/// on GPUs a virtual-thread count); where the op has intrinsic options,
/// the intrinsic choice is drawn first (none or an option, uniformly) and
/// the sizes given it. Without measurements the draws are
/// ranked by the model; with them, the first `measure-top-k` valid draws
/// are measured in the order drawn (random search).
pub struct Random;

impl Random {
    fn draw(p: &Problem, rng: &mut Rng) -> Config {
        // No draw where there is no option: today's sequence of draws.
        let choices = p.intrinsic_choices();
        let intrinsic = if p.intrinsics.is_empty() { None } else { choices[rng.below(choices.len())] };
        let mut cfg = p.start(intrinsic);
        for a in 0..p.axes.len() {
            for level in 0..p.levels {
                // Levels below are still 1 (an intrinsic's size), so every
                // choice is allowed.
                let c = p.choices(&cfg, a, level);
                cfg.tiles[a][level] = c[rng.below(c.len())];
            }
            if p.vthread_ok && p.axes[a].spatial {
                let inner = cfg.tiles[a][p.levels - 1];
                let d: Vec<u64> = super::knobs::VTHREAD_VALUES.into_iter().filter(|&v| inner.is_multiple_of(v)).collect();
                cfg.vthreads[a] = d[rng.below(d.len())];
            }
        }
        for &r in &p.packable {
            let c = p.pack_choices(r);
            cfg.pack[r] = c[rng.below(c.len())];
        }
        cfg.order = p.orders[rng.below(p.orders.len())].clone();
        if cfg.intrinsic.is_none() {
            let vectors = p.vector_choices();
            cfg.vector = vectors[rng.below(vectors.len())];
        }
        cfg
    }
}

impl Strategy for Random {
    fn name(&self) -> &'static str {
        "random"
    }

    fn run(&mut self, p: &Problem, cx: &mut SearchCx) -> Result<Vec<Config>, String> {
        let mut rng = Rng::new(cx.seed);
        let mut draws = Vec::new();
        // Draws repeat often in small spaces: a set, not `draws.contains`
        // (quadratic: 20000 draws took 5 s; found by tilec-fuzz).
        let mut seen = std::collections::HashSet::new();
        while !cx.spent() {
            cx.visited += 1;
            let c = Self::draw(p, &mut rng);
            if !seen.contains(&c) && p.valid(&c) {
                seen.insert(c.clone());
                draws.push(c);
            }
        }
        if cx.will_measure() {
            // Random search: measure in the order drawn.
            return Ok(draws);
        }
        Ok(cx.rank(p, draws))
    }
}

/// `exhaustive`: every valid point of the space, ranked by the model (and
/// measured up to `measure-top-k`). Refuses spaces larger than `max-space`;
/// stops early, with the points enumerated so far, at `max-seconds`.
pub struct Exhaustive {
    pub max_space: u64,
}

impl Strategy for Exhaustive {
    fn name(&self) -> &'static str {
        "exhaustive"
    }

    fn run(&mut self, p: &Problem, cx: &mut SearchCx) -> Result<Vec<Config>, String> {
        let size = p.space_size();
        if size > self.max_space as u128 {
            return Err(format!("the schedule space of this op has {size} points, more than max-space={}", self.max_space));
        }
        let chains: Vec<Vec<Vec<u64>>> = (0..p.axes.len()).map(|a| p.chains(a)).collect();
        let vts: Vec<Vec<u64>> = (0..p.axes.len()).map(|a| if p.vthread_ok && p.axes[a].spatial { vec![1, 2, 4] } else { vec![1] }).collect();
        let packs = p.pack_combinations();
        let vectors = p.vector_choices();
        // Each point is ranked as it is enumerated, so that `max-seconds`
        // bounds the predictions too: ranking ten million points after the
        // enumeration stopped took longer than enumerating them (a tilec-fuzz
        // hang). Same order as `SearchCx::rank`: valid points, fastest
        // predicted first, ties in the configurations' order (each point is
        // enumerated once, so nothing needs removing).
        let mut all: Vec<(f64, Config)> = Vec::new();
        let mut idx = vec![0usize; p.axes.len()];
        let mut vidx = vec![0usize; p.axes.len()];
        'outer: loop {
            let cfg = Config { tiles: (0..p.axes.len()).map(|a| chains[a][idx[a]].clone()).collect(), vthreads: (0..p.axes.len()).map(|a| vts[a][vidx[a]]).collect(), pack: packs[0].clone(), order: p.orders[0].clone(), vector: vectors[0], intrinsic: None };
            let vt_ok = (0..p.axes.len()).all(|a| cfg.tiles[a][p.levels - 1] % cfg.vthreads[a] == 0);
            // The intrinsics' points are points of the chains too (their
            // sizes a subset), each with the vector its option fixes.
            // A warp intrinsic's lanes are its own: no vector.
            let choices = std::iter::once((None, vectors.clone())).chain((0..p.intrinsics.len()).map(|i| (Some(i), vec![if p.intrinsics[i].is_warp() { None } else { p.intrinsics[i].m_axis() }])));
            for (intrinsic, v) in choices.flat_map(|(i, vs)| vs.into_iter().map(move |v| (i, v))) {
                let cfg = Config { vector: v, intrinsic, ..cfg.clone() };
                if vt_ok && p.valid(&cfg) {
                    // Packing and loop order do not change validity.
                    for pack in &packs {
                        for order in &p.orders {
                            cx.visited += 1;
                            let point = Config { pack: pack.clone(), order: order.clone(), ..cfg.clone() };
                            if p.valid(&point) {
                                all.push((cx.predict(p, &point), point));
                            }
                        }
                        if cx.past_deadline() {
                            break 'outer;
                        }
                    }
                } else {
                    cx.visited += (packs.len() * p.orders.len()) as u64;
                }
            }
            if cx.past_deadline() {
                break 'outer;
            }
            // Odometer over (chain, vthread) per axis, last axis fastest.
            let mut a = p.axes.len();
            loop {
                if a == 0 {
                    break 'outer;
                }
                a -= 1;
                vidx[a] += 1;
                if vidx[a] < vts[a].len() {
                    break;
                }
                vidx[a] = 0;
                idx[a] += 1;
                if idx[a] < chains[a].len() {
                    break;
                }
                idx[a] = 0;
            }
        }
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        Ok(all.into_iter().map(|(_, c)| c).collect())
    }

    fn failure_help(&self) -> String {
        "use strategy=markov or roller for large spaces, or raise max-space".to_string()
    }
}
