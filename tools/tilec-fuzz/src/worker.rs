//! Isolation: inputs run in a worker process (this executable, `tilec-fuzz
//! worker`), which catches panics itself; an abort, a stack overflow or a
//! hang ends only the worker. The driver (`Supervisor`) sends one input at
//! a time and waits for its answer with a deadline, so when a worker dies
//! or stops answering it knows which input did it; it then starts a new
//! worker for the next input.
//!
//! Protocol. Driver to worker, on stdin: `<target> <length>\n` and the
//! input's bytes. Worker to driver, on stdout, one line per input:
//! `@@tilec-fuzz <status> <message as hex>`; other lines on stdout (a
//! test harness's) are ignored. Stderr is kept (its tail) for crash
//! reports.

use crate::targets::{Kind, Outcome, Target};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PREFIX: &str = "@@tilec-fuzz ";

/// The start of the rejection reason when no worker can be started.
pub const CANNOT_START: &str = "cannot start a worker";

/// The stack an input runs on, in the worker and in `replay`: the size of
/// a main thread's, fixed so that a test harness's smaller thread stacks
/// do not change what overflows.
pub const STACK_BYTES: usize = 8 << 20;

/// Address space a worker may use: an input that makes tilec allocate
/// without bound ends in an allocation failure (a finding), not in the
/// machine's OOM killer.
const ADDRESS_SPACE_BYTES: u64 = 8 << 30;

/// The environment variable that makes the unit-test binary a worker.
pub const WORKER_ENV: &str = "TILEC_FUZZ_WORKER";
const SCRATCH_ENV: &str = "TILEC_FUZZ_SCRATCH";

static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// A panic hook that records the message and location instead of
/// printing them (the worker reports them to the driver).
pub fn install_quiet_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(a panic without a message)".into());
        let at = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_else(|| "?".into());
        let mut last = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none() {
            *last = Some(format!("panicked at {at}: {msg}"));
        }
    }));
}

/// The message of the last panic the quiet hook recorded.
pub fn take_panic_message() -> String {
    LAST_PANIC
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_else(|| "panicked (no message recorded)".into())
}

/// Runs one input in this process, a panic caught and reported as a finding.
pub fn run_caught(target: Target, input: &[u8], scratch: &std::path::Path) -> Outcome {
    *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = None;
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::targets::run(target, input, scratch)
    })) {
        Ok(o) => o,
        Err(_) => Outcome::Finding(Kind::Panic, take_panic_message()),
    }
}

fn limit_address_space() {
    let limit = libc::rlimit {
        rlim_cur: ADDRESS_SPACE_BYTES,
        rlim_max: ADDRESS_SPACE_BYTES,
    };
    // SAFETY: setrlimit reads a valid rlimit struct; failure is harmless.
    unsafe {
        libc::setrlimit(libc::RLIMIT_AS, &limit);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

fn encode(o: &Outcome) -> String {
    match o {
        Outcome::Pass => format!("{PREFIX}pass -"),
        Outcome::Reject(why) => format!("{PREFIX}reject {}", hex(why.as_bytes())),
        Outcome::Finding(k, msg) => format!("{PREFIX}{} {}", k.name(), hex(msg.as_bytes())),
    }
}

fn decode(line: &str) -> Option<Outcome> {
    let rest = line.strip_prefix(PREFIX)?;
    let (status, payload) = rest.split_once(' ')?;
    let text = || String::from_utf8_lossy(&unhex(payload.trim())).into_owned();
    match status {
        "pass" => Some(Outcome::Pass),
        "reject" => Some(Outcome::Reject(text())),
        k => Some(Outcome::Finding(Kind::from_name(k)?, text())),
    }
}

/// The worker: answers inputs from stdin until it closes.
pub fn worker_main() {
    limit_address_space();
    install_quiet_panic_hook();
    let scratch = std::env::var_os(SCRATCH_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("tilec-fuzz-worker-{}", std::process::id()))
        });
    let _ = std::fs::create_dir_all(&scratch);
    let folder = scratch.clone();
    let runner = std::thread::Builder::new()
        .name("input".into())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            let mut header = String::new();
            loop {
                header.clear();
                if input.read_line(&mut header).unwrap_or(0) == 0 {
                    return;
                }
                let mut parts = header.split_whitespace();
                let (Some(target), Some(len)) = (
                    parts.next().and_then(Target::from_name),
                    parts.next().and_then(|n| n.parse::<usize>().ok()),
                ) else {
                    return;
                };
                let mut bytes = vec![0u8; len];
                if input.read_exact(&mut bytes).is_err() {
                    return;
                }
                let outcome = run_caught(target, &bytes, &scratch);
                let mut out = std::io::stdout().lock();
                if writeln!(out, "{}", encode(&outcome))
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    return;
                }
            }
        });
    if let Ok(handle) = runner {
        let _ = handle.join();
    }
    let _ = std::fs::remove_dir_all(&folder);
}

/// How to start a worker: this executable as `tilec-fuzz worker`, or, in
/// the unit tests, the test binary running its worker test.
#[derive(Clone, Debug)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl WorkerCommand {
    pub fn this_executable() -> WorkerCommand {
        let program = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tilec-fuzz"));
        if cfg!(test) {
            WorkerCommand {
                program,
                args: [
                    "--exact",
                    "tests::worker_process",
                    "--nocapture",
                    "--test-threads=1",
                    "-q",
                ]
                .map(String::from)
                .to_vec(),
            }
        } else {
            WorkerCommand {
                program,
                args: vec!["worker".into()],
            }
        }
    }
}

struct Process {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<Option<String>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    scratch: PathBuf,
    answered: usize,
}

/// Runs inputs in workers, one at a time, each with a deadline.
pub struct Supervisor {
    command: WorkerCommand,
    pub timeout: Duration,
    /// A worker is replaced after this many inputs (compiled libraries
    /// and memory pile up in a long-lived one).
    pub recycle_after: usize,
    process: Option<Process>,
    started: usize,
    /// The scratch folder of the last worker started (or tried).
    pub last_scratch: Option<PathBuf>,
}

const STDERR_TAIL: usize = 8192;

impl Supervisor {
    pub fn new(command: WorkerCommand, timeout: Duration) -> Supervisor {
        Supervisor {
            command,
            timeout,
            recycle_after: 2000,
            process: None,
            started: 0,
            last_scratch: None,
        }
    }

    /// How many workers were started (one more after each crash or hang).
    pub fn workers_started(&self) -> usize {
        self.started
    }

    fn spawn(&mut self) -> std::io::Result<Process> {
        self.started += 1;
        // Numbered per process, not per supervisor: tests run several at once.
        static WORKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = WORKERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let scratch = std::env::temp_dir().join(format!("tilec-fuzz-{}-{n}", std::process::id()));
        self.last_scratch = Some(scratch.clone());
        std::fs::create_dir_all(&scratch)?;
        let spawned = Command::new(&self.command.program)
            .args(&self.command.args)
            .env(WORKER_ENV, "1")
            .env(SCRATCH_ENV, &scratch)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&scratch);
                return Err(e);
            }
        };
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr_pipe = child.stderr.take().expect("piped stderr");
        let (tx, replies) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) if l.starts_with(PREFIX) => {
                        if tx.send(Some(l)).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(None);
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut tail = sink.lock().unwrap_or_else(|e| e.into_inner());
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > STDERR_TAIL {
                    let cut = tail.len() - STDERR_TAIL;
                    tail.drain(..cut);
                }
            }
        });
        Ok(Process {
            child,
            stdin,
            replies,
            stderr,
            stderr_reader: Some(stderr_reader),
            scratch,
            answered: 0,
        })
    }

    /// Ends the current worker (politely: its stdin closes).
    pub fn stop(&mut self) {
        if let Some(mut p) = self.process.take() {
            drop(p.stdin);
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match p.child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => {
                        let _ = p.child.kill();
                        let _ = p.child.wait();
                        break;
                    }
                }
            }
            let _ = std::fs::remove_dir_all(&p.scratch);
        }
    }

    /// Kills the worker after a crash or hang; returns its exit and stderr.
    fn reap(&mut self, kill: bool) -> String {
        let Some(mut p) = self.process.take() else {
            return String::new();
        };
        if kill {
            let _ = p.child.kill();
        }
        let status = p.child.wait();
        if let Some(h) = p.stderr_reader.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_dir_all(&p.scratch);
        let tail = String::from_utf8_lossy(&p.stderr.lock().unwrap_or_else(|e| e.into_inner()))
            .into_owned();
        let how = match status {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                match (s.code(), s.signal()) {
                    (Some(c), _) => format!("the worker exited with status {c}"),
                    (_, Some(sig)) => format!(
                        "the worker was killed by signal {sig} ({})",
                        signal_name(sig)
                    ),
                    _ => "the worker ended".to_string(),
                }
            }
            Err(e) => format!("the worker could not be waited for: {e}"),
        };
        format!("{how}\n{}", tail.trim_end())
    }

    /// Runs one input; a dead or silent worker is the input's finding.
    pub fn run(&mut self, target: Target, input: &[u8]) -> Outcome {
        if self
            .process
            .as_ref()
            .is_some_and(|p| p.answered >= self.recycle_after)
        {
            self.stop();
        }
        if self.process.is_none() {
            match self.spawn() {
                Ok(p) => self.process = Some(p),
                Err(e) => return Outcome::Reject(format!("{CANNOT_START}: {e}")),
            }
        }
        let p = self.process.as_mut().expect("a worker");
        let header = format!("{} {}\n", target.name(), input.len());
        let sent = p
            .stdin
            .write_all(header.as_bytes())
            .and_then(|()| p.stdin.write_all(input))
            .and_then(|()| p.stdin.flush());
        if sent.is_err() {
            let report = self.reap(true);
            return Outcome::Finding(Kind::Crash, report);
        }
        match p.replies.recv_timeout(self.timeout) {
            Ok(Some(line)) => {
                p.answered += 1;
                decode(&line).unwrap_or_else(|| {
                    Outcome::Reject(format!("a garbled answer from the worker: {line}"))
                })
            }
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                Outcome::Finding(Kind::Crash, self.reap(false))
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.reap(true);
                Outcome::Finding(
                    Kind::Hang,
                    format!("no answer within {} s", self.timeout.as_secs_f64()),
                )
            }
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop();
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTRAP => "SIGTRAP",
        _ => "another signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_survive_encoding() {
        for o in [
            Outcome::Pass,
            Outcome::Reject("too large".into()),
            Outcome::Finding(Kind::Panic, "panicked at a.rs:1:2: é\nsecond line".into()),
        ] {
            assert_eq!(decode(&encode(&o)), Some(o));
        }
        assert_eq!(decode("running 1 test"), None);
    }
}
