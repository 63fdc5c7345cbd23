//! Diagnostics: source files, spans, and errors rendered with `codespan-reporting`.
//!
//! Every error a user can cause — a syntax error, a verifier error, a bad
//! pass pipeline — is a [`Diagnostic`] with a primary [`Label`] on a
//! [`Span`], so it renders as `file:line:col` with the offending text
//! underlined. Pipelines given on the command line are registered as
//! pseudo-files (`<pass-pipeline>`) so their errors get the same caret.

use codespan_reporting::diagnostic as cs;
use codespan_reporting::files::{Files, SimpleFiles};
use codespan_reporting::term;
use std::fmt;
use std::ops::Range;

/// Index of a file in a [`SourceMap`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct FileId(u32);

/// A byte range in a source file. `Span::DUMMY` marks IR built without
/// source (tests, synthesised ops whose origin is unknown).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub const DUMMY: Span = Span { file: FileId(u32::MAX), start: 0, end: 0 };

    pub fn new(file: FileId, range: Range<usize>) -> Span {
        Span { file, start: range.start as u32, end: range.end as u32 }
    }

    pub fn is_dummy(self) -> bool {
        self.file == FileId(u32::MAX)
    }

    /// The smallest span covering both (same file assumed).
    pub fn to(self, other: Span) -> Span {
        if self.is_dummy() {
            return other;
        }
        if other.is_dummy() {
            return self;
        }
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Note,
    Warning,
    Error,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// One error, warning or note: a message, a primary location, secondary
/// locations, and free-form notes (rendered as `= note:` / `= help:`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub primary: Option<Label>,
    pub secondary: Vec<Label>,
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>) -> Self {
        Diagnostic { severity: Severity::Error, message: message.into(), primary: None, secondary: Vec::new(), notes: Vec::new() }
    }

    pub fn warning(message: impl Into<String>) -> Self {
        Diagnostic { severity: Severity::Warning, ..Diagnostic::error(message) }
    }

    /// The primary location with its label text.
    pub fn at(mut self, span: Span, label: impl Into<String>) -> Self {
        self.primary = Some(Label { span, message: label.into() });
        self
    }

    /// A secondary location ("defined here", "axis declared here").
    pub fn with_secondary(mut self, span: Span, label: impl Into<String>) -> Self {
        if !span.is_dummy() {
            self.secondary.push(Label { span, message: label.into() });
        }
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(format!("note: {}", note.into()));
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.notes.push(format!("help: {}", help.into()));
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    pub fn span(&self) -> Option<Span> {
        self.primary.as_ref().map(|l| l.span).filter(|s| !s.is_dummy())
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.severity.name(), self.message)
    }
}

/// A list of diagnostics, the error type of everything that can report
/// several problems at once (the resolver, the verifier, the pass manager).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn new() -> Self {
        Diagnostics(Vec::new())
    }

    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    /// `Ok(())` if no error was reported (warnings are fine).
    pub fn into_result(self) -> Result<(), Diagnostics> {
        if self.has_errors() { Err(self) } else { Ok(()) }
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Diagnostics(vec![d])
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// The source files diagnostics point into.
#[derive(Default)]
pub struct SourceMap {
    files: SimpleFiles<String, String>,
    count: usize,
}

impl SourceMap {
    pub fn new() -> Self {
        SourceMap::default()
    }

    pub fn add(&mut self, name: impl Into<String>, source: impl Into<String>) -> FileId {
        self.count += 1;
        FileId(self.files.add(name.into(), source.into()) as u32)
    }

    pub fn source(&self, file: FileId) -> &str {
        self.files.get(file.0 as usize).map(|f| f.source().as_str()).unwrap_or("")
    }

    pub fn name(&self, file: FileId) -> &str {
        self.files.get(file.0 as usize).map(|f| f.name().as_str()).unwrap_or("<unknown>")
    }

    /// 1-based (line, column) of a byte offset, in characters.
    pub fn line_col(&self, file: FileId, offset: usize) -> Option<(usize, usize)> {
        let idx = file.0 as usize;
        let line = self.files.line_index(idx, offset).ok()?;
        let col = self.files.column_number(idx, line, offset).ok()?;
        Some((line + 1, col))
    }

    /// Renders diagnostics the way `rustc` does, with the source line and
    /// a caret under the span.
    pub fn emit(&self, out: &mut dyn term::WriteStyle, diags: &[Diagnostic]) {
        let config = term::Config::default();
        // The renderer writes a character at a time (a caret per column);
        // unbuffered, a long line took a system call per character.
        let mut out = StyledBuffer { out, pending: Vec::new() };
        for d in diags {
            let _ = term::emit_to_write_style(&mut out, &config, &self.files, &self.to_codespan(d));
        }
        let _ = std::io::Write::flush(&mut out);
    }

    /// Renders diagnostics to a plain string (no colour).
    pub fn render(&self, diags: &[Diagnostic]) -> String {
        let mut buf = termcolor::NoColor::new(Vec::new());
        self.emit(&mut buf, diags);
        String::from_utf8_lossy(&buf.into_inner()).into_owned()
    }

    fn to_codespan(&self, d: &Diagnostic) -> cs::Diagnostic<usize> {
        let severity = match d.severity {
            Severity::Note => cs::Severity::Note,
            Severity::Warning => cs::Severity::Warning,
            Severity::Error => cs::Severity::Error,
        };
        let mut labels = Vec::new();
        let valid = |s: Span| !s.is_dummy() && (s.file.0 as usize) < self.count;
        if let Some(p) = &d.primary {
            if valid(p.span) {
                labels.push(cs::Label::primary(p.span.file.0 as usize, p.span.range()).with_message(&p.message));
            }
        }
        for s in &d.secondary {
            if valid(s.span) {
                labels.push(cs::Label::secondary(s.span.file.0 as usize, s.span.range()).with_message(&s.message));
            }
        }
        cs::Diagnostic::new(severity).with_message(&d.message).with_labels(labels).with_notes(d.notes.clone())
    }
}

/// Buffers text between style changes, so that writing to an unbuffered
/// stream (stderr) costs a system call per styled run, not per character.
struct StyledBuffer<'a> {
    out: &'a mut dyn term::WriteStyle,
    pending: Vec<u8>,
}

impl StyledBuffer<'_> {
    fn write_pending(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            self.out.write_all(&self.pending)?;
            self.pending.clear();
        }
        Ok(())
    }
}

impl std::io::Write for StyledBuffer<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.write_pending()?;
        self.out.flush()
    }
}

impl term::WriteStyle for StyledBuffer<'_> {
    fn set_header(&mut self, severity: cs::Severity) -> std::io::Result<()> {
        self.write_pending()?;
        self.out.set_header(severity)
    }

    fn set_header_message(&mut self) -> std::io::Result<()> {
        self.write_pending()?;
        self.out.set_header_message()
    }

    fn set_line_number(&mut self) -> std::io::Result<()> {
        self.write_pending()?;
        self.out.set_line_number()
    }

    fn set_note_bullet(&mut self) -> std::io::Result<()> {
        self.write_pending()?;
        self.out.set_note_bullet()
    }

    fn set_source_border(&mut self) -> std::io::Result<()> {
        self.write_pending()?;
        self.out.set_source_border()
    }

    fn set_label(&mut self, severity: cs::Severity, label_style: cs::LabelStyle) -> std::io::Result<()> {
        self.write_pending()?;
        self.out.set_label(severity, label_style)
    }

    fn reset(&mut self) -> std::io::Result<()> {
        self.write_pending()?;
        self.out.reset()
    }
}

/// Words longer than this (in characters) get no suggestion: nobody
/// mistypes a name that long, and the edit distance's cost grows with the
/// product of the lengths (a megabyte-long identifier must not take
/// seconds to report).
const MAX_SUGGESTED_LEN: usize = 256;

/// The candidate closest to `word` by edit distance, if close enough to be
/// a plausible typo: at most a third of the longer word's characters
/// (at least one) differ. Linear in the length of `word` and the
/// candidates when they are long: candidates whose lengths differ from
/// `word`'s by more than that allowance cannot be close enough and are
/// skipped before any distance is computed.
pub fn closest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let word_len = word.chars().count();
    if word_len > MAX_SUGGESTED_LEN {
        return None;
    }
    let word: Vec<char> = word.chars().collect();
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        // Bounded: a candidate far longer than `word` is skipped by the
        // length test below after counting at most this many characters.
        let c_len = c.chars().take(3 * MAX_SUGGESTED_LEN + 2).count();
        let allowed = (c_len.max(word_len) / 3).max(1);
        if c_len.abs_diff(word_len) > allowed {
            continue;
        }
        let d = edit_distance(&word, &c.chars().collect::<Vec<char>>());
        if d <= allowed && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// Optimal-string-alignment distance: edits, plus swapping two adjacent
/// characters as one edit (`lsh` is one edit from `lhs`). Three rows of
/// the table (the swap looks two rows back), not the whole table.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        current[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            current[j] = (previous[j - 1] + cost).min(previous[j] + 1).min(current[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                current[j] = current[j].min(before[j - 2] + 1);
            }
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_allow_one_swap() {
        assert_eq!(closest("lsh", ["lhs", "rhs"].into_iter()), Some("lhs"));
        assert_eq!(closest("canonicalise", ["canonicalize", "tile"].into_iter()), Some("canonicalize"));
        assert_eq!(closest("zzz", ["canonicalize"].into_iter()), None);
    }

    #[test]
    fn distance_is_the_optimal_string_alignment() {
        let d = |a: &str, b: &str| edit_distance(&a.chars().collect::<Vec<_>>(), &b.chars().collect::<Vec<_>>());
        assert_eq!(d("", ""), 0);
        assert_eq!(d("abc", ""), 3);
        assert_eq!(d("", "ab"), 2);
        assert_eq!(d("kitten", "sitting"), 3);
        assert_eq!(d("lsh", "lhs"), 1);
        assert_eq!(d("ca", "abc"), 3);
        assert_eq!(d("flaw", "lawn"), 2);
    }

    #[test]
    fn long_words_are_answered_quickly() {
        // A megabyte-long word in op position: no candidate is near it, and
        // the answer comes without a table of a million rows per candidate.
        let huge = "x".repeat(1 << 20);
        assert_eq!(closest(&huge, ["add", "mul", "compute", "yield"].into_iter()), None);
        // Nor is a long candidate compared at length with a short word.
        let long_candidate = "y".repeat(1 << 20);
        assert_eq!(closest("add", [long_candidate.as_str(), "adn"].into_iter()), Some("adn"));
        // Long words within the limit still get suggestions.
        let word = "a".repeat(200) + "b";
        let near = "a".repeat(200) + "c";
        assert_eq!(closest(&word, [near.as_str(), "add"].into_iter()), Some(near.as_str()));
        // Past the limit, none.
        let word = "a".repeat(300) + "b";
        let near = "a".repeat(300) + "c";
        assert_eq!(closest(&word, [near.as_str()].into_iter()), None);
        // Lengths are counted in characters, not bytes.
        assert_eq!(closest("ééé", ["éé"].into_iter()), Some("éé"));
    }

    #[test]
    fn renders_file_line_col_and_caret() {
        let mut sm = SourceMap::new();
        let f = sm.add("a.tile", "func @f() {\n  bogus\n}\n");
        let d = Diagnostic::error("unknown op `bogus`").at(Span::new(f, 14..19), "not an op").with_help("see --list-ops");
        let text = sm.render(&[d]);
        assert!(text.contains("error: unknown op `bogus`"), "{text}");
        assert!(text.contains("a.tile:2:3"), "{text}");
        assert!(text.contains("^^^^^ not an op"), "{text}");
        assert!(text.contains("= help: see --list-ops"), "{text}");
        assert_eq!(sm.line_col(f, 14), Some((2, 3)));
    }
}
