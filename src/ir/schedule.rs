//! Level 1: the schedule of a compute op — how to compute it on a target.
//!
//! A schedule is data: it prints, parses and verifies, and the scheduling
//! passes read it. Every strategy (Gensor's ETIR states, TLM's tensor
//! sentences) is a view of this one record. Its meaning is given in terms of
//! the target's *tile levels* (`target::Target::tile_levels`): for each
//! axis, one tile size per level, outermost first.

use crate::diag::Span;
use std::fmt;

/// One schedule. Axis-keyed fields use the compute op's axis names, and
/// list axes in declaration order; reads are referred to by their position
/// in the op's read list (body reads, then epilogue reads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The target the sizes are for (a name `tilec --list-targets` shows).
    pub target: String,
    /// Per axis, the tile size at each tile level of the target, outermost
    /// first. Each size divides the one before it, or splits it unevenly
    /// where that one covers the whole axis; the first need not divide the
    /// axis extent (the last tile is partial and guarded) and is at most
    /// [`outermost_tile_limit`].
    pub tiles: Vec<(String, Vec<u64>)>,
    /// Per spatial axis, how many virtual threads its innermost tile is
    /// split into (Gensor's vThread); absent means 1.
    pub vthreads: Vec<(String, u64)>,
    /// Reads to stage into a faster memory level: (read position, level).
    pub cache: Vec<CacheDirective>,
    /// Unroll innermost loops whose total trip count is at most this (0: none).
    pub unroll: u64,
    /// The axis whose innermost loop runs on vector lanes, and the width.
    pub vector: Option<(String, u64)>,
    /// The order of the loops within each tile level, outermost first, by
    /// axis name (a level's spatial and reduction loops sit where the
    /// target's loop-order template puts them; this orders the axes within
    /// each). Axes left out follow the listed ones in declaration order;
    /// empty: declaration order. The vector axis' point loop stays
    /// innermost whatever the order.
    pub order: Vec<String>,
    /// The tensor intrinsic that computes the innermost tile, and how the
    /// op's axes map onto it (`target::mapping::Mapping`); none: plain
    /// loops.
    pub intrinsic: Option<IntrinsicChoice>,
    pub span: Span,
}

/// `intrinsic = {name = "vpdpbusd.zmm", a = b, m = [j], k = [k]}`: which
/// intrinsic of the schedule's target computes the op, which read plays
/// its `a` operand (the other factor of the product plays `b`), and the
/// op axes fused onto each intrinsic axis, outermost first. Valid when it
/// is one of `target::mapping::candidates`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntrinsicChoice {
    /// An intrinsic of the target (`[[intrinsics]]` in its description).
    pub name: String,
    /// Position of the read playing `a` among the op's reads.
    pub a: usize,
    /// The name that read had when the choice was made, for printing where
    /// the read list is not at hand (kernels made by `tile`).
    pub a_name: String,
    /// Axis names fused onto the intrinsic's `m`, `n` and `k`.
    pub m: Vec<String>,
    pub n: Vec<String>,
    pub k: Vec<String>,
}

impl IntrinsicChoice {
    /// Every mapped axis, `m`'s first, then `n`'s and `k`'s.
    pub fn axes(&self) -> impl Iterator<Item = &str> {
        self.m.iter().chain(&self.n).chain(&self.k).map(String::as_str)
    }

    /// The axes on `m`, `n` and `k`, with the intrinsic axis' name.
    pub fn by_intrinsic_axis(&self) -> [(&'static str, &[String]); 3] {
        [("m", &self.m), ("n", &self.n), ("k", &self.k)]
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheDirective {
    /// Position of the read among the op's reads (body reads first).
    pub read: usize,
    /// The name the read had when the directive was made, for printing
    /// where the read list is not at hand (kernels made by `tile`).
    pub read_name: String,
    /// A memory level of the target (`shared`, `local`, `l1`, ...).
    pub level: String,
}

impl Schedule {
    pub fn new(target: impl Into<String>) -> Self {
        Schedule { target: target.into(), tiles: Vec::new(), vthreads: Vec::new(), cache: Vec::new(), unroll: 0, vector: None, order: Vec::new(), intrinsic: None, span: Span::DUMMY }
    }

    pub fn tiles_of(&self, axis: &str) -> Option<&[u64]> {
        self.tiles.iter().find(|(a, _)| a == axis).map(|(_, t)| t.as_slice())
    }

    pub fn vthreads_of(&self, axis: &str) -> u64 {
        self.vthreads.iter().find(|(a, _)| a == axis).map_or(1, |&(_, v)| v)
    }

    pub fn cache_level_of(&self, read: usize) -> Option<&str> {
        self.cache.iter().find(|c| c.read == read).map(|c| c.level.as_str())
    }

    /// The loop order of axes declared as `axes`: each axis' position,
    /// outermost 0 (the listed axes first, in `order`, then the others in
    /// declaration order).
    pub fn axis_ranks<'a>(&self, axes: impl IntoIterator<Item = &'a str>) -> Vec<usize> {
        let axes: Vec<&str> = axes.into_iter().collect();
        let listed = |a: &str| self.order.iter().position(|o| o == a);
        let mut by_rank: Vec<usize> = (0..axes.len()).collect();
        by_rank.sort_by_key(|&i| (listed(axes[i]).is_none(), listed(axes[i]), i));
        let mut rank = vec![0; axes.len()];
        for (r, i) in by_rank.into_iter().enumerate() {
            rank[i] = r;
        }
        rank
    }

    /// The shape of the kernel's innermost tile: what the generated
    /// micro-kernel computes ([`KernelShape`]). `spatial_axes` names the
    /// op's spatial axes.
    pub fn kernel_shape<'a>(&self, spatial_axes: impl IntoIterator<Item = &'a str>) -> KernelShape {
        KernelShape {
            inner_tiles: spatial_axes.into_iter().map(|a| (a.to_string(), self.tiles_of(a).and_then(|t| t.last().copied()).unwrap_or(1))).collect(),
            vector: self.vector.clone(),
            intrinsic: self.intrinsic.clone(),
        }
    }
}

/// The innermost tile of each spatial axis, the vector axis and the
/// intrinsic: on a CPU the register tile of the micro-kernel, on a GPU a
/// thread's tile. Schedules of one shape differ only in their outer loops
/// and are often within noise of each other; the search's final rounds
/// take one of each shape first (`tilec_passes::search::time_finalists`),
/// so that a timing that was off does not lose a whole kind of kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelShape {
    pub inner_tiles: Vec<(String, u64)>,
    pub vector: Option<(String, u64)>,
    pub intrinsic: Option<IntrinsicChoice>,
}

/// The largest outermost tile an axis of `extent` may take: the extent,
/// rounded up to whole vectors of `vector_width` on the vector axis (the
/// last vector's lanes past the extent are masked). Pass 1 for any other
/// axis.
pub fn outermost_tile_limit(extent: u64, vector_width: u64) -> u64 {
    extent.checked_next_multiple_of(vector_width.max(1)).unwrap_or(u64::MAX)
}

/// Prints the schedule's attribute dictionary (without the leading
/// `schedule "target"`): the keys in the order tile, order, vthread, cache,
/// unroll, vector, intrinsic, empty or zero ones left out (and the empty
/// axis lists of `intrinsic`), one per line at `indent` plus two spaces,
/// the closing brace at `indent`; `{}` when nothing is set. `read_name`
/// names read positions.
pub fn write_schedule_body(s: &Schedule, f: &mut dyn fmt::Write, indent: &str, read_name: &dyn Fn(usize) -> String) -> fmt::Result {
    let mut entries: Vec<String> = Vec::new();
    let sizes = |v: &[u64]| v.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    if !s.tiles.is_empty() {
        entries.push(format!("tile = {{{}}}", s.tiles.iter().map(|(a, t)| format!("{a} = [{}]", sizes(t))).collect::<Vec<_>>().join(", ")));
    }
    if !s.order.is_empty() {
        entries.push(format!("order = [{}]", s.order.join(", ")));
    }
    if !s.vthreads.is_empty() {
        entries.push(format!("vthread = {{{}}}", s.vthreads.iter().map(|(a, v)| format!("{a} = {v}")).collect::<Vec<_>>().join(", ")));
    }
    if !s.cache.is_empty() {
        // In read order, however the directives were made.
        let mut cache: Vec<&CacheDirective> = s.cache.iter().collect();
        cache.sort_by_key(|c| c.read);
        entries.push(format!("cache = {{{}}}", cache.iter().map(|c| format!("{} = {}", read_name(c.read), c.level)).collect::<Vec<_>>().join(", ")));
    }
    if s.unroll != 0 {
        entries.push(format!("unroll = {}", s.unroll));
    }
    if let Some((axis, width)) = &s.vector {
        entries.push(format!("vector = {{{axis} = {width}}}"));
    }
    if let Some(x) = &s.intrinsic {
        let mut parts = vec![format!("name = \"{}\"", escape_string(&x.name)), format!("a = {}", read_name(x.a))];
        for (key, axes) in x.by_intrinsic_axis() {
            if !axes.is_empty() {
                parts.push(format!("{key} = [{}]", axes.join(", ")));
            }
        }
        entries.push(format!("intrinsic = {{{}}}", parts.join(", ")));
    }
    if entries.is_empty() {
        return f.write_str("{}");
    }
    writeln!(f, "{{")?;
    for (i, e) in entries.iter().enumerate() {
        writeln!(f, "{indent}  {e}{}", if i + 1 < entries.len() { "," } else { "" })?;
    }
    write!(f, "{indent}}}")
}

/// `s` as the inside of a string literal the lexer reads back (the
/// printer's too: labels, quoted names, intrinsic names).
pub(crate) fn escape_string(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}
