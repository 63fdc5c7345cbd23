//! Running a kernel's parallel range on several threads: the caller and
//! kernel threads that outlive a run. A kernel's local buffers (packed
//! copies, accumulators) live on its thread's stack; a thread started per
//! run maps a fresh stack, and the kernel then takes a page fault for every
//! page of its buffers it touches, inside the timed region. On the 2-vCPU
//! Zen 4 VM of `docs/performance.md` that was 0.2-0.35 ms of a 0.55 ms
//! ResNet-50 R7 kernel whose 400 KiB packed input lives on the stack.
//! These threads keep their stacks, and the caller's share runs on a
//! stack kept likewise ([`CallerStack`]), so the second run of a kernel
//! finds its buffers' pages mapped. Between kernels a thread polls for a
//! while before it sleeps ([`POLL_BEFORE_SLEEP`]), so back-to-back runs
//! do not pay for waking it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// One kernel call's parallel range `[0, trip)`, shared out over the
/// caller and the kernel threads: thread `t` (the caller for 0) starts on
/// the `t`-th equal, contiguous share, takes it from the front a few iterations at a time, and when
/// it runs dry takes the back half of the largest share left. A static
/// split leaves a vCPU that the hypervisor slows (or a share whose
/// iterations cost more) holding up the run, with the other thread idle:
/// on the 2-vCPU VM of `docs/performance.md` the 2-thread ResNet-50 lost
/// 0.07-0.18 ms against perfect scaling on nearly every convolution.
/// Shares stay contiguous, so a thread's consecutive iterations still
/// find what the last one left in its caches.
pub(crate) struct Job {
    /// The kernel and its buffer pointers.
    f: usize,
    ptrs: Vec<usize>,
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
struct Part {
    job: Arc<Job>,
    me: usize,
    /// Counts the kernel threads still working on the job; the last to
    /// finish wakes the caller if it has gone to sleep.
    finished: Arc<Finished>,
}

/// The kernel threads of one job still working, and the caller waiting
/// for them.
struct Finished {
    pending: std::sync::atomic::AtomicUsize,
    caller: std::thread::Thread,
}

impl Finished {
    fn one_done(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.caller.unpark();
        }
    }

    /// Polls for [`POLL_BEFORE_SLEEP`] (yielding between polls), then
    /// sleeps until the last kernel thread wakes it. Unpark before park
    /// is not lost (`std::thread::park`'s token).
    fn wait(&self) {
        let start = std::time::Instant::now();
        while self.pending.load(Ordering::Acquire) != 0 {
            if start.elapsed() < POLL_BEFORE_SLEEP {
                std::thread::yield_now();
            } else {
                std::thread::park_timeout(POLL_BEFORE_SLEEP);
            }
        }
    }
}

struct KernelThread {
    stack_bytes: usize,
    parts: Sender<Part>,
    #[cfg_attr(not(test), allow(dead_code))]
    thread: std::thread::Thread,
    /// Where it is pinned.
    #[cfg_attr(not(test), allow(dead_code))]
    cpu: Option<usize>,
}

impl KernelThread {
    /// Kernel thread for share `index` (from 1: the caller takes share 0).
    fn start(index: usize, stack_bytes: usize) -> Result<KernelThread, String> {
        // Chosen here: the new thread inherits this one's affinity, which
        // is one CPU while the caller is pinned.
        let cpu = cpu_for(index);
        let (parts, todo) = channel::<Part>();
        let handle = std::thread::Builder::new()
            .name(format!("tilec-kernel-{index}"))
            .stack_size(stack_bytes)
            .spawn(move || {
                if let Some(cpu) = cpu {
                    pin_to_cpu(cpu);
                }
                while let Some(p) = next_part(&todo) {
                    p.job.work(p.me);
                    p.finished.one_done();
                }
            })
            .map_err(|e| format!("cannot start a kernel thread with {stack_bytes} bytes of stack: {e}"))?;
        Ok(KernelThread { stack_bytes, parts, thread: handle.thread().clone(), cpu })
    }
}

/// How long a kernel thread keeps polling for its next part before it
/// sleeps, and the caller for the kernel threads to finish. Waking a
/// sleeping thread costs tens of microseconds on a VM (the idle vCPU must
/// be woken through the hypervisor): 30-60 µs per run on the 2-vCPU Zen 4
/// VM, 7-15% of a 0.3-0.5 ms kernel. Runs of one kernel in a loop
/// (timing, or a model's layers) come closer together than this, and find
/// their threads awake.
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

/// A stack the caller's share runs on, kept from run to run for the same
/// reason as the kernel threads' (its pages stay mapped), with a guard
/// page below it: the caller's own stack may be far smaller than a
/// kernel's local buffers (2 MiB on a test thread).
struct CallerStack {
    /// The mapping: the guard page, then `usable` bytes.
    base: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is owned by the pool and used under its lock.
unsafe impl Send for CallerStack {}

impl CallerStack {
    const PAGE: usize = 4096;

    fn map(usable: usize) -> Result<CallerStack, String> {
        let usable = usable.checked_next_multiple_of(Self::PAGE).ok_or("stack size overflows")?;
        let len = usable + Self::PAGE;
        // SAFETY: an anonymous private mapping, checked below; the guard
        // page is inside it.
        unsafe {
            let base = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0);
            if base == libc::MAP_FAILED {
                return Err(format!("cannot map {usable} bytes of stack: {}", std::io::Error::last_os_error()));
            }
            if libc::mprotect(base, Self::PAGE, libc::PROT_NONE) != 0 {
                let e = std::io::Error::last_os_error();
                libc::munmap(base, len);
                return Err(format!("cannot protect a stack's guard page: {e}"));
            }
            Ok(CallerStack { base, len })
        }
    }

    fn usable(&self) -> usize {
        self.len - Self::PAGE
    }

    /// Runs `f` on this stack.
    fn run(&mut self, f: impl FnOnce()) {
        // SAFETY: the usable part is page-aligned and a multiple of the
        // page size; `f` cannot unwind out (caught here), and the stack
        // outlives the call.
        unsafe {
            let bottom = (self.base as *mut u8).add(Self::PAGE);
            psm::on_stack(bottom, self.usable(), || {
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
                    std::process::abort();
                }
            })
        }
    }
}

impl Drop for CallerStack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, no longer in use.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// The process's kernel threads and the caller's stack, made as runs need
/// them: kernel thread `t` runs share `t + 1` of every job, and is
/// replaced by one with a larger stack when a kernel needs more than it
/// has; so is the caller's stack.
struct Pool {
    threads: Vec<KernelThread>,
    caller_stack: Option<CallerStack>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool { threads: Vec::new(), caller_stack: None });

/// Runs `job`: share 0 on the calling thread (on a stack of at least
/// `stack_bytes`), the others on kernel threads, and returns when all have
/// finished. The caller works rather than waits: on a machine with as
/// many CPUs as shares, a waiting caller is one thread more than CPUs, to
/// be woken (through the hypervisor, on a VM) after every kernel. Handing
/// out and collecting a kernel so cost 8-11 µs on one thread and 12-19
/// on two on the 2-vCPU Zen 4 VM (lscpu family 25 model 17; a chain of 40
/// kernels that do next to nothing,
/// `benchmarks/results/2026-12-07-caller/`); with the caller working, 0.2
/// and 1 µs. Pin the caller
/// ([`CallerPin`]) around a run on several threads, or it may share a CPU
/// with kernel thread 1.
pub(crate) fn run_job(job: Job, stack_bytes: usize) -> Result<(), String> {
    // One run at a time: the stacks are reused, not shared.
    let mut pool = POOL.lock().map_err(|_| "a kernel thread panicked".to_string())?;
    let shares = job.shares.len();
    for t in 0..shares - 1 {
        if t == pool.threads.len() {
            pool.threads.push(KernelThread::start(t + 1, stack_bytes)?);
        } else if pool.threads[t].stack_bytes < stack_bytes {
            // The old thread ends when its channel closes.
            pool.threads[t] = KernelThread::start(t + 1, stack_bytes)?;
        }
    }
    if pool.caller_stack.as_ref().is_none_or(|s| s.usable() < stack_bytes) {
        pool.caller_stack = None;
        pool.caller_stack = Some(CallerStack::map(stack_bytes)?);
    }
    // Every thread handed the job is waited for, even after a failure:
    // the job points into the caller's buffers. A share whose thread has
    // stopped is taken by the others.
    let job = Arc::new(job);
    let finished = Arc::new(Finished { pending: std::sync::atomic::AtomicUsize::new(shares - 1), caller: std::thread::current() });
    let mut failed = None;
    for t in 1..shares {
        let part = Part { job: Arc::clone(&job), me: t, finished: Arc::clone(&finished) };
        if pool.threads[t - 1].parts.send(part).is_err() {
            failed = failed.or(Some(format!("kernel thread {t} has stopped")));
            finished.one_done();
        }
    }
    let stack = pool.caller_stack.as_mut().expect("mapped above");
    stack.run(|| job.work(0));
    finished.wait();
    failed.map_or(Ok(()), Err)
}

/// The CPU for kernel thread `index`: the `index`-th this process may
/// use (modulo their number), as the caller had them before it was pinned
/// ([`CallerPin`]). Unpinned, a woken thread may be placed on the CPU of
/// the thread that woke it, beside its sibling, and a 2-thread run then
/// goes at 1-thread speed until the scheduler moves one (seen on the
/// 2-vCPU VM as bimodal 2-thread times). Best effort: where the affinity
/// cannot be read or set, the thread stays where the scheduler puts it.
#[cfg(target_os = "linux")]
fn cpu_for(index: usize) -> Option<usize> {
    let allowed = PINNED_FROM.get().or_else(affinity)?;
    // SAFETY: `allowed` is a valid set; CPU_ISSET reads within it.
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &allowed) }).collect();
    cpus.get(index % cpus.len().max(1)).copied()
}

/// Keeps the calling thread on `cpu`.
#[cfg(target_os = "linux")]
fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call reads the
    // size passed.
    unsafe {
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
    }
}

#[cfg(target_os = "linux")]
thread_local! {
    /// The calling thread's affinity before a [`CallerPin`] pinned it.
    static PINNED_FROM: std::cell::Cell<Option<libc::cpu_set_t>> = const { std::cell::Cell::new(None) };
}

/// The calling thread pinned to the first CPU it may use (where kernel
/// thread `t` is pinned to the `t`-th), until dropped; then its own
/// affinity is restored (processes it starts inherit it). Pinning and
/// restoring cost about 5 µs on the 2-vCPU VM, so a program pins once
/// per run, outside its timed region, not once per kernel.
pub(crate) struct CallerPin {
    #[cfg(target_os = "linux")]
    restore: Option<libc::cpu_set_t>,
}

impl CallerPin {
    /// Pins where `threads` is more than one (and the caller is not
    /// pinned already); otherwise does nothing.
    pub fn new(threads: usize) -> CallerPin {
        #[cfg(target_os = "linux")]
        {
            let restore = (threads > 1 && PINNED_FROM.get().is_none()).then(affinity).flatten();
            if let Some(cpu) = restore.and_then(|_| cpu_for(0)) {
                PINNED_FROM.set(restore);
                pin_to_cpu(cpu);
            }
            CallerPin { restore: PINNED_FROM.get().and(restore) }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = threads;
            CallerPin {}
        }
    }
}

impl Drop for CallerPin {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(mask) = &self.restore {
            PINNED_FROM.set(None);
            // SAFETY: `mask` is a valid set of the size passed.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), mask) };
        }
    }
}

/// The CPUs the calling thread may use; `None` where they cannot be read.
#[cfg(target_os = "linux")]
fn affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call writes at
    // most its size.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut allowed) == 0).then_some(allowed)
    }
}

#[cfg(not(target_os = "linux"))]
fn cpu_for(_index: usize) -> Option<usize> {
    None
}

#[cfg(not(target_os = "linux"))]
fn pin_to_cpu(_cpu: usize) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicI64};
    use std::sync::Mutex as StdMutex;

    /// Held by each test: they look at the one pool's threads.
    static ONE_AT_A_TIME: StdMutex<()> = StdMutex::new(());

    /// The names of the threads that ran each call of [`count`].
    static THREADS_SEEN: StdMutex<Vec<Option<String>>> = StdMutex::new(Vec::new());

    /// A stand-in kernel with one buffer parameter, an array of counters:
    /// adds one to the counter of each iteration of its range.
    extern "C" fn count(counters: usize, lo: i64, hi: i64) {
        THREADS_SEEN.lock().unwrap().push(std::thread::current().name().map(str::to_string));
        for i in lo..hi {
            // SAFETY: the test passes an array of AtomicI64 longer than the range.
            unsafe { &*(counters as *const AtomicI64).add(i as usize) }.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Runs `count` over `[0, trip)`; the names of the threads that ran it.
    fn run(counters: &[AtomicI64], trip: u64, threads: usize, stack: usize) -> Vec<Option<String>> {
        THREADS_SEEN.lock().unwrap().clear();
        let job = Job::new(count as extern "C" fn(usize, i64, i64) as usize, vec![counters.as_ptr() as usize], trip, threads).unwrap();
        run_job(job, stack).unwrap();
        let mut seen = THREADS_SEEN.lock().unwrap().clone();
        seen.sort();
        seen.dedup();
        seen
    }

    fn kernel_thread_ids() -> Vec<std::thread::ThreadId> {
        POOL.lock().unwrap().threads.iter().map(|t| t.thread.id()).collect()
    }

    /// Every iteration runs once, on the caller and the kernel threads;
    /// one share runs on the caller alone; the same kernel threads serve
    /// the next run (their stacks persist); a kernel needing a larger
    /// stack gets a new thread and a larger caller stack; there are never
    /// more shares than iterations.
    #[test]
    fn kernel_threads_persist_and_grow_their_stacks() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let caller = std::thread::current().name().map(str::to_string);
        let counters: Vec<AtomicI64> = (0..1000).map(|_| AtomicI64::new(0)).collect();
        let first = run(&counters, 1000, 2, 1 << 20);
        assert!(counters.iter().all(|c| c.load(Ordering::Relaxed) == 1), "each iteration once");
        assert!(first.iter().all(|name| *name == caller || name.as_deref() == Some("tilec-kernel-1")), "{first:?}");
        let threads = kernel_thread_ids();
        run(&counters, 1000, 2, 1 << 20);
        assert_eq!(kernel_thread_ids(), threads, "the same threads serve the next run");
        assert_eq!(run(&counters, 1000, 1, 1 << 20), vec![caller], "one share runs on the caller");
        let larger = POOL.lock().unwrap().threads.iter().map(|t| t.stack_bytes).max().unwrap() + (64 << 20);
        run(&counters, 1000, 2, larger);
        assert_ne!(kernel_thread_ids()[0], threads[0], "a larger stack needs a new thread");
        assert!(POOL.lock().unwrap().caller_stack.as_ref().unwrap().usable() >= larger);
        assert!(counters.iter().all(|c| c.load(Ordering::Relaxed) == 4));
        assert_eq!(Job::new(0, vec![], 3, 8).unwrap().shares.len(), 3);
        assert!(Job::new(0, vec![], u64::from(u32::MAX) + 1, 2).is_none());
    }

    /// Uses 6 MiB of stack, three times a test thread's.
    extern "C" fn deep(out: usize, lo: i64, hi: i64) {
        let mut buffer = [0u8; 6 << 20];
        for (i, b) in std::hint::black_box(&mut buffer).iter_mut().enumerate() {
            *b = (i as i64 + lo) as u8;
        }
        let sum: u64 = std::hint::black_box(&buffer).iter().map(|&b| u64::from(b)).sum();
        // SAFETY: the test passes a pointer to an AtomicU64.
        unsafe { &*(out as *const AtomicU64) }.fetch_add(sum + (hi - lo) as u64, Ordering::Relaxed);
    }

    /// The caller's share runs on a stack of the kernel's size, not on
    /// the caller's own (2 MiB on a test thread: this would overflow it).
    #[test]
    fn the_callers_share_runs_on_a_stack_of_the_kernels_size() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let out = AtomicU64::new(0);
        let job = Job::new(deep as extern "C" fn(usize, i64, i64) as usize, vec![&out as *const _ as usize], 1, 1).unwrap();
        run_job(job, 8 << 20).unwrap();
        assert_eq!(out.load(Ordering::Relaxed), (0..6u64 << 20).map(|i| i % 256).sum::<u64>() + 1);
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
    /// iteration 0 on the caller.
    #[test]
    fn a_held_up_share_is_taken_over() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let job = Job::new(wait_in_0_for_3 as extern "C" fn(usize, i64, i64) as usize, vec![0], 8, 2).unwrap();
        run_job(job, 1 << 20).unwrap();
        assert!(RAN.iter().all(|r| r.load(Ordering::Relaxed)));
        assert!(ITERATION_0_WAITED_FOR_3.load(Ordering::Relaxed), "iteration 3 ran while iteration 0 waited");
    }

    #[cfg(target_os = "linux")]
    fn cpus_of(set: &libc::cpu_set_t) -> Vec<usize> {
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, set) }).collect()
    }

    /// A run on several threads pins the caller to the first CPU and
    /// restores its affinity after; a kernel thread started meanwhile
    /// still goes to its own CPU, not the caller's (it inherits the
    /// caller's affinity of one CPU).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_caller_is_pinned_for_a_run_and_kernel_threads_keep_their_cpus() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let cpus = cpus_of(&affinity().unwrap());
        if cpus.len() < 2 {
            eprintln!("skipped: this process may use {} CPU(s)", cpus.len());
            return;
        }
        {
            let _pinned = CallerPin::new(2);
            assert_eq!(cpus_of(&affinity().unwrap()), vec![cpus[0]]);
            let _again = CallerPin::new(2);
            let counters: Vec<AtomicI64> = (0..8).map(|_| AtomicI64::new(0)).collect();
            // A stack larger than any test's before: a new kernel thread.
            run(&counters, 8, 2, 96 << 20);
            assert_eq!(POOL.lock().unwrap().threads[0].cpu, Some(cpus[1]));
            assert!(counters.iter().all(|c| c.load(Ordering::Relaxed) == 1));
        }
        assert_eq!(cpus_of(&affinity().unwrap()), cpus, "the caller's affinity is restored");
        let _one_thread = CallerPin::new(1);
        assert_eq!(cpus_of(&affinity().unwrap()), cpus, "one thread: not pinned");
    }
}
