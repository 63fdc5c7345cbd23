//! The search space as data: the knobs of a point ([`Config`]), each with
//! an ordered list of values, for strategies that move through the space
//! knob by knob (Ansor-AF-DS's gradient descent over n-hop neighbours, an
//! evolutionary search) and for learned models' features and records.
//!
//! The knobs of a problem, in a fixed order ([`KnobSpace::knobs`]):
//!
//! - [`Knob::Intrinsic`], first, where the problem has intrinsic options
//!   ([`Problem::intrinsics`]): -1 for none, else the option's index. The
//!   knobs after it take their values given it (tile sizes without partial
//!   tiles and in whole intrinsic tiles, the vector on its `m` axis), so
//!   drawing knobs in order draws points that fit the intrinsic. A hop or
//!   mutation of this knob alone keeps the other knobs, so it gives a
//!   valid point only where they already fit (the vector on the option's
//!   `m` axis, whole intrinsic tiles).
//! - [`Knob::Tile`]: the tile size of an axis at a tile level (every axis,
//!   every level, outermost first); its values are
//!   [`Problem::choices`]: the divisors of the level above (the extent's,
//!   and the powers of two below it, at the outermost level) that are
//!   multiples of the level below (of the virtual threads at the innermost).
//!   A tile the target fixes (a reduction axis at a level without reduction
//!   loops) has one value.
//! - [`Knob::VThread`]: the virtual threads of a spatial axis, on targets
//!   that have them ([`Problem::vthread_ok`]): 1, 2 or 4 that divide the
//!   axis' innermost tile (what `exhaustive` enumerates), in whole
//!   intrinsic tiles per virtual thread where the point has an intrinsic.
//! - [`Knob::Vector`]: the vector axis, one of [`Problem::vector_choices`]
//!   (encoded as the axis index, -1 for none).
//! - [`Knob::Pack`]: per packable read, [`Problem::pack_choices`].
//! - [`Knob::Order`]: the loop order, an index into [`Problem::orders`].
//!
//! A knob's values may depend on the other knobs (a tile size on the
//! levels above and below it): [`KnobSpace::values`] takes the point. A
//! **hop** (Ansor-AF-DS, §5.1) moves one knob to the next larger or the
//! next smaller of its values given the rest of the point; an **n-hop
//! neighbour** changes `n` distinct knobs by one hop each. An unconstrained
//! space of `m` knobs gives `C(m, n) · 2^n` of them; here fewer, where a
//! knob is at the end of its list, or a move makes the point invalid.

use super::rng::Rng;
use super::space::{Config, Problem, divisors, gcd};
use std::collections::BTreeSet;

/// One knob of a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Knob {
    Intrinsic,
    Tile { axis: usize, level: usize },
    VThread { axis: usize },
    Vector,
    Pack { read: usize },
    Order,
}

/// The virtual-thread counts the space offers (those dividing the axis'
/// innermost tile), as `exhaustive` enumerates them.
pub const VTHREAD_VALUES: [u64; 3] = [1, 2, 4];

/// Draws [`KnobSpace::sample_uniform`], [`KnobSpace::mutate`] and
/// [`KnobSpace::crossover`] make before they give up.
pub const MAX_TRIES: usize = 64;

/// The most hops [`n_hop`] takes (2^16 directions per set of knobs is
/// already far more than a search can predict).
pub const MAX_HOPS: usize = 16;

/// Anything made of knobs with ordered values: what [`n_hop`] walks.
pub trait KnobVector {
    type Point: Clone + Ord;
    fn knob_count(&self) -> usize;
    fn get(&self, point: &Self::Point, knob: usize) -> i64;
    fn set(&self, point: &mut Self::Point, knob: usize, value: i64);
    /// The values `knob` may take given the rest of `point`, ascending.
    fn ordered_values(&self, point: &Self::Point, knob: usize) -> Vec<i64>;
}

/// The next larger (`up`) or smaller value of `current` among the
/// ascending `values`.
fn hop(values: &[i64], current: i64, up: bool) -> Option<i64> {
    if up { values.iter().copied().find(|&v| v > current) } else { values.iter().copied().rev().find(|&v| v < current) }
}

/// Every point `n` hops from `base` in `space`, each once, `base` left
/// out: for each set of `n` distinct knobs (ascending, in lexicographic
/// order) and each of the `2^n` directions (up before down, the first knob
/// slowest), the knobs moved one after another in knob order, each to its
/// next value given the moves before. A combination where a knob cannot
/// move gives nothing. Empty for `n` of 0, above the knobs, or above
/// [`MAX_HOPS`].
pub fn n_hop<S: KnobVector>(space: &S, base: &S::Point, n: usize) -> Vec<S::Point> {
    let m = space.knob_count();
    let mut out = Vec::new();
    if n == 0 || n > m || n > MAX_HOPS {
        return out;
    }
    let mut seen = BTreeSet::new();
    seen.insert(base.clone());
    let mut combination: Vec<usize> = (0..n).collect();
    loop {
        for directions in 0..1u64 << n {
            let mut point = base.clone();
            let moved = combination.iter().enumerate().all(|(i, &k)| {
                let up = directions >> (n - 1 - i) & 1 == 0;
                match hop(&space.ordered_values(&point, k), space.get(&point, k), up) {
                    Some(v) => {
                        space.set(&mut point, k, v);
                        true
                    }
                    None => false,
                }
            });
            if moved && seen.insert(point.clone()) {
                out.push(point);
            }
        }
        // The next combination, lexicographically.
        let Some(i) = (0..n).rev().find(|&i| combination[i] < m - n + i) else { break };
        combination[i] += 1;
        for j in i + 1..n {
            combination[j] = combination[j - 1] + 1;
        }
    }
    out
}

/// The knobs of one problem's space.
pub struct KnobSpace<'a> {
    pub problem: &'a Problem,
    knobs: Vec<Knob>,
}

impl<'a> KnobSpace<'a> {
    pub fn new(p: &'a Problem) -> KnobSpace<'a> {
        let mut knobs: Vec<Knob> = Vec::new();
        // Only where there are options: the other problems' knob vectors
        // (records, learned rows) keep their layout.
        if !p.intrinsics.is_empty() {
            knobs.push(Knob::Intrinsic);
        }
        for axis in 0..p.axes.len() {
            knobs.extend((0..p.levels).map(|level| Knob::Tile { axis, level }));
        }
        if p.vthread_ok {
            knobs.extend((0..p.axes.len()).filter(|&a| p.axes[a].spatial).map(|axis| Knob::VThread { axis }));
        }
        knobs.push(Knob::Vector);
        knobs.extend(p.packable.iter().map(|&read| Knob::Pack { read }));
        knobs.push(Knob::Order);
        KnobSpace { problem: p, knobs }
    }

    /// The knobs, in the order of [`KnobSpace::encode`].
    pub fn knobs(&self) -> &[Knob] {
        &self.knobs
    }

    /// The value of `knob` in `cfg`.
    pub fn value(&self, cfg: &Config, knob: Knob) -> i64 {
        match knob {
            Knob::Intrinsic => cfg.intrinsic.map_or(-1, |i| i as i64),
            Knob::Tile { axis, level } => cfg.tiles[axis][level] as i64,
            Knob::VThread { axis } => cfg.vthreads[axis] as i64,
            Knob::Vector => cfg.vector.map_or(-1, |v| v as i64),
            Knob::Pack { read } => cfg.pack[read] as i64,
            Knob::Order => self.problem.orders.iter().position(|o| *o == cfg.order).map_or(-1, |i| i as i64),
        }
    }

    /// Sets `knob` of `cfg` to `value`, which must be one of its values
    /// (false, and `cfg` unchanged, for one that cannot be stored).
    pub(super) fn assign(&self, cfg: &mut Config, knob: Knob, value: i64) -> bool {
        let p = self.problem;
        match knob {
            Knob::Intrinsic if value == -1 => cfg.intrinsic = None,
            Knob::Intrinsic if (0..p.intrinsics.len() as i64).contains(&value) => cfg.intrinsic = Some(value as usize),
            Knob::Tile { axis, level } if value > 0 => cfg.tiles[axis][level] = value as u64,
            Knob::VThread { axis } if value > 0 => cfg.vthreads[axis] = value as u64,
            Knob::Vector if value == -1 => cfg.vector = None,
            Knob::Vector if (0..p.axes.len() as i64).contains(&value) => cfg.vector = Some(value as usize),
            Knob::Pack { read } if (0..=u8::MAX as i64).contains(&value) => cfg.pack[read] = value as u8,
            Knob::Order if (0..p.orders.len() as i64).contains(&value) => cfg.order.clone_from(&p.orders[value as usize]),
            _ => return false,
        }
        true
    }

    /// The values `knob` may take given the rest of `cfg`, ascending.
    pub fn values(&self, cfg: &Config, knob: Knob) -> Vec<i64> {
        let p = self.problem;
        match knob {
            Knob::Intrinsic => p.intrinsic_choices().into_iter().map(|i| i.map_or(-1, |i| i as i64)).collect(),
            Knob::Tile { axis, level } => p.choices(cfg, axis, level).into_iter().map(|s| s as i64).collect(),
            Knob::VThread { axis } => {
                // Each virtual thread's share of the innermost tile is
                // whole intrinsic tiles, where there is an intrinsic
                // (`Problem::choices` asks the same of the tile).
                let inner = cfg.tiles[axis][p.levels - 1];
                let unit = p.intrinsic_of(cfg).map_or(1, |x| x.size_of(axis));
                VTHREAD_VALUES.iter().filter(|&&v| inner.is_multiple_of(v * unit)).map(|&v| v as i64).collect()
            }
            Knob::Vector if p.intrinsic_of(cfg).is_some_and(|x| x.is_warp()) => vec![-1],
            Knob::Vector if p.intrinsic_of(cfg).is_some() => p.intrinsic_of(cfg).and_then(|x| x.m_axis()).map_or(vec![-1], |a| vec![a as i64]),
            Knob::Vector => {
                let mut v: Vec<i64> = p.vector_choices().into_iter().map(|v| v.map_or(-1, |a| a as i64)).collect();
                v.sort_unstable();
                v
            }
            Knob::Pack { read } => p.pack_choices(read).into_iter().map(i64::from).collect(),
            Knob::Order => (0..p.orders.len() as i64).collect(),
        }
    }

    /// Once [`Knob::Intrinsic`] is drawn, the knobs after it start from
    /// [`Problem::start`] of the choice (tiles of whole intrinsic tiles),
    /// so that every size drawn level by level has values.
    pub(super) fn restart_after(&self, cfg: &mut Config, k: Knob) {
        if k == Knob::Intrinsic {
            *cfg = self.problem.start(cfg.intrinsic);
        }
    }

    /// The knob vector of `cfg`: one value per knob of
    /// [`KnobSpace::knobs`] (for features and records; stable for a
    /// problem).
    pub fn encode(&self, cfg: &Config) -> Vec<i64> {
        self.knobs.iter().map(|&k| self.value(cfg, k)).collect()
    }

    /// The point of a knob vector; `None` for a vector of another length
    /// or one whose values are not the knobs' ([`KnobSpace::consistent`]).
    /// Resources are not checked: see [`KnobSpace::valid`].
    pub fn decode(&self, values: &[i64]) -> Option<Config> {
        if values.len() != self.knobs.len() {
            return None;
        }
        let mut cfg = self.problem.initial();
        for (&k, &v) in self.knobs.iter().zip(values) {
            if !self.assign(&mut cfg, k, v) {
                return None;
            }
        }
        self.consistent(&cfg).then_some(cfg)
    }

    /// Does every knob of `cfg` hold one of its values given the others
    /// (tile sizes dividing the level above and multiples of the level
    /// below, virtual threads dividing the innermost tile, a vector axis,
    /// packing and loop order the space offers)?
    pub fn consistent(&self, cfg: &Config) -> bool {
        let p = self.problem;
        let shape = cfg.tiles.len() == p.axes.len() && cfg.tiles.iter().all(|t| t.len() == p.levels) && cfg.vthreads.len() == p.axes.len() && cfg.pack.len() == p.info.reads.len();
        shape
            && cfg.pack.iter().enumerate().all(|(r, &c)| p.pack_choices(r).contains(&c))
            && (0..p.axes.len()).all(|a| p.vthread_ok && p.axes[a].spatial || cfg.vthreads[a] == 1)
            && self.knobs.iter().all(|&k| self.values(cfg, k).contains(&self.value(cfg, k)))
    }

    /// Is `cfg` a point of the space that fits the target
    /// ([`KnobSpace::consistent`], then [`Problem::valid`], the resource
    /// check)?
    pub fn valid(&self, cfg: &Config) -> bool {
        self.consistent(cfg) && self.problem.valid(cfg)
    }

    /// A valid point, each knob drawn uniformly from its values given the
    /// knobs before it (tile sizes outermost level first, so every chain
    /// of sizes can come out), redrawn while the point does not fit the
    /// target, at most [`MAX_TRIES`] times; `None` if none fit.
    pub fn sample_uniform(&self, rng: &mut Rng) -> Option<Config> {
        (0..MAX_TRIES).find_map(|_| self.draw(rng).map(|(cfg, _)| cfg).filter(|cfg| self.valid(cfg)))
    }

    /// One point drawn knob by knob, each uniformly from its values given
    /// the knobs before it, whether it fits the target or not, with the
    /// natural log of Knuth's estimator of the draw: the product of the
    /// numbers of values each knob had. Its mean over draws is the number
    /// of points the walk can reach, and weighting each draw by it turns
    /// shares among draws into shares among points (`rules.rs`). `None`
    /// where a knob has no values.
    pub fn draw(&self, rng: &mut Rng) -> Option<(Config, f64)> {
        let mut cfg = self.problem.initial();
        let mut log_weight = 0.0;
        for &k in &self.knobs {
            let values = self.values(&cfg, k);
            if values.is_empty() {
                return None;
            }
            log_weight += (values.len() as f64).ln();
            let v = values[rng.below(values.len())];
            self.assign(&mut cfg, k, v);
            self.restart_after(&mut cfg, k);
        }
        Some((cfg, log_weight))
    }

    /// Up to `n` distinct valid points drawn with
    /// [`KnobSpace::sample_uniform`], in the order drawn; fewer when the
    /// space has fewer (the draws stop after `n` · [`MAX_TRIES`] misses).
    pub fn distinct_samples(&self, rng: &mut Rng, n: usize) -> Vec<Config> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let mut misses = 0;
        while out.len() < n && misses < n.max(1) * MAX_TRIES {
            match self.sample_uniform(rng) {
                Some(c) if seen.insert(c.clone()) => out.push(c),
                Some(_) => misses += 1,
                None => break,
            }
        }
        out
    }

    /// The valid points `n` hops from `cfg` ([`n_hop`]), in its
    /// deterministic order, tile sizes hopping as `moves` says.
    pub fn neighbours(&self, cfg: &Config, n: usize, moves: TileMoves) -> Vec<Config> {
        let hops = match moves {
            TileMoves::Level => n_hop(self, cfg, n),
            TileMoves::Chain => n_hop(&ChainHops::new(self), cfg, n),
        };
        hops.into_iter().filter(|c| self.valid(c)).collect()
    }

    /// Every size axis `a` may take at `level` whatever the other levels
    /// hold: at the outermost level its [`Problem::choices`] with nothing
    /// below, elsewhere every divisor of those. Ascending.
    fn chain_sizes(&self, a: usize, level: usize) -> Vec<u64> {
        let p = self.problem;
        let mut bare = p.initial();
        bare.vthreads[a] = 1;
        for l in 1..p.levels {
            bare.tiles[a][l] = 1;
        }
        let outer = p.choices(&bare, a, 0);
        if level == 0 {
            return outer;
        }
        let mut all: Vec<u64> = outer.iter().flat_map(|&s| divisors(s)).collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    /// `cfg` with one knob, drawn at random among those with more than one
    /// value, set to another of its values drawn at random; the first
    /// valid such point in [`MAX_TRIES`] draws, else `None`.
    pub fn mutate(&self, rng: &mut Rng, cfg: &Config) -> Option<Config> {
        let movable: Vec<(Knob, Vec<i64>)> =
            self.knobs.iter().map(|&k| (k, self.values(cfg, k).into_iter().filter(|&v| v != self.value(cfg, k)).collect::<Vec<i64>>())).filter(|(_, others)| !others.is_empty()).collect();
        if movable.is_empty() {
            return None;
        }
        (0..MAX_TRIES).find_map(|_| {
            let (k, others) = &movable[rng.below(movable.len())];
            let mut n = cfg.clone();
            self.assign(&mut n, *k, others[rng.below(others.len())]);
            self.valid(&n).then_some(n)
        })
    }

    /// A child of `a` and `b`: each knob in order from one parent drawn at
    /// random, or from the other where that value is not allowed given the
    /// knobs before; the first valid child in [`MAX_TRIES`] draws, else
    /// `None`.
    pub fn crossover(&self, rng: &mut Rng, a: &Config, b: &Config) -> Option<Config> {
        (0..MAX_TRIES).find_map(|_| {
            let mut child = self.problem.initial();
            for &k in &self.knobs {
                let (first, second) = if rng.below(2) == 0 { (a, b) } else { (b, a) };
                let values = self.values(&child, k);
                let v = [self.value(first, k), self.value(second, k)].into_iter().find(|v| values.contains(v))?;
                self.assign(&mut child, k, v);
                self.restart_after(&mut child, k);
            }
            self.valid(&child).then_some(child)
        })
    }
}

impl KnobVector for KnobSpace<'_> {
    type Point = Config;

    fn knob_count(&self) -> usize {
        self.knobs.len()
    }

    fn get(&self, point: &Config, knob: usize) -> i64 {
        self.value(point, self.knobs[knob])
    }

    fn set(&self, point: &mut Config, knob: usize, value: i64) {
        self.assign(point, self.knobs[knob], value);
    }

    fn ordered_values(&self, point: &Config, knob: usize) -> Vec<i64> {
        self.values(point, self.knobs[knob])
    }
}

/// How a hop moves a tile size ([`KnobSpace::neighbours`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileMoves {
    /// To the next of [`Problem::choices`]: the sizes that divide the
    /// level above and are multiples of the level below. A tile moves only
    /// within the room its neighbours leave: making the register tile of
    /// an axis larger than a level above allows takes a hop of every level
    /// in between.
    Level,
    /// To the next size any tile of the axis may take at that level (the
    /// seed's hop along an iterator's list of factors of the extent), the
    /// other levels of the axis repaired to stay nested
    /// ([`ChainHops::set_tile`]): one hop trades a factor between
    /// levels.
    Chain,
}

/// The knob space whose tile hops are [`TileMoves::Chain`] moves, with
/// [`KnobSpace::chain_sizes`] of every axis and level.
struct ChainHops<'s, 'a> {
    space: &'s KnobSpace<'a>,
    sizes: Vec<Vec<Vec<u64>>>,
}

impl<'s, 'a> ChainHops<'s, 'a> {
    fn new(space: &'s KnobSpace<'a>) -> Self {
        let p = space.problem;
        let sizes = (0..p.axes.len()).map(|a| (0..p.levels).map(|l| space.chain_sizes(a, l)).collect()).collect();
        ChainHops { space, sizes }
    }

    /// `cfg` with the tile of axis `a` at `level` set to `size` and the
    /// axis' other levels repaired so that each still divides the one
    /// above: a level above that is not a multiple of the one below it
    /// takes the nearest (in ratio; the larger on a tie) of its chain sizes
    /// that is; a level below takes its gcd with the one above; the virtual
    /// threads their gcd with the innermost tile. Fixed levels follow the
    /// level above. Where no size repairs a level the chain is left broken,
    /// so the point is not [`KnobSpace::consistent`].
    fn set_tile(&self, cfg: &mut Config, a: usize, level: usize, size: u64) {
        let p = self.space.problem;
        let t = &mut cfg.tiles[a];
        t[level] = size;
        for j in (0..level).rev() {
            if t[j].is_multiple_of(t[j + 1]) {
                continue;
            }
            let (below, old) = (t[j + 1], t[j] as f64);
            let nearest = self.sizes[a][j].iter().copied().filter(|s| s % below == 0).min_by(|&x, &y| (x as f64 / old).ln().abs().total_cmp(&(y as f64 / old).ln().abs()).then(y.cmp(&x)));
            match nearest {
                Some(s) => t[j] = s,
                None => return,
            }
        }
        for j in level + 1..p.levels {
            t[j] = gcd(t[j], t[j - 1]);
        }
        for j in 0..p.levels {
            if p.fixed(a, j) {
                t[j] = if j == 0 { p.axes[a].extent } else { t[j - 1] };
            }
        }
        cfg.vthreads[a] = gcd(cfg.vthreads[a], cfg.tiles[a][p.levels - 1]);
    }
}

impl KnobVector for ChainHops<'_, '_> {
    type Point = Config;

    fn knob_count(&self) -> usize {
        self.space.knobs.len()
    }

    fn get(&self, point: &Config, knob: usize) -> i64 {
        self.space.get(point, knob)
    }

    fn set(&self, point: &mut Config, knob: usize, value: i64) {
        match self.space.knobs[knob] {
            Knob::Tile { axis, level } if value > 0 => self.set_tile(point, axis, level, value as u64),
            _ => self.space.set(point, knob, value),
        }
    }

    fn ordered_values(&self, point: &Config, knob: usize) -> Vec<i64> {
        match self.space.knobs[knob] {
            Knob::Tile { axis, level } if !self.space.problem.fixed(axis, level) => self.sizes[axis][level].iter().map(|&s| s as i64).collect(),
            _ => self.space.ordered_values(point, knob),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;
    use super::*;
    use crate::testing::parse;
    use proptest::prelude::*;

    /// `m` knobs with the values 0..=9 each, independent of each other: the
    /// unconstrained space of Ansor-AF-DS's count.
    struct Grid {
        m: usize,
    }

    impl KnobVector for Grid {
        type Point = Vec<i64>;
        fn knob_count(&self) -> usize {
            self.m
        }
        fn get(&self, point: &Vec<i64>, knob: usize) -> i64 {
            point[knob]
        }
        fn set(&self, point: &mut Vec<i64>, knob: usize, value: i64) {
            point[knob] = value;
        }
        fn ordered_values(&self, _: &Vec<i64>, _: usize) -> Vec<i64> {
            (0..10).collect()
        }
    }

    fn binomial(m: usize, n: usize) -> usize {
        (0..n).fold(1, |c, i| c * (m - i) / (i + 1))
    }

    #[test]
    fn n_hop_neighbours_of_an_unconstrained_space_number_c_m_n_times_2_to_the_n() {
        // The seed's figures: 5 knobs give 10, 40 and 80 · 2 = 160 (its
        // text) 1-, 2- and 3-hop neighbours.
        let grid = Grid { m: 5 };
        let counts: Vec<usize> = (1..=3).map(|n| n_hop(&grid, &vec![5; 5], n).len()).collect();
        assert_eq!(counts, [10, 40, 80]);
        for m in 1..=6 {
            let grid = Grid { m };
            let base = vec![5; m];
            for n in 1..=m {
                let hops = n_hop(&grid, &base, n);
                assert_eq!(hops.len(), binomial(m, n) << n, "m={m} n={n}");
                let distinct: BTreeSet<&Vec<i64>> = hops.iter().collect();
                assert_eq!(distinct.len(), hops.len());
                for h in &hops {
                    let changed: Vec<i64> = h.iter().zip(&base).map(|(a, b)| a - b).filter(|d| *d != 0).collect();
                    assert_eq!(changed.len(), n, "{h:?}");
                    assert!(changed.iter().all(|d| d.abs() == 1), "{h:?}");
                }
            }
            assert!(n_hop(&grid, &base, 0).is_empty() && n_hop(&grid, &base, m + 1).is_empty());
        }
        // At the ends of the lists a knob moves one way only.
        assert_eq!(n_hop(&Grid { m: 2 }, &vec![0, 9], 1), vec![vec![1, 9], vec![0, 8]]);
        assert_eq!(n_hop(&Grid { m: 2 }, &vec![0, 9], 2), vec![vec![1, 8]]);
    }

    use crate::search::tests::GEMM;

    fn problem(src: &str, target: &str) -> Problem {
        let m = parse(src);
        let f = &m.funcs[0];
        let op = f.regions[f.body].ops.iter().copied().find(|&o| f.ops[o].kind.as_compute().is_some()).unwrap();
        Problem::new(f, op, tilec::target::builtin(target).unwrap(), 16).unwrap()
    }

    /// GEMM and the sample ops on a CPU and a GPU target.
    fn problems() -> Vec<Problem> {
        let mut v = Vec::new();
        for target in ["x86-avx2", "sm90"] {
            v.push(problem(GEMM, target));
            for src in crate::samples::OPS.iter().take(4) {
                v.push(problem(src, target));
            }
        }
        v
    }

    #[test]
    fn chain_hops_trade_factors_between_levels_where_level_hops_cannot() {
        let cpu = problem(GEMM, "x86-avx2");
        let space = KnobSpace::new(&cpu);
        let at = |i: [u64; 3]| {
            let mut c = cpu.initial();
            c.tiles[0] = i.to_vec();
            assert!(space.valid(&c), "{i:?}");
            c
        };
        let i_tiles = |moves: TileMoves, from: [u64; 3]| -> BTreeSet<Vec<u64>> {
            let base = at(from);
            space.neighbours(&base, 1, moves).into_iter().filter(|c| c.tiles[0] != base.tiles[0]).map(|c| c.tiles[0].clone()).collect()
        };
        // i's register tile (4) fills its L2 tile (4): a level hop cannot
        // grow it; a chain hop grows both (the L2 tile to the nearest
        // multiple of 8, 8 rather than 16).
        let level = i_tiles(TileMoves::Level, [16, 4, 4]);
        assert!(!level.iter().any(|t| t[2] > 4), "{level:?}");
        let chain = i_tiles(TileMoves::Chain, [16, 4, 4]);
        assert!(chain.contains(&vec![16, 8, 8]), "{chain:?}");
        // Down: the levels below take their gcd with the new size.
        let chain = i_tiles(TileMoves::Chain, [8, 8, 2]);
        assert!(chain.contains(&vec![4, 4, 2]) && chain.contains(&vec![8, 4, 2]), "{chain:?}");
        // Up through every level: the core tile too.
        let chain = i_tiles(TileMoves::Chain, [4, 4, 4]);
        assert!(chain.contains(&vec![8, 8, 8]), "{chain:?}");
        // A hop still moves one knob by one step: the chain hops of i's
        // register tile are its next sizes up and down.
        let base = at([16, 4, 4]);
        let register: BTreeSet<u64> = space.neighbours(&base, 1, TileMoves::Chain).iter().filter(|c| c.tiles[0][2] != 4).map(|c| c.tiles[0][2]).collect();
        assert_eq!(register, BTreeSet::from([2, 8]));
    }

    #[test]
    fn the_knobs_of_gemm_on_a_cpu_and_a_gpu() {
        let cpu = problem(GEMM, "x86-avx2");
        let space = KnobSpace::new(&cpu);
        let tiles: Vec<Knob> = (0..3).flat_map(|axis| (0..3).map(move |level| Knob::Tile { axis, level })).collect();
        let mut expected = tiles.clone();
        expected.extend([Knob::Vector, Knob::Pack { read: 0 }, Knob::Pack { read: 1 }, Knob::Order]);
        assert_eq!(space.knobs(), expected.as_slice());
        let start = cpu.initial();
        // k spans its extent at the core level (no reduction loops there).
        assert_eq!(space.encode(&start), vec![1, 1, 1, 1, 1, 1, 48, 1, 1, 1, 0, 0, 0]);
        assert_eq!(space.values(&start, Knob::Tile { axis: 2, level: 0 }), vec![48]);
        assert_eq!(space.values(&start, Knob::Tile { axis: 2, level: 1 }), vec![1, 2, 3, 4, 6, 8, 12, 16, 24, 48]);
        // j (the default), i, and k, along which A is contiguous.
        assert_eq!(cpu.vector_axes, vec![1, 0, 2]);
        assert_eq!(space.values(&start, Knob::Vector), vec![0, 1, 2]);
        assert_eq!(space.values(&start, Knob::Order), vec![0, 1]);
        // One hop from the start: i and j grow at the core level (not at
        // the levels below, which must divide a core tile of 1), k at l2
        // (but not at l1, which must divide l2's 1), the vector axis from j
        // to k and to i, packing of a or b, the order; no tile moves down
        // from 1.
        let one = space.neighbours(&start, 1, TileMoves::Level);
        let moved: Vec<Vec<i64>> = one.iter().map(|c| space.encode(c)).collect();
        assert_eq!(
            moved,
            vec![
                vec![2, 1, 1, 1, 1, 1, 48, 1, 1, 1, 0, 0, 0],
                vec![1, 1, 1, 2, 1, 1, 48, 1, 1, 1, 0, 0, 0],
                vec![1, 1, 1, 1, 1, 1, 48, 2, 1, 1, 0, 0, 0],
                vec![1, 1, 1, 1, 1, 1, 48, 1, 1, 2, 0, 0, 0],
                vec![1, 1, 1, 1, 1, 1, 48, 1, 1, 0, 0, 0, 0],
                vec![1, 1, 1, 1, 1, 1, 48, 1, 1, 1, 1, 0, 0],
                vec![1, 1, 1, 1, 1, 1, 48, 1, 1, 1, 0, 1, 0],
                vec![1, 1, 1, 1, 1, 1, 48, 1, 1, 1, 0, 0, 1],
            ]
        );
        assert_eq!(space.neighbours(&start, 1, TileMoves::Level), one, "deterministic");

        let gpu = problem(GEMM, "sm90");
        let space = KnobSpace::new(&gpu);
        assert!(gpu.vthread_ok);
        assert!(space.knobs().contains(&Knob::VThread { axis: 0 }) && !space.knobs().contains(&Knob::VThread { axis: 2 }));
        assert!(!space.knobs().iter().any(|k| matches!(k, Knob::Pack { .. })));
    }

    #[test]
    fn decode_refuses_vectors_that_are_not_points() {
        let p = problem(GEMM, "x86-avx2");
        let space = KnobSpace::new(&p);
        let start = space.encode(&p.initial());
        assert_eq!(space.decode(&start), Some(p.initial()));
        assert_eq!(space.decode(&start[1..]), None, "too short");
        let with = |i: usize, v: i64| {
            let mut x = start.clone();
            x[i] = v;
            x
        };
        assert_eq!(space.decode(&with(1, 2)), None, "i.l2 = 2 does not divide i.core = 1");
        assert_eq!(space.decode(&with(0, 0)), None, "a tile of 0");
        assert_eq!(space.decode(&with(6, 24)), None, "k spans its extent at the core level");
        assert_eq!(space.decode(&with(9, 3)), None, "vector along an axis the op does not have");
        assert_eq!(space.decode(&with(10, 7)), None, "no tile level 6 to pack at");
        assert_eq!(space.decode(&with(12, 2)), None, "two orders only");
        assert!(space.decode(&with(0, 64)).is_some());
    }

    fn differing_knobs(space: &KnobSpace, a: &Config, b: &Config) -> usize {
        space.encode(a).iter().zip(space.encode(b)).filter(|(x, y)| **x != *y).count()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Whatever the knob space makes is a valid point that decodes back
        /// from its knob vector: samples, 1- and 2-hop neighbours (each
        /// once; `n` knobs changed by level hops), mutants (one knob changed) and
        /// children (every knob from a parent).
        #[test]
        fn every_point_the_knob_space_makes_is_valid_and_decodes_back(seed in any::<u64>()) {
            let mut moved = 0;
            for p in problems() {
                let space = KnobSpace::new(&p);
                let mut rng = Rng::new(seed);
                let (Some(a), Some(b)) = (space.sample_uniform(&mut rng), space.sample_uniform(&mut rng)) else {
                    panic!("no sample of {} on {}", p.func, p.target.name);
                };
                for c in [&a, &b] {
                    prop_assert!(space.valid(c));
                    prop_assert_eq!(space.decode(&space.encode(c)), Some(c.clone()));
                }
                for (n, moves) in [(1, TileMoves::Level), (2, TileMoves::Level), (1, TileMoves::Chain), (2, TileMoves::Chain)] {
                    let hops = space.neighbours(&a, n, moves);
                    moved += hops.len();
                    let distinct: BTreeSet<&Config> = hops.iter().collect();
                    prop_assert_eq!(distinct.len(), hops.len());
                    prop_assert!(!hops.contains(&a));
                    for h in &hops {
                        prop_assert!(space.valid(h), "{:?}", h);
                        prop_assert_eq!(space.decode(&space.encode(h)), Some(h.clone()));
                        // A chain hop also repairs the levels around the
                        // knobs it moves.
                        match moves {
                            TileMoves::Level => prop_assert_eq!(differing_knobs(&space, &a, h), n),
                            TileMoves::Chain => prop_assert!(differing_knobs(&space, &a, h) >= 1),
                        }
                    }
                }
                if let Some(m) = space.mutate(&mut rng, &a) {
                    prop_assert!(space.valid(&m));
                    prop_assert_eq!(space.decode(&space.encode(&m)), Some(m.clone()));
                    prop_assert_eq!(differing_knobs(&space, &a, &m), 1);
                }
                if let Some(child) = space.crossover(&mut rng, &a, &b) {
                    prop_assert!(space.valid(&child));
                    prop_assert_eq!(space.decode(&space.encode(&child)), Some(child.clone()));
                    let (ea, eb, ec) = (space.encode(&a), space.encode(&b), space.encode(&child));
                    prop_assert!(ec.iter().enumerate().all(|(i, v)| *v == ea[i] || *v == eb[i]));
                }
            }
            prop_assert!(moved > 0, "some sample has a valid neighbour");
        }
    }

    /// The same seed gives the same samples, mutants and children.
    #[test]
    fn the_knob_space_is_deterministic_for_a_seed() {
        let p = problem(GEMM, "sm90");
        let space = KnobSpace::new(&p);
        let run = || {
            let mut rng = Rng::new(3);
            let a = space.sample_uniform(&mut rng).unwrap();
            let b = space.sample_uniform(&mut rng).unwrap();
            (space.mutate(&mut rng, &a), space.crossover(&mut rng, &a, &b), a, b)
        };
        assert_eq!(run(), run());
    }
}
