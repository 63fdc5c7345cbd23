//! This machine's measured peaks, cached (issue 23, "honest ratios"):
//! `tilec-bench --peak` measures the f32 FMA peak, the memory bandwidth
//! and each offered dot intrinsic's peak with generated kernels
//! (`tilec_codegen::peak`) and stores them here; `tilec-bench` and
//! `tilec-run` then give `% peak` against the measured figure of the
//! machine they run on, and say "nominal" where they only have the
//! target's datasheet figure.
//!
//! The cache is one JSON file, `calibration.json`, in `$TILEC_CACHE_DIR`,
//! else `$XDG_CACHE_HOME/tilec`, else `~/.cache/tilec`: a list of entries,
//! one per machine (CPU identity, [`machine_id`]) and thread count. A
//! figure measured on another CPU never applies: a VM moved to another
//! host gets a new identity.

use crate::ir::ElemType;
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One machine's measured figures for one thread count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// [`machine_id`] of the machine measured.
    pub machine: String,
    pub threads: usize,
    /// f32 FMA peak, GFLOP/s, and the vector lanes that reached it.
    pub gflops: f64,
    pub lanes: u64,
    /// Triad bandwidth, GB/s.
    pub bandwidth_gbs: f64,
    /// The fewest independent FMA chains that reach the peak on one core
    /// (latency × FMA units as the core runs them); measured on one thread
    /// only, absent in caches written before it was.
    #[serde(default)]
    pub fma_chains: Option<u32>,
    /// GOP/s of each dot intrinsic measured, by name.
    pub dots: Vec<(String, f64)>,
    /// When, in seconds since the Unix epoch.
    pub measured_unix: u64,
}

/// This CPU's identity: vendor, family, model, stepping and model name
/// from `/proc/cpuinfo`, and a hash of its feature flags (the same model
/// with AVX-512 off in a VM is another machine). Empty where there is no
/// `/proc/cpuinfo`.
pub fn machine_id() -> String {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else { return String::new() };
    machine_id_of(&info)
}

/// [`machine_id`] of the text of a `/proc/cpuinfo`.
pub fn machine_id_of(cpuinfo: &str) -> String {
    let field = |name: &str| crate::target::host::cpuinfo_field(cpuinfo, name).unwrap_or("");
    // FNV-1a: a stable hash (std's is seeded per process).
    let flags = field("flags").bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{} family {} model {} stepping {} ({}), flags {flags:016x}", field("vendor_id"), field("cpu family"), field("model"), field("stepping"), field("model name"))
}

/// Where the cache lives (module docs), if anywhere.
pub fn cache_file() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let dir = var("TILEC_CACHE_DIR").or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("tilec"))).or_else(|| var("HOME").map(|h| h.join(".cache").join("tilec")))?;
    Some(dir.join("calibration.json"))
}

/// The cached figures of `machine` for `threads` in `file`, if any (a
/// missing or unreadable cache has none).
pub fn load_from(file: &Path, machine: &str, threads: usize) -> Option<Calibration> {
    let text = std::fs::read_to_string(file).ok()?;
    let entries: Vec<Calibration> = serde_json::from_str(&text).ok()?;
    entries.into_iter().find(|c| c.machine == machine && c.threads == threads && !machine.is_empty())
}

/// Stores `c` in `file`, replacing the entry of its machine and thread
/// count; written to a temporary file and renamed, so that a reader never
/// sees half a file.
pub fn store_to(file: &Path, c: &Calibration) -> Result<(), String> {
    let mut entries: Vec<Calibration> = std::fs::read_to_string(file).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    entries.retain(|e| !(e.machine == c.machine && e.threads == c.threads));
    entries.push(c.clone());
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&entries).map_err(|e| e.to_string())?;
    let tmp = file.with_extension(format!("json.{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, file).map_err(|e| format!("cannot write {}: {e}", file.display()))
}

/// A measured peak, and the instruction it is of (`f32 FMA`,
/// `vpdpbusd.zmm`).
#[derive(Clone, Debug, PartialEq)]
pub struct Peak {
    pub gops: f64,
    pub of: String,
}

/// The instruction that computes `a × b` products on a CPU target.
enum ProductInstruction<'t> {
    /// A dot intrinsic the target offers for those types (u8 × i8 on VNNI,
    /// bf16 × bf16 on AVX512-BF16).
    Dot(&'t crate::target::Intrinsic),
    /// The f32 FMA: floating-point products (bf16 and f16 are widened to
    /// f32) and ops with no products (a pooling).
    Fma,
    /// Integer products with no dot intrinsic: 32-bit multiplies, whose
    /// peak is not measured.
    Unmeasured,
}

fn product_instruction(target: &Target, products: Option<(ElemType, ElemType)>) -> ProductInstruction<'_> {
    let Some((a, b)) = products else { return ProductInstruction::Fma };
    let floats = a.is_float() && b.is_float();
    let (a, b) = (a.name(), b.name());
    match target.offered_intrinsics().find(|x| x.kind == "dot" && ((x.a == a && x.b == b) || (x.a == b && x.b == a))) {
        Some(x) => ProductInstruction::Dot(x),
        None if floats => ProductInstruction::Fma,
        None => ProductInstruction::Unmeasured,
    }
}

impl Calibration {
    /// The measured peak of the instruction that computes `products` on
    /// `target`: the dot intrinsic's where the target offers one for those
    /// types and it was measured, the f32 FMA's for floating-point
    /// products and ops with none, else none.
    pub fn peak_for(&self, target: &Target, products: Option<(ElemType, ElemType)>) -> Option<Peak> {
        match product_instruction(target, products) {
            ProductInstruction::Dot(x) => self.dots.iter().find(|(n, _)| *n == x.name).map(|(n, g)| Peak { gops: *g, of: n.clone() }),
            ProductInstruction::Fma => Some(Peak { gops: self.gflops, of: "f32 FMA".into() }),
            ProductInstruction::Unmeasured => None,
        }
    }
}

/// [`Calibration::peak_for`] from `target`'s nominal figures, for
/// `threads` cores, where nothing was measured.
pub fn nominal_peak_for(target: &Target, products: Option<(ElemType, ElemType)>, threads: usize) -> Option<Peak> {
    let key = match product_instruction(target, products) {
        ProductInstruction::Dot(x) if x.a == "bf16" => "bf16",
        ProductInstruction::Dot(_) => "i8",
        ProductInstruction::Fma => "f32",
        ProductInstruction::Unmeasured => return None,
    };
    target.nominal_peak_gflops(key, threads).map(|gops| Peak { gops, of: format!("nominal {key}") })
}

/// This machine's cached figures for `threads`, if measured.
pub fn load(threads: usize) -> Option<Calibration> {
    load_from(&cache_file()?, &machine_id(), threads)
}

/// Stores figures measured on this machine (`c.machine` is its
/// [`machine_id`]) in the cache.
pub fn store(c: &Calibration) -> Result<PathBuf, String> {
    let file = cache_file().ok_or("no cache folder: set TILEC_CACHE_DIR, XDG_CACHE_HOME or HOME")?;
    store_to(&file, c)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zen4_figures() -> Calibration {
        Calibration {
            machine: String::new(),
            threads: 1,
            gflops: 116.6,
            lanes: 16,
            bandwidth_gbs: 25.9,
            fma_chains: Some(4),
            dots: vec![("vpdpbusd.zmm".into(), 467.1), ("vdpbf16ps.zmm".into(), 233.0)],
            measured_unix: 0,
        }
    }

    #[test]
    fn a_product_is_held_to_the_instruction_that_computes_it() {
        let target = crate::target::builtin("x86-avx512").expect("built-in target");
        let c = zen4_figures();
        let peak = |p| c.peak_for(&target, p).map(|p| (p.of, p.gops));
        assert_eq!(peak(Some((ElemType::U8, ElemType::I8))), Some(("vpdpbusd.zmm".into(), 467.1)));
        assert_eq!(peak(Some((ElemType::I8, ElemType::U8))), Some(("vpdpbusd.zmm".into(), 467.1)));
        assert_eq!(peak(Some((ElemType::F32, ElemType::F32))), Some(("f32 FMA".into(), 116.6)));
        assert_eq!(peak(None), Some(("f32 FMA".into(), 116.6)));
        // x86-avx512 does not offer vdpbf16ps (no AVX512-BF16): bf16 is
        // widened to f32 and held to the FMA's peak.
        assert_eq!(peak(Some((ElemType::BF16, ElemType::BF16))), Some(("f32 FMA".into(), 116.6)));
        // i8 × i8 has no dot instruction: 32-bit multiplies, no peak.
        assert_eq!(peak(Some((ElemType::I8, ElemType::I8))), None);
        // An offered intrinsic that was not measured gives none either.
        let unmeasured = Calibration { dots: Vec::new(), ..zen4_figures() };
        assert_eq!(unmeasured.peak_for(&target, Some((ElemType::U8, ElemType::I8))), None);
        // Nothing measured: the target's figure for the instruction's type.
        let nominal = |p| nominal_peak_for(&target, p, 1).map(|p| p.of);
        assert_eq!(nominal(Some((ElemType::U8, ElemType::I8))).as_deref(), Some("nominal i8"));
        assert_eq!(nominal(Some((ElemType::F32, ElemType::F32))).as_deref(), Some("nominal f32"));
        assert_eq!(nominal(Some((ElemType::I8, ElemType::I8))), None);
    }

    const ZEN3: &str = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nstepping\t: 1\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu avx2 fma\n";

    #[test]
    fn a_machine_is_its_cpu_and_its_flags() {
        let id = machine_id_of(ZEN3);
        assert!(id.starts_with("AuthenticAMD family 25 model 1 stepping 1 (AMD EPYC 7B13), flags "), "{id}");
        assert_ne!(id, machine_id_of(&ZEN3.replace("avx2 fma", "avx2 fma avx512f")), "other flags, another machine");
        assert_eq!(id, machine_id_of(ZEN3), "stable");
    }

    #[test]
    fn figures_are_stored_per_machine_and_thread_count() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sub").join("calibration.json");
        let one = Calibration { machine: "m".into(), threads: 1, gflops: 60.0, lanes: 8, bandwidth_gbs: 20.0, fma_chains: Some(8), dots: vec![], measured_unix: 1 };
        assert_eq!(load_from(&file, "m", 1), None, "nothing cached yet");
        store_to(&file, &one).unwrap();
        store_to(&file, &Calibration { threads: 2, gflops: 120.0, ..one.clone() }).unwrap();
        store_to(&file, &Calibration { machine: "other".into(), gflops: 1.0, ..one.clone() }).unwrap();
        assert_eq!(load_from(&file, "m", 1), Some(one.clone()));
        assert_eq!(load_from(&file, "m", 2).map(|c| c.gflops), Some(120.0));
        assert_eq!(load_from(&file, "m", 4), None);
        // A new measurement replaces the old one.
        store_to(&file, &Calibration { gflops: 65.0, ..one.clone() }).unwrap();
        assert_eq!(load_from(&file, "m", 1).map(|c| c.gflops), Some(65.0));
        assert_eq!(load_from(&file, "", 1), None, "an unknown machine matches nothing");
        // A cache written before `fma_chains` existed still reads.
        std::fs::write(&file, r#"[{"machine": "m", "threads": 1, "gflops": 60.0, "lanes": 8, "bandwidth_gbs": 20.0, "dots": [], "measured_unix": 1}]"#).unwrap();
        assert_eq!(load_from(&file, "m", 1), Some(Calibration { fma_chains: None, ..one.clone() }));
        std::fs::write(&file, "not json").unwrap();
        assert_eq!(load_from(&file, "m", 1), None, "an unreadable cache is none");
    }
}
