//! The corpus (`tools/tilec-fuzz/corpus/`, see its README.md):
//! `<target>/` holds inputs that must pass (regressions and seeds);
//! `<target>/open/` holds findings not fixed yet, each listed in
//! `open.md` with its signature. Also: signatures, which say when two
//! findings are the same bug, and the seeds taken from the repository.

use crate::choices::fnv1a;
use crate::targets::{Kind, Target};
use std::path::{Path, PathBuf};

/// The corpus of this checkout.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// The repository root (for seeds).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What identifies a bug across runs and edits: the target, the kind,
/// and for panics the file and message (line numbers and other digits
/// blanked, since they change with unrelated edits and with the input).
pub fn signature(target: Target, kind: Kind, message: &str) -> String {
    let normalise = |s: &str| -> String {
        let mut out = String::new();
        let mut in_digits = false;
        for c in s.chars() {
            if c.is_ascii_digit() {
                if !in_digits {
                    out.push('#');
                }
                in_digits = true;
            } else {
                in_digits = false;
                out.push(c);
            }
        }
        out.chars().take(160).collect::<String>().replace('`', "'")
    };
    let detail = match kind {
        Kind::Panic => {
            // "panicked at FILE:LINE:COL: MESSAGE"
            let rest = message.strip_prefix("panicked at ").unwrap_or(message);
            let (file, msg) = match rest.split_once(':') {
                Some((file, after)) => (
                    file.to_string(),
                    after
                        .splitn(3, ':')
                        .nth(2)
                        .unwrap_or(after)
                        .trim()
                        .to_string(),
                ),
                None => (String::new(), rest.to_string()),
            };
            format!("{file}: {}", normalise(msg.lines().next().unwrap_or("")))
        }
        // Paths (of the executable, of a scratch library) change from run to run.
        Kind::Crash => normalise(
            &crash_line(message)
                .split(' ')
                .map(|w| if w.contains('/') { "<path>" } else { w })
                .collect::<Vec<_>>()
                .join(" "),
        ),
        Kind::Hang => String::new(),
        // What differs, not by how much.
        Kind::Mismatch => {
            let first = message.lines().next().unwrap_or("");
            normalise(first.split(": max abs err").next().unwrap_or(first))
        }
        _ => normalise(message.lines().next().unwrap_or("")),
    };
    format!("{}|{}|{detail}", target.name(), kind.name())
}

/// The line of a crash report that says most: Rust's fatal errors and
/// allocation failures, a panic that could not unwind, else the signal.
fn crash_line(report: &str) -> &str {
    for key in [
        "overflowed its stack",
        "memory allocation of",
        "fatal runtime error",
        "panicked at",
        "Assertion",
        "LLVM ERROR",
        "error:",
    ] {
        if let Some(l) = report.lines().find(|l| l.contains(key)) {
            return l;
        }
    }
    report.lines().next().unwrap_or("")
}

#[derive(Clone, Debug)]
pub struct OpenEntry {
    /// Relative to the corpus folder: `parse/open/panic-....tile`.
    pub path: String,
    pub signature: String,
}

pub const OPEN_LIST: &str = "open.md";

/// The entries of `open.md`: lines `- \`PATH\` sig: \`SIGNATURE\` ...`.
pub fn open_entries(dir: &Path) -> Vec<OpenEntry> {
    let Ok(text) = std::fs::read_to_string(dir.join(OPEN_LIST)) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("- `")?;
            let (path, rest) = rest.split_once('`')?;
            let sig = rest
                .split_once("sig: `")
                .and_then(|(_, s)| s.split_once('`'))
                .map(|(s, _)| s.to_string())
                .unwrap_or_default();
            Some(OpenEntry {
                path: path.to_string(),
                signature: sig,
            })
        })
        .collect()
}

/// Inputs of a folder, sorted by name (so runs are deterministic).
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "tile" || x == "txt"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Saves a finding's input: into `<dir>/<target>/open/` with an entry in
/// `open.md` (`to_corpus`), or into a plain findings folder.
#[allow(clippy::too_many_arguments)]
pub fn save_finding(
    dir: &Path,
    to_corpus: bool,
    target: Target,
    kind: Kind,
    input: &[u8],
    sig: &str,
    message: &str,
    origin: &str,
) -> std::io::Result<PathBuf> {
    let name = format!(
        "{}-{:016x}.{}",
        kind.name(),
        fnv1a(input),
        target.extension()
    );
    let folder = if to_corpus {
        dir.join(target.name()).join("open")
    } else {
        dir.join(target.name())
    };
    std::fs::create_dir_all(&folder)?;
    let path = folder.join(&name);
    std::fs::write(&path, input)?;
    if to_corpus {
        let rel = format!("{}/open/{name}", target.name());
        let first = message.lines().next().unwrap_or("").replace('`', "'");
        let first: String = first.chars().take(200).collect();
        let entry = format!("- `{rel}` sig: `{sig}` — {first} ({origin}; not triaged yet)\n");
        let list = dir.join(OPEN_LIST);
        let mut text = std::fs::read_to_string(&list).unwrap_or_else(|_| OPEN_HEADER.to_string());
        if !text.contains(&format!("`{rel}`")) {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&entry);
            std::fs::write(&list, text)?;
        }
    } else {
        std::fs::write(
            path.with_extension(format!("{}.msg", target.extension())),
            format!("{sig}\n{origin}\n\n{message}\n"),
        )?;
    }
    Ok(path)
}

pub const OPEN_HEADER: &str = "# Open findings\n\nInputs under `<target>/open/` that still fail: known bugs, not fixed yet. `cargo test -p tilec-fuzz`\nchecks that each is listed here and still fails; see README.md for what to do when one is fixed.\nThe fuzzer does not report a finding whose signature is listed here as new.\n\n";

/// `.tile` files of the repository (examples, specs, lit tests,
/// workloads), sorted by path: the seeds byte mutation starts from.
pub fn tile_seeds() -> Vec<Vec<u8>> {
    let root = repo_root();
    let mut paths = Vec::new();
    for sub in [
        "ir-spec",
        "examples",
        "lit-tests",
        "benchmarks/workloads",
        "tools/tilec-fuzz/corpus/parse",
        "tools/tilec-fuzz/corpus/interp",
        "tools/tilec-fuzz/corpus/compile",
    ] {
        collect(&root.join(sub), "tile", &mut paths);
    }
    paths.sort();
    paths
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .filter(|b| b.len() <= 64 * 1024)
        .collect()
}

/// Pass pipelines written in the lit tests (`--pass-pipeline=...`) and the
/// pipeline corpus: the seeds of pipeline mutation.
pub fn pipeline_seeds() -> Vec<Vec<u8>> {
    let root = repo_root();
    let mut paths = Vec::new();
    collect(&root.join("lit-tests"), "tile", &mut paths);
    paths.sort();
    let mut out: Vec<Vec<u8>> = vec![crate::targets::default_compiled_pipeline().into_bytes()];
    for p in paths {
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        for (i, _) in text.match_indices("--pass-pipeline=") {
            let rest = &text[i + "--pass-pipeline=".len()..];
            let Some(q) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
                continue;
            };
            if let Some(end) = rest[1..].find(q) {
                let s = rest.as_bytes()[1..1 + end].to_vec();
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
    }
    for f in files_in(&default_dir().join("pipeline")) {
        if let Ok(b) = std::fs::read(f) {
            out.push(b);
        }
    }
    out
}

fn collect(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "Output" && n != "open") {
                collect(&p, ext, out);
            }
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_ignore_line_numbers_and_values() {
        let a = signature(
            Target::Parse,
            Kind::Panic,
            "panicked at src/verify.rs:120:9: index out of bounds: the len is 3 but the index is 7",
        );
        let b = signature(
            Target::Parse,
            Kind::Panic,
            "panicked at src/verify.rs:131:13: index out of bounds: the len is 2 but the index is 2",
        );
        assert_eq!(a, b);
        assert_eq!(
            a,
            "parse|panic|src/verify.rs: index out of bounds: the len is # but the index is #"
        );
        let c = signature(
            Target::Parse,
            Kind::Panic,
            "panicked at src/syntax/resolve.rs:1:1: attempt to add with overflow",
        );
        assert_ne!(a, c);
        let crash = signature(
            Target::Interp,
            Kind::Crash,
            "the worker was killed by signal 6 (SIGABRT)\nmemory allocation of 123 bytes failed",
        );
        assert_eq!(crash, "interp|crash|memory allocation of # bytes failed");
        let lookup = signature(
            Target::Compile,
            Kind::Crash,
            "the worker exited with status 127\n/tmp/tmp.AB1/tilec-fuzz: symbol lookup error: /tmp/tilec-fuzz-9-3/libk0.so: undefined symbol: __truncsfbf2",
        );
        assert_eq!(
            lookup,
            "compile|crash|<path> symbol lookup error: <path> undefined symbol: __truncsfbf#"
        );
    }
}
