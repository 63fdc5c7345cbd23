//! Known x86 cores: what a core executes per clock, by CPUID vendor,
//! family and model (issue 23, "micro-architecture in the target model").
//!
//! The built-in descriptions `host` starts from describe one part each
//! (`x86-avx2` an EPYC 7763, Zen 3; `x86-avx512` a Xeon 8380, Ice Lake-SP).
//! The same ISA runs on cores that differ where the search model looks:
//! a Zen 4 core executes a 512-bit FMA as two 256-bit halves (one per
//! clock, where an Ice Lake-SP core retires two), Haswell's FMA latency is
//! 5 cycles, a client Ice Lake has one 512-bit FMA unit. This table gives
//! those figures per core, and `host` takes them from it
//! ([`super::host::describe`]); a measured peak then cross-checks them
//! (a Xeon SKU with one 512-bit FMA unit has the model number of one with
//! two).
//!
//! Figures are per core and clock, for the widest vector the base
//! description uses (`vector_bits`): FMA instructions retired, their
//! latency, vector loads from L1, and bytes from L2 to L1. Sources:
//! Intel's Optimization Reference Manual (2023) and AMD's Software
//! Optimization Guides for families 17h, 19h and 1Ah [VENDOR]; uops.info
//! and Agner Fog's instruction tables and microarchitecture guide for
//! latencies and throughputs [UOPS]. The entries were written from what
//! those documents publish, not re-read figure by figure when the table
//! was made; where a figure is an estimate the entry's `note` says so. On
//! this project's machines only one entry was cross-checked by measurement
//! (Zen 4 at 256 bits: 8 FMA chains reach the peak, latency 4 × 2 units;
//! docs/performance.md).

/// One kind of core.
#[derive(Debug, PartialEq)]
pub struct CoreModel {
    /// The micro-architecture, as vendors name it.
    pub name: &'static str,
    vendor: &'static str,
    family: u32,
    /// Inclusive ranges of CPUID model numbers.
    models: &'static [(u32, u32)],
    /// FMA instructions retired per clock on 256-bit and on 512-bit
    /// vectors (0: the core has no 512-bit instructions).
    pub fma_per_clock_256: f64,
    pub fma_per_clock_512: f64,
    /// Cycles from an FMA's inputs to its result.
    pub fma_latency_cycles: f64,
    /// Vector loads per clock from L1 at 256 and at 512 bits.
    pub loads_per_clock_256: f64,
    pub loads_per_clock_512: f64,
    /// Bytes per clock a core fills from L2 into L1.
    pub l2_bytes_per_clock: f64,
    /// What the figures rest on, and what is estimated.
    pub note: &'static str,
}

impl CoreModel {
    /// FMA instructions per clock on `vector_bits`-bit vectors.
    pub fn fma_per_clock(&self, vector_bits: u32) -> f64 {
        if vector_bits > 256 { self.fma_per_clock_512 } else { self.fma_per_clock_256 }
    }

    /// Vector loads per clock from L1 on `vector_bits`-bit vectors.
    pub fn loads_per_clock(&self, vector_bits: u32) -> f64 {
        if vector_bits > 256 { self.loads_per_clock_512 } else { self.loads_per_clock_256 }
    }
}

const INTEL: &str = "GenuineIntel";
const AMD: &str = "AuthenticAMD";

/// The table, newest cores of each vendor first.
pub static CORES: &[CoreModel] = &[
    CoreModel {
        name: "Golden Cove / Raptor Cove (Sapphire, Emerald, Granite Rapids)",
        vendor: INTEL,
        family: 6,
        models: &[(0x8f, 0x8f), (0xcf, 0xcf), (0xad, 0xae)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 2.0,
        fma_latency_cycles: 4.0,
        loads_per_clock_256: 3.0,
        loads_per_clock_512: 2.0,
        l2_bytes_per_clock: 64.0,
        note: "two 512-bit FMA units (ports 0 and 5) [VENDOR]",
    },
    CoreModel {
        name: "Golden Cove / Raptor Cove P-core (Alder Lake, Raptor Lake)",
        vendor: INTEL,
        family: 6,
        models: &[(0x97, 0x97), (0x9a, 0x9a), (0xb7, 0xb7), (0xba, 0xba), (0xbf, 0xbf)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 0.0,
        fma_latency_cycles: 4.0,
        loads_per_clock_256: 3.0,
        loads_per_clock_512: 0.0,
        l2_bytes_per_clock: 64.0,
        note: "P-core figures; a thread on an E-core (Gracemont: two 128-bit FMA pipes) runs at about half the FMA rate [VENDOR]",
    },
    CoreModel {
        name: "Sunny Cove (Ice Lake-SP)",
        vendor: INTEL,
        family: 6,
        models: &[(0x6a, 0x6a), (0x6c, 0x6c)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 2.0,
        fma_latency_cycles: 4.0,
        loads_per_clock_256: 2.0,
        loads_per_clock_512: 2.0,
        l2_bytes_per_clock: 64.0,
        note: "two 512-bit FMA units [VENDOR]",
    },
    CoreModel {
        name: "Sunny Cove / Willow Cove / Cypress Cove (Ice Lake, Tiger Lake, Rocket Lake client)",
        vendor: INTEL,
        family: 6,
        models: &[(0x7d, 0x7e), (0x8c, 0x8d), (0xa7, 0xa7)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 1.0,
        fma_latency_cycles: 4.0,
        loads_per_clock_256: 2.0,
        loads_per_clock_512: 2.0,
        l2_bytes_per_clock: 64.0,
        note: "client parts fuse ports 0 and 1 into one 512-bit FMA unit and lack port 5's [VENDOR]",
    },
    CoreModel {
        name: "Skylake-SP / Cascade Lake / Cooper Lake",
        vendor: INTEL,
        family: 6,
        models: &[(0x55, 0x55)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 2.0,
        fma_latency_cycles: 4.0,
        loads_per_clock_256: 2.0,
        loads_per_clock_512: 2.0,
        l2_bytes_per_clock: 64.0,
        note: "two 512-bit FMA units on Gold 6xxx and Platinum; one on Bronze, Silver and some Gold 5xxx SKUs of the same model number, which the measured peak tells apart [VENDOR]",
    },
    CoreModel {
        name: "Skylake / Kaby Lake / Coffee Lake / Comet Lake (client)",
        vendor: INTEL,
        family: 6,
        models: &[(0x4e, 0x4e), (0x5e, 0x5e), (0x8e, 0x8e), (0x9e, 0x9e), (0xa5, 0xa6)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 0.0,
        fma_latency_cycles: 4.0,
        loads_per_clock_256: 2.0,
        loads_per_clock_512: 0.0,
        l2_bytes_per_clock: 64.0,
        note: "[VENDOR, UOPS]",
    },
    CoreModel {
        name: "Haswell / Broadwell",
        vendor: INTEL,
        family: 6,
        models: &[(0x3c, 0x3c), (0x3f, 0x3f), (0x45, 0x46), (0x3d, 0x3d), (0x47, 0x47), (0x4f, 0x4f), (0x56, 0x56)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 0.0,
        fma_latency_cycles: 5.0,
        loads_per_clock_256: 2.0,
        loads_per_clock_512: 0.0,
        l2_bytes_per_clock: 64.0,
        note: "FMA latency 5 [UOPS]",
    },
    CoreModel {
        name: "Zen 5",
        vendor: AMD,
        family: 0x1a,
        models: &[(0x00, 0x4f)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 2.0,
        fma_latency_cycles: 4.0,
        loads_per_clock_256: 3.0,
        loads_per_clock_512: 2.0,
        l2_bytes_per_clock: 64.0,
        note: "a full 512-bit data path on desktop and server parts; some mobile parts execute 512-bit ops in two halves, which the measured peak tells apart; load rates are estimates [VENDOR]",
    },
    CoreModel {
        name: "Zen 4",
        vendor: AMD,
        family: 0x19,
        models: &[(0x10, 0x1f), (0x60, 0x7f), (0xa0, 0xaf)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 1.0,
        fma_latency_cycles: 4.0,
        loads_per_clock_256: 2.0,
        loads_per_clock_512: 1.0,
        l2_bytes_per_clock: 32.0,
        note: "512-bit instructions execute as two 256-bit halves on the two FMA pipes [VENDOR]; the L2 rate is an estimate (Zen 3's)",
    },
    CoreModel {
        name: "Zen 3",
        vendor: AMD,
        family: 0x19,
        models: &[(0x00, 0x0f), (0x20, 0x5f)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 0.0,
        fma_latency_cycles: 4.0,
        loads_per_clock_256: 2.0,
        loads_per_clock_512: 0.0,
        l2_bytes_per_clock: 32.0,
        note: "[VENDOR, UOPS]",
    },
    CoreModel {
        name: "Zen 2",
        vendor: AMD,
        family: 0x17,
        models: &[(0x30, 0xff)],
        fma_per_clock_256: 2.0,
        fma_per_clock_512: 0.0,
        fma_latency_cycles: 5.0,
        loads_per_clock_256: 2.0,
        loads_per_clock_512: 0.0,
        l2_bytes_per_clock: 32.0,
        note: "FMA latency 5 [UOPS]",
    },
    CoreModel {
        name: "Zen / Zen+",
        vendor: AMD,
        family: 0x17,
        models: &[(0x00, 0x2f)],
        fma_per_clock_256: 1.0,
        fma_per_clock_512: 0.0,
        fma_latency_cycles: 5.0,
        loads_per_clock_256: 1.0,
        loads_per_clock_512: 0.0,
        l2_bytes_per_clock: 32.0,
        note: "256-bit instructions execute as two 128-bit halves [VENDOR]",
    },
];

/// The core of CPUID `vendor` (`vendor_id` of `/proc/cpuinfo`), `family`
/// and `model`, if the table knows it.
pub fn identify(vendor: &str, family: u32, model: u32) -> Option<&'static CoreModel> {
    CORES.iter().find(|c| c.vendor == vendor && c.family == family && c.models.iter().any(|&(lo, hi)| (lo..=hi).contains(&model)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_cores_are_found_by_their_cpuid() {
        // This project's machines: Zen 3 (EPYC 7B13, model 1), Zen 4 (EPYC
        // 9xx4, model 0x11), Ice Lake-SP (Xeon 8375C, model 0x6a).
        assert_eq!(identify("AuthenticAMD", 25, 1).map(|c| c.name), Some("Zen 3"));
        assert_eq!(identify("AuthenticAMD", 25, 0x11).map(|c| c.name), Some("Zen 4"));
        assert_eq!(identify("AuthenticAMD", 0x1a, 0x02).map(|c| c.name), Some("Zen 5"));
        assert_eq!(identify("GenuineIntel", 6, 0x6a).map(|c| c.name), Some("Sunny Cove (Ice Lake-SP)"));
        assert_eq!(identify("GenuineIntel", 6, 0x55).unwrap().fma_per_clock(512), 2.0);
        assert_eq!(identify("GenuineIntel", 6, 0x3f).unwrap().fma_latency_cycles, 5.0);
        assert_eq!(identify("GenuineIntel", 6, 0x01), None);
        assert_eq!(identify("HygonGenuine", 0x18, 0), None);
    }

    #[test]
    fn zen4_executes_512_bits_at_half_the_256_bit_rate() {
        let zen4 = identify("AuthenticAMD", 25, 0x11).unwrap();
        // The same FLOPs per clock either way: 2 x 8 lanes = 1 x 16.
        assert_eq!(zen4.fma_per_clock(256) * 8.0, zen4.fma_per_clock(512) * 16.0);
        let icx = identify("GenuineIntel", 6, 0x6a).unwrap();
        assert_eq!(icx.fma_per_clock(512) * 16.0, 2.0 * zen4.fma_per_clock(512) * 16.0);
    }

    #[test]
    fn the_table_is_consistent() {
        for (i, c) in CORES.iter().enumerate() {
            assert!(c.fma_per_clock_256 > 0.0 && c.loads_per_clock_256 > 0.0 && c.fma_latency_cycles > 0.0 && c.l2_bytes_per_clock > 0.0, "{}", c.name);
            assert_eq!(c.fma_per_clock_512 > 0.0, c.loads_per_clock_512 > 0.0, "{}: 512-bit FMAs and loads go together", c.name);
            assert!(c.models.iter().all(|(lo, hi)| lo <= hi), "{}", c.name);
            // No CPUID matches two entries.
            for d in &CORES[i + 1..] {
                let overlap = c.vendor == d.vendor && c.family == d.family && c.models.iter().any(|&(a, b)| d.models.iter().any(|&(x, y)| a <= y && x <= b));
                assert!(!overlap, "{} and {} overlap", c.name, d.name);
            }
        }
    }
}
