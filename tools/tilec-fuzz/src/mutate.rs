//! Byte-level mutation, AFL-style: bit flips, random bytes, deletions,
//! insertions, duplications, dictionary words, interesting numbers,
//! splices from other inputs, line swaps. Several are stacked per input.

use crate::choices::SplitMix;

/// Words of the tile dialect worth inserting.
pub const TILE_WORDS: &[&str] = &[
    "func",
    "@f",
    "%x",
    "%",
    "compute",
    "reduce",
    "sum",
    "max",
    "min",
    "reads",
    "epilogue",
    "pad(",
    "pad(-inf)",
    "pad(0.0)",
    "div",
    "tensor<",
    "tensor<4x4xf32>",
    "tensor<f32>",
    "buffer<",
    "buffer<4xf32, shared>",
    "x",
    "f32",
    "f16",
    "bf16",
    "i8",
    "u8",
    "i32",
    "const",
    "index",
    "cast",
    "->",
    "yield",
    "return",
    "schedule",
    "\"x86-avx2\"",
    "\"sm90\"",
    "tile",
    "order",
    "vthread",
    "cache",
    "unroll",
    "vector",
    "for",
    "to",
    "map(",
    "map(thread.x)",
    "map(block.x)",
    "map(parallel)",
    "map(vector)",
    "map(lane)",
    "intrinsic",
    "mma",
    "lane(",
    "\"sm80\"",
    "axis(i.point)",
    "reduce(k.point)",
    "if",
    "load",
    "store",
    "copy",
    "box",
    "stride",
    "split",
    "permute",
    "cooperative",
    "fill",
    "barrier",
    "kernel",
    "alloc",
    "read(a)",
    "global",
    "shared",
    "local",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    ",",
    ":",
    "=",
    "+",
    "-",
    "*",
    "0",
    "1",
    "-1",
    "inf",
    "-inf",
    "nan",
    "1e39",
    "0x10",
    "\"",
    "\\",
    "//",
    "\n",
    "// -----\n",
    "// expected-error@+1 {{",
    "}}",
    "é",
    "→",
    "\u{200b}",
    "\t",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "erf",
    "sigmoid",
    "tanh",
    "relu",
    "neg",
    "abs",
    "add",
    "sub",
    "mul",
];

/// Words of pass pipelines worth inserting.
pub const PIPELINE_WORDS: &[&str] = &[
    "builtin.module(",
    "module(",
    "(",
    ")",
    "{",
    "}",
    "=",
    ",",
    " ",
    "\"",
    "[",
    "]",
    "canonicalize",
    "search",
    "tile",
    "cache",
    "vthread",
    "bind",
    "unroll",
    "vectorize",
    "hoist-guards",
    "tensorize",
    "lower-to-mlir",
    "apply-records",
    "strategy=",
    "roller",
    "random",
    "exhaustive",
    "markov",
    "seed=",
    "budget=",
    "op=",
    "unscheduled=serial",
    "read=",
    "level=",
    "axis=",
    "count=",
    "width=",
    "max-steps=",
    "gpu=",
    "true",
    "false",
    "-1",
    "0",
    "18446744073709551615",
    "1e-30",
    "é",
];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "8",
    "16",
    "255",
    "256",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483649",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "281474976710656",
    "1e308",
    "1e-320",
    "0.0",
    "-0.0",
    "3.4028236e38",
];

const MAX_LEN: usize = 64 * 1024;

fn range(rng: &mut SplitMix, len: usize, max: usize) -> (usize, usize) {
    let start = rng.below(len + 1);
    let n = 1 + rng.below(max);
    (start, (start + n).min(len))
}

fn line_starts(data: &[u8]) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(
        data.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1),
    );
    v
}

fn line_range(data: &[u8], starts: &[usize], i: usize) -> (usize, usize) {
    let s = starts[i];
    let e = starts.get(i + 1).copied().unwrap_or(data.len());
    (s, e)
}

/// Applies 1 to 8 stacked mutations to `data`.
pub fn mutate(rng: &mut SplitMix, data: &mut Vec<u8>, words: &[&str], others: &[&[u8]]) {
    let count = 1 + rng.below(8).min(rng.below(8));
    for _ in 0..count {
        mutate_once(rng, data, words, others);
    }
    data.truncate(MAX_LEN);
}

fn mutate_once(rng: &mut SplitMix, data: &mut Vec<u8>, words: &[&str], others: &[&[u8]]) {
    let len = data.len();
    match rng.below(15) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = if rng.below(4) == 0 {
                rng.next_u64() as u8
            } else {
                b' ' + rng.below(95) as u8
            };
        }
        2 => {
            let (s, e) = range(rng, len, 16);
            data.drain(s..e);
        }
        3 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(8);
            let bytes: Vec<u8> = (0..n).map(|_| b' ' + rng.below(95) as u8).collect();
            data.splice(at..at, bytes);
        }
        4 if len > 0 => {
            let (s, e) = range(rng, len, 64);
            let chunk = data[s..e].to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, chunk);
        }
        5 | 6 if !words.is_empty() => {
            let w = words[rng.below(words.len())].as_bytes().to_vec();
            let at = rng.below(len + 1);
            if rng.below(2) == 0 {
                data.splice(at..at, w);
            } else {
                // Replace the word-ish run at `at`.
                let e = (at..len)
                    .find(|&i| {
                        !data[i].is_ascii_alphanumeric() && data[i] != b'_' && data[i] != b'.'
                    })
                    .unwrap_or(len);
                data.splice(at..e.max(at), w);
            }
        }
        7 | 8 => {
            // An interesting number in place of a number.
            let digits: Vec<usize> = (0..len)
                .filter(|&i| data[i].is_ascii_digit() && (i == 0 || !data[i - 1].is_ascii_digit()))
                .collect();
            if digits.is_empty() {
                return;
            }
            let s = digits[rng.below(digits.len())];
            let e = (s..len).find(|&i| !data[i].is_ascii_digit()).unwrap_or(len);
            let n = NUMBERS[rng.below(NUMBERS.len())].as_bytes().to_vec();
            data.splice(s..e, n);
        }
        9 if !others.is_empty() => {
            let o = others[rng.below(others.len())];
            if o.is_empty() {
                return;
            }
            let (s, e) = range(rng, o.len(), 256);
            let at = rng.below(len + 1);
            if rng.below(2) == 0 {
                data.splice(at..at, o[s..e].iter().copied());
            } else {
                let end = (at + (e - s)).min(len);
                data.splice(at..end, o[s..e].iter().copied());
            }
        }
        10 | 11 => {
            let starts = line_starts(data);
            if starts.len() < 2 {
                return;
            }
            let a = rng.below(starts.len());
            let (s, e) = line_range(data, &starts, a);
            match rng.below(3) {
                0 => {
                    data.drain(s..e);
                }
                1 => {
                    let line = data[s..e].to_vec();
                    let b = starts[rng.below(starts.len())];
                    data.splice(b..b, line);
                }
                _ => {
                    let b = rng.below(starts.len());
                    let (s2, e2) = line_range(data, &starts, b);
                    if e <= s2 {
                        let (l1, l2) = (data[s..e].to_vec(), data[s2..e2].to_vec());
                        data.splice(s2..e2, l1);
                        data.splice(s..e, l2);
                    }
                }
            }
        }
        12 => {
            // Deep nesting or a long run of one character.
            let c = [b'(', b'[', b'{', b'-', b'<', b'9', b'%'][rng.below(7)];
            let n = [10, 150, 250, 1000][rng.below(4)];
            let at = rng.below(len + 1);
            data.splice(at..at, std::iter::repeat_n(c, n));
        }
        13 if len > 0 => {
            // A swap of two bytes.
            let (i, j) = (rng.below(len), rng.below(len));
            data.swap(i, j);
        }
        _ => {
            let at = rng.below(len + 1);
            let w = ["é", "→", "\u{200b}", "𝔸", "\r", "\t", "\u{feff}"][rng.below(7)]
                .as_bytes()
                .to_vec();
            data.splice(at..at, w);
        }
    }
}
