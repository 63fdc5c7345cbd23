//! Task schedulers: which task gets the next round of measurements.
//!
//! The objective is the network's estimated latency, `f = Σ ω_i · g_i`,
//! where `g_i` is the best latency measured so far for task `i` and `ω_i`
//! its weight (how many ops of the network compute it). Every task first
//! gets one round (a warm-up: `g_i` is unknown before it); then
//! `round-robin` takes the tasks in turn, and `gradient` takes the task
//! whose next round is expected to lower `f` the most, Ansor's scheduler
//! (Zheng et al., OSDI 2020, §6.2):
//!
//! ```text
//! ∂f/∂t_i ≈ ω_i · ( α · (g_i(t_i) − g_i(t_i − Δt)) / Δt
//!                 + (1 − α) · min( −g_i(t_i) / t_i,  β · C_i / max_{k ∈ N(i)} V_k − g_i(t_i) ) )
//! ```
//!
//! `t_i` counts task `i`'s rounds, `Δt` is the backward window (the
//! history it has, up to `window`), `C_i` its flops, `V_k = C_k / g_k` the
//! best throughput of a task `k` similar to `i` (`N(i)`: the same kind of
//! computation, shapes aside; `i` itself included). The first term is the
//! recent rate of improvement, the second an optimistic guess of what is
//! left: at most the average gain per round so far, and at most the gap to
//! β times the speed of the fastest similar task. The task with the most
//! negative `∂f/∂t_i` goes next; ties go to the lower index.

/// What the scheduler knows of one task.
#[derive(Clone, Debug, Default)]
pub struct TaskView {
    /// ω: ops of the network the task stands for.
    pub weight: f64,
    /// C: flops of one op.
    pub flops: f64,
    /// Tasks with the same value are similar (`N(i)`).
    pub kind: String,
    /// The best latency (seconds) after each of the task's rounds so far;
    /// infinite while nothing has measured.
    pub history: Vec<f64>,
    /// No more rounds: the task's space is exhausted, or its rounds keep
    /// failing.
    pub done: bool,
}

impl TaskView {
    pub fn best(&self) -> f64 {
        self.history.last().copied().unwrap_or(f64::INFINITY)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scheduler {
    RoundRobin,
    Gradient { alpha: f64, beta: f64, window: usize },
}

impl Scheduler {
    /// The task for the next round, or `None` when every task is done.
    pub fn next(&self, tasks: &[TaskView], rounds_so_far: usize) -> Option<usize> {
        let open: Vec<usize> = (0..tasks.len()).filter(|&i| !tasks[i].done).collect();
        // The warm-up: a round for every task that has had none.
        if let Some(&i) = open.iter().find(|&&i| tasks[i].history.is_empty()) {
            return Some(i);
        }
        match *self {
            Scheduler::RoundRobin => {
                // The open task after the one that had the last round.
                let n = tasks.len();
                (0..n).map(|k| (rounds_so_far + k) % n).find(|i| open.contains(i))
            }
            Scheduler::Gradient { alpha, beta, window } => {
                let mut best: Option<(usize, f64)> = None;
                for &i in &open {
                    let g = gradient(tasks, i, alpha, beta, window);
                    if best.is_none_or(|(_, b)| g < b) {
                        best = Some((i, g));
                    }
                }
                best.map(|(i, _)| i)
            }
        }
    }

    /// The objective, `Σ ω_i · g_i` (infinite while a task has no
    /// latency).
    pub fn objective(tasks: &[TaskView]) -> f64 {
        tasks.iter().map(|t| t.weight * t.best()).sum()
    }
}

/// `∂f/∂t_i` (module docs). A task without a latency yet gets −∞: it goes
/// first, since the objective is unknown until it has one.
pub fn gradient(tasks: &[TaskView], i: usize, alpha: f64, beta: f64, window: usize) -> f64 {
    let t = &tasks[i];
    let g = t.best();
    if !g.is_finite() {
        return f64::NEG_INFINITY;
    }
    let rounds = t.history.len();
    // The backward difference over the window the history allows.
    let dt = window.min(rounds - 1);
    let backward = if dt == 0 {
        0.0
    } else {
        let before = t.history[rounds - 1 - dt];
        if before.is_finite() { (g - before) / dt as f64 } else { 0.0 }
    };
    // The fastest similar task's throughput (flops per second).
    let fastest = tasks.iter().filter(|k| k.kind == t.kind && k.best().is_finite()).map(|k| k.flops / k.best()).fold(0.0f64, f64::max);
    let average_gain = -g / rounds as f64;
    let to_fastest = if fastest > 0.0 { beta * t.flops / fastest - g } else { average_gain };
    t.weight * (alpha * backward + (1.0 - alpha) * average_gain.min(to_fastest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(weight: f64, flops: f64, kind: &str, history: &[f64]) -> TaskView {
        TaskView { weight, flops, kind: kind.into(), history: history.to_vec(), done: false }
    }

    const ANSOR: Scheduler = Scheduler::Gradient { alpha: 0.2, beta: 2.0, window: 3 };

    #[test]
    fn every_task_gets_a_round_before_any_gets_two() {
        let tasks = vec![task(1.0, 1e9, "conv", &[1e-3]), task(1.0, 1e9, "conv", &[]), task(1.0, 1e9, "conv", &[])];
        assert_eq!(ANSOR.next(&tasks, 1), Some(1));
        assert_eq!(Scheduler::RoundRobin.next(&tasks, 1), Some(1));
    }

    #[test]
    fn round_robin_takes_open_tasks_in_turn() {
        let mut tasks = vec![task(1.0, 1e9, "a", &[1.0]), task(1.0, 1e9, "a", &[1.0]), task(1.0, 1e9, "a", &[1.0])];
        assert_eq!(Scheduler::RoundRobin.next(&tasks, 4), Some(1));
        tasks[1].done = true;
        assert_eq!(Scheduler::RoundRobin.next(&tasks, 4), Some(2));
        tasks.iter_mut().for_each(|t| t.done = true);
        assert_eq!(Scheduler::RoundRobin.next(&tasks, 4), None);
    }

    #[test]
    fn the_gradient_formula() {
        // Task 0: ω 2, 1 GFLOP, latency 10 ms → 8 ms → 6 ms → 5 ms over
        // four rounds; task 1 of its kind runs at 1 GFLOP / 2 ms.
        let tasks = vec![task(2.0, 1e9, "conv", &[10e-3, 8e-3, 6e-3, 5e-3]), task(1.0, 1e9, "conv", &[2e-3])];
        let backward = (5e-3 - 10e-3) / 3.0;
        let average_gain: f64 = -5e-3 / 4.0;
        let to_fastest = 2.0 * 1e9 / (1e9 / 2e-3) - 5e-3;
        let want = 2.0 * (0.2 * backward + 0.8 * average_gain.min(to_fastest));
        assert!((gradient(&tasks, 0, 0.2, 2.0, 3) - want).abs() < 1e-15, "{} vs {want}", gradient(&tasks, 0, 0.2, 2.0, 3));
        // Task 1 is at the fastest speed of its kind: only its own
        // average gain, -2 ms, through β·C/V − g = 2 ms (min picks -2 ms).
        assert!((gradient(&tasks, 1, 0.2, 2.0, 3) - 0.8 * -2e-3).abs() < 1e-15);
    }

    #[test]
    fn the_gradient_scheduler_prefers_heavy_slow_improving_tasks() {
        // Same history, but task 1 stands for 4 ops: its rounds are worth more.
        let tasks = vec![task(1.0, 1e9, "conv", &[4e-3, 3e-3]), task(4.0, 1e9, "conv", &[4e-3, 3e-3]), task(1.0, 1e6, "pool", &[1e-5, 1e-5])];
        assert_eq!(ANSOR.next(&tasks, 6), Some(1));
        // A task that has stopped improving and is near its kind's best
        // speed loses to one that is still improving.
        let tasks = vec![task(1.0, 1e9, "conv", &[3e-3, 3e-3, 3e-3, 3e-3]), task(1.0, 1e9, "gemm", &[9e-3, 6e-3])];
        assert_eq!(ANSOR.next(&tasks, 6), Some(1));
    }

    #[test]
    fn the_objective_is_the_weighted_sum() {
        let tasks = vec![task(2.0, 1e9, "conv", &[1e-3]), task(3.0, 1e9, "conv", &[2e-3])];
        assert!((Scheduler::objective(&tasks) - 8e-3).abs() < 1e-15);
        assert!(Scheduler::objective(&[task(1.0, 1.0, "x", &[])]).is_infinite());
    }
}
