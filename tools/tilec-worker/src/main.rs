//! `tilec-worker`: reads one measurement job (JSON) on stdin, runs it,
//! writes the report (JSON) on stdout. Started by the evaluator, one
//! process per candidate, so that a crashing or hanging kernel takes only
//! this process down.

use std::io::Read;
use std::process::ExitCode;
use tilec_runtime::worker::{Job, run_job};

fn main() -> ExitCode {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("tilec-worker: cannot read the job: {e}");
        return ExitCode::FAILURE;
    }
    let job: Job = match serde_json::from_str(&text) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("tilec-worker: malformed job: {e}");
            return ExitCode::FAILURE;
        }
    };
    let report = run_job(&job);
    println!("{}", serde_json::to_string(&report).unwrap_or_default());
    ExitCode::SUCCESS
}
