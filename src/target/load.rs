//! Reading target descriptions: TOML text → [`Target`], every error a
//! diagnostic pointing into the file; the semantic rules a description
//! keeps; the built-in files; and the [`TargetSet`] `--target` resolves in.
//!
//! Parsing goes through `toml`'s span-preserving document (`DeTable`):
//! serde reports syntax errors, unknown fields and wrong types with a byte
//! range, and the same document lets the semantic checks point at the
//! field they complain about (`memory[2].capacity_bytes`).

use super::{Binding, EXTRA_TYPE_NAMES, INTRINSIC_FEATURES, INTRINSIC_KINDS, OperandLayout, OrderEntry, Per, Target, TargetKind, host};
use crate::diag::{Diagnostic, Diagnostics, FileId, SourceMap, Span, closest};
use crate::ir::{ElemType, MemScope, TagLevel};
use serde::Deserialize;
use std::cell::OnceCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toml::Spanned;
use toml::de::DeValue;

/// A target description shipped inside the binary.
#[derive(Debug)]
pub struct Builtin {
    pub name: &'static str,
    /// Where the file lives in the repository.
    pub path: &'static str,
    pub text: &'static str,
}

/// The built-in targets, in `--list-targets` order (`host` follows them).
/// Each file's `name` is its file stem (a test checks).
pub const BUILTIN: &[Builtin] = &[
    Builtin { name: "x86-avx2", path: "targets/x86-avx2.toml", text: include_str!("../../targets/x86-avx2.toml") },
    Builtin { name: "x86-avx512", path: "targets/x86-avx512.toml", text: include_str!("../../targets/x86-avx512.toml") },
    Builtin { name: "sm80", path: "targets/sm80.toml", text: include_str!("../../targets/sm80.toml") },
    Builtin { name: "sm90", path: "targets/sm90.toml", text: include_str!("../../targets/sm90.toml") },
];

/// Registers `text` in `sources` as `file_name`, parses and validates it.
pub fn parse_target(sources: &mut SourceMap, file_name: &str, text: &str) -> Result<Target, Diagnostics> {
    let file = sources.add(file_name, text);
    parse_registered(sources, file).map(|(t, _)| t)
}

/// Reads, parses and validates a target description file.
pub fn load_target_file(sources: &mut SourceMap, path: &Path) -> Result<Target, Diagnostics> {
    let file = read_file(sources, path)?;
    parse_registered(sources, file).map(|(t, _)| t)
}

fn read_file(sources: &mut SourceMap, path: &Path) -> Result<FileId, Diagnostics> {
    let text = std::fs::read(path).map_err(|e| {
        let reason = if path.is_dir() { "it is a directory".to_string() } else { crate::input::io_reason(&e) };
        Diagnostic::error(format!("cannot read target description `{}`: {reason}", path.display()))
    })?;
    let text = String::from_utf8(text)
        .map_err(|e| Diagnostic::error(format!("target description `{}` is not UTF-8 (invalid byte at offset {})", path.display(), e.utf8_error().valid_up_to())))?;
    Ok(sources.add(path.display().to_string(), text))
}

/// Parses the description registered as `file`; also returns the span of
/// its `name` (for duplicate-name errors).
fn parse_registered(sources: &SourceMap, file: FileId) -> Result<(Target, Span), Diagnostics> {
    let text = sources.source(file);
    let toml_error = |e: toml::de::Error| -> Diagnostics {
        let range = e.span().unwrap_or(0..0);
        let range = range.start.min(text.len())..range.end.min(text.len());
        // The message may carry a second line ("expected ..."); the first
        // is the headline, the rest a note.
        let mut lines = e.message().trim_end().lines();
        let head = lines.next().unwrap_or("invalid target description").to_string();
        let mut d = Diagnostic::error(head).at(Span::new(file, range), "");
        let rest: Vec<&str> = lines.collect();
        if !rest.is_empty() {
            d = d.with_note(rest.join(" "));
        }
        Diagnostics::from(d.with_note("target descriptions are described in docs/targets.md"))
    };
    let root = toml::de::DeTable::parse(text).map_err(toml_error)?;
    let doc = Spanned::new(root.span(), DeValue::Table(root.get_ref().clone()));
    let mut target = Target::deserialize(toml::de::Deserializer::from(root)).map_err(toml_error)?;
    let loc = Locator { file, doc: &doc };
    let mut v = Validator { t: &target, loc: &loc, diags: Diagnostics::new(), order: Vec::new() };
    v.run();
    // In file order, however the checks ran.
    v.diags.0.sort_by_key(|d| d.span().map_or(0, |s| s.start));
    let name_span = loc.value(&[K("name")]);
    let (diags, order) = (v.diags, v.order);
    diags.into_result().map(|()| {
        target.set_order(order);
        (target, name_span)
    })
}

/// One step of a path into the document.
#[derive(Copy, Clone)]
enum Seg<'a> {
    K(&'a str),
    I(usize),
}
use Seg::{I, K};

/// Finds the spans of fields in the parsed document.
struct Locator<'d, 'i> {
    file: FileId,
    doc: &'d Spanned<DeValue<'i>>,
}

impl Locator<'_, '_> {
    /// The value at `path` and the key naming it (when the last step is a
    /// key), or the deepest ancestor present.
    fn find(&self, path: &[Seg]) -> (std::ops::Range<usize>, Option<std::ops::Range<usize>>) {
        let mut cur = self.doc;
        let mut key = None;
        for seg in path {
            let next = match (*seg, cur.get_ref()) {
                (K(k), DeValue::Table(t)) => t.get_key_value(k).map(|(kk, v)| (v, Some(kk.span()))),
                (I(i), DeValue::Array(a)) => a.get(i).map(|v| (v, None)),
                _ => None,
            };
            match next {
                Some((v, k)) => {
                    cur = v;
                    key = k;
                }
                None => return (key.unwrap_or_else(|| cur.span()), None),
            }
        }
        (cur.span(), key)
    }

    fn value(&self, path: &[Seg]) -> Span {
        Span::new(self.file, self.find(path).0)
    }

    /// The key naming the field (`capacity_bytes = ...` → `capacity_bytes`),
    /// for errors about a field as a whole.
    fn key(&self, path: &[Seg]) -> Span {
        let (v, k) = self.find(path);
        Span::new(self.file, k.unwrap_or(v))
    }
}

struct Validator<'a, 'd, 'i> {
    t: &'a Target,
    loc: &'a Locator<'d, 'i>,
    diags: Diagnostics,
    /// `loop_order` parsed as it is checked (whole when there are no
    /// errors).
    order: Vec<OrderEntry>,
}

impl Validator<'_, '_, '_> {
    fn err(&mut self, span: Span, message: String, label: &str) -> &mut Diagnostic {
        self.diags.push(Diagnostic::error(message).at(span, label));
        self.diags.0.last_mut().expect("just pushed")
    }

    fn run(&mut self) {
        self.general();
        self.compute();
        self.peaks();
        self.memory();
        self.tile_levels();
        self.loop_order();
        self.intrinsics();
    }

    fn general(&mut self) {
        let t = self.t;
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if t.name.is_empty() || !t.name.chars().all(ok) || t.name.ends_with(".toml") {
            let span = self.loc.value(&[K("name")]);
            self.err(span, format!("invalid target name `{}`", t.name), "not a target name")
                .notes
                .push("help: use letters, digits, `-`, `_` and `.`, not ending in `.toml` (names are told apart from paths by that)".into());
        }
        if t.sources.iter().all(|s| s.trim().is_empty()) {
            let span = self.loc.key(&[K("sources")]);
            self.err(span, "a target description must cite its sources".into(), "no sources");
        }
    }

    fn compute(&mut self) {
        let c = &self.t.compute;
        if c.units == 0 {
            let span = self.loc.value(&[K("compute"), K("units")]);
            self.err(span, "`compute.units` must be positive".into(), "zero units");
        }
        if !(c.clock_ghz.is_finite() && c.clock_ghz > 0.0) {
            let span = self.loc.value(&[K("compute"), K("clock_ghz")]);
            self.err(span, "`compute.clock_ghz` must be positive".into(), "not a clock");
        }
        match self.t.kind {
            TargetKind::Cuda => {
                let required = [
                    ("warp_size", c.warp_size as u64),
                    ("max_threads_per_block", c.max_threads_per_block as u64),
                    ("max_threads_per_unit", c.max_threads_per_unit as u64),
                    ("max_blocks_per_unit", c.max_blocks_per_unit as u64),
                    ("registers_per_unit", c.registers_per_unit as u64),
                    ("max_registers_per_thread", c.max_registers_per_thread as u64),
                    ("min_warps_per_block", c.min_warps_per_block as u64),
                    ("max_static_shared_bytes", c.max_static_shared_bytes),
                ];
                for (field, value) in required {
                    if value == 0 {
                        let span = self.loc.key(&[K("compute"), K(field)]);
                        let present = self.loc.find(&[K("compute"), K(field)]).1.is_some();
                        let label = if present { "must be positive" } else { "missing in this table" };
                        self.err(span, format!("cuda target needs a positive `compute.{field}`"), label);
                    }
                }
                if c.warp_size != 0 && !c.max_threads_per_block.is_multiple_of(c.warp_size) {
                    let span = self.loc.value(&[K("compute"), K("max_threads_per_block")]);
                    self.err(span, format!("`compute.max_threads_per_block` ({}) is not a multiple of the warp size ({})", c.max_threads_per_block, c.warp_size), "");
                }
                // Static shared memory is part of what a block may have.
                let block_shared = self.t.memory.iter().find(|m| m.per == Per::Block && m.scope.as_deref() == Some("shared"));
                if let Some(m) = block_shared.filter(|m| c.max_static_shared_bytes > m.capacity_bytes) {
                    let span = self.loc.value(&[K("compute"), K("max_static_shared_bytes")]);
                    self.err(span, format!("`compute.max_static_shared_bytes` ({}) is more than the {} bytes a block may have of `{}`", c.max_static_shared_bytes, m.capacity_bytes, m.name), "");
                }
            }
            TargetKind::Cpu => {
                for (field, value) in [("vector_bits", self.t.isa.vector_bits), ("vector_registers", self.t.isa.vector_registers)] {
                    if value == 0 {
                        let span = self.loc.key(&[K("isa"), K(field)]);
                        let present = self.loc.find(&[K("isa"), K(field)]).1.is_some();
                        let label = if present { "must be positive" } else { "missing in this table" };
                        self.err(span, format!("cpu target needs a positive `isa.{field}`"), label);
                    }
                }
                self.positive_cpu_fields("compute", &[("fma_latency_cycles", c.fma_latency_cycles), ("misses_in_flight", c.misses_in_flight)]);
                let m = &self.t.model;
                if self.loc.find(&[K("model")]).1.is_none() {
                    let span = self.loc.value(&[K("kind")]);
                    self.err(span, "a cpu target needs a `[model]` table".into(), "a cpu target")
                        .notes
                        .push("note: it gives `guarded_load_cost`, `gather_load_cost` and `scatter_lane_cost`, the micro-kernel costs of the search's model (docs/targets.md)".into());
                } else {
                    self.positive_cpu_fields(
                        "model",
                        &[("guarded_load_cost", m.guarded_load_cost), ("gather_load_cost", m.gather_load_cost), ("scatter_lane_cost", m.scatter_lane_cost), ("latency_hiding", m.latency_hiding)],
                    );
                }
            }
        }
        let bits = self.t.isa.vector_bits;
        if !bits.is_multiple_of(8) {
            let span = self.loc.value(&[K("isa"), K("vector_bits")]);
            self.err(span, format!("`isa.vector_bits` ({bits}) is not a whole number of bytes"), "");
        }
    }

    /// Fields of `table` a cpu target must give, positive.
    fn positive_cpu_fields(&mut self, table: &'static str, fields: &[(&'static str, f64)]) {
        for &(field, value) in fields {
            if !(value.is_finite() && value > 0.0) {
                let span = self.loc.key(&[K(table), K(field)]);
                let present = self.loc.find(&[K(table), K(field)]).1.is_some();
                let label = if present { "must be positive" } else { "missing in this table" };
                self.err(span, format!("cpu target needs a positive `{table}.{field}`"), label);
            }
        }
    }

    fn peaks(&mut self) {
        if self.t.peak_gflops.is_empty() {
            let span = self.loc.key(&[K("peak_gflops")]);
            self.err(span, "`peak_gflops` must give the peak of at least one element type".into(), "");
        }
        for (ty, &v) in &self.t.peak_gflops {
            if !known_type(ty) {
                let span = self.loc.key(&[K("peak_gflops"), K(ty)]);
                let d = self.err(span, format!("unknown element type `{ty}` in `peak_gflops`"), "not an element type");
                d.notes.push(format!("note: known: {}", peak_type_names().join(", ")));
            }
            if !(v.is_finite() && v > 0.0) {
                let span = self.loc.value(&[K("peak_gflops"), K(ty)]);
                self.err(span, format!("peak of `{ty}` must be positive"), "");
            }
        }
    }

    fn memory(&mut self) {
        let t = self.t;
        if t.memory.is_empty() {
            let span = self.loc.value(&[]);
            self.err(span, "a target needs at least one `[[memory]]` level".into(), "");
        }
        for (i, m) in t.memory.iter().enumerate() {
            let at = |f: &'static str| [K("memory"), I(i), K(f)];
            if m.name.is_empty() {
                let span = self.loc.value(&at("name"));
                self.err(span, "memory level names must not be empty".into(), "");
            } else if let Some(j) = t.memory[..i].iter().position(|o| o.name == m.name) {
                let span = self.loc.value(&at("name"));
                let first = self.loc.value(&[K("memory"), I(j), K("name")]);
                self.err(span, format!("memory level `{}` is defined twice", m.name), "second definition").secondary.push(crate::diag::Label { span: first, message: "first defined here".into() });
            }
            if m.capacity_bytes == 0 {
                let span = self.loc.value(&at("capacity_bytes"));
                self.err(span, format!("capacity of memory level `{}` must be positive", m.name), "");
            }
            for (field, value) in [("bandwidth_gbs", m.bandwidth_gbs), ("latency_ns", m.latency_ns)] {
                if !(value.is_finite() && value > 0.0) {
                    let span = self.loc.value(&at(field));
                    self.err(span, format!("`{field}` of memory level `{}` must be positive", m.name), "");
                }
            }
            if let Some(core) = m.core_bandwidth_gbs {
                let span = self.loc.value(&at("core_bandwidth_gbs"));
                if !(core.is_finite() && core > 0.0) {
                    self.err(span, format!("`core_bandwidth_gbs` of memory level `{}` must be positive", m.name), "");
                } else if m.per != Per::Device {
                    self.err(span, format!("`core_bandwidth_gbs` of memory level `{}` is for levels that all cores or SMs share (`per = \"device\"`), not `per = \"{}\"`", m.name, m.per.name()), "a per-core limit on a level that is not shared");
                }
            }
            if m.line_bytes == 0 {
                let span = self.loc.value(&at("line_bytes"));
                self.err(span, format!("`line_bytes` of memory level `{}` must be positive", m.name), "");
            }
            if (m.banks == 0) != (m.bank_width_bytes == 0) {
                let field = if m.banks == 0 { "bank_width_bytes" } else { "banks" };
                let span = self.loc.key(&at(field));
                self.err(span, format!("memory level `{}` gives `{field}` without the other of `banks` and `bank_width_bytes`", m.name), "");
            }
            if let Some(unit) = m.unit_capacity_bytes.filter(|&u| u < m.capacity_bytes) {
                let span = self.loc.value(&at("unit_capacity_bytes"));
                self.err(span, format!("`unit_capacity_bytes` of `{}` ({unit}) is less than its `capacity_bytes` ({})", m.name, m.capacity_bytes), "");
            }
            if let Some(scope) = m.scope.as_ref().filter(|s| MemScope::from_name(s).is_none()) {
                let span = self.loc.value(&at("scope"));
                self.err(span, format!("unknown buffer scope `{scope}`"), "not a scope").notes.push("note: scopes are `global`, `shared` and `local`".into());
            }
            if m.per == Per::Block && t.kind != TargetKind::Cuda {
                let span = self.loc.value(&at("per"));
                self.err(span, "`per = \"block\"` is for GPU memories; a cpu target has no blocks".into(), "");
            }
            if i > 0 {
                let prev = &t.memory[i - 1];
                if m.latency_ns > prev.latency_ns {
                    let span = self.loc.value(&at("latency_ns"));
                    self.err(
                        span,
                        format!("memory levels must be listed slowest first, but `{}` ({} ns) is slower than `{}` ({} ns) before it", m.name, m.latency_ns, prev.name, prev.latency_ns),
                        "slower than the level before",
                    );
                }
            }
        }
    }

    fn tile_levels(&mut self) {
        let t = self.t;
        if t.tile_levels.is_empty() {
            let span = self.loc.value(&[]);
            self.err(span, "a target needs at least one `[[tile_levels]]` entry".into(), "");
            return;
        }
        let mut last_memory: Option<(usize, &str)> = None;
        for (i, l) in t.tile_levels.iter().enumerate() {
            let at = |f: &'static str| [K("tile_levels"), I(i), K(f)];
            let tag_keyword = TagLevel::KEYWORDS.contains(&l.name.as_str());
            let bad_name = l.name.is_empty() || tag_keyword || l.name.contains('.') || l.name == "V";
            if bad_name {
                let span = self.loc.value(&at("name"));
                let note = if tag_keyword {
                    let keywords = TagLevel::KEYWORDS.map(|k| format!("`{k}`")).join(", ");
                    format!("note: {keywords} name loops below the tile levels, as in the loop tag `axis(i.{})`", l.name)
                } else {
                    "note: `point` and `V` name the innermost loops, and `.` separates `S.<level>`".to_string()
                };
                self.err(span, format!("invalid tile level name `{}`", l.name), "").notes.push(note);
            } else if let Some(j) = t.tile_levels[..i].iter().position(|o| o.name == l.name) {
                let span = self.loc.value(&at("name"));
                let first = self.loc.value(&[K("tile_levels"), I(j), K("name")]);
                self.err(span, format!("tile level `{}` is defined twice", l.name), "second definition").secondary.push(crate::diag::Label { span: first, message: "first defined here".into() });
            }
            match t.memory_index(&l.memory) {
                None => {
                    let span = self.loc.value(&at("memory"));
                    let d = self.err(span, format!("tile level `{}` uses memory level `{}`, which is not defined", l.name, l.memory), "no such memory level");
                    if let Some(best) = closest(&l.memory, t.memory.iter().map(|m| m.name.as_str())) {
                        d.notes.push(format!("help: did you mean `{best}`?"));
                    }
                    let names: Vec<String> = t.memory.iter().map(|m| format!("`{}`", m.name)).collect();
                    d.notes.push(format!("note: memory levels: {}", names.join(", ")));
                }
                Some(m) => {
                    if let Some((prev, prev_level)) = last_memory.filter(|&(prev, _)| m < prev) {
                        let span = self.loc.value(&at("memory"));
                        self.err(
                            span,
                            format!("tile level `{}` uses `{}`, a slower memory than `{}` of the outer level `{prev_level}`", l.name, l.memory, t.memory[prev].name),
                            "inner tile levels use the same or faster memory",
                        );
                    }
                    last_memory = Some((m, &l.name));
                }
            }
            let allowed: &[Binding] = match t.kind {
                TargetKind::Cuda => &[Binding::Grid, Binding::Threads, Binding::Serial],
                TargetKind::Cpu => &[Binding::Parallel, Binding::Serial],
            };
            if !allowed.contains(&l.binding) {
                let span = self.loc.value(&at("binding"));
                let names: Vec<String> = allowed.iter().map(|b| format!("`{}`", b.name())).collect();
                self.err(span, format!("binding `{}` is not available on a {} target", l.binding.name(), t.kind.name()), "").notes.push(format!("note: {} targets bind tile levels to {}", t.kind.name(), names.join(", ")));
            }
        }
        if t.kind == TargetKind::Cuda {
            let pos = |b: Binding| t.tile_levels.iter().enumerate().filter(|(_, l)| l.binding == b).map(|(i, _)| i).collect::<Vec<_>>();
            let (grid, threads) = (pos(Binding::Grid), pos(Binding::Threads));
            if grid.len() != 1 || threads.len() != 1 || grid[0] > threads[0] {
                let span = self.loc.key(&[K("tile_levels")]);
                self.err(span, "a cuda target needs exactly one `grid` tile level and, inside it, exactly one `threads` level".into(), "");
            }
        }
    }

    fn loop_order(&mut self) {
        let t = self.t;
        let levels: Vec<&str> = t.tile_levels.iter().map(|l| l.name.as_str()).collect();
        let mut seen: Vec<(&str, usize)> = Vec::new();
        let mut s_order = Vec::new();
        let mut r_order = Vec::new();
        for (i, entry) in t.loop_order.iter().enumerate() {
            let span = self.loc.value(&[K("loop_order"), I(i)]);
            if let Some(&(_, j)) = seen.iter().find(|(e, _)| *e == entry) {
                let first = self.loc.value(&[K("loop_order"), I(j)]);
                self.err(span, format!("`{entry}` appears twice in `loop_order`"), "").secondary.push(crate::diag::Label { span: first, message: "first here".into() });
                continue;
            }
            seen.push((entry, i));
            if entry == "V" {
                self.order.push(OrderEntry::VThread);
                continue;
            }
            let parsed = entry.split_once('.').filter(|(kind, _)| matches!(*kind, "S" | "R"));
            let Some((kind, level)) = parsed else {
                self.err(span, format!("invalid `loop_order` entry `{entry}`"), "not a loop").notes.push("note: entries are `S.<tile level>`, `R.<tile level>`, `S.point`, `R.point` and `V`".into());
                continue;
            };
            let index = if level == "point" {
                levels.len()
            } else if let Some(x) = levels.iter().position(|l| *l == level) {
                x
            } else {
                let d = self.err(span, format!("`loop_order` entry `{entry}` names tile level `{level}`, which is not defined"), "no such tile level");
                if let Some(best) = closest(level, levels.iter().copied()) {
                    d.notes.push(format!("help: did you mean `{kind}.{best}`?"));
                }
                continue;
            };
            if kind == "S" { &mut s_order } else { &mut r_order }.push((index, i));
            self.order.push(match (kind, level) {
                ("S", "point") => OrderEntry::SpatialPoint,
                (_, "point") => OrderEntry::ReductionPoint,
                ("S", _) => OrderEntry::Spatial(index),
                _ => OrderEntry::Reduction(index),
            });
        }
        // Every spatial level has its loops; points close both nests.
        let mut missing: Vec<String> = levels.iter().filter(|l| !t.loop_order.iter().any(|e| e == &format!("S.{l}"))).map(|l| format!("`S.{l}`")).collect();
        for p in ["S.point", "R.point"] {
            if !t.loop_order.iter().any(|e| e == p) {
                missing.push(format!("`{p}`"));
            }
        }
        if !missing.is_empty() {
            let span = self.loc.key(&[K("loop_order")]);
            self.err(span, format!("`loop_order` lacks {}", missing.join(", ")), "incomplete loop order");
        }
        for (what, order) in [("spatial", &s_order), ("reduction", &r_order)] {
            if let Some(w) = order.windows(2).find(|w| w[1].0 < w[0].0) {
                let span = self.loc.value(&[K("loop_order"), I(w[1].1)]);
                self.err(span, format!("{what} loops in `loop_order` must follow the tile levels outermost first: `{}` comes after `{}`", t.loop_order[w[1].1], t.loop_order[w[0].1]), "out of order");
            }
        }
    }

    fn intrinsics(&mut self) {
        let t = self.t;
        for (i, x) in t.intrinsics.iter().enumerate() {
            let at = |f: &'static str| [K("intrinsics"), I(i), K(f)];
            if !INTRINSIC_KINDS.contains(&x.kind.as_str()) {
                let span = self.loc.value(&at("kind"));
                let kinds: Vec<String> = INTRINSIC_KINDS.iter().map(|k| format!("`{k}`")).collect();
                self.err(span, format!("unknown intrinsic kind `{}`", x.kind), "").notes.push(format!("note: kinds are {}", kinds.join(", ")));
            }
            for (field, v) in [("m", x.m), ("n", x.n), ("k", x.k)] {
                if v == 0 {
                    let span = self.loc.value(&at(field));
                    self.err(span, format!("`{field}` of intrinsic `{}` must be positive", x.name), "");
                }
            }
            for (field, ty) in [("a", &x.a), ("b", &x.b), ("acc", &x.acc)] {
                if !known_type(ty) {
                    let span = self.loc.value(&at(field));
                    let mut names: Vec<&str> = ElemType::ALL.iter().map(|e| e.name()).collect();
                    names.extend(EXTRA_TYPE_NAMES);
                    self.err(span, format!("unknown element type `{ty}` in intrinsic `{}`", x.name), "not an element type").notes.push(format!("note: known: {}", names.join(", ")));
                }
            }
            self.intrinsic_form(i);
            if t.intrinsics[..i].iter().any(|o| o.name == x.name) {
                let span = self.loc.value(&at("name"));
                self.err(span, format!("intrinsic `{}` is defined twice", x.name), "");
            }
        }
    }
}

impl Validator<'_, '_, '_> {
    /// What intrinsic `i`'s kind asks of its shape, layouts, costs and
    /// features (docs/targets.md, `[[intrinsics]]`).
    fn intrinsic_form(&mut self, i: usize) {
        let t = self.t;
        let x = &t.intrinsics[i];
        let at = |f: &'static str| [K("intrinsics"), I(i), K(f)];
        let layout_at = |f: &'static str| [K("intrinsics"), I(i), K("layout"), K(f)];
        let (warp, vector) = (x.is_warp(), x.is_vector());
        if warp && t.kind != TargetKind::Cuda || vector && t.kind != TargetKind::Cpu {
            let span = self.loc.value(&at("kind"));
            let wants = if warp { "cuda" } else { "cpu" };
            self.err(span, format!("intrinsic `{}` of kind `{}` needs a {wants} target", x.name, x.kind), "not on this kind of target");
        }
        let layouts = [("a", x.layout.a), ("b", x.layout.b), ("acc", x.layout.acc)];
        if warp && t.kind == TargetKind::Cuda {
            for (field, l) in layouts {
                if !matches!(l, OperandLayout::Row | OperandLayout::Col) {
                    let span = self.loc.value(&layout_at(field));
                    self.err(span, format!("operand `{field}` of `{}` intrinsic `{}` is held as `{}`", x.kind, x.name, l.name()), "not a fragment layout")
                        .notes
                        .push("note: a warp's fragments are `row` or `col`".into());
                }
            }
        }
        if vector && t.kind == TargetKind::Cpu {
            for ((field, l), want) in layouts.into_iter().zip([OperandLayout::Lanes, OperandLayout::Broadcast, OperandLayout::Lanes]) {
                if l != want {
                    let span = self.loc.value(&layout_at(field));
                    self.err(span, format!("operand `{field}` of `{}` intrinsic `{}` is held as `{}`, not `{}`", x.kind, x.name, l.name(), want.name()), "")
                        .notes
                        .push("note: a vector intrinsic keeps `a` and `acc` in lanes along `m` and broadcasts `b`".into());
                }
            }
            if x.n != 1 {
                let span = self.loc.value(&at("n"));
                self.err(span, format!("`n` of `{}` intrinsic `{}` must be 1 (one broadcast column)", x.kind, x.name), "");
            }
            if x.kind == "fma" && x.k != 1 {
                let span = self.loc.value(&at("k"));
                self.err(span, format!("`k` of `fma` intrinsic `{}` must be 1", x.name), "");
            }
            let acc_bits = ElemType::from_name(&x.acc).map_or(32, |e| e.size_bytes() * 8);
            if t.isa.vector_bits > 0 && u64::from(x.m) * acc_bits > u64::from(t.isa.vector_bits) {
                let span = self.loc.value(&at("m"));
                self.err(span, format!("intrinsic `{}` needs {} lanes of {} bits, more than the target's {}-bit vectors", x.name, x.m, acc_bits, t.isa.vector_bits), "");
            }
        }
        if x.latency_cycles == 0 {
            let span = self.loc.value(&at("latency_cycles"));
            self.err(span, format!("`latency_cycles` of intrinsic `{}` must be positive", x.name), "");
        }
        if !(x.per_cycle.is_finite() && x.per_cycle > 0.0) {
            let span = self.loc.value(&at("per_cycle"));
            self.err(span, format!("`per_cycle` of intrinsic `{}` must be positive", x.name), "");
        }
        for (j, f) in x.features.iter().enumerate() {
            let span = self.loc.value(&[K("intrinsics"), I(i), K("features"), I(j)]);
            if t.kind != TargetKind::Cpu {
                self.err(span, format!("intrinsic `{}` of a {} target needs CPU feature `{f}`", x.name, t.kind.name()), "").notes.push("note: only a cpu target's intrinsics name features".into());
            } else if !INTRINSIC_FEATURES.contains(&f.as_str()) {
                let known: Vec<String> = INTRINSIC_FEATURES.iter().map(|k| format!("`{k}`")).collect();
                self.err(span, format!("intrinsic `{}` needs unknown feature `{f}`", x.name), "").notes.push(format!("note: features an intrinsic may need: {}", known.join(", ")));
            }
        }
    }
}

fn known_type(name: &str) -> bool {
    ElemType::from_name(name).is_some() || EXTRA_TYPE_NAMES.contains(&name)
}

fn peak_type_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = ElemType::ALL.iter().map(|e| e.name()).collect();
    v.push("tf32");
    v
}

/// Where a target of a [`TargetSet`] comes from.
#[derive(Clone, Debug)]
pub enum Origin {
    Builtin(&'static Builtin),
    /// Detected at run time (`host`).
    Host,
    File(PathBuf),
}

impl Origin {
    pub fn describe(&self) -> String {
        match self {
            Origin::Builtin(b) => format!("built in ({})", b.path),
            Origin::Host => "detected at run time".into(),
            Origin::File(p) => p.display().to_string(),
        }
    }
}

struct Entry {
    name: String,
    origin: Origin,
    /// Parsed on first use (built-ins, `host`) or when added (files).
    target: OnceCell<Arc<Target>>,
}

/// The targets a run knows: the built-ins, `host`, and description files
/// the user added; looked up by name, parsed on demand.
pub struct TargetSet {
    entries: Vec<Entry>,
    /// Replaces run-time detection (tests).
    host_info: Option<host::HostInfo>,
}

impl Default for TargetSet {
    fn default() -> Self {
        TargetSet::new()
    }
}

impl TargetSet {
    /// The built-in targets and `host`.
    pub fn new() -> Self {
        let mut entries: Vec<Entry> = BUILTIN.iter().map(|b| Entry { name: b.name.into(), origin: Origin::Builtin(b), target: OnceCell::new() }).collect();
        entries.push(Entry { name: "host".into(), origin: Origin::Host, target: OnceCell::new() });
        TargetSet { entries, host_info: None }
    }

    /// Uses `info` instead of detecting the machine for `host`.
    pub fn with_host_info(mut self, info: host::HostInfo) -> Self {
        self.host_info = Some(info);
        self
    }

    /// Names, in listing order: built-ins, `host`, then added files.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }

    pub fn origin(&self, name: &str) -> Option<&Origin> {
        self.entries.iter().find(|e| e.name == name).map(|e| &e.origin)
    }

    /// The target called `name`, parsed (or detected) on first use; `None`
    /// if there is none.
    pub fn get(&self, sources: &mut SourceMap, name: &str) -> Option<Result<Arc<Target>, Diagnostics>> {
        let entry = self.entries.iter().find(|e| e.name == name)?;
        if let Some(t) = entry.target.get() {
            return Some(Ok(t.clone()));
        }
        let made = match &entry.origin {
            Origin::Builtin(b) => parse_target(sources, &format!("<built-in>/{}", b.path), b.text),
            Origin::Host => {
                let info = self.host_info.clone().unwrap_or_else(host::detect);
                host::host_target(&info, |base| match self.get(sources, base) {
                    Some(r) => r,
                    None => Err(Diagnostic::error(format!("no built-in target `{base}`")).into()),
                })
            }
            // Files are parsed when added.
            Origin::File(_) => unreachable!("file targets are parsed when added"),
        };
        Some(made.map(|t| entry.target.get_or_init(|| Arc::new(t)).clone()))
    }

    /// The target called `name`; an unknown name is an error with a
    /// did-you-mean hint.
    pub fn lookup(&self, sources: &mut SourceMap, name: &str) -> Result<Arc<Target>, Diagnostics> {
        match self.get(sources, name) {
            Some(r) => r,
            None => {
                let mut d = Diagnostic::error(format!("unknown target `{name}`"));
                if let Some(best) = closest(name, self.names()) {
                    d = d.with_help(format!("did you mean `{best}`?"));
                }
                Err(d.with_note("`tilec --list-targets` lists the targets; `--target=PATH.toml` reads a description file").into())
            }
        }
    }

    /// `--target`'s argument: a path (it contains `/` or ends in `.toml`)
    /// is read and added; anything else is a name.
    pub fn resolve(&mut self, sources: &mut SourceMap, spec: &str) -> Result<Arc<Target>, Diagnostics> {
        if looks_like_path(spec) { self.add_file(sources, Path::new(spec)) } else { self.lookup(sources, spec) }
    }

    /// Reads a description file and adds its target; its name must be new.
    pub fn add_file(&mut self, sources: &mut SourceMap, path: &Path) -> Result<Arc<Target>, Diagnostics> {
        let file = read_file(sources, path)?;
        let (target, name_span) = parse_registered(sources, file)?;
        if let Some(other) = self.entries.iter().find(|e| e.name == target.name) {
            return Err(Diagnostic::error(format!("target `{}` is already defined", target.name))
                .at(name_span, "this name is taken")
                .with_note(format!("`{}` is {}", other.name, other.origin.describe()))
                .with_help("give this description another `name`")
                .into());
        }
        let target = Arc::new(target);
        let cell = OnceCell::new();
        let _ = cell.set(target.clone());
        self.entries.push(Entry { name: target.name.clone(), origin: Origin::File(path.to_path_buf()), target: cell });
        Ok(target)
    }

    /// Adds every `*.toml` file of a folder, in file-name order; reports
    /// every bad file.
    pub fn add_dir(&mut self, sources: &mut SourceMap, dir: &Path) -> Result<(), Diagnostics> {
        let read = std::fs::read_dir(dir)
            .map_err(|e| Diagnostic::error(format!("cannot read target folder `{}`: {}", dir.display(), crate::input::io_reason(&e))))?;
        let mut files: Vec<PathBuf> = read.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file()).collect();
        files.sort();
        let mut diags = Diagnostics::new();
        for f in files {
            if let Err(d) = self.add_file(sources, &f) {
                diags.extend(d);
            }
        }
        diags.into_result()
    }
}

fn looks_like_path(spec: &str) -> bool {
    spec.contains('/') || spec.contains(std::path::MAIN_SEPARATOR) || spec.ends_with(".toml")
}

#[cfg(test)]
mod tests;
