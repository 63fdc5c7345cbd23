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
        for d in diags {
            let _ = term::emit_to_write_style(out, &config, &self.files, &self.to_codespan(d));
        }
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

/// The candidate closest to `word` by edit distance, if close enough to be
/// a plausible typo.
pub fn closest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates.map(|c| (edit_distance(word, c), c)).filter(|&(d, c)| d <= (c.len().max(word.len()) / 3).max(1)).min_by_key(|&(d, _)| d).map(|(_, c)| c)
}

/// Optimal-string-alignment distance: edits, plus swapping two adjacent
/// characters as one edit (`lsh` is one edit from `lhs`).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for j in 0..=b.len() {
        d[0][j] = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j - 1] + cost).min(d[i - 1][j] + 1).min(d[i][j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
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
