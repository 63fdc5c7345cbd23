//! Compiling a candidate in a process of its own (`tilec compile-worker`).
//!
//! LLVM compiles most candidates in a fraction of a second, but a schedule
//! the search proposes can make it take minutes (an accumulator tile of
//! thousands of registers, unrolled whole, stalled a tuning run for that
//! long), and an LLVM assertion aborts the process it fires in. A tuner
//! that compiled in its own process could stop neither. So the evaluator
//! emits the candidate's MLIR (cheap, and a tilec bug if it fails), then
//! sends it to a child, `tilec compile-worker`, under a time limit, as it
//! sends the compiled code to `tilec-worker` to run. A compile that
//! overruns or dies is that candidate's failure, and the search goes on.
//!
//! The child runs [`compile_job`], the function the parent would have run:
//! its object or PTX is the one an in-process compile writes.

use crate::compile::{CompileError, LlvmTarget, compile_cpu, compile_gpu};
use std::path::PathBuf;
use std::time::Duration;
use tilec_runtime::worker::{WorkerFailure, run_child};

/// One compilation: MLIR in, a file out.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum CompileJob {
    /// CPU kernels' MLIR ([`crate::cpu_module_text`]) to an x86 object.
    Cpu { mlir: String, target: LlvmTarget, object: PathBuf },
    /// GPU kernels' MLIR ([`crate::gpu_module_text`]) to PTX for `chip`.
    Gpu { mlir: String, chip: String, features: String, ptx: PathBuf },
}

/// What the child answers on its stdout: the compile error, if any (a
/// crash is its exit status instead).
#[derive(serde::Serialize, serde::Deserialize)]
struct Answer {
    error: Option<String>,
}

/// Runs `job` in this process and writes its output file.
pub fn compile_job(job: &CompileJob) -> Result<(), CompileError> {
    let (path, bytes) = match job {
        CompileJob::Cpu { mlir, target, object } => (object, compile_cpu(mlir, target)?.object),
        CompileJob::Gpu { mlir, chip, features, ptx } => (ptx, compile_gpu(mlir, chip, features)?.1.into_bytes()),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CompileError(format!("cannot create `{}`: {e}", dir.display())))?;
    }
    std::fs::write(path, bytes).map_err(|e| CompileError(format!("cannot write `{}`: {e}", path.display())))
}

/// `tilec compile-worker`: reads one [`CompileJob`] (JSON) on stdin, runs
/// it, and answers on stdout. Exit 0 with an answer, compile error or not;
/// 1 when the job could not be read.
pub fn serve() -> std::process::ExitCode {
    use std::io::Read;
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("tilec compile-worker: cannot read the job: {e}");
        return std::process::ExitCode::FAILURE;
    }
    let job: CompileJob = match serde_json::from_str(&text) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("tilec compile-worker: malformed job (it is started by tilec's evaluator, not by hand): {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let answer = Answer { error: compile_job(&job).err().map(|e| e.0) };
    println!("{}", serde_json::to_string(&answer).unwrap_or_default());
    std::process::ExitCode::SUCCESS
}

/// How a compilation in the child failed.
#[derive(Debug, PartialEq)]
pub enum ChildCompileFailure {
    /// LLVM or MLIR rejected the candidate (the child's answer).
    Error(String),
    /// It ran past its time and was killed.
    TimedOut(Duration),
    /// The child died (an LLVM assertion, a signal), could not start, or
    /// answered nonsense.
    Crashed(String),
}

impl std::fmt::Display for ChildCompileFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildCompileFailure::Error(e) => f.write_str(e),
            ChildCompileFailure::TimedOut(d) => write!(f, "compiling ran past {} s and was stopped (the compile time limit)", d.as_secs_f64()),
            ChildCompileFailure::Crashed(e) => write!(f, "the compiler process died: {e}"),
        }
    }
}

/// The executable that serves compile jobs (`tilec`, run as `tilec
/// compile-worker`) and the time limit of each.
#[derive(Clone, Debug)]
pub struct CompileWorker {
    pub program: PathBuf,
    pub timeout: Duration,
}

/// A compile's time limit unless the tool sets another (`tilec-tune
/// --compile-timeout`): an order of magnitude above the slowest sound
/// candidates seen (seconds, for large unrolled GPU kernels).
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(60);

impl CompileWorker {
    /// `$TILEC_COMPILER`, else the `tilec` executable next to the running
    /// one (cargo puts tilec's binaries in one folder), with the default
    /// time limit. `None` if there is none. Not the folder above, as for
    /// `tilec-worker`: a test binary (in cargo's `deps/`) compiles in its
    /// own process, with the code it was built with, never with a `tilec`
    /// left from an older build.
    pub fn find() -> Option<CompileWorker> {
        // (A `$TILEC_COMPILER` that does not exist is used all the same:
        // each compile then fails saying so, where falling back would hide
        // the setting.)
        let program = match std::env::var_os("TILEC_COMPILER") {
            Some(p) => PathBuf::from(p),
            None => Some(std::env::current_exe().ok()?.parent()?.join("tilec")).filter(|p| p.is_file())?,
        };
        Some(CompileWorker { program, timeout: DEFAULT_COMPILE_TIMEOUT })
    }

    /// Runs `job` in a child process; its output file is written when this
    /// returns `Ok`.
    pub fn run(&self, job: &CompileJob) -> Result<(), ChildCompileFailure> {
        let text = serde_json::to_string(job).map_err(|e| ChildCompileFailure::Crashed(format!("cannot write the job: {e}")))?;
        let mut command = std::process::Command::new(&self.program);
        command.arg("compile-worker");
        let out = run_child(&mut command, &text, self.timeout).map_err(|e| match e {
            WorkerFailure::TimedOut(d) => ChildCompileFailure::TimedOut(d),
            WorkerFailure::Spawn(e) => ChildCompileFailure::Crashed(format!("cannot start `{}`: {e}", self.program.display())),
            WorkerFailure::Crashed(e) | WorkerFailure::Protocol(e) => ChildCompileFailure::Crashed(e),
        })?;
        let answer: Answer = serde_json::from_str(out.trim()).map_err(|e| ChildCompileFailure::Crashed(format!("it answered nonsense ({e}): {out:.200}")))?;
        match answer.error {
            Some(e) => Err(ChildCompileFailure::Error(e)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A stand-in for `tilec`: a shell script, run as `SCRIPT compile-worker`.
    fn fake_compiler(dir: &Path, name: &str, body: &str, timeout: Duration) -> CompileWorker {
        use std::os::unix::fs::PermissionsExt;
        let program = dir.join(name);
        std::fs::write(&program, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        CompileWorker { program, timeout }
    }

    fn job(dir: &Path) -> CompileJob {
        CompileJob::Cpu { mlir: "module {}".into(), target: LlvmTarget::host(), object: dir.join("out/empty.o") }
    }

    #[test]
    fn a_compile_that_overruns_dies_or_answers_nonsense_fails_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let limit = Duration::from_millis(300);
        let hang = fake_compiler(dir.path(), "hang", "cat > /dev/null; sleep 30", limit);
        let start = std::time::Instant::now();
        assert_eq!(hang.run(&job(dir.path())), Err(ChildCompileFailure::TimedOut(limit)));
        assert!(start.elapsed() < Duration::from_secs(10), "killed at its limit, not waited for");
        let abort = fake_compiler(dir.path(), "abort", "echo 'LLVM ERROR: out of registers' >&2; kill -ABRT $$", limit * 10);
        match abort.run(&job(dir.path())) {
            Err(ChildCompileFailure::Crashed(m)) => assert!(m.contains("abort (signal 6)") && m.contains("LLVM ERROR: out of registers"), "{m}"),
            other => panic!("expected a crash, got {other:?}"),
        }
        let nonsense = fake_compiler(dir.path(), "nonsense", "cat > /dev/null; echo hello", limit * 10);
        match nonsense.run(&job(dir.path())) {
            Err(ChildCompileFailure::Crashed(m)) => assert!(m.contains("answered nonsense") && m.contains("hello"), "{m}"),
            other => panic!("expected nonsense, got {other:?}"),
        }
        let rejects = fake_compiler(dir.path(), "rejects", "cat > /dev/null; echo '{\"error\": \"MLIR lowering failed\"}'", limit * 10);
        assert_eq!(rejects.run(&job(dir.path())), Err(ChildCompileFailure::Error("MLIR lowering failed".into())));
        let missing = CompileWorker { program: dir.path().join("no-such-compiler"), timeout: limit };
        match missing.run(&job(dir.path())) {
            Err(ChildCompileFailure::Crashed(m)) => assert!(m.contains("cannot start") && m.contains("no-such-compiler"), "{m}"),
            other => panic!("expected a failed start, got {other:?}"),
        }
    }

    #[test]
    fn the_child_is_sent_the_job_the_parent_would_have_run() {
        let dir = tempfile::tempdir().unwrap();
        let sent = dir.path().join("sent.json");
        let echo = fake_compiler(dir.path(), "echo", &format!("cat > {}; echo '{{\"error\": null}}'", sent.display()), Duration::from_secs(10));
        let job = job(dir.path());
        echo.run(&job).expect("answered");
        let got: CompileJob = serde_json::from_str(&std::fs::read_to_string(&sent).unwrap()).unwrap();
        assert_eq!(format!("{got:?}"), format!("{job:?}"));
    }

    #[test]
    fn a_job_in_this_process_writes_its_object() {
        let dir = tempfile::tempdir().unwrap();
        compile_job(&job(dir.path())).expect("an empty module compiles");
        let object = std::fs::read(dir.path().join("out/empty.o")).unwrap();
        assert_eq!(&object[..4], b"\x7fELF");
        let bad = CompileJob::Cpu { mlir: "module { not mlir".into(), target: LlvmTarget::host(), object: dir.path().join("bad.o") };
        assert!(compile_job(&bad).unwrap_err().0.contains("did not parse"));
    }
}
