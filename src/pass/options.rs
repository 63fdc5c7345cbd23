//! Typed pass options: declarations, parsing of their text values, and the
//! validated set a pass is constructed from.

use indexmap::IndexMap;
use std::fmt;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OptionKind {
    Bool,
    Int,
    UInt,
    Float,
    Str,
    /// One of the listed words.
    Enum(&'static [&'static str]),
    /// Comma-separated integers: `sizes=4,8,16`.
    IntList,
}

impl OptionKind {
    pub fn describe(&self) -> String {
        match self {
            OptionKind::Bool => "bool".into(),
            OptionKind::Int => "int".into(),
            OptionKind::UInt => "uint".into(),
            OptionKind::Float => "float".into(),
            OptionKind::Str => "string".into(),
            OptionKind::Enum(words) => words.join("|"),
            OptionKind::IntList => "int,...".into(),
        }
    }

    /// Parses an option's text; the error says what was expected.
    pub fn parse(&self, text: &str) -> Result<OptionValue, String> {
        match self {
            OptionKind::Bool => match text {
                "true" | "1" => Ok(OptionValue::Bool(true)),
                "false" | "0" => Ok(OptionValue::Bool(false)),
                _ => Err(format!("expected `true` or `false`, found `{text}`")),
            },
            OptionKind::Int => text.parse().map(OptionValue::Int).map_err(|_| int_error(text, "an integer")),
            OptionKind::UInt => text.parse().map(OptionValue::UInt).map_err(|_| int_error(text, "a non-negative integer")),
            OptionKind::Float => match text.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(OptionValue::Float(x)),
                _ => Err(format!("expected a finite number, found `{text}`")),
            },
            OptionKind::Str => Ok(OptionValue::Str(unquote(text).to_string())),
            OptionKind::Enum(words) => {
                if words.contains(&text) {
                    Ok(OptionValue::Str(text.to_string()))
                } else {
                    Err(format!("expected one of {}, found `{text}`", words.iter().map(|w| format!("`{w}`")).collect::<Vec<_>>().join(", ")))
                }
            }
            OptionKind::IntList => {
                let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
                if inner.trim().is_empty() {
                    return Ok(OptionValue::IntList(Vec::new()));
                }
                inner
                    .split(',')
                    .map(|p| p.trim().parse::<i64>().map_err(|_| format!("expected comma-separated integers, found `{}`", p.trim())))
                    .collect::<Result<Vec<_>, _>>()
                    .map(OptionValue::IntList)
            }
        }
    }
}

fn int_error(text: &str, what: &str) -> String {
    let negative = text.starts_with('-');
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && !(negative && what.contains("non-negative")) {
        format!("`{text}` is out of range")
    } else {
        format!("expected {what}, found `{text}`")
    }
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(s)
}

/// One option of a pass.
#[derive(Debug)]
pub struct OptionDecl {
    pub name: &'static str,
    pub kind: OptionKind,
    /// The default, in the same text form a pipeline uses.
    pub default: &'static str,
    pub help: &'static str,
}

#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    IntList(Vec<i64>),
}

impl fmt::Display for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionValue::Bool(b) => write!(f, "{b}"),
            OptionValue::Int(i) => write!(f, "{i}"),
            OptionValue::UInt(u) => write!(f, "{u}"),
            OptionValue::Float(x) => write!(f, "{x}"),
            OptionValue::Str(s) => f.write_str(s),
            OptionValue::IntList(v) => f.write_str(&v.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")),
        }
    }
}

/// Every option of one pass instance, defaults filled in, all validated
/// against the declaration. Getters take the declared name; asking for an
/// undeclared name or the wrong type is a bug in the pass, not bad input.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassOptions {
    values: IndexMap<&'static str, OptionValue>,
}

impl PassOptions {
    /// The defaults of every declared option.
    pub fn defaults(decls: &'static [OptionDecl]) -> PassOptions {
        let values = decls
            .iter()
            .map(|d| (d.name, d.kind.parse(d.default).unwrap_or_else(|e| panic!("default of option `{}` is invalid: {e}", d.name))))
            .collect();
        PassOptions { values }
    }

    pub fn set(&mut self, name: &'static str, value: OptionValue) {
        self.values.insert(name, value);
    }

    fn get(&self, name: &str) -> &OptionValue {
        self.values.get(name).unwrap_or_else(|| panic!("pass asked for undeclared option `{name}`"))
    }

    /// The value of `name` in pipeline syntax.
    pub fn text(&self, name: &str) -> String {
        self.get(name).to_string()
    }

    pub fn bool(&self, name: &str) -> bool {
        match self.get(name) {
            OptionValue::Bool(b) => *b,
            v => panic!("option `{name}` is not a bool: {v:?}"),
        }
    }

    pub fn int(&self, name: &str) -> i64 {
        match self.get(name) {
            OptionValue::Int(i) => *i,
            v => panic!("option `{name}` is not an int: {v:?}"),
        }
    }

    pub fn uint(&self, name: &str) -> u64 {
        match self.get(name) {
            OptionValue::UInt(u) => *u,
            v => panic!("option `{name}` is not a uint: {v:?}"),
        }
    }

    pub fn float(&self, name: &str) -> f64 {
        match self.get(name) {
            OptionValue::Float(x) => *x,
            v => panic!("option `{name}` is not a float: {v:?}"),
        }
    }

    pub fn str(&self, name: &str) -> &str {
        match self.get(name) {
            OptionValue::Str(s) => s,
            v => panic!("option `{name}` is not a string: {v:?}"),
        }
    }

    pub fn int_list(&self, name: &str) -> &[i64] {
        match self.get(name) {
            OptionValue::IntList(v) => v,
            v => panic!("option `{name}` is not an int list: {v:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_or_explain() {
        assert_eq!(OptionKind::IntList.parse("4,8, 16"), Ok(OptionValue::IntList(vec![4, 8, 16])));
        assert_eq!(OptionKind::IntList.parse("[1,2]"), Ok(OptionValue::IntList(vec![1, 2])));
        assert!(OptionKind::UInt.parse("-1").unwrap_err().contains("non-negative"));
        assert!(OptionKind::Enum(&["a", "b"]).parse("c").unwrap_err().contains("`a`, `b`"));
        assert_eq!(OptionKind::Bool.parse("1"), Ok(OptionValue::Bool(true)));
        assert!(OptionKind::Float.parse("inf").is_err());
    }
}
