//! The tile-syntax lexer (logos), feeding the lalrpop grammar.
//!
//! Two token kinds carry grammar decisions so that the grammar stays LR(1)
//! without separators between statements: a value name followed by `=` is a
//! definition ([`Tok::Def`]), any other value name is a use ([`Tok::Use`]).
//! A statement therefore starts with a `Def` or a mnemonic, never a `Use`.

use crate::diag::{FileId, Span};
use logos::Logos;
use std::fmt;

#[derive(Logos, Copy, Clone, Debug, PartialEq, Eq)]
#[logos(skip r"[ \t\r\n\f]+")]
#[logos(skip(r"//[^\n]*", allow_greedy = true))]
pub enum Tok<'s> {
    #[token("func")]
    KwFunc,
    #[token("compute")]
    KwCompute,
    #[token("reduce")]
    KwReduce,
    #[token("reads")]
    KwReads,
    #[token("epilogue")]
    KwEpilogue,
    #[token("pad")]
    KwPad,
    #[token("div")]
    KwDiv,
    #[token("tensor")]
    KwTensor,
    #[token("const")]
    KwConst,
    #[token("index")]
    KwIndex,
    #[token("buffer")]
    KwBuffer,
    #[token("schedule")]
    KwSchedule,
    #[token("for")]
    KwFor,
    #[token("to")]
    KwTo,
    #[token("if")]
    KwIf,
    #[token("load")]
    KwLoad,
    #[token("store")]
    KwStore,
    #[token("copy")]
    KwCopy,
    #[token("box")]
    KwBox,
    #[token("cooperative")]
    KwCooperative,
    #[token("permute")]
    KwPermute,
    #[token("stride")]
    KwStride,
    #[token("split")]
    KwSplit,
    #[token("fill")]
    KwFill,
    #[token("kernel")]
    KwKernel,
    #[token("prepack")]
    KwPrepack,
    /// `%name =`: the name of a value being defined (without `%` and `=`).
    #[regex(r"%[A-Za-z0-9_][A-Za-z0-9_.$]*[ \t\r\n]*=", |lex| def_name(lex.slice()))]
    Def(&'s str),
    /// `%name`: a use of a value (without `%`).
    #[regex(r"%[A-Za-z0-9_][A-Za-z0-9_.$]*", |lex| &lex.slice()[1..])]
    Use(&'s str),
    /// `@name`: a function name (without `@`).
    #[regex(r"@[A-Za-z_][A-Za-z0-9_.$]*", |lex| &lex.slice()[1..])]
    Symbol(&'s str),
    /// Identifiers may contain dots between their parts (`thread.x`,
    /// `i.block`): mapping names and loop tags are dotted. Where a dot makes
    /// no sense (axis names) the resolver says so.
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")]
    Ident(&'s str),
    #[regex(r"[0-9]+")]
    Int(&'s str),
    #[regex(r"[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")]
    Float(&'s str),
    /// The inside of a shaped type: `4x8xf32`.
    #[regex(r"[0-9]+(x[0-9]+)*x[A-Za-z][A-Za-z0-9]*")]
    Shape(&'s str),
    /// A string; escapes are checked when the string is used.
    #[regex(r#""([^"\\\n]|\\[^\n])*""#, |lex| { let s = lex.slice(); &s[1..s.len() - 1] })]
    Str(&'s str),
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token("=")]
    Eq,
    #[token("->")]
    Arrow,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
}

fn def_name(slice: &str) -> &str {
    slice[1..].trim_end_matches('=').trim_end()
}

impl fmt::Display for Tok<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::KwFunc => f.write_str("`func`"),
            Tok::KwCompute => f.write_str("`compute`"),
            Tok::KwReduce => f.write_str("`reduce`"),
            Tok::KwReads => f.write_str("`reads`"),
            Tok::KwEpilogue => f.write_str("`epilogue`"),
            Tok::KwPad => f.write_str("`pad`"),
            Tok::KwDiv => f.write_str("`div`"),
            Tok::KwTensor => f.write_str("`tensor`"),
            Tok::KwConst => f.write_str("`const`"),
            Tok::KwIndex => f.write_str("`index`"),
            Tok::KwBuffer => f.write_str("`buffer`"),
            Tok::KwSchedule => f.write_str("`schedule`"),
            Tok::KwFor => f.write_str("`for`"),
            Tok::KwTo => f.write_str("`to`"),
            Tok::KwIf => f.write_str("`if`"),
            Tok::KwLoad => f.write_str("`load`"),
            Tok::KwStore => f.write_str("`store`"),
            Tok::KwCopy => f.write_str("`copy`"),
            Tok::KwBox => f.write_str("`box`"),
            Tok::KwCooperative => f.write_str("`cooperative`"),
            Tok::KwPermute => f.write_str("`permute`"),
            Tok::KwSplit => f.write_str("`split`"),
            Tok::KwStride => f.write_str("`stride`"),
            Tok::KwFill => f.write_str("`fill`"),
            Tok::KwKernel => f.write_str("`kernel`"),
            Tok::KwPrepack => f.write_str("`prepack`"),
            Tok::Def(s) => write!(f, "definition `%{s} =`"),
            Tok::Use(s) => write!(f, "value `%{s}`"),
            Tok::Symbol(s) => write!(f, "symbol `@{s}`"),
            Tok::Ident(s) => write!(f, "identifier `{s}`"),
            Tok::Int(s) => write!(f, "integer `{s}`"),
            Tok::Float(s) => write!(f, "float `{s}`"),
            Tok::Shape(s) => write!(f, "shape `{s}`"),
            Tok::Str(s) => write!(f, "string \"{s}\""),
            Tok::LParen => f.write_str("`(`"),
            Tok::RParen => f.write_str("`)`"),
            Tok::LBracket => f.write_str("`[`"),
            Tok::RBracket => f.write_str("`]`"),
            Tok::LBrace => f.write_str("`{`"),
            Tok::RBrace => f.write_str("`}`"),
            Tok::Lt => f.write_str("`<`"),
            Tok::Gt => f.write_str("`>`"),
            Tok::Comma => f.write_str("`,`"),
            Tok::Colon => f.write_str("`:`"),
            Tok::Eq => f.write_str("`=`"),
            Tok::Arrow => f.write_str("`->`"),
            Tok::Plus => f.write_str("`+`"),
            Tok::Minus => f.write_str("`-`"),
            Tok::Star => f.write_str("`*`"),
        }
    }
}

/// A character sequence that is no token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    pub span: Span,
    pub message: String,
}

/// Token stream in the `(start, token, end)` form lalrpop expects, with
/// offsets shifted by `base` so that spans index the whole file even when
/// only a chunk of it (`--split-input-file`) is lexed.
///
/// The lexer also bounds bracket nesting at [`MAX_NESTING`]: the parser and
/// everything after it recurse over nested brackets, and a pathological
/// input must get a diagnostic, not a stack overflow.
pub struct Lexer<'s> {
    inner: logos::Lexer<'s, Tok<'s>>,
    file: FileId,
    base: usize,
    depth: u32,
}

/// How deeply `(`, `[` and `{` may nest.
pub const MAX_NESTING: u32 = 200;

impl<'s> Lexer<'s> {
    pub fn new(source: &'s str, file: FileId, base: usize) -> Self {
        Lexer { inner: Tok::lexer(source), file, base, depth: 0 }
    }
}

impl<'s> Iterator for Lexer<'s> {
    type Item = Result<(usize, Tok<'s>, usize), LexError>;

    fn next(&mut self) -> Option<Self::Item> {
        let tok = self.inner.next()?;
        let range = self.inner.span();
        let (start, end) = (range.start + self.base, range.end + self.base);
        Some(match tok {
            Ok(t @ (Tok::LParen | Tok::LBracket | Tok::LBrace)) => {
                self.depth += 1;
                if self.depth > MAX_NESTING {
                    Err(LexError { span: Span::new(self.file, start..end), message: format!("brackets nest deeper than {MAX_NESTING} levels") })
                } else {
                    Ok((start, t, end))
                }
            }
            Ok(t @ (Tok::RParen | Tok::RBracket | Tok::RBrace)) => {
                self.depth = self.depth.saturating_sub(1);
                Ok((start, t, end))
            }
            Ok(t) => Ok((start, t, end)),
            Err(()) => {
                let slice = self.inner.slice();
                let c = slice.chars().next().unwrap_or(' ');
                let message = if c == '"' {
                    "unterminated string literal".to_string()
                } else if c == '%' || c == '@' {
                    format!("`{c}` must be followed by a name")
                } else {
                    format!("unexpected character `{}`", c.escape_default())
                };
                let end = start + c.len_utf8();
                Err(LexError { span: Span::new(self.file, start..end), message })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok<'_>> {
        Lexer::new(s, FileId::default(), 0).map(|r| r.map(|(_, t, _)| t).unwrap()).collect()
    }

    #[test]
    fn defs_and_uses_are_told_apart() {
        assert_eq!(toks("%a = add %b, %c"), vec![Tok::Def("a"), Tok::Ident("add"), Tok::Use("b"), Tok::Comma, Tok::Use("c")]);
        assert_eq!(toks("%0\n  = x"), vec![Tok::Def("0"), Tok::Ident("x")]);
    }

    #[test]
    fn shapes_numbers_and_comments() {
        assert_eq!(
            toks("tensor<4x8xf32> 1.5 2e-3 -7 // comment\n 12"),
            vec![Tok::KwTensor, Tok::Lt, Tok::Shape("4x8xf32"), Tok::Gt, Tok::Float("1.5"), Tok::Float("2e-3"), Tok::Minus, Tok::Int("7"), Tok::Int("12")]
        );
    }

    #[test]
    fn dotted_identifiers_and_loop_keywords() {
        assert_eq!(
            toks("for %i = 0 to 4 map(thread.x) axis(i.block) {"),
            vec![
                Tok::KwFor,
                Tok::Def("i"),
                Tok::Int("0"),
                Tok::KwTo,
                Tok::Int("4"),
                Tok::Ident("map"),
                Tok::LParen,
                Tok::Ident("thread.x"),
                Tok::RParen,
                Tok::Ident("axis"),
                Tok::LParen,
                Tok::Ident("i.block"),
                Tok::RParen,
                Tok::LBrace
            ]
        );
        // A trailing dot is not part of an identifier.
        assert!(Lexer::new("a.", FileId::default(), 0).any(|r| r.is_err()));
    }

    #[test]
    fn bad_characters_are_errors_with_spans() {
        let errs: Vec<_> = Lexer::new("func $", FileId::default(), 10).filter_map(Result::err).collect();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].span.range(), 15..16);
        assert!(errs[0].message.contains("unexpected character `$`"));
    }
}
