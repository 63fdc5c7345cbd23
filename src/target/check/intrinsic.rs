//! The schedule's `intrinsic` knob against the target: the target lists
//! the intrinsic and offers it (its ISA has the CPU features it needs),
//! the op is a contraction, and the choice is one of the mapping
//! candidates ([`mapping::candidates`]). For a basic mapping, each mapped
//! axis' innermost tile (per virtual thread) is whole intrinsic tiles;
//! a `vector` entry on a mapped axis is the intrinsic's own lanes only.
//!
//! The target-independent rules (known axes and read, each axis once,
//! spatial axes on `m` and `n`, reduction axes on `k`) are the
//! verifier's (`verify_schedule_structure`); this check skips what they
//! refuse rather than report it twice.

use super::ComputeInfo;
use crate::diag::{Diagnostic, Diagnostics, Span, closest};
use crate::ir::{AxisId, Compute, Function, IntrinsicChoice, Op, Schedule};
use crate::target::mapping::{self, Contraction, IntrinsicAxis, Mapping};
use crate::target::{Intrinsic, Target};

/// Why a choice is not a candidate, and a place to point at (with its
/// label).
type WhyNot = (String, Option<(Span, String)>);

/// Candidates listed in the note of an invalid mapping.
const CANDIDATES_SHOWN: usize = 4;

/// Checks the `intrinsic` of schedule `s` of compute op `op` of `f`
/// against target `t`; errors point at `span` (the schedule).
pub(super) fn check_intrinsic(f: &Function, op: Op, c: &Compute, info: &ComputeInfo, s: &Schedule, t: &Target, span: Span) -> Diagnostics {
    let mut k = IntrinsicCheck { c, info, t, span, diags: Diagnostics::new() };
    if let Some(choice) = &s.intrinsic {
        k.check(f, op, s, choice);
    }
    k.diags
}

struct IntrinsicCheck<'a> {
    c: &'a Compute,
    info: &'a ComputeInfo,
    t: &'a Target,
    span: Span,
    diags: Diagnostics,
}

impl<'a> IntrinsicCheck<'a> {
    fn error(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn read_name(&self, r: usize) -> String {
        self.info.reads.get(r).map_or_else(|| format!("read {r}"), |x| x.name.clone())
    }

    fn read_span(&self, r: usize) -> Span {
        self.info.reads.get(r).map_or(Span::DUMMY, |x| x.span)
    }

    fn check(&mut self, f: &Function, op: Op, s: &Schedule, choice: &IntrinsicChoice) {
        let Some(x) = self.intrinsic(choice) else { return };
        if !self.offered(x) {
            return;
        }
        let con = match mapping::contraction(f, op) {
            Ok(con) => con,
            Err(why) => {
                let d = Diagnostic::error(format!("`{}` cannot compute this op: {why}", x.name))
                    .at(self.span, "not a contraction")
                    .with_note("an intrinsic computes a contraction: a `reduce sum` over the product of two reads, each possibly cast (docs/tensorize.md)");
                self.error(d);
                return;
            }
        };
        if choice.a != con.lhs && choice.a != con.rhs {
            let d = Diagnostic::error(format!("`intrinsic` names {} as `a`, but the body does not multiply it", self.read_name(choice.a)))
                .at(self.span, "not a factor")
                .with_secondary(self.read_span(choice.a), "read defined here")
                .with_note(format!("the factors of the product are {} and {}", self.read_name(con.lhs), self.read_name(con.rhs)));
            self.error(d);
            return;
        }
        let candidates = match mapping::candidates(self.c, &con, x) {
            Ok(maps) => maps,
            Err(why) => {
                let d = Diagnostic::error(format!("`{}` cannot compute this op: {why}", x.name))
                    .at(self.span, "no mapping onto this intrinsic")
                    .with_help("`tilec --print-mappings` shows which intrinsics of the target can");
                self.error(d);
                return;
            }
        };
        let b = if choice.a == con.lhs { con.rhs } else { con.lhs };
        let ids = |names: &[String]| names.iter().map(|n| self.c.axis_by_name(n)).collect::<Option<Vec<AxisId>>>();
        // Unknown axes are the structural check's.
        let (Some(m), Some(n), Some(k)) = (ids(&choice.m), ids(&choice.n), ids(&choice.k)) else { return };
        let chosen = Mapping { a: choice.a, b, m, n, k };
        if !candidates.contains(&chosen) {
            self.not_a_candidate(x, &con, &chosen, &candidates);
            return;
        }
        self.tiles_fit(s, x, &chosen);
        self.vector_lanes(s, x, &chosen);
    }

    /// The intrinsic the target lists under the choice's name.
    fn intrinsic(&mut self, choice: &IntrinsicChoice) -> Option<&'a Intrinsic> {
        let t = self.t;
        if let Some(x) = t.intrinsics.iter().find(|x| x.name == choice.name) {
            return Some(x);
        }
        let mut d = Diagnostic::error(format!("target `{}` has no intrinsic `{}`", t.name, choice.name)).at(self.span, "unknown intrinsic");
        if let Some(best) = closest(&choice.name, t.intrinsics.iter().map(|x| x.name.as_str())) {
            d = d.with_help(format!("did you mean `{best}`?"));
        }
        d = if t.intrinsics.is_empty() {
            d.with_note(format!("target `{}` lists no intrinsics", t.name))
        } else {
            let names: Vec<&str> = t.intrinsics.iter().map(|x| x.name.as_str()).collect();
            d.with_note(format!("the intrinsics of `{}` are: {}", t.name, names.join(", ")))
        };
        self.error(d);
        None
    }

    /// Does the target offer `x` (else reported, naming the features it
    /// lacks)?
    fn offered(&mut self, x: &Intrinsic) -> bool {
        let t = self.t;
        if t.offers(x) {
            return true;
        }
        let missing: Vec<String> = x.features.iter().filter(|f| !t.isa_features().any(|g| g == f.as_str())).map(|f| format!("`{f}`")).collect();
        let has: Vec<&str> = t.isa_features().collect();
        let mut d = Diagnostic::error(format!(
            "target `{}` does not offer `{}`: it needs the CPU feature{} {}, which `{}` lacks",
            t.name,
            x.name,
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            t.name
        ))
        .at(self.span, "intrinsic not offered")
        .with_note(if has.is_empty() { format!("`{}` enables no CPU features (`isa.features`)", t.name) } else { format!("`{}` enables {} (`isa.features`)", t.name, has.join(", ")) });
        let offered: Vec<&str> = t.offered_intrinsics().map(|x| x.name.as_str()).collect();
        d = d.with_help(if offered.is_empty() {
            "target `host` adds the features this CPU has".to_string()
        } else {
            format!("`{}` offers {}; target `host` adds the features this CPU has", t.name, offered.join(", "))
        });
        self.error(d);
        false
    }

    /// Reports a choice that no candidate equals: the first rule it breaks
    /// where one can be named, and the first few candidates (basic ones
    /// first).
    fn not_a_candidate(&mut self, x: &Intrinsic, con: &Contraction, chosen: &Mapping, candidates: &[Mapping]) {
        let (message, at) = match self.why_not(x, con, chosen, candidates) {
            Some((why, at)) => (why, at),
            None => (format!("this mapping onto `{}` is not one of its mapping candidates", x.name), None),
        };
        let mut d = Diagnostic::error(message).at(self.span, "not a mapping candidate");
        if let Some((span, label)) = at {
            d = d.with_secondary(span, label);
        }
        // Basic ones first: the ones most often meant.
        let ordered = candidates.iter().filter(|m| m.is_basic()).chain(candidates.iter().filter(|m| !m.is_basic()));
        let shown: Vec<String> = ordered.take(CANDIDATES_SHOWN).map(|m| m.describe(self.c, self.info)).collect();
        let more = candidates.len().saturating_sub(CANDIDATES_SHOWN);
        let tail = if more > 0 { format!("; and {more} more (`tilec --print-mappings` lists them)") } else { String::new() };
        d = d.with_note(format!("the mapping candidates onto `{}` are: {}{tail}", x.name, shown.join("; ")));
        self.error(d);
    }

    /// Why `chosen` is not a candidate, with a place to point at.
    fn why_not(&self, x: &Intrinsic, con: &Contraction, chosen: &Mapping, candidates: &[Mapping]) -> Option<WhyNot> {
        let (a, b) = (chosen.a, chosen.b);
        if !candidates.iter().any(|m| m.a == a) {
            let elem = if a == con.lhs { con.lhs_elem } else { con.rhs_elem };
            return Some((
                format!("{} cannot play `a` of `{}`: it multiplies {} (`a`) by {} (`b`), and {} is {elem}", self.read_name(a), x.name, x.a, x.b, self.read_name(a)),
                Some((self.read_span(a), "read defined here".into())),
            ));
        }
        let uses = |read: usize, axis: AxisId| self.c.reads[read].indices.iter().any(|e| e.uses(axis));
        let in_output = |axis: AxisId| self.c.output.iter().any(|e| e.uses(axis));
        for ax in IntrinsicAxis::ALL {
            let (size, on) = (ax.size(x), chosen.axes(ax));
            if size == 1 && !on.is_empty() {
                let why = if x.is_vector() && ax == IntrinsicAxis::N {
                    format!("a vector intrinsic's `n` takes no axis: `{}` broadcasts `b` across its lanes", x.name)
                } else {
                    format!("`{}` has `{}` = 1: its `{}` takes no axis", x.name, ax.name(), ax.name())
                };
                return Some((why, None));
            }
            if size > 1 && on.is_empty() {
                return Some((format!("`{}` has `{}` = {size}: its `{}` takes at least one op axis", x.name, ax.name(), ax.name()), None));
            }
            for &id in on {
                let decl = self.c.axis(id);
                let reason = if decl.extent == 1 {
                    Some("its extent is 1 (it stays a loop around the intrinsic)".to_string())
                } else {
                    let (indexes_a, indexes_b) = (uses(a, id), uses(b, id));
                    match ax {
                        IntrinsicAxis::M | IntrinsicAxis::N => {
                            let (own, other, own_role, other_role) = if ax == IntrinsicAxis::M { (a, b, "a", "b") } else { (b, a, "b", "a") };
                            if uses(other, id) {
                                Some(format!("it indexes `{other_role}` ({})", self.read_name(other)))
                            } else if !uses(own, id) {
                                Some(format!("it does not index `{own_role}` ({})", self.read_name(own)))
                            } else if !in_output(id) {
                                Some("it does not index the output".to_string())
                            } else {
                                None
                            }
                        }
                        IntrinsicAxis::K if !indexes_a => Some(format!("it does not index `a` ({})", self.read_name(a))),
                        IntrinsicAxis::K if !indexes_b => Some(format!("it does not index `b` ({})", self.read_name(b))),
                        IntrinsicAxis::K => None,
                    }
                };
                if let Some(reason) = reason {
                    return Some((format!("`{}` cannot go onto `{}`: {reason}", decl.name, ax.name()), Some((decl.span, "axis declared here".into()))));
                }
            }
            // Fused axes come in declaration order.
            if on.windows(2).any(|w| w[0] > w[1]) {
                let mut sorted = on.to_vec();
                sorted.sort();
                let names = |v: &[AxisId]| v.iter().map(|&i| self.c.axis(i).name.as_str()).collect::<Vec<_>>().join(", ");
                return Some((format!("the axes on `{}` are not in declaration order: write `{} = [{}]`", ax.name(), ax.name(), names(&sorted)), None));
            }
        }
        None
    }

    /// The innermost tile of each mapped axis, per virtual thread, is whole
    /// intrinsic tiles along its intrinsic axis (basic mappings), or the
    /// tiles of fused axes split its size ([`Self::fused_tiles_fit`]).
    fn tiles_fit(&mut self, s: &Schedule, x: &Intrinsic, chosen: &Mapping) {
        for ax in IntrinsicAxis::ALL {
            let size = u64::from(ax.size(x));
            if size <= 1 {
                continue;
            }
            let fused = chosen.axes(ax);
            if fused.len() > 1 {
                self.fused_tiles_fit(s, x, ax, fused);
                continue;
            }
            let [id] = fused else { continue };
            let decl = self.c.axis(*id);
            let name = decl.name.as_str();
            let tiled = s.tiles_of(name).and_then(|t| t.last().copied());
            let innermost = tiled.unwrap_or(decl.extent);
            let vthreads = s.vthreads_of(name).max(1);
            let per_thread = innermost / vthreads;
            if per_thread.is_multiple_of(size) {
                continue;
            }
            let what = match (tiled.is_some(), vthreads > 1) {
                (true, false) => format!("the innermost tile of `{name}`, {innermost},"),
                (true, true) => format!("the innermost tile of `{name}` per virtual thread, {innermost} / {vthreads} = {per_thread},"),
                (false, false) => format!("`{name}` is not tiled, and its extent {innermost}"),
                (false, true) => format!("`{name}` is not tiled, and its extent per virtual thread, {innermost} / {vthreads} = {per_thread},"),
            };
            let lower = per_thread / size * size;
            let nearest = if lower > 0 && per_thread - lower <= lower + size - per_thread { lower } else { lower + size };
            let per_vthread = if vthreads > 1 { format!(" ({nearest} per virtual thread)") } else { String::new() };
            let d = Diagnostic::error(format!("{what} is not a multiple of `{}`'s `{}` size, {size}", x.name, ax.name()))
                .at(self.span, "tile does not fit the intrinsic")
                .with_secondary(decl.span, "axis declared here")
                .with_note(format!("`{name}` goes onto `{}`: each innermost tile is computed by whole `{}` tiles", ax.name(), x.name))
                .with_help(if tiled.is_some() {
                    format!("use an innermost tile of {} for `{name}`{per_vthread}", nearest * vthreads)
                } else {
                    format!("tile `{name}` with an innermost tile that is a multiple of {}, such as {}{per_vthread}", size * vthreads, nearest * vthreads)
                });
            self.error(d);
        }
    }

    /// Fused mappings: the innermost tiles of the op axes on `ax`, per
    /// virtual thread, split its size as `tensorize` splits it
    /// ([`mapping::fused_parts`]): the outermost op axis'
    /// tile holds what the inner ones leave.
    fn fused_tiles_fit(&mut self, s: &Schedule, x: &Intrinsic, ax: IntrinsicAxis, fused: &[AxisId]) {
        let size = u64::from(ax.size(x));
        let per_thread: Vec<u64> = fused
            .iter()
            .map(|&id| {
                let decl = self.c.axis(id);
                s.tiles_of(&decl.name).and_then(|t| t.last().copied()).unwrap_or(decl.extent) / s.vthreads_of(&decl.name).max(1)
            })
            .collect();
        if mapping::fused_parts(&per_thread, size).is_some() {
            return;
        }
        let left = mapping::fused_split(&per_thread, size)[0];
        let decl = self.c.axis(fused[0]);
        let names: Vec<String> = fused.iter().map(|&id| format!("`{}`", self.c.axis(id).name)).collect();
        let d = Diagnostic::error(format!(
            "the innermost tile of `{}` (per virtual thread), {}, is not a multiple of {left}, what the inner axes leave of `{}`'s `{}` size {size}",
            decl.name,
            per_thread[0],
            x.name,
            ax.name()
        ))
        .at(self.span, "tiles do not fit the intrinsic")
        .with_secondary(decl.span, "axis declared here")
        .with_note(format!("{} are fused onto `{}`: each inner axis takes what of the size its innermost tile divides, the outermost the rest", names.join(", "), ax.name()))
        .with_help(format!("use an innermost tile of `{}` that is a multiple of {left}", decl.name));
        self.error(d);
    }

    /// A `vector` entry on a mapped axis: only the `m` axis of a vector
    /// intrinsic, as wide as its lanes.
    fn vector_lanes(&mut self, s: &Schedule, x: &Intrinsic, chosen: &Mapping) {
        let Some((axis, width)) = &s.vector else { return };
        let Some(id) = self.c.axis_by_name(axis) else { return };
        let Some(ax) = IntrinsicAxis::ALL.into_iter().find(|&ax| chosen.axes(ax).contains(&id)) else { return };
        let span = self.c.axis(id).span;
        if x.is_vector() && ax == IntrinsicAxis::M {
            if *width != u64::from(x.m) {
                let d = Diagnostic::error(format!("vector width {width} of `{axis}` is not the {} lanes of `{}`, which computes `{axis}`", x.m, x.name))
                    .at(self.span, "vector width differs from the intrinsic's")
                    .with_secondary(span, "axis declared here")
                    .with_help(format!("write `vector = {{{axis} = {}}}`, or leave `vector` out", x.m));
                self.error(d);
            }
            return;
        }
        let d = Diagnostic::error(format!("`vector` on `{axis}`: `{}` already computes `{axis}`'s lanes (it maps `{axis}` onto its `{}`)", x.name, ax.name()))
            .at(self.span, "vector on a mapped axis")
            .with_secondary(span, "axis declared here")
            .with_help("leave `vector` out, or put it on an axis the intrinsic does not map");
        self.error(d);
    }
}
