//! Reading source files for the tools: a path or `-` for stdin, checked to
//! be UTF-8, registered in a [`SourceMap`] so diagnostics can point into it.

use crate::diag::{Diagnostic, FileId, SourceMap, Span};
use std::io::Read;

/// Reads `path` (or standard input for `-`) into `sources`.
pub fn read_source(sources: &mut SourceMap, path: &str) -> Result<FileId, Diagnostic> {
    let (name, bytes) = if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map_err(|e| Diagnostic::error(format!("cannot read standard input: {e}")))?;
        ("<stdin>".to_string(), buf)
    } else {
        let bytes = std::fs::read(path).map_err(|e| {
            let d = Diagnostic::error(format!("cannot read `{path}`: {}", io_reason(&e)));
            if e.kind() == std::io::ErrorKind::NotFound { d.with_help("check the path; use `-` to read standard input") } else { d }
        })?;
        (path.to_string(), bytes)
    };
    match String::from_utf8(bytes) {
        Ok(text) => match text.bytes().position(is_control) {
            None => Ok(sources.add(name, text)),
            Some(at) => {
                // Show the text with control bytes blanked (same length, so
                // offsets still hold) rather than echo them to a terminal.
                let byte = text.as_bytes()[at];
                let shown: String = text.chars().map(|c| if c.is_ascii() && is_control(c as u8) { ' ' } else { c }).collect();
                let file = sources.add(name.clone(), shown);
                Err(Diagnostic::error(format!("`{name}` contains the control character 0x{byte:02x}"))
                    .at(Span::new(file, at..at + 1), "control character here")
                    .with_note("tile files are text; is this a binary file?"))
            }
        },
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            // Register the valid prefix so the diagnostic can show where.
            let prefix = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
            let file = sources.add(name.clone(), prefix);
            Err(Diagnostic::error(format!("`{name}` is not UTF-8 text (invalid byte at offset {valid})"))
                .at(Span::new(file, valid..valid), "invalid byte after this point")
                .with_note("tile files are UTF-8 text; is this a binary file?"))
        }
    }
}

/// ASCII control characters other than tab, newline, carriage return and
/// form feed never occur in text a person wrote.
fn is_control(b: u8) -> bool {
    (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c)) || b == 0x7f
}

/// A short reason for an I/O error, without the OS error number.
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::IsADirectory => "it is a directory".into(),
        std::io::ErrorKind::NotADirectory => "a part of the path is not a directory".into(),
        std::io::ErrorKind::AlreadyExists => "it exists and is not a directory".into(),
        _ => e.to_string(),
    }
}

/// Splits a file at lines that start with `// -----` (MLIR's
/// `--split-input-file` convention). Each chunk keeps its offsets in the
/// file, so diagnostics give the real line numbers.
pub fn split_input_file(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut chunks = Vec::new();
    let (mut start, mut offset) = (0, 0);
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("// -----") {
            chunks.push(start..offset);
            start = offset + line.len();
        }
        offset += line.len();
    }
    chunks.push(start..text.len());
    chunks
}
