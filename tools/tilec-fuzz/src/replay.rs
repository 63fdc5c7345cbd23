//! Replaying the corpus: every input under `<target>/` must pass; every
//! input under `<target>/open/` must be listed in `open.md` and still
//! fail (one that passes is a fixed bug, to be moved out of `open/`).

use crate::corpus::{files_in, open_entries};
use crate::targets::{Outcome, Target};
use crate::worker::{Supervisor, WorkerCommand};
use std::path::Path;
use std::time::Duration;

#[derive(Default, Debug)]
pub struct Replay {
    /// One line per input: what happened.
    pub lines: Vec<String>,
    /// What makes the replay fail.
    pub failures: Vec<String>,
}

/// `timeout`: the deadline of every input, else each target's default.
pub fn replay_corpus(dir: &Path, timeout: Option<Duration>) -> Replay {
    let entries = open_entries(dir);
    let mut r = Replay::default();
    for target in Target::ALL {
        let mut sup = Supervisor::new(
            WorkerCommand::this_executable(),
            timeout.unwrap_or_else(|| target.default_timeout()),
        );
        sup.recycle_after = 50;
        for file in files_in(&dir.join(target.name())) {
            let name = file
                .strip_prefix(dir)
                .unwrap_or(&file)
                .display()
                .to_string();
            let Ok(input) = std::fs::read(&file) else {
                r.failures.push(format!("{name}: cannot read"));
                continue;
            };
            match sup.run(target, &input) {
                Outcome::Finding(kind, msg) => r.failures.push(format!(
                    "{name}: {}: {}",
                    kind.name(),
                    msg.lines().next().unwrap_or("")
                )),
                Outcome::Pass => r.lines.push(format!("pass      {name}")),
                Outcome::Reject(why) => r.lines.push(format!("rejected  {name} ({why})")),
            }
        }
        for file in files_in(&dir.join(target.name()).join("open")) {
            let name = file
                .strip_prefix(dir)
                .unwrap_or(&file)
                .display()
                .to_string();
            if !entries.iter().any(|e| e.path == name) {
                r.failures.push(format!("{name} is not listed in open.md"));
            }
            let Ok(input) = std::fs::read(&file) else {
                r.failures.push(format!("{name}: cannot read"));
                continue;
            };
            match sup.run(target, &input) {
                Outcome::Finding(kind, msg) => r.lines.push(format!("open      {name}: {}: {}", kind.name(), msg.lines().next().unwrap_or(""))),
                _ => r.failures.push(format!(
                    "{name} passes now: its bug is fixed. Move it to {}/ (it becomes a regression test) and remove its line from open.md",
                    target.name()
                )),
            }
        }
    }
    for e in &entries {
        if !dir.join(&e.path).is_file() {
            r.failures
                .push(format!("open.md lists `{}`, which does not exist", e.path));
        }
    }
    r
}
