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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// One kernel call's parallel range `[0, trip)`, shared out over the
/// kernel threads: thread `t` starts on the `t`-th equal, contiguous
/// share, takes it from the front a few iterations at a time, and when
/// it runs dry takes the back half of the largest share left. A static
/// split leaves a vCPU that the hypervisor slows (or a share whose
/// iterations cost more) holding up the run, with the other thread idle:
/// on the 2-vCPU VM of `docs/performance.md` the 2-thread ResNet-50 lost
/// 0.07-0.18 ms against perfect scaling on nearly every convolution.
/// Shares stay contiguous, so a thread's consecutive iterations still
/// find what the last one left in its caches.
pub(crate) struct Job {
    pub f: usize,
    pub ptrs: Vec<usize>,
    /// Each thread's share left, `lo` in the high half and `hi` in the
    /// low half of one word, so that the owner's take and a thief's take
    /// are each one compare-and-swap.
    shares: Vec<AtomicU64>,
    /// How many iterations an owner takes at a time: few enough to leave
    /// the rest to a thief, enough that the takes cost nothing beside the
    /// iterations.
    grain: u32,
}

/// How many takes an owner makes of its share (an iteration at a time
/// where the share has fewer iterations). A take is one uncontended
/// compare-and-swap (tens of nanoseconds), an iteration of a kernel's
/// parallel loop microseconds or more.
const TAKES_PER_SHARE: u64 = 64;

fn pack(lo: u32, hi: u32) -> u64 {
    (u64::from(lo) << 32) | u64::from(hi)
}

fn unpack(w: u64) -> (u32, u32) {
    ((w >> 32) as u32, w as u32)
}

impl Job {
    /// `[0, trip)` over `threads` shares (at most one per iteration), or
    /// `None` where the range does not fit the packed shares (more than
    /// `u32::MAX` iterations).
    pub fn new(f: usize, ptrs: Vec<usize>, trip: u64, threads: usize) -> Option<Job> {
        let trip = u32::try_from(trip).ok()?;
        let threads = (threads as u64).clamp(1, u64::from(trip.max(1))) as u32;
        let chunk = trip.div_ceil(threads);
        let shares = (0..threads).map(|t| AtomicU64::new(pack((t * chunk).min(trip), ((t + 1) * chunk).min(trip)))).collect();
        // One share is taken whole: there is no one to leave the rest to.
        let grain = if threads == 1 { chunk.max(1) } else { (u64::from(chunk) / TAKES_PER_SHARE).max(1) as u32 };
        Some(Job { f, ptrs, shares, grain })
    }

    /// Thread `me`'s part of the work: its own share, then what it can
    /// take from the others'.
    fn work(&self, me: usize) {
        loop {
            while let Some((lo, hi)) = self.take_front(me) {
                crate::program::call(self.f, &self.ptrs, i64::from(lo), i64::from(hi));
            }
            if !self.steal_into(me) {
                return;
            }
        }
    }

    /// The next `grain` iterations of share `t`, from its front.
    fn take_front(&self, t: usize) -> Option<(u32, u32)> {
        let share = &self.shares[t];
        let mut w = share.load(Ordering::Acquire);
        loop {
            let (lo, hi) = unpack(w);
            if lo >= hi {
                return None;
            }
            let end = lo + self.grain.min(hi - lo);
            match share.compare_exchange_weak(w, pack(end, hi), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some((lo, end)),
                Err(now) => w = now,
            }
        }
    }

    /// Moves the back half (rounded up) of the largest other share into
    /// `me`'s own, which is empty; false when every share is empty.
    /// Only the owner writes an empty share, and thieves only take from
    /// non-empty ones, so the plain store cannot lose a take.
    fn steal_into(&self, me: usize) -> bool {
        loop {
            let victim = (0..self.shares.len())
                .filter(|&t| t != me)
                .map(|t| (t, self.shares[t].load(Ordering::Acquire)))
                .max_by_key(|&(_, w)| {
                    let (lo, hi) = unpack(w);
                    hi.saturating_sub(lo)
                });
            let Some((t, w)) = victim else { return false };
            let (lo, hi) = unpack(w);
            if lo >= hi {
                return false;
            }
            let split = hi - (hi - lo).div_ceil(2);
            if self.shares[t].compare_exchange(w, pack(lo, split), Ordering::AcqRel, Ordering::Acquire).is_ok() {
                self.shares[me].store(pack(split, hi), Ordering::Release);
                return true;
            }
        }
    }
}

/// What a kernel thread is handed: a job and which share is its own.
pub(crate) struct Part {
    job: Arc<Job>,
    me: usize,
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
                    p.job.work(p.me);
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

/// Runs `job` on as many kernel threads as it has shares, each with at
/// least `stack_bytes` of stack, and returns when all have finished.
pub(crate) fn run_job(job: Job, stack_bytes: usize) -> Result<(), String> {
    // One run at a time: the threads' stacks are reused, not shared.
    let mut pool = THREADS.lock().map_err(|_| "a kernel thread panicked".to_string())?;
    let threads = job.shares.len();
    for t in 0..threads {
        if t == pool.len() {
            pool.push(KernelThread::start(t, stack_bytes)?);
        } else if pool[t].stack_bytes < stack_bytes {
            // The old thread ends when its channel closes.
            pool[t] = KernelThread::start(t, stack_bytes)?;
        }
    }
    // Every thread handed the job is waited for, even after a failure:
    // the job points into the caller's buffers. A share whose thread has
    // stopped is taken by the others.
    let job = Arc::new(job);
    let mut failed = None;
    let mut running = Vec::new();
    for t in 0..threads {
        match pool[t].parts.send(Part { job: Arc::clone(&job), me: t }) {
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
    use std::sync::atomic::{AtomicBool, AtomicI64};
    use std::sync::Mutex as StdMutex;
    use std::thread::ThreadId;

    /// The threads that ran each call of [`count`], and their names.
    static THREADS_SEEN: StdMutex<Vec<(ThreadId, Option<String>)>> = StdMutex::new(Vec::new());

    /// A stand-in kernel with one buffer parameter, an array of counters:
    /// adds one to the counter of each iteration of its range.
    extern "C" fn count(counters: usize, lo: i64, hi: i64) {
        let t = std::thread::current();
        THREADS_SEEN.lock().unwrap().push((t.id(), t.name().map(str::to_string)));
        for i in lo..hi {
            // SAFETY: the test passes an array of AtomicI64 longer than the range.
            unsafe { &*(counters as *const AtomicI64).add(i as usize) }.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn run(counters: &[AtomicI64], trip: u64, threads: usize, stack: usize) -> Vec<(ThreadId, Option<String>)> {
        THREADS_SEEN.lock().unwrap().clear();
        let job = Job::new(count as extern "C" fn(usize, i64, i64) as usize, vec![counters.as_ptr() as usize], trip, threads).unwrap();
        run_job(job, stack).unwrap();
        let mut seen = THREADS_SEEN.lock().unwrap().clone();
        seen.sort_by(|a, b| a.1.cmp(&b.1));
        seen.dedup();
        seen
    }

    /// Every iteration runs once, on the kernel threads (never the
    /// caller); the same threads serve the next run (their stacks
    /// persist); a kernel needing a larger stack gets a new thread; there
    /// are never more shares than iterations.
    #[test]
    fn kernel_threads_persist_and_grow_their_stacks() {
        let counters: Vec<AtomicI64> = (0..1000).map(|_| AtomicI64::new(0)).collect();
        let first = run(&counters, 1000, 2, 1 << 20);
        assert!(counters.iter().all(|c| c.load(Ordering::Relaxed) == 1), "each iteration once");
        assert!(first.iter().all(|(id, name)| *id != std::thread::current().id() && name.as_deref().is_some_and(|n| n.starts_with("tilec-kernel-"))), "{first:?}");
        let again = run(&counters, 1000, 2, 1 << 20);
        assert!(again.iter().all(|t| first.contains(t)), "the same threads serve the next run");
        let larger = run(&counters, 1, 1, 64 << 20);
        assert_eq!(larger.len(), 1);
        assert!(!first.iter().any(|t| t.0 == larger[0].0), "a larger stack needs a new thread");
        assert_eq!(counters[0].load(Ordering::Relaxed), 3);
        assert!(counters[1..].iter().all(|c| c.load(Ordering::Relaxed) == 2));
        assert_eq!(Job::new(0, vec![], 3, 8).unwrap().shares.len(), 3);
        assert!(Job::new(0, vec![], u64::from(u32::MAX) + 1, 2).is_none());
    }

    static RAN: [AtomicBool; 8] = [const { AtomicBool::new(false) }; 8];
    static ITERATION_0_WAITED_FOR_3: AtomicBool = AtomicBool::new(false);

    /// Iteration 0 waits (up to 10 s) for iteration 3, which comes after
    /// it in the same static share of 8 iterations over 2 threads.
    extern "C" fn wait_in_0_for_3(_: usize, lo: i64, hi: i64) {
        for i in lo..hi {
            if i == 0 {
                let start = std::time::Instant::now();
                while !RAN[3].load(Ordering::Acquire) && start.elapsed() < std::time::Duration::from_secs(10) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                ITERATION_0_WAITED_FOR_3.store(RAN[3].load(Ordering::Acquire), Ordering::Release);
            }
            RAN[i as usize].store(true, Ordering::Release);
        }
    }

    /// A thread whose share is done takes over the rest of a share whose
    /// thread is held up: with a static split, iteration 3 would wait for
    /// iteration 0 on thread 0.
    #[test]
    fn a_held_up_share_is_taken_over() {
        let job = Job::new(wait_in_0_for_3 as extern "C" fn(usize, i64, i64) as usize, vec![0], 8, 2).unwrap();
        run_job(job, 1 << 20).unwrap();
        assert!(RAN.iter().all(|r| r.load(Ordering::Relaxed)));
        assert!(ITERATION_0_WAITED_FOR_3.load(Ordering::Relaxed), "iteration 3 ran while iteration 0 waited");
    }
}
