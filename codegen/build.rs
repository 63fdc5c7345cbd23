//! Builds `cpp/mlir_passes.cpp`, MLIR passes that MLIR's C API does not
//! offer (math approximations, bf16 conversions and masked bf16 memory
//! operations), against the same LLVM/MLIR 22 headers whose static
//! libraries `mlir-sys` links.

use std::path::PathBuf;
use std::process::Command;

/// `llvm-config` of the toolchain `mlir-sys` uses: under
/// `MLIR_SYS_220_PREFIX` (set in `.cargo/config.toml`), else on `PATH`.
fn llvm_config() -> PathBuf {
    match std::env::var_os("MLIR_SYS_220_PREFIX") {
        Some(prefix) => PathBuf::from(prefix).join("bin/llvm-config"),
        None => PathBuf::from("llvm-config"),
    }
}

fn main() {
    println!("cargo:rerun-if-changed=cpp/mlir_passes.cpp");
    println!("cargo:rerun-if-env-changed=MLIR_SYS_220_PREFIX");
    let config = llvm_config();
    let out = Command::new(&config)
        .arg("--includedir")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} (install LLVM/MLIR 22, see tools/setup.sh): {e}",
                config.display()
            )
        });
    assert!(
        out.status.success(),
        "{} --includedir failed",
        config.display()
    );
    let include = String::from_utf8(out.stdout)
        .expect("UTF-8 path")
        .trim()
        .to_string();
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .include(&include)
        .file("cpp/mlir_passes.cpp")
        // As LLVM itself is built (`llvm-config --cxxflags`).
        .flag("-fno-exceptions")
        .define("_GNU_SOURCE", None)
        .define("__STDC_CONSTANT_MACROS", None)
        .define("__STDC_FORMAT_MACROS", None)
        .define("__STDC_LIMIT_MACROS", None)
        // MLIR's headers warn about things that are not ours to fix.
        .warnings(false);
    // The flags that change LLVM's ABI must match the libraries'.
    let cxxflags = Command::new(&config)
        .arg("--cxxflags")
        .output()
        .expect("llvm-config --cxxflags");
    for flag in String::from_utf8_lossy(&cxxflags.stdout).split_whitespace() {
        if flag == "-fno-rtti" || flag.starts_with("-D_GLIBCXX_USE_CXX11_ABI") {
            build.flag(flag);
        }
    }
    build.compile("tilec_mlir_passes");
}
