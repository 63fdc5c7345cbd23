//! Kernel threads that outlive a run. A kernel's local buffers (packed
//! copies, accumulators) live on its thread's stack; a thread started per
//! run maps a fresh stack, and the kernel then takes a page fault for every
//! page of its buffers it touches, inside the timed region. On the 2-vCPU
//! Zen 4 VM of `docs/performance.md` that was 0.2-0.35 ms of a 0.55 ms
//! ResNet-50 R7 kernel whose 400 KiB packed input lives on the stack.
//! These threads keep their stacks, so the second run of a kernel finds
//! its buffers' pages mapped. Between parts a thread polls for a while
//! before it sleeps ([`POLL_BEFORE_SLEEP`]), so back-to-back runs do not
//! pay for waking it.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::Mutex;

/// One call of a kernel on a part of its parallel range: the function, its
/// buffer pointers, `[lo, hi)`.
pub(crate) struct Part {
    pub f: usize,
    pub ptrs: Vec<usize>,
    pub lo: i64,
    pub hi: i64,
}

struct KernelThread {
    stack_bytes: usize,
    parts: Sender<Part>,
    done: Receiver<()>,
}

impl KernelThread {
    fn start(index: usize, stack_bytes: usize) -> Result<KernelThread, String> {
        let (parts, todo) = channel::<Part>();
        let (finished, done) = channel();
        std::thread::Builder::new()
            .name(format!("tilec-kernel-{index}"))
            .stack_size(stack_bytes)
            .spawn(move || {
                pin_to_cpu(index);
                while let Some(p) = next_part(&todo) {
                    crate::program::call(p.f, &p.ptrs, p.lo, p.hi);
                    if finished.send(()).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| format!("cannot start a kernel thread with {stack_bytes} bytes of stack: {e}"))?;
        Ok(KernelThread { stack_bytes, parts, done })
    }
}

/// How long a kernel thread keeps polling for its next part before it
/// sleeps. Waking a sleeping thread costs tens of microseconds on a VM
/// (the idle vCPU must be woken through the hypervisor): 30-60 µs per run
/// on the 2-vCPU Zen 4 VM, 7-15% of a 0.3-0.5 ms kernel. Runs of one
/// kernel in a loop (timing, or a model's layers) come closer together
/// than this, and find their threads awake.
const POLL_BEFORE_SLEEP: std::time::Duration = std::time::Duration::from_millis(2);

/// The next part for a kernel thread: polled for [`POLL_BEFORE_SLEEP`]
/// (yielding the CPU between polls, so the caller's own work between runs
/// is not held up), then waited for. `None` once the pool drops the thread.
fn next_part(todo: &Receiver<Part>) -> Option<Part> {
    let start = std::time::Instant::now();
    while start.elapsed() < POLL_BEFORE_SLEEP {
        match todo.try_recv() {
            Ok(p) => return Some(p),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return None,
            Err(std::sync::mpsc::TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
    todo.recv().ok()
}

/// The process's kernel threads, started as runs need them: thread `t`
/// runs part `t` of every run, and is replaced by one with a larger stack
/// when a kernel needs more than it has.
static THREADS: Mutex<Vec<KernelThread>> = Mutex::new(Vec::new());

/// Runs each part on its own kernel thread, each with at least
/// `stack_bytes` of stack, and returns when all have finished.
pub(crate) fn run_parts(parts: Vec<Part>, stack_bytes: usize) -> Result<(), String> {
    // One run at a time: the threads' stacks are reused, not shared.
    let mut pool = THREADS.lock().map_err(|_| "a kernel thread panicked".to_string())?;
    for t in 0..parts.len() {
        if t == pool.len() {
            pool.push(KernelThread::start(t, stack_bytes)?);
        } else if pool[t].stack_bytes < stack_bytes {
            // The old thread ends when its channel closes.
            pool[t] = KernelThread::start(t, stack_bytes)?;
        }
    }
    // Every part handed out is waited for, even after a failure: the
    // parts point into the caller's buffers.
    let mut failed = None;
    let mut running = Vec::new();
    for (t, p) in parts.into_iter().enumerate() {
        match pool[t].parts.send(p) {
            Ok(()) => running.push(t),
            Err(_) => failed = failed.or(Some(format!("kernel thread {t} has stopped"))),
        }
    }
    for t in running {
        if pool[t].done.recv().is_err() {
            failed = failed.or(Some(format!("kernel thread {t} has stopped")));
        }
    }
    failed.map_or(Ok(()), Err)
}

/// Keeps kernel thread `index` on the `index`-th CPU this process may use
/// (modulo their number). Unpinned, a woken thread may be placed on the
/// CPU of the thread that woke it, beside its sibling, and a 2-thread run
/// then goes at 1-thread speed until the scheduler moves one (seen on the
/// 2-vCPU VM as bimodal 2-thread times). Best effort: where the affinity
/// cannot be read or set, the thread stays where the scheduler puts it.
#[cfg(target_os = "linux")]
fn pin_to_cpu(index: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the calls write at
    // most its size, and the second names one CPU of the first.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
            return;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &allowed)).collect();
        let Some(&cpu) = cpus.get(index % cpus.len().max(1)) else { return };
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_to_cpu(_index: usize) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    /// What each call of [`record`] saw: its range and thread.
    static CALLS: StdMutex<Vec<(i64, i64, std::thread::ThreadId, Option<String>)>> = StdMutex::new(Vec::new());

    /// A stand-in kernel with one buffer parameter: records its range and
    /// the thread it ran on, and adds the range's length to the buffer.
    extern "C" fn record(sum: usize, lo: i64, hi: i64) {
        let t = std::thread::current();
        CALLS.lock().unwrap().push((lo, hi, t.id(), t.name().map(str::to_string)));
        // SAFETY: the test passes a pointer to an AtomicI64 that outlives the run.
        let sum = unsafe { &*(sum as *const std::sync::atomic::AtomicI64) };
        sum.fetch_add(hi - lo, std::sync::atomic::Ordering::Relaxed);
    }

    fn run(sum: &std::sync::atomic::AtomicI64, ranges: &[(i64, i64)], stack: usize) -> Vec<(i64, i64, std::thread::ThreadId, Option<String>)> {
        CALLS.lock().unwrap().clear();
        let f = record as extern "C" fn(usize, i64, i64) as usize;
        let parts = ranges.iter().map(|&(lo, hi)| Part { f, ptrs: vec![sum as *const _ as usize], lo, hi }).collect();
        run_parts(parts, stack).unwrap();
        let mut calls = CALLS.lock().unwrap().clone();
        calls.sort_by_key(|c| c.0);
        calls
    }

    /// Part t runs on kernel thread t; the same threads serve the next
    /// run (their stacks persist); a kernel needing a larger stack gets a
    /// new thread; every part runs once.
    #[test]
    fn kernel_threads_persist_and_grow_their_stacks() {
        let sum = std::sync::atomic::AtomicI64::new(0);
        let first = run(&sum, &[(0, 3), (3, 5)], 1 << 20);
        assert_eq!(first.iter().map(|c| (c.0, c.1, c.3.clone())).collect::<Vec<_>>(), vec![(0, 3, Some("tilec-kernel-0".into())), (3, 5, Some("tilec-kernel-1".into()))]);
        assert_ne!(first[0].2, first[1].2, "two parts, two threads");
        assert_ne!(first[0].2, std::thread::current().id());
        let again = run(&sum, &[(0, 4), (4, 8)], 1 << 20);
        assert_eq!((again[0].2, again[1].2), (first[0].2, first[1].2), "the same threads serve the next run");
        let larger = run(&sum, &[(0, 1)], 64 << 20);
        assert_ne!(larger[0].2, first[0].2, "a larger stack needs a new thread");
        assert_eq!(sum.load(std::sync::atomic::Ordering::Relaxed), 5 + 8 + 1);
    }
}
