//! Grammar-aware generation of tile programs (ir-spec/README.md):
//! functions of compute ops of every kind (elementwise, reductions, GEMM,
//! GEMV, convolutions with stride, padding, dilation, groups and
//! transposition, pooling), epilogues, schedules (level 1) and loop nests
//! (level 2). Programs are valid by construction unless `Config::invalid`
//! asks for rule breaking: each decision point then breaks a rule of the
//! dialect with that probability (a read out of bounds without `pad`, a
//! wrong type, a bad output index, a schedule that does not divide...).

pub mod level0;
pub mod loops;
pub mod pipeline;
pub mod schedule;

use crate::choices::G;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    F16,
    BF16,
    I8,
    U8,
    I32,
}

impl Elem {
    pub fn name(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::F16 => "f16",
            Elem::BF16 => "bf16",
            Elem::I8 => "i8",
            Elem::U8 => "u8",
            Elem::I32 => "i32",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Elem::F32 | Elem::F16 | Elem::BF16)
    }

    /// 8-bit integers, whose products and sums are accumulated in i32.
    pub fn is_byte(self) -> bool {
        matches!(self, Elem::I8 | Elem::U8)
    }

    pub const ALL: [Elem; 6] = [Elem::F32, Elem::F16, Elem::BF16, Elem::I8, Elem::U8, Elem::I32];
}

/// What the generated programs are for.
#[derive(Clone, Debug)]
pub struct Config {
    /// Percent chance, at each decision point, of breaking a rule.
    pub invalid: u32,
    /// Largest tensor, in elements.
    pub max_elems: u64,
    /// Largest extent of one axis.
    pub max_extent: u64,
    /// Percent chance of a schedule on a compute op.
    pub schedule: u32,
    /// Constants may be `inf`, `-inf` and `nan`.
    pub special_floats: bool,
    /// Most compute ops per function.
    pub max_ops: u64,
    /// Element types other than f32 (f16, bf16, i8, u8, i32).
    pub mixed_types: bool,
    /// Schedules for this target only (else any built-in target).
    pub schedule_target: Option<&'static str>,
}

impl Config {
    /// For the parser and verifier: everything, some of it wrong.
    pub fn parse() -> Config {
        Config {
            invalid: 6,
            max_elems: 1 << 16,
            max_extent: 40,
            schedule: 30,
            special_floats: true,
            max_ops: 3,
            mixed_types: true,
            schedule_target: None,
        }
    }

    /// For the interpreter: valid and small.
    pub fn interp() -> Config {
        Config {
            invalid: 0,
            max_elems: 4096,
            max_extent: 12,
            schedule: 0,
            special_floats: true,
            max_ops: 3,
            mixed_types: true,
            schedule_target: None,
        }
    }

    /// For compiled-against-interpreted runs: valid, small, one or two ops.
    pub fn compile() -> Config {
        Config {
            invalid: 0,
            max_elems: 4096,
            max_extent: 12,
            schedule: 0,
            special_floats: false,
            max_ops: 2,
            mixed_types: true,
            schedule_target: None,
        }
    }
}

/// A tensor value of a function: a parameter or a compute op's result.
#[derive(Clone, Debug)]
pub struct TensorVal {
    pub name: String,
    pub dims: Vec<u64>,
    pub elem: Elem,
}

pub fn tensor_type(dims: &[u64], elem: Elem) -> String {
    let mut s = String::from("tensor<");
    for d in dims {
        s.push_str(&format!("{d}x"));
    }
    s.push_str(elem.name());
    s.push('>');
    s
}

pub fn buffer_type(dims: &[u64], elem: Elem, scope: &str) -> String {
    let mut s = String::from("buffer<");
    for d in dims {
        s.push_str(&format!("{d}x"));
    }
    s.push_str(elem.name());
    s.push_str(&format!(", {scope}>"));
    s
}

/// A literal of `elem`: the usual values, the edges of the type, and
/// (where asked) the special floats.
pub fn literal(g: &mut G, elem: Elem, special: bool) -> String {
    if elem.is_float() {
        let mut xs = vec![
            "0.0",
            "1.0",
            "-1.0",
            "0.5",
            "2.0",
            "-0.25",
            "1e-3",
            "3.5",
            "0.70710678",
            "10.0",
        ];
        if special && g.chance(1, 6) {
            xs = vec!["inf", "-inf", "nan", "-1e-30"];
        }
        g.pick(&xs).to_string()
    } else {
        let xs: &[i64] = if elem == Elem::I8 {
            &[0, 1, -1, 2, 7, 127, -128, -3]
        } else if elem == Elem::U8 {
            &[0, 1, 2, 7, 127, 128, 200, 255]
        } else {
            &[0, 1, -1, 2, 7, 1000, -1000, 2147483647, -2147483648]
        };
        g.pick(xs).to_string()
    }
}

/// Scalar code: values of one type built from inputs, constants and
/// (where axes are given) `index` ops. Names are `%{prefix}{n}`, fresh
/// for the region (the counter lives with the caller).
pub struct Scalar<'c> {
    pub prefix: &'c str,
    pub counter: &'c mut usize,
    pub special: bool,
    pub invalid: u32,
}

impl Scalar<'_> {
    fn fresh(&mut self) -> String {
        let n = *self.counter;
        *self.counter += 1;
        format!("%{}{n}", self.prefix)
    }

    /// Emits ops into `lines` (indented by `indent`) computing a value of
    /// type `out` from `inputs`; returns its name. `index_atoms` are what
    /// an `index` op may take (axes in compute regions, index expressions
    /// in loops).
    #[allow(clippy::too_many_arguments)]
    pub fn value(
        &mut self,
        g: &mut G,
        inputs: &[(String, Elem)],
        out: Elem,
        index_atoms: &[String],
        steps: u64,
        indent: &str,
        lines: &mut Vec<String>,
    ) -> String {
        let mut pool: Vec<String> = Vec::new();
        for (name, elem) in inputs {
            if *elem == out {
                pool.push(name.clone());
            } else {
                let v = self.fresh();
                lines.push(format!(
                    "{indent}{v} = cast {name} : {} -> {}",
                    elem.name(),
                    out.name()
                ));
                pool.push(v);
            }
        }
        let steps = g.int(0, steps);
        for _ in 0..steps.max(if pool.is_empty() { 1 } else { 0 }) {
            let v = self.fresh();
            let wrong = g.chance(self.invalid, 100);
            // A wrong type on purpose: the verifier must say so.
            let ty = if wrong {
                g.pick(&Elem::ALL).name()
            } else {
                out.name()
            };
            let kind = if pool.is_empty() && index_atoms.is_empty() {
                2
            } else if pool.is_empty() {
                g.pick(&[2usize, 3])
            } else {
                g.weighted(&[4, 6, 2, if index_atoms.is_empty() { 0 } else { 1 }])
            };
            match kind {
                0 => {
                    let ops: &[&str] = if out.is_float() {
                        &[
                            "neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "erf",
                            "sigmoid",
                        ]
                    } else {
                        &["neg", "abs", "relu"]
                    };
                    let op = if wrong {
                        g.pick(&["exp", "log", "sqrt"])
                    } else {
                        g.pick(ops)
                    };
                    let a = g.pick(&pool);
                    lines.push(format!("{indent}{v} = {op} {a} : {ty}"));
                }
                1 => {
                    let ops: &[&str] = if out.is_float() {
                        &["add", "sub", "mul", "div", "max", "min"]
                    } else {
                        &["add", "sub", "mul", "max", "min"]
                    };
                    let op = g.pick(ops);
                    let (a, b) = (g.pick(&pool), g.pick(&pool));
                    lines.push(format!("{indent}{v} = {op} {a}, {b} : {ty}"));
                }
                2 => {
                    let lit = literal(g, out, self.special);
                    lines.push(format!("{indent}{v} = const {lit} : {ty}"));
                }
                _ => {
                    let atom = g.pick(index_atoms);
                    lines.push(format!("{indent}{v} = index {atom} : {ty}"));
                }
            }
            pool.push(v);
        }
        // Combine the last value with an earlier one now and then, so that
        // every input tends to matter.
        let last = pool.last().cloned().expect("a value");
        if pool.len() > 1 && g.chance(1, 2) {
            let other = g.pick(&pool[..pool.len() - 1]);
            let v = self.fresh();
            let op = g.pick(&["add", "mul", "max", "sub"]);
            lines.push(format!(
                "{indent}{v} = {op} {last}, {other} : {}",
                out.name()
            ));
            return v;
        }
        last
    }
}
