//! Shrinking a finding's input while it still fails the same way (same
//! signature): delta debugging over lines, then over whitespace-separated
//! tokens, then over characters of short inputs. Candidates run in the
//! supervisor's workers, so a crashing candidate costs a worker, and the
//! whole search stops at a deadline.

use crate::corpus::signature;
use crate::targets::{Outcome, Target};
use crate::worker::Supervisor;
use std::time::Instant;

/// Splits into pieces that concatenate back to the input.
fn pieces(input: &[u8], unit: Unit) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut cur = Vec::new();
    for &b in input {
        cur.push(b);
        let end = match unit {
            Unit::Line => b == b'\n',
            Unit::Token => b == b' ' || b == b'\n' || b == b',' || b == b'(' || b == b'[',
            Unit::Byte => true,
        };
        if end {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[derive(Copy, Clone)]
enum Unit {
    Line,
    Token,
    Byte,
}

/// The smallest input found, before `deadline`, that still fails with
/// signature `sig`; and how many candidates were tried.
pub fn minimize(
    sup: &mut Supervisor,
    target: Target,
    input: &[u8],
    sig: &str,
    deadline: Instant,
) -> (Vec<u8>, usize) {
    let mut tries = 0;
    let mut still_fails = |sup: &mut Supervisor, candidate: &[u8]| -> bool {
        tries += 1;
        match sup.run(target, candidate) {
            Outcome::Finding(kind, msg) => signature(target, kind, &msg) == sig,
            _ => false,
        }
    };
    let mut best = input.to_vec();
    for unit in [Unit::Line, Unit::Token, Unit::Byte] {
        if matches!(unit, Unit::Byte) && best.len() > 400 {
            break;
        }
        let mut parts = pieces(&best, unit);
        let mut chunk = (parts.len() / 2).max(1);
        loop {
            let mut i = 0;
            while i < parts.len() {
                if Instant::now() >= deadline {
                    return (best, tries);
                }
                let end = (i + chunk).min(parts.len());
                let candidate: Vec<u8> = parts[..i]
                    .iter()
                    .chain(&parts[end..])
                    .flatten()
                    .copied()
                    .collect();
                if !candidate.is_empty() && still_fails(sup, &candidate) {
                    parts.drain(i..end);
                    best = candidate;
                } else {
                    i += chunk;
                }
            }
            if chunk == 1 {
                break;
            }
            chunk /= 2;
        }
    }
    (best, tries)
}
