//! GTA's resource-constrained rules (seed 001, §5, Table 4) as named rules
//! of the schedule space: each says when it applies to an op on a target
//! (the table's condition) and which points it removes because they cannot
//! fit. [`Problem::valid`] keeps a point only where every rule that
//! applies keeps it, and then asks the verifier's resource check
//! (`tilec::target::check_resources`), which has the last word.
//!
//! The rules split that check's constraints by the stage of the program
//! they belong to, the way GTA's derivation applies them (R1 → R2 → ... →
//! R5, its equation 4). A tile's footprint in a memory (`OpResources`,
//! docs/targets.md) has parts: the reads of the op's body, the reads of its
//! fused epilogue, and the output tile (a hardware cache) or the
//! accumulators (the innermost tile level's own managed memory). Each rule
//! holds some parts of some memories to their capacity:
//!
//! | rule | GTA | memories and parts |
//! |---|---|---|
//! | R1 `multi-level-tiling` | Multi-Level Tiling | each tile level's hardware cache: body reads (but the streamed ones, which no cache holds) and output; a GPU block's threads |
//! | R2 `multi-scope` | Set Multi-Scope | the innermost scope (registers): accumulators and the reads staged there, a GPU thread's registers; a CPU read's packed copy in its level |
//! | R3 `fuse-main-op` | Fuse Main Op | the intrinsic's stage computed at the innermost tile: whole intrinsic tiles |
//! | R4 `fuse-output-op` | Fuse Output Op | the fused epilogue's reads, in every memory |
//! | R5 `memory-limit` | AddMemLimit | a dedicated scratchpad (GPU shared memory): the body reads a block stages |
//!
//! When every rule applies, the rules other than R3 keep exactly the
//! points the resource check accepts (a unit test checks it on drawn
//! points), and docs/search.md's table names each rule as declared here
//! (a test reads it). A rule whose
//! condition fails keeps every point, as GTA does not generate its stage:
//! the verifier still removes what does not fit (the report counts those
//! apart). docs/search.md, "Resource-constrained rules", gives each
//! rule's reading of the paper and its measured share of the space.

use super::knobs::KnobSpace;
use super::rng::Rng;
use super::space::{Config, Problem};
use std::fmt::Write as _;
use tilec::ir::{AxisId, EntityRef};
use tilec::target::{FootprintPart, MemoryId, MemoryLevel, TargetKind};

/// One resource-constrained rule.
pub struct SpaceRule {
    /// GTA's numbering: `R1` ... `R5`.
    pub id: &'static str,
    /// tilec's name for it (reports, docs).
    pub name: &'static str,
    /// GTA's name (Table 4).
    pub gta_name: &'static str,
    /// GTA's condition, as Table 4 writes it.
    pub condition: &'static str,
    /// What it removes, in a line.
    pub summary: &'static str,
    applies: fn(&Problem) -> bool,
    fits: fn(&Problem, &Config) -> bool,
}

impl SpaceRule {
    /// Does the rule's condition hold for the op on its target?
    pub fn applies(&self, p: &Problem) -> bool {
        (self.applies)(p)
    }

    /// Does the rule keep `cfg`: it does not apply, or the point fits its
    /// constraints?
    pub fn keeps(&self, p: &Problem, cfg: &Config) -> bool {
        !self.applies(p) || (self.fits)(p, cfg)
    }
}

/// The rules, in GTA's order.
pub static RULES: [SpaceRule; 5] = [
    SpaceRule {
        id: "R1",
        name: "multi-level-tiling",
        gta_name: "Multi-Level Tiling",
        condition: "HasDataReuse(R, i) & HasMultiLevelCache(R, i)",
        summary: "each tile level's tile of the body's reads and the output fits the hardware cache it is tiled for; a GPU block has at most the threads a block may have",
        applies: |p| has_data_reuse(p) && p.levels >= 2,
        fits: multi_level_tiling,
    },
    SpaceRule {
        id: "R2",
        name: "multi-scope",
        gta_name: "Set Multi-Scope",
        condition: "HasDataReuse(R, i) & HasMultiScopeCache(R, i)",
        summary: "what a point places in the innermost scope (accumulators, reads staged in registers) fits it, within a GPU thread's registers; a CPU read's packed copy (but a streamed read's) fits the memory of the level it is packed at",
        applies: |p| has_data_reuse(p) && p.target.memory.iter().filter(|m| m.scope.is_some()).count() >= 2,
        fits: multi_scope,
    },
    SpaceRule {
        id: "R3",
        name: "fuse-main-op",
        gta_name: "Fuse Main Op",
        condition: "HasStagesFused(R)",
        summary: "a point that computes with a tensor intrinsic computes whole intrinsic tiles at its innermost tile: no partial tiles, the vector as wide as the intrinsic's lanes",
        applies: |p| !p.intrinsics.is_empty(),
        fits: |p, cfg| p.fits_intrinsic(cfg),
    },
    SpaceRule {
        id: "R4",
        name: "fuse-output-op",
        gta_name: "Fuse Output Op",
        condition: "HasStagesFused(R)",
        summary: "the fused epilogue's reads fit beside the tile in every memory: removes the points they push over a capacity",
        applies: |p| p.compute.has_epilogue,
        fits: fuse_output_op,
    },
    SpaceRule {
        id: "R5",
        name: "memory-limit",
        gta_name: "AddMemLimit",
        condition: "HasDSM(R)",
        summary: "the body reads a block stages in a dedicated scratchpad (GPU shared memory) fit what one block may allocate",
        applies: has_dsm,
        fits: memory_limit,
    },
];

/// The rule named `name` (`R1` or `multi-level-tiling`).
pub fn rule(name: &str) -> Option<&'static SpaceRule> {
    RULES.iter().find(|r| r.id == name || r.name == name)
}

/// Does every rule keep `cfg`?
pub fn keeps_all(p: &Problem, cfg: &Config) -> bool {
    RULES.iter().all(|r| r.keeps(p, cfg))
}

/// The first rule, in GTA's order, that removes `cfg`.
pub fn first_removing(p: &Problem, cfg: &Config) -> Option<usize> {
    RULES.iter().position(|r| !r.keeps(p, cfg))
}

/// HasDataReuse: some read touches fewer distinct elements than the op has
/// iteration points, so a tile that keeps it close is read more than once
/// (a GEMM's operands, a convolution's input and kernel, a scan's sliding
/// window; not a row mean's input, read once per element).
pub fn has_data_reuse(p: &Problem) -> bool {
    let res = p.resources();
    (0..p.compute.reads.len()).any(|r| !res.streamed(r))
}

/// HasDSM: a tile level other than the innermost keeps its tile in a
/// managed memory with buffers (GPU shared memory), which the program
/// allocates itself.
fn has_dsm(p: &Problem) -> bool {
    let t = &p.target;
    t.tile_levels[..p.levels.saturating_sub(1)].iter().any(|l| t.memory_level(&l.memory).is_some_and(|m| m.managed && m.scope.is_some()))
}

/// One footprint the resource check counts: a memory, the tile level whose
/// tile it holds, its parts' bytes by stage, and what one tile gets.
struct Footprint<'t> {
    level: usize,
    memory: &'t MemoryLevel,
    /// The body's reads (all of them in a hardware cache; those staged in
    /// a managed memory).
    body: u64,
    /// The fused epilogue's reads, counted the same way.
    epilogue: u64,
    /// The output tile (a hardware cache) or the accumulators (the
    /// innermost tile level's managed memory).
    result: u64,
    capacity: u64,
}

impl Footprint<'_> {
    fn base(&self) -> u64 {
        self.body.saturating_add(self.result)
    }
}

/// Every footprint the verifier's resource check counts for `cfg`
/// (`check.rs`): each tile level's tile in its memory, and over the
/// innermost tile each managed memory no tile level uses that holds staged
/// reads.
fn footprints<'p>(p: &'p Problem, cfg: &Config) -> Vec<Footprint<'p>> {
    let t = &*p.target;
    let res = p.resources();
    let plan = p.resource_plan(cfg);
    let body_reads = p.compute.reads.len();
    let innermost = p.levels - 1;
    let count = |level: usize, m: &'p MemoryLevel| {
        let id = t.memory_index(&m.name).map(MemoryId);
        let staged = |r: usize| id.is_some() && plan.staged.get(r).copied().flatten() == id;
        let range = |a: AxisId| p.range_of(cfg, a.index(), level);
        let mut f = Footprint { level, memory: m, body: 0, epilogue: 0, result: 0, capacity: res.capacity(level, m).bytes };
        res.footprint_parts(level, m, &staged, &mut |part| {
            let bytes = res.part_bytes(part, &range, plan.lanes);
            match part {
                FootprintPart::Read(r) if r < body_reads => f.body = f.body.saturating_add(bytes),
                FootprintPart::Read(_) => f.epilogue = f.epilogue.saturating_add(bytes),
                FootprintPart::Accumulator | FootprintPart::Output => f.result = f.result.saturating_add(bytes),
            }
        });
        f
    };
    let mut out: Vec<Footprint> = t.tile_levels.iter().enumerate().filter_map(|(l, tl)| t.memory_level(&tl.memory).map(|m| count(l, m))).collect();
    for m in t.memory.iter().filter(|m| m.managed && !t.tile_levels.iter().any(|l| l.memory == m.name)) {
        let f = count(innermost, m);
        if f.body > 0 || f.epilogue > 0 {
            out.push(f);
        }
    }
    out
}

/// Is `f` the innermost scope: the innermost tile level's own managed
/// memory, or a managed memory no tile level uses (a CPU's registers)?
fn innermost_scope(p: &Problem, f: &Footprint) -> bool {
    let t = &p.target;
    f.memory.managed && (f.level + 1 == p.levels || !t.tile_levels.iter().any(|l| l.memory == f.memory.name))
}

/// R1: hardware caches hold each level's body reads and output tile; a
/// GPU block's threads are within the limit.
fn multi_level_tiling(p: &Problem, cfg: &Config) -> bool {
    let caches = footprints(p, cfg).into_iter().filter(|f| !f.memory.managed).all(|f| f.base() <= f.capacity);
    caches && (p.thread_level.is_none() || p.threads(cfg) <= p.target.compute.max_threads_per_block.max(1) as u64)
}

/// R2: the innermost scope holds the accumulators and the body reads
/// staged there; a GPU thread's register estimate is within the limit; a
/// CPU read's packed copy fits its level's memory.
fn multi_scope(p: &Problem, cfg: &Config) -> bool {
    let fps = footprints(p, cfg);
    if !fps.iter().filter(|f| innermost_scope(p, f)).all(|f| f.base() <= f.capacity) {
        return false;
    }
    if p.target.kind == TargetKind::Cuda && !gpu_registers_fit(p, cfg) {
        return false;
    }
    // A packed copy is a buffer of the level's scope (a streamed read's
    // is not held to it, as the read itself is not: it passes through).
    let res = p.resources();
    (0..p.compute.reads.len()).filter(|&r| !res.streamed(r)).all(|r| {
        let Some(level) = cfg.pack_level(r) else {
            return true;
        };
        let Some(m) = p.target.memory_level(&p.target.tile_levels[level].memory) else {
            return true;
        };
        res.read_bytes(r, &|a| p.range_of(cfg, a.index(), level)) <= res.capacity(level, m).bytes
    })
}

/// The verifier's per-thread register estimate (`check.rs`) within
/// `max_registers_per_thread`.
fn gpu_registers_fit(p: &Problem, cfg: &Config) -> bool {
    let t = &p.target;
    let innermost = p.levels - 1;
    let Some(m) = t.memory_level(&t.tile_levels[innermost].memory).filter(|m| m.managed) else {
        return true;
    };
    let plan = p.resource_plan(cfg);
    let id = t.memory_index(&m.name).map(MemoryId);
    let cached: Vec<usize> = (0..p.nreads()).filter(|&r| id.is_some() && plan.staged.get(r).copied().flatten() == id).collect();
    let parts = p.resources().register_parts(&cached, &|a| p.range_of(cfg, a.index(), innermost), plan.lanes);
    parts.iter().fold(0u64, |s, (_, n)| s.saturating_add(*n)) <= t.compute.max_registers_per_thread as u64
}

/// R4: no footprint goes over its capacity because of the epilogue's
/// reads (one that is over without them is another rule's).
fn fuse_output_op(p: &Problem, cfg: &Config) -> bool {
    footprints(p, cfg).into_iter().all(|f| f.base() > f.capacity || f.base().saturating_add(f.epilogue) <= f.capacity)
}

/// R5: a managed memory with buffers that a tile level other than the
/// innermost keeps its tile in (GPU shared memory) holds the body reads
/// staged there.
fn memory_limit(p: &Problem, cfg: &Config) -> bool {
    footprints(p, cfg).into_iter().filter(|f| f.memory.managed && f.memory.scope.is_some() && !innermost_scope(p, f)).all(|f| f.body <= f.capacity)
}

/// How many draws of the space each rule removes: estimates of the
/// shares of an op's space (see [`estimate`]).
#[derive(Clone, Debug, Default)]
pub struct RuleShares {
    pub draws: usize,
    /// Knuth's estimate of the points of the space the draws walk.
    pub points: f64,
    /// Kish's effective sample size of the point-weighted shares,
    /// `(Σw)² / Σw²`: how many draws of equal weight they are worth.
    pub effective_draws: f64,
    /// Per rule (as [`RULES`]): does it apply?
    pub applies: Vec<bool>,
    /// Per rule: draws it is the first (in GTA's order) to remove, as
    /// (draws, point-weighted share).
    pub first: Vec<(usize, f64)>,
    /// Per rule: draws it removes, whatever the others do.
    pub alone: Vec<(usize, f64)>,
    /// Draws every rule keeps that the verifier's resource check removes.
    pub verifier: (usize, f64),
    /// Draws that are valid points.
    pub valid: (usize, f64),
}

/// Draws `draws` points of `p`'s space knob by knob (each knob uniform
/// over its values given those before: [`KnobSpace::draw`], the
/// distribution of `random` and of TLM's corpus) and counts what each
/// rule removes. Each figure comes twice: the share of the draws, and the
/// share of the space's points (draws weighted by Knuth's estimator, so a
/// knob with many values counts for as many points as it has).
pub fn estimate(p: &Problem, draws: usize, rng: &mut Rng) -> RuleShares {
    let space = KnobSpace::new(p);
    let n = RULES.len();
    let mut taken = Vec::new();
    for _ in 0..draws {
        if let Some(d) = space.draw(rng) {
            taken.push(d);
        }
    }
    // Weights relative to the largest, so the sums do not overflow.
    let top = taken.iter().map(|(_, w)| *w).fold(f64::NEG_INFINITY, f64::max);
    let weight: Vec<f64> = taken.iter().map(|(_, w)| (w - top).exp()).collect();
    let total: f64 = weight.iter().sum();
    let mut s = RuleShares { draws: taken.len(), applies: RULES.iter().map(|r| r.applies(p)).collect(), first: vec![(0, 0.0); n], alone: vec![(0, 0.0); n], ..RuleShares::default() };
    s.effective_draws = if total > 0.0 { total * total / weight.iter().map(|w| w * w).sum::<f64>() } else { 0.0 };
    s.points = if taken.is_empty() { 0.0 } else { (top.exp() * total / taken.len() as f64).max(0.0) };
    let add = |slot: &mut (usize, f64), w: f64| {
        slot.0 += 1;
        slot.1 += w / total;
    };
    for ((cfg, _), &w) in taken.iter().zip(&weight) {
        let kept: Vec<bool> = RULES.iter().map(|r| r.keeps(p, cfg)).collect();
        for (i, _) in kept.iter().enumerate().filter(|(_, k)| !**k) {
            add(&mut s.alone[i], w);
        }
        match kept.iter().position(|k| !k) {
            Some(i) => add(&mut s.first[i], w),
            None if p.valid(cfg) => add(&mut s.valid, w),
            None => add(&mut s.verifier, w),
        }
    }
    s
}

/// The report of `tilec --print-space-rules` for one op: each rule, whether
/// it applies, and the shares of the space it removes.
pub fn report(p: &Problem, draws: usize, seed: u64) -> String {
    let s = estimate(p, draws, &mut Rng::new(seed));
    let mut out = String::new();
    let pct = |(n, w): (usize, f64)| format!("{:>6.1}% {:>7.1}%", 100.0 * n as f64 / s.draws.max(1) as f64, 100.0 * w);
    let _ = writeln!(
        out,
        "space rules of `{}` (op `{}`) on `{}`: {} draws (seed {seed}) of about {:.3e} points; the points column weighs them as {:.0} draws",
        p.func,
        p.compute.label.as_deref().unwrap_or("compute"),
        p.target.name,
        s.draws,
        s.points,
        s.effective_draws
    );
    let _ = writeln!(out, "  {:<4} {:<20} {:<7}  {:<17}  {:<17}", "", "", "", "removes first", "removes alone");
    let _ = writeln!(out, "  {:<4} {:<20} {:<7}  {:>7} {:>8}  {:>7} {:>8}", "rule", "name", "applies", "draws", "points", "draws", "points");
    for (i, r) in RULES.iter().enumerate() {
        let _ = writeln!(out, "  {:<4} {:<20} {:<7}  {}  {}", r.id, r.name, if s.applies[i] { "yes" } else { "no" }, pct(s.first[i]), pct(s.alone[i]));
    }
    let _ = writeln!(out, "  {:<4} {:<28}  {}", "-", "verifier, after the rules", pct(s.verifier));
    let _ = writeln!(out, "  {:<4} {:<28}  {}", "-", "valid", pct(s.valid));
    out.lines().map(|l| format!("{}\n", l.trim_end())).collect()
}

#[cfg(test)]
mod tests;
