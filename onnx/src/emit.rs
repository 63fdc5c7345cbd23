//! Tile text for one compute op, built from parts: axes, reads, a scalar
//! body, an optional epilogue. The importer writes text (not IR) because
//! the text is the dialect's stable interface; `import_model` parses and
//! verifies what it wrote, so a mistake here is caught, not printed.

use std::fmt::Write;

/// A read of a compute op: `%bind = %tensor[index, ...] [pad(p)]`.
#[derive(Clone, Debug)]
pub struct Read {
    pub bind: String,
    pub tensor: String,
    pub index: Vec<String>,
    pub pad: Option<&'static str>,
}

impl Read {
    pub fn new(bind: &str, tensor: &str, index: Vec<String>) -> Read {
        Read {
            bind: bind.to_string(),
            tensor: tensor.to_string(),
            index,
            pad: None,
        }
    }

    pub fn pad(mut self, pad: &'static str) -> Read {
        self.pad = Some(pad);
        self
    }

    fn text(&self) -> String {
        let pad = self.pad.map(|p| format!(" pad({p})")).unwrap_or_default();
        format!(
            "%{} = %{}[{}]{pad}",
            self.bind,
            self.tensor,
            self.index.join(", ")
        )
    }
}

/// The scalar statements of a body or epilogue; each helper returns the
/// name of the value it defines.
#[derive(Default, Debug)]
pub struct Body {
    lines: Vec<String>,
    next: usize,
}

impl Body {
    fn fresh(&mut self) -> String {
        let name = format!("t{}", self.next);
        self.next += 1;
        name
    }

    /// `%t = <op> %a, %b, ... : f32`.
    pub fn op(&mut self, op: &str, args: &[&str]) -> String {
        let name = self.fresh();
        let args: Vec<String> = args.iter().map(|a| format!("%{a}")).collect();
        self.lines
            .push(format!("%{name} = {op} {} : f32", args.join(", ")));
        name
    }

    /// `%t = const <v> : f32`.
    pub fn konst(&mut self, v: f32) -> String {
        let name = self.fresh();
        self.lines
            .push(format!("%{name} = const {} : f32", literal(v)));
        name
    }
}

/// An f32 as a tile literal that parses back to the same f32: the f64
/// digits of its exact value, so that rounding the literal to f32 is exact
/// (f32 digits parsed as f64 and rounded again could round twice).
pub fn literal(v: f32) -> String {
    if v.is_nan() {
        "nan".to_string()
    } else if v.is_infinite() {
        if v > 0.0 {
            "inf".to_string()
        } else {
            "-inf".to_string()
        }
    } else {
        let s = format!("{:?}", v as f64);
        // `{:?}` writes `1e-7` and `1.5e10` (valid) and `-0.0`; nothing else.
        s
    }
}

/// `tensor<2x3xf32>`, `tensor<f32>` for rank 0.
pub fn tensor_type(shape: &[u64]) -> String {
    let mut s = String::from("tensor<");
    for d in shape {
        write!(s, "{d}x").unwrap();
    }
    s.push_str("f32>");
    s
}

/// An affine index `c1 * a1 + ... + c0` from terms (coefficient, axis);
/// zero coefficients are left out, `0` if nothing is left.
pub fn affine(terms: &[(i64, &str)], constant: i64) -> String {
    let mut s = String::new();
    for &(c, axis) in terms {
        if c == 0 {
            continue;
        }
        let (sign, mag) = if c < 0 { ("-", -c) } else { ("+", c) };
        if s.is_empty() {
            if c < 0 {
                s.push('-');
            }
        } else {
            write!(s, " {sign} ").unwrap();
        }
        if mag == 1 {
            s.push_str(axis);
        } else {
            write!(s, "{axis} * {mag}").unwrap();
        }
    }
    if constant != 0 || s.is_empty() {
        if s.is_empty() {
            write!(s, "{constant}").unwrap();
        } else if constant < 0 {
            write!(s, " - {}", -constant).unwrap();
        } else {
            write!(s, " + {constant}").unwrap();
        }
    }
    s
}

pub struct Epilogue {
    pub reads: Vec<Read>,
    pub body: Body,
    pub result: String,
}

/// The combiner of a reduction.
#[derive(Clone, Copy, Debug)]
pub enum Combiner {
    Sum,
    Max,
}

/// One `compute` op. `body`'s statements may use the reads' bindings;
/// the epilogue's, `%acc` and its own reads.
pub struct Compute {
    pub label: String,
    pub spatial: Vec<(String, u64)>,
    pub reduce: Option<(Combiner, Vec<(String, u64)>)>,
    pub reads: Vec<Read>,
    pub out_shape: Vec<u64>,
    pub out_index: Vec<String>,
    pub body: Body,
    pub result: String,
    pub epilogue: Option<Epilogue>,
}

/// The name the epilogue's folded value is bound to.
pub const ACC: &str = "acc";

impl Compute {
    /// The op's text, defining `%result_name`, indented for a function body.
    pub fn text(&self, result_name: &str) -> String {
        let axes = |axes: &[(String, u64)]| {
            axes.iter()
                .map(|(a, e)| format!("{a}: {e}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let reads = |reads: &[Read]| reads.iter().map(Read::text).collect::<Vec<_>>().join(", ");
        let mut s = format!(
            "  %{result_name} = compute \"{}\" ({})",
            self.label,
            axes(&self.spatial)
        );
        if let Some((combiner, raxes)) = &self.reduce {
            let name = match combiner {
                Combiner::Sum => "sum",
                Combiner::Max => "max",
            };
            write!(s, " reduce {name} ({})", axes(raxes)).unwrap();
        }
        writeln!(
            s,
            "\n      reads({}) -> {}[{}] {{",
            reads(&self.reads),
            tensor_type(&self.out_shape),
            self.out_index.join(", ")
        )
        .unwrap();
        for line in &self.body.lines {
            writeln!(s, "    {line}").unwrap();
        }
        writeln!(s, "    yield %{} : f32", self.result).unwrap();
        match &self.epilogue {
            None => s.push_str("  }\n"),
            Some(e) => {
                s.push_str("  } epilogue(%acc)");
                if !e.reads.is_empty() {
                    write!(s, " reads({})", reads(&e.reads)).unwrap();
                }
                s.push_str(" {\n");
                for line in &e.body.lines {
                    writeln!(s, "    {line}").unwrap();
                }
                writeln!(s, "    yield %{} : f32", e.result).unwrap();
                s.push_str("  }\n");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_indices_read_naturally() {
        assert_eq!(affine(&[(2, "h"), (1, "r")], -1), "h * 2 + r - 1");
        assert_eq!(affine(&[(-1, "r"), (1, "h")], 1), "-r + h + 1");
        assert_eq!(affine(&[(0, "h")], 0), "0");
        assert_eq!(affine(&[], 3), "3");
    }

    #[test]
    fn literals_round_trip_exactly() {
        for v in [0.1f32, 1e-5, -2.5, 3.4028235e38, 1e-45, -0.0] {
            let text = literal(v);
            let back: f64 = text.parse().unwrap();
            assert_eq!((back as f32).to_bits(), v.to_bits(), "{text}");
        }
        assert_eq!(literal(f32::NEG_INFINITY), "-inf");
    }
}
