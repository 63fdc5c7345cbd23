//! Reading source files for the tools: a path or `-` for stdin, checked to
//! be UTF-8, registered in a [`SourceMap`] so diagnostics can point into it.
//! And checking, before any work, that the files a tool will write can be
//! written.

use crate::diag::{Diagnostic, FileId, SourceMap, Span};
use std::io::Read;
use std::path::Path;

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
        std::io::ErrorKind::StorageFull => "no space left on the device".into(),
        _ => e.to_string(),
    }
}

/// Checks that a file can be written at `path`, without writing it, so
/// that a tool reports a bad output path before it works rather than after.
/// An existing regular file is opened for writing (not truncated); for a
/// new file, its folder must exist and take a new file
/// ([`check_folder_writable`]). Devices and pipes are left to the write.
/// `Err` is the reason, for "cannot write `PATH`: REASON".
pub fn check_writable(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err("it is a directory".into()),
        Ok(m) if m.is_file() => std::fs::OpenOptions::new().write(true).open(path).map(drop).map_err(|e| io_reason(&e)),
        Ok(_) => Ok(()),
        Err(e) if !matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => Err(io_reason(&e)),
        // Nothing there (or a file where a folder should be): the folder says which.
        Err(_) => {
            let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            check_folder_writable(folder)
        }
    }
}

/// Checks that `folder` exists and new files can be made in it: one is
/// created and removed at once (permissions alone do not tell, e.g. on a
/// read-only file system). `Err` is the reason.
pub fn check_folder_writable(folder: &Path) -> Result<(), String> {
    match std::fs::metadata(folder) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(format!("the folder `{}` does not exist", folder.display())),
        Err(e) => return Err(io_reason(&e)),
        Ok(m) if !m.is_dir() => return Err(format!("`{}` is not a folder", folder.display())),
        Ok(_) => {}
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let probe = folder.join(format!(".tilec-write-check-{}-{nanos}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        // Someone made that very name: files can be made there.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("no file can be created in the folder `{}` ({})", folder.display(), io_reason(&e))),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_paths_are_checked_without_leaving_files() {
        let dir = std::env::temp_dir().join(format!("tilec-input-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(check_writable(&dir.join("new.tile")), Ok(()));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "the probe file is removed");
        assert_eq!(check_writable(&dir), Err("it is a directory".to_string()));
        let missing = dir.join("missing");
        assert_eq!(check_writable(&missing.join("out.tile")), Err(format!("the folder `{}` does not exist", missing.display())));
        let file = dir.join("file");
        std::fs::write(&file, "kept").unwrap();
        assert_eq!(check_writable(&file), Ok(()));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept", "an existing file is not truncated");
        assert_eq!(check_writable(&file.join("out.tile")), Err(format!("`{}` is not a folder", file.display())));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
