//! `--verify-diagnostics`: checks the diagnostics a run produced against
//! annotations in the input, MLIR style:
//!
//! ```text
//! // expected-error@+1 {{unknown axis `q`}}
//! %y = compute (i: 4) reads(%a = %x[q]) -> ...
//! ```
//!
//! `expected-error` / `expected-warning`, optionally `@+N` / `@-N` (relative
//! line), and the expected text between `{{` and `}}`, which must occur in
//! the message. Every diagnostic must be expected and every expectation
//! met; what is not is reported as an error at its location.

use crate::diag::{Diagnostic, Diagnostics, FileId, Severity, SourceMap, Span};
use std::ops::Range;

#[derive(Clone, Debug)]
pub struct Expectation {
    pub severity: Severity,
    /// 1-based line the diagnostic must be on.
    pub line: usize,
    pub text: String,
    pub span: Span,
}

/// Finds the annotations in `range` of `file`.
pub fn parse_expectations(sources: &SourceMap, file: FileId, range: Range<usize>) -> Result<Vec<Expectation>, Diagnostics> {
    let text = &sources.source(file)[range.clone()];
    let mut out = Vec::new();
    let mut diags = Diagnostics::new();
    let mut offset = range.start;
    for line in text.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        for (kw, severity) in [("expected-error", Severity::Error), ("expected-warning", Severity::Warning)] {
            let Some(at) = line.find(kw) else { continue };
            if !line[..at].contains("//") {
                continue;
            }
            let start = line_start + at;
            let rest = &line[at + kw.len()..];
            let span = Span::new(file, start..line_start + line.trim_end().len());
            let (this_line, _) = sources.line_col(file, start).unwrap_or((1, 1));
            let (delta, rest) = match rest.strip_prefix('@') {
                Some(r) => {
                    let digits_end = r.char_indices().find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '+' || c == '-')))).map_or(r.len(), |(i, _)| i);
                    match r[..digits_end].parse::<i64>() {
                        Ok(d) => (d, &r[digits_end..]),
                        Err(_) => {
                            diags.push(Diagnostic::error("malformed line offset in expected-diagnostic annotation").at(span, "expected `@+N` or `@-N`"));
                            continue;
                        }
                    }
                }
                None => (0, rest),
            };
            let rest = rest.trim_start();
            let (Some(open), Some(close)) = (rest.find("{{"), rest.rfind("}}")) else {
                diags.push(Diagnostic::error("expected-diagnostic annotation has no `{{message}}`").at(span, "add the expected text in `{{...}}`"));
                continue;
            };
            if close < open + 2 {
                diags.push(Diagnostic::error("malformed `{{message}}` in expected-diagnostic annotation").at(span, "here"));
                continue;
            }
            // An offset that overflows points past any file there can be.
            let Some(line) = i64::try_from(this_line).ok().and_then(|l| l.checked_add(delta)) else {
                diags.push(Diagnostic::error("expected-diagnostic annotation points past the end of the file").at(span, "line offset too large"));
                continue;
            };
            if line < 1 {
                diags.push(Diagnostic::error("expected-diagnostic annotation points before the start of the file").at(span, "here"));
                continue;
            }
            out.push(Expectation { severity, line: line as usize, text: rest[open + 2..close].to_string(), span });
        }
    }
    diags.into_result().map(|()| out)
}

/// Matches produced diagnostics against expectations. Returns the
/// mismatches as errors (empty when everything matched).
pub fn check(sources: &SourceMap, mut expected: Vec<Expectation>, produced: &[Diagnostic]) -> Diagnostics {
    let mut problems = Diagnostics::new();
    for d in produced {
        if d.severity == Severity::Note {
            continue;
        }
        let line = d.span().and_then(|s| sources.line_col(s.file, s.start as usize)).map(|(l, _)| l);
        let hit = expected.iter().position(|e| e.severity == d.severity && Some(e.line) == line && d.message.contains(&e.text));
        match hit {
            Some(i) => {
                expected.remove(i);
            }
            None => {
                let mut p = Diagnostic::error(format!("unexpected {}: {}", d.severity.name(), d.message));
                if let Some(s) = d.span() {
                    p = p.at(s, "produced here");
                }
                problems.push(p);
            }
        }
    }
    for e in expected {
        problems.push(
            Diagnostic::error(format!("expected {} \"{}\" on line {} was not produced", e.severity.name(), e.text, e.line)).at(e.span, "expected here"),
        );
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_match_by_line_and_text() {
        let mut sm = SourceMap::new();
        let src = "a\n// expected-error@+1 {{bad thing}}\nb\nc // expected-warning {{meh}}\n";
        let f = sm.add("t.tile", src);
        let exp = parse_expectations(&sm, f, 0..src.len()).unwrap();
        assert_eq!(exp.len(), 2);
        assert_eq!((exp[0].line, exp[1].line), (3, 4));
        let b = src.find("b\n").unwrap();
        let c = src.find("c //").unwrap();
        let produced = vec![
            Diagnostic::error("a bad thing happened").at(Span::new(f, b..b + 1), "x"),
            Diagnostic::warning("meh indeed").at(Span::new(f, c..c + 1), "y"),
        ];
        assert!(check(&sm, exp.clone(), &produced).is_empty());
        let problems = check(&sm, exp, &produced[..1]);
        assert_eq!(problems.len(), 1);
        assert!(problems.0[0].message.contains("\"meh\" on line 4 was not produced"));
    }
}
