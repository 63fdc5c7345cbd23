//! Tile syntax: text → [`Module`] and back.
//!
//! `parse` runs the logos lexer and the lalrpop grammar (syntax errors),
//! then `resolve` (names, types written in the source, index expressions).
//! The verifier is separate (`crate::verify`) so that IR built by passes is
//! checked by the same code as IR read from text.

pub mod ast;
pub mod lexer;
mod printer;
mod resolve;

use crate::diag::{Diagnostic, Diagnostics, FileId, SourceMap, Span};
use crate::ir::Module;
use lalrpop_util::{ParseError, lalrpop_mod};
use lexer::{LexError, Lexer, Tok};

pub use printer::{print_function, print_module};

lalrpop_mod!(
    #[allow(clippy::all, unused_parens, dead_code)]
    grammar,
    "/syntax/grammar.rs"
);

/// Parses `source[range]` of `file` into a syntax tree.
pub fn parse_ast(sources: &SourceMap, file: FileId, range: std::ops::Range<usize>) -> Result<ast::ModuleAst, Diagnostic> {
    let text = &sources.source(file)[range.clone()];
    let lexer = Lexer::new(text, file, range.start);
    grammar::ModuleParser::new().parse(file, lexer).map_err(|e| syntax_error(file, range.end, e))
}

/// Parses and resolves `source[range]` of `file`. Errors are syntax errors
/// (the first one) or resolution errors (all of them).
pub fn parse_range(sources: &SourceMap, file: FileId, range: std::ops::Range<usize>) -> Result<Module, Diagnostics> {
    let ast = parse_ast(sources, file, range.clone())?;
    if ast.funcs.is_empty() {
        let at = Span::new(file, range.start..range.start);
        return Err(Diagnostic::error("the input contains no function")
            .at(at, "expected `func @name(...)` here")
            .with_help("a tile module is a list of `func` definitions; see ir-spec/README.md")
            .into());
    }
    resolve::resolve(&ast)
}

/// True if `text` holds no token (only whitespace and comments).
pub fn is_blank(text: &str) -> bool {
    Lexer::new(text, FileId::default(), 0).next().is_none()
}

/// Parses and resolves a whole file.
pub fn parse(sources: &SourceMap, file: FileId) -> Result<Module, Diagnostics> {
    parse_range(sources, file, 0..sources.source(file).len())
}

/// Convenience for tests and tools: parses a string registered as `name`.
pub fn parse_str(name: &str, source: &str) -> Result<(Module, SourceMap), (Diagnostics, SourceMap)> {
    let mut sm = SourceMap::new();
    let file = sm.add(name, source);
    match parse(&sm, file) {
        Ok(m) => Ok((m, sm)),
        Err(d) => Err((d, sm)),
    }
}

fn syntax_error(file: FileId, eof: usize, e: ParseError<usize, Tok<'_>, LexError>) -> Diagnostic {
    match e {
        ParseError::User { error } => Diagnostic::error(error.message.clone()).at(error.span, "here"),
        ParseError::InvalidToken { location } => Diagnostic::error("invalid token").at(Span::new(file, location..location + 1), "here"),
        ParseError::UnrecognizedEof { location, expected } => {
            let at = Span::new(file, location.min(eof)..location.min(eof));
            Diagnostic::error(format!("unexpected end of input; expected {}", describe_expected(&expected))).at(at, "input ends here")
        }
        ParseError::UnrecognizedToken { token: (l, tok, r), expected } => {
            let d = Diagnostic::error(format!("unexpected {tok}; expected {}", describe_expected(&expected)))
                .at(Span::new(file, l..r), "unexpected here");
            hint_for(d, &tok, &expected)
        }
        ParseError::ExtraToken { token: (l, tok, r) } => Diagnostic::error(format!("unexpected {tok} after the end of the module")).at(Span::new(file, l..r), "here"),
    }
}

/// Hints for the mistakes people actually make.
fn hint_for(d: Diagnostic, tok: &Tok<'_>, expected: &[String]) -> Diagnostic {
    let expects = |s: &str| expected.iter().any(|e| e == s);
    match tok {
        // Only `for` expects nothing but a definition.
        Tok::Use(_) if expected.len() == 1 && expects("Def") => d.with_help("a loop defines its variable: `for %i = 0 to 8 { ... }`"),
        Tok::Use(_) if expects("Def") => d.with_help("a read binds a scalar: `reads(%a = %A[i, k])`"),
        Tok::Int(_) if expects("Shape") => d.with_help("tensor types spell the element type last: `tensor<4x8xf32>`"),
        Tok::Ident(s) if expects("\"div\"") || expects("\"]\"") => d.with_help(format!(
            "`{s}` is not an index operation: index expressions are affine (axes times integer constants, `+`, `-`), optionally followed by `div <integer>`"
        )),
        _ => d,
    }
}

/// Turns lalrpop's terminal names into what a user would write.
fn describe_expected(expected: &[String]) -> String {
    let mut names: Vec<String> = expected
        .iter()
        .map(|e| match e.as_str() {
            "Def" => "a definition `%name =`".to_string(),
            "Use" => "a value `%name`".to_string(),
            "Symbol" => "a function name `@name`".to_string(),
            "Ident" => "an identifier".to_string(),
            "Int" => "an integer".to_string(),
            "Float" => "a float".to_string(),
            "Shape" => "a shape such as `4x8xf32`".to_string(),
            "Str" => "a string".to_string(),
            s => format!("`{}`", s.trim_matches('"')),
        })
        .collect();
    names.dedup();
    match names.len() {
        0 => "nothing more".to_string(),
        1 => names.remove(0),
        _ => {
            let last = names.pop().unwrap_or_default();
            format!("one of {}, or {}", names.join(", "), last)
        }
    }
}

#[cfg(test)]
mod tests;
