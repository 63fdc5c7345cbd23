//! Textual pass pipelines, MLIR's syntax:
//!
//! ```text
//! pipeline ::= anchor '(' [pass (',' pass)*] ')' | [pass (',' pass)*]
//! anchor   ::= 'builtin.module' | 'module'
//! pass     ::= name ['{' [option (' ' option)*] '}']
//! option   ::= key ['=' value]          (a bare key sets a bool to true)
//! value    ::= text up to a space or '}', brackets and quotes balanced
//! ```
//!
//! Parsing checks structure first, then resolves pass and option names
//! against the registry and reports every unknown name and bad value, each
//! with a caret under the offending characters of the pipeline text.

use super::{OptionValue, PassDecl, PassOptions, Registry};
use crate::diag::{Diagnostic, Diagnostics, FileId, Span};
use crate::diag::closest;
use std::fmt;

/// One pass of a pipeline, resolved and with validated options.
#[derive(Clone, Debug)]
pub struct PassSpec {
    pub decl: &'static PassDecl,
    pub options: PassOptions,
    /// Options as written (name, text), for printing the pipeline back.
    pub given: Vec<(&'static str, String)>,
    pub span: Span,
}

impl fmt::Display for PassSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.decl.name)?;
        if !self.given.is_empty() {
            let opts: Vec<String> = self.given.iter().map(|(k, v)| format!("{k}={v}")).collect();
            write!(f, "{{{}}}", opts.join(" "))?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    pub passes: Vec<PassSpec>,
}

impl Pipeline {
    /// Appends a pass with default options.
    pub fn push_default(&mut self, decl: &'static PassDecl) {
        self.passes.push(PassSpec { decl, options: PassOptions::defaults(decl.options), given: Vec::new(), span: Span::DUMMY });
    }
}

impl fmt::Display for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let passes: Vec<String> = self.passes.iter().map(ToString::to_string).collect();
        write!(f, "builtin.module({})", passes.join(","))
    }
}

struct RawOption {
    key: String,
    key_span: Span,
    value: Option<(String, Span)>,
}

struct RawPass {
    name: String,
    span: Span,
    options: Vec<RawOption>,
}

struct Scanner<'t> {
    text: &'t str,
    pos: usize,
    file: FileId,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += self.peek().map_or(0, char::len_utf8);
        }
    }

    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start..end)
    }

    /// A one-character span at the cursor (or an empty one at the end).
    fn here(&self) -> Span {
        let len = self.peek().map_or(0, char::len_utf8);
        self.span(self.pos, self.pos + len)
    }

    fn found(&self) -> String {
        match self.peek() {
            Some(c) => format!("`{c}`"),
            None => "the end of the pipeline".into(),
        }
    }

    fn name(&mut self) -> Option<(String, Span)> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
            self.pos += 1;
        }
        (self.pos > start).then(|| (self.text[start..self.pos].to_string(), self.span(start, self.pos)))
    }

    fn expect(&mut self, c: char, what: &str) -> Result<(), Diagnostic> {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Diagnostic::error(format!("expected {what}, found {}", self.found())).at(self.here(), format!("expected `{c}`")))
        }
    }

    fn pipeline(&mut self) -> Result<Vec<RawPass>, Diagnostic> {
        self.skip_ws();
        if self.peek().is_none() {
            return Ok(Vec::new());
        }
        let checkpoint = self.pos;
        let Some((first, first_span)) = self.name() else {
            return Err(Diagnostic::error(format!("expected a pass name, found {}", self.found())).at(self.here(), "expected a pass name"));
        };
        self.skip_ws();
        let passes = if self.peek() == Some('(') {
            if first != "builtin.module" && first != "module" {
                return Err(Diagnostic::error(format!("unknown pipeline anchor `{first}`"))
                    .at(first_span, "not an anchor")
                    .with_help("tile pipelines run on whole modules: wrap them as `builtin.module(...)`"));
            }
            self.pos += 1;
            self.skip_ws();
            let passes = if self.peek() == Some(')') { Vec::new() } else { self.list()? };
            self.expect(')', "`,` or `)`")?;
            passes
        } else {
            self.pos = checkpoint;
            self.list()?
        };
        self.skip_ws();
        if self.peek().is_some() {
            return Err(Diagnostic::error(format!("unexpected {} after the pipeline", self.found())).at(self.here(), "expected the end of the pipeline"));
        }
        Ok(passes)
    }

    fn list(&mut self) -> Result<Vec<RawPass>, Diagnostic> {
        let mut passes = vec![self.pass()?];
        loop {
            self.skip_ws();
            if self.peek() != Some(',') {
                return Ok(passes);
            }
            self.pos += 1;
            passes.push(self.pass()?);
        }
    }

    fn pass(&mut self) -> Result<RawPass, Diagnostic> {
        self.skip_ws();
        let Some((name, span)) = self.name() else {
            return Err(Diagnostic::error(format!("expected a pass name, found {}", self.found())).at(self.here(), "expected a pass name"));
        };
        self.skip_ws();
        let mut options = Vec::new();
        match self.peek() {
            Some('(') => {
                return Err(Diagnostic::error(format!("nested pipeline `{name}(...)` is not supported"))
                    .at(span, "nested anchor")
                    .with_help("tile passes run on whole modules; list them directly inside `builtin.module(...)`"));
            }
            Some('{') => {
                let open = self.here();
                self.pos += 1;
                loop {
                    self.skip_ws();
                    match self.peek() {
                        Some('}') => {
                            self.pos += 1;
                            break;
                        }
                        None => {
                            return Err(Diagnostic::error("unterminated option list").at(open, "this `{` is never closed").with_help("close the options with `}`"));
                        }
                        _ => options.push(self.option()?),
                    }
                }
            }
            _ => {}
        }
        Ok(RawPass { name, span, options })
    }

    fn option(&mut self) -> Result<RawOption, Diagnostic> {
        let Some((key, key_span)) = self.name() else {
            return Err(Diagnostic::error(format!("expected an option name, found {}", self.found())).at(self.here(), "expected `name=value`"));
        };
        if self.peek() != Some('=') {
            return Ok(RawOption { key, key_span, value: None });
        }
        self.pos += 1;
        let start = self.pos;
        let mut depth = 0i32;
        let mut quoted = false;
        while let Some(c) = self.peek() {
            match c {
                '"' => quoted = !quoted,
                _ if quoted => {}
                '[' | '{' | '(' => depth += 1,
                ']' | ')' => depth = (depth - 1).max(0),
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                c if c.is_whitespace() && depth == 0 => break,
                _ => {}
            }
            self.pos += c.len_utf8();
        }
        if quoted {
            return Err(Diagnostic::error("unterminated string in option value").at(self.span(start, self.pos), "missing closing `\"`"));
        }
        let value = self.text[start..self.pos].to_string();
        Ok(RawOption { key, key_span, value: Some((value, self.span(start, self.pos))) })
    }
}

/// Parses and resolves a pipeline. `file` is the pipeline text registered
/// in the caller's source map (so diagnostics can point into it).
pub fn parse_pipeline(text: &str, file: FileId, registry: &Registry) -> Result<Pipeline, Diagnostics> {
    let raw = Scanner { text, pos: 0, file }.pipeline()?;
    let mut diags = Diagnostics::new();
    let mut pipeline = Pipeline::default();
    for p in raw {
        let Some(decl) = registry.get(&p.name) else {
            let mut d = Diagnostic::error(format!("unknown pass `{}`", p.name)).at(p.span, "no pass of this name");
            if let Some(best) = closest(&p.name, registry.names()) {
                d = d.with_help(format!("did you mean `{best}`?"));
            }
            diags.push(d.with_note("`tilec --list-passes` lists the passes and their options"));
            continue;
        };
        let mut options = PassOptions::defaults(decl.options);
        let mut given = Vec::new();
        for o in p.options {
            let Some(od) = decl.options.iter().find(|od| od.name == o.key) else {
                let names: Vec<&str> = decl.options.iter().map(|od| od.name).collect();
                let mut d = Diagnostic::error(format!("pass `{}` has no option `{}`", decl.name, o.key)).at(o.key_span, "unknown option");
                d = match closest(&o.key, names.iter().copied()) {
                    Some(best) => d.with_help(format!("did you mean `{best}`?")),
                    None if names.is_empty() => d.with_note(format!("`{}` takes no options", decl.name)),
                    None => d.with_note(format!("its options are: {}", names.join(", "))),
                };
                diags.push(d);
                continue;
            };
            if given.iter().any(|(k, _)| *k == od.name) {
                diags.push(Diagnostic::error(format!("option `{}` is given twice", od.name)).at(o.key_span, "repeated"));
                continue;
            }
            let (text, span) = match o.value {
                Some(v) => v,
                None if od.kind == super::OptionKind::Bool => ("true".to_string(), o.key_span),
                None => {
                    diags.push(
                        Diagnostic::error(format!("option `{}` needs a value", od.name))
                            .at(o.key_span, format!("expected `{}=<{}>`", od.name, od.kind.describe())),
                    );
                    continue;
                }
            };
            match od.kind.parse(&text) {
                Ok(v) => {
                    options.set(od.name, v.clone());
                    given.push((od.name, canonical_text(&v, &text)));
                }
                Err(msg) => diags.push(Diagnostic::error(format!("invalid value for option `{}` of `{}`: {msg}", od.name, decl.name)).at(span, "invalid value")),
            }
        }
        pipeline.passes.push(PassSpec { decl, options, given, span: p.span });
    }
    diags.into_result().map(|()| pipeline)
}

/// How an option prints back: lists without brackets, the rest as written.
fn canonical_text(v: &OptionValue, text: &str) -> String {
    match v {
        OptionValue::IntList(_) | OptionValue::Bool(_) => v.to_string(),
        _ => text.to_string(),
    }
}
