//! Level 1: schedules on compute ops, drawn the way
//! `tilec_passes::samples::random_schedule` draws them (divisor chains of
//! tile sizes, one per tile level of the target; virtual threads; caches at
//! levels that take buffers; unrolling; a vector axis; a loop order), but
//! written as text, so that an input file alone says what ran. With
//! `invalid`, keys and values that break the rules turn up too.

use super::level0::Compute;
use crate::choices::G;
use std::sync::OnceLock;

/// What a schedule needs to know about a target.
pub struct TargetInfo {
    pub name: String,
    pub levels: usize,
    pub vector: bool,
    pub stageable: Vec<String>,
}

/// The built-in targets, read once from their descriptions.
pub fn targets() -> &'static [TargetInfo] {
    static T: OnceLock<Vec<TargetInfo>> = OnceLock::new();
    T.get_or_init(|| {
        ["x86-avx2", "sm90", "x86-avx512", "sm80"]
            .iter()
            .filter_map(|n| tilec::target::builtin(n))
            .map(|t| TargetInfo {
                name: t.name.clone(),
                levels: t.tile_levels.len(),
                vector: t.isa.vector_bits > 0,
                stageable: t
                    .memory
                    .iter()
                    .filter(|m| {
                        m.scope.is_some()
                            && (m.managed || t.tile_levels.iter().any(|l| l.memory == m.name))
                    })
                    .map(|m| m.name.clone())
                    .collect(),
            })
            .collect()
    })
}

pub fn target(name: &str) -> Option<&'static TargetInfo> {
    targets().iter().find(|t| t.name == name)
}

fn divisors(n: u64) -> Vec<u64> {
    (1..=n.min(4096)).filter(|d| n.is_multiple_of(*d)).collect()
}

/// A schedule for `c` on a random built-in target.
pub fn for_compute(g: &mut G, c: &Compute, invalid: u32) -> String {
    let all = targets();
    let t = &all[g.index(all.len())];
    on_target(g, c, t, invalid)
}

/// A schedule for `c` on `t`: `schedule "t" { ... }`.
pub fn on_target(g: &mut G, c: &Compute, t: &TargetInfo, invalid: u32) -> String {
    let wrong = |g: &mut G| invalid > 0 && g.chance(invalid, 100);
    let levels = t.levels;
    let axes: Vec<_> = c.axes().cloned().collect();
    let mut tiles: Vec<(String, Vec<u64>)> = Vec::new();
    for a in &axes {
        if g.chance(1, 5) {
            continue;
        }
        let mut sizes = vec![g.int(1, a.extent.max(1))];
        for _ in 1..levels {
            let prev = *sizes.last().expect("non-empty");
            sizes.push(g.pick(&divisors(prev)));
        }
        if wrong(g) {
            match g.index(3) {
                0 => sizes.push(3),
                1 => sizes[0] = a.extent.saturating_add(5),
                _ => sizes.reverse(),
            }
        }
        tiles.push((a.name.clone(), sizes));
    }
    let sizes_of = |name: &str, extent: u64| {
        tiles
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
            .unwrap_or_else(|| vec![extent; levels.max(1)])
    };
    let mut vthread = None;
    if !c.spatial.is_empty() && g.chance(1, 3) {
        let a = &c.spatial[g.index(c.spatial.len())];
        let v = g.pick(&[2u64, 3]);
        let s = sizes_of(&a.name, a.extent);
        let parent = if levels >= 2 { s[levels - 2] } else { a.extent };
        if (s.last().copied().unwrap_or(1) % v == 0 && parent % v == 0) || wrong(g) {
            vthread = Some((a.name.clone(), v));
        }
    }
    let mut cache = Vec::new();
    if !t.stageable.is_empty() {
        for r in c.all_reads() {
            let plain = r.idx.iter().all(|e| !e.contains("div"));
            if g.chance(1, 2) && (plain || wrong(g)) {
                let level = if wrong(g) {
                    "nowhere".to_string()
                } else {
                    g.pick(&t.stageable)
                };
                let name = if r
                    .name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
                    && !r.name.starts_with(|ch: char| ch.is_ascii_digit())
                {
                    r.name.clone()
                } else {
                    format!("\"{}\"", r.name)
                };
                cache.push((name, level));
            }
        }
    }
    let unroll = g.pick(&[0u64, 0, 4, 16, 64]);
    let mut vector = None;
    if t.vector && g.chance(1, 2) {
        let candidates: Vec<_> = c
            .spatial
            .iter()
            .filter(|a| sizes_of(&a.name, a.extent).last().copied().unwrap_or(1) > 1)
            .collect();
        if let Some(a) = candidates
            .last()
            .copied()
            .filter(|_| g.chance(2, 3))
            .or_else(|| candidates.get(g.index(candidates.len())).copied())
        {
            let vt = vthread
                .as_ref()
                .filter(|(n, _)| *n == a.name)
                .map_or(1, |(_, v)| *v);
            let trip = sizes_of(&a.name, a.extent).last().copied().unwrap_or(1) / vt;
            let widths: Vec<u64> = [2u64, 4, 8].into_iter().filter(|w| trip % w == 0).collect();
            if !widths.is_empty() {
                vector = Some((a.name.clone(), g.pick(&widths)));
            } else if wrong(g) {
                vector = Some((a.name.clone(), 3));
            }
        }
    }
    let mut order: Vec<String> = Vec::new();
    if g.chance(1, 3) {
        order = axes.iter().map(|a| a.name.clone()).collect();
        g.shuffle(&mut order);
        let keep = g.int(1, order.len().max(1) as u64) as usize;
        order.truncate(keep);
        if wrong(g) {
            order.push(order.first().cloned().unwrap_or_else(|| "nope".into()));
        }
    }
    let mut entries: Vec<String> = Vec::new();
    if !tiles.is_empty() {
        let body = tiles
            .iter()
            .map(|(n, s)| {
                format!(
                    "{n} = [{}]",
                    s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        entries.push(format!("tile = {{{body}}}"));
    }
    if !order.is_empty() {
        entries.push(format!("order = [{}]", order.join(", ")));
    }
    if let Some((a, v)) = vthread {
        entries.push(format!("vthread = {{{a} = {v}}}"));
    }
    if !cache.is_empty() {
        entries.push(format!(
            "cache = {{{}}}",
            cache
                .iter()
                .map(|(r, l)| format!("{r} = {l}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if unroll > 0 {
        entries.push(format!("unroll = {unroll}"));
    }
    if let Some((a, w)) = vector {
        entries.push(format!("vector = {{{a} = {w}}}"));
    }
    if wrong(g) {
        entries.push(
            g.pick(&[
                "bogus = 1",
                "tile = {}",
                "unroll = -1",
                "vector = {i = 0}",
                "\"quoted key\" = [1, [2, {x = y}]]",
                "order = \"i\"",
            ])
            .to_string(),
        );
        g.shuffle(&mut entries);
    }
    let name = if wrong(g) {
        g.pick(&["no-such-target", "host", ""]).to_string()
    } else {
        t.name.clone()
    };
    format!(
        "schedule \"{name}\" {{\n        {}\n      }}",
        entries.join(",\n        ")
    )
}
