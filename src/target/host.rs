//! The `host` target: the machine tilec runs on, detected at run time.
//!
//! `host` is built from the built-in x86 description that matches the
//! machine's vector ISA (`x86-avx512` with AVX-512 F/BW/DQ/VL, else
//! `x86-avx2` with AVX2 and FMA), with these values replaced by what is
//! detected:
//!
//! - ISA features: CPUID, through `is_x86_feature_detected!` (avx2, fma,
//!   f16c, avx512f/bw/dq/vl, avx512vnni);
//! - cores: physical cores in `/sys/devices/system/cpu/cpu*/topology`
//!   (distinct package and core ids), at most the CPUs this process may run
//!   on (`available_parallelism`, which honours affinity and cgroups);
//! - cache sizes: `/sys/devices/system/cpu/cpu0/cache/index*/{level,type,
//!   size,shared_cpu_list}` (L1 data, L2, L3; L3 counted as this machine's
//!   share: size × cores / cores sharing one L3);
//! - clock: `/sys/devices/system/cpu/cpu0/cpufreq/base_frequency` where the
//!   driver exposes it, else `cpu MHz` of `/proc/cpuinfo`;
//! - memory size: `MemTotal` in `/proc/meminfo`;
//! - the model name (`/proc/cpuinfo`), for the description;
//! - the core: CPUID vendor, family and model (`/proc/cpuinfo`) looked up
//!   in [`cores::CORES`], which gives FMA instructions per clock at the
//!   base's vector width (a Zen 4 core retires one 512-bit FMA per clock,
//!   an Ice Lake-SP core two), the FMA latency, vector loads per clock
//!   from L1 and bytes per clock from L2;
//! - cross-checked by measurement: where `tilec-bench --peak` cached this
//!   machine's f32 FMA peak on one thread ([`crate::calibration`]), it
//!   gives the clock the FMAs really run at (turbo, or an AVX-512 licence
//!   clock), and, where it is under 0.6 of what the clock allows, fewer FMA
//!   units than the table's (a Xeon SKU with one 512-bit unit has the
//!   model number of one with two).
//!
//! Assumed from the base description: DRAM bandwidth, every latency, line
//! sizes, L3's bytes per clock, the search model's other figures of a core
//! (`compute.misses_in_flight`, the `[model]` costs), and, for a core the
//! table does not know, its per-clock rates. Per-clock rates are scaled by
//! the detected cores and clock. Each value that could not be detected
//! keeps the base description's, and the target's `sources` say which were
//! detected and which assumed.
//!
//! Not x86-64, or x86-64 without AVX2+FMA: there is no `host` (an error
//! says why; name another target).

use super::{cores, Per, Target};
use crate::diag::{Diagnostic, Diagnostics};
use std::path::Path;
use std::sync::Arc;

/// What detection found; `None` where it found nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostInfo {
    /// `std::env::consts::ARCH`.
    pub arch: String,
    pub features: Features,
    pub model: Option<String>,
    /// CPUs this process may use.
    pub usable_cpus: Option<usize>,
    /// Physical cores (online).
    pub cores: Option<usize>,
    /// Hardware threads per core.
    pub threads_per_core: Option<usize>,
    /// cpu0's caches; `None` when sysfs could not be read.
    pub caches: Option<Vec<Cache>>,
    pub base_mhz: Option<f64>,
    /// `cpu MHz` of `/proc/cpuinfo` (the clock now, or in a VM often the
    /// host's nominal one): the clock where cpufreq gives no base.
    pub cpuinfo_mhz: Option<f64>,
    pub memory_bytes: Option<u64>,
    /// CPUID vendor, family and model (`/proc/cpuinfo`).
    pub cpuid: Option<CpuId>,
    /// This machine's measured f32 FMA peak on one thread, where
    /// `tilec-bench --peak` cached one ([`crate::calibration`]).
    pub measured: Option<MeasuredPeak>,
}

/// CPUID's identity of a core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuId {
    pub vendor: String,
    pub family: u32,
    pub model: u32,
}

/// A measured single-thread f32 FMA peak and the vector lanes it used.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct MeasuredPeak {
    pub gflops: f64,
    pub lanes: u64,
    /// The fewest FMA chains that reached it: latency × FMA units.
    pub chains: Option<u32>,
}

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    pub avx2: bool,
    pub fma: bool,
    pub f16c: bool,
    pub avx512f: bool,
    pub avx512bw: bool,
    pub avx512dq: bool,
    pub avx512vl: bool,
    pub avx512vnni: bool,
    pub avx512bf16: bool,
    /// AVX-VNNI: the VEX-encoded (256-bit) `vpdpbusd` of CPUs without
    /// AVX-512 (Alder Lake, Zen 5).
    pub avxvnni: bool,
}

impl Features {
    /// Does the CPU have `name`, one of [`super::INTRINSIC_FEATURES`]?
    pub fn has(&self, name: &str) -> bool {
        match name {
            "avx512vnni" => self.avx512vnni,
            "avx512bf16" => self.avx512bf16,
            "avxvnni" => self.avxvnni,
            _ => false,
        }
    }

    /// The AVX-512 subsets `x86-avx512` (x86-64-v4) needs.
    pub fn avx512(&self) -> bool {
        self.avx512f && self.avx512bw && self.avx512dq && self.avx512vl
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache {
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    pub size_bytes: u64,
    /// Logical CPUs sharing this cache.
    pub shared_by: usize,
    /// Associativity (`ways_of_associativity`), where sysfs gives it.
    pub ways: Option<u32>,
}

/// Detects this machine.
pub fn detect() -> HostInfo {
    let mut info = read_system(Path::new("/sys/devices/system/cpu"), Path::new("/proc"));
    info.arch = std::env::consts::ARCH.to_string();
    info.features = cpu_features();
    info.usable_cpus = std::thread::available_parallelism().ok().map(|n| n.get());
    info.measured = crate::calibration::load(1).map(|c| MeasuredPeak { gflops: c.gflops, lanes: c.lanes, chains: c.fma_chains });
    info
}

#[cfg(target_arch = "x86_64")]
fn cpu_features() -> Features {
    use std::arch::is_x86_feature_detected as has;
    Features {
        avx2: has!("avx2"),
        fma: has!("fma"),
        f16c: has!("f16c"),
        avx512f: has!("avx512f"),
        avx512bw: has!("avx512bw"),
        avx512dq: has!("avx512dq"),
        avx512vl: has!("avx512vl"),
        avx512vnni: has!("avx512vnni"),
        avx512bf16: has!("avx512bf16"),
        avxvnni: has!("avxvnni"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_features() -> Features {
    Features::default()
}

/// Reads what sysfs and procfs tell (`cpu_root` is
/// `/sys/devices/system/cpu`, `proc_root` is `/proc`); separate from
/// [`detect`] so tests can give a fake tree. Leaves `arch`, `features` and
/// `usable_cpus` empty.
pub fn read_system(cpu_root: &Path, proc_root: &Path) -> HostInfo {
    let read = |p: &Path| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
    let cpu0 = cpu_root.join("cpu0");

    let mut caches = Vec::new();
    let mut any = false;
    for i in 0.. {
        let dir = cpu0.join("cache").join(format!("index{i}"));
        if !dir.is_dir() {
            break;
        }
        any = true;
        let (Some(level), Some(kind), Some(size)) = (read(&dir.join("level")), read(&dir.join("type")), read(&dir.join("size"))) else { continue };
        let (Ok(level), Some(size_bytes)) = (level.parse::<u32>(), parse_size(&size)) else { continue };
        let shared_by = read(&dir.join("shared_cpu_list")).and_then(|l| count_cpu_list(&l)).unwrap_or(1).max(1);
        let ways = read(&dir.join("ways_of_associativity")).and_then(|w| w.parse::<u32>().ok()).filter(|&w| w > 0);
        caches.push(Cache { level, kind, size_bytes, shared_by, ways });
    }

    let threads_per_core = read(&cpu0.join("topology/thread_siblings_list")).and_then(|l| count_cpu_list(&l));
    let cores = read(&cpu_root.join("online")).and_then(|l| cpu_list(&l)).and_then(|cpus| {
        let mut ids: Vec<(String, String)> = Vec::new();
        for c in cpus {
            let topo = cpu_root.join(format!("cpu{c}/topology"));
            let id = (read(&topo.join("physical_package_id"))?, read(&topo.join("core_id"))?);
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        (!ids.is_empty()).then_some(ids.len())
    });

    let base_mhz = read(&cpu0.join("cpufreq/base_frequency")).and_then(|k| k.parse::<f64>().ok()).filter(|&k| k > 0.0).map(|khz| khz / 1000.0);
    let memory_bytes = read(&proc_root.join("meminfo")).and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kb.checked_mul(1024)
    });
    let cpuinfo = read(&proc_root.join("cpuinfo")).unwrap_or_default();
    let field = |name: &str| cpuinfo_field(&cpuinfo, name).map(str::to_string);
    let model = field("model name");
    let cpuinfo_mhz = field("cpu MHz").and_then(|m| m.parse::<f64>().ok()).filter(|&m| m > 0.0);
    let cpuid = match (field("vendor_id"), field("cpu family").and_then(|f| f.parse().ok()), field("model").and_then(|m| m.parse().ok())) {
        (Some(vendor), Some(family), Some(model)) => Some(CpuId { vendor, family, model }),
        _ => None,
    };

    HostInfo {
        arch: String::new(),
        features: Features::default(),
        model,
        usable_cpus: None,
        cores,
        threads_per_core,
        caches: any.then_some(caches),
        base_mhz,
        cpuinfo_mhz,
        memory_bytes,
        cpuid,
        measured: None,
    }
}

/// The cores this process may use (at least one).
pub fn usable_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The threads a tool's `--threads N` asks for: `N`, or one per usable
/// core where it is 0 (every tool's default).
pub fn threads_or_every_core(requested: usize) -> usize {
    if requested == 0 { usable_cores() } else { requested }
}

/// This machine in words, for reports: the CPU's model name and the cores
/// this process may use.
pub fn machine_description() -> String {
    format!("{}, {} core(s)", cpu_model(), usable_cores())
}

/// The CPU's model name (`/proc/cpuinfo`), or "unknown CPU".
pub fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo_field(&info, "model name").unwrap_or("unknown CPU").to_string()
}

/// Field `name` of the first processor in the text of a `/proc/cpuinfo`
/// (`vendor_id`, `model name`, `flags`, ...), trimmed.
pub fn cpuinfo_field<'a>(cpuinfo: &'a str, name: &str) -> Option<&'a str> {
    cpuinfo.lines().take_while(|l| !l.trim().is_empty()).find(|l| l.split(':').next().is_some_and(|k| k.trim() == name)).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim())
}

/// `48K`, `2048K`, `32M`, `1G` or plain bytes.
fn parse_size(s: &str) -> Option<u64> {
    let (digits, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(mult).filter(|&b| b > 0)
}

/// `0-3,8,10-11` → the CPUs.
fn cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

fn count_cpu_list(s: &str) -> Option<usize> {
    cpu_list(s).map(|v| v.len())
}

/// The built-in description `host` starts from, or why there is none.
pub fn base_name(info: &HostInfo) -> Result<&'static str, String> {
    if info.arch != "x86_64" {
        return Err(format!("this machine is `{}`; `host` describes x86-64 machines only", if info.arch.is_empty() { "unknown" } else { &info.arch }));
    }
    let f = &info.features;
    if f.avx512() && f.fma {
        Ok("x86-avx512")
    } else if f.avx2 && f.fma {
        Ok("x86-avx2")
    } else {
        Err("this x86-64 machine lacks AVX2 and FMA, which tilec's CPU code needs".into())
    }
}

/// Builds `host` from `info`; `base` gives a built-in target by name.
pub fn host_target(info: &HostInfo, base: impl FnOnce(&str) -> Result<Arc<Target>, Diagnostics>) -> Result<Target, Diagnostics> {
    let name = base_name(info).map_err(|why| {
        Diagnostics::from(
            Diagnostic::error(format!("cannot describe this machine as target `host`: {why}"))
                .with_help("name a target with `--target=NAME` (`tilec --list-targets`) or give a description file"),
        )
    })?;
    let base = base(name)?;
    Ok(describe(info, &base))
}

/// `base` with the detected values of `info` substituted (see the module
/// comment for which).
pub fn describe(info: &HostInfo, base: &Target) -> Target {
    let mut t = base.clone();
    let mut detected: Vec<String> = Vec::new();
    let mut assumed: Vec<String> = vec![
        "DRAM bandwidth".into(),
        "latencies".into(),
        "line sizes".into(),
        "L3 bytes/clk".into(),
        "the search model's core figures (misses in flight, `[model]` costs)".into(),
    ];

    t.name = "host".into();
    let features = &info.features;
    let mut feats: Vec<String> = ["+avx2", "+fma"].map(String::from).to_vec();
    if features.f16c {
        feats.push("+f16c".into());
    }
    if base.isa.vector_bits >= 512 {
        feats.splice(0..0, ["+avx512f", "+avx512bw", "+avx512dq", "+avx512vl"].map(String::from));
    }
    // The intrinsics' features the CPU has (AVX-512 ones only on the
    // AVX-512 base: code for the AVX2 base must run without them), each
    // named once.
    for f in base.intrinsics.iter().flat_map(|x| &x.features) {
        let usable = features.has(f) && (base.isa.vector_bits >= 512 || !f.starts_with("avx512"));
        let flag = format!("+{f}");
        if usable && !feats.contains(&flag) {
            feats.push(flag);
        }
    }
    t.isa.features = feats.join(",");
    // Intrinsics the CPU lacks are not this target's.
    let offered = base.intrinsics.iter().filter(|x| t.offers(x)).cloned().collect();
    t.intrinsics = offered;
    if base.isa.vector_bits >= 512 && !features.avx512vnni {
        // No VNNI (Skylake-SP, Cascade Lake): no i8 peak the base file's
        // figure would stand for.
        t.peak_gflops.remove("i8");
        assumed.push("no i8 peak (no AVX512-VNNI)".into());
    }
    detected.push(format!("ISA features {} (CPUID)", t.isa.features));

    let units = match (info.cores, info.usable_cpus) {
        (Some(c), Some(u)) => Some(c.min(u)),
        (c, u) => c.or(u),
    };
    match units {
        Some(u) if u > 0 => {
            t.compute.units = u as u32;
            detected.push(format!("{u} cores"));
        }
        _ => assumed.push(format!("{} cores", base.compute.units)),
    }
    match (info.base_mhz, info.cpuinfo_mhz) {
        (Some(mhz), _) => {
            t.compute.clock_ghz = mhz / 1000.0;
            detected.push(format!("{} GHz base clock (cpufreq)", fmt_num(t.compute.clock_ghz)));
        }
        (None, Some(mhz)) => {
            t.compute.clock_ghz = mhz / 1000.0;
            detected.push(format!("{} GHz clock (`cpu MHz` of /proc/cpuinfo)", fmt_num(t.compute.clock_ghz)));
        }
        (None, None) => assumed.push(format!("{} GHz clock", fmt_num(base.compute.clock_ghz))),
    }

    // The core's per-clock figures: the table's where it knows the core,
    // then the FMA units and the clock as the measured peak has them.
    let bits = base.isa.vector_bits;
    let base_fma = base.intrinsics.iter().find(|x| x.kind == "fma").map_or(1.0, |x| x.per_cycle);
    let core = info.cpuid.as_ref().and_then(|id| cores::identify(&id.vendor, id.family, id.model).map(|c| (id, c))).filter(|(_, c)| c.fma_per_clock(bits) > 0.0);
    let mut fma_per_clock = base_fma;
    match core {
        Some((id, c)) => {
            fma_per_clock = c.fma_per_clock(bits);
            t.compute.fma_latency_cycles = c.fma_latency_cycles;
            detected.push(format!(
                "core {} ({} family {:#x} model {:#x}; table: {} FMA/clk and {} loads/clk at {bits} bits, FMA latency {}, {} bytes/clk from L2)",
                c.name,
                id.vendor,
                id.family,
                id.model,
                fmt_num(fma_per_clock),
                fmt_num(c.loads_per_clock(bits)),
                fmt_num(c.fma_latency_cycles),
                fmt_num(c.l2_bytes_per_clock)
            ));
        }
        None => assumed.push(format!("{}'s core (FMA units and latency, L1 and L2 bytes/clk)", base.name)),
    }
    let lanes = u64::from(bits / 32);
    if let Some(m) = info.measured.filter(|m| m.lanes == lanes && m.gflops > 0.0) {
        let nominal = fma_per_clock * lanes as f64 * 2.0 * t.compute.clock_ghz;
        // Well below what the clock allows: fewer FMA units than assumed
        // (a one-unit Xeon SKU gives about half, and less under its AVX-512
        // clock); above: a turbo clock. Between, an AVX-512 licence clock:
        // one thread's runs at 0.6 of the nominal or more.
        let units = if m.gflops < 0.6 * nominal { (fma_per_clock * m.gflops / nominal).round().max(1.0) } else { fma_per_clock };
        let clock = m.gflops / (units * lanes as f64 * 2.0);
        detected.push(format!(
            "{} FMA/clk at {} GHz from the measured peak, {} GFLOP/s on one thread (tilec-bench --peak)",
            fmt_num(units),
            fmt_num(clock),
            fmt_num(m.gflops)
        ));
        fma_per_clock = units;
        t.compute.clock_ghz = round3(clock);
        // Chains in flight over units: the latency the core shows. Kept
        // from the table unless it is a cycle or more off.
        if let Some(chains) = m.chains.filter(|&c| c > 0) {
            let latency = f64::from(chains) / units;
            if (latency - t.compute.fma_latency_cycles).abs() >= 1.0 {
                t.compute.fma_latency_cycles = latency;
                detected.push(format!("FMA latency {} cycles ({chains} chains reach the peak)", fmt_num(latency)));
            } else {
                detected.push(format!("{chains} FMA chains reach the peak, as latency × units say"));
            }
        }
    }
    for x in &mut t.intrinsics {
        if x.kind == "fma" {
            x.per_cycle = fma_per_clock;
            x.latency_cycles = t.compute.fma_latency_cycles.round() as u32;
        } else if x.kind == "dot" {
            // The dot products issue to the FMA pipes (VNNI and BF16 on
            // Intel's ports 0 and 5, on Zen 4's two 256-bit FMA pipes, a
            // zmm one in both halves), so they go at the FMA rate's share of
            // the base part's: Zen 4 runs one `vpdpbusd.zmm` a clock, as
            // its measured peak says (466 GOP/s at 3.59 GHz), not the two of
            // the base Ice Lake. (Two made the model see int8 compute twice
            // as fast as it is and weigh the micro-kernel's loads and
            // traffic against the wrong rate.)
            x.per_cycle *= fma_per_clock / base_fma;
        }
    }

    // Rates per core and clock stay the base part's (but the FMA rate);
    // the totals follow the detected cores and clock.
    let scale = (t.compute.units as f64 * t.compute.clock_ghz) / (base.compute.units as f64 * base.compute.clock_ghz);
    for v in t.peak_gflops.values_mut() {
        *v = round3(*v * scale * fma_per_clock / base_fma);
    }
    let dram = t.memory.first().map(|m| m.name.clone());
    let clock_scale = t.compute.clock_ghz / base.compute.clock_ghz;
    for m in &mut t.memory {
        if Some(&m.name) != dram.as_ref() {
            m.bandwidth_gbs = round3(m.bandwidth_gbs * scale);
            // A core's draw from a cache runs at its clock.
            m.core_bandwidth_gbs = m.core_bandwidth_gbs.map(|b| round3(b * clock_scale));
        }
    }
    if let Some((_, c)) = core {
        // The table's rates replace the base part's per-clock ones.
        let per_clock = t.compute.units as f64 * t.compute.clock_ghz;
        let vector_bytes = f64::from(bits / 8);
        let rates = [("l1", c.loads_per_clock(bits) * vector_bytes), ("l2", c.l2_bytes_per_clock), ("registers", 3.0 * vector_bytes * fma_per_clock)];
        for (name, bytes_per_clock) in rates {
            if let Some(m) = t.memory.iter_mut().find(|m| m.name == name) {
                m.bandwidth_gbs = round3(bytes_per_clock * per_clock);
            }
        }
    }

    let find = |level: u32| -> Option<&Cache> {
        info.caches.as_ref()?.iter().find(|c| c.level == level && (c.kind == "Data" || c.kind == "Unified"))
    };
    let smt = info.threads_per_core.unwrap_or(1).max(1);
    for (level, name) in [(1u32, "l1"), (2, "l2"), (3, "l3")] {
        let Some(m) = t.memory.iter_mut().find(|m| m.name == name) else { continue };
        match find(level) {
            Some(c) => {
                m.capacity_bytes = if m.per == Per::Device {
                    // One L3 per group of cores: the machine's share is the
                    // size times the number of groups.
                    // (A machine limited to fewer cores gets their share.)
                    let sharing = (c.shared_by / smt).max(1) as u64;
                    (c.size_bytes.saturating_mul(t.compute.units as u64) / sharing).max(1)
                } else {
                    c.size_bytes
                };
                if let Some(w) = c.ways {
                    m.ways = w;
                }
                detected.push(format!("{name} {} (sysfs)", fmt_bytes(c.size_bytes)));
            }
            None => assumed.push(format!("{name} {} ({})", fmt_bytes(m.capacity_bytes), if info.caches.is_none() { "sysfs unreadable" } else { "not in sysfs" })),
        }
    }
    if let (Some(bytes), Some(m)) = (info.memory_bytes, t.memory.first_mut()) {
        m.capacity_bytes = bytes;
        detected.push(format!("{} memory (/proc/meminfo)", fmt_bytes(bytes)));
    } else {
        assumed.push("memory size".into());
    }

    let model = info.model.clone().unwrap_or_else(|| "unknown x86-64 CPU".into());
    t.description = format!("this machine: {model}, {} cores ({} numbers where not detected)", t.compute.units, base.name);
    let mut sources = vec![format!("detected at run time: {}", detected.join(", ")), format!("assumed from `{}`: {}", base.name, assumed.join(", "))];
    sources.extend(base.sources.iter().cloned());
    t.sources = sources;
    t
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Shortest text of a number (`2.45`, `64`).
pub(crate) fn fmt_num(x: f64) -> String {
    format!("{}", round3(x))
}

/// `48 KiB`, `1.25 MiB`, `105 MiB`, `23.54 GiB`.
pub(crate) fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{b} bytes") } else { format!("{} {}", (x * 100.0).round() / 100.0, UNITS[u]) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::SourceMap;
    use crate::target::TargetSet;

    fn builtin(name: &str) -> Arc<Target> {
        TargetSet::new().lookup(&mut SourceMap::new(), name).unwrap()
    }

    fn info(features: Features) -> HostInfo {
        HostInfo {
            arch: "x86_64".into(),
            features,
            model: Some("Test CPU".into()),
            usable_cpus: Some(8),
            cores: Some(4),
            threads_per_core: Some(2),
            caches: Some(vec![
                Cache { level: 1, kind: "Data".into(), size_bytes: 48 << 10, shared_by: 2, ways: None },
                Cache { level: 1, kind: "Instruction".into(), size_bytes: 32 << 10, shared_by: 2, ways: None },
                Cache { level: 2, kind: "Unified".into(), size_bytes: 2 << 20, shared_by: 2, ways: None },
                Cache { level: 3, kind: "Unified".into(), size_bytes: 16 << 20, shared_by: 8, ways: None },
            ]),
            base_mhz: Some(3000.0),
            cpuinfo_mhz: None,
            memory_bytes: Some(16 << 30),
            cpuid: None,
            measured: None,
        }
    }

    const AVX2: Features = Features { avx2: true, fma: true, f16c: true, avx512f: false, avx512bw: false, avx512dq: false, avx512vl: false, avx512vnni: false, avx512bf16: false, avxvnni: false };
    const AVX512: Features = Features { avx2: true, fma: true, f16c: true, avx512f: true, avx512bw: true, avx512dq: true, avx512vl: true, avx512vnni: true, avx512bf16: false, avxvnni: false };

    #[test]
    fn sizes_and_cpu_lists() {
        assert_eq!(parse_size("48K"), Some(48 << 10));
        assert_eq!(parse_size("107520K"), Some(107520 << 10));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("0K"), None);
        assert_eq!(parse_size("big"), None);
        assert_eq!(cpu_list("0-3,8,10-11"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(cpu_list("0"), Some(vec![0]));
        assert_eq!(cpu_list("3-1"), None);
        assert_eq!(cpu_list(""), None);
    }

    #[test]
    fn base_follows_the_isa() {
        assert_eq!(base_name(&info(AVX512)), Ok("x86-avx512"));
        assert_eq!(base_name(&info(AVX2)), Ok("x86-avx2"));
        let no_vl = Features { avx512vl: false, ..AVX512 };
        assert_eq!(base_name(&info(no_vl)), Ok("x86-avx2"));
        let e = base_name(&info(Features::default())).unwrap_err();
        assert!(e.contains("lacks AVX2 and FMA"), "{e}");
        let arm = HostInfo { arch: "aarch64".into(), ..info(AVX2) };
        assert!(base_name(&arm).unwrap_err().contains("`aarch64`"));
    }

    #[test]
    fn a_few_cores_draw_less_than_the_chips_bandwidth() {
        let base = builtin("x86-avx2");
        let dram = base.memory_level("dram").unwrap();
        assert_eq!(Target::bandwidth_for_units(dram, 2.0), 64.0, "two cores at 32 GB/s each");
        assert_eq!(Target::bandwidth_for_units(dram, 64.0), 204.8, "all 64 cores: the socket's figure");
        assert_eq!(Target::bandwidth_for_units(base.memory_level("l2").unwrap(), 2.0), 5017.6, "no per-core limit");
    }

    #[test]
    fn detected_values_replace_the_base() {
        let base = builtin("x86-avx2");
        let t = describe(&info(AVX2), &base);
        assert_eq!(t.name, "host");
        assert_eq!(t.compute.units, 4); // physical cores, not the 8 threads
        assert_eq!(t.compute.clock_ghz, 3.0);
        assert_eq!(t.memory_level("l1").unwrap().capacity_bytes, 48 << 10);
        assert_eq!(t.memory_level("l2").unwrap().capacity_bytes, 2 << 20);
        // 8 logical CPUs share 16 MiB: 4 cores; all 4 cores are this machine's.
        assert_eq!(t.memory_level("l3").unwrap().capacity_bytes, 16 << 20);
        assert_eq!(t.memory_level("dram").unwrap().capacity_bytes, 16 << 30);
        // DRAM bandwidth is assumed; the rest scales with cores x clock.
        assert_eq!(t.memory_level("dram").unwrap().bandwidth_gbs, base.memory_level("dram").unwrap().bandwidth_gbs);
        // What one core draws: DRAM's as assumed, a cache's with the clock.
        assert_eq!(t.memory_level("dram").unwrap().core_bandwidth_gbs, base.memory_level("dram").unwrap().core_bandwidth_gbs);
        let l3 = |t: &Target| t.memory_level("l3").unwrap().core_bandwidth_gbs.unwrap();
        assert!((l3(&t) - l3(&base) * 3.0 / base.compute.clock_ghz).abs() < 0.01, "{}", l3(&t));
        let expect = 4.0 * 16.0 * 2.0 * 3.0; // cores x FMA lanes/clk x 2 x GHz
        assert!((t.peak_gflops["f32"] - expect).abs() < 0.01, "{}", t.peak_gflops["f32"]);
        assert_eq!(t.isa.features, "+avx2,+fma,+f16c");
        assert!(t.sources[0].starts_with("detected at run time: "), "{:?}", t.sources);
        assert!(t.sources[1].contains("DRAM bandwidth"), "{:?}", t.sources);
        assert!(t.description.contains("Test CPU"));
        // The search model's figures of a core are the base's.
        assert_eq!((t.compute.fma_latency_cycles, t.compute.misses_in_flight), (base.compute.fma_latency_cycles, base.compute.misses_in_flight));
        assert_eq!(t.model, base.model);
    }

    #[test]
    fn avx512_with_and_without_vnni() {
        let base = builtin("x86-avx512");
        let t = describe(&info(AVX512), &base);
        assert!(t.isa.features.contains("+avx512vnni"), "{}", t.isa.features);
        assert!(t.intrinsics.iter().any(|x| x.kind == "dot"));
        let t = describe(&info(Features { avx512vnni: false, ..AVX512 }), &base);
        assert!(!t.isa.features.contains("vnni"), "{}", t.isa.features);
        assert!(!t.intrinsics.iter().any(|x| x.kind == "dot"));
        assert!(!t.peak_gflops.contains_key("i8"));
    }

    #[test]
    fn host_offers_the_intrinsics_whose_features_the_cpu_has() {
        let names = |t: &Target| t.intrinsics.iter().map(|x| x.name.clone()).collect::<Vec<_>>();
        let avx512 = builtin("x86-avx512");
        // The built-in Ice Lake part lists VDPBF16PS but does not offer it.
        assert!(avx512.intrinsics.iter().any(|x| x.name == "vdpbf16ps.zmm"));
        assert_eq!(avx512.offered_intrinsics().map(|x| x.name.as_str()).collect::<Vec<_>>(), ["vfmadd231ps.zmm", "vpdpbusd.zmm"]);
        let t = describe(&info(Features { avx512bf16: true, ..AVX512 }), &avx512);
        assert_eq!(names(&t), ["vfmadd231ps.zmm", "vpdpbusd.zmm", "vdpbf16ps.zmm"]);
        assert!(t.isa.features.ends_with("+avx512vnni,+avx512bf16"), "{}", t.isa.features);
        assert!(t.intrinsics.iter().all(|x| t.offers(x)));
        let t = describe(&info(AVX512), &avx512);
        assert_eq!(names(&t), ["vfmadd231ps.zmm", "vpdpbusd.zmm"]);
        // AVX2 parts: AVX-VNNI where the CPU has it; an AVX-512 feature is
        // never added to code for the AVX2 base.
        let avx2 = builtin("x86-avx2");
        let t = describe(&info(Features { avxvnni: true, avx512vnni: true, ..AVX2 }), &avx2);
        assert_eq!(names(&t), ["vfmadd231ps.ymm", "vpdpbusd.ymm"]);
        assert!(t.isa.features.contains("+avxvnni") && !t.isa.features.contains("avx512"), "{}", t.isa.features);
        let t = describe(&info(AVX2), &avx2);
        assert_eq!(names(&t), ["vfmadd231ps.ymm"]);
    }

    fn zen4(features: Features) -> HostInfo {
        HostInfo { cpuid: Some(CpuId { vendor: "AuthenticAMD".into(), family: 0x19, model: 0x11 }), ..info(features) }
    }

    fn fma(t: &Target) -> &crate::target::Intrinsic {
        t.intrinsics.iter().find(|x| x.kind == "fma").unwrap()
    }

    #[test]
    fn a_known_core_brings_its_per_clock_figures() {
        // Zen 4 with AVX-512: the x86-avx512 base (Ice Lake-SP, two 512-bit
        // FMA units) becomes one 512-bit FMA per clock and 64 bytes of
        // loads per clock, so half the base part's f32 peak at a clock.
        let base = builtin("x86-avx512");
        let t = describe(&zen4(AVX512), &base);
        assert_eq!(fma(&t).per_cycle, 1.0);
        // Its dot products go at the same share of the base's: one
        // `vpdpbusd.zmm` a clock, not Ice Lake's two.
        let dot = |t: &Target, name: &str| t.intrinsics.iter().find(|x| x.name == name).unwrap().per_cycle;
        assert_eq!(dot(&t, "vpdpbusd.zmm"), 1.0);
        assert_eq!(dot(&t, "vpdpbusd.zmm") * 64.0 * 2.0 * 4.0 * 3.0, t.peak_gflops["i8"]);
        assert!((t.peak_gflops["f32"] - 4.0 * 16.0 * 2.0 * 3.0).abs() < 0.01, "{}", t.peak_gflops["f32"]);
        assert_eq!(t.memory_level("l1").unwrap().bandwidth_gbs, 64.0 * 4.0 * 3.0);
        assert_eq!(t.memory_level("l2").unwrap().bandwidth_gbs, 32.0 * 4.0 * 3.0);
        assert!(t.sources[0].contains("core Zen 4 (AuthenticAMD family 0x19 model 0x11"), "{:?}", t.sources);
        // The same core without AVX-512 (as a VM may show it): two 256-bit
        // FMAs per clock, as the x86-avx2 base has.
        let t = describe(&zen4(AVX2), &builtin("x86-avx2"));
        assert_eq!(fma(&t).per_cycle, 2.0);
        assert!((t.peak_gflops["f32"] - 4.0 * 16.0 * 2.0 * 3.0).abs() < 0.01, "{}", t.peak_gflops["f32"]);
        // Haswell's FMA latency is 5 cycles, the base part's 4.
        let hsw = HostInfo { cpuid: Some(CpuId { vendor: "GenuineIntel".into(), family: 6, model: 0x3f }), ..info(AVX2) };
        let t = describe(&hsw, &builtin("x86-avx2"));
        assert_eq!((t.compute.fma_latency_cycles, fma(&t).latency_cycles), (5.0, 5));
        // An unknown core keeps the base's figures and says so.
        let t = describe(&info(AVX2), &builtin("x86-avx2"));
        assert_eq!(fma(&t).per_cycle, 2.0);
        assert!(t.sources[1].contains("x86-avx2's core"), "{:?}", t.sources);
    }

    #[test]
    fn the_measured_peak_sets_the_clock_and_the_fma_units() {
        let base = builtin("x86-avx512");
        // Above what the 3 GHz clock allows: the FMAs run at a turbo clock.
        let turbo = HostInfo { measured: Some(MeasuredPeak { gflops: 116.7, lanes: 16, chains: Some(4) }), ..zen4(AVX512) };
        let t = describe(&turbo, &base);
        assert_eq!(fma(&t).per_cycle, 1.0);
        assert!((t.compute.clock_ghz - 116.7 / 32.0).abs() < 1e-3, "{}", t.compute.clock_ghz);
        assert!((t.peak_gflops["f32"] - 4.0 * 116.7).abs() < 0.1, "{}", t.peak_gflops["f32"]);
        // 4 chains on 1 unit: latency 4, as the table says.
        assert_eq!(t.compute.fma_latency_cycles, 4.0);
        assert!(t.sources[0].contains("4 FMA chains reach the peak, as latency × units say"), "{:?}", t.sources);
        // Half of what two units at 3 GHz give (a one-unit Xeon SKU with a
        // two-unit model number): one unit.
        let skx = CpuId { vendor: "GenuineIntel".into(), family: 6, model: 0x55 };
        let silver = HostInfo { cpuid: Some(skx), measured: Some(MeasuredPeak { gflops: 90.0, lanes: 16, chains: Some(6) }), ..info(AVX512) };
        let t = describe(&silver, &base);
        assert_eq!(fma(&t).per_cycle, 1.0);
        assert!((t.compute.clock_ghz - 90.0 / 32.0).abs() < 1e-3, "{}", t.compute.clock_ghz);
        assert!(t.sources[0].contains("1 FMA/clk at 2.813 GHz from the measured peak, 90 GFLOP/s"), "{:?}", t.sources);
        // 6 chains on that one unit: a latency of 6, not the table's 4.
        assert_eq!((t.compute.fma_latency_cycles, fma(&t).latency_cycles), (6.0, 6));
        // Two thirds of it: two units under an AVX-512 licence clock.
        let licence = HostInfo { measured: Some(MeasuredPeak { gflops: 128.0, lanes: 16, chains: None }), ..silver };
        let t = describe(&licence, &base);
        assert_eq!(fma(&t).per_cycle, 2.0);
        assert!((t.compute.clock_ghz - 2.0).abs() < 1e-3, "{}", t.compute.clock_ghz);
        // A peak measured with other vectors says nothing about these.
        let ymm = HostInfo { measured: Some(MeasuredPeak { gflops: 90.0, lanes: 8, chains: None }), ..zen4(AVX512) };
        assert_eq!(describe(&ymm, &base).compute.clock_ghz, 3.0);
    }

    #[test]
    fn without_sysfs_the_base_numbers_stay() {
        let base = builtin("x86-avx2");
        let bare = HostInfo { arch: "x86_64".into(), features: AVX2, usable_cpus: Some(2), ..HostInfo::default() };
        let t = describe(&bare, &base);
        assert_eq!(t.compute.units, 2);
        assert_eq!(t.compute.clock_ghz, base.compute.clock_ghz);
        assert_eq!(t.memory_level("l2").unwrap().capacity_bytes, base.memory_level("l2").unwrap().capacity_bytes);
        assert!(t.sources[1].contains("sysfs unreadable"), "{:?}", t.sources);
        assert!(t.sources[1].contains("memory size"), "{:?}", t.sources);
    }

    #[test]
    fn reads_a_fake_sysfs_tree() {
        let root = std::env::temp_dir().join(format!("tilec-host-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let cpu = root.join("cpu");
        let w = |p: &str, s: &str| {
            let p = cpu.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("online", "0-3\n");
        for c in 0..4 {
            w(&format!("cpu{c}/topology/physical_package_id"), "0\n");
            w(&format!("cpu{c}/topology/core_id"), &format!("{}\n", c / 2));
        }
        w("cpu0/topology/thread_siblings_list", "0-1\n");
        for (i, (level, kind, size, shared)) in [(1, "Data", "32K", "0-1"), (1, "Instruction", "32K", "0-1"), (2, "Unified", "1024K", "0-1"), (3, "Unified", "8192K", "0-3")].iter().enumerate() {
            let d = format!("cpu0/cache/index{i}");
            w(&format!("{d}/level"), &format!("{level}\n"));
            w(&format!("{d}/type"), &format!("{kind}\n"));
            w(&format!("{d}/size"), &format!("{size}\n"));
            w(&format!("{d}/shared_cpu_list"), &format!("{shared}\n"));
            w(&format!("{d}/ways_of_associativity"), "16\n");
        }
        w("cpu0/cpufreq/base_frequency", "2100000\n");
        let proc = root.join("proc");
        std::fs::create_dir_all(&proc).unwrap();
        std::fs::write(proc.join("meminfo"), "MemTotal:       1024 kB\nMemFree: 1 kB\n").unwrap();
        std::fs::write(proc.join("cpuinfo"), "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 106\nmodel name\t: Fake CPU @ 2.1GHz\ncpu MHz\t\t: 2100.000\n\nprocessor\t: 1\nmodel\t\t: 1\n").unwrap();

        let i = read_system(&cpu, &proc);
        assert_eq!(i.cores, Some(2));
        assert_eq!(i.threads_per_core, Some(2));
        assert_eq!(i.base_mhz, Some(2100.0));
        assert_eq!(i.memory_bytes, Some(1 << 20));
        assert_eq!(i.model.as_deref(), Some("Fake CPU @ 2.1GHz"));
        // The first processor's identity, not the second's model.
        assert_eq!(i.cpuid, Some(CpuId { vendor: "GenuineIntel".into(), family: 6, model: 0x6a }));
        assert_eq!(i.cpuinfo_mhz, Some(2100.0));
        let caches = i.caches.unwrap();
        assert_eq!(caches.len(), 4);
        assert_eq!(caches[3], Cache { level: 3, kind: "Unified".into(), size_bytes: 8 << 20, shared_by: 4, ways: Some(16) });

        let missing = read_system(&root.join("nothing"), &root.join("nothing"));
        assert_eq!(missing.caches, None);
        assert_eq!(missing.cores, None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn host_in_a_target_set() {
        let mut sm = SourceMap::new();
        let set = TargetSet::new().with_host_info(info(AVX2));
        let t = set.lookup(&mut sm, "host").unwrap();
        assert_eq!(t.compute.units, 4);
        let arm = TargetSet::new().with_host_info(HostInfo { arch: "aarch64".into(), ..HostInfo::default() });
        let d = arm.lookup(&mut sm, "host").unwrap_err();
        let text = sm.render(&d.0);
        assert!(text.contains("cannot describe this machine as target `host`"), "{text}");
    }

    #[test]
    fn detection_on_this_machine_does_not_fail() {
        let i = detect();
        assert_eq!(i.arch, std::env::consts::ARCH);
        if base_name(&i).is_ok() {
            let t = TargetSet::new().lookup(&mut SourceMap::new(), "host").unwrap();
            assert!(t.compute.units >= 1);
            assert!(t.memory.iter().all(|m| m.capacity_bytes > 0));
        }
    }
}
