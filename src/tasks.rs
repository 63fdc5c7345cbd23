//! Tuning tasks of a network: its compute ops grouped by what they
//! compute. A network repeats layers (ResNet-50 has 53 convolutions of 20
//! shapes), and a schedule tuned for one op is a schedule for every op of
//! its group, so a tuner searches each group once and weighs it by its
//! count (Ansor's task weight ω; `tilec tasks` lists them).

use crate::ir::{Function, Op, cost};
use crate::records::computation_key;

/// Compute ops of one function that compute the same thing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    /// What the ops compute ([`computation_key`]).
    pub key: String,
    /// The ops, in body order; the first is the task's representative.
    pub ops: Vec<Op>,
    /// Flops of one op (`ir::cost`).
    pub flops: u64,
}

impl Task {
    /// The task's weight: how many times the network runs it.
    pub fn weight(&self) -> usize {
        self.ops.len()
    }
}

/// The tasks of `f`'s body, in order of their first op.
pub fn extract_tasks(f: &Function) -> Vec<Task> {
    let mut tasks: Vec<Task> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for &op in &f.regions[f.body].ops {
        let Some(key) = computation_key(f, op) else { continue };
        match index.get(&key) {
            Some(&i) => tasks[i].ops.push(op),
            None => {
                index.insert(key.clone(), tasks.len());
                tasks.push(Task { key, ops: vec![op], flops: cost::op_flops(f, op) });
            }
        }
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_that_compute_the_same_thing_are_one_task_whatever_their_names() {
        let src = "func @net(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %v: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %a = compute \"fc1\" (i: 4, j: 8) reduce sum (k: 8) reads(%p = %x[i, k], %q = %w[k, j]) -> tensor<4x8xf32>[i, j] {
    %0 = mul %p, %q : f32
    yield %0 : f32
  }
  %b = compute \"act\" (i: 4, j: 8) reads(%p = %a[i, j]) -> tensor<4x8xf32>[i, j] {
    %0 = relu %p : f32
    yield %0 : f32
  }
  %c = compute \"fc2\" (m: 4, n: 8) reduce sum (r: 8) reads(%p = %b[m, r], %q = %v[r, n]) -> tensor<4x8xf32>[m, n] {
    %0 = mul %p, %q : f32
    yield %0 : f32
  }
  return %c
}
";
        let (m, _) = crate::syntax::parse_str("net.tile", src).ok().expect("parses");
        let tasks = extract_tasks(&m.funcs[0]);
        // fc1 and fc2 differ in labels and axis names. Axis names are part
        // of the key (a schedule names axes, so it is a schedule of both
        // only if they agree): three tasks, until fc2's axes are renamed.
        assert_eq!(tasks.iter().map(Task::weight).collect::<Vec<_>>(), [1, 1, 1]);
        let renamed = src.replace("(m: 4, n: 8) reduce sum (r: 8) reads(%p = %b[m, r], %q = %v[r, n]) -> tensor<4x8xf32>[m, n]", "(i: 4, j: 8) reduce sum (k: 8) reads(%p = %b[i, k], %q = %v[k, j]) -> tensor<4x8xf32>[i, j]");
        let (m, _) = crate::syntax::parse_str("net.tile", &renamed).ok().expect("parses");
        let tasks = extract_tasks(&m.funcs[0]);
        assert_eq!(tasks.iter().map(Task::weight).collect::<Vec<_>>(), [2, 1]);
        assert_eq!(tasks[0].flops, 2 * 4 * 8 * 8);
    }
}
