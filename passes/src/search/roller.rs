//! `roller`: the tree-based construction baseline (Roller, OSDI'22, as
//! Gensor describes it). Level by level, outermost first, each of the `k`
//! best partial schedules grows its tile greedily: among the axes, the
//! step with the best data-reuse score `(Q − Q′) / (F′ − F)` (traffic saved
//! per byte of footprint added) that still fits the level; every state on
//! the way is a candidate. The innermost spatial axis grows in steps
//! aligned to the level's line (transaction) size where its sizes allow.
//! The `k` candidates with the best predicted time go on to the next level
//! (the tree), and the last level's are ranked by the model.

use super::registry::StrategyDecl;
use super::space::{Config, Problem};
use super::{SearchCx, Strategy};
use tilec::pass::{OptionDecl, OptionKind, PassOptions};

pub const DECL: StrategyDecl = StrategyDecl {
    name: "roller",
    summary: "greedy tree construction by data reuse",
    options: &[OptionDecl { name: "beam", kind: OptionKind::UInt, default: "8", help: "roller: candidates kept per level" }],
    measures: false,
    create: |o: &PassOptions| Box::new(Roller { k: o.uint("beam") as usize }),
};

pub struct Roller {
    pub k: usize,
}

impl Roller {
    /// The next size of axis `a` at `level`: the next larger choice, and for
    /// the contiguous (vector) axis, the next multiple of the alignment if
    /// there is one.
    fn grow(p: &Problem, cfg: &Config, a: usize, level: usize) -> Option<u64> {
        let cur = cfg.tiles[a][level];
        let choices = p.walk_choices(cfg, a, level);
        if cfg.vector == Some(a) {
            let t = &p.target;
            let line = t.memory_level(&t.tile_levels[level].memory).map_or(1, |m| m.line_bytes as u64);
            let align = (line / p.info.output.elem.size_bytes().max(1)).max(1);
            if let Some(&s) = choices.iter().find(|&&s| s > cur && s % align == 0) {
                return Some(s);
            }
        }
        choices.into_iter().find(|&s| s > cur)
    }

    fn score(p: &Problem, cfg: &Config, next: &Config, level: usize) -> f64 {
        let dq = p.traffic(cfg, level) - p.traffic(next, level);
        let df = p.footprint(next, level) as f64 - p.footprint(cfg, level) as f64;
        if df <= 0.0 { if dq > 0.0 { f64::INFINITY } else { dq } } else { dq / df }
    }
}

impl Strategy for Roller {
    fn name(&self) -> &'static str {
        "roller"
    }

    fn run(&mut self, p: &Problem, cx: &mut SearchCx) -> Result<Vec<Config>, String> {
        // One start per vector axis the space offers, and one per
        // intrinsic option (its mapped axes' tiles grow in whole
        // intrinsic tiles: `Problem::choices`).
        // A restricted problem (one mapping) starts at its option alone.
        let mut beam: Vec<Config> = match p.only_intrinsic {
            Some(_) => Vec::new(),
            None => p.vector_choices().into_iter().map(|vector| Config { vector, ..p.initial() }).collect(),
        };
        beam.extend(p.intrinsic_choices().into_iter().flatten().map(|i| p.start(Some(i))));
        for level in 0..p.levels {
            let mut cands: Vec<Config> = Vec::new();
            for start in &beam {
                let mut cur = start.clone();
                if p.thread_level == Some(level) && !p.fix_threads(&mut cur) {
                    continue;
                }
                loop {
                    if cx.spent() {
                        break;
                    }
                    cx.visited += 1;
                    if p.fits(&cur, level) {
                        cands.push(cur.clone());
                    }
                    let mut best: Option<(f64, Config)> = None;
                    for a in 0..p.axes.len() {
                        if p.fixed(a, level) {
                            continue;
                        }
                        let Some(s) = Self::grow(p, &cur, a, level) else { continue };
                        let mut n = cur.clone();
                        n.tiles[a][level] = s;
                        if !p.fits(&n, level) || !p.keeps_parallelism(&cur, &n, level) {
                            continue;
                        }
                        let sc = Self::score(p, &cur, &n, level);
                        if best.as_ref().is_none_or(|(b, _)| sc > *b) {
                            best = Some((sc, n));
                        }
                    }
                    match best {
                        Some((_, n)) => cur = n,
                        None => break,
                    }
                }
            }
            let ranked = cx.rank_partial(p, cands, level);
            if ranked.is_empty() {
                break;
            }
            beam = ranked.into_iter().take(self.k.max(1)).collect();
        }
        cx.note(format!("beam of {}", self.k.max(1)));
        // Packing does not change the footprints Roller grows tiles by; each
        // finished tile gets the packing the model prefers for it.
        let packed: Vec<Config> = beam.iter().map(|c| p.best_packing_with(c, &|c| cx.predict(p, c))).collect();
        beam.extend(packed);
        Ok(cx.rank(p, beam))
    }
}
